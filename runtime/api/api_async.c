/* api_async.c - the public negotiated API: argument checks, request objects,
 * hand-off to the coordinator thread, waiting. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/api_opts.h"
#include "base/status.h"

static hora_status_t api_async_check(const char *what, const char *name, hora_dtype_t dtype)
{
    HORA_CHECK(api_check_initialized(what));
    if (!name || !*name) return status_fail(HORA_ERR_INVALID_ARG, "%s: a request needs a non-empty name", what);
    if ((unsigned)dtype >= HORA_DTYPE_COUNT)
        return status_fail(HORA_ERR_INVALID_ARG, "%s('%s'): invalid dtype %d", what, name, (int)dtype);
    return HORA_OK;
}

/* The buffers are where opts says (refused here rather than dereferenced
 * in the wrong place later), on the runtime's device. */
static hora_status_t api_async_check_memory(const char *what, const char *name, const hora_opts_t *opts,
                                            const void *send, const void *recv)
{
    const struct mem_dev *dev = &hora_rt.dev;
    const void *bufs[2] = {send, recv};
    if (opts->memory == HORA_MEMORY_CUDA) {
        if (!mem_dev_on(dev))
            return status_fail(HORA_ERR_UNSUPPORTED, "%s('%s'): device (CUDA) memory is not supported here: %s", what,
                               name, dev->why_none);
        if (opts->device >= 0 && opts->device != dev->device)
            return status_fail(HORA_ERR_INVALID_ARG,
                               "%s('%s'): the buffers are on CUDA device %d, the runtime uses device %d (the one "
                               "current when hora_init ran)",
                               what, name, opts->device, dev->device);
    }
    if (!mem_dev_on(dev)) return HORA_OK;
    for (int i = 0; i < 2; i++)
        if (bufs[i] && mem_dev_kind_of(dev, bufs[i]) != opts->memory)
            return status_fail(HORA_ERR_INVALID_ARG, "%s('%s'): %s %p is %s memory but the request says %s", what, name,
                               i ? "recv" : "send", bufs[i],
                               opts->memory == HORA_MEMORY_CUDA ? "host" : "device (CUDA)",
                               opts->memory == HORA_MEMORY_CUDA ? "HORA_MEMORY_CUDA" : "HORA_MEMORY_HOST");
    return HORA_OK;
}

/* A request from the common arguments; shape from opts (member opts_index
 * of an array of them) or 1-D. */
