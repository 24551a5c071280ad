/* tp_shm.c - the shared-memory transport for ranks on one host.
 *
 * Every rank's pool (mem_pool.c) is mapped by its host peers, so a rank
 * reduces straight out of its neighbour's buffer: one copy, no staging. The
 * first bytes of each pool hold the control area (tp_shm_area.h), one block
 * per channel:
 *
 *   position  64-bit, monotonically increasing: "I have finished up to here"
 *             (group.c encodes operation, stage and chunk into it). Written
 *             only by the owner, read by neighbours.
 *   wake_seq  futex word bumped after every post, and waiters: how many
 *             peers sleep on it. A post wakes only when someone sleeps.
 *   desc      the owner's buffers and arguments for the current operation.
 *   outcome   the outcome word of the operations of the groups whose first
 *             member (place 0) this rank is; see "One outcome" below.
 *   reason    why this rank failed an operation of the channel.
 *
 * Memory ordering: the owner writes its data (and desc), then stores the
 * position with release semantics; a reader that loads the position with
 * acquire semantics and sees it reached also sees the data. The sleep
 * protocol is a Dekker pair in the seq_cst order: the poster does
 * store(position, release); fence(seq_cst); load(waiters) and, only when
 * someone sleeps, fetch_add(wake_seq) and FUTEX_WAKE; the sleeper does
 * seq = load(wake_seq); fetch_add(waiters, seq_cst); load(position, seq_cst);
 * futex_wait(seq). If the sleeper's load misses the new position, it
 * precedes the poster's fence in the seq_cst order, and so does its waiters
 * increment, which the poster's load after the fence therefore sees: the
 * poster wakes it (a wake_seq changed since the sleeper read it makes
 * futex_wait return at once). A poster that finds nobody waiting pays one
 * fence and no locked instruction on a line the peers read.
 *
 * Waiting: spin (HORA_SPIN_COUNT, when every local rank has a core), then
 * poll with sched_yield for HORA_YIELD_US (when they do not: a waiter hands
 * its core to the peer it waits for, which may be runnable on the same core,
 * instead of paying a futex sleep and wake-up per operation, 15-30 us on the
 * 2-core machine with 3-4 ranks), then sleep on the futex; the coordinator's
 * channels spin and yield only while an application thread waits for them.
 *
 * Small operations (mem_small_post / mem_small_wait, coll/latency.c): each
 * channel also has two slots (tp_shm_area.h) in the host control area, used by
 * operations of even and odd numbers. The owner copies its whole input and
 * its call (kind, dtype, op, root, count) into the slot of its operation
 * k, then stores the slot's position (release, and the fence above); a
 * member reads every peer's slot after an acquire load that sees the
 * position, and that position is the owner's last of k (one flag round,
 * nothing written into peers' memory, so the outcome agreement below holds
 * unchanged). The owner writes that slot again in operation k + 2, which it
 * reaches only after every member has posted a last position of k + 1, that
 * is, after every member has finished k and its reads.
 *
 * One outcome. Without agreement, a rank stopped (SIGSTOP, a page-in storm)
 * past HORA_TIMEOUT_S and then resumed found its peers' positions reached and
 * returned HORA_OK, while the peers had already failed the same operation
 * with HORA_ERR_TIMEOUT. Now the members of an operation decide its outcome
 * by compare-and-swap on one 64-bit word, in the control block (of the
 * operation's channel) of the group's first member:
 *
 *   bits  0..31  operation number (low 32 bits of op_seq; compared modulo 2^32)
 *   bits 32..33  state: 0 none yet, 1 succeeded, 2 failed
 *   bits 34..41  -status of a failure
 *   bits 42..63  world rank that decided
 *
 * For a member in operation k, a word (op j, state s) means:
 *   j > k                   k succeeded (someone got past k: see below);
 *   j == k, s == succeeded  k succeeded;
 *   j == k, s == failed     k failed;
 *   j < k,  s == failed     k fails: a failure is final for the channel;
 *   j < k,  otherwise       k is undecided.
 * Proposals are CASes from an undecided value only, so the word's
 * modification order holds exactly one decision per operation, and every
 * member returns what it reads there:
 *  - failure: a member that times out, finds a member's process gone, sees a
 *    member's abort or shutdown notice (tp_notice.c), or fails locally (a
 *    descriptor mismatch, out of memory) writes its reason into its own block,
 *    then CASes "k failed with status by rank r", then wakes every member's
 *    futex so that sleepers look at once instead of waiting out their own
 *    timeouts. Waiters read the word every time they wake (and during long
 *    spins) and adopt a failure with the decider's status and reason.
 *  - success: a member CASes "k succeeded" only after it has seen every
 *    member's last position of k (the algorithms end with that full
 *    synchronisation: group.c). So once success is decided every member's
 *    data is in place, and a member still on its way finds every position it
 *    waits for reached and finishes. A failure proposer that loses to success
 *    therefore goes back to waiting: the data is guaranteed to arrive.
 *    A success proposer that loses to a failure fails with its status.
 * Memory order: the CAS is seq_cst; the reason is written before it with
 * plain stores and read after an acquire load of a word naming its writer.
 * A block's reason is written again only by a later proposal of its owner,
 * and an owner that won proposes nothing more on that channel (failure is
 * final), so a reason that a word names is never overwritten.
 * Reuse: the word keeps only the latest decided operation. A member still in
 * k that finds j > k may conclude "k succeeded" because nobody leaves k
 * without its outcome, a failed k would have stayed in the word (final), and
 * success of k + 1 or later needs every member's positions of k + 1, which
 * this member has not posted. Operation numbers of the members of a group
 * differ by at most a handful (each needs the others to advance), so 32 bits
 * compare safely modulo 2^32. A fresh pool is zeros: op 0, none.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/status.h"
#include "tp/tp.h"
#include "tp/tp_shm.h"

enum tp_shm_state { TP_SHM_UNDECIDED = 0, TP_SHM_SUCCEEDED = 1, TP_SHM_FAILED = 2 };

/* How often a spinning waiter looks at the outcome word and the notices. */
#define TP_SHM_SPIN_CHECK 1024
/* How often a yielding waiter looks at the clock, the outcome word and the notices. */
#define TP_SHM_YIELD_CHECK 16

