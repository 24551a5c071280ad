/*
 * k_nonfinite.c - the loss scaler's kernels: k_nonfinite (does a buffer hold
 * an inf or a NaN?) and k_unscale_nonfinite (multiply by 1/S and answer the
 * same question about the input, in the same pass). Scalar reference plus
 * AVX2 and AVX-512 loops, chosen by k_dispatch_isa(); the scalar kernels
 * are also the vector loops' tails.
 *
 * The test is on bits, not on float compares: a float is +-inf or NaN iff
 * its exponent field is all ones, i.e. iff its magnitude (the bits with the
 * sign cleared, read as an integer) exceeds that of the largest finite
 * value. Magnitudes have a clear top bit, so signed integer compares and
 * maxima order them. The vector loops keep a running per-lane maximum of
 * the magnitudes (an AND and a MAX per vector: no float operation, so no
 * exception for signalling NaNs and nothing else on the critical path) and
 * compare it with the threshold once per block; k_nonfinite returns at the
 * first block that has a hit. Over a gradient arena this runs at memory
 * speed. k_unscale_nonfinite checks the widened fp32 values (widening keeps
 * inf and NaN, so this is the same answer) and multiplies them with one
 * rounding, then rounds once to the dtype as k_scale does, so every path
 * gives the scalar path's bits.
 */
#include "k_simd_all.h"

/* k_nonfinite tests its running maximum once per block of this many bytes
 * (a multiple of every unrolled vector step: 4 x 64 bytes). */
#define K_NONFINITE_BLOCK_BYTES 8192

/* Magnitude masks and the magnitude of the largest finite value. */
#define K_F32_MAG 0x7FFFFFFFu
#define K_F32_MAX_FINITE 0x7F7FFFFFu
#define K_F16_MAX_FINITE 0x7BFFu
#define K_BF16_MAX_FINITE 0x7F7Fu
#define K_F64_MAG UINT64_C(0x7FFFFFFFFFFFFFFF)
#define K_F64_MAX_FINITE UINT64_C(0x7FEFFFFFFFFFFFFF)

/* ---- scalar: the reference and the vector tails --------------------------- */

/* block is K_NONFINITE_BLOCK_BYTES in elements; the inner loop has no exit,
 * so the compiler may vectorise it. */
static int k_nonfinite_scalar_f32(const float *s, size_t count)
{
    const size_t block = K_NONFINITE_BLOCK_BYTES / sizeof(float);
    for (size_t i = 0; i < count;) {
        size_t stop = count - i > block ? i + block : count;
        unsigned hit = 0;
        for (; i < stop; i++) hit |= (k_num_f32_bits(s[i]) & K_F32_MAG) > K_F32_MAX_FINITE;
        if (hit) return 1;
    }
    return 0;
}

static int k_nonfinite_scalar_half(const uint16_t *s, size_t count, unsigned max_finite)
{
    const size_t block = K_NONFINITE_BLOCK_BYTES / sizeof(uint16_t);
    for (size_t i = 0; i < count;) {
        size_t stop = count - i > block ? i + block : count;
        unsigned hit = 0;
        for (; i < stop; i++) hit |= (s[i] & 0x7FFFu) > max_finite;
        if (hit) return 1;
    }
    return 0;
}

static int k_nonfinite_scalar_f16(const uint16_t *s, size_t count)
{
    return k_nonfinite_scalar_half(s, count, K_F16_MAX_FINITE);
}

static int k_nonfinite_scalar_bf16(const uint16_t *s, size_t count)
{
    return k_nonfinite_scalar_half(s, count, K_BF16_MAX_FINITE);
}

static int k_nonfinite_scalar_f64(const double *s, size_t count)
{
    const size_t block = K_NONFINITE_BLOCK_BYTES / sizeof(double);
    for (size_t i = 0; i < count;) {
        size_t stop = count - i > block ? i + block : count;
        unsigned hit = 0;
        for (; i < stop; i++) {
            uint64_t bits;
            memcpy(&bits, &s[i], sizeof(bits));
            hit |= (bits & K_F64_MAG) > K_F64_MAX_FINITE;
        }
        if (hit) return 1;
    }
    return 0;
}

