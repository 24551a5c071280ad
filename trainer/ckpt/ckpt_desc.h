/*
 * ckpt_desc.h - a checkpoint's text sections read back: the "model"
 * section's keys and its param / bn lines (CHECKPOINT.md), checked for
 * consistency, so that hora-train (checkpoint.c) and tools/hora-ckpt read
 * the description the same way; and a key lookup for any "key value" text
 * (run_state).
 *
 * Text sections are lines "key value...", each ending in '\n', words
 * separated by one space. Readers ignore keys they do not know, so a later
 * writer may add lines.
 */
#ifndef TR_CKPT_DESC_H
#define TR_CKPT_DESC_H

#include <stddef.h>
#include <stdint.h>

#include "hora.h"
#include "model.h"

#define TR_CKPT_MODEL_FORMAT "hora-model"
#define TR_CKPT_MODEL_FORMAT_VERSION 1
#define TR_CKPT_STATE_FORMAT "hora-run-state"
#define TR_CKPT_STATE_FORMAT_VERSION 1

/* One "param NAME KIND OFFSET COUNT D0 [D1 D2 D3]" line. */
typedef struct {
    char name[64]; /* torchvision's name, "layer1.0.conv1.weight" */
    tr_param_kind_t kind;
    int ndim;               /* 1..4 */
    int dims[4];            /* PyTorch shape; unused dims 0 */
    uint64_t offset, count; /* f32 elements of the params (and momentum) arena */
} tr_ckpt_param_desc_t;

/* One "bn NAME CHANNELS OFFSET" line. */
typedef struct {
    char name[64]; /* "layer1.0.bn1" */
    int channels;
    uint64_t offset; /* running mean at offset, running var at offset + channels (stats arena) */
} tr_ckpt_bn_desc_t;

/* The model section, parsed. */
typedef struct {
    char arch[64];
    /* stem, block, stage_count, blocks, base_width, in_channels, height,
     * width, classes, compute_dtype, grad_dtype, bn_epsilon, bn_momentum,
     * zero_init_last_bn, as recorded */
    tr_model_spec_t spec;
    int world_size;
    int batch;             /* per rank */
    uint64_t params_count; /* f32 elements of the params arena */
    uint64_t stats_count;  /* f32 elements of the stats arena */
    int param_count;
    tr_ckpt_param_desc_t *params; /* (param_count), arena order */
    int bn_count;
    tr_ckpt_bn_desc_t *bns; /* (bn_count), arena order */
} tr_ckpt_desc_t;

/* Parse the model section's text. Every key of format 1 must be there once;
 * each param line's count must be the product of its dims, its dims fit its
 * kind, and the tensors lie in arena order without overlap inside
 * params_count (bn lines: inside stats_count); names are unique. where
 * prefixes messages ("ckpt-0000000120.hckpt: section 'model'"): "WHERE:
 * line 12: ...". HORA_ERR_CORRUPT, HORA_ERR_NO_MEMORY; on failure desc holds
 * nothing to free. */
hora_status_t tr_ckpt_desc_parse(const char *text, const char *where, tr_ckpt_desc_t *desc);
void tr_ckpt_desc_free(tr_ckpt_desc_t *desc);

/* "conv_weight", "bn_gamma", "bn_beta", "linear_weight", "linear_bias"; and
 * back (-1 for an unknown name). */
const char *tr_ckpt_param_kind_name(tr_param_kind_t kind);
int tr_ckpt_param_kind_parse(const char *name);
/* "cifar" / "imagenet", "basic" / "bottleneck". */
const char *tr_ckpt_stem_name(tr_stem_t stem);
const char *tr_ckpt_block_name(tr_block_kind_t block);

/* The value of key in a text section: the rest of the first line whose
 * first word is key (after one space), *len its length without the '\n';
 * NULL when no line has that key. */
const char *tr_ckpt_text_value(const char *text, const char *key, size_t *len);
/* The same, as an unsigned decimal number: 0, or -1 when missing or not a
 * number. */
int tr_ckpt_text_u64(const char *text, const char *key, uint64_t *value);

#endif
