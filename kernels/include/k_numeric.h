/*
 * k_numeric.h - the scalar numerics of hora's kernels, written once for
 * the host and the device: bit casts, f16 / bf16 <-> f32, float MIN/MAX
 * with the library's NaN rule, round-half-even and round-to-odd, and the
 * saturating float -> integer conversions of k_cast (round to nearest) and
 * k_scale (truncate). kernels/cpu (through k_internal.h: the scalar
 * kernels, the vector kernels' tails, k_cast) and kernels/cuda (through
 * k_elem.h: the CUDA kernels and their CPU twins) call these very
 * functions, so a device kernel, its twin and the CPU library compute an
 * element with the same lines.
 *
 * Every function is K_HD: `__host__ __device__ static inline` under nvcc,
 * `static inline` in plain C. Nothing here is exported (k_cpu.h's
 * k_f32_to_f16 & co. are the library's entry points to these
 * conversions). Needs the C library and libm only.
 *
 * Each operation is one IEEE operation in the default rounding mode, and
 * none depends on flushing subnormals: the library is built with
 * -ffp-contract=off and the CUDA kernels with -fmad=false -ftz=false,
 * neither with fast-math.
 */
#ifndef K_NUMERIC_H
#define K_NUMERIC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define K_HD __host__ __device__ static inline
#else
#define K_HD static inline
#endif

/* ---- bit casts (memcpy on the host: the only aliasing-safe way in C) ------ */

#ifdef __CUDA_ARCH__
#define K_NUM_BIT_CAST(name, to_t, from_t, device_cast) \
    K_HD to_t name(from_t x) { return (to_t)device_cast(x); }
#else
#define K_NUM_BIT_CAST(name, to_t, from_t, device_cast) \
    K_HD to_t name(from_t x)                            \
    {                                                   \
        to_t y;                                         \
        memcpy(&y, &x, sizeof(y));                      \
        return y;                                       \
    }
#endif
K_NUM_BIT_CAST(k_num_f32_bits, uint32_t, float, __float_as_uint)
K_NUM_BIT_CAST(k_num_f32_from_bits, float, uint32_t, __uint_as_float)
K_NUM_BIT_CAST(k_num_f64_bits, uint64_t, double, __double_as_longlong)
K_NUM_BIT_CAST(k_num_f64_from_bits, double, uint64_t, __longlong_as_double)
#undef K_NUM_BIT_CAST

/* NaN test: isnan(x) and x != x are the same test; each compiler gets the
 * spelling it turns into one instruction (gcc: ucomiss / cmpunordps from
 * isnan, which it also vectorises so; nvcc: setp.nan from x != x, where
 * its isnan takes an abs and a compare). Float and double alike. */
#ifdef __CUDA_ARCH__
#define K_NUM_ISNAN(x) ((x) != (x))
#else
#define K_NUM_ISNAN(x) isnan(x)
#endif

/* An in-range double -> int32 conversion (truncating, as C's cast), spelled
 * per compiler as K_NUM_ISNAN: through int64 for gcc, whose loops over the
 * narrow integer types it then leaves scalar (cvttsd2si), where the
 * vectorised double -> int32 conversion with the saturation's compares and
 * the packing to 8 or 16 bits ran slower; directly for nvcc (one
 * cvt.rzi.s32.f64). The value is the same. */
#ifdef __CUDA_ARCH__
#define K_NUM_TO_I32(x) ((int32_t)(x))
#else
#define K_NUM_TO_I32(x) ((int32_t)(int64_t)(x))
#endif

/* Number of significant bits of x > 0 (64 - leading zeros). */
K_HD int k_num_bit_width_u64(uint64_t x)
{
#ifdef __CUDA_ARCH__
    return 64 - __clzll((long long)x);
#else
    return 64 - __builtin_clzll(x);
#endif
}

/* ---- f16 / bf16 <-> f32, bit-exact with F16C and the bf16 SIMD code ---------
 *
 * NaN handling copies what vcvtph2ps / vcvtps2ph do, so a scalar tail gives
 * the same bits as the vector body: widening sets the quiet bit, narrowing
 * keeps the top payload bits and sets the quiet bit.
 */

/* f16 -> f32, exact. Normals rebias the exponent (+112 << 23 on the
 * shifted bits), subnormals are mant * 2^-24 computed in fp32 (exact, and
 * no subnormal operand, so a flush-to-zero mode could not change it),
 * inf/NaN keep their payload and get the quiet bit. */
K_HD float k_num_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    /* em: exponent and mantissa, h & 0x7FFF; mant = em & 0x3FF. The same
     * values spelled per compiler: from ands of a 16-bit value gcc makes
     * 16-bit operations with 16-bit immediates, each a length-changing
     * prefix that stalls x86 decoders (k_cast's f16 -> f32 loop took twice
     * the time), and not from subtractions of the bits to clear; nvcc
     * keeps the ands. */