struct tp_shm {
    enum tp_shm_set set;
    struct tp_shm_ctrl *self;
    long spin_count;
    double yield_s;
    /* The operation in progress (mem_op_begin .. mem_op_end). */
    struct tp_mem_op op;
    _Atomic uint64_t *outcome; /* in the first member's block; NULL outside an operation */
    int decided;               /* this rank has seen the outcome (a failure, or success) */
    hora_status_t failed;      /* the failure it saw, once decided */
};

static uint64_t tp_shm_word(uint32_t op, unsigned state, hora_status_t status, int rank)
{
    return (uint64_t)op | (uint64_t)state << 32 | (uint64_t)((unsigned)-status & 0xffu) << 34 |
           (uint64_t)((unsigned)rank & 0x3fffffu) << 42;
}
static uint32_t tp_shm_word_op(uint64_t w) { return (uint32_t)w; }
static unsigned tp_shm_word_state(uint64_t w) { return (unsigned)(w >> 32) & 3u; }
static hora_status_t tp_shm_word_status(uint64_t w) { return (hora_status_t) - (int)((w >> 34) & 0xffu); }
static int tp_shm_word_rank(uint64_t w) { return (int)(w >> 42); }

/* What the word says about operation op: one of enum tp_shm_state. */
static enum tp_shm_state tp_shm_classify(uint64_t w, uint32_t op)
{
    int32_t d = (int32_t)(tp_shm_word_op(w) - op);
    if (d > 0) return TP_SHM_SUCCEEDED;
    if (tp_shm_word_state(w) == TP_SHM_FAILED) return TP_SHM_FAILED;
    if (d == 0 && tp_shm_word_state(w) == TP_SHM_SUCCEEDED) return TP_SHM_SUCCEEDED;
    return TP_SHM_UNDECIDED;
}

