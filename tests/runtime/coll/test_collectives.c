/*
 * test_collectives.c - every direct collective x dtype x op x {in place, out
 * of place} x counts {0, 1, n-1, n+1, 255, 4099, 1000003, 16 MiB} x {shared,
 * malloc'd buffers}, checked exactly (255 elements of any dtype fit the
 * default HORA_LATENCY_BYTES of 2K and take the latency path, as the
 * smaller counts do; 4099 do not, except with a larger setting) (bool: inputs with bytes other than 0/1, results
 * 0/1; its refused AVG in test_bool_refusals). Inputs are small integers derived from (rank,
 * index), chosen so that every result is exactly representable in every
 * dtype; the expected value is computed independently on every rank.
 * The transport is whatever HORA_DISABLE_* leaves (meson runs it both ways).
 *
 * Run: mpirun -np N test_collectives [--quick]   (exit 0 = all passed)
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hora.h"
#include "buf.h"
#include "exact.h"
#include "summary.h"
#include "k_cpu.h"

static int rank, size, failures, checks;

#define TEST_MAX_REPORTS 20

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    failures++;
    if (failures > TEST_MAX_REPORTS) return;
    va_start(ap, fmt);
    fprintf(stderr, "rank %d FAIL: ", rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

#define TEST_PERIOD 4099

/* Input value of (rank, index) for an op, as an exact small integer. */
static int64_t input_value(hora_dtype_t dtype, hora_op_t op, int r, size_t i)
{
    uint64_t h = (uint64_t)(i % TEST_PERIOD) * 2654435761u + (uint64_t)r * 40503u;
    h ^= h >> 13;
    return exact_value(dtype, op, r, h);
}

static void fill_input(void *buf, size_t offset, size_t count, hora_dtype_t dtype, hora_op_t op, int r)
{
    for (size_t i = 0; i < count && i < TEST_PERIOD; i++)
        exact_store_int(buf, i, dtype, input_value(dtype, op, r, offset + i));
    exact_tile(buf, count, hora_dtype_size(dtype), TEST_PERIOD);
}

/* Expected result at global index i, written in dtype into out[j]. */
static void expected_at(void *out, size_t j, size_t i, hora_dtype_t dtype, hora_op_t op)
{
    int64_t acc = input_value(dtype, op, 0, i);
    for (int r = 1; r < size; r++) acc = (int64_t)exact_reduce(op, (double)acc, (double)input_value(dtype, op, r, i));
    if (op != HORA_OP_AVG) {
        exact_store_int(out, j, dtype, exact_truth(dtype, acc)); /* bool: 0 or 1 */
        return;
    }
    switch (dtype) {
    case HORA_DTYPE_F32:
    case HORA_DTYPE_F16:
    case HORA_DTYPE_BF16: exact_store(out, j, dtype, (double)((float)acc / (float)size)); break;
    case HORA_DTYPE_F64: exact_store(out, j, dtype, (double)acc / (double)size); break;
    default: exact_store_int(out, j, dtype, acc / size); break; /* C truncation */
    }
}

static size_t compare(const char *what, const void *got, const void *want, size_t count, hora_dtype_t dtype)
{
    size_t es = hora_dtype_size(dtype), wrong = 0;
    checks++;
    if (!memcmp(got, want, count * es)) return 0;
    for (size_t i = 0; i < count; i++) {
        if (memcmp((const char *)got + i * es, (const char *)want + i * es, es)) {
            if (wrong == 0) {
                uint64_t g = 0, w = 0;
                memcpy(&g, (const char *)got + i * es, es);
                memcpy(&w, (const char *)want + i * es, es);
                fail("%s: element %zu of %zu is 0x%llx, expected 0x%llx", what, i, count, (unsigned long long)g,
                     (unsigned long long)w);
            }
            wrong++;
        }
    }
    if (wrong) fail("%s: %zu of %zu elements wrong", what, wrong, count);
    return wrong;
}

/* The expected result (or input) the test compares with: the test's own
 * memory, never handed to hora, so one buffer grown to the largest size
 * serves every case (a fresh malloc of up to 16 MiB per case cost more page
 * faults than the collective itself). */
