/*
 * test_loader_idx.c - the loader on IDX files and on raw-pixel record shards
 * (the Fashion-MNIST path of hora-train), checked exactly:
 *   - every delivered sample is (pixel / 255 - mean) / std of the image its
 *     label says, bit for bit, in NCHW and NHWC, f32 and f16;
 *   - an epoch is a permutation (no sample twice), different per epoch and
 *     seed, the same for any thread count and after a restart at a step;
 *   - ranks: disjoint, rank r's p-th sample is the single-rank order's
 *     r + world * p, equal step counts; val: unshuffled, contiguous parts
 *     covering the split once, a short last batch with labels -1 and zeros;
 *   - pad_crop and flip: each sample is the plain one shifted (with zeros)
 *     and/or mirrored, with both flips and many offsets occurring;
 *   - held buffers, bad configurations and broken IDX files give errors,
 *     never a hang or a crash;
 *   - hora-mkrecord --from idx shards deliver the same samples as the IDX.
 * With --fashion-mnist: open Debian's /usr/share/datasets/fashion-mnist
 * (tools/setup installs dataset-fashion-mnist; its absence is a failure).
 */
#include "data_test.h"

#include <math.h>
#include <sys/wait.h>

#include "k_cpu.h"

#define N_TRAIN 103
#define N_VAL 37
#define ROWS 5
#define COLS 7
#define CLASSES 7

static const float mean1[3] = {0.2860f, 0, 0}, std1[3] = {0.3530f, 0, 0};
static char dir[256];

/* Image i: pixels (0,0) and (0,1) spell i, the rest is a fixed function. */
static uint8_t pixel(uint32_t i, int y, int x)
{
    if (y == 0 && x == 0) return (uint8_t)(i & 0xff);
    if (y == 0 && x == 1) return (uint8_t)(i >> 8);
    return (uint8_t)(i * 7 + (uint32_t)y * 13 + (uint32_t)x * 29 + 3);
}
static uint8_t label_of(uint32_t i) { return (uint8_t)((i * 5 + 1) % CLASSES); }

static float norm(uint8_t p) { return ((float)p / 255.0f - mean1[0]) / std1[0]; }

/* Write the split's images/labels (gz or not; bad = one damage case). */
static void write_idx(const char *d, const char *stem, uint32_t n, int gz, const char *bad)
{
    size_t image_bytes = 16 + (size_t)n * ROWS * COLS, label_bytes = 8 + n;
    uint8_t *img = malloc(image_bytes + 1), *lbl = malloc(label_bytes);
    data_test_be32(img, 0x803);
    data_test_be32(img + 4, n);
    data_test_be32(img + 8, ROWS);
    data_test_be32(img + 12, COLS);
    data_test_be32(lbl, 0x801);
    data_test_be32(lbl + 4, n);
    for (uint32_t i = 0; i < n; i++) {
        for (int y = 0; y < ROWS; y++)
            for (int x = 0; x < COLS; x++) img[16 + ((size_t)i * ROWS + (size_t)y) * COLS + (size_t)x] = pixel(i, y, x);
        lbl[8 + i] = label_of(i);
    }
    if (bad && strcmp(bad, "magic") == 0) img[3] = 0x02;
    if (bad && strcmp(bad, "truncated") == 0) image_bytes -= 5;
    if (bad && strcmp(bad, "trailing") == 0) img[image_bytes++] = 0;
    if (bad && strcmp(bad, "count") == 0) data_test_be32(lbl + 4, n - 1), label_bytes--;
    if (bad && strcmp(bad, "zero-rows") == 0) data_test_be32(img + 8, 0);
    char path[600];
    snprintf(path, sizeof(path), "%s/%s-images-idx3-ubyte%s", d, stem, gz ? ".gz" : "");
    CHECK(data_test_write(path, img, image_bytes, gz) == 0, "write %s", path);
    snprintf(path, sizeof(path), "%s/%s-labels-idx1-ubyte%s", d, stem, gz ? ".gz" : "");
    CHECK(data_test_write(path, lbl, label_bytes, gz) == 0, "write %s", path);
    free(img);
    free(lbl);
}

static tr_loader_config_t base_config(const char *path, tr_split_t split)
{
    tr_loader_config_t c = {.path = path,
                            .split = split,
                            .rank = 0,
                            .world = 1,
                            .batch = 8,
                            .seed = 1234,
                            .threads = 3,
                            .drop_last = split == TR_SPLIT_TRAIN,
                            .layout = TR_LAYOUT_NCHW,
                            .dtype = TR_DTYPE_F32};
    memcpy(c.mean, mean1, sizeof(c.mean));
    memcpy(c.std, std1, sizeof(c.std));
    return c;
}

