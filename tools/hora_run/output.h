/* output.h - hora-run --prefix-output: every line a worker writes to its
 * stdout or stderr goes to hora-run's, prefixed "[rank R] ", one write per
 * line (lines of different workers never mix). */
#ifndef HORA_RUN_OUTPUT_H
#define HORA_RUN_OUTPUT_H

#include <stddef.h>

#define OUTPUT_LINE_BYTES 4096

typedef struct {
    int fd;    /* the read end of the worker's pipe; -1 once at its end */
    int to_fd; /* 1 or 2 */
    int rank;
    size_t used;
    char line[OUTPUT_LINE_BYTES]; /* a line not yet ended */
} output_stream_t;

void output_stream_init(output_stream_t *s, int fd, int to_fd, int rank);
/* Wait up to timeout_s for output on any open stream and forward its whole
 * lines (a line longer than the buffer goes out in pieces); a stream at its
 * end forwards its last, unended line and closes. Sleeps timeout_s when no
 * stream is open. */
void output_pump(output_stream_t *streams, int count, double timeout_s);
/* How many streams are still open. */
int output_open_count(const output_stream_t *streams, int count);
/* Close what is still open, forwarding unended lines. */
void output_close(output_stream_t *streams, int count);

#endif
