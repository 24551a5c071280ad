/* coord_cycle.c - the coordinator thread's cycle (coord.c starts and stops
 * the thread; coord_queue.c is the queue between it and the application).
 *
 * Each cycle (HORA_CYCLE_TIME_MS) every rank:
 *  1. takes the requests framework threads enqueued since the last cycle;
 *     a request the response cache (coord_cache.c) knows (same name, same
 *     parameters) waits on the cache path under its cache id, any other goes
 *     to the slow path;
 *  2. joins ONE agreement on a bit vector (coord_agree.c: a bitwise-OR
 *     all-reduce on the coordinator's channel with the collectives' deadline,
 *     ANDs complemented; a process set's: a star of MPI messages): an AND part (bit i:
 *     "cache entry i is ready here, or I have joined"), an OR part (bit i:
 *     "some rank really requested i"), another OR part (bit i: "entry i is
 *     invalid: some rank submitted that name with other parameters, or waited
 *     on it too long") and flag words (AND: "I have nothing for the slow path";
 *     OR: "rank 0 has new autotune settings", "I am shutting down");
 *  3. runs, in cache-id order, the entries ready everywhere: no gather, no
 *     broadcast (the fast path), fused as coord_fuse.c plans;
 *  4. only when some rank has uncached requests: hands the request lists to
 *     rank 0, which merges them into its table, validates, orders and fuses
 *     what became ready everywhere and gives every rank the response list
 *     (the slow path, coord_table.c; its exchange coord_slow.c, with the
 *     same deadline); every rank then runs it in the same order
 *     (coord_exec.c).
 * Everything a rank does to its cache depends only on the responses, which
 * are identical everywhere, so cache ids agree without ever being sent. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/status.h"
#include "coord/autotune.h"
#include "coord/coord_agree.h"
#include "coord/coord_core.h"
#include "coord/coord_cycle.h"
#include "coord/coord_exec.h"
#include "coord/coord_fuse.h"
#include "coord/coord_queue.h"
#include "coord/coord_slow.h"
#include "coord/coord_flight.h"
#include "coord/stack.h"
#include "coord/straggler.h"
#include "coord/timeline.h"

#define COORD_FLAG_NOTHING_UNCACHED 1ull /* AND word */
#define COORD_FLAG_SETTINGS 1ull         /* OR word */
/* OR word: some rank called hora_shutdown. Every coordinator stops in that
 * cycle: a request that needs the stopping rank could never complete, and
 * waiting for every rank to agree kept a failed rank's peers waiting for
 * their gradients while it waited in hora_shutdown. */
#define COORD_FLAG_STOP 2ull

static int coord_meta_equal(const struct coord_meta *a, const struct coord_meta *b)
{
    return !memcmp(a, b, sizeof(*a));
}

static void coord_take_incoming(struct coord *c, int *stop)
{
    pthread_mutex_lock(&c->queue.lock);
    struct hora_request *list = c->queue.incoming;
    c->queue.incoming = c->queue.incoming_tail = NULL;
    *stop = c->queue.stop_requested;
    pthread_mutex_unlock(&c->queue.lock);

    for (struct hora_request *req = list, *next; req; req = next) {
        next = req->next;
        req->cache_id = -1;
        if (coord_map_put(&c->pending, req->name, req)) {
            coord_queue_complete(&c->queue, req, HORA_ERR_NO_MEMORY, "out of memory in the coordinator");
            continue;
        }
        if (req->meta.kind == COORD_KIND_JOIN) {
            c->joined = 1;
            c->join_req = req;
            coord_fifo_push(&c->uncached, req);
            continue;
        }
        int id = -1;
        if (c->cache.capacity > 0 && !req->group && coord_kind_cacheable(req->meta.kind))
            id = coord_cache_lookup(&c->cache, req->name);
        if (id < 0) {
            coord_fifo_push(&c->uncached, req);
            continue;
        }
        if (!coord_meta_equal(&c->cache.entries[id].meta, &req->meta)) {
            /* Parameters changed: the entry is invalidated on every rank. */
            c->vec[2 * c->words + id / 64] |= 1ull << (id % 64);
            coord_fifo_push(&c->uncached, req);
            continue;
        }
        if (coord_cache_wait(&c->cache, req, id, coord_now_us())) coord_fifo_push(&c->uncached, req);
    }
}

