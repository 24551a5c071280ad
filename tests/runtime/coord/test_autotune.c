/*
 * test_autotune.c - the online tuner against a synthetic throughput model:
 * convergence to the model's known best for every free parameter, fixed
 * parameters never moving, warm-up samples discarded, the CSV log's rows,
 * ignored idle measurements, and a tuner that stays put once finished.
 * Run: test_autotune   (exit 0 = all passed)
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r, getpid */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coord/autotune.h"
#include "hora.h"
#include "base/log.h"

#include "check.h"
#include "file.h"

#define MIB ((size_t)1 << 20)
#define KIB ((size_t)1 << 10)
#define BYTES_PER_CYCLE ((uint64_t)8 << 20)
#define PEAK_BYTES_PER_S 10e9

/* The tuner's candidate lists, repeated here so the test states what it expects. */
static const size_t fusion_values[] = {0, 1 * MIB, 4 * MIB, 16 * MIB, 32 * MIB, 64 * MIB, 128 * MIB};
static const double cycle_values[] = {0.5, 1, 2, 3.5, 5, 10};
static const size_t chunk_values[] = {64 * KIB, 128 * KIB, 256 * KIB, 512 * KIB, 1 * MIB, 2 * MIB};
#define COUNT_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/*
 * Throughput model: a product of one factor per parameter, each 1 at the
 * optimum and falling with the squared log-distance from it, so the
 * optimum is unique, separable (coordinate descent must find it) and the
 * nearest candidate is at least ~3% worse - more than the +-1% noise.
 * Fusion is shifted by 64 KiB so that 0 has a logarithm.
 */
struct model {
    struct autotune_params best;
};

static double model_factor(double x, double best)
{
    double d = log2(x / best);
    return 1.0 / (1.0 + 0.1 * d * d);
}

static double model_throughput(const struct model *m, const struct autotune_params *p)
{
    double shift = 64.0 * KIB;
    return PEAK_BYTES_PER_S *
           model_factor((double)p->fusion_threshold + shift, (double)m->best.fusion_threshold + shift) *
           model_factor(p->cycle_time_ms, m->best.cycle_time_ms) *
           model_factor((double)p->chunk_bytes, (double)m->best.chunk_bytes);
}

/* Deterministic noise in [-1%, +1%]: xorshift64. */
static double noise_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return ((double)(x >> 11) / (double)(UINT64_C(1) << 53) * 2.0 - 1.0) * 0.01;
}

/* What a disturbance does to one cycle's seconds. */
enum outlier {
    OUTLIER_NONE = 0,
    OUTLIER_WARMUP_FAST, /* the first warm-up samples of every fusion=0 candidate look 1000x faster */
    OUTLIER_ONE_SLOW,    /* the target's 2nd scored sample looks 100x slower */
};

struct sim {
    const struct model *model;
    struct autotune_params cur; /* settings the simulated coordinator has in force */
    unsigned fixed;
    struct autotune_params initial;
    uint64_t noise;
    enum outlier outlier;
    int steps, warmup, samples; /* effective counts, for the outlier placement */
    int pollute;                /* interleave ignored measurements before every valid one */
    long valid_calls;           /* measurements fed that count */
    long cycles_since_switch;
    long finish_call; /* valid_calls at the call that finished, or -1 */
    int switches;
    long trace_call[64]; /* valid_calls at each switch, and the settings switched to */
    struct autotune_params trace[64];
};

static bool params_equal(const struct autotune_params *a, const struct autotune_params *b)
{
    return a->fusion_threshold == b->fusion_threshold && a->cycle_time_ms == b->cycle_time_ms &&
           a->chunk_bytes == b->chunk_bytes;
}

static void check_fixed(const struct sim *s, const struct autotune_params *p, const char *what)
{
    if (s->fixed & AUTOTUNE_FIX_FUSION)
        CHECK(p->fusion_threshold == s->initial.fusion_threshold, "%s: fixed fusion moved to %zu", what,
              p->fusion_threshold);
    if (s->fixed & AUTOTUNE_FIX_CYCLE)
        CHECK(p->cycle_time_ms == s->initial.cycle_time_ms, "%s: fixed cycle moved to %g", what, p->cycle_time_ms);
    if (s->fixed & AUTOTUNE_FIX_CHUNK)
        CHECK(p->chunk_bytes == s->initial.chunk_bytes, "%s: fixed chunk moved to %zu", what, p->chunk_bytes);
}

