/* straggler.c - rank 0's straggler report (straggler.h explains the
 * method). Everything is allocated at init: the per-cycle work is a few
 * loads and stores per rank. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/status.h"
#include "coord/straggler.h"
#include "coord/timeline.h"

/* Per report period, the lags of the cycles whose last rank it was; more
 * cycles still count, their lag is not sampled. */
#define STRAGGLER_SAMPLES 8192

struct straggler {
    int rank, size, slot_word;
    int64_t period_us;
    int64_t latest_enqueue_us; /* of the requests this cycle ran; 0: none */
    /* rank 0 */
    int64_t period_start_us;
    int64_t cycles;
    int64_t *last_count; /* [size] */
    uint32_t *age_us;    /* [size] this cycle's ages */
    int32_t *sample_rank;
    uint32_t *sample_lag_us;
    uint32_t *scratch; /* [max(size, STRAGGLER_SAMPLES)] for medians */
    int nsamples;
    pthread_mutex_t lock; /* the report */
    int report_rank;
    double report_fraction, report_lag_ms;
    int64_t report_cycles;
};

int straggler_words(const struct config *cfg, int size)
{
    if (cfg->straggler_s <= 0 || size < 2 || size > STRAGGLER_MAX_RANKS) return 0;
    return (size + 1) / 2;
}

hora_status_t straggler_init(struct straggler **out, const struct config *cfg, int rank, int size, int slot_word)
{
    struct straggler *s = calloc(1, sizeof(*s));
    if (!s) return status_fail(HORA_ERR_NO_MEMORY, "out of memory for the straggler report");
    s->rank = rank;
    s->size = size;
    s->slot_word = slot_word;
    s->period_us = (int64_t)(cfg->straggler_s * 1e6);
    s->report_rank = -1;
    pthread_mutex_init(&s->lock, NULL);
    if (rank == 0) {
        const size_t n = (size_t)size > STRAGGLER_SAMPLES ? (size_t)size : STRAGGLER_SAMPLES;
        s->last_count = calloc((size_t)size, sizeof(*s->last_count));
        s->age_us = calloc((size_t)size, sizeof(*s->age_us));
        s->sample_rank = calloc(STRAGGLER_SAMPLES, sizeof(*s->sample_rank));
        s->sample_lag_us = calloc(STRAGGLER_SAMPLES, sizeof(*s->sample_lag_us));
        s->scratch = calloc(n, sizeof(*s->scratch));
        if (!s->last_count || !s->age_us || !s->sample_rank || !s->sample_lag_us || !s->scratch) {
            straggler_free(s);
            return status_fail(HORA_ERR_NO_MEMORY, "out of memory for the straggler report");
        }
    }
    *out = s;
    return HORA_OK;
}

void straggler_free(struct straggler *s)
{
    if (!s) return;
    pthread_mutex_destroy(&s->lock);
    free(s->last_count);
    free(s->age_us);
    free(s->sample_rank);
    free(s->sample_lag_us);
    free(s->scratch);
    free(s);
}

void straggler_note(struct straggler *s, int64_t enqueue_us)
{
    if (s && enqueue_us > s->latest_enqueue_us) s->latest_enqueue_us = enqueue_us;
}

void straggler_fill(struct straggler *s, uint64_t *vec, int64_t last_sync_us)
{
    if (!s) return;
    uint32_t value = 0;
    if (s->latest_enqueue_us) {
        int64_t age = last_sync_us - s->latest_enqueue_us;
        if (age < 0) age = 0;
        value = age >= (int64_t)UINT32_MAX - 1 ? UINT32_MAX : (uint32_t)age + 1;
        s->latest_enqueue_us = 0;
    }
    /* Two 32-bit slots per word; every rank lays them out alike. */
    uint64_t *word = &vec[s->slot_word + s->rank / 2];
    *word |= (uint64_t)value << (32 * (s->rank % 2));
}

