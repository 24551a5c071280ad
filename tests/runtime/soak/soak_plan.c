/* soak_plan.c - one iteration's plan, drawn from (seed, iteration) alone, so
 * every rank draws the same tensors: names, kinds, dtypes, ops, counts,
 * scales, compression, buffers, roots and shapes, and which direct
 * collectives run between the submissions. What each rank chooses for
 * itself (its submission order, how it completes each request, the order it
 * completes them in, when it polls) comes from a second generator seeded
 * with its rank.
 *
 * Counts are skewed toward small tensors, as a model's gradients are: about
 * half have at most 64 elements, one in fifty is larger than 256K elements,
 * up to the tensor limit. A plan stays within the iteration byte budget on
 * every rank. Iterations 0 and 1 are fixed instead: the largest of
 * everything, for the RSS baseline (soak_plan_make_max). */
#include <stdio.h>
#include <string.h>

#include "rand.h"
#include "soak.h"

/* The random plans draw from hora's first seven dtypes (f32 .. u8), the
 * ones soak_values.c models, so a seed gives the plan it always gave; i8,
 * i16, u16 and bool (and bool's refusals) are checked exactly by
 * test_collectives and test_async. */
#define SOAK_DTYPE_COUNT ((int)HORA_DTYPE_U8 + 1)

static uint64_t soak_range(test_rng_t *rng, uint64_t lo, uint64_t hi) { return lo + test_rng_u64(rng) % (hi - lo + 1); }

/* Elements of a tensor of elem_bytes per element, at most max_bytes. */
static size_t soak_draw_count(test_rng_t *rng, size_t elem_bytes, size_t max_bytes)
{
    size_t max_count = max_bytes / elem_bytes, lo, hi;
    uint32_t c = test_rng_below(rng, 100);
    if (max_count < 1) max_count = 1;
    if (c < 45)
        lo = 1, hi = 64;
    else if (c < 75)
        lo = 65, hi = 4096;
    else if (c < 92)
        lo = 4097, hi = 65536;
    else if (c < 98)
        lo = 65537, hi = 262144;
    else
        lo = max_count / 2 + 1, hi = max_count;
    if (hi > max_count) hi = max_count;
    if (lo > hi) lo = hi / 2 + 1;
    return (size_t)soak_range(rng, lo, hi);
}

/* Pre/postscale pairs. Floats: powers of two and 3 (exact for the inputs);
 * integers: 0.5 rounds half of the odd values to even. */
static void soak_draw_scales(test_rng_t *rng, struct soak_tensor *t)
{
    static const double floats[][2] = {{2, 0.5}, {3, 1}, {1, 0.25}, {0.5, 2}, {3, 0.5}};
    static const double ints[][2] = {{3, 2}, {2, 1}, {1, 3}, {0.5, 1}};
    t->prescale = t->postscale = 1;
    if (test_rng_below(rng, 4) != 0) return;
    /* A product of more than five prescaled inputs (3^6 * 2^6) no longer
     * fits bf16's 8 bits: the ring's partial products would round. */
    if (t->op == HORA_OP_PROD && soak_size > 5) return;
    if (t->dtype == HORA_DTYPE_F32 || t->dtype == HORA_DTYPE_F16 || t->dtype == HORA_DTYPE_BF16 ||
        t->dtype == HORA_DTYPE_F64) {
        uint32_t k = test_rng_below(rng, 5);
        t->prescale = floats[k][0];
        t->postscale = floats[k][1];
    } else {
        uint32_t k = test_rng_below(rng, 4);
        t->prescale = ints[k][0];
        t->postscale = ints[k][1];
    }
}

static enum soak_mem soak_draw_mem(test_rng_t *rng, int inplace)
{
    uint32_t m = test_rng_below(rng, 6);
    if (m < 3) return SOAK_MEM_MALLOC;
    return inplace && m == 5 ? SOAK_MEM_ARENA : SOAK_MEM_SHARED;
}

/* The name: iteration parity (a deferred request is still in flight during
 * the next iteration), kind, slot; now and then also the iteration, so that
 * names the coordinator's cache has never seen keep arriving while the slot
 * names come back with other dtypes, ops and counts. */
static void soak_name(char *out, size_t len, uint64_t it, const char *kind, int slot, int member, int fresh)
{
    int n = snprintf(out, len, "%c.%s%02d", it % 2 ? 'b' : 'a', kind, slot);
    if (member >= 0 && n > 0 && (size_t)n < len) n += snprintf(out + n, len - (size_t)n, ".m%d", member);
    if (fresh && n > 0 && (size_t)n < len) snprintf(out + n, len - (size_t)n, ".i%llu", (unsigned long long)it);
}

static void soak_plan_rank_choices(struct soak_plan *p, uint64_t common);

