/*
 * augment.c - crop choice, bilinear resampling, colour transforms and the
 * normalising store (augment.h).
 */
#include "augment.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "k_cpu.h"
#include "k_train_numeric.h" /* k_train_input_value */

const float tr_aug_pca_eigval[3] = {0.2175f, 0.0188f, 0.0045f};
const float tr_aug_pca_eigvec[3][3] = {
    {-0.5675f, 0.7192f, 0.4009f},
    {-0.5808f, -0.0045f, -0.8140f},
    {-0.5836f, -0.6948f, 0.4203f},
};

/* ---- crops ---- */

static int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void tr_aug_random_resized_crop(tr_rng_t *rng, int src_w, int src_h, tr_rect_t *rect)
{
    float area = (float)src_w * (float)src_h;
    float log_lo = logf(TR_AUG_RRC_RATIO_MIN), log_hi = logf(TR_AUG_RRC_RATIO_MAX);
    for (int attempt = 0; attempt < TR_AUG_RRC_ATTEMPTS; attempt++) {
        float target = area * tr_rng_range(rng, TR_AUG_RRC_AREA_MIN, TR_AUG_RRC_AREA_MAX);
        float ratio = expf(tr_rng_range(rng, log_lo, log_hi));
        int w = (int)lroundf(sqrtf(target * ratio));
        int h = (int)lroundf(sqrtf(target / ratio));
        if (w > 0 && h > 0 && w <= src_w && h <= src_h) {
            int x = (int)tr_rng_below(rng, (uint64_t)(src_w - w) + 1);
            int y = (int)tr_rng_below(rng, (uint64_t)(src_h - h) + 1);
            *rect = (tr_rect_t){(float)x, (float)y, (float)w, (float)h};
            return;
        }
    }
    /* Fallback: the whole image, trimmed to the nearest allowed aspect. */
    float in_ratio = (float)src_w / (float)src_h;
    int w = src_w, h = src_h;
    if (in_ratio < TR_AUG_RRC_RATIO_MIN)
        h = clamp_int((int)lroundf((float)w / TR_AUG_RRC_RATIO_MIN), 1, src_h);
    else if (in_ratio > TR_AUG_RRC_RATIO_MAX)
        w = clamp_int((int)lroundf((float)h * TR_AUG_RRC_RATIO_MAX), 1, src_w);
    *rect = (tr_rect_t){(float)((src_w - w) / 2), (float)((src_h - h) / 2), (float)w, (float)h};
}

void tr_aug_centre_crop(int src_w, int src_h, int out_w, int out_h, float ratio, tr_rect_t *rect)
{
    /* Resizing the shorter side to S = min(out) / ratio makes one output pixel
     * cover k = shorter / S source pixels; the centred out_w x out_h window
     * of the resized image is then a centred (k out_w) x (k out_h) window of
     * the source, which fits because out <= S. */
    float resized_short = (float)(out_w < out_h ? out_w : out_h) / ratio;
    float k = (float)(src_w < src_h ? src_w : src_h) / resized_short;
    float w = fminf(k * (float)out_w, (float)src_w), h = fminf(k * (float)out_h, (float)src_h);
    *rect = (tr_rect_t){((float)src_w - w) * 0.5f, ((float)src_h - h) * 0.5f, w, h};
}

/* ---- bilinear resampling ---- */

/* One axis' taps: for each output coordinate the two source indices (times
 * stride) and the weight of the second. */
static void resample_taps(float start, float size, int out_count, int src_count, int stride, int32_t *lo, int32_t *hi,
                          float *frac)
{
    float scale = size / (float)out_count;
    for (int o = 0; o < out_count; o++) {
        float s = start + ((float)o + 0.5f) * scale - 0.5f;
        if (s < 0.0f) s = 0.0f;
        if (s > (float)(src_count - 1)) s = (float)(src_count - 1);
        int i = (int)s;
        lo[o] = i * stride;
        hi[o] = (i + 1 < src_count ? i + 1 : i) * stride;
        frac[o] = s - (float)i;
    }
}

/* The inner loops, instantiated for 1 and 3 channels so the channel loop
 * unrolls. */
static inline void resample_rows(const uint8_t *src, int channels, const int32_t *x_lo, const int32_t *x_hi,
                                 const float *x_frac, const int32_t *y_lo, const int32_t *y_hi, const float *y_frac,
                                 float *out, int out_w, int out_h)
{
    for (int oy = 0; oy < out_h; oy++) {
        const uint8_t *r0 = src + y_lo[oy], *r1 = src + y_hi[oy];
        float fy = y_frac[oy];
        float *o = out + (size_t)oy * (size_t)out_w * (size_t)channels;
        for (int ox = 0; ox < out_w; ox++) {
            const uint8_t *a = r0 + x_lo[ox], *b = r0 + x_hi[ox];
            const uint8_t *c = r1 + x_lo[ox], *d = r1 + x_hi[ox];
            float fx = x_frac[ox];
            for (int ch = 0; ch < channels; ch++) {
                float top = (float)a[ch] + fx * ((float)b[ch] - (float)a[ch]);
                float bottom = (float)c[ch] + fx * ((float)d[ch] - (float)c[ch]);
                o[ch] = top + fy * (bottom - top);
            }
            o += channels;
        }
    }
}

