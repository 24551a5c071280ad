/* test_reproducible.c - HORA_REPRODUCIBLE / hora_opts_t.reproducible: the
 * f32, bf16 and f16 all-reduce SUM has the expected bits whatever the
 * algorithm, transport and hierarchy (meson runs this under several
 * HORA_* settings), the fusion layout (tensors fused in two orders, and one
 * at a time), the arrival order of the ranks (staggered submissions) and
 * the assignment of the inputs to ranks (permutations).
 *
 * The inputs are chosen so that the order of a floating-point sum matters:
 * values from 2^-63 to 2^33 of both signs (2^-24 to 2^12 for f16), and big
 * values that cancel between even and odd data slots. Data slot s holds
 * value(s, i); rank r contributes slot perm[r]. Expected bits:
 *  - mode 1 (ranks): the fp32 fold of the slots in rank order, rounded once
 *    to the dtype (computed here);
 *  - mode exact: the exact sum (a 128-bit fixed-point sum computed here)
 *    rounded once to nearest even: the same for every permutation and world
 *    size. For n >= 3 a second case puts the same three addends, a multiset
 *    independent of n, at permuted ranks with zeros elsewhere: np 3 and np 4
 *    must give the same bits (both equal the same reference).
 * The test can fail: it checks that the fp32 rank-order fold of its inputs
 * differs from the exact sum for some permutation (n >= 3), and, with
 * --default-differs (configurations where the default all-reduce does not
 * reduce in rank order: the ring, messages, hierarchical), that the direct
 * hora_allreduce without HORA_REPRODUCIBLE differs from the rank-order bits.
 * With HORA_REPRODUCIBLE set in the environment, the direct hora_allreduce
 * must give that mode's bits instead.
 *
 * Usage: test_reproducible [--default-differs]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "hora.h"
#include "k_cpu.h"
#include "summary.h"

#define NTENSORS 4
static const size_t tensor_counts[NTENSORS] = {5, 1000, 2049, 65539};
#define TOTAL (5 + 1000 + 2049 + 65539)
#define FIX_Q 64 /* the fixed-point reference's quantum: 2^-64 */

static int rank, size;

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Value of data slot s at element i as (sign, integer mantissa m, exponent
 * e): sign * m * 2^e, exact in dtype. Slot -1 is a zero. */
struct value {
    int sign, e;
    uint64_t m;
};

static struct value value_of(hora_dtype_t dtype, int s, size_t i)
{
    struct value v = {1, 0, 0};
    if (s < 0) return v;
    const int p = dtype == HORA_DTYPE_F32 ? 24 : dtype == HORA_DTYPE_F16 ? 11 : 8;
    const int f16 = dtype == HORA_DTYPE_F16;
    uint64_t h = mix(((uint64_t)dtype << 56) ^ ((uint64_t)(s + 1) << 40) ^ i);
    const uint64_t top = (uint64_t)1 << (p - 1);
    v.m = top | (h >> 8) % top; /* p significant bits */
    v.sign = (h >> 4) & 1 ? -1 : 1;
    switch (h % 4) {
    case 0: v.e = (f16 ? 1 : 20) + (int)((h >> 5) % 10) - (p - 1); break;    /* big */
    case 1: v.e = (f16 ? -14 : -40) + (int)((h >> 5) % 12) - (p - 1); break; /* small */
    case 2: v.e = (int)((h >> 5) % 8) - (p - 1); break;                      /* medium */
    default: {
        /* Cancelling: the same magnitude for every slot of this element,
         * positive in even slots, negative in odd ones. */
        uint64_t g = mix(((uint64_t)dtype << 56) ^ i ^ 0x5555);
        v.m = top | (g >> 8) % top;
        v.e = (f16 ? 10 : 30) - (p - 1);
        v.sign = s % 2 ? -1 : 1;
    }
    }
    if (f16 && v.e < -24) { /* f16 subnormals: multiples of 2^-24 */
        v.m >>= -24 - v.e;
        v.e = -24;
        if (!v.m) v.m = 1;
    }
    return v;
}

static double value_double(struct value v) { return v.sign * ldexp((double)v.m, v.e); }

/* The dtype's bits of a value exact in it (or of an f32 to round). */
static uint16_t to_half(hora_dtype_t dtype, float x)
{
    return dtype == HORA_DTYPE_F16 ? k_f32_to_f16(x) : k_f32_to_bf16(x);
}

static void store(hora_dtype_t dtype, void *buf, size_t i, float x)
{
    if (dtype == HORA_DTYPE_F32)
        ((float *)buf)[i] = x;
    else
        ((uint16_t *)buf)[i] = to_half(dtype, x);
}

static uint32_t bits_at(hora_dtype_t dtype, const void *buf, size_t i)
{
    if (dtype == HORA_DTYPE_F32) {
        uint32_t b;
        memcpy(&b, (const float *)buf + i, 4);
        return b;
    }
    return ((const uint16_t *)buf)[i];
}

