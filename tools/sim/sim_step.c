/*
 * sim_step.c - one data-parallel training step.
 *
 * Compute: forward, then backward, which makes the gradients ready in the
 * order tr_model_describe lists them (the trainer's grads arena), each
 * gradient at the end of its layer's share of backward. Every rank computes
 * the same, with the last rank submitting each tensor skew later.
 *
 * hora (ring, hierarchical): the coordinator thread of runtime/coord/coord_cycle.c.
 * It sleeps while nothing is in flight and a submission wakes it, so a cycle
 * starts at the first gradient that is ready, and again as soon as the
 * previous cycle ends if another one came meanwhile. A cycle's one
 * allreduce of cache bits (the steady state: every name cached) completes
 * when the last rank joins; the first rank waits for it in naps that double
 * from 20 us up to a quarter of HORA_CYCLE_TIME_MS, so it sees the result at
 * the end of a nap. The responses of the tensors ready at the cycle's start
 * go through the runtime's own coord_fuse_list with the fusion threshold
 * and run one after another, each fused buffer as large as coord_fuse_bytes
 * says coord_exec.c packs it (every tensor at a HORA_ALIGN_BYTES offset).
 *
 * Parameter servers (MXNet, TensorFlow): no coordinator and no fusion: each
 * gradient is pushed once every rank has it, and pulled, in a pipeline of
 * two stages (the pull of one beside the push of the next).
 *
 * The step ends when backward and the last exchange have both ended; the
 * optimizer's time is part of the throughput's compute.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord/coord_fuse.h"
#include "sim.h"

hora_status_t sim_model_init(struct sim_model *m, const char *model_name, size_t elem_bytes)
{
    tr_model_spec_t spec;
    memset(m, 0, sizeof(*m));
    hora_status_t status = tr_model_spec_from_name(model_name, &spec);
    if (status != HORA_OK) return status;
    status = tr_model_describe(&spec, &m->params, &m->count);
    if (status != HORA_OK) return status;
    m->backward_s = calloc((size_t)m->count, sizeof(double));
    if (!m->backward_s) {
        sim_model_free(m);
        return HORA_ERR_NO_MEMORY;
    }
    snprintf(m->name, sizeof(m->name), "%s", model_name);
    m->elem_bytes = elem_bytes;
    return HORA_OK;
}

void sim_model_free(struct sim_model *m)
{
    free(m->params);
    free(m->backward_s);
    memset(m, 0, sizeof(*m));
}

size_t sim_model_param_count(const struct sim_model *m)
{
    size_t sum = 0;
    for (int i = 0; i < m->count; i++) sum += m->params[i].count;
    return sum;
}

void sim_model_set_throughput(struct sim_model *m, int batch, double img_s)
{
    const double step_s = batch / img_s;
    double flops = 0.0;
    for (int i = 0; i < m->count; i++) flops += m->params[i].forward_flops;
    m->forward_s = step_s / 3.0;
    for (int i = 0; i < m->count; i++) m->backward_s[i] = 2.0 * step_s / 3.0 * m->params[i].forward_flops / flops;
}

void sim_model_set_no_compute(struct sim_model *m)
{
    m->forward_s = 0.0;
    for (int i = 0; i < m->count; i++) m->backward_s[i] = 0.0;
}

hora_status_t sim_model_load_profile(struct sim_model *m, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "hora-sim: --profile: cannot open %s: %s\n", path, strerror(errno));
        return HORA_ERR_SYSTEM;
    }
    char line[512];
    int units = 0;
    hora_status_t status = HORA_OK;
    sim_model_set_no_compute(m);
    while (status == HORA_OK && fgets(line, sizeof(line), f)) {
        char unit[128], weight[160];
        double fwd, bwd, total;
        /* "  layer1.0.conv1   0.123   0.456   0.579  1.2%" */
        if (sscanf(line, " %127s %lf %lf %lf", unit, &fwd, &bwd, &total) != 4) continue;
        snprintf(weight, sizeof(weight), "%s.weight", unit);
        int found = -1;
        for (int i = 0; i < m->count && found < 0; i++)
            if (strcmp(m->params[i].name, weight) == 0) found = i;
        if (found < 0) {
            fprintf(stderr, "hora-sim: --profile %s: unit '%s' is not a convolution of %s\n", path, unit, m->name);
            status = HORA_ERR_INVALID_ARG;
            break;
        }
        m->backward_s[found] = bwd / 1e3;
        m->forward_s += fwd / 1e3;
        units++;
    }
    fclose(f);
    if (status == HORA_OK && units == 0) {
        fprintf(stderr, "hora-sim: --profile %s: no unit lines (hora-train --profile's table)\n", path);
        status = HORA_ERR_INVALID_ARG;
    }
    return status;
}

