/*
 * sim_report.c - presets, the settings sweep, and the report of one
 * configuration: its scaling from one GPU to every node, for one schedule or
 * all, and the best fusion threshold and cycle time at full size.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim_report.h"

const size_t sim_sweep_thresholds[SIM_SWEEP_THRESHOLDS] = {0,        1 << 20,  2 << 20,  4 << 20,          8 << 20,
                                                           16 << 20, 32 << 20, 64 << 20, (size_t)128 << 20};
const double sim_sweep_cycles_ms[SIM_SWEEP_CYCLES] = {0.25, 0.5, 1, 2, 5};

int sim_options_preset(struct sim_options *o, const char *name)
{
    /* The reference job: 8 DGX-1-like nodes of 8 V100 (NVLink ring ~130
     * GB/s per GPU), one 25 Gbit/s RoCE NIC each; a NIC is taken to reach
     * 90% of its line rate. */
    const struct sim_topo reference = {
        .nodes = 8,
        .ranks_per_node = 8,
        .nics = 1,
        .intra = {.bandwidth = 130e9, .latency_s = 5e-6, .eff_uni = 1.0, .eff_bidir = 1.0},
        .nic = {.bandwidth = 25 * SIM_GBIT, .latency_s = 5e-6, .eff_uni = 0.9, .eff_bidir = 0.9},
    };
    /* H200 nodes: NVLink ~370 GB/s bus bandwidth per GPU, one 400 Gbit/s
     * NIC per GPU (rail-aligned), MLPerf's ~7,900 img/s per GPU. */
    const struct sim_topo h200 = {
        .nodes = 8,
        .ranks_per_node = 8,
        .nics = 8,
        .intra = {.bandwidth = 370e9, .latency_s = 3e-6, .eff_uni = 1.0, .eff_bidir = 1.0},
        .nic = {.bandwidth = 400 * SIM_GBIT, .latency_s = 3e-6, .eff_uni = 0.9, .eff_bidir = 0.9},
    };
    if (strcmp(name, "reference") && strcmp(name, "h200")) return -1;
    const int is_h200 = !strcmp(name, "h200");
    o->topo = is_h200 ? h200 : reference;
    snprintf(o->model, sizeof(o->model), "resnet50");
    o->batch = 256;
    o->img_s = is_h200 ? 7900 : 670;
    o->elem_bytes = 2;
    o->preset = is_h200 ? "h200" : "reference";
    return 0;
}

struct sim_topo sim_topo_resize(const struct sim_topo *t, int nodes, int ranks_per_node)
{
    struct sim_topo r = *t;
    r.nodes = nodes;
    r.ranks_per_node = ranks_per_node;
    if (r.nics > ranks_per_node) r.nics = ranks_per_node;
    return r;
}

int sim_point(const struct sim_options *o, struct sim_model *m, const struct sim_topo *t, sim_algo_t algo, double img_s,
              const struct sim_coord *c, struct sim_result *r)
{
    if (!o->profile) sim_model_set_throughput(m, o->batch, img_s);
    hora_status_t status = sim_step(t, m, c, algo, o->batch, r);
    if (status != HORA_OK) {
        fprintf(stderr, "hora-sim: simulating %d x %d ranks (%s) failed: %s\n", t->nodes, t->ranks_per_node,
                sim_algo_name(algo), hora_status_string(status));
        return -1;
    }
    return 0;
}

/* The value of values[0..count) (applied to c by set) whose step is the
 * shortest, or *value (the setting in force) when its step is within 0.2%
 * of that: a sweep should not move a setting for nothing. */
static int best_of(const struct sim_options *o, struct sim_model *m, const struct sim_topo *t, sim_algo_t algo,
                   double img_s, struct sim_coord *c, int count, double (*get)(int),
                   void (*set)(struct sim_coord *, double), double *value)
{
    double best_step = INFINITY, best = *value, current_step;
    struct sim_result r;
    set(c, *value);
    if (sim_point(o, m, t, algo, img_s, c, &r)) return -1;
    current_step = r.step_s;
    for (int i = 0; i < count; i++) {
        set(c, get(i));
        if (sim_point(o, m, t, algo, img_s, c, &r)) return -1;
        if (r.step_s < best_step) best_step = r.step_s, best = get(i);
    }
    if (current_step > best_step * 1.002) *value = best;
    set(c, *value);
    return 0;
}

static double sweep_threshold(int i) { return (double)sim_sweep_thresholds[i]; }
static double sweep_cycle(int i) { return sim_sweep_cycles_ms[i] * 1e-3; }
static void set_threshold(struct sim_coord *c, double v) { c->fusion_threshold = (size_t)v; }
static void set_cycle(struct sim_coord *c, double v) { c->cycle_time_s = v; }

