/*
 * tensor.c - dtype, layout and memory names, plain tensors and views
 * (tensor.h).
 */
#include "tensor.h"

#include <stdio.h>

size_t tr_dtype_size(tr_dtype_t dtype)
{
    switch (dtype) {
    case TR_DTYPE_F32: return 4;
    case TR_DTYPE_F16: return 2;
    case TR_DTYPE_BF16: return 2;
    case TR_DTYPE_I32: return 4;
    case TR_DTYPE_U8: return 1;
    }
    return 0;
}

const char *tr_dtype_name(tr_dtype_t dtype)
{
    switch (dtype) {
    case TR_DTYPE_F32: return "f32";
    case TR_DTYPE_F16: return "f16";
    case TR_DTYPE_BF16: return "bf16";
    case TR_DTYPE_I32: return "i32";
    case TR_DTYPE_U8: return "u8";
    }
    return "unknown";
}

/* oneDNN's names for the same layouts. */
const char *tr_layout_name(tr_layout_t layout)
{
    switch (layout) {
    case TR_LAYOUT_NCHW: return "nchw";
    case TR_LAYOUT_NHWC: return "nhwc";
    case TR_LAYOUT_NCHW8C: return "nChw8c";
    case TR_LAYOUT_NCHW16C: return "nChw16c";
    }
    return "unknown";
}

const char *tr_memory_name(tr_memory_t memory)
{
    switch (memory) {
    case TR_MEMORY_HOST: return "host";
    case TR_MEMORY_DEVICE: return "device";
    }
    return "unknown";
}

static void tensor_set_shape(tr_tensor_t *t, int ndim, const int *dims)
{
    int *fields[TR_TENSOR_MAX_DIMS] = {&t->n, &t->c, &t->h, &t->w};
    t->ndim = ndim;
    for (int i = 0; i < TR_TENSOR_MAX_DIMS; i++) *fields[i] = i < ndim ? dims[i] : 1;
}

tr_tensor_t tr_tensor_plain(void *data, tr_dtype_t dtype, tr_memory_t memory, int ndim, const int *dims)
{
    tr_tensor_t t = {.dtype = dtype, .layout = TR_LAYOUT_NCHW, .memory = memory, .data = data};
    tensor_set_shape(&t, ndim, dims);
    t.bytes = tr_tensor_count(&t) * tr_dtype_size(dtype);
    return t;
}

tr_tensor_t tr_tensor_view(const tr_tensor_t *base, size_t offset, int ndim, const int *dims)
{
    tr_tensor_t t = tr_tensor_plain(NULL, base->dtype, base->memory, ndim, dims);
    const size_t have = tr_tensor_count(base);
    if (base->data && base->layout == TR_LAYOUT_NCHW && offset <= have && tr_tensor_count(&t) <= have - offset)
        t.data = (char *)base->data + offset * tr_dtype_size(base->dtype);
    return t;
}

void tr_tensor_describe(const tr_tensor_t *t, char *buf, size_t len)
{
    const int dims[TR_TENSOR_MAX_DIMS] = {t->n, t->c, t->h, t->w};
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < t->ndim && i < TR_TENSOR_MAX_DIMS && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? ", " : "", dims[i]);
    if (used < len)
        snprintf(buf + used, len - used, ") %s %s %s", tr_dtype_name(t->dtype), tr_layout_name(t->layout),
                 tr_memory_name(t->memory));
}

void tr_tensor_normalize_u8(const tr_tensor_t *pixels, const float *mean, const float *std, float *dst)
{
    const uint8_t *src = pixels->data;
    const size_t c = (size_t)pixels->c, hw = (size_t)pixels->h * (size_t)pixels->w;
    for (size_t i = 0; i < (size_t)pixels->n; i++)
        for (size_t k = 0; k < c; k++) {
            const float m = mean[k], s = std[k];
            float *out = dst + (i * c + k) * hw;
            const uint8_t *in = src + i * hw * c + k;
            for (size_t p = 0; p < hw; p++) {
                float x = (float)in[p * c];
                out[p] = s > 0.0f ? (x / 255.0f - m) / s : x / 255.0f;
            }
        }
}
