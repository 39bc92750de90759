/* A burst of mixed small and large messages with the same tag is received in order, both
 * when the receives are posted first and when the messages arrive unexpected. 2 ranks. */
#include "common.h"
#include <string.h>

#define N 200

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t e = eager_limit();
    size_t big = 4 * e + 100;
    unsigned char *bufs = malloc(N * big);
    MPI_Request reqs[N];
    for (int mode = 0; mode < 2; mode++) { /* 0: receives posted first; 1: unexpected */
        if (rank == 0) {
            if (mode == 0)
                MPI_Recv(NULL, 0, MPI_BYTE, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int i = 0; i < N; i++) {
                size_t n = (i % 3 == 1) ? big : (size_t)(i % 17) + 4;
                unsigned char *p = bufs + (size_t)i * big;
                fill(p, n, (size_t)i);
                memcpy(p, &i, sizeof i);
                MPI_Isend(p, (int)n, MPI_BYTE, 1, 5, MPI_COMM_WORLD, &reqs[i]);
            }
            if (mode == 0) {
                MPI_Waitall(N, reqs, MPI_STATUSES_IGNORE);
                MPI_Send(NULL, 0, MPI_BYTE, 1, 98, MPI_COMM_WORLD);
            } else {
                /* The marker goes after the burst in issue order; the large sends can only
                 * complete once rank 1 has posted its receives, after the marker. */
                MPI_Send(NULL, 0, MPI_BYTE, 1, 98, MPI_COMM_WORLD);
                MPI_Waitall(N, reqs, MPI_STATUSES_IGNORE);
            }
        } else if (rank == 1) {
            if (mode == 0) {
                for (int i = 0; i < N; i++)
                    MPI_Irecv(bufs + (size_t)i * big, (int)big, MPI_BYTE, 0, 5, MPI_COMM_WORLD,
                              &reqs[i]);
                MPI_Send(NULL, 0, MPI_BYTE, 0, 99, MPI_COMM_WORLD);
                MPI_Status sts[N];
                MPI_Waitall(N, reqs, sts);
                for (int i = 0; i < N; i++) {
                    size_t n = (i % 3 == 1) ? big : (size_t)(i % 17) + 4;
                    int seq, count;
                    memcpy(&seq, bufs + (size_t)i * big, sizeof seq);
                    MPI_Get_count(&sts[i], MPI_BYTE, &count);
                    CHECK(seq == i, "posted: receive %d got message %d", i, seq);
                    CHECK(count == (int)n, "posted: message %d count %d != %zu", i, count, n);
                    long bad = verify_from(bufs + (size_t)i * big, sizeof seq, n, (size_t)i);
                    CHECK(bad < 0, "posted: message %d byte %ld wrong", i, bad);
                }
                MPI_Recv(NULL, 0, MPI_BYTE, 0, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                /* Wait for the "all sent" marker first: the burst is all unexpected. */
                MPI_Recv(NULL, 0, MPI_BYTE, 0, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (int i = 0; i < N; i++) {
                    size_t n = (i % 3 == 1) ? big : (size_t)(i % 17) + 4;
                    MPI_Status st;
                    int seq, count;
                    unsigned char *p = bufs + (size_t)i * big;
                    MPI_Recv(p, (int)big, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &st);
                    memcpy(&seq, p, sizeof seq);
                    MPI_Get_count(&st, MPI_BYTE, &count);
                    CHECK(seq == i, "unexpected: receive %d got message %d", i, seq);
                    CHECK(count == (int)n, "unexpected: message %d count %d", i, count);
                    long bad = verify_from(p, sizeof seq, n, (size_t)i);
                    CHECK(bad < 0, "unexpected: message %d byte %ld wrong", i, bad);
                }
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 1)
        printf("order ok\n");
    free(bufs);
    MPI_Finalize();
    return 0;
}
