/*
 * bc_misc.c - the stateless ops on both sides (relu, relu backward, add with
 * and without its relu, softmax cross-entropy, check_finite, cast, the SGD
 * step) and the data paths (tensor_import / tensor_export round trips with
 * batch prefixes, upload / download / fill_zero, the input step from u8
 * pixels), outputs poisoned with NaN first (bc.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bc.h"

static int test_has(const char *what, tr_dtype_t dtype)
{
    char why[256];
    if (bc_has_dtype(&bc_test, dtype, why, sizeof(why))) return 1;
    bc_skip(what, why);
    return 0;
}

/* ---- relu, relu backward, add --------------------------------------------- */

typedef struct {
    float *relu, *relu_inplace, *relu_dx, *add, *add_relu;
} eltwise_out_t;

static int eltwise_side(bc_side_t *s, int n, int c, int h, int w, tr_dtype_t dtype, const float *a, const float *b,
                        const float *y_relu, eltwise_out_t *out)
{
    tr_tensor_t ta = {0}, tb = {0}, ty = {0}, tr = {0};
    int ok = bc_act_alloc(s, n, c, h, w, dtype, &ta) && bc_act_alloc(s, n, c, h, w, dtype, &tb) &&
             bc_act_alloc(s, n, c, h, w, dtype, &ty) && bc_act_alloc(s, n, c, h, w, dtype, &tr);
    ok = ok && bc_act_put(s, &ta, a, 0) && bc_act_put(s, &tb, b, 0) && bc_act_put(s, &tr, y_relu, 0);
    ok =
        ok && bc_act_poison(s, &ty) && BC_OK(s->ops->relu_forward(s->be, &ta, &ty)) && bc_act_get(s, &ty, out->relu, 0);
    /* dx = dy where y > 0 (y: relu's output, here relu(a) on the host). */
    ok = ok && bc_act_poison(s, &ty) && BC_OK(s->ops->relu_backward(s->be, &tr, &tb, &ty)) &&
         bc_act_get(s, &ty, out->relu_dx, 0);
    ok = ok && bc_act_poison(s, &ty) && BC_OK(s->ops->add_forward(s->be, &ta, &tb, 0, &ty)) &&
         bc_act_get(s, &ty, out->add, 0);
    ok = ok && bc_act_poison(s, &ty) && BC_OK(s->ops->add_forward(s->be, &ta, &tb, 1, &ty)) &&
         bc_act_get(s, &ty, out->add_relu, 0);
    /* In place (y aliases x), as the contract allows; a is not needed after. */
    ok = ok && BC_OK(s->ops->relu_forward(s->be, &ta, &ta)) && bc_act_get(s, &ta, out->relu_inplace, 0);
    bc_act_free_all(s, (tr_tensor_t *[]){&ta, &tb, &ty, &tr}, 4);
    return ok;
}

void bc_eltwise(int n, int c, int h, int w, tr_dtype_t dtype)
{
    char what[128];
    snprintf(what, sizeof(what), "eltwise (%d, %d, %d, %d) %s", n, c, h, w, tr_dtype_name(dtype));
    if (!test_has(what, dtype)) return;
    const tr_dtype_t rd = bc_ref_dtype(dtype);
    const size_t count = (size_t)n * c * h * w;
    float *a = bc_rand(count, 2.0f, dtype), *b = bc_rand(count, 2.0f, dtype), *y_relu = malloc(count * sizeof(float));
    /* Exact zeros and sums that cancel: relu's and the mask's edge cases. */
    for (size_t i = 0; i < count; i += 7) a[i] = 0.0f;
    for (size_t i = 3; i < count; i += 11) b[i] = -a[i];
    for (size_t i = 0; i < count; i++) y_relu[i] = a[i] > 0.0f ? a[i] : 0.0f;
    eltwise_out_t o[2];
    for (int i = 0; i < 2; i++)
        o[i] = (eltwise_out_t){bc_nan(count), bc_nan(count), bc_nan(count), bc_nan(count), bc_nan(count)};
    const int ok = eltwise_side(&bc_ref, n, c, h, w, rd, a, b, y_relu, &o[0]) &&
                   eltwise_side(&bc_test, n, c, h, w, dtype, a, b, y_relu, &o[1]);
    if (ok) {
        char line[192];
        snprintf(line, sizeof(line), "%s relu forward", what);
        bc_compare(line, o[1].relu, o[0].relu, count, bc_tol(BC_TOL_EXACT, dtype));
        snprintf(line, sizeof(line), "%s relu forward in place", what);
        bc_compare(line, o[1].relu_inplace, o[0].relu, count, bc_tol(BC_TOL_EXACT, dtype));
        snprintf(line, sizeof(line), "%s relu backward", what);
        bc_compare(line, o[1].relu_dx, o[0].relu_dx, count, bc_tol(BC_TOL_EXACT, dtype));
        snprintf(line, sizeof(line), "%s add", what);
        bc_compare(line, o[1].add, o[0].add, count, bc_tol(BC_TOL_ADD, dtype));
        snprintf(line, sizeof(line), "%s add+relu", what);
        bc_compare(line, o[1].add_relu, o[0].add_relu, count, bc_tol(BC_TOL_ADD, dtype));
    }
    for (int i = 0; i < 2; i++) {
        float *arrays[] = {o[i].relu, o[i].relu_inplace, o[i].relu_dx, o[i].add, o[i].add_relu};
        for (size_t k = 0; k < sizeof(arrays) / sizeof(arrays[0]); k++) free(arrays[k]);
    }
    free(a);
    free(b);
    free(y_relu);
}

