/* coord_exec.c - execution of responses (every rank runs the same list in
 * the same order), fused as coord_fuse.c planned them.
 *
 * A fused allreduce runs in place, with no copy at all, when this rank's
 * tensors are in place (send == recv), uncompressed, and already lie in shared
 * memory at exactly those offsets from the first one - the trainer's gradient
 * arena, laid out in backprop order. Otherwise they are copied (scaled, cast)
 * into the fusion buffer and back. Each rank decides for itself: the layout,
 * not the memory, is what the ranks agree on. Buffer contents are touched
 * only through the data engine of the request's memory kind (coll/engine.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/status.h"
#include "coll/engine.h"
#include "coord/coord_cache.h"
#include "coord/coord_core.h"
#include "coord/coord_exec.h"
#include "coord/coord_fuse.h"
#include "coord/coord_set.h"
#include "coord/coord_flight.h"
#include "coord/timeline.h"

static hora_status_t coord_buffer(struct coord *c, hora_memory_t memory, void **buf, size_t *have, size_t bytes,
                                  const char *what)
{
    if (*have >= bytes) return HORA_OK;
    if (*buf && memory == HORA_MEMORY_HOST) mem_pool_release(c->pool, *buf);
    if (*buf && memory != HORA_MEMORY_HOST) mem_dev_release(c->dev, *buf);
    *buf = NULL;
    *have = 0;
    if (memory == HORA_MEMORY_HOST)
        HORA_CHECK(mem_pool_alloc(c->pool, bytes ? bytes : 1, what, buf));
    else
        HORA_CHECK(mem_dev_alloc(c->dev, bytes ? bytes : 1, what, buf));
    *have = bytes;
    return HORA_OK;
}

struct coord_phase_ctx {
    struct coord *c;
    const struct coord_response *resp;
};

static void coord_timeline_span(struct coord *c, const struct coord_response *r, const char *phase, int begin,
                                const char *args)
{
    if (!c->tl) return;
    for (int t = 0; t < r->ntensors; t++) {
        if (begin)
            timeline_begin(c->tl, r->names[t], phase, -1, args);
        else
            timeline_end(c->tl, r->names[t], phase, -1, args);
    }
}

static void coord_on_phase(void *ctx, const char *phase, int begin)
{
    struct coord_phase_ctx *p = ctx;
    coord_timeline_span(p->c, p->resp, phase, begin, NULL);
}

static void coord_complete_all(struct coord *c, struct hora_request **reqs, int n, hora_status_t status,
                               const char *error)
{
    for (int t = 0; t < n; t++)
        if (reqs[t]) coord_finish_pending(c, reqs[t], status, error);
}

/* [p, p + bytes) lies in this rank's pool of that memory kind: the
 * transports can share it. */
static int coord_in_pool(const struct coord *c, hora_memory_t memory, const void *p, size_t bytes)
{
    uint64_t off;
    if (memory == HORA_MEMORY_CUDA) return mem_dev_offset(c->dev, p, bytes ? bytes : 1, &off);
    return mem_pool_offset(c->pool, p, bytes ? bytes : 1, &off);
}

/* Device requests: block until each one's data is ready (its ready event);
 * peers may read it as soon as the collective starts. */
static hora_status_t coord_wait_ready(const struct coll_engine_ops *e, struct hora_request **reqs, int n)
{
    for (int t = 0; t < n; t++)
        if (reqs[t] && reqs[t]->ready_event) HORA_CHECK(e->event_wait(reqs[t]->ready_event));
    return HORA_OK;
}

/* Plain copies in and out of the fusion buffer (no scaling, no cast) as one
 * batch: on a device one launch instead of one per tensor. Alignment gaps
 * are copied from a block of zeros (they are shorter than HORA_ALIGN_BYTES).
 * into: tensors into the buffer, else out of it. */
