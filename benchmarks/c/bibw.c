/*
 * bibw.c - bidirectional streaming bandwidth between ranks 0 and 1 (like osu_bibw).
 *
 * Per iteration each of ranks 0 and 1 posts WINDOW MPI_Irecv from the other (into one
 * buffer) and WINDOW MPI_Isend to the other (from one buffer), then MPI_Waitall.
 * Data line per size:  SIZE BANDWIDTH_MBPS ITERATIONS
 *   BANDWIDTH_MBPS  2 * SIZE * WINDOW * ITERATIONS / elapsed (both directions summed),
 *                   MB/s (10^6 bytes per second)
 * Default sizes: 1 B ... 4 MiB (powers of two); window 64 (-w); -d: a distinct receive
 * buffer per window slot (WINDOW * SIZE bytes).
 * Options: see bench.h.
 */
#include "bench.h"

struct ctx {
    int rank, window;
    int distinct; /* -d: receive slot w at rbuf + w * SIZE; else all at rbuf */
    char *sbuf, *rbuf;
    MPI_Request *req;
};

static double run(long iters, size_t size, void *p)
{
    struct ctx *c = p;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (c->rank < 2) {
        int peer = 1 - c->rank;
        for (long i = 0; i < iters; i++) {
            for (int w = 0; w < c->window; w++)
                MPI_Irecv(c->rbuf + (c->distinct ? (size_t)w * size : 0), (int)size,
                          MPI_BYTE, peer, 4, MPI_COMM_WORLD, &c->req[w]);
            for (int w = 0; w < c->window; w++)
                MPI_Isend(c->sbuf, (int)size, MPI_BYTE, peer, 4, MPI_COMM_WORLD,
                          &c->req[c->window + w]);
            MPI_Waitall(2 * c->window, c->req, MPI_STATUSES_IGNORE);
        }
    }
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    struct ctx c;
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (bench_parse(argc, argv, &o, "1,2,4,8,16,32,64,128,256,512,1k,2k,4k,8k,16k,32k,64k,"
                    "128k,256k,512k,1m,2m,4m", "bidirectional bandwidth (2 ranks)") ||
        size < 2) {
        if (size < 2 && c.rank == 0)
            fprintf(stderr, "bibw needs at least 2 ranks\n");
        MPI_Finalize();
        return 1;
    }
    size_t max = bench_max_size(&o);
    c.window = o.window;
    c.req = malloc(sizeof(MPI_Request) * 2 * (size_t)o.window);
    c.sbuf = bench_alloc(&o, max, 'a' + c.rank);
    c.distinct = o.distinct;
    c.rbuf = bench_alloc(&o, o.distinct ? max * (size_t)o.window : max, 0);
    if (c.rank == 0)
        printf("# bibw window %d distinct %d\n# bibw size_bytes bandwidth_MBps iterations\n",
               o.window, o.distinct);
    for (int k = 0; k < o.nsizes; k++) {
        size_t s = o.sizes[k];
        long n = bench_calibrate(&o, run, s, &c);
        double t = run(n, s, &c);
        if (c.rank == 0) {
            printf("%zu %.2f %ld\n", s, 2.0 * (double)s * c.window * (double)n / t / 1e6, n);
            fflush(stdout);
        }
    }
    bench_free(&o, c.sbuf);
    bench_free(&o, c.rbuf);
    free(c.req);
    MPI_Finalize();
    return 0;
}
