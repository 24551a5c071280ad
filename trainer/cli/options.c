/*
 * options.c - the table of hora-train's flags and its parser (options.h).
 * Adding a flag means adding a field to tr_options_t and one row here; the
 * default, --help and the error for a bad value follow from the row.
 */
#include "options.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"

typedef enum {
    OPT_STRING, /* const char *, any text */
    OPT_INT,    /* int in [min, max]; "auto" stores auto_value where allowed */
    OPT_INT64,  /* int64_t in [min, max] */
    OPT_DOUBLE, /* double in [min, max] */
    OPT_FLOAT,  /* float in [min, max] */
    OPT_CHOICE, /* int: the index of one of choices */
    OPT_SET,    /* no value: stores set_value into an int */
    OPT_SHAPE,  /* CxHxW into int[3]; "auto" stores zeros */
    OPT_LIST,   /* const char *: comma-separated numbers in [min, max] */
    OPT_SCALE,  /* double in [min, max], or "auto" (0) or "dynamic" (-1): --loss-scale */
} opt_type_t;

typedef struct {
    const char *name;       /* "--batch" */
    const char *value_name; /* "B" in the help; NULL for OPT_SET */
    opt_type_t type;
    size_t offset;             /* field in tr_options_t */
    const char *default_value; /* parsed like a command-line value; NULL: none (OPT_SET aliases) */
    double min, max;
    const char *const *choices; /* OPT_CHOICE: NULL-terminated, in the enum's order */
    int set_value;              /* OPT_SET */
    int allow_auto;             /* OPT_INT: "auto" is accepted and stores auto_value */
    int auto_value;
    const char *section; /* heading in --help, on the first flag of a section */
    const char *doc;
} opt_t;

#define F(field) offsetof(tr_options_t, field)

static const char *const opt_progress[] = {"auto", "bar", "lines", NULL};         /* tr_progress_t */
static const char *const opt_grad_dtype[] = {"auto", "f32", "bf16", "f16", NULL}; /* tr_grad_choice_t */
static const char *const opt_preempt[] = {"auto", "on", "off", NULL};             /* tr_preempt_t */

