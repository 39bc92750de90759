/* For the crash test: every rank writes its pid to <dir>/<rank>.pid, then all loop in
 * barriers and allreduces for up to 120 s. The test SIGKILLs one rank. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc > 1) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%d.pid", argv[1], rank);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%d\n", (int)getpid());
            fclose(f);
        }
    }
    double t0 = MPI_Wtime();
    while (MPI_Wtime() - t0 < 120.0) {
        int in = 1, out = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        usleep(1000);
    }
    MPI_Finalize();
    return 0;
}
