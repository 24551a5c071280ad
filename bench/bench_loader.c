/*
 * bench_loader.c - hora-bench-loader: images per second of the training
 * data loader (trainer/data/loader.h) with ImageNet train augmentation -
 * JPEG decode, random-resized crop to 224x224, flip, normalise, NCHW f32 -
 * for each loader thread count.
 *
 *   hora-bench-loader [--data DIR] [--threads 1,2,4] [--seconds S]
 *                     [--batch B] [--size N] [--images N] [--keep DIR]
 *                     [--json FILE]
 *
 * --data DIR: a dataset directory with train-*.hrec JPEG shards (from
 * hora-mkrecord). Without it, --images textured JPEGs of 500x375 to 800x600
 * (quality 90, ImageNet-like sizes) are generated with TurboJPEG into DIR/img
 * (an ImageFolder tree, 10 classes) and written as shards DIR/train-*.hrec,
 * in a temporary DIR, or --keep DIR which is kept (bench/loader-vs-torchvision
 * runs torchvision on the same files).
 *
 * Each thread count gets a fresh loader, one untimed batch (thread start,
 * first decodes), then batches for --seconds (epochs restart as needed).
 * Reported: images/s (wall), and CPU seconds of this process per image, so
 * a machine shared with other work still gives a comparable cost per image.
 *
 * Build: bench/meson.build (hora-bench-loader); links trainer/data only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/status.h"
#include "bench_cli.h"
#include "bench_output.h"
#include "jpeg.h"
#include "loader.h"
#include "record.h"

#define BENCH_MAX_THREAD_COUNTS 16
#define BENCH_CLASSES 10

typedef struct {
    const char *data;
    const char *keep;
    const char *json;
    int thread_counts[BENCH_MAX_THREAD_COUNTS];
    int thread_count_count;
    double seconds;
    int batch;
    int size;
    int images;
} bench_args_t;

typedef struct {
    int threads;
    uint64_t images;
    double wall_s;
    double cpu_s;
} bench_row_t;

/* ---- synthetic data set ---- */

static uint32_t hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    return x ^ (x >> 16);
}

/* A photo-like texture: smooth colour fields, edges and fine noise, so the
 * JPEG has the size and entropy-decoding cost of a real photo (~100 KB at
 * 500x375, quality 90) rather than of a flat test card. */
