/* report.c - report.h: a fault test's per-rank report. */
#define _GNU_SOURCE
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int report_fd = -1;
static const char *report_program = "test";

double test_now_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void test_report(const char *key, const char *fmt, ...)
{
    char line[2048];
    int n = snprintf(line, sizeof(line), "%s=", key);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(line) - 2) n = (int)sizeof(line) - 2;
    for (int i = 0; i < n; i++)
        if (line[i] == '\n') line[i] = ' ';
    line[n++] = '\n';
    if (report_fd >= 0 && write(report_fd, line, (size_t)n) != n) {
        char what[128];
        snprintf(what, sizeof(what), "%s: report", report_program);
        perror(what);
    }
}

void test_report_open(const char *program, const char *dir_var, const char *driver)
{
    report_program = program;
    const char *dir = getenv(dir_var), *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!dir || !r) {
        fprintf(stderr, "%s: run me from %s (%s and mpirun)\n", program, driver, dir_var);
        exit(2);
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/rank%s", dir, r);
    report_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (report_fd < 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", program, path, strerror(errno));
        exit(2);
    }
    test_report("pid", "%d", (int)getpid());
}
