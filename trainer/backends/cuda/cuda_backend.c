/*
 * cuda_backend.c - the "cuda" compute backend's handle, memory and data
 * movement: the device and its compute stream, cuDNN and cuBLASLt handles,
 * the plans' workspace, buffers (the device pool of libhora where it has
 * one, so fused all-reduces of the gradients run zero-copy), upload /
 * download, NHWC activation tensors and their import / export, casts, the
 * events gradient_ready hands to libhora, and the dtypes it computes in.
 *
 * The layers live in cuda_conv.c, cuda_linear.c, cuda_bn.c and cuda_pool.c,
 * the element-wise ops in cuda_eltwise.c, the loss, the finite check and
 * the SGD step in cuda_step.c (the same files as the cpu backend's); the
 * table at the end joins backend.c's wherever trainer/backends/cuda builds.
 * Not yet run on a GPU (issue 15).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuda_internal.h"
#include "k_cpu.h"
#include "k_cuda.h"
#include "k_cuda_step.h"

/* ---- errors --------------------------------------------------------------- */

hora_status_t cuda_rt(cudaError_t err, const char *what)
{
    if (err == cudaSuccess) return HORA_OK;
    cudaGetLastError(); /* a non-sticky error must not resurface in the next call */
    return cuda_fail(err == cudaErrorMemoryAllocation ? HORA_ERR_NO_MEMORY : HORA_ERR_INTERNAL, "%s: %s: %s", what,
                     cudaGetErrorName(err), cudaGetErrorString(err));
}

hora_status_t cuda_kernel(int err, const char *what)
{
    if (err == 0) return HORA_OK;
    /* The kernels' int code (a cudaError_t value), translated here. */
    return cuda_fail(err == K_CUDA_ERR_INVALID_VALUE ? HORA_ERR_INVALID_ARG : HORA_ERR_INTERNAL, "%s: %s", what,
                     k_cuda_error_string(err));
}

int cuda_float_dtype(tr_dtype_t dtype)
{
    return dtype == TR_DTYPE_F32 || dtype == TR_DTYPE_F16 || dtype == TR_DTYPE_BF16;
}

/* ---- the handle ----------------------------------------------------------- */

/* libhora's device where it has device support; else local rank mod the
 * devices (one process per GPU is the usual launch). */
static hora_status_t cuda_pick_device(int *device_out)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count < 1) {
        cudaGetLastError();
        return cuda_fail(HORA_ERR_UNSUPPORTED, "no usable CUDA device (%s)",
                         err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount found none");
    }
    int device = hora_initialized() ? hora_cuda_device() : -1;
    /* Several ranks all-reduce and broadcast the device arenas: libhora must
     * take device pointers. */
    if (device < 0 && hora_initialized() && hora_size() > 1)
        return cuda_fail(HORA_ERR_UNSUPPORTED,
                         "%d ranks need libhora's device support for device gradients "
                         "(HORA_CUDA is 0 here, or hora found no device for this rank)",
                         hora_size());
    if (device < 0) device = hora_initialized() && hora_local_rank() >= 0 ? hora_local_rank() % count : 0;
    *device_out = device;
    return HORA_OK;
}

static void cuda_free(tr_backend_t *backend_base)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (b == NULL) return;
    if (b->stream) cudaStreamSynchronize(b->stream);
    if (b->copy_stream) cudaStreamSynchronize(b->copy_stream);
    for (int i = 0; i < CUDA_EVENT_RING; i++)
        if (b->events[i]) cudaEventDestroy(b->events[i]);
    for (int i = 0; i < 2; i++) {
        if (b->input_stage[i]) cudaFree(b->input_stage[i]);
        if (b->input_copied[i]) cudaEventDestroy(b->input_copied[i]);
        if (b->input_read[i]) cudaEventDestroy(b->input_read[i]);
    }
    if (b->copy_stream) cudaStreamDestroy(b->copy_stream);
    if (b->workspace) cudaFree(b->workspace);
    if (b->dev_flag) cudaFree(b->dev_flag);
    if (b->host_flag) cudaFreeHost(b->host_flag);
    cuda_conv_device_free(b->conv_device);
    if (b->lt) cublasLtDestroy(b->lt);
    if (b->cudnn) cudnnDestroy(b->cudnn);
    if (b->stream) cudaStreamDestroy(b->stream);
    free(b);
}