static void texture(uint8_t *p, int w, int h, uint32_t seed)
{
    float fx = 0.01f + (float)(hash32(seed) % 100) * 0.0004f;
    float fy = 0.01f + (float)(hash32(seed + 1) % 100) * 0.0004f;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t n = hash32(seed * 2654435761u + (uint32_t)(y * w + x));
            int stripe = ((x / 23 + y / 31) & 1) * 40;
            for (int c = 0; c < 3; c++) {
                float smooth =
                    127.0f + 90.0f * __builtin_sinf(fx * (float)x * (float)(c + 1) + fy * (float)y + (float)seed);
                int v = (int)smooth + stripe + (int)((n >> (8 * c)) & 31) - 16;
                p[((size_t)y * (size_t)w + (size_t)x) * 3 + (size_t)c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
}

static int make_dataset(const char *dir, int images)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/img", dir);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "hora-bench-loader: mkdir %s: %s\n", path, strerror(errno));
        return -1;
    }
    for (int k = 0; k < BENCH_CLASSES; k++) {
        snprintf(path, sizeof(path), "%s/img/class%02d", dir, k);
        mkdir(path, 0755);
    }
    /* Two shards, round-robin as hora-mkrecord writes them. */
    tr_record_writer_t *writers[2] = {NULL, NULL};
    for (int s = 0; s < 2; s++) {
        char base[4096];
        snprintf(base, sizeof(base), "%s/train", dir);
        if (tr_record_shard_name(base, (unsigned)s, 2, path, sizeof(path)) != HORA_OK ||
            tr_record_writer_open(path, &writers[s]) != HORA_OK) {
            fprintf(stderr, "hora-bench-loader: %s\n", status_message());
            return -1;
        }
    }
    uint8_t *pixels = malloc(800 * 600 * 3);
    uint64_t total_bytes = 0;
    int rc = pixels ? 0 : -1;
    for (int i = 0; i < images && rc == 0; i++) {
        /* 500x375 .. 800x600, a quarter of them portrait */
        int w = 500 + (int)(hash32((uint32_t)i * 3 + 7) % 301);
        int h = w * 3 / 4;
        if (i % 4 == 3) {
            int t = w;
            w = h;
            h = t;
        }
        texture(pixels, w, h, (uint32_t)i);
        uint8_t *jpeg = NULL;
        size_t bytes = 0;
        if (tr_jpeg_encode(pixels, w, h, 3, 90, &jpeg, &bytes) != HORA_OK) {
            fprintf(stderr, "hora-bench-loader: %s\n", status_message());
            rc = -1;
            break;
        }
        int label = i % BENCH_CLASSES;
        snprintf(path, sizeof(path), "%s/img/class%02d/%05d.jpg", dir, label, i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(jpeg, 1, bytes, f) != bytes || fclose(f) != 0) {
            fprintf(stderr, "hora-bench-loader: cannot write %s\n", path);
            rc = -1;
        }
        tr_record_t rec = {.label = label,
                           .kind = TR_PAYLOAD_KIND_JPEG,
                           .height = (uint32_t)h,
                           .width = (uint32_t)w,
                           .channels = 3,
                           .payload_bytes = bytes,
                           .payload = jpeg};
        if (rc == 0 && tr_record_writer_append(writers[i % 2], &rec) != HORA_OK) {
            fprintf(stderr, "hora-bench-loader: %s\n", status_message());
            rc = -1;
        }
        total_bytes += bytes;
        free(jpeg);
    }
    for (int s = 0; s < 2; s++)
        if (writers[s] && tr_record_writer_close(writers[s]) != HORA_OK) rc = -1;
    free(pixels);
    if (rc == 0)
        printf("# generated %d JPEGs (%.1f KB average) in %s/img and %s/train-*.hrec\n", images,
               (double)total_bytes / images / 1024.0, dir, dir);
    return rc;
}

/* ---- measurement ---- */

static int bench_threads(const bench_args_t *a, const char *data, int threads, bench_row_t *row)
{
    tr_loader_config_t c = {.path = data,
                            .split = TR_SPLIT_TRAIN,
                            .rank = 0,
                            .world = 1,
                            .batch = a->batch,
                            .seed = 1,
                            .threads = threads,
                            .height = a->size,
                            .width = a->size,
                            .drop_last = 1,
                            .layout = TR_LAYOUT_NCHW,
                            .dtype = TR_DTYPE_F32,
                            .flip = 1,
                            .random_resized_crop = 1,
                            .mean = {0.485f, 0.456f, 0.406f},
                            .std = {0.229f, 0.224f, 0.225f}};
    tr_loader_t *loader;
    if (tr_loader_open(&c, &loader) != HORA_OK) {
        fprintf(stderr, "hora-bench-loader: %s\n", status_message());
        return -1;
    }
    uint64_t epoch = 0, images = 0;
    int warm = 0;
    double t0 = 0, c0 = 0;
    hora_status_t status = tr_loader_start_epoch(loader, epoch, 0);
    while (status == HORA_OK) {
        tr_batch_t *b;
        status = tr_loader_next(loader, &b);
        if (status != HORA_OK) break;
        if (!b) {
            status = tr_loader_start_epoch(loader, ++epoch, 0);
            continue;
        }
        if (!warm) {
            warm = 1; /* the first batch pays for thread start-up */
            t0 = bench_wall_s();
            c0 = bench_cpu_s();
        } else {
            images += (uint64_t)b->count;
        }
        tr_loader_release(loader, b);
        if (warm && bench_wall_s() - t0 >= a->seconds) break;
    }
    row->threads = threads;
    row->images = images;
    row->wall_s = bench_wall_s() - t0;
    row->cpu_s = bench_cpu_s() - c0;
    if (status != HORA_OK) fprintf(stderr, "hora-bench-loader: %s\n", status_message());
    if (tr_loader_bad_count(loader) > 0)
        fprintf(stderr, "hora-bench-loader: %" PRIu64 " bad samples\n", tr_loader_bad_count(loader));
    tr_loader_close(loader);
    return status == HORA_OK ? 0 : -1;
}

