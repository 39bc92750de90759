/* Every size class (0 B, below / at / above the eager limit, several MiB) arrives intact
 * with the right status source, tag and count, for MPI_BYTE and MPI_INT. Needs 2 ranks. */
#include "common.h"
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs 2 ranks");
    size_t e = eager_limit();
    size_t sizes[] = {0, 1, 7, e > 1 ? e - 1 : 0, e, e + 1, 2 * e + 5, 65536, (5u << 20) + 3};
    int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    size_t maxn = (5u << 20) + 64;
    unsigned char *buf = malloc(maxn);
    CHECK(buf != NULL, "malloc");
    for (int k = 0; k < nsizes; k++) {
        size_t n = sizes[k];
        for (int bigger = 0; bigger < 2; bigger++) {
            int tag = 100 + 2 * k + bigger;
            if (rank == 0) {
                fill(buf, n, (size_t)tag);
                MPI_Send(buf, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
            } else if (rank == 1) {
                MPI_Status st;
                memset(buf, 0xEE, maxn);
                size_t cap = bigger ? n + 17 : n;
                MPI_Recv(buf, (int)cap, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st);
                int count;
                MPI_Get_count(&st, MPI_BYTE, &count);
                CHECK(st.MPI_SOURCE == 0, "source %d", st.MPI_SOURCE);
                CHECK(st.MPI_TAG == tag, "tag %d != %d", st.MPI_TAG, tag);
                CHECK(count == (int)n, "count %d != %zu", count, n);
                long bad = verify(buf, n, (size_t)tag);
                CHECK(bad < 0, "size %zu: byte %ld wrong", n, bad);
                if (bigger)
                    CHECK(buf[n] == 0xEE, "size %zu: wrote past the message", n);
            }
        }
    }
    /* MPI_INT: counts in elements. */
    int nints = (int)(3 * e / sizeof(int)) + 3;
    int *ibuf = malloc(sizeof(int) * (size_t)nints);
    if (rank == 0) {
        for (int i = 0; i < nints; i++)
            ibuf[i] = i * 3 - 7;
        MPI_Send(ibuf, nints, MPI_INT, 1, 7, MPI_COMM_WORLD);
        MPI_Send(ibuf, 5, MPI_INT, 1, 8, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Status st;
        int count;
        MPI_Recv(ibuf, nints, MPI_INT, 0, 7, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_INT, &count);
        CHECK(count == nints, "int count %d", count);
        for (int i = 0; i < nints; i++)
            CHECK(ibuf[i] == i * 3 - 7, "int %d", i);
        MPI_Recv(ibuf, nints, MPI_INT, 0, 8, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_INT, &count);
        CHECK(count == 5, "int count %d", count);
        MPI_Get_count(&st, MPI_DOUBLE, &count);
        CHECK(count == MPI_UNDEFINED, "20 bytes as doubles should be MPI_UNDEFINED, got %d", count);
        printf("sizes ok\n");
    }
    free(buf);
    free(ibuf);
    MPI_Finalize();
    return 0;
}
