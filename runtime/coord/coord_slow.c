/* coord_slow.c - the slow path's messages and autotune's settings: what the
 * coordinators exchange past the cycle's agreement, under HORA_TIMEOUT_S
 * (the agreement's deadline, coord_agree.c), never a blocking MPI
 * collective.
 *
 * The world's coordinator runs them as collectives on its own channel
 * (COLL_PURPOSE_COORD: shm inside a host, UCX between hosts), as it runs
 * the agreement:
 *  1. an allgatherv of every rank's request-list length, then of the lists
 *     (every rank gets them all; only rank 0 reads them);
 *  2. rank 0 negotiates, fuses and encodes the responses (coord_table.c,
 *     coord_fuse.c);
 *  3. a broadcast of the reply's length, then of the reply from rank 0.
 * Autotune's settings are one broadcast from rank 0. Each collective has
 * the transports' deadline and one outcome, so a rank that does not come
 * (stopped after the agreement, or stuck between the two) fails every
 * rank's step with HORA_ERR_TIMEOUT, named through status_culprit.
 *
 * A process set has no channel of its own: its coordinator exchanges the
 * same as point-to-point messages on c->comm, polled:
 *  1. every rank but 0 sends its request list (COORD_TAG_REQUESTS, any
 *     length: rank 0 probes each rank's message for its size);
 *  2. rank 0 waits HORA_TIMEOUT_S for every list, negotiates, fuses and
 *     encodes the responses;
 *  3. rank 0 sends every rank one reply (COORD_TAG_RESPONSES): a verdict
 *     word, then the responses. The verdict is 0, or (silent rank + 1) |
 *     (silent count << 32) when some list did not come in time; then every
 *     rank fails its requests with HORA_ERR_TIMEOUT naming that rank, and the
 *     silent rank reads the same verdict when it resumes.
 * A rank that hears nothing from rank 0 waits a quarter second longer than
 * rank 0 does, then names rank 0. Every rank
 * passed the agreement moments before, so a rank that does not come now
 * was stopped (SIGSTOP, a debugger) or is stuck between the two.
 *
 * On failure a message MPI has not let go keeps its buffer to the end of the
 * process (coord_keep_in_flight): a send cannot be cancelled, and a matched
 * receive may still be written into. The coordinator stops after any
 * failure, so no later exchange can match a stale message. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "coord/coord_agree.h"
#include "coord/coord_fuse.h"
#include "coord/coord_slow.h"

#define COORD_TAG_REQUESTS 103
#define COORD_TAG_RESPONSES 104
#define COORD_TAG_SETTINGS 105
/* How much longer than rank 0 the others wait for it: every rank leaves the
 * agreement within moments of the others (rank 0 last, once its verdicts
 * are out), so unlike the agreement no inspection period is needed. */
#define COORD_SLOW_MARGIN_US (250 * 1000)

/* A request abandoned on failure: MPI may still use it and its buffer. */
static void coord_slow_abandon(struct coord *c, MPI_Request *req, void *buf)
{
    if (*req != MPI_REQUEST_NULL) MPI_Request_free(req);
    coord_keep_in_flight(c, buf);
}

/* Rank 0: receive every other rank's list into bufs[r] (bufs[0] is this
 * rank's own, untouched). HORA_OK, or HORA_ERR_TIMEOUT with *verdict set
 * for the ranks whose list did not come, or an MPI error / abort. */
