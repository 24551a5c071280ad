/*
 * dataset.h - one split of a dataset directory as a flat list of samples
 * 0..count-1, whatever stores them: IDX files read into memory, or record
 * shards read on demand (one pread per sample, from any thread).
 *
 * Which files make a split (record shards win when both are present):
 *   train: train-SSSSS-of-NNNNN.hrec, else train-images-idx3-ubyte[.gz] +
 *          train-labels-idx1-ubyte[.gz]
 *   val:   val-SSSSS-of-NNNNN.hrec, else t10k-images-idx3-ubyte[.gz] +
 *          t10k-labels-idx1-ubyte[.gz]
 * Shards must be complete (every SSSSS of one NNNNN): a missing shard is an
 * error, since training on part of a dataset without noticing is wrong. A
 * shard that is present but unreadable (bad header, truncated, bad index) is
 * reported and left out (strict: an error) and counted in bad_shard_count.
 *
 * Sample i is shard s's record (i - first[s]) with shards in SSSSS order.
 * The number of classes comes from PREFIX.classes (written by hora-mkrecord:
 * "LABEL COUNT [NAME]" lines) when present, else from reading every record
 * header once at open (fine for small sets; slow on a cold ImageNet).
 */
#ifndef TR_DATA_DATASET_H
#define TR_DATA_DATASET_H

#include <stdint.h>

#include "hora.h"
#include "idx.h"
#include "loader.h"
#include "record.h"

typedef struct {
    uint64_t count; /* samples in the split */
    int classes;    /* 1 + the largest label */
    /* The first readable sample's kind and stored shape; the loader's
     * defaults (raw: output = stored size) come from it. */
    tr_payload_kind_t kind;
    uint32_t channels, height, width;
    uint64_t bad_shard_count;

    int is_idx;
    tr_idx_t idx;
    char *images_path; /* IDX: for messages */
    unsigned shard_count;
    tr_record_reader_t **readers; /* (shard_count); NULL for a shard left out */
    uint64_t *first;              /* (shard_count + 1): sample index of each shard's record 0 */
} tr_dataset_t;

/* A sample's bytes, valid until the next tr_dataset_read with the same
 * scratch record (IDX samples point into the dataset). */
typedef struct {
    int32_t label;
    tr_payload_kind_t kind;
    uint32_t channels, height, width;
    const uint8_t *data;
    uint64_t bytes;
    const char *path; /* where it came from, for messages */
    uint64_t offset;
} tr_sample_t;

/* Find and open split in dir (see above). Statuses: HORA_ERR_SYSTEM (dir
 * unreadable, no such split), HORA_ERR_CORRUPT (bad IDX, missing shard,
 * strict and a bad shard, no readable sample), HORA_ERR_NO_MEMORY. */
hora_status_t tr_dataset_open(const char *dir, tr_split_t split, int strict, tr_dataset_t *ds);
void tr_dataset_free(tr_dataset_t *ds);

/* Sample index (< ds->count) into *sample, reading through scratch (one per
 * thread). HORA_ERR_CORRUPT / HORA_ERR_SYSTEM for a bad record, with the
 * message in status_message(). */
hora_status_t tr_dataset_read(const tr_dataset_t *ds, uint64_t index, tr_record_t *scratch, tr_sample_t *sample);

/* Where sample index is stored ("FILE: offset N"), for messages. */
void tr_dataset_locate(const tr_dataset_t *ds, uint64_t index, const char **path, uint64_t *offset);

#endif