/* Measurements a coordinator may report that must change nothing. */
static void feed_ignored(struct autotune *at, struct sim *s)
{
    static const struct {
        uint64_t bytes;
        double seconds;
    } bad[] = {
        {0, 1e-3},
        {0, 0},
        {BYTES_PER_CYCLE, 0},
        {BYTES_PER_CYCLE, -1e-3},
        {BYTES_PER_CYCLE, NAN},
        {BYTES_PER_CYCLE, INFINITY},
        {0, 1e9},
    };
    for (int i = 0; i < COUNT_OF(bad); i++) {
        struct autotune_params next = {.fusion_threshold = 12345, .cycle_time_ms = -7, .chunk_bytes = 54321};
        bool changed = autotune_record(at, bad[i].bytes, bad[i].seconds, &next);
        CHECK(!changed, "ignored measurement %d (bytes %llu, seconds %g) changed settings", i,
              (unsigned long long)bad[i].bytes, bad[i].seconds);
        CHECK(next.fusion_threshold == 12345 && next.chunk_bytes == 54321, "ignored measurement wrote *next");
    }
    (void)s;
}

static double sim_seconds(struct sim *s)
{
    double seconds = (double)BYTES_PER_CYCLE / (model_throughput(s->model, &s->cur) * (1.0 + noise_next(&s->noise)));
    long sample_in_candidate = s->cycles_since_switch / s->steps; /* 0-based, warm-up included */
    switch (s->outlier) {
    case OUTLIER_NONE: break;
    case OUTLIER_WARMUP_FAST:
        if (s->cur.fusion_threshold == 0 && sample_in_candidate < s->warmup) seconds /= 1000.0;
        break;
    case OUTLIER_ONE_SLOW:
        if (params_equal(&s->cur, &s->model->best) && sample_in_candidate == s->warmup + 1) seconds *= 100.0;
        break;
    }
    return seconds;
}

/* Feed cycles until the tuner finishes or max_calls have been fed in all;
 * a second call resumes where the first stopped. */
static void sim_run(struct autotune *at, struct sim *s, long max_calls)
{
    s->finish_call = autotune_finished(at) ? 0 : -1;
    while (s->valid_calls < max_calls && s->finish_call < 0) {
        if (s->pollute) feed_ignored(at, s);
        struct autotune_params next = {0};
        double seconds = sim_seconds(s);
        s->valid_calls++;
        s->cycles_since_switch++;
        if (!autotune_record(at, BYTES_PER_CYCLE, seconds, &next)) continue;
        check_fixed(s, &next, "next");
        if (s->switches < COUNT_OF(s->trace)) {
            s->trace_call[s->switches] = s->valid_calls;
            s->trace[s->switches] = next;
        }
        s->switches++;
        s->cur = next;
        s->cycles_since_switch = 0;
        if (autotune_finished(at)) s->finish_call = s->valid_calls;
    }
}

static struct autotune *make(const struct autotune_params *initial, unsigned fixed, const char *log_path, int warmup,
                             int samples, int steps)
{
    struct autotune *at = NULL;
    struct autotune_config cfg = {
        .initial = *initial,
        .fixed = fixed,
        .log_path = log_path,
        .warmup_samples = warmup,
        .samples_per_candidate = samples,
        .steps_per_sample = steps,
    };
    hora_status_t status = autotune_init(&at, &cfg);
    CHECK(status == HORA_OK && at, "autotune_init failed: %s", hora_status_string(status));
    if (!at) exit(1);
    return at;
}

static struct sim sim_new(const struct model *m, const struct autotune_params *initial, unsigned fixed)
{
    return (struct sim){.model = m,
                        .initial = *initial,
                        .cur = *initial,
                        .fixed = fixed,
                        .noise = 0x9e3779b97f4a7c15ull,
                        .steps = 10,
                        .warmup = 1,
                        .samples = 5};
}

/* Defaults (zero counts), every parameter free: the known best, in the
 * exact number of cycles the defaults imply, within the search bound. */
