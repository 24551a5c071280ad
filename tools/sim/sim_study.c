/*
 * sim_study.c - hora-sim --study: the reference job on paper.
 *
 *  1. img/s and scaling efficiency at 1, 8, 16, 32, 64 GPUs, hierarchical,
 *     at 670 (the origin's ~44,000 img/s over 64 V100), 1300 (later fp16
 *     V100 stacks) and 7900 img/s per GPU (an H200 in MLPerf), with hora's
 *     default settings and with the best fusion threshold and cycle time;
 *  2. where the NIC stops being enough: efficiency at 64 GPUs for per-GPU
 *     speeds x link speeds, the per-GPU speed at which 25 Gbit/s falls below
 *     90%, and the link speed each per-GPU speed needs for 90%;
 *  3. 64-1024 GPUs: flat ring, hierarchical, MXNet's and TensorFlow's
 *     parameter servers at 25, 100 and 400 Gbit/s, the winner and the bytes
 *     per NIC per step that explain it;
 *  4. the h200 preset from 1 to 1024 GPUs.
 * The job (model, batch, gradient dtype, topology) is o's: the reference
 * preset unless flags change it; part 4 takes the h200 preset's topology.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim_report.h"

#define STUDY_SPEEDS 3
#define STUDY_GPUS 5
#define STUDY_LINK_SPEEDS 7
#define STUDY_GRID_SPEEDS 7
#define STUDY_BIG 5
#define STUDY_H200 9
#define STUDY_ENOUGH 0.90

static const double study_speeds[STUDY_SPEEDS] = {670, 1300, 7900};
static const int study_gpus[STUDY_GPUS] = {1, 8, 16, 32, 64};
static const double study_links[STUDY_LINK_SPEEDS] = {10, 25, 50, 100, 200, 400, 800};
static const double study_grid_speeds[STUDY_GRID_SPEEDS] = {335, 670, 1000, 1300, 2000, 4000, 7900};
static const int study_big[STUDY_BIG] = {64, 128, 256, 512, 1024};
static const double study_big_links[3] = {25, 100, 400};
static const int study_h200_gpus[STUDY_H200] = {1, 8, 16, 32, 64, 128, 256, 512, 1024};

struct study {
    const struct sim_options *o;
    struct sim_model *m;
    FILE *j;
    int rc;
};

static struct sim_topo study_topo(const struct sim_topo *base, int gpus, double link_gbit)
{
    const int local = base->ranks_per_node;
    struct sim_topo t = gpus < local ? sim_topo_resize(base, 1, gpus) : sim_topo_resize(base, gpus / local, local);
    if (link_gbit > 0) t.nic.bandwidth = link_gbit * SIM_GBIT;
    return t;
}

/* Scaling efficiency at 64 GPUs with the best settings (0 on failure). */
static double study_eff64(struct study *s, double img_s, double link_gbit, struct sim_best *best_out)
{
    struct sim_topo t = study_topo(&s->o->topo, 64, link_gbit);
    struct sim_best best;
    if (s->rc || sim_best_settings(s->o, s->m, &t, SIM_ALGO_HIER, img_s, &best)) {
        s->rc = 1;
        return 0.0;
    }
    if (best_out) *best_out = best;
    return best.result.efficiency;
}

