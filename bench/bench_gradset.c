/*
 * bench_gradset.c - hora-bench-gradset: one training step's gradient traffic
 * of ResNet-50 (161 tensors, 97.5 MiB in f32) through hora's negotiated API,
 * the way a data-parallel trainer submits it, optionally against MPI.
 *
 *   mpirun -np 2 hora-bench-gradset --baseline mpi \
 *       --fusion-threshold 0,4M,32M,128M --cycle-time 0.5,1,2,5 --json gs.json
 *
 * A step enqueues hora_allreduce_async(AVG, in place) for every gradient in
 * backprop order (the reverse of registration order, resnet50_grads.h),
 * named "grad/<name>", then waits for and frees every request. All gradients
 * live in one arena from hora_mem_alloc, laid out in backprop order, each at
 * a 64-byte aligned offset: the runtime's fusion can then run on the arena
 * itself instead of packing copies.
 *
 * Settings are read at hora_init, so every swept value is its own
 * hora_init -> measure -> hora_shutdown round with HORA_FUSION_THRESHOLD or
 * HORA_CYCLE_TIME_MS set in the environment. The step time of a setting is
 * each rank's mean over -n timed steps after -w warm-up steps, maximum over
 * ranks. After the timed steps one more step runs on exactly checkable
 * inputs (gradient t, element i of rank r holds ((i + t) % 5) + r) and every
 * element is compared bitwise with (float)sum / (float)nranks.
 *
 * Build: meson (bench/meson.build) -> build/bench/hora-bench-gradset.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "bench_common.h"
#include "hora.h"
#include "resnet50_grads.h"

#define BENCH_NAME "hora-bench-gradset"
/* Offsets of the gradients in the arena are rounded up to this. */
#define GRADSET_ALIGN_BYTES 64
#define GRADSET_MAX_SWEEP 32
#define GRADSET_MAX_MISMATCH_REPORTS 8
#define GRADSET_NAME_BYTES 96
#define GRADSET_ENV_FUSION "HORA_FUSION_THRESHOLD"
#define GRADSET_ENV_CYCLE "HORA_CYCLE_TIME_MS"

typedef struct {
    int steps;
    int warmup;
    size_t fusion_values[GRADSET_MAX_SWEEP];
    int fusion_count;
    double cycle_values[GRADSET_MAX_SWEEP];
    int cycle_count;
    int baseline_mpi;
    const char *json_path;
    const char *plot_path;
    int autotune;
    const char *autotune_log;
    int autotune_steps;
} gradset_options_t;

/* The gradient arena: gradient k in backprop order (registration index
 * RESNET50_GRAD_COUNT - 1 - k) starts at offset_bytes[k]. */
typedef struct {
    unsigned char *base;  /* (arena_bytes) from hora_mem_alloc */
    size_t arena_bytes;   /* up to the end of the last gradient */
    size_t payload_bytes; /* sum of the gradients' sizes, without padding */
    size_t offset_bytes[RESNET50_GRAD_COUNT];
    char names[RESNET50_GRAD_COUNT][GRADSET_NAME_BYTES];
} gradset_arena_t;

/* One measured setting. */
typedef struct {
    const char *variable;    /* "default", "fusion_threshold" or "cycle_time_ms" */
    size_t fusion_threshold; /* value in force (bytes) */
    double cycle_time_ms;    /* value in force */
    double step_ms;
    double busbw_gbs;
    size_t est_buffers;
} gradset_row_t;

static int gradset_rank;
static int gradset_nranks;

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

/* BENCH_CLI_RUN, or the exit status (--help, a bad flag: printed by the
 * launcher's rank 0 only). */
