/* timeline.h - the HORA_TIMELINE trace: one Chrome-trace JSON file per rank,
 * one row per tensor, a span per phase (NEGOTIATE, QUEUE, ..., or an op as an
 * outer span). The file is a valid JSON array after every event, so it can be
 * opened in Perfetto / chrome://tracing or read by tools/hora-timeline while
 * the job still runs. Phase names are the caller's; nothing is hard-coded. */
#ifndef HORA_TIMELINE_H
#define HORA_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "hora.h" /* hora_status_t */

struct timeline;

/* Open path for writing (truncate) and write an empty array. max_bytes bounds
 * the file (0 = unbounded): the first event that would pass it stops all
 * writing, with one warning; the file stays a valid array. Returns HORA_OK or
 * HORA_ERR_SYSTEM (the message names the path and the OS error);
 * HORA_ERR_NO_MEMORY. *tl is set only on success. */
hora_status_t timeline_open(struct timeline **tl, const char *path, size_t max_bytes);
/* Close the file and free tl. NULL ok. */
void timeline_close(struct timeline *tl);

/* Microseconds since timeline_open (CLOCK_MONOTONIC); 0 for NULL. */
int64_t timeline_now_us(const struct timeline *tl);

/* Start / end the span `phase` on the row of `tensor`. Rows are created on
 * first use (a "thread_name" metadata event names the row after the tensor,
 * rows numbered 1, 2, 3, ...). ts_us < 0 means now. args_json is NULL or the
 * text of a JSON object, placed as the event's "args" (text that is not an
 * object is stored as a string under "invalid_args" so the file stays valid).
 * All event calls are thread safe and do nothing when tl is NULL. */
void timeline_begin(struct timeline *tl, const char *tensor, const char *phase, int64_t ts_us, const char *args_json);
void timeline_end(struct timeline *tl, const char *tensor, const char *phase, int64_t ts_us, const char *args_json);
/* An instant event ("ph":"i", "s":"t") on the tensor's row. */
void timeline_instant(struct timeline *tl, const char *tensor, const char *name, int64_t ts_us, const char *args_json);

#endif
