/* rt.h - the runtime's process-wide state (one instance, hora_rt). Only hora.c
 * creates and destroys it; collectives and transports read it. */
#ifndef HORA_RT_H
#define HORA_RT_H

#include <mpi.h>
#include <stdint.h>

#include "config.h"
#include "mem.h"
#include "topo.h"
#include "tp.h"

/* Who runs a collective: the user's thread (direct collectives) or the
 * coordinator thread. Each purpose has its own connections, so the two never
 * interleave on the wire. */
enum rt_purpose { RT_PURPOSE_USER = 0, RT_PURPOSE_COORD = 1, RT_PURPOSE_COUNT = 2 };
/* Which ring: all ranks, the ranks of this node, or one rank per node. */
enum rt_scope { RT_SCOPE_FLAT = 0, RT_SCOPE_NODE = 1, RT_SCOPE_CROSS = 2, RT_SCOPE_COUNT = 3 };
/* A channel = (purpose, scope): its own transport instance, control blocks,
 * communicator and operation counter. */
#define RT_CHANNEL_COUNT (RT_PURPOSE_COUNT * RT_SCOPE_COUNT)
static inline int rt_channel(int purpose, int scope) { return purpose * RT_SCOPE_COUNT + scope; }

struct coord;

struct hora_rt {
    int initialized;
    int mpi_owned;        /* hora called MPI_Init_thread (finalised at exit) */
    MPI_Comm world;       /* hora's private duplicate of MPI_COMM_WORLD */
    struct config cfg;
    struct topo topo;
    struct mem_pool pool;
    long spin_count;      /* resolved HORA_SPIN_COUNT */
    int spin_auto;        /* HORA_SPIN_COUNT=-1: the coordinator spins only while coord_waiters > 0 */
    /* Application threads blocked in hora_wait. While none is, the framework
     * is computing on this rank's cores, and a coordinator busy-waiting for a
     * slower peer would take that time from it. */
    _Atomic int coord_waiters;
    /* Connected transports have ops != NULL; ring_tp[channel] is NULL for a
     * scope this job does not use (node rings with one rank per node, ...). */
    struct tp transports[RT_CHANNEL_COUNT][TP_KIND_COUNT];
    struct tp *ring_tp[RT_CHANNEL_COUNT];
    uint64_t op_seq[RT_CHANNEL_COUNT];    /* collectives issued per channel (same on every rank) */
    struct coord *coord;                   /* the coordinator thread (coord.c) */
    void *scratch[RT_PURPOSE_COUNT]; /* shared staging for non-shared buffers */
    size_t scratch_bytes[RT_PURPOSE_COUNT];
    int hierarchical;                /* allreduce = node reduce-scatter + cross ring + node allgather */
};

extern struct hora_rt hora_rt;

/* Shared staging of at least bytes (grown on demand, kept until shutdown). */
hora_status_t rt_scratch(int purpose, size_t bytes, void **ptr);

#endif
