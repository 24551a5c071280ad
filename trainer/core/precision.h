/*
 * precision.h - what the layers compute in (--precision), and --precision
 * auto: time the precisions the backend computes natively on a throw-away
 * model of the run's shape, keep the fastest.
 *
 * A precision sets the model spec's compute and gradient dtypes and the
 * loss scaler's configuration (tr_precision_dtypes, tr_precision_loss_scale);
 * hora-train, hora-bench-train and the probe share them, so the probe times
 * exactly the step the run will take.
 */
#ifndef TR_PRECISION_H
#define TR_PRECISION_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "loss_scale.h"
#include "model.h"
#include "train.h"

/* --precision. The first TR_PRECISION_COUNT are what a run computes in;
 * AUTO measures which of them is fastest (the run then holds the choice). */
typedef enum {
    TR_PRECISION_FP32 = 0,
    TR_PRECISION_BF16 = 1,
    TR_PRECISION_FP16 = 2,
    TR_PRECISION_AUTO = 3,
} tr_precision_t;
#define TR_PRECISION_COUNT 3

/* "fp32", "bf16", "fp16", "auto", NULL: indexed by tr_precision_t. */
extern const char *const tr_precision_names[];

/* --loss-scale's words, as tr_precision_loss_scale takes them (a number is > 0). */
#define TR_LOSS_SCALE_OPT_AUTO 0.0
#define TR_LOSS_SCALE_OPT_DYNAMIC (-1.0)

/* --grad-dtype auto: the compute precision's gradient dtype. */
#define TR_GRAD_DTYPE_AUTO (-1)

/* spec's compute_dtype and grad_dtype for precision p (not AUTO) on
 * backend; grad is a tr_dtype_t or TR_GRAD_DTYPE_AUTO. fp16 where the
 * backend has no f16 compute falls back to f32 compute (f16 gradients and
 * loss scaling stay): *fell_back = 1 and status_message() says what the
 * backend said. bf16 where it has no bf16 compute: HORA_ERR_UNSUPPORTED
 * with the backend's reason in status_message() (base/status.h). fell_back
 * may be NULL. */
hora_status_t tr_precision_dtypes(tr_backend_t *backend, tr_precision_t p, int grad, tr_model_spec_t *spec,
                                  int *fell_back);

/* The loss scaler for precision p: --loss-scale (scale_opt: > 0 static,
 * TR_LOSS_SCALE_OPT_DYNAMIC, or TR_LOSS_SCALE_OPT_AUTO: fp16 dynamic, fp32
 * and bf16 none) and --loss-scale-window. */
void tr_precision_loss_scale(tr_precision_t p, double scale_opt, int64_t window, tr_loss_scale_config_t *ls);

/* --precision auto's measurement. Every candidate (fp32, and bf16 / fp16
 * where the backend's compute_dtype says it computes them natively; the
 * same set on every rank) gets a model of spec at batch, built as the run
 * builds its own, and a trainer; after TR_PRECISION_PROBE_WARMUP steps each,
 * the candidates take one step each per round, the order rotating, for
 * 3 to TR_PRECISION_PROBE_MAX_ROUNDS rounds (as many as fit budget_s by the
 * slowest warm step). Each candidate's median step time, the slowest
 * rank's, decides: the fastest is kept, fp32 on a tie. */
#define TR_PRECISION_PROBE_WARMUP 2
#define TR_PRECISION_PROBE_MIN_ROUNDS 3
#define TR_PRECISION_PROBE_MAX_ROUNDS 7

typedef struct {
    tr_model_spec_t spec;  /* the run's model (compute_dtype and grad_dtype are set per candidate) */
    int batch;             /* per rank */
    int grad;              /* --grad-dtype: a tr_dtype_t or TR_GRAD_DTYPE_AUTO */
    double loss_scale_opt; /* --loss-scale (tr_precision_loss_scale) */
    int64_t loss_scale_window;
    tr_step_config_t step; /* overlap (auto is timed as off), optimizer, label smoothing */
    int grads_shared;      /* as the run's model (tr_model_init) */
    uint64_t seed;
    double budget_s; /* the timed rounds' target length; 0: 2 s */
} tr_precision_probe_config_t;

typedef struct {
    tr_precision_t choice;
    int candidate[TR_PRECISION_COUNT];     /* 1: measured */
    char refused[TR_PRECISION_COUNT][192]; /* why one is not a candidate ("" for a candidate) */
    double ms[TR_PRECISION_COUNT];         /* median ms per step, the slowest rank's (0: not measured) */
    int steps;                             /* steps per candidate, warm-up included (0: nothing measured) */
    double seconds;                        /* the whole probe, models built and freed included */
} tr_precision_probe_t;

/* Collective over every rank (hora initialised, or one process without
 * it). The backend's memory holds one model per candidate at once while
 * it runs; all are freed before it returns. A candidate that cannot be
 * built on some rank is left out with the reason. HORA_OK with out filled;
 * a failed step or collective is returned (and reported) as it is. */
hora_status_t tr_precision_probe(tr_backend_t *backend, const tr_precision_probe_config_t *config,
                                 tr_precision_probe_t *out);

/* --precision auto in a run: a state chosen already (resumed is set and
 * state->choice >= 0: the checkpoint's) is kept; otherwise
 * tr_precision_probe decides, and state gets the choice and the medians.
 * Collective unless kept. text and json (may be NULL) describe it
 * (tr_precision_describe, tr_precision_json); *source (may be NULL):
 * "measured", "only-candidate" (fp32 alone) or "checkpoint". */
hora_status_t tr_precision_auto(tr_backend_t *backend, const tr_precision_probe_config_t *config, int resumed,
                                tr_precision_state_t *state, char *text, size_t text_len, char *json, size_t json_len,
                                const char **source);

/* "bf16: fp32 151.2 ms/step, bf16 120.4 ms/step (7 steps each); fp16 not
 * a candidate: <why>" */
void tr_precision_describe(const tr_precision_probe_t *probe, char *buf, size_t len);

/* The same as a JSON object's members (no braces): "ms_per_step":{...},
 * "steps":N,"probe_s":S,"refused":{...}. */
void tr_precision_json(const tr_precision_probe_t *probe, char *buf, size_t len);

#endif
