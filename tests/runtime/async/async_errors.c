/* async_errors.c - mode errors: cross-rank mismatches fail on every rank with
 * a message naming both values, and the next request works; local argument
 * errors; duplicate names; calls outside init/shutdown; init -> shutdown ->
 * init; hora_opts_t.struct_bytes refused when not set and an older, smaller
 * hora_opts_t taken with defaults. Requests on device memory:
 * async_errors_memory.c. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "async_common.h"
#include "opts_older.h"

/* The request req (enqueue status st) must fail on this rank with a message
 * that names both values a and b, then a correct request must work. */
static void errors_expect_mismatch(const char *what, hora_status_t st, hora_request_t req, const char *a, const char *b)
{
    CHECK(st == HORA_OK, "mismatch %s: enqueue returned %s: %s", what, hora_status_string(st), hora_last_error());
    if (st == HORA_OK) {
        hora_status_t ws = hora_wait(req);
        const char *msg = request_message(req);
        CHECK(ws < 0, "mismatch %s: hora_wait returned %s, expected an error", what, hora_status_string(ws));
        CHECK(strstr(msg, a) && strstr(msg, b), "mismatch %s: message '%s' does not name both '%s' and '%s'", what, msg,
              a, b);
        if (rank == 0) printf("  mismatch %-24s -> %s: %s\n", what, hora_status_string(ws), msg);
        hora_request_free(req);
    }
    ar_case_next_ok(what);
}

static void errors_mismatches(void)
{
    double buf[16] = {0}, out[16];
    hora_opts_t opts = HORA_OPTS_INIT;
    hora_request_t req = REQ_SENTINEL;
    hora_status_t st;

    st = hora_allreduce_async("mm.dtype", buf, out, 6, rank == 0 ? HORA_DTYPE_F32 : HORA_DTYPE_F64, HORA_OP_SUM, NULL,
                              &req);
    errors_expect_mismatch("dtype", st, req, "f32", "f64");

    opts.ndim = 2;
    opts.dims[0] = rank == 0 ? 2 : 3;
    opts.dims[1] = rank == 0 ? 3 : 2;
    st = hora_allreduce_async("mm.shape", buf, out, 6, HORA_DTYPE_F32, HORA_OP_SUM, &opts, &req);
    errors_expect_mismatch("shape", st, req, "[2, 3]", "[3, 2]");

    if (rank == 0)
        st = hora_allreduce_async("mm.kind", buf, out, 6, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req);
    else
        st = hora_allgather_async("mm.kind", buf, 6, HORA_DTYPE_F32, NULL, &req);
    errors_expect_mismatch("operation", st, req, "allreduce", "allgather");

    st = hora_allreduce_async("mm.op", buf, out, 6, HORA_DTYPE_F32, rank == 0 ? HORA_OP_SUM : HORA_OP_MAX, NULL, &req);
    errors_expect_mismatch("reduction op", st, req, "sum", "max");

    st = hora_broadcast_async("mm.root", buf, 6, HORA_DTYPE_F32, rank == 0 ? 0 : 1, NULL, &req);
    errors_expect_mismatch("root", st, req, "root 0", "root 1");

    opts = (hora_opts_t)HORA_OPTS_INIT;
    opts.prescale = rank == 0 ? 1 : 0.5;
    st = hora_allreduce_async("mm.prescale", buf, out, 6, HORA_DTYPE_F32, HORA_OP_SUM, &opts, &req);
    errors_expect_mismatch("prescale", st, req, "1", "0.5");

    /* Memory kind is not negotiated: a runtime that moves host memory only
     * refuses a HORA_MEMORY_CUDA request at submission, on the rank that
     * makes it (errors_memory_refused, async_errors_memory.c). */
    opts = (hora_opts_t)HORA_OPTS_INIT;
    opts.ndim = 2;
    opts.dims[0] = 2;
    opts.dims[1] = rank == 0 ? 3 : 4;
    st = hora_allgather_async("mm.trailing", buf, rank == 0 ? 6 : 8, HORA_DTYPE_F32, &opts, &req);
    errors_expect_mismatch("allgather trailing dims", st, req, "[2, 3]", "[2, 4]");
}

