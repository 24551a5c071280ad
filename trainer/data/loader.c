/*
 * loader.c - the loader's threads, its ring of batch buffers and the epoch
 * order (loader.h). What happens to one sample is pipeline.c's job.
 *
 * Order. Train: the epoch's permutation perm of [0, count) comes from the
 * stream (seed, epoch); rank r's p-th sample is perm[r + world * p] for
 * p < count / world (the same number on every rank, so every rank has the
 * same steps; the up to world - 1 left over differ each epoch). An epoch
 * resumed at another world size skips the samples trained on already:
 * perm[offset + r + world * p] (tr_loader_start_epoch_at). Val: no
 * permutation; rank r takes the contiguous part tr_record_partition gives
 * it, and every rank reports ceil(ceil(count / world) / batch) steps so
 * collectives over val batches line up (a rank with a shorter part may end
 * on a batch with count 0). Step s holds positions [s * batch, s * batch +
 * count). A bad sample at permutation position q is replaced by the first
 * good one at q + 1, q + 2, ... (wrapping), again a function of the epoch
 * only.
 *
 * Threads and buffers. prefetch slots each hold one batch; a slot is FREE,
 * FILLING (its step's samples are being made), READY, or HELD (returned by
 * tr_loader_next, until tr_loader_release). Work is handed out under the
 * lock in step order, as chunks of up to `chunk` samples of the step being
 * claimed, so all threads help with the next batch the trainer will ask for
 * instead of each making a whole batch alone. A step takes a slot when its
 * first chunk is claimed, which needs a FREE slot: that bounds how far the
 * threads run ahead. The thread finishing a slot's last chunk marks it READY;
 * tr_loader_next waits for the slot of deliver_step, whichever threads
 * filled it, so batches come out in step order.
 *
 * Restarting. tr_loader_start_epoch stops the claiming, waits until no chunk
 * is in flight (so nothing writes into a slot it is about to reuse), frees
 * FILLING and READY slots (HELD ones stay the caller's), builds the
 * permutation and lets the threads go again from first_step.
 */
#define _GNU_SOURCE
#include "loader.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "base/status.h"
#include "pipeline.h"
#include "rng.h"

#define LOADER_MAX_THREADS 256
#define LOADER_MAX_PREFETCH 1024
#define LOADER_MAX_CHUNK 64
/* Give up on a sample after this many bad ones in a row: the data is
 * mostly broken and skipping on would only hide it. */
#define LOADER_MAX_CONSECUTIVE_BAD 1024

typedef enum {
    SLOT_FREE = 0,
    SLOT_FILLING,
    SLOT_READY,
    SLOT_HELD,
} slot_state_t;

typedef struct {
    tr_batch_t batch; /* first member: tr_loader_release finds the slot from it */
    slot_state_t state;
    int pending;          /* samples of this step not yet made */
    hora_status_t status; /* first failure while filling */
    char error[1024];
} loader_slot_t;

typedef struct {
    tr_loader_t *loader;
    pthread_t thread;
    tr_pipeline_scratch_t scratch;
    tr_record_t record;
} loader_worker_t;

struct tr_loader {
    tr_loader_config_t config; /* path points to path_copy */
    char *path_copy;
    tr_dataset_t dataset;
    tr_pipeline_t pipeline;
    size_t sample_bytes;
    uint64_t per_rank;  /* samples of this rank in the epoch in progress */
    uint64_t offset;    /* train: samples of the permutation skipped at its start (a re-sharded resume) */
    uint64_t val_begin; /* val: first sample of this rank's part */
    uint64_t steps;
    int chunk;

    uint32_t *perm; /* train: (dataset.count) this epoch's permutation */
    atomic_uint_fast64_t bad_count;
    atomic_uchar *reported; /* (count / 8 + 1) bits: bad sample already reported */

    pthread_mutex_t lock;
    pthread_cond_t work_cond;  /* workers: a chunk may be claimable, or shutdown */
    pthread_cond_t ready_cond; /* next: a slot became READY or FREE */
    pthread_cond_t idle_cond;  /* start_epoch: in_flight reached 0 */
    int started;               /* start_epoch was called */
    int active;                /* workers may claim */
    int shutdown;
    uint64_t epoch;
    uint64_t claim_step, deliver_step;
    int claim_offset; /* next sample of claim_step to hand out */
    int claim_slot;   /* slot of claim_step; -1 before its first chunk */
    int in_flight;    /* chunks being made */
    loader_slot_t *slots;
    int slot_count;
    loader_worker_t *workers;
    int worker_count; /* threads started */
};

