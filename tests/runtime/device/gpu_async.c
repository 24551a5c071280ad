/*
 * gpu_async.c - the negotiated API on device buffers (opts.memory =
 * HORA_MEMORY_CUDA): hora_allreduce_async (every dtype x op x in/out of
 * place x the counts of gc_counts on the device pool, SUM and MAX on
 * cudaMalloc'd buffers, one tensor view one element into its allocation),
 * hora_grouped_allreduce_async, hora_broadcast_async from every root,
 * hora_allgather_async with a first dimension that differs per rank; then fused small tensors: in-place
 * all-reduces laid out in one hora_mem_alloc_device arena the way hora.h
 * describes (each at the next HORA_ALIGN_BYTES multiple, submitted in
 * order), which the runtime may reduce where they are. meson runs this part
 * with HORA_FUSION_THRESHOLD=1M (small tensors fused, the big ones over it)
 * and 0 (nothing fused).
 *
 * One batch per dtype: every request of it in flight at once, submitted in
 * a different order on every rank and completed in yet another.
 *
 * When the data is ready (hora.h: the work queued on opts.stream at
 * submission, or opts.ready_event), one of three per request:
 *   STREAM  queued on a non-blocking stream of the test,
 *   EVENT   queued on another one, an event recorded after it as ready_event,
 *   LEGACY  queued on the legacy default stream (opts.stream = NULL).
 * Each stream starts the batch with a host function that sleeps 30 ms, and
 * every device buffer holds 0xff before it: a runtime that reads the inputs
 * before the stream says they are ready reduces poison (NaN, -1, 255).
 * Completion, one of three per request:
 *   WAIT    hora_wait, then a plain cudaMemcpy of the result,
 *   STREAM  hora_stream_wait on a third stream, the result copied back on
 *           that stream into pinned memory, the stream synchronised, then
 *           hora_wait for the status,
 *   TEST    hora_test polled until done, then cudaMemcpy.
 * The nine combinations cycle over a batch's requests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_coll.h"

enum ac_coll { AC_ALLREDUCE, AC_BROADCAST, AC_ALLGATHER };
enum ac_ready { AC_READY_STREAM, AC_READY_EVENT, AC_READY_LEGACY, AC_READY_COUNT };
enum ac_done { AC_DONE_WAIT, AC_DONE_STREAM, AC_DONE_TEST, AC_DONE_COUNT };
static const char *const ac_ready_name[AC_READY_COUNT] = {"ready=stream", "ready=event", "ready=legacy-stream"};
static const char *const ac_done_name[AC_DONE_COUNT] = {"hora_wait", "hora_stream_wait", "hora_test"};

#define AC_DELAY_S 0.03
#define AC_POLL_LIMIT_S 120.0

/* One request and its expected result. */
struct ac_case {
    char name[48], what[200];
    enum ac_coll coll;
    hora_dtype_t dtype;
    hora_op_t op;
    size_t count; /* this rank's element count (allgather: rows * cols) */
    int inplace;  /* allreduce only (a broadcast works in place, an allgather into the runtime's result) */
    enum gc_buf_kind kind;
    size_t offset;       /* bytes from the allocation's start (a tensor view) */
    size_t arena_offset; /* arena cases: where in the arena */
    int root;            /* broadcast */
    size_t cols;         /* allgather: rank r sends (ag_rows + r) x cols */
    size_t ag_rows;
    int group; /* -1, or the first member's index: submitted together */
    int arena; /* buffers carved from the batch's arena (not freed alone, no guard) */
    unsigned salt;
    enum ac_ready ready;
    enum ac_done done;
    struct gc_dbuf send, recv; /* recv: out-of-place allreduces only */
    void *send_ptr, *recv_ptr;
    size_t result_count;                /* elements of the result on this rank */
    unsigned char *in, *out, *out_send; /* pinned: the input (+ 0xff guard), the result, the send buffer after */
    cudaEvent_t event;
    hora_request_t req;
    int submitted;
    hora_status_t status;
};

struct ac_batch {
    const char *tag;
    struct ac_case *cases;
    int n, cap;
    int in_order; /* submit and complete in case order on every rank (the arena) */
    void *arena;  /* hora_mem_alloc_device block of the arena cases */
};

static cudaStream_t ac_stream_ready, ac_stream_event, ac_stream_done;
static int ac_batch_seq;