static hora_status_t cuda_init(const tr_backend_config_t *config, tr_backend_t **backend_out)
{
    if (config == NULL || backend_out == NULL) return cuda_fail(HORA_ERR_INVALID_ARG, "init: NULL argument");
    cuda_backend_t *b = calloc(1, sizeof(*b));
    if (b == NULL) return cuda_fail(HORA_ERR_NO_MEMORY, "init: out of memory");
    b->base.ops = &tr_backend_cuda_ops;
    b->verbose = config->verbose;
    b->autotune = config->autotune;
    hora_status_t status = cuda_pick_device(&b->device);
    if (status == HORA_OK) status = cuda_rt(cudaSetDevice(b->device), "cudaSetDevice");
    if (status == HORA_OK)
        status = cuda_rt(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    if (status == HORA_OK) {
        cudnnStatus_t s = cudnnCreate(&b->cudnn);
        if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetStream(b->cudnn, b->stream);
        if (s != CUDNN_STATUS_SUCCESS) status = cuda_fail(HORA_ERR_INTERNAL, "cudnnCreate: %s", cudnnGetErrorString(s));
    }
    if (status == HORA_OK) {
        cublasStatus_t s = cublasLtCreate(&b->lt);
        if (s != CUBLAS_STATUS_SUCCESS)
            status = cuda_fail(HORA_ERR_INTERNAL, "cublasLtCreate: %s", cublasLtGetStatusString(s));
    }
    if (status == HORA_OK) status = cuda_conv_device_from_handle(b->cudnn, &b->conv_device);
    if (status == HORA_OK) status = cuda_rt(cudaMalloc((void **)&b->dev_flag, sizeof(int32_t)), "cudaMalloc (a flag)");
    if (status == HORA_OK)
        status = cuda_rt(cudaMallocHost((void **)&b->host_flag, sizeof(int32_t)), "cudaMallocHost (a flag)");
    for (int i = 0; i < CUDA_EVENT_RING && status == HORA_OK; i++)
        status = cuda_rt(cudaEventCreateWithFlags(&b->events[i], cudaEventDisableTiming), "cudaEventCreateWithFlags");
    if (status == HORA_OK)
        status = cuda_rt(cudaStreamCreateWithFlags(&b->copy_stream, cudaStreamNonBlocking),
                         "cudaStreamCreateWithFlags (input copies)");
    for (int i = 0; i < 2 && status == HORA_OK; i++) {
        status = cuda_rt(cudaEventCreateWithFlags(&b->input_copied[i], cudaEventDisableTiming),
                         "cudaEventCreateWithFlags (input)");
        if (status == HORA_OK)
            status = cuda_rt(cudaEventCreateWithFlags(&b->input_read[i], cudaEventDisableTiming),
                             "cudaEventCreateWithFlags (input)");
    }
    if (status != HORA_OK) {
        cuda_free(&b->base);
        return status;
    }
    if (b->verbose) {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, b->device) == cudaSuccess)
            fprintf(stderr, "hora-train: cuda: device %d %s (sm_%d%d, %d SMs), cuDNN %zu\n", b->device, prop.name,
                    prop.major, prop.minor, prop.multiProcessorCount, cudnnGetVersion());
    }
    *backend_out = &b->base;
    return HORA_OK;
}

static hora_status_t cuda_synchronize(tr_backend_t *backend_base)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (b == NULL) return cuda_fail(HORA_ERR_INVALID_ARG, "synchronize: NULL backend");
    return cuda_rt(cudaStreamSynchronize(b->stream), "synchronize: cudaStreamSynchronize");
}

