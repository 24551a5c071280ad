/*
 * k_device.cuh - private to the .cu files of kernels/cuda: raw vector loads
 * and stores, element loads at any alignment, the grid of a grid-stride
 * loop and the launch helper shared by the kernels of k_reduce.cu,
 * k_unary.cu and k_copy.cu.
 *
 * Elements move as raw bits (k_elem.h): a vector is up to 16 bytes held in
 * four 32-bit words, from which k_vec_get / k_vec_set take element k of a
 * given size. With the element index a constant (unrolled loops) they are
 * register moves and shifts.
 */
#ifndef K_DEVICE_CUH
#define K_DEVICE_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "k_cuda.h"
#include "k_elem.h"

static_assert(K_CUDA_ERR_INVALID_VALUE == (int)cudaErrorInvalidValue, "k_cuda.h's invalid-value code");

/* Threads per block of every kernel here. */
#define K_CUDA_THREADS 256

/* Size in bytes of a dtype, as a constant (k_dtype_size's values). */
template <int DT> struct k_dtype_bytes {
    static constexpr int value = DT == K_DTYPE_F64 || DT == K_DTYPE_I64                                              ? 8
                                 : DT == K_DTYPE_F16 || DT == K_DTYPE_BF16 || DT == K_DTYPE_I16 || DT == K_DTYPE_U16 ? 2
                                 : DT == K_DTYPE_U8 || DT == K_DTYPE_I8 || DT == K_DTYPE_BOOL                        ? 1
                                                                                              : 4;
};

/* Up to 16 bytes of raw elements. */
struct k_vec {
    uint32_t w[4];
};

/* Loads / stores B bytes (1, 2, 4, 8 or 16) at p, which is B-aligned. */
template <int B> __device__ __forceinline__ void k_vec_load(k_vec &v, const unsigned char *p)
{
    if constexpr (B == 16) {
        uint4 u = *reinterpret_cast<const uint4 *>(p);
        v.w[0] = u.x, v.w[1] = u.y, v.w[2] = u.z, v.w[3] = u.w;
    } else if constexpr (B == 8) {
        uint2 u = *reinterpret_cast<const uint2 *>(p);
        v.w[0] = u.x, v.w[1] = u.y, v.w[2] = 0, v.w[3] = 0;
    } else if constexpr (B == 4) {
        v.w[0] = *reinterpret_cast<const uint32_t *>(p), v.w[1] = v.w[2] = v.w[3] = 0;
    } else if constexpr (B == 2) {
        v.w[0] = *reinterpret_cast<const uint16_t *>(p), v.w[1] = v.w[2] = v.w[3] = 0;
    } else {
        v.w[0] = *p, v.w[1] = v.w[2] = v.w[3] = 0;
    }
}

template <int B> __device__ __forceinline__ void k_vec_store(unsigned char *p, const k_vec &v)
{
    if constexpr (B == 16)
        *reinterpret_cast<uint4 *>(p) = make_uint4(v.w[0], v.w[1], v.w[2], v.w[3]);
    else if constexpr (B == 8)
        *reinterpret_cast<uint2 *>(p) = make_uint2(v.w[0], v.w[1]);
    else if constexpr (B == 4)
        *reinterpret_cast<uint32_t *>(p) = v.w[0];
    else if constexpr (B == 2)
        *reinterpret_cast<uint16_t *>(p) = (uint16_t)v.w[0];
    else
        *p = (unsigned char)v.w[0];
}

/* Element k (of S bytes) of v, and setting it in a vector that starts
 * zeroed (k_vec_set ORs the narrow ones in). */
template <int S> __device__ __forceinline__ uint64_t k_vec_get(const k_vec &v, int k)
{
    if constexpr (S == 8)
        return v.w[2 * k] | ((uint64_t)v.w[2 * k + 1] << 32);
    else if constexpr (S == 4)
        return v.w[k];
    else if constexpr (S == 2)
        return (v.w[k / 2] >> (16 * (k % 2))) & 0xFFFFu;
    else
        return (v.w[k / 4] >> (8 * (k % 4))) & 0xFFu;
}

