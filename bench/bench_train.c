/*
 * bench_train.c - hora-bench-train: training throughput with synthetic data.
 *
 *   mpirun -np 2 hora-bench-train --model resnet20 --image 1x28x28 --batch 64 --steps 20 --json F
 *   hora-bench-train --model resnet50 --image 3x224x224 --batch 16 --threads 2 --precision bf16
 *
 * Runs the same training step hora-train runs (forward, backward with the
 * all-reduce of each gradient overlapped, optimizer step), first with
 * overlap and then with the all-reduce after backward, and reports images/s
 * over all ranks for each. Warm-up steps are not timed. --precision is
 * hora-train's: auto (the default) times fp32 and the low precisions the
 * backend computes natively first (trainer/precision.c) and runs the
 * fastest; bf16 is bf16 compute and gradients, f32 master weights, no loss
 * scaling (bf16 has f32's exponent range); fp16 (where the backend computes
 * f16) adds dynamic loss scaling. --threads defaults to this rank's share
 * of the CPUs its affinity allows (trainer/threads.c), as hora-train's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"
#include "optim.h"
#include "precision.h"
#include "threads.h"
#include "train.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(void)
{
    printf("usage: mpirun -np N hora-bench-train [--model NAME] [--image CxHxW] [--classes K]\n"
           "         [--batch B] [--steps N] [--warmup N] [--threads T] [--precision auto|fp32|bf16|fp16]\n"
           "         [--cpu-layout auto|nchw|nchw8c|nchw16c|nhwc] [--no-overlap-run] [--json FILE]\n"
           "Models: %s\n", tr_model_names());
}

/* This process's CPU time (every thread), in seconds. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Images per second over all ranks for steps timed steps; *cpu_per_step:
 * this rank's CPU seconds per step (every thread: on a loaded machine,
 * where other processes take the cores, it stays close to the work a step
 * costs while the wall time grows). */
static int measure(tr_trainer_t *t, const tr_tensor_t *x, const int32_t *y, int batch, int warmup, int steps,
                   double *img_per_s, double *cpu_per_step)
{
    float loss;
    for (int i = 0; i < warmup; i++)
        if (tr_trainer_step(t, x, y, 0.01, &loss, NULL) != HORA_OK)
            return -1;
    double t0 = now_s(), c0 = cpu_s();
    for (int i = 0; i < steps; i++)
        if (tr_trainer_step(t, x, y, 0.01, &loss, NULL) != HORA_OK)
            return -1;
    double dt = now_s() - t0;
    *cpu_per_step = (cpu_s() - c0) / steps;
    /* The slowest rank decides the step rate of the job. */
    if (hora_size() > 1 && hora_allreduce(&dt, &dt, 1, HORA_DTYPE_F64, HORA_OP_MAX) != HORA_OK)
        return -1;
    *img_per_s = (double)steps * batch * hora_size() / dt;
    return 0;
}

