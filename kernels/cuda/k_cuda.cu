/*
 * k_cuda.cu - the host helpers of libhora-kernels-cuda: the grid size of
 * the grid-stride kernels and k_cuda_error_string.
 */
#include "k_device.cuh"

/* SM counts of devices 0..63, 0 until first asked for. Threads that race on
 * a slot store the same value, so relaxed atomics are enough. */
#define K_CUDA_SM_CACHE 64
static int k_cuda_sm_count[K_CUDA_SM_CACHE];

cudaError_t k_cuda_blocks(size_t work, unsigned *blocks)
{
    int dev = 0, sms = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess) return err;
    if (dev >= 0 && dev < K_CUDA_SM_CACHE) sms = __atomic_load_n(&k_cuda_sm_count[dev], __ATOMIC_RELAXED);
    if (sms <= 0) {
        err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (err != cudaSuccess) return err;
        if (sms < 1) sms = 1;
        if (dev >= 0 && dev < K_CUDA_SM_CACHE) __atomic_store_n(&k_cuda_sm_count[dev], sms, __ATOMIC_RELAXED);
    }
    /* 8 blocks of K_CUDA_THREADS = 2048 threads: a full SM. More would
     * only queue; the loops stride over the rest. */
    const size_t cap = (size_t)sms * 8;
    size_t want = (work + K_CUDA_THREADS - 1) / K_CUDA_THREADS;
    if (want < 1) want = 1;
    *blocks = (unsigned)(want < cap ? want : cap);
    return cudaSuccess;
}

const char *k_cuda_error_string(int err) { return cudaGetErrorString((cudaError_t)err); }
