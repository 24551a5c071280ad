/*
 * test_async.c - the negotiated asynchronous API (hora_*_async, hora_join,
 * hora_wait / hora_test) on N ranks, one mode per meson test:
 *
 *   basic          allreduce of every dtype x op, in place and out of place,
 *                  shared and malloc'd, with pre/postscale and fp16/bf16
 *                  compression; broadcast from every root; allgather with a
 *                  first dimension that differs per rank; a grouped allreduce;
 *                  hora_test polling. All enqueued at once, in a different
 *                  order on every rank.
 *   errors         cross-rank mismatches fail on every rank with a message
 *                  naming both values, and the next request works; local
 *                  argument errors; duplicate names; calls outside
 *                  init/shutdown; init -> shutdown -> init.
 *   join           ranks run different numbers of steps, then hora_join.
 *   stress         2 threads per rank, thousands of random subsets of 32
 *                  tensors submitted in a different order on every rank.
 *   stall          the stall inspector names the tensor and the missing rank.
 *   stall_shutdown HORA_STALL_SHUTDOWN_S ends stalled requests with
 *                  HORA_ERR_SHUTDOWN and hora_shutdown still returns.
 *   stall_busy     the same while every rank keeps other requests going.
 *   idle           with nothing in flight the coordinator sleeps instead of
 *                  cycling: the whole process uses under 2% of a core while
 *                  idle; then ranks submit seconds apart and the result is
 *                  exact.
 *   timeline       HORA_TIMELINE is valid JSON mid-run and after shutdown.
 *   badenv         a bad HORA_* value fails hora_init with HORA_ERR_CONFIG.
 *
 * Inputs are small integers derived from (rank, tensor, element, iteration),
 * so every rank computes the exact expected result in every dtype.
 * The test's own bookkeeping (barriers, the final failure count) uses MPI on
 * a private communicator: it must work whatever state the runtime under test
 * is in (shut down by the stall inspector, never initialised, ...), and it
 * never shares a communicator with the coordinator thread.
 * A watchdog (alarm) turns a hang into a failure with the mode's name.
 *
 * Run: mpirun -np N test_async MODE   (N = 2..4; exit 0 = all passed)
 *      TEST_ASYNC_QUICK=1 shortens stress and timeline.
 */
#define _GNU_SOURCE
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hora.h"
#include "buf.h"
#include "exact.h"
#include "file.h"
#include "k_cpu.h"

#ifndef HORA_SOURCE_DIR
#define HORA_SOURCE_DIR "."
#endif

static int rank, size, quick;
static atomic_int failures, checks;
static MPI_Comm test_comm;

#define TEST_MAX_REPORTS 40

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    if (atomic_fetch_add(&failures, 1) >= TEST_MAX_REPORTS) return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "rank %d FAIL: %s\n", rank, line);
}

/* Count a check; report when cond is false. */
#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        atomic_fetch_add(&checks, 1);                                                                                  \
        if (!(cond)) fail(__VA_ARGS__);                                                                                \
    } while (0)

/* A value no request handle has: outputs must stay untouched on failure. */
#define REQ_SENTINEL ((hora_request_t)(uintptr_t)0x5e471)

/* ---------------------------------------------------------------- helpers */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) continue; /* EINTR: sleep the rest */
}

static void barrier(void)
{
    MPI_Barrier(test_comm);
}

static char watchdog_msg[160];
static size_t watchdog_len;

static void watchdog_fire(int sig)
{
    (void)sig;
    ssize_t ignored = write(2, watchdog_msg, watchdog_len);
    (void)ignored;
    _exit(3);
}

/* A hang becomes a failure that names the mode. */
static void watchdog_arm(const char *mode, unsigned seconds)
{
    int n = snprintf(watchdog_msg, sizeof(watchdog_msg), "rank %d FAIL: mode %s still running after %u s (hang)\n",
                     rank, mode, seconds);
    watchdog_len = n > 0 ? (size_t)n : 0;
    signal(SIGALRM, watchdog_fire);
    alarm(seconds);
}

static uint32_t mix3(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t h = a * 0x9E3779B1u ^ (b * 0x85EBCA77u + c * 0xC2B2AE3Du + 0x27D4EB2Fu);
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    h *= 0x297A2D39u;
    h ^= h >> 15;
    return h;
}

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void shuffle(int *a, int n, uint64_t seed)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rng_next(&seed) % (uint64_t)(i + 1)), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* hora_request_error, which must never be NULL. */
static const char *request_message(hora_request_t req)
{
    const char *e = hora_request_error(req);
    if (!e) {
        fail("hora_request_error returned NULL");
        return "(null)";
    }
    return e;
}

/* Wait for req, which must succeed with an empty message. */
static int wait_ok(hora_request_t req, const char *what)
{
    hora_status_t st = hora_wait(req);
    CHECK(st == HORA_OK, "%s: hora_wait returned %s: %s", what, hora_status_string(st), request_message(req));
    if (st != HORA_OK) return 0;
    const char *e = request_message(req);
    CHECK(e[0] == '\0', "%s: succeeded, but hora_request_error says '%s'", what, e);
    return 1;
}

/* Poll hora_test until req completes (*done = 1, its status returned) or
 * limit_s passes (*done = 0). Checks the contract of an unfinished request:
 * HORA_IN_PROGRESS with *done = 0. */
static hora_status_t poll_until(hora_request_t req, double limit_s, int *done, const char *what)
{
    double t0 = now_s();
    for (;;) {
        int d = -1;
        hora_status_t st = hora_test(req, &d);
        if (d == 1) {
            *done = 1;
            return st;
        }
        if (d != 0 || st != HORA_IN_PROGRESS) {
            fail("%s: hora_test on an unfinished request returned %s with done=%d", what, hora_status_string(st), d);
            *done = 1;
            return hora_wait(req);
        }
        if (now_s() - t0 > limit_s) {
            *done = 0;
            return HORA_IN_PROGRESS;
        }
        sleep_s(0.0002);
    }
}

static int runtime_start(const char *what)
{
    hora_status_t st = hora_init();
    CHECK(st == HORA_OK, "%s: hora_init: %s: %s", what, hora_status_string(st), hora_last_error());
    return st == HORA_OK;
}

static void runtime_stop(const char *what)
{
    hora_status_t st = hora_shutdown();
    CHECK(st == HORA_OK, "%s: hora_shutdown: %s: %s", what, hora_status_string(st), hora_last_error());
}

/* ------------------------------------------------- values and comparisons */

/* Input of rank r, element i of the tensor `salt`, a small integer exact in
 * every dtype for op: PROD -1, 1, 2 (u8 1, 2); MIN/MAX -50..50 (u8 0..199);
 * SUM/AVG -5..5 (u8 0..10) plus high bits that catch truncated wide ints. */
static int64_t input_value(hora_dtype_t dtype, hora_op_t op, int r, size_t i, unsigned salt)
{
    uint64_t h = (uint64_t)i * 2654435761u + (uint64_t)r * 40503u + (uint64_t)salt * 0x9E3779B9u;
    h ^= h >> 13;
    h *= 0x85EBCA6Bu;
    h ^= h >> 16;
    return exact_value(dtype, op, r, h);
}

static int is_float(hora_dtype_t dtype)
{
    return dtype == HORA_DTYPE_F32 || dtype == HORA_DTYPE_F16 || dtype == HORA_DTYPE_BF16 || dtype == HORA_DTYPE_F64;
}

