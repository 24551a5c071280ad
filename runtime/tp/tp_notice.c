/* tp_notice.c - notices: how a rank that gives up (hora_abort) or leaves
 * (hora_shutdown) reaches the others without their agreement.
 *
 * Two paths, because neither reaches everyone alone:
 *  - shared memory, for the ranks of this host: each rank's control area
 *    (tp_shm_area.h) has a notice record (state, status, pid, reason). The
 *    owner writes status and reason, then stores state with release (seq_cst), then
 *    bumps and wakes the futex of every channel block of every host rank, so
 *    a peer asleep in tp_shm's wait looks at once (the Dekker argument of
 *    tp_shm.c: it read wake_seq before it checked). Readers load state with
 *    acquire, then read the rest. The pid lets peers see a process that is
 *    gone.
 *  - MPI, for every rank: at init each rank posts one receive for any source
 *    on a private communicator; hora_abort sends its notice to every other
 *    rank (eager-sized, so the sends complete locally even if nobody
 *    receives, and it waits for them only a bounded time). Whoever checks
 *    (tp_notice_check: every transport's slow waits, the coordinator's polls)
 *    tests that receive under a trylock (MPI forbids two threads testing one
 *    request).
 * What a process learns first it keeps in struct tp_notice (known, stored
 * with release after the fields); from then on every wait fails with that
 * status and "rank R aborted: reason". A shutdown notice is weaker: it only
 * fails waits of the application's direct collectives that need the rank
 * that shuts down (a peer still blocked in one it will never join); the
 * coordinators stop together through their own cycle.
 *
 * Checks are cheap: an atomic load, and at most every 20 ms a look at the
 * host peers' records and one MPI_Test. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/status.h"
#include "tp/tp.h"
#include "tp/tp_shm_area.h"

#define TP_NOTICE_TAG 7
#define TP_NOTICE_POLL_US 20000

/* What travels: rank, status, then the reason (NUL-terminated). */
struct tp_notice_wire {
    int32_t rank, status, kind, reserved;
    char reason[TP_NOTICE_REASON_BYTES];
};
_Static_assert(sizeof(struct tp_notice_wire) == sizeof(((struct tp_notice *)0)->msg), "notice buffer size");

static int64_t tp_notice_now_us(void) { return (int64_t)(tp_shm_now() * 1e6); }

static struct tp_shm_notice *tp_notice_record(const struct tp_env *env, int world_rank)
{
    struct tp_shm_area *a = tp_shm_area_of(env, world_rank);
    return a ? &a->notice : NULL;
}

/* Keep the first notice; the caller holds n->lock. It is acknowledged in
 * this rank's record: an aborting rank lingers until its host peers have
 * seen an abort, so that they can report it before mpirun ends the job. */
static void tp_notice_set_locked(struct tp_env *env, int rank, hora_status_t status, const char *reason)
{
    struct tp_notice *n = &env->notice;
    if (atomic_load_explicit(&n->known, memory_order_relaxed)) return;
    n->rank = rank;
    n->status = status < 0 ? status : HORA_ERR_SHUTDOWN;
    snprintf(n->reason, sizeof(n->reason), "%s", reason && *reason ? reason : "(no reason given)");
    atomic_store_explicit(&n->known, 1, memory_order_release);
    /* Any value but 0 says seen; a loss the launcher announced (rank -1) too. */
    atomic_store_explicit(&tp_notice_record(env, env->topo->rank)->seen, rank >= 0 ? rank + 1 : env->topo->size + 1,
                          memory_order_seq_cst);
}

/* Has every host peer seen an abort (or aborted itself, or gone)? */
static bool tp_notice_host_has_seen(const struct tp_env *env)
{
    const struct tp_notice *n = &env->notice;
    for (int i = 0; i < n->host_peer_count; i++) {
        const struct tp_shm_notice *rec = tp_notice_record(env, n->host_peers[i]);
        if (atomic_load_explicit(&rec->seen, memory_order_acquire) ||
            atomic_load_explicit(&rec->state, memory_order_acquire) == TP_SHM_NOTICE_ABORT)
            continue;
        if (rec->pid > 0 && kill(rec->pid, 0) != 0 && errno == ESRCH) continue;
        return false;
    }
    return true;
}

static void tp_notice_set(struct tp_env *env, int rank, hora_status_t status, const char *reason)
{
    pthread_mutex_lock(&env->notice.lock);
    tp_notice_set_locked(env, rank, status, reason);
    pthread_mutex_unlock(&env->notice.lock);
}

/* The known abort (or loss) as this thread's error. */
static hora_status_t tp_notice_fail(const struct tp_notice *n)
{
    if (n->rank < 0) return status_set(n->status, "%s", n->reason);
    return status_set(n->status, "rank %d aborted: %s", n->rank, n->reason);
}

