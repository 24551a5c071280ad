/*
 * pipeline.c - one sample from stored bytes into a batch (pipeline.h).
 */
#include "pipeline.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment.h"
#include "base/status.h"

/* Output sizes beyond this are a configuration mistake, not a dataset. */
#define PIPELINE_MAX_SIDE 8192

hora_status_t tr_pipeline_init(tr_pipeline_t *p, const tr_loader_config_t *config, const tr_dataset_t *dataset)
{
    memset(p, 0, sizeof(*p));
    int jpeg = dataset->kind == TR_PAYLOAD_KIND_JPEG;
    if (config->height < 0 || config->width < 0 || config->height > PIPELINE_MAX_SIDE ||
        config->width > PIPELINE_MAX_SIDE || (config->height == 0) != (config->width == 0))
        return status_set(HORA_ERR_INVALID_ARG,
                          "loader config: height %d, width %d: both 0 "
                          "(stored / 224) or both in 1..%d",
                          config->height, config->width, PIPELINE_MAX_SIDE);
    if (config->layout != TR_LAYOUT_NCHW && config->layout != TR_LAYOUT_NHWC)
        return status_set(HORA_ERR_INVALID_ARG, "loader config: layout %d: NCHW or NHWC", (int)config->layout);
    if (config->dtype != TR_DTYPE_F32 && config->dtype != TR_DTYPE_F16 && config->dtype != TR_DTYPE_U8)
        return status_set(HORA_ERR_INVALID_ARG, "loader config: dtype %d: f32, f16 or u8", (int)config->dtype);
    if (config->dtype == TR_DTYPE_U8 && config->layout != TR_LAYOUT_NHWC)
        return status_set(HORA_ERR_INVALID_ARG, "loader config: u8 pixels are NHWC only");
    if (config->pad_crop < 0 || config->pad_crop > PIPELINE_MAX_SIDE)
        return status_set(HORA_ERR_INVALID_ARG, "loader config: pad_crop %d", config->pad_crop);
    if (!(config->jitter >= 0.0f && config->jitter <= 1.0f))
        return status_set(HORA_ERR_INVALID_ARG, "loader config: jitter %g: 0..1", (double)config->jitter);
    if (!(config->hue >= 0.0f && config->hue <= 0.5f))
        return status_set(HORA_ERR_INVALID_ARG, "loader config: hue %g: 0..0.5 turns", (double)config->hue);
    if (!(config->lighting >= 0.0f && config->lighting <= 10.0f))
        return status_set(HORA_ERR_INVALID_ARG, "loader config: lighting %g: 0..10", (double)config->lighting);
    if (!(config->val_resize_ratio >= 0.0f && config->val_resize_ratio <= 1.0f))
        return status_set(HORA_ERR_INVALID_ARG,
                          "loader config: val_resize_ratio %g: "
                          "0 (= 0.875) or in (0, 1]",
                          (double)config->val_resize_ratio);
    if (jpeg && !tr_jpeg_available())
        return status_set(HORA_ERR_UNSUPPORTED,
                          "%s: JPEG records, but this build has no "
                          "libturbojpeg",
                          config->path);
    p->channels = jpeg ? 3 : (int)dataset->channels;
    if (p->channels != 1 && p->channels != 3)
        return status_set(HORA_ERR_UNSUPPORTED, "%s: raw records with %d channels (1 or 3)", config->path, p->channels);
    if (config->height > 0) {
        p->height = config->height;
        p->width = config->width;
    } else if (jpeg) {
        p->height = p->width = 224;
    } else {
        p->height = (int)dataset->height;
        p->width = (int)dataset->width;
    }
    for (int c = 0; c < p->channels; c++) {
        if (!(config->std[c] >= 0.0f) || !isfinite(config->mean[c]) || !isfinite(config->std[c]))
            return status_set(HORA_ERR_INVALID_ARG, "loader config: mean[%d] %g std[%d] %g", c, (double)config->mean[c],
                              c, (double)config->std[c]);
        p->mean[c] = config->mean[c];
        p->std[c] = config->std[c];
    }
    p->train = config->split == TR_SPLIT_TRAIN;
    p->layout = config->layout;
    p->dtype = config->dtype;
    p->seed = config->seed;
    p->strict = config->strict;
    p->classes = dataset->classes;
    p->pad_crop = config->pad_crop;
    p->flip = config->flip;
    p->random_resized_crop = config->random_resized_crop;
    p->jitter = config->jitter;
    p->hue = config->hue;
    p->lighting = config->lighting;
    p->val_resize_ratio = config->val_resize_ratio > 0.0f ? config->val_resize_ratio : 0.875f;
    return HORA_OK;
}