static void test_defaults_converge(void)
{
    struct model m = {.best = {.fusion_threshold = 16 * MIB, .cycle_time_ms = 2, .chunk_bytes = 256 * KIB}};
    struct autotune_params initial = {.fusion_threshold = 64 * MIB, .cycle_time_ms = 5, .chunk_bytes = 512 * KIB};
    struct autotune *at = make(&initial, 0, NULL, 0, 0, 0);
    struct autotune_params before = autotune_best(at);
    CHECK(params_equal(&before, &initial), "best before any sample is not the initial settings");
    struct sim s = sim_new(&m, &initial, 0);
    sim_run(at, &s, 100000);
    struct autotune_params best = autotune_best(at);
    CHECK(autotune_finished(at), "not finished after %ld cycles", s.valid_calls);
    CHECK(params_equal(&best, &m.best), "defaults: best %zu/%g/%zu, expected %zu/%g/%zu", best.fusion_threshold,
          best.cycle_time_ms, best.chunk_bytes, m.best.fusion_threshold, m.best.cycle_time_ms, m.best.chunk_bytes);
    CHECK(params_equal(&s.cur, &m.best), "the final switch is not to the winner");
    /* The initial values are in every list, so each sweep skips one:
     * baseline + 6 + 5 + 5 candidates, 60 cycles each with the defaults. */
    int candidates = 1 + (COUNT_OF(fusion_values) - 1) + (COUNT_OF(cycle_values) - 1) + (COUNT_OF(chunk_values) - 1);
    CHECK(s.finish_call == candidates * (1 + 5) * 10, "finished after %ld cycles, expected %d", s.finish_call,
          candidates * 60);
    CHECK(s.switches == candidates, "%d switches, expected %d (one per candidate after the baseline + the winner)",
          s.switches, candidates);
    autotune_free(at);
}

/* Every optimum in the candidate grid is found, from an initial point that
 * is in none of the lists (so nothing is skipped: 1 + 7 + 6 + 6 candidates). */
static void test_every_optimum(void)
{
    struct autotune_params initial = {.fusion_threshold = 3 * MIB, .cycle_time_ms = 2.7, .chunk_bytes = 100000};
    int wrong = 0, total = 0;
    for (int f = 0; f < COUNT_OF(fusion_values); f++)
        for (int c = 0; c < COUNT_OF(cycle_values); c++)
            for (int k = 0; k < COUNT_OF(chunk_values); k++) {
                struct model m = {.best = {fusion_values[f], cycle_values[c], chunk_values[k]}};
                struct autotune *at = make(&initial, 0, NULL, 1, 3, 4);
                struct sim s = sim_new(&m, &initial, 0);
                s.steps = 4;
                s.samples = 3;
                sim_run(at, &s, 100000);
                struct autotune_params best = autotune_best(at);
                total++;
                if (!params_equal(&best, &m.best) || !autotune_finished(at)) {
                    wrong++;
                    fprintf(stderr, "  optimum %zu/%g/%zu: got %zu/%g/%zu\n", m.best.fusion_threshold,
                            m.best.cycle_time_ms, m.best.chunk_bytes, best.fusion_threshold, best.cycle_time_ms,
                            best.chunk_bytes);
                }
                CHECK(s.switches == 20, "%d switches from an off-list start, expected 20", s.switches);
                CHECK(s.finish_call == 20L * (1 + 3) * 4, "finished after %ld cycles, expected %d", s.finish_call,
                      20 * 16);
                autotune_free(at);
            }
    CHECK(wrong == 0, "%d of %d optima missed", wrong, total);
}

/* Every non-empty fixed mask: fixed parameters keep their (off-list)
 * initial values in every switch and in best(); free ones reach the
 * model's best given the fixed ones. */
static void test_fixed(void)
{
    struct model m = {.best = {.fusion_threshold = 32 * MIB, .cycle_time_ms = 1, .chunk_bytes = 1 * MIB}};
    struct autotune_params initial = {.fusion_threshold = 3 * MIB, .cycle_time_ms = 2.7, .chunk_bytes = 100000};
    for (unsigned mask = 1; mask < 8; mask++) {
        struct autotune *at = make(&initial, mask, NULL, 1, 3, 2);
        struct sim s = sim_new(&m, &initial, mask);
        s.steps = 2;
        s.samples = 3;
        sim_run(at, &s, 100000);
        struct autotune_params best = autotune_best(at);
        struct autotune_params expect = {
            .fusion_threshold = (mask & AUTOTUNE_FIX_FUSION) ? initial.fusion_threshold : m.best.fusion_threshold,
            .cycle_time_ms = (mask & AUTOTUNE_FIX_CYCLE) ? initial.cycle_time_ms : m.best.cycle_time_ms,
            .chunk_bytes = (mask & AUTOTUNE_FIX_CHUNK) ? initial.chunk_bytes : m.best.chunk_bytes,
        };
        check_fixed(&s, &best, "best");
        CHECK(autotune_finished(at), "mask %u: not finished", mask);
        CHECK(params_equal(&best, &expect), "mask %u: best %zu/%g/%zu, expected %zu/%g/%zu", mask,
              best.fusion_threshold, best.cycle_time_ms, best.chunk_bytes, expect.fusion_threshold,
              expect.cycle_time_ms, expect.chunk_bytes);
        if (mask == 7) {
            /* Nothing to tune: finished from the start, no switch ever. */
            CHECK(s.switches == 0 && s.finish_call == 0, "all fixed: %d switches, finished at %ld", s.switches,
                  s.finish_call);
        }
        autotune_free(at);
    }
}