static hora_status_t coord_slow_gather(struct coord *c, struct coord_buf *bufs, uint64_t *verdict)
{
    const int size = c->size;
    MPI_Request *reqs = c->agree_reqs;
    struct coord_poll poll;
    hora_status_t status = HORA_OK;
    int pending = size - 1;

    for (int r = 0; r < size; r++) reqs[r] = MPI_REQUEST_NULL;
    char *matched = calloc((size_t)size, 1);
    if (!matched) return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
    const int64_t deadline_us = coord_now_us() + (int64_t)(c->cfg->timeout_s * 1e6);
    coord_poll_init(c, &poll);
    while (pending > 0) {
        int progress = 0;
        for (int r = 1; r < size; r++) {
            int err = MPI_SUCCESS, flag = 0;
            if (!matched[r]) {
                MPI_Message msg;
                MPI_Status st;
                int count = 0;
                err = MPI_Improbe(r, COORD_TAG_REQUESTS, c->comm, &flag, &msg, &st);
                if (err == MPI_SUCCESS && flag) {
                    MPI_Get_count(&st, MPI_BYTE, &count);
                    bufs[r].data = malloc(count ? (size_t)count : 1);
                    bufs[r].len = (size_t)count;
                    if (!bufs[r].data) {
                        /* The message is matched: receive it somewhere and drop it. */
                        static uint8_t sink;
                        MPI_Mrecv(&sink, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
                        status = status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
                        goto out;
                    }
                    err = MPI_Imrecv(bufs[r].data, count, MPI_BYTE, &msg, &reqs[r]);
                    matched[r] = 1;
                    progress = 1;
                }
            }
            if (err == MPI_SUCCESS && matched[r] && reqs[r] != MPI_REQUEST_NULL) {
                err = MPI_Test(&reqs[r], &flag, MPI_STATUS_IGNORE);
                if (err == MPI_SUCCESS && flag) {
                    pending--;
                    progress = 1;
                }
            }
            if (err != MPI_SUCCESS) {
                status = status_mpi(err, "coordinator MPI_Improbe/MPI_Imrecv(request list)");
                goto out;
            }
        }
        if (pending == 0 || progress) continue;
        if (coord_now_us() > deadline_us && poll.polls >= 64) break;
        status = coord_poll_pause(c, &poll);
        if (status < 0) goto out;
    }
    if (pending > 0) {
        int *silent = c->agree_silent, count = 0;
        for (int r = 1; r < size; r++)
            if (!matched[r] || reqs[r] != MPI_REQUEST_NULL) silent[count++] = r;
        *verdict = (uint64_t)(silent[0] + 1) | (uint64_t)count << 32;
        status = coord_agree_silent(c, silent, count, 1);
    } else if (coord_now_us() > deadline_us + COORD_SLOW_MARGIN_US) {
        /* Every list came, but this rank was gone (stopped) so long that the
         * others have given up on it: fail as they did, naming this rank. */
        int zero = 0;
        status = coord_agree_silent(c, &zero, 1, 1);
    }
out:
    /* Lists still arriving (a failure, or a rank stopped mid-message) keep
     * their buffers; the coordinator stops after this. */
    for (int r = 1; r < size; r++)
        if (reqs[r] != MPI_REQUEST_NULL) {
            coord_slow_abandon(c, &reqs[r], bufs[r].data);
            bufs[r].data = NULL;
            bufs[r].len = 0;
        }
    free(matched);
    return status;
}

/* Rank 0: build the reply (verdict word, then the encoded responses). */
static hora_status_t coord_slow_answer(struct coord *c, struct coord_buf *bufs, uint64_t verdict,
                                       struct coord_buf *reply)
{
    hora_status_t status = HORA_OK;
    if (coord_buf_put(reply, &verdict, sizeof(verdict)))
        return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
    if (verdict) return HORA_OK;
    struct coord_responses list = {0};
    status = coord_table_negotiate(&c->table, bufs, &list);
    if (status == HORA_OK) {
        coord_fuse_list(c->settings.fusion_threshold, &list);
        status = coord_encode_responses(c->size, &list, reply);
    }
    coord_responses_clear(&list);
    if (status < 0) {
        /* Tell the others to stop rather than leave them waiting. */
        reply->len = sizeof(verdict);
        struct coord_responses stop = {0};
        struct coord_response *r = coord_responses_add(&stop);
        if (r) {
            r->kind = COORD_KIND_SHUTDOWN;
            r->error = strdup(hora_last_error());
        }
        coord_encode_responses(c->size, &stop, reply);
        coord_responses_clear(&stop);
    }
    return HORA_OK;
}

/* Rank 0: send every rank the same bytes under tag and, if wait, wait
 * within HORA_TIMEOUT_S until each send is done (the receivers are ranks
 * that came moments ago). Without wait (a verdict, which a silent rank
 * reads when it resumes) the buffer stays in flight. On failure too. */
static hora_status_t coord_slow_send_all(struct coord *c, void *data, size_t len, int tag, int wait, const char *what)
{
    MPI_Request *reqs = c->agree_reqs;
    struct coord_poll poll;
    hora_status_t status = HORA_OK;
    int err = MPI_SUCCESS;

    for (int r = 0; r < c->size; r++) reqs[r] = MPI_REQUEST_NULL;
    for (int r = 1; r < c->size && err == MPI_SUCCESS; r++)
        err = MPI_Isend(data, (int)len, MPI_BYTE, r, tag, c->comm, &reqs[r]);
    if (err != MPI_SUCCESS) {
        status = status_mpi(err, what);
        goto err_abandon;
    }
    if (!wait) goto err_abandon;
    const int64_t deadline_us = coord_now_us() + (int64_t)(c->cfg->timeout_s * 1e6);
    coord_poll_init(c, &poll);
    for (int r = 1; r < c->size; r++) {
        for (;;) {
            int done = 0;
            err = MPI_Test(&reqs[r], &done, MPI_STATUS_IGNORE);
            if (err != MPI_SUCCESS) {
                status = status_mpi(err, what);
                goto err_abandon;
            }
            if (done) break;
            if (coord_now_us() > deadline_us && poll.polls >= 64) {
                status = status_fail(HORA_ERR_TIMEOUT,
                                     "coordinator: rank %d took no %s within %.1f s "
                                     "(HORA_TIMEOUT_S): stopped (SIGSTOP, a debugger) or stuck outside hora",
                                     coord_world_rank(c, r), what, c->cfg->timeout_s);
                goto err_abandon;
            }
            status = coord_poll_pause(c, &poll);
            if (status < 0) goto err_abandon;
        }
    }
    return HORA_OK;

err_abandon:
    for (int r = 1; r < c->size; r++)
        if (reqs[r] != MPI_REQUEST_NULL) MPI_Request_free(&reqs[r]);
    coord_keep_in_flight(c, data);
    return status;
}

/* Not rank 0: send `out` (tag out_tag; NULL: nothing) and receive rank 0's
 * message under in_tag, of any length, into *in (malloc'd). Rank 0 waits
 * HORA_TIMEOUT_S for the others: COORD_SLOW_MARGIN_US past that, rank 0 is
 * named. A reply whose first word (the
 * verdict) is not 0 ends the wait for the send. */
static hora_status_t coord_slow_talk_to_root(struct coord *c, struct coord_buf *out, int out_tag, struct coord_buf *in,
                                             int in_tag, const char *what)
{
    MPI_Request *reqs = c->agree_reqs;
    struct coord_poll poll;
    hora_status_t status = HORA_OK;
    int err = MPI_SUCCESS, sent = out == NULL, got = 0, matched = 0;

    reqs[0] = reqs[1] = MPI_REQUEST_NULL;
    const int64_t deadline_us = coord_now_us() + (int64_t)(c->cfg->timeout_s * 1e6) + COORD_SLOW_MARGIN_US;
    if (out) err = MPI_Isend(out->data, (int)out->len, MPI_BYTE, 0, out_tag, c->comm, &reqs[1]);
    if (err != MPI_SUCCESS) {
        status = status_mpi(err, what);
        goto err_abandon;
    }
    coord_poll_init(c, &poll);
    while (!got || !sent) {
        int flag = 0;
        if (!matched) {
            MPI_Message msg;
            MPI_Status st;
            err = MPI_Improbe(0, in_tag, c->comm, &flag, &msg, &st);
            if (err == MPI_SUCCESS && flag) {
                int count = 0;
                MPI_Get_count(&st, MPI_BYTE, &count);
                in->data = malloc(count ? (size_t)count : 1);
                in->len = (size_t)count;
                in->pos = 0;
                if (!in->data) {
                    static uint8_t sink;
                    MPI_Mrecv(&sink, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
                    status = status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
                    goto err_abandon;
                }
                err = MPI_Imrecv(in->data, count, MPI_BYTE, &msg, &reqs[0]);
                matched = 1;
            }
        }
        if (err == MPI_SUCCESS && matched && !got) err = MPI_Test(&reqs[0], &got, MPI_STATUS_IGNORE);
        if (err == MPI_SUCCESS && !sent) err = MPI_Test(&reqs[1], &sent, MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS) {
            status = status_mpi(err, what);
            goto err_abandon;
        }
        if (got && sent) break;
        uint64_t verdict = 0;
        if (got && in->len >= sizeof(verdict)) memcpy(&verdict, in->data, sizeof(verdict));
        if (got && verdict) break; /* failed: no need to wait for the send */
        if (coord_now_us() > deadline_us && poll.polls >= 64) {
            int zero = 0;
            status = coord_agree_silent(c, &zero, 1, 1);
            goto err_abandon;
        }
        status = coord_poll_pause(c, &poll);
        if (status < 0) goto err_abandon;
    }
    if (!sent) {
        coord_slow_abandon(c, &reqs[1], out->data);
        out->data = NULL;
    }
    return HORA_OK;

err_abandon:
    if (reqs[0] != MPI_REQUEST_NULL) {
        coord_slow_abandon(c, &reqs[0], in->data);
        in->data = NULL;
    }
    if (out && !sent) {
        coord_slow_abandon(c, &reqs[1], out->data);
        out->data = NULL;
    }
    free(in->data);
    in->data = NULL;
    in->len = 0;
    return status;
}

/* The world's slow path, past the encoding of this rank's list (mine):
 * collectives on the coordinator's channel (see the top of the file). */
static hora_status_t coord_slow_path_channel(struct coord *c, const struct coord_buf *mine, struct coord_responses *out)
{
    const int size = c->size;
    struct coord_buf reply = {0};
    struct coord_buf *bufs = calloc((size_t)size, sizeof(*bufs));
    size_t *counts = calloc((size_t)size, sizeof(*counts));
    int64_t *lens = calloc((size_t)size, sizeof(*lens));
    uint8_t *lists = NULL;
    hora_status_t status = HORA_OK;
    if (!bufs || !counts || !lens) {
        status = status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
        goto out;
    }
    if (mine->len) coord_fault_stop(c, COORD_FAULT_SLOW_LISTS);
    const int64_t len = (int64_t)mine->len;
    for (int r = 0; r < size; r++) counts[r] = 1;
    status = coll_allgatherv(c->coll, COLL_PURPOSE_COORD, HORA_MEMORY_HOST, &len, lens, counts, HORA_DTYPE_I64);
    size_t total = 0;
    for (int r = 0; r < size && status == HORA_OK; r++) {
        if (lens[r] < 0)
            status = status_fail(HORA_ERR_CORRUPT, "coordinator: rank %d sent a request list of %lld bytes", r,
                                 (long long)lens[r]);
        counts[r] = (size_t)lens[r];
        total += counts[r];
    }
    /* Out of memory here leaves the others to time out on this rank (the
     * only local failure between the collectives). */
    if (status == HORA_OK && !(lists = malloc(total ? total : 1)))
        status = status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
    if (status == HORA_OK)
        status =
            coll_allgatherv(c->coll, COLL_PURPOSE_COORD, HORA_MEMORY_HOST, mine->data, lists, counts, HORA_DTYPE_U8);
    if (status < 0) goto out;
    if (c->rank == 0) {
        size_t at = 0;
        for (int r = 0; r < size; r++) {
            bufs[r] = (struct coord_buf){.data = lists + at, .len = counts[r]};
            at += counts[r];
        }
        status = coord_slow_answer(c, bufs, 0, &reply); /* its failure: a shutdown response for everyone */
        if (status < 0) goto out;
        if (mine->len) coord_fault_stop(c, COORD_FAULT_SLOW_RESPONSES);
    }
    int64_t reply_len = (int64_t)reply.len;
    status = coll_broadcast(c->coll, COLL_PURPOSE_COORD, HORA_MEMORY_HOST, &reply_len, 1, HORA_DTYPE_I64, 0);
    if (status == HORA_OK && (reply_len < (int64_t)sizeof(uint64_t) || reply_len > ((int64_t)1 << 40)))
        status = status_fail(HORA_ERR_CORRUPT, "coordinator: a reply of %lld bytes from rank 0", (long long)reply_len);
    if (status == HORA_OK && c->rank != 0) {
        reply.data = malloc((size_t)reply_len);
        reply.len = (size_t)reply_len;
        if (!reply.data) status = status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
    }
    if (status == HORA_OK)
        status = coll_broadcast(c->coll, COLL_PURPOSE_COORD, HORA_MEMORY_HOST, reply.data, reply.len, HORA_DTYPE_U8, 0);
    if (status < 0) goto out;
    reply.pos = sizeof(uint64_t); /* the verdict word, always 0 here */
    status = coord_decode_responses(c->size, &reply, out);
out:
    coord_buf_free(&reply);
    free(lists);
    free(lens);
    free(counts);
    free(bufs);
    return coord_negotiation_failed(c, status);
}

hora_status_t coord_slow_path(struct coord *c, struct coord_responses *out)
{
    struct coord_buf mine = {0}, reply = {0};
    struct coord_buf *bufs = NULL;
    hora_status_t status;
    uint64_t verdict = 0;

    status = coord_encode_requests(c->uncached.head, &mine);
    if (status < 0) goto out;
    c->uncached.head = c->uncached.tail = NULL; /* submitted: they stay in pending until their response */
    if (!c->members) {
        status = coord_slow_path_channel(c, &mine, out);
        goto out;
    }
    if (c->rank == 0) {
        bufs = calloc((size_t)c->size, sizeof(*bufs));
        if (!bufs) {
            status = status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
            goto out;
        }
        bufs[0] = mine;
        status = coord_slow_gather(c, bufs, &verdict);
        if (status < 0 && !verdict) goto out; /* an abort or an MPI error: every rank learns of it on its own */
        hora_status_t answered = coord_slow_answer(c, bufs, verdict, &reply);
        if (answered < 0) {
            status = answered;
            goto out;
        }
        hora_status_t sent = coord_slow_send_all(c, reply.data, reply.len, COORD_TAG_RESPONSES, !verdict, "responses");
        if (sent < 0 || verdict) reply.data = NULL; /* in flight */
        if (status < 0) goto out;
        if (sent < 0) {
            status = sent;
            goto out;
        }
        reply.pos = sizeof(verdict);
    } else {
        status = coord_slow_talk_to_root(c, &mine, COORD_TAG_REQUESTS, &reply, COORD_TAG_RESPONSES,
                                         "coordinator request list / responses");
        if (status < 0) goto out;
        if (reply.len < sizeof(verdict)) {
            status = status_fail(HORA_ERR_CORRUPT, "coordinator: a reply of %zu bytes from rank 0", reply.len);
            goto out;
        }
        memcpy(&verdict, reply.data, sizeof(verdict));
        if (verdict) {
            int first = (int)(uint32_t)verdict - 1, count = (int)(verdict >> 32);
            if (first < 0 || first >= c->size) first = 0;
            status = coord_agree_silent(c, &first, count > 0 ? count : 1, 0);
            goto out;
        }
        reply.pos = sizeof(verdict);
    }
    status = coord_decode_responses(c->size, &reply, out);
out:
    coord_buf_free(&reply);
    if (bufs)
        for (int r = 1; r < c->size; r++) free(bufs[r].data);
    free(bufs);
    coord_buf_free(&mine);
    return status;
}

hora_status_t coord_slow_settings(struct coord *c, struct coord_settings *s)
{
    if (c->size == 1) return HORA_OK;
    if (!c->members)
        return coord_negotiation_failed(
            c, coll_broadcast(c->coll, COLL_PURPOSE_COORD, HORA_MEMORY_HOST, s, sizeof(*s), HORA_DTYPE_U8, 0));
    if (c->rank == 0) {
        /* The buffer must outlive a failed send: a copy of its own. */
        struct coord_settings *copy = malloc(sizeof(*copy));
        if (!copy) return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
        *copy = *s;
        hora_status_t status = coord_slow_send_all(c, copy, sizeof(*copy), COORD_TAG_SETTINGS, 1, "autotune settings");
        if (status == HORA_OK) free(copy);
        return status;
    }
    struct coord_buf in = {0};
    hora_status_t status = coord_slow_talk_to_root(c, NULL, 0, &in, COORD_TAG_SETTINGS, "autotune settings");
    if (status == HORA_OK && in.len != sizeof(*s))
        status = status_fail(HORA_ERR_CORRUPT, "coordinator: autotune settings of %zu bytes from rank 0", in.len);
    if (status == HORA_OK) memcpy(s, in.data, sizeof(*s));
    free(in.data);
    return status;
}
