/*
 * hora-mkrecord - convert datasets to hora record shards (.hrec) and verify them.
 *
 *   hora-mkrecord --from idx IMAGES LABELS OUT_PREFIX [--shards N]
 *       MNIST / Fashion-MNIST IDX files (gzip-compressed or not).
 *   hora-mkrecord --from folder DIR OUT_PREFIX [JPEG options]
 *       ImageFolder (ImageNet train layout): DIR/<class>/<image>.JPEG; class
 *       labels are the class directories in sorted order, 0-based.
 *   hora-mkrecord --from val DIR LABELS_FILE OUT_PREFIX [JPEG options]
 *       Flat directory + a text file of "FILENAME LABEL" lines (LABEL 0-based).
 *   hora-mkrecord --verify [--strict] FILE...
 *       Reread every record, check every CRC; exit 1 on any bad record.
 *   JPEG options: --shards N, --strict, --resize-shorter N, --quality Q,
 *       --workers N.
 *
 * Shards are OUT_PREFIX-00000-of-0000N.hrec; record i of the input (in input
 * order) goes to shard i mod N (round-robin), so every shard sees every class.
 * The loader looks for DIR/train-*.hrec and DIR/val-*.hrec, so OUT_PREFIX is
 * DIR/train or DIR/val. OUT_PREFIX.classes lists "LABEL COUNT [NAME]".
 * OUT_PREFIX's folder and its missing parents are created (like mkdir -p).
 * JPEGs are stored as-is (payload kind JPEG; shape from the JPEG header), or
 * with --resize-shorter N shrunk so the shorter side is N and re-encoded.
 * Workers convert files in parallel; records are still written in input
 * order, so the output does not depend on --workers. Bad input files are
 * reported and skipped (fatal with --strict). A progress bar goes to stderr
 * on a terminal, a summary of classes and counts to stdout.
 *
 * Build: part of the meson project (tools/), on trainer/data: gzipped IDX
 * input needs zlib there, JPEG input libturbojpeg (each refused without).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <pthread.h>

#include "base/status.h"
#include "gz.h"
#include "jpeg.h"
#include "record.h"

#define MKRECORD_MAX_SHARDS 100000u

typedef struct {
    unsigned shard_count;
    tr_record_writer_t **writers; /* (shard_count) */
    uint64_t written_count;
    uint64_t skipped_count;
    uint64_t *class_counts; /* (class_capacity) records per label */
    size_t class_capacity;
    int strict;
    int resize_shorter; /* JPEG: shrink so the shorter side is this (0 = store as-is) */
    int quality;        /* JPEG quality of re-encoded images */
    int workers;        /* JPEG conversion threads */
    char **class_names; /* folder: the class directories, by label (class_name_count) */
    size_t class_name_count;
    uint64_t total_hint; /* for the progress bar; 0 = unknown */
    unsigned progress_shown;
} mkrecord_t;

/* ---- progress bar (stderr, only on a terminal) ---- */

static void progress_update(mkrecord_t *m, uint64_t done)
{
    if (m->total_hint == 0 || !isatty(STDERR_FILENO)) return;
    unsigned pct = (unsigned)(done * 100 / m->total_hint);
    if (pct == m->progress_shown && done != m->total_hint) return;
    m->progress_shown = pct;
    char bar[41];
    unsigned filled = pct * 40 / 100;
    for (unsigned i = 0; i < 40; i++) bar[i] = i < filled ? '#' : ' ';
    bar[40] = '\0';
    fprintf(stderr, "\r[%s] %3u%% %" PRIu64 "/%" PRIu64, bar, pct, done, m->total_hint);
    if (done == m->total_hint) fputc('\n', stderr);
}

/* ---- records per label ---- */

/* Records per label: make (*counts)[label] exist, new entries 0, capacity
 * doubling from 256. 0, or -1 (nothing changed) when out of memory. */
