/*
 * cuda_cudnn.c - convolution plans through cuDNN's graph (backend) API
 * (cuda_cudnn.h says which tensors are which and how they are laid out).
 *
 * A plan is built in five steps, each a backend descriptor finalised in
 * turn: tensors (x, w, y with their uids), the convolution (padding, stride,
 * f32 compute), the operation (forward, backward data or backward filter)
 * over them, the operation graph holding that one operation, then engine
 * configs from the heuristics, each tried as an execution plan until one
 * finalises. Everything but the plan and its engine config is destroyed
 * before plan_create returns; the plan alone is what executes.
 *
 * No handle is set on the graph or the plan (CUDNN_ATTR_*_HANDLE is
 * deprecated in cuDNN 9): the device comes from the DEVICEPROP descriptor,
 * which is what makes the same code work without a GPU.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_cudnn.h"
#include "cuda/cuda_log.h"

/* Pointer alignment the plans may assume: tensors are views into arenas
 * and pools at 16-byte multiples at least. */
#define CUDA_CONV_ALIGNMENT 16

/* Tensor uids of the variant pack. */
enum { CONV_UID_X = 'x', CONV_UID_W = 'w', CONV_UID_Y = 'y' };

/* DEVICEPROP appeared in cuDNN 9.8. */
#define CUDA_CONV_DEVICELESS_VERSION 90800

struct cuda_conv_device {
    cudnnBackendDescriptor_t prop; /* CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, finalised */
};

struct cuda_conv_plan {
    cuda_conv_op_t op;
    cudnnBackendDescriptor_t cfg;  /* the engine config the plan was made from */
    cudnnBackendDescriptor_t plan; /* CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, finalised */
    size_t workspace;
    int tensor_core;
    char text[160];
};

static const char *const conv_op_names[CUDA_CONV_OP_COUNT] = {"forward", "backward data", "backward filter"};

const char *cuda_conv_op_name(cuda_conv_op_t op) { return (unsigned)op < CUDA_CONV_OP_COUNT ? conv_op_names[op] : "?"; }

int cuda_conv_pad_channels(int c)
{
    return (c + CUDA_CONV_CHANNEL_ALIGN - 1) / CUDA_CONV_CHANNEL_ALIGN * CUDA_CONV_CHANNEL_ALIGN;
}

void cuda_conv_desc_padded(const tr_conv_desc_t *desc, tr_conv_desc_t *out)
{
    *out = *desc;
    out->c_in = cuda_conv_pad_channels(desc->c_in);
}

/* ---- errors --------------------------------------------------------------- */

/* HORA_OK, or the failure of call logged with cuDNN's status and its last
 * error message. */
static hora_status_t conv_cudnn(cudnnStatus_t s, const char *call, const char *what)
{
    if (s == CUDNN_STATUS_SUCCESS) return HORA_OK;
    char detail[256] = "";
    cudnnGetLastErrorString(detail, sizeof(detail));
    return cuda_fail(s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ? HORA_ERR_NO_MEMORY : HORA_ERR_INTERNAL,
                     "%s: %s: %s (%d)%s%s", what, call, cudnnGetErrorString(s), (int)s, detail[0] ? ": " : "", detail);
}

/* Every cuDNN call goes through CONV_CUDNN_AS (or is checked by hand where
 * a failure is an expected answer, such as an engine config that does not
 * finalise); status and the label out are the enclosing function's. */
#define CONV_CUDNN_AS(call, call_name, what)                                  \
    do {                                                                      \
        hora_status_t conv_status_ = conv_cudnn((call), (call_name), (what)); \
        if (conv_status_ != HORA_OK) {                                        \
            status = conv_status_;                                            \
            goto out;                                                         \
        }                                                                     \
    } while (0)
#define CONV_CUDNN(call, what) CONV_CUDNN_AS(call, #call, what)

/* Set one attribute; the message names it:
 * "cudnnBackendSetAttribute(CUDNN_ATTR_TENSOR_STRIDES)". */
