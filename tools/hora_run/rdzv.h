/* rdzv.h - hora-run's rendezvous of hosts through the store (README.md:
 * the keys of a generation). */
#ifndef HORA_RUN_RDZV_H
#define HORA_RUN_RDZV_H

#include <signal.h>

#include "boot/store.h"

typedef struct {
    int min_nodes, max_nodes;
    int nproc;                   /* this host's K */
    int order_key;               /* its place in the node order (lowest first); -1: the join order */
    int returning;               /* --elastic: this host comes back from the previous generation with workers */
    double join_timeout_s;       /* for MIN hosts to come */
    double settle_s;             /* after MIN, how long more hosts may come before the round closes */
    volatile sig_atomic_t *stop; /* set by a signal: give up waiting */
} rdzv_opts_t;

/* This host's place in a generation. */
typedef struct {
    int generation;
    int node_rank, node_count;
    int rank_base, world_size;
} rdzv_world_t;

/* Generation keys: "gen<G>/<name>". */
void rdzv_key(char *out, size_t bytes, int generation, const char *name);

/* The generation a host that starts now joins: 0, or the one after the
 * last closed one ("current"). */
hora_status_t rdzv_first_generation(boot_store_t *store, int *generation);

/* Join generation `generation` (and the next ones while this host comes
 * after a round closed): count in, wait for MIN hosts (join timeout), then
 * up to the settle time for MAX; the first host to close the round fixes
 * its size N; hosts past N are late and join the next generation. Every
 * host stores its K and its place in the node order (opts->order_key);
 * global ranks are the prefix sums in node order.
 * HORA_ERR_TIMEOUT "generation G: H of MIN hosts joined within S s" when
 * MIN is not reached; HORA_ERR_SHUTDOWN when *opts->stop was set. */
hora_status_t rdzv_join(boot_store_t *store, const rdzv_opts_t *opts, int generation, rdzv_world_t *world);

/* A get that waits up to timeout_s, in slices, giving up (HORA_ERR_SHUTDOWN)
 * once *stop is set. */
hora_status_t rdzv_get(boot_store_t *store, const char *key, double timeout_s, volatile sig_atomic_t *stop,
                       void **value);

#endif