static void CUDART_CB ac_delay(void *arg)
{
    (void)arg;
    test_sleep_s(AC_DELAY_S); /* a host function may not call CUDA; sleeping is fine */
}

static struct ac_case *ac_add(struct ac_batch *b, enum ac_coll coll, hora_dtype_t dtype, hora_op_t op, size_t count,
                              int inplace, enum gc_buf_kind kind)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->cases = realloc(b->cases, sizeof(*b->cases) * (size_t)b->cap);
        if (!b->cases) gc_fatal("out of host memory (async cases)");
    }
    struct ac_case *c = &b->cases[b->n];
    memset(c, 0, sizeof(*c));
    c->coll = coll;
    c->dtype = dtype;
    c->op = op;
    c->count = count;
    c->inplace = coll == AC_ALLREDUCE && inplace;
    c->kind = kind;
    c->group = -1;
    c->salt = gc_next_salt();
    c->ready = (enum ac_ready)(b->n % AC_READY_COUNT);
    c->done = (enum ac_done)((b->n / AC_READY_COUNT) % AC_DONE_COUNT);
    c->status = HORA_ERR_INTERNAL;
    snprintf(c->name, sizeof(c->name), "gc.%d.%d", ac_batch_seq, b->n);
    b->n++;
    return c;
}

static void ac_describe(struct ac_case *c)
{
    const char *kind = c->arena ? "arena" : gc_buf_kind_name[c->kind];
    switch (c->coll) {
    case AC_ALLREDUCE:
        snprintf(c->what, sizeof(c->what), "%s('%s') count=%zu %s %s %s %s%s%s, %s, %s",
                 c->group >= 0 ? "hora_grouped_allreduce_async" : "hora_allreduce_async", c->name, c->count,
                 hora_dtype_name(c->dtype), hora_op_name(c->op), c->inplace ? "in-place" : "out-of-place", kind,
                 c->offset && !c->arena ? " +1 element" : "", c->group >= 0 ? " (group member)" : "",
                 ac_ready_name[c->ready], ac_done_name[c->done]);
        break;
    case AC_BROADCAST:
        snprintf(c->what, sizeof(c->what), "hora_broadcast_async('%s') count=%zu %s root=%d %s, %s, %s", c->name,
                 c->count, hora_dtype_name(c->dtype), c->root, kind, ac_ready_name[c->ready], ac_done_name[c->done]);
        break;
    case AC_ALLGATHER:
        snprintf(c->what, sizeof(c->what), "hora_allgather_async('%s') [%zu + rank, %zu] %s %s, %s, %s", c->name,
                 c->ag_rows, c->cols, hora_dtype_name(c->dtype), kind, ac_ready_name[c->ready], ac_done_name[c->done]);
        break;
    }
}

/* Allgather: rank r's rows and the global element offset of its block. */
static size_t ac_ag_count(const struct ac_case *c, int r) { return (c->ag_rows + (size_t)r) * c->cols; }

static size_t ac_ag_offset(const struct ac_case *c, int r)
{
    size_t at = 0;
    for (int q = 0; q < r; q++) at += ac_ag_count(c, q);
    return at;
}

static hora_op_t ac_input_op(const struct ac_case *c)
{
    return c->coll == AC_ALLREDUCE ? c->op : c->coll == AC_BROADCAST ? HORA_OP_MAX : HORA_OP_MIN;
}

/* An out-of-place allreduce writes a buffer of its own. */
static int ac_has_recv(const struct ac_case *c) { return c->coll == AC_ALLREDUCE && !c->inplace; }

/* Whose send buffer must come back unchanged (a broadcast's is its result). */
static int ac_keeps_send(const struct ac_case *c) { return ac_has_recv(c) || c->coll == AC_ALLGATHER; }

/* ------------------------------------------------------------ the stages */

/* Device and pinned buffers, the host inputs, the device buffers poisoned
 * (synchronously: whatever is read too early is poison). */
