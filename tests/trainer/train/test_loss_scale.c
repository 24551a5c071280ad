/*
 * test_loss_scale.c - loss scaling across ranks: an overflow on one rank
 * skips the step on every rank, changes nothing, and moves the scale the
 * same way everywhere; and a static power-of-two scale trains exactly like
 * no scale at all.
 *
 * overflow: a small CIFAR-style ResNet-8 trains for STEPS (--steps) steps with dynamic
 * loss scaling (window WINDOW), in bf16 (bf16 gradients) and in f32 with f16
 * gradients, overlap off and on. The trainer's grad_hook writes +inf, NaN
 * or -inf (the grads arena dtype's bit pattern) into the middle element of
 * a mid-network gradient (a conv weight, a BN gamma, the fc weight) on one
 * rank (the last, or rank 0) just before that gradient's all-reduce, at the
 * steps of `faults`.
 * Every rank must then report exactly those steps as skipped; a skipped
 * step leaves the f32 master weights, the momentum and the low-precision
 * copy bit for bit as they were, and halves the scale; WINDOW clean steps
 * double it (the expected scale is worked out here step by step); the
 * master weights, momentum and copy are the same bits on every rank after
 * every step, and so are the scale and the skip decisions; every other step
 * changes the weights, and the loss on the (fixed) batch goes down.
 *
 * static: the same model, weights and batches, STATIC_STEPS steps without
 * loss scaling and with a static scale of 1024, in f32 and in bf16. Scaling
 * by a power of two is exact in binary floating point (barring overflow and
 * underflow to subnormals, far from these values), and so is unscaling by
 * its inverse: every product, sum, BN backward term, average over ranks
 * and rounding to bf16 of the scaled gradients is the unscaled one times
 * 1024. The final master weights and momentum must be the same bits (a
 * static 1000 instead differs in ~25% of the weights by up to 1.2e-7 in
 * f32, and in all of them by up to 2.6e-3 in bf16: the check can fail).
 *
 * Backends (--backend NAME, default cpu): the arenas are read through the
 * backend's download wherever its memory is a device's, and the hook writes
 * the fault with its upload (a one-element view of the gradient), so the
 * test stays plain C. On cuda, overflow runs f32 (f32 gradients) and f16
 * (f16 gradients), and --steps 20 is what suite 'gpu' asks for: the ranks
 * sharing one GPU must still hold the same bits after every step. static
 * needs a deterministic backend (two runs of the same steps give the same
 * bits), which cuDNN's engines need not be: suite 'gpu' runs overflow only.
 * Without the backend (not built into this binary, or its init finds no
 * usable device) every rank agrees on it and exits 77 (a skip), saying why.
 *
 * usage: mpirun -np N test_loss_scale [overflow|static|all] [--backend NAME] [--steps N]
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loss_scale.h"
#include "model.h"
#include "optim.h"
#include "rand.h"
#include "train.h"

#define B 4      /* samples per rank */
#define STEPS 14 /* --steps' default */
#define WINDOW 3
#define STATIC_STEPS 3
#define LR 0.05

static int failures;
static int rank, size;
static const char *backend_name = "cpu"; /* --backend */
static int steps = STEPS;                /* --steps */

/* ---- faults ------------------------------------------------------------- */

typedef enum { FAULT_POS_INF = 0, FAULT_NAN = 1, FAULT_NEG_INF = 2 } fault_kind_t;
static const char *const fault_names[] = {"+inf", "NaN", "-inf"};

/* A fault: at step, on rank (-1: the last), in the first parameter of
 * param_kind from floor(param_at x parameter count) on (so it lands
 * mid-network, not in the first gradient written or the first in the
 * arena), at its middle element (+ shift). */
typedef struct {
    int step;
    int rank;
    fault_kind_t kind;
    tr_param_kind_t param_kind;
    double param_at;
    int shift;
} fault_t;

/* Steps 0-2 clean (the scale doubles after step 2), 3 clean, 4 overflows
 * with a partly filled window, 5-7 clean (doubles after 7), 8 clean, 9 and
 * 10 overflow in a row (from two different ranks), 11-13 clean (doubles
 * after 13). */
static const fault_t faults[] = {
    {.step = 4, .rank = -1, .kind = FAULT_POS_INF, .param_kind = TR_PARAM_CONV_WEIGHT, .param_at = 0.5, .shift = 0},
    {.step = 9, .rank = -1, .kind = FAULT_NAN, .param_kind = TR_PARAM_BN_GAMMA, .param_at = 0.3, .shift = 1},
    {.step = 10, .rank = 0, .kind = FAULT_NEG_INF, .param_kind = TR_PARAM_LINEAR_WEIGHT, .param_at = 0.5, .shift = -1},
};
#define FAULT_COUNT ((int)(sizeof(faults) / sizeof(faults[0])))