/* The CPUs this process may run on (its affinity mask: what mpirun or
 * taskset left it), as hora-train's default threads count them. */
static long affinity_cpus(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? online : 1;
}

static bench_cli_result_t parse_args(int argc, char **argv, bench_args_t *a)
{
    *a = (bench_args_t){.data = NULL};
    const long cpus = affinity_cpus();
    for (int t = 1; t <= cpus && a->thread_count_count < BENCH_MAX_THREAD_COUNTS; t *= 2)
        a->thread_counts[a->thread_count_count++] = t;
    const bench_cli_option_t table[] = {
        {.long_name = "data",
         .kind = BENCH_CLI_STRING,
         .dest = &a->data,
         .value_name = "DIR",
         .help = "a dataset directory with JPEG shards DIR/train-*.hrec (hora-mkrecord); without it, --images "
                 "synthetic JPEGs are generated"},
        {.long_name = "threads",
         .kind = BENCH_CLI_INT,
         .dest = a->thread_counts,
         .list_count = &a->thread_count_count,
         .list_max = BENCH_MAX_THREAD_COUNTS,
         .min = 1,
         .max = 256,
         .value_name = "LIST",
         .default_note = "1,2,4,... up to the CPUs of this process's affinity mask",
         .help = "loader thread counts, one row each"},
        {.long_name = "seconds",
         .kind = BENCH_CLI_DOUBLE,
         .dest = &a->seconds,
         .value = "5",
         .min = 0,
         .max = 3600,
         .open_min = 1,
         .value_name = "S",
         .help = "timed seconds per row"},
        {.long_name = "batch",
         .kind = BENCH_CLI_INT,
         .dest = &a->batch,
         .value = "32",
         .min = 1,
         .max = 1000000,
         .value_name = "B",
         .help = "images per batch"},
        {.long_name = "size",
         .kind = BENCH_CLI_INT,
         .dest = &a->size,
         .value = "224",
         .min = 1,
         .max = 1000000,
         .value_name = "N",
         .help = "the crop's side (N x N)"},
        {.long_name = "images",
         .kind = BENCH_CLI_INT,
         .dest = &a->images,
         .value = "500",
         .min = 1,
         .max = 1000000,
         .value_name = "N",
         .help = "synthetic JPEGs to generate without --data"},
        {.long_name = "keep",
         .kind = BENCH_CLI_STRING,
         .dest = &a->keep,
         .value_name = "DIR",
         .default_note = "a temporary directory, removed",
         .help = "where the synthetic images go (kept)"},
        BENCH_CLI_JSON(&a->json, "write the rows as JSON"),
        {0},
    };
    const bench_cli_t cli = {
        .program = "hora-bench-loader",
        .synopsis = "hora-bench-loader [flags]",
        .about = "Images/s of the loader with train augmentation (random-resized crop, flip, normalise) on JPEG "
                 "shards.",
        .options = table,
    };
    bench_cli_result_t result = bench_cli_parse(&cli, argc, argv);
    if (result != BENCH_CLI_RUN) return result;
    if (a->thread_count_count == 0) a->thread_counts[a->thread_count_count++] = 1;
    int most = 0;
    for (int i = 0; i < a->thread_count_count; i++) most = a->thread_counts[i] > most ? a->thread_counts[i] : most;
    if (most > cpus)
        fprintf(stderr,
                "hora-bench-loader: warning: --threads %d is more than the %ld CPU%s this process may run on "
                "(its affinity mask); those rows time threads taking turns on the cores, not the loader's scaling. "
                "Fix: run it outside mpirun's binding (or `mpirun --bind-to none`, `taskset`), or stop the list at "
                "%ld\n",
                most, cpus, cpus == 1 ? "" : "s", cpus);
    return BENCH_CLI_RUN;
}