/* ---- softmax cross-entropy ------------------------------------------------ */

static int xent_side(bc_side_t *s, int n, int k, float smoothing, float grad_scale, tr_dtype_t dlogits_dtype,
                     const float *logits, const int32_t *labels, float *loss, float *dlogits)
{
    const int ldims[2] = {n, k}, one = 1;
    tr_tensor_t tl = {0}, tlab = {0}, tloss = {0}, td = {0};
    int ok = bc_plain_alloc(s, TR_DTYPE_F32, 2, ldims, &tl) && bc_plain_alloc(s, TR_DTYPE_I32, 1, &n, &tlab) &&
             bc_plain_alloc(s, TR_DTYPE_F32, 1, &one, &tloss) && bc_plain_alloc(s, dlogits_dtype, 2, ldims, &td);
    ok = ok && bc_plain_put(s, &tl, logits) && bc_plain_put(s, &tlab, labels) && bc_plain_poison(s, &tloss) &&
         bc_plain_poison(s, &td);
    ok = ok && BC_OK(s->ops->softmax_xent(s->be, &tl, &tlab, smoothing, grad_scale, &tloss, &td)) &&
         bc_plain_get(s, &tloss, loss) && bc_plain_get(s, &td, dlogits);
    bc_plain_free_all(s, (tr_tensor_t *[]){&tl, &tlab, &tloss, &td}, 4);
    return ok;
}

