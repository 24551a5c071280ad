/* coord_negotiate.c - the slow path: the wire format of request and response
 * lists, and rank 0's table of names that some ranks have submitted.
 *
 * Rank 0 merges every rank's submissions into its table; a name is ready when
 * every rank that has not joined submitted it (a group when all its members
 * are). A ready name is validated - every rank's parameters must equal those
 * of the first rank that submitted it - and becomes either a response to run
 * or an error response naming both values, delivered to every rank. While a
 * rank has joined, a name it did not submit that is not an allreduce is
 * refused as soon as it arrives (coord_entry_refused). Ready responses keep
 * the order in which names first arrived. Rank 0 also runs the stall
 * inspector over the table. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/status.h"
#include "coord/coord_internal.h"
#include "coord/stack.h"

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

hora_status_t coord_encode_responses(const struct coord *c, const struct coord_responses *list,
                                     struct coord_buf *out)
{
    const int size = c->size;
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

hora_status_t coord_decode_responses(const struct coord *c, struct coord_buf *in, struct coord_responses *list)
{
    const int size = c->size;
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

/* ------------------------------------------------------------ validation */

void coord_meta_describe_shape(const struct coord_meta *m, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < m->ndim && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, "%s%" PRId64, d ? ", " : "", m->dims[d]);
    if (used < len) snprintf(buf + used, len - used, "]");
}

static const char *coord_compression_name(uint32_t c)
{
    return c == HORA_COMPRESSION_FP16 ? "fp16" : c == HORA_COMPRESSION_BF16 ? "bf16" : "none";
}

/* NULL when a and b agree, else a message naming both values (caller frees). */
static char *coord_validate(const char *name, int ra, const struct coord_meta *a, int rb, const struct coord_meta *b)
{
    char msg[512], sa[160], sb[160];
    msg[0] = '\0';
    if (a->kind != b->kind) {
        snprintf(msg, sizeof(msg), "mismatched operation for '%s': rank %d requested %s, rank %d requested %s", name,
                 ra, coord_kind_name(a->kind), rb, coord_kind_name(b->kind));
    } else if (a->dtype != b->dtype) {
        snprintf(msg, sizeof(msg), "mismatched dtype for '%s': rank %d has %s, rank %d has %s", name, ra,
                 hora_dtype_name((hora_dtype_t)a->dtype), rb, hora_dtype_name((hora_dtype_t)b->dtype));
    } else if ((a->kind == COORD_KIND_ALLREDUCE || a->kind == COORD_KIND_REDUCESCATTER) && a->op != b->op) {
        snprintf(msg, sizeof(msg), "mismatched reduction op for '%s': rank %d has %s, rank %d has %s", name, ra,
                 hora_op_name((hora_op_t)a->op), rb, hora_op_name((hora_op_t)b->op));
    } else if (a->kind == COORD_KIND_BROADCAST && a->root != b->root) {
        snprintf(msg, sizeof(msg), "mismatched root for '%s': rank %d has root %d, rank %d has root %d", name, ra,
                 a->root, rb, b->root);
    } else if (a->prescale != b->prescale) {
        snprintf(msg, sizeof(msg), "mismatched prescale for '%s': rank %d has %g, rank %d has %g", name, ra,
                 a->prescale, rb, b->prescale);
    } else if (a->postscale != b->postscale) {
        snprintf(msg, sizeof(msg), "mismatched postscale for '%s': rank %d has %g, rank %d has %g", name, ra,
                 a->postscale, rb, b->postscale);
    } else if (a->compression != b->compression) {
        snprintf(msg, sizeof(msg), "mismatched compression for '%s': rank %d has %s, rank %d has %s", name, ra,
                 coord_compression_name(a->compression), rb, coord_compression_name(b->compression));
    } else if (a->memory != b->memory) {
        snprintf(msg, sizeof(msg), "mismatched memory kind for '%s': rank %d has %s, rank %d has %s", name, ra,
                 a->memory == HORA_MEMORY_CUDA ? "cuda" : "host", rb, b->memory == HORA_MEMORY_CUDA ? "cuda" : "host");
    } else if (a->reproducible != b->reproducible) {
        snprintf(msg, sizeof(msg), "mismatched reproducible mode for '%s': rank %d has %u, rank %d has %u", name, ra,
                 a->reproducible, rb, b->reproducible);
    } else if (a->kind == COORD_KIND_BARRIER) {
        /* nothing else to agree on */
    } else if (a->kind == COORD_KIND_ALLGATHER || a->kind == COORD_KIND_ALLTOALL) {
        int same = a->ndim == b->ndim;
        for (int d = 1; d < a->ndim && same; d++) same = a->dims[d] == b->dims[d];
        if (!same) {
            coord_meta_describe_shape(a, sa, sizeof(sa));
            coord_meta_describe_shape(b, sb, sizeof(sb));
            snprintf(msg, sizeof(msg),
                     "mismatched shape for '%s': %s needs equal dimensions after the first: rank %d has %s, "
                     "rank %d has %s",
                     name, coord_kind_name(a->kind), ra, sa, rb, sb);
        }
    } else {
        int same = a->ndim == b->ndim && a->count == b->count;
        for (int d = 0; d < a->ndim && same; d++) same = a->dims[d] == b->dims[d];
        if (!same) {
            coord_meta_describe_shape(a, sa, sizeof(sa));
            coord_meta_describe_shape(b, sb, sizeof(sb));
            snprintf(msg, sizeof(msg), "mismatched shape for '%s': rank %d has %s, rank %d has %s", name, ra, sa, rb,
                     sb);
        }
    }
    return msg[0] ? strdup(msg) : NULL;
}

