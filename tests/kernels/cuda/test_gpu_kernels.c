/*
 * test_gpu_kernels.c - the CUDA kernels of kernels/cuda (k_cuda_* of
 * k_cuda.h) against their CPU twins (k_twin_*), bit for bit, on a GPU:
 *
 *  - k_cuda_reduce_n: every dtype x op, n = 1..8 (and 13, 64), counts
 *    0..70 and large ones (the vector body, its head and its tail),
 *    divisors 1 .. INT64_MAX, every buffer at its own offset: aligned
 *    alike modulo 16 (vectors), aligned to the element only (scalar
 *    path), and not even that (the bytewise path); in place (dst == a
 *    source), a source given twice, NaN / inf / subnormal inputs in half
 *    the cases;
 *  - k_cuda_scale (every dtype, factors with rounding ties, saturation,
 *    inf and NaN) and k_cuda_cast (all 121 pairs) the same way;
 *  - k_cuda_copy_batch against memcpy: batches of 0..40 copies, one of
 *    exactly the small parameter block's size, thousands (several
 *    launches), large copies at every relative alignment;
 *  - bad arguments: K_CUDA_ERR_INVALID_VALUE, nothing written; empty calls.
 *
 * Device outputs are filled with a NaN pattern (all ones) or a finite one
 * before each call and the twin's with the other, so an element the kernel
 * leaves unwritten cannot pass; guard bytes around every device output must
 * stay. Comparisons are on bits; a NaN equals any NaN only where k_cuda.h
 * leaves the payload open (SUM, PROD, division, scale, casts through f64).
 *
 * The cases' values, the random elements and the comparison come from
 * tests/kernels/cuda/twin_data.c, shared with test_twin.
 *
 *   test_gpu_kernels          exit 0 pass, 1 fail, 77 skip (no usable GPU)
 *   test_gpu_kernels bench    also prints the bandwidth of large calls
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "clock.h"
#include "cuda_ok.h"
#include "k_cpu.h"
#include "k_cuda.h"
#include "rand.h"
#include "twin_data.h"

#define N_MAX 8
#define SMALL_COUNT_MAX 70
#define SLOT_BYTES ((size_t)48 << 20) /* one device buffer (with guards and offset) */
#define SLOT_COUNT (64 + 2)           /* up to 64 sources, dst, spare */
#include "gpu_slots.h"

static const size_t large_counts[] = {1000, 4099, 65537, (1u << 20) + 3};
#define N_LARGE (sizeof(large_counts) / sizeof(large_counts[0]))

static test_rng_t rng;
static twin_report_t report = {"gpu", "twin", 30, 0}; /* the first 30 failures in detail */

/* ---- where buffers go ------------------------------------------------------------ */

/* Where a case puts its buffers, as byte offsets past the front guard:
 * all alike modulo 16 (the vector path), each a random multiple of the
 * element size (the scalar path where they differ), or odd ones (the
 * bytewise path; only for elements wider than a byte). */
enum { PLACE_ALIKE, PLACE_ELEMENT, PLACE_ODD, PLACE_COUNT };

static size_t place_offset(int place, size_t size, size_t alike)
{
    switch (place) {
    case PLACE_ALIKE: return alike;
    case PLACE_ELEMENT: return twin_random_offset(&rng, size);
    default: return test_rng_below(&rng, 16);
    }
}

static void sync_case(const char *what, int rc)
{
    CHECK(rc == 0, "%s: returned %d (%s)", what, rc, k_cuda_error_string(rc));
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        fprintf(stderr, "FAIL %s: cudaDeviceSynchronize: %s\n", what, cudaGetErrorString(e));
        exit(1); /* the context is gone */
    }
}

/* ---- k_cuda_reduce_n ---------------------------------------------------------------- */

enum { ALIAS_NONE, ALIAS_FIRST, ALIAS_LAST, ALIAS_REPEAT, ALIAS_COUNT };

