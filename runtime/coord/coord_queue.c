/* coord_queue.c - the queue between application threads and the
 * coordinator thread: submission, waiting and polling, completion, and the
 * coordinator's nap between cycles, whose deadline those move (immediate,
 * deferred by HORA_DEFER_MS, the rest of a cycle, or idle). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"
#include "coord/coord_queue.h"
#include "coord/flight.h"
#include "coord/stack.h"

void coord_queue_complete(struct coord_queue *q, struct hora_request *req, hora_status_t status, const char *error)
{
    pthread_mutex_lock(&q->lock);
    if (!req->done) {
        req->status = status;
        if (error && *error && !req->error) req->error = strdup(error);
        req->done = 1;
        flight_end(q->flight, req->flight_seq, status);
        /* Streams waiting in hora_stream_wait go on (after a failure too). */
        if (req->flag_slot >= 0) mem_dev_flag_signal(q->dev, req->flag_slot, req->flag_value);
        if (coord_map_get(&q->inflight, req->name) == req) coord_map_remove(&q->inflight, req->name);
        pthread_cond_broadcast(&q->done_cond);
    }
    pthread_mutex_unlock(&q->lock);
}

/* Under q->lock: whether host requests wait up to HORA_DEFER_MS before
 * their cycle (see coord_queue_nap): only while no thread waits on a request or
 * polls one, and never once device memory has come. */
static int coord_defers(const struct coord_queue *q)
{
    return q->defer_us > 0 && !q->saw_device && !q->waiting_threads && !q->polled;
}

hora_status_t coord_queue_wait(struct coord_queue *q, struct hora_request *req)
{
    pthread_mutex_lock(&q->lock);
    if (!req->done) {
        q->waiting_threads++;
        coll_app_waiting(q->coll, 1);
        /* Wanted now: a deferral ends, and so does a nap that new requests
         * (this one, submitted while nothing waited) sit out. */
        if (q->nap_kind == COORD_NAP_DEFER || q->incoming) pthread_cond_signal(&q->work_cond);
        while (!req->done) pthread_cond_wait(&q->done_cond, &q->lock);
        coll_app_waiting(q->coll, -1);
        /* coord_stop frees the coordinator only once no thread is left in here. */
        if (--q->waiting_threads == 0 && q->stopped) pthread_cond_broadcast(&q->done_cond);
    }
    hora_status_t status = req->status;
    pthread_mutex_unlock(&q->lock);
    return status;
}

int coord_queue_is_done(struct coord_queue *q, struct hora_request *req, hora_status_t *status)
{
    pthread_mutex_lock(&q->lock);
    int done = req->done;
    if (done)
        *status = req->status;
    else {
        q->polled = 1; /* wanted: no deferral until nothing is in flight */
        if (q->nap_kind == COORD_NAP_DEFER || q->incoming) pthread_cond_signal(&q->work_cond);
    }
    pthread_mutex_unlock(&q->lock);
    return done;
}

hora_status_t coord_queue_submit(struct coord_queue *q, struct hora_request **reqs, int n)
{
    pthread_mutex_lock(&q->lock);
    if (q->stopped || q->stop_requested) {
        hora_status_t status = q->stopped ? q->stop_status : HORA_ERR_SHUTDOWN;
        pthread_mutex_unlock(&q->lock);
        return status_set(status, "'%s': the runtime has shut down%s%s", reqs[0]->name, q->stop_reason[0] ? ": " : "",
                          q->stop_reason);
    }
    for (int i = 0; i < n; i++)
        if (coord_map_get(&q->inflight, reqs[i]->name)) {
            pthread_mutex_unlock(&q->lock);
            return status_set(HORA_ERR_DUPLICATE, "a request named '%s' is already in flight on rank %d", reqs[i]->name,
                              q->rank);
        }
    const int64_t now_us = coord_now_us();
    stack_capture_note_submit(); /* the thread a stall's stack shows */
    for (int i = 0; i < n; i++) {
        reqs[i]->enqueue_us = now_us;
        reqs[i]->flight_seq = flight_enqueue(q->flight, reqs[i], q->set_id, now_us);
        if (reqs[i]->meta.memory != HORA_MEMORY_HOST) q->saw_device = 1;
        if (coord_map_put(&q->inflight, reqs[i]->name, reqs[i])) {
            for (int j = 0; j < i; j++) coord_map_remove(&q->inflight, reqs[j]->name);
            pthread_mutex_unlock(&q->lock);
            return status_fail(HORA_ERR_NO_MEMORY, "out of memory enqueuing '%s'", reqs[i]->name);
        }
        reqs[i]->next = NULL;
        if (q->incoming_tail)
            q->incoming_tail->next = reqs[i];
        else
            q->incoming = reqs[i];
        q->incoming_tail = reqs[i];
    }
    /* The nap ends at once for a request that starts at once; a deferred one
     * moves an idle nap's deadline to the deferral's. */
    if (!coord_defers(q) || q->nap_kind == COORD_NAP_IDLE) pthread_cond_signal(&q->work_cond);
    pthread_mutex_unlock(&q->lock);
    return HORA_OK;
}

