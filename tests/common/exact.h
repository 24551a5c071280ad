/* exact.h - inputs whose collective results are exactly computable, shared by
 * the multi-rank tests. A test hashes (rank, index, ...) its own way; this
 * maps the hash to a small integer that stays exact in every dtype under the
 * op (PROD -1, 1, 2 (u8 1, 2); MIN/MAX -50..50 (u8 0..199); SUM/AVG -5..5
 * (u8 0..10) plus rank-dependent high bits that catch truncated wide ints),
 * combines them under op, and writes values in any dtype. */
#ifndef HORA_TEST_EXACT_H
#define HORA_TEST_EXACT_H

#include <stdint.h>
#include <stddef.h>

#include "hora.h"
#include "k_cpu.h"

static inline int64_t exact_value(hora_dtype_t dtype, hora_op_t op, int rank, uint64_t h)
{
    const int unsigned_type = dtype == HORA_DTYPE_U8;
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
    default: break;
    }
}

#endif
