/*
 * k_copy.cu - k_cuda_copy_batch: many device-to-device copies (packing
 * tensors into the fusion buffer and back) in one launch per
 * K_CUDA_COPY_BATCH_MAX copies, instead of one cudaMemcpyAsync each.
 *
 * Protocol: the host cuts every copy into tiles of K_COPY_TILE bytes and
 * numbers them across the batch; first[c] is the number of the first tile
 * of copy c (first[copies] = tiles, empty copies left out, so first[]
 * strictly increases). The descriptors travel in the kernel's parameters
 * (__grid_constant__, read from the constant bank). Each block takes tiles
 * blockIdx.x, + gridDim.x, ..., finds a tile's copy by binary search in
 * first[], and copies it with the widest word the two addresses allow:
 * 16 bytes when dst and src agree modulo 16 (then 8, 4, 2, else single
 * bytes), after a head of bytes that brings dst to a word boundary and
 * before a tail of bytes. A thread issues its (up to) four word loads
 * before its stores, so 16 KB tiles keep four 16-byte loads in flight per
 * thread.
 *
 * Two parameter sizes: up to K_COPY_SMALL copies fit the classic 4 KB of
 * kernel parameters; larger batches use K_CUDA_COPY_BATCH_MAX (about 28
 * KB: CUDA 12.1+ on Volta and later takes up to 32764 bytes).
 */
#include <stdlib.h>

#include "k_device.cuh"

