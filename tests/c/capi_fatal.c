/* The default error handler (MPI_ERRORS_ARE_FATAL) and calls outside Init..Finalize.
 * argv[1] selects the case; every case must end the process with a non-zero status. */
#include <mpi.h>
#include <string.h>
#include "capi_check.h"

int main(int argc, char **argv) {
    int x = 1;
    const char *what = argc > 1 ? argv[1] : "rank";

    if (strcmp(what, "before_init") == 0) {
        MPI_Send(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        printf("not reached\n");
        return 0;
    }
    OK(MPI_Init(&argc, &argv));
    if (strcmp(what, "rank") == 0) {
        MPI_Send(&x, 1, MPI_INT, 7, 0, MPI_COMM_WORLD);
    } else if (strcmp(what, "comm") == 0) {
        MPI_Send(&x, 1, MPI_INT, 0, 0, (MPI_Comm)0x12345);
    } else if (strcmp(what, "type") == 0) {
        MPI_Recv(&x, 1, (MPI_Datatype)0x777, 0, 0, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    } else if (strcmp(what, "self_return") == 0) {
        /* MPI_COMM_SELF returns errors, MPI_COMM_WORLD still aborts. */
        OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
        CHECK(MPI_Send(&x, 1, MPI_INT, 3, 0, MPI_COMM_SELF) == MPI_ERR_RANK);
        printf("self returned\n");
        fflush(stdout);
        MPI_Allreduce(&x, &x, 1, MPI_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    } else if (strcmp(what, "abort") == 0) {
        MPI_Abort(MPI_COMM_WORLD, 3);
    } else if (strcmp(what, "after_finalize") == 0) {
        OK(MPI_Finalize());
        MPI_Send(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
    }
    printf("not reached\n");
    return 0;
}
