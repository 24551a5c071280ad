/* async_sets.c - mode sets: process sets. Sets of the even ranks, the odd
 * ranks and {last, 0} (passed out of order); on each, every rank of it runs
 * allreduces (under names the world uses at the same time), a broadcast from
 * a member, an allgather with a first dimension per member, an uneven
 * reducescatter, an alltoall with splits and a barrier, all submitted before
 * any wait and waited for in a different order per rank, with world requests
 * in between. Then: a set's ranks are held back while a disjoint set
 * finishes; a rank outside a set, an unknown set and a freed set are
 * refused; a dtype mismatch inside a set names world ranks; creation with
 * different lists fails on every rank; ids are never reused. With
 * HORA_PROCESS_SETS=0,1 in the environment, set 1 = {0, 1} exists from
 * hora_init on; with HORA_TIMELINE, every set's lowest member finds the
 * set's requests in its timeline (HORA_TIMELINE.set<id>). Expected values come from the members' world ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_common.h"
#include "file.h"

#define SETS_MAX 64

struct set_run {
    int id, n, place; /* place: this rank's among members, -1 outside */
    int members[SETS_MAX];
    /* requests */
    hora_request_t ar[3], bc, ag, rs, a2a, bar;
    float ar_f32[5][1], ar_buf[3][64];
    int32_t bc_buf[6], ag_send[SETS_MAX * 2];
    double rs_send[64], rs_recv[64];
    int32_t a2a_send[SETS_MAX * 4];
    size_t splits[SETS_MAX];
    int submitted;
};

static float sets_value(int r, int t, int i) { return (float)((r + 1) * 100 + t * 10 + i % 7); }

static hora_opts_t sets_opts(int set)
{
    hora_opts_t o = HORA_OPTS_INIT;
    o.process_set = set;
    return o;
}

static void sets_submit(struct set_run *s)
{
    hora_opts_t o = sets_opts(s->id);
    hora_status_t st;
    char what[64];
    /* Allreduces under the names the world uses too ("x0".."x2"). */
    for (int t = 0; t < 3; t++) {
        char name[8];
        snprintf(name, sizeof(name), "x%d", t);
        for (int i = 0; i < 64; i++) s->ar_buf[t][i] = sets_value(rank, t, i);
        st = hora_allreduce_async(name, s->ar_buf[t], s->ar_buf[t], 64, HORA_DTYPE_F32,
                                  t == 1 ? HORA_OP_MAX : HORA_OP_SUM, &o, &s->ar[t]);
        snprintf(what, sizeof(what), "set %d allreduce %s", s->id, name);
        CHECK(st == HORA_OK, "%s: enqueue returned %s: %s", what, hora_status_string(st), hora_last_error());
    }
    /* Broadcast from the set's highest world rank. */
    for (int i = 0; i < 6; i++) s->bc_buf[i] = rank * 1000 + i;
    st = hora_broadcast_async("bc", s->bc_buf, 6, HORA_DTYPE_I32, s->members[s->n - 1], &o, &s->bc);
    CHECK(st == HORA_OK, "set %d broadcast: enqueue returned %s: %s", s->id, hora_status_string(st), hora_last_error());
    /* Allgather: place + 1 rows of 2. */
    o.ndim = 2;
    o.dims[0] = s->place + 1;
    o.dims[1] = 2;
    for (int i = 0; i < 2 * (s->place + 1); i++) s->ag_send[i] = rank * 100 + i;
    st = hora_allgather_async("ag", s->ag_send, (size_t)(2 * (s->place + 1)), HORA_DTYPE_I32, &o, &s->ag);
    CHECK(st == HORA_OK, "set %d allgather: enqueue returned %s: %s", s->id, hora_status_string(st), hora_last_error());
    /* Reducescatter of 2n+1 rows of 3 (uneven), AVG. */
    o.dims[0] = 2 * s->n + 1;
    o.dims[1] = 3;
    for (int i = 0; i < (2 * s->n + 1) * 3; i++) s->rs_send[i] = (double)(rank * 4 + i);
    st = hora_reducescatter_async("rs", s->rs_send, s->rs_recv, (size_t)((2 * s->n + 1) * 3), HORA_DTYPE_F64,
                                  HORA_OP_SUM, &o, &s->rs);
    CHECK(st == HORA_OK, "set %d reducescatter: enqueue returned %s: %s", s->id, hora_status_string(st),
          hora_last_error());
    /* Alltoall: (place + q) % 3 rows of 1 to member q. */
    size_t d0 = 0;
    for (int q = 0; q < s->n; q++) d0 += s->splits[q] = (size_t)((s->place + q) % 3);
    for (size_t j = 0; j < d0; j++) s->a2a_send[j] = rank * 1000 + (int)j;
    o.ndim = 0;
    st = hora_alltoall_async("a2a", s->a2a_send, d0, HORA_DTYPE_I32, s->splits, &o, &s->a2a);
    CHECK(st == HORA_OK, "set %d alltoall: enqueue returned %s: %s", s->id, hora_status_string(st), hora_last_error());
    st = hora_barrier_async("bar", &o, &s->bar);
    CHECK(st == HORA_OK, "set %d barrier: enqueue returned %s: %s", s->id, hora_status_string(st), hora_last_error());
    s->submitted = 1;
}