/* A tensor of the plan with everything at its default; returns it. */
static struct soak_tensor *soak_plan_add(struct soak_plan *p, enum soak_kind kind, hora_dtype_t dtype, size_t bytes,
                                         enum soak_mem mem, int member)
{
    /* Member 0 starts a unit; a group's further members join it. */
    if (member == 0) p->unit[p->nunits++].first = p->ntensors;
    struct soak_unit *u = &p->unit[p->nunits - 1];
    u->n++;
    struct soak_tensor *t = &p->tensor[p->ntensors++];
    t->kind = kind;
    t->dtype = dtype;
    t->op = HORA_OP_SUM;
    t->count = bytes / hora_dtype_size(dtype);
    t->prescale = t->postscale = 1;
    t->mem = mem;
    t->root = soak_size - 1;
    t->salt = test_mix64(p->iteration * 131 + (uint64_t)p->ntensors);
    return t;
}

/* The first iterations reach the largest size of everything the runtime
 * keeps between operations: the fusion buffer (a group of in-place tensors
 * filling the iteration budget, fused into one response), the coordinator's
 * and the user channel's staging buffers (malloc'd broadcast, allgather
 * result, direct collectives of the largest tensor). The RSS baseline after
 * the warm-up then already holds them. */
static void soak_plan_make_max(struct soak_plan *p, uint64_t it, const struct soak_limits *lim)
{
    const size_t tb = lim->tensor_bytes, ib = lim->iteration_bytes;
    if (it == 0) {
        int members = (int)((ib + tb - 1) / tb);
        if (members > SOAK_MAX_GROUP) members = SOAK_MAX_GROUP;
        for (int m = 0; m < members; m++) {
            struct soak_tensor *t =
                soak_plan_add(p, SOAK_KIND_GROUPED, HORA_DTYPE_F32, ib / (size_t)members, SOAK_MEM_MALLOC, m);
            t->inplace = 1;
            soak_name(t->name, sizeof(t->name), it, "max", 0, m, 0);
        }
        p->ndirect = 2;
        p->direct[0] = (struct soak_direct){
            .kind = SOAK_DIRECT_ALLREDUCE, .dtype = HORA_DTYPE_F64, .op = HORA_OP_SUM, .count = tb / 8, .salt = 1};
        p->direct[1] = (struct soak_direct){.kind = SOAK_DIRECT_REDUCE_SCATTER,
                                            .dtype = HORA_DTYPE_I32,
                                            .op = HORA_OP_MAX,
                                            .count = tb / 4,
                                            .position = 1,
                                            .salt = 2};
    } else {
        struct soak_tensor *t = soak_plan_add(p, SOAK_KIND_BROADCAST, HORA_DTYPE_U8, tb, SOAK_MEM_MALLOC, 0);
        soak_name(t->name, sizeof(t->name), it, "max", 0, -1, 0);
        t = soak_plan_add(p, SOAK_KIND_ALLGATHER, HORA_DTYPE_U8, tb, SOAK_MEM_MALLOC, 0);
        t->ndim = 1;
        t->inner = 1;
        for (int r = 0; r < soak_size; r++) t->first[r] = (int64_t)(tb / 2 / (size_t)soak_size);
        t->count = (size_t)t->first[soak_rank];
        soak_name(t->name, sizeof(t->name), it, "max", 1, -1, 0);
        t = soak_plan_add(p, SOAK_KIND_ALLREDUCE, HORA_DTYPE_F16, tb, SOAK_MEM_MALLOC, 0);
        soak_name(t->name, sizeof(t->name), it, "max", 2, -1, 0);
        p->ndirect = 2;
        p->direct[0] =
            (struct soak_direct){.kind = SOAK_DIRECT_BROADCAST, .dtype = HORA_DTYPE_U8, .count = tb, .salt = 3};
        p->direct[1] = (struct soak_direct){.kind = SOAK_DIRECT_ALLREDUCE,
                                            .dtype = HORA_DTYPE_BF16,
                                            .op = HORA_OP_MAX,
                                            .count = tb / 2,
                                            .inplace = 1,
                                            .position = 2,
                                            .salt = 4};
    }
}