/* One control block per set and channel at the start of every pool. */
static struct tp_shm_ctrl *tp_shm_block(struct tp *tp, enum tp_shm_set set, int peer)
{
    return &tp_shm_area_of(tp->env, peer)->channel[set][tp->channel];
}

static struct tp_shm_ctrl *tp_shm_ctrl_of(struct tp *tp, int peer)
{
    return tp_shm_block(tp, ((struct tp_shm *)tp->state)->set, peer);
}

/* For messages: "shm", "cudaipc" (connect sets tp->ops only after it returns). */
static const char *tp_shm_name(const struct tp *tp) { return tp->ops ? tp->ops->name : "shm"; }

static int tp_shm_member(const struct tp_shm *s, int i) { return s->op.members ? s->op.members[i] : i; }

static bool tp_shm_can_connect(const struct tp_env *env, int peer)
{
    return !env->disable[TP_KIND_SHM] && env->pool->peer_count == env->topo->host_size &&
           env->topo->host_of[peer] == env->topo->host_index;
}

hora_status_t tp_shm_connect_set(struct tp *tp, enum tp_shm_set set)
{
    struct tp_shm *s = calloc(1, sizeof(*s));
    if (!s) return status_fail(HORA_ERR_NO_MEMORY, "out of memory connecting the shm transport");
    if (tp->channel < 0 || tp->channel >= TP_MAX_CHANNELS) {
        free(s);
        return status_fail(HORA_ERR_INVALID_ARG, "shm transport: channel %d outside 0..%d", tp->channel,
                           TP_MAX_CHANNELS - 1);
    }
    s->set = set;
    s->self = tp_shm_block(tp, set, tp->env->topo->rank);
    s->spin_count = tp->env->spin_count;
    s->yield_s = tp->env->yield_s;
    atomic_store(&s->self->position, 0);
    atomic_store(&s->self->outcome, 0);
    if (set == TP_SHM_SET_HOST) {
        struct tp_shm_area *area = tp_shm_area_of(tp->env, tp->env->topo->rank);
        for (int i = 0; i < 2; i++) atomic_store(&area->small[tp->channel][i].position, 0);
    }
    tp->state = s;
    return HORA_OK;
}

static hora_status_t tp_shm_connect(struct tp *tp) { return tp_shm_connect_set(tp, TP_SHM_SET_HOST); }

void tp_shm_close(struct tp *tp)
{
    free(tp->state);
    tp->state = NULL;
}

hora_status_t tp_shm_mem_publish(struct tp *tp, const struct tp_mem_desc *desc)
{
    struct tp_shm *s = tp->state;
    /* Plain copy: neighbours read it only after an acquire load of a position
     * that this rank stores (release) afterwards. */
    s->self->desc = *desc;
    return HORA_OK;
}

hora_status_t tp_shm_mem_desc(struct tp *tp, int peer, struct tp_mem_desc *desc)
{
    *desc = tp_shm_ctrl_of(tp, peer)->desc;
    return HORA_OK;
}

/* Store a position of this rank's (in its block, or in a small slot) and
 * wake the peers sleeping on its block (the Dekker pair at the top). */
static void tp_shm_post_word(struct tp_shm *s, _Atomic uint64_t *word, uint64_t position)
{
    atomic_store_explicit(word, position, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&s->self->waiters, memory_order_relaxed)) tp_shm_wake(s->self);
}

hora_status_t tp_shm_mem_post(struct tp *tp, uint64_t position)
{
    struct tp_shm *s = tp->state;
    tp_shm_post_word(s, &s->self->position, position);
    return HORA_OK;
}

static inline void tp_shm_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* ------------------------------------------------------------- the outcome */

/* Adopt the failure w names: its status, and a message naming the rank that
 * decided and why (its own message stays as it is when that is this rank). */