/* A result whose size the members decide (allgather, alltoall): its status, its at elements and its per-member
 * counts checked, and the data compared with want's int32s. Returns the counts (NULL when it failed). */
static const size_t *result_check(hora_request_t req, const char *what, const int32_t *want, size_t at)
{
    void *data = NULL;
    size_t total = 0;
    const size_t *rc = NULL;
    hora_status_t st = hora_request_result(req, &data, &total, &rc);
    CHECK(st == HORA_OK && total == at && rc, "%s: result %s, %zu elements, expected %zu", what, hora_status_string(st),
          total, at);
    if (st == HORA_OK && total == at && at) compare(what, data, want, at, HORA_DTYPE_I32);
    return rc;
}

static void sets_finish(struct set_run *s)
{
    char what[64];
    for (int t = 0; t < 3; t++) {
        snprintf(what, sizeof(what), "set %d allreduce x%d", s->id, t);
        if (wait_ok(s->ar[t], what)) {
            float want[64];
            for (int i = 0; i < 64; i++) {
                float acc = 0;
                for (int q = 0; q < s->n; q++) {
                    float v = sets_value(s->members[q], t, i);
                    acc = t == 1 ? (q == 0 || v > acc ? v : acc) : acc + v;
                }
                want[i] = acc;
            }
            compare(what, s->ar_buf[t], want, 64, HORA_DTYPE_F32);
        }
        hora_request_free(s->ar[t]);
    }
    snprintf(what, sizeof(what), "set %d broadcast", s->id);
    if (wait_ok(s->bc, what)) {
        int32_t want[6];
        for (int i = 0; i < 6; i++) want[i] = s->members[s->n - 1] * 1000 + i;
        compare(what, s->bc_buf, want, 6, HORA_DTYPE_I32);
    }
    hora_request_free(s->bc);
    snprintf(what, sizeof(what), "set %d allgather", s->id);
    if (wait_ok(s->ag, what)) {
        size_t at = 0;
        int32_t want[SETS_MAX * SETS_MAX * 2];
        for (int q = 0; q < s->n; q++)
            for (int i = 0; i < 2 * (q + 1); i++) want[at++] = s->members[q] * 100 + i;
        const size_t *rc = result_check(s->ag, what, want, at);
        for (int q = 0; rc && q < s->n; q++)
            CHECK(rc[q] == (size_t)(2 * (q + 1)), "%s: member %d gave %zu elements, expected %d", what, q, rc[q],
                  2 * (q + 1));
    }
    hora_request_free(s->ag);
    snprintf(what, sizeof(what), "set %d reducescatter", s->id);
    if (wait_ok(s->rs, what)) {
        size_t first, rows;
        double want[64];
        hora_shard((size_t)(2 * s->n + 1), s->n, s->place, &first, &rows);
        for (size_t i = 0; i < rows * 3; i++) {
            double acc = 0;
            for (int q = 0; q < s->n; q++) acc += (double)(s->members[q] * 4 + (int)(first * 3 + i));
            want[i] = acc;
        }
        compare(what, s->rs_recv, want, rows * 3, HORA_DTYPE_F64);
    }
    hora_request_free(s->rs);
    snprintf(what, sizeof(what), "set %d alltoall", s->id);
    if (wait_ok(s->a2a, what)) {
        size_t at = 0;
        int32_t want[SETS_MAX * 4];
        for (int q = 0; q < s->n; q++) {
            /* Member q sent (q + p) % 3 rows to each member p before this one. */
            size_t first = 0;
            for (int p = 0; p < s->place; p++) first += (size_t)((q + p) % 3);
            for (size_t j = 0; j < (size_t)((q + s->place) % 3); j++)
                want[at++] = s->members[q] * 1000 + (int)(first + j);
        }
        result_check(s->a2a, what, want, at);
    }
    hora_request_free(s->a2a);
    snprintf(what, sizeof(what), "set %d barrier", s->id);
    wait_ok(s->bar, what);
    hora_request_free(s->bar);
}

