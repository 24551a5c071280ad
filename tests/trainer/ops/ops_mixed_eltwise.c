/*
 * ops_mixed_eltwise.c - the element-wise ops on bf16 activations bit for bit
 * (relu, relu backward, add with and without relu, in place too: each is
 * the f32 operation on the widened inputs, rounded to nearest even once),
 * and softmax cross-entropy with a gradient scale into f32, bf16 and f16
 * dlogits (against double loops, every element correctly rounded, and a
 * case searched for where rounding through f32 first would differ).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_mixed.h"
#include "ref_ops.h"

/* ---- relu, add: bit for bit --------------------------------------------------- */

/* Codes every op must get right, per 16-bit dtype: zeros of both signs,
 * infinities, quiet and signalling NaNs, the largest finite, subnormals,
 * the smallest normal, ties. */
#define SPECIAL_COUNT 20
static const uint16_t special_codes[2][SPECIAL_COUNT] = {
    {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFC1, 0x7F7F, 0xFF7F, 0x0001, /* bf16 */
     0x8001, 0x007F, 0x0080, 0x3F80, 0x3B80, 0x3F81, 0x7B00, 0xBF80, 0x3C00, 0xC2F7},
    {0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE01, 0x7BFF, 0xFBFF, 0x0001, /* f16 */
     0x8001, 0x03FF, 0x0400, 0x3C00, 0x1000, 0x3C01, 0x4C00, 0xBC00, 0x2400, 0xC8F7},
};

/* (a, b) pairs for add: ties to even and up, a tie at the largest finite
 * that rounds to inf, just below it, signed zeros, inf - inf, subnormals. */
#define PAIR_COUNT 12
static const uint16_t add_pairs[2][PAIR_COUNT][2] = {
    {
        {0x3F80, 0x3B80}, /* 1 + 2^-8: tie, to even: 1 */
        {0x3F81, 0x3B80}, /* (1 + 2^-7) + 2^-8: tie, up */
        {0x7F7F, 0x7B00}, /* max + half an ulp (2^119): tie, to even = up = inf */
        {0x7F7F, 0x7AFF}, /* just below the tie: max */
        {0xFF7F, 0xFB00}, /* -max - half an ulp: -inf */
        {0x8000, 0x8000}, /* -0 + -0 = -0 */
        {0x8000, 0x0000}, /* -0 + 0 = 0 */
        {0x7F80, 0xFF80}, /* inf - inf: NaN */
        {0x0001, 0x8001}, /* subnormals cancelling: +0 */
        {0x007F, 0x0001}, /* largest subnormal + smallest = smallest normal */
        {0x3F80, 0xBF80}, /* 1 - 1 = +0 */
        {0x7FC0, 0x3F80}, /* NaN + 1 */
    },
    {
        {0x3C00, 0x1000}, /* 1 + 2^-11: tie, to even: 1 */
        {0x3C01, 0x1000}, /* (1 + 2^-10) + 2^-11: tie, up */
        {0x7BFF, 0x4C00}, /* 65504 + 16: tie, to even = up = inf */
        {0x7BFF, 0x4BFF}, /* just below the tie: 65504 */
        {0xFBFF, 0xCC00}, /* -65504 - 16: -inf */
        {0x8000, 0x8000}, /* -0 + -0 = -0 */
        {0x8000, 0x0000}, /* -0 + 0 = 0 */
        {0x7C00, 0xFC00}, /* inf - inf: NaN */
        {0x0001, 0x8001}, /* subnormals cancelling: +0 */
        {0x03FF, 0x0001}, /* largest subnormal + smallest = smallest normal */
        {0x3C00, 0xBC00}, /* 1 - 1 = +0 */
        {0x7E00, 0x3C00}, /* NaN + 1 */
    },
};

static int dtype_row(tr_dtype_t dt) { return dt == TR_DTYPE_F16; }

