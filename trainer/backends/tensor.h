/*
 * tensor.h - every array the trainer hands a backend: a shape, a dtype, a
 * layout and the memory it lives in.
 *
 * Activations (N, C, H, W) live in whatever layout the backend prefers (the
 * cpu backend: oneDNN's blocked nChw8c/nChw16c where C allows; the cuda
 * backend: NHWC); the trainer never indexes them and goes through
 * tensor_import/tensor_export at the edges. Parameters, gradients, momentum
 * and BN statistics are plain (row-major) tensors carved out of the model's
 * arenas with tr_tensor_view, in PyTorch's layouts: conv weights OIHW, linear
 * weights (out, in), gamma/beta/running statistics (C). Logits (N, K), labels
 * (N) and the loss (1) are plain tensors in backend memory too.
 *
 * Shapes use the fields n, c, h, w from the left: a tensor of ndim 1 is (n),
 * of ndim 2 (n, c), and so on; the unused fields are 1. So an OIHW weight is
 * (n = out, c = in, h, w), a (C) vector has n = C.
 */
#ifndef TR_TENSOR_H
#define TR_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "k_cpu.h" /* k_dtype_t */

typedef enum {
    TR_DTYPE_F32 = 0,
    TR_DTYPE_F16 = 1,
    TR_DTYPE_BF16 = 2,
    TR_DTYPE_I32 = 3,
    TR_DTYPE_U8 = 4, /* image pixels: a host input batch (tr_model_forward's x; backend.h's input_import) */
} tr_dtype_t;

typedef enum {
    TR_MEMORY_HOST = 0,   /* ordinary memory the CPU reads */
    TR_MEMORY_DEVICE = 1, /* accelerator memory: only its backend's ops and upload/download touch it */
} tr_memory_t;

typedef enum {
    TR_LAYOUT_NCHW = 0,    /* plain row-major over the shape (W fastest); every parameter */
    TR_LAYOUT_NHWC = 1,    /* channels last (the cuda backend's choice) */
    TR_LAYOUT_NCHW8C = 2,  /* oneDNN nChw8c: channels in blocks of 8 */
    TR_LAYOUT_NCHW16C = 3, /* oneDNN nChw16c */
} tr_layout_t;

#define TR_TENSOR_MAX_DIMS 4

typedef struct {
    int ndim;       /* 1..4 */
    int n, c, h, w; /* the shape, from the left (see above); unused fields are 1 */
    tr_dtype_t dtype;
    tr_layout_t layout;
    tr_memory_t memory;
    void *data;   /* NULL when not allocated */
    size_t bytes; /* bytes behind data (padding included) */
} tr_tensor_t;

static inline size_t tr_tensor_count(const tr_tensor_t *t)
{
    return (size_t)t->n * (size_t)t->c * (size_t)t->h * (size_t)t->w;
}

size_t tr_dtype_size(tr_dtype_t dtype);
const char *tr_dtype_name(tr_dtype_t dtype);
/* kernels/'s number for a dtype (k_cpu.h numbers them as hora.h does): what
 * both backends hand the kernels. */
k_dtype_t tr_dtype_kernel(tr_dtype_t dtype);
const char *tr_layout_name(tr_layout_t layout);
const char *tr_memory_name(tr_memory_t memory);

/* A plain tensor of shape dims[0..ndim) over data (not owned), e.g. a slice
 * of an arena, a host batch, a loss scalar. bytes = count x dtype size. */
tr_tensor_t tr_tensor_plain(void *data, tr_dtype_t dtype, tr_memory_t memory, int ndim, const int *dims);

/* Elements [offset, offset + product of dims) of a plain tensor, as a plain
 * tensor of that shape, with the same dtype and memory. A view that does not
 * fit inside base (or of a tensor that is not plain) has data NULL: every
 * op refuses it as not allocated. */
tr_tensor_t tr_tensor_view(const tr_tensor_t *base, size_t offset, int ndim, const int *dims);

/* The input step on the host: dst (n, c, h, w) f32 NCHW = the u8 NHWC
 * pixels normalised as backend.h's input_import says (the twin of the
 * device's k_cuda_input_normalize; what the cpu backend's input_import
 * hands its tensor_import). */
void tr_tensor_normalize_u8(const tr_tensor_t *pixels, const float *mean, const float *std, float *dst);

/* "(64, 16, 28, 28) f32 nChw16c host", for messages. */
void tr_tensor_describe(const tr_tensor_t *t, char *buf, size_t len);

#endif
