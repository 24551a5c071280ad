/* topo.c - host and node discovery. Node numbers follow the world rank of each
 * node's first rank, so they are the same whichever rank computes them. */
#include "mem/topo.h"

#include <stdlib.h>
#include <string.h>

#include "base/status.h"

int topo_fake_node_of(int host_rank, int host_size, int k)
{
    /* floor(host_rank * k / host_size): groups are contiguous and differ in
     * size by at most one rank. */
    return (int)(((long long)host_rank * k) / host_size);
}

static void topo_free_maps(struct topo *topo)
{
    free(topo->host_of);
    free(topo->host_rank_of);
    free(topo->node_members);
    free(topo->cross_members);
    topo->host_of = topo->host_rank_of = NULL;
    topo->node_members = topo->cross_members = NULL;
}

/* Rank of each group leader among all leaders (ordered by world rank) becomes
 * the group's index; everyone learns the index and the number of groups. */
static hora_status_t topo_index_groups(boot_comm_t *world, boot_comm_t *group, int *index, int *count)
{
    boot_comm_t leaders;
    int info[2] = {0, 0};

    HORA_CHECK(boot_comm_split(world, group->rank == 0 ? 0 : -1, world->rank, &leaders, "group leaders"));
    if (group->rank == 0) {
        info[0] = leaders.rank;
        info[1] = leaders.size;
        boot_comm_free(&leaders);
    }
    HORA_CHECK(boot_comm_bcast(group, info, sizeof(info), 0, "group index"));
    *index = info[0];
    *count = info[1];
    return HORA_OK;
}

hora_status_t topo_init(struct topo *topo, boot_comm_t *world, int host_color, int fake_nodes)
{
    hora_status_t status = HORA_OK;
    int min_host_size;

    topo->host_comm = calloc(1, sizeof(*topo->host_comm));
    topo->node_comm = calloc(1, sizeof(*topo->node_comm));
    if (!topo->host_comm || !topo->node_comm) {
        status = status_fail(HORA_ERR_NO_MEMORY, "out of memory in topology discovery");
        goto err_free_comms;
    }
    topo->host_of = topo->host_rank_of = NULL;
    topo->node_members = topo->cross_members = NULL;
    topo->rank = world->rank;
    topo->size = world->size;
    if (host_color < 0) {
        /* MPI: the ranks that share this machine's memory. */
        MPI_Comm host;
        int err = MPI_Comm_split_type(boot_comm_mpi(world), MPI_COMM_TYPE_SHARED, topo->rank, MPI_INFO_NULL, &host);
        if (err != MPI_SUCCESS) {
            status = status_mpi(err, "MPI_Comm_split_type(SHARED)");
            goto err_free_comms;
        }
        boot_comm_from_mpi(topo->host_comm, host);
        topo->host_comm->borrowed = 0;
    } else {
        status = boot_comm_split(world, host_color, topo->rank, topo->host_comm, "hosts");
        if (status < 0) goto err_free_comms;
    }
    topo->host_rank = topo->host_comm->rank;
    topo->host_size = topo->host_comm->size;

    status = topo_index_groups(world, topo->host_comm, &topo->host_index, &topo->host_count);
    if (status < 0) goto err_free_host;

    status = boot_comm_allreduce_int(world, &topo->host_size, &min_host_size, 1, BOOT_OP_MIN, "host size");
    if (status < 0) goto err_free_host;
    if (fake_nodes > min_host_size) {
        status = status_fail(HORA_ERR_CONFIG,
                             "bad value for HORA_FAKE_NODES: %d virtual nodes per host, but a host "
                             "has only %d ranks (use at most %d)",
                             fake_nodes, min_host_size, min_host_size);
        goto err_free_host;
    }

    if (fake_nodes > 1) {
        int color = topo_fake_node_of(topo->host_rank, topo->host_size, fake_nodes);
        status = boot_comm_split(topo->host_comm, color, topo->host_rank, topo->node_comm, "fake nodes");
    } else {
        status = boot_comm_dup(topo->host_comm, topo->node_comm, "host");
    }
    if (status < 0) goto err_free_host;
    topo->local_rank = topo->node_comm->rank;
    topo->local_size = topo->node_comm->size;
    status = topo_index_groups(world, topo->node_comm, &topo->node_rank, &topo->node_count);
    if (status < 0) goto err_free_node;

    int mine[2] = {topo->host_index, topo->host_rank};
    int *all = malloc(sizeof(int) * 2 * (size_t)topo->size);
    topo->host_of = malloc(sizeof(int) * (size_t)topo->size);
    topo->host_rank_of = malloc(sizeof(int) * (size_t)topo->size);
    if (!all || !topo->host_of || !topo->host_rank_of) {
        free(all);
        status = status_fail(HORA_ERR_NO_MEMORY, "out of memory in topology discovery");
        goto err_free_maps;
    }
    status = boot_comm_allgather(world, mine, sizeof(mine), all, "host map");
    if (status < 0) {
        free(all);
        goto err_free_maps;
    }
    for (int r = 0; r < topo->size; r++) {
        topo->host_of[r] = all[2 * r];
        topo->host_rank_of[r] = all[2 * r + 1];
    }
    free(all);

    /* Rings inside a node and across nodes (hierarchical collectives). */
    topo->node_members = malloc(sizeof(int) * (size_t)topo->local_size);
    if (!topo->node_members) {
        status = status_fail(HORA_ERR_NO_MEMORY, "out of memory in topology discovery");
        goto err_free_maps;
    }
    status = boot_comm_allgather(topo->node_comm, &topo->rank, sizeof(int), topo->node_members, "node members");
    if (status < 0) goto err_free_maps;
    int sizes[2] = {topo->local_size, -topo->local_size}, extremes[2];
    status = boot_comm_allreduce_int(world, sizes, extremes, 2, BOOT_OP_MAX, "node sizes");
    if (status < 0) goto err_free_maps;
    topo->homogeneous = extremes[0] == -extremes[1];
    if (topo->homogeneous) {
        boot_comm_t cross;
        topo->cross_members = malloc(sizeof(int) * (size_t)topo->node_count);
        if (!topo->cross_members) {
            status = status_fail(HORA_ERR_NO_MEMORY, "out of memory in topology discovery");
            goto err_free_maps;
        }
        status = boot_comm_split(world, topo->local_rank, topo->node_rank, &cross, "cross-node rings");
        if (status == HORA_OK) {
            status = boot_comm_allgather(&cross, &topo->rank, sizeof(int), topo->cross_members, "cross-node members");
            boot_comm_free(&cross);
        }
        if (status < 0) goto err_free_maps;
    }
    return HORA_OK;

err_free_maps:
    topo_free_maps(topo);

err_free_node:
    boot_comm_free(topo->node_comm);
err_free_host:
    boot_comm_free(topo->host_comm);
err_free_comms:
    free(topo->host_comm);
    free(topo->node_comm);
    topo->host_comm = topo->node_comm = NULL;
    return status;
}

void topo_free(struct topo *topo)
{
    topo_free_maps(topo);
    for (int i = 0; i < 2; i++) {
        boot_comm_t **c = i ? &topo->host_comm : &topo->node_comm;
        if (*c) boot_comm_free(*c);
        free(*c);
        *c = NULL;
    }
}
