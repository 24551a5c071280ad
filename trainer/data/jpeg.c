/*
 * jpeg.c - scaled JPEG decoding with TurboJPEG (jpeg.h). Without
 * libturbojpeg (HORA_HAVE_TURBOJPEG unset) every call says UNSUPPORTED.
 */
#include "jpeg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "augment.h"
#include "base/status.h"

#ifdef HORA_HAVE_TURBOJPEG
#include <turbojpeg.h>

struct tr_jpeg {
    tjhandle handle;
    uint64_t max_pixels;
    int strict;
    uint8_t *buffer; /* decoded pixels (and CMYK before conversion) */
    size_t buffer_bytes;
};

int tr_jpeg_available(void) { return 1; }

hora_status_t tr_jpeg_init(uint64_t max_pixels, int strict, tr_jpeg_t **jpeg_out)
{
    tr_jpeg_t *jpeg = calloc(1, sizeof(*jpeg));
    if (!jpeg) return status_set(HORA_ERR_NO_MEMORY, "out of memory");
    jpeg->handle = tjInitDecompress();
    if (!jpeg->handle) {
        free(jpeg);
        return status_set(HORA_ERR_NO_MEMORY, "JPEG: tjInitDecompress: %s", tjGetErrorStr2(NULL));
    }
    jpeg->max_pixels = max_pixels ? max_pixels : TR_JPEG_MAX_PIXELS;
    jpeg->strict = strict;
    *jpeg_out = jpeg;
    return HORA_OK;
}

void tr_jpeg_free(tr_jpeg_t *jpeg)
{
    if (!jpeg) return;
    tjDestroy(jpeg->handle);
    free(jpeg->buffer);
    free(jpeg);
}

static hora_status_t jpeg_header(tr_jpeg_t *jpeg, const uint8_t *data, size_t bytes, int *width, int *height,
                                 int *colorspace)
{
    int subsamp;
    if (bytes < 4 || bytes > (size_t)(unsigned long)-1) return status_set(HORA_ERR_CORRUPT, "JPEG: %zu bytes", bytes);
    if (tjDecompressHeader3(jpeg->handle, data, (unsigned long)bytes, width, height, &subsamp, colorspace) != 0)
        return status_set(HORA_ERR_CORRUPT, "JPEG header: %s", tjGetErrorStr2(jpeg->handle));
    if (*width <= 0 || *height <= 0 || (uint64_t)*width * (uint64_t)*height > jpeg->max_pixels)
        return status_set(HORA_ERR_CORRUPT, "JPEG %dx%d is over the %llu-pixel limit", *width, *height,
                          (unsigned long long)jpeg->max_pixels);
    return HORA_OK;
}

hora_status_t tr_jpeg_header(tr_jpeg_t *jpeg, const uint8_t *data, size_t bytes, int *width, int *height, int *channels)
{
    int colorspace;
    hora_status_t status = jpeg_header(jpeg, data, bytes, width, height, &colorspace);
    if (status == HORA_OK && channels) *channels = colorspace == TJCS_GRAY ? 1 : 3;
    return status;
}

/* The smallest factor <= 1 that is >= min_scale (TurboJPEG offers n/8). */
static tjscalingfactor jpeg_pick_scale(float min_scale)
{
    int count = 0;
    tjscalingfactor *factors = tjGetScalingFactors(&count);
    tjscalingfactor best = {1, 1};
    for (int i = 0; factors && i < count; i++) {
        float f = (float)factors[i].num / (float)factors[i].denom;
        if (f <= 1.0f && f >= min_scale && f < (float)best.num / (float)best.denom) best = factors[i];
    }
    return best;
}

/* libjpeg fills a cut-short scan with grey and only warns. An end-of-image
 * marker (FF D9; entropy-coded data never holds one, an FF there is stuffed
 * as FF 00) near the end says the data is complete. */
static int jpeg_has_end_marker(const uint8_t *data, size_t bytes)
{
    size_t from = bytes > 1024 ? bytes - 1024 : 0;
    for (size_t i = bytes - 1; i > from; i--)
        if (data[i - 1] == 0xFF && data[i] == 0xD9) return 1;
    return 0;
}