static void reduce_case(k_dtype_t dtype, k_op_t op, int n, size_t count, int64_t divisor, int alias, int specials,
                        int place)
{
    const size_t size = k_dtype_size(dtype), bytes = count * size;
    const size_t alike = twin_random_offset(&rng, size);
    if (place == PLACE_ODD && size == 1) place = PLACE_ELEMENT;
    unsigned char *host[K_CUDA_MAX_SRCS];
    const void *dev_srcs[K_CUDA_MAX_SRCS], *twin_srcs[K_CUDA_MAX_SRCS];
    size_t offs[K_CUDA_MAX_SRCS];
    for (int j = 0; j < n; j++) {
        host[j] = xmalloc(bytes);
        if (alias == ALIAS_REPEAT && j == n - 1 && n > 1) {
            host[j] = memcpy(host[j], host[0], bytes);
            dev_srcs[j] = dev_srcs[0];
            offs[j] = offs[0];
        } else {
            for (size_t i = 0; i < count; i++) twin_random_element(&rng, dtype, specials, host[j] + i * size);
            offs[j] = place_offset(place, size, alike);
            dev_srcs[j] = slot_fill(j, offs[j], bytes, host[j], 0);
        }
        twin_srcs[j] = host[j];
    }
    const int swap = (int)(cases & 1);
    const int in_place = alias == ALIAS_FIRST ? 0 : alias == ALIAS_LAST ? n - 1 : -1;
    int dst_slot = K_CUDA_MAX_SRCS;
    size_t dst_off = place_offset(place, size, alike);
    void *dev_dst;
    unsigned char *twin_dst = xmalloc(bytes);
    if (in_place >= 0) {
        dst_slot = in_place, dst_off = offs[in_place];
        dev_dst = (void *)dev_srcs[in_place];
        memcpy(twin_dst, host[in_place], bytes);
        twin_srcs[in_place] = twin_dst;
    } else {
        dev_dst = slot_fill(dst_slot, dst_off, bytes, NULL, swap ? TWIN_POISON_NAN : TWIN_POISON_FINITE);
        memset(twin_dst, swap ? TWIN_POISON_FINITE : TWIN_POISON_NAN, bytes);
    }

    char what[192];
    snprintf(what, sizeof(what), "reduce_n %s %s n=%d count=%zu divisor=%lld alias=%d specials=%d place=%d",
             twin_dtype_name[dtype], twin_op_name[op], n, count, (long long)divisor, alias, specials, place);
    int rc = k_cuda_reduce_n(dev_dst, dev_srcs, n, count, dtype, op, divisor, case_stream());
    sync_case(what, rc);
    k_twin_reduce_n(twin_dst, twin_srcs, n, count, dtype, op, divisor);
    int guards;
    const unsigned char *got = slot_read(dst_slot, dst_off, bytes, &guards);
    const int loose = !(divisor == 1 && (n == 1 || op == K_OP_MIN || op == K_OP_MAX));
    long bad = twin_compare(&report, what, dtype, got, twin_dst, count, loose);
    CHECK(bad == 0, "%s: %ld elements differ", what, bad);
    CHECK(guards, "%s: a guard byte of dst changed", what);
    for (int j = 0; j < n; j++) {
        if (j == in_place || (alias == ALIAS_REPEAT && j == n - 1 && n > 1)) continue;
        got = slot_read(j, offs[j], bytes, &guards);
        CHECK(guards && memcmp(got, host[j], bytes) == 0, "%s: source %d or its guards changed", what, j);
    }
    for (int j = 0; j < n; j++) free(host[j]);
    free(twin_dst);
    cases++;
}