static int class_counts_cover(uint64_t **counts, size_t *capacity, size_t label)
{
    if (label < *capacity) return 0;
    size_t grown_capacity = *capacity ? *capacity : 256;
    while (grown_capacity <= label) grown_capacity *= 2;
    uint64_t *grown = realloc(*counts, grown_capacity * sizeof(*grown));
    if (!grown) return -1;
    memset(grown + *capacity, 0, (grown_capacity - *capacity) * sizeof(*grown));
    *counts = grown;
    *capacity = grown_capacity;
    return 0;
}

/* ---- writing ---- */

/* One level of make_prefix_dirs: level (a leading part of folder, or all
 * of it) is a directory afterwards, or an error names both. */
static int make_dir_level(const char *level, const char *folder)
{
    if (mkdir(level, 0777) == 0) return 0;
    int mkdir_errno = errno;
    struct stat st;
    if (mkdir_errno == EEXIST && stat(level, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    const char *why = mkdir_errno == EEXIST ? "exists and is not a directory" : strerror(mkdir_errno);
    if (strcmp(level, folder) == 0)
        fprintf(stderr, "hora-mkrecord: cannot create directory %s: %s\n", folder, why);
    else
        fprintf(stderr, "hora-mkrecord: cannot create directory %s: %s: %s\n", folder, level, why);
    return -1;
}

/* The folder OUT_PREFIX's files go into, and its missing parents, like
 * mkdir -p: "out/fmnist/train" makes out/, then out/fmnist/. Existing
 * folders are fine; a file in the way or a failing mkdir (permission, ...)
 * is an error that names the path. */
static int make_prefix_dirs(const char *prefix)
{
    char *dir = strdup(prefix), *folder = strdup(prefix);
    if (!dir || !folder) {
        fprintf(stderr, "hora-mkrecord: out of memory\n");
        free(dir);
        free(folder);
        return -1;
    }
    char *last_slash = strrchr(dir, '/');
    size_t dir_bytes = last_slash ? (size_t)(last_slash - dir) : 0;
    folder[dir_bytes] = '\0';
    int rc = 0;
    /* A level ends at each '/' (not at a leading one, nor the second of
     * "a//b") and at the end of the folder's name. */
    for (size_t i = 1; i <= dir_bytes && rc == 0; i++) {
        if ((i < dir_bytes && dir[i] != '/') || dir[i - 1] == '/') continue;
        char saved = dir[i];
        dir[i] = '\0';
        rc = make_dir_level(dir, folder);
        dir[i] = saved;
    }
    free(folder);
    free(dir);
    return rc;
}

static int mkrecord_open(mkrecord_t *m, const char *prefix)
{
    if (make_prefix_dirs(prefix) != 0) return -1;
    m->writers = calloc(m->shard_count, sizeof(*m->writers));
    if (!m->writers) return -1;
    for (unsigned s = 0; s < m->shard_count; s++) {
        char path[4096];
        if (tr_record_shard_name(prefix, s, m->shard_count, path, sizeof(path)) != HORA_OK ||
            tr_record_writer_open(path, &m->writers[s]) != HORA_OK) {
            fprintf(stderr, "hora-mkrecord: %s\n", status_message());
            return -1;
        }
    }
    return 0;
}

static int mkrecord_append(mkrecord_t *m, const tr_record_t *rec)
{
    if (rec->label < 0) {
        fprintf(stderr, "hora-mkrecord: negative label %d\n", rec->label);
        return -1;
    }
    if (class_counts_cover(&m->class_counts, &m->class_capacity, (size_t)rec->label) != 0) {
        fprintf(stderr, "hora-mkrecord: out of memory\n");
        return -1;
    }
    tr_record_writer_t *w = m->writers[m->written_count % m->shard_count];
    if (tr_record_writer_append(w, rec) != HORA_OK) {
        fprintf(stderr, "hora-mkrecord: %s\n", status_message());
        return -1;
    }
    m->class_counts[rec->label]++;
    m->written_count++;
    return 0;
}

/* PREFIX.classes: "LABEL COUNT [NAME]" per label present, so the loader
 * knows the class count without reading every record header. */
static int write_classes_file(const mkrecord_t *m, const char *prefix)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s.classes", prefix) >= (int)sizeof(path)) return -1;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "hora-mkrecord: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "# label records [name] - written by hora-mkrecord\n");
    for (size_t c = 0; c < m->class_capacity; c++) {
        if (m->class_counts[c] == 0) continue;
        fprintf(f, "%zu %" PRIu64, c, m->class_counts[c]);
        if (c < m->class_name_count) fprintf(f, " %s", m->class_names[c]);
        fputc('\n', f);
    }
    return fclose(f) == 0 ? 0 : -1;
}

