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
 * backend computes natively first (trainer/core/precision.c) and runs the
 * fastest; bf16 is bf16 compute and gradients, f32 master weights, no loss
 * scaling (bf16 has f32's exponent range); fp16 (where the backend computes
 * f16) adds dynamic loss scaling. --threads defaults to this rank's share
 * of the CPUs its affinity allows (trainer/backends/threads.c), as hora-train's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_cli.h"
#include "bench_output.h"
#include "model.h"
#include "optim.h"
#include "precision.h"
#include "threads.h"
#include "train.h"

/* Images per second over all ranks for steps timed steps; *cpu_per_step:
 * this rank's CPU seconds per step (every thread: on a loaded machine,
 * where other processes take the cores, it stays close to the work a step
 * costs while the wall time grows). */
static int measure(tr_trainer_t *t, const tr_tensor_t *x, const int32_t *y, int batch, int warmup, int steps,
                   double *img_per_s, double *cpu_per_step)
{
    float loss;
    for (int i = 0; i < warmup; i++)
        if (tr_trainer_step(t, x, y, 0.01, &loss, NULL) != HORA_OK) return -1;
    double t0 = bench_wall_s(), c0 = bench_cpu_s();
    for (int i = 0; i < steps; i++)
        if (tr_trainer_step(t, x, y, 0.01, &loss, NULL) != HORA_OK) return -1;
    double dt = bench_wall_s() - t0;
    *cpu_per_step = (bench_cpu_s() - c0) / steps;
    /* The slowest rank decides the step rate of the job. */
    if (hora_size() > 1 && hora_allreduce(&dt, &dt, 1, HORA_DTYPE_F64, HORA_OP_MAX) != HORA_OK) return -1;
    *img_per_s = (double)steps * batch * hora_size() / dt;
    return 0;
}

