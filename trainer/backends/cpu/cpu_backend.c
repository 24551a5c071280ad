/*
 * cpu_backend.c - the "cpu" compute backend (struct tr_backend_ops on
 * oneDNN): the ops table, the backend handle (one engine, one stream, one
 * shared scratchpad, the thread count), host buffers and the data movement
 * ops, activation tensors in oneDNN's blocked layouts and their
 * import/export, casts and the dtypes it computes in. The layers live in
 * cpu_conv.c, cpu_linear.c, cpu_bn.c and cpu_pool.c, the element-wise ops
 * in cpu_eltwise.c, the loss, the SGD step and the overflow check in
 * cpu_step.c (the same files as the cuda backend's); cpu_dnnl.c and
 * cpu_pd.c hold the oneDNN plumbing the layers share.
 *
 * Threads: oneDNN here runs on OpenMP, so the thread count is OpenMP's
 * (omp_set_num_threads at init, on the calling thread: call the ops from
 * the thread that made the backend). Our own loops use the same count.
 *
 * Build: trainer/backends/cpu/meson.build lists the sources and their dependencies
 * (libdnnl, OpenMP, kernels/ for the SGD step, casts and the overflow check); trainer/meson.build builds
 * them into trainer_backend_lib.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_backend.h"
#include "cpu_internal.h"
#include "threads.h"
#include "k_cpu.h"

/* ---- backend ------------------------------------------------------------- */

/* The widest channel block oneDNN's direct kernels use on this CPU: 16
 * floats (one zmm) with AVX-512, 8 (one ymm) with AVX2; older CPUs get
 * plain NCHW. */
static int cpu_best_block(void)
{
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    if ((isa & (unsigned)dnnl_cpu_isa_avx512_core) == (unsigned)dnnl_cpu_isa_avx512_core) return 16;
    if ((isa & (unsigned)dnnl_cpu_isa_avx2) == (unsigned)dnnl_cpu_isa_avx2) return 8;
    return 1;
}

/* Which dtypes' activations are NHWC. oneDNN 3's fast bf16 and f16
 * kernels (brgconv, on AVX512-BF16/FP16 and AMX tiles) take channels-last
 * activations, and on blocked ones it falls back on its older jit_bf16
 * kernels at a third to half their speed (trainer/backends/cpu/README.md has the
 * numbers); f32 stays blocked, where its direct kernels are fastest.
 * oneDNN 2.6 has no such kernels: everything blocked. channel_block -1
 * forces NHWC for every dtype, 1/8/16 blocks for every dtype. */
static unsigned cpu_nhwc_dtypes(int channel_block)
{
    if (channel_block == -1) return ~0u;
    if (channel_block != 0 || !CPU_DNNL3) return 0;
    return (1u << TR_DTYPE_BF16) | (1u << TR_DTYPE_F16);
}

static hora_status_t cpu_init(const tr_backend_config_t *config, tr_backend_t **backend_out)
{
    if (config == NULL || backend_out == NULL) return cpu_invalid("init: NULL argument");
    if (config->threads < 0) return cpu_invalid("init: threads %d (0 = automatic)", config->threads);
    if (config->channel_block != 0 && config->channel_block != 1 && config->channel_block != 8 &&
        config->channel_block != 16 && config->channel_block != -1)
        return cpu_invalid("init: channel_block %d (0 = automatic, 1, 8, 16 or -1 for NHWC)", config->channel_block);

    cpu_backend_t *backend = cpu_alloc(sizeof(*backend), "the cpu backend");
    if (backend == NULL) return HORA_ERR_NO_MEMORY;
    backend->base.ops = &tr_backend_cpu_ops;
    backend->threads = config->threads > 0 ? config->threads : tr_threads_default(NULL);
    backend->verbose = config->verbose;
    backend->channel_block = config->channel_block > 0 ? config->channel_block : cpu_best_block();
    backend->nhwc = cpu_nhwc_dtypes(config->channel_block);
    /* Before any primitive exists: oneDNN sizes its kernels' work split by
     * the thread count it sees when a primitive is made. */
    omp_set_num_threads(backend->threads);

    hora_status_t status = cpu_dnnl(dnnl_engine_create(&backend->engine, dnnl_cpu, 0), "engine");
    if (status != HORA_OK) goto err_free_backend;
    status = cpu_dnnl(dnnl_stream_create(&backend->stream, backend->engine, dnnl_stream_default_flags), "stream");
    if (status != HORA_OK) goto err_destroy_engine;
    /* User scratchpad: the primitives share backend->scratch instead of each
     * keeping (or allocating per call) its own. */
    status = cpu_dnnl(dnnl_primitive_attr_create(&backend->attr), "primitive attributes");
    if (status != HORA_OK) goto err_destroy_stream;
    status =
        cpu_dnnl(dnnl_primitive_attr_set_scratchpad_mode(backend->attr, dnnl_scratchpad_mode_user), "scratchpad mode");
    if (status != HORA_OK) goto err_destroy_attr;

    if (backend->verbose) {
        const dnnl_version_t *v = dnnl_version();
        const char *blocked = backend->channel_block == 1 ? "nchw" : backend->channel_block == 8 ? "nChw8c" : "nChw16c";
        fprintf(stderr, "hora-train: cpu: oneDNN %d.%d.%d, isa %s, %d threads, activations f32 %s, bf16/f16 %s\n",
                v->major, v->minor, v->patch, cpu_isa_name(), backend->threads,
                backend->nhwc & (1u << TR_DTYPE_F32) ? "nhwc" : blocked,
                backend->nhwc & (1u << TR_DTYPE_BF16) ? "nhwc" : blocked);
    }
    *backend_out = &backend->base;
    return HORA_OK;

err_destroy_attr:
    dnnl_primitive_attr_destroy(backend->attr);
err_destroy_stream:
    dnnl_stream_destroy(backend->stream);
err_destroy_engine:
    dnnl_engine_destroy(backend->engine);
err_free_backend:
    free(backend);
    return status;
}