hora_status_t tr_aug_resample(const uint8_t *src, int src_w, int src_h, int channels, const tr_rect_t *rect, float *out,
                              int out_w, int out_h)
{
    size_t taps = (size_t)out_w + (size_t)out_h;
    int32_t *ints = malloc(2 * taps * sizeof(*ints));
    float *fracs = malloc(taps * sizeof(*fracs));
    if (!ints || !fracs) {
        free(ints);
        free(fracs);
        return HORA_ERR_NO_MEMORY;
    }
    int32_t *x_lo = ints, *x_hi = ints + out_w, *y_lo = ints + 2 * out_w;
    int32_t *y_hi = y_lo + out_h;
    float *x_frac = fracs, *y_frac = fracs + out_w;
    resample_taps(rect->x, rect->w, out_w, src_w, channels, x_lo, x_hi, x_frac);
    resample_taps(rect->y, rect->h, out_h, src_h, src_w * channels, y_lo, y_hi, y_frac);
    if (channels == 3)
        resample_rows(src, 3, x_lo, x_hi, x_frac, y_lo, y_hi, y_frac, out, out_w, out_h);
    else if (channels == 1)
        resample_rows(src, 1, x_lo, x_hi, x_frac, y_lo, y_hi, y_frac, out, out_w, out_h);
    else
        resample_rows(src, channels, x_lo, x_hi, x_frac, y_lo, y_hi, y_frac, out, out_w, out_h);
    free(ints);
    free(fracs);
    return HORA_OK;
}

/* ---- colour ---- */

static const float gray_weights[3] = {0.299f, 0.587f, 0.114f};
/* RGB -> YIQ; hue rotates (I, Q) about the grey axis Y. Each row of the
 * chroma part sums to 0, so grey stays grey. */
static const float rgb_to_yiq[3][3] = {
    {0.299f, 0.587f, 0.114f},
    {0.596f, -0.274f, -0.322f},
    {0.211f, -0.523f, 0.312f},
};

static void mat3_mul(const float a[3][3], const float b[3][3], float out[3][3])
{
    float t[3][3];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) t[i][j] = a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j];
    memcpy(out, t, sizeof(t));
}

/* Inverse by cofactors (the published YIQ -> RGB matrix is rounded; the
 * exact inverse keeps hue 0 the identity). */
static void mat3_inverse(const float m[3][3], float out[3][3])
{
    float c00 = m[1][1] * m[2][2] - m[1][2] * m[2][1];
    float c01 = m[1][2] * m[2][0] - m[1][0] * m[2][2];
    float c02 = m[1][0] * m[2][1] - m[1][1] * m[2][0];
    float det = m[0][0] * c00 + m[0][1] * c01 + m[0][2] * c02;
    out[0][0] = c00 / det;
    out[1][0] = c01 / det;
    out[2][0] = c02 / det;
    out[0][1] = (m[0][2] * m[2][1] - m[0][1] * m[2][2]) / det;
    out[1][1] = (m[0][0] * m[2][2] - m[0][2] * m[2][0]) / det;
    out[2][1] = (m[0][1] * m[2][0] - m[0][0] * m[2][1]) / det;
    out[0][2] = (m[0][1] * m[1][2] - m[0][2] * m[1][1]) / det;
    out[1][2] = (m[0][2] * m[1][0] - m[0][0] * m[1][2]) / det;
    out[2][2] = (m[0][0] * m[1][1] - m[0][1] * m[1][0]) / det;
}

float tr_aug_mean_gray(const float *img, int pixel_count, int channels)
{
    double sum = 0.0;
    if (channels >= 3) {
        for (int i = 0; i < pixel_count; i++) {
            const float *p = img + (size_t)i * (size_t)channels;
            sum += gray_weights[0] * p[0] + gray_weights[1] * p[1] + gray_weights[2] * p[2];
        }
    } else {
        for (int i = 0; i < pixel_count; i++) sum += img[(size_t)i * (size_t)channels];
    }
    return pixel_count > 0 ? (float)(sum / pixel_count) : 0.0f;
}

