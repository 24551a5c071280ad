/* adasum.c - the Adasum all-reduce (HORA_OP_ADASUM, hora.h), by vector
 * halving and distance doubling over 2^k ranks, as Maleki et al. describe it
 * ("Scaling Distributed Training with Adaptive Summation", MLSys 2021) and
 * Horovod runs it.
 *
 * The result is a binary tree of pairwise combinations in rank order:
 * level 0 combines the vectors of ranks (0,1), (2,3), ...; level 1 the
 * results of (01, 23), ...; every combination of a lower vector L and an
 * upper vector R is
 *     (1 - L.R / (2 |L|^2)) L + (1 - L.R / (2 |R|^2)) R
 * (a coefficient is 1 when that squared norm is below sqrt(DBL_MIN), so zero
 * vectors add).
 *
 * The steps, for rank r of n = 2^k, on its vector of count elements:
 *  1. Reduce, for d = 1, 2, ..., n/2 (level l, d = 2^l): r and its partner
 *     r ^ d hold the same segment [lo, lo + cnt) of their own partial
 *     results (the lower pair's L, the upper pair's R). The lower rank keeps
 *     the first half (cnt / 2 elements), the upper one the second: each
 *     sends the half it gives up and receives the partner's copy of the half
 *     it keeps. On its half a rank computes its part of L.R, |L|^2 and |R|^2
 *     (fp64 accumulators); the parts are summed over the 2d ranks r / (2d)
 *     shares, which together hold L and R whole, by recursive doubling
 *     (partners r ^ 1, r ^ 2, ..., r ^ d: fp64 addition is commutative, so
 *     every member ends with the same bits and the same coefficients).
 *     Then the kept half becomes cL L + cR R.
 *  2. Allgather, for d = n/2, ..., 1: the reverse, each rank sends its
 *     segment to r ^ d and receives the partner's next to it.
 * Every element of the result is computed by one rank, so every rank gets the
 * same bits. Each rank moves about 2 count elements in all and computes on
 * count (1/2 + 1/4 + ...) of them.
 *
 * The data moves as MPI point-to-point messages through the channel's mpi
 * transport (coll_connect.c connects one on each purpose's flat channel for
 * this): its waits fail on an abort notice or after HORA_TIMEOUT_S. f32 and
 * f64 are computed in place in the output; f16 and bf16 in an fp32 copy,
 * rounded once at the end. The arithmetic is this file's own, not the data
 * engine's (host memory only; the engine has no dot product): the data
 * engine only copies and casts.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/status.h"
#include "coll/algo.h"
#include "coll/coll.h"
#include "coll/engine.h"

/* Tags, above the ring's (0 .. 2n-2), the latency path's (1 << 24 ...) and
 * the outcome agreement's: level l's data at ADASUM_TAG + 64 l, its norm
 * sums at + 1 + step, its allgather at + 63. */
#define ADASUM_TAG (1 << 25)
#define ADASUM_TAG_LEVEL(l) (ADASUM_TAG + 64 * (l))
/* The largest message: the mpi transport takes at most 2 GiB at once. */
#define ADASUM_PIECE_BYTES ((size_t)1 << 30)
/* Levels: n <= 2^31. */
#define ADASUM_MAX_LEVELS 31

hora_status_t coll_adasum_check(const char *what, int size, hora_dtype_t dtype, hora_memory_t memory)
{
    if (dtype != HORA_DTYPE_F32 && dtype != HORA_DTYPE_F64 && dtype != HORA_DTYPE_F16 && dtype != HORA_DTYPE_BF16)
        return status_fail(HORA_ERR_INVALID_ARG, "%s: op adasum takes f32, f64, f16 or bf16, not %s", what,
                           hora_dtype_name(dtype));
    if (size < 1 || (size & (size - 1)) != 0)
        return status_fail(HORA_ERR_UNSUPPORTED,
                           "%s: op adasum needs a power-of-two number of ranks (its pairs combine as a binary tree); "
                           "this job has %d",
                           what, size);
    if (memory != HORA_MEMORY_HOST)
        return status_fail(HORA_ERR_UNSUPPORTED, "%s: op adasum runs on host memory only (CPU tensors)", what);
    return HORA_OK;
}

/* Send out_bytes to peer and receive in_bytes from it, in pieces. Both sides
 * know both sizes (the receiver's in_bytes is the sender's out_bytes), so
 * the empty halves of short vectors are skipped on both. */
