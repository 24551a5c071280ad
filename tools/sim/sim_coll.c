/*
 * sim_coll.c - message schedules as phases of flows (sim_net.c times them).
 *
 * hora's ring (runtime/coll/ring.c): the vector is cut into n segments
 * (coll_shard, the runtime's own); reduce-scatter and allgather take n-1
 * steps each, and at every step each rank sends one segment to its right
 * neighbour. A step ends when its slowest transfer does, and the segments
 * differ by at most one element, so every step is timed with the largest.
 * Chunking (HORA_CHUNK_BYTES) pipelines the reduction behind the transfer
 * and costs no extra latency here.
 *
 * hora's hierarchical all-reduce (coll.c, coll_allreduce_hierarchical): a
 * reduce-scatter ring inside every node (all nodes at once), then one ring
 * across the nodes per local rank i over shard i (all local ranks at once:
 * they share the node's NICs), then an allgather ring inside every node.
 * hora takes it when there is more than one node and more than one rank per
 * node; otherwise the flat ring.
 *
 * MXNet kvstore dist_device_sync: every node reduces its GPUs' gradients
 * (part l of the buffer on GPU l: each GPU sends its other parts to their
 * GPUs), pushes the merged buffer sharded over every server process (one
 * per NIC of ceil(nodes / 2) server nodes), the servers reduce and update,
 * the node pulls the weights back and each GPU broadcasts its part inside
 * the node. Server compute is not modelled.
 *
 * TensorFlow's parameter servers: one PS task per worker node, on it;
 * variable v lives on task v mod nodes (round robin in creation order);
 * every rank is a worker that pushes each gradient to its variable's task
 * and pulls each variable back.
 *
 * Both parameter-server schedules run in two stages, push (with MXNet's
 * node reduce) and pull (with its broadcast), so that a step can pull one
 * gradient while it pushes the next. Their phases hold up to ranks x
 * servers flows: they are timed by their busiest link (sim_phase_time with
 * fair = 0), which is the bytes per NIC per step the output reports.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "sim.h"

const char *sim_algo_name(sim_algo_t algo)
{
    static const char *names[SIM_ALGO_COUNT] = {"ring", "hierarchical", "mxnet-ps", "tf-ps"};
    return algo >= 0 && algo < SIM_ALGO_COUNT ? names[algo] : "?";
}

sim_algo_t sim_algo_from_name(const char *name)
{
    for (int a = 0; a < SIM_ALGO_COUNT; a++)
        if (strcmp(name, sim_algo_name((sim_algo_t)a)) == 0) return (sim_algo_t)a;
    return SIM_ALGO_COUNT;
}

static int coll_ranks(const struct sim_topo *t) { return t->nodes * t->ranks_per_node; }

/* Ranks first, then servers servers_per_node to a node after the workers'. */
static struct sim_place *coll_places(const struct sim_topo *t, int servers, int server_node0, int servers_per_node)
{
    const int ranks = coll_ranks(t);
    struct sim_place *p = malloc((size_t)(ranks + servers) * sizeof(*p));
    if (!p) return NULL;
    for (int r = 0; r < ranks; r++) p[r] = (struct sim_place){r / t->ranks_per_node, r % t->ranks_per_node % t->nics};
    for (int s = 0; s < servers; s++)
        p[ranks + s] = (struct sim_place){server_node0 + s / servers_per_node, s % servers_per_node % t->nics};
    return p;
}

static size_t coll_max_shard(size_t count, int n)
{
    size_t off, len, max = 0;
    for (int i = 0; i < n; i++) {
        coll_shard(count, n, i, &off, &len);
        if (len > max) max = len;
    }
    return max;
}

/* rings rings of n ranks each (ranks[r * n + i]) over counts[r] elements,
 * all at once, steps steps. */
static hora_status_t coll_rings(const struct sim_topo *t, const struct sim_place *places, int rings, int n,
                                const int *ranks, const size_t *counts, size_t elem_bytes, int steps,
                                struct sim_traffic *traffic, double *time_out)
{
    if (n < 2 || steps == 0) {
        *time_out = 0.0;
        return HORA_OK;
    }
    struct sim_flow *flows = malloc((size_t)rings * n * sizeof(*flows));
    if (!flows) return HORA_ERR_NO_MEMORY;
    for (int r = 0; r < rings; r++) {
        const double bytes = (double)coll_max_shard(counts[r], n) * (double)elem_bytes;
        for (int i = 0; i < n; i++)
            flows[r * n + i] = (struct sim_flow){ranks[r * n + i], ranks[r * n + (i + 1) % n], bytes, 1.0};
    }
    struct sim_traffic step = {0};
    double step_s = 0.0;
    hora_status_t status =
        sim_phase_time(t, places, coll_ranks(t), flows, rings * n, 1, traffic ? &step : NULL, &step_s);
    free(flows);
    if (status == HORA_OK && traffic) status = sim_traffic_add(traffic, &step, steps);
    sim_traffic_free(&step);
    if (status == HORA_OK) *time_out = steps * step_s;
    return status;
}

