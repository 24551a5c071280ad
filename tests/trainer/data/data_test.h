/*
 * data_test.h - helpers for the data pipeline tests: temp directories, IDX
 * writers, and collecting a whole epoch of loader batches into one array so
 * epochs can be compared sample by sample.
 */
#ifndef HORA_DATA_TEST_H
#define HORA_DATA_TEST_H

#define _GNU_SOURCE
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "base/status.h"
#include "loader.h"

/* A fresh directory under /tmp (exits on failure: nothing to test without). */
static inline void data_test_mkdtemp(char *dir, size_t bytes, const char *name)
{
    snprintf(dir, bytes, "/tmp/%s.XXXXXX", name);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

static inline void data_test_rmtree(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* Runs the shell command that fmt makes; its exit status, or -1 when it did
 * not exit. */
static inline int data_test_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int data_test_sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static inline void data_test_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* Write bytes to path, gzip-compressed when gz (through zlib). */
static inline int data_test_write(const char *path, const void *data, size_t bytes, int gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        if (!f) return -1;
        int ok = gzwrite(f, data, (unsigned)bytes) == (int)bytes;
        return gzclose(f) == Z_OK && ok ? 0 : -1;
    }
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, bytes, f) == bytes;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Everything one rank got in one epoch, concatenated. */
typedef struct {
    uint64_t steps;
    int batch;
    size_t sample_count; /* floats (or halfs) per sample */
    size_t elem_bytes;
    uint8_t *data;        /* (steps * batch, sample) */
    int32_t *labels;      /* (steps * batch) */
    int *counts;          /* (steps) */
    hora_status_t status; /* first non-OK status from next, or OK */
} data_test_epoch_t;

static inline void data_test_epoch_free(data_test_epoch_t *e)
{
    free(e->data);
    free(e->labels);
    free(e->counts);
    memset(e, 0, sizeof(*e));
}

/* Run epoch from first_step to its end; batch i lands at index i - first_step.
 * Each batch's epoch and step fields are checked on the way. */
static inline data_test_epoch_t data_test_collect(tr_loader_t *loader, int batch, size_t elem_bytes, uint64_t epoch,
                                                  uint64_t first_step)
{
    tr_loader_info_t info;
    tr_loader_info(loader, &info);
    data_test_epoch_t e = {0};
    e.batch = batch;
    e.elem_bytes = elem_bytes;
    e.sample_count = (size_t)info.channels * (size_t)info.height * (size_t)info.width;
    uint64_t steps = info.steps_per_epoch - first_step;
    size_t sample_bytes = e.sample_count * elem_bytes;
    e.data = calloc(steps * (size_t)batch, sample_bytes);
    e.labels = calloc(steps * (size_t)batch, sizeof(int32_t));
    e.counts = calloc(steps + 1, sizeof(int));
    e.status = tr_loader_start_epoch(loader, epoch, first_step);
    for (uint64_t i = 0; e.status == HORA_OK; i++) {
        tr_batch_t *b = NULL;
        e.status = tr_loader_next(loader, &b);
        if (e.status != HORA_OK || !b) break;
        CHECK(i < steps, "more batches than steps_per_epoch (%" PRIu64 ")", steps);
        CHECK(b->epoch == epoch && b->step == first_step + i,
              "batch says epoch %" PRIu64 " step %" PRIu64 ", expected %" PRIu64 " %" PRIu64, b->epoch, b->step, epoch,
              first_step + i);
        if (i < steps) {
            memcpy(e.data + i * (size_t)batch * sample_bytes, b->data, (size_t)batch * sample_bytes);
            memcpy(e.labels + i * (size_t)batch, b->labels, (size_t)batch * sizeof(int32_t));
            e.counts[i] = b->count;
            e.steps = i + 1;
        }
        tr_loader_release(loader, b);
    }
    if (e.status == HORA_OK)
        CHECK(e.steps == steps, "got %" PRIu64 " batches, steps_per_epoch says %" PRIu64, e.steps, steps);
    return e;
}

static inline const float *data_test_sample(const data_test_epoch_t *e, size_t i)
{
    return (const float *)(e->data + i * e->sample_count * e->elem_bytes);
}

#endif