#define CONV_SET(desc, name, type, count, value, what)                                \
    CONV_CUDNN_AS(cudnnBackendSetAttribute((desc), (name), (type), (count), (value)), \
                  "cudnnBackendSetAttribute(" #name ")", (what))

static void conv_destroy(cudnnBackendDescriptor_t *d)
{
    if (*d) {
        cudnnStatus_t s = cudnnBackendDestroyDescriptor(*d);
        if (s != CUDNN_STATUS_SUCCESS) conv_cudnn(s, "cudnnBackendDestroyDescriptor", "freeing a descriptor");
        *d = NULL;
    }
}

static const char *conv_dtype_name(tr_dtype_t dtype)
{
    switch (dtype) {
    case TR_DTYPE_F32: return "f32";
    case TR_DTYPE_F16: return "f16";
    case TR_DTYPE_BF16: return "bf16";
    default: return "?";
    }
}

static int conv_cudnn_dtype(tr_dtype_t dtype, cudnnDataType_t *out)
{
    switch (dtype) {
    case TR_DTYPE_F32: *out = CUDNN_DATA_FLOAT; return 1;
    case TR_DTYPE_F16: *out = CUDNN_DATA_HALF; return 1;
    case TR_DTYPE_BF16: *out = CUDNN_DATA_BFLOAT16; return 1;
    default: return 0;
    }
}

/* ---- the device ----------------------------------------------------------- */

void cuda_conv_device_free(cuda_conv_device_t *device)
{
    if (!device) return;
    conv_destroy(&device->prop);
    free(device);
}

/* A DEVICEPROP descriptor made and finalised by set (JSON or handle). */
static hora_status_t conv_device_make(const char *json, size_t json_bytes, cudnnHandle_t handle,
                                      cuda_conv_device_t **device_out)
{
    hora_status_t status = HORA_OK;
    cuda_conv_device_t *device = calloc(1, sizeof(*device));
    if (!device) return HORA_ERR_NO_MEMORY;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &device->prop);
    if (s != CUDNN_STATUS_SUCCESS) {
        device->prop = NULL;
        size_t version = cudnnGetVersion();
        if (version < CUDA_CONV_DEVICELESS_VERSION)
            status = cuda_fail(HORA_ERR_UNSUPPORTED,
                               "cuDNN %zu has no device-properties descriptor (deviceless plans need cuDNN >= 9.8): "
                               "cudnnBackendCreateDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR): %s",
                               version, cudnnGetErrorString(s));
        else
            status =
                conv_cudnn(s, "cudnnBackendCreateDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR)", "device properties");
        goto out;
    }
    if (json) {
        CONV_SET(device->prop, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, (int64_t)json_bytes, json,
                 "device properties from JSON");
        s = cudnnBackendFinalize(device->prop);
        if (s != CUDNN_STATUS_SUCCESS) {
            char detail[256] = "";
            cudnnGetLastErrorString(detail, sizeof(detail));
            status =
                cuda_fail(s / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000 ? HORA_ERR_UNSUPPORTED : HORA_ERR_INVALID_ARG,
                          "cuDNN %zu refused the device-properties JSON (deviceless mode): "
                          "cudnnBackendFinalize(DEVICEPROP): %s (%d)%s%s",
                          cudnnGetVersion(), cudnnGetErrorString(s), (int)s, detail[0] ? ": " : "", detail);
            goto out;
        }
    } else {
        CONV_SET(device->prop, CUDNN_ATTR_DEVICEPROP_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle,
                 "device properties from the handle");
        CONV_CUDNN(cudnnBackendFinalize(device->prop), "device properties from the handle");
    }
out:
    if (status != HORA_OK) {
        cuda_conv_device_free(device);
        return status;
    }
    *device_out = device;
    return HORA_OK;
}

