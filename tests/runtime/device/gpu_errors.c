/*
 * gpu_errors.c - the device-memory API and its errors:
 *  - a memory-kind mismatch across ranks: one rank submits request "t" as
 *    HORA_MEMORY_CUDA (device buffers), the others as HORA_MEMORY_HOST (host
 *    buffers); every rank's request must fail with HORA_ERR_MISMATCH and a
 *    message naming both kinds ("cuda" and "host"), and then the runtime
 *    keeps serving: "t" again on device memory everywhere, then on host
 *    memory, both exact (np >= 2; both ways round);
 *  - requests refused at submission, on every rank, with no request
 *    returned and the name free again afterwards: a device other than the
 *    runtime's (opts.device), host buffers said to be HORA_MEMORY_CUDA,
 *    device buffers said to be HORA_MEMORY_HOST;
 *  - hora_mem_is_shared on device memory, hora_mem_alloc_device beyond the
 *    pool (HORA_ERR_NO_MEMORY naming HORA_CUDA_POOL_BYTES, *ptr untouched);
 *  - gc_direct_mismatch (mode direct-mismatch, its own job: a failed direct
 *    collective fails its channel for good): a direct hora_allreduce with host
 *    buffers on rank 0 and device buffers on the others. Over cudaipc each
 *    group waits in its own set of control blocks, which used to end in
 *    HORA_ERR_TIMEOUT; now every rank must return HORA_ERR_MISMATCH naming
 *    both kinds ("host", "device") well within HORA_TIMEOUT_S. Where device
 *    data is staged through host memory instead (no cudaipc), the kinds meet
 *    in one transport and the sum must simply be exact.
 */
#define _GNU_SOURCE /* strcasestr */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_coll.h"

#define ERR_COUNT 1001
/* A value no request handle has: outputs must stay untouched on refusal. */
#define ERR_SENTINEL ((hora_request_t)(uintptr_t)0x5e471)

/* Buffers of ERR_COUNT f32 in either memory; the input of this rank in send. */
struct err_bufs {
    hora_memory_t memory;
    struct gc_dbuf dsend, drecv;
    float *hsend, *hrecv;
    void *send, *recv;
    unsigned salt;
};

static void err_bufs_alloc(struct err_bufs *b, hora_memory_t memory)
{
    const size_t bytes = ERR_COUNT * sizeof(float);
    float *in = gc_xmalloc(bytes);
    memset(b, 0, sizeof(*b));
    b->memory = memory;
    b->salt = gc_next_salt();
    gc_fill_input(in, 0, ERR_COUNT, HORA_DTYPE_F32, HORA_OP_SUM, gc_rank, b->salt);
    if (memory == HORA_MEMORY_CUDA) {
        gc_dbuf_alloc(&b->dsend, GC_BUF_POOL, bytes, 0);
        gc_dbuf_alloc(&b->drecv, GC_BUF_POOL, bytes, 0);
        GC_CUDA(cudaMemcpy(b->dsend.ptr, in, bytes, cudaMemcpyHostToDevice));
        GC_CUDA(cudaMemset(b->drecv.ptr, 0xff, bytes));
        GC_CUDA(cudaDeviceSynchronize());
        b->send = b->dsend.ptr;
        b->recv = b->drecv.ptr;
        free(in);
    } else {
        b->hsend = in;
        b->hrecv = gc_xmalloc(bytes);
        memset(b->hrecv, 0xff, bytes);
        b->send = b->hsend;
        b->recv = b->hrecv;
    }
}

static void err_bufs_free(struct err_bufs *b)
{
    gc_dbuf_free(&b->dsend);
    gc_dbuf_free(&b->drecv);
    free(b->hsend);
    free(b->hrecv);
}

