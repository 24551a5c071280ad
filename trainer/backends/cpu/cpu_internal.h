/*
 * cpu_internal.h - private to trainer/backends/cpu: the cpu backend's handle, the
 * common head of its layers, and the oneDNN helpers every layer file uses
 * (cpu_dnnl.c; cpu_pd.c for descriptors, cpu_log.h for failures).
 *
 * A layer holds one cpu_prim_t per oneDNN primitive it runs, per batch size:
 * oneDNN primitives are made for one shape, so each layer keeps a small
 * cache of per-batch entries (cpu_batch_cache_t, least recently used out),
 * made on the first call with a batch size. An op only points the memory
 * objects at this call's buffers and executes (cpu_prim_run). All primitives share the backend's scratchpad (user
 * scratchpad mode): they run one at a time on the backend's one stream.
 */
#ifndef TR_CPU_INTERNAL_H
#define TR_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <oneapi/dnnl/dnnl.h>

#include "backend.h"
#include "base/status.h"
#include "cpu_log.h"
#include "k_cpu.h"
#include "k_numeric.h"       /* the scalar conversions, inline (k_num_bf16_to_f32, ...) */
#include "k_train_numeric.h" /* the running statistics' update */

/* oneDNN 3 (the registry's, in .deps/onednn) or the 2.6 fallback
 * (Debian's): cpu_pd.c hides the difference. A cpu_md_t is a memory
 * descriptor made by cpu_md_tag and released by cpu_md_free; a cpu_cmd_t
 * is one to read (what oneDNN's queries return). */
#if DNNL_VERSION_MAJOR >= 3
#define CPU_DNNL3 1
typedef dnnl_memory_desc_t cpu_md_t;
typedef const_dnnl_memory_desc_t cpu_cmd_t;
#else
#define CPU_DNNL3 0
typedef dnnl_memory_desc_t *cpu_md_t;
typedef const dnnl_memory_desc_t *cpu_cmd_t;
#endif

typedef struct {
    tr_backend_t base; /* ops; first, so a tr_backend_t * is a cpu_backend_t * */
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_attr_t attr; /* user scratchpad mode, for every primitive */
    int threads;
    int verbose;
    int channel_block; /* 1 (plain NCHW only), 8 or 16: see cpu_layout_for */
    unsigned nhwc;     /* bit tr_dtype_t: activations of that dtype are NHWC (channels last) */
    void *scratch;     /* shared scratchpad, as large as the largest primitive's */
    size_t scratch_bytes;
} cpu_backend_t;

typedef enum {
    CPU_LAYER_CONV = 0,
    CPU_LAYER_BN = 1,
    CPU_LAYER_POOL = 2,
    CPU_LAYER_LINEAR = 3,
} cpu_layer_kind_t;

/* The head of every cpu layer (cpu_conv_t, cpu_bn_t, ...). */
struct tr_layer {
    cpu_layer_kind_t kind;
    cpu_backend_t *backend;
    void (*free)(tr_layer_t *layer);
};

/* Per-batch-size state of a layer: its primitives and the buffers sized by
 * the batch. Four slots hold the sizes a run meets (training batch, the
 * epoch's last partial batch, evaluation batch and its last one); a fifth
 * size evicts the least recently used (oneDNN's primitive cache makes
 * recreating it cheap). */
#define CPU_BATCH_SLOTS 4

typedef struct {
    int n;         /* batch size; 0 = empty slot */
    uint64_t used; /* cache tick of the last use */
    void *entry;   /* the layer's state for batch n */
} cpu_batch_slot_t;

/* The cache allocates each entry (zeroed, entry_bytes) and frees it; the
 * layer fills it for a batch size and drops what it filled. */
typedef struct {
    cpu_batch_slot_t slots[CPU_BATCH_SLOTS];
    uint64_t tick;
    size_t entry_bytes;
    /* Make the primitives and buffers of a fresh entry for batch n. */
    hora_status_t (*fill)(tr_layer_t *layer, void *entry, int n);
    /* Release what fill made (also after a failed fill), not the entry. */
    void (*drop)(void *entry);
} cpu_batch_cache_t;

#define CPU_PRIM_MAX_ARGS 12

/* One primitive, its descriptor and a memory object per argument. */
typedef struct {
    const char *what; /* "conv forward", for messages */
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    int nargs;
    dnnl_exec_arg_t args[CPU_PRIM_MAX_ARGS]; /* the scratchpad's memory included */
} cpu_prim_t;