int main(int argc, char **argv)
{
    bench_args_t a;
    bench_cli_result_t parsed = parse_args(argc, argv, &a);
    if (parsed != BENCH_CLI_RUN) return parsed;
    char tmp[] = "/tmp/hora-bench-loader.XXXXXX";
    const char *data = a.data;
    int remove_tmp = 0;
    if (!data) {
        if (a.keep) {
            if (mkdir(a.keep, 0755) != 0 && errno != EEXIST) {
                fprintf(stderr, "hora-bench-loader: mkdir %s: %s\n", a.keep, strerror(errno));
                return 1;
            }
            data = a.keep;
        } else {
            if (!mkdtemp(tmp)) {
                perror("hora-bench-loader: mkdtemp");
                return 1;
            }
            data = tmp;
            remove_tmp = 1;
        }
        if (make_dataset(data, a.images) != 0) return 1;
    }
    printf("# hora-bench-loader: %s, batch %d, %dx%d, random-resized crop + flip + normalise, "
           "NCHW f32, %.1f s per row\n",
           data, a.batch, a.size, a.size, a.seconds);
    static const bench_column_t columns[] = {
        {.name = "threads", .width = 8},   {.name = "images", .width = 10},       {.name = "wall_s", .width = 10},
        {.name = "images/s", .width = 12}, {.name = "images/s/thr", .width = 14}, {.name = "cpu_ms/image", .width = 14},
    };
    bench_table_t table = {.out = stdout, .columns = columns, .column_count = 6, .indent = ""};
    bench_table_header(&table);
    bench_row_t rows[BENCH_MAX_THREAD_COUNTS];
    int rc = 0, row_count = 0;
    for (int i = 0; i < a.thread_count_count && rc == 0; i++) {
        bench_row_t *r = &rows[row_count];
        if (bench_threads(&a, data, a.thread_counts[i], r) != 0) {
            rc = 1;
            break;
        }
        row_count++;
        double rate = r->images / r->wall_s;
        bench_table_cell(&table, "%d", r->threads);
        bench_table_cell(&table, "%" PRIu64, r->images);
        bench_table_number(&table, r->wall_s, "%.2f");
        bench_table_number(&table, rate, "%.1f");
        bench_table_number(&table, rate / r->threads, "%.1f");
        bench_table_number(&table, 1e3 * r->cpu_s / (double)r->images, "%.2f");
        bench_table_end_row(&table);
    }
    bench_json_t json;
    if (a.json && row_count > 0) {
        if (bench_json_open(&json, "hora-bench-loader", a.json, 2) != 0) {
            rc = 1;
        } else {
            bench_json_object(&json, NULL);
            bench_json_string(&json, "bench", "loader");
            bench_json_string(&json, "data", data);
            bench_json_integer(&json, "batch", a.batch);
            bench_json_integer(&json, "size", a.size);
            bench_json_string(&json, "augment", "random_resized_crop+flip+normalize");
            bench_json_array(&json, "rows");
            for (int i = 0; i < row_count; i++) {
                bench_json_object(&json, NULL);
                bench_json_integer(&json, "threads", rows[i].threads);
                bench_json_integer(&json, "images", (long long)rows[i].images);
                bench_json_number(&json, "wall_s", "%.4f", rows[i].wall_s, 1);
                bench_json_number(&json, "images_per_s", "%.2f", rows[i].images / rows[i].wall_s, 1);
                bench_json_number(&json, "cpu_s", "%.4f", rows[i].cpu_s, 1);
                bench_json_end(&json);
            }
            if (bench_json_close(&json, "hora-bench-loader", a.json) != 0) rc = 1;
        }
    }
    if (remove_tmp) {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
        if (system(cmd) != 0) fprintf(stderr, "hora-bench-loader: could not remove %s\n", tmp);
    }
    return rc;
}