static tr_loader_t *open_or_die(const tr_loader_config_t *c)
{
    tr_loader_t *l = NULL;
    hora_status_t status = tr_loader_open(c, &l);
    CHECK(status == HORA_OK, "tr_loader_open(%s): %d %s", c->path, status, status_message());
    if (status != HORA_OK) exit(1);
    return l;
}

static data_test_epoch_t run_epoch(const tr_loader_config_t *c, uint64_t epoch, uint64_t first)
{
    tr_loader_t *l = open_or_die(c);
    data_test_epoch_t e = data_test_collect(l, c->batch,
                                            c->dtype == TR_DTYPE_F16  ? 2
                                            : c->dtype == TR_DTYPE_U8 ? 1
                                                                      : 4,
                                            epoch, first);
    CHECK(e.status == HORA_OK, "epoch %" PRIu64 ": %s", epoch, status_message());
    tr_loader_close(l);
    return e;
}

/* The image index a plain (unaugmented NCHW f32) sample holds; -1 if the
 * sample is not exactly some image's normalised pixels. */
static long sample_index(const float *s, uint32_t n)
{
    for (long i = 0; i < (long)n; i++) {
        if (s[0] != norm(pixel((uint32_t)i, 0, 0)) || s[1] != norm(pixel((uint32_t)i, 0, 1))) continue;
        for (int y = 0; y < ROWS; y++)
            for (int x = 0; x < COLS; x++)
                if (s[y * COLS + x] != norm(pixel((uint32_t)i, y, x))) return -1;
        return i;
    }
    return -1;
}

/* The sample order of an epoch: indices, checking data and labels. */
static void epoch_indices(const data_test_epoch_t *e, uint32_t n, long *out, size_t *count)
{
    *count = 0;
    for (uint64_t s = 0; s < e->steps; s++)
        for (int j = 0; j < e->counts[s]; j++) {
            size_t k = s * (size_t)e->batch + (size_t)j;
            long i = sample_index(data_test_sample(e, k), n);
            CHECK(i >= 0, "step %" PRIu64 " sample %d is no image's exact normalised pixels", s, j);
            CHECK(i < 0 || e->labels[k] == label_of((uint32_t)i), "label %d for image %ld", e->labels[k], i);
            out[(*count)++] = i;
        }
}

static void test_train_order(void)
{
    tr_loader_config_t c = base_config(dir, TR_SPLIT_TRAIN);
    tr_loader_t *l = open_or_die(&c);
    tr_loader_info_t info;
    tr_loader_info(l, &info);
    CHECK(info.samples == N_TRAIN && info.classes == CLASSES && info.channels == 1 && info.height == ROWS &&
              info.width == COLS,
          "info: %" PRIu64 " samples, %d classes, %dx%dx%d", info.samples, info.classes, info.channels, info.height,
          info.width);
    CHECK(info.steps_per_epoch == N_TRAIN / 8, "steps %" PRIu64, info.steps_per_epoch);
    tr_batch_t *b = NULL;
    CHECK(tr_loader_next(l, &b) == HORA_ERR_INVALID_ARG, "next before start_epoch");
    tr_loader_close(l);

    long order0[N_TRAIN], order1[N_TRAIN], order_seed[N_TRAIN];
    size_t n0, n1, ns;
    data_test_epoch_t e0 = run_epoch(&c, 0, 0), e1 = run_epoch(&c, 1, 0);
    epoch_indices(&e0, N_TRAIN, order0, &n0);
    epoch_indices(&e1, N_TRAIN, order1, &n1);
    CHECK(n0 == (N_TRAIN / 8) * 8 && n1 == n0, "drop_last: %zu and %zu samples", n0, n1);
    int seen[N_TRAIN] = {0}, dup = 0;
    for (size_t k = 0; k < n0; k++) dup += order0[k] >= 0 && seen[order0[k]]++ > 0;
    CHECK(dup == 0, "%d samples twice in one epoch", dup);
    CHECK(memcmp(order0, order1, n0 * sizeof(long)) != 0, "epochs 0 and 1 in the same order");
    c.seed = 99;
    data_test_epoch_t es = run_epoch(&c, 0, 0);
    epoch_indices(&es, N_TRAIN, order_seed, &ns);
    CHECK(memcmp(order0, order_seed, n0 * sizeof(long)) != 0, "seeds 1234 and 99 agree");
    c.seed = 1234;

    /* Not a trivial shuffle: the identity order would pass the checks above. */
    int in_place = 0;
    for (size_t k = 0; k < n0; k++) in_place += order0[k] == (long)k;
    CHECK(in_place < 10, "%d samples at their own index", in_place);

    /* drop_last off: every sample once, a short last batch. */
    c.drop_last = 0;
    data_test_epoch_t ef = run_epoch(&c, 0, 0);
    long all[N_TRAIN];
    size_t nf;
    epoch_indices(&ef, N_TRAIN, all, &nf);
    CHECK(nf == N_TRAIN && ef.steps == (N_TRAIN + 7) / 8, "%zu samples in %" PRIu64 " steps", nf, ef.steps);
    CHECK(ef.counts[ef.steps - 1] == N_TRAIN % 8, "last count %d", ef.counts[ef.steps - 1]);
    for (int j = N_TRAIN % 8; j < 8; j++) {
        size_t k = (ef.steps - 1) * 8 + (size_t)j;
        const float *s = data_test_sample(&ef, k);
        int zero = 1;
        for (size_t v = 0; v < ef.sample_count; v++) zero &= s[v] == 0.0f;
        CHECK(ef.labels[k] == -1 && zero, "padding entry %d: label %d, zeroed %d", j, ef.labels[k], zero);
    }
    CHECK(memcmp(all, order0, n0 * sizeof(long)) == 0, "drop_last changed the order");
    c.drop_last = 1;

    data_test_epoch_free(&e0);
    data_test_epoch_free(&e1);
    data_test_epoch_free(&es);
    data_test_epoch_free(&ef);
}