/* dst[i] = round(widen(src[i]) * factor); returns whether any widened
 * src[i] was non-finite. Each element is read before it is written, so
 * dst == src works. */
#define K_ID(x) (x)
#define K_UNSCALE_SCALAR(t, elem_t, load, store)                                            \
    static int k_unscale_scalar_##t(elem_t *d, const elem_t *s, size_t count, float factor) \
    {                                                                                       \
        uint32_t max = 0;                                                                   \
        for (size_t i = 0; i < count; i++) {                                                \
            float x = load(s[i]);                                                           \
            uint32_t mag = k_num_f32_bits(x) & K_F32_MAG;                                   \
            max = mag > max ? mag : max;                                                    \
            d[i] = store(x * factor);                                                       \
        }                                                                                   \
        return max > K_F32_MAX_FINITE;                                                      \
    }
K_UNSCALE_SCALAR(f32, float, K_ID, K_ID)
K_UNSCALE_SCALAR(f16, uint16_t, k_num_f16_to_f32, k_num_f32_to_f16)
K_UNSCALE_SCALAR(bf16, uint16_t, k_num_bf16_to_f32, k_num_f32_to_bf16)
#undef K_UNSCALE_SCALAR
#undef K_ID

#if defined(__x86_64__)

/* ---- k_nonfinite, vectorised -----------------------------------------------
 * One template for every ISA x dtype: blocks of 4 vectors per step with 4
 * running maxima (independent chains), tested once per block; then single
 * vectors; then the scalar kernel for the last lanes - 1 elements.
 * acc(m, v): m = max(m, v & mag); merge(m, n): the two maxima's maximum;
 * above(m): does any lane of m exceed max_finite. */
#define K_NONFINITE_SIMD(name, attr, elem_t, vec_t, lanes, load, zero, acc, merge, above, tail) \
    attr static int name(const elem_t *s, size_t count)                                         \
    {                                                                                           \
        const size_t block = K_NONFINITE_BLOCK_BYTES / sizeof(elem_t);                          \
        size_t i = 0;                                                                           \
        while (count - i >= 4 * (lanes)) {                                                      \
            size_t stop = count - i > block ? i + block : count;                                \
            vec_t m0 = zero, m1 = zero, m2 = zero, m3 = zero;                                   \
            for (; i + 4 * (lanes) <= stop; i += 4 * (lanes)) {                                 \
                m0 = acc(m0, load(s + i));                                                      \
                m1 = acc(m1, load(s + i + (lanes)));                                            \
                m2 = acc(m2, load(s + i + 2 * (lanes)));                                        \
                m3 = acc(m3, load(s + i + 3 * (lanes)));                                        \
            }                                                                                   \
            if (above(merge(merge(m0, m1), merge(m2, m3)))) return 1;                           \
        }                                                                                       \
        vec_t m = zero;                                                                         \
        for (; i + (lanes) <= count; i += (lanes)) m = acc(m, load(s + i));                     \
        if (above(m)) return 1;                                                                 \
        return tail(s + i, count - i);                                                          \
    }

/* AVX2. 64-bit lanes have no max instruction: accumulate the compare
 * results instead (all ones where a lane was non-finite), merged by OR. */
#define K_AVX2_LD(p) _mm256_loadu_si256((const __m256i *)(p))
#define K_AVX2_ZERO _mm256_setzero_si256()
#define K_AVX2_MAX32 _mm256_max_epi32
#define K_AVX2_MAX16 _mm256_max_epi16
#define K_AVX2_ACC32(m, v) K_AVX2_MAX32((m), _mm256_and_si256((v), _mm256_set1_epi32((int)K_F32_MAG)))
#define K_AVX2_ACC16(m, v) K_AVX2_MAX16((m), _mm256_and_si256((v), _mm256_set1_epi16(0x7FFF)))
#define K_AVX2_ACC64(m, v)                                                                                   \
    _mm256_or_si256((m), _mm256_cmpgt_epi64(_mm256_and_si256((v), _mm256_set1_epi64x((long long)K_F64_MAG)), \
                                            _mm256_set1_epi64x((long long)K_F64_MAX_FINITE)))