static void study_reference(struct study *s)
{
    const struct sim_options *o = s->o;
    double xs[STUDY_SPEEDS][STUDY_GPUS], ys[STUDY_SPEEDS][STUDY_GPUS];
    char titles[STUDY_SPEEDS][32];
    struct sim_series series[STUDY_SPEEDS];
    printf("\n## 1. the reference job, hierarchical, %.0f Gbit/s NICs: hora's defaults (fusion %zu MiB, cycle %.2f "
           "ms) and the best settings\n",
           o->topo.nic.bandwidth / SIM_GBIT, o->coord.fusion_threshold >> 20, o->coord.cycle_time_s * 1e3);
    printf("#%-9s %5s %10s %6s %10s %6s %10s %8s %8s\n", "img/s/GPU", "gpus", "img/s", "eff", "best_img/s", "eff",
           "fusion", "cycle_ms", "NIC_MB");
    if (s->j) fprintf(s->j, "\"reference\": [");
    for (int v = 0; v < STUDY_SPEEDS && !s->rc; v++) {
        for (int g = 0; g < STUDY_GPUS && !s->rc; g++) {
            struct sim_topo t = study_topo(&o->topo, study_gpus[g], 0);
            struct sim_result r;
            struct sim_best best;
            if (sim_point(o, s->m, &t, SIM_ALGO_HIER, study_speeds[v], &o->coord, &r) ||
                sim_best_settings(o, s->m, &t, SIM_ALGO_HIER, study_speeds[v], &best)) {
                s->rc = 1;
                break;
            }
            printf(" %-9.0f %5d %10.0f %5.1f%% %10.0f %5.1f%% %6zu MiB %8.2f %8.1f\n", study_speeds[v], study_gpus[g],
                   r.img_s, 100 * r.efficiency, best.result.img_s, 100 * best.result.efficiency,
                   best.fusion_threshold >> 20, best.cycle_time_s * 1e3, best.result.nic_bytes / 1e6);
            xs[v][g] = study_gpus[g];
            ys[v][g] = 100 * best.result.efficiency;
            if (s->j)
                fprintf(s->j,
                        "%s{\"img_s_per_gpu\": %.6g, \"gpus\": %d, \"img_s\": %.6g, \"efficiency\": %.6g, "
                        "\"best_img_s\": %.6g, \"best_efficiency\": %.6g, \"fusion_threshold\": %zu, "
                        "\"cycle_time_ms\": %.6g}",
                        v || g ? ", " : "", study_speeds[v], study_gpus[g], r.img_s, r.efficiency, best.result.img_s,
                        best.result.efficiency, best.fusion_threshold, best.cycle_time_s * 1e3);
        }
        snprintf(titles[v], sizeof(titles[v]), "%.0f img/s per GPU", study_speeds[v]);
        series[v] = (struct sim_series){titles[v], STUDY_GPUS, xs[v], ys[v]};
    }
    if (s->j) fprintf(s->j, "]");
    if (!s->rc && o->plot_dir &&
        sim_plot(o->plot_dir, "study-reference.png", "reference job, hierarchical, best settings", "GPUs",
                 "scaling efficiency (%)", 1, series, STUDY_SPEEDS))
        s->rc = 1;
}

static int study_enough(struct study *s, double img_s, double link_gbit)
{
    return study_eff64(s, img_s, link_gbit, NULL) >= STUDY_ENOUGH;
}

/* Bisection on a log scale between lo and hi for where STUDY_ENOUGH at 64
 * GPUs ends, over the per-GPU speed (vary_speed, at link other) or the link
 * (at speed other); ok_lo says which end is enough, and that side's end is
 * returned. */
static double study_bisect(struct study *s, double lo, double hi, int ok_lo, int vary_speed, double other)
{
    for (int i = 0; i < 24 && !s->rc; i++) {
        double mid = sqrt(lo * hi);
        int ok = vary_speed ? study_enough(s, mid, other) : study_enough(s, other, mid);
        if (ok == ok_lo)
            lo = mid;
        else
            hi = mid;
    }
    return ok_lo ? lo : hi;
}

/* The per-GPU speed at which link_gbit gives exactly STUDY_ENOUGH; 0 when
 * even 100 img/s is too fast, INFINITY when 100,000 is not. */
static double study_speed_limit(struct study *s, double link_gbit)
{
    if (!study_enough(s, 100, link_gbit)) return 0;
    if (study_enough(s, 100000, link_gbit)) return INFINITY;
    return study_bisect(s, 100, 100000, 1, 1, link_gbit);
}

/* The link speed img_s needs for STUDY_ENOUGH at 64 GPUs. */
static double study_link_needed(struct study *s, double img_s)
{
    if (!study_enough(s, img_s, 3200)) return INFINITY;
    return study_bisect(s, 0.5, 3200, 0, 0, img_s);
}

