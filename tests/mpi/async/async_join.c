/* async_join.c - mode join: ranks run different numbers of steps (5 + 3 *
 * rank) of allreduces and an allgather, then hora_join; joined ranks
 * contribute nothing. */
#include <stdio.h>
#include <stdlib.h>

#include "async_common.h"
#include "buf.h"

#define JOIN_TENSORS 4

static int join_steps(int r)
{
    return 5 + 3 * r;
}

static int join_value(int r, int t, size_t i, int s)
{
    return (int)(mix3((uint32_t)i, (uint32_t)t, (uint32_t)s) % 11) - 5 + r;
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
    ar_case_next_ok("join");

    for (int t = 0; t < JOIN_TENSORS; t++) {
        if (t >= 2) test_buf_free(t % 2, recv[t]);
        test_buf_free(t % 2, send[t]);
    }
    free(want);
    runtime_stop("join");
}