static hora_status_t tp_shm_adopt(struct tp *tp, uint64_t w)
{
    struct tp_shm *s = tp->state;
    const int decider = tp_shm_word_rank(w), me = tp->env->topo->rank;
    hora_status_t status = tp_shm_word_status(w);
    if (status >= 0) status = HORA_ERR_TRANSPORT; /* never seen: a failure always carries an error */
    s->decided = 1;
    s->failed = status;
    if (decider == me) return status;
    char reason[TP_SHM_REASON_BYTES];
    memcpy(reason, tp_shm_ctrl_of(tp, decider)->reason, sizeof(reason));
    reason[sizeof(reason) - 1] = '\0';
    const int culprit = tp_shm_ctrl_of(tp, decider)->culprit;
    if (tp_shm_word_op(w) == (uint32_t)s->op.op_seq)
        return status_blame(status_set(status, "%s #%llu failed on rank %d: %s", s->op.what,
                                       (unsigned long long)s->op.op_seq, decider, reason),
                            culprit);
    return status_blame(status_set(status, "%s #%llu cannot run: the channel failed in operation #%u on rank %d: %s",
                                   s->op.what, (unsigned long long)s->op.op_seq, tp_shm_word_op(w), decider, reason),
                        culprit);
}

/* Every member's futex of this channel: sleepers look at the word at once. */
static void tp_shm_wake_members(struct tp *tp)
{
    struct tp_shm *s = tp->state;
    for (int i = 0; i < s->op.n; i++) tp_shm_wake(tp_shm_ctrl_of(tp, tp_shm_member(s, i)));
}

/* Propose "this operation failed with status, by this rank" (the message is
 * hora_last_error(); logged here when it wins and log is set: a proposal that
 * loses was not the failure). Returns the failure everyone returns, or
 * HORA_OK when the operation has already succeeded: then the caller goes on
 * waiting. */
static hora_status_t tp_shm_propose_failure(struct tp *tp, hora_status_t status, int log)
{
    struct tp_shm *s = tp->state;
    const uint32_t op = (uint32_t)s->op.op_seq;
    uint64_t w = atomic_load_explicit(s->outcome, memory_order_acquire);
    if (tp_shm_classify(w, op) == TP_SHM_UNDECIDED) {
        /* Written before the CAS that may name us; see the top of the file. */
        snprintf(s->self->reason, sizeof(s->self->reason), "%s", hora_last_error());
        s->self->culprit = status_culprit();
        const uint64_t mine = tp_shm_word(op, TP_SHM_FAILED, status, tp->env->topo->rank);
        while (tp_shm_classify(w, op) == TP_SHM_UNDECIDED) {
            if (atomic_compare_exchange_weak_explicit(s->outcome, &w, mine, memory_order_seq_cst,
                                                      memory_order_acquire)) {
                tp_shm_wake_members(tp);
                s->decided = 1;
                s->failed = status;
                if (log) log_error("%s (%s)", hora_last_error(), hora_status_string(status));
                return status; /* our message is hora_last_error() already */
            }
        }
    }
    if (tp_shm_classify(w, op) == TP_SHM_FAILED) return tp_shm_adopt(tp, w);
    s->decided = 1; /* succeeded: the data is on its way */
    s->failed = HORA_OK;
    return HORA_OK;
}

/* Has someone decided? HORA_OK while undecided or succeeded; the failure. */
static hora_status_t tp_shm_look(struct tp *tp)
{
    struct tp_shm *s = tp->state;
    if (!s->outcome) return HORA_OK;
    uint64_t w = atomic_load_explicit(s->outcome, memory_order_acquire);
    switch (tp_shm_classify(w, (uint32_t)s->op.op_seq)) {
    case TP_SHM_FAILED: return tp_shm_adopt(tp, w);
    case TP_SHM_SUCCEEDED: s->decided = 1; return HORA_OK;
    default: return HORA_OK;
    }
}

