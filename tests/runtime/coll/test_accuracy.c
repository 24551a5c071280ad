/*
 * test_accuracy.c - how f16 and bf16 all-reduce SUM and AVG round. hora.h
 * promises fp32 accumulation for both; test_collectives cannot see rounding,
 * since its inputs sum exactly. Here they do not: random values of mixed sign
 * and magnitude (f16 2^-14 .. 2^8, bf16 2^-16 .. 2^17), a function of (seed,
 * rank, index) so every rank computes every other rank's input, on counts 1,
 * 7, 1001 (the latency path: 2002 bytes), 65536 + 13 and 1000003 (odd, not
 * multiples of the rank count), in place and out of place, on shared
 * (hora_mem_alloc) and malloc'd buffers.
 *
 * What is right depends on the algorithm the runtime runs:
 *  - one-shot (shm transport, HORA_ALGORITHM auto or oneshot, not
 *    hierarchical; also the latency path of small counts, which reduces in
 *    the same order): one rank reduces each element from every input, so the
 *    result must be BIT-EXACT the single-rounded fp32 sum: widen every rank's
 *    input to fp32, add in rank order 0, 1, ..., n-1 in fp32, for AVG divide
 *    by n in fp32, round once to the dtype (to nearest even).
 *  - ring (shm with HORA_ALGORITHM=ring, ucx, mpi; ucx's recursive doubling
 *    of small counts) and hierarchical (virtual or real nodes): each of at
 *    most n-1 partial sums is rounded once to the dtype, so with exact = the
 *    sum in double,
 *        |result - exact| <= (gamma(n-1) + 2^-22) * sum_i |x_i|   (AVG: / n)
 *    where gamma(k) = k u / (1 - k u), u = 2^-11 (f16), 2^-8 (bf16).
 * NaN and inf never pass (unwritten outputs start as NaN). Rank 0 prints per
 * dtype and op how many elements differ from the single-rounded fp32 sum, how
 * many by more than 1 ulp, the largest difference in ulps and the largest
 * error as a fraction of the ring bound.
 *
 * Run: mpirun -np N test_accuracy [--quick]   (exit 0 = all passed; --quick
 *      leaves out the 1000003-element count)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hora.h"
#include "buf.h"
#include "check.h"
#include "k_cpu.h"
#include "summary.h"

static int rank, size;

enum accuracy_path { ACCURACY_ONESHOT, ACCURACY_RING, ACCURACY_HIERARCHICAL };
static const char *const accuracy_path_name[] = {"one-shot", "ring", "hierarchical"};

/* The algorithm the runtime runs for a flat or hierarchical allreduce under
 * this environment (the rules of runtime/api/hora.c and coll.c, from outside):
 * hierarchical when there is more than one node, the same number of ranks >
 * 1 on each, and HORA_HIERARCHICAL is not 0; otherwise one-shot on shm
 * unless HORA_ALGORITHM=ring; the ring on every other transport. */
static enum accuracy_path accuracy_path_detect(void)
{
    int local[2] = {hora_local_size(), -hora_local_size()}, most[2] = {0, 0};
    if (hora_allreduce(local, most, 2, HORA_DTYPE_I32, HORA_OP_MAX) != HORA_OK) {
        fprintf(stderr, "rank %d FAIL: local sizes: %s\n", rank, hora_last_error());
        exit(1);
    }
    const char *hier = getenv("HORA_HIERARCHICAL"), *alg = getenv("HORA_ALGORITHM");
    const int same_local = most[0] == -most[1];
    if (hora_node_count() > 1 && most[0] > 1 && same_local && !(hier && !strcmp(hier, "0")))
        return ACCURACY_HIERARCHICAL;
    if (!strcmp(hora_transport_name(), "shm") && !(alg && !strcasecmp(alg, "ring"))) return ACCURACY_ONESHOT;
    return ACCURACY_RING;
}

/* ------------------------------------------------------------- values */

static float accuracy_widen(hora_dtype_t dtype, uint16_t bits)
{
    return dtype == HORA_DTYPE_F16 ? k_f16_to_f32(bits) : k_bf16_to_f32(bits);
}

static uint16_t accuracy_narrow(hora_dtype_t dtype, float x)
{
    return dtype == HORA_DTYPE_F16 ? k_f32_to_f16(x) : k_f32_to_bf16(x);
}

/* Rank r's input at element i, as dtype bits: sign, binade and mantissa
 * drawn from a hash of (seed, r, i). Normal numbers only, never 0. */
