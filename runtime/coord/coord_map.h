/* coord_map.h - a small string-keyed hash map (chained) for the coordinator's
 * tables: requests in flight by name, the response cache index, rank 0's
 * negotiation table. Keys are copied; values are borrowed. */
#ifndef HORA_COORD_MAP_H
#define HORA_COORD_MAP_H

#include <stddef.h>

struct coord_map_node {
    char *key;
    void *value;
    struct coord_map_node *next;
};

struct coord_map {
    struct coord_map_node **buckets;
    size_t bucket_count, count;
};

int coord_map_init(struct coord_map *m, size_t buckets); /* 0 or -1 (no memory) */
void coord_map_free(struct coord_map *m);
void *coord_map_get(const struct coord_map *m, const char *key);
int coord_map_put(struct coord_map *m, const char *key, void *value); /* replaces; 0 or -1 */
void *coord_map_remove(struct coord_map *m, const char *key);         /* the value or NULL */

#endif