static bench_cli_result_t gradset_parse(int argc, char **argv, gradset_options_t *o)
{
    static const char *const baselines[] = {"mpi", NULL};
    int baseline = -1;
    *o = (gradset_options_t){.steps = 0};
    const bench_cli_option_t table[] = {
        BENCH_CLI_ITERS(&o->steps, "20", "timed steps per setting"),
        BENCH_CLI_WARMUP(&o->warmup, "3", "untimed steps before them"),
        {.long_name = "fusion-threshold",
         .kind = BENCH_CLI_SIZE,
         .dest = o->fusion_values,
         .list_count = &o->fusion_count,
         .list_max = GRADSET_MAX_SWEEP,
         .value_name = "LIST",
         .help = "sweep HORA_FUSION_THRESHOLD over a comma-separated list of sizes (0,4M,32M,128M)"},
        {.long_name = "cycle-time",
         .kind = BENCH_CLI_DOUBLE,
         .dest = o->cycle_values,
         .list_count = &o->cycle_count,
         .list_max = GRADSET_MAX_SWEEP,
         .min = 0,
         .max = 1e9,
         .open_min = 1,
         .value_name = "LIST",
         .help = "sweep HORA_CYCLE_TIME_MS over a comma-separated list of milliseconds (0.5,1,2,5)"},
        {.long_name = "baseline",
         .kind = BENCH_CLI_CHOICE,
         .dest = &baseline,
         .choices = baselines,
         .help = "also time MPI_Allreduce per tensor and over the whole arena"},
        BENCH_CLI_JSON(&o->json_path, "rank 0 writes the results as one JSON object"),
        BENCH_CLI_PLOT(&o->plot_path, "rank 0 plots step time against each swept setting (gnuplot), with "
                                      "--baseline mpi the MPI step times as reference lines"),
        {.long_name = "autotune",
         .kind = BENCH_CLI_FLAG,
         .dest = &o->autotune,
         .help = "one more round with HORA_AUTOTUNE=1; prints the winner row"},
        {.long_name = "autotune-log",
         .kind = BENCH_CLI_STRING,
         .dest = &o->autotune_log,
         .value_name = "FILE",
         .default_note = "/tmp/" BENCH_NAME "-autotune-<pid>.csv",
         .help = "the autotune CSV"},
        {.long_name = "autotune-steps",
         .kind = BENCH_CLI_INT,
         .dest = &o->autotune_steps,
         .value = "1500",
         .min = 1,
         .max = 100000000,
         .value_name = "N",
         .help = "steps of the autotune round"},
        {0},
    };
    const bench_cli_t cli = {
        .program = BENCH_NAME,
        .synopsis = "mpirun -np N " BENCH_NAME " [flags]",
        .about = "Allreduce (avg) ResNet-50's 161 gradients per step through hora_allreduce_async, in backprop "
                 "order, from one arena laid out in that order.",
        .epilog = "Exit status: 0 when every checked element is right, 1 when one is wrong or a call fails, 2 on "
                  "a bad flag.",
        .options = table,
    };
    bench_cli_result_t result = bench_cli_parse(&cli, argc, argv);
    o->baseline_mpi = baseline == 0;
    return result;
}

/* ------------------------------------------------------------------------ */
/* Environment and the settings in force                                     */
/* ------------------------------------------------------------------------ */

/* The caller's own value of a variable, restored between rounds so that a
 * sweep of one variable leaves the other as the user set it. */
typedef struct {
    char *fusion; /* NULL when unset */
    char *cycle;
} gradset_env_t;

static char *gradset_env_dup(const char *name)
{
    const char *v = getenv(name);
    return v ? strdup(v) : NULL;
}

static int gradset_env_set(const char *name, const char *value)
{
    return value ? setenv(name, value, 1) : unsetenv(name);
}

static int gradset_env_restore(const gradset_env_t *env)
{
    return gradset_env_set(GRADSET_ENV_FUSION, env->fusion) | gradset_env_set(GRADSET_ENV_CYCLE, env->cycle);
}

/* Read the values in force from hora_config_print, the public view of the
 * settings table. Leaves a field as it is when its line is missing. */
static void gradset_settings_in_force(size_t *fusion_threshold, double *cycle_time_ms)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem) return;
    hora_config_print(mem);
    fclose(mem);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[64], value[64];
        if (sscanf(line, "%63s %63s", name, value) != 2) continue;
        if (!strcmp(name, GRADSET_ENV_FUSION)) {
            size_t bytes;
            if (!bench_size_parse(value, &bytes)) *fusion_threshold = bytes;
        } else if (!strcmp(name, GRADSET_ENV_CYCLE)) {
            *cycle_time_ms = strtod(value, NULL);
        }
    }
    free(text);
}

