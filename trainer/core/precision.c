/*
 * precision.c - precisions and --precision auto's measurement (precision.h).
 *
 * Why measure: whether bf16 beats fp32 depends on the CPU and the library
 * under the backend, not on a CPU flag. On AMD EPYC with avx512_bf16 and
 * oneDNN 2.6, bf16 steps took about half the fp32 time; on an Intel Xeon
 * that also lists avx512_bf16 (and AMX), the same oneDNN 2.6 ran ResNet-20's
 * bf16 steps slower than fp32 (issue 30). So, as --overlap auto does, the
 * probe times the real step (forward, backward, the all-reduces in the
 * gradient dtype, the loss-scale check, the optimizer) in each candidate
 * precision, on the run's model, batch and ranks, before training starts:
 * the training itself is then built once in the chosen precision and stays
 * as deterministic as with an explicit --precision.
 *
 * The candidates' steps are interleaved (one step each per round, the
 * order rotating), so a slow phase of the machine (another job, frequency
 * changes) hits all of them alike, and each keeps its median. The gradient
 * names carry a per-candidate prefix, so each candidate's all-reduces hit
 * their own entries of hora's response cache as a steady run's would.
 */
#include "precision.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const tr_precision_names[] = {"fp32", "bf16", "fp16", "auto", NULL};

static const tr_dtype_t compute_dtypes[TR_PRECISION_COUNT] = {TR_DTYPE_F32, TR_DTYPE_BF16, TR_DTYPE_F16};

hora_status_t tr_precision_dtypes(tr_backend_t *backend, tr_precision_t p, int grad, tr_model_spec_t *spec,
                                  int *fell_back)
{
    if (fell_back) *fell_back = 0;
    if ((int)p < 0 || p >= TR_PRECISION_COUNT)
        return status_set(HORA_ERR_INVALID_ARG, "precision %d is not one a model computes in", (int)p);
    tr_dtype_t want = compute_dtypes[p];
    spec->compute_dtype = want;
    spec->grad_dtype = grad == TR_GRAD_DTYPE_AUTO ? want : (tr_dtype_t)grad;
    if (want != TR_DTYPE_F32 && backend->ops->compute_dtype(backend, want) != HORA_OK) {
        if (want != TR_DTYPE_F16) return HORA_ERR_UNSUPPORTED;
        spec->compute_dtype = TR_DTYPE_F32;
        if (fell_back) *fell_back = 1;
    }
    return HORA_OK;
}

void tr_precision_loss_scale(tr_precision_t p, double scale_opt, int64_t window, tr_loss_scale_config_t *ls)
{
    ls->window = (uint64_t)window;
    ls->max_consecutive_skips = TR_LOSS_SCALE_MAX_SKIPS;
    if (scale_opt > 0) {
        ls->mode = TR_LOSS_SCALE_STATIC;
        ls->initial = scale_opt;
    } else if (scale_opt == TR_LOSS_SCALE_OPT_DYNAMIC || p == TR_PRECISION_FP16) {
        ls->mode = TR_LOSS_SCALE_DYNAMIC;
        ls->initial = TR_LOSS_SCALE_DYNAMIC_INITIAL;
    } else {
        ls->mode = TR_LOSS_SCALE_NONE; /* fp32 and bf16 (f32's exponent range) need none */
        ls->initial = 1.0;
    }
}

/* One candidate of the probe. */
typedef struct {
    tr_model_t *model;
    tr_trainer_t *trainer;
    tr_run_state_t state;
    char prefix[16];
    double *ms; /* per timed round */
} candidate_t;

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static hora_status_t reduce(void *buf, size_t count, hora_dtype_t dtype, hora_op_t op)
{
    if (!hora_initialized() || hora_size() < 2) return HORA_OK;
    hora_status_t status = hora_allreduce(buf, buf, count, dtype, op);
    if (status != HORA_OK) /* libhora's failure, into this program's store */
        status_set(status, "precision auto: allreduce failed: %s (%s)", hora_status_string(status), hora_last_error());
    return status;
}

