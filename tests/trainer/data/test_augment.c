/*
 * test_augment.c - the augmentation steps on their own (augment.h, rng.h):
 *   - random-resized crops lie inside the image with integer size, area and
 *     aspect in range (fallback for extreme shapes), and cover the range;
 *   - the val centre crop is the rectangle resize-then-crop implies;
 *   - bilinear resampling copies exactly at scale 1, reproduces linear
 *     ramps exactly when shrinking, and clamps at the edges;
 *   - the store normalises bit for bit, mirrors exactly, transposes to
 *     NHWC, rounds to f16 like k_f32_to_f16, pads with normalised zeros;
 *   - colour jitter: brightness mean/std on grey images, grey stays grey
 *     under saturation and hue, hue keeps luma and averages to grey;
 *   - PCA lighting: zero mean shift and the std the eigen-decomposition
 *     predicts per channel;
 *   - keyed streams are reproducible and distinct per key part.
 */
#include "data_test.h"

#include <math.h>

#include "augment.h"
#include "k_cpu.h"
#include "rng.h"

static void test_rng(void)
{
    tr_rng_t a = tr_rng_for(1, 2, 3, TR_RNG_PURPOSE_CROP);
    tr_rng_t b = tr_rng_for(1, 2, 3, TR_RNG_PURPOSE_CROP);
    int same = 1;
    for (int i = 0; i < 100; i++) same &= tr_rng_next(&a) == tr_rng_next(&b);
    CHECK(same, "the same key gives different streams");
    uint64_t firsts[5];
    tr_rng_t keys[5] = {tr_rng_for(1, 2, 3, TR_RNG_PURPOSE_CROP), tr_rng_for(2, 2, 3, TR_RNG_PURPOSE_CROP),
                        tr_rng_for(1, 3, 3, TR_RNG_PURPOSE_CROP), tr_rng_for(1, 2, 4, TR_RNG_PURPOSE_CROP),
                        tr_rng_for(1, 2, 3, TR_RNG_PURPOSE_FLIP)};
    for (int i = 0; i < 5; i++) firsts[i] = tr_rng_next(&keys[i]);
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++) CHECK(firsts[i] != firsts[j], "keys %d and %d share a stream", i, j);
    /* below(): unbiased enough to see every value, never out of range */
    tr_rng_t r = tr_rng_for(7, 0, 0, TR_RNG_PURPOSE_CROP);
    int hist[7] = {0}, out_of_range = 0;
    for (int i = 0; i < 70000; i++) {
        uint64_t v = tr_rng_below(&r, 7);
        if (v < 7)
            hist[v]++;
        else
            out_of_range++;
    }
    CHECK(out_of_range == 0, "below(7) gave %d values >= 7", out_of_range);
    for (int k = 0; k < 7; k++) CHECK(hist[k] > 9500 && hist[k] < 10500, "below(7): %d times %d", hist[k], k);
    double sum = 0, sum2 = 0;
    for (int i = 0; i < 100000; i++) {
        double z = tr_rng_normal(&r);
        sum += z;
        sum2 += z * z;
    }
    CHECK(fabs(sum / 1e5) < 0.02 && fabs(sum2 / 1e5 - 1) < 0.02, "normal: mean %g var %g", sum / 1e5, sum2 / 1e5);
}

