/*
 * gpu_direct.c - the direct collectives on device buffers: hora_allreduce,
 * hora_reduce_scatter, hora_allgatherv, hora_broadcast x every dtype x every
 * op x {in place, out of place} x the counts of gc_counts (0, 1, n-1, n+1,
 * odd ones, one over the fusion threshold and the staging chunk) on device
 * pool buffers (hora_mem_alloc_device), the same with SUM and MAX on
 * cudaMalloc'd ones (direct_sweep says why), and a sweep at pointers one
 * element into their allocation (a tensor view). The runtime finds the
 * memory kind itself; hora.h: the data must be ready when the call is made
 * (here: cudaDeviceSynchronize after filling), the result complete on the
 * device when it returns (read back with a plain cudaMemcpy).
 *
 * Each case: inputs made on the host, copied up; every output byte and
 * GC_GUARD_BYTES after each buffer poisoned with 0xff first; the result,
 * the guards and (out of place) the untouched send buffer copied back and
 * compared exactly. After a failed call the runtime fails every later direct
 * collective (hora.h), so the first failure on a rank ends this part.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_coll.h"

static int direct_broken; /* a direct collective failed on this rank */

/* got's count elements of dtype against want, and the guard right after them. */
static void direct_check_out(const char *what, const void *got, const void *want, size_t count, hora_dtype_t dtype)
{
    gc_compare(what, got, want, count, dtype);
    gc_check_guard(what, (const char *)got + count * hora_dtype_size(dtype));
}

static void direct_failed(const char *what, hora_status_t st)
{
    gc_fail("%s: %s: %s", what, hora_status_string(st), hora_last_error());
    direct_broken = 1;
}