size_t tr_pipeline_sample_bytes(const tr_pipeline_t *p)
{
    const size_t size = p->dtype == TR_DTYPE_F32 ? 4u : p->dtype == TR_DTYPE_F16 ? 2u : 1u;
    return (size_t)p->channels * (size_t)p->height * (size_t)p->width * size;
}

hora_status_t tr_pipeline_scratch_init(const tr_pipeline_t *p, int need_jpeg, tr_pipeline_scratch_t *scratch)
{
    memset(scratch, 0, sizeof(*scratch));
    scratch->work = malloc((size_t)p->channels * (size_t)p->height * (size_t)p->width * sizeof(float));
    if (!scratch->work) return status_set(HORA_ERR_NO_MEMORY, "out of memory");
    if (need_jpeg && tr_jpeg_available()) {
        hora_status_t status = tr_jpeg_init(p->max_pixels, p->strict, &scratch->jpeg);
        if (status != HORA_OK) {
            free(scratch->work);
            scratch->work = NULL;
            return status;
        }
    }
    return HORA_OK;
}

void tr_pipeline_scratch_free(tr_pipeline_scratch_t *scratch)
{
    tr_jpeg_free(scratch->jpeg);
    free(scratch->work);
    memset(scratch, 0, sizeof(*scratch));
}

/* A data error with the sample's location in front of the message the
 * failing step left. */
static hora_status_t sample_fail(hora_status_t status, const tr_sample_t *s)
{
    return status_at(status, STATUS_FILE_AT(s->path, s->offset), "%s", status_message());
}

/* Decode a JPEG sample at the scale its crop needs and resample the crop
 * into the work image. */
static hora_status_t sample_jpeg(const tr_pipeline_t *p, tr_pipeline_scratch_t *scratch, tr_rng_t *crop_rng,
                                 const tr_sample_t *s)
{
    if (!scratch->jpeg) return status_set(HORA_ERR_CORRUPT, "a JPEG record in a split of raw records");
    if (p->channels != 3) return status_set(HORA_ERR_CORRUPT, "a JPEG record in a %d-channel split", p->channels);
    int full_w, full_h;
    hora_status_t status = tr_jpeg_header(scratch->jpeg, s->data, (size_t)s->bytes, &full_w, &full_h, NULL);
    if (status != HORA_OK) return status;
    tr_rect_t rect;
    if (p->train && p->random_resized_crop)
        tr_aug_random_resized_crop(crop_rng, full_w, full_h, &rect);
    else
        tr_aug_centre_crop(full_w, full_h, p->width, p->height, p->val_resize_ratio, &rect);
    float min_scale = fmaxf((float)p->width / rect.w, (float)p->height / rect.h);
    tr_jpeg_image_t image;
    status = tr_jpeg_decode(scratch->jpeg, s->data, (size_t)s->bytes, min_scale, &image);
    if (status != HORA_OK) return status;
    /* The crop in decoded pixels. */
    float sx = (float)image.width / (float)full_w, sy = (float)image.height / (float)full_h;
    tr_rect_t scaled = {rect.x * sx, rect.y * sy, rect.w * sx, rect.h * sy};
    status = tr_aug_resample(image.pixels, image.width, image.height, 3, &scaled, scratch->work, p->width, p->height);
    return status == HORA_OK ? HORA_OK : status_set(status, "out of memory");
}