/* Element-wise compare; reports the first wrong element. Returns #wrong. */
static size_t compare(const char *what, const void *got, const void *want, size_t count, hora_dtype_t dtype)
{
    size_t es = hora_dtype_size(dtype), wrong = 0, first = 0;
    atomic_fetch_add(&checks, 1);
    if (!memcmp(got, want, count * es)) return 0;
    for (size_t i = 0; i < count; i++)
        if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) && wrong++ == 0) first = i;
    uint64_t g = 0, w = 0;
    memcpy(&g, (const char *)got + first * es, es);
    memcpy(&w, (const char *)want + first * es, es);
    fail("%s: %zu of %zu elements wrong; first is element %zu: 0x%llx, expected 0x%llx", what, wrong, count, first,
         (unsigned long long)g, (unsigned long long)w);
    return wrong;
}

/* ------------------------------------------------------------ basic mode */

/* One allreduce: its inputs, options and expected result. */
struct ar_case {
    char name[96];
    hora_dtype_t dtype;
    hora_op_t op;
    size_t count;
    int inplace, shared;
    int by_size; /* inputs multiplied by the number of ranks: AVG divides exactly */
    unsigned salt;
    hora_opts_t opts;
    void *send, *recv;
    hora_request_t req;
    int enqueued;
};

/* A value not exactly representable on the fp16 / bf16 wire (a quarter ulp
 * above 1): compressed it travels as 1.0, uncompressed it does not. */
static double compression_probe(hora_compression_t c)
{
    return c == HORA_COMPRESSION_FP16 ? 1.0 + 0x1p-12 : 1.0 + 0x1p-9;
}

/* What the wire keeps of an f32 value. */
static double wire(hora_compression_t c, double v)
{
    if (c == HORA_COMPRESSION_FP16) return k_f16_to_f32(k_f32_to_f16((float)v));
    if (c == HORA_COMPRESSION_BF16) return k_bf16_to_f32(k_f32_to_bf16((float)v));
    return v;
}

static double ar_input(const struct ar_case *c, int r, size_t i)
{
    if (c->opts.compression != HORA_COMPRESSION_NONE && i % 7 == 3) return compression_probe(c->opts.compression);
    return (double)input_value(c->dtype, c->op, r, i, c->salt) * (c->by_size ? size : 1);
}

/* postscale * reduce(prescale * x) with the header's rounding: AVG divides
 * in fp32 for f32/f16/bf16, fp64 for f64, truncating for integers. The inputs
 * keep every intermediate exact, so the order of operations cannot matter. */
static double ar_expected(const struct ar_case *c, size_t i)
{
    hora_compression_t comp = c->opts.compression;
    double acc = 0;
    for (int r = 0; r < size; r++) {
        double v = wire(comp, ar_input(c, r, i)) * c->opts.prescale;
        if (r == 0) {
            acc = v;
            continue;
        }
        switch (c->op) {
        case HORA_OP_SUM:
        case HORA_OP_AVG: acc += v; break;
        case HORA_OP_PROD: acc *= v; break;
        case HORA_OP_MIN: acc = v < acc ? v : acc; break;
        case HORA_OP_MAX: acc = v > acc ? v : acc; break;
        default: break;
        }
    }
    if (c->op == HORA_OP_AVG) {
        if (c->dtype == HORA_DTYPE_F64)
            acc = acc / size;
        else if (is_float(c->dtype))
            acc = (double)((float)acc / (float)size);
        else
            acc = (double)((int64_t)acc / size);
    }
    return wire(comp, acc * c->opts.postscale);
}

static void ar_case_init(struct ar_case *c, const char *tag, hora_dtype_t dtype, hora_op_t op, size_t count,
                         int inplace, int shared, unsigned salt)
{
    hora_opts_t init = HORA_OPTS_INIT;
    memset(c, 0, sizeof(*c));
    c->dtype = dtype;
    c->op = op;
    c->count = count;
    c->inplace = inplace;
    c->shared = shared;
    c->salt = salt;
    c->opts = init;
    snprintf(c->name, sizeof(c->name), "%s.%u.%s.%s.%zu.%s.%s", tag, salt, hora_dtype_name(dtype), hora_op_name(op),
             count, inplace ? "in" : "out", shared ? "shm" : "malloc");
}

static void ar_case_describe(const struct ar_case *c, char *what, size_t len)
{
    static const char *const comp[] = {"none", "fp16", "bf16"};
    snprintf(what, len, "allreduce_async %s (pre %g post %g compression %s)", c->name, c->opts.prescale,
             c->opts.postscale, comp[c->opts.compression]);
}

static void ar_case_start(struct ar_case *c)
{
    size_t es = hora_dtype_size(c->dtype), bytes = c->count * es;
    char what[200];
    c->send = test_buf_alloc(c->shared, bytes);
    c->recv = c->inplace ? c->send : test_buf_alloc(c->shared, bytes);
    for (size_t i = 0; i < c->count; i++) exact_store(c->send, i, c->dtype, ar_input(c, rank, i));
    if (!c->inplace) memset(c->recv, 0xA5, bytes);
    c->req = REQ_SENTINEL;
    hora_status_t st = hora_allreduce_async(c->name, c->send, c->recv, c->count, c->dtype, c->op, &c->opts, &c->req);
    ar_case_describe(c, what, sizeof(what));
    CHECK(st == HORA_OK, "%s: enqueue returned %s: %s", what, hora_status_string(st), hora_last_error());
    c->enqueued = st == HORA_OK;
}

static void ar_case_finish(struct ar_case *c, int poll)
{
    size_t es = hora_dtype_size(c->dtype), bytes = c->count * es;
    char what[200];
    ar_case_describe(c, what, sizeof(what));
    if (c->enqueued) {
        int ok;
        if (poll) {
            int done = 0;
            hora_status_t st = poll_until(c->req, 300, &done, what);
            CHECK(done && st == HORA_OK, "%s: hora_test polling ended with %s (done=%d): %s", what,
                  hora_status_string(st), done, request_message(c->req));
            ok = done && st == HORA_OK;
        } else {
            ok = wait_ok(c->req, what);
        }
        if (ok) {
            void *want = malloc(bytes ? bytes : 1);
            for (size_t i = 0; i < c->count; i++) exact_store(want, i, c->dtype, ar_expected(c, i));
            compare(what, c->recv, want, c->count, c->dtype);
            if (!c->inplace) {
                char w2[240];
                for (size_t i = 0; i < c->count; i++) exact_store(want, i, c->dtype, ar_input(c, rank, i));
                snprintf(w2, sizeof(w2), "%s: send buffer unchanged", what);
                compare(w2, c->send, want, c->count, c->dtype);
            }
            free(want);
        }
        hora_request_free(c->req);
    }
    if (!c->inplace) test_buf_free(c->shared, c->recv);
    test_buf_free(c->shared, c->send);
}

struct bc_case {
    char name[64];
    hora_dtype_t dtype;
    size_t count;
    int root, shared;
    unsigned salt;
    void *buf;
    hora_request_t req;
    int enqueued;
};

struct ag_case {
    char name[64];
    hora_dtype_t dtype;
    int ndim; /* 2: dims {rank + 1, 3}; 0: 1-D, 2 * rank elements (rank 0 none) */
    unsigned salt;
    void *send;
    hora_request_t req;
    int enqueued;
};

static size_t ag_rank_count(const struct ag_case *c, int r)
{
    return c->ndim == 2 ? (size_t)(r + 1) * 3 : (size_t)(2 * r);
}

