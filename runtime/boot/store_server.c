/* store_server.c - the rendezvous store's server (store.h, README.md).
 *
 * One thread, one poll() over the listening socket, a wake pipe and every
 * client. Sockets are non-blocking; each client has an input buffer (frames
 * are decoded once whole) and an output buffer (replies leave as the socket
 * takes them). A GET whose key does not exist yet parks its client until
 * the key is set or its deadline passes; a parked client's later frames wait
 * in its buffer. A client that breaks the protocol (no hello first, another
 * job id, a malformed or oversized frame) gets an ERROR reply and is
 * disconnected once the reply is out; a client that disconnects, at any
 * point of a frame, is simply dropped. Keys live in an array (a job has a
 * few hundred at most), searched linearly. */
#define _GNU_SOURCE /* accept4, pipe2 */
#include "boot/store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/status.h"
#include "boot/wire.h"

typedef struct {
    int fd;
    int hello;   /* the job id matched */
    int closing; /* disconnect once out is sent */
    uint8_t *in; /* received bytes not yet decoded */
    size_t in_used, in_cap;
    uint8_t *out; /* encoded replies; out_sent of out_used already sent */
    size_t out_used, out_sent, out_cap;
    char *wait_key;    /* a parked GET's key, NULL when none */
    double wait_until; /* its deadline (CLOCK_MONOTONIC seconds) */
} server_conn_t;

typedef struct {
    char *key;
    uint8_t *value;
    size_t value_bytes;
} server_entry_t;

struct boot_store_server {
    int listen_fd;
    int wake[2]; /* boot_store_server_stop writes [1] */
    int port;
    char job_id[BOOT_STORE_JOB_ID_MAX + 1];
    server_conn_t *conns;
    size_t conn_count, conn_cap;
    server_entry_t *entries;
    size_t entry_count, entry_cap;
};

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 4;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

hora_status_t boot_store_server_open(const char *host, int port, const char *job_id, boot_store_server_t **out)
{
    if (!host) host = "127.0.0.1";
    if (!job_id || !job_id[0] || strlen(job_id) > BOOT_STORE_JOB_ID_MAX)
        return status_set(HORA_ERR_INVALID_ARG, "rendezvous store: a job id of 1 to %d bytes is needed",
                          BOOT_STORE_JOB_ID_MAX);
    if (port < 0 || port > 65535)
        return status_set(HORA_ERR_INVALID_ARG, "rendezvous store: port %d is not in 0..65535", port);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        return status_set(HORA_ERR_INVALID_ARG, "rendezvous store: '%s' is not an IPv4 address", host);
    boot_store_server_t *s = calloc(1, sizeof(*s));
    if (!s) return status_set(HORA_ERR_NO_MEMORY, "rendezvous store: out of memory");
    s->wake[0] = s->wake[1] = -1;
    snprintf(s->job_id, sizeof(s->job_id), "%s", job_id);
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->listen_fd < 0) {
        status_set(HORA_ERR_SYSTEM, "rendezvous store: socket: %s", strerror(errno));
        goto err_free;
    }
    int one = 1;
    setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(s->listen_fd, 128) != 0) {
        status_set(HORA_ERR_SYSTEM, "rendezvous store: cannot listen on %s:%d: %s", host, port, strerror(errno));
        goto err_close;
    }
    socklen_t len = sizeof(addr);
    getsockname(s->listen_fd, (struct sockaddr *)&addr, &len);
    s->port = ntohs(addr.sin_port);
    if (pipe2(s->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
        status_set(HORA_ERR_SYSTEM, "rendezvous store: pipe: %s", strerror(errno));
        goto err_close;
    }
    *out = s;
    return HORA_OK;
err_close:
    close(s->listen_fd);
err_free:
    free(s);
    return HORA_ERR_SYSTEM;
}

int boot_store_server_port(const boot_store_server_t *server) { return server->port; }

void boot_store_server_stop(boot_store_server_t *server)
{
    char c = 1;
    ssize_t n = write(server->wake[1], &c, 1);
    (void)n;
}

static void conn_free(server_conn_t *c)
{
    if (c->fd >= 0) close(c->fd);
    free(c->in);
    free(c->out);
    free(c->wait_key);
}

