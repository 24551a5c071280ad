/*
 * cpu_log.c - how trainer/backends/cpu reports a failure (cpu_log.h): the status and
 * one message in libhora-base's store where it is seen, oneDNN's statuses
 * translated at the boundary; nothing printed.
 */
#include <stdarg.h>
#include <stdio.h>

#include <oneapi/dnnl/dnnl_debug.h>

#include "cpu_log.h"

hora_status_t cpu_dnnl(dnnl_status_t dnnl_status, const char *what)
{
    if (dnnl_status == dnnl_success)
        return HORA_OK;
    hora_status_t status = dnnl_status == dnnl_out_of_memory   ? HORA_ERR_NO_MEMORY
                           : dnnl_status == dnnl_unimplemented ? HORA_ERR_UNSUPPORTED
                                                               : HORA_ERR_INTERNAL;
    return status_set(status, "cpu: %s: oneDNN says %s", what, dnnl_status2str(dnnl_status));
}

hora_status_t cpu_invalid(const char *fmt, ...)
{
    char what[STATUS_MESSAGE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return status_set(HORA_ERR_INVALID_ARG, "cpu: %s", what);
}
