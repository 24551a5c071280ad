/* mixed_eltwise.c - k_relu, k_relu_backward, k_add on one ISA (mixed.c says what is checked). */
#include "mixed.h"

/* ---- k_relu, k_relu_backward, k_add -------------------------------------------
 *
 * The cpu backend's element-wise ops against the definitions written here:
 * relu keeps an element unless it is below 0 (NaN and -0 pass with their
 * bits), which then becomes +0; relu's gradient is dy where y > 0, else
 * +0; add widens both, adds once in fp32, then (relu) the same relu,
 * rounded once. A NaN sum may be any NaN; everything else exact, and the
 * path under test must give the scalar path's bits (NaNs included, but for
 * the sum of two NaNs, whose payload k_cpu.h leaves open). Every
 * count 0..70 and the large ones, misaligned, out of place and in place,
 * guards checked. Its own random stream, so the groups before it keep
 * their inputs. */

enum { ELT_RELU, ELT_RELU_BACKWARD, ELT_ADD, ELT_ADD_RELU, ELT_OPS };
static const char *const elt_names[ELT_OPS] = {"relu", "relu backward", "add", "add+relu"};

static int elt_run(int op, void *y, const void *a, const void *b, k_dtype_t dtype, size_t count)
{
    switch (op) {
    case ELT_RELU: return k_relu(y, a, dtype, count);
    case ELT_RELU_BACKWARD: return k_relu_backward(y, a, b, dtype, count);
    default: return k_add(y, a, b, dtype, count, op == ELT_ADD_RELU);
    }
}

/* The expected bits of element (a, b); *any_nan: only a NaN is asked for;
 * *meet: an addition of two NaNs, whose payload k_cpu.h leaves open (so
 * not compared with the scalar path either). */
static uint64_t elt_ref(int op, k_dtype_t dtype, uint64_t a, uint64_t b, int *any_nan, int *meet)
{
    *any_nan = 0;
    *meet = 0;
    const float va = mixed_widen(dtype, a), vb = mixed_widen(dtype, b);
    switch (op) {
    case ELT_RELU: return va < 0.0f ? 0 : a;
    case ELT_RELU_BACKWARD: return va > 0.0f ? b : 0;
    default: {
        float sum = ref_add_f32(va, vb);
        if (op == ELT_ADD_RELU && sum < 0.0f) sum = 0.0f;
        *any_nan = isnan(sum);
        *meet = isnan(va) && isnan(vb);
        return mixed_narrow(dtype, sum);
    }
    }
}

void mixed_test_eltwise_isa(k_isa_t isa)
{
    static const k_dtype_t dtypes[] = {K_DTYPE_F32, K_DTYPE_F16, K_DTYPE_BF16};
    test_rng_t gen = test_rng_seeded(TEST_RNG_SEED ^ UINT64_C(0xE17));
    const size_t max_bytes = (65537 + MAX_OFFSET) * 4;
    uint8_t *a = malloc(max_bytes), *b = malloc(max_bytes), *buf = malloc(2 * GUARD_BYTES + max_bytes);
    uint8_t *scalar = malloc(max_bytes);
    long checks = 0, failures = 0;
    for (size_t d = 0; d < 3; d++) {
        const k_dtype_t dt = dtypes[d];
        const size_t size = k_dtype_size(dt);
        for (size_t k = 0; k < N_COUNTS; k++) {
            const size_t count = mixed_count_at(k), off = k % (MAX_OFFSET + 1);
            for (size_t i = 0; i < count; i++) {
                /* Mostly random; every 5th a pair that cancels (a zero sum). */
                const uint64_t x = mixed_random_any(&gen, dt);
                mixed_put_bits(dt, a, i, x);
                mixed_put_bits(dt, b, i, i % 5 == 4 ? x ^ (UINT64_C(1) << (size * 8 - 1)) : mixed_random_any(&gen, dt));
            }
            for (int op = 0; op < ELT_OPS; op++)
                for (int in_place = 0; in_place < 2; in_place++) {
                    uint8_t *y = buf + GUARD_BYTES + off * size;
                    memset(buf, POISON, 2 * GUARD_BYTES + max_bytes);
                    /* in place: the output is the last input (x, dy or b) */
                    const uint8_t *in_a = a, *in_b = b;
                    if (in_place) {
                        memcpy(y, op == ELT_RELU ? a : b, count * size);
                        if (op == ELT_RELU)
                            in_a = y;
                        else
                            in_b = y;
                    }
                    int rc = elt_run(op, y, in_a, in_b, dt, count);
                    k_isa_set(K_ISA_SCALAR);
                    int rc_scalar = elt_run(op, scalar, a, b, dt, count);
                    k_isa_set(isa);
                    checks++;
                    long wrong = rc != 0 || rc_scalar != 0 || !guards_intact(buf + off * size, count * size);
                    for (size_t i = 0; i < count; i++) {
                        int any_nan, meet;
                        const uint64_t want =
                            elt_ref(op, dt, mixed_get_bits(dt, a, i), mixed_get_bits(dt, b, i), &any_nan, &meet);
                        const uint64_t got = mixed_get_bits(dt, y, i);
                        wrong += (any_nan ? !mixed_is_nan_elem(dt, got) : got != want) ||
                                 (!meet && got != mixed_get_bits(dt, scalar, i));
                        checks++;
                    }
                    if (wrong && failures++ < MAX_PRINTED)
                        printf("  %s %s count %zu%s on %s: %ld wrong\n", elt_names[op], dtype_names[dt], count,
                               in_place ? " in place" : "", k_isa_name(isa), wrong);
                }
        }
    }
    free(a), free(b), free(buf), free(scalar);
    report(checks, failures, "relu/relu backward/add %s", k_isa_name(isa));
}
