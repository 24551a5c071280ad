/* soak_values.c - the soak's inputs and expected results.
 *
 * Allreduce inputs are small integers (tests/common/exact.h) hashed from
 * (salt, rank, element), so every rank computes the exact result of every
 * element. The runtime's rounding is reproduced step by step, as hora.h and
 * k_cpu.h state it: prescale multiplies each input in fp32 by (float)factor
 * and rounds to the dtype (f64 in fp64; integers in double, truncated
 * toward zero as Horovod does, and saturated), the reduction is exact for
 * these inputs (integers wrap modulo 2^bits), AVG divides in fp32 (f64 in
 * fp64, integers truncating), postscale rounds like prescale. With fp16/bf16 wire
 * compression all of that happens in the wire dtype. Broadcast and allgather
 * only copy, so their inputs are arbitrary bit patterns. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exact.h"
#include "k_cpu.h"
#include "rand.h"
#include "soak.h"

#define SOAK_MAX_WRONG_SHOWN 4

static int soak_is_float(hora_dtype_t d)
{
    return d == HORA_DTYPE_F32 || d == HORA_DTYPE_F16 || d == HORA_DTYPE_BF16 || d == HORA_DTYPE_F64;
}

/* v rounded to dtype (floats) or wrapped modulo 2^bits (integers). */
static double soak_round(hora_dtype_t d, double v)
{
    switch (d) {
    case HORA_DTYPE_F32: return (float)v;
    case HORA_DTYPE_F16: return k_f16_to_f32(k_f32_to_f16((float)v));
    case HORA_DTYPE_BF16: return k_bf16_to_f32(k_f32_to_bf16((float)v));
    case HORA_DTYPE_I32: return (double)(int32_t)(uint32_t)(uint64_t)(int64_t)v;
    case HORA_DTYPE_U8: return (double)(uint8_t)(uint64_t)(int64_t)v;
    default: return v; /* f64; i64 values stay far below 2^53 */
    }
}

/* v * factor as k_scale computes it in dtype d. */
static double soak_scale(hora_dtype_t d, double v, double factor)
{
    if (d == HORA_DTYPE_F64) return v * factor;
    if (soak_is_float(d)) return soak_round(d, (double)((float)v * (float)factor));
    double r = trunc(v * factor), lo, hi;
    switch (d) {
    case HORA_DTYPE_I32: lo = INT32_MIN, hi = INT32_MAX; break;
    case HORA_DTYPE_U8: lo = 0, hi = UINT8_MAX; break;
    default: lo = -0x1p63, hi = 0x1p63; break;
    }
    return r < lo ? lo : r > hi ? hi : r;
}

static uint64_t soak_elem_hash(uint64_t salt, int r, size_t i)
{
    return test_mix64(salt ^ ((uint64_t)i * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(r + 1) << 56));
}

double soak_ar_input(const struct soak_tensor *t, int r, size_t i)
{
    return (double)exact_value(t->dtype, t->op, r, soak_elem_hash(t->salt, r, i));
}

double soak_ar_expected(const struct soak_tensor *t, size_t i)
{
    const hora_dtype_t work = t->compression == HORA_COMPRESSION_FP16   ? HORA_DTYPE_F16
                              : t->compression == HORA_COMPRESSION_BF16 ? HORA_DTYPE_BF16
                                                                        : t->dtype;
    double acc = 0;
    for (int r = 0; r < soak_size; r++) {
        double x = soak_round(work, soak_round(t->dtype, soak_ar_input(t, r, i)));
        if (t->prescale != 1.0) x = soak_scale(work, x, t->prescale);
        acc = r == 0 ? x : exact_reduce(t->op, acc, x);
    }
    acc = soak_round(work, acc);
    if (t->op == HORA_OP_AVG) {
        if (work == HORA_DTYPE_F64)
            acc /= soak_size;
        else if (soak_is_float(work))
            acc = soak_round(work, (double)((float)acc / (float)soak_size));
        else
            acc = (double)((int64_t)acc / soak_size);
    }
    if (t->postscale != 1.0) acc = soak_scale(work, acc, t->postscale);
    return acc;
}

