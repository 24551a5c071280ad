/* tp_mpi.c - the MPI point-to-point transport: the fallback when nothing
 * faster connects, and a cross-check in the tests. Never the fast path.
 * Waits poll MPI_Test so that a silent peer becomes HORA_ERR_TIMEOUT after
 * HORA_TIMEOUT_S instead of a hang, and a rank's abort (tp_notice.c) ends
 * them with its reason. The outcome of an operation is agreed above, in
 * coll/outcome.c (hora.h).
 *
 * Requests live here, not in the caller's struct tp_req (which holds only an
 * index into s->reqs): after a failed wait the caller frees the buffers of
 * its other requests without waiting for them, so the transport must be able
 * to find and cancel every request of the channel still in flight. A receive
 * left pending into a freed buffer is written when the late message comes
 * (a rank resumed after a SIGSTOP completes the operation its peers gave up).
 * So the first failure cancels them all (MPI_Cancel) and waits, a bounded
 * time, until MPI has let them go; a request MPI does not let go (Open MPI
 * cannot cancel a send, nor a receive already matched to a message whose data
 * is still coming) stays parked in s->reqs, still tested at every later call
 * and at close, and is never reused. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/status.h"
#include "tp/tp.h"

/* After a failure: how long to wait for cancelled requests to complete. A
 * cancelled receive that matched nothing completes at once (Open MPI). */
#define TP_MPI_CANCEL_S 0.5

struct tp_mpi {
    MPI_Comm comm;     /* private: its tags never meet anyone else's */
    MPI_Request *reqs; /* MPI_REQUEST_NULL: a free slot */
    int *is_recv;      /* per slot: a receive (its buffer is written) */
    int cap;
};

/* struct tp_req's bytes hold the index of the request's slot. */
static int *tp_mpi_slot(struct tp_req *req) { return (int *)(void *)req->opaque; }

static bool tp_mpi_can_connect(const struct tp_env *env, int peer)
{
    (void)peer;
    return !env->disable[TP_KIND_MPI];
}

static hora_status_t tp_mpi_connect(struct tp *tp)
{
    struct tp_mpi *s = calloc(1, sizeof(*s));
    int err;

    if (!s) return status_fail(HORA_ERR_NO_MEMORY, "out of memory connecting the mpi transport");
    err = MPI_Comm_dup(tp->env->world, &s->comm);
    if (err != MPI_SUCCESS) {
        free(s);
        return status_mpi(err, "MPI_Comm_dup(mpi transport)");
    }
    tp->state = s;
    return HORA_OK;
}

/* A free slot for a new request (growing the table), or -1. */
static int tp_mpi_slot_take(struct tp_mpi *s, int is_recv)
{
    for (int i = 0; i < s->cap; i++)
        if (s->reqs[i] == MPI_REQUEST_NULL) {
            s->is_recv[i] = is_recv;
            return i;
        }
    int ncap = s->cap ? 2 * s->cap : 32;
    MPI_Request *r = realloc(s->reqs, (size_t)ncap * sizeof(*r));
    if (!r) return -1;
    s->reqs = r;
    int *k = realloc(s->is_recv, (size_t)ncap * sizeof(*k));
    if (!k) return -1;
    s->is_recv = k;
    for (int i = s->cap; i < ncap; i++) s->reqs[i] = MPI_REQUEST_NULL;
    int slot = s->cap;
    s->cap = ncap;
    s->is_recv[slot] = is_recv;
    return slot;
}

/* Cancel every request in flight and wait up to seconds for MPI to let them
 * go. Returns how many receives are still pending (0: no buffer of this
 * channel can be written any more). */
static int tp_mpi_cancel_all(struct tp_mpi *s, double seconds)
{
    for (int i = 0; i < s->cap; i++)
        if (s->reqs[i] != MPI_REQUEST_NULL) MPI_Cancel(&s->reqs[i]);
    const double deadline = MPI_Wtime() + seconds;
    for (;;) {
        int recvs = 0, live = 0;
        for (int i = 0; i < s->cap; i++) {
            if (s->reqs[i] == MPI_REQUEST_NULL) continue;
            int done = 0;
            MPI_Test(&s->reqs[i], &done, MPI_STATUS_IGNORE); /* sets MPI_REQUEST_NULL when done */
            if (done) continue;
            live++;
            recvs += s->is_recv[i];
        }
        if (!live || MPI_Wtime() > deadline) return recvs;
        sched_yield();
    }
}

/* After a failure: cancel the channel's other requests (the caller will free
 * their buffers). */
