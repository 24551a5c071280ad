/*
 * test_jpeg.c - the JPEG path: synthetic images encoded with tjCompress2
 * (tr_jpeg_encode) at several sizes, then
 *   - decode round trips (full and DCT-scaled: the chosen factor, the size,
 *     the content), greyscale, Adobe CMYK, the pixel limit, garbage, empty
 *     and cut-short data (strict and not);
 *   - the train pipeline on a four-colour image: every output pixel away
 *     from the colour edges has the colour the random-resized crop rectangle
 *     (recomputed from the same stream) puts there; flip is an exact mirror;
 *     the val centre crop likewise;
 *   - hora-mkrecord --from folder / --from val on an ImageFolder tree with a
 *     garbage file (skipped; --strict fails), --resize-shorter sizes and
 *     byte-identical shards for any --workers, PREFIX.classes, then the
 *     loader: classes, sample count, every sample's colour matches its label;
 *   - bad records in a shard (garbage JPEG, cut-short JPEG, CRC mismatch)
 *     are counted and replaced by good samples; strict makes them an error
 *     naming file and offset; a truncated shard is left out (strict: error).
 */
#include "data_test.h"

#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <turbojpeg.h>

#include "augment.h"
#include "dataset.h"
#include "base/status.h"
#include "jpeg.h"
#include "pipeline.h"
#include "record.h"

static char dir[256];

/* ---- synthetic images ---- */

typedef enum { PATTERN_GRADIENT, PATTERN_QUADRANTS, PATTERN_CLASS } pattern_t;

static const uint8_t quadrant_rgb[4][3] = {{230, 40, 40}, {40, 230, 40}, {40, 40, 230}, {230, 230, 40}};
static const uint8_t class_rgb[3][3] = {{200, 60, 50}, {50, 180, 70}, {60, 70, 200}};

static uint8_t *make_image(int w, int h, pattern_t pattern, int arg)
{
    uint8_t *p = malloc((size_t)w * (size_t)h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *q = p + ((size_t)y * (size_t)w + (size_t)x) * 3;
            if (pattern == PATTERN_GRADIENT) {
                q[0] = (uint8_t)(255 * x / (w > 1 ? w - 1 : 1));
                q[1] = (uint8_t)(255 * y / (h > 1 ? h - 1 : 1));
                q[2] = 128;
            } else if (pattern == PATTERN_QUADRANTS) {
                int k = (y >= h / 2) * 2 + (x >= w / 2);
                memcpy(q, quadrant_rgb[k], 3);
            } else { /* a class colour with a faint texture */
                for (int c = 0; c < 3; c++) q[c] = (uint8_t)(class_rgb[arg][c] + ((x / 4 + y / 4) % 2) * 6);
            }
        }
    return p;
}

static uint8_t *make_jpeg(int w, int h, pattern_t pattern, int arg, int quality, size_t *bytes)
{
    uint8_t *pixels = make_image(w, h, pattern, arg), *jpeg = NULL;
    CHECK(tr_jpeg_encode(pixels, w, h, 3, quality, &jpeg, bytes) == HORA_OK, "encode %dx%d: %s", w, h,
          status_message());
    free(pixels);
    return jpeg;
}

static double mean_abs_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += abs((int)a[i] - (int)b[i]);
    return sum / (double)n;
}

/* ---- decoder ---- */

