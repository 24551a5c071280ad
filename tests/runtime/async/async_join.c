/* async_join.c - mode join: ranks run different numbers of steps (5 + 3 *
 * rank) of allreduces and an allgather, then hora_join; joined ranks
 * contribute zeros to the allreduces, and an allgather submitted while a
 * rank has joined fails (as in Horovod) with a message naming that rank.
 * Then each rank in turn joins first while the others submit an allgather,
 * a broadcast, an alltoall and a reducescatter, under one name and under a
 * name of their own (as Horovod's unnamed requests get when a rank joined
 * instead of calling): every one fails within seconds on its submitter,
 * an allreduce beside them sums the others' inputs, and after everyone
 * joined the job goes on with exact results. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_common.h"
#include "buf.h"

#define JOIN_TENSORS 4

static int join_steps(int r) { return 5 + 3 * r; }

static int join_value(int r, int t, size_t i, int s)
{
    return (int)(mix3((uint32_t)i, (uint32_t)t, (uint32_t)s) % 11) - 5 + r;
}

/* Wait at most JOIN_LIMIT_S for a request that must fail because rank
 * `joined` has joined; a request still pending then would hang the job, so
 * the test reports it and aborts. */
#define JOIN_LIMIT_S 20.0

static void join_expect_refused(hora_request_t req, int joined, const char *what)
{
    int done = 0;
    hora_status_t st = poll_until(req, JOIN_LIMIT_S, &done, what);
    if (!done) {
        fail("%s: still pending after %.0f s while rank %d has joined: it would hang", what, JOIN_LIMIT_S, joined);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    char want[64];
    snprintf(want, sizeof(want), "rank %d has already joined", joined);
    CHECK(st == HORA_ERR_INVALID_ARG && strstr(request_message(req), want),
          "%s: returned %s '%s', expected HORA_ERR_INVALID_ARG naming rank %d", what, hora_status_string(st),
          request_message(req), joined);
    hora_request_free(req);
}

/* Each rank in turn joins first; the others submit every collective but
 * allreduce, twice (a shared name and a name of their own), and one
 * allreduce, then join. */
static void join_each_first(void)
{
    enum { KINDS = 4 };
    static const char *const kinds[KINDS] = {"allgather", "broadcast", "alltoall", "reducescatter"};
    int32_t send[2 * 8], recv[2 * 8], bc[4];
    size_t splits[8];
    if (size > 8) {
        if (rank == 0) printf("test_async join: each rank joining first: not run above 8 ranks\n");
        return;
    }
    for (int first = 0; first < size; first++) {
        int last = -1;
        if (rank != first) {
            hora_request_t req[2 * KINDS], ar = REQ_SENTINEL;
            for (int own = 0; own < 2; own++)
                for (int k = 0; k < KINDS; k++) {
                    char name[48];
                    hora_request_t *r = &req[own * KINDS + k];
                    hora_status_t st = HORA_ERR_INVALID_ARG;
                    *r = REQ_SENTINEL;
                    if (own)
                        snprintf(name, sizeof(name), "jf%d.%s.rank%d", first, kinds[k], rank);
                    else
                        snprintf(name, sizeof(name), "jf%d.%s", first, kinds[k]);
                    for (int i = 0; i < 2 * size; i++) send[i] = rank * 100 + i;
                    for (int i = 0; i < size; i++) splits[i] = 1;
                    if (k == 0) st = hora_allgather_async(name, send, (size_t)rank + 1, HORA_DTYPE_I32, NULL, r);
                    if (k == 1) st = hora_broadcast_async(name, bc, 4, HORA_DTYPE_I32, (first + 1) % size, NULL, r);
                    if (k == 2) st = hora_alltoall_async(name, send, (size_t)size, HORA_DTYPE_I32, splits, NULL, r);
                    if (k == 3)
                        st = hora_reducescatter_async(name, send, recv, 2 * (size_t)size, HORA_DTYPE_I32, HORA_OP_SUM,
                                                      NULL, r);
                    CHECK(st == HORA_OK, "join first %d %s: enqueue returned %s: %s", first, name,
                          hora_status_string(st), hora_last_error());
                    if (st != HORA_OK) *r = REQ_SENTINEL;
                }
            int32_t ar_buf[3] = {rank, 1, -2 * rank};
            hora_status_t st =
                hora_allreduce_async("jf.allreduce", ar_buf, ar_buf, 3, HORA_DTYPE_I32, HORA_OP_SUM, NULL, &ar);
            CHECK(st == HORA_OK, "join first %d allreduce: enqueue returned %s", first, hora_status_string(st));
            for (int i = 0; i < 2 * KINDS; i++) {
                char what[96];
                snprintf(what, sizeof(what), "join first %d: %s under %s name", first, kinds[i % KINDS],
                         i < KINDS ? "one" : "its own");
                if (req[i] != REQ_SENTINEL) join_expect_refused(req[i], first, what);
            }
            if (st == HORA_OK && wait_ok(ar, "join first: allreduce beside them")) {
                /* rank `first` contributes zeros */
                int32_t sum = (int32_t)(size * (size - 1) / 2 - first);
                const int32_t want[3] = {sum, size - 1, -2 * sum};
                compare("join first: allreduce beside them", ar_buf, want, 3, HORA_DTYPE_I32);
            }
            if (st == HORA_OK) hora_request_free(ar);
        }
        hora_status_t st = hora_join(&last);
        CHECK(st == HORA_OK, "join first %d: hora_join returned %s: %s", first, hora_status_string(st),
              hora_last_error());
        /* The others joined after their refusals, which came after rank
         * `first` had joined: a later cycle. */
        CHECK(last != first && last >= 0 && last < size, "join first %d: hora_join says rank %d joined last", first,
              last);
        int lasts[64];
        MPI_Allgather(&last, 1, MPI_INT, lasts, 1, MPI_INT, test_comm);
        for (int r = 0; r < size; r++)
            CHECK(lasts[r] == last, "join first %d: rank %d says rank %d joined last, rank %d says %d", first, r,
                  lasts[r], rank, last);
        /* Every rank again: exact results, the broadcast that was refused
         * above included. */
        ar_case_next_ok("join first");
        hora_request_t req = REQ_SENTINEL;
        for (int i = 0; i < 4; i++) bc[i] = rank * 10 + i;
        st = hora_broadcast_async("jf.broadcast.after", bc, 4, HORA_DTYPE_I32, first, NULL, &req);
        CHECK(st == HORA_OK, "join first %d: broadcast after: enqueue returned %s", first, hora_status_string(st));
        if (st == HORA_OK && wait_ok(req, "join first: broadcast after")) {
            const int32_t want[4] = {first * 10, first * 10 + 1, first * 10 + 2, first * 10 + 3};
            compare("join first: broadcast after", bc, want, 4, HORA_DTYPE_I32);
        }
        if (st == HORA_OK) hora_request_free(req);
    }
}

void mode_join(void)
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
        /* From step join_steps(0) on, rank 0 has joined: the allgather fails. */
        for (int i = 0; i <= rank; i++) ag_send[i] = rank * 1000 + s * 10 + i;
        hora_status_t st = hora_allgather_async("gag", ag_send, (size_t)rank + 1, HORA_DTYPE_I32, NULL, &ag_req);
        CHECK(st == HORA_OK, "join step %d gag: enqueue returned %s: %s", s, hora_status_string(st), hora_last_error());
        ag_ok = st == HORA_OK;
        /* A broadcast from the last rank under one name: from the second
         * step on it runs from the response cache, which must not let it
         * run while rank 0 has joined either. */
        int32_t bc[4] = {rank, s, -rank, 7};
        hora_request_t bc_req = REQ_SENTINEL;
        st = hora_broadcast_async("gbc", bc, 4, HORA_DTYPE_I32, size - 1, NULL, &bc_req);
        CHECK(st == HORA_OK, "join step %d gbc: enqueue returned %s: %s", s, hora_status_string(st), hora_last_error());
        if (st == HORA_OK) {
            snprintf(what, sizeof(what), "join step %d broadcast gbc", s);
            if (s >= join_steps(0)) {
                st = hora_wait(bc_req);
                CHECK(st == HORA_ERR_INVALID_ARG && strstr(request_message(bc_req), "rank 0 has already joined"),
                      "%s: after rank 0 joined it returned %s '%s', expected HORA_ERR_INVALID_ARG naming rank 0", what,
                      hora_status_string(st), request_message(bc_req));
            } else if (wait_ok(bc_req, what)) {
                const int32_t want_bc[4] = {size - 1, s, -(size - 1), 7};
                compare(what, bc, want_bc, 4, HORA_DTYPE_I32);
            }
            hora_request_free(bc_req);
        }

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
        if (ag_ok && s >= join_steps(0)) {
            st = hora_wait(ag_req);
            CHECK(st == HORA_ERR_INVALID_ARG, "%s: after rank 0 joined it returned %s, expected HORA_ERR_INVALID_ARG",
                  what, hora_status_string(st));
            CHECK(strstr(request_message(ag_req), "rank 0 has already joined") != NULL,
                  "%s: the message does not name the joined rank: '%s'", what, request_message(ag_req));
        } else if (ag_ok && wait_ok(ag_req, what)) {
            void *data = NULL;
            size_t total = 0, expect_total = 0, at = 0;
            const size_t *rc = NULL;
            int32_t expect[64];
            for (int r = 0; r < size; r++)
                for (int i = 0; i <= r; i++) expect[expect_total++] = r * 1000 + s * 10 + i;
            st = hora_request_result(ag_req, &data, &total, &rc);
            CHECK(st == HORA_OK, "%s: hora_request_result returned %s", what, hora_status_string(st));
            if (st == HORA_OK) {
                int shape_ok = total == expect_total && rc;
                CHECK(total == expect_total, "%s: total %zu, expected %zu", what, total, expect_total);
                for (int r = 0; rc && r < size; r++) {
                    size_t e = (size_t)r + 1;
                    CHECK(rc[r] == e, "%s: rank_counts[%d] = %zu, expected %zu", what, r, rc[r], e);
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
    ar_case_next_ok("join");
    join_each_first();

    for (int t = 0; t < JOIN_TENSORS; t++) {
        if (t >= 2) test_buf_free(t % 2, recv[t]);
        test_buf_free(t % 2, send[t]);
    }
    free(want);
    runtime_stop("join");
}