/* Rank order: the fp32 fold of the slots in rank order, rounded once. */
static void expect_ranks(hora_dtype_t dtype, const int *slots, void *out)
{
    for (size_t i = 0; i < TOTAL; i++) {
        float acc = (float)value_double(value_of(dtype, slots[0], i));
        for (int r = 1; r < size; r++) acc += (float)value_double(value_of(dtype, slots[r], i));
        store(dtype, out, i, acc);
    }
}

/* Exact: a fixed-point sum in units of 2^-64 (the inputs span 2^-63 ..
 * 2^34 and four of them fit 2^127), rounded to the dtype's precision and
 * subnormal quantum to nearest even, then converted exactly. */
static void expect_exact(hora_dtype_t dtype, const int *slots, void *out)
{
    const int p = dtype == HORA_DTYPE_F32 ? 24 : dtype == HORA_DTYPE_F16 ? 11 : 8;
    const int qmin = dtype == HORA_DTYPE_F32 ? -149 : dtype == HORA_DTYPE_F16 ? -24 : -133;
    for (size_t i = 0; i < TOTAL; i++) {
        __int128 sum = 0;
        for (int r = 0; r < size; r++) {
            struct value v = value_of(dtype, slots[r], i);
            __int128 x = (__int128)v.m << (v.e + FIX_Q);
            sum += v.sign < 0 ? -x : x;
        }
        const int neg = sum < 0;
        unsigned __int128 mag = (unsigned __int128)(neg ? -sum : sum);
        int top = -1;
        for (unsigned __int128 t = mag; t; t >>= 1) top++;
        int lsb = top - (p - 1);
        if (lsb < qmin + FIX_Q) lsb = qmin + FIX_Q;
        if (lsb > 0) {
            const unsigned __int128 one = 1, rest = mag & ((one << lsb) - 1), half = one << (lsb - 1);
            mag >>= lsb;
            if (rest > half || (rest == half && (mag & 1))) mag++;
            mag <<= lsb;
        }
        const double d = ldexp((double)mag, -FIX_Q);
        store(dtype, out, i, (float)(neg ? -d : d));
    }
}

static void fill_input(hora_dtype_t dtype, int slot, void *buf)
{
    for (size_t i = 0; i < TOTAL; i++) store(dtype, buf, i, (float)value_double(value_of(dtype, slot, i)));
}

/* Elements whose bits differ. */
static size_t diff_count(hora_dtype_t dtype, const void *a, const void *b, size_t *first)
{
    size_t bad = 0;
    for (size_t i = 0; i < TOTAL; i++)
        if (bits_at(dtype, a, i) != bits_at(dtype, b, i) && bad++ == 0 && first) *first = i;
    return bad;
}

static size_t tensor_offset(int t)
{
    size_t off = 0;
    for (int k = 0; k < t; k++) off += tensor_counts[k];
    return off;
}

/* The async all-reduces of the 4 tensors with the mode flag: fused in one
 * order or the reverse, or one at a time. */
static hora_status_t run_async(hora_dtype_t dtype, int mode, int layout, void *data, int iter)
{
    const size_t es = hora_dtype_size(dtype);
    hora_request_t reqs[NTENSORS];
    hora_opts_t opts = HORA_OPTS_INIT;
    opts.reproducible = mode;
    hora_status_t status = HORA_OK;
    for (int k = 0; k < NTENSORS; k++) {
        const int t = layout == 1 ? NTENSORS - 1 - k : k;
        char name[64];
        snprintf(name, sizeof(name), "repro.%d.%d.%d", iter, mode, t);
        uint8_t *p = (uint8_t *)data + tensor_offset(t) * es;
        hora_status_t st = hora_allreduce_async(name, p, p, tensor_counts[t], dtype, HORA_OP_SUM, &opts, &reqs[t]);
        if (st != HORA_OK) return st;
        if (layout == 2) {
            status = hora_wait(reqs[t]);
            hora_request_free(reqs[t]);
            if (status != HORA_OK) return status;
        }
    }
    for (int t = 0; t < NTENSORS && layout != 2; t++) {
        hora_status_t st = hora_wait(reqs[t]);
        if (st != HORA_OK && status == HORA_OK) status = st;
        hora_request_free(reqs[t]);
    }
    return status;
}

static hora_status_t run_direct(hora_dtype_t dtype, void *data)
{
    const size_t es = hora_dtype_size(dtype);
    for (int t = 0; t < NTENSORS; t++) {
        uint8_t *p = (uint8_t *)data + tensor_offset(t) * es;
        hora_status_t st = hora_allreduce(p, p, tensor_counts[t], dtype, HORA_OP_SUM);
        if (st != HORA_OK) return st;
    }
    return HORA_OK;
}

