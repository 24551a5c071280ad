/*
 * test_cuda_conv_plan.c - deviceless cuDNN plans for every convolution the
 * cuda backend will run (trainer/backends/cuda/cuda_cudnn.h). No GPU, no driver, no
 * cudnnCreate: the device is a DEVICEPROP made from a JSON of device
 * properties (argv[1], tests/trainer/cuda/h200-device-properties.json).
 *
 * For ResNet-50 (ImageNet, 224x224) and ResNet-20 (CIFAR-style, 32x32),
 * every distinct convolution as tr_model_conv_descs lists it (the model's
 * own declaration), in f16 with f16 dw and the input channels padded the
 * way the backend stores them (3 -> 8), at batch 256 and 32: forward,
 * backward data and backward filter must each get an execution plan. One
 * line per plan (shape, op, batch, engine, workspace), a summary, exit 1
 * when any has none or when this cuDNN cannot plan deviceless at all.
 *
 * Also: the device JSON round trip (cuda_conv_device_json), refusals of a
 * bad JSON and a bad descriptor.
 *
 * `test_cuda_conv_plan --dump-device OUT.json` on a GPU writes the real
 * device's serialised properties (the file that replaces the guess).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "cuda/cuda_cudnn.h"
#include "model.h"

/* What the backend will give a plan at most (its workspace pool). */
#define TEST_MAX_WORKSPACE_BYTES ((size_t)512 << 20)
/* --cudnn-autotune times up to this many (trainer/backends/cuda/cuda_conv.c). */
#define TEST_CANDIDATES 4
#define TEST_MAX_CONVS 256

static const char *const models[] = {"resnet50", "resnet20"};
/* How many convolutions each runs: stem + 16 bottlenecks x 3 + 4
 * projections; stem + 9 basic blocks x 2 + 2 projections. */
static const int model_conv_counts[] = {53, 21};
static const int batches[] = {256, 32};

static int desc_equal(const tr_conv_desc_t *a, const tr_conv_desc_t *b)
{
    return a->c_in == b->c_in && a->h_in == b->h_in && a->w_in == b->w_in && a->c_out == b->c_out &&
           a->kernel == b->kernel && a->stride == b->stride && a->pad == b->pad && a->dtype == b->dtype &&
           a->grad_dtype == b->grad_dtype;
}

/* The distinct convolutions of model name in f16, channels padded as the
 * backend stores them; *uses_out[i]: how often the model runs each. */
static int model_convs(const char *name, tr_conv_desc_t *distinct, int *uses, int *total_out)
{
    tr_model_spec_t spec;
    if (tr_model_spec_from_name(name, &spec) != HORA_OK) return -1;
    spec.compute_dtype = TR_DTYPE_F16;
    spec.grad_dtype = TR_DTYPE_F16;
    int count = 0;
    if (tr_model_conv_descs(&spec, NULL, 0, &count) != HORA_OK || count <= 0) return -1;
    tr_conv_desc_t *all = calloc((size_t)count, sizeof(*all));
    int again = 0;
    if (!all || tr_model_conv_descs(&spec, all, count, &again) != HORA_OK || again != count) {
        free(all);
        return -1;
    }
    int n = 0;
    for (int i = 0; i < count; i++) {
        tr_conv_desc_t padded;
        cuda_conv_desc_padded(&all[i], &padded);
        int j = 0;
        while (j < n && !desc_equal(&distinct[j], &padded)) j++;
        if (j == n) {
            if (n == TEST_MAX_CONVS) break;
            distinct[n] = padded;
            uses[n++] = 0;
        }
        uses[j]++;
    }
    free(all);
    *total_out = count;
    return n;
}