hora_status_t sim_ring_time(const struct sim_topo *t, const int *ranks, int n, size_t count, size_t elem_bytes,
                            struct sim_traffic *traffic, double *time_out)
{
    struct sim_place *places = coll_places(t, 0, 0, 1);
    if (!places) return HORA_ERR_NO_MEMORY;
    hora_status_t status = coll_rings(t, places, 1, n, ranks, &count, elem_bytes, 2 * (n - 1), traffic, time_out);
    free(places);
    return status;
}

static hora_status_t coll_flat(const struct sim_topo *t, size_t count, size_t elem_bytes, struct sim_traffic *traffic,
                               double *time_out)
{
    const int n = coll_ranks(t);
    int *ranks = malloc((size_t)n * sizeof(*ranks));
    if (!ranks) return HORA_ERR_NO_MEMORY;
    for (int r = 0; r < n; r++) ranks[r] = r;
    hora_status_t status = sim_ring_time(t, ranks, n, count, elem_bytes, traffic, time_out);
    free(ranks);
    return status;
}

static hora_status_t coll_hier(const struct sim_topo *t, size_t count, size_t elem_bytes, struct sim_traffic *traffic,
                               double *time_out)
{
    const int nodes = t->nodes, local = t->ranks_per_node, n = coll_ranks(t);
    if (nodes == 1 || local == 1) return coll_flat(t, count, elem_bytes, traffic, time_out);
    int *node_rings = malloc((size_t)n * sizeof(int)), *cross_rings = malloc((size_t)n * sizeof(int));
    size_t *node_counts = malloc((size_t)nodes * sizeof(size_t)), *shards = calloc((size_t)local, sizeof(size_t));
    struct sim_place *places = coll_places(t, 0, 0, 1);
    hora_status_t status = HORA_ERR_NO_MEMORY;
    if (node_rings && cross_rings && node_counts && shards && places) {
        for (int r = 0; r < n; r++) {
            node_rings[r] = r;                                /* ring r / local: node r / local */
            cross_rings[(r % local) * nodes + r / local] = r; /* ring i: local rank i of every node */
        }
        for (int k = 0; k < nodes; k++) node_counts[k] = count;
        for (int i = 0; i < local; i++) {
            size_t off;
            coll_shard(count, local, i, &off, &shards[i]);
        }
        double rs = 0.0, cross = 0.0, ag = 0.0;
        status = coll_rings(t, places, nodes, local, node_rings, node_counts, elem_bytes, local - 1, traffic, &rs);
        if (status == HORA_OK)
            status =
                coll_rings(t, places, local, nodes, cross_rings, shards, elem_bytes, 2 * (nodes - 1), traffic, &cross);
        if (status == HORA_OK)
            status = coll_rings(t, places, nodes, local, node_rings, node_counts, elem_bytes, local - 1, traffic, &ag);
        if (status == HORA_OK) *time_out = rs + cross + ag;
    }
    free(node_rings);
    free(cross_rings);
    free(node_counts);
    free(shards);
    free(places);
    return status;
}

/* One phase of the parameter-server schedules, timed by its busiest link,
 * added to *sum. */
static hora_status_t coll_ps_phase(const struct sim_topo *t, const struct sim_place *places, int endpoints,
                                   const struct sim_flow *flows, int count, struct sim_traffic *traffic, double *sum)
{
    double s = 0.0;
    hora_status_t status = sim_phase_time(t, places, endpoints, flows, count, 0, traffic, &s);
    *sum += s;
    return status;
}

/* MXNet's node reduce (back: broadcast): part l of the buffer on local rank l. */
static int mxnet_node_flows(const struct sim_topo *t, size_t bytes, int back, struct sim_flow *flows)
{
    const int local = t->ranks_per_node;
    int f = 0;
    for (int r = 0; r < coll_ranks(t); r++)
        for (int l = 0; l < local; l++) {
            int owner = r / local * local + l;
            if (owner != r)
                flows[f++] = (struct sim_flow){back ? owner : r, back ? r : owner, (double)bytes / local, 1.0};
        }
    return f;
}

/* MXNet's push (back: pull): shard s between server s and local rank
 * s mod local of every node. */
static int mxnet_net_flows(const struct sim_topo *t, size_t bytes, int servers, int back, struct sim_flow *flows)
{
    const int local = t->ranks_per_node, n = coll_ranks(t);
    int f = 0;
    for (int k = 0; k < t->nodes; k++)
        for (int s = 0; s < servers; s++) {
            int r = k * local + s % local, srv = n + s;
            flows[f++] = (struct sim_flow){back ? srv : r, back ? r : srv, (double)bytes / servers, 1.0};
        }
    return f;
}