static hora_status_t api_async_new(const char *what, const char *name, uint32_t kind, const void *send, void *recv,
                                   size_t count, hora_dtype_t dtype, hora_op_t op, int root,
                                   const hora_opts_t *caller_opts, int opts_index, struct hora_request **out)
{
    hora_opts_t full;
    HORA_CHECK(api_opts_read(what, name, caller_opts, opts_index, &full));
    const hora_opts_t *opts = &full;
    const int allocates = kind == COORD_KIND_ALLGATHER || kind == COORD_KIND_ALLTOALL; /* the result */
    /* A reduce-scatter's recv is checked against this rank's rows (it may have none). */
    if (count && ((!send && kind != COORD_KIND_BROADCAST) || (!recv && !allocates && kind != COORD_KIND_REDUCESCATTER)))
        return status_fail(HORA_ERR_INVALID_ARG, "%s('%s'): NULL buffer with count %zu", what, name, count);
    if (opts->ndim < 0 || opts->ndim > HORA_MAX_DIMS)
        return status_fail(HORA_ERR_INVALID_ARG, "%s('%s'): ndim %d outside 0..%d", what, name, opts->ndim,
                           HORA_MAX_DIMS);
    if ((unsigned)opts->compression > HORA_COMPRESSION_BF16 || (unsigned)opts->memory >= HORA_MEMORY_COUNT)
        return status_fail(HORA_ERR_INVALID_ARG, "%s('%s'): invalid compression or memory kind", what, name);
    HORA_CHECK(api_async_check_memory(what, name, opts, send, recv));
    if ((unsigned)opts->reproducible > HORA_REPRODUCIBLE_EXACT)
        return status_fail(HORA_ERR_INVALID_ARG, "%s('%s'): invalid reproducible mode %d (0, 1 or 2)", what, name,
                           opts->reproducible);
    if (opts->reproducible && kind != COORD_KIND_ALLREDUCE)
        return status_fail(HORA_ERR_INVALID_ARG, "%s('%s'): the reproducible flag applies to allreduce only", what,
                           name);
    /* The request's mode, or HORA_REPRODUCIBLE's: fixed here, so that ranks
     * that disagree fail negotiation instead of running different
     * algorithms. */
    const int reproducible = kind != COORD_KIND_ALLREDUCE ? 0
                             : opts->reproducible         ? opts->reproducible
                                                          : hora_rt.cfg.reproducible;
    if (reproducible && opts->process_set != HORA_PROCESS_SET_WORLD)
        return status_fail(HORA_ERR_UNSUPPORTED,
                           "%s('%s'): a reproducible all-reduce (%s) runs on the world, not on process set %d (whose "
                           "MPI reduction fixes no order)",
                           what, name, opts->reproducible ? "the request's flag" : "HORA_REPRODUCIBLE",
                           opts->process_set);
    struct coord *coord;
    int set_size, set_rank;
    HORA_CHECK(api_set_coord(opts->process_set, what, name, &coord, &set_size, &set_rank));
    if (opts->process_set != HORA_PROCESS_SET_WORLD && opts->memory != HORA_MEMORY_HOST)
        return status_fail(HORA_ERR_UNSUPPORTED, "%s('%s'): process sets move host memory only", what, name);
    if (kind == COORD_KIND_BROADCAST) {
        if (api_set_place(opts->process_set, root) < 0)
            return status_fail(HORA_ERR_INVALID_ARG, "%s('%s'): root %d is not a member of process set %d", what, name,
                               root, opts->process_set);
    }
    if (opts->compression != HORA_COMPRESSION_NONE && dtype != HORA_DTYPE_F32)
        return status_fail(HORA_ERR_INVALID_ARG, "%s('%s'): fp16/bf16 compression applies to f32 tensors, not %s", what,
                           name, hora_dtype_name(dtype));
    if ((kind == COORD_KIND_REDUCESCATTER || kind == COORD_KIND_ALLTOALL) && opts->compression != HORA_COMPRESSION_NONE)
        return status_fail(HORA_ERR_INVALID_ARG, "%s('%s'): compression applies to allreduce only", what, name);
    if (kind == COORD_KIND_ALLTOALL && opts->memory != HORA_MEMORY_HOST)
        return status_fail(HORA_ERR_UNSUPPORTED, "%s('%s'): alltoall moves host memory only", what, name);
    if ((kind == COORD_KIND_ALLREDUCE || kind == COORD_KIND_REDUCESCATTER) && dtype == HORA_DTYPE_BOOL) {
        /* No truth value in between: refused here, on every rank that
         * makes the call, before any negotiation. */
        if (op == HORA_OP_AVG)
            return status_fail(HORA_ERR_INVALID_ARG,
                               "%s('%s'): op avg is not defined for dtype bool (use sum or max for any, min or prod "
                               "for all)",
                               what, name);
        if (opts->prescale != 1.0 || opts->postscale != 1.0)
            return status_fail(HORA_ERR_INVALID_ARG,
                               "%s('%s'): prescale %g / postscale %g: dtype bool cannot be scaled (both must be 1)",
                               what, name, opts->prescale, opts->postscale);
    }
    if (op == HORA_OP_ADASUM && kind == COORD_KIND_ALLREDUCE) {
        /* Refused at submission, on every rank that makes the call. */
        char adasum_what[256];
        snprintf(adasum_what, sizeof(adasum_what), "%s('%s')", what, name);
        if (opts->process_set != HORA_PROCESS_SET_WORLD)
            return status_fail(HORA_ERR_UNSUPPORTED, "%s: op adasum runs on the world, not on process set %d",
                               adasum_what, opts->process_set);
        HORA_CHECK(coll_adasum_check(adasum_what, hora_rt.topo.size, dtype, opts->memory));
    }
    struct hora_request *req = calloc(1, sizeof(*req));
    if (!req || !(req->name = strdup(name))) {
        free(req);
        return status_fail(HORA_ERR_NO_MEMORY, "%s('%s'): out of memory", what, name);
    }
    struct coord_meta *m = &req->meta;
    m->kind = kind;
    m->dtype = (uint32_t)dtype;
    m->op = (uint32_t)op;
    m->root = root;
    m->count = count;
    m->prescale = opts->prescale;
    m->postscale = opts->postscale;
    m->compression = (uint32_t)opts->compression;
    m->memory = (uint32_t)opts->memory;
    m->reproducible = (uint32_t)reproducible;
    if (opts->ndim == 0) {
        m->ndim = 1;
        m->dims[0] = (int64_t)count;
    } else {
        int64_t product = 1;
        m->ndim = opts->ndim;
        for (int d = 0; d < opts->ndim; d++) {
            m->dims[d] = opts->dims[d];
            product *= opts->dims[d];
        }
        if (product != (int64_t)count || opts->dims[0] < 0) {
            free(req->name);
            free(req);
            return status_fail(HORA_ERR_INVALID_ARG, "%s('%s'): the shape's %lld elements differ from count %zu", what,
                               name, (long long)product, count);
        }
    }
    req->send = send;
    req->recv = recv;
    req->set = opts->process_set;
    req->cache_id = -1;
    req->join_last = -1;
    req->flag_slot = -1;
    if (opts->memory == HORA_MEMORY_CUDA) {
        /* When the data is ready: the caller's event, or one recorded now on
         * its stream (the coordinator waits for it before the collective). */
        req->ready_event = opts->ready_event;
        if (!req->ready_event) {
            hora_status_t status = mem_dev_event_record(&hora_rt.dev, opts->stream, &req->ready_event);
            if (status < 0) {
                free(req->name);
                free(req);
                return status;
            }
            req->owns_event = 1;
        }
        req->flag_slot = mem_dev_flag_take(&hora_rt.dev, &req->flag_value);
    }
    *out = req;
    return HORA_OK;
}