static const opt_t opt_table[] = {
    {"--model", "NAME", OPT_STRING, F(model), "resnet20", 0, 0, NULL, 0, 0, 0, "Model",
     "resnet8/20/32/44/56/110 (CIFAR-style), resnet18/34/50/101/152 (ImageNet stem)"},
    {"--classes", "K", OPT_INT, F(classes), "auto", 2, 1000000, NULL, 0, 1, 0, NULL,
     "output classes (auto: the dataset's; synthetic 10 / 1000)"},
    {"--width", "W", OPT_INT, F(width), "auto", 1, 4096, NULL, 0, 1, 0, NULL,
     "base width (auto: 16 CIFAR-style, 64 ImageNet-style)"},
    {"--no-zero-init", NULL, OPT_SET, F(zero_init), "1", 0, 0, NULL, 0, 0, 0, NULL,
     "keep BN gamma = 1 on the last BN of each block (default: 0)"},
    {"--bn-eps", "E", OPT_FLOAT, F(bn_eps), "1e-5", 0, 1, NULL, 0, 0, 0, NULL, "batch-norm epsilon"},
    {"--bn-momentum", "M", OPT_FLOAT, F(bn_momentum), "0.1", 0, 1, NULL, 0, 0, 0, NULL, "running-statistics momentum"},

    {"--data", "DIR", OPT_STRING, F(data), NULL, 0, 0, NULL, 0, 0, 0, "Data",
     "IDX files (Fashion-MNIST) or hora-mkrecord shards"},
    {"--synthetic", NULL, OPT_SET, F(synthetic), "0", 0, 0, NULL, 1, 0, 0, NULL,
     "random data of --image shape (throughput runs)"},
    {"--image", "CxHxW", OPT_SHAPE, F(image), "auto", 1, 1 << 16, NULL, 0, 0, 0, NULL,
     "synthetic input shape (auto: 3x32x32 / 3x224x224)"},
    {"--steps-per-epoch", "N", OPT_INT, F(steps_per_epoch), "100", 1, 1 << 30, NULL, 0, 0, 0, NULL,
     "synthetic epoch length"},
    {"--data-threads", "N", OPT_INT, F(data_threads), "1", 1, 256, NULL, 0, 0, 0, NULL, "decoder threads per rank"},
    {"--pad-crop", "P", OPT_INT, F(pad_crop), "auto", 0, 64, NULL, 0, 1, -1, NULL,
     "pad by P and random-crop back (auto: 4 for images under 64 pixels, else 0)"},
    {"--flip", NULL, OPT_SET, F(flip), "1", 0, 0, NULL, 1, 0, 0, NULL, "random horizontal flip (default: on)"},
    {"--no-flip", NULL, OPT_SET, F(flip), NULL, 0, 0, NULL, 0, 0, 0, NULL, "no random flip"},
    {"--rrc", NULL, OPT_SET, F(rrc), "-1", 0, 0, NULL, 1, 0, 0, NULL,
     "random-resized-crop (default: on for images of 64 pixels and more)"},
    {"--no-rrc", NULL, OPT_SET, F(rrc), NULL, 0, 0, NULL, 0, 0, 0, NULL, "no random-resized-crop"},
    {"--jitter", "S", OPT_FLOAT, F(jitter), "0", 0, 1, NULL, 0, 0, 0, NULL, "colour jitter strength"},
    {"--lighting", "A", OPT_FLOAT, F(lighting), "0", 0, 10, NULL, 0, 0, 0, NULL,
     "PCA lighting alpha std (0.1 in AlexNet)"},
    {"--strict", NULL, OPT_SET, F(strict), "0", 0, 0, NULL, 1, 0, 0, NULL,
     "bad records stop training instead of being skipped"},

    {"--epochs", "E", OPT_INT, F(epochs), "1", 1, 100000, NULL, 0, 0, 0, "Schedule", "epochs to train"},
    {"--batch", "B", OPT_INT, F(batch), "64", 1, 1 << 20, NULL, 0, 0, 0, NULL,
     "samples per rank and step (an epoch's last step takes what is left)"},
    {"--eval-batch", "B", OPT_INT, F(eval_batch), "auto", 1, 1 << 20, NULL, 0, 1, 0, NULL,
     "samples per rank and evaluation step (auto: --batch)"},
    {"--steps", "N", OPT_INT64, F(max_steps), "0", 0, INT64_MAX / 2, NULL, 0, 0, 0, NULL,
     "stop after N steps in all (0: no limit; smoke tests)"},
    {"--lr", "LR", OPT_DOUBLE, F(lr), "0.1", 0, 1e6, NULL, 0, 0, 0, NULL,
     "per 256 images, scaled by global batch / 256"},
    {"--warmup-epochs", "W", OPT_DOUBLE, F(warmup_epochs), "0", 0, 1e6, NULL, 0, 0, 0, NULL,
     "linear warmup length, may be fractional"},
    {"--warmup-lr", "LR", OPT_DOUBLE, F(warmup_lr), "0", 0, 1e6, NULL, 0, 0, 0, NULL, "warmup start"},
    {"--lr-decay", "KIND", OPT_CHOICE, F(lr_decay), "poly", 0, 0, tr_lr_decay_names, 0, 0, 0, NULL,
     "decay after warmup"},
    {"--lr-power", "P", OPT_DOUBLE, F(power), "2", 0, 100, NULL, 0, 0, 0, NULL, "poly power"},
    {"--lr-steps", "E1,E2,..", OPT_LIST, F(lr_steps), "30,60,80", 0, 1e6, NULL, 0, 0, 0, NULL,
     "step decay: the epochs where the rate drops"},
    {"--lr-gamma", "G", OPT_DOUBLE, F(gamma), "0.1", 0, 1, NULL, 0, 0, 0, NULL, "step decay: factor per drop"},

    {"--momentum", "M", OPT_DOUBLE, F(optim.momentum), "0.9", 0, 1, NULL, 0, 0, 0, "Optimizer", "SGD momentum"},
    {"--no-nesterov", NULL, OPT_SET, F(optim.nesterov), "1", 0, 0, NULL, 0, 0, 0, NULL,
     "plain momentum (default: Nesterov)"},
    {"--wd", "WD", OPT_DOUBLE, F(optim.weight_decay), "1e-4", 0, 1, NULL, 0, 0, 0, NULL, "weight decay"},
    {"--no-wd-bn-bias", NULL, OPT_SET, F(optim.decay_bn_bias), "1", 0, 0, NULL, 0, 0, 0, NULL,
     "no weight decay on BN parameters and biases"},
    {"--lars", NULL, OPT_SET, F(optim.lars), "0", 0, 0, NULL, 1, 0, 0, NULL, "layer-wise adaptive rate scaling"},
    {"--lars-eta", "ETA", OPT_DOUBLE, F(optim.lars_eta), "0.001", 0, 1e3, NULL, 0, 0, 0, NULL,
     "LARS trust coefficient"},
    {"--label-smoothing", "S", OPT_DOUBLE, F(label_smoothing), "0", 0, 1, NULL, 0, 0, 0, NULL, "label smoothing"},

    {"--precision", "P", OPT_CHOICE, F(precision), "auto", 0, 0, tr_precision_names, 0, 0, 0, "Precision",
     "what the layers compute in; bf16/fp16 keep fp32 master weights, momentum and BN statistics; auto: time "
     "fp32 and the low precisions the backend computes natively on the first steps of a throw-away model, keep "
     "the fastest (a resumed run keeps its checkpoint's)"},
    {"--loss-scale", "S", OPT_SCALE, F(loss_scale), "auto", 1, 1e7, NULL, 0, 0, 0, NULL,
     "static scale S (a power of two is exact), dynamic, or auto (fp32, bf16: none; fp16: dynamic); "
     "overflowed steps are skipped"},
    {"--loss-scale-window", "N", OPT_INT64, F(loss_scale_window), "2000", 1, INT64_MAX / 2, NULL, 0, 0, 0, NULL,
     "dynamic: clean steps before the scale doubles (it halves on overflow)"},
    {"--grad-dtype", "T", OPT_CHOICE, F(grad_dtype), "auto", 0, 0, opt_grad_dtype, 0, 0, 0, NULL,
     "what the gradients are kept and all-reduced in (auto: the compute precision's); the all-reduce sends them "
     "in this dtype (the trainer leaves hora's wire compression, hora_opts_t.compression, off)"},

    {"--checkpoint-dir", "DIR", OPT_STRING, F(checkpoint_dir), NULL, 0, 0, NULL, 0, 0, 0, "Checkpoints",
     "write checkpoints into DIR (rank 0; atomic; see trainer/ckpt/CHECKPOINT.md); none without it"},
    {"--checkpoint-every-epochs", "E", OPT_INT, F(checkpoint_every_epochs), "1", 0, 100000, NULL, 0, 0, 0, NULL,
     "a checkpoint after every E-th epoch (0: none per epoch); and one at the end of training"},
    {"--checkpoint-every-steps", "N", OPT_INT64, F(checkpoint_every_steps), "0", 0, INT64_MAX / 2, NULL, 0, 0, 0, NULL,
     "also a checkpoint every N steps (0: none)"},
    {"--keep-checkpoints", "K", OPT_INT, F(keep_checkpoints), "3", 1, 1000000, NULL, 0, 0, 0, NULL,
     "the newest K checkpoints stay, older ones are removed"},
    {"--resume", "WHAT", OPT_STRING, F(resume), NULL, 0, 0, NULL, 0, 0, 0, NULL,
     "auto: the newest good checkpoint in --checkpoint-dir (a fresh start when it has none), or a checkpoint "
     "file; training continues at its next step, on any number of ranks"},
    {"--keep-global-batch", NULL, OPT_SET, F(keep_global_batch), "0", 0, 0, NULL, 1, 0, 0, NULL,
     "resuming on another number of ranks: keep the checkpoint's global batch (and so the learning rate) by "
     "changing the per-rank batch, instead of keeping --batch and scaling the rate"},
    {"--preempt", "MODE", OPT_CHOICE, F(preempt), "auto", 0, 0, opt_preempt, 0, 0, 0, NULL,
     "on: SIGTERM on any rank, or the file HORA_PREEMPT_FILE names appearing, stops every rank at the same "
     "step boundary (agreed every step), rank 0 writes a checkpoint there and every rank exits 0 saying "
     "'preempted at step K; resume with --resume auto' (needs --checkpoint-dir); off: SIGTERM kills as usual; "
     "auto: on with --checkpoint-dir, off without"},

    {"--elastic", NULL, OPT_SET, F(elastic), "0", 0, 0, NULL, 1, 0, 0, "Elastic",
     "keep training when a rank is lost or hosts arrive (under hora-run --elastic only): commit the training "
     "state in memory every --commit-every-steps steps; on a lost rank the survivors re-form, roll back to the "
     "last commit, re-shard the data and apply --keep-global-batch or the lr rule, as a resume does; arriving "
     "hosts are taken in at a commit and get the state by broadcast"},
    {"--min-ranks", "M", OPT_INT, F(min_ranks), "1", 1, 1 << 20, NULL, 0, 0, 0, NULL,
     "--elastic: a world re-formed with fewer than M ranks stops: rank 0 writes a checkpoint into "
     "--checkpoint-dir (needed when M > 1) and every rank exits 1 saying how to resume"},
    {"--commit-every-steps", "N", OPT_INT, F(commit_every_steps), "auto", 1, 1 << 30, NULL, 0, 1, 0, NULL,
     "--elastic: commit in memory every N steps; a lost rank costs at most N steps (auto: 1 for models under "
     "5 M parameters, else 10)"},

    {"--backend", "NAME", OPT_STRING, F(backend), "cpu", 0, 0, NULL, 0, 0, 0, "Runtime",
     "compute backend (the ones built in are listed below)"},
    {"--threads", "N", OPT_INT, F(threads), "auto", 1, 4096, NULL, 0, 1, 0, NULL,
     "compute threads per rank (auto: the CPUs this rank's affinity allows, shared among the ranks of the host "
     "whose masks overlap, less --data-threads where that leaves one; see trainer/README.md)"},
    {"--cpu-layout", "L", OPT_CHOICE, F(cpu_layout), "auto", 0, 0, tr_cpu_layout_names, 0, 0, 0, NULL,
     "cpu backend's activation layout (auto: f32 blocked by the vector width, bf16/f16 nhwc on oneDNN 3; "
     "nchw, nchw8c, nchw16c or nhwc for every dtype: trainer/backends/cpu/README.md)"},
    {"--overlap", "MODE", OPT_CHOICE, F(overlap), "auto", 0, 0, tr_overlap_names, 0, 0, 0, NULL,
     "on: all-reduce each gradient during backward; off: all after it; auto: time both on the first steps, "
     "keep the faster"},
    {"--no-overlap", NULL, OPT_SET, F(overlap), NULL, 0, 0, NULL, TR_OVERLAP_OFF, 0, 0, NULL,
     "the same as --overlap off"},
    {"--reproducible", NULL, OPT_SET, F(reproducible), "0", 0, 0, NULL, 1, 0, 0, NULL,
     "bitwise-reproducible gradient all-reduce: every element summed in rank order, rounded once, so a run "
     "gives the same bits whatever HORA_ALGORITHM, HORA_HIERARCHICAL, the transport or the fusion threshold "
     "(default: as HORA_REPRODUCIBLE says)"},
    {"--reproducible-exact", NULL, OPT_SET, F(reproducible), NULL, 0, 0, NULL, 2, 0, 0, NULL,
     "the same with exact sums rounded once: also independent of how the addends are spread over the ranks "
     "(host gradients only: a device gradient all-reduce fails with HORA_ERR_UNSUPPORTED)"},
    {"--eval-every", "E", OPT_INT, F(eval_every), "0", 0, 100000, NULL, 0, 0, 0, NULL,
     "evaluate every E epochs (0: only at the end)"},
    {"--print-every", "N", OPT_INT, F(print_every), "auto", 1, 1 << 30, NULL, 0, 1, 0, NULL,
     "progress line every N steps (auto: about 10 per epoch)"},
    {"--log", "FILE", OPT_STRING, F(log_path), NULL, 0, 0, NULL, 0, 0, 0, NULL, "JSON-lines log (rank 0)"},
    {"--progress", "MODE", OPT_CHOICE, F(progress), "auto", 0, 0, opt_progress, 0, 0, 0, NULL,
     "bar (one live line), lines (one per update, no '\\r'), or auto (the bar where mpirun, or this "
     "process, writes to a terminal)"},
    {"--seed", "S", OPT_INT64, F(seed), "42", 0, INT64_MAX / 2, NULL, 0, 0, 0, NULL,
     "initialisation, shuffle and augmentation seed"},
    {"--verbose", NULL, OPT_SET, F(verbose), "0", 0, 0, NULL, 1, 0, 0, NULL,
     "print the backend's implementation choices"},
    {"--cudnn-autotune", NULL, OPT_SET, F(cudnn_autotune), "0", 0, 0, NULL, 1, 0, 0, NULL,
     "cuda: time cuDNN's first few engines for each convolution on first use, keep the fastest"},
    {"--profile", NULL, OPT_SET, F(profile), "0", 0, 0, NULL, 1, 0, 0, NULL,
     "time every conv+BN layer from the third step on (synchronizing around each) and print a table at the end"},
    {NULL, NULL, 0, 0, NULL, 0, 0, NULL, 0, 0, 0, NULL, NULL},
};

