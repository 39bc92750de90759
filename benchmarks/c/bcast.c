/*
 * bcast.c - MPI_Bcast latency of SIZE bytes (MPI_BYTE) from rank 0, any number of ranks.
 * Default sizes: 8 B and 1 MiB. Output: see coll.h.
 */
#include "coll.h"

static double coll_run(long iters, size_t size, void *p)
{
    struct ctx *c = p;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++)
        MPI_Bcast(c->sbuf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD);
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
    return coll_main(argc, argv, "bcast", "8,1m");
}
