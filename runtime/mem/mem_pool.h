/* mem.h - each rank's shared-memory pool.
 *
 * At init every rank creates one POSIX shared-memory object with a large
 * virtual size (HORA_SHM_POOL_BYTES), the ranks on its host map it, and it is
 * unlinked as soon as they all have (a crash afterwards leaves nothing in
 * /dev/shm). hora_mem_alloc carves page-aligned blocks out of it and commits
 * their pages with fallocate, so running out of /dev/shm is a clean
 * HORA_ERR_NO_MEMORY, never a SIGBUS later. The virtual size costs nothing;
 * what /dev/shm must hold is what gets committed, which hora_init checks for
 * the runtime's own needs (mem_pool_check_space). A peer names memory in this pool by
 * its offset; mem_pool_peer turns that back into a local address. */
#ifndef HORA_MEM_H
#define HORA_MEM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hora.h"
#include "mem/mem_extents.h"
#include "mem/topo.h"

/* Bytes at the start of every pool reserved for transport control blocks
 * (and the shm transport's slots for small operations). */
#define MEM_POOL_CTRL_BYTES ((size_t)512 * 1024)

struct mem_pool {
    int fd;              /* own object, kept open for fallocate */
    uint8_t *base;       /* own mapping */
    size_t bytes;        /* own virtual size */
    int peer_count;      /* host ranks (1 when not shared) */
    int self;            /* host rank */
    uint8_t **peer_base; /* [peer_count], NULL where not mapped; [self] == base */
    size_t *peer_bytes;
    pthread_mutex_t lock;
    struct mem_extents blocks; /* offsets handed out by mem_pool_alloc */
};

/* Collective over world, before mem_pool_init: has /dev/shm on every host
 * room for each of its ranks to commit per_rank_bytes? HORA_OK, or
 * HORA_ERR_NO_MEMORY on every rank: the ranks of a host that is short say
 * how much is free and what to change (why: what the bytes are for, naming
 * the settings), the others which host and rank to look at. */
hora_status_t mem_pool_check_space(const struct topo *topo, boot_comm_t *world, size_t per_rank_bytes, const char *why);

/* Collective over topo->host_comm when share is true. */
hora_status_t mem_pool_init(struct mem_pool *pool, const struct topo *topo, size_t bytes, bool share);
void mem_pool_free(struct mem_pool *pool);

/* what: who wants the memory, for the message of a failure
 * ("hora_mem_alloc(4096)", "the coordinator's fusion buffer", ...): a
 * runtime buffer must not be reported as the caller's hora_mem_alloc. */
hora_status_t mem_pool_alloc(struct mem_pool *pool, size_t bytes, const char *what, void **ptr);
/* "12.0 MiB": for messages. */
const char *mem_format_bytes(size_t bytes, char *buf, size_t len);
hora_status_t mem_pool_release(struct mem_pool *pool, void *ptr);

/* true when [ptr, ptr+bytes) lies inside this rank's pool; *offset set then. */
bool mem_pool_offset(const struct mem_pool *pool, const void *ptr, size_t bytes, uint64_t *offset);
/* Address of a peer's pool byte at offset (NULL when that peer is not mapped). */
void *mem_pool_peer(const struct mem_pool *pool, int host_rank, uint64_t offset);

#endif
