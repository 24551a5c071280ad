/* topo.h - who is where: hosts from MPI_Comm_split_type(SHARED) under MPI, or
 * the launcher's host numbers under the store bootstrap, optionally cut into
 * virtual nodes (HORA_FAKE_NODES) so multi-node paths run on one machine. */
#ifndef HORA_TOPO_H
#define HORA_TOPO_H

#include "boot/comm.h"

#include "hora.h"

struct topo {
    int rank, size;             /* in the world communicator */
    int host_rank, host_size;   /* ranks sharing this machine's memory */
    int host_index, host_count; /* this host among all hosts */
    int local_rank, local_size; /* inside this (possibly virtual) node */
    int node_rank, node_count;
    int *host_of;           /* [size]: host index of every world rank */
    int *host_rank_of;      /* [size]: its rank inside its host */
    int *node_members;      /* [local_size]: world ranks of this node, in local-rank order */
    int *cross_members;     /* [node_count]: world ranks with this local rank, one per node,
                             * in node order; NULL unless every node has local_size ranks */
    int homogeneous;        /* every node has the same number of ranks */
    boot_comm_t *host_comm; /* ranks on this host (shared memory reachable) */
    boot_comm_t *node_comm; /* ranks on this (virtual) node */
};

/* Virtual node of a host-local rank when the host's ranks are cut into k
 * contiguous groups of (nearly) equal size. k must be in 1..host_size. */
int topo_fake_node_of(int host_rank, int host_size, int k);

/* Collective over world. host_color < 0: hosts are MPI's shared-memory
 * split (MPI mode); else the ranks of one color share a host (store mode:
 * the launcher's node). HORA_OK, HORA_ERR_MPI, the store's failures or
 * HORA_ERR_CONFIG (fake_nodes larger than the ranks of some host). */
hora_status_t topo_init(struct topo *topo, boot_comm_t *world, int host_color, int fake_nodes);
void topo_free(struct topo *topo);

#endif
