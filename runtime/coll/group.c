/* group.c - what the ring and the one-shot algorithms share: shards,
 * progress positions, chunking, and the descriptors ranks publish over
 * peer memory to check they are in the same call. */
#include "coll/algo.h"
#include "base/status.h"

#define GROUP_CHUNK_BITS 20
#define GROUP_STAGE_BITS 12
#define GROUP_MAX_CHUNKS (((uint64_t)1 << GROUP_CHUNK_BITS) - 2)

void coll_shard(size_t count, int n, int r, size_t *offset, size_t *shard_count)
{
    size_t base = n > 0 ? count / (size_t)n : 0, extra = n > 0 ? count % (size_t)n : 0;
    size_t i = (size_t)r;
    *shard_count = base + (i < extra ? 1 : 0);
    *offset = i * base + (i < extra ? i : extra);
}

/* Position (op, stage, chunks done): compares like the tuple. */
uint64_t group_position(uint64_t op, unsigned stage, uint64_t chunks_done)
{
    return (op << (GROUP_CHUNK_BITS + GROUP_STAGE_BITS)) | ((uint64_t)stage << GROUP_CHUNK_BITS) | chunks_done;
}

hora_status_t group_begin(struct coll_group *g)
{
    if (g->n < 2) return HORA_OK;
    if (!(g->tp->ops->caps & TP_CAP_PEER_MEMORY)) {
        hora_status_t status = tp_notice_known(g->tp->env);
        g->open = status == HORA_OK && g->outcome.words != NULL;
        return status;
    }
    const struct tp_mem_op op = {
        .op_seq = g->op_seq, .what = g->what, .members = g->members, .n = g->n, .direct = g->direct != 0};
    g->open = 1;
    return g->tp->ops->mem_op_begin(g->tp, &op);
}

hora_status_t group_end(struct coll_group *g, hora_status_t status)
{
    if (!g->open) return status;
    g->open = 0;
    if (!(g->tp->ops->caps & TP_CAP_PEER_MEMORY)) return group_agree(g, status);
    return g->tp->ops->mem_op_end(g->tp, status);
}

/* Elements per chunk: from the chunk size, grown so that no segment needs
 * more chunks than the position encoding holds. The same on every rank. */
size_t group_chunk_elems(const struct coll_group *g, size_t max_segment, size_t esize)
{
    size_t elems = g->chunk_bytes / esize;
    if (elems == 0) elems = 1;
    if (max_segment / elems >= GROUP_MAX_CHUNKS) elems = max_segment / GROUP_MAX_CHUNKS + 1;
    return elems;
}

static const char *group_kind_name(uint32_t kind)
{
    switch (kind) {
    case GROUP_KIND_ALLREDUCE: return "allreduce";
    case GROUP_KIND_REDUCE_SCATTER: return "reduce_scatter";
    case GROUP_KIND_ALLGATHER: return "allgather";
    case GROUP_KIND_BROADCAST: return "broadcast";
    }
    return "unknown";
}

struct tp_mem_desc group_desc(const struct coll_group *g, uint32_t kind, hora_dtype_t dtype, hora_op_t op, int root,
                              size_t count, size_t chunk_elems)
{
    struct tp_mem_desc d = {0};
    d.op_seq = g->op_seq;
    d.kind = kind;
    d.dtype = (uint32_t)dtype;
    d.op = (uint32_t)op;
    d.root = root;
    d.count = count;
    d.chunk_elems = chunk_elems;
    return d;
}

/* Both ranks must be in the same call with the same arguments. */
hora_status_t group_desc_check(const struct coll_group *g, const struct tp_mem_desc *mine,
                               const struct tp_mem_desc *other, int peer)
{
    if (other->op_seq != mine->op_seq || other->kind != mine->kind || other->dtype != mine->dtype ||
        other->op != mine->op || other->count != mine->count || other->root != mine->root ||
        other->chunk_elems != mine->chunk_elems)
        return status_fail(HORA_ERR_MISMATCH,
                           "rank %d called %s #%llu (count %llu, %s, %s, root %d, chunk %llu) but rank %d called "
                           "%s #%llu (count %llu, %s, %s, root %d, chunk %llu): every rank must call the same "
                           "collectives in the same order with the same arguments",
                           g->tp->env->topo->rank, group_kind_name(mine->kind), (unsigned long long)mine->op_seq,
                           (unsigned long long)mine->count, hora_dtype_name((hora_dtype_t)mine->dtype),
                           hora_op_name((hora_op_t)mine->op), mine->root, (unsigned long long)mine->chunk_elems, peer,
                           group_kind_name(other->kind), (unsigned long long)other->op_seq,
                           (unsigned long long)other->count, hora_dtype_name((hora_dtype_t)other->dtype),
                           hora_op_name((hora_op_t)other->op), other->root, (unsigned long long)other->chunk_elems);
    return HORA_OK;
}

hora_status_t group_mem_offsets(struct coll_group *g, const void *a, const void *b, size_t bytes, uint64_t *oa,
                                uint64_t *ob)
{
    if (!g->tp->ops->mem_local_offset(g->tp, a, bytes, oa) || !g->tp->ops->mem_local_offset(g->tp, b, bytes, ob))
        return status_fail(HORA_ERR_INVALID_ARG, "%s transport: buffer is not in the shared pool", g->tp->ops->name);
    return HORA_OK;
}
