/*
 * reduce_n.c - k_reduce_n on one ISA, against a reference computed here
 * element by element (f16/bf16: widened, folded and divided in explicit
 * fp32 steps, rounded once to the dtype by ref_round; f32 in the same fp32
 * steps; f64 in fp64; MIN/MAX and the integers through ref_reduce, then
 * C division):
 *
 *  - every dtype x op, n = 1..8, every count 0..300 and a few large odd
 *    ones, divisors from 1 to INT64_MAX (3 and 7 among them), each source
 *    and dst at its own unaligned offset, dst == srcs[0], dst == srcs[n-1]
 *    and a source given twice, guard bytes around dst, inputs unchanged;
 *    the bits must also equal the scalar path's and, where k_cpu.h says
 *    so (f32, f64, integers, f16/bf16 MIN/MAX), those of the library's own
 *    chained k_reduce / k_div calls;
 *  - single rounding: f16/bf16 inputs for which rounding after every
 *    source gives another result (found by search; for f16 also partial
 *    sums past 65504) must come out rounded once, while the library's
 *    chain gives the chained result (which also checks the test's model
 *    of the chain);
 *  - count 0 and bad arguments write nothing.
 *
 * A NaN passes only where the reference is a NaN (any NaN for SUM/PROD,
 * whose payload k_cpu.h leaves open; the exact bits for MIN/MAX).
 * Inputs come from this file's own generator, reseeded for every ISA, so
 * every path sees the same inputs and the shared stream of the other
 * groups (kernels_test.h) is untouched.
 */
#include "kernels_test.h"

#define N_MAX 8
#define SMALL_COUNT_MAX 300
#define MAX_COUNT 65537

static const size_t large_counts[] = {1021, 4099, MAX_COUNT};

/* Rotated through the cases; 1 (no division, the common case) twice.
 * 2^62 + 2^38 + 1 goes to fp32 as 2^62 + 2^39, but to 2^62 through double
 * first (the tie 2^62 + 2^38 is a double). */
static const int64_t divisors[] = {
    1, 3, 2, 7, 1, 10, 255, 16777217, (1LL << 40) + 1, (1LL << 62) + (1LL << 38) + 1, INT64_MAX};
#define N_DIVISORS (sizeof(divisors) / sizeof(divisors[0]))

/* dst separate, dst == srcs[0], dst == srcs[n-1], srcs[n-1] == srcs[0] */
enum { ALIAS_NONE, ALIAS_FIRST, ALIAS_LAST, ALIAS_REPEAT, ALIAS_COUNT };

static test_rng_t gen;

/* ---- reference ----------------------------------------------------------------
 * In double arithmetic, every step rounded to the format the header
 * computes in (ref_round to fp32 for f32, f16 and bf16; fp64 for f64):
 * the sum, product or quotient of two such values is exact or correctly
 * rounded in double, and double (53 bits >= 2 x 24 + 2) rounding first
 * never changes an fp32 result, so each step is one fp32 rounding. */

static int is_half(k_dtype_t dtype) { return dtype == K_DTYPE_F16 || dtype == K_DTYPE_BF16; }

static int is_float(k_dtype_t dtype) { return is_half(dtype) || dtype == K_DTYPE_F32 || dtype == K_DTYPE_F64; }

static int is_minmax(k_op_t op) { return op == K_OP_MIN || op == K_OP_MAX; }

/* The exact value of a float element. */
static double ref_value(k_dtype_t dtype, const void *p)
{
    uint16_t h;
    float f;
    double d;
    switch (dtype) {
    case K_DTYPE_F16: memcpy(&h, p, 2); return ref_decode16(h, REF_F16);
    case K_DTYPE_BF16: memcpy(&h, p, 2); return ref_decode16(h, REF_BF16);
    case K_DTYPE_F32: memcpy(&f, p, 4); return f;
    default: memcpy(&d, p, 8); return d;
    }
}

/* A NaN element made quiet (the top fraction bit set), payload kept. */
static void ref_quiet(k_dtype_t dtype, void *p)
{
    if (is_half(dtype)) {
        uint16_t h;
        memcpy(&h, p, 2);
        h |= dtype == K_DTYPE_F16 ? 0x0200 : 0x0040;
        memcpy(p, &h, 2);
    } else if (dtype == K_DTYPE_F32) {
        uint32_t bits;
        memcpy(&bits, p, 4);
        bits |= 0x00400000u;
        memcpy(p, &bits, 4);
    } else {
        uint64_t bits;
        memcpy(&bits, p, 8);
        bits |= UINT64_C(0x0008000000000000);
        memcpy(p, &bits, 8);
    }
}

