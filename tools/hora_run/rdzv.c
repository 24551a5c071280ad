/* rdzv.c - the rendezvous of hosts (rdzv.h).
 *
 * A generation G is formed through keys "gen<G>/...": "join" counts the
 * hosts in (boot_store_count: the count is the host's join index + 1, the
 * mark "join#N" what the others wait on), "nproc/<i>" is host i's K,
 * "order/<i>" its place in the node order: its join index, or (hora-run
 * --elastic) its number in the job, so that the hosts that were there
 * before keep the low node ranks, and their places when more than MAX
 * came: a newcomer comes after them. "close" elects the host that closes
 * the round (the first to add 1), which writes "joined" = J, the join
 * count then, "closed" = N, the number of hosts in the generation (J, at
 * most MAX), "max_nodes" = MAX and "current" = G. Of the J, the first N in
 * node order form the generation; the others, and the hosts that count in
 * after the round closed, are late. "expect", when a failed generation
 * G - 1 wrote it, is how many hosts to wait for instead of MAX (hora-run.c's
 * post_failure); with --elastic the round also waits for "back", the count
 * of the hosts that come back from G - 1 with their workers, to reach
 * "expect_back" (post_failure) or G - 1's N, and a host that is not in a
 * running generation with N = MAX waits for its end before it counts itself
 * into the next one (rdzv_full). Late hosts go on to G + 1, which forms
 * only once G is "over" (set to "failed" with the first failure, "done"
 * when every worker exited 0): they wait for that within their join
 * timeout. */
#include "rdzv.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"

#define RDZV_SLICE_S 0.25

void rdzv_key(char *out, size_t bytes, int generation, const char *name)
{
    snprintf(out, bytes, "gen%d/%s", generation, name);
}

hora_status_t rdzv_get(boot_store_t *store, const char *key, double timeout_s, volatile sig_atomic_t *stop,
                       void **value)
{
    double deadline = boot_now_s() + timeout_s;
    for (;;) {
        if (stop && *stop) return status_set(HORA_ERR_SHUTDOWN, "hora-run: stopped by a signal");
        double left = deadline - boot_now_s();
        double slice = left < RDZV_SLICE_S ? left : RDZV_SLICE_S;
        hora_status_t status = boot_store_get(store, key, slice > 0 ? slice : 0, value, NULL);
        if (status != HORA_ERR_TIMEOUT || left <= RDZV_SLICE_S) return status;
    }
}

static hora_status_t get_int(boot_store_t *store, const char *key, double timeout_s, volatile sig_atomic_t *stop,
                             int64_t *out)
{
    void *v = NULL;
    HORA_CHECK(rdzv_get(store, key, timeout_s, stop, &v));
    char *end;
    long long x = strtoll(v, &end, 10);
    int bad = end == (char *)v || *end;
    free(v);
    if (bad) return status_set(HORA_ERR_CORRUPT, "hora-run: store key '%s' does not hold a number", key);
    *out = x;
    return HORA_OK;
}

static hora_status_t set_int(boot_store_t *store, const char *key, int64_t x)
{
    char text[32];
    int n = snprintf(text, sizeof(text), "%" PRId64, x);
    return boot_store_set(store, key, text, (size_t)n);
}

hora_status_t rdzv_first_generation(boot_store_t *store, int *generation)
{
    int found;
    void *v = NULL;
    HORA_CHECK(boot_store_try_get(store, "current", &found, &v, NULL));
    *generation = found ? atoi(v) + 1 : 0;
    free(v);
    return HORA_OK;
}

/* Wait, within the deadline, until generation g - 1 is over (it forms g):
 * a host that came late waits here while g - 1 runs without it.
 * HORA_ERR_SHUTDOWN when g - 1 finished the job. */
static hora_status_t rdzv_wait_over(boot_store_t *store, const rdzv_opts_t *o, int g, double deadline, int full)
{
    char over[128];
    void *v = NULL;
    int found;
    rdzv_key(over, sizeof(over), g - 1, "over");
    HORA_CHECK(boot_store_try_get(store, over, &found, &v, NULL));
    free(v);
    v = NULL;
    if (!found)
        fprintf(stderr, "hora-run: generation %d runs without this host%s; waiting for generation %d\n", g - 1,
                full ? " and has its --nnodes MAX hosts (this host counts itself in once it ends)" : "", g);
    double left = deadline - boot_now_s();
    hora_status_t status = rdzv_get(store, over, left > 0 ? left : 0, o->stop, &v);
    if (status == HORA_ERR_TIMEOUT)
        return status_set(HORA_ERR_TIMEOUT,
                          "hora-run: generation %d still runs without this host, which waited %g s for the "
                          "next one (--join-timeout)",
                          g - 1, o->join_timeout_s);
    HORA_CHECK(status);
    int done = strcmp(v, "done") == 0;
    free(v);
    if (done)
        return status_set(HORA_ERR_SHUTDOWN, "hora-run: generation %d finished the job before this host joined", g - 1);
    return HORA_OK;
}

