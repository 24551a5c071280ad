/* check.h - the single-threaded tests' assertion (unit tests, test_topo):
 * count every check, report a failing one with file, line and a printf-style
 * message, and keep going so that one run shows every failure. main() prints
 * the counts (a multi-rank test sums them over the ranks first) and exits 1
 * on failures. */
#ifndef HORA_TEST_CHECK_H
#define HORA_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* A test built from several files defines CHECK_SHARED in each and
 * `int failures, checks;` in one of them, so that every file counts into the
 * same totals; a one-file test gets its own. */
#ifdef CHECK_SHARED
extern int failures, checks;
#else
static int failures, checks;
#endif

/* Reports a failed check: formatted first and written by one fprintf, so that
 * the lines of several ranks sharing a terminal do not interleave. */
static inline void check_report(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline void check_report(const char *file, int line, const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    char *msg = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (msg) {
        vsnprintf(msg, (size_t)len + 1, fmt, again);
        fprintf(stderr, "FAIL %s:%d: %s\n", file, line, msg);
        free(msg);
    } else {
        fprintf(stderr, "FAIL %s:%d: ", file, line);
        vfprintf(stderr, fmt, again);
        fputc('\n', stderr);
    }
    va_end(again);
    va_end(ap);
}

#define CHECK(cond, ...)                                   \
    do {                                                   \
        checks++;                                          \
        if (!(cond)) {                                     \
            failures++;                                    \
            check_report(__FILE__, __LINE__, __VA_ARGS__); \
        }                                                  \
    } while (0)

#endif
