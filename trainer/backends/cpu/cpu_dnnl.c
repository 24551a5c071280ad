/*
 * cpu_dnnl.c - the oneDNN plumbing the cpu backend's layers share: memory
 * descriptors for our layouts, cpu_prim_t (a primitive
 * made once per layer and batch size with memory objects for its arguments,
 * re-pointed at each call's buffers, run on the backend's stream with the
 * backend's shared scratchpad) and the per-batch-size cache of a layer's
 * primitives.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "k_cpu.h"

void *cpu_alloc(size_t bytes, const char *what)
{
    /* aligned_alloc wants a multiple of the alignment; 64 bytes is a cache
     * line and one AVX-512 vector. */
    size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded == 0) rounded = 64;
    void *p = aligned_alloc(64, rounded);
    if (p == NULL) {
        status_set(HORA_ERR_NO_MEMORY, "cpu: out of memory allocating %zu bytes for %s", bytes, what);
        return NULL;
    }
    memset(p, 0, rounded);
    return p;
}

tr_layout_t cpu_layout_for(const cpu_backend_t *backend, int c, tr_dtype_t dtype)
{
    /* NHWC is one block of all C channels: no padding either. */
    if (backend->nhwc & (1u << dtype)) return TR_LAYOUT_NHWC;
    /* Blocked layouts only where C fills whole blocks: then no tensor has
     * padding channels, so element-wise ops may run over t->bytes flat and
     * an (n, c, 1, 1) tensor is the same bytes as a plain (n, c) matrix. */
    if (backend->channel_block == 16 && c % 16 == 0) return TR_LAYOUT_NCHW16C;
    if (backend->channel_block >= 8 && c % 8 == 0) return TR_LAYOUT_NCHW8C;
    return TR_LAYOUT_NCHW;
}

const char *cpu_isa_name(void)
{
    switch (dnnl_get_effective_cpu_isa()) {
#if CPU_DNNL3
    case dnnl_cpu_isa_avx512_core_amx_fp16: return "avx512_core_amx_fp16";
    case dnnl_cpu_isa_avx512_core_fp16: return "avx512_core_fp16";
#endif
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_sse41: return "sse41";
    default: return "other";
    }
}

dnnl_data_type_t cpu_dnnl_dtype(tr_dtype_t dtype)
{
    switch (dtype) {
    case TR_DTYPE_F32: return dnnl_f32;
    case TR_DTYPE_F16: return dnnl_f16;
    case TR_DTYPE_BF16: return dnnl_bf16;
    case TR_DTYPE_I32: return dnnl_s32;
    case TR_DTYPE_U8: return dnnl_u8;
    }
    return dnnl_data_type_undef;
}

/* Whether oneDNN trains a 3x3 convolution and a batch norm in dtype with
 * optimised kernels on this CPU (forward, backward data, backward
 * weights; the weight gradient in f32 as the layers ask; a low-precision
 * backward weights may be slow, the layer widens it): the layers' test.
 * The reference kernels it would otherwise fall back on are far too slow
 * to train with. oneDNN 2.6 has bf16 kernels from AVX-512 (native on
 * avx512_core_bf16, emulated below it) and no f16 ones on the CPU; oneDNN
 * 3 adds f16 where the CPU has AVX512-FP16, and AMX tiles for both. */