hora_status_t cuda_workspace(cuda_backend_t *b, size_t bytes, void **ptr_out)
{
    if (bytes > b->workspace_bytes) {
        /* Earlier ops may still use the old one. */
        CUDA_CHECK(cuda_rt(cudaStreamSynchronize(b->stream), "workspace: cudaStreamSynchronize"));
        if (b->workspace) cudaFree(b->workspace);
        b->workspace = NULL;
        b->workspace_bytes = 0;
        CUDA_CHECK(cuda_rt(cudaMalloc(&b->workspace, bytes), "cudaMalloc (the plans' workspace)"));
        b->workspace_bytes = bytes;
    }
    *ptr_out = bytes ? b->workspace : NULL;
    return HORA_OK;
}

/* ---- memory --------------------------------------------------------------- */

/* From libhora's device pool where it has one (the gradients then all-reduce
 * in place over cudaipc), else cudaMalloc; zeroed either way. */
static hora_status_t cuda_buffer_alloc(tr_backend_t *backend_base, size_t bytes, void **ptr_out)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    void *p = NULL;
    if (b == NULL || ptr_out == NULL) return cuda_fail(HORA_ERR_INVALID_ARG, "buffer_alloc: NULL argument");
    if (hora_initialized() && hora_cuda_device() == b->device) {
        hora_status_t st = hora_mem_alloc_device(bytes ? bytes : 1, &p);
        if (st != HORA_OK && st != HORA_ERR_NO_MEMORY) return st;
        if (st == HORA_ERR_NO_MEMORY && b->verbose)
            fprintf(stderr,
                    "hora-train: cuda: a %zu-byte buffer does not fit libhora's device pool "
                    "(HORA_CUDA_POOL_BYTES): cudaMalloc, all-reduced through a fusion copy\n",
                    bytes);
    }
    if (p == NULL) CUDA_CHECK(cuda_rt(cudaMalloc(&p, bytes ? bytes : 1), "buffer_alloc: cudaMalloc"));
    hora_status_t status = cuda_rt(cudaMemsetAsync(p, 0, bytes, b->stream), "buffer_alloc: cudaMemsetAsync");
    if (status == HORA_OK) status = cuda_rt(cudaStreamSynchronize(b->stream), "buffer_alloc: cudaStreamSynchronize");
    if (status != HORA_OK) {
        backend_base->ops->buffer_free(backend_base, p);
        return status;
    }
    *ptr_out = p;
    return HORA_OK;
}

static void cuda_buffer_free(tr_backend_t *backend_base, void *ptr)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (ptr == NULL) return;
    if (hora_initialized() && hora_mem_is_shared(ptr)) {
        /* Pool memory is handed out again at once (cudaFree would wait for
         * the device): let queued work that uses it finish first. */
        cudaStreamSynchronize(b->stream);
        hora_mem_free(ptr);
    } else {
        cudaFree(ptr);
    }
}

/* ---- data movement -------------------------------------------------------- */

static hora_status_t cuda_check_moved(const tr_tensor_t *t, const void *host, const char *what)
{
    if (t == NULL || t->data == NULL || host == NULL)
        return cuda_fail(HORA_ERR_INVALID_ARG, "%s: NULL tensor or host array", what);
    if (t->memory != TR_MEMORY_DEVICE || t->layout != TR_LAYOUT_NCHW)
        return cuda_fail(HORA_ERR_INVALID_ARG, "%s: a plain device tensor wanted, got %s %s", what,
                         tr_layout_name(t->layout), tr_memory_name(t->memory));
    return HORA_OK;
}

/* Both complete when they return (host arrays may be pageable). */
static hora_status_t cuda_copy_sync(cuda_backend_t *b, void *dst, const void *src, size_t bytes, const char *what)
{
    CUDA_CHECK(cuda_rt(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, b->stream), what));
    return cuda_rt(cudaStreamSynchronize(b->stream), what);
}

