/*
 * test_gpu_backend.c - every op of a compute backend (trainer/backends/backend.h)
 * against another on the same inputs, and a ResNet-8 training step on
 * both: by default the "cuda" backend (tested) against the "cpu" one (the
 * reference). bc.h lists the files; tests/trainer/cuda/README.md says how
 * to run it.
 *
 *   test_gpu_backend [--backends TEST,REF] [--ref-f32] [--test-block B]
 *                    [--only FAMILY[,FAMILY...]]
 *
 * --backends cpu,cpu runs the same checks with the cpu backend on both
 * sides (CI's check of this program where there is no GPU; --test-block 1
 * gives the tested side plain NCHW activations, so the two sides differ in
 * layout and kernels). --ref-f32: the reference computes everything in
 * f32 on the rounded inputs (what it does for f16, which the cpu backend
 * lacks). Families: conv bn pool linear eltwise tensor input xent finite
 * cast sgd data model.
 *
 * Prints one line per check (what, max abs error, error relative to the
 * reference's max |value|, l2 error relative to its l2 norm, the tolerance,
 * PASS/FAIL); exits 0 when every check passes, 1 when any fails, 77
 * (skipped, a `SKIP ...: reason` line) when the cuda backend is asked for
 * and no GPU is usable, or a backend asked for (cuda, cpu) is not built.
 *
 * Tolerances: max |test - ref| <= tol x max |ref| over the tensor; NaN and
 * Inf never pass (in either side's result), and every output is poisoned
 * with NaN before its op, so an element an op does not write fails. u is a
 * dtype's unit roundoff: 2^-24 (f32), 2^-11 = 4.9e-4 (f16), 2^-8 = 3.9e-3
 * (bf16). Inputs are the same dtype-rounded values on both sides; each op
 * accumulates in f32 and rounds its result once to the output's dtype, so
 * a low-precision result is off by at most u (reference in f32) or by one
 * ulp = 2u (both sides round, possibly apart) of |value| <= max |ref|.
 * The table (bc_tols) is in the output's dtype:
 *
 *   kind        f32     f16     bf16   why
 *   exact       0       0       0      copies, relu (and its mask), max pool
 *                                      forward (no ties: bc_pool), casts
 *                                      (bit for bit), round trips
 *   conv        2e-3    2e-3    1.6e-2 f32: cuDNN may take TF32 tensor-core
 *                                      engines (cuda_cudnn.c ranks tensor-core
 *                                      engines first; PyTorch allows TF32 for
 *                                      cuDNN convolutions too): inputs cut to
 *                                      a 10-bit mantissa, ~2^-11 per product,
 *                                      a few e-4 of max |y| over K terms of
 *                                      random sign; f16: one rounding (u)
 *                                      plus f32 order, 4u; bf16: 4u. dw uses
 *                                      the coarser of dtype and grad_dtype:
 *                                      cuDNN writes dw in the compute dtype
 *                                      first (trainer/backends/cuda/README.md)
 *   bn          1e-4    2e-3    1.6e-2 y, dgamma, dbeta: per-channel sums of
 *                                      up to 4096 values in different orders
 *                                      (chunked f32 + double vs oneDNN), times
 *                                      invstd <= 2; then 4u
 *   bn dx       2e-4    4e-3    3.2e-2 dx = (g - mean g - xhat mean(g xhat))
 *                                      gamma invstd: two such sums and a
 *                                      partial cancellation; 8u
 *   bn stats    2e-5    2e-5    2e-5   running mean / var, always f32, from the
 *                                      same rounded x (unbiased in double)
 *   sum         1e-4    2e-3    1.6e-2 global average pool (sums of h w values
 *                                      of random sign: max |y| is small next
 *                                      to the terms), max pool backward, the
 *                                      linear layer (products of f16/bf16
 *                                      values are exact in f32: only the
 *                                      order differs; y is f32 in every
 *                                      dtype); 4u
 *   add         0       1e-3    8e-3   one rounding of the same f32 sum: equal
 *                                      when both sides round (f32, bf16 on
 *                                      cpu), within u of the f32 reference
 *   xent        1e-5    2e-3    1.6e-2 loss and dlogits in double on both
 *                                      sides (kernels/include/k_cuda_step.h),
 *                                      dlogits rounded once to its dtype
 *   sgd         1e-6    1e-3    8e-3   one rounding per operation on both
 *                                      sides; an FMA contraction moves the
 *                                      master by an ulp (1.2e-7 of |p| <= 1),
 *                                      which may move its f16/bf16 copy by an
 *                                      ulp (2u)
 *   model loss  1e-3    1e-2    5e-2   ResNet-8, one step, tested side in its
 *   model out   1e-2    1e-2    5e-2   compute dtype (gradients in it too)
 *   model grad  1e-1    2.5e-1  6e-1   against an f32 reference: the per-op
 *                                      errors compound over 7 convolutions
 *                                      and 7 BN layers forward and backward,
 *                                      and at initialisation the backbone's
 *                                      gradients are small sums of terms that
 *                                      cancel: measured on cpu, bf16 against
 *                                      f32 gives a worst tensor of 0.26 (66 u;
 *                                      tests/trainer/golden/golden_bf16.c finds 0.3
 *                                      for PyTorch's autocast against f32).
 *                                      Below the top ReLU the error does not
 *                                      shrink with u but with about its
 *                                      square root: it comes from ReLU masks
 *                                      that flip where a pre-activation is
 *                                      within u of 0 (their count goes with
 *                                      u, each one an error of order of the
 *                                      gradient). Measured on cpu (native
 *                                      f16, oneDNN 3.2), f16's l2 errors are
 *                                      bf16's / 2.4 (sqrt(8) = 2.8; fc.weight,
 *                                      above every ReLU, / 8), its worst
 *                                      tensor 0.12 (layer3.0.conv2, at loss
 *                                      scales 1, 64 and 1024). Both limits
 *                                      are ~2x the worst measured. f32 as
 *                                      f16's 1e-1: a TF32
 *                                      convolution has f16's 10-bit mantissa
 *                                      (a true f32 run shows ~1e-5). "out":
 *                                      logits and running statistics, which
 *                                      see no backward (bf16 measured 5.5e-3
 *                                      and 2.6e-3). The per-op checks above
 *                                      are the precise ones; these find
 *                                      wiring errors (wrong tensor, layout,
 *                                      stale copy: errors of order 1)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bc.h"
#include "cuda_ok.h"

static const struct {
    const char *name;
    double f32, f16, bf16;
} bc_tols[BC_TOL_COUNT] = {
    [BC_TOL_EXACT] = {"exact", 0.0, 0.0, 0.0},
    [BC_TOL_CONV] = {"conv", 2e-3, 2e-3, 1.6e-2},
    [BC_TOL_BN] = {"bn", 1e-4, 2e-3, 1.6e-2},
    [BC_TOL_BN_DX] = {"bn dx", 2e-4, 4e-3, 3.2e-2},
    [BC_TOL_BN_STATS] = {"bn stats", 2e-5, 2e-5, 2e-5},
    [BC_TOL_SUM] = {"sum", 1e-4, 2e-3, 1.6e-2},
    [BC_TOL_ADD] = {"add", 0.0, 1e-3, 8e-3},
    [BC_TOL_XENT] = {"xent", 1e-5, 2e-3, 1.6e-2},
    [BC_TOL_SGD] = {"sgd", 1e-6, 1e-3, 8e-3},
    [BC_TOL_MODEL_LOSS] = {"model loss", 1e-3, 1e-2, 5e-2},
    [BC_TOL_MODEL_OUT] = {"model out", 1e-2, 1e-2, 5e-2},
    [BC_TOL_MODEL_GRAD] = {"model grad", 1e-1, 2.5e-1, 6e-1},
};

double bc_tol(bc_tol_t tol, tr_dtype_t dtype)
{
    switch (dtype) {
    case TR_DTYPE_F16: return bc_tols[tol].f16;
    case TR_DTYPE_BF16: return bc_tols[tol].bf16;
    default: return bc_tols[tol].f32;
    }
}

/* ---- the shapes ------------------------------------------------------------ */

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const tr_dtype_t dtypes[] = {TR_DTYPE_F32, TR_DTYPE_F16, TR_DTYPE_BF16};