static int cpu_dtype_probe(tr_dtype_t dtype, char *why, size_t why_len)
{
    cpu_backend_t probe = {0}; /* an engine and no attributes: all cpu_pd_* read */
    if (dnnl_engine_create(&probe.engine, dnnl_cpu, 0) != dnnl_success) {
        snprintf(why, why_len, "no oneDNN CPU engine");
        return 0;
    }
    enum { SRC, DST, W, DW, MD_COUNT };
    cpu_md_t md[MD_COUNT] = {0};
    dnnl_primitive_desc_t pd[5] = {0};
    const char *what[5] = {"convolution", "convolution backward data", "convolution backward weights", "batch norm",
                           "batch norm backward"};
    dnnl_dims_t data_dims = {2, 16, 8, 8}, weight_dims = {16, 16, 3, 3}, strides = {1, 1}, pad = {1, 1};
    dnnl_data_type_t dt = cpu_dnnl_dtype(dtype);
    unsigned bn_flags = dnnl_use_scale | dnnl_use_shift | dnnl_fuse_norm_relu;
    /* In the layout the backend gives dtype's activations (cpu_nhwc_dtypes). */
    dnnl_format_tag_t tag = CPU_DNNL3 && dtype != TR_DTYPE_F32 ? dnnl_nhwc : dnnl_nChw16c;
    int made = cpu_md_tag(&md[SRC], 4, data_dims, dt, tag) == HORA_OK &&
               cpu_md_tag(&md[DST], 4, data_dims, dt, tag) == HORA_OK &&
               cpu_md_tag(&md[W], 4, weight_dims, dt, dnnl_format_tag_any) == HORA_OK &&
               cpu_md_tag(&md[DW], 4, weight_dims, dnnl_f32, dnnl_format_tag_any) == HORA_OK;
    int failed = -1; /* the first primitive without a fast kernel */
    for (int k = 0; made && k < 5 && failed < 0; k++) {
        dnnl_status_t st = dnnl_unimplemented;
        switch (k) {
        case 0: st = cpu_pd_conv_forward(&pd[k], &probe, md[SRC], md[W], md[DST], strides, pad); break;
        case 1: st = cpu_pd_conv_backward_data(&pd[k], &probe, md[SRC], md[W], md[DST], strides, pad, pd[0]); break;
        case 2: st = cpu_pd_conv_backward_weights(&pd[k], &probe, md[SRC], md[DW], md[DST], strides, pad, pd[0]); break;
        case 3: st = cpu_pd_bn_forward(&pd[k], &probe, dnnl_forward_training, md[SRC], 1e-5f, bn_flags); break;
        case 4: st = cpu_pd_bn_backward(&pd[k], &probe, md[SRC], 1e-5f, bn_flags, pd[3]); break;
        }
        const char *impl = "";
        /* A slow backward weights in a low precision is no obstacle: the
         * conv layer then runs it in f32 on widened copies (cpu_conv.c). */
        if (st != dnnl_success ||
            dnnl_primitive_desc_query(pd[k], dnnl_query_impl_info_str, 0, &impl) != dnnl_success ||
            (strncmp(impl, "ref", 3) == 0 && !(k == 2 && dtype != TR_DTYPE_F32)))
            failed = k;
    }
    if (!made) failed = 0;
    if (failed >= 0) {
        const dnnl_version_t *v = dnnl_version();
        snprintf(why, why_len, "oneDNN %d.%d.%d has no %s%s %s on this CPU (isa %s)", v->major, v->minor, v->patch,
                 pd[failed] != NULL ? "fast " : "", tr_dtype_name(dtype), what[failed], cpu_isa_name());
    }
    for (int k = 0; k < 5; k++)
        if (pd[k] != NULL) dnnl_primitive_desc_destroy(pd[k]);
    cpu_md_free_all(md, MD_COUNT);
    dnnl_engine_destroy(probe.engine);
    return failed < 0;
}

hora_status_t cpu_compute_dtype_ok(tr_dtype_t dtype)
{
    /* -1 unknown, 0 no, 1 yes, per dtype; the answer is the CPU's and the
     * library's, the same for every backend of the process. */
    static int known[4] = {1, -1, -1, 0};
    static char reasons[4][160];
    int i = (int)dtype;
    if (i < 0 || i >= 4) return status_set(HORA_ERR_UNSUPPORTED, "dtype %d is not a tensor dtype", i);
    if (dtype == TR_DTYPE_I32) snprintf(reasons[i], sizeof(reasons[i]), "layers do not compute in i32");
#pragma omp critical(cpu_dtype_probe)
    if (known[i] < 0) known[i] = cpu_dtype_probe(dtype, reasons[i], sizeof(reasons[i]));
    if (known[i]) return HORA_OK;
    return status_set(HORA_ERR_UNSUPPORTED, "%s", reasons[i]);
}

hora_status_t cpu_check_layer_dtypes(tr_dtype_t dtype, tr_dtype_t grad_dtype, const char *what)
{
    if (cpu_compute_dtype_ok(dtype) != HORA_OK)
        return status_set(HORA_ERR_UNSUPPORTED, "cpu: %s: cannot compute in %s: %s", what, tr_dtype_name(dtype),
                          status_message());
    if (grad_dtype != TR_DTYPE_F32 && grad_dtype != TR_DTYPE_BF16 && grad_dtype != TR_DTYPE_F16)
        return cpu_invalid("%s: gradient dtype %s (f32, bf16 or f16)", what, tr_dtype_name(grad_dtype));
    return HORA_OK;
}

