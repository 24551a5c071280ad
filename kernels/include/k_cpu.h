/*
 * k_cpu.h - hora's CPU kernels: element-wise reductions, division (AVG),
 * scaling, dtype casts, the trainer's SGD step and the mixed-precision
 * kernels (overflow check, unscale, SGD step on fp32 master weights with a
 * low-precision copy), vectorised with AVX-512 / AVX2 / F16C where the CPU
 * has them (chosen at run time) and a scalar path that is the reference.
 *
 * Layer rule: kernels/ includes nothing from runtime/ or trainer/.
 * Build: kernels/meson.build -> shared library libhora-kernels.so, which
 * exports exactly the functions declared K_API here.
 */
#ifndef K_CPU_H
#define K_CPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with -fvisibility=hidden, so its internals (per-ISA
 * kernels, dispatch tables) are not part of the ABI and cannot be
 * interposed; every public function below carries K_API to be exported. */
#if defined(__GNUC__)
#define K_API __attribute__((visibility("default")))
#else
#define K_API
#endif

/* Same numbering as hora_dtype_t (runtime checks it with static asserts). */
typedef enum {
    K_DTYPE_F32 = 0,
    K_DTYPE_F16 = 1,
    K_DTYPE_BF16 = 2,
    K_DTYPE_F64 = 3,
    K_DTYPE_I32 = 4,
    K_DTYPE_I64 = 5,
    K_DTYPE_U8 = 6,
    K_DTYPE_I8 = 7,
    K_DTYPE_I16 = 8,
    K_DTYPE_U16 = 9,
    K_DTYPE_BOOL = 10, /* one byte, 0 or 1; any other byte reads as 1 (true) */
    K_DTYPE_COUNT = 11
} k_dtype_t;

/*
 * The integer dtypes (i32, i64, u8, i8, i16, u16) behave alike: SUM/PROD
 * wrap modulo 2^bits (computed on the unsigned type), MIN/MAX compare
 * signed or unsigned as the type is, k_div truncates (C's division),
 * k_scale truncates toward zero and saturates (NaN -> 0).
 *
 * bool is the logical type: every input byte other than 0 reads as true,
 * and every output is 0 or 1. SUM and MAX are logical OR ("any"), PROD and
 * MIN logical AND ("all"); k_div truncates the 0/1 value (divisor 1 keeps
 * it, divisor >= 2 gives 0); k_scale gives x AND (factor != 0) (a NaN
 * factor counts as nonzero); casts to bool give value != 0 (NaN -> 1),
 * from bool 0 or 1; a bool -> bool cast normalises too. (The runtime
 * refuses AVERAGE and pre/postscale for bool; the kernels still define
 * them so that no table slot is empty.)
 */

/* Element-wise reduction ops (AVG is SUM then k_div, done by the runtime). */
typedef enum { K_OP_SUM = 0, K_OP_MIN = 1, K_OP_MAX = 2, K_OP_PROD = 3, K_OP_COUNT = 4 } k_op_t;

/* Instruction-set paths. */
typedef enum { K_ISA_SCALAR = 0, K_ISA_AVX2 = 1, K_ISA_AVX512 = 2, K_ISA_COUNT = 3 } k_isa_t;

K_API size_t k_dtype_size(k_dtype_t dtype);

/* Best path this CPU supports, the path in use, and forcing one (tests).
 * k_isa_set returns 0 on success, -1 if the CPU lacks that ISA. */
K_API k_isa_t k_isa_best(void);
K_API k_isa_t k_isa_current(void);
K_API int k_isa_set(k_isa_t isa);
K_API const char *k_isa_name(k_isa_t isa);

/*
 * dst[i] = a[i] op b[i] for i < count.
 * dst may be exactly a or exactly b (no partial overlap). No alignment needed.
 * f16/bf16: both operands widened to fp32, combined, rounded back to nearest even.
 * Integers: SUM and PROD wrap modulo 2^bits (no UB). Floats: MIN/MAX return NaN
 * when either operand is NaN; min(-0, +0) may return either zero.
 */
