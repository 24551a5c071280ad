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
 * the precision. This file sets the run up (setup, in named steps) and
 * tears it down; the training loop (loop.c) advances the state and nothing
 * else. The input is input.c's, resuming and saving checkpoints are
 * main_ckpt.c's, the error report and the log session.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "elastic.h"
#include "input.h"
#include "loop.h"
#include "main_ckpt.h"
#include "precision.h"
#include "threads.h"

/* --precision auto: a resumed run keeps the precision its checkpoint's run
 * computed in; a fresh one times the candidates now (precision.c), before
 * the run's own model exists, and keeps the fastest. The choice and its
 * timings go into the run state (and so into every checkpoint). */
static hora_status_t precision_auto(run_t *r, const tr_model_spec_t *spec, int grad)
{
    tr_options_t *o = &r->opt;
    tr_precision_probe_config_t pc = {.spec = *spec,
                                      .batch = o->batch,
                                      .grad = grad,
                                      .loss_scale_opt = o->loss_scale,
                                      .loss_scale_window = o->loss_scale_window,
                                      .step = {.overlap = (tr_overlap_t)o->overlap,
                                               .optim = o->optim,
                                               .label_smoothing = (float)o->label_smoothing,
                                               .reproducible = o->reproducible},
                                      .grads_shared = r->size > 1,
                                      .seed = r->state.seed,
                                      .budget_s = 2.0};
    char text[1024], json[1536];
    const char *source;
    CHECK(tr_precision_auto(r->backend, &pc, r->resumed, &r->state.precision, text, sizeof(text), json, sizeof(json),
                            &source));
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
        fprintf(stderr,
                "hora-train: --precision fp16: %s; the %s backend computes in f32 instead, with %s "
                "gradients and loss scaling (--precision bf16 is this CPU's fast low precision)\n",
                status_message(), o->backend, tr_dtype_name(spec->grad_dtype));
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
               "shared by %d rank%s of the host: a share of %d%s)\n",
               threads, threads == 1 ? "" : "s", ti.cpus, ti.host_cpus, ti.sharers, ti.sharers == 1 ? "" : "s",
               ti.threads, threads < ti.threads ? ", less the loader's threads" : "");
        fflush(stdout);
    }
}

/* The model the options and the data ask for: the data's shape (a peek at
 * its train split) or --image, --classes, --width and the BN settings. */
static hora_status_t setup_spec(run_t *r, tr_model_spec_t *spec)
{
    tr_options_t *o = &r->opt;
    CHECK(tr_model_spec_from_name(o->model, spec));
    if (o->width) spec->base_width = o->width;
    spec->zero_init_last_bn = o->zero_init;
    spec->bn_epsilon = o->bn_eps;
    spec->bn_momentum = o->bn_momentum;

    if (o->data) {
        /* Peek at the data's shape (and so its normalisation) first. */
        tr_loader_t *probe;
        int channels_guess = 0;
        RETURN_ON_ERROR(input_open_loader(r, TR_SPLIT_TRAIN, channels_guess, &probe));
        tr_loader_info_t info;
        tr_loader_info(probe, &info);
        tr_loader_close(probe);
        /* Small images (Fashion-MNIST, CIFAR) get pad-and-crop; large ones
         * (ImageNet) random-resized-crop, unless a flag said otherwise. */
        if (o->pad_crop < 0) o->pad_crop = info.height < 64 ? 4 : 0;
        if (o->rrc < 0) o->rrc = info.height >= 64;
        spec->in_channels = info.channels;
        spec->height = info.height;
        spec->width = info.width;
        spec->classes = o->classes ? o->classes : info.classes;
    } else {
        if (o->image[0]) {
            spec->in_channels = o->image[0];
            spec->height = o->image[1];
            spec->width = o->image[2];
        }
        if (o->classes) spec->classes = o->classes;
    }
    return HORA_OK;
}

/* --backend, with --threads resolved: one left out of this build is named.
 * A re-formed world keeps the backend it has. */
