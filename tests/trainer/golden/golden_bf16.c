/*
 * golden_bf16.c - hora's bf16 training (cpu backend, model, trainer) against
 * PyTorch's CPU autocast, from a golden file with a `mixed` entry
 * (resnet8-cifar-bf16.bin); run by test_golden (golden.h).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "golden.h"
#include "model.h"
#include "optim.h"
#include "train.h"

/*
 * A file with a `mixed` entry (tests/trainer/golden/README.md) holds three runs of
 * the same steps from one initial state:
 *   (no prefix)  torch.autocast("cpu", bfloat16), as PyTorch users train;
 *   emulated/    the same, with the two things hora does differently by
 *                design: its linear head computes f32 logits (bf16 input and
 *                weight, f32 accumulation plus the f32 bias; the logits'
 *                gradient is bf16), where autocast casts the bias to bf16 and
 *                rounds the logits to bf16; and every gradient reaches the
 *                optimizer rounded to bf16 (hora's grads arena is bf16), where
 *                PyTorch's BN gamma/beta gradients are f32 (its conv and fc
 *                weight gradients are bf16 values already);
 *   f32/         no autocast: the yardstick of bf16's own error.
 * hora runs the steps with compute_dtype = grad_dtype = bf16 through the
 * trainer and is compared with all three.
 *
 * Where the two round: both cast the input and the conv/linear weights to
 * bf16 (nearest even), run conv in oneDNN with f32 accumulation and a bf16
 * output, BN on bf16 with f32 statistics and a bf16 output, relu and add in
 * bf16 (add: f32 sum rounded once), average pooling to bf16, and keep
 * activation gradients in bf16; Debian's PyTorch runs its convolutions on
 * the same system oneDNN (2.6.3) as hora, so with the same kernels. Apart
 * from the head, hora and PyTorch then make the same roundings: against
 * emulated/, step 1 is bit-identical but for one element of one conv weight
 * gradient (one bf16 ulp), and the three steps stay within ~1e-6 after it.
 * Against plain autocast, the head's rounding of the logits (up to half a
 * bf16 ulp each) moves dlogits by an ulp in many elements, and every BN
 * backward on the way down amplifies that: ~1e-2 in step 1's gradients.
 * From step 2 on, the weights differ by that much times lr, enough to flip
 * the bf16 rounding of some weights, and the two runs' roundings decorrelate:
 * after three steps hora vs autocast is about as far apart as autocast vs
 * f32.
 *
 * Errors are normalised per tensor: max |hora - ref| / max |ref| (an
 * element-wise relative bound means nothing for bf16 gradients, whose small
 * elements are mostly rounding noise). Updates are the weights' change from
 * the initial ones (shared exactly, and they would dwarf the change); the
 * running statistics are what the batches contributed (the mean from 0, the
 * variance less the initial 1's share (1 - momentum)^steps). Each group has
 * a bound against autocast and one against emulated/, and, against
 * autocast, a cap on its worst error as a multiple of autocast's own worst
 * error against f32 (so that a bound cannot pass something as far off as
 * bf16 vs f32 where hora should be closer). Measured on the machine that
 * wrote the file (AMD EPYC, oneDNN avx512_core_bf16 kernels), worst tensor
 * per group:
 *
 *   group          vs autocast  bound  cap    vs emulated  bound  autocast vs f32
 *   logits         3.5e-3       1e-2   1      0            2e-3   7.6e-3
 *   loss           2.0e-4       1e-3   -      0            2e-4   1.3e-4
 *   grad conv      1.2e-2       4e-2   0.25   9.0e-5       2e-3   3.0e-1
 *   grad bn        1.5e-2       4e-2   0.25   0            2e-3   3.2e-1
 *   grad fc        3.2e-3       1e-2   1      0            2e-3   5.9e-3
 *   update step 1  1.5e-2       4e-2   0.25   9.0e-5       2e-3   3.2e-1
 *   update         2.8e-1       0.6    1.5    4.7e-5       5e-3   3.7e-1
 *   running stats  6.9e-3       2e-2   1.5    1.0e-6       5e-3   1.4e-2
 *   logits eval    1.6e-2       4e-2   1.5    3.4e-8       5e-3   1.8e-2
 *
 * Against autocast the bounds are 2-3.5x the measured worst. The caps say
 * what the data shows: step 1's conv and BN gradients are 20x closer to
 * autocast than autocast is to f32 (cap 0.25 keeps 5x of that); the logits
 * and fc gradients, which the head's rounding reaches directly, 2x closer
 * (cap 1); after the steps no further apart than autocast and f32 (cap 1.5,
 * measured 0.5-0.9). The loss has no cap: autocast's own loss error is its
 * logits' rounding too, the same size as hora's by construction; its bound
 * is 5x the measured (the first-order bound |d loss| <= 2 max |d logit|
 * would be 7e-3). Step 1's update, lr (1 + momentum) (g + wd w), carries its
 * gradients' errors, and is what checks the optimizer against autocast: a
 * learning rate 5% off fails it (6.1e-2), no Nesterov term fails every
 * update. The three-step update bound, by contrast, sits above bf16's own
 * error (0.37): once the runs decorrelate nothing tighter holds across
 * kernels, and it only catches gross errors; emulated/ pins those steps.
 * Against emulated/ the bounds allow stray single-ulp differences (an
 * element's bf16 ulp is 2^-8 to 2^-7 of its magnitude, so 2e-3 lets one
 * through on any element below a quarter of the tensor's largest; one ulp
 * of one pooled activation moves the loss by ~7e-5) and nothing systematic:
 * in PyTorch, handing the optimizer the f32 BN gradients instead of their
 * bf16 roundings moves the updates after three steps by up to 2.2e-1; in
 * hora, grad_dtype f32 moves step 1's gradients by 3.2e-3 (the missing
 * rounding) and the three-step updates by 2.6e-1.
 * The bounds against emulated/ hold only where hora's oneDNN runs the
 * kernels PyTorch's ran when the file was written: bf16 results depend on
 * the summation order, which depends on the kernel, hence on the CPU (AMX
 * kernels sum in another order) and on hora's layouts. Forcing hora's
 * activations to nChw8c (channel_block 8), a change of kernels only, gives
 * 6.8e-3 against emulated/ in step 1's gradients and, from step 2 on, the
 * decorrelated regime (2.1e-1 in the updates): those bounds fail, while
 * every bound against autocast still holds (worst: step-1 gradients and
 * update 1.5e-2, updates 2.1e-1, eval logits 1.8e-2 at ratio 1.03); forced
 * to nchw, emulated/ matches to 4e-6 throughout. So when only the emulated/
 * bounds fail, the cause is another kernel, not where hora rounds: on
 * another CPU regenerate the file there (tools/make-golden --only
 * resnet8-cifar-bf16.bin); after a change of hora's layouts or kernels,
 * check that the autocast bounds hold and re-measure these. They are
 * enforced where oneDNN runs the instruction set the file was written with
 * (GOLDEN_BF16_ISA) and only reported elsewhere (an AMX CPU sums in
 * another order); the bounds against autocast are enforced everywhere.
 */
