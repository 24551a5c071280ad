/*
 * augment.h - per-sample image transforms of the loader: crop choice,
 * bilinear resampling, colour jitter, PCA lighting, and the final pass that
 * pads/crops, flips, normalises and writes one sample into a batch.
 *
 * A sample goes through three steps, each over one buffer:
 *   1. tr_aug_resample: a rectangle of the stored (or JPEG-decoded) u8 HWC
 *      image -> a float HWC "work" image of the output size, pixel values in
 *      [0, 255]. The rectangle is the random-resized crop (train), the centre
 *      crop after resizing the shorter side (val JPEG), or the whole image.
 *   2. tr_aug_color_apply (train, 3 channels): jitter as one affine colour
 *      transform, clamp, then the lighting shift.
 *   3. tr_aug_store: pad-and-crop offsets and the flip are applied as index
 *      arithmetic while reading the work image; (v / 255 - mean) / std;
 *      NCHW or NHWC; f32 or f16.
 * Flip is last so a flipped sample is exactly the mirror image of the same
 * sample unflipped (same seed), whatever else is on.
 *
 * Randomness comes from the caller's streams (rng.h), so results depend
 * only on (seed, epoch, sample).
 */
#ifndef TR_DATA_AUGMENT_H
#define TR_DATA_AUGMENT_H

#include <stdint.h>

#include "hora.h"
#include "rng.h"
#include "tensor.h"

/* A region of a source image in its pixel units (x right, y down). */
typedef struct {
    float x, y, w, h;
} tr_rect_t;

/* RandomResizedCrop: area a uniform fraction in [0.08, 1] of the image,
 * aspect w/h log-uniform in [3/4, 4/3], integer size and position inside the
 * image; after 10 rejected tries, the largest centred crop whose aspect is
 * within [3/4, 4/3]. */
#define TR_AUG_RRC_AREA_MIN 0.08f
#define TR_AUG_RRC_AREA_MAX 1.0f
#define TR_AUG_RRC_RATIO_MIN (3.0f / 4.0f)
#define TR_AUG_RRC_RATIO_MAX (4.0f / 3.0f)
#define TR_AUG_RRC_ATTEMPTS 10
void tr_aug_random_resized_crop(tr_rng_t *rng, int src_w, int src_h, tr_rect_t *rect);

/* Validation: resize the shorter side to min(out) / ratio, centre-crop
 * out_w x out_h; returned as the source rectangle that maps onto it. */
void tr_aug_centre_crop(int src_w, int src_h, int out_w, int out_h, float ratio, tr_rect_t *rect);

/* Bilinear resampling of rect of src (u8, HWC, channels 1 or 3) into out
 * (float, HWC, out_w x out_h): output pixel centre (ox + 0.5, oy + 0.5) maps
 * to rect.x + (ox + 0.5) * rect.w / out_w - 0.5 in the source, clamped to the
 * image. Scale 1 at an integer offset copies pixels exactly. HORA_ERR_NO_MEMORY
 * only (for its coordinate tables). */
hora_status_t tr_aug_resample(const uint8_t *src, int src_w, int src_h, int channels, const tr_rect_t *rect, float *out,
                              int out_w, int out_h);

/* Colour jitter and lighting for one image, drawn once per sample. */
typedef struct {
    int affine;         /* apply matrix/offset, then clamp to [0, 255] */
    float matrix[3][3]; /* out = matrix * rgb + offset */
    float offset[3];
    int lighting;   /* add shift after the clamp */
    float shift[3]; /* in pixel units (255 = 1.0) */
} tr_color_t;

/* The AlexNet PCA of ImageNet RGB (pixels in [0, 1]). */
extern const float tr_aug_pca_eigval[3];
extern const float tr_aug_pca_eigvec[3][3]; /* [channel][component] */

/* Draw the transform: brightness b, contrast c, saturation s uniform in
 * [max(0, 1 - jitter), 1 + jitter], hue h uniform in [-hue, hue] turns,
 * applied in that fixed order as one affine map (contrast blends toward the
 * image's mean grey, mean_gray in [0, 255]); lighting alpha_k ~ N(0,
 * lighting), shift = 255 * eigvec * (alpha * eigval). channels 1 keeps
 * brightness and contrast only. */
void tr_aug_color_draw(tr_rng_t *color_rng, tr_rng_t *lighting_rng, float jitter, float hue, float lighting,
                       int channels, float mean_gray, tr_color_t *color);
/* Mean of 0.299 R + 0.587 G + 0.114 B (or of the one channel). */
float tr_aug_mean_gray(const float *img, int pixel_count, int channels);
void tr_aug_color_apply(const tr_color_t *color, float *img, int pixel_count, int channels);

/* How tr_aug_store reads the work image and what it writes. */
typedef struct {
    int pad;            /* zero padding around the work image, 0 = none */
    int dx, dy;         /* crop offset in the padded image, in [0, 2 * pad] */
    int flip;           /* mirror horizontally (after the crop) */
    const float *mean;  /* (channels) */
    const float *std;   /* (channels); 0 = only divide by 255 */
    tr_layout_t layout; /* TR_LAYOUT_NCHW or TR_LAYOUT_NHWC */
    tr_dtype_t dtype;   /* TR_DTYPE_F32, TR_DTYPE_F16, or TR_DTYPE_U8 (NHWC, not normalised) */
} tr_store_t;

/* Write one sample: dst(c, y, x) = norm_c(work(y + dy - pad, x' + dx - pad, c))
 * with x' = width - 1 - x when flipped, and 0 outside the work image;
 * norm_c(v) = (v / 255.0f - mean[c]) / std[c], computed in exactly that
 * order in float (tests recompute it bit for bit). TR_DTYPE_U8 instead
 * writes v rounded to the nearest integer (halves up) and clamped to
 * [0, 255], for a device that normalises (backend.h's input_import): the
 * same as the float path where v is an integer already (raw pixels, no
 * resampling or colour augmentation). */
void tr_aug_store(const float *work, int width, int height, int channels, const tr_store_t *store, void *dst);

#endif
