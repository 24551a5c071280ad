/*
 * ops_mixed_common.c - the helpers every test_ops_mixed file uses
 * (ops_mixed.h): rounding, plain tensors of any float dtype, the
 * dtype-aware comparison and the summary of worst errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_mixed.h"

tr_dtype_t mixed_dtype = TR_DTYPE_BF16;

double tol_for(tr_dtype_t dtype)
{
    switch (dtype) {
    case TR_DTYPE_BF16: return TOL_BF16;
    case TR_DTYPE_F16: return TOL_F16;
    default: return TOL_F32;
    }
}

/* ---- rounding -------------------------------------------------------------- */

uint32_t f32_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof(b));
    return b;
}

float f32_from_bits(uint32_t bits)
{
    float x;
    memcpy(&x, &bits, sizeof(x));
    return x;
}

uint16_t bits_of(float x, tr_dtype_t dtype) { return dtype == TR_DTYPE_F16 ? k_f32_to_f16(x) : k_f32_to_bf16(x); }

float widen(uint16_t bits, tr_dtype_t dtype)
{
    return dtype == TR_DTYPE_F16 ? k_f16_to_f32(bits) : k_bf16_to_f32(bits);
}

float round_to(float x, tr_dtype_t dtype)
{
    if (dtype != TR_DTYPE_BF16 && dtype != TR_DTYPE_F16) return x;
    return widen(bits_of(x, dtype), dtype);
}

/* The quantum at x is 2^(max(exponent of x, emin) - (p - 1)); x / quantum
 * is exact in double for the formats here, and nearbyint rounds it to the
 * nearest integer, ties to even (the default rounding mode). */
double ref_round(double x, int p, int emin, int emax_plus_1)
{
    if (isnan(x) || isinf(x) || x == 0.0) return x;
    int e;
    frexp(x, &e); /* |x| = f 2^e, f in [0.5, 1): the exponent of x is e - 1 */
    int exponent = e - 1 < emin ? emin : e - 1;
    double quantum = ldexp(1.0, exponent - (p - 1));
    double r = nearbyint(x / quantum) * quantum;
    if (fabs(r) >= ldexp(1.0, emax_plus_1)) return copysign(INFINITY, x);
    return r == 0.0 ? copysign(0.0, x) : r;
}

double ref_round_dtype(double x, tr_dtype_t dtype)
{
    switch (dtype) {
    case TR_DTYPE_BF16: return ref_round(x, 8, -126, 128);
    case TR_DTYPE_F16: return ref_round(x, 11, -14, 16);
    default: return ref_round(x, 24, -126, 128);
    }
}

float *rand_rounded(size_t count, float scale, tr_dtype_t dtype)
{
    float *a = rand_array(count, scale);
    for (size_t i = 0; i < count; i++) a[i] = round_to(a[i], dtype);
    return a;
}

/* ---- tensors --------------------------------------------------------------- */

tr_tensor_t act_make(int n, int c, int h, int w, tr_dtype_t dtype)
{
    tr_tensor_t t;
    memset(&t, 0, sizeof(t));
    STATUS_OK(ops->tensor_alloc(be, n, c, h, w, dtype, &t));
    return t;
}

tr_tensor_t plain_make(tr_dtype_t dtype, int ndim, const int *dims)
{
    tr_tensor_t t = host_tensor(NULL, dtype, ndim, dims);
    t.data = malloc(t.bytes + 1);
    plain_poison(&t);
    return t;
}

void plain_put(tr_tensor_t *t, const float *values)
{
    size_t count = tr_tensor_count(t);
    if (t->dtype == TR_DTYPE_F32) {
        memcpy(t->data, values, count * sizeof(float));
        return;
    }
    uint16_t *d = t->data;
    for (size_t i = 0; i < count; i++) d[i] = bits_of(values[i], t->dtype);
}

void plain_get(const tr_tensor_t *t, float *values)
{
    size_t count = tr_tensor_count(t);
    if (t->dtype == TR_DTYPE_F32) {
        memcpy(values, t->data, count * sizeof(float));
        return;
    }
    const uint16_t *d = t->data;
    for (size_t i = 0; i < count; i++) values[i] = widen(d[i], t->dtype);
}

