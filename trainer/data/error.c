/* error.c - the data pipeline's thread-local error message (error.h).
 *
 * Every setter formats into a local buffer first and copies it in after, so
 * an argument may be the message itself: dataset.c wraps record.c's message
 * ("bad shard: %s", tr_record_last_error()), and that is this buffer. */
#include "error.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define DATA_ERROR_BYTES 1024

static _Thread_local char data_error[DATA_ERROR_BYTES];

const char *tr_data_last_error(void) { return data_error; }

void tr_data_set_error(const char *message)
{
    char text[DATA_ERROR_BYTES];
    snprintf(text, sizeof(text), "%s", message ? message : "");
    memcpy(data_error, text, strlen(text) + 1);
}

/* fmt, after "PATH: offset N: " when with_place, becomes the message. */
static void data_error_vformat(int with_place, const char *path, uint64_t offset, const char *fmt,
                               va_list ap)
{
    char text[DATA_ERROR_BYTES] = "";
    int n = 0;
    if (with_place) {
        n = snprintf(text, sizeof(text), "%s: offset %" PRIu64 ": ", path ? path : "?", offset);
        if (n < 0)
            n = 0;
    }
    if ((size_t)n < sizeof(text) - 1)
        vsnprintf(text + n, sizeof(text) - (size_t)n, fmt, ap);
    text[sizeof(text) - 1] = '\0';
    memcpy(data_error, text, strlen(text) + 1);
}

hora_status_t tr_data_fail(hora_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    data_error_vformat(0, NULL, 0, fmt, ap);
    va_end(ap);
    return status;
}

hora_status_t tr_data_fail_at(hora_status_t status, const char *path, uint64_t offset,
                              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    data_error_vformat(1, path, offset, fmt, ap);
    va_end(ap);
    return status;
}