static hora_status_t cuda_upload(tr_backend_t *backend_base, tr_tensor_t *dst, const void *host)
{
    CUDA_CHECK(cuda_check_moved(dst, host, "upload"));
    return cuda_copy_sync((cuda_backend_t *)backend_base, dst->data, host, dst->bytes, "upload: cudaMemcpyAsync");
}

static hora_status_t cuda_download(tr_backend_t *backend_base, const tr_tensor_t *src, void *host)
{
    CUDA_CHECK(cuda_check_moved(src, host, "download"));
    return cuda_copy_sync((cuda_backend_t *)backend_base, host, src->data, src->bytes, "download: cudaMemcpyAsync");
}

static hora_status_t cuda_fill_zero(tr_backend_t *backend_base, tr_tensor_t *t)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (t == NULL || t->data == NULL || t->memory != TR_MEMORY_DEVICE)
        return cuda_fail(HORA_ERR_INVALID_ARG, "fill_zero: not an allocated device tensor");
    return cuda_rt(cudaMemsetAsync(t->data, 0, t->bytes, b->stream), "fill_zero: cudaMemsetAsync");
}

static hora_status_t cuda_gradient_ready(tr_backend_t *backend_base, tr_event_t *event_out)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (b == NULL || event_out == NULL) return cuda_fail(HORA_ERR_INVALID_ARG, "gradient_ready: NULL argument");
    cudaEvent_t e = b->events[b->next_event];
    b->next_event = (b->next_event + 1) % CUDA_EVENT_RING;
    CUDA_CHECK(cuda_rt(cudaEventRecord(e, b->stream), "gradient_ready: cudaEventRecord"));
    *event_out = e;
    return HORA_OK;
}

/* ---- the input step -------------------------------------------------------- */

static hora_status_t cuda_host_alloc(tr_backend_t *backend_base, size_t bytes, void **ptr_out)
{
    void *p = NULL;
    if (backend_base == NULL || ptr_out == NULL) return cuda_fail(HORA_ERR_INVALID_ARG, "host_alloc: NULL argument");
    CUDA_CHECK(cuda_rt(cudaMallocHost(&p, bytes ? bytes : 1), "host_alloc: cudaMallocHost"));
    memset(p, 0, bytes);
    *ptr_out = p;
    return HORA_OK;
}

static void cuda_host_free(tr_backend_t *backend_base, void *ptr)
{
    (void)backend_base;
    if (ptr) cudaFreeHost(ptr);
}

/* Staging buffer slot holds at least bytes; the last normalisation that
 * read it has finished before it is replaced. */
static hora_status_t cuda_input_stage(cuda_backend_t *b, int slot, size_t bytes)
{
    if (b->input_stage_bytes[slot] >= bytes) return HORA_OK;
    CUDA_CHECK(cuda_rt(cudaEventSynchronize(b->input_read[slot]), "input_import: cudaEventSynchronize"));
    if (b->input_stage[slot]) cudaFree(b->input_stage[slot]);
    b->input_stage[slot] = NULL;
    b->input_stage_bytes[slot] = 0;
    CUDA_CHECK(cuda_rt(cudaMalloc((void **)&b->input_stage[slot], bytes), "input_import: cudaMalloc (staging)"));
    b->input_stage_bytes[slot] = bytes;
    return HORA_OK;
}