/* Argument errors are found at enqueue, on this rank only: nothing is in
 * flight afterwards and *req is untouched. */
static void errors_local(void)
{
    float x[8] = {0};
    hora_opts_t opts = HORA_OPTS_INIT;
    hora_request_t req;
    hora_status_t st;

#define EXPECT_INVALID(what, call)                                                                                 \
    do {                                                                                                           \
        req = REQ_SENTINEL;                                                                                        \
        st = (call);                                                                                               \
        CHECK(st == HORA_ERR_INVALID_ARG, "%s: returned %s, expected HORA_ERR_INVALID_ARG", what,                  \
              hora_status_string(st));                                                                             \
        CHECK(req == REQ_SENTINEL, "%s: *req was written although the call failed", what);                         \
        if (st == HORA_ERR_INVALID_ARG) CHECK(hora_last_error()[0] != '\0', "%s: hora_last_error is empty", what); \
    } while (0)

    EXPECT_INVALID("bad dtype", hora_allreduce_async("bad.dtype", x, x, 4, (hora_dtype_t)99, HORA_OP_SUM, NULL, &req));
    EXPECT_INVALID("bad op", hora_allreduce_async("bad.op", x, x, 4, HORA_DTYPE_F32, (hora_op_t)99, NULL, &req));
    EXPECT_INVALID("NULL name", hora_allreduce_async(NULL, x, x, 4, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req));
    EXPECT_INVALID("NULL send", hora_allreduce_async("bad.null", NULL, x, 4, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req));
    st = hora_allreduce_async("bad.noreq", x, x, 4, HORA_DTYPE_F32, HORA_OP_SUM, NULL, NULL);
    CHECK(st == HORA_ERR_INVALID_ARG, "NULL req: returned %s, expected HORA_ERR_INVALID_ARG", hora_status_string(st));
    opts.ndim = 2;
    opts.dims[0] = 2;
    opts.dims[1] = 3;
    EXPECT_INVALID("dims product != count",
                   hora_allreduce_async("bad.dims", x, x, 5, HORA_DTYPE_F32, HORA_OP_SUM, &opts, &req));
    EXPECT_INVALID("allgather dims product != count",
                   hora_allgather_async("bad.agdims", x, 5, HORA_DTYPE_F32, &opts, &req));
    opts.ndim = HORA_MAX_DIMS + 1;
    EXPECT_INVALID("ndim > HORA_MAX_DIMS",
                   hora_allreduce_async("bad.ndim", x, x, 1, HORA_DTYPE_F32, HORA_OP_SUM, &opts, &req));
    opts.ndim = -1;
    EXPECT_INVALID("ndim < 0", hora_allreduce_async("bad.ndim", x, x, 1, HORA_DTYPE_F32, HORA_OP_SUM, &opts, &req));
    EXPECT_INVALID("broadcast root = size", hora_broadcast_async("bad.root", x, 4, HORA_DTYPE_F32, size, NULL, &req));
    CHECK(strstr(hora_last_error(), "root") != NULL, "bad-root message does not mention the root: '%s'",
          hora_last_error());
    EXPECT_INVALID("broadcast root = -1", hora_broadcast_async("bad.root", x, 4, HORA_DTYPE_F32, -1, NULL, &req));
#undef EXPECT_INVALID
    /* Nothing of the above may be in flight: this one must work. */
    ar_case_next_ok("local");
}

/* One *_async call given options whose struct_bytes is 0 (not initialised
 * with HORA_OPTS_INIT): refused at the call, with a message naming the call
 * and struct_bytes, nothing in flight. */
