/*
 * bench_check.c - inputs whose reduction every rank can compute exactly
 * (see bench_check.h).
 *
 * Build: compiled into each hora-bench-* executable (bench/meson.build).
 */
#include "bench_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

/* Ranks up to which every rank contributes to every SUM/AVG element: 32 ranks
 * x 5 = 160, exact in bf16 (integers up to 256 are) and below the poison byte
 * 0xA5 = 165 for u8. */
#define CHECK_DENSE_SUM_MAX_RANKS 32
/* PROD uses the factor 2 on ranks below this only: |product| <= 2^7 = 128
 * fits u8 without wrapping and every float type without rounding. */
#define CHECK_PROD_MAX_TWOS 7

static int check_dtype_is_signed(hora_dtype_t dtype)
{
    return dtype != HORA_DTYPE_U8 && dtype != HORA_DTYPE_U16 && dtype != HORA_DTYPE_BOOL;
}

/*
 * Rank's input at element index, a small integer:
 * - SUM, AVG: (7i + 3r) % 5 + 1, in 1..5, while nranks <= 32. With more
 *   ranks, element i is (i % 5) + 1 on rank i % nranks and 0 elsewhere, so
 *   the sum stays <= 5.
 * - MIN, MAX: (7i + 3r) % 11, shifted to -5..5 for signed types and floats.
 * - PROD: 1, 2 or -1 by (7i + 3r) % 3; 2 only on ranks 0..6 and -1 only for
 *   signed types and floats (1 instead).
 * 7 and 3 are coprime with the periods, so neighbouring elements and ranks
 * differ: a runtime that swaps elements or ranks' blocks reads wrong values.
 */
static long long check_input_value(hora_dtype_t dtype, hora_op_t op, int rank, int nranks, size_t index)
{
    size_t mix = index * 7u + (size_t)rank * 3u;
    switch (op) {
    case HORA_OP_SUM:
    case HORA_OP_AVG:
        if (nranks <= CHECK_DENSE_SUM_MAX_RANKS) return (long long)(mix % 5u) + 1;
        return index % (size_t)nranks == (size_t)rank ? (long long)(index % 5u) + 1 : 0;
    case HORA_OP_MIN:
    case HORA_OP_MAX: return (long long)(mix % 11u) - (check_dtype_is_signed(dtype) ? 5 : 0);
    case HORA_OP_PROD:
        switch (mix % 3u) {
        case 1: return rank < CHECK_PROD_MAX_TWOS ? 2 : 1;
        case 2: return check_dtype_is_signed(dtype) ? -1 : 1;
        default: return 1;
        }
    case HORA_OP_COUNT:
    case HORA_OP_ADASUM: break; /* not element-wise: the benchmarks do not run it */
    }
    return 0;
}

/* Store an exact small integer as one element of dtype. Integer types wrap
 * modulo 2^bits as the runtime's SUM and PROD do (never needed with these
 * inputs, but the conversion is then defined). */
static void check_encode_integer(hora_dtype_t dtype, long long value, unsigned char *out)
{
    switch (dtype) {
    case HORA_DTYPE_F32: {
        float v = (float)value;
        memcpy(out, &v, sizeof(v));
        break;
    }
    case HORA_DTYPE_F16: {
        uint16_t v = bench_f16_from_f32((float)value);
        memcpy(out, &v, sizeof(v));
        break;
    }
    case HORA_DTYPE_BF16: {
        uint16_t v = bench_bf16_from_f32((float)value);
        memcpy(out, &v, sizeof(v));
        break;
    }
    case HORA_DTYPE_F64: {
        double v = (double)value;
        memcpy(out, &v, sizeof(v));
        break;
    }
    case HORA_DTYPE_I32: {
        uint32_t v = (uint32_t)(unsigned long long)value;
        memcpy(out, &v, sizeof(v));
        break;
    }
    case HORA_DTYPE_I64: {
        uint64_t v = (uint64_t)value;
        memcpy(out, &v, sizeof(v));
        break;
    }
    case HORA_DTYPE_U8: *out = (uint8_t)(unsigned long long)value; break;
    case HORA_DTYPE_I8: *out = (uint8_t)(unsigned long long)value; break;
    case HORA_DTYPE_I16:
    case HORA_DTYPE_U16: {
        uint16_t v = (uint16_t)(unsigned long long)value;
        memcpy(out, &v, sizeof(v));
        break;
    }
    /* The inputs are >= 0 for an unsigned type, so SUM/MAX != 0 is OR,
     * MIN/PROD != 0 is AND: bool's ops. */
    case HORA_DTYPE_BOOL: *out = value != 0; break;
    case HORA_DTYPE_COUNT: break;
    }
}

