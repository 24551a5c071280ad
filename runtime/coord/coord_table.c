/* coord_table.c - the slow path's negotiation: rank 0's table of names that
 * some ranks have submitted (their lists as bytes: coord_wire.c).
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
#include "coord/coord_table.h"
#include "coord/stack.h"
#include "coord/timeline.h"

/* One name some rank has submitted and not all have. */
struct coord_entry {
    char *name;
    char *group;
    struct coord_meta *metas; /* [size] */
    uint8_t *present;         /* [size] */
    int64_t *ready_us;        /* [size] */
    int64_t first_us;
    int64_t last_warn_us;
    struct coord_entry *next; /* arrival order */
};

/* The world rank of place q (a process set's member q, else q). */
static int coord_table_rank(const struct coord_table *t, int q) { return t->members ? t->members[q] : q; }

/* ------------------------------------------------------------ validation */

static void coord_meta_describe_shape(const struct coord_meta *m, char *buf, size_t len)
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

int coord_table_init(struct coord_table *t, int size, const int *members, const struct config *cfg)
{
    t->size = size;
    t->members = members;
    t->cfg = cfg;
    t->last_joined = -1;
    t->joined_ranks = calloc((size_t)size, 1);
    if (!t->joined_ranks || coord_map_init(&t->names, 1024)) return -1;
    return 0;
}

void coord_table_free(struct coord_table *t)
{
    for (struct coord_entry *e = t->order_head, *next; e; e = next) {
        next = e->next;
        coord_entry_free(e);
    }
    t->order_head = t->order_tail = NULL;
    free(t->joined_ranks);
    t->joined_ranks = NULL;
    coord_map_free(&t->names);
}

int coord_table_inspect_due(struct coord_table *t, int64_t now_us, int64_t period_us)
{
    if (!t->order_head || now_us - t->last_inspect_us < period_us) return 0;
    t->last_inspect_us = now_us;
    return 1;
}

static int coord_entry_ready(const struct coord_table *t, const struct coord_entry *e)
{
    for (int r = 0; r < t->size; r++)
        if (!e->present[r] && !t->joined_ranks[r]) return 0;
    return 1;
}

/* Whether e can never run: some rank has joined without submitting it and
 * it is not an allreduce (only allreduces run while a rank has joined). It
 * is refused at once, without waiting for the other ranks: they may never
 * submit the same name (Horovod names unnamed requests by a counter, which
 * a rank that joined instead of calling stops advancing), and each rank
 * that submits it later gets its own refusal. So every submitter fails
 * within a cycle or two, whatever the world size. */
static int coord_entry_refused(const struct coord_table *t, const struct coord_entry *e)
{
    int joined_missing = 0, not_allreduce = 0;
    if (t->joined_count == 0) return 0;
    for (int r = 0; r < t->size; r++) {
        if (t->joined_ranks[r] && !e->present[r]) joined_missing = 1;
        if (e->present[r] && e->metas[r].kind != COORD_KIND_ALLREDUCE) not_allreduce = 1;
    }
    return joined_missing && not_allreduce;
}

static hora_status_t coord_table_add(struct coord_table *t, int rank, const char *name, const char *group,
                                     const struct coord_meta *meta, int64_t now)
{
    struct coord_entry *e = coord_map_get(&t->names, name);
    if (!e) {
        e = calloc(1, sizeof(*e));
        if (!e) goto err;
        e->name = strdup(name);
        e->group = group ? strdup(group) : NULL;
        e->metas = calloc((size_t)t->size, sizeof(*e->metas));
        e->present = calloc((size_t)t->size, 1);
        e->ready_us = calloc((size_t)t->size, sizeof(*e->ready_us));
        if (!e->name || (group && !e->group) || !e->metas || !e->present || !e->ready_us ||
            coord_map_put(&t->names, name, e)) {
            coord_entry_free(e);
            goto err;
        }
        e->first_us = e->last_warn_us = now;
        if (t->order_tail)
            t->order_tail->next = e;
        else
            t->order_head = e;
        t->order_tail = e;
    }
    e->present[rank] = 1;
    e->metas[rank] = *meta;
    e->ready_us[rank] = now;
    return HORA_OK;
err:
    return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory in the negotiation table");
}

