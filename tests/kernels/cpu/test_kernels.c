/*
 * test_kernels.c - checks hora's CPU kernels (kernels/include/k_cpu.h)
 * against references written in these files, independently of the library.
 * One executable, one file per concern:
 *
 *  - api.c: dtype sizes, ISA selection, an empty reduce;
 *  - conversions.c: f16/bf16 <-> f32, exhaustive and at every rounding edge;
 *  - reduce.c: k_reduce, every ISA this CPU has x dtype x op, odd counts,
 *    unaligned, in place, guard bytes;
 *  - cast_div_scale.c: k_cast (all 121 pairs), k_div and k_scale on
 *    representative values against the exact-value reference;
 *    div_scale_isa.c: k_div and k_scale on every ISA against it;
 *  - sgd.c: k_sgd_step on every ISA, bit for bit;
 *  - reduce_n.c: k_reduce_n on every ISA (n sources, fp32 accumulation and
 *    one rounding for f16/bf16), against its reference, the scalar path and
 *    the chain of k_reduce / k_div calls;
 *  - mixed.c: the mixed-precision kernels (k_nonfinite,
 *    k_unscale_nonfinite, k_sgd_step_mixed) and the cpu backend's
 *    element-wise ops (k_relu, k_relu_backward, k_add) on every ISA, bit
 *    for bit against references and the scalar path, and their API edges;
 *  - reduce_exact.c: k_reduce_n_exact on every ISA, bit for bit against
 *    an exact (320-bit fixed-point) sum rounded once, on adversarial inputs;
 *  - kernels_test.c/.h: what they share (report, random stream, references).
 *
 * Results must be exact (a single rounded op per element is deterministic);
 * a NaN only passes where a NaN is expected. Every group prints one line
 * with its number of checks.
 *
 * The groups draw from one deterministic stream (tests/common/rand.h) in
 * the order below, so inputs are the same on every run.
 *
 * Build: linked against kernels_dep by meson, or by hand:
 *   gcc -std=gnu11 -O2 -Wall -Wextra -Ikernels/include -Itests/common \
 *       kernels/cpu/\*.c tests/kernels/cpu/\*.c -lm -o test_kernels
 * Exit status 0 = all passed, 1 = something failed.
 */
#include "kernels_test.h"

int main(void)
{
    printf("test_kernels: best isa %s, seed 0x%016llx\n", k_isa_name(k_isa_best()), (unsigned long long)rng.state);
    test_api();
    test_conversions();

    for (int i = 0; i < K_ISA_COUNT; i++) {
        k_isa_t isa = (k_isa_t)i;
        if (k_isa_set(isa) != 0) {
            printf("skip reduce %s: not supported by this CPU\n", k_isa_name(isa));
            continue;
        }
        test_reduce(isa);
        test_div_scale_isa(isa);
        test_sgd_isa(isa);
        test_reduce_n(isa);
    }
    k_isa_set(k_isa_best());

    test_cast_div_scale();
    test_reduce_n_api();

    /* Last, so the groups above draw the same inputs as before mixed.c. */
    for (int i = 0; i < K_ISA_COUNT; i++) {
        k_isa_t isa = (k_isa_t)i;
        if (k_isa_set(isa) != 0) {
            printf("skip mixed %s: not supported by this CPU\n", k_isa_name(isa));
            continue;
        }
        test_mixed_isa(isa);
    }
    k_isa_set(k_isa_best());
    test_mixed_api();
    test_reduce_exact(); /* its own generator; sets every ISA itself */

    printf("test_kernels: %s (%d groups, %d failed)\n", groups_failed ? "FAIL" : "PASS", groups_run, groups_failed);
    return groups_failed ? 1 : 0;
}