/* ------------------------------------------------------------------------ */
/* The arena and the steps                                                   */
/* ------------------------------------------------------------------------ */

static size_t gradset_round_up(size_t bytes, size_t align) { return (bytes + align - 1) / align * align; }

/* Registration index of the k-th gradient backprop produces. */
static size_t gradset_backprop_index(size_t k) { return RESNET50_GRAD_COUNT - 1 - k; }

static void gradset_arena_layout(gradset_arena_t *a)
{
    size_t end = 0;
    a->payload_bytes = 0;
    for (size_t k = 0; k < RESNET50_GRAD_COUNT; k++) {
        const resnet50_grad_t *g = &resnet50_grads[gradset_backprop_index(k)];
        a->offset_bytes[k] = gradset_round_up(end, GRADSET_ALIGN_BYTES);
        end = a->offset_bytes[k] + g->count * sizeof(float);
        a->payload_bytes += g->count * sizeof(float);
        snprintf(a->names[k], sizeof(a->names[k]), "grad/%s", g->name);
    }
    a->arena_bytes = end;
}

static float *gradset_grad(const gradset_arena_t *a, size_t k) { return (float *)(a->base + a->offset_bytes[k]); }

/* Rank r's input for element i of the gradient with registration index t:
 * small integers, so the sum over ranks is exact in f32. */
static float gradset_input(int rank, size_t t, size_t i) { return (float)((i + t) % 5 + (size_t)rank); }

static float gradset_expected(int nranks, size_t t, size_t i)
{
    long sum = 0;
    for (int r = 0; r < nranks; r++) sum += (long)((i + t) % 5) + r;
    return (float)sum / (float)nranks;
}

static void gradset_arena_fill(const gradset_arena_t *a)
{
    for (size_t k = 0; k < RESNET50_GRAD_COUNT; k++) {
        size_t t = gradset_backprop_index(k);
        float *g = gradset_grad(a, k);
        for (size_t i = 0; i < resnet50_grads[t].count; i++) g[i] = gradset_input(gradset_rank, t, i);
    }
}

/* Elements that differ bitwise from the expected average; prints the first few. */
static size_t gradset_arena_count_wrong(const gradset_arena_t *a, const char *setting)
{
    size_t wrong = 0;
    for (size_t k = 0; k < RESNET50_GRAD_COUNT; k++) {
        size_t t = gradset_backprop_index(k);
        const float *g = gradset_grad(a, k);
        for (size_t i = 0; i < resnet50_grads[t].count; i++) {
            float want = gradset_expected(gradset_nranks, t, i);
            if (memcmp(&g[i], &want, sizeof(float)) == 0) continue;
            if (wrong++ < GRADSET_MAX_MISMATCH_REPORTS)
                fprintf(stderr, BENCH_NAME ": rank %d, %s: %s[%zu] = %.9g, expected %.9g\n", gradset_rank, setting,
                        a->names[k], i, (double)g[i], (double)want);
        }
    }
    return wrong;
}

/* A failed hora call on this rank ends the run: the other ranks may be
 * blocked waiting for this one, so hora_abort tells them (their calls fail
 * with this reason) and the non-zero exit lets mpirun end the job. */
static void gradset_abort(hora_status_t status, const char *what, const char *detail)
{
    char message[1024];
    snprintf(message, sizeof(message), BENCH_NAME ": rank %d: %s failed: %s: %s", gradset_rank, what,
             hora_status_string(status), detail);
    fprintf(stderr, "%s\n", message);
    hora_abort(status, message);
    exit(1);
}

/* One step: every gradient in backprop order, then wait for all. A failure
 * ends the run (gradset_abort); HORA_OK otherwise. */
static hora_status_t gradset_step(const gradset_arena_t *a)
{
    hora_request_t reqs[RESNET50_GRAD_COUNT];
    size_t submitted = 0;
    for (size_t k = 0; k < RESNET50_GRAD_COUNT; k++) {
        float *g = gradset_grad(a, k);
        size_t count = resnet50_grads[gradset_backprop_index(k)].count;
        hora_status_t status =
            hora_allreduce_async(a->names[k], g, g, count, HORA_DTYPE_F32, HORA_OP_AVG, NULL, &reqs[submitted]);
        if (status != HORA_OK) gradset_abort(status, "hora_allreduce_async", hora_last_error());
        submitted++;
    }
    for (size_t k = 0; k < submitted; k++) {
        hora_status_t status = hora_wait(reqs[k]);
        if (status != HORA_OK) gradset_abort(status, a->names[k], hora_request_error(reqs[k]));
        hora_request_free(reqs[k]);
    }
    return HORA_OK;
}

