/* coord_queue.c - the queue between application threads and the
 * coordinator thread: submission, waiting and polling, completion, and the
 * coordinator's nap between cycles, whose deadline those move (immediate,
 * deferred by HORA_DEFER_MS, the rest of a cycle, or idle). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"
#include "coord/coord_core.h"
#include "coord/coord_queue.h"
#include "coord/flight.h"
#include "coord/stack.h"

void coord_complete(struct coord *c, struct hora_request *req, hora_status_t status, const char *error)
{
    pthread_mutex_lock(&c->lock);
    if (!req->done) {
        req->status = status;
        if (error && *error && !req->error) req->error = strdup(error);
        req->done = 1;
        flight_end(c->flight, req->flight_seq, status);
        /* Streams waiting in hora_stream_wait go on (after a failure too). */
        if (req->flag_slot >= 0) mem_dev_flag_signal(c->dev, req->flag_slot, req->flag_value);
        if (coord_map_get(&c->inflight, req->name) == req) coord_map_remove(&c->inflight, req->name);
        pthread_cond_broadcast(&c->done_cond);
    }
    pthread_mutex_unlock(&c->lock);
}

/* A request leaves the coordinator's tables and completes. */
void coord_finish_pending(struct coord *c, struct hora_request *req, hora_status_t status, const char *error)
{
    if (coord_map_get(&c->pending, req->name) == req) coord_map_remove(&c->pending, req->name);
    coord_cache_unwait(&c->cache, req);
    /* A cache waiter evicted when no slow path runs waits in the uncached
     * list for the next one; a refusal of its name (another rank's
     * submission, while a rank has joined) may end it first: it must not be
     * sent after that. */
    coord_fifo_remove(&c->uncached, req);
    if (req == c->join_req) c->join_req = NULL;
    coord_complete(c, req, status, error);
}

/* Under c->lock: whether host requests wait up to HORA_DEFER_MS before
 * their cycle (see coord_nap): only while no thread waits on a request or
 * polls one, and never once device memory has come. */
static int coord_defers(const struct coord *c)
{
    return c->defer_us > 0 && !c->saw_device && !c->waiting_threads && !c->polled;
}

hora_status_t coord_wait(struct coord *c, struct hora_request *req)
{
    pthread_mutex_lock(&c->lock);
    if (!req->done) {
        c->waiting_threads++;
        coll_app_waiting(c->coll, 1);
        /* Wanted now: a deferral ends, and so does a nap that new requests
         * (this one, submitted while nothing waited) sit out. */
        if (c->nap_kind == COORD_NAP_DEFER || c->incoming) pthread_cond_signal(&c->work_cond);
        while (!req->done) pthread_cond_wait(&c->done_cond, &c->lock);
        coll_app_waiting(c->coll, -1);
        /* coord_stop frees c only once no thread is left in here. */
        if (--c->waiting_threads == 0 && c->stopped) pthread_cond_broadcast(&c->done_cond);
    }
    hora_status_t status = req->status;
    pthread_mutex_unlock(&c->lock);
    return status;
}

int coord_is_done(struct coord *c, struct hora_request *req, hora_status_t *status)
{
    pthread_mutex_lock(&c->lock);
    int done = req->done;
    if (done)
        *status = req->status;
    else {
        c->polled = 1; /* wanted: no deferral until nothing is in flight */
        if (c->nap_kind == COORD_NAP_DEFER || c->incoming) pthread_cond_signal(&c->work_cond);
    }
    pthread_mutex_unlock(&c->lock);
    return done;
}

hora_status_t coord_submit(struct coord *c, struct hora_request **reqs, int n)
{
    pthread_mutex_lock(&c->lock);
    if (c->stopped || c->stop_requested) {
        hora_status_t status = c->stopped ? c->stop_status : HORA_ERR_SHUTDOWN;
        pthread_mutex_unlock(&c->lock);
        return status_set(status, "'%s': the runtime has shut down%s%s", reqs[0]->name,
                          c->stop_reason[0] ? ": " : "", c->stop_reason);
    }
    for (int i = 0; i < n; i++)
        if (coord_map_get(&c->inflight, reqs[i]->name)) {
            pthread_mutex_unlock(&c->lock);
            return status_set(HORA_ERR_DUPLICATE, "a request named '%s' is already in flight on rank %d",
                              reqs[i]->name, c->rank);
        }
    const int64_t now_us = coord_now_us();
    stack_capture_note_submit(); /* the thread a stall's stack shows */
    for (int i = 0; i < n; i++) {
        reqs[i]->enqueue_us = now_us;
        reqs[i]->flight_seq = flight_enqueue(c->flight, reqs[i], c->set_id, now_us);
        if (reqs[i]->meta.memory != HORA_MEMORY_HOST) c->saw_device = 1;
        if (coord_map_put(&c->inflight, reqs[i]->name, reqs[i])) {
            for (int j = 0; j < i; j++) coord_map_remove(&c->inflight, reqs[j]->name);
            pthread_mutex_unlock(&c->lock);
            return status_fail(HORA_ERR_NO_MEMORY, "out of memory enqueuing '%s'", reqs[i]->name);
        }
        reqs[i]->next = NULL;
        if (c->incoming_tail)
            c->incoming_tail->next = reqs[i];
        else
            c->incoming = reqs[i];
        c->incoming_tail = reqs[i];
    }
    /* The nap ends at once for a request that starts at once; a deferred one
     * moves an idle nap's deadline to the deferral's. */
    if (!coord_defers(c) || c->nap_kind == COORD_NAP_IDLE) pthread_cond_signal(&c->work_cond);
    pthread_mutex_unlock(&c->lock);
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
void coord_nap(struct coord *c, int64_t start_us, int64_t idle_us)
{
    const int64_t cycle_us = (int64_t)(c->settings.cycle_time_ms * 1000.0);
    if (idle_us < cycle_us) idle_us = cycle_us;
    const int64_t defer_us = c->defer_us > cycle_us ? c->defer_us : cycle_us;
    const int busy = c->pending.count > 0 || coord_table_busy(&c->table);
    pthread_mutex_lock(&c->lock);
    if (!busy && !c->incoming) c->polled = 0; /* what was polled has completed */
    while (!c->stop_requested && !c->abort_requested) {
        const int defer = coord_defers(c);
        int64_t deadline_us = start_us + idle_us;
        c->nap_kind = COORD_NAP_IDLE;
        if (c->incoming && !defer) break;
        if (defer && (c->incoming || busy)) {
            /* On a grid of deferrals from the last cycle's allreduce, so
             * that ranks whose requests came within one deferral of each
             * other meet without waiting for one another. */
            const int64_t since = c->incoming ? c->incoming->enqueue_us - c->sync_us : 0;
            deadline_us = c->sync_us + defer_us * (since > 0 ? (since + defer_us - 1) / defer_us : 1);
            c->nap_kind = COORD_NAP_DEFER;
        } else if (busy) {
            deadline_us = start_us + cycle_us;
            c->nap_kind = COORD_NAP_CYCLE;
        }
        const int64_t now_us = coord_now_us();
        if (now_us >= deadline_us) break;
        struct timespec now, until;
        clock_gettime(CLOCK_REALTIME, &now);
        const int64_t ns = (int64_t)now.tv_nsec + (deadline_us - now_us) * 1000;
        until.tv_sec = now.tv_sec + (time_t)(ns / 1000000000);
        until.tv_nsec = (long)(ns % 1000000000);
        pthread_cond_timedwait(&c->work_cond, &c->lock, &until);
    }
    c->nap_kind = COORD_NAP_CYCLE;
    pthread_mutex_unlock(&c->lock);
}
