/*
 * bench_cuda_nccl.c - NCCL as hora-bench-allreduce's device peer, loaded
 * with dlopen at run time (see bench_cuda.h), so the benchmark neither needs
 * nccl.h to build nor libnccl to start. On the lent GPU machine NCCL comes
 * from PyTorch's pip wheels (nvidia/nccl/lib/libnccl.so.2), which the
 * loader does not search: put that directory in LD_LIBRARY_PATH or pass
 * --nccl-lib PATH.
 *
 * The few types and functions used are declared here from NCCL's documented
 * C API (nccl.h, stable since NCCL 2.0; ncclAvg since 2.10): enums are C
 * ints, ncclUniqueId is 128 opaque bytes passed by value, ncclComm_t and
 * cudaStream_t are pointers.
 *
 * Build: with CUDA only (meson have_cuda).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <mpi.h>

#include "bench_common.h"
#include "bench_cuda.h"

/* From nccl.h. */
typedef int nccl_result_t; /* ncclResult_t: ncclSuccess = 0 */
typedef struct nccl_comm *nccl_comm_t;
typedef struct {
    char internal[128]; /* NCCL_UNIQUE_ID_BYTES */
} nccl_unique_id_t;

enum { /* ncclDataType_t (NCCL has no int16, uint16 or bool: those rows have no NCCL column) */
       NCCL_INT8 = 0,
       NCCL_INT32 = 2,
       NCCL_INT64 = 4,
       NCCL_UINT8 = 1,
       NCCL_FLOAT16 = 6,
       NCCL_FLOAT32 = 7,
       NCCL_FLOAT64 = 8,
       NCCL_BFLOAT16 = 9,
};
enum { /* ncclRedOp_t */
       NCCL_SUM = 0,
       NCCL_PROD = 1,
       NCCL_MAX = 2,
       NCCL_MIN = 3,
       NCCL_AVG = 4,
};

/* The entry points, resolved by name. */
typedef struct {
    void *library;
    nccl_result_t (*get_version)(int *version);
    nccl_result_t (*get_unique_id)(nccl_unique_id_t *id);
    nccl_result_t (*comm_init_rank)(nccl_comm_t *comm, int nranks, nccl_unique_id_t id, int rank);
    nccl_result_t (*comm_destroy)(nccl_comm_t comm);
    nccl_result_t (*comm_abort)(nccl_comm_t comm);
    nccl_result_t (*all_reduce)(const void *send, void *recv, size_t count, int datatype, int op, nccl_comm_t comm,
                                void *stream);
    const char *(*get_error_string)(nccl_result_t result);
} nccl_api_t;

static nccl_api_t nccl;
static nccl_comm_t nccl_comm;

/* Loads the library and resolves every entry point, or says which failed. */
static int nccl_load(const char *library)
{
    if (nccl.library != NULL) return 0;
    void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *reason = dlerror();
        status_set(HORA_ERR_SYSTEM,
                   "dlopen(%s) failed: %s (put the directory of libnccl.so.2 in LD_LIBRARY_PATH, "
                   "e.g. python3 -c \"import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) + "
                   "'/lib')\", or pass --nccl-lib PATH)",
                   library, reason != NULL ? reason : "unknown error");
        return -1;
    }
    static const struct {
        const char *name;
        size_t offset;
    } symbols[] = {
        {"ncclGetVersion", offsetof(nccl_api_t, get_version)},
        {"ncclGetUniqueId", offsetof(nccl_api_t, get_unique_id)},
        {"ncclCommInitRank", offsetof(nccl_api_t, comm_init_rank)},
        {"ncclCommDestroy", offsetof(nccl_api_t, comm_destroy)},
        {"ncclCommAbort", offsetof(nccl_api_t, comm_abort)},
        {"ncclAllReduce", offsetof(nccl_api_t, all_reduce)},
        {"ncclGetErrorString", offsetof(nccl_api_t, get_error_string)},
    };
    nccl_api_t api = {.library = handle};
    for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
        void *address = dlsym(handle, symbols[i].name);
        if (address == NULL) {
            status_set(HORA_ERR_SYSTEM, "%s has no %s (NCCL older than 2.10?)", library, symbols[i].name);
            dlclose(handle);
            return -1;
        }
        /* POSIX guarantees object and function pointers convert. */
        memcpy((char *)&api + symbols[i].offset, &address, sizeof(address));
    }
    nccl = api;
    return 0;
}

