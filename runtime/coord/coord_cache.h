/* coord_cache.h - the response cache (coord_cache.c): the parameters of
 * names that ran before, under ids that agree on every rank without ever
 * being sent, and the requests waiting on the fast path under those ids.
 * Its state is struct coord_cache, which only coord_cache.c changes; the
 * cycle reads its entries and its waiters. */
#ifndef HORA_COORD_CACHE_H
#define HORA_COORD_CACHE_H

#include <stdint.h>

#include "coord/coord_map.h"
#include "coord/coord_request.h"

struct coord_cache_entry {
    int valid;
    char *name;
    struct coord_meta meta;
    uint64_t last_used;
};

struct coord_cache {
    struct coord_cache_entry *entries; /* [capacity] */
    int capacity;                      /* HORA_CACHE_CAPACITY, 0: off */
    struct coord_map index;            /* name -> id + 1 */
    uint64_t tick;
    /* The requests waiting on the cache path (req->cache_id >= 0). */
    struct hora_request **waiters;
    int waiting, waiters_cap;
};

/* 0, or -1 out of memory (then coord_cache_free). */
int coord_cache_init(struct coord_cache *cache, int capacity);
void coord_cache_free(struct coord_cache *cache);

/* The id of a valid entry named name, or -1. */
int coord_cache_lookup(const struct coord_cache *cache, const char *name);
/* Called for every successful response from the slow path, on every rank in
 * the same order: the same entries get the same ids everywhere. The least
 * recently used entry makes room; its waiters go to demoted. */
void coord_cache_store(struct coord_cache *cache, const char *name, const struct coord_meta *meta,
                       struct coord_fifo *demoted);
/* Drop entry id; requests waiting on it go to demoted (the slow path). */
void coord_cache_evict(struct coord_cache *cache, int id, struct coord_fifo *demoted);

/* req waits on entry id from now_us; -1 out of memory (then it does not). */
int coord_cache_wait(struct coord_cache *cache, struct hora_request *req, int id, int64_t now_us);
/* req stops waiting on the cache path (it completes). */
void coord_cache_unwait(struct coord_cache *cache, struct hora_request *req);
/* Every waiter stops waiting (the coordinator failed them all). */
void coord_cache_unwait_all(struct coord_cache *cache);

#endif