void tr_aug_color_draw(tr_rng_t *color_rng, tr_rng_t *lighting_rng, float jitter, float hue, float lighting,
                       int channels, float mean_gray, tr_color_t *color)
{
    memset(color, 0, sizeof(*color));
    if (jitter > 0.0f || hue > 0.0f) {
        float lo = fmaxf(0.0f, 1.0f - jitter), hi = 1.0f + jitter;
        /* Always four draws, so each factor's value does not depend on
         * whether another is switched off. */
        float b = tr_rng_range(color_rng, lo, hi), c = tr_rng_range(color_rng, lo, hi);
        float s = tr_rng_range(color_rng, lo, hi), h = tr_rng_range(color_rng, -hue, hue);
        if (jitter <= 0.0f) b = c = s = 1.0f;
        /* brightness x -> b x; contrast x -> c x + (1 - c) b mean_gray;
         * saturation x -> s x + (1 - s) grey(x); hue: rotate I, Q by 2 pi h.
         * Grey maps to grey under the last two, so the contrast offset passes
         * through them unchanged. */
        float m[3][3] = {{0}};
        if (channels >= 3) {
            float sat[3][3];
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) sat[i][j] = (i == j ? s : 0.0f) + (1.0f - s) * gray_weights[j];
            float yiq_to_rgb[3][3], rot[3][3] = {{1, 0, 0}, {0, 0, 0}, {0, 0, 0}};
            float angle = 6.2831853f * h;
            rot[1][1] = cosf(angle);
            rot[1][2] = -sinf(angle);
            rot[2][1] = sinf(angle);
            rot[2][2] = cosf(angle);
            mat3_inverse(rgb_to_yiq, yiq_to_rgb);
            float hue_m[3][3];
            mat3_mul(rot, rgb_to_yiq, hue_m);
            mat3_mul(yiq_to_rgb, hue_m, hue_m);
            mat3_mul(hue_m, sat, m);
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) m[i][j] *= b * c;
        } else {
            m[0][0] = b * c;
        }
        memcpy(color->matrix, m, sizeof(m));
        for (int i = 0; i < 3; i++) color->offset[i] = (1.0f - c) * b * mean_gray;
        color->affine = 1;
    }
    if (lighting > 0.0f && channels >= 3) {
        float alpha[3];
        for (int k = 0; k < 3; k++) alpha[k] = lighting * tr_rng_normal(lighting_rng) * tr_aug_pca_eigval[k];
        for (int ch = 0; ch < 3; ch++)
            color->shift[ch] = 255.0f * (tr_aug_pca_eigvec[ch][0] * alpha[0] + tr_aug_pca_eigvec[ch][1] * alpha[1] +
                                         tr_aug_pca_eigvec[ch][2] * alpha[2]);
        color->lighting = 1;
    }
}

static float clamp255(float v) { return v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v; }

void tr_aug_color_apply(const tr_color_t *color, float *img, int pixel_count, int channels)
{
    if (channels >= 3) {
        const float(*m)[3] = color->matrix;
        for (int i = 0; i < pixel_count; i++) {
            float *p = img + (size_t)i * (size_t)channels;
            float r = p[0], g = p[1], b = p[2];
            if (color->affine) {
                p[0] = clamp255(m[0][0] * r + m[0][1] * g + m[0][2] * b + color->offset[0]);
                p[1] = clamp255(m[1][0] * r + m[1][1] * g + m[1][2] * b + color->offset[1]);
                p[2] = clamp255(m[2][0] * r + m[2][1] * g + m[2][2] * b + color->offset[2]);
            }
            if (color->lighting) {
                p[0] += color->shift[0];
                p[1] += color->shift[1];
                p[2] += color->shift[2];
            }
        }
    } else if (color->affine) {
        for (int i = 0; i < pixel_count; i++) {
            float *p = img + (size_t)i * (size_t)channels;
            p[0] = clamp255(color->matrix[0][0] * p[0] + color->offset[0]);
        }
    }
}

/* ---- store ---- */

void tr_aug_store(const float *work, int width, int height, int channels, const tr_store_t *store, void *dst)
{
    float *dst_f32 = store->dtype == TR_DTYPE_F32 ? dst : NULL;
    uint16_t *dst_f16 = store->dtype == TR_DTYPE_F16 ? dst : NULL;
    uint8_t *dst_u8 = store->dtype == TR_DTYPE_U8 ? dst : NULL;
    int nchw = store->layout != TR_LAYOUT_NHWC && !dst_u8;
    for (int c = 0; c < channels; c++) {
        float mean = store->mean[c], std = store->std[c];
        for (int y = 0; y < height; y++) {
            int sy = y + store->dy - store->pad;
            int row_inside = sy >= 0 && sy < height;
            for (int x = 0; x < width; x++) {
                int sx = (store->flip ? width - 1 - x : x) + store->dx - store->pad;
                float v = 0.0f;
                if (row_inside && sx >= 0 && sx < width)
                    v = work[((size_t)sy * (size_t)width + (size_t)sx) * (size_t)channels + (size_t)c];
                size_t i = nchw ? ((size_t)c * (size_t)height + (size_t)y) * (size_t)width + (size_t)x
                                : ((size_t)y * (size_t)width + (size_t)x) * (size_t)channels + (size_t)c;
                if (dst_u8) {
                    dst_u8[i] = v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)(v + 0.5f);
                    continue;
                }
                float r = k_train_input_value(v, mean, std);
                if (dst_f32)
                    dst_f32[i] = r;
                else
                    dst_f16[i] = k_f32_to_f16(r);
            }
        }
    }
}