#ifdef __CUDA_ARCH__
    uint32_t em = h & 0x7FFFu;
    uint32_t mant = em & 0x3FFu;
#else
    uint32_t em = (uint32_t)h - ((uint32_t)h & 0x8000u);
    uint32_t mant = em - (em & 0x7C00u);
#endif
    uint32_t bits;
    if (em >= 0x7C00u)
        bits = 0x7F800000u | (mant << 13) | (mant ? 0x400000u : 0u);
    else if (em >= 0x0400u)
        bits = (em << 13) + 0x38000000u;
    else
        bits = k_num_f32_bits((float)mant * 0x1p-24f);
    return k_num_f32_from_bits(sign | bits);
}

/* f32 -> f16, round to nearest even. NaN keeps its top payload bits and
 * is made quiet; from 65520 (max + half an ulp, a tie that goes to even)
 * on, inf. Normals: rebias the exponent (127 -> 15, i.e. -112 << 23,
 * written as + 0xC8000000 mod 2^32) and round by adding just under half an
 * ulp plus the kept lsb (a carry out of the mantissa correctly bumps the
 * exponent). Results below the smallest normal: |x| + 0.5f rounds |x| to a
 * multiple of 2^-24 (the ulp of 0.5f, which is the subnormal f16 ulp) to
 * nearest even in one IEEE addition (in the default rounding mode, the one
 * operation here that follows it), and the bits above 0.5f's are the f16
 * mantissa (0x400, the smallest normal, when it rounds up); an f32
 * subnormal input rounds to 0 either way, so flushing it could not change
 * the result. */
K_HD uint16_t k_num_f32_to_f16(float x)
{
    uint32_t bits = k_num_f32_bits(x);
    uint32_t sign = (bits >> 16) & 0x8000u;
    uint32_t mag = bits & 0x7FFFFFFFu;
    uint32_t out;
    if (mag > 0x7F800000u)
        out = 0x7E00u | ((mag >> 13) & 0x3FFu);
    else if (mag >= 0x477FF000u)
        out = 0x7C00u;
    else if (mag >= 0x38800000u)
        out = (mag + 0xC8000FFFu + ((mag >> 13) & 1u)) >> 13;
    else
        out = k_num_f32_bits(k_num_f32_from_bits(mag) + 0.5f) - 0x3F000000u;
    return (uint16_t)(sign | out);
}

K_HD float k_num_bf16_to_f32(uint16_t h) { return k_num_f32_from_bits((uint32_t)h << 16); }

/* Round to nearest even on the dropped 16 bits; subnormals round like any
 * other value (vcvtneps2bf16, which flushes them, is not this). */