hora_status_t cuda_conv_device_from_json(const char *json, size_t json_bytes, cuda_conv_device_t **device_out)
{
    if (!json || json_bytes == 0 || !device_out)
        return cuda_fail(HORA_ERR_INVALID_ARG, "device properties: empty JSON");
    return conv_device_make(json, json_bytes, NULL, device_out);
}

hora_status_t cuda_conv_device_from_file(const char *path, cuda_conv_device_t **device_out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return cuda_fail(HORA_ERR_INVALID_ARG, "cannot open the device-properties JSON %s", path);
    char *json = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            cap = cap ? 2 * cap : 8192;
            char *p = realloc(json, cap);
            if (!p) {
                free(json);
                fclose(f);
                return HORA_ERR_NO_MEMORY;
            }
            json = p;
        }
        size_t got = fread(json + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    hora_status_t status;
    if (bad || len == 0)
        status =
            cuda_fail(HORA_ERR_INVALID_ARG, "cannot read the device-properties JSON %s%s", path, bad ? "" : " (empty)");
    else
        status = cuda_conv_device_from_json(json, len, device_out);
    free(json);
    return status;
}

hora_status_t cuda_conv_device_from_handle(cudnnHandle_t handle, cuda_conv_device_t **device_out)
{
    if (!handle || !device_out) return cuda_fail(HORA_ERR_INVALID_ARG, "device properties: no cuDNN handle");
    return conv_device_make(NULL, 0, handle, device_out);
}

hora_status_t cuda_conv_device_json(const cuda_conv_device_t *device, char **json_out)
{
    hora_status_t status = HORA_OK;
    char *json = NULL;
    int64_t count = 0;
    CONV_CUDNN(cudnnBackendGetAttribute(device->prop, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0,
                                        &count, NULL),
               "serialising the device properties");
    json = malloc((size_t)count + 1);
    if (!json) return HORA_ERR_NO_MEMORY;
    int64_t got = 0;
    CONV_CUDNN(cudnnBackendGetAttribute(device->prop, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, count,
                                        &got, json),
               "serialising the device properties");
    json[got < count ? got : count] = '\0';
out:
    if (status != HORA_OK) {
        free(json);
        return status;
    }
    *json_out = json;
    return HORA_OK;
}

/* ---- building the graph --------------------------------------------------- */

/* A finalised tensor descriptor (dims N, C, H, W; strides say NHWC/KRSC). */
static hora_status_t conv_tensor(int64_t uid, cudnnDataType_t dtype, const int64_t dims[4], const int64_t strides[4],
                                 const char *what, cudnnBackendDescriptor_t *out)
{
    hora_status_t status = HORA_OK;
    cudnnBackendDescriptor_t t = NULL;
    int64_t alignment = CUDA_CONV_ALIGNMENT;
    CONV_CUDNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t), what);
    CONV_SET(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dtype, what);
    CONV_SET(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, what);
    CONV_SET(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, what);
    CONV_SET(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, what);
    CONV_SET(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, what);
    CONV_CUDNN(cudnnBackendFinalize(t), what);
out:
    if (status != HORA_OK) {
        conv_destroy(&t);
        return status;
    }
    *out = t;
    return HORA_OK;
}

/* (N, C, H, W) channels-last: NHWC for activations, KRSC for filters. */
static void conv_channels_last(int64_t n, int64_t c, int64_t h, int64_t w, int64_t dims[4], int64_t strides[4])
{
    dims[0] = n, dims[1] = c, dims[2] = h, dims[3] = w;
    strides[0] = h * w * c, strides[1] = 1, strides[2] = w * c, strides[3] = c;
}

/* Each op's operation descriptor and the attributes that take the tensors
 * conv_graph names x, w, y (forward: x, w, y; backward data: dx, w, dy;
 * backward filter: x, dw, dy), the conv descriptor, alpha and beta; each
 * with the text an error names it by, as CONV_CUDNN and CONV_SET word it. */