static const fault_t *fault_at(int step)
{
    for (int i = 0; i < FAULT_COUNT; i++)
        if (faults[i].step == step) return &faults[i];
    return NULL;
}

static int fault_rank(const fault_t *f) { return f->rank < 0 ? size - 1 : f->rank; }

static int fault_param(const fault_t *f, const tr_model_t *m)
{
    for (int i = (int)(f->param_at * tr_model_param_count(m)); i < tr_model_param_count(m); i++)
        if (tr_model_param(m, i)->kind == f->param_kind) return i;
    fprintf(stderr, "no parameter of kind %d after %g of the model\n", (int)f->param_kind, f->param_at);
    exit(1);
}

static size_t fault_element(const fault_t *f, size_t count) { return (size_t)((long long)(count / 2) + f->shift); }

/* The dtype's bit pattern of the fault, at element i of data. */
static void fault_write(void *data, tr_dtype_t dtype, size_t i, fault_kind_t kind)
{
    static const uint32_t f32[] = {0x7f800000u, 0x7fc00000u, 0xff800000u};
    static const uint16_t bf16[] = {0x7f80u, 0x7fc0u, 0xff80u};
    static const uint16_t f16[] = {0x7c00u, 0x7e00u, 0xfc00u};
    switch (dtype) {
    case TR_DTYPE_F32: memcpy((char *)data + 4 * i, &f32[kind], 4); break;
    case TR_DTYPE_BF16: memcpy((char *)data + 2 * i, &bf16[kind], 2); break;
    case TR_DTYPE_F16: memcpy((char *)data + 2 * i, &f16[kind], 2); break;
    default: fprintf(stderr, "no fault pattern for dtype %d\n", (int)dtype); exit(1);
    }
}

/* What element i holds: 'f' finite, else the fault_kind_t it looks like. */
static int classify(const void *data, tr_dtype_t dtype, size_t i)
{
    uint32_t bits, exp_all, mant;
    int neg;
    if (dtype == TR_DTYPE_F32) {
        memcpy(&bits, (const char *)data + 4 * i, 4);
        neg = bits >> 31, exp_all = (bits & 0x7f800000u) == 0x7f800000u, mant = bits & 0x7fffffu;
    } else {
        uint16_t h;
        memcpy(&h, (const char *)data + 2 * i, 2);
        uint16_t e = dtype == TR_DTYPE_BF16 ? 0x7f80u : 0x7c00u;
        neg = h >> 15, exp_all = (h & e) == e, mant = h & (uint16_t) ~(e | 0x8000u);
    }
    if (!exp_all) return 'f';
    if (mant) return FAULT_NAN;
    return neg ? FAULT_NEG_INF : FAULT_POS_INF;
}

typedef struct {
    const tr_model_t *model;
    tr_backend_t *backend; /* writes the fault where the gradient is device memory */
    int step;              /* the step running now */
    int param_count;
    int calls;           /* hook calls this step */
    int fired;           /* faults written this step */
    int failed;          /* faults the backend could not write this step */
    unsigned char *seen; /* per parameter: called this step */
} hook_t;

static void grad_hook(void *ctx, int param_index, const tr_tensor_t *grad)
{
    hook_t *h = ctx;
    h->calls++;
    if (param_index >= 0 && param_index < h->param_count) h->seen[param_index]++;
    const fault_t *f = fault_at(h->step);
    if (!f || fault_rank(f) != rank || fault_param(f, h->model) != param_index) return;
    const size_t at = fault_element(f, tr_tensor_count(grad));
    if (grad->memory == TR_MEMORY_HOST) {
        fault_write(grad->data, grad->dtype, at, f->kind);
        h->fired++;
        return;
    }
    /* Device memory: the element's bits go up through the backend, on its
     * queue, so after the op that wrote the gradient (upload is complete
     * when it returns: before this gradient's all-reduce is started). */
    unsigned char bits[4];
    fault_write(bits, grad->dtype, 0, f->kind);
    tr_tensor_t one = tr_tensor_view(grad, at, 1, (const int[]){1});
    if (h->backend->ops->upload(h->backend, &one, bits) == HORA_OK)
        h->fired++;
    else
        h->failed++;
}