/* AVG as hora.h defines it: the SUM (already exact), then a division by the
 * rank count, truncating for integers (after the SUM wrapped to the type's
 * width), in fp32 for f32/f16/bf16 and rounded to nearest even into the
 * dtype, in fp64 for f64. */
static void check_encode_average(hora_dtype_t dtype, long long sum, int nranks, unsigned char *out)
{
    switch (dtype) {
    case HORA_DTYPE_F32: {
        float v = (float)sum / (float)nranks;
        memcpy(out, &v, sizeof(v));
        break;
    }
    case HORA_DTYPE_F16: {
        uint16_t v = bench_f16_from_f32((float)sum / (float)nranks);
        memcpy(out, &v, sizeof(v));
        break;
    }
    case HORA_DTYPE_BF16: {
        uint16_t v = bench_bf16_from_f32((float)sum / (float)nranks);
        memcpy(out, &v, sizeof(v));
        break;
    }
    case HORA_DTYPE_F64: {
        double v = (double)sum / (double)nranks;
        memcpy(out, &v, sizeof(v));
        break;
    }
    case HORA_DTYPE_I32: {
        int32_t v = (int32_t)(uint32_t)(unsigned long long)sum / (int32_t)nranks;
        memcpy(out, &v, sizeof(v));
        break;
    }
    case HORA_DTYPE_I64: {
        int64_t v = (int64_t)sum / (int64_t)nranks;
        memcpy(out, &v, sizeof(v));
        break;
    }
    case HORA_DTYPE_U8: *out = (uint8_t)((uint8_t)(unsigned long long)sum / (unsigned)nranks); break;
    case HORA_DTYPE_I8: *out = (uint8_t)(int8_t)((int8_t)(uint8_t)(unsigned long long)sum / nranks); break;
    case HORA_DTYPE_I16: {
        int16_t v = (int16_t)((int16_t)(uint16_t)(unsigned long long)sum / nranks);
        memcpy(out, &v, sizeof(v));
        break;
    }
    case HORA_DTYPE_U16: {
        uint16_t v = (uint16_t)((uint16_t)(unsigned long long)sum / (unsigned)nranks);
        memcpy(out, &v, sizeof(v));
        break;
    }
    case HORA_DTYPE_BOOL: /* refused by the runtime; the benchmark skips the row */
    case HORA_DTYPE_COUNT: break;
    }
}

