/*
 * hora-sim.c - the hora-sim program: one data-parallel training step of a
 * cluster on paper (sim.h), its scaling over node counts, the best fusion
 * threshold and cycle time, hora's schedules against parameter servers, the
 * study of the reference job (--study) and the check against measured runs
 * on this machine (--validate). tools/sim/README.md has the model and its
 * limits.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "sim_report.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hora-sim [flags]\n"
            "Simulates one data-parallel training step of hora on a cluster: per-layer backward\n"
            "times, gradients ready in backprop order, the coordinator's cycles and fusion (the\n"
            "runtime's own code), and the message schedule over links with latency + bytes /\n"
            "bandwidth and max-min fair sharing. Prints step time, overlap, img/s and scaling\n"
            "efficiency against node count, and the best fusion threshold and cycle time.\n"
            "\n"
            "  --preset NAME          reference (default: 64 V100, 8 per node, NVLink 130 GB/s per GPU,\n"
            "                         one 25 Gbit/s NIC per node, ResNet-50 batch 256, f16 gradients,\n"
            "                         670 img/s per GPU) or h200 (8 per node, NVLink 370 GB/s, eight\n"
            "                         400 Gbit/s NICs per node, 7900 img/s per GPU); flags after it override\n"
            "  --model NAME           a hora-train model (resnet50; resnet18 ... resnet152, resnet8 ... resnet110)\n"
            "  --batch N              images per GPU per step\n"
            "  --img-s X              one GPU's training throughput alone, img/s\n"
            "  --profile FILE         per-layer times from hora-train --profile's table instead of --img-s\n"
            "  --grad f16|f32         gradient dtype (what the all-reduce sends)\n"
            "  --nodes N              nodes (the scaling table runs 1 GPU, then 1, 2, 4, ... N nodes)\n"
            "  --gpus-per-node N      ranks per node\n"
            "  --nics N               NICs per node (local rank l uses NIC l mod N)\n"
            "  --nic-gbit X           NIC bandwidth per direction, Gbit/s\n"
            "  --nic-latency-us X     NIC latency per message\n"
            "  --nic-eff E            share of the NIC one connection uses, data one way (0-1]\n"
            "  --nic-eff-bidir E      the same with data both ways on one connection (a ring of 2)\n"
            "  --intra-gbyte X        each GPU's port inside a node, GB/s per direction (NVLink, shm)\n"
            "  --intra-latency-us X   its latency per message\n"
            "  --algo NAME            ring, hierarchical (default), mxnet-ps, tf-ps or all\n"
            "  --fusion-threshold S   HORA_FUSION_THRESHOLD, K/M/G = 2^10/2^20/2^30 (default 128M)\n"
            "  --cycle-time-ms X      HORA_CYCLE_TIME_MS (default 1)\n"
            "  --skew-us X            how much later the last rank makes each gradient ready (default 50)\n"
            "  --study                the reference-job study: img/s and efficiency at 1-64 GPUs for 670,\n"
            "                         1300 and 7900 img/s per GPU, where 25 Gbit/s stops being enough,\n"
            "                         recommended fusion threshold and cycle time, 128-1024 GPUs for\n"
            "                         every schedule at 25/100/400 Gbit/s, the h200 preset\n"
            "  --validate             predicted against measured gradient-set step times on this\n"
            "                         machine (README.md); exit 1 when one is off by more than 15%%\n"
            "  --json FILE            the results as one JSON object\n"
            "  --plot-dir DIR         PNG plots there (gnuplot; skipped with a note when missing)\n"
            "  -h, --help             this text\n"
            "Exit status: 0 on success, 1 when a simulation or --validate fails, 2 on a bad flag.\n");
}

static int parse_double(const char *flag, const char *s, double lo, double hi, int lo_open, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi || (lo_open && v == lo)) {
        fprintf(stderr, "hora-sim: %s %s: want a number %s %g and <= %g\n", flag, s, lo_open ? ">" : ">=", lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_int(const char *flag, const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "hora-sim: %s %s: want a whole number from %d to %d\n", flag, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_size(const char *flag, const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double unit = 1;
    if (*end == 'K' || *end == 'k')
        unit = 1024.0, end++;
    else if (*end == 'M' || *end == 'm')
        unit = 1024.0 * 1024.0, end++;
    else if (*end == 'G' || *end == 'g')
        unit = 1024.0 * 1024.0 * 1024.0, end++;
    if (errno || end == s || *end || !(v >= 0) || v * unit > 64.0 * 1024 * 1024 * 1024) {
        fprintf(stderr, "hora-sim: %s %s: want a size from 0 to 64G (K/M/G suffixes)\n", flag, s);
        return -1;
    }
    *out = (size_t)(v * unit);
    return 0;
}

static int parse_args(int argc, char **argv, struct sim_options *o)
{
    sim_options_preset(o, "reference");
    o->coord = (struct sim_coord){.fusion_threshold = (size_t)128 << 20, .cycle_time_s = 1e-3, .skew_s = 50e-6};
    o->algo = SIM_ALGO_HIER;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--study")) {
            o->mode = SIM_MODE_STUDY;
            continue;
        }
        if (!strcmp(a, "--validate")) {
            o->mode = SIM_MODE_VALIDATE;
            continue;
        }
        if (strncmp(a, "--", 2) || i + 1 >= argc) {
            fprintf(stderr, "hora-sim: %s: unknown flag or missing value (--help lists them)\n", a);
            return -1;
        }
        const char *v = argv[++i];
        double d;
        int rc = 0;
        if (!strcmp(a, "--preset")) {
            if (sim_options_preset(o, v)) {
                fprintf(stderr, "hora-sim: --preset %s: want reference or h200\n", v);
                return -1;
            }
        } else if (!strcmp(a, "--model")) {
            snprintf(o->model, sizeof(o->model), "%s", v);
        } else if (!strcmp(a, "--batch")) {
            rc = parse_int(a, v, 1, 1 << 20, &o->batch);
        } else if (!strcmp(a, "--img-s")) {
            rc = parse_double(a, v, 0, 1e9, 1, &o->img_s);
        } else if (!strcmp(a, "--profile")) {
            o->profile = v;
        } else if (!strcmp(a, "--grad")) {
            if (strcmp(v, "f16") && strcmp(v, "f32")) {
                fprintf(stderr, "hora-sim: --grad %s: want f16 or f32\n", v);
                return -1;
            }
            o->elem_bytes = strcmp(v, "f16") ? 4 : 2;
        } else if (!strcmp(a, "--nodes")) {
            rc = parse_int(a, v, 1, 65536, &o->topo.nodes);
        } else if (!strcmp(a, "--gpus-per-node")) {
            rc = parse_int(a, v, 1, 256, &o->topo.ranks_per_node);
        } else if (!strcmp(a, "--nics")) {
            rc = parse_int(a, v, 1, 256, &o->topo.nics);
        } else if (!strcmp(a, "--nic-gbit")) {
            rc = parse_double(a, v, 0, 1e6, 1, &d);
            o->topo.nic.bandwidth = d * SIM_GBIT;
        } else if (!strcmp(a, "--nic-latency-us")) {
            rc = parse_double(a, v, 0, 1e6, 0, &d);
            o->topo.nic.latency_s = d * 1e-6;
        } else if (!strcmp(a, "--nic-eff")) {
            rc = parse_double(a, v, 0, 1, 1, &o->topo.nic.eff_uni);
        } else if (!strcmp(a, "--nic-eff-bidir")) {
            rc = parse_double(a, v, 0, 1, 1, &o->topo.nic.eff_bidir);
        } else if (!strcmp(a, "--intra-gbyte")) {
            rc = parse_double(a, v, 0, 1e6, 1, &d);
            o->topo.intra.bandwidth = d * 1e9;
        } else if (!strcmp(a, "--intra-latency-us")) {
            rc = parse_double(a, v, 0, 1e6, 0, &d);
            o->topo.intra.latency_s = d * 1e-6;
        } else if (!strcmp(a, "--algo")) {
            o->all_algos = !strcmp(v, "all");
            o->algo = o->all_algos ? SIM_ALGO_HIER : sim_algo_from_name(v);
            if (o->algo == SIM_ALGO_COUNT) {
                fprintf(stderr, "hora-sim: --algo %s: want ring, hierarchical, mxnet-ps, tf-ps or all\n", v);
                return -1;
            }
        } else if (!strcmp(a, "--fusion-threshold")) {
            rc = parse_size(a, v, &o->coord.fusion_threshold);
        } else if (!strcmp(a, "--cycle-time-ms")) {
            rc = parse_double(a, v, 0.01, 10000, 0, &d);
            o->coord.cycle_time_s = d * 1e-3;
        } else if (!strcmp(a, "--skew-us")) {
            rc = parse_double(a, v, 0, 1e7, 0, &d);
            o->coord.skew_s = d * 1e-6;
        } else if (!strcmp(a, "--json")) {
            o->json_path = v;
        } else if (!strcmp(a, "--plot-dir")) {
            o->plot_dir = v;
        } else {
            fprintf(stderr, "hora-sim: %s: unknown flag (--help lists them)\n", a);
            return -1;
        }
        if (rc) return -1;
    }
    if (o->mode == SIM_MODE_STUDY && o->profile) {
        fprintf(stderr, "hora-sim: --study sweeps the per-GPU speed: drop --profile\n");
        return -1;
    }
    if (o->topo.nics > o->topo.ranks_per_node) {
        fprintf(stderr, "hora-sim: --nics %d: more NICs than GPUs per node (%d)\n", o->topo.nics,
                o->topo.ranks_per_node);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct sim_options o = {0};
    if (parse_args(argc, argv, &o)) return 2;
    struct sim_model model;
    if (sim_model_init(&model, o.model, o.elem_bytes) != HORA_OK) {
        fprintf(stderr, "hora-sim: --model %s: not a model hora-train builds\n", o.model);
        return 2;
    }
    if (o.profile && sim_model_load_profile(&model, o.profile) != HORA_OK) {
        sim_model_free(&model);
        return 2;
    }
    int rc;
    switch (o.mode) {
    case SIM_MODE_STUDY: rc = sim_report_study(&o, &model); break;
    case SIM_MODE_VALIDATE: rc = sim_report_validate(&o); break;
    default: rc = sim_report_run(&o, &model); break;
    }
    sim_model_free(&model);
    return rc;
}