static void api_async_free(struct hora_request *req)
{
    if (!req) return;
    free(req->name);
    free(req->group);
    free(req->splits);
    free(req->error);
    coord_free_result((hora_memory_t)req->meta.memory, req->result);
    free(req->rank_counts);
    if (req->owns_event) mem_dev_event_destroy(req->ready_event);
    if (req->flag_slot >= 0) mem_dev_flag_give(&hora_rt.dev, req->flag_slot);
    free(req);
}

/* The coordinator of the request's set (freed since its creation: NULL). */
static hora_status_t api_async_submit(struct hora_request **reqs, int n)
{
    struct coord *c = api_request_coord(reqs[0]);
    if (!c) return status_fail(HORA_ERR_INVALID_ARG, "'%s': process set %d was freed", reqs[0]->name, reqs[0]->set);
    return coord_submit(c, reqs, n);
}

static hora_status_t api_async_submit_one(struct hora_request *req, hora_request_t *out)
{
    hora_status_t status = api_async_submit(&req, 1);
    if (status < 0) {
        api_async_free(req);
        return status;
    }
    *out = req;
    return HORA_OK;
}

hora_status_t hora_allreduce_async(const char *name, const void *send, void *recv, size_t count, hora_dtype_t dtype,
                                   hora_op_t op, const hora_opts_t *opts, hora_request_t *req)
{
    struct hora_request *r = NULL;
    HORA_CHECK(api_async_check("hora_allreduce_async", name, dtype));
    if ((unsigned)op >= HORA_OP_COUNT && op != HORA_OP_ADASUM)
        return status_fail(HORA_ERR_INVALID_ARG, "hora_allreduce_async('%s'): invalid op %d", name, (int)op);
    if (!req) return status_fail(HORA_ERR_INVALID_ARG, "hora_allreduce_async('%s'): req is NULL", name);
    HORA_CHECK(api_async_new("hora_allreduce_async", name, COORD_KIND_ALLREDUCE, send, recv, count, dtype, op, -1, opts,
                             0, &r));
    return api_async_submit_one(r, req);
}