static void ag_case_start(struct ag_case *c)
{
    hora_opts_t opts = HORA_OPTS_INIT;
    size_t n = ag_rank_count(c, rank);
    c->send = test_buf_alloc(0, n * hora_dtype_size(c->dtype));
    for (size_t i = 0; i < n; i++)
        exact_store(c->send, i, c->dtype, (double)input_value(c->dtype, HORA_OP_MIN, rank, i, c->salt));
    if (c->ndim == 2) {
        opts.ndim = 2;
        opts.dims[0] = rank + 1;
        opts.dims[1] = 3;
    }
    c->req = REQ_SENTINEL;
    hora_status_t st = hora_allgather_async(c->name, c->send, n, c->dtype, c->ndim == 2 ? &opts : NULL, &c->req);
    CHECK(st == HORA_OK, "allgather_async %s: enqueue returned %s: %s", c->name, hora_status_string(st),
          hora_last_error());
    c->enqueued = st == HORA_OK;
}

static void ag_case_finish(struct ag_case *c)
{
    char what[96];
    snprintf(what, sizeof(what), "allgather_async %s", c->name);
    if (c->enqueued && wait_ok(c->req, what)) {
        void *data = NULL;
        size_t total = 0, expect_total = 0;
        const size_t *counts = NULL;
        hora_status_t st = hora_request_result(c->req, &data, &total, &counts);
        CHECK(st == HORA_OK, "%s: hora_request_result returned %s: %s", what, hora_status_string(st),
              hora_last_error());
        for (int r = 0; r < size; r++) expect_total += ag_rank_count(c, r);
        if (st == HORA_OK) {
            CHECK(total == expect_total, "%s: total_count %zu, expected %zu", what, total, expect_total);
            CHECK(counts != NULL, "%s: rank_counts is NULL", what);
            CHECK(data != NULL || expect_total == 0, "%s: data is NULL", what);
            int counts_ok = counts != NULL;
            for (int r = 0; counts && r < size; r++) {
                CHECK(counts[r] == ag_rank_count(c, r), "%s: rank_counts[%d] = %zu, expected %zu", what, r, counts[r],
                      ag_rank_count(c, r));
                counts_ok &= counts[r] == ag_rank_count(c, r);
            }
            if (counts_ok && total == expect_total && data) {
                size_t es = hora_dtype_size(c->dtype), at = 0;
                void *want = malloc(expect_total * es + 1);
                for (int r = 0; r < size; r++)
                    for (size_t i = 0; i < ag_rank_count(c, r); i++)
                        exact_store(want, at++, c->dtype, (double)input_value(c->dtype, HORA_OP_MIN, r, i, c->salt));
                compare(what, data, want, expect_total, c->dtype);
                free(want);
            }
        }
    }
    if (c->enqueued) hora_request_free(c->req);
    free(c->send);
}

static void bc_fill(struct bc_case *c, void *buf)
{
    for (size_t i = 0; i < c->count; i++)
        exact_store(buf, i, c->dtype, (double)input_value(c->dtype, HORA_OP_MAX, c->root, i, c->salt));
}

static void bc_case_start(struct bc_case *c)
{
    size_t bytes = c->count * hora_dtype_size(c->dtype);
    c->buf = test_buf_alloc(c->shared, bytes);
    if (rank == c->root)
        bc_fill(c, c->buf);
    else
        memset(c->buf, 0xA5, bytes);
    c->req = REQ_SENTINEL;
    hora_status_t st = hora_broadcast_async(c->name, c->buf, c->count, c->dtype, c->root, NULL, &c->req);
    CHECK(st == HORA_OK, "broadcast_async %s: enqueue returned %s: %s", c->name, hora_status_string(st),
          hora_last_error());
    c->enqueued = st == HORA_OK;
}

static void bc_case_finish(struct bc_case *c)
{
    char what[96];
    snprintf(what, sizeof(what), "broadcast_async %s", c->name);
    if (c->enqueued && wait_ok(c->req, what)) {
        void *want = malloc(c->count * hora_dtype_size(c->dtype) + 1);
        bc_fill(c, want);
        compare(what, c->buf, want, c->count, c->dtype);
        free(want);
    }
    if (c->enqueued) hora_request_free(c->req);
    test_buf_free(c->shared, c->buf);
}

/* Five allreduces in one group, some out of place, finished by polling. */
static void basic_grouped(void)
{
    enum { N = 5 };
    static const size_t counts[N] = {1, 17, 1000, 3, 40000};
    struct ar_case cs[N];
    char names[N][32];
    const char *name_ptrs[N];
    const void *send[N];
    void *recv[N];
    hora_request_t reqs[N];
    hora_opts_t opts = HORA_OPTS_INIT;
    opts.postscale = 0.5;
    for (int k = 0; k < N; k++) {
        ar_case_init(&cs[k], "grp", HORA_DTYPE_F32, HORA_OP_SUM, counts[k], k % 2 == 0, k < 2, 900u + (unsigned)k);
        cs[k].opts = opts;
        snprintf(names[k], sizeof(names[k]), "grp.%d", k);
        snprintf(cs[k].name, sizeof(cs[k].name), "grp.%d", k);
        size_t bytes = counts[k] * sizeof(float);
        cs[k].send = test_buf_alloc(cs[k].shared, bytes);
        cs[k].recv = cs[k].inplace ? cs[k].send : test_buf_alloc(cs[k].shared, bytes);
        for (size_t i = 0; i < counts[k]; i++) exact_store(cs[k].send, i, HORA_DTYPE_F32, ar_input(&cs[k], rank, i));
        if (!cs[k].inplace) memset(cs[k].recv, 0xA5, bytes);
        name_ptrs[k] = names[k];
        send[k] = cs[k].send;
        recv[k] = cs[k].recv;
        reqs[k] = REQ_SENTINEL;
    }
    hora_status_t st =
        hora_grouped_allreduce_async(N, name_ptrs, send, recv, counts, HORA_DTYPE_F32, HORA_OP_SUM, &opts, reqs);
    CHECK(st == HORA_OK, "grouped_allreduce_async of %d: %s: %s", N, hora_status_string(st), hora_last_error());
    for (int k = 0; k < N; k++) {
        cs[k].req = reqs[k];
        cs[k].enqueued = st == HORA_OK;
        if (st == HORA_OK) CHECK(reqs[k] != REQ_SENTINEL && reqs[k] != NULL, "grouped: reqs[%d] not set", k);
    }
    /* Finish in reverse order, by polling. */
    for (int k = N - 1; k >= 0; k--) ar_case_finish(&cs[k], 1);
}

/* hora_test must say "in progress" while another rank has not submitted. */
static void basic_pending(void)
{
    struct ar_case c;
    ar_case_init(&c, "pending", HORA_DTYPE_F32, HORA_OP_SUM, 10, 0, 0, 950);
    if (rank == 0) {
        ar_case_start(&c);
        if (c.enqueued) {
            int done = -1;
            hora_status_t st = hora_test(c.req, &done);
            CHECK(st == HORA_IN_PROGRESS && done == 0,
                  "hora_test on a request other ranks have not submitted: %s, done=%d (expected HORA_IN_PROGRESS, 0)",
                  hora_status_string(st), done);
        }
    }
    barrier();
    if (rank != 0) ar_case_start(&c);
    ar_case_finish(&c, 0);
}

