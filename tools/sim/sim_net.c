/*
 * sim_net.c - the time of a phase of concurrent flows over hora-sim's links.
 *
 * Links: every endpoint has an intra-node port (out and in), every node nics
 * NICs (out and in). A flow between endpoints of one node uses the sender's
 * port out and the receiver's port in; between nodes, the sender's NIC out
 * and the receiver's NIC in. A link's capacity is its bandwidth times the
 * efficiency of the connections on it (sim.h), recomputed whenever a flow
 * ends.
 *
 * Max-min fair share by progressive filling: every unfrozen connection's
 * rate rises together until a link is full; the connections through it are
 * frozen at that rate (the link with the smallest capacity per unfrozen
 * connection saturates first) and the others go on. The phase runs at those
 * rates until the first flow ends, then the rates are filled afresh.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static int net_intra(int e, int in) { return 2 * e + in; }
static int net_nic(int endpoints, int nics, int node, int nic, int in)
{
    return 2 * endpoints + 2 * (node * nics + nic) + in;
}

hora_status_t sim_traffic_add(struct sim_traffic *dst, const struct sim_traffic *src, double factor)
{
    if (src->nodes > dst->nodes) {
        double *b = realloc(dst->node_bytes, (size_t)2 * src->nodes * sizeof(double));
        if (!b) return HORA_ERR_NO_MEMORY;
        memset(b + 2 * dst->nodes, 0, (size_t)2 * (src->nodes - dst->nodes) * sizeof(double));
        dst->node_bytes = b;
        dst->nodes = src->nodes;
    }
    for (int i = 0; i < 2 * src->nodes; i++) dst->node_bytes[i] += factor * src->node_bytes[i];
    return HORA_OK;
}

double sim_traffic_max(const struct sim_traffic *t)
{
    double max = 0.0;
    for (int i = 0; i < 2 * t->nodes; i++) max = fmax(max, t->node_bytes[i]);
    return max;
}

void sim_traffic_free(struct sim_traffic *t)
{
    free(t->node_bytes);
    t->node_bytes = NULL;
    t->nodes = 0;
}

static int key_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t flow_key(int src, int dst) { return (uint64_t)(uint32_t)src << 32 | (uint32_t)dst; }

hora_status_t sim_phase_time(const struct sim_topo *t, const struct sim_place *places, int endpoints,
                             const struct sim_flow *flows, int count, int fair, struct sim_traffic *traffic,
                             double *time_out)
{
    if (count == 0) {
        *time_out = 0.0;
        return HORA_OK;
    }
    int nodes = 0;
    for (int e = 0; e < endpoints; e++)
        if (places[e].node + 1 > nodes) nodes = places[e].node + 1;
    const int links = 2 * endpoints + 2 * nodes * t->nics;
    double *link_mem = calloc((size_t)links * 5, sizeof(double));
    int *path = malloc((size_t)count * 2 * sizeof(int));
    double *eff = malloc((size_t)count * 3 * sizeof(double));
    uint64_t *keys = malloc((size_t)count * sizeof(uint64_t));
    unsigned char *state = calloc((size_t)count, 1); /* 0 active, 1 frozen this round, 2 done */
    hora_status_t status = HORA_OK;
    if (!link_mem || !path || !eff || !keys || !state) {
        status = HORA_ERR_NO_MEMORY;
        goto out;
    }
    double *idle = link_mem, *cap = link_mem + links, *wsum = link_mem + 2 * links, *used = link_mem + 3 * links;
    double *load = link_mem + 4 * links; /* busiest-link bytes; in filling, the links saturating */
    double *rem = eff + count, *rate = eff + 2 * count;

    /* Paths, latency, and whether a connection carries data both ways. */
    double latency = 0.0;
    for (int f = 0; f < count; f++) keys[f] = flow_key(flows[f].src, flows[f].dst);
    qsort(keys, (size_t)count, sizeof(*keys), key_cmp);
    for (int f = 0; f < count; f++) {
        const struct sim_flow *fl = &flows[f];
        const struct sim_place *a = &places[fl->src], *b = &places[fl->dst];
        const int local = a->node == b->node;
        const struct sim_link *l = local ? &t->intra : &t->nic;
        path[2 * f] = local ? net_intra(fl->src, 0) : net_nic(endpoints, t->nics, a->node, a->nic, 0);
        path[2 * f + 1] = local ? net_intra(fl->dst, 1) : net_nic(endpoints, t->nics, b->node, b->nic, 1);
        uint64_t rev = flow_key(fl->dst, fl->src);
        int bidir = bsearch(&rev, keys, (size_t)count, sizeof(*keys), key_cmp) != NULL;
        eff[f] = bidir ? l->eff_bidir : l->eff_uni;
        rem[f] = fl->bytes;
        if (l->latency_s > latency) latency = l->latency_s;
        for (int k = 0; k < 2; k++) used[path[2 * f + k]] += fl->bytes * fl->weight;
        if (fl->bytes <= 0) state[f] = 2;
    }
    if (traffic) {
        struct sim_traffic phase = {.node_bytes = calloc((size_t)2 * nodes, sizeof(double)), .nodes = nodes};
        if (!phase.node_bytes) {
            status = HORA_ERR_NO_MEMORY;
            goto out;
        }
        for (int n = 0; n < nodes; n++)
            for (int in = 0; in < 2; in++)
                for (int k = 0; k < t->nics; k++)
                    phase.node_bytes[2 * n + in] += used[net_nic(endpoints, t->nics, n, k, in)];
        status = sim_traffic_add(traffic, &phase, 1.0);
        sim_traffic_free(&phase);
        if (status != HORA_OK) goto out;
    }

    double elapsed = 0.0;
    for (;;) {
        /* Capacities from the connections still running. */
        int active = 0;
        for (int l = 0; l < links; l++) idle[l] = 1.0, wsum[l] = 0.0;
        for (int f = 0; f < count; f++) {
            if (state[f] == 2) continue;
            active++;
            state[f] = 0;
            for (int k = 0; k < 2; k++) {
                int l = path[2 * f + k];
                idle[l] *= pow(1.0 - eff[f], flows[f].weight);
                wsum[l] += flows[f].weight;
            }
        }
        if (!active) break;
        for (int l = 0; l < links; l++) {
            const struct sim_link *p = l < 2 * endpoints ? &t->intra : &t->nic;
            cap[l] = p->bandwidth * (1.0 - idle[l]);
        }
        if (!fair) {
            /* The busiest link, with everything it carries. */
            double worst = 0.0;
            for (int f = 0; f < count; f++)
                for (int k = 0; k < 2; k++) load[path[2 * f + k]] += rem[f] * flows[f].weight;
            for (int l = 0; l < links; l++)
                if (wsum[l] > 0.0 && load[l] / cap[l] > worst) worst = load[l] / cap[l];
            elapsed += worst;
            break;
        }
        /* Progressive filling: every link at the smallest share per
         * connection saturates in the same round. */
        for (int left = active; left > 0;) {
            double share = INFINITY;
            for (int l = 0; l < links; l++)
                if (wsum[l] > 0.0 && cap[l] / wsum[l] < share) share = cap[l] / wsum[l];
            if (share == INFINITY) break;
            for (int l = 0; l < links; l++) load[l] = wsum[l] > 0.0 && cap[l] / wsum[l] <= share * (1.0 + 1e-12);
            for (int f = 0; f < count; f++) {
                if (state[f] != 0 || !(load[path[2 * f]] || load[path[2 * f + 1]])) continue;
                rate[f] = share;
                state[f] = 1;
                left--;
                for (int k = 0; k < 2; k++) {
                    int l = path[2 * f + k];
                    cap[l] = fmax(0.0, cap[l] - share * flows[f].weight);
                    wsum[l] -= flows[f].weight;
                    if (wsum[l] < 1e-9) wsum[l] = 0.0;
                }
            }
        }
        /* Run until the first flow ends. */
        double dt = INFINITY;
        for (int f = 0; f < count; f++)
            if (state[f] == 1 && rem[f] / rate[f] < dt) dt = rem[f] / rate[f];
        elapsed += dt;
        for (int f = 0; f < count; f++) {
            if (state[f] != 1) continue;
            rem[f] -= rate[f] * dt;
            if (rem[f] <= 1e-9 * flows[f].bytes) state[f] = 2;
        }
    }
    *time_out = latency + elapsed;
out:
    free(link_mem);
    free(path);
    free(eff);
    free(keys);
    free(state);
    return status;
}
