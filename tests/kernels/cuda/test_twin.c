/*
 * test_twin.c - the CPU twins of the CUDA kernels (k_twin_* of k_cuda.h)
 * against kernels/cpu, which ties the CUDA kernels (checked against the
 * twins on a GPU by tests/kernels/cuda) to the CPU library without one:
 *
 *  - k_numeric.h's conversions (what the kernels and the twins call):
 *    every f16 and bf16 value widened, and f32 values of every sign and
 *    exponent with random mantissas and the patterns around each rounding
 *    point narrowed, against k_f16_to_f32 & co. (kernels/cpu wraps the
 *    same functions, so this holds as long as there is one definition;
 *    the kernels test, conversions.c, checks it against a reference);
 *  - k_twin_reduce_n against k_reduce_n: every dtype x op, n = 1..8, every
 *    count 0..70 and a few large ones, divisors 1 .. INT64_MAX, every
 *    source and dst at its own offset (1..15 bytes where the element size
 *    allows), in place (dst == a source), a source given twice, NaN / inf /
 *    subnormal inputs in half the cases, on every ISA path of this CPU;
 *  - k_twin_scale against k_scale and k_twin_cast against k_cast (all 121
 *    pairs, rounding ties, saturation, values that need one rounding);
 *  - k_twin_copy_batch against memcpy (random sizes and alignments, a
 *    batch of thousands);
 *  - bad arguments: K_CUDA_ERR_INVALID_VALUE, nothing written.
 *
 * Outputs are poisoned before each call, one side with a NaN pattern and
 * the other with a finite one (swapped from case to case), so an element
 * left unwritten cannot pass; guard bytes around every output must stay.
 * Comparisons are on bits. A NaN equals only a NaN, and only where k_cpu.h
 * leaves the payload open (SUM, PROD, division, arithmetic); elsewhere
 * (copies, MIN/MAX without division, f32/f16/bf16 casts) the bits must
 * match too.
 *
 * The cases' values, the random elements and the comparison come from
 * twin_data.c, shared with tests/kernels/cuda/test_gpu_kernels.c.
 *
 * Exit status 0 = all passed, 1 = something failed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "k_cpu.h"
#include "k_cuda.h"
#include "k_numeric.h"
#include "rand.h"
#include "twin_data.h"

#define N_MAX 8
#define SMALL_COUNT_MAX 70
#define GUARD 32

static const size_t large_counts[] = {1000, 4099, 65537};
#define N_LARGE (sizeof(large_counts) / sizeof(large_counts[0]))

static test_rng_t rng;
static int isa_count;                                         /* paths this CPU has: K_ISA_SCALAR .. isa_count - 1 */
static twin_report_t report = {"twin", "kernels/cpu", 20, 0}; /* the first 20 failures in detail */

/* ---- buffers with guard bytes --------------------------------------------------- */

typedef struct {
    unsigned char *mem; /* GUARD + offset + bytes + GUARD */
    unsigned char *p;   /* the data, offset bytes past the front guard */
    size_t bytes;
    size_t offset;
} buf_t;