K_API void k_reduce(void *dst, const void *a, const void *b, size_t count, k_dtype_t dtype, k_op_t op);

/*
 * dst[i] = (srcs[0][i] op srcs[1][i] op ... op srcs[n-1][i]) / divisor for
 * i < count: the n sources combined left to right in source order, then
 * divided (divisor 1 means no division; AVG of n ranks is SUM with
 * divisor n). Made for reducing n peers' buffers in one pass, each element
 * loaded once per source and stored once.
 *
 * Numerics, per dtype:
 *  - f16/bf16: every input widened to fp32, combined in fp32, divided in
 *    fp32 by (float)divisor when divisor > 1, and rounded ONCE to the
 *    dtype (nearest even, as k_reduce and k_cast round). Chained k_reduce
 *    calls instead round after every source, so SUM/PROD/AVG may differ
 *    from them (by design: fewer roundings, and partial sums beyond the
 *    dtype's range do not overflow); MIN/MAX give the chain's result.
 *  - f32: bit-identical to k_reduce(dst, srcs[0], srcs[1], ...), then
 *    k_reduce(dst, dst, srcs[j], ...) for j = 2..n-1, then (divisor > 1)
 *    k_div(dst, dst, count, dtype, divisor): the same fp32 operations in
 *    the same order.
 *  - f64 and integers: exactly that chain (integer SUM/PROD wrap, division
 *    truncates as C's does).
 * MIN/MAX follow k_reduce's rule, so the first NaN in source order wins
 * (quieted for f16/bf16); a SUM/PROD that meets NaNs gives a NaN whose
 * payload is not specified. n == 1 copies srcs[0] (divisor 1; the bytes
 * unchanged) or is k_div(dst, srcs[0], count, dtype, divisor).
 *
 * dst may equal any of the sources (exactly: no partial overlap), and
 * sources may repeat. No alignment needed. Every path the CPU has
 * (k_isa_set) gives the same bits, NaN payloads of SUM/PROD aside.
 * count == 0 touches nothing (dst and srcs may be NULL); n < 1, divisor < 1
 * or an out-of-range dtype/op is a caller bug and writes nothing.
 */
K_API void k_reduce_n(void *dst, const void *const *srcs, int n, size_t count, k_dtype_t dtype, k_op_t op,
                      int64_t divisor);

/*
 * dst[i] = the exact sum of srcs[0][i] .. srcs[n-1][i], rounded once to the
 * dtype (to nearest even), for f32, f16 and bf16: the result depends only on
 * the multiset of the n values, not on their order or on n (what the
 * runtime's HORA_REPRODUCIBLE=exact all-reduce needs). A NaN, or +inf with
 * -inf, gives the dtype's default quiet NaN; a zero sum is -0 only when
 * every input is -0. divisor > 1: that sum rounded to f32, divided in f32,
 * rounded to the dtype. Other dtypes: k_reduce_n's SUM (integers are exact
 * anyway; f64 is summed in source order). dst may equal a source; count == 0
 * touches nothing. Every path (k_isa_set) gives the same bits. Cost: on the
 * vector paths an fp64 sum with an exponent-span test per element (f32 with
 * n = 2: the fp32 addition), near k_reduce_n's memory speed; a TwoSum or
 * long-accumulator sum for the elements whose inputs span more than
 * 29 - ceil(log2 n) binades (k_reduce_exact.c, k_reduce_exact_simd.h).
 */
K_API void k_reduce_n_exact(void *dst, const void *const *srcs, int n, size_t count, k_dtype_t dtype, int64_t divisor);

/*
 * dst[i] = src[i] / divisor (divisor >= 1). f32/f16/bf16 divide in fp32 (then
 * round to the dtype), f64 in fp64, integers with C's truncating division.
 * dst may be src.
 */
K_API void k_div(void *dst, const void *src, size_t count, k_dtype_t dtype, int64_t divisor);

