/*
 * test_ops.c - checks every op of a compute backend (trainer/backends/backend.h),
 * on small shapes, against references written in the test (ops_*.c):
 *
 *  - forward results against naive double-precision loops (direct
 *    convolution, batch norm with the batch's or the running statistics,
 *    max / global average pooling, linear, relu, add, softmax
 *    cross-entropy with label smoothing), and the running statistics
 *    update (unbiased variance, as PyTorch);
 *  - every gradient against central finite differences of the backend's
 *    own forward pass, through a random projection L = sum(y * r) computed
 *    in double. Linear ops (conv, linear, average pooling, add) use a large
 *    step, which is exact for them; max pooling uses inputs spaced further
 *    apart than the step (no argmax flips); relu-like ops keep inputs away
 *    from the kink; batch norm uses a step small enough for its curvature;
 *  - layers are not tied to a batch size: one layer of each kind runs at a
 *    sequence of batch sizes (more distinct ones than it caches, then back
 *    to the first), every one checked in full;
 *  - the SGD step bit for bit against a scalar reference (torch.optim.SGD);
 *  - tensor import/export round trips (whole and a batch prefix), the
 *    blocked layouts' element positions, data movement, and the checks the
 *    ops make of their tensors' memory kind, dtype, layout and shape.
 *
 * Outputs are poisoned with NaN before each op, so an element an op forgets
 * to write fails (NaN never passes). One line per check group gives its
 * max abs error and max error relative to the largest reference value.
 *
 * Usage: test_ops [--block 0|1|8|16|-1] [--threads N] [-v]
 *   --block forces the cpu backend's activation layout (0 = its choice),
 *   -v prints the oneDNN implementation of every primitive.
 * Exit status 0 = all passed, 1 = something failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_test.h"

/* Batch sizes one layer runs at in turn: five distinct ones (one more than
 * a cpu layer caches, so the first is evicted), then the first two again. */