static void *opt_field(const opt_t *e, tr_options_t *o) { return (char *)o + e->offset; }

/* What a flag accepts, for --help and for errors. */
static void opt_describe(const opt_t *e, char *buf, size_t len)
{
    switch (e->type) {
    case OPT_INT:
    case OPT_INT64:
        snprintf(buf, len, "an integer in [%.0f, %.0f]%s", e->min, e->max, e->allow_auto ? " or auto" : "");
        return;
    case OPT_DOUBLE:
    case OPT_FLOAT: snprintf(buf, len, "a number in [%g, %g]", e->min, e->max); return;
    case OPT_CHOICE: {
        size_t used = (size_t)snprintf(buf, len, "one of");
        for (int i = 0; e->choices[i] && used < len; i++)
            used += (size_t)snprintf(buf + used, len - used, "%s %s", i ? "," : "", e->choices[i]);
        return;
    }
    case OPT_SHAPE: snprintf(buf, len, "CxHxW (e.g. 1x28x28) or auto"); return;
    case OPT_LIST: snprintf(buf, len, "comma-separated numbers in [%g, %g]", e->min, e->max); return;
    case OPT_SCALE: snprintf(buf, len, "a number in [%g, %g], dynamic or auto", e->min, e->max); return;
    case OPT_STRING:
    case OPT_SET: break;
    }
    snprintf(buf, len, "a value");
}

