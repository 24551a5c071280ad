/*
 * test_ops_mixed.c - checks the compute backend's mixed precision
 * (trainer/backends/backend.h, "dtypes (mixed precision)") op by op, on small shapes,
 * against references written in the test (ops_mixed_*.c, ops_mixed.h):
 *
 *  - every layer op computing in the 16-bit dtype under test (--dtype:
 *    bf16, or f16) with parameter gradients in f32, bf16 and f16, and in
 *    f32 with 16-bit gradients: convolution forward / backward data /
 *    backward weights, batch norm training (and its running statistics),
 *    inference and backward with and without the fused relu, max and
 *    global average pooling forward and backward, linear forward (f32
 *    logits) / backward data / backward weights and bias. References are
 *    double loops over the same rounded inputs, so each bound is the op's
 *    own rounding (ops_mixed.h). f16 gradients beyond 65504 must be inf.
 *    Several batch sizes per layer, channel counts that give nChw16c,
 *    nChw8c and plain layouts, and one layer of each kind through more
 *    batch sizes than a layer caches;
 *  - relu, relu backward and add (+ relu) on bf16 (f16) tensors bit for bit,
 *    NaN, -0, subnormals, ties and overflow included, in place too;
 *  - softmax cross-entropy into f32 / bf16 / f16 dlogits with gradient
 *    scales 1, 1024 and 65536: the values, each element correctly rounded
 *    once, and the loss unscaled;
 *  - cast between f32, bf16 and f16 and check_finite, bit for bit, on
 *    tensors long enough for the threaded paths; the mixed SGD step (16-bit
 *    gradients, gradient scale, low-precision copy) bit for bit against a
 *    scalar reference;
 *  - the dtype contract: compute_dtype decides whether f16 layers and
 *    tensors are made or refused (HORA_ERR_UNSUPPORTED), and every op
 *    refuses a tensor of the wrong dtype with HORA_ERR_INVALID_ARG.
 *
 * Outputs are poisoned with NaN before each op (NaN never passes). One line
 * per check; a summary of the worst error per op and dtype at the end.
 *
 * Usage: test_ops_mixed [--dtype bf16|f16] [--block 0|1|8|16|-1] [--threads N] [-v]
 *   --dtype f16 runs the layer checks in f16 only; where compute_dtype says
 *   the backend has no f16, it checks that f16 layers and tensors are
 *   refused with that reason instead (a CPU's answer, not a skip).
 *   --block forces the cpu backend's activation layout (0 = its choice).
 * Exit status 0 = all passed, 1 = something failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_mixed.h"

/* Batch sizes one layer runs at in turn: five distinct ones (one more than
 * a cpu layer caches, so the first is evicted), then the first two again. */
static const int batch_sweep[] = {2, 3, 1, 5, 4, 2, 3};
#define BATCH_SWEEP_COUNT ((int)(sizeof(batch_sweep) / sizeof(batch_sweep[0])))

static const tr_dtype_t grad_dtypes[] = {TR_DTYPE_F32, TR_DTYPE_BF16, TR_DTYPE_F16};

/* Every layer computing in dt, each with every gradient dtype, at batch
 * sizes 2 and 3 on one layer; then tensors and the element-wise ops in dt. */