static int mkrecord_close(mkrecord_t *m, const char *prefix)
{
    int rc = 0;
    for (unsigned s = 0; m->writers && s < m->shard_count; s++) {
        if (m->writers[s] && tr_record_writer_close(m->writers[s]) != HORA_OK) {
            fprintf(stderr, "hora-mkrecord: %s\n", status_message());
            rc = -1;
        }
    }
    if (m->writers && rc == 0 && m->written_count > 0 && write_classes_file(m, prefix) != 0) rc = -1;
    free(m->writers);
    m->writers = NULL;
    return rc;
}

static void print_class_summary(const uint64_t *counts, size_t capacity)
{
    size_t classes = 0;
    for (size_t c = 0; c < capacity; c++) classes += counts[c] > 0;
    printf("%zu classes\n", classes);
    printf("%8s %10s\n", "label", "records");
    for (size_t c = 0; c < capacity; c++)
        if (counts[c] > 0) printf("%8zu %10" PRIu64 "\n", c, counts[c]);
}

static void mkrecord_summary(const mkrecord_t *m, const char *prefix)
{
    printf("wrote %" PRIu64 " records into %u shard(s) %s-*-of-%05u.hrec", m->written_count, m->shard_count, prefix,
           m->shard_count);
    if (m->skipped_count) printf(", skipped %" PRIu64 " bad input(s)", m->skipped_count);
    printf("\n");
    print_class_summary(m->class_counts, m->class_capacity);
}

/* ---- IDX (MNIST / Fashion-MNIST) ---- */

static int gz_read_exact(tr_gz_t *f, void *buf, size_t bytes)
{
    size_t done = 0;
    while (done < bytes) {
        size_t n;
        if (tr_gz_read(f, (uint8_t *)buf + done, bytes - done, &n) != HORA_OK || n == 0) return -1;
        done += n;
    }
    return 0;
}

static int idx_read_header(tr_gz_t *f, const char *path, uint32_t want_magic, uint32_t *dims, unsigned dim_count)
{
    uint8_t b[4 * 4];
    if (gz_read_exact(f, b, 4 * (1 + dim_count)) != 0) {
        fprintf(stderr, "hora-mkrecord: %s: offset 0: file ends inside the IDX header\n", path);
        return -1;
    }
    uint32_t magic = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    if (magic != want_magic) {
        fprintf(stderr, "hora-mkrecord: %s: offset 0: IDX magic 0x%08x, expected 0x%08x\n", path, magic, want_magic);
        return -1;
    }
    for (unsigned d = 0; d < dim_count; d++) {
        const uint8_t *p = b + 4 * (1 + d);
        dims[d] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    }
    return 0;
}

