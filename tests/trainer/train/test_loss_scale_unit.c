/*
 * test_loss_scale_unit.c - the loss scaler (trainer/core/loss_scale.h) step by
 * step, against a model of its rules kept here: dynamic scaling halves and
 * skips on an overflow, doubles after `window` clean steps in a row (the
 * count restarting after every overflow), counts skipped steps, and stops
 * with HORA_ERR_INTERNAL after max_consecutive_skips overflows in a row;
 * static scaling never changes the scale but still skips; NONE never skips
 * and keeps scale 1.
 *
 * usage: test_loss_scale_unit
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "loss_scale.h"

static int failures;

static void expect(int ok, const char *what, int step, double got, double want)
{
    if (!ok) {
        failures++;
        printf("step %3d: %-36s got %.9g want %.9g FAIL\n", step, what, got, want);
    }
}

/* What the scaler must do, written independently of loss_scale.c. */
typedef struct {
    double scale;
    uint64_t clean_in_a_row, skipped, overflows_in_a_row;
} model_t;

/* Returns the expected status; *skip the expected decision. */
static hora_status_t model_update(const tr_loss_scale_config_t *c, model_t *m, int overflow, int *skip)
{
    *skip = 0;
    if (c->mode == TR_LOSS_SCALE_NONE) return HORA_OK;
    if (overflow) {
        *skip = 1;
        m->skipped++;
        m->overflows_in_a_row++;
        m->clean_in_a_row = 0;
        if (c->mode == TR_LOSS_SCALE_DYNAMIC) m->scale /= 2;
        return m->overflows_in_a_row >= (uint64_t)c->max_consecutive_skips ? HORA_ERR_INTERNAL : HORA_OK;
    }
    m->overflows_in_a_row = 0;
    if (c->mode == TR_LOSS_SCALE_DYNAMIC && ++m->clean_in_a_row == c->window) {
        m->scale *= 2;
        m->clean_in_a_row = 0;
    }
    return HORA_OK;
}

/* Feed the pattern ('o' overflow, '.' clean) to the scaler and the model
 * side by side; every step's skip, status, scale and skipped count must
 * agree. Returns the step at which the scaler reported an error (-1: none). */
static int run_pattern(const char *name, const tr_loss_scale_config_t *c, const char *pattern)
{
    tr_loss_scale_state_t s;
    tr_loss_scale_begin(c, &s);
    model_t m = {.scale = c->mode == TR_LOSS_SCALE_NONE ? 1.0 : c->initial};
    int before = failures, stopped = -1;
    expect(s.scale == m.scale, "initial scale", -1, s.scale, m.scale);
    expect(s.skipped_steps == 0, "initial skipped_steps", -1, (double)s.skipped_steps, 0);
    for (int i = 0; pattern[i]; i++) {
        int overflow = pattern[i] == 'o', skip = -1, want_skip;
        hora_status_t want = model_update(c, &m, overflow, &want_skip);
        hora_status_t got = tr_loss_scale_update(c, &s, overflow, &skip);
        expect(got == want, "status", i, got, want);
        expect(skip == want_skip, "skip", i, skip, want_skip);
        expect(s.scale == m.scale, "scale", i, s.scale, m.scale);
        expect(s.skipped_steps == m.skipped, "skipped_steps", i, (double)s.skipped_steps, (double)m.skipped);
        expect(s.consecutive_skips == m.overflows_in_a_row, "consecutive_skips", i, (double)s.consecutive_skips,
               (double)m.overflows_in_a_row);
        if (got != HORA_OK) {
            stopped = i;
            break;
        }
    }
    printf("%-52s final scale %-10g skipped %3" PRIu64 " %s\n", name, s.scale, s.skipped_steps,
           failures == before ? "ok" : "FAIL");
    return stopped;
}

static void check(int ok, const char *what)
{
    printf("%-52s %s\n", what, ok ? "ok" : "FAIL");
    failures += !ok;
}

/* An overflow every step from a fresh state s until tr_loss_scale_update fails (at most limit steps): its status,
 * with the steps taken in *n and the last step's skip flag in *skip. */
static hora_status_t overflow_forever(const tr_loss_scale_config_t *c, tr_loss_scale_state_t *s, int limit, int *n,
                                      int *skip)
{
    tr_loss_scale_begin(c, s);
    hora_status_t status = HORA_OK;
    *skip = 0;
    *n = 0;
    while (status == HORA_OK && *n < limit) {
        status = tr_loss_scale_update(c, s, 1, skip);
        (*n)++;
    }
    return status;
}