struct conv_named_type {
    cudnnBackendDescriptorType_t value;
    const char *call;
};
struct conv_named_attr {
    cudnnBackendAttributeName_t value;
    const char *call;
};
#define CONV_TYPE(t)                                          \
    {                                                         \
        t, "cudnnBackendCreateDescriptor(" #t ", &operation)" \
    }
#define CONV_ATTR(a)                          \
    {                                         \
        a, "cudnnBackendSetAttribute(" #a ")" \
    }
static const struct conv_op_attrs {
    struct conv_named_type type;
    struct conv_named_attr x, w, y, conv, alpha, beta;
} conv_op_attrs[CUDA_CONV_OP_COUNT] = {
    [CUDA_CONV_FORWARD] = {CONV_TYPE(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR),
                           CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X),
                           CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W),
                           CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y),
                           CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC),
                           CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA),
                           CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA)},
    [CUDA_CONV_BACKWARD_DATA] = {CONV_TYPE(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR),
                                 CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX),
                                 CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W),
                                 CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY),
                                 CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC),
                                 CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA),
                                 CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA)},
    [CUDA_CONV_BACKWARD_FILTER] = {CONV_TYPE(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR),
                                   CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X),
                                   CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW),
                                   CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY),
                                   CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC),
                                   CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA),
                                   CONV_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA)},
};
#undef CONV_TYPE
#undef CONV_ATTR

/* CONV_SET with an attribute from conv_op_attrs (its error text included). */
#define CONV_SET_NAMED(desc, attr, type, count, data, what) \
    CONV_CUDNN_AS(cudnnBackendSetAttribute((desc), (attr).value, (type), (count), (data)), (attr).call, (what))

/* The finalised operation graph of one convolution op. */
static hora_status_t conv_graph(cuda_conv_op_t op, const tr_conv_desc_t *d, int batch, cudnnBackendDescriptor_t *out)
{
    hora_status_t status = HORA_OK;
    cudnnBackendDescriptor_t x = NULL, w = NULL, y = NULL, conv = NULL, operation = NULL, graph = NULL;
    cudnnDataType_t act_type = CUDNN_DATA_HALF, w_type = CUDNN_DATA_HALF, compute = CUDNN_DATA_FLOAT;
    int h_out = (d->h_in + 2 * d->pad - d->kernel) / d->stride + 1;
    int w_out = (d->w_in + 2 * d->pad - d->kernel) / d->stride + 1;
    conv_cudnn_dtype(d->dtype, &act_type);
    conv_cudnn_dtype(op == CUDA_CONV_BACKWARD_FILTER ? d->grad_dtype : d->dtype, &w_type);

    int64_t dims[4], strides[4];
    conv_channels_last(batch, d->c_in, d->h_in, d->w_in, dims, strides);
    status = conv_tensor(CONV_UID_X, act_type, dims, strides, "conv tensor x", &x);
    if (status != HORA_OK) goto out;
    conv_channels_last(d->c_out, d->c_in, d->kernel, d->kernel, dims, strides);
    status = conv_tensor(CONV_UID_W, w_type, dims, strides, "conv tensor w", &w);
    if (status != HORA_OK) goto out;
    conv_channels_last(batch, d->c_out, h_out, w_out, dims, strides);
    status = conv_tensor(CONV_UID_Y, act_type, dims, strides, "conv tensor y", &y);
    if (status != HORA_OK) goto out;

    const char *what = "conv descriptor";
    int64_t spatial = 2, pads[2] = {d->pad, d->pad}, conv_strides[2] = {d->stride, d->stride}, dilations[2] = {1, 1};
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    CONV_CUDNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &conv), what);
    CONV_SET(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, what);
    CONV_SET(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, what);
    CONV_SET(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial, what);
    CONV_SET(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pads, what);
    CONV_SET(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pads, what);
    CONV_SET(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, conv_strides, what);
    CONV_SET(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilations, what);
    CONV_CUDNN(cudnnBackendFinalize(conv), what);

    /* alpha 1, beta 0 (outputs overwritten); float scalars for f32 compute. */
    float alpha = 1.0f, beta = 0.0f;
    what = "conv operation";
    if ((unsigned)op >= CUDA_CONV_OP_COUNT) {
        status = cuda_fail(HORA_ERR_INVALID_ARG, "conv plan: unknown op %d", (int)op);
        goto out;
    }
    const struct conv_op_attrs *attrs = &conv_op_attrs[op];
    CONV_CUDNN_AS(cudnnBackendCreateDescriptor(attrs->type.value, &operation), attrs->type.call, what);
    CONV_SET_NAMED(operation, attrs->x, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    CONV_SET_NAMED(operation, attrs->w, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w, what);
    CONV_SET_NAMED(operation, attrs->y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    CONV_SET_NAMED(operation, attrs->conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv, what);
    CONV_SET_NAMED(operation, attrs->alpha, CUDNN_TYPE_FLOAT, 1, &alpha, what);
    CONV_SET_NAMED(operation, attrs->beta, CUDNN_TYPE_FLOAT, 1, &beta, what);
    CONV_CUDNN(cudnnBackendFinalize(operation), what);

    what = "conv operation graph";
    CONV_CUDNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph), what);
    CONV_SET(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &operation, what);
    CONV_CUDNN(cudnnBackendFinalize(graph), what);