static int convert_idx(mkrecord_t *m, const char *images_path, const char *labels_path, const char *prefix)
{
    int rc = -1;
    uint8_t *image = NULL;
    tr_gz_t *images = NULL, *labels = NULL; /* plain files read the same way */
    if (tr_gz_open(images_path, &images) != HORA_OK || tr_gz_open(labels_path, &labels) != HORA_OK) {
        fprintf(stderr, "hora-mkrecord: %s\n", status_message());
        goto out;
    }
    uint32_t idims[3], ldims[1];
    if (idx_read_header(images, images_path, 0x00000803u, idims, 3) != 0 ||
        idx_read_header(labels, labels_path, 0x00000801u, ldims, 1) != 0)
        goto out;
    if (idims[0] != ldims[0]) {
        fprintf(stderr, "hora-mkrecord: %s has %u images but %s has %u labels\n", images_path, idims[0], labels_path,
                ldims[0]);
        goto out;
    }
    uint64_t image_bytes = (uint64_t)idims[1] * idims[2];
    if (image_bytes == 0 || image_bytes > (1u << 24)) {
        fprintf(stderr, "hora-mkrecord: %s: offset 8: implausible image size %ux%u\n", images_path, idims[1], idims[2]);
        goto out;
    }
    image = malloc((size_t)image_bytes);
    if (!image || mkrecord_open(m, prefix) != 0) goto out;
    m->total_hint = idims[0];
    for (uint32_t i = 0; i < idims[0]; i++) {
        uint8_t label;
        if (gz_read_exact(images, image, (size_t)image_bytes) != 0) {
            fprintf(stderr, "hora-mkrecord: %s: offset %" PRIu64 ": truncated at image %u\n", images_path,
                    16 + (uint64_t)i * image_bytes, i);
            goto out;
        }
        if (gz_read_exact(labels, &label, 1) != 0) {
            fprintf(stderr, "hora-mkrecord: %s: offset %" PRIu64 ": truncated at label %u\n", labels_path,
                    8 + (uint64_t)i, i);
            goto out;
        }
        tr_record_t rec = {.label = label,
                           .kind = TR_PAYLOAD_KIND_RAW_U8,
                           .height = idims[1],
                           .width = idims[2],
                           .channels = 1,
                           .payload_bytes = image_bytes,
                           .payload = image};
        if (mkrecord_append(m, &rec) != 0) goto out;
        progress_update(m, i + 1);
    }
    rc = 0;
out:
    if (mkrecord_close(m, prefix) != 0) rc = -1;
    free(image);
    tr_gz_close(images);
    tr_gz_close(labels);
    if (rc == 0) mkrecord_summary(m, prefix);
    return rc;
}

/* ---- JPEG folders ---- */

typedef struct {
    char *path;
    int32_t label;
} input_file_t;

/* The input files of a conversion, in input order. */
typedef struct {
    input_file_t *files; /* (count) */
    size_t count;
    size_t capacity;
} input_list_t;

/* Append (path, label), taking ownership of path; a NULL path is an
 * allocation that failed. 0, or -1 when out of memory. */
static int input_list_add(input_list_t *list, char *path, int32_t label)
{
    if (!path) {
        fprintf(stderr, "hora-mkrecord: out of memory\n");
        return -1;
    }
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? 2 * list->capacity : 1024;
        input_file_t *grown = realloc(list->files, capacity * sizeof(*grown));
        if (!grown) {
            fprintf(stderr, "hora-mkrecord: out of memory\n");
            free(path);
            return -1;
        }
        list->files = grown;
        list->capacity = capacity;
    }
    list->files[list->count++] = (input_file_t){.path = path, .label = label};
    return 0;
}

static void input_list_free(input_list_t *list)
{
    for (size_t i = 0; i < list->count; i++) free(list->files[i].path);
    free(list->files);
    *list = (input_list_t){0};
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names of the entries of dir that are directories (want_dirs) or
 * regular files. */
static char **list_dir(const char *dir, int want_dirs, size_t *count_out)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "hora-mkrecord: cannot open directory %s: %s\n", dir, strerror(errno));
        return NULL;
    }
    char **names = NULL;
    size_t count = 0, capacity = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        struct stat st;
        if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path) || stat(path, &st) != 0)
            continue;
        if (want_dirs ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) continue;
        if (count == capacity) {
            capacity = capacity ? 2 * capacity : 256;
            char **grown = realloc(names, capacity * sizeof(*names));
            if (!grown) break;
            names = grown;
        }
        names[count] = strdup(e->d_name);
        if (names[count]) count++;
    }
    closedir(d);
    if (count) qsort(names, count, sizeof(*names), cmp_str);
    *count_out = count;
    return names ? names : calloc(1, sizeof(*names));
}

static void free_names(char **names, size_t count)
{
    for (size_t i = 0; names && i < count; i++) free(names[i]);
    free(names);
}

