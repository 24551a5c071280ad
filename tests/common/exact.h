/* exact.h - inputs whose collective results are exactly computable, shared by
 * the multi-rank tests. A test hashes (rank, index, ...) its own way; this
 * maps the hash to a small integer that stays exact in every dtype under the
 * op (PROD -1, 1, 2 (u8/u16 1, 2); MIN/MAX -50..50 (u8/u16 0..199); SUM/AVG
 * -5..5 (u8/u16 0..10) plus rank-dependent high bits that catch truncated wide
 * ints; i8 SUM offset by 60 so that it wraps; bool: see exact_bool_value),
 * combines them under op, and writes values in any dtype. */
#ifndef HORA_TEST_EXACT_H
#define HORA_TEST_EXACT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hora.h"
#include "k_cpu.h"

/* bool's inputs: bytes 0 (false) or 1, 2, 0x80, 0xFF (true: the runtime
 * must normalise them to 1), zeros frequent where one zero decides the
 * result (SUM/MAX are OR) and rare where one zero decides it (MIN/PROD are
 * AND), so that both outcomes occur on 2-4 ranks. exact_reduce over these
 * non-negative values is nonzero exactly when OR / AND is true: the
 * expected value is exact_truth() of it. */
static inline int64_t exact_bool_value(hora_op_t op, uint64_t h)
{
    static const int64_t truths[4] = {1, 2, 0x80, 0xFF};
    const int is_or = op == HORA_OP_SUM || op == HORA_OP_MAX;
    const int zero = is_or ? h % 8 < 5 : h % 8 == 0;
    return zero ? 0 : truths[(h >> 3) % 4];
}

static inline int64_t exact_truth(hora_dtype_t dtype, int64_t v) { return dtype == HORA_DTYPE_BOOL ? v != 0 : v; }

static inline int64_t exact_value(hora_dtype_t dtype, hora_op_t op, int rank, uint64_t h)
{
    const int unsigned_type = dtype == HORA_DTYPE_U8 || dtype == HORA_DTYPE_U16;
    if (dtype == HORA_DTYPE_BOOL) return exact_bool_value(op, h);
    switch (op) {
    case HORA_OP_PROD: {
        int64_t v = (int64_t)(h % 3) - 1;
        return unsigned_type ? 1 + (int64_t)(h % 2) : v == 0 ? 2 : v;
    }
    case HORA_OP_MIN:
    case HORA_OP_MAX: return unsigned_type ? (int64_t)(h % 200) : (int64_t)(h % 101) - 50;
    default: {
        int64_t v = unsigned_type ? (int64_t)(h % 11) : (int64_t)(h % 11) - 5;
        if (dtype == HORA_DTYPE_I64) v += (int64_t)rank << 40;
        if (dtype == HORA_DTYPE_I32) v += (int64_t)rank << 20;
        if (dtype == HORA_DTYPE_I16 || dtype == HORA_DTYPE_U16) v += (int64_t)rank << 8;
        /* i8 SUM wraps on purpose (up to 4 x 65 = 260; AVG stays exact) */
        if (dtype == HORA_DTYPE_I8 && op == HORA_OP_SUM) v += 60;
        return v;
    }
    }
}

/* One step of op over exact values: acc op v (AVG adds like SUM; dividing by
 * the number of ranks is the caller's, in the dtype's own way). Integers up to
 * 2^53 stay exact in a double. */
static inline double exact_reduce(hora_op_t op, double acc, double v)
{
    switch (op) {
    case HORA_OP_SUM:
    case HORA_OP_AVG: return acc + v;
    case HORA_OP_PROD: return acc * v;
    case HORA_OP_MIN: return v < acc ? v : acc;
    case HORA_OP_MAX: return v > acc ? v : acc;
    default: return acc;
    }
}

/* buf[i] = v in dtype (f16/bf16 round to nearest even). */
static inline void exact_store(void *buf, size_t i, hora_dtype_t dtype, double v)
{
    switch (dtype) {
    case HORA_DTYPE_F32: ((float *)buf)[i] = (float)v; break;
    case HORA_DTYPE_F16: ((uint16_t *)buf)[i] = k_f32_to_f16((float)v); break;
    case HORA_DTYPE_BF16: ((uint16_t *)buf)[i] = k_f32_to_bf16((float)v); break;
    case HORA_DTYPE_F64: ((double *)buf)[i] = v; break;
    case HORA_DTYPE_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case HORA_DTYPE_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case HORA_DTYPE_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    /* the narrow integers wrap modulo 2^bits, as the runtime's SUM/PROD do
     * (through int64: a double out of the type's range would be UB) */
    case HORA_DTYPE_I8: ((uint8_t *)buf)[i] = (uint8_t)(uint64_t)(int64_t)v; break;
    case HORA_DTYPE_I16: ((uint16_t *)buf)[i] = (uint16_t)(uint64_t)(int64_t)v; break;
    case HORA_DTYPE_U16: ((uint16_t *)buf)[i] = (uint16_t)(uint64_t)(int64_t)v; break;
    case HORA_DTYPE_BOOL: ((uint8_t *)buf)[i] = (uint8_t)(uint64_t)(int64_t)v; break; /* the raw byte */
    default: break;
    }
}

/* buf[i] = v, an integer result: i64 stored as is (exact_store goes
 * through a double, which holds 53 bits), any other dtype by exact_store. */
static inline void exact_store_int(void *buf, size_t i, hora_dtype_t dtype, int64_t v)
{
    if (dtype == HORA_DTYPE_I64)
        ((int64_t *)buf)[i] = v;
    else
        exact_store(buf, i, dtype, (double)v);
}

/* For inputs and results that depend on the index modulo period only:
 * fills elements [period, count) of buf (es bytes each) by copying the
 * first period, which the caller has computed. A prime period keeps a
 * misplaced segment from matching by accident. */
static inline void exact_tile(void *buf, size_t count, size_t es, size_t period)
{
    size_t have = count < period ? count : period;
    while (have < count) {
        size_t n = have <= count - have ? have : count - have;
        memcpy((char *)buf + have * es, buf, n * es);
        have += n;
    }
}

#endif
