/*
 * cpu_log.h - how trainer/backends/cpu reports a failure: the status, and one
 * message "cpu: ..." in libhora-base's store (runtime/base/status.h), set
 * where the failure is seen; callers above only pass the status on, and the
 * outermost (hora-train's main, a benchmark's, a test) prints
 * status_message() once (cuda_log.h is the cuda backend's).
 */
#ifndef TR_CPU_LOG_H
#define TR_CPU_LOG_H

#include <oneapi/dnnl/dnnl.h>

#include "base/status.h"

/* HORA_OK for dnnl_success; otherwise translate the status at this
 * boundary, the message "cpu: <what>: oneDNN says <dnnl status>" set once,
 * here (nothing printed). */
hora_status_t cpu_dnnl(dnnl_status_t dnnl_status, const char *what);

/* A bad argument: the message "cpu: " + fmt set (nothing printed); returns
 * HORA_ERR_INVALID_ARG. fmt is a string literal (status_set checks it). */
#define cpu_invalid(...) status_set(HORA_ERR_INVALID_ARG, "cpu: " __VA_ARGS__)

#endif