static void test_reduce_n(void)
{
    const int before = failures, checks_before = checks;
    long n_cases = 0;
    for (int d = 0; d < K_DTYPE_COUNT; d++)
        for (int o = 0; o < K_OP_COUNT; o++)
            for (int n = 1; n <= N_MAX; n++)
                for (size_t count = 0; count <= SMALL_COUNT_MAX + N_LARGE; count++) {
                    const int large = count > SMALL_COUNT_MAX;
                    if (large && n != 1 && n != 2 && n != 5 && n != N_MAX) continue;
                    size_t c = large ? large_counts[count - SMALL_COUNT_MAX - 1] : count;
                    reduce_case((k_dtype_t)d, (k_op_t)o, n, c, twin_divisors[n_cases % TWIN_DIVISOR_COUNT],
                                (int)(n_cases / 3 % ALIAS_COUNT), (int)(n_cases / 2 % 2),
                                (int)(n_cases / 5 % PLACE_COUNT));
                    n_cases++;
                }
    /* Many sources: the four-at-a-time loop with a remainder, and the most. */
    for (int d = 0; d < K_DTYPE_COUNT; d++)
        for (int o = 0; o < K_OP_COUNT; o++)
            for (int k = 0; k < 2; k++) {
                reduce_case((k_dtype_t)d, (k_op_t)o, k ? K_CUDA_MAX_SRCS : 13, k ? 4099 : 70001,
                            twin_divisors[n_cases % TWIN_DIVISOR_COUNT], ALIAS_NONE, 0, PLACE_ALIKE);
                n_cases++;
            }
    printf("%s reduce_n: %ld cases, %d checks\n", failures == before ? "ok  " : "FAIL", n_cases,
           checks - checks_before);
}

/* ---- k_cuda_scale ------------------------------------------------------------------- */

static void scale_case(k_dtype_t dtype, double factor, size_t count, int place, int in_place, int specials)
{
    const size_t size = k_dtype_size(dtype), bytes = count * size;
    const size_t alike = twin_random_offset(&rng, size);
    if (place == PLACE_ODD && size == 1) place = PLACE_ELEMENT;
    unsigned char *in = xmalloc(bytes), *twin = xmalloc(bytes);
    for (size_t i = 0; i < count; i++) twin_random_element(&rng, dtype, specials, in + i * size);
    const size_t src_off = place_offset(place, size, alike);
    size_t dst_off = place_offset(place, size, alike);
    int dst_slot = 1;
    unsigned char *src = slot_fill(0, src_off, bytes, in, 0), *dst;
    if (in_place) {
        dst = src, dst_slot = 0, dst_off = src_off;
    } else {
        dst = slot_fill(1, dst_off, bytes, NULL, cases & 1 ? TWIN_POISON_NAN : TWIN_POISON_FINITE);
        memset(twin, cases & 1 ? TWIN_POISON_FINITE : TWIN_POISON_NAN, bytes);
    }
    char what[128];
    snprintf(what, sizeof(what), "scale %s factor=%g count=%zu place=%d in_place=%d", twin_dtype_name[dtype], factor,
             count, place, in_place);
    sync_case(what, k_cuda_scale(dst, src, count, dtype, factor, case_stream()));
    k_twin_scale(twin, in, count, dtype, factor);
    int guards;
    const unsigned char *got = slot_read(dst_slot, dst_off, bytes, &guards);
    long bad = twin_compare(&report, what, dtype, got, twin, count, 1);
    CHECK(bad == 0, "%s: %ld elements differ", what, bad);
    CHECK(guards, "%s: a guard byte changed", what);
    free(in);
    free(twin);
    cases++;
}

static void test_scale(void)
{
    const int before = failures, checks_before = checks;
    long n_cases = 0;
    for (int d = 0; d < K_DTYPE_COUNT; d++)
        for (size_t f = 0; f < TWIN_FACTOR_COUNT; f++)
            for (size_t count = 0; count <= SMALL_COUNT_MAX + N_LARGE; count++) {
                if (count <= SMALL_COUNT_MAX && count % 3 != f % 3) continue;
                size_t c = count <= SMALL_COUNT_MAX ? count : large_counts[count - SMALL_COUNT_MAX - 1];
                scale_case((k_dtype_t)d, twin_factors[f], c, (int)(n_cases % PLACE_COUNT), n_cases % 4 == 3,
                           (int)(n_cases / 2 % 2));
                n_cases++;
            }
    printf("%s scale: %ld cases, %d checks\n", failures == before ? "ok  " : "FAIL", n_cases, checks - checks_before);
}

