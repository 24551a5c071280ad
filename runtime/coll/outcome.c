/* outcome.c - one outcome per operation over messages (ucx, mpi).
 *
 * Over peer memory the members agree through one word in shared memory
 * (tp_shm.c). Over messages nothing is shared, and without an agreement a
 * ring can end well on one rank and badly on another: in a 3-rank ring a
 * rank whose last receive came from a live peer finishes while the peer
 * whose partner stopped times out; a rank stopped past HORA_TIMEOUT_S after
 * its last receive completes, when continued, the operation its peers gave
 * up.
 *
 * So every operation ends with a star around its first member (place 0, the
 * decider):
 *   1. every other member sends the decider its status word (operation
 *      number, status, and for a failure its rank and message) and waits
 *      for the verdict;
 *   2. the decider, if it did not fail itself, receives the words in place
 *      order; the verdict is its own failure, else the first failure a word
 *      reports, else the first member whose word did not come within
 *      HORA_TIMEOUT_S (HORA_ERR_TIMEOUT, or the transport's error when the
 *      member is known dead), else HORA_OK. It stops at the first failure;
 *   3. the decider sends the verdict to every other member, the silent ones
 *      too (last), and every member returns it: the deciding rank's status,
 *      with a message naming the rank that failed.
 * Only the decider decides, and it decides success only after every
 * member's word said OK, i.e. after every member's data was complete. A
 * member that was silent (stopped) finds the failed verdict waiting when it
 * is continued; a dead one changes nothing. A member waits for the verdict
 * up to twice HORA_TIMEOUT_S (the decider may itself wait HORA_TIMEOUT_S for
 * a silent member after it entered the agreement), then fails naming the
 * decider.
 *
 * The gap no finite exchange closes: the decider stopped, for longer than
 * that, after it has received every member's OK (its data complete) and
 * before its verdict is out. The others then fail with HORA_ERR_TIMEOUT
 * naming it, and it, when continued, sends (and returns) HORA_OK. Its
 * window is the end of its own operation: the agreement's receive and the
 * local copies after its last data wait.
 *
 * Cost: one small message to the decider and one back (a round trip) per
 * operation. The latency path's all-reduces up to a word's body
 * (GROUP_OUTCOME_BODY_BYTES) need no second round: their inputs ride in the
 * members' words, the decider reduces all n in place order (the one-shot
 * result) and the result rides in the verdict, so the agreement is the
 * operation (group_agree_allreduce): two message latencies, where recursive
 * doubling took one at n = 2 and three at n = 3 before its agreement. The words live in the channel's struct
 * group_outcome, not on the stack: a receive left pending after a failure is written when a late word comes, and the
 * channel is never used again (coll.c). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "coll/algo.h"

/* Above the ring's tags (0 .. 2n-2), the latency path's (1 << 24 ...) and
 * the ordered reduce-scatter's (1 << 25). */
#define OUTCOME_TAG (1 << 26)
/* Inputs of up to this many members come from the stack. */
#define OUTCOME_STACK_MEMBERS 64

/* The latency path's data in the words (NULL: a plain agreement). */
struct outcome_data {
    const void *send;
    void *recv;
    size_t count, bytes;
    const struct group_reduction *red;
};

#define OUTCOME_HEADER_BYTES offsetof(struct group_word, body)

static size_t outcome_word_bytes(const struct group_word *w, const struct outcome_data *data)
{
    if (w->status == HORA_OK) return OUTCOME_HEADER_BYTES + (data ? data->bytes : 0);
    return OUTCOME_HEADER_BYTES + strnlen(w->body, sizeof(w->body) - 1) + 1;
}

static void outcome_word_set(struct group_word *w, uint64_t op_seq, hora_status_t status, int rank, int culprit,
                             const char *reason)
{
    w->op_seq = op_seq;
    w->status = status;
    w->rank = rank;
    w->culprit = culprit;
    w->pad = 0;
    if (status < 0) snprintf(w->body, sizeof(w->body), "%s", reason ? reason : "");
}

/* What this member returns for verdict v (its own status when it failed
 * first: its message stands). */