template <int S> __device__ __forceinline__ void k_vec_set(k_vec &v, int k, uint64_t raw)
{
    if constexpr (S == 8) {
        v.w[2 * k] = (uint32_t)raw;
        v.w[2 * k + 1] = (uint32_t)(raw >> 32);
    } else if constexpr (S == 4) {
        v.w[k] = (uint32_t)raw;
    } else if constexpr (S == 2) {
        v.w[k / 2] |= ((uint32_t)raw & 0xFFFFu) << (16 * (k % 2));
    } else {
        v.w[k / 4] |= ((uint32_t)raw & 0xFFu) << (8 * (k % 4));
    }
}

/* One element of S bytes at p: aligned to S, or (bytewise, a uniform flag)
 * at any address, one byte at a time (little endian, as the GPU is). */
template <int S> __device__ __forceinline__ uint64_t k_elem_get(const unsigned char *p, int bytewise)
{
    if (bytewise) {
        uint64_t raw = 0;
#pragma unroll
        for (int b = 0; b < S; b++) raw |= (uint64_t)p[b] << (8 * b);
        return raw;
    }
    k_vec v;
    k_vec_load<S>(v, p);
    return k_vec_get<S>(v, 0);
}

template <int S> __device__ __forceinline__ void k_elem_put(unsigned char *p, uint64_t raw, int bytewise)
{
    if (bytewise) {
#pragma unroll
        for (int b = 0; b < S; b++) p[b] = (unsigned char)(raw >> (8 * b));
        return;
    }
    k_vec v = {};
    k_vec_set<S>(v, 0, raw);
    k_vec_store<S>(p, v);
}

/* The layout of an element-wise kernel over count elements at pointers
 * that are all aligned to their element sizes: `head` scalar elements,
 * then `vecs` vectors of V elements where every pointer is at a vector
 * boundary at once, then the scalar tail; no vectors (head = count) when
 * the pointers are not aligned alike, and bytewise element access when one
 * is not even aligned to its element size. */
struct k_layout {
    size_t head, vecs;
    int bytewise;
};

/* ptrs[i] holds elements of sizes[i] bytes; a vector is V elements (V *
 * sizes[i] bytes of each). */
static inline k_layout k_layout_of(const void *const *ptrs, const size_t *sizes, int count_ptrs, size_t count, size_t V)
{
    k_layout lay = {count, 0, 0};
    size_t head = (size_t)-1;
    for (int i = 0; i < count_ptrs; i++) {
        uintptr_t a = (uintptr_t)ptrs[i];
        size_t vec_bytes = V * sizes[i];
        if (a % sizes[i]) {
            lay.bytewise = 1;
            return lay;
        }
        size_t h = ((vec_bytes - a % vec_bytes) % vec_bytes) / sizes[i];
        if (head == (size_t)-1)
            head = h;
        else if (h != head)
            head = (size_t)-2; /* not aligned alike: scalar only */
    }
    if (head < count) {
        lay.head = head;
        lay.vecs = (count - head) / V;
    }
    return lay;
}

/* Blocks for a grid-stride loop over `work` items of one thread each: enough
 * to cover it, at most 8 per SM (full occupancy at K_CUDA_THREADS). The SM
 * count of the current device is cached. */
cudaError_t k_cuda_blocks(size_t work, unsigned *blocks);

/* Launches kernel(params) on K_CUDA_THREADS x blocks, returning the
 * launch's own status (cudaLaunchKernel reports it directly; no
 * cudaGetLastError, which would also pick up someone else's error). */
template <typename P>
static inline cudaError_t k_cuda_launch(void (*kernel)(P), unsigned blocks, const P &params, cudaStream_t stream)
{
    void *args[] = {(void *)&params};
    return cudaLaunchKernel((const void *)kernel, dim3(blocks), dim3(K_CUDA_THREADS), args, 0, stream);
}

#endif /* K_DEVICE_CUH */
