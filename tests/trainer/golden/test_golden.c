/*
 * test_golden.c - hora's cpu backend + model + optimizer against PyTorch.
 *
 * tools/make-golden wrote, with PyTorch, a tiny ResNet's weights, one batch,
 * the logits, the loss (also with label smoothing), every gradient, the
 * parameters and BN running statistics after two Nesterov SGD steps, and the
 * eval-mode logits after them (format: tests/trainer/golden/README.md). This test
 * builds the same network with hora, loads the weights, and compares every
 * tensor, printing the max abs / rel error of each.
 *
 * A file with a `mixed` entry (resnet8-cifar-bf16.bin) is a bf16 run under
 * PyTorch's CPU autocast, next to the same steps emulating hora's head and
 * in f32: hora trains it in bf16 through the trainer and is compared with
 * all three (run_mixed in golden_bf16.c, which explains the bounds).
 *
 * usage: test_golden FILE.bin...
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "model.h"
#include "optim.h"
#include "train.h"

/* |a - b| <= atol + rtol |b| everywhere; prints the worst errors. */
static void compare(const char *what, const float *got, const float *want, size_t n, double atol, double rtol)
{
    double max_abs = 0, max_rel = 0, max_ref = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        double ref = fabs((double)want[i]);
        if (!(d <= atol + rtol * ref)) bad++;
        if (!(d <= max_abs)) max_abs = isnan(d) ? INFINITY : d;
        if (ref > 1e-6 && d / ref > max_rel) max_rel = d / ref;
        if (ref > max_ref) max_ref = ref;
    }
    printf("  %-44s n=%-6zu max|ref| %.3e  max abs err %.3e  max rel err %.3e  %s\n", what, n, max_ref, max_abs,
           max_rel, bad ? "FAIL" : "ok");
    if (bad) golden_failures++;
}

/* The loss of host logits with label smoothing, through the backend's op:
 * logits, labels, loss and gradient in backend buffers, the loss downloaded. */
static hora_status_t smoothed_loss(tr_backend_t *backend, const float *logits, const int32_t *labels, int n, int k,
                                   float smoothing, float *loss)
{
    const struct tr_backend_ops *ops = backend->ops;
    void *buf[4] = {NULL, NULL, NULL, NULL};
    const size_t bytes[4] = {(size_t)n * k * sizeof(float), (size_t)n * sizeof(int32_t), sizeof(float),
                             (size_t)n * k * sizeof(float)};
    hora_status_t status = HORA_OK;
    for (int i = 0; i < 4 && status == HORA_OK; i++) status = ops->buffer_alloc(backend, bytes[i], &buf[i]);
    if (status == HORA_OK) {
        tr_tensor_t lt = tr_tensor_plain(buf[0], TR_DTYPE_F32, ops->memory, 2, (const int[]){n, k});
        tr_tensor_t yt = tr_tensor_plain(buf[1], TR_DTYPE_I32, ops->memory, 1, (const int[]){n});
        tr_tensor_t st = tr_tensor_plain(buf[2], TR_DTYPE_F32, ops->memory, 1, (const int[]){1});
        tr_tensor_t dt = tr_tensor_plain(buf[3], TR_DTYPE_F32, ops->memory, 2, (const int[]){n, k});
        status = ops->upload(backend, &lt, logits);
        if (status == HORA_OK) status = ops->upload(backend, &yt, labels);
        if (status == HORA_OK) status = ops->softmax_xent(backend, &lt, &yt, smoothing, 1.0f, &st, &dt);
        if (status == HORA_OK) status = ops->download(backend, &st, loss);
    }
    for (int i = 0; i < 4; i++)
        if (buf[i]) ops->buffer_free(backend, buf[i]);
    return status;
}

/* Inference does not depend on the batch: the golden batch run one sample
 * at a time (every batch size down to 1, with a layer's cached primitives
 * for each) and run twice over in one batch of 2n (more than the model was
 * made for: its activations grow) gives the golden eval logits. */
