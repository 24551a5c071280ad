/*
 * main.c - hora-train: data-parallel ResNet training.
 *
 *   mpirun -np N hora-train --model resnet50 --data DIR --epochs 90 --batch 256 ...
 *
 * Each rank trains on its shard of every epoch; gradients are averaged with
 * libhora during backprop. Rank 0 prints progress and writes a JSON-lines
 * log; evaluation reduces top-1/top-5 counts over ranks. --help lists every
 * flag and HORA_* setting.
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
#include "model.h"
#include "optim.h"
#include "train.h"

typedef struct {
    const char *model;
    const char *data;
    int synthetic;
    int image_c, image_h, image_w, classes, width;
    int epochs;
    int batch;
    int64_t max_steps;       /* stop after this many steps in all (0 = no limit) */
    int steps_per_epoch;     /* synthetic */
    double lr, warmup_lr, warmup_epochs, power, gamma, label_smoothing;
    const char *lr_decay;
    const char *lr_steps;    /* step decay milestones, epochs "30,60,80" */
    tr_optim_config_t optim;
    int zero_init;
    const char *overlap;     /* auto | on | off */
    float bn_eps, bn_momentum;
    int pad_crop, flip, rrc;
    float jitter, lighting;
    int threads, data_threads;
    int eval_every;
    int print_every;
    const char *log_path;
    const char *backend;
    uint64_t seed;
    int strict;
    int verbose;
    const char *progress; /* auto | bar | lines */
} options_t;

static int overlap_parse(const char *name)
{
    if (strcmp(name, "auto") == 0)
        return TR_OVERLAP_AUTO;
    if (strcmp(name, "on") == 0)
        return TR_OVERLAP_ON;
    if (strcmp(name, "off") == 0)
        return TR_OVERLAP_OFF;
    return -1;
}

static void options_default(options_t *o)
{
    memset(o, 0, sizeof(*o));
    o->model = "resnet20";
    o->epochs = 1;
    o->batch = 64;
    o->steps_per_epoch = 100;
    o->lr = 0.1;
    o->warmup_lr = 0.0;
    o->warmup_epochs = 0;
    o->power = 2.0;
    o->gamma = 0.1;
    o->lr_decay = "poly";
    o->lr_steps = "30,60,80";
    o->optim = (tr_optim_config_t){.momentum = 0.9, .weight_decay = 1e-4, .nesterov = 1,
                                   .decay_bn_bias = 1, .lars = 0, .lars_eta = 0.001};
    o->zero_init = 1;
    o->overlap = "auto";
    o->bn_eps = 1e-5f;
    o->bn_momentum = 0.1f;
    o->flip = -1;
    o->rrc = -1;
    o->pad_crop = -1;
    o->eval_every = 0;
    o->print_every = 0;
    o->backend = "cpu";
    o->seed = 42;
    o->progress = "auto";
}

