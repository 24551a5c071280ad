/*
 * test_golden.c - hora's cpu backend + model + optimizer against PyTorch.
 *
 * tools/make-golden wrote, with PyTorch, a tiny ResNet's weights, one batch,
 * the logits, the loss (also with label smoothing), every gradient, the
 * parameters and BN running statistics after two Nesterov SGD steps, and the
 * eval-mode logits after them (format: tests/golden/README.md). This test
 * builds the same network with hora, loads the weights, and compares every
 * tensor, printing the max abs / rel error of each.
 *
 * usage: test_golden FILE.bin...
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "optim.h"
#include "train.h"

typedef struct {
    char name[128];
    uint32_t dtype, ndim, dims[8];
    size_t count;
    void *data;
} entry_t;

typedef struct {
    entry_t *e;
    int n;
} golden_t;

static int read_u32(FILE *f, uint32_t *v)
{
    unsigned char b[4];
    if (fread(b, 1, 4, f) != 4)
        return -1;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}

static int golden_load(const char *path, golden_t *g)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    char magic[8];
    uint32_t version, count;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "HORAGLD1", 8) || read_u32(f, &version) ||
        version != 1 || read_u32(f, &count) || count > 100000) {
        fprintf(stderr, "%s: not a version-1 golden file\n", path);
        fclose(f);
        return -1;
    }
    g->e = calloc(count, sizeof(entry_t));
    g->n = (int)count;
    for (uint32_t i = 0; i < count; i++) {
        entry_t *e = &g->e[i];
        uint32_t nb;
        if (read_u32(f, &nb) || nb >= sizeof(e->name) || fread(e->name, 1, nb, f) != nb ||
            read_u32(f, &e->dtype) || e->dtype > 1 || read_u32(f, &e->ndim) || e->ndim > 8)
            goto bad;
        e->count = 1;
        for (uint32_t k = 0; k < e->ndim; k++) {
            if (read_u32(f, &e->dims[k]))
                goto bad;
            e->count *= e->dims[k];
        }
        if (e->count > (1u << 26))
            goto bad;
        e->data = malloc(e->count * 4 + 4);
        if (fread(e->data, 4, e->count, f) != e->count)
            goto bad;
    }
    fclose(f);
    return 0;
bad:
    fprintf(stderr, "%s: truncated or malformed entry\n", path);
    fclose(f);
    return -1;
}

static void golden_free(golden_t *g)
{
    for (int i = 0; i < g->n; i++)
        free(g->e[i].data);
    free(g->e);
}

static const entry_t *find(const golden_t *g, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->e[i].name, name) == 0)
            return &g->e[i];
    return NULL;
}

/* The index-th entry whose name starts with prefix. */
static const entry_t *nth(const golden_t *g, const char *prefix, int index)
{
    size_t pl = strlen(prefix);
    for (int i = 0; i < g->n; i++)
        if (strncmp(g->e[i].name, prefix, pl) == 0 && index-- == 0)
            return &g->e[i];
    return NULL;
}

static int failures;

/* |a - b| <= atol + rtol |b| everywhere; prints the worst errors. */
static void compare(const char *what, const float *got, const float *want, size_t n, double atol,
                    double rtol)
{
    double max_abs = 0, max_rel = 0, max_ref = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        double ref = fabs((double)want[i]);
        if (!(d <= atol + rtol * ref))
            bad++;
        if (!(d <= max_abs))
            max_abs = isnan(d) ? INFINITY : d;
        if (ref > 1e-6 && d / ref > max_rel)
            max_rel = d / ref;
        if (ref > max_ref)
            max_ref = ref;
    }
    printf("  %-44s n=%-6zu max|ref| %.3e  max abs err %.3e  max rel err %.3e  %s\n", what, n, max_ref,
           max_abs, max_rel, bad ? "FAIL" : "ok");
    if (bad)
        failures++;
}