/* The result the header promises for element i of n sources (src[j] +
 * i * size), written to out. *any_nan_ok: the result is a NaN of any
 * payload (SUM/PROD); *either_zero_ok: a MIN/MAX over zeros, whose sign the
 * header leaves open. */
static void ref_reduce_n(k_dtype_t dtype, k_op_t op, const uint8_t *const *src, int n, size_t i, int64_t divisor,
                         void *out, int *any_nan_ok, int *either_zero_ok)
{
    const size_t size = k_dtype_size(dtype);
    *any_nan_ok = 0;
    *either_zero_ok = 0;
    memcpy(out, src[0] + i * size, size);
    if (dtype == K_DTYPE_BOOL)
        *(uint8_t *)out = *(uint8_t *)out != 0; /* every bool output is 0 or 1, even from one source */
    if (n == 1 && divisor == 1) return;         /* a copy: the bytes unchanged (bool: normalised) */

    if (is_minmax(op) || !is_float(dtype)) {
        /* MIN/MAX pick an input (no rounding, k_reduce's NaN rule) and the
         * integers wrap: the pairwise reference, folded in source order */
        for (int j = 1; j < n; j++) {
            int unused;
            ref_reduce(dtype, op, out, src[j] + i * size, out, &unused);
        }
    }
    if (!is_float(dtype)) { /* C's truncating division */
        int32_t x32;
        int64_t x64;
        if (divisor == 1) return;
        if (dtype == K_DTYPE_I32) {
            memcpy(&x32, out, 4);
            x32 = (int32_t)((int64_t)x32 / divisor);
            memcpy(out, &x32, 4);
        } else if (dtype == K_DTYPE_I8) {
            *(int8_t *)out = (int8_t)(*(int8_t *)out / divisor);
        } else if (dtype == K_DTYPE_I16) {
            int16_t x16;
            memcpy(&x16, out, 2);
            x16 = (int16_t)(x16 / divisor);
            memcpy(out, &x16, 2);
        } else if (dtype == K_DTYPE_U16) {
            uint16_t x16;
            memcpy(&x16, out, 2);
            x16 = (uint16_t)(x16 / divisor);
            memcpy(out, &x16, 2);
        } else if (dtype == K_DTYPE_BOOL) {
            *(uint8_t *)out = (uint8_t)((*(uint8_t *)out != 0) / divisor);
        } else if (dtype == K_DTYPE_I64) {
            memcpy(&x64, out, 8);
            x64 /= divisor;
            memcpy(out, &x64, 8);
        } else {
            *(uint8_t *)out = (uint8_t)(*(uint8_t *)out / divisor);
        }
        return;
    }

    ref_fmt_t calc = dtype == K_DTYPE_F64 ? REF_F64 : REF_F32;
    double v = ref_value(dtype, out);
    if (is_minmax(op) && isnan(v)) {
        /* the first NaN, quieted by f16/bf16 widening or by the division */
        if (is_half(dtype) || divisor > 1) ref_quiet(dtype, out);
        return;
    }
    if (!is_minmax(op))
        for (int j = 1; j < n; j++) {
            double x = ref_value(dtype, src[j] + i * size);
            v = ref_round(op == K_OP_SUM ? v + x : v * x, calc);
        }
    *either_zero_ok = is_minmax(op) && v == 0;
    if (divisor > 1) /* (float)divisor rounds once, from the int64 */
        v = ref_round(v / ref_round_i64(divisor, calc), calc);
    if (isnan(v)) {
        *any_nan_ok = 1;
        return;
    }
    if (is_half(dtype)) { /* the one rounding to the dtype */
        ref_fmt_t fmt = dtype == K_DTYPE_F16 ? REF_F16 : REF_BF16;
        uint16_t h = ref_encode16(ref_round(v, fmt), fmt);
        memcpy(out, &h, 2);
    } else if (dtype == K_DTYPE_F32) {
        float f = (float)v; /* exact: v is an fp32 value */
        memcpy(out, &f, 4);
    } else {
        memcpy(out, &v, 8);
    }
}

/* What the library's chain (the f32, f64, integer and f16/bf16 MIN/MAX
 * results are defined as) computes: k_reduce source by source, then k_div;
 * out of place, into out. */