static hora_status_t coll_mxnet(const struct sim_topo *t, size_t bytes, struct sim_traffic *traffic, double stage_s[2])
{
    const int n = coll_ranks(t);
    const int servers = (t->nodes + 1) / 2 * t->nics, endpoints = n + servers;
    const int node_flows = n * (t->ranks_per_node - 1), net_flows = t->nodes * servers;
    const int cap = node_flows > net_flows ? node_flows : net_flows;
    struct sim_place *places = coll_places(t, servers, t->nodes, t->nics);
    struct sim_flow *flows = malloc((size_t)(cap ? cap : 1) * sizeof(*flows));
    hora_status_t status = HORA_ERR_NO_MEMORY;
    if (places && flows) {
        stage_s[0] = stage_s[1] = 0.0;
        int f = mxnet_node_flows(t, bytes, 0, flows);
        status = coll_ps_phase(t, places, endpoints, flows, f, traffic, &stage_s[0]);
        f = mxnet_net_flows(t, bytes, servers, 0, flows);
        if (status == HORA_OK) status = coll_ps_phase(t, places, endpoints, flows, f, traffic, &stage_s[0]);
        f = mxnet_net_flows(t, bytes, servers, 1, flows);
        if (status == HORA_OK) status = coll_ps_phase(t, places, endpoints, flows, f, traffic, &stage_s[1]);
        f = mxnet_node_flows(t, bytes, 1, flows);
        if (status == HORA_OK) status = coll_ps_phase(t, places, endpoints, flows, f, traffic, &stage_s[1]);
    }
    free(places);
    free(flows);
    return status;
}

static hora_status_t coll_tf(const struct sim_topo *t, const struct sim_tensor *tensors, int count, size_t elem_bytes,
                             struct sim_traffic *traffic, double stage_s[2])
{
    const int local = t->ranks_per_node, n = coll_ranks(t), ps = t->nodes, endpoints = n + ps;
    const int groups = local < t->nics ? local : t->nics; /* ranks of a node by NIC */
    struct sim_place *places = coll_places(t, ps, 0, 1);
    double *per_ps = calloc((size_t)ps, sizeof(double));
    struct sim_flow *flows = malloc((size_t)t->nodes * groups * ps * sizeof(*flows));
    hora_status_t status = HORA_ERR_NO_MEMORY;
    if (places && per_ps && flows) {
        status = HORA_OK;
        for (int i = 0; i < count; i++)
            per_ps[tensors[i].var_index % ps] += (double)tensors[i].count * (double)elem_bytes;
        for (int pull = 0; pull < 2 && status == HORA_OK; pull++) {
            int f = 0;
            for (int k = 0; k < t->nodes; k++)
                for (int g = 0; g < groups; g++)
                    for (int p = 0; p < ps; p++) {
                        if (per_ps[p] == 0.0) continue;
                        /* Local ranks g, g + nics, ...: the same NIC, the same path. */
                        double weight = (double)((local - g + t->nics - 1) / t->nics);
                        int r = k * local + g, srv = n + p;
                        flows[f++] = (struct sim_flow){pull ? srv : r, pull ? r : srv, per_ps[p], weight};
                    }
            stage_s[pull] = 0.0;
            status = coll_ps_phase(t, places, endpoints, flows, f, traffic, &stage_s[pull]);
        }
    }
    free(places);
    free(per_ps);
    free(flows);
    return status;
}

hora_status_t sim_ps_stages(const struct sim_topo *t, sim_algo_t algo, size_t bytes, const struct sim_tensor *tensors,
                            int n, size_t elem_bytes, struct sim_traffic *traffic, double stage_s[2])
{
    if (coll_ranks(t) == 1) {
        stage_s[0] = stage_s[1] = 0.0;
        return HORA_OK;
    }
    switch (algo) {
    case SIM_ALGO_MXNET_PS: return coll_mxnet(t, bytes, traffic, stage_s);
    case SIM_ALGO_TF_PS: return coll_tf(t, tensors, n, elem_bytes, traffic, stage_s);
    default: return HORA_ERR_INVALID_ARG;
    }
}

hora_status_t sim_exchange_time(const struct sim_topo *t, sim_algo_t algo, size_t bytes,
                                const struct sim_tensor *tensors, int n, size_t elem_bytes, struct sim_traffic *traffic,
                                double *time_out)
{
    if (coll_ranks(t) == 1) {
        *time_out = 0.0;
        return HORA_OK;
    }
    double stages[2];
    hora_status_t status;
    switch (algo) {
    case SIM_ALGO_RING: return coll_flat(t, bytes / elem_bytes, elem_bytes, traffic, time_out);
    case SIM_ALGO_HIER: return coll_hier(t, bytes / elem_bytes, elem_bytes, traffic, time_out);
    case SIM_ALGO_MXNET_PS:
    case SIM_ALGO_TF_PS:
        status = sim_ps_stages(t, algo, bytes, tensors, n, elem_bytes, traffic, stages);
        if (status == HORA_OK) *time_out = stages[0] + stages[1];
        return status;
    default: return HORA_ERR_INVALID_ARG;
    }
}