/* ResNet-like layers, each at two batch sizes: the CIFAR stem (3 channels,
 * stored padded to 8 by the cuda backend), stride-2 3x3 and 1x1 projection
 * convolutions on odd sizes, the ImageNet stem's 7x7/2, a bottleneck 1x1. */
typedef struct {
    int c_in, c_out, hw, kernel, stride, pad;
    int batches[2];
} conv_case_t;

static const conv_case_t conv_cases[] = {
    {3, 16, 32, 3, 1, 1, {4, 3}}, {16, 32, 17, 3, 2, 1, {3, 2}}, {16, 32, 17, 1, 2, 0, {3, 2}},
    {32, 32, 9, 3, 1, 1, {2, 5}}, {3, 16, 23, 7, 2, 3, {2, 1}},  {64, 16, 7, 1, 1, 0, {2, 3}},
    {64, 64, 8, 3, 1, 1, {2, 1}},
};

typedef struct {
    int c, hw, fuse_relu;
    int batches[2];
} bn_case_t;

/* c 3: an activation stored padded (cuda); not in a ResNet, in the contract. */
static const bn_case_t bn_cases[] = {
    {16, 32, 1, {4, 3}}, {32, 9, 0, {2, 5}}, {64, 7, 1, {2, 1}}, {16, 17, 0, {3, 2}}, {3, 5, 1, {2, 3}},
};

