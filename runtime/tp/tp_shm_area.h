/* tp_shm_area.h - the shared-memory control area at the start of every
 * rank's pool: one block per channel (tp_shm.c, the transport and its
 * outcome agreement) and one notice record per rank (tp_notice.c), with the
 * few inline helpers both use (the area of a rank, futex wake, clock). Apart
 * from tp_shm.h, so that tp_notice.c, which tp_shm.c calls, needs nothing of
 * tp_shm.c. Internal to tp/.
 *
 * Every field lives on a cache line of its own kind: a neighbour polling a
 * position does not steal the line its owner writes the descriptor on, and
 * the outcome word, written once per operation, shares no line with either. */
#ifndef HORA_TP_SHM_AREA_H
#define HORA_TP_SHM_AREA_H

#include <limits.h>
#include <linux/futex.h>
#include <stddef.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tp/tp.h"

#define TP_SHM_REASON_BYTES 384

struct tp_shm_ctrl {
    alignas(64) _Atomic uint64_t position; /* "I have finished up to here"; owner writes */
    alignas(64) _Atomic uint32_t wake_seq; /* futex word, bumped after every post */
    _Atomic uint32_t waiters;              /* how many sleep on wake_seq */
    alignas(64) struct tp_mem_desc desc;   /* the owner's buffers for the current operation */
    /* The operation the owner began last on this block's set (mem_op_begin):
     * a waiter in the other set that finds its own operation here knows the
     * owner passed the other memory kind (tp_shm.c, tp_shm_kind_check). */
    _Atomic uint64_t op_begun;
    alignas(64) _Atomic uint64_t outcome; /* on the group's first member only: tp_shm.c */
    /* Why this rank failed an operation of this channel: written before the
     * CAS that names this rank in a group's outcome word, read after it. */
    alignas(64) char reason[TP_SHM_REASON_BYTES];
    int32_t culprit; /* with reason: the rank the failure is put down to (status_culprit), -1 none */
};

/* The latency path's slots (tp_shm.c, "Small operations"): a whole input of
 * at most TP_SHM_SMALL_BYTES rides in one, behind a header whose position the
 * owner stores last (release). Two per channel, by the parity of the
 * operation number. The first TP_SHM_SMALL_INLINE bytes share the header's
 * cache line, so a reader of up to that many bytes pulls one line from the
 * owner. */
#define TP_SHM_SMALL_BYTES ((size_t)16 * 1024)
#define TP_SHM_SMALL_INLINE 32
struct tp_shm_small_slot {
    alignas(64) _Atomic uint64_t position; /* the operation's position, once the rest is written */
    uint32_t kind, dtype, op;              /* the owner's call (tp_mem_desc), checked by readers */
    int32_t root;
    uint64_t count;
    uint8_t data[TP_SHM_SMALL_BYTES]; /* from byte 32 of the line: TP_SHM_SMALL_INLINE inline */
};
_Static_assert(offsetof(struct tp_shm_small_slot, data) == 64 - TP_SHM_SMALL_INLINE,
               "the first bytes of data share the header's cache line");

/* One per rank: hora_abort / hora_shutdown (tp_notice.c). state is stored
 * with release after status and reason, loaded with acquire. */
enum tp_shm_notice_state { TP_SHM_NOTICE_NONE = 0, TP_SHM_NOTICE_SHUTDOWN = 1, TP_SHM_NOTICE_ABORT = 2 };
struct tp_shm_notice {
    alignas(64) _Atomic uint32_t state;
    int32_t status;
    int32_t pid;
    _Atomic int32_t seen; /* 1 + the rank whose abort this rank has learned of, 0 none */
    char reason[TP_NOTICE_REASON_BYTES];
};

/* Control blocks come in sets, one per transport that runs this protocol:
 * shm (positions in host memory) and cudaipc (positions in device memory,
 * the same agreement). */
enum tp_shm_set { TP_SHM_SET_HOST = 0, TP_SHM_SET_DEVICE = 1, TP_SHM_SET_COUNT = 2 };

struct tp_shm_area {
    struct tp_shm_ctrl channel[TP_SHM_SET_COUNT][TP_MAX_CHANNELS];
    struct tp_shm_notice notice;
    struct tp_shm_small_slot small[TP_MAX_CHANNELS][2]; /* host set only */
};

_Static_assert(sizeof(struct tp_shm_area) <= MEM_POOL_CTRL_BYTES, "the control area must fit the reserved bytes");

/* The area of a world rank on this host (NULL when its pool is not mapped;
 * this rank's own is always there, also when the pool is not shared). */
static inline struct tp_shm_area *tp_shm_area_of(const struct tp_env *env, int world_rank)
{
    if (world_rank == env->topo->rank) return (struct tp_shm_area *)(void *)env->pool->base;
    return mem_pool_peer(env->pool, env->topo->host_rank_of[world_rank], 0);
}

static inline long tp_shm_futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *timeout)
{
    return syscall(SYS_futex, (uint32_t *)word, op, val, timeout, NULL, 0);
}

/* Make every sleeper on block c look again (after a seq_cst store it must
 * see): the sleeper reads wake_seq before it checks, so either its check sees
 * the store or its futex_wait finds wake_seq changed or is woken. */
static inline void tp_shm_wake(struct tp_shm_ctrl *c)
{
    atomic_fetch_add_explicit(&c->wake_seq, 1, memory_order_seq_cst);
    tp_shm_futex(&c->wake_seq, FUTEX_WAKE, INT_MAX, NULL);
}

static inline double tp_shm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