uint64_t tr_loader_bad_count(const tr_loader_t *loader) { return atomic_load(&((tr_loader_t *)loader)->bad_count); }

/* ---- order ---- */

static void loader_build_permutation(tr_loader_t *l, uint64_t epoch)
{
    uint64_t n = l->dataset.count;
    for (uint64_t i = 0; i < n; i++) l->perm[i] = (uint32_t)i;
    tr_rng_t rng = tr_rng_for(l->config.seed, epoch, 0, TR_RNG_PURPOSE_PERMUTATION);
    for (uint64_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        uint64_t j = tr_rng_below(&rng, i + 1);
        uint32_t t = l->perm[i];
        l->perm[i] = l->perm[j];
        l->perm[j] = t;
    }
}

/* Samples of this rank in step. */
static int loader_step_count(const tr_loader_t *l, uint64_t step)
{
    uint64_t begin = step * (uint64_t)l->config.batch;
    if (begin >= l->per_rank) return 0;
    uint64_t left = l->per_rank - begin;
    return left < (uint64_t)l->config.batch ? (int)left : l->config.batch;
}

/* Position in the split's order of this rank's sample number `position`. */
static uint64_t loader_order_position(const tr_loader_t *l, uint64_t position)
{
    if (l->config.split == TR_SPLIT_TRAIN)
        return l->offset + (uint64_t)l->config.rank + (uint64_t)l->config.world * position;
    return l->val_begin + position;
}

/* ---- making samples (worker threads, no lock held) ---- */

/* Note a skipped bad sample on stderr the first time it is met (a warning:
 * training goes on; under strict it is an error, which the caller prints). */
static void loader_report_bad(tr_loader_t *l, uint64_t index)
{
    unsigned char bit = (unsigned char)(1u << (index % 8));
    if (atomic_fetch_or(&l->reported[index / 8], bit) & bit) return;
    fprintf(stderr, "hora loader: bad sample %" PRIu64 " skipped, the next good one used instead: %s\n", index,
            status_message());
}

/* Make this rank's sample `position` of the epoch into dst; *label. */
static hora_status_t loader_make(loader_worker_t *w, uint64_t epoch, uint64_t position, void *dst, int32_t *label)
{
    tr_loader_t *l = w->loader;
    uint64_t n = l->dataset.count;
    uint64_t q = loader_order_position(l, position);
    uint64_t tries = n < LOADER_MAX_CONSECUTIVE_BAD ? n : LOADER_MAX_CONSECUTIVE_BAD;
    for (uint64_t attempt = 0; attempt < tries; attempt++) {
        uint64_t at = (q + attempt) % n;
        uint64_t index = l->perm ? l->perm[at] : at;
        tr_sample_t sample;
        hora_status_t status = tr_dataset_read(&l->dataset, index, &w->record, &sample);
        if (status == HORA_OK) status = tr_pipeline_sample(&l->pipeline, &w->scratch, epoch, index, &sample, dst);
        if (status == HORA_OK) {
            *label = sample.label;
            return HORA_OK;
        }
        if (status != HORA_ERR_CORRUPT && status != HORA_ERR_SYSTEM)
            return status; /* out of memory and the like: not the data's fault */
        atomic_fetch_add(&l->bad_count, 1);
        if (l->config.strict)
            return status_set(HORA_ERR_CORRUPT, "bad sample %" PRIu64 " (strict: stopping): %s", index,
                              status_message());
        loader_report_bad(l, index);
    }
    return status_set(HORA_ERR_CORRUPT,
                      "%s: %" PRIu64 " bad samples in a row from epoch "
                      "position %" PRIu64 "; last: %s",
                      l->config.path, tries, q, status_message());
}

