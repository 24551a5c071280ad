/*
 * cuda_log.h - how trainer/cuda reports a failure: one line
 * "hora-train: cuda: ..." on stderr, written where the failure is seen
 * (callers above only pass the status on).
 */
#ifndef TR_CUDA_LOG_H
#define TR_CUDA_LOG_H

#include "hora.h"

/* Logs the message; returns status. */
hora_status_t cuda_fail(hora_status_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
