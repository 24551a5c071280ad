/* async_stall.c - modes stall, stall_shutdown and stall_busy: the stall
 * inspector names the tensor and the missing rank; HORA_STALL_SHUTDOWN_S ends
 * stalled requests with HORA_ERR_SHUTDOWN and hora_shutdown still returns,
 * also while every rank keeps other requests going. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "async_common.h"
#include "file.h"

/* Every "missing ranks: " list in text must be exactly {size - 1}; returns
 * how many lists were found. */
static int stall_check_lists(const char *text)
{
    int found = 0;
    for (const char *p = strstr(text, "missing ranks: "); p; p = strstr(p, "missing ranks: ")) {
        p += strlen("missing ranks: ");
        int ranks[64], n = 0;
        const char *q = p;
        while (n < 64) {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q) break;
            ranks[n++] = (int)v;
            q = end;
            if (q[0] == ',')
                q += q[1] == ' ' ? 2 : 1;
            else
                break;
        }
        found++;
        CHECK(n == 1 && ranks[0] == size - 1,
              "stall warning lists %d missing rank(s) starting with %d, expected just %d: 'missing ranks: %.*s'", n,
              n ? ranks[0] : -1, size - 1, (int)strcspn(p, "\n"), p);
    }
    return found;
}

void mode_stall(void)
{
    struct stderr_capture cap;

    if (rank == 0 && !stderr_capture_begin(&cap, "stall")) return;
    if (!runtime_start("stall")) goto out;

    struct ar_case c;
    ar_case_init(&c, "late", HORA_DTYPE_F32, HORA_OP_SUM, 1000, 0, 0, 31);
    snprintf(c.name, sizeof(c.name), "late_tensor");
    if (rank == size - 1) test_sleep_s(3);
    ar_case_start(&c);
    ar_case_finish(&c, 0);
    runtime_stop("stall");
out:
    if (rank == 0) {
        char *text = stderr_capture_end(&cap);
        if (!text) {
            fail("stall: cannot read back %s", cap.path);
            return;
        }
        int lists = stall_check_lists(text);
        CHECK(strstr(text, "late_tensor") != NULL, "stall: rank 0's stderr does not name 'late_tensor'");
        CHECK(lists > 0, "stall: rank 0's stderr has no 'missing ranks: ' list");
        if (!strstr(text, "late_tensor") || lists == 0 || atomic_load(&failures))
            fprintf(stderr, "---- rank 0 stderr during the stall test ----\n%s---- end ----\n", text);
        free(text);
    }
}

void mode_stall_shutdown(void)
{
    float x[64] = {0}, y[64];
    hora_request_t req = REQ_SENTINEL;
    hora_status_t st;

    if (!runtime_start("stall_shutdown")) return;
    if (rank != size - 1) {
        st = hora_allreduce_async("never", x, y, 64, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req);
        CHECK(st == HORA_OK, "stall_shutdown: enqueue 'never' returned %s: %s", hora_status_string(st),
              hora_last_error());
        if (st == HORA_OK) {
            int done = 0;
            double t0 = test_now_s();
            st = poll_until(req, 12, &done, "never");
            CHECK(done, "stall_shutdown: 'never' still pending after %.1f s (HORA_STALL_SHUTDOWN_S=%s)",
                  test_now_s() - t0, getenv("HORA_STALL_SHUTDOWN_S") ? getenv("HORA_STALL_SHUTDOWN_S") : "unset");
            if (done)
                CHECK(st == HORA_ERR_SHUTDOWN, "stall_shutdown: 'never' ended with %s (%s), expected HORA_ERR_SHUTDOWN",
                      hora_status_string(st), request_message(req));
            if (done) hora_request_free(req);
        }
    }
    barrier();

    /* Later requests fail too, at enqueue or at completion. */
    req = REQ_SENTINEL;
    st = hora_allreduce_async("after", x, y, 64, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req);
    if (st == HORA_OK) {
        int done = 0;
        st = poll_until(req, 10, &done, "after");
        CHECK(done, "stall_shutdown: a request after the stall shutdown still pending after 10 s");
        if (done) hora_request_free(req);
    }
    CHECK(st == HORA_ERR_SHUTDOWN,
          "stall_shutdown: a request after the stall shutdown gave %s, expected HORA_ERR_SHUTDOWN",
          hora_status_string(st));

    double t0 = test_now_s();
    st = hora_shutdown(); /* the watchdog catches a hang */
    CHECK(st == HORA_OK || st == HORA_ERR_SHUTDOWN, "stall_shutdown: hora_shutdown returned %s after %.1f s: %s",
          hora_status_string(st), test_now_s() - t0, hora_last_error());
}

/* As stall_shutdown, but every rank keeps a stream of fresh allreduces going,
 * so the cycle that shuts down also has ready requests to run or fail. */
void mode_stall_busy(void)
{
    float x[64] = {0}, y[64];
    hora_request_t never = REQ_SENTINEL;
    hora_status_t st;
    int never_ok = 0, i, stopped = 0;

    if (!runtime_start("stall_busy")) return;
    if (rank != size - 1) {
        st = hora_allreduce_async("never", x, y, 64, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &never);
        CHECK(st == HORA_OK, "stall_busy: enqueue 'never' returned %s", hora_status_string(st));
        never_ok = st == HORA_OK;
    }
    double t0 = test_now_s();
    for (i = 0; !stopped && test_now_s() - t0 < 15; i++) {
        char name[32], what[64];
        float a[257], b[257];
        hora_request_t req = REQ_SENTINEL;
        int done = 0;
        snprintf(name, sizeof(name), "busy.%d", i);
        snprintf(what, sizeof(what), "stall_busy %s", name);
        for (int k = 0; k < 257; k++) a[k] = (float)stress_input(i, (size_t)k, 0, rank);
        st = hora_allreduce_async(name, a, b, 257, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req);
        if (st == HORA_OK) st = poll_until(req, 10, &done, what);
        if (st == HORA_OK) {
            size_t wrong = 0;
            for (int k = 0; k < 257; k++)
                wrong += b[k] != (float)stress_expected(i, (size_t)k, 0, HORA_OP_SUM, HORA_DTYPE_F32);
            CHECK(wrong == 0, "%s: %zu of 257 elements wrong", what, wrong);
        } else {
            CHECK(st == HORA_ERR_SHUTDOWN, "%s: ended with %s (done=%d), expected HORA_OK or HORA_ERR_SHUTDOWN", what,
                  hora_status_string(st), done);
            stopped = 1;
        }
        if (st != HORA_IN_PROGRESS && req != REQ_SENTINEL) hora_request_free(req);
    }
    CHECK(stopped, "stall_busy: no request failed with HORA_ERR_SHUTDOWN within 15 s (%d requests ran)", i);
    if (never_ok) {
        int done = 0;
        st = poll_until(never, 5, &done, "never");
        CHECK(done && st == HORA_ERR_SHUTDOWN,
              "stall_busy: 'never' ended with %s (done=%d), expected HORA_ERR_SHUTDOWN", hora_status_string(st), done);
        if (done) hora_request_free(never);
    }
    st = hora_shutdown();
    CHECK(st == HORA_OK || st == HORA_ERR_SHUTDOWN, "stall_busy: hora_shutdown returned %s: %s", hora_status_string(st),
          hora_last_error());
}