static void ac_prepare(struct ac_batch *b)
{
    for (int i = 0; i < b->n; i++) {
        struct ac_case *c = &b->cases[i];
        const size_t es = hora_dtype_size(c->dtype), bytes = c->count * es;
        const size_t guard = c->arena ? 0 : GC_GUARD_BYTES;
        ac_describe(c);
        c->result_count = c->coll == AC_ALLGATHER ? ac_ag_offset(c, gc_size) : c->count;
        GC_CUDA(cudaMallocHost((void **)&c->in, bytes + GC_GUARD_BYTES));
        GC_CUDA(cudaMallocHost((void **)&c->out, c->result_count * es + GC_GUARD_BYTES));
        GC_CUDA(cudaMallocHost((void **)&c->out_send, bytes + GC_GUARD_BYTES));
        memset(c->in, 0xff, bytes + GC_GUARD_BYTES);
        memset(c->out, 0, c->result_count * es + GC_GUARD_BYTES);
        memset(c->out_send, 0, bytes + GC_GUARD_BYTES);
        const int src = c->coll == AC_BROADCAST ? c->root : gc_rank;
        const size_t at = c->coll == AC_ALLGATHER ? ac_ag_offset(c, gc_rank) : 0;
        gc_fill_input(c->in, at, c->count, c->dtype, ac_input_op(c), src, c->salt);
        if (!c->arena) {
            gc_dbuf_alloc(&c->send, c->kind, bytes, c->offset);
            c->send_ptr = c->send.ptr;
            if (ac_has_recv(c)) {
                gc_dbuf_alloc(&c->recv, c->kind, bytes, c->offset);
                c->recv_ptr = c->recv.ptr;
            } else {
                c->recv_ptr = c->send_ptr;
            }
        }
        GC_CUDA(cudaMemset(c->send_ptr, 0xff, bytes + guard));
        if (ac_has_recv(c)) GC_CUDA(cudaMemset(c->recv_ptr, 0xff, bytes + guard));
        if (c->ready == AC_READY_EVENT && (c->group < 0 || c->group == i))
            GC_CUDA(cudaEventCreateWithFlags(&c->event, cudaEventDisableTiming));
        c->req = NULL;
    }
    GC_CUDA(cudaDeviceSynchronize());
}

static cudaStream_t ac_ready_stream(enum ac_ready ready)
{
    return ready == AC_READY_STREAM ? ac_stream_ready : ready == AC_READY_EVENT ? ac_stream_event : (cudaStream_t)0;
}

/* Queue case c's input (and the poison of its outputs) on its stream. */
static void ac_produce(struct ac_case *c)
{
    const size_t es = hora_dtype_size(c->dtype), bytes = c->count * es;
    const size_t guard = c->arena ? 0 : GC_GUARD_BYTES;
    cudaStream_t s = ac_ready_stream(c->ready);
    if (ac_has_recv(c)) GC_CUDA(cudaMemsetAsync(c->recv_ptr, 0xff, bytes + guard, s));
    if (c->coll == AC_BROADCAST && gc_rank != c->root)
        GC_CUDA(cudaMemsetAsync(c->send_ptr, 0xff, bytes + guard, s));
    else
        GC_CUDA(cudaMemcpyAsync(c->send_ptr, c->in, bytes + guard, cudaMemcpyHostToDevice, s));
}

static void ac_opts(const struct ac_case *c, hora_opts_t *o)
{
    *o = (hora_opts_t)HORA_OPTS_INIT;
    o->memory = GC_MEMORY_DEVICE;
    if (c->ready == AC_READY_EVENT)
        o->ready_event = c->event;
    else
        o->stream = ac_ready_stream(c->ready);
    if (c->coll == AC_ALLGATHER) {
        o->ndim = 2;
        o->dims[0] = (int64_t)(c->ag_rows + (size_t)gc_rank);
        o->dims[1] = (int64_t)c->cols;
    }
}

static void ac_submit_one(struct ac_case *c)
{
    hora_opts_t o;
    hora_status_t st;
    ac_produce(c);
    if (c->ready == AC_READY_EVENT) GC_CUDA(cudaEventRecord(c->event, ac_stream_event));
    ac_opts(c, &o);
    switch (c->coll) {
    case AC_ALLREDUCE:
        st = hora_allreduce_async(c->name, c->send_ptr, c->recv_ptr, c->count, c->dtype, c->op, &o, &c->req);
        break;
    case AC_BROADCAST: st = hora_broadcast_async(c->name, c->send_ptr, c->count, c->dtype, c->root, &o, &c->req); break;
    default: st = hora_allgather_async(c->name, c->send_ptr, c->count, c->dtype, &o, &c->req); break;
    }
    c->submitted = st == HORA_OK;
    GC_CHECK(st == HORA_OK, "%s: submission returned %s: %s", c->what, hora_status_string(st), hora_last_error());
}

