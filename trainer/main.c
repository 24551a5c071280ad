/*
 * main.c - hora-train: data-parallel ResNet training.
 *
 *   mpirun -np N hora-train --model resnet50 --data DIR --epochs 90 --batch 256 ...
 *
 * Each rank trains on its shard of every epoch; gradients are averaged with
 * libhora during backprop. Rank 0 prints progress and writes a JSON-lines
 * log; evaluation reduces top-1/top-5 counts over ranks. --help lists every
 * flag (options.c) and HORA_* setting.
 *
 * Where the run stands lives in one struct, run.state (run.h): epoch, step,
 * data-order position, seeds, the overlap decision, the loss-scale state,
 * the precision. The loop below advances it and nothing else. Resuming and
 * saving checkpoints are main_ckpt.c's (main_internal.h between the two).
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "main_internal.h"
#include "optim.h"
#include "precision.h"
#include "threads.h"

static void format_duration(double s, char *buf, size_t n)
{
    if (!(s >= 0) || s > 1e7)
        s = 0;
    int t = (int)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%dh%02dm%02ds", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%dm%02ds", t / 60, t % 60);
}


/* This rank's first error, as it was printed: what hora_abort tells the
 * peers. */
static char first_error[1024];

/* Print an error on stderr (one line) and keep the first one. */
void main_report(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
    if (!first_error[0])
        snprintf(first_error, sizeof(first_error), "%s", line);
}

void main_report_keep(const char *line)
{
    if (!first_error[0])
        snprintf(first_error, sizeof(first_error), "%s", line);
}



/* The input statistics the data is normalised with: Fashion-MNIST's for one
 * channel, ImageNet's for three. */
static void input_stats(int channels, float mean[3], float std[3])
{
    const float gray_mean = 0.2860f, gray_std = 0.3530f;
    const float rgb_mean[3] = {0.485f, 0.456f, 0.406f}, rgb_std[3] = {0.229f, 0.224f, 0.225f};
    for (int c = 0; c < 3; c++) {
        mean[c] = channels == 1 ? (c ? 0.0f : gray_mean) : rgb_mean[c];
        std[c] = channels == 1 ? (c ? 0.0f : gray_std) : rgb_std[c];
    }
}

/* A device backend takes u8 pixels and normalises them itself (the bytes
 * cross to the device, not floats); the cpu backend takes normalised f32
 * NCHW batches from the loader threads. */
static int device_input(const run_t *r)
{
    return r->backend && r->backend->ops->memory == TR_MEMORY_DEVICE;
}

/* Loader batches in the backend's host memory (pinned for cuda). */
static void *batch_alloc(void *ctx, size_t bytes)
{
    tr_backend_t *backend = ctx;
    void *p = NULL;
    return backend->ops->host_alloc(backend, bytes, &p) == HORA_OK ? p : NULL;
}

static void batch_dealloc(void *ctx, void *ptr)
{
    tr_backend_t *backend = ctx;
    backend->ops->host_free(backend, ptr);
}

/* A loader batch as the model's input: its valid samples only. */
static tr_tensor_t batch_tensor(const run_t *r, const tr_batch_t *b, const tr_model_spec_t *spec)
{
    const int dims[4] = {b->count, spec->in_channels, spec->height, spec->width};
    if (!device_input(r))
        return tr_tensor_plain(b->data, TR_DTYPE_F32, TR_MEMORY_HOST, 4, dims);
    tr_tensor_t x = tr_tensor_plain(b->data, TR_DTYPE_U8, TR_MEMORY_HOST, 4, dims);
    x.layout = TR_LAYOUT_NHWC;
    return x;
}

static hora_status_t open_loader(run_t *r, tr_split_t split, int channels, tr_loader_t **out)
{
    const tr_options_t *o = &r->opt;
    tr_loader_config_t c = {0};
    c.path = o->data;
    c.split = split;
    c.rank = r->rank;
    c.world = r->size;
    c.batch = split == TR_SPLIT_VAL && o->eval_batch ? o->eval_batch : o->batch;
    c.seed = r->state.data_seed;
    c.threads = o->data_threads ? o->data_threads : 1;
    /* Every sample of the epoch is trained on: the last step takes what is
     * left (the same count on every rank: each rank's shard has the same
     * size, see loader.h). */
    c.drop_last = 0;
    c.strict = o->strict;
    c.layout = TR_LAYOUT_NCHW;
    c.dtype = TR_DTYPE_F32;
    if (device_input(r)) {
        c.layout = TR_LAYOUT_NHWC;
        c.dtype = TR_DTYPE_U8;
        c.alloc = batch_alloc;
        c.dealloc = batch_dealloc;
        c.alloc_ctx = r->backend;
    }
    c.flip = o->flip != 0;
    c.pad_crop = o->pad_crop > 0 ? o->pad_crop : 0;
    c.random_resized_crop = o->rrc > 0;
    c.jitter = o->jitter;
    c.lighting = o->lighting;
    c.val_resize_ratio = 0.875f;
    input_stats(channels, c.mean, c.std);
    hora_status_t status = tr_loader_open(&c, out);
    if (status != HORA_OK)
        main_report("hora-train: cannot open %s split of %s: %s",
               split == TR_SPLIT_TRAIN ? "train" : "val", o->data, status_message());
    return status;
}

