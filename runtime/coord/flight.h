/* flight.h - the flight recorder: every process keeps its last
 * HORA_FLIGHT_RECORDER coordinated collectives (the world's and its process
 * sets') in a ring allocated once at init, and writes it to
 * HORA_FLIGHT_DIR/flight.<rank>.txt when the coordinator fails (a timeout, an
 * abort, a stall shutdown, any fatal error), on a fatal signal (SIGSEGV,
 * SIGBUS, SIGABRT, SIGFPE, SIGILL: dump, then the previous handler or the
 * default action) and on SIGUSR1 (dump, the job goes on). tools/hora-frtrace
 * merges the ranks' files and names the first collective they disagree on.
 *
 * Recording costs a lock, a hash of the name, a copy of at most
 * FLIGHT_NAME_BYTES - 1 bytes and a few clock reads per collective; it never
 * allocates. Entries are addressed by their sequence number (1, 2, ... per
 * process, in submission order): a request keeps its number, and an update
 * whose slot has been reused by a newer entry is dropped.
 *
 * The dump is async-signal-safe (open/write/rename, preformatted by hand), so
 * the signal handlers call the same code as the coordinator. File format
 * (one entry per line, oldest first, keys in this order, the name last and
 * running to the end of the line):
 *
 *   # hora flight recorder 1
 *   rank R size N pid P reason WHY now_ns T capacity C
 *   seq S occ K set I state STATE kind KIND op OP dtype DT bytes B memory M
 *     status ST transport TP peer P enqueue_ns T negotiate_ns T start_ns T
 *     end_ns T name NAME
 *
 * occ: the how-many-th submission of that name on this rank (1, 2, ...;
 * 0 when the name table was full), so (name, occ) is the same collective on
 * every rank. Times are CLOCK_MONOTONIC nanoseconds, 0 when not reached;
 * peer -1 when no wait on a peer was recorded.
 *
 * May include: base/, coll/, coord_request.h. */
#ifndef HORA_FLIGHT_H
#define HORA_FLIGHT_H

#include <stdint.h>

#include "base/config.h"
#include "coord/coord_request.h"

#define FLIGHT_NAME_BYTES 64

enum flight_state {
    FLIGHT_STATE_QUEUED = 0,
    FLIGHT_STATE_NEGOTIATED = 1,
    FLIGHT_STATE_RUNNING = 2,
    FLIGHT_STATE_DONE = 3,
    FLIGHT_STATE_FAILED = 4,
};

struct flight;

/* The process's recorder: made by the world's coordinator when
 * HORA_FLIGHT_RECORDER > 0 (rank and size of the world), NULL otherwise.
 * Installs the signal handlers when cfg->flight_dir is set. Fails with
 * HORA_ERR_CONFIG when HORA_FLIGHT_DIR cannot be created or written,
 * HORA_ERR_NO_MEMORY. */
hora_status_t flight_init(const struct config *cfg, int rank, int size);
/* Restores the signal handlers and frees the recorder (world coord_stop). */
void flight_free(void);
/* The recorder set up by flight_init, or NULL (off). */
struct flight *flight_process(void);

/* A request was submitted (under its coordinator's lock): its sequence
 * number, 0 when f is NULL. */
uint64_t flight_enqueue(struct flight *f, const struct hora_request *req, int set, int64_t now_us);
/* Move entry seq to state (NEGOTIATED, RUNNING: stamps that time). */
void flight_mark(struct flight *f, uint64_t seq, enum flight_state state);
/* The transport and peer the entry's collective last waited on. */
void flight_waited(struct flight *f, uint64_t seq, const char *transport, int peer);
/* The request completed with status (DONE or FAILED, end time). */
void flight_end(struct flight *f, uint64_t seq, hora_status_t status);
/* Write the ring to HORA_FLIGHT_DIR now (no-op without a directory);
 * async-signal-safe. reason: a short word without spaces. */
void flight_dump(struct flight *f, const char *reason);

/* Whether f writes to HORA_FLIGHT_DIR (0 for NULL), and the rank it names
 * its file by (-1 for NULL). */
int flight_has_dir(const struct flight *f);
int flight_rank(const struct flight *f);

#endif