static void study_links_enough(struct study *s)
{
    const struct sim_options *o = s->o;
    double xs[STUDY_LINK_SPEEDS][STUDY_GRID_SPEEDS], ys[STUDY_LINK_SPEEDS][STUDY_GRID_SPEEDS];
    char titles[STUDY_LINK_SPEEDS][32];
    struct sim_series series[STUDY_LINK_SPEEDS];
    printf("\n## 2. when is the NIC enough? efficiency at 64 GPUs (8 x 8), hierarchical, best settings\n#%-9s",
           "img/s/GPU");
    for (int l = 0; l < STUDY_LINK_SPEEDS; l++) printf(" %7.0fG", study_links[l]);
    printf("\n");
    if (s->j) fprintf(s->j, ", \"links\": [");
    for (int v = 0; v < STUDY_GRID_SPEEDS && !s->rc; v++) {
        printf(" %-9.0f", study_grid_speeds[v]);
        for (int l = 0; l < STUDY_LINK_SPEEDS && !s->rc; l++) {
            double eff = study_eff64(s, study_grid_speeds[v], study_links[l], NULL);
            printf(" %7.1f%%", 100 * eff);
            xs[l][v] = study_grid_speeds[v];
            ys[l][v] = 100 * eff;
            if (s->j)
                fprintf(s->j, "%s{\"img_s_per_gpu\": %.6g, \"link_gbit\": %.6g, \"efficiency\": %.6g}",
                        v || l ? ", " : "", study_grid_speeds[v], study_links[l], eff);
        }
        printf("\n");
    }
    if (s->j) fprintf(s->j, "]");
    for (int l = 0; l < STUDY_LINK_SPEEDS; l++) {
        snprintf(titles[l], sizeof(titles[l]), "%.0f Gbit/s", study_links[l]);
        series[l] = (struct sim_series){titles[l], STUDY_GRID_SPEEDS, xs[l], ys[l]};
    }
    const double nic = o->topo.nic.bandwidth / SIM_GBIT;
    const double limit = study_speed_limit(s, nic);
    if (s->rc) return;
    printf("# %.0f Gbit/s stays at >= %.0f%% efficiency at 64 GPUs up to %.0f img/s per GPU\n", nic, 100 * STUDY_ENOUGH,
           limit);
    if (s->j) fprintf(s->j, ", \"enough_up_to_img_s\": %.6g, \"link_needed\": [", limit);
    for (int v = 0; v < STUDY_SPEEDS && !s->rc; v++) {
        double need = study_link_needed(s, study_speeds[v]);
        printf("# %.0f img/s per GPU needs %.1f Gbit/s per node for %.0f%%\n", study_speeds[v], need,
               100 * STUDY_ENOUGH);
        if (s->j)
            fprintf(s->j, "%s{\"img_s_per_gpu\": %.6g, \"link_gbit\": %.6g}", v ? ", " : "", study_speeds[v], need);
    }
    if (s->j) fprintf(s->j, "]");
    if (!s->rc && o->plot_dir &&
        sim_plot(o->plot_dir, "study-links.png", "efficiency at 64 GPUs against per-GPU speed, per NIC speed",
                 "img/s per GPU", "scaling efficiency (%)", 1, series, STUDY_LINK_SPEEDS))
        s->rc = 1;
}

static void study_recommend(struct study *s)
{
    printf("\n## recommended settings at 64 GPUs, %.0f Gbit/s (the shortest step; the default where it is within "
           "0.2%% of it)\n",
           s->o->topo.nic.bandwidth / SIM_GBIT);
    if (s->j) fprintf(s->j, ", \"recommended\": [");
    for (int v = 0; v < STUDY_SPEEDS && !s->rc; v++) {
        struct sim_best best;
        double eff = study_eff64(s, study_speeds[v], 0, &best);
        if (s->rc) break;
        printf("# %5.0f img/s per GPU: HORA_FUSION_THRESHOLD=%zuM HORA_CYCLE_TIME_MS=%g -> %.0f img/s, %.1f%%\n",
               study_speeds[v], best.fusion_threshold >> 20, best.cycle_time_s * 1e3, best.result.img_s, 100 * eff);
        if (s->j)
            fprintf(s->j, "%s{\"img_s_per_gpu\": %.6g, \"fusion_threshold\": %zu, \"cycle_time_ms\": %.6g}",
                    v ? ", " : "", study_speeds[v], best.fusion_threshold, best.cycle_time_s * 1e3);
    }
    if (s->j) fprintf(s->j, "]");
}

/* The fastest schedule's name, with every other within 0.5% of it ("a=b"). */
static void study_winner(const struct sim_result *r, char *buf, size_t len)
{
    int win = 0;
    for (int a = 1; a < SIM_ALGO_COUNT; a++)
        if (r[a].step_s < r[win].step_s) win = a;
    snprintf(buf, len, "%s", sim_algo_name((sim_algo_t)win));
    for (int a = 0; a < SIM_ALGO_COUNT; a++)
        if (a != win && r[a].step_s <= r[win].step_s * 1.005) {
            size_t used = strlen(buf);
            snprintf(buf + used, len - used, "=%s", sim_algo_name((sim_algo_t)a));
        }
}

