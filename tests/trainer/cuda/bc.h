/*
 * bc.h - what the files of test_gpu_backend share (prefix bc_, "backend
 * compare"): the two backends compared, host arrays in and out of their
 * tensors, rounding to a dtype, the comparison and its one-line report, and
 * the tolerance table (test_gpu_backend.c).
 *
 * test_gpu_backend runs every op of a compute backend under test (default
 * "cuda") and of a reference backend (default "cpu") on the same inputs and
 * compares the results:
 *   bc_common.c  the two sides, tensors, rounding, comparison
 *   bc_layers.c  convolution, batch norm, pooling, the linear layer
 *   bc_misc.c    relu/add, softmax cross-entropy, check_finite, cast, the
 *                SGD step, tensor round trips, upload/download, the input
 *                step (input_import, host_alloc)
 *   bc_model.c   a ResNet-8 training step (loss and every gradient)
 *   test_gpu_backend.c  main, the tolerance table, the shapes
 *
 * Host arrays are always f32 NCHW (plain parameters in PyTorch's layouts);
 * values already rounded to the dtype of the tensor they go into, so both
 * backends read the same numbers. A side whose backend cannot compute in a
 * dtype (the cpu backend has no f16) runs that check in f32 on the same
 * rounded inputs: its result is then the more exact one.
 */
#ifndef BC_H
#define BC_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "rand.h"

/* One backend of the comparison. */
typedef struct {
    const char *role; /* "ref" or "test" */
    const struct tr_backend_ops *ops;
    tr_backend_t *be;
} bc_side_t;

extern bc_side_t bc_ref, bc_test;
extern test_rng_t bc_rng;
extern int bc_failures, bc_checks;
/* --ref-f32: the reference computes every check in f32, even in a dtype it
 * has (the path the cuda-vs-cpu f16 checks take, exercised on cpu,cpu). */
extern int bc_ref_f32;

/* ---- the tolerance table (test_gpu_backend.c) ---- */
typedef enum {
    BC_TOL_EXACT = 0,  /* copies, relu, max pool forward, casts, round trips */
    BC_TOL_CONV,       /* conv forward / backward data / backward weights */
    BC_TOL_BN,         /* batch norm y, dgamma, dbeta */
    BC_TOL_BN_DX,      /* batch norm dx */
    BC_TOL_BN_STATS,   /* running mean / var (always f32) */
    BC_TOL_SUM,        /* avg pool, max pool backward, linear: f32 sums of exact products */
    BC_TOL_ADD,        /* add (+relu): one rounding of an f32 sum */
    BC_TOL_XENT,       /* softmax cross-entropy loss and dlogits */
    BC_TOL_SGD,        /* SGD step: master weights, momentum, low-precision copy */
    BC_TOL_MODEL_LOSS, /* ResNet-8 loss */
    BC_TOL_MODEL_OUT,  /* ResNet-8 logits and running statistics */
    BC_TOL_MODEL_GRAD, /* ResNet-8 parameter gradients */
    BC_TOL_COUNT
} bc_tol_t;

/* The tolerance of a check of kind tol whose result is in dtype (relative
 * to the reference's max |value|). */
double bc_tol(bc_tol_t tol, tr_dtype_t dtype);

/* ---- random inputs ---- */
static inline double bc_unit(void) { return test_rng_unit(&bc_rng); }
static inline float bc_sym(float scale) { return (float)((2.0 * bc_unit() - 1.0) * scale); }
/* count uniform values in [-scale, scale), rounded to dtype (malloc'd). */
float *bc_rand(size_t count, float scale, tr_dtype_t dtype);
float *bc_nan(size_t count);
/* Round every value to dtype (nearest even) and back to f32, in place. */
void bc_round(float *a, size_t count, tr_dtype_t dtype);

/* ---- the dtypes of one check ---- */
/* The dtype the reference computes a check in when the test side computes
 * in dtype: dtype itself where the reference backend has it (and not
 * --ref-f32), else f32. */
tr_dtype_t bc_ref_dtype(tr_dtype_t dtype);
/* 1 when side's backend computes layers in dtype; else 0 and why. */
int bc_has_dtype(const bc_side_t *side, tr_dtype_t dtype, char *why, size_t why_len);

