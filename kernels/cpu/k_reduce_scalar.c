/*
 * k_reduce_scalar.c - the scalar reduce kernels: the reference every SIMD
 * path must match bit for bit, the tails of the SIMD loops, and the only
 * path on non-x86 CPUs.
 *
 * Semantics (see k_cpu.h):
 *  - f16/bf16 widen to fp32, combine, round back to nearest even;
 *  - integer SUM/PROD wrap: computed on the unsigned type, never signed
 *    overflow (the library also runs under -fsanitize=undefined);
 *  - float MIN/MAX: a if a is NaN, else b if b is NaN, else the smaller /
 *    larger, b on ties. That is exactly what x86 minps/maxps followed by
 *    "blend a where a is NaN" produce, so vector body and tail agree.
 */
#include "k_internal.h"

/* Defines k_reduce_scalar_<name>: loads p = a[i], q = b[i] of type `type`
 * and stores `expr`. Both loads happen before the store, which is what makes
 * dst == a or dst == b safe. */
#define K_SCALAR_REDUCE(name, type, expr)                                              \
    void k_reduce_scalar_##name(void *dst, const void *a, const void *b, size_t count) \
    {                                                                                  \
        type *d = dst;                                                                 \
        const type *x = a;                                                             \
        const type *y = b;                                                             \
        for (size_t i = 0; i < count; i++) {                                           \
            type p = x[i];                                                             \
            type q = y[i];                                                             \
            d[i] = (expr);                                                             \
        }                                                                              \
    }

K_SCALAR_REDUCE(f32_sum, float, p + q)
K_SCALAR_REDUCE(f32_min, float, k_num_min_f32(p, q))
K_SCALAR_REDUCE(f32_max, float, k_num_max_f32(p, q))
K_SCALAR_REDUCE(f32_prod, float, p *q)

K_SCALAR_REDUCE(f64_sum, double, p + q)
K_SCALAR_REDUCE(f64_min, double, k_num_min_f64(p, q))
K_SCALAR_REDUCE(f64_max, double, k_num_max_f64(p, q))
K_SCALAR_REDUCE(f64_prod, double, p *q)

/* f16 and bf16: both widened to fp32, one fp32 operation, rounded once. */
#define K_SCALAR_REDUCE_HALF(t, load, store)                                   \
    K_SCALAR_REDUCE(t##_sum, uint16_t, store(load(p) + load(q)))               \
    K_SCALAR_REDUCE(t##_min, uint16_t, store(k_num_min_f32(load(p), load(q)))) \
    K_SCALAR_REDUCE(t##_max, uint16_t, store(k_num_max_f32(load(p), load(q)))) \
    K_SCALAR_REDUCE(t##_prod, uint16_t, store(load(p) * load(q)))
K_SCALAR_REDUCE_HALF(f16, k_num_f16_to_f32, k_num_f32_to_f16)
K_SCALAR_REDUCE_HALF(bf16, k_num_bf16_to_f32, k_num_f32_to_bf16)
#undef K_SCALAR_REDUCE_HALF

/* Wrapping ops read the signed data through the unsigned type of the same
 * width (allowed aliasing); uint32_t/uint64_t do not promote to int. */
K_SCALAR_REDUCE(i32_sum, uint32_t, p + q)
K_SCALAR_REDUCE(i32_min, int32_t, p < q ? p : q)
K_SCALAR_REDUCE(i32_max, int32_t, p > q ? p : q)
K_SCALAR_REDUCE(i32_prod, uint32_t, p *q)

K_SCALAR_REDUCE(i64_sum, uint64_t, p + q)
K_SCALAR_REDUCE(i64_min, int64_t, p < q ? p : q)
K_SCALAR_REDUCE(i64_max, int64_t, p > q ? p : q)
K_SCALAR_REDUCE(i64_prod, uint64_t, p *q)

/* uint8_t promotes to int; 255 * 255 fits, the cast wraps. */
K_SCALAR_REDUCE(u8_sum, uint8_t, (uint8_t)(p + q))
K_SCALAR_REDUCE(u8_min, uint8_t, p < q ? p : q)
K_SCALAR_REDUCE(u8_max, uint8_t, p > q ? p : q)
K_SCALAR_REDUCE(u8_prod, uint8_t, (uint8_t)(p *q))

/* i8/i16 wrap through their unsigned types like i32; uint8_t/uint16_t
 * promote to int, so the product goes through uint32_t (65535 * 65535
 * would overflow int) and the cast back wraps. */
K_SCALAR_REDUCE(i8_sum, uint8_t, (uint8_t)(p + q))
K_SCALAR_REDUCE(i8_min, int8_t, p < q ? p : q)
K_SCALAR_REDUCE(i8_max, int8_t, p > q ? p : q)
K_SCALAR_REDUCE(i8_prod, uint8_t, (uint8_t)((uint32_t)p *q))

K_SCALAR_REDUCE(i16_sum, uint16_t, (uint16_t)(p + q))
K_SCALAR_REDUCE(i16_min, int16_t, p < q ? p : q)
K_SCALAR_REDUCE(i16_max, int16_t, p > q ? p : q)
K_SCALAR_REDUCE(i16_prod, uint16_t, (uint16_t)((uint32_t)p *q))

K_SCALAR_REDUCE(u16_sum, uint16_t, (uint16_t)(p + q))
K_SCALAR_REDUCE(u16_min, uint16_t, p < q ? p : q)
K_SCALAR_REDUCE(u16_max, uint16_t, p > q ? p : q)
K_SCALAR_REDUCE(u16_prod, uint16_t, (uint16_t)((uint32_t)p *q))

/* bool: any nonzero byte is true, outputs are 0 or 1. SUM and MAX are OR,
 * PROD and MIN are AND (k_cpu.h). */
K_SCALAR_REDUCE(bool_sum, uint8_t, (uint8_t)((p | q) != 0))
K_SCALAR_REDUCE(bool_min, uint8_t, (uint8_t)(p != 0 && q != 0))
K_SCALAR_REDUCE(bool_max, uint8_t, (uint8_t)((p | q) != 0))
K_SCALAR_REDUCE(bool_prod, uint8_t, (uint8_t)(p != 0 && q != 0))

#define K_ROW(type)                                                                       \
    [K_OP_SUM] = k_reduce_scalar_##type##_sum, [K_OP_MIN] = k_reduce_scalar_##type##_min, \
    [K_OP_MAX] = k_reduce_scalar_##type##_max, [K_OP_PROD] = k_reduce_scalar_##type##_prod

const k_reduce_table_t k_reduce_table_scalar = {
    [K_DTYPE_F32] = {K_ROW(f32)}, [K_DTYPE_F16] = {K_ROW(f16)},   [K_DTYPE_BF16] = {K_ROW(bf16)},
    [K_DTYPE_F64] = {K_ROW(f64)}, [K_DTYPE_I32] = {K_ROW(i32)},   [K_DTYPE_I64] = {K_ROW(i64)},
    [K_DTYPE_U8] = {K_ROW(u8)},   [K_DTYPE_I8] = {K_ROW(i8)},     [K_DTYPE_I16] = {K_ROW(i16)},
    [K_DTYPE_U16] = {K_ROW(u16)}, [K_DTYPE_BOOL] = {K_ROW(bool)},
};