/* --precision auto: a resumed run keeps the precision its checkpoint's run
 * computed in; a fresh one times the candidates now (precision.c), before
 * the run's own model exists, and keeps the fastest. The choice and its
 * timings go into the run state (and so into every checkpoint). */
static hora_status_t precision_auto(run_t *r, const tr_model_spec_t *spec, int grad)
{
    tr_options_t *o = &r->opt;
    tr_precision_probe_config_t pc = {.spec = *spec, .batch = o->batch, .grad = grad, .loss_scale_opt = o->loss_scale,
                                      .loss_scale_window = o->loss_scale_window,
                                      .step = {.overlap = (tr_overlap_t)o->overlap, .optim = o->optim,
                                               .label_smoothing = (float)o->label_smoothing,
                                               .reproducible = o->reproducible},
                                      .grads_shared = r->size > 1, .seed = r->state.seed, .budget_s = 2.0};
    char text[1024], json[1536];
    const char *source;
    CHECK(tr_precision_auto(r->backend, &pc, r->resumed, &r->state.precision, text, sizeof(text), json,
                            sizeof(json), &source));
    o->precision = r->state.precision.choice;
    if (r->rank == 0) {
        printf("hora-train: precision auto: %s\n", text);
        fflush(stdout);
        main_log_json(r, "{\"type\":\"precision\",\"precision\":\"%s\",\"auto\":true,\"source\":\"%s\",%s}",
                 tr_precision_names[o->precision], source, json);
    }
    return HORA_OK;
}

/* --precision (auto: precision_auto), --grad-dtype and --loss-scale into
 * the model's dtypes and the scaler's configuration. fp16 on a backend
 * without f16 layers (the cpu backend on oneDNN 2.6) falls back to f32
 * compute, says so, and keeps what it can of fp16: f16 gradients on the
 * wire and loss scaling. */
static hora_status_t choose_precision(run_t *r, tr_model_spec_t *spec, tr_loss_scale_config_t *ls)
{
    tr_options_t *o = &r->opt;
    static const int grads[] = {TR_GRAD_DTYPE_AUTO, TR_DTYPE_F32, TR_DTYPE_BF16, TR_DTYPE_F16}; /* tr_grad_choice_t */
    const int grad = grads[o->grad_dtype];
    if (o->precision == TR_PRECISION_AUTO) {
        CHECK(precision_auto(r, spec, grad));
    } else {
        r->state.precision = (tr_precision_state_t){.choice = o->precision};
    }
    const tr_precision_t p = (tr_precision_t)o->precision;
    int fell_back = 0;
    if (tr_precision_dtypes(r->backend, p, grad, spec, &fell_back) != HORA_OK) {
        main_report("hora-train: --precision %s: the %s backend cannot compute in %s: %s", tr_precision_names[p],
               o->backend, tr_precision_names[p], status_message());
        return HORA_ERR_UNSUPPORTED;
    }
    if (fell_back && r->rank == 0)
        fprintf(stderr, "hora-train: --precision fp16: %s; the %s backend computes in f32 instead, with %s "
                "gradients and loss scaling (--precision bf16 is this CPU's fast low precision)\n", status_message(),
                o->backend, tr_dtype_name(spec->grad_dtype));
    tr_precision_loss_scale(p, o->loss_scale, o->loss_scale_window, ls);
    return HORA_OK;
}

/* --threads: auto is this rank's share of the CPUs its affinity allows
 * (threads.c; collective: every rank gets here), less the loader threads
 * where that leaves one, so the defaults do not oversubscribe the share; an
 * explicit count above some rank's share gets one warning. */
