/*
 * k_reduce_simd.h - private to kernels/cpu: the vector k_reduce kernels
 * (f32, f64, f16, bf16, i32, i64, u8 x SUM/MIN/MAX/PROD) and their table,
 * written once for every SIMD level. k_reduce_avx2.c and k_reduce_avx512.c
 * include it after their k_simd_<isa>.h, defining first the names of
 * k_simd_level.h (K_SIMD_ISA, K_SIMD_BITS, K_SIMD_TARGET) and the 64-bit
 * integer ops the levels do not share:
 *   K_REDUCE_I64_MIN, K_REDUCE_I64_MAX   signed min / max of int64 lanes
 *   K_REDUCE_I64_PROD                    their wrapping product; left
 *                                        undefined where the level has none
 *                                        (the table takes the scalar kernel)
 *
 * Every kernel runs 4 vectors per iteration (enough loads in flight to
 * saturate memory bandwidth), then single vectors, then hands the last
 * < 1 vector to the matching scalar kernel, whose results are bit-identical
 * (see k_reduce_scalar.c for the NaN rule that makes MIN/MAX agree).
 * Loads and stores are unaligned: callers pass arbitrary offsets into
 * fusion buffers.
 */
#ifndef K_REDUCE_SIMD_H
#define K_REDUCE_SIMD_H

#include "k_simd_level.h"

/* No 8-bit multiply: multiply the even and the odd bytes as 16-bit lanes
 * (the low byte of a 16-bit product depends only on the low bytes) and
 * merge. */
K_SIMD_TARGET static inline K_SIMD_I K_SIMD_FN(_mul_epu8)(K_SIMD_I a, K_SIMD_I b)
{
    K_SIMD_I low_bytes = K_SIMD_MM(_set1_epi16)(0x00FF);
    K_SIMD_I even = K_SIMD_SI(_and)(K_SIMD_MM(_mullo_epi16)(a, b), low_bytes);
    K_SIMD_I odd = K_SIMD_MM(_mullo_epi16)(K_SIMD_MM(_srli_epi16)(a, 8), K_SIMD_MM(_srli_epi16)(b, 8));
    return K_SIMD_SI(_or)(even, K_SIMD_MM(_slli_epi16)(odd, 8));
}

/* ---- kernel templates ---------------------------------------------------------
 * name: <dtype>_<op>, also names the scalar kernel used for the tail.
 * All loads of an iteration come before its stores (dst may be a or b). */
