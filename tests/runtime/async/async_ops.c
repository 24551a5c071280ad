/* async_ops.c - mode ops: the operations Horovod has beyond allreduce,
 * allgather and broadcast, and Horovod's integer scaling:
 *
 *   reducescatter  negotiated, along the first dimension: every dtype under
 *                  SUM/AVG/MIN/MAX, first dimensions that divide evenly, do
 *                  not, and are shorter than the number of ranks, rows of
 *                  1..7 elements, shared and malloc'd buffers, pre/postscale;
 *                  all submitted at once in a different order on every rank.
 *                  A grouped reducescatter with a shape per member, and a
 *                  shape mismatch naming both shapes.
 *   alltoall       an equal split (splits NULL), per-rank splits with zeros,
 *                  an empty tensor everywhere, the received counts; a
 *                  mismatch of the second dimension; splits that do not sum
 *                  to the first dimension are refused at the call.
 *   barrier        negotiated and direct: a rank that arrives 0.3 s late
 *                  holds every other rank back that long.
 *   truncation     an integer prescale or postscale truncates toward zero.
 *
 * Every expected value is computed here from the inputs, which are derived
 * from (rank, element, salt). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_common.h"
#include "buf.h"
#include "exact.h"

static int ops_is_float(hora_dtype_t dtype)
{
    return dtype == HORA_DTYPE_F32 || dtype == HORA_DTYPE_F16 || dtype == HORA_DTYPE_BF16 || dtype == HORA_DTYPE_F64;
}

/* ------------------------------------------------------------ reducescatter */

struct rs_case {
    char name[96];
    hora_dtype_t dtype;
    hora_op_t op;
    size_t d0, row, first_row, rows;
    double prescale, postscale;
    int shared;
    unsigned salt;
    void *send, *recv;
    hora_request_t req;
    int enqueued;
};

/* postscale * reduce over ranks of prescale * input, AVG as hora.h says. */
static double rs_expected(const struct rs_case *c, size_t i)
{
    double acc = 0;
    for (int r = 0; r < size; r++) {
        double v = (double)input_value(c->dtype, c->op, r, i, c->salt) * c->prescale;
        acc = r == 0 ? v : exact_reduce(c->op, acc, v);
    }
    if (c->op == HORA_OP_AVG) {
        if (c->dtype == HORA_DTYPE_F64)
            acc = acc / size;
        else if (ops_is_float(c->dtype))
            acc = (double)((float)acc / (float)size);
        else
            acc = (double)((int64_t)acc / size);
    }
    if (c->dtype == HORA_DTYPE_BOOL) return acc != 0; /* OR / AND of the truth values */
    return acc * c->postscale;
}