static void eval_any_batch(tr_model_t *model, const tr_tensor_t *x, const float *want, int classes)
{
    const int n = x->n;
    const size_t sample = (size_t)x->c * x->h * x->w, row = (size_t)classes;
    float *in2 = malloc(2 * n * sample * sizeof(float)), *got = malloc(2 * n * row * sizeof(float));
    if (!in2 || !got) {
        golden_failures++;
        free(in2);
        free(got);
        return;
    }
    for (int i = 0; i < n; i++) {
        tr_tensor_t one = tr_tensor_plain((float *)x->data + i * sample, TR_DTYPE_F32, TR_MEMORY_HOST, 4,
                                          (const int[]){1, x->c, x->h, x->w});
        if (tr_model_forward(model, &one, 0) != HORA_OK || tr_model_logits(model, got + i * row) != HORA_OK)
            golden_failures++;
    }
    compare("logits (eval mode, one sample at a time)", got, want, n * row, 1e-4, 1e-4);
    memcpy(in2, x->data, n * sample * sizeof(float));
    memcpy(in2 + n * sample, x->data, n * sample * sizeof(float));
    tr_tensor_t twice = tr_tensor_plain(in2, TR_DTYPE_F32, TR_MEMORY_HOST, 4, (const int[]){2 * n, x->c, x->h, x->w});
    if (tr_model_forward(model, &twice, 0) != HORA_OK || tr_model_logits(model, got) != HORA_OK ||
        tr_model_capacity(model) < 2 * n)
        golden_failures++;
    compare("logits (eval mode, the batch twice in one)", got, want, n * row, 1e-4, 1e-4);
    compare("logits (eval mode, the batch twice in one, 2nd copy)", got + n * row, want, n * row, 1e-4, 1e-4);
    free(in2);
    free(got);
}

/* The model spec of a file's meta and hyper entries (f32; the caller sets
 * the dtypes); returns the batch size. */