/* Mean seconds per step on this rank, maximum over ranks; < 0 on failure. */
static double gradset_time_steps(const gradset_arena_t *a, long warmup, long steps)
{
    int failed = 0;
    for (long s = 0; s < warmup && !failed; s++) failed = gradset_step(a) != HORA_OK;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long s = 0; s < steps && !failed; s++) failed = gradset_step(a) != HORA_OK;
    double mean = (MPI_Wtime() - t0) / (double)steps;
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    double slowest = 0;
    MPI_Allreduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return any_failed ? -1.0 : slowest;
}

/* The MPI baselines on an arena of the same layout: one MPI_Allreduce per
 * gradient in backprop order, or one over the whole arena (padding
 * included). They run after hora_shutdown, so hora's coordinator thread does
 * not share the cores or MPI's progress engine with them. AVG's division is a
 * local pass MPI leaves to the caller; it is left out. The arena holds zeros
 * so that repeated sums stay finite. */
static double gradset_time_mpi(const gradset_arena_t *a, long warmup, long steps, int one_call)
{
    memset(a->base, 0, a->arena_bytes);
    double mean = 0;
    for (long s = -warmup; s < steps; s++) {
        if (s == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            mean = MPI_Wtime();
        }
        if (one_call) {
            MPI_Allreduce(MPI_IN_PLACE, a->base, (int)(a->arena_bytes / sizeof(float)), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD);
            continue;
        }
        for (size_t k = 0; k < RESNET50_GRAD_COUNT; k++)
            MPI_Allreduce(MPI_IN_PLACE, gradset_grad(a, k), (int)resnet50_grads[gradset_backprop_index(k)].count,
                          MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    mean = (MPI_Wtime() - mean) / (double)steps;
    double slowest = 0;
    MPI_Allreduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

/* Fused buffers the runtime would use if every gradient were ready at once:
 * ceil(arena / threshold), at most one per gradient. The public API does not
 * show fusion, hence "est". */
static size_t gradset_est_buffers(size_t arena_bytes, size_t threshold)
{
    if (threshold == 0) return RESNET50_GRAD_COUNT;
    size_t n = (arena_bytes + threshold - 1) / threshold;
    return n < RESNET50_GRAD_COUNT ? n : RESNET50_GRAD_COUNT;
}

typedef struct {
    double hora_ms;
    double mpi_per_tensor_ms; /* NAN without a baseline */
    double mpi_one_call_ms;
} gradset_default_t;

/*
 * One round: hora_init with the environment as it stands, layout, timed
 * steps, one checked step, optionally the MPI baselines, hora_shutdown.
 * Returns 0, or 1 on a wrong element or a failed hora_init (reported,
 * agreed by every rank); a failed call on one rank ends the run there
 * (gradset_abort).
 */
static int gradset_round(const gradset_options_t *o, const char *variable, long steps, gradset_row_t *row,
                         gradset_default_t *baseline)
{
    hora_status_t status = hora_init();
    if (status != HORA_OK) {
        fprintf(stderr, BENCH_NAME ": rank %d: hora_init failed: %s: %s (check the HORA_* variables)\n", gradset_rank,
                hora_status_string(status), hora_last_error());
        return 1;
    }
    int result = 1;
    gradset_arena_t *a = calloc(1, sizeof(*a));
    if (!a) gradset_abort(HORA_ERR_NO_MEMORY, "calloc of the arena layout", "out of memory");
    gradset_arena_layout(a);
    void *base = NULL;
    status = hora_mem_alloc(a->arena_bytes, &base);
    if (status != HORA_OK) gradset_abort(status, "hora_mem_alloc of the gradient arena", hora_last_error());
    a->base = base;
    memset(a->base, 0, a->arena_bytes);

    *row = (gradset_row_t){.variable = variable, .fusion_threshold = 128u << 20, .cycle_time_ms = 1.0};
    gradset_settings_in_force(&row->fusion_threshold, &row->cycle_time_ms);

    gradset_arena_fill(a);
    double seconds = gradset_time_steps(a, o->warmup, steps);
    if (seconds < 0) goto out_free_mem;
    row->step_ms = seconds * 1e3;
    row->busbw_gbs = (double)a->arena_bytes / seconds * bench_allreduce_bus_factor(gradset_nranks) / 1e9;
    row->est_buffers = gradset_est_buffers(a->arena_bytes, row->fusion_threshold);

    /* The checked step: fresh inputs, one more step, every element compared. */
    gradset_arena_fill(a);
    int failed = gradset_step(a) != HORA_OK;
    char setting[96];
    snprintf(setting, sizeof(setting), "%s (fusion %zu B, cycle %g ms)", variable, row->fusion_threshold,
             row->cycle_time_ms);
    unsigned long long wrong = failed ? 0 : gradset_arena_count_wrong(a, setting), total_wrong = 0;
    int any_failed = 0;
    MPI_Allreduce(&wrong, &total_wrong, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_failed) goto out_free_mem;
    if (total_wrong) {
        if (gradset_rank == 0)
            fprintf(stderr, BENCH_NAME ": %s: %llu wrong elements over all ranks\n", setting, total_wrong);
        goto out_free_mem;
    }

    result = 0;

out_free_mem:
    hora_mem_free(a->base);
    hora_shutdown();
    if (result == 0 && baseline) {
        baseline->hora_ms = row->step_ms;
        baseline->mpi_per_tensor_ms = NAN;
        baseline->mpi_one_call_ms = NAN;
        if (o->baseline_mpi) {
            a->base = aligned_alloc(4096, (a->arena_bytes + 4095) / 4096 * 4096);
            if (!a->base) {
                fprintf(stderr, BENCH_NAME ": out of memory for the MPI baseline\n");
                result = 1;
            } else {
                baseline->mpi_per_tensor_ms = gradset_time_mpi(a, o->warmup, o->steps, 0) * 1e3;
                baseline->mpi_one_call_ms = gradset_time_mpi(a, o->warmup, o->steps, 1) * 1e3;
                free(a->base);
            }
        }
    }
    free(a);
    return result;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */
/* ------------------------------------------------------------------------ */

/* The table: one row per setting, header lines with '#'. */
static const bench_column_t gradset_columns[] = {
    {.name = " setting", .width = 18, .left = 1},     {.name = "fusion", .unit = "(B)", .width = 10},
    {.name = "cycle", .unit = "(ms)", .width = 10},   {.name = "step", .unit = "(ms)", .width = 10},
    {.name = "busbw", .unit = "(GB/s)", .width = 10}, {.name = "est_buffers", .width = 11},
};

static bench_table_t gradset_table(void)
{
    return (bench_table_t){.out = stdout,
                           .columns = gradset_columns,
                           .column_count = (int)(sizeof(gradset_columns) / sizeof(gradset_columns[0])),
                           .indent = "",
                           .comment = 1};
}

static void gradset_print_row(const gradset_row_t *r)
{
    char fusion[32];
    bench_size_label(r->fusion_threshold, fusion, sizeof(fusion));
    bench_table_t table = gradset_table();
    bench_table_text(&table, r->variable);
    bench_table_text(&table, fusion);
    bench_table_cell(&table, "%g", r->cycle_time_ms);
    bench_table_number(&table, r->step_ms, "%.3f");
    bench_table_number(&table, r->busbw_gbs, "%.2f");
    bench_table_cell(&table, "%zu", r->est_buffers);
    bench_table_end_row(&table);
}

static void gradset_write_json(const gradset_options_t *o, const gradset_arena_t *layout, const gradset_default_t *d,
                               const gradset_row_t *rows, int row_count)
{
    bench_json_t json;
    if (bench_json_open(&json, BENCH_NAME, o->json_path, 2) != 0) return;
    bench_json_object(&json, NULL);
    bench_json_string(&json, "benchmark", BENCH_NAME);
    bench_json_string(&json, "model", "resnet50");
    bench_json_integer(&json, "ranks", gradset_nranks);
    bench_json_integer(&json, "tensors", RESNET50_GRAD_COUNT);
    bench_json_integer(&json, "arena_bytes", (long long)layout->arena_bytes);
    bench_json_integer(&json, "payload_bytes", (long long)layout->payload_bytes);
    bench_json_integer(&json, "steps", o->steps);
    bench_json_integer(&json, "warmup_steps", o->warmup);
    bench_json_string(&json, "op", "avg");
    bench_json_number(&json, "hora_step_ms", "%.6g", d->hora_ms, 1);
    bench_json_number(&json, "mpi_per_tensor_step_ms", "%.6g", d->mpi_per_tensor_ms, 1);
    bench_json_number(&json, "mpi_one_call_step_ms", "%.6g", d->mpi_one_call_ms, 1);
    bench_json_number(&json, "hora_over_mpi_per_tensor", "%.6g", d->hora_ms / d->mpi_per_tensor_ms, 1);
    bench_json_array(&json, "sweep");
    for (int i = 0; i < row_count; i++) {
        const gradset_row_t *r = &rows[i];
        bench_json_object(&json, NULL);
        bench_json_string(&json, "variable", r->variable);
        bench_json_integer(&json, "fusion_threshold", (long long)r->fusion_threshold);
        bench_json_number(&json, "cycle_time_ms", "%g", r->cycle_time_ms, 1);
        bench_json_number(&json, "step_ms", "%.6g", r->step_ms, 1);
        bench_json_number(&json, "busbw", "%.6g", r->busbw_gbs, 1);
        bench_json_integer(&json, "responses_per_step", (long long)r->est_buffers);
        bench_json_bool(&json, "responses_per_step_is_estimate", 1);
        bench_json_end(&json);
    }
    bench_json_close(&json, BENCH_NAME, o->json_path);
}

/* One panel: hora's step time against x (the fusion threshold in MiB, or
 * with cycle the cycle time in ms) for the rows of variable (every row when
 * NULL), then, when the MPI baselines ran, each as a horizontal line with
 * its value in the key. */
static void gradset_plot_panel(FILE *gp, const gradset_row_t *rows, int row_count, const char *variable, int cycle,
                               const char *xlabel, const char *hora_title, const gradset_default_t *d)
{
    double lo = INFINITY, hi = -INFINITY;
    fprintf(gp, "set xlabel ");
    bench_gnuplot_quote(gp, xlabel);
    fprintf(gp, "\n$steps << EOD\n");
    for (int i = 0; i < row_count; i++) {
        if (variable && strcmp(rows[i].variable, variable) != 0) continue;
        double x = cycle ? rows[i].cycle_time_ms : (double)rows[i].fusion_threshold / 1048576.0;
        fprintf(gp, "%.17g %.6g\n", x, rows[i].step_ms);
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
    fprintf(gp, "EOD\n");
    /* x spans the measured values (plus the offsets); a single value would
     * leave autoscaling no width, so it gets one. */
    if (lo == hi)
        fprintf(gp, "set xrange [%.17g:%.17g]\n", lo - (lo != 0.0 ? fabs(lo) / 4 : 1.0),
                hi + (hi != 0.0 ? fabs(hi) / 4 : 1.0));
    else
        fprintf(gp, "set autoscale xfix\n");
    fprintf(gp, "plot $steps using 1:2 with linespoints lw 2 pt 7 ps 1.2 lc rgb '#1f77b4' title ");
    bench_gnuplot_quote(gp, hora_title);
    if (!isnan(d->mpi_per_tensor_ms))
        fprintf(gp,
                ", %.6g with lines lw 2 dt 2 lc rgb '#d62728' title "
                "'MPI_Allreduce per tensor (%d calls): %.2f ms'",
                d->mpi_per_tensor_ms, (int)RESNET50_GRAD_COUNT, d->mpi_per_tensor_ms);
    if (!isnan(d->mpi_one_call_ms))
        fprintf(gp,
                ", %.6g with lines lw 2 dt 3 lc rgb '#2ca02c' title "
                "'MPI_Allreduce over the whole arena (1 call): %.2f ms'",
                d->mpi_one_call_ms, d->mpi_one_call_ms);
    fprintf(gp, "\n");
}

/* One panel per swept variable (the default row alone when none was swept):
 * step ms against its value, with the MPI baselines (when measured) as
 * reference lines. Text is noenhanced, so the variables' underscores print
 * as they are. */
static void gradset_write_plot(const gradset_options_t *o, const gradset_default_t *d, const gradset_row_t *rows,
                               int row_count)
{
    int panels = (o->fusion_count > 0) + (o->cycle_count > 0);
    if (panels == 0) panels = 1;
    FILE *gp = bench_plot_open(BENCH_NAME, o->plot_path, 640 * panels, 520, 11);
    if (!gp) return;
    fprintf(gp, "set multiplot layout 1,%d title 'ResNet-50 gradients (%d tensors, f32, avg), %d ranks: step time'\n",
            panels, (int)RESNET50_GRAD_COUNT, gradset_nranks);
    /* y from 0, so hora and MPI compare by height. */
    fprintf(gp, "set ylabel 'step time (ms)'\nset yrange [0:*]\nset grid\n");
    fprintf(gp, "set offsets graph 0.04, graph 0.04, 0, 0\nset key below vertical Left reverse\n");
    if (o->fusion_count)
        gradset_plot_panel(gp, rows, row_count, "fusion_threshold", 0, GRADSET_ENV_FUSION " (MiB)",
                           "hora, " GRADSET_ENV_FUSION " swept", d);
    if (o->cycle_count)
        gradset_plot_panel(gp, rows, row_count, "cycle_time_ms", 1, GRADSET_ENV_CYCLE,
                           "hora, " GRADSET_ENV_CYCLE " swept", d);
    if (!o->fusion_count && !o->cycle_count)
        gradset_plot_panel(gp, rows, row_count, NULL, 0, GRADSET_ENV_FUSION " (MiB)", "hora, default settings", d);
    fprintf(gp, "unset multiplot\n");
    bench_plot_close(gp, BENCH_NAME, o->plot_path);
}

/* Print the last "winner" row of the autotune CSV with its header. */
static void gradset_print_autotune_winner(const char *path)
{
    FILE *in = fopen(path, "r");
    if (!in) {
        fprintf(stderr, BENCH_NAME ": warning: --autotune: cannot read %s\n", path);
        return;
    }
    char line[512], header[512] = "", winner[512] = "";
    while (fgets(line, sizeof(line), in)) {
        if (!header[0]) snprintf(header, sizeof(header), "%s", line);
        char *comma = strchr(line, ',');
        if (comma && !strncmp(comma + 1, "winner,", 7)) snprintf(winner, sizeof(winner), "%s", line);
    }
    fclose(in);
    printf("# autotune log  : %s\n", path);
    if (!winner[0]) {
        printf("# autotune      : no winner row yet (the search did not finish; raise --autotune-steps)\n");
        return;
    }
    printf("# %s", header);
    printf("  %s", winner);
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    gradset_options_t o;
    bench_cli_result_t parsed = gradset_parse(argc, argv, &o);
    if (parsed != BENCH_CLI_RUN) return parsed;

    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &gradset_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &gradset_nranks);

    gradset_env_t env = {gradset_env_dup(GRADSET_ENV_FUSION), gradset_env_dup(GRADSET_ENV_CYCLE)};
    static gradset_arena_t layout;
    gradset_arena_layout(&layout);
    int rows_max = 1 + o.fusion_count + o.cycle_count;
    gradset_row_t *rows = calloc((size_t)rows_max, sizeof(*rows));
    if (!rows) {
        fprintf(stderr, BENCH_NAME ": out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int row_count = 0, failed = 0;

    if (gradset_rank == 0) {
        printf("# " BENCH_NAME "\n");
        printf("#  ranks        : %d\n", gradset_nranks);
        printf("#  gradients    : %zu tensors of ResNet-50, f32, avg, in place, backprop order\n",
               (size_t)RESNET50_GRAD_COUNT);
        printf("#  arena        : %zu bytes (%zu of data, each gradient %d-byte aligned), hora_mem_alloc\n",
               layout.arena_bytes, layout.payload_bytes, GRADSET_ALIGN_BYTES);
        printf("#  steps        : %d timed, %d warm-up per setting; one checked step after them\n", o.steps, o.warmup);
        printf("#  step time    : mean per step on each rank, max over ranks\n");
        printf("#  busbw        : arena bytes / step time * 2(n-1)/n = * %.4f\n",
               bench_allreduce_bus_factor(gradset_nranks));
        printf("#  est_buffers  : ceil(arena / fusion threshold), threshold 0 -> %zu (an estimate: the\n"
               "#                 public API does not show fusion)\n#\n",
               (size_t)RESNET50_GRAD_COUNT);
        bench_table_t table = gradset_table();
        bench_table_header(&table);
    }

    gradset_default_t d = {NAN, NAN, NAN};
    if (gradset_env_restore(&env)) failed = 1;
    if (!failed) failed = gradset_round(&o, "default", o.steps, &rows[row_count], &d);
    if (!failed && gradset_rank == 0) gradset_print_row(&rows[row_count]);
    row_count += !failed;

    /* The sweeps: every value of each variable, one round each. */
    for (int i = 0; i < o.fusion_count + o.cycle_count && !failed; i++) {
        int fusion = i < o.fusion_count;
        char value[32];
        if (fusion)
            snprintf(value, sizeof(value), "%zu", o.fusion_values[i]);
        else
            snprintf(value, sizeof(value), "%.17g", o.cycle_values[i - o.fusion_count]);
        failed = gradset_env_restore(&env) || setenv(fusion ? GRADSET_ENV_FUSION : GRADSET_ENV_CYCLE, value, 1);
        if (!failed)
            failed = gradset_round(&o, fusion ? "fusion_threshold" : "cycle_time_ms", o.steps, &rows[row_count], NULL);
        if (!failed && gradset_rank == 0) gradset_print_row(&rows[row_count]);
        row_count += !failed;
    }

    if (!failed && gradset_rank == 0) {
        printf("#\n# hora_step_ms            : %.3f (default settings)\n", d.hora_ms);
        if (o.baseline_mpi) {
            printf("# mpi_per_tensor_step_ms  : %.3f (%zu x MPI_Allreduce in place, sum, backprop order)\n",
                   d.mpi_per_tensor_ms, (size_t)RESNET50_GRAD_COUNT);
            printf("# mpi_one_call_step_ms    : %.3f (1 x MPI_Allreduce over the arena)\n", d.mpi_one_call_ms);
            printf("# hora / mpi_per_tensor   : %.3f (target <= 0.5)\n", d.hora_ms / d.mpi_per_tensor_ms);
            printf("# hora / mpi_one_call     : %.3f\n", d.hora_ms / d.mpi_one_call_ms);
        }
        fflush(stdout);
    }

    if (!failed && o.autotune) {
        char path[256];
        if (o.autotune_log)
            snprintf(path, sizeof(path), "%s", o.autotune_log);
        else {
            /* Only rank 0's runtime writes the log; the name comes from it. */
            int pid = (int)getpid();
            MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
            snprintf(path, sizeof(path), "/tmp/" BENCH_NAME "-autotune-%d.csv", pid);
        }
        failed = gradset_env_restore(&env) || setenv("HORA_AUTOTUNE", "1", 1) || setenv("HORA_AUTOTUNE_LOG", path, 1);
        gradset_row_t row;
        if (!failed) failed = gradset_round(&o, "autotune", o.autotune_steps, &row, NULL);
        if (!failed && gradset_rank == 0) {
            printf("#\n# autotune      : %d steps, mean step %.3f ms (over all of them, search included)\n",
                   o.autotune_steps, row.step_ms);
            gradset_print_autotune_winner(path);
        }
        unsetenv("HORA_AUTOTUNE");
        unsetenv("HORA_AUTOTUNE_LOG");
    }

    if (!failed && gradset_rank == 0) {
        if (o.json_path) gradset_write_json(&o, &layout, &d, rows, row_count);
        if (o.plot_path) gradset_write_plot(&o, &d, rows, row_count);
    }

    free(rows);
    free(env.fusion);
    free(env.cycle);
    MPI_Finalize();
    return failed ? 1 : 0;
}
