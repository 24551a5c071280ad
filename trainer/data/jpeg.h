/*
 * jpeg.h - JPEG decoding for the loader through libjpeg-turbo's TurboJPEG
 * API, at the smallest DCT scale that still serves the crop.
 *
 * Why scaled decoding: a 500x375 ImageNet photo cropped to ~40% of its area
 * and resized to 224x224 needs only ~1/2 of its resolution. libjpeg-turbo
 * can drop the high DCT coefficients and decode at 1/2, 1/4, 3/8, ... of
 * full size for much less work; the remaining factor (< 2) is done by the
 * loader's bilinear resampler, which then never shrinks by more than 2 (so
 * it needs no anti-aliasing filter).
 *
 * Safety: images larger than max_pixels (header check, before any
 * allocation), progressive files with an absurd scan count (TJFLAG_LIMITSCANS)
 * and anything libjpeg calls fatal are errors. Warnings (recoverable damage)
 * are errors under strict (TJFLAG_STOPONWARNING); otherwise the image is
 * kept unless the data lacks an end-of-image marker near its end, i.e. was
 * cut short (libjpeg pads that with grey, which must not pass silently).
 * Greyscale decodes to RGB; CMYK/YCCK (Adobe, inverted) is converted.
 *
 * A decoder is one thread's (TurboJPEG handles are not shared). Errors are
 * HORA_ERR_CORRUPT (bad data), HORA_ERR_NO_MEMORY, HORA_ERR_UNSUPPORTED
 * (built without libturbojpeg), with "JPEG ..." in status_message().
 */
#ifndef TR_DATA_JPEG_H
#define TR_DATA_JPEG_H

#include <stddef.h>
#include <stdint.h>

#include "hora.h"

/* Default pixel limit (width * height of the stored image). */
#define TR_JPEG_MAX_PIXELS (UINT64_C(1) << 27)

typedef struct tr_jpeg tr_jpeg_t;

/* A decoded image owned by the decoder, valid until its next decode. */
typedef struct {
    const uint8_t *pixels; /* (height, width, 3) RGB */
    int width, height;     /* as decoded (scaled) */
} tr_jpeg_image_t;

hora_status_t tr_jpeg_init(uint64_t max_pixels, int strict, tr_jpeg_t **jpeg_out);
void tr_jpeg_free(tr_jpeg_t *jpeg);

/* Full-size width and height from the header, checked against max_pixels;
 * channels (if not NULL): 1 for greyscale, else 3 (what decoding gives is
 * always RGB). */
hora_status_t tr_jpeg_header(tr_jpeg_t *jpeg, const uint8_t *data, size_t bytes, int *width, int *height,
                             int *channels);

/* Decode at the smallest available scale factor f (f <= 1) with
 * f >= min_scale (1 if none is that large). */
hora_status_t tr_jpeg_decode(tr_jpeg_t *jpeg, const uint8_t *data, size_t bytes, float min_scale,
                             tr_jpeg_image_t *image);

/* 1 if this build decodes JPEG. */
int tr_jpeg_available(void);

/* Encode pixels (height, width, channels 1 or 3) as a baseline JPEG at
 * quality 1..100 (colour: 4:2:0). *out is malloc'd (free it). For
 * hora-mkrecord, the tests and the benchmark. */
hora_status_t tr_jpeg_encode(const uint8_t *pixels, int width, int height, int channels, int quality, uint8_t **out,
                             size_t *out_bytes);

/* Shrink a JPEG so its shorter side is `shorter` pixels (aspect kept, sides
 * rounded): DCT-scaled decode to at most 2x the target, bilinear to the
 * target, re-encode at quality. An image whose shorter side is already <=
 * shorter is left alone (*out = NULL). Output is RGB (3 channels). */
hora_status_t tr_jpeg_resize_shorter(tr_jpeg_t *jpeg, const uint8_t *data, size_t bytes, int shorter, int quality,
                                     uint8_t **out, size_t *out_bytes, int *out_width, int *out_height);

#endif