/* A huge outlier in the warm-up samples after every switch to fusion 0
 * (including the baseline, which starts at 0) would make 0 win with a
 * single scored sample per candidate if warm-up samples counted. */
static void test_warmup_discarded(void)
{
    struct model m = {.best = {.fusion_threshold = 16 * MIB, .cycle_time_ms = 2, .chunk_bytes = 256 * KIB}};
    struct autotune_params initial = {.fusion_threshold = 0, .cycle_time_ms = 5, .chunk_bytes = 512 * KIB};
    for (int warmup = 1; warmup <= 3; warmup++) {
        struct autotune *at = make(&initial, 0, NULL, warmup, 1, 4);
        struct sim s = sim_new(&m, &initial, 0);
        s.steps = 4;
        s.warmup = warmup;
        s.samples = 1;
        s.outlier = OUTLIER_WARMUP_FAST;
        sim_run(at, &s, 100000);
        struct autotune_params best = autotune_best(at);
        CHECK(params_equal(&best, &m.best), "warm-up %d: best %zu/%g/%zu, an outlier in warm-up counted", warmup,
              best.fusion_threshold, best.cycle_time_ms, best.chunk_bytes);
        autotune_free(at);
    }
}

/* The median: one slow sample among the best candidate's five does not lose it. */
static void test_median(void)
{
    struct model m = {.best = {.fusion_threshold = 4 * MIB, .cycle_time_ms = 3.5, .chunk_bytes = 128 * KIB}};
    struct autotune_params initial = {.fusion_threshold = 64 * MIB, .cycle_time_ms = 5, .chunk_bytes = 512 * KIB};
    struct autotune *at = make(&initial, 0, NULL, 1, 5, 3);
    struct sim s = sim_new(&m, &initial, 0);
    s.steps = 3;
    s.outlier = OUTLIER_ONE_SLOW;
    sim_run(at, &s, 100000);
    struct autotune_params best = autotune_best(at);
    CHECK(params_equal(&best, &m.best), "median: best %zu/%g/%zu, one slow sample decided", best.fusion_threshold,
          best.cycle_time_ms, best.chunk_bytes);
    autotune_free(at);
}

/* Idle and nonsense measurements interleaved everywhere change nothing:
 * the same switches at the same cycles as a clean run. */
static void test_ignored(void)
{
    struct model m = {.best = {.fusion_threshold = 128 * MIB, .cycle_time_ms = 0.5, .chunk_bytes = 2 * MIB}};
    struct autotune_params initial = {.fusion_threshold = 1 * MIB, .cycle_time_ms = 10, .chunk_bytes = 64 * KIB};
    struct autotune *clean_at = make(&initial, 0, NULL, 2, 3, 5);
    struct autotune *dirty_at = make(&initial, 0, NULL, 2, 3, 5);
    struct sim clean = sim_new(&m, &initial, 0), dirty = sim_new(&m, &initial, 0);
    clean.steps = dirty.steps = 5;
    dirty.pollute = 1;
    sim_run(clean_at, &clean, 100000);
    sim_run(dirty_at, &dirty, 100000);
    CHECK(clean.switches == dirty.switches && clean.finish_call == dirty.finish_call,
          "ignored measurements changed the run: %d vs %d switches, finished at %ld vs %ld", clean.switches,
          dirty.switches, clean.finish_call, dirty.finish_call);
    int n = clean.switches < COUNT_OF(clean.trace) ? clean.switches : COUNT_OF(clean.trace);
    for (int i = 0; i < n; i++)
        CHECK(clean.trace_call[i] == dirty.trace_call[i] && params_equal(&clean.trace[i], &dirty.trace[i]),
              "switch %d differs with ignored measurements", i);
    struct autotune_params best = autotune_best(dirty_at);
    CHECK(params_equal(&best, &m.best), "polluted run: best %zu/%g/%zu", best.fusion_threshold, best.cycle_time_ms,
          best.chunk_bytes);
    autotune_free(clean_at);
    autotune_free(dirty_at);
}