static void test_threads_and_resume(void)
{
    /* With augmentation on, so that per-sample randomness is covered too. */
    tr_loader_config_t c = base_config(dir, TR_SPLIT_TRAIN);
    c.pad_crop = 2;
    c.flip = 1;
    c.threads = 1;
    c.prefetch = 1;
    data_test_epoch_t one = run_epoch(&c, 3, 0);
    size_t bytes = one.steps * 8 * one.sample_count * 4;
    for (int threads = 2; threads <= 8; threads *= 2) {
        c.threads = threads;
        c.prefetch = 0;
        data_test_epoch_t many = run_epoch(&c, 3, 0);
        CHECK(many.steps == one.steps && memcmp(many.data, one.data, bytes) == 0 &&
                  memcmp(many.labels, one.labels, one.steps * 8 * 4) == 0,
              "%d threads differ from 1 thread", threads);
        data_test_epoch_free(&many);
    }
    /* Resume at step 5 (and at the end: an empty epoch). */
    c.threads = 3;
    data_test_epoch_t rest = run_epoch(&c, 3, 5);
    size_t skip = 5 * 8;
    CHECK(rest.steps == one.steps - 5 &&
              memcmp(rest.data, one.data + skip * one.sample_count * 4, rest.steps * 8 * one.sample_count * 4) == 0 &&
              memcmp(rest.labels, one.labels + skip, rest.steps * 8 * 4) == 0,
          "resuming at step 5 differs");
    data_test_epoch_t none = run_epoch(&c, 3, one.steps);
    CHECK(none.steps == 0, "resume at the end gave %" PRIu64 " batches", none.steps);

    /* Restart in the middle of an epoch on the same loader, with batches
     * queued and one still held: the restarted epoch is still exact. */
    tr_loader_t *l = open_or_die(&c);
    tr_batch_t *held = NULL, *b = NULL;
    CHECK(tr_loader_start_epoch(l, 7, 0) == HORA_OK, "start");
    CHECK(tr_loader_next(l, &held) == HORA_OK && held, "first batch");
    CHECK(tr_loader_next(l, &b) == HORA_OK && b, "second batch");
    tr_loader_release(l, b);
    data_test_epoch_t again = data_test_collect(l, 8, 4, 3, 2);
    CHECK(again.status == HORA_OK && again.steps == one.steps - 2 &&
              memcmp(again.data, one.data + 16 * one.sample_count * 4, again.steps * 8 * one.sample_count * 4) == 0,
          "restart on a busy loader differs");
    tr_loader_release(l, held);
    CHECK(tr_loader_start_epoch(l, 0, one.steps + 1) == HORA_ERR_INVALID_ARG, "start past the end accepted");
    tr_loader_close(l);

    data_test_epoch_free(&one);
    data_test_epoch_free(&rest);
    data_test_epoch_free(&none);
    data_test_epoch_free(&again);
}

