/*
 * hello.c - start-up cost: MPI_Init and MPI_Finalize only. Rank 0 prints 'hello NRANKS'
 * and '# library <first line of MPI_Get_library_version>'.
 * The runner measures the wall time of the whole 'mpirun -n 2 ./hello'.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(lib, &len);
        lib[len < MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING - 1] = 0;
        for (char *p = lib; *p; p++)
            if (*p == '\n') {
                *p = 0;
                break;
            }
        printf("hello %d\n# library %s\n", size, lib);
    }
    MPI_Finalize();
    return 0;
}