static hora_status_t cuda_input_import(tr_backend_t *backend_base, const tr_tensor_t *pixels, const float *mean,
                                       const float *std, tr_tensor_t *t)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (b == NULL || pixels == NULL || pixels->data == NULL || mean == NULL || std == NULL || t == NULL)
        return cuda_fail(HORA_ERR_INVALID_ARG, "input_import: NULL argument");
    if (pixels->dtype != TR_DTYPE_U8 || pixels->layout != TR_LAYOUT_NHWC || pixels->memory != TR_MEMORY_HOST ||
        pixels->ndim != 4 || pixels->n < 1 || pixels->n > t->n) {
        char got[96];
        tr_tensor_describe(pixels, got, sizeof(got));
        return cuda_fail(HORA_ERR_INVALID_ARG, "input_import: pixels %s: a host u8 nhwc batch of 1..%d wanted", got,
                         t->n);
    }
    CUDA_CHECK(cuda_check_activation(t, t->dtype, pixels->c, pixels->h, pixels->w, "input_import t"));
    const int stored = cuda_stored_channels(t->c);
    if (stored > K_CUDA_INPUT_MAX_CHANNELS)
        return cuda_fail(HORA_ERR_INVALID_ARG, "input_import: %d channels (images have at most %d)", t->c,
                         K_CUDA_INPUT_MAX_CHANNELS);
    const size_t pixel_count = (size_t)pixels->n * (size_t)pixels->h * (size_t)pixels->w;
    const size_t bytes = pixel_count * (size_t)pixels->c;
    const int slot = b->input_next;
    b->input_next ^= 1;
    CUDA_CHECK(cuda_input_stage(b, slot, bytes));
    /* The copy waits for the normalisation that last read this slot; the
     * compute stream waits for the copy. */
    CUDA_CHECK(
        cuda_rt(cudaStreamWaitEvent(b->copy_stream, b->input_read[slot], 0), "input_import: cudaStreamWaitEvent"));
    CUDA_CHECK(
        cuda_rt(cudaMemcpyAsync(b->input_stage[slot], pixels->data, bytes, cudaMemcpyHostToDevice, b->copy_stream),
                "input_import: cudaMemcpyAsync"));
    CUDA_CHECK(cuda_rt(cudaEventRecord(b->input_copied[slot], b->copy_stream), "input_import: cudaEventRecord"));
    CUDA_CHECK(cuda_rt(cudaStreamWaitEvent(b->stream, b->input_copied[slot], 0), "input_import: cudaStreamWaitEvent"));
    CUDA_CHECK(cuda_kernel(k_cuda_input_normalize(t->data, tr_dtype_kernel(t->dtype), stored, b->input_stage[slot],
                                                  pixels->c, pixel_count, mean, std, b->stream),
                           "input_import: k_cuda_input_normalize"));
    return cuda_rt(cudaEventRecord(b->input_read[slot], b->stream), "input_import: cudaEventRecord");
}

/* ---- waiting for libhora --------------------------------------------------- */

static hora_status_t cuda_request_wait(tr_backend_t *backend_base, hora_request_t req)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (b == NULL || req == NULL) return cuda_fail(HORA_ERR_INVALID_ARG, "request_wait: NULL argument");
    hora_status_t status = hora_stream_wait(req, b->stream);
    /* Without device support (host gradients of a device model cannot
     * happen, but a host-staged request can) the host waits. */
    return status == HORA_ERR_UNSUPPORTED ? hora_wait(req) : status;
}

/* ---- tensors -------------------------------------------------------------- */

int cuda_stored_channels(int c) { return c < CUDA_CONV_CHANNEL_ALIGN ? cuda_conv_pad_channels(c) : c; }

hora_status_t cuda_check_plain(const tr_tensor_t *t, tr_dtype_t dtype, int ndim, const int *dims, const char *what)
{
    if (t == NULL || t->data == NULL) return cuda_fail(HORA_ERR_INVALID_ARG, "%s: tensor not allocated", what);
    int shape[TR_TENSOR_MAX_DIMS] = {1, 1, 1, 1};
    for (int i = 0; i < ndim && i < TR_TENSOR_MAX_DIMS; i++) shape[i] = dims[i];
    if (t->dtype != dtype || t->layout != TR_LAYOUT_NCHW || t->memory != TR_MEMORY_DEVICE || t->ndim != ndim ||
        t->n != shape[0] || t->c != shape[1] || t->h != shape[2] || t->w != shape[3]) {
        char got[96];
        tr_tensor_describe(t, got, sizeof(got));
        return cuda_fail(HORA_ERR_INVALID_ARG, "%s: got %s, wanted (%d, %d, %d, %d) %s nchw device", what, got,
                         shape[0], shape[1], shape[2], shape[3], tr_dtype_name(dtype));
    }
    return HORA_OK;
}