/* ---------------------------------------------------------------- table */

static void coord_entry_free(struct coord_entry *e)
{
    free(e->name);
    free(e->group);
    free(e->metas);
    free(e->present);
    free(e->ready_us);
    free(e);
}

void coord_negotiate_free(struct coord *c)
{
    for (struct coord_entry *e = c->order_head, *next; e; e = next) {
        next = e->next;
        coord_entry_free(e);
    }
    c->order_head = c->order_tail = NULL;
}

static int coord_entry_ready(const struct coord *c, const struct coord_entry *e)
{
    for (int r = 0; r < c->size; r++)
        if (!e->present[r] && !c->joined_ranks[r]) return 0;
    return 1;
}

/* Whether e can never run: some rank has joined without submitting it and
 * it is not an allreduce (only allreduces run while a rank has joined). It
 * is refused at once, without waiting for the other ranks: they may never
 * submit the same name (Horovod names unnamed requests by a counter, which
 * a rank that joined instead of calling stops advancing), and each rank
 * that submits it later gets its own refusal. So every submitter fails
 * within a cycle or two, whatever the world size. */
static int coord_entry_refused(const struct coord *c, const struct coord_entry *e)
{
    int joined_missing = 0, not_allreduce = 0;
    if (c->joined_count == 0) return 0;
    for (int r = 0; r < c->size; r++) {
        if (c->joined_ranks[r] && !e->present[r]) joined_missing = 1;
        if (e->present[r] && e->metas[r].kind != COORD_KIND_ALLREDUCE) not_allreduce = 1;
    }
    return joined_missing && not_allreduce;
}

static hora_status_t coord_table_add(struct coord *c, int rank, const char *name, const char *group,
                                     const struct coord_meta *meta, int64_t now)
{
    struct coord_entry *e = coord_map_get(&c->table, name);
    if (!e) {
        e = calloc(1, sizeof(*e));
        if (!e) goto err;
        e->name = strdup(name);
        e->group = group ? strdup(group) : NULL;
        e->metas = calloc((size_t)c->size, sizeof(*e->metas));
        e->present = calloc((size_t)c->size, 1);
        e->ready_us = calloc((size_t)c->size, sizeof(*e->ready_us));
        if (!e->name || (group && !e->group) || !e->metas || !e->present || !e->ready_us ||
            coord_map_put(&c->table, name, e)) {
            coord_entry_free(e);
            goto err;
        }
        e->first_us = e->last_warn_us = now;
        if (c->order_tail)
            c->order_tail->next = e;
        else
            c->order_head = e;
        c->order_tail = e;
    }
    e->present[rank] = 1;
    e->metas[rank] = *meta;
    e->ready_us[rank] = now;
    return HORA_OK;
err:
    return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory in the negotiation table");
}

