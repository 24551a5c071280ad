/* coord_core.c - the helpers every piece of the coordinator may call: the
 * polling of its waits (naps, yields, notices), MPI waits with a deadline,
 * the inspection period, and the buffers an abandoned MPI request may
 * still use, kept to the end of the process. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "base/status.h"
#include "coord/coord_core.h"

/* Waits of the coordinator poll MPI_Test, with naps rather than a blocking
 * call: a blocking MPI call busy-polls, and on a machine whose cores also
 * train, a coordinator spinning while it waits for a slower rank steals
 * their time (while an application thread blocks in hora_wait it polls,
 * yielding). The naps double from 20 us up to a quarter of the cycle time:
 * a peer that is busy with backprop may take milliseconds to come, and
 * thousands of 20 us wake-ups (each a context switch on a core that trains)
 * cost more than the at most cycle/4 of extra latency once it does. Between
 * naps it looks for notices (tp_notice.c): a rank that aborted will never
 * come, so the wait ends with its reason. */
void coord_poll_init(const struct coord *c, struct coord_poll *p)
{
    p->nap_ns = 20 * 1000;
    p->max_nap_ns = (long)(c->settings.cycle_time_ms * 1e6 / 4);
    if (p->max_nap_ns < p->nap_ns) p->max_nap_ns = p->nap_ns;
    p->polls = 0;
}

/* After a poll that found nothing: HORA_OK to poll again, or a rank's abort. */
hora_status_t coord_poll_pause(struct coord *c, struct coord_poll *p)
{
    if (++p->polls < 64) return HORA_OK;
    HORA_CHECK(coll_check_abort(c->coll));
    /* An application thread blocked in hora_wait leaves its core to us:
     * poll, yielding, instead of napping (a nap of up to a quarter cycle
     * after the last rank came cost every small cached all-reduce tens to
     * hundreds of microseconds). */
    if (coll_app_waits(c->coll)) {
        sched_yield();
        return HORA_OK;
    }
    struct timespec nap = {0, p->nap_ns};
    nanosleep(&nap, NULL);
    p->nap_ns = p->nap_ns * 2 < p->max_nap_ns ? p->nap_ns * 2 : p->max_nap_ns;
    return HORA_OK;
}

hora_status_t coord_mpi_wait(struct coord *c, MPI_Request *req, double timeout_s, const char *what)
{
    struct coord_poll poll;
    const int64_t start_us = coord_now_us();
    coord_poll_init(c, &poll);
    for (;;) {
        int done = 0, err = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS) return status_mpi(err, what);
        if (done) return HORA_OK;
        if (timeout_s > 0 && poll.polls >= 64 && (double)(coord_now_us() - start_us) * 1e-6 > timeout_s)
            return status_fail(HORA_ERR_TIMEOUT,
                               "coordinator %s: no answer from every rank within %g s "
                               "(HORA_TIMEOUT_S)",
                               what, timeout_s);
        HORA_CHECK(coord_poll_pause(c, &poll));
    }
}

/* How often rank 0's stall inspector looks, and an idle rank turns a cycle:
 * a quarter of HORA_STALL_CHECK_S, at most a second, and at most a quarter
 * of HORA_TIMEOUT_S (the agreement's deadline: an idle rank must come well
 * within it). */
int64_t coord_inspect_period_us(const struct coord *c)
{
    int64_t every = (int64_t)(c->cfg->stall_check_s * 0.25e6);
    const int64_t deadline_quarter = (int64_t)(c->cfg->timeout_s * 0.25e6);
    if (every > deadline_quarter) every = deadline_quarter;
    return every > 1000000 ? 1000000 : every;
}

/* The buffers of agreements abandoned after a failure: kept to the end of
 * the process (MPI may progress their requests from any later call, and
 * write into them), reachable so that LeakSanitizer does not count them. */
struct coord_abandoned {
    struct coord_abandoned *next;
    void *buf;
};
static struct coord_abandoned *coord_abandoned_list;
static pthread_mutex_t coord_abandoned_lock = PTHREAD_MUTEX_INITIALIZER;

void coord_abandon(void *buf)
{
    struct coord_abandoned *a = buf ? malloc(sizeof(*a)) : NULL;
    if (!a) return; /* then it leaks unreachable, which is still safe */
    a->buf = buf;
    pthread_mutex_lock(&coord_abandoned_lock);
    a->next = coord_abandoned_list;
    coord_abandoned_list = a;
    pthread_mutex_unlock(&coord_abandoned_lock);
}

void coord_keep_in_flight(struct coord *c, void *buf)
{
    c->agree_in_flight = 1; /* the communicator stays too */
    coord_abandon(buf);
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
    coord_queue_complete(&c->queue, req, status, error);
}