static void run_layers(tr_dtype_t dt)
{
    static const tr_conv_desc_t convs[] = {
        {3, 7, 7, 16, 3, 1, 1, 0, 0},  /* stem, plain input */
        {3, 9, 9, 8, 7, 2, 3, 0, 0},   /* ResNet-50 style stem */
        {1, 6, 6, 16, 3, 1, 1, 0, 0},  /* one input channel */
        {16, 6, 6, 16, 3, 1, 1, 0, 0}, /* basic block */
        {16, 7, 7, 32, 3, 2, 1, 0, 0}, /* strided */
        {16, 7, 7, 32, 1, 2, 0, 0, 0}, /* projection shortcut */
        {32, 5, 5, 8, 1, 1, 0, 0, 0},  /* bottleneck reduce */
        {8, 5, 5, 16, 3, 1, 0, 0, 0},  /* no padding */
        {5, 6, 6, 7, 3, 1, 1, 0, 0},   /* odd channels: plain layout */
    };
    static const int bns[][3] = {{8, 6, 6}, {16, 5, 5}, {3, 7, 7}, {32, 3, 3}};
    static const tr_pool_desc_t pools[] = {
        {TR_POOL_MAX, 16, 7, 7, 3, 2, 1, 0},
        {TR_POOL_MAX, 8, 6, 6, 3, 2, 1, 0},
        {TR_POOL_MAX, 3, 5, 5, 3, 2, 1, 0},
        {TR_POOL_MAX, 16, 6, 6, 2, 2, 0, 0},
        {TR_POOL_GLOBAL_AVERAGE, 16, 5, 5, 0, 0, 0, 0},
        {TR_POOL_GLOBAL_AVERAGE, 3, 4, 4, 0, 0, 0, 0},
        {TR_POOL_GLOBAL_AVERAGE, 32, 7, 7, 0, 0, 0, 0},
    };
    static const int linears[][2] = {{16, 10}, {7, 5}, {32, 10}};

    printf("== layers computing in %s\n", tr_dtype_name(dt));
    for (size_t i = 0; i < sizeof(convs) / sizeof(convs[0]); i++)
        for (int g = 0; g < 3; g++) {
            tr_conv_desc_t d = convs[i];
            d.dtype = dt;
            d.grad_dtype = grad_dtypes[g];
            tr_layer_t *l = NULL;
            STATUS_OK(ops->conv_create(be, &d, &l));
            for (int n = 2; n <= 3 && l != NULL; n++) mixed_conv(l, &d, n);
            ops->layer_free(l);
        }
    for (size_t i = 0; i < sizeof(bns) / sizeof(bns[0]); i++)
        for (int relu = 0; relu < 2; relu++)
            for (int g = 0; g < 3; g++) {
                tr_bn_desc_t d = {bns[i][0], bns[i][1], bns[i][2], 1e-5f, 0.1f, relu, dt, grad_dtypes[g]};
                tr_layer_t *l = NULL;
                STATUS_OK(ops->bn_create(be, &d, &l));
                for (int n = 2; n <= 3 && l != NULL; n++) mixed_bn(l, &d, n);
                ops->layer_free(l);
            }
    for (size_t i = 0; i < sizeof(pools) / sizeof(pools[0]); i++) {
        tr_pool_desc_t d = pools[i];
        d.dtype = dt;
        tr_layer_t *l = NULL;
        STATUS_OK(ops->pool_create(be, &d, &l));
        for (int n = 2; n <= 3 && l != NULL; n++) mixed_pool(l, &d, n);
        ops->layer_free(l);
    }
    for (size_t i = 0; i < sizeof(linears) / sizeof(linears[0]); i++)
        for (int g = 0; g < 3; g++) {
            tr_linear_desc_t d = {linears[i][0], linears[i][1], dt, grad_dtypes[g]};
            tr_layer_t *l = NULL;
            STATUS_OK(ops->linear_create(be, &d, &l));
            for (int n = 2; n <= 3 && l != NULL; n++) mixed_linear(l, &d, n);
            ops->layer_free(l);
        }

    /* One layer of each kind through the batch sweep. */
    const tr_conv_desc_t cd = {16, 5, 5, 16, 3, 1, 1, dt, TR_DTYPE_BF16};
    const tr_bn_desc_t bd = {16, 4, 4, 1e-5f, 0.1f, 1, dt, TR_DTYPE_F16};
    const tr_pool_desc_t pd = {TR_POOL_MAX, 16, 6, 6, 3, 2, 1, dt};
    const tr_linear_desc_t ld = {16, 10, dt, TR_DTYPE_F16};
    tr_layer_t *conv = NULL, *bn = NULL, *pool = NULL, *linear = NULL;
    STATUS_OK(ops->conv_create(be, &cd, &conv));
    STATUS_OK(ops->bn_create(be, &bd, &bn));
    STATUS_OK(ops->pool_create(be, &pd, &pool));
    STATUS_OK(ops->linear_create(be, &ld, &linear));
    printf("== one %s layer of each kind at batch sizes", tr_dtype_name(dt));
    for (int i = 0; i < BATCH_SWEEP_COUNT; i++) printf(" %d", batch_sweep[i]);
    printf("\n");
    for (int i = 0; i < BATCH_SWEEP_COUNT && conv && bn && pool && linear; i++) {
        mixed_conv(conv, &cd, batch_sweep[i]);
        mixed_bn(bn, &bd, batch_sweep[i]);
        mixed_pool(pool, &pd, batch_sweep[i]);
        mixed_linear(linear, &ld, batch_sweep[i]);
    }
    ops->layer_free(conv);
    ops->layer_free(bn);
    ops->layer_free(pool);
    ops->layer_free(linear);

    static const int shapes[][4] = {{2, 1, 5, 5},  {2, 3, 7, 7},  {2, 8, 5, 6}, {1, 16, 3, 3},
                                    {2, 24, 2, 3}, {3, 32, 1, 1}, {2, 48, 4, 4}};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        mixed_tensor_roundtrip(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], dt);

    mixed_eltwise_exact(2, 16, 5, 5, dt);
    mixed_eltwise_exact(2, 3, 6, 6, dt);
    mixed_eltwise_exact(3, 8, 7, 7, dt);
    mixed_eltwise_exact(2, 16, 48, 48, dt); /* 73728 elements: the threaded path */
}

