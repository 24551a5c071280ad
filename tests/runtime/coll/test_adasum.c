/*
 * test_adasum.c - op HORA_OP_ADASUM under mpirun (runtime/coll/adasum.c):
 * hora_allreduce (in place and out of place), hora_allreduce_async (several
 * in flight, which must not fuse), hora_grouped_allreduce_async and
 * prescale/postscale, for f32, f64, f16 and bf16 and counts from 0 to an
 * odd 65537.
 *
 * Inputs are a function of (rank, index, case). The reference is computed
 * here in fp64 from the inputs as the dtype holds them: the binary tree of
 * pairwise combinations in rank order, (1 - a.b/(2|a|^2)) a + (1 - a.b/(2|b|^2)) b.
 * Checked:
 *  - every rank's result has the same bits as rank 0's (each element is
 *    computed by one rank and moved);
 *  - orthogonal inputs (rank r's vector is nonzero only where i % n == r)
 *    give the sum and identical inputs give the mean: exactly, since every
 *    coefficient is then exactly 1 or 1/2;
 *  - other inputs are within a bound of the reference, which the test
 *    carries through the tree beside it. Each level's combination
 *    c_L a_i + c_R b_i is rounded once in the working type (fp32 for
 *    f32/f16/bf16, fp64 for f64; unit roundoff u), an error of at most
 *    u (|c_L a_i| + |c_R b_i|) (and the reference's own fp64 rounding, as
 *    much with u = 2^-53); an error already in a_i or b_i is multiplied by
 *    |c_L| or |c_R|; and the coefficients differ by the error of the dot
 *    product and norm: both sides sum count products in fp64 in different
 *    orders, each sum within g = (count + 1) 2^-53 of the products' absolute
 *    sum, so |dc_L| <= 2 g |b| / |a| (Cauchy-Schwarz), times |a_i|. For
 *    f16/bf16 the fp32 result is rounded once more: one ulp of the dtype.
 * With a world size that is not a power of two every call must fail on
 * every rank, at once, with HORA_ERR_UNSUPPORTED and a message that says
 * why (no hang). Also refused: integer dtypes, a reduce-scatter, a process
 * set; ranks passing different counts all get HORA_ERR_MISMATCH, and the
 * next call works.
 * Run: mpirun -np N test_adasum   (exit 0 = all passed)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "floats.h"
#include "hora.h"

static int rank, size;

/* Element i of rank r's input in case c (0 general, 1 orthogonal, 2 identical). */
static double input(int c, int r, size_t i)
{
    if (c == 1) return (int)(i % (size_t)size) == r ? 1.0 + (double)((i * 5) % 7) * 0.25 : 0.0;
    if (c == 2) return ((double)((i * 11) % 13) - 6.0) * 0.125;
    return ((double)((i * 7 + (size_t)r * 13) % 17) - 8.0) * 0.0625 + (double)((r + 1) * ((i % 3) + 1)) * 0.03125;
}

static size_t dtype_bytes(hora_dtype_t d) { return hora_dtype_size(d); }

static double get(const void *p, hora_dtype_t d, size_t i)
{
    if (d == HORA_DTYPE_F64) return ((const double *)p)[i];
    return test_float_get(p, (k_dtype_t)d, i);
}

static void put(void *p, hora_dtype_t d, size_t i, double v)
{
    if (d == HORA_DTYPE_F64)
        ((double *)p)[i] = v;
    else
        test_float_put(p, (k_dtype_t)d, i, v);
}

/* Rank r's input as the dtype holds it, scaled, into buf. */
static void fill(void *buf, hora_dtype_t d, int c, int r, size_t count, double scale)
{
    for (size_t i = 0; i < count; i++) put(buf, d, i, input(c, r, i) * scale);
}

/* The fp64 reference tree over every rank's input (as held in d), and a
 * bound on the distance between it and what the runtime computes in the
 * working type (unit roundoff u; the file's header explains it). */
