/*
 * cpu_log.c - how trainer/cpu reports a failure (cpu_log.h): one line
 * "hora-train: cpu: ..." on stderr where it is seen, oneDNN's statuses
 * translated at the boundary.
 */
#include <stdarg.h>
#include <stdio.h>

#include <oneapi/dnnl/dnnl_debug.h>

#include "cpu_log.h"

hora_status_t cpu_dnnl(dnnl_status_t dnnl_status, const char *what)
{
    if (dnnl_status == dnnl_success)
        return HORA_OK;
    fprintf(stderr, "hora-train: cpu: %s: oneDNN says %s\n", what, dnnl_status2str(dnnl_status));
    switch (dnnl_status) {
    case dnnl_out_of_memory: return HORA_ERR_NO_MEMORY;
    case dnnl_unimplemented: return HORA_ERR_UNSUPPORTED;
    default: return HORA_ERR_INTERNAL;
    }
}

hora_status_t cpu_invalid(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hora-train: cpu: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return HORA_ERR_INVALID_ARG;
}