out:
    conv_destroy(&operation);
    conv_destroy(&conv);
    conv_destroy(&y);
    conv_destroy(&w);
    conv_destroy(&x);
    if (status != HORA_OK) {
        conv_destroy(&graph);
        return status;
    }
    *out = graph;
    return HORA_OK;
}

/* ---- engine configs and plans --------------------------------------------- */

/* What an engine config's engine is: its global index and notes. */
typedef struct {
    int64_t index;
    int tensor_core, nondeterministic, runtime_compiled, down_convert;
} conv_engine_info_t;

static hora_status_t conv_engine_info(cudnnBackendDescriptor_t cfg, conv_engine_info_t *info)
{
    hora_status_t status = HORA_OK;
    cudnnBackendDescriptor_t engine = NULL;
    const char *what = "reading an engine config";
    int64_t count = 0;
    memset(info, 0, sizeof(*info));
    CONV_CUDNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine), what);
    CONV_CUDNN(
        cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine),
        what);
    CONV_CUDNN(
        cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count, &info->index),
        what);
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    CONV_CUDNN(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                        CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes),
               what);
    for (int64_t i = 0; i < count && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++) {
        info->tensor_core |= notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
        info->nondeterministic |= notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
        info->down_convert |= notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
    }
    cudnnBackendBehaviorNote_t behaviors[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
    CONV_CUDNN(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                        CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &count, behaviors),
               what);
    for (int64_t i = 0; i < count && i < CUDNN_BEHAVIOR_NOTE_TYPE_COUNT; i++)
        info->runtime_compiled |= behaviors[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
out:
    conv_destroy(&engine);
    return status;
}

/* An execution plan from cfg for device: HORA_OK with *plan_out set,
 * HORA_ERR_UNSUPPORTED when this config does not finalise (an expected
 * answer: the caller tries the next), HORA_ERR_INTERNAL otherwise. */
static hora_status_t conv_plan_try(const cuda_conv_device_t *device, cudnnBackendDescriptor_t cfg,
                                   cudnnBackendDescriptor_t *plan_out, size_t *workspace_out)
{
    hora_status_t status = HORA_OK;
    cudnnBackendDescriptor_t plan = NULL;
    const char *what = "conv execution plan";
    CONV_CUDNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan), what);
    CONV_SET(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg, what);
    CONV_SET(plan, CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &device->prop, what);
    cudnnStatus_t s = cudnnBackendFinalize(plan);
    if (s != CUDNN_STATUS_SUCCESS) {
        status = HORA_ERR_UNSUPPORTED; /* not logged: the next config may work */
        goto out;
    }
    int64_t workspace = 0, count = 0;
    CONV_CUDNN(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count,
                                        &workspace),
               what);
    *workspace_out = workspace > 0 ? (size_t)workspace : 0;