static int run_file(const char *path)
{
    golden_t g = {0};
    if (golden_load(path, &g))
        return -1;
    printf("%s\n", path);
    const entry_t *meta = find(&g, "meta"), *hyper = find(&g, "hyper"), *input = find(&g, "input"),
                  *labels = find(&g, "labels"), *logits = find(&g, "logits"), *loss = find(&g, "loss"),
                  *loss_s = find(&g, "loss_smooth"), *logits_eval = find(&g, "logits_eval");
    if (!meta || !hyper || !input || !labels || !logits || !loss || !loss_s || !logits_eval || meta->count < 10) {
        fprintf(stderr, "%s: missing entries\n", path);
        golden_free(&g);
        return -1;
    }
    const int32_t *mi = meta->data;
    const float *hp = hyper->data;
    tr_model_spec_t spec = {0};
    spec.stem = mi[0] ? TR_STEM_IMAGENET : TR_STEM_CIFAR;
    spec.block = mi[1] ? TR_BLOCK_BOTTLENECK : TR_BLOCK_BASIC;
    int n = mi[2];
    spec.in_channels = mi[3];
    spec.height = mi[4];
    spec.width = mi[5];
    spec.classes = mi[6];
    spec.base_width = mi[7];
    spec.stage_count = mi[8];
    for (int i = 0; i < spec.stage_count && i < TR_MODEL_MAX_STAGES; i++)
        spec.blocks[i] = mi[9 + i];
    spec.bn_epsilon = hp[4];
    spec.bn_momentum = hp[5];

    const struct tr_backend_ops *ops = tr_backend_find("cpu");
    tr_backend_config_t bc = {.threads = 1};
    tr_backend_t *backend;
    tr_model_t *model;
    if (!ops || ops->init(&bc, &backend) != HORA_OK) {
        fprintf(stderr, "no cpu backend\n");
        golden_free(&g);
        return -1;
    }
    if (tr_model_init(backend, &spec, n, 0, 1, &model) != HORA_OK) {
        fprintf(stderr, "model init failed\n");
        golden_free(&g);
        return -1;
    }

    /* Parameters: same order and shapes as PyTorch's named_parameters. */
    float *params = tr_model_params(model, NULL);
    int np = tr_model_param_count(model);
    for (int i = 0; i < np; i++) {
        const tr_param_t *p = tr_model_param(model, i);
        const entry_t *e = nth(&g, "param/", i);
        if (!e || e->count != p->count || (int)e->ndim != p->ndim) {
            fprintf(stderr, "parameter %d (%s): golden has %s with %zu values\n", i, p->name,
                    e ? e->name : "nothing", e ? e->count : 0);
            failures++;
            goto out;
        }
        memcpy(params + p->offset, e->data, p->count * sizeof(float));
    }
    if (nth(&g, "param/", np)) {
        fprintf(stderr, "golden has more parameters than hora's model (%d)\n", np);
        failures++;
        goto out;
    }

    /* Forward + loss + gradients. */
    if (tr_model_forward(model, input->data, 1) != HORA_OK) {
        failures++;
        goto out;
    }
    compare("logits (train mode)", tr_model_logits(model), logits->data, logits->count, 1e-4, 1e-4);
    float l_smooth;
    float *dl = malloc(logits->count * sizeof(float));
    ops->softmax_xent(backend, tr_model_logits(model), labels->data, n, spec.classes, hp[6], &l_smooth, dl);
    free(dl);
    compare("loss, label smoothing 0.1", &l_smooth, loss_s->data, 1, 1e-5, 1e-5);
    float l;
    if (tr_model_backward(model, labels->data, 0.0f, NULL, NULL, &l) != HORA_OK) {
        failures++;
        goto out;
    }
    compare("loss", &l, loss->data, 1, 1e-5, 1e-5);
    float *grads = tr_model_grads(model, NULL);
    for (int i = 0; i < np; i++) {
        const tr_param_t *p = tr_model_param(model, i);
        char what[96];
        snprintf(what, sizeof(what), "grad %s", p->name);
        /* Gradients through BN can be large relative to their entries near
         * zero; scale atol by the tensor's magnitude. */
        const entry_t *e = nth(&g, "grad/", i);
        double mag = 0;
        for (size_t k = 0; k < e->count; k++)
            mag = fmax(mag, fabs(((float *)e->data)[k]));
        compare(what, grads + p->grad_offset, e->data, p->count, 1e-4 * mag + 1e-7, 1e-3);
    }

    /* Two Nesterov SGD steps on the same batch (PyTorch: weight decay on
     * every parameter). */
    tr_step_config_t sc = {.overlap = 0, .label_smoothing = 0,
                           .optim = {.momentum = hp[1], .weight_decay = hp[2], .nesterov = hp[3] != 0,
                                     .decay_bn_bias = 1}};
    tr_trainer_t *trainer;
    if (tr_trainer_init(model, &sc, &trainer) != HORA_OK) {
        failures++;
        goto out;
    }
    /* The state above is step 1's forward/backward; redo it inside the step
     * so the running statistics see exactly two batches, as PyTorch's did. */
    float *stats = tr_model_stats(model, NULL);
    for (int i = 0; i < tr_model_bn_count(model); i++) {
        const tr_bn_stats_t *b = tr_model_bn(model, i);
        for (int c = 0; c < b->channels; c++) {
            stats[b->offset + c] = 0.0f;
            stats[b->offset + b->channels + c] = 1.0f;
        }
    }
    for (int s = 0; s < 2; s++)
        if (tr_trainer_step(trainer, input->data, labels->data, hp[0], &l) != HORA_OK)
            failures++;
    tr_trainer_free(trainer);
    for (int i = 0; i < np; i++) {
        const tr_param_t *p = tr_model_param(model, i);
        char what[96];
        snprintf(what, sizeof(what), "after 2 steps %s", p->name);
        compare(what, params + p->offset, nth(&g, "param_after2/", i)->data, p->count, 1e-5, 1e-4);
    }
    for (int i = 0; i < tr_model_bn_count(model); i++) {
        const tr_bn_stats_t *b = tr_model_bn(model, i);
        const entry_t *mean = nth(&g, "buffer_after2/", 2 * i), *var = nth(&g, "buffer_after2/", 2 * i + 1);
        char what[96];
        if (!mean || !var || (int)mean->count != b->channels) {
            fprintf(stderr, "running statistics of %s missing\n", b->name);
            failures++;
            continue;
        }
        snprintf(what, sizeof(what), "running mean %s", b->name);
        compare(what, stats + b->offset, mean->data, mean->count, 1e-5, 1e-4);
        snprintf(what, sizeof(what), "running var %s", b->name);
        compare(what, stats + b->offset + b->channels, var->data, var->count, 1e-5, 1e-4);
    }
    if (tr_model_forward(model, input->data, 0) != HORA_OK)
        failures++;
    else
        compare("logits (eval mode, after 2 steps)", tr_model_logits(model), logits_eval->data,
                logits_eval->count, 1e-4, 1e-4);
out:
    tr_model_free(model);
    backend->ops->free(backend);
    golden_free(&g);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s GOLDEN.bin...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++)
        if (run_file(argv[i]))
            failures++;
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