/* ---- cpu_dnnl.c ---------------------------------------------------------- */

/* Propagate a failed status (its message set where it was detected). */
#define CPU_CHECK(call)                                             \
    do {                                                            \
        hora_status_t cpu_check_status_ = (call);                   \
        if (cpu_check_status_ != HORA_OK) return cpu_check_status_; \
    } while (0)

/* The layout tensor_alloc gives an (n, c, h, w) tensor of dtype on this
 * backend. */
tr_layout_t cpu_layout_for(const cpu_backend_t *backend, int c, tr_dtype_t dtype);
/* The instruction set oneDNN uses here ("avx512_core_bf16"). */
const char *cpu_isa_name(void);
/* oneDNN's name for a dtype. */
dnnl_data_type_t cpu_dnnl_dtype(tr_dtype_t dtype);
/* HORA_OK when the layers compute in dtype on this CPU (f32 always; bf16
 * where oneDNN has jit kernels for it); else HORA_ERR_UNSUPPORTED and a
 * reason in why (may be NULL). Probed once per process. */
hora_status_t cpu_compute_dtype_ok(tr_dtype_t dtype);
/* The same for a layer's descriptor dtypes (compute; gradient f32/bf16/f16),
 * logging the refusal as "<what>: ...". */
hora_status_t cpu_check_layer_dtypes(tr_dtype_t dtype, tr_dtype_t grad_dtype, const char *what);
/* A memory descriptor for an (n, c, h, w) tensor of dtype in `layout`
 * (release with cpu_md_free). */
hora_status_t cpu_md_4d(cpu_md_t *md, int n, int c, int h, int w, tr_layout_t layout, tr_dtype_t dtype);
/* Plain descriptors: dims[0..ndims) of dtype with the row-major tag. */
hora_status_t cpu_md_plain(cpu_md_t *md, int ndims, const int *dims, tr_dtype_t dtype);

/* Finish a primitive whose descriptor made (the dnnl_status_t of the
 * cpu_pd_* call that filled p->pd): the primitive itself, and the shared
 * scratchpad grown to what it needs. */
hora_status_t cpu_prim_made(cpu_backend_t *backend, cpu_prim_t *p, const char *what, dnnl_status_t made);
/* A reorder from src_md to dst_md, with its FROM and TO arguments. */
hora_status_t cpu_prim_init_reorder(cpu_backend_t *backend, cpu_prim_t *p, const char *what, cpu_cmd_t src_md,
                                    cpu_cmd_t dst_md);
/* Add a memory object for `arg`, described as the primitive wants it. */
hora_status_t cpu_prim_add_arg(cpu_prim_t *p, dnnl_engine_t engine, int arg);
/* The descriptor the primitive wants for `arg` (a zero md if unused). */
cpu_cmd_t cpu_prim_md(const cpu_prim_t *p, int arg);

/* ---- cpu_pd.c: descriptors on oneDNN 3 and 2.6 ---------------------------- */

/* A memory descriptor of dims[0..ndims) with a format tag (or
 * dnnl_format_tag_any). */
hora_status_t cpu_md_tag(cpu_md_t *md, int ndims, const dnnl_dims_t dims, dnnl_data_type_t dt, dnnl_format_tag_t tag);
void cpu_md_free(cpu_md_t md); /* NULL is fine */
void cpu_md_free_all(cpu_md_t *mds, int count);

/* Primitive descriptors with oneDNN 3's arguments (symmetric padding, no
 * dilation, no bias for convolutions; hint: the forward pd of a backward
 * primitive), made with the backend's engine and attributes. */
dnnl_status_t cpu_pd_conv_forward(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, cpu_cmd_t src, cpu_cmd_t w,
                                  cpu_cmd_t dst, const dnnl_dims_t strides, const dnnl_dims_t pad);
dnnl_status_t cpu_pd_conv_backward_data(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, cpu_cmd_t diff_src,
                                        cpu_cmd_t w, cpu_cmd_t diff_dst, const dnnl_dims_t strides,
                                        const dnnl_dims_t pad, const_dnnl_primitive_desc_t hint);
dnnl_status_t cpu_pd_conv_backward_weights(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, cpu_cmd_t src,
                                           cpu_cmd_t diff_w, cpu_cmd_t diff_dst, const dnnl_dims_t strides,
                                           const dnnl_dims_t pad, const_dnnl_primitive_desc_t hint);