/* Samples [begin, end) of slot's batch; past its count: zeros, label -1. */
static hora_status_t loader_make_chunk(loader_worker_t *w, loader_slot_t *slot, int begin, int end)
{
    tr_loader_t *l = w->loader;
    tr_batch_t *b = &slot->batch;
    for (int j = begin; j < end; j++) {
        uint8_t *dst = (uint8_t *)b->data + (size_t)j * l->sample_bytes;
        if (j >= b->count) {
            memset(dst, 0, l->sample_bytes);
            b->labels[j] = -1;
            continue;
        }
        uint64_t position = b->step * (uint64_t)l->config.batch + (uint64_t)j;
        hora_status_t status = loader_make(w, b->epoch, position, dst, &b->labels[j]);
        if (status != HORA_OK) return status;
    }
    return HORA_OK;
}

/* ---- the ring (lock held) ---- */

static int loader_free_slot(const tr_loader_t *l)
{
    for (int i = 0; i < l->slot_count; i++)
        if (l->slots[i].state == SLOT_FREE) return i;
    return -1;
}

static int loader_can_claim(const tr_loader_t *l)
{
    return l->active && l->claim_step < l->steps && (l->claim_slot >= 0 || loader_free_slot(l) >= 0);
}

static void *loader_worker_main(void *arg)
{
    loader_worker_t *w = arg;
    tr_loader_t *l = w->loader;
    pthread_mutex_lock(&l->lock);
    for (;;) {
        while (!l->shutdown && !loader_can_claim(l)) pthread_cond_wait(&l->work_cond, &l->lock);
        if (l->shutdown) break;
        if (l->claim_slot < 0) {
            int s = loader_free_slot(l);
            loader_slot_t *slot = &l->slots[s];
            slot->state = SLOT_FILLING;
            slot->pending = l->config.batch;
            slot->status = HORA_OK;
            slot->error[0] = '\0';
            slot->batch.epoch = l->epoch;
            slot->batch.step = l->claim_step;
            slot->batch.count = loader_step_count(l, l->claim_step);
            l->claim_slot = s;
        }
        loader_slot_t *slot = &l->slots[l->claim_slot];
        int begin = l->claim_offset;
        int end = begin + l->chunk < l->config.batch ? begin + l->chunk : l->config.batch;
        l->claim_offset = end;
        if (end == l->config.batch) {
            l->claim_step++;
            l->claim_offset = 0;
            l->claim_slot = -1;
        }
        l->in_flight++;
        pthread_mutex_unlock(&l->lock);

        hora_status_t status = loader_make_chunk(w, slot, begin, end);

        pthread_mutex_lock(&l->lock);
        l->in_flight--;
        if (status != HORA_OK && slot->status == HORA_OK) {
            slot->status = status;
            snprintf(slot->error, sizeof(slot->error), "%s", status_message());
        }
        slot->pending -= end - begin;
        if (slot->pending == 0) {
            slot->state = SLOT_READY;
            pthread_cond_broadcast(&l->ready_cond);
        }
        if (l->in_flight == 0) pthread_cond_broadcast(&l->idle_cond);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* ---- API ---- */

static hora_status_t loader_check_config(const tr_loader_config_t *c)
{
    if (!c->path) return status_set(HORA_ERR_INVALID_ARG, "loader config: path is NULL");
    if (c->split != TR_SPLIT_TRAIN && c->split != TR_SPLIT_VAL)
        return status_set(HORA_ERR_INVALID_ARG, "loader config: split %d", (int)c->split);
    if (c->world < 1 || c->rank < 0 || c->rank >= c->world)
        return status_set(HORA_ERR_INVALID_ARG, "loader config: rank %d of world %d", c->rank, c->world);
    if (c->batch < 1) return status_set(HORA_ERR_INVALID_ARG, "loader config: batch %d: must be >= 1", c->batch);
    if (c->threads < 0 || c->threads > LOADER_MAX_THREADS)
        return status_set(HORA_ERR_INVALID_ARG, "loader config: threads %d: 0..%d", c->threads, LOADER_MAX_THREADS);
    if (c->prefetch < 0 || c->prefetch > LOADER_MAX_PREFETCH)
        return status_set(HORA_ERR_INVALID_ARG, "loader config: prefetch %d: 0..%d", c->prefetch, LOADER_MAX_PREFETCH);
    return HORA_OK;
}

/* Train: samples per rank and steps of an epoch that skips the first offset
 * samples of its permutation. */
static void loader_train_plan(const tr_loader_t *l, uint64_t offset, uint64_t *per_rank, uint64_t *steps)
{
    const tr_loader_config_t *c = &l->config;
    uint64_t n = l->dataset.count, batch = (uint64_t)c->batch, world = (uint64_t)c->world;
    *per_rank = offset < n ? (n - offset) / world : 0;
    *steps = c->drop_last ? *per_rank / batch : (*per_rank + batch - 1) / batch;
}

/* Samples per rank and steps per epoch (see the top of this file). */
static hora_status_t loader_plan_epoch(tr_loader_t *l)
{
    const tr_loader_config_t *c = &l->config;
    uint64_t n = l->dataset.count, batch = (uint64_t)c->batch, world = (uint64_t)c->world;
    if (c->split == TR_SPLIT_TRAIN) {
        loader_train_plan(l, 0, &l->per_rank, &l->steps);
    } else {
        uint64_t end;
        tr_record_partition(n, (unsigned)c->rank, (unsigned)c->world, &l->val_begin, &end);
        l->per_rank = end - l->val_begin;
        uint64_t longest = (n + world - 1) / world, shortest = n / world;
        l->steps = c->drop_last ? shortest / batch : (longest + batch - 1) / batch;
    }
    if (l->steps == 0)
        return status_set(HORA_ERR_INVALID_ARG,
                          "%s: %" PRIu64 " samples in the %s split "
                          "give no %sbatch of %d on each of %d ranks",
                          c->path, n, c->split == TR_SPLIT_TRAIN ? "train" : "val", c->drop_last ? "full " : "",
                          c->batch, c->world);
    return HORA_OK;
}

static hora_status_t loader_alloc(tr_loader_t *l)
{
    const tr_loader_config_t *c = &l->config;
    int threads = c->threads > 0 ? c->threads : 1;
    l->slot_count = c->prefetch > 0 ? c->prefetch : 2 * threads;
    l->chunk = (c->batch + threads - 1) / threads;
    if (l->chunk > LOADER_MAX_CHUNK) l->chunk = LOADER_MAX_CHUNK;
    l->sample_bytes = tr_pipeline_sample_bytes(&l->pipeline);
    if (c->split == TR_SPLIT_TRAIN) {
        l->perm = malloc(l->dataset.count * sizeof(*l->perm));
        if (!l->perm) return status_set(HORA_ERR_NO_MEMORY, "out of memory for the permutation");
    }
    l->reported = calloc(l->dataset.count / 8 + 1, sizeof(*l->reported));
    l->slots = calloc((size_t)l->slot_count, sizeof(*l->slots));
    l->workers = calloc((size_t)threads, sizeof(*l->workers));
    if (!l->reported || !l->slots || !l->workers) return status_set(HORA_ERR_NO_MEMORY, "out of memory");
    if (!c->alloc != !c->dealloc)
        return status_set(HORA_ERR_INVALID_ARG, "loader config: alloc and dealloc go together");
    for (int i = 0; i < l->slot_count; i++) {
        tr_batch_t *b = &l->slots[i].batch;
        size_t data_bytes = (size_t)c->batch * l->sample_bytes;
        /* 64-byte aligned for the vector loads of whoever consumes it. */
        if (c->alloc) {
            b->data = c->alloc(c->alloc_ctx, data_bytes);
            if (!b->data)
                return status_set(HORA_ERR_NO_MEMORY,
                                  "the batch allocator gave no memory for %d batches "
                                  "of %zu bytes",
                                  l->slot_count, data_bytes);
        } else if (posix_memalign(&b->data, 64, data_bytes) != 0) {
            b->data = NULL;
            return status_set(HORA_ERR_NO_MEMORY, "out of memory for %d batches of %zu bytes", l->slot_count,
                              data_bytes);
        }
        b->labels = malloc((size_t)c->batch * sizeof(*b->labels));
        if (!b->labels) return status_set(HORA_ERR_NO_MEMORY, "out of memory");
    }
    int need_jpeg = l->dataset.kind == TR_PAYLOAD_KIND_JPEG;
    for (int i = 0; i < threads; i++) {
        l->workers[i].loader = l;
        hora_status_t status = tr_pipeline_scratch_init(&l->pipeline, need_jpeg, &l->workers[i].scratch);
        if (status != HORA_OK) return status;
    }
    return HORA_OK;
}

static void loader_destroy(tr_loader_t *l)
{
    int threads = l->config.threads > 0 ? l->config.threads : 1;
    for (int i = 0; l->workers && i < threads; i++) {
        tr_pipeline_scratch_free(&l->workers[i].scratch);
        tr_record_free(&l->workers[i].record);
    }
    for (int i = 0; l->slots && i < l->slot_count; i++) {
        if (l->config.dealloc)
            l->config.dealloc(l->config.alloc_ctx, l->slots[i].batch.data);
        else
            free(l->slots[i].batch.data);
        free(l->slots[i].batch.labels);
    }
    free(l->workers);
    free(l->slots);
    free((void *)l->reported);
    free(l->perm);
    tr_dataset_free(&l->dataset);
    free(l->path_copy);
    free(l);
}

hora_status_t tr_loader_open(const tr_loader_config_t *config, tr_loader_t **loader_out)
{
    if (!config || !loader_out) return status_set(HORA_ERR_INVALID_ARG, "tr_loader_open: NULL argument");
    hora_status_t status = loader_check_config(config);
    if (status != HORA_OK) return status;
    tr_loader_t *l = calloc(1, sizeof(*l));
    if (!l) return status_set(HORA_ERR_NO_MEMORY, "out of memory");
    l->config = *config;
    l->path_copy = strdup(config->path);
    if (!l->path_copy) {
        free(l);
        return status_set(HORA_ERR_NO_MEMORY, "out of memory");
    }
    l->config.path = l->path_copy;
    atomic_init(&l->bad_count, 0);
    l->claim_slot = -1;
    status = tr_dataset_open(l->config.path, l->config.split, l->config.strict, &l->dataset);
    if (status != HORA_OK) goto err_free;
    /* Shards left out at open are bad data too. */
    atomic_store(&l->bad_count, l->dataset.bad_shard_count);
    status = tr_pipeline_init(&l->pipeline, &l->config, &l->dataset);
    if (status == HORA_OK) status = loader_plan_epoch(l);
    if (status == HORA_OK) status = loader_alloc(l);
    if (status != HORA_OK) goto err_free;
    if (pthread_mutex_init(&l->lock, NULL) != 0) {
        status = status_set(HORA_ERR_SYSTEM, "pthread_mutex_init failed");
        goto err_free;
    }
    pthread_cond_init(&l->work_cond, NULL);
    pthread_cond_init(&l->ready_cond, NULL);
    pthread_cond_init(&l->idle_cond, NULL);
    int threads = l->config.threads > 0 ? l->config.threads : 1;
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&l->workers[i].thread, NULL, loader_worker_main, &l->workers[i]) != 0) {
            status = status_set(HORA_ERR_SYSTEM, "cannot start loader thread %d of %d", i, threads);
            goto err_threads;
        }
        l->worker_count++;
    }
    *loader_out = l;
    return HORA_OK;

