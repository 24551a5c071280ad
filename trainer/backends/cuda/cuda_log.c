/*
 * cuda_log.c - cuda_fail (cuda_log.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "cuda_log.h"

hora_status_t cuda_fail(hora_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hora-train: cuda: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return status;
}
