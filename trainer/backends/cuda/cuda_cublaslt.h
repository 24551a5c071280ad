/*
 * cuda_cublaslt.h - the cuda backend's fully connected matmuls through
 * cuBLASLt: one matmul plan per (op, layer, batch), chosen by cuBLASLt's
 * heuristics once and run as often as wanted (by the FC layer,
 * cuda_linear.c).
 *
 * Shapes are the backend contract's (trainer/backends/backend.h), all row-major:
 * x (N, c_in) and dx in dtype, w (c_out, c_in) in dtype, y (N, c_out) f32
 * with the f32 bias (c_out) added by the matmul's epilogue, dy (N, c_out)
 * in dtype, dw (c_out, c_in) and dbias (c_out) in grad_dtype, dbias
 * reduced over the batch by the epilogue of the weight-gradient matmul.
 * fp16/bf16 inputs accumulate in f32 (CUBLAS_COMPUTE_32F): tensor cores.
 *
 * In cuBLASLt's column-major terms (a row-major (r, c) matrix is a
 * column-major (c, r) one):
 *   forward           y^T  (c_out x N)    = W  . x^T   (A = w, op T; B = x)
 *   backward data     dx^T (c_in x N)     = W^T . dy^T (A = w; B = dy)
 *   backward weights  dW^T (c_in x c_out) = x^T . dy   (A = x; B = dy, op T;
 *                     dbias = B summed over k = N: CUBLASLT_EPILOGUE_BGRADB)
 *
 * Build: trainer/backends/cuda/meson.build (with CUDA and cuBLASLt).
 */
#ifndef TR_CUDA_CUBLASLT_H
#define TR_CUDA_CUBLASLT_H

#include <stddef.h>

#include <cublasLt.h>

#include "backend.h"

typedef enum {
    CUDA_LINEAR_FORWARD = 0,
    CUDA_LINEAR_BACKWARD_DATA = 1,
    CUDA_LINEAR_BACKWARD_WEIGHTS = 2,
} cuda_linear_op_t;

typedef struct cuda_linear_plan cuda_linear_plan_t;

/* The plan of one matmul: desc's shapes and dtypes at this batch, the
 * algorithm cuBLASLt's heuristics ranked first among those needing at most
 * max_workspace bytes. HORA_ERR_INVALID_ARG for a bad descriptor or batch,
 * HORA_ERR_UNSUPPORTED when cuBLASLt offers no algorithm, HORA_ERR_INTERNAL
 * when a cuBLASLt call fails (logged, naming the call), HORA_ERR_NO_MEMORY. */
hora_status_t cuda_linear_plan_create(cublasLtHandle_t lt, cuda_linear_op_t op, const tr_linear_desc_t *desc, int batch,
                                      size_t max_workspace, cuda_linear_plan_t **plan_out);
void cuda_linear_plan_free(cuda_linear_plan_t *plan);

/* Workspace bytes the plan's algorithm needs (<= max_workspace). */
size_t cuda_linear_plan_workspace(const cuda_linear_plan_t *plan);
/* "forward 2048x1000 batch 256: f16 x f16 -> f32, bias epilogue, algo 21 tile 3 ...". */
const char *cuda_linear_plan_text(const cuda_linear_plan_t *plan);

/* Queue the plan's matmul on stream (device pointers; workspace at least
 * cuda_linear_plan_workspace bytes, may be NULL when that is 0):
 *   forward           a = x, b = w, out = y,  vec = bias (read)
 *   backward data     a = dy, b = w, out = dx, vec = NULL
 *   backward weights  a = x, b = dy, out = dw, vec = dbias (written)
 * The bias pointer is set on the plan's descriptor here: a plan runs from
 * one thread at a time (the backend's). cublasLtCreate needs a GPU, so
 * plans cannot be made deviceless (unlike cuDNN's): only a GPU run can
 * check them (against the cpu backend, issue 15). */
hora_status_t cuda_linear_plan_run(cublasLtHandle_t lt, const cuda_linear_plan_t *plan, const void *a, const void *b,
                                   void *out, void *vec, void *workspace, cudaStream_t stream);

#endif