static void *want_buf(size_t bytes)
{
    static void *buf;
    static size_t have;
    if (bytes > have) {
        free(buf);
        if (!(buf = malloc(bytes))) {
            fprintf(stderr, "rank %d FAIL: out of memory (%zu bytes)\n", rank, bytes);
            exit(1);
        }
        have = bytes;
    }
    return buf;
}

static void test_allreduce(size_t count, hora_dtype_t dtype, hora_op_t op, int inplace, int shared)
{
    size_t es = hora_dtype_size(dtype), bytes = count * es;
    char what[160];
    void *send = test_buf_alloc(shared, bytes), *recv = inplace ? send : test_buf_alloc(shared, bytes);
    void *want = want_buf(bytes + 1);
    snprintf(what, sizeof(what), "allreduce count=%zu %s %s %s %s", count, hora_dtype_name(dtype), hora_op_name(op),
             inplace ? "in-place" : "out-of-place", shared ? "shared" : "malloc");
    fill_input(send, 0, count, dtype, op, rank);
    if (!inplace) memset(recv, 0xA5, bytes);
    hora_status_t st = hora_allreduce(send, recv, count, dtype, op);
    if (st != HORA_OK) {
        fail("%s: %s: %s", what, hora_status_string(st), hora_last_error());
    } else {
        for (size_t i = 0; i < count && i < TEST_PERIOD; i++) expected_at(want, i, i, dtype, op);
        exact_tile(want, count, es, TEST_PERIOD);
        compare(what, recv, want, count, dtype);
        if (!inplace) {
            /* The input must be left untouched. */
            fill_input(want, 0, count, dtype, op, rank);
            compare("allreduce send buffer unchanged", send, want, count, dtype);
        }
    }
    if (!inplace) test_buf_free(shared, recv);
    test_buf_free(shared, send);
}

static void test_reduce_scatter(size_t count, hora_dtype_t dtype, hora_op_t op, int shared)
{
    size_t es = hora_dtype_size(dtype), off, shard;
    char what[160];
    hora_shard(count, size, rank, &off, &shard);
    void *send = test_buf_alloc(shared, count * es), *recv = test_buf_alloc(shared, shard * es + 64);
    void *want = want_buf(shard * es + 1);
    snprintf(what, sizeof(what), "reduce_scatter count=%zu %s %s %s", count, hora_dtype_name(dtype), hora_op_name(op),
             shared ? "shared" : "malloc");
    fill_input(send, 0, count, dtype, op, rank);
    memset(recv, 0xA5, shard * es + 64);
    hora_status_t st = hora_reduce_scatter(send, recv, count, dtype, op);
    if (st != HORA_OK) {
        fail("%s: %s: %s", what, hora_status_string(st), hora_last_error());
    } else {
        for (size_t i = 0; i < shard && i < TEST_PERIOD; i++) expected_at(want, i, off + i, dtype, op);
        exact_tile(want, shard, es, TEST_PERIOD);
        compare(what, recv, want, shard, dtype);
        for (size_t i = 0; i < 64; i++)
            if (((unsigned char *)recv)[shard * es + i] != 0xA5) {
                fail("%s: wrote past its shard", what);
                break;
            }
    }
    test_buf_free(shared, recv);
    test_buf_free(shared, send);
}

/* Rank r contributes count + r - 1 (clamped at 0) elements: blocks differ. */
static void test_allgatherv(size_t count, hora_dtype_t dtype, int inplace, int shared)
{
    size_t es = hora_dtype_size(dtype), total = 0, displ = 0;
    size_t *counts = malloc(sizeof(size_t) * (size_t)size);
    char what[160];
    for (int r = 0; r < size; r++) {
        counts[r] = (count + (size_t)r >= 1) ? count + (size_t)r - 1 : 0;
        if (count == 0) counts[r] = 0;
        if (r == rank) displ = total;
        total += counts[r];
    }
    void *recv = test_buf_alloc(shared, total * es);
    void *send = inplace ? (char *)recv + displ * es : test_buf_alloc(shared, counts[rank] * es);
    void *want = want_buf(total * es + 1);
    snprintf(what, sizeof(what), "allgatherv count=%zu %s %s %s", count, hora_dtype_name(dtype),
             inplace ? "in-place" : "out-of-place", shared ? "shared" : "malloc");
    memset(recv, 0xA5, total * es);
    fill_input(send, displ, counts[rank], dtype, HORA_OP_MIN, rank);
    hora_status_t st = hora_allgatherv(send, recv, counts, dtype);
    if (st != HORA_OK) {
        fail("%s: %s: %s", what, hora_status_string(st), hora_last_error());
    } else {
        size_t at = 0;
        for (int r = 0; r < size; r++) {
            fill_input((char *)want + at * es, at, counts[r], dtype, HORA_OP_MIN, r);
            at += counts[r];
        }
        compare(what, recv, want, total, dtype);
    }
    if (!inplace) test_buf_free(shared, send);
    test_buf_free(shared, recv);
    free(counts);
}