/* Create a set from members (in the order given), checked. */
static int sets_create(struct set_run *s, const int *members, int n, int want_id)
{
    memset(s, 0, sizeof(*s));
    hora_status_t st = hora_process_set_create(members, n, &s->id);
    CHECK(st == HORA_OK, "hora_process_set_create(%d ranks) returned %s: %s", n, hora_status_string(st),
          hora_last_error());
    if (st != HORA_OK) return 0;
    CHECK(s->id == want_id, "hora_process_set_create: id %d, expected %d", s->id, want_id);
    int size_in = 0;
    st = hora_process_set_info(s->id, &size_in, &s->place, s->members, SETS_MAX);
    s->n = size_in;
    CHECK(st == HORA_OK && size_in == n, "hora_process_set_info(%d): %s, size %d, expected %d", s->id,
          hora_status_string(st), size_in, n);
    for (int q = 1; q < s->n; q++)
        CHECK(s->members[q - 1] < s->members[q], "set %d: members not ascending (%d, %d)", s->id, s->members[q - 1],
              s->members[q]);
    int expect_place = -1;
    for (int q = 0; q < s->n; q++)
        if (s->members[q] == rank) expect_place = q;
    CHECK(s->place == expect_place, "set %d: this rank's place %d, expected %d", s->id, s->place, expect_place);
    return 1;
}

