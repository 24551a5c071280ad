/*
 * test_twin_layout.c - the CPU twins of k_cuda_layout.h against a plain
 * reference: every dtype pair of f32/f16/bf16, random raw bits (NaNs and
 * infinities included), shapes with c < c_stored (the stem's 3 -> 8
 * padding) and c = c_stored, one sample up to several; the reference
 * transposes with loops written from the header's formulas and converts
 * with kernels/cpu's k_cast, so the twins' conversion is k_cast's, bit for
 * bit (equal dtypes: the same bits). The destination is poisoned first;
 * the padding must come out zero and the round trip back to channels-first
 * must give the source again where the dtypes are equal.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "k_cpu.h"
#include "k_cuda_layout.h"
#include "rand.h"

static const k_dtype_t dtypes[] = {K_DTYPE_F32, K_DTYPE_F16, K_DTYPE_BF16};
static const char *const dtype_names[] = {"f32", "f16", "bf16"};

/* Element i of a raw array of size-byte elements, and its k_cast. */
static uint64_t raw_at(const unsigned char *p, size_t size, size_t i)
{
    uint64_t raw = 0;
    memcpy(&raw, p + i * size, size);
    return raw;
}

static uint64_t cast_one(uint64_t raw, k_dtype_t from, k_dtype_t to)
{
    uint64_t out = 0;
    if (from == to) return raw;
    k_cast(&out, to, &raw, from, 1);
    return out;
}

static void check_case(test_rng_t *rng, size_t n, size_t c, size_t cs, size_t hw, int si, int di)
{
    const k_dtype_t sd = dtypes[si], dd = dtypes[di];
    const size_t ss = k_dtype_size(sd), ds = k_dtype_size(dd);
    const size_t first = n * c * hw, last = n * hw * cs;
    unsigned char *src = malloc(first * ss), *cl = malloc(last * ds), *back = malloc(first * ds);
    for (size_t i = 0; i < first * ss; i++) src[i] = (unsigned char)test_rng_u64(rng);
    memset(cl, 0xA5, last * ds);
    memset(back, 0x5A, first * ds);
    CHECK(k_twin_to_channels_last(cl, dd, src, sd, n, c, cs, hw) == 0, "to_channels_last returned an error");
    size_t bad = 0;
    for (size_t s = 0; s < n; s++)
        for (size_t i = 0; i < hw; i++)
            for (size_t k = 0; k < cs; k++) {
                const size_t j = (s * hw + i) * cs + k;
                const uint64_t want = k < c ? cast_one(raw_at(src, ss, (s * c + k) * hw + i), sd, dd) : 0;
                bad += raw_at(cl, ds, j) != want;
            }
    CHECK(bad == 0, "to_channels_last %s -> %s n %zu c %zu/%zu hw %zu: %zu of %zu elements wrong", dtype_names[si],
          dtype_names[di], n, c, cs, hw, bad, last);
    /* And back, from what the channels-last side holds. */
    CHECK(k_twin_from_channels_last(back, dd, cl, dd, n, c, cs, hw) == 0, "from_channels_last returned an error");
    bad = 0;
    for (size_t s = 0; s < n; s++)
        for (size_t k = 0; k < c; k++)
            for (size_t i = 0; i < hw; i++)
                bad += raw_at(back, ds, (s * c + k) * hw + i) != raw_at(cl, ds, (s * hw + i) * cs + k);
    CHECK(bad == 0, "from_channels_last %s n %zu c %zu/%zu hw %zu: %zu of %zu elements wrong", dtype_names[di], n, c,
          cs, hw, bad, first);
    if (si == di)
        CHECK(memcmp(back, src, first * ss) == 0, "%s round trip n %zu c %zu/%zu hw %zu changed the bits",
              dtype_names[si], n, c, cs, hw);
    free(src);
    free(cl);
    free(back);
}

int main(void)
{
    test_rng_t rng = test_rng_seeded(TEST_RNG_SEED);
    static const size_t shapes[][4] = {
        {1, 1, 1, 1}, {2, 3, 8, 49}, {4, 3, 8, 5}, {3, 16, 16, 9}, {2, 64, 64, 1}, {5, 7, 7, 13}, {1, 1, 8, 3},
    };
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int si = 0; si < 3; si++)
            for (int di = 0; di < 3; di++)
                check_case(&rng, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], si, di);
    /* Refusals. */
    float a[8], b[8];
    CHECK(k_twin_to_channels_last(b, K_DTYPE_F32, a, K_DTYPE_F32, 1, 9, 8, 1) == K_CUDA_ERR_INVALID_VALUE,
          "c > c_stored accepted");
    CHECK(k_twin_from_channels_last(b, K_DTYPE_I32, a, K_DTYPE_F32, 1, 2, 2, 2) == K_CUDA_ERR_INVALID_VALUE,
          "an i32 destination accepted");
    printf("test_twin_layout: %d checks, %d failures -> %s\n", checks, failures, failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