/* Build the response for a ready entry (validated against the first rank). */
static hora_status_t coord_respond(struct coord *c, struct coord_entry *e, struct coord_responses *out)
{
    struct coord_response *r = coord_responses_add(out);
    if (!r) goto err;
    r->names = calloc(1, sizeof(char *));
    r->metas = calloc(1, sizeof(struct coord_meta));
    if (!r->names || !r->metas || !(r->names[0] = strdup(e->name))) goto err;
    r->ntensors = 1;
    int first = -1;
    for (int q = 0; q < c->size; q++)
        if (e->present[q]) {
            if (first < 0) {
                first = q;
                continue;
            }
            if (!r->error)
                r->error = coord_validate(e->name, coord_world_rank(c, first), &e->metas[first],
                                          coord_world_rank(c, q), &e->metas[q]);
        }
    r->metas[0] = e->metas[first];
    r->kind = r->error ? COORD_KIND_ERROR : e->metas[first].kind;
    /* Only allreduces run while a rank has joined (it contributes zeros);
     * anything else fails, as Horovod raises. */
    int joined = -1;
    for (int q = 0; q < c->size && joined < 0; q++)
        if (c->joined_ranks[q] && !e->present[q]) joined = q;
    if (r->kind != COORD_KIND_ERROR && r->kind != COORD_KIND_ALLREDUCE && joined >= 0) {
        char msg[320];
        snprintf(msg, sizeof(msg), "%s '%s': rank %d has already joined (hora_join): only allreduce runs until every "
                 "rank has joined", coord_kind_name(r->kind), e->name, joined);
        r->error = strdup(msg);
        r->kind = COORD_KIND_ERROR;
        r->last_joined = joined; /* an ERROR naming a joined rank: HORA_ERR_INVALID_ARG */
    }
    if (r->kind == COORD_KIND_ALLGATHER) {
        r->rank_counts = calloc((size_t)c->size, sizeof(uint64_t));
        if (!r->rank_counts) goto err;
        for (int q = 0; q < c->size; q++) r->rank_counts[q] = e->metas[q].count;
    }
    r->cacheable = r->kind != COORD_KIND_ERROR && !e->group && coord_kind_cacheable(r->kind);
    if (c->tl) {
        char args[1024];
        size_t used = (size_t)snprintf(args, sizeof(args), "{\"ranks_ready_us\":[");
        int64_t origin = coord_now_us() - timeline_now_us(c->tl);
        for (int q = 0; q < c->size && used < sizeof(args) - 32; q++)
            used += (size_t)snprintf(args + used, sizeof(args) - used, "%s%" PRId64, q ? "," : "",
                                     e->present[q] ? e->ready_us[q] - origin : -1);
        snprintf(args + used, sizeof(args) - used, "]}");
        timeline_begin(c->tl, e->name, "NEGOTIATE", e->first_us - origin, NULL);
        timeline_end(c->tl, e->name, "NEGOTIATE", -1, args);
    }
    return HORA_OK;
err:
    return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory building responses");
}

static void coord_table_remove(struct coord *c, struct coord_entry *e)
{
    coord_map_remove(&c->table, e->name);
    struct coord_entry **link = &c->order_head;
    c->order_tail = NULL;
    for (struct coord_entry *x = c->order_head; x; x = x->next) {
        if (x == e) {
            *link = x->next;
            break;
        }
        link = &x->next;
    }
    for (struct coord_entry *x = c->order_head; x; x = x->next) c->order_tail = x;
    coord_entry_free(e);
}

/* The ranks that have (or have joined) and have not submitted e. */
static void coord_stall_ranks(const struct coord *c, const struct coord_entry *e, char *ready, size_t ready_len,
                              char *missing, size_t missing_len)
{
    size_t m = 0, k = 0;
    missing[0] = ready[0] = '\0';
    for (int r = 0; r < c->size; r++) {
        if (e->present[r] || c->joined_ranks[r]) {
            if (k < ready_len)
                k += (size_t)snprintf(ready + k, ready_len - k, "%s%d", k ? ", " : "", coord_world_rank(c, r));
        } else if (m < missing_len) {
            m += (size_t)snprintf(missing + m, missing_len - m, "%s%d", m ? ", " : "", coord_world_rank(c, r));
        }
    }
}