static uint16_t accuracy_input(hora_dtype_t dtype, uint64_t seed, int r, size_t i)
{
    uint64_t h = seed * 0x9E3779B97F4A7C15ull + (uint64_t)r * 0xD1B54A32D192ED03ull + (uint64_t)i;
    h = (h ^ (h >> 32)) * 0xD6E8FEB86659FD93ull;
    h = (h ^ (h >> 32)) * 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    const uint16_t sign = (uint16_t)((h >> 40) & 1) << 15;
    if (dtype == HORA_DTYPE_F16) /* exponent bias 15, 10 mantissa bits */
        return sign | (uint16_t)((15 - 14 + (int)(h % 23)) << 10) | (uint16_t)((h >> 16) & 0x3FF);
    return sign | (uint16_t)((127 - 16 + (int)(h % 34)) << 7) | (uint16_t)((h >> 16) & 0x7F); /* bias 127, 7 bits */
}

/* Bits as integers in value order (-0 and +0 both 0): their difference is
 * the distance in ulps. */
static int32_t accuracy_ordered(uint16_t bits) { return bits & 0x8000 ? -(int32_t)(bits & 0x7FFF) : (int32_t)bits; }

/* Everything the checks need about element i of one (dtype, count), the same
 * for every op and buffer variant. */
struct accuracy_ref {
    uint16_t fp32_sum, fp32_avg; /* single-rounded fp32 sum (and / n), in dtype bits */
    double exact, magnitude;     /* sum_i x_i and sum_i |x_i|, exact in double */
};

static void accuracy_ref_fill(struct accuracy_ref *ref, hora_dtype_t dtype, uint64_t seed, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        float acc = 0;
        double exact = 0, magnitude = 0;
        for (int r = 0; r < size; r++) {
            float x = accuracy_widen(dtype, accuracy_input(dtype, seed, r, i));
            acc = r == 0 ? x : acc + x; /* rank order, every add rounded to fp32 */
            exact += x;
            magnitude += fabs((double)x);
        }
        ref[i].fp32_sum = accuracy_narrow(dtype, acc);
        ref[i].fp32_avg = accuracy_narrow(dtype, acc / (float)size);
        ref[i].exact = exact;
        ref[i].magnitude = magnitude;
    }
}

/* What the ring paths aim at, the exact sum (AVG: / n), and how far from it
 * they may land: (gamma(n-1) + 2^-22) * sum_i |x_i| (AVG: / n). */
static double accuracy_exact(const struct accuracy_ref *ref, int avg) { return avg ? ref->exact / size : ref->exact; }

static double accuracy_bound(const struct accuracy_ref *ref, hora_dtype_t dtype, int avg)
{
    const double u = dtype == HORA_DTYPE_F16 ? 0x1p-11 : 0x1p-8, k = (double)(size - 1);
    const double gamma = k * u / (1 - k * u);
    return (gamma + 0x1p-22) * ref->magnitude / (avg ? size : 1);
}

/* ---------------------------------------------------------- statistics */

/* Per dtype and op, over every call: elements that differ from the
 * single-rounded fp32 sum, by more than 1 ulp, the most ulps, and the largest
 * |error| / ring bound. */
struct accuracy_stats {
    size_t elements, differ, beyond_1ulp;
    int32_t max_ulp;
    double worst_of_bound;
    int calls;
};

/* ------------------------------------------------------------- the test */