int sim_best_settings(const struct sim_options *o, struct sim_model *m, const struct sim_topo *t, sim_algo_t algo,
                      double img_s, struct sim_best *best)
{
    struct sim_coord c = o->coord;
    double threshold = (double)c.fusion_threshold, cycle = c.cycle_time_s;
    if (best_of(o, m, t, algo, img_s, &c, SIM_SWEEP_THRESHOLDS, sweep_threshold, set_threshold, &threshold) ||
        best_of(o, m, t, algo, img_s, &c, SIM_SWEEP_CYCLES, sweep_cycle, set_cycle, &cycle))
        return -1;
    best->fusion_threshold = c.fusion_threshold;
    best->cycle_time_s = c.cycle_time_s;
    return sim_point(o, m, t, algo, img_s, &c, &best->result);
}

void sim_format_bytes(double bytes, char *buf, size_t len)
{
    if (bytes >= 1 << 30)
        snprintf(buf, len, "%.1f GiB", bytes / (1 << 30));
    else if (bytes >= 1 << 20)
        snprintf(buf, len, "%.1f MiB", bytes / (1 << 20));
    else if (bytes >= 1 << 10)
        snprintf(buf, len, "%.0f KiB", bytes / (1 << 10));
    else
        snprintf(buf, len, "%.0f B", bytes);
}

static void report_header(const struct sim_options *o, const struct sim_model *m, FILE *out)
{
    char grads[32];
    const struct sim_topo *t = &o->topo;
    sim_format_bytes((double)sim_model_param_count(m) * m->elem_bytes, grads, sizeof(grads));
    fprintf(out, "# hora-sim: %s, %zu parameters in %d tensors, %s gradients (%s), batch %d per GPU, ", m->name,
            sim_model_param_count(m), m->count, m->elem_bytes == 2 ? "f16" : "f32", grads, o->batch);
    if (o->profile)
        fprintf(out, "compute from %s\n", o->profile);
    else
        fprintf(out, "%.0f img/s per GPU alone\n", o->img_s);
    fprintf(out,
            "# topology: %d nodes x %d GPUs; inside a node %.1f GB/s per GPU, %.2f us; %d x %.0f Gbit/s NIC%s per "
            "node, %.1f us, efficiency %.3f (one way) / %.3f (both ways on one connection)\n",
            t->nodes, t->ranks_per_node, t->intra.bandwidth / 1e9, t->intra.latency_s * 1e6, t->nics,
            t->nic.bandwidth / SIM_GBIT, t->nics > 1 ? "s" : "", t->nic.latency_s * 1e6, t->nic.eff_uni,
            t->nic.eff_bidir);
    fprintf(out, "# coordinator: fusion threshold %zu MiB, cycle %.2f ms, skew %.0f us\n",
            o->coord.fusion_threshold >> 20, o->coord.cycle_time_s * 1e3, o->coord.skew_s * 1e6);
}

static void report_row_header(FILE *out)
{
    fprintf(out, "#%-13s %5s %5s %9s %9s %9s %9s %7s %10s %6s %9s %6s\n", "schedule", "gpus", "nodes", "step_ms",
            "compute", "comm_ms", "exposed", "overlap", "img/s", "eff", "NIC_MB", "resp");
}

static void report_row(FILE *out, sim_algo_t algo, const struct sim_topo *t, const struct sim_result *r)
{
    fprintf(out, " %-13s %5d %5d %9.2f %9.2f %9.2f %9.2f %6.1f%% %10.0f %5.1f%% %9.1f %6d\n", sim_algo_name(algo),
            t->nodes * t->ranks_per_node, t->nodes, r->step_s * 1e3, r->compute_s * 1e3, r->comm_s * 1e3,
            r->exposed_s * 1e3, 100 * r->overlap, r->img_s, 100 * r->efficiency, r->nic_bytes / 1e6, r->responses);
}

static void json_result(FILE *j, const struct sim_topo *t, sim_algo_t algo, const struct sim_result *r)
{
    fprintf(j,
            "{\"schedule\": \"%s\", \"gpus\": %d, \"nodes\": %d, \"step_ms\": %.6g, \"compute_ms\": %.6g, "
            "\"comm_ms\": %.6g, \"exposed_ms\": %.6g, \"overlap\": %.6g, \"img_s\": %.6g, \"efficiency\": %.6g, "
            "\"nic_bytes_per_step\": %.6g, \"responses\": %d, \"cycles\": %d}",
            sim_algo_name(algo), t->nodes * t->ranks_per_node, t->nodes, r->step_s * 1e3, r->compute_s * 1e3,
            r->comm_s * 1e3, r->exposed_s * 1e3, r->overlap, r->img_s, r->efficiency, r->nic_bytes, r->responses,
            r->cycles);
}

#define RUN_MAX_POINTS 32

