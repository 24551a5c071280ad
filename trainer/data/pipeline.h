/*
 * pipeline.h - one sample from stored bytes to its place in a batch: JPEG
 * decode (scaled) or raw pixels, crop and resample, colour, pad/crop, flip,
 * normalise, store. The loader runs it on its threads; the fuzz target and
 * the tests call it directly.
 *
 * What is done (augment.h has the details of each step):
 *   train, JPEG: random-resized crop (if on; else the val crop), flip,
 *                jitter/hue, lighting, pad_crop (if set), normalise.
 *   train, raw:  random-resized crop if on, else the whole image resized to
 *                the output size (a copy when the sizes agree); then as above.
 *   val, JPEG:   shorter side to min(size) / val_resize_ratio, centre crop.
 *   val, raw:    the whole image resized to the output size.
 * Random choices use streams keyed by (seed, epoch, sample index, purpose),
 * so a sample's augmentation is the same whichever thread makes it.
 */
#ifndef TR_DATA_PIPELINE_H
#define TR_DATA_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "jpeg.h"
#include "loader.h"

/* What to do to every sample; read-only once filled, shared by threads. */
typedef struct {
    int train;                   /* apply the train augmentations */
    int channels, height, width; /* output */
    tr_layout_t layout;
    tr_dtype_t dtype;
    uint64_t seed;
    int strict;          /* JPEG warnings are errors */
    int classes;         /* labels must be in [0, classes) */
    uint64_t max_pixels; /* JPEG pixel limit (0 = TR_JPEG_MAX_PIXELS) */
    int pad_crop, flip, random_resized_crop;
    float jitter, hue, lighting, val_resize_ratio;
    float mean[3], std[3];
} tr_pipeline_t;

/* One thread's buffers. */
typedef struct {
    tr_jpeg_t *jpeg; /* NULL when JPEG is not needed */
    float *work;     /* (height, width, channels) */
} tr_pipeline_scratch_t;

/* Fill pipeline from a loader config and the opened split: output size and
 * channels (raw: stored; JPEG: 3 and 224 unless set), defaults, checks.
 * HORA_ERR_INVALID_ARG / HORA_ERR_UNSUPPORTED with a message. */
hora_status_t tr_pipeline_init(tr_pipeline_t *pipeline, const tr_loader_config_t *config, const tr_dataset_t *dataset);
hora_status_t tr_pipeline_scratch_init(const tr_pipeline_t *pipeline, int need_jpeg, tr_pipeline_scratch_t *scratch);
void tr_pipeline_scratch_free(tr_pipeline_scratch_t *scratch);

/* Bytes one sample takes in a batch. */
size_t tr_pipeline_sample_bytes(const tr_pipeline_t *pipeline);

/* Make sample (dataset index `index`, for the streams) of epoch into dst.
 * HORA_ERR_CORRUPT for bad data (undecodable, wrong shape or kind, label out
 * of range) with "FILE: offset N: what" in status_message();
 * HORA_ERR_NO_MEMORY. */
hora_status_t tr_pipeline_sample(const tr_pipeline_t *pipeline, tr_pipeline_scratch_t *scratch, uint64_t epoch,
                                 uint64_t index, const tr_sample_t *sample, void *dst);

#endif
