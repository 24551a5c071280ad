/*
 * k_cast.c - dtype conversions: the scalar f16/bf16 API and k_cast between
 * any two dtypes, every float result rounded once to nearest even.
 *
 * Rounding once matters when the source is wider than fp32 (f64, i64) and
 * the target is f16/bf16: going through a round-to-nearest fp32 can land
 * exactly on a halfway point of the target and then round the wrong way
 * (e.g. 1 + 2^-11 + 2^-40 must become 1 + 2^-10 in f16, not 1). We narrow
 * to fp32 with round-to-odd instead (truncate, set the lsb if anything was
 * dropped): with at least 2 more bits than the target, a following
 * round-to-nearest-even gives the correctly rounded result.
 *
 * k_cast goes through a small stack buffer: floats widen exactly to double,
 * integers (and u8) to int64, then each is written out in the target type.
 * bool reads as 0/1 and is written as value != 0 (so bool -> bool, unlike
 * the other equal pairs, is not a byte copy: it normalises).
 * The common mixed-precision pairs (f32 <-> f16/bf16) get direct loops.
 */
#include "k_internal.h"

enum { K_CAST_CHUNK = 256 };

uint16_t k_f32_to_f16(float x) { return k_num_f32_to_f16(x); }
float k_f16_to_f32(uint16_t h) { return k_num_f16_to_f32(h); }
uint16_t k_f32_to_bf16(float x) { return k_num_f32_to_bf16(x); }
float k_bf16_to_f32(uint16_t h) { return k_num_bf16_to_f32(h); }

static int k_dtype_is_float(k_dtype_t dtype)
{
    return dtype == K_DTYPE_F32 || dtype == K_DTYPE_F16 || dtype == K_DTYPE_BF16 || dtype == K_DTYPE_F64;
}

static void k_load_f64(double *out, const void *src, k_dtype_t dtype, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (dtype) {
        case K_DTYPE_F32: out[i] = ((const float *)src)[i]; break;
        case K_DTYPE_F16: out[i] = k_num_f16_to_f32(((const uint16_t *)src)[i]); break;
        case K_DTYPE_BF16: out[i] = k_num_bf16_to_f32(((const uint16_t *)src)[i]); break;
        default: out[i] = ((const double *)src)[i]; break;
        }
    }
}

static void k_load_i64(int64_t *out, const void *src, k_dtype_t dtype, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (dtype) {
        case K_DTYPE_I32: out[i] = ((const int32_t *)src)[i]; break;
        case K_DTYPE_U8: out[i] = ((const uint8_t *)src)[i]; break;
        case K_DTYPE_I8: out[i] = ((const int8_t *)src)[i]; break;
        case K_DTYPE_I16: out[i] = ((const int16_t *)src)[i]; break;
        case K_DTYPE_U16: out[i] = ((const uint16_t *)src)[i]; break;
        case K_DTYPE_BOOL: out[i] = ((const uint8_t *)src)[i] != 0; break;
        default: out[i] = ((const int64_t *)src)[i]; break;
        }
    }
}

static void k_store_from_f64(void *dst, k_dtype_t dtype, const double *in, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double x = in[i];
        switch (dtype) {
        case K_DTYPE_F32: ((float *)dst)[i] = (float)x; break;
        case K_DTYPE_F16: ((uint16_t *)dst)[i] = k_num_f32_to_f16(k_num_f64_to_f32_round_odd(x)); break;
        case K_DTYPE_BF16: ((uint16_t *)dst)[i] = k_num_f32_to_bf16(k_num_f64_to_f32_round_odd(x)); break;
        case K_DTYPE_F64: ((double *)dst)[i] = x; break;
        case K_DTYPE_I32: ((int32_t *)dst)[i] = k_num_round_to_i32_sat(x); break;
        case K_DTYPE_I64: ((int64_t *)dst)[i] = k_num_round_to_i64_sat(x); break;
        case K_DTYPE_U8: ((uint8_t *)dst)[i] = k_num_round_to_u8_sat(x); break;
        case K_DTYPE_I8: ((int8_t *)dst)[i] = k_num_round_to_i8_sat(x); break;
        case K_DTYPE_I16: ((int16_t *)dst)[i] = k_num_round_to_i16_sat(x); break;
        case K_DTYPE_U16: ((uint16_t *)dst)[i] = k_num_round_to_u16_sat(x); break;
        case K_DTYPE_BOOL: ((uint8_t *)dst)[i] = x != 0.0; break; /* NaN -> 1, as C's _Bool */
        case K_DTYPE_COUNT: break;
        }
    }
}