/* The result in recv is the exact sum (one check). */
static void err_bufs_check(const char *what, const struct err_bufs *b)
{
    const size_t bytes = ERR_COUNT * sizeof(float);
    float *got = gc_xmalloc(bytes), *want = gc_xmalloc(bytes);
    if (b->memory == HORA_MEMORY_CUDA)
        GC_CUDA(cudaMemcpy(got, b->recv, bytes, cudaMemcpyDeviceToHost));
    else
        memcpy(got, b->recv, bytes);
    gc_fill_expected(want, 0, ERR_COUNT, HORA_DTYPE_F32, HORA_OP_SUM, b->salt);
    gc_compare(what, got, want, ERR_COUNT, HORA_DTYPE_F32);
    free(want);
    free(got);
}

static void err_opts(hora_opts_t *o, hora_memory_t memory)
{
    *o = (hora_opts_t)HORA_OPTS_INIT;
    o->memory = memory;
    o->stream = NULL; /* the data was synchronised before: the legacy stream has nothing queued */
}

/* A correct all-reduce named `name` in `memory` on every rank: the runtime
 * serves after an error, and the name is free. */
static void err_next_ok(const char *after, const char *name, hora_memory_t memory)
{
    struct err_bufs b;
    hora_opts_t o;
    hora_request_t req = ERR_SENTINEL;
    char what[200];
    snprintf(what, sizeof(what), "after %s: hora_allreduce_async('%s') on %s memory", after, name,
             memory == HORA_MEMORY_CUDA ? "device" : "host");
    gc_phase("%s", what);
    err_bufs_alloc(&b, memory);
    err_opts(&o, memory);
    hora_status_t st = hora_allreduce_async(name, b.send, b.recv, ERR_COUNT, HORA_DTYPE_F32, HORA_OP_SUM, &o, &req);
    GC_CHECK(st == HORA_OK, "%s: submission returned %s: %s", what, hora_status_string(st), hora_last_error());
    if (st == HORA_OK) {
        st = hora_wait(req);
        GC_CHECK(st == HORA_OK, "%s: %s: %s", what, hora_status_string(st), hora_request_error(req));
        if (st == HORA_OK) err_bufs_check(what, &b);
        hora_request_free(req);
    }
    err_bufs_free(&b);
}

/* Rank cuda_rank submits "t" on device memory, the others on host memory. */
static void err_memory_mismatch(int cuda_rank)
{
    const hora_memory_t mine = gc_rank == cuda_rank ? HORA_MEMORY_CUDA : HORA_MEMORY_HOST;
    struct err_bufs b;
    hora_opts_t o;
    hora_request_t req = ERR_SENTINEL;
    char what[160];
    snprintf(what, sizeof(what), "request 't' on device memory on rank %d, host memory on the others", cuda_rank);
    gc_phase("%s", what);
    err_bufs_alloc(&b, mine);
    err_opts(&o, mine);
    hora_status_t st = hora_allreduce_async("t", b.send, b.recv, ERR_COUNT, HORA_DTYPE_F32, HORA_OP_SUM, &o, &req);
    GC_CHECK(st == HORA_OK, "%s: submission returned %s: %s (the mismatch is only seen across ranks)", what,
             hora_status_string(st), hora_last_error());
    if (st == HORA_OK) {
        hora_status_t ws = hora_wait(req);
        const char *msg = hora_request_error(req) ? hora_request_error(req) : "(NULL)";
        GC_CHECK(ws == HORA_ERR_MISMATCH, "%s: hora_wait returned %s, expected HORA_ERR_MISMATCH (%s)", what,
                 hora_status_string(ws), msg);
        GC_CHECK(strcasestr(msg, "cuda") && strcasestr(msg, "host"),
                 "%s: the message does not name both memory kinds ('cuda' and 'host'): '%s'", what, msg);
        if (gc_rank == 0 || gc_rank == cuda_rank)
            printf("  rank %d (%s memory): %s: %s\n", gc_rank, mine == HORA_MEMORY_CUDA ? "device" : "host",
                   hora_status_string(ws), msg);
        hora_request_free(req);
    }
    err_bufs_free(&b);
    err_next_ok("the memory-kind mismatch", "t", HORA_MEMORY_CUDA);
    err_next_ok("the memory-kind mismatch", "t", HORA_MEMORY_HOST);
}