int bench_pattern_init(bench_pattern_t *pattern, hora_dtype_t dtype, hora_op_t op, int rank, int nranks)
{
    size_t elem_bytes = hora_dtype_size(dtype);
    if (elem_bytes == 0 || (unsigned)op >= HORA_OP_COUNT || nranks < 1 || rank < 0 || rank >= nranks) return -1;
    /* Every value above depends on index modulo 5, 11, 3 and nranks. */
    size_t period_count = 5u * 11u * 3u * (size_t)nranks;
    unsigned char *input = malloc(period_count * elem_bytes);
    unsigned char *expected = malloc(period_count * elem_bytes);
    if (input == NULL || expected == NULL) {
        free(input);
        free(expected);
        return -1;
    }

    for (size_t i = 0; i < period_count; i++) {
        check_encode_integer(dtype, check_input_value(dtype, op, rank, nranks, i), input + i * elem_bytes);

        long long result = check_input_value(dtype, op, 0, nranks, i);
        for (int r = 1; r < nranks; r++) {
            long long value = check_input_value(dtype, op, r, nranks, i);
            switch (op) {
            case HORA_OP_SUM:
            case HORA_OP_AVG: result += value; break;
            case HORA_OP_MIN: result = value < result ? value : result; break;
            case HORA_OP_MAX: result = value > result ? value : result; break;
            case HORA_OP_PROD: result *= value; break;
            case HORA_OP_COUNT:
            case HORA_OP_ADASUM: break; /* not element-wise: the benchmarks do not run it */
            }
        }
        unsigned char *out = expected + i * elem_bytes;
        if (op == HORA_OP_AVG)
            check_encode_average(dtype, result, nranks, out);
        else
            check_encode_integer(dtype, result, out);
    }

    pattern->dtype = dtype;
    pattern->op = op;
    pattern->rank = rank;
    pattern->nranks = nranks;
    pattern->elem_bytes = elem_bytes;
    pattern->period_count = period_count;
    pattern->input = input;
    pattern->expected = expected;
    return 0;
}

void bench_pattern_free(bench_pattern_t *pattern)
{
    free(pattern->input);
    free(pattern->expected);
    pattern->input = NULL;
    pattern->expected = NULL;
}

void bench_pattern_fill(const bench_pattern_t *pattern, void *buf, size_t count)
{
    unsigned char *out = buf;
    for (size_t done = 0; done < count; done += pattern->period_count) {
        size_t n = count - done < pattern->period_count ? count - done : pattern->period_count;
        memcpy(out + done * pattern->elem_bytes, pattern->input, n * pattern->elem_bytes);
    }
}

/* Compare buf with one period of reference repeated; memcmp a period at a
 * time and only walk the elements of a period that differs. */
static size_t check_count_differences(const bench_pattern_t *pattern, const unsigned char *reference, const void *buf,
                                      size_t count, size_t *first_wrong)
{
    const unsigned char *in = buf;
    size_t eb = pattern->elem_bytes;
    size_t wrong = 0;
    for (size_t done = 0; done < count; done += pattern->period_count) {
        size_t n = count - done < pattern->period_count ? count - done : pattern->period_count;
        const unsigned char *block = in + done * eb;
        if (memcmp(block, reference, n * eb) == 0) continue;
        for (size_t i = 0; i < n; i++) {
            if (memcmp(block + i * eb, reference + i * eb, eb) != 0) {
                if (wrong == 0 && first_wrong != NULL) *first_wrong = done + i;
                wrong++;
            }
        }
    }
    return wrong;
}

size_t bench_pattern_count_wrong(const bench_pattern_t *pattern, const void *buf, size_t count, size_t *first_wrong)
{
    return check_count_differences(pattern, pattern->expected, buf, count, first_wrong);
}

size_t bench_pattern_count_changed(const bench_pattern_t *pattern, const void *buf, size_t count, size_t *first_wrong)
{
    return check_count_differences(pattern, pattern->input, buf, count, first_wrong);
}

/* Elements are printed as their bits, most significant byte first. */
static void check_format_bits(const unsigned char *elem, size_t elem_bytes, char *out, size_t len)
{
    uint64_t bits = 0;
    memcpy(&bits, elem, elem_bytes); /* little-endian hosts: low bytes first */
    snprintf(out, len, "0x%0*llx", (int)(2 * elem_bytes), (unsigned long long)bits);
}

void bench_pattern_format(const bench_pattern_t *pattern, const void *buf, size_t index, char *out, size_t len)
{
    const unsigned char *in = buf;
    check_format_bits(in + index * pattern->elem_bytes, pattern->elem_bytes, out, len);
}

void bench_pattern_format_expected(const bench_pattern_t *pattern, size_t index, char *out, size_t len)
{
    size_t i = index % pattern->period_count;
    check_format_bits(pattern->expected + i * pattern->elem_bytes, pattern->elem_bytes, out, len);
}