/* --elastic: *full 1 when generation g runs (not over) with the MAX hosts
 * its closer allowed. A host that is not in it then waits for its end
 * before it counts itself into g + 1's join: the workers read that count
 * as hosts waiting (hora_elastic_check) and would end g for a host that
 * cannot be taken in, again at every check. */
static hora_status_t rdzv_full(boot_store_t *store, int g, int *full)
{
    static const char *const names[] = {"closed", "max_nodes", "over"};
    int found[3];
    int64_t value[2] = {0, 0};
    for (int i = 0; i < 3; i++) {
        char key[128];
        void *v = NULL;
        rdzv_key(key, sizeof(key), g, names[i]);
        HORA_CHECK(boot_store_try_get(store, key, &found[i], &v, NULL));
        if (found[i] && i < 2) value[i] = strtoll(v, NULL, 10);
        free(v);
    }
    *full = found[0] && found[1] && !found[2] && value[0] >= value[1];
    return HORA_OK;
}

/* --elastic: how many hosts of generation g - 1 come back to g with their
 * workers: "expect_back" when hora-run posted g - 1's failure (its hosts
 * less the one lost or left), else (the workers ended g - 1 on purpose)
 * every host of g - 1. */
static hora_status_t rdzv_back_expected(boot_store_t *store, int g, int64_t *back)
{
    char key[128];
    int found;
    void *v = NULL;
    rdzv_key(key, sizeof(key), g, "expect_back");
    HORA_CHECK(boot_store_try_get(store, key, &found, &v, NULL));
    if (!found) {
        rdzv_key(key, sizeof(key), g - 1, "closed");
        HORA_CHECK(boot_store_try_get(store, key, &found, &v, NULL));
    }
    *back = found ? strtoll(v, NULL, 10) : 0;
    free(v);
    return HORA_OK;
}

/* One generation: HORA_OK and world filled, or HORA_IN_PROGRESS when this
 * host is late for it. returning: this host comes back from g - 1
 * (--elastic, with its live workers). */
