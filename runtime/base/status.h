/* status.h - error reporting inside libhora.
 *
 * An error is logged once, where it is first detected, with status_fail(),
 * which also stores the message for hora_last_error(). Callers up the stack
 * propagate the status with HORA_CHECK and add nothing. */
#ifndef HORA_STATUS_H
#define HORA_STATUS_H

#include "hora.h"

/* Record (and log at error level) a failure; returns status for "return status_fail(...)". */
hora_status_t status_fail(hora_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Same, but do not log (expected errors the caller reports itself). */
hora_status_t status_set(hora_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void status_clear(void);
/* The rank a failure is put down to, when it is another rank's doing (a
 * peer that did not come within HORA_TIMEOUT_S, a peer that died): the
 * transports' waits name the peer they waited for, and the one-outcome
 * agreements carry it to every member with the message, so that a layer
 * above can say who, not only who noticed. Every status_fail / status_set
 * forgets it (-1); status_blame sets it for the failure just recorded and
 * returns status ("return status_blame(status_fail(...), peer)"). */
hora_status_t status_blame(hora_status_t status, int rank);
int status_culprit(void);

/* Translate an MPI error code at the boundary. */
hora_status_t status_mpi(int mpi_err, const char *what);

#define HORA_CHECK(call)                                                                 \
    do {                                                                                 \
        hora_status_t status_check_ = (call);                                            \
        if (status_check_ < 0) return status_check_;                                     \
    } while (0)

#endif