static void mode_basic(void)
{
    static const size_t counts[] = {1, 33, 5003, 70001};
    enum { MAX_CASES = 1024 };
    struct ar_case *ar = calloc(MAX_CASES, sizeof(*ar));
    int nar = 0;
    unsigned salt = 1;

    if (!runtime_start("basic")) return;
    if (rank == 0) printf("test_async basic: %d ranks, transport %s\n", size, hora_transport_name());

    /* Every dtype x op x in/out of place x shared/malloc'd. */
    for (int dtype = 0; dtype < HORA_DTYPE_COUNT; dtype++)
        for (int op = 0; op < HORA_OP_COUNT; op++)
            for (int v = 0; v < 4; v++) {
                size_t count = counts[(size_t)(dtype * 5 + op + v) % 3];
                ar_case_init(&ar[nar++], "ar", (hora_dtype_t)dtype, (hora_op_t)op, count, v & 1, v >> 1, salt++);
            }
    ar_case_init(&ar[nar++], "ar", HORA_DTYPE_F32, HORA_OP_SUM, counts[3], 1, 1, salt++);
    ar_case_init(&ar[nar++], "ar", HORA_DTYPE_F16, HORA_OP_SUM, counts[3], 0, 0, salt++);

    /* Scales. PROD tells prescale from postscale: post * pre^n * prod(x). */
    static const double float_scales[][2] = {{3, 0.5}, {2, 1}, {1, 0.25}};
    static const hora_op_t scaled_ops[] = {HORA_OP_SUM, HORA_OP_PROD, HORA_OP_MAX, HORA_OP_AVG};
    static const hora_dtype_t scaled_floats[] = {HORA_DTYPE_F32, HORA_DTYPE_F16, HORA_DTYPE_BF16, HORA_DTYPE_F64};
    for (int d = 0; d < 4; d++)
        for (int o = 0; o < 4; o++)
            for (int s = 0; s < 3; s++) {
                struct ar_case *c = &ar[nar++];
                ar_case_init(c, "scaled", scaled_floats[d], scaled_ops[o], counts[(d + o + s) % 3], s != 1, s == 2,
                             salt++);
                c->opts.prescale = float_scales[s][0];
                c->opts.postscale = float_scales[s][1];
                c->by_size = scaled_ops[o] == HORA_OP_AVG;
            }
    static const hora_dtype_t scaled_ints[] = {HORA_DTYPE_I32, HORA_DTYPE_I64};
    for (int d = 0; d < 2; d++)
        for (int o = 0; o < 4; o++) {
            struct ar_case *c = &ar[nar++];
            ar_case_init(c, "scaled", scaled_ints[d], scaled_ops[o], counts[(d + o) % 3], o % 2, 0, salt++);
            c->opts.prescale = 3;
            c->opts.postscale = 2;
            c->by_size = scaled_ops[o] == HORA_OP_AVG;
        }

    /* fp16 / bf16 wire compression of f32 data. */
    for (int comp = HORA_COMPRESSION_FP16; comp <= HORA_COMPRESSION_BF16; comp++)
        for (int o = 0; o < 2; o++)
            for (int v = 0; v < 2; v++) {
                size_t count = (size_t[]){1, 1001, 65537}[(comp + o + v) % 3];
                struct ar_case *c = &ar[nar++];
                ar_case_init(c, comp == HORA_COMPRESSION_FP16 ? "fp16wire" : "bf16wire", HORA_DTYPE_F32,
                             o ? HORA_OP_MAX : HORA_OP_SUM, count < 4 ? 4 : count, v, v, salt++);
                c->opts.compression = (hora_compression_t)comp;
            }

    /* Broadcast from every root, several dtypes, all in flight together. */
    static const hora_dtype_t bc_dtypes[] = {HORA_DTYPE_F32, HORA_DTYPE_F16, HORA_DTYPE_I64, HORA_DTYPE_U8};
    int nbc = size * 4;
    struct bc_case *bc = calloc((size_t)nbc, sizeof(*bc));
    for (int root = 0, k = 0; root < size; root++)
        for (int d = 0; d < 4; d++, k++) {
            bc[k].dtype = bc_dtypes[d];
            bc[k].root = root;
            bc[k].count = (size_t)(1000 + 7 * root + d);
            bc[k].shared = (root + d) % 2;
            bc[k].salt = salt++;
            snprintf(bc[k].name, sizeof(bc[k].name), "bc.root%d.%s", root, hora_dtype_name(bc_dtypes[d]));
        }

    /* Allgather with a per-rank first dimension. */
    struct ag_case ag[4] = {{.dtype = HORA_DTYPE_F32, .ndim = 2},
                            {.dtype = HORA_DTYPE_I32, .ndim = 2},
                            {.dtype = HORA_DTYPE_BF16, .ndim = 2},
                            {.dtype = HORA_DTYPE_I64, .ndim = 0}};
    for (int k = 0; k < 4; k++) {
        ag[k].salt = salt++;
        snprintf(ag[k].name, sizeof(ag[k].name), "ag.%d.%s.%dd", k, hora_dtype_name(ag[k].dtype), ag[k].ndim ? 2 : 1);
    }

    /* Enqueue everything in a rank-dependent order: the coordinator must
     * still run them in one order everywhere. */
    int total = nar + nbc + 4;
    int *order = malloc(sizeof(int) * (size_t)total);
    for (int k = 0; k < total; k++) order[k] = k;
    shuffle(order, total, 0xB0A5ull + (uint64_t)rank);
    for (int k = 0; k < total; k++) {
        int id = order[k];
        if (id < nar)
            ar_case_start(&ar[id]);
        else if (id < nar + nbc)
            bc_case_start(&bc[id - nar]);
        else
            ag_case_start(&ag[id - nar - nbc]);
    }
    for (int k = 0; k < total; k++) {
        int id = order[total - 1 - k];
        if (id < nar)
            ar_case_finish(&ar[id], id % 3 == 0);
        else if (id < nar + nbc)
            bc_case_finish(&bc[id - nar]);
        else
            ag_case_finish(&ag[id - nar - nbc]);
    }
    free(order);
    free(bc);
    free(ar);

    basic_grouped();
    basic_pending();
    runtime_stop("basic");
}

/* ----------------------------------------------------------- errors mode */

/* A correct allreduce after an error: the runtime must keep serving. */
static void errors_next_ok(const char *after)
{
    struct ar_case c;
    char tag[48];
    snprintf(tag, sizeof(tag), "after.%s", after);
    ar_case_init(&c, tag, HORA_DTYPE_F32, HORA_OP_SUM, 100, 0, 0, 7);
    ar_case_start(&c);
    ar_case_finish(&c, 0);
}

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
    errors_next_ok(what);
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

    /* Memory kind: nothing touches the (host) buffer before negotiation
     * finds the mismatch. If rank 0 cannot even enqueue a CUDA request, it
     * submits a host one so the other ranks are not left waiting. */
    opts = (hora_opts_t)HORA_OPTS_INIT;
    opts.memory = rank == 0 ? HORA_MEMORY_CUDA : HORA_MEMORY_HOST;
    st = hora_allreduce_async("mm.memory", buf, out, 6, HORA_DTYPE_F32, HORA_OP_SUM, &opts, &req);
    if (st != HORA_OK && rank == 0) {
        fail("mismatch memory: rank 0 could not enqueue a HORA_MEMORY_CUDA request: %s: %s", hora_status_string(st),
             hora_last_error());
        opts.memory = HORA_MEMORY_HOST;
        if (hora_allreduce_async("mm.memory", buf, out, 6, HORA_DTYPE_F32, HORA_OP_SUM, &opts, &req) == HORA_OK) {
            hora_wait(req);
            hora_request_free(req);
        }
        errors_next_ok("memory");
    } else {
        errors_expect_mismatch("memory", st, req, "host", "cuda");
    }

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