hora_status_t cuda_check_activation(const tr_tensor_t *t, tr_dtype_t dtype, int c, int h, int w, const char *what)
{
    if (t == NULL || t->data == NULL) return cuda_fail(HORA_ERR_INVALID_ARG, "%s: tensor not allocated", what);
    const size_t stored = (size_t)t->n * (size_t)cuda_stored_channels(t->c) * (size_t)t->h * (size_t)t->w;
    if (t->dtype != dtype || t->layout != TR_LAYOUT_NHWC || t->memory != TR_MEMORY_DEVICE || t->ndim != 4 ||
        t->bytes < stored * tr_dtype_size(dtype) || (c > 0 && (t->c != c || t->h != h || t->w != w))) {
        char got[96];
        tr_tensor_describe(t, got, sizeof(got));
        return cuda_fail(HORA_ERR_INVALID_ARG, "%s: got %s, wanted (N, %d, %d, %d) %s nhwc device", what, got, c, h, w,
                         tr_dtype_name(dtype));
    }
    return HORA_OK;
}

static hora_status_t cuda_compute_dtype(tr_backend_t *backend, tr_dtype_t dtype)
{
    (void)backend;
    /* cuDNN plans f16 and bf16 convolutions with tensor cores (and f32
     * ones); cuBLASLt does all three. */
    if (cuda_float_dtype(dtype)) return HORA_OK;
    return status_set(HORA_ERR_UNSUPPORTED, "the cuda backend computes in f32, f16 or bf16, not %s",
                      tr_dtype_name(dtype));
}

static hora_status_t cuda_tensor_alloc(tr_backend_t *backend_base, int n, int c, int h, int w, tr_dtype_t dtype,
                                       tr_tensor_t *t)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (b == NULL || t == NULL) return cuda_fail(HORA_ERR_INVALID_ARG, "tensor_alloc: NULL argument");
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0)
        return cuda_fail(HORA_ERR_INVALID_ARG, "tensor_alloc: bad shape %dx%dx%dx%d", n, c, h, w);
    if (cuda_compute_dtype(backend_base, dtype) != HORA_OK)
        return cuda_fail(HORA_ERR_UNSUPPORTED, "tensor_alloc: %s", status_message());
    const size_t bytes = (size_t)n * (size_t)cuda_stored_channels(c) * (size_t)h * (size_t)w * tr_dtype_size(dtype);
    void *data = NULL;
    cudaError_t err = cudaMalloc(&data, bytes);
    if (err != cudaSuccess) {
        size_t free_bytes = 0, total = 0;
        cudaGetLastError();
        cudaMemGetInfo(&free_bytes, &total);
        return cuda_fail(
            HORA_ERR_NO_MEMORY,
            "tensor_alloc: a (%d, %d, %d, %d) %s activation needs %zu bytes, the device has %zu free of %zu "
            "(a smaller --batch?)",
            n, c, h, w, tr_dtype_name(dtype), bytes, free_bytes, total);
    }
    hora_status_t status = cuda_rt(cudaMemsetAsync(data, 0, bytes, b->stream), "tensor_alloc: cudaMemsetAsync");
    if (status != HORA_OK) {
        cudaFree(data);
        return status;
    }
    *t = (tr_tensor_t){.ndim = 4,
                       .n = n,
                       .c = c,
                       .h = h,
                       .w = w,
                       .dtype = dtype,
                       .layout = TR_LAYOUT_NHWC,
                       .memory = TR_MEMORY_DEVICE,
                       .data = data,
                       .bytes = bytes};
    return HORA_OK;
}

static void cuda_tensor_free(tr_backend_t *backend_base, tr_tensor_t *t)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (t == NULL || t->data == NULL) return;
    if (b) cudaStreamSynchronize(b->stream); /* queued ops may still read it */
    cudaFree(t->data);
    t->data = NULL;
    t->bytes = 0;
}

/* host is a plain f32 NCHW host tensor of t's (c, h, w) and at most t's
 * batch (the first host->n samples). */