static void library_chain(void *out, const void *const *srcs, int n, size_t count, k_dtype_t dtype, k_op_t op,
                          int64_t divisor)
{
    if (count == 0) return;
    if (n == 1 && dtype == K_DTYPE_BOOL)
        k_div(out, srcs[0], count, dtype, 1); /* bool's one source, normalised */
    else if (n == 1)
        memcpy(out, srcs[0], count * k_dtype_size(dtype));
    else
        k_reduce(out, srcs[0], srcs[1], count, dtype, op);
    for (int j = 2; j < n; j++) k_reduce(out, out, srcs[j], count, dtype, op);
    if (divisor > 1) k_div(out, out, count, dtype, divisor);
}

static int chain_defines(k_dtype_t dtype, k_op_t op) { return !is_half(dtype) || is_minmax(op); }

/* ---- random cases --------------------------------------------------------------- */

typedef struct {
    uint8_t *pool[N_MAX];    /* source j's values (MAX_COUNT + SMALL_COUNT_MAX elements) */
    uint8_t *buf[N_MAX + 1]; /* guarded: source j in buf[j], dst in buf[N_MAX] */
    uint8_t *scalar_out;     /* the scalar path's result */
    uint8_t *chain_out;      /* the library chain's result */
} rn_bufs_t;

static const char *const alias_names[ALIAS_COUNT] = {"", " dst=srcs[0]", " dst=srcs[n-1]", " srcs[n-1]=srcs[0]"};

static void print_case(k_dtype_t dtype, int n, size_t count, int64_t divisor, int alias, size_t i,
                       const uint8_t *const *src, const uint8_t *got, const void *want)
{
    size_t size = k_dtype_size(dtype);
    printf("  n %d count %zu divisor %lld%s elem %zu: srcs", n, count, (long long)divisor, alias_names[alias], i);
    for (int j = 0; j < n; j++) {
        printf(" ");
        print_hex(src[j] + i * size, size);
    }
    printf(" got ");
    print_hex(got, size);
    printf(" want ");
    print_hex(want, size);
    printf("\n");
}

/* One k_reduce_n call on `isa` with sources pool[j] + start, checked
 * element by element against the reference, the scalar path and (where it
 * defines the result) the chain, plus guards and untouched inputs.
 * Returns the number of failed checks. */
static long reduce_n_case(k_isa_t isa, k_dtype_t dtype, k_op_t op, int n, size_t count, int64_t divisor, int alias,
                          size_t start, rn_bufs_t *b, long *checks, long *printed)
{
    const size_t size = k_dtype_size(dtype);
    const size_t span = 2 * GUARD_BYTES + (MAX_OFFSET + count) * size;
    const uint8_t *ref_src[N_MAX]; /* pristine copies, for the reference */
    const void *srcs[N_MAX];
    long failures = 0;

    /* every array at its own offset, so vectors start misaligned
     * differently in each */
    size_t off_d = (count / 7 + (size_t)alias) % (MAX_OFFSET + 1);
    memset(b->buf[N_MAX], POISON, span);
    uint8_t *d = b->buf[N_MAX] + GUARD_BYTES + off_d * size;
    for (int j = 0; j < n; j++) {
        ref_src[j] = b->pool[j] + start * size;
        if (alias == ALIAS_REPEAT && j == n - 1 && n > 1) {
            ref_src[j] = ref_src[0];
            srcs[j] = srcs[0];
            continue;
        }
        uint8_t *p = b->buf[j] + GUARD_BYTES + ((count + 3 * (size_t)j + 1) % (MAX_OFFSET + 1)) * size;
        if ((alias == ALIAS_FIRST && j == 0) || (alias == ALIAS_LAST && j == n - 1)) p = d;
        if (count) memcpy(p, ref_src[j], count * size);
        srcs[j] = p;
    }

    k_isa_set(K_ISA_SCALAR);
    k_reduce_n(b->scalar_out, (const void *const *)ref_src, n, count, dtype, op, divisor);
    k_isa_set(isa);
    int check_chain = chain_defines(dtype, op);
    if (check_chain) library_chain(b->chain_out, (const void *const *)ref_src, n, count, dtype, op, divisor);

    k_reduce_n(d, srcs, n, count, dtype, op, divisor);

    for (size_t i = 0; i < count; i++) {
        uint8_t want[8];
        int any_nan_ok, either_zero_ok;
        ref_reduce_n(dtype, op, ref_src, n, i, divisor, want, &any_nan_ok, &either_zero_ok);
        const uint8_t *got = d + i * size;
        int ok = any_nan_ok       ? is_nan_bits(dtype, got)
                 : either_zero_ok ? is_zero_bits(dtype, got)
                                  : memcmp(got, want, size) == 0;
        (*checks)++;
        /* the paths are interchangeable: the same bits, SUM/PROD NaN
         * payloads aside */
        if (isa != K_ISA_SCALAR) {
            (*checks)++;
            const uint8_t *other = b->scalar_out + i * size;
            ok &= any_nan_ok ? is_nan_bits(dtype, other) : memcmp(got, other, size) == 0;
        }
        if (check_chain) {
            (*checks)++;
            const uint8_t *other = b->chain_out + i * size;
            ok &= any_nan_ok ? is_nan_bits(dtype, other) : memcmp(got, other, size) == 0;
        }
        if (ok) continue;
        failures++;
        if ((*printed)++ < MAX_PRINTED) {
            print_case(dtype, n, count, divisor, alias, i, ref_src, got, want);
            printf("    scalar ");
            print_hex(b->scalar_out + i * size, size);
            if (check_chain) {
                printf(" chain ");
                print_hex(b->chain_out + i * size, size);
            }
            printf("%s\n", any_nan_ok ? " (any NaN)" : either_zero_ok ? " (either zero)" : "");
        }
    }
    (*checks)++;
    if (!guards_intact(b->buf[N_MAX] + off_d * size, count * size)) {
        failures++;
        if ((*printed)++ < MAX_PRINTED)
            printf("  n %d count %zu%s: guard around dst overwritten\n", n, count, alias_names[alias]);
    }
    for (int j = 0; j < n; j++) {
        if (srcs[j] == d || !count) continue;
        (*checks)++;
        if (memcmp(srcs[j], ref_src[j], count * size) != 0) {
            failures++;
            if ((*printed)++ < MAX_PRINTED)
                printf("  n %d count %zu%s: source %d modified\n", n, count, alias_names[alias], j);
        }
    }
    return failures;
}