#define EXPECT_INVALID(what, call)                                                                                     \
    do {                                                                                                               \
        req = REQ_SENTINEL;                                                                                            \
        st = (call);                                                                                                   \
        CHECK(st == HORA_ERR_INVALID_ARG, "%s: returned %s, expected HORA_ERR_INVALID_ARG", what,                      \
              hora_status_string(st));                                                                                 \
        CHECK(req == REQ_SENTINEL, "%s: *req was written although the call failed", what);                             \
        if (st == HORA_ERR_INVALID_ARG) CHECK(hora_last_error()[0] != '\0', "%s: hora_last_error is empty", what);     \
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
    errors_next_ok("local");
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

#define EXPECT_NOT_INIT(what, call)                                                                                    \
    do {                                                                                                               \
        st = (call);                                                                                                   \
        CHECK(st == HORA_ERR_NOT_INITIALIZED, "%s %s: returned %s, expected HORA_ERR_NOT_INITIALIZED", what, when,     \
              hora_status_string(st));                                                                                 \
        CHECK(req == REQ_SENTINEL, "%s %s: *req was written", what, when);                                             \
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

static void mode_errors(void)
{
    errors_outside_runtime("before hora_init");
    if (!runtime_start("errors")) return;
    if (rank == 0) printf("test_async errors: %d ranks, transport %s\n", size, hora_transport_name());
    hora_status_t st = hora_init();
    CHECK(st == HORA_ERR_ALREADY_INITIALIZED, "a second hora_init returned %s", hora_status_string(st));

    errors_local();
    errors_mismatches();
    errors_duplicate();
    runtime_stop("errors");

    /* init -> shutdown -> init works. */
    errors_outside_runtime("after hora_shutdown");
    if (!runtime_start("errors, second init")) return;
    errors_next_ok("reinit");
    runtime_stop("errors, second init");
}

/* ------------------------------------------------------------- join mode */

#define JOIN_TENSORS 4

static int join_steps(int r)
{
    return 5 + 3 * r;
}

static int join_value(int r, int t, size_t i, int s)
{
    return (int)(mix3((uint32_t)i, (uint32_t)t, (uint32_t)s) % 11) - 5 + r;
}

static void mode_join(void)
{
    static const size_t counts[JOIN_TENSORS] = {1, 100, 1000, 33333};
    void *send[JOIN_TENSORS], *recv[JOIN_TENSORS];
    float *want = malloc(sizeof(float) * counts[JOIN_TENSORS - 1]);

    if (!runtime_start("join")) return;
    if (rank == 0) printf("test_async join: %d ranks, steps 5 + 3 * rank\n", size);
    for (int t = 0; t < JOIN_TENSORS; t++) {
        send[t] = test_buf_alloc(t % 2, counts[t] * sizeof(float));
        recv[t] = t < 2 ? send[t] : test_buf_alloc(t % 2, counts[t] * sizeof(float));
    }

    for (int s = 0; s < join_steps(rank); s++) {
        hora_request_t req[JOIN_TENSORS], ag_req = REQ_SENTINEL;
        int ok[JOIN_TENSORS] = {0}, ag_ok;
        char what[80];
        int32_t ag_send[8];
        for (int k = 0; k < JOIN_TENSORS; k++) {
            int t = rank % 2 ? JOIN_TENSORS - 1 - k : k; /* odd ranks submit in reverse */
            char name[16];
            snprintf(name, sizeof(name), "g%d", t);
            for (size_t i = 0; i < counts[t]; i++) ((float *)send[t])[i] = (float)join_value(rank, t, i, s);
            hora_status_t st =
                hora_allreduce_async(name, send[t], recv[t], counts[t], HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req[t]);
            CHECK(st == HORA_OK, "join step %d %s: enqueue returned %s: %s", s, name, hora_status_string(st),
                  hora_last_error());
            ok[t] = st == HORA_OK;
        }
        /* Joined ranks contribute nothing to allgathers. */
        for (int i = 0; i <= rank; i++) ag_send[i] = rank * 1000 + s * 10 + i;
        hora_status_t st = hora_allgather_async("gag", ag_send, (size_t)rank + 1, HORA_DTYPE_I32, NULL, &ag_req);
        CHECK(st == HORA_OK, "join step %d gag: enqueue returned %s: %s", s, hora_status_string(st), hora_last_error());
        ag_ok = st == HORA_OK;

        for (int t = 0; t < JOIN_TENSORS; t++) {
            snprintf(what, sizeof(what), "join step %d of %d, g%d", s, join_steps(rank), t);
            if (!ok[t]) continue;
            if (wait_ok(req[t], what)) {
                for (size_t i = 0; i < counts[t]; i++) {
                    int sum = 0;
                    for (int r = 0; r < size; r++)
                        if (join_steps(r) > s) sum += join_value(r, t, i, s);
                    want[i] = (float)sum;
                }
                compare(what, recv[t], want, counts[t], HORA_DTYPE_F32);
            }
            hora_request_free(req[t]);
        }
        snprintf(what, sizeof(what), "join step %d allgather gag", s);
        if (ag_ok && wait_ok(ag_req, what)) {
            void *data = NULL;
            size_t total = 0, expect_total = 0, at = 0;
            const size_t *rc = NULL;
            int32_t expect[64];
            for (int r = 0; r < size; r++)
                if (join_steps(r) > s)
                    for (int i = 0; i <= r; i++) expect[expect_total++] = r * 1000 + s * 10 + i;
            st = hora_request_result(ag_req, &data, &total, &rc);
            CHECK(st == HORA_OK, "%s: hora_request_result returned %s", what, hora_status_string(st));
            if (st == HORA_OK) {
                int shape_ok = total == expect_total && rc;
                CHECK(total == expect_total, "%s: total %zu, expected %zu", what, total, expect_total);
                for (int r = 0; rc && r < size; r++) {
                    size_t e = join_steps(r) > s ? (size_t)r + 1 : 0;
                    CHECK(rc[r] == e, "%s: rank_counts[%d] = %zu, expected %zu (joined ranks contribute nothing)", what,
                          r, rc[r], e);
                    shape_ok &= rc[r] == e;
                    at += rc[r];
                }
                if (shape_ok && data) compare(what, data, expect, expect_total, HORA_DTYPE_I32);
            }
        }
        if (ag_ok) hora_request_free(ag_req);
    }

    int last = -1;
    hora_status_t st = hora_join(&last);
    CHECK(st == HORA_OK, "hora_join returned %s: %s", hora_status_string(st), hora_last_error());
    CHECK(last == size - 1, "hora_join: last rank %d, expected %d (the rank with the most steps)", last, size - 1);

    /* The runtime continues after a join. */
    errors_next_ok("join");

    for (int t = 0; t < JOIN_TENSORS; t++) {
        if (t >= 2) test_buf_free(t % 2, recv[t]);
        test_buf_free(t % 2, send[t]);
    }
    free(want);
    runtime_stop("join");
}

/* ----------------------------------------------------------- stress mode */

#define STRESS_TENSORS 32
#define STRESS_MAX_SUBSET 16
#define STRESS_THREADS 2

struct stress_tensor {
    char name[16];
    hora_dtype_t dtype; /* f32 or i32 */
    size_t base_count;
    int shared, inplace;
    void *send, *recv;
};

static struct stress_tensor stress_t[STRESS_TENSORS];
static int stress_iterations;
static pthread_barrier_t stress_barrier;

/* One iteration: which tensors (the same on every rank), each one's op and
 * count (varied now and then so cached responses go stale), and this rank's
 * submission order. */
struct stress_plan {
    int n;
    int ids[STRESS_MAX_SUBSET];
    hora_op_t op[STRESS_TENSORS];
    size_t count[STRESS_TENSORS];
};

static void stress_plan_make(int it, struct stress_plan *p)
{
    uint64_t seed = 0x5EED0000ull + (uint64_t)it;
    int all[STRESS_TENSORS];
    for (int j = 0; j < STRESS_TENSORS; j++) {
        all[j] = j;
        uint32_t h = mix3((uint32_t)it, (uint32_t)j, 77);
        p->op[j] = h % 16 == 0 ? HORA_OP_MAX : h % 16 == 1 ? HORA_OP_MIN : h % 16 == 2 ? HORA_OP_AVG : HORA_OP_SUM;
        p->count[j] = stress_t[j].base_count - ((h >> 8) % 32 == 0 ? 1 : 0);
    }
    p->n = 1 + (int)(rng_next(&seed) % STRESS_MAX_SUBSET);
    shuffle(all, STRESS_TENSORS, rng_next(&seed)); /* common seed: same subset everywhere */
    memcpy(p->ids, all, sizeof(int) * (size_t)p->n);
    shuffle(p->ids, p->n, seed * 31 + (uint64_t)rank + 1); /* this rank's order */
}

static void stress_coef(int j, size_t i, int it, int *b, int *d)
{
    uint32_t h = mix3((uint32_t)i, (uint32_t)j, (uint32_t)it);
    *b = (int)(h % 11) - 5;
    *d = (int)((h >> 8) % 3) - 1;
}

static int stress_input(int j, size_t i, int it, int r)
{
    int b, d;
    stress_coef(j, i, it, &b, &d);
    return b + r * d;
}

/* Over ranks r = 0..n-1 of b + r * d, in closed form. */
static double stress_expected(int j, size_t i, int it, hora_op_t op, hora_dtype_t dtype)
{
    int b, d, n = size;
    stress_coef(j, i, it, &b, &d);
    int sum = n * b + d * n * (n - 1) / 2;
    switch (op) {
    case HORA_OP_MAX: return b + (d > 0 ? d * (n - 1) : 0);
    case HORA_OP_MIN: return b + (d < 0 ? d * (n - 1) : 0);
    case HORA_OP_AVG: return dtype == HORA_DTYPE_F32 ? (double)((float)sum / (float)n) : (double)(sum / n);
    default: return sum;
    }
}

static void stress_check(int j, int it, const struct stress_plan *p)
{
    struct stress_tensor *t = &stress_t[j];
    size_t count = p->count[j], wrong = 0, first = 0;
    double got_first = 0, want_first = 0;
    for (size_t i = 0; i < count; i++) {
        double want = stress_expected(j, i, it, p->op[j], t->dtype);
        double got = t->dtype == HORA_DTYPE_F32 ? ((float *)t->recv)[i] : ((int32_t *)t->recv)[i];
        if (got != want && wrong++ == 0) {
            first = i;
            got_first = got;
            want_first = want;
        }
    }
    atomic_fetch_add(&checks, 1);
    if (wrong)
        fail("stress iteration %d %s (%s %s, count %zu, %s%s): %zu wrong, first element %zu = %g, expected %g", it,
             t->name, hora_dtype_name(t->dtype), hora_op_name(p->op[j]), count, t->shared ? "arena" : "malloc",
             t->inplace ? " in place" : "", wrong, first, got_first, want_first);
    if (!t->inplace) {
        size_t changed = 0;
        for (size_t i = 0; i < count; i++) {
            int x = stress_input(j, i, it, rank);
            double got = t->dtype == HORA_DTYPE_F32 ? ((float *)t->send)[i] : ((int32_t *)t->send)[i];
            changed += got != x;
        }
        CHECK(changed == 0, "stress iteration %d %s: %zu send elements changed by an out-of-place allreduce", it,
              t->name, changed);
    }
}

static void *stress_worker(void *arg)
{
    int tid = (int)(intptr_t)arg;
    struct stress_plan p;
    for (int it = 0; it < stress_iterations; it++) {
        hora_request_t req[STRESS_MAX_SUBSET];
        int ok[STRESS_MAX_SUBSET] = {0};
        stress_plan_make(it, &p);
        int half = (p.n + 1) / 2, lo = tid == 0 ? 0 : half, hi = tid == 0 ? half : p.n;
        for (int k = lo; k < hi; k++) {
            int j = p.ids[k];
            struct stress_tensor *t = &stress_t[j];
            for (size_t i = 0; i < p.count[j]; i++) {
                int x = stress_input(j, i, it, rank);
                if (t->dtype == HORA_DTYPE_F32)
                    ((float *)t->send)[i] = (float)x;
                else
                    ((int32_t *)t->send)[i] = x;
            }
            if (!t->inplace) memset(t->recv, 0xA5, p.count[j] * 4);
            hora_status_t st =
                hora_allreduce_async(t->name, t->send, t->recv, p.count[j], t->dtype, p.op[j], NULL, &req[k]);
            CHECK(st == HORA_OK, "stress iteration %d %s: enqueue returned %s: %s", it, t->name, hora_status_string(st),
                  hora_last_error());
            ok[k] = st == HORA_OK;
        }
        for (int k = lo; k < hi; k++) {
            char what[64];
            if (!ok[k]) continue;
            snprintf(what, sizeof(what), "stress iteration %d %s", it, stress_t[p.ids[k]].name);
            if (wait_ok(req[k], what)) stress_check(p.ids[k], it, &p);
            hora_request_free(req[k]);
        }
        pthread_barrier_wait(&stress_barrier); /* names and buffers are reused next iteration */
    }
    return NULL;
}

static void mode_stress(void)
{
    void *arena = NULL;
    size_t arena_bytes = 0;

    if (!runtime_start("stress")) return;
    stress_iterations = quick ? 300 : 2000;
    for (int j = 0; j < STRESS_TENSORS; j++) {
        struct stress_tensor *t = &stress_t[j];
        snprintf(t->name, sizeof(t->name), "t%02d", j);
        t->dtype = j % 3 == 2 ? HORA_DTYPE_I32 : HORA_DTYPE_F32;
        int large = j == 4 || j == 11 || j == 20 || j == 27;
        t->base_count = large ? 300000 + (size_t)j : 2 + mix3((uint32_t)j, 1, 2) % 4999;
        t->shared = j % 2 == 0;
        t->inplace = t->shared || j % 4 == 3;
        if (t->shared) arena_bytes += t->base_count * 4;
    }
    /* One arena, tensors back to back in backprop order (last layer first),
     * as the trainer lays out its gradients, so fusion can work in place. */
    arena = test_buf_alloc(1, arena_bytes);
    size_t at = 0;
    for (int j = STRESS_TENSORS - 1; j >= 0; j--) {
        struct stress_tensor *t = &stress_t[j];
        if (t->shared) {
            t->send = t->recv = (char *)arena + at;
            at += t->base_count * 4;
        } else {
            t->send = test_buf_alloc(0, t->base_count * 4);
            t->recv = t->inplace ? t->send : test_buf_alloc(0, t->base_count * 4);
        }
    }
    if (rank == 0)
        printf("test_async stress: %d ranks x %d threads, %d iterations, arena %zu bytes\n", size, STRESS_THREADS,
               stress_iterations, arena_bytes);

    double t0 = now_s();
    pthread_t thread;
    pthread_barrier_init(&stress_barrier, NULL, STRESS_THREADS);
    pthread_create(&thread, NULL, stress_worker, (void *)(intptr_t)1);
    stress_worker((void *)(intptr_t)0);
    pthread_join(thread, NULL);
    pthread_barrier_destroy(&stress_barrier);
    if (rank == 0) printf("test_async stress: %.1f s\n", now_s() - t0);

    for (int j = 0; j < STRESS_TENSORS; j++) {
        struct stress_tensor *t = &stress_t[j];
        if (t->shared) continue;
        if (!t->inplace) free(t->recv);
        free(t->send);
    }
    hora_mem_free(arena);
    runtime_stop("stress");
}

/* ------------------------------------------------------------ stall modes */

/* Every "missing ranks: " list in text must be exactly {size - 1}; returns
 * how many lists were found. */
static int stall_check_lists(const char *text)
{
    int found = 0;
    for (const char *p = strstr(text, "missing ranks: "); p; p = strstr(p, "missing ranks: ")) {
        p += strlen("missing ranks: ");
        int ranks[64], n = 0;
        const char *q = p;
        while (n < 64) {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q) break;
            ranks[n++] = (int)v;
            q = end;
            if (q[0] == ',')
                q += q[1] == ' ' ? 2 : 1;
            else
                break;
        }
        found++;
        CHECK(n == 1 && ranks[0] == size - 1,
              "stall warning lists %d missing rank(s) starting with %d, expected just %d: 'missing ranks: %.*s'", n,
              n ? ranks[0] : -1, size - 1, (int)strcspn(p, "\n"), p);
    }
    return found;
}

static void mode_stall(void)
{
    char path[] = "/tmp/hora_test_stall_XXXXXX";
    int saved = -1, fd = -1;

    if (rank == 0) {
        fflush(stderr);
        fd = mkstemp(path);
        saved = dup(2);
        if (fd < 0 || saved < 0 || dup2(fd, 2) < 0) {
            fail("stall: cannot redirect stderr to %s", path);
            return;
        }
    }
    if (!runtime_start("stall")) goto out;

    struct ar_case c;
    ar_case_init(&c, "late", HORA_DTYPE_F32, HORA_OP_SUM, 1000, 0, 0, 31);
    snprintf(c.name, sizeof(c.name), "late_tensor");
    if (rank == size - 1) sleep_s(3);
    ar_case_start(&c);
    ar_case_finish(&c, 0);
    runtime_stop("stall");
out:
    if (rank == 0) {
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        close(fd);
        char *text = test_read_file(path, NULL);
        if (!text) {
            fail("stall: cannot read back %s", path);
            return;
        }
        int lists = stall_check_lists(text);
        CHECK(strstr(text, "late_tensor") != NULL, "stall: rank 0's stderr does not name 'late_tensor'");
        CHECK(lists > 0, "stall: rank 0's stderr has no 'missing ranks: ' list");
        if (!strstr(text, "late_tensor") || lists == 0 || atomic_load(&failures))
            fprintf(stderr, "---- rank 0 stderr during the stall test ----\n%s---- end ----\n", text);
        free(text);
        unlink(path);
    }
}

static void mode_stall_shutdown(void)
{
    float x[64] = {0}, y[64];
    hora_request_t req = REQ_SENTINEL;
    hora_status_t st;

    if (!runtime_start("stall_shutdown")) return;
    if (rank != size - 1) {
        st = hora_allreduce_async("never", x, y, 64, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req);
        CHECK(st == HORA_OK, "stall_shutdown: enqueue 'never' returned %s: %s", hora_status_string(st),
              hora_last_error());
        if (st == HORA_OK) {
            int done = 0;
            double t0 = now_s();
            st = poll_until(req, 12, &done, "never");
            CHECK(done, "stall_shutdown: 'never' still pending after %.1f s (HORA_STALL_SHUTDOWN_S=%s)", now_s() - t0,
                  getenv("HORA_STALL_SHUTDOWN_S") ? getenv("HORA_STALL_SHUTDOWN_S") : "unset");
            if (done)
                CHECK(st == HORA_ERR_SHUTDOWN, "stall_shutdown: 'never' ended with %s (%s), expected HORA_ERR_SHUTDOWN",
                      hora_status_string(st), request_message(req));
            if (done) hora_request_free(req);
        }
    }
    barrier();

    /* Later requests fail too, at enqueue or at completion. */
    req = REQ_SENTINEL;
    st = hora_allreduce_async("after", x, y, 64, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req);
    if (st == HORA_OK) {
        int done = 0;
        st = poll_until(req, 10, &done, "after");
        CHECK(done, "stall_shutdown: a request after the stall shutdown still pending after 10 s");
        if (done) hora_request_free(req);
    }
    CHECK(st == HORA_ERR_SHUTDOWN,
          "stall_shutdown: a request after the stall shutdown gave %s, expected HORA_ERR_SHUTDOWN",
          hora_status_string(st));

    double t0 = now_s();
    st = hora_shutdown(); /* the watchdog catches a hang */
    CHECK(st == HORA_OK || st == HORA_ERR_SHUTDOWN, "stall_shutdown: hora_shutdown returned %s after %.1f s: %s",
          hora_status_string(st), now_s() - t0, hora_last_error());
}

/* As stall_shutdown, but every rank keeps a stream of fresh allreduces going,
 * so the cycle that shuts down also has ready requests to run or fail. */
static void mode_stall_busy(void)
{
    float x[64] = {0}, y[64];
    hora_request_t never = REQ_SENTINEL;
    hora_status_t st;
    int never_ok = 0, i, stopped = 0;

    if (!runtime_start("stall_busy")) return;
    if (rank != size - 1) {
        st = hora_allreduce_async("never", x, y, 64, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &never);
        CHECK(st == HORA_OK, "stall_busy: enqueue 'never' returned %s", hora_status_string(st));
        never_ok = st == HORA_OK;
    }
    double t0 = now_s();
    for (i = 0; !stopped && now_s() - t0 < 15; i++) {
        char name[32], what[64];
        float a[257], b[257];
        hora_request_t req = REQ_SENTINEL;
        int done = 0;
        snprintf(name, sizeof(name), "busy.%d", i);
        snprintf(what, sizeof(what), "stall_busy %s", name);
        for (int k = 0; k < 257; k++) a[k] = (float)stress_input(i, (size_t)k, 0, rank);
        st = hora_allreduce_async(name, a, b, 257, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req);
        if (st == HORA_OK) st = poll_until(req, 10, &done, what);
        if (st == HORA_OK) {
            size_t wrong = 0;
            for (int k = 0; k < 257; k++)
                wrong += b[k] != (float)stress_expected(i, (size_t)k, 0, HORA_OP_SUM, HORA_DTYPE_F32);
            CHECK(wrong == 0, "%s: %zu of 257 elements wrong", what, wrong);
        } else {
            CHECK(st == HORA_ERR_SHUTDOWN, "%s: ended with %s (done=%d), expected HORA_OK or HORA_ERR_SHUTDOWN", what,
                  hora_status_string(st), done);
            stopped = 1;
        }
        if (st != HORA_IN_PROGRESS && req != REQ_SENTINEL) hora_request_free(req);
    }
    CHECK(stopped, "stall_busy: no request failed with HORA_ERR_SHUTDOWN within 15 s (%d requests ran)", i);
    if (never_ok) {
        int done = 0;
        st = poll_until(never, 5, &done, "never");
        CHECK(done && st == HORA_ERR_SHUTDOWN,
              "stall_busy: 'never' ended with %s (done=%d), expected HORA_ERR_SHUTDOWN", hora_status_string(st), done);
        if (done) hora_request_free(never);
    }
    st = hora_shutdown();
    CHECK(st == HORA_OK || st == HORA_ERR_SHUTDOWN, "stall_busy: hora_shutdown returned %s: %s", hora_status_string(st),
          hora_last_error());
}

/* ---------------------------------------------------------- timeline mode */

static int run_ok(const char *cmd)
{
    int rc = system(cmd);
    return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

static void timeline_check_json(const char *path, const char *when)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "python3 -m json.tool '%s' > /dev/null", path);
    CHECK(run_ok(cmd), "timeline %s: '%s' is not valid JSON (python3 -m json.tool failed)", when, path);
}