hora_status_t tp_notice_init(struct tp_env *env)
{
    struct tp_notice *n = &env->notice;
    const struct topo *t = env->topo;
    int err;

    pthread_mutex_init(&n->lock, NULL);
    atomic_init(&n->known, 0);
    atomic_init(&n->last_poll_us, 0);
    n->comm = MPI_COMM_NULL;
    n->sends = NULL;
    n->recv_posted = 0;
    n->host_peers = calloc((size_t)(t->host_size > 0 ? t->host_size : 1), sizeof(int));
    if (!n->host_peers) return status_fail(HORA_ERR_NO_MEMORY, "out of memory for the notice records");
    n->host_peer_count = 0;
    for (int r = 0; r < t->size; r++)
        if (r != t->rank && t->host_of[r] == t->host_index && tp_notice_record(env, r))
            n->host_peers[n->host_peer_count++] = r;
    /* Our own record: a fresh pool is zeros (state none); the pid lets peers
     * tell a dead process from a slow one. */
    struct tp_shm_notice *mine = tp_notice_record(env, t->rank);
    mine->pid = (int32_t)getpid();
    if (env->world == MPI_COMM_NULL) return HORA_OK; /* store bootstrap: no MPI; hora-run tells of deaths */

    err = MPI_Comm_dup(env->world, &n->comm);
    if (err != MPI_SUCCESS) {
        n->comm = MPI_COMM_NULL;
        return status_mpi(err, "MPI_Comm_dup(notices)");
    }
    MPI_Comm_set_errhandler(n->comm, MPI_ERRORS_RETURN);
    err = MPI_Irecv(n->msg, (int)sizeof(n->msg), MPI_BYTE, MPI_ANY_SOURCE, TP_NOTICE_TAG, n->comm, &n->recv);
    if (err != MPI_SUCCESS) return status_mpi(err, "MPI_Irecv(notices)");
    n->recv_posted = 1;
    return HORA_OK;
}

void tp_notice_close(struct tp_env *env)
{
    struct tp_notice *n = &env->notice;
    /* After an abort, MPI may be stuck with dead peers: leave it alone (the
     * process exits without MPI_Finalize). */
    if (!atomic_load(&n->known)) {
        if (n->recv_posted) {
            MPI_Cancel(&n->recv);
            MPI_Wait(&n->recv, MPI_STATUS_IGNORE);
            n->recv_posted = 0;
        }
        if (n->comm != MPI_COMM_NULL) MPI_Comm_free(&n->comm);
    }
    free(n->host_peers);
    n->host_peers = NULL;
    n->host_peer_count = 0;
    pthread_mutex_destroy(&n->lock);
}

/* Every channel block of every rank of this host: sleepers look again. */
static void tp_notice_wake_host(const struct tp_env *env)
{
    const struct tp_notice *n = &env->notice;
    for (int i = -1; i < n->host_peer_count; i++) {
        struct tp_shm_area *a = tp_shm_area_of(env, i < 0 ? env->topo->rank : n->host_peers[i]);
        if (!a) continue;
        for (int set = 0; set < TP_SHM_SET_COUNT; set++)
            for (int ch = 0; ch < TP_MAX_CHANNELS; ch++) tp_shm_wake(&a->channel[set][ch]);
    }
}

static void tp_notice_publish(struct tp_env *env, enum tp_shm_notice_state state, hora_status_t status,
                              const char *reason)
{
    struct tp_shm_notice *mine = tp_notice_record(env, env->topo->rank);
    uint32_t old = atomic_load_explicit(&mine->state, memory_order_acquire);
    if (old >= (uint32_t)state) return;
    mine->status = status;
    snprintf(mine->reason, sizeof(mine->reason), "%s", reason ? reason : "");
    atomic_store_explicit(&mine->state, (uint32_t)state, memory_order_seq_cst);
    tp_notice_wake_host(env);
}

void tp_notice_abort(struct tp_env *env, hora_status_t status, const char *reason, double wait_s)
{
    struct tp_notice *n = &env->notice;
    const struct topo *t = env->topo;
    if (status >= 0) status = HORA_ERR_SHUTDOWN;
    tp_notice_set(env, t->rank, status, reason);
    tp_notice_publish(env, TP_SHM_NOTICE_ABORT, status, reason);
    /* Kept (n->sends) when a send does not complete in time: the process is
     * about to exit, and MPI may still use them. */
    MPI_Request *reqs = NULL;
    int count = 0, sent = 1;
    if (n->comm != MPI_COMM_NULL && t->size > 1 && (reqs = calloc((size_t)t->size, sizeof(*reqs)))) {
        struct tp_notice_wire *w = (struct tp_notice_wire *)(void *)n->sent;
        memset(w, 0, sizeof(*w));
        w->rank = t->rank;
        w->status = status;
        snprintf(w->reason, sizeof(w->reason), "%s", reason ? reason : "");
        for (int r = 0; r < t->size; r++)
            if (r != t->rank &&
                MPI_Isend(w, (int)sizeof(*w), MPI_BYTE, r, TP_NOTICE_TAG, n->comm, &reqs[count]) == MPI_SUCCESS)
                count++;
        sent = 0;
    }
    /* Until every host peer has seen an abort and the sends are out: eager
     * sends to live ranks complete at once, one that has not after 100 ms is
     * to a rank that is gone or stuck (mpirun ends it). */
    const double start = tp_shm_now(), deadline = start + wait_s;
    for (;;) {
        if (!sent && MPI_Testall(count, reqs, &sent, MPI_STATUSES_IGNORE) != MPI_SUCCESS) sent = 1;
        const bool seen = tp_notice_host_has_seen(env);
        const double now = tp_shm_now();
        if ((seen && (sent || now - start > 0.1)) || now > deadline) {
            log_debug("hora_abort: notices %s; host peers %s", sent ? "sent" : "still in flight",
                      seen ? "have seen it" : "have not all seen it");
            break;
        }
        struct timespec nap = {0, 200 * 1000};
        nanosleep(&nap, NULL);
    }
    if (sent)
        free(reqs);
    else
        n->sends = reqs;
}