static void rs_case_start(struct rs_case *c, const char *group_name, int n, struct rs_case *members)
{
    const size_t es = hora_dtype_size(c->dtype), count = c->d0 * c->row;
    hora_opts_t opts = HORA_OPTS_INIT;
    hora_shard(c->d0, size, rank, &c->first_row, &c->rows);
    c->send = test_buf_alloc(c->shared, count * es);
    c->recv = test_buf_alloc(!c->shared, c->rows * c->row * es + es);
    for (size_t i = 0; i < count; i++)
        exact_store(c->send, i, c->dtype, (double)input_value(c->dtype, c->op, rank, i, c->salt));
    memset(c->recv, 0x5a, c->rows * c->row * es + es); /* poison, and a guard element after */
    opts.ndim = 2;
    opts.dims[0] = (int64_t)c->d0;
    opts.dims[1] = (int64_t)c->row;
    opts.prescale = c->prescale;
    opts.postscale = c->postscale;
    c->req = REQ_SENTINEL;
    if (!group_name) {
        hora_status_t st = hora_reducescatter_async(c->name, c->send, c->recv, count, c->dtype, c->op, &opts, &c->req);
        CHECK(st == HORA_OK, "reducescatter %s: enqueue returned %s: %s", c->name, hora_status_string(st),
              hora_last_error());
        c->enqueued = st == HORA_OK;
        return;
    }
    /* A group: c is members[0]; every member has its own shape. */
    const char *names[8];
    const void *send[8];
    void *recv[8];
    size_t counts[8];
    hora_opts_t all[8];
    hora_request_t reqs[8];
    for (int k = 0; k < n; k++) {
        struct rs_case *m = &members[k];
        if (k) {
            hora_shard(m->d0, size, rank, &m->first_row, &m->rows);
            m->send = test_buf_alloc(m->shared, m->d0 * m->row * es);
            m->recv = test_buf_alloc(!m->shared, m->rows * m->row * es + es);
            for (size_t i = 0; i < m->d0 * m->row; i++)
                exact_store(m->send, i, m->dtype, (double)input_value(m->dtype, m->op, rank, i, m->salt));
            memset(m->recv, 0x5a, m->rows * m->row * es + es);
        }
        names[k] = m->name;
        send[k] = m->send;
        recv[k] = m->recv;
        counts[k] = m->d0 * m->row;
        all[k] = opts;
        all[k].dims[0] = (int64_t)m->d0;
        all[k].dims[1] = (int64_t)m->row;
    }
    hora_status_t st = hora_grouped_reducescatter_async(n, names, send, recv, counts, c->dtype, c->op, all, reqs);
    CHECK(st == HORA_OK, "grouped reducescatter %s: enqueue returned %s: %s", group_name, hora_status_string(st),
          hora_last_error());
    for (int k = 0; k < n; k++) {
        members[k].req = st == HORA_OK ? reqs[k] : REQ_SENTINEL;
        members[k].enqueued = st == HORA_OK;
    }
}

static void rs_case_finish(struct rs_case *c)
{
    const size_t es = hora_dtype_size(c->dtype), n = c->rows * c->row;
    char what[256];
    snprintf(what, sizeof(what), "reducescatter %s (rows %zu..%zu of %zu, pre %g post %g)", c->name, c->first_row,
             c->first_row + c->rows, c->d0, c->prescale, c->postscale);
    if (c->enqueued && wait_ok(c->req, what)) {
        uint8_t *want = malloc(n * es + es);
        for (size_t i = 0; i < n; i++) exact_store(want, i, c->dtype, rs_expected(c, c->first_row * c->row + i));
        memset(want + n * es, 0x5a, es);
        compare(what, c->recv, want, n + 1, c->dtype); /* the guard element stays */
        free(want);
    }
    if (c->enqueued) hora_request_free(c->req);
    test_buf_free(c->shared, c->send);
    test_buf_free(!c->shared, c->recv);
}