/* Build the response for a ready entry (validated against the first rank). */
static hora_status_t coord_respond(struct coord_table *t, struct coord_entry *e, struct coord_responses *out)
{
    struct coord_response *r = coord_responses_add(out);
    if (!r) goto err;
    r->names = calloc(1, sizeof(char *));
    r->metas = calloc(1, sizeof(struct coord_meta));
    if (!r->names || !r->metas || !(r->names[0] = strdup(e->name))) goto err;
    r->ntensors = 1;
    int first = -1;
    for (int q = 0; q < t->size; q++)
        if (e->present[q]) {
            if (first < 0) {
                first = q;
                continue;
            }
            if (!r->error)
                r->error = coord_validate(e->name, coord_table_rank(t, first), &e->metas[first], coord_table_rank(t, q),
                                          &e->metas[q]);
        }
    r->metas[0] = e->metas[first];
    r->kind = r->error ? COORD_KIND_ERROR : e->metas[first].kind;
    /* Only allreduces run while a rank has joined (it contributes zeros);
     * anything else fails, as Horovod raises. */
    int joined = -1;
    for (int q = 0; q < t->size && joined < 0; q++)
        if (t->joined_ranks[q] && !e->present[q]) joined = q;
    if (r->kind != COORD_KIND_ERROR && r->kind != COORD_KIND_ALLREDUCE && joined >= 0) {
        char msg[320];
        snprintf(msg, sizeof(msg),
                 "%s '%s': rank %d has already joined (hora_join): only allreduce runs until every "
                 "rank has joined",
                 coord_kind_name(r->kind), e->name, joined);
        r->error = strdup(msg);
        r->kind = COORD_KIND_ERROR;
        r->last_joined = joined; /* an ERROR naming a joined rank: HORA_ERR_INVALID_ARG */
    }
    if (r->kind == COORD_KIND_ALLGATHER) {
        r->rank_counts = calloc((size_t)t->size, sizeof(uint64_t));
        if (!r->rank_counts) goto err;
        for (int q = 0; q < t->size; q++) r->rank_counts[q] = e->metas[q].count;
    }
    r->cacheable = r->kind != COORD_KIND_ERROR && !e->group && coord_kind_cacheable(r->kind);
    if (t->tl) {
        char args[1024];
        size_t used = (size_t)snprintf(args, sizeof(args), "{\"ranks_ready_us\":[");
        int64_t origin = coord_now_us() - timeline_now_us(t->tl);
        for (int q = 0; q < t->size && used < sizeof(args) - 32; q++)
            used += (size_t)snprintf(args + used, sizeof(args) - used, "%s%" PRId64, q ? "," : "",
                                     e->present[q] ? e->ready_us[q] - origin : -1);
        snprintf(args + used, sizeof(args) - used, "]}");
        timeline_begin(t->tl, e->name, "NEGOTIATE", e->first_us - origin, NULL);
        timeline_end(t->tl, e->name, "NEGOTIATE", -1, args);
    }
    return HORA_OK;
err:
    return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory building responses");
}

static void coord_table_remove(struct coord_table *t, struct coord_entry *e)
{
    coord_map_remove(&t->names, e->name);
    struct coord_entry **link = &t->order_head;
    t->order_tail = NULL;
    for (struct coord_entry *x = t->order_head; x; x = x->next) {
        if (x == e) {
            *link = x->next;
            break;
        }
        link = &x->next;
    }
    for (struct coord_entry *x = t->order_head; x; x = x->next) t->order_tail = x;
    coord_entry_free(e);
}

/* The ranks that have (or have joined) and have not submitted e. */
static void coord_stall_ranks(const struct coord_table *t, const struct coord_entry *e, char *ready, size_t ready_len,
                              char *missing, size_t missing_len)
{
    size_t m = 0, k = 0;
    missing[0] = ready[0] = '\0';
    for (int r = 0; r < t->size; r++) {
        if (e->present[r] || t->joined_ranks[r]) {
            if (k < ready_len)
                k += (size_t)snprintf(ready + k, ready_len - k, "%s%d", k ? ", " : "", coord_table_rank(t, r));
        } else if (m < missing_len) {
            m += (size_t)snprintf(missing + m, missing_len - m, "%s%d", m ? ", " : "", coord_table_rank(t, r));
        }
    }
}

