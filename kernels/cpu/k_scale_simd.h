/*
 * k_scale_simd.h - private to kernels/cpu: the vector k_div / k_scale
 * kernels and their two tables, written once for every SIMD level.
 * k_scale_avx2.c and k_scale_avx512.c include it after their
 * k_simd_<isa>.h, defining first the names of k_simd_level.h (K_SIMD_ISA,
 * K_SIMD_BITS, K_SIMD_TARGET) and the integer ops the levels do not share:
 *   k_<isa>_div_i32_sign(x, q_even, q_odd)  the last step of i32 division
 *                            (below): the even and odd lanes' quotients
 *                            merged, with x's sign
 *   k_<isa>_vscale_i32(x, f) x * factor per int32 lane, f the factor in
 *                            every double lane, as k_num_trunc_to_i32_sat
 *   K_SCALE_I64              where the level scales i64 lanes (AVX-512DQ):
 *                            its k_<isa>_vscale_i64(x, f), as
 *                            k_num_trunc_to_i64_sat; left undefined elsewhere
 *                            (the table takes the scalar kernel)
 *
 * Same structure as k_reduce_simd.h: 4 vectors per iteration, then single
 * vectors, then the scalar kernel of k_scale.c for the tail, with the same
 * precomputed k_unary_args_t, so every element gets the bits the scalar
 * path gives it.
 *
 * Floats divide with vdivps / vdivpd (a true IEEE division, never a
 * multiply by the reciprocal, which rounds differently). Integers divide by
 * the magic multiply described in k_internal.h. i64 division stays scalar
 * (no 64x64 -> 128-bit vector multiply; the scalar magic multiply is
 * cheap), and so does u8 scaling (a 256-entry table lookup).
 */
#ifndef K_SCALE_SIMD_H
#define K_SCALE_SIMD_H

#include "k_simd_level.h"

/* i32 / d: divide |x| (abs(INT32_MIN) is 0x80000000 = 2^31 read unsigned)
 * by the magic multiply, then give the quotient x's sign. mul_epu32 takes
 * the even 32-bit lanes, so the odd lanes are shifted down for a second
 * multiply; the level merges the two and puts the sign back. */
typedef struct {
    K_SIMD_I magic; /* i32_magic in every 64-bit lane */
    __m128i shift;  /* i32_shift, as the count operand of vpsrlq */
} K_SIMD_FN(_div_i32_t);

K_SIMD_TARGET static inline K_SIMD_FN(_div_i32_t) K_SIMD_FN(_div_i32_init)(const k_unary_args_t *args)
{
    return (K_SIMD_FN(_div_i32_t)){K_SIMD_FN(_set1_epi64)((long long)args->i32_magic),
                                   _mm_cvtsi32_si128((int)args->i32_shift)};
}

K_SIMD_TARGET static inline K_SIMD_I K_SIMD_FN(_vdiv_i32)(K_SIMD_I x, K_SIMD_FN(_div_i32_t) k)
{
    K_SIMD_I n = K_SIMD_MM(_abs_epi32)(x);
    K_SIMD_I q_even = K_SIMD_MM(_srl_epi64)(K_SIMD_MM(_mul_epu32)(n, k.magic), k.shift);
    K_SIMD_I q_odd = K_SIMD_MM(_srl_epi64)(K_SIMD_MM(_mul_epu32)(K_SIMD_MM(_srli_epi64)(n, 32), k.magic), k.shift);
    return K_SIMD_FN(_div_i32_sign)(x, q_even, q_odd);
}

/* u8 / d: the even and the odd bytes as 16-bit lanes, q = (x * magic) >> 16
 * (vpmulhuw), q <= 127 fits back in its byte. */
K_SIMD_TARGET static inline K_SIMD_I K_SIMD_FN(_vdiv_u8)(K_SIMD_I x, K_SIMD_I magic)
{
    K_SIMD_I q_even = K_SIMD_MM(_mulhi_epu16)(K_SIMD_SI(_and)(x, K_SIMD_MM(_set1_epi16)(0x00FF)), magic);
    K_SIMD_I q_odd = K_SIMD_MM(_mulhi_epu16)(K_SIMD_MM(_srli_epi16)(x, 8), magic);
    return K_SIMD_SI(_or)(q_even, K_SIMD_MM(_slli_epi16)(q_odd, 8));
}

