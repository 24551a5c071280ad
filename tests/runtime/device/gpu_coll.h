/*
 * gpu_coll.h - what the parts of test_gpu_coll share: the rank's place in the
 * test's own MPI communicator, failure counting, CUDA calls that must work,
 * device buffers of both kinds the runtime accepts (hora_mem_alloc_device,
 * reduced where it is; plain cudaMalloc, staged through the runtime's pool),
 * inputs whose collective results are exact (tests/common/exact.h) and their
 * comparison, and the modes. test_gpu_coll.c holds main() and the GPU probe;
 * gpu_direct.c the direct collectives, gpu_async.c the negotiated ones,
 * gpu_errors.c the device/host mismatch and the device-memory API, gpu_kill.c
 * the SIGKILL fault (driven by run_gpu.py).
 *
 * Single-threaded (the checks count with plain ints): only main's thread
 * calls hora_* and CUDA, apart from the kill mode's timer thread.
 */
#ifndef HORA_TEST_GPU_COLL_H
#define HORA_TEST_GPU_COLL_H

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "hora.h"
#include "report.h" /* the kill modes' report: TEST_GPU_DIR/rank<R> */

/* This process in gc_comm (a duplicate of MPI_COMM_WORLD that only the test
 * uses: its bookkeeping works whatever state the runtime is in); gc_device is
 * the CUDA device this rank uses (and the runtime must report). */
extern int gc_rank, gc_size, gc_device;
extern MPI_Comm gc_comm;
extern int gc_failures, gc_checks;

/* Bytes of 0xff after every device buffer (and every shard) that no
 * collective may write. */
#define GC_GUARD_BYTES 64
/* Failures reported per rank (all are counted). */
#define GC_MAX_REPORTS 30

void gc_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define GC_CHECK(cond, ...)                \
    do {                                   \
        gc_checks++;                       \
        if (!(cond)) gc_fail(__VA_ARGS__); \
    } while (0)

/* This rank cannot go on (a CUDA call failed, out of host memory): say why,
 * hora_abort so that the peers do not wait for it, exit 1. */
void gc_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* A CUDA call that must work. */
#define GC_CUDA(call) gc_cuda_check((call), #call, __FILE__, __LINE__)
void gc_cuda_check(cudaError_t e, const char *call, const char *file, int line);
/* malloc that must work (at least 1 byte). */
void *gc_xmalloc(size_t bytes);

/* ---------------------------------------------------------- device buffers */

enum gc_buf_kind {
    GC_BUF_POOL, /* hora_mem_alloc_device: the peers reduce from it directly */
    GC_BUF_CUDA, /* cudaMalloc: the runtime copies through its device pool */
    GC_BUF_KIND_COUNT
};
extern const char *const gc_buf_kind_name[GC_BUF_KIND_COUNT];

/* bytes + GC_GUARD_BYTES of device memory; ptr = base + offset (offset > 0:
 * a pointer inside the allocation, as a tensor view has). */
struct gc_dbuf {
    enum gc_buf_kind kind;
    void *base, *ptr;
};
void gc_dbuf_alloc(struct gc_dbuf *b, enum gc_buf_kind kind, size_t bytes, size_t offset);
void gc_dbuf_free(struct gc_dbuf *b);

/* ------------------------------------------------- values and comparisons */

/* Inputs repeat with this prime period in the global index. */
#define GC_PERIOD 4099

/* Rank r's input at global index i for op (a small integer exact in every
 * dtype under op, exact.h); salt tells the cases apart, so that a buffer
 * left over from an earlier case never holds the right values by chance. */
int64_t gc_input_value(hora_dtype_t dtype, hora_op_t op, int r, size_t i, unsigned salt);
/* buf[j] = rank r's input at global index offset + j, j < count. */
void gc_fill_input(void *buf, size_t offset, size_t count, hora_dtype_t dtype, hora_op_t op, int r, unsigned salt);
/* want[j] = op over the gc_size ranks' inputs at global index offset + j
 * (AVG divided the way hora.h says: fp32 for f32/f16/bf16, fp64 for f64,
 * truncating for integers). */
void gc_fill_expected(void *want, size_t offset, size_t count, hora_dtype_t dtype, hora_op_t op, unsigned salt);
/* Exact element-wise comparison (one check); reports the first wrong element
 * and how many are wrong. */
size_t gc_compare(const char *what, const void *got, const void *want, size_t count, hora_dtype_t dtype);
/* GC_GUARD_BYTES at guard still 0xff (one check). */
void gc_check_guard(const char *what, const void *guard);

/* Element counts every collective runs with: 0, 1, n-1, n+1, odd ones and
 * one over the fusion threshold (gc_big_count); returns how many (<= 8). */
int gc_counts(hora_dtype_t dtype, size_t counts[8]);
/* An odd count of more than max(HORA_FUSION_THRESHOLD, 5 MiB) bytes (more
 * than the runtime's 4 MiB staging chunk too). */
size_t gc_big_count(hora_dtype_t dtype);
/* The next case's salt; every rank draws the same sequence. */
unsigned gc_next_salt(void);

/* What this rank is doing now, for the watchdog's message (a hang on the
 * GPU machine must say where it hung). */
void gc_phase(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern char gc_phase_text[256];
/* > 0 once main armed the watchdog: each gc_phase restarts its alarm. */
extern unsigned gc_watchdog_s;

/* A fixed permutation of a[0..n) for seed. */
void gc_shuffle(int *a, int n, uint64_t seed);

/* ------------------------------------------------------------------ modes */

void gc_direct(void);
void gc_async(void);
void gc_errors(void);
void gc_direct_mismatch(void);
/* SIGKILL of the last rank mid device all-reduce; returns main's exit
 * status (run_gpu.py reads the reports). staged: cudaMalloc'd buffers. */
int gc_kill(int staged);

/* The memory kind of the device requests (the host twin's: host). */
#ifdef GC_HOST_TWIN
#include "gpu_host_twin.h"
#else
#define GC_MEMORY_DEVICE HORA_MEMORY_CUDA
#endif

#endif