hora_status_t cpu_md_4d(cpu_md_t *md, int n, int c, int h, int w, tr_layout_t layout, tr_dtype_t dtype)
{
    dnnl_format_tag_t tag;
    switch (layout) {
    case TR_LAYOUT_NCHW: tag = dnnl_nchw; break;
    case TR_LAYOUT_NHWC: tag = dnnl_nhwc; break;
    case TR_LAYOUT_NCHW8C: tag = dnnl_nChw8c; break;
    case TR_LAYOUT_NCHW16C: tag = dnnl_nChw16c; break;
    default: return cpu_invalid("unknown layout %d", (int)layout);
    }
    dnnl_dims_t dims = {n, c, h, w};
    return cpu_md_tag(md, 4, dims, cpu_dnnl_dtype(dtype), tag);
}

hora_status_t cpu_md_plain(cpu_md_t *md, int ndims, const int *dims, tr_dtype_t dtype)
{
    static const dnnl_format_tag_t tags[] = {dnnl_format_tag_undef, dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd};
    if (ndims < 1 || ndims > 4) return cpu_invalid("plain descriptor with %d dimensions", ndims);
    dnnl_dims_t d;
    for (int i = 0; i < ndims; i++) d[i] = dims[i];
    return cpu_md_tag(md, ndims, d, cpu_dnnl_dtype(dtype), tags[ndims]);
}

/* Below this many elements a parallel region costs more than it saves. */
#define CPU_SPLIT_MIN_COUNT ((size_t)1 << 16)

void cpu_split(const cpu_backend_t *backend, size_t count, cpu_range_fn fn, const void *ctx)
{
    if (backend->threads <= 1 || count < CPU_SPLIT_MIN_COUNT) {
        fn(ctx, 0, count);
        return;
    }
#pragma omp parallel num_threads(backend->threads)
    {
        size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        size_t per = ((count + nt - 1) / nt + 31) / 32 * 32;
        size_t begin = t * per < count ? t * per : count;
        size_t end = begin + per < count ? begin + per : count;
        if (begin < end) fn(ctx, begin, end);
    }
}

typedef struct {
    void *dst;
    const void *src;
    tr_dtype_t dst_dtype, src_dtype;
} cpu_cast_args_t;

static void cpu_cast_range(const void *ctx, size_t begin, size_t end)
{
    const cpu_cast_args_t *a = ctx;
    k_cast((char *)a->dst + begin * tr_dtype_size(a->dst_dtype), tr_dtype_kernel(a->dst_dtype),
           (const char *)a->src + begin * tr_dtype_size(a->src_dtype), tr_dtype_kernel(a->src_dtype), end - begin);
}

void cpu_cast_n(const cpu_backend_t *backend, void *dst, tr_dtype_t dst_dtype, const void *src, tr_dtype_t src_dtype,
                size_t count)
{
    const cpu_cast_args_t args = {dst, src, dst_dtype, src_dtype};
    cpu_split(backend, count, cpu_cast_range, &args);
}

const float *cpu_widen(const cpu_backend_t *backend, float *wide, const tr_tensor_t *t)
{
    cpu_cast_n(backend, wide, TR_DTYPE_F32, t->data, t->dtype, tr_tensor_count(t));
    return wide;
}

void cpu_grad_store(tr_tensor_t *dst, const float *f32, size_t count)
{
    k_cast(dst->data, tr_dtype_kernel(dst->dtype), f32, K_DTYPE_F32, count);
}

/* The primitive itself and the scratchpad, which every primitive of the
 * backend shares because they run one at a time. */
hora_status_t cpu_prim_made(cpu_backend_t *backend, cpu_prim_t *p, const char *what, dnnl_status_t made)
{
    p->what = what;
    hora_status_t status = cpu_dnnl(made, what);
    if (status != HORA_OK) return status;
    status = cpu_dnnl(dnnl_primitive_create(&p->prim, p->pd), p->what);
    if (status != HORA_OK) return status;

    cpu_cmd_t scratch_md = cpu_prim_md(p, DNNL_ARG_SCRATCHPAD);
    size_t scratch_bytes = scratch_md ? dnnl_memory_desc_get_size(scratch_md) : 0;
    if (scratch_bytes == 0) return HORA_OK;
    if (scratch_bytes > backend->scratch_bytes) {
        void *bigger = cpu_alloc(scratch_bytes, "the oneDNN scratchpad");
        if (bigger == NULL) return HORA_ERR_NO_MEMORY;
        free(backend->scratch);
        backend->scratch = bigger;
        backend->scratch_bytes = scratch_bytes;
    }
    return cpu_prim_add_arg(p, backend->engine, DNNL_ARG_SCRATCHPAD);
}