int main(void)
{
    /* ---- dynamic, traced by hand: start 2^16, window 3. */
    const tr_loss_scale_config_t dyn = {.mode = TR_LOSS_SCALE_DYNAMIC,
                                        .initial = TR_LOSS_SCALE_DYNAMIC_INITIAL,
                                        .window = 3,
                                        .max_consecutive_skips = 5};
    {
        /* step:        0     1     2      3      4      5      6      7      8      9     10 */
        /* event:       .     .     o      .      .      .      .      o      o      .      . */
        static const char events[] = "..o....oo..";
        static const double want_scale[] = {65536, 65536, 32768, 32768, 32768, 65536,
                                            65536, 32768, 16384, 16384, 16384};
        static const int want_skip[] = {0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0};
        static const uint64_t want_skipped[] = {0, 0, 1, 1, 1, 1, 1, 2, 3, 3, 3};
        tr_loss_scale_state_t s;
        tr_loss_scale_begin(&dyn, &s);
        int before = failures;
        expect(s.scale == 65536, "dynamic begins at 65536", -1, s.scale, 65536);
        for (int i = 0; events[i]; i++) {
            int skip = -1;
            hora_status_t status = tr_loss_scale_update(&dyn, &s, events[i] == 'o', &skip);
            expect(status == HORA_OK, "status", i, status, HORA_OK);
            expect(skip == want_skip[i], "skip", i, skip, want_skip[i]);
            expect(s.scale == want_scale[i], "scale", i, s.scale, want_scale[i]);
            expect(s.skipped_steps == want_skipped[i], "skipped_steps", i, (double)s.skipped_steps,
                   (double)want_skipped[i]);
        }
        /* Two clean steps after the last overflow: the counter holds 2,
         * so one more doubles, not before. Steps 0-1 were clean before the
         * overflow at 2 and must not have counted towards step 5's
         * doubling (that needed 3, 4, 5). */
        int skip;
        tr_loss_scale_update(&dyn, &s, 0, &skip);
        expect(s.scale == 32768, "third clean step after overflows", 11, s.scale, 32768);
        printf("%-52s %s\n", "dynamic: hand-traced sequence, window 3", failures == before ? "ok" : "FAIL");
    }

    /* Many clean steps: doubles exactly every window steps. */
    {
        tr_loss_scale_state_t s;
        tr_loss_scale_begin(&dyn, &s);
        int ok = 1, skip;
        for (int i = 1; i <= 30; i++) {
            tr_loss_scale_update(&dyn, &s, 0, &skip);
            double want = 65536.0 * (double)(1ULL << (i / 3));
            ok &= s.scale == want && skip == 0 && s.skipped_steps == 0;
        }
        check(ok, "dynamic: 30 clean steps double it 10 times");
    }

    /* Overflow with a partly filled window: the count restarts. */
    run_pattern("dynamic: '..o..o...o.......'", &dyn, "..o..o...o.......");
    run_pattern("dynamic: long random-ish pattern", &dyn, "...o.o..oo....ooo.......o...o..oooo.........o.o.o.o.o..");

    /* Consecutive overflows: max_consecutive_skips (5) in a row is an error
     * at exactly the 5th; 4 in a row, then a clean step, are not. */
    {
        int stopped = run_pattern("dynamic: 4 overflows, clean, 4 overflows", &dyn, "oooo.oooo.");
        check(stopped == -1, "dynamic: 4 overflows in a row do not stop the run");
        stopped = run_pattern("dynamic: 5 overflows in a row", &dyn, "..ooooo...");
        check(stopped == 6, "dynamic: the 5th overflow in a row gives HORA_ERR_INTERNAL");
        /* And the state then: halved 5 times from 65536. */
        tr_loss_scale_state_t s;
        int skip, n;
        hora_status_t status = overflow_forever(&dyn, &s, 100, &n, &skip);
        check(status == HORA_ERR_INTERNAL && n == 5 && skip == 1 && s.scale == 65536.0 / 32 && s.skipped_steps == 5,
              "dynamic: overflow forever stops at 5, scale 2048");
    }
    {
        /* The default limit. */
        tr_loss_scale_config_t d = dyn;
        d.max_consecutive_skips = TR_LOSS_SCALE_MAX_SKIPS;
        tr_loss_scale_state_t s;
        int skip, n;
        hora_status_t status = overflow_forever(&d, &s, 1000, &n, &skip);
        check(status == HORA_ERR_INTERNAL && n == TR_LOSS_SCALE_MAX_SKIPS &&
                  s.scale == 65536.0 / (double)(1ULL << TR_LOSS_SCALE_MAX_SKIPS),
              "dynamic: default limit TR_LOSS_SCALE_MAX_SKIPS");
    }

    /* Window 1: every clean step doubles. */
    {
        tr_loss_scale_config_t d = dyn;
        d.window = 1;
        d.initial = 1;
        run_pattern("dynamic window 1: '...o..o'", &d, "...o..o");
    }

    /* ---- static 1024: the scale never moves, overflows still skip. */
    {
        const tr_loss_scale_config_t st = {
            .mode = TR_LOSS_SCALE_STATIC, .initial = 1024, .window = 3, .max_consecutive_skips = 4};
        run_pattern("static 1024: '..o.....oo.o....'", &st, "..o.....oo.o....");
        tr_loss_scale_state_t s;
        tr_loss_scale_begin(&st, &s);
        int ok = 1, skip;
        for (int i = 0; i < 50; i++) {
            hora_status_t status = tr_loss_scale_update(&st, &s, i % 7 == 3, &skip);
            ok &= status == HORA_OK && s.scale == 1024 && skip == (i % 7 == 3);
        }
        check(ok && s.skipped_steps == 7, "static 1024: 50 steps, scale stays 1024, 7 skipped");
        int stopped = run_pattern("static 1024: 4 overflows in a row", &st, ".oooo..");
        check(stopped == 4, "static: the 4th overflow in a row gives HORA_ERR_INTERNAL");
    }

    /* ---- none: scale 1, never skips, never stops, whatever it is told. */
    {
        const tr_loss_scale_config_t none = {
            .mode = TR_LOSS_SCALE_NONE, .initial = 1024, .window = 1, .max_consecutive_skips = 1};
        check(!tr_loss_scale_active(&none), "none: not active");
        tr_loss_scale_state_t s;
        tr_loss_scale_begin(&none, &s);
        int ok = s.scale == 1.0, skip;
        for (int i = 0; i < 20; i++) {
            hora_status_t status = tr_loss_scale_update(&none, &s, i % 2, &skip);
            ok &= status == HORA_OK && skip == 0 && s.scale == 1.0 && s.skipped_steps == 0;
        }
        check(ok, "none: scale 1, 20 steps (10 'overflows'), no skip");
        check(tr_loss_scale_active(&dyn), "dynamic: active");
    }

    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
