/*
 * ops_misc.c - the stateless ops: relu (forward, backward, in place, NaN),
 * add (+ relu), softmax cross-entropy with label smoothing against double
 * loops and finite differences, and the SGD step bit for bit against a
 * scalar reference (torch.optim.SGD).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_test.h"

/* ---- relu, add -------------------------------------------------------------- */

typedef struct {
    tr_tensor_t a, b, y;
    float *a_host, *b_host, *y_host, *r;
    size_t count;
    int op; /* 0 relu(a), 1 a + b, 2 relu(a + b) */
} elt_ctx_t;

static double elt_loss(void *p)
{
    elt_ctx_t *e = p;
    tensor_put(&e->a, e->a_host);
    if (e->op == 0) {
        STATUS_OK(ops->relu_forward(be, &e->a, &e->y));
    } else {
        tensor_put(&e->b, e->b_host);
        STATUS_OK(ops->add_forward(be, &e->a, &e->b, e->op == 2, &e->y));
    }
    tensor_get(&e->y, e->y_host);
    return dot(e->y_host, e->r, e->count);
}

void test_eltwise(int n, int c, int h, int w)
{
    char what[128];
    static const char *const names[] = {"relu", "add", "add+relu"};
    elt_ctx_t e = {0};
    e.count = (size_t)n * c * h * w;
    e.a = tensor_make(n, c, h, w);
    e.b = tensor_make(n, c, h, w);
    e.y = tensor_make(n, c, h, w);
    tr_tensor_t dx = tensor_make(n, c, h, w);
    e.a_host = rand_array(e.count, 1.0f);
    e.b_host = rand_array(e.count, 1.0f);
    e.y_host = malloc(e.count * sizeof(float));
    e.r = rand_array(e.count, 1.0f);
    float *dx_host = malloc(e.count * sizeof(float));
    double *ref = malloc(e.count * sizeof(double));

    for (e.op = 0; e.op < 3; e.op++) {
        /* Keep the relu's input at least 0.05 from 0 (steps are 0.01). */
        for (size_t i = 0; i < e.count; i++) {
            float s = e.a_host[i] + (e.op ? e.b_host[i] : 0.0f);
            if (fabsf(s) < 0.05f) e.a_host[i] += s < 0 ? -0.1f : 0.1f;
        }
        tensor_poison(&e.y);
        elt_loss(&e);
        for (size_t i = 0; i < e.count; i++) {
            float s = e.op ? e.a_host[i] + e.b_host[i] : e.a_host[i]; /* exact: one f32 add */
            ref[i] = e.op != 1 && s < 0 ? 0.0 : s;
        }
        snprintf(what, sizeof(what), "%s %dx%dx%dx%d forward", names[e.op], n, c, h, w);
        compare(what, e.y_host, ref, e.count, 0.0);

        /* The gradient with respect to a: relu_backward (for add: dy, times
         * the mask when the relu is fused, which is relu_backward on y). */
        tensor_put(&dx, e.r);
        if (e.op != 1) {
            tr_tensor_t dy = tensor_make(n, c, h, w);
            tensor_put(&dy, e.r);
            tensor_poison(&dx);
            STATUS_OK(ops->relu_backward(be, &e.y, &dy, &dx));
            ops->tensor_free(be, &dy);
        }
        tensor_get(&dx, dx_host);
        snprintf(what, sizeof(what), "%s %dx%dx%dx%d backward a (fd)", names[e.op], n, c, h, w);
        fd_check(what, e.a_host, e.count, dx_host, e.op == 1 ? 0.5 : 1e-2, elt_loss, &e, NULL, 1e-4);
        if (e.op) {
            snprintf(what, sizeof(what), "%s %dx%dx%dx%d backward b (fd)", names[e.op], n, c, h, w);
            fd_check(what, e.b_host, e.count, dx_host, e.op == 1 ? 0.5 : 1e-2, elt_loss, &e, NULL, 1e-4);
        }
    }

    /* In place: y = x, and dx = dy. */
    tensor_put(&e.a, e.a_host);
    STATUS_OK(ops->relu_forward(be, &e.a, &e.a));
    tensor_get(&e.a, e.y_host);
    for (size_t i = 0; i < e.count; i++) ref[i] = e.a_host[i] < 0 ? 0.0 : e.a_host[i];
    snprintf(what, sizeof(what), "relu %dx%dx%dx%d in place", n, c, h, w);
    compare(what, e.y_host, ref, e.count, 0.0);
    tensor_put(&dx, e.r);
    STATUS_OK(ops->relu_backward(be, &e.a, &dx, &dx));
    tensor_get(&dx, dx_host);
    for (size_t i = 0; i < e.count; i++) ref[i] = e.a_host[i] > 0 ? e.r[i] : 0.0;
    snprintf(what, sizeof(what), "relu backward %dx%dx%dx%d in place", n, c, h, w);
    compare(what, dx_host, ref, e.count, 0.0);
    /* A NaN goes through relu, as in torch.relu. */
    e.a_host[0] = NAN;
    tensor_put(&e.a, e.a_host);
    STATUS_OK(ops->relu_forward(be, &e.a, &e.y));
    tensor_get(&e.y, e.y_host);
    CHECK(isnan(e.y_host[0]), "relu(NaN) = %g", (double)e.y_host[0]);
    /* Mismatched shapes are refused. */
    tr_tensor_t other = tensor_make(n, c, h + 1, w);
    CHECK(ops->add_forward(be, &e.a, &other, 0, &e.y) == HORA_ERR_INVALID_ARG, "add: shape mismatch accepted");
    ops->tensor_free(be, &other);

    ops->tensor_free(be, &e.a);
    ops->tensor_free(be, &e.b);
    ops->tensor_free(be, &e.y);
    ops->tensor_free(be, &dx);
    free(e.a_host);
    free(e.b_host);
    free(e.y_host);
    free(e.r);
    free(dx_host);
    free(ref);
}