/* ---- helpers ------------------------------------------------------------- */

static void expect(int ok, const char *what)
{
    if (!ok) failures++;
    if (!ok) printf("rank %d: %s FAIL\n", rank, what);
}

static size_t arena_bytes(tr_model_t *m, tr_arena_t a)
{
    const tr_tensor_t *t = tr_model_arena(m, a);
    return t->data ? tr_tensor_count(t) * tr_dtype_size(t->dtype) : 0;
}

/* A host copy of an arena's bytes (malloc'd): memcpy from host memory, the
 * backend's download from a device's (after every op queued before it). */
static unsigned char *snapshot(tr_model_t *m, tr_arena_t a)
{
    const tr_tensor_t *t = tr_model_arena(m, a);
    size_t n = arena_bytes(m, a);
    unsigned char *copy = malloc(n > t->bytes ? n : t->bytes > 0 ? t->bytes : 1);
    if (!copy) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        exit(1);
    }
    if (n && t->memory == TR_MEMORY_HOST) {
        memcpy(copy, t->data, n);
    } else if (n) {
        tr_backend_t *b = tr_model_backend(m);
        hora_status_t status = b->ops->download(b, t, copy);
        if (status != HORA_OK) {
            fprintf(stderr, "rank %d: downloading arena %d: %s\n", rank, (int)a, hora_status_string(status));
            exit(1);
        }
    }
    return copy;
}

/* Elements of an f32 arena (now: a snapshot) that differ from before (bitwise). */
static size_t changed_f32(tr_model_t *m, tr_arena_t a, const unsigned char *now, const unsigned char *before,
                          size_t *count)
{
    size_t n = arena_bytes(m, a) / 4, changed = 0;
    for (size_t i = 0; i < n; i++) changed += memcmp(now + 4 * i, before + 4 * i, 4) != 0;
    *count = n;
    return changed;
}

/* Ranks whose arena (mine: its snapshot) differs from rank 0's, bit for bit
 * (the same on every rank after the SUM). */
static int ranks_differing(tr_model_t *m, tr_arena_t a, const unsigned char *mine)
{
    size_t n = arena_bytes(m, a);
    int differs = 0;
    if (n) {
        unsigned char *root = malloc(n);
        if (!root) {
            fprintf(stderr, "rank %d: out of memory\n", rank);
            exit(1);
        }
        memcpy(root, mine, n);
        if (hora_broadcast(root, n, HORA_DTYPE_U8, 0) != HORA_OK) {
            fprintf(stderr, "rank %d: hora_broadcast: %s\n", rank, hora_last_error());
            exit(1);
        }
        differs = memcmp(root, mine, n) != 0;
        free(root);
    }
    if (hora_allreduce(&differs, &differs, 1, HORA_DTYPE_I32, HORA_OP_SUM) != HORA_OK) {
        fprintf(stderr, "rank %d: hora_allreduce: %s\n", rank, hora_last_error());
        exit(1);
    }
    return differs;
}

/* min and max over ranks of v */
static void range_f64(double v, double *lo, double *hi)
{
    double r[2] = {-v, v};
    if (hora_allreduce(r, r, 2, HORA_DTYPE_F64, HORA_OP_MAX) != HORA_OK) {
        fprintf(stderr, "rank %d: hora_allreduce: %s\n", rank, hora_last_error());
        exit(1);
    }
    *lo = -r[0], *hi = r[1];
}

typedef struct {
    const char *name;
    tr_dtype_t compute, grad;
    double initial_scale; /* dynamic */
} precision_t;

typedef struct {
    tr_backend_t *backend;
    tr_model_t *model;
    tr_trainer_t *trainer;
    tr_run_state_t state;
    tr_step_config_t config;
    hook_t hook;
    float *x;
    int32_t *y;
    tr_tensor_t xt;
} setup_t;

