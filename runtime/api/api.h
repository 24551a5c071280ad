/* api.h - the runtime's one process-wide instance, behind the public API.
 * Only api/ reads it: every layer below gets the parts it needs passed down
 * (struct coll_ctx, struct coord, the pool, the topology, the settings). */
#ifndef HORA_API_H
#define HORA_API_H

#include <mpi.h>
#include <pthread.h>

#include "base/config.h"
#include "coll/coll.h"
#include "coord/coord.h"
#include "mem/mem_dev.h"
#include "mem/mem_pool.h"
#include "mem/topo.h"

/* A process set (api_sets.c). Members have a communicator and a
 * coordinator of their own; every rank knows every set's members. */
struct api_set {
    int id;              /* > 0 */
    int size, rank;      /* rank: this rank's place among the members, -1 outside */
    int *members;        /* world ranks, ascending */
    MPI_Comm comm;       /* members only, else MPI_COMM_NULL */
    struct coord *coord; /* members only */
};

struct hora_rt {
    int initialized;
    int mpi_owned;          /* hora called MPI_Init_thread (finalised at exit) */
    int store;              /* the store bootstrap (api_elastic.c): no MPI in this process */
    MPI_Comm world;         /* hora's private duplicate of MPI_COMM_WORLD; MPI_COMM_NULL with the store */
    boot_comm_t boot_world; /* the bootstrap's world: over world, or over the rendezvous store */
    struct config cfg;
    struct topo topo;
    struct mem_pool pool;
    struct mem_dev dev;   /* the device and its pool (dev.device < 0: no device support) */
    struct coll_ctx coll; /* the transports and the collectives' state */
    struct coord *coord;  /* the coordinator thread; NULL outside init .. shutdown */
    /* The runtime ended without the peers (hora_abort here, or a shutdown
     * after a peer's abort or death): no MPI_Finalize at exit, no hora_init. */
    int aborted;
    /* Process sets by id (slot 0, the world, stays NULL; freed sets leave
     * NULL). Created and freed collectively; lookups take sets_lock. */
    struct api_set **sets;
    int set_slots;
    pthread_mutex_t sets_lock;
    /* The timeline the coordinators write (api_timeline.c): HORA_TIMELINE
     * at init, then hora_timeline_start/stop ("" = none), and whether they
     * mark their cycles. timeline_lock serialises those calls and a process
     * set's creation, which starts its coordinator with them; it is taken
     * before sets_lock. */
    pthread_mutex_t timeline_lock;
    char timeline[sizeof(((struct config *)0)->timeline)];
    int timeline_mark_cycles;
};

/* api_rt.c: the instance (hora.c builds it and tears it down). */
extern struct hora_rt hora_rt;

/* HORA_OK when the runtime is up, else HORA_ERR_NOT_INITIALIZED naming what. */
hora_status_t api_check_initialized(const char *what);

/* api_sets.c. The coordinator that runs requests of process set `set` on
 * this rank, with the set's size and this rank's place in it; an unknown
 * set or one this rank is not in fails naming what and name. */
hora_status_t api_set_coord(int set, const char *what, const char *name, struct coord **coord, int *size, int *rank);
/* The coordinator a request was submitted to, NULL once its set is freed
 * (the request has completed then). */
struct coord *api_request_coord(const struct hora_request *req);
/* The place of world_rank among set's members (set 0: world_rank itself), -1 if not a member. */
int api_set_place(int set, int world_rank);
/* hora_init (HORA_PROCESS_SETS) and hora_shutdown / hora_abort. */
hora_status_t api_sets_create_static(const char *spec);
void api_sets_stop_all(void);
void api_sets_abort_all(double wait_s);
/* api_elastic.c: the store bootstrap. Is it the one cfg picks; this
 * worker's world (the first generation's from hora-run's environment, a
 * later one's from its assignment) and host; the grace transports give the
 * launcher's verdict on a lost peer; the watcher of "gen<G>/failed"; a
 * shutdown's outcome (a loss ends the generation); may hora_init run again
 * after an abort (a loss in an elastic world)? */
int api_boot_is_store(const struct config *cfg);
hora_status_t api_boot_open(boot_comm_t *world, int *host_color);
double api_boot_grace_s(void);
hora_status_t api_boot_watch_start(struct coll_ctx *coll);
void api_boot_watch_stop(void);
void api_boot_note_shutdown(hora_status_t status);
int api_boot_can_reinit(void);
/* api_preempt.c: HORA_PREEMPT_FILE's check at hora_init (a directory, or a
 * file whose directory does not exist, is HORA_ERR_CONFIG naming it). */
hora_status_t api_preempt_check_config(const struct config *cfg);

#endif