/* Device copy of host bytes (bytes + guard: the guard travels as 0xff). */
static void direct_upload(void *dev, const void *host, size_t bytes)
{
    GC_CUDA(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
}

/* A host buffer of bytes + GC_GUARD_BYTES: 0xff everywhere. */
static void *direct_host(size_t bytes)
{
    void *p = gc_xmalloc(bytes + GC_GUARD_BYTES);
    memset(p, 0xff, bytes + GC_GUARD_BYTES);
    return p;
}

static void direct_download(void *host, const void *dev, size_t bytes)
{
    GC_CUDA(cudaMemcpy(host, dev, bytes + GC_GUARD_BYTES, cudaMemcpyDeviceToHost));
}

/* The send buffer after the collective (what + ": send buffer"): still the input in, and (guard) its guard. */
static void direct_check_send(const char *what, void *got, const void *send, const void *in, size_t count,
                              hora_dtype_t dtype, int guard)
{
    char w2[240];
    snprintf(w2, sizeof(w2), "%s: send buffer", what);
    direct_download(got, send, count * hora_dtype_size(dtype));
    if (guard)
        direct_check_out(w2, got, in, count, dtype);
    else
        gc_compare(w2, got, in, count, dtype);
}

/* The buffers of a collective with a send and a receive side freed. */
static void direct_free(struct gc_dbuf *send, struct gc_dbuf *recv, void *in, void *got, void *want)
{
    gc_dbuf_free(recv);
    gc_dbuf_free(send);
    free(want);
    free(got);
    free(in);
}

static void direct_allreduce(size_t count, hora_dtype_t dtype, hora_op_t op, int inplace, enum gc_buf_kind kind,
                             size_t offset)
{
    const size_t es = hora_dtype_size(dtype), bytes = count * es;
    const unsigned salt = gc_next_salt();
    char what[200];
    struct gc_dbuf send, recv = {0};
    snprintf(what, sizeof(what), "hora_allreduce count=%zu %s %s %s %s%s", count, hora_dtype_name(dtype),
             hora_op_name(op), inplace ? "in-place" : "out-of-place", gc_buf_kind_name[kind],
             offset ? " +1 element" : "");
    gc_phase("%s", what);
    void *in = direct_host(bytes), *got = direct_host(bytes), *want = gc_xmalloc(bytes);
    gc_fill_input(in, 0, count, dtype, op, gc_rank, salt);
    gc_dbuf_alloc(&send, kind, bytes, offset);
    direct_upload(send.ptr, in, bytes + GC_GUARD_BYTES);
    if (!inplace) {
        gc_dbuf_alloc(&recv, kind, bytes, offset);
        GC_CUDA(cudaMemset(recv.ptr, 0xff, bytes + GC_GUARD_BYTES));
    }
    void *out = inplace ? send.ptr : recv.ptr;
    GC_CUDA(cudaDeviceSynchronize()); /* the data is ready: hora.h asks for that */
    hora_status_t st = hora_allreduce(send.ptr, out, count, dtype, op);
    if (st != HORA_OK) {
        direct_failed(what, st);
    } else {
        direct_download(got, out, bytes);
        gc_fill_expected(want, 0, count, dtype, op, salt);
        direct_check_out(what, got, want, count, dtype);
        if (!inplace) direct_check_send(what, got, send.ptr, in, count, dtype, 1);
    }
    direct_free(&send, &recv, in, got, want);
}

static void direct_reduce_scatter(size_t count, hora_dtype_t dtype, hora_op_t op, enum gc_buf_kind kind, size_t offset)
{
    const size_t es = hora_dtype_size(dtype), bytes = count * es;
    const unsigned salt = gc_next_salt();
    size_t off, shard;
    char what[200];
    struct gc_dbuf send, recv;
    hora_shard(count, gc_size, gc_rank, &off, &shard);
    snprintf(what, sizeof(what), "hora_reduce_scatter count=%zu (shard %zu at %zu) %s %s %s%s", count, shard, off,
             hora_dtype_name(dtype), hora_op_name(op), gc_buf_kind_name[kind], offset ? " +1 element" : "");
    gc_phase("%s", what);
    void *in = direct_host(bytes), *got = direct_host(bytes), *want = gc_xmalloc(shard * es);
    gc_fill_input(in, 0, count, dtype, op, gc_rank, salt);
    gc_dbuf_alloc(&send, kind, bytes, offset);
    gc_dbuf_alloc(&recv, kind, shard * es, offset);
    direct_upload(send.ptr, in, bytes + GC_GUARD_BYTES);
    GC_CUDA(cudaMemset(recv.ptr, 0xff, shard * es + GC_GUARD_BYTES));
    GC_CUDA(cudaDeviceSynchronize());
    hora_status_t st = hora_reduce_scatter(send.ptr, recv.ptr, count, dtype, op);
    if (st != HORA_OK) {
        direct_failed(what, st);
    } else {
        direct_download(got, recv.ptr, shard * es);
        gc_fill_expected(want, off, shard, dtype, op, salt);
        direct_check_out(what, got, want, shard, dtype);
        direct_check_send(what, got, send.ptr, in, count, dtype, 0);
    }
    direct_free(&send, &recv, in, got, want);
}

/* Rank r contributes count + r - 1 elements (none for count 0): the blocks
 * differ in size. In place: send is this rank's block of recv. */
static void direct_allgatherv(size_t count, hora_dtype_t dtype, int inplace, enum gc_buf_kind kind)
{
    const size_t es = hora_dtype_size(dtype);
    const unsigned salt = gc_next_salt();
    size_t *counts = gc_xmalloc(sizeof(size_t) * (size_t)gc_size), total = 0, displ = 0;
    char what[200];
    struct gc_dbuf send = {0}, recv;
    for (int r = 0; r < gc_size; r++) {
        counts[r] = count == 0 ? 0 : count + (size_t)r - 1;
        if (r == gc_rank) displ = total;
        total += counts[r];
    }
    snprintf(what, sizeof(what), "hora_allgatherv count=%zu+r-1 (total %zu) %s %s %s", count, total,
             hora_dtype_name(dtype), inplace ? "in-place" : "out-of-place", gc_buf_kind_name[kind]);
    gc_phase("%s", what);
    const size_t mine = counts[gc_rank] * es;
    void *in = direct_host(mine), *got = direct_host(total * es), *want = gc_xmalloc(total * es);
    gc_fill_input(in, displ, counts[gc_rank], dtype, HORA_OP_MIN, gc_rank, salt);
    gc_dbuf_alloc(&recv, kind, total * es, 0);
    GC_CUDA(cudaMemset(recv.ptr, 0xff, total * es + GC_GUARD_BYTES));
    void *src;
    if (inplace) {
        src = (char *)recv.ptr + displ * es;
        GC_CUDA(cudaMemcpy(src, in, mine, cudaMemcpyHostToDevice));
    } else {
        gc_dbuf_alloc(&send, kind, mine, 0);
        direct_upload(send.ptr, in, mine + GC_GUARD_BYTES);
        src = send.ptr;
    }
    GC_CUDA(cudaDeviceSynchronize());
    hora_status_t st = hora_allgatherv(src, recv.ptr, counts, dtype);
    if (st != HORA_OK) {
        direct_failed(what, st);
    } else {
        direct_download(got, recv.ptr, total * es);
        size_t at = 0;
        for (int r = 0; r < gc_size; r++) {
            gc_fill_input((char *)want + at * es, at, counts[r], dtype, HORA_OP_MIN, r, salt);
            at += counts[r];
        }
        direct_check_out(what, got, want, total, dtype);
    }
    direct_free(&send, &recv, in, got, want);
    free(counts);
}

static void direct_broadcast(size_t count, hora_dtype_t dtype, int root, enum gc_buf_kind kind, size_t offset)
{
    const size_t es = hora_dtype_size(dtype), bytes = count * es;
    const unsigned salt = gc_next_salt();
    char what[200];
    struct gc_dbuf buf;
    snprintf(what, sizeof(what), "hora_broadcast count=%zu %s root=%d %s%s", count, hora_dtype_name(dtype), root,
             gc_buf_kind_name[kind], offset ? " +1 element" : "");
    gc_phase("%s", what);
    void *in = direct_host(bytes), *got = direct_host(bytes);
    gc_fill_input(in, 0, count, dtype, HORA_OP_MAX, root, salt);
    gc_dbuf_alloc(&buf, kind, bytes, offset);
    if (gc_rank == root)
        direct_upload(buf.ptr, in, bytes + GC_GUARD_BYTES);
    else
        GC_CUDA(cudaMemset(buf.ptr, 0xff, bytes + GC_GUARD_BYTES));
    GC_CUDA(cudaDeviceSynchronize());
    hora_status_t st = hora_broadcast(buf.ptr, count, dtype, root);
    if (st != HORA_OK) {
        direct_failed(what, st);
    } else {
        direct_download(got, buf.ptr, bytes);
        direct_check_out(what, got, in, count, dtype);
    }
    gc_dbuf_free(&buf);
    free(got);
    free(in);
}

/* Every dtype x op x count on pool buffers (the largest count too), every
 * root of a broadcast. cudaMalloc'd buffers differ only by the staging copy
 * around the same reduction, so they run SUM and MAX (the largest count: SUM
 * in place and out of place, and reduce-scatter SUM and MAX) and one root:
 * that keeps the device check within its minutes. */
static void direct_sweep(void)
{
    for (int d = 0; d < HORA_DTYPE_COUNT && !direct_broken; d++) {
        const hora_dtype_t dtype = (hora_dtype_t)d;
        size_t counts[8];
        const int ncounts = gc_counts(dtype, counts);
        const size_t big = gc_big_count(dtype);
        for (int c = 0; c < ncounts && !direct_broken; c++) {
            const size_t count = counts[c];
            for (int kind = 0; kind < GC_BUF_KIND_COUNT && !direct_broken; kind++) {
                const int staged = kind == GC_BUF_CUDA;
                for (int op = 0; op < HORA_OP_COUNT && !direct_broken; op++) {
                    if (staged && op != HORA_OP_SUM && op != HORA_OP_MAX) continue;
                    if (dtype == HORA_DTYPE_BOOL && op == HORA_OP_AVG) continue; /* refused (hora.h) */
                    for (int inplace = 0; inplace < 2 && !direct_broken; inplace++)
                        if (!(staged && count == big && op != HORA_OP_SUM))
                            direct_allreduce(count, dtype, (hora_op_t)op, inplace, (enum gc_buf_kind)kind, 0);
                    if (!direct_broken) direct_reduce_scatter(count, dtype, (hora_op_t)op, (enum gc_buf_kind)kind, 0);
                }
                for (int inplace = 0; inplace < 2 && !direct_broken; inplace++)
                    direct_allgatherv(count == big ? count / (size_t)gc_size : count, dtype, inplace,
                                      (enum gc_buf_kind)kind);
                for (int root = 0; root < gc_size && !direct_broken; root++)
                    if ((count != big && !staged) || root == gc_size - 1)
                        direct_broadcast(count, dtype, root, (enum gc_buf_kind)kind, 0);
            }
        }
        if (gc_rank == 0) printf("  direct %-4s done\n", hora_dtype_name(dtype));
        fflush(stdout);
    }
}

/* Pointers one element into their allocation (not 16-byte aligned for
 * the 1-, 2- and 4-byte dtypes). */
static void direct_offsets(void)
{
    const size_t counts[] = {1, 1001, 65537};
    for (int d = 0; d < HORA_DTYPE_COUNT && !direct_broken; d++) {
        const hora_dtype_t dtype = (hora_dtype_t)d;
        const size_t es = hora_dtype_size(dtype);
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]) && !direct_broken; c++)
            for (int kind = 0; kind < GC_BUF_KIND_COUNT && !direct_broken; kind++) {
                for (int inplace = 0; inplace < 2 && !direct_broken; inplace++)
                    direct_allreduce(counts[c], dtype, HORA_OP_SUM, inplace, (enum gc_buf_kind)kind, es);
                if (!direct_broken) direct_reduce_scatter(counts[c], dtype, HORA_OP_MAX, (enum gc_buf_kind)kind, es);
                if (!direct_broken) direct_broadcast(counts[c], dtype, gc_size - 1, (enum gc_buf_kind)kind, es);
            }
    }
}

void gc_direct(void)
{
    const double t0 = test_now_s();
    if (gc_rank == 0) printf("direct collectives (big count %zu bytes)\n", gc_big_count(HORA_DTYPE_U8));
    direct_broken = 0;
    direct_sweep();
    direct_offsets();
    if (direct_broken)
        fprintf(stderr,
                "rank %d: direct collectives stopped at the first failure (the runtime fails every later one)\n",
                gc_rank);
    if (gc_rank == 0) printf("direct collectives: %.1f s\n", test_now_s() - t0);
}