static hora_status_t coord_copy_plain(struct coord *c, const struct coll_engine_ops *e, const struct coord_response *r,
                                      struct hora_request **reqs, const size_t *offs, uint8_t *work, size_t es,
                                      hora_memory_t memory, int into)
{
    struct coll_copy *copies = malloc(sizeof(*copies) * 2 * (size_t)r->ntensors);
    hora_status_t status = HORA_OK;
    int n = 0;
    if (!copies) return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
    if (into && !c->gap_zeros[memory]) {
        status = coord_buffer(c, memory, &c->gap_zeros[memory], &c->gap_zeros_bytes[memory], HORA_ALIGN_BYTES,
                              "the coordinator's block of zeros");
        if (status == HORA_OK) status = e->zero(c->gap_zeros[memory], HORA_ALIGN_BYTES);
    }
    size_t at = 0;
    for (int t = 0; t < r->ntensors && status == HORA_OK; t++) {
        const size_t bytes = r->metas[t].count * es;
        if (into && offs[t] > at) copies[n++] = (struct coll_copy){work + at, c->gap_zeros[memory], offs[t] - at};
        at = offs[t] + bytes;
        if (!reqs[t]) {
            if (into) status = e->zero(work + offs[t], bytes); /* joined: contribute zeros */
            continue;
        }
        copies[n++] = into ? (struct coll_copy){work + offs[t], reqs[t]->send, bytes}
                           : (struct coll_copy){reqs[t]->recv, work + offs[t], bytes};
    }
    if (status == HORA_OK) status = e->copy_many(copies, n);
    free(copies);
    return status;
}

/* Copy one tensor into the fusion buffer (cast to the wire dtype, scaled). */
static hora_status_t coord_pack(const struct coll_engine_ops *e, const struct coord_meta *m, const void *src, void *dst,
                                hora_dtype_t dtype, hora_dtype_t wire)
{
    if (!src) return e->zero(dst, m->count * hora_dtype_size(wire)); /* joined: contribute zeros */
    if (wire != dtype) {
        HORA_CHECK(e->cast(dst, wire, src, dtype, m->count));
        return m->prescale != 1.0 ? e->scale(dst, dst, m->count, wire, m->prescale) : HORA_OK;
    }
    if (m->prescale != 1.0) return e->scale(dst, src, m->count, dtype, m->prescale);
    return e->copy(dst, src, m->count * hora_dtype_size(dtype));
}

/* And back out of it. */
static hora_status_t coord_unpack(const struct coll_engine_ops *e, const struct coord_meta *m, void *src, void *dst,
                                  hora_dtype_t dtype, hora_dtype_t wire)
{
    if (wire != dtype) {
        if (m->postscale != 1.0) HORA_CHECK(e->scale(src, src, m->count, wire, m->postscale));
        return e->cast(dst, dtype, src, wire, m->count);
    }
    if (m->postscale != 1.0) return e->scale(dst, src, m->count, dtype, m->postscale);
    return e->copy(dst, src, m->count * hora_dtype_size(dtype));
}

/* The data path: coll's channels for the world, MPI for a process set. */
static hora_status_t coord_data_allreduce(struct coord *c, hora_memory_t memory, void *work, size_t count,
                                          hora_dtype_t dtype, hora_op_t op, const struct coll_hooks *hooks)
{
    if (c->members) return coord_set_allreduce(c, work, count, dtype, op);
    return coll_allreduce(c->coll, COLL_PURPOSE_COORD, memory, work, work, count, dtype, op, hooks);
}

static hora_status_t coord_data_broadcast(struct coord *c, hora_memory_t memory, void *buf, size_t count,
                                          hora_dtype_t dtype, int root)
{
    if (!c->members) return coll_broadcast(c->coll, COLL_PURPOSE_COORD, memory, buf, count, dtype, root);
    /* root is a world rank: its place in the set. */
    int place = -1;
    for (int q = 0; q < c->size && place < 0; q++)
        if (c->members[q] == root) place = q;
    if (place < 0) return status_fail(HORA_ERR_INTERNAL, "coordinator: broadcast root %d is not in the set", root);
    return coord_set_broadcast(c, buf, count, dtype, place);
}

static hora_status_t coord_data_allgatherv(struct coord *c, hora_memory_t memory, const void *send, void *recv,
                                           const size_t *counts, hora_dtype_t dtype)
{
    if (c->members) return coord_set_allgatherv(c, send, recv, counts, dtype);
    return coll_allgatherv(c->coll, COLL_PURPOSE_COORD, memory, send, recv, counts, dtype);
}