/* How long the first rank waits for the cycle's bit allreduce, which
 * completes need seconds after it started: naps of 20 us doubling up to a
 * quarter of the cycle time (coord_core.c, coord_poll_pause). */
static double step_bits_wait(double need, double cycle_s)
{
    double waited = 0.0, nap = 20e-6, max_nap = fmax(cycle_s / 4.0, 20e-6);
    while (waited < need) {
        waited += nap;
        nap = fmin(2.0 * nap, max_nap);
    }
    return waited;
}

/* One small MPI allreduce: recursive doubling, log2(ranks) rounds of the
 * slowest hop's latency. */
static double step_bits_latency(const struct sim_topo *t)
{
    const int ranks = t->nodes * t->ranks_per_node;
    const double hop = t->nodes > 1 ? t->nic.latency_s : t->intra.latency_s;
    return ceil(log2((double)ranks)) * hop;
}

/* The tensors of response r: each name is the tensor's index in m. */
static void step_tensors(const struct sim_model *m, const struct coord_response *r, struct sim_tensor *out)
{
    for (int k = 0; k < r->ntensors; k++) {
        int i = atoi(r->names[k]);
        out[k] = (struct sim_tensor){m->params[i].count, m->count - 1 - i};
    }
}

/* hora: the coordinator's cycles over ready[] (seconds after backward
 * starts); *end_s when the last exchange ends. */
static hora_status_t step_hora(const struct sim_topo *t, const struct sim_model *m, const struct sim_coord *c,
                               sim_algo_t algo, const double *ready, struct sim_traffic *traffic,
                               struct sim_result *res, double *end_s)
{
    const double bits = step_bits_latency(t);
    struct sim_tensor *tensors = malloc((size_t)m->count * sizeof(*tensors));
    if (!tensors) return HORA_ERR_NO_MEMORY;
    hora_status_t status = HORA_OK;
    double now = 0.0;
    int next = 0;
    while (next < m->count && status == HORA_OK) {
        const double start = fmax(now, ready[next]);
        const double wait = step_bits_wait(c->skew_s + bits, c->cycle_time_s);
        struct coord_responses list = {0};
        while (next < m->count && ready[next] <= start) {
            struct coord_response *r = coord_responses_add(&list);
            if (!r) {
                status = HORA_ERR_NO_MEMORY;
                break;
            }
            r->kind = COORD_KIND_ALLREDUCE;
            r->names = malloc(sizeof(char *));
            r->metas = calloc(1, sizeof(struct coord_meta));
            if (!r->names || !r->metas || !(r->names[0] = malloc(16))) {
                status = HORA_ERR_NO_MEMORY;
                break;
            }
            r->ntensors = 1;
            snprintf(r->names[0], 16, "%d", next);
            r->metas[0] = (struct coord_meta){.kind = COORD_KIND_ALLREDUCE,
                                              .dtype = m->elem_bytes == 2 ? HORA_DTYPE_F16 : HORA_DTYPE_F32,
                                              .op = HORA_OP_AVG,
                                              .compression = HORA_COMPRESSION_NONE,
                                              .memory = HORA_MEMORY_CUDA,
                                              .ndim = 1,
                                              .count = m->params[next].count,
                                              .prescale = 1.0,
                                              .postscale = 1.0,
                                              .dims = {(int64_t)m->params[next].count}};
            r->cacheable = 1;
            next++;
        }
        if (status == HORA_OK) coord_fuse_list(c->fusion_threshold, &list);
        double t_end = start + wait;
        res->comm_s += wait;
        res->cycles++;
        for (int i = 0; i < list.count && status == HORA_OK; i++) {
            const struct coord_response *r = &list.items[i];
            double s = 0.0;
            step_tensors(m, r, tensors);
            status = sim_exchange_time(t, algo, coord_fuse_bytes(r), tensors, r->ntensors, m->elem_bytes, traffic, &s);
            t_end += s;
            res->comm_s += s;
            res->responses++;
        }
        coord_responses_clear(&list);
        now = t_end;
    }
    free(tensors);
    *end_s = now;
    return status;
}

