/* status.c - the calling thread's failure: its status, its message and the
 * rank it is put down to (status.h). libhora-base: no MPI, no hora_*
 * symbol, so that programs without libhora (hora-mkrecord, trainer/data)
 * link it as they are, and a program with both has one hora_last_error(). */
#include "base/status.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"

static _Thread_local char status_text[STATUS_MESSAGE_BYTES];
static _Thread_local int status_blamed = -1;

const char *status_name(hora_status_t status)
{
    switch (status) {
    case HORA_OK: return "HORA_OK";
    case HORA_IN_PROGRESS: return "HORA_IN_PROGRESS";
    case HORA_ERR_INVALID_ARG: return "HORA_ERR_INVALID_ARG";
    case HORA_ERR_NO_MEMORY: return "HORA_ERR_NO_MEMORY";
    case HORA_ERR_NOT_INITIALIZED: return "HORA_ERR_NOT_INITIALIZED";
    case HORA_ERR_UNSUPPORTED: return "HORA_ERR_UNSUPPORTED";
    case HORA_ERR_MPI: return "HORA_ERR_MPI";
    case HORA_ERR_TRANSPORT: return "HORA_ERR_TRANSPORT";
    case HORA_ERR_CONFIG: return "HORA_ERR_CONFIG";
    case HORA_ERR_SYSTEM: return "HORA_ERR_SYSTEM";
    case HORA_ERR_MISMATCH: return "HORA_ERR_MISMATCH";
    case HORA_ERR_DUPLICATE: return "HORA_ERR_DUPLICATE";
    case HORA_ERR_SHUTDOWN: return "HORA_ERR_SHUTDOWN";
    case HORA_ERR_TIMEOUT: return "HORA_ERR_TIMEOUT";
    case HORA_ERR_ALREADY_INITIALIZED: return "HORA_ERR_ALREADY_INITIALIZED";
    case HORA_ERR_CORRUPT: return "HORA_ERR_CORRUPT";
    case HORA_ERR_INTERNAL: return "HORA_ERR_INTERNAL";
    case HORA_ERR_PEER_LOST: return "HORA_ERR_PEER_LOST";
    }
    return "HORA_ERR_UNKNOWN";
}

const char *status_message(void) { return status_text; }

void status_clear(void)
{
    status_text[0] = '\0';
    status_blamed = -1;
}

hora_status_t status_blame(hora_status_t status, int rank)
{
    status_blamed = rank;
    return status;
}

int status_culprit(void) { return status_blamed; }

/* Append to text (bytes in all, *n used), truncating. */
__attribute__((format(printf, 4, 5))) static void status_put(char *text, size_t bytes, size_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int put = vsnprintf(text + *n, bytes - *n, fmt, ap);
    va_end(ap);
    if (put > 0) *n = (size_t)put < bytes - *n ? *n + (size_t)put : bytes - 1;
}

/* "rank R: FILE: section 'S': tensor 'T': offset N: " for what where names,
 * into text; returns the length written. */
static size_t status_where_format(const status_where_t *where, char *text, size_t bytes)
{
    size_t n = 0;
    if (where->has_rank) status_put(text, bytes, &n, "rank %d: ", where->rank);
    if (where->file) status_put(text, bytes, &n, "%s: ", where->file);
    if (where->section) status_put(text, bytes, &n, "section '%s': ", where->section);
    if (where->tensor) status_put(text, bytes, &n, "tensor '%s': ", where->tensor);
    if (where->has_offset) status_put(text, bytes, &n, "offset %" PRIu64 ": ", where->offset);
    return n;
}

/* The message is formatted into a local buffer and copied in after, so an
 * argument may be the current message itself
 * (status_set(s, "bad shard: %s", status_message())). */
static hora_status_t status_store(hora_status_t status, int log, const status_where_t *where, const char *fmt,
                                  va_list ap)
{
    char text[STATUS_MESSAGE_BYTES] = "";
    size_t n = where ? status_where_format(where, text, sizeof(text)) : 0;
    if (n < sizeof(text) - 1) vsnprintf(text + n, sizeof(text) - n, fmt, ap);
    memcpy(status_text, text, strlen(text) + 1);
    status_blamed = -1;
    if (log) log_error("%s (%s)", status_text, status_name(status));
    return status;
}

/* status_store with the variadic arguments of the function it stands in. */
#define STATUS_STORE_ARGS(status, log, where, fmt)         \
    do {                                                   \
        va_list ap;                                        \
        va_start(ap, fmt);                                 \
        status_store((status), (log), (where), (fmt), ap); \
        va_end(ap);                                        \
    } while (0)

hora_status_t status_fail(hora_status_t status, const char *fmt, ...)
{
    STATUS_STORE_ARGS(status, 1, NULL, fmt);
    return status;
}

hora_status_t status_set(hora_status_t status, const char *fmt, ...)
{
    STATUS_STORE_ARGS(status, 0, NULL, fmt);
    return status;
}

hora_status_t status_at(hora_status_t status, status_where_t where, const char *fmt, ...)
{
    STATUS_STORE_ARGS(status, 0, &where, fmt);
    return status;
}
