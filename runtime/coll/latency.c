/* latency.c - the latency path of small all-reduces (HORA_LATENCY_BYTES),
 * where the time is in the synchronisations, not in the bytes.
 *
 * Over peer memory (shm), one flag round: every member copies its whole
 * input into a slot of its own (tp_shm_area.h), posts, waits for every peer's
 * slot of the same operation and reduces all n inputs, in rank order, into
 * its own output. Nothing is written into a peer's memory and nothing is
 * awaited after the reduction (the slots alternate between even and odd
 * operations: tp_shm.c says why a slot is free again when its owner needs
 * it), so an operation costs one post and n-1 waits, against the one-shot
 * algorithm's two rounds (start, done) plus the writes into the peers'
 * outputs. Every member computes every element with the engine's n-way
 * reduce in rank order (f16/bf16 in fp32, rounded once), so the result is the
 * one-shot algorithm's, bit for bit, on every member. The buffers need not
 * be in the pool: the input travels in the slot, the output is local.
 *
 * Over messages (ucx, mpi), up to GROUP_OUTCOME_BODY_BYTES (2 KiB), no
 * code here: the outcome agreement's star carries the data (outcome.c:
 * every member's input to the first, which reduces all n in rank order and
 * sends back the result with the verdict; two message latencies, the
 * one-shot result). Larger (HORA_LATENCY_BYTES above 2 KiB), recursive
 * doubling, then the agreement: log2(n) exchanges of the
 * whole vector instead of the ring's 2(n-1) steps. With n not a power of
 * two, the first 2*rem places (rem = n - p2) pair up: the even one sends its
 * input to the odd one and waits for the result at the end. Each combine
 * puts the lower place's partial first, so both partners of an exchange
 * compute the same expression and every member ends with the same bits;
 * f16/bf16 are rounded once per exchange (ceil(log2 n) + 1 times at most,
 * within hora.h's bound of n-1 for n >= 3, and once for n = 2); AVG divides
 * in the last combine.
 */
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "coll/algo.h"

/* Inputs of up to this many members come from the stack. */
#define LATENCY_STACK_MEMBERS 64
/* Tags of recursive doubling: above the ring's (0 .. 2n-2). */
#define LATENCY_TAG_FOLD (1 << 24)
#define LATENCY_TAG_UNFOLD (LATENCY_TAG_FOLD + 1)
#define LATENCY_TAG_STEP (LATENCY_TAG_FOLD + 2)

hora_status_t latency_allreduce_mem(struct coll_group *g, const void *send, void *recv, size_t count,
                                    const struct group_reduction *red)
{
    const struct tp_ops *ops = g->tp->ops;
    const size_t bytes = count * hora_dtype_size(red->dtype);
    const int n = g->n, r = g->r;
    const uint64_t position = group_position(g->op_seq, 0, 1);
    const void *stack_srcs[LATENCY_STACK_MEMBERS];
    const void **srcs = stack_srcs;
    hora_status_t status;

    if (bytes > ops->small_bytes)
        return status_fail(HORA_ERR_INTERNAL, "latency path: %zu bytes over the %s transport's %zu-byte slots", bytes,
                           ops->name, ops->small_bytes);
    if (n > LATENCY_STACK_MEMBERS && !(srcs = calloc((size_t)n, sizeof(*srcs))))
        return status_fail(HORA_ERR_NO_MEMORY, "out of memory in a small all-reduce");
    const struct tp_mem_desc mine = group_desc(g, GROUP_KIND_ALLREDUCE, red->dtype, red->user_op, -1, count, 0);
    group_phase(g, "ALLREDUCE_LATENCY", 1);
    status = ops->mem_small_post(g->tp, position, &mine, send, bytes);
    /* This rank's own input is read where it is: the slot holds a copy. */
    srcs[r] = send;
    for (int i = 1; i < n && status == HORA_OK; i++) {
        const int p = (r + i) % n, peer = group_member(g, p);
        struct tp_mem_desc theirs;
        status = ops->mem_small_wait(g->tp, peer, position, &theirs, &srcs[p]);
        if (status == HORA_OK) status = group_desc_check(g, &mine, &theirs, peer);
    }
    /* In place, recv is also srcs[r]: the n-way reduce reads every input
     * of an element before it writes that element. */
    if (status == HORA_OK) status = group_reduce(g, recv, srcs, n, count, red);
    group_phase(g, "ALLREDUCE_LATENCY", 0);
    if (srcs != stack_srcs) free(srcs);
    return status;
}

