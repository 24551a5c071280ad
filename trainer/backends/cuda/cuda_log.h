/*
 * cuda_log.h - how trainer/backends/cuda reports a failure: the status, and the
 * message "cuda: ..." in libhora-base's store (base/status.h), set where the
 * failure is seen; callers above only pass the status on, and the outermost
 * (hora-train's main, a benchmark's, a test) prints status_message() once.
 */
#ifndef TR_CUDA_LOG_H
#define TR_CUDA_LOG_H

#include "hora.h"

/* Sets the message ("cuda: " + fmt); returns status. Prints nothing. */
hora_status_t cuda_fail(hora_status_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