void bc_softmax_xent(int n, int k, float smoothing, float grad_scale, tr_dtype_t dlogits_dtype)
{
    char what[128];
    snprintf(what, sizeof(what), "softmax xent %dx%d smoothing %g scale %g dlogits %s", n, k, (double)smoothing,
             (double)grad_scale, tr_dtype_name(dlogits_dtype));
    const size_t count = (size_t)n * k;
    float *logits = bc_rand(count, 4.0f, TR_DTYPE_F32);
    int32_t *labels = malloc((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++) labels[i] = (int32_t)(bc_unit() * k);
    float loss[2] = {NAN, NAN}, *d[2] = {bc_nan(count), bc_nan(count)};
    const int ok = xent_side(&bc_ref, n, k, smoothing, grad_scale, dlogits_dtype, logits, labels, &loss[0], d[0]) &&
                   xent_side(&bc_test, n, k, smoothing, grad_scale, dlogits_dtype, logits, labels, &loss[1], d[1]);
    if (ok) {
        char line[192];
        snprintf(line, sizeof(line), "%s loss", what);
        bc_compare(line, &loss[1], &loss[0], 1, bc_tol(BC_TOL_XENT, TR_DTYPE_F32));
        snprintf(line, sizeof(line), "%s dlogits", what);
        bc_compare(line, d[1], d[0], count, bc_tol(BC_TOL_XENT, dlogits_dtype));
    }
    free(d[0]);
    free(d[1]);
    free(logits);
    free(labels);
}

/* ---- check_finite --------------------------------------------------------- */

/* check_finite's answer on side s for host values v (f32, put into a plain
 * tensor of dtype); -1 after a failed call. */
static int finite_side(bc_side_t *s, const float *v, size_t count, tr_dtype_t dtype)
{
    const int dims[1] = {(int)count};
    tr_tensor_t t = {0};
    int nonfinite = -1;
    if (bc_plain_alloc(s, dtype, 1, dims, &t) && bc_plain_put(s, &t, v) &&
        !BC_OK(s->ops->check_finite(s->be, &t, &nonfinite)))
        nonfinite = -1;
    bc_plain_free(s, &t);
    return nonfinite;
}

void bc_check_finite(size_t count, tr_dtype_t dtype)
{
    float *v = bc_rand(count, 100.0f, dtype);
    struct {
        const char *name;
        size_t at;
        float value;
    } cases[] = {{"clean", 0, 0.0f},
                 {"+inf first", 0, INFINITY},
                 {"nan middle", count / 2, NAN},
                 {"-inf last", count - 1, -INFINITY},
                 {"nan last", count - 1, NAN},
                 {"+inf middle", count / 2, INFINITY}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const float keep = v[cases[i].at];
        const int inject = i > 0;
        if (inject) v[cases[i].at] = cases[i].value;
        char line[192];
        snprintf(line, sizeof(line), "check_finite %s %zu %s (ref)", tr_dtype_name(dtype), count, cases[i].name);
        bc_expect(line, finite_side(&bc_ref, v, count, dtype), inject);
        snprintf(line, sizeof(line), "check_finite %s %zu %s (test)", tr_dtype_name(dtype), count, cases[i].name);
        bc_expect(line, finite_side(&bc_test, v, count, dtype), inject);
        v[cases[i].at] = keep;
    }
    free(v);
}

/* ---- cast ----------------------------------------------------------------- */

/* dst = cast(src) on side s; dst_bits gets dst's raw bytes. */
static int cast_side(bc_side_t *s, const float *src, size_t count, tr_dtype_t from, tr_dtype_t to, void *dst_bits)
{
    const int dims[1] = {(int)count};
    tr_tensor_t ts = {0}, td = {0};
    int ok = bc_plain_alloc(s, from, 1, dims, &ts) && bc_plain_alloc(s, to, 1, dims, &td) &&
             bc_plain_put(s, &ts, src) && bc_plain_poison(s, &td) && BC_OK(s->ops->cast(s->be, &ts, &td)) &&
             BC_OK(s->ops->download(s->be, &td, dst_bits));
    bc_plain_free_all(s, (tr_tensor_t *[]){&ts, &td}, 2);
    return ok;
}

void bc_cast(size_t count, tr_dtype_t from, tr_dtype_t to)
{
    /* Magnitudes from 2^-20 (f16 subnormals) to 2^15 (within f16's range),
     * so most values round and f16's subnormals are crossed. */
    float *src = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) src[i] = bc_sym(1.0f) * ldexpf(1.0f, (int)(bc_unit() * 36.0) - 20);
    src[0] = 0.0f;
    if (count > 1) src[1] = -0.0f;
    bc_round(src, count, from);
    const size_t esize = tr_dtype_size(to);
    unsigned char *bits[2] = {malloc(count * esize), malloc(count * esize)};
    char line[192];
    snprintf(line, sizeof(line), "cast %s->%s %zu (elements differing bit for bit)", tr_dtype_name(from),
             tr_dtype_name(to), count);
    if (cast_side(&bc_ref, src, count, from, to, bits[0]) && cast_side(&bc_test, src, count, from, to, bits[1])) {
        long differ = 0;
        for (size_t i = 0; i < count; i++) differ += memcmp(bits[0] + i * esize, bits[1] + i * esize, esize) != 0;
        bc_expect(line, differ, 0);
    }
    free(bits[0]);
    free(bits[1]);
    free(src);
}

/* ---- SGD ------------------------------------------------------------------ */

typedef struct {
    float *param, *momentum, *lp;
} sgd_out_t;