static const int batch_sweep[] = {2, 3, 1, 5, 4, 2, 3};
#define BATCH_SWEEP_COUNT ((int)(sizeof(batch_sweep) / sizeof(batch_sweep[0])))

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* keep our lines in order with the backend's stderr */
    tr_backend_config_t config = {.threads = 1, .verbose = 0, .channel_block = 0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--block") == 0 && i + 1 < argc)
            config.channel_block = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            config.threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "-v") == 0)
            config.verbose = 1;
        else {
            fprintf(stderr, "usage: %s [--block 0|1|8|16|-1] [--threads N] [-v]\n", argv[0]);
            return 2;
        }
    }
    ops = tr_backend_find("cpu");
    if (ops == NULL || ops->init(&config, &be) != HORA_OK) {
        fprintf(stderr, "test_ops: cannot start the cpu backend\n");
        return 1;
    }
    printf("test_ops: cpu backend, channel block %d (0 = auto), %d threads\n", config.channel_block, config.threads);

    test_api();
    test_data_movement();
    test_input_import(3, 3, 5, 7);
    test_input_import(2, 1, 4, 4);
    test_contract();
    static const int shapes[][4] = {{2, 1, 5, 5},  {2, 3, 7, 7},  {2, 8, 5, 6}, {1, 16, 3, 3},
                                    {2, 24, 2, 3}, {3, 32, 1, 1}, {2, 48, 4, 4}};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        test_tensor_roundtrip(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3]);

    static const tr_conv_desc_t convs[] = {
        {3, 7, 7, 16, 3, 1, 1, TR_DTYPE_F32, TR_DTYPE_F32},  /* stem, plain input */
        {3, 9, 9, 8, 7, 2, 3, TR_DTYPE_F32, TR_DTYPE_F32},   /* ResNet-50 style stem */
        {1, 6, 6, 16, 3, 1, 1, TR_DTYPE_F32, TR_DTYPE_F32},  /* one input channel (Fashion-MNIST) */
        {16, 6, 6, 16, 3, 1, 1, TR_DTYPE_F32, TR_DTYPE_F32}, /* basic block */
        {16, 7, 7, 32, 3, 2, 1, TR_DTYPE_F32, TR_DTYPE_F32}, /* strided */
        {16, 7, 7, 32, 1, 2, 0, TR_DTYPE_F32, TR_DTYPE_F32}, /* projection shortcut */
        {32, 5, 5, 8, 1, 1, 0, TR_DTYPE_F32, TR_DTYPE_F32},  /* bottleneck reduce */
        {8, 5, 5, 16, 3, 1, 0, TR_DTYPE_F32, TR_DTYPE_F32},  /* no padding */
        {5, 6, 6, 7, 3, 1, 1, TR_DTYPE_F32, TR_DTYPE_F32},   /* odd channels: plain layout */
    };
    for (size_t i = 0; i < sizeof(convs) / sizeof(convs[0]); i++) test_conv(NULL, &convs[i], 2);

    static const int bns[][4] = {{2, 8, 6, 6}, {2, 16, 5, 5}, {2, 3, 7, 7}, {4, 32, 3, 3}};
    for (size_t i = 0; i < sizeof(bns) / sizeof(bns[0]); i++)
        for (int relu = 0; relu < 2; relu++)
            test_bn(NULL,
                    &(tr_bn_desc_t){bns[i][1], bns[i][2], bns[i][3], 1e-5f, 0.1f, relu, TR_DTYPE_F32, TR_DTYPE_F32},
                    bns[i][0]);

    static const tr_pool_desc_t pools[] = {
        {TR_POOL_MAX, 16, 7, 7, 3, 2, 1, TR_DTYPE_F32},
        {TR_POOL_MAX, 8, 6, 6, 3, 2, 1, TR_DTYPE_F32},
        {TR_POOL_MAX, 3, 5, 5, 3, 2, 1, TR_DTYPE_F32},
        {TR_POOL_MAX, 16, 6, 6, 2, 2, 0, TR_DTYPE_F32},
        {TR_POOL_GLOBAL_AVERAGE, 16, 5, 5, 0, 0, 0, TR_DTYPE_F32},
        {TR_POOL_GLOBAL_AVERAGE, 3, 4, 4, 0, 0, 0, TR_DTYPE_F32},
        {TR_POOL_GLOBAL_AVERAGE, 32, 7, 7, 0, 0, 0, TR_DTYPE_F32},
    };
    for (size_t i = 0; i < sizeof(pools) / sizeof(pools[0]); i++) test_pool(NULL, &pools[i], 2);

    test_linear(NULL, &(tr_linear_desc_t){16, 10, TR_DTYPE_F32, TR_DTYPE_F32}, 2);
    test_linear(NULL, &(tr_linear_desc_t){7, 5, TR_DTYPE_F32, TR_DTYPE_F32}, 3);
    test_linear(NULL, &(tr_linear_desc_t){32, 10, TR_DTYPE_F32, TR_DTYPE_F32}, 2);

    /* One layer of each kind through the batch sweep. */
    {
        const tr_conv_desc_t cd = {16, 5, 5, 16, 3, 1, 1, TR_DTYPE_F32, TR_DTYPE_F32};
        const tr_bn_desc_t bd = {16, 4, 4, 1e-5f, 0.1f, 1, TR_DTYPE_F32, TR_DTYPE_F32};
        const tr_pool_desc_t pd = {TR_POOL_MAX, 16, 6, 6, 3, 2, 1, TR_DTYPE_F32};
        const tr_linear_desc_t ld = {16, 10, TR_DTYPE_F32, TR_DTYPE_F32};
        tr_layer_t *conv = NULL, *bn = NULL, *pool = NULL, *linear = NULL;
        STATUS_OK(ops->conv_create(be, &cd, &conv));
        STATUS_OK(ops->bn_create(be, &bd, &bn));
        STATUS_OK(ops->pool_create(be, &pd, &pool));
        STATUS_OK(ops->linear_create(be, &ld, &linear));
        printf("== one layer of each kind at batch sizes");
        for (int i = 0; i < BATCH_SWEEP_COUNT; i++) printf(" %d", batch_sweep[i]);
        printf("\n");
        for (int i = 0; i < BATCH_SWEEP_COUNT && conv && bn && pool && linear; i++) {
            test_conv(conv, &cd, batch_sweep[i]);
            test_bn(bn, &bd, batch_sweep[i]);
            test_pool(pool, &pd, batch_sweep[i]);
            test_linear(linear, &ld, batch_sweep[i]);
        }
        ops->layer_free(conv);
        ops->layer_free(bn);
        ops->layer_free(pool);
        ops->layer_free(linear);
    }

    test_eltwise(2, 16, 5, 5);
    test_eltwise(2, 3, 6, 6);

    test_softmax_xent(4, 10, 0.0f);
    test_softmax_xent(4, 10, 0.1f);
    test_softmax_xent(3, 7, 0.3f);

    test_sgd(1);
    test_sgd(1003);
    test_sgd(70001); /* large enough for the threaded path */

    ops->free(be);
    printf("test_ops: %s (%d checks, %d failed)\n", failures ? "FAIL" : "PASS", checks, failures);
    return failures ? 1 : 0;
}
