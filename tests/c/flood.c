/* Flow control: rank 0 sends 100 000 short messages (MPI_Isend) to rank 1, which posts no
 * receive for them until all were sent (it first waits for a "done" message with another
 * tag, sent after MPI_Waitall). All must arrive intact and in order. 2 ranks. */
#include "common.h"
#include <string.h>

#define N 100000
#define LEN 24

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        unsigned char *bufs = malloc((size_t)N * LEN);
        MPI_Request *reqs = malloc(sizeof(MPI_Request) * N);
        for (int i = 0; i < N; i++) {
            unsigned char *p = bufs + (size_t)i * LEN;
            fill(p, LEN, (size_t)i);
            memcpy(p, &i, sizeof i);
            MPI_Isend(p, LEN, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &reqs[i]);
        }
        MPI_Waitall(N, reqs, MPI_STATUSES_IGNORE);
        MPI_Send(NULL, 0, MPI_BYTE, 1, 2, MPI_COMM_WORLD);
        free(bufs);
        free(reqs);
    } else if (rank == 1) {
        MPI_Recv(NULL, 0, MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        unsigned char p[LEN];
        for (int i = 0; i < N; i++) {
            MPI_Status st;
            int seq, count;
            MPI_Recv(p, LEN, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_BYTE, &count);
            memcpy(&seq, p, sizeof seq);
            CHECK(count == LEN, "message %d count %d", i, count);
            CHECK(seq == i, "receive %d got message %d", i, seq);
            long bad = verify_from(p, sizeof seq, LEN, (size_t)i);
            CHECK(bad < 0, "message %d byte %ld wrong", i, bad);
        }
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        CHECK(!flag, "a message too many");
        printf("flood ok: %d messages\n", N);
    }
    MPI_Finalize();
    return 0;
}