/* This rank's backend, model, trainer and batch (setup_init's first half). */
static int setup_build(setup_t *s, tr_dtype_t compute, tr_dtype_t grad, tr_overlap_t overlap,
                       const tr_loss_scale_config_t *ls, int with_hook)
{
    tr_model_spec_t spec;
    if (tr_model_spec_from_name("resnet8", &spec) != HORA_OK) return -1;
    spec.in_channels = 3;
    spec.height = spec.width = 16;
    spec.base_width = 8;
    spec.classes = 10;
    spec.zero_init_last_bn = 0; /* every gradient nonzero */
    spec.compute_dtype = compute;
    spec.grad_dtype = grad;
    const struct tr_backend_ops *ops = tr_backend_find(backend_name);
    tr_backend_config_t bc = {.threads = 1};
    if (!ops || ops->init(&bc, &s->backend) != HORA_OK) return -1;
    if (tr_model_init(s->backend, &spec, B, 1, 7, &s->model) != HORA_OK) return -1;
    s->hook.model = s->model;
    s->hook.backend = s->backend;
    s->hook.param_count = tr_model_param_count(s->model);
    s->hook.seen = calloc((size_t)s->hook.param_count, 1);
    s->config = (tr_step_config_t){
        .overlap = overlap,
        .optim = {.momentum = 0.9, .weight_decay = 1e-3, .nesterov = 1, .decay_bn_bias = 0},
        .loss_scale = *ls,
        .grad_hook = with_hook ? grad_hook : NULL,
        .grad_hook_ctx = with_hook ? &s->hook : NULL,
    };
    s->state = tr_run_state_begin(7);
    tr_loss_scale_begin(ls, &s->state.loss_scale);
    if (tr_trainer_init(s->model, &s->config, &s->state, &s->trainer) != HORA_OK) return -1;
    /* This rank's fixed batch: a function of (rank, index). */
    const size_t sample = (size_t)spec.in_channels * spec.height * spec.width;
    s->x = malloc(B * sample * sizeof(float));
    s->y = malloc(B * sizeof(int32_t));
    for (size_t i = 0; i < B * sample; i++) s->x[i] = test_hash_signed(1000 + (uint64_t)rank, i);
    for (int i = 0; i < B; i++) s->y[i] = (int32_t)(((rank * B + i) * 3 + 1) % spec.classes);
    s->xt = tr_tensor_plain(s->x, TR_DTYPE_F32, TR_MEMORY_HOST, 4,
                            (const int[]){B, spec.in_channels, spec.height, spec.width});
    return 0;
}

static void setup_free(setup_t *s)
{
    tr_trainer_free(s->trainer);
    tr_model_free(s->model);
    if (s->backend) s->backend->ops->free(s->backend);
    free(s->hook.seen);
    free(s->x);
    free(s->y);
}

/* 0 when every rank built its trainer (then rank 0's state is on every
 * rank), -1 on every rank when some rank could not: decided together, so no
 * rank waits in a collective its peers never join. */
static int setup_init(setup_t *s, tr_dtype_t compute, tr_dtype_t grad, tr_overlap_t overlap,
                      const tr_loss_scale_config_t *ls, int with_hook)
{
    memset(s, 0, sizeof(*s));
    int bad = setup_build(s, compute, grad, overlap, ls, with_hook) != 0;
    if (hora_allreduce(&bad, &bad, 1, HORA_DTYPE_I32, HORA_OP_MAX) != HORA_OK || bad ||
        tr_trainer_broadcast_state(s->trainer, 0, 0) != HORA_OK) {
        setup_free(s);
        return -1;
    }
    return 0;
}

/* ---- overflow ------------------------------------------------------------ */

