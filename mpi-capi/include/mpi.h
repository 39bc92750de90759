/*
 * mpi.h -- C interface of this MPI implementation (libmpi.so).
 *
 * The binary interface is MPICH's (x86_64 Linux): handles are ints with MPICH's
 * values, MPI_Status has MPICH's five-int layout, and the error classes carry
 * MPICH's numbers.  A program compiled against MPICH's own header therefore runs
 * against this library unchanged, and vice versa for the functions listed below.
 *
 * This header does not define MPICH_NAME, MPICH or OPEN_MPI: it describes the
 * MPICH ABI, not the MPICH implementation.
 *
 * Every constant is a compile-time constant (usable in case labels, static
 * initialisers and by binding generators).
 */
#ifndef MPI_INCLUDED
#define MPI_INCLUDED

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Version of the standard                                             */
/* ------------------------------------------------------------------ */
#define MPI_VERSION 4
#define MPI_SUBVERSION 0

/* ------------------------------------------------------------------ */
/* Handle and integer types                                            */
/* ------------------------------------------------------------------ */
typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Group;
typedef int MPI_Request;
typedef int MPI_Message;
typedef int MPI_Errhandler;
typedef int MPI_Info;
typedef int MPI_Win;
typedef int MPI_Session;
typedef int MPI_Fint;
typedef struct ADIOI_FileD *MPI_File;

/* Address, file offset and large count: 64-bit on LP64 Linux. */
typedef long MPI_Aint;
typedef long MPI_Offset;
typedef long MPI_Count;

/*
 * Status of a completed receive.  The received size (bytes) is split as
 *   count_lo                = low 32 bits,
 *   count_hi_and_cancelled  = (high bits << 1) | cancelled flag.
 */
typedef struct MPI_Status {
    int count_lo;
    int count_hi_and_cancelled;
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
} MPI_Status;

/* ------------------------------------------------------------------ */
/* Null handles                                                        */
/* ------------------------------------------------------------------ */
#define MPI_COMM_NULL       ((MPI_Comm)0x04000000)
#define MPI_GROUP_NULL      ((MPI_Group)0x08000000)
#define MPI_DATATYPE_NULL   ((MPI_Datatype)0x0c000000)
#define MPI_ERRHANDLER_NULL ((MPI_Errhandler)0x14000000)
#define MPI_OP_NULL         ((MPI_Op)0x18000000)
#define MPI_INFO_NULL       ((MPI_Info)0x1c000000)
#define MPI_WIN_NULL        ((MPI_Win)0x20000000)
#define MPI_REQUEST_NULL    ((MPI_Request)0x2c000000)
#define MPI_MESSAGE_NULL    ((MPI_Message)0x2c000000)
#define MPI_MESSAGE_NO_PROC ((MPI_Message)0x6c000000)
#define MPI_SESSION_NULL    ((MPI_Session)0x38000000)
#define MPI_FILE_NULL       ((MPI_File)0)
#define MPI_INFO_ENV        ((MPI_Info)0x5c000001)
#define MPI_GROUP_EMPTY     ((MPI_Group)0x48000000)

/* ------------------------------------------------------------------ */
/* Predefined communicators                                            */
/* ------------------------------------------------------------------ */
#define MPI_COMM_WORLD ((MPI_Comm)0x44000000)
#define MPI_COMM_SELF  ((MPI_Comm)0x44000001)

/* Results of communicator / group comparison */
#define MPI_IDENT     0
#define MPI_CONGRUENT 1
#define MPI_SIMILAR   2
#define MPI_UNEQUAL   3

