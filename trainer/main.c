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
 * data-order position, seeds, the overlap decision, the loss-scale state.
 * The loop below advances it and nothing else.
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "loader.h"
#include "loss_scale.h"
#include "model.h"
#include "optim.h"
#include "options.h"
#include "run.h"
#include "train.h"

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

/* Everything one run holds. */
typedef struct {
    tr_options_t opt;
    tr_run_state_t state;
    tr_loss_scale_config_t scaler; /* from --precision / --loss-scale */
    int rank, size;
    tr_backend_t *backend;
    tr_model_t *model;
    tr_trainer_t *trainer;
    tr_loader_t *train_loader, *val_loader;
    tr_tensor_t synthetic_x;
    int32_t *synthetic_y;
    FILE *log;
    int tty;
    double t0;
} run_t;

#define CHECK(call)                                                                               \
    do {                                                                                          \
        hora_status_t status_ = (call);                                                           \
        if (status_ != HORA_OK) {                                                                 \
            fprintf(stderr, "hora-train: rank %d: %s failed: %s\n", r->rank, #call,               \
                    hora_status_string(status_));                                                 \
            return status_;                                                                       \
        }                                                                                         \
    } while (0)

/* A loader batch as the model's input: its valid samples only. */
static tr_tensor_t batch_tensor(const tr_batch_t *b, const tr_model_spec_t *spec)
{
    return tr_tensor_plain(b->data, TR_DTYPE_F32, TR_MEMORY_HOST, 4,
                           (const int[]){b->count, spec->in_channels, spec->height, spec->width});
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
    c.flip = o->flip != 0;
    c.pad_crop = o->pad_crop > 0 ? o->pad_crop : 0;
    c.random_resized_crop = o->rrc > 0;
    c.jitter = o->jitter;
    c.lighting = o->lighting;
    c.val_resize_ratio = 0.875f;
    if (channels == 1) {
        /* Fashion-MNIST's statistics. */
        c.mean[0] = 0.2860f;
        c.std[0] = 0.3530f;
    } else {
        const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
        memcpy(c.mean, mean, sizeof(mean));
        memcpy(c.std, std, sizeof(std));
    }
    hora_status_t status = tr_loader_open(&c, out);
    if (status != HORA_OK)
        fprintf(stderr, "hora-train: cannot open %s split of %s: %s\n",
                split == TR_SPLIT_TRAIN ? "train" : "val", o->data, tr_loader_last_error());
    return status;
}

/* --precision, --grad-dtype and --loss-scale into the model's dtypes and the
 * scaler's configuration. fp16 on a backend without f16 layers (the cpu
 * backend on oneDNN 2.6) falls back to f32 compute, says so, and keeps
 * what it can of fp16: f16 gradients on the wire and loss scaling. */