#define K_REDUCE_SIMD(name, elem_t, vec_t, lanes, load, store, vop)                                     \
    K_SIMD_TARGET static void K_SIMD_FN(_##name)(void *dst, const void *a, const void *b, size_t count) \
    {                                                                                                   \
        elem_t *d = dst;                                                                                \
        const elem_t *x = a;                                                                            \
        const elem_t *y = b;                                                                            \
        size_t i = 0;                                                                                   \
        for (; i + 4 * (lanes) <= count; i += 4 * (lanes)) {                                            \
            vec_t x0 = load(x + i), y0 = load(y + i);                                                   \
            vec_t x1 = load(x + i + (lanes)), y1 = load(y + i + (lanes));                               \
            vec_t x2 = load(x + i + 2 * (lanes)), y2 = load(y + i + 2 * (lanes));                       \
            vec_t x3 = load(x + i + 3 * (lanes)), y3 = load(y + i + 3 * (lanes));                       \
            store(d + i, vop(x0, y0));                                                                  \
            store(d + i + (lanes), vop(x1, y1));                                                        \
            store(d + i + 2 * (lanes), vop(x2, y2));                                                    \
            store(d + i + 3 * (lanes), vop(x3, y3));                                                    \
        }                                                                                               \
        for (; i + (lanes) <= count; i += (lanes)) store(d + i, vop(load(x + i), load(y + i)));         \
        k_reduce_scalar_##name(d + i, x + i, y + i, count - i);                                         \
    }

/* bf16 has its own loop: one load yields two fp32 vectors (a pair, see
 * k_simd_<isa>.h), so 2 x 2 vectors of elements per iteration. */
#define K_REDUCE_SIMD_BF16(op, vop)                                                                        \
    K_SIMD_TARGET static void K_SIMD_FN(_bf16_##op)(void *dst, const void *a, const void *b, size_t count) \
    {                                                                                                      \
        const size_t pair = 2 * K_SIMD_LANES(float);                                                       \
        uint16_t *d = dst;                                                                                 \
        const uint16_t *x = a;                                                                             \
        const uint16_t *y = b;                                                                             \
        size_t i = 0;                                                                                      \
        for (; i + 2 * pair <= count; i += 2 * pair) {                                                     \
            K_SIMD_PS x0l, x0h, y0l, y0h, x1l, x1h, y1l, y1h;                                              \
            K_SIMD_FN(_load_bf16_pair)(x + i, &x0l, &x0h);                                                 \
            K_SIMD_FN(_load_bf16_pair)(y + i, &y0l, &y0h);                                                 \
            K_SIMD_FN(_load_bf16_pair)(x + i + pair, &x1l, &x1h);                                          \
            K_SIMD_FN(_load_bf16_pair)(y + i + pair, &y1l, &y1h);                                          \
            K_SIMD_FN(_store_bf16_pair)(d + i, vop(x0l, y0l), vop(x0h, y0h));                              \
            K_SIMD_FN(_store_bf16_pair)(d + i + pair, vop(x1l, y1l), vop(x1h, y1h));                       \
        }                                                                                                  \
        for (; i + pair <= count; i += pair) {                                                             \
            K_SIMD_PS xl, xh, yl, yh;                                                                      \
            K_SIMD_FN(_load_bf16_pair)(x + i, &xl, &xh);                                                   \
            K_SIMD_FN(_load_bf16_pair)(y + i, &yl, &yh);                                                   \
            K_SIMD_FN(_store_bf16_pair)(d + i, vop(xl, yl), vop(xh, yh));                                  \
        }                                                                                                  \
        k_reduce_scalar_bf16_##op(d + i, x + i, y + i, count - i);                                         \
    }

#define K_REDUCE_SIMD_F32(op, vop) \
    K_REDUCE_SIMD(f32_##op, float, K_SIMD_PS, K_SIMD_LANES(float), K_SIMD_FN(_load_ps), K_SIMD_FN(_store_ps), vop)
#define K_REDUCE_SIMD_F64(op, vop) \
    K_REDUCE_SIMD(f64_##op, double, K_SIMD_PD, K_SIMD_LANES(double), K_SIMD_FN(_load_pd), K_SIMD_FN(_store_pd), vop)
/* f16 lanes are counted in the fp32 vector they widen to. */
#define K_REDUCE_SIMD_F16(op, vop) \
    K_REDUCE_SIMD(f16_##op, uint16_t, K_SIMD_PS, K_SIMD_LANES(float), K_SIMD_FN(_load_f16), K_SIMD_FN(_store_f16), vop)
#define K_REDUCE_SIMD_INT(type, elem_t, op, vop) \
    K_REDUCE_SIMD(type##_##op, elem_t, K_SIMD_I, K_SIMD_LANES(elem_t), K_SIMD_FN(_load_si), K_SIMD_FN(_store_si), vop)

K_REDUCE_SIMD_F32(sum, K_SIMD_MM(_add_ps))
K_REDUCE_SIMD_F32(min, K_SIMD_FN(_min_ps))
K_REDUCE_SIMD_F32(max, K_SIMD_FN(_max_ps))
K_REDUCE_SIMD_F32(prod, K_SIMD_MM(_mul_ps))

K_REDUCE_SIMD_F64(sum, K_SIMD_MM(_add_pd))
K_REDUCE_SIMD_F64(min, K_SIMD_FN(_min_pd))
K_REDUCE_SIMD_F64(max, K_SIMD_FN(_max_pd))
K_REDUCE_SIMD_F64(prod, K_SIMD_MM(_mul_pd))

K_REDUCE_SIMD_F16(sum, K_SIMD_MM(_add_ps))
K_REDUCE_SIMD_F16(min, K_SIMD_FN(_min_ps))
K_REDUCE_SIMD_F16(max, K_SIMD_FN(_max_ps))
K_REDUCE_SIMD_F16(prod, K_SIMD_MM(_mul_ps))

K_REDUCE_SIMD_BF16(sum, K_SIMD_MM(_add_ps))
K_REDUCE_SIMD_BF16(min, K_SIMD_FN(_min_ps))
K_REDUCE_SIMD_BF16(max, K_SIMD_FN(_max_ps))
K_REDUCE_SIMD_BF16(prod, K_SIMD_MM(_mul_ps))

K_REDUCE_SIMD_INT(i32, int32_t, sum, K_SIMD_MM(_add_epi32))
K_REDUCE_SIMD_INT(i32, int32_t, min, K_SIMD_MM(_min_epi32))
K_REDUCE_SIMD_INT(i32, int32_t, max, K_SIMD_MM(_max_epi32))
K_REDUCE_SIMD_INT(i32, int32_t, prod, K_SIMD_MM(_mullo_epi32))

K_REDUCE_SIMD_INT(i64, int64_t, sum, K_SIMD_MM(_add_epi64))
K_REDUCE_SIMD_INT(i64, int64_t, min, K_REDUCE_I64_MIN)
K_REDUCE_SIMD_INT(i64, int64_t, max, K_REDUCE_I64_MAX)
#ifdef K_REDUCE_I64_PROD
K_REDUCE_SIMD_INT(i64, int64_t, prod, K_REDUCE_I64_PROD)
#define K_REDUCE_SIMD_I64_PROD K_SIMD_FN(_i64_prod)
#else
#define K_REDUCE_SIMD_I64_PROD k_reduce_scalar_i64_prod
#endif

K_REDUCE_SIMD_INT(u8, uint8_t, sum, K_SIMD_MM(_add_epi8))
K_REDUCE_SIMD_INT(u8, uint8_t, min, K_SIMD_MM(_min_epu8))
K_REDUCE_SIMD_INT(u8, uint8_t, max, K_SIMD_MM(_max_epu8))
K_REDUCE_SIMD_INT(u8, uint8_t, prod, K_SIMD_FN(_mul_epu8))

#define K_REDUCE_SIMD_SCALAR_ROW(type)                                                    \
    [K_OP_SUM] = k_reduce_scalar_##type##_sum, [K_OP_MIN] = k_reduce_scalar_##type##_min, \
    [K_OP_MAX] = k_reduce_scalar_##type##_max, [K_OP_PROD] = k_reduce_scalar_##type##_prod

#define K_REDUCE_SIMD_ROW(type)                                                   \
    [K_OP_SUM] = K_SIMD_FN(_##type##_sum), [K_OP_MIN] = K_SIMD_FN(_##type##_min), \
    [K_OP_MAX] = K_SIMD_FN(_##type##_max), [K_OP_PROD] = K_SIMD_FN(_##type##_prod)

/* k_reduce_table_<isa> */
const k_reduce_table_t K_SIMD_JOIN(k_reduce_table_, K_SIMD_ISA, , ) = {
    [K_DTYPE_F32] = {K_REDUCE_SIMD_ROW(f32)},
    [K_DTYPE_F16] = {K_REDUCE_SIMD_ROW(f16)},
    [K_DTYPE_BF16] = {K_REDUCE_SIMD_ROW(bf16)},
    [K_DTYPE_F64] = {K_REDUCE_SIMD_ROW(f64)},
    [K_DTYPE_I32] = {K_REDUCE_SIMD_ROW(i32)},
    [K_DTYPE_I64] = {[K_OP_SUM] = K_SIMD_FN(_i64_sum),
                     [K_OP_MIN] = K_SIMD_FN(_i64_min),
                     [K_OP_MAX] = K_SIMD_FN(_i64_max),
                     [K_OP_PROD] = K_REDUCE_SIMD_I64_PROD},
    [K_DTYPE_U8] = {K_REDUCE_SIMD_ROW(u8)},
    /* Not vectorised (rare in gradients: masks, counters, flags): the
     * scalar kernels, which are the reference anyway. */
    [K_DTYPE_I8] = {K_REDUCE_SIMD_SCALAR_ROW(i8)},
    [K_DTYPE_I16] = {K_REDUCE_SIMD_SCALAR_ROW(i16)},
    [K_DTYPE_U16] = {K_REDUCE_SIMD_SCALAR_ROW(u16)},
    [K_DTYPE_BOOL] = {K_REDUCE_SIMD_SCALAR_ROW(bool)},
};

#endif /* K_REDUCE_SIMD_H */