/* ------------------------------------------------------------------ */
/* Predefined datatypes (bits 8..15 of a basic handle hold its size)   */
/* ------------------------------------------------------------------ */
#define MPI_CHAR               ((MPI_Datatype)0x4c000101)
#define MPI_SIGNED_CHAR        ((MPI_Datatype)0x4c000118)
#define MPI_UNSIGNED_CHAR      ((MPI_Datatype)0x4c000102)
#define MPI_BYTE               ((MPI_Datatype)0x4c00010d)
#define MPI_WCHAR              ((MPI_Datatype)0x4c00040e)
#define MPI_SHORT              ((MPI_Datatype)0x4c000203)
#define MPI_UNSIGNED_SHORT     ((MPI_Datatype)0x4c000204)
#define MPI_INT                ((MPI_Datatype)0x4c000405)
#define MPI_UNSIGNED           ((MPI_Datatype)0x4c000406)
#define MPI_LONG               ((MPI_Datatype)0x4c000807)
#define MPI_UNSIGNED_LONG      ((MPI_Datatype)0x4c000808)
#define MPI_LONG_LONG_INT      ((MPI_Datatype)0x4c000809)
#define MPI_LONG_LONG          MPI_LONG_LONG_INT
#define MPI_UNSIGNED_LONG_LONG ((MPI_Datatype)0x4c000819)
#define MPI_FLOAT              ((MPI_Datatype)0x4c00040a)
#define MPI_DOUBLE             ((MPI_Datatype)0x4c00080b)
#define MPI_LONG_DOUBLE        ((MPI_Datatype)0x4c00100c)
#define MPI_PACKED             ((MPI_Datatype)0x4c00010f)
#define MPI_LB                 ((MPI_Datatype)0x4c000010)
#define MPI_UB                 ((MPI_Datatype)0x4c000011)

/* Fixed-width integers */
#define MPI_INT8_T   ((MPI_Datatype)0x4c000137)
#define MPI_INT16_T  ((MPI_Datatype)0x4c000238)
#define MPI_INT32_T  ((MPI_Datatype)0x4c000439)
#define MPI_INT64_T  ((MPI_Datatype)0x4c00083a)
#define MPI_UINT8_T  ((MPI_Datatype)0x4c00013b)
#define MPI_UINT16_T ((MPI_Datatype)0x4c00023c)
#define MPI_UINT32_T ((MPI_Datatype)0x4c00043d)
#define MPI_UINT64_T ((MPI_Datatype)0x4c00083e)

/* C99 boolean and complex */
#define MPI_C_BOOL                ((MPI_Datatype)0x4c00013f)
#define MPI_C_FLOAT_COMPLEX       ((MPI_Datatype)0x4c000840)
#define MPI_C_COMPLEX             MPI_C_FLOAT_COMPLEX
#define MPI_C_DOUBLE_COMPLEX      ((MPI_Datatype)0x4c001041)
#define MPI_C_LONG_DOUBLE_COMPLEX ((MPI_Datatype)0x4c002042)

/* Address, offset and count */
#define MPI_AINT   ((MPI_Datatype)0x4c000843)
#define MPI_OFFSET ((MPI_Datatype)0x4c000844)
#define MPI_COUNT  ((MPI_Datatype)0x4c000845)

/* C++ types */
#define MPI_CXX_BOOL                ((MPI_Datatype)0x4c000133)
#define MPI_CXX_FLOAT_COMPLEX       ((MPI_Datatype)0x4c000834)
#define MPI_CXX_DOUBLE_COMPLEX      ((MPI_Datatype)0x4c001035)
#define MPI_CXX_LONG_DOUBLE_COMPLEX ((MPI_Datatype)0x4c002036)

/* Value/index pair types (for MPI_MINLOC / MPI_MAXLOC) */
#define MPI_FLOAT_INT       ((MPI_Datatype)0x8c000000)
#define MPI_DOUBLE_INT      ((MPI_Datatype)0x8c000001)
#define MPI_LONG_INT        ((MPI_Datatype)0x8c000002)
#define MPI_SHORT_INT       ((MPI_Datatype)0x8c000003)
#define MPI_2INT            ((MPI_Datatype)0x4c000816)
#define MPI_LONG_DOUBLE_INT ((MPI_Datatype)0x8c000004)