static void choose_threads(run_t *r)
{
    tr_options_t *o = &r->opt;
    const int data_threads = o->data ? (o->data_threads ? o->data_threads : 1) : 0;
    tr_threads_info_t ti;
    const int threads = tr_threads_compute_default(data_threads, &ti);
    if (o->threads > 0) {
        tr_threads_check("hora-train", o->threads);
        return;
    }
    o->threads = threads;
    if (r->rank == 0) {
        printf("hora-train: threads auto: %d compute thread%s per rank (rank 0 may use %d of the host's %d CPUs, "
               "shared by %d rank%s of the host: a share of %d%s)\n", threads, threads == 1 ? "" : "s", ti.cpus,
               ti.host_cpus, ti.sharers, ti.sharers == 1 ? "" : "s", ti.threads,
               threads < ti.threads ? ", less the loader's threads" : "");
        fflush(stdout);
    }
}

static hora_status_t setup(run_t *r)
{
    tr_options_t *o = &r->opt;
    tr_model_spec_t spec;
    CHECK(tr_model_spec_from_name(o->model, &spec));
    if (o->width)
        spec.base_width = o->width;
    spec.zero_init_last_bn = o->zero_init;
    spec.bn_epsilon = o->bn_eps;
    spec.bn_momentum = o->bn_momentum;

    if (o->data) {
        /* Peek at the data's shape (and so its normalisation) first. */
        tr_loader_t *probe;
        int channels_guess = 0;
        CHECK(open_loader(r, TR_SPLIT_TRAIN, channels_guess, &probe));
        tr_loader_info_t info;
        tr_loader_info(probe, &info);
        tr_loader_close(probe);
        /* Small images (Fashion-MNIST, CIFAR) get pad-and-crop; large ones
         * (ImageNet) random-resized-crop, unless a flag said otherwise. */
        if (o->pad_crop < 0)
            o->pad_crop = info.height < 64 ? 4 : 0;
        if (o->rrc < 0)
            o->rrc = info.height >= 64;
        spec.in_channels = info.channels;
        spec.height = info.height;
        spec.width = info.width;
        spec.classes = o->classes ? o->classes : info.classes;
    } else {
        if (o->image[0]) {
            spec.in_channels = o->image[0];
            spec.height = o->image[1];
            spec.width = o->image[2];
        }
        if (o->classes)
            spec.classes = o->classes;
    }

    const struct tr_backend_ops *ops = tr_backend_find(o->backend);
    if (!ops) {
        if (tr_backend_known(o->backend)) {
            main_report("hora-train: this hora-train was built without the %s backend (built in: %s; meson's "
                   "-Dtrainer_cpu and -Dcuda choose the backends)", o->backend, tr_backend_names());
            return HORA_ERR_UNSUPPORTED;
        }
        main_report("hora-train: unknown backend '%s' (built in: %s)", o->backend, tr_backend_names());
        return HORA_ERR_INVALID_ARG;
    }
    choose_threads(r);
    tr_backend_config_t bc = {.threads = o->threads, .verbose = o->verbose, .autotune = o->cudnn_autotune,
                              .channel_block = tr_cpu_layout_blocks[o->cpu_layout]};
    CHECK(ops->init(&bc, &r->backend));
    /* Before the loaders: their threads would compete with --precision
     * auto's timing. */
    tr_loss_scale_config_t ls;
    CHECK(choose_precision(r, &spec, &ls));
    r->scaler = ls;
    if (o->data) {
        /* After the backend: a device one gets u8 batches in its memory. */
        CHECK(open_loader(r, TR_SPLIT_TRAIN, spec.in_channels, &r->train_loader));
        CHECK(open_loader(r, TR_SPLIT_VAL, spec.in_channels, &r->val_loader));
    }
    CHECK(tr_model_init(r->backend, &spec, o->batch, r->size > 1, r->state.seed, &r->model));
    float mean[3], std[3];
    input_stats(spec.in_channels, mean, std);
    tr_model_set_input_norm(r->model, mean, std);
    hora_status_t refused = main_resume_apply(r); /* reported there */
    if (refused != HORA_OK)
        return refused;
    tr_step_config_t sc = {.overlap = (tr_overlap_t)o->overlap, .label_smoothing = (float)o->label_smoothing,
                           .optim = o->optim, .loss_scale = ls, .reproducible = o->reproducible};
    if (!r->resumed)
        tr_loss_scale_begin(&ls, &r->state.loss_scale);
    CHECK(tr_trainer_init(r->model, &sc, &r->state, &r->trainer));
    CHECK(tr_trainer_broadcast_state(r->trainer, r->resumed));
    if (r->rank == 0 && o->checkpoint_dir) {
        hora_status_t status = tr_ckpt_writer_open(o->checkpoint_dir, o->keep_checkpoints, &r->ckpt);
        if (status != HORA_OK) {
            main_report("hora-train: %s", status_message());
            return status;
        }
        CHECK(tr_ckpt_writer_reserve(r->ckpt, r->model));
    }

    if (o->synthetic) {
        /* Random pixels (u8 NHWC, the model's input step normalises them)
         * in the backend's host memory: every backend trains on the same
         * numbers, and a device one copies them as it would a loader's. */
        const size_t bytes = (size_t)o->batch * (size_t)spec.in_channels * (size_t)spec.height * (size_t)spec.width;
        uint8_t *x = batch_alloc(r->backend, bytes);
        r->synthetic_y = malloc((size_t)o->batch * sizeof(int32_t));
        r->synthetic_x = tr_tensor_plain(x, TR_DTYPE_U8, TR_MEMORY_HOST, 4,
                                         (const int[]){o->batch, spec.in_channels, spec.height, spec.width});
        r->synthetic_x.layout = TR_LAYOUT_NHWC;
        if (!x || !r->synthetic_y)
            return HORA_ERR_NO_MEMORY;
        uint64_t s = r->state.seed * 2654435761u + (uint64_t)r->rank;
        for (size_t i = 0; i < bytes; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            x[i] = (uint8_t)(s >> 56);
        }
        for (int i = 0; i < o->batch; i++)
            r->synthetic_y[i] = i % spec.classes;
    }
    if (r->rank == 0) {
        char scale[48] = "none";
        if (ls.mode == TR_LOSS_SCALE_STATIC)
            snprintf(scale, sizeof(scale), "%g", ls.initial);
        else if (ls.mode == TR_LOSS_SCALE_DYNAMIC)
            snprintf(scale, sizeof(scale), "dynamic from %g", ls.initial);
        printf("hora-train: %s, %d ranks x batch %d, input %dx%dx%d, %d classes, %zu parameters "
               "(%d tensors), backend %s, transport %s, compute %s, gradients %s, loss scale %s\n",
               o->model, r->size, o->batch, spec.in_channels, spec.height, spec.width, spec.classes,
               tr_tensor_count(tr_model_arena(r->model, TR_ARENA_PARAMS)), tr_model_param_count(r->model),
               o->backend, hora_transport_name(), tr_dtype_name(spec.compute_dtype), tr_dtype_name(spec.grad_dtype),
               scale);
        fflush(stdout);
    }
    return HORA_OK;
}