/* The members of the group whose first member is cases[first] (they are
 * consecutive), with one readiness for all. */
static void ac_submit_group(struct ac_batch *b, int first)
{
    int n = 0;
    while (first + n < b->n && b->cases[first + n].group == first) n++;
    const char *names[16];
    const void *send[16];
    void *recv[16];
    size_t counts[16];
    hora_request_t reqs[16];
    struct ac_case *c0 = &b->cases[first];
    if (n > 16) gc_fatal("a group of %d members (16 at most)", n);
    for (int k = 0; k < n; k++) {
        struct ac_case *c = &b->cases[first + k];
        ac_produce(c);
        names[k] = c->name;
        send[k] = c->send_ptr;
        recv[k] = c->recv_ptr;
        counts[k] = c->count;
        reqs[k] = NULL;
    }
    if (c0->ready == AC_READY_EVENT) GC_CUDA(cudaEventRecord(c0->event, ac_stream_event));
    hora_opts_t o;
    ac_opts(c0, &o);
    hora_status_t st = hora_grouped_allreduce_async(n, names, send, recv, counts, c0->dtype, c0->op, &o, reqs);
    GC_CHECK(st == HORA_OK, "%s: submission of the group of %d returned %s: %s", c0->what, n, hora_status_string(st),
             hora_last_error());
    for (int k = 0; k < n; k++) {
        b->cases[first + k].req = reqs[k];
        b->cases[first + k].submitted = st == HORA_OK;
    }
}

static void ac_submit(struct ac_batch *b, const int *order)
{
    /* Every producing stream starts late: see the file's comment. */
    GC_CUDA(cudaLaunchHostFunc(ac_stream_ready, ac_delay, NULL));
    GC_CUDA(cudaLaunchHostFunc(ac_stream_event, ac_delay, NULL));
    GC_CUDA(cudaLaunchHostFunc((cudaStream_t)0, ac_delay, NULL));
    for (int k = 0; k < b->n; k++) {
        struct ac_case *c = &b->cases[order[k]];
        if (c->group >= 0) {
            if (c->group == order[k]) ac_submit_group(b, order[k]);
        } else {
            ac_submit_one(c);
        }
    }
}

/* Result bytes of a finished request into c->out (and the send buffer into
 * c->out_send), synchronously. */
static void ac_read_back(struct ac_case *c)
{
    const size_t es = hora_dtype_size(c->dtype), bytes = c->count * es;
    const size_t guard = c->arena ? 0 : GC_GUARD_BYTES;
    if (c->coll == AC_ALLGATHER) {
        void *data = NULL;
        size_t total = 0;
        const size_t *rank_counts = NULL;
        hora_status_t st = hora_request_result(c->req, &data, &total, &rank_counts);
        GC_CHECK(st == HORA_OK, "%s: hora_request_result: %s: %s", c->what, hora_status_string(st), hora_last_error());
        if (st != HORA_OK) return;
        GC_CHECK(total == c->result_count, "%s: total_count %zu, expected %zu", c->what, total, c->result_count);
        GC_CHECK(rank_counts != NULL, "%s: rank_counts is NULL", c->what);
        for (int r = 0; rank_counts && r < gc_size; r++)
            GC_CHECK(rank_counts[r] == ac_ag_count(c, r), "%s: rank_counts[%d] = %zu, expected %zu", c->what, r,
                     rank_counts[r], ac_ag_count(c, r));
        GC_CHECK(data != NULL || total == 0, "%s: the result is NULL", c->what);
        /* Host or device memory (hora.h does not say): cudaMemcpyDefault
         * copies from either. */
        if (data && total == c->result_count) GC_CUDA(cudaMemcpy(c->out, data, total * es, cudaMemcpyDefault));
    } else {
        GC_CUDA(cudaMemcpy(c->out, c->recv_ptr, bytes + guard, cudaMemcpyDeviceToHost));
    }
    if (ac_keeps_send(c)) GC_CUDA(cudaMemcpy(c->out_send, c->send_ptr, bytes + guard, cudaMemcpyDeviceToHost));
}