err_threads:
    /* The workers started so far, the locks and the rest: what close undoes. */
    tr_loader_close(l);
    return status;
err_free:
    loader_destroy(l);
    return status;
}

void tr_loader_close(tr_loader_t *l)
{
    if (!l) return;
    pthread_mutex_lock(&l->lock);
    l->shutdown = 1;
    pthread_cond_broadcast(&l->work_cond);
    pthread_mutex_unlock(&l->lock);
    for (int i = 0; i < l->worker_count; i++) pthread_join(l->workers[i].thread, NULL);
    pthread_cond_destroy(&l->idle_cond);
    pthread_cond_destroy(&l->ready_cond);
    pthread_cond_destroy(&l->work_cond);
    pthread_mutex_destroy(&l->lock);
    loader_destroy(l);
}

void tr_loader_info(const tr_loader_t *l, tr_loader_info_t *info)
{
    *info = (tr_loader_info_t){.samples = l->dataset.count,
                               .steps_per_epoch = tr_loader_epoch_steps(l, 0),
                               .classes = l->dataset.classes,
                               .channels = l->pipeline.channels,
                               .height = l->pipeline.height,
                               .width = l->pipeline.width};
}

uint64_t tr_loader_epoch_steps(const tr_loader_t *l, uint64_t sample_offset)
{
    if (l->config.split != TR_SPLIT_TRAIN) return l->steps;
    uint64_t per_rank, steps;
    loader_train_plan(l, sample_offset, &per_rank, &steps);
    return steps;
}