static uint16_t random_code(tr_dtype_t dt)
{
    uint64_t r = rng_u64();
    switch (r % 4) {
    case 0: return (uint16_t)(r >> 16); /* any code: every class */
    case 1: return bits_of(rng_sym(8.0f), dt);
    case 2: return special_codes[dtype_row(dt)][(r >> 16) % SPECIAL_COUNT];
    default: /* subnormals and the smallest normals */
        return (uint16_t)((r >> 16) & (dt == TR_DTYPE_F16 ? 0x87FF : 0x80FF));
    }
}

/* b for add: often close to a in magnitude, so the sum needs rounding. */
static uint16_t random_partner(uint16_t a, tr_dtype_t dt)
{
    if (rng_unit() < 0.5) return random_code(dt);
    float f = widen(a, dt) * rng_sym(2.0f);
    return bits_of(isfinite(f) ? f : 1.0f, dt);
}

/* got (bits) against the f32 result s rounded to dt: bit for bit by the
 * kernels' rounding, and as a value by the independent reference (a NaN
 * result: any NaN). */
static int code_wrong(uint16_t got, float s, tr_dtype_t dt)
{
    if (isnan(s)) return !isnan(widen(got, dt));
    double ref = ref_round_dtype(s, dt);
    float g = widen(got, dt);
    return got != bits_of(s, dt) || (double)g != ref || sign_differs(g, ref);
}

static void report_exact(const char *what, const char *op, tr_dtype_t dt, long wrong, size_t count)
{
    char key[64];
    CHECK(wrong == 0, "%s: %ld of %zu elements differ from the rounded f32 result", what, wrong, count);
    printf("%s %-64s %-4s %ld of %zu wrong (bit for bit)\n", wrong ? "FAIL" : "ok  ", what, tr_dtype_name(dt), wrong,
           count);
    snprintf(key, sizeof(key), "%s %s", op, tr_dtype_name(dt));
    summary_exact(key, wrong, (long)count);
}

/* Element-wise ops run flat over tensors of one shape (and so one layout):
 * element i of a, b and y are at the same place, so the codes are written
 * into the tensors directly, signalling NaNs included. dt: bf16 (or f16
 * where the backend computes in it). */
void mixed_eltwise_exact(int n, int c, int h, int w, tr_dtype_t dt)
{
    char what[128];
    const int row = dtype_row(dt);
    size_t count = (size_t)n * c * h * w;
    tr_tensor_t a = act_make(n, c, h, w, dt), b = act_make(n, c, h, w, dt), y = act_make(n, c, h, w, dt);
    uint16_t *ah = malloc(count * 2), *bh = malloc(count * 2);
    for (size_t i = 0; i < count; i++) {
        ah[i] = i < PAIR_COUNT                   ? add_pairs[row][i][0]
                : i < PAIR_COUNT + SPECIAL_COUNT ? special_codes[row][i - PAIR_COUNT]
                                                 : random_code(dt);
        bh[i] = i < PAIR_COUNT ? add_pairs[row][i][1] : random_partner(ah[i], dt);
    }
    uint16_t *A = a.data, *B = b.data, *Y = y.data;

    for (int in_place = 0; in_place < 2; in_place++) {
        const char *how = in_place ? " in place" : "";
        uint16_t *out = in_place ? A : Y;
        tr_tensor_t *out_t = in_place ? &a : &y;

        /* relu: x < 0 ? 0 : x (a NaN and -0 go through) */
        memcpy(A, ah, count * 2);
        memset(Y, 0xFF, count * 2);
        STATUS_OK(ops->relu_forward(be, &a, out_t));
        long wrong = 0;
        for (size_t i = 0; i < count; i++) {
            float x = widen(ah[i], dt);
            wrong += code_wrong(out[i], x < 0.0f ? 0.0f : x, dt);
        }
        snprintf(what, sizeof(what), "relu %dx%dx%dx%d%s", n, c, h, w, how);
        report_exact(what, "relu forward", dt, wrong, count);

        /* add, then relu or not */
        for (int relu = 0; relu < 2; relu++) {
            memcpy(A, ah, count * 2);
            memcpy(B, bh, count * 2);
            memset(Y, 0xFF, count * 2);
            STATUS_OK(ops->add_forward(be, &a, &b, relu, out_t));
            wrong = 0;
            for (size_t i = 0; i < count; i++) {
                volatile float s = widen(ah[i], dt) + widen(bh[i], dt); /* one f32 rounding */
                wrong += code_wrong(out[i], relu && s < 0.0f ? 0.0f : s, dt);
            }
            snprintf(what, sizeof(what), "add%s %dx%dx%dx%d%s", relu ? "+relu" : "", n, c, h, w, how);
            report_exact(what, relu ? "add+relu" : "add", dt, wrong, count);
        }

        /* relu backward: dx = y > 0 ? dy : 0; in place: dx is dy (b) */
        memcpy(A, ah, count * 2);
        memcpy(B, bh, count * 2);
        memset(Y, 0xFF, count * 2);
        out = in_place ? B : Y;
        STATUS_OK(ops->relu_backward(be, &a, &b, in_place ? &b : &y));
        wrong = 0;
        for (size_t i = 0; i < count; i++)
            wrong += code_wrong(out[i], widen(ah[i], dt) > 0.0f ? widen(bh[i], dt) : 0.0f, dt);
        snprintf(what, sizeof(what), "relu backward %dx%dx%dx%d%s", n, c, h, w, how);
        report_exact(what, "relu backward", dt, wrong, count);
    }
    ops->tensor_free(be, &a);
    ops->tensor_free(be, &b);
    ops->tensor_free(be, &y);
    free(ah);
    free(bh);
}