static void tp_mpi_give_up(struct tp *tp)
{
    int left = tp_mpi_cancel_all(tp->state, TP_MPI_CANCEL_S);
    if (left)
        log_warn("mpi transport: %d receive(s) of a failed operation could not be cancelled within %.1f s "
                 "(matched to a message still arriving); their buffers may still be written",
                 left, TP_MPI_CANCEL_S);
}

static void tp_mpi_close(struct tp *tp)
{
    struct tp_mpi *s = tp->state;
    if (!s) return;
    /* Requests parked after a failure (none on a healthy channel): one more
     * try, then what still has not completed is handed to MPI, which frees it
     * when it does. */
    tp_mpi_cancel_all(s, 0.0);
    for (int i = 0; i < s->cap; i++)
        if (s->reqs[i] != MPI_REQUEST_NULL) MPI_Request_free(&s->reqs[i]);
    MPI_Comm_free(&s->comm);
    free(s->reqs);
    free(s->is_recv);
    free(s);
    tp->state = NULL;
}

static hora_status_t tp_mpi_post(struct tp *tp, int peer, void *buf, size_t bytes, int tag, struct tp_req *req,
                                 int is_recv)
{
    struct tp_mpi *s = tp->state;
    if (bytes > (size_t)INT32_MAX)
        return status_fail(HORA_ERR_INVALID_ARG, "mpi transport: message of %zu bytes exceeds 2 GiB", bytes);
    int slot = tp_mpi_slot_take(s, is_recv);
    if (slot < 0) return status_fail(HORA_ERR_NO_MEMORY, "out of memory for mpi transport requests");
    int err = is_recv ? MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, s->comm, &s->reqs[slot])
                      : MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, s->comm, &s->reqs[slot]);
    if (err != MPI_SUCCESS) {
        s->reqs[slot] = MPI_REQUEST_NULL;
        tp_mpi_give_up(tp);
        return status_mpi(err, is_recv ? "MPI_Irecv" : "MPI_Isend");
    }
    *tp_mpi_slot(req) = slot;
    return HORA_OK;
}

static hora_status_t tp_mpi_isend(struct tp *tp, int peer, const void *buf, size_t bytes, int tag, struct tp_req *req)
{
    return tp_mpi_post(tp, peer, (void *)buf, bytes, tag, req, 0);
}

static hora_status_t tp_mpi_irecv(struct tp *tp, int peer, void *buf, size_t bytes, int tag, struct tp_req *req)
{
    return tp_mpi_post(tp, peer, buf, bytes, tag, req, 1);
}

/* On failure every request of the channel is cancelled (tp_mpi_give_up). */
static hora_status_t tp_mpi_wait(struct tp *tp, int peer, struct tp_req *req)
{
    struct tp_mpi *s = tp->state;
    MPI_Request *mreq = &s->reqs[*tp_mpi_slot(req)];
    double deadline = 0;
    int done = 0;

    tp->env->last_peer[tp->channel] = peer;
    for (unsigned long spins = 0;; spins++) {
        int err = MPI_Test(mreq, &done, MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS) {
            tp_mpi_give_up(tp);
            return status_mpi(err, "MPI_Test");
        }
        if (done) return HORA_OK;
        /* The deadline runs from the first test that found nothing: on a
         * loaded machine MPI_Test yields, and a thousand tests can take a
         * second, which once passed before the clock was even read. */
        if (deadline == 0) deadline = MPI_Wtime() + tp->env->timeout_s;
        if ((spins & 63) == 63) {
            /* A rank that aborted will never send: fail with its reason. */
            hora_status_t status = tp_notice_check(tp->env, NULL, 0);
            if (status < 0) {
                tp_mpi_give_up(tp);
                return status;
            }
            if (MPI_Wtime() > deadline) {
                status = status_fail(HORA_ERR_TIMEOUT,
                                     "mpi transport: rank %d heard nothing from rank %d for %.1f s (HORA_TIMEOUT_S)",
                                     tp->env->topo->rank, peer, tp->env->timeout_s);
                status_blame(status, peer);
                tp_mpi_give_up(tp);
                return status;
            }
            if ((spins & 1023) == 1023) sched_yield();
        }
    }
}
const struct tp_ops tp_mpi_ops = {
    .name = "mpi",
    .caps = TP_CAP_MESSAGE,
    .memory_kinds = 1u << HORA_MEMORY_HOST,
    .can_connect = tp_mpi_can_connect,
    .connect = tp_mpi_connect,
    .close = tp_mpi_close,
    .isend = tp_mpi_isend,
    .irecv = tp_mpi_irecv,
    .wait = tp_mpi_wait,
    TP_OPS_NO_PEER_MEMORY,
};
