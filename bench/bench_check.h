/*
 * bench_check.h - inputs whose reduction every rank can compute exactly.
 *
 * Rank r's element i is a small integer, a function of (op, r, i) only, so
 * that the reduced value of every element is exact in every dtype: no sum,
 * product or average of these inputs is ever rounded before the final
 * conversion, whatever order the runtime reduces in. A pattern holds one
 * period of this rank's input and of the expected result, already encoded in
 * the dtype, so filling and checking a buffer are memcpy/memcmp passes.
 *
 * Build: compiled into each hora-bench-* executable (bench/meson.build).
 */
#ifndef BENCH_CHECK_H
#define BENCH_CHECK_H

#include <stddef.h>

#include "hora.h"

/* Byte the benchmarks fill output buffers with before a checked run. No
 * expected value of any pattern contains it: u8 results stay below 0xA5 and
 * wider elements made of 0xA5 bytes are neither small integers nor the
 * quotients an AVG produces. */
#define BENCH_POISON_BYTE 0xA5

typedef struct {
    hora_dtype_t dtype;
    hora_op_t op;
    int rank;
    int nranks;
    size_t elem_bytes;
    size_t period_count;     /* inputs and result repeat every period_count elements */
    unsigned char *input;    /* (period_count * elem_bytes) this rank's input */
    unsigned char *expected; /* (period_count * elem_bytes) the reduced result */
} bench_pattern_t;

/* Build the pattern of (dtype, op) for rank of nranks. Returns 0, or -1 when
 * out of memory or dtype/op are invalid. */
int bench_pattern_init(bench_pattern_t *pattern, hora_dtype_t dtype, hora_op_t op, int rank, int nranks);
void bench_pattern_free(bench_pattern_t *pattern);

/* Write this rank's input into count elements of buf. */
void bench_pattern_fill(const bench_pattern_t *pattern, void *buf, size_t count);

/* Count the elements of buf (count of them) that differ bitwise from the
 * expected result (bench_pattern_count_wrong) or from this rank's input
 * (bench_pattern_count_changed). *first_wrong receives the index of the first
 * differing element when there is one and first_wrong is not NULL. */
size_t bench_pattern_count_wrong(const bench_pattern_t *pattern, const void *buf, size_t count, size_t *first_wrong);
size_t bench_pattern_count_changed(const bench_pattern_t *pattern, const void *buf, size_t count, size_t *first_wrong);

/* Hex of one element ("0x3c00") of buf, or of the expected value at index. */
void bench_pattern_format(const bench_pattern_t *pattern, const void *buf, size_t index, char *out, size_t len);
void bench_pattern_format_expected(const bench_pattern_t *pattern, size_t index, char *out, size_t len);

#endif /* BENCH_CHECK_H */
