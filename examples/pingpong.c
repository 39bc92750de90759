/*
 * pingpong.c - MPI ping-pong between ranks 0 and 1.
 *
 * Prints one row per message size (0 B, 1 B, 2 B, ... up to the maximum, default 4 MiB):
 *   bytes, iterations, latency in microseconds (half of the mean round trip), and
 *   bandwidth in MB/s (10^6 bytes per second, bytes / latency).
 *
 * Usage: mpirun -n 2 ./pingpong [max_bytes] [-a]
 *   max_bytes  largest message size (default 4194304)
 *   -a         allocate the buffers with MPI_Alloc_mem instead of malloc
 * Ranks other than 0 and 1 only take part in the final barrier. Started alone (one rank),
 * rank 0 plays both sides through MPI_COMM_SELF (MPI_Irecv + MPI_Send + MPI_Wait), which
 * measures the self path.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int iterations_for(size_t bytes)
{
    if (bytes <= 1024)
        return 10000;
    if (bytes <= 65536)
        return 2000;
    if (bytes <= 1048576)
        return 200;
    return 50;
}

int main(int argc, char **argv)
{
    int rank, size;
    size_t max_bytes = 4u << 20;
    int use_alloc_mem = 0;
    char *sbuf, *rbuf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-a") == 0)
            use_alloc_mem = 1;
        else
            max_bytes = (size_t)strtoull(argv[i], NULL, 10);
    }
    size_t alloc = max_bytes ? max_bytes : 1;
    if (use_alloc_mem) {
        if (MPI_Alloc_mem((MPI_Aint)alloc, MPI_INFO_NULL, &sbuf) != MPI_SUCCESS ||
            MPI_Alloc_mem((MPI_Aint)alloc, MPI_INFO_NULL, &rbuf) != MPI_SUCCESS)
            MPI_Abort(MPI_COMM_WORLD, 2);
    } else {
        sbuf = malloc(alloc);
        rbuf = malloc(alloc);
        if (!sbuf || !rbuf)
            MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(sbuf, rank + 1, max_bytes);
    memset(rbuf, 0, max_bytes);

    if (rank == 0) {
        printf("# ping-pong, %d ranks, buffers from %s\n", size, use_alloc_mem ? "MPI_Alloc_mem" : "malloc");
        printf("%10s %8s %14s %14s\n", "bytes", "iters", "latency_us", "bandwidth_MBps");
    }
    for (size_t bytes = 0; bytes <= max_bytes; bytes = bytes ? bytes * 2 : 1) {
        int iters = iterations_for(bytes);
        int warmup = iters / 10 + 1;
        double t0 = 0.0;
        if (rank <= 1) {
            int peer = 1 - rank;
            for (int i = 0; i < iters + warmup; i++) {
                if (i == warmup)
                    t0 = MPI_Wtime();
                if (size == 1) {
                    for (int leg = 0; leg < 2; leg++) {
                        MPI_Request req;
                        MPI_Irecv(rbuf, (int)bytes, MPI_BYTE, 0, 1, MPI_COMM_SELF, &req);
                        MPI_Send(sbuf, (int)bytes, MPI_BYTE, 0, 1, MPI_COMM_SELF);
                        MPI_Wait(&req, MPI_STATUS_IGNORE);
                    }
                } else if (rank == 0) {
                    MPI_Send(sbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                    MPI_Recv(rbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(rbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(sbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                }
            }
            if (rank == 0) {
                double lat = (MPI_Wtime() - t0) / iters / 2.0;
                double bw = bytes ? (double)bytes / lat / 1e6 : 0.0;
                printf("%10zu %8d %14.3f %14.1f\n", bytes, iters, lat * 1e6, bw);
                fflush(stdout);
            }
        }
        if (bytes == max_bytes)
            break;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (use_alloc_mem) {
        MPI_Free_mem(sbuf);
        MPI_Free_mem(rbuf);
    } else {
        free(sbuf);
        free(rbuf);
    }
    MPI_Finalize();
    return 0;
}
