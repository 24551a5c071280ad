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

enum rt_channel { RT_CHANNEL_USER = 0, RT_CHANNEL_COORD = 1, RT_CHANNEL_COUNT = 2 };

struct coord;

struct hora_rt {
    int initialized;
    int mpi_owned;        /* hora called MPI_Init_thread (finalised at exit) */
    MPI_Comm world;       /* hora's private duplicate of MPI_COMM_WORLD */
    struct config cfg;
    struct topo topo;
    struct mem_pool pool;
    long spin_count;      /* resolved HORA_SPIN_COUNT */
    /* Each channel is an independent set of connections, so the collectives a
     * user calls directly and those the coordinator thread runs never share
     * positions, descriptors or tags. Connected transports have ops != NULL. */
    struct tp transports[RT_CHANNEL_COUNT][TP_KIND_COUNT];
    struct tp *ring_tp[RT_CHANNEL_COUNT]; /* what each channel's flat ring uses */
    uint64_t op_seq[RT_CHANNEL_COUNT];    /* collectives issued per channel (same on every rank) */
    struct coord *coord;                   /* the coordinator thread (coord.c) */
    void *scratch[RT_CHANNEL_COUNT]; /* shared staging for non-shared buffers */
    size_t scratch_bytes[RT_CHANNEL_COUNT];
};

extern struct hora_rt hora_rt;

/* Shared staging of at least bytes (grown on demand, kept until shutdown). */
hora_status_t rt_scratch(int channel, size_t bytes, void **ptr);

#endif