/* Two steps (the first m = g, the second m = momentum m + g). */
static int sgd_side(bc_side_t *s, size_t count, tr_dtype_t grad_dtype, int lp, tr_dtype_t lp_dtype,
                    const tr_sgd_args_t *args, const float *param, const float *const grads[2], sgd_out_t out[2])
{
    const int dims[1] = {(int)count};
    tr_tensor_t tp = {0}, tg = {0}, tm = {0}, tl = {0};
    float *zeros = calloc(count, sizeof(float));
    int ok = bc_plain_alloc(s, TR_DTYPE_F32, 1, dims, &tp) && bc_plain_alloc(s, grad_dtype, 1, dims, &tg) &&
             bc_plain_alloc(s, TR_DTYPE_F32, 1, dims, &tm) && (!lp || bc_plain_alloc(s, lp_dtype, 1, dims, &tl));
    ok = ok && bc_plain_put(s, &tp, param) && bc_plain_put(s, &tm, zeros) && (!lp || bc_plain_poison(s, &tl));
    for (int step = 0; step < 2 && ok; step++) {
        ok = bc_plain_put(s, &tg, grads[step]) &&
             BC_OK(s->ops->sgd_step(s->be, &tp, lp ? &tl : NULL, &tg, args->momentum != 0.0f ? &tm : NULL, args)) &&
             bc_plain_get(s, &tp, out[step].param) && bc_plain_get(s, &tm, out[step].momentum) &&
             (!lp || bc_plain_get(s, &tl, out[step].lp));
    }
    bc_plain_free_all(s, (tr_tensor_t *[]){&tp, &tg, &tm, &tl}, 4);
    free(zeros);
    return ok;
}

void bc_sgd(size_t count, tr_dtype_t grad_dtype, int lp, tr_dtype_t lp_dtype, int nesterov, float momentum,
            float grad_scale)
{
    char what[128];
    snprintf(what, sizeof(what), "sgd %zu grad %s%s%s momentum %g%s scale %g", count, tr_dtype_name(grad_dtype),
             lp ? " lp " : "", lp ? tr_dtype_name(lp_dtype) : "", (double)momentum, nesterov ? " nesterov" : "",
             (double)grad_scale);
    const tr_sgd_args_t args = {
        .lr = 0.1f, .momentum = momentum, .weight_decay = 5e-4f, .nesterov = nesterov, .grad_scale = grad_scale};
    const float unscaled = grad_scale == 0.0f ? 1.0f : 1.0f / grad_scale;
    float *param = bc_rand(count, 1.0f, TR_DTYPE_F32);
    const float *grads[2] = {bc_rand(count, unscaled, grad_dtype), bc_rand(count, unscaled, grad_dtype)};
    sgd_out_t o[2][2];
    for (int i = 0; i < 2; i++)
        for (int step = 0; step < 2; step++) o[i][step] = (sgd_out_t){bc_nan(count), bc_nan(count), bc_nan(count)};
    const int ok = sgd_side(&bc_ref, count, grad_dtype, lp, lp_dtype, &args, param, grads, o[0]) &&
                   sgd_side(&bc_test, count, grad_dtype, lp, lp_dtype, &args, param, grads, o[1]);
    for (int step = 0; step < 2 && ok; step++) {
        char line[192];
        snprintf(line, sizeof(line), "%s step %d param", what, step + 1);
        bc_compare(line, o[1][step].param, o[0][step].param, count, bc_tol(BC_TOL_SGD, TR_DTYPE_F32));
        if (momentum != 0.0f) {
            snprintf(line, sizeof(line), "%s step %d momentum", what, step + 1);
            bc_compare(line, o[1][step].momentum, o[0][step].momentum, count, bc_tol(BC_TOL_SGD, TR_DTYPE_F32));
        }
        if (lp) {
            snprintf(line, sizeof(line), "%s step %d param_lp", what, step + 1);
            bc_compare(line, o[1][step].lp, o[0][step].lp, count, bc_tol(BC_TOL_SGD, lp_dtype));
        }
    }
    for (int i = 0; i < 2; i++)
        for (int step = 0; step < 2; step++) {
            free(o[i][step].param);
            free(o[i][step].momentum);
            free(o[i][step].lp);
        }
    free(param);
    free((void *)grads[0]);
    free((void *)grads[1]);
}

/* ---- tensor_import / tensor_export ---------------------------------------- */

