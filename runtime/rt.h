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

struct hora_rt {
    int initialized;
    int mpi_owned;        /* hora called MPI_Init_thread (finalised at exit) */
    MPI_Comm world;       /* hora's private duplicate of MPI_COMM_WORLD */
    struct config cfg;
    struct topo topo;
    struct mem_pool pool;
    long spin_count;      /* resolved HORA_SPIN_COUNT */
    struct tp transports[TP_KIND_COUNT]; /* connected ones have ops != NULL */
    struct tp *ring_tp;   /* what the flat ring uses */
    uint64_t op_seq;      /* direct collectives issued so far (same on every rank) */
    void *scratch;        /* shared staging for non-shared user buffers */
    size_t scratch_bytes;
};

extern struct hora_rt hora_rt;

/* Shared staging of at least bytes (grown on demand, kept until shutdown). */
hora_status_t rt_scratch(size_t bytes, void **ptr);

#endif
