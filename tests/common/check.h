/* check.h - the single-threaded tests' assertion (unit tests, test_topo):
 * count every check, report a failing one with file, line and a printf-style
 * message, and keep going so that one run shows every failure. main() prints
 * the counts (a multi-rank test sums them over the ranks first) and exits 1
 * on failures. */
#ifndef HORA_TEST_CHECK_H
#define HORA_TEST_CHECK_H

#include <stdio.h>

static int failures, checks;

/* The report is formatted first and written by one fprintf, so that the
 * lines of several ranks sharing a terminal do not interleave. */
#define CHECK(cond, ...)                                                                                     \
    do {                                                                                                     \
        checks++;                                                                                            \
        if (!(cond)) {                                                                                       \
            char check_msg_[4096];                                                                           \
            failures++;                                                                                      \
            snprintf(check_msg_, sizeof(check_msg_), __VA_ARGS__);                                           \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, check_msg_);                             \
        }                                                                                                    \
    } while (0)

#endif
