/*
 * k_reduce_n.c - the kernels of k_reduce_n, the n-source reduce behind the
 * runtime's one-shot all-reduce (entry point in k_dispatch.c): the scalar
 * kernels (the reference the vector kernels of k_reduce_n_avx2.c /
 * k_reduce_n_avx512.c match bit for bit, and their tails), and the chain
 * of k_reduce / k_div calls that defines (and computes) the other dtypes.
 *
 * Why not chained k_reduce calls for everything: they store and reload dst
 * once per source, and for f16/bf16 they round after every source. Folding
 * all sources of an element in registers reads each input once, writes
 * dst once and rounds once.
 */
#include "k_internal.h"

/* ---- scalar kernels: f32, f16, bf16 ------------------------------------------
 * Defines k_reduce_n_scalar_<type>_<op>: widen every source to fp32, fold
 * left to right with `combine`, divide, narrow once. All sources of element
 * i are read before dst[i] is written, which makes dst == any source safe. */
#define K_SCALAR_REDUCE_N(type, op, elem_t, widen, narrow, combine)                                           \
    void k_reduce_n_scalar_##type##_##op(void *dst, const void *const *srcs, int n, size_t begin, size_t end, \
                                         const k_reduce_n_args_t *args)                                       \
    {                                                                                                         \
        elem_t *d = dst;                                                                                      \
        const int divide = args->divisor > 1;                                                                 \
        for (size_t i = begin; i < end; i++) {                                                                \
            float acc = widen(((const elem_t *)srcs[0])[i]);                                                  \
            for (int j = 1; j < n; j++) {                                                                     \
                float x = widen(((const elem_t *)srcs[j])[i]);                                                \
                acc = combine(acc, x);                                                                        \
            }                                                                                                 \
            if (divide) acc = acc / args->f32;                                                                \
            d[i] = narrow(acc);                                                                               \
        }                                                                                                     \
    }

#define K_SUM(a, b) ((a) + (b))
#define K_PROD(a, b) ((a) * (b))
#define K_SAME(x) (x)
#define K_SCALAR_REDUCE_N_OPS(type, elem_t, widen, narrow)             \
    K_SCALAR_REDUCE_N(type, sum, elem_t, widen, narrow, K_SUM)         \
    K_SCALAR_REDUCE_N(type, min, elem_t, widen, narrow, k_num_min_f32) \
    K_SCALAR_REDUCE_N(type, max, elem_t, widen, narrow, k_num_max_f32) \
    K_SCALAR_REDUCE_N(type, prod, elem_t, widen, narrow, K_PROD)

K_SCALAR_REDUCE_N_OPS(f32, float, K_SAME, K_SAME)
K_SCALAR_REDUCE_N_OPS(f16, uint16_t, k_num_f16_to_f32, k_num_f32_to_f16)
K_SCALAR_REDUCE_N_OPS(bf16, uint16_t, k_num_bf16_to_f32, k_num_f32_to_bf16)

/* ---- the chain itself: f64, the integers, and f32 on the scalar path ---------
 * k_cpu.h defines these results as chained k_reduce then k_div, so that is
 * what runs, a block at a time so that the block's accumulator stays in L1
 * while every source streams through it once. The accumulator is dst
 * itself, unless dst is one of srcs[1..n-1], which the chain would
 * overwrite before reading: then a stack buffer, copied (or divided) into
 * dst once every source of the block is in. */
#define K_REDUCE_N_BLOCK_BYTES 4096

void k_reduce_n_chained(void *dst, const void *const *srcs, int n, size_t begin, size_t end,
                        const k_reduce_n_args_t *args)
{
    const size_t size = k_dtype_size(args->dtype);
    const size_t block = K_REDUCE_N_BLOCK_BYTES / size;
    uint64_t buffer[K_REDUCE_N_BLOCK_BYTES / sizeof(uint64_t)]; /* aligned for every dtype */
    int dst_is_later_source = 0;
    for (int j = 1; j < n; j++) dst_is_later_source |= srcs[j] == dst;

    for (size_t i = begin; i < end; i += block) {
        size_t m = end - i < block ? end - i : block;
        size_t at = i * size;
        uint8_t *out = (uint8_t *)dst + at;
        void *acc = dst_is_later_source ? (void *)buffer : out;
        k_reduce(acc, (const uint8_t *)srcs[0] + at, (const uint8_t *)srcs[1] + at, m, args->dtype, args->op);
        for (int j = 2; j < n; j++) k_reduce(acc, acc, (const uint8_t *)srcs[j] + at, m, args->dtype, args->op);
        if (args->divisor > 1)
            k_div(out, acc, m, args->dtype, args->divisor);
        else if (acc != out)
            memcpy(out, acc, m * size);
    }
}

#define K_ROW(type)                                                                           \
    [K_OP_SUM] = k_reduce_n_scalar_##type##_sum, [K_OP_MIN] = k_reduce_n_scalar_##type##_min, \
    [K_OP_MAX] = k_reduce_n_scalar_##type##_max, [K_OP_PROD] = k_reduce_n_scalar_##type##_prod

/* f32 is defined as the chain, and the compiler vectorises k_reduce's
 * scalar loops but not the loop over sources above (2-3x slower in cache
 * for n >= 3), so where this is the only path f32 runs the chain too. The
 * f32 kernels above still serve the vector paths as their tails. */
const k_reduce_n_table_t k_reduce_n_table_scalar = K_REDUCE_N_TABLE(K_REDUCE_N_CHAINED_ROW, K_ROW(f16), K_ROW(bf16));
