/*
 * api.c - the small parts of k_cpu.h: dtype sizes, ISA selection, and an
 * empty k_reduce that must not touch its (NULL) pointers.
 */
#include "kernels_test.h"

void test_api(void)
{
    long checks = 0, failures = 0;
    static const size_t sizes[K_DTYPE_COUNT] = {4, 2, 2, 8, 4, 8, 1};
    for (int dt = 0; dt < K_DTYPE_COUNT; dt++, checks++)
        failures += k_dtype_size((k_dtype_t)dt) != sizes[dt];
    checks += 3;
    failures += k_isa_set(K_ISA_COUNT) != -1;
    failures += k_isa_current() > k_isa_best();
    failures += k_isa_best() < K_ISA_AVX2 && k_isa_set(K_ISA_AVX512) != -1;
    k_reduce(NULL, NULL, NULL, 0, K_DTYPE_F32, K_OP_SUM); /* count 0 touches nothing */
    report("api: sizes, isa selection, empty reduce", checks, failures);
}