#define K_AVX2_ANY(c) (!_mm256_testz_si256((c), (c)))
#define K_AVX2_ABOVE_F32(m) K_AVX2_ANY(_mm256_cmpgt_epi32((m), _mm256_set1_epi32((int)K_F32_MAX_FINITE)))
#define K_AVX2_ABOVE_F16(m) K_AVX2_ANY(_mm256_cmpgt_epi16((m), _mm256_set1_epi16((short)K_F16_MAX_FINITE)))
#define K_AVX2_ABOVE_BF16(m) K_AVX2_ANY(_mm256_cmpgt_epi16((m), _mm256_set1_epi16((short)K_BF16_MAX_FINITE)))

K_NONFINITE_SIMD(k_avx2_nonfinite_f32, K_AVX2, float, __m256i, 8, K_AVX2_LD, K_AVX2_ZERO, K_AVX2_ACC32, K_AVX2_MAX32,
                 K_AVX2_ABOVE_F32, k_nonfinite_scalar_f32)
K_NONFINITE_SIMD(k_avx2_nonfinite_f16, K_AVX2, uint16_t, __m256i, 16, K_AVX2_LD, K_AVX2_ZERO, K_AVX2_ACC16,
                 K_AVX2_MAX16, K_AVX2_ABOVE_F16, k_nonfinite_scalar_f16)
K_NONFINITE_SIMD(k_avx2_nonfinite_bf16, K_AVX2, uint16_t, __m256i, 16, K_AVX2_LD, K_AVX2_ZERO, K_AVX2_ACC16,
                 K_AVX2_MAX16, K_AVX2_ABOVE_BF16, k_nonfinite_scalar_bf16)
K_NONFINITE_SIMD(k_avx2_nonfinite_f64, K_AVX2, double, __m256i, 4, K_AVX2_LD, K_AVX2_ZERO, K_AVX2_ACC64,
                 _mm256_or_si256, K_AVX2_ANY, k_nonfinite_scalar_f64)

/* AVX-512: every width has a max (F: 32/64-bit, BW: 16-bit) and the
 * compares give a mask. */
#define K_AVX512_LD(p) _mm512_loadu_si512((const void *)(p))
#define K_AVX512_ZERO _mm512_setzero_si512()
#define K_AVX512_MAX32 _mm512_max_epi32
#define K_AVX512_MAX16 _mm512_max_epi16
#define K_AVX512_MAX64 _mm512_max_epi64
#define K_AVX512_ACC32(m, v) K_AVX512_MAX32((m), _mm512_and_si512((v), _mm512_set1_epi32((int)K_F32_MAG)))
#define K_AVX512_ACC16(m, v) K_AVX512_MAX16((m), _mm512_and_si512((v), _mm512_set1_epi16(0x7FFF)))
#define K_AVX512_ACC64(m, v) K_AVX512_MAX64((m), _mm512_and_si512((v), _mm512_set1_epi64((long long)K_F64_MAG)))
#define K_AVX512_ABOVE_F32(m) (_mm512_cmpgt_epi32_mask((m), _mm512_set1_epi32((int)K_F32_MAX_FINITE)) != 0)
#define K_AVX512_ABOVE_F16(m) (_mm512_cmpgt_epi16_mask((m), _mm512_set1_epi16((short)K_F16_MAX_FINITE)) != 0)
#define K_AVX512_ABOVE_BF16(m) (_mm512_cmpgt_epi16_mask((m), _mm512_set1_epi16((short)K_BF16_MAX_FINITE)) != 0)
#define K_AVX512_ABOVE_F64(m) (_mm512_cmpgt_epi64_mask((m), _mm512_set1_epi64((long long)K_F64_MAX_FINITE)) != 0)

K_NONFINITE_SIMD(k_avx512_nonfinite_f32, K_AVX512, float, __m512i, 16, K_AVX512_LD, K_AVX512_ZERO, K_AVX512_ACC32,
                 K_AVX512_MAX32, K_AVX512_ABOVE_F32, k_nonfinite_scalar_f32)
K_NONFINITE_SIMD(k_avx512_nonfinite_f16, K_AVX512, uint16_t, __m512i, 32, K_AVX512_LD, K_AVX512_ZERO, K_AVX512_ACC16,
                 K_AVX512_MAX16, K_AVX512_ABOVE_F16, k_nonfinite_scalar_f16)