static hora_status_t rdzv_join_one(boot_store_t *store, const rdzv_opts_t *o, int g, int returning, double deadline,
                                   rdzv_world_t *world)
{
    char key[128], mark[160];
    int64_t index1, n;
    if (o->order_key >= 0 && g > 0) {
        int full;
        HORA_CHECK(rdzv_full(store, g - 1, &full));
        if (full) HORA_CHECK(rdzv_wait_over(store, o, g, deadline, 1));
    }
    rdzv_key(key, sizeof(key), g, "join");
    HORA_CHECK(boot_store_count(store, key, &index1));
    int me = (int)index1 - 1;
    snprintf(mark, sizeof(mark), "nproc/%d", me);
    char nkey[192];
    rdzv_key(nkey, sizeof(nkey), g, mark);
    HORA_CHECK(set_int(store, nkey, o->nproc));
    snprintf(mark, sizeof(mark), "order/%d", me);
    rdzv_key(nkey, sizeof(nkey), g, mark);
    HORA_CHECK(set_int(store, nkey, o->order_key >= 0 ? o->order_key : me));
    if (returning) {
        rdzv_key(nkey, sizeof(nkey), g, "back");
        HORA_CHECK(boot_store_count(store, nkey, NULL));
    }
    /* Past MAX in the join order: late (in the elastic order a host that
     * came later may still be left out in its favour). */
    if (o->order_key < 0 && me >= o->max_nodes) return HORA_IN_PROGRESS;
    void *v = NULL;
    double left;
    hora_status_t status;
    /* Generation g forms only once g - 1 is over. */
    if (g > 0) HORA_CHECK(rdzv_wait_over(store, o, g, deadline, 0));
    /* MIN hosts, within the join timeout. */
    snprintf(mark, sizeof(mark), "%s#%d", key, o->min_nodes);
    left = deadline - boot_now_s();
    status = rdzv_get(store, mark, left > 0 ? left : 0, o->stop, &v);
    free(v);
    if (status == HORA_ERR_TIMEOUT) {
        HORA_CHECK(boot_store_add(store, key, 0, &n)); /* how many came, for the message */
        return status_set(HORA_ERR_TIMEOUT,
                          "hora-run: generation %d: %" PRId64 " of %d hosts joined within %g s (--nnodes %d:%d, "
                          "--join-timeout)",
                          g, n, o->min_nodes, o->join_timeout_s, o->min_nodes, o->max_nodes);
    }
    HORA_CHECK(status);
    /* Then up to the settle time for MAX hosts, or for those a failed
     * generation said to expect (a round of MIN:MIN closes now). In the
     * elastic order that may be more than MAX: every host expected must be
     * in before the round closes, so that the ones that were there are
     * chosen before the newcomers. */
    int target = o->max_nodes, found;
    char ekey[128];
    rdzv_key(ekey, sizeof(ekey), g, "expect");
    HORA_CHECK(boot_store_try_get(store, ekey, &found, &v, NULL));
    if (found) {
        int expect = atoi(v);
        int most = o->order_key >= 0 ? INT_MAX : o->max_nodes;
        target = expect < o->min_nodes ? o->min_nodes : expect > most ? most : expect;
    }
    free(v);
    double settle_end = boot_now_s() + o->settle_s;
    if (target > o->min_nodes) {
        snprintf(mark, sizeof(mark), "%s#%d", key, target);
        v = NULL;
        status = rdzv_get(store, mark, o->settle_s, o->stop, &v);
        free(v);
        if (status != HORA_ERR_TIMEOUT) HORA_CHECK(status);
    }
    /* --elastic: and for every host that comes back from g - 1 (at least
     * a second): a newcomer that counted in after g - 1 ended must not
     * take the place "expect" kept for one of them, whose workers wait for
     * their places in g. */
    int64_t back = 0;
    if (o->order_key >= 0 && g > 0) HORA_CHECK(rdzv_back_expected(store, g, &back));
    if (back > 0) {
        char bkey[128];
        rdzv_key(bkey, sizeof(bkey), g, "back");
        snprintf(mark, sizeof(mark), "%s#%" PRId64, bkey, back);
        left = (o->settle_s < 1 ? settle_end - o->settle_s + 1 : settle_end) - boot_now_s();
        v = NULL;
        status = rdzv_get(store, mark, left > 0 ? left : 0, o->stop, &v);
        free(v);
        if (status != HORA_ERR_TIMEOUT) HORA_CHECK(status);
    }
    /* The first to get here closes the round. */
    char ckey[128], closed[128], joined[128], max_key[128];
    rdzv_key(ckey, sizeof(ckey), g, "close");
    rdzv_key(closed, sizeof(closed), g, "closed");
    rdzv_key(joined, sizeof(joined), g, "joined");
    rdzv_key(max_key, sizeof(max_key), g, "max_nodes");
    int64_t first, j;
    HORA_CHECK(boot_store_add(store, ckey, 1, &first));
    if (first == 1) {
        HORA_CHECK(boot_store_add(store, key, 0, &j));
        HORA_CHECK(set_int(store, joined, j));
        HORA_CHECK(set_int(store, closed, j > o->max_nodes ? o->max_nodes : j));
        HORA_CHECK(set_int(store, max_key, o->max_nodes));
        HORA_CHECK(set_int(store, "current", g));
    }
    HORA_CHECK(get_int(store, joined, BOOT_STORE_REPLY_S, o->stop, &j));
    HORA_CHECK(get_int(store, closed, BOOT_STORE_REPLY_S, o->stop, &n));
    if (me >= j) return HORA_IN_PROGRESS;
    /* The J hosts in when the round closed, in node order (order, then join
     * index): the first N are the generation; a host's node rank is how
     * many come before it, its first rank the sum of their K. */
    int64_t my_order = o->order_key >= 0 ? o->order_key : me;
    int64_t *k = calloc((size_t)j, sizeof(int64_t)), *order = calloc((size_t)j, sizeof(int64_t));
    if (!k || !order) {
        free(k);
        free(order);
        return status_set(HORA_ERR_NO_MEMORY, "hora-run: out of memory");
    }
    hora_status_t status_keys = HORA_OK;
    int node_rank = 0;
    for (int i = 0; i < (int)j && status_keys == HORA_OK; i++) {
        snprintf(mark, sizeof(mark), "nproc/%d", i);
        rdzv_key(nkey, sizeof(nkey), g, mark);
        status_keys = get_int(store, nkey, BOOT_STORE_REPLY_S, o->stop, &k[i]);
        snprintf(mark, sizeof(mark), "order/%d", i);
        rdzv_key(nkey, sizeof(nkey), g, mark);
        if (status_keys == HORA_OK) status_keys = get_int(store, nkey, BOOT_STORE_REPLY_S, o->stop, &order[i]);
        if (order[i] < my_order || (order[i] == my_order && i < me)) node_rank++;
    }
    int base = 0, size = 0;
    for (int i = 0; i < (int)j && status_keys == HORA_OK; i++) {
        int place = 0; /* host i's place in the node order */
        for (int x = 0; x < (int)j; x++) place += order[x] < order[i] || (order[x] == order[i] && x < i);
        if (place < n) size += (int)k[i];
        if (place < node_rank) base += (int)k[i];
    }
    free(k);
    free(order);
    HORA_CHECK(status_keys);
    if (node_rank >= n) return HORA_IN_PROGRESS;
    *world = (rdzv_world_t){
        .generation = g, .node_rank = node_rank, .node_count = (int)n, .rank_base = base, .world_size = size};
    return HORA_OK;
}

hora_status_t rdzv_join(boot_store_t *store, const rdzv_opts_t *opts, int generation, rdzv_world_t *world)
{
    double deadline = boot_now_s() + opts->join_timeout_s;
    for (int g = generation;; g++) {
        hora_status_t status = rdzv_join_one(store, opts, g, opts->returning && g == generation, deadline, world);
        if (status != HORA_IN_PROGRESS) return status;
        fprintf(stderr,
                "hora-run: generation %d formed without this host (it closed before this host joined, or had its "
                "--nnodes MAX hosts); waiting for generation %d\n",
                g, g + 1);
    }
}