static void study_schedules_at(struct study *s, double img_s, int *first_row)
{
    const struct sim_options *o = s->o;
    const double gradient_bytes = (double)sim_model_param_count(s->m) * s->m->elem_bytes;
    for (int l = 0; l < 3 && !s->rc; l++) {
        double xs[SIM_ALGO_COUNT][STUDY_BIG], ys[SIM_ALGO_COUNT][STUDY_BIG];
        struct sim_series series[SIM_ALGO_COUNT];
        printf("\n## 3. schedules at %.0f Gbit/s, %.0f img/s per GPU (best settings for hora's): efficiency, and "
               "bytes per step through the busiest node's NICs in one direction, in units of the gradients S "
               "(%.1f MB)\n",
               study_big_links[l], img_s, gradient_bytes / 1e6);
        printf("#%5s %6s", "gpus", "nodes");
        for (int a = 0; a < SIM_ALGO_COUNT; a++) printf(" %13s", sim_algo_name((sim_algo_t)a));
        for (int a = 0; a < SIM_ALGO_COUNT; a++) printf(" %9s", "NIC/S");
        printf("  fastest (= within 0.5%%)\n");
        for (int g = 0; g < STUDY_BIG && !s->rc; g++) {
            struct sim_topo t = study_topo(&o->topo, study_big[g], study_big_links[l]);
            struct sim_result r[SIM_ALGO_COUNT];
            for (int a = 0; a < SIM_ALGO_COUNT && !s->rc; a++) {
                struct sim_best best;
                if (a == SIM_ALGO_RING || a == SIM_ALGO_HIER) {
                    if (sim_best_settings(o, s->m, &t, (sim_algo_t)a, img_s, &best)) s->rc = 1;
                    r[a] = best.result;
                } else if (sim_point(o, s->m, &t, (sim_algo_t)a, img_s, &o->coord, &r[a])) {
                    s->rc = 1;
                }
                xs[a][g] = study_big[g];
                ys[a][g] = s->rc ? 0 : 100 * r[a].efficiency;
            }
            if (s->rc) break;
            char winner[96];
            study_winner(r, winner, sizeof(winner));
            printf(" %5d %6d", study_big[g], t.nodes);
            for (int a = 0; a < SIM_ALGO_COUNT; a++) printf(" %12.1f%%", 100 * r[a].efficiency);
            for (int a = 0; a < SIM_ALGO_COUNT; a++) printf(" %9.2f", r[a].nic_bytes / gradient_bytes);
            printf("  %s\n", winner);
            if (s->j) {
                fprintf(s->j, "%s{\"img_s_per_gpu\": %.6g, \"link_gbit\": %.6g, \"gpus\": %d, \"fastest\": \"%s\"",
                        *first_row ? "" : ", ", img_s, study_big_links[l], study_big[g], winner);
                for (int a = 0; a < SIM_ALGO_COUNT; a++)
                    fprintf(s->j, ", \"%s\": {\"efficiency\": %.6g, \"img_s\": %.6g, \"nic_bytes_per_step\": %.6g}",
                            sim_algo_name((sim_algo_t)a), r[a].efficiency, r[a].img_s, r[a].nic_bytes);
                fprintf(s->j, "}");
                *first_row = 0;
            }
        }
        for (int a = 0; a < SIM_ALGO_COUNT; a++)
            series[a] = (struct sim_series){sim_algo_name((sim_algo_t)a), STUDY_BIG, xs[a], ys[a]};
        char file[64], title[96];
        snprintf(file, sizeof(file), "study-schedules-%.0fimg-%.0fg.png", img_s, study_big_links[l]);
        snprintf(title, sizeof(title), "schedules at %.0f Gbit/s, %.0f img/s per GPU", study_big_links[l], img_s);
        if (!s->rc && o->plot_dir &&
            sim_plot(o->plot_dir, file, title, "GPUs", "scaling efficiency (%)", 1, series, SIM_ALGO_COUNT))
            s->rc = 1;
    }
}

static void study_schedules(struct study *s)
{
    int first_row = 1;
    if (s->j) fprintf(s->j, ", \"schedules\": [");
    study_schedules_at(s, s->o->img_s, &first_row);
    if (s->o->img_s != study_speeds[STUDY_SPEEDS - 1])
        study_schedules_at(s, study_speeds[STUDY_SPEEDS - 1], &first_row);
    if (s->j) fprintf(s->j, "]");
    printf("# why: per step and direction the busiest node's NICs carry 2(n-1)/n x S for the flat ring (n ranks:\n"
           "# the ring crosses every node boundary once), 2(N-1)/N x S for hierarchical (N nodes: only each node's\n"
           "# shards cross, on all its local ranks' rings at once), 2 x S for MXNet (a worker node pushes and\n"
           "# pulls S, but each of the N/2 server nodes takes N/(N/2) = 2 shares of S), and for TensorFlow\n"
           "# every GPU pushes and pulls every variable itself, so a node's NIC carries its GPUs' S each and its\n"
           "# PS task serves every other worker, the task holding the largest variables the hot spot.\n"
           "# MXNet's efficiency counts worker GPUs only: it also needs N/2 server nodes, half as many\n"
           "# machines again. hora's rings pay 2(n-1) (flat) or 2(N-1) (cross) latencies per buffer, and\n"
           "# the coordinator's cycles (a bit allreduce each) per step: what grows with the node count.\n");
}