static void usage(FILE *out)
{
    fprintf(out,
"usage: mpirun -np N hora-train [options]\n"
"\n"
"Model\n"
"  --model NAME          %s (default resnet20)\n"
"  --classes K           output classes (default: the dataset's; synthetic 10 / 1000)\n"
"  --width W             base width (default 16 CIFAR-style, 64 ImageNet-style)\n"
"  --no-zero-init        keep BN gamma = 1 on the last BN of each block (default: 0)\n"
"  --bn-eps E            batch-norm epsilon (default 1e-5)\n"
"  --bn-momentum M       running-statistics momentum (default 0.1)\n"
"Data\n"
"  --data DIR            IDX files (Fashion-MNIST) or hora-mkrecord shards\n"
"  --synthetic           random data of --image shape (throughput runs)\n"
"  --image CxHxW         synthetic input shape (default 3x32x32 / 3x224x224)\n"
"  --steps-per-epoch N   synthetic epoch length (default 100)\n"
"  --data-threads N      decoder threads per rank (default 1)\n"
"  --pad-crop P          small images: pad P and random-crop back (default 4 if H < 64)\n"
"  --flip / --no-flip    random horizontal flip (default on)\n"
"  --rrc / --no-rrc      random-resized-crop (default on for images of 64 pixels and more)\n"
"  --jitter S            colour jitter strength (default 0)\n"
"  --lighting A          PCA lighting alpha std (default 0; 0.1 in AlexNet)\n"
"  --strict              bad records stop training instead of being skipped\n"
"Schedule\n"
"  --epochs E            (default 1)\n"
"  --batch B             per rank (default 64)\n"
"  --steps N             stop after N steps in all (smoke tests)\n"
"  --lr LR               per 256 images, scaled by global batch / 256 (default 0.1)\n"
"  --warmup-epochs W     linear warmup length, may be fractional (default 0)\n"
"  --warmup-lr LR        warmup start (default 0)\n"
"  --lr-decay KIND       poly | cosine | step | none (default poly)\n"
"  --lr-power P          poly power (default 2)\n"
"  --lr-steps E1,E2,..   step decay epochs (default 30,60,80), factor --lr-gamma (0.1)\n"
"Optimizer\n"
"  --momentum M          (default 0.9)\n"
"  --no-nesterov         plain momentum\n"
"  --wd WD               weight decay (default 1e-4)\n"
"  --no-wd-bn-bias       no weight decay on BN parameters and biases\n"
"  --lars                layer-wise adaptive rate scaling; --lars-eta (0.001)\n"
"  --label-smoothing S   (default 0)\n"
"Runtime\n"
"  --backend NAME        cpu (default)\n"
"  --threads N           compute threads per rank (default cores / ranks per node)\n"
"  --overlap MODE        on: all-reduce each gradient during backward; off: all after\n"
"                        it; auto (default): time both on the first steps, keep the faster\n"
"  --no-overlap          the same as --overlap off\n"
"  --eval-every E        evaluate every E epochs (default: only at the end)\n"
"  --print-every N       progress line every N steps (default ~10 per epoch)\n"
"  --log FILE            JSON-lines log (rank 0)\n"
"  --progress MODE       bar (one live line) | lines | auto (bar on a terminal)\n"
"  --seed S              initialisation, shuffle and augmentation seed (default 42)\n"
"  --verbose             print the backend's implementation choices\n"
"\n"
"Settings of the runtime (environment):\n",
        tr_model_names());
    hora_config_print(out);
}

