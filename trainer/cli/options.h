/*
 * options.h - hora-train's flags, declared once in a table (options.c), as
 * runtime/base/config.c declares the HORA_* settings: name, value name,
 * default, documentation, parser and accepted range in one row. --help is
 * printed from the table, defaults are parsed by the same parsers as the
 * command line, and a bad value is an error naming the flag and what it
 * accepts.
 */
#ifndef TR_OPTIONS_H
#define TR_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#include "optim.h"
#include "precision.h"
#include "train.h"

typedef enum { TR_PROGRESS_AUTO = 0, TR_PROGRESS_BAR = 1, TR_PROGRESS_LINES = 2 } tr_progress_t;
/* --preempt: auto is on with --checkpoint-dir, off without. */
typedef enum { TR_PREEMPT_AUTO = 0, TR_PREEMPT_ON = 1, TR_PREEMPT_OFF = 2 } tr_preempt_t;

/* --precision: tr_precision_t (precision.h), auto by default. */
/* --grad-dtype: auto (the compute precision's), or a dtype. */
typedef enum { TR_GRAD_AUTO = 0, TR_GRAD_F32 = 1, TR_GRAD_BF16 = 2, TR_GRAD_F16 = 3 } tr_grad_choice_t;
/* --loss-scale's words (TR_LOSS_SCALE_OPT_AUTO / _DYNAMIC) are in precision.h. */

typedef struct {
    /* Model */
    const char *model;
    int classes; /* 0: the dataset's (synthetic: the model's) */
    int width;   /* 0: the model's */
    int zero_init;
    float bn_eps, bn_momentum;
    /* Data */
    const char *data;
    int synthetic;
    int image[3]; /* synthetic C, H, W; 0: the model's */
    int steps_per_epoch;
    int data_threads;
    int pad_crop; /* -1: auto (4 below 64 pixels) */
    int flip;
    int rrc; /* -1: auto (64 pixels and more) */
    float jitter, lighting;
    int strict;
    /* Schedule */
    int epochs;
    int batch;
    int eval_batch;    /* 0: the training batch */
    int64_t max_steps; /* 0: no limit */
    double lr, warmup_lr, warmup_epochs, power, gamma;
    int lr_decay; /* tr_lr_decay_t */
    const char *lr_steps;
    /* Optimizer */
    tr_optim_config_t optim;
    double label_smoothing;
    /* Precision */
    int precision;     /* tr_precision_t, TR_PRECISION_AUTO included */
    double loss_scale; /* > 0 static, or TR_LOSS_SCALE_OPT_AUTO / _DYNAMIC */
    int64_t loss_scale_window;
    int grad_dtype; /* tr_grad_choice_t */
    /* Checkpoints */
    const char *checkpoint_dir;     /* NULL: none */
    int checkpoint_every_epochs;    /* 0: not per epoch */
    int64_t checkpoint_every_steps; /* 0: not per step */
    int keep_checkpoints;
    const char *resume; /* NULL, "auto" or a file */
    int keep_global_batch;
    int preempt; /* tr_preempt_t */
    /* Elastic (hora-run --elastic) */
    int elastic;
    int min_ranks;          /* below it after a re-form: checkpoint and stop */
    int commit_every_steps; /* 0: auto (1 under 5 M parameters, else 10) */
    /* Runtime */
    const char *backend;
    int threads;
    int overlap;      /* tr_overlap_t */
    int reproducible; /* the gradient all-reduce's hora_reproducible_t: 0 HORA_REPRODUCIBLE's, 1 rank order, 2 exact */
    int eval_every;
    int print_every;
    const char *log_path;
    int progress;   /* tr_progress_t */
    int cpu_layout; /* index into tr_cpu_layout_names */
    int64_t seed;
    int verbose;
    int profile;
    int cudnn_autotune; /* --cudnn-autotune (tr_backend_config_t's autotune) */ /* --profile: the per-layer table
                                                                                   (model.h's tr_model_profile) */
} tr_options_t;

/* Defaults (from the table), then argv. Returns 0, 1 for --help (usage
 * printed on stdout), or -1 after printing an error on stderr. */
int tr_options_parse(int argc, char **argv, tr_options_t *o);

/* The usage text: every flag with its default and doc, then the HORA_*
 * settings. */
void tr_options_usage(FILE *out);

/* The milestones of --lr-steps in epochs; count <= max. -1 if malformed. */
int tr_options_lr_steps(const char *text, double *epochs, int max);

#endif