static void reference(hora_dtype_t d, int c, size_t count, double u, double *ref, double *err)
{
    const size_t all = (size_t)size * count + 1;
    double *v = calloc(all, sizeof(double)), *e = calloc(all, sizeof(double));
    void *held = malloc(count * 8 + 8);
    /* Both sides sum count products in fp64, in different orders. */
    const double g = 2.0 * (double)(count + 1) * ldexp(1, -53);
    for (int r = 0; r < size; r++) {
        fill(held, d, c, r, count, 1.0);
        for (size_t i = 0; i < count; i++) v[(size_t)r * count + i] = get(held, d, i);
    }
    for (int step = 1; step < size; step *= 2)
        for (int r = 0; r < size; r += 2 * step) {
            double *L = v + (size_t)r * count, *R = v + (size_t)(r + step) * count;
            double *EL = e + (size_t)r * count, *ER = e + (size_t)(r + step) * count;
            double dot = 0, ll = 0, rr = 0;
            for (size_t i = 0; i < count; i++) dot += L[i] * R[i], ll += L[i] * L[i], rr += R[i] * R[i];
            const double tiny = sqrt(2.2250738585072014e-308);
            const double cl = ll >= tiny ? 1 - dot / (2 * ll) : 1, cr = rr >= tiny ? 1 - dot / (2 * rr) : 1;
            /* |dc| <= g |L||R| / |L|^2 for the dot's error, as much for the norm's. */
            const double dcl = ll >= tiny && rr > 0 ? 2 * g * sqrt(rr / ll) : 0;
            const double dcr = rr >= tiny && ll > 0 ? 2 * g * sqrt(ll / rr) : 0;
            for (size_t i = 0; i < count; i++) {
                const double mag = fabs(cl * L[i]) + fabs(cr * R[i]);
                EL[i] = fabs(cl) * EL[i] + fabs(cr) * ER[i] + 2 * (dcl * fabs(L[i]) + dcr * fabs(R[i])) +
                        (u + ldexp(1, -52)) * mag;
                L[i] = cl * L[i] + cr * R[i];
            }
        }
    memcpy(ref, v, count * sizeof(double));
    memcpy(err, e, count * sizeof(double));
    free(v);
    free(e);
    free(held);
}

/* got (count elements of d, already scaled by scale) against the reference
 * (scaled alike) and against rank 0's bits. */
static void check_result(const char *what, const void *got, hora_dtype_t d, int c, size_t count, double scale)
{
    double *ref = malloc(count * sizeof(double) + 8), *err = malloc(count * sizeof(double) + 8);
    const size_t bytes = count * dtype_bytes(d);
    void *zero = malloc(bytes + 8);
    int bad = 0;
    reference(d, c, count, d == HORA_DTYPE_F64 ? ldexp(1, -53) : ldexp(1, -24), ref, err);
    for (size_t i = 0; i < count && bad < 3; i++) {
        const double want = ref[i] * scale, g = get(got, d, i);
        double bound = err[i] * fabs(scale) * 1.01;
        if (d == HORA_DTYPE_F16 || d == HORA_DTYPE_BF16) bound += test_float_ulp((k_dtype_t)d, want);
        if (c != 0 && scale == 1.0) bound = 0; /* orthogonal: the sum; identical: the mean; exactly */
        if (!(fabs(g - want) <= bound)) {
            bad++;
            CHECK(0, "%s %s case %d count %zu: element %zu is %.17g, want %.17g (bound %.3g)", what, hora_dtype_name(d),
                  c, count, i, g, want, bound);
        }
    }
    checks++;
    /* Same bits on every rank. */
    memcpy(zero, got, bytes);
    hora_status_t st = hora_broadcast(zero, count, d, 0);
    CHECK(st == HORA_OK, "broadcast: %s", hora_last_error());
    CHECK(memcmp(zero, got, bytes) == 0, "%s %s case %d count %zu: rank %d's bits differ from rank 0's", what,
          hora_dtype_name(d), c, count, rank);
    free(ref);
    free(err);
    free(zero);
}