static hora_status_t jpeg_grow(tr_jpeg_t *jpeg, size_t bytes)
{
    if (jpeg->buffer_bytes >= bytes) return HORA_OK;
    uint8_t *grown = realloc(jpeg->buffer, bytes);
    if (!grown) return status_set(HORA_ERR_NO_MEMORY, "JPEG: out of memory for %zu bytes", bytes);
    jpeg->buffer = grown;
    jpeg->buffer_bytes = bytes;
    return HORA_OK;
}

hora_status_t tr_jpeg_decode(tr_jpeg_t *jpeg, const uint8_t *data, size_t bytes, float min_scale,
                             tr_jpeg_image_t *image)
{
    int width, height, colorspace;
    hora_status_t status = jpeg_header(jpeg, data, bytes, &width, &height, &colorspace);
    if (status != HORA_OK) return status;
    tjscalingfactor f = jpeg_pick_scale(min_scale);
    int w = TJSCALED(width, f), h = TJSCALED(height, f);
    int cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
    size_t pixel_bytes = cmyk ? 4 : 3;
    status = jpeg_grow(jpeg, (size_t)w * (size_t)h * pixel_bytes);
    if (status != HORA_OK) return status;
    int flags = TJFLAG_LIMITSCANS | (jpeg->strict ? TJFLAG_STOPONWARNING : 0);
    if (tjDecompress2(jpeg->handle, data, (unsigned long)bytes, jpeg->buffer, w, 0, h, cmyk ? TJPF_CMYK : TJPF_RGB,
                      flags) != 0) {
        int fatal = tjGetErrorCode(jpeg->handle) == TJERR_FATAL;
        if (fatal || jpeg->strict)
            return status_set(HORA_ERR_CORRUPT, "JPEG %dx%d: %s%s", width, height, tjGetErrorStr2(jpeg->handle),
                              fatal ? "" : " (strict)");
        if (!jpeg_has_end_marker(data, bytes))
            return status_set(HORA_ERR_CORRUPT,
                              "JPEG %dx%d: %s, and no end-of-image "
                              "marker: data cut short",
                              width, height, tjGetErrorStr2(jpeg->handle));
    }
    if (cmyk) {
        /* Adobe writes inverted CMYK: stored C = 255 - cyan, so R = C K / 255.
         * In place: pixel i's 3 output bytes never pass its 4 input bytes. */
        uint8_t *p = jpeg->buffer;
        for (size_t i = 0; i < (size_t)w * (size_t)h; i++) {
            unsigned c = p[4 * i], m = p[4 * i + 1], y = p[4 * i + 2], k = p[4 * i + 3];
            p[3 * i] = (uint8_t)((c * k + 127) / 255);
            p[3 * i + 1] = (uint8_t)((m * k + 127) / 255);
            p[3 * i + 2] = (uint8_t)((y * k + 127) / 255);
        }
    }
    *image = (tr_jpeg_image_t){.pixels = jpeg->buffer, .width = w, .height = h};
    return HORA_OK;
}

hora_status_t tr_jpeg_encode(const uint8_t *pixels, int width, int height, int channels, int quality, uint8_t **out,
                             size_t *out_bytes)
{
    if (width <= 0 || height <= 0 || (channels != 1 && channels != 3) || quality < 1 || quality > 100)
        return status_set(HORA_ERR_INVALID_ARG, "JPEG encode: %dx%dx%d quality %d", width, height, channels, quality);
    int subsamp = channels == 1 ? TJSAMP_GRAY : TJSAMP_420;
    unsigned long capacity = tjBufSize(width, height, subsamp);
    if (capacity == (unsigned long)-1)
        return status_set(HORA_ERR_INVALID_ARG, "JPEG encode: %dx%d too large", width, height);
    uint8_t *buf = malloc(capacity);
    tjhandle handle = tjInitCompress();
    if (!buf || !handle) {
        free(buf);
        if (handle) tjDestroy(handle);
        return status_set(HORA_ERR_NO_MEMORY, "JPEG encode: out of memory");
    }
    /* Our buffer, big enough by tjBufSize: TurboJPEG must not swap it for
     * one of its own (which would need tjFree). */
    unsigned long size = capacity;
    hora_status_t status = HORA_OK;
    if (tjCompress2(handle, pixels, width, 0, height, channels == 1 ? TJPF_GRAY : TJPF_RGB, &buf, &size, subsamp,
                    quality, TJFLAG_NOREALLOC) != 0) {
        status = status_set(HORA_ERR_SYSTEM, "JPEG encode: %s", tjGetErrorStr2(handle));
        free(buf);
    } else {
        *out = buf;
        *out_bytes = size;
    }
    tjDestroy(handle);
    return status;
}