static hora_status_t coord_run_allreduce(struct coord *c, struct coord_response *r, struct hora_request **reqs)
{
    const struct coord_meta *m = &r->metas[0];
    const hora_dtype_t dtype = (hora_dtype_t)m->dtype, wire = coord_wire_dtype(m);
    const hora_memory_t memory = (hora_memory_t)m->memory;
    const struct coll_engine_ops *engine = coll_engine_for(memory);
    const size_t es = hora_dtype_size(dtype), wes = hora_dtype_size(wire);
    size_t *offs = malloc((size_t)r->ntensors * sizeof(size_t));
    size_t total_bytes = 0;
    hora_status_t status = HORA_OK;

    if (!offs) return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
    if (!engine) {
        free(offs);
        return status_fail(HORA_ERR_UNSUPPORTED, "coordinator: no data engine for memory kind %u", m->memory);
    }
    for (int t = 0; t < r->ntensors; t++) {
        total_bytes = coord_align(total_bytes);
        offs[t] = total_bytes;
        total_bytes += r->metas[t].count * wes;
    }
    /* Zero copy: uncompressed, in place, shared, laid out exactly like the fusion. */
    int zero_copy = wire == dtype && reqs[0] != NULL && coord_in_pool(c, memory, reqs[0]->recv, 1);
    uint8_t *base = reqs[0] ? reqs[0]->recv : NULL;
    for (int t = 0; t < r->ntensors && zero_copy; t++)
        zero_copy = reqs[t] && reqs[t]->send == reqs[t]->recv && (uint8_t *)reqs[t]->recv == base + offs[t] &&
                    coord_in_pool(c, memory, reqs[t]->recv, r->metas[t].count * es);
    /* Plain copies batch (copy_many); scaling and casts go tensor by tensor. */
    const int plain = wire == dtype && m->prescale == 1.0 && m->postscale == 1.0;
    struct coord_phase_ctx pctx = {c, r};
    struct coll_hooks hooks = {.chunk_bytes = c->settings.chunk_bytes,
                               .on_phase = c->tl ? coord_on_phase : NULL,
                               .ctx = &pctx,
                               .reproducible = (int)m->reproducible};
    const char *path = zero_copy ? "{\"path\":\"zero-copy\"}" : "{\"path\":\"fusion-buffer\"}";
    coord_timeline_span(c, r, "QUEUE", 0, NULL);
    coord_timeline_span(c, r, "ALLREDUCE", 1, path);

    uint8_t *work = base;
    status = coord_wait_ready(engine, reqs, r->ntensors);
    if (status < 0) goto out;
    if (zero_copy) {
        for (int t = 0; t < r->ntensors && m->prescale != 1.0 && status == HORA_OK; t++)
            status = engine->scale(reqs[t]->recv, reqs[t]->recv, r->metas[t].count, dtype, m->prescale);
    } else {
        status = coord_buffer(c, memory, &c->fusion_buf[memory], &c->fusion_bytes[memory], total_bytes,
                              memory == HORA_MEMORY_HOST
                                  ? "the coordinator's fusion buffer (see HORA_FUSION_THRESHOLD)"
                                  : "the coordinator's device fusion buffer (see HORA_FUSION_THRESHOLD and "
                                    "HORA_CUDA_POOL_BYTES)");
        if (status < 0) goto out;
        work = c->fusion_buf[memory];
        coord_timeline_span(c, r, "MEMCPY_IN_FUSION", 1, NULL);
        engine->batch_begin();
        if (plain && memory == HORA_MEMORY_CUDA) {
            status = coord_copy_plain(c, engine, r, reqs, offs, work, es, memory, 1);
        } else {
            size_t at = 0;
            for (int t = 0; t < r->ntensors && status == HORA_OK; t++) {
                /* Alignment gaps get zeros so every byte reduced is defined. */
                status = engine->zero(work + at, offs[t] - at);
                at = offs[t] + r->metas[t].count * wes;
                if (status == HORA_OK)
                    status =
                        coord_pack(engine, &r->metas[t], reqs[t] ? reqs[t]->send : NULL, work + offs[t], dtype, wire);
            }
        }
        hora_status_t packed = engine->batch_end();
        if (status == HORA_OK) status = packed;
        coord_timeline_span(c, r, "MEMCPY_IN_FUSION", 0, NULL);
    }
    if (status < 0) goto out;
    status = coord_data_allreduce(c, memory, work, total_bytes / wes, wire, (hora_op_t)m->op, &hooks);
    if (status < 0) goto out;
    c->cycle_bytes += total_bytes;
    if (zero_copy) {
        for (int t = 0; t < r->ntensors && m->postscale != 1.0 && status == HORA_OK; t++)
            status = engine->scale(reqs[t]->recv, reqs[t]->recv, r->metas[t].count, dtype, m->postscale);
    } else {
        coord_timeline_span(c, r, "MEMCPY_OUT", 1, NULL);
        engine->batch_begin();
        if (plain && memory == HORA_MEMORY_CUDA) {
            status = coord_copy_plain(c, engine, r, reqs, offs, work, es, memory, 0);
        } else {
            for (int t = 0; t < r->ntensors && status == HORA_OK; t++)
                if (reqs[t]) status = coord_unpack(engine, &r->metas[t], work + offs[t], reqs[t]->recv, dtype, wire);
        }
        hora_status_t unpacked = engine->batch_end();
        if (status == HORA_OK) status = unpacked;
        coord_timeline_span(c, r, "MEMCPY_OUT", 0, NULL);
    }
out:
    coord_timeline_span(c, r, "ALLREDUCE", 0, NULL);
    free(offs);
    return status;
}