static hora_status_t setup_backend(run_t *r)
{
    tr_options_t *o = &r->opt;
    if (r->backend) return HORA_OK;
    const struct tr_backend_ops *ops = tr_backend_find(o->backend);
    if (!ops) {
        if (tr_backend_known(o->backend)) {
            main_report("hora-train: this hora-train was built without the %s backend (built in: %s; meson's "
                        "-Dtrainer_cpu and -Dcuda choose the backends)",
                        o->backend, tr_backend_names());
            return HORA_ERR_UNSUPPORTED;
        }
        main_report("hora-train: unknown backend '%s' (built in: %s)", o->backend, tr_backend_names());
        return HORA_ERR_INVALID_ARG;
    }
    choose_threads(r);
    tr_backend_config_t bc = {.threads = o->threads,
                              .verbose = o->verbose,
                              .autotune = o->cudnn_autotune,
                              .channel_block = tr_cpu_layout_blocks[o->cpu_layout]};
    CHECK(ops->init(&bc, &r->backend));
    return HORA_OK;
}

/* The model, with a resumed checkpoint's tensors, and the trainer over it
 * (rank 0's state broadcast). */
static hora_status_t setup_model(run_t *r, const tr_model_spec_t *spec)
{
    const tr_options_t *o = &r->opt;
    CHECK(tr_model_init(r->backend, spec, o->batch, r->size > 1, r->state.seed, &r->model));
    float mean[3], std[3];
    input_stats(spec->in_channels, mean, std);
    tr_model_set_input_norm(r->model, mean, std);
    if (!r->reformed) {
        hora_status_t refused = main_resume_apply(r); /* reported there */
        if (refused != HORA_OK) return refused;
    }
    tr_step_config_t sc = {.overlap = (tr_overlap_t)o->overlap,
                           .label_smoothing = (float)o->label_smoothing,
                           .optim = o->optim,
                           .loss_scale = r->scaler,
                           .reproducible = o->reproducible};
    if (!r->resumed) tr_loss_scale_begin(&r->scaler, &r->state.loss_scale);
    CHECK(tr_trainer_init(r->model, &sc, &r->state, &r->trainer));
    /* A re-formed world takes the tensors from the commit's owner
     * (elastic_sync) instead. */
    if (!r->reformed) CHECK(tr_trainer_broadcast_state(r->trainer, r->resumed, 0));
    return HORA_OK;
}

/* Rank 0, with --checkpoint-dir: the writer, its buffers reserved now. In
 * a re-formed world rank 0 may be another process: it opens one, and a
 * former rank 0 closes its own. */
static hora_status_t setup_checkpoints(run_t *r)
{
    const tr_options_t *o = &r->opt;
    if (r->rank != 0 && r->ckpt) {
        if (tr_ckpt_writer_close(r->ckpt) != HORA_OK)
            main_report("hora-train: rank %d: checkpoint failed: %s", r->rank, status_message());
        r->ckpt = NULL;
    }
    if (r->rank != 0 || !o->checkpoint_dir || r->ckpt) return HORA_OK;
    hora_status_t status = tr_ckpt_writer_open(o->checkpoint_dir, o->keep_checkpoints, &r->ckpt);
    if (status != HORA_OK) {
        main_report("hora-train: %s", status_message());
        return status;
    }
    CHECK(tr_ckpt_writer_reserve(r->ckpt, r->model));
    return HORA_OK;
}

/* Rank 0's line about what was built. */
static void setup_print(const run_t *r, const tr_model_spec_t *spec)
{
    const tr_options_t *o = &r->opt;
    const tr_loss_scale_config_t *ls = &r->scaler;
    if (r->rank != 0) return;
    char scale[48] = "none";
    if (ls->mode == TR_LOSS_SCALE_STATIC)
        snprintf(scale, sizeof(scale), "%g", ls->initial);
    else if (ls->mode == TR_LOSS_SCALE_DYNAMIC)
        snprintf(scale, sizeof(scale), "dynamic from %g", ls->initial);
    printf("hora-train: %s, %d ranks x batch %d, input %dx%dx%d, %d classes, %zu parameters "
           "(%d tensors), backend %s, transport %s, compute %s, gradients %s, loss scale %s\n",
           o->model, r->size, o->batch, spec->in_channels, spec->height, spec->width, spec->classes,
           tr_tensor_count(tr_model_arena(r->model, TR_ARENA_PARAMS)), tr_model_param_count(r->model), o->backend,
           hora_transport_name(), tr_dtype_name(spec->compute_dtype), tr_dtype_name(spec->grad_dtype), scale);
    fflush(stdout);
}

