/* tp_shm.h - the same-host protocol of tp_shm.c (positions, descriptors,
 * one outcome per operation, small slots) on a set of control blocks of the
 * area (tp_shm_area.h), which tp_cudaipc.c runs on its own set. Internal to
 * tp/. */
#ifndef HORA_TP_SHM_H
#define HORA_TP_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "tp/tp.h"
#include "tp/tp_shm_area.h"

/* The protocol's slots (tp_shm.c), which tp_cudaipc.c shares: connect takes
 * the control-block set; the rest work on the set connected. */
hora_status_t tp_shm_connect_set(struct tp *tp, enum tp_shm_set set);
void tp_shm_close(struct tp *tp);
hora_status_t tp_shm_mem_publish(struct tp *tp, const struct tp_mem_desc *desc);
hora_status_t tp_shm_mem_desc(struct tp *tp, int peer, struct tp_mem_desc *desc);
hora_status_t tp_shm_mem_post(struct tp *tp, uint64_t position);
hora_status_t tp_shm_mem_wait(struct tp *tp, int peer, uint64_t want);
hora_status_t tp_shm_mem_op_begin(struct tp *tp, const struct tp_mem_op *op);
hora_status_t tp_shm_mem_op_end(struct tp *tp, hora_status_t status);
hora_status_t tp_shm_mem_op_check(struct tp *tp);
hora_status_t tp_shm_mem_small_post(struct tp *tp, uint64_t position, const struct tp_mem_desc *desc, const void *data,
                                    size_t bytes);
hora_status_t tp_shm_mem_small_wait(struct tp *tp, int peer, uint64_t position, struct tp_mem_desc *desc,
                                    const void **data);

#endif
