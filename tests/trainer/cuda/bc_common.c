/*
 * bc_common.c - the two sides of the comparison, their tensors, rounding,
 * and the one-line report of every check (bc.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bc.h"
#include "k_cpu.h"

bc_side_t bc_ref = {.role = "ref"}, bc_test = {.role = "test"};
test_rng_t bc_rng = {UINT64_C(0x9E3779B97F4A7C15)};
int bc_failures, bc_checks;
int bc_ref_f32;

static k_dtype_t bc_k_dtype(tr_dtype_t dtype)
{
    switch (dtype) {
    case TR_DTYPE_F16: return K_DTYPE_F16;
    case TR_DTYPE_BF16: return K_DTYPE_BF16;
    case TR_DTYPE_I32: return K_DTYPE_I32;
    default: return K_DTYPE_F32;
    }
}

/* ---- random inputs, rounding ------------------------------------------- */

void bc_round(float *a, size_t count, tr_dtype_t dtype)
{
    for (size_t i = 0; i < count; i++) {
        if (dtype == TR_DTYPE_F16)
            a[i] = k_f16_to_f32(k_f32_to_f16(a[i]));
        else if (dtype == TR_DTYPE_BF16)
            a[i] = k_bf16_to_f32(k_f32_to_bf16(a[i]));
    }
}

float *bc_rand(size_t count, float scale, tr_dtype_t dtype)
{
    float *a = malloc((count ? count : 1) * sizeof(float));
    if (a == NULL) {
        fprintf(stderr, "FAIL out of host memory (%zu floats)\n", count);
        exit(1);
    }
    for (size_t i = 0; i < count; i++) a[i] = bc_sym(scale);
    bc_round(a, count, dtype);
    return a;
}

float *bc_nan(size_t count)
{
    float *a = malloc((count ? count : 1) * sizeof(float));
    if (a == NULL) {
        fprintf(stderr, "FAIL out of host memory (%zu floats)\n", count);
        exit(1);
    }
    for (size_t i = 0; i < count; i++) a[i] = NAN;
    return a;
}

/* ---- dtypes --------------------------------------------------------------- */

int bc_has_dtype(const bc_side_t *side, tr_dtype_t dtype, char *why, size_t why_len)
{
    hora_status_t status = side->ops->compute_dtype(side->be, dtype);
    if (why && why_len) snprintf(why, why_len, "%s", status == HORA_OK ? "" : status_message());
    return status == HORA_OK;
}

tr_dtype_t bc_ref_dtype(tr_dtype_t dtype)
{
    if (dtype == TR_DTYPE_F32 || bc_ref_f32) return TR_DTYPE_F32;
    return bc_has_dtype(&bc_ref, dtype, NULL, 0) ? dtype : TR_DTYPE_F32;
}

/* ---- reporting ------------------------------------------------------------ */

int bc_ok(hora_status_t status, const char *call, const char *file, int line)
{
    if (status == HORA_OK) return 1;
    bc_checks++;
    bc_failures++;
    printf("FAIL %s:%d: %s returned %d\n", file, line, call, (int)status);
    return 0;
}

int bc_compare(const char *what, const float *got, const float *want, size_t count, double tol)
{
    double max_abs = 0.0, max_ref = 0.0, diff2 = 0.0, ref2 = 0.0;
    size_t bad_got = 0, bad_want = 0;
    for (size_t i = 0; i < count; i++) {
        if (!isfinite(want[i])) {
            bad_want++;
            continue;
        }
        if (!isfinite(got[i])) {
            bad_got++;
            continue;
        }
        const double d = fabs((double)got[i] - (double)want[i]);
        if (d > max_abs) max_abs = d;
        if (fabs(want[i]) > max_ref) max_ref = fabs(want[i]);
        diff2 += d * d;
        ref2 += (double)want[i] * want[i];
    }
    /* A reference of zeros (a gradient that is zero) is compared absolutely. */
    const double rel = max_ref > 0.0 ? max_abs / max_ref : max_abs;
    const double l2 = ref2 > 0.0 ? sqrt(diff2 / ref2) : sqrt(diff2);
    const int pass = count > 0 && bad_got == 0 && bad_want == 0 && rel <= tol;
    bc_checks++;
    if (!pass) bc_failures++;
    printf("%-64s max abs %9.3g  rel %9.3g  l2 %9.3g  tol %7.1e  %s", what, max_abs, rel, l2, tol,
           pass ? "PASS" : "FAIL");
    if (bad_got || bad_want) printf(" (%zu non-finite of %zu in test, %zu in ref)", bad_got, count, bad_want);
    if (count == 0) printf(" (no values)");
    printf("\n");
    return pass;
}

