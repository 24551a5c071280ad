/*
 * k_reduce_avx2.c - reduce kernels for AVX2 + FMA + F16C (Haswell and later,
 * Zen). Compiled with plain flags: each function carries a target attribute,
 * and k_dispatch.c only installs this table after checking the CPU and OS.
 *
 * Every kernel runs 4 vectors per iteration (enough loads in flight to
 * saturate memory bandwidth), then single vectors, then hands the last
 * < 1 vector to the matching scalar kernel, whose results are bit-identical
 * (see k_reduce_scalar.c for the NaN rule that makes MIN/MAX agree).
 * Loads and stores are unaligned: callers pass arbitrary offsets into
 * fusion buffers.
 */
#if defined(__x86_64__)

#include "k_simd_avx2.h"

/* ---- element-wise ops on vectors ---------------------------------------- */

/* AVX2 has no 64-bit signed min/max: compare and blend. */
K_AVX2 static inline __m256i k_avx2_min_epi64(__m256i a, __m256i b)
{
    return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b));
}

K_AVX2 static inline __m256i k_avx2_max_epi64(__m256i a, __m256i b)
{
    return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(a, b));
}

/* No 8-bit multiply either: multiply the even and the odd bytes as 16-bit
 * lanes (the low byte of a 16-bit product depends only on the low bytes)
 * and merge. */
K_AVX2 static inline __m256i k_avx2_mul_epu8(__m256i a, __m256i b)
{
    __m256i low_bytes = _mm256_set1_epi16(0x00FF);
    __m256i even = _mm256_and_si256(_mm256_mullo_epi16(a, b), low_bytes);
    __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
    return _mm256_or_si256(even, _mm256_slli_epi16(odd, 8));
}

/* ---- kernel template ------------------------------------------------------
 * name: <dtype>_<op>, also names the scalar kernel used for the tail.
 * All loads of an iteration come before its stores (dst may be a or b). */
#define K_AVX2_KERNEL(name, elem_t, vec_t, lanes, load, store, vop)           \
    K_AVX2 static void k_avx2_##name(void *dst, const void *a, const void *b, size_t count) \
    {                                                                         \
        elem_t *d = dst;                                                      \
        const elem_t *x = a;                                                  \
        const elem_t *y = b;                                                  \
        size_t i = 0;                                                         \
        for (; i + 4 * (lanes) <= count; i += 4 * (lanes)) {                  \
            vec_t x0 = load(x + i), y0 = load(y + i);                         \
            vec_t x1 = load(x + i + (lanes)), y1 = load(y + i + (lanes));     \
            vec_t x2 = load(x + i + 2 * (lanes)), y2 = load(y + i + 2 * (lanes)); \
            vec_t x3 = load(x + i + 3 * (lanes)), y3 = load(y + i + 3 * (lanes)); \
            store(d + i, vop(x0, y0));                                        \
            store(d + i + (lanes), vop(x1, y1));                              \
            store(d + i + 2 * (lanes), vop(x2, y2));                          \
            store(d + i + 3 * (lanes), vop(x3, y3));                          \
        }                                                                     \
        for (; i + (lanes) <= count; i += (lanes))                            \
            store(d + i, vop(load(x + i), load(y + i)));                      \
        k_reduce_scalar_##name(d + i, x + i, y + i, count - i);               \
    }

#define K_AVX2_F32(op, vop) K_AVX2_KERNEL(f32_##op, float, __m256, 8, k_avx2_load_ps, k_avx2_store_ps, vop)
#define K_AVX2_F64(op, vop) K_AVX2_KERNEL(f64_##op, double, __m256d, 4, k_avx2_load_pd, k_avx2_store_pd, vop)
#define K_AVX2_F16(op, vop) K_AVX2_KERNEL(f16_##op, uint16_t, __m256, 8, k_avx2_load_f16, k_avx2_store_f16, vop)

/* bf16 has its own loop: one load yields two fp32 vectors (see above). */
#define K_AVX2_BF16(op, vop)                                                  \
    K_AVX2 static void k_avx2_bf16_##op(void *dst, const void *a, const void *b, size_t count) \
    {                                                                         \
        uint16_t *d = dst;                                                    \
        const uint16_t *x = a;                                                \
        const uint16_t *y = b;                                                \
        size_t i = 0;                                                         \
        for (; i + 32 <= count; i += 32) {                                    \
            __m256 x0l, x0h, y0l, y0h, x1l, x1h, y1l, y1h;                    \
            k_avx2_load_bf16x16(x + i, &x0l, &x0h);                           \
            k_avx2_load_bf16x16(y + i, &y0l, &y0h);                           \
            k_avx2_load_bf16x16(x + i + 16, &x1l, &x1h);                      \
            k_avx2_load_bf16x16(y + i + 16, &y1l, &y1h);                      \
            k_avx2_store_bf16x16(d + i, vop(x0l, y0l), vop(x0h, y0h));        \
            k_avx2_store_bf16x16(d + i + 16, vop(x1l, y1l), vop(x1h, y1h));   \
        }                                                                     \
        for (; i + 16 <= count; i += 16) {                                    \
            __m256 xl, xh, yl, yh;                                            \
            k_avx2_load_bf16x16(x + i, &xl, &xh);                             \
            k_avx2_load_bf16x16(y + i, &yl, &yh);                             \
            k_avx2_store_bf16x16(d + i, vop(xl, yl), vop(xh, yh));            \
        }                                                                     \
        k_reduce_scalar_bf16_##op(d + i, x + i, y + i, count - i);            \
    }
