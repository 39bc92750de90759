/*
 * pingpong.c - blocking ping-pong between ranks 0 and 1 (like osu_latency).
 *
 * Rank 0 sends SIZE bytes to rank 1 with MPI_Send, rank 1 returns them, repeated.
 * Data line per size:  SIZE LATENCY_US BANDWIDTH_MBPS ITERATIONS
 *   LATENCY_US      half of the mean round-trip time, microseconds
 *   BANDWIDTH_MBPS  SIZE / LATENCY, in MB/s (10^6 bytes per second)
 * Default sizes: 0 and 1 B ... 4 MiB (powers of two). Ranks above 1 only wait.
 * Options: see bench.h.
 */
#include "bench.h"

struct ctx {
    int rank;
    char *sbuf, *rbuf;
};

static double run(long iters, size_t size, void *p)
{
    struct ctx *c = p;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (c->rank == 0) {
        for (long i = 0; i < iters; i++) {
            MPI_Send(c->sbuf, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(c->rbuf, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    } else if (c->rank == 1) {
        for (long i = 0; i < iters; i++) {
            MPI_Recv(c->rbuf, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(c->sbuf, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
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
    if (bench_parse(argc, argv, &o, "0,1,2,4,8,16,32,64,128,256,512,1k,2k,4k,8k,16k,32k,64k,"
                    "128k,256k,512k,1m,2m,4m", "ping-pong latency/bandwidth (2 ranks)") ||
        size < 2) {
        if (size < 2 && c.rank == 0)
            fprintf(stderr, "pingpong needs at least 2 ranks\n");
        MPI_Finalize();
        return 1;
    }
    size_t max = bench_max_size(&o);
    c.sbuf = bench_alloc(&o, max, 'a' + c.rank);
    c.rbuf = bench_alloc(&o, max, 0);
    if (c.rank == 0)
        printf("# pingpong size_bytes latency_us bandwidth_MBps iterations\n");
    for (int k = 0; k < o.nsizes; k++) {
        size_t s = o.sizes[k];
        long n = bench_calibrate(&o, run, s, &c);
        double t = run(n, s, &c);
        if (c.rank == 0) {
            double lat = t / (double)n / 2.0;
            printf("%zu %.4f %.2f %ld\n", s, lat * 1e6, lat > 0 ? (double)s / lat / 1e6 : 0.0,
                   n);
            fflush(stdout);
        }
    }
    bench_free(&o, c.sbuf);
    bench_free(&o, c.rbuf);
    MPI_Finalize();
    return 0;
}
