/*
 * bench_ops.c - times the cpu backend's layers on the shapes of the two
 * networks we race PyTorch with: every distinct convolution of ResNet-20
 * on 28x28x1 (Fashion-MNIST) at batch 64, and the main ResNet-50 shapes at
 * 224x224 batch 16, plus batch norm (+relu), the residual add and max
 * pooling. Each op runs a few times untimed, then the median of --iters
 * runs is reported with its GFLOP/s (convolutions: 2 N Cout Ho Wo Cin k^2
 * per pass). With -v the backend prints the oneDNN implementation of each
 * primitive as it is made (want jit:avx512_core / jit:avx2, not ref or gemm).
 *
 * For the ResNet-20 set it also sums forward + backward over the whole
 * network's convolutions (each shape times its count), a lower bound for
 * one training step. Not a test: built by meson, run by hand:
 *
 *   build/tests/trainer/ops/bench_ops --net resnet20 --threads 1 -v
 *   build/tests/trainer/ops/bench_ops --net resnet50 --threads 2
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"

static const struct tr_backend_ops *ops;
static tr_backend_t *be;
static int iters = 20;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what, hora_status_t status)
{
    fprintf(stderr, "bench_ops: %s failed (%d)\n", what, (int)status);
    exit(1);
}

#define RUN(call)                                    \
    do {                                             \
        hora_status_t status_ = (call);              \
        if (status_ != HORA_OK) die(#call, status_); \
    } while (0)

/* What one timed op needs: the op is a switch on kind over these fields. */
typedef enum {
    OP_CONV_FWD,
    OP_CONV_BWD_DATA,
    OP_CONV_BWD_WEIGHTS,
    OP_BN_FWD,
    OP_BN_BWD,
    OP_ADD_RELU,
    OP_POOL_FWD,
    OP_POOL_BWD
} op_kind_t;

typedef struct {
    op_kind_t kind;
    tr_layer_t *layer;
    tr_tensor_t *x, *y, *dy, *dx;
    tr_tensor_t *w, *dw, *gamma, *beta, *rm, *rv, *dgamma, *dbeta;
} op_t;

static void op_run(const op_t *o)
{
    switch (o->kind) {
    case OP_CONV_FWD: RUN(ops->conv_forward(o->layer, o->x, o->w, o->y)); break;
    case OP_CONV_BWD_DATA: RUN(ops->conv_backward_data(o->layer, o->dy, o->w, o->dx)); break;
    case OP_CONV_BWD_WEIGHTS: RUN(ops->conv_backward_weights(o->layer, o->x, o->dy, o->dw)); break;
    case OP_BN_FWD: RUN(ops->bn_forward_train(o->layer, o->x, o->gamma, o->beta, o->rm, o->rv, o->y)); break;
    case OP_BN_BWD: RUN(ops->bn_backward(o->layer, o->x, o->dy, o->gamma, o->dx, o->dgamma, o->dbeta)); break;
    case OP_ADD_RELU: RUN(ops->add_forward(be, o->x, o->dy, 1, o->y)); break;
    case OP_POOL_FWD: RUN(ops->pool_forward(o->layer, o->x, o->y)); break;
    case OP_POOL_BWD: RUN(ops->pool_backward(o->layer, o->dy, o->dx)); break;
    }
}

/* Median milliseconds of one op. */
static double op_time(const op_t *o)
{
    double *t = malloc(iters * sizeof(double));
    for (int i = 0; i < 3; i++) op_run(o);
    for (int i = 0; i < iters; i++) {
        double start = now_ms();
        op_run(o);
        t[i] = now_ms() - start;
    }
    qsort(t, iters, sizeof(double), cmp_double);
    double median = t[iters / 2];
    free(t);
    return median;
}

static float *filled(size_t count, float v)
{
    float *a = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) a[i] = v * (float)((i * 7919) % 13 - 6) / 6.0f;
    return a;
}

/* --dtype: what the layers compute in (activations, conv weights and their
 * gradients); BN parameters stay f32. */