static int run_overflow(const precision_t *p, tr_overlap_t overlap)
{
    const tr_loss_scale_config_t ls = {
        .mode = TR_LOSS_SCALE_DYNAMIC, .initial = p->initial_scale, .window = WINDOW, .max_consecutive_skips = 5};
    setup_t s;
    if (setup_init(&s, p->compute, p->grad, overlap, &ls, 1)) return -1;
    tr_model_t *m = s.model;
    const int lp = p->compute != TR_DTYPE_F32;
    const tr_dtype_t gdt = tr_model_arena(m, TR_ARENA_GRADS)->dtype;
    expect(gdt == p->grad, "grads arena dtype is the spec's grad_dtype");
    expect(!lp || tr_model_arena(m, TR_ARENA_PARAMS_LP)->dtype == p->compute, "params_lp arena dtype is compute");
    expect(lp == (arena_bytes(m, TR_ARENA_PARAMS_LP) > 0), "params_lp arena exists iff compute is not f32");
    int before_failures = failures;

    /* The expected scale, step by step, from the rules (loss_scale.h). */
    double want_scale = p->initial_scale;
    uint64_t clean = 0, want_skipped = 0;
    float first_loss = 0, last_loss = 0;
    /* The arenas before the step (the last step's after). */
    unsigned char *params0 = snapshot(m, TR_ARENA_PARAMS), *mom0 = snapshot(m, TR_ARENA_MOMENTUM),
                  *lp0 = snapshot(m, TR_ARENA_PARAMS_LP);
    for (int step = 0; step < steps; step++) {
        const fault_t *f = fault_at(step);
        const double scale0 = s.state.loss_scale.scale;
        s.hook.step = step;
        s.hook.calls = s.hook.fired = s.hook.failed = 0;
        memset(s.hook.seen, 0, (size_t)s.hook.param_count);
        float loss = NAN;
        int skipped = -1;
        char what[160];
        hora_status_t status = tr_trainer_step(s.trainer, &s.xt, s.y, LR, &loss, &skipped);
        snprintf(what, sizeof(what), "step %d: tr_trainer_step: %s", step, hora_status_string(status));
        expect(status == HORA_OK, what);
        /* Stop together: the checks below are collectives. */
        int bad = status != HORA_OK;
        hora_allreduce(&bad, &bad, 1, HORA_DTYPE_I32, HORA_OP_MAX);
        if (bad) break;

        /* The hook saw every gradient once, and the fault went in. */
        int once = s.hook.calls == s.hook.param_count;
        for (int i = 0; i < s.hook.param_count; i++) once &= s.hook.seen[i] == 1;
        snprintf(what, sizeof(what), "step %d: grad_hook called %d times for %d gradients", step, s.hook.calls,
                 s.hook.param_count);
        expect(once, what);
        const int injector = f && fault_rank(f) == rank;
        snprintf(what, sizeof(what), "step %d: %d fault(s) written (%d could not be), want %d", step, s.hook.fired,
                 s.hook.failed, injector);
        expect(s.hook.fired == injector && s.hook.failed == 0, what);

        /* The rules' expectation for this step. */
        if (f) {
            want_scale /= 2;
            clean = 0;
            want_skipped++;
        } else if (++clean == WINDOW) {
            want_scale *= 2;
            clean = 0;
        }
        const double scale = s.state.loss_scale.scale;
        snprintf(what, sizeof(what), "step %d: skipped %d, want %d", step, skipped, f != NULL);
        expect(skipped == (f != NULL), what);
        snprintf(what, sizeof(what), "step %d: scale %g (was %g), want %g", step, scale, scale0, want_scale);
        expect(scale == want_scale, what);
        snprintf(what, sizeof(what), "step %d: skipped_steps %" PRIu64 ", want %" PRIu64, step,
                 s.state.loss_scale.skipped_steps, want_skipped);
        expect(s.state.loss_scale.skipped_steps == want_skipped, what);
        snprintf(what, sizeof(what), "step %d: loss %g not finite", step, (double)loss);
        expect(isfinite(loss), what);
        if (step == 0) first_loss = loss;
        last_loss = loss;

        unsigned char *params1 = snapshot(m, TR_ARENA_PARAMS), *mom1 = snapshot(m, TR_ARENA_MOMENTUM),
                      *lp1 = snapshot(m, TR_ARENA_PARAMS_LP);
        size_t n, changed = changed_f32(m, TR_ARENA_PARAMS, params1, params0, &n), nm,
                  mchanged = changed_f32(m, TR_ARENA_MOMENTUM, mom1, mom0, &nm);
        if (f) {
            /* A skipped step: nothing the optimizer owns moved, the scale
             * halved, and the fault reached every rank's all-reduced
             * gradient as what it was. */
            snprintf(what, sizeof(what), "step %d (skipped): %zu f32 master weights and %zu momenta changed", step,
                     changed, mchanged);
            expect(changed == 0 && mchanged == 0 && memcmp(params0, params1, arena_bytes(m, TR_ARENA_PARAMS)) == 0 &&
                       memcmp(mom0, mom1, arena_bytes(m, TR_ARENA_MOMENTUM)) == 0,
                   what);
            snprintf(what, sizeof(what), "step %d (skipped): the %s weights changed", step, tr_dtype_name(p->compute));
            if (lp) expect(memcmp(lp0, lp1, arena_bytes(m, TR_ARENA_PARAMS_LP)) == 0, what);
            snprintf(what, sizeof(what), "step %d: scale %g did not halve from %g", step, scale, scale0);
            expect(scale == scale0 / 2, what);
            const tr_param_t *fp = tr_model_param(m, fault_param(f, m));
            const size_t at = fault_element(f, fp->count);
            unsigned char *grads = snapshot(m, TR_ARENA_GRADS);
            int got = classify(grads, gdt, fp->grad_offset + at);
            free(grads);
            snprintf(what, sizeof(what), "step %d: all-reduced %s[%zu] is %s, want %s", step, fp->name, at,
                     got == 'f' ? "finite" : fault_names[got], fault_names[f->kind]);
            expect(got == (int)f->kind, what);
            if (rank == 0)
                printf("  step %2d: %s in %s[%zu] (%s) on rank %d: skipped, scale %g -> %g, %zu/%zu weights "
                       "changed %s\n",
                       step, fault_names[f->kind], fp->name, at, tr_dtype_name(gdt), fault_rank(f), scale0, scale,
                       changed, n, failures == before_failures ? "ok" : "FAIL");
        } else {
            /* A clean step trains: (nearly) every weight and momentum moves. */
            snprintf(what, sizeof(what), "step %d: only %zu of %zu weights changed", step, changed, n);
            expect(changed * 10 >= n * 9, what);
            snprintf(what, sizeof(what), "step %d: only %zu of %zu momenta changed", step, mchanged, nm);
            expect(mchanged * 10 >= nm * 9, what);
            if (scale != scale0 && rank == 0)
                printf("  step %2d: %d clean steps: scale %g -> %g %s\n", step, WINDOW, scale0, scale,
                       scale == 2 * scale0 ? "ok" : "FAIL");
            snprintf(what, sizeof(what), "step %d: scale went %g -> %g on a clean step", step, scale0, scale);
            expect(scale == scale0 || scale == 2 * scale0, what);
        }
        free(params0), free(mom0), free(lp0);
        params0 = params1, mom0 = mom1, lp0 = lp1;

        /* The same bits and the same decisions on every rank. */
        int diff_p = ranks_differing(m, TR_ARENA_PARAMS, params1), diff_m = ranks_differing(m, TR_ARENA_MOMENTUM, mom1),
            diff_lp = ranks_differing(m, TR_ARENA_PARAMS_LP, lp1);
        snprintf(what, sizeof(what), "step %d: ranks differing from rank 0: %d weights, %d momentum, %d lp", step,
                 diff_p, diff_m, diff_lp);
        expect(diff_p == 0 && diff_m == 0 && diff_lp == 0, what);
        double lo, hi, klo, khi, nlo, nhi;
        range_f64(scale, &lo, &hi);
        range_f64(skipped, &klo, &khi);
        range_f64((double)s.state.loss_scale.skipped_steps, &nlo, &nhi);
        snprintf(what, sizeof(what), "step %d: scale %g..%g, skipped %g..%g, skipped_steps %g..%g over ranks", step, lo,
                 hi, klo, khi, nlo, nhi);
        expect(lo == hi && klo == khi && nlo == nhi, what);
    }
    free(params0), free(mom0), free(lp0);
    /* Training: the loss on the fixed batch, averaged over ranks, fell. */
    double l[2] = {first_loss, last_loss};
    hora_allreduce(l, l, 2, HORA_DTYPE_F64, HORA_OP_AVG);
    char what[160];
    snprintf(what, sizeof(what), "loss did not fall: %.4f -> %.4f", l[0], l[1]);
    expect(l[1] < l[0], what);
    int total = failures - before_failures;
    hora_allreduce(&total, &total, 1, HORA_DTYPE_I32, HORA_OP_SUM);
    if (rank == 0)
        printf("  %d steps, %" PRIu64 " skipped, final scale %g, loss %.4f -> %.4f, weights identical on %d ranks "
               "after every step: %s\n",
               steps, s.state.loss_scale.skipped_steps, s.state.loss_scale.scale, l[0], l[1], size,
               total ? "FAIL" : "ok");
    setup_free(&s);
    return 0;
}