static void errors_expect_bytes(const char *what, hora_status_t st, hora_request_t req)
{
    CHECK(st == HORA_ERR_INVALID_ARG, "%s with struct_bytes 0: returned %s, expected HORA_ERR_INVALID_ARG", what,
          hora_status_string(st));
    CHECK(req == REQ_SENTINEL, "%s with struct_bytes 0: *req was written although the call failed", what);
    CHECK(strstr(hora_last_error(), what) && strstr(hora_last_error(), "struct_bytes is 0"),
          "%s with struct_bytes 0: the message '%s' names neither the call nor struct_bytes", what, hora_last_error());
}

/* hora_opts_t.struct_bytes (hora.h): every *_async call that takes options
 * refuses a struct not initialised with HORA_OPTS_INIT, and runs an older,
 * smaller one (opts_older.h) with the defaults of the fields it lacks (the
 * poisoned bytes past it would be an unknown process set and an invalid
 * reproducible mode). */
static void errors_opts_bytes(void)
{
    float x[8] = {0};
    hora_opts_t bad = HORA_OPTS_INIT;
    bad.struct_bytes = 0;
    hora_opts_t bad2[2] = {HORA_OPTS_INIT, HORA_OPTS_INIT};
    bad2[0].struct_bytes = 0;
    const char *names[1] = {"bytes.g"};
    const void *send[1] = {x};
    void *recv[1] = {x};
    size_t counts[1] = {8};
    hora_request_t req = REQ_SENTINEL;
    hora_status_t st;

    st = hora_allreduce_async("bytes", x, x, 8, HORA_DTYPE_F32, HORA_OP_SUM, &bad, &req);
    errors_expect_bytes("hora_allreduce_async", st, req);
    st = hora_grouped_allreduce_async(1, names, send, recv, counts, HORA_DTYPE_F32, HORA_OP_SUM, &bad, &req);
    errors_expect_bytes("hora_grouped_allreduce_async", st, req);
    st = hora_broadcast_async("bytes", x, 8, HORA_DTYPE_F32, 0, &bad, &req);
    errors_expect_bytes("hora_broadcast_async", st, req);
    st = hora_allgather_async("bytes", x, 8, HORA_DTYPE_F32, &bad, &req);
    errors_expect_bytes("hora_allgather_async", st, req);
    st = hora_reducescatter_async("bytes", x, x, 8, HORA_DTYPE_F32, HORA_OP_SUM, &bad, &req);
    errors_expect_bytes("hora_reducescatter_async", st, req);
    st = hora_grouped_reducescatter_async(1, names, send, recv, counts, HORA_DTYPE_F32, HORA_OP_SUM, bad2, &req);
    errors_expect_bytes("hora_grouped_reducescatter_async", st, req);
    st = hora_alltoall_async("bytes", x, 8, HORA_DTYPE_F32, NULL, &bad, &req);
    errors_expect_bytes("hora_alltoall_async", st, req);
    st = hora_barrier_async("bytes", &bad, &req);
    errors_expect_bytes("hora_barrier_async", st, req);
    if (rank == 0) printf("  struct_bytes 0 -> %s\n", hora_last_error());

    /* An older caller's prescale 2 all-reduce of ones: 2 * size everywhere. */
    union opts_older_poisoned older;
    opts_older_init(&older);
    older.older.prescale = 2.0;
    float ones[8];
    for (int i = 0; i < 8; i++) ones[i] = 1.0f;
    req = REQ_SENTINEL;
    st = hora_allreduce_async("bytes.older", ones, ones, 8, HORA_DTYPE_F32, HORA_OP_SUM, opts_older_as_opts(&older),
                              &req);
    CHECK(st == HORA_OK, "older hora_opts_t (struct_bytes %zu): enqueue returned %s: %s", sizeof(struct opts_older),
          hora_status_string(st), hora_last_error());
    if (st == HORA_OK && wait_ok(req, "older hora_opts_t")) {
        int wrong = 0;
        for (int i = 0; i < 8; i++) wrong += ones[i] != 2.0f * (float)size;
        CHECK(!wrong, "older hora_opts_t: %d of 8 elements differ from %d (prescale 2)", wrong, 2 * size);
    }
    if (st == HORA_OK) hora_request_free(req);
    ar_case_next_ok("opts bytes");
}