#define GOLDEN_BF16_ISA dnnl_cpu_isa_avx512_core_bf16

static int emulated_enforced(void) { return dnnl_get_effective_cpu_isa() == GOLDEN_BF16_ISA; }
typedef enum {
    MIXED_LOGITS = 0, /* train-mode logits of step 1 */
    MIXED_LOSS,       /* step 1's loss */
    MIXED_GRAD_CONV,  /* step 1's gradients: conv weights */
    MIXED_GRAD_BN,    /* BN gamma and beta */
    MIXED_GRAD_FC,    /* fc weight and bias */
    MIXED_UPDATE1,    /* every parameter's change in step 1 */
    MIXED_UPDATE,     /* every parameter's change over all the steps */
    MIXED_STATS,      /* BN running statistics: what the batches contributed */
    MIXED_EVAL,       /* eval-mode logits after the steps */
    MIXED_GROUP_COUNT,
} mixed_group_t;

static const struct {
    const char *name;
    double bound_autocast, cap, bound_emulated; /* cap 0: none */
} mixed_groups[MIXED_GROUP_COUNT] = {
    [MIXED_LOGITS] = {"logits", 1e-2, 1.0, 2e-3},        [MIXED_LOSS] = {"loss", 1e-3, 0.0, 2e-4},
    [MIXED_GRAD_CONV] = {"grad conv", 4e-2, 0.25, 2e-3}, [MIXED_GRAD_BN] = {"grad bn", 4e-2, 0.25, 2e-3},
    [MIXED_GRAD_FC] = {"grad fc", 1e-2, 1.0, 2e-3},      [MIXED_UPDATE1] = {"update step 1", 4e-2, 0.25, 2e-3},
    [MIXED_UPDATE] = {"update", 0.6, 1.5, 5e-3},         [MIXED_STATS] = {"running stats", 2e-2, 1.5, 5e-3},
    [MIXED_EVAL] = {"logits eval", 4e-2, 1.5, 5e-3},
};

