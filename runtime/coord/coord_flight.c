/* coord_flight.c - the coordinator's hooks into the flight recorder
 * (flight.c): which of its requests were negotiated, started, waited on
 * whom, and when the recorder is written for a failed coordinator. */
#include "base/log.h"
#include "coord/coord_flight.h"
#include "coord/flight.h"
#include "coord/straggler.h"

void coord_flight_negotiated(struct coord *c, const struct coord_responses *list)
{
    if (!c->queue.flight) return;
    for (int i = 0; i < list->count; i++)
        for (int t = 0; t < list->items[i].ntensors; t++) {
            const struct hora_request *req = coord_map_get(&c->pending, list->items[i].names[t]);
            if (req) flight_mark(c->queue.flight, req->flight_seq, FLIGHT_STATE_NEGOTIATED);
        }
}

void coord_flight_running(struct coord *c, struct hora_request **reqs, int n)
{
    for (int t = 0; t < n; t++)
        if (reqs[t]) straggler_note(c->straggler, reqs[t]->enqueue_us);
    if (!c->queue.flight) return;
    if (!c->members) coll_wait_forget(c->coll, COLL_PURPOSE_COORD);
    for (int t = 0; t < n; t++)
        if (reqs[t]) flight_mark(c->queue.flight, reqs[t]->flight_seq, FLIGHT_STATE_RUNNING);
}

void coord_flight_waited(struct coord *c, struct hora_request **reqs, int n)
{
    if (!c->queue.flight) return;
    const char *transport = "mpi";
    int peer = -1; /* a process set's MPI collectives do not say whom they waited for */
    for (int t = 0; t < n; t++) {
        if (!reqs[t]) continue;
        if (!c->members && peer < 0)
            peer = coll_last_wait(c->coll, COLL_PURPOSE_COORD, (hora_memory_t)reqs[t]->meta.memory, &transport);
        flight_waited(c->queue.flight, reqs[t]->flight_seq, transport, peer);
    }
}

void coord_flight_dump(struct coord *c, const char *reason)
{
    if (!flight_has_dir(c->queue.flight)) return;
    c->flight_dumped = 1;
    flight_dump(c->queue.flight, reason);
    log_warn("flight recorder written to %s/flight.%d.txt (%s)", c->cfg->flight_dir, flight_rank(c->queue.flight),
             reason);
}

void coord_flight_fail(struct coord *c, hora_status_t status)
{
    if (!c->queue.flight || c->flight_dumped || status == HORA_ERR_SHUTDOWN) return;
    coord_flight_dump(c, status == HORA_ERR_TIMEOUT ? "timeout" : "error");
}
