/*
 * test_gpu_layout.c - k_cuda_to_channels_last / k_cuda_from_channels_last
 * against their CPU twins (k_cuda_layout.h), bit for bit: every dtype pair
 * of f32/f16/bf16 on random raw bits (NaNs included), the shapes the cuda
 * backend moves (ResNet weights OIHW -> KRSC with the stem's 3 -> 8
 * padding, activations), outputs poisoned first; then refusals.
 *
 *   test_gpu_layout    exit 0 pass, 1 fail, 77 skip (no usable GPU)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "cuda_ok.h"
#include "k_cuda_layout.h"
#include "rand.h"

static const k_dtype_t dtypes[] = {K_DTYPE_F32, K_DTYPE_F16, K_DTYPE_BF16};

static void check_case(test_rng_t *rng, cudaStream_t stream, size_t n, size_t c, size_t cs, size_t hw, int si, int di,
                       int to_cl)
{
    const k_dtype_t sd = dtypes[si], dd = dtypes[di];
    const size_t ss = k_dtype_size(sd), ds = k_dtype_size(dd);
    const size_t in = n * hw * (to_cl ? c : cs), out = n * hw * (to_cl ? cs : c);
    unsigned char *src = malloc(in * ss), *want = malloc(out * ds), *got = malloc(out * ds);
    void *dsrc, *ddst;
    for (size_t i = 0; i < in * ss; i++) src[i] = (unsigned char)test_rng_u64(rng);
    CUDA_OK(cudaMalloc(&dsrc, in * ss));
    CUDA_OK(cudaMalloc(&ddst, out * ds));
    CUDA_OK(cudaMemcpy(dsrc, src, in * ss, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(ddst, 0xA5, out * ds));
    memset(want, 0x5A, out * ds);
    int tw = to_cl ? k_twin_to_channels_last(want, dd, src, sd, n, c, cs, hw)
                   : k_twin_from_channels_last(want, dd, src, sd, n, c, cs, hw);
    int kr = to_cl ? k_cuda_to_channels_last(ddst, dd, dsrc, sd, n, c, cs, hw, stream)
                   : k_cuda_from_channels_last(ddst, dd, dsrc, sd, n, c, cs, hw, stream);
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaMemcpy(got, ddst, out * ds, cudaMemcpyDeviceToHost));
    CHECK(tw == 0 && kr == 0, "twin %d, kernel %d (%s)", tw, kr, k_cuda_error_string(kr));
    size_t bad = 0;
    for (size_t i = 0; i < out * ds; i++) bad += got[i] != want[i];
    CHECK(bad == 0, "%s dtype %d -> %d n %zu c %zu/%zu hw %zu: %zu of %zu bytes differ from the twin",
          to_cl ? "to_channels_last" : "from_channels_last", (int)sd, (int)dd, n, c, cs, hw, bad, out * ds);
    cudaFree(dsrc);
    cudaFree(ddst);
    free(src);
    free(want);
    free(got);
}

int main(void)
{
    gpu_test_open("test_gpu_layout");
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    test_rng_t rng = test_rng_seeded(TEST_RNG_SEED);
    /* (n, c, c_stored, hw): the stem's weights, a 3x3 and a 1x1 conv of
     * ResNet-50, the fc-sized one, odd ones, an activation batch. */
    static const size_t shapes[][4] = {{64, 3, 8, 49}, {64, 64, 64, 9}, {256, 1024, 1024, 1}, {1000, 2048, 2048, 1},
                                       {3, 5, 8, 7},   {1, 1, 1, 1},    {32, 3, 8, 1024}};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int si = 0; si < 3; si++)
            for (int di = 0; di < 3; di++)
                for (int to = 0; to < 2; to++)
                    check_case(&rng, stream, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], si, di, to);
    float *d;
    CUDA_OK(cudaMalloc((void **)&d, 64));
    CHECK(k_cuda_to_channels_last(d, K_DTYPE_F32, d + 8, K_DTYPE_F32, 1, 9, 8, 1, stream) == K_CUDA_ERR_INVALID_VALUE,
          "c > c_stored accepted");
    CHECK(k_cuda_from_channels_last(d, K_DTYPE_I32, d + 8, K_DTYPE_F32, 1, 1, 1, 1, stream) == K_CUDA_ERR_INVALID_VALUE,
          "an i32 destination accepted");
    cudaFree(d);
    cudaStreamDestroy(stream);
    printf("test_gpu_layout: %d checks, %d failures -> %s\n", checks, failures, failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