/* Warn about names some ranks submitted long ago and others have not. */
static void coord_stall_inspect(struct coord *c, int64_t now, struct coord_responses *out)
{
    const struct config *cfg = c->cfg;
    for (struct coord_entry *e = c->order_head; e; e = e->next) {
        double age = (double)(now - e->first_us) * 1e-6;
        char missing[256], ready[256];
        if (cfg->stall_shutdown_s > 0 && age > cfg->stall_shutdown_s) {
            char msg[768];
            coord_stall_ranks(c, e, ready, sizeof(ready), missing, sizeof(missing));
            snprintf(msg, sizeof(msg),
                     "stall inspector: '%s' waited %.0f s for other ranks (HORA_STALL_SHUTDOWN_S=%g; missing ranks: "
                     "%s): shutting down",
                     e->name, age, cfg->stall_shutdown_s, missing);
            log_error("%s", msg);
            struct coord_response *r = coord_responses_add(out);
            if (r) {
                r->kind = COORD_KIND_SHUTDOWN;
                r->error = strdup(msg);
            }
            return;
        }
        if (age > cfg->stall_check_s && (double)(now - e->last_warn_us) * 1e-6 >= cfg->stall_check_s) {
            coord_stall_ranks(c, e, ready, sizeof(ready), missing, sizeof(missing));
            log_warn("stall inspector: '%s' has waited %.0f s; ready on ranks: %s; missing ranks: %s", e->name, age,
                     ready, missing);
            for (int r = 0; r < c->size; r++) /* what they are doing (stack.h); the world's only */
                if (!e->present[r] && !c->joined_ranks[r]) stack_channel_request(c->stacks, r, e->name, age, now);
            e->last_warn_us = now;
        }
    }
}

hora_status_t coord_negotiate(struct coord *c, struct coord_buf *bufs, struct coord_responses *out)
{
    int64_t now = coord_now_us();
    int newly_joined = -1;

    for (int r = 0; r < c->size; r++) {
        struct coord_buf *b = &bufs[r];
        b->pos = 0;
        while (b->pos < b->len) {
            char *name = NULL, *group = NULL;
            struct coord_meta meta;
            if (coord_buf_get_str(b, &name, 0) || coord_buf_get_str(b, &group, 1) ||
                coord_buf_get(b, &meta, sizeof(meta))) {
                free(name);
                free(group);
                return status_fail(HORA_ERR_CORRUPT, "coordinator: malformed request list from rank %d", r);
            }
            hora_status_t status = HORA_OK;
            if (meta.kind == COORD_KIND_JOIN) {
                if (!c->joined_ranks[r]) {
                    c->joined_ranks[r] = 1;
                    c->joined_count++;
                    newly_joined = r; /* the highest rank joining in the latest cycle is "last" */
                }
            } else {
                status = coord_table_add(c, r, name, group, &meta, now);
            }
            free(name);
            free(group);
            HORA_CHECK(status);
        }
    }
    if (newly_joined >= 0) c->last_joined = newly_joined;

    /* Ready entries, in arrival order; a group only with all its members. */
    for (struct coord_entry *e = c->order_head, *next; e; e = next) {
        next = e->next;
        if (!coord_entry_ready(c, e) && !coord_entry_refused(c, e)) continue;
        if (!e->group || coord_entry_refused(c, e)) {
            HORA_CHECK(coord_respond(c, e, out));
            coord_table_remove(c, e);
            continue;
        }
        int first = 0;
        while (!e->present[first]) first++;
        int members = 0, ready = 0;
        for (struct coord_entry *x = c->order_head; x; x = x->next)
            if (x->group && !strcmp(x->group, e->group)) {
                members++;
                ready += coord_entry_ready(c, x);
            }
        if (ready < e->metas[first].group_size || members < e->metas[first].group_size) continue;
        /* Emit every member now, consecutively; fusion keeps them together. */
        char *group = strdup(e->group);
        if (!group) return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
        for (struct coord_entry *x = c->order_head, *xn; x; x = xn) {
            xn = x->next;
            if (!x->group || strcmp(x->group, group)) continue;
            hora_status_t status = coord_respond(c, x, out);
            if (status < 0) {
                free(group);
                return status;
            }
            coord_table_remove(c, x);
        }
        free(group);
        next = c->order_head; /* the list changed under us: rescan */
    }

    if (c->joined_count == c->size) {
        struct coord_response *r = coord_responses_add(out);
        if (!r) return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
        r->kind = COORD_KIND_JOIN;
        r->last_joined = c->last_joined;
        memset(c->joined_ranks, 0, (size_t)c->size);
        c->joined_count = 0;
    }
    coord_stall_inspect(c, now, out);
    return HORA_OK;
}