static int opt_bad(const opt_t *e, const char *text)
{
    char what[192];
    opt_describe(e, what, sizeof(what));
    fprintf(stderr, "hora-train: %s wants %s, got '%s'\n", e->name, what, text);
    return -1;
}

static int opt_number(const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

int tr_options_lr_steps(const char *text, double *epochs, int max)
{
    int count = 0;
    const char *p = text;
    while (*p) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (errno || end == p || !isfinite(v) || v < 0 || count == max) return -1;
        epochs[count++] = v;
        if (*end == ',')
            end++;
        else if (*end)
            return -1;
        p = end;
    }
    return count;
}

/* Parse text for e into o (the command line and the defaults alike). */
static int opt_parse(const opt_t *e, const char *text, tr_options_t *o)
{
    void *field = opt_field(e, o);
    double v;
    switch (e->type) {
    case OPT_STRING: *(const char **)field = text; return 0;
    case OPT_SET: *(int *)field = e->set_value; return 0; /* defaults come as text: see tr_options_parse */
    case OPT_INT:
        if (e->allow_auto && !strcmp(text, "auto")) {
            *(int *)field = e->auto_value;
            return 0;
        }
        if (opt_number(text, &v) || v != floor(v) || v < e->min || v > e->max) return opt_bad(e, text);
        *(int *)field = (int)v;
        return 0;
    case OPT_INT64: {
        char *end;
        errno = 0;
        long long x = strtoll(text, &end, 10);
        if (errno || end == text || *end || (double)x < e->min || (double)x > e->max) return opt_bad(e, text);
        *(int64_t *)field = x;
        return 0;
    }
    case OPT_DOUBLE:
        if (opt_number(text, &v) || !(v >= e->min && v <= e->max)) return opt_bad(e, text);
        *(double *)field = v;
        return 0;
    case OPT_FLOAT:
        if (opt_number(text, &v) || !(v >= e->min && v <= e->max)) return opt_bad(e, text);
        *(float *)field = (float)v;
        return 0;
    case OPT_SCALE:
        if (!strcmp(text, "auto") || !strcmp(text, "dynamic")) {
            *(double *)field = text[0] == 'a' ? TR_LOSS_SCALE_OPT_AUTO : TR_LOSS_SCALE_OPT_DYNAMIC;
            return 0;
        }
        if (opt_number(text, &v) || !(v >= e->min && v <= e->max)) return opt_bad(e, text);
        *(double *)field = v;
        return 0;
    case OPT_CHOICE:
        for (int i = 0; e->choices[i]; i++)
            if (!strcmp(text, e->choices[i])) {
                *(int *)field = i;
                return 0;
            }
        return opt_bad(e, text);
    case OPT_SHAPE: {
        int *shape = field, c, h, w;
        char tail;
        if (!strcmp(text, "auto")) {
            shape[0] = shape[1] = shape[2] = 0;
            return 0;
        }
        if (sscanf(text, "%dx%dx%d%c", &c, &h, &w, &tail) != 3 || c < e->min || h < e->min || w < e->min ||
            c > e->max || h > e->max || w > e->max)
            return opt_bad(e, text);
        shape[0] = c;
        shape[1] = h;
        shape[2] = w;
        return 0;
    }
    case OPT_LIST: {
        double epochs[TR_LR_MAX_MILESTONES];
        int n = tr_options_lr_steps(text, epochs, TR_LR_MAX_MILESTONES);
        for (int i = 0; i < n; i++)
            if (epochs[i] < e->min || epochs[i] > e->max) n = -1;
        if (n < 0) return opt_bad(e, text);
        *(const char **)field = text;
        return 0;
    }
    }
    return opt_bad(e, text);
}

