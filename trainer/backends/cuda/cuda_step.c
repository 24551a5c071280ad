/*
 * cuda_step.c - the cuda backend's softmax cross-entropy, finite check and
 * SGD step, on kernels/cuda's k_cuda_step.h, with the cpu backend's
 * argument checks and messages.
 *
 * The loss's label check and the finite check come back through one
 * device flag read after a stream synchronisation: the loss is downloaded
 * right after anyway, and the loss scaler needs its answer before the step.

 * Not yet run on a GPU (issue 15).
 */
#include <math.h>

#include "cuda_internal.h"
#include "k_cuda_step.h"

/* The flag's value once the queued work has written it. */
static hora_status_t step_read_flag(cuda_backend_t *b, const char *what, int32_t *value)
{
    CUDA_CHECK(
        cuda_rt(cudaMemcpyAsync(b->host_flag, b->dev_flag, sizeof(int32_t), cudaMemcpyDeviceToHost, b->stream), what));
    CUDA_CHECK(cuda_rt(cudaStreamSynchronize(b->stream), what));
    *value = *b->host_flag;
    return HORA_OK;
}

hora_status_t cuda_softmax_xent(tr_backend_t *backend_base, const tr_tensor_t *logits, const tr_tensor_t *labels,
                                float label_smoothing, float grad_scale, tr_tensor_t *loss, tr_tensor_t *dlogits)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    void *ws;
    if (b == NULL || logits == NULL || dlogits == NULL)
        return cuda_fail(HORA_ERR_INVALID_ARG, "softmax_xent: NULL argument");
    const int n = logits->n, k = logits->c;
    if (n <= 0 || k <= 0 || !(label_smoothing >= 0.0f && label_smoothing <= 1.0f) ||
        !(grad_scale > 0.0f && isfinite(grad_scale)))
        return cuda_fail(HORA_ERR_INVALID_ARG, "softmax_xent: n %d, k %d, label smoothing %g, gradient scale %g", n, k,
                         (double)label_smoothing, (double)grad_scale);
    CUDA_CHECK(cuda_check_plain(logits, TR_DTYPE_F32, 2, (const int[]){n, k}, "softmax_xent logits"));
    CUDA_CHECK(cuda_check_plain(labels, TR_DTYPE_I32, 1, (const int[]){n}, "softmax_xent labels"));
    CUDA_CHECK(cuda_check_plain(loss, TR_DTYPE_F32, 1, (const int[]){1}, "softmax_xent loss"));
    if (!cuda_float_dtype(dlogits->dtype))
        return cuda_fail(HORA_ERR_INVALID_ARG, "softmax_xent dlogits: %s (f32, bf16 or f16)",
                         tr_dtype_name(dlogits->dtype));
    CUDA_CHECK(cuda_check_plain(dlogits, dlogits->dtype, 2, (const int[]){n, k}, "softmax_xent dlogits"));
    CUDA_CHECK(cuda_workspace(b, K_CUDA_XENT_WORKSPACE_BYTES(n), &ws));
    CUDA_CHECK(
        cuda_kernel(k_cuda_softmax_xent(logits->data, labels->data, n, k, label_smoothing, grad_scale, loss->data,
                                        dlogits->data, tr_dtype_kernel(dlogits->dtype), ws, b->dev_flag, b->stream),
                    "softmax_xent"));
    int32_t bad = 0;
    CUDA_CHECK(step_read_flag(b, "softmax_xent: the label check", &bad));
    if (bad != 0) {
        int32_t label = 0;
        cudaMemcpy(&label, (const int32_t *)labels->data + (bad - 1), sizeof(label), cudaMemcpyDeviceToHost);
        return cuda_fail(HORA_ERR_INVALID_ARG, "softmax_xent: label %d of row %d is outside [0, %d)", (int)label,
                         (int)bad - 1, k);
    }
    return HORA_OK;
}