/* Import all n samples and export them; then import a prefix of `prefix`
 * samples into a poisoned tensor and export that prefix. */
static void roundtrip_side(bc_side_t *s, int n, int prefix, int c, int h, int w, tr_dtype_t dtype, const float *host,
                           const char *what)
{
    const size_t count = (size_t)n * c * h * w, prefix_count = (size_t)prefix * c * h * w;
    tr_tensor_t t = {0};
    float *back = bc_nan(count);
    char line[192];
    if (bc_act_alloc(s, n, c, h, w, dtype, &t) && bc_act_put(s, &t, host, 0) && bc_act_get(s, &t, back, 0)) {
        snprintf(line, sizeof(line), "%s n%d round trip (%s)", what, n, s->role);
        bc_compare(line, back, host, count, bc_tol(BC_TOL_EXACT, dtype));
    }
    for (size_t i = 0; i < count; i++) back[i] = NAN;
    if (t.data && bc_act_poison(s, &t) && bc_act_put(s, &t, host, prefix) && bc_act_get(s, &t, back, prefix)) {
        snprintf(line, sizeof(line), "%s prefix %d of n%d round trip (%s)", what, prefix, n, s->role);
        bc_compare(line, back, host, prefix_count, bc_tol(BC_TOL_EXACT, dtype));
    }
    bc_act_free(s, &t);
    free(back);
}

void bc_roundtrip(int n, int c, int h, int w, tr_dtype_t dtype)
{
    char what[128];
    snprintf(what, sizeof(what), "tensor import/export (%d, %d, %d) %s", c, h, w, tr_dtype_name(dtype));
    if (!test_has(what, dtype)) return;
    const size_t count = (size_t)n * c * h * w;
    float *host = bc_rand(count, 8.0f, dtype);
    const int prefix = n > 1 ? n - 1 : 1;
    if (bc_has_dtype(&bc_ref, dtype, NULL, 0)) roundtrip_side(&bc_ref, n, prefix, c, h, w, dtype, host, what);
    roundtrip_side(&bc_test, n, prefix, c, h, w, dtype, host, what);
    free(host);
}

/* ---- upload / download / fill_zero ---------------------------------------- */

void bc_data_movement(size_t count)
{
    bc_side_t *s = &bc_test;
    const int dims[1] = {(int)count};
    float *host = bc_rand(count, 1.0f, TR_DTYPE_F32), *back = bc_nan(count), *zeros = calloc(count, sizeof(float));
    int32_t *ints = malloc(count * sizeof(int32_t)), *ints_back = malloc(count * sizeof(int32_t));
    for (size_t i = 0; i < count; i++) ints[i] = (int32_t)(bc_unit() * 4e9 - 2e9);
    tr_tensor_t t = {0}, ti = {0}, th = {0};
    char line[192];
    if (bc_plain_alloc(s, TR_DTYPE_F32, 1, dims, &t)) {
        snprintf(line, sizeof(line), "buffer_alloc %zu f32 zeroed", count);
        if (BC_OK(s->ops->download(s->be, &t, back))) bc_compare(line, back, zeros, count, 0.0);
        snprintf(line, sizeof(line), "upload/download %zu f32", count);
        for (size_t i = 0; i < count; i++) back[i] = NAN;
        if (BC_OK(s->ops->upload(s->be, &t, host)) && BC_OK(s->ops->download(s->be, &t, back)))
            bc_compare(line, back, host, count, 0.0);
        snprintf(line, sizeof(line), "fill_zero %zu f32", count);
        for (size_t i = 0; i < count; i++) back[i] = NAN;
        tr_event_t event = NULL;
        if (BC_OK(s->ops->fill_zero(s->be, &t)) && BC_OK(s->ops->gradient_ready(s->be, &event)) &&
            BC_OK(s->ops->synchronize(s->be)) && BC_OK(s->ops->download(s->be, &t, back)))
            bc_compare(line, back, zeros, count, 0.0);
    }
    if (bc_plain_alloc(s, TR_DTYPE_I32, 1, dims, &ti) && BC_OK(s->ops->upload(s->be, &ti, ints)) &&
        BC_OK(s->ops->download(s->be, &ti, ints_back))) {
        long differ = 0;
        for (size_t i = 0; i < count; i++) differ += ints[i] != ints_back[i];
        snprintf(line, sizeof(line), "upload/download %zu i32 (elements differing)", count);
        bc_expect(line, differ, 0);
    }
    /* f16 through the dtype conversion helpers: exact for f16 values. */
    float *h16 = bc_rand(count, 100.0f, TR_DTYPE_F16);
    for (size_t i = 0; i < count; i++) back[i] = NAN;
    if (bc_plain_alloc(s, TR_DTYPE_F16, 1, dims, &th) && bc_plain_put(s, &th, h16) && bc_plain_get(s, &th, back)) {
        snprintf(line, sizeof(line), "upload/download %zu f16", count);
        bc_compare(line, back, h16, count, 0.0);
    }
    bc_plain_free_all(s, (tr_tensor_t *[]){&t, &ti, &th}, 3);
    free(h16);
    free(host);
    free(back);
    free(zeros);
    free(ints);
    free(ints_back);
}