void soak_plan_make(struct soak_plan *p, uint64_t seed, uint64_t it, const struct soak_limits *lim)
{
    test_rng_t rng = test_rng_seeded(test_mix64(seed ^ test_mix64(it + 1)));
    size_t budget = lim->iteration_bytes;

    memset(p, 0, sizeof(*p));
    p->iteration = it;
    if (it < SOAK_WARM_PLANS) {
        soak_plan_make_max(p, it, lim);
        soak_plan_rank_choices(p, test_rng_u64(&rng));
        return;
    }
    p->nunits = 1 + (int)test_rng_below(&rng, SOAK_MAX_UNITS);
    for (int u = 0; u < p->nunits; u++) {
        uint32_t k = test_rng_below(&rng, 100);
        enum soak_kind kind = k < 55   ? SOAK_KIND_ALLREDUCE
                              : k < 67 ? SOAK_KIND_GROUPED
                              : k < 85 ? SOAK_KIND_BROADCAST
                                       : SOAK_KIND_ALLGATHER;
        int members = kind == SOAK_KIND_GROUPED ? 2 + (int)test_rng_below(&rng, SOAK_MAX_GROUP - 1) : 1;
        int fresh = test_rng_below(&rng, 10) < 3, deferred = test_rng_below(&rng, 5) == 0;
        hora_dtype_t dtype = (hora_dtype_t)test_rng_below(&rng, SOAK_DTYPE_COUNT);
        hora_op_t op = (hora_op_t)test_rng_below(&rng, HORA_OP_COUNT);
        size_t es = hora_dtype_size(dtype);
        p->unit[u].first = p->ntensors;
        p->unit[u].n = members;
        for (int m = 0; m < members; m++) {
            struct soak_tensor *t = &p->tensor[p->ntensors++];
            const size_t room = budget > lim->tensor_bytes ? lim->tensor_bytes : budget;
            t->kind = kind;
            t->dtype = dtype;
            t->op = op;
            t->deferred = deferred;
            t->salt = test_rng_u64(&rng);
            t->prescale = t->postscale = 1;
            t->root = -1;
            switch (kind) {
            case SOAK_KIND_ALLREDUCE:
            case SOAK_KIND_GROUPED:
                if (m == 0) {
                    soak_draw_scales(&rng, t);
                    if (dtype == HORA_DTYPE_F32 && test_rng_below(&rng, 5) == 0)
                        t->compression = test_rng_below(&rng, 2) ? HORA_COMPRESSION_FP16 : HORA_COMPRESSION_BF16;
                } else { /* a group shares dtype, op and options */
                    t->prescale = t[-m].prescale;
                    t->postscale = t[-m].postscale;
                    t->compression = t[-m].compression;
                }
                /* Now and then an empty tensor. */
                t->count = test_rng_below(&rng, 100) == 0 ? 0 : soak_draw_count(&rng, es, room);
                t->inplace = test_rng_below(&rng, 2);
                t->mem = soak_draw_mem(&rng, t->inplace);
                soak_name(t->name, sizeof(t->name), it, kind == SOAK_KIND_GROUPED ? "g" : "ar", u,
                          kind == SOAK_KIND_GROUPED ? m : -1, fresh);
                break;
            case SOAK_KIND_BROADCAST:
                t->count = soak_draw_count(&rng, es, room);
                t->root = (int)test_rng_below(&rng, (uint32_t)soak_size);
                t->mem = test_rng_below(&rng, 2) ? SOAK_MEM_SHARED : SOAK_MEM_MALLOC;
                if (test_rng_below(&rng, 3) == 0) {
                    t->ndim = 2;
                    t->dims[0] = (int64_t)t->count;
                    t->dims[1] = 1;
                }
                soak_name(t->name, sizeof(t->name), it, "bc", u, -1, fresh);
                break;
            case SOAK_KIND_ALLGATHER: {
                /* Rows of `inner` elements; each rank its own number of rows (0 too). */
                t->ndim = 1 + (int)test_rng_below(&rng, 3);
                t->inner = 1;
                for (int d = 1; d < t->ndim; d++) t->inner *= t->dims[d] = 1 + (int64_t)test_rng_below(&rng, 6);
                size_t row_bytes = (size_t)t->inner * es, rank_room = room / (size_t)soak_size;
                size_t rows = soak_draw_count(&rng, row_bytes, rank_room > row_bytes ? rank_room : row_bytes);
                for (int r = 0; r < soak_size; r++) t->first[r] = (int64_t)soak_range(&rng, 0, rows);
                t->mem = test_rng_below(&rng, 2) ? SOAK_MEM_SHARED : SOAK_MEM_MALLOC;
                t->count = (size_t)(t->first[soak_rank] * t->inner);
                soak_name(t->name, sizeof(t->name), it, "ag", u, -1, fresh);
                break;
            }
            }
            /* The budget counts the largest rank's bytes, so all ranks agree. */
            size_t bytes = t->count * es;
            if (kind == SOAK_KIND_ALLGATHER) {
                bytes = 0;
                for (int r = 0; r < soak_size; r++) bytes += (size_t)(t->first[r] * t->inner) * es * 2;
            } else if (kind != SOAK_KIND_BROADCAST && !t->inplace) {
                bytes *= 2;
            }
            budget = bytes < budget ? budget - bytes : 0;
            if (t->mem == SOAK_MEM_ARENA) {
                p->arena_bytes = (p->arena_bytes + HORA_ALIGN_BYTES - 1) / HORA_ALIGN_BYTES * HORA_ALIGN_BYTES;
                t->arena_offset = p->arena_bytes;
                p->arena_bytes += t->count * es;
            }
        }
    }

    /* Direct collectives in one plan of three, each at a submission index. */
    if (test_rng_below(&rng, 3) == 0) {
        p->ndirect = 1 + (int)test_rng_below(&rng, SOAK_MAX_DIRECT);
        for (int k = 0; k < p->ndirect; k++) {
            struct soak_direct *d = &p->direct[k];
            d->kind = (enum soak_direct_kind)test_rng_below(&rng, SOAK_DIRECT_KINDS);
            d->dtype = (hora_dtype_t)test_rng_below(&rng, SOAK_DTYPE_COUNT);
            d->op = (hora_op_t)test_rng_below(&rng, HORA_OP_COUNT);
            /* Counts 0 and below the number of ranks are valid too. */
            uint32_t c = test_rng_below(&rng, 10);
            d->count = c == 0   ? 0
                       : c == 1 ? test_rng_below(&rng, (uint32_t)soak_size + 1)
                                : soak_draw_count(&rng, hora_dtype_size(d->dtype), lim->tensor_bytes);
            for (int r = 0; r < soak_size; r++)
                d->counts[r] = test_rng_below(&rng, 4) == 0 ? 0 : test_rng_below(&rng, 5000);
            d->inplace = test_rng_below(&rng, 2);
            d->shared = test_rng_below(&rng, 2);
            d->root = (int)test_rng_below(&rng, (uint32_t)soak_size);
            d->position = (int)test_rng_below(&rng, (uint32_t)p->nunits + 1);
            d->salt = test_rng_u64(&rng);
        }
    }

    soak_plan_rank_choices(p, test_rng_u64(&rng));
}

