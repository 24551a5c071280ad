/*
 * k_twin.c - the CPU twins of the CUDA kernels (k_twin_* of k_cuda.h):
 * each element computed by the k_elem.h functions the kernel calls, in the
 * kernel's order (sources left to right, divide, narrow), one element at a
 * time. The GPU test (tests/kernels/cuda) compares every kernel with its
 * twin bit for bit; the unit test (tests/kernels/cuda/test_twin.c)
 * compares the twins with k_reduce_n / k_scale / k_cast, which ties the
 * kernels to kernels/cpu without a GPU.
 *
 * Plain C, built into libhora-kernels-twin.a, the tests' static library,
 * whether or not CUDA is (the tests need no device). Slow on purpose:
 * clarity over speed, and any alignment (elements are read and written
 * with memcpy).
 */
#include "k_cuda.h"
#include "k_elem.h"

static uint64_t k_twin_load(const unsigned char *p, size_t size)
{
    switch (size) {
    case 1: return *p;
    case 2: {
        uint16_t v;
        memcpy(&v, p, sizeof(v));
        return v;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, sizeof(v));
        return v;
    }
    default: {
        uint64_t v;
        memcpy(&v, p, sizeof(v));
        return v;
    }
    }
}

static void k_twin_store(unsigned char *p, size_t size, uint64_t raw)
{
    switch (size) {
    case 1: *p = (unsigned char)raw; break;
    case 2: {
        uint16_t v = (uint16_t)raw;
        memcpy(p, &v, sizeof(v));
        break;
    }
    case 4: {
        uint32_t v = (uint32_t)raw;
        memcpy(p, &v, sizeof(v));
        break;
    }
    default: memcpy(p, &raw, sizeof(raw)); break;
    }
}

static int k_twin_dtype_ok(k_dtype_t dtype) { return (unsigned)dtype < K_DTYPE_COUNT; }

/* ---- k_twin_reduce_n ------------------------------------------------------------
 * Defines k_twin_reduce_<t>: element i of every source is read before
 * element i of dst is written (dst may be any source). */