/* ---- softmax cross-entropy ------------------------------------------------------ */

/* The value want rounds to in dtype, or NaN where want is so close to a
 * rounding boundary that a last-bit difference of the double could move it. */
static double rounded_once(double want, tr_dtype_t dtype)
{
    double lo = ref_round_dtype(want * (1 - 0x1p-40), dtype), hi = ref_round_dtype(want * (1 + 0x1p-40), dtype);
    return lo == hi ? lo : NAN;
}

static hora_status_t xent_run(const float *logits, const int32_t *labels, int n, int k, float smoothing,
                              float grad_scale, float *loss, tr_tensor_t *dlogits)
{
    const int nk[2] = {n, k};
    tr_tensor_t lt = host_tensor((void *)logits, TR_DTYPE_F32, 2, nk);
    tr_tensor_t yt = host_tensor((void *)labels, TR_DTYPE_I32, 1, &n);
    tr_tensor_t st = host_tensor(loss, TR_DTYPE_F32, 1, (const int[]){1});
    return ops->softmax_xent(be, &lt, &yt, smoothing, grad_scale, &st, dlogits);
}

void mixed_softmax_xent(int n, int k, float smoothing)
{
    char what[160], key[64];
    size_t count = (size_t)n * k;
    float *logits = rand_array(count, 3.0f);
    int32_t *labels = malloc(n * sizeof(int32_t));
    for (int i = 0; i < n; i++) labels[i] = (int32_t)(rng_u64() % k);
    logits[0] += 40.0f; /* exp would overflow without the max subtracted */
    double *g1 = malloc(count * sizeof(double)), *want = malloc(count * sizeof(double)), loss_ref = 0;
    for (int i = 0; i < n; i++) {
        double l;
        test_ref_xent_row(logits + (size_t)i * k, k, labels[i], smoothing, n, 1.0f, g1 + (size_t)i * k, &l);
        loss_ref += l;
    }
    loss_ref /= n;
    float *got = malloc(count * sizeof(float)), loss_first = NAN;

    static const tr_dtype_t dtypes[] = {TR_DTYPE_F32, TR_DTYPE_BF16, TR_DTYPE_F16};
    static const float scales[] = {1.0f, 1024.0f, 65536.0f};
    for (int di = 0; di < 3; di++)
        for (int si = 0; si < 3; si++) {
            const tr_dtype_t dt = dtypes[di];
            const float scale = scales[si];
            tr_tensor_t dl = plain_make(dt, 2, (const int[]){n, k});
            float loss = NAN;
            STATUS_OK(xent_run(logits, labels, n, k, smoothing, scale, &loss, &dl));
            plain_get(&dl, got);
            for (size_t i = 0; i < count; i++) want[i] = g1[i] * scale; /* exact: a power of two */
            snprintf(what, sizeof(what), "softmax xent %dx%d smoothing %.2f scale %g dlogits", n, k, (double)smoothing,
                     (double)scale);
            snprintf(key, sizeof(key), "softmax xent dlogits %s", tr_dtype_name(dt));
            /* f32 dlogits come from double: one f32 rounding, 6e-8. */
            compare_dtype(what, key, got, want, count, dt, dt == TR_DTYPE_F32 ? 1e-6 : tol_for(dt));
            /* Computed in double and rounded once: each element is its
             * exact value's nearest in dt. */
            long wrong = 0, checked = 0;
            for (size_t i = 0; i < count; i++) {
                double r = rounded_once(want[i], dt);
                if (isnan(r)) continue;
                checked++;
                wrong += (double)got[i] != r;
            }
            snprintf(what, sizeof(what), "softmax xent %dx%d smoothing %.2f scale %g dlogits rounded once", n, k,
                     (double)smoothing, (double)scale);
            CHECK(wrong == 0, "%s: %ld of %ld elements not the nearest %s to the exact value", what, wrong, checked,
                  tr_dtype_name(dt));
            printf("%s %-64s %-4s %ld of %ld not correctly rounded\n", wrong ? "FAIL" : "ok  ", what, tr_dtype_name(dt),
                   wrong, checked);
            snprintf(key, sizeof(key), "softmax xent dlogits %s rounded once", tr_dtype_name(dt));
            summary_exact(key, wrong, checked);
            /* The loss is unscaled, the same whatever the dlogits. */
            if (di == 0 && si == 0) {
                snprintf(what, sizeof(what), "softmax xent %dx%d smoothing %.2f loss", n, k, (double)smoothing);
                compare_dtype(what, "softmax xent loss f32", &loss, &loss_ref, 1, TR_DTYPE_F32, 1e-6);
                loss_first = loss;
            }
            CHECK(f32_bits(loss) == f32_bits(loss_first),
                  "softmax xent: loss %.9g with scale %g and %s dlogits, %.9g first", (double)loss, (double)scale,
                  tr_dtype_name(dt), (double)loss_first);
            free(dl.data);
        }
    /* dlogits of an integer dtype, and a gradient scale that is not a
     * positive finite number, are refused. */
    float loss = 5.0f;
    tr_tensor_t di32 = plain_make(TR_DTYPE_I32, 2, (const int[]){n, k}),
                df = plain_make(TR_DTYPE_F32, 2, (const int[]){n, k});
    CHECK(xent_run(logits, labels, n, k, smoothing, 1.0f, &loss, &di32) == HORA_ERR_INVALID_ARG,
          "softmax_xent: i32 dlogits accepted");
    CHECK(xent_run(logits, labels, n, k, smoothing, 0.0f, &loss, &df) == HORA_ERR_INVALID_ARG &&
              xent_run(logits, labels, n, k, smoothing, -1.0f, &loss, &df) == HORA_ERR_INVALID_ARG &&
              xent_run(logits, labels, n, k, smoothing, NAN, &loss, &df) == HORA_ERR_INVALID_ARG,
          "softmax_xent: gradient scale 0, -1 or NaN accepted");
    free(di32.data);
    free(df.data);
    free(logits);
    free(labels);
    free(g1);
    free(want);
    free(got);
}