static void ac_complete(struct ac_batch *b, const int *order)
{
    for (int k = 0; k < b->n; k++) {
        struct ac_case *c = &b->cases[order[k]];
        if (!c->submitted) continue;
        gc_phase("async batch %s: completing %s", b->tag, c->what);
        if (c->done == AC_DONE_WAIT) {
            c->status = hora_wait(c->req);
            if (c->status == HORA_OK) ac_read_back(c);
        } else if (c->done == AC_DONE_TEST) {
            int finished = 0;
            const double t0 = test_now_s();
            hora_status_t st = HORA_IN_PROGRESS;
            while (!finished && test_now_s() - t0 < AC_POLL_LIMIT_S) {
                st = hora_test(c->req, &finished);
                if (!finished) test_sleep_s(0.0001);
            }
            if (!finished) gc_fatal("%s: hora_test still says in progress after %.0f s", c->what, AC_POLL_LIMIT_S);
            c->status = st;
            if (st == HORA_OK) ac_read_back(c);
        } else {
            hora_status_t st = hora_stream_wait(c->req, ac_stream_done);
            GC_CHECK(st == HORA_OK, "%s: hora_stream_wait returned %s: %s", c->what, hora_status_string(st),
                     hora_last_error());
            if (c->coll != AC_ALLGATHER) { /* the result's address is known only once it completes */
                const size_t es = hora_dtype_size(c->dtype), bytes = c->count * es;
                const size_t guard = c->arena ? 0 : GC_GUARD_BYTES;
                GC_CUDA(cudaMemcpyAsync(c->out, c->recv_ptr, bytes + guard, cudaMemcpyDeviceToHost, ac_stream_done));
                if (ac_keeps_send(c))
                    GC_CUDA(cudaMemcpyAsync(c->out_send, c->send_ptr, bytes + guard, cudaMemcpyDeviceToHost,
                                            ac_stream_done));
            }
        }
    }
    /* The stream-ordered copies: the stream waited for each request. */
    gc_phase("async batch %s: cudaStreamSynchronize of the stream that waits (hora_stream_wait) for the requests",
             b->tag);
    GC_CUDA(cudaStreamSynchronize(ac_stream_done));
    for (int k = 0; k < b->n; k++) {
        struct ac_case *c = &b->cases[order[k]];
        if (!c->submitted || c->done != AC_DONE_STREAM) continue;
        gc_phase("async batch %s: hora_wait after the stream: %s", b->tag, c->what);
        c->status = hora_wait(c->req);
        if (c->status == HORA_OK && c->coll == AC_ALLGATHER) ac_read_back(c);
    }
}

static void ac_check(struct ac_case *c)
{
    const size_t es = hora_dtype_size(c->dtype), bytes = c->count * es;
    if (!c->submitted) return;
    GC_CHECK(c->status == HORA_OK, "%s: %s: %s", c->what, hora_status_string(c->status), hora_request_error(c->req));
    if (c->status != HORA_OK) return;
    GC_CHECK(hora_request_error(c->req) && !hora_request_error(c->req)[0], "%s: succeeded with the message '%s'",
             c->what, hora_request_error(c->req) ? hora_request_error(c->req) : "(NULL)");
    void *want = gc_xmalloc(c->result_count * es);
    if (c->coll == AC_ALLREDUCE)
        gc_fill_expected(want, 0, c->count, c->dtype, c->op, c->salt);
    else if (c->coll == AC_BROADCAST)
        memcpy(want, c->in, bytes);
    else
        for (int r = 0; r < gc_size; r++)
            gc_fill_input((char *)want + ac_ag_offset(c, r) * es, ac_ag_offset(c, r), ac_ag_count(c, r), c->dtype,
                          HORA_OP_MIN, r, c->salt);
    gc_compare(c->what, c->out, want, c->result_count, c->dtype);
    if (!c->arena && c->coll != AC_ALLGATHER) gc_check_guard(c->what, c->out + bytes);
    if (ac_keeps_send(c)) {
        char w2[240];
        snprintf(w2, sizeof(w2), "%s: send buffer", c->what);
        gc_compare(w2, c->out_send, c->in, c->count, c->dtype);
        if (!c->arena) gc_check_guard(w2, c->out_send + bytes);
    }
    free(want);
}