static void test_ranks(void)
{
    tr_loader_config_t c = base_config(dir, TR_SPLIT_TRAIN);
    data_test_epoch_t single = run_epoch(&c, 2, 0);
    long order[N_TRAIN];
    size_t n;
    /* The single-rank order with drop_last off covers the permutation. */
    c.drop_last = 0;
    data_test_epoch_t full = run_epoch(&c, 2, 0);
    epoch_indices(&full, N_TRAIN, order, &n);
    c.drop_last = 1;
    const int world = 3;
    int seen[N_TRAIN] = {0};
    uint64_t steps0 = 0;
    for (int r = 0; r < world; r++) {
        c.rank = r;
        c.world = world;
        data_test_epoch_t e = run_epoch(&c, 2, 0);
        long got[N_TRAIN];
        size_t m;
        epoch_indices(&e, N_TRAIN, got, &m);
        if (r == 0) steps0 = e.steps;
        CHECK(e.steps == steps0 && e.steps == (N_TRAIN / world) / 8, "rank %d: %" PRIu64 " steps", r, e.steps);
        for (size_t p = 0; p < m; p++) {
            size_t q = (size_t)r + (size_t)world * p;
            CHECK(q < n && got[p] == order[q], "rank %d sample %zu is %ld, expected %ld", r, p, got[p],
                  q < n ? order[q] : -1);
            if (got[p] >= 0) seen[got[p]]++;
        }
        data_test_epoch_free(&e);
    }
    for (int i = 0; i < N_TRAIN; i++) CHECK(seen[i] <= 1, "image %d on two ranks", i);
    data_test_epoch_free(&single);
    data_test_epoch_free(&full);

    /* Val: unshuffled, contiguous parts, all samples once, equal steps. */
    int val_seen[N_VAL] = {0};
    long next_expected = 0;
    for (int r = 0; r < world; r++) {
        tr_loader_config_t v = base_config(dir, TR_SPLIT_VAL);
        v.batch = 5;
        v.rank = r;
        v.world = world;
        v.flip = 1; /* ignored for val */
        v.pad_crop = 3;
        data_test_epoch_t e = run_epoch(&v, 4, 0);
        CHECK(e.steps == (uint64_t)((N_VAL + world - 1) / world + 4) / 5, "val rank %d: %" PRIu64 " steps", r, e.steps);
        long got[N_VAL];
        size_t m;
        epoch_indices(&e, N_VAL, got, &m);
        for (size_t p = 0; p < m; p++) {
            CHECK(got[p] == next_expected, "val rank %d sample %zu: %ld, expected %ld", r, p, got[p], next_expected);
            if (got[p] >= 0 && got[p] < N_VAL) val_seen[got[p]]++;
            next_expected++;
        }
        for (uint64_t s = 0; s < e.steps; s++)
            for (int j = e.counts[s]; j < 5; j++) CHECK(e.labels[s * 5 + (size_t)j] == -1, "val padding label");
        data_test_epoch_free(&e);
    }
    for (int i = 0; i < N_VAL; i++) CHECK(val_seen[i] == 1, "val image %d seen %d times", i, val_seen[i]);
}

