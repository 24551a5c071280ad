/* async_idle.c - mode idle: with nothing in flight the coordinator sleeps
 * instead of cycling (the process uses under 2% of a core), then ranks submit
 * seconds apart and the result is exact. Mode defer (run with
 * HORA_DEFER_MS=1500): a host request nothing waits on is deferred, yet runs
 * by itself once its deferral is up; a wait or a poll starts one at once. */
#include <sys/resource.h>

#include "async_common.h"

static double cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/* A coordinator that turned its cycle every HORA_CYCLE_TIME_MS while nothing
 * is in flight would cost each rank a steady share of a core that the
 * framework needs for compute. */
void mode_idle(void)
{
    if (!runtime_start("idle")) return;
    struct ar_case c;
    /* A first request, so the response cache and transports are warm. */
    ar_case_init(&c, "idle_warm", HORA_DTYPE_F32, HORA_OP_SUM, 4096, 1, 1, 41);
    ar_case_start(&c);
    ar_case_finish(&c, 0);
    barrier();

    const double idle_s = 2.0;
    double cpu0 = cpu_seconds(), t0 = test_now_s();
    test_sleep_s(idle_s);
    double cpu = cpu_seconds() - cpu0, wall = test_now_s() - t0;
    CHECK(cpu < 0.02 * wall, "idle: the process used %.1f ms of CPU in %.2f s with nothing in flight (limit 2%%)",
          cpu * 1e3, wall);

    /* Rank r submits r * 0.4 s late: the early ranks' coordinators wait for
     * the idle ones, which wake on their own submission. */
    ar_case_init(&c, "idle_late", HORA_DTYPE_F32, HORA_OP_SUM, 4096, 1, 1, 43);
    test_sleep_s(0.4 * rank);
    ar_case_start(&c);
    ar_case_finish(&c, 0);
    runtime_stop("idle");
}

/* HORA_DEFER_MS as the meson case sets it. */
#define DEFER_S 1.5

void mode_defer(void)
{
    if (!runtime_start("defer")) return;
    struct ar_case c;
    ar_case_init(&c, "defer_warm", HORA_DTYPE_F32, HORA_OP_SUM, 4096, 1, 1, 51);
    ar_case_start(&c);
    ar_case_finish(&c, 0);

    /* Waited on: hora_wait ends the deferral. */
    double t0 = test_now_s();
    ar_case_init(&c, "defer_wait", HORA_DTYPE_F32, HORA_OP_SUM, 4096, 1, 1, 52);
    ar_case_start(&c);
    ar_case_finish(&c, 0);
    double t = test_now_s() - t0;
    CHECK(t < 0.4 * DEFER_S, "defer: a request waited on took %.3f s (deferral %.1f s)", t, DEFER_S);

    /* Polled: hora_test ends it too. */
    ar_case_init(&c, "defer_poll", HORA_DTYPE_F32, HORA_OP_SUM, 4096, 1, 1, 53);
    t0 = test_now_s();
    ar_case_start(&c);
    ar_case_finish(&c, 1);
    t = test_now_s() - t0;
    CHECK(t < 0.4 * DEFER_S, "defer: a request polled took %.3f s (deferral %.1f s)", t, DEFER_S);

    /* Neither, just after a cycle (the deferral's grid starts there): not
     * run 0.2 s later, run by itself well after its deferral. */
    ar_case_init(&c, "defer_alone", HORA_DTYPE_F32, HORA_OP_SUM, 4096, 1, 1, 54);
    ar_case_start(&c);
    test_sleep_s(0.2);
    int done = -1;
    hora_test(c.req, &done);
    CHECK(done == 0, "defer: a request nothing waited on had run after 0.2 s (deferral %.1f s)", DEFER_S);
    /* That poll started it; the next one is left alone. */
    ar_case_finish(&c, 0);
    ar_case_init(&c, "defer_alone2", HORA_DTYPE_F32, HORA_OP_SUM, 4096, 1, 1, 55);
    ar_case_start(&c);
    test_sleep_s(2 * DEFER_S + 0.5);
    done = -1;
    hora_test(c.req, &done);
    CHECK(done == 1, "defer: a request nothing waited on had not run %.1f s after it came (deferral %.1f s)",
          2 * DEFER_S + 0.5, DEFER_S);
    ar_case_finish(&c, 0);
    runtime_stop("defer");
}
