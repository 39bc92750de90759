/* The C interface on several ranks (run under mpirun): statuses and MPI_Get_count of
 * messages from other ranks, MPI_ANY_SOURCE, MPI_Waitall, MPI_Sendrecv around a ring,
 * collectives with MPI_IN_PLACE, and per-communicator error handlers. */
#include <mpi.h>
#include <string.h>
#include "capi_check.h"

int main(int argc, char **argv) {
    int rank, size, i, count, right, left, flag;
    int buf[64];
    long lsum;
    double d;
    MPI_Status st;

    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 2);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;

    /* Everyone sends rank+1 ints to rank 0 with tag = rank; rank 0 receives from any. */
    if (rank != 0) {
        for (i = 0; i <= rank; i++) buf[i] = rank * 100 + i;
        OK(MPI_Send(buf, rank + 1, MPI_INT, 0, rank, MPI_COMM_WORLD));
    } else {
        int seen = 0;
        for (i = 1; i < size; i++) {
            OK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            OK(MPI_Get_count(&st, MPI_INT, &count));
            CHECK(count == st.MPI_SOURCE + 1 && st.MPI_TAG == st.MPI_SOURCE);
            memset(buf, 0, sizeof buf);
            OK(MPI_Recv(buf, 64, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st));
            OK(MPI_Get_count(&st, MPI_INT, &count));
            CHECK(count == st.MPI_SOURCE + 1);
            CHECK(buf[count - 1] == st.MPI_SOURCE * 100 + count - 1);
            seen |= 1 << st.MPI_SOURCE;
        }
        CHECK(seen == ((1 << size) - 2));
    }
    /* Nobody sends the ring messages below before rank 0 has probed all of the above. */
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Ring with Sendrecv and with Isend/Irecv/Waitall. */
    OK(MPI_Sendrecv(&rank, 1, MPI_INT, right, 7, &i, 1, MPI_INT, left, 7, MPI_COMM_WORLD, &st));
    CHECK(i == left && st.MPI_SOURCE == left && st.MPI_TAG == 7);
    {
        MPI_Request r[2];
        MPI_Status s[2];
        int in = -1;
        OK(MPI_Irecv(&in, 1, MPI_INT, left, 9, MPI_COMM_WORLD, &r[0]));
        OK(MPI_Isend(&rank, 1, MPI_INT, right, 9, MPI_COMM_WORLD, &r[1]));
        OK(MPI_Waitall(2, r, s));
        CHECK(in == left && s[0].MPI_SOURCE == left && s[0].MPI_ERROR == MPI_SUCCESS);
        CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL);
    }

    /* Collectives. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    d = (rank == 1) ? 3.25 : 0.0;
    OK(MPI_Bcast(&d, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD));
    CHECK(d == 3.25);
    lsum = rank + 1;
    OK(MPI_Allreduce(MPI_IN_PLACE, &lsum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    CHECK(lsum == (long)size * (size + 1) / 2);
    i = rank;
    count = -1;
    OK(MPI_Reduce(&i, &count, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD));
    if (rank == 0) CHECK(count == size - 1);
    if (rank == size - 1) {
        i = 5;
        OK(MPI_Reduce(MPI_IN_PLACE, &i, 1, MPI_INT, MPI_MIN, size - 1, MPI_COMM_WORLD));
        CHECK(i == 0);
    } else {
        i = rank;
        OK(MPI_Reduce(&i, NULL, 1, MPI_INT, MPI_MIN, size - 1, MPI_COMM_WORLD));
    }

    /* Error handlers are per communicator. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK(MPI_Send(&i, 1, MPI_INT, size, 0, MPI_COMM_WORLD) == MPI_ERR_RANK);
    CHECK(MPI_Iprobe(size + 3, 0, MPI_COMM_WORLD, &flag, &st) == MPI_ERR_RANK);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    OK(MPI_Finalize());
    printf("rank %d OK\n", rank);
    return 0;
}