/* One step of candidate c, timed to the end of its all-reduces (and, on a
 * device, of the backend's work): ms. */
static hora_status_t timed_step(tr_backend_t *backend, candidate_t *c, const tr_tensor_t *x, const int32_t *y,
                                double *ms)
{
    double t0 = tr_now_s();
    float loss;
    hora_status_t status = tr_trainer_step(c->trainer, x, y, 1e-3, &loss, NULL);
    if (status == HORA_OK) status = tr_trainer_settle(c->trainer);
    if (status == HORA_OK) status = backend->ops->synchronize(backend);
    if (status != HORA_OK)
        status_set(status, "precision auto: a %s step failed: %s", c->prefix,
                   status_message()[0] ? status_message() : hora_status_string(status));
    *ms = 1e3 * (tr_now_s() - t0);
    return status;
}

/* Which precisions are candidates, the same on every rank. */
static hora_status_t find_candidates(tr_backend_t *backend, tr_precision_probe_t *out)
{
    int32_t ok[TR_PRECISION_COUNT];
    for (int p = 0; p < TR_PRECISION_COUNT; p++) {
        ok[p] = 1;
        if (p == TR_PRECISION_FP32) continue;
        if (backend->ops->compute_dtype(backend, compute_dtypes[p]) != HORA_OK) {
            ok[p] = 0;
            snprintf(out->refused[p], sizeof(out->refused[p]), "the %s backend does not compute %s natively: %s",
                     backend->ops->name, tr_dtype_name(compute_dtypes[p]), status_message());
        }
    }
    hora_status_t status = reduce(ok, TR_PRECISION_COUNT, HORA_DTYPE_I32, HORA_OP_MIN);
    for (int p = 0; p < TR_PRECISION_COUNT && status == HORA_OK; p++) {
        out->candidate[p] = ok[p] != 0;
        if (!ok[p] && !out->refused[p][0])
            snprintf(out->refused[p], sizeof(out->refused[p]),
                     "another rank's %s backend does not compute %s "
                     "natively",
                     backend->ops->name, tr_dtype_name(compute_dtypes[p]));
    }
    return status;
}

/* The candidates' models and trainers; one that cannot be built on some
 * rank is left out everywhere. */
static hora_status_t build(tr_backend_t *backend, const tr_precision_probe_config_t *cfg, tr_precision_probe_t *out,
                           candidate_t *c)
{
    int32_t built[TR_PRECISION_COUNT] = {0};
    hora_status_t why_status[TR_PRECISION_COUNT] = {HORA_OK};
    for (int p = 0; p < TR_PRECISION_COUNT; p++) {
        if (!out->candidate[p]) continue;
        tr_model_spec_t spec = cfg->spec;
        hora_status_t status = tr_precision_dtypes(backend, (tr_precision_t)p, cfg->grad, &spec, NULL);
        if (status == HORA_OK)
            status = tr_model_init(backend, &spec, cfg->batch, cfg->grads_shared, cfg->seed, &c[p].model);
        tr_step_config_t sc = cfg->step;
        tr_precision_loss_scale((tr_precision_t)p, cfg->loss_scale_opt, cfg->loss_scale_window, &sc.loss_scale);
        if (sc.overlap == TR_OVERLAP_AUTO) sc.overlap = TR_OVERLAP_OFF;
        snprintf(c[p].prefix, sizeof(c[p].prefix), "probe.%s.", tr_precision_names[p]);
        sc.name_prefix = c[p].prefix;
        c[p].state = tr_run_state_begin(cfg->seed);
        tr_loss_scale_begin(&sc.loss_scale, &c[p].state.loss_scale);
        /* Dynamic scaling from 2^16 would overflow on the first steps of
         * a fresh model and skip their optimizer step: time it from 1, so
         * every step is a whole one (the check still runs). */
        if (sc.loss_scale.mode == TR_LOSS_SCALE_DYNAMIC) c[p].state.loss_scale.scale = 1.0;
        if (status == HORA_OK) status = tr_trainer_init(c[p].model, &sc, &c[p].state, &c[p].trainer);
        float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.25f, 0.25f, 0.25f};
        if (status == HORA_OK) tr_model_set_input_norm(c[p].model, mean, std);
        built[p] = status == HORA_OK;
        why_status[p] = status;
    }
    hora_status_t status = reduce(built, TR_PRECISION_COUNT, HORA_DTYPE_I32, HORA_OP_MIN);
    for (int p = 0; p < TR_PRECISION_COUNT; p++) {
        if (!out->candidate[p] || built[p]) continue;
        out->candidate[p] = 0;
        snprintf(out->refused[p], sizeof(out->refused[p]), "its model could not be built%s%s",
                 why_status[p] != HORA_OK ? ": " : " on another rank",
                 why_status[p] != HORA_OK ? hora_status_string(why_status[p]) : "");
        tr_trainer_free(c[p].trainer);
        tr_model_free(c[p].model);
        c[p].trainer = NULL;
        c[p].model = NULL;
    }
    return status;
}

