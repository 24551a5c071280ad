/*
 * reduce.c - k_reduce on one ISA: every dtype x every op, counts 0..300 and
 * some large odd ones, unaligned offsets, dst == a and dst == b, poisoned
 * guard bytes around dst to catch overruns, against ref_reduce; and
 * max(x, x) over all 65536 halves through each path's vector conversions.
 */
#include "kernels_test.h"

enum { ALIAS_NONE, ALIAS_DST_A, ALIAS_DST_B };

static const size_t large_counts[] = {1021, 4099, 65537, 100003};
#define SMALL_COUNT_MAX 300
#define MAX_COUNT 100003

/* Runs one k_reduce call and checks every element and the guards.
 * Returns the number of failed checks. */
static long reduce_case(k_dtype_t dtype, k_op_t op, size_t count, int alias, size_t off_a, size_t off_b, size_t off_d,
                        const uint8_t *pool_a, const uint8_t *pool_b, uint8_t *buf_a, uint8_t *buf_b, uint8_t *buf_d,
                        long *checks, long *printed)
{
    size_t size = k_dtype_size(dtype);
    long failures = 0;

    /* only the span this case can touch is poisoned and checked: scanning
     * whole buffers for every small case would dominate the run time */
    size_t span = 2 * GUARD_BYTES + (MAX_OFFSET + count) * size;
    memset(buf_d, POISON, span);
    memset(buf_a, POISON, span);
    memset(buf_b, POISON, span);
    uint8_t *d = buf_d + GUARD_BYTES + off_d * size;
    uint8_t *a = buf_a + GUARD_BYTES + off_a * size;
    uint8_t *b = buf_b + GUARD_BYTES + off_b * size;
    if (alias == ALIAS_DST_A) a = d;
    if (alias == ALIAS_DST_B) b = d;
    if (count) {
        memcpy(a, pool_a, count * size);
        memcpy(b, pool_b, count * size);
    }

    k_reduce(d, a, b, count, dtype, op);

    for (size_t i = 0; i < count; i++) {
        uint8_t want[8];
        int any_nan_ok;
        const uint8_t *ea = pool_a + i * size, *eb = pool_b + i * size;
        ref_reduce(dtype, op, ea, eb, want, &any_nan_ok);
        (*checks)++;
        if (!element_ok(dtype, op, d + i * size, want, any_nan_ok, ea, eb)) {
            failures++;
            if ((*printed)++ < MAX_PRINTED) {
                printf("  count %zu alias %d elem %zu: a=", count, alias, i);
                print_hex(ea, size);
                printf(" b=");
                print_hex(eb, size);
                printf(" got=");
                print_hex(d + i * size, size);
                printf(" want=");
                print_hex(want, size);
                printf("\n");
            }
        }
    }
    /* everything outside dst[0, count) must still be poison, and inputs
     * that are not dst must be unchanged */
    uint8_t *d_end = d + count * size;
    for (uint8_t *p = buf_d; p < buf_d + span; p++) {
        if (p >= d && p < d_end) continue;
        (*checks)++;
        if (*p != POISON) {
            failures++;
            if ((*printed)++ < MAX_PRINTED)
                printf("  count %zu alias %d: byte %td outside dst overwritten\n", count, alias, p - d);
            break;
        }
    }
    if (alias != ALIAS_DST_A && count && memcmp(a, pool_a, count * size) != 0)
        failures++, printf("  count %zu: input a modified\n", count);
    if (alias != ALIAS_DST_B && count && memcmp(b, pool_b, count * size) != 0)
        failures++, printf("  count %zu: input b modified\n", count);
    return failures;
}