hora_status_t tr_jpeg_resize_shorter(tr_jpeg_t *jpeg, const uint8_t *data, size_t bytes, int shorter, int quality,
                                     uint8_t **out, size_t *out_bytes, int *out_width, int *out_height)
{
    int width, height, colorspace;
    hora_status_t status = jpeg_header(jpeg, data, bytes, &width, &height, &colorspace);
    if (status != HORA_OK) return status;
    int short_side = width < height ? width : height;
    *out = NULL;
    *out_width = width;
    *out_height = height;
    if (shorter <= 0 || short_side <= shorter) return HORA_OK;
    double k = (double)shorter / short_side;
    int tw = width < height ? shorter : (int)lround(width * k);
    int th = width < height ? (int)lround(height * k) : shorter;
    tr_jpeg_image_t image;
    status = tr_jpeg_decode(jpeg, data, bytes, (float)k, &image);
    if (status != HORA_OK) return status;
    size_t count = (size_t)tw * (size_t)th * 3;
    float *work = malloc(count * sizeof(*work));
    uint8_t *pixels = malloc(count);
    if (!work || !pixels) {
        free(work);
        free(pixels);
        return status_set(HORA_ERR_NO_MEMORY, "JPEG resize: out of memory");
    }
    tr_rect_t whole = {0.0f, 0.0f, (float)image.width, (float)image.height};
    status = tr_aug_resample(image.pixels, image.width, image.height, 3, &whole, work, tw, th);
    if (status == HORA_OK) {
        for (size_t i = 0; i < count; i++) {
            float v = work[i] < 0.0f ? 0.0f : work[i] > 255.0f ? 255.0f : work[i];
            pixels[i] = (uint8_t)lrintf(v);
        }
        status = tr_jpeg_encode(pixels, tw, th, 3, quality, out, out_bytes);
    } else {
        status = status_set(status, "JPEG resize: out of memory");
    }
    free(work);
    free(pixels);
    if (status == HORA_OK) {
        *out_width = tw;
        *out_height = th;
    }
    return status;
}

#else /* !HORA_HAVE_TURBOJPEG */

int tr_jpeg_available(void) { return 0; }

hora_status_t tr_jpeg_init(uint64_t max_pixels, int strict, tr_jpeg_t **jpeg_out)
{
    (void)max_pixels, (void)strict;
    *jpeg_out = NULL;
    return status_set(HORA_ERR_UNSUPPORTED, "JPEG: built without libturbojpeg");
}

void tr_jpeg_free(tr_jpeg_t *jpeg) { (void)jpeg; }

hora_status_t tr_jpeg_header(tr_jpeg_t *jpeg, const uint8_t *data, size_t bytes, int *width, int *height, int *channels)
{
    (void)jpeg, (void)data, (void)bytes, (void)width, (void)height, (void)channels;
    return status_set(HORA_ERR_UNSUPPORTED, "JPEG: built without libturbojpeg");
}

hora_status_t tr_jpeg_decode(tr_jpeg_t *jpeg, const uint8_t *data, size_t bytes, float min_scale,
                             tr_jpeg_image_t *image)
{
    (void)jpeg, (void)data, (void)bytes, (void)min_scale, (void)image;
    return status_set(HORA_ERR_UNSUPPORTED, "JPEG: built without libturbojpeg");
}

hora_status_t tr_jpeg_encode(const uint8_t *pixels, int width, int height, int channels, int quality, uint8_t **out,
                             size_t *out_bytes)
{
    (void)pixels, (void)width, (void)height, (void)channels, (void)quality, (void)out, (void)out_bytes;
    return status_set(HORA_ERR_UNSUPPORTED, "JPEG: built without libturbojpeg");
}

hora_status_t tr_jpeg_resize_shorter(tr_jpeg_t *jpeg, const uint8_t *data, size_t bytes, int shorter, int quality,
                                     uint8_t **out, size_t *out_bytes, int *out_width, int *out_height)
{
    (void)jpeg, (void)data, (void)bytes, (void)shorter, (void)quality, (void)out, (void)out_bytes, (void)out_width,
        (void)out_height;
    return status_set(HORA_ERR_UNSUPPORTED, "JPEG: built without libturbojpeg");
}

#endif