static tr_dtype_t bench_dtype = TR_DTYPE_F32;

/* A convolution's geometry; bench_conv adds the dtypes. */
typedef struct {
    int c_in, h_in, w_in, c_out, kernel, stride, pad;
} conv_shape_t;

static tr_tensor_t make(int n, int c, int h, int w)
{
    tr_tensor_t t;
    RUN(ops->tensor_alloc(be, n, c, h, w, bench_dtype, &t));
    tr_tensor_t host =
        tr_tensor_plain(filled(tr_tensor_count(&t), 1.0f), TR_DTYPE_F32, TR_MEMORY_HOST, 4, (const int[]){n, c, h, w});
    RUN(ops->tensor_import(be, &host, &t));
    free(host.data);
    return t;
}

/* A plain parameter-like tensor of the cpu backend (host memory), filled. */
static tr_tensor_t param(int ndim, const int *dims, float v)
{
    tr_tensor_t t = tr_tensor_plain(NULL, TR_DTYPE_F32, TR_MEMORY_HOST, ndim, dims);
    t.data = filled(tr_tensor_count(&t), v);
    return t;
}

/* Times forward, backward data and backward weights of one convolution;
 * returns their sum in ms. */
static double bench_conv(conv_shape_t s, int n, int count)
{
    const tr_conv_desc_t d = {s.c_in, s.h_in, s.w_in, s.c_out, s.kernel, s.stride, s.pad, bench_dtype, bench_dtype};
    int ho = (d.h_in + 2 * d.pad - d.kernel) / d.stride + 1, wo = (d.w_in + 2 * d.pad - d.kernel) / d.stride + 1;
    const int w_dims[4] = {d.c_out, d.c_in, d.kernel, d.kernel};
    tr_layer_t *layer;
    RUN(ops->conv_create(be, &d, &layer));
    tr_tensor_t x = make(n, d.c_in, d.h_in, d.w_in), y = make(n, d.c_out, ho, wo);
    tr_tensor_t dy = make(n, d.c_out, ho, wo), dx = make(n, d.c_in, d.h_in, d.w_in);
    tr_tensor_t w = param(4, w_dims, 0.1f), dw = param(4, w_dims, 0.0f);
    tr_tensor_t w_lp = w, dw_lp = dw; /* the layer's dtype (f32: the same tensors) */
    if (bench_dtype != TR_DTYPE_F32) {
        w_lp = param(4, w_dims, 0.0f);
        dw_lp = param(4, w_dims, 0.0f);
        w_lp.dtype = dw_lp.dtype = bench_dtype;
        w_lp.bytes = dw_lp.bytes = tr_tensor_count(&w) * tr_dtype_size(bench_dtype);
        RUN(ops->cast(be, &w, &w_lp));
    }
    op_t o = {.layer = layer, .x = &x, .y = &y, .dy = &dy, .dx = &dx, .w = &w_lp, .dw = &dw_lp};
    double gflop = 2.0 * n * d.c_out * ho * wo * (double)d.c_in * d.kernel * d.kernel * 1e-9;
    double ms[3];
    static const op_kind_t kinds[3] = {OP_CONV_FWD, OP_CONV_BWD_DATA, OP_CONV_BWD_WEIGHTS};
    for (int i = 0; i < 3; i++) {
        o.kind = kinds[i];
        if (i == 1) op_run(&(op_t){.kind = OP_CONV_FWD, .layer = layer, .x = &x, .y = &y, .w = &w_lp});
        ms[i] = op_time(&o);
    }
    printf("conv %3dx%4dx%3dx%3d -> %4d k%d s%d p%d (x%d): fwd %7.3f ms %6.1f GF/s | bwd data %7.3f ms %6.1f GF/s"
           " | bwd weights %7.3f ms %6.1f GF/s\n",
           n, d.c_in, d.h_in, d.w_in, d.c_out, d.kernel, d.stride, d.pad, count, ms[0], gflop / ms[0] * 1e3, ms[1],
           gflop / ms[1] * 1e3, ms[2], gflop / ms[2] * 1e3);
    ops->layer_free(layer);
    ops->tensor_free(be, &x);
    ops->tensor_free(be, &y);
    ops->tensor_free(be, &dy);
    ops->tensor_free(be, &dx);
    free(w.data);
    free(dw.data);
    if (bench_dtype != TR_DTYPE_F32) {
        free(w_lp.data);
        free(dw_lp.data);
    }
    return ms[0] + ms[1] + ms[2];
}