typedef struct {
    tr_pool_kind_t kind;
    int c, hw, kernel, stride, pad;
    int batches[2];
} pool_case_t;

static const pool_case_t pool_cases[] = {
    {TR_POOL_MAX, 16, 17, 3, 2, 1, {3, 2}},
    {TR_POOL_MAX, 64, 12, 3, 2, 1, {2, 1}},
    {TR_POOL_MAX, 8, 9, 2, 2, 0, {2, 3}},
    {TR_POOL_MAX, 3, 7, 3, 2, 1, {2, 1}},
    {TR_POOL_GLOBAL_AVERAGE, 64, 8, 0, 0, 0, {4, 3}},
    {TR_POOL_GLOBAL_AVERAGE, 32, 7, 0, 0, 0, {2, 5}},
    {TR_POOL_GLOBAL_AVERAGE, 3, 5, 0, 0, 0, {2, 1}},
};

typedef struct {
    int c_in, c_out;
    int batches[2];
} linear_case_t;

/* c_in 3: an input stored padded (cuda). */
static const linear_case_t linear_cases[] = {{64, 10, {8, 3}}, {512, 100, {4, 1}}, {32, 17, {5, 2}}, {3, 5, {2, 3}}};

static int family_on(const char *only, const char *family)
{
    if (only == NULL) return 1;
    const size_t len = strlen(family);
    for (const char *p = only; (p = strstr(p, family)) != NULL; p += len)
        if ((p == only || p[-1] == ',') && (p[len] == '\0' || p[len] == ',')) return 1;
    return 0;
}

/* Low-precision layers alternate their gradient dtype between the compute
 * dtype and f32 (what the all-reduce sends either way). */
static tr_dtype_t grad_for(tr_dtype_t dtype, int index)
{
    return dtype == TR_DTYPE_F32 || index % 2 == 0 ? dtype : TR_DTYPE_F32;
}