dnnl_status_t cpu_pd_bn_forward(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, dnnl_prop_kind_t prop,
                                cpu_cmd_t data, float epsilon, unsigned flags);
dnnl_status_t cpu_pd_bn_backward(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, cpu_cmd_t data, float epsilon,
                                 unsigned flags, const_dnnl_primitive_desc_t hint);
dnnl_status_t cpu_pd_pool_forward(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, dnnl_alg_kind_t alg, cpu_cmd_t src,
                                  cpu_cmd_t dst, const dnnl_dims_t strides, const dnnl_dims_t kernel,
                                  const dnnl_dims_t pad_l, const dnnl_dims_t pad_r);
dnnl_status_t cpu_pd_pool_backward(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, dnnl_alg_kind_t alg,
                                   cpu_cmd_t diff_src, cpu_cmd_t diff_dst, const dnnl_dims_t strides,
                                   const dnnl_dims_t kernel, const dnnl_dims_t pad_l, const dnnl_dims_t pad_r,
                                   const_dnnl_primitive_desc_t hint);
dnnl_status_t cpu_pd_ip_forward(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, cpu_cmd_t src, cpu_cmd_t w,
                                cpu_cmd_t bias, cpu_cmd_t dst);
dnnl_status_t cpu_pd_ip_backward_data(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, cpu_cmd_t diff_src,
                                      cpu_cmd_t w, cpu_cmd_t diff_dst, const_dnnl_primitive_desc_t hint);
dnnl_status_t cpu_pd_ip_backward_weights(dnnl_primitive_desc_t *pd, const cpu_backend_t *b, cpu_cmd_t src,
                                         cpu_cmd_t diff_w, cpu_cmd_t diff_bias, cpu_cmd_t diff_dst,
                                         const_dnnl_primitive_desc_t hint);
/* The name of the implementation oneDNN picked ("jit:avx512_core"). */
const char *cpu_prim_impl(const cpu_prim_t *p);
/* Point count arguments (args[i] at ptrs[i]) and run it, waiting for it:
 * callers read the results right after. */
hora_status_t cpu_prim_run(cpu_backend_t *backend, cpu_prim_t *p, int count, const int *args, const void *const *ptrs);
/* Release everything cpu_prim_init and cpu_prim_add_arg made; a zeroed
 * cpu_prim_t is fine. */
void cpu_prim_free(cpu_prim_t *p);

/* 64-byte aligned, zeroed host memory; NULL on failure (the message set). */
void *cpu_alloc(size_t bytes, const char *what);

/* The state of layer for batch n, made on first use. */
hora_status_t cpu_batch_get(tr_layer_t *layer, cpu_batch_cache_t *cache, int n, void **entry_out);
/* Drop every entry (layer free). */
void cpu_batch_clear(cpu_batch_cache_t *cache);

/* Checks shared by the layer files. An activation: allocated, host, dtype,
 * (n, c, h, w) in the layout this backend gives c, no padding. */
hora_status_t cpu_check_tensor(const cpu_backend_t *backend, const tr_tensor_t *t, int n, int c, int h, int w,
                               tr_dtype_t dtype, const char *what);
/* A plain tensor (parameter, gradient, statistics, logits, labels):
 * allocated, host, dtype, the layout NCHW (row-major), shape dims[0..ndim). */
hora_status_t cpu_check_plain(const tr_tensor_t *t, tr_dtype_t dtype, int ndim, const int *dims, const char *what);
/* The batch of a call: x's n, which must be >= 1 (x is checked by the op). */
hora_status_t cpu_check_batch(const tr_tensor_t *x, const char *what, int *n);
/* The activation that sets a call's batch: cpu_check_batch, then
 * cpu_check_tensor at that batch. */
hora_status_t cpu_check_input(const cpu_backend_t *backend, const tr_tensor_t *x, int c, int h, int w, tr_dtype_t dtype,
                              const char *what, int *n);

/* fn(ctx, begin, end) over [0, count), split across the backend's threads
 * in blocks of 32 elements (whole cache lines for 16- and 32-bit values, so
 * no two threads write one line) when count is large enough to pay for a
 * parallel region; element-wise work, so any split gives the same bits. */