static void coord_fail_everything(struct coord *c, hora_status_t status, const char *why)
{
    pthread_mutex_lock(&c->queue.lock);
    c->queue.stopped = 1;
    c->queue.stop_status = status;
    snprintf(c->queue.stop_reason, sizeof(c->queue.stop_reason), "%s", why);
    struct hora_request *list = c->queue.incoming;
    c->queue.incoming = c->queue.incoming_tail = NULL;
    pthread_mutex_unlock(&c->queue.lock);
    for (struct hora_request *req = list, *next; req; req = next) {
        next = req->next;
        coord_queue_complete(&c->queue, req, status, why);
    }
    /* Everything still pending here, whichever path it waited on. */
    for (size_t b = 0; b < c->pending.bucket_count; b++)
        for (struct coord_map_node *n = c->pending.buckets[b]; n; n = n->next)
            coord_queue_complete(&c->queue, n->value, status, why);
    coord_cache_unwait_all(&c->cache);
    c->uncached.head = c->uncached.tail = NULL;
    c->join_req = NULL;
    coord_flight_fail(c, status);
}

static void coord_apply_settings(struct coord *c, const struct coord_settings *s)
{
    c->settings = *s;
    log_info("coordinator settings: fusion threshold %zu B, cycle %.3g ms, chunk %zu B", s->fusion_threshold,
             s->cycle_time_ms, s->chunk_bytes);
}

/* One cycle, under cycle_lock; the nap follows it. Returns 0 to go on, 1
 * when the coordinator must stop. */