static hora_status_t cuda_check_edge(const tr_tensor_t *t, const tr_tensor_t *host, const char *what)
{
    CUDA_CHECK(cuda_check_activation(t, t ? t->dtype : TR_DTYPE_F32, -1, 0, 0, what));
    if (host == NULL || host->data == NULL || host->dtype != TR_DTYPE_F32 || host->memory != TR_MEMORY_HOST ||
        host->layout != TR_LAYOUT_NCHW || host->ndim != 4 || host->c != t->c || host->h != t->h || host->w != t->w ||
        host->n < 1 || host->n > t->n || host->bytes < tr_tensor_count(host) * sizeof(float)) {
        char got[96], want[96];
        tr_tensor_describe(host, got, sizeof(got));
        tr_tensor_describe(t, want, sizeof(want));
        return cuda_fail(HORA_ERR_INVALID_ARG, "%s: host tensor %s does not fit %s (f32 nchw host, batch 1..%d)", what,
                         got, want, t->n);
    }
    return HORA_OK;
}

/* NCHW f32 <-> NHWC (stored channels cs, padding zero) f32, on the host. */
static void cuda_nchw_to_nhwc(const float *src, float *dst, int n, int c, int cs, size_t hw)
{
    for (int s = 0; s < n; s++)
        for (size_t i = 0; i < hw; i++) {
            float *o = dst + ((size_t)s * hw + i) * (size_t)cs;
            for (int k = 0; k < c; k++) o[k] = src[((size_t)s * (size_t)c + (size_t)k) * hw + i];
            for (int k = c; k < cs; k++) o[k] = 0.0f;
        }
}

static void cuda_nhwc_to_nchw(const float *src, float *dst, int n, int c, int cs, size_t hw)
{
    for (int s = 0; s < n; s++)
        for (size_t i = 0; i < hw; i++) {
            const float *in = src + ((size_t)s * hw + i) * (size_t)cs;
            for (int k = 0; k < c; k++) dst[((size_t)s * (size_t)c + (size_t)k) * hw + i] = in[k];
        }
}

/* Import and export go through one host image of the samples moved:
 * transposed and cast (round to nearest even) on the host. They are for
 * tests and the edges of the model, not the training step's inputs (the
 * input step kernel does those on the device). */
static hora_status_t cuda_tensor_edge(cuda_backend_t *b, const tr_tensor_t *host, tr_tensor_t *t, int import)
{
    const size_t hw = (size_t)t->h * (size_t)t->w;
    const int cs = cuda_stored_channels(t->c);
    const size_t elems = (size_t)host->n * hw * (size_t)cs, esize = tr_dtype_size(t->dtype);
    float *image = malloc(elems * sizeof(float));
    void *cast = t->dtype == TR_DTYPE_F32 ? (void *)image : malloc(elems * esize);
    hora_status_t status = HORA_OK;
    if (image == NULL || cast == NULL) {
        status = cuda_fail(HORA_ERR_NO_MEMORY, "tensor_%s: out of host memory", import ? "import" : "export");
    } else if (import) {
        cuda_nchw_to_nhwc(host->data, image, host->n, t->c, cs, hw);
        if (cast != image) k_cast(cast, tr_dtype_kernel(t->dtype), image, K_DTYPE_F32, elems);
        status = cuda_copy_sync(b, t->data, cast, elems * esize, "tensor_import: cudaMemcpyAsync");
    } else {
        status = cuda_copy_sync(b, cast, t->data, elems * esize, "tensor_export: cudaMemcpyAsync");
        if (status == HORA_OK) {
            if (cast != image) k_cast(image, K_DTYPE_F32, cast, tr_dtype_kernel(t->dtype), elems);
            cuda_nhwc_to_nchw(image, host->data, host->n, t->c, cs, hw);
        }
    }
    if (cast != image) free(cast);
    free(image);
    return status;
}

static hora_status_t cuda_tensor_import(tr_backend_t *backend_base, const tr_tensor_t *host, tr_tensor_t *t)
{
    CUDA_CHECK(cuda_check_edge(t, host, "tensor_import"));
    return cuda_tensor_edge((cuda_backend_t *)backend_base, host, t, 1);
}

