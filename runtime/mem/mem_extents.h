/* mem_extents.h - the block allocator of the pools (mem_pool.c's shared
 * host memory, mem_dev.c's device memory): a range of offsets, first fit,
 * freed blocks coalesced. It hands out offsets only; what backs them (pages
 * committed with fallocate, a cudaMalloc) is the pool's business. Not
 * thread-safe: the pools lock around it. */
#ifndef HORA_MEM_EXTENTS_H
#define HORA_MEM_EXTENTS_H

#include <stdbool.h>
#include <stddef.h>

#include "hora.h"

struct mem_extent {
    size_t offset, bytes;
};

struct mem_extents {
    struct mem_extent *free_list; /* sorted by offset, coalesced */
    size_t free_count, free_cap;
    struct mem_extent *used_list; /* sorted by offset */
    size_t used_count, used_cap;
};

/* One free extent [offset, offset + bytes). */
hora_status_t mem_extents_init(struct mem_extents *e, size_t offset, size_t bytes);
void mem_extents_free(struct mem_extents *e);
/* The first free extent of at least bytes: true and *offset, or false (no
 * room). mem_extents_take then marks [offset, offset + bytes) used; the
 * caller may fail in between (committing the memory) and take nothing. */
bool mem_extents_find(const struct mem_extents *e, size_t bytes, size_t *offset);
hora_status_t mem_extents_take(struct mem_extents *e, size_t offset, size_t bytes);
/* Free the used block that starts at offset: true and its size, or false
 * when no block starts there. A failure to grow the free list leaks the
 * block (reported as HORA_ERR_NO_MEMORY) but keeps the lists consistent. */
hora_status_t mem_extents_give(struct mem_extents *e, size_t offset, size_t *bytes);

#endif