enum err_refusal { ERR_OTHER_DEVICE, ERR_HOST_AS_CUDA, ERR_DEVICE_AS_HOST, ERR_REFUSAL_COUNT };
static const char *const err_refusal_name[ERR_REFUSAL_COUNT] = {
    "HORA_MEMORY_CUDA with opts.device another device than the runtime's", "host buffers submitted as HORA_MEMORY_CUDA",
    "device buffers submitted as HORA_MEMORY_HOST"};

/* Submits the refusal's request (twin = 0), or the correct request of the
 * same memory kind (twin = 1: what a rank that refused submits when another
 * rank wrongly accepted, so that the accepted one can complete). */
static hora_status_t err_refusal_submit(enum err_refusal k, int twin, const char *name, struct err_bufs *host,
                                        struct err_bufs *dev, hora_request_t *req)
{
    hora_opts_t o;
    struct err_bufs *b;
    switch (k) {
    case ERR_OTHER_DEVICE:
        err_opts(&o, HORA_MEMORY_CUDA);
        o.device = twin ? -1 : gc_device + 1;
        b = dev;
        break;
    case ERR_HOST_AS_CUDA:
        err_opts(&o, HORA_MEMORY_CUDA);
        b = twin ? dev : host;
        break;
    default:
        err_opts(&o, HORA_MEMORY_HOST);
        b = twin ? host : dev;
        break;
    }
    return hora_allreduce_async(name, b->send, b->recv, ERR_COUNT, HORA_DTYPE_F32, HORA_OP_SUM, &o, req);
}

static void err_refused(enum err_refusal k)
{
    struct err_bufs host, dev;
    hora_request_t req = ERR_SENTINEL;
    char name[32];
    snprintf(name, sizeof(name), "refused.%d", (int)k);
    gc_phase("refusal: %s", err_refusal_name[k]);
    err_bufs_alloc(&host, HORA_MEMORY_HOST);
    err_bufs_alloc(&dev, HORA_MEMORY_CUDA);
    hora_status_t st = err_refusal_submit(k, 0, name, &host, &dev, &req);
    const char *msg = st < 0 ? hora_last_error() : "(accepted)";
    GC_CHECK(st < 0, "%s: accepted (%s), expected a refusal at submission", err_refusal_name[k],
             hora_status_string(st));
    GC_CHECK(st == HORA_OK || req == ERR_SENTINEL, "%s: refused but a request was returned", err_refusal_name[k]);
    GC_CHECK(st == HORA_OK || (msg && msg[0]), "%s: refused without a message", err_refusal_name[k]);
    if (gc_rank == 0) printf("  %s -> %s: %s\n", err_refusal_name[k], hora_status_string(st), msg);
    /* Wrongly accepted somewhere: the others submit the correct twin so
     * that no rank is left waiting. */
    int accepted = st == HORA_OK, any = 0;
    MPI_Allreduce(&accepted, &any, 1, MPI_INT, MPI_MAX, gc_comm);
    if (any && !accepted) accepted = err_refusal_submit(k, 1, name, &host, &dev, &req) == HORA_OK;
    if (accepted) {
        hora_wait(req);
        hora_request_free(req);
    }
    err_bufs_free(&dev);
    err_bufs_free(&host);
    err_next_ok(err_refusal_name[k], name, HORA_MEMORY_CUDA);
}