/* Warn about names some ranks submitted long ago and others have not. */
static void coord_stall_inspect(struct coord_table *t, int64_t now, struct coord_responses *out)
{
    const struct config *cfg = t->cfg;
    for (struct coord_entry *e = t->order_head; e; e = e->next) {
        double age = (double)(now - e->first_us) * 1e-6;
        char missing[256], ready[256];
        if (cfg->stall_shutdown_s > 0 && age > cfg->stall_shutdown_s) {
            char msg[768];
            coord_stall_ranks(t, e, ready, sizeof(ready), missing, sizeof(missing));
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
            coord_stall_ranks(t, e, ready, sizeof(ready), missing, sizeof(missing));
            log_warn("stall inspector: '%s' has waited %.0f s; ready on ranks: %s; missing ranks: %s", e->name, age,
                     ready, missing);
            for (int r = 0; r < t->size; r++) /* what they are doing (stack.h); the world's only */
                if (!e->present[r] && !t->joined_ranks[r]) stack_channel_request(t->stacks, r, e->name, age, now);
            e->last_warn_us = now;
        }
    }
}

hora_status_t coord_table_negotiate(struct coord_table *t, struct coord_buf *bufs, struct coord_responses *out)
{
    int64_t now = coord_now_us();
    int newly_joined = -1;

    for (int r = 0; r < t->size; r++) {
        struct coord_buf *b = &bufs[r];
        b->pos = 0;
        while (b->pos < b->len) {
            char *name = NULL, *group = NULL;
            struct coord_meta meta;
            if (coord_decode_request(b, &name, &group, &meta))
                return status_fail(HORA_ERR_CORRUPT, "coordinator: malformed request list from rank %d", r);
            hora_status_t status = HORA_OK;
            if (meta.kind == COORD_KIND_JOIN) {
                if (!t->joined_ranks[r]) {
                    t->joined_ranks[r] = 1;
                    t->joined_count++;
                    newly_joined = r; /* the highest rank joining in the latest cycle is "last" */
                }
            } else {
                status = coord_table_add(t, r, name, group, &meta, now);
            }
            free(name);
            free(group);
            HORA_CHECK(status);
        }
    }
    if (newly_joined >= 0) t->last_joined = newly_joined;

    /* Ready entries, in arrival order; a group only with all its members. */
    for (struct coord_entry *e = t->order_head, *next; e; e = next) {
        next = e->next;
        if (!coord_entry_ready(t, e) && !coord_entry_refused(t, e)) continue;
        if (!e->group || coord_entry_refused(t, e)) {
            HORA_CHECK(coord_respond(t, e, out));
            coord_table_remove(t, e);
            continue;
        }
        int first = 0;
        while (!e->present[first]) first++;
        int members = 0, ready = 0;
        for (struct coord_entry *x = t->order_head; x; x = x->next)
            if (x->group && !strcmp(x->group, e->group)) {
                members++;
                ready += coord_entry_ready(t, x);
            }
        if (ready < e->metas[first].group_size || members < e->metas[first].group_size) continue;
        /* Emit every member now, consecutively; fusion keeps them together. */
        char *group = strdup(e->group);
        if (!group) return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
        for (struct coord_entry *x = t->order_head, *xn; x; x = xn) {
            xn = x->next;
            if (!x->group || strcmp(x->group, group)) continue;
            hora_status_t status = coord_respond(t, x, out);
            if (status < 0) {
                free(group);
                return status;
            }
            coord_table_remove(t, x);
        }
        free(group);
        next = t->order_head; /* the list changed under us: rescan */
    }

    if (t->joined_count == t->size) {
        struct coord_response *r = coord_responses_add(out);
        if (!r) return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
        r->kind = COORD_KIND_JOIN;
        r->last_joined = t->last_joined;
        memset(t->joined_ranks, 0, (size_t)t->size);
        t->joined_count = 0;
    }
    coord_stall_inspect(t, now, out);
    return HORA_OK;
}
