/* coord_fuse.c - fusion planning: which responses of a list run as one.
 * Consecutive allreduce responses that agree on dtype, op, scales,
 * compression, reproducibility and memory kind, and come from the same path
 * (the cache's or the slow path's), are packed into one response (never
 * Adasum's: each tensor is a vector of its own), each
 * tensor at an offset aligned to HORA_ALIGN_BYTES, while the packed size
 * stays within HORA_FUSION_THRESHOLD; a tensor larger than the threshold
 * runs alone. A pure function of the threshold and the list: rank 0 plans
 * the slow path's responses, every rank the fast path's, alike, and
 * tools/sim's hora-sim plans its model's with this very code. */
#include <stdlib.h>
#include <string.h>

#include "coord/coord_fuse.h"

static int coord_fusable(const struct coord_meta *a, const struct coord_meta *b)
{
    /* Adasum combines whole vectors: each tensor is one, so it runs alone. */
    return a->kind == COORD_KIND_ALLREDUCE && b->kind == COORD_KIND_ALLREDUCE && a->op != HORA_OP_ADASUM &&
           a->dtype == b->dtype && a->op == b->op && a->prescale == b->prescale && a->postscale == b->postscale &&
           a->compression == b->compression && a->memory == b->memory && a->reproducible == b->reproducible;
}

size_t coord_fuse_bytes(const struct coord_response *r)
{
    size_t bytes = 0, es = hora_dtype_size(coord_wire_dtype(&r->metas[0]));
    for (int t = 0; t < r->ntensors; t++) bytes = coord_align(bytes) + r->metas[t].count * es;
    return bytes;
}

/* Move src's tensors to the end of dst. */
static int coord_merge(struct coord_response *dst, struct coord_response *src)
{
    int n = dst->ntensors + src->ntensors;
    char **names = realloc(dst->names, (size_t)n * sizeof(*names));
    if (!names) return -1;
    dst->names = names;
    struct coord_meta *metas = realloc(dst->metas, (size_t)n * sizeof(*metas));
    if (!metas) return -1;
    dst->metas = metas;
    memcpy(dst->names + dst->ntensors, src->names, (size_t)src->ntensors * sizeof(*names));
    memcpy(dst->metas + dst->ntensors, src->metas, (size_t)src->ntensors * sizeof(*metas));
    dst->ntensors = n;
    dst->cacheable = dst->cacheable && src->cacheable;
    free(src->names);
    free(src->metas);
    src->names = NULL;
    src->metas = NULL;
    src->ntensors = 0;
    return 0;
}

void coord_fuse_list(size_t threshold, struct coord_responses *list)
{
    int out = 0;
    for (int i = 0; i < list->count; i++) {
        struct coord_response *r = &list->items[i];
        if (out > 0 && threshold > 0) {
            struct coord_response *prev = &list->items[out - 1];
            /* Kind first: join and shutdown responses carry no tensors. */
            if (prev->kind == COORD_KIND_ALLREDUCE && r->kind == COORD_KIND_ALLREDUCE && prev->ntensors > 0 &&
                r->ntensors > 0 && coord_fusable(&prev->metas[0], &r->metas[0]) &&
                (prev->cache_id < 0) == (r->cache_id < 0) &&
                coord_align(coord_fuse_bytes(prev)) + coord_fuse_bytes(r) <= threshold && coord_merge(prev, r) == 0) {
                /* Cache entries are touched per tensor at execution. */
                continue;
            }
        }
        if (out != i) list->items[out] = *r;
        out++;
    }
    list->count = out;
}