/* This rank's own choices: submission order, how each request completes. */
static void soak_plan_rank_choices(struct soak_plan *p, uint64_t common)
{
    p->rank_seed = test_mix64(common + (uint64_t)soak_rank * 0x9E3779B97F4A7C15ull + 1);
    test_rng_t mine = test_rng_seeded(p->rank_seed);
    for (int u = 0; u < p->nunits; u++) p->order[u] = u;
    for (int u = p->nunits - 1; u > 0; u--) {
        int j = (int)test_rng_below(&mine, (uint32_t)u + 1), tmp = p->order[u];
        p->order[u] = p->order[j];
        p->order[j] = tmp;
    }
    for (int k = 0; k < p->ntensors; k++) {
        struct soak_tensor *t = &p->tensor[k];
        uint32_t f = test_rng_below(&mine, 10);
        t->finish = f < 5 ? SOAK_FINISH_WAIT : f < 9 ? SOAK_FINISH_POLL : SOAK_FINISH_FREE;
        /* An allgather's result belongs to its request: it must be read first. */
        if (t->kind == SOAK_KIND_ALLGATHER && t->finish == SOAK_FINISH_FREE) t->finish = SOAK_FINISH_WAIT;
    }
}

void soak_tensor_describe(const struct soak_tensor *t, char *out, size_t len)
{
    static const char *const kinds[] = {"allreduce_async", "grouped_allreduce_async", "broadcast_async",
                                        "allgather_async"};
    static const char *const mems[] = {"malloc", "shared", "arena"};
    static const char *const wires[] = {"", " fp16-wire", " bf16-wire"};
    switch (t->kind) {
    case SOAK_KIND_ALLREDUCE:
    case SOAK_KIND_GROUPED:
        snprintf(out, len, "%s '%s' %s %s count %zu pre %g post %g%s %s %s", kinds[t->kind], t->name,
                 hora_dtype_name(t->dtype), hora_op_name(t->op), t->count, t->prescale, t->postscale,
                 wires[t->compression], t->inplace ? "in-place" : "out-of-place", mems[t->mem]);
        break;
    case SOAK_KIND_BROADCAST:
        snprintf(out, len, "%s '%s' %s count %zu root %d %s%s", kinds[t->kind], t->name, hora_dtype_name(t->dtype),
                 t->count, t->root, mems[t->mem], t->ndim ? " shaped" : "");
        break;
    case SOAK_KIND_ALLGATHER:
        snprintf(out, len, "%s '%s' %s ndim %d row %lld elements, this rank %lld rows", kinds[t->kind], t->name,
                 hora_dtype_name(t->dtype), t->ndim, (long long)t->inner, (long long)t->first[soak_rank]);
        break;
    }
}