hora_status_t tp_shm_mem_op_begin(struct tp *tp, const struct tp_mem_op *op)
{
    struct tp_shm *s = tp->state;
    s->op = *op;
    s->outcome = &tp_shm_ctrl_of(tp, tp_shm_member(s, 0))->outcome;
    s->decided = 0;
    s->failed = HORA_OK;
    /* No look at the word here: an earlier failure of the channel was this
     * rank's too (coll/ remembers it), and this operation cannot be decided
     * before this rank posts. Only a known abort fails it now (one load: the
     * polling of notices is for waits that block). */
    atomic_store_explicit(&s->self->op_begun, op->op_seq, memory_order_release);
    hora_status_t status = tp_notice_known(tp->env);
    if (status < 0) {
        status = tp_shm_propose_failure(tp, status, 0);
        if (status < 0) return status;
    }
    return HORA_OK;
}

hora_status_t tp_shm_mem_op_end(struct tp *tp, hora_status_t status)
{
    struct tp_shm *s = tp->state;
    const uint32_t op = (uint32_t)s->op.op_seq;
    if (!s->outcome) return status;
    if (status < 0) {
        /* A failure mem_wait reported is decided already (it won, or adopted). */
        if (!s->decided)
            status = tp_shm_propose_failure(tp, status, 0); /* logged where detected */
        else if (s->failed < 0)
            status = s->failed;
        /* HORA_OK here would mean success was decided without this rank's
         * last position: impossible; keep the local failure. */
    } else {
        uint64_t w = atomic_load_explicit(s->outcome, memory_order_acquire);
        const uint64_t ok = tp_shm_word(op, TP_SHM_SUCCEEDED, HORA_OK, tp->env->topo->rank);
        while (tp_shm_classify(w, op) == TP_SHM_UNDECIDED &&
               !atomic_compare_exchange_weak_explicit(s->outcome, &w, ok, memory_order_seq_cst, memory_order_acquire)) {
        }
        if (tp_shm_classify(w, op) == TP_SHM_FAILED) status = tp_shm_adopt(tp, w);
    }
    s->outcome = NULL;
    return status;
}

/* ---------------------------------------------------------------- waiting */

/* Waited too long, or the peer is gone, or a member gave up: propose the
 * failure. HORA_OK: the operation succeeded meanwhile, go on waiting. */
static hora_status_t tp_shm_give_up(struct tp *tp, hora_status_t status)
{
    struct tp_shm *s = tp->state;
    if (!s->outcome) { /* outside an operation (never in practice) */
        log_error("%s (%s)", hora_last_error(), hora_status_string(status));
        return status;
    }
    return tp_shm_propose_failure(tp, status, 1);
}

/* Host memory (shm's set) on some ranks and device memory (cudaipc's) on
 * others: each group waits in its own set for ranks that never come there.
 * The operation number is the channel's, whatever the memory, so a peer
 * that began this very operation in the other set passed the other kind: a
 * mismatch, said at once rather than after HORA_TIMEOUT_S. (Device data
 * staged through host memory is in the host set: no mismatch, it works.) */
static hora_status_t tp_shm_kind_check(struct tp *tp, int peer)
{
    struct tp_shm *s = tp->state;
    const enum tp_shm_set other = s->set == TP_SHM_SET_HOST ? TP_SHM_SET_DEVICE : TP_SHM_SET_HOST;
    const struct tp_shm_ctrl *c = &tp_shm_area_of(tp->env, peer)->channel[other][tp->channel];
    if (atomic_load_explicit(&c->op_begun, memory_order_acquire) != s->op.op_seq) return HORA_OK;
    static const char *const kinds[TP_SHM_SET_COUNT] = {"host", "device (CUDA)"};
    return status_blame(status_set(HORA_ERR_MISMATCH,
                                   "%s #%llu: rank %d passed %s memory and rank %d %s memory: every rank must pass "
                                   "the same memory kind",
                                   s->op.what ? s->op.what : "an operation", (unsigned long long)s->op.op_seq,
                                   tp->env->topo->rank, kinds[s->set], peer, kinds[other]),
                        peer);
}

/* Wait until the peer's word (a position in its block or slot) reaches
 * want: spin, yield, sleep on its block's futex (see the top of the file). */