/* Fortran types (handles only) */
#define MPI_COMPLEX           ((MPI_Datatype)0x4c00081e)
#define MPI_DOUBLE_COMPLEX    ((MPI_Datatype)0x4c001022)
#define MPI_LOGICAL           ((MPI_Datatype)0x4c00041d)
#define MPI_REAL              ((MPI_Datatype)0x4c00041c)
#define MPI_DOUBLE_PRECISION  ((MPI_Datatype)0x4c00081f)
#define MPI_INTEGER           ((MPI_Datatype)0x4c00041b)
#define MPI_2INTEGER          ((MPI_Datatype)0x4c000820)
#define MPI_2REAL             ((MPI_Datatype)0x4c000821)
#define MPI_2DOUBLE_PRECISION ((MPI_Datatype)0x4c001023)
#define MPI_CHARACTER         ((MPI_Datatype)0x4c00011a)
#define MPI_REAL4             ((MPI_Datatype)0x4c000427)
#define MPI_REAL8             ((MPI_Datatype)0x4c000829)
#define MPI_REAL16            ((MPI_Datatype)0x4c00102b)
#define MPI_COMPLEX8          ((MPI_Datatype)0x4c000828)
#define MPI_COMPLEX16         ((MPI_Datatype)0x4c00102a)
#define MPI_COMPLEX32         ((MPI_Datatype)0x4c00202c)
#define MPI_INTEGER1          ((MPI_Datatype)0x4c00012d)
#define MPI_INTEGER2          ((MPI_Datatype)0x4c00022f)
#define MPI_INTEGER4          ((MPI_Datatype)0x4c000430)
#define MPI_INTEGER8          ((MPI_Datatype)0x4c000831)
#define MPI_INTEGER16         MPI_DATATYPE_NULL

#define MPI_TYPECLASS_REAL    1
#define MPI_TYPECLASS_INTEGER 2
#define MPI_TYPECLASS_COMPLEX 3

/* ------------------------------------------------------------------ */
/* Predefined reduction operations                                     */
/* ------------------------------------------------------------------ */
#define MPI_MAX     ((MPI_Op)0x58000001)
#define MPI_MIN     ((MPI_Op)0x58000002)
#define MPI_SUM     ((MPI_Op)0x58000003)
#define MPI_PROD    ((MPI_Op)0x58000004)
#define MPI_LAND    ((MPI_Op)0x58000005)
#define MPI_BAND    ((MPI_Op)0x58000006)
#define MPI_LOR     ((MPI_Op)0x58000007)
#define MPI_BOR     ((MPI_Op)0x58000008)
#define MPI_LXOR    ((MPI_Op)0x58000009)
#define MPI_BXOR    ((MPI_Op)0x5800000a)
#define MPI_MINLOC  ((MPI_Op)0x5800000b)
#define MPI_MAXLOC  ((MPI_Op)0x5800000c)
#define MPI_REPLACE ((MPI_Op)0x5800000d)
#define MPI_NO_OP   ((MPI_Op)0x5800000e)

/* ------------------------------------------------------------------ */
/* Error handlers                                                      */
/* ------------------------------------------------------------------ */
#define MPI_ERRORS_ARE_FATAL ((MPI_Errhandler)0x54000000)
#define MPI_ERRORS_RETURN    ((MPI_Errhandler)0x54000001)
#define MPI_ERRORS_ABORT     ((MPI_Errhandler)0x54000003)

/* ------------------------------------------------------------------ */
/* Special ranks, tags, counts and buffers                             */
/* ------------------------------------------------------------------ */
#define MPI_PROC_NULL  (-1)
#define MPI_ANY_SOURCE (-2)
#define MPI_ROOT       (-3)
#define MPI_ANY_TAG    (-1)
#define MPI_UNDEFINED  (-32766)
#define MPI_KEYVAL_INVALID 0x24000000

#define MPI_BOTTOM   ((void *)0)
#define MPI_IN_PLACE ((void *)-1)

#define MPI_STATUS_IGNORE   ((MPI_Status *)1)
#define MPI_STATUSES_IGNORE ((MPI_Status *)1)
#define MPI_ERRCODES_IGNORE ((int *)0)
#define MPI_ARGV_NULL       ((char **)0)
#define MPI_ARGVS_NULL      ((char ***)0)

#define MPI_BSEND_OVERHEAD 96