void boot_store_server_close(boot_store_server_t *server)
{
    if (!server) return;
    for (size_t i = 0; i < server->conn_count; i++) conn_free(&server->conns[i]);
    for (size_t i = 0; i < server->entry_count; i++) {
        free(server->entries[i].key);
        free(server->entries[i].value);
    }
    free(server->conns);
    free(server->entries);
    close(server->listen_fd);
    close(server->wake[0]);
    close(server->wake[1]);
    free(server);
}

static server_entry_t *entry_find(boot_store_server_t *s, const uint8_t *key, size_t key_bytes)
{
    for (size_t i = 0; i < s->entry_count; i++) {
        server_entry_t *e = &s->entries[i];
        if (strlen(e->key) == key_bytes && memcmp(e->key, key, key_bytes) == 0) return e;
    }
    return NULL;
}

/* The entry for key, created empty when missing; NULL when out of memory. */
static server_entry_t *entry_get(boot_store_server_t *s, const uint8_t *key, size_t key_bytes)
{
    server_entry_t *e = entry_find(s, key, key_bytes);
    if (e) return e;
    if (grow((void **)&s->entries, &s->entry_cap, s->entry_count + 1, sizeof(*s->entries))) return NULL;
    char *k = malloc(key_bytes + 1);
    if (!k) return NULL;
    memcpy(k, key, key_bytes);
    k[key_bytes] = '\0';
    e = &s->entries[s->entry_count++];
    *e = (server_entry_t){.key = k};
    return e;
}

/* Queue a reply; a client whose reply cannot be queued is disconnected. */
static void conn_reply(server_conn_t *c, uint8_t op, int64_t arg, const void *value, size_t value_bytes)
{
    size_t bytes = boot_wire_frame_bytes(0, value_bytes);
    if (grow((void **)&c->out, &c->out_cap, c->out_used + bytes, 1)) {
        c->closing = 1;
        c->out_used = c->out_sent = 0;
        return;
    }
    boot_wire_encode(c->out + c->out_used, op, arg, NULL, 0, value, value_bytes);
    c->out_used += bytes;
}

__attribute__((format(printf, 2, 3))) static void conn_refuse(server_conn_t *c, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof(text)) n = sizeof(text) - 1;
    conn_reply(c, BOOT_WIRE_OP_ERROR, 0, text, (size_t)n);
    c->closing = 1;
}

/* Answer every client parked on key (just set). */
static void wake_waiters(boot_store_server_t *s, const server_entry_t *e)
{
    for (size_t i = 0; i < s->conn_count; i++) {
        server_conn_t *c = &s->conns[i];
        if (c->wait_key && strcmp(c->wait_key, e->key) == 0) {
            conn_reply(c, BOOT_WIRE_OP_OK, 0, e->value, e->value_bytes);
            free(c->wait_key);
            c->wait_key = NULL;
        }
    }
}

static int key_ok(const boot_wire_msg_t *m) { return m->key_bytes > 0 && memchr(m->key, '\0', m->key_bytes) == NULL; }

