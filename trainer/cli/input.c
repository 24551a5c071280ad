/*
 * input.c - hora-train's input (input.h): the loaders over --data, their
 * batches as the model's input tensors, the --synthetic batch.
 */
#include <stdint.h>
#include <stdlib.h>

#include "input.h"

/* The input statistics the data is normalised with: Fashion-MNIST's for one
 * channel, ImageNet's for three. */
void input_stats(int channels, float mean[3], float std[3])
{
    const float gray_mean = 0.2860f, gray_std = 0.3530f;
    const float rgb_mean[3] = {0.485f, 0.456f, 0.406f}, rgb_std[3] = {0.229f, 0.224f, 0.225f};
    for (int c = 0; c < 3; c++) {
        mean[c] = channels == 1 ? (c ? 0.0f : gray_mean) : rgb_mean[c];
        std[c] = channels == 1 ? (c ? 0.0f : gray_std) : rgb_std[c];
    }
}

/* A device backend takes u8 pixels and normalises them itself (the bytes
 * cross to the device, not floats); the cpu backend takes normalised f32
 * NCHW batches from the loader threads. */
int input_on_device(const run_t *r) { return r->backend && r->backend->ops->memory == TR_MEMORY_DEVICE; }

/* Loader batches in the backend's host memory (pinned for cuda). */
void *input_batch_alloc(void *ctx, size_t bytes)
{
    tr_backend_t *backend = ctx;
    void *p = NULL;
    return backend->ops->host_alloc(backend, bytes, &p) == HORA_OK ? p : NULL;
}

void input_batch_free(void *ctx, void *ptr)
{
    tr_backend_t *backend = ctx;
    backend->ops->host_free(backend, ptr);
}

/* A loader batch as the model's input: its valid samples only. */
tr_tensor_t input_batch_tensor(const run_t *r, const tr_batch_t *b, const tr_model_spec_t *spec)
{
    const int dims[4] = {b->count, spec->in_channels, spec->height, spec->width};
    if (!input_on_device(r)) return tr_tensor_plain(b->data, TR_DTYPE_F32, TR_MEMORY_HOST, 4, dims);
    tr_tensor_t x = tr_tensor_plain(b->data, TR_DTYPE_U8, TR_MEMORY_HOST, 4, dims);
    x.layout = TR_LAYOUT_NHWC;
    return x;
}

hora_status_t input_open_loader(run_t *r, tr_split_t split, int channels, tr_loader_t **out)
{
    const tr_options_t *o = &r->opt;
    tr_loader_config_t c = {0};
    c.path = o->data;
    c.split = split;
    c.rank = r->rank;
    c.world = r->size;
    c.batch = split == TR_SPLIT_VAL && o->eval_batch ? o->eval_batch : o->batch;
    c.seed = r->state.data_seed;
    c.threads = o->data_threads ? o->data_threads : 1;
    /* Every sample of the epoch is trained on: the last step takes what is
     * left (the same count on every rank: each rank's shard has the same
     * size, see loader.h). */
    c.drop_last = 0;
    c.strict = o->strict;
    c.layout = TR_LAYOUT_NCHW;
    c.dtype = TR_DTYPE_F32;
    if (input_on_device(r)) {
        c.layout = TR_LAYOUT_NHWC;
        c.dtype = TR_DTYPE_U8;
        c.alloc = input_batch_alloc;
        c.dealloc = input_batch_free;
        c.alloc_ctx = r->backend;
    }
    c.flip = o->flip != 0;
    c.pad_crop = o->pad_crop > 0 ? o->pad_crop : 0;
    c.random_resized_crop = o->rrc > 0;
    c.jitter = o->jitter;
    c.lighting = o->lighting;
    c.val_resize_ratio = 0.875f;
    input_stats(channels, c.mean, c.std);
    hora_status_t status = tr_loader_open(&c, out);
    if (status != HORA_OK)
        main_report("hora-train: cannot open %s split of %s: %s", split == TR_SPLIT_TRAIN ? "train" : "val", o->data,
                    status_message());
    return status;
}

/* --synthetic: one batch of random u8 NHWC pixels (the model's input step
 * normalises them) in the backend's host memory, and its labels. */
hora_status_t input_synthetic(run_t *r, const tr_model_spec_t *spec)
{
    const tr_options_t *o = &r->opt;
    /* Random pixels (u8 NHWC, the model's input step normalises them)
     * in the backend's host memory: every backend trains on the same
     * numbers, and a device one copies them as it would a loader's. */
    const size_t bytes = (size_t)o->batch * (size_t)spec->in_channels * (size_t)spec->height * (size_t)spec->width;
    uint8_t *x = input_batch_alloc(r->backend, bytes);
    r->synthetic_y = malloc((size_t)o->batch * sizeof(int32_t));
    r->synthetic_x = tr_tensor_plain(x, TR_DTYPE_U8, TR_MEMORY_HOST, 4,
                                     (const int[]){o->batch, spec->in_channels, spec->height, spec->width});
    r->synthetic_x.layout = TR_LAYOUT_NHWC;
    if (!x || !r->synthetic_y) return HORA_ERR_NO_MEMORY;
    uint64_t s = r->state.seed * 2654435761u + (uint64_t)r->rank;
    for (size_t i = 0; i < bytes; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (uint8_t)(s >> 56);
    }
    for (int i = 0; i < o->batch; i++) r->synthetic_y[i] = i % spec->classes;
    return HORA_OK;
}
