/* Barrier / allreduce / bcast loop with checked results; run with more ranks than cores.
 * Usage: loop [iterations] (default 2000). */
#include "common.h"

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        long in = rank + i, out = -1;
        MPI_Allreduce(&in, &out, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        long want = (long)size * (size - 1) / 2 + (long)size * i;
        CHECK(out == want, "iteration %d: allreduce %ld != %ld", i, out, want);
        double d = rank == i % size ? i * 0.5 : -1.0;
        MPI_Bcast(&d, 1, MPI_DOUBLE, i % size, MPI_COMM_WORLD);
        CHECK(d == i * 0.5, "iteration %d: bcast %g", i, d);
    }
    double t = MPI_Wtime() - t0;
    if (rank == 0)
        printf("loop ok: %d ranks, %d iterations, %.1f us per iteration\n", size, iters, t / iters * 1e6);
    MPI_Finalize();
    return 0;
}
