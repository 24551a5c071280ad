/*
 * sgd.c - k_sgd_step on one ISA: every hyper-parameter mix, bit for bit
 * against a reference with one rounding per operation, with guards.
 */
#include "kernels_test.h"

/* torch.optim.SGD (dampening 0), as k_cpu.h specifies it. */
static void sgd_reference(float *p, const float *grad, float *m, size_t count, float lr, float momentum, float wd,
                          int nesterov)
{
    for (size_t i = 0; i < count; i++) {
        float g = wd != 0.0f ? ref_add_f32(grad[i], ref_mul_f32(wd, p[i])) : grad[i];
        float step = g;
        if (momentum != 0.0f) {
            m[i] = ref_add_f32(ref_mul_f32(momentum, m[i]), g);
            step = nesterov ? ref_add_f32(g, ref_mul_f32(momentum, m[i])) : m[i];
        }
        p[i] = ref_sub_f32(p[i], ref_mul_f32(lr, step));
    }
}

#define SGD_MAX_COUNT 4099

/* Every hyper-parameter mix, counts 0..100 and some odd large ones, at
 * unaligned offsets, two steps (the second reads a non-zero momentum),
 * against the reference bit for bit, with guard bytes around all three
 * arrays; momentum 0 with a NULL buffer. Values include -0, tiny and huge
 * numbers so that the skipped weight-decay term shows (-0 + 0 = +0). */
void test_sgd_isa(k_isa_t isa)
{
    static const float hyper[][4] = {
        /* lr, momentum, weight decay, nesterov */
        {0.1f, 0.9f, 5e-4f, 1}, {0.1f, 0.9f, 5e-4f, 0}, {0.05f, 0.9f, 0.0f, 1},
        {0.2f, 0.0f, 1e-4f, 0}, {0.01f, 0.0f, 0.0f, 0}, {1.5f, 0.5f, 0.25f, 1},
    };
    static const float specials[] = {0.0f, -0.0f, 1e-30f, -3e38f, 1e-45f, 65504.0f};
    size_t span = 2 * GUARD_BYTES + (SGD_MAX_COUNT + MAX_OFFSET) * sizeof(float);
    uint8_t *bufs[3];
    float *want[3];
    for (int b = 0; b < 3; b++) {
        bufs[b] = malloc(span);
        want[b] = malloc(SGD_MAX_COUNT * sizeof(float));
    }
    long checks = 0, failures = 0, printed = 0;
    for (size_t h = 0; h < sizeof(hyper) / sizeof(hyper[0]); h++) {
        float lr = hyper[h][0], mom = hyper[h][1], wd = hyper[h][2];
        int nesterov = hyper[h][3] != 0.0f;
        for (size_t count = 0; count <= SGD_MAX_COUNT; count = count < 100 ? count + 1 : count * 2 + 1) {
            size_t off = (count + h) % (MAX_OFFSET + 1);
            float *arr[3]; /* param, grad, momentum */
            for (int b = 0; b < 3; b++) {
                memset(bufs[b], POISON, span);
                arr[b] = (float *)(bufs[b] + GUARD_BYTES) + off;
                for (size_t i = 0; i < count; i++) {
                    float v = test_rng_below(&rng, 8) == 0 ? specials[test_rng_below(&rng, 6)]
                                                           : (float)(test_rng_unit(&rng) * 4.0 - 2.0);
                    arr[b][i] = b == 2 && mom == 0.0f ? 0.0f : v;
                }
                memcpy(want[b], arr[b], count * sizeof(float));
            }
            for (int step = 0; step < 2; step++) {
                k_sgd_step(arr[0], arr[1], mom != 0.0f ? arr[2] : NULL, count, lr, mom, wd, nesterov);
                sgd_reference(want[0], want[1], want[2], count, lr, mom, wd, nesterov);
            }
            for (int b = 0; b < 3; b++) {
                checks++;
                if (memcmp(arr[b], want[b], count * sizeof(float)) != 0) {
                    failures++;
                    for (size_t i = 0; i < count; i++)
                        if (f32_bits(arr[b][i]) != f32_bits(want[b][i]) && printed++ < MAX_PRINTED)
                            printf("  sgd hyper %zu count %zu array %d [%zu]: got %a want %a\n", h, count, b, i,
                                   (double)arr[b][i], (double)want[b][i]);
                }
                checks++;
                if (!guards_intact(bufs[b] + off * sizeof(float), count * sizeof(float))) {
                    failures++;
                    if (printed++ < MAX_PRINTED)
                        printf("  sgd hyper %zu count %zu array %d: guard overwritten\n", h, count, b);
                }
            }
        }
    }
    for (int b = 0; b < 3; b++) {
        free(bufs[b]);
        free(want[b]);
    }
    report(checks, failures, "sgd %-6s all hyper-parameter mixes", k_isa_name(isa));
}