static void run_direct(hora_dtype_t d, int c, size_t count)
{
    const size_t bytes = count * dtype_bytes(d) + 8;
    void *send = malloc(bytes), *recv = malloc(bytes);
    fill(send, d, c, rank, count, 1.0);
    hora_status_t st = hora_allreduce(send, recv, count, d, HORA_OP_ADASUM);
    CHECK(st == HORA_OK, "hora_allreduce(adasum, %s, %zu): %s", hora_dtype_name(d), count, hora_last_error());
    if (st == HORA_OK) check_result("out of place", recv, d, c, count, 1.0);
    st = hora_allreduce(send, send, count, d, HORA_OP_ADASUM);
    CHECK(st == HORA_OK, "hora_allreduce(adasum, %s, %zu, in place): %s", hora_dtype_name(d), count, hora_last_error());
    if (st == HORA_OK) CHECK(memcmp(send, recv, count * dtype_bytes(d)) == 0, "in place differs from out of place");
    free(send);
    free(recv);
}

/* Three requests in flight at once (fusable sizes: they must not fuse), one
 * scaled, and a group of two. */
static void run_async(hora_dtype_t d, size_t count)
{
    enum { N = 5 };
    void *buf[N];
    hora_request_t req[N];
    char names[N][64];
    const char *gnames[2];
    const double scales[N] = {1.0, 1.0, 0.25, 1.0, 1.0};
    for (int t = 0; t < N; t++) {
        buf[t] = malloc(count * dtype_bytes(d) + 8);
        fill(buf[t], d, t % 3, rank, count, 1.0);
        snprintf(names[t], sizeof(names[t]), "adasum.%s.%zu.%d", hora_dtype_name(d), count, t);
    }
    hora_opts_t scaled = HORA_OPTS_INIT;
    scaled.prescale = 0.5;
    scaled.postscale = 0.5;
    for (int t = 0; t < 3; t++) {
        hora_status_t st =
            hora_allreduce_async(names[t], buf[t], buf[t], count, d, HORA_OP_ADASUM, t == 2 ? &scaled : NULL, &req[t]);
        CHECK(st == HORA_OK, "hora_allreduce_async(%s): %s", names[t], hora_last_error());
    }
    gnames[0] = names[3], gnames[1] = names[4];
    size_t counts[2] = {count, count};
    hora_status_t st = hora_grouped_allreduce_async(2, gnames, (const void *const *)&buf[3], &buf[3], counts, d,
                                                    HORA_OP_ADASUM, NULL, &req[3]);
    CHECK(st == HORA_OK, "hora_grouped_allreduce_async(adasum): %s", hora_last_error());
    for (int t = 0; t < N; t++) {
        st = hora_wait(req[t]);
        CHECK(st == HORA_OK, "hora_wait(%s): %s", names[t], hora_last_error());
        hora_request_free(req[t]);
        if (st == HORA_OK) check_result(t >= 3 ? "grouped" : "async", buf[t], d, t % 3, count, scales[t]);
        free(buf[t]);
    }
}