static hora_status_t choose_precision(run_t *r, tr_model_spec_t *spec, tr_loss_scale_config_t *ls)
{
    const tr_options_t *o = &r->opt;
    static const tr_dtype_t compute[] = {TR_DTYPE_F32, TR_DTYPE_BF16, TR_DTYPE_F16};   /* tr_precision_t */
    static const tr_dtype_t grads[] = {TR_DTYPE_F32, TR_DTYPE_F32, TR_DTYPE_BF16, TR_DTYPE_F16}; /* tr_grad_choice_t */
    tr_dtype_t want = compute[o->precision];
    spec->compute_dtype = want;
    spec->grad_dtype = o->grad_dtype == TR_GRAD_AUTO ? want : grads[o->grad_dtype];
    char why[160];
    if (want != TR_DTYPE_F32 && r->backend->ops->compute_dtype(r->backend, want, why, sizeof(why)) != HORA_OK) {
        if (want != TR_DTYPE_F16) {
            fprintf(stderr, "hora-train: --precision %s: the %s backend cannot compute in %s: %s\n",
                    tr_dtype_name(want), o->backend, tr_dtype_name(want), why);
            return HORA_ERR_UNSUPPORTED;
        }
        spec->compute_dtype = TR_DTYPE_F32;
        if (r->rank == 0)
            fprintf(stderr, "hora-train: --precision fp16: %s; the %s backend computes in f32 instead, with %s "
                    "gradients and loss scaling (--precision bf16 is this CPU's fast low precision)\n", why,
                    o->backend, tr_dtype_name(spec->grad_dtype));
    }
    ls->window = (uint64_t)o->loss_scale_window;
    ls->max_consecutive_skips = TR_LOSS_SCALE_MAX_SKIPS;
    if (o->loss_scale > 0) {
        ls->mode = TR_LOSS_SCALE_STATIC;
        ls->initial = o->loss_scale;
    } else if (o->loss_scale == TR_LOSS_SCALE_OPT_DYNAMIC || o->precision == TR_PRECISION_FP16) {
        ls->mode = TR_LOSS_SCALE_DYNAMIC;
        ls->initial = TR_LOSS_SCALE_DYNAMIC_INITIAL;
    } else {
        ls->mode = TR_LOSS_SCALE_NONE; /* fp32 and bf16 (f32's exponent range) need none */
        ls->initial = 1.0;
    }
    return HORA_OK;
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
        CHECK(open_loader(r, TR_SPLIT_TRAIN, info.channels, &r->train_loader));
        CHECK(open_loader(r, TR_SPLIT_VAL, info.channels, &r->val_loader));
        tr_loader_info(r->train_loader, &info);
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
        fprintf(stderr, "hora-train: unknown or unavailable backend '%s' (built in: %s)\n", o->backend,
                tr_backend_names());
        return HORA_ERR_INVALID_ARG;
    }
    tr_backend_config_t bc = {.threads = o->threads, .verbose = o->verbose};
    CHECK(ops->init(&bc, &r->backend));
    tr_loss_scale_config_t ls;
    CHECK(choose_precision(r, &spec, &ls));
    r->scaler = ls;
    CHECK(tr_model_init(r->backend, &spec, o->batch, r->size > 1, r->state.seed, &r->model));
    tr_step_config_t sc = {.overlap = (tr_overlap_t)o->overlap, .label_smoothing = (float)o->label_smoothing,
                           .optim = o->optim, .loss_scale = ls};
    tr_loss_scale_begin(&ls, &r->state.loss_scale);
    CHECK(tr_trainer_init(r->model, &sc, &r->state, &r->trainer));
    CHECK(tr_trainer_broadcast_state(r->trainer));

    if (o->synthetic) {
        const size_t sample = (size_t)spec.in_channels * (size_t)spec.height * (size_t)spec.width;
        float *x = malloc((size_t)o->batch * sample * sizeof(float));
        r->synthetic_y = malloc((size_t)o->batch * sizeof(int32_t));
        r->synthetic_x = tr_tensor_plain(x, TR_DTYPE_F32, TR_MEMORY_HOST, 4,
                                         (const int[]){o->batch, spec.in_channels, spec.height, spec.width});
        if (!x || !r->synthetic_y)
            return HORA_ERR_NO_MEMORY;
        uint64_t s = r->state.seed * 2654435761u + (uint64_t)r->rank;
        for (size_t i = 0; i < (size_t)o->batch * sample; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            x[i] = (float)((double)(s >> 40) / (double)(1 << 24) * 2.0 - 1.0);
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
    const tr_model_spec_t *spec = tr_model_spec(r->model);
    if (r->val_loader) {
        CHECK(tr_loader_start_epoch(r->val_loader, 0, 0));
        for (;;) {
            tr_batch_t *b;
            CHECK(tr_loader_next(r->val_loader, &b));
            if (!b)
                break;
            if (b->count > 0) {
                tr_tensor_t x = batch_tensor(b, spec);
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

static void log_json(run_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_json(run_t *r, const char *fmt, ...)
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
    log_json(r, "{\"type\":\"overlap\",\"ms_per_step_on\":%.3f,\"ms_per_step_off\":%.3f,\"overlap\":%s}", on,
             off, overlap ? "true" : "false");
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
            fprintf(stderr, "hora-train: the dataset has fewer than %d samples per epoch\n", r->size);
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

    if (r->rank == 0)
        printf("hora-train: %d epochs x %" PRIu64 " steps, global batch %d, peak lr %.4g, warmup %" PRIu64
               " steps, %s decay, overlap %s\n",
               o->epochs, spe, global_batch, sched.peak_lr, sched.warmup_steps, tr_lr_decay_names[o->lr_decay],
               r->size > 1 ? tr_overlap_names[o->overlap] : "off (one rank)");

    /* The clock of elapsed_s (time to accuracy) starts at the first step,
     * after data loading and model building, as the PyTorch peer's does. */
    r->t0 = tr_now_s();
    double train_time = 0;
    double loss_sum = 0;
    int loss_n = 0;
    uint64_t images_since = 0;
    double t_since = tr_now_s();
    eval_result_t ev = {0};
    int evaluated_last = 0;
    for (; st->epoch < (uint64_t)o->epochs && st->step < total; st->epoch++, st->step_in_epoch = 0) {
        const int epoch = (int)st->epoch;
        if (r->train_loader)
            CHECK(tr_loader_start_epoch(r->train_loader, st->epoch, st->step_in_epoch));
        for (; st->step_in_epoch < spe && st->step < total;) {
            tr_tensor_t x = r->synthetic_x;
            const int32_t *y = r->synthetic_y;
            tr_batch_t *b = NULL;
            if (r->train_loader) {
                CHECK(tr_loader_next(r->train_loader, &b));
                if (!b || b->count < 1) {
                    fprintf(stderr, "hora-train: rank %d: the loader ended epoch %d after %" PRIu64
                            " of %" PRIu64 " steps\n", r->rank, epoch, st->step_in_epoch, spe);
                    if (b)
                        tr_loader_release(r->train_loader, b);
                    return HORA_ERR_INTERNAL;
                }
                x = batch_tensor(b, tr_model_spec(r->model));
                y = b->labels;
            }
            const int samples = x.n;
            double lr = tr_lr_at(&sched, st->step);
            float loss;
            double ts = tr_now_s();
            int probing = tr_trainer_overlap(r->trainer, NULL, NULL) < 0;
            CHECK(tr_trainer_step(r->trainer, &x, y, lr, &loss, NULL));
            train_time += tr_now_s() - ts;
            st->step++;
            st->step_in_epoch++;
            st->images += (uint64_t)samples * (uint64_t)r->size;
            if (probing)
                report_overlap(r);
            if (b)
                tr_loader_release(r->train_loader, b);
            if (!isfinite(loss)) {
                fprintf(stderr, "hora-train: rank %d: loss is %g at step %" PRIu64 "; stopping\n", r->rank,
                        loss, st->step - 1);
                return HORA_ERR_INTERNAL;
            }
            loss_sum += loss;
            loss_n++;
            images_since += (uint64_t)samples * (uint64_t)r->size;
            if (st->step % (uint64_t)print_every == 0 || st->step == total || st->step_in_epoch == spe) {
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
                    char eta_s[32], scaling[64] = "";
                    format_duration(eta, eta_s, sizeof(eta_s));
                    if (tr_loss_scale_active(&r->scaler))
                        snprintf(scaling, sizeof(scaling), "  scale %g skipped %" PRIu64, st->loss_scale.scale,
                                 st->loss_scale.skipped_steps);
                    double frac = (double)st->step_in_epoch / (double)spe;
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
                    log_json(r, "{\"type\":\"train\",\"epoch\":%.4f,\"step\":%" PRIu64 ",\"loss\":%.6f,"
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
                log_json(r, "{\"type\":\"eval\",\"epoch\":%d,\"top1\":%.6f,\"top5\":%.6f,\"images\":%" PRId64
                         ",\"elapsed_s\":%.3f}", epoch + 1, (double)ev.top1 / ev.count,
                         (double)ev.top5 / ev.count, ev.count, elapsed);
            }
            t_since = tr_now_s();
        }
    }
    if (!evaluated_last)
        CHECK(evaluate(r, &ev));
    if (r->rank == 0) {
        double ips = train_time > 0 ? (double)st->images / train_time : 0.0;
        printf("training: %" PRIu64 " steps (%" PRIu64 " skipped: gradient overflow), %" PRIu64 " images, %.1f img/s "
               "over %d ranks (compute and all-reduce only)\n", st->step, st->loss_scale.skipped_steps, st->images, ips,
               r->size);
        printf("final test top-1 %.2f%% top-5 %.2f%%\n", 100.0 * ev.top1 / ev.count,
               100.0 * ev.top5 / ev.count);
        log_json(r, "{\"type\":\"final\",\"steps\":%" PRIu64 ",\"skipped_steps\":%" PRIu64 ",\"images\":%" PRIu64
                 ",\"top1\":%.6f,\"top5\":%.6f,\"elapsed_s\":%.3f,\"train_img_per_s\":%.1f,\"loss_scale\":%.9g}",
                 st->step, st->loss_scale.skipped_steps, st->images, (double)ev.top1 / ev.count,
                 (double)ev.top5 / ev.count, tr_now_s() - r->t0, ips, st->loss_scale.scale);
    }
    return HORA_OK;
}

static void teardown(run_t *r)
{
    tr_trainer_free(r->trainer);
    tr_model_free(r->model);
    if (r->backend)
        r->backend->ops->free(r->backend);
    tr_loader_close(r->train_loader);
    tr_loader_close(r->val_loader);
    free(r->synthetic_x.data);
    free(r->synthetic_y);
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
                              (r->opt.progress == TR_PROGRESS_AUTO && isatty(STDOUT_FILENO)));
    if (r->rank == 0 && r->opt.log_path) {
        r->log = fopen(r->opt.log_path, "w");
        if (!r->log)
            fprintf(stderr, "hora-train: cannot write %s: %s (continuing without a log)\n", r->opt.log_path,
                    strerror(errno));
    }
    status = setup(r);
    if (status == HORA_OK)
        status = run_training(r);
    teardown(r);
    hora_status_t st2 = hora_shutdown();
    if (status == HORA_OK)
        status = st2;
    return status == HORA_OK ? 0 : 1;
}
