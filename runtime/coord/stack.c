/* stack.c - the stack channel: rank 0 asks a rank that its stall inspector
 * finds missing what its application thread is doing, the rank's
 * coordinator answers (stack.h has the whole picture).
 *
 * The protocol, on a communicator of its own (a dup of the world's):
 *  - rank 0 sends a request {id} (tag STACK_TAG_REQUEST) to a missing rank,
 *    at most one outstanding per rank and one per rank per
 *    HORA_STALL_CHECK_S; a request to itself (rank 0 is the late one) goes
 *    straight to its own capture;
 *  - every rank other than 0 keeps one receive from rank 0 posted; when a
 *    request comes, its coordinator hands the capture to the helper thread
 *    (stack_capture.c) and goes on; a later poll finds the text and sends
 *    the answer {id, length, text} (tag STACK_TAG_ANSWER). A request that
 *    comes while a capture asked for earlier is still running after half
 *    the answer time is answered at once with that fact;
 *  - rank 0 keeps one receive for answers from any rank posted, prints each
 *    answer under a "stall: rank R missing for ..." header, and reports a
 *    rank whose answer has not come after answer_s as silent (an answer that
 *    comes later is printed as late).
 * Nothing here blocks: MPI_Test on posted requests, at most every
 * STACK_POLL_US. At close, receives are cancelled; a send MPI has not
 * finished is released to finish on its own (its buffers are never freed). */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "coord/stack.h"

#define STACK_TAG_REQUEST 201
#define STACK_TAG_ANSWER 202
#define STACK_POLL_US 10000

struct stack_wire_request {
    int32_t id, reserved;
};

struct stack_wire_answer {
    int32_t id, len;
    char text[STACK_TEXT_BYTES];
};

/* Rank 0: what it asked each rank. */
struct stack_asked {
    int32_t id;      /* the latest request, 0: never asked */
    int outstanding; /* asked, no answer yet */
    int silent;      /* reported as silent; an answer is late */
    int64_t sent_us;
    double age_s; /* how long name had waited when it asked */
    char name[128];
    struct stack_wire_request wire;
    MPI_Request send;
};

struct stack_channel {
    MPI_Comm comm;
    int rank, size;
    int enabled;       /* HORA_STALL_STACKS */
    int64_t check_us;  /* HORA_STALL_CHECK_S: one request per rank per period */
    int64_t answer_us; /* rank 0's wait for an answer */
    int64_t last_poll_us;
    int broken; /* an MPI call failed: the channel is off */

    /* Rank 0. */
    struct stack_asked *asked; /* [size] */
    int32_t next_id;
    struct stack_wire_answer answer_in;
    MPI_Request answer_recv;

    /* Every rank: requests from rank 0 and the capture they started. */
    struct stack_wire_request request_in;
    MPI_Request request_recv;
    int32_t capture_id; /* the request the running capture answers, 0: none */
    int64_t capture_us; /* when it started */
    MPI_Request answer_send;
};

/* The answer in flight: static, so that a send still in MPI's hands at close
 * never points into freed memory (one send at a time). */
static struct stack_wire_answer stack_answer_out;

static void stack_channel_break(struct stack_channel *s, int err, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, msg, &len);
    log_warn("stall stacks: %s failed (%s): no more stacks from this rank", what, msg);
    s->broken = 1;
}

hora_status_t stack_channel_open(struct stack_channel **out, const struct config *cfg, MPI_Comm world, double answer_s)
{
    struct stack_channel *s = calloc(1, sizeof(*s));
    if (!s) return status_fail(HORA_ERR_NO_MEMORY, "out of memory for the stall stacks' channel");
    MPI_Comm_rank(world, &s->rank);
    MPI_Comm_size(world, &s->size);
    s->enabled = cfg->stall_stacks;
    s->check_us = (int64_t)(cfg->stall_check_s * 1e6);
    s->answer_us = (int64_t)(answer_s * 1e6);
    s->answer_recv = s->request_recv = s->answer_send = MPI_REQUEST_NULL;
    if (s->rank == 0) {
        s->asked = calloc((size_t)s->size, sizeof(*s->asked));
        if (!s->asked) {
            free(s);
            return status_fail(HORA_ERR_NO_MEMORY, "out of memory for the stall stacks' channel");
        }
        for (int r = 0; r < s->size; r++) s->asked[r].send = MPI_REQUEST_NULL;
    }
    int err = MPI_Comm_dup(world, &s->comm);
    if (err != MPI_SUCCESS) {
        free(s->asked);
        free(s);
        return status_mpi(err, "MPI_Comm_dup(stall stacks)");
    }
    MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
    if (s->rank == 0)
        err = MPI_Irecv(&s->answer_in, (int)sizeof(s->answer_in), MPI_BYTE, MPI_ANY_SOURCE, STACK_TAG_ANSWER, s->comm,
                        &s->answer_recv);
    else
        err = MPI_Irecv(&s->request_in, (int)sizeof(s->request_in), MPI_BYTE, 0, STACK_TAG_REQUEST, s->comm,
                        &s->request_recv);
    if (err != MPI_SUCCESS) stack_channel_break(s, err, "MPI_Irecv");
    *out = s;
    return HORA_OK;
}