/* Members of a group: names[i], with the group's key and size. */
static hora_status_t api_async_new_group(const char *what, int n, const char *const *names, uint32_t kind,
                                         const void *const *send, void *const *recv, const size_t *counts,
                                         hora_dtype_t dtype, hora_op_t op, const hora_opts_t *opts, int opts_per_member,
                                         struct hora_request **list)
{
    hora_status_t status = HORA_OK;
    /* The group is known by its first member's name. */
    size_t key_len = strlen(names[0]) + 8;
    for (int i = 0; i < n && status == HORA_OK; i++) {
        status = api_async_check(what, names[i], dtype);
        if (status == HORA_OK)
            status = api_async_new(what, names[i], kind, send[i], recv[i], counts[i], dtype, op, -1, opts,
                                   opts_per_member ? i : 0, &list[i]);
        if (status == HORA_OK) {
            list[i]->group = malloc(key_len);
            if (!list[i]->group) return status_fail(HORA_ERR_NO_MEMORY, "%s: out of memory", what);
            snprintf(list[i]->group, key_len, "%s#group", names[0]);
            list[i]->meta.group_size = n;
        }
    }
    return status;
}

/* Submit a group (all or none). */
static hora_status_t api_async_submit_group(struct hora_request **list, int n, hora_request_t *reqs,
                                            hora_status_t status)
{
    if (status == HORA_OK) status = api_async_submit(list, n);
    if (status < 0) {
        for (int i = 0; i < n; i++) api_async_free(list[i]);
    } else {
        for (int i = 0; i < n; i++) reqs[i] = list[i];
    }
    free(list);
    return status;
}

hora_status_t hora_grouped_allreduce_async(int n, const char *const *names, const void *const *send, void *const *recv,
                                           const size_t *counts, hora_dtype_t dtype, hora_op_t op,
                                           const hora_opts_t *opts, hora_request_t *reqs)
{
    if (n <= 0 || !names || !send || !recv || !counts || !reqs)
        return status_fail(HORA_ERR_INVALID_ARG, "hora_grouped_allreduce_async: bad arguments");
    HORA_CHECK(api_async_check("hora_grouped_allreduce_async", names[0], dtype));
    if ((unsigned)op >= HORA_OP_COUNT && op != HORA_OP_ADASUM)
        return status_fail(HORA_ERR_INVALID_ARG, "hora_grouped_allreduce_async: invalid op %d", (int)op);
    struct hora_request **list = calloc((size_t)n, sizeof(*list));
    if (!list) return status_fail(HORA_ERR_NO_MEMORY, "hora_grouped_allreduce_async: out of memory");
    hora_status_t status = api_async_new_group("hora_grouped_allreduce_async", n, names, COORD_KIND_ALLREDUCE, send,
                                               recv, counts, dtype, op, opts, 0, list);
    return api_async_submit_group(list, n, reqs, status);
}

/* A reduce-scatter's recv, where this rank gets rows (frees r otherwise). */
static hora_status_t api_async_check_shard(const char *what, struct hora_request *r)
{
    size_t offset, rows;
    struct coord *coord;
    int size, rank;
    if (api_set_coord(r->set, what, r->name, &coord, &size, &rank) < 0) {
        api_async_free(r);
        return HORA_ERR_INVALID_ARG;
    }
    coll_shard((size_t)r->meta.dims[0], size, rank, &offset, &rows);
    if (r->recv || !rows || !r->meta.count) return HORA_OK;
    hora_status_t status =
        status_fail(HORA_ERR_INVALID_ARG, "%s('%s'): recv is NULL and this rank gets %zu rows", what, r->name, rows);
    api_async_free(r);
    return status;
}

