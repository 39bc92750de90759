/*
 * bench.h - shared option parsing, buffers and iteration calibration of the benchmark
 * programs in this directory. Standard MPI only (compiles with any mpicc).
 *
 * Common options (every program):
 *   -a          allocate the message buffers with MPI_Alloc_mem instead of malloc
 *   -s LIST     message sizes in bytes, comma-separated (suffix k/m = KiB/MiB), e.g. 0,8,8k
 *   -m MIN -M MAX
 *               sweep: 0 (if MIN is 0) and every power of two from max(MIN,1) to MAX
 *   -t SECONDS  time budget per size (default 0.2): the iteration count is chosen from a
 *               calibration run so that one size takes about this long
 *   -i N        at most N timed iterations per size (default 1000000)
 *   -I N        at least N timed iterations per size (default 2)
 *   -w N        window (in-flight messages) of the streaming tests (default 64)
 *   -d          streaming tests: a distinct receive buffer per window slot (WINDOW * SIZE
 *               bytes) instead of one buffer shared by all pending receives (osu_bw style)
 *
 * Output: lines starting with '#' are comments ('# calib SIZE US' is printed, flushed,
 * after the calibration of each size, so that a runner killing a slow run still learns the
 * time of one operation, in µs, on the slowest rank). Every other line is data: 'SIZE VALUE ...', documented per
 * program. Only rank 0 prints.
 */
#ifndef BENCH_H
#define BENCH_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_MAX_SIZES 64

struct bench_opts {
    int alloc_mem;
    double budget;
    long max_iters;
    long min_iters;
    int window;
    int distinct;
    int nsizes;
    size_t sizes[BENCH_MAX_SIZES];
};

static size_t bench_parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'k' || *end == 'K')
        v <<= 10;
    else if (*end == 'm' || *end == 'M')
        v <<= 20;
    return (size_t)v;
}

static void bench_usage(const char *prog, const char *what)
{
    fprintf(stderr,
            "usage: %s [-a] [-d] [-s SIZES | -m MIN -M MAX] [-t SECONDS] [-i MAXITERS] "
            "[-I MINITERS] [-w WINDOW]\n%s\n",
            prog, what);
}

/* Parses the common options; default_sizes is a -s style list used when neither -s nor
 * -m/-M is given. Returns 0, or -1 after printing the usage (on rank 0). */
static int bench_parse(int argc, char **argv, struct bench_opts *o, const char *default_sizes,
                       const char *what)
{
    int rank;
    const char *list = default_sizes;
    size_t min = 0, max = 0;
    int sweep = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    memset(o, 0, sizeof *o);
    o->budget = 0.2;
    o->max_iters = 1000000;
    o->min_iters = 2;
    o->window = 64;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-a") == 0) {
            o->alloc_mem = 1;
            continue;
        }
        if (strcmp(a, "-d") == 0) {
            o->distinct = 1;
            continue;
        }
        if (!v || a[0] != '-' || strlen(a) != 2)
            goto bad;
        switch (a[1]) {
        case 's': list = v; sweep = 0; break;
        case 'm': min = bench_parse_size(v); sweep = 1; break;
        case 'M': max = bench_parse_size(v); sweep = 1; break;
        case 't': o->budget = atof(v); break;
        case 'i': o->max_iters = atol(v); break;
        case 'I': o->min_iters = atol(v); break;
        case 'w': o->window = atoi(v); break;
        default: goto bad;
        }
        i++;
    }
    if (o->min_iters < 1)
        o->min_iters = 1;
    if (o->max_iters < o->min_iters)
        o->max_iters = o->min_iters;
    if (o->window < 1)
        o->window = 1;
    if (sweep) {
        if (max < min)
            max = min;
        if (min == 0)
            o->sizes[o->nsizes++] = 0;
        for (size_t s = min ? min : 1; s <= max && o->nsizes < BENCH_MAX_SIZES; s *= 2)
            o->sizes[o->nsizes++] = s;
    } else {
        const char *p = list;
        while (*p && o->nsizes < BENCH_MAX_SIZES) {
            o->sizes[o->nsizes++] = bench_parse_size(p);
            p = strchr(p, ',');
            if (!p)
                break;
            p++;
        }
    }
    return 0;
bad:
    if (rank == 0)
        bench_usage(argv[0], what);
    return -1;
}

static size_t bench_max_size(const struct bench_opts *o)
{
    size_t m = 1;
    for (int i = 0; i < o->nsizes; i++)
        if (o->sizes[i] > m)
            m = o->sizes[i];
    return m;
}

static void *bench_alloc(const struct bench_opts *o, size_t bytes, int fill)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = 1;
    if (o->alloc_mem) {
        if (MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, &p) != MPI_SUCCESS)
            p = NULL;
    } else {
        p = malloc(bytes);
    }
    if (!p) {
        fprintf(stderr, "cannot allocate %zu bytes\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(p, fill, bytes); /* touch every page before timing */
    return p;
}

static void bench_free(const struct bench_opts *o, void *p)
{
    if (o->alloc_mem)
        MPI_Free_mem(p);
    else
        free(p);
}

/* One timed run of `iters` operations of `size` bytes on this rank; returns seconds. */
typedef double (*bench_fn)(long iters, size_t size, void *ctx);

/* Chooses the iteration count that fills the time budget. After a warm-up of a few
 * iterations, runs of growing length (x2 to x8) are timed until one takes a quarter of the
 * budget: a short run can be unrepresentative (a bcast root or an oversubscribed MPI may
 * get 20 calls through in one time slice and then slow down by orders of magnitude). The
 * time of a run is the slowest rank's (MPI_MAX), so every rank computes the same count.
 * Prints '# calib SIZE US' (time of one operation in the last run) on rank 0 after each
 * run, flushed. */
static long bench_calibrate(const struct bench_opts *o, bench_fn fn, size_t size, void *ctx)
{
    int rank;
    long n = size <= 65536 ? 20 : size <= (1u << 20) ? 5 : 2;
    double per;
    if (n > o->max_iters)
        n = o->max_iters;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fn(n, size, ctx); /* warm-up: connections, registration, caches */
    for (;;) {
        double t = fn(n, size, ctx), tmax = 0;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        per = tmax / (double)n;
        if (rank == 0) {
            printf("# calib %zu %.3f\n", size, per * 1e6);
            fflush(stdout);
        }
        if (tmax >= o->budget / 4 || n >= o->max_iters)
            break;
        double grow = tmax > 0 ? o->budget / 4 / tmax : 8;
        grow = grow > 8 ? 8 : grow < 2 ? 2 : grow;
        n = (long)((double)n * grow);
        if (n > o->max_iters)
            n = o->max_iters;
    }
    double want = per > 0 ? o->budget / per : (double)o->max_iters;
    long m = want > (double)o->max_iters ? o->max_iters : (long)want;
    return m < o->min_iters ? o->min_iters : m;
}

#endif
