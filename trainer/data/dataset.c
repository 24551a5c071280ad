/*
 * dataset.c - a split of a dataset directory as samples 0..count-1
 * (dataset.h): shard discovery, the IDX fallback, class count, reads.
 */
#define _GNU_SOURCE
#include "dataset.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/status.h"

/* Largest shard count hora-mkrecord writes (its --shards limit). */
#define DATASET_MAX_SHARDS 100000u

static const char *split_prefix(tr_split_t split) { return split == TR_SPLIT_VAL ? "val" : "train"; }

/* "PREFIX-SSSSS-of-NNNNN.hrec" -> shard, shard_count; 0 if name is not one.
 * The name must be exactly what tr_record_shard_name would write, so stray
 * files ("train-1-of-2.hrec.tmp") are never taken for shards. */
static int parse_shard_name(const char *name, const char *prefix, unsigned *shard, unsigned *shard_count)
{
    size_t prefix_len = strlen(prefix);
    if (strncmp(name, prefix, prefix_len) != 0 || name[prefix_len] != '-') return 0;
    unsigned s, n;
    int end = 0;
    if (sscanf(name + prefix_len, "-%u-of-%u.hrec%n", &s, &n, &end) != 2 || end == 0 ||
        name[prefix_len + (size_t)end] != '\0' || n == 0 || n > DATASET_MAX_SHARDS || s >= n)
        return 0;
    char canonical[64];
    snprintf(canonical, sizeof(canonical), "-%05u-of-%05u.hrec", s, n);
    if (strcmp(canonical, name + prefix_len) != 0) return 0;
    *shard = s;
    *shard_count = n;
    return 1;
}

/* Count the split's shards in dir: *shard_count = 0 when there are none.
 * Mixed totals (train-00000-of-00002 and train-00000-of-00003) or a missing
 * shard are errors. */
static hora_status_t find_shards(const char *dir, const char *prefix, unsigned *shard_count)
{
    DIR *d = opendir(dir);
    if (!d) return status_set(HORA_ERR_SYSTEM, "%s: cannot open dataset directory: %s", dir, strerror(errno));
    hora_status_t status = HORA_OK;
    unsigned total = 0, found = 0;
    uint8_t *seen = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        unsigned s, n;
        if (!parse_shard_name(e->d_name, prefix, &s, &n)) continue;
        if (total == 0) {
            total = n;
            seen = calloc(n, 1);
            if (!seen) {
                status = status_set(HORA_ERR_NO_MEMORY, "out of memory");
                break;
            }
        } else if (n != total) {
            status = status_set(HORA_ERR_CORRUPT,
                                "%s: shards of two sets: %s-*-of-%05u.hrec and "
                                "%s-*-of-%05u.hrec; remove one",
                                dir, prefix, total, prefix, n);
            break;
        }
        if (!seen[s]) {
            seen[s] = 1;
            found++;
        }
    }
    closedir(d);
    if (status == HORA_OK && total > 0 && found != total) {
        unsigned missing = 0;
        while (missing < total && seen[missing]) missing++;
        status = status_set(HORA_ERR_CORRUPT, "%s: %u of %u %s shards present; %s-%05u-of-%05u.hrec is missing", dir,
                            found, total, prefix, prefix, missing, total);
    }
    free(seen);
    if (status == HORA_OK) *shard_count = total;
    return status;
}

/* PREFIX.classes: "LABEL COUNT [NAME]" lines -> 1 + the largest label; 0 if
 * the file is absent or unusable (the caller then scans record headers). */
static int read_classes_file(const char *dir, const char *prefix)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/%s.classes", dir, prefix) >= (int)sizeof(path)) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[4096];
    long largest = -1;
    int ok = 1;
    while (ok && fgets(line, sizeof(line), f)) {
        long label;
        unsigned long long count;
        if (line[0] == '#' || line[0] == '\n') continue;
        if (sscanf(line, "%ld %llu", &label, &count) != 2 || label < 0 || label > INT32_MAX - 1)
            ok = 0;
        else if (label > largest)
            largest = label;
    }
    fclose(f);
    if (!ok || largest < 0) {
        fprintf(stderr,
                "hora loader: %s: not \"LABEL COUNT [NAME]\" lines; counting classes "
                "from the records instead\n",
                path);
        return 0;
    }
    return (int)largest + 1;
}