static void accuracy_allreduce(hora_dtype_t dtype, hora_op_t op, size_t count, int inplace, int shared, uint64_t seed,
                               const struct accuracy_ref *ref, enum accuracy_path path, struct accuracy_stats *stats)
{
    const size_t bytes = count * sizeof(uint16_t);
    const int avg = op == HORA_OP_AVG;
    char what[160];
    snprintf(what, sizeof(what), "rank %d: allreduce %s %s count=%zu %s %s (%s)", rank, hora_dtype_name(dtype),
             hora_op_name(op), count, inplace ? "in-place" : "out-of-place", shared ? "shared" : "malloc",
             accuracy_path_name[path]);

    uint16_t *send = test_buf_alloc(shared, bytes), *recv = inplace ? send : test_buf_alloc(shared, bytes);
    for (size_t i = 0; i < count; i++) send[i] = accuracy_input(dtype, seed, rank, i);
    if (!inplace) memset(recv, 0xFF, bytes); /* NaN in f16 and bf16 */
    hora_status_t st = hora_allreduce(send, recv, count, dtype, op);
    CHECK(st == HORA_OK, "%s: %s: %s", what, hora_status_string(st), hora_last_error());
    if (st == HORA_OK) {
        size_t wrong = 0, first = 0;
        for (size_t i = 0; i < count; i++) {
            const uint16_t want = avg ? ref[i].fp32_avg : ref[i].fp32_sum;
            const double got = accuracy_widen(dtype, recv[i]);
            const double error = fabs(got - accuracy_exact(&ref[i], avg)), bound = accuracy_bound(&ref[i], dtype, avg);
            const int32_t ulp = abs(accuracy_ordered(recv[i]) - accuracy_ordered(want));
            const int ok = path == ACCURACY_ONESHOT ? recv[i] == want : isfinite(got) && error <= bound;
            if (!ok && wrong++ == 0) first = i;
            stats->differ += recv[i] != want;
            stats->beyond_1ulp += ulp > 1;
            if (ulp > stats->max_ulp) stats->max_ulp = ulp;
            if (!isfinite(got))
                stats->worst_of_bound = INFINITY;
            else if (error / bound > stats->worst_of_bound)
                stats->worst_of_bound = error / bound;
        }
        stats->elements += count;
        stats->calls++;
        const uint16_t want = avg ? ref[first].fp32_avg : ref[first].fp32_sum;
        const char *how = path == ACCURACY_ONESHOT ? "differ from the single-rounded fp32 sum" : "beyond the bound";
        CHECK(wrong == 0,
              "%s: %zu of %zu elements %s; first is element %zu: 0x%04x = %.9g, single-rounded fp32 0x%04x = %.9g, "
              "exact %.17g, ring bound %.3g",
              what, wrong, count, how, first, recv[first], (double)accuracy_widen(dtype, recv[first]), want,
              (double)accuracy_widen(dtype, want), accuracy_exact(&ref[first], avg),
              accuracy_bound(&ref[first], dtype, avg));
        if (!inplace) {
            size_t changed = 0;
            for (size_t i = 0; i < count; i++) changed += send[i] != accuracy_input(dtype, seed, rank, i);
            CHECK(changed == 0, "%s: %zu send elements changed", what, changed);
        }
    }
    if (!inplace) test_buf_free(shared, recv);
    test_buf_free(shared, send);
}

int main(int argc, char **argv)
{
    const int quick = argc > 1 && !strcmp(argv[1], "--quick");
    static const hora_dtype_t dtypes[] = {HORA_DTYPE_F16, HORA_DTYPE_BF16};
    static const hora_op_t ops[] = {HORA_OP_SUM, HORA_OP_AVG};
    static const size_t counts[] = {1, 7, 1001, 65536 + 13, 1000003};
    const int ncounts = quick ? 4 : 5;

    hora_status_t st = hora_init();
    if (st != HORA_OK) {
        fprintf(stderr, "FAIL: hora_init: %s: %s\n", hora_status_string(st), hora_last_error());
        return 1;
    }
    rank = hora_rank();
    size = hora_size();
    const enum accuracy_path path = accuracy_path_detect();
    if (rank == 0)
        printf("test_accuracy: %d ranks, transport %s, %d nodes, %s%s\n", size, hora_transport_name(),
               hora_node_count(), accuracy_path_name[path], quick ? " (quick)" : "");

    struct accuracy_ref *ref = malloc(sizeof(*ref) * counts[ncounts - 1]);
    if (!ref) return 1;
    for (int d = 0; d < 2; d++) {
        struct accuracy_stats stats[2] = {{0}, {0}};
        for (int c = 0; c < ncounts; c++) {
            const uint64_t seed = 0xACC0ull + 16 * (uint64_t)d + (uint64_t)c;
            accuracy_ref_fill(ref, dtypes[d], seed, counts[c]);
            for (int o = 0; o < 2; o++)
                for (int shared = 1; shared >= 0; shared--)
                    for (int inplace = 0; inplace < 2; inplace++)
                        accuracy_allreduce(dtypes[d], ops[o], counts[c], inplace, shared, seed, ref, path, &stats[o]);
        }
        for (int o = 0; rank == 0 && o < 2; o++)
            printf("%s %s np%d %s %s: %zu of %zu differ (%zu > 1 ulp, max %d ulp), worst error %.2f of the ring "
                   "bound, %d calls\n",
                   hora_dtype_name(dtypes[d]), hora_op_name(ops[o]), size, hora_transport_name(),
                   accuracy_path_name[path], stats[o].differ, stats[o].elements, stats[o].beyond_1ulp, stats[o].max_ulp,
                   stats[o].worst_of_bound, stats[o].calls);
    }
    free(ref);
    return test_summary("test_accuracy", failures, checks);
}