static void ops_reducescatter(void)
{
    static const hora_op_t ops[] = {HORA_OP_SUM, HORA_OP_AVG, HORA_OP_MIN, HORA_OP_MAX};
    /* first dimension as a multiple of the ranks plus a remainder, row length */
    static const int shapes[][3] = {{2, 0, 5}, {2, 1, 1}, {1, -1, 3}, {3, 2, 7}, {0, 1, 4}, {0, 0, 2}};
    const int nshapes = (int)(sizeof(shapes) / sizeof(shapes[0]));
    const int ncases = HORA_DTYPE_COUNT * 4 * nshapes;
    struct rs_case *cases = calloc((size_t)ncases, sizeof(*cases));
    int *order = malloc(sizeof(int) * (size_t)ncases), n = 0;
    for (int d = 0; d < HORA_DTYPE_COUNT; d++)
        for (int o = 0; o < 4; o++)
            for (int s = 0; s < nshapes; s++) {
                hora_dtype_t dtype = (hora_dtype_t)d;
                if (dtype == HORA_DTYPE_BOOL && ops[o] == HORA_OP_AVG) continue; /* refused */
                struct rs_case *c = &cases[n];
                c->dtype = dtype;
                c->op = ops[o];
                c->d0 = (size_t)(shapes[s][0] * size + shapes[s][1]);
                c->row = (size_t)shapes[s][2];
                c->shared = (d + s) % 2;
                c->salt = (unsigned)(1000 + n);
                /* Exact scales on floats; integers keep 1 (truncation has its own case). */
                c->prescale = ops_is_float(dtype) && s % 2 ? 2.0 : 1.0;
                c->postscale = ops_is_float(dtype) && s >= 2 ? 0.5 : 1.0;
                snprintf(c->name, sizeof(c->name), "rs.%s.%s.%zux%zu", hora_dtype_name(dtype), hora_op_name(ops[o]),
                         c->d0, c->row);
                order[n] = n;
                n++;
            }
    shuffle(order, n, (uint64_t)rank + 7);
    for (int k = 0; k < n; k++) rs_case_start(&cases[order[k]], NULL, 0, NULL);
    for (int k = 0; k < n; k++) rs_case_finish(&cases[k]);

    /* One name again and again: from the second time on it runs from the
     * response cache. */
    for (int it = 0; it < 4; it++) {
        struct rs_case c = {.dtype = HORA_DTYPE_F32,
                            .op = HORA_OP_SUM,
                            .d0 = (size_t)(2 * size + 1),
                            .row = 3,
                            .prescale = 1.0,
                            .postscale = 1.0,
                            .shared = 1,
                            .salt = (unsigned)(7000 + it)};
        snprintf(c.name, sizeof(c.name), "rs.again");
        rs_case_start(&c, NULL, 0, NULL);
        rs_case_finish(&c);
    }

    /* A group of three with their own shapes. */
    struct rs_case group[3];
    for (int k = 0; k < 3; k++) {
        group[k] = (struct rs_case){.dtype = HORA_DTYPE_F32,
                                    .op = HORA_OP_AVG,
                                    .d0 = (size_t)(size * k + k + 1),
                                    .row = (size_t)(2 + k),
                                    .prescale = 2.0,
                                    .postscale = 0.5,
                                    .shared = k % 2,
                                    .salt = (unsigned)(5000 + k)};
        snprintf(group[k].name, sizeof(group[k].name), "rsg.%d", k);
    }
    rs_case_start(&group[0], "rsg", 3, group);
    for (int k = 0; k < 3; k++) rs_case_finish(&group[k]);

    /* Shapes that disagree fail on every rank, naming both. */
    {
        float send[12] = {0}, recv[12];
        hora_opts_t opts = HORA_OPTS_INIT;
        hora_request_t req = REQ_SENTINEL;
        opts.ndim = 2;
        opts.dims[0] = 4;
        opts.dims[1] = rank == 0 ? 3 : 2;
        hora_status_t st = hora_reducescatter_async("rs.mismatch", send, recv, (size_t)(4 * opts.dims[1]),
                                                    HORA_DTYPE_F32, HORA_OP_SUM, &opts, &req);
        CHECK(st == HORA_OK, "rs.mismatch: enqueue returned %s: %s", hora_status_string(st), hora_last_error());
        if (st == HORA_OK) {
            st = hora_wait(req);
            CHECK(st == HORA_ERR_MISMATCH, "rs.mismatch: returned %s, expected HORA_ERR_MISMATCH",
                  hora_status_string(st));
            CHECK(strstr(request_message(req), "[4, 3]") && strstr(request_message(req), "[4, 2]"),
                  "rs.mismatch: the message does not name both shapes: '%s'", request_message(req));
            hora_request_free(req);
        }
        ar_case_next_ok("rs.mismatch");
    }
    free(order);
    free(cases);
}

/* ------------------------------------------------------------------ alltoall */

/* Rank r's element (row j, column k) of alltoall case t. */
static double a2a_value(int t, int r, size_t j, size_t k)
{
    return (double)(t * 1000000 + r * 10000 + (int)j * 10 + (int)k);
}

/* Rows rank r sends to rank q in case t (case 0: NULL splits, 2 each). */
static size_t a2a_split(int t, int r, int q)
{
    if (t == 0) return 2;
    if (t == 2) return 0;
    return (size_t)((r + 2 * q) % 3); /* zeros included */
}

