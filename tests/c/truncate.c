/* Truncation under MPI_ERRORS_RETURN: a receive buffer too small for an eager and for a
 * rendezvous message gives MPI_ERR_TRUNCATE, and the next message still arrives intact.
 * 2 ranks. */
#include "common.h"
#include <string.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    size_t e = eager_limit();
    size_t sizes[2] = {100, 3 * e + 11};
    unsigned char *big = malloc(3 * e + 64);
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k];
        if (rank == 0) {
            fill(big, n, (size_t)k);
            CHECK(MPI_Send(big, (int)n, MPI_BYTE, 1, 10 + k, MPI_COMM_WORLD) == MPI_SUCCESS, "send");
            fill(big, 4, 99);
            CHECK(MPI_Send(big, 4, MPI_BYTE, 1, 20 + k, MPI_COMM_WORLD) == MPI_SUCCESS, "send");
        } else if (rank == 1) {
            unsigned char small[10];
            MPI_Status st;
            int rc = MPI_Recv(small, 10, MPI_BYTE, 0, 10 + k, MPI_COMM_WORLD, &st);
            int cls = -1;
            MPI_Error_class(rc, &cls);
            CHECK(cls == MPI_ERR_TRUNCATE, "size %zu into 10 bytes: class %d, not MPI_ERR_TRUNCATE", n, cls);
            unsigned char four[4];
            rc = MPI_Recv(four, 4, MPI_BYTE, 0, 20 + k, MPI_COMM_WORLD, &st);
            CHECK(rc == MPI_SUCCESS, "next receive rc %d", rc);
            CHECK(verify(four, 4, 99) < 0, "next message intact");
        }
    }
    if (rank == 1)
        printf("truncate ok\n");
    free(big);
    MPI_Finalize();
    return 0;
}
