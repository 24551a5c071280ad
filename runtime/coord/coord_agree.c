/* coord_agree.c - the cycle's agreement on its bit vector (coord_cycle.c
 * runs the cycle around it): the world's on its channel, a process set's as
 * a star of point-to-point messages around rank 0 that merges every rank's
 * vector and names a rank that does not come within HORA_TIMEOUT_S (its
 * waits poll as coord_core.c does). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/status.h"
#include "coord/coord_agree.h"

/* The merge of one rank's cycle vector into another's. Layout:
 * [AND words][OR requested][OR invalid][AND flags][OR flags]. */
static void coord_bits_merge(const uint64_t *in, uint64_t *inout, int words)
{
    const int n = 3 * words + 2;
    for (int i = 0; i < n; i++) {
        if (i < words || i == 3 * words)
            inout[i] &= in[i];
        else
            inout[i] |= in[i];
    }
}

/*
 * The cycle's agreement: a star of point-to-point messages on c->comm, with
 * a deadline. Every rank sends its vector to rank 0; rank 0 merges them and
 * sends the result back, with a verdict word: 0, or (silent rank + 1) |
 * (silent count << 32) when some rank's vector did not come within
 * HORA_TIMEOUT_S. An alive rank always comes within that: an idle one turns
 * a cycle every inspection period (a quarter of the deadline at most), a
 * busy one runs the same responses as everyone else, each collective under
 * its own deadline. So a rank that does not come is stopped (SIGSTOP, a
 * debugger) or its coordinator is stuck, and since rank 0 knows whose
 * vectors came, every other rank fails with a message naming it. A rank that
 * hears nothing from rank 0 waits an inspection period longer than rank 0
 * does (rank 0 may have come that much later), then names rank 0. A silent
 * rank that resumes finds its verdict waiting. (An MPI_Iallreduce, which
 * this replaces, can say neither when to give up nor who was missing; the
 * star costs rank 0 n-1 receives and sends, against log2(n) rounds.)
 * On failure, requests that MPI has not let go (a send cannot be cancelled)
 * keep their buffers: c->agree_in_flight.
 */
#define COORD_TAG_VECTOR 101
#define COORD_TAG_VERDICT 102

hora_status_t coord_agree_silent(struct coord *c, const int *silent, int count, int decided_here)
{
    const int first = coord_world_rank(c, silent[0]);
    char others[64] = "";
    if (count > 1) snprintf(others, sizeof(others), " (and %d more rank%s)", count - 1, count > 2 ? "s" : "");
    return status_fail(HORA_ERR_TIMEOUT,
                       "coordinator: rank %d%s did not join the negotiation within %.1f s (HORA_TIMEOUT_S): "
                       "stopped (SIGSTOP, a debugger) or stuck outside hora%s",
                       first, others, c->cfg->timeout_s, decided_here ? "" : " (seen by rank 0)");
}