#define K_TWIN_REDUCE(t, dtype, acc_t)                                                                               \
    static void k_twin_reduce_##t(unsigned char *dst, const unsigned char *const *srcs, int n, size_t count, int op, \
                                  k_elem_div_t div)                                                                  \
    {                                                                                                                \
        const size_t size = k_dtype_size(dtype);                                                                     \
        for (size_t i = 0; i < count; i++) {                                                                         \
            acc_t acc = k_elem_##t##_load(k_twin_load(srcs[0] + i * size, size));                                    \
            for (int j = 1; j < n; j++) {                                                                            \
                acc_t x = k_elem_##t##_load(k_twin_load(srcs[j] + i * size, size));                                  \
                acc = k_elem_##t##_combine(acc, x, op);                                                              \
            }                                                                                                        \
            k_twin_store(dst + i * size, size, k_elem_##t##_finish(acc, div));                                       \
        }                                                                                                            \
    }

K_ELEM_DTYPES(K_TWIN_REDUCE)

int k_twin_reduce_n(void *dst, const void *const *srcs, int n, size_t count, k_dtype_t dtype, k_op_t op,
                    int64_t divisor)
{
    if (n < 1 || n > K_CUDA_MAX_SRCS || divisor < 1 || !k_twin_dtype_ok(dtype) || (unsigned)op >= K_OP_COUNT)
        return K_CUDA_ERR_INVALID_VALUE;
    if (count == 0) return 0;
    if (!srcs) return K_CUDA_ERR_INVALID_VALUE;
    if (n == 1 && divisor == 1 && dtype != K_DTYPE_BOOL) {
        /* k_reduce_n's definition: the bytes unchanged (a signalling NaN
         * stays signalling, which a widen/narrow round trip would quiet);
         * bool normalises (the fold below with one source). */
        if (dst != srcs[0]) memcpy(dst, srcs[0], count * k_dtype_size(dtype));
        return 0;
    }
    const unsigned char *s[K_CUDA_MAX_SRCS];
    for (int j = 0; j < n; j++) s[j] = srcs[j];
    unsigned char *d = dst;
    const k_elem_div_t div = k_elem_div_init(divisor);
    switch (dtype) {
    case K_DTYPE_F32: k_twin_reduce_f32(d, s, n, count, op, div); break;
    case K_DTYPE_F16: k_twin_reduce_f16(d, s, n, count, op, div); break;
    case K_DTYPE_BF16: k_twin_reduce_bf16(d, s, n, count, op, div); break;
    case K_DTYPE_F64: k_twin_reduce_f64(d, s, n, count, op, div); break;
    case K_DTYPE_I32: k_twin_reduce_i32(d, s, n, count, op, div); break;
    case K_DTYPE_I64: k_twin_reduce_i64(d, s, n, count, op, div); break;
    case K_DTYPE_U8: k_twin_reduce_u8(d, s, n, count, op, div); break;
    case K_DTYPE_I8: k_twin_reduce_i8(d, s, n, count, op, div); break;
    case K_DTYPE_I16: k_twin_reduce_i16(d, s, n, count, op, div); break;
    case K_DTYPE_U16: k_twin_reduce_u16(d, s, n, count, op, div); break;
    case K_DTYPE_BOOL: k_twin_reduce_bool(d, s, n, count, op, div); break;
    case K_DTYPE_COUNT: break;
    }
    return 0;
}

/* ---- k_twin_scale ------------------------------------------------------------------ */

int k_twin_scale(void *dst, const void *src, size_t count, k_dtype_t dtype, double factor)
{
    if (!k_twin_dtype_ok(dtype)) return K_CUDA_ERR_INVALID_VALUE;
    const size_t size = k_dtype_size(dtype);
    const float f32 = (float)factor;
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (size_t i = 0; i < count; i++) {
        uint64_t raw = k_twin_load(s + i * size, size), out = 0;
        switch (dtype) {
        case K_DTYPE_F32: out = k_elem_f32_scale(raw, f32, factor); break;
        case K_DTYPE_F16: out = k_elem_f16_scale(raw, f32, factor); break;
        case K_DTYPE_BF16: out = k_elem_bf16_scale(raw, f32, factor); break;
        case K_DTYPE_F64: out = k_elem_f64_scale(raw, f32, factor); break;
        case K_DTYPE_I32: out = k_elem_i32_scale(raw, f32, factor); break;
        case K_DTYPE_I64: out = k_elem_i64_scale(raw, f32, factor); break;
        case K_DTYPE_U8: out = k_elem_u8_scale(raw, f32, factor); break;
        case K_DTYPE_I8: out = k_elem_i8_scale(raw, f32, factor); break;
        case K_DTYPE_I16: out = k_elem_i16_scale(raw, f32, factor); break;
        case K_DTYPE_U16: out = k_elem_u16_scale(raw, f32, factor); break;
        case K_DTYPE_BOOL: out = k_elem_bool_scale(raw, f32, factor); break;
        case K_DTYPE_COUNT: break;
        }
        k_twin_store(d + i * size, size, out);
    }
    return 0;
}

/* ---- k_twin_cast --------------------------------------------------------------------- */

int k_twin_cast(void *dst, k_dtype_t dst_dtype, const void *src, k_dtype_t src_dtype, size_t count)
{
    if (!k_twin_dtype_ok(dst_dtype) || !k_twin_dtype_ok(src_dtype)) return K_CUDA_ERR_INVALID_VALUE;
    const size_t src_size = k_dtype_size(src_dtype), dst_size = k_dtype_size(dst_dtype);
    if (dst_dtype == src_dtype && dst_dtype != K_DTYPE_BOOL) {
        /* a byte copy: NaN payloads and -0 exactly (bool -> bool
         * normalises, below) */
        if (count && dst != src) memmove(dst, src, count * src_size);
        return 0;
    }
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (size_t i = 0; i < count; i++)
        k_twin_store(d + i * dst_size, dst_size,
                     k_elem_cast(k_twin_load(s + i * src_size, src_size), src_dtype, dst_dtype));
    return 0;
}

/* ---- k_twin_copy_batch ---------------------------------------------------------------- */

int k_twin_copy_batch(const k_cuda_copy_t *copies, int n)
{
    if (n < 0 || (n > 0 && !copies)) return K_CUDA_ERR_INVALID_VALUE;
    for (int i = 0; i < n; i++)
        if (copies[i].bytes && copies[i].dst != copies[i].src) memcpy(copies[i].dst, copies[i].src, copies[i].bytes);
    return 0;
}