/* f32 layers with 16-bit parameter gradients (an f32 model all-reducing
 * in bf16 or f16). */
static void run_f32_layers_lp_grads(void)
{
    printf("== f32 layers with 16-bit gradients\n");
    for (int g = 1; g < 3; g++) {
        const tr_dtype_t gdt = grad_dtypes[g];
        const tr_conv_desc_t convs[] = {{3, 7, 7, 16, 3, 1, 1, TR_DTYPE_F32, gdt},
                                        {16, 6, 6, 16, 3, 1, 1, TR_DTYPE_F32, gdt}};
        for (int i = 0; i < 2; i++) mixed_conv(NULL, &convs[i], 2);
        for (int relu = 0; relu < 2; relu++)
            mixed_bn(NULL, &(tr_bn_desc_t){16, 5, 5, 1e-5f, 0.1f, relu, TR_DTYPE_F32, gdt}, 2);
        mixed_linear(NULL, &(tr_linear_desc_t){16, 10, TR_DTYPE_F32, gdt}, 3);
    }
}

static int finish(void)
{
    summary_print();
    ops->free(be);
    printf("test_ops_mixed: %s (%d checks, %d failed)\n", failures ? "FAIL" : "PASS", checks, failures);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* keep our lines in order with the backend's stderr */
    tr_backend_config_t config = {.threads = 1, .verbose = 0, .channel_block = 0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--block") == 0 && i + 1 < argc) {
            config.channel_block = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            config.threads = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--dtype") == 0 && i + 1 < argc) {
            i++;
            if (strcmp(argv[i], "bf16") == 0)
                mixed_dtype = TR_DTYPE_BF16;
            else if (strcmp(argv[i], "f16") == 0)
                mixed_dtype = TR_DTYPE_F16;
            else
                goto usage;
        } else if (strcmp(argv[i], "-v") == 0) {
            config.verbose = 1;
        } else {
            goto usage;
        }
    }
    ops = tr_backend_find("cpu");
    if (ops == NULL || ops->init(&config, &be) != HORA_OK) {
        fprintf(stderr, "test_ops_mixed: cannot start the cpu backend\n");
        return 1;
    }
    printf("test_ops_mixed: cpu backend, %s, channel block %d (0 = auto), %d threads\n", tr_dtype_name(mixed_dtype),
           config.channel_block, config.threads);
    int can = ops->compute_dtype(be, mixed_dtype) == HORA_OK;
    char why[256];
    snprintf(why, sizeof(why), "%s", can ? "" : status_message());

    if (mixed_dtype == TR_DTYPE_F16) {
        /* The layers in f16; what does not depend on the compute dtype
         * runs in the bf16 test. */
        if (can)
            run_layers(TR_DTYPE_F16);
        else
            mixed_contract_create(TR_DTYPE_F16); /* refused, with the reason */
        return finish();
    }

    mixed_rounding_reference();
    mixed_cast(1);
    mixed_cast(1003);
    mixed_cast(70001); /* large enough for the threaded path */
    mixed_cast_exhaustive();
    mixed_check_finite();
    mixed_sgd();
    mixed_softmax_xent(4, 10, 0.0f);
    mixed_softmax_xent(4, 10, 0.1f);
    mixed_softmax_xent(3, 7, 0.3f);
    mixed_softmax_rounding();
    mixed_contract();
    run_f32_layers_lp_grads();
    if (!can) {
        /* Everything above ran; the bf16 layers cannot, which this CPU's
         * training cannot do without: a failure, not a skip. */
        printf("FAIL test_ops_mixed: the backend does not compute in bf16: %s\n", why);
        failures++;
    } else {
        run_layers(TR_DTYPE_BF16);
    }
    return finish();

usage:
    fprintf(stderr, "usage: %s [--dtype bf16|f16] [--block 0|1|8|16|-1] [--threads N] [-v]\n", argv[0]);
    return 2;
}