/* --image CxHxW. */
static int image_option(const char *text, void *dest)
{
    int *chw = dest, end = 0;
    if (sscanf(text, "%dx%dx%d%n", &chw[0], &chw[1], &chw[2], &end) != 3 || text[end] != '\0' || chw[0] < 1 ||
        chw[1] < 1 || chw[2] < 1)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *model_name = "resnet20", *json = NULL;
    int precision, layout; /* indexes into tr_precision_names, tr_cpu_layout_names */
    int chw[3] = {0, 0, 0}, classes, batch, steps, warmup, threads = 0, skip_no_overlap = 0;
    char models[512];
    snprintf(models, sizeof(models), "Models: %s", tr_model_names());
    const bench_cli_option_t table[] = {
        {.long_name = "model",
         .kind = BENCH_CLI_STRING,
         .dest = &model_name,
         .value = "resnet20",
         .value_name = "NAME",
         .help = "any name tr_model_names() lists (below)"},
        {.long_name = "image",
         .kind = BENCH_CLI_CUSTOM,
         .dest = chw,
         .parse = image_option,
         .value_name = "CxHxW",
         .expect = "CxHxW, three positive integers",
         .default_note = "the model's",
         .help = "input shape"},
        {.long_name = "classes",
         .kind = BENCH_CLI_INT,
         .dest = &classes,
         .value = "10",
         .min = 2,
         .max = 1000000,
         .value_name = "K",
         .help = "classes of the synthetic labels"},
        {.long_name = "batch",
         .kind = BENCH_CLI_INT,
         .dest = &batch,
         .value = "64",
         .min = 1,
         .max = 1000000,
         .value_name = "B",
         .help = "per rank"},
        {.long_name = "steps",
         .kind = BENCH_CLI_INT,
         .dest = &steps,
         .value = "20",
         .min = 1,
         .max = 1000000000,
         .value_name = "N",
         .help = "timed steps"},
        {.long_name = "warmup",
         .kind = BENCH_CLI_INT,
         .dest = &warmup,
         .value = "3",
         .min = 0,
         .max = 1000000000,
         .value_name = "N",
         .help = "untimed steps before them"},
        {.long_name = "threads",
         .kind = BENCH_CLI_INT,
         .dest = &threads,
         .min = 1,
         .max = 4096,
         .value_name = "T",
         .default_note = "auto: this rank's share of the CPUs its affinity allows, as hora-train's",
         .help = "compute threads per rank"},
        {.long_name = "precision",
         .kind = BENCH_CLI_CHOICE,
         .dest = &precision,
         .value = "auto",
         .choices = tr_precision_names,
         .help = "hora-train's --precision; auto times fp32 and the low precisions the backend computes natively "
                 "first and runs the fastest"},
        {.long_name = "cpu-layout",
         .kind = BENCH_CLI_CHOICE,
         .dest = &layout,
         .value = "auto",
         .choices = tr_cpu_layout_names,
         .help = "the cpu backend's activation layout (hora-train's --cpu-layout)"},
        {.long_name = "no-overlap-run",
         .kind = BENCH_CLI_FLAG,
         .dest = &skip_no_overlap,
         .help = "skip the second run, with the all-reduce after backward"},
        BENCH_CLI_JSON(&json, "rank 0 writes the result"),
        {0},
    };
    const bench_cli_t cli = {
        .program = "hora-bench-train",
        .synopsis = "mpirun -np N hora-bench-train [flags]",
        .about = "Training img/s (all ranks) and CPU s per step with synthetic data, the all-reduce overlapped "
                 "with backward and after it.",
        .epilog = models,
        .options = table,
    };
    bench_cli_result_t parsed = bench_cli_parse(&cli, argc, argv);
    if (parsed != BENCH_CLI_RUN) return parsed;
    int no_overlap_run = !skip_no_overlap;
    if (hora_init() != HORA_OK) {
        fprintf(stderr, "hora-bench-train: hora_init: %s\n", hora_last_error());
        return 1;
    }
    int rank = hora_rank(), size = hora_size(), rc = 1;
    tr_model_spec_t spec;
    if (tr_model_spec_from_name(model_name, &spec) != HORA_OK) {
        if (rank == 0) fprintf(stderr, "hora-bench-train: %s\n", status_message());
        goto out_shutdown;
    }
    if (chw[0]) {
        spec.in_channels = chw[0];
        spec.height = chw[1];
        spec.width = chw[2];
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
    if (!ops || ops->init(&bc, &backend) != HORA_OK) goto out_shutdown;
    tr_step_config_t sc = {.optim = {.momentum = 0.9, .weight_decay = 1e-4, .nesterov = 1, .decay_bn_bias = 1}};
    tr_precision_probe_t probe = {.choice = TR_PRECISION_FP32};
    if (precision == TR_PRECISION_AUTO) {
        tr_precision_probe_config_t pc = {.spec = spec,
                                          .batch = batch,
                                          .grad = TR_GRAD_DTYPE_AUTO,
                                          .loss_scale_opt = TR_LOSS_SCALE_OPT_AUTO,
                                          .loss_scale_window = 2000,
                                          .step = sc,
                                          .grads_shared = size > 1,
                                          .seed = 1,
                                          .budget_s = 2.0};
        if (tr_precision_probe(backend, &pc, &probe) != HORA_OK) goto out_backend;
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
    for (size_t i = 0; i < (size_t)batch * sample; i++) x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    for (int i = 0; i < batch; i++) y[i] = i % classes;

    double ips[2] = {0, 0}, cpu_step[2] = {0, 0};
    int ok = 1;
    for (int overlap = 1; overlap >= (no_overlap_run ? 0 : 1) && ok; overlap--) {
        sc.overlap = overlap;
        tr_run_state_t state = tr_run_state_begin(1);
        tr_loss_scale_begin(&sc.loss_scale, &state.loss_scale);
        tr_trainer_t *t;
        ok = tr_trainer_init(model, &sc, &state, &t) == HORA_OK && tr_trainer_broadcast_state(t, 0, 0) == HORA_OK &&
             measure(t, &xt, y, batch, warmup, steps, &ips[overlap], &cpu_step[overlap]) == 0;
        tr_trainer_free(t);
    }
    if (ok && rank == 0) {
        size_t np = tr_tensor_count(tr_model_arena(model, TR_ARENA_PARAMS));
        printf("hora-bench-train: %s %dx%dx%d, %d ranks x batch %d, %d steps (+%d warm-up), %zu parameters, "
               "precision %s%s, %d thread%s per rank\n",
               model_name, spec.in_channels, spec.height, spec.width, size, batch, steps, warmup, np,
               tr_precision_names[precision], probe.steps ? " (auto)" : "", threads, threads == 1 ? "" : "s");
        printf("  overlap on : %10.1f img/s (all ranks)  %.3f CPU s per step (rank 0)\n", ips[1], cpu_step[1]);
        if (no_overlap_run) printf("  overlap off: %10.1f img/s (all ranks)  gain %.2fx\n", ips[0], ips[1] / ips[0]);
        if (json) {
            char probe_json[1536] = "{";
            tr_precision_json(&probe, probe_json + 1, sizeof(probe_json) - 2);
            strcat(probe_json, "}");
            bench_json_t out;
            ok = bench_json_open(&out, "hora-bench-train", json, 0) == 0;
            if (ok) {
                bench_json_object(&out, NULL);
                bench_json_string(&out, "model", model_name);
                bench_json_array(&out, "image");
                bench_json_integer(&out, NULL, spec.in_channels);
                bench_json_integer(&out, NULL, spec.height);
                bench_json_integer(&out, NULL, spec.width);
                bench_json_end(&out);
                bench_json_integer(&out, "ranks", size);
                bench_json_integer(&out, "batch", batch);
                bench_json_integer(&out, "steps", steps);
                bench_json_integer(&out, "threads", threads);
                bench_json_string(&out, "precision", tr_precision_names[precision]);
                bench_json_string(&out, "compute_dtype", tr_dtype_name(spec.compute_dtype));
                bench_json_string(&out, "grad_dtype", tr_dtype_name(spec.grad_dtype));
                bench_json_number(&out, "img_per_s", "%.2f", ips[1], 1);
                bench_json_number(&out, "img_per_s_no_overlap", "%.2f", ips[0], 1);
                bench_json_number(&out, "cpu_s_per_step", "%.4f", cpu_step[1], 1);
                bench_json_raw(&out, "precision_auto", probe.steps ? probe_json : "{}");
                ok = bench_json_close(&out, "hora-bench-train", json) == 0;
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