static int straggler_cmp_u32(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t straggler_median(uint32_t *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), straggler_cmp_u32);
    return n % 2 ? v[n / 2] : (uint32_t)(((uint64_t)v[n / 2 - 1] + v[n / 2]) / 2);
}

static void straggler_report(struct straggler *s, struct timeline *tl)
{
    int top = 0;
    for (int r = 1; r < s->size; r++)
        if (s->last_count[r] > s->last_count[top]) top = r;
    const double fraction = (double)s->last_count[top] / (double)s->cycles;
    int n = 0;
    for (int i = 0; i < s->nsamples; i++)
        if (s->sample_rank[i] == top) s->scratch[n++] = s->sample_lag_us[i];
    const double lag_ms = n ? straggler_median(s->scratch, n) * 1e-3 : 0;
    /* Consistently last: in at least half the cycles, and clearly more
     * often than chance (1 / size) would make it. */
    const int named = fraction >= 0.5 && fraction * s->size >= 1.5;
    if (named)
        log_warn("stragglers: rank %d last in %.0f%% of %lld cycles, median %.3g ms after the others "
                 "(HORA_STRAGGLER_S)",
                 top, fraction * 100, (long long)s->cycles, lag_ms);
    else
        log_info("stragglers: none (most often last: rank %d in %.0f%% of %lld cycles, median %.3g ms)", top,
                 fraction * 100, (long long)s->cycles, lag_ms);
    if (tl) {
        char args[192];
        snprintf(args, sizeof(args),
                 "{\"rank\":%d,\"last_fraction\":%.4f,\"cycles\":%lld,\"median_lag_ms\":%.4f,\"straggler\":%s}", top,
                 fraction, (long long)s->cycles, lag_ms, named ? "true" : "false");
        timeline_instant(tl, "stragglers", "STRAGGLER", -1, args);
    }
    pthread_mutex_lock(&s->lock);
    s->report_rank = named ? top : -1;
    s->report_fraction = fraction;
    s->report_lag_ms = lag_ms;
    s->report_cycles = s->cycles;
    pthread_mutex_unlock(&s->lock);
}

void straggler_collect(struct straggler *s, const uint64_t *vec, int64_t now_us, struct timeline *tl)
{
    if (!s || s->rank != 0) return;
    if (!s->period_start_us) s->period_start_us = now_us;
    int last = -1, valid = 0;
    for (int r = 0; r < s->size; r++) {
        const uint32_t v = (uint32_t)(vec[s->slot_word + r / 2] >> (32 * (r % 2)));
        s->age_us[r] = v;
        if (!v) continue; /* ran nothing (or has joined) */
        valid++;
        if (last < 0 || v < s->age_us[last]) last = r;
    }
    if (valid >= 2) {
        int n = 0;
        for (int r = 0; r < s->size; r++)
            if (r != last && s->age_us[r]) s->scratch[n++] = s->age_us[r];
        const uint32_t lag = straggler_median(s->scratch, n) - s->age_us[last];
        s->cycles++;
        s->last_count[last]++;
        if (s->nsamples < STRAGGLER_SAMPLES) {
            s->sample_rank[s->nsamples] = last;
            s->sample_lag_us[s->nsamples++] = lag;
        }
    }
    if (now_us - s->period_start_us < s->period_us) return;
    if (s->cycles) straggler_report(s, tl);
    s->period_start_us = now_us;
    s->cycles = 0;
    s->nsamples = 0;
    memset(s->last_count, 0, sizeof(*s->last_count) * (size_t)s->size);
}

void straggler_get(struct straggler *s, int *rank, double *last_fraction, double *lag_ms, int64_t *cycles)
{
    *rank = -1;
    *last_fraction = *lag_ms = 0;
    *cycles = 0;
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    *rank = s->report_rank;
    *last_fraction = s->report_fraction;
    *lag_ms = s->report_lag_ms;
    *cycles = s->report_cycles;
    pthread_mutex_unlock(&s->lock);
}
