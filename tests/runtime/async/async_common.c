/* async_common.c - the helpers every mode of test_async uses (see
 * async_common.h): failure counting, timing, the test's own barrier, request
 * waiting and polling, exact inputs and comparisons. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "async_common.h"
#include "exact.h"
#include "file.h"
#include "rand.h"

int rank, size, quick, iterations;
atomic_int failures, checks;
MPI_Comm test_comm;

void fail(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    if (atomic_fetch_add(&failures, 1) >= TEST_MAX_REPORTS) return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "rank %d FAIL: %s\n", rank, line);
}

/* ---------------------------------------------------------------- helpers */

void barrier(void) { MPI_Barrier(test_comm); }

uint32_t mix3(uint32_t a, uint32_t b, uint32_t c)
{
    return (uint32_t)(test_mix64(a * UINT64_C(0x9E3779B97F4A7C15) + b * UINT64_C(0xC2B2AE3D27D4EB4F) + c) >> 32);
}

void shuffle(int *a, int n, uint64_t seed)
{
    test_rng_t rng = test_rng_seeded(seed);
    for (int i = n - 1; i > 0; i--) {
        int j = (int)test_rng_below(&rng, (uint32_t)i + 1), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* hora_request_error, which must never be NULL. */
const char *request_message(hora_request_t req)
{
    const char *e = hora_request_error(req);
    if (!e) {
        fail("hora_request_error returned NULL");
        return "(null)";
    }
    return e;
}

/* Wait for req, which must succeed with an empty message. */
int wait_ok(hora_request_t req, const char *what)
{
    hora_status_t st = hora_wait(req);
    CHECK(st == HORA_OK, "%s: hora_wait returned %s: %s", what, hora_status_string(st), request_message(req));
    if (st != HORA_OK) return 0;
    const char *e = request_message(req);
    CHECK(e[0] == '\0', "%s: succeeded, but hora_request_error says '%s'", what, e);
    return 1;
}

/* Poll hora_test until req completes (*done = 1, its status returned) or
 * limit_s passes (*done = 0). Checks the contract of an unfinished request:
 * HORA_IN_PROGRESS with *done = 0. */
hora_status_t poll_until(hora_request_t req, double limit_s, int *done, const char *what)
{
    double t0 = test_now_s();
    for (;;) {
        int d = -1;
        hora_status_t st = hora_test(req, &d);
        if (d == 1) {
            *done = 1;
            return st;
        }
        if (d != 0 || st != HORA_IN_PROGRESS) {
            fail("%s: hora_test on an unfinished request returned %s with done=%d", what, hora_status_string(st), d);
            *done = 1;
            return hora_wait(req);
        }
        if (test_now_s() - t0 > limit_s) {
            *done = 0;
            return HORA_IN_PROGRESS;
        }
        test_sleep_s(0.0002);
    }
}

int runtime_start(const char *what)
{
    hora_status_t st = hora_init();
    CHECK(st == HORA_OK, "%s: hora_init: %s: %s", what, hora_status_string(st), hora_last_error());
    return st == HORA_OK;
}

void runtime_stop(const char *what)
{
    hora_status_t st = hora_shutdown();
    CHECK(st == HORA_OK, "%s: hora_shutdown: %s: %s", what, hora_status_string(st), hora_last_error());
}

/* ------------------------------------------------- values and comparisons */

/* Input of rank r, element i of the tensor `salt`, a small integer exact in
 * every dtype for op: PROD -1, 1, 2 (u8 1, 2); MIN/MAX -50..50 (u8 0..199);
 * SUM/AVG -5..5 (u8 0..10) plus high bits that catch truncated wide ints. */
int64_t input_value(hora_dtype_t dtype, hora_op_t op, int r, size_t i, unsigned salt)
{
    uint64_t h = (uint64_t)i * 2654435761u + (uint64_t)r * 40503u + (uint64_t)salt * 0x9E3779B9u;
    h ^= h >> 13;
    h *= 0x85EBCA6Bu;
    h ^= h >> 16;
    return exact_value(dtype, op, r, h);
}

/* Element-wise compare; reports the first wrong element. Returns #wrong. */
size_t compare(const char *what, const void *got, const void *want, size_t count, hora_dtype_t dtype)
{
    size_t es = hora_dtype_size(dtype), wrong = 0, first = 0;
    atomic_fetch_add(&checks, 1);
    if (!memcmp(got, want, count * es)) return 0;
    for (size_t i = 0; i < count; i++)
        if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) && wrong++ == 0) first = i;
    uint64_t g = 0, w = 0;
    memcpy(&g, (const char *)got + first * es, es);
    memcpy(&w, (const char *)want + first * es, es);
    fail("%s: %zu of %zu elements wrong; first is element %zu: 0x%llx, expected 0x%llx", what, wrong, count, first,
         (unsigned long long)g, (unsigned long long)w);
    return wrong;
}

/* ------------------------------------------- closed-form stress inputs */

static void stress_coef(int j, size_t i, int it, int *b, int *d)
{
    uint32_t h = mix3((uint32_t)i, (uint32_t)j, (uint32_t)it);
    *b = (int)(h % 11) - 5;
    *d = (int)((h >> 8) % 3) - 1;
}

int stress_input(int j, size_t i, int it, int r)
{
    int b, d;
    stress_coef(j, i, it, &b, &d);
    return b + r * d;
}

/* Over ranks r = 0..n-1 of b + r * d, in closed form. */
double stress_expected(int j, size_t i, int it, hora_op_t op, hora_dtype_t dtype)
{
    int b, d, n = size;
    stress_coef(j, i, it, &b, &d);
    int sum = n * b + d * n * (n - 1) / 2;
    switch (op) {
    case HORA_OP_MAX: return b + (d > 0 ? d * (n - 1) : 0);
    case HORA_OP_MIN: return b + (d < 0 ? d * (n - 1) : 0);
    case HORA_OP_AVG: return dtype == HORA_DTYPE_F32 ? (double)((float)sum / (float)n) : (double)(sum / n);
    default: return sum;
    }
}

int stderr_capture_begin(struct stderr_capture *cap, const char *what)
{
    snprintf(cap->path, sizeof(cap->path), "/tmp/hora_test_%s_XXXXXX", what);
    fflush(stderr);
    cap->fd = mkstemp(cap->path);
    cap->saved = dup(2);
    if (cap->fd < 0 || cap->saved < 0 || dup2(cap->fd, 2) < 0) {
        fail("%s: cannot redirect stderr to %s", what, cap->path);
        return 0;
    }
    return 1;
}

char *stderr_capture_end(struct stderr_capture *cap)
{
    fflush(stderr);
    dup2(cap->saved, 2);
    close(cap->saved);
    close(cap->fd);
    char *text = test_read_file(cap->path, NULL);
    unlink(cap->path);
    return text;
}