typedef struct {
    int64_t top1, top5, count;
} eval_result_t;

/* Top-1/top-5 over the validation split: each rank its part, in batches of
 * --eval-batch with no padding (a last batch takes what is left), summed
 * over ranks. */
static hora_status_t evaluate(run_t *r, eval_result_t *res)
{
    int64_t counts[3] = {0, 0, 0};
    CHECK(tr_trainer_settle(r->trainer)); /* the last step's all-reduces, on a device */
    const tr_model_spec_t *spec = tr_model_spec(r->model);
    if (r->val_loader) {
        CHECK(tr_loader_start_epoch(r->val_loader, 0, 0));
        for (;;) {
            tr_batch_t *b;
            CHECK(tr_loader_next(r->val_loader, &b));
            if (!b)
                break;
            if (b->count > 0) {
                tr_tensor_t x = batch_tensor(r, b, spec);
                int64_t t1, t5;
                CHECK(tr_model_forward(r->model, &x, 0));
                CHECK(tr_model_topk(r->model, b->labels, &t1, &t5));
                counts[0] += t1;
                counts[1] += t5;
                counts[2] += b->count;
            }
            tr_loader_release(r->val_loader, b);
        }
    } else {
        /* Synthetic: score the fixed batch (a sanity check, not a metric). */
        CHECK(tr_model_forward(r->model, &r->synthetic_x, 0));
        CHECK(tr_model_topk(r->model, r->synthetic_y, &counts[0], &counts[1]));
        counts[2] = r->opt.batch;
    }
    if (r->size > 1)
        CHECK(hora_allreduce(counts, counts, 3, HORA_DTYPE_I64, HORA_OP_SUM));
    res->top1 = counts[0];
    res->top5 = counts[1];
    res->count = counts[2];
    return HORA_OK;
}

void main_log_json(run_t *r, const char *fmt, ...)
{
    if (!r->log)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(r->log, fmt, ap);
    va_end(ap);
    fputc('\n', r->log);
    fflush(r->log);
}