static int nccl_check(nccl_result_t result, const char *what)
{
    if (result == 0) return 0;
    status_set(HORA_ERR_SYSTEM, "%s failed: %s (ncclResult_t %d)", what,
               nccl.get_error_string != NULL ? nccl.get_error_string(result) : "?", result);
    return -1;
}

int bench_nccl_init(const char *library, char *version, size_t version_len, char *why, size_t why_len)
{
    int rank = 0, nranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    /* Every step ends with an agreement, so that no rank enters
     * ncclCommInitRank (which waits for all nranks) when another will not. */
    int ok = nccl_load(library) == 0;
    if (!ok) snprintf(why, why_len, "%s", status_message());
    if (!bench_all_ok(ok, why, why_len)) return -1;

    int code = 0;
    if (nccl_check(nccl.get_version(&code), "ncclGetVersion") == 0)
        snprintf(version, version_len, "NCCL %d.%d.%d", code / 10000, code / 100 % 100, code % 100);
    else
        snprintf(version, version_len, "NCCL (version unknown)");

    nccl_unique_id_t id;
    memset(&id, 0, sizeof(id));
    ok = rank != 0 || nccl_check(nccl.get_unique_id(&id), "ncclGetUniqueId") == 0;
    if (!ok) snprintf(why, why_len, "%s", status_message());
    if (!bench_all_ok(ok, why, why_len)) return -1;
    MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);

    nccl_comm_t comm = NULL;
    ok = nccl_check(nccl.comm_init_rank(&comm, nranks, id, rank), "ncclCommInitRank") == 0;
    if (!ok) snprintf(why, why_len, "%s", status_message());
    if (!bench_all_ok(ok, why, why_len)) {
        /* Abort, not destroy: destroy would wait for the ranks that have
         * no communicator. */
        if (ok) (void)nccl.comm_abort(comm);
        return -1;
    }
    nccl_comm = comm;
    return 0;
}

static int nccl_datatype(hora_dtype_t dtype)
{
    switch (dtype) {
    case HORA_DTYPE_F32: return NCCL_FLOAT32;
    case HORA_DTYPE_F16: return NCCL_FLOAT16;
    case HORA_DTYPE_BF16: return NCCL_BFLOAT16;
    case HORA_DTYPE_F64: return NCCL_FLOAT64;
    case HORA_DTYPE_I32: return NCCL_INT32;
    case HORA_DTYPE_I64: return NCCL_INT64;
    case HORA_DTYPE_U8: return NCCL_UINT8;
    case HORA_DTYPE_I8: return NCCL_INT8;
    case HORA_DTYPE_I16:
    case HORA_DTYPE_U16:
    case HORA_DTYPE_BOOL:
    case HORA_DTYPE_COUNT: break;
    }
    return -1;
}

static int nccl_op(hora_op_t op)
{
    switch (op) {
    case HORA_OP_SUM: return NCCL_SUM;
    case HORA_OP_AVG: return NCCL_AVG;
    case HORA_OP_MIN: return NCCL_MIN;
    case HORA_OP_MAX: return NCCL_MAX;
    case HORA_OP_PROD: return NCCL_PROD;
    case HORA_OP_COUNT:
    case HORA_OP_ADASUM: break; /* not element-wise: the benchmarks do not run it */
    }
    return -1;
}

int bench_nccl_allreduce(const void *send, void *recv, size_t count, hora_dtype_t dtype, hora_op_t op)
{
    int datatype = nccl_datatype(dtype), nccl_reduce_op = nccl_op(op);
    if (nccl_comm == NULL || datatype < 0 || nccl_reduce_op < 0) {
        status_set(HORA_ERR_SYSTEM, "ncclAllReduce: %s",
                   nccl_comm == NULL ? "no communicator" : "no NCCL type or op for this row");
        return -1;
    }
    return nccl_check(nccl.all_reduce(send, recv, count, datatype, nccl_reduce_op, nccl_comm, bench_cuda_stream()),
                      "ncclAllReduce");
}

void bench_nccl_free(void)
{
    if (nccl_comm != NULL) {
        (void)nccl.comm_destroy(nccl_comm);
        nccl_comm = NULL;
    }
}