/* Reduce-scatter along the first dimension: the reduction of every rank's
 * tensor (scaled into the fusion buffer), of which this rank keeps its rows
 * (hora_shard of the first dimension). When the rows divide evenly, those
 * are coll_reduce_scatter's element shards; otherwise the whole tensor is
 * all-reduced and this rank's rows copied out. */
static hora_status_t coord_run_reducescatter(struct coord *c, struct coord_response *r, struct hora_request **reqs)
{
    const struct coord_meta *m = &r->metas[0];
    const hora_dtype_t dtype = (hora_dtype_t)m->dtype;
    const hora_memory_t memory = (hora_memory_t)m->memory;
    const struct coll_engine_ops *engine = coll_engine_for(memory);
    const size_t es = hora_dtype_size(dtype), d0 = (size_t)m->dims[0];
    const size_t row = d0 ? m->count / d0 : 0;
    size_t first_row, rows;
    hora_status_t status = HORA_OK;

    coord_timeline_span(c, r, "QUEUE", 0, NULL);
    if (!engine) return status_fail(HORA_ERR_UNSUPPORTED, "coordinator: no data engine for memory kind %u", m->memory);
    if (m->count == 0) return HORA_OK;
    coll_shard(d0, c->size, c->rank, &first_row, &rows);
    void *recv = reqs[0] ? reqs[0]->recv : NULL;
    /* (A process set's MPI path has no reduce-scatter of its own.) */
    const int even = d0 % (size_t)c->size == 0 && !c->members;
    status = coord_wait_ready(engine, reqs, 1);
    if (status == HORA_OK)
        status = coord_buffer(c, memory, &c->fusion_buf[memory], &c->fusion_bytes[memory], m->count * es,
                              memory == HORA_MEMORY_HOST ? "the coordinator's fusion buffer (a reduce-scatter)"
                                                         : "the coordinator's device fusion buffer (a reduce-scatter; "
                                                           "see HORA_CUDA_POOL_BYTES)");
    if (status < 0) return status;
    uint8_t *work = c->fusion_buf[memory];
    /* This rank's rows in the all-reduced tensor (the uneven path). */
    uint8_t *mine = work + first_row * row * es;
    coord_timeline_span(c, r, "REDUCESCATTER", 1, even ? "{\"path\":\"reduce-scatter\"}" : "{\"path\":\"allreduce\"}");
    engine->batch_begin();
    status = coord_pack(engine, m, reqs[0] ? reqs[0]->send : NULL, work, dtype, dtype);
    hora_status_t packed = engine->batch_end();
    if (status == HORA_OK) status = packed;
    if (status == HORA_OK && even) {
        /* The output may not overlap the input: this rank's shard goes to
         * recv (or, with no request here, to a spare copy in place). */
        void *out = recv;
        if (!out) {
            status = coord_buffer(c, memory, &c->zeros[memory], &c->zeros_bytes[memory], rows * row * es,
                                  "the coordinator's reduce-scatter output of a joined rank");
            out = c->zeros[memory];
        }
        if (status == HORA_OK)
            status =
                coll_reduce_scatter(c->coll, COLL_PURPOSE_COORD, memory, work, out, m->count, dtype, (hora_op_t)m->op);
        if (status == HORA_OK && recv && m->postscale != 1.0)
            status = engine->scale(recv, recv, rows * row, dtype, m->postscale);
    } else if (status == HORA_OK) {
        struct coord_phase_ctx pctx = {c, r};
        struct coll_hooks hooks = {
            .chunk_bytes = c->settings.chunk_bytes, .on_phase = c->tl ? coord_on_phase : NULL, .ctx = &pctx};
        status = coord_data_allreduce(c, memory, work, m->count, dtype, (hora_op_t)m->op, &hooks);
        if (status == HORA_OK && recv && rows) {
            engine->batch_begin();
            status = m->postscale != 1.0 ? engine->scale(recv, mine, rows * row, dtype, m->postscale)
                                         : engine->copy(recv, mine, rows * row * es);
            hora_status_t copied = engine->batch_end();
            if (status == HORA_OK) status = copied;
        }
    }
    coord_timeline_span(c, r, "REDUCESCATTER", 0, NULL);
    return status;
}