namespace
{

#define K_COPY_TILE 16384 /* bytes: K_CUDA_THREADS x 4 x 16 */
#define K_COPY_SMALL 128
#define K_COPY_UNROLL 4

struct k_copy_desc {
    unsigned char *dst;
    const unsigned char *src;
    size_t bytes;
};

template <int CAP> struct k_copy_params {
    uint32_t copies;         /* descriptors used, 1 .. CAP */
    uint32_t tiles;          /* tiles in all */
    uint32_t first[CAP + 1]; /* first tile of each copy; first[copies] = tiles */
    k_copy_desc c[CAP];
};
static_assert(sizeof(k_copy_params<K_COPY_SMALL>) <= 4096, "the small batch fits 4 KB of parameters");
static_assert(sizeof(k_copy_params<K_CUDA_COPY_BATCH_MAX>) <= 32764, "the large batch fits 32764 bytes");

/* bytes (<= K_COPY_TILE) from s to d, in words of W bytes where d is
 * W-aligned; (d ^ s) % W == 0, so s is too. */
template <int W> __device__ __forceinline__ void k_copy_words(unsigned char *d, const unsigned char *s, size_t bytes)
{
    const unsigned t = threadIdx.x;
    size_t head = (W - (uintptr_t)d % W) % W;
    if (head > bytes) head = bytes;
    const size_t words = (bytes - head) / W;
    const size_t tail = head + words * W; /* bytes - tail < W */
    if (t < head) d[t] = s[t];
    if (t < bytes - tail) d[tail + t] = s[tail + t];
    d += head;
    s += head;
    for (size_t w = t; w < words; w += K_CUDA_THREADS * K_COPY_UNROLL) {
        k_vec v[K_COPY_UNROLL];
#pragma unroll
        for (int u = 0; u < K_COPY_UNROLL; u++)
            if (w + u * K_CUDA_THREADS < words) k_vec_load<W>(v[u], s + (w + u * K_CUDA_THREADS) * W);
#pragma unroll
        for (int u = 0; u < K_COPY_UNROLL; u++)
            if (w + u * K_CUDA_THREADS < words) k_vec_store<W>(d + (w + u * K_CUDA_THREADS) * W, v[u]);
    }
}

template <int CAP>
__global__ void __launch_bounds__(K_CUDA_THREADS) k_copy_kernel(const __grid_constant__ k_copy_params<CAP> p)
{
    for (uint32_t t = blockIdx.x; t < p.tiles; t += gridDim.x) {
        /* the copy c with first[c] <= t < first[c + 1] */
        uint32_t lo = 0, hi = p.copies;
        while (hi - lo > 1) {
            uint32_t mid = (lo + hi) / 2;
            if (p.first[mid] <= t)
                lo = mid;
            else
                hi = mid;
        }
        const size_t off = (size_t)(t - p.first[lo]) * K_COPY_TILE;
        const size_t left = p.c[lo].bytes - off;
        const size_t bytes = left < K_COPY_TILE ? left : K_COPY_TILE;
        unsigned char *d = p.c[lo].dst + off;
        const unsigned char *s = p.c[lo].src + off;
        const unsigned rel = (unsigned)(((uintptr_t)d ^ (uintptr_t)s) & 15u);
        if (rel == 0)
            k_copy_words<16>(d, s, bytes);
        else if (rel % 8 == 0)
            k_copy_words<8>(d, s, bytes);
        else if (rel % 4 == 0)
            k_copy_words<4>(d, s, bytes);
        else if (rel % 2 == 0)
            k_copy_words<2>(d, s, bytes);
        else
            k_copy_words<1>(d, s, bytes);
    }
}

/* Launches copies[*next ..] (as many as fit p) and advances *next past
 * them; a batch of only empty copies launches nothing. */
template <int CAP>
cudaError_t k_copy_launch(const k_cuda_copy_t *copies, int n, int *next, k_copy_params<CAP> *p, cudaStream_t stream)
{
    const uint64_t max_tiles = (uint64_t)1 << 31; /* first[] in 32 bits, and a grid-stride int */
    uint32_t used = 0;
    uint64_t tiles = 0;
    int i = *next;
    for (; i < n && used < CAP; i++) {
        const k_cuda_copy_t *c = &copies[i];
        if (c->bytes == 0 || c->dst == c->src) continue;
        uint64_t t = ((uint64_t)c->bytes + K_COPY_TILE - 1) / K_COPY_TILE;
        if (t >= max_tiles) return cudaErrorInvalidValue; /* a copy of 32 TiB */
        if (tiles + t >= max_tiles) break;                /* the next launch takes it */
        p->first[used] = (uint32_t)tiles;
        p->c[used].dst = (unsigned char *)c->dst;
        p->c[used].src = (const unsigned char *)c->src;
        p->c[used].bytes = c->bytes;
        tiles += t;
        used++;
    }
    *next = i;
    if (used == 0) return cudaSuccess;
    p->copies = used;
    p->tiles = (uint32_t)tiles;
    p->first[used] = (uint32_t)tiles;
    unsigned blocks;
    cudaError_t err = k_cuda_blocks((size_t)tiles * K_CUDA_THREADS, &blocks);
    if (err != cudaSuccess) return err;
    return k_cuda_launch(k_copy_kernel<CAP>, blocks, *p, stream);
}

} // namespace

int k_cuda_copy_batch(const k_cuda_copy_t *copies, int n, void *stream)
{
    if (n < 0 || (n > 0 && !copies)) return cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    cudaError_t err = cudaSuccess;
    int next = 0;
    if (n <= K_COPY_SMALL) {
        k_copy_params<K_COPY_SMALL> p; /* on the stack: under 4 KB */
        while (next < n && err == cudaSuccess) err = k_copy_launch(copies, n, &next, &p, s);
        return err;
    }
    /* About 28 KB: the heap, not a thread's stack. cudaLaunchKernel has
     * copied the parameters by the time it returns. */
    k_copy_params<K_CUDA_COPY_BATCH_MAX> *p =
        (k_copy_params<K_CUDA_COPY_BATCH_MAX> *)malloc(sizeof(k_copy_params<K_CUDA_COPY_BATCH_MAX>));
    if (!p) return cudaErrorMemoryAllocation;
    while (next < n && err == cudaSuccess) err = k_copy_launch(copies, n, &next, p, s);
    free(p);
    return err;
}
