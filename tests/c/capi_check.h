/* Helpers shared by the C test programs of tests/tests/capi_*.rs. */
#ifndef CAPI_CHECK_H
#define CAPI_CHECK_H
#include <stdio.h>
#include <stdlib.h>

/* CHECK(cond): on failure print the condition and line, and exit(1). */
#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,         \
                    __LINE__, #cond);                                      \
            exit(1);                                                       \
        }                                                                  \
    } while (0)

/* EXPECT_CLASS(call, class): the call returns an error of that class. */
#define EXPECT_CLASS(call, want)                                           \
    do {                                                                   \
        int rc_ = (call);                                                  \
        int cls_ = -1;                                                     \
        MPI_Error_class(rc_, &cls_);                                       \
        if (cls_ != (want)) {                                              \
            fprintf(stderr, "%s:%d: %s returned %d (class %d), want %s\n", \
                    __FILE__, __LINE__, #call, rc_, cls_, #want);          \
            exit(1);                                                       \
        }                                                                  \
        printf("ok %s -> %s\n", #call, #want);                             \
    } while (0)

#define OK(call) CHECK((call) == MPI_SUCCESS)
#endif
