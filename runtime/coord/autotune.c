/* autotune.c - coordinate-descent tuning of fusion threshold, cycle time and
 * ring chunk size, scored by measured allreduce throughput.
 *
 * The search, in order:
 *   1. baseline: the settings in force at start are measured first, so the
 *      incumbent ("best so far") always has a score of its own;
 *   2. for each free parameter in turn (fusion, cycle, chunk), every value of
 *      its candidate list is measured with the other two held at the best so
 *      far; a candidate that beats the incumbent's score replaces it. The
 *      value the sweep starts from is skipped: that point is already measured.
 *   3. the best point wins; the tuner switches to it once and stops.
 * No second pass: at most 1 + 7 + 6 + 6 = 20 candidates, each costing
 * (warmup + samples) * steps work cycles (60 * 20 = 1200 with the defaults),
 * which a training job spends in its first minutes.
 *
 * Measuring one candidate: after every change of settings the first
 * warmup_samples samples are discarded (the first cycles still drain tensors
 * queued under the old settings, and buffers may be resized); then
 * samples_per_candidate samples are scored. A sample accumulates
 * steps_per_sample work cycles and scores total bytes / total seconds, so a
 * long cycle weighs more than a short one, as it does in wall time. The
 * candidate's score is the median of its samples: one stray slow cycle (a
 * checkpoint, a data-loader stall) must not decide the choice.
 */
#include "coord/autotune.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/status.h"

#define AUTOTUNE_DEFAULT_WARMUP 1
#define AUTOTUNE_DEFAULT_SAMPLES 5
#define AUTOTUNE_DEFAULT_STEPS 10
#define AUTOTUNE_MIB (1024.0 * 1024.0)
#define AUTOTUNE_KIB 1024.0

enum autotune_param {
    AUTOTUNE_PARAM_FUSION = 0,
    AUTOTUNE_PARAM_CYCLE = 1,
    AUTOTUNE_PARAM_CHUNK = 2,
    AUTOTUNE_PARAM_COUNT = 3,
};

/* One searched dimension. Values are doubles so one table serves the byte
 * sizes and the milliseconds alike; every size here is exact in a double. */
struct autotune_axis {
    const char *name;
    unsigned fix_bit;
    const double *values;
    int value_count;
};

static const double autotune_fusion_values[] = {
    0, 1 * AUTOTUNE_MIB, 4 * AUTOTUNE_MIB, 16 * AUTOTUNE_MIB, 32 * AUTOTUNE_MIB, 64 * AUTOTUNE_MIB, 128 * AUTOTUNE_MIB,
};
static const double autotune_cycle_values[] = {0.5, 1, 2, 3.5, 5, 10};
static const double autotune_chunk_values[] = {
    64 * AUTOTUNE_KIB, 128 * AUTOTUNE_KIB, 256 * AUTOTUNE_KIB, 512 * AUTOTUNE_KIB, 1 * AUTOTUNE_MIB, 2 * AUTOTUNE_MIB,
};

#define AUTOTUNE_COUNT_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Search order: fusion first, since it decides how many collectives a cycle
 * runs at all; cycle time next (how much a fused buffer can gather); chunk
 * size last (only the pipelining inside one collective). */
static const struct autotune_axis autotune_axes[AUTOTUNE_PARAM_COUNT] = {
    [AUTOTUNE_PARAM_FUSION] = {.name = "fusion threshold",
                               .fix_bit = AUTOTUNE_FIX_FUSION,
                               .values = autotune_fusion_values,
                               .value_count = AUTOTUNE_COUNT_OF(autotune_fusion_values)},
    [AUTOTUNE_PARAM_CYCLE] = {.name = "cycle time",
                              .fix_bit = AUTOTUNE_FIX_CYCLE,
                              .values = autotune_cycle_values,
                              .value_count = AUTOTUNE_COUNT_OF(autotune_cycle_values)},
    [AUTOTUNE_PARAM_CHUNK] = {.name = "chunk size",
                              .fix_bit = AUTOTUNE_FIX_CHUNK,
                              .values = autotune_chunk_values,
                              .value_count = AUTOTUNE_COUNT_OF(autotune_chunk_values)},
};

/* The baseline is measured before any axis is swept. */
#define AUTOTUNE_AXIS_BASELINE (-1)

