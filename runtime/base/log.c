/* log.c - one line per message, "hora[rank] LEVEL: text", written with a single
 * write so lines from concurrent ranks and threads do not interleave. */
#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    if (write(STDERR_FILENO, line, (size_t)len) < 0) { /* nothing sensible to do */
    }
}

void log_block(int level, const char *header, const char *body)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    if (!log_enabled(level)) return;
    size_t cap = strlen(header) + 5 * strlen(body) + 96, len;
    char *text = malloc(cap);
    if (!text) {
        log_msg(level, "%s (out of memory for the rest)", header);
        return;
    }
    if (atomic_load(&log_rank) >= 0)
        len = (size_t)snprintf(text, cap, "hora[%d] %s: %s\n", atomic_load(&log_rank), names[level], header);
    else
        len = (size_t)snprintf(text, cap, "hora %s: %s\n", names[level], header);
    for (const char *p = body; *p && len + 8 < cap;) {
        size_t n = strcspn(p, "\n");
        if (len + 4 + n + 1 >= cap) n = cap - len - 6;
        memcpy(text + len, "    ", 4);
        memcpy(text + len + 4, p, n);
        len += 4 + n;
        text[len++] = '\n';
        p += n;
        if (*p == '\n') p++;
    }
    if (write(STDERR_FILENO, text, len) < 0) { /* nothing sensible to do */
    }
    free(text);
}