static void study_h200(struct study *s)
{
    struct sim_options h = *s->o;
    sim_options_preset(&h, "h200");
    h.coord = s->o->coord;
    double xs[2][STUDY_H200], ys[2][STUDY_H200];
    struct sim_series series[2];
    printf("\n## 4. the h200 preset: %d GPUs per node, %d x %.0f Gbit/s NICs per node, NVLink %.0f GB/s per GPU, "
           "%.0f img/s per GPU, best settings\n",
           h.topo.ranks_per_node, h.topo.nics, h.topo.nic.bandwidth / SIM_GBIT, h.topo.intra.bandwidth / 1e9, h.img_s);
    printf("#%5s %12s %6s %12s %6s %8s %8s\n", "gpus", "hier_img/s", "eff", "ring_img/s", "eff", "fusion", "cycle");
    if (s->j) fprintf(s->j, ", \"h200\": [");
    for (int g = 0; g < STUDY_H200 && !s->rc; g++) {
        struct sim_topo t = study_topo(&h.topo, study_h200_gpus[g], 0);
        struct sim_best hier, ring;
        if (sim_best_settings(&h, s->m, &t, SIM_ALGO_HIER, h.img_s, &hier) ||
            sim_best_settings(&h, s->m, &t, SIM_ALGO_RING, h.img_s, &ring)) {
            s->rc = 1;
            break;
        }
        printf(" %5d %12.0f %5.1f%% %12.0f %5.1f%% %4zu MiB %8.2f\n", study_h200_gpus[g], hier.result.img_s,
               100 * hier.result.efficiency, ring.result.img_s, 100 * ring.result.efficiency,
               hier.fusion_threshold >> 20, hier.cycle_time_s * 1e3);
        xs[0][g] = xs[1][g] = study_h200_gpus[g];
        ys[0][g] = 100 * hier.result.efficiency;
        ys[1][g] = 100 * ring.result.efficiency;
        if (s->j)
            fprintf(s->j,
                    "%s{\"gpus\": %d, \"hierarchical_img_s\": %.6g, \"hierarchical_efficiency\": %.6g, "
                    "\"ring_img_s\": %.6g, \"ring_efficiency\": %.6g, \"fusion_threshold\": %zu, "
                    "\"cycle_time_ms\": %.6g}",
                    g ? ", " : "", study_h200_gpus[g], hier.result.img_s, hier.result.efficiency, ring.result.img_s,
                    ring.result.efficiency, hier.fusion_threshold, hier.cycle_time_s * 1e3);
    }
    if (s->j) fprintf(s->j, "]");
    series[0] = (struct sim_series){"hierarchical", STUDY_H200, xs[0], ys[0]};
    series[1] = (struct sim_series){"ring", STUDY_H200, xs[1], ys[1]};
    if (!s->rc && s->o->plot_dir &&
        sim_plot(s->o->plot_dir, "study-h200.png", "h200 preset, best settings", "GPUs", "scaling efficiency (%)", 1,
                 series, 2))
        s->rc = 1;
}

int sim_report_study(const struct sim_options *o, struct sim_model *m)
{
    struct study s = {o, m, NULL, 0};
    if (o->json_path && !(s.j = fopen(o->json_path, "w"))) {
        fprintf(stderr, "hora-sim: --json: cannot write %s\n", o->json_path);
        return 1;
    }
    printf("# hora-sim --study: %s, batch %d per GPU, %s gradients; %d GPUs per node, NVLink %.0f GB/s per GPU, "
           "%d x %.0f Gbit/s NIC per node; skew %.0f us\n",
           m->name, o->batch, m->elem_bytes == 2 ? "f16" : "f32", o->topo.ranks_per_node, o->topo.intra.bandwidth / 1e9,
           o->topo.nics, o->topo.nic.bandwidth / SIM_GBIT, o->coord.skew_s * 1e6);
    if (s.j) fprintf(s.j, "{");
    study_reference(&s);
    study_links_enough(&s);
    study_recommend(&s);
    study_schedules(&s);
    study_h200(&s);
    if (s.j) {
        fprintf(s.j, "}\n");
        if (fclose(s.j)) {
            fprintf(stderr, "hora-sim: --json: error writing %s\n", o->json_path);
            s.rc = 1;
        }
    }
    return s.rc;
}