typedef void (*cpu_range_fn)(const void *ctx, size_t begin, size_t end);
void cpu_split(const cpu_backend_t *backend, size_t count, cpu_range_fn fn, const void *ctx);
/* k_cast of count elements, split across the backend's threads when large. */
void cpu_cast_n(const cpu_backend_t *backend, void *dst, tr_dtype_t dst_dtype, const void *src, tr_dtype_t src_dtype,
                size_t count);
/* t's elements widened to f32 into wide (exact), split across threads
 * when large; returns wide. The layers' f32 fallbacks run on such copies. */
const float *cpu_widen(const cpu_backend_t *backend, float *wide, const tr_tensor_t *t);
/* A parameter gradient out of an op: the op's f32 accumulators (count
 * values at f32) converted into the plain tensor dst of the layer's
 * gradient dtype (a copy when that is f32). */
void cpu_grad_store(tr_tensor_t *dst, const float *f32, size_t count);

/* ---- the layer files ----------------------------------------------------- */

hora_status_t cpu_conv_create(tr_backend_t *backend, const tr_conv_desc_t *desc, tr_layer_t **layer_out);
hora_status_t cpu_conv_forward(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *w, tr_tensor_t *y);
hora_status_t cpu_conv_backward_data(tr_layer_t *layer, const tr_tensor_t *dy, const tr_tensor_t *w, tr_tensor_t *dx);
hora_status_t cpu_conv_backward_weights(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy,
                                        tr_tensor_t *dw);

hora_status_t cpu_bn_create(tr_backend_t *backend, const tr_bn_desc_t *desc, tr_layer_t **layer_out);
hora_status_t cpu_bn_forward_train(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *gamma,
                                   const tr_tensor_t *beta, tr_tensor_t *running_mean, tr_tensor_t *running_var,
                                   tr_tensor_t *y);
hora_status_t cpu_bn_forward_infer(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *gamma,
                                   const tr_tensor_t *beta, const tr_tensor_t *running_mean,
                                   const tr_tensor_t *running_var, tr_tensor_t *y);
hora_status_t cpu_bn_backward(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy, const tr_tensor_t *gamma,
                              tr_tensor_t *dx, tr_tensor_t *dgamma, tr_tensor_t *dbeta);

hora_status_t cpu_pool_create(tr_backend_t *backend, const tr_pool_desc_t *desc, tr_layer_t **layer_out);
hora_status_t cpu_pool_forward(tr_layer_t *layer, const tr_tensor_t *x, tr_tensor_t *y);
hora_status_t cpu_pool_backward(tr_layer_t *layer, const tr_tensor_t *dy, tr_tensor_t *dx);

hora_status_t cpu_linear_create(tr_backend_t *backend, const tr_linear_desc_t *desc, tr_layer_t **layer_out);
hora_status_t cpu_linear_forward(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *w, const tr_tensor_t *bias,
                                 tr_tensor_t *y);
hora_status_t cpu_linear_backward_data(tr_layer_t *layer, const tr_tensor_t *dy, const tr_tensor_t *w, tr_tensor_t *dx);
hora_status_t cpu_linear_backward_weights(tr_layer_t *layer, const tr_tensor_t *x, const tr_tensor_t *dy,
                                          tr_tensor_t *dw, tr_tensor_t *dbias);

/* ---- cpu_eltwise.c: ReLU, its backward, the residual add ------------------ */

hora_status_t cpu_relu_forward(tr_backend_t *backend, const tr_tensor_t *x, tr_tensor_t *y);
hora_status_t cpu_relu_backward(tr_backend_t *backend, const tr_tensor_t *y, const tr_tensor_t *dy, tr_tensor_t *dx);
hora_status_t cpu_add_forward(tr_backend_t *backend, const tr_tensor_t *a, const tr_tensor_t *b, int relu,
                              tr_tensor_t *y);

/* ---- cpu_step.c: the loss, the SGD step, the overflow check --------------- */

hora_status_t cpu_softmax_xent(tr_backend_t *backend, const tr_tensor_t *logits, const tr_tensor_t *labels,
                               float label_smoothing, float grad_scale, tr_tensor_t *loss, tr_tensor_t *dlogits);
hora_status_t cpu_sgd_step(tr_backend_t *backend, tr_tensor_t *param, tr_tensor_t *param_lp, const tr_tensor_t *grad,
                           tr_tensor_t *momentum, const tr_sgd_args_t *args);
hora_status_t cpu_check_finite(tr_backend_t *backend, const tr_tensor_t *t, int *nonfinite_out);

#endif