static void run_refusals(void)
{
    int32_t ints[4] = {1, 2, 3, 4};
    float f[4] = {1, 2, 3, 4};
    hora_request_t req;
    hora_status_t st = hora_allreduce(ints, ints, 4, HORA_DTYPE_I32, HORA_OP_ADASUM);
    CHECK(st == HORA_ERR_INVALID_ARG && strstr(hora_last_error(), "adasum"), "i32: %s %s", hora_status_string(st),
          hora_last_error());
    st = hora_reduce_scatter(f, f + 2, 2, HORA_DTYPE_F32, HORA_OP_ADASUM);
    CHECK(st == HORA_ERR_INVALID_ARG, "reduce_scatter(adasum): %s", hora_status_string(st));
    st = hora_reducescatter_async("adasum.rs", f, f, 4, HORA_DTYPE_F32, HORA_OP_ADASUM, NULL, &req);
    CHECK(st == HORA_ERR_INVALID_ARG, "reducescatter_async(adasum): %s", hora_status_string(st));
    CHECK(strcmp(hora_op_name(HORA_OP_ADASUM), "adasum") == 0 && hora_op_parse("Adasum") == HORA_OP_ADASUM,
          "op name/parse: %s %d", hora_op_name(HORA_OP_ADASUM), hora_op_parse("Adasum"));
    /* A set of every rank is still a set. */
    int *ranks = malloc(sizeof(int) * (size_t)size), set = 0;
    for (int r = 0; r < size; r++) ranks[r] = r;
    st = hora_process_set_create(ranks, size, &set);
    CHECK(st == HORA_OK, "process_set_create: %s", hora_last_error());
    if (st == HORA_OK) {
        hora_opts_t o = HORA_OPTS_INIT;
        o.process_set = set;
        st = hora_allreduce_async("adasum.set", f, f, 4, HORA_DTYPE_F32, HORA_OP_ADASUM, &o, &req);
        CHECK(st == HORA_ERR_UNSUPPORTED, "adasum on a process set: %s", hora_status_string(st));
        CHECK(hora_process_set_free(set) == HORA_OK, "process_set_free: %s", hora_last_error());
    }
    free(ranks);
    /* Different counts: every rank fails alike, and the channel still works. */
    float big[8] = {0};
    st = hora_allreduce(big, big, rank == 0 ? 8 : 7, HORA_DTYPE_F32, HORA_OP_ADASUM);
    if (size > 1)
        CHECK(st == HORA_ERR_MISMATCH, "different counts: %s (%s)", hora_status_string(st), hora_last_error());
    run_direct(HORA_DTYPE_F32, 0, 33);
}

int main(void)
{
    hora_status_t st = hora_init();
    if (st != HORA_OK) {
        fprintf(stderr, "hora_init: %s\n", hora_last_error());
        return 1;
    }
    rank = hora_rank();
    size = hora_size();
    if (size & (size - 1)) {
        float f[3] = {1, 2, 3};
        hora_request_t req;
        st = hora_allreduce(f, f, 3, HORA_DTYPE_F32, HORA_OP_ADASUM);
        CHECK(st == HORA_ERR_UNSUPPORTED && strstr(hora_last_error(), "power-of-two"), "np %d direct: %s (%s)", size,
              hora_status_string(st), hora_last_error());
        if (rank == 0) printf("np %d refused as expected: %s\n", size, hora_last_error());
        st = hora_allreduce_async("adasum.np", f, f, 3, HORA_DTYPE_F32, HORA_OP_ADASUM, NULL, &req);
        CHECK(st == HORA_ERR_UNSUPPORTED && strstr(hora_last_error(), "power-of-two"), "np %d async: %s (%s)", size,
              hora_status_string(st), hora_last_error());
    } else {
        static const hora_dtype_t dtypes[] = {HORA_DTYPE_F32, HORA_DTYPE_F64, HORA_DTYPE_F16, HORA_DTYPE_BF16};
        static const size_t counts[] = {0, 1, 2, 3, 7, 1000, 65537};
        for (size_t di = 0; di < sizeof(dtypes) / sizeof(dtypes[0]); di++) {
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
                for (int c = 0; c < 3; c++) run_direct(dtypes[di], c, counts[ci]);
            run_async(dtypes[di], 1000);
            run_async(dtypes[di], 3);
        }
        run_refusals();
    }
    int local_failures = failures, all = 0;
    hora_allreduce(&local_failures, &all, 1, HORA_DTYPE_I32, HORA_OP_SUM);
    if (rank == 0) printf("test_adasum np %d: %d checks, %d failures over all ranks\n", size, checks, all);
    hora_shutdown();
    return all ? 1 : 0;
}
