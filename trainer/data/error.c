/* error.c - the data pipeline's thread-local error message (error.h). */
#include "error.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char data_error[1024];

const char *tr_data_last_error(void) { return data_error; }

void tr_data_set_error(const char *message)
{
    snprintf(data_error, sizeof(data_error), "%s", message ? message : "");
}

hora_status_t tr_data_fail(hora_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(data_error, sizeof(data_error), fmt, ap);
    va_end(ap);
    return status;
}

void tr_data_vformat_at(char *buf, size_t buf_bytes, const char *path, uint64_t offset, const char *fmt,
                        va_list ap)
{
    int n = snprintf(buf, buf_bytes, "%s: offset %" PRIu64 ": ", path ? path : "?", offset);
    if (n < 0 || (size_t)n >= buf_bytes)
        return;
    vsnprintf(buf + n, buf_bytes - (size_t)n, fmt, ap);
}

hora_status_t tr_data_fail_at(hora_status_t status, const char *path, uint64_t offset,
                              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tr_data_vformat_at(data_error, sizeof(data_error), path, offset, fmt, ap);
    va_end(ap);
    return status;
}
