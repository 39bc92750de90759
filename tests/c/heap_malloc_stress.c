/*
 * heap_malloc_stress.c - large messages between malloc'ed buffers (meant for
 * MPI_HEAP_MALLOC=1, correct either way): every rank sends K messages of random sizes
 * (0 .. 8 MiB) to every other rank, tag = sequence number, from separately malloc'ed
 * buffers (MPI_Isend); receivers take them with MPI_ANY_SOURCE / MPI_ANY_TAG, in phase 1
 * by MPI_Probe + malloc(exact size) + MPI_Recv, in phase 2 into pre-posted MPI_Irecv
 * buffers of 8 MiB. Checked: per source the tags arrive in order (non-overtaking), the
 * size, and a checksum of the contents (pattern seeded by source, destination, phase and
 * sequence number). Prints "stress ok <messages> <bytes>" on rank 0.
 *
 * Usage: mpirun -n 4 ./heap_malloc_stress [K]   (default K = 6)
 */
#include "common.h"
#include <stdint.h>
#include <string.h>

#define MAXN (8u << 20)

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

/* Size of message seq from src to dst in phase ph: a quarter small (eager), the rest up
 * to 8 MiB. */
static size_t msg_size(int src, int dst, int ph, int seq)
{
    uint64_t h = mix(((uint64_t)src << 48) ^ ((uint64_t)dst << 32) ^ ((uint64_t)ph << 24) ^
                     (uint64_t)seq);
    if (h % 4 == 0)
        return (size_t)((h >> 8) % 40000);
    return (size_t)((h >> 8) % (MAXN + 1));
}

static size_t seed_of(int src, int dst, int ph, int seq)
{
    return (size_t)(src * 1000003 + dst * 10007 + ph * 101 + seq);
}

static void check_msg(const unsigned char *buf, size_t got, int src, int tag, int me, int ph,
                      int *next)
{
    CHECK(tag == next[src], "phase %d: from %d tag %d, expected %d (order)", ph, src, tag,
          next[src]);
    size_t want = msg_size(src, me, ph, tag);
    CHECK(got == want, "phase %d: from %d tag %d: %zu bytes, expected %zu", ph, src, tag, got,
          want);
    long bad = verify_from(buf, 0, got, seed_of(src, me, ph, tag));
    CHECK(bad < 0, "phase %d: from %d tag %d: byte %ld wrong", ph, src, tag, bad);
    next[src]++;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int K = argc > 1 ? atoi(argv[1]) : 6;
    int nsend = K * (size - 1);
    long long bytes = 0;
    int *next = malloc(sizeof(int) * (size_t)size);
    MPI_Request *sreq = malloc(sizeof(MPI_Request) * (size_t)nsend);
    MPI_Request *rreq = malloc(sizeof(MPI_Request) * (size_t)nsend);
    unsigned char **sbuf = malloc(sizeof(void *) * (size_t)nsend);
    unsigned char **rbuf = malloc(sizeof(void *) * (size_t)nsend);

    for (int ph = 0; ph < 2; ph++) {
        memset(next, 0, sizeof(int) * (size_t)size);
        if (ph == 1)
            for (int i = 0; i < nsend; i++) {
                rbuf[i] = malloc(MAXN);
                CHECK(rbuf[i] != NULL, "malloc receive buffer");
                MPI_Irecv(rbuf[i], (int)MAXN, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                          MPI_COMM_WORLD, &rreq[i]);
            }
        MPI_Barrier(MPI_COMM_WORLD);
        int k = 0;
        for (int seq = 0; seq < K; seq++)
            for (int d = 1; d < size; d++) {
                int dst = (rank + d) % size;
                size_t n = msg_size(rank, dst, ph, seq);
                sbuf[k] = malloc(n ? n : 1);
                CHECK(sbuf[k] != NULL, "malloc send buffer");
                fill(sbuf[k], n, seed_of(rank, dst, ph, seq));
                MPI_Isend(sbuf[k], (int)n, MPI_BYTE, dst, seq, MPI_COMM_WORLD, &sreq[k]);
                k++;
            }
        for (int i = 0; i < nsend; i++) {
            MPI_Status st;
            int got;
            if (ph == 0) {
                MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_BYTE, &got);
                unsigned char *b = malloc(got ? (size_t)got : 1);
                CHECK(b != NULL, "malloc probe buffer");
                MPI_Recv(b, got, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st);
                check_msg(b, (size_t)got, st.MPI_SOURCE, st.MPI_TAG, rank, ph, next);
                free(b);
            } else {
                /* Posted receives match in posting order: request i gets the i-th arrival. */
                MPI_Wait(&rreq[i], &st);
                MPI_Get_count(&st, MPI_BYTE, &got);
                check_msg(rbuf[i], (size_t)got, st.MPI_SOURCE, st.MPI_TAG, rank, ph, next);
                free(rbuf[i]);
            }
            bytes += got;
        }
        MPI_Waitall(nsend, sreq, MPI_STATUSES_IGNORE);
        for (int i = 0; i < nsend; i++)
            free(sbuf[i]);
        for (int s = 0; s < size; s++)
            CHECK(s == rank || next[s] == K, "phase %d: %d messages from %d", ph, next[s], s);
    }
    long long total = 0;
    MPI_Reduce(&bytes, &total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("stress ok %d %lld\n", 2 * nsend * size, total);
    free(next);
    free(sreq);
    free(rreq);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