/* Warm-up, then the timed rounds; out->ms and out->steps. */
static hora_status_t measure(tr_backend_t *backend, const tr_precision_probe_config_t *cfg, tr_precision_probe_t *out,
                             candidate_t *c, const tr_tensor_t *x, const int32_t *y)
{
    int order[TR_PRECISION_COUNT], n = 0;
    for (int p = 0; p < TR_PRECISION_COUNT; p++)
        if (out->candidate[p]) order[n++] = p;
    double warm[TR_PRECISION_COUNT] = {0};
    hora_status_t status = HORA_OK;
    for (int w = 0; w < TR_PRECISION_PROBE_WARMUP && status == HORA_OK; w++)
        for (int j = 0; j < n && status == HORA_OK; j++)
            status = timed_step(backend, &c[order[j]], x, y, &warm[order[j]]);
    /* As many rounds as fit the budget by the slowest rank's last warm
     * step: the same count on every rank. */
    if (status == HORA_OK) status = reduce(warm, TR_PRECISION_COUNT, HORA_DTYPE_F64, HORA_OP_MAX);
    if (status != HORA_OK) return status;
    double round_ms = 0;
    for (int j = 0; j < n; j++) round_ms += warm[order[j]];
    double budget_ms = 1e3 * (cfg->budget_s > 0 ? cfg->budget_s : 2.0);
    int rounds = round_ms > 0 ? (int)(budget_ms / round_ms) : TR_PRECISION_PROBE_MAX_ROUNDS;
    rounds = rounds < TR_PRECISION_PROBE_MIN_ROUNDS   ? TR_PRECISION_PROBE_MIN_ROUNDS
             : rounds > TR_PRECISION_PROBE_MAX_ROUNDS ? TR_PRECISION_PROBE_MAX_ROUNDS
                                                      : rounds;
    for (int j = 0; j < n; j++)
        if (!(c[order[j]].ms = calloc((size_t)rounds, sizeof(double)))) return HORA_ERR_NO_MEMORY;
    for (int k = 0; k < rounds && status == HORA_OK; k++)
        for (int j = 0; j < n && status == HORA_OK; j++) {
            candidate_t *cand = &c[order[(j + k) % n]];
            status = timed_step(backend, cand, x, y, &cand->ms[k]);
        }
    if (status != HORA_OK) return status;
    for (int j = 0; j < n; j++) {
        double *ms = c[order[j]].ms;
        qsort(ms, (size_t)rounds, sizeof(double), compare_double);
        out->ms[order[j]] = rounds % 2 ? ms[rounds / 2] : 0.5 * (ms[rounds / 2 - 1] + ms[rounds / 2]);
    }
    /* Every rank keeps the slowest rank's medians, so all choose alike. */
    status = reduce(out->ms, TR_PRECISION_COUNT, HORA_DTYPE_F64, HORA_OP_MAX);
    out->steps = TR_PRECISION_PROBE_WARMUP + rounds;
    return status;
}

