/*
 * golden.h - what test_golden.c and golden_bf16.c share: the golden file
 * reader (format: tests/trainer/golden/README.md), the model spec and parameters a
 * file describes, and the failure count.
 */
#ifndef TEST_GOLDEN_H
#define TEST_GOLDEN_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct {
    char name[128];
    uint32_t dtype, ndim, dims[8];
    size_t count;
    void *data;
} entry_t;

typedef struct {
    entry_t *e;
    int n;
} golden_t;

/* Read a whole file; 0 or -1 (said on stderr). */
int golden_load(const char *path, golden_t *g);
void golden_free(golden_t *g);
/* The entry called name, or NULL. */
const entry_t *golden_find(const golden_t *g, const char *name);
/* The index-th entry whose name starts with prefix, or NULL. */
const entry_t *golden_nth(const golden_t *g, const char *prefix, int index);
/* The model a file's meta and hyper entries describe; returns its batch. */
int golden_spec(const entry_t *meta, const entry_t *hyper, tr_model_spec_t *spec);
/* The file's param/ entries into the model's f32 master views; 0 or -1. */
int golden_params_upload(const golden_t *g, tr_model_t *model);

/* Failed checks, over every file. */
extern int golden_failures;

/* golden_bf16.c: a file with a "mixed" entry (the bf16 run); 0 or -1. */
int run_mixed(const char *path, const golden_t *g);

#endif