static void test_broadcast(size_t count, hora_dtype_t dtype, int root, int shared)
{
    size_t es = hora_dtype_size(dtype);
    char what[160];
    void *buf = test_buf_alloc(shared, count * es), *want = want_buf(count * es + 1);
    snprintf(what, sizeof(what), "broadcast count=%zu %s root=%d %s", count, hora_dtype_name(dtype), root,
             shared ? "shared" : "malloc");
    if (rank == root)
        fill_input(buf, 0, count, dtype, HORA_OP_MAX, root);
    else
        memset(buf, 0xA5, count * es);
    hora_status_t st = hora_broadcast(buf, count, dtype, root);
    if (st != HORA_OK) {
        fail("%s: %s: %s", what, hora_status_string(st), hora_last_error());
    } else {
        fill_input(want, 0, count, dtype, HORA_OP_MAX, root);
        compare(what, buf, want, count, dtype);
    }
    test_buf_free(shared, buf);
}

/* What bool refuses (hora.h): AVG, in the direct allreduce and
 * reduce-scatter, on every rank, with a message naming the dtype and the
 * op; nothing written. The runtime stays usable afterwards. */
static void test_bool_refusals(void)
{
    uint8_t x[4] = {1, 0, 1, 1}, y[4] = {7, 7, 7, 7};
    checks++;
    hora_status_t st = hora_allreduce(x, y, 4, HORA_DTYPE_BOOL, HORA_OP_AVG);
    if (st != HORA_ERR_INVALID_ARG)
        fail("bool avg allreduce: %s, expected HORA_ERR_INVALID_ARG", hora_status_string(st));
    else if (!strstr(hora_last_error(), "bool") || !strstr(hora_last_error(), "avg"))
        fail("bool avg allreduce: the message names neither dtype nor op: %s", hora_last_error());
    if (y[0] != 7 || y[3] != 7) fail("bool avg allreduce wrote its output");
    checks++;
    size_t off, shard;
    hora_shard(4, size, rank, &off, &shard);
    st = hora_reduce_scatter(x, y, 4, HORA_DTYPE_BOOL, HORA_OP_AVG);
    if (st != HORA_ERR_INVALID_ARG || !strstr(hora_last_error(), "bool"))
        fail("bool avg reduce_scatter: %s: %s", hora_status_string(st), hora_last_error());
    /* the names parse both ways */
    checks++;
    static const char *const names[][2] = {{"i8", "int8"}, {"i16", "int16"}, {"u16", "uint16"}, {"bool", "boolean"}};
    static const hora_dtype_t dtypes[] = {HORA_DTYPE_I8, HORA_DTYPE_I16, HORA_DTYPE_U16, HORA_DTYPE_BOOL};
    static const size_t sizes[] = {1, 2, 2, 1};
    for (int i = 0; i < 4; i++)
        if (hora_dtype_parse(names[i][0]) != (int)dtypes[i] || hora_dtype_parse(names[i][1]) != (int)dtypes[i] ||
            strcmp(hora_dtype_name(dtypes[i]), names[i][0]) || hora_dtype_size(dtypes[i]) != sizes[i])
            fail("dtype %s: name, parse or size wrong", names[i][0]);
}

