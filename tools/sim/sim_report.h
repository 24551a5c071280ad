/*
 * sim_report.h - what hora-sim prints: one configuration's scaling and
 * settings sweep (sim_report.c), the reference-job study (sim_study.c), the
 * validation against measured runs (sim_validate.c), and PNG plots through
 * gnuplot (sim_plot.c).
 */
#ifndef HORA_SIM_REPORT_H
#define HORA_SIM_REPORT_H

#include <stdio.h>

#include "sim.h"

typedef enum { SIM_MODE_RUN = 0, SIM_MODE_STUDY = 1, SIM_MODE_VALIDATE = 2 } sim_mode_t;

struct sim_options {
    struct sim_topo topo;
    struct sim_coord coord;
    char model[32];
    int batch;
    double img_s;        /* one GPU alone */
    const char *profile; /* hora-train --profile table, or NULL */
    size_t elem_bytes;
    sim_algo_t algo;
    int all_algos;
    sim_mode_t mode;
    const char *preset;
    const char *json_path, *plot_dir;
};

/* Fill o's topology and job from a preset: "reference" or "h200". -1 for
 * another name. */
int sim_options_preset(struct sim_options *o, const char *name);

/* A topology like t with nodes x ranks_per_node ranks (NICs capped). */
struct sim_topo sim_topo_resize(const struct sim_topo *t, int nodes, int ranks_per_node);

/* One step of m on t at img_s per GPU (unless m holds profiled times:
 * o->profile), with the coordinator c. -1 with a message on failure. */
int sim_point(const struct sim_options *o, struct sim_model *m, const struct sim_topo *t, sim_algo_t algo, double img_s,
              const struct sim_coord *c, struct sim_result *r);

/* The fusion threshold, then the cycle time, that give the shortest step
 * over the sweeps below; o's setting stays when its step is within 0.2% of
 * the shortest. */
struct sim_best {
    size_t fusion_threshold;
    double cycle_time_s;
    struct sim_result result;
};
int sim_best_settings(const struct sim_options *o, struct sim_model *m, const struct sim_topo *t, sim_algo_t algo,
                      double img_s, struct sim_best *best);

/* The thresholds and cycle times the sweeps try. */
#define SIM_SWEEP_THRESHOLDS 9
#define SIM_SWEEP_CYCLES 5
extern const size_t sim_sweep_thresholds[SIM_SWEEP_THRESHOLDS];
extern const double sim_sweep_cycles_ms[SIM_SWEEP_CYCLES];

int sim_report_run(const struct sim_options *o, struct sim_model *m);
int sim_report_study(const struct sim_options *o, struct sim_model *m);
int sim_report_validate(const struct sim_options *o);

/* One line of a plot. */
struct sim_series {
    const char *title;
    int count;
    const double *x, *y;
};

/* dir/file as a PNG line plot of series (logx: log-scale x). Prints the
 * path on success; a note and 0 when gnuplot is missing, -1 when it fails. */
int sim_plot(const char *dir, const char *file, const char *title, const char *xlabel, const char *ylabel, int logx,
             const struct sim_series *series, int count);

/* "48.7 MiB" */
void sim_format_bytes(double bytes, char *buf, size_t len);

#endif