static void test_layouts(void)
{
    tr_loader_config_t c = base_config(dir, TR_SPLIT_TRAIN);
    data_test_epoch_t nchw = run_epoch(&c, 5, 0);
    c.layout = TR_LAYOUT_NHWC;
    data_test_epoch_t nhwc = run_epoch(&c, 5, 0);
    c.layout = TR_LAYOUT_NCHW;
    c.dtype = TR_DTYPE_F16;
    data_test_epoch_t f16 = run_epoch(&c, 5, 0);
    size_t bad_nhwc = 0, bad_f16 = 0;
    for (size_t k = 0; k < nchw.steps * 8; k++) {
        const float *a = data_test_sample(&nchw, k), *b = data_test_sample(&nhwc, k);
        const uint16_t *h = (const uint16_t *)(f16.data + k * f16.sample_count * 2);
        for (size_t v = 0; v < nchw.sample_count; v++) {
            bad_nhwc += a[v] != b[v]; /* one channel: NCHW and NHWC agree */
            bad_f16 += h[v] != k_f32_to_f16(a[v]);
        }
    }
    CHECK(bad_nhwc == 0 && bad_f16 == 0, "NHWC: %zu, f16: %zu values differ", bad_nhwc, bad_f16);
    /* std 0: pixel / 255 only. */
    c.dtype = TR_DTYPE_F32;
    c.std[0] = 0;
    data_test_epoch_t raw = run_epoch(&c, 5, 0);
    long order[N_TRAIN];
    size_t n;
    epoch_indices(&nchw, N_TRAIN, order, &n);
    size_t bad_raw = 0;
    for (size_t k = 0; k < n; k++)
        for (int y = 0; y < ROWS; y++)
            for (int x = 0; x < COLS; x++)
                bad_raw += order[k] >= 0 &&
                           data_test_sample(&raw, k)[y * COLS + x] != (float)pixel((uint32_t)order[k], y, x) / 255.0f;
    CHECK(bad_raw == 0, "std 0: %zu values are not pixel / 255", bad_raw);
    data_test_epoch_free(&nchw);
    data_test_epoch_free(&nhwc);
    data_test_epoch_free(&f16);
    data_test_epoch_free(&raw);
}

/* u8 batches (for a backend that normalises on its device) in memory from
 * the caller's allocator: with augmentation that keeps pixels integral
 * (pad-and-crop, flip), the normalised u8 pixels are the f32 batches bit
 * for bit; every batch buffer comes from alloc and goes back through
 * dealloc; u8 in NCHW, or alloc without dealloc, is refused. */
static int allocs, deallocs;
static void *count_alloc(void *ctx, size_t bytes)
{
    CHECK(ctx == (void *)&allocs, "alloc: ctx %p", ctx);
    allocs++;
    return calloc(1, bytes);
}
static void count_dealloc(void *ctx, void *ptr)
{
    CHECK(ctx == (void *)&allocs, "dealloc: ctx %p", ctx);
    deallocs += ptr != NULL;
    free(ptr);
}

static void test_u8(void)
{
    tr_loader_config_t c = base_config(dir, TR_SPLIT_TRAIN);
    c.pad_crop = 2;
    c.flip = 1;
    data_test_epoch_t f32 = run_epoch(&c, 3, 0);
    c.dtype = TR_DTYPE_U8;
    c.layout = TR_LAYOUT_NHWC;
    c.alloc = count_alloc;
    c.dealloc = count_dealloc;
    c.alloc_ctx = &allocs;
    data_test_epoch_t u8 = run_epoch(&c, 3, 0);
    CHECK(allocs > 0 && allocs == deallocs, "alloc called %d times, dealloc %d", allocs, deallocs);
    CHECK(u8.steps == f32.steps && u8.sample_count == f32.sample_count, "u8: %zu steps of %zu, f32 %zu of %zu",
          (size_t)u8.steps, u8.sample_count, (size_t)f32.steps, f32.sample_count);
    size_t bad = 0;
    for (size_t k = 0; k < f32.steps * 8 && u8.steps == f32.steps; k++) {
        const uint8_t *q = u8.data + k * u8.sample_count;
        const float *a = data_test_sample(&f32, k);
        for (size_t v = 0; v < f32.sample_count; v++) bad += norm(q[v]) != a[v];
    }
    CHECK(bad == 0, "u8: %zu normalised pixels differ from the f32 batches", bad);
    tr_loader_t *l = NULL;
    c.layout = TR_LAYOUT_NCHW;
    CHECK(tr_loader_open(&c, &l) == HORA_ERR_INVALID_ARG, "u8 NCHW accepted");
    c.layout = TR_LAYOUT_NHWC;
    c.dealloc = NULL;
    CHECK(tr_loader_open(&c, &l) == HORA_ERR_INVALID_ARG, "alloc without dealloc accepted");
    data_test_epoch_free(&f32);
    data_test_epoch_free(&u8);
}

/* Augmented sample a against plain sample p: is a = p shifted by (dx, dy) -
 * pad with zero (normalised) fill, then mirrored when flip? */
static int matches_shift(const float *a, const float *p, int pad, int dx, int dy, int flip)
{
    for (int y = 0; y < ROWS; y++)
        for (int x = 0; x < COLS; x++) {
            int sx = (flip ? COLS - 1 - x : x) + dx - pad, sy = y + dy - pad;
            float want = sx >= 0 && sx < COLS && sy >= 0 && sy < ROWS ? p[sy * COLS + sx] : norm(0);
            if (a[y * COLS + x] != want) return 0;
        }
    return 1;
}