/* ---- kernel templates ---------------------------------------------------------
 * kind: div or scale; type names the dtype and the scalar tail kernel;
 * k: the loop-invariant operand of vop, built from args by `init`. */
#define K_SCALE_SIMD(kind, type, elem_t, vec_t, lanes, load, store, vop, k_t, init)                 \
    K_SIMD_TARGET static void K_SIMD_FN(_##kind##_##type)(void *dst, const void *src, size_t count, \
                                                          const k_unary_args_t *args)               \
    {                                                                                               \
        elem_t *d = dst;                                                                            \
        const elem_t *s = src;                                                                      \
        k_t k = init;                                                                               \
        size_t i = 0;                                                                               \
        for (; i + 4 * (lanes) <= count; i += 4 * (lanes)) {                                        \
            vec_t v0 = load(s + i), v1 = load(s + i + (lanes));                                     \
            vec_t v2 = load(s + i + 2 * (lanes)), v3 = load(s + i + 3 * (lanes));                   \
            store(d + i, vop(v0, k));                                                               \
            store(d + i + (lanes), vop(v1, k));                                                     \
            store(d + i + 2 * (lanes), vop(v2, k));                                                 \
            store(d + i + 3 * (lanes), vop(v3, k));                                                 \
        }                                                                                           \
        for (; i + (lanes) <= count; i += (lanes)) store(d + i, vop(load(s + i), k));               \
        k_##kind##_scalar_##type(d + i, s + i, count - i, args);                                    \
    }

/* bf16: one load yields two fp32 vectors (a pair, see k_simd_<isa>.h). */
#define K_SCALE_SIMD_BF16(kind, vop)                                                              \
    K_SIMD_TARGET static void K_SIMD_FN(_##kind##_bf16)(void *dst, const void *src, size_t count, \
                                                        const k_unary_args_t *args)               \
    {                                                                                             \
        const size_t pair = 2 * K_SIMD_LANES(float);                                              \
        uint16_t *d = dst;                                                                        \
        const uint16_t *s = src;                                                                  \
        K_SIMD_PS k = K_SIMD_MM(_set1_ps)(args->f32);                                             \
        size_t i = 0;                                                                             \
        for (; i + 2 * pair <= count; i += 2 * pair) {                                            \
            K_SIMD_PS v0l, v0h, v1l, v1h;                                                         \
            K_SIMD_FN(_load_bf16_pair)(s + i, &v0l, &v0h);                                        \
            K_SIMD_FN(_load_bf16_pair)(s + i + pair, &v1l, &v1h);                                 \
            K_SIMD_FN(_store_bf16_pair)(d + i, vop(v0l, k), vop(v0h, k));                         \
            K_SIMD_FN(_store_bf16_pair)(d + i + pair, vop(v1l, k), vop(v1h, k));                  \
        }                                                                                         \
        for (; i + pair <= count; i += pair) {                                                    \
            K_SIMD_PS vl, vh;                                                                     \
            K_SIMD_FN(_load_bf16_pair)(s + i, &vl, &vh);                                          \
            K_SIMD_FN(_store_bf16_pair)(d + i, vop(vl, k), vop(vh, k));                           \
        }                                                                                         \
        k_##kind##_scalar_bf16(d + i, s + i, count - i, args);                                    \
    }

#define K_SCALE_SIMD_F32(kind, vop)                                                                                \
    K_SCALE_SIMD(kind, f32, float, K_SIMD_PS, K_SIMD_LANES(float), K_SIMD_FN(_load_ps), K_SIMD_FN(_store_ps), vop, \
                 K_SIMD_PS, K_SIMD_MM(_set1_ps)(args->f32))
/* f16 lanes are counted in the fp32 vector they widen to. */
#define K_SCALE_SIMD_F16(kind, vop)                                                                                \
    K_SCALE_SIMD(kind, f16, uint16_t, K_SIMD_PS, K_SIMD_LANES(float), K_SIMD_FN(_load_f16), K_SIMD_FN(_store_f16), \
                 vop, K_SIMD_PS, K_SIMD_MM(_set1_ps)(args->f32))
#define K_SCALE_SIMD_F64(kind, vop)                                                                                  \
    K_SCALE_SIMD(kind, f64, double, K_SIMD_PD, K_SIMD_LANES(double), K_SIMD_FN(_load_pd), K_SIMD_FN(_store_pd), vop, \
                 K_SIMD_PD, K_SIMD_MM(_set1_pd)(args->f64))