/* Parameter servers: each gradient on its own, in order, through two
 * stages: its push starts when every rank has it and the previous push has
 * ended, its pull when its push and the previous pull have. */
static hora_status_t step_ps(const struct sim_topo *t, const struct sim_model *m, const struct sim_coord *c,
                             sim_algo_t algo, const double *ready, struct sim_traffic *traffic, struct sim_result *res,
                             double *end_s)
{
    double push_end = 0.0, pull_end = 0.0;
    for (int i = 0; i < m->count; i++) {
        const struct sim_tensor tensor = {m->params[i].count, m->count - 1 - i};
        double stage[2];
        hora_status_t status =
            sim_ps_stages(t, algo, tensor.count * m->elem_bytes, &tensor, 1, m->elem_bytes, traffic, stage);
        if (status != HORA_OK) return status;
        res->comm_s += stage[0] + stage[1];
        res->responses++;
        push_end = fmax(push_end, ready[i] + c->skew_s) + stage[0];
        pull_end = fmax(pull_end, push_end) + stage[1];
    }
    *end_s = pull_end;
    return HORA_OK;
}

hora_status_t sim_step(const struct sim_topo *t, const struct sim_model *m, const struct sim_coord *c, sim_algo_t algo,
                       int batch, struct sim_result *out)
{
    struct sim_result res = {0};
    struct sim_traffic traffic = {0};
    double *ready = malloc((size_t)m->count * sizeof(double));
    if (!ready) return HORA_ERR_NO_MEMORY;
    double backward = 0.0;
    for (int i = 0; i < m->count; i++) {
        backward += m->backward_s[i];
        ready[i] = backward;
    }
    double end = 0.0;
    hora_status_t status = HORA_OK;
    if (t->nodes * t->ranks_per_node > 1)
        status = algo == SIM_ALGO_RING || algo == SIM_ALGO_HIER ? step_hora(t, m, c, algo, ready, &traffic, &res, &end)
                                                                : step_ps(t, m, c, algo, ready, &traffic, &res, &end);
    free(ready);
    res.nic_bytes = sim_traffic_max(&traffic);
    sim_traffic_free(&traffic);
    if (status != HORA_OK) return status;
    res.compute_s = m->forward_s + backward;
    res.step_s = m->forward_s + fmax(backward, end);
    res.exposed_s = res.step_s - res.compute_s;
    res.overlap = res.comm_s > 0.0 ? 1.0 - res.exposed_s / res.comm_s : 1.0;
    /* A step of nothing (no compute, one rank) takes no time. */
    res.img_s = res.step_s > 0.0 ? (double)batch * t->nodes * t->ranks_per_node / res.step_s : 0.0;
    res.efficiency = res.step_s > 0.0 ? res.compute_s / res.step_s : 1.0;
    *out = res;
    return HORA_OK;
}