static void ops_alltoall(void)
{
    static const size_t rows_of[3] = {3, 2, 4};
    static const hora_dtype_t dtypes[3] = {HORA_DTYPE_I32, HORA_DTYPE_F64, HORA_DTYPE_F32};
    for (int t = 0; t < 3; t++) {
        const size_t row = rows_of[t], es = hora_dtype_size(dtypes[t]);
        size_t splits[64], d0 = 0;
        for (int q = 0; q < size; q++) d0 += splits[q] = a2a_split(t, rank, q);
        void *send = test_buf_alloc(t % 2, d0 * row * es);
        for (size_t j = 0; j < d0; j++)
            for (size_t k = 0; k < row; k++) exact_store(send, j * row + k, dtypes[t], a2a_value(t, rank, j, k));
        hora_opts_t opts = HORA_OPTS_INIT;
        opts.ndim = 2;
        opts.dims[0] = (int64_t)d0;
        opts.dims[1] = (int64_t)row;
        char name[32], what[96];
        snprintf(name, sizeof(name), "a2a.%d", t);
        snprintf(what, sizeof(what), "alltoall %s (%zu rows of %zu, splits %s)", name, d0, row, t ? "given" : "NULL");
        hora_request_t req = REQ_SENTINEL;
        hora_status_t st = hora_alltoall_async(name, send, d0 * row, dtypes[t], t == 0 ? NULL : splits, &opts, &req);
        const int enqueued = st == HORA_OK;
        CHECK(enqueued, "%s: enqueue returned %s: %s", what, hora_status_string(st), hora_last_error());
        if (enqueued && wait_ok(req, what)) {
            void *data = NULL;
            size_t total = 0, want_total = 0;
            const size_t *rc = NULL;
            st = hora_request_result(req, &data, &total, &rc);
            CHECK(st == HORA_OK && rc, "%s: hora_request_result returned %s", what, hora_status_string(st));
            for (int q = 0; q < size; q++) want_total += a2a_split(t, q, rank) * row;
            uint8_t *want = malloc(want_total * es + 1);
            size_t at = 0;
            for (int q = 0; q < size; q++) {
                size_t first = 0;
                for (int p = 0; p < rank; p++) first += a2a_split(t, q, p);
                for (size_t j = first; j < first + a2a_split(t, q, rank); j++)
                    for (size_t k = 0; k < row; k++) exact_store(want, at++, dtypes[t], a2a_value(t, q, j, k));
                if (rc)
                    CHECK(rc[q] == a2a_split(t, q, rank) * row, "%s: %zu elements from rank %d, expected %zu", what,
                          rc[q], q, a2a_split(t, q, rank) * row);
            }
            CHECK(total == want_total, "%s: %zu elements received, expected %zu", what, total, want_total);
            if (st == HORA_OK && total == want_total && want_total) compare(what, data, want, total, dtypes[t]);
            free(want);
        }
        if (enqueued) hora_request_free(req);
        test_buf_free(t % 2, send);
    }

    /* Rows of different lengths fail on every rank. */
    {
        int32_t send[64] = {0};
        hora_opts_t opts = HORA_OPTS_INIT;
        hora_request_t req = REQ_SENTINEL;
        opts.ndim = 2;
        opts.dims[0] = size;
        opts.dims[1] = rank == 0 ? 2 : 3;
        hora_status_t st =
            hora_alltoall_async("a2a.mismatch", send, (size_t)(size * opts.dims[1]), HORA_DTYPE_I32, NULL, &opts, &req);
        CHECK(st == HORA_OK, "a2a.mismatch: enqueue returned %s: %s", hora_status_string(st), hora_last_error());
        if (st == HORA_OK) {
            st = hora_wait(req);
            CHECK(st == HORA_ERR_MISMATCH && strstr(request_message(req), "dimensions after the first"),
                  "a2a.mismatch: returned %s '%s', expected HORA_ERR_MISMATCH naming the dimensions",
                  hora_status_string(st), request_message(req));
            hora_request_free(req);
        }
        ar_case_next_ok("a2a.mismatch");
    }
    /* Refused at the call, on this rank alone: nothing is negotiated. */
    {
        int32_t send[8] = {0};
        size_t splits[64] = {0};
        hora_request_t req = REQ_SENTINEL;
        splits[0] = 3;
        hora_status_t st = hora_alltoall_async("a2a.badsplits", send, 4, HORA_DTYPE_I32, splits, NULL, &req);
        CHECK(st == HORA_ERR_INVALID_ARG && req == REQ_SENTINEL && strstr(hora_last_error(), "sum to 3"),
              "a2a.badsplits: returned %s '%s', expected HORA_ERR_INVALID_ARG naming the sum", hora_status_string(st),
              hora_last_error());
        st = hora_alltoall_async("a2a.uneven", send, (size_t)size + 1, HORA_DTYPE_I32, NULL, NULL, &req);
        CHECK(st == HORA_ERR_INVALID_ARG && req == REQ_SENTINEL,
              "a2a.uneven: %d rows and no splits returned %s, expected HORA_ERR_INVALID_ARG", size + 1,
              hora_status_string(st));
    }
}

