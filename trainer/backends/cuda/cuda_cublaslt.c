/*
 * cuda_cublaslt.c - the fully connected layer's three matmuls through
 * cuBLASLt (cuda_cublaslt.h says which matrices are which).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_cublaslt.h"
#include "cuda_log.h"

/* Pointer alignment the heuristics may assume: tensors are views into
 * arenas at element offsets, so nothing more than a 16-byte vector. */
#define CUDA_LINEAR_MIN_ALIGNMENT 16u

struct cuda_linear_plan {
    cuda_linear_op_t op;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d; /* C has D's layout (beta is 0) */
    cublasLtMatmulAlgo_t algo;
    size_t workspace;
    char text[192];
};

static const char *const linear_op_names[] = {"forward", "backward data", "backward weights"};

static hora_status_t linear_lt(cublasStatus_t s, const char *call, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS) return HORA_OK;
    return cuda_fail(s == CUBLAS_STATUS_ALLOC_FAILED ? HORA_ERR_NO_MEMORY : HORA_ERR_INTERNAL, "%s: %s: %s (%d)", what,
                     call, cublasLtGetStatusString(s), (int)s);
}

#define LINEAR_LT(call, what)                                            \
    do {                                                                 \
        hora_status_t linear_status_ = linear_lt((call), #call, (what)); \
        if (linear_status_ != HORA_OK) {                                 \
            status = linear_status_;                                     \
            goto out;                                                    \
        }                                                                \
    } while (0)

static int linear_cuda_dtype(tr_dtype_t dtype, cudaDataType_t *out)
{
    switch (dtype) {
    case TR_DTYPE_F32: *out = CUDA_R_32F; return 1;
    case TR_DTYPE_F16: *out = CUDA_R_16F; return 1;
    case TR_DTYPE_BF16: *out = CUDA_R_16BF; return 1;
    default: return 0;
    }
}

void cuda_linear_plan_free(cuda_linear_plan_t *plan)
{
    if (!plan) return;
    if (plan->a) cublasLtMatrixLayoutDestroy(plan->a);
    if (plan->b) cublasLtMatrixLayoutDestroy(plan->b);
    if (plan->d) cublasLtMatrixLayoutDestroy(plan->d);
    if (plan->desc) cublasLtMatmulDescDestroy(plan->desc);
    free(plan);
}

hora_status_t cuda_linear_plan_create(cublasLtHandle_t lt, cuda_linear_op_t op, const tr_linear_desc_t *desc, int batch,
                                      size_t max_workspace, cuda_linear_plan_t **plan_out)
{
    cudaDataType_t dt, gdt;
    if (!plan_out || !desc || (unsigned)op > CUDA_LINEAR_BACKWARD_WEIGHTS)
        return cuda_fail(HORA_ERR_INVALID_ARG, "linear plan: NULL argument or unknown op %d", (int)op);
    *plan_out = NULL;
    if (desc->c_in < 1 || desc->c_out < 1 || batch < 1)
        return cuda_fail(HORA_ERR_INVALID_ARG, "linear %s: c_in %d, c_out %d, batch %d (each must be >= 1)",
                         linear_op_names[op], desc->c_in, desc->c_out, batch);
    if (!linear_cuda_dtype(desc->dtype, &dt) || !linear_cuda_dtype(desc->grad_dtype, &gdt))
        return cuda_fail(HORA_ERR_INVALID_ARG, "linear %s: dtype %d / grad_dtype %d (f32, f16 or bf16)",
                         linear_op_names[op], (int)desc->dtype, (int)desc->grad_dtype);
    const uint64_t cin = (uint64_t)desc->c_in, cout = (uint64_t)desc->c_out, n = (uint64_t)batch;

    cuda_linear_plan_t *p = calloc(1, sizeof(*p));
    if (!p) return cuda_fail(HORA_ERR_NO_MEMORY, "linear %s: out of memory", linear_op_names[op]);
    p->op = op;
    cublasLtMatmulPreference_t pref = NULL;
    hora_status_t status = HORA_OK;
    const char *what = linear_op_names[op];
    cublasOperation_t opa = CUBLAS_OP_N, opb = CUBLAS_OP_N;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    LINEAR_LT(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), what);
    switch (op) {
    case CUDA_LINEAR_FORWARD: /* y^T (c_out x N) = W (c_out x c_in) . x^T (c_in x N) */
        opa = CUBLAS_OP_T;
        epilogue = CUBLASLT_EPILOGUE_BIAS;
        LINEAR_LT(cublasLtMatrixLayoutCreate(&p->a, dt, cin, cout, (int64_t)cin), what);
        LINEAR_LT(cublasLtMatrixLayoutCreate(&p->b, dt, cin, n, (int64_t)cin), what);
        LINEAR_LT(cublasLtMatrixLayoutCreate(&p->d, CUDA_R_32F, cout, n, (int64_t)cout), what);
        break;
    case CUDA_LINEAR_BACKWARD_DATA: /* dx^T (c_in x N) = W^T (c_in x c_out) . dy^T (c_out x N) */
        LINEAR_LT(cublasLtMatrixLayoutCreate(&p->a, dt, cin, cout, (int64_t)cin), what);
        LINEAR_LT(cublasLtMatrixLayoutCreate(&p->b, dt, cout, n, (int64_t)cout), what);
        LINEAR_LT(cublasLtMatrixLayoutCreate(&p->d, dt, cin, n, (int64_t)cin), what);
        break;
    case CUDA_LINEAR_BACKWARD_WEIGHTS: /* dW^T (c_in x c_out) = x^T (c_in x N) . dy (N x c_out) */
        opb = CUBLAS_OP_T;
        epilogue = CUBLASLT_EPILOGUE_BGRADB; /* dbias (c_out) = dy summed over N */
        LINEAR_LT(cublasLtMatrixLayoutCreate(&p->a, dt, cin, n, (int64_t)cin), what);
        LINEAR_LT(cublasLtMatrixLayoutCreate(&p->b, dt, cout, n, (int64_t)cout), what);
        LINEAR_LT(cublasLtMatrixLayoutCreate(&p->d, gdt, cin, cout, (int64_t)cin), what);
        break;
    }
    LINEAR_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)), what);
    LINEAR_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)), what);
    LINEAR_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
              what);
    if (op == CUDA_LINEAR_BACKWARD_WEIGHTS) {
        /* dbias in grad_dtype, like dW (the default would be D's type too;
         * said here so the contract does not hang on a default). */
        LINEAR_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &gdt, sizeof(gdt)),
                  what);
    } else if (op == CUDA_LINEAR_FORWARD) {
        const cudaDataType_t f32 = CUDA_R_32F;
        LINEAR_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &f32, sizeof(f32)),
                  what);
    }

    /* The heuristics' best algorithm within the workspace and for pointers
     * aligned to CUDA_LINEAR_MIN_ALIGNMENT. */
    const uint64_t ws = max_workspace;
    const uint32_t align = CUDA_LINEAR_MIN_ALIGNMENT;
    LINEAR_LT(cublasLtMatmulPreferenceCreate(&pref), what);
    LINEAR_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
              what);
    static const cublasLtMatmulPreferenceAttributes_t aligns[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (size_t i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++)
        LINEAR_LT(cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &align, sizeof(align)), what);
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    memset(&result, 0, sizeof(result));
    LINEAR_LT(cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->a, p->b, p->d, p->d, pref, 1, &result, &found), what);
    if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS) {
        status = cuda_fail(HORA_ERR_UNSUPPORTED,
                           "linear %s %dx%d batch %d: cuBLASLt has no algorithm (workspace up to %zu bytes)", what,
                           desc->c_in, desc->c_out, batch, max_workspace);
        goto out;
    }
    p->algo = result.algo;
    p->workspace = result.workspaceSize;
    snprintf(p->text, sizeof(p->text), "linear %s %dx%d batch %d: %s in, f32 accumulate, %s epilogue, workspace %zu",
             what, desc->c_in, desc->c_out, batch, desc->dtype == TR_DTYPE_F32 ? "f32" : "16-bit",
             epilogue == CUBLASLT_EPILOGUE_BIAS     ? "bias"
             : epilogue == CUBLASLT_EPILOGUE_BGRADB ? "bias-gradient"
                                                    : "no",
             p->workspace);
out:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (status != HORA_OK) {
        cuda_linear_plan_free(p);
        return status;
    }
    *plan_out = p;
    return HORA_OK;
}

size_t cuda_linear_plan_workspace(const cuda_linear_plan_t *plan) { return plan->workspace; }

const char *cuda_linear_plan_text(const cuda_linear_plan_t *plan) { return plan->text; }

hora_status_t cuda_linear_plan_run(cublasLtHandle_t lt, const cuda_linear_plan_t *plan, const void *a, const void *b,
                                   void *out, void *vec, void *workspace, cudaStream_t stream)
{
    const float one = 1.0f, zero = 0.0f;
    hora_status_t status = HORA_OK;
    const void *mat_a = a, *mat_b = b; /* cuBLASLt's A and B (cuda_cublaslt.h) */
    if (plan->op != CUDA_LINEAR_BACKWARD_WEIGHTS) mat_a = b, mat_b = a;
    if (!a || !b || !out || (plan->op != CUDA_LINEAR_BACKWARD_DATA && !vec) || (plan->workspace && !workspace))
        return cuda_fail(HORA_ERR_INVALID_ARG, "%s: NULL pointer", plan->text);
    if (plan->op != CUDA_LINEAR_BACKWARD_DATA)
        LINEAR_LT(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec, sizeof(vec)),
                  linear_op_names[plan->op]);
    LINEAR_LT(cublasLtMatmul(lt, plan->desc, &one, mat_a, plan->a, mat_b, plan->b, &zero, out, plan->d, out, plan->d,
                             &plan->algo, workspace, plan->workspace, stream),
              linear_op_names[plan->op]);
out:
    return status;
}