static hora_status_t cuda_tensor_export(tr_backend_t *backend_base, const tr_tensor_t *t, tr_tensor_t *host)
{
    CUDA_CHECK(cuda_check_edge(t, host, "tensor_export"));
    return cuda_tensor_edge((cuda_backend_t *)backend_base, (tr_tensor_t *)host, (tr_tensor_t *)t, 0);
}

static hora_status_t cuda_cast(tr_backend_t *backend_base, const tr_tensor_t *src, tr_tensor_t *dst)
{
    cuda_backend_t *b = (cuda_backend_t *)backend_base;
    if (b == NULL || src == NULL || dst == NULL) return cuda_fail(HORA_ERR_INVALID_ARG, "cast: NULL argument");
    const int dims[TR_TENSOR_MAX_DIMS] = {src->n, src->c, src->h, src->w};
    if (!cuda_float_dtype(src->dtype) || !cuda_float_dtype(dst->dtype))
        return cuda_fail(HORA_ERR_INVALID_ARG, "cast: %s -> %s (f32, f16 or bf16)", tr_dtype_name(src->dtype),
                         tr_dtype_name(dst->dtype));
    CUDA_CHECK(cuda_check_plain(src, src->dtype, src->ndim, dims, "cast src"));
    CUDA_CHECK(cuda_check_plain(dst, dst->dtype, src->ndim, dims, "cast dst"));
    return cuda_kernel(k_cuda_cast(dst->data, tr_dtype_kernel(dst->dtype), src->data, tr_dtype_kernel(src->dtype),
                                   tr_tensor_count(src), b->stream),
                       "cast: k_cuda_cast");
}

static void cuda_layer_free(tr_layer_t *layer)
{
    if (layer == NULL) return;
    /* Queued ops may still use the layer's plans and buffers. */
    cudaStreamSynchronize(layer->backend->stream);
    layer->free(layer);
}

/* ---- the table ------------------------------------------------------------ */

const struct tr_backend_ops tr_backend_cuda_ops = {
    .name = "cuda",
    .memory = TR_MEMORY_DEVICE,
    .init = cuda_init,
    .free = cuda_free,
    .synchronize = cuda_synchronize,
    .buffer_alloc = cuda_buffer_alloc,
    .buffer_free = cuda_buffer_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .fill_zero = cuda_fill_zero,
    .gradient_ready = cuda_gradient_ready,
    .cast = cuda_cast,
    .check_finite = cuda_check_finite,
    .compute_dtype = cuda_compute_dtype,
    .tensor_alloc = cuda_tensor_alloc,
    .tensor_free = cuda_tensor_free,
    .tensor_import = cuda_tensor_import,
    .tensor_export = cuda_tensor_export,
    .input_import = cuda_input_import,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .conv_create = cuda_conv_create,
    .conv_forward = cuda_conv_forward,
    .conv_backward_data = cuda_conv_backward_data,
    .conv_backward_weights = cuda_conv_backward_weights,
    .bn_create = cuda_bn_create,
    .bn_forward_train = cuda_bn_forward_train,
    .bn_forward_infer = cuda_bn_forward_infer,
    .bn_backward = cuda_bn_backward,
    .pool_create = cuda_pool_create,
    .pool_forward = cuda_pool_forward,
    .pool_backward = cuda_pool_backward,
    .linear_create = cuda_linear_create,
    .linear_forward = cuda_linear_forward,
    .linear_backward_data = cuda_linear_backward_data,
    .linear_backward_weights = cuda_linear_backward_weights,
    .layer_free = cuda_layer_free,
    .relu_forward = cuda_relu_forward,
    .relu_backward = cuda_relu_backward,
    .add_forward = cuda_add_forward,
    .softmax_xent = cuda_softmax_xent,
    .sgd_step = cuda_sgd_step,
    .request_wait = cuda_request_wait,
};
