/* A window of large (rendezvous) messages in flight at once, as osu_bw / osu_bibw post it:
 *
 *   window <shared|distinct> <uni|bidir> [rounds]
 *
 * Each round, the receiver posts WINDOW MPI_Irecv of LEN bytes, then waits for all of them;
 * the sender posts WINDOW MPI_Isend. With "shared", every receive of a round goes into the
 * SAME buffer (overlapping receive buffers, legal MPI: the data is the same in all messages
 * of a round, so the buffer is checked afterwards) and every send comes from one buffer;
 * with "distinct", receive w lands at rbuf + w * LEN and message w of a round has its own
 * pattern. "uni": rank 0 sends, rank 1 receives and acknowledges each round with a small
 * message; "bidir": both ranks send and receive a window at once. Buffers come from malloc
 * (registered per request, not the MPI heap). 2 ranks. */
#include "common.h"
#include <string.h>

#define WINDOW 64
#define LEN (256 * 1024)

static size_t seed_of(int round, int w, int shared, int from)
{
    return (size_t)round * 1000u + (size_t)from * 100u + (shared ? 0u : (size_t)w + 1u);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 2, "needs 2 ranks, got %d", size);
    CHECK(argc >= 3, "usage: window <shared|distinct> <uni|bidir> [rounds]");
    int shared = strcmp(argv[1], "shared") == 0;
    CHECK(shared || strcmp(argv[1], "distinct") == 0, "bad mode %s", argv[1]);
    int bidir = strcmp(argv[2], "bidir") == 0;
    CHECK(bidir || strcmp(argv[2], "uni") == 0, "bad direction %s", argv[2]);
    int rounds = argc > 3 ? atoi(argv[3]) : 4;
    CHECK(rounds > 0, "bad rounds %s", argc > 3 ? argv[3] : "");

    int peer = 1 - rank;
    int sends = bidir || rank == 0;
    int recvs = bidir || rank == 1;
    size_t nbuf = shared ? 1 : WINDOW;
    unsigned char *sbuf = malloc(nbuf * LEN);
    unsigned char *rbuf = malloc(nbuf * LEN);
    MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * WINDOW);
    MPI_Status *st = malloc(sizeof(MPI_Status) * 2 * WINDOW);
    CHECK(sbuf && rbuf && req && st, "out of memory");

    for (int round = 0; round < rounds; round++) {
        int n = 0;
        memset(rbuf, 0, nbuf * LEN);
        if (sends)
            for (size_t w = 0; w < nbuf; w++)
                fill(sbuf + w * LEN, LEN, seed_of(round, (int)w, shared, rank));
        if (recvs)
            for (int w = 0; w < WINDOW; w++)
                MPI_Irecv(rbuf + (shared ? 0 : (size_t)w * LEN), LEN, MPI_BYTE, peer, 1,
                          MPI_COMM_WORLD, &req[n++]);
        if (sends)
            for (int w = 0; w < WINDOW; w++)
                MPI_Isend(sbuf + (shared ? 0 : (size_t)w * LEN), LEN, MPI_BYTE, peer, 1,
                          MPI_COMM_WORLD, &req[n++]);
        int rc = MPI_Waitall(n, req, st);
        CHECK(rc == MPI_SUCCESS, "round %d: MPI_Waitall returned %d", round, rc);
        if (recvs) {
            for (int w = 0; w < WINDOW; w++) {
                int count = -1;
                MPI_Get_count(&st[w], MPI_BYTE, &count);
                CHECK(count == LEN, "round %d receive %d: count %d", round, w, count);
                CHECK(st[w].MPI_SOURCE == peer && st[w].MPI_TAG == 1,
                      "round %d receive %d: source %d tag %d", round, w, st[w].MPI_SOURCE,
                      st[w].MPI_TAG);
            }
            for (size_t w = 0; w < nbuf; w++) {
                long bad = verify(rbuf + w * LEN, LEN, seed_of(round, (int)w, shared, peer));
                CHECK(bad < 0, "round %d buffer %zu: byte %ld wrong", round, w, bad);
            }
        }
        if (!bidir) {
            /* osu_bw's acknowledgement: the sender's next round starts after it. */
            int ack = round;
            if (rank == 1)
                MPI_Send(&ack, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
            else {
                MPI_Recv(&ack, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                CHECK(ack == round, "ack %d in round %d", ack, round);
            }
        }
    }
    free(sbuf);
    free(rbuf);
    free(req);
    free(st);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("window ok %s %s %d rounds\n", argv[1], argv[2], rounds);
    MPI_Finalize();
    return 0;
}
