/* Errors are returned, with the right classes, under MPI_ERRORS_RETURN. */
#include <mpi.h>
#include <string.h>
#include "capi_check.h"

int main(int argc, char **argv) {
    int x[2] = {1, 2}, y = 0, tag_ub = 0, flag = 0, len = 0, cls = -1;
    int *tag_ub_p = NULL;
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    MPI_Request req = (MPI_Request)0x2c7fffff;
    char msg[MPI_MAX_ERROR_STRING];

    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Errhandler_set(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    OK(MPI_Comm_get_errhandler(MPI_COMM_SELF, &eh));
    CHECK(eh == MPI_ERRORS_RETURN);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub_p, &flag));
    tag_ub = *tag_ub_p;

    EXPECT_CLASS(MPI_Send(x, 1, MPI_INT, 7, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Send(x, 1, MPI_INT, -5, 0, MPI_COMM_SELF), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Send(x, -1, MPI_INT, 0, 0, MPI_COMM_SELF), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Send(x, 1, MPI_INT, 0, tag_ub + 1, MPI_COMM_SELF), MPI_ERR_TAG);
    EXPECT_CLASS(MPI_Send(x, 1, MPI_INT, 0, -3, MPI_COMM_SELF), MPI_ERR_TAG);
    EXPECT_CLASS(MPI_Send(x, 1, MPI_INT, 0, 0, (MPI_Comm)0x12345678), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Send(x, 1, MPI_INT, 0, 0, MPI_COMM_NULL), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Send(x, 1, (MPI_Datatype)0x4c00ffff, 0, 0, MPI_COMM_SELF), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Send(x, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_SELF), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Isend(x, 1, MPI_INT, 3, 0, MPI_COMM_SELF, &req), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Irecv(x, -2, MPI_INT, 0, 0, MPI_COMM_SELF, &req), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Recv(x, 1, MPI_INT, 0, 0, MPI_COMM_SELF, NULL), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Recv(x, 1, MPI_INT, 0, tag_ub + 1, MPI_COMM_SELF, MPI_STATUS_IGNORE),
                 MPI_ERR_TAG);
    EXPECT_CLASS(MPI_Sendrecv(x, 1, MPI_INT, 9, 0, &y, 1, MPI_INT, 0, 0, MPI_COMM_SELF,
                              MPI_STATUS_IGNORE), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Comm_rank((MPI_Comm)42, &y), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Comm_size(MPI_COMM_NULL, &y), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Comm_rank(MPI_COMM_WORLD, NULL), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Wait(&req, MPI_STATUS_IGNORE), MPI_ERR_REQUEST);
    req = (MPI_Request)7;
    EXPECT_CLASS(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), MPI_ERR_REQUEST);
    EXPECT_CLASS(MPI_Allreduce(x, &y, 1, MPI_INT, (MPI_Op)0x1234, MPI_COMM_SELF), MPI_ERR_OP);
    EXPECT_CLASS(MPI_Allreduce(x, &y, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_SELF), MPI_ERR_OP);
    EXPECT_CLASS(MPI_Allreduce(x, &y, 1, MPI_BYTE, MPI_SUM, MPI_COMM_SELF), MPI_ERR_OP);
    EXPECT_CLASS(MPI_Reduce(x, &y, 1, MPI_INT, MPI_SUM, 3, MPI_COMM_SELF), MPI_ERR_ROOT);
    EXPECT_CLASS(MPI_Bcast(x, 1, MPI_INT, -4, MPI_COMM_SELF), MPI_ERR_ROOT);
    EXPECT_CLASS(MPI_Comm_set_errhandler(MPI_COMM_SELF, (MPI_Errhandler)5), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Type_size((MPI_Datatype)99, &y), MPI_ERR_TYPE);

    /* Truncation: two ints into a one-int buffer. */
    OK(MPI_Isend(x, 2, MPI_INT, 0, 8, MPI_COMM_SELF, &req));
    EXPECT_CLASS(MPI_Recv(&y, 1, MPI_INT, 0, 8, MPI_COMM_SELF, MPI_STATUS_IGNORE),
                 MPI_ERR_TRUNCATE);
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));

    /* Error strings and classes. */
    OK(MPI_Error_string(MPI_ERR_RANK, msg, &len));
    CHECK(len == (int)strlen(msg) && strstr(msg, "rank") != NULL);
    printf("MPI_ERR_RANK: %s\n", msg);
    OK(MPI_Error_class(MPI_ERR_TAG, &cls));
    CHECK(cls == MPI_ERR_TAG);
    OK(MPI_Error_string(MPI_SUCCESS, msg, &len));
    CHECK(len > 0);

    /* Back to fatal, then the handler is reported again. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL);
    OK(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL);

    OK(MPI_Finalize());
    printf("OK\n");
    return 0;
}