static void k_store_from_i64(void *dst, k_dtype_t dtype, const int64_t *in, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int64_t v = in[i];
        switch (dtype) {
        case K_DTYPE_F32: ((float *)dst)[i] = (float)v; break; /* one rounding */
        case K_DTYPE_F16: ((uint16_t *)dst)[i] = k_num_f32_to_f16(k_num_i64_to_f32_round_odd(v)); break;
        case K_DTYPE_BF16: ((uint16_t *)dst)[i] = k_num_f32_to_bf16(k_num_i64_to_f32_round_odd(v)); break;
        case K_DTYPE_F64: ((double *)dst)[i] = (double)v; break; /* one rounding */
        case K_DTYPE_I32:
            ((int32_t *)dst)[i] = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
            break;
        case K_DTYPE_I64: ((int64_t *)dst)[i] = v; break;
        case K_DTYPE_U8: ((uint8_t *)dst)[i] = v > 255 ? 255 : v < 0 ? 0 : (uint8_t)v; break;
        case K_DTYPE_I8: ((int8_t *)dst)[i] = v > INT8_MAX ? INT8_MAX : v < INT8_MIN ? INT8_MIN : (int8_t)v; break;
        case K_DTYPE_I16:
            ((int16_t *)dst)[i] = v > INT16_MAX ? INT16_MAX : v < INT16_MIN ? INT16_MIN : (int16_t)v;
            break;
        case K_DTYPE_U16: ((uint16_t *)dst)[i] = v > 65535 ? 65535 : v < 0 ? 0 : (uint16_t)v; break;
        case K_DTYPE_BOOL: ((uint8_t *)dst)[i] = v != 0; break;
        case K_DTYPE_COUNT: break;
        }
    }
}

/* Returns 1 if it handled the pair. */
static int k_cast_fast_path(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t count)
{
    if (src_dtype == K_DTYPE_F32 && dst_dtype == K_DTYPE_F16) {
        for (size_t i = 0; i < count; i++) ((uint16_t *)dst)[i] = k_num_f32_to_f16(((const float *)src)[i]);
    } else if (src_dtype == K_DTYPE_F32 && dst_dtype == K_DTYPE_BF16) {
        for (size_t i = 0; i < count; i++) ((uint16_t *)dst)[i] = k_num_f32_to_bf16(((const float *)src)[i]);
    } else if (src_dtype == K_DTYPE_F16 && dst_dtype == K_DTYPE_F32) {
        for (size_t i = 0; i < count; i++) ((float *)dst)[i] = k_num_f16_to_f32(((const uint16_t *)src)[i]);
    } else if (src_dtype == K_DTYPE_BF16 && dst_dtype == K_DTYPE_F32) {
        for (size_t i = 0; i < count; i++) ((float *)dst)[i] = k_num_bf16_to_f32(((const uint16_t *)src)[i]);
    } else {
        return 0;
    }
    return 1;
}

void k_cast(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t count)
{
    if ((unsigned)dst_dtype >= K_DTYPE_COUNT || (unsigned)src_dtype >= K_DTYPE_COUNT) return;
    if (dst_dtype == src_dtype && dst_dtype != K_DTYPE_BOOL) {
        /* bit copy: keeps NaN payloads and -0 exactly */
        memmove(dst, src, count * k_dtype_size(src_dtype));
        return;
    }
    if (k_cast_fast_path(dst, dst_dtype, src, src_dtype, count)) return;

    size_t src_size = k_dtype_size(src_dtype);
    size_t dst_size = k_dtype_size(dst_dtype);
    const unsigned char *s = src;
    unsigned char *d = dst;
    for (size_t done = 0; done < count; done += K_CAST_CHUNK) {
        size_t n = count - done < K_CAST_CHUNK ? count - done : K_CAST_CHUNK;
        if (k_dtype_is_float(src_dtype)) {
            double wide[K_CAST_CHUNK];
            k_load_f64(wide, s + done * src_size, src_dtype, n);
            k_store_from_f64(d + done * dst_size, dst_dtype, wide, n);
        } else {
            int64_t wide[K_CAST_CHUNK];
            k_load_i64(wide, s + done * src_size, src_dtype, n);
            k_store_from_i64(d + done * dst_size, dst_dtype, wide, n);
        }
    }
}