#define K_AVX2_INT(type, elem_t, op, vop)                                     \
    K_AVX2_KERNEL(type##_##op, elem_t, __m256i, 32 / sizeof(elem_t), k_avx2_load_si, k_avx2_store_si, vop)

K_AVX2_F32(sum, _mm256_add_ps)
K_AVX2_F32(min, k_avx2_min_ps)
K_AVX2_F32(max, k_avx2_max_ps)
K_AVX2_F32(prod, _mm256_mul_ps)

K_AVX2_F64(sum, _mm256_add_pd)
K_AVX2_F64(min, k_avx2_min_pd)
K_AVX2_F64(max, k_avx2_max_pd)
K_AVX2_F64(prod, _mm256_mul_pd)

K_AVX2_F16(sum, _mm256_add_ps)
K_AVX2_F16(min, k_avx2_min_ps)
K_AVX2_F16(max, k_avx2_max_ps)
K_AVX2_F16(prod, _mm256_mul_ps)

K_AVX2_BF16(sum, _mm256_add_ps)
K_AVX2_BF16(min, k_avx2_min_ps)
K_AVX2_BF16(max, k_avx2_max_ps)
K_AVX2_BF16(prod, _mm256_mul_ps)

K_AVX2_INT(i32, int32_t, sum, _mm256_add_epi32)
K_AVX2_INT(i32, int32_t, min, _mm256_min_epi32)
K_AVX2_INT(i32, int32_t, max, _mm256_max_epi32)
K_AVX2_INT(i32, int32_t, prod, _mm256_mullo_epi32)

K_AVX2_INT(i64, int64_t, sum, _mm256_add_epi64)
K_AVX2_INT(i64, int64_t, min, k_avx2_min_epi64)
K_AVX2_INT(i64, int64_t, max, k_avx2_max_epi64)
/* i64 prod: no 64-bit multiply before AVX-512DQ; the table uses scalar. */

K_AVX2_INT(u8, uint8_t, sum, _mm256_add_epi8)
K_AVX2_INT(u8, uint8_t, min, _mm256_min_epu8)
K_AVX2_INT(u8, uint8_t, max, _mm256_max_epu8)
K_AVX2_INT(u8, uint8_t, prod, k_avx2_mul_epu8)

#define K_SCALAR_ROW(type)                                                    \
    [K_OP_SUM] = k_reduce_scalar_##type##_sum, [K_OP_MIN] = k_reduce_scalar_##type##_min, \
    [K_OP_MAX] = k_reduce_scalar_##type##_max, [K_OP_PROD] = k_reduce_scalar_##type##_prod

#define K_ROW(type)                                                           \
    [K_OP_SUM] = k_avx2_##type##_sum, [K_OP_MIN] = k_avx2_##type##_min,       \
    [K_OP_MAX] = k_avx2_##type##_max, [K_OP_PROD] = k_avx2_##type##_prod

const k_reduce_table_t k_reduce_table_avx2 = {
    [K_DTYPE_F32] = {K_ROW(f32)},
    [K_DTYPE_F16] = {K_ROW(f16)},
    [K_DTYPE_BF16] = {K_ROW(bf16)},
    [K_DTYPE_F64] = {K_ROW(f64)},
    [K_DTYPE_I32] = {K_ROW(i32)},
    [K_DTYPE_I64] = {[K_OP_SUM] = k_avx2_i64_sum, [K_OP_MIN] = k_avx2_i64_min,
                     [K_OP_MAX] = k_avx2_i64_max, [K_OP_PROD] = k_reduce_scalar_i64_prod},
    [K_DTYPE_U8] = {K_ROW(u8)},
    /* Not vectorised (rare in gradients: masks, counters, flags): the
     * scalar kernels, which are the reference anyway. */
    [K_DTYPE_I8] = {K_SCALAR_ROW(i8)},
    [K_DTYPE_I16] = {K_SCALAR_ROW(i16)},
    [K_DTYPE_U16] = {K_SCALAR_ROW(u16)},
    [K_DTYPE_BOOL] = {K_SCALAR_ROW(bool)},
};

#else
/* Not x86-64: only the scalar path exists. (ISO C wants a declaration.) */
typedef int k_reduce_avx2_unused_t;
#endif /* __x86_64__ */