#define K_SCALE_SIMD_INT(kind, type, elem_t, vop, k_t, init)                                                         \
    K_SCALE_SIMD(kind, type, elem_t, K_SIMD_I, K_SIMD_LANES(elem_t), K_SIMD_FN(_load_si), K_SIMD_FN(_store_si), vop, \
                 k_t, init)

K_SCALE_SIMD_F32(div, K_SIMD_MM(_div_ps))
K_SCALE_SIMD_F32(scale, K_SIMD_MM(_mul_ps))
K_SCALE_SIMD_F16(div, K_SIMD_MM(_div_ps))
K_SCALE_SIMD_F16(scale, K_SIMD_MM(_mul_ps))
K_SCALE_SIMD_BF16(div, K_SIMD_MM(_div_ps))
K_SCALE_SIMD_BF16(scale, K_SIMD_MM(_mul_ps))
K_SCALE_SIMD_F64(div, K_SIMD_MM(_div_pd))
K_SCALE_SIMD_F64(scale, K_SIMD_MM(_mul_pd))

K_SCALE_SIMD_INT(div, i32, int32_t, K_SIMD_FN(_vdiv_i32), K_SIMD_FN(_div_i32_t), K_SIMD_FN(_div_i32_init)(args))
K_SCALE_SIMD_INT(scale, i32, int32_t, K_SIMD_FN(_vscale_i32), K_SIMD_PD, K_SIMD_MM(_set1_pd)(args->f64))
#ifdef K_SCALE_I64
K_SCALE_SIMD_INT(scale, i64, int64_t, K_SIMD_FN(_vscale_i64), K_SIMD_PD, K_SIMD_MM(_set1_pd)(args->f64))
#define K_SCALE_SIMD_I64 K_SIMD_FN(_scale_i64)
#else
#define K_SCALE_SIMD_I64 k_scale_scalar_i64
#endif
K_SCALE_SIMD_INT(div, u8, uint8_t, K_SIMD_FN(_vdiv_u8), K_SIMD_I, K_SIMD_MM(_set1_epi16)((short)args->u8_magic))

/* k_div_table_<isa> and k_scale_table_<isa> */
const k_unary_table_t K_SIMD_JOIN(k_div_table_, K_SIMD_ISA, , ) = {
    [K_DTYPE_F32] = K_SIMD_FN(_div_f32),
    [K_DTYPE_F16] = K_SIMD_FN(_div_f16),
    [K_DTYPE_BF16] = K_SIMD_FN(_div_bf16),
    [K_DTYPE_F64] = K_SIMD_FN(_div_f64),
    [K_DTYPE_I32] = K_SIMD_FN(_div_i32),
    [K_DTYPE_I64] = k_div_scalar_i64,
    [K_DTYPE_U8] = K_SIMD_FN(_div_u8),
    /* not vectorised: the scalar kernels */
    [K_DTYPE_I8] = k_div_scalar_i8,
    [K_DTYPE_I16] = k_div_scalar_i16,
    [K_DTYPE_U16] = k_div_scalar_u16,
    [K_DTYPE_BOOL] = k_div_scalar_bool,
};

const k_unary_table_t K_SIMD_JOIN(k_scale_table_, K_SIMD_ISA, , ) = {
    [K_DTYPE_F32] = K_SIMD_FN(_scale_f32),
    [K_DTYPE_F16] = K_SIMD_FN(_scale_f16),
    [K_DTYPE_BF16] = K_SIMD_FN(_scale_bf16),
    [K_DTYPE_F64] = K_SIMD_FN(_scale_f64),
    [K_DTYPE_I32] = K_SIMD_FN(_scale_i32),
    [K_DTYPE_I64] = K_SCALE_SIMD_I64,
    [K_DTYPE_U8] = k_scale_scalar_u8,
    /* not vectorised: the scalar kernels */
    [K_DTYPE_I8] = k_scale_scalar_i8,
    [K_DTYPE_I16] = k_scale_scalar_i16,
    [K_DTYPE_U16] = k_scale_scalar_u16,
    [K_DTYPE_BOOL] = k_scale_scalar_bool,
};

#endif /* K_SCALE_SIMD_H */