/* The references of one tensor, in this order. */
enum { REF_AUTOCAST = 0, REF_EMULATED = 1, REF_F32 = 2, REF_COUNT = 3 };
static const char *const ref_prefix[REF_COUNT] = {"", "emulated/", "f32/"};

/* Per group, the worst normalised error of hora against each reference,
 * and of autocast against f32; tensors beyond a bound, per reference. */
static double mixed_worst[MIXED_GROUP_COUNT][REF_COUNT + 1];
static int mixed_failed[REF_COUNT];

/* max |a - b| / max |b| over n values; INFINITY when either holds a NaN or
 * an inf, or when b is all zero and a is not. */
static double norm_err(const float *a, const float *b, size_t n)
{
    double d = 0, ref = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
        d = fmax(d, fabs((double)a[i] - b[i]));
        ref = fmax(ref, fabs((double)b[i]));
    }
    return ref > 0 ? d / ref : (d > 0 ? INFINITY : 0);
}

/* hora's got against the three references: prints the normalised errors
 * and fails got beyond its group's bounds. */
static void compare_mixed(mixed_group_t group, const char *what, const float *got, float *const ref[REF_COUNT],
                          size_t n)
{
    double e[REF_COUNT + 1], max_ref = 0;
    for (int r = 0; r < REF_COUNT; r++) e[r] = norm_err(got, ref[r], n);
    e[REF_COUNT] = norm_err(ref[REF_AUTOCAST], ref[REF_F32], n);
    for (size_t i = 0; i < n; i++) max_ref = fmax(max_ref, fabs((double)ref[REF_AUTOCAST][i]));
    int bad_autocast = !(e[REF_AUTOCAST] <= mixed_groups[group].bound_autocast),
        bad_emulated = !(e[REF_EMULATED] <= mixed_groups[group].bound_emulated),
        bad = bad_autocast || (bad_emulated && emulated_enforced());
    mixed_failed[REF_AUTOCAST] += bad_autocast;
    mixed_failed[REF_EMULATED] += bad_emulated;
    printf("  %-44s n=%-5zu max|ref| %.2e  autocast %.2e  emulated %.2e  f32 %.2e  (autocast vs f32 %.2e)  %s\n", what,
           n, max_ref, e[REF_AUTOCAST], e[REF_EMULATED], e[REF_F32], e[REF_COUNT], bad ? "FAIL" : "ok");
    for (int k = 0; k <= REF_COUNT; k++) mixed_worst[group][k] = fmax(mixed_worst[group][k], e[k]);
    if (bad) golden_failures++;
}

/* The groups' worst errors, and the caps against autocast's own error. */
static void mixed_summary(void)
{
    printf("  %-14s %-11s %-8s %-11s %-8s %-11s %-16s %s\n", "group", "autocast", "bound", "emulated", "bound", "f32",
           "autocast vs f32", "ratio (cap)");
    for (int k = 0; k < MIXED_GROUP_COUNT; k++) {
        const double *w = mixed_worst[k], cap = mixed_groups[k].cap;
        double ratio = w[REF_COUNT] > 0 ? w[REF_AUTOCAST] / w[REF_COUNT] : INFINITY;
        int bad = cap > 0 && !(ratio <= cap);
        printf("  %-14s %-11.2e %-8.0e %-11.2e %-8.0e %-11.2e %-16.2e ", mixed_groups[k].name, w[REF_AUTOCAST],
               mixed_groups[k].bound_autocast, w[REF_EMULATED], mixed_groups[k].bound_emulated, w[REF_F32],
               w[REF_COUNT]);
        if (cap > 0)
            printf("%.2f (%.2f) %s\n", ratio, cap, bad ? "FAIL" : "ok");
        else
            printf("-\n");
        if (bad) {
            golden_failures++;
            mixed_failed[REF_AUTOCAST]++;
        }
    }
    if (mixed_failed[REF_EMULATED] && !emulated_enforced())
        printf("  the bounds against emulated/ are reported, not enforced: oneDNN runs another instruction set\n"
               "  here than the one the file was written with\n");
    else if (mixed_failed[REF_EMULATED] && !mixed_failed[REF_AUTOCAST])
        printf("  only bounds against emulated/ fail: hora's bf16 roundings moved as another summation order\n"
               "  moves them (other oneDNN kernels: another CPU, another layout), not where hora rounds; see the\n"
               "  comment above mixed_group_t\n");
}