int sim_report_run(const struct sim_options *o, struct sim_model *m)
{
    FILE *j = NULL;
    if (o->json_path && !(j = fopen(o->json_path, "w"))) {
        fprintf(stderr, "hora-sim: --json: cannot write %s\n", o->json_path);
        return 1;
    }
    report_header(o, m, stdout);
    report_row_header(stdout);
    if (j)
        fprintf(j, "{\"model\": \"%s\", \"batch\": %d, \"img_s_per_gpu\": %.6g, \"scaling\": [", m->name, o->batch,
                o->img_s);
    /* 1 GPU, then 1, 2, 4, ... nodes and the full size. */
    int nodes[RUN_MAX_POINTS], points = 0;
    for (int n = 1; n < o->topo.nodes && points < RUN_MAX_POINTS - 2; n *= 2) nodes[points++] = n;
    nodes[points++] = o->topo.nodes;
    double xs[SIM_ALGO_COUNT][RUN_MAX_POINTS + 1], ys[SIM_ALGO_COUNT][RUN_MAX_POINTS + 1];
    struct sim_series series[SIM_ALGO_COUNT];
    int nseries = 0, first = 1, rc = 0;
    for (int a = 0; a < SIM_ALGO_COUNT && !rc; a++) {
        if (!o->all_algos && a != (int)o->algo) continue;
        for (int p = -1; p < points && !rc; p++) {
            struct sim_topo t =
                p < 0 ? sim_topo_resize(&o->topo, 1, 1) : sim_topo_resize(&o->topo, nodes[p], o->topo.ranks_per_node);
            struct sim_result r;
            rc = sim_point(o, m, &t, (sim_algo_t)a, o->img_s, &o->coord, &r);
            if (rc) break;
            report_row(stdout, (sim_algo_t)a, &t, &r);
            xs[nseries][p + 1] = t.nodes * t.ranks_per_node;
            ys[nseries][p + 1] = 100 * r.efficiency;
            if (j) {
                fprintf(j, "%s", first ? "" : ", ");
                json_result(j, &t, (sim_algo_t)a, &r);
            }
            first = 0;
        }
        series[nseries] = (struct sim_series){sim_algo_name((sim_algo_t)a), points + 1, xs[nseries], ys[nseries]};
        nseries++;
    }
    if (j) fprintf(j, "]");

    /* The settings sweep at full size, for hora's schedules. */
    const sim_algo_t sweep = o->all_algos || o->algo == SIM_ALGO_HIER ? SIM_ALGO_HIER
                             : o->algo == SIM_ALGO_RING               ? SIM_ALGO_RING
                                                                      : SIM_ALGO_COUNT;
    if (!rc && sweep != SIM_ALGO_COUNT && o->topo.nodes * o->topo.ranks_per_node > 1) {
        struct sim_coord c = o->coord;
        double tx[SIM_SWEEP_THRESHOLDS], ty[SIM_SWEEP_THRESHOLDS];
        printf("\n# fusion threshold sweep, %s at %d GPUs, cycle %.2f ms\n#%12s %9s %10s %6s %6s\n",
               sim_algo_name(sweep), o->topo.nodes * o->topo.ranks_per_node, c.cycle_time_s * 1e3, "threshold",
               "step_ms", "img/s", "eff", "resp");
        if (j) fprintf(j, ", \"fusion_sweep\": [");
        for (int i = 0; i < SIM_SWEEP_THRESHOLDS && !rc; i++) {
            struct sim_result r;
            c.fusion_threshold = sim_sweep_thresholds[i];
            rc = sim_point(o, m, &o->topo, sweep, o->img_s, &c, &r);
            if (rc) break;
            printf(" %9zu MiB %9.2f %10.0f %5.1f%% %6d\n", c.fusion_threshold >> 20, r.step_s * 1e3, r.img_s,
                   100 * r.efficiency, r.responses);
            tx[i] = fmax((double)(c.fusion_threshold >> 20), 0.5);
            ty[i] = r.step_s * 1e3;
            if (j)
                fprintf(j, "%s{\"fusion_threshold\": %zu, \"step_ms\": %.6g}", i ? ", " : "", c.fusion_threshold,
                        r.step_s * 1e3);
        }
        struct sim_best best;
        if (!rc) rc = sim_best_settings(o, m, &o->topo, sweep, o->img_s, &best);
        if (!rc) {
            printf("# best: fusion threshold %zu MiB, cycle %.2f ms: step %.2f ms, %.0f img/s, efficiency %.1f%%\n",
                   best.fusion_threshold >> 20, best.cycle_time_s * 1e3, best.result.step_s * 1e3, best.result.img_s,
                   100 * best.result.efficiency);
            if (j)
                fprintf(j, "], \"best\": {\"fusion_threshold\": %zu, \"cycle_time_ms\": %.6g, \"step_ms\": %.6g}",
                        best.fusion_threshold, best.cycle_time_s * 1e3, best.result.step_s * 1e3);
            if (o->plot_dir) {
                struct sim_series s = {"step time", SIM_SWEEP_THRESHOLDS, tx, ty};
                rc = sim_plot(o->plot_dir, "run-fusion.png", "step time against fusion threshold (0 plotted at 0.5)",
                              "HORA_FUSION_THRESHOLD (MiB)", "step (ms)", 1, &s, 1);
            }
        }
    }
    if (!rc && o->plot_dir)
        rc = sim_plot(o->plot_dir, "run-scaling.png", "scaling efficiency", "GPUs", "efficiency (%)", 1, series,
                      nseries);
    if (j) {
        fprintf(j, "}\n");
        if (fclose(j)) {
            fprintf(stderr, "hora-sim: --json: error writing %s\n", o->json_path);
            rc = 1;
        }
    }
    return rc ? 1 : 0;
}
