/* check.h - the single-threaded tests' assertion (unit tests, test_topo):
 * count every check, report a failing one with file, line and a printf-style
 * message, and keep going so that one run shows every failure. main() prints
 * the counts (a multi-rank test sums them over the ranks first) and exits 1
 * on failures. */
#ifndef HORA_TEST_CHECK_H
#define HORA_TEST_CHECK_H

#include <stdio.h>

static int failures, checks;

#define CHECK(cond, ...)                                                                                     \
    do {                                                                                                     \
        checks++;                                                                                            \
        if (!(cond)) {                                                                                       \
            failures++;                                                                                      \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                             \
            fprintf(stderr, __VA_ARGS__);                                                                    \
            fputc('\n', stderr);                                                                             \
        }                                                                                                    \
    } while (0)

#endif
