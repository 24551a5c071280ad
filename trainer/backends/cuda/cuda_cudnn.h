/*
 * cuda_cudnn.h - the cuda backend's convolution plans through cuDNN's graph
 * (backend) API: one execution plan per (op, shape, batch), chosen by
 * cuDNN's heuristics once and executed as often as wanted (by the conv
 * layer, cuda_conv.c).
 *
 * Layouts (cuDNN's dimensions are always given as N, C, H, W; the strides
 * say the memory order):
 *   x, dx  (N, c_in, h_in, w_in)    NHWC, dtype
 *   y, dy  (N, c_out, h_out, w_out) NHWC, dtype
 *   w      (c_out, c_in, k, k)      KRSC (the filter channels-last), dtype
 *   dw     (c_out, c_in, k, k)      KRSC, grad_dtype
 * Accumulation is f32 (CUDNN_DATA_FLOAT compute type); the plans prefer
 * engines with CUDNN_NUMERICAL_NOTE_TENSOR_CORE. An f32 convolution stays
 * f32: no engine with CUDNN_NUMERICAL_NOTE_TENSOR_CORE (on f32 operands,
 * TF32) or _DOWN_CONVERT_INPUTS is chosen for it, unlike PyTorch's default
 * (torch.backends.cudnn.allow_tf32), so --precision fp32 on the GPU is the
 * reference the mixed-precision runs are compared with. What cuDNN 9.19 plans
 * (deviceless, tests/trainer/cuda/test_cuda_conv_plan.c): f16 or bf16 x/w/y with a
 * dw of the same dtype; an f32 dw (or f16 dw from bf16) gets no engine
 * config, so with grad_dtype f32 the backend converts the dw itself.
 *
 * Tensor cores want channel counts that are multiples of 8 (f16): the
 * backend stores the stem's 3-channel input, and the stem's weights, with
 * cuda_conv_pad_channels(3) = 8 channels, the padding zero, and plans that
 * descriptor (cuda_conv_desc_padded).
 *
 * Device: a plan is built for a cuda_conv_device_t, cuDNN's DEVICEPROP
 * descriptor (cuDNN >= 9.8): from a cudnnHandle_t on a GPU, or from a JSON
 * of device properties without any GPU ("deviceless": heuristics and plan
 * finalisation need no handle, no driver, no cudnnCreate), which is how CI
 * checks that every convolution of the model has a plan. Executing a plan
 * needs the handle and a device with those properties.
 *
 * Statuses: HORA_ERR_INVALID_ARG (bad descriptor, batch or dtype),
 * HORA_ERR_UNSUPPORTED (cuDNN offers no engine config that finalises for
 * this convolution, or deviceless mode is missing from this cuDNN),
 * HORA_ERR_INTERNAL (a cuDNN call failed: logged once, naming the call and
 * cudnnGetErrorString), HORA_ERR_NO_MEMORY.
 *
 * Build: trainer/backends/cuda/meson.build (with CUDA and cuDNN), compiled with
 * -DCUDNN_WARN_DEPRECATED -Werror=deprecated-declarations.
 */
#ifndef TR_CUDA_CUDNN_H
#define TR_CUDA_CUDNN_H

#include <stddef.h>

/* The graph API alone (cudnn.h adds the legacy, mostly deprecated, API).
 * cuDNN 9.19's own header declares a deprecated function with a deprecated
 * type, which -Werror=deprecated-declarations refuses inside the header;
 * the pragma covers the header only, so any use of a deprecated name in
 * our code is still an error. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cudnn_graph.h>
#pragma GCC diagnostic pop

#include "backend.h"

typedef enum {
    CUDA_CONV_FORWARD = 0,         /* y = conv(x, w) */
    CUDA_CONV_BACKWARD_DATA = 1,   /* dx from dy and w ("dgrad") */
    CUDA_CONV_BACKWARD_FILTER = 2, /* dw from x and dy ("wgrad") */
    CUDA_CONV_OP_COUNT = 3,
} cuda_conv_op_t;

/* "forward", "backward data", "backward filter". */
const char *cuda_conv_op_name(cuda_conv_op_t op);

/* Channel multiple the tensor cores need (f16/bf16: 8 elements, 16 bytes). */
#define CUDA_CONV_CHANNEL_ALIGN 8

