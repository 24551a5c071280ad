/* async_ar_case.c - one allreduce request (struct ar_case): inputs exact in
 * every dtype, with pre/postscale and fp16/bf16 wire compression; start,
 * finish and compare with the expected result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_common.h"
#include "buf.h"
#include "exact.h"
#include "k_cpu.h"

static int is_float(hora_dtype_t dtype)
{
    return dtype == HORA_DTYPE_F32 || dtype == HORA_DTYPE_F16 || dtype == HORA_DTYPE_BF16 || dtype == HORA_DTYPE_F64;
}

/* A value not exactly representable on the fp16 / bf16 wire (a quarter ulp
 * above 1): compressed it travels as 1.0, uncompressed it does not. */
static double compression_probe(hora_compression_t c)
{
    return c == HORA_COMPRESSION_FP16 ? 1.0 + 0x1p-12 : 1.0 + 0x1p-9;
}

/* What the wire keeps of an f32 value. */
static double wire(hora_compression_t c, double v)
{
    if (c == HORA_COMPRESSION_FP16) return k_f16_to_f32(k_f32_to_f16((float)v));
    if (c == HORA_COMPRESSION_BF16) return k_bf16_to_f32(k_f32_to_bf16((float)v));
    return v;
}

double ar_input(const struct ar_case *c, int r, size_t i)
{
    if (c->opts.compression != HORA_COMPRESSION_NONE && i % 7 == 3) return compression_probe(c->opts.compression);
    return (double)input_value(c->dtype, c->op, r, i, c->salt) * (c->by_size ? size : 1);
}

/* postscale * reduce(prescale * x) with the header's rounding: AVG divides
 * in fp32 for f32/f16/bf16, fp64 for f64, truncating for integers. The inputs
 * keep every intermediate exact, so the order of operations cannot matter. */
static double ar_expected(const struct ar_case *c, size_t i)
{
    hora_compression_t comp = c->opts.compression;
    double acc = 0;
    for (int r = 0; r < size; r++) {
        double v = wire(comp, ar_input(c, r, i)) * c->opts.prescale;
        acc = r == 0 ? v : exact_reduce(c->op, acc, v);
    }
    if (c->op == HORA_OP_AVG) {
        if (c->dtype == HORA_DTYPE_F64)
            acc = acc / size;
        else if (is_float(c->dtype))
            acc = (double)((float)acc / (float)size);
        else
            acc = (double)((int64_t)acc / size);
    }
    if (c->dtype == HORA_DTYPE_BOOL) return acc != 0; /* OR / AND of the truth values: 0 or 1 */
    return wire(comp, acc * c->opts.postscale);
}

void ar_case_init(struct ar_case *c, const char *tag, hora_dtype_t dtype, hora_op_t op, size_t count, int inplace,
                  int shared, unsigned salt)
{
    *c = (struct ar_case){.dtype = dtype,
                          .op = op,
                          .count = count,
                          .inplace = inplace,
                          .shared = shared,
                          .salt = salt,
                          .opts = HORA_OPTS_INIT};
    snprintf(c->name, sizeof(c->name), "%s.%u.%s.%s.%zu.%s.%s", tag, salt, hora_dtype_name(dtype), hora_op_name(op),
             count, inplace ? "in" : "out", shared ? "shm" : "malloc");
}

static void ar_case_describe(const struct ar_case *c, char *what, size_t len)
{
    static const char *const comp[] = {"none", "fp16", "bf16"};
    snprintf(what, len, "allreduce_async %s (pre %g post %g compression %s)", c->name, c->opts.prescale,
             c->opts.postscale, comp[c->opts.compression]);
}

void ar_case_start(struct ar_case *c)
{
    size_t es = hora_dtype_size(c->dtype), bytes = c->count * es;
    char what[200];
    c->send = test_buf_alloc(c->shared, bytes);
    c->recv = c->inplace ? c->send : test_buf_alloc(c->shared, bytes);
    for (size_t i = 0; i < c->count; i++) exact_store(c->send, i, c->dtype, ar_input(c, rank, i));
    if (!c->inplace) memset(c->recv, 0xA5, bytes);
    c->req = REQ_SENTINEL;
    hora_status_t st = hora_allreduce_async(c->name, c->send, c->recv, c->count, c->dtype, c->op, &c->opts, &c->req);
    ar_case_describe(c, what, sizeof(what));
    CHECK(st == HORA_OK, "%s: enqueue returned %s: %s", what, hora_status_string(st), hora_last_error());
    c->enqueued = st == HORA_OK;
}

void ar_case_finish(struct ar_case *c, int poll)
{
    size_t es = hora_dtype_size(c->dtype), bytes = c->count * es;
    char what[200];
    ar_case_describe(c, what, sizeof(what));
    if (c->enqueued) {
        int ok;
        if (poll) {
            int done = 0;
            hora_status_t st = poll_until(c->req, 300, &done, what);
            CHECK(done && st == HORA_OK, "%s: hora_test polling ended with %s (done=%d): %s", what,
                  hora_status_string(st), done, request_message(c->req));
            ok = done && st == HORA_OK;
        } else {
            ok = wait_ok(c->req, what);
        }
        if (ok) {
            void *want = malloc(bytes ? bytes : 1);
            for (size_t i = 0; i < c->count; i++) exact_store(want, i, c->dtype, ar_expected(c, i));
            compare(what, c->recv, want, c->count, c->dtype);
            if (!c->inplace) {
                char w2[240];
                for (size_t i = 0; i < c->count; i++) exact_store(want, i, c->dtype, ar_input(c, rank, i));
                snprintf(w2, sizeof(w2), "%s: send buffer unchanged", what);
                compare(w2, c->send, want, c->count, c->dtype);
            }
            free(want);
        }
        hora_request_free(c->req);
    }
    if (!c->inplace) test_buf_free(c->shared, c->recv);
    test_buf_free(c->shared, c->send);
}

/* A correct allreduce after an error: the runtime must keep serving. */
void ar_case_next_ok(const char *after)
{
    struct ar_case c;
    char tag[48];
    snprintf(tag, sizeof(tag), "after.%s", after);
    ar_case_init(&c, tag, HORA_DTYPE_F32, HORA_OP_SUM, 100, 0, 0, 7);
    ar_case_start(&c);
    ar_case_finish(&c, 0);
}