static void bench_bn(int n, int c, int h, int w)
{
    tr_bn_desc_t d = {c, h, w, 1e-5f, 0.1f, 1, bench_dtype, TR_DTYPE_F32};
    tr_layer_t *layer;
    RUN(ops->bn_create(be, &d, &layer));
    tr_tensor_t x = make(n, c, h, w), y = make(n, c, h, w), dy = make(n, c, h, w), dx = make(n, c, h, w);
    tr_tensor_t gamma = param(1, &c, 1.0f), beta = param(1, &c, 0.1f), rm = param(1, &c, 0.0f);
    tr_tensor_t rv = param(1, &c, 1.0f), dgamma = param(1, &c, 0.0f), dbeta = param(1, &c, 0.0f);
    for (int i = 0; i < c; i++) ((float *)rv.data)[i] = 1.0f;
    op_t o = {.kind = OP_BN_FWD,
              .layer = layer,
              .x = &x,
              .y = &y,
              .dy = &dy,
              .dx = &dx,
              .gamma = &gamma,
              .beta = &beta,
              .rm = &rm,
              .rv = &rv,
              .dgamma = &dgamma,
              .dbeta = &dbeta};
    double fwd = op_time(&o);
    o.kind = OP_BN_BWD;
    double bwd = op_time(&o);
    o.kind = OP_ADD_RELU;
    double add = op_time(&o);
    double mb = tr_tensor_count(&x) * 4e-6;
    printf("bn+relu %3dx%4dx%3dx%3d: fwd %7.3f ms, bwd %7.3f ms | add+relu %7.3f ms (%.0f MB/s)\n", n, c, h, w, fwd,
           bwd, add, 3 * mb / add * 1e3);
    ops->layer_free(layer);
    ops->tensor_free(be, &x);
    ops->tensor_free(be, &y);
    ops->tensor_free(be, &dy);
    ops->tensor_free(be, &dx);
    tr_tensor_t *params[] = {&gamma, &beta, &rm, &rv, &dgamma, &dbeta};
    for (int i = 0; i < 6; i++) free(params[i]->data);
}

static void bench_maxpool(int n, int c, int h, int w)
{
    tr_pool_desc_t d = {TR_POOL_MAX, c, h, w, 3, 2, 1, bench_dtype};
    int ho = (h + 2 - 3) / 2 + 1, wo = (w + 2 - 3) / 2 + 1;
    tr_layer_t *layer;
    RUN(ops->pool_create(be, &d, &layer));
    tr_tensor_t x = make(n, c, h, w), y = make(n, c, ho, wo), dy = make(n, c, ho, wo), dx = make(n, c, h, w);
    op_t o = {.kind = OP_POOL_FWD, .layer = layer, .x = &x, .y = &y, .dy = &dy, .dx = &dx};
    double fwd = op_time(&o);
    o.kind = OP_POOL_BWD;
    double bwd = op_time(&o);
    printf("max pool 3x3 s2 %3dx%4dx%3dx%3d: fwd %7.3f ms, bwd %7.3f ms\n", n, c, h, w, fwd, bwd);
    ops->layer_free(layer);
    ops->tensor_free(be, &x);
    ops->tensor_free(be, &y);
    ops->tensor_free(be, &dy);
    ops->tensor_free(be, &dx);
}