static void stack_channel_cancel(MPI_Request *req)
{
    if (*req == MPI_REQUEST_NULL) return;
    MPI_Cancel(req);
    MPI_Wait(req, MPI_STATUS_IGNORE);
}

/* A send not yet finished goes on without us (its buffer stays valid). */
static int stack_channel_release(MPI_Request *req)
{
    int done = 1;
    if (*req == MPI_REQUEST_NULL) return 1;
    if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) {
        MPI_Request_free(req);
        return 0;
    }
    return 1;
}

void stack_channel_close(struct stack_channel *s)
{
    if (!s) return;
    stack_channel_cancel(&s->answer_recv);
    stack_channel_cancel(&s->request_recv);
    stack_channel_release(&s->answer_send);
    int all_sent = 1;
    for (int r = 0; s->asked && r < s->size; r++) all_sent &= stack_channel_release(&s->asked[r].send);
    MPI_Comm_free(&s->comm);
    /* A request MPI still sends reads s->asked: keep it (8 bytes a rank, and
     * only when a rank never took its request in). */
    if (all_sent) free(s->asked);
    free(s);
}

/* Rank 0: an answer from rank r to request id. */
static void stack_channel_print(struct stack_channel *s, int r, int32_t id, const char *text, int64_t now_us)
{
    struct stack_asked *a = &s->asked[r];
    char header[512];
    if (id != a->id || (!a->outstanding && !a->silent)) return; /* an older request's: its newer one is printed */
    if (a->outstanding)
        snprintf(header, sizeof(header), "stall: rank %d missing for '%s' (waited %.0f s); rank %d is at:", r, a->name,
                 a->age_s, r);
    else
        snprintf(header, sizeof(header),
                 "stall: rank %d answered %.1f s after it was asked about '%s' (missing for %.0f s then); it was at:",
                 r, (double)(now_us - a->sent_us) * 1e-6, a->name, a->age_s);
    log_block(LOG_LEVEL_WARN, header, text);
    a->outstanding = a->silent = 0;
}

