/* store.h - the rendezvous store: a small TCP key-value store that the
 * launcher (tools/hora_run) runs and its workers and peers reach
 * (README.md: the protocol and its limits).
 *
 * Server: boot_store_server_open binds (host, port; port 0 picks one) for one
 * job id, boot_store_server_run is its single-threaded poll() loop, run by
 * its owner on a thread of its own until boot_store_server_stop (any thread).
 *
 * Client: every call returns a hora_status_t, with the message in status.h's
 * store (status_set: the outermost caller prints it), and returns within its
 * timeout. A call that fails on the connection (lost, a reply past its time)
 * leaves the client broken: later calls fail at once, naming the first
 * failure. A client is used by one thread at a time. */
#ifndef HORA_BOOT_STORE_H
#define HORA_BOOT_STORE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "hora.h"

#define BOOT_STORE_KEY_MAX 512
#define BOOT_STORE_VALUE_MAX (1u << 20)
#define BOOT_STORE_JOB_ID_MAX 128
/* How long a reply may take beyond the wait a request asked for. */
#define BOOT_STORE_REPLY_S 10.0

/* Seconds on the monotonic clock: what every deadline of the store, its
 * clients and hora-run is measured on. */
double boot_now_s(void);

typedef struct boot_store_server boot_store_server_t;
typedef struct boot_store boot_store_t;

/* Bind host:port (host NULL: 127.0.0.1; port 0: the kernel picks one) and
 * listen. HORA_ERR_SYSTEM (the address and the reason) when it cannot bind,
 * HORA_ERR_INVALID_ARG for an empty or overlong job id. */
hora_status_t boot_store_server_open(const char *host, int port, const char *job_id, boot_store_server_t **out);
/* The port it listens on (the one picked for port 0). */
int boot_store_server_port(const boot_store_server_t *server);
/* Serve until boot_store_server_stop; HORA_OK then, HORA_ERR_SYSTEM when
 * poll() itself fails. Clients that misbehave are dropped, never fatal. */
hora_status_t boot_store_server_run(boot_store_server_t *server);
/* Make run return (async-signal-safe: one write to a pipe). */
void boot_store_server_stop(boot_store_server_t *server);
/* After run returned (or without run): close every socket, free. */
void boot_store_server_close(boot_store_server_t *server);

/* Connect to host:port and present job_id, retrying refused or failed
 * connects until timeout_s (the store may start after the client):
 * HORA_ERR_TIMEOUT "cannot reach the rendezvous store at HOST:PORT within
 * S s (last error: ...)"; HORA_ERR_MISMATCH when the store serves another
 * job (its message names both ids); HORA_ERR_INVALID_ARG for a host that
 * does not resolve or a bad job id. */
hora_status_t boot_store_connect(const char *host, int port, const char *job_id, double timeout_s, boot_store_t **out);
/* The same, giving up (HORA_ERR_SHUTDOWN) as soon as *cancel is non-zero:
 * a flag a signal handler sets (the signal also cuts the wait short). */
hora_status_t boot_store_connect_cancel(const char *host, int port, const char *job_id, double timeout_s,
                                        volatile sig_atomic_t *cancel, boot_store_t **out);
void boot_store_close(boot_store_t *store);
/* "host:port" of the store, for messages. */
const char *boot_store_address(const boot_store_t *store);

/* key = value (value_bytes <= BOOT_STORE_VALUE_MAX; a key is 1 to
 * BOOT_STORE_KEY_MAX bytes of text). Replaces an older value. */
hora_status_t boot_store_set(boot_store_t *store, const char *key, const void *value, size_t value_bytes);
/* Wait up to timeout_s, on the server, for key to exist; *value is a
 * malloc'd copy (one extra NUL byte after value_bytes), the caller frees it.
 * HORA_ERR_TIMEOUT "key 'K' was not set within S s" when it did not come. */
hora_status_t boot_store_get(boot_store_t *store, const char *key, double timeout_s, void **value, size_t *value_bytes);
/* Look without waiting: *found 0 (and *value NULL) when key does not exist. */
hora_status_t boot_store_try_get(boot_store_t *store, const char *key, int *found, void **value, size_t *value_bytes);
/* Atomically add delta to the counter key (created at 0) and return the new
 * value; HORA_ERR_INVALID_ARG when key holds something else than a counter. */
hora_status_t boot_store_add(boot_store_t *store, const char *key, int64_t delta, int64_t *value);
/* Count this caller in: add 1 to key and mark the value reached ("key#N"),
 * so that boot_store_wait_count can wait on the server. *n is the new count. */
hora_status_t boot_store_count(boot_store_t *store, const char *key, int64_t *n);
/* Wait up to timeout_s until boot_store_count has brought key to count. */
hora_status_t boot_store_wait_count(boot_store_t *store, const char *key, int64_t count, double timeout_s);
/* A barrier of count callers named key: count, then wait for count.
 * HORA_ERR_TIMEOUT names how many of count came. */
hora_status_t boot_store_barrier(boot_store_t *store, const char *key, int64_t count, double timeout_s);

#endif
