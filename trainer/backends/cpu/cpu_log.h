/*
 * cpu_log.h - how trainer/cpu reports a failure: one line
 * "hora-train: cpu: ..." on stderr, written where the failure is seen
 * (callers above only pass the status on; cuda_log.h is the cuda backend's).
 */
#ifndef TR_CPU_LOG_H
#define TR_CPU_LOG_H

#include <oneapi/dnnl/dnnl.h>

#include "hora.h"

/* HORA_OK for dnnl_success; otherwise log "cpu: <what>: <dnnl status>"
 * once, here, and translate the status. */
hora_status_t cpu_dnnl(dnnl_status_t dnnl_status, const char *what);

/* Log a bad argument; returns HORA_ERR_INVALID_ARG. */
hora_status_t cpu_invalid(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
