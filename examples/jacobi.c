/*
 * jacobi.c - the Laplace equation on a 2-D grid solved by Jacobi iteration.
 *
 * The grid has N x N interior points and a boundary held fixed: u = 1 on the top edge,
 * u = 0 on the other edges. Rows are distributed over the ranks in contiguous blocks
 * (row-block decomposition); each iteration exchanges one halo row with each neighbour
 * (MPI_Sendrecv), updates u_new = (north + south + west + east) / 4 and computes the
 * global residual max |u_new - u| with MPI_Allreduce(MPI_MAX). Because every point's update
 * is the same arithmetic whatever the decomposition, and the max-norm is exact, the
 * iteration count and the grid are identical for any number of ranks; only the checksum
 * (a floating-point sum, reduced in a different order) may differ in its last bits.
 *
 * Usage: mpirun -n P ./jacobi [N] [tolerance] [max_iterations]
 *        defaults: N = 128, tolerance = 1e-4, max_iterations = 10000
 * Output (rank 0):
 *   jacobi: grid NxN, P ranks, tolerance T, at most M iterations
 *   iterations K
 *   residual R
 *   checksum S        (sum of all interior values)
 *   time X s          (wall time of the iteration loop, max over ranks)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U(i, j) u[(size_t)(i) * (size_t)(n + 2) + (size_t)(j)]
#define V(i, j) v[(size_t)(i) * (size_t)(n + 2) + (size_t)(j)]

int main(int argc, char **argv)
{
    int rank, size;
    int n = 128;
    double tol = 1e-4;
    int max_iter = 10000;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        n = atoi(argv[1]);
    if (argc > 2)
        tol = atof(argv[2]);
    if (argc > 3)
        max_iter = atoi(argv[3]);
    if (n < 1 || tol <= 0.0 || max_iter < 1) {
        if (rank == 0)
            fprintf(stderr, "usage: jacobi [N >= 1] [tolerance > 0] [max_iterations >= 1]\n");
        MPI_Finalize();
        return 1;
    }

    /* Rows first..first+rows-1 (1-based global interior rows) belong to this rank. */
    int base = n / size, extra = n % size;
    int rows = base + (rank < extra ? 1 : 0);
    int first = 1 + rank * base + (rank < extra ? rank : extra);
    int north = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int south = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;

    /* Local rows 0 and rows+1 are halos (or the fixed boundary at the grid's edges). */
    size_t cells = (size_t)(rows + 2) * (size_t)(n + 2);
    double *u = calloc(cells, sizeof(double));
    double *v = calloc(cells, sizeof(double));
    if (!u || !v) {
        fprintf(stderr, "jacobi: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (first == 1) /* this rank holds the top boundary row */
        for (int j = 0; j < n + 2; j++)
            U(0, j) = V(0, j) = 1.0;

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    int iter = 0;
    double residual = 0.0;
    while (iter < max_iter) {
        /* Halo exchange: my first row goes north, my last row goes south. */
        MPI_Sendrecv(&U(1, 0), n + 2, MPI_DOUBLE, north, 0, &U(rows + 1, 0), n + 2, MPI_DOUBLE,
                     south, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&U(rows, 0), n + 2, MPI_DOUBLE, south, 1, &U(0, 0), n + 2, MPI_DOUBLE, north,
                     1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double local = 0.0;
        for (int i = 1; i <= rows; i++) {
            for (int j = 1; j <= n; j++) {
                double x = 0.25 * (U(i - 1, j) + U(i + 1, j) + U(i, j - 1) + U(i, j + 1));
                double d = x > U(i, j) ? x - U(i, j) : U(i, j) - x;
                if (d > local)
                    local = d;
                V(i, j) = x;
            }
        }
        double *t = u;
        u = v;
        v = t;
        iter++;
        MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (residual < tol)
            break;
    }
    double elapsed = MPI_Wtime() - t0, max_elapsed;

    double sum = 0.0, checksum = 0.0;
    for (int i = 1; i <= rows; i++)
        for (int j = 1; j <= n; j++)
            sum += U(i, j);
    MPI_Reduce(&sum, &checksum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&elapsed, &max_elapsed, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("jacobi: grid %dx%d, %d ranks, tolerance %g, at most %d iterations\n", n, n, size,
               tol, max_iter);
        printf("iterations %d\n", iter);
        printf("residual %.6e\n", residual);
        printf("checksum %.12e\n", checksum);
        printf("time %.6f s\n", max_elapsed);
    }
    free(u);
    free(v);
    MPI_Finalize();
    return 0;
}