static int run_file(const char *path)
{
    golden_t g = {0};
    if (golden_load(path, &g)) return -1;
    if (golden_find(&g, "mixed")) {
        int rc = run_mixed(path, &g);
        golden_free(&g);
        return rc;
    }
    printf("%s\n", path);
    const entry_t *meta = golden_find(&g, "meta"), *hyper = golden_find(&g, "hyper"), *input = golden_find(&g, "input"),
                  *labels = golden_find(&g, "labels"), *logits = golden_find(&g, "logits"),
                  *loss = golden_find(&g, "loss"), *loss_s = golden_find(&g, "loss_smooth"),
                  *logits_eval = golden_find(&g, "logits_eval");
    if (!meta || !hyper || !input || !labels || !logits || !loss || !loss_s || !logits_eval || meta->count < 10) {
        fprintf(stderr, "%s: missing entries\n", path);
        golden_free(&g);
        return -1;
    }
    const float *hp = hyper->data;
    tr_model_spec_t spec;
    int n = golden_spec(meta, hyper, &spec);

    const struct tr_backend_ops *ops = tr_backend_find("cpu");
    tr_backend_config_t bc = {.threads = 1};
    tr_backend_t *backend;
    tr_model_t *model;
    float *host = NULL; /* downloads */
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

    int np = tr_model_param_count(model);
    if (golden_params_upload(&g, model)) {
        golden_failures++;
        goto out;
    }
    tr_tensor_t x = tr_tensor_plain(input->data, TR_DTYPE_F32, TR_MEMORY_HOST, 4,
                                    (const int[]){n, spec.in_channels, spec.height, spec.width});
    host = malloc((logits->count + tr_tensor_count(tr_model_arena(model, TR_ARENA_PARAMS)) + 1) * sizeof(float));
    if (!host) {
        golden_failures++;
        goto out;
    }

    /* Forward + loss + gradients. */
    if (tr_model_forward(model, &x, 1) != HORA_OK || tr_model_logits(model, host) != HORA_OK) {
        golden_failures++;
        goto out;
    }
    compare("logits (train mode)", host, logits->data, logits->count, 1e-4, 1e-4);
    float l_smooth;
    if (smoothed_loss(backend, host, labels->data, n, spec.classes, hp[6], &l_smooth) != HORA_OK) golden_failures++;
    compare("loss, label smoothing 0.1", &l_smooth, loss_s->data, 1, 1e-5, 1e-5);
    float l;
    if (tr_model_backward(model, labels->data, 0.0f, 1.0f, NULL, NULL, &l) != HORA_OK) {
        golden_failures++;
        goto out;
    }
    compare("loss", &l, loss->data, 1, 1e-5, 1e-5);
    for (int i = 0; i < np; i++) {
        const tr_param_t *p = tr_model_param(model, i);
        char what[96];
        snprintf(what, sizeof(what), "grad %s", p->name);
        /* Gradients through BN can be large relative to their entries near
         * zero; scale atol by the tensor's magnitude. */
        const entry_t *e = golden_nth(&g, "grad/", i);
        double mag = 0;
        for (size_t k = 0; k < e->count; k++) mag = fmax(mag, fabs(((float *)e->data)[k]));
        if (ops->download(backend, &p->grad, host) != HORA_OK) golden_failures++;
        compare(what, host, e->data, p->count, 1e-4 * mag + 1e-7, 1e-3);
    }

    /* Two Nesterov SGD steps on the same batch (PyTorch: weight decay on
     * every parameter). */
    tr_step_config_t sc = {
        .overlap = 0,
        .label_smoothing = 0,
        .optim = {.momentum = hp[1], .weight_decay = hp[2], .nesterov = hp[3] != 0, .decay_bn_bias = 1}};
    tr_run_state_t state = tr_run_state_begin(1);
    tr_trainer_t *trainer;
    if (tr_trainer_init(model, &sc, &state, &trainer) != HORA_OK) {
        golden_failures++;
        goto out;
    }
    /* The state above is step 1's forward/backward; redo it inside the step
     * so the running statistics see exactly two batches, as PyTorch's did. */
    for (int i = 0; i < tr_model_bn_count(model); i++) {
        const tr_bn_stats_t *b = tr_model_bn(model, i);
        for (int c = 0; c < b->channels; c++) {
            host[c] = 0.0f;
            host[b->channels + c] = 1.0f;
        }
        tr_tensor_t mean = b->mean, var = b->var;
        if (ops->upload(backend, &mean, host) != HORA_OK || ops->upload(backend, &var, host + b->channels) != HORA_OK)
            golden_failures++;
    }
    for (int s = 0; s < 2; s++)
        if (tr_trainer_step(trainer, &x, labels->data, hp[0], &l, NULL) != HORA_OK) golden_failures++;
    tr_trainer_free(trainer);
    for (int i = 0; i < np; i++) {
        const tr_param_t *p = tr_model_param(model, i);
        char what[96];
        snprintf(what, sizeof(what), "after 2 steps %s", p->name);
        if (ops->download(backend, &p->value, host) != HORA_OK) golden_failures++;
        compare(what, host, golden_nth(&g, "param_after2/", i)->data, p->count, 1e-5, 1e-4);
    }
    for (int i = 0; i < tr_model_bn_count(model); i++) {
        const tr_bn_stats_t *b = tr_model_bn(model, i);
        const entry_t *mean = golden_nth(&g, "buffer_after2/", 2 * i),
                      *var = golden_nth(&g, "buffer_after2/", 2 * i + 1);
        char what[96];
        if (!mean || !var || (int)mean->count != b->channels) {
            fprintf(stderr, "running statistics of %s missing\n", b->name);
            golden_failures++;
            continue;
        }
        if (ops->download(backend, &b->mean, host) != HORA_OK ||
            ops->download(backend, &b->var, host + b->channels) != HORA_OK)
            golden_failures++;
        snprintf(what, sizeof(what), "running mean %s", b->name);
        compare(what, host, mean->data, mean->count, 1e-5, 1e-4);
        snprintf(what, sizeof(what), "running var %s", b->name);
        compare(what, host + b->channels, var->data, var->count, 1e-5, 1e-4);
    }
    if (tr_model_forward(model, &x, 0) != HORA_OK || tr_model_logits(model, host) != HORA_OK)
        golden_failures++;
    else
        compare("logits (eval mode, after 2 steps)", host, logits_eval->data, logits_eval->count, 1e-4, 1e-4);
    eval_any_batch(model, &x, logits_eval->data, spec.classes);
out:
    free(host);
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
        if (run_file(argv[i]) != 0) golden_failures++;
    printf("%s: %d failure(s)\n", golden_failures ? "FAIL" : "PASS", golden_failures);
    return golden_failures ? 1 : 0;
}
