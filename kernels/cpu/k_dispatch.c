/*
 * k_dispatch.c - routes k_reduce, k_reduce_n and k_reduce_n_exact to the
 * path in use (k_dispatch_isa, k_isa.c) through tables of function pointers.
 * After the first call every call is one relaxed load and an indirect call.
 */
#include <string.h>

#include "k_internal.h"

#if defined(__x86_64__)
static const k_reduce_table_t *const k_reduce_tables[K_ISA_COUNT] = {
    [K_ISA_SCALAR] = &k_reduce_table_scalar,
    [K_ISA_AVX2] = &k_reduce_table_avx2,
    [K_ISA_AVX512] = &k_reduce_table_avx512,
};
static const k_reduce_n_table_t *const k_reduce_n_tables[K_ISA_COUNT] = {
    [K_ISA_SCALAR] = &k_reduce_n_table_scalar,
    [K_ISA_AVX2] = &k_reduce_n_table_avx2,
    [K_ISA_AVX512] = &k_reduce_n_table_avx512,
};
static const k_reduce_n_exact_fn k_reduce_n_exact_fns[K_ISA_COUNT] = {
    [K_ISA_SCALAR] = k_reduce_n_exact_scalar,
    [K_ISA_AVX2] = k_reduce_n_exact_avx2,
    [K_ISA_AVX512] = k_reduce_n_exact_avx512,
};
#else
static const k_reduce_table_t *const k_reduce_tables[K_ISA_COUNT] = {
    [K_ISA_SCALAR] = &k_reduce_table_scalar,
    [K_ISA_AVX2] = &k_reduce_table_scalar, /* unreachable: k_isa_set refuses */
    [K_ISA_AVX512] = &k_reduce_table_scalar,
};
static const k_reduce_n_table_t *const k_reduce_n_tables[K_ISA_COUNT] = {
    [K_ISA_SCALAR] = &k_reduce_n_table_scalar,
    [K_ISA_AVX2] = &k_reduce_n_table_scalar,
    [K_ISA_AVX512] = &k_reduce_n_table_scalar,
};
static const k_reduce_n_exact_fn k_reduce_n_exact_fns[K_ISA_COUNT] = {
    [K_ISA_SCALAR] = k_reduce_n_exact_scalar,
    [K_ISA_AVX2] = k_reduce_n_exact_scalar,
    [K_ISA_AVX512] = k_reduce_n_exact_scalar,
};
#endif

void k_reduce(void *dst, const void *a, const void *b, size_t count, k_dtype_t dtype, k_op_t op)
{
    /* Out-of-range enums are a caller bug the runtime validates before us;
     * doing nothing beats jumping through a wild pointer. */
    if (count == 0 || (unsigned)dtype >= K_DTYPE_COUNT || (unsigned)op >= K_OP_COUNT) return;
    (*k_reduce_tables[k_dispatch_isa()])[dtype][op](dst, a, b, count);
}

void k_reduce_n(void *dst, const void *const *srcs, int n, size_t count, k_dtype_t dtype, k_op_t op, int64_t divisor)
{
    /* Like k_reduce and k_div: a caller bug does nothing rather than divide
     * by zero or index past the tables. */
    if (count == 0 || n < 1 || divisor < 1 || (unsigned)dtype >= K_DTYPE_COUNT || (unsigned)op >= K_OP_COUNT) return;
    k_isa_t isa = k_dispatch_isa();
    if (n == 2 && divisor == 1) {
        /* Two sources, no division: k_reduce's definition, f16/bf16's one
         * rounding included, so its kernel is the one to run. (In L1 it is
         * a few percent faster than the n-source loop, which pays per
         * block for the loop over sources.) */
        (*k_reduce_tables[isa])[dtype][op](dst, srcs[0], srcs[1], count);
        return;
    }
    if (n == 1) {
        /* bool's outputs are 0 or 1 even from one source: k_div's
         * normalising pass (divisor 1 keeps the truth value). */
        if (divisor > 1 || dtype == K_DTYPE_BOOL)
            k_div(dst, srcs[0], count, dtype, divisor);
        else if (dst != srcs[0])
            memcpy(dst, srcs[0], count * k_dtype_size(dtype));
        return;
    }
    k_reduce_n_args_t args = {.dtype = dtype, .op = op, .divisor = divisor, .f32 = (float)divisor};
    (*k_reduce_n_tables[isa])[dtype][op](dst, srcs, n, 0, count, &args);
}

void k_reduce_n_exact(void *dst, const void *const *srcs, int n, size_t count, k_dtype_t dtype, int64_t divisor)
{
    if (count == 0 || n < 1 || divisor < 1 || (unsigned)dtype >= K_DTYPE_COUNT) return;
    if (dtype != K_DTYPE_F32 && dtype != K_DTYPE_F16 && dtype != K_DTYPE_BF16) {
        /* Integers are exact anyway; f64 is summed in source order. */
        k_reduce_n(dst, srcs, n, count, dtype, K_OP_SUM, divisor);
        return;
    }
    k_reduce_n_exact_fns[k_dispatch_isa()](dst, srcs, n, 0, count, dtype, divisor);
}