/*
 * dst[i] = src[i] * factor. Floats multiply in fp32 by (float)factor (f64 in
 * fp64); integers compute (double)src[i] * factor and truncate it toward
 * zero, as C's conversion and Horovod do (7 * 0.5 -> 3, -7 * 0.5 -> -3).
 * Where C's conversion is undefined, hora defines it: a NaN product gives
 * 0, and a product whose truncation is outside the type's range saturates
 * to its minimum or maximum. bool: see above. dst may be src.
 */
K_API void k_scale(void *dst, const void *src, size_t count, k_dtype_t dtype, double factor);

/* Convert count elements between any two dtypes (floats round to nearest even,
 * float -> integer rounds to nearest and saturates, NaN -> 0). */
K_API void k_cast(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t count);

/*
 * One SGD step on count f32 parameters, torch.optim.SGD with dampening 0:
 *   g = grad[i] + weight_decay * param[i]      (only when weight_decay != 0)
 *   m = momentum * momentum_buf[i] + g;  momentum_buf[i] = m
 *   param[i] = param[i] - lr * (nesterov ? g + momentum * m : m)
 * With momentum == 0 the step is g and momentum_buf is neither read nor
 * written (it may be NULL). A zeroed buffer makes the first step m = g, as
 * PyTorch's first step does. Every operation rounds once in f32 (no FMA),
 * so all ISA paths give the same bits. No alignment needed; the three
 * arrays must not overlap.
 */
K_API void k_sgd_step(float *param, const float *grad, float *momentum_buf, size_t count, float lr, float momentum,
                      float weight_decay, int nesterov);

/*
 * Mixed-precision training: the loss scaler's overflow check and unscale,
 * and the SGD step on fp32 master weights that also refreshes their
 * low-precision copy (the CPU twins the CUDA kernels will be tested
 * against). Every ISA path gives the scalar path's bits, with the one
 * exception stated for k_sgd_step_mixed (NaN payloads where two NaNs meet).
 */

/*
 * 1 if any of the count elements of src is +inf, -inf or a NaN (any payload,
 * quiet or signalling), else 0. f32, f16, bf16 and f64 are checked by their
 * exponent bits (all ones; no floating-point operation, so no FP exception
 * is raised); the integer dtypes hold no such values and give 0 without
 * reading src. count == 0 gives 0 (src may be NULL). An out-of-range dtype
 * is a caller bug and gives -1, whatever the count (non-zero, so a caller
 * that skips the step on a non-zero result skips it). No alignment needed.
 * May stop reading at the first block (a few KiB) that holds a non-finite
 * element. Made to check a whole gradient arena before an optimizer step,
 * at memory speed.
 */
K_API int k_nonfinite(const void *src, k_dtype_t dtype, size_t count);

/*
 * dst[i] = src[i] * factor for i < count, dtype f32, f16 or bf16: src[i]
 * widened to fp32 (exactly), multiplied by factor in fp32 (one rounding)
 * and, for f16/bf16, rounded once to the dtype (nearest even, NaN stays NaN,
 * overflow -> inf, as k_f32_to_f16 / k_f32_to_bf16 round). Returns what
 * k_nonfinite(src, dtype, count) returns for the input as it was before
 * scaling, computed in the same pass; dst is written in full either way.
 * dst may be exactly src (no partial overlap); no alignment needed.
 * count == 0 gives 0 and touches nothing (dst and src may be NULL). Any
 * other dtype is a caller bug: -1 (whatever the count), nothing written.
 * The loss scaler's unscale: gradients of the loss scaled by S, unscaled
 * with factor 1/S, and the step skipped when the result is non-zero. With
 * a NaN factor every element is a NaN whose payload is not specified.
 */
K_API int k_unscale_nonfinite(void *dst, const void *src, k_dtype_t dtype, size_t count, float factor);