out:
    if (status != HORA_OK) {
        conv_destroy(&plan);
        return status;
    }
    *plan_out = plan;
    return HORA_OK;
}

void cuda_conv_plan_free(cuda_conv_plan_t *plan)
{
    if (!plan) return;
    conv_destroy(&plan->plan);
    conv_destroy(&plan->cfg);
    free(plan);
}

static const struct {
    cudnnBackendHeurMode_t mode;
    const char *name;
} conv_heur_modes[] = {
    {CUDNN_HEUR_MODE_A, "A"},
    {CUDNN_HEUR_MODE_B, "B"},
    {CUDNN_HEUR_MODE_FALLBACK, "fallback"},
};

/* Try the engine configs heuristics mode m ranks for graph, tensor-core
 * engines first (with strict_f32 none of those, nor one that down-converts
 * its inputs: no TF32), and keep the first max that finalise within max_workspace
 * as plans[*made_out ...] (op set, made here): HORA_OK with at least one,
 * HORA_ERR_UNSUPPORTED when none finalises (*tried_out counts the
 * configs). */
static hora_status_t conv_plan_from_heur(const cuda_conv_device_t *device, cudnnBackendDescriptor_t graph, int m,
                                         cuda_conv_op_t op, int strict_f32, size_t max_workspace, int max,
                                         cuda_conv_plan_t **plans, int *made_out, int *tried_out)
{
    hora_status_t status = HORA_OK;
    cudnnBackendDescriptor_t heur = NULL, *cfgs = NULL;
    conv_engine_info_t *infos = NULL;
    int64_t count = 0, got = 0, created = 0;
    int made = 0;
    const char *what = "conv heuristics";
    cudnnBackendHeurMode_t mode = conv_heur_modes[m].mode;
    *tried_out = 0;
    *made_out = 0;

    CONV_CUDNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur), what);
    CONV_SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, what);
    CONV_SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, what);
    CONV_SET(heur, CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &device->prop, what);
    cudnnStatus_t s = cudnnBackendFinalize(heur);
    if (s != CUDNN_STATUS_SUCCESS) {
        /* This mode has nothing for the graph (NOT_SUPPORTED); the next may. */
        if (s / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000) {
            status = HORA_ERR_UNSUPPORTED;
            goto out;
        }
        CONV_CUDNN_AS(s, "cudnnBackendFinalize(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)", what);
    }
    CONV_CUDNN(
        cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL),
        what);
    if (count <= 0) {
        status = HORA_ERR_UNSUPPORTED;
        goto out;
    }
    cfgs = calloc((size_t)count, sizeof(*cfgs));
    infos = calloc((size_t)count, sizeof(*infos));
    if (!cfgs || !infos) {
        status = HORA_ERR_NO_MEMORY;
        goto out;
    }
    for (; created < count; created++)
        CONV_CUDNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[created]), what);
    CONV_CUDNN(
        cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfgs),
        what);
    if (got < count) count = got; /* the rest are destroyed below, unused */
    for (int64_t i = 0; i < count; i++) {
        status = conv_engine_info(cfgs[i], &infos[i]);
        if (status != HORA_OK) goto out;
    }
    /* Tensor-core engines first (pass 0), in cuDNN's ranking; the others
     * only when none of those finalises. */
    status = HORA_ERR_UNSUPPORTED;
    for (int pass = 0; pass < 2 && made < max; pass++) {
        /* The other kind only when the first gave none. */
        if (pass == 1 && made > 0) break;
        for (int64_t i = 0; i < count && made < max; i++) {
            if (infos[i].tensor_core != (pass == 0)) continue;
            /* f32 stays f32: on f32 operands a tensor-core engine is TF32
             * (PyTorch's allow_tf32 = False filters the same notes). */
            if (strict_f32 && (infos[i].tensor_core || infos[i].down_convert)) continue;
            size_t workspace = 0;
            cudnnBackendDescriptor_t finalised = NULL;
            (*tried_out)++;
            hora_status_t tried = conv_plan_try(device, cfgs[i], &finalised, &workspace);
            if (tried == HORA_ERR_UNSUPPORTED) continue;
            if (tried != HORA_OK) {
                status = tried;
                goto out;
            }
            if (workspace > max_workspace) {
                conv_destroy(&finalised);
                continue;
            }
            cuda_conv_plan_t *plan = calloc(1, sizeof(*plan));
            if (!plan) {
                conv_destroy(&finalised);
                status = HORA_ERR_NO_MEMORY;
                goto out;
            }
            plans[made++] = plan;
            plan->op = op;
            plan->plan = finalised;
            plan->workspace = workspace;
            plan->tensor_core = infos[i].tensor_core;
            const conv_engine_info_t *e = &infos[i];
            snprintf(plan->text, sizeof(plan->text), "engine %" PRId64 " (heur %s #%d%s%s%s%s)", e->index,
                     conv_heur_modes[m].name, (int)i, e->tensor_core ? ", tensor core" : ", no tensor core",
                     e->nondeterministic ? ", nondeterministic" : "", e->runtime_compiled ? ", runtime-compiled" : "",
                     e->down_convert ? ", down-converts inputs" : "");
            plan->cfg = cfgs[i];
            cfgs[i] = NULL; /* the plan keeps its config */
            status = HORA_OK;
        }
    }