static const opt_t *opt_find(const char *name, size_t len)
{
    for (const opt_t *e = opt_table; e->name; e++)
        if (strlen(e->name) == len && !strncmp(e->name, name, len)) return e;
    return NULL;
}

static int opt_defaults(tr_options_t *o)
{
    memset(o, 0, sizeof(*o));
    for (const opt_t *e = opt_table; e->name; e++) {
        if (!e->default_value) continue;
        if (e->type == OPT_SET) {
            *(int *)opt_field(e, o) = atoi(e->default_value); /* the field's value before any flag */
            continue;
        }
        if (opt_parse(e, e->default_value, o)) return -1; /* a bad row in the table */
    }
    return 0;
}

void tr_options_usage(FILE *out)
{
    fprintf(out, "usage: mpirun -np N hora-train [options]   (--flag VALUE or --flag=VALUE)\n");
    for (const opt_t *e = opt_table; e->name; e++) {
        if (e->section) fprintf(out, "%s\n", e->section);
        char head[64], def[96] = "", what[192] = "";
        snprintf(head, sizeof(head), "%s%s%s", e->name, e->value_name ? " " : "", e->value_name ? e->value_name : "");
        if (e->type != OPT_SET && e->default_value) snprintf(def, sizeof(def), " (default %s)", e->default_value);
        if (e->type == OPT_CHOICE || e->type == OPT_INT || e->type == OPT_INT64 || e->type == OPT_DOUBLE ||
            e->type == OPT_FLOAT || e->type == OPT_SCALE) {
            opt_describe(e, what + 2, sizeof(what) - 2);
            what[0] = ';';
            what[1] = ' ';
        }
        fprintf(out, "  %-27s %s%s%s\n", head, e->doc, def, what);
    }
    fprintf(out, "Backends built in: %s. Models: %s.\n\nSettings of the runtime (environment):\n", tr_backend_names(),
            tr_model_names());
    hora_config_print(out);
}

