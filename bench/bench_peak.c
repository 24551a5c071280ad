/*
 * bench_peak.c - hora-bench-peak: the arithmetic peak of this CPU's cores,
 * measured, for each unit the trainer's precisions run on: f32 FMA
 * (AVX-512 and AVX2), bf16 dot products (AVX512-BF16 vdpbf16ps) and f16 FMA
 * (AVX512-FP16 vfmadd231ph). bench/train-vs-torch divides hora's ResNet-50
 * FLOP/s by it.
 *
 *   hora-bench-peak [--threads T] [--reps R] [--json FILE]
 *
 * Each kernel keeps 24 independent accumulator chains in zmm registers
 * (enough to hide any of these instructions' latency behind its
 * throughput) and times 20 M iterations; the best of R repetitions is the
 * peak (other processes only ever slow a repetition down). One core is
 * measured; T threads' peak is T times it (the cores are alike). A unit the
 * CPU does not have (cpuid, as /proc/cpuinfo's flags) is reported absent.
 * AMX tiles are not timed: where /proc/cpuinfo lists amx_bf16 the bf16 peak
 * is also given from the AMX-BF16 rate, 1024 FLOP a cycle a core, at the
 * clock /proc/cpuinfo gives.
 *
 * Why measure: on the Intel Xeon these machines have (AMX hidden by the
 * hypervisor), vdpbf16ps delivers about half the FLOP/s of f32 FMA, not
 * twice as its width suggests, which is why bf16 training is slower there
 * than fp32 (trainer/backends/cpu/README.md).
 */
#include <immintrin.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_cli.h"
#include "bench_output.h"

#define PEAK_CHAINS 24
#define PEAK_ITERS 20000000L

/* The kernels: acc[i] = op(acc[i], b, c) for every chain, iters times;
 * returns FLOP/s (a multiply-add counts 2). The sum of the chains goes to a
 * volatile so the compiler keeps the work. */
static volatile float peak_sink;

/* The body every kernel shares: chains accumulators acc[i] start at init,
 * each runs acc[i] = step iters times (timed: the seconds are left in dt),
 * then add folds them into acc[0]. Fully unrolled, so every chain stays in
 * a register. */
#define PEAK_RUN(chains, init, step, add)                                            \
    for (int i = 0; i < (chains); i++) acc[i] = (init);                              \
    double t0 = bench_wall_s();                                                      \
    for (long n = 0; n < iters; n++) {                                               \
        _Pragma("GCC unroll 24") for (int i = 0; i < (chains); i++) acc[i] = (step); \
    }                                                                                \
    double dt = bench_wall_s() - t0;                                                 \
    for (int i = 1; i < (chains); i++) acc[0] = (add)

__attribute__((target("avx512f"))) static double peak_f32_avx512(long iters)
{
    __m512 acc[PEAK_CHAINS];
    const __m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
    PEAK_RUN(PEAK_CHAINS, _mm512_set1_ps((float)i), _mm512_fmadd_ps(acc[i], b, c), _mm512_add_ps(acc[0], acc[i]));
    peak_sink = _mm512_reduce_add_ps(acc[0]);
    return (double)iters * PEAK_CHAINS * 16 * 2 / dt;
}

/* 16 accumulators: AVX2 has 16 ymm registers. */
__attribute__((target("avx2,fma"))) static double peak_f32_avx2(long iters)
{
    __m256 acc[16];
    const __m256 b = _mm256_set1_ps(1.0000001f), c = _mm256_set1_ps(1e-7f);
    PEAK_RUN(16, _mm256_set1_ps((float)i), _mm256_fmadd_ps(acc[i], b, c), _mm256_add_ps(acc[0], acc[i]));
    float lanes[8];
    _mm256_storeu_ps(lanes, acc[0]);
    peak_sink = lanes[0];
    return (double)iters * 16 * 8 * 2 / dt;
}