static void test_pad_crop_flip(void)
{
    const int pad = 2;
    tr_loader_config_t c = base_config(dir, TR_SPLIT_TRAIN);
    data_test_epoch_t plain = run_epoch(&c, 6, 0);
    c.flip = 1;
    data_test_epoch_t flipped = run_epoch(&c, 6, 0);
    c.pad_crop = pad;
    data_test_epoch_t both = run_epoch(&c, 6, 0);
    int flips = 0, unmatched_flip = 0, unmatched_pad = 0, offsets_seen[5][5] = {{0}};
    size_t n = plain.steps * 8;
    for (size_t k = 0; k < n; k++) {
        const float *p = data_test_sample(&plain, k);
        /* flip only: either identical or exactly mirrored */
        const float *f = data_test_sample(&flipped, k);
        int same = matches_shift(f, p, 0, 0, 0, 0), mirror = matches_shift(f, p, 0, 0, 0, 1);
        unmatched_flip += !same && !mirror;
        flips += mirror && !same;
        /* pad + flip: the flip decision is the same as without pad */
        const float *a = data_test_sample(&both, k);
        int found = 0;
        for (int dy = 0; dy <= 2 * pad && !found; dy++)
            for (int dx = 0; dx <= 2 * pad && !found; dx++)
                if (matches_shift(a, p, pad, dx, dy, mirror && !same)) {
                    offsets_seen[dy][dx]++;
                    found = 1;
                }
        unmatched_pad += !found;
    }
    CHECK(unmatched_flip == 0, "%d flipped samples are neither plain nor mirrored", unmatched_flip);
    CHECK(unmatched_pad == 0, "%d pad_crop samples match no offset", unmatched_pad);
    CHECK(flips > (int)n / 4 && flips < 3 * (int)n / 4, "%d of %zu flipped", flips, n);
    int distinct = 0;
    for (int dy = 0; dy < 5; dy++)
        for (int dx = 0; dx < 5; dx++) distinct += offsets_seen[dy][dx] > 0;
    CHECK(distinct >= 15, "only %d of 25 crop offsets occurred in %zu samples", distinct, n);
    data_test_epoch_free(&plain);
    data_test_epoch_free(&flipped);
    data_test_epoch_free(&both);
}

static void test_held_buffers_and_errors(void)
{
    tr_loader_config_t c = base_config(dir, TR_SPLIT_TRAIN);
    c.prefetch = 2;
    tr_loader_t *l = open_or_die(&c);
    tr_batch_t *a = NULL, *b = NULL, *x = NULL;
    CHECK(tr_loader_start_epoch(l, 0, 0) == HORA_OK, "start");
    CHECK(tr_loader_next(l, &a) == HORA_OK && a, "batch 0");
    CHECK(tr_loader_next(l, &b) == HORA_OK && b, "batch 1");
    CHECK(tr_loader_next(l, &x) == HORA_ERR_INVALID_ARG && x == NULL,
          "all buffers held: expected an error, not a hang");
    CHECK(strstr(status_message(), "held") != NULL, "message: %s", status_message());
    tr_loader_release(l, a);
    CHECK(tr_loader_next(l, &x) == HORA_OK && x && x->step == 2, "after a release");
    tr_loader_release(l, b);
    tr_loader_release(l, x);
    tr_loader_close(l);

    struct {
        const char *what;
        tr_loader_config_t config;
        hora_status_t want;
    } bad[8];
    int n = 0;
    bad[n].what = "batch 0", bad[n].config = base_config(dir, TR_SPLIT_TRAIN);
    bad[n].config.batch = 0, bad[n++].want = HORA_ERR_INVALID_ARG;
    bad[n].what = "rank >= world", bad[n].config = base_config(dir, TR_SPLIT_TRAIN);
    bad[n].config.rank = 2, bad[n].config.world = 2, bad[n++].want = HORA_ERR_INVALID_ARG;
    bad[n].what = "batch too large", bad[n].config = base_config(dir, TR_SPLIT_TRAIN);
    bad[n].config.batch = 200, bad[n++].want = HORA_ERR_INVALID_ARG;
    bad[n].what = "layout", bad[n].config = base_config(dir, TR_SPLIT_TRAIN);
    bad[n].config.layout = TR_LAYOUT_NCHW8C, bad[n++].want = HORA_ERR_INVALID_ARG;
    bad[n].what = "height only", bad[n].config = base_config(dir, TR_SPLIT_TRAIN);
    bad[n].config.height = 10, bad[n++].want = HORA_ERR_INVALID_ARG;
    bad[n].what = "no such dir", bad[n].config = base_config("/nonexistent/x", TR_SPLIT_TRAIN);
    bad[n++].want = HORA_ERR_SYSTEM;
    bad[n].what = "negative std", bad[n].config = base_config(dir, TR_SPLIT_TRAIN);
    bad[n].config.std[0] = -1, bad[n++].want = HORA_ERR_INVALID_ARG;
    for (int i = 0; i < n; i++) {
        tr_loader_t *l2 = NULL;
        hora_status_t status = tr_loader_open(&bad[i].config, &l2);
        CHECK(status == bad[i].want && l2 == NULL, "%s: status %d, expected %d", bad[i].what, status, bad[i].want);
        CHECK(status_message()[0] != '\0', "%s: no message", bad[i].what);
    }

    /* Broken IDX files: CORRUPT, naming the file. */
    const char *cases[] = {"magic", "truncated", "trailing", "count", "zero-rows"};
    for (int gz = 0; gz <= 1; gz++)
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
            char d[256];
            data_test_mkdtemp(d, sizeof(d), "test_loader_badidx");
            write_idx(d, "train", 20, gz, cases[k]);
            tr_loader_config_t bc = base_config(d, TR_SPLIT_TRAIN);
            bc.batch = 2;
            tr_loader_t *l2 = NULL;
            hora_status_t status = tr_loader_open(&bc, &l2);
            CHECK(status == HORA_ERR_CORRUPT && l2 == NULL && strstr(status_message(), d) != NULL,
                  "IDX %s (gz %d): status %d, message \"%s\"", cases[k], gz, status, status_message());
            data_test_rmtree(d);
        }
}