/* Once finished: false forever, *next untouched, best() stable. */
static void test_after_finish(void)
{
    struct model m = {.best = {.fusion_threshold = 0, .cycle_time_ms = 10, .chunk_bytes = 64 * KIB}};
    struct autotune_params initial = {.fusion_threshold = 64 * MIB, .cycle_time_ms = 5, .chunk_bytes = 512 * KIB};
    struct autotune *at = make(&initial, 0, NULL, 1, 2, 2);
    struct sim s = sim_new(&m, &initial, 0);
    s.steps = 2;
    s.samples = 2;
    sim_run(at, &s, 100000);
    CHECK(autotune_finished(at), "not finished");
    struct autotune_params best = autotune_best(at);
    CHECK(params_equal(&best, &m.best), "after-finish model: best %zu/%g/%zu", best.fusion_threshold,
          best.cycle_time_ms, best.chunk_bytes);
    int changed = 0;
    uint64_t noise = 1;
    for (int i = 0; i < 100000; i++) {
        struct autotune_params next = {.fusion_threshold = 777, .cycle_time_ms = 7, .chunk_bytes = 777};
        /* Wildly better and worse throughputs alike. */
        double seconds = 1e-3 * pow(10.0, 300.0 * noise_next(&noise));
        if (autotune_record(at, BYTES_PER_CYCLE, seconds, &next)) changed++;
        if (next.fusion_threshold != 777 || next.chunk_bytes != 777) changed++;
    }
    struct autotune_params after = autotune_best(at);
    CHECK(changed == 0, "%d calls after finishing changed something", changed);
    CHECK(params_equal(&after, &best), "best() moved after finishing");
    CHECK(autotune_finished(at), "no longer finished");
    autotune_free(at);
}

static int count_lines(const char *text)
{
    int lines = 0;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    return lines;
}

/* The CSV log: header; one row per sample (warm-up ones kept=0, numbered
 * 1..N); one candidate row per candidate; exactly one winner row, last,
 * naming best(); flushed while running. */
