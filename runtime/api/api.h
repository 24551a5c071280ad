/* api.h - the runtime's one process-wide instance, behind the public API.
 * Only api/ reads it: every layer below gets the parts it needs passed down
 * (struct coll_ctx, struct coord, the pool, the topology, the settings). */
#ifndef HORA_API_H
#define HORA_API_H

#include <mpi.h>

#include "base/config.h"
#include "coll/coll.h"
#include "coord/coord.h"
#include "mem/mem_dev.h"
#include "mem/mem_pool.h"
#include "mem/topo.h"

struct hora_rt {
    int initialized;
    int mpi_owned;        /* hora called MPI_Init_thread (finalised at exit) */
    MPI_Comm world;       /* hora's private duplicate of MPI_COMM_WORLD */
    struct config cfg;
    struct topo topo;
    struct mem_pool pool;
    struct mem_dev dev;   /* the device and its pool (dev.device < 0: no device support) */
    struct coll_ctx coll; /* the transports and the collectives' state */
    struct coord *coord;  /* the coordinator thread; NULL outside init .. shutdown */
    /* The runtime ended without the peers (hora_abort here, or a shutdown
     * after a peer's abort or death): no MPI_Finalize at exit, no hora_init. */
    int aborted;
};

extern struct hora_rt hora_rt;

/* HORA_OK when the runtime is up, else HORA_ERR_NOT_INITIALIZED naming what. */
hora_status_t api_check_initialized(const char *what);

#endif
