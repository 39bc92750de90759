/*
 * heap_malloc.c - the interposed C allocator (MPI_HEAP_MALLOC, mpi-capi/src/malloc.rs).
 *
 * Usage: mpirun -n 2 ./heap_malloc on|off|any
 *   on   large blocks allocated after MPI_Init must lie in this rank's shared-memory segment
 *        (a mapping of /dev/shm/mpirs-*), small ones and blocks from before MPI_Init not
 *   off  no block may lie in the segment
 *   any  no location check (e.g. MPI_DEVICE=tcp, where the heap is anonymous memory)
 * Checks calloc zeroing, realloc across the arena boundary keeping contents, alignment
 * functions, free(NULL), concurrent malloc/free from threads before and after MPI_Init,
 * malloc before MPI_Init + free after MPI_Finalize, use of arena blocks after
 * MPI_Finalize, fork, and large messages between malloc'ed buffers.
 * Rank 0 prints "big <ptr>" for one large block (the test compares it with the arena range
 * MPI_PRINT_SETTINGS=1 prints) and "heap_malloc ok" at the end.
 */
#define _GNU_SOURCE
#include "common.h"
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The realloc checks compare addresses of blocks on purpose. */
#pragma GCC diagnostic ignored "-Wuse-after-free"

#define BIG (1u << 20)
static int mode_on, mode_off;

/* Whether p lies in a mapping whose path names one of our shared-memory segments. */
static int in_segment(const void *p)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int found = 0;
    uintptr_t a = (uintptr_t)p;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi) {
            found = strstr(line, "/mpirs-") != NULL;
            break;
        }
    }
    fclose(f);
    return found;
}

static void expect_heap(const void *p, int want, const char *what)
{
    int in = in_segment(p);
    if (mode_on)
        CHECK(in == want, "%s %p: in segment %d, expected %d", what, p, in, want);
    if (mode_off)
        CHECK(!in, "%s %p is in the segment with MPI_HEAP_MALLOC off", what, p);
}

/* Threads: malloc/free random sizes, each block written and checked. */
static void *churn(void *arg)
{
    unsigned s = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    void *keep[8] = {0};
    size_t keep_n[8] = {0};
    for (int i = 0; i < 400; i++) {
        s = s * 1103515245u + 12345u;
        size_t n = (s >> 8) % (s & 1 ? 3000 : 600000) + 1;
        int k = (s >> 4) & 7;
        if (keep[k]) {
            unsigned char *q = keep[k];
            if (q[0] != (unsigned char)k || q[keep_n[k] - 1] != (unsigned char)(k + 1)) {
                fprintf(stderr, "thread block corrupted\n");
                abort();
            }
            free(keep[k]);
        }
        unsigned char *p = (i & 3) == 0 ? calloc(1, n) : malloc(n);
        if (!p) {
            fprintf(stderr, "thread malloc(%zu) failed\n", n);
            abort();
        }
        p[0] = (unsigned char)k;
        p[n - 1] = (unsigned char)(k + 1);
        keep[k] = p;
        keep_n[k] = n;
    }
    for (int k = 0; k < 8; k++)
        free(keep[k]);
    return NULL;
}

static void run_threads(void)
{
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, churn, (void *)i) != 0)
            abort();
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
}