/* Everything before the first step, in order: the model's shape, the
 * backend, the precision (before the loaders: their threads would compete
 * with --precision auto's timing), the loaders (after the backend: a device
 * one gets u8 batches in its memory), the model and trainer, checkpoints,
 * the synthetic batch. */
static hora_status_t setup(run_t *r)
{
    const tr_options_t *o = &r->opt;
    tr_model_spec_t spec;
    RETURN_ON_ERROR(setup_spec(r, &spec));
    RETURN_ON_ERROR(setup_backend(r));
    CHECK(choose_precision(r, &spec, &r->scaler));
    if (o->data) {
        RETURN_ON_ERROR(input_open_loader(r, TR_SPLIT_TRAIN, spec.in_channels, &r->train_loader));
        RETURN_ON_ERROR(input_open_loader(r, TR_SPLIT_VAL, spec.in_channels, &r->val_loader));
    }
    RETURN_ON_ERROR(setup_model(r, &spec));
    RETURN_ON_ERROR(setup_checkpoints(r));
    if (o->synthetic) CHECK(input_synthetic(r, &spec));
    setup_print(r, &spec);
    return HORA_OK;
}

/* The parent of pid from /proc/PID/stat; 0 when it cannot be read. */
static int parent_pid(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *end = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    int ppid = 0;
    char state;
    if (!end || sscanf(end + 1, " %c %d", &state, &ppid) != 2) return 0;
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
    if (!isatty(STDOUT_FILENO)) return 0;
    static const char *const launcher_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    int launched = 0;
    for (size_t i = 0; i < sizeof(launcher_vars) / sizeof(launcher_vars[0]); i++)
        launched |= getenv(launcher_vars[i]) != NULL;
    if (!launched) return 1;
    struct stat mine;
    if (fstat(STDOUT_FILENO, &mine) != 0) return 0;
    for (int pid = getppid(), depth = 0; pid > 1 && depth < 8; pid = parent_pid(pid), depth++) {
        char link[64], target[256];
        struct stat st;
        snprintf(link, sizeof(link), "/proc/%d/fd/1", pid);
        if (stat(link, &st) != 0) return 0;
        if (st.st_dev == mine.st_dev && st.st_ino == mine.st_ino && st.st_rdev == mine.st_rdev)
            continue; /* a wrapper writing where this process does */
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        if (n <= 0) return 0;
        target[n] = 0;
        return strncmp(target, "/dev/pts/", 9) == 0 || strncmp(target, "/dev/tty", 8) == 0 ||
               strcmp(target, "/dev/console") == 0;
    }
    return 0;
}

/* --preempt: on (or auto with --checkpoint-dir) watches SIGTERM from here
 * on; the loop agrees at every step boundary (loop.c). Off: SIGTERM keeps
 * its action, and a HORA_PREEMPT_FILE is not looked for (rank 0 says so). */
static hora_status_t preempt_setup(run_t *r)
{
    const tr_options_t *o = &r->opt;
    r->preempt = o->preempt == TR_PREEMPT_ON || (o->preempt == TR_PREEMPT_AUTO && o->checkpoint_dir);
    const char *file = getenv("HORA_PREEMPT_FILE");
    if (!r->preempt) {
        if (file && file[0] && r->rank == 0)
            fprintf(stderr,
                    "hora-train: HORA_PREEMPT_FILE is set but --preempt is %s: the file is not looked for "
                    "(give --checkpoint-dir, where the stop writes its checkpoint)\n",
                    o->preempt == TR_PREEMPT_OFF ? "off" : "auto without --checkpoint-dir");
        return HORA_OK;
    }
    hora_status_t status = hora_preempt_watch(HORA_PREEMPT_WATCH_SIGTERM);
    if (status != HORA_OK) main_report("hora-train: rank %d: %s", r->rank, hora_last_error());
    return status;
}