/* Send bytes to place to and receive as many from place from (either may
 * be -1: none), then wait for both. */
static hora_status_t latency_exchange(struct coll_group *g, int to, const void *out, int from, void *in, size_t bytes,
                                      int tag)
{
    const struct tp_ops *ops = g->tp->ops;
    struct tp_req sreq, rreq;
    const int to_rank = to >= 0 ? group_member(g, to) : -1, from_rank = from >= 0 ? group_member(g, from) : -1;
    if (from >= 0) HORA_CHECK(ops->irecv(g->tp, from_rank, in, bytes, tag, &rreq));
    if (to >= 0) HORA_CHECK(ops->isend(g->tp, to_rank, out, bytes, tag, &sreq));
    if (from >= 0) HORA_CHECK(ops->wait(g->tp, from_rank, &rreq));
    if (to >= 0) HORA_CHECK(ops->wait(g->tp, to_rank, &sreq));
    return HORA_OK;
}

/* work = (place a's partial) op (place b's partial), a < b; divided when final. */
static hora_status_t latency_combine(const struct coll_group *g, void *work, const void *lower, const void *upper,
                                     size_t count, const struct group_reduction *red, int final)
{
    const void *srcs[2] = {lower, upper};
    return g->engine->reduce(work, srcs, 2, count, red->dtype, red->op, final ? red->divisor : 1);
}

hora_status_t latency_allreduce_msg(struct coll_group *g, const void *send, void *recv, size_t count,
                                    const struct group_reduction *red)
{
    const size_t bytes = count * hora_dtype_size(red->dtype);
    const int n = g->n, r = g->r;
    int p2 = 1;
    while (p2 * 2 <= n) p2 *= 2;
    const int rem = n - p2;
    hora_status_t status = HORA_OK;
    uint8_t *tmp = malloc(bytes);
    if (!tmp) return status_fail(HORA_ERR_NO_MEMORY, "out of memory in a small all-reduce");
    if (send != recv) status = g->engine->copy(recv, send, bytes);
    group_phase(g, "ALLREDUCE_LATENCY", 1);

    /* Fold: of the first 2*rem places, the even ones hand their input to the
     * odd ones and sit out the exchanges. */
    int vr = r >= 2 * rem ? r - rem : -1; /* place among the p2 that exchange */
    if (status == HORA_OK && r < 2 * rem) {
        if (r % 2 == 0) {
            status = latency_exchange(g, r + 1, recv, -1, NULL, bytes, LATENCY_TAG_FOLD);
        } else {
            status = latency_exchange(g, -1, NULL, r - 1, tmp, bytes, LATENCY_TAG_FOLD);
            if (status == HORA_OK) status = latency_combine(g, recv, tmp, recv, count, red, 0);
            vr = r / 2;
        }
    }
    /* Recursive doubling among p2 virtual places: at distance d, exchange
     * whole partials with vr ^ d. */
    for (int d = 1, step = 0; vr >= 0 && d < p2 && status == HORA_OK; d *= 2, step++) {
        const int vpeer = vr ^ d, peer = vpeer < rem ? 2 * vpeer + 1 : vpeer + rem;
        status = latency_exchange(g, peer, recv, peer, tmp, bytes, LATENCY_TAG_STEP + step);
        if (status == HORA_OK) {
            const int final = d * 2 >= p2;
            status = peer < r ? latency_combine(g, recv, tmp, recv, count, red, final)
                              : latency_combine(g, recv, recv, tmp, count, red, final);
        }
    }
    /* Unfold: the odd places hand the result back. */
    if (status == HORA_OK && r < 2 * rem)
        status = r % 2 ? latency_exchange(g, r - 1, recv, -1, NULL, bytes, LATENCY_TAG_UNFOLD)
                       : latency_exchange(g, -1, NULL, r + 1, recv, bytes, LATENCY_TAG_UNFOLD);
    group_phase(g, "ALLREDUCE_LATENCY", 0);
    free(tmp);
    return status;
}