int tr_options_parse(int argc, char **argv, tr_options_t *o)
{
    if (opt_defaults(o)) return -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            tr_options_usage(stdout);
            return 1;
        }
        const char *eq = strncmp(a, "--", 2) ? NULL : strchr(a, '=');
        const opt_t *e = opt_find(a, eq ? (size_t)(eq - a) : strlen(a));
        if (!e) {
            fprintf(stderr, "hora-train: unknown option '%s' (see --help)\n", a);
            return -1;
        }
        if (e->type == OPT_SET) {
            if (eq) {
                fprintf(stderr, "hora-train: %s takes no value\n", e->name);
                return -1;
            }
            opt_parse(e, NULL, o);
            continue;
        }
        const char *value = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!value) {
            fprintf(stderr, "hora-train: %s needs a value\n", e->name);
            return -1;
        }
        if (opt_parse(e, value, o)) return -1;
    }
    if (!o->data && !o->synthetic) {
        fprintf(stderr, "hora-train: give --data DIR or --synthetic (see --help)\n");
        return -1;
    }
    if (o->preempt == TR_PREEMPT_ON && !o->checkpoint_dir) {
        fprintf(stderr, "hora-train: --preempt on writes its checkpoint into --checkpoint-dir: give one (or "
                        "leave --preempt at auto, which is off without it)\n");
        return -1;
    }
    if (!o->elastic && (o->min_ranks > 1 || o->commit_every_steps)) {
        fprintf(stderr, "hora-train: %s is for --elastic runs: give --elastic (under hora-run --elastic)\n",
                o->min_ranks > 1 ? "--min-ranks" : "--commit-every-steps");
        return -1;
    }
    if (o->min_ranks > 1 && !o->checkpoint_dir) {
        fprintf(stderr,
                "hora-train: --min-ranks %d writes a checkpoint into --checkpoint-dir when the world "
                "falls below it: give one\n",
                o->min_ranks);
        return -1;
    }
    if (o->resume && strcmp(o->resume, "auto") == 0 && !o->checkpoint_dir) {
        fprintf(stderr, "hora-train: --resume auto looks in --checkpoint-dir: give one\n");
        return -1;
    }
    return 0;
}