/* One decoded request of client c. */
static void conn_handle(boot_store_server_t *s, server_conn_t *c, const boot_wire_msg_t *m)
{
    if (!c->hello) {
        if (m->op != BOOT_WIRE_OP_HELLO) {
            conn_refuse(c, "rendezvous store: a client must say hello (its job id) first");
            return;
        }
        if (m->arg != BOOT_WIRE_VERSION) {
            conn_refuse(c, "rendezvous store: protocol version %lld refused, this store speaks %d", (long long)m->arg,
                        BOOT_WIRE_VERSION);
            return;
        }
        if (m->value_bytes != strlen(s->job_id) || memcmp(m->value, s->job_id, m->value_bytes) != 0) {
            int shown = m->value_bytes > BOOT_STORE_JOB_ID_MAX ? BOOT_STORE_JOB_ID_MAX : (int)m->value_bytes;
            conn_refuse(c, "rendezvous store refused job id '%.*s': it serves job '%s'", shown, (const char *)m->value,
                        s->job_id);
            return;
        }
        c->hello = 1;
        conn_reply(c, BOOT_WIRE_OP_OK, 0, NULL, 0);
        return;
    }
    if (m->op != BOOT_WIRE_OP_SET && m->op != BOOT_WIRE_OP_GET && m->op != BOOT_WIRE_OP_ADD) {
        conn_refuse(c, "rendezvous store: unknown request %u", m->op);
        return;
    }
    if (!key_ok(m)) {
        conn_refuse(c, "rendezvous store: a key of 1 to %d bytes without NUL is needed", BOOT_WIRE_KEY_MAX);
        return;
    }
    server_entry_t *e;
    switch (m->op) {
    case BOOT_WIRE_OP_SET: {
        uint8_t *v = malloc(m->value_bytes ? m->value_bytes : 1);
        if (!v || !(e = entry_get(s, m->key, m->key_bytes))) {
            free(v);
            conn_refuse(c, "rendezvous store: out of memory");
            return;
        }
        memcpy(v, m->value, m->value_bytes);
        free(e->value);
        e->value = v;
        e->value_bytes = m->value_bytes;
        conn_reply(c, BOOT_WIRE_OP_OK, 0, NULL, 0);
        wake_waiters(s, e);
        return;
    }
    case BOOT_WIRE_OP_GET:
        e = entry_find(s, m->key, m->key_bytes);
        if (e && e->value) {
            conn_reply(c, BOOT_WIRE_OP_OK, 0, e->value, e->value_bytes);
        } else if (m->arg <= 0) {
            conn_reply(c, BOOT_WIRE_OP_NOT_FOUND, 0, NULL, 0);
        } else {
            c->wait_key = malloc(m->key_bytes + 1);
            if (!c->wait_key) {
                conn_refuse(c, "rendezvous store: out of memory");
                return;
            }
            memcpy(c->wait_key, m->key, m->key_bytes);
            c->wait_key[m->key_bytes] = '\0';
            c->wait_until = boot_now_s() + m->arg * 1e-3;
        }
        return;
    case BOOT_WIRE_OP_ADD: {
        e = entry_get(s, m->key, m->key_bytes);
        if (!e) {
            conn_refuse(c, "rendezvous store: out of memory");
            return;
        }
        if (e->value && e->value_bytes != 8) {
            const char *text = "rendezvous store: add on a key that holds a value, not a counter";
            conn_reply(c, BOOT_WIRE_OP_ERROR, 0, text, strlen(text));
            return;
        }
        if (!e->value && !(e->value = calloc(1, 8))) {
            conn_refuse(c, "rendezvous store: out of memory");
            return;
        }
        e->value_bytes = 8;
        int64_t v;
        memcpy(&v, e->value, 8);
        v += m->arg;
        memcpy(e->value, &v, 8);
        conn_reply(c, BOOT_WIRE_OP_OK, v, NULL, 0);
        return;
    }
    }
}

/* Decode and handle the whole frames in c's buffer, while it is not parked. */
static void conn_process(boot_store_server_t *s, server_conn_t *c)
{
    size_t at = 0;
    while (!c->closing && !c->wait_key && c->in_used - at >= 4) {
        uint32_t body = boot_wire_body_bytes(c->in + at);
        if (body > BOOT_WIRE_BODY_MAX) {
            conn_refuse(c,
                        "rendezvous store: a frame of %u bytes is over the limit of %u bytes (keys up to %d, values "
                        "up to %u bytes)",
                        body, (unsigned)BOOT_WIRE_BODY_MAX, BOOT_WIRE_KEY_MAX, BOOT_WIRE_VALUE_MAX);
            break;
        }
        if (c->in_used - at < 4 + (size_t)body) break;
        boot_wire_msg_t m;
        const char *why;
        if (boot_wire_decode(c->in + at + 4, body, &m, &why) != 0) {
            conn_refuse(c, "rendezvous store: malformed frame: %s", why);
            break;
        }
        conn_handle(s, c, &m);
        at += 4 + (size_t)body;
    }
    if (c->closing) {
        c->in_used = 0;
        return;
    }
    if (at < c->in_used) memmove(c->in, c->in + at, c->in_used - at); /* c->in may be NULL with nothing in it */
    c->in_used -= at;
}

/* A client's received bytes are bounded by one frame of the largest size:
 * a client parked on a GET that sends more is not read further (our own
 * client never does: one request at a time). */
#define CONN_IN_LIMIT (4 + (size_t)BOOT_WIRE_BODY_MAX)