/* c rounded up to a multiple of CUDA_CONV_CHANNEL_ALIGN. */
int cuda_conv_pad_channels(int c);
/* *out = *desc with c_in padded (cuda_conv_pad_channels): the shape the
 * backend stores x and w in. c_out is left alone (every ResNet conv's is a
 * multiple of 16). */
void cuda_conv_desc_padded(const tr_conv_desc_t *desc, tr_conv_desc_t *out);

/* ---- the device a plan is for --------------------------------------------- */

typedef struct cuda_conv_device cuda_conv_device_t;

/* From a JSON of device properties (what cuda_conv_device_json wrote on a
 * GPU; tests/trainer/cuda/h200-device-properties.json): no GPU needed.
 * HORA_ERR_UNSUPPORTED when this cuDNN cannot make a DEVICEPROP from JSON
 * (older than 9.8, or a JSON it refuses: the message says which). */
hora_status_t cuda_conv_device_from_json(const char *json, size_t json_bytes, cuda_conv_device_t **device_out);
/* cuda_conv_device_from_json on a file's contents (HORA_ERR_INVALID_ARG
 * when it cannot be read). */
hora_status_t cuda_conv_device_from_file(const char *path, cuda_conv_device_t **device_out);
/* The device handle is on (cudnnCreate'd on a GPU). */
hora_status_t cuda_conv_device_from_handle(cudnnHandle_t handle, cuda_conv_device_t **device_out);
/* The device's properties serialised as cuDNN's JSON, malloc'ed and
 * NUL-terminated into *json_out (free() it): what replaces the guessed
 * JSON in tests/ on the first GPU run. */
hora_status_t cuda_conv_device_json(const cuda_conv_device_t *device, char **json_out);
void cuda_conv_device_free(cuda_conv_device_t *device);

/* ---- plans ---------------------------------------------------------------- */

typedef struct cuda_conv_plan cuda_conv_plan_t;

/* The plan of one convolution op: desc's shapes and dtypes at this batch
 * for device. The engine configs come from heuristics mode A, then B, then
 * FALLBACK (the next mode only when one gives no config that finalises);
 * within a mode, the first in cuDNN's ranking that finalises and needs at
 * most max_workspace bytes, tensor-core engines before the others. */
hora_status_t cuda_conv_plan_create(const cuda_conv_device_t *device, cuda_conv_op_t op, const tr_conv_desc_t *desc,
                                    int batch, size_t max_workspace, cuda_conv_plan_t **plan_out);
void cuda_conv_plan_free(cuda_conv_plan_t *plan);
/* The candidates a tuner times (--cudnn-autotune): up to max plans, the
 * engine configs of the first heuristics mode that has any, in
 * cuda_conv_plan_create's order (its choice is plans_out[0]), each a plan
 * of its own (free each); *count_out >= 1 on HORA_OK. */
hora_status_t cuda_conv_plan_candidates(const cuda_conv_device_t *device, cuda_conv_op_t op, const tr_conv_desc_t *desc,
                                        int batch, size_t max_workspace, int max, cuda_conv_plan_t **plans_out,
                                        int *count_out);

/* Workspace bytes the plan needs (<= max_workspace; may be 0). */
size_t cuda_conv_plan_workspace(const cuda_conv_plan_t *plan);
/* "engine 7 (heur A #0, tensor core)": which engine the plan runs and
 * its notes (tensor core, nondeterministic, runtime-compiled, ...). */
const char *cuda_conv_plan_text(const cuda_conv_plan_t *plan);
/* 1 when the plan's engine uses tensor cores. */
int cuda_conv_plan_tensor_core(const cuda_conv_plan_t *plan);

/* Queue the plan on handle's stream (cudnnSetStream), device pointers, each
 * 16-byte aligned; workspace at least cuda_conv_plan_workspace bytes (may
 * be NULL when that is 0):
 *   forward          a = x,  b = w,  out = y
 *   backward data    a = dy, b = w,  out = dx
 *   backward filter  a = x,  b = dy, out = dw
 * out is overwritten (beta 0). A plan runs from one thread at a time. */
hora_status_t cuda_conv_plan_execute(const cuda_conv_plan_t *plan, cudnnHandle_t handle, const void *a, const void *b,
                                     void *out, void *workspace);

#endif