/* ---- static -------------------------------------------------------------- */

/* STATIC_STEPS steps with ls; the final master weights and momentum into
 * *params and *momentum (malloc'd), their f32 count into *n. */
static int train_static(tr_dtype_t compute, tr_dtype_t grad, const tr_loss_scale_config_t *ls, float **params,
                        float **momentum, size_t *n, size_t *changed)
{
    setup_t s;
    if (setup_init(&s, compute, grad, TR_OVERLAP_OFF, ls, 0)) return -1;
    unsigned char *initial = snapshot(s.model, TR_ARENA_PARAMS);
    for (int step = 0; step < STATIC_STEPS; step++) {
        float loss;
        int skipped = -1;
        hora_status_t status = tr_trainer_step(s.trainer, &s.xt, s.y, LR, &loss, &skipped);
        char what[160];
        snprintf(what, sizeof(what), "static %g step %d: %s, skipped %d, scale %g", ls->initial, step,
                 hora_status_string(status), skipped, s.state.loss_scale.scale);
        expect(status == HORA_OK && skipped == 0 && isfinite(loss) &&
                   s.state.loss_scale.scale == (ls->mode == TR_LOSS_SCALE_NONE ? 1.0 : ls->initial),
               what);
        if (status != HORA_OK) break;
    }
    *params = (float *)snapshot(s.model, TR_ARENA_PARAMS);
    *momentum = (float *)snapshot(s.model, TR_ARENA_MOMENTUM);
    *changed = changed_f32(s.model, TR_ARENA_PARAMS, (const unsigned char *)*params, initial, n);
    free(initial);
    setup_free(&s);
    return 0;
}