hora_status_t tr_precision_probe(tr_backend_t *backend, const tr_precision_probe_config_t *cfg,
                                 tr_precision_probe_t *out)
{
    memset(out, 0, sizeof(*out));
    out->choice = TR_PRECISION_FP32;
    double t0 = tr_now_s();
    hora_status_t status = find_candidates(backend, out);
    int n = 0;
    for (int p = 0; p < TR_PRECISION_COUNT; p++) n += out->candidate[p];
    if (status != HORA_OK || n < 2) {
        out->seconds = tr_now_s() - t0;
        return status; /* fp32 alone: nothing to measure */
    }
    candidate_t c[TR_PRECISION_COUNT];
    memset(c, 0, sizeof(c));
    /* The run's input shape as u8 pixels (the input step every backend
     * has), in the backend's host memory. */
    const tr_model_spec_t *s = &cfg->spec;
    const size_t bytes = (size_t)cfg->batch * (size_t)s->in_channels * (size_t)s->height * (size_t)s->width;
    uint8_t *pixels = NULL;
    int32_t *labels = malloc((size_t)cfg->batch * sizeof(int32_t));
    if (backend->ops->host_alloc(backend, bytes, (void **)&pixels) != HORA_OK || !labels) {
        status = status_set(HORA_ERR_NO_MEMORY, "precision auto: no memory for a batch of %zu bytes", bytes);
    } else {
        uint64_t r = cfg->seed * 2654435761u + 7;
        for (size_t i = 0; i < bytes; i++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            pixels[i] = (uint8_t)(r >> 56);
        }
        for (int i = 0; i < cfg->batch; i++) labels[i] = i % s->classes;
    }
    /* Every rank goes through the same collectives even after a local
     * failure of the batch: build and measure only when all have it. */
    int32_t have = status == HORA_OK;
    hora_status_t reduced = reduce(&have, 1, HORA_DTYPE_I32, HORA_OP_MIN);
    if (status == HORA_OK) status = reduced != HORA_OK ? reduced : have ? HORA_OK : HORA_ERR_NO_MEMORY;
    if (status == HORA_OK) status = build(backend, cfg, out, c);
    n = 0;
    for (int p = 0; p < TR_PRECISION_COUNT; p++) n += out->candidate[p];
    if (status == HORA_OK && n >= 2) {
        tr_tensor_t x = tr_tensor_plain(pixels, TR_DTYPE_U8, TR_MEMORY_HOST, 4,
                                        (const int[]){cfg->batch, s->in_channels, s->height, s->width});
        x.layout = TR_LAYOUT_NHWC;
        status = measure(backend, cfg, out, c, &x, labels);
    }
    if (status == HORA_OK)
        for (int p = 0; p < TR_PRECISION_COUNT; p++)
            if (out->candidate[p] && out->ms[p] > 0 && out->ms[p] < out->ms[out->choice])
                out->choice = (tr_precision_t)p;
    for (int p = 0; p < TR_PRECISION_COUNT; p++) {
        tr_trainer_free(c[p].trainer);
        tr_model_free(c[p].model);
        free(c[p].ms);
    }
    if (pixels) backend->ops->host_free(backend, pixels);
    free(labels);
    out->seconds = tr_now_s() - t0;
    return status;
}

void tr_precision_describe(const tr_precision_probe_t *probe, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "%s", tr_precision_names[probe->choice]);
    const char *sep = ": ";
    if (probe->steps > 0) {
        for (int p = 0; p < TR_PRECISION_COUNT && used < len; p++)
            if (probe->candidate[p]) {
                used += (size_t)snprintf(buf + used, len - used, "%s%s %.1f ms/step", sep, tr_precision_names[p],
                                         probe->ms[p]);
                sep = ", ";
            }
        if (used < len)
            used +=
                (size_t)snprintf(buf + used, len - used,
                                 " (median of %d steps each after %d warm-up, the "
                                 "slowest rank's; %.1f s)",
                                 probe->steps - TR_PRECISION_PROBE_WARMUP, TR_PRECISION_PROBE_WARMUP, probe->seconds);
        sep = "; ";
    } else if (used < len) {
        used += (size_t)snprintf(buf + used, len - used, ", the only candidate");
        sep = "; ";
    }
    for (int p = 0; p < TR_PRECISION_COUNT && used < len; p++)
        if (!probe->candidate[p] && probe->refused[p][0]) {
            used += (size_t)snprintf(buf + used, len - used, "%s%s left out: %s", sep, tr_precision_names[p],
                                     probe->refused[p]);
            sep = "; ";
        }
}

