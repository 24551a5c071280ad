/* coord_set.h - a process set's data path (coord_set.c): MPI on c->comm,
 * the same contracts as coll's (host memory). root: a place in the set. */
#ifndef HORA_COORD_SET_H
#define HORA_COORD_SET_H

#include "coord/coord_core.h"

hora_status_t coord_set_allreduce(struct coord *c, void *buf, size_t count, hora_dtype_t dtype, hora_op_t op);
hora_status_t coord_set_broadcast(struct coord *c, void *buf, size_t count, hora_dtype_t dtype, int root);
hora_status_t coord_set_allgatherv(struct coord *c, const void *send, void *recv, const size_t *counts,
                                   hora_dtype_t dtype);

#endif
