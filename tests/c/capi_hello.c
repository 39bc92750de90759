/* Init/Finalize, rank/size and the environment queries, as a singleton. */
#include <mpi.h>
#include <string.h>
#include "capi_check.h"

int main(int argc, char **argv) {
    int flag = -1, rank = -1, size = -1, v = 0, sv = -1, len = 0, provided = -1;
    char name[MPI_MAX_PROCESSOR_NAME];
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int *tag_ub = NULL, *other = NULL;
    double t0, t1;

    OK(MPI_Initialized(&flag));
    CHECK(flag == 0);
    OK(MPI_Get_version(&v, &sv));
    CHECK(v == MPI_VERSION && sv == MPI_SUBVERSION && v == 4 && sv == 0);
    OK(MPI_Get_library_version(lib, &len));
    CHECK(len > 0 && (int)strlen(lib) == len);

    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
    CHECK(provided >= MPI_THREAD_SINGLE && provided <= MPI_THREAD_MULTIPLE);
    OK(MPI_Query_thread(&v));
    CHECK(v == provided);
    OK(MPI_Is_thread_main(&flag));
    CHECK(flag == 1);
    OK(MPI_Initialized(&flag));
    CHECK(flag == 1);
    OK(MPI_Finalized(&flag));
    CHECK(flag == 0);

    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 1 && rank >= 0 && rank < size);
    OK(MPI_Comm_rank(MPI_COMM_SELF, &v));
    CHECK(v == 0);
    OK(MPI_Comm_size(MPI_COMM_SELF, &v));
    CHECK(v == 1);

    OK(MPI_Get_processor_name(name, &len));
    CHECK(len > 0 && len < MPI_MAX_PROCESSOR_NAME && (int)strlen(name) == len);

    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
    CHECK(flag == 1 && tag_ub != NULL && *tag_ub >= 32767);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &other, &flag));
    CHECK(flag == 0 || (other != NULL && (*other == 0 || *other == 1)));
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, 0x12345, &other, &flag));
    CHECK(flag == 0);

    t0 = MPI_Wtime();
    t1 = MPI_Wtime();
    CHECK(t1 >= t0 && MPI_Wtick() > 0.0 && MPI_Wtick() < 1.0);

    OK(MPI_Type_size(MPI_INT, &v));
    CHECK(v == (int)sizeof(int));
    OK(MPI_Type_size(MPI_DOUBLE, &v));
    CHECK(v == 8);
    OK(MPI_Type_size(MPI_LONG_DOUBLE, &v));
    CHECK(v == 16);
    OK(MPI_Type_size(MPI_INT64_T, &v));
    CHECK(v == 8);
    OK(MPI_Type_size(MPI_C_BOOL, &v));
    CHECK(v == 1);
    OK(MPI_Type_size(MPI_2INT, &v));
    CHECK(v == 8);
    OK(MPI_Type_size(MPI_DOUBLE_INT, &v));
    CHECK(v == 12);

    printf("rank %d size %d tag_ub %d provided %d\n", rank, size, *tag_ub, provided);
    OK(MPI_Finalize());
    OK(MPI_Finalized(&flag));
    CHECK(flag == 1);
    OK(MPI_Initialized(&flag));
    CHECK(flag == 1);
    printf("OK\n");
    return 0;
}
