/* tp_shm.c - the shared-memory transport for ranks on one host.
 *
 * Every rank's pool (mem.c) is mapped by its host peers, so a rank reduces
 * straight out of its neighbour's buffer: one copy, no staging. The first
 * bytes of each pool hold this control block:
 *
 *   position  64-bit, monotonically increasing: "I have finished up to here"
 *             (ring.c encodes operation, stage and chunk into it). Written
 *             only by the owner, read by neighbours.
 *   wake_seq  futex word bumped after every post, and waiters: how many
 *             peers sleep on it. A post wakes only when someone sleeps.
 *   desc      the owner's buffers and arguments for the current operation.
 *
 * Each lives on its own cache line so a neighbour polling one does not
 * steal the line the owner is writing.
 *
 * Memory ordering: the owner writes its data (and desc), then stores the
 * position with release semantics; a reader that loads the position with
 * acquire semantics and sees it reached also sees the data. The sleep
 * protocol is a Dekker pair in the seq_cst order: the poster does
 * store(position); fetch_add(wake_seq); load(waiters), the sleeper does
 * seq = load(wake_seq); fetch_add(waiters); load(position); futex_wait(seq).
 * If the sleeper misses the new position, its waiters increment precedes the
 * poster's load of waiters, so the poster wakes it; and a wake_seq changed
 * since the sleeper read it makes futex_wait return at once. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <limits.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/status.h"
#include "tp/tp.h"

struct tp_shm_ctrl {
    alignas(64) _Atomic uint64_t position;
    alignas(64) _Atomic uint32_t wake_seq;
    _Atomic uint32_t waiters;
    alignas(64) struct tp_mem_desc desc;
    alignas(64) int32_t pid;
};

_Static_assert(TP_MAX_CHANNELS * sizeof(struct tp_shm_ctrl) <= MEM_POOL_CTRL_BYTES,
               "control blocks must fit the reserved bytes");

struct tp_shm {
    struct tp_shm_ctrl *self;
    long spin_count;
};

/* One control block per channel at the start of every pool. */
static struct tp_shm_ctrl *tp_shm_ctrl_of(struct tp *tp, int peer)
{
    const struct tp_env *env = tp->env;
    struct tp_shm_ctrl *blocks = mem_pool_peer(env->pool, env->topo->host_rank_of[peer], 0);
    return &blocks[tp->channel];
}

static bool tp_shm_can_connect(const struct tp_env *env, int peer)
{
    return !env->disable[TP_KIND_SHM] && env->pool->peer_count == env->topo->host_size &&
           env->topo->host_of[peer] == env->topo->host_index;
}

static hora_status_t tp_shm_connect(struct tp *tp)
{
    struct tp_shm *s = calloc(1, sizeof(*s));
    if (!s) return status_fail(HORA_ERR_NO_MEMORY, "out of memory connecting the shm transport");
    if (tp->channel < 0 || tp->channel >= TP_MAX_CHANNELS) {
        free(s);
        return status_fail(HORA_ERR_INVALID_ARG, "shm transport: channel %d outside 0..%d", tp->channel,
                           TP_MAX_CHANNELS - 1);
    }
    s->self = tp_shm_ctrl_of(tp, tp->env->topo->rank);
    s->spin_count = tp->env->spin_count;
    s->self->pid = (int32_t)getpid();
    atomic_store(&s->self->position, 0);
    tp->state = s;
    return HORA_OK;
}

static void tp_shm_close(struct tp *tp)
{
    free(tp->state);
    tp->state = NULL;
}

static hora_status_t tp_shm_mem_publish(struct tp *tp, const struct tp_mem_desc *desc)
{
    struct tp_shm *s = tp->state;
    /* Plain copy: neighbours read it only after an acquire load of a position
     * that this rank stores (release) afterwards. */
    s->self->desc = *desc;
    return HORA_OK;
}

static hora_status_t tp_shm_mem_desc(struct tp *tp, int peer, struct tp_mem_desc *desc)
{
    *desc = tp_shm_ctrl_of(tp, peer)->desc;
    return HORA_OK;
}

static long tp_shm_futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *timeout)
{
    return syscall(SYS_futex, (uint32_t *)word, op, val, timeout, NULL, 0);
}

static hora_status_t tp_shm_mem_post(struct tp *tp, uint64_t position)
{
    struct tp_shm *s = tp->state;
    atomic_store_explicit(&s->self->position, position, memory_order_seq_cst);
    atomic_fetch_add_explicit(&s->self->wake_seq, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&s->self->waiters, memory_order_seq_cst))
        tp_shm_futex(&s->self->wake_seq, FUTEX_WAKE, INT_MAX, NULL);
    return HORA_OK;
}

static double tp_shm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void tp_shm_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static hora_status_t tp_shm_mem_wait(struct tp *tp, int peer, uint64_t want)
{
    struct tp_shm *s = tp->state;
    struct tp_shm_ctrl *c = tp_shm_ctrl_of(tp, peer);
    double start = 0;
    long spins = s->spin_count;
    if (tp->spin_only_while_waited && !atomic_load_explicit(&tp->env->app_waiters, memory_order_relaxed)) spins = 0;

    for (long i = 0; i < spins; i++) {
        if (tp_position_reached(atomic_load_explicit(&c->position, memory_order_acquire), want)) return HORA_OK;
        tp_shm_pause();
    }
    for (;;) {
        uint32_t seq = atomic_load_explicit(&c->wake_seq, memory_order_seq_cst);
        atomic_fetch_add_explicit(&c->waiters, 1, memory_order_seq_cst);
        if (tp_position_reached(atomic_load_explicit(&c->position, memory_order_seq_cst), want)) {
            atomic_fetch_sub_explicit(&c->waiters, 1, memory_order_relaxed);
            return HORA_OK;
        }
        struct timespec nap = {0, 100 * 1000 * 1000};
        tp_shm_futex(&c->wake_seq, FUTEX_WAIT, seq, &nap);
        atomic_fetch_sub_explicit(&c->waiters, 1, memory_order_relaxed);
        if (tp_position_reached(atomic_load_explicit(&c->position, memory_order_acquire), want)) return HORA_OK;

        /* Still waiting: is the peer alive, and have we waited too long? */
        double now = tp_shm_now();
        if (start == 0) start = now;
        if (c->pid > 0 && kill(c->pid, 0) != 0 && errno == ESRCH)
            return status_fail(HORA_ERR_TRANSPORT, "shm transport: peer rank %d (pid %d) died", peer, (int)c->pid);
        if (now - start > tp->env->timeout_s)
            return status_fail(HORA_ERR_TIMEOUT,
                               "shm transport: rank %d waited %.1f s for rank %d (HORA_TIMEOUT_S); did every "
                               "rank call the same collectives in the same order?",
                               tp->env->topo->rank, now - start, peer);
    }
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
};