/* ---- the input step (input_import, host_alloc) ------------------------------ */

/* The u8 NHWC pixels of `prefix` samples normalised into a poisoned
 * (n, c, h, w) activation of side s, exported; want: the host's
 * normalisation (tr_tensor_normalize_u8) rounded once to dtype. */
static void input_side(bc_side_t *s, const tr_tensor_t *pixels, int n, const float *mean, const float *std,
                       tr_dtype_t dtype, const float *want, const char *what)
{
    const size_t count = (size_t)pixels->n * pixels->c * pixels->h * pixels->w;
    tr_tensor_t t = {0};
    float *got = bc_nan(count);
    char line[192];
    if (bc_act_alloc(s, n, pixels->c, pixels->h, pixels->w, dtype, &t) && bc_act_poison(s, &t) &&
        BC_OK(s->ops->input_import(s->be, pixels, mean, std, &t)) && bc_act_get(s, &t, got, pixels->n)) {
        snprintf(line, sizeof(line), "%s (%s)", what, s->role);
        bc_compare(line, got, want, count, bc_tol(BC_TOL_EXACT, dtype));
    }
    bc_act_free(s, &t);
    free(got);
}

void bc_input(int n, int prefix, int c, int h, int w, tr_dtype_t dtype, int pinned)
{
    char what[128];
    snprintf(what, sizeof(what), "input_import u8 (%d of %d, %d, %d, %d) -> %s%s", prefix, n, c, h, w,
             tr_dtype_name(dtype), pinned ? " from host_alloc" : "");
    if (!test_has(what, dtype)) return;
    const size_t bytes = (size_t)prefix * c * h * w, count = bytes;
    uint8_t *data = NULL;
    if (pinned) {
        void *p = NULL;
        if (!BC_OK(bc_test.ops->host_alloc(bc_test.be, bytes, &p))) return;
        data = p;
        long nonzero = 0;
        for (size_t i = 0; i < bytes; i++) nonzero += data[i] != 0;
        char line[192];
        snprintf(line, sizeof(line), "host_alloc %zu bytes zeroed (non-zero bytes)", bytes);
        bc_expect(line, nonzero, 0);
    } else {
        data = malloc(bytes);
    }
    for (size_t i = 0; i < bytes; i++) data[i] = (uint8_t)(bc_unit() * 256.0);
    tr_tensor_t pixels = tr_tensor_plain(data, TR_DTYPE_U8, TR_MEMORY_HOST, 4, (const int[]){prefix, c, h, w});
    pixels.layout = TR_LAYOUT_NHWC;
    float mean[8], std[8];
    for (int k = 0; k < c && k < 8; k++) {
        mean[k] = 0.4f + 0.05f * (float)k;
        std[k] = k == 1 ? 0.0f : 0.2f + 0.03f * (float)k; /* std 0: p / 255 */
    }
    float *want = bc_nan(count);
    tr_tensor_normalize_u8(&pixels, mean, std, want);
    bc_round(want, count, dtype);
    if (bc_has_dtype(&bc_ref, dtype, NULL, 0)) input_side(&bc_ref, &pixels, n, mean, std, dtype, want, what);
    input_side(&bc_test, &pixels, n, mean, std, dtype, want, what);
    if (pinned)
        bc_test.ops->host_free(bc_test.be, data);
    else
        free(data);
    free(want);
}
