/*
 * error.h - the data pipeline's error messages: one thread-local buffer
 * shared by record, idx, dataset, jpeg and loader, so that whichever layer
 * detects a problem writes the message once ("FILE: offset N: what") and the
 * caller reads it with tr_data_last_error() (tr_record_last_error and
 * tr_loader_last_error return the same). A message may be built from the
 * current one (tr_data_fail(s, "bad shard: %s", tr_data_last_error())).
 */
#ifndef TR_DATA_ERROR_H
#define TR_DATA_ERROR_H

#include <stdint.h>

#include "hora.h"

/* Set the calling thread's message and return status. */
__attribute__((format(printf, 2, 3)))
hora_status_t tr_data_fail(hora_status_t status, const char *fmt, ...);
/* The same with a "PATH: offset N: " prefix. */
__attribute__((format(printf, 4, 5)))
hora_status_t tr_data_fail_at(hora_status_t status, const char *path, uint64_t offset,
                              const char *fmt, ...);
/* The calling thread's last message ("" if none). */
const char *tr_data_last_error(void);
/* Replace the calling thread's message (copying a message between threads). */
void tr_data_set_error(const char *message);

#endif