static void cpu_free(tr_backend_t *backend_base)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL) return;
    dnnl_primitive_attr_destroy(backend->attr);
    dnnl_stream_destroy(backend->stream);
    dnnl_engine_destroy(backend->engine);
    free(backend->scratch);
    free(backend);
}

static hora_status_t cpu_synchronize(tr_backend_t *backend_base)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL) return cpu_invalid("synchronize: NULL backend");
    /* Every op already waited for its primitive; this is for symmetry. */
    return cpu_dnnl(dnnl_stream_wait(backend->stream), "stream wait");
}

static hora_status_t cpu_buffer_alloc(tr_backend_t *backend, size_t bytes, void **ptr_out)
{
    if (backend == NULL || ptr_out == NULL) return cpu_invalid("buffer_alloc: NULL argument");
    /* Zeroed: momentum buffers and gradient arenas start at 0. */
    void *p = cpu_alloc(bytes, "a backend buffer");
    if (p == NULL) return HORA_ERR_NO_MEMORY;
    *ptr_out = p;
    return HORA_OK;
}

static void cpu_buffer_free(tr_backend_t *backend, void *ptr)
{
    (void)backend;
    free(ptr);
}

static void cpu_layer_free(tr_layer_t *layer)
{
    if (layer != NULL) layer->free(layer);
}

/* ---- data movement -------------------------------------------------------
 *
 * Backend memory is host memory here: upload and download are copies, and a
 * gradient is complete when the op that wrote it returns. */

static hora_status_t cpu_check_moved(const tr_tensor_t *t, const void *host, const char *what)
{
    if (t == NULL || t->data == NULL || host == NULL) return cpu_invalid("%s: NULL tensor or host array", what);
    if (t->memory != TR_MEMORY_HOST || t->layout != TR_LAYOUT_NCHW)
        return cpu_invalid("%s: a plain tensor in host memory wanted, got %s %s", what, tr_layout_name(t->layout),
                           tr_memory_name(t->memory));
    return HORA_OK;
}

static hora_status_t cpu_upload(tr_backend_t *backend, tr_tensor_t *dst, const void *host)
{
    (void)backend;
    CPU_CHECK(cpu_check_moved(dst, host, "upload"));
    memcpy(dst->data, host, dst->bytes);
    return HORA_OK;
}

static hora_status_t cpu_download(tr_backend_t *backend, const tr_tensor_t *src, void *host)
{
    (void)backend;
    CPU_CHECK(cpu_check_moved(src, host, "download"));
    memcpy(host, src->data, src->bytes);
    return HORA_OK;
}

static hora_status_t cpu_fill_zero(tr_backend_t *backend, tr_tensor_t *t)
{
    (void)backend;
    if (t == NULL || t->data == NULL || t->memory != TR_MEMORY_HOST)
        return cpu_invalid("fill_zero: not an allocated host tensor");
    memset(t->data, 0, t->bytes);
    return HORA_OK;
}