out:
    if (status != HORA_OK && status != HORA_ERR_UNSUPPORTED) {
        for (int i = 0; i < made; i++) {
            cuda_conv_plan_free(plans[i]);
            plans[i] = NULL;
        }
        made = 0;
    }
    *made_out = made;
    for (int64_t i = 0; i < created; i++) conv_destroy(&cfgs[i]);
    free(cfgs);
    free(infos);
    conv_destroy(&heur);
    return status;
}

static hora_status_t conv_check_desc(const tr_conv_desc_t *d, int batch)
{
    cudnnDataType_t t;
    if (!d) return cuda_fail(HORA_ERR_INVALID_ARG, "conv plan: no descriptor");
    if (batch < 1 || d->c_in < 1 || d->h_in < 1 || d->w_in < 1 || d->c_out < 1 || d->kernel < 1 || d->stride < 1 ||
        d->pad < 0 || d->h_in + 2 * d->pad < d->kernel || d->w_in + 2 * d->pad < d->kernel)
        return cuda_fail(HORA_ERR_INVALID_ARG,
                         "conv plan: bad descriptor %dx%dx%d -> %d k%d s%d p%d or batch %d (sizes >= 1, pad >= 0, "
                         "the kernel within the padded input)",
                         d->c_in, d->h_in, d->w_in, d->c_out, d->kernel, d->stride, d->pad, batch);
    if (!conv_cudnn_dtype(d->dtype, &t) || !conv_cudnn_dtype(d->grad_dtype, &t))
        return cuda_fail(HORA_ERR_INVALID_ARG, "conv plan: dtype %d / grad_dtype %d is not f32, f16 or bf16",
                         (int)d->dtype, (int)d->grad_dtype);
    return HORA_OK;
}