static void compare(const char *what, const float *a, const float *b, size_t n)
{
    double max_abs = 0, max_ref = 0;
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) {
        differ += memcmp(&a[i], &b[i], sizeof(float)) != 0;
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= max_abs)) max_abs = isnan(d) ? INFINITY : d;
        max_ref = fmax(max_ref, fabs((double)a[i]));
    }
    int ok = differ == 0;
    if (!ok) failures++;
    if (rank == 0 || !ok)
        printf("  rank %d: %-10s max|w| %.3e max abs diff %.3e, %zu of %zu differ in bits %s\n", rank, what, max_ref,
               max_abs, differ, n, ok ? "ok" : "FAIL");
}

static int run_static(const precision_t *p)
{
    const tr_loss_scale_config_t none = {.mode = TR_LOSS_SCALE_NONE, .max_consecutive_skips = 5},
                                 st = {.mode = TR_LOSS_SCALE_STATIC,
                                       .initial = 1024,
                                       .window = WINDOW,
                                       .max_consecutive_skips = 5};
    float *p0, *m0, *p1, *m1;
    size_t n0, n1, c0, c1;
    if (train_static(p->compute, p->grad, &none, &p0, &m0, &n0, &c0)) return -1;
    if (train_static(p->compute, p->grad, &st, &p1, &m1, &n1, &c1)) {
        free(p0), free(m0);
        return -1;
    }
    char what[160];
    snprintf(what, sizeof(what), "static: training changed only %zu and %zu of %zu weights", c0, c1, n0);
    expect(n0 == n1 && c0 * 10 >= n0 * 9 && c1 * 10 >= n1 * 9, what);
    compare("weights", p1, p0, n0);
    compare("momentum", m1, m0, n0);
    free(p0), free(m0), free(p1), free(m1);
    return 0;
}

/* Whether every rank can run backend_name: 0 yes; 77 (a skip) when it is
 * not built into this binary or some rank's init finds no usable device;
 * 1 when an init failed otherwise. Decided together (the worst verdict of
 * any rank), so every rank returns the same; each rank that found a reason
 * prints it. */
static int backend_verdict(void)
{
    const struct tr_backend_ops *ops = tr_backend_find(backend_name);
    char why[256] = "";
    int verdict = 0; /* 0 usable, 1 skip, 2 fail: the worst wins */
    if (!ops) {
        verdict = 1;
        snprintf(why, sizeof(why), "the %s backend is not built into this binary (built in: %s)", backend_name,
                 tr_backend_names());
    } else {
        tr_backend_t *probe = NULL;
        tr_backend_config_t bc = {.threads = 1};
        hora_status_t status = ops->init(&bc, &probe);
        if (status == HORA_OK) {
            ops->free(probe);
        } else if (status == HORA_ERR_UNSUPPORTED && ops->memory != TR_MEMORY_HOST) {
            verdict = 1; /* cuda: "no usable CUDA device (...)", the backend's message */
            snprintf(why, sizeof(why), "rank %d: the %s backend finds no usable device (%s: %s)", rank, backend_name,
                     hora_status_string(status), status_message());
        } else {
            verdict = 2;
            snprintf(why, sizeof(why), "rank %d: the %s backend's init failed: %s: %s", rank, backend_name,
                     hora_status_string(status), status_message());
        }
    }
    int worst = verdict;
    if (hora_allreduce(&worst, &worst, 1, HORA_DTYPE_I32, HORA_OP_MAX) != HORA_OK) {
        fprintf(stderr, "rank %d: hora_allreduce: %s\n", rank, hora_last_error());
        return 1;
    }
    if (verdict)
        printf("%s test_loss_scale --backend %s: %s\n", verdict == 1 ? "SKIP" : "FAIL", backend_name, why);
    else if (worst && rank == 0)
        printf("%s test_loss_scale --backend %s: another rank cannot run it (its message above)\n",
               worst == 1 ? "SKIP" : "FAIL", backend_name);
    fflush(stdout);
    return worst == 0 ? 0 : worst == 1 ? 77 : 1;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: test_loss_scale [overflow|static|all] [--backend NAME] [--steps N]\n"
            "  --backend: cpu (default) or cuda; --steps: overflow's steps (default %d)\n",
            STEPS);
    return 2;
}