void mode_sets(void)
{
    if (!runtime_start("sets")) return;
    const char *static_sets = getenv("HORA_PROCESS_SETS");
    int next_id = 1;
    if (static_sets && *static_sets) {
        int n = 0, place = -5, ranks[4];
        hora_status_t st = hora_process_set_info(1, &n, &place, ranks, 4);
        CHECK(st == HORA_OK && n == 2 && ranks[0] == 0 && ranks[1] == 1 && place == (rank < 2 ? rank : -1),
              "HORA_PROCESS_SETS=%s: set 1 is %s, %d ranks, place %d", static_sets, hora_status_string(st), n, place);
        next_id = 2;
    }
    if (rank == 0) printf("test_async sets: %d ranks\n", size);
    struct set_run *sets = calloc(3, sizeof(*sets));
    int even[SETS_MAX], odd[SETS_MAX], ne = 0, no = 0;
    for (int r = 0; r < size; r++) {
        if (r % 2)
            odd[no++] = r;
        else
            even[ne++] = r;
    }
    const int ends[2] = {size - 1, 0};
    int ok = sets_create(&sets[0], even, ne, next_id) & sets_create(&sets[1], odd, no, next_id + 1) &
             sets_create(&sets[2], ends, 2, next_id + 2);
    if (!ok) {
        runtime_stop("sets");
        free(sets);
        return;
    }

    /* The world runs the same names at the same time. */
    float world[3][64];
    hora_request_t wreq[3];
    for (int t = 0; t < 3; t++) {
        char name[8];
        snprintf(name, sizeof(name), "x%d", t);
        for (int i = 0; i < 64; i++) world[t][i] = sets_value(rank, t, i);
        hora_status_t st =
            hora_allreduce_async(name, world[t], world[t], 64, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &wreq[t]);
        CHECK(st == HORA_OK, "world allreduce %s: %s: %s", name, hora_status_string(st), hora_last_error());
    }
    for (int k = 0; k < 3; k++)
        if (sets[k].place >= 0) sets_submit(&sets[k]);
    /* Odd ranks wait in the opposite order. */
    for (int k = 0; k < 3; k++) {
        struct set_run *s = &sets[rank % 2 ? 2 - k : k];
        if (s->submitted) sets_finish(s);
    }
    for (int t = 0; t < 3; t++) {
        char what[32];
        snprintf(what, sizeof(what), "world allreduce x%d", t);
        if (wait_ok(wreq[t], what)) {
            float want[64];
            for (int i = 0; i < 64; i++) {
                want[i] = 0;
                for (int r = 0; r < size; r++) want[i] += sets_value(r, t, i);
            }
            compare(what, world[t], want, 64, HORA_DTYPE_F32);
        }
        hora_request_free(wreq[t]);
    }

    /* Disjoint sets run concurrently: the even set's rank 0 arrives late
     * at its barrier; the odd set's barrier does not wait for it. */
    barrier();
    double t0 = test_now_s();
    if (rank == 0) test_sleep_s(0.5);
    {
        hora_opts_t o = sets_opts(sets[rank % 2].id);
        hora_request_t req;
        hora_status_t st = hora_barrier_async("late", &o, &req);
        CHECK(st == HORA_OK, "barrier 'late': %s", hora_status_string(st));
        if (st == HORA_OK) {
            wait_ok(req, "barrier 'late'");
            hora_request_free(req);
        }
        double took = test_now_s() - t0;
        if (rank % 2)
            CHECK(took < 0.4, "odd set's barrier took %.2f s: it waited for the even set's late rank", took);
        else
            CHECK(took >= 0.45, "even set's barrier took %.2f s, before its late rank 0 arrived", took);
    }

    /* Refusals at the call. */
    {
        float x[4] = {0};
        hora_request_t req = REQ_SENTINEL;
        const struct set_run *outside = &sets[rank % 2 ? 0 : 1];
        if (outside->n > 0) {
            hora_opts_t o = sets_opts(outside->id);
            hora_status_t st = hora_allreduce_async("out", x, x, 4, HORA_DTYPE_F32, HORA_OP_SUM, &o, &req);
            CHECK(st == HORA_ERR_INVALID_ARG && req == REQ_SENTINEL && strstr(hora_last_error(), "not a member"),
                  "a request on set %d this rank is not in: %s '%s', expected HORA_ERR_INVALID_ARG", outside->id,
                  hora_status_string(st), hora_last_error());
        }
        hora_opts_t o = sets_opts(99);
        hora_status_t st = hora_allreduce_async("unknown", x, x, 4, HORA_DTYPE_F32, HORA_OP_SUM, &o, &req);
        CHECK(st == HORA_ERR_INVALID_ARG && strstr(hora_last_error(), "does not exist"),
              "a request on set 99: %s '%s', expected HORA_ERR_INVALID_ARG", hora_status_string(st), hora_last_error());
        o = sets_opts(sets[2].id);
        if (sets[2].place >= 0) {
            st = hora_broadcast_async("bc.root", x, 4, HORA_DTYPE_F32, 1 % size == 0 ? 0 : 1, &o, &req);
            if (size > 2)
                CHECK(st == HORA_ERR_INVALID_ARG && strstr(hora_last_error(), "not a member"),
                      "a broadcast on set %d from rank 1, not a member: %s '%s'", sets[2].id, hora_status_string(st),
                      hora_last_error());
            else if (st == HORA_OK)
                wait_ok(req, "broadcast on {1, 0}"), hora_request_free(req);
        }
    }
    /* A mismatch inside a set names world ranks. */
    if (sets[2].place >= 0) {
        hora_opts_t o = sets_opts(sets[2].id);
        double d[2] = {0};
        hora_request_t req;
        hora_status_t st =
            hora_allreduce_async("mm", d, d, 2, rank == 0 ? HORA_DTYPE_F32 : HORA_DTYPE_F64, HORA_OP_SUM, &o, &req);
        CHECK(st == HORA_OK, "mismatch request: %s", hora_status_string(st));
        if (st == HORA_OK) {
            st = hora_wait(req);
            char want[64];
            snprintf(want, sizeof(want), "rank %d has f64", size - 1);
            CHECK(st == HORA_ERR_MISMATCH && strstr(request_message(req), "rank 0 has f32") &&
                      strstr(request_message(req), want),
                  "a dtype mismatch on set %d: %s '%s', expected HORA_ERR_MISMATCH naming world ranks 0 and %d",
                  sets[2].id, hora_status_string(st), request_message(req), size - 1);
            hora_request_free(req);
        }
    }
    /* Creation with different lists fails on every rank alike. */
    {
        int mine[1] = {rank == 0 ? 0 : size - 1}, id = -1;
        hora_status_t st = hora_process_set_create(mine, 1, &id);
        CHECK(st == HORA_ERR_MISMATCH && id == -1,
              "hora_process_set_create with different lists: %s, id %d, expected HORA_ERR_MISMATCH",
              hora_status_string(st), id);
        int twice[2] = {0, 0};
        st = hora_process_set_create(twice, 2, &id);
        CHECK(st == HORA_ERR_INVALID_ARG && strstr(hora_last_error(), "twice"),
              "hora_process_set_create({0, 0}): %s '%s', expected HORA_ERR_INVALID_ARG", hora_status_string(st),
              hora_last_error());
    }
    /* Free the odd set: refused afterwards; a new set takes a new id. */
    {
        int odd_id = sets[1].id;
        hora_status_t st = hora_process_set_free(odd_id);
        CHECK(st == HORA_OK, "hora_process_set_free(%d): %s: %s", odd_id, hora_status_string(st), hora_last_error());
        float x[1] = {0};
        hora_request_t req;
        hora_opts_t o = sets_opts(odd_id);
        st = hora_allreduce_async("freed", x, x, 1, HORA_DTYPE_F32, HORA_OP_SUM, &o, &req);
        CHECK(st == HORA_ERR_INVALID_ARG, "a request on freed set %d: %s", odd_id, hora_status_string(st));
        int all[SETS_MAX], id = -1;
        for (int r = 0; r < size; r++) all[r] = r;
        st = hora_process_set_create(all, size, &id);
        /* next_id + 3 went to the failed creation with different lists. */
        CHECK(st == HORA_OK && id > next_id + 2, "a new set after a free: %s, id %d (ids are never reused)",
              hora_status_string(st), id);
        if (st == HORA_OK) {
            x[0] = (float)rank;
            o = sets_opts(id);
            st = hora_allreduce_async("again", x, x, 1, HORA_DTYPE_F32, HORA_OP_SUM, &o, &req);
            if (st == HORA_OK && wait_ok(req, "allreduce on the new set")) {
                CHECK(x[0] == (float)(size * (size - 1) / 2), "allreduce on the new set: %g", x[0]);
                hora_request_free(req);
            }
        }
    }
    /* Sets left over are freed by hora_shutdown. */
    runtime_stop("sets");
    /* HORA_TIMELINE: each set's lowest member wrote one beside the world's. */
    const char *tl = getenv("HORA_TIMELINE");
    for (int k = 0; tl && *tl && k < 3; k++) {
        if (sets[k].place != 0) continue;
        char path[600];
        snprintf(path, sizeof(path), "%s.set%d", tl, sets[k].id);
        char *text = test_read_file(path, NULL);
        CHECK(text && strstr(text, "\"rs\"") && strstr(text, "\"a2a\"") && strstr(text, "ALLREDUCE"),
              "set %d's timeline %s: %s", sets[k].id, path, text ? "lacks its requests" : "missing");
        free(text);
    }
    free(sets);
}