hora_status_t cuda_conv_plan_candidates(const cuda_conv_device_t *device, cuda_conv_op_t op, const tr_conv_desc_t *desc,
                                        int batch, size_t max_workspace, int max, cuda_conv_plan_t **plans_out,
                                        int *count_out)
{
    if (!device || !plans_out || !count_out || max < 1 || (unsigned)op >= CUDA_CONV_OP_COUNT)
        return cuda_fail(HORA_ERR_INVALID_ARG, "conv plan: no device, no output, max %d or a bad op", max);
    hora_status_t status = conv_check_desc(desc, batch);
    if (status != HORA_OK) return status;
    cudnnBackendDescriptor_t graph = NULL;
    status = conv_graph(op, desc, batch, &graph);
    int tried[3] = {0, 0, 0}, made = 0;
    for (int m = 0; status == HORA_OK && m < (int)(sizeof(conv_heur_modes) / sizeof(conv_heur_modes[0])); m++) {
        status = conv_plan_from_heur(device, graph, m, op, desc->dtype == TR_DTYPE_F32, max_workspace, max, plans_out,
                                     &made, &tried[m]);
        if (status == HORA_OK) break;
        if (status == HORA_ERR_UNSUPPORTED)
            status = HORA_OK; /* the next mode */
        else
            break;
    }
    if (status == HORA_OK && made == 0)
        status = cuda_fail(HORA_ERR_UNSUPPORTED,
                           "conv %s %dx%dx%d -> %d k%d s%d p%d batch %d, %s (dw %s): no execution plan (engine "
                           "configs tried: heur A %d, B %d, fallback %d; max workspace %zu bytes)",
                           cuda_conv_op_name(op), desc->c_in, desc->h_in, desc->w_in, desc->c_out, desc->kernel,
                           desc->stride, desc->pad, batch, conv_dtype_name(desc->dtype),
                           conv_dtype_name(desc->grad_dtype), tried[0], tried[1], tried[2], max_workspace);
    conv_destroy(&graph);
    if (status != HORA_OK) return status;
    *count_out = made;
    return HORA_OK;
}

hora_status_t cuda_conv_plan_create(const cuda_conv_device_t *device, cuda_conv_op_t op, const tr_conv_desc_t *desc,
                                    int batch, size_t max_workspace, cuda_conv_plan_t **plan_out)
{
    int count = 0;
    if (!plan_out) return cuda_fail(HORA_ERR_INVALID_ARG, "conv plan: no output");
    return cuda_conv_plan_candidates(device, op, desc, batch, max_workspace, 1, plan_out, &count);
}

size_t cuda_conv_plan_workspace(const cuda_conv_plan_t *plan) { return plan->workspace; }

const char *cuda_conv_plan_text(const cuda_conv_plan_t *plan) { return plan->text; }

int cuda_conv_plan_tensor_core(const cuda_conv_plan_t *plan) { return plan->tensor_core; }

/* ---- executing ------------------------------------------------------------ */

hora_status_t cuda_conv_plan_execute(const cuda_conv_plan_t *plan, cudnnHandle_t handle, const void *a, const void *b,
                                     void *out, void *workspace)
{
    if (!plan || !handle || !a || !b || !out || (plan->workspace && !workspace))
        return cuda_fail(HORA_ERR_INVALID_ARG, "conv %s: a pointer or the handle is NULL",
                         plan ? cuda_conv_op_name(plan->op) : "?");
    hora_status_t status = HORA_OK;
    cudnnBackendDescriptor_t pack = NULL;
    const char *what = "conv variant pack";
    /* Which uid each pointer is (cuda_cudnn.h's table). */
    int64_t uids[3];
    void *ptrs[3] = {(void *)a, (void *)b, out};
    switch (plan->op) {
    case CUDA_CONV_FORWARD: uids[0] = CONV_UID_X, uids[1] = CONV_UID_W, uids[2] = CONV_UID_Y; break;
    case CUDA_CONV_BACKWARD_DATA: uids[0] = CONV_UID_Y, uids[1] = CONV_UID_W, uids[2] = CONV_UID_X; break;
    default: uids[0] = CONV_UID_X, uids[1] = CONV_UID_Y, uids[2] = CONV_UID_W; break;
    }
    CONV_CUDNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack), what);
    CONV_SET(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids, what);
    CONV_SET(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs, what);
    CONV_SET(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace, what);
    CONV_CUDNN(cudnnBackendFinalize(pack), what);
    CONV_CUDNN(cudnnBackendExecute(handle, plan->plan, pack), plan->text);
out:
    conv_destroy(&pack);
    return status;
}