hora_status_t hora_reducescatter_async(const char *name, const void *send, void *recv, size_t count, hora_dtype_t dtype,
                                       hora_op_t op, const hora_opts_t *opts, hora_request_t *req)
{
    struct hora_request *r = NULL;
    HORA_CHECK(api_async_check("hora_reducescatter_async", name, dtype));
    if (op == HORA_OP_ADASUM)
        return status_fail(HORA_ERR_INVALID_ARG, "hora_reducescatter_async('%s'): op adasum is an all-reduce only",
                           name);
    if ((unsigned)op >= HORA_OP_COUNT)
        return status_fail(HORA_ERR_INVALID_ARG, "hora_reducescatter_async('%s'): invalid op %d", name, (int)op);
    if (!req) return status_fail(HORA_ERR_INVALID_ARG, "hora_reducescatter_async('%s'): req is NULL", name);
    HORA_CHECK(api_async_new("hora_reducescatter_async", name, COORD_KIND_REDUCESCATTER, send, recv, count, dtype, op,
                             -1, opts, 0, &r));
    HORA_CHECK(api_async_check_shard("hora_reducescatter_async", r));
    return api_async_submit_one(r, req);
}

hora_status_t hora_grouped_reducescatter_async(int n, const char *const *names, const void *const *send,
                                               void *const *recv, const size_t *counts, hora_dtype_t dtype,
                                               hora_op_t op, const hora_opts_t *opts, hora_request_t *reqs)
{
    if (n <= 0 || !names || !send || !recv || !counts || !reqs)
        return status_fail(HORA_ERR_INVALID_ARG, "hora_grouped_reducescatter_async: bad arguments");
    HORA_CHECK(api_async_check("hora_grouped_reducescatter_async", names[0], dtype));
    if (op == HORA_OP_ADASUM)
        return status_fail(HORA_ERR_INVALID_ARG, "hora_grouped_reducescatter_async: op adasum is an all-reduce only");
    if ((unsigned)op >= HORA_OP_COUNT)
        return status_fail(HORA_ERR_INVALID_ARG, "hora_grouped_reducescatter_async: invalid op %d", (int)op);
    struct hora_request **list = calloc((size_t)n, sizeof(*list));
    if (!list) return status_fail(HORA_ERR_NO_MEMORY, "hora_grouped_reducescatter_async: out of memory");
    hora_status_t status = api_async_new_group("hora_grouped_reducescatter_async", n, names, COORD_KIND_REDUCESCATTER,
                                               send, recv, counts, dtype, op, opts, 1, list);
    for (int i = 0; i < n && status == HORA_OK; i++) {
        status = api_async_check_shard("hora_grouped_reducescatter_async", list[i]);
        if (status < 0) list[i] = NULL; /* freed */
    }
    return api_async_submit_group(list, n, reqs, status);
}