static int parse_int(const char *flag, const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        fprintf(stderr, "hora-train: %s wants an integer in [%ld, %ld], got '%s'\n", flag, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_double(const char *flag, const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || end == v || !(x >= lo && x <= hi)) {
        fprintf(stderr, "hora-train: %s wants a number in [%g, %g], got '%s'\n", flag, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_args(int argc, char **argv, options_t *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long l;
        double d;
#define NEED_VALUE()                                                                              \
    do {                                                                                          \
        if (!v) {                                                                                 \
            fprintf(stderr, "hora-train: %s needs a value\n", a);                                \
            return -1;                                                                            \
        }                                                                                         \
        i++;                                                                                      \
    } while (0)
#define INT_OPT(name, lo, hi, dst)                                                                \
    else if (strcmp(a, name) == 0)                                                                \
    {                                                                                             \
        NEED_VALUE();                                                                             \
        if (parse_int(a, v, lo, hi, &l))                                                          \
            return -1;                                                                            \
        dst = l;                                                                                  \
    }
#define DBL_OPT(name, lo, hi, dst)                                                                \
    else if (strcmp(a, name) == 0)                                                                \
    {                                                                                             \
        NEED_VALUE();                                                                             \
        if (parse_double(a, v, lo, hi, &d))                                                       \
            return -1;                                                                            \
        dst = d;                                                                                  \
    }
#define STR_OPT(name, dst)                                                                        \
    else if (strcmp(a, name) == 0)                                                                \
    {                                                                                             \
        NEED_VALUE();                                                                             \
        dst = v;                                                                                  \
    }
#define FLAG(name, dst, value) else if (strcmp(a, name) == 0) dst = value;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        STR_OPT("--model", o->model)
        STR_OPT("--data", o->data)
        STR_OPT("--backend", o->backend)
        STR_OPT("--log", o->log_path)
        STR_OPT("--lr-decay", o->lr_decay)
        STR_OPT("--lr-steps", o->lr_steps)
        STR_OPT("--progress", o->progress)
        FLAG("--synthetic", o->synthetic, 1)
        FLAG("--no-zero-init", o->zero_init, 0)
        FLAG("--no-overlap", o->overlap, "off")
        STR_OPT("--overlap", o->overlap)
        FLAG("--flip", o->flip, 1)
        FLAG("--no-flip", o->flip, 0)
        FLAG("--no-rrc", o->rrc, 0)
        FLAG("--rrc", o->rrc, 1)
        FLAG("--strict", o->strict, 1)
        FLAG("--no-nesterov", o->optim.nesterov, 0)
        FLAG("--no-wd-bn-bias", o->optim.decay_bn_bias, 0)
        FLAG("--lars", o->optim.lars, 1)
        FLAG("--verbose", o->verbose, 1)
        INT_OPT("--classes", 2, 1000000, o->classes)
        INT_OPT("--width", 1, 4096, o->width)
        INT_OPT("--epochs", 1, 100000, o->epochs)
        INT_OPT("--batch", 1, 1 << 20, o->batch)
        INT_OPT("--steps", 1, INT64_MAX / 2, o->max_steps)
        INT_OPT("--steps-per-epoch", 1, 1 << 30, o->steps_per_epoch)
        INT_OPT("--pad-crop", 0, 64, o->pad_crop)
        INT_OPT("--threads", 0, 4096, o->threads)
        INT_OPT("--data-threads", 1, 256, o->data_threads)
        INT_OPT("--eval-every", 0, 100000, o->eval_every)
        INT_OPT("--print-every", 1, 1 << 30, o->print_every)
        INT_OPT("--seed", 0, INT64_MAX / 2, o->seed)
        DBL_OPT("--lr", 0, 1e6, o->lr)
        DBL_OPT("--warmup-lr", 0, 1e6, o->warmup_lr)
        DBL_OPT("--warmup-epochs", 0, 1e6, o->warmup_epochs)
        DBL_OPT("--lr-power", 0, 100, o->power)
        DBL_OPT("--lr-gamma", 0, 1, o->gamma)
        DBL_OPT("--momentum", 0, 1, o->optim.momentum)
        DBL_OPT("--wd", 0, 1, o->optim.weight_decay)
        DBL_OPT("--lars-eta", 0, 1e3, o->optim.lars_eta)
        DBL_OPT("--label-smoothing", 0, 1, o->label_smoothing)
        DBL_OPT("--bn-eps", 0, 1, o->bn_eps)
        DBL_OPT("--bn-momentum", 0, 1, o->bn_momentum)
        DBL_OPT("--jitter", 0, 1, o->jitter)
        DBL_OPT("--lighting", 0, 10, o->lighting)
        else if (strcmp(a, "--image") == 0) {
            NEED_VALUE();
            if (sscanf(v, "%dx%dx%d", &o->image_c, &o->image_h, &o->image_w) != 3 || o->image_c < 1 ||
                o->image_h < 1 || o->image_w < 1) {
                fprintf(stderr, "hora-train: --image wants CxHxW (e.g. 1x28x28), got '%s'\n", v);
                return -1;
            }
        } else {
            fprintf(stderr, "hora-train: unknown option '%s' (see --help)\n", a);
            return -1;
        }
    }
    if (!o->data && !o->synthetic) {
        fprintf(stderr, "hora-train: give --data DIR or --synthetic (see --help)\n");
        return -1;
    }
    if (strcmp(o->progress, "auto") && strcmp(o->progress, "bar") && strcmp(o->progress, "lines")) {
        fprintf(stderr, "hora-train: --progress wants auto, bar or lines, got '%s'\n", o->progress);
        return -1;
    }
    if (overlap_parse(o->overlap) < 0) {
        fprintf(stderr, "hora-train: --overlap wants auto, on or off, got '%s'\n", o->overlap);
        return -1;
    }
    if (tr_lr_decay_parse(o->lr_decay) < 0) {
        fprintf(stderr, "hora-train: --lr-decay wants poly, cosine, step or none, got '%s'\n", o->lr_decay);
        return -1;
    }
    return 0;
}

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
    options_t opt;
    int rank, size;
    tr_backend_t *backend;
    tr_model_t *model;
    tr_trainer_t *trainer;
    tr_loader_t *train_loader, *val_loader;
    float *synthetic_x;
    int32_t *synthetic_y;
    float *eval_x;
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

static hora_status_t open_loader(run_t *r, tr_split_t split, int channels, tr_loader_t **out)
{
    const options_t *o = &r->opt;
    tr_loader_config_t c = {0};
    c.path = o->data;
    c.split = split;
    c.rank = r->rank;
    c.world = r->size;
    c.batch = o->batch;
    c.seed = o->seed;
    c.threads = o->data_threads ? o->data_threads : 1;
    c.drop_last = split == TR_SPLIT_TRAIN;
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

static hora_status_t setup(run_t *r)
{
    options_t *o = &r->opt;
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
        if (o->image_c) {
            spec.in_channels = o->image_c;
            spec.height = o->image_h;
            spec.width = o->image_w;
        }
        if (o->classes)
            spec.classes = o->classes;
    }

    const struct tr_backend_ops *ops = tr_backend_find(o->backend);
    if (!ops) {
        fprintf(stderr, "hora-train: unknown or unavailable backend '%s'\n", o->backend);
        return HORA_ERR_INVALID_ARG;
    }
    tr_backend_config_t bc = {.threads = o->threads, .verbose = o->verbose};
    CHECK(ops->init(&bc, &r->backend));
    CHECK(tr_model_init(r->backend, &spec, o->batch, r->size > 1, o->seed, &r->model));
    tr_step_config_t sc = {.overlap = (tr_overlap_t)overlap_parse(o->overlap),
                           .label_smoothing = (float)o->label_smoothing,
                           .optim = o->optim};
    CHECK(tr_trainer_init(r->model, &sc, &r->trainer));
    CHECK(tr_trainer_broadcast_state(r->trainer));

    size_t sample = (size_t)spec.in_channels * (size_t)spec.height * (size_t)spec.width;
    if (o->synthetic) {
        r->synthetic_x = malloc((size_t)o->batch * sample * sizeof(float));
        r->synthetic_y = malloc((size_t)o->batch * sizeof(int32_t));
        if (!r->synthetic_x || !r->synthetic_y)
            return HORA_ERR_NO_MEMORY;
        uint64_t s = o->seed * 2654435761u + (uint64_t)r->rank;
        for (size_t i = 0; i < (size_t)o->batch * sample; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            r->synthetic_x[i] = (float)((double)(s >> 40) / (double)(1 << 24) * 2.0 - 1.0);
        }
        for (int i = 0; i < o->batch; i++)
            r->synthetic_y[i] = i % spec.classes;
    }
    if (r->rank == 0) {
        size_t n;
        tr_model_params(r->model, &n);
        printf("hora-train: %s, %d ranks x batch %d, input %dx%dx%d, %d classes, %zu parameters "
               "(%d tensors), backend %s, transport %s\n",
               o->model, r->size, o->batch, spec.in_channels, spec.height, spec.width, spec.classes, n,
               tr_model_param_count(r->model), o->backend, hora_transport_name());
        fflush(stdout);
    }
    return HORA_OK;
}

typedef struct {
    int64_t top1, top5, count;
} eval_result_t;

static hora_status_t evaluate(run_t *r, eval_result_t *res)
{
    int64_t counts[3] = {0, 0, 0};
    if (r->val_loader) {
        CHECK(tr_loader_start_epoch(r->val_loader, 0, 0));
        for (;;) {
            tr_batch_t *b;
            CHECK(tr_loader_next(r->val_loader, &b));
            if (!b)
                break;
            CHECK(tr_model_forward(r->model, b->data, 0));
            int64_t t1, t5;
            tr_model_topk(r->model, b->labels, b->count, &t1, &t5);
            counts[0] += t1;
            counts[1] += t5;
            counts[2] += b->count;
            tr_loader_release(r->val_loader, b);
        }
    } else {
        /* Synthetic: score the fixed batch (a sanity check, not a metric). */
        CHECK(tr_model_forward(r->model, r->synthetic_x, 0));
        tr_model_topk(r->model, r->synthetic_y, r->opt.batch, &counts[0], &counts[1]);
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
    options_t *o = &r->opt;
    uint64_t spe = (uint64_t)o->steps_per_epoch;
    if (r->train_loader) {
        tr_loader_info_t info;
        tr_loader_info(r->train_loader, &info);
        /* Every rank must run the same number of steps (each step is a
         * collective): the smallest shard decides. */
        int64_t steps = (int64_t)info.steps_per_epoch;
        if (r->size > 1)
            CHECK(hora_allreduce(&steps, &steps, 1, HORA_DTYPE_I64, HORA_OP_MIN));
        spe = (uint64_t)steps;
        if (spe == 0) {
            fprintf(stderr, "hora-train: the dataset has fewer than %d x %d samples per epoch\n",
                    r->size, o->batch);
            return HORA_ERR_INVALID_ARG;
        }
    }
    int global_batch = o->batch * r->size;
    tr_lr_schedule_t sched = {0};
    sched.peak_lr = o->lr * global_batch / 256.0;
    sched.warmup_lr = o->warmup_lr;
    sched.warmup_steps = (uint64_t)llround(o->warmup_epochs * (double)spe);
    sched.total_steps = (uint64_t)o->epochs * spe;
    sched.decay = (tr_lr_decay_t)tr_lr_decay_parse(o->lr_decay);
    sched.power = o->power;
    sched.gamma = o->gamma;
    if (sched.decay == TR_LR_DECAY_STEP) {
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", o->lr_steps);
        for (char *tok = strtok(buf, ","); tok && sched.milestone_count < TR_LR_MAX_MILESTONES;
             tok = strtok(NULL, ","))
            sched.milestones[sched.milestone_count++] = (uint64_t)(atof(tok) * (double)spe);
    }
    uint64_t total = sched.total_steps;
    if (o->max_steps > 0 && (uint64_t)o->max_steps < total)
        total = (uint64_t)o->max_steps;
    int print_every = o->print_every ? o->print_every : (int)(spe / 10 ? spe / 10 : 1);

    if (r->rank == 0)
        printf("hora-train: %d epochs x %" PRIu64 " steps, global batch %d, peak lr %.4g, warmup %" PRIu64
               " steps, %s decay, overlap %s\n",
               o->epochs, spe, global_batch, sched.peak_lr, sched.warmup_steps, o->lr_decay,
               r->size > 1 ? o->overlap : "off (one rank)");

    /* The clock of elapsed_s (time to accuracy) starts at the first step,
     * after data loading and model building, as the PyTorch peer's does. */
    r->t0 = tr_now_s();
    uint64_t step = 0;
    double train_time = 0;
    double loss_sum = 0;
    int loss_n = 0;
    uint64_t images_since = 0;
    double t_since = tr_now_s();
    eval_result_t ev = {0};
    int evaluated_last = 0;
    for (int epoch = 0; epoch < o->epochs && step < total; epoch++) {
        if (r->train_loader)
            CHECK(tr_loader_start_epoch(r->train_loader, (uint64_t)epoch, 0));
        for (uint64_t i = 0; i < spe && step < total; i++, step++) {
            const float *x = r->synthetic_x;
            const int32_t *y = r->synthetic_y;
            tr_batch_t *b = NULL;
            if (r->train_loader) {
                CHECK(tr_loader_next(r->train_loader, &b));
                if (!b) {
                    fprintf(stderr, "hora-train: rank %d: the loader ended epoch %d after %" PRIu64
                            " of %" PRIu64 " steps\n", r->rank, epoch, i, spe);
                    return HORA_ERR_INTERNAL;
                }
                x = b->data;
                y = b->labels;
            }
            double lr = tr_lr_at(&sched, step);
            float loss;
            double ts = tr_now_s();
            int probing = tr_trainer_overlap(r->trainer, NULL, NULL) < 0;
            CHECK(tr_trainer_step(r->trainer, x, y, lr, &loss));
            train_time += tr_now_s() - ts;
            if (probing)
                report_overlap(r);
            if (b)
                tr_loader_release(r->train_loader, b);
            if (!isfinite(loss)) {
                fprintf(stderr, "hora-train: rank %d: loss is %g at step %" PRIu64 "; stopping\n", r->rank,
                        loss, step);
                return HORA_ERR_INTERNAL;
            }
            loss_sum += loss;
            loss_n++;
            images_since += (uint64_t)global_batch;
            if ((step + 1) % (uint64_t)print_every == 0 || step + 1 == total || i + 1 == spe) {
                /* The same steps on every rank, so this small collective is safe. */
                double l = loss_sum / loss_n;
                if (r->size > 1)
                    CHECK(hora_allreduce(&l, &l, 1, HORA_DTYPE_F64, HORA_OP_AVG));
                double t = tr_now_s();
                double ips = images_since / (t - t_since);
                double elapsed = t - r->t0;
                double eta = (double)(total - step - 1) * (elapsed / (double)(step + 1));
                uint64_t bad = r->train_loader ? tr_loader_bad_count(r->train_loader) : 0;
                if (r->rank == 0) {
                    char eta_s[32];
                    format_duration(eta, eta_s, sizeof(eta_s));
                    double frac = (double)(i + 1) / (double)spe;
                    if (r->tty) {
                        char bar[21];
                        int fill = (int)(frac * 20);
                        for (int k = 0; k < 20; k++)
                            bar[k] = k < fill ? '#' : '.';
                        bar[20] = 0;
                        printf("\repoch %d/%d [%s] step %" PRIu64 "  %.0f img/s  loss %.4f  lr %.4g  ETA %s"
                               "%s   ", epoch + 1, o->epochs, bar, step + 1, ips, l, lr, eta_s,
                               bad ? "  (bad samples skipped)" : "");
                    } else {
                        printf("epoch %d/%d step %" PRIu64 " (%.0f%%)  %.0f img/s  loss %.4f  lr %.4g  ETA %s"
                               "  bad %" PRIu64 "\n", epoch + 1, o->epochs, step + 1, 100 * frac, ips, l, lr,
                               eta_s, bad);
                    }
                    fflush(stdout);
                    log_json(r, "{\"type\":\"train\",\"epoch\":%.4f,\"step\":%" PRIu64 ",\"loss\":%.6f,"
                             "\"lr\":%.6g,\"img_per_s\":%.1f,\"elapsed_s\":%.3f,\"bad_samples\":%" PRIu64 "}",
                             epoch + frac, step + 1, l, lr, ips, elapsed, bad);
                }
                loss_sum = 0;
                loss_n = 0;
                images_since = 0;
                t_since = tr_now_s();
            }
        }
        int last = epoch + 1 == o->epochs || step >= total;
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
        printf("training: %" PRIu64 " steps, %.1f img/s over %d ranks (compute and all-reduce only)\n", step,
               train_time > 0 ? (double)step * global_batch / train_time : 0.0, r->size);
        printf("final test top-1 %.2f%% top-5 %.2f%%\n", 100.0 * ev.top1 / ev.count,
               100.0 * ev.top5 / ev.count);
        log_json(r, "{\"type\":\"final\",\"steps\":%" PRIu64 ",\"top1\":%.6f,\"top5\":%.6f,\"elapsed_s\":%.3f,"
                 "\"train_img_per_s\":%.1f}", step, (double)ev.top1 / ev.count, (double)ev.top5 / ev.count,
                 tr_now_s() - r->t0, train_time > 0 ? (double)step * global_batch / train_time : 0.0);
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
    free(r->synthetic_x);
    free(r->synthetic_y);
    if (r->log)
        fclose(r->log);
}

int main(int argc, char **argv)
{
    run_t run = {0}, *r = &run;
    options_default(&r->opt);
    if (parse_args(argc, argv, &r->opt))
        return 2;
    r->t0 = tr_now_s();
    hora_status_t status = hora_init();
    if (status != HORA_OK) {
        fprintf(stderr, "hora-train: hora_init failed: %s (%s)\n", hora_status_string(status), hora_last_error());
        return 1;
    }
    r->rank = hora_rank();
    r->size = hora_size();
    r->tty = r->rank == 0 && (strcmp(r->opt.progress, "bar") == 0 ||
                              (strcmp(r->opt.progress, "auto") == 0 && isatty(STDOUT_FILENO)));
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
