/*
 * barrier.c - MPI_Barrier latency, any number of ranks. The size column is always 0.
 * Output: see coll.h.
 */
#include "coll.h"

static double coll_run(long iters, size_t size, void *p)
{
    (void)size;
    (void)p;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
    return coll_main(argc, argv, "barrier", "0");
}