/* ---- k_cuda_cast -------------------------------------------------------------------- */

/* twin_data.h's inputs that need care in a cast, written over every third
 * random element (two draws each, whatever the dtype). */
static void plant_cast_specials(k_dtype_t dtype, unsigned char *p, size_t count)
{
    const size_t size = k_dtype_size(dtype);
    for (size_t i = 0; i < count; i += 3) {
        unsigned char *e = p + i * size;
        double v = twin_cast_f64s[test_rng_below(&rng, TWIN_CAST_F64_COUNT)];
        int64_t w = twin_cast_i64s[test_rng_below(&rng, TWIN_CAST_I64_COUNT)];
        float f = (float)v;
        int32_t x = (int32_t)(uint32_t)w;
        if (dtype == K_DTYPE_F64)
            memcpy(e, &v, 8);
        else if (dtype == K_DTYPE_F32)
            memcpy(e, &f, 4);
        else if (dtype == K_DTYPE_I64)
            memcpy(e, &w, 8);
        else if (dtype == K_DTYPE_I32)
            memcpy(e, &x, 4);
    }
}

static void cast_case(k_dtype_t sd, k_dtype_t dd, size_t count, int place)
{
    const size_t ss = k_dtype_size(sd), ds = k_dtype_size(dd);
    const size_t wide = ss > ds ? ss : ds;
    if (place == PLACE_ODD && ss == 1 && ds == 1) place = PLACE_ELEMENT;
    /* Alike: the same element index at a vector boundary on both sides. */
    const size_t head = test_rng_below(&rng, (uint32_t)(16 / wide));
    const size_t vec = 16 / wide;
    const size_t src_off = place == PLACE_ALIKE ? (vec - head) % vec * ss : place_offset(place, ss, 0);
    const size_t dst_off = place == PLACE_ALIKE ? (vec - head) % vec * ds : place_offset(place, ds, 0);
    unsigned char *in = xmalloc(count * ss), *twin = xmalloc(count * ds);
    for (size_t i = 0; i < count; i++) twin_random_element(&rng, sd, (int)(cases % 2), in + i * ss);
    plant_cast_specials(sd, in, count);
    unsigned char *src = slot_fill(0, src_off, count * ss, in, 0);
    unsigned char *dst = slot_fill(1, dst_off, count * ds, NULL, cases & 1 ? TWIN_POISON_NAN : TWIN_POISON_FINITE);
    memset(twin, cases & 1 ? TWIN_POISON_FINITE : TWIN_POISON_NAN, count * ds);
    char what[128];
    snprintf(what, sizeof(what), "cast %s -> %s count=%zu place=%d", twin_dtype_name[sd], twin_dtype_name[dd], count,
             place);
    sync_case(what, k_cuda_cast(dst, dd, src, sd, count, case_stream()));
    k_twin_cast(twin, dd, in, sd, count);
    int guards;
    const unsigned char *got = slot_read(1, dst_off, count * ds, &guards);
    const int narrow = sd != K_DTYPE_F64 && dd != K_DTYPE_F64;
    const int loose = !(sd == dd || (twin_is_float(sd) && twin_is_float(dd) && narrow));
    long bad = twin_compare(&report, what, dd, got, twin, count, loose);
    CHECK(bad == 0, "%s: %ld elements differ", what, bad);
    CHECK(guards, "%s: a guard byte changed", what);
    free(in);
    free(twin);
    cases++;
}