/* ---- reporting ---- */
/* A failed call: counted and printed as a FAIL line naming it. Returns 1
 * when status is HORA_OK. */
int bc_ok(hora_status_t status, const char *call, const char *file, int line);
#define BC_OK(call) bc_ok((call), #call, __FILE__, __LINE__)
/* got (from the test side) against want (the reference) over count values:
 * passes when every got is finite, every want is finite and
 * max |got - want| <= tol * max |want|. One line: what, max abs, rel (to
 * max |want|), l2 (||got - want|| / ||want||), tol, PASS/FAIL. */
int bc_compare(const char *what, const float *got, const float *want, size_t count, double tol);
/* An exact check of integers or flags (e.g. check_finite's answer). */
int bc_expect(const char *what, long got, long want);
void bc_skip(const char *what, const char *why);

/* ---- tensors on a side ---- */
/* Every helper returns 1 on success, 0 after a FAIL line. Freeing a zeroed
 * tensor is a no-op. */
int bc_act_alloc(bc_side_t *s, int n, int c, int h, int w, tr_dtype_t dtype, tr_tensor_t *t);
void bc_act_free(bc_side_t *s, tr_tensor_t *t);
/* bc_act_free of each of the n tensors t[i]. */
void bc_act_free_all(bc_side_t *s, tr_tensor_t *const *t, int n);
/* host: n x c x h x w f32 (n = host_n, at most t's batch; 0 means t's). */
int bc_act_put(bc_side_t *s, tr_tensor_t *t, const float *host, int host_n);
int bc_act_get(bc_side_t *s, const tr_tensor_t *t, float *host, int host_n);
/* Fill with NaN, so an element the op does not write fails the check. */
int bc_act_poison(bc_side_t *s, tr_tensor_t *t);

/* A plain tensor of dtype and shape dims in a buffer_alloc'd buffer. */
int bc_plain_alloc(bc_side_t *s, tr_dtype_t dtype, int ndim, const int *dims, tr_tensor_t *t);
void bc_plain_free(bc_side_t *s, tr_tensor_t *t);
/* bc_plain_free of each of the n tensors t[i]. */
void bc_plain_free_all(bc_side_t *s, tr_tensor_t *const *t, int n);
/* Through upload / download, converting between f32 host values and the
 * tensor's dtype (i32: host holds int32_t). */
int bc_plain_put(bc_side_t *s, tr_tensor_t *t, const void *host);
int bc_plain_get(bc_side_t *s, const tr_tensor_t *t, void *host);
int bc_plain_poison(bc_side_t *s, tr_tensor_t *t);

void bc_layer_free(bc_side_t *s, tr_layer_t **layer);

/* ---- the checks (one file per family) ---- */
void bc_conv(const tr_conv_desc_t *d, const int *batches, int batch_count);
void bc_bn(const tr_bn_desc_t *d, const int *batches, int batch_count);
void bc_pool(const tr_pool_desc_t *d, const int *batches, int batch_count);
void bc_linear(const tr_linear_desc_t *d, const int *batches, int batch_count);
void bc_eltwise(int n, int c, int h, int w, tr_dtype_t dtype);
void bc_softmax_xent(int n, int k, float smoothing, float grad_scale, tr_dtype_t dlogits_dtype);
void bc_check_finite(size_t count, tr_dtype_t dtype);
void bc_cast(size_t count, tr_dtype_t from, tr_dtype_t to);
void bc_sgd(size_t count, tr_dtype_t grad_dtype, int lp, tr_dtype_t lp_dtype, int nesterov, float momentum,
            float grad_scale);
void bc_roundtrip(int n, int c, int h, int w, tr_dtype_t dtype);
void bc_data_movement(size_t count);
/* input_import of u8 NHWC pixels (prefix samples into a batch of n), from
 * host_alloc memory when pinned. */
void bc_input(int n, int prefix, int c, int h, int w, tr_dtype_t dtype, int pinned);
void bc_model(const char *name, tr_dtype_t compute_dtype, int batch, float loss_scale);

#endif