static int coord_cycle(struct coord *c, int64_t start_us)
{
    const int W = c->words;
    int stop = 0;
    struct coord_responses list = {0};
    hora_status_t status = HORA_OK;

    if (c->mark_cycles) timeline_instant(c->tl, "cycles", "CYCLE_START", -1, NULL);
    memset(c->vec, 0, (size_t)(3 * W + 2) * sizeof(uint64_t));
    coord_take_incoming(c, &stop);
    stack_channel_poll(c->stacks, start_us);
    /* A rank aborted (this one, or a peer whose notice has come): stop now,
     * without the others. */
    status = coll_check_abort(c->coll);
    if (status < 0) {
        coord_flight_dump(c, "abort");
        coord_fail_everything(c, status, hora_last_error());
        return 1;
    }
    /* A request waiting on the cache path too long is demoted to the slow path
     * (via invalidation) so rank 0's stall inspector can see who is missing. */
    for (int i = 0; i < c->cache.waiting; i++) {
        struct hora_request *req = c->cache.waiters[i];
        if (start_us - req->cached_since_us > c->demote_us)
            c->vec[2 * W + req->cache_id / 64] |= 1ull << (req->cache_id % 64);
    }
    for (int i = 0; i < c->cache.waiting; i++) {
        int id = c->cache.waiters[i]->cache_id;
        c->vec[id / 64] |= 1ull << (id % 64);
        c->vec[W + id / 64] |= 1ull << (id % 64);
    }
    /* A joined rank is ready for every cached allreduce (it contributes
     * zeros). Nothing else runs while a rank has joined: it evicts the other
     * entries, so their requests go to rank 0, which refuses them. */
    if (c->joined)
        for (int id = 0; id < c->cache.capacity; id++)
            if (c->cache.entries[id].valid) {
                int word = (c->cache.entries[id].meta.kind == COORD_KIND_ALLREDUCE ? 0 : 2 * W) + id / 64;
                c->vec[word] |= 1ull << (id % 64);
            }
    int slow = c->uncached.head != NULL;
    /* Rank 0 sees stalls only in the slow path: while names wait in its table,
     * force one now and then even when nobody has anything new. */
    if (c->rank == 0 && coord_table_inspect_due(&c->table, start_us, coord_inspect_period_us(c))) slow = 1;
    c->vec[3 * W] = slow ? 0 : COORD_FLAG_NOTHING_UNCACHED;
    c->vec[3 * W + 1] = (c->settings_changed ? COORD_FLAG_SETTINGS : 0) | (stop ? COORD_FLAG_STOP : 0);

    straggler_fill(c->straggler, c->vec, c->sync_us);

    status = coord_allreduce_bits(c);
    if (status < 0) {
        coord_fail_everything(c, status, hora_last_error());
        return 1;
    }
    c->sync_us = coord_now_us();
    straggler_collect(c->straggler, c->vec, c->sync_us, c->tl);
    if (c->vec[3 * W + 1] & COORD_FLAG_STOP) {
        coord_fail_everything(c, HORA_ERR_SHUTDOWN,
                              stop ? "hora_shutdown was called"
                                   : "another rank called hora_shutdown before this request ran on every rank");
        return 1;
    }
    /* Invalidations first: their waiters move to the slow path (next cycle). */
    for (int id = 0; id < c->cache.capacity; id++)
        if (c->vec[2 * W + id / 64] >> (id % 64) & 1) coord_cache_evict(&c->cache, id, &c->uncached);
    /* Fast path: entries ready on every rank and really requested by one. */
    for (int id = 0; id < c->cache.capacity; id++) {
        uint64_t bit = 1ull << (id % 64);
        if (!(c->vec[id / 64] & c->vec[W + id / 64] & bit) || !c->cache.entries[id].valid) continue;
        struct coord_response *r = coord_responses_add(&list);
        if (!r || !(r->names = calloc(1, sizeof(char *))) || !(r->metas = calloc(1, sizeof(struct coord_meta))) ||
            !(r->names[0] = strdup(c->cache.entries[id].name))) {
            coord_responses_clear(&list);
            coord_fail_everything(c, HORA_ERR_NO_MEMORY, "coordinator: out of memory");
            return 1;
        }
        r->kind = c->cache.entries[id].meta.kind;
        r->ntensors = 1;
        r->metas[0] = c->cache.entries[id].meta;
        r->cache_id = id;
    }
    coord_fuse_list(c->settings.fusion_threshold, &list);
    if (!(c->vec[3 * W] & COORD_FLAG_NOTHING_UNCACHED)) {
        struct coord_responses slow = {0};
        status = coord_slow_path(c, &slow);
        if (status < 0) {
            coord_responses_clear(&list);
            coord_responses_clear(&slow);
            coord_fail_everything(c, status, hora_last_error());
            return 1;
        }
        for (int i = 0; i < slow.count; i++) {
            struct coord_response *r = coord_responses_add(&list);
            if (!r) {
                coord_responses_clear(&slow);
                coord_responses_clear(&list);
                coord_fail_everything(c, HORA_ERR_NO_MEMORY, "coordinator: out of memory");
                return 1;
            }
            *r = slow.items[i];
        }
        free(slow.items);
    }
    if (c->vec[3 * W + 1] & COORD_FLAG_SETTINGS) {
        /* Every rank must fuse and chunk alike from here on: a rank that
         * missed the new settings cannot go on. */
        struct coord_settings s = c->next_settings;
        status = coord_slow_settings(c, &s);
        c->settings_changed = 0;
        if (status < 0) {
            coord_responses_clear(&list);
            coord_fail_everything(c, status, hora_last_error());
            return 1;
        }
        coord_apply_settings(c, &s);
    }

    c->cycle_bytes = 0;
    int finished = 0;
    coord_flight_negotiated(c, &list);
    for (int i = 0; i < list.count && !finished; i++) {
        if (list.items[i].kind == COORD_KIND_SHUTDOWN) {
            coord_flight_dump(c, "shutdown");
            coord_fail_everything(c, HORA_ERR_SHUTDOWN, list.items[i].error ? list.items[i].error : "shut down");
            finished = 1;
            break;
        }
        status = coord_execute(c, &list.items[i]);
        if (status < 0) {
            coord_fail_everything(c, status, hora_last_error());
            finished = 1;
        }
    }
    coord_responses_clear(&list);
    if (finished) return 1;

    int64_t end_us = coord_now_us();
    if (c->at && c->cycle_bytes && !c->settings_changed) {
        struct autotune_params next;
        if (autotune_record(c->at, c->cycle_bytes, (double)(end_us - start_us) * 1e-6, &next)) {
            c->next_settings.fusion_threshold = next.fusion_threshold;
            c->next_settings.cycle_time_ms = next.cycle_time_ms;
            c->next_settings.chunk_bytes = next.chunk_bytes;
            c->settings_changed = 1;
        }
    }
    return 0;
}

void *coord_cycle_main(void *arg)
{
    struct coord *c = arg;
    for (;;) {
        /* Between two cycles, in the nap, the timeline may change hands
         * (coord_timeline_swap): nothing writes to it then. */
        pthread_mutex_lock(&c->cycle_lock);
        const uint64_t swaps_done = c->swaps_done;
        while (atomic_load(&c->swaps_waiting) && c->swaps_done == swaps_done)
            pthread_cond_wait(&c->cycle_cond, &c->cycle_lock);
        const int64_t start_us = coord_now_us();
        const int stop = coord_cycle(c, start_us);
        pthread_mutex_unlock(&c->cycle_lock);
        if (stop) break;
        coord_queue_nap(&c->queue, start_us, coord_inspect_period_us(c), (int64_t)(c->settings.cycle_time_ms * 1000.0),
                        c->pending.count > 0 || coord_table_busy(&c->table), c->sync_us);
    }
    return NULL;
}