static void test_decode(void)
{
    tr_jpeg_t *dec;
    CHECK(tr_jpeg_init(0, 0, &dec) == HORA_OK, "init");
    const int sizes[][2] = {{64, 48}, {500, 375}, {37, 53}, {800, 600}, {1, 1}};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        int w = sizes[s][0], h = sizes[s][1];
        size_t bytes;
        uint8_t *jpeg = make_jpeg(w, h, PATTERN_GRADIENT, 0, 95, &bytes);
        uint8_t *want = make_image(w, h, PATTERN_GRADIENT, 0);
        int hw, hh, ch;
        CHECK(tr_jpeg_header(dec, jpeg, bytes, &hw, &hh, &ch) == HORA_OK && hw == w && hh == h && ch == 3,
              "header %dx%d: %dx%dx%d", w, h, hw, hh, ch);
        tr_jpeg_image_t img;
        CHECK(tr_jpeg_decode(dec, jpeg, bytes, 1.0f, &img) == HORA_OK && img.width == w && img.height == h,
              "decode %dx%d", w, h);
        double err = mean_abs_diff(img.pixels, want, (size_t)w * (size_t)h * 3);
        CHECK(err < 2.5, "%dx%d: mean abs error %.2f", w, h, err);
        free(jpeg);
        free(want);
    }

    /* DCT scaling: the smallest n/8 >= min_scale, and the content scales. */
    size_t bytes;
    uint8_t *jpeg = make_jpeg(800, 600, PATTERN_GRADIENT, 0, 95, &bytes);
    const struct {
        float min_scale;
        int w, h;
    } cases[] = {{0.3f, 300, 225}, {0.5f, 400, 300},  {0.126f, 200, 150}, {0.01f, 100, 75},
                 {2.0f, 800, 600}, {0.85f, 700, 525}, {0.9f, 800, 600}};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        tr_jpeg_image_t img;
        CHECK(tr_jpeg_decode(dec, jpeg, bytes, cases[k].min_scale, &img) == HORA_OK && img.width == cases[k].w &&
                  img.height == cases[k].h,
              "min_scale %g: %dx%d, expected %dx%d", (double)cases[k].min_scale, img.width, img.height, cases[k].w,
              cases[k].h);
        /* decoded pixel x covers full-size x' = (x + 0.5) / s - 0.5 */
        double s = (double)img.width / 800.0, err = 0;
        int n = 0;
        for (int y = 2; y < img.height - 2; y += 7)
            for (int x = 2; x < img.width - 2; x += 7) {
                double fx = (x + 0.5) / s - 0.5, fy = (y + 0.5) / s - 0.5;
                const uint8_t *p = img.pixels + ((size_t)y * (size_t)img.width + (size_t)x) * 3;
                err += fabs(p[0] - 255.0 * fx / 799) + fabs(p[1] - 255.0 * fy / 599);
                n += 2;
            }
        CHECK(err / n < 2.5, "scaled %dx%d: content error %.2f", img.width, img.height, err / n);
    }

    /* Cut short: no end marker -> bad, strict or not. Garbage, empty: bad. */
    tr_jpeg_image_t img;
    CHECK(tr_jpeg_decode(dec, jpeg, bytes / 2, 1.0f, &img) == HORA_ERR_CORRUPT &&
              strstr(status_message(), "cut short") != NULL,
          "half a JPEG: %s", status_message());
    uint8_t garbage[4096];
    for (size_t i = 0; i < sizeof(garbage); i++) garbage[i] = (uint8_t)(i * 2654435761u >> 13);
    CHECK(tr_jpeg_decode(dec, garbage, sizeof(garbage), 1.0f, &img) == HORA_ERR_CORRUPT, "garbage decoded");
    CHECK(tr_jpeg_decode(dec, garbage, 0, 1.0f, &img) == HORA_ERR_CORRUPT, "empty decoded");
    /* Damage inside the entropy-coded data: never a crash; under strict any
     * warning is an error. */
    uint8_t *damaged = malloc(bytes);
    memcpy(damaged, jpeg, bytes);
    for (size_t i = bytes / 3; i < bytes / 3 + 40; i++) damaged[i] ^= 0x5a;
    hora_status_t loose = tr_jpeg_decode(dec, damaged, bytes, 0.25f, &img);
    tr_jpeg_t *strict;
    CHECK(tr_jpeg_init(0, 1, &strict) == HORA_OK, "init strict");
    CHECK(tr_jpeg_decode(strict, damaged, bytes, 0.25f, &img) == HORA_ERR_CORRUPT,
          "strict decoded damaged data (non-strict: %d)", loose);
    CHECK(tr_jpeg_decode(strict, jpeg, bytes / 2, 1.0f, &img) == HORA_ERR_CORRUPT, "strict half");
    CHECK(tr_jpeg_decode(strict, jpeg, bytes, 0.5f, &img) == HORA_OK, "strict good: %s", status_message());
    tr_jpeg_free(strict);
    free(damaged);
    free(jpeg);

    /* Pixel limit: checked from the header. */
    tr_jpeg_t *small;
    CHECK(tr_jpeg_init(1000, 0, &small) == HORA_OK, "init limited");
    jpeg = make_jpeg(64, 48, PATTERN_GRADIENT, 0, 90, &bytes);
    CHECK(tr_jpeg_decode(small, jpeg, bytes, 1.0f, &img) == HORA_ERR_CORRUPT &&
              strstr(status_message(), "limit") != NULL,
          "pixel limit: %s", status_message());
    tr_jpeg_free(small);
    free(jpeg);

    /* Greyscale: channels 1 in the header, decoded as equal RGB. */
    uint8_t grey[40 * 30];
    for (int i = 0; i < 40 * 30; i++) grey[i] = (uint8_t)(i % 40 * 6);
    CHECK(tr_jpeg_encode(grey, 40, 30, 1, 95, &jpeg, &bytes) == HORA_OK, "encode grey");
    int w, h, ch;
    CHECK(tr_jpeg_header(dec, jpeg, bytes, &w, &h, &ch) == HORA_OK && ch == 1, "grey channels %d", ch);
    CHECK(tr_jpeg_decode(dec, jpeg, bytes, 1.0f, &img) == HORA_OK, "decode grey");
    int unequal = 0;
    double err = 0;
    for (int i = 0; i < 40 * 30; i++) {
        const uint8_t *p = img.pixels + 3 * i;
        unequal += p[0] != p[1] || p[1] != p[2];
        err += abs(p[0] - grey[i]);
    }
    CHECK(unequal == 0 && err / 1200 < 2, "grey: %d unequal pixels, error %.2f", unequal, err / 1200);
    free(jpeg);

    /* Adobe CMYK (stored inverted): R = C K / 255. TurboJPEG writes CMYK
     * pixels as a YCCK JPEG. */
    uint8_t cmyk[32 * 32 * 4];
    for (int i = 0; i < 32 * 32; i++)
        cmyk[4 * i] = 200, cmyk[4 * i + 1] = 100, cmyk[4 * i + 2] = 50, cmyk[4 * i + 3] = 255;
    tjhandle enc = tjInitCompress();
    unsigned char *cmyk_jpeg = NULL;
    unsigned long cmyk_bytes = 0;
    CHECK(tjCompress2(enc, cmyk, 32, 0, 32, TJPF_CMYK, &cmyk_jpeg, &cmyk_bytes, TJSAMP_444, 98, 0) == 0,
          "CMYK encode: %s", tjGetErrorStr2(enc));
    CHECK(tr_jpeg_decode(dec, cmyk_jpeg, cmyk_bytes, 1.0f, &img) == HORA_OK, "CMYK decode: %s", status_message());
    const uint8_t *p = img.pixels + 3 * (16 * 32 + 16);
    CHECK(abs(p[0] - 200) <= 3 && abs(p[1] - 100) <= 3 && abs(p[2] - 50) <= 3, "CMYK -> %d %d %d, expected 200 100 50",
          p[0], p[1], p[2]);
    tjFree(cmyk_jpeg);
    tjDestroy(enc);
    tr_jpeg_free(dec);
}