void soak_ar_fill(const struct soak_tensor *t, void *buf, size_t count)
{
    for (size_t i = 0; i < count; i++) exact_store(buf, i, t->dtype, soak_ar_input(t, soak_rank, i));
}

void soak_bits_fill(void *buf, size_t offset, size_t count, size_t elem_bytes, uint64_t salt, int r)
{
    unsigned char *out = buf;
    for (size_t i = 0; i < count; i++) {
        uint64_t h = soak_elem_hash(salt, r, offset + i);
        memcpy(out + i * elem_bytes, &h, elem_bytes); /* little-endian: the low bytes */
    }
}

double soak_value_at(const void *buf, size_t i, hora_dtype_t dtype)
{
    switch (dtype) {
    case HORA_DTYPE_F32: return ((const float *)buf)[i];
    case HORA_DTYPE_F16: return k_f16_to_f32(((const uint16_t *)buf)[i]);
    case HORA_DTYPE_BF16: return k_bf16_to_f32(((const uint16_t *)buf)[i]);
    case HORA_DTYPE_F64: return ((const double *)buf)[i];
    case HORA_DTYPE_I32: return ((const int32_t *)buf)[i];
    case HORA_DTYPE_I64: return (double)((const int64_t *)buf)[i];
    case HORA_DTYPE_U8: return ((const uint8_t *)buf)[i];
    default: return 0;
    }
}

size_t soak_compare(const char *what, const void *got, const void *want, size_t count, hora_dtype_t dtype)
{
    const size_t es = hora_dtype_size(dtype);
    soak_count.checks++;
    if (count == 0 || !memcmp(got, want, count * es)) return 0;
    size_t wrong = 0, shown = 0;
    char detail[SOAK_MAX_WRONG_SHOWN][160];
    for (size_t i = 0; i < count; i++) {
        const unsigned char *g = (const unsigned char *)got + i * es, *w = (const unsigned char *)want + i * es;
        if (!memcmp(g, w, es)) continue;
        if (wrong++ < SOAK_MAX_WRONG_SHOWN) {
            uint64_t gb = 0, wb = 0;
            memcpy(&gb, g, es);
            memcpy(&wb, w, es);
            snprintf(detail[shown++], sizeof(detail[0]), "[%zu] expected %.17g (0x%0*llx) got %.17g (0x%0*llx)", i,
                     soak_value_at(want, i, dtype), (int)(2 * es), (unsigned long long)wb, soak_value_at(got, i, dtype),
                     (int)(2 * es), (unsigned long long)gb);
        }
    }
    soak_fail("%s: %zu of %zu elements wrong: %s%s%s%s%s%s%s", what, wrong, count, detail[0], shown > 1 ? ", " : "",
              shown > 1 ? detail[1] : "", shown > 2 ? ", " : "", shown > 2 ? detail[2] : "", shown > 3 ? ", " : "",
              shown > 3 ? detail[3] : "");
    return wrong;
}

/* A pattern no collective produces by accident. */
static unsigned char soak_guard_byte(size_t k) { return (unsigned char)(0xC3 ^ (k * 29)); }

void soak_guard_fill(void *p, size_t bytes)
{
    unsigned char *g = p;
    for (size_t k = 0; k < SOAK_GUARD_BYTES; k++) g[bytes + k] = soak_guard_byte(k);
}

void soak_guard_check(const char *what, const void *p, size_t bytes)
{
    const unsigned char *g = p;
    soak_count.checks++;
    for (size_t k = 0; k < SOAK_GUARD_BYTES; k++)
        if (g[bytes + k] != soak_guard_byte(k)) {
            soak_fail("%s: written past its end: byte %zu after the last element is 0x%02x, was 0x%02x", what, k,
                      g[bytes + k], soak_guard_byte(k));
            return;
        }
}
