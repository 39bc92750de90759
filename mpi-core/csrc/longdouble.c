/*
 * MPI_LONG_DOUBLE reduction kernels for mpi-core (Rust has no `long double`).
 *
 * inout[i] = inout[i] op in[i] for n elements. Pointers need not be aligned: elements
 * are moved with memcpy (16 bytes each on x86_64 / aarch64 Linux). `in` may equal
 * `inout` (MPI_IN_PLACE) but they may not overlap partially.
 * MIN/MAX use MPICH's `inout < in ? inout : in` so that every rank gets the same bits.
 */
#include <stddef.h>
#include <string.h>

#define LD_KERNEL(name, expr)                                                  \
    void name(const void *in, void *inout, size_t n)                           \
    {                                                                          \
        const unsigned char *a = (const unsigned char *)in;                    \
        unsigned char *c = (unsigned char *)inout;                             \
        for (size_t i = 0; i < n; i++) {                                       \
            long double x, o, r;                                               \
            memcpy(&x, a + i * sizeof(long double), sizeof(long double));      \
            memcpy(&o, c + i * sizeof(long double), sizeof(long double));      \
            r = (expr);                                                        \
            memcpy(c + i * sizeof(long double), &r, sizeof(long double));      \
        }                                                                      \
    }

LD_KERNEL(mpicore_ld_sum, o + x)
LD_KERNEL(mpicore_ld_prod, o * x)
LD_KERNEL(mpicore_ld_min, o < x ? o : x)
LD_KERNEL(mpicore_ld_max, o > x ? o : x)

/* Conversions for mpi-core's unit tests (also unaligned-safe). */
void mpicore_ld_from_double(double d, void *out)
{
    long double v = d;
    memset(out, 0, sizeof(long double)); /* x87: 6 padding bytes */
    memcpy(out, &v, sizeof(long double));
}

double mpicore_ld_to_double(const void *in)
{
    long double v;
    memcpy(&v, in, sizeof(long double));
    return (double)v;
}

/* Compile-time check: the Rust side (Datatype::size) assumes 16-byte elements. */
typedef char mpicore_ld_size_is_16[sizeof(long double) == 16 ? 1 : -1];
