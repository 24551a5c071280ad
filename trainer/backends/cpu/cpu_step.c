/*
 * cpu_step.c - the cpu backend's training-step ops around the layers:
 * softmax cross-entropy (the loss and dlogits), the SGD step (mixed
 * precision) and the overflow check of the loss scaler, each a kernels/
 * call (k_cpu.h) split across the backend's threads where it is
 * element-wise.
 */
#include <math.h>

#include "cpu_internal.h"

/* ---- loss ---------------------------------------------------------------- */

/* F.cross_entropy(logits, labels, label_smoothing=s), mean over rows:
 * kernels/'s k_softmax_xent (k_cpu.h; the formulas in k_train_numeric.h,
 * in double, each result rounded once). */
hora_status_t cpu_softmax_xent(tr_backend_t *backend, const tr_tensor_t *logits_t, const tr_tensor_t *labels_t,
                               float label_smoothing, float grad_scale, tr_tensor_t *loss_t, tr_tensor_t *dlogits_t)
{
    if (backend == NULL || logits_t == NULL) return cpu_invalid("softmax_xent: NULL argument");
    const int n = logits_t->n, k = logits_t->c;
    if (n <= 0 || k <= 0 || !(label_smoothing >= 0.0f && label_smoothing <= 1.0f) ||
        !(grad_scale > 0.0f && isfinite(grad_scale)))
        return cpu_invalid("softmax_xent: n %d, k %d, label smoothing %g, gradient scale %g", n, k,
                           (double)label_smoothing, (double)grad_scale);
    CPU_CHECK(cpu_check_plain(logits_t, TR_DTYPE_F32, 2, (const int[]){n, k}, "softmax_xent logits"));
    CPU_CHECK(cpu_check_plain(labels_t, TR_DTYPE_I32, 1, (const int[]){n}, "softmax_xent labels"));
    CPU_CHECK(cpu_check_plain(loss_t, TR_DTYPE_F32, 1, (const int[]){1}, "softmax_xent loss"));
    const tr_dtype_t ddt = dlogits_t != NULL ? dlogits_t->dtype : TR_DTYPE_F32;
    if (ddt != TR_DTYPE_F32 && ddt != TR_DTYPE_BF16 && ddt != TR_DTYPE_F16)
        return cpu_invalid("softmax_xent dlogits: %s (f32, bf16 or f16)", tr_dtype_name(ddt));
    CPU_CHECK(cpu_check_plain(dlogits_t, ddt, 2, (const int[]){n, k}, "softmax_xent dlogits"));
    const int32_t *labels = labels_t->data;
    const int rc = k_softmax_xent(logits_t->data, labels, n, k, label_smoothing, grad_scale, loss_t->data,
                                  dlogits_t->data, tr_dtype_kernel(ddt));
    if (rc > 0)
        return cpu_invalid("softmax_xent: label %d of row %d is outside [0, %d)", (int)labels[rc - 1], rc - 1, k);
    if (rc != 0) /* every argument was checked above */
        return cpu_invalid("softmax_xent: kernels refused the arguments (%d)", rc);
    return HORA_OK;
}

/* ---- optimizer ----------------------------------------------------------- */

static int cpu_float_dtype(tr_dtype_t dtype)
{
    return dtype == TR_DTYPE_F32 || dtype == TR_DTYPE_BF16 || dtype == TR_DTYPE_F16;
}

typedef struct {
    float *param, *momentum;
    char *lp;
    const char *grad;
    size_t grad_size, lp_size;
    k_dtype_t grad_dtype, lp_dtype;
    float grad_scale;
    const tr_sgd_args_t *args;
} cpu_sgd_range_t;

static void cpu_sgd_range(const void *ctx, size_t begin, size_t end)
{
    const cpu_sgd_range_t *r = ctx;
    k_sgd_step_mixed(r->param + begin, r->lp != NULL ? r->lp + begin * r->lp_size : NULL, r->lp_dtype,
                     r->grad + begin * r->grad_size, r->grad_dtype, r->grad_scale,
                     r->momentum != NULL ? r->momentum + begin : NULL, end - begin, r->args->lr, r->args->momentum,
                     r->args->weight_decay, r->args->nesterov);
}