static void test_log(void)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/test_autotune_%d.csv", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    struct model m = {.best = {.fusion_threshold = 16 * MIB, .cycle_time_ms = 2, .chunk_bytes = 256 * KIB}};
    struct autotune_params initial = {.fusion_threshold = 0, .cycle_time_ms = 5, .chunk_bytes = 512 * KIB};
    const int warmup = 2, samples = 3, steps = 2;
    struct autotune *at = make(&initial, AUTOTUNE_FIX_CHUNK, path, warmup, samples, steps);
    struct sim s = sim_new(&m, &initial, AUTOTUNE_FIX_CHUNK);
    s.steps = steps;
    s.warmup = warmup;
    s.samples = samples;
    s.outlier = OUTLIER_WARMUP_FAST;

    /* Flushed per row: after one sample's cycles the file has header + 1 row. */
    sim_run(at, &s, steps);
    char *text = test_read_file(path, NULL);
    CHECK(text && count_lines(text) == 2, "log not flushed after the first sample: %d lines",
          text ? count_lines(text) : -1);
    free(text);
    sim_run(at, &s, 100000); /* resumes: valid_calls carries on */
    struct autotune_params best = autotune_best(at);
    autotune_free(at);

    text = test_read_file(path, NULL);
    CHECK(text != NULL, "cannot read the log %s", path);
    if (!text) return;
    const char *header =
        "sample,phase,fusion_threshold,cycle_time_ms,chunk_bytes,bytes,seconds,score_bytes_per_s,kept\n";
    CHECK(!strncmp(text, header, strlen(header)), "bad header");

    int candidates = s.switches; /* one switch after every candidate, the winner's included */
    int warmup_rows = 0, sample_rows = 0, candidate_rows = 0, winner_rows = 0, bad_rows = 0, after_winner = 0;
    long last_number = 0;
    char *save = NULL;
    char *line = strtok_r(text + strlen(header), "\n", &save);
    for (; line; line = strtok_r(NULL, "\n", &save)) {
        int commas = 0;
        for (const char *p = line; *p; p++) commas += *p == ',';
        long number = 0;
        char phase[16] = "";
        size_t fusion = 0, chunk = 0;
        double cycle = 0, seconds = 0, score = 0;
        unsigned long long bytes = 0;
        int kept = -1;
        int fields = sscanf(line, "%ld,%15[a-z],%zu,%lf,%zu,%llu,%lf,%lf,%d", &number, phase, &fusion, &cycle, &chunk,
                            &bytes, &seconds, &score, &kept);
        if (commas != 8 || fields != 9) {
            bad_rows++;
            fprintf(stderr, "  bad row: %s\n", line);
            continue;
        }
        if (winner_rows) after_winner++;
        CHECK(chunk == initial.chunk_bytes, "fixed chunk logged as %zu", chunk);
        if (!strcmp(phase, "warmup") || !strcmp(phase, "sample")) {
            CHECK(number == last_number + 1, "sample rows not numbered 1..N: %ld after %ld", number, last_number);
            last_number = number;
            CHECK(fabs(score - (double)bytes / seconds) <= 1e-6 * score, "sample score is not bytes/seconds");
            CHECK(bytes == (unsigned long long)steps * BYTES_PER_CYCLE, "sample of %llu bytes, not %d cycles", bytes,
                  steps);
            if (!strcmp(phase, "warmup")) {
                warmup_rows++;
                CHECK(kept == 0, "warm-up row kept");
            } else {
                sample_rows++;
                CHECK(kept == 1, "sample row not kept");
                CHECK(score < 10 * PEAK_BYTES_PER_S, "an outlier was scored: %g B/s", score);
            }
        } else if (!strcmp(phase, "candidate")) {
            candidate_rows++;
            CHECK(number == last_number, "candidate row numbered %ld after sample %ld", number, last_number);
        } else if (!strcmp(phase, "winner")) {
            winner_rows++;
            CHECK(fusion == best.fusion_threshold && cycle == best.cycle_time_ms && chunk == best.chunk_bytes,
                  "winner row %zu/%g/%zu is not best() %zu/%g/%zu", fusion, cycle, chunk, best.fusion_threshold,
                  best.cycle_time_ms, best.chunk_bytes);
            CHECK(kept == 1, "winner row not kept");
        } else {
            bad_rows++;
        }
    }
    CHECK(bad_rows == 0, "%d malformed rows", bad_rows);
    CHECK(warmup_rows == candidates * warmup, "%d warm-up rows, expected %d", warmup_rows, candidates * warmup);
    CHECK(sample_rows == candidates * samples, "%d sample rows, expected %d", sample_rows, candidates * samples);
    CHECK(candidate_rows == candidates, "%d candidate rows, expected %d", candidate_rows, candidates);
    CHECK(winner_rows == 1, "%d winner rows", winner_rows);
    CHECK(after_winner == 0, "%d rows after the winner", after_winner);
    CHECK(s.valid_calls == (long)candidates * (warmup + samples) * steps, "%ld cycles for %d candidates", s.valid_calls,
          candidates);
    free(text);
    remove(path);
}

/* A log that cannot be opened is HORA_ERR_SYSTEM naming the path; an
 * empty path means no log; free(NULL) is fine. */
static void test_init_errors(void)
{
    struct autotune_params initial = {.fusion_threshold = 64 * MIB, .cycle_time_ms = 5, .chunk_bytes = 512 * KIB};
    const char *bad = "/nonexistent-hora-dir/autotune.csv";
    struct autotune *at = NULL;
    struct autotune_config cfg = {.initial = initial, .log_path = bad};
    fprintf(stderr, "(an error about %s is expected next)\n", bad);
    hora_status_t status = autotune_init(&at, &cfg);
    CHECK(status == HORA_ERR_SYSTEM, "bad log path: %s", hora_status_string(status));
    CHECK(at == NULL, "*at set on failure");
    CHECK(strstr(hora_last_error(), bad) != NULL, "message does not name the path: %s", hora_last_error());

    cfg.log_path = "";
    status = autotune_init(&at, &cfg);
    CHECK(status == HORA_OK && at, "empty log path: %s", hora_status_string(status));
    autotune_free(at);
    autotune_free(NULL);
}

int main(void)
{
    log_set_level(LOG_LEVEL_WARN);
    test_defaults_converge();
    test_every_optimum();
    test_fixed();
    test_warmup_discarded();
    test_median();
    test_ignored();
    test_after_finish();
    test_log();
    test_init_errors();
    printf("test_autotune: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