static hora_status_t cpu_gradient_ready(tr_backend_t *backend, tr_event_t *event_out)
{
    (void)backend;
    if (event_out == NULL) return cpu_invalid("gradient_ready: NULL event");
    *event_out = NULL; /* every op has finished when it returns */
    return HORA_OK;
}

/* ---- activation tensors -------------------------------------------------- */

static hora_status_t cpu_tensor_alloc(tr_backend_t *backend_base, int n, int c, int h, int w, tr_dtype_t dtype,
                                      tr_tensor_t *t)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL || t == NULL) return cpu_invalid("tensor_alloc: NULL argument");
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0) return cpu_invalid("tensor_alloc: bad shape %dx%dx%dx%d", n, c, h, w);
    if (cpu_compute_dtype_ok(dtype) != HORA_OK)
        return status_set(HORA_ERR_UNSUPPORTED, "cpu: tensor_alloc: no %s activations: %s", tr_dtype_name(dtype),
                          status_message());
    tr_layout_t layout = cpu_layout_for(backend, c, dtype);
    cpu_md_t md;
    CPU_CHECK(cpu_md_4d(&md, n, c, h, w, layout, dtype));
    size_t bytes = dnnl_memory_desc_get_size(md);
    cpu_md_free(md);
    void *data = cpu_alloc(bytes, "an activation tensor");
    if (data == NULL) return HORA_ERR_NO_MEMORY;
    *t = (tr_tensor_t){.ndim = 4,
                       .n = n,
                       .c = c,
                       .h = h,
                       .w = w,
                       .dtype = dtype,
                       .layout = layout,
                       .memory = TR_MEMORY_HOST,
                       .data = data,
                       .bytes = bytes};
    return HORA_OK;
}

static void cpu_tensor_free(tr_backend_t *backend, tr_tensor_t *t)
{
    (void)backend;
    if (t == NULL) return;
    free(t->data);
    t->data = NULL;
    t->bytes = 0;
}

/* Channel block of a tensor this backend allocated; 0 for a layout it
 * never gives out. */
static int cpu_tensor_block(const cpu_backend_t *backend, const tr_tensor_t *t)
{
    if (t->layout != cpu_layout_for(backend, t->c, t->dtype)) return 0;
    switch (t->layout) {
    case TR_LAYOUT_NCHW: return 1;
    case TR_LAYOUT_NCHW8C: return 8;
    case TR_LAYOUT_NCHW16C: return 16;
    case TR_LAYOUT_NHWC: return t->c; /* one block of all C channels */
    default: return 0;
    }
}

/* t is an activation of this backend (f32, bf16 or f16) and host a plain f32
 * host tensor (n, c, h, w) of t's (c, h, w) and at most t's batch: the
 * first host->n samples. */
static hora_status_t cpu_tensor_check_edge(const cpu_backend_t *backend, const tr_tensor_t *t, const tr_tensor_t *host,
                                           const char *what, int *block)
{
    if (t == NULL || t->data == NULL || host == NULL || host->data == NULL)
        return cpu_invalid("%s: tensor not allocated", what);
    *block = cpu_tensor_block(backend, t);
    if ((t->dtype != TR_DTYPE_F32 && t->dtype != TR_DTYPE_BF16 && t->dtype != TR_DTYPE_F16) ||
        t->memory != TR_MEMORY_HOST || *block == 0 || t->bytes != tr_tensor_count(t) * tr_dtype_size(t->dtype))
        return cpu_invalid("%s: not an f32, bf16 or f16 tensor from this backend's tensor_alloc", what);
    if (host->dtype != TR_DTYPE_F32 || host->memory != TR_MEMORY_HOST || host->layout != TR_LAYOUT_NCHW ||
        host->ndim != 4 || host->c != t->c || host->h != t->h || host->w != t->w || host->n < 1 || host->n > t->n ||
        host->bytes < tr_tensor_count(host) * sizeof(float)) {
        char got[96], want[96];
        tr_tensor_describe(host, got, sizeof(got));
        tr_tensor_describe(t, want, sizeof(want));
        return cpu_invalid("%s: host tensor %s does not fit %s (f32 nchw host, batch 1..%d)", what, got, want, t->n);
    }
    return HORA_OK;
}

