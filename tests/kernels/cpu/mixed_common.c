/* mixed_common.c - the helpers of the mixed-precision kernel tests (mixed.h). */
#include "mixed.h"

const k_dtype_t mixed_grad_dtypes[N_GRAD_DTYPES] = {K_DTYPE_F32, K_DTYPE_F16, K_DTYPE_BF16};

const size_t mixed_large_counts[N_LARGE] = {127, 128, 129, 255, 1000, 4099, 65537};

size_t mixed_count_at(size_t k) { return k <= SMALL_COUNT_MAX ? k : mixed_large_counts[k - SMALL_COUNT_MAX - 1]; }

/* ---- elements as bits ----------------------------------------------------- */

uint64_t mixed_get_bits(k_dtype_t dtype, const void *base, size_t i)
{
    const uint8_t *p = (const uint8_t *)base + i * k_dtype_size(dtype);
    switch (k_dtype_size(dtype)) {
    case 1: return *p;
    case 2: {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    default: {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    }
}

void mixed_put_bits(k_dtype_t dtype, void *base, size_t i, uint64_t bits)
{
    uint8_t *p = (uint8_t *)base + i * k_dtype_size(dtype);
    switch (k_dtype_size(dtype)) {
    case 1: *p = (uint8_t)bits; return;
    case 2: {
        uint16_t v = (uint16_t)bits;
        memcpy(p, &v, 2);
        return;
    }
    case 4: {
        uint32_t v = (uint32_t)bits;
        memcpy(p, &v, 4);
        return;
    }
    default: memcpy(p, &bits, 8); return;
    }
}

/* +-inf or NaN, decided from the value (not from the exponent bits the
 * kernels look at). */
int mixed_ref_nonfinite_elem(k_dtype_t dtype, uint64_t bits)
{
    switch (dtype) {
    case K_DTYPE_F32: return !isfinite(f32_from_bits((uint32_t)bits));
    case K_DTYPE_F16: return !isfinite(ref_decode16((uint16_t)bits, REF_F16));
    case K_DTYPE_BF16: return !isfinite(ref_decode16((uint16_t)bits, REF_BF16));
    case K_DTYPE_F64: {
        double d;
        memcpy(&d, &bits, 8);
        return !isfinite(d);
    }
    default: return 0;
    }
}

int mixed_ref_nonfinite(k_dtype_t dtype, const void *src, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (mixed_ref_nonfinite_elem(dtype, mixed_get_bits(dtype, src, i))) return 1;
    return 0;
}

/* The fp32 value of an f32/f16/bf16 element, and fp32 rounded to one
 * (the scalar conversions of k_cpu.h, checked exhaustively in
 * conversions.c). */
float mixed_widen(k_dtype_t dtype, uint64_t bits)
{
    switch (dtype) {
    case K_DTYPE_F16: return k_f16_to_f32((uint16_t)bits);
    case K_DTYPE_BF16: return k_bf16_to_f32((uint16_t)bits);
    default: return f32_from_bits((uint32_t)bits);
    }
}

uint64_t mixed_narrow(k_dtype_t dtype, float v)
{
    switch (dtype) {
    case K_DTYPE_F16: return k_f32_to_f16(v);
    case K_DTYPE_BF16: return k_f32_to_bf16(v);
    default: return f32_bits(v);
    }
}

int mixed_is_nan_elem(k_dtype_t dtype, uint64_t bits)
{
    return mixed_ref_nonfinite_elem(dtype, bits) && !isinf(mixed_widen(dtype, bits));
}

/* ---- interesting values --------------------------------------------------- */

/* Per float dtype (f32, f16, bf16, f64 in this order): inf, -inf, quiet
 * NaN, -quiet NaN, signalling NaNs with the smallest and the largest
 * payload, all ones, a quiet NaN with a payload. */
const uint64_t mixed_nonfinite_bits[4][8] = {
    {0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFFFFFFF, 0x7FC00001},
    {0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7DFF, 0xFFFF, 0x7E01},
    {0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x7FBF, 0xFFFF, 0x7FC1},
    {UINT64_C(0x7FF0000000000000), UINT64_C(0xFFF0000000000000), UINT64_C(0x7FF8000000000000),
     UINT64_C(0xFFF8000000000000), UINT64_C(0x7FF0000000000001), UINT64_C(0x7FF7FFFFFFFFFFFF),
     UINT64_C(0xFFFFFFFFFFFFFFFF), UINT64_C(0x7FF8000000000001)},
};

/* Finite extremes: +-largest finite, smallest subnormal, -largest
 * subnormal, smallest normal, +0, -0, 1. */
const uint64_t mixed_finite_bits[4][8] = {
    {0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x807FFFFF, 0x00800000, 0, 0x80000000, 0x3F800000},
    {0x7BFF, 0xFBFF, 0x0001, 0x83FF, 0x0400, 0, 0x8000, 0x3C00},
    {0x7F7F, 0xFF7F, 0x0001, 0x807F, 0x0080, 0, 0x8000, 0x3F80},
    {UINT64_C(0x7FEFFFFFFFFFFFFF), UINT64_C(0xFFEFFFFFFFFFFFFF), 1, UINT64_C(0x800FFFFFFFFFFFFF),
     UINT64_C(0x0010000000000000), 0, UINT64_C(0x8000000000000000), UINT64_C(0x3FF0000000000000)},
};

int mixed_float_row(k_dtype_t dtype)
{
    return dtype == K_DTYPE_F32 ? 0 : dtype == K_DTYPE_F16 ? 1 : dtype == K_DTYPE_BF16 ? 2 : 3;
}

/* A finite element: one of the extremes, or random_element redrawn until
 * finite. */
uint64_t mixed_random_finite(test_rng_t *gen, k_dtype_t dtype)
{
    if (test_rng_below(gen, 4) == 0) return mixed_finite_bits[mixed_float_row(dtype)][test_rng_below(gen, 8)];
    uint64_t bits;
    do {
        uint8_t e[8];
        random_element(gen, dtype, e);
        bits = mixed_get_bits(dtype, e, 0);
    } while (mixed_ref_nonfinite_elem(dtype, bits));
    return bits;
}

/* Any element: one in ten non-finite, the rest mixed_random_finite. */
uint64_t mixed_random_any(test_rng_t *gen, k_dtype_t dtype)
{
    if (test_rng_below(gen, 10) == 0) return mixed_nonfinite_bits[mixed_float_row(dtype)][test_rng_below(gen, 8)];
    return mixed_random_finite(gen, dtype);
}

/* The path under test is k_isa_current(); this runs k_nonfinite on the
 * scalar path and switches back. */
int mixed_nonfinite_scalar(const void *src, k_dtype_t dtype, size_t count)
{
    k_isa_t isa = k_isa_current();
    k_isa_set(K_ISA_SCALAR);
    int r = k_nonfinite(src, dtype, count);
    k_isa_set(isa);
    return r;
}
