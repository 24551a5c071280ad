/* async_idle.c - mode idle: with nothing in flight the coordinator sleeps
 * instead of cycling (the process uses under 2% of a core), then ranks submit
 * seconds apart and the result is exact. */
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
    double cpu0 = cpu_seconds(), t0 = now_s();
    sleep_s(idle_s);
    double cpu = cpu_seconds() - cpu0, wall = now_s() - t0;
    CHECK(cpu < 0.02 * wall, "idle: the process used %.1f ms of CPU in %.2f s with nothing in flight (limit 2%%)",
          cpu * 1e3, wall);

    /* Rank r submits r * 0.4 s late: the early ranks' coordinators wait for
     * the idle ones, which wake on their own submission. */
    ar_case_init(&c, "idle_late", HORA_DTYPE_F32, HORA_OP_SUM, 4096, 1, 1, 43);
    sleep_s(0.4 * rank);
    ar_case_start(&c);
    ar_case_finish(&c, 0);
    runtime_stop("idle");
}