void plain_poison(tr_tensor_t *t)
{
    size_t count = tr_tensor_count(t);
    if (t->dtype == TR_DTYPE_F32) {
        float *d = t->data;
        for (size_t i = 0; i < count; i++) d[i] = NAN;
        return;
    }
    uint16_t *d = t->data;
    for (size_t i = 0; i < count; i++) d[i] = t->dtype == TR_DTYPE_F16 ? 0x7E00 : 0x7FC0; /* quiet NaN */
}

/* ---- comparing and the summary ----------------------------------------------- */

#define SUMMARY_MAX 96

static struct {
    char key[64];
    double worst; /* max relative error seen (exact checks: mismatches) */
    double tol;   /* < 0: an exact check */
    long runs, values, bad;
} summary[SUMMARY_MAX];
static int summary_count;

static int summary_slot(const char *key, double tol)
{
    for (int i = 0; i < summary_count; i++)
        if (strcmp(summary[i].key, key) == 0) return i;
    if (summary_count == SUMMARY_MAX) return -1;
    int i = summary_count++;
    snprintf(summary[i].key, sizeof(summary[i].key), "%s", key);
    summary[i].tol = tol;
    return i;
}

/* 65520 = 65504 + half an ulp: the f16 rounding threshold to infinity. */
#define F16_INF_AT 65520.0

long compare_dtype(const char *what, const char *key, const float *got, const double *want, size_t count,
                   tr_dtype_t dtype, double tol)
{
    double max_abs = 0, max_ref = 0;
    long bad = 0, infs = 0, skipped = 0, values = 0;
    for (size_t i = 0; i < count; i++) {
        double w = want[i], g = got[i];
        if (dtype == TR_DTYPE_F16 && fabs(w) >= F16_INF_AT * (1 - 1e-4)) {
            if (fabs(w) <= F16_INF_AT * (1 + 1e-4)) {
                skipped++;
                continue;
            }
            infs++;
            if (!(isinf(g) && (g > 0) == (w > 0))) bad++;
            continue;
        }
        values++;
        if (!isfinite(g) || !isfinite(w)) {
            bad++;
            continue;
        }
        if (fabs(g - w) > max_abs) max_abs = fabs(g - w);
        if (fabs(w) > max_ref) max_ref = fabs(w);
    }
    double rel = max_ref > 0 ? max_abs / max_ref : max_abs;
    int ok = bad == 0 && count > 0 && rel <= tol;
    CHECK(ok, "%s: max abs %.3g, rel %.3g > %.1g, or %ld wrong of %zu (%ld expected inf)", what, max_abs, rel, tol, bad,
          count, infs);
    printf("%s %-64s %-4s rel %9.3g (tol %.0e, %ld values", ok ? "ok  " : "FAIL", what, tr_dtype_name(dtype), rel, tol,
           values);
    if (infs || skipped) printf(", %ld inf, %ld at the threshold", infs, skipped);
    printf(")\n");
    int s = summary_slot(key, tol);
    if (s >= 0) {
        if (values > 0 && rel > summary[s].worst) summary[s].worst = rel;
        summary[s].runs++;
        summary[s].values += values + infs;
        summary[s].bad += !ok;
    }
    return infs;
}

void summary_exact(const char *key, long mismatches, long values)
{
    int s = summary_slot(key, -1.0);
    if (s < 0) return;
    summary[s].worst += (double)mismatches;
    summary[s].runs++;
    summary[s].values += values;
    summary[s].bad += mismatches != 0;
}

void summary_print(void)
{
    printf("\n== summary: worst error per op (max |got - want| / max |want|) ==\n");
    for (int i = 0; i < summary_count; i++) {
        if (summary[i].tol < 0)
            printf("%s %-44s exact: %6.0f mismatches          (%ld runs, %ld values)\n",
                   summary[i].bad ? "FAIL" : "ok  ", summary[i].key, summary[i].worst, summary[i].runs,
                   summary[i].values);
        else
            printf("%s %-44s max rel %9.3g  bound %.0e  (%ld runs, %ld values)\n", summary[i].bad ? "FAIL" : "ok  ",
                   summary[i].key, summary[i].worst, summary[i].tol, summary[i].runs, summary[i].values);
    }
}