struct autotune {
    struct autotune_params current; /* in force now: what incoming measurements measure */
    struct autotune_params best;    /* incumbent: best scored point so far */
    double best_score;              /* bytes/s; meaningful once have_best */
    uint64_t best_bytes;            /* scored totals of the incumbent, for the winner row */
    double best_seconds;
    bool have_best;
    bool finished;
    unsigned fixed;

    int warmup_samples, samples_per_candidate, steps_per_sample;

    /* Position in the search: axis (AUTOTUNE_AXIS_BASELINE, then an
     * enum autotune_param) and index into that axis's values. */
    int axis;
    int value_index;
    /* The incumbent when this axis's sweep began: already measured, so a
     * candidate that reproduces it is skipped. (Comparing with the current
     * incumbent instead would re-measure the origin once a better value
     * has taken its place.) */
    struct autotune_params sweep_origin;

    /* The candidate being measured. */
    int warmup_left;          /* samples still to discard */
    int scored_count;         /* scores[] filled so far */
    double *scores;           /* (samples_per_candidate) */
    uint64_t candidate_bytes; /* totals over the scored samples */
    double candidate_seconds;

    /* The sample being accumulated. */
    int step_count;
    uint64_t step_bytes;
    double step_seconds;

    long sample_number; /* samples completed, warm-up included; numbers the log rows */
    int candidate_count;

    FILE *log;
    char *log_path; /* own copy, for messages */
};

static double autotune_params_get(const struct autotune_params *p, int axis)
{
    switch (axis) {
    case AUTOTUNE_PARAM_FUSION: return (double)p->fusion_threshold;
    case AUTOTUNE_PARAM_CYCLE: return p->cycle_time_ms;
    default: return (double)p->chunk_bytes;
    }
}

static void autotune_params_set(struct autotune_params *p, int axis, double value)
{
    switch (axis) {
    case AUTOTUNE_PARAM_FUSION: p->fusion_threshold = (size_t)value; break;
    case AUTOTUNE_PARAM_CYCLE: p->cycle_time_ms = value; break;
    default: p->chunk_bytes = (size_t)value; break;
    }
}

/* Relative comparison: a cycle time read from the environment ("3.5") should
 * match the table's 3.5 even if it went through a different conversion. */
