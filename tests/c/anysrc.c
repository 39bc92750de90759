/* MPI_ANY_SOURCE / MPI_ANY_TAG receives from 3 senders (per-sender order kept, status
 * right), then MPI_Probe / MPI_Iprobe followed by a receive of exactly the probed size.
 * 4 ranks; rank 0 receives. */
#include "common.h"
#include <string.h>

#define K 60

static size_t msg_len(int src, int i, size_t e)
{
    return (i % 5 == 4) ? e * 2 + (size_t)src : (size_t)(i * 3 + src) % 200 + 4;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 4, "needs 4 ranks");
    size_t e = eager_limit();
    size_t cap = 2 * e + 64;
    unsigned char *buf = malloc(cap);
    /* Phase 1: wildcard receives. */
    if (rank == 0) {
        int next[4] = {0, 0, 0, 0};
        for (int m = 0; m < 3 * K; m++) {
            MPI_Status st;
            int count, seq;
            MPI_Recv(buf, (int)cap, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            int src = st.MPI_SOURCE;
            CHECK(src >= 1 && src <= 3, "source %d", src);
            memcpy(&seq, buf, sizeof seq);
            CHECK(seq == next[src], "from %d: got message %d, expected %d", src, seq, next[src]);
            CHECK(st.MPI_TAG == src * 1000 + seq, "tag %d for message %d of %d", st.MPI_TAG, seq, src);
            MPI_Get_count(&st, MPI_BYTE, &count);
            CHECK(count == (int)msg_len(src, seq, e), "count %d", count);
            long bad = verify_from(buf, sizeof seq, (size_t)count, (size_t)(src * 1000 + seq));
            CHECK(bad < 0, "from %d message %d byte %ld", src, seq, bad);
            next[src]++;
        }
    } else {
        for (int i = 0; i < K; i++) {
            size_t n = msg_len(rank, i, e);
            fill(buf, n, (size_t)(rank * 1000 + i));
            memcpy(buf, &i, sizeof i);
            MPI_Send(buf, (int)n, MPI_BYTE, 0, rank * 1000 + i, MPI_COMM_WORLD);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* Phase 2: probe, then receive exactly the probed size (small and large). */
    for (int round = 0; round < 2; round++) {
        if (rank == 0) {
            for (int m = 0; m < 3; m++) {
                MPI_Status st;
                int count, flag = 0;
                if (round == 0) {
                    MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
                } else {
                    while (!flag)
                        MPI_Iprobe(MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, &flag, &st);
                }
                MPI_Get_count(&st, MPI_BYTE, &count);
                size_t want = round == 0 ? 100 + (size_t)st.MPI_SOURCE : e * 3 + (size_t)st.MPI_SOURCE;
                CHECK(count == (int)want, "probed count %d, expected %zu", count, want);
                unsigned char *exact = malloc((size_t)count + 1);
                MPI_Status st2;
                MPI_Recv(exact, count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st2);
                CHECK(st2.MPI_SOURCE == st.MPI_SOURCE && st2.MPI_TAG == st.MPI_TAG, "status changed");
                long bad = verify(exact, (size_t)count, (size_t)st.MPI_SOURCE);
                CHECK(bad < 0, "probed message byte %ld", bad);
                free(exact);
            }
        } else {
            size_t n = round == 0 ? 100 + (size_t)rank : e * 3 + (size_t)rank;
            unsigned char *p = malloc(n);
            fill(p, n, (size_t)rank);
            MPI_Send(p, (int)n, MPI_BYTE, 0, round == 0 ? rank : 77, MPI_COMM_WORLD);
            free(p);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("anysrc ok\n");
    free(buf);
    MPI_Finalize();
    return 0;
}