/* Read what c's socket has; -1 when c is gone (EOF, error). */
static int conn_read(server_conn_t *c)
{
    while (c->in_used < CONN_IN_LIMIT) {
        if (c->in_used >= 4 && boot_wire_body_bytes(c->in) > BOOT_WIRE_BODY_MAX) return 0; /* refused next */
        size_t want = c->in_used + 65536;
        if (want > CONN_IN_LIMIT) want = CONN_IN_LIMIT;
        if (grow((void **)&c->in, &c->in_cap, want, 1)) return -1;
        ssize_t n = recv(c->fd, c->in + c->in_used, want - c->in_used, 0);
        if (n > 0) {
            c->in_used += (size_t)n;
            continue;
        }
        if (n == 0) return -1;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return -1;
    }
    return 0;
}

/* Send what c has queued; -1 when c is gone. */
static int conn_write(server_conn_t *c)
{
    while (c->out_sent < c->out_used) {
        ssize_t n = send(c->fd, c->out + c->out_sent, c->out_used - c->out_sent, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        return -1;
    }
    c->out_sent = c->out_used = 0;
    return 0;
}

static void server_accept(boot_store_server_t *s)
{
    for (;;) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return; /* EAGAIN, or a client that left before accept */
        if (grow((void **)&s->conns, &s->conn_cap, s->conn_count + 1, sizeof(*s->conns))) {
            close(fd);
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        s->conns[s->conn_count++] = (server_conn_t){.fd = fd};
    }
}

hora_status_t boot_store_server_run(boot_store_server_t *s)
{
    struct pollfd *pfds = NULL;
    size_t pfd_cap = 0;
    for (;;) {
        if (grow((void **)&pfds, &pfd_cap, s->conn_count + 2, sizeof(*pfds))) {
            free(pfds);
            return status_set(HORA_ERR_NO_MEMORY, "rendezvous store: out of memory");
        }
        pfds[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        pfds[1] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
        double t = boot_now_s(), next = -1;
        for (size_t i = 0; i < s->conn_count; i++) {
            server_conn_t *c = &s->conns[i];
            short ev = c->closing || c->in_used >= CONN_IN_LIMIT ? 0 : POLLIN;
            if (c->out_used > c->out_sent) ev |= POLLOUT;
            pfds[i + 2] = (struct pollfd){.fd = c->fd, .events = ev};
            if (c->wait_key && (next < 0 || c->wait_until < next)) next = c->wait_until;
        }
        int timeout_ms = next < 0 ? -1 : (next <= t ? 0 : (int)((next - t) * 1e3) + 1);
        int n = poll(pfds, s->conn_count + 2, timeout_ms);
        if (n < 0 && errno != EINTR) {
            free(pfds);
            return status_set(HORA_ERR_SYSTEM, "rendezvous store: poll: %s", strerror(errno));
        }
        if (n > 0 && (pfds[0].revents & POLLIN)) break;
        size_t polled = s->conn_count; /* accept appends after these */
        if (n > 0 && (pfds[1].revents & POLLIN)) server_accept(s);
        t = boot_now_s();
        for (size_t i = 0; i < polled; i++) {
            server_conn_t *c = &s->conns[i];
            short re = n > 0 ? pfds[i + 2].revents : 0;
            int gone = 0, eof = 0;
            if (re & (POLLERR | POLLNVAL)) {
                gone = 1;
            } else if (re & (POLLIN | POLLHUP)) {
                /* A refused client, or one whose buffer is full, has
                 * nothing more to say; another's last frames are still
                 * handled (a set and a close) before it is dropped. */
                if (c->closing || c->in_used >= CONN_IN_LIMIT)
                    gone = 1;
                else if (conn_read(c) < 0)
                    eof = 1;
            }
            if (!gone && c->wait_key && c->wait_until <= t) {
                conn_reply(c, BOOT_WIRE_OP_NOT_FOUND, 0, NULL, 0);
                free(c->wait_key);
                c->wait_key = NULL;
            }
            if (!gone) conn_process(s, c);
            if (eof) gone = 1;
            if (!gone && conn_write(c) < 0) gone = 1;
            if (!gone && c->closing && c->out_used == c->out_sent) gone = 1;
            if (gone) {
                close(c->fd);
                c->fd = -1;
            }
        }
        /* Drop the closed ones (a parked GET of a gone client goes with it). */
        size_t kept = 0;
        for (size_t i = 0; i < s->conn_count; i++) {
            if (s->conns[i].fd < 0)
                conn_free(&s->conns[i]);
            else
                s->conns[kept++] = s->conns[i];
        }
        s->conn_count = kept;
    }
    free(pfds);
    return HORA_OK;
}
