/* coord_cache.c - the response cache: entries by name, least recently used
 * replaced first. Everything a rank does to its cache depends only on the
 * responses, which are identical everywhere, so cache ids agree without
 * ever being sent. */
#include <stdlib.h>
#include <string.h>

#include "coord/coord_cache.h"

int coord_cache_init(struct coord_cache *cache, int capacity)
{
    cache->capacity = capacity;
    cache->entries = calloc((size_t)(capacity ? capacity : 1), sizeof(*cache->entries));
    if (!cache->entries || coord_map_init(&cache->index, 1024)) return -1;
    return 0;
}

void coord_cache_free(struct coord_cache *cache)
{
    for (int id = 0; cache->entries && id < cache->capacity; id++) free(cache->entries[id].name);
    free(cache->entries);
    free(cache->waiters);
    coord_map_free(&cache->index);
    memset(cache, 0, sizeof(*cache));
}

int coord_cache_lookup(const struct coord_cache *cache, const char *name)
{
    return (int)(uintptr_t)coord_map_get(&cache->index, name) - 1;
}

void coord_cache_evict(struct coord_cache *cache, int id, struct coord_fifo *demoted)
{
    struct coord_cache_entry *e = &cache->entries[id];
    if (!e->valid) return;
    for (int i = 0; i < cache->waiting;) {
        struct hora_request *req = cache->waiters[i];
        if (req->cache_id == id) {
            req->cache_id = -1;
            cache->waiters[i] = cache->waiters[--cache->waiting];
            coord_fifo_push(demoted, req);
        } else {
            i++;
        }
    }
    coord_map_remove(&cache->index, e->name);
    free(e->name);
    memset(e, 0, sizeof(*e));
}

void coord_cache_store(struct coord_cache *cache, const char *name, const struct coord_meta *meta,
                       struct coord_fifo *demoted)
{
    if (cache->capacity == 0) return;
    uintptr_t slot = (uintptr_t)coord_map_get(&cache->index, name);
    int id;
    if (slot) {
        id = (int)slot - 1;
    } else {
        /* Free slot, else the least recently used (lowest id on ties). */
        id = 0;
        for (int i = 0; i < cache->capacity; i++) {
            if (!cache->entries[i].valid) {
                id = i;
                break;
            }
            if (cache->entries[i].last_used < cache->entries[id].last_used) id = i;
        }
        coord_cache_evict(cache, id, demoted);
        cache->entries[id].name = strdup(name);
        if (!cache->entries[id].name || coord_map_put(&cache->index, name, (void *)(uintptr_t)(id + 1))) {
            free(cache->entries[id].name);
            cache->entries[id].name = NULL;
            return; /* out of memory: simply not cached, on this rank only */
        }
        cache->entries[id].valid = 1;
    }
    cache->entries[id].meta = *meta;
    cache->entries[id].last_used = ++cache->tick;
}

int coord_cache_wait(struct coord_cache *cache, struct hora_request *req, int id, int64_t now_us)
{
    if (cache->waiting == cache->waiters_cap) {
        int cap = cache->waiters_cap ? 2 * cache->waiters_cap : 64;
        struct hora_request **n = realloc(cache->waiters, (size_t)cap * sizeof(*n));
        if (!n) return -1;
        cache->waiters = n;
        cache->waiters_cap = cap;
    }
    req->cache_id = id;
    req->cached_since_us = now_us;
    cache->waiters[cache->waiting++] = req;
    return 0;
}

void coord_cache_unwait(struct coord_cache *cache, struct hora_request *req)
{
    if (req->cache_id < 0) return;
    for (int i = 0; i < cache->waiting; i++)
        if (cache->waiters[i] == req) {
            cache->waiters[i] = cache->waiters[--cache->waiting];
            break;
        }
    req->cache_id = -1;
}

void coord_cache_unwait_all(struct coord_cache *cache) { cache->waiting = 0; }