/* ---- pipeline ---- */

/* A loader configuration for one rank: square size x size crops, random
 * resized where the split is train; the rest as the caller sets it. */
static tr_loader_config_t jpeg_config(const char *path, tr_split_t split, int batch, uint64_t seed, int threads,
                                      int size)
{
    tr_loader_config_t c = {.path = path, .split = split, .world = 1, .batch = batch, .seed = seed};
    c.threads = threads;
    c.height = c.width = size;
    c.random_resized_crop = 1;
    return c;
}

static tr_pipeline_t make_pipeline(tr_split_t split, int size)
{
    tr_loader_config_t c = jpeg_config("test", split, 1, 77, 0, size);
    tr_dataset_t fake = {.count = 1, .classes = 4, .kind = TR_PAYLOAD_KIND_JPEG, .channels = 3};
    tr_pipeline_t p;
    CHECK(tr_pipeline_init(&p, &c, &fake) == HORA_OK, "pipeline init: %s", status_message());
    return p;
}

/* Every output pixel whose source point lies more than margin full-size
 * pixels from the colour edges has that quadrant's colour. */
static void check_quadrants(const float *out, int size, int w, int h, const tr_rect_t *r, int flip, const char *what)
{
    const float margin = 10.0f;
    int checked = 0, wrong = 0;
    for (int oy = 0; oy < size; oy++)
        for (int ox = 0; ox < size; ox++) {
            int sx_out = flip ? size - 1 - ox : ox;
            float sx = r->x + ((float)sx_out + 0.5f) * r->w / (float)size - 0.5f;
            float sy = r->y + ((float)oy + 0.5f) * r->h / (float)size - 0.5f;
            /* the edges lie between pixels w/2 - 1 and w/2: at w/2 - 0.5 */
            if (fabsf(sx - (float)(w / 2) + 0.5f) < margin || fabsf(sy - (float)(h / 2) + 0.5f) < margin) continue;
            int k = (sy >= (float)(h / 2)) * 2 + (sx >= (float)(w / 2));
            checked++;
            for (int c = 0; c < 3; c++) {
                size_t i = ((size_t)c * (size_t)size + (size_t)oy) * (size_t)size + (size_t)ox;
                float v = out[i] * 255.0f;
                wrong += fabsf(v - (float)quadrant_rgb[k][c]) > 12.0f;
            }
        }
    CHECK(wrong == 0 && checked > size * size / 4, "%s: %d wrong of %d checked pixels", what, wrong, checked);
}

