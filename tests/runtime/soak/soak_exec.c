/* soak_exec.c - running a plan: buffers, submission in this rank's order
 * with the direct collectives in between, completion (hora_wait, hora_test
 * polling, or hora_request_free alone) and the check of every element.
 *
 * Deadlock freedom: a rank blocks (hora_wait, hora_request_free, a direct
 * collective) only on work every rank has already submitted. The direct
 * collectives run during the submission phase, where nobody waits for a
 * request yet, at the same index of every rank's submission sequence; the
 * completion phase starts once this rank has submitted everything, and it
 * waits only for requests of this iteration and the deferred ones of the
 * previous, which every rank submitted before its own completion phase. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exact.h"
#include "rand.h"
#include "soak.h"

#define SOAK_POLL_LIMIT_S 300.0
#define SOAK_FILL_BYTE 0xA5 /* what an output holds before the collective */

/* One scratch buffer for expected results (soak_scratch_reserve sizes it
 * for the largest at the start; it grows if ever needed). */
static void *soak_scratch_buf;
static size_t soak_scratch_have;

static void *soak_scratch(size_t bytes)
{
    if (bytes > soak_scratch_have) {
        free(soak_scratch_buf);
        soak_scratch_have = bytes;
        soak_scratch_buf = malloc(bytes);
        if (!soak_scratch_buf) {
            fprintf(stderr, "rank %d FAIL: out of memory (%zu bytes of scratch)\n", soak_rank, bytes);
            exit(1);
        }
    }
    return soak_scratch_buf;
}

void soak_scratch_reserve(size_t bytes) { memset(soak_scratch(bytes), 0, bytes); /* resident from now on */ }

void soak_scratch_release(void)
{
    free(soak_scratch_buf);
    soak_scratch_buf = NULL;
    soak_scratch_have = 0;
}