static hora_status_t open_shards(tr_dataset_t *ds, const char *dir, const char *prefix, unsigned shard_count,
                                 int strict)
{
    ds->shard_count = shard_count;
    ds->readers = calloc(shard_count, sizeof(*ds->readers));
    ds->first = calloc((size_t)shard_count + 1, sizeof(*ds->first));
    if (!ds->readers || !ds->first) return status_set(HORA_ERR_NO_MEMORY, "out of memory");
    uint64_t count = 0;
    for (unsigned s = 0; s < shard_count; s++) {
        char path[4096], base[4096];
        ds->first[s] = count;
        if (snprintf(base, sizeof(base), "%s/%s", dir, prefix) >= (int)sizeof(base) ||
            tr_record_shard_name(base, s, shard_count, path, sizeof(path)) != HORA_OK)
            return status_set(HORA_ERR_INVALID_ARG, "%s: path too long", dir);
        hora_status_t status = tr_record_reader_open(path, &ds->readers[s]);
        if (status == HORA_ERR_NO_MEMORY) return status_set(status, "%s", status_message());
        if (status != HORA_OK) {
            /* A truncated or damaged shard: its records cannot be located
             * without trusting what failed the checks, so all are lost. */
            if (strict) return status_set(HORA_ERR_CORRUPT, "bad shard: %s", status_message());
            fprintf(stderr, "hora loader: bad shard left out: %s\n", status_message());
            ds->readers[s] = NULL;
            ds->bad_shard_count++;
            continue;
        }
        count += tr_record_reader_count(ds->readers[s]);
    }
    ds->first[shard_count] = count;
    ds->count = count;
    if (count == 0)
        return status_set(HORA_ERR_CORRUPT, "%s: the %u %s shard(s) hold no readable record", dir, shard_count, prefix);
    if (count > UINT32_MAX)
        return status_set(HORA_ERR_UNSUPPORTED, "%s: %" PRIu64 " records (at most 2^32 - 1)", dir, count);

    /* The stored shape of the first record whose header reads, and (without
     * a .classes file) the labels of all of them. */
    int classes = read_classes_file(dir, prefix);
    int have_shape = 0;
    int32_t largest = -1;
    tr_record_t rec = {0};
    for (unsigned s = 0; s < shard_count; s++) {
        uint64_t n = ds->readers[s] ? tr_record_reader_count(ds->readers[s]) : 0;
        for (uint64_t i = 0; i < n && (classes == 0 || !have_shape); i++) {
            if (tr_record_read_header(ds->readers[s], i, &rec) != HORA_OK)
                continue; /* the loader reports it when it meets it */
            if (!have_shape) {
                ds->kind = rec.kind;
                ds->channels = rec.channels;
                ds->height = rec.height;
                ds->width = rec.width;
                have_shape = 1;
            }
            if (rec.label > largest) largest = rec.label;
        }
    }
    if (!have_shape) return status_set(HORA_ERR_CORRUPT, "%s: no record header of the %s split reads", dir, prefix);
    ds->classes = classes > 0 ? classes : (int)largest + 1;
    return HORA_OK;
}

/* dir/base or dir/base.gz, whichever exists (plain first). */
static char *idx_path(const char *dir, const char *base)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s", dir, base) < 0) return NULL;
    if (access(path, R_OK) == 0) return path;
    free(path);
    if (asprintf(&path, "%s/%s.gz", dir, base) < 0) return NULL;
    return path;
}