K_HD uint16_t k_num_f32_to_bf16(float x)
{
    uint32_t bits = k_num_f32_bits(x);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: truncate, keep it quiet */
        return (uint16_t)((bits >> 16) | 0x40u);
    /* cannot wrap: the largest non-NaN pattern (0xFF800000) plus 0x8000
     * stays below 2^32 */
    return (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

/* ---- float MIN/MAX: a if a is NaN, else b if b is NaN (the comparison is
 * false), else the smaller / larger, b on ties. That is what minps/maxps
 * plus "blend a back where a is NaN" give (k_reduce_scalar.c), so every
 * path agrees, and in a fold the first NaN in source order wins with its
 * bits. ------------------------------------------------------------------- */

K_HD float k_num_min_f32(float a, float b) { return K_NUM_ISNAN(a) ? a : (a < b ? a : b); }
K_HD float k_num_max_f32(float a, float b) { return K_NUM_ISNAN(a) ? a : (a > b ? a : b); }
K_HD double k_num_min_f64(double a, double b) { return K_NUM_ISNAN(a) ? a : (a < b ? a : b); }
K_HD double k_num_max_f64(double a, double b) { return K_NUM_ISNAN(a) ? a : (a > b ? a : b); }

/* ---- rounding ------------------------------------------------------------------ */

/* Round half to even, independent of the rounding mode: floor and the
 * subtraction are exact. lo is an integer, so it is odd exactly when lo / 2
 * is not one (lo * 0.5 is exact). Infinities and NaN come back as they are
 * (frac is NaN). */
K_HD double k_num_round_half_even(double x)
{
    double lo = floor(x);
    double frac = x - lo;
    if (frac > 0.5 || (frac == 0.5 && floor(lo * 0.5) != lo * 0.5)) return lo + 1.0;
    return lo;
}

/* double -> fp32, round to odd (truncate, set the lsb if anything was
 * dropped): with at least 2 more bits than f16 / bf16, a following round
 * to nearest even gives the correctly rounded result, which going through
 * a round-to-nearest fp32 would not (k_cast.c). Overflow gives FLT_MAX
 * (odd), which still rounds to inf in f16 and bf16. */
K_HD float k_num_f64_to_f32_round_odd(double x)
{
    float f = (float)x;
    if (K_NUM_ISNAN(x) || (double)f == x) return f;
    uint32_t bits = k_num_f32_bits(f);
    if (fabs((double)f) > fabs(x)) bits -= 1; /* rounded away from zero: step back to the truncation */
    return k_num_f32_from_bits(bits | 1u);
}

/* int64 -> fp32, round to odd: the top 24 significant bits, OR a sticky
 * bit for everything shifted out, times 2^shift (exact). */
K_HD float k_num_i64_to_f32_round_odd(int64_t v)
{
    uint64_t mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    if (mag < ((uint64_t)1 << 24)) return (float)v;
    int shift = k_num_bit_width_u64(mag) - 24; /* 1 .. 40 */
    uint64_t kept = mag >> shift;
    if (mag & (((uint64_t)1 << shift) - 1)) kept |= 1;
    float f = (float)kept * k_num_f32_from_bits((uint32_t)(127 + shift) << 23);
    return v < 0 ? -f : f;
}

/* ---- float -> integer for k_scale: truncate toward zero, saturate ----------
 *
 * Horovod scales an integer tensor in double and converts the product back
 * with C's conversion, which discards the fraction (7 * 0.5 = 3.5 -> 3,
 * -3.5 -> -3); k_scale does the same, so hora's integer pre/postscale
 * gives Horovod's numbers. C leaves the conversion undefined for NaN and
 * for a value whose truncation does not fit the type (x86's cvttsd2si
 * answers INT_MIN, the GPU's cvt.rzi otherwise, other targets other
 * things), so hora defines those cases: NaN -> 0 and saturation at the
 * type's limits.
 *
 * The bounds are integers held exactly in a double, so the comparisons are
 * exact, and x >= hi (or x <= lo) is exactly the set where the truncation
 * is hi or more (lo or less). In between, lo < x < hi, the conversion is
 * defined and is the truncation. No trunc() call: the cast is it. */
K_HD int64_t k_num_trunc_to_i64_sat(double x)
{
    if (K_NUM_ISNAN(x)) return 0;
    if (x >= 0x1p63) /* INT64_MAX + 1 */
        return INT64_MAX;
    if (x <= -0x1p63) return INT64_MIN;
    return (int64_t)x;
}

/* [lo, hi] within int32 (every integer dtype but i64). */
K_HD int32_t k_num_trunc_to_range_sat(double x, double lo, double hi)
{
    if (K_NUM_ISNAN(x)) return 0;
    if (x >= hi) return (int32_t)hi;
    if (x <= lo) return (int32_t)lo;
    return K_NUM_TO_I32(x);
}
K_HD int32_t k_num_trunc_to_i32_sat(double x)
{
    return (int32_t)k_num_trunc_to_range_sat(x, -2147483648.0, 2147483647.0);
}
K_HD uint8_t k_num_trunc_to_u8_sat(double x) { return (uint8_t)k_num_trunc_to_range_sat(x, 0.0, 255.0); }
K_HD int8_t k_num_trunc_to_i8_sat(double x) { return (int8_t)k_num_trunc_to_range_sat(x, -128.0, 127.0); }
K_HD int16_t k_num_trunc_to_i16_sat(double x) { return (int16_t)k_num_trunc_to_range_sat(x, -32768.0, 32767.0); }
K_HD uint16_t k_num_trunc_to_u16_sat(double x) { return (uint16_t)k_num_trunc_to_range_sat(x, 0.0, 65535.0); }

/* ---- float -> integer for k_cast: round to nearest (ties to even), saturate
 *
 * NaN -> 0. Rounding first leaves an integer (or inf, or NaN), which the
 * truncating conversions above then take as it is: one definition of the
 * bounds and of NaN for both families. */
K_HD int64_t k_num_round_to_i64_sat(double x) { return k_num_trunc_to_i64_sat(k_num_round_half_even(x)); }
K_HD int32_t k_num_round_to_i32_sat(double x) { return k_num_trunc_to_i32_sat(k_num_round_half_even(x)); }
K_HD uint8_t k_num_round_to_u8_sat(double x) { return k_num_trunc_to_u8_sat(k_num_round_half_even(x)); }
K_HD int8_t k_num_round_to_i8_sat(double x) { return k_num_trunc_to_i8_sat(k_num_round_half_even(x)); }
K_HD int16_t k_num_round_to_i16_sat(double x) { return k_num_trunc_to_i16_sat(k_num_round_half_even(x)); }
K_HD uint16_t k_num_round_to_u16_sat(double x) { return k_num_trunc_to_u16_sat(k_num_round_half_even(x)); }

#endif /* K_NUMERIC_H */
