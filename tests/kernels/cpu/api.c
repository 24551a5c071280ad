/*
 * api.c - the small parts of k_cpu.h: dtype sizes, ISA selection, and an
 * empty k_reduce that must not touch its (NULL) pointers.
 */
#include "kernels_test.h"

/* Exact results at the limits of the narrow integers and bool, written
 * out by hand (not computed by a reference), on every ISA path: k_reduce,
 * k_reduce_n (3 sources, divisor 1 and 2), k_div, k_scale, k_cast. */
static long narrow_expect(const char *what, k_isa_t isa, const void *got, const void *want, size_t bytes)
{
    if (memcmp(got, want, bytes) == 0) return 0;
    printf("  %s on %s: got", what, k_isa_name(isa));
    for (size_t i = 0; i < bytes; i++) printf(" %02x", ((const uint8_t *)got)[i]);
    printf(", want");
    for (size_t i = 0; i < bytes; i++) printf(" %02x", ((const uint8_t *)want)[i]);
    printf("\n");
    return 1;
}

static void test_narrow_limits(void)
{
    long checks = 0, failures = 0;
    const k_isa_t saved = k_isa_current();
#define NARROW_CHECK(what, got, want) (checks++, failures += narrow_expect(what, isa, got, want, sizeof(want)))
/* The four reductions of the block's a and b into d, against its tables sum, prod, min and max. */
#define NARROW_FOUR(dtype, tag)                                                                                       \
    (k_reduce(d, a, b, 8, dtype, K_OP_SUM), NARROW_CHECK(tag " sum", d, sum), k_reduce(d, a, b, 8, dtype, K_OP_PROD), \
     NARROW_CHECK(tag " prod", d, prod), k_reduce(d, a, b, 8, dtype, K_OP_MIN), NARROW_CHECK(tag " min", d, min),     \
     k_reduce(d, a, b, 8, dtype, K_OP_MAX), NARROW_CHECK(tag " max", d, max))
    for (int i = 0; i <= (int)k_isa_best(); i++) {
        const k_isa_t isa = (k_isa_t)i;
        k_isa_set(isa);
        {
            static const int8_t a[] = {127, -128, -128, 16, -128, 100, -1, 0};
            static const int8_t b[] = {1, -1, -128, 16, -1, 100, 1, -128};
            static const int8_t sum[] = {-128, 127, 0, 32, 127, -56, 0, -128};
            static const int8_t prod[] = {127, -128, 0, 0, -128, 16, -1, 0};
            static const int8_t min[] = {1, -128, -128, 16, -128, 100, -1, -128};
            static const int8_t max[] = {127, -1, -128, 16, -1, 100, 1, 0};
            int8_t d[8];
            NARROW_FOUR(K_DTYPE_I8, "i8");
            /* (a + b + b) / 2, truncating: 127+1+1 wraps to -127 -> -63 */
            static const int8_t avg3[] = {-63, 63, -64, 24, 63, 22, 0, 0};
            const void *srcs[3] = {a, b, b};
            k_reduce_n(d, srcs, 3, 8, K_DTYPE_I8, K_OP_SUM, 2), NARROW_CHECK("i8 reduce_n sum / 2", d, avg3);
            /* x 1.5, truncated toward zero, saturated: -1.5 -> -1 */
            static const int8_t scaled[] = {127, -128, -128, 24, -128, 127, -1, 0};
            k_scale(d, a, 8, K_DTYPE_I8, 1.5), NARROW_CHECK("i8 scale 1.5", d, scaled);
        }
        {
            static const int16_t a[] = {32767, -32768, 256, -32768, 181, 300, -1, 0};
            static const int16_t b[] = {1, -1, 256, -1, 181, -300, 1, -32768};
            static const int16_t sum[] = {-32768, 32767, 512, 32767, 362, 0, 0, -32768};
            static const int16_t prod[] = {32767, -32768, 0, -32768, 32761, -24464, -1, 0};
            static const int16_t min[] = {1, -32768, 256, -32768, 181, -300, -1, -32768};
            static const int16_t max[] = {32767, -1, 256, -1, 181, 300, 1, 0};
            int16_t d[8];
            NARROW_FOUR(K_DTYPE_I16, "i16");
            static const int16_t div3[] = {10922, -10922, 85, -10922, 60, 100, 0, 0};
            k_div(d, a, 8, K_DTYPE_I16, 3), NARROW_CHECK("i16 div 3", d, div3);
        }
        {
            static const uint16_t a[] = {65535, 65535, 256, 0, 65535, 40000, 1, 2};
            static const uint16_t b[] = {1, 65535, 256, 65535, 2, 40000, 0, 32768};
            static const uint16_t sum[] = {0, 65534, 512, 65535, 1, 14464, 1, 32770};
            static const uint16_t prod[] = {65535, 1, 0, 0, 65534, 4096, 0, 0};
            static const uint16_t min[] = {1, 65535, 256, 0, 2, 40000, 0, 2};
            static const uint16_t max[] = {65535, 65535, 256, 65535, 65535, 40000, 1, 32768};
            uint16_t d[8];
            NARROW_FOUR(K_DTYPE_U16, "u16");
            /* x 0.5, truncated toward zero: 32767.5 -> 32767, 0.5 -> 0 */
            static const uint16_t scaled[] = {32767, 32767, 128, 0, 32767, 20000, 0, 1};
            k_scale(d, a, 8, K_DTYPE_U16, 0.5), NARROW_CHECK("u16 scale 0.5", d, scaled);
        }
        {
            /* bool: any nonzero byte is true, outputs 0 or 1 */
            static const uint8_t a[] = {0, 0, 1, 1, 2, 0xFF, 0x80, 0};
            static const uint8_t b[] = {0, 1, 0, 1, 0, 0x10, 0x80, 0xFE};
            static const uint8_t any[] = {0, 1, 1, 1, 1, 1, 1, 1};
            static const uint8_t all[] = {0, 0, 0, 1, 0, 1, 1, 0};
            uint8_t d[8];
            k_reduce(d, a, b, 8, K_DTYPE_BOOL, K_OP_SUM), NARROW_CHECK("bool sum (or)", d, any);
            k_reduce(d, a, b, 8, K_DTYPE_BOOL, K_OP_MAX), NARROW_CHECK("bool max (or)", d, any);
            k_reduce(d, a, b, 8, K_DTYPE_BOOL, K_OP_MIN), NARROW_CHECK("bool min (and)", d, all);
            k_reduce(d, a, b, 8, K_DTYPE_BOOL, K_OP_PROD), NARROW_CHECK("bool prod (and)", d, all);
            static const uint8_t norm[] = {0, 0, 1, 1, 1, 1, 1, 0};
            const void *one[1] = {a};
            k_reduce_n(d, one, 1, 8, K_DTYPE_BOOL, K_OP_SUM, 1), NARROW_CHECK("bool reduce_n one source", d, norm);
            const void *three[3] = {a, b, a};
            k_reduce_n(d, three, 3, 8, K_DTYPE_BOOL, K_OP_MIN, 1), NARROW_CHECK("bool reduce_n min", d, all);
            k_cast(d, K_DTYPE_BOOL, a, K_DTYPE_BOOL, 8), NARROW_CHECK("bool -> bool cast", d, norm);
            static const float f[] = {0.0f, -0.0f, 0.5f, -2.0f, 1e-45f, NAN, INFINITY, 0.0f};
            static const uint8_t fb[] = {0, 0, 1, 1, 1, 1, 1, 0};
            k_cast(d, K_DTYPE_BOOL, f, K_DTYPE_F32, 8), NARROW_CHECK("f32 -> bool cast", d, fb);
            int32_t i32[8];
            static const int32_t bi[] = {0, 0, 1, 1, 1, 1, 1, 0};
            k_cast(i32, K_DTYPE_I32, a, K_DTYPE_BOOL, 8), NARROW_CHECK("bool -> i32 cast", i32, bi);
            static const uint8_t zero[8] = {0};
            k_div(d, a, 8, K_DTYPE_BOOL, 2), NARROW_CHECK("bool div 2", d, zero);
        }
        {
            /* casts saturate into the narrow types */
            static const int32_t v[] = {-129, 128, -32769, 32768, -1, 65536, 200, 65535};
            static const int8_t w8[] = {-128, 127, -128, 127, -1, 127, 127, 127};
            static const int16_t w16[] = {-129, 128, -32768, 32767, -1, 32767, 200, 32767};
            static const uint16_t wu16[] = {0, 128, 0, 32768, 0, 65535, 200, 65535};
            int8_t d8[8];
            int16_t d16[8];
            uint16_t du16[8];
            k_cast(d8, K_DTYPE_I8, v, K_DTYPE_I32, 8), NARROW_CHECK("i32 -> i8 cast", d8, w8);
            k_cast(d16, K_DTYPE_I16, v, K_DTYPE_I32, 8), NARROW_CHECK("i32 -> i16 cast", d16, w16);
            k_cast(du16, K_DTYPE_U16, v, K_DTYPE_I32, 8), NARROW_CHECK("i32 -> u16 cast", du16, wu16);
        }
    }
#undef NARROW_FOUR
#undef NARROW_CHECK
    k_isa_set(saved);
    report(checks, failures, "narrow integers and bool: limits, by hand");
}

void test_api(void)
{
    long checks = 0, failures = 0;
    static const size_t sizes[K_DTYPE_COUNT] = {4, 2, 2, 8, 4, 8, 1, 1, 2, 2, 1};
    for (int dt = 0; dt < K_DTYPE_COUNT; dt++, checks++) failures += k_dtype_size((k_dtype_t)dt) != sizes[dt];
    checks += 3;
    failures += k_isa_set(K_ISA_COUNT) != -1;
    failures += k_isa_current() > k_isa_best();
    failures += k_isa_best() < K_ISA_AVX2 && k_isa_set(K_ISA_AVX512) != -1;
    k_reduce(NULL, NULL, NULL, 0, K_DTYPE_F32, K_OP_SUM); /* count 0 touches nothing */
    report(checks, failures, "api: sizes, isa selection, empty reduce");
    test_narrow_limits();
}