static void test_pipeline(void)
{
    const int size = 64, w = 512, h = 384;
    size_t bytes;
    uint8_t *jpeg = make_jpeg(w, h, PATTERN_QUADRANTS, 0, 95, &bytes);
    tr_sample_t sample = {.label = 1,
                          .kind = TR_PAYLOAD_KIND_JPEG,
                          .channels = 3,
                          .height = h,
                          .width = w,
                          .data = jpeg,
                          .bytes = bytes,
                          .path = "quadrants.jpg"};
    tr_pipeline_t p = make_pipeline(TR_SPLIT_TRAIN, size);
    tr_pipeline_scratch_t scratch;
    CHECK(tr_pipeline_scratch_init(&p, 1, &scratch) == HORA_OK, "scratch");
    float *out = malloc(tr_pipeline_sample_bytes(&p));
    float *flipped = malloc(tr_pipeline_sample_bytes(&p));
    int mirrors = 0;
    for (uint64_t index = 0; index < 24; index++) {
        CHECK(tr_pipeline_sample(&p, &scratch, 3, index, &sample, out) == HORA_OK, "sample: %s", status_message());
        tr_rng_t rng = tr_rng_for(p.seed, 3, index, TR_RNG_PURPOSE_CROP);
        tr_rect_t r;
        tr_aug_random_resized_crop(&rng, w, h, &r);
        char what[64];
        snprintf(what, sizeof(what), "random-resized crop %" PRIu64, index);
        check_quadrants(out, size, w, h, &r, 0, what);
        /* flip on: this sample is either unchanged or its exact mirror */
        p.flip = 1;
        CHECK(tr_pipeline_sample(&p, &scratch, 3, index, &sample, flipped) == HORA_OK, "flip");
        p.flip = 0;
        int same = memcmp(out, flipped, tr_pipeline_sample_bytes(&p)) == 0, mirror = 1;
        for (int c = 0; c < 3 && mirror; c++)
            for (int y = 0; y < size; y++)
                for (int x = 0; x < size; x++)
                    mirror &= flipped[(c * size + y) * size + x] == out[(c * size + y) * size + (size - 1 - x)];
        CHECK(same || mirror, "flipped sample %" PRIu64 " is neither plain nor mirrored", index);
        mirrors += mirror && !same;
    }
    CHECK(mirrors > 4 && mirrors < 20, "%d of 24 flipped", mirrors);

    /* Val: centre crop after resizing the shorter side to size / 0.875. */
    tr_pipeline_t v = make_pipeline(TR_SPLIT_VAL, size);
    v.flip = 1; /* val ignores it */
    CHECK(tr_pipeline_sample(&v, &scratch, 0, 0, &sample, out) == HORA_OK, "val sample");
    tr_rect_t r;
    tr_aug_centre_crop(w, h, size, size, 0.875f, &r);
    check_quadrants(out, size, w, h, &r, 0, "val centre crop");

    /* A label outside the classes and a raw record in a JPEG split: bad. */
    sample.label = 4;
    CHECK(tr_pipeline_sample(&p, &scratch, 0, 0, &sample, out) == HORA_ERR_CORRUPT &&
              strstr(status_message(), "quadrants.jpg") != NULL,
          "label 4 of 4 classes: %s", status_message());
    tr_pipeline_scratch_free(&scratch);
    free(out);
    free(flipped);
    free(jpeg);
}