static hora_status_t tp_shm_wait_word(struct tp *tp, int peer, _Atomic uint64_t *word, uint64_t want)
{
    struct tp_shm *s = tp->state;
    struct tp_shm_ctrl *c = tp_shm_ctrl_of(tp, peer);
    const struct tp_shm_notice *peer_notice = &tp_shm_area_of(tp->env, peer)->notice;
    double start = 0;
    long spins = s->spin_count;
    double yield_s = s->yield_s;
    tp->env->last_peer[tp->channel] = peer;
    if (tp->spin_only_while_waited && !atomic_load_explicit(&tp->env->app_waiters, memory_order_relaxed))
        spins = 0, yield_s = 0;

    for (long i = 1; i <= spins; i++) {
        if (tp_position_reached(atomic_load_explicit(word, memory_order_acquire), want)) return HORA_OK;
        if (i % TP_SHM_SPIN_CHECK == 0 && !s->decided) HORA_CHECK(tp_shm_look(tp));
        tp_shm_pause();
    }
    if (yield_s > 0) {
        double until = 0;
        for (long i = 1;; i++) {
            if (tp_position_reached(atomic_load_explicit(word, memory_order_acquire), want)) return HORA_OK;
            if (i % TP_SHM_YIELD_CHECK == 0) {
                if (!s->decided) HORA_CHECK(tp_shm_look(tp));
                const double now = tp_shm_now();
                if (until == 0)
                    until = now + yield_s;
                else if (now > until)
                    break;
            }
            sched_yield();
        }
    }
    for (;;) {
        uint32_t seq = atomic_load_explicit(&c->wake_seq, memory_order_seq_cst);
        atomic_fetch_add_explicit(&c->waiters, 1, memory_order_seq_cst);
        if (tp_position_reached(atomic_load_explicit(word, memory_order_seq_cst), want)) {
            atomic_fetch_sub_explicit(&c->waiters, 1, memory_order_relaxed);
            return HORA_OK;
        }
        /* A failure decided after we read seq bumped wake_seq (tp_shm_wake):
         * futex_wait returns at once or is woken. */
        hora_status_t status = s->decided ? HORA_OK : tp_shm_look(tp);
        if (status == HORA_OK) {
            struct timespec nap = {0, 100 * 1000 * 1000};
            tp_shm_futex(&c->wake_seq, FUTEX_WAIT, seq, &nap);
        }
        atomic_fetch_sub_explicit(&c->waiters, 1, memory_order_relaxed);
        if (status < 0) return status;
        if (tp_position_reached(atomic_load_explicit(word, memory_order_acquire), want)) return HORA_OK;
        if (s->decided) continue; /* succeeded: the position will come */

        /* Still waiting: did a member give up, is the peer alive, have we
         * waited too long? Each is a proposal; losing to success means the
         * data is on its way. */
        double now = tp_shm_now();
        if (start == 0) start = now;
        status = tp_notice_check(tp->env, s->op.members, s->op.direct ? s->op.n : 0);
        if (status == HORA_OK) status = tp_shm_kind_check(tp, peer);
        if (status == HORA_OK && peer_notice->pid > 0 && kill(peer_notice->pid, 0) != 0 && errno == ESRCH)
            status = status_blame(status_set(HORA_ERR_TRANSPORT, "%s transport: peer rank %d (pid %d) died",
                                             tp_shm_name(tp), peer, (int)peer_notice->pid),
                                  peer);
        if (status == HORA_OK && now - start > tp->env->timeout_s)
            status =
                status_blame(status_set(HORA_ERR_TIMEOUT,
                                        "%s transport: rank %d waited %.1f s for rank %d in %s #%llu "
                                        "(HORA_TIMEOUT_S); did every rank call the same collectives in the "
                                        "same order?",
                                        tp_shm_name(tp), tp->env->topo->rank, now - start, peer,
                                        s->op.what ? s->op.what : "an operation", (unsigned long long)s->op.op_seq),
                             peer);
        if (status < 0) HORA_CHECK(tp_shm_give_up(tp, tp_notice_await_verdict(tp->env, status)));
    }
}