/* A name in flight cannot be enqueued again. Rank d submits twice before a
 * barrier, the others once after it, so d's request cannot complete between
 * its two calls. */
static void errors_duplicate(void)
{
    for (int d = 0; d < size; d++) {
        struct ar_case c;
        ar_case_init(&c, "dup", HORA_DTYPE_I32, HORA_OP_SUM, 257, 0, d % 2, 600u + (unsigned)d);
        snprintf(c.name, sizeof(c.name), "dup");
        if (rank == d) {
            ar_case_start(&c);
            int32_t other[257];
            for (int i = 0; i < 257; i++) other[i] = -1000 - i;
            hora_request_t req2 = REQ_SENTINEL;
            hora_status_t st = hora_allreduce_async("dup", other, other, 257, HORA_DTYPE_I32, HORA_OP_SUM, NULL, &req2);
            CHECK(st == HORA_ERR_DUPLICATE, "rank %d: second 'dup' in flight returned %s, expected HORA_ERR_DUPLICATE",
                  d, hora_status_string(st));
            CHECK(req2 == REQ_SENTINEL, "duplicate: *req was written although the call failed");
            if (st == HORA_ERR_DUPLICATE) CHECK(hora_last_error()[0] != '\0', "duplicate: hora_last_error is empty");
        }
        barrier();
        if (rank != d) ar_case_start(&c);
        ar_case_finish(&c, 0); /* the first one completes, with its own data */
    }
}

static void errors_outside_runtime(const char *when)
{
    float x[4] = {0};
    void *p = NULL;
    const char *names[1] = {"out"};
    const void *send[1] = {x};
    void *recv[1] = {x};
    size_t counts[1] = {4};
    hora_request_t req = REQ_SENTINEL;
    hora_status_t st;

#define EXPECT_NOT_INIT(what, call)                                                                                \
    do {                                                                                                           \
        st = (call);                                                                                               \
        CHECK(st == HORA_ERR_NOT_INITIALIZED, "%s %s: returned %s, expected HORA_ERR_NOT_INITIALIZED", what, when, \
              hora_status_string(st));                                                                             \
        CHECK(req == REQ_SENTINEL, "%s %s: *req was written", what, when);                                         \
    } while (0)

    EXPECT_NOT_INIT("hora_allreduce_async",
                    hora_allreduce_async("out", x, x, 4, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req));
    EXPECT_NOT_INIT("hora_broadcast_async", hora_broadcast_async("out", x, 4, HORA_DTYPE_F32, 0, NULL, &req));
    EXPECT_NOT_INIT("hora_allgather_async", hora_allgather_async("out", x, 4, HORA_DTYPE_F32, NULL, &req));
    EXPECT_NOT_INIT(
        "hora_grouped_allreduce_async",
        hora_grouped_allreduce_async(1, names, send, recv, counts, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req));
    EXPECT_NOT_INIT("hora_join", hora_join(NULL));
    EXPECT_NOT_INIT("hora_mem_alloc", hora_mem_alloc(64, &p));
    CHECK(p == NULL, "hora_mem_alloc %s: *ptr was written", when);
#undef EXPECT_NOT_INIT
}

void mode_errors(void)
{
    errors_outside_runtime("before hora_init");
    if (!runtime_start("errors")) return;
    if (rank == 0) printf("test_async errors: %d ranks, transport %s\n", size, hora_transport_name());
    hora_status_t st = hora_init();
    CHECK(st == HORA_ERR_ALREADY_INITIALIZED, "a second hora_init returned %s", hora_status_string(st));

    errors_local();
    errors_opts_bytes();
    errors_mismatches();
    errors_duplicate();
    errors_memory_refused(); /* async_errors_memory.c */
    runtime_stop("errors");

    /* init -> shutdown -> init works. */
    errors_outside_runtime("after hora_shutdown");
    if (!runtime_start("errors, second init")) return;
    ar_case_next_ok("reinit");
    runtime_stop("errors, second init");
}
