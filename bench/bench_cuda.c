/*
 * bench_cuda.c - hora-bench-allreduce's CUDA side (see bench_cuda.h): the
 * device, the staging of the check patterns, the copy peer. Plain C against
 * cudart's C API (cuda_runtime_api.h); no kernels, so no nvcc. Never links
 * the driver (-lcuda): without a GPU, cudart's first call fails with
 * cudaErrorInsufficientDriver or cudaErrorNoDevice and the benchmark says so.
 *
 * Build: with CUDA only (meson have_cuda, -DHORA_HAVE_CUDA=1);
 * bench_cuda_none.c replaces it otherwise.
 */
#include "bench_cuda.h"

#include <stdio.h>

#include <cuda_runtime_api.h>

static cudaStream_t bench_cuda_stream_handle;
static int bench_cuda_stream_created;

int bench_cuda_built(void) { return 1; }

/* Translates a CUDA error at this boundary: the message "what: cudaErrorX:
 * text" (base/status.h), and clears CUDA's sticky last error so
 * a later call does not report this one again. */
static int bench_cuda_check(cudaError_t error, const char *what)
{
    if (error == cudaSuccess) return 0;
    status_set(HORA_ERR_SYSTEM, "%s: %s: %s", what, cudaGetErrorName(error), cudaGetErrorString(error));
    (void)cudaGetLastError();
    return -1;
}

int bench_cuda_device_count(int *count)
{
    int n = 0;
    cudaError_t error = cudaGetDeviceCount(&n);
    if (error == cudaSuccess && n == 0) error = cudaErrorNoDevice;
    if (bench_cuda_check(error, "cudaGetDeviceCount") != 0) return -1;
    *count = n;
    return 0;
}

int bench_cuda_select(int local_rank, int *device)
{
    int count = 0;
    if (bench_cuda_device_count(&count) != 0) return -1;
    int chosen = local_rank > 0 ? local_rank % count : 0;
    char what[64];
    snprintf(what, sizeof(what), "cudaSetDevice(%d)", chosen);
    if (bench_cuda_check(cudaSetDevice(chosen), what) != 0) return -1;
    /* cudaFree(NULL) creates the context now, so a device that cannot be
     * used fails here and not inside hora_init. */
    if (bench_cuda_check(cudaFree(NULL), "creating the CUDA context (cudaFree(NULL))") != 0) return -1;
    *device = chosen;
    return 0;
}

int bench_cuda_use(int device)
{
    char what[64];
    snprintf(what, sizeof(what), "cudaSetDevice(%d)", device);
    if (bench_cuda_check(cudaSetDevice(device), what) != 0) return -1;
    if (!bench_cuda_stream_created) {
        /* Non-blocking: the peers' work does not serialise with the legacy
         * default stream, which the runtime may use. */
        if (bench_cuda_check(cudaStreamCreateWithFlags(&bench_cuda_stream_handle, cudaStreamNonBlocking),
                             "cudaStreamCreateWithFlags") != 0)
            return -1;
        bench_cuda_stream_created = 1;
    }
    return 0;
}

void bench_cuda_release(void)
{
    if (bench_cuda_stream_created) {
        (void)cudaStreamDestroy(bench_cuda_stream_handle);
        bench_cuda_stream_created = 0;
    }
}

void *bench_cuda_stream(void) { return bench_cuda_stream_handle; }

int bench_cuda_bus_id(int device, char *out, size_t len)
{
    char what[64];
    snprintf(what, sizeof(what), "cudaDeviceGetPCIBusId(%d)", device);
    return bench_cuda_check(cudaDeviceGetPCIBusId(out, (int)len, device), what);
}

int bench_cuda_copy(void *dst, const void *src, size_t bytes)
{
    /* cudaMemcpyDefault: unified addressing tells the direction from the
     * pointers, so one call serves upload and download. */
    return bench_cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
}

int bench_cuda_fill(void *dst, int byte, size_t bytes)
{
    /* cudaMemset may return before it has run; the synchronisation makes
     * "filled on return" true for the collective that follows, which reads
     * the buffer from another process. */
    if (bench_cuda_check(cudaMemset(dst, byte, bytes), "cudaMemset") != 0) return -1;
    return bench_cuda_synchronize();
}

int bench_cuda_synchronize(void) { return bench_cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

int bench_cuda_copy_async(void *dst, const void *src, size_t bytes)
{
    return bench_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, bench_cuda_stream_handle),
                            "cudaMemcpyAsync(device to device)");
}