int main(int argc, char **argv)
{
    const char *mode = "all";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            backend_name = argv[++i];
        } else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 10000) return usage();
            steps = (int)v;
        } else if (argv[i][0] != '-') {
            mode = argv[i];
        } else {
            return usage();
        }
    }
    const int do_overflow = !strcmp(mode, "overflow") || !strcmp(mode, "all"),
              do_static = !strcmp(mode, "static") || !strcmp(mode, "all");
    /* cuda may be missing from this build (a skip); another name is a typo. */
    if ((!do_overflow && !do_static) || (!tr_backend_find(backend_name) && strcmp(backend_name, "cuda") != 0))
        return usage();
    if (hora_init() != HORA_OK) {
        fprintf(stderr, "hora_init failed: %s\n", hora_last_error());
        return 1;
    }
    rank = hora_rank(), size = hora_size();
    const int verdict = backend_verdict();
    if (verdict) {
        hora_shutdown();
        return verdict;
    }
    const int device = tr_backend_find(backend_name)->memory != TR_MEMORY_HOST;
    /* The only overflows must be the injected ones. bf16 has f32's range
     * and starts at the default 2^16. f16 overflows above 65504: this
     * model's gradients happen to stay finite at 2^16 and 2^17 too, with
     * little margin, so f16 starts at 1024, where they surely do. cuda runs
     * what its users would: f32 throughout (from 2^16, far inside f32's
     * range) and f16 compute with f16 gradients (from 1024; --steps 20
     * doubles it twice more, to 4096). */
    static const precision_t overflow_host[] = {
        {"bf16 compute, bf16 grads", TR_DTYPE_BF16, TR_DTYPE_BF16, TR_LOSS_SCALE_DYNAMIC_INITIAL},
        {"f32 compute, f16 grads", TR_DTYPE_F32, TR_DTYPE_F16, 1024},
    };
    static const precision_t overflow_device[] = {
        {"f32 compute, f32 grads", TR_DTYPE_F32, TR_DTYPE_F32, TR_LOSS_SCALE_DYNAMIC_INITIAL},
        {"f16 compute, f16 grads", TR_DTYPE_F16, TR_DTYPE_F16, 1024},
    };
    const precision_t *overflow_precisions = device ? overflow_device : overflow_host;
    static const precision_t static_precisions[] = {
        {"f32 compute, f32 grads", TR_DTYPE_F32, TR_DTYPE_F32, 0},
        {"bf16 compute, bf16 grads", TR_DTYPE_BF16, TR_DTYPE_BF16, 0},
    };
    static const tr_overlap_t overlaps[] = {TR_OVERLAP_OFF, TR_OVERLAP_ON};
    for (int i = 0; do_overflow && i < 2; i++)
        for (int o = 0; o < 2; o++) {
            if (rank == 0)
                printf("== overflow: %d ranks x batch %d, %s backend, %s, dynamic from %g window %d, overlap %s, %d "
                       "steps\n",
                       size, B, backend_name, overflow_precisions[i].name, overflow_precisions[i].initial_scale, WINDOW,
                       overlaps[o] == TR_OVERLAP_ON ? "on" : "off", steps);
            if (run_overflow(&overflow_precisions[i], overlaps[o])) {
                fprintf(stderr, "rank %d: setup failed\n", rank);
                failures++;
            }
        }
    for (int i = 0; do_static && i < 2; i++) {
        if (rank == 0)
            printf("== static: %d ranks x batch %d, %s backend, %s: %d steps, no scaling vs static 1024\n", size, B,
                   backend_name, static_precisions[i].name, STATIC_STEPS);
        if (run_static(&static_precisions[i])) {
            fprintf(stderr, "rank %d: setup failed\n", rank);
            failures++;
        }
    }
    int total = failures;
    hora_allreduce(&total, &total, 1, HORA_DTYPE_I32, HORA_OP_SUM);
    hora_shutdown();
    if (rank == 0) printf("%s: %d failure(s)\n", total ? "FAIL" : "PASS", total);
    return total ? 1 : 0;
}