static buf_t buf_new(size_t bytes, size_t offset)
{
    buf_t b = {malloc(2 * GUARD + offset + bytes + 1), NULL, bytes, offset};
    if (!b.mem) {
        fprintf(stderr, "FAIL: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    memset(b.mem, TWIN_GUARD_BYTE, 2 * GUARD + offset + bytes + 1);
    b.p = b.mem + GUARD + offset;
    return b;
}

static void buf_free(buf_t *b) { free(b->mem); }

static int buf_guards_ok(const buf_t *b)
{
    for (size_t i = 0; i < GUARD + b->offset; i++)
        if (b->mem[i] != TWIN_GUARD_BYTE) return 0;
    for (size_t i = 0; i < GUARD + 1; i++)
        if (b->p[b->bytes + i] != TWIN_GUARD_BYTE) return 0;
    return 1;
}

/* Offset of a buffer of dtype: a multiple of the element size in 0..15
 * (k_cpu.h's kernels read elements through typed pointers). */
/* The end of a scale or cast case: the twin's output b against kernels/cpu's a (count elements of dtype, NaNs loose
 * or bitwise), the guards of a, b and src, and the three buffers freed. */
static void case_check(const char *what, k_dtype_t dtype, buf_t *src, buf_t *a, buf_t *b, size_t count, int loose)
{
    long bad = twin_compare(&report, what, dtype, b->p, a->p, count, loose);
    CHECK(bad == 0, "%s: %ld elements differ", what, bad);
    CHECK(buf_guards_ok(a) && buf_guards_ok(b) && buf_guards_ok(src), "%s: a guard changed", what);
    buf_free(src);
    buf_free(a);
    buf_free(b);
}

static size_t random_offset(size_t size) { return twin_random_offset(&rng, size); }

/* ---- k_numeric.h's conversions ------------------------------------------------------ */

static void narrow_one(uint32_t bits)
{
    float x;
    memcpy(&x, &bits, 4);
    uint16_t h = k_num_f32_to_f16(x), hw = k_f32_to_f16(x);
    uint16_t b = k_num_f32_to_bf16(x), bw = k_f32_to_bf16(x);
    CHECK(h == hw, "k_num_f32_to_f16(0x%08x) = 0x%04x, k_f32_to_f16 0x%04x", bits, h, hw);
    CHECK(b == bw, "k_num_f32_to_bf16(0x%08x) = 0x%04x, k_f32_to_bf16 0x%04x", bits, b, bw);
}

static void test_conversions(void)
{
    const int before = failures;
    for (uint32_t h = 0; h <= 0xFFFF; h++) {
        float a = k_num_f16_to_f32((uint16_t)h), b = k_f16_to_f32((uint16_t)h);
        float c = k_num_bf16_to_f32((uint16_t)h), d = k_bf16_to_f32((uint16_t)h);
        CHECK(memcmp(&a, &b, 4) == 0, "k_num_f16_to_f32(0x%04x) differs from k_f16_to_f32", h);
        CHECK(memcmp(&c, &d, 4) == 0, "k_num_bf16_to_f32(0x%04x) differs from k_bf16_to_f32", h);
    }
    /* Every sign and exponent: random mantissas, and for every number of
     * dropped bits d (13 for normal f16, up to 24 for its subnormals, 16
     * for bf16) the patterns at and around the halfway point, with the
     * kept lsb 0 and 1. */
    for (uint32_t se = 0; se < 512; se++) {
        const uint32_t top = se << 23;
        for (int i = 0; i < 512; i++) narrow_one(top | ((uint32_t)test_rng_u64(&rng) & 0x7FFFFFu));
        for (int d = 1; d <= 23; d++) {
            const uint32_t half = 1u << (d - 1), low_mask = (1u << d) - 1;
            const uint32_t lows[] = {0, 1, half - 1, half, half + 1, low_mask};
            for (int r = 0; r < 4; r++) {
                uint32_t high = ((uint32_t)test_rng_u64(&rng) & 0x7FFFFFu) & ~low_mask;
                for (int lsb = 0; lsb < 2; lsb++)
                    for (size_t l = 0; l < sizeof(lows) / sizeof(lows[0]); l++) {
                        uint32_t kept = d < 23 ? ((high & ~(1u << d)) | ((uint32_t)lsb << d)) : high;
                        narrow_one(top | (kept & 0x7FFFFFu) | (lows[l] & low_mask));
                    }
            }
        }
    }
    printf("%s conversions: k_numeric.h's f16/bf16 <-> f32 against k_cpu.h's\n", failures == before ? "ok  " : "FAIL");
}

/* ---- k_twin_reduce_n -------------------------------------------------------------- */

enum { ALIAS_NONE, ALIAS_FIRST, ALIAS_LAST, ALIAS_REPEAT, ALIAS_COUNT };

static long cases;

/* One case: the twin and k_reduce_n (on path isa) on the same inputs. */
static void reduce_case(k_dtype_t dtype, k_op_t op, int n, size_t count, int64_t divisor, int alias, int specials,
                        int isa)
{
    const size_t size = k_dtype_size(dtype), bytes = count * size;
    buf_t src[N_MAX], cpu_dst, twin_dst;
    unsigned char *in[N_MAX]; /* pristine inputs */
    for (int j = 0; j < n; j++) {
        src[j] = buf_new(bytes, random_offset(size));
        in[j] = malloc(bytes + 1);
        for (size_t i = 0; i < count; i++) twin_random_element(&rng, dtype, specials, src[j].p + i * size);
        memcpy(in[j], src[j].p, bytes);
    }
    if (alias == ALIAS_REPEAT && n > 1) memcpy(src[n - 1].p, src[0].p, bytes), memcpy(in[n - 1], in[0], bytes);
    cpu_dst = buf_new(bytes, random_offset(size));
    twin_dst = buf_new(bytes, random_offset(size));
    const int swap = (int)(cases++ & 1);
    memset(cpu_dst.p, swap ? TWIN_POISON_NAN : TWIN_POISON_FINITE, bytes);
    memset(twin_dst.p, swap ? TWIN_POISON_FINITE : TWIN_POISON_NAN, bytes);

    /* In place: dst is source a's buffer, in each run its own copy. */
    const int in_place = alias == ALIAS_FIRST ? 0 : alias == ALIAS_LAST ? n - 1 : -1;
    const void *cpu_srcs[N_MAX], *twin_srcs[N_MAX];
    buf_t twin_src_copy = {0};
    for (int j = 0; j < n; j++) cpu_srcs[j] = twin_srcs[j] = src[j].p;
    if (alias == ALIAS_REPEAT && n > 1) cpu_srcs[n - 1] = twin_srcs[n - 1] = src[0].p;
    void *cpu_out = cpu_dst.p, *twin_out = twin_dst.p;
    if (in_place >= 0) {
        twin_src_copy = buf_new(bytes, src[in_place].offset);
        memcpy(twin_src_copy.p, src[in_place].p, bytes);
        cpu_out = src[in_place].p;
        twin_out = twin_src_copy.p;
        twin_srcs[in_place] = twin_src_copy.p;
    }

    k_isa_set((k_isa_t)isa);
    k_reduce_n(cpu_out, cpu_srcs, n, count, dtype, op, divisor);
    int rc = k_twin_reduce_n(twin_out, twin_srcs, n, count, dtype, op, divisor);

    char what[160];
    snprintf(what, sizeof(what), "reduce_n %s %s n=%d count=%zu divisor=%lld alias=%d specials=%d isa=%s",
             twin_dtype_name[dtype], twin_op_name[op], n, count, (long long)divisor, alias, specials,
             k_isa_name((k_isa_t)isa));
    CHECK(rc == 0, "%s: returned %d", what, rc);
    /* Bits are specified for copies (n == 1, no division) and for MIN/MAX
     * without a division (the first NaN wins, as it is). */
    const int loose = !(divisor == 1 && (n == 1 || op == K_OP_MIN || op == K_OP_MAX));
    long bad = twin_compare(&report, what, dtype, twin_out, cpu_out, count, loose);
    CHECK(bad == 0, "%s: %ld elements differ", what, bad);
    CHECK(buf_guards_ok(&cpu_dst) && buf_guards_ok(&twin_dst), "%s: a guard byte changed", what);
    for (int j = 0; j < n; j++) {
        CHECK(buf_guards_ok(&src[j]), "%s: a guard byte of source %d changed", what, j);
        if (j != in_place && !(alias == ALIAS_REPEAT && j == n - 1))
            CHECK(memcmp(src[j].p, in[j], bytes) == 0, "%s: source %d changed", what, j);
    }
    if (in_place >= 0) {
        CHECK(buf_guards_ok(&twin_src_copy), "%s: a guard byte of the in-place dst changed", what);
        buf_free(&twin_src_copy);
    }
    for (int j = 0; j < n; j++) {
        buf_free(&src[j]);
        free(in[j]);
    }
    buf_free(&cpu_dst);
    buf_free(&twin_dst);
}

static void test_reduce_n(void)
{
    const int before = failures, checks_before = checks;
    long n_cases = 0;
    for (int d = 0; d < K_DTYPE_COUNT; d++)
        for (int o = 0; o < K_OP_COUNT; o++)
            for (int n = 1; n <= N_MAX; n++) {
                for (size_t count = 0; count <= SMALL_COUNT_MAX + N_LARGE; count++) {
                    const int large = count > SMALL_COUNT_MAX;
                    if (large && n != 1 && n != 2 && n != 3 && n != N_MAX) continue;
                    size_t c = large ? large_counts[count - SMALL_COUNT_MAX - 1] : count;
                    int64_t divisor = twin_divisors[n_cases % TWIN_DIVISOR_COUNT];
                    int alias = (int)(n_cases / 3 % ALIAS_COUNT);
                    int specials = (int)(n_cases / 2 % 2);
                    int isa = (int)(n_cases % (unsigned)isa_count);
                    reduce_case((k_dtype_t)d, (k_op_t)o, n, c, divisor, alias, specials, isa);
                    n_cases++;
                }
            }
    k_isa_set(k_isa_best());
    printf("%s reduce_n: %ld cases (every dtype x op, n 1..%d, counts 0..%d and large), %d checks\n",
           failures == before ? "ok  " : "FAIL", n_cases, N_MAX, SMALL_COUNT_MAX, checks - checks_before);
}

/* ---- k_twin_scale ------------------------------------------------------------------- */

static void test_scale(void)
{
    const int before = failures, checks_before = checks;
    long n_cases = 0;
    for (int d = 0; d < K_DTYPE_COUNT; d++)
        for (size_t f = 0; f < TWIN_FACTOR_COUNT; f++)
            for (size_t count = 0; count <= SMALL_COUNT_MAX + N_LARGE + 1; count++) {
                if (count % 5 != f % 5 && count <= SMALL_COUNT_MAX)
                    continue; /* every factor on a fifth of the small counts */
                const k_dtype_t dtype = (k_dtype_t)d;
                const size_t size = k_dtype_size(dtype);
                /* 300: k_scale's u8 table path (count >= 256). */
                size_t c = count <= SMALL_COUNT_MAX                 ? count
                           : count == SMALL_COUNT_MAX + N_LARGE + 1 ? 300
                                                                    : large_counts[count - SMALL_COUNT_MAX - 1];
                buf_t src = buf_new(c * size, random_offset(size));
                buf_t a = buf_new(c * size, random_offset(size)), b = buf_new(c * size, random_offset(size));
                const int specials = (int)(n_cases % 2), in_place = n_cases % 4 == 3;
                for (size_t i = 0; i < c; i++) twin_random_element(&rng, dtype, specials, src.p + i * size);
                memset(a.p, n_cases & 1 ? TWIN_POISON_NAN : TWIN_POISON_FINITE, c * size);
                memset(b.p, n_cases & 1 ? TWIN_POISON_FINITE : TWIN_POISON_NAN, c * size);
                if (in_place) {
                    memcpy(a.p, src.p, c * size);
                    memcpy(b.p, src.p, c * size);
                }
                k_isa_set((k_isa_t)(n_cases % (unsigned)isa_count));
                k_scale(a.p, in_place ? a.p : src.p, c, dtype, twin_factors[f]);
                int rc = k_twin_scale(b.p, in_place ? b.p : src.p, c, dtype, twin_factors[f]);
                char what[128];
                snprintf(what, sizeof(what), "scale %s factor=%g count=%zu in_place=%d", twin_dtype_name[d],
                         twin_factors[f], c, in_place);
                CHECK(rc == 0, "%s: returned %d", what, rc);
                case_check(what, dtype, &src, &a, &b, c, 1);
                n_cases++;
            }
    k_isa_set(k_isa_best());
    printf("%s scale: %ld cases (every dtype x %d factors), %d checks\n", failures == before ? "ok  " : "FAIL", n_cases,
           TWIN_FACTOR_COUNT, checks - checks_before);
}

/* ---- k_twin_cast --------------------------------------------------------------------- */

/* twin_data.h's inputs that need care in a cast, written over every third
 * random element (one draw each, only for the dtypes they are for). */
static void plant_cast_specials(k_dtype_t dtype, unsigned char *p, size_t count)
{
    for (size_t i = 0; i < count; i += 3) {
        const size_t size = k_dtype_size(dtype);
        unsigned char *e = p + i * size;
        if (dtype == K_DTYPE_F64) {
            double v = twin_cast_f64s[test_rng_below(&rng, TWIN_CAST_F64_COUNT)];
            memcpy(e, &v, 8);
        } else if (dtype == K_DTYPE_F32) {
            float v = (float)twin_cast_f64s[test_rng_below(&rng, TWIN_CAST_F64_COUNT)];
            memcpy(e, &v, 4);
        } else if (dtype == K_DTYPE_I64) {
            int64_t v = twin_cast_i64s[test_rng_below(&rng, TWIN_CAST_I64_COUNT)];
            memcpy(e, &v, 8);
        } else if (dtype == K_DTYPE_I32) {
            int64_t v = twin_cast_i64s[test_rng_below(&rng, TWIN_CAST_I64_COUNT)];
            int32_t w = (int32_t)(uint32_t)v;
            memcpy(e, &w, 4);
        }
    }
}

static void test_cast(void)
{
    const int before = failures, checks_before = checks;
    long n_cases = 0;
    for (int sd = 0; sd < K_DTYPE_COUNT; sd++)
        for (int dd = 0; dd < K_DTYPE_COUNT; dd++)
            for (size_t count = 0; count <= SMALL_COUNT_MAX + N_LARGE; count++) {
                const k_dtype_t src_dtype = (k_dtype_t)sd, dst_dtype = (k_dtype_t)dd;
                const size_t ss = k_dtype_size(src_dtype), ds = k_dtype_size(dst_dtype);
                size_t c = count <= SMALL_COUNT_MAX ? count : large_counts[count - SMALL_COUNT_MAX - 1];
                buf_t src = buf_new(c * ss, random_offset(ss));
                buf_t a = buf_new(c * ds, random_offset(ds)), b = buf_new(c * ds, random_offset(ds));
                for (size_t i = 0; i < c; i++) twin_random_element(&rng, src_dtype, (int)(n_cases % 2), src.p + i * ss);
                plant_cast_specials(src_dtype, src.p, c);
                memset(a.p, n_cases & 1 ? TWIN_POISON_NAN : TWIN_POISON_FINITE, c * ds);
                memset(b.p, n_cases & 1 ? TWIN_POISON_FINITE : TWIN_POISON_NAN, c * ds);
                k_cast(a.p, dst_dtype, src.p, src_dtype, c);
                int rc = k_twin_cast(b.p, dst_dtype, src.p, src_dtype, c);
                char what[128];
                snprintf(what, sizeof(what), "cast %s -> %s count=%zu", twin_dtype_name[sd], twin_dtype_name[dd], c);
                CHECK(rc == 0, "%s: returned %d", what, rc);
                /* NaN bits are specified for copies and among f32/f16/bf16. */
                const int narrow = sd != K_DTYPE_F64 && dd != K_DTYPE_F64;
                const int loose = !(sd == dd || (twin_is_float(src_dtype) && twin_is_float(dst_dtype) && narrow));
                case_check(what, dst_dtype, &src, &a, &b, c, loose);
                n_cases++;
            }
    printf("%s cast: %ld cases (all 121 pairs), %d checks\n", failures == before ? "ok  " : "FAIL", n_cases,
           checks - checks_before);
}

/* ---- k_twin_copy_batch --------------------------------------------------------------- */

/* n copies of random sizes (a few large) between random offsets of two
 * arenas, destinations disjoint; the whole destination arena, guards
 * included, must equal what memcpy makes of a copy of it. */
static void copy_case(int n, size_t max_bytes)
{
    const size_t slot = max_bytes + 32;
    const size_t arena = (size_t)(n ? n : 1) * slot;
    unsigned char *src = malloc(arena), *dst = malloc(arena), *want = malloc(arena);
    k_cuda_copy_t *copies = malloc(sizeof(*copies) * (size_t)(n ? n : 1));
    if (!src || !dst || !want || !copies) {
        fprintf(stderr, "FAIL: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < arena; i++) src[i] = (unsigned char)test_rng_u64(&rng);
    memset(dst, TWIN_GUARD_BYTE, arena);
    memcpy(want, dst, arena);
    for (int i = 0; i < n; i++) {
        /* destination i lives in slot i (disjoint); its source anywhere */
        size_t bytes = test_rng_below(&rng, 8) == 0 ? 0 : test_rng_below(&rng, (uint32_t)max_bytes + 1);
        size_t dst_off = (size_t)i * slot + test_rng_below(&rng, 16);
        size_t src_off = test_rng_below(&rng, (uint32_t)(arena - bytes + 1));
        copies[i].dst = dst + dst_off;
        copies[i].src = src + src_off;
        copies[i].bytes = bytes;
        memcpy(want + dst_off, src + src_off, bytes);
    }
    int rc = k_twin_copy_batch(copies, n);
    CHECK(rc == 0, "copy_batch n=%d: returned %d", n, rc);
    CHECK(memcmp(dst, want, arena) == 0, "copy_batch n=%d max_bytes=%zu: the destination arena differs", n, max_bytes);
    free(src);
    free(dst);
    free(want);
    free(copies);
}

static void test_copy_batch(void)
{
    const int before = failures, checks_before = checks;
    for (int n = 0; n <= 40; n++) copy_case(n, 300);
    copy_case(5, 200000);
    copy_case(3000, 64);
    printf("%s copy_batch: %d checks\n", failures == before ? "ok  " : "FAIL", checks - checks_before);
}

/* ---- bad arguments and empty calls --------------------------------------------------- */

static void test_api(void)
{
    const int before = failures;
    unsigned char a[16], b[16], poison[16];
    memset(poison, 0x77, sizeof(poison));
    memset(a, 1, sizeof(a));
    memcpy(b, poison, sizeof(b));
    const void *srcs[K_CUDA_MAX_SRCS + 1];
    for (int j = 0; j <= K_CUDA_MAX_SRCS; j++) srcs[j] = a;
    const int bad = K_CUDA_ERR_INVALID_VALUE;
    CHECK(k_twin_reduce_n(b, srcs, 0, 4, K_DTYPE_F32, K_OP_SUM, 1) == bad, "reduce_n n=0");
    CHECK(k_twin_reduce_n(b, srcs, K_CUDA_MAX_SRCS + 1, 4, K_DTYPE_F32, K_OP_SUM, 1) == bad, "reduce_n n=65");
    CHECK(k_twin_reduce_n(b, srcs, 2, 4, K_DTYPE_F32, K_OP_SUM, 0) == bad, "reduce_n divisor 0");
    CHECK(k_twin_reduce_n(b, srcs, 2, 4, K_DTYPE_COUNT, K_OP_SUM, 1) == bad, "reduce_n bad dtype");
    CHECK(k_twin_reduce_n(b, srcs, 2, 4, K_DTYPE_F32, K_OP_COUNT, 1) == bad, "reduce_n bad op");
    CHECK(k_twin_reduce_n(b, NULL, 2, 4, K_DTYPE_F32, K_OP_SUM, 1) == bad, "reduce_n srcs NULL");
    CHECK(k_twin_scale(b, a, 4, K_DTYPE_COUNT, 2.0) == bad, "scale bad dtype");
    CHECK(k_twin_cast(b, K_DTYPE_COUNT, a, K_DTYPE_F32, 4) == bad, "cast bad dst dtype");
    CHECK(k_twin_cast(b, K_DTYPE_F32, a, (k_dtype_t)-1, 4) == bad, "cast bad src dtype");
    CHECK(k_twin_copy_batch(NULL, 1) == bad, "copy_batch copies NULL");
    CHECK(k_twin_copy_batch(NULL, -1) == bad, "copy_batch n < 0");
    CHECK(memcmp(b, poison, sizeof(b)) == 0, "a refused call wrote its output");
    /* Empty calls succeed and touch nothing, whatever the pointers. */
    CHECK(k_twin_reduce_n(NULL, NULL, 3, 0, K_DTYPE_F16, K_OP_MAX, 3) == 0, "reduce_n count 0");
    CHECK(k_twin_reduce_n(NULL, srcs, K_CUDA_MAX_SRCS, 0, K_DTYPE_F16, K_OP_MAX, 3) == 0, "reduce_n count 0, n 64");
    CHECK(k_twin_scale(NULL, NULL, 0, K_DTYPE_I64, 2.0) == 0, "scale count 0");
    CHECK(k_twin_cast(NULL, K_DTYPE_F16, NULL, K_DTYPE_I64, 0) == 0, "cast count 0");
    CHECK(k_twin_cast(NULL, K_DTYPE_F16, NULL, K_DTYPE_F16, 0) == 0, "cast count 0, same dtype");
    CHECK(k_twin_copy_batch(NULL, 0) == 0, "copy_batch n 0");
    /* 64 sources, the most there may be. */
    float ones[3] = {1, 1, 1}, out[3] = {0, 0, 0};
    const void *many[K_CUDA_MAX_SRCS];
    for (int j = 0; j < K_CUDA_MAX_SRCS; j++) many[j] = ones;
    CHECK(k_twin_reduce_n(out, many, K_CUDA_MAX_SRCS, 3, K_DTYPE_F32, K_OP_SUM, 1) == 0 && out[0] == 64.0f &&
              out[2] == 64.0f,
          "reduce_n of 64 sources: %g", out[0]);
    printf("%s api: bad arguments refused, empty calls accepted\n", failures == before ? "ok  " : "FAIL");
}

int main(void)
{
    rng = test_rng_seeded(TEST_RNG_SEED);
    isa_count = (int)k_isa_best() + 1;
    printf("test_twin: isa paths scalar..%s, seed 0x%016llx\n", k_isa_name(k_isa_best()),
           (unsigned long long)rng.state);
    test_conversions();
    test_reduce_n();
    test_scale();
    test_cast();
    test_copy_batch();
    test_api();
    printf("test_twin: %d checks, %d failures -> %s\n", checks, failures, failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
