/* coord_fuse.h - fusion planning (coord_fuse.c), and the layout of a fused
 * buffer that coord_exec.c packs by. */
#ifndef HORA_COORD_FUSE_H
#define HORA_COORD_FUSE_H

#include <stddef.h>

#include "coord/coord_wire.h"

/* A tensor's offset in a fused buffer: the bytes before it, aligned. */
static inline size_t coord_align(size_t v) { return (v + HORA_ALIGN_BYTES - 1) / HORA_ALIGN_BYTES * HORA_ALIGN_BYTES; }

/* The dtype a request's data travels in (its compression's, else its own). */
static inline hora_dtype_t coord_wire_dtype(const struct coord_meta *m)
{
    if (m->compression == HORA_COMPRESSION_FP16) return HORA_DTYPE_F16;
    if (m->compression == HORA_COMPRESSION_BF16) return HORA_DTYPE_BF16;
    return (hora_dtype_t)m->dtype;
}

/* The bytes of a response's buffer: its tensors one after another, each at
 * coord_align of the bytes before it, in the dtype they travel in (the
 * layout coord_exec.c packs them in; hora-sim sizes its messages by it). */
size_t coord_fuse_bytes(const struct coord_response *r);

/* Fuse list in place (threshold 0: no fusion): a pure function of the
 * threshold and the list, so tools/sim's hora-sim runs this very code on the
 * responses it builds. Merged responses take over their tensors' names and
 * metas; a failed allocation leaves that response unfused. */
void coord_fuse_list(size_t threshold, struct coord_responses *list);

#endif