/* Alltoall with MPI_Ialltoallv on the coordinator's communicator. First
 * every rank learns every rank's splits and whether it could allocate its
 * result, so a call no rank can run (a count past MPI's int, no memory)
 * fails on every rank alike and the coordinator goes on (*agreed = 1).
 * Other failures stop the coordinator; the buffers of an alltoall still in
 * flight are then kept (MPI may write them yet). */
static hora_status_t coord_run_alltoall(struct coord *c, struct coord_response *r, struct hora_request **reqs,
                                        int *agreed)
{
    const struct coord_meta *m = &r->metas[0];
    const int n = c->size, me = c->rank;
    const size_t es = hora_dtype_size((hora_dtype_t)m->dtype);
    struct hora_request *req = reqs[0];
    uint64_t row = 1;
    for (int d = 1; d < m->ndim; d++) row *= (uint64_t)m->dims[d];
    const size_t w = (size_t)n + 1; /* per rank: n splits, then "allocated" */
    uint64_t *mine = calloc(w, sizeof(uint64_t)), *table = calloc(w * (size_t)n, sizeof(uint64_t));
    int *counts = calloc(4 * (size_t)n, sizeof(int));
    size_t *rank_counts = calloc((size_t)n, sizeof(size_t));
    void *result = NULL;
    char why[256] = "";
    MPI_Request mreq;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    hora_status_t status = HORA_OK;

    coord_timeline_span(c, r, "QUEUE", 0, NULL);
    *agreed = 0;
    if (!mine || !table || !counts || !rank_counts) {
        free(mine);
        free(table);
        free(counts);
        free(rank_counts);
        return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
    }
    for (int q = 0; q < n && req; q++) mine[q] = req->splits[q];
    coord_timeline_span(c, r, "ALLTOALL", 1, NULL);
    /* Exchange the splits (a rank without the request sends nothing). */
    int err = MPI_Iallgather(mine, (int)w, MPI_UINT64_T, table, (int)w, MPI_UINT64_T, c->comm, &mreq);
    status = err == MPI_SUCCESS ? coord_mpi_wait(c, &mreq, c->cfg->timeout_s, "MPI_Iallgather(alltoall splits)")
                                : status_mpi(err, "coordinator MPI_Iallgather(alltoall splits)");
    if (status < 0) {
        free(counts);
        free(rank_counts);
        return status; /* mine and table may still be written: kept */
    }
    /* Every rank's receive counts and displacements must fit an int; all
     * ranks check all of them, so they agree. */
    int *scount = counts, *sdispl = counts + n, *rcount = counts + 2 * n, *rdispl = counts + 3 * n;
    uint64_t total = 0;
    for (int p = 0; p < n && !why[0]; p++) {
        uint64_t sum = 0;
        for (int q = 0; q < n; q++) sum += table[(size_t)q * w + (size_t)p] * row;
        if (sum > INT_MAX)
            snprintf(why, sizeof(why),
                     "alltoall '%s': rank %d would receive %llu elements: at most INT_MAX "
                     "(MPI_Alltoallv's counts)",
                     r->names[0], p, (unsigned long long)sum);
        if (p == me) total = sum;
    }
    uint64_t at = 0;
    for (int q = 0; q < n && !why[0]; q++) {
        scount[q] = (int)(mine[q] * row);
        sdispl[q] = (int)at;
        at += mine[q] * row;
        rcount[q] = (int)(table[(size_t)q * w + (size_t)me] * row);
        rank_counts[q] = (size_t)rcount[q];
        rdispl[q] = q ? rdispl[q - 1] + rcount[q - 1] : 0;
    }
    hora_status_t why_status = why[0] ? HORA_ERR_UNSUPPORTED : HORA_ERR_NO_MEMORY;
    if (!why[0] && !(result = malloc(total * es + 1)))
        snprintf(why, sizeof(why), "alltoall '%s': out of memory for %llu elements on rank %d", r->names[0],
                 (unsigned long long)total, me);
    /* Did every rank allocate? (The int checks came out alike everywhere.) */
    int ok = !why[0], all_ok = 0;
    err = MPI_Iallreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->comm, &mreq);
    status = err == MPI_SUCCESS ? coord_mpi_wait(c, &mreq, c->cfg->timeout_s, "MPI_Iallreduce(alltoall ready)")
                                : status_mpi(err, "coordinator MPI_Iallreduce(alltoall ready)");
    if (status < 0) return status; /* everything kept */
    if (!all_ok) {
        *agreed = 1;
        if (!why[0])
            snprintf(why, sizeof(why), "alltoall '%s': another rank could not allocate its result", r->names[0]);
        status = status_fail(why_status, "%s", why);
        goto out;
    }
    err = MPI_Type_contiguous((int)es, MPI_BYTE, &type);
    if (err == MPI_SUCCESS) err = MPI_Type_commit(&type);
    if (err != MPI_SUCCESS) {
        /* Local and deterministic: every rank fails here alike. */
        status = status_mpi(err, "coordinator MPI_Type_contiguous(alltoall)");
        goto out;
    }
    err = MPI_Ialltoallv(req ? req->send : NULL, scount, sdispl, type, result, rcount, rdispl, type, c->comm, &mreq);
    status = err == MPI_SUCCESS ? coord_mpi_wait(c, &mreq, c->cfg->timeout_s, "MPI_Ialltoallv")
                                : status_mpi(err, "coordinator MPI_Ialltoallv");
    MPI_Type_free(&type);
    if (status < 0) return status; /* everything kept */
    if (req) {
        req->result = result;
        req->result_total = (size_t)total;
        req->rank_counts = rank_counts;
        result = NULL;
        rank_counts = NULL;
    }