static void test_cast(void)
{
    const int before = failures, checks_before = checks;
    long n_cases = 0;
    for (int sd = 0; sd < K_DTYPE_COUNT; sd++)
        for (int dd = 0; dd < K_DTYPE_COUNT; dd++)
            for (size_t count = 0; count <= SMALL_COUNT_MAX + N_LARGE; count++) {
                size_t c = count <= SMALL_COUNT_MAX ? count : large_counts[count - SMALL_COUNT_MAX - 1];
                cast_case((k_dtype_t)sd, (k_dtype_t)dd, c, (int)(n_cases % PLACE_COUNT));
                n_cases++;
            }
    printf("%s cast: %ld cases (all 121 pairs), %d checks\n", failures == before ? "ok  " : "FAIL", n_cases,
           checks - checks_before);
}

/* ---- k_cuda_copy_batch --------------------------------------------------------------- */

/* n copies into disjoint places of slot 1's arena from anywhere in slot 0;
 * the whole arena (everything between the copies included) must equal what
 * memcpy makes of it on the host. big: one copy in 4 is up to 3 MB. */
static void copy_case(int n, size_t max_bytes, int big)
{
    const size_t big_bytes = (size_t)3 << 20;
    size_t arena = 0;
    k_cuda_copy_t *copies = xmalloc(sizeof(*copies) * (size_t)(n ? n : 1));
    size_t *dst_off = xmalloc(sizeof(size_t) * (size_t)(n ? n : 1));
    size_t *src_off = xmalloc(sizeof(size_t) * (size_t)(n ? n : 1));
    size_t src_arena = (size_t)(n ? n : 1) * (big ? big_bytes : max_bytes) + 65536;
    if (src_arena > SLOT_BYTES - 2 * GUARD) src_arena = SLOT_BYTES - 2 * GUARD;
    for (int i = 0; i < n; i++) {
        size_t cap = big && i % 4 == 0 ? big_bytes : max_bytes;
        size_t bytes = test_rng_below(&rng, 10) == 0 ? 0 : test_rng_below(&rng, (uint32_t)cap + 1);
        dst_off[i] = arena + test_rng_below(&rng, 16);
        arena = dst_off[i] + bytes + test_rng_below(&rng, 3);
        src_off[i] = test_rng_below(&rng, (uint32_t)(src_arena - bytes));
        copies[i].bytes = bytes;
    }
    arena += 1;
    unsigned char *src_host = xmalloc(src_arena), *want = xmalloc(arena);
    for (size_t i = 0; i < src_arena; i += 8) {
        uint64_t r = test_rng_u64(&rng);
        memcpy(src_host + i, &r, src_arena - i < 8 ? src_arena - i : 8);
    }
    unsigned char *src = slot_fill(0, 0, src_arena, src_host, 0);
    unsigned char *dst = slot_fill(1, 0, arena, NULL, TWIN_POISON_FINITE);
    memset(want, TWIN_POISON_FINITE, arena);
    for (int i = 0; i < n; i++) {
        copies[i].dst = dst + dst_off[i];
        copies[i].src = src + src_off[i];
        memcpy(want + dst_off[i], src_host + src_off[i], copies[i].bytes);
    }
    char what[96];
    snprintf(what, sizeof(what), "copy_batch n=%d max_bytes=%zu big=%d", n, max_bytes, big);
    sync_case(what, k_cuda_copy_batch(copies, n, case_stream()));
    int guards;
    const unsigned char *got = slot_read(1, 0, arena, &guards);
    size_t first = arena;
    for (size_t i = 0; i < arena; i++)
        if (got[i] != want[i]) {
            first = i;
            break;
        }
    CHECK(first == arena, "%s: the destination arena differs first at byte %zu of %zu", what, first, arena);
    CHECK(guards, "%s: a guard byte changed", what);
    free(copies);
    free(dst_off);
    free(src_off);
    free(src_host);
    free(want);
    cases++;
}

