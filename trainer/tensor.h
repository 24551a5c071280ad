/*
 * tensor.h - activations as the trainer sees them: a 4-D shape, a dtype and
 * a layout, with memory owned by the backend that allocated it.
 *
 * Activations (N, C, H, W) live in whatever layout the backend prefers (the
 * cpu backend: oneDNN's blocked nChw8c/nChw16c where C allows); the trainer
 * never indexes them and goes through tensor_import/tensor_export at the
 * edges. Parameters and gradients are plain f32 arrays in two arenas
 * (model.h), in PyTorch's layouts: conv weights OIHW, linear weights
 * (out, in), BN gamma/beta/running stats (C).
 */
#ifndef TR_TENSOR_H
#define TR_TENSOR_H

#include <stddef.h>

typedef enum {
    TR_DTYPE_F32 = 0,
    TR_DTYPE_F16 = 1,
} tr_dtype_t;

typedef enum {
    TR_LAYOUT_NCHW = 0,    /* plain, W fastest */
    TR_LAYOUT_NHWC = 1,    /* channels last (the cuda backend's choice) */
    TR_LAYOUT_NCHW8C = 2,  /* oneDNN nChw8c: channels in blocks of 8, padded */
    TR_LAYOUT_NCHW16C = 3, /* oneDNN nChw16c */
} tr_layout_t;

typedef struct {
    int n, c, h, w;     /* logical shape */
    tr_dtype_t dtype;
    tr_layout_t layout;
    void *data;         /* backend memory; NULL when not allocated */
    size_t bytes;       /* allocated size, padding included */
} tr_tensor_t;

static inline size_t tr_tensor_count(const tr_tensor_t *t)
{
    return (size_t)t->n * (size_t)t->c * (size_t)t->h * (size_t)t->w;
}

const char *tr_layout_name(tr_layout_t layout);

#endif