/* ---- hora-mkrecord and the loader ---- */

static void write_file(const char *path, const void *data, size_t bytes)
{
    CHECK(data_test_write(path, data, bytes, 0) == 0, "write %s", path);
}

/* The class whose colour is nearest to a sample's mean colour. */
static int nearest_class(const float *s, int size)
{
    double m[3] = {0};
    for (int c = 0; c < 3; c++) {
        for (int i = 0; i < size * size; i++) m[c] += s[(size_t)c * (size_t)size * (size_t)size + (size_t)i] * 255.0;
        m[c] /= size * size;
    }
    int best = -1;
    double best_d = 1e30;
    for (int k = 0; k < 3; k++) {
        double d = 0;
        for (int c = 0; c < 3; c++) d += (m[c] - class_rgb[k][c]) * (m[c] - class_rgb[k][c]);
        if (d < best_d) best_d = d, best = k;
    }
    return best_d < 30.0 * 30.0 ? best : -1;
}

static const int image_sizes[][2] = {{64, 48}, {100, 80}, {48, 64}, {300, 200}, {32, 32}, {75, 120}, {640, 480}};
#define IMAGES_PER_CLASS 7

static int wrong_colours(const data_test_epoch_t *e, int size, size_t *samples)
{
    int wrong = 0;
    *samples = 0;
    for (uint64_t s = 0; s < e->steps; s++)
        for (int j = 0; j < e->counts[s]; j++) {
            size_t k = s * (size_t)e->batch + (size_t)j;
            int cls = nearest_class(data_test_sample(e, k), size);
            wrong += cls != e->labels[k];
            (*samples)++;
        }
    return wrong;
}