/* ------------------------------------------------------------------- nap */

/* The nap after a cycle that started at start_us. Its deadline follows
 * from the state, read again at every wake-up (a submission, a waiter or a
 * poll signals work_cond when it may move it):
 *  - requests have come and start at once: no nap (the framework enqueues
 *    faster than a cycle turns, so requests coming together still meet in
 *    one cycle);
 *  - requests have come, or are pending, but nothing wants them yet
 *    (coord_defers): until the first point at or after the first arrival
 *    on a grid HORA_DEFER_MS apart, counted from the end of the last cycle's
 *    allreduce. On a machine whose cores all compute (CPU training), a
 *    coordinator that starts each gradient's all-reduce at once interrupts
 *    backprop hundreds of times a step, for each negotiation and each nap
 *    waiting for a peer that is still computing; deferred, the gradients
 *    meet in a few cycles, most of them when the step waits for them;
 *  - pending, started at once: the rest of the cycle;
 *  - nothing in flight here: skip cycles until a request (or hora_shutdown)
 *    arrives. A peer's cycle then waits for this rank in the cycle's
 *    allreduce, which is what it would do anyway - no response can run
 *    without this rank submitting. Between training steps, that keeps the
 *    coordinators from interrupting compute a thousand times a second. An
 *    idle rank still turns a cycle every stall-inspection period, so rank 0
 *    can see that it lacks what others wait for. Rank 0 is never idle while
 *    its table holds names (the stall inspector's state). */
void coord_queue_nap(struct coord_queue *q, int64_t start_us, int64_t idle_us, int64_t cycle_us, int busy,
                     int64_t sync_us)
{
    if (idle_us < cycle_us) idle_us = cycle_us;
    const int64_t defer_us = q->defer_us > cycle_us ? q->defer_us : cycle_us;
    pthread_mutex_lock(&q->lock);
    if (!busy && !q->incoming) q->polled = 0; /* what was polled has completed */
    while (!q->stop_requested && !q->abort_requested) {
        const int defer = coord_defers(q);
        int64_t deadline_us = start_us + idle_us;
        q->nap_kind = COORD_NAP_IDLE;
        if (q->incoming && !defer) break;
        if (defer && (q->incoming || busy)) {
            /* On a grid of deferrals from the last cycle's allreduce, so
             * that ranks whose requests came within one deferral of each
             * other meet without waiting for one another. */
            const int64_t since = q->incoming ? q->incoming->enqueue_us - sync_us : 0;
            deadline_us = sync_us + defer_us * (since > 0 ? (since + defer_us - 1) / defer_us : 1);
            q->nap_kind = COORD_NAP_DEFER;
        } else if (busy) {
            deadline_us = start_us + cycle_us;
            q->nap_kind = COORD_NAP_CYCLE;
        }
        const int64_t now_us = coord_now_us();
        if (now_us >= deadline_us) break;
        struct timespec now, until;
        clock_gettime(CLOCK_REALTIME, &now);
        const int64_t ns = (int64_t)now.tv_nsec + (deadline_us - now_us) * 1000;
        until.tv_sec = now.tv_sec + (time_t)(ns / 1000000000);
        until.tv_nsec = (long)(ns % 1000000000);
        pthread_cond_timedwait(&q->work_cond, &q->lock, &until);
    }
    q->nap_kind = COORD_NAP_CYCLE;
    pthread_mutex_unlock(&q->lock);
}