/* A plain backend tensor of any float dtype, downloaded as f32 (a bf16
 * tensor through the backend's cast into an f32 buffer). */
static hora_status_t download_f32(tr_backend_t *backend, const tr_tensor_t *t, float *host)
{
    const struct tr_backend_ops *ops = backend->ops;
    if (t->dtype == TR_DTYPE_F32) return ops->download(backend, t, host);
    void *buf;
    hora_status_t status = ops->buffer_alloc(backend, tr_tensor_count(t) * sizeof(float), &buf);
    if (status != HORA_OK) return status;
    tr_tensor_t f = tr_tensor_plain(buf, TR_DTYPE_F32, ops->memory, t->ndim, (const int[]){t->n, t->c, t->h, t->w});
    status = ops->cast(backend, t, &f);
    if (status == HORA_OK) status = ops->download(backend, &f, host);
    ops->buffer_free(backend, buf);
    return status;
}

/* The layers' bf16 copy must be the master weights rounded, bit for bit,
 * after the optimizer's steps: cast the master here and compare bytes. */
static void check_compute_copy(tr_model_t *model)
{
    tr_backend_t *backend = tr_model_backend(model);
    const struct tr_backend_ops *ops = backend->ops;
    const tr_tensor_t *master = tr_model_arena(model, TR_ARENA_PARAMS), *lp = tr_model_arena(model, TR_ARENA_PARAMS_LP);
    size_t count = tr_tensor_count(master), bytes = count * tr_dtype_size(lp->dtype);
    void *buf = NULL;
    unsigned char *want = malloc(bytes + 1), *got = malloc(bytes + 1);
    int ok = want && got && lp->data && tr_tensor_count(lp) == count &&
             ops->buffer_alloc(backend, bytes + 1, &buf) == HORA_OK;
    if (ok) {
        tr_tensor_t t = tr_tensor_plain(buf, lp->dtype, ops->memory, 1, (const int[]){(int)count});
        ok = ops->cast(backend, master, &t) == HORA_OK && ops->download(backend, &t, want) == HORA_OK &&
             ops->download(backend, lp, got) == HORA_OK && memcmp(want, got, bytes) == 0;
    }
    printf("  %-44s %s\n", "params_lp = bf16(params) after the steps", ok ? "ok" : "FAIL");
    if (!ok) golden_failures++;
    if (buf) ops->buffer_free(backend, buf);
    free(want);
    free(got);
}

static int mixed_refs(const golden_t *g, const char *name, size_t count, float *ref[REF_COUNT]);

/* Every parameter's change from its initial value (which every run shares
 * exactly, and which would dwarf the change), hora's against the
 * references' param_after<step>/. delta: REF_COUNT + 1 buffers of the
 * params arena's size; host one more. */
static void compare_updates(const golden_t *g, tr_model_t *model, int step, mixed_group_t group, float *host,
                            float *delta[REF_COUNT + 1])
{
    tr_backend_t *backend = tr_model_backend(model);
    for (int i = 0; i < tr_model_param_count(model); i++) {
        const tr_param_t *p = tr_model_param(model, i);
        const entry_t *e0 = golden_nth(g, "param/", i);
        float *ref[REF_COUNT];
        char name[96], what[96];
        snprintf(name, sizeof(name), "param_after%d/%s", step, p->name);
        if (!e0 || mixed_refs(g, name, p->count, ref)) continue;
        if (backend->ops->download(backend, &p->value, host) != HORA_OK) {
            golden_failures++;
            continue;
        }
        const float *init = e0->data;
        for (size_t k = 0; k < p->count; k++) {
            delta[REF_COUNT][k] = host[k] - init[k];
            for (int r = 0; r < REF_COUNT; r++) delta[r][k] = ref[r][k] - init[k];
        }
        snprintf(what, sizeof(what), "update%s %s", step == 1 ? " step 1" : "", p->name);
        compare_mixed(group, what, delta[REF_COUNT], delta, p->count);
    }
}