out:
    coord_timeline_span(c, r, "ALLTOALL", 0, NULL);
    free(mine);
    free(table);
    free(counts);
    free(rank_counts);
    free(result);
    return status;
}

hora_status_t coord_execute(struct coord *c, struct coord_response *r)
{
    struct hora_request **reqs = calloc((size_t)r->ntensors + 1, sizeof(*reqs));
    hora_status_t status = HORA_OK;
    int agreed = 0;

    if (!reqs) return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
    for (int t = 0; t < r->ntensors; t++) {
        reqs[t] = coord_map_get(&c->pending, r->names[t]);
        if (c->tl) timeline_begin(c->tl, r->names[t], "QUEUE", -1, NULL);
    }
    coord_flight_running(c, reqs, r->ntensors);

    switch (r->kind) {
    case COORD_KIND_ERROR:
        coord_timeline_span(c, r, "QUEUE", 0, NULL);
        coord_complete_all(c, reqs, r->ntensors, r->last_joined >= 0 ? HORA_ERR_INVALID_ARG : HORA_ERR_MISMATCH,
                           r->error);
        break;
    case COORD_KIND_JOIN:
        if (c->join_req) {
            c->join_req->join_last = r->last_joined;
            coord_finish_pending(c, c->join_req, HORA_OK, NULL);
        }
        c->joined = 0;
        break;
    case COORD_KIND_ALLREDUCE: status = coord_run_allreduce(c, r, reqs); break;
    case COORD_KIND_REDUCESCATTER: status = coord_run_reducescatter(c, r, reqs); break;
    case COORD_KIND_ALLTOALL: status = coord_run_alltoall(c, r, reqs, &agreed); break;
    case COORD_KIND_BARRIER:
        /* Negotiation was the barrier: every rank had submitted it. */
        coord_timeline_span(c, r, "QUEUE", 0, NULL);
        break;
    case COORD_KIND_BROADCAST: {
        const struct coord_meta *m = &r->metas[0];
        size_t bytes = m->count * hora_dtype_size((hora_dtype_t)m->dtype);
        const hora_memory_t memory = (hora_memory_t)m->memory;
        void *buf = reqs[0] ? reqs[0]->recv : NULL;
        coord_timeline_span(c, r, "QUEUE", 0, NULL);
        if (!buf) {
            status = coord_buffer(c, memory, &c->zeros[memory], &c->zeros_bytes[memory], bytes,
                                  "the coordinator's broadcast buffer of a joined rank");
            buf = c->zeros[memory];
        }
        const struct coll_engine_ops *engine = coll_engine_for(memory);
        if (status == HORA_OK && engine) status = coord_wait_ready(engine, reqs, 1);
        coord_timeline_span(c, r, "BROADCAST", 1, NULL);
        if (status == HORA_OK) status = coord_data_broadcast(c, memory, buf, m->count, (hora_dtype_t)m->dtype, m->root);
        coord_timeline_span(c, r, "BROADCAST", 0, NULL);
        break;
    }
    case COORD_KIND_ALLGATHER: {
        const struct coord_meta *m = &r->metas[0];
        const size_t es = hora_dtype_size((hora_dtype_t)m->dtype);
        size_t total = 0, *counts = malloc((size_t)c->size * sizeof(size_t));
        coord_timeline_span(c, r, "QUEUE", 0, NULL);
        if (!counts) {
            status = status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
            break;
        }
        for (int q = 0; q < c->size; q++) total += counts[q] = r->rank_counts[q];
        /* The result lives where the request's data does. */
        const hora_memory_t memory = (hora_memory_t)m->memory;
        void *result = NULL;
        if (memory == HORA_MEMORY_HOST) {
            result = malloc(total * es + 1);
            status = result ? HORA_OK
                            : status_fail(HORA_ERR_NO_MEMORY, "allgather '%s': out of memory for %zu elements",
                                          r->names[0], total);
        } else {
            status = mem_dev_malloc(c->dev, total * es, "an allgather's result", &result);
        }
        const struct coll_engine_ops *engine = coll_engine_for(memory);
        if (status == HORA_OK && engine) status = coord_wait_ready(engine, reqs, 1);
        if (status < 0) {
            coord_free_result(memory, result);
            free(counts);
            break;
        }
        coord_timeline_span(c, r, "ALLGATHER", 1, NULL);
        status =
            coord_data_allgatherv(c, memory, reqs[0] ? reqs[0]->send : NULL, result, counts, (hora_dtype_t)m->dtype);
        coord_timeline_span(c, r, "ALLGATHER", 0, NULL);
        if (status == HORA_OK && reqs[0]) {
            reqs[0]->result = result;
            reqs[0]->result_total = total;
            reqs[0]->rank_counts = counts;
        } else {
            coord_free_result(memory, result);
            free(counts);
        }
        break;
    }
    default: break;
    }

    if (r->kind != COORD_KIND_ERROR && r->kind != COORD_KIND_JOIN) {
        coord_flight_waited(c, reqs, r->ntensors);
        if (status == HORA_OK) {
            /* New entries from the slow path, and a touch for those that came
             * from the cache: the same on every rank, so ids stay in step. */
            if (r->cacheable || r->cache_id >= 0)
                for (int t = 0; t < r->ntensors; t++)
                    coord_cache_store(&c->cache, r->names[t], &r->metas[t], &c->uncached);
            coord_complete_all(c, reqs, r->ntensors, HORA_OK, NULL);
        } else {
            coord_complete_all(c, reqs, r->ntensors, status, hora_last_error());
        }
    }
    free(reqs);
    /* A failure every rank agreed on ends the request, not the coordinator. */
    return agreed ? HORA_OK : status;
}
