/*
 * k_scale.c - k_div (the second half of AVG: SUM, then divide by the number
 * of ranks) and k_scale (pre/post-scaling of gradients). Scalar loops: both
 * run once per tensor after the reduction and are a small share of the
 * time next to the log2(ranks) / 2(n-1) reduce passes.
 */
#include "k_internal.h"

void k_div(void *dst, const void *src, size_t count, k_dtype_t dtype, int64_t divisor)
{
    /* The header requires divisor >= 1; refusing anything else keeps a
     * caller bug from becoming an integer division by zero. */
    if (divisor < 1)
        return;
    float divisor_f32 = (float)divisor;
    double divisor_f64 = (double)divisor;

    for (size_t i = 0; i < count; i++) {
        switch (dtype) {
        case K_DTYPE_F32: ((float *)dst)[i] = ((const float *)src)[i] / divisor_f32; break;
        case K_DTYPE_F16: {
            float x = k_f16_to_f32_inl(((const uint16_t *)src)[i]);
            ((uint16_t *)dst)[i] = k_f32_to_f16_inl(x / divisor_f32);
            break;
        }
        case K_DTYPE_BF16: {
            float x = k_bf16_to_f32_inl(((const uint16_t *)src)[i]);
            ((uint16_t *)dst)[i] = k_f32_to_bf16_inl(x / divisor_f32);
            break;
        }
        case K_DTYPE_F64: ((double *)dst)[i] = ((const double *)src)[i] / divisor_f64; break;
        /* int32 / int64 promotes to int64: no overflow, and |q| <= |x| fits. */
        case K_DTYPE_I32: ((int32_t *)dst)[i] = (int32_t)(((const int32_t *)src)[i] / divisor); break;
        /* divisor >= 1, so INT64_MIN / -1 cannot happen */
        case K_DTYPE_I64: ((int64_t *)dst)[i] = ((const int64_t *)src)[i] / divisor; break;
        case K_DTYPE_U8: ((uint8_t *)dst)[i] = (uint8_t)(((const uint8_t *)src)[i] / divisor); break;
        case K_DTYPE_COUNT: return;
        }
    }
}

void k_scale(void *dst, const void *src, size_t count, k_dtype_t dtype, double factor)
{
    float factor_f32 = (float)factor;

    for (size_t i = 0; i < count; i++) {
        switch (dtype) {
        case K_DTYPE_F32: ((float *)dst)[i] = ((const float *)src)[i] * factor_f32; break;
        case K_DTYPE_F16: {
            float x = k_f16_to_f32_inl(((const uint16_t *)src)[i]);
            ((uint16_t *)dst)[i] = k_f32_to_f16_inl(x * factor_f32);
            break;
        }
        case K_DTYPE_BF16: {
            float x = k_bf16_to_f32_inl(((const uint16_t *)src)[i]);
            ((uint16_t *)dst)[i] = k_f32_to_bf16_inl(x * factor_f32);
            break;
        }
        case K_DTYPE_F64: ((double *)dst)[i] = ((const double *)src)[i] * factor; break;
        case K_DTYPE_I32:
            ((int32_t *)dst)[i] = k_double_to_i32_sat((double)((const int32_t *)src)[i] * factor);
            break;
        case K_DTYPE_I64:
            ((int64_t *)dst)[i] = k_double_to_i64_sat((double)((const int64_t *)src)[i] * factor);
            break;
        case K_DTYPE_U8:
            ((uint8_t *)dst)[i] = k_double_to_u8_sat((double)((const uint8_t *)src)[i] * factor);
            break;
        case K_DTYPE_COUNT: return;
        }
    }
}
