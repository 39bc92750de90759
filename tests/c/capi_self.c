/* Point-to-point through MPI_COMM_SELF and collectives on a single rank. */
#include <mpi.h>
#include <string.h>
#include "capi_check.h"

int main(int argc, char **argv) {
    int a[4] = {1, 2, 3, 4}, b[4] = {0, 0, 0, 0};
    int count = -7, flag = -1, i;
    double d[3] = {1.5, 2.5, 3.5}, e[3];
    MPI_Status st;
    MPI_Request req[2];
    void *mem = NULL;

    OK(MPI_Init(&argc, &argv));

    /* Isend + Recv with a status. */
    OK(MPI_Isend(a, 3, MPI_INT, 0, 11, MPI_COMM_SELF, &req[0]));
    CHECK(req[0] != MPI_REQUEST_NULL);
    st.MPI_ERROR = 12345;
    OK(MPI_Recv(b, 4, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &st));
    CHECK(b[0] == 1 && b[1] == 2 && b[2] == 3 && b[3] == 0);
    CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 11);
    CHECK(st.count_lo == 12 && st.count_hi_and_cancelled == 0);
    OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 3);
    OK(MPI_Get_count(&st, MPI_BYTE, &count));
    CHECK(count == 12);
    OK(MPI_Get_count(&st, MPI_DOUBLE, &count));
    CHECK(count == MPI_UNDEFINED);
    OK(MPI_Get_count(&st, MPI_SHORT, &count));
    CHECK(count == 6);
    OK(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
    CHECK(req[0] == MPI_REQUEST_NULL);

    /* MPI_Wait / MPI_Test on MPI_REQUEST_NULL: empty status. */
    st.MPI_SOURCE = st.MPI_TAG = 99;
    OK(MPI_Wait(&req[0], &st));
    CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG);
    OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 0);
    OK(MPI_Test(&req[0], &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 1);

    /* Iprobe / Probe, then receive doubles with MPI_Irecv + MPI_Test loop. */
    OK(MPI_Iprobe(0, 5, MPI_COMM_SELF, &flag, &st));
    CHECK(flag == 0);
    OK(MPI_Isend(d, 3, MPI_DOUBLE, 0, 5, MPI_COMM_SELF, &req[0]));
    OK(MPI_Probe(0, 5, MPI_COMM_SELF, &st));
    OK(MPI_Get_count(&st, MPI_DOUBLE, &count));
    CHECK(count == 3 && st.MPI_TAG == 5);
    do {
        OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE));
    } while (!flag);
    OK(MPI_Irecv(e, 3, MPI_DOUBLE, 0, 5, MPI_COMM_SELF, &req[1]));
    flag = 0;
    while (!flag) OK(MPI_Test(&req[1], &flag, &st));
    CHECK(req[1] == MPI_REQUEST_NULL && e[0] == 1.5 && e[2] == 3.5);
    OK(MPI_Waitall(1, req, MPI_STATUSES_IGNORE));
    CHECK(req[0] == MPI_REQUEST_NULL);

    /* Waitall with statuses, one null request among them. */
    {
        MPI_Request r3[3];
        MPI_Status s3[3];
        int x = 77, y = 0;
        OK(MPI_Irecv(&y, 1, MPI_INT, 0, 3, MPI_COMM_SELF, &r3[0]));
        r3[1] = MPI_REQUEST_NULL;
        OK(MPI_Isend(&x, 1, MPI_INT, 0, 3, MPI_COMM_SELF, &r3[2]));
        OK(MPI_Waitall(3, r3, s3));
        CHECK(y == 77);
        CHECK(r3[0] == MPI_REQUEST_NULL && r3[1] == MPI_REQUEST_NULL && r3[2] == MPI_REQUEST_NULL);
        CHECK(s3[0].MPI_SOURCE == 0 && s3[0].MPI_TAG == 3 && s3[0].MPI_ERROR == MPI_SUCCESS);
        OK(MPI_Get_count(&s3[0], MPI_INT, &count));
        CHECK(count == 1);
        CHECK(s3[1].MPI_SOURCE == MPI_ANY_SOURCE && s3[1].MPI_TAG == MPI_ANY_TAG);
    }

    /* Sendrecv to self, and to MPI_PROC_NULL. */
    memset(b, 0, sizeof b);
    OK(MPI_Sendrecv(a, 4, MPI_INT, 0, 1, b, 4, MPI_INT, 0, 1, MPI_COMM_SELF, &st));
    CHECK(b[3] == 4 && st.MPI_SOURCE == 0 && st.MPI_TAG == 1);
    OK(MPI_Sendrecv(a, 4, MPI_INT, MPI_PROC_NULL, 1, b, 4, MPI_INT, MPI_PROC_NULL, 1,
                    MPI_COMM_SELF, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
    OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 0);

    /* Collectives on one rank. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Barrier(MPI_COMM_SELF));
    OK(MPI_Bcast(a, 4, MPI_INT, 0, MPI_COMM_SELF));
    memset(b, 0, sizeof b);
    OK(MPI_Reduce(a, b, 4, MPI_INT, MPI_SUM, 0, MPI_COMM_SELF));
    CHECK(b[0] == 1 && b[3] == 4);
    memset(b, 0, sizeof b);
    OK(MPI_Allreduce(a, b, 4, MPI_INT, MPI_MAX, MPI_COMM_SELF));
    CHECK(b[2] == 3);
    for (i = 0; i < 3; i++) e[i] = d[i];
    OK(MPI_Allreduce(MPI_IN_PLACE, e, 3, MPI_DOUBLE, MPI_PROD, MPI_COMM_SELF));
    CHECK(e[1] == 2.5);
    OK(MPI_Reduce(MPI_IN_PLACE, e, 3, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_SELF));
    CHECK(e[0] == 1.5);

    /* Memory. */
    OK(MPI_Alloc_mem(4096, MPI_INFO_NULL, &mem));
    CHECK(mem != NULL);
    memset(mem, 0xab, 4096);
    OK(MPI_Free_mem(mem));

    OK(MPI_Finalize());
    printf("OK\n");
    return 0;
}