static void rn_bufs_alloc(rn_bufs_t *b)
{
    size_t buf_bytes = 2 * GUARD_BYTES + (MAX_COUNT + MAX_OFFSET) * 8;
    int ok = 1;
    for (int j = 0; j < N_MAX; j++) ok &= (b->pool[j] = malloc((MAX_COUNT + SMALL_COUNT_MAX) * 8)) != NULL;
    for (int j = 0; j <= N_MAX; j++) ok &= (b->buf[j] = malloc(buf_bytes)) != NULL;
    ok &= (b->scalar_out = malloc(MAX_COUNT * 8)) != NULL;
    ok &= (b->chain_out = malloc(MAX_COUNT * 8)) != NULL;
    if (!ok) {
        printf("reduce_n: out of memory\n");
        exit(1);
    }
}

static void rn_bufs_free(rn_bufs_t *b)
{
    for (int j = 0; j < N_MAX; j++) free(b->pool[j]);
    for (int j = 0; j <= N_MAX; j++) free(b->buf[j]);
    free(b->scalar_out);
    free(b->chain_out);
}

static void test_reduce_n_random(k_isa_t isa, rn_bufs_t *b)
{
    for (int dt = 0; dt < K_DTYPE_COUNT; dt++) {
        k_dtype_t dtype = (k_dtype_t)dt;
        size_t size = k_dtype_size(dtype);
        for (size_t i = 0; i < MAX_COUNT + SMALL_COUNT_MAX; i++) {
            random_element(&gen, dtype, b->pool[0] + i * size);
            for (int j = 1; j < N_MAX; j++) {
                /* some elements equal to source 0's (and +-0 pairs among
                 * the specials), so MIN/MAX ties are exercised */
                if (test_rng_below(&gen, 100) < 4)
                    memcpy(b->pool[j] + i * size, b->pool[0] + i * size, size);
                else
                    random_element(&gen, dtype, b->pool[j] + i * size);
            }
        }
        for (int o = 0; o < K_OP_COUNT; o++) {
            k_op_t op = (k_op_t)o;
            long checks = 0, failures = 0, printed = 0;
            for (int n = 1; n <= N_MAX; n++) {
                /* every count to 300 (all tail lengths of every path), the
                 * divisor and the aliasing rotating with it */
                for (size_t count = 0; count <= SMALL_COUNT_MAX; count++) {
                    int64_t divisor = divisors[(count + (size_t)n) % N_DIVISORS];
                    int alias = (int)((count / N_DIVISORS + (size_t)n) % ALIAS_COUNT);
                    size_t start = (count * 37 + (size_t)n) % SMALL_COUNT_MAX;
                    failures += reduce_n_case(isa, dtype, op, n, count, divisor, alias, start, b, &checks, &printed);
                }
            }
            for (size_t c = 0; c < sizeof(large_counts) / sizeof(large_counts[0]); c++) {
                static const int large_n[] = {2, 3, 8};
                for (size_t k = 0; k < sizeof(large_n) / sizeof(large_n[0]); k++)
                    failures += reduce_n_case(isa, dtype, op, large_n[k], large_counts[c], divisors[(c + k) % 4],
                                              (int)((c + k) % ALIAS_COUNT), 0, b, &checks, &printed);
            }
            report(checks, failures, "reduce_n %-6s %-4s %s", k_isa_name(isa), dtype_names[dtype], op_names[op]);
        }
    }
}