static void ac_release(struct ac_batch *b)
{
    for (int i = 0; i < b->n; i++) {
        struct ac_case *c = &b->cases[i];
        if (c->submitted) hora_request_free(c->req);
        if (c->event) GC_CUDA(cudaEventDestroy(c->event));
        gc_dbuf_free(&c->recv);
        gc_dbuf_free(&c->send);
        GC_CUDA(cudaFreeHost(c->in));
        GC_CUDA(cudaFreeHost(c->out));
        GC_CUDA(cudaFreeHost(c->out_send));
    }
    if (b->arena) {
        hora_status_t st = hora_mem_free(b->arena);
        GC_CHECK(st == HORA_OK, "hora_mem_free of the arena: %s: %s", hora_status_string(st), hora_last_error());
    }
    free(b->cases);
    memset(b, 0, sizeof(*b));
}

static void ac_batch_run(struct ac_batch *b)
{
    const double t0 = test_now_s();
    int *submit = gc_xmalloc(sizeof(int) * (size_t)b->n), *complete = gc_xmalloc(sizeof(int) * (size_t)b->n);
    for (int i = 0; i < b->n; i++) submit[i] = complete[i] = i;
    if (!b->in_order) {
        gc_shuffle(submit, b->n, 0x5eed0000u + (uint64_t)gc_rank * 7919u + (uint64_t)ac_batch_seq);
        gc_shuffle(complete, b->n, 0xd0e00000u + (uint64_t)gc_rank * 104729u + (uint64_t)ac_batch_seq);
    }
    gc_phase("async batch %s: preparing %d requests", b->tag, b->n);
    ac_prepare(b);
    gc_phase("async batch %s: submitting %d requests", b->tag, b->n);
    ac_submit(b, submit);
    ac_complete(b, complete);
    for (int i = 0; i < b->n; i++) ac_check(&b->cases[i]);
    if (gc_rank == 0) printf("  async %-6s %3d requests, %.2f s\n", b->tag, b->n, test_now_s() - t0);
    fflush(stdout);
    ac_release(b);
    free(complete);
    free(submit);
    ac_batch_seq++;
}

/* ------------------------------------------------------------- the batches */

/* Every request kind of one dtype. */
static void ac_batch_dtype(hora_dtype_t dtype)
{
    struct ac_batch b = {.tag = hora_dtype_name(dtype)};
    size_t counts[8];
    const int ncounts = gc_counts(dtype, counts);
    const size_t big = gc_big_count(dtype);

    for (int op = 0; op < HORA_OP_COUNT; op++)
        for (int c = 0; c < ncounts; c++)
            for (int kind = 0; kind < GC_BUF_KIND_COUNT; kind++) {
                /* cudaMalloc'd: SUM and MAX (staging does not depend on the
                 * op). The big count: SUM, MIN and AVG on the pool, SUM
                 * cudaMalloc'd. */
                if (kind == GC_BUF_CUDA && op != HORA_OP_SUM && op != HORA_OP_MAX) continue;
                if (dtype == HORA_DTYPE_BOOL && op == HORA_OP_AVG) continue; /* refused (hora.h) */
                if (counts[c] == big &&
                    (kind == GC_BUF_CUDA ? op != HORA_OP_SUM
                                         : op != HORA_OP_SUM && op != HORA_OP_MIN && op != HORA_OP_AVG))
                    continue;
                for (int inplace = 0; inplace < 2; inplace++)
                    ac_add(&b, AC_ALLREDUCE, dtype, (hora_op_t)op, counts[c], inplace, (enum gc_buf_kind)kind);
            }
    /* A tensor view: one element into a cudaMalloc'd allocation. */
    ac_add(&b, AC_ALLREDUCE, dtype, HORA_OP_SUM, 1001, 0, GC_BUF_CUDA)->offset = hora_dtype_size(dtype);

    /* Two groups: SUM, and another op per dtype; members of both kinds. */
    const size_t gcounts[] = {0, 1, 7, 1001, 65537};
    const hora_op_t gops[2] = {HORA_OP_SUM, (hora_op_t)(1 + (int)dtype % (HORA_OP_COUNT - 1))};
    for (int g = 0; g < 2; g++) {
        const int first = b.n;
        for (int k = 0; k < 5; k++) {
            struct ac_case *c =
                ac_add(&b, AC_ALLREDUCE, dtype, gops[g], gcounts[k], k % 2, (enum gc_buf_kind)((k + g) % 2));
            c->group = first;
            c->ready = b.cases[first].ready; /* one readiness for the whole group */
        }
    }

    const size_t bcounts[] = {0, 1, 1001, 65537};
    for (int root = 0; root < gc_size; root++)
        for (size_t c = 0; c < sizeof(bcounts) / sizeof(bcounts[0]); c++)
            for (int kind = 0; kind < GC_BUF_KIND_COUNT; kind++)
                ac_add(&b, AC_BROADCAST, dtype, HORA_OP_SUM, bcounts[c], 1, (enum gc_buf_kind)kind)->root = root;
    ac_add(&b, AC_BROADCAST, dtype, HORA_OP_SUM, big, 1, GC_BUF_POOL)->root = gc_size - 1;

    /* Allgather: rank r sends (rows + r) x cols; rank 0 none when rows = 0. */
    for (size_t rows = 0; rows < 3; rows++)
        for (size_t cols = 1; cols <= 3; cols += 2)
            for (int kind = 0; kind < GC_BUF_KIND_COUNT; kind++) {
                struct ac_case *c = ac_add(&b, AC_ALLGATHER, dtype, HORA_OP_MIN, 0, 0, (enum gc_buf_kind)kind);
                c->ag_rows = rows;
                c->cols = cols;
            }
    {
        struct ac_case *c = ac_add(&b, AC_ALLGATHER, dtype, HORA_OP_MIN, 0, 0, GC_BUF_POOL);
        c->ag_rows = big / (size_t)gc_size / 5;
        c->cols = 5;
    }
    for (int i = 0; i < b.n; i++)
        if (b.cases[i].coll == AC_ALLGATHER) b.cases[i].count = ac_ag_count(&b.cases[i], gc_rank);
    ac_batch_run(&b);
}