static void err_memory_api(void)
{
    struct gc_dbuf pool, plain;
    gc_phase("device memory API");
    gc_dbuf_alloc(&pool, GC_BUF_POOL, 4096, 0);
    gc_dbuf_alloc(&plain, GC_BUF_CUDA, 4096, 0);
    GC_CHECK(hora_mem_is_shared(pool.ptr) == 1, "hora_mem_is_shared(hora_mem_alloc_device memory) = %d, expected 1",
             hora_mem_is_shared(pool.ptr));
    GC_CHECK(hora_mem_is_shared((char *)pool.ptr + 100) == 1,
             "hora_mem_is_shared(inside hora_mem_alloc_device memory) = %d, expected 1",
             hora_mem_is_shared((char *)pool.ptr + 100));
    GC_CHECK(hora_mem_is_shared(plain.ptr) == 0, "hora_mem_is_shared(cudaMalloc'd memory) = %d, expected 0",
             hora_mem_is_shared(plain.ptr));
    gc_dbuf_free(&plain);
    gc_dbuf_free(&pool);

    /* 1 TiB: more than any device pool holds. */
    void *p = (void *)(uintptr_t)0xdead;
    hora_status_t st = hora_mem_alloc_device((size_t)1 << 40, &p);
    const char *msg = hora_last_error();
    GC_CHECK(st == HORA_ERR_NO_MEMORY, "hora_mem_alloc_device(1 TiB) returned %s, expected HORA_ERR_NO_MEMORY (%s)",
             hora_status_string(st), msg);
    GC_CHECK(st == HORA_OK || strstr(msg, "HORA_CUDA_POOL_BYTES"),
             "hora_mem_alloc_device(1 TiB): the message does not name HORA_CUDA_POOL_BYTES: '%s'", msg);
    GC_CHECK(st == HORA_OK || p == (void *)(uintptr_t)0xdead, "hora_mem_alloc_device(1 TiB) failed but set *ptr");
    if (st == HORA_OK) hora_mem_free(p);
    if (gc_rank == 0) printf("  hora_mem_alloc_device(1 TiB) -> %s: %s\n", hora_status_string(st), msg);
}

void gc_direct_mismatch(void)
{
    if (gc_rank == 0) printf("direct all-reduce, host memory on rank 0, device memory on the others\n");
    if (gc_size < 2) {
        if (gc_rank == 0) printf("  (needs 2 ranks)\n");
        return;
    }
    struct err_bufs b;
    err_bufs_alloc(&b, gc_rank == 0 ? HORA_MEMORY_HOST : HORA_MEMORY_CUDA);
    gc_phase("direct mismatch: hora_allreduce");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hora_status_t st = hora_allreduce(b.send, b.recv, ERR_COUNT, HORA_DTYPE_F32, HORA_OP_SUM);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    const char *msg = hora_last_error();
    printf("  rank %d: %s after %.2f s: %s\n", gc_rank, hora_status_string(st), took, st == HORA_OK ? "" : msg);
    /* Every rank the same way: all staged (OK), or all a mismatch. */
    int mine = st == HORA_OK ? 1 : st == HORA_ERR_MISMATCH ? 2 : 4, any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_BOR, gc_comm);
    GC_CHECK(any == 1 || any == 2,
             "direct mismatch: ranks returned different outcomes or another status "
             "(this rank %s: %s)",
             hora_status_string(st), msg);
    if (st == HORA_OK) {
        err_bufs_check("direct mismatch (staged: the kinds meet in the host transport)", &b);
    } else if (st == HORA_ERR_MISMATCH) {
        GC_CHECK(strcasestr(msg, "host") && strcasestr(msg, "device"),
                 "direct mismatch: the message does not name both memory kinds: %s", msg);
        GC_CHECK(took < 5.0, "direct mismatch: took %.2f s (HORA_TIMEOUT_S is 20: it must not time out)", took);
    }
    err_bufs_free(&b);
}

void gc_errors(void)
{
    if (gc_rank == 0) printf("device memory errors\n");
    err_memory_api();
    for (int k = 0; k < ERR_REFUSAL_COUNT; k++) err_refused((enum err_refusal)k);
    if (gc_size >= 2) {
        err_memory_mismatch(0);
        err_memory_mismatch(gc_size - 1);
    } else if (gc_rank == 0) {
        printf("  (the memory-kind mismatch needs 2 ranks)\n");
    }
}