static int read_file(const char *path, uint8_t **buf_out, size_t *bytes_out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size <= 0 || (uint64_t)st.st_size > TR_RECORD_MAX_PAYLOAD_BYTES) {
        fclose(f);
        return -1;
    }
    uint8_t *buf = malloc((size_t)st.st_size);
    if (!buf || fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    *buf_out = buf;
    *bytes_out = (size_t)st.st_size;
    return 0;
}

/* ---- JPEG inputs, converted by a pool of workers ----
 *
 * Workers take input files in order (next_claim) and leave each result in
 * a window of `window` slots; the main thread writes results strictly in
 * input order, so the shards are the same for any --workers. A worker may
 * run at most `window` files ahead of the writer, which bounds memory. */

typedef struct {
    int done;
    int bad; /* unreadable / not a JPEG: skipped (fatal with --strict) */
    char message[600];
    uint8_t *bytes; /* the record payload (malloc'd) */
    size_t size;
    int width, height, channels;
} convert_result_t;

typedef struct {
    mkrecord_t *m;
    const input_file_t *files;
    size_t count;
    size_t next_claim;
    size_t written; /* results taken by the writer */
    size_t window;
    convert_result_t *results; /* (window), file i in slot i % window */
    int stop;                  /* the writer failed: workers quit */
    pthread_mutex_t lock;
    pthread_cond_t cond;
} convert_pool_t;

/* Read, check (header; with --resize-shorter decode, shrink and re-encode)
 * one file into r. */
static void convert_one(const mkrecord_t *m, tr_jpeg_t *jpeg, const char *path, convert_result_t *r)
{
    uint8_t *buf = NULL;
    size_t bytes = 0;
    memset(r, 0, sizeof(*r));
    if (read_file(path, &buf, &bytes) != 0) {
        snprintf(r->message, sizeof(r->message), "%s: cannot read: %s", path, strerror(errno));
        r->bad = 1;
        return;
    }
    int width, height, channels;
    if (tr_jpeg_header(jpeg, buf, bytes, &width, &height, &channels) != HORA_OK) {
        snprintf(r->message, sizeof(r->message), "%s: offset 0: not a readable JPEG: %s", path, status_message());
        r->bad = 1;
        free(buf);
        return;
    }
    r->width = width;
    r->height = height;
    r->channels = channels;
    if (m->resize_shorter > 0) {
        uint8_t *resized = NULL;
        size_t resized_bytes = 0;
        if (tr_jpeg_resize_shorter(jpeg, buf, bytes, m->resize_shorter, m->quality, &resized, &resized_bytes, &r->width,
                                   &r->height) != HORA_OK) {
            snprintf(r->message, sizeof(r->message), "%s: cannot resize: %s", path, status_message());
            r->bad = 1;
            free(buf);
            return;
        }
        if (resized) {
            free(buf);
            buf = resized;
            bytes = resized_bytes;
            r->channels = 3;
        }
    }
    r->bytes = buf;
    r->size = bytes;
}

static void *convert_worker(void *arg)
{
    convert_pool_t *pool = arg;
    tr_jpeg_t *jpeg = NULL;
    if (tr_jpeg_init(0, pool->m->strict, &jpeg) != HORA_OK) {
        fprintf(stderr, "hora-mkrecord: %s\n", status_message());
        pthread_mutex_lock(&pool->lock);
        pool->stop = 1;
        pthread_cond_broadcast(&pool->cond);
        pthread_mutex_unlock(&pool->lock);
        return NULL;
    }
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (!pool->stop && pool->next_claim < pool->count && pool->next_claim >= pool->written + pool->window)
            pthread_cond_wait(&pool->cond, &pool->lock);
        if (pool->stop || pool->next_claim >= pool->count) break;
        size_t i = pool->next_claim++;
        pthread_mutex_unlock(&pool->lock);
        convert_result_t r;
        convert_one(pool->m, jpeg, pool->files[i].path, &r);
        pthread_mutex_lock(&pool->lock);
        r.done = 1;
        pool->results[i % pool->window] = r;
        pthread_cond_broadcast(&pool->cond);
    }
    pthread_mutex_unlock(&pool->lock);
    tr_jpeg_free(jpeg);
    return NULL;
}