static hora_status_t sample_raw(const tr_pipeline_t *p, tr_pipeline_scratch_t *scratch, tr_rng_t *crop_rng,
                                const tr_sample_t *s)
{
    if ((int)s->channels != p->channels || s->width == 0 || s->height == 0 ||
        (uint64_t)s->width * s->height * s->channels != s->bytes)
        return status_set(HORA_ERR_CORRUPT,
                          "raw record %ux%ux%u (%" PRIu64 " bytes) in a "
                          "%d-channel split",
                          s->height, s->width, s->channels, s->bytes, p->channels);
    if (s->width > INT32_MAX / 4 || s->height > INT32_MAX / 4)
        return status_set(HORA_ERR_CORRUPT, "raw record %ux%u too large", s->height, s->width);
    tr_rect_t rect = {0.0f, 0.0f, (float)s->width, (float)s->height};
    if (p->train && p->random_resized_crop) tr_aug_random_resized_crop(crop_rng, (int)s->width, (int)s->height, &rect);
    hora_status_t status =
        tr_aug_resample(s->data, (int)s->width, (int)s->height, p->channels, &rect, scratch->work, p->width, p->height);
    return status == HORA_OK ? HORA_OK : status_set(status, "out of memory");
}

hora_status_t tr_pipeline_sample(const tr_pipeline_t *p, tr_pipeline_scratch_t *scratch, uint64_t epoch, uint64_t index,
                                 const tr_sample_t *s, void *dst)
{
    if (s->label < 0 || s->label >= p->classes)
        return status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(s->path, s->offset), "label %" PRId32 " outside 0..%d",
                         s->label, p->classes - 1);
    tr_rng_t crop_rng = tr_rng_for(p->seed, epoch, index, TR_RNG_PURPOSE_CROP);
    hora_status_t status;
    if (s->kind == TR_PAYLOAD_KIND_JPEG)
        status = sample_jpeg(p, scratch, &crop_rng, s);
    else if (s->kind == TR_PAYLOAD_KIND_RAW_U8)
        status = sample_raw(p, scratch, &crop_rng, s);
    else
        status = status_set(HORA_ERR_CORRUPT, "payload kind %d", (int)s->kind);
    if (status != HORA_OK) return status == HORA_ERR_NO_MEMORY ? status : sample_fail(status, s);

    int pixels = p->width * p->height;
    tr_store_t store = {.mean = p->mean, .std = p->std, .layout = p->layout, .dtype = p->dtype};
    if (p->train) {
        if (p->jitter > 0.0f || p->hue > 0.0f || (p->lighting > 0.0f && p->channels == 3)) {
            tr_rng_t color_rng = tr_rng_for(p->seed, epoch, index, TR_RNG_PURPOSE_COLOR);
            tr_rng_t light_rng = tr_rng_for(p->seed, epoch, index, TR_RNG_PURPOSE_LIGHTING);
            float mean_gray = p->jitter > 0.0f ? tr_aug_mean_gray(scratch->work, pixels, p->channels) : 0.0f;
            tr_color_t color;
            tr_aug_color_draw(&color_rng, &light_rng, p->jitter, p->hue, p->lighting, p->channels, mean_gray, &color);
            tr_aug_color_apply(&color, scratch->work, pixels, p->channels);
        }
        if (p->pad_crop > 0) {
            tr_rng_t pad_rng = tr_rng_for(p->seed, epoch, index, TR_RNG_PURPOSE_PAD_CROP);
            store.pad = p->pad_crop;
            store.dx = (int)tr_rng_below(&pad_rng, 2 * (uint64_t)p->pad_crop + 1);
            store.dy = (int)tr_rng_below(&pad_rng, 2 * (uint64_t)p->pad_crop + 1);
        }
        if (p->flip) {
            tr_rng_t flip_rng = tr_rng_for(p->seed, epoch, index, TR_RNG_PURPOSE_FLIP);
            store.flip = tr_rng_next(&flip_rng) >> 63;
        }
    }
    tr_aug_store(scratch->work, p->width, p->height, p->channels, &store, dst);
    return HORA_OK;
}