static bool autotune_values_equal(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

static int autotune_compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of values[0..count); sorts values in place. */
static double autotune_median(double *values, int count)
{
    qsort(values, (size_t)count, sizeof(*values), autotune_compare_doubles);
    if (count % 2) return values[count / 2];
    return 0.5 * (values[count / 2 - 1] + values[count / 2]);
}

/* A write error (disk full, file removed under NFS) must not stop training:
 * warn once and stop logging. */
static void autotune_log_check(struct autotune *at)
{
    if (fflush(at->log) == 0 && !ferror(at->log)) return;
    log_warn("autotune: writing the log %s failed (%s); logging stops, tuning goes on", at->log_path, strerror(errno));
    fclose(at->log);
    at->log = NULL;
}

/*
 * One CSV row. Columns: sample (1-based sample number; candidate and winner
 * rows repeat the number of the last sample taken), phase (warmup | sample |
 * candidate | winner), the settings, bytes and seconds (the sample's, or the
 * candidate's scored totals), score (bytes/s; the median for candidate rows)
 * and kept (sample: scored, not discarded; candidate: became the best so far;
 * winner: 1). have_measure false leaves bytes, seconds and score empty (a
 * winner nothing was measured for, when every parameter is fixed).
 */
static void autotune_log_row(struct autotune *at, const char *phase, const struct autotune_params *p, bool have_measure,
                             uint64_t bytes, double seconds, double score, bool kept)
{
    if (!at->log) return;
    fprintf(at->log, "%ld,%s,%zu,%.6g,%zu,", at->sample_number, phase, p->fusion_threshold, p->cycle_time_ms,
            p->chunk_bytes);
    if (have_measure)
        fprintf(at->log, "%llu,%.9g,%.9g,", (unsigned long long)bytes, seconds, score);
    else
        fputs(",,,", at->log);
    fprintf(at->log, "%d\n", kept ? 1 : 0);
    /* Flushed per row so the log can be followed while the job runs. */
    autotune_log_check(at);
}

/* Start measuring the settings in at->current from scratch. */
static void autotune_candidate_begin(struct autotune *at)
{
    at->warmup_left = at->warmup_samples;
    at->scored_count = 0;
    at->candidate_bytes = 0;
    at->candidate_seconds = 0;
    at->step_count = 0;
    at->step_bytes = 0;
    at->step_seconds = 0;
}

/* Move to the next point worth measuring: the next value of the current
 * axis, or the first value of the next free axis, with the other
 * parameters at the best so far. Returns false when the search is over. */
static bool autotune_advance(struct autotune *at)
{
    if (at->axis == AUTOTUNE_AXIS_BASELINE) {
        at->axis = 0;
        at->value_index = 0;
        at->sweep_origin = at->best;
    } else {
        at->value_index++;
    }
    while (at->axis < AUTOTUNE_PARAM_COUNT) {
        const struct autotune_axis *axis = &autotune_axes[at->axis];
        if ((at->fixed & axis->fix_bit) || at->value_index >= axis->value_count) {
            at->axis++;
            at->value_index = 0;
            at->sweep_origin = at->best;
            continue;
        }
        double value = axis->values[at->value_index];
        if (autotune_values_equal(value, autotune_params_get(&at->sweep_origin, at->axis))) {
            at->value_index++;
            continue;
        }
        at->current = at->best;
        autotune_params_set(&at->current, at->axis, value);
        return true;
    }
    return false;
}

static void autotune_finish(struct autotune *at)
{
    at->finished = true;
    at->current = at->best;
    autotune_log_row(at, "winner", &at->best, at->have_best, at->best_bytes, at->best_seconds, at->best_score, true);
    if (at->have_best)
        log_info("autotune: done after %ld samples (%d candidates): fusion threshold %zu B, cycle time %g ms, "
                 "chunk %zu B at %.3f GB/s",
                 at->sample_number, at->candidate_count, at->best.fusion_threshold, at->best.cycle_time_ms,
                 at->best.chunk_bytes, at->best_score * 1e-9);
}

hora_status_t autotune_init(struct autotune **at_out, const struct autotune_config *cfg)
{
    hora_status_t status;

    if (!at_out || !cfg) return status_fail(HORA_ERR_INVALID_ARG, "autotune_init: NULL argument");

    struct autotune *at = calloc(1, sizeof(*at));
    if (!at) return status_fail(HORA_ERR_NO_MEMORY, "autotune: out of memory");
    *at = (struct autotune){
        .current = cfg->initial,
        .best = cfg->initial,
        .fixed = cfg->fixed & (AUTOTUNE_FIX_FUSION | AUTOTUNE_FIX_CYCLE | AUTOTUNE_FIX_CHUNK),
        .warmup_samples = cfg->warmup_samples > 0 ? cfg->warmup_samples : AUTOTUNE_DEFAULT_WARMUP,
        .samples_per_candidate = cfg->samples_per_candidate > 0 ? cfg->samples_per_candidate : AUTOTUNE_DEFAULT_SAMPLES,
        .steps_per_sample = cfg->steps_per_sample > 0 ? cfg->steps_per_sample : AUTOTUNE_DEFAULT_STEPS,
        .axis = AUTOTUNE_AXIS_BASELINE,
    };
    at->scores = calloc((size_t)at->samples_per_candidate, sizeof(*at->scores));
    if (!at->scores) {
        status = status_fail(HORA_ERR_NO_MEMORY, "autotune: out of memory for %d samples per candidate",
                             at->samples_per_candidate);
        goto err_free_at;
    }

    /* An empty path counts as none: HORA_AUTOTUNE_LOG= should not fail. */
    if (cfg->log_path && cfg->log_path[0]) {
        size_t len = strlen(cfg->log_path);
        at->log_path = malloc(len + 1);
        if (!at->log_path) {
            status = status_fail(HORA_ERR_NO_MEMORY, "autotune: out of memory");
            goto err_free_scores;
        }
        memcpy(at->log_path, cfg->log_path, len + 1);
        at->log = fopen(at->log_path, "w");
        if (!at->log) {
            status =
                status_fail(HORA_ERR_SYSTEM, "autotune: cannot open the log %s: %s", at->log_path, strerror(errno));
            goto err_free_path;
        }
        fputs("sample,phase,fusion_threshold,cycle_time_ms,chunk_bytes,bytes,seconds,score_bytes_per_s,kept\n",
              at->log);
        autotune_log_check(at);
    }

    autotune_candidate_begin(at);
    at->candidate_count = 1;
    unsigned all = AUTOTUNE_FIX_FUSION | AUTOTUNE_FIX_CYCLE | AUTOTUNE_FIX_CHUNK;
    if (at->fixed == all) {
        /* Nothing to search; a winner row still closes the log. */
        log_info("autotune: every parameter is fixed by its variable; nothing to tune");
        at->candidate_count = 0;
        autotune_finish(at);
    } else {
        log_info("autotune: tuning%s%s%s, %d work cycles per candidate",
                 (at->fixed & AUTOTUNE_FIX_FUSION) ? "" : " fusion threshold",
                 (at->fixed & AUTOTUNE_FIX_CYCLE) ? "" : " cycle time",
                 (at->fixed & AUTOTUNE_FIX_CHUNK) ? "" : " chunk size",
                 (at->warmup_samples + at->samples_per_candidate) * at->steps_per_sample);
    }
    *at_out = at;
    return HORA_OK;

err_free_path:
    free(at->log_path);
err_free_scores:
    free(at->scores);
err_free_at:
    free(at);
    return status;
}

void autotune_free(struct autotune *at)
{
    if (!at) return;
    if (at->log) fclose(at->log);
    free(at->log_path);
    free(at->scores);
    free(at);
}

/* The candidate in force has all its samples: score it, then pick the next. */
static bool autotune_candidate_end(struct autotune *at, struct autotune_params *next)
{
    double score = autotune_median(at->scores, at->scored_count);
    /* Strictly better only: on a tie the incumbent stays, and the search
     * does not wander between equivalent settings. */
    bool kept = !at->have_best || score > at->best_score;
    if (kept) {
        at->best = at->current;
        at->best_score = score;
        at->best_bytes = at->candidate_bytes;
        at->best_seconds = at->candidate_seconds;
        at->have_best = true;
    }
    autotune_log_row(at, "candidate", &at->current, true, at->candidate_bytes, at->candidate_seconds, score, kept);
    log_debug("autotune: fusion %zu B, cycle %g ms, chunk %zu B: %.3f GB/s%s", at->current.fusion_threshold,
              at->current.cycle_time_ms, at->current.chunk_bytes, score * 1e-9, kept ? " (best so far)" : "");

    if (autotune_advance(at)) {
        at->candidate_count++;
        autotune_candidate_begin(at);
    } else {
        autotune_finish(at);
    }
    *next = at->current;
    return true;
}

bool autotune_record(struct autotune *at, uint64_t bytes, double seconds, struct autotune_params *next)
{
    if (at->finished) return false;
    /* An idle cycle moved nothing and says nothing about the settings; a
     * clock that went backwards says nothing either. */
    if (bytes == 0 || !(seconds > 0) || !isfinite(seconds)) return false;

    at->step_bytes += bytes;
    at->step_seconds += seconds;
    if (++at->step_count < at->steps_per_sample) return false;

    uint64_t sample_bytes = at->step_bytes;
    double sample_seconds = at->step_seconds;
    double score = (double)sample_bytes / sample_seconds;
    at->step_count = 0;
    at->step_bytes = 0;
    at->step_seconds = 0;
    at->sample_number++;

    if (at->warmup_left > 0) {
        at->warmup_left--;
        autotune_log_row(at, "warmup", &at->current, true, sample_bytes, sample_seconds, score, false);
        return false;
    }
    autotune_log_row(at, "sample", &at->current, true, sample_bytes, sample_seconds, score, true);
    at->scores[at->scored_count++] = score;
    at->candidate_bytes += sample_bytes;
    at->candidate_seconds += sample_seconds;
    if (at->scored_count < at->samples_per_candidate) return false;
    return autotune_candidate_end(at, next);
}

bool autotune_finished(const struct autotune *at) { return at->finished; }

struct autotune_params autotune_best(const struct autotune *at) { return at->best; }
