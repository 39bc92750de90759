/*
 * coll.h - driver shared by the collective benchmarks (allreduce.c, bcast.c, barrier.c).
 *
 * Every rank times ITERATIONS back-to-back calls of the collective (no barrier between
 * them, as in the OSU benchmarks) after a calibration; the per-call time of each rank is
 * reduced to rank 0.
 * Data line per size:  SIZE AVG_US MIN_US MAX_US ITERATIONS
 *   AVG_US/MIN_US/MAX_US  mean/min/max over ranks of (elapsed / ITERATIONS), microseconds
 * Options: see bench.h.
 */
#ifndef COLL_H
#define COLL_H
#include "bench.h"

struct ctx {
    int rank;
    char *sbuf, *rbuf;
};

static double coll_run(long iters, size_t size, void *p);

static int coll_main(int argc, char **argv, const char *name, const char *default_sizes)
{
    struct bench_opts o;
    struct ctx c;
    int nranks;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (bench_parse(argc, argv, &o, default_sizes, name)) {
        MPI_Finalize();
        return 1;
    }
    size_t max = bench_max_size(&o);
    c.sbuf = bench_alloc(&o, max, 0);
    c.rbuf = bench_alloc(&o, max, 0);
    /* doubles 1.0 everywhere: sums stay exact */
    for (size_t i = 0; i + sizeof(double) <= max; i += sizeof(double)) {
        double one = 1.0;
        memcpy(c.sbuf + i, &one, sizeof one);
    }
    if (c.rank == 0)
        printf("# %s ranks %d\n# %s size_bytes avg_us min_us max_us iterations\n", name,
               nranks, name);
    for (int k = 0; k < o.nsizes; k++) {
        size_t s = o.sizes[k];
        long n = bench_calibrate(&o, coll_run, s, &c);
        double t = coll_run(n, s, &c) / (double)n;
        double sum = 0, mn = 0, mx = 0;
        MPI_Reduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&t, &mn, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&t, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (c.rank == 0) {
            printf("%zu %.4f %.4f %.4f %ld\n", s, sum / nranks * 1e6, mn * 1e6, mx * 1e6, n);
            fflush(stdout);
        }
    }
    bench_free(&o, c.sbuf);
    bench_free(&o, c.rbuf);
    MPI_Finalize();
    return 0;
}
#endif