int main(int argc, char **argv)
{
    int default_differs = 0;
    for (int a = 1; a < argc; a++) default_differs |= strcmp(argv[a], "--default-differs") == 0;
    const char *env = getenv("HORA_REPRODUCIBLE");
    const int env_mode = !env || !strcmp(env, "0") ? 0 : !strcmp(env, "exact") ? 2 : 1;
    if (hora_init() != HORA_OK) {
        fprintf(stderr, "FAIL: hora_init: %s\n", hora_last_error());
        return 1;
    }
    rank = hora_rank();
    size = hora_size();
    const hora_dtype_t dtypes[3] = {HORA_DTYPE_F32, HORA_DTYPE_BF16, HORA_DTYPE_F16};
    int iter = 0;
    size_t fold_differs = 0, default_diff = 0;
    int *slots = malloc(sizeof(int) * (size_t)size);
    void *data = malloc(TOTAL * 4), *want[3] = {malloc(TOTAL * 4), malloc(TOTAL * 4), malloc(TOTAL * 4)};
    if (!slots || !data || !want[0] || !want[1] || !want[2]) return 1;

    for (int d = 0; d < 3; d++) {
        const hora_dtype_t dtype = dtypes[d];
        /* Permutations: identity, reversed, rotated by one, and (n >= 3) the
         * 3-addend multiset at permuted ranks, zeros elsewhere. */
        const int cases = size >= 3 ? 5 : 3;
        for (int c = 0; c < cases; c++, iter++) {
            for (int r = 0; r < size; r++) {
                switch (c) {
                case 0: slots[r] = r; break;
                case 1: slots[r] = size - 1 - r; break;
                case 2: slots[r] = (r + 1) % size; break;
                case 3: slots[r] = r < 3 ? 2 - r : -1; break;                         /* 2 1 0 [0 ...] */
                default: slots[r] = r == size - 1 ? 0 : r == 0 ? 2 : r == 1 ? 1 : -1; /* 2 1 .. 0 */
                }
            }
            expect_ranks(dtype, slots, want[1]);
            expect_exact(dtype, slots, want[2]);
            if (size >= 3) fold_differs += diff_count(dtype, want[1], want[2], NULL);
            /* Staggered arrivals: a different rank comes last every case. */
            for (int mode = 1; mode <= 2; mode++)
                for (int layout = 0; layout < 3; layout++) {
                    fill_input(dtype, slots[rank], data);
                    usleep((useconds_t)(300 * ((rank + c + layout) % size)));
                    hora_status_t st = run_async(dtype, mode, layout, data, iter * 8 + mode * 3 + layout);
                    CHECK(st == HORA_OK, "%s case %d mode %d layout %d: %s", hora_dtype_name(dtype), c, mode, layout,
                          hora_last_error());
                    size_t first = 0, bad = st == HORA_OK ? diff_count(dtype, data, want[mode], &first) : 0;
                    CHECK(bad == 0,
                          "%s case %d mode %s layout %s: %zu of %d elements differ, first %zu: 0x%x, expected 0x%x",
                          hora_dtype_name(dtype), c, mode == 1 ? "ranks" : "exact",
                          layout == 0   ? "fused"
                          : layout == 1 ? "fused-reversed"
                                        : "unfused",
                          bad, TOTAL, first, bits_at(dtype, data, first), bits_at(dtype, want[mode], first));
                }
            /* The direct all-reduce: HORA_REPRODUCIBLE's mode, or the default. */
            fill_input(dtype, slots[rank], data);
            hora_status_t st = run_direct(dtype, data);
            CHECK(st == HORA_OK, "%s case %d direct: %s", hora_dtype_name(dtype), c, hora_last_error());
            if (env_mode) {
                size_t first = 0, bad = diff_count(dtype, data, want[env_mode], &first);
                CHECK(bad == 0, "%s case %d direct with HORA_REPRODUCIBLE=%s: %zu elements differ, first %zu",
                      hora_dtype_name(dtype), c, env, bad, first);
            } else {
                default_diff += diff_count(dtype, data, want[1], NULL);
            }
        }
    }
    /* The inputs make order matter: otherwise the checks above prove nothing. */
    if (size >= 3) CHECK(fold_differs > 0, "the rank-order fold never differs from the exact sum: inputs too tame");
    if (default_differs && !env_mode)
        CHECK(default_diff > 0, "the default all-reduce always gave the rank-order bits: the test cannot fail here");
    if (rank == 0)
        printf("test_reproducible: np %d, fold != exact in %zu elements, default != rank order in %zu elements\n", size,
               fold_differs, default_diff);
    free(slots);
    free(data);
    for (int k = 0; k < 3; k++) free(want[k]);
    return test_summary("test_reproducible", failures, checks);
}