/* Has the previous answer left (its buffer is free again)? */
static int stack_channel_send_free(struct stack_channel *s)
{
    int done = 1;
    if (s->answer_send == MPI_REQUEST_NULL) return 1;
    if (MPI_Test(&s->answer_send, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return 0;
    return done;
}

/* Any rank: the capture for request id is done (or cannot be): send it. */
static void stack_channel_answer(struct stack_channel *s, int32_t id, const char *text, int64_t now_us)
{
    if (s->rank == 0) {
        stack_channel_print(s, 0, id, text, now_us);
        return;
    }
    if (!stack_channel_send_free(s)) {
        log_debug("stall stacks: the previous answer is still in flight; request %d goes unanswered", id);
        return;
    }
    size_t len = strlen(text);
    if (len >= sizeof(stack_answer_out.text)) len = sizeof(stack_answer_out.text) - 1;
    stack_answer_out.id = id;
    stack_answer_out.len = (int32_t)len;
    memcpy(stack_answer_out.text, text, len);
    stack_answer_out.text[len] = '\0';
    int err = MPI_Isend(&stack_answer_out, (int)(offsetof(struct stack_wire_answer, text) + len + 1), MPI_BYTE, 0,
                        STACK_TAG_ANSWER, s->comm, &s->answer_send);
    if (err != MPI_SUCCESS) stack_channel_break(s, err, "MPI_Isend(answer)");
}

/* Any rank: rank 0 asks for request id. */
static void stack_channel_begin(struct stack_channel *s, int32_t id, int64_t now_us)
{
    char text[256];
    if (!s->enabled) {
        snprintf(text, sizeof(text), "(nothing: HORA_STALL_STACKS=0 on rank %d)\n", s->rank);
        stack_channel_answer(s, id, text, now_us);
        return;
    }
    if (s->capture_id) {
        /* The capture of an earlier request still runs: it answers this one. */
        if (now_us - s->capture_us > s->answer_us / 2) {
            snprintf(text, sizeof(text),
                     "(a capture started %.1f s ago has not finished: the stack provider has not returned; in "
                     "Python, a thread may hold the GIL inside C code)\n",
                     (double)(now_us - s->capture_us) * 1e-6);
            stack_channel_answer(s, id, text, now_us);
        } else {
            s->capture_id = id;
        }
        return;
    }
    if (!stack_capture_start()) {
        snprintf(text, sizeof(text), "(no capture: the helper thread could not start)\n");
        stack_channel_answer(s, id, text, now_us);
        return;
    }
    s->capture_id = id;
    s->capture_us = now_us;
}

void stack_channel_request(struct stack_channel *s, int rank, const char *name, double age_s, int64_t now_us)
{
    if (!s || s->rank != 0 || !s->enabled || s->broken || rank < 0 || rank >= s->size) return;
    struct stack_asked *a = &s->asked[rank];
    if (a->outstanding || (a->id && now_us - a->sent_us < s->check_us)) return;
    if (a->send != MPI_REQUEST_NULL) {
        int done = 0;
        if (MPI_Test(&a->send, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) return;
    }
    a->id = ++s->next_id;
    a->outstanding = 1;
    a->silent = 0;
    a->sent_us = now_us;
    a->age_s = age_s;
    snprintf(a->name, sizeof(a->name), "%s", name);
    if (rank == 0) {
        stack_channel_begin(s, a->id, now_us);
        return;
    }
    a->wire.id = a->id;
    int err = MPI_Isend(&a->wire, (int)sizeof(a->wire), MPI_BYTE, rank, STACK_TAG_REQUEST, s->comm, &a->send);
    if (err != MPI_SUCCESS) stack_channel_break(s, err, "MPI_Isend(request)");
}

void stack_channel_poll(struct stack_channel *s, int64_t now_us)
{
    if (!s || s->broken || now_us - s->last_poll_us < STACK_POLL_US) return;
    s->last_poll_us = now_us;
    int arrived = 0, err;
    MPI_Status st;

    /* A request from rank 0. */
    if (s->request_recv != MPI_REQUEST_NULL) {
        err = MPI_Test(&s->request_recv, &arrived, MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS) {
            stack_channel_break(s, err, "MPI_Test(request)");
            return;
        }
        if (arrived) {
            const int32_t id = s->request_in.id;
            err = MPI_Irecv(&s->request_in, (int)sizeof(s->request_in), MPI_BYTE, 0, STACK_TAG_REQUEST, s->comm,
                            &s->request_recv);
            if (err != MPI_SUCCESS) stack_channel_break(s, err, "MPI_Irecv(request)");
            stack_channel_begin(s, id, now_us);
        }
    }
    /* The capture is done: answer. */
    if (s->capture_id) {
        char text[STACK_TEXT_BYTES];
        if (stack_capture_take(text, sizeof(text))) {
            const int32_t id = s->capture_id;
            s->capture_id = 0;
            stack_channel_answer(s, id, text, now_us);
        }
    }
    if (s->rank != 0) return;

    /* Rank 0: answers, then the ranks that stay silent. */
    while (!s->broken && s->answer_recv != MPI_REQUEST_NULL) {
        arrived = 0;
        err = MPI_Test(&s->answer_recv, &arrived, &st);
        if (err != MPI_SUCCESS) {
            stack_channel_break(s, err, "MPI_Test(answer)");
            return;
        }
        if (!arrived) break;
        int bytes = 0;
        MPI_Get_count(&st, MPI_BYTE, &bytes);
        if (bytes > (int)offsetof(struct stack_wire_answer, text) && st.MPI_SOURCE > 0 && st.MPI_SOURCE < s->size) {
            s->answer_in.text[bytes - (int)offsetof(struct stack_wire_answer, text) - 1] = '\0';
            stack_channel_print(s, st.MPI_SOURCE, s->answer_in.id, s->answer_in.text, now_us);
        }
        err = MPI_Irecv(&s->answer_in, (int)sizeof(s->answer_in), MPI_BYTE, MPI_ANY_SOURCE, STACK_TAG_ANSWER, s->comm,
                        &s->answer_recv);
        if (err != MPI_SUCCESS) stack_channel_break(s, err, "MPI_Irecv(answer)");
    }
    for (int r = 0; r < s->size; r++) {
        struct stack_asked *a = &s->asked[r];
        if (!a->outstanding || now_us - a->sent_us <= s->answer_us) continue;
        log_warn("stall: rank %d missing for '%s' (waited %.0f s): no answer to the stack request within %.1f s (the "
                 "process stopped, its coordinator in a long collective, or its stack provider waiting for Python's "
                 "GIL); going on",
                 r, a->name, a->age_s, (double)s->answer_us * 1e-6);
        a->outstanding = 0;
        a->silent = 1;
    }
}
