/* Bad input under the default error handler (MPI_ERRORS_ARE_FATAL): rank 0 makes one
 * erroneous call chosen by argv[1]; the job must print the function and the error and exit
 * non-zero promptly, while rank 1 waits in a receive that never matches.
 * Cases: rank, count, tag, comm, type, recvrank, root. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, x = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *c = argc > 1 ? argv[1] : "rank";
    if (rank == 0) {
        if (strcmp(c, "rank") == 0)
            MPI_Send(&x, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD);
        else if (strcmp(c, "count") == 0)
            MPI_Send(&x, -1, MPI_INT, 1, 0, MPI_COMM_WORLD);
        else if (strcmp(c, "tag") == 0) {
            int *ub, flag;
            MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
            MPI_Send(&x, 1, MPI_INT, 1, *ub + 1, MPI_COMM_WORLD);
        } else if (strcmp(c, "comm") == 0)
            MPI_Send(&x, 1, MPI_INT, 1, 0, (MPI_Comm)0x12345678);
        else if (strcmp(c, "type") == 0)
            MPI_Send(&x, 1, (MPI_Datatype)0x12345678, 1, 0, MPI_COMM_WORLD);
        else if (strcmp(c, "recvrank") == 0)
            MPI_Recv(&x, 1, MPI_INT, -7, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else if (strcmp(c, "root") == 0)
            MPI_Bcast(&x, 1, MPI_INT, size, MPI_COMM_WORLD);
        printf("badarg: the erroneous call returned\n");
        fflush(stdout);
    } else if (rank == 1) {
        MPI_Recv(&x, 1, MPI_INT, 0, 12345, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    return 0;
}