static void run_layers(const char *only)
{
    for (int di = 0; di < COUNT(dtypes); di++) {
        const tr_dtype_t dt = dtypes[di];
        if (family_on(only, "conv"))
            for (int i = 0; i < COUNT(conv_cases); i++) {
                const conv_case_t *k = &conv_cases[i];
                const tr_conv_desc_t d = {.c_in = k->c_in,
                                          .h_in = k->hw,
                                          .w_in = k->hw,
                                          .c_out = k->c_out,
                                          .kernel = k->kernel,
                                          .stride = k->stride,
                                          .pad = k->pad,
                                          .dtype = dt,
                                          .grad_dtype = grad_for(dt, i)};
                bc_conv(&d, k->batches, 2);
            }
        if (family_on(only, "bn"))
            for (int i = 0; i < COUNT(bn_cases); i++) {
                const bn_case_t *k = &bn_cases[i];
                const tr_bn_desc_t d = {.c = k->c,
                                        .h = k->hw,
                                        .w = k->hw,
                                        .epsilon = 1e-5f,
                                        .momentum = 0.1f,
                                        .fuse_relu = k->fuse_relu,
                                        .dtype = dt,
                                        .grad_dtype = grad_for(dt, i)};
                bc_bn(&d, k->batches, 2);
            }
        if (family_on(only, "pool"))
            for (int i = 0; i < COUNT(pool_cases); i++) {
                const pool_case_t *k = &pool_cases[i];
                const tr_pool_desc_t d = {.kind = k->kind,
                                          .c = k->c,
                                          .h = k->hw,
                                          .w = k->hw,
                                          .kernel = k->kernel,
                                          .stride = k->stride,
                                          .pad = k->pad,
                                          .dtype = dt};
                bc_pool(&d, k->batches, 2);
            }
        if (family_on(only, "linear"))
            for (int i = 0; i < COUNT(linear_cases); i++) {
                const linear_case_t *k = &linear_cases[i];
                const tr_linear_desc_t d = {
                    .c_in = k->c_in, .c_out = k->c_out, .dtype = dt, .grad_dtype = grad_for(dt, i)};
                bc_linear(&d, k->batches, 2);
            }
        if (family_on(only, "eltwise")) {
            bc_eltwise(3, 3, 9, 9, dt);
            bc_eltwise(2, 16, 17, 17, dt);
            bc_eltwise(1, 64, 7, 7, dt);
        }
        if (family_on(only, "tensor")) {
            bc_roundtrip(3, 3, 9, 7, dt);
            bc_roundtrip(4, 16, 5, 5, dt);
            bc_roundtrip(2, 24, 3, 1, dt);
            bc_roundtrip(1, 64, 1, 1, dt);
        }
        if (family_on(only, "input")) {
            bc_input(4, 4, 3, 9, 7, dt, 0);
            bc_input(4, 3, 3, 32, 32, dt, 1);
            bc_input(2, 2, 1, 5, 5, dt, 1);
        }
    }
}

static void run_steps(const char *only)
{
    if (family_on(only, "xent"))
        for (int di = 0; di < COUNT(dtypes); di++) {
            bc_softmax_xent(8, 10, 0.0f, 1.0f, dtypes[di]);
            bc_softmax_xent(5, 1000, 0.1f, 1024.0f, dtypes[di]);
            bc_softmax_xent(3, 17, 0.1f, 0.5f, dtypes[di]);
        }
    if (family_on(only, "finite"))
        for (int di = 0; di < COUNT(dtypes); di++) {
            bc_check_finite(1, dtypes[di]);
            bc_check_finite(4099, dtypes[di]);
        }
    if (family_on(only, "cast")) {
        const tr_dtype_t pairs[][2] = {{TR_DTYPE_F32, TR_DTYPE_F16},  {TR_DTYPE_F32, TR_DTYPE_BF16},
                                       {TR_DTYPE_F16, TR_DTYPE_F32},  {TR_DTYPE_BF16, TR_DTYPE_F32},
                                       {TR_DTYPE_F16, TR_DTYPE_BF16}, {TR_DTYPE_BF16, TR_DTYPE_F16},
                                       {TR_DTYPE_F32, TR_DTYPE_F32}};
        for (int i = 0; i < COUNT(pairs); i++) bc_cast(3001, pairs[i][0], pairs[i][1]);
    }
    if (family_on(only, "sgd")) {
        /* f32 master weights; f16/bf16 gradients with the loss scale undone;
         * the low-precision copy written in the same pass; plain SGD without
         * a momentum buffer. */
        bc_sgd(1037, TR_DTYPE_F32, 0, TR_DTYPE_F32, 0, 0.9f, 0.0f);
        bc_sgd(1037, TR_DTYPE_F32, 0, TR_DTYPE_F32, 1, 0.9f, 0.0f);
        bc_sgd(1037, TR_DTYPE_F16, 1, TR_DTYPE_F16, 1, 0.9f, 1.0f / 1024.0f);
        bc_sgd(1037, TR_DTYPE_BF16, 1, TR_DTYPE_BF16, 1, 0.9f, 0.0f);
        bc_sgd(1037, TR_DTYPE_F32, 1, TR_DTYPE_F16, 0, 0.9f, 0.5f);
        bc_sgd(1037, TR_DTYPE_F16, 1, TR_DTYPE_BF16, 1, 0.9f, 1.0f / 65536.0f);
        bc_sgd(1037, TR_DTYPE_F32, 0, TR_DTYPE_F32, 0, 0.0f, 0.0f);
    }
    if (family_on(only, "data")) {
        bc_data_movement(1);
        bc_data_movement(100003);
    }
    if (family_on(only, "model")) {
        bc_model("resnet8", TR_DTYPE_F32, 8, 1.0f);
        bc_model("resnet8", TR_DTYPE_F32, 3, 1.0f);
        bc_model("resnet8", TR_DTYPE_F16, 8, 1024.0f);
        bc_model("resnet8", TR_DTYPE_BF16, 8, 1.0f);
    }
}

