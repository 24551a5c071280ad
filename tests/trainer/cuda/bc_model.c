/*
 * bc_model.c - one training step of a whole network on both sides: the
 * reference model in f32, the tested one in compute_dtype (its gradients
 * in that dtype too), both built from one spec and given the same initial
 * parameters and BN statistics (the reference's arenas downloaded and
 * uploaded into the tested model's, its low-precision copy then remade);
 * the gradient arenas poisoned with NaN; one forward + backward on the same
 * batch; the loss, the logits, every parameter gradient and every running
 * statistic compared (bc.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bc.h"
#include "model.h"

/* The reference model's arena `arena` copied into the tested model's: a
 * download from one backend and an upload into the other (f32 both). */
static int arena_copy(tr_model_t *from, tr_model_t *to, tr_arena_t arena, const char *what)
{
    const tr_tensor_t *src = tr_model_arena(from, arena), *dst = tr_model_arena(to, arena);
    if (src->dtype != TR_DTYPE_F32 || dst->dtype != TR_DTYPE_F32 || tr_tensor_count(src) != tr_tensor_count(dst)) {
        bc_expect(what, (long)tr_tensor_count(dst), (long)tr_tensor_count(src));
        return 0;
    }
    if (tr_tensor_count(src) == 0) return 1;
    float *host = malloc(src->bytes);
    int ok = host != NULL && BC_OK(bc_ref.ops->download(bc_ref.be, src, host)) &&
             BC_OK(bc_test.ops->upload(bc_test.be, (tr_tensor_t *)dst, host));
    free(host);
    return ok;
}

/* A view of model memory (a gradient, a statistic) on side s, as f32. */
static float *model_get(bc_side_t *s, const tr_tensor_t *t)
{
    float *host = bc_nan(tr_tensor_count(t));
    if (!bc_plain_get(s, t, host)) {
        free(host);
        return NULL;
    }
    return host;
}

void bc_model(const char *name, tr_dtype_t compute_dtype, int batch, float loss_scale)
{
    char what[128];
    snprintf(what, sizeof(what), "%s %s n%d loss scale %g", name, tr_dtype_name(compute_dtype), batch,
             (double)loss_scale);
    char why[256];
    if (!bc_has_dtype(&bc_test, compute_dtype, why, sizeof(why))) {
        bc_skip(what, why);
        return;
    }
    tr_model_spec_t spec;
    if (!BC_OK(tr_model_spec_from_name(name, &spec))) return;
    spec.zero_init_last_bn = 0; /* every gradient non-zero */
    tr_model_spec_t ref_spec = spec, test_spec = spec;
    ref_spec.compute_dtype = ref_spec.grad_dtype = TR_DTYPE_F32;
    test_spec.compute_dtype = test_spec.grad_dtype = compute_dtype;
    const uint64_t seed = 20261202;
    tr_model_t *mr = NULL, *mt = NULL;
    const size_t x_count = (size_t)batch * spec.in_channels * spec.height * spec.width;
    float *x = bc_rand(x_count, 1.0f, TR_DTYPE_F32);
    int32_t *labels = malloc((size_t)batch * sizeof(int32_t));
    for (int i = 0; i < batch; i++) labels[i] = (int32_t)(bc_unit() * spec.classes);
    float *logits[2] = {bc_nan((size_t)batch * spec.classes), bc_nan((size_t)batch * spec.classes)};
    float loss[2] = {NAN, NAN};
    char line[256];

    if (!BC_OK(tr_model_init(bc_ref.be, &ref_spec, batch, 0, seed, &mr)) ||
        !BC_OK(tr_model_init(bc_test.be, &test_spec, batch, 0, seed, &mt)))
        goto out;
    snprintf(line, sizeof(line), "%s parameter count", what);
    if (!bc_expect(line, tr_model_param_count(mt), tr_model_param_count(mr))) goto out;
    snprintf(line, sizeof(line), "%s params arena size", what);
    if (!arena_copy(mr, mt, TR_ARENA_PARAMS, line)) goto out;
    snprintf(line, sizeof(line), "%s stats arena size", what);
    if (!arena_copy(mr, mt, TR_ARENA_STATS, line)) goto out;
    if (!BC_OK(tr_model_sync_compute(mt))) goto out;

    const tr_tensor_t hx = tr_tensor_plain(x, TR_DTYPE_F32, TR_MEMORY_HOST, 4,
                                           (const int[]){batch, spec.in_channels, spec.height, spec.width});
    const float smoothing = 0.1f;
    /* Every gradient is overwritten by the backward: NaN first, so one it
     * misses fails. */
    if (!bc_plain_poison(&bc_ref, (tr_tensor_t *)tr_model_arena(mr, TR_ARENA_GRADS)) ||
        !bc_plain_poison(&bc_test, (tr_tensor_t *)tr_model_arena(mt, TR_ARENA_GRADS)))
        goto out;
    if (!BC_OK(tr_model_forward(mr, &hx, 1)) || !BC_OK(tr_model_forward(mt, &hx, 1)) ||
        !BC_OK(tr_model_logits(mr, logits[0])) || !BC_OK(tr_model_logits(mt, logits[1])) ||
        !BC_OK(tr_model_backward(mr, labels, smoothing, loss_scale, NULL, NULL, &loss[0])) ||
        !BC_OK(tr_model_backward(mt, labels, smoothing, loss_scale, NULL, NULL, &loss[1])))
        goto out;

    snprintf(line, sizeof(line), "%s loss", what);
    bc_compare(line, &loss[1], &loss[0], 1, bc_tol(BC_TOL_MODEL_LOSS, compute_dtype));
    snprintf(line, sizeof(line), "%s logits", what);
    bc_compare(line, logits[1], logits[0], (size_t)batch * spec.classes, bc_tol(BC_TOL_MODEL_OUT, compute_dtype));
    for (int i = 0; i < tr_model_param_count(mr); i++) {
        const tr_param_t *pr = tr_model_param(mr, i), *pt = tr_model_param(mt, i);
        float *gr = model_get(&bc_ref, &pr->grad), *gt = model_get(&bc_test, &pt->grad);
        snprintf(line, sizeof(line), "%s grad %s", what, pr->name);
        if (strcmp(pr->name, pt->name) != 0 || pr->count != pt->count)
            bc_expect(line, (long)pt->count, (long)pr->count);
        else if (gr && gt)
            bc_compare(line, gt, gr, pr->count, bc_tol(BC_TOL_MODEL_GRAD, compute_dtype));
        free(gr);
        free(gt);
    }
    for (int i = 0; i < tr_model_bn_count(mr); i++) {
        const tr_bn_stats_t *br = tr_model_bn(mr, i), *bt = tr_model_bn(mt, i);
        const tr_tensor_t *views[2][2] = {{&br->mean, &br->var}, {&bt->mean, &bt->var}};
        for (int v = 0; v < 2; v++) {
            float *sr = model_get(&bc_ref, views[0][v]), *st = model_get(&bc_test, views[1][v]);
            snprintf(line, sizeof(line), "%s %s.running_%s", what, br->name, v == 0 ? "mean" : "var");
            if (sr && st) bc_compare(line, st, sr, (size_t)br->channels, bc_tol(BC_TOL_MODEL_OUT, compute_dtype));
            free(sr);
            free(st);
        }
    }
out:
    if (mt) tr_model_free(mt);
    if (mr) tr_model_free(mr);
    free(x);
    free(labels);
    free(logits[0]);
    free(logits[1]);
}
