/*
 * allreduce.c - MPI_Allreduce latency: SIZE/8 doubles summed (MPI_DOUBLE, MPI_SUM), any
 * number of ranks. Default sizes: 8 B and 1 MiB. Output: see coll.h.
 */
#include "coll.h"

static double coll_run(long iters, size_t size, void *p)
{
    struct ctx *c = p;
    int count = (int)(size / sizeof(double));
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++)
        MPI_Allreduce(c->sbuf, c->rbuf, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
    return coll_main(argc, argv, "allreduce", "8,1m");
}