/* hora-mkrecord --from idx, then the loader on the shards: the same images
 * and labels, each once (the order differs: shards concatenate). */
static void test_raw_shards(void)
{
#ifdef HORA_MKRECORD
    char d[256];
    data_test_mkdtemp(d, sizeof(d), "test_loader_hrec");
    CHECK(data_test_sh("%s --from idx %s/train-images-idx3-ubyte.gz %s/train-labels-idx1-ubyte.gz %s/train --shards 3 "
                       ">/dev/null",
                       HORA_MKRECORD, dir, dir, d) == 0,
          "hora-mkrecord --from idx: the training shards");
    CHECK(data_test_sh("%s --from idx %s/t10k-images-idx3-ubyte %s/t10k-labels-idx1-ubyte %s/val --shards 2 >/dev/null",
                       HORA_MKRECORD, dir, dir, d) == 0,
          "hora-mkrecord --from idx: the validation shards");
    tr_loader_config_t c = base_config(d, TR_SPLIT_TRAIN);
    c.drop_last = 0;
    tr_loader_t *l = open_or_die(&c);
    tr_loader_info_t info;
    tr_loader_info(l, &info);
    CHECK(info.samples == N_TRAIN && info.classes == CLASSES && info.channels == 1 && info.height == ROWS &&
              info.width == COLS,
          "shards: %" PRIu64 " samples %d classes", info.samples, info.classes);
    data_test_epoch_t e = data_test_collect(l, 8, 4, 0, 0);
    tr_loader_close(l);
    long order[N_TRAIN];
    size_t n;
    epoch_indices(&e, N_TRAIN, order, &n);
    int seen[N_TRAIN] = {0};
    for (size_t k = 0; k < n; k++)
        if (order[k] >= 0) seen[order[k]]++;
    int once = 0;
    for (int i = 0; i < N_TRAIN; i++) once += seen[i] == 1;
    CHECK(n == N_TRAIN && once == N_TRAIN, "shards: %d of %d images exactly once", once, N_TRAIN);
    data_test_epoch_free(&e);

    /* Val: shard 0 holds inputs 0, 2, 4, ..., shard 1 inputs 1, 3, ... */
    tr_loader_config_t v = base_config(d, TR_SPLIT_VAL);
    data_test_epoch_t ev = run_epoch(&v, 0, 0);
    long vorder[N_VAL];
    size_t nv;
    epoch_indices(&ev, N_VAL, vorder, &nv);
    int in_order = nv == N_VAL;
    for (size_t k = 0; k < nv; k++) {
        long want = k < (N_VAL + 1) / 2 ? (long)(2 * k) : (long)(2 * (k - (N_VAL + 1) / 2) + 1);
        in_order &= vorder[k] == want;
    }
    CHECK(in_order, "val shards not in shard order");
    data_test_epoch_free(&ev);

    /* A missing shard is an error, not a smaller dataset. */
    CHECK(data_test_sh("rm %s/train-00001-of-00003.hrec", d) == 0, "rm");
    tr_loader_t *l2 = NULL;
    CHECK(tr_loader_open(&c, &l2) == HORA_ERR_CORRUPT && strstr(status_message(), "missing") != NULL,
          "missing shard: %s", status_message());
    data_test_rmtree(d);
#else
    printf("raw shard test skipped (HORA_MKRECORD not defined)\n");
#endif
}