static void test_mkrecord_round_trip(void)
{
    char tree[512], path[700], out[512];
    snprintf(tree, sizeof(tree), "%s/img", dir);
    snprintf(out, sizeof(out), "%s/ds", dir);
    mkdir(tree, 0755);
    mkdir(out, 0755);
    const char *classes[3] = {"apple", "grass", "sky"};
    FILE *val_labels;
    snprintf(path, sizeof(path), "%s/val_labels.txt", dir);
    val_labels = fopen(path, "w");
    char valdir[600];
    snprintf(valdir, sizeof(valdir), "%s/valimg", dir);
    mkdir(valdir, 0755);
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof(path), "%s/%s", tree, classes[k]);
        mkdir(path, 0755);
        for (int i = 0; i < IMAGES_PER_CLASS; i++) {
            size_t bytes;
            uint8_t *jpeg = make_jpeg(image_sizes[i][0], image_sizes[i][1], PATTERN_CLASS, k, 92, &bytes);
            snprintf(path, sizeof(path), "%s/%s/%02d.jpg", tree, classes[k], i);
            write_file(path, jpeg, bytes);
            snprintf(path, sizeof(path), "%s/v%d_%d.jpg", valdir, k, i);
            write_file(path, jpeg, bytes);
            fprintf(val_labels, "v%d_%d.jpg %d\n", k, i, k);
            free(jpeg);
        }
    }
    fclose(val_labels);
    snprintf(path, sizeof(path), "%s/grass/zz_not_a_jpeg.jpg", tree);
    write_file(path, "this is not a JPEG file at all", 30);

    /* --strict: the garbage file is fatal */
    CHECK(data_test_sh("%s --from folder %s %s/strict --strict >/dev/null 2>&1", HORA_MKRECORD, tree, dir) == 1,
          "mkrecord --strict accepted a garbage file");
    /* default: skipped and reported */
    CHECK(data_test_sh("%s --from folder %s %s/train --shards 2 --workers 2 >%s/mk.out 2>%s/mk.err", HORA_MKRECORD,
                       tree, out, dir, dir) == 0,
          "mkrecord --from folder failed");
    CHECK(data_test_sh("grep -q 'zz_not_a_jpeg.jpg.*skipped' %s/mk.err", dir) == 0,
          "mkrecord --from folder did not report the skipped file");
    CHECK(data_test_sh("grep -q '3 classes' %s/mk.out", dir) == 0, "mkrecord --from folder did not report 3 classes");
    CHECK(data_test_sh("grep -qx '1 %d grass' %s/train.classes", IMAGES_PER_CLASS, out) == 0,
          "train.classes lacks \"1 %d grass\"", IMAGES_PER_CLASS);
    CHECK(data_test_sh("%s --from val %s %s/val_labels.txt %s/val --workers 3 >/dev/null", HORA_MKRECORD, valdir, dir,
                       out) == 0,
          "mkrecord --from val");

    /* --resize-shorter: the same shards for 1 and 3 workers, shorter side 40 */
    for (int workers = 1; workers <= 3; workers += 2)
        CHECK(data_test_sh("%s --from folder %s %s/r%d --resize-shorter 40 --quality 90 --workers %d >/dev/null 2>&1",
                           HORA_MKRECORD, tree, dir, workers, workers) == 0,
              "mkrecord --resize-shorter 40 --workers %d", workers);
    CHECK(data_test_sh("cmp -s %s/r1-00000-of-00001.hrec %s/r3-00000-of-00001.hrec", dir, dir) == 0,
          "resized shards differ between --workers 1 and 3");
    snprintf(path, sizeof(path), "%s/r3-00000-of-00001.hrec", dir);
    tr_record_reader_t *reader;
    CHECK(tr_record_reader_open(path, &reader) == HORA_OK, "open %s", path);
    CHECK(tr_record_reader_count(reader) == 3 * IMAGES_PER_CLASS, "%" PRIu64 " resized records",
          tr_record_reader_count(reader));
    tr_record_t rec = {0};
    tr_jpeg_t *dec;
    CHECK(tr_jpeg_init(0, 0, &dec) == HORA_OK, "init");
    for (uint64_t i = 0; i < tr_record_reader_count(reader); i++) {
        CHECK(tr_record_read(reader, i, &rec) == HORA_OK, "read");
        int iw = image_sizes[i % IMAGES_PER_CLASS][0], ih = image_sizes[i % IMAGES_PER_CLASS][1];
        int short_side = iw < ih ? iw : ih;
        int want_w = short_side <= 40 ? iw : iw < ih ? 40 : (int)lround(iw * 40.0 / ih);
        int want_h = short_side <= 40 ? ih : iw < ih ? (int)lround(ih * 40.0 / iw) : 40;
        int jw, jh;
        CHECK(tr_jpeg_header(dec, rec.payload, rec.payload_bytes, &jw, &jh, NULL) == HORA_OK && jw == want_w &&
                  jh == want_h && rec.width == (uint32_t)jw && rec.height == (uint32_t)jh,
              "record %" PRIu64 ": %dx%d (header says %ux%u), expected %dx%d", i, jw, jh, rec.width, rec.height, want_w,
              want_h);
    }
    tr_jpeg_free(dec);
    tr_record_free(&rec);
    tr_record_reader_close(reader);

    /* The loader over train-*.hrec and val-*.hrec. */
    const int size = 32;
    tr_loader_config_t c = jpeg_config(out, TR_SPLIT_TRAIN, 4, 5, 2, size);
    c.flip = 1;
    tr_loader_t *l;
    CHECK(tr_loader_open(&c, &l) == HORA_OK, "open: %s", status_message());
    tr_loader_info_t info;
    tr_loader_info(l, &info);
    CHECK(info.samples == 3 * IMAGES_PER_CLASS && info.classes == 3 && info.channels == 3 && info.height == size &&
              info.width == size,
          "info: %" PRIu64 " samples %d classes %dx%dx%d", info.samples, info.classes, info.channels, info.height,
          info.width);
    data_test_epoch_t e = data_test_collect(l, 4, 4, 0, 0);
    size_t n;
    int wrong = wrong_colours(&e, size, &n);
    CHECK(e.status == HORA_OK && n == 3 * IMAGES_PER_CLASS && wrong == 0,
          "train: %d of %zu samples have another class's colour", wrong, n);
    CHECK(tr_loader_bad_count(l) == 0, "bad samples in a clean set");
    data_test_epoch_free(&e);
    tr_loader_close(l);

    c.split = TR_SPLIT_VAL;
    CHECK(tr_loader_open(&c, &l) == HORA_OK, "open val: %s", status_message());
    e = data_test_collect(l, 4, 4, 0, 0);
    wrong = wrong_colours(&e, size, &n);
    CHECK(e.status == HORA_OK && n == 3 * IMAGES_PER_CLASS && wrong == 0,
          "val: %d of %zu samples have another class's colour", wrong, n);
    /* unshuffled: the labels file order */
    int in_order = 1;
    for (size_t k = 0; k < n; k++) in_order &= e.labels[k] == (int)(k / IMAGES_PER_CLASS);
    CHECK(in_order, "val not in input order");
    data_test_epoch_free(&e);
    tr_loader_close(l);
}