hora_status_t cpu_prim_init_reorder(cpu_backend_t *backend, cpu_prim_t *p, const char *what, cpu_cmd_t src_md,
                                    cpu_cmd_t dst_md)
{
    CPU_CHECK(cpu_prim_made(
        backend, p, what,
        dnnl_reorder_primitive_desc_create(&p->pd, src_md, backend->engine, dst_md, backend->engine, backend->attr)));
    CPU_CHECK(cpu_prim_add_arg(p, backend->engine, DNNL_ARG_FROM));
    return cpu_prim_add_arg(p, backend->engine, DNNL_ARG_TO);
}

cpu_cmd_t cpu_prim_md(const cpu_prim_t *p, int arg)
{
    return dnnl_primitive_desc_query_md(p->pd, dnnl_query_exec_arg_md, arg);
}

const char *cpu_prim_impl(const cpu_prim_t *p)
{
    const char *impl = NULL;
    if (p->pd == NULL || dnnl_primitive_desc_query(p->pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success ||
        impl == NULL)
        return "?";
    return impl;
}

hora_status_t cpu_prim_add_arg(cpu_prim_t *p, dnnl_engine_t engine, int arg)
{
    if (p->nargs == CPU_PRIM_MAX_ARGS) return cpu_invalid("%s: more than %d arguments", p->what, CPU_PRIM_MAX_ARGS);
    cpu_cmd_t md = cpu_prim_md(p, arg);
    if (md == NULL) return cpu_dnnl(dnnl_invalid_arguments, p->what);
    dnnl_memory_t mem;
    hora_status_t status = cpu_dnnl(dnnl_memory_create(&mem, md, engine, DNNL_MEMORY_NONE), p->what);
    if (status != HORA_OK) return status;
    p->args[p->nargs].arg = arg;
    p->args[p->nargs].memory = mem;
    p->nargs++;
    return HORA_OK;
}

static hora_status_t cpu_prim_set(cpu_prim_t *p, int arg, const void *ptr)
{
    for (int i = 0; i < p->nargs; i++) {
        if (p->args[i].arg != arg) continue;
        /* oneDNN takes void *; inputs are only read. Our descriptors have
         * no padding except in reordered weights, which are our own
         * buffers, so the zero-padding this call may do never writes to a
         * caller's input. */
        return cpu_dnnl(dnnl_memory_set_data_handle(p->args[i].memory, (void *)ptr), p->what);
    }
    return cpu_invalid("%s: no argument %d", p->what, arg);
}

static hora_status_t cpu_prim_exec(cpu_backend_t *backend, cpu_prim_t *p)
{
    hora_status_t status;
    for (int i = 0; i < p->nargs; i++) {
        if (p->args[i].arg != DNNL_ARG_SCRATCHPAD) continue;
        /* The scratchpad may have moved since this primitive was made. */
        status = cpu_prim_set(p, DNNL_ARG_SCRATCHPAD, backend->scratch);
        if (status != HORA_OK) return status;
    }
    status = cpu_dnnl(dnnl_primitive_execute(p->prim, backend->stream, p->nargs, p->args), p->what);
    if (status != HORA_OK) return status;
    return cpu_dnnl(dnnl_stream_wait(backend->stream), p->what);
}

hora_status_t cpu_prim_run(cpu_backend_t *backend, cpu_prim_t *p, int count, const int *args, const void *const *ptrs)
{
    for (int i = 0; i < count; i++) CPU_CHECK(cpu_prim_set(p, args[i], ptrs[i]));
    return cpu_prim_exec(backend, p);
}

void cpu_prim_free(cpu_prim_t *p)
{
    for (int i = 0; i < p->nargs; i++) dnnl_memory_destroy(p->args[i].memory);
    if (p->prim) dnnl_primitive_destroy(p->prim);
    if (p->pd) dnnl_primitive_desc_destroy(p->pd);
    memset(p, 0, sizeof(*p));
}

hora_status_t cpu_check_tensor(const cpu_backend_t *backend, const tr_tensor_t *t, int n, int c, int h, int w,
                               tr_dtype_t dtype, const char *what)
{
    if (t == NULL || t->data == NULL) return cpu_invalid("%s: tensor not allocated", what);
    if (t->ndim != 4 || t->n != n || t->c != c || t->h != h || t->w != w) {
        char got[96];
        tr_tensor_describe(t, got, sizeof(got));
        return cpu_invalid("%s: tensor is %s, the op wants (%d, %d, %d, %d)", what, got, n, c, h, w);
    }
    if (t->memory != TR_MEMORY_HOST)
        return cpu_invalid("%s: tensor lives in %s memory; the cpu backend computes on host memory", what,
                           tr_memory_name(t->memory));
    if (t->dtype != dtype || t->layout != cpu_layout_for(backend, c, dtype) ||
        t->bytes != tr_tensor_count(t) * tr_dtype_size(dtype))
        return cpu_invalid("%s: tensor is %s %s, not an %s %s tensor from this backend's tensor_alloc", what,
                           tr_dtype_name(t->dtype), tr_layout_name(t->layout), tr_dtype_name(dtype),
                           tr_layout_name(cpu_layout_for(backend, c, dtype)));
    return HORA_OK;
}

hora_status_t cpu_check_plain(const tr_tensor_t *t, tr_dtype_t dtype, int ndim, const int *dims, const char *what)
{
    if (t == NULL || t->data == NULL) return cpu_invalid("%s: tensor not allocated", what);
    const int have[TR_TENSOR_MAX_DIMS] = {t->n, t->c, t->h, t->w};
    int same = t->ndim == ndim;
    for (int i = 0; i < TR_TENSOR_MAX_DIMS && same; i++) same = have[i] == (i < ndim ? dims[i] : 1);
    if (!same || t->layout != TR_LAYOUT_NCHW || t->memory != TR_MEMORY_HOST || t->dtype != dtype) {
        char got[96], want[96];
        tr_tensor_t expected = tr_tensor_plain(NULL, dtype, TR_MEMORY_HOST, ndim, dims);
        tr_tensor_describe(t, got, sizeof(got));
        tr_tensor_describe(&expected, want, sizeof(want));
        return cpu_invalid("%s: tensor is %s, the op wants %s", what, got, want);
    }
    if (t->bytes < tr_tensor_count(t) * tr_dtype_size(dtype))
        return cpu_invalid("%s: %zu bytes behind a tensor of %zu elements", what, t->bytes, tr_tensor_count(t));
    return HORA_OK;
}

hora_status_t cpu_check_batch(const tr_tensor_t *x, const char *what, int *n)
{
    if (x == NULL || x->n < 1) return cpu_invalid("%s: no tensor, or a batch of %d", what, x ? x->n : 0);
    *n = x->n;
    return HORA_OK;
}

hora_status_t cpu_check_input(const cpu_backend_t *backend, const tr_tensor_t *x, int c, int h, int w, tr_dtype_t dtype,
                              const char *what, int *n)
{
    CPU_CHECK(cpu_check_batch(x, what, n));
    return cpu_check_tensor(backend, x, *n, c, h, w, dtype, what);
}

hora_status_t cpu_batch_get(tr_layer_t *layer, cpu_batch_cache_t *cache, int n, void **entry_out)
{
    cpu_batch_slot_t *slot = NULL;
    cache->tick++;
    for (int i = 0; i < CPU_BATCH_SLOTS; i++)
        if (cache->slots[i].n == n) {
            slot = &cache->slots[i];
            break;
        }
    if (slot == NULL) {
        /* An empty slot, else the least recently used one. */
        for (int i = 0; i < CPU_BATCH_SLOTS && slot == NULL; i++)
            if (cache->slots[i].n == 0) slot = &cache->slots[i];
        if (slot == NULL) {
            slot = &cache->slots[0];
            for (int i = 1; i < CPU_BATCH_SLOTS; i++)
                if (cache->slots[i].used < slot->used) slot = &cache->slots[i];
            cache->drop(slot->entry);
            free(slot->entry);
            slot->n = 0;
            slot->entry = NULL;
        }
        void *entry = cpu_alloc(cache->entry_bytes, "a layer's batch state");
        if (entry == NULL) return HORA_ERR_NO_MEMORY;
        hora_status_t status = cache->fill(layer, entry, n);
        if (status != HORA_OK) {
            cache->drop(entry);
            free(entry);
            return status;
        }
        slot->n = n;
        slot->entry = entry;
    }
    slot->used = cache->tick;
    *entry_out = slot->entry;
    return HORA_OK;
}

void cpu_batch_clear(cpu_batch_cache_t *cache)
{
    for (int i = 0; i < CPU_BATCH_SLOTS; i++) {
        if (cache->slots[i].n != 0) {
            cache->drop(cache->slots[i].entry);
            free(cache->slots[i].entry);
        }
        cache->slots[i].n = 0;
        cache->slots[i].entry = NULL;
    }
}