/* In-place all-reduces of every dtype (SUM) laid out back to back, each at
 * the next HORA_ALIGN_BYTES multiple of one hora_mem_alloc_device block,
 * submitted in that order on every rank from one stream: what a gradient
 * arena looks like, which the runtime may reduce without a copy. */
static void ac_batch_arena(void)
{
    static const size_t counts[] = {1, 17, 63, 64, 65, 1001, 4095, 3};
    const int per = (int)(sizeof(counts) / sizeof(counts[0]));
    struct ac_batch b = {.tag = "arena", .in_order = 1};
    size_t bytes = 0;
    for (int d = 0; d < HORA_DTYPE_COUNT; d++)
        for (int k = 0; k < per; k++) {
            struct ac_case *c = ac_add(&b, AC_ALLREDUCE, (hora_dtype_t)d, HORA_OP_SUM, counts[k], 1, GC_BUF_POOL);
            c->arena = 1;
            c->ready = AC_READY_STREAM;
            c->arena_offset = bytes;
            bytes += (counts[k] * hora_dtype_size((hora_dtype_t)d) + HORA_ALIGN_BYTES - 1) / HORA_ALIGN_BYTES *
                     HORA_ALIGN_BYTES;
        }
    hora_status_t st = hora_mem_alloc_device(bytes, &b.arena);
    if (st != HORA_OK) gc_fatal("hora_mem_alloc_device(%zu): %s: %s", bytes, hora_status_string(st), hora_last_error());
    for (int i = 0; i < b.n; i++) b.cases[i].send_ptr = b.cases[i].recv_ptr = (char *)b.arena + b.cases[i].arena_offset;
    ac_batch_run(&b);
}

void gc_async(void)
{
    const double t0 = test_now_s();
    const char *ft = getenv("HORA_FUSION_THRESHOLD");
    if (gc_rank == 0)
        printf("async requests on device memory (HORA_FUSION_THRESHOLD=%s, big count %zu bytes)\n",
               ft ? ft : "(default)", gc_big_count(HORA_DTYPE_U8));
    GC_CUDA(cudaStreamCreateWithFlags(&ac_stream_ready, cudaStreamNonBlocking));
    GC_CUDA(cudaStreamCreateWithFlags(&ac_stream_event, cudaStreamNonBlocking));
    GC_CUDA(cudaStreamCreateWithFlags(&ac_stream_done, cudaStreamNonBlocking));
    for (int d = 0; d < HORA_DTYPE_COUNT; d++) ac_batch_dtype((hora_dtype_t)d);
    ac_batch_arena();
    GC_CUDA(cudaStreamDestroy(ac_stream_ready));
    GC_CUDA(cudaStreamDestroy(ac_stream_event));
    GC_CUDA(cudaStreamDestroy(ac_stream_done));
    if (gc_rank == 0) printf("async requests: %.1f s\n", test_now_s() - t0);
}