/* Write file i's result (main thread, in input order). */
static int convert_write(mkrecord_t *m, const input_file_t *file, convert_result_t *r)
{
    if (r->bad) {
        fprintf(stderr, "hora-mkrecord: %s%s\n", r->message, m->strict ? "" : " (skipped)");
        m->skipped_count++;
        return m->strict ? -1 : 0;
    }
    tr_record_t rec = {.label = file->label,
                       .kind = TR_PAYLOAD_KIND_JPEG,
                       .height = (uint32_t)r->height,
                       .width = (uint32_t)r->width,
                       .channels = (uint32_t)r->channels,
                       .payload_bytes = r->size,
                       .payload = r->bytes};
    return mkrecord_append(m, &rec);
}

static int convert_files(mkrecord_t *m, input_file_t *files, size_t count, const char *prefix)
{
    if (!tr_jpeg_available()) {
        fprintf(stderr, "hora-mkrecord: built without libturbojpeg; JPEG inputs unsupported\n");
        return -1;
    }
    if (mkrecord_open(m, prefix) != 0) {
        mkrecord_close(m, prefix);
        return -1;
    }
    convert_pool_t pool = {.m = m, .files = files, .count = count, .window = 4 * (size_t)m->workers};
    pool.results = calloc(pool.window, sizeof(*pool.results));
    pthread_t *threads = calloc((size_t)m->workers, sizeof(*threads));
    int started = 0, rc = 0;
    if (!pool.results || !threads) {
        rc = -1;
        goto out;
    }
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.cond, NULL);
    for (; started < m->workers; started++)
        if (pthread_create(&threads[started], NULL, convert_worker, &pool) != 0) break;
    if (started == 0) rc = -1;
    m->total_hint = count;
    for (size_t i = 0; i < count && rc == 0; i++) {
        pthread_mutex_lock(&pool.lock);
        convert_result_t *slot = &pool.results[i % pool.window];
        while (!slot->done && !pool.stop) pthread_cond_wait(&pool.cond, &pool.lock);
        convert_result_t r = *slot;
        int stopped = !slot->done;
        memset(slot, 0, sizeof(*slot));
        pool.written = i + 1;
        pthread_cond_broadcast(&pool.cond);
        pthread_mutex_unlock(&pool.lock);
        rc = stopped ? -1 : convert_write(m, &files[i], &r);
        free(r.bytes);
        progress_update(m, i + 1);
    }
    pthread_mutex_lock(&pool.lock);
    pool.stop = 1;
    pthread_cond_broadcast(&pool.cond);
    pthread_mutex_unlock(&pool.lock);
    for (int t = 0; t < started; t++) pthread_join(threads[t], NULL);
    for (size_t k = 0; k < pool.window; k++) free(pool.results[k].bytes);
    pthread_cond_destroy(&pool.cond);
    pthread_mutex_destroy(&pool.lock);
out:
    free(threads);
    free(pool.results);
    if (mkrecord_close(m, prefix) != 0) rc = -1;
    if (rc == 0) mkrecord_summary(m, prefix);
    return rc;
}

static char *join_path(const char *a, const char *b, const char *c)
{
    char *path = NULL;
    if ((c ? asprintf(&path, "%s/%s/%s", a, b, c) : asprintf(&path, "%s/%s", a, b)) < 0) return NULL;
    return path;
}

