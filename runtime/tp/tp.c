/* tp.c - the transport registry and the stand-ins for unsupported slots. */
#include "tp/tp.h"

#include "base/status.h"

const struct tp_ops *const tp_registry[TP_KIND_COUNT] = {
    [TP_KIND_SHM] = &tp_shm_ops,
    [TP_KIND_CUDAIPC] = &tp_cudaipc_ops,
    [TP_KIND_UCX] = &tp_ucx_ops,
    [TP_KIND_MPI] = &tp_mpi_ops,
};

#define TP_UNSUPPORTED(what) status_fail(HORA_ERR_UNSUPPORTED, "transport %s has no %s", tp->ops->name, what)

hora_status_t tp_unsupported_isend(struct tp *tp, int p, const void *b, size_t n, int t, struct tp_req *r)
{
    (void)p, (void)b, (void)n, (void)t, (void)r;
    return TP_UNSUPPORTED("isend");
}
hora_status_t tp_unsupported_irecv(struct tp *tp, int p, void *b, size_t n, int t, struct tp_req *r)
{
    (void)p, (void)b, (void)n, (void)t, (void)r;
    return TP_UNSUPPORTED("irecv");
}
hora_status_t tp_unsupported_wait(struct tp *tp, int p, struct tp_req *r)
{
    (void)p, (void)r;
    return TP_UNSUPPORTED("wait");
}
hora_status_t tp_unsupported_mem_publish(struct tp *tp, const struct tp_mem_desc *d)
{
    (void)d;
    return TP_UNSUPPORTED("peer memory");
}
hora_status_t tp_unsupported_mem_desc(struct tp *tp, int p, struct tp_mem_desc *d)
{
    (void)p, (void)d;
    return TP_UNSUPPORTED("peer memory");
}
hora_status_t tp_unsupported_mem_post(struct tp *tp, uint64_t pos)
{
    (void)pos;
    return TP_UNSUPPORTED("peer memory");
}
hora_status_t tp_unsupported_mem_wait(struct tp *tp, int p, uint64_t pos)
{
    (void)p, (void)pos;
    return TP_UNSUPPORTED("peer memory");
}
bool tp_unsupported_mem_local_offset(struct tp *tp, const void *p, size_t n, uint64_t *o)
{
    (void)tp, (void)p, (void)n, (void)o;
    return false;
}
void *tp_unsupported_mem_peer_ptr(struct tp *tp, int p, uint64_t o)
{
    (void)tp, (void)p, (void)o;
    return NULL;
}
hora_status_t tp_unsupported_mem_op_begin(struct tp *tp, const struct tp_mem_op *op)
{
    (void)op;
    return TP_UNSUPPORTED("peer memory");
}
hora_status_t tp_unsupported_mem_op_end(struct tp *tp, hora_status_t status)
{
    (void)tp;
    return status;
}
hora_status_t tp_unsupported_mem_op_check(struct tp *tp)
{
    (void)tp;
    return HORA_OK;
}
hora_status_t tp_unsupported_mem_small_post(struct tp *tp, uint64_t pos, const struct tp_mem_desc *d, const void *b,
                                            size_t n)
{
    (void)pos, (void)d, (void)b, (void)n;
    return TP_UNSUPPORTED("small-operation slots");
}
hora_status_t tp_unsupported_mem_small_wait(struct tp *tp, int p, uint64_t pos, struct tp_mem_desc *d, const void **b)
{
    (void)p, (void)pos, (void)d, (void)b;
    return TP_UNSUPPORTED("small-operation slots");
}