K_NONFINITE_SIMD(k_avx512_nonfinite_bf16, K_AVX512, uint16_t, __m512i, 32, K_AVX512_LD, K_AVX512_ZERO, K_AVX512_ACC16,
                 K_AVX512_MAX16, K_AVX512_ABOVE_BF16, k_nonfinite_scalar_bf16)
K_NONFINITE_SIMD(k_avx512_nonfinite_f64, K_AVX512, double, __m512i, 8, K_AVX512_LD, K_AVX512_ZERO, K_AVX512_ACC64,
                 K_AVX512_MAX64, K_AVX512_ABOVE_F64, k_nonfinite_scalar_f64)

/* ---- k_unscale_nonfinite, vectorised ---------------------------------------
 * Per vector of widened fp32 values: fold their magnitudes into the running
 * maximum, multiply (one rounding), store rounded to the dtype with the
 * same rounding as the scalar kernel (k_simd_*.h). The maximum is tested
 * once, at the end; the scalar kernel does the tail and reports its own.
 * acc, zero, merge and above as for K_NONFINITE_SIMD, on fp32 vectors. */
#define K_UNSCALE_SIMD(name, attr, elem_t, vec_t, ivec_t, lanes, load, store, set1, mul, acc, zero, merge, above, \
                       tail)                                                                                      \
    attr static int name(elem_t *d, const elem_t *s, size_t count, float factor)                                  \
    {                                                                                                             \
        vec_t k = set1(factor);                                                                                   \
        ivec_t m0 = zero, m1 = zero;                                                                              \
        size_t i = 0;                                                                                             \
        for (; i + 2 * (lanes) <= count; i += 2 * (lanes)) {                                                      \
            vec_t v0 = load(s + i), v1 = load(s + i + (lanes));                                                   \
            m0 = acc(m0, v0);                                                                                     \
            m1 = acc(m1, v1);                                                                                     \
            store(d + i, mul(v0, k));                                                                             \
            store(d + i + (lanes), mul(v1, k));                                                                   \
        }                                                                                                         \
        for (; i + (lanes) <= count; i += (lanes)) {                                                              \
            vec_t v = load(s + i);                                                                                \
            m0 = acc(m0, v);                                                                                      \
            store(d + i, mul(v, k));                                                                              \
        }                                                                                                         \
        int hit = above(merge(m0, m1));                                                                           \
        return tail(d + i, s + i, count - i, factor) | hit;                                                       \
    }

/* bf16: one integer load gives two fp32 vectors (k_simd_*.h); the store
 * packs them back in order. */
#define K_UNSCALE_SIMD_BF16(name, attr, vec_t, ivec_t, lanes2, load2, store2, set1, mul, acc, zero, merge, above) \
    attr static int name(uint16_t *d, const uint16_t *s, size_t count, float factor)                              \
    {                                                                                                             \
        vec_t k = set1(factor);                                                                                   \
        ivec_t m0 = zero, m1 = zero;                                                                              \
        size_t i = 0;                                                                                             \
        for (; i + (lanes2) <= count; i += (lanes2)) {                                                            \
            vec_t lo, hi;                                                                                         \
            load2(s + i, &lo, &hi);                                                                               \
            m0 = acc(m0, lo);                                                                                     \
            m1 = acc(m1, hi);                                                                                     \
            store2(d + i, mul(lo, k), mul(hi, k));                                                                \
        }                                                                                                         \
        int hit = above(merge(m0, m1));                                                                           \
        return k_unscale_scalar_bf16(d + i, s + i, count - i, factor) | hit;                                      \
    }

/* The magnitude maximum of fp32 vectors. */
#define K_AVX2_ACCPS(m, v) K_AVX2_ACC32((m), _mm256_castps_si256(v))
#define K_AVX512_ACCPS(m, v) K_AVX512_ACC32((m), _mm512_castps_si512(v))

K_UNSCALE_SIMD(k_avx2_unscale_f32, K_AVX2, float, __m256, __m256i, 8, k_avx2_load_ps, k_avx2_store_ps, _mm256_set1_ps,
               _mm256_mul_ps, K_AVX2_ACCPS, K_AVX2_ZERO, K_AVX2_MAX32, K_AVX2_ABOVE_F32, k_unscale_scalar_f32)