static int test_fashion_mnist(void)
{
    const char *fm = "/usr/share/datasets/fashion-mnist";
    if (access(fm, R_OK) != 0) {
        printf("FAIL: %s missing (Debian package dataset-fashion-mnist; tools/setup installs it)\n", fm);
        return 1;
    }
    for (int split = 0; split < 2; split++) {
        tr_loader_config_t c = base_config(fm, split ? TR_SPLIT_VAL : TR_SPLIT_TRAIN);
        c.batch = 128;
        c.threads = 2;
        c.pad_crop = split ? 0 : 2;
        c.flip = !split;
        tr_loader_t *l = open_or_die(&c);
        tr_loader_info_t info;
        tr_loader_info(l, &info);
        uint64_t want = split ? 10000 : 60000;
        CHECK(info.samples == want && info.classes == 10 && info.channels == 1 && info.height == 28 && info.width == 28,
              "%s: %" PRIu64 " samples, %d classes, %dx%dx%d", split ? "t10k" : "train", info.samples, info.classes,
              info.channels, info.height, info.width);
        CHECK(info.steps_per_epoch == (split ? (want + 127) / 128 : want / 128), "steps %" PRIu64,
              info.steps_per_epoch);
        CHECK(tr_loader_start_epoch(l, 0, 0) == HORA_OK, "start");
        uint64_t label_counts[10] = {0}, batches = 0;
        double sum = 0;
        tr_batch_t *b;
        while (tr_loader_next(l, &b) == HORA_OK && b) {
            for (int j = 0; j < b->count; j++) {
                CHECK(b->labels[j] >= 0 && b->labels[j] < 10, "label %d", b->labels[j]);
                if (b->labels[j] >= 0 && b->labels[j] < 10) label_counts[b->labels[j]]++;
            }
            const float *x = b->data;
            for (size_t v = 0; v < (size_t)b->count * 784; v++) sum += x[v];
            batches++;
            tr_loader_release(l, b);
        }
        CHECK(batches == info.steps_per_epoch, "%" PRIu64 " batches", batches);
        /* Fashion-MNIST is balanced: 6000 / 1000 per class (train loses
         * 60000 mod 128 = 96 samples to drop_last). */
        for (int k = 0; k < 10; k++)
            CHECK(label_counts[k] > (split ? 999u : 5900u) && label_counts[k] <= want / 10, "class %d: %" PRIu64, k,
                  label_counts[k]);
        /* Normalised with its own mean/std (padding adds zeros: a bit below 0). */
        double mean = sum / ((double)batches * 128 * 784);
        CHECK(fabs(mean) < 0.15, "normalised mean %.4f", mean);
        CHECK(tr_loader_bad_count(l) == 0, "bad samples in Fashion-MNIST");
        printf("fashion-mnist %s: %" PRIu64 " batches, normalised mean %.4f\n", split ? "t10k" : "train", batches,
               mean);
        tr_loader_close(l);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--fashion-mnist") == 0) {
        int rc = test_fashion_mnist();
        printf("%d checks, %d failures\n", checks, failures);
        return failures ? 1 : rc;
    }
    data_test_mkdtemp(dir, sizeof(dir), "test_loader_idx");
    write_idx(dir, "train", N_TRAIN, 1, NULL);
    write_idx(dir, "t10k", N_VAL, 0, NULL);
    test_train_order();
    test_threads_and_resume();
    test_ranks();
    test_layouts();
    test_u8();
    test_pad_crop_flip();
    test_held_buffers_and_errors();
    test_raw_shards();
    data_test_rmtree(dir);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