/* ---- single rounding -------------------------------------------------------------- */

/* A random finite half of magnitude 2^emin .. 2^(emax + 1), random sign. */
static uint16_t rn_random_half(ref_fmt_t fmt, int emin, int emax, int negative_ok)
{
    int e = emin + (int)test_rng_below(&gen, (uint32_t)(emax - emin + 1));
    double mant = 1.0 + ldexp((double)test_rng_below(&gen, 1u << fmt.mant_bits), -fmt.mant_bits);
    double v = ldexp(mant, e);
    if (negative_ok && test_rng_below(&gen, 2)) v = -v;
    return ref_encode16(v, fmt);
}

/* Rounded to fp32 and then to fmt after every step, as chained k_reduce /
 * k_div calls do (divisor < 2^24 here, exact in fp32). */
static uint16_t ref_chained16(k_op_t op, const uint16_t *x, int n, int64_t divisor, ref_fmt_t fmt)
{
    double acc = ref_decode16(x[0], fmt);
    for (int j = 1; j < n; j++) {
        double v = ref_decode16(x[j], fmt);
        acc = ref_round(ref_round(op == K_OP_SUM ? acc + v : acc * v, REF_F32), fmt);
    }
    if (divisor > 1) acc = ref_round(ref_round(acc / (double)divisor, REF_F32), fmt);
    return ref_encode16(acc, fmt);
}

#define SINGLE_COUNT 300

/* For each (op, n, divisor): SINGLE_COUNT elements (vector blocks and the
 * scalar tail of every path) whose chained rounding differs from single
 * rounding. k_reduce_n must give the single-rounded value; the library's
 * chain the chained one. */
