/*
 * cpu_log.c - how trainer/backends/cpu reports a failure (cpu_log.h): the status and
 * one message in libhora-base's store where it is seen, oneDNN's statuses
 * translated at the boundary; nothing printed.
 */
#include <oneapi/dnnl/dnnl_debug.h>

#include "cpu_log.h"

hora_status_t cpu_dnnl(dnnl_status_t dnnl_status, const char *what)
{
    if (dnnl_status == dnnl_success) return HORA_OK;
    hora_status_t status = dnnl_status == dnnl_out_of_memory   ? HORA_ERR_NO_MEMORY
                           : dnnl_status == dnnl_unimplemented ? HORA_ERR_UNSUPPORTED
                                                               : HORA_ERR_INTERNAL;
    return status_set(status, "cpu: %s: oneDNN says %s", what, dnnl_status2str(dnnl_status));
}