static void test_copy_batch(void)
{
    const int before = failures, checks_before = checks;
    for (int n = 0; n <= 40; n++) copy_case(n, 300, 0);
    copy_case(128, 1000, 0); /* the small parameter block, full */
    copy_case(129, 1000, 0); /* the large one */
    copy_case(3000, 200, 0); /* three launches */
    copy_case(1024, 64, 0);  /* one full large launch */
    copy_case(12, 0, 1);     /* only big copies and empty ones */
    for (int r = 0; r < 4; r++) copy_case(20, 20000, 1);
    printf("%s copy_batch: %d checks\n", failures == before ? "ok  " : "FAIL", checks - checks_before);
}

/* ---- bad arguments, empty calls ------------------------------------------------------- */

static void test_api(void)
{
    const int before = failures;
    const int bad = K_CUDA_ERR_INVALID_VALUE;
    unsigned char *a = slot_fill(0, 0, 64, NULL, 1), *b = slot_fill(1, 0, 64, NULL, 0x77);
    const void *srcs[K_CUDA_MAX_SRCS + 1];
    for (int j = 0; j <= K_CUDA_MAX_SRCS; j++) srcs[j] = a;
    CHECK(k_cuda_reduce_n(b, srcs, 0, 4, K_DTYPE_F32, K_OP_SUM, 1, NULL) == bad, "reduce_n n=0");
    CHECK(k_cuda_reduce_n(b, srcs, K_CUDA_MAX_SRCS + 1, 4, K_DTYPE_F32, K_OP_SUM, 1, NULL) == bad, "reduce_n n=65");
    CHECK(k_cuda_reduce_n(b, srcs, 2, 4, K_DTYPE_F32, K_OP_SUM, 0, NULL) == bad, "reduce_n divisor 0");
    CHECK(k_cuda_reduce_n(b, srcs, 2, 4, K_DTYPE_COUNT, K_OP_SUM, 1, NULL) == bad, "reduce_n bad dtype");
    CHECK(k_cuda_reduce_n(b, srcs, 2, 4, K_DTYPE_F32, K_OP_COUNT, 1, NULL) == bad, "reduce_n bad op");
    CHECK(k_cuda_reduce_n(b, NULL, 2, 4, K_DTYPE_F32, K_OP_SUM, 1, NULL) == bad, "reduce_n srcs NULL");
    CHECK(k_cuda_scale(b, a, 4, K_DTYPE_COUNT, 2.0, NULL) == bad, "scale bad dtype");
    CHECK(k_cuda_cast(b, K_DTYPE_COUNT, a, K_DTYPE_F32, 4, NULL) == bad, "cast bad dtype");
    CHECK(k_cuda_copy_batch(NULL, 1, NULL) == bad, "copy_batch copies NULL");
    CHECK(k_cuda_copy_batch(NULL, -1, NULL) == bad, "copy_batch n < 0");
    CHECK(k_cuda_reduce_n(NULL, NULL, 3, 0, K_DTYPE_F16, K_OP_MAX, 3, NULL) == 0, "reduce_n count 0");
    CHECK(k_cuda_scale(NULL, NULL, 0, K_DTYPE_I64, 2.0, NULL) == 0, "scale count 0");
    CHECK(k_cuda_cast(NULL, K_DTYPE_F16, NULL, K_DTYPE_I64, 0, NULL) == 0, "cast count 0");
    CHECK(k_cuda_copy_batch(NULL, 0, NULL) == 0, "copy_batch n 0");
    CHECK(strcmp(k_cuda_error_string(0), cudaGetErrorString(cudaSuccess)) == 0, "k_cuda_error_string(0)");
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "synchronize after the refused calls");
    int guards;
    const unsigned char *got = slot_read(1, 0, 64, &guards);
    int untouched = guards;
    for (int i = 0; i < 64; i++) untouched &= got[i] == 0x77;
    CHECK(untouched, "a refused call wrote its output");
    printf("%s api: bad arguments refused, empty calls accepted\n", failures == before ? "ok  " : "FAIL");
}