/* Lengths of strings returned by the library (including the NUL) */
#define MPI_MAX_PROCESSOR_NAME         128
#define MPI_MAX_LIBRARY_VERSION_STRING 8192
#define MPI_MAX_ERROR_STRING           512
#define MPI_MAX_PORT_NAME              256
#define MPI_MAX_OBJECT_NAME            128
#define MPI_MAX_INFO_KEY               255
#define MPI_MAX_INFO_VAL               1024
#define MPI_MAX_STRINGTAG_LEN          256
#define MPI_MAX_PSET_NAME_LEN          256

/* ------------------------------------------------------------------ */
/* Predefined attribute keys of communicators                          */
/* ------------------------------------------------------------------ */
#define MPI_TAG_UB          0x64400001
#define MPI_HOST            0x64400003
#define MPI_IO              0x64400005
#define MPI_WTIME_IS_GLOBAL 0x64400007
#define MPI_UNIVERSE_SIZE   0x64400009
#define MPI_LASTUSEDCODE    0x6440000b
#define MPI_APPNUM          0x6440000d

/* ------------------------------------------------------------------ */
/* Thread support levels                                               */
/* ------------------------------------------------------------------ */
#define MPI_THREAD_SINGLE     0
#define MPI_THREAD_FUNNELED   1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE   3

/* ------------------------------------------------------------------ */
/* Error classes                                                       */
/* ------------------------------------------------------------------ */
#define MPI_SUCCESS                   0
#define MPI_ERR_BUFFER                1
#define MPI_ERR_COUNT                 2
#define MPI_ERR_TYPE                  3
#define MPI_ERR_TAG                   4
#define MPI_ERR_COMM                  5
#define MPI_ERR_RANK                  6
#define MPI_ERR_ROOT                  7
#define MPI_ERR_GROUP                 8
#define MPI_ERR_OP                    9
#define MPI_ERR_TOPOLOGY              10
#define MPI_ERR_DIMS                  11
#define MPI_ERR_ARG                   12
#define MPI_ERR_UNKNOWN               13
#define MPI_ERR_TRUNCATE              14
#define MPI_ERR_OTHER                 15
#define MPI_ERR_INTERN                16
#define MPI_ERR_IN_STATUS             17
#define MPI_ERR_PENDING               18
#define MPI_ERR_REQUEST               19
#define MPI_ERR_ACCESS                20
#define MPI_ERR_AMODE                 21
#define MPI_ERR_BAD_FILE              22
#define MPI_ERR_CONVERSION            23
#define MPI_ERR_DUP_DATAREP           24
#define MPI_ERR_FILE_EXISTS           25
#define MPI_ERR_FILE_IN_USE           26
#define MPI_ERR_FILE                  27
#define MPI_ERR_INFO                  28
#define MPI_ERR_INFO_KEY              29
#define MPI_ERR_INFO_VALUE            30
#define MPI_ERR_INFO_NOKEY            31
#define MPI_ERR_IO                    32
#define MPI_ERR_NAME                  33
#define MPI_ERR_NO_MEM                34
#define MPI_ERR_NOT_SAME              35
#define MPI_ERR_NO_SPACE              36
#define MPI_ERR_NO_SUCH_FILE          37
#define MPI_ERR_PORT                  38
#define MPI_ERR_QUOTA                 39
#define MPI_ERR_READ_ONLY             40
#define MPI_ERR_SERVICE               41
#define MPI_ERR_SPAWN                 42
#define MPI_ERR_UNSUPPORTED_DATAREP   43
#define MPI_ERR_UNSUPPORTED_OPERATION 44
#define MPI_ERR_WIN                   45
#define MPI_ERR_BASE                  46
#define MPI_ERR_LOCKTYPE              47
#define MPI_ERR_KEYVAL                48
#define MPI_ERR_RMA_CONFLICT          49
#define MPI_ERR_RMA_SYNC              50
#define MPI_ERR_SIZE                  51
#define MPI_ERR_DISP                  52
#define MPI_ERR_ASSERT                53
#define MPI_ERR_RMA_RANGE             55
#define MPI_ERR_RMA_ATTACH            56
#define MPI_ERR_RMA_SHARED            57
#define MPI_ERR_RMA_FLAVOR            58
#define MPI_ERR_SESSION               75
#define MPI_ERR_PROC_ABORTED          76
#define MPI_ERR_VALUE_TOO_LARGE       77
#define MPI_ERR_LASTCODE              0x3fffffff