int bc_expect(const char *what, long got, long want)
{
    const int pass = got == want;
    bc_checks++;
    if (!pass) bc_failures++;
    printf("%-64s got %ld, want %ld  %s\n", what, got, want, pass ? "PASS" : "FAIL");
    return pass;
}

void bc_skip(const char *what, const char *why) { printf("%-64s SKIP (%s)\n", what, why); }

/* ---- activations ---------------------------------------------------------- */

int bc_act_alloc(bc_side_t *s, int n, int c, int h, int w, tr_dtype_t dtype, tr_tensor_t *t)
{
    memset(t, 0, sizeof(*t));
    return BC_OK(s->ops->tensor_alloc(s->be, n, c, h, w, dtype, t));
}

void bc_act_free(bc_side_t *s, tr_tensor_t *t)
{
    if (t->data != NULL) s->ops->tensor_free(s->be, t);
    memset(t, 0, sizeof(*t));
}

void bc_act_free_all(bc_side_t *s, tr_tensor_t *const *t, int n)
{
    for (int i = 0; i < n; i++) bc_act_free(s, t[i]);
}

int bc_act_put(bc_side_t *s, tr_tensor_t *t, const float *host, int host_n)
{
    const int n = host_n > 0 ? host_n : t->n;
    tr_tensor_t h = tr_tensor_plain((void *)host, TR_DTYPE_F32, TR_MEMORY_HOST, 4, (const int[]){n, t->c, t->h, t->w});
    return BC_OK(s->ops->tensor_import(s->be, &h, t));
}

int bc_act_get(bc_side_t *s, const tr_tensor_t *t, float *host, int host_n)
{
    const int n = host_n > 0 ? host_n : t->n;
    tr_tensor_t h = tr_tensor_plain(host, TR_DTYPE_F32, TR_MEMORY_HOST, 4, (const int[]){n, t->c, t->h, t->w});
    return BC_OK(s->ops->tensor_export(s->be, t, &h));
}

int bc_act_poison(bc_side_t *s, tr_tensor_t *t)
{
    float *nan = bc_nan(tr_tensor_count(t));
    const int ok = bc_act_put(s, t, nan, 0);
    free(nan);
    return ok;
}

/* ---- plain tensors -------------------------------------------------------- */

int bc_plain_alloc(bc_side_t *s, tr_dtype_t dtype, int ndim, const int *dims, tr_tensor_t *t)
{
    memset(t, 0, sizeof(*t));
    tr_tensor_t shape = tr_tensor_plain(NULL, dtype, s->ops->memory, ndim, dims);
    void *data = NULL;
    if (!BC_OK(s->ops->buffer_alloc(s->be, shape.bytes, &data))) return 0;
    *t = tr_tensor_plain(data, dtype, s->ops->memory, ndim, dims);
    return 1;
}

void bc_plain_free(bc_side_t *s, tr_tensor_t *t)
{
    if (t->data != NULL) s->ops->buffer_free(s->be, t->data);
    memset(t, 0, sizeof(*t));
}

void bc_plain_free_all(bc_side_t *s, tr_tensor_t *const *t, int n)
{
    for (int i = 0; i < n; i++) bc_plain_free(s, t[i]);
}

int bc_plain_put(bc_side_t *s, tr_tensor_t *t, const void *host)
{
    if (t->dtype == TR_DTYPE_F32 || t->dtype == TR_DTYPE_I32) return BC_OK(s->ops->upload(s->be, t, host));
    void *tmp = malloc(t->bytes ? t->bytes : 1);
    if (tmp == NULL) return BC_OK(HORA_ERR_NO_MEMORY);
    k_cast(tmp, bc_k_dtype(t->dtype), host, K_DTYPE_F32, tr_tensor_count(t));
    const int ok = BC_OK(s->ops->upload(s->be, t, tmp));
    free(tmp);
    return ok;
}

int bc_plain_get(bc_side_t *s, const tr_tensor_t *t, void *host)
{
    if (t->dtype == TR_DTYPE_F32 || t->dtype == TR_DTYPE_I32) return BC_OK(s->ops->download(s->be, t, host));
    void *tmp = malloc(t->bytes ? t->bytes : 1);
    if (tmp == NULL) return BC_OK(HORA_ERR_NO_MEMORY);
    const int ok = BC_OK(s->ops->download(s->be, t, tmp));
    if (ok) k_cast(host, K_DTYPE_F32, tmp, bc_k_dtype(t->dtype), tr_tensor_count(t));
    free(tmp);
    return ok;
}

int bc_plain_poison(bc_side_t *s, tr_tensor_t *t)
{
    float *nan = bc_nan(tr_tensor_count(t));
    const int ok = bc_plain_put(s, t, nan);
    free(nan);
    return ok;
}

void bc_layer_free(bc_side_t *s, tr_layer_t **layer)
{
    if (*layer != NULL) s->ops->layer_free(*layer);
    *layer = NULL;
}