/* nChw<B>c: element (n, c, h, w) at ((n * C/B + c/B) * H*W + h*W + w) * B
 * + c%B. C is a multiple of B (cpu_layout_for), so there is no padding.
 * Block 1 is plain NCHW. The f32 host side is converted on the way (bf16:
 * rounded to nearest even, as everywhere). */
#define CPU_F32_ID(x) (x)
#define CPU_LAYOUT_COPY(name, src_t, dst_t, convert, to_blocked)                                     \
    static void name(const src_t *src, dst_t *dst, int samples, const tr_tensor_t *t, int block)     \
    {                                                                                                \
        size_t hw = (size_t)t->h * (size_t)t->w;                                                     \
        int blocks = t->c / block;                                                                   \
        for (int n = 0; n < samples; n++)                                                            \
            for (int cb = 0; cb < blocks; cb++) {                                                    \
                size_t plain = ((size_t)n * t->c + (size_t)cb * block) * hw;                         \
                size_t blocked = ((size_t)n * blocks + cb) * hw * block;                             \
                for (int k = 0; k < block; k++)                                                      \
                    for (size_t i = 0; i < hw; i++) {                                                \
                        if (to_blocked)                                                              \
                            dst[blocked + i * block + k] = convert(src[plain + (size_t)k * hw + i]); \
                        else                                                                         \
                            dst[plain + (size_t)k * hw + i] = convert(src[blocked + i * block + k]); \
                    }                                                                                \
            }                                                                                        \
    }
CPU_LAYOUT_COPY(cpu_import_f32, float, float, CPU_F32_ID, 1)
CPU_LAYOUT_COPY(cpu_import_bf16, float, uint16_t, k_num_f32_to_bf16, 1)
CPU_LAYOUT_COPY(cpu_export_f32, float, float, CPU_F32_ID, 0)
CPU_LAYOUT_COPY(cpu_export_bf16, uint16_t, float, k_num_bf16_to_f32, 0)
CPU_LAYOUT_COPY(cpu_import_f16, float, uint16_t, k_num_f32_to_f16, 1)
CPU_LAYOUT_COPY(cpu_export_f16, uint16_t, float, k_num_f16_to_f32, 0)

static hora_status_t cpu_tensor_import(tr_backend_t *backend_base, const tr_tensor_t *host, tr_tensor_t *t)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    int block;
    if (backend == NULL) return cpu_invalid("tensor_import: NULL backend");
    CPU_CHECK(cpu_tensor_check_edge(backend, t, host, "tensor_import", &block));
    if (t->dtype == TR_DTYPE_BF16)
        cpu_import_bf16(host->data, t->data, host->n, t, block);
    else if (t->dtype == TR_DTYPE_F16)
        cpu_import_f16(host->data, t->data, host->n, t, block);
    else if (block == 1)
        memcpy(t->data, host->data, tr_tensor_count(host) * sizeof(float));
    else
        cpu_import_f32(host->data, t->data, host->n, t, block);
    return HORA_OK;
}

/* The input step: normalised into an f32 NCHW host batch (tensor.h's
 * tr_tensor_normalize_u8), then imported as any host batch. */
static hora_status_t cpu_input_import(tr_backend_t *backend_base, const tr_tensor_t *pixels, const float *mean,
                                      const float *std, tr_tensor_t *t)
{
    if (backend_base == NULL || pixels == NULL || pixels->data == NULL || mean == NULL || std == NULL || t == NULL)
        return cpu_invalid("input_import: NULL argument");
    if (pixels->dtype != TR_DTYPE_U8 || pixels->layout != TR_LAYOUT_NHWC || pixels->memory != TR_MEMORY_HOST ||
        pixels->ndim != 4 || pixels->n < 1) {
        char got[96];
        tr_tensor_describe(pixels, got, sizeof(got));
        return cpu_invalid("input_import: pixels %s: a host u8 nhwc batch wanted", got);
    }
    const int dims[4] = {pixels->n, pixels->c, pixels->h, pixels->w};
    float *x = malloc(tr_tensor_count(pixels) * sizeof(float));
    if (x == NULL) {
        return status_set(HORA_ERR_NO_MEMORY, "cpu: input_import: out of memory");
    }
    tr_tensor_normalize_u8(pixels, mean, std, x);
    tr_tensor_t host = tr_tensor_plain(x, TR_DTYPE_F32, TR_MEMORY_HOST, 4, dims);
    hora_status_t status = cpu_tensor_import(backend_base, &host, t);
    free(x);
    return status;
}