/* Refusals: they fail with a status, log, and leak nothing. */
static void check_refusals(const cuda_conv_device_t *device)
{
    cuda_conv_device_t *bad = NULL;
    const char *garbage = "{\"this is\": \"not a device\"}";
    fprintf(stderr, "(expected: a refusal of a JSON that is no device)\n");
    CHECK(cuda_conv_device_from_json(garbage, strlen(garbage), &bad) != HORA_OK && bad == NULL,
          "a JSON without device properties was accepted");
    cuda_conv_device_free(bad);

    tr_conv_desc_t d = {.c_in = 8,
                        .h_in = 4,
                        .w_in = 4,
                        .c_out = 16,
                        .kernel = 7,
                        .stride = 1,
                        .pad = 0,
                        .dtype = TR_DTYPE_F16,
                        .grad_dtype = TR_DTYPE_F16};
    cuda_conv_plan_t *plan = NULL;
    fprintf(stderr, "(expected: a refusal of a kernel larger than its padded input)\n");
    CHECK(cuda_conv_plan_create(device, CUDA_CONV_FORWARD, &d, 1, 0, &plan) == HORA_ERR_INVALID_ARG && !plan,
          "a 7x7 kernel over a 4x4 input without padding was planned");
    d.kernel = 3;
    d.dtype = TR_DTYPE_I32;
    CHECK(cuda_conv_plan_create(device, CUDA_CONV_FORWARD, &d, 1, 0, &plan) == HORA_ERR_INVALID_ARG && !plan,
          "an i32 convolution was planned");
    /* An f32 dw: cuDNN 9.19 has no engine config for it (the backend
     * converts an f16 dw instead). Either answer is allowed here; this runs
     * the no-plan path (its message, nothing leaked, no plan returned). */
    d.dtype = TR_DTYPE_F16;
    d.grad_dtype = TR_DTYPE_F32;
    d.c_in = 64, d.h_in = d.w_in = 56, d.c_out = 64, d.kernel = 3, d.pad = 1;
    fprintf(stderr, "(expected with cuDNN 9.19: no plan for a backward filter with an f32 dw)\n");
    hora_status_t status =
        cuda_conv_plan_create(device, CUDA_CONV_BACKWARD_FILTER, &d, 32, TEST_MAX_WORKSPACE_BYTES, &plan);
    CHECK((status == HORA_OK && plan) || (status == HORA_ERR_UNSUPPORTED && !plan),
          "backward filter with an f32 dw: status %d", (int)status);
    printf("backward filter 64x56x56 -> 64 k3, f16 with an f32 dw: %s\n",
           plan ? cuda_conv_plan_text(plan) : "no plan (as cuDNN 9.19 answers)");
    cuda_conv_plan_free(plan);
    CHECK(cuda_conv_pad_channels(3) == 8 && cuda_conv_pad_channels(8) == 8 && cuda_conv_pad_channels(9) == 16,
          "cuda_conv_pad_channels");
}

/* --precision fp32: f32 convolutions (dw f32) of ResNet shapes get plans in
 * every op, and none of them (nor an autotune candidate) is a tensor-core
 * engine, which on f32 operands rounds them to TF32. */
static void check_f32(const cuda_conv_device_t *device)
{
    const tr_conv_desc_t shapes[] = {
        {.c_in = 8, .h_in = 28, .w_in = 28, .c_out = 16, .kernel = 3, .stride = 1, .pad = 1},
        {.c_in = 16, .h_in = 28, .w_in = 28, .c_out = 32, .kernel = 3, .stride = 2, .pad = 1},
        {.c_in = 64, .h_in = 56, .w_in = 56, .c_out = 256, .kernel = 1, .stride = 1, .pad = 0},
    };
    int planned = 0;
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        for (int op = 0; op < CUDA_CONV_OP_COUNT; op++) {
            tr_conv_desc_t d = shapes[i];
            d.dtype = d.grad_dtype = TR_DTYPE_F32;
            cuda_conv_plan_t *plans[TEST_CANDIDATES] = {NULL};
            int count = 0;
            hora_status_t status = cuda_conv_plan_candidates(device, (cuda_conv_op_t)op, &d, 32,
                                                             TEST_MAX_WORKSPACE_BYTES, TEST_CANDIDATES, plans, &count);
            CHECK(status == HORA_OK && count > 0, "f32 conv %s %dx%dx%d -> %d k%d s%d: no plan (status %d)",
                  cuda_conv_op_name((cuda_conv_op_t)op), d.c_in, d.h_in, d.w_in, d.c_out, d.kernel, d.stride,
                  (int)status);
            for (int k = 0; status == HORA_OK && k < count; k++) {
                CHECK(!cuda_conv_plan_tensor_core(plans[k]) &&
                          strstr(cuda_conv_plan_text(plans[k]), "down-converts") == NULL,
                      "f32 conv %s %dx%dx%d -> %d: candidate %d is TF32 (tensor core or down-converting): %s",
                      cuda_conv_op_name((cuda_conv_op_t)op), d.c_in, d.h_in, d.w_in, d.c_out, k,
                      cuda_conv_plan_text(plans[k]));
                if (k == 0)
                    printf("f32 %-15s %3dx%2dx%2d -> %3d k%d s%d: %s\n", cuda_conv_op_name((cuda_conv_op_t)op), d.c_in,
                           d.h_in, d.w_in, d.c_out, d.kernel, d.stride, cuda_conv_plan_text(plans[k]));
                cuda_conv_plan_free(plans[k]);
            }
            planned += status == HORA_OK && count > 0;
        }
    printf("f32 (no TF32): %d of %d convolutions planned\n", planned, 3 * CUDA_CONV_OP_COUNT);
}

