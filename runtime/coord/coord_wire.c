/* coord_wire.c - the lists the coordinators exchange, as bytes: a rank's
 * requests for rank 0 (coord_slow.c sends them, coord_table.c reads them)
 * and rank 0's responses, and the response list itself. Plain data: no
 * state of the coordinator. */
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "coord/coord_wire.h"

/* ---------------------------------------------------------------- buffers */

void coord_buf_free(struct coord_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

int coord_buf_put(struct coord_buf *b, const void *data, size_t len)
{
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len) cap *= 2;
        uint8_t *n = realloc(b->data, cap);
        if (!n) return -1;
        b->data = n;
        b->cap = cap;
    }
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
    return 0;
}

int coord_buf_get(struct coord_buf *b, void *data, size_t len)
{
    if (b->pos + len > b->len) return -1;
    memcpy(data, b->data + b->pos, len);
    b->pos += len;
    return 0;
}

static int coord_buf_put_str(struct coord_buf *b, const char *s)
{
    uint32_t len = s ? (uint32_t)strlen(s) : 0;
    return coord_buf_put(b, &len, sizeof(len)) || coord_buf_put(b, s, len);
}

/* A fresh string (NULL for an empty one when empty_is_null) or -1. */
static int coord_buf_get_str(struct coord_buf *b, char **out, int empty_is_null)
{
    uint32_t len;
    *out = NULL;
    if (coord_buf_get(b, &len, sizeof(len)) || b->pos + len > b->len) return -1;
    if (len == 0 && empty_is_null) return 0;
    *out = malloc((size_t)len + 1);
    if (!*out) return -1;
    memcpy(*out, b->data + b->pos, len);
    (*out)[len] = '\0';
    b->pos += len;
    return 0;
}

hora_status_t coord_encode_requests(struct hora_request *list, struct coord_buf *out)
{
    for (struct hora_request *req = list; req; req = req->next)
        if (coord_buf_put_str(out, req->name) || coord_buf_put_str(out, req->group) ||
            coord_buf_put(out, &req->meta, sizeof(req->meta)))
            return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory encoding requests");
    return HORA_OK;
}

int coord_decode_request(struct coord_buf *in, char **name, char **group, struct coord_meta *meta)
{
    *group = NULL;
    if (coord_buf_get_str(in, name, 0) || coord_buf_get_str(in, group, 1) || coord_buf_get(in, meta, sizeof(*meta))) {
        free(*name);
        free(*group);
        *name = *group = NULL;
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------- responses */

struct coord_response *coord_responses_add(struct coord_responses *list)
{
    if (list->count == list->cap) {
        int cap = list->cap ? 2 * list->cap : 16;
        struct coord_response *n = realloc(list->items, (size_t)cap * sizeof(*n));
        if (!n) return NULL;
        list->items = n;
        list->cap = cap;
    }
    struct coord_response *r = &list->items[list->count++];
    memset(r, 0, sizeof(*r));
    r->cache_id = -1;
    r->last_joined = -1;
    return r;
}

static void coord_response_free(struct coord_response *r)
{
    for (int i = 0; i < r->ntensors && r->names; i++) free(r->names[i]);
    free(r->names);
    free(r->metas);
    free(r->rank_counts);
    free(r->error);
}

void coord_responses_clear(struct coord_responses *list)
{
    for (int i = 0; i < list->count; i++) coord_response_free(&list->items[i]);
    free(list->items);
    memset(list, 0, sizeof(*list));
}

hora_status_t coord_encode_responses(int size, const struct coord_responses *list, struct coord_buf *out)
{
    for (int i = 0; i < list->count; i++) {
        const struct coord_response *r = &list->items[i];
        int fail = coord_buf_put(out, &r->kind, sizeof(r->kind)) ||
                   coord_buf_put(out, &r->ntensors, sizeof(r->ntensors)) ||
                   coord_buf_put(out, &r->last_joined, sizeof(r->last_joined)) ||
                   coord_buf_put(out, &r->cacheable, sizeof(r->cacheable)) || coord_buf_put_str(out, r->error);
        for (int t = 0; t < r->ntensors && !fail; t++)
            fail = coord_buf_put_str(out, r->names[t]) || coord_buf_put(out, &r->metas[t], sizeof(r->metas[t]));
        if (!fail && r->kind == COORD_KIND_ALLGATHER)
            fail = coord_buf_put(out, r->rank_counts, (size_t)size * sizeof(uint64_t));
        if (fail) return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory encoding responses");
    }
    return HORA_OK;
}

hora_status_t coord_decode_responses(int size, struct coord_buf *in, struct coord_responses *list)
{
    while (in->pos < in->len) {
        struct coord_response *r = coord_responses_add(list);
        if (!r) goto err_memory;
        int32_t ntensors;
        if (coord_buf_get(in, &r->kind, sizeof(r->kind)) || coord_buf_get(in, &ntensors, sizeof(ntensors)) ||
            coord_buf_get(in, &r->last_joined, sizeof(r->last_joined)) ||
            coord_buf_get(in, &r->cacheable, sizeof(r->cacheable)) || coord_buf_get_str(in, &r->error, 1) ||
            ntensors < 0 || (size_t)ntensors > in->len)
            goto err_malformed;
        r->names = calloc((size_t)ntensors + 1, sizeof(char *));
        r->metas = calloc((size_t)ntensors + 1, sizeof(struct coord_meta));
        if (!r->names || !r->metas) goto err_memory;
        for (int t = 0; t < ntensors; t++) {
            r->ntensors = t + 1;
            if (coord_buf_get_str(in, &r->names[t], 0) || coord_buf_get(in, &r->metas[t], sizeof(r->metas[t])))
                goto err_malformed;
        }
        r->ntensors = ntensors;
        if (r->kind == COORD_KIND_ALLGATHER) {
            r->rank_counts = malloc((size_t)size * sizeof(uint64_t));
            if (!r->rank_counts) goto err_memory;
            if (coord_buf_get(in, r->rank_counts, (size_t)size * sizeof(uint64_t))) goto err_malformed;
        }
    }
    return HORA_OK;
err_malformed:
    /* coord_buf_get_str also fails when out of memory; the list is then
     * still reported as unreadable, which it is for this rank. */
    return status_fail(HORA_ERR_CORRUPT, "coordinator: cannot decode the response list from rank 0 at byte %zu",
                       in->pos);
err_memory:
    return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory decoding the response list");
}
