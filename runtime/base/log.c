/* log.c - one line per message, "hora[rank] LEVEL: text", written with a single
 * write so lines from concurrent ranks and threads do not interleave. */
#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

static atomic_int log_level = LOG_LEVEL_WARN;
static atomic_int log_rank = -1;

void log_set_level(int level) { atomic_store(&log_level, level); }
void log_set_rank(int rank) { atomic_store(&log_rank, rank); }
int log_enabled(int level) { return level <= atomic_load(&log_level); }

void log_msg(int level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    char line[1024];
    int len;
    va_list ap;

    if (!log_enabled(level)) return;
    if (atomic_load(&log_rank) >= 0)
        len = snprintf(line, sizeof(line), "hora[%d] %s: ", atomic_load(&log_rank), names[level]);
    else
        len = snprintf(line, sizeof(line), "hora %s: ", names[level]);
    va_start(ap, fmt);
    len += vsnprintf(line + len, sizeof(line) - (size_t)len - 1, fmt, ap);
    va_end(ap);
    if (len > (int)sizeof(line) - 2) len = (int)sizeof(line) - 2;
    line[len++] = '\n';
    if (write(STDERR_FILENO, line, (size_t)len) < 0) { /* nothing sensible to do */ }
}