/* vdpbf16ps: 16 f32 lanes, each += two bf16 products: 32 multiply-adds. */
__attribute__((target("avx512f,avx512bf16"))) static double peak_bf16(long iters)
{
    __m512 acc[PEAK_CHAINS];
    const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3f80); /* 1.0 */
    const __m512bh c = (__m512bh)_mm512_set1_epi16(0x3380); /* 6e-8 */
    PEAK_RUN(PEAK_CHAINS, _mm512_set1_ps((float)i), _mm512_dpbf16_ps(acc[i], b, c), _mm512_add_ps(acc[0], acc[i]));
    peak_sink = _mm512_reduce_add_ps(acc[0]);
    return (double)iters * PEAK_CHAINS * 32 * 2 / dt;
}

/* vfmadd231ph: 32 f16 lanes. */
__attribute__((target("avx512f,avx512fp16"))) static double peak_f16(long iters)
{
    __m512h acc[PEAK_CHAINS];
    const __m512h b = _mm512_set1_ph((_Float16)1.0f), c = _mm512_set1_ph((_Float16)0.0f);
    PEAK_RUN(PEAK_CHAINS, _mm512_set1_ph((_Float16)(float)i), _mm512_fmadd_ph(acc[i], b, c),
             _mm512_add_ph(acc[0], acc[i]));
    peak_sink = (float)_mm512_reduce_add_ph(acc[0]);
    return (double)iters * PEAK_CHAINS * 32 * 2 / dt;
}

/* One line of the table: the kernel, its unit, then what was found. */
__attribute__((format(printf, 3, 4))) static void peak_print_row(const char *name, const char *unit, const char *format,
                                                                 ...)
{
    static const bench_column_t columns[] = {{.width = 9, .left = 1}, {.width = 42, .left = 1}, {.left = 1}};
    bench_table_t table = {.out = stdout, .columns = columns, .column_count = 3, .indent = "  "};
    char text[256];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof(text), format, args);
    va_end(args);
    bench_table_text(&table, name);
    bench_table_text(&table, unit);
    bench_table_text(&table, text);
    bench_table_end_row(&table);
}

/* /proc/cpuinfo: whether `flag` is listed, and the clock (MHz, 0 if none). */
static int cpuinfo_flag(const char *flag, double *mhz)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    int found = 0;
    size_t len = strlen(flag);
    if (mhz) *mhz = 0;
    if (f == NULL) return 0;
    while (fgets(line, sizeof(line), f)) {
        if (mhz && *mhz == 0 && strncmp(line, "cpu MHz", 7) == 0) {
            const char *colon = strchr(line, ':');
            if (colon) *mhz = atof(colon + 1);
        }
        if (strncmp(line, "flags", 5) != 0 || found) continue;
        for (const char *p = strstr(line, flag); p; p = strstr(p + 1, flag))
            if (p[-1] == ' ' && (p[len] == ' ' || p[len] == '\n')) found = 1;
    }
    fclose(f);
    return found;
}

typedef struct {
    const char *name, *unit;
    const char *flag; /* /proc/cpuinfo flag that must be there */
    double (*run)(long iters);
    double flops; /* best of the repetitions, one core */
    int present;
} peak_kernel_t;