/* ---- softmax cross-entropy ------------------------------------------------------ */

typedef struct {
    float *logits, *dlogits, smoothing;
    int32_t *labels;
    int n, k;
} xent_ctx_t;

/* The op on host arrays, through tensors: logits (n, k), labels (n), loss (1). */
static hora_status_t xent(const xent_ctx_t *x, float *loss, float *dlogits)
{
    const int nk[2] = {x->n, x->k};
    tr_tensor_t lt = host_tensor(x->logits, TR_DTYPE_F32, 2, nk), dt = host_tensor(dlogits, TR_DTYPE_F32, 2, nk);
    tr_tensor_t yt = host_tensor(x->labels, TR_DTYPE_I32, 1, &x->n);
    tr_tensor_t st = host_tensor(loss, TR_DTYPE_F32, 1, (const int[]){1});
    return ops->softmax_xent(be, &lt, &yt, x->smoothing, 1.0f, &st, &dt);
}

static double xent_loss(void *p)
{
    xent_ctx_t *x = p;
    float loss = NAN;
    float *scratch = malloc((size_t)x->n * x->k * sizeof(float));
    STATUS_OK(xent(x, &loss, scratch));
    free(scratch);
    return loss;
}

void test_softmax_xent(int n, int k, float smoothing)
{
    char what[128];
    size_t count = (size_t)n * k;
    xent_ctx_t x = {rand_array(count, 3.0f), nan_array(count), smoothing, malloc(n * sizeof(int32_t)), n, k};
    for (int i = 0; i < n; i++) x.labels[i] = (int32_t)(rng_u64() % k);
    x.logits[0] += 40.0f; /* exp would overflow without the max subtracted */
    double *dref = malloc(count * sizeof(double)), loss_ref = 0;
    for (int i = 0; i < n; i++) {
        const float *z = x.logits + (size_t)i * k;
        double lse = 0, m = z[0];
        for (int j = 0; j < k; j++) m = fmax(m, z[j]);
        for (int j = 0; j < k; j++) lse += exp(z[j] - m);
        lse = m + log(lse);
        for (int j = 0; j < k; j++) {
            double t = (1.0 - smoothing) * (j == x.labels[i]) + smoothing / k;
            loss_ref -= t * (z[j] - lse);
            dref[(size_t)i * k + j] = (exp(z[j] - lse) - t) / n;
        }
    }
    loss_ref /= n;

    float loss = NAN;
    STATUS_OK(xent(&x, &loss, x.dlogits));
    snprintf(what, sizeof(what), "softmax xent %dx%d smoothing %.2f loss", n, k, (double)smoothing);
    compare(what, &loss, &loss_ref, 1, 1e-6);
    snprintf(what, sizeof(what), "softmax xent %dx%d smoothing %.2f gradient", n, k, (double)smoothing);
    compare(what, x.dlogits, dref, count, 1e-6);
    snprintf(what, sizeof(what), "softmax xent %dx%d smoothing %.2f gradient (fd)", n, k, (double)smoothing);
    fd_check(what, x.logits, count, x.dlogits, 1e-2, xent_loss, &x, NULL, 1e-3);

    x.labels[n - 1] = k; /* out of range: refused, loss untouched */
    loss = 123.0f;
    CHECK(xent(&x, &loss, x.dlogits) == HORA_ERR_INVALID_ARG && loss == 123.0f, "softmax_xent: label k accepted");
    /* Labels must be i32: f32 labels are refused. */
    x.labels[n - 1] = 0;
    tr_tensor_t lt = host_tensor(x.logits, TR_DTYPE_F32, 2, (const int[]){n, k});
    tr_tensor_t yf = host_tensor(x.labels, TR_DTYPE_F32, 1, &n);
    tr_tensor_t st = host_tensor(&loss, TR_DTYPE_F32, 1, (const int[]){1});
    tr_tensor_t dt = host_tensor(x.dlogits, TR_DTYPE_F32, 2, (const int[]){n, k});
    CHECK(ops->softmax_xent(be, &lt, &yf, smoothing, 1.0f, &st, &dt) == HORA_ERR_INVALID_ARG,
          "softmax_xent: f32 labels accepted");
    free(x.logits);
    free(x.dlogits);
    free(x.labels);
    free(dref);
}