/* cuDNN dlopens NVRTC (to see whether runtime-compiled engines can be
 * built) and dlcloses it again; NVRTC carries its own static libstdc++,
 * whose exception-handling pool then becomes memory of an unmapped module,
 * which LeakSanitizer reports under "<unknown module>" where no
 * suppression can name it. Keeping NVRTC loaded keeps that pool reachable;
 * without NVRTC there is nothing to keep. (A leak of hora's own is still
 * reported.) */
static void keep_nvrtc_loaded(void)
{
    char name[32];
    snprintf(name, sizeof(name), "libnvrtc.so.%d", CUDART_VERSION / 1000);
    if (!dlopen(name, RTLD_LAZY | RTLD_NODELETE)) printf("(%s not loaded: %s)\n", name, dlerror());
}

/* --dump-device OUT.json, on a GPU: device 0's properties as cuDNN
 * serialises them, what replaces tests/trainer/cuda/h200-device-properties.json
 * (the guess) on the first GPU run. Exit 77 without a GPU. */
static int dump_device(const char *path)
{
    cudnnHandle_t handle = NULL;
    cudnnStatus_t s = cudnnCreate(&handle);
    if (s != CUDNN_STATUS_SUCCESS) {
        printf("skipped: cudnnCreate: %s (no usable GPU)\n", cudnnGetErrorString(s));
        return 77;
    }
    cuda_conv_device_t *device = NULL;
    char *json = NULL;
    int rc = 1;
    if (cuda_conv_device_from_handle(handle, &device) == HORA_OK && cuda_conv_device_json(device, &json) == HORA_OK) {
        FILE *f = fopen(path, "w");
        if (f && fputs(json, f) >= 0 && fputc('\n', f) != EOF && fclose(f) == 0) {
            printf("wrote %s (%zu bytes): %s\n", path, strlen(json), json);
            rc = 0;
        } else {
            printf("FAIL: cannot write %s\n", path);
            if (f) fclose(f);
        }
    }
    free(json);
    cuda_conv_device_free(device);
    cudnnDestroy(handle);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--dump-device") == 0) return dump_device(argv[2]);
    if (argc != 2) {
        fprintf(stderr, "usage: %s DEVICE-PROPERTIES.json | --dump-device OUT.json\n", argv[0]);
        return 2;
    }
    printf("cuDNN %zu (built against %d), device %s, max workspace %zu MiB\n", cudnnGetVersion(), CUDNN_VERSION,
           argv[1], TEST_MAX_WORKSPACE_BYTES >> 20);

    keep_nvrtc_loaded();
    cuda_conv_device_t *device = NULL;
    hora_status_t status = cuda_conv_device_from_file(argv[1], &device);
    if (status != HORA_OK) {
        if (status == HORA_ERR_UNSUPPORTED)
            printf("FAIL: deviceless mode (a DEVICEPROP from %s, no GPU, no cudnnCreate) is unsupported by this "
                   "cuDNN: no plan can be checked without a GPU (%s)\n",
                   argv[1], status_message());
        else
            printf("FAIL: no cuDNN device from %s (status %d: %s): no plan can be checked without a GPU\n", argv[1],
                   (int)status, status_message());
        return 1;
    }

    /* The serialised properties make the same device again. */
    char *json = NULL;
    CHECK(cuda_conv_device_json(device, &json) == HORA_OK && json && json[0] == '{',
          "serialising the device properties");
    if (json) {
        cuda_conv_device_t *again = NULL;
        CHECK(cuda_conv_device_from_json(json, strlen(json), &again) == HORA_OK,
              "the serialised device properties (%zu bytes) do not make a device", strlen(json));
        CHECK(strstr(json, "\"smVersion\"") != NULL, "the serialised properties lack smVersion: %.200s", json);
        cuda_conv_device_free(again);
        free(json);
    }
    fflush(stdout);
    check_refusals(device);
    check_f32(device);

    int plans = 0, candidates = 0, missing = 0, tensor_core = 0, distinct_total = 0;
    size_t max_workspace = 0;
    char max_where[160] = "";
    printf("%-9s %-36s %-15s %5s  %-56s %12s\n", "model", "conv (c_in x h x w -> c_out, k s p)", "op", "batch",
           "engine", "workspace");
    for (size_t mi = 0; mi < sizeof(models) / sizeof(models[0]); mi++) {
        static tr_conv_desc_t convs[TEST_MAX_CONVS];
        static int uses[TEST_MAX_CONVS];
        int total = 0;
        int n = model_convs(models[mi], convs, uses, &total);
        CHECK(n > 0, "%s: tr_model_conv_descs gave no convolutions", models[mi]);
        if (n <= 0) continue;
        CHECK(total == model_conv_counts[mi], "%s: tr_model_conv_descs gave %d convolutions, not %d", models[mi], total,
              model_conv_counts[mi]);
        distinct_total += n;
        printf("# %s: %d convolutions, %d distinct (f16, dw f16, c_in padded to %d)\n", models[mi], total, n,
               CUDA_CONV_CHANNEL_ALIGN);
        for (int i = 0; i < n; i++) {
            const tr_conv_desc_t *d = &convs[i];
            char shape[64];
            snprintf(shape, sizeof(shape), "%dx%dx%d -> %d, %d %d %d (x%d)", d->c_in, d->h_in, d->w_in, d->c_out,
                     d->kernel, d->stride, d->pad, uses[i]);
            for (size_t bi = 0; bi < sizeof(batches) / sizeof(batches[0]); bi++) {
                for (int op = 0; op < CUDA_CONV_OP_COUNT; op++) {
                    cuda_conv_plan_t *plan = NULL;
                    status = cuda_conv_plan_create(device, (cuda_conv_op_t)op, d, batches[bi], TEST_MAX_WORKSPACE_BYTES,
                                                   &plan);
                    if (status == HORA_OK) {
                        size_t ws = cuda_conv_plan_workspace(plan);
                        printf("%-9s %-36s %-15s %5d  %-56s %12zu\n", models[mi], shape,
                               cuda_conv_op_name((cuda_conv_op_t)op), batches[bi], cuda_conv_plan_text(plan), ws);
                        plans++;
                        tensor_core += cuda_conv_plan_tensor_core(plan);
                        if (ws >= max_workspace) {
                            max_workspace = ws;
                            snprintf(max_where, sizeof(max_where), "%s %s %s batch %d", models[mi], shape,
                                     cuda_conv_op_name((cuda_conv_op_t)op), batches[bi]);
                        }
                        CHECK(ws <= TEST_MAX_WORKSPACE_BYTES, "workspace %zu over the limit", ws);
                        /* --cudnn-autotune's candidates: the same first
                         * choice, then other engines, each within the
                         * workspace limit. */
                        cuda_conv_plan_t *cands[TEST_CANDIDATES] = {NULL};
                        int nc = 0;
                        hora_status_t cs =
                            cuda_conv_plan_candidates(device, (cuda_conv_op_t)op, d, batches[bi],
                                                      TEST_MAX_WORKSPACE_BYTES, TEST_CANDIDATES, cands, &nc);
                        CHECK(cs == HORA_OK && nc >= 1 && nc <= TEST_CANDIDATES &&
                                  strcmp(cuda_conv_plan_text(cands[0]), cuda_conv_plan_text(plan)) == 0,
                              "%s %s %s batch %d: candidates status %d, %d, the first %s, the plan %s", models[mi],
                              shape, cuda_conv_op_name((cuda_conv_op_t)op), batches[bi], (int)cs, nc,
                              nc > 0 ? cuda_conv_plan_text(cands[0]) : "none", cuda_conv_plan_text(plan));
                        for (int c = 0; cs == HORA_OK && c < nc; c++) {
                            CHECK(cuda_conv_plan_workspace(cands[c]) <= TEST_MAX_WORKSPACE_BYTES,
                                  "candidate %d: workspace over the limit", c);
                            for (int e = 0; e < c; e++)
                                CHECK(strcmp(cuda_conv_plan_text(cands[c]), cuda_conv_plan_text(cands[e])) != 0,
                                      "%s %s: candidates %d and %d are the same engine (%s)", models[mi], shape, e, c,
                                      cuda_conv_plan_text(cands[c]));
                        }
                        candidates += cs == HORA_OK ? nc : 0;
                        for (int c = 0; cs == HORA_OK && c < nc; c++) cuda_conv_plan_free(cands[c]);
                    } else {
                        printf("%-9s %-36s %-15s %5d  %-56s %12s\n", models[mi], shape,
                               cuda_conv_op_name((cuda_conv_op_t)op), batches[bi], "NO PLAN", "-");
                        missing++;
                        CHECK(0, "%s %s %s batch %d: no execution plan (status %d)", models[mi], shape,
                              cuda_conv_op_name((cuda_conv_op_t)op), batches[bi], (int)status);
                    }
                    cuda_conv_plan_free(plan);
                }
            }
        }
    }
    cuda_conv_device_free(device);

    printf("summary: %d distinct convolutions x %d ops x %d batches: %d plans, %d without a plan; %d on tensor "
           "cores; largest workspace %zu bytes (%s)\n",
           distinct_total, CUDA_CONV_OP_COUNT, (int)(sizeof(batches) / sizeof(batches[0])), plans, missing, tensor_core,
           max_workspace, max_where);
    printf("autotune candidates: %d (at most %d per plan)\n", candidates, TEST_CANDIDATES);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
