/* coll.h - collectives for a purpose (user or coordinator; coll.c): what the public direct
 * collectives and the coordinator's data path both call. */
#ifndef HORA_COLL_H
#define HORA_COLL_H

#include <stddef.h>

#include "hora.h"

/* Optional extras for one call. */
struct coll_hooks {
    size_t chunk_bytes; /* 0: HORA_CHUNK_BYTES */
    /* Called when a ring phase ("REDUCE_SCATTER", "ALLGATHER") begins (begin=1) and ends. */
    void (*on_phase)(void *ctx, const char *phase, int begin);
    void *ctx;
};

hora_status_t coll_allreduce(int purpose, const void *send, void *recv, size_t count, hora_dtype_t dtype,
                             hora_op_t op, const struct coll_hooks *hooks);
hora_status_t coll_allgatherv(int purpose, const void *send, void *recv, const size_t *counts,
                              hora_dtype_t dtype);
hora_status_t coll_broadcast(int purpose, void *buf, size_t count, hora_dtype_t dtype, int root);

#endif
