/*
 * test_opts.c - hora_opts_t's struct_bytes rule (hora.h), through the
 * runtime's reader (api/api_opts.c) that every hora_*_async call uses: a
 * caller built against an older, smaller hora_opts_t is read field by field
 * and gets HORA_OPTS_INIT's values for the fields it does not know, also in
 * an array of options; a struct_bytes that is not set, too small or larger
 * than this libhora's is refused with HORA_ERR_INVALID_ARG and a message
 * that says which and how to fix it. No MPI: the reader is called directly
 * (tests/runtime/async/async_errors.c checks the hora_*_async calls refuse too).
 * Run: test_opts   (exit 0 = all passed)
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "api/api_opts.h"
#include "hora.h"

#include "check.h"
#include "opts_older.h"

/* Each field of hora_opts_t, to compare two of them field by field (their
 * padding bytes may differ). */
#define FIELD(f)                                                    \
    {                                                               \
#f, offsetof(hora_opts_t, f), sizeof(((hora_opts_t *)0)->f) \
    }
static const struct {
    const char *name;
    size_t offset, bytes;
} fields[] = {
    FIELD(struct_bytes), FIELD(prescale), FIELD(postscale), FIELD(compression), FIELD(memory),      FIELD(ndim),
    FIELD(dims),         FIELD(device),   FIELD(stream),    FIELD(ready_event), FIELD(process_set), FIELD(reproducible),
};
#define FIELD_COUNT ((int)(sizeof(fields) / sizeof(fields[0])))

/* Every field of got equals want's. */
static void expect_opts(const char *what, const hora_opts_t *got, const hora_opts_t *want)
{
    for (int f = 0; f < FIELD_COUNT; f++)
        CHECK(!memcmp((const char *)got + fields[f].offset, (const char *)want + fields[f].offset, fields[f].bytes),
              "%s: field %s differs from what was expected", what, fields[f].name);
}

/* Options with every field away from its default. */
static hora_opts_t opts_all_set(void)
{
    hora_opts_t o = HORA_OPTS_INIT;
    o.prescale = 0.25;
    o.postscale = 4;
    o.compression = HORA_COMPRESSION_BF16;
    o.memory = HORA_MEMORY_CUDA;
    o.ndim = 2;
    o.dims[0] = 3;
    o.dims[1] = 5;
    o.device = 1;
    o.stream = (void *)0x1000;
    o.ready_event = (void *)0x2000;
    o.process_set = 3;
    o.reproducible = HORA_REPRODUCIBLE_EXACT;
    return o;
}

static void test_null_and_current(void)
{
    const hora_opts_t defaults = HORA_OPTS_INIT;
    hora_opts_t out;
    memset(&out, 0x5a, sizeof(out));
    hora_status_t st = api_opts_read("test", "null", NULL, 0, &out);
    CHECK(st == HORA_OK, "NULL opts: %s", hora_status_string(st));
    expect_opts("NULL opts", &out, &defaults);
    CHECK(defaults.struct_bytes == sizeof(hora_opts_t), "HORA_OPTS_INIT sets struct_bytes %zu, sizeof is %zu",
          defaults.struct_bytes, sizeof(hora_opts_t));

    const hora_opts_t all = opts_all_set();
    st = api_opts_read("test", "current", &all, 0, &out);
    CHECK(st == HORA_OK, "current size: %s", hora_status_string(st));
    expect_opts("current size", &out, &all);
}

/* An older caller's struct, followed in memory by bytes that a reader of
 * the whole current struct would take for process_set and reproducible:
 * those fields must come out as HORA_OPTS_INIT has them. */
static void test_older(void)
{
    union opts_older_poisoned in;
    opts_older_init(&in);
    in.older.prescale = 0.5;
    in.older.postscale = 3;
    in.older.compression = HORA_COMPRESSION_FP16;
    in.older.ndim = 1;
    in.older.dims[0] = 7;
    in.older.device = 2;
    in.older.stream = (void *)0x3000;

    hora_opts_t want = HORA_OPTS_INIT;
    want.prescale = 0.5;
    want.postscale = 3;
    want.compression = HORA_COMPRESSION_FP16;
    want.ndim = 1;
    want.dims[0] = 7;
    want.device = 2;
    want.stream = (void *)0x3000;

    hora_opts_t out;
    hora_status_t st = api_opts_read("test", "older", opts_older_as_opts(&in), 0, &out);
    CHECK(st == HORA_OK, "older size %zu refused: %s: %s", sizeof(struct opts_older), hora_status_string(st),
          hora_last_error());
    expect_opts("older size", &out, &want);
    CHECK(out.process_set == HORA_PROCESS_SET_WORLD && out.reproducible == HORA_REPRODUCIBLE_DEFAULT,
          "older size: process_set %d, reproducible %d read from past struct_bytes (want the defaults 0, 0)",
          out.process_set, out.reproducible);
    CHECK(out.struct_bytes == sizeof(hora_opts_t), "older size: out.struct_bytes %zu, want %zu", out.struct_bytes,
          sizeof(hora_opts_t));

    /* A struct_bytes that ends inside a field (dims): the fields before it
     * are read, that one and the rest are not. */
    hora_opts_t cut = opts_all_set();
    cut.struct_bytes = offsetof(hora_opts_t, dims) + sizeof(int64_t);
    st = api_opts_read("test", "cut", &cut, 0, &out);
    CHECK(st == HORA_OK, "size inside dims: %s", hora_status_string(st));
    want = (hora_opts_t)HORA_OPTS_INIT;
    want.prescale = cut.prescale;
    want.postscale = cut.postscale;
    want.compression = cut.compression;
    want.memory = cut.memory;
    want.ndim = cut.ndim;
    expect_opts("size inside dims", &out, &want);

    /* Only struct_bytes: every field defaulted (as for NULL). */
    hora_opts_t bare = opts_all_set();
    bare.struct_bytes = sizeof(size_t);
    st = api_opts_read("test", "bare", &bare, 0, &out);
    CHECK(st == HORA_OK, "struct_bytes only: %s", hora_status_string(st));
    want = (hora_opts_t)HORA_OPTS_INIT;
    expect_opts("struct_bytes only", &out, &want);
}