static void test_reduce_n_single_rounding(k_isa_t isa, k_dtype_t dtype)
{
    static const struct {
        k_op_t op;
        int n;
        int64_t divisor;
    } combos[] = {{K_OP_SUM, 3, 1}, {K_OP_SUM, 4, 4},  {K_OP_SUM, 8, 3},
                  {K_OP_SUM, 2, 7}, {K_OP_PROD, 3, 1}, {K_OP_PROD, 4, 7}};
    ref_fmt_t fmt = dtype == K_DTYPE_F16 ? REF_F16 : REF_BF16;
    static uint16_t src[N_MAX][SINGLE_COUNT], out[SINGLE_COUNT], chain[SINGLE_COUNT];
    uint16_t single[SINGLE_COUNT], chained[SINGLE_COUNT];
    long checks = 0, failures = 0;

    for (size_t c = 0; c < sizeof(combos) / sizeof(combos[0]); c++) {
        k_op_t op = combos[c].op;
        int n = combos[c].n;
        int64_t divisor = combos[c].divisor;
        for (size_t i = 0; i < SINGLE_COUNT; i++) {
            uint16_t x[N_MAX];
            int found = 0;
            for (int tries = 0; tries < 10000 && !found; tries++) {
                for (int j = 0; j < n; j++)
                    x[j] = op == K_OP_SUM ? rn_random_half(fmt, -3, 3, 1) : rn_random_half(fmt, -1, 0, 0);
                if (dtype == K_DTYPE_F16 && op == K_OP_SUM && divisor == 4 && i % 50 == 0)
                    for (int j = 0; j < n; j++) /* 4 x 60000 / 4: the chain overflows */
                        x[j] = ref_encode16(60000.0, fmt);
                const uint8_t *ptr[N_MAX];
                for (int j = 0; j < n; j++) ptr[j] = (const uint8_t *)&x[j];
                int any_nan_ok, either_zero_ok;
                ref_reduce_n(dtype, op, ptr, n, 0, divisor, &single[i], &any_nan_ok, &either_zero_ok);
                chained[i] = ref_chained16(op, x, n, divisor, fmt);
                found = single[i] != chained[i] && !any_nan_ok;
            }
            checks++;
            if (!found) {
                failures++;
                printf("  %s n %d divisor %lld: no input found where chained rounding differs\n", op_names[op], n,
                       (long long)divisor);
            }
            for (int j = 0; j < n; j++) src[j][i] = x[j];
        }
        const void *srcs[N_MAX];
        for (int j = 0; j < n; j++) srcs[j] = src[j];
        k_reduce_n(out, srcs, n, SINGLE_COUNT, dtype, op, divisor);
        library_chain(chain, srcs, n, SINGLE_COUNT, dtype, op, divisor);
        for (size_t i = 0; i < SINGLE_COUNT; i++) {
            checks += 2;
            int ok_single = out[i] == single[i], ok_chain = chain[i] == chained[i];
            failures += !ok_single + !ok_chain;
            if ((!ok_single || !ok_chain) && failures <= MAX_PRINTED)
                printf("  %s n %d divisor %lld elem %zu: k_reduce_n 0x%04x (single 0x%04x), "
                       "chain 0x%04x (chained 0x%04x)\n",
                       op_names[op], n, (long long)divisor, i, out[i], single[i], chain[i], chained[i]);
        }
    }
    report(checks, failures, "reduce_n %-6s %-4s rounds once (sum/avg/prod)", k_isa_name(isa), dtype_names[dtype]);
}

/* ---- entry points ----------------------------------------------------------------- */

void test_reduce_n(k_isa_t isa)
{
    rn_bufs_t b;
    rn_bufs_alloc(&b);
    gen = test_rng_seeded(TEST_RNG_SEED);
    k_isa_set(isa);
    test_reduce_n_single_rounding(isa, K_DTYPE_F16);
    test_reduce_n_single_rounding(isa, K_DTYPE_BF16);
    test_reduce_n_random(isa, &b);
    k_isa_set(isa);
    rn_bufs_free(&b);
}

/* count 0 and bad arguments (which the header calls caller bugs) write
 * nothing; count 0 does not even look at dst or srcs. */
void test_reduce_n_api(void)
{
    long checks = 0, failures = 0;
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    const void *srcs[2] = {a, b};
    uint8_t buf[2 * GUARD_BYTES + sizeof(a)];
    static const struct {
        int n;
        int64_t divisor;
        int dtype, op;
        size_t count;
    } bad[] = {
        {0, 1, K_DTYPE_F32, K_OP_SUM, 4},  {-1, 1, K_DTYPE_F32, K_OP_SUM, 4},  {2, 0, K_DTYPE_F32, K_OP_SUM, 4},
        {2, -3, K_DTYPE_F32, K_OP_SUM, 4}, {2, 1, K_DTYPE_COUNT, K_OP_SUM, 4}, {2, 1, K_DTYPE_F32, K_OP_COUNT, 4},
        {2, 2, -1, K_OP_SUM, 4},           {2, 1, K_DTYPE_F32, K_OP_SUM, 0},
    };
    for (size_t c = 0; c < sizeof(bad) / sizeof(bad[0]); c++) {
        memset(buf, POISON, sizeof(buf));
        k_reduce_n(buf + GUARD_BYTES, srcs, bad[c].n, bad[c].count, (k_dtype_t)bad[c].dtype, (k_op_t)bad[c].op,
                   bad[c].divisor);
        checks++;
        int untouched = 1;
        for (size_t i = 0; i < sizeof(buf); i++) untouched &= buf[i] == POISON;
        if (!untouched && failures++ < MAX_PRINTED)
            printf("  case %zu (n %d divisor %lld dtype %d op %d count %zu) wrote to dst\n", c, bad[c].n,
                   (long long)bad[c].divisor, bad[c].dtype, bad[c].op, bad[c].count);
    }
    k_reduce_n(NULL, NULL, 3, 0, K_DTYPE_F16, K_OP_SUM, 1); /* count 0 touches nothing (or crashes) */
    report(checks, failures, "reduce_n api: count 0, bad n/divisor/dtype/op");
}