static int convert_folder(mkrecord_t *m, const char *root, const char *prefix)
{
    size_t class_count = 0;
    char **classes = list_dir(root, 1, &class_count);
    if (!classes) return -1;
    input_list_t inputs = {0};
    int rc = 0;
    for (size_t c = 0; c < class_count && rc == 0; c++) {
        char *dir = join_path(root, classes[c], NULL);
        size_t n = 0;
        char **names = dir ? list_dir(dir, 0, &n) : NULL;
        if (!names) rc = -1;
        for (size_t i = 0; i < n && rc == 0; i++)
            rc = input_list_add(&inputs, join_path(root, classes[c], names[i]), (int32_t)c);
        free_names(names, n);
        free(dir);
    }
    if (rc == 0) {
        printf("%zu class directories, %zu files\n", class_count, inputs.count);
        for (size_t c = 0; c < class_count && c < 10; c++) printf("  label %zu = %s\n", c, classes[c]);
        if (class_count > 10) printf("  ...\n");
        m->class_names = classes;
        m->class_name_count = class_count;
        rc = convert_files(m, inputs.files, inputs.count, prefix);
        m->class_names = NULL;
        m->class_name_count = 0;
    }
    input_list_free(&inputs);
    free_names(classes, class_count);
    return rc;
}

static int convert_val(mkrecord_t *m, const char *root, const char *labels_path, const char *prefix)
{
    FILE *f = fopen(labels_path, "r");
    if (!f) {
        fprintf(stderr, "hora-mkrecord: cannot open %s: %s\n", labels_path, strerror(errno));
        return -1;
    }
    input_list_t inputs = {0};
    size_t line_no = 0;
    int rc = 0;
    char line[4096];
    while (rc == 0 && fgets(line, sizeof(line), f)) {
        line_no++;
        char name[2048];
        long label;
        if (line[0] == '\n' || line[0] == '#') continue;
        if (sscanf(line, "%2047s %ld", name, &label) != 2 || label < 0 || label > INT32_MAX) {
            fprintf(stderr, "hora-mkrecord: %s:%zu: expected \"FILENAME LABEL\"\n", labels_path, line_no);
            rc = -1;
            break;
        }
        rc = input_list_add(&inputs, join_path(root, name, NULL), (int32_t)label);
    }
    fclose(f);
    if (rc == 0) rc = convert_files(m, inputs.files, inputs.count, prefix);
    input_list_free(&inputs);
    return rc;
}

/* ---- verify ---- */

static int verify(char **paths, int path_count, int strict)
{
    uint64_t good = 0, bad = 0, bad_files = 0;
    uint64_t *class_counts = NULL;
    size_t class_capacity = 0;
    tr_record_t rec = {0};
    for (int p = 0; p < path_count; p++) {
        tr_record_reader_t *r;
        if (tr_record_reader_open(paths[p], &r) != HORA_OK) {
            fprintf(stderr, "hora-mkrecord: bad shard: %s\n", status_message());
            bad_files++;
            if (strict) break;
            continue;
        }
        uint64_t n = tr_record_reader_count(r), file_bad = 0;
        for (uint64_t i = 0; i < n; i++) {
            if (tr_record_read(r, i, &rec) != HORA_OK) {
                fprintf(stderr, "hora-mkrecord: bad record: %s\n", status_message());
                file_bad++;
                if (strict) break;
                continue;
            }
            if (rec.label >= 0 && class_counts_cover(&class_counts, &class_capacity, (size_t)rec.label) != 0) {
                file_bad++;
                break;
            }
            if (rec.label >= 0) class_counts[rec.label]++;
            good++;
        }
        printf("%s: %" PRIu64 " records, %" PRIu64 " bad\n", paths[p], n, file_bad);
        bad += file_bad;
        tr_record_reader_close(r);
        if (strict && file_bad) break;
    }
    tr_record_free(&rec);
    printf("verified %" PRIu64 " good records, %" PRIu64 " bad records, %" PRIu64 " unreadable shard(s)\n", good, bad,
           bad_files);
    if (class_counts) print_class_summary(class_counts, class_capacity);
    free(class_counts);
    return bad || bad_files ? 1 : 0;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: hora-mkrecord --from idx IMAGES LABELS OUT_PREFIX [--shards N]\n"
                 "       hora-mkrecord --from folder DIR OUT_PREFIX [JPEG options]\n"
                 "       hora-mkrecord --from val DIR LABELS_FILE OUT_PREFIX [JPEG options]\n"
                 "       hora-mkrecord --verify [--strict] FILE...\n"
                 "JPEG options: [--shards N] [--strict] [--resize-shorter N [--quality Q]]\n"
                 "              [--workers N]\n"
                 "Writes OUT_PREFIX-SSSSS-of-NNNNN.hrec (input record i goes to shard i mod N) and\n"
                 "OUT_PREFIX.classes, creating OUT_PREFIX's folder (and parents) if missing. The\n"
                 "loader reads DIR/train-* and DIR/val-*: use OUT_PREFIX DIR/train or DIR/val.\n"
                 "IDX files may be gzip-compressed. LABELS_FILE lines:\n"
                 "FILENAME LABEL (0-based). --resize-shorter shrinks larger JPEGs so the shorter\n"
                 "side is N (re-encoded at --quality, default 90); --workers defaults to the CPUs.\n");
}

