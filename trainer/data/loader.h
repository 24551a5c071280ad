/*
 * loader.h - the training data loader: batches for one rank from a dataset
 * directory, decoded and augmented by a pool of threads ahead of the trainer.
 *
 * A dataset directory holds either
 *   - IDX files (MNIST / Fashion-MNIST, optionally .gz):
 *     train-images-idx3-ubyte, train-labels-idx1-ubyte,
 *     t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte; or
 *   - record shards written by hora-mkrecord: train-NNNNN-of-NNNNN.hrec and
 *     val-NNNNN-of-NNNNN.hrec (raw pixels or JPEG payloads).
 *
 * Order: each epoch, every rank computes the same permutation perm of the
 * split from (seed, epoch); rank r's p-th sample is perm[r + world * p], for
 * p < samples / world on every rank (so all ranks have the same number of
 * steps; up to world - 1 samples, different ones each epoch, sit out). Batch i
 * of an epoch is the same after a restart from (seed, epoch, i), for any
 * thread count: augmentation randomness is keyed by (seed, epoch, sample).
 * The validation split is not shuffled; ranks take contiguous disjoint parts
 * that together cover it once. steps_per_epoch is the same on every rank
 * there too (ceil(ceil(samples / world) / batch)), so a rank whose part is
 * one shorter may end on a batch with count 0.
 *
 * Bad data (CRC mismatch, truncated shard, undecodable JPEG) is counted,
 * reported once with file and offset, and replaced by the next good sample;
 * with strict set it is an error instead (HORA_ERR_CORRUPT from
 * tr_loader_next, "bad sample N (strict: stopping): FILE: offset N: what"
 * in status_message(), not printed here). A shard that fails its checks at open is left out whole
 * (counted once); a missing shard file is an error at open.
 *
 * Threads: one caller thread uses a loader (open, start_epoch, next,
 * release, close); the decoder threads are internal.
 */
#ifndef TR_LOADER_H
#define TR_LOADER_H

#include <stdint.h>

#include "hora.h"
#include "tensor.h"

typedef struct tr_loader tr_loader_t;

typedef enum {
    TR_SPLIT_TRAIN = 0,
    TR_SPLIT_VAL = 1,
} tr_split_t;

typedef struct {
    const char *path; /* dataset directory */
    tr_split_t split;
    int rank, world;    /* this rank's shard of the data */
    int batch;          /* samples per batch on this rank */
    uint64_t seed;      /* shuffle and augmentation seed, the same on all ranks */
    int threads;        /* decoder threads; 0 = 1 */
    int prefetch;       /* batches decoded ahead; 0 = 2 x threads */
    int height, width;  /* output size; 0 = the stored size (raw), 224 (JPEG) */
    int drop_last;      /* 1: drop a last partial batch (train); 0: deliver it */
    int strict;         /* 1: bad data is an error, not skipped */
    tr_layout_t layout; /* TR_LAYOUT_NCHW or TR_LAYOUT_NHWC */
    /* TR_DTYPE_F32 or TR_DTYPE_F16 (normalised), or TR_DTYPE_U8: pixels
     * (NHWC only), rounded, not normalised, for a backend that normalises
     * on its device (tr_aug_store says how they compare) */
    tr_dtype_t dtype;
    /* Batch memory: alloc(alloc_ctx, bytes), zeroed, given back with
     * dealloc(alloc_ctx, ptr), when set (a device backend's host_alloc:
     * pinned, so its copies run asynchronously); else 64-byte aligned
     * malloc. */
    void *(*alloc)(void *ctx, size_t bytes);
    void (*dealloc)(void *ctx, void *ptr);
    void *alloc_ctx;
    /* Augmentation (train split; ignored for val). */
    int pad_crop;            /* small images: pad by this many zero pixels, random crop back */
    int flip;                /* random horizontal flip, p = 0.5 */
    int random_resized_crop; /* JPEG: area 0.08-1, aspect 3/4-4/3, 10 tries */
    float jitter;            /* brightness/contrast/saturation strength (0 = off) */
    float hue;               /* hue jitter (0 = off) */
    float lighting;          /* PCA lighting alpha std (0 = off; 0.1 in AlexNet) */
    float val_resize_ratio;  /* val JPEG: shorter side to size / ratio, centre crop; 0 = 0.875 */
    /* Normalisation: (pixel / 255 - mean[c]) / std[c]; std 0 = leave at pixel / 255. */
    float mean[3], std[3];
} tr_loader_config_t;

/* One batch, owned by the loader until tr_loader_release. */
typedef struct {
    void *data;      /* (batch, C, H, W) in the configured layout and dtype */
    int32_t *labels; /* batch entries; -1 past count */
    int count;       /* valid samples, <= batch (fewer only in a last partial batch) */
    uint64_t epoch;
    uint64_t step; /* index of this batch in the epoch */
} tr_batch_t;

typedef struct {
    uint64_t samples;            /* in the split, all ranks */
    uint64_t steps_per_epoch;    /* batches this rank delivers per epoch */
    int classes;                 /* 1 + the largest label seen in the index/labels */
    int channels, height, width; /* of the delivered batches */
} tr_loader_info_t;

/* Open the split and start the threads (idle until tr_loader_start_epoch).
 * HORA_ERR_INVALID_ARG names the bad field; HORA_ERR_SYSTEM / HORA_ERR_CORRUPT
 * when the directory cannot be read or holds no such split. */
hora_status_t tr_loader_open(const tr_loader_config_t *config, tr_loader_t **loader_out);
void tr_loader_close(tr_loader_t *loader);
void tr_loader_info(const tr_loader_t *loader, tr_loader_info_t *info);

/* Begin (or resume) an epoch at batch first_step (<= steps_per_epoch);
 * drops any batches queued. Batches the caller still holds stay valid until
 * released. HORA_ERR_INVALID_ARG for first_step past the end. */
hora_status_t tr_loader_start_epoch(tr_loader_t *loader, uint64_t epoch, uint64_t first_step);
/* The same for an epoch whose first sample_offset samples of the permutation
 * were trained on already (by a run with another world size or batch, which
 * a checkpoint resumes): rank r's p-th sample is perm[sample_offset + r +
 * world * p], for p < (samples - sample_offset) / world. Train split only;
 * tr_loader_epoch_steps says how many steps such an epoch has (info's
 * steps_per_epoch is for offset 0). */
hora_status_t tr_loader_start_epoch_at(tr_loader_t *loader, uint64_t epoch, uint64_t first_step,
                                       uint64_t sample_offset);
uint64_t tr_loader_epoch_steps(const tr_loader_t *loader, uint64_t sample_offset);

/* Next batch of the epoch, blocking until decoded. *batch_out = NULL (and
 * HORA_OK) after the epoch's last batch. HORA_ERR_CORRUPT (strict, bad data)
 * and other failures repeat on every call until the next start_epoch;
 * HORA_ERR_INVALID_ARG before start_epoch or when the caller holds every
 * prefetch buffer (waiting would never end). */
hora_status_t tr_loader_next(tr_loader_t *loader, tr_batch_t **batch_out);
void tr_loader_release(tr_loader_t *loader, tr_batch_t *batch);

/* Bad samples met so far (each time met, plus shards left out at open). */
uint64_t tr_loader_bad_count(const tr_loader_t *loader);

#endif