static hora_status_t open_idx(tr_dataset_t *ds, const char *dir, tr_split_t split)
{
    const char *stem = split == TR_SPLIT_VAL ? "t10k" : "train";
    char images_base[64], labels_base[64];
    snprintf(images_base, sizeof(images_base), "%s-images-idx3-ubyte", stem);
    snprintf(labels_base, sizeof(labels_base), "%s-labels-idx1-ubyte", stem);
    char *labels_path = idx_path(dir, labels_base);
    ds->images_path = idx_path(dir, images_base);
    if (!ds->images_path || !labels_path) {
        free(labels_path);
        return status_set(HORA_ERR_NO_MEMORY, "out of memory");
    }
    if (access(ds->images_path, R_OK) != 0) {
        free(labels_path);
        return status_set(HORA_ERR_SYSTEM, "%s: no %s split: neither %s-*-of-*.hrec shards nor %s[.gz]", dir,
                          split_prefix(split), split_prefix(split), images_base);
    }
    hora_status_t status = tr_idx_load(ds->images_path, labels_path, &ds->idx);
    free(labels_path);
    if (status != HORA_OK) return status;
    ds->is_idx = 1;
    ds->count = ds->idx.count;
    ds->classes = ds->idx.classes;
    ds->kind = TR_PAYLOAD_KIND_RAW_U8;
    ds->channels = 1;
    ds->height = ds->idx.rows;
    ds->width = ds->idx.cols;
    return HORA_OK;
}

hora_status_t tr_dataset_open(const char *dir, tr_split_t split, int strict, tr_dataset_t *ds)
{
    memset(ds, 0, sizeof(*ds));
    unsigned shard_count = 0;
    hora_status_t status = find_shards(dir, split_prefix(split), &shard_count);
    if (status != HORA_OK) return status;
    status =
        shard_count > 0 ? open_shards(ds, dir, split_prefix(split), shard_count, strict) : open_idx(ds, dir, split);
    if (status != HORA_OK) tr_dataset_free(ds);
    return status;
}

void tr_dataset_free(tr_dataset_t *ds)
{
    for (unsigned s = 0; ds->readers && s < ds->shard_count; s++) tr_record_reader_close(ds->readers[s]);
    free(ds->readers);
    free(ds->first);
    tr_idx_free(&ds->idx);
    free(ds->images_path);
    memset(ds, 0, sizeof(*ds));
}

/* The shard holding sample index: first[s] <= index < first[s + 1], which
 * never picks an empty (left-out) shard. */
static unsigned shard_of(const tr_dataset_t *ds, uint64_t index)
{
    unsigned lo = 0, hi = ds->shard_count; /* first[lo] <= index < first[hi] */
    while (hi - lo > 1) {
        unsigned mid = lo + (hi - lo) / 2;
        if (ds->first[mid] <= index)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

void tr_dataset_locate(const tr_dataset_t *ds, uint64_t index, const char **path, uint64_t *offset)
{
    if (ds->is_idx) {
        *path = ds->images_path;
        *offset = 16 + index * ds->idx.rows * ds->idx.cols;
        return;
    }
    unsigned s = shard_of(ds, index);
    *path = tr_record_reader_path(ds->readers[s]);
    *offset = tr_record_reader_offset(ds->readers[s], index - ds->first[s]);
}

hora_status_t tr_dataset_read(const tr_dataset_t *ds, uint64_t index, tr_record_t *scratch, tr_sample_t *sample)
{
    if (index >= ds->count) return status_set(HORA_ERR_INVALID_ARG, "sample %" PRIu64 " of %" PRIu64, index, ds->count);
    if (ds->is_idx) {
        uint64_t pixels = (uint64_t)ds->idx.rows * ds->idx.cols;
        *sample = (tr_sample_t){.label = ds->idx.labels[index],
                                .kind = TR_PAYLOAD_KIND_RAW_U8,
                                .channels = 1,
                                .height = ds->idx.rows,
                                .width = ds->idx.cols,
                                .data = ds->idx.images + index * pixels,
                                .bytes = pixels,
                                .path = ds->images_path,
                                .offset = 16 + index * pixels};
        return HORA_OK;
    }
    unsigned s = shard_of(ds, index);
    uint64_t i = index - ds->first[s];
    hora_status_t status = tr_record_read(ds->readers[s], i, scratch);
    if (status != HORA_OK) return status_set(status, "%s", status_message());
    *sample = (tr_sample_t){.label = scratch->label,
                            .kind = scratch->kind,
                            .channels = scratch->channels,
                            .height = scratch->height,
                            .width = scratch->width,
                            .data = scratch->payload,
                            .bytes = scratch->payload_bytes,
                            .path = tr_record_reader_path(ds->readers[s]),
                            .offset = tr_record_reader_offset(ds->readers[s], i)};
    return HORA_OK;
}