/* ---- SGD ----------------------------------------------------------------------- */

void test_sgd(size_t count)
{
    static const tr_sgd_args_t cases[] = {
        {0.1f, 0.9f, 5e-4f, 1, 1.0f}, {0.1f, 0.9f, 5e-4f, 0, 1.0f}, {0.05f, 0.9f, 0.0f, 1, 1.0f},
        {0.2f, 0.0f, 1e-4f, 0, 1.0f}, {0.01f, 0.5f, 0.0f, 0, 1.0f},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const tr_sgd_args_t *a = &cases[c];
        float *p = rand_array(count, 1.0f), *p_ref = malloc(count * sizeof(float));
        float *m = calloc(count + 1, sizeof(float)), *m_ref = calloc(count + 1, sizeof(float));
        memcpy(p_ref, p, count * sizeof(float));
        long mismatches = 0;
        const int dims[1] = {(int)count};
        tr_tensor_t pt = host_tensor(p, TR_DTYPE_F32, 1, dims), mt = host_tensor(m, TR_DTYPE_F32, 1, dims);
        for (int step = 0; step < 3; step++) {
            float *g = rand_array(count, 1.0f);
            tr_tensor_t gt = host_tensor(g, TR_DTYPE_F32, 1, dims);
            STATUS_OK(ops->sgd_step(be, &pt, NULL, &gt, a->momentum != 0.0f ? &mt : NULL, a));
            sgd_ref(p_ref, g, m_ref, count, a);
            for (size_t i = 0; i < count; i++)
                mismatches +=
                    memcmp(&p[i], &p_ref[i], sizeof(float)) != 0 || memcmp(&m[i], &m_ref[i], sizeof(float)) != 0;
            free(g);
        }
        CHECK(mismatches == 0, "sgd case %zu count %zu: %ld elements differ from the reference", c, count, mismatches);
        printf("%s sgd lr %.2f momentum %.1f wd %.0e nesterov %d, %zu x 3 steps: %ld bit mismatches\n",
               mismatches ? "FAIL" : "ok  ", (double)a->lr, (double)a->momentum, (double)a->weight_decay, a->nesterov,
               count, mismatches);
        free(p);
        free(p_ref);
        free(m);
        free(m_ref);
    }
    tr_sgd_args_t bad = {0.1f, 0.0f, 0.0f, 1, 1.0f};
    float one = 1.0f, two[2] = {1.0f, 2.0f};
    tr_tensor_t t1 = host_tensor(&one, TR_DTYPE_F32, 1, (const int[]){1});
    tr_tensor_t t2 = host_tensor(two, TR_DTYPE_F32, 1, (const int[]){2});
    CHECK(ops->sgd_step(be, &t1, NULL, &t1, NULL, &bad) == HORA_ERR_INVALID_ARG, "sgd: nesterov without momentum");
    tr_sgd_args_t plain = {0.1f, 0.0f, 0.0f, 0, 1.0f};
    CHECK(ops->sgd_step(be, &t2, NULL, &t1, NULL, &plain) == HORA_ERR_INVALID_ARG,
          "sgd: gradient of another shape accepted");
}