static hora_status_t cpu_host_alloc(tr_backend_t *backend, size_t bytes, void **ptr_out)
{
    (void)backend;
    void *p = NULL;
    if (ptr_out == NULL) return cpu_invalid("host_alloc: NULL argument");
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0) {
        return status_set(HORA_ERR_NO_MEMORY, "cpu: host_alloc: %zu bytes: out of memory", bytes);
    }
    memset(p, 0, bytes);
    *ptr_out = p;
    return HORA_OK;
}

static void cpu_host_free(tr_backend_t *backend, void *ptr)
{
    (void)backend;
    free(ptr);
}

/* Every op is complete when it returns: the host waits. */
static hora_status_t cpu_request_wait(tr_backend_t *backend, hora_request_t req)
{
    (void)backend;
    if (req == NULL) return cpu_invalid("request_wait: NULL request");
    return hora_wait(req);
}

static hora_status_t cpu_tensor_export(tr_backend_t *backend_base, const tr_tensor_t *t, tr_tensor_t *host)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    int block;
    if (backend == NULL) return cpu_invalid("tensor_export: NULL backend");
    CPU_CHECK(cpu_tensor_check_edge(backend, t, host, "tensor_export", &block));
    if (t->dtype == TR_DTYPE_BF16)
        cpu_export_bf16(t->data, host->data, host->n, t, block);
    else if (t->dtype == TR_DTYPE_F16)
        cpu_export_f16(t->data, host->data, host->n, t, block);
    else if (block == 1)
        memcpy(host->data, t->data, tr_tensor_count(host) * sizeof(float));
    else
        cpu_export_f32(t->data, host->data, host->n, t, block);
    return HORA_OK;
}

/* ---- casts and the compute dtypes ---------------------------------------- */

static hora_status_t cpu_cast(tr_backend_t *backend_base, const tr_tensor_t *src, tr_tensor_t *dst)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL || src == NULL || dst == NULL) return cpu_invalid("cast: NULL argument");
    const int dims[TR_TENSOR_MAX_DIMS] = {src->n, src->c, src->h, src->w};
    CPU_CHECK(cpu_check_plain(src, src->dtype, src->ndim, dims, "cast src"));
    CPU_CHECK(cpu_check_plain(dst, dst->dtype, src->ndim, dims, "cast dst"));
    cpu_cast_n(backend, dst->data, dst->dtype, src->data, src->dtype, tr_tensor_count(src));
    return HORA_OK;
}

static hora_status_t cpu_compute_dtype(tr_backend_t *backend, tr_dtype_t dtype)
{
    (void)backend;
    return cpu_compute_dtype_ok(dtype);
}

/* ---- the table ----------------------------------------------------------- */

const struct tr_backend_ops tr_backend_cpu_ops = {
    .name = "cpu",
    .memory = TR_MEMORY_HOST,
    .init = cpu_init,
    .free = cpu_free,
    .synchronize = cpu_synchronize,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .upload = cpu_upload,
    .download = cpu_download,
    .fill_zero = cpu_fill_zero,
    .gradient_ready = cpu_gradient_ready,
    .cast = cpu_cast,
    .check_finite = cpu_check_finite,
    .compute_dtype = cpu_compute_dtype,
    .tensor_alloc = cpu_tensor_alloc,
    .tensor_free = cpu_tensor_free,
    .tensor_import = cpu_tensor_import,
    .tensor_export = cpu_tensor_export,
    .input_import = cpu_input_import,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .conv_create = cpu_conv_create,
    .conv_forward = cpu_conv_forward,
    .conv_backward_data = cpu_conv_backward_data,
    .conv_backward_weights = cpu_conv_backward_weights,
    .bn_create = cpu_bn_create,
    .bn_forward_train = cpu_bn_forward_train,
    .bn_forward_infer = cpu_bn_forward_infer,
    .bn_backward = cpu_bn_backward,
    .pool_create = cpu_pool_create,
    .pool_forward = cpu_pool_forward,
    .pool_backward = cpu_pool_backward,
    .linear_create = cpu_linear_create,
    .linear_forward = cpu_linear_forward,
    .linear_backward_data = cpu_linear_backward_data,
    .linear_backward_weights = cpu_linear_backward_weights,
    .layer_free = cpu_layer_free,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .add_forward = cpu_add_forward,
    .softmax_xent = cpu_softmax_xent,
    .sgd_step = cpu_sgd_step,
    .request_wait = cpu_request_wait,
};