static void test_random_resized_crop(void)
{
    const int sizes[][2] = {{500, 375}, {375, 500}, {224, 224},   {1, 1},  {2, 3},
                            {10, 1000}, {1000, 10}, {4000, 3000}, {33, 17}};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        int w = sizes[s][0], h = sizes[s][1];
        int bad_bounds = 0, bad_shape = 0, fallback = 0;
        double area_min = 2, area_max = 0;
        for (uint64_t i = 0; i < 4000; i++) {
            tr_rng_t rng = tr_rng_for(11, 0, i, TR_RNG_PURPOSE_CROP);
            tr_rect_t r;
            tr_aug_random_resized_crop(&rng, w, h, &r);
            int integral = r.x == floorf(r.x) && r.y == floorf(r.y) && r.w == floorf(r.w) && r.h == floorf(r.h);
            if (!integral || r.x < 0 || r.y < 0 || r.w < 1 || r.h < 1 || r.x + r.w > (float)w || r.y + r.h > (float)h)
                bad_bounds++;
            double area = (double)r.w * r.h / ((double)w * h), aspect = (double)r.w / r.h;
            /* an accepted try: area within [0.08, 1] and aspect in [3/4, 4/3],
             * up to the rounding of each side to whole pixels */
            double slack_w = 0.5 / r.w, slack_h = 0.5 / r.h;
            int in_range = area >= 0.08 * (1 - 2 * slack_w) * (1 - 2 * slack_h) - 1e-9 &&
                           aspect >= 0.75 * (1 - slack_w) / (1 + slack_h) - 1e-9 &&
                           aspect <= (4.0 / 3) * (1 + slack_w) / (1 - slack_h) + 1e-9;
            int centred =
                fabsf(r.x - (float)((w - (int)r.w) / 2)) < 1e-6f && fabsf(r.y - (float)((h - (int)r.h) / 2)) < 1e-6f;
            if (!in_range) {
                fallback++;
                bad_shape += !centred;
            }
            area_min = fmin(area_min, area);
            area_max = fmax(area_max, area);
        }
        CHECK(bad_bounds == 0, "%dx%d: %d crops out of bounds or not whole pixels", w, h, bad_bounds);
        CHECK(bad_shape == 0, "%dx%d: %d crops neither in range nor the centred fallback", w, h, bad_shape);
        if (w >= 200 && h >= 200) {
            CHECK(fallback < 40, "%dx%d: %d fallbacks in 4000", w, h, fallback);
            CHECK(area_min < 0.1 && area_max > 0.95, "%dx%d: areas only %.3f..%.3f", w, h, area_min, area_max);
        }
    }
}

static void test_centre_crop(void)
{
    tr_rect_t r;
    tr_aug_centre_crop(500, 375, 224, 224, 0.875f, &r);
    /* shorter side 375 -> 256: one output pixel = 375/256 source pixels */
    float side = 224.0f * 375.0f / 256.0f;
    CHECK(fabsf(r.w - side) < 1e-3f && fabsf(r.h - side) < 1e-3f && fabsf(r.x - (500 - side) / 2) < 1e-3f &&
              fabsf(r.y - (375 - side) / 2) < 1e-3f,
          "centre crop %g,%g %gx%g", (double)r.x, (double)r.y, (double)r.w, (double)r.h);
    tr_aug_centre_crop(300, 600, 224, 224, 1.0f, &r); /* ratio 1: the whole shorter side */
    CHECK(r.x == 0 && fabsf(r.w - 300) < 1e-3f && fabsf(r.y - 150) < 1e-3f, "ratio 1: %g,%g %gx%g", (double)r.x,
          (double)r.y, (double)r.w, (double)r.h);
}

static void test_resample(void)
{
    enum { W = 40, H = 30 };
    static uint8_t src[H * W * 3];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++) src[(y * W + x) * 3 + c] = (uint8_t)(x * 5 + c * 7 + (y % 3));
    /* scale 1 at an integer offset: an exact copy */
    float out[20 * 10 * 3];
    tr_rect_t r = {7, 4, 20, 10};
    CHECK(tr_aug_resample(src, W, H, 3, &r, out, 20, 10) == HORA_OK, "resample");
    int bad = 0;
    for (int y = 0; y < 10; y++)
        for (int x = 0; x < 20; x++)
            for (int c = 0; c < 3; c++) bad += out[(y * 20 + x) * 3 + c] != (float)src[((y + 4) * W + x + 7) * 3 + c];
    CHECK(bad == 0, "scale-1 copy: %d values differ", bad);

    /* A linear ramp v = 5 x shrunk 2x: output ox samples source x = 2 ox + 0.5,
     * so v = 10 ox + 2.5 exactly (rows: y % 3 is not linear, use row pairs
     * (0,1) -> 0.5 and check the channel offset only). */
    uint8_t ramp[W];
    for (int x = 0; x < W; x++) ramp[x] = (uint8_t)(5 * x);
    float half[W / 2];
    tr_rect_t whole = {0, 0, W, 1};
    CHECK(tr_aug_resample(ramp, W, 1, 1, &whole, half, W / 2, 1) == HORA_OK, "resample");
    bad = 0;
    for (int x = 0; x < W / 2; x++) bad += fabsf(half[x] - (10.0f * (float)x + 2.5f)) > 1e-4f;
    CHECK(bad == 0, "2x shrink of a ramp: %d values off", bad);
    /* Enlarging clamps at the borders: the first and last outputs are the
     * edge pixels. */
    float big[4 * W];
    CHECK(tr_aug_resample(ramp, W, 1, 1, &whole, big, 4 * W, 1) == HORA_OK, "resample");
    CHECK(big[0] == 0.0f && big[4 * W - 1] == 5.0f * (W - 1), "edges %g %g", (double)big[0], (double)big[4 * W - 1]);
}