hora_status_t cpu_sgd_step(tr_backend_t *backend_base, tr_tensor_t *param_t, tr_tensor_t *lp_t,
                           const tr_tensor_t *grad_t, tr_tensor_t *momentum_t, const tr_sgd_args_t *args)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL || args == NULL || param_t == NULL || grad_t == NULL)
        return cpu_invalid("sgd_step: NULL argument");
    const int dims[TR_TENSOR_MAX_DIMS] = {param_t->n, param_t->c, param_t->h, param_t->w};
    CPU_CHECK(cpu_check_plain(param_t, TR_DTYPE_F32, param_t->ndim, dims, "sgd_step param"));
    if (!cpu_float_dtype(grad_t->dtype))
        return cpu_invalid("sgd_step grad: %s (f32, bf16 or f16)", tr_dtype_name(grad_t->dtype));
    CPU_CHECK(cpu_check_plain(grad_t, grad_t->dtype, param_t->ndim, dims, "sgd_step grad"));
    if (lp_t != NULL) {
        if (!cpu_float_dtype(lp_t->dtype))
            return cpu_invalid("sgd_step param_lp: %s (f32, bf16 or f16)", tr_dtype_name(lp_t->dtype));
        CPU_CHECK(cpu_check_plain(lp_t, lp_t->dtype, param_t->ndim, dims, "sgd_step param_lp"));
    }
    if (args->momentum != 0.0f && momentum_t == NULL)
        return cpu_invalid("sgd_step: momentum %g without a momentum buffer", (double)args->momentum);
    if (momentum_t != NULL)
        CPU_CHECK(cpu_check_plain(momentum_t, TR_DTYPE_F32, param_t->ndim, dims, "sgd_step momentum"));
    if (args->nesterov && !(args->momentum > 0.0f)) /* torch.optim.SGD refuses it too */
        return cpu_invalid("sgd_step: nesterov needs a momentum > 0");
    const float grad_scale = args->grad_scale == 0.0f ? 1.0f : args->grad_scale;
    if (!(grad_scale > 0.0f && isfinite(grad_scale)))
        return cpu_invalid("sgd_step: gradient scale %g", (double)grad_scale);
    const cpu_sgd_range_t r = {.param = param_t->data,
                               .momentum = momentum_t != NULL ? momentum_t->data : NULL,
                               .lp = lp_t != NULL ? lp_t->data : NULL,
                               .grad = grad_t->data,
                               .grad_size = tr_dtype_size(grad_t->dtype),
                               .lp_size = lp_t != NULL ? tr_dtype_size(lp_t->dtype) : 0,
                               .grad_dtype = tr_dtype_kernel(grad_t->dtype),
                               .lp_dtype = lp_t != NULL ? tr_dtype_kernel(lp_t->dtype) : K_DTYPE_F32,
                               .grad_scale = grad_scale,
                               .args = args};
    cpu_split(backend, tr_tensor_count(param_t), cpu_sgd_range, &r);
    return HORA_OK;
}

/* ---- the overflow check -------------------------------------------------- */

typedef struct {
    const tr_tensor_t *t;
    int *found;
} cpu_finite_range_t;

static void cpu_finite_range(const void *ctx, size_t begin, size_t end)
{
    const cpu_finite_range_t *r = ctx;
    const size_t size = tr_dtype_size(r->t->dtype);
    if (k_nonfinite((const char *)r->t->data + begin * size, tr_dtype_kernel(r->t->dtype), end - begin))
        __atomic_store_n(r->found, 1, __ATOMIC_RELAXED);
}

hora_status_t cpu_check_finite(tr_backend_t *backend_base, const tr_tensor_t *t, int *nonfinite_out)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL || t == NULL || nonfinite_out == NULL) return cpu_invalid("check_finite: NULL argument");
    if (!cpu_float_dtype(t->dtype))
        return cpu_invalid("check_finite: %s tensor (f32, bf16 or f16)", tr_dtype_name(t->dtype));
    const int dims[TR_TENSOR_MAX_DIMS] = {t->n, t->c, t->h, t->w};
    CPU_CHECK(cpu_check_plain(t, t->dtype, t->ndim, dims, "check_finite"));
    int found = 0;
    const cpu_finite_range_t r = {t, &found};
    cpu_split(backend, tr_tensor_count(t), cpu_finite_range, &r);
    *nonfinite_out = found;
    return HORA_OK;
}