static hora_status_t outcome_return(const struct coll_group *g, const struct group_word *v, hora_status_t mine)
{
    const int me = g->tp->env->topo->rank;
    if (v->status == HORA_OK) return mine < 0 ? mine : HORA_OK; /* a decider never says OK over a failure */
    if (v->rank == me) return status_blame(status_set((hora_status_t)v->status, "%s", v->body), v->culprit);
    return status_blame(status_set((hora_status_t)v->status, "%s #%llu failed on rank %d: %s", g->what,
                                   (unsigned long long)g->op_seq, v->rank, v->body),
                        v->culprit);
}

/* The k-th place (0-based) the verdict goes to: 1 .. n-1 without the silent
 * place, then the silent one (n: none). */
static int outcome_send_place(int n, int silent, int k)
{
    if (silent >= n || k + 1 < silent) return k + 1;
    return k + 2 < n ? k + 2 : silent;
}

static hora_status_t outcome_decide(struct coll_group *g, hora_status_t status, const struct outcome_data *data)
{
    struct group_outcome *o = &g->outcome;
    const struct tp_ops *ops = g->tp->ops;
    const int me = g->tp->env->topo->rank, n = g->n;
    struct group_word *verdict = &o->words[0];
    int silent = n; /* the place whose word did not come (n: none): its verdict goes last */

    outcome_word_set(verdict, g->op_seq, status, me, status_culprit(), hora_last_error());
    if (status == HORA_OK) {
        for (int i = 1; i < n && status == HORA_OK; i++)
            status = ops->irecv(g->tp, group_member(g, i), &o->words[i], sizeof(o->words[i]), OUTCOME_TAG, &o->reqs[i]);
        if (status < 0) outcome_word_set(verdict, g->op_seq, status, me, status_culprit(), hora_last_error());
        for (int i = 1; i < n && verdict->status == HORA_OK; i++) {
            const int peer = group_member(g, i);
            hora_status_t w = ops->wait(g->tp, peer, &o->reqs[i]);
            char why[512];
            if (w < 0) {
                snprintf(why, sizeof(why), "rank %d did not report its outcome: %s", peer, hora_last_error());
                outcome_word_set(verdict, g->op_seq, w, peer, status_culprit(), why);
                silent = i;
            } else if (o->words[i].op_seq != g->op_seq) {
                snprintf(why, sizeof(why), "rank %d reported the outcome of operation #%llu during #%llu", peer,
                         (unsigned long long)o->words[i].op_seq, (unsigned long long)g->op_seq);
                outcome_word_set(verdict, g->op_seq, HORA_ERR_CORRUPT, peer, -1, why);
            } else if (o->words[i].status < 0) {
                o->words[i].body[sizeof(o->words[i].body) - 1] = '\0';
                outcome_word_set(verdict, g->op_seq, o->words[i].status, o->words[i].rank, o->words[i].culprit,
                                 o->words[i].body);
            }
        }
    }
    if (data && verdict->status == HORA_OK) {
        /* Every input is here: reduce them in place order (in place, recv is
         * also srcs[0]: the n-way reduce reads an element's inputs before it
         * writes it), and the result rides in the verdict. */
        const void *stack_srcs[OUTCOME_STACK_MEMBERS];
        const void **srcs = n <= OUTCOME_STACK_MEMBERS ? stack_srcs : calloc((size_t)n, sizeof(*srcs));
        status = srcs ? HORA_OK : status_fail(HORA_ERR_NO_MEMORY, "out of memory in a small all-reduce");
        if (status == HORA_OK) {
            srcs[0] = data->send;
            for (int i = 1; i < n; i++) srcs[i] = o->words[i].body;
            status = group_reduce(g, data->recv, srcs, n, data->count, data->red);
        }
        if (srcs != stack_srcs) free(srcs);
        if (status == HORA_OK) status = g->engine->copy(verdict->body, data->recv, data->bytes);
        if (status < 0) outcome_word_set(verdict, g->op_seq, status, me, status_culprit(), hora_last_error());
    }
    /* The verdict to everyone; the member that did not report last, since a
     * send to a dead one may fail the channel's waits. A send's wait is only
     * for the buffer: the verdict stands whatever happens to it. */
    const size_t bytes = outcome_word_bytes(verdict, data);
    struct tp_req *sends = &o->reqs[n];
    int sent = 0;
    for (; sent < n - 1; sent++) {
        const int i = outcome_send_place(n, silent, sent);
        if (ops->isend(g->tp, group_member(g, i), verdict, bytes, OUTCOME_TAG, &sends[i]) < 0) break;
    }
    for (int k = 0; k < sent; k++) {
        const int i = outcome_send_place(n, silent, k);
        if (ops->wait(g->tp, group_member(g, i), &sends[i]) < 0) break; /* the rest were cancelled */
    }
    return outcome_return(g, verdict, status);
}