static void test_store(void)
{
    enum { W = 6, H = 4, C = 3 };
    float work[H * W * C];
    for (int i = 0; i < H * W * C; i++) work[i] = (float)((i * 37) % 256);
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    float nchw[C * H * W], nhwc[H * W * C], flipped[C * H * W], padded[C * H * W];
    uint16_t half[C * H * W];
    tr_store_t s = {.mean = mean, .std = std, .layout = TR_LAYOUT_NCHW, .dtype = TR_DTYPE_F32};
    tr_aug_store(work, W, H, C, &s, nchw);
    s.layout = TR_LAYOUT_NHWC;
    tr_aug_store(work, W, H, C, &s, nhwc);
    s.layout = TR_LAYOUT_NCHW;
    s.dtype = TR_DTYPE_F16;
    tr_aug_store(work, W, H, C, &s, half);
    s.dtype = TR_DTYPE_F32;
    s.flip = 1;
    tr_aug_store(work, W, H, C, &s, flipped);
    s.flip = 0;
    s.pad = 2, s.dx = 4, s.dy = 0; /* shift left by 2, down by 2 */
    tr_aug_store(work, W, H, C, &s, padded);
    int bad_norm = 0, bad_nhwc = 0, bad_f16 = 0, bad_flip = 0, bad_pad = 0;
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                float v = work[(y * W + x) * C + c];
                float want = (v / 255.0f - mean[c]) / std[c];
                float got = nchw[(c * H + y) * W + x];
                bad_norm += got != want;
                bad_nhwc += nhwc[(y * W + x) * C + c] != got;
                bad_f16 += half[(c * H + y) * W + x] != k_f32_to_f16(got);
                bad_flip += flipped[(c * H + y) * W + (W - 1 - x)] != got;
                int sx = x + 2, sy = y - 2;
                float pv = sx < W && sy >= 0 ? nchw[(c * H + sy) * W + sx] : (0.0f / 255.0f - mean[c]) / std[c];
                bad_pad += padded[(c * H + y) * W + x] != pv;
            }
    CHECK(bad_norm == 0 && bad_nhwc == 0 && bad_f16 == 0 && bad_flip == 0 && bad_pad == 0,
          "store: norm %d, nhwc %d, f16 %d, flip %d, pad %d values wrong", bad_norm, bad_nhwc, bad_f16, bad_flip,
          bad_pad);
}

static void color_stats(float jitter, float hue, float lighting, const float rgb[3], int trials, double mean_out[3],
                        double std_out[3])
{
    double sum[3] = {0}, sum2[3] = {0};
    for (int t = 0; t < trials; t++) {
        tr_rng_t c = tr_rng_for(5, 1, (uint64_t)t, TR_RNG_PURPOSE_COLOR);
        tr_rng_t l = tr_rng_for(5, 1, (uint64_t)t, TR_RNG_PURPOSE_LIGHTING);
        float px[3] = {rgb[0], rgb[1], rgb[2]};
        tr_color_t color;
        tr_aug_color_draw(&c, &l, jitter, hue, lighting, 3, tr_aug_mean_gray(px, 1, 3), &color);
        tr_aug_color_apply(&color, px, 1, 3);
        for (int k = 0; k < 3; k++) {
            sum[k] += px[k];
            sum2[k] += (double)px[k] * px[k];
        }
    }
    for (int k = 0; k < 3; k++) {
        mean_out[k] = sum[k] / trials;
        std_out[k] = sqrt(fmax(0, sum2[k] / trials - mean_out[k] * mean_out[k]));
    }
}