/* ------------------------------------------------------------------- barrier */

static void ops_barrier(void)
{
    const double late_s = 0.3;
    for (int direct = 0; direct < 2; direct++) {
        barrier(); /* test_comm: start together */
        double t0 = test_now_s();
        if (rank == size - 1) test_sleep_s(late_s);
        hora_status_t st;
        if (direct) {
            st = hora_barrier();
        } else {
            hora_request_t req = REQ_SENTINEL;
            st = hora_barrier_async("barrier", NULL, &req);
            if (st == HORA_OK) {
                st = hora_wait(req);
                hora_request_free(req);
            }
        }
        double waited = test_now_s() - t0;
        CHECK(st == HORA_OK, "%s barrier returned %s: %s", direct ? "direct" : "negotiated", hora_status_string(st),
              hora_last_error());
        CHECK(waited >= late_s * 0.9, "%s barrier: rank %d left after %.3f s, before the late rank arrived (%.1f s)",
              direct ? "direct" : "negotiated", rank, waited, late_s);
    }
}

/* ---------------------------------------------------------------- truncation */

/* prescale 0.5 on each input, or postscale 0.5 on the sum, of small i32
 * values: x * 0.5 for odd x lies halfway, where rounding to nearest even
 * and truncation part (1.5 -> 1, not 2; -1.5 -> -1, not -2). */
static void ops_truncation(void)
{
    enum { N = 40 };
    for (int post = 0; post < 2; post++) {
        int32_t send[N], recv[N], want[N];
        int differs = 0;
        /* Rank 0 adds 1 to the odd elements: odd sums on any number of ranks. */
        for (int i = 0; i < N; i++) send[i] = i % 9 - 4 + (rank == 0) * (i % 2);
        for (int i = 0; i < N; i++) {
            double acc = 0, rounded = 0;
            for (int r = 0; r < size; r++) {
                double x = i % 9 - 4 + (r == 0) * (i % 2);
                acc += post ? x : trunc(x * 0.5);
                rounded += post ? x : nearbyint(x * 0.5);
            }
            want[i] = (int32_t)(post ? trunc(acc * 0.5) : acc);
            differs += want[i] != (int32_t)(post ? nearbyint(rounded * 0.5) : rounded);
        }
        CHECK(differs > 0, "truncation: the case cannot tell truncation from rounding");
        hora_opts_t opts = HORA_OPTS_INIT;
        if (post)
            opts.postscale = 0.5;
        else
            opts.prescale = 0.5;
        hora_request_t req = REQ_SENTINEL;
        char what[64];
        snprintf(what, sizeof(what), "i32 allreduce with %s 0.5", post ? "postscale" : "prescale");
        hora_status_t st = hora_allreduce_async(post ? "trunc.post" : "trunc.pre", send, recv, N, HORA_DTYPE_I32,
                                                HORA_OP_SUM, &opts, &req);
        CHECK(st == HORA_OK, "%s: enqueue returned %s", what, hora_status_string(st));
        if (st == HORA_OK && wait_ok(req, what)) compare(what, recv, want, N, HORA_DTYPE_I32);
        if (st == HORA_OK) hora_request_free(req);
    }
}

void mode_ops(void)
{
    if (!runtime_start("ops")) return;
    if (rank == 0) printf("test_async ops: %d ranks: reducescatter, alltoall, barrier, integer scaling\n", size);
    ops_reducescatter();
    ops_alltoall();
    ops_barrier();
    ops_truncation();
    runtime_stop("ops");
}