/* s as the inside of a JSON string. */
static size_t json_text(char *buf, size_t len, const char *s)
{
    size_t used = 0;
    for (; *s && used + 2 < len; s++) {
        if (*s == '"' || *s == '\\') buf[used++] = '\\';
        buf[used++] = (unsigned char)*s < 0x20 ? ' ' : *s;
    }
    if (len) buf[used < len ? used : len - 1] = 0;
    return used;
}

void tr_precision_json(const tr_precision_probe_t *probe, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "\"ms_per_step\":{");
    const char *sep = "";
    for (int p = 0; p < TR_PRECISION_COUNT && used < len; p++)
        if (probe->candidate[p] && probe->ms[p] > 0) {
            used += (size_t)snprintf(buf + used, len - used, "%s\"%s\":%.3f", sep, tr_precision_names[p], probe->ms[p]);
            sep = ",";
        }
    if (used < len)
        used += (size_t)snprintf(buf + used, len - used, "},\"steps\":%d,\"probe_s\":%.3f,\"refused\":{", probe->steps,
                                 probe->seconds);
    sep = "";
    for (int p = 0; p < TR_PRECISION_COUNT && used < len; p++)
        if (!probe->candidate[p] && probe->refused[p][0]) {
            used += (size_t)snprintf(buf + used, len - used, "%s\"%s\":\"", sep, tr_precision_names[p]);
            if (used < len) used += json_text(buf + used, len - used, probe->refused[p]);
            if (used < len) used += (size_t)snprintf(buf + used, len - used, "\"");
            sep = ",";
        }
    if (used < len) snprintf(buf + used, len - used, "}");
}

hora_status_t tr_precision_auto(tr_backend_t *backend, const tr_precision_probe_config_t *config, int resumed,
                                tr_precision_state_t *state, char *text, size_t text_len, char *json, size_t json_len,
                                const char **source)
{
    tr_precision_probe_t probe;
    memset(&probe, 0, sizeof(probe));
    const int kept = resumed && state->choice >= 0 && state->choice < TR_PRECISION_COUNT;
    if (!kept) {
        hora_status_t status = tr_precision_probe(backend, config, &probe);
        if (status != HORA_OK) return status;
        state->choice = (int)probe.choice;
        state->measured = probe.steps > 0;
        for (int p = 0; p < TR_PRECISION_COUNT; p++) state->probe_ms[p] = probe.ms[p];
    } else {
        probe.choice = (tr_precision_t)state->choice;
        for (int p = 0; p < TR_PRECISION_COUNT; p++) {
            probe.ms[p] = state->probe_ms[p];
            probe.candidate[p] = state->probe_ms[p] > 0;
        }
    }
    if (source) *source = kept ? "checkpoint" : probe.steps > 0 ? "measured" : "only-candidate";
    if (text && kept) {
        size_t used = (size_t)snprintf(text, text_len, "%s, as the run that wrote the checkpoint chose it",
                                       tr_precision_names[probe.choice]);
        const char *sep = " (it measured ";
        for (int p = 0; p < TR_PRECISION_COUNT && state->measured && used < text_len; p++)
            if (probe.candidate[p]) {
                used += (size_t)snprintf(text + used, text_len - used, "%s%s %.1f ms/step", sep, tr_precision_names[p],
                                         probe.ms[p]);
                sep = ", ";
            }
        if (state->measured && used < text_len) snprintf(text + used, text_len - used, ")");
    } else if (text) {
        tr_precision_describe(&probe, text, text_len);
    }
    if (json) tr_precision_json(&probe, json, json_len);
    return HORA_OK;
}