hora_status_t tr_loader_start_epoch(tr_loader_t *l, uint64_t epoch, uint64_t first_step)
{
    return tr_loader_start_epoch_at(l, epoch, first_step, 0);
}

hora_status_t tr_loader_start_epoch_at(tr_loader_t *l, uint64_t epoch, uint64_t first_step, uint64_t sample_offset)
{
    uint64_t per_rank = l->per_rank, steps = l->steps;
    if (l->config.split == TR_SPLIT_TRAIN)
        loader_train_plan(l, sample_offset, &per_rank, &steps);
    else if (sample_offset)
        return status_set(HORA_ERR_INVALID_ARG, "start_epoch: a sample offset needs the train split");
    if (sample_offset > l->dataset.count)
        return status_set(HORA_ERR_INVALID_ARG, "start_epoch: sample offset %" PRIu64 " of %" PRIu64 " samples",
                          sample_offset, l->dataset.count);
    if (first_step > steps)
        return status_set(HORA_ERR_INVALID_ARG,
                          "start_epoch: step %" PRIu64 " of an epoch "
                          "of %" PRIu64,
                          first_step, steps);
    pthread_mutex_lock(&l->lock);
    l->active = 0;
    while (l->in_flight > 0) pthread_cond_wait(&l->idle_cond, &l->lock);
    for (int i = 0; i < l->slot_count; i++)
        if (l->slots[i].state == SLOT_FILLING || l->slots[i].state == SLOT_READY) l->slots[i].state = SLOT_FREE;
    pthread_mutex_unlock(&l->lock);

    /* No worker reads perm now: none is in flight and none may claim. */
    if (l->perm) loader_build_permutation(l, epoch);

    pthread_mutex_lock(&l->lock);
    l->epoch = epoch;
    l->offset = sample_offset;
    l->per_rank = per_rank;
    l->steps = steps;
    l->claim_step = l->deliver_step = first_step;
    l->claim_offset = 0;
    l->claim_slot = -1;
    l->started = 1;
    l->active = 1;
    pthread_cond_broadcast(&l->work_cond);
    pthread_mutex_unlock(&l->lock);
    return HORA_OK;
}

