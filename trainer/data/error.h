/*
 * error.h - the data pipeline's error messages: one thread-local buffer
 * shared by idx, dataset, jpeg and loader, so that whichever layer detects a
 * problem writes the message once ("FILE: offset N: what") and the caller
 * reads it with tr_data_last_error() (tr_loader_last_error returns the same).
 */
#ifndef TR_DATA_ERROR_H
#define TR_DATA_ERROR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "hora.h"

/* Set the calling thread's message and return status. */
__attribute__((format(printf, 2, 3)))
hora_status_t tr_data_fail(hora_status_t status, const char *fmt, ...);
/* The same with a "PATH: offset N: " prefix. */
__attribute__((format(printf, 4, 5)))
hora_status_t tr_data_fail_at(hora_status_t status, const char *path, uint64_t offset,
                              const char *fmt, ...);
/* "PATH: offset N: " + fmt into buf (record.c keeps its own buffer for
 * tr_record_last_error, whose callers copy it into this one). */
void tr_data_vformat_at(char *buf, size_t buf_bytes, const char *path, uint64_t offset, const char *fmt,
                        va_list ap);
/* The calling thread's last message ("" if none). */
const char *tr_data_last_error(void);
/* Replace the calling thread's message (copying a message between threads). */
void tr_data_set_error(const char *message);

#endif