/* An array of older options is strided by its struct_bytes, not by this
 * libhora's sizeof; members must agree on it. */
static void test_older_array(void)
{
    struct opts_older arr[3];
    memset(arr, 0, sizeof(arr));
    for (int i = 0; i < 3; i++) {
        arr[i].struct_bytes = sizeof(struct opts_older);
        arr[i].prescale = 1 + i;
        arr[i].postscale = 1;
        arr[i].ndim = 2;
        arr[i].dims[0] = 10 + i;
        arr[i].dims[1] = 4;
        arr[i].device = -1;
    }
    for (int i = 0; i < 3; i++) {
        hora_opts_t out;
        hora_status_t st = api_opts_read("test", "array", (const hora_opts_t *)(const void *)arr, i, &out);
        CHECK(st == HORA_OK, "older array member %d: %s", i, hora_status_string(st));
        CHECK(out.prescale == 1 + i && out.ndim == 2 && out.dims[0] == 10 + i && out.dims[1] == 4 &&
                  out.process_set == 0 && out.reproducible == 0,
              "older array member %d: prescale %g, shape %d:[%lld, %lld], set %d, reproducible %d", i, out.prescale,
              out.ndim, (long long)out.dims[0], (long long)out.dims[1], out.process_set, out.reproducible);
    }
    arr[1].struct_bytes = sizeof(hora_opts_t);
    hora_opts_t out;
    memset(&out, 0x5a, sizeof(out));
    hora_opts_t untouched = out;
    hora_status_t st = api_opts_read("test", "array", (const hora_opts_t *)(const void *)arr, 1, &out);
    CHECK(st == HORA_ERR_INVALID_ARG, "array member with another struct_bytes: %s, want HORA_ERR_INVALID_ARG",
          hora_status_string(st));
    CHECK(strstr(hora_last_error(), "opts[1].struct_bytes") != NULL, "array member message: '%s'", hora_last_error());
    CHECK(!memcmp(&out, &untouched, sizeof(out)), "*out written although the read failed");
}

/* struct_bytes bytes refused, with a message containing each of want[]. */
static void expect_refused(const char *what, const hora_opts_t *opts, const char *const *want, int want_count)
{
    hora_opts_t out;
    memset(&out, 0x5a, sizeof(out));
    hora_opts_t untouched = out;
    hora_status_t st = api_opts_read("hora_allreduce_async", "grad.w", opts, 0, &out);
    CHECK(st == HORA_ERR_INVALID_ARG, "%s: %s, want HORA_ERR_INVALID_ARG", what, hora_status_string(st));
    const char *msg = hora_last_error();
    for (int i = 0; i < want_count; i++)
        CHECK(strstr(msg, want[i]) != NULL, "%s: the message '%s' does not say '%s'", what, msg, want[i]);
    CHECK(!memcmp(&out, &untouched, sizeof(out)), "%s: *out written although the read failed", what);
    printf("  %-34s -> %s\n", what, msg);
}

static void test_refused(void)
{
    hora_opts_t o = HORA_OPTS_INIT;
    static const char *const zero[] = {"hora_allreduce_async('grad.w')", "struct_bytes is 0", "HORA_OPTS_INIT"};
    o.struct_bytes = 0;
    expect_refused("struct_bytes 0 (not initialised)", &o, zero, 3);

    static const char *const small[] = {"struct_bytes 4 is too small", "HORA_OPTS_INIT"};
    o.struct_bytes = 4;
    expect_refused("struct_bytes 4", &o, small, 2);

    char big_text[64];
    snprintf(big_text, sizeof(big_text), "struct_bytes %zu is larger", sizeof(hora_opts_t) + 8);
    const char *const big[] = {big_text, "newer hora.h", "rebuild"};
    o.struct_bytes = sizeof(hora_opts_t) + 8;
    expect_refused("struct_bytes past this libhora's", &o, big, 3);

    /* A program built against a hora.h from before struct_bytes: its first
     * field is prescale, whose 1.0 read as a size is far too large. */
    union {
        double prescale;
        hora_opts_t opts;
    } before;
    memset(&before, 0, sizeof(before));
    before.prescale = 1.0;
    static const char *const old[] = {"is larger", "older one without struct_bytes"};
    expect_refused("hora.h from before struct_bytes", &before.opts, old, 2);

    /* An array whose first member is refused names opts[0]. */
    hora_opts_t arr[2] = {HORA_OPTS_INIT, HORA_OPTS_INIT};
    arr[0].struct_bytes = 0;
    hora_opts_t out;
    hora_status_t st = api_opts_read("test", "array", arr, 1, &out);
    CHECK(st == HORA_ERR_INVALID_ARG && strstr(hora_last_error(), "opts[0].struct_bytes is 0"),
          "array with a bad first member: %s '%s'", hora_status_string(st), hora_last_error());
}

int main(void)
{
    printf("test_opts: hora_opts_t of %zu bytes (errors about struct_bytes are expected below)\n", sizeof(hora_opts_t));
    test_null_and_current();
    test_older();
    test_older_array();
    test_refused();
    printf("test_opts: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