static hora_status_t adasum_exchange(struct tp *tp, int peer, const void *out, size_t out_bytes, void *in,
                                     size_t in_bytes, int tag)
{
    const struct tp_ops *ops = tp->ops;
    for (size_t at = 0; at < out_bytes || at < in_bytes; at += ADASUM_PIECE_BYTES) {
        struct tp_req sreq, rreq;
        const size_t ob =
            at < out_bytes ? (out_bytes - at < ADASUM_PIECE_BYTES ? out_bytes - at : ADASUM_PIECE_BYTES) : 0;
        const size_t ib = at < in_bytes ? (in_bytes - at < ADASUM_PIECE_BYTES ? in_bytes - at : ADASUM_PIECE_BYTES) : 0;
        if (ib) HORA_CHECK(ops->irecv(tp, peer, (char *)in + at, ib, tag, &rreq));
        if (ob) HORA_CHECK(ops->isend(tp, peer, (const char *)out + at, ob, tag, &sreq));
        if (ib) HORA_CHECK(ops->wait(tp, peer, &rreq));
        if (ob) HORA_CHECK(ops->wait(tp, peer, &sreq));
    }
    return HORA_OK;
}

/* v[0..2] summed over the 2d ranks that share rank / (2d). */
static hora_status_t adasum_group_sum(struct tp *tp, int rank, int d, double v[3], int tag)
{
    int step = 0;
    for (int s = 1; s <= d; s <<= 1, step++) {
        double theirs[3];
        HORA_CHECK(adasum_exchange(tp, rank ^ s, v, sizeof(theirs), theirs, sizeof(theirs), tag + 1 + step));
        for (int i = 0; i < 3; i++) v[i] += theirs[i];
    }
    return HORA_OK;
}

/* out = {mine . theirs, |mine|^2, |theirs|^2} over count elements, in fp64. */
static void adasum_dots(const void *mine, const void *theirs, size_t count, int f64, double out[3])
{
    double dot = 0, mm = 0, tt = 0;
    if (f64) {
        const double *a = mine, *b = theirs;
        for (size_t i = 0; i < count; i++) dot += a[i] * b[i], mm += a[i] * a[i], tt += b[i] * b[i];
    } else {
        const float *a = mine, *b = theirs;
        for (size_t i = 0; i < count; i++) {
            const double x = a[i], y = b[i];
            dot += x * y, mm += x * x, tt += y * y;
        }
    }
    out[0] = dot, out[1] = mm, out[2] = tt;
}

/* mine = cm mine + ct theirs (in fp64, rounded once to the working type). */
static void adasum_combine(void *mine, const void *theirs, size_t count, int f64, double cm, double ct)
{
    if (f64) {
        double *a = mine;
        const double *b = theirs;
        for (size_t i = 0; i < count; i++) a[i] = cm * a[i] + ct * b[i];
    } else {
        float *a = mine;
        const float *b = theirs;
        for (size_t i = 0; i < count; i++) a[i] = (float)(cm * (double)a[i] + ct * (double)b[i]);
    }
}

/* A vector's coefficient in a combination: Horovod's threshold, below
 * which the vector is added unchanged. */
static double adasum_coefficient(double dot, double normsq)
{
    return normsq >= sqrt(DBL_MIN) ? 1.0 - dot / (2.0 * normsq) : 1.0;
}

hora_status_t adasum_run(struct tp *tp, int rank, int n, void *work, size_t count, int f64, void *tmp)
{
    const size_t es = f64 ? sizeof(double) : sizeof(float);
    size_t level_lo[ADASUM_MAX_LEVELS], level_count[ADASUM_MAX_LEVELS];
    size_t lo = 0, cnt = count;
    int level = 0;
    char *w = work;

    for (int d = 1; d < n; d <<= 1, level++) {
        const int upper = (rank & d) != 0, tag = ADASUM_TAG_LEVEL(level);
        const size_t first = cnt / 2, second = cnt - first;
        const size_t keep_lo = upper ? lo + first : lo, keep = upper ? second : first;
        const size_t give_lo = upper ? lo : lo + first, give = upper ? first : second;
        double v[3], sums[3];
        level_lo[level] = lo;
        level_count[level] = cnt;
        HORA_CHECK(adasum_exchange(tp, rank ^ d, w + give_lo * es, give * es, tmp, keep * es, tag));
        adasum_dots(w + keep_lo * es, tmp, keep, f64, v);
        /* As (L.R, |L|^2, |R|^2): the lower rank's own half is part of L. */
        sums[0] = v[0], sums[1] = upper ? v[2] : v[1], sums[2] = upper ? v[1] : v[2];
        HORA_CHECK(adasum_group_sum(tp, rank, d, sums, tag));
        const double cl = adasum_coefficient(sums[0], sums[1]), cr = adasum_coefficient(sums[0], sums[2]);
        adasum_combine(w + keep_lo * es, tmp, keep, f64, upper ? cr : cl, upper ? cl : cr);
        lo = keep_lo;
        cnt = keep;
    }
    for (int d = n >> 1; d >= 1; d >>= 1) {
        level--;
        const int upper = (rank & d) != 0;
        const size_t plo = upper ? level_lo[level] : lo + cnt, pcnt = level_count[level] - cnt;
        HORA_CHECK(adasum_exchange(tp, rank ^ d, w + lo * es, cnt * es, w + plo * es, pcnt * es,
                                   ADASUM_TAG_LEVEL(level) + 63));
        lo = level_lo[level];
        cnt = level_count[level];
    }
    return HORA_OK;
}