hora_status_t tr_loader_next(tr_loader_t *l, tr_batch_t **batch_out)
{
    hora_status_t status = HORA_OK;
    loader_slot_t *found = NULL;
    pthread_mutex_lock(&l->lock);
    if (!l->started) {
        status = status_set(HORA_ERR_INVALID_ARG, "tr_loader_next before tr_loader_start_epoch");
        goto out;
    }
    if (l->deliver_step >= l->steps) goto out; /* end of the epoch: NULL */
    for (;;) {
        for (int i = 0; i < l->slot_count && !found; i++) {
            loader_slot_t *s = &l->slots[i];
            if (s->state == SLOT_READY && s->batch.step == l->deliver_step) found = &l->slots[i];
        }
        if (found) break;
        /* Nothing claimed for deliver_step yet and no slot to claim it into:
         * the caller holds every buffer and waiting would never end. */
        if (l->claim_step == l->deliver_step && l->claim_slot < 0 && loader_free_slot(l) < 0) {
            status = status_set(HORA_ERR_INVALID_ARG,
                                "tr_loader_next: all %d batch buffers "
                                "are held; release batches first (or raise prefetch)",
                                l->slot_count);
            goto out;
        }
        pthread_cond_wait(&l->ready_cond, &l->lock);
    }
    if (found->status != HORA_OK) {
        /* Stays READY with its error: every later call says the same until
         * the next start_epoch. */
        status = found->status;
        status_set(status, "%s", found->error);
        found = NULL;
        goto out;
    }
    found->state = SLOT_HELD;
    l->deliver_step++;
out:
    pthread_mutex_unlock(&l->lock);
    if (status == HORA_OK) *batch_out = found ? &found->batch : NULL;
    return status;
}

void tr_loader_release(tr_loader_t *l, tr_batch_t *batch)
{
    if (!batch) return;
    loader_slot_t *slot = (loader_slot_t *)batch; /* batch is the slot's first member */
    pthread_mutex_lock(&l->lock);
    if (slot >= l->slots && slot < l->slots + l->slot_count && slot->state == SLOT_HELD) {
        slot->state = SLOT_FREE;
        pthread_cond_broadcast(&l->work_cond);
        pthread_cond_broadcast(&l->ready_cond);
    }
    pthread_mutex_unlock(&l->lock);
}
