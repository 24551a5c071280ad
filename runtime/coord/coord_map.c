/* coord_map.c - FNV-1a hashed buckets with chaining; a few hundred keys. */
#include "coord/coord_map.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t coord_map_hash(const char *key, size_t buckets)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) h = (h ^ *p) * 1099511628211ull;
    return (size_t)(h % buckets);
}

int coord_map_init(struct coord_map *m, size_t buckets)
{
    m->buckets = calloc(buckets, sizeof(*m->buckets));
    m->bucket_count = buckets;
    m->count = 0;
    return m->buckets ? 0 : -1;
}

void coord_map_free(struct coord_map *m)
{
    for (size_t b = 0; b < m->bucket_count; b++) {
        struct coord_map_node *n = m->buckets ? m->buckets[b] : NULL;
        while (n) {
            struct coord_map_node *next = n->next;
            free(n->key);
            free(n);
            n = next;
        }
    }
    free(m->buckets);
    memset(m, 0, sizeof(*m));
}

void *coord_map_get(const struct coord_map *m, const char *key)
{
    for (struct coord_map_node *n = m->buckets[coord_map_hash(key, m->bucket_count)]; n; n = n->next)
        if (!strcmp(n->key, key)) return n->value;
    return NULL;
}

int coord_map_put(struct coord_map *m, const char *key, void *value)
{
    size_t b = coord_map_hash(key, m->bucket_count);
    for (struct coord_map_node *n = m->buckets[b]; n; n = n->next)
        if (!strcmp(n->key, key)) {
            n->value = value;
            return 0;
        }
    struct coord_map_node *n = malloc(sizeof(*n));
    if (!n) return -1;
    n->key = strdup(key);
    if (!n->key) {
        free(n);
        return -1;
    }
    n->value = value;
    n->next = m->buckets[b];
    m->buckets[b] = n;
    m->count++;
    return 0;
}

void *coord_map_remove(struct coord_map *m, const char *key)
{
    struct coord_map_node **link = &m->buckets[coord_map_hash(key, m->bucket_count)];
    for (struct coord_map_node *n = *link; n; link = &n->next, n = n->next)
        if (!strcmp(n->key, key)) {
            void *value = n->value;
            *link = n->next;
            free(n->key);
            free(n);
            m->count--;
            return value;
        }
    return NULL;
}