/* Whether rounding g first to f32 and then to dtype gives another result
 * than rounding it once, robustly: g's f32 rounding f is a tie of dtype
 * and g lies clearly off f on the side away from even. */
static int double_rounding_differs(double g, tr_dtype_t dtype)
{
    float f = (float)g;
    uint32_t b = f32_bits(f);
    double gap = fabs(g - (double)f), ulp32 = ldexp(fabs((double)f), -23);
    if (gap < ldexp(ulp32, -20) || gap > ulp32 * (0.5 - 0x1p-20)) return 0;
    if (dtype == TR_DTYPE_BF16) {
        if ((b & 0xFFFFu) != 0x8000u) return 0;
    } else if ((b & 0x1FFFu) != 0x1000u || !(fabsf(f) >= 0x1p-14f && fabsf(f) <= 65504.0f)) {
        return 0; /* f16 ties of normal values only */
    }
    return ref_round_dtype(g, dtype) != (double)widen(bits_of(f, dtype), dtype);
}

/* backend.h: dlogits are "computed in double and rounded once". Rounding
 * through f32 first differs from that about once in 2^17 elements (bf16),
 * too rarely for random logits to show; so search rows for one where it
 * does, and check that element. */
void mixed_softmax_rounding(void)
{
    enum { N = 4, K = 10 };
    const float scale = 1024.0f;
    static const tr_dtype_t dtypes[] = {TR_DTYPE_BF16, TR_DTYPE_F16};
    for (int di = 0; di < 2; di++) {
        const tr_dtype_t dt = dtypes[di];
        float logits[N * K];
        int32_t labels[N];
        double g[K];
        int found = -1;
        long rows = 0;
        for (; rows < 4000000 && found < 0; rows++) {
            for (int j = 0; j < K; j++) logits[j] = rng_sym(3.0f);
            labels[0] = (int32_t)(rng_u64() % K);
            test_ref_xent_row(logits, K, labels[0], 0.0f, N, scale, g, NULL);
            for (int j = 0; j < K && found < 0; j++)
                if (double_rounding_differs(g[j], dt)) found = j;
        }
        if (found < 0) {
            printf("note softmax xent %s: no row found where rounding through f32 differs (%ld tried)\n",
                   tr_dtype_name(dt), rows);
            continue;
        }
        for (int i = K; i < N * K; i++) logits[i] = rng_sym(3.0f);
        for (int i = 1; i < N; i++) labels[i] = (int32_t)(rng_u64() % K);
        tr_tensor_t dl = plain_make(dt, 2, (const int[]){N, K});
        float loss;
        STATUS_OK(xent_run(logits, labels, N, K, 0.0f, scale, &loss, &dl));
        uint16_t got = ((const uint16_t *)dl.data)[found];
        double once = ref_round_dtype(g[found], dt);
        double twice = widen(bits_of((float)g[found], dt), dt);
        int ok = (double)widen(got, dt) == once;
        CHECK(ok,
              "softmax_xent %s dlogits[0][%d]: exact %.17g rounds once to %.9g, got %.9g (= through f32: %.9g); "
              "logits row 0 = {%a, %a, %a, %a, %a, %a, %a, %a, %a, %a}, label %d, n %d, scale %g",
              tr_dtype_name(dt), found, g[found], once, (double)widen(got, dt), twice, (double)logits[0],
              (double)logits[1], (double)logits[2], (double)logits[3], (double)logits[4], (double)logits[5],
              (double)logits[6], (double)logits[7], (double)logits[8], (double)logits[9], (int)labels[0], N,
              (double)scale);
        printf("%s softmax xent %s dlogits rounded once where f32 first would differ (row found after %ld)\n",
               ok ? "ok  " : "FAIL", tr_dtype_name(dt), rows);
        char key[64];
        snprintf(key, sizeof(key), "softmax xent dlogits %s rounded once", tr_dtype_name(dt));
        summary_exact(key, !ok, 1);
        free(dl.data);
    }
}
