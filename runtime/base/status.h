/* status.h - the one error channel of hora (libhora-base).
 *
 * A failure is a status (hora_status_t, negative) plus a message in the
 * calling thread's store, written once where the failure is detected:
 * status_set() (or status_at() for a failure in a place: a file, a section,
 * an offset, a rank, a tensor). Callers up the stack propagate the status
 * (HORA_CHECK) and add nothing; the outermost caller - hora-train's,
 * hora-ckpt's or a benchmark's main, or a user of libhora through
 * hora_last_error() - prints the message once. Library code never prints
 * it; inside libhora status_fail() also logs it at error level where it is
 * detected (the runtime's rank-prefixed log), which is the one exception.
 *
 * A place is written the same way everywhere:
 *   "rank R: PATH: section 'S': tensor 'T': offset N: message"
 * with the parts status_where_t leaves out dropped.
 *
 * libhora-base (this file, log.c) has no MPI and no hora_* symbol: trainer/data,
 * the checkpoint code, tools and bench link it statically, and libhora links
 * it whole (hidden), adding hora_last_error() and the hora.h name functions
 * (status_hora.c). A program with both has two stores: libhora's, which
 * hora_last_error() reads, and its own; where it calls a hora_* function it
 * copies a failure across (status_set(s, "%s", hora_last_error())). */
#ifndef HORA_STATUS_H
#define HORA_STATUS_H

#include <stdint.h>

#include "hora.h"

#define STATUS_MESSAGE_BYTES 1024

/* Where a failure is; NULL strings and has_* 0 are left out of the message. */
typedef struct {
    const char *file;    /* a path */
    const char *section; /* a checkpoint section, a record shard's part */
    const char *tensor;  /* a tensor or parameter name */
    uint64_t offset;     /* bytes into file (or section), when has_offset */
    int rank;            /* when has_rank */
    int has_offset, has_rank;
} status_where_t;

/* The common places. */
#define STATUS_FILE(path) ((status_where_t){.file = (path)})
#define STATUS_FILE_AT(path, off) ((status_where_t){.file = (path), .offset = (off), .has_offset = 1})
#define STATUS_SECTION(path, name) ((status_where_t){.file = (path), .section = (name)})
#define STATUS_SECTION_AT(path, name, off) \
    ((status_where_t){.file = (path), .section = (name), .offset = (off), .has_offset = 1})

/* Record a failure in the calling thread's store, without logging; returns
 * status, for "return status_set(...)". An argument may be status_message()
 * itself (a message wrapped in context). */
hora_status_t status_set(hora_status_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same, the message prefixed with where (the format above). */
hora_status_t status_at(hora_status_t status, status_where_t where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* status_set, and log the message at error level (libhora's internals). */
hora_status_t status_fail(hora_status_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The calling thread's message ("" when none); libhora's hora_last_error(). */
const char *status_message(void);
/* "HORA_ERR_CORRUPT"; libhora's hora_status_string(). */
const char *status_name(hora_status_t status);
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

/* Translate an MPI error code at the boundary (status_hora.c: libhora only). */
hora_status_t status_mpi(int mpi_err, const char *what);

#define HORA_CHECK(call)                             \
    do {                                             \
        hora_status_t status_check_ = (call);        \
        if (status_check_ < 0) return status_check_; \
    } while (0)

#endif