hora_status_t tp_shm_mem_wait(struct tp *tp, int peer, uint64_t want)
{
    return tp_shm_wait_word(tp, peer, &tp_shm_ctrl_of(tp, peer)->position, want);
}

hora_status_t tp_shm_mem_op_check(struct tp *tp) { return tp_shm_look(tp); }

/* ------------------------------------------------------ small operations */

static struct tp_shm_small_slot *tp_shm_small_slot(struct tp *tp, int peer, uint64_t op_seq)
{
    return &tp_shm_area_of(tp->env, peer)->small[tp->channel][op_seq & 1];
}

hora_status_t tp_shm_mem_small_post(struct tp *tp, uint64_t position, const struct tp_mem_desc *desc, const void *data,
                                    size_t bytes)
{
    struct tp_shm *s = tp->state;
    if (bytes > TP_SHM_SMALL_BYTES)
        return status_fail(HORA_ERR_INTERNAL, "shm transport: %zu bytes do not fit a small slot (%zu)", bytes,
                           TP_SHM_SMALL_BYTES);
    struct tp_shm_small_slot *slot = tp_shm_small_slot(tp, tp->env->topo->rank, s->op.op_seq);
    /* Plain stores: readers load the position (acquire) first. */
    slot->kind = desc->kind;
    slot->dtype = desc->dtype;
    slot->op = desc->op;
    slot->root = desc->root;
    slot->count = desc->count;
    memcpy(slot->data, data, bytes);
    tp_shm_post_word(s, &slot->position, position);
    return HORA_OK;
}

hora_status_t tp_shm_mem_small_wait(struct tp *tp, int peer, uint64_t position, struct tp_mem_desc *desc,
                                    const void **data)
{
    struct tp_shm *s = tp->state;
    struct tp_shm_small_slot *slot = tp_shm_small_slot(tp, peer, s->op.op_seq);
    HORA_CHECK(tp_shm_wait_word(tp, peer, &slot->position, position));
    /* Reached is exactly this operation: the peer writes this slot again
     * only in the operation after next (see the top of the file). */
    *desc = (struct tp_mem_desc){0};
    desc->op_seq = s->op.op_seq;
    desc->kind = slot->kind;
    desc->dtype = slot->dtype;
    desc->op = slot->op;
    desc->root = slot->root;
    desc->count = slot->count;
    *data = slot->data;
    return HORA_OK;
}

static bool tp_shm_mem_local_offset(struct tp *tp, const void *ptr, size_t bytes, uint64_t *offset)
{
    return mem_pool_offset(tp->env->pool, ptr, bytes, offset);
}

static void *tp_shm_mem_peer_ptr(struct tp *tp, int peer, uint64_t offset)
{
    return mem_pool_peer(tp->env->pool, tp->env->topo->host_rank_of[peer], offset);
}

const struct tp_ops tp_shm_ops = {
    .name = "shm",
    .caps = TP_CAP_PEER_MEMORY | TP_CAP_HOST_LOCAL,
    .memory_kinds = 1u << HORA_MEMORY_HOST,
    .can_connect = tp_shm_can_connect,
    .connect = tp_shm_connect,
    .close = tp_shm_close,
    .isend = tp_unsupported_isend,
    .irecv = tp_unsupported_irecv,
    .wait = tp_unsupported_wait,
    .mem_publish = tp_shm_mem_publish,
    .mem_desc = tp_shm_mem_desc,
    .mem_post = tp_shm_mem_post,
    .mem_wait = tp_shm_mem_wait,
    .mem_local_offset = tp_shm_mem_local_offset,
    .mem_peer_ptr = tp_shm_mem_peer_ptr,
    .mem_op_begin = tp_shm_mem_op_begin,
    .mem_op_end = tp_shm_mem_op_end,
    .mem_op_check = tp_shm_mem_op_check,
    .small_bytes = TP_SHM_SMALL_BYTES,
    .mem_small_post = tp_shm_mem_small_post,
    .mem_small_wait = tp_shm_mem_small_wait,
};
