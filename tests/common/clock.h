/* clock.h - the tests' time: seconds on the monotonic clock (durations,
 * deadlines, benchmarks) and a sleep that finishes after a signal.
 * Header-only. (Wall-clock times that ranks compare: report.h's
 * test_now_real.) */
#ifndef HORA_TEST_CLOCK_H
#define HORA_TEST_CLOCK_H

#include <errno.h>
#include <time.h>

/* Seconds on CLOCK_MONOTONIC. */
static inline double test_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sleeps s seconds (s >= 0), the rest again after each signal. */
static inline void test_sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

#endif
