/* coord_wire.h - the response list, and the request and response lists as
 * the bytes the coordinators exchange (coord_wire.c). tools/sim builds
 * response lists with these too. */
#ifndef HORA_COORD_WIRE_H
#define HORA_COORD_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "coord/coord_request.h"

struct coord_buf {
    uint8_t *data;
    size_t len, cap, pos; /* pos: read cursor */
};

struct coord_response {
    uint32_t kind;
    int ntensors;
    char **names;
    struct coord_meta *metas;
    uint64_t *rank_counts; /* ALLGATHER: one per rank */
    char *error;           /* ERROR, SHUTDOWN */
    int32_t last_joined;   /* JOIN; ERROR: >= 0 when the request came while this rank had joined */
    uint32_t cacheable;    /* insert into the response cache after success */
    int32_t cache_id;      /* >= 0: built from the cache (touch it) */
};

struct coord_responses {
    struct coord_response *items;
    int count, cap;
};

void coord_buf_free(struct coord_buf *b);
/* 0, or -1 out of memory (put) / past the end (get). */
int coord_buf_put(struct coord_buf *b, const void *data, size_t len);
int coord_buf_get(struct coord_buf *b, void *data, size_t len);

/* A request list (linked through next), and one request of it read back at
 * in->pos: fresh name and group (NULL: none) the caller frees, or -1 when
 * malformed or out of memory (nothing to free). */
hora_status_t coord_encode_requests(struct hora_request *list, struct coord_buf *out);
int coord_decode_request(struct coord_buf *in, char **name, char **group, struct coord_meta *meta);
/* size: the ranks of the coordinator (an allgather's counts, one per rank).
 * A malformed list is HORA_ERR_CORRUPT. */
hora_status_t coord_encode_responses(int size, const struct coord_responses *list, struct coord_buf *out);
hora_status_t coord_decode_responses(int size, struct coord_buf *in, struct coord_responses *list);

/* A zeroed response (cache_id and last_joined -1) at the end of list, or
 * NULL out of memory. */
struct coord_response *coord_responses_add(struct coord_responses *list);
/* Free every response and the list's array. */
void coord_responses_clear(struct coord_responses *list);

#endif