static void test_color(void)
{
    const int trials = 20000;
    double m[3], s[3];
    /* Grey 128 with jitter 0.4: contrast and saturation do nothing to a flat
     * grey image, so out = 128 b, b ~ U[0.6, 1.4]: mean 128, std 128 * 0.4/sqrt(3). */
    const float grey[3] = {128, 128, 128};
    color_stats(0.4f, 0.0f, 0.0f, grey, trials, m, s);
    double want_std = 128.0 * 0.4 / sqrt(3.0);
    for (int k = 0; k < 3; k++) {
        CHECK(fabs(m[k] - 128.0) < 1.0, "brightness mean %g", m[k]);
        CHECK(fabs(s[k] - want_std) < 0.05 * want_std, "brightness std %g, expected %g", s[k], want_std);
    }
    /* Grey stays grey under hue and saturation. */
    tr_rng_t c = tr_rng_for(9, 0, 0, TR_RNG_PURPOSE_COLOR), l = c;
    float px[3] = {90, 90, 90};
    tr_color_t color;
    tr_aug_color_draw(&c, &l, 0.0f, 0.5f, 0.0f, 3, 90, &color);
    tr_aug_color_apply(&color, px, 1, 3);
    CHECK(fabsf(px[0] - 90) < 0.01f && fabsf(px[1] - 90) < 0.01f && fabsf(px[2] - 90) < 0.01f,
          "hue moved grey to %g %g %g", (double)px[0], (double)px[1], (double)px[2]);
    /* Hue keeps luma; over uniform angles the colour averages to its luma
     * (I and Q rotate to mean 0). A muted colour, so nothing clips. */
    const float muted[3] = {150, 120, 100};
    float y = 0.299f * muted[0] + 0.587f * muted[1] + 0.114f * muted[2];
    int bad_luma = 0;
    for (uint64_t t = 0; t < 1000; t++) {
        tr_rng_t cr = tr_rng_for(3, 0, t, TR_RNG_PURPOSE_COLOR), lr = cr;
        float p[3] = {muted[0], muted[1], muted[2]};
        tr_aug_color_draw(&cr, &lr, 0.0f, 0.5f, 0.0f, 3, 0, &color);
        tr_aug_color_apply(&color, p, 1, 3);
        bad_luma += fabsf(0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2] - y) > 0.05f;
    }
    CHECK(bad_luma == 0, "hue changed luma %d times", bad_luma);
    color_stats(0.0f, 0.5f, 0.0f, muted, trials, m, s);
    for (int k = 0; k < 3; k++) CHECK(fabs(m[k] - y) < 0.6, "hue average channel %d: %g, luma %g", k, m[k], (double)y);
    /* Saturation 0..2 on a colour, brightness/contrast at their means: the
     * mean is the colour itself (every factor has mean 1 and the map is
     * affine in each), up to clipping, which this colour avoids. */
    color_stats(0.3f, 0.0f, 0.0f, muted, trials, m, s);
    for (int k = 0; k < 3; k++)
        CHECK(fabs(m[k] - muted[k]) < 1.5, "jitter mean channel %d: %g, expected %g", k, m[k], (double)muted[k]);
}

static void test_lighting(void)
{
    const int trials = 40000;
    const float lighting = 0.1f;
    const float rgb[3] = {120, 120, 120};
    double m[3], s[3];
    color_stats(0.0f, 0.0f, lighting, rgb, trials, m, s);
    for (int c = 0; c < 3; c++) {
        double var = 0;
        for (int k = 0; k < 3; k++) {
            double t = tr_aug_pca_eigvec[c][k] * tr_aug_pca_eigval[k];
            var += t * t;
        }
        double want_std = 255.0 * lighting * sqrt(var);
        CHECK(fabs(m[c] - 120.0) < 0.05 * want_std + 0.02, "lighting mean channel %d: %g", c, m[c]);
        CHECK(fabs(s[c] - want_std) < 0.03 * want_std, "lighting std channel %d: %g, expected %g", c, s[c], want_std);
    }
}

int main(void)
{
    test_rng();
    test_random_resized_crop();
    test_centre_crop();
    test_resample();
    test_store();
    test_color();
    test_lighting();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
