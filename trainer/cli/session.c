/*
 * session.c - hora-train's error report (each rank's first error, printed
 * once, kept for hora_abort) and its JSON-lines log (session.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "session.h"

/* This rank's first error, as it was printed: what hora_abort tells the
 * peers. */
static char first_error[1024];

/* Print an error on stderr (one line) and keep the first one. */
void main_report(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
    if (!first_error[0]) snprintf(first_error, sizeof(first_error), "%s", line);
}

void main_report_keep(const char *line)
{
    if (!first_error[0]) snprintf(first_error, sizeof(first_error), "%s", line);
}

const char *main_first_error(void) { return first_error; }

static char lost_reason[1024];

void main_note_lost(const char *message)
{
    /* The launcher's verdict starts at "generation G: "; a caller may have
     * put its own words before it (the trainer's "allreduce of X failed: "). */
    const char *verdict = strstr(message, "generation ");
    snprintf(lost_reason, sizeof(lost_reason), "%s", verdict ? verdict : message);
}

const char *main_lost_reason(void) { return lost_reason; }

void main_log_json(run_t *r, const char *fmt, ...)
{
    if (!r->log) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(r->log, fmt, ap);
    va_end(ap);
    fputc('\n', r->log);
    fflush(r->log);
}