/* What setup built over the backend: the trainer, the model (its gradient
 * arena is in hora's pool: before hora_shutdown), the loaders, the
 * synthetic batch. */
static void setup_free(run_t *r)
{
    tr_trainer_free(r->trainer);
    tr_model_free(r->model);
    /* The batches are the backend's host memory: they go first. */
    tr_loader_close(r->train_loader);
    tr_loader_close(r->val_loader);
    if (r->synthetic_x.data) input_batch_free(r->backend, r->synthetic_x.data);
    free(r->synthetic_y);
    r->trainer = NULL;
    r->model = NULL;
    r->train_loader = r->val_loader = NULL;
    r->synthetic_x.data = NULL;
    r->synthetic_y = NULL;
}

static void teardown(run_t *r)
{
    if (r->ckpt) {
        if (tr_ckpt_writer_close(r->ckpt) != HORA_OK)
            main_report("hora-train: rank 0: checkpoint failed: %s", status_message());
    }
    tr_ckpt_data_free(&r->resume);
    tr_ckpt_data_free(&r->commit);
    setup_free(r);
    if (r->backend) r->backend->ops->free(r->backend);
    if (r->log) fclose(r->log);
}

/* Rank 0's JSON-lines log (--log): a resumed run, or a rank that became
 * rank 0 in a re-formed world, continues it; one that is rank 0 no more
 * closes it. */
static void open_log(run_t *r)
{
    if (r->rank != 0 && r->log) {
        fclose(r->log);
        r->log = NULL;
    }
    if (r->rank != 0 || !r->opt.log_path || r->log) return;
    r->log = fopen(r->opt.log_path, r->opt.resume || r->reformed ? "a" : "w");
    if (!r->log)
        fprintf(stderr, "hora-train: cannot write %s: %s (continuing without a log)\n", r->opt.log_path,
                strerror(errno));
}

int main(int argc, char **argv)
{
    run_t run = {0}, *r = &run;
    int parsed = tr_options_parse(argc, argv, &r->opt);
    if (parsed) return parsed > 0 ? 0 : 2;
    r->state = tr_run_state_begin((uint64_t)r->opt.seed);
    r->t0 = tr_now_s();
    hora_status_t status = hora_init();
    if (status != HORA_OK) {
        fprintf(stderr, "hora-train: hora_init failed: %s (%s)\n", hora_status_string(status), hora_last_error());
        return 1;
    }
    r->rank = hora_rank();
    r->size = hora_size();
    r->tty = r->rank == 0 &&
             (r->opt.progress == TR_PROGRESS_BAR || (r->opt.progress == TR_PROGRESS_AUTO && progress_on_terminal()));
    open_log(r);
    status = preempt_setup(r);
    if (status == HORA_OK) status = elastic_start(r); /* a newcomer learns the run state here */
    if (status == HORA_OK && !r->reformed) status = main_resume_read(r);
    if (status == HORA_OK) status = setup(r);
    if (status == HORA_OK && r->reformed) status = elastic_sync(r);
    if (status == HORA_OK) status = loop_run(r);
    /* --elastic: a lost member, or hosts waiting at a commit, end this
     * generation; every process left joins the next and training goes on
     * from the newest commit (elastic.c). */
    while (r->opt.elastic && (status == HORA_ERR_PEER_LOST || (status == HORA_OK && r->hosts_waiting))) {
        setup_free(r);
        status = elastic_reform(r, status);
        open_log(r);
        if (status == HORA_OK) status = setup(r);
        if (status == HORA_OK) status = elastic_sync(r);
        if (status == HORA_OK) status = loop_run(r);
    }
    /* An error ends the job: the peers learn it from the runtime's abort
     * (their pending work fails with this rank's message) instead of waiting
     * for gradients that will not come; hora_shutdown then returns at once. */
    if (status != HORA_OK) {
        if (!main_first_error()[0])
            main_report("hora-train: rank %d: failed (%s)", r->rank, hora_status_string(status));
        hora_abort(status, main_first_error());
    }
    teardown(r);
    hora_status_t st2 = hora_shutdown();
    if (status == HORA_OK) status = st2;
    return status == HORA_OK && !r->below_min_ranks ? 0 : 1;
}