static void test_reduce_isa(k_isa_t isa)
{
    size_t buf_bytes = 2 * GUARD_BYTES + (MAX_COUNT + MAX_OFFSET) * 8;
    uint8_t *pool_a = malloc((MAX_COUNT + SMALL_COUNT_MAX) * 8);
    uint8_t *pool_b = malloc((MAX_COUNT + SMALL_COUNT_MAX) * 8);
    uint8_t *buf_a = malloc(buf_bytes), *buf_b = malloc(buf_bytes), *buf_d = malloc(buf_bytes);
    if (!pool_a || !pool_b || !buf_a || !buf_b || !buf_d) {
        printf("out of memory\n");
        exit(1);
    }

    for (int dt = 0; dt < K_DTYPE_COUNT; dt++) {
        k_dtype_t dtype = (k_dtype_t)dt;
        size_t size = k_dtype_size(dtype);
        size_t pool_count = MAX_COUNT + SMALL_COUNT_MAX;
        for (size_t i = 0; i < pool_count; i++) {
            random_element(&rng, dtype, pool_a + i * size);
            /* some equal and +-0 pairs, so MIN/MAX ties are exercised */
            uint32_t kind = test_rng_below(&rng, 100);
            if (kind < 4)
                memcpy(pool_b + i * size, pool_a + i * size, size);
            else
                random_element(&rng, dtype, pool_b + i * size);
        }
        for (int o = 0; o < K_OP_COUNT; o++) {
            k_op_t op = (k_op_t)o;
            long checks = 0, failures = 0, printed = 0;
            for (size_t count = 0; count <= SMALL_COUNT_MAX + 4; count++) {
                size_t n = count <= SMALL_COUNT_MAX ? count : large_counts[count - SMALL_COUNT_MAX - 1];
                for (int alias = ALIAS_NONE; alias <= ALIAS_DST_B; alias++) {
                    /* offsets in elements: vectors start misaligned in
                     * varying ways, different for a, b and dst */
                    size_t off_a = (n + (size_t)alias) % (MAX_OFFSET + 1);
                    size_t off_b = (n / 3 + 1) % (MAX_OFFSET + 1);
                    size_t off_d = (n / 7 + 2 * (size_t)alias) % (MAX_OFFSET + 1);
                    size_t start = n <= SMALL_COUNT_MAX ? (n * 37) % SMALL_COUNT_MAX : 0;
                    failures += reduce_case(dtype, op, n, alias, off_a, off_b, off_d, pool_a + start * size,
                                            pool_b + start * size, buf_a, buf_b, buf_d, &checks, &printed);
                }
            }
            report(checks, failures, "reduce %-6s %-4s %s", k_isa_name(isa), dtype_names[dtype], op_names[op]);
        }
    }
    free(pool_a);
    free(pool_b);
    free(buf_a);
    free(buf_b);
    free(buf_d);
}

/* max(x, x) over every half goes through the vector conversions of each
 * path; the result must be x, NaNs quieted (payload kept). */
static void test_reduce_half_exhaustive(k_isa_t isa, k_dtype_t dtype)
{
    ref_fmt_t fmt = dtype == K_DTYPE_F16 ? REF_F16 : REF_BF16;
    uint16_t quiet_bit = dtype == K_DTYPE_F16 ? 0x0200 : 0x0040;
    static uint16_t all[65536], out[65536];
    long checks = 0, failures = 0;
    for (uint32_t h = 0; h < 65536; h++) all[h] = (uint16_t)h;
    k_reduce(out, all, all, 65536, dtype, K_OP_MAX);
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t want = is_nan16((uint16_t)h, fmt) ? (uint16_t)(h | quiet_bit) : (uint16_t)h;
        checks++;
        if (out[h] != want && failures++ < MAX_PRINTED)
            printf("  max(0x%04x, same) = 0x%04x, want 0x%04x\n", h, out[h], want);
    }
    report(checks, failures, "reduce %-6s %-4s max(x,x), all 65536", k_isa_name(isa), dtype_names[dtype]);
}

void test_reduce(k_isa_t isa)
{
    test_reduce_half_exhaustive(isa, K_DTYPE_F16);
    test_reduce_half_exhaustive(isa, K_DTYPE_BF16);
    test_reduce_isa(isa);
}