hora_status_t hora_alltoall_async(const char *name, const void *send, size_t count, hora_dtype_t dtype,
                                  const size_t *splits, const hora_opts_t *opts, hora_request_t *req)
{
    struct hora_request *r = NULL;
    struct coord *coord;
    int size, set_rank;
    hora_opts_t o;
    HORA_CHECK(api_async_check("hora_alltoall_async", name, dtype));
    if (hora_rt.store)
        return status_fail(HORA_ERR_UNSUPPORTED,
                           "hora_alltoall_async('%s'): alltoall runs over MPI, which a job started by hora-run does "
                           "not have (start it with mpirun)",
                           name ? name : "");
    HORA_CHECK(api_opts_read("hora_alltoall_async", name, opts, 0, &o));
    HORA_CHECK(api_set_coord(o.process_set, "hora_alltoall_async", name, &coord, &size, &set_rank));
    if (!req) return status_fail(HORA_ERR_INVALID_ARG, "hora_alltoall_async('%s'): req is NULL", name);
    if (count > INT_MAX)
        return status_fail(HORA_ERR_UNSUPPORTED,
                           "hora_alltoall_async('%s'): %zu elements: at most INT_MAX (MPI_Alltoallv's counts)", name,
                           count);
    HORA_CHECK(api_async_new("hora_alltoall_async", name, COORD_KIND_ALLTOALL, send, NULL, count, dtype, HORA_OP_SUM,
                             -1, &o, 0, &r));
    const uint64_t rows = (uint64_t)r->meta.dims[0];
    hora_status_t status = HORA_OK;
    if (!(r->splits = calloc((size_t)size, sizeof(uint64_t)))) {
        status = status_fail(HORA_ERR_NO_MEMORY, "hora_alltoall_async('%s'): out of memory", name);
    } else if (!splits) {
        if (rows % (uint64_t)size)
            status = status_fail(HORA_ERR_INVALID_ARG,
                                 "hora_alltoall_async('%s'): without splits the first dimension (%llu) must be a "
                                 "multiple of the number of ranks (%d)",
                                 name, (unsigned long long)rows, size);
        for (int q = 0; q < size; q++) r->splits[q] = rows / (uint64_t)size;
    } else {
        uint64_t sum = 0;
        for (int q = 0; q < size; q++) sum += r->splits[q] = splits[q];
        if (sum != rows)
            status = status_fail(HORA_ERR_INVALID_ARG,
                                 "hora_alltoall_async('%s'): the splits sum to %llu rows, the first dimension is %llu",
                                 name, (unsigned long long)sum, (unsigned long long)rows);
    }
    if (status < 0) {
        api_async_free(r);
        return status;
    }
    return api_async_submit_one(r, req);
}

hora_status_t hora_barrier_async(const char *name, const hora_opts_t *opts, hora_request_t *req)
{
    struct hora_request *r = NULL;
    hora_opts_t full, o = HORA_OPTS_INIT;
    HORA_CHECK(api_async_check("hora_barrier_async", name, HORA_DTYPE_U8));
    if (!req) return status_fail(HORA_ERR_INVALID_ARG, "hora_barrier_async('%s'): req is NULL", name);
    HORA_CHECK(api_opts_read("hora_barrier_async", name, opts, 0, &full));
    o.process_set = full.process_set; /* nothing else applies */
    HORA_CHECK(api_async_new("hora_barrier_async", name, COORD_KIND_BARRIER, NULL, NULL, 0, HORA_DTYPE_U8, HORA_OP_SUM,
                             -1, &o, 0, &r));
    return api_async_submit_one(r, req);
}

hora_status_t hora_broadcast_async(const char *name, void *buf, size_t count, hora_dtype_t dtype, int root,
                                   const hora_opts_t *opts, hora_request_t *req)
{
    struct hora_request *r = NULL;
    HORA_CHECK(api_async_check("hora_broadcast_async", name, dtype));
    if (root < 0 || root >= hora_rt.topo.size)
        return status_fail(HORA_ERR_INVALID_ARG, "hora_broadcast_async('%s'): root %d is not a rank (0..%d)", name,
                           root, hora_rt.topo.size - 1);
    if (!req) return status_fail(HORA_ERR_INVALID_ARG, "hora_broadcast_async('%s'): req is NULL", name);
    HORA_CHECK(api_async_new("hora_broadcast_async", name, COORD_KIND_BROADCAST, buf, buf, count, dtype, HORA_OP_SUM,
                             root, opts, 0, &r));
    return api_async_submit_one(r, req);
}

hora_status_t hora_allgather_async(const char *name, const void *send, size_t count, hora_dtype_t dtype,
                                   const hora_opts_t *opts, hora_request_t *req)
{
    struct hora_request *r = NULL;
    HORA_CHECK(api_async_check("hora_allgather_async", name, dtype));
    if (!req) return status_fail(HORA_ERR_INVALID_ARG, "hora_allgather_async('%s'): req is NULL", name);
    HORA_CHECK(api_async_new("hora_allgather_async", name, COORD_KIND_ALLGATHER, send, NULL, count, dtype, HORA_OP_SUM,
                             -1, opts, 0, &r));
    return api_async_submit_one(r, req);
}