static hora_status_t outcome_follow(struct coll_group *g, hora_status_t status, const struct outcome_data *data)
{
    struct group_outcome *o = &g->outcome;
    const struct tp_ops *ops = g->tp->ops;
    const int me = g->tp->env->topo->rank, decider = group_member(g, 0);
    struct group_word *mine = &o->words[0], *verdict = &o->words[1];

    if (data && status == HORA_OK) status = g->engine->copy(mine->body, data->send, data->bytes);
    outcome_word_set(mine, g->op_seq, status, me, status_culprit(), hora_last_error());
    hora_status_t w = ops->irecv(g->tp, decider, verdict, sizeof(*verdict), OUTCOME_TAG, &o->reqs[1]);
    if (w == HORA_OK) w = ops->isend(g->tp, decider, mine, outcome_word_bytes(mine, data), OUTCOME_TAG, &o->reqs[0]);
    if (w == HORA_OK) {
        w = ops->wait(g->tp, decider, &o->reqs[1]);
        /* The decider may wait HORA_TIMEOUT_S for a silent member after it
         * came: give it that long once more (a fresh receive; the timed-out
         * one was cancelled). */
        if (w == HORA_ERR_TIMEOUT) {
            w = ops->irecv(g->tp, decider, verdict, sizeof(*verdict), OUTCOME_TAG, &o->reqs[1]);
            if (w == HORA_OK) w = ops->wait(g->tp, decider, &o->reqs[1]);
        }
        if (w == HORA_OK) (void)ops->wait(g->tp, decider, &o->reqs[0]);
    }
    if (w < 0)
        return status_blame(status_set(w, "%s #%llu: no verdict on its outcome from rank %d, which decides it (%s)",
                                       g->what, (unsigned long long)g->op_seq, decider, hora_last_error()),
                            decider);
    if (verdict->op_seq != g->op_seq)
        return status_fail(HORA_ERR_CORRUPT, "%s #%llu: rank %d sent the verdict of operation #%llu", g->what,
                           (unsigned long long)g->op_seq, decider, (unsigned long long)verdict->op_seq);
    if (verdict->status < 0) verdict->body[sizeof(verdict->body) - 1] = '\0';
    status = outcome_return(g, verdict, status);
    if (data && status == HORA_OK) status = g->engine->copy(data->recv, verdict->body, data->bytes);
    return status;
}

hora_status_t group_agree(struct coll_group *g, hora_status_t status)
{
    return g->r == 0 ? outcome_decide(g, status, NULL) : outcome_follow(g, status, NULL);
}

hora_status_t group_agree_allreduce(struct coll_group *g, const void *send, void *recv, size_t count,
                                    const struct group_reduction *red)
{
    const struct outcome_data data = {
        .send = send, .recv = recv, .count = count, .bytes = count * hora_dtype_size(red->dtype), .red = red};
    if (!g->open || data.bytes > GROUP_OUTCOME_BODY_BYTES)
        return status_fail(HORA_ERR_INTERNAL, "small all-reduce of %zu bytes: no agreement of at most %d bytes open",
                           data.bytes, GROUP_OUTCOME_BODY_BYTES);
    g->open = 0; /* this is the operation's agreement */
    group_phase(g, "ALLREDUCE_LATENCY", 1);
    hora_status_t status = g->r == 0 ? outcome_decide(g, HORA_OK, &data) : outcome_follow(g, HORA_OK, &data);
    group_phase(g, "ALLREDUCE_LATENCY", 0);
    return status;
}