/*
 * One mixed-precision SGD step on count fp32 master parameters, in one pass:
 *   g = widen(grad[i]) * grad_scale           (always; one fp32 rounding)
 * then exactly k_sgd_step's update of param[i] and momentum_buf[i] with
 * that g (same operations in the same order, the weight-decay term skipped
 * when weight_decay == 0, momentum_buf neither read nor written, and
 * allowed to be NULL, when momentum == 0), and, when param_lp is not NULL,
 *   param_lp[i] = the new param[i] rounded to lp_dtype
 * (f16/bf16: nearest even, NaN stays NaN, overflow -> inf, as k_f32_to_f16
 * / k_f32_to_bf16; f32: a copy). grad_dtype is f32, f16 or bf16 (widening
 * is exact); lp_dtype f32, f16 or bf16 (ignored when param_lp is NULL). So
 * grad_dtype f32, grad_scale 1 and param_lp NULL give exactly k_sgd_step's
 * bits. grad_scale is typically 1/S for gradients of a loss scaled by S,
 * which fuses the unscale into the step (check the gradients with
 * k_nonfinite first: this step does not look).
 *
 * No alignment needed; the arrays must not overlap. count == 0 touches
 * nothing; a grad_dtype or (with param_lp) lp_dtype not listed above is a
 * caller bug and writes nothing. Every operation rounds once in fp32 (no
 * FMA), so all ISA paths give the same bits, except that when an operation
 * meets two NaNs, which one's payload comes out (as a quiet NaN) is not
 * specified.
 */
K_API void k_sgd_step_mixed(float *param, void *param_lp, k_dtype_t lp_dtype, const void *grad, k_dtype_t grad_dtype,
                            float grad_scale, float *momentum_buf, size_t count, float lr, float momentum,
                            float weight_decay, int nesterov);

/*
 * Softmax cross-entropy with label smoothing s = label_smoothing, mean over
 * the n rows (PyTorch's cross_entropy(label_smoothing = s)); the formulas
 * are k_train_numeric.h's: logits (n, k) f32 row-major, labels n int32 in
 * [0, k), *loss = the mean loss rounded to f32, dlogits (n, k) in
 * dlogits_dtype (f32, f16 or bf16) = d loss / d logits * grad_scale, each
 * computed in double (the row maximum subtracted) and rounded once. Rows
 * one after another, each row's sums added in element order, so the result
 * does not depend on the ISA path. Returns 0; 1 + i when labels[i] is the
 * first label outside [0, k); -1 for a bad argument (n or k < 1, s outside
 * [0, 1], grad_scale not finite and > 0, another dtype, a NULL pointer).
 * On a non-zero return nothing is written.
 */
K_API int k_softmax_xent(const float *logits, const int32_t *labels, int n, int k, float label_smoothing,
                         float grad_scale, float *loss, void *dlogits, k_dtype_t dlogits_dtype);

/*
 * The cpu backend's element-wise ops on count elements of dtype f32, f16 or
 * bf16 (f16 / bf16 widened exactly, computed in fp32, rounded once back),
 * the definitions of k_train_numeric.h:
 *   k_relu           y = x < 0 ? +0 : x (PyTorch's CPU relu: NaN and -0 pass)
 *   k_relu_backward  dx = y > 0 ? dy : +0 (y is relu's output; a NaN y gives 0)
 *   k_add            y = a + b, then relu when relu != 0
 * Outputs may be exactly an input (in place; no partial overlap); no
 * alignment needed. Every ISA path gives the same bits, except that which
 * payload the sum of two NaNs carries is not specified. Returns 0, or -1
 * for another dtype (nothing written). count == 0 touches nothing.
 */
K_API int k_relu(void *y, const void *x, k_dtype_t dtype, size_t count);
K_API int k_relu_backward(void *dx, const void *y, const void *dy, k_dtype_t dtype, size_t count);
K_API int k_add(void *y, const void *a, const void *b, k_dtype_t dtype, size_t count, int relu);

/* Scalar conversions (round to nearest even; NaN stays NaN; overflow -> inf). */
K_API uint16_t k_f32_to_f16(float x);
K_API float k_f16_to_f32(uint16_t h);
K_API uint16_t k_f32_to_bf16(float x);
K_API float k_bf16_to_f32(uint16_t h);

#ifdef __cplusplus
}
#endif
#endif /* K_CPU_H */