static int side_open(bc_side_t *side, const char *name, int channel_block)
{
    side->ops = tr_backend_find(name);
    if (side->ops == NULL) {
        /* A build without one of the two (a cuda-only hora-train has no cpu
         * reference) has nothing to compare; any other name is a typo. */
        if (strcmp(name, "cuda") == 0 || strcmp(name, "cpu") == 0) {
            printf("SKIP test_gpu_backend: the %s backend is not built into this binary (backends: %s)\n", name,
                   tr_backend_names());
            exit(77);
        }
        fprintf(stderr, "test_gpu_backend: no backend \"%s\" (backends: %s)\n", name, tr_backend_names());
        exit(2);
    }
    const tr_backend_config_t config = {.threads = 0, .verbose = 0, .channel_block = channel_block};
    hora_status_t status = side->ops->init(&config, &side->be);
    if (status != HORA_OK) {
        printf("FAIL %s backend (%s): init returned %d\n", name, side->role, (int)status);
        return 0;
    }
    printf("%s: backend %s, activations in %s memory\n", side->role, name, tr_memory_name(side->ops->memory));
    return 1;
}

static void usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [--backends TEST,REF] [--ref-f32] [--test-block 0|1|8|16] [--only FAMILY,...]\n", argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    char test_name[32] = "cuda", ref_name[32] = "cpu";
    const char *only = NULL;
    int test_block = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--backends") == 0 && i + 1 < argc) {
            const char *arg = argv[++i], *comma = strchr(arg, ',');
            if (comma == NULL || comma == arg || comma[1] == '\0' || (size_t)(comma - arg) >= sizeof(test_name) ||
                strlen(comma + 1) >= sizeof(ref_name))
                usage(argv[0]);
            snprintf(test_name, sizeof(test_name), "%.*s", (int)(comma - arg), arg);
            snprintf(ref_name, sizeof(ref_name), "%s", comma + 1);
        } else if (strcmp(argv[i], "--ref-f32") == 0) {
            bc_ref_f32 = 1;
        } else if (strcmp(argv[i], "--test-block") == 0 && i + 1 < argc) {
            test_block = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            usage(argv[0]);
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* No usable GPU: skipped (exit 77) before any backend is made. */
    if (strcmp(test_name, "cuda") == 0 || strcmp(ref_name, "cuda") == 0) {
        if (tr_backend_find("cuda") == NULL) {
            printf("SKIP test_gpu_backend: the cuda backend is not built into this binary (backends: %s)\n",
                   tr_backend_names());
            return 77;
        }
        gpu_test_open("test_gpu_backend");
    }
    printf("test_gpu_backend: %s (tested) against %s (reference)%s\n", test_name, ref_name,
           bc_ref_f32 ? ", reference in f32" : "");
    if (!side_open(&bc_ref, ref_name, 0) || !side_open(&bc_test, test_name, test_block)) return 1;
    for (int di = 0; di < COUNT(dtypes); di++) {
        char why[256];
        for (int s = 0; s < 2; s++) {
            const bc_side_t *side = s == 0 ? &bc_ref : &bc_test;
            const int has = bc_has_dtype(side, dtypes[di], why, sizeof(why));
            printf("%s computes in %s: %s%s%s\n", side->role, tr_dtype_name(dtypes[di]), has ? "yes" : "no",
                   has ? "" : " - ", has ? "" : why);
        }
    }

    run_layers(only);
    run_steps(only);

    bc_test.ops->free(bc_test.be);
    bc_ref.ops->free(bc_ref.be);
    printf("test_gpu_backend: %d of %d checks failed\n", bc_failures, bc_checks);
    return bc_failures ? 1 : 0;
}
