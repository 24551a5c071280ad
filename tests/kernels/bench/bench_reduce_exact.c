/*
 * bench_reduce_exact.c - times k_reduce_n_exact on every ISA path the CPU
 * has against the ordinary k_reduce_n (SUM, best path), f32, n = 2, 3, 4
 * sources of 8M elements (32 MiB each: no cache holds them). Built by
 * meson, not run as a test (timings are no pass/fail on a shared machine):
 *
 *   build/tests/kernels/bench/bench_reduce_exact [elements, default 8388608] [repetitions, default 9]
 *
 * Two inputs: "grad", gradient-like values (a sum of three uniforms times
 * 1e-3, one in ten exactly zero), which the vector kernels certify almost
 * everywhere; and "wide", where one element in 64 has inputs 2^40 apart,
 * so that in every vector of the AVX-512 kernel (32 elements a step) about
 * 40% of the steps go to the scalar kernel. Each row: ns per element of the
 * best of the repetitions (variants interleaved, so that they see the same
 * machine), and the ratio to k_reduce_n.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "k_cpu.h"

#define N_MAX 4

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;
static double unit(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545F4914F6CDD1DULL) >> 11) * 0x1p-53;
}

int main(int argc, char **argv)
{
    const size_t count = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)8 << 20;
    const int reps = argc > 2 ? atoi(argv[2]) : 9;
    float *src[N_MAX], *dst = malloc(count * 4);
    for (int k = 0; k < N_MAX; k++) src[k] = malloc(count * 4);
    if (!dst) return 1;
    printf("bench_reduce_exact: f32, %zu elements, best of %d; ns per element (ratio to k_reduce_n)\n", count, reps);
    printf("%-5s %2s %12s", "input", "n", "k_reduce_n");
    for (int isa = 0; isa < K_ISA_COUNT; isa++)
        if (isa <= (int)k_isa_best()) printf("  %19s", k_isa_name((k_isa_t)isa));
    printf("\n");
    for (int wide = 0; wide < 2; wide++) {
        for (int k = 0; k < N_MAX; k++) {
            if (!src[k]) return 1;
            for (size_t i = 0; i < count; i++) {
                double v = (unit() + unit() + unit() - 1.5) * 1e-3;
                if (unit() < 0.1) v = 0;
                if (wide && i % 64 == 17 && k == 1) v *= 0x1p40;
                src[k][i] = (float)v;
            }
        }
        for (int n = 2; n <= N_MAX; n++) {
            double best[1 + K_ISA_COUNT];
            for (int v = 0; v <= K_ISA_COUNT; v++) best[v] = 1e30;
            const void *srcs[N_MAX] = {src[0], src[1], src[2], src[3]};
            for (int r = 0; r < reps; r++)
                for (int v = 0; v <= K_ISA_COUNT; v++) {
                    const k_isa_t isa = v == 0 ? k_isa_best() : (k_isa_t)(v - 1);
                    if (k_isa_set(isa) != 0) continue;
                    const double t0 = now_s();
                    if (v == 0)
                        k_reduce_n(dst, srcs, n, count, K_DTYPE_F32, K_OP_SUM, 1);
                    else
                        k_reduce_n_exact(dst, srcs, n, count, K_DTYPE_F32, 1);
                    const double t = now_s() - t0;
                    if (t < best[v]) best[v] = t;
                }
            k_isa_set(k_isa_best());
            printf("%-5s %2d %12.3f", wide ? "wide" : "grad", n, best[0] * 1e9 / (double)count);
            for (int v = 1; v <= K_ISA_COUNT; v++)
                if (v - 1 <= (int)k_isa_best())
                    printf("  %11.3f (%5.2fx)", best[v] * 1e9 / (double)count, best[v] / best[0]);
            printf("\n");
        }
    }
    for (int k = 0; k < N_MAX; k++) free(src[k]);
    free(dst);
    return 0;
}
