/* output.c - forwarding of the workers' output, line by line (output.h). */
#include "output.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void output_stream_init(output_stream_t *s, int fd, int to_fd, int rank)
{
    s->fd = fd;
    s->to_fd = to_fd;
    s->rank = rank;
    s->used = 0;
}

/* "[rank R] " + the line + "\n" in one write. */
static void forward(output_stream_t *s, const char *line, size_t bytes)
{
    char out[OUTPUT_LINE_BYTES + 32];
    int n = snprintf(out, sizeof(out), "[rank %d] ", s->rank);
    if (bytes > sizeof(out) - (size_t)n - 1) bytes = sizeof(out) - (size_t)n - 1;
    memcpy(out + n, line, bytes);
    size_t total = (size_t)n + bytes;
    out[total++] = '\n';
    for (size_t done = 0; done < total;) {
        ssize_t k = write(s->to_fd, out + done, total - done);
        if (k > 0)
            done += (size_t)k;
        else if (k < 0 && errno == EINTR)
            continue;
        else
            return; /* our own output is gone: drop the line */
    }
}

static void stream_end(output_stream_t *s)
{
    if (s->used) forward(s, s->line, s->used);
    s->used = 0;
    close(s->fd);
    s->fd = -1;
}

/* Read what the stream has and forward its whole lines. */
static void stream_read(output_stream_t *s)
{
    ssize_t n;
    do n = read(s->fd, s->line + s->used, sizeof(s->line) - s->used);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
        if (n == 0 || errno != EAGAIN) stream_end(s);
        return;
    }
    s->used += (size_t)n;
    size_t start = 0;
    for (size_t i = 0; i < s->used; i++) {
        if (s->line[i] != '\n') continue;
        forward(s, s->line + start, i - start);
        start = i + 1;
    }
    if (start == 0 && s->used == sizeof(s->line)) { /* a full buffer without a newline */
        forward(s, s->line, s->used);
        start = s->used;
    }
    memmove(s->line, s->line + start, s->used - start);
    s->used -= start;
}

void output_pump(output_stream_t *streams, int count, double timeout_s)
{
    struct pollfd pfds[count > 0 ? count : 1];
    int map[count > 0 ? count : 1], n = 0;
    for (int i = 0; i < count; i++) {
        if (streams[i].fd < 0) continue;
        pfds[n] = (struct pollfd){.fd = streams[i].fd, .events = POLLIN};
        map[n++] = i;
    }
    if (n == 0) {
        struct timespec ts = {(time_t)timeout_s, (long)((timeout_s - (double)(time_t)timeout_s) * 1e9)};
        nanosleep(&ts, NULL);
        return;
    }
    if (poll(pfds, (nfds_t)n, (int)(timeout_s * 1e3)) <= 0) return;
    for (int k = 0; k < n; k++)
        if (pfds[k].revents & (POLLIN | POLLHUP | POLLERR)) stream_read(&streams[map[k]]);
}

int output_open_count(const output_stream_t *streams, int count)
{
    int open = 0;
    for (int i = 0; i < count; i++) open += streams[i].fd >= 0;
    return open;
}

void output_close(output_stream_t *streams, int count)
{
    for (int i = 0; i < count; i++)
        if (streams[i].fd >= 0) stream_end(&streams[i]);
}