K_UNSCALE_SIMD(k_avx2_unscale_f16, K_AVX2, uint16_t, __m256, __m256i, 8, k_avx2_load_f16, k_avx2_store_f16,
               _mm256_set1_ps, _mm256_mul_ps, K_AVX2_ACCPS, K_AVX2_ZERO, K_AVX2_MAX32, K_AVX2_ABOVE_F32,
               k_unscale_scalar_f16)
K_UNSCALE_SIMD_BF16(k_avx2_unscale_bf16, K_AVX2, __m256, __m256i, 16, k_avx2_load_bf16_pair, k_avx2_store_bf16_pair,
                    _mm256_set1_ps, _mm256_mul_ps, K_AVX2_ACCPS, K_AVX2_ZERO, K_AVX2_MAX32, K_AVX2_ABOVE_F32)

K_UNSCALE_SIMD(k_avx512_unscale_f32, K_AVX512, float, __m512, __m512i, 16, k_avx512_load_ps, k_avx512_store_ps,
               _mm512_set1_ps, _mm512_mul_ps, K_AVX512_ACCPS, K_AVX512_ZERO, K_AVX512_MAX32, K_AVX512_ABOVE_F32,
               k_unscale_scalar_f32)
K_UNSCALE_SIMD(k_avx512_unscale_f16, K_AVX512, uint16_t, __m512, __m512i, 16, k_avx512_load_f16, k_avx512_store_f16,
               _mm512_set1_ps, _mm512_mul_ps, K_AVX512_ACCPS, K_AVX512_ZERO, K_AVX512_MAX32, K_AVX512_ABOVE_F32,
               k_unscale_scalar_f16)
K_UNSCALE_SIMD_BF16(k_avx512_unscale_bf16, K_AVX512, __m512, __m512i, 32, k_avx512_load_bf16_pair,
                    k_avx512_store_bf16_pair, _mm512_set1_ps, _mm512_mul_ps, K_AVX512_ACCPS, K_AVX512_ZERO,
                    K_AVX512_MAX32, K_AVX512_ABOVE_F32)

#endif /* __x86_64__ */

/* ---- entry points --------------------------------------------------------- */

/* Path isa's kernel for (kernel, dtype); the three candidates have one type,
 * so the conditional picks a function pointer. */
#if defined(__x86_64__)
#define K_PICK(isa, kernel, dtype)                       \
    ((isa) == K_ISA_AVX512 ? k_avx512_##kernel##_##dtype \
     : (isa) == K_ISA_AVX2 ? k_avx2_##kernel##_##dtype   \
                           : k_##kernel##_scalar_##dtype)
#else
#define K_PICK(isa, kernel, dtype) ((void)(isa), k_##kernel##_scalar_##dtype)
#endif

int k_nonfinite(const void *src, k_dtype_t dtype, size_t count)
{
    if ((unsigned)dtype >= K_DTYPE_COUNT) return -1;
    if (count == 0) return 0;
    k_isa_t isa = k_dispatch_isa();
    switch (dtype) {
    case K_DTYPE_F32: return K_PICK(isa, nonfinite, f32)(src, count);
    case K_DTYPE_F16: return K_PICK(isa, nonfinite, f16)(src, count);
    case K_DTYPE_BF16: return K_PICK(isa, nonfinite, bf16)(src, count);
    case K_DTYPE_F64: return K_PICK(isa, nonfinite, f64)(src, count);
    default: return 0; /* the integers are always finite */
    }
}

int k_unscale_nonfinite(void *dst, const void *src, k_dtype_t dtype, size_t count, float factor)
{
    if (dtype != K_DTYPE_F32 && dtype != K_DTYPE_F16 && dtype != K_DTYPE_BF16) return -1;
    if (count == 0) return 0;
    k_isa_t isa = k_dispatch_isa();
    switch (dtype) {
    case K_DTYPE_F32: return K_PICK(isa, unscale, f32)(dst, src, count, factor);
    case K_DTYPE_F16: return K_PICK(isa, unscale, f16)(dst, src, count, factor);
    default: return K_PICK(isa, unscale, bf16)(dst, src, count, factor);
    }
}
