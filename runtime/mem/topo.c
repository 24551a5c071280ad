/* topo.c - host and node discovery. Node numbers follow the world rank of each
 * node's first rank, so they are the same whichever rank computes them. */
#include "mem/topo.h"

#include <stdlib.h>

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
static hora_status_t topo_index_groups(MPI_Comm world, MPI_Comm group, int *index, int *count)
{
    int group_rank, world_rank, err;
    MPI_Comm leaders = MPI_COMM_NULL;
    int info[2] = {0, 0};

    MPI_Comm_rank(group, &group_rank);
    MPI_Comm_rank(world, &world_rank);
    err = MPI_Comm_split(world, group_rank == 0 ? 0 : MPI_UNDEFINED, world_rank, &leaders);
    if (err != MPI_SUCCESS) return status_mpi(err, "MPI_Comm_split(leaders)");
    if (group_rank == 0) {
        MPI_Comm_rank(leaders, &info[0]);
        MPI_Comm_size(leaders, &info[1]);
        MPI_Comm_free(&leaders);
    }
    err = MPI_Bcast(info, 2, MPI_INT, 0, group);
    if (err != MPI_SUCCESS) return status_mpi(err, "MPI_Bcast(group index)");
    *index = info[0];
    *count = info[1];
    return HORA_OK;
}

hora_status_t topo_init(struct topo *topo, MPI_Comm world, int fake_nodes)
{
    hora_status_t status;
    int err, min_host_size;

    topo->host_comm = topo->node_comm = MPI_COMM_NULL;
    topo->host_of = topo->host_rank_of = NULL;
    topo->node_members = topo->cross_members = NULL;
    MPI_Comm_rank(world, &topo->rank);
    MPI_Comm_size(world, &topo->size);
    err = MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, topo->rank, MPI_INFO_NULL, &topo->host_comm);
    if (err != MPI_SUCCESS) return status_mpi(err, "MPI_Comm_split_type(SHARED)");
    MPI_Comm_rank(topo->host_comm, &topo->host_rank);
    MPI_Comm_size(topo->host_comm, &topo->host_size);

    status = topo_index_groups(world, topo->host_comm, &topo->host_index, &topo->host_count);
    if (status < 0) goto err_free_host;

    err = MPI_Allreduce(&topo->host_size, &min_host_size, 1, MPI_INT, MPI_MIN, world);
    if (err != MPI_SUCCESS) {
        status = status_mpi(err, "MPI_Allreduce(host size)");
        goto err_free_host;
    }
    if (fake_nodes > min_host_size) {
        status = status_fail(HORA_ERR_CONFIG,
                             "bad value for HORA_FAKE_NODES: %d virtual nodes per host, but a host "
                             "has only %d ranks (use at most %d)",
                             fake_nodes, min_host_size, min_host_size);
        goto err_free_host;
    }

    if (fake_nodes > 1) {
        int color = topo_fake_node_of(topo->host_rank, topo->host_size, fake_nodes);
        err = MPI_Comm_split(topo->host_comm, color, topo->host_rank, &topo->node_comm);
        if (err != MPI_SUCCESS) {
            status = status_mpi(err, "MPI_Comm_split(fake nodes)");
            goto err_free_host;
        }
    } else {
        err = MPI_Comm_dup(topo->host_comm, &topo->node_comm);
        if (err != MPI_SUCCESS) {
            status = status_mpi(err, "MPI_Comm_dup(host)");
            goto err_free_host;
        }
    }
    MPI_Comm_rank(topo->node_comm, &topo->local_rank);
    MPI_Comm_size(topo->node_comm, &topo->local_size);
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
    err = MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, world);
    if (err != MPI_SUCCESS) {
        free(all);
        status = status_mpi(err, "MPI_Allgather(host map)");
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
    err = MPI_Allgather(&topo->rank, 1, MPI_INT, topo->node_members, 1, MPI_INT, topo->node_comm);
    if (err != MPI_SUCCESS) {
        status = status_mpi(err, "MPI_Allgather(node members)");
        goto err_free_maps;
    }
    int sizes[2] = {topo->local_size, -topo->local_size}, extremes[2];
    err = MPI_Allreduce(sizes, extremes, 2, MPI_INT, MPI_MAX, world);
    if (err != MPI_SUCCESS) {
        status = status_mpi(err, "MPI_Allreduce(node sizes)");
        goto err_free_maps;
    }
    topo->homogeneous = extremes[0] == -extremes[1];
    if (topo->homogeneous) {
        MPI_Comm cross;
        topo->cross_members = malloc(sizeof(int) * (size_t)topo->node_count);
        if (!topo->cross_members) {
            status = status_fail(HORA_ERR_NO_MEMORY, "out of memory in topology discovery");
            goto err_free_maps;
        }
        err = MPI_Comm_split(world, topo->local_rank, topo->node_rank, &cross);
        if (err == MPI_SUCCESS) {
            err = MPI_Allgather(&topo->rank, 1, MPI_INT, topo->cross_members, 1, MPI_INT, cross);
            MPI_Comm_free(&cross);
        }
        if (err != MPI_SUCCESS) {
            status = status_mpi(err, "MPI_Allgather(cross-node members)");
            goto err_free_maps;
        }
    }
    return HORA_OK;

err_free_maps:
    topo_free_maps(topo);

err_free_node:
    MPI_Comm_free(&topo->node_comm);
err_free_host:
    MPI_Comm_free(&topo->host_comm);
    return status;
}

void topo_free(struct topo *topo)
{
    topo_free_maps(topo);
    if (topo->node_comm != MPI_COMM_NULL) MPI_Comm_free(&topo->node_comm);
    if (topo->host_comm != MPI_COMM_NULL) MPI_Comm_free(&topo->host_comm);
}