static hora_status_t coord_agree_root(struct coord *c)
{
    const int n = 3 * c->words + 2, size = c->size;
    uint64_t *in = c->agree, *reply = c->agree + (size_t)size * (size_t)n;
    MPI_Request *reqs = c->agree_reqs;
    hora_status_t status = HORA_OK;
    int err = MPI_SUCCESS, pending = 0;
    struct coord_poll poll;

    for (int r = 1; r < size && err == MPI_SUCCESS; r++, pending++)
        err = MPI_Irecv(in + (size_t)r * (size_t)n, n, MPI_UINT64_T, r, COORD_TAG_VECTOR, c->comm, &reqs[r]);
    if (err != MPI_SUCCESS) {
        c->agree_in_flight = 1;
        return status_mpi(err, "coordinator MPI_Irecv(cycle vector)");
    }
    const int64_t deadline_us = coord_now_us() + (int64_t)(c->cfg->timeout_s * 1e6);
    coord_poll_init(c, &poll);
    while (pending > 0) {
        int before = pending;
        for (int r = 1; r < size; r++) {
            if (reqs[r] == MPI_REQUEST_NULL) continue;
            int done = 0;
            err = MPI_Test(&reqs[r], &done, MPI_STATUS_IGNORE);
            if (err != MPI_SUCCESS) {
                c->agree_in_flight = 1;
                return status_mpi(err, "coordinator MPI_Test(cycle vector)");
            }
            if (done) pending--;
        }
        if (pending == 0) break;
        if (pending < before) continue;
        if (coord_now_us() > deadline_us && poll.polls >= 64) break;
        status = coord_poll_pause(c, &poll);
        if (status < 0) {
            c->agree_in_flight = 1;
            return status;
        }
    }
    uint64_t verdict = 0;
    if (pending > 0) {
        int *silent = c->agree_silent, count = 0;
        for (int r = 1; r < size; r++) {
            if (reqs[r] == MPI_REQUEST_NULL) continue;
            silent[count++] = r;
            MPI_Cancel(&reqs[r]);
            MPI_Request_free(&reqs[r]); /* completes at once (cancelled) or with the vector: nobody reads it */
        }
        status = coord_agree_silent(c, silent, count, 1);
        verdict = (uint64_t)(silent[0] + 1) | (uint64_t)count << 32;
    } else {
        for (int r = 1; r < size; r++) coord_bits_merge(in + (size_t)r * (size_t)n, c->vec, c->words);
    }
    memcpy(reply, c->vec, (size_t)n * sizeof(uint64_t));
    reply[n] = verdict;
    /* Every rank gets the verdict, a silent one too (it reads it when it
     * resumes). Small messages: they leave at once. */
    err = MPI_SUCCESS;
    for (int r = 1; r < size && err == MPI_SUCCESS; r++)
        err = MPI_Isend(reply, n + 1, MPI_UINT64_T, r, COORD_TAG_VERDICT, c->comm, &reqs[r]);
    if (err != MPI_SUCCESS) {
        c->agree_in_flight = 1;
        return status < 0 ? status : status_mpi(err, "coordinator MPI_Isend(cycle verdict)");
    }
    if (status < 0) {
        c->agree_in_flight = 1; /* a silent rank's verdict may stay in flight */
        return status;
    }
    /* The sends go to ranks that just sent: polled with the same deadline. */
    coord_poll_init(c, &poll);
    for (int r = 1; r < size; r++) {
        for (;;) {
            int done = 0;
            err = MPI_Test(&reqs[r], &done, MPI_STATUS_IGNORE);
            if (err != MPI_SUCCESS || done) break;
            if (coord_now_us() > deadline_us + (int64_t)(c->cfg->timeout_s * 1e6) && poll.polls >= 64) {
                c->agree_in_flight = 1;
                return status_fail(HORA_ERR_TIMEOUT,
                                   "coordinator: rank %d took no verdict within %.1f s "
                                   "(HORA_TIMEOUT_S)",
                                   coord_world_rank(c, r), c->cfg->timeout_s);
            }
            status = coord_poll_pause(c, &poll);
            if (status < 0) {
                c->agree_in_flight = 1;
                return status;
            }
        }
        if (err != MPI_SUCCESS) {
            c->agree_in_flight = 1;
            return status_mpi(err, "coordinator MPI_Test(cycle verdict)");
        }
    }
    return HORA_OK;
}

static hora_status_t coord_agree_peer(struct coord *c)
{
    const int n = 3 * c->words + 2;
    uint64_t *reply = c->agree;
    MPI_Request *reqs = c->agree_reqs;
    struct coord_poll poll;
    int err = MPI_Irecv(reply, n + 1, MPI_UINT64_T, 0, COORD_TAG_VERDICT, c->comm, &reqs[0]);
    if (err != MPI_SUCCESS) return status_mpi(err, "coordinator MPI_Irecv(cycle verdict)");
    err = MPI_Isend(c->vec, n, MPI_UINT64_T, 0, COORD_TAG_VECTOR, c->comm, &reqs[1]);
    if (err != MPI_SUCCESS) {
        c->agree_in_flight = 1;
        return status_mpi(err, "coordinator MPI_Isend(cycle vector)");
    }
    /* Rank 0 may come an inspection period after this rank, and then waits
     * HORA_TIMEOUT_S for the others: give it that long to decide. */
    const int64_t deadline_us =
        coord_now_us() + (int64_t)(c->cfg->timeout_s * 1e6) + coord_inspect_period_us(c) + 250 * 1000;
    coord_poll_init(c, &poll);
    int got = 0, sent = 0;
    while (!got || !sent) {
        err = got ? MPI_SUCCESS : MPI_Test(&reqs[0], &got, MPI_STATUS_IGNORE);
        if (err == MPI_SUCCESS && !sent) err = MPI_Test(&reqs[1], &sent, MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS) {
            c->agree_in_flight = 1;
            return status_mpi(err, "coordinator MPI_Test(cycle agreement)");
        }
        if (got && sent) break;
        if (got && reply[n] != 0) break; /* failed: no need to wait for the send */
        if (coord_now_us() > deadline_us && poll.polls >= 64) {
            c->agree_in_flight = 1;
            if (!got) {
                MPI_Cancel(&reqs[0]);
                MPI_Request_free(&reqs[0]);
            }
            int zero = 0;
            return coord_agree_silent(c, &zero, 1, 1);
        }
        hora_status_t status = coord_poll_pause(c, &poll);
        if (status < 0) {
            c->agree_in_flight = 1;
            return status;
        }
    }
    if (reply[n] != 0) {
        c->agree_in_flight = !sent;
        int first = (int)(uint32_t)reply[n] - 1, count = (int)(reply[n] >> 32);
        if (first < 0 || first >= c->size) first = 0;
        return coord_agree_silent(c, &first, count > 0 ? count : 1, 0);
    }
    memcpy(c->vec, reply, (size_t)n * sizeof(uint64_t));
    return HORA_OK;
}

