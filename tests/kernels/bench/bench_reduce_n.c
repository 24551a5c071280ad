/*
 * bench_reduce_n.c - times k_reduce_n against what it replaces, chained
 * k_reduce (then k_div) calls, on every ISA path the CPU has, for buffers
 * that stay in L1, in L2, and that do not fit any cache. Built by meson,
 * not run as a test (timings are no pass/fail on a shared machine):
 *
 *   build/tests/kernels/bench/bench_reduce_n [seconds per row and variant, default 0.6]
 *
 * Each row: the dtype, n sources, divisor, bytes per buffer, then the best
 * burst of each variant in GB/s, counting every byte read and written once
 * ((n + 1) x buffer bytes per call, whatever the variant re-reads), and
 * the ratio reduce_n / chain.
 */
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

/* dst = reduce of srcs, the way the runtime did it before k_reduce_n. */
static void chained(void *dst, const void *const *srcs, int n, size_t count, k_dtype_t dtype, int64_t divisor)
{
    k_reduce(dst, srcs[0], srcs[1], count, dtype, K_OP_SUM);
    for (int j = 2; j < n; j++) k_reduce(dst, dst, srcs[j], count, dtype, K_OP_SUM);
    if (divisor > 1) k_div(dst, dst, count, dtype, divisor);
}

/* GB/s of one burst of calls lasting at least `seconds`. */
static double burst(int use_n, void *dst, const void *const *srcs, int n, size_t count, k_dtype_t dtype,
                    int64_t divisor, double seconds)
{
    double bytes = (double)(n + 1) * (double)count * (double)k_dtype_size(dtype);
    /* enough calls between two clock reads that reading it costs nothing */
    long batch = 1 + (long)(1e6 / bytes), calls = 0;
    double start = now_s(), elapsed;
    do {
        for (long k = 0; k < batch; k++) {
            if (use_n)
                k_reduce_n(dst, srcs, n, count, dtype, K_OP_SUM, divisor);
            else
                chained(dst, srcs, n, count, dtype, divisor);
        }
        calls += batch;
        elapsed = now_s() - start;
    } while (elapsed < seconds);
    return bytes * (double)calls / elapsed * 1e-9;
}

/* Best of BURSTS short bursts of each variant, alternating, so that both
 * see the same machine: on a shared machine the best burst is the one that
 * ran undisturbed. */
#define BURSTS 30

static void measure(void *dst, const void *const *srcs, int n, size_t count, k_dtype_t dtype, int64_t divisor,
                    double seconds, double *chain_gbs, double *reduce_n_gbs)
{
    *chain_gbs = *reduce_n_gbs = 0;
    for (int b = 0; b < BURSTS; b++) {
        double c = burst(0, dst, srcs, n, count, dtype, divisor, seconds / BURSTS);
        double r = burst(1, dst, srcs, n, count, dtype, divisor, seconds / BURSTS);
        *chain_gbs = c > *chain_gbs ? c : *chain_gbs;
        *reduce_n_gbs = r > *reduce_n_gbs ? r : *reduce_n_gbs;
    }
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 0.6;
    static const size_t buffer_bytes[] = {8 << 10, 256 << 10, 16 << 20};
    static const struct {
        k_dtype_t dtype;
        const char *name;
        int n;
        int64_t divisor;
    } rows[] = {
        {K_DTYPE_F32, "f32", 2, 1},   {K_DTYPE_F32, "f32", 2, 2}, {K_DTYPE_F32, "f32", 4, 1},
        {K_DTYPE_F16, "f16", 2, 1},   {K_DTYPE_F16, "f16", 4, 1}, {K_DTYPE_F16, "f16", 4, 4},
        {K_DTYPE_BF16, "bf16", 4, 1},
    };
    size_t max_bytes = buffer_bytes[sizeof(buffer_bytes) / sizeof(buffer_bytes[0]) - 1];
    unsigned char *buf[N_MAX + 1];
    for (int j = 0; j <= N_MAX; j++) {
        buf[j] = malloc(max_bytes);
        if (!buf[j]) {
            fprintf(stderr, "bench_reduce_n: out of memory\n");
            return 1;
        }
        /* small values: no overflow or subnormal slow paths in any dtype */
        for (size_t i = 0; i < max_bytes / 2; i++)
            ((unsigned short *)buf[j])[i] = 0x3C00 + (unsigned short)((i * 7 + (size_t)j) % 64);
    }
    const void *srcs[N_MAX] = {buf[1], buf[2], buf[3], buf[4]};

    printf("%-6s %-5s %2s %7s %10s %12s %12s %8s\n", "isa", "type", "n", "divisor", "bytes", "chain GB/s", "reduce_n",
           "ratio");
    for (int i = 0; i < K_ISA_COUNT; i++) {
        if (k_isa_set((k_isa_t)i) != 0) continue;
        for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
            for (size_t b = 0; b < sizeof(buffer_bytes) / sizeof(buffer_bytes[0]); b++) {
                size_t count = buffer_bytes[b] / k_dtype_size(rows[r].dtype);
                double chain, one;
                measure(buf[0], srcs, rows[r].n, count, rows[r].dtype, rows[r].divisor, seconds, &chain, &one);
                printf("%-6s %-5s %2d %7lld %10zu %12.1f %12.1f %8.2f\n", k_isa_name((k_isa_t)i), rows[r].name,
                       rows[r].n, (long long)rows[r].divisor, buffer_bytes[b], chain, one, one / chain);
                fflush(stdout);
            }
        }
    }
    for (int j = 0; j <= N_MAX; j++) free(buf[j]);
    return 0;
}