int main(int argc, char **argv)
{
    const char *model_name = "resnet20", *json = NULL;
    int precision = TR_PRECISION_AUTO;
    int c = 0, h = 0, w = 0, classes = 10, batch = 64, steps = 20, warmup = 3, threads = 0, no_overlap_run = 1;
    int layout = 0; /* index into tr_cpu_layout_names */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            return 0;
        } else if (!strcmp(a, "--no-overlap-run")) {
            no_overlap_run = 0;
            continue;
        } else if (!v) {
            fprintf(stderr, "hora-bench-train: %s needs a value (see --help)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--model"))
            model_name = v;
        else if (!strcmp(a, "--json"))
            json = v;
        else if (!strcmp(a, "--image")) {
            if (sscanf(v, "%dx%dx%d", &c, &h, &w) != 3 || c < 1 || h < 1 || w < 1) {
                fprintf(stderr, "hora-bench-train: --image wants CxHxW, got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--classes"))
            classes = atoi(v);
        else if (!strcmp(a, "--batch"))
            batch = atoi(v);
        else if (!strcmp(a, "--steps"))
            steps = atoi(v);
        else if (!strcmp(a, "--warmup"))
            warmup = atoi(v);
        else if (!strcmp(a, "--threads"))
            threads = atoi(v);
        else if (!strcmp(a, "--cpu-layout")) {
            layout = -1;
            for (int l = 0; tr_cpu_layout_names[l]; l++)
                if (!strcmp(v, tr_cpu_layout_names[l]))
                    layout = l;
            if (layout < 0) {
                fprintf(stderr, "hora-bench-train: --cpu-layout wants auto, nchw, nchw8c, nchw16c or nhwc, got '%s'\n",
                        v);
                return 2;
            }
        } else if (!strcmp(a, "--precision")) {
            precision = -1;
            for (int p = 0; tr_precision_names[p]; p++)
                if (!strcmp(v, tr_precision_names[p]))
                    precision = p;
            if (precision < 0) {
                fprintf(stderr, "hora-bench-train: --precision wants auto, fp32, bf16 or fp16, got '%s'\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "hora-bench-train: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (batch < 1 || steps < 1 || warmup < 0 || classes < 2 || threads < 0) {
        fprintf(stderr, "hora-bench-train: batch, steps, classes must be positive\n");
        return 2;
    }
    if (hora_init() != HORA_OK) {
        fprintf(stderr, "hora-bench-train: hora_init: %s\n", hora_last_error());
        return 1;
    }
    int rank = hora_rank(), size = hora_size(), rc = 1;
    tr_model_spec_t spec;
    if (tr_model_spec_from_name(model_name, &spec) != HORA_OK) {
        if (rank == 0)
            fprintf(stderr, "hora-bench-train: %s\n", status_message());
        goto out_shutdown;
    }
    if (c) {
        spec.in_channels = c;
        spec.height = h;
        spec.width = w;
    }
    spec.classes = classes;
    /* Collective: every rank, right after hora_init. */
    tr_threads_info_t ti;
    int auto_threads = tr_threads_default(&ti);
    if (threads > 0)
        tr_threads_check("hora-bench-train", threads);
    else
        threads = auto_threads;
    const struct tr_backend_ops *ops = tr_backend_find("cpu");
    tr_backend_config_t bc = {.threads = threads, .channel_block = tr_cpu_layout_blocks[layout]};
    tr_backend_t *backend;
    if (!ops || ops->init(&bc, &backend) != HORA_OK)
        goto out_shutdown;
    tr_step_config_t sc = {.optim = {.momentum = 0.9, .weight_decay = 1e-4, .nesterov = 1, .decay_bn_bias = 1}};
    tr_precision_probe_t probe = {.choice = TR_PRECISION_FP32};
    if (precision == TR_PRECISION_AUTO) {
        tr_precision_probe_config_t pc = {.spec = spec, .batch = batch, .grad = TR_GRAD_DTYPE_AUTO,
                                          .loss_scale_opt = TR_LOSS_SCALE_OPT_AUTO, .loss_scale_window = 2000,
                                          .step = sc, .grads_shared = size > 1, .seed = 1, .budget_s = 2.0};
        if (tr_precision_probe(backend, &pc, &probe) != HORA_OK)
            goto out_backend;
        precision = probe.choice;
        if (rank == 0) {
            char text[1024];
            tr_precision_describe(&probe, text, sizeof(text));
            printf("hora-bench-train: precision auto: %s\n", text);
        }
    }
    /* A precision the backend cannot compute in natively is refused with
     * its reason: hora-train's fp16 fallback (f32 compute, f16 gradients,
     * loss scaling) is not what a throughput row named fp16 promises. */
    int fell_back = 0;
    if (tr_precision_dtypes(backend, (tr_precision_t)precision, TR_GRAD_DTYPE_AUTO, &spec, &fell_back) != HORA_OK ||
        fell_back) {
        if (rank == 0)
            fprintf(stderr, "hora-bench-train: --precision %s: the cpu backend does not compute it: %s\n",
                    tr_precision_names[precision], status_message());
        goto out_backend;
    }
    tr_precision_loss_scale((tr_precision_t)precision, TR_LOSS_SCALE_OPT_AUTO, 2000, &sc.loss_scale);
    tr_model_t *model;
    if (tr_model_init(backend, &spec, batch, size > 1, 1, &model) != HORA_OK) {
        fprintf(stderr, "hora-bench-train: rank %d: %s\n", rank, status_message());
        goto out_backend;
    }
    size_t sample = (size_t)spec.in_channels * spec.height * spec.width;
    float *x = malloc((size_t)batch * sample * sizeof(float));
    int32_t *y = malloc((size_t)batch * sizeof(int32_t));
    tr_tensor_t xt = tr_tensor_plain(x, TR_DTYPE_F32, TR_MEMORY_HOST, 4,
                                     (const int[]){batch, spec.in_channels, spec.height, spec.width});
    for (size_t i = 0; i < (size_t)batch * sample; i++)
        x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    for (int i = 0; i < batch; i++)
        y[i] = i % classes;

    double ips[2] = {0, 0}, cpu_step[2] = {0, 0};
    int ok = 1;
    for (int overlap = 1; overlap >= (no_overlap_run ? 0 : 1) && ok; overlap--) {
        sc.overlap = overlap;
        tr_run_state_t state = tr_run_state_begin(1);
        tr_loss_scale_begin(&sc.loss_scale, &state.loss_scale);
        tr_trainer_t *t;
        ok = tr_trainer_init(model, &sc, &state, &t) == HORA_OK && tr_trainer_broadcast_state(t, 0) == HORA_OK &&
             measure(t, &xt, y, batch, warmup, steps, &ips[overlap], &cpu_step[overlap]) == 0;
        tr_trainer_free(t);
    }
    if (ok && rank == 0) {
        size_t np = tr_tensor_count(tr_model_arena(model, TR_ARENA_PARAMS));
        printf("hora-bench-train: %s %dx%dx%d, %d ranks x batch %d, %d steps (+%d warm-up), %zu parameters, "
               "precision %s%s, %d thread%s per rank\n", model_name, spec.in_channels, spec.height, spec.width, size,
               batch, steps, warmup, np, tr_precision_names[precision], probe.steps ? " (auto)" : "", threads,
               threads == 1 ? "" : "s");
        printf("  overlap on : %10.1f img/s (all ranks)  %.3f CPU s per step (rank 0)\n", ips[1], cpu_step[1]);
        if (no_overlap_run)
            printf("  overlap off: %10.1f img/s (all ranks)  gain %.2fx\n", ips[0], ips[1] / ips[0]);
        if (json) {
            FILE *f = fopen(json, "w");
            if (f) {
                char probe_json[1536] = "";
                tr_precision_json(&probe, probe_json, sizeof(probe_json));
                fprintf(f, "{\"model\":\"%s\",\"image\":[%d,%d,%d],\"ranks\":%d,\"batch\":%d,\"steps\":%d,"
                        "\"threads\":%d,\"precision\":\"%s\",\"compute_dtype\":\"%s\",\"grad_dtype\":\"%s\","
                        "\"img_per_s\":%.2f,\"img_per_s_no_overlap\":%.2f,\"cpu_s_per_step\":%.4f,"
                        "\"precision_auto\":{%s}}\n", model_name,
                        spec.in_channels, spec.height, spec.width, size, batch, steps, threads,
                        tr_precision_names[precision], tr_dtype_name(spec.compute_dtype),
                        tr_dtype_name(spec.grad_dtype), ips[1], ips[0], cpu_step[1], probe.steps ? probe_json : "");
                fclose(f);
            } else {
                perror(json);
                ok = 0;
            }
        }
    }
    rc = ok ? 0 : 1;
    free(x);
    free(y);
    tr_model_free(model);
out_backend:
    backend->ops->free(backend);
out_shutdown:
    hora_shutdown();
    return rc;
}