static void bench_resnet20(int n)
{
    /* ResNet-20 (He et al. 2016, CIFAR variant) on 28x28x1: a 3x3 stem to
     * 16 channels, then 3 stages of 3 basic blocks (two 3x3 convs each) at
     * 16, 32, 64 channels; stages 2 and 3 start with a stride-2 conv and a
     * 1x1 stride-2 projection shortcut. */
    static const struct {
        conv_shape_t d;
        int count;
    } convs[] = {
        {{1, 28, 28, 16, 3, 1, 1}, 1},  {{16, 28, 28, 16, 3, 1, 1}, 6}, {{16, 28, 28, 32, 3, 2, 1}, 1},
        {{16, 28, 28, 32, 1, 2, 0}, 1}, {{32, 14, 14, 32, 3, 1, 1}, 5}, {{32, 14, 14, 64, 3, 2, 1}, 1},
        {{32, 14, 14, 64, 1, 2, 0}, 1}, {{64, 7, 7, 64, 3, 1, 1}, 5},
    };
    double total = 0;
    printf("== ResNet-20 28x28x1, batch %d\n", n);
    for (size_t i = 0; i < sizeof(convs) / sizeof(convs[0]); i++)
        total += convs[i].count * bench_conv(convs[i].d, n, convs[i].count);
    printf("ResNet-20 convolutions, forward + backward, whole network: %.2f ms per step\n", total);
    bench_bn(n, 16, 28, 28);
    bench_bn(n, 32, 14, 14);
    bench_bn(n, 64, 7, 7);
}

static void bench_resnet50(int n)
{
    static const conv_shape_t convs[] = {
        {3, 224, 224, 64, 7, 2, 3},  {64, 56, 56, 64, 1, 1, 0},     {64, 56, 56, 64, 3, 1, 1},
        {64, 56, 56, 256, 1, 1, 0},  {256, 56, 56, 64, 1, 1, 0},    {256, 56, 56, 128, 1, 1, 0},
        {128, 56, 56, 128, 3, 2, 1}, {128, 28, 28, 128, 3, 1, 1},   {256, 14, 14, 256, 3, 1, 1},
        {512, 7, 7, 512, 3, 1, 1},   {1024, 14, 14, 2048, 1, 2, 0},
    };
    printf("== ResNet-50 224x224x3, batch %d (main shapes)\n", n);
    for (size_t i = 0; i < sizeof(convs) / sizeof(convs[0]); i++) bench_conv(convs[i], n, 1);
    bench_bn(n, 64, 112, 112);
    bench_bn(n, 256, 56, 56);
    bench_maxpool(n, 64, 112, 112);
}

int main(int argc, char **argv)
{
    tr_backend_config_t config = {.threads = 1, .verbose = 0, .channel_block = 0};
    const char *net = "resnet20";
    int batch = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            config.threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--block") == 0 && i + 1 < argc)
            config.channel_block = atoi(argv[++i]);
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (strcmp(argv[i], "--net") == 0 && i + 1 < argc)
            net = argv[++i];
        else if (strcmp(argv[i], "--dtype") == 0 && i + 1 < argc)
            bench_dtype = strcmp(argv[++i], "bf16") == 0 ? TR_DTYPE_BF16 : TR_DTYPE_F32;
        else if (strcmp(argv[i], "-v") == 0)
            config.verbose = 1;
        else {
            fprintf(stderr,
                    "usage: %s [--net resnet20|resnet50] [--threads N] [--batch N] [--iters N] "
                    "[--block 0|1|8|16|-1] [--dtype f32|bf16] [-v]\n",
                    argv[0]);
            return 2;
        }
    }
    if (iters < 1) iters = 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    ops = tr_backend_find("cpu");
    if (ops == NULL) return 1;
    RUN(ops->init(&config, &be));
    printf("bench_ops: %d threads, median of %d runs\n", config.threads, iters);
    if (strcmp(net, "resnet50") == 0)
        bench_resnet50(batch > 0 ? batch : 16);
    else
        bench_resnet20(batch > 0 ? batch : 64);
    ops->free(be);
    return 0;
}
