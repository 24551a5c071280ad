/*
 * bench_cuda_none.c - bench_cuda.h for a build without CUDA (meson found no
 * nvcc, or -Dcuda=disabled): every call that would touch a device fails
 * with "this build has no CUDA", so --memory cuda stops with that message
 * before hora_init.
 *
 * Build: part of hora-bench-allreduce when have_cuda is false.
 */
#include "bench_cuda.h"

#include <stdio.h>

#define BENCH_CUDA_NONE "this build has no CUDA (reconfigure with nvcc on PATH, meson -Dcuda=enabled)"

int bench_cuda_built(void) { return 0; }

static int bench_cuda_none(void)
{
    status_set(HORA_ERR_UNSUPPORTED, "%s", BENCH_CUDA_NONE);
    return -1;
}

int bench_cuda_select(int local_rank, int *device)
{
    (void)local_rank, (void)device;
    return bench_cuda_none();
}

int bench_cuda_use(int device)
{
    (void)device;
    return bench_cuda_none();
}

void bench_cuda_release(void) {}

int bench_cuda_bus_id(int device, char *out, size_t len)
{
    (void)device, (void)out, (void)len;
    return bench_cuda_none();
}

int bench_cuda_device_count(int *count)
{
    (void)count;
    return bench_cuda_none();
}

int bench_cuda_copy(void *dst, const void *src, size_t bytes)
{
    (void)dst, (void)src, (void)bytes;
    return bench_cuda_none();
}

int bench_cuda_fill(void *dst, int byte, size_t bytes)
{
    (void)dst, (void)byte, (void)bytes;
    return bench_cuda_none();
}

int bench_cuda_synchronize(void) { return bench_cuda_none(); }

int bench_cuda_copy_async(void *dst, const void *src, size_t bytes)
{
    (void)dst, (void)src, (void)bytes;
    return bench_cuda_none();
}

void *bench_cuda_stream(void) { return NULL; }

int bench_nccl_init(const char *library, char *version, size_t version_len, char *why, size_t why_len)
{
    (void)library, (void)version, (void)version_len;
    snprintf(why, why_len, "%s", BENCH_CUDA_NONE);
    return bench_cuda_none();
}

int bench_nccl_allreduce(const void *send, void *recv, size_t count, hora_dtype_t dtype, hora_op_t op)
{
    (void)send, (void)recv, (void)count, (void)dtype, (void)op;
    return bench_cuda_none();
}

void bench_nccl_free(void) {}