int main(int argc, char **argv)
{
    int threads, reps;
    const char *json = NULL;
    const bench_cli_option_t table[] = {
        {.long_name = "threads",
         .kind = BENCH_CLI_INT,
         .dest = &threads,
         .value = "1",
         .min = 1,
         .max = 4096,
         .value_name = "T",
         .help = "report the peak of T cores (T times one core's)"},
        {.long_name = "reps",
         .kind = BENCH_CLI_INT,
         .dest = &reps,
         .value = "5",
         .min = 1,
         .max = 1000,
         .value_name = "R",
         .help = "repetitions; the best counts"},
        BENCH_CLI_JSON(&json, "write the peaks as one JSON object"),
        {0},
    };
    const bench_cli_t cli = {
        .program = "hora-bench-peak",
        .synopsis = "hora-bench-peak [flags]",
        .about = "The measured arithmetic peak of one core: f32 FMA (AVX-512, AVX2), bf16 dot products, f16 FMA.",
        .options = table,
    };
    bench_cli_result_t parsed = bench_cli_parse(&cli, argc, argv);
    if (parsed != BENCH_CLI_RUN) return parsed;
    peak_kernel_t kernels[] = {
        {"f32", "AVX-512 FMA (vfmadd231ps zmm)", "avx512f", peak_f32_avx512, 0, 0},
        {"f32-avx2", "AVX2 FMA (vfmadd231ps ymm)", "avx2", peak_f32_avx2, 0, 0},
        {"bf16", "AVX512-BF16 dot product (vdpbf16ps zmm)", "avx512_bf16", peak_bf16, 0, 0},
        {"f16", "AVX512-FP16 FMA (vfmadd231ph zmm)", "avx512_fp16", peak_f16, 0, 0},
    };
    const int count = (int)(sizeof(kernels) / sizeof(kernels[0]));
    double mhz;
    int amx = cpuinfo_flag("amx_bf16", &mhz);
    for (int k = 0; k < count; k++) kernels[k].present = cpuinfo_flag(kernels[k].flag, NULL);
    /* Interleaved repetitions: a burst of load slows one kernel's run, not
     * all of one kernel's. */
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < count; k++)
            if (kernels[k].present) {
                double f = kernels[k].run(PEAK_ITERS);
                if (f > kernels[k].flops) kernels[k].flops = f;
            }
    printf("hora-bench-peak: one core, best of %d, x %d thread%s; clock %.0f MHz (/proc/cpuinfo)\n", reps, threads,
           threads == 1 ? "" : "s", mhz);
    for (int k = 0; k < count; k++) {
        if (!kernels[k].present) {
            peak_print_row(kernels[k].name, kernels[k].unit, "absent (no %s)", kernels[k].flag);
            continue;
        }
        peak_print_row(kernels[k].name, kernels[k].unit,
                       "%8.1f GFLOP/s a core, %8.1f on %d (%.1f FLOP/cycle at %.0f MHz)", kernels[k].flops / 1e9,
                       threads * kernels[k].flops / 1e9, threads, mhz > 0 ? kernels[k].flops / (mhz * 1e6) : 0.0, mhz);
    }
    double amx_flops = amx && mhz > 0 ? 1024.0 * mhz * 1e6 : 0;
    if (amx)
        peak_print_row("bf16-amx", "AMX-BF16 tiles", "%8.1f GFLOP/s a core (1024 FLOP/cycle, not timed)",
                       amx_flops / 1e9);
    else
        peak_print_row("bf16-amx", "AMX-BF16 tiles", "absent (no amx_bf16)");
    /* The bf16 peak: the fastest unit bf16 can run on here. */
    double bf16 = kernels[2].flops > amx_flops ? kernels[2].flops : amx_flops;
    if (json) {
        bench_json_t out;
        if (bench_json_open(&out, "hora-bench-peak", json, 0) != 0) return 1;
        bench_json_object(&out, NULL);
        bench_json_integer(&out, "threads", threads);
        bench_json_integer(&out, "reps", reps);
        bench_json_number(&out, "mhz", "%.1f", mhz, 1);
        bench_json_bool(&out, "amx_bf16", amx);
        for (int k = 0; k < count; k++) {
            char key[32];
            snprintf(key, sizeof(key), "%s_flops", kernels[k].name);
            bench_json_number(&out, key, "%.4g", threads * kernels[k].flops, 1);
        }
        bench_json_number(&out, "bf16_peak_flops", "%.4g", threads * bf16, 1);
        if (bench_json_close(&out, "hora-bench-peak", json) != 0) return 1;
    }
    return 0;
}