/* Once --overlap auto has decided: what it measured (rank 0). */
static void report_overlap(run_t *r)
{
    double on, off;
    int overlap = tr_trainer_overlap(r->trainer, &on, &off);
    if (overlap < 0 || r->rank != 0)
        return;
    if (r->tty)
        printf("\n");
    printf("hora-train: overlap auto: %.1f ms/step with, %.1f ms/step without -> %s\n", on, off,
           overlap ? "on" : "off");
    fflush(stdout);
    main_log_json(r, "{\"type\":\"overlap\",\"ms_per_step_on\":%.3f,\"ms_per_step_off\":%.3f,\"overlap\":%s}", on,
             off, overlap ? "true" : "false");
}

/* The parent of pid from /proc/PID/stat; 0 when it cannot be read. */
static int parent_pid(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *end = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    int ppid = 0;
    char state;
    if (!end || sscanf(end + 1, " %c %d", &state, &ppid) != 2)
        return 0;
    return ppid;
}

/* --progress auto: the live bar only where a person watches it, plain
 * lines (no '\r') in a file or a pipe. Under a launcher isatty alone is not
 * enough: mpirun gives the ranks it starts a pseudo-terminal for stdout even
 * when its own output goes to a file or a pipe, and the bar's carriage
 * returns would make a whole epoch one line of the log. There what counts is
 * where the launcher writes: the first ancestor (mpirun, above any wrapper
 * shell) whose stdout is not this process's, read from /proc. Where that
 * cannot be seen (a launcher on another host, no /proc) it is lines. */
static int progress_on_terminal(void)
{
    if (!isatty(STDOUT_FILENO))
        return 0;
    static const char *const launcher_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    int launched = 0;
    for (size_t i = 0; i < sizeof(launcher_vars) / sizeof(launcher_vars[0]); i++)
        launched |= getenv(launcher_vars[i]) != NULL;
    if (!launched)
        return 1;
    struct stat mine;
    if (fstat(STDOUT_FILENO, &mine) != 0)
        return 0;
    for (int pid = getppid(), depth = 0; pid > 1 && depth < 8; pid = parent_pid(pid), depth++) {
        char link[64], target[256];
        struct stat st;
        snprintf(link, sizeof(link), "/proc/%d/fd/1", pid);
        if (stat(link, &st) != 0)
            return 0;
        if (st.st_dev == mine.st_dev && st.st_ino == mine.st_ino && st.st_rdev == mine.st_rdev)
            continue; /* a wrapper writing where this process does */
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        if (n <= 0)
            return 0;
        target[n] = 0;
        return strncmp(target, "/dev/pts/", 9) == 0 || strncmp(target, "/dev/tty", 8) == 0 ||
               strcmp(target, "/dev/console") == 0;
    }
    return 0;
}