hora_status_t hora_join(int *last_rank)
{
    struct hora_request *r = NULL;
    hora_request_t req;
    HORA_CHECK(api_async_check("hora_join", "__hora_join__", HORA_DTYPE_U8));
    HORA_CHECK(api_async_new("hora_join", "__hora_join__", COORD_KIND_JOIN, NULL, NULL, 0, HORA_DTYPE_U8, HORA_OP_SUM,
                             -1, NULL, 0, &r));
    HORA_CHECK(api_async_submit_one(r, &req));
    hora_status_t status = coord_wait(hora_rt.coord, req);
    if (status == HORA_OK && last_rank) *last_rank = req->join_last;
    if (status < 0) status_set(status, "%s", req->error ? req->error : hora_status_string(status));
    api_async_free(req);
    return status;
}

hora_status_t hora_stream_wait(hora_request_t req, void *stream)
{
    if (!req) return status_fail(HORA_ERR_INVALID_ARG, "hora_stream_wait: req is NULL");
    if (!mem_dev_on(&hora_rt.dev))
        return status_fail(HORA_ERR_UNSUPPORTED,
                           "hora_stream_wait('%s'): device (CUDA) memory is not supported here: %s", req->name,
                           hora_rt.dev.why_none);
    /* On the device where it can (the flag is set at completion, also of a
     * failure), else here. */
    if (req->flag_slot >= 0 &&
        mem_dev_flag_stream_wait(&hora_rt.dev, stream, req->flag_slot, req->flag_value) == HORA_OK)
        return HORA_OK;
    hora_status_t status = hora_wait(req);
    return status < 0 ? status : HORA_OK;
}

hora_status_t hora_wait(hora_request_t req)
{
    if (!req) return status_fail(HORA_ERR_INVALID_ARG, "hora_wait: req is NULL");
    struct coord *c = api_request_coord(req);
    if (!c) return req->done ? req->status : HORA_ERR_NOT_INITIALIZED;
    hora_status_t status = coord_wait(c, req);
    if (status < 0) status_set(status, "%s", req->error ? req->error : hora_status_string(status));
    return status;
}

hora_status_t hora_test(hora_request_t req, int *done)
{
    hora_status_t status = HORA_IN_PROGRESS;
    if (!req || !done) return status_fail(HORA_ERR_INVALID_ARG, "hora_test: NULL argument");
    struct coord *c = api_request_coord(req);
    if (!c) {
        *done = req->done;
        return req->done ? req->status : HORA_ERR_NOT_INITIALIZED;
    }
    *done = coord_is_done(c, req, &status);
    return *done ? status : HORA_IN_PROGRESS;
}

const char *hora_request_error(hora_request_t req)
{
    hora_status_t status;
    if (!req) return "";
    struct coord *c = api_request_coord(req);
    if (c && !coord_is_done(c, req, &status)) return "";
    return req->error ? req->error : "";
}

hora_status_t hora_request_result(hora_request_t req, void **data, size_t *total_count, const size_t **rank_counts)
{
    hora_status_t status = HORA_IN_PROGRESS;
    if (!req) return status_fail(HORA_ERR_INVALID_ARG, "hora_request_result: req is NULL");
    struct coord *c = api_request_coord(req);
    if (c && !coord_is_done(c, req, &status))
        return status_set(HORA_IN_PROGRESS, "hora_request_result('%s'): not finished", req->name);
    if (req->status < 0) return req->status;
    if (req->meta.kind != COORD_KIND_ALLGATHER && req->meta.kind != COORD_KIND_ALLTOALL)
        return status_fail(HORA_ERR_INVALID_ARG, "hora_request_result('%s'): only allgather and alltoall have a result",
                           req->name);
    if (data) *data = req->result;
    if (total_count) *total_count = req->result_total;
    if (rank_counts) *rank_counts = req->rank_counts;
    return HORA_OK;
}

void hora_request_free(hora_request_t req)
{
    if (!req) return;
    struct coord *c = api_request_coord(req);
    if (c) coord_wait(c, req);
    api_async_free(req);
}