/* ---- bandwidth (bench mode; printed, not checked) ------------------------------------- */

static void bench(void)
{
    const size_t bytes = (size_t)32 << 20; /* per buffer, fits a slot */
    const void *srcs[N_MAX];
    for (int j = 0; j < N_MAX; j++) srcs[j] = slot_fill(j, 0, bytes, NULL, 0);
    void *dst = slot_fill(K_CUDA_MAX_SRCS, 0, bytes, NULL, 0);
    const k_dtype_t dtypes[] = {K_DTYPE_F32, K_DTYPE_F16, K_DTYPE_BF16};
    for (size_t d = 0; d < 3; d++)
        for (int n = 2; n <= N_MAX; n *= 2) {
            size_t count = bytes / k_dtype_size(dtypes[d]);
            CUDA_OK((cudaError_t)k_cuda_reduce_n(dst, srcs, n, count, dtypes[d], K_OP_SUM, n, stream));
            CUDA_OK(cudaStreamSynchronize(stream));
            const int reps = 20;
            double t0 = test_now_s();
            for (int r = 0; r < reps; r++) k_cuda_reduce_n(dst, srcs, n, count, dtypes[d], K_OP_SUM, n, stream);
            CUDA_OK(cudaStreamSynchronize(stream));
            double t = (test_now_s() - t0) / reps;
            printf("bench reduce_n %s n=%d avg: %.1f us, %.0f GB/s (n + 1 buffers of %zu MiB)\n",
                   twin_dtype_name[dtypes[d]], n, t * 1e6, (double)(n + 1) * (double)bytes / t * 1e-9, bytes >> 20);
        }
    for (int k = 0; k < 2; k++) {
        /* k = 0: 2048 copies of 16 KiB; 1: 16 copies of 2 MiB */
        const int n = k ? 16 : 2048;
        const size_t each = bytes / (size_t)n;
        k_cuda_copy_t *copies = xmalloc(sizeof(*copies) * (size_t)n);
        for (int i = 0; i < n; i++) {
            copies[i].dst = (unsigned char *)dst + (size_t)i * each;
            copies[i].src = (const unsigned char *)srcs[0] + (size_t)i * each;
            copies[i].bytes = each;
        }
        CUDA_OK((cudaError_t)k_cuda_copy_batch(copies, n, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        const int reps = 20;
        double t0 = test_now_s();
        for (int r = 0; r < reps; r++) k_cuda_copy_batch(copies, n, stream);
        CUDA_OK(cudaStreamSynchronize(stream));
        double t = (test_now_s() - t0) / reps;
        printf("bench copy_batch %d x %zu KiB: %.1f us, %.0f GB/s (read + write)\n", n, each >> 10, t * 1e6,
               2.0 * (double)bytes / t * 1e-9);
        free(copies);
    }
    {
        double t0 = test_now_s();
        for (int r = 0; r < 20; r++) CUDA_OK(cudaMemcpyAsync(dst, srcs[0], bytes, cudaMemcpyDeviceToDevice, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        double t = (test_now_s() - t0) / 20;
        printf("bench cudaMemcpyAsync %zu MiB: %.1f us, %.0f GB/s (read + write)\n", bytes >> 20, t * 1e6,
               2.0 * (double)bytes / t * 1e-9);
    }
}

int main(int argc, char **argv)
{
    slots_open("test_gpu_kernels");
    rng = test_rng_seeded(TEST_RNG_SEED);

    test_api();
    test_copy_batch();
    test_reduce_n();
    test_scale();
    test_cast();
    if (argc > 1 && strcmp(argv[1], "bench") == 0) bench();

    slots_close();
    printf("test_gpu_kernels: %d checks, %d failures -> %s\n", checks, failures, failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