hora_status_t cuda_check_finite(tr_backend_t *backend_base, const tr_tensor_t *t, int *nonfinite_out)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (b == NULL || t == NULL || nonfinite_out == NULL)
        return cuda_fail(HORA_ERR_INVALID_ARG, "check_finite: NULL argument");
    if (!cuda_float_dtype(t->dtype))
        return cuda_fail(HORA_ERR_INVALID_ARG, "check_finite: %s tensor (f32, bf16 or f16)", tr_dtype_name(t->dtype));
    const int dims[TR_TENSOR_MAX_DIMS] = {t->n, t->c, t->h, t->w};
    CUDA_CHECK(cuda_check_plain(t, t->dtype, t->ndim, dims, "check_finite"));
    CUDA_CHECK(cuda_rt(cudaMemsetAsync(b->dev_flag, 0, sizeof(int32_t), b->stream), "check_finite: cudaMemsetAsync"));
    CUDA_CHECK(
        cuda_kernel(k_cuda_nonfinite(t->data, tr_dtype_kernel(t->dtype), tr_tensor_count(t), b->dev_flag, b->stream),
                    "check_finite"));
    int32_t found = 0;
    CUDA_CHECK(step_read_flag(b, "check_finite: the flag", &found));
    *nonfinite_out = found != 0;
    return HORA_OK;
}

hora_status_t cuda_sgd_step(tr_backend_t *backend_base, tr_tensor_t *param, tr_tensor_t *param_lp,
                            const tr_tensor_t *grad, tr_tensor_t *momentum, const tr_sgd_args_t *args)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (b == NULL || args == NULL || param == NULL || grad == NULL)
        return cuda_fail(HORA_ERR_INVALID_ARG, "sgd_step: NULL argument");
    const int dims[TR_TENSOR_MAX_DIMS] = {param->n, param->c, param->h, param->w};
    CUDA_CHECK(cuda_check_plain(param, TR_DTYPE_F32, param->ndim, dims, "sgd_step param"));
    if (!cuda_float_dtype(grad->dtype))
        return cuda_fail(HORA_ERR_INVALID_ARG, "sgd_step grad: %s (f32, bf16 or f16)", tr_dtype_name(grad->dtype));
    CUDA_CHECK(cuda_check_plain(grad, grad->dtype, param->ndim, dims, "sgd_step grad"));
    if (param_lp != NULL) {
        if (!cuda_float_dtype(param_lp->dtype))
            return cuda_fail(HORA_ERR_INVALID_ARG, "sgd_step param_lp: %s (f32, bf16 or f16)",
                             tr_dtype_name(param_lp->dtype));
        CUDA_CHECK(cuda_check_plain(param_lp, param_lp->dtype, param->ndim, dims, "sgd_step param_lp"));
    }
    if (args->momentum != 0.0f && momentum == NULL)
        return cuda_fail(HORA_ERR_INVALID_ARG, "sgd_step: momentum %g without a momentum buffer",
                         (double)args->momentum);
    if (momentum != NULL) CUDA_CHECK(cuda_check_plain(momentum, TR_DTYPE_F32, param->ndim, dims, "sgd_step momentum"));
    if (args->nesterov && !(args->momentum > 0.0f))
        return cuda_fail(HORA_ERR_INVALID_ARG, "sgd_step: nesterov needs a momentum > 0");
    const float grad_scale = args->grad_scale == 0.0f ? 1.0f : args->grad_scale;
    if (!(grad_scale > 0.0f && isfinite(grad_scale)))
        return cuda_fail(HORA_ERR_INVALID_ARG, "sgd_step: gradient scale %g", (double)grad_scale);
    return cuda_kernel(k_cuda_sgd_step_mixed(param->data, param_lp ? param_lp->data : NULL,
                                             param_lp ? tr_dtype_kernel(param_lp->dtype) : K_DTYPE_F32, grad->data,
                                             tr_dtype_kernel(grad->dtype), grad_scale, momentum ? momentum->data : NULL,
                                             tr_tensor_count(param), args->lr, args->momentum, args->weight_decay,
                                             args->nesterov, b->stream),
                       "sgd_step");
}