static void test_errors(void)
{
    float x = 1;
    checks++;
    if (hora_allreduce(&x, &x, 1, (hora_dtype_t)99, HORA_OP_SUM) != HORA_ERR_INVALID_ARG)
        fail("a bad dtype was not rejected");
    if (hora_allreduce(&x, &x, 1, HORA_DTYPE_F32, (hora_op_t)99) != HORA_ERR_INVALID_ARG)
        fail("a bad op was not rejected");
    if (hora_broadcast(&x, 1, HORA_DTYPE_F32, size) != HORA_ERR_INVALID_ARG) fail("a bad root was not rejected");
    if (!strstr(hora_last_error(), "root")) fail("bad-root message does not mention the root: %s", hora_last_error());
    if (hora_allreduce(NULL, &x, 1, HORA_DTYPE_F32, HORA_OP_SUM) != HORA_ERR_INVALID_ARG)
        fail("a NULL buffer was not rejected");
    if (hora_mem_free(&x) != HORA_ERR_INVALID_ARG) fail("hora_mem_free of a stack address was not rejected");
    if (hora_init() != HORA_ERR_ALREADY_INITIALIZED) fail("a second hora_init was not rejected");
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && !strcmp(argv[1], "--quick");

    if (hora_allreduce(NULL, NULL, 0, HORA_DTYPE_F32, HORA_OP_SUM) != HORA_ERR_NOT_INITIALIZED) {
        fprintf(stderr, "FAIL: a collective before hora_init did not return HORA_ERR_NOT_INITIALIZED\n");
        return 1;
    }
    /* init -> shutdown -> init must work. */
    for (int round = 0; round < 2; round++) {
        hora_status_t st = hora_init();
        if (st != HORA_OK) {
            fprintf(stderr, "FAIL: hora_init: %s: %s\n", hora_status_string(st), hora_last_error());
            return 1;
        }
        if (round == 0 && hora_shutdown() != HORA_OK) {
            fprintf(stderr, "FAIL: hora_shutdown\n");
            return 1;
        }
    }
    rank = hora_rank();
    size = hora_size();
    if (rank == 0)
        printf("test_collectives: %d ranks, transport %s, %d nodes%s\n", size, hora_transport_name(), hora_node_count(),
               quick ? " (quick)" : "");

    test_errors();
    test_bool_refusals();
    for (int dtype = 0; dtype < HORA_DTYPE_COUNT; dtype++) {
        size_t es = hora_dtype_size((hora_dtype_t)dtype);
        size_t counts[] = {0, 1, (size_t)size - 1, (size_t)size + 1, 255, 4099, 1000003, ((size_t)16 << 20) / es};
        int ncounts = quick ? 7 : 8;
        for (int c = 0; c < ncounts; c++) {
            size_t count = counts[c];
            if (c == 2 && count == counts[0]) continue;
            int big = count >= 1000003, biggest = c == 7;
            for (int shared = 1; shared >= 0; shared--) {
                /* 1000003 runs every op on shared buffers, 16 MiB (the
                 * chunked rings) sum, average (its divide over the chunks)
                 * and max: min and prod are the same walks with another
                 * kernel. Malloc'd buffers go through the same ring after
                 * one staging copy: sum alone. */
                for (int op = 0; op < HORA_OP_COUNT; op++) {
                    if (big && !shared && op != HORA_OP_SUM) continue;
                    if (biggest && (op == HORA_OP_MIN || op == HORA_OP_PROD)) continue;
                    if (dtype == HORA_DTYPE_BOOL && op == HORA_OP_AVG) continue; /* refused: test_bool_refusals */
                    for (int inplace = 0; inplace < 2; inplace++)
                        test_allreduce(count, (hora_dtype_t)dtype, (hora_op_t)op, inplace, shared);
                    if (!(big && op != HORA_OP_SUM && op != HORA_OP_MAX))
                        test_reduce_scatter(count, (hora_dtype_t)dtype, (hora_op_t)op, shared);
                }
                for (int inplace = 0; inplace < 2; inplace++)
                    test_allgatherv(big ? count / (size_t)size : count, (hora_dtype_t)dtype, inplace, shared);
                for (int root = 0; root < size; root++)
                    if (!big || root == size - 1) test_broadcast(count, (hora_dtype_t)dtype, root, shared);
            }
        }
    }

    return test_summary("test_collectives", failures, checks);
}