static hora_status_t run_training(run_t *r)
{
    tr_options_t *o = &r->opt;
    tr_run_state_t *st = &r->state;
    uint64_t spe = (uint64_t)o->steps_per_epoch;
    if (r->train_loader) {
        tr_loader_info_t info;
        tr_loader_info(r->train_loader, &info);
        /* Every rank must run the same number of steps (each step is a
         * collective); the loader gives every rank the same count, and the
         * smallest would decide if not. */
        int64_t steps = (int64_t)info.steps_per_epoch;
        if (r->size > 1)
            CHECK(hora_allreduce(&steps, &steps, 1, HORA_DTYPE_I64, HORA_OP_MIN));
        spe = (uint64_t)steps;
        if (spe == 0) {
            main_report("hora-train: the dataset has fewer than %d samples per epoch", r->size);
            return HORA_ERR_INVALID_ARG;
        }
    }
    int global_batch = o->batch * r->size;
    tr_lr_schedule_t sched = {0};
    sched.peak_lr = o->lr * global_batch / 256.0;
    sched.warmup_lr = o->warmup_lr;
    sched.warmup_steps = (uint64_t)llround(o->warmup_epochs * (double)spe);
    sched.total_steps = (uint64_t)o->epochs * spe;
    sched.decay = (tr_lr_decay_t)o->lr_decay;
    sched.power = o->power;
    sched.gamma = o->gamma;
    if (sched.decay == TR_LR_DECAY_STEP) {
        double epochs[TR_LR_MAX_MILESTONES];
        int n = tr_options_lr_steps(o->lr_steps, epochs, TR_LR_MAX_MILESTONES);
        for (int i = 0; i < n; i++)
            sched.milestones[sched.milestone_count++] = (uint64_t)(epochs[i] * (double)spe);
    }
    uint64_t total = sched.total_steps;
    if (o->max_steps > 0 && (uint64_t)o->max_steps < total)
        total = (uint64_t)o->max_steps;
    int print_every = o->print_every ? o->print_every : (int)(spe / 10 ? spe / 10 : 1);

    main_reshard(r, spe, sched.peak_lr);
    if (r->rank == 0)
        printf("hora-train: %d epochs x %" PRIu64 " steps, global batch %d, peak lr %.4g, warmup %" PRIu64
               " steps, %s decay, overlap %s\n",
               o->epochs, spe, global_batch, sched.peak_lr, sched.warmup_steps, tr_lr_decay_names[o->lr_decay],
               r->size > 1 ? tr_overlap_names[o->overlap] : "off (one rank)");

    /* The clock of elapsed_s (time to accuracy) starts at the first step,
     * after data loading and model building, as the PyTorch peer's does. */
    r->t0 = tr_now_s();
    double train_time = 0;
    /* --profile: from the third step of this run (the first two make the
     * plans and primitives). */
    double profile_time = 0;
    uint64_t profile_steps = 0, run_steps = 0;
    double loss_sum = 0;
    int loss_n = 0;
    uint64_t images_since = 0;
    double t_since = tr_now_s();
    eval_result_t ev = {0};
    int evaluated_last = 0;
    for (; st->epoch < (uint64_t)o->epochs && st->step < total;
         st->epoch++, st->step_in_epoch = 0, st->epoch_sample_offset = 0) {
        const int epoch = (int)st->epoch;
        /* Steps of this epoch: fewer in one resumed after a re-shard. */
        uint64_t spe_epoch = spe;
        if (r->train_loader) {
            spe_epoch = tr_loader_epoch_steps(r->train_loader, st->epoch_sample_offset);
            CHECK(tr_loader_start_epoch_at(r->train_loader, st->epoch, st->step_in_epoch, st->epoch_sample_offset));
        }
        for (; st->step_in_epoch < spe_epoch && st->step < total;) {
            tr_tensor_t x = r->synthetic_x;
            const int32_t *y = r->synthetic_y;
            tr_batch_t *b = NULL;
            if (r->train_loader) {
                hora_status_t next = tr_loader_next(r->train_loader, &b);
                if (next != HORA_OK) {
                    main_report("hora-train: rank %d: training data, epoch %d step %" PRIu64 ": %s", r->rank, epoch + 1,
                           st->step_in_epoch, status_message());
                    return next;
                }
                if (!b || b->count < 1) {
                    main_report("hora-train: rank %d: the loader ended epoch %d after %" PRIu64
                           " of %" PRIu64 " steps", r->rank, epoch, st->step_in_epoch, spe_epoch);
                    if (b)
                        tr_loader_release(r->train_loader, b);
                    return HORA_ERR_INTERNAL;
                }
                x = batch_tensor(r, b, tr_model_spec(r->model));
                y = b->labels;
            }
            const int samples = x.n;
            double lr = tr_lr_at(&sched, st->step);
            float loss;
            if (o->profile && run_steps == 2)
                CHECK(tr_model_profile(r->model, 1));
            double ts = tr_now_s();
            int probing = tr_trainer_overlap(r->trainer, NULL, NULL) < 0;
            CHECK(tr_trainer_step(r->trainer, &x, y, lr, &loss, NULL));
            if (o->profile && run_steps >= 2) {
                CHECK(tr_trainer_settle(r->trainer));
                CHECK(r->backend->ops->synchronize(r->backend));
                profile_time += tr_now_s() - ts;
                profile_steps++;
            }
            run_steps++;
            train_time += tr_now_s() - ts;
            st->step++;
            st->step_in_epoch++;
            st->images += (uint64_t)samples * (uint64_t)r->size;
            if (probing)
                report_overlap(r);
            if (b)
                tr_loader_release(r->train_loader, b);
            if (!isfinite(loss)) {
                main_report("hora-train: rank %d: loss is %g at step %" PRIu64 "; stopping", r->rank,
                       loss, st->step - 1);
                return HORA_ERR_INTERNAL;
            }
            loss_sum += loss;
            loss_n++;
            images_since += (uint64_t)samples * (uint64_t)r->size;
            if (st->step % (uint64_t)print_every == 0 || st->step == total || st->step_in_epoch == spe_epoch) {
                /* The same steps on every rank, so this small collective is safe. */
                double l = loss_sum / loss_n;
                if (r->size > 1)
                    CHECK(hora_allreduce(&l, &l, 1, HORA_DTYPE_F64, HORA_OP_AVG));
                double t = tr_now_s();
                double ips = images_since / (t - t_since);
                double elapsed = t - r->t0;
                double eta = (double)(total - st->step) * (elapsed / (double)st->step);
                uint64_t bad = r->train_loader ? tr_loader_bad_count(r->train_loader) : 0;
                if (r->rank == 0) {
                    char eta_s[32], scaling[128] = "";
                    format_duration(eta, eta_s, sizeof(eta_s));
                    if (tr_loss_scale_active(&r->scaler))
                        snprintf(scaling, sizeof(scaling), "  scale %g skipped %" PRIu64, st->loss_scale.scale,
                                 st->loss_scale.skipped_steps);
                    /* The rank the coordinator finds last to submit (HORA_STRAGGLER_S). */
                    int straggler = -1;
                    double straggler_share = 0, straggler_ms = 0;
                    if (r->size > 1 && hora_straggler(&straggler, &straggler_share, &straggler_ms, NULL) == HORA_OK &&
                        straggler >= 0) {
                        size_t used = strlen(scaling);
                        snprintf(scaling + used, sizeof(scaling) - used, "  straggler rank %d (%.0f%%, +%.3g ms)",
                                 straggler, 100 * straggler_share, straggler_ms);
                    }
                    double frac = (double)(st->step_in_epoch + (spe - spe_epoch)) / (double)spe;
                    if (r->tty) {
                        char bar[21];
                        int fill = (int)(frac * 20);
                        for (int k = 0; k < 20; k++)
                            bar[k] = k < fill ? '#' : '.';
                        bar[20] = 0;
                        printf("\repoch %d/%d [%s] step %" PRIu64 "  %.0f img/s  loss %.4f  lr %.4g  ETA %s"
                               "%s%s   ", epoch + 1, o->epochs, bar, st->step, ips, l, lr, eta_s, scaling,
                               bad ? "  (bad samples skipped)" : "");
                    } else {
                        printf("epoch %d/%d step %" PRIu64 " (%.0f%%)  %.0f img/s  loss %.4f  lr %.4g  ETA %s"
                               "%s  bad %" PRIu64 "\n", epoch + 1, o->epochs, st->step, 100 * frac, ips, l, lr,
                               eta_s, scaling, bad);
                    }
                    fflush(stdout);
                    main_log_json(r, "{\"type\":\"train\",\"epoch\":%.4f,\"step\":%" PRIu64 ",\"loss\":%.6f,"
                             "\"lr\":%.6g,\"img_per_s\":%.1f,\"elapsed_s\":%.3f,\"bad_samples\":%" PRIu64
                             ",\"loss_scale\":%.9g,\"skipped_steps\":%" PRIu64 "}",
                             epoch + frac, st->step, l, lr, ips, elapsed, bad, st->loss_scale.scale,
                             st->loss_scale.skipped_steps);
                }
                loss_sum = 0;
                loss_n = 0;
                images_since = 0;
                t_since = tr_now_s();
            }
            if (o->checkpoint_every_steps && st->step % (uint64_t)o->checkpoint_every_steps == 0)
                CHECK(main_save_checkpoint(r, spe_epoch, spe));
        }
        int last = epoch + 1 == o->epochs || st->step >= total;
        evaluated_last = 0;
        if ((o->eval_every && (epoch + 1) % o->eval_every == 0) || last) {
            CHECK(evaluate(r, &ev));
            evaluated_last = 1;
            double elapsed = tr_now_s() - r->t0;
            if (r->rank == 0) {
                if (r->tty)
                    printf("\n");
                printf("epoch %d: test top-1 %.2f%% top-5 %.2f%% (%" PRId64 " images)  elapsed %.0f s\n",
                       epoch + 1, 100.0 * ev.top1 / ev.count, 100.0 * ev.top5 / ev.count, ev.count, elapsed);
                fflush(stdout);
                main_log_json(r, "{\"type\":\"eval\",\"epoch\":%d,\"top1\":%.6f,\"top5\":%.6f,\"images\":%" PRId64
                         ",\"elapsed_s\":%.3f}", epoch + 1, (double)ev.top1 / ev.count,
                         (double)ev.top5 / ev.count, ev.count, elapsed);
            }
            t_since = tr_now_s();
        }
        if (st->step_in_epoch >= spe_epoch && o->checkpoint_every_epochs && (epoch + 1) % o->checkpoint_every_epochs == 0)
            CHECK(main_save_checkpoint(r, spe_epoch, spe));
        if (st->step_in_epoch < spe_epoch)
            break; /* stopped by --steps inside the epoch: the state stays where it is */
    }
    if (!evaluated_last)
        CHECK(evaluate(r, &ev));
    if (r->ckpt) {
        /* The end of training is saved too, and the last write waited for. */
        uint64_t spe_epoch = r->train_loader ? tr_loader_epoch_steps(r->train_loader, st->epoch_sample_offset) : spe;
        CHECK(main_save_checkpoint(r, spe_epoch, spe));
        hora_status_t status = tr_ckpt_writer_wait(r->ckpt);
        if (status != HORA_OK) {
            main_report("hora-train: rank 0: checkpoint failed: %s", status_message());
            return status;
        }
        double stall, write;
        uint64_t bytes;
        tr_ckpt_writer_times(r->ckpt, &stall, &write, &bytes);
        printf("checkpoint: step %" PRIu64 " in %s, %.1f MB written in %.3f s, training stalled %.1f ms\n", st->step,
               o->checkpoint_dir, (double)bytes / 1e6, write, 1e3 * stall);
    }
    if (r->rank == 0) {
        double ips = train_time > 0 ? (double)st->images / train_time : 0.0;
        printf("training: %" PRIu64 " steps (%" PRIu64 " skipped: gradient overflow), %" PRIu64 " images, %.1f img/s "
               "over %d ranks (compute and all-reduce only)\n", st->step, st->loss_scale.skipped_steps, st->images, ips,
               r->size);
        printf("final test top-1 %.2f%% top-5 %.2f%%\n", 100.0 * ev.top1 / ev.count,
               100.0 * ev.top5 / ev.count);
        if (o->profile && profile_steps)
            tr_model_profile_print(r->model, 1e3 * profile_time / (double)profile_steps, stdout);
        else if (o->profile)
            printf("profile: no step was timed (--profile starts at the third step)\n");
        main_log_json(r, "{\"type\":\"final\",\"steps\":%" PRIu64 ",\"skipped_steps\":%" PRIu64 ",\"images\":%" PRIu64
                 ",\"top1\":%.6f,\"top5\":%.6f,\"elapsed_s\":%.3f,\"train_img_per_s\":%.1f,\"loss_scale\":%.9g}",
                 st->step, st->loss_scale.skipped_steps, st->images, (double)ev.top1 / ev.count,
                 (double)ev.top5 / ev.count, tr_now_s() - r->t0, ips, st->loss_scale.scale);
    }
    return HORA_OK;
}