static void mode_timeline(void)
{
    enum { N = 6 };
    static const size_t counts[N] = {100, 257, 1000, 500, 700, 200000};
    const char *path = getenv("HORA_TIMELINE");
    int iterations = quick ? 150 : 300;
    void *buf[N], *arena;

    CHECK(path && path[0], "timeline: HORA_TIMELINE is not set");
    if (!path || !path[0]) return;
    if (!runtime_start("timeline")) return;
    /* Small malloc'd tensors are fused by copying; two arena neighbours may
     * be fused in place. */
    arena = test_buf_alloc(1, (counts[3] + counts[4]) * sizeof(float));
    for (int t = 0; t < N; t++)
        buf[t] = t == 3 ? arena : t == 4 ? (char *)arena + counts[3] * sizeof(float) : test_buf_alloc(0, counts[t] * 4);

    for (int it = 0; it < iterations; it++) {
        hora_request_t req[N];
        int ok[N];
        for (int t = 0; t < N; t++) {
            char name[16];
            snprintf(name, sizeof(name), "tl.%d", t);
            for (size_t i = 0; i < counts[t]; i++) ((float *)buf[t])[i] = (float)stress_input(t, i, it, rank);
            hora_status_t st =
                hora_allreduce_async(name, buf[t], buf[t], counts[t], HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req[t]);
            CHECK(st == HORA_OK, "timeline iteration %d %s: enqueue returned %s", it, name, hora_status_string(st));
            ok[t] = st == HORA_OK;
        }
        if (rank == 0 && it == iterations / 2) timeline_check_json(path, "mid-run, requests in flight");
        for (int t = 0; t < N; t++) {
            char what[64];
            if (!ok[t]) continue;
            snprintf(what, sizeof(what), "timeline iteration %d tl.%d", it, t);
            if (wait_ok(req[t], what)) {
                size_t wrong = 0;
                for (size_t i = 0; i < counts[t]; i++)
                    wrong += ((float *)buf[t])[i] != (float)stress_expected(t, i, it, HORA_OP_SUM, HORA_DTYPE_F32);
                CHECK(wrong == 0, "%s: %zu of %zu elements wrong", what, wrong, counts[t]);
            }
            hora_request_free(req[t]);
        }
    }
    for (int t = 0; t < N; t++)
        if (t != 3 && t != 4) free(buf[t]);
    hora_mem_free(arena);
    runtime_stop("timeline");

    if (rank != 0) return;
    timeline_check_json(path, "after hora_shutdown");
    char *text = test_read_file(path, NULL);
    CHECK(text != NULL, "timeline: cannot read '%s'", path);
    if (!text) return;
    CHECK(strstr(text, "NEGOTIATE") != NULL, "timeline: no NEGOTIATE event");
    CHECK(strstr(text, "ALLREDUCE") || strstr(text, "REDUCE_SCATTER"), "timeline: no ALLREDUCE / REDUCE_SCATTER event");
    CHECK(strstr(text, "MEMCPY_IN_FUSION") || strcasestr(text, "zero_copy") || strcasestr(text, "zerocopy") ||
              strcasestr(text, "zero-copy"),
          "timeline: no MEMCPY_IN_FUSION or zero-copy event");
    free(text);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "'%s/tools/hora-timeline' '%s' > /dev/null", HORA_SOURCE_DIR, path);
    CHECK(run_ok(cmd), "timeline: %s failed", cmd);
}

