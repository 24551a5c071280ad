/*
 * cuda_log.c - cuda_fail (cuda_log.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "base/status.h"
#include "cuda_log.h"

hora_status_t cuda_fail(hora_status_t status, const char *fmt, ...)
{
    char what[STATUS_MESSAGE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return status_set(status, "cuda: %s", what);
}