/*
 * The world's agreement runs over hora's own channel for the coordinator
 * (COLL_PURPOSE_COORD: shm inside a host, UCX between hosts, MPI only where
 * neither connects), as a host all-reduce of the vector with bitwise OR (the
 * AND parts travel complemented: AND(x) = ~OR(~x)). It takes the latency
 * path like any small all-reduce (one flag round over shm, one star over
 * UCX or MPI whose data rides in the outcome agreement), with the
 * collectives' deadline and one outcome: a rank that does not come within
 * HORA_TIMEOUT_S fails it on every rank. Its peers then name the rank their
 * last wait waited for.
 */
static void coord_bits_flip_and(uint64_t *vec, int words)
{
    for (int i = 0; i < words; i++) vec[i] = ~vec[i];
    vec[3 * words] = ~vec[3 * words];
}

hora_status_t coord_negotiation_failed(struct coord *c, hora_status_t status)
{
    const int silent = status_culprit();
    if (status != HORA_ERR_TIMEOUT || silent < 0 || silent >= c->size) return status;
    char why[512];
    snprintf(why, sizeof(why), "%s", hora_last_error());
    return status_blame(status_fail(HORA_ERR_TIMEOUT,
                                    "coordinator: rank %d%s did not join the negotiation within %.1f s "
                                    "(HORA_TIMEOUT_S): stopped (SIGSTOP, a debugger) or stuck outside hora (%s)",
                                    silent, silent == c->rank ? " (this rank)" : "", c->cfg->timeout_s, why),
                        silent);
}

hora_status_t coord_fault_parse(struct coord *c, const char *spec)
{
    static const struct {
        const char *name;
        enum coord_fault_point point;
    } points[] = {{"slow-lists", COORD_FAULT_SLOW_LISTS}, {"slow-responses", COORD_FAULT_SLOW_RESPONSES}};
    char name[32];
    int rank = -1, nth = 0, used = 0;
    if (sscanf(spec, "%31[a-z-]:%d:%d%n", name, &rank, &nth, &used) == 3 && spec[used] == '\0' && rank >= 0 && nth >= 1)
        for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++)
            if (strcmp(name, points[i].name) == 0) {
                c->fault_point = points[i].point;
                c->fault_rank = rank;
                c->fault_nth = nth;
                return HORA_OK;
            }
    return status_fail(HORA_ERR_CONFIG,
                       "HORA_FAULT_STOP='%s': expected POINT:RANK:N with POINT slow-lists or "
                       "slow-responses, RANK >= 0 and N >= 1",
                       spec);
}

void coord_fault_stop(struct coord *c, enum coord_fault_point point)
{
    if (c->fault_point != (int)point || c->fault_rank != c->rank || ++c->fault_seen != c->fault_nth) return;
    log_warn("HORA_FAULT_STOP: rank %d stops itself (SIGSTOP) here, as asked", c->rank);
    raise(SIGSTOP);
}

static hora_status_t coord_agree_channel(struct coord *c)
{
    const int n = 3 * c->words + 2;
    coord_bits_flip_and(c->vec, c->words);
    hora_status_t status = coll_allreduce_bits(c->coll, COLL_PURPOSE_COORD, "negotiation", c->vec, (size_t)n);
    coord_bits_flip_and(c->vec, c->words);
    return coord_negotiation_failed(c, status);
}

hora_status_t coord_allreduce_bits(struct coord *c)
{
    if (c->size == 1) return HORA_OK;
    /* A process set has no channel of its own: its agreement is the star
     * over MPI above. */
    if (!c->members) return coord_agree_channel(c);
    return c->rank == 0 ? coord_agree_root(c) : coord_agree_peer(c);
}