/* ------------------------------------------------------------ badenv mode */

static void mode_badenv(void)
{
    static const char *const bad[][2] = {
        {"HORA_CYCLE_TIME_MS", "-1"},
        {"HORA_FUSION_THRESHOLD", "lots"},
        {"HORA_CACHE_CAPACITY", "-5"},
        {"HORA_STALL_CHECK_S", "abc"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        setenv(bad[k][0], bad[k][1], 1);
        hora_status_t st = hora_init();
        CHECK(st == HORA_ERR_CONFIG, "%s=%s: hora_init returned %s, expected HORA_ERR_CONFIG", bad[k][0], bad[k][1],
              hora_status_string(st));
        CHECK(strstr(hora_last_error(), bad[k][0]) != NULL, "%s=%s: the message does not name the variable: '%s'",
              bad[k][0], bad[k][1], hora_last_error());
        CHECK(!hora_initialized(), "%s=%s: hora_initialized() after a failed hora_init", bad[k][0], bad[k][1]);
        if (st == HORA_OK) hora_shutdown();
        unsetenv(bad[k][0]);
    }
    if (!runtime_start("badenv, good settings")) return;
    errors_next_ok("badenv");
    runtime_stop("badenv");
}

/* -------------------------------------------------------------- idle mode */

static double cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/* A coordinator that turned its cycle every HORA_CYCLE_TIME_MS while nothing
 * is in flight would cost each rank a steady share of a core that the
 * framework needs for compute. */
static void mode_idle(void)
{
    if (!runtime_start("idle")) return;
    struct ar_case c;
    /* A first request, so the response cache and transports are warm. */
    ar_case_init(&c, "idle_warm", HORA_DTYPE_F32, HORA_OP_SUM, 4096, 1, 1, 41);
    ar_case_start(&c);
    ar_case_finish(&c, 0);
    barrier();

    const double idle_s = 2.0;
    double cpu0 = cpu_seconds(), t0 = now_s();
    sleep_s(idle_s);
    double cpu = cpu_seconds() - cpu0, wall = now_s() - t0;
    CHECK(cpu < 0.02 * wall, "idle: the process used %.1f ms of CPU in %.2f s with nothing in flight (limit 2%%)",
          cpu * 1e3, wall);

    /* Rank r submits r * 0.4 s late: the early ranks' coordinators wait for
     * the idle ones, which wake on their own submission. */
    ar_case_init(&c, "idle_late", HORA_DTYPE_F32, HORA_OP_SUM, 4096, 1, 1, 43);
    sleep_s(0.4 * rank);
    ar_case_start(&c);
    ar_case_finish(&c, 0);
    runtime_stop("idle");
}

/* ------------------------------------------------------------------- main */

static const struct {
    const char *name;
    void (*run)(void);
    unsigned watchdog_s;
} modes[] = {
    {"basic", mode_basic, 600},
    {"errors", mode_errors, 300},
    {"join", mode_join, 300},
    {"stress", mode_stress, 1500},
    {"stall", mode_stall, 120},
    {"stall_shutdown", mode_stall_shutdown, 120},
    {"stall_busy", mode_stall_busy, 120},
    {"timeline", mode_timeline, 600},
    {"badenv", mode_badenv, 120},
    {"idle", mode_idle, 120},
};

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "basic";
    int provided = 0, m = -1;
    const char *q = getenv("TEST_ASYNC_QUICK");

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_dup(MPI_COMM_WORLD, &test_comm);
    MPI_Comm_rank(test_comm, &rank);
    MPI_Comm_size(test_comm, &size);
    quick = q && q[0] && strcmp(q, "0") != 0;
    for (size_t k = 0; k < sizeof(modes) / sizeof(modes[0]); k++)
        if (!strcmp(mode, modes[k].name)) m = (int)k;
    if (m < 0 || size < 2) {
        if (rank == 0) {
            fprintf(stderr, "usage: mpirun -np N test_async MODE   (N >= 2; MODE one of");
            for (size_t k = 0; k < sizeof(modes) / sizeof(modes[0]); k++) fprintf(stderr, " %s", modes[k].name);
            fprintf(stderr, ")\n");
        }
        MPI_Finalize();
        return 2;
    }
    watchdog_arm(mode, modes[m].watchdog_s);
    modes[m].run();

    int local[2] = {atomic_load(&failures), atomic_load(&checks)}, total[2] = {1, 0};
    MPI_Allreduce(local, total, 2, MPI_INT, MPI_SUM, test_comm);
    if (rank == 0)
        printf("test_async %s: %d checks on %d ranks, %d failures -> %s\n", mode, total[1], size, total[0],
               total[0] ? "FAIL" : "PASS");
    alarm(0);
    MPI_Comm_free(&test_comm);
    MPI_Finalize();
    return total[0] ? 1 : 0;
}