int main(int argc, char **argv)
{
    int rank, size, provided;
    const char *mode = argc > 1 ? argv[1] : "any";
    mode_on = strcmp(mode, "on") == 0;
    mode_off = strcmp(mode, "off") == 0;

    /* Before MPI_Init: glibc's. */
    run_threads();
    unsigned char *pre = malloc(BIG);
    fill(pre, BIG, 1);

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    expect_heap(pre, 0, "block from before MPI_Init");

    /* malloc: large in the heap, small not. */
    unsigned char *big = malloc(BIG);
    CHECK(big != NULL, "malloc");
    expect_heap(big, 1, "malloc(1 MiB)");
    CHECK(malloc_usable_size(big) >= BIG, "usable %zu", malloc_usable_size(big));
    if (rank == 0)
        printf("big %p\n", (void *)big);
    char *small = malloc(100);
    expect_heap(small, 0, "malloc(100)");
    strcpy(small, "small");
    char *dup = strdup(small); /* glibc's internal malloc call, freed by ours */
    CHECK(strcmp(dup, "small") == 0, "strdup");
    free(dup);
    free(small);
    free(NULL);

    /* calloc zeroes, also a recycled block. */
    memset(big, 0xff, BIG);
    free(big);
    unsigned char *z = calloc(BIG / 8, 8);
    CHECK(z != NULL, "calloc");
    expect_heap(z, 1, "calloc(1 MiB)");
    for (size_t i = 0; i < BIG; i++)
        CHECK(z[i] == 0, "calloc byte %zu = %d", i, z[i]);
    free(z);
    volatile size_t huge = SIZE_MAX / 2;
    errno = 0;
    CHECK(calloc(huge, 4) == NULL && errno == ENOMEM, "calloc overflow");

    /* realloc across the boundary keeps the contents. */
    unsigned char *r = malloc(1000);
    fill(r, 1000, 2);
    r = realloc(r, 2 * BIG); /* glibc -> arena */
    CHECK(r && verify_from(r, 0, 1000, 2) < 0, "realloc up keeps contents");
    expect_heap(r, 1, "realloc(2 MiB)");
    fill(r, 2 * BIG, 3);
    r = realloc(r, 4 * BIG); /* arena -> arena, grows */
    CHECK(r && verify_from(r, 0, 2 * BIG, 3) < 0, "realloc grow keeps contents");
    expect_heap(r, 1, "realloc(4 MiB)");
    uintptr_t before = (uintptr_t)r;
    r = realloc(r, 3 * BIG); /* shrinks in place */
    CHECK(r && verify_from(r, 0, 2 * BIG, 3) < 0, "realloc shrink keeps contents");
    if (mode_on)
        CHECK((uintptr_t)r == before, "realloc shrink by a quarter stays in place");
    r = realloc(r, 500); /* arena -> glibc */
    CHECK(r && verify_from(r, 0, 500, 3) < 0, "realloc down keeps contents");
    expect_heap(r, 0, "realloc(500)");
    r = realloc(r, 0); /* frees (glibc semantics) */
    unsigned char *ra = realloc(NULL, BIG);
    expect_heap(ra, 1, "realloc(NULL, 1 MiB)");
    ra = reallocarray(ra, 2, BIG);
    expect_heap(ra, 1, "reallocarray(2, 1 MiB)");
    free(ra);

    /* Alignment functions. */
    size_t aligns[] = {8, 64, 4096, 1u << 16, 1u << 21};
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        void *p = NULL;
        CHECK(posix_memalign(&p, aligns[i], BIG + 3) == 0, "posix_memalign %zu", aligns[i]);
        CHECK((uintptr_t)p % aligns[i] == 0, "posix_memalign(%zu) gave %p", aligns[i], p);
        expect_heap(p, 1, "posix_memalign");
        memset(p, 1, BIG + 3);
        free(p);
        p = aligned_alloc(aligns[i], BIG);
        CHECK(p && (uintptr_t)p % aligns[i] == 0, "aligned_alloc(%zu) gave %p", aligns[i], p);
        expect_heap(p, 1, "aligned_alloc");
        free(p);
        p = memalign(aligns[i], 10);
        CHECK(p && (uintptr_t)p % aligns[i] == 0, "memalign(%zu, 10) gave %p", aligns[i], p);
        free(p);
    }
    void *bad = NULL;
    CHECK(posix_memalign(&bad, 24, BIG) == EINVAL, "posix_memalign(24) must be EINVAL");
    void *v = valloc(BIG);
    CHECK(v && (uintptr_t)v % 4096 == 0, "valloc");
    expect_heap(v, 1, "valloc");
    free(v);
    v = pvalloc(BIG + 1);
    CHECK(v && (uintptr_t)v % 4096 == 0 && malloc_usable_size(v) >= BIG + 4096, "pvalloc");
    free(v);

    /* Threads after MPI_Init (arena and glibc blocks, concurrently with MPI calls). */
    run_threads();

    /* fork: the child must neither allocate from nor free into the parent's arena. */
    unsigned char *keep = malloc(BIG);
    fill(keep, BIG, 4);
    pid_t pid = fork();
    if (pid == 0) {
        unsigned char *c = malloc(BIG);
        memset(c, 9, BIG);
        int bad_c = in_segment(c);
        free(keep);
        free(c);
        _exit(bad_c ? 7 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child status %d", st);
    unsigned char *after = malloc(BIG);
    fill(after, BIG, 5);
    CHECK(verify_from(keep, 0, BIG, 4) < 0, "block freed by the fork child got reused");

    /* Large messages between malloc'ed buffers, both directions. */
    for (size_t n = 40000; n <= 8u << 20; n *= 3) {
        unsigned char *s = malloc(n), *d = malloc(n);
        fill(s, n, n + (size_t)rank);
        memset(d, 0, n);
        int peer = rank ^ 1;
        if (peer < size) {
            MPI_Sendrecv(s, (int)n, MPI_BYTE, peer, 7, d, (int)n, MPI_BYTE, peer, 7,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            long bad_at = verify_from(d, 0, n, n + (size_t)peer);
            CHECK(bad_at < 0, "message of %zu bytes wrong at %ld", n, bad_at);
        }
        free(s);
        free(d);
    }

    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();

    /* After MPI_Finalize: arena blocks stay usable, new ones come from glibc. */
    CHECK(verify_from(after, 0, BIG, 5) < 0, "arena block after MPI_Finalize");
    after = realloc(after, 3 * BIG);
    CHECK(after && verify_from(after, 0, BIG, 5) < 0, "realloc after MPI_Finalize");
    free(after);
    free(keep);
    unsigned char *post = malloc(BIG);
    CHECK(!in_segment(post), "malloc after MPI_Finalize is in the segment");
    free(post);
    CHECK(verify_from(pre, 0, BIG, 1) < 0, "block from before MPI_Init");
    free(pre);
    run_threads();
    if (rank == 0)
        printf("heap_malloc ok\n");
    return 0;
}
