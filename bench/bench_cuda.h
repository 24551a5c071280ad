/*
 * bench_cuda.h - what hora-bench-allreduce needs from CUDA for --memory cuda:
 * choosing the device, moving the check patterns to and from it, the
 * device-to-device copy peer, and NCCL loaded at run time (dlopen) as the
 * all-reduce peer.
 *
 * No CUDA type appears here, so bench_allreduce.c compiles without the
 * toolkit: streams and events stay inside bench_cuda.c. Two implementations:
 * bench_cuda.c + bench_cuda_nccl.c (cudart, built when meson's have_cuda is
 * true, -DHORA_HAVE_CUDA=1), and bench_cuda_none.c, where every call fails
 * with "this build has no CUDA".
 *
 * Conventions: functions return 0 on success and -1 on failure, with the
 * reason (the CUDA or NCCL call, its error string) in libhora-base's
 * message, status_message() (runtime/base/status.h; this program's own
 * store, not libhora's hora_last_error()). Nothing here prints.
 * Calls that touch the device act on the current device of the calling
 * thread (the one bench_cuda_use made current).
 *
 * Build: part of hora-bench-allreduce (bench/meson.build).
 */
#ifndef BENCH_CUDA_H
#define BENCH_CUDA_H

#include <stddef.h>

#include "base/status.h"
#include "hora.h"

/* 1 when this build has the CUDA parts, else 0. */
int bench_cuda_built(void);

/* Before hora_init, which binds the runtime to the device current then:
 * make device local_rank % (number of visible devices) current (device 0
 * when local_rank < 0, the launcher did not say), create its context, and
 * set *device. */
int bench_cuda_select(int local_rank, int *device);

/* After hora_init: make device current (hora_cuda_device(), in case the
 * runtime chose another) and create the stream the peers run on. */
int bench_cuda_use(int device);
/* Destroys the stream; after bench_nccl_free. */
void bench_cuda_release(void);

/* "0000:41:00.0" of device, and the number of visible devices. */
int bench_cuda_bus_id(int device, char *out, size_t len);
int bench_cuda_device_count(int *count);

/* Synchronous copies between host and device memory (cudaMemcpy, either
 * direction: src and dst name which). */
int bench_cuda_copy(void *dst, const void *src, size_t bytes);
/* bytes of device memory at dst set to byte, finished on return. */
int bench_cuda_fill(void *dst, int byte, size_t bytes);
/* cudaDeviceSynchronize: everything queued on the device has finished. */
int bench_cuda_synchronize(void);

/* The copy peer: one device-to-device cudaMemcpyAsync of bytes on the
 * bench's stream (not waited for; bench_cuda_synchronize does). */
int bench_cuda_copy_async(void *dst, const void *src, size_t bytes);

/* For bench_cuda_nccl.c: the bench's stream as a cudaStream_t. */
void *bench_cuda_stream(void);

/*
 * NCCL, loaded with dlopen(library) at run time ("libnccl.so.2" unless
 * --nccl-lib names another), so the benchmark builds and runs where NCCL is
 * missing. Collective over MPI_COMM_WORLD, every rank calls it: loads the
 * library, gets rank 0's ncclUniqueId to everyone with MPI_Bcast and creates
 * the communicator on the current device. Returns 0 when every rank has its
 * communicator; else -1 on every rank (no communicator left anywhere) and
 * why (BENCH_WHY_BYTES) holds the first failing rank's reason. version
 * receives "NCCL 2.28.9".
 */
int bench_nccl_init(const char *library, char *version, size_t version_len, char *why, size_t why_len);
/* ncclAllReduce(send, recv, count, ...) enqueued on the bench's stream. */
int bench_nccl_allreduce(const void *send, void *recv, size_t count, hora_dtype_t dtype, hora_op_t op);
/* Destroys the communicator (when there is one); keeps the library loaded. */
void bench_nccl_free(void);

#endif /* BENCH_CUDA_H */
