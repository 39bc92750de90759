/* Helpers shared by the test programs: a failing check prints where and aborts the job. */
#ifndef TEST_COMMON_H
#define TEST_COMMON_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            int r_;                                                                        \
            MPI_Comm_rank(MPI_COMM_WORLD, &r_);                                            \
            fprintf(stderr, "CHECK FAILED rank %d %s:%d: %s: ", r_, __FILE__, __LINE__,   \
                    #cond);                                                                \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                  \
        }                                                                                  \
    } while (0)

static inline unsigned char pattern(size_t i, size_t seed)
{
    return (unsigned char)((i * 7u + seed * 13u + 1u) & 0xffu);
}

static inline void fill(unsigned char *p, size_t n, size_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pattern(i, seed);
}

/* Index of the first wrong byte in [from, n), or -1. */
static inline long verify_from(const unsigned char *p, size_t from, size_t n, size_t seed)
{
    for (size_t i = from; i < n; i++)
        if (p[i] != pattern(i, seed))
            return (long)i;
    return -1;
}

/* Index of the first wrong byte, or -1. */
static inline long verify(const unsigned char *p, size_t n, size_t seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pattern(i, seed))
            return (long)i;
    return -1;
}

static inline size_t eager_limit(void)
{
    const char *e = getenv("MPI_EAGER_LIMIT");
    return e ? (size_t)strtoull(e, NULL, 10) : 16384;
}
#endif
