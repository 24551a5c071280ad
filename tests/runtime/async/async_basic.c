/* async_basic.c - mode basic: allreduce of every dtype x op, in place and
 * out of place, shared and malloc'd, with pre/postscale and fp16/bf16
 * compression; broadcast from every root; allgather with a first dimension
 * that differs per rank; a grouped allreduce; hora_test polling. All enqueued
 * at once, in a different order on every rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_common.h"
#include "buf.h"
#include "exact.h"

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

/* Checks a case's enqueue status; 1 if the request is in flight. */
static int case_enqueued(const char *call, const char *name, hora_status_t st)
{
    CHECK(st == HORA_OK, "%s %s: enqueue returned %s: %s", call, name, hora_status_string(st), hora_last_error());
    return st == HORA_OK;
}

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
    c->enqueued = case_enqueued("allgather_async", c->name, st);
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
    c->enqueued = case_enqueued("broadcast_async", c->name, st);
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

void mode_basic(void)
{
    static const size_t counts[] = {1, 33, 5003, 70001};
    enum { MAX_CASES = 1024 };
    struct ar_case *ar = calloc(MAX_CASES, sizeof(*ar));
    int nar = 0;
    unsigned salt = 1;

    if (!runtime_start("basic")) return;
    if (rank == 0) printf("test_async basic: %d ranks, transport %s\n", size, hora_transport_name());

    /* bool refuses AVG and scaling at the call, on every rank (each makes
     * it), naming the dtype and what is refused; nothing is enqueued. */
    {
        uint8_t x[3] = {1, 0, 2}, y[3] = {9, 9, 9};
        hora_opts_t opts = HORA_OPTS_INIT;
        hora_request_t req = NULL;
        checks++;
        hora_status_t st = hora_allreduce_async("bool.avg", x, y, 3, HORA_DTYPE_BOOL, HORA_OP_AVG, &opts, &req);
        if (st != HORA_ERR_INVALID_ARG || req || !strstr(hora_last_error(), "bool") ||
            !strstr(hora_last_error(), "avg"))
            fail("bool avg: %s (req %p): %s", hora_status_string(st), (void *)req, hora_last_error());
        checks++;
        opts.prescale = 2;
        st = hora_allreduce_async("bool.scaled", x, y, 3, HORA_DTYPE_BOOL, HORA_OP_SUM, &opts, &req);
        if (st != HORA_ERR_INVALID_ARG || req || !strstr(hora_last_error(), "bool") ||
            !strstr(hora_last_error(), "prescale"))
            fail("bool prescale: %s: %s", hora_status_string(st), hora_last_error());
        checks++;
        opts.prescale = 1;
        opts.postscale = 0.5;
        st = hora_allreduce_async("bool.scaled", x, y, 3, HORA_DTYPE_BOOL, HORA_OP_MAX, &opts, &req);
        if (st != HORA_ERR_INVALID_ARG || req || !strstr(hora_last_error(), "bool"))
            fail("bool postscale: %s: %s", hora_status_string(st), hora_last_error());
        if (y[0] != 9 || y[2] != 9) fail("a refused bool allreduce wrote its output");
    }

    /* Every dtype x op x in/out of place x shared/malloc'd (bool x AVG is
     * refused, above). */
    for (int dtype = 0; dtype < HORA_DTYPE_COUNT; dtype++)
        for (int op = 0; op < HORA_OP_COUNT; op++)
            for (int v = 0; v < 4; v++) {
                if (dtype == HORA_DTYPE_BOOL && op == HORA_OP_AVG) continue;
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
    static const hora_dtype_t bc_dtypes[] = {HORA_DTYPE_F32, HORA_DTYPE_F16, HORA_DTYPE_I64, HORA_DTYPE_U8,
                                             HORA_DTYPE_I8,  HORA_DTYPE_I16, HORA_DTYPE_U16, HORA_DTYPE_BOOL};
    enum { N_BC_DTYPES = sizeof(bc_dtypes) / sizeof(bc_dtypes[0]) };
    int nbc = size * N_BC_DTYPES;
    struct bc_case *bc = calloc((size_t)nbc, sizeof(*bc));
    for (int root = 0, k = 0; root < size; root++)
        for (int d = 0; d < N_BC_DTYPES; d++, k++) {
            bc[k].dtype = bc_dtypes[d];
            bc[k].root = root;
            bc[k].count = (size_t)(1000 + 7 * root + d);
            bc[k].shared = (root + d) % 2;
            bc[k].salt = salt++;
            snprintf(bc[k].name, sizeof(bc[k].name), "bc.root%d.%s", root, hora_dtype_name(bc_dtypes[d]));
        }

    /* Allgather with a per-rank first dimension. */
    /* (bool's bytes other than 0/1 are moved unchanged: data, not truth values) */
    enum { N_AG = 8 };
    struct ag_case ag[N_AG] = {{.dtype = HORA_DTYPE_F32, .ndim = 2},  {.dtype = HORA_DTYPE_I32, .ndim = 2},
                               {.dtype = HORA_DTYPE_BF16, .ndim = 2}, {.dtype = HORA_DTYPE_I64, .ndim = 0},
                               {.dtype = HORA_DTYPE_I8, .ndim = 2},   {.dtype = HORA_DTYPE_I16, .ndim = 0},
                               {.dtype = HORA_DTYPE_U16, .ndim = 2},  {.dtype = HORA_DTYPE_BOOL, .ndim = 2}};
    for (int k = 0; k < N_AG; k++) {
        ag[k].salt = salt++;
        snprintf(ag[k].name, sizeof(ag[k].name), "ag.%d.%s.%dd", k, hora_dtype_name(ag[k].dtype), ag[k].ndim ? 2 : 1);
    }

    /* Enqueue everything in a rank-dependent order: the coordinator must
     * still run them in one order everywhere. */
    int total = nar + nbc + N_AG;
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