void tp_notice_lost(struct tp_env *env, const char *reason)
{
    tp_notice_set(env, -1, HORA_ERR_PEER_LOST, reason);
    tp_notice_wake_host(env);
}

hora_status_t tp_notice_await_verdict(struct tp_env *env, hora_status_t status)
{
    if (env->lost_grace_s <= 0 || (status != HORA_ERR_TRANSPORT && status != HORA_ERR_TIMEOUT)) return status;
    char first[STATUS_MESSAGE_BYTES];
    snprintf(first, sizeof(first), "%s", status_message());
    for (const double until = tp_shm_now() + env->lost_grace_s; tp_shm_now() < until;) {
        if (atomic_load_explicit(&env->notice.known, memory_order_acquire)) return tp_notice_fail(&env->notice);
        struct timespec nap = {0, 5 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    return status_set(status, "%s (and no word from the launcher within %.1f s)", first, env->lost_grace_s);
}

void tp_notice_shutdown(struct tp_env *env)
{
    tp_notice_publish(env, TP_SHM_NOTICE_SHUTDOWN, HORA_ERR_SHUTDOWN, "hora_shutdown");
}

hora_status_t tp_notice_known(const struct tp_env *env)
{
    const struct tp_notice *n = &env->notice;
    return atomic_load_explicit(&n->known, memory_order_acquire) ? tp_notice_fail(n) : HORA_OK;
}

bool tp_notice_aborted(const struct tp_env *env)
{
    return atomic_load_explicit(&env->notice.known, memory_order_acquire) != 0;
}

static bool tp_notice_is_member(const int *members, int n, int rank)
{
    if (!members) return rank < n;
    for (int i = 0; i < n; i++)
        if (members[i] == rank) return true;
    return false;
}

hora_status_t tp_notice_check(struct tp_env *env, const int *members, int members_n)
{
    struct tp_notice *n = &env->notice;
    if (atomic_load_explicit(&n->known, memory_order_acquire)) return tp_notice_fail(n);
    const int64_t now = tp_notice_now_us();
    int64_t last = atomic_load_explicit(&n->last_poll_us, memory_order_relaxed);
    if (now - last < TP_NOTICE_POLL_US || !atomic_compare_exchange_strong_explicit(
                                              &n->last_poll_us, &last, now, memory_order_relaxed, memory_order_relaxed))
        return HORA_OK;

    for (int i = 0; i < n->host_peer_count; i++) {
        const int r = n->host_peers[i];
        const struct tp_shm_notice *rec = tp_notice_record(env, r);
        uint32_t state = atomic_load_explicit(&rec->state, memory_order_acquire);
        if (state == TP_SHM_NOTICE_ABORT) {
            char reason[TP_NOTICE_REASON_BYTES];
            memcpy(reason, rec->reason, sizeof(reason));
            reason[sizeof(reason) - 1] = '\0';
            tp_notice_set(env, r, rec->status, reason);
            return tp_notice_fail(n);
        }
        if (state == TP_SHM_NOTICE_SHUTDOWN && tp_notice_is_member(members, members_n, r))
            return status_set(HORA_ERR_SHUTDOWN,
                              "rank %d called hora_shutdown while rank %d waited for it in a collective: every rank "
                              "must call the same collectives before shutting down",
                              r, env->topo->rank);
    }
    if (pthread_mutex_trylock(&n->lock) == 0) {
        int arrived = 0;
        if (n->recv_posted && MPI_Test(&n->recv, &arrived, MPI_STATUS_IGNORE) == MPI_SUCCESS && arrived) {
            struct tp_notice_wire *w = (struct tp_notice_wire *)(void *)n->msg;
            w->reason[sizeof(w->reason) - 1] = '\0';
            n->recv_posted = 0;
            tp_notice_set_locked(env, w->rank, w->status, w->reason);
        }
        pthread_mutex_unlock(&n->lock);
        if (arrived) return tp_notice_fail(n);
    }
    return HORA_OK;
}

bool tp_notice_host_alive(const struct tp_env *env, int *dead_rank)
{
    const struct tp_notice *n = &env->notice;
    for (int i = 0; i < n->host_peer_count; i++) {
        const struct tp_shm_notice *rec = tp_notice_record(env, n->host_peers[i]);
        if (rec->pid > 0 && kill(rec->pid, 0) != 0 && errno == ESRCH) {
            if (dead_rank) *dead_rank = n->host_peers[i];
            return false;
        }
    }
    return true;
}