/* ------------------------------------------------------------------ */
/* Function types                                                      */
/* ------------------------------------------------------------------ */
typedef void (MPI_User_function)(void *invec, void *inoutvec, int *len,
                                 MPI_Datatype *datatype);
typedef void (MPI_Comm_errhandler_function)(MPI_Comm *comm, int *code, ...);
typedef MPI_Comm_errhandler_function MPI_Comm_errhandler_fn;
typedef void (MPI_Handler_function)(MPI_Comm *comm, int *code, ...);

/* Handle conversion between C and Fortran is the identity. */
#define MPI_Comm_c2f(h)       ((MPI_Fint)(h))
#define MPI_Comm_f2c(h)       ((MPI_Comm)(h))
#define MPI_Type_c2f(h)       ((MPI_Fint)(h))
#define MPI_Type_f2c(h)       ((MPI_Datatype)(h))
#define MPI_Op_c2f(h)         ((MPI_Fint)(h))
#define MPI_Op_f2c(h)         ((MPI_Op)(h))
#define MPI_Request_c2f(h)    ((MPI_Fint)(h))
#define MPI_Request_f2c(h)    ((MPI_Request)(h))
#define MPI_Errhandler_c2f(h) ((MPI_Fint)(h))
#define MPI_Errhandler_f2c(h) ((MPI_Errhandler)(h))
#define MPI_Info_c2f(h)       ((MPI_Fint)(h))
#define MPI_Info_f2c(h)       ((MPI_Info)(h))
#define MPI_Group_c2f(h)      ((MPI_Fint)(h))
#define MPI_Group_f2c(h)      ((MPI_Group)(h))

/* Data objects exported by the library (MPICH ABI). */
extern MPI_Fint *MPI_F_STATUS_IGNORE;
extern MPI_Fint *MPI_F_STATUSES_IGNORE;
extern int *const MPI_UNWEIGHTED;
extern int *const MPI_WEIGHTS_EMPTY;

/* ------------------------------------------------------------------ */
/* Functions                                                           */
/* ------------------------------------------------------------------ */

/* Start-up, shutdown, environment */
int MPI_Init(int *argc, char ***argv);
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);
int MPI_Finalize(void);
int MPI_Initialized(int *flag);
int MPI_Finalized(int *flag);
int MPI_Abort(MPI_Comm comm, int errorcode);
int MPI_Query_thread(int *provided);
int MPI_Is_thread_main(int *flag);
int MPI_Get_version(int *version, int *subversion);
int MPI_Get_library_version(char *version, int *resultlen);
int MPI_Get_processor_name(char *name, int *resultlen);
double MPI_Wtime(void);
double MPI_Wtick(void);

/* Communicators */
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void *attribute_val,
                      int *flag);
int MPI_Attr_get(MPI_Comm comm, int keyval, void *attribute_val, int *flag);

/* Point-to-point */
int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest,
             int tag, MPI_Comm comm);
int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag,
             MPI_Comm comm, MPI_Status *status);
int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source,
              int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 int dest, int sendtag, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status);
int MPI_Wait(MPI_Request *request, MPI_Status *status);
int MPI_Waitall(int count, MPI_Request *array_of_requests,
                MPI_Status *array_of_statuses);
int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status);
int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status);
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag,
               MPI_Status *status);
int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count);

/* Collectives */
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root,
              MPI_Comm comm);
int MPI_Reduce(const void *sendbuf, void *recvbuf, int count,
               MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);

/* Datatypes */
int MPI_Type_size(MPI_Datatype datatype, int *size);

/* Memory */
int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr);
int MPI_Free_mem(void *base);

/* Errors and error handlers */
int MPI_Error_string(int errorcode, char *string, int *resultlen);
int MPI_Error_class(int errorcode, int *errorclass);
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler);
int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler);
int MPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler);
int MPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler *errhandler);
int MPI_Errhandler_free(MPI_Errhandler *errhandler);

#ifdef __cplusplus
}
#endif

#endif /* MPI_INCLUDED */