static void teardown(run_t *r)
{
    if (r->ckpt) {
        if (tr_ckpt_writer_close(r->ckpt) != HORA_OK)
            main_report("hora-train: rank 0: checkpoint failed: %s", status_message());
    }
    tr_ckpt_data_free(&r->resume);
    tr_trainer_free(r->trainer);
    tr_model_free(r->model);
    /* The batches are the backend's host memory: they go first. */
    tr_loader_close(r->train_loader);
    tr_loader_close(r->val_loader);
    if (r->synthetic_x.data)
        batch_dealloc(r->backend, r->synthetic_x.data);
    free(r->synthetic_y);
    if (r->backend)
        r->backend->ops->free(r->backend);
    if (r->log)
        fclose(r->log);
}

int main(int argc, char **argv)
{
    run_t run = {0}, *r = &run;
    int parsed = tr_options_parse(argc, argv, &r->opt);
    if (parsed)
        return parsed > 0 ? 0 : 2;
    r->state = tr_run_state_begin((uint64_t)r->opt.seed);
    r->t0 = tr_now_s();
    hora_status_t status = hora_init();
    if (status != HORA_OK) {
        fprintf(stderr, "hora-train: hora_init failed: %s (%s)\n", hora_status_string(status), hora_last_error());
        return 1;
    }
    r->rank = hora_rank();
    r->size = hora_size();
    r->tty = r->rank == 0 && (r->opt.progress == TR_PROGRESS_BAR ||
                              (r->opt.progress == TR_PROGRESS_AUTO && progress_on_terminal()));
    if (r->rank == 0 && r->opt.log_path) {
        /* A resumed run continues its log. */
        r->log = fopen(r->opt.log_path, r->opt.resume ? "a" : "w");
        if (!r->log)
            fprintf(stderr, "hora-train: cannot write %s: %s (continuing without a log)\n", r->opt.log_path,
                    strerror(errno));
    }
    status = main_resume_read(r);
    if (status == HORA_OK)
        status = setup(r);
    if (status == HORA_OK)
        status = run_training(r);
    /* An error ends the job: the peers learn it from the runtime's abort
     * (their pending work fails with this rank's message) instead of waiting
     * for gradients that will not come; hora_shutdown then returns at once. */
    if (status != HORA_OK)
        hora_abort(status, first_error[0] ? first_error : "hora-train failed");
    teardown(r);
    hora_status_t st2 = hora_shutdown();
    if (status == HORA_OK)
        status = st2;
    return status == HORA_OK ? 0 : 1;
}