int main(int argc, char **argv)
{
    const char *from = NULL;
    int do_verify = 0, strict = 0;
    unsigned long shards = 1, resize_shorter = 0, quality = 90;
    long workers = 0;
    char **pos = calloc((size_t)argc + 1, sizeof(*pos));
    int pos_count = 0;
    if (!pos) return 2;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--from") == 0 && i + 1 < argc) {
            from = argv[++i];
        } else if (strcmp(argv[i], "--shards") == 0 && i + 1 < argc) {
            char *end;
            shards = strtoul(argv[++i], &end, 10);
            if (*end || shards == 0 || shards > MKRECORD_MAX_SHARDS) {
                fprintf(stderr, "hora-mkrecord: --shards wants 1..%u\n", MKRECORD_MAX_SHARDS);
                free(pos);
                return 2;
            }
        } else if ((strcmp(argv[i], "--resize-shorter") == 0 || strcmp(argv[i], "--quality") == 0 ||
                    strcmp(argv[i], "--workers") == 0) &&
                   i + 1 < argc) {
            const char *name = argv[i];
            char *end;
            unsigned long v = strtoul(argv[++i], &end, 10);
            int ok = *end == '\0';
            if (strcmp(name, "--resize-shorter") == 0)
                ok &= v >= 1 && v <= 65535, resize_shorter = v;
            else if (strcmp(name, "--quality") == 0)
                ok &= v >= 1 && v <= 100, quality = v;
            else
                ok &= v >= 1 && v <= 256, workers = (long)v;
            if (!ok) {
                fprintf(stderr,
                        "hora-mkrecord: bad value %s for %s (--resize-shorter 1..65535, "
                        "--quality 1..100, --workers 1..256)\n",
                        argv[i], name);
                free(pos);
                return 2;
            }
        } else if (strcmp(argv[i], "--verify") == 0) {
            do_verify = 1;
        } else if (strcmp(argv[i], "--strict") == 0) {
            strict = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            free(pos);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(stderr, "hora-mkrecord: unknown option %s\n", argv[i]);
            usage(stderr);
            free(pos);
            return 2;
        } else {
            pos[pos_count++] = argv[i];
        }
    }
    int rc;
    if (workers == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        workers = cpus < 1 ? 1 : cpus > 256 ? 256 : cpus;
    }
    mkrecord_t m = {.shard_count = (unsigned)shards,
                    .strict = strict,
                    .resize_shorter = (int)resize_shorter,
                    .quality = (int)quality,
                    .workers = (int)workers};
    if (do_verify && pos_count > 0) {
        rc = verify(pos, pos_count, strict);
    } else if (from && strcmp(from, "idx") == 0 && pos_count == 3) {
        rc = convert_idx(&m, pos[0], pos[1], pos[2]) == 0 ? 0 : 1;
    } else if (from && strcmp(from, "folder") == 0 && pos_count == 2) {
        rc = convert_folder(&m, pos[0], pos[1]) == 0 ? 0 : 1;
    } else if (from && strcmp(from, "val") == 0 && pos_count == 3) {
        rc = convert_val(&m, pos[0], pos[1], pos[2]) == 0 ? 0 : 1;
    } else {
        usage(stderr);
        rc = 2;
    }
    free(m.class_counts);
    free(pos);
    return rc;
}