static double soak_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void soak_nap(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

/* bytes + a guard, from hora_mem_alloc (shared) or malloc. Running out ends
 * the process: a rank cannot go on without its buffers. */
static void *soak_buf_alloc(int shared, size_t bytes)
{
    void *p = NULL;
    size_t want = bytes + SOAK_GUARD_BYTES;
    if (shared) {
        hora_status_t st = hora_mem_alloc(want, &p);
        if (st != HORA_OK) {
            fprintf(stderr, "rank %d FAIL: hora_mem_alloc(%zu): %s: %s\n", soak_rank, want, hora_status_string(st),
                    hora_last_error());
            exit(1);
        }
    } else if (!(p = malloc(want))) {
        fprintf(stderr, "rank %d FAIL: out of memory (%zu bytes)\n", soak_rank, want);
        exit(1);
    }
    soak_guard_fill(p, bytes);
    return p;
}

static void soak_buf_free(int shared, void *p)
{
    if (!p) return;
    if (shared) {
        hora_status_t st = hora_mem_free(p);
        if (st != HORA_OK) soak_fail("hora_mem_free: %s: %s", hora_status_string(st), hora_last_error());
    } else {
        free(p);
    }
}

static size_t soak_tensor_bytes(const struct soak_tensor *t) { return t->count * hora_dtype_size(t->dtype); }

static void soak_what(const struct soak_plan *p, const struct soak_tensor *t, char *out, size_t len)
{
    char d[200];
    soak_tensor_describe(t, d, sizeof(d));
    snprintf(out, len, "iteration %llu %s", (unsigned long long)p->iteration, d);
}

/* ------------------------------------------------------------- buffers */

static void soak_tensor_alloc(struct soak_plan *p, struct soak_tensor *t)
{
    const size_t bytes = soak_tensor_bytes(t);
    const int shared = t->mem == SOAK_MEM_SHARED;
    if (t->mem == SOAK_MEM_ARENA) {
        t->send = t->recv = (char *)p->arena + t->arena_offset;
        return;
    }
    t->send = soak_buf_alloc(shared, bytes);
    t->recv = t->kind == SOAK_KIND_ALLGATHER                 ? NULL
              : t->kind == SOAK_KIND_BROADCAST || t->inplace ? t->send
                                                             : soak_buf_alloc(shared, bytes);
}

static void soak_tensor_release(struct soak_tensor *t)
{
    if (t->mem != SOAK_MEM_ARENA) {
        const int shared = t->mem == SOAK_MEM_SHARED;
        if (t->recv != t->send) soak_buf_free(shared, t->recv);
        soak_buf_free(shared, t->send);
    }
    t->send = t->recv = NULL;
}

/* Inputs, and a known pattern in what the collective must overwrite. */
static void soak_tensor_fill(struct soak_tensor *t)
{
    const size_t es = hora_dtype_size(t->dtype), bytes = soak_tensor_bytes(t);
    switch (t->kind) {
    case SOAK_KIND_ALLREDUCE:
    case SOAK_KIND_GROUPED:
        soak_ar_fill(t, t->send, t->count);
        if (t->recv != t->send) memset(t->recv, SOAK_FILL_BYTE, bytes);
        break;
    case SOAK_KIND_BROADCAST:
        if (soak_rank == t->root)
            soak_bits_fill(t->send, 0, t->count, es, t->salt, t->root);
        else
            memset(t->send, SOAK_FILL_BYTE, bytes);
        break;
    case SOAK_KIND_ALLGATHER: soak_bits_fill(t->send, 0, t->count, es, t->salt, soak_rank); break;
    }
}

/* ------------------------------------------------------------ submission */

static void soak_opts(const struct soak_tensor *t, hora_opts_t *o)
{
    *o = (hora_opts_t)HORA_OPTS_INIT;
    o->prescale = t->prescale;
    o->postscale = t->postscale;
    o->compression = t->compression;
    o->ndim = t->ndim;
    if (t->kind == SOAK_KIND_ALLGATHER) {
        o->dims[0] = t->first[soak_rank];
        for (int d = 1; d < t->ndim; d++) o->dims[d] = t->dims[d];
    } else {
        for (int d = 0; d < t->ndim; d++) o->dims[d] = t->dims[d];
    }
}

static void soak_submit_unit(struct soak_plan *p, const struct soak_unit *u)
{
    struct soak_tensor *t = &p->tensor[u->first];
    char what[300];
    hora_opts_t opts;
    hora_status_t st;

    for (int m = 0; m < u->n; m++) {
        soak_tensor_alloc(p, &t[m]);
        soak_tensor_fill(&t[m]);
    }
    soak_opts(t, &opts);
    switch (t->kind) {
    case SOAK_KIND_ALLREDUCE:
        st = hora_allreduce_async(t->name, t->send, t->recv, t->count, t->dtype, t->op, &opts, &t->req);
        break;
    case SOAK_KIND_GROUPED: {
        const char *names[SOAK_MAX_GROUP];
        const void *send[SOAK_MAX_GROUP];
        void *recv[SOAK_MAX_GROUP];
        size_t counts[SOAK_MAX_GROUP];
        hora_request_t reqs[SOAK_MAX_GROUP];
        for (int m = 0; m < u->n; m++) {
            names[m] = t[m].name;
            send[m] = t[m].send;
            recv[m] = t[m].recv;
            counts[m] = t[m].count;
        }
        st = hora_grouped_allreduce_async(u->n, names, send, recv, counts, t->dtype, t->op, &opts, reqs);
        if (st == HORA_OK)
            for (int m = 0; m < u->n; m++) t[m].req = reqs[m];
        soak_count.grouped_calls++;
        break;
    }
    case SOAK_KIND_BROADCAST:
        st = hora_broadcast_async(t->name, t->send, t->count, t->dtype, t->root, t->ndim ? &opts : NULL, &t->req);
        break;
    default: st = hora_allgather_async(t->name, t->send, t->count, t->dtype, &opts, &t->req); break;
    }
    if (st != HORA_OK) {
        soak_what(p, t, what, sizeof(what));
        soak_fail("%s: submission returned %s: %s", what, hora_status_string(st), hora_last_error());
        return;
    }
    for (int m = 0; m < u->n; m++) t[m].submitted = 1;
}

/* hora_test on a request that may or may not be done: the contract only. */
static void soak_peek(struct soak_plan *p, struct soak_tensor *t)
{
    int done = -1;
    hora_status_t st = hora_test(t->req, &done);
    soak_count.polls++;
    if ((done == 0 && st == HORA_IN_PROGRESS) || (done == 1 && st == HORA_OK)) return;
    char what[300];
    soak_what(p, t, what, sizeof(what));
    soak_fail("%s: hora_test returned %s with done=%d: %s", what, hora_status_string(st), done,
              hora_request_error(t->req));
}

/* ------------------------------------------------- direct collectives */

static void soak_direct_run(const struct soak_plan *p, const struct soak_direct *d)
{
    static const char *const kinds[] = {"hora_allreduce", "hora_reduce_scatter", "hora_allgatherv", "hora_broadcast"};
    const size_t es = hora_dtype_size(d->dtype);
    /* The inputs of a plain allreduce tensor: the same values, no scales. */
    struct soak_tensor v = {.kind = SOAK_KIND_ALLREDUCE,
                            .dtype = d->dtype,
                            .op = d->op,
                            .count = d->count,
                            .prescale = 1,
                            .postscale = 1,
                            .salt = d->salt};
    char what[200];
    hora_status_t st = HORA_OK;
    void *send = NULL, *recv = NULL, *want;
    size_t n = 0, offset = 0, total = 0, offsets[SOAK_MAX_RANKS];

    snprintf(what, sizeof(what), "iteration %llu %s %s %s count %zu %s %s root %d", (unsigned long long)p->iteration,
             kinds[d->kind], hora_dtype_name(d->dtype), hora_op_name(d->op), d->count,
             d->inplace ? "in-place" : "out-of-place", d->shared ? "shared" : "malloc", d->root);
    switch (d->kind) {
    case SOAK_DIRECT_ALLREDUCE:
        send = soak_buf_alloc(d->shared, d->count * es);
        recv = d->inplace ? send : soak_buf_alloc(d->shared, d->count * es);
        soak_ar_fill(&v, send, d->count);
        if (recv != send) memset(recv, SOAK_FILL_BYTE, d->count * es);
        st = hora_allreduce(send, recv, d->count, d->dtype, d->op);
        n = d->count;
        want = soak_scratch(n * es + 1);
        for (size_t i = 0; i < n; i++) exact_store(want, i, d->dtype, soak_ar_expected(&v, i));
        soak_count.bytes_reduced += d->count * es;
        break;
    case SOAK_DIRECT_REDUCE_SCATTER:
        hora_shard(d->count, soak_size, soak_rank, &offset, &n);
        send = soak_buf_alloc(d->shared, d->count * es);
        recv = soak_buf_alloc(d->shared, n * es);
        soak_ar_fill(&v, send, d->count);
        memset(recv, SOAK_FILL_BYTE, n * es);
        st = hora_reduce_scatter(send, recv, d->count, d->dtype, d->op);
        want = soak_scratch(n * es + 1);
        for (size_t i = 0; i < n; i++) exact_store(want, i, d->dtype, soak_ar_expected(&v, offset + i));
        soak_count.bytes_reduced += d->count * es;
        break;
    case SOAK_DIRECT_ALLGATHERV:
        for (int r = 0; r < soak_size; r++) {
            offsets[r] = total;
            total += d->counts[r];
        }
        n = total;
        recv = soak_buf_alloc(d->shared, total * es);
        memset(recv, SOAK_FILL_BYTE, total * es);
        if (d->inplace) {
            send = (char *)recv + offsets[soak_rank] * es;
        } else {
            send = soak_buf_alloc(d->shared, d->counts[soak_rank] * es);
        }
        soak_bits_fill(send, 0, d->counts[soak_rank], es, d->salt, soak_rank);
        st = hora_allgatherv(send, recv, d->counts, d->dtype);
        want = soak_scratch(total * es + 1);
        for (int r = 0; r < soak_size; r++)
            soak_bits_fill((char *)want + offsets[r] * es, 0, d->counts[r], es, d->salt, r);
        soak_count.bytes_gathered += total * es;
        break;
    default:
        recv = send = soak_buf_alloc(d->shared, d->count * es);
        n = d->count;
        if (soak_rank == d->root)
            soak_bits_fill(send, 0, n, es, d->salt, d->root);
        else
            memset(send, SOAK_FILL_BYTE, n * es);
        st = hora_broadcast(send, d->count, d->dtype, d->root);
        want = soak_scratch(n * es + 1);
        soak_bits_fill(want, 0, n, es, d->salt, d->root);
        soak_count.bytes_broadcast += d->count * es;
        break;
    }
    soak_count.direct_calls++;
    soak_count.checks++;
    if (st != HORA_OK) {
        soak_fail("%s: returned %s: %s", what, hora_status_string(st), hora_last_error());
    } else {
        soak_compare(what, recv, want, n, d->dtype);
        soak_guard_check(what, recv, n * es);
    }
    if (d->kind == SOAK_DIRECT_ALLGATHERV && d->inplace) send = recv;
    if (recv != send) soak_buf_free(d->shared, recv);
    soak_buf_free(d->shared, send);
}

void soak_plan_submit(struct soak_plan *p)
{
    test_rng_t mine = test_rng_seeded(p->rank_seed ^ 0x50B5);
    if (p->arena_bytes) {
        hora_status_t st = hora_mem_alloc(p->arena_bytes, &p->arena);
        if (st != HORA_OK) {
            fprintf(stderr, "rank %d FAIL: hora_mem_alloc(%zu) for the arena: %s: %s\n", soak_rank, p->arena_bytes,
                    hora_status_string(st), hora_last_error());
            exit(1);
        }
    }
    for (int k = 0; k <= p->nunits; k++) {
        for (int j = 0; j < p->ndirect; j++)
            if (p->direct[j].position == k) soak_direct_run(p, &p->direct[j]);
        if (k == p->nunits) break;
        soak_submit_unit(p, &p->unit[p->order[k]]);
        /* Now and then poll an earlier request of this iteration. */
        if (test_rng_below(&mine, 4) == 0) {
            const struct soak_unit *u = &p->unit[p->order[test_rng_below(&mine, (uint32_t)k + 1)]];
            struct soak_tensor *t = &p->tensor[u->first + (int)test_rng_below(&mine, (uint32_t)u->n)];
            if (t->submitted) soak_peek(p, t);
        }
    }
}

/* ------------------------------------------------------------ completion */

/* Completes t with this rank's method; returns whether its data is ready to
 * check (the request is released when it returns 1 with FREE). */
static int soak_complete(struct soak_tensor *t, const char *what)
{
    hora_status_t st;
    switch (t->finish) {
    case SOAK_FINISH_FREE:
        hora_request_free(t->req);
        t->req = NULL;
        return 1;
    case SOAK_FINISH_POLL: {
        const double t0 = soak_now();
        int done = 0;
        for (;;) {
            done = -1;
            st = hora_test(t->req, &done);
            soak_count.polls++;
            if (done == 1) break;
            if (done != 0 || st != HORA_IN_PROGRESS) {
                soak_fail("%s: hora_test on an unfinished request returned %s with done=%d", what,
                          hora_status_string(st), done);
                st = hora_wait(t->req);
                break;
            }
            if (soak_now() - t0 > SOAK_POLL_LIMIT_S) {
                soak_fail("%s: still in flight after %.0f s of hora_test", what, SOAK_POLL_LIMIT_S);
                st = hora_wait(t->req);
                break;
            }
            soak_nap(20000);
        }
        break;
    }
    default: st = hora_wait(t->req); break;
    }
    if (st != HORA_OK) {
        soak_fail("%s: completed with %s: %s", what, hora_status_string(st), hora_request_error(t->req));
        return 0;
    }
    const char *e = hora_request_error(t->req);
    if (!e || e[0]) soak_fail("%s: succeeded, but hora_request_error says '%s'", what, e ? e : "(null)");
    return 1;
}

static void soak_check_allgather(struct soak_tensor *t, const char *what)
{
    const size_t es = hora_dtype_size(t->dtype);
    void *data = NULL;
    size_t total = 0, want_total = 0, at = 0;
    const size_t *counts = NULL;
    hora_status_t st = hora_request_result(t->req, &data, &total, &counts);
    soak_count.checks++;
    if (st != HORA_OK) {
        soak_fail("%s: hora_request_result returned %s: %s", what, hora_status_string(st), hora_last_error());
        return;
    }
    for (int r = 0; r < soak_size; r++) want_total += (size_t)(t->first[r] * t->inner);
    if (total != want_total || !counts || (!data && total)) {
        soak_fail("%s: result of %zu elements (data %p, rank_counts %p), expected %zu", what, total, data,
                  (const void *)counts, want_total);
        return;
    }
    for (int r = 0; r < soak_size; r++)
        if (counts[r] != (size_t)(t->first[r] * t->inner)) {
            soak_fail("%s: rank_counts[%d] = %zu, expected %lld", what, r, counts[r],
                      (long long)(t->first[r] * t->inner));
            return;
        }
    void *want = soak_scratch(total * es + 1);
    for (int r = 0; r < soak_size; r++) {
        soak_bits_fill((char *)want + at * es, 0, counts[r], es, t->salt, r);
        at += counts[r];
    }
    soak_compare(what, data, want, total, t->dtype);
    soak_count.bytes_gathered += total * es;
}

static void soak_check(struct soak_tensor *t, const char *what)
{
    const size_t es = hora_dtype_size(t->dtype), bytes = soak_tensor_bytes(t);
    void *want = soak_scratch(bytes + 1);
    switch (t->kind) {
    case SOAK_KIND_ALLREDUCE:
    case SOAK_KIND_GROUPED:
        for (size_t i = 0; i < t->count; i++) exact_store(want, i, t->dtype, soak_ar_expected(t, i));
        soak_compare(what, t->recv, want, t->count, t->dtype);
        if (t->recv != t->send) {
            char w2[360];
            snprintf(w2, sizeof(w2), "%s (send buffer, which must not change)", what);
            soak_ar_fill(t, want, t->count);
            soak_compare(w2, t->send, want, t->count, t->dtype);
        }
        soak_count.bytes_reduced += bytes;
        break;
    case SOAK_KIND_BROADCAST:
        soak_bits_fill(want, 0, t->count, es, t->salt, t->root);
        soak_compare(what, t->recv, want, t->count, t->dtype);
        soak_count.bytes_broadcast += bytes;
        break;
    default: break;
    }
    if (t->mem != SOAK_MEM_ARENA) {
        soak_guard_check(what, t->send, bytes);
        if (t->recv && t->recv != t->send) soak_guard_check(what, t->recv, bytes);
    }
}

static void soak_tensor_finish(struct soak_plan *p, struct soak_tensor *t)
{
    char what[300];
    if (t->submitted) {
        soak_what(p, t, what, sizeof(what));
        if (soak_complete(t, what)) {
            if (t->kind == SOAK_KIND_ALLGATHER) soak_check_allgather(t, what);
            soak_check(t, what);
        }
        soak_count.requests++;
        if (t->req) hora_request_free(t->req);
        t->req = NULL;
    }
    t->done = 1;
    soak_tensor_release(t);
}

static void soak_plan_retire(struct soak_plan *p)
{
    for (int k = 0; k < p->ntensors; k++)
        if (!p->tensor[k].done) soak_tensor_finish(p, &p->tensor[k]);
    if (p->arena) {
        hora_status_t st = hora_mem_free(p->arena);
        if (st != HORA_OK) soak_fail("hora_mem_free(arena): %s: %s", hora_status_string(st), hora_last_error());
        p->arena = NULL;
    }
}

void soak_plan_finish(struct soak_plan *cur, struct soak_plan *prev)
{
    struct soak_tensor *list[2 * SOAK_MAX_TENSORS];
    struct soak_plan *owner[2 * SOAK_MAX_TENSORS];
    int n = 0;
    for (int k = 0; cur && k < cur->ntensors; k++)
        if (!cur->tensor[k].deferred) owner[n] = cur, list[n++] = &cur->tensor[k];
    for (int k = 0; prev && k < prev->ntensors; k++)
        if (prev->tensor[k].deferred && !prev->tensor[k].done) owner[n] = prev, list[n++] = &prev->tensor[k];
    test_rng_t mine = test_rng_seeded((cur ? cur->rank_seed : prev->rank_seed) ^ 0xF1415);
    for (int k = n - 1; k > 0; k--) {
        int j = (int)test_rng_below(&mine, (uint32_t)k + 1);
        struct soak_tensor *t = list[k];
        struct soak_plan *o = owner[k];
        list[k] = list[j], owner[k] = owner[j];
        list[j] = t, owner[j] = o;
    }
    for (int k = 0; k < n; k++) soak_tensor_finish(owner[k], list[k]);
    if (prev) soak_plan_retire(prev);
}

void soak_plan_drain(struct soak_plan *p) { soak_plan_retire(p); }