/* Shard with good class images and three bad records. */
static void test_bad_records(void)
{
    char d[600], shard[700];
    snprintf(d, sizeof(d), "%s/bad", dir);
    mkdir(d, 0755);
    snprintf(shard, sizeof(shard), "%s/train-00000-of-00001.hrec", d);
    tr_record_writer_t *w;
    CHECK(tr_record_writer_open(shard, &w) == HORA_OK, "writer");
    const int count = 27, garbage_at = 5, cut_at = 11, crc_at = 17;
    for (int i = 0; i < count; i++) {
        size_t bytes;
        int k = i % 3;
        uint8_t *jpeg = make_jpeg(80 + i, 60, PATTERN_CLASS, k, 90, &bytes);
        if (i == garbage_at)
            for (size_t b = 0; b < bytes; b++) jpeg[b] = (uint8_t)(b * 7 + 1);
        if (i == cut_at) bytes = bytes * 2 / 3;
        tr_record_t rec = {.label = k,
                           .kind = TR_PAYLOAD_KIND_JPEG,
                           .height = 60,
                           .width = (uint32_t)(80 + i),
                           .channels = 3,
                           .payload_bytes = bytes,
                           .payload = jpeg};
        CHECK(tr_record_writer_append(w, &rec) == HORA_OK, "append");
        free(jpeg);
    }
    CHECK(tr_record_writer_close(w) == HORA_OK, "close");
    tr_record_reader_t *r;
    CHECK(tr_record_reader_open(shard, &r) == HORA_OK, "reopen");
    /* one payload byte of record crc_at: its CRC no longer matches */
    uint64_t crc_offset = tr_record_reader_offset(r, crc_at) + TR_RECORD_HEADER_BYTES + 100;
    tr_record_reader_close(r);
    FILE *f = fopen(shard, "r+b");
    fseek(f, (long)crc_offset, SEEK_SET);
    int byte = fgetc(f);
    fseek(f, (long)crc_offset, SEEK_SET);
    fputc(byte ^ 0x01, f);
    fclose(f);

    const int size = 24;
    tr_loader_config_t c = jpeg_config(d, TR_SPLIT_TRAIN, 4, 8, 3, size);
    tr_loader_t *l;
    CHECK(tr_loader_open(&c, &l) == HORA_OK, "open: %s", status_message());
    data_test_epoch_t e = data_test_collect(l, 4, 4, 0, 0);
    size_t n;
    int wrong = wrong_colours(&e, size, &n);
    uint64_t bad = tr_loader_bad_count(l);
    CHECK(e.status == HORA_OK && n == (size_t)count && wrong == 0,
          "with bad records: status %d, %zu samples, %d with the wrong colour", e.status, n, wrong);
    CHECK(bad >= 3 && bad <= 6, "bad count %" PRIu64 ", expected 3 (up to 6 if they chain)", bad);
    data_test_epoch_free(&e);
    /* A second epoch meets them again (counted again, reported once). */
    e = data_test_collect(l, 4, 4, 1, 0);
    CHECK(e.status == HORA_OK && tr_loader_bad_count(l) >= bad + 3, "second epoch");
    data_test_epoch_free(&e);
    tr_loader_close(l);

    c.strict = 1;
    CHECK(tr_loader_open(&c, &l) == HORA_OK, "open strict: %s", status_message());
    e = data_test_collect(l, 4, 4, 0, 0);
    CHECK(e.status == HORA_ERR_CORRUPT && strstr(status_message(), shard) != NULL &&
              strstr(status_message(), "offset") != NULL,
          "strict: status %d, message \"%s\"", e.status, status_message());
    /* the error repeats until the next start_epoch */
    tr_batch_t *b = NULL;
    CHECK(tr_loader_next(l, &b) == HORA_ERR_CORRUPT && b == NULL, "strict error did not repeat");
    data_test_epoch_free(&e);
    tr_loader_close(l);

    /* A truncated shard next to a good one: left out (strict: open fails). */
    char d2[600];
    snprintf(d2, sizeof(d2), "%s/trunc", dir);
    mkdir(d2, 0755);
    CHECK(data_test_sh("cp %s/ds/train-00000-of-00002.hrec %s/train-00000-of-00002.hrec", dir, d2) == 0, "cp");
    CHECK(data_test_sh("head -c 3000 %s/ds/train-00001-of-00002.hrec > %s/train-00001-of-00002.hrec", dir, d2) == 0,
          "head");
    c.path = d2;
    c.strict = 0;
    CHECK(tr_loader_open(&c, &l) == HORA_OK, "open with a truncated shard: %s", status_message());
    tr_loader_info_t info;
    tr_loader_info(l, &info);
    CHECK(info.samples == (3 * IMAGES_PER_CLASS + 1) / 2 && tr_loader_bad_count(l) == 1,
          "truncated shard: %" PRIu64 " samples, bad count %" PRIu64, info.samples, tr_loader_bad_count(l));
    e = data_test_collect(l, 4, 4, 0, 0);
    wrong = wrong_colours(&e, size, &n);
    CHECK(e.status == HORA_OK && wrong == 0, "truncated shard epoch");
    data_test_epoch_free(&e);
    tr_loader_close(l);
    c.strict = 1;
    l = NULL;
    CHECK(tr_loader_open(&c, &l) == HORA_ERR_CORRUPT && l == NULL &&
              strstr(status_message(), "train-00001-of-00002.hrec") != NULL,
          "strict truncated shard: %s", status_message());
}

int main(void)
{
    data_test_mkdtemp(dir, sizeof(dir), "test_jpeg");
    test_decode();
    test_pipeline();
    test_mkrecord_round_trip();
    test_bad_records();
    data_test_rmtree(dir);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