/* The three references of entry name (prefixed per reference), count f32
 * values each, into ref[] (pointers into g); -1 if one is missing. */
static int mixed_refs(const golden_t *g, const char *name, size_t count, float *ref[REF_COUNT])
{
    for (int r = 0; r < REF_COUNT; r++) {
        char full[160];
        snprintf(full, sizeof(full), "%s%s", ref_prefix[r], name);
        const entry_t *e = golden_find(g, full);
        if (!e || e->dtype != 0 || e->count != count) {
            fprintf(stderr, "golden entry %s: missing or not %zu f32 values\n", full, count);
            golden_failures++;
            return -1;
        }
        ref[r] = e->data;
    }
    return 0;
}

/* Returns 0 when it ran, -1 on a failure (a backend without bf16 included:
 * only a missing GPU is a skip). */
int run_mixed(const char *path, const golden_t *g)
{
    const entry_t *meta = golden_find(g, "meta"), *hyper = golden_find(g, "hyper"), *mixed = golden_find(g, "mixed"),
                  *input = golden_find(g, "input"), *labels = golden_find(g, "labels");
    if (!meta || !hyper || !mixed || !input || !labels || meta->count < 10 || mixed->count != 2 ||
        ((int32_t *)mixed->data)[0] != 1 || ((int32_t *)mixed->data)[1] < 2) {
        fprintf(stderr, "%s: missing entries, or not a bf16 file\n", path);
        return -1;
    }
    const float *hp = hyper->data;
    const int steps = ((int32_t *)mixed->data)[1];
    memset(mixed_worst, 0, sizeof(mixed_worst));
    memset(mixed_failed, 0, sizeof(mixed_failed));
    tr_model_spec_t spec;
    const int n = golden_spec(meta, hyper, &spec);
    spec.compute_dtype = TR_DTYPE_BF16;
    spec.grad_dtype = TR_DTYPE_BF16;

    const struct tr_backend_ops *ops = tr_backend_find("cpu");
    tr_backend_config_t bc = {.threads = 1};
    tr_backend_t *backend;
    if (!ops || ops->init(&bc, &backend) != HORA_OK) {
        fprintf(stderr, "no cpu backend\n");
        return -1;
    }
    if (ops->compute_dtype(backend, TR_DTYPE_BF16) != HORA_OK) {
        printf("%s: FAIL: the cpu backend cannot compute in bf16 here: %s\n", path, status_message());
        ops->free(backend);
        return -1;
    }
    tr_model_t *model = NULL;
    tr_trainer_t *trainer = NULL;
    float *host = NULL, *delta[REF_COUNT + 1] = {NULL, NULL, NULL, NULL};
    if (tr_model_init(backend, &spec, n, 0, 1, &model) != HORA_OK) {
        fprintf(stderr, "model init failed\n");
        golden_failures++;
        goto out;
    }
    /* The f32 master from the file, then its bf16 copy for the layers. */
    if (golden_params_upload(g, model) || tr_model_sync_compute(model) != HORA_OK) {
        golden_failures++;
        goto out;
    }
    const int np = tr_model_param_count(model);
    const size_t classes = (size_t)spec.classes, pcount = tr_tensor_count(tr_model_arena(model, TR_ARENA_PARAMS));
    host = malloc((pcount + n * classes + 1) * sizeof(float));
    for (int k = 0; k <= REF_COUNT; k++) delta[k] = malloc((pcount + 1) * sizeof(float));
    if (!host || !delta[0] || !delta[1] || !delta[2] || !delta[3]) {
        golden_failures++;
        goto out;
    }

    /* The steps through the trainer: no loss scaling (bf16 has f32's
     * exponent range), PyTorch's SGD (weight decay on every parameter). */
    tr_step_config_t sc = {
        .overlap = 0,
        .label_smoothing = 0,
        .optim = {.momentum = hp[1], .weight_decay = hp[2], .nesterov = hp[3] != 0, .decay_bn_bias = 1},
        .loss_scale = {.mode = TR_LOSS_SCALE_NONE}};
    tr_run_state_t state = tr_run_state_begin(1);
    if (tr_trainer_init(model, &sc, &state, &trainer) != HORA_OK) {
        golden_failures++;
        goto out;
    }
    tr_tensor_t x = tr_tensor_plain(input->data, TR_DTYPE_F32, TR_MEMORY_HOST, 4,
                                    (const int[]){n, spec.in_channels, spec.height, spec.width});
    printf("%s: bf16 compute and gradients, %d steps, against PyTorch autocast bf16, autocast with hora's head\n"
           "  and bf16 gradients (emulated), and f32; max |hora - ref| / max |ref| per tensor\n",
           path, steps);
    float *ref[REF_COUNT];
    for (int s = 0; s < steps; s++) {
        float l = NAN;
        int skipped = -1;
        if (tr_trainer_step(trainer, &x, labels->data, hp[0], &l, &skipped) != HORA_OK || skipped != 0) {
            fprintf(stderr, "step %d failed or was skipped\n", s + 1);
            golden_failures++;
            goto out;
        }
        if (s > 0) continue;
        /* Step 1's forward and backward ran on the initial weights; the
         * optimizer left the logits and the grads arena as they were. */
        if (tr_model_logits(model, host) != HORA_OK) {
            golden_failures++;
            goto out;
        }
        if (mixed_refs(g, "logits", n * classes, ref) == 0)
            compare_mixed(MIXED_LOGITS, "logits (train mode, step 1)", host, ref, n * classes);
        if (mixed_refs(g, "loss", 1, ref) == 0) compare_mixed(MIXED_LOSS, "loss (step 1)", &l, ref, 1);
        for (int i = 0; i < np; i++) {
            const tr_param_t *p = tr_model_param(model, i);
            char name[96], what[96];
            snprintf(name, sizeof(name), "grad/%s", p->name);
            if (mixed_refs(g, name, p->count, ref)) continue;
            if (download_f32(backend, &p->grad, host) != HORA_OK) {
                golden_failures++;
                continue;
            }
            mixed_group_t group = p->kind == TR_PARAM_CONV_WEIGHT                               ? MIXED_GRAD_CONV
                                  : p->kind == TR_PARAM_BN_GAMMA || p->kind == TR_PARAM_BN_BETA ? MIXED_GRAD_BN
                                                                                                : MIXED_GRAD_FC;
            snprintf(what, sizeof(what), "grad %s", p->name);
            compare_mixed(group, what, host, ref, p->count);
        }
        compare_updates(g, model, 1, MIXED_UPDATE1, host, delta);
    }

    compare_updates(g, model, steps, MIXED_UPDATE, host, delta);
    check_compute_copy(model);

    /* Running statistics, as what the batches contributed: the mean from 0,
     * the variance less the initial 1's share (1 - momentum)^steps. */
    const double keep = pow(1.0 - hp[5], steps);
    for (int i = 0; i < tr_model_bn_count(model); i++) {
        const tr_bn_stats_t *b = tr_model_bn(model, i);
        for (int v = 0; v < 2; v++) {
            char name[128], what[96];
            snprintf(name, sizeof(name), "buffer_after%d/%s.running_%s", steps, b->name, v ? "var" : "mean");
            if (mixed_refs(g, name, b->channels, ref)) continue;
            if (ops->download(backend, v ? &b->var : &b->mean, host) != HORA_OK) {
                golden_failures++;
                continue;
            }
            const double base = v ? keep : 0.0;
            for (int c = 0; c < b->channels; c++) {
                delta[REF_COUNT][c] = (float)(host[c] - base);
                for (int r = 0; r < REF_COUNT; r++) delta[r][c] = (float)(ref[r][c] - base);
            }
            snprintf(what, sizeof(what), "running %s %s", v ? "var" : "mean", b->name);
            compare_mixed(MIXED_STATS, what, delta[REF_COUNT], delta, b->channels);
        }
    }

    if (tr_model_forward(model, &x, 0) != HORA_OK || tr_model_logits(model, host) != HORA_OK)
        golden_failures++;
    else if (mixed_refs(g, "logits_eval", n * classes, ref) == 0)
        compare_mixed(MIXED_EVAL, "logits (eval mode, after the steps)", host, ref, n * classes);
    mixed_summary();
out:
    tr_trainer_free(trainer);
    free(host);
    for (int k = 0; k <= REF_COUNT; k++) free(delta[k]);
    tr_model_free(model);
    ops->free(backend);
    return 0;
}
