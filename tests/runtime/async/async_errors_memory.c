/* async_errors_memory.c - part of mode errors: requests on device memory.
 *
 * A request may say its buffers are CUDA memory (opts.memory =
 * HORA_MEMORY_CUDA). Where the runtime has no device support (a build
 * without CUDA, a machine without a GPU: hora_cuda_device() < 0), every
 * submitting call must refuse such a request at once: HORA_ERR_UNSUPPORTED,
 * a message (hora_last_error) saying that device / CUDA memory is not
 * supported, no request returned and nothing left in flight (a host request
 * under the same name works next, on every rank). With device support the
 * buffers here, host memory, are refused instead: HORA_ERR_INVALID_ARG,
 * naming host memory (tests/runtime/device has the device requests that work).
 *
 * The buffers are host memory. So that a runtime which wrongly accepts a
 * request cannot touch them, every rank's copy has a different shape (count 4
 * + rank): negotiation then fails it everywhere, and the test goes on. */
#define _GNU_SOURCE /* strcasestr */
#include <stdio.h>
#include <string.h>

#include "async_common.h"

enum memory_call { MEMORY_ALLREDUCE, MEMORY_GROUPED, MEMORY_BROADCAST, MEMORY_ALLGATHER, MEMORY_CALL_COUNT };

static const char *const memory_call_name[MEMORY_CALL_COUNT] = {"hora_allreduce_async", "hora_grouped_allreduce_async",
                                                                "hora_broadcast_async", "hora_allgather_async"};
/* The requests' names; the grouped call has two members. */
static const char *const memory_request_name[MEMORY_CALL_COUNT][2] = {
    {"cuda.allreduce", NULL}, {"cuda.group.0", "cuda.group.1"}, {"cuda.broadcast", NULL}, {"cuda.allgather", NULL}};

static float memory_send[2][16], memory_recv[2][16];

/* Submit `call` with buffers said to be of this memory kind; reqs[0] (and
 * reqs[1] for the group) receive the requests. */
static hora_status_t memory_submit(enum memory_call call, hora_memory_t memory, hora_request_t reqs[2])
{
    const size_t count = 4 + (size_t)rank; /* differs on every rank, see above */
    const size_t counts[2] = {count, count + 1};
    const void *send[2] = {memory_send[0], memory_send[1]};
    void *recv[2] = {memory_recv[0], memory_recv[1]};
    hora_opts_t opts = HORA_OPTS_INIT;
    opts.memory = memory;
    switch (call) {
    case MEMORY_ALLREDUCE:
        return hora_allreduce_async(memory_request_name[call][0], send[0], recv[0], count, HORA_DTYPE_F32, HORA_OP_SUM,
                                    &opts, &reqs[0]);
    case MEMORY_GROUPED:
        return hora_grouped_allreduce_async(2, memory_request_name[call], send, recv, counts, HORA_DTYPE_F32,
                                            HORA_OP_SUM, &opts, reqs);
    case MEMORY_BROADCAST:
        return hora_broadcast_async(memory_request_name[call][0], memory_send[0], count, HORA_DTYPE_F32, 0, &opts,
                                    &reqs[0]);
    default: /* allgather: the first dimension may differ, the second must not */
        opts.ndim = 2;
        opts.dims[0] = 1;
        opts.dims[1] = (int64_t)count;
        return hora_allgather_async(memory_request_name[call][0], send[0], count, HORA_DTYPE_F32, &opts, &reqs[0]);
    }
}

/* Says the refusal is about device memory: names CUDA or device memory and
 * says it is not supported. */
static int memory_message_ok(const char *msg)
{
    return (strcasestr(msg, "cuda") || strcasestr(msg, "device")) &&
           (strcasestr(msg, "not supported") || strcasestr(msg, "unsupported"));
}

static void memory_expect_refused(enum memory_call call)
{
    const char *what = memory_call_name[call];
    const int members = call == MEMORY_GROUPED ? 2 : 1;
    hora_request_t reqs[2] = {REQ_SENTINEL, REQ_SENTINEL};

    const int device = hora_cuda_device() >= 0;
    const hora_status_t want = device ? HORA_ERR_INVALID_ARG : HORA_ERR_UNSUPPORTED;
    hora_status_t st = memory_submit(call, HORA_MEMORY_CUDA, reqs);
    const char *msg = st < 0 ? hora_last_error() : "(the call succeeded)";
    CHECK(st == want, "%s with HORA_MEMORY_CUDA: returned %s, expected %s", what, hora_status_string(st),
          hora_status_string(want));
    CHECK(reqs[0] == REQ_SENTINEL && reqs[1] == REQ_SENTINEL, "%s with HORA_MEMORY_CUDA: a request was returned", what);
    if (device)
        CHECK(st < 0 && strcasestr(msg, "host memory"),
              "%s with HORA_MEMORY_CUDA on host buffers: the message does not say they are host memory: '%s'", what,
              msg);
    else
        CHECK(st < 0 && memory_message_ok(msg),
              "%s with HORA_MEMORY_CUDA: the message does not say device/CUDA memory is not supported: '%s'", what,
              msg);
    if (rank == 0) printf("  device memory, %-28s -> %s: %s\n", what, hora_status_string(st), msg);

    /* A runtime that accepted it on some rank: the ranks that refused submit
     * the host twin (still mismatched), and everyone waits for the failure. */
    int accepted = st == HORA_OK, any = 0;
    MPI_Allreduce(&accepted, &any, 1, MPI_INT, MPI_MAX, test_comm);
    if (any && !accepted) accepted = memory_submit(call, HORA_MEMORY_HOST, reqs) == HORA_OK;
    for (int k = 0; accepted && k < members; k++) {
        hora_wait(reqs[k]);
        hora_request_free(reqs[k]);
    }

    /* Nothing is left in flight under the refused name. */
    struct ar_case c;
    ar_case_init(&c, "after.cuda", HORA_DTYPE_F32, HORA_OP_SUM, 100, 0, 0, 11);
    snprintf(c.name, sizeof(c.name), "%s", memory_request_name[call][0]);
    ar_case_start(&c);
    ar_case_finish(&c, 0);
}

void errors_memory_refused(void)
{
    for (int call = 0; call < MEMORY_CALL_COUNT; call++) memory_expect_refused((enum memory_call)call);
}
