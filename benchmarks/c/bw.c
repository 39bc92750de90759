/*
 * bw.c - streaming (uni-directional) bandwidth between ranks 0 and 1 (like osu_bw).
 *
 * Per iteration rank 0 starts WINDOW MPI_Isend of SIZE bytes (all from the same buffer),
 * rank 1 has WINDOW MPI_Irecv posted (all into the same buffer, as osu_bw does), both
 * MPI_Waitall, then rank 1 returns a 4-byte acknowledgement.
 * Data line per size:  SIZE BANDWIDTH_MBPS ITERATIONS
 *   BANDWIDTH_MBPS  SIZE * WINDOW * ITERATIONS / elapsed, MB/s (10^6 bytes per second)
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
    int ack = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        if (c->rank == 0) {
            for (int w = 0; w < c->window; w++)
                MPI_Isend(c->sbuf, (int)size, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &c->req[w]);
            MPI_Waitall(c->window, c->req, MPI_STATUSES_IGNORE);
            MPI_Recv(&ack, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (c->rank == 1) {
            for (int w = 0; w < c->window; w++)
                MPI_Irecv(c->rbuf + (c->distinct ? (size_t)w * size : 0), (int)size,
                          MPI_BYTE, 0, 2, MPI_COMM_WORLD, &c->req[w]);
            MPI_Waitall(c->window, c->req, MPI_STATUSES_IGNORE);
            MPI_Send(&ack, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
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
                    "128k,256k,512k,1m,2m,4m", "streaming bandwidth (2 ranks)") ||
        size < 2) {
        if (size < 2 && c.rank == 0)
            fprintf(stderr, "bw needs at least 2 ranks\n");
        MPI_Finalize();
        return 1;
    }
    size_t max = bench_max_size(&o);
    c.window = o.window;
    c.req = malloc(sizeof(MPI_Request) * (size_t)o.window);
    c.sbuf = bench_alloc(&o, max, 'a' + c.rank);
    c.distinct = o.distinct;
    c.rbuf = bench_alloc(&o, o.distinct ? max * (size_t)o.window : max, 0);
    if (c.rank == 0)
        printf("# bw window %d distinct %d\n# bw size_bytes bandwidth_MBps iterations\n",
               o.window, o.distinct);
    for (int k = 0; k < o.nsizes; k++) {
        size_t s = o.sizes[k];
        long n = bench_calibrate(&o, run, s, &c);
        double t = run(n, s, &c);
        if (c.rank == 0) {
            printf("%zu %.2f %ld\n", s, (double)s * c.window * (double)n / t / 1e6, n);
            fflush(stdout);
        }
    }
    bench_free(&o, c.sbuf);
    bench_free(&o, c.rbuf);
    free(c.req);
    MPI_Finalize();
    return 0;
}
