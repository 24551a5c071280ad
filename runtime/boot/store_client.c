/* store_client.c - the rendezvous store's client (store.h, README.md).
 *
 * One blocking request at a time over one TCP connection; every wait is a
 * poll() with a deadline, so no call outlives its timeout. The connect loop
 * retries every failure short of a refusal by the store itself (another job
 * id), because the store may come up after its clients. */
#include "boot/store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/status.h"
#include "boot/wire.h"

struct boot_store {
    int fd;
    char address[300];                 /* host:port */
    char broken[STATUS_MESSAGE_BYTES]; /* the failure that ended the connection, "" while it works */
    uint8_t *reply;                    /* the last reply's body */
    size_t reply_cap;
    boot_wire_msg_t msg; /* decoded from reply */
};

static int ms_until(double deadline)
{
    double left = deadline - boot_now_s();
    return left <= 0 ? 0 : (int)(left * 1e3) + 1;
}

/* Send or receive bytes before deadline: 0, or -1 with errno (ETIMEDOUT;
 * ECONNRESET for a connection closed by the store). */
static int io_all(int fd, int sending, uint8_t *p, size_t bytes, double deadline)
{
    while (bytes) {
        ssize_t n = sending ? send(fd, p, bytes, MSG_NOSIGNAL) : recv(fd, p, bytes, 0);
        if (n > 0) {
            p += n;
            bytes -= (size_t)n;
            continue;
        }
        if (n == 0) {
            errno = ECONNRESET;
            return -1;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        int left = ms_until(deadline);
        if (left == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd pfd = {.fd = fd, .events = sending ? POLLOUT : POLLIN};
        if (poll(&pfd, 1, left) < 0 && errno != EINTR) return -1;
    }
    return 0;
}

/* Send one request and read its reply (into store->msg) before deadline. */
static hora_status_t store_request(boot_store_t *store, uint8_t op, const char *key, const void *value,
                                   size_t value_bytes, int64_t arg, double deadline)
{
    if (store->broken[0]) return status_set(HORA_ERR_TRANSPORT, "%s", store->broken);
    size_t key_bytes = key ? strlen(key) : 0;
    size_t frame = boot_wire_frame_bytes(key_bytes, value_bytes);
    uint8_t small[1024];
    uint8_t *buf = frame <= sizeof(small) ? small : malloc(frame);
    if (!buf) return status_set(HORA_ERR_NO_MEMORY, "rendezvous store client: out of memory");
    boot_wire_encode(buf, op, arg, key, key_bytes, value, value_bytes);
    int rc = io_all(store->fd, 1, buf, frame, deadline);
    if (buf != small) free(buf);
    uint8_t prefix[4];
    if (rc == 0) rc = io_all(store->fd, 0, prefix, 4, deadline);
    const char *why = NULL;
    uint32_t body = 0;
    if (rc == 0) {
        body = boot_wire_body_bytes(prefix);
        if (body > BOOT_WIRE_BODY_MAX)
            why = "a reply over the size limit";
        else if (body > store->reply_cap) {
            uint8_t *r = realloc(store->reply, body);
            if (!r) return status_set(HORA_ERR_NO_MEMORY, "rendezvous store client: out of memory");
            store->reply = r;
            store->reply_cap = body;
        }
    }
    if (rc == 0 && !why) rc = io_all(store->fd, 0, store->reply, body, deadline);
    if (rc == 0 && !why) boot_wire_decode(store->reply, body, &store->msg, &why);
    if (rc != 0 || why) {
        if (why)
            snprintf(store->broken, sizeof(store->broken), "rendezvous store at %s sent %s", store->address, why);
        else if (errno == ETIMEDOUT)
            snprintf(store->broken, sizeof(store->broken), "rendezvous store at %s did not answer in time",
                     store->address);
        else
            snprintf(store->broken, sizeof(store->broken), "lost the connection to the rendezvous store at %s: %s",
                     store->address, strerror(errno));
        return status_set(HORA_ERR_TRANSPORT, "%s", store->broken);
    }
    if (store->msg.op == BOOT_WIRE_OP_ERROR)
        return status_set(HORA_ERR_INVALID_ARG, "%.*s", (int)store->msg.value_bytes, (const char *)store->msg.value);
    return HORA_OK;
}

/* One connect attempt to addr before deadline: the socket, or -1 (errno). */
static int connect_once(const struct addrinfo *ai, double deadline)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) goto err_close;
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int n = poll(&pfd, 1, ms_until(deadline)); /* EINTR: a failed try (the caller may be cancelled) */
        if (n <= 0) {
            errno = n == 0 ? ETIMEDOUT : errno;
            goto err_close;
        }
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
            errno = err;
            goto err_close;
        }
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
err_close:;
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

hora_status_t boot_store_connect(const char *host, int port, const char *job_id, double timeout_s, boot_store_t **out)
{
    return boot_store_connect_cancel(host, port, job_id, timeout_s, NULL, out);
}

hora_status_t boot_store_connect_cancel(const char *host, int port, const char *job_id, double timeout_s,
                                        volatile sig_atomic_t *cancel, boot_store_t **out)
{
    if (!job_id || !job_id[0] || strlen(job_id) > BOOT_STORE_JOB_ID_MAX)
        return status_set(HORA_ERR_INVALID_ARG, "rendezvous store client: a job id of 1 to %d bytes is needed",
                          BOOT_STORE_JOB_ID_MAX);
    if (!host || !host[0] || strlen(host) > 255 || port <= 0 || port > 65535)
        return status_set(HORA_ERR_INVALID_ARG, "rendezvous store client: bad address '%s:%d'", host ? host : "", port);
    char port_text[16];
    snprintf(port_text, sizeof(port_text), "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ais = NULL;
    int gai = getaddrinfo(host, port_text, &hints, &ais);
    if (gai != 0)
        return status_set(HORA_ERR_INVALID_ARG, "rendezvous store: cannot resolve '%s': %s", host, gai_strerror(gai));
    boot_store_t *store = calloc(1, sizeof(*store));
    if (!store) {
        freeaddrinfo(ais);
        return status_set(HORA_ERR_NO_MEMORY, "rendezvous store client: out of memory");
    }
    snprintf(store->address, sizeof(store->address), "%s:%d", host, port);
    double start = boot_now_s(), deadline = start + timeout_s;
    char last[256] = "no attempt";
    double pause = 0.05;
    for (;;) {
        for (const struct addrinfo *ai = ais; ai; ai = ai->ai_next) {
            if (cancel && *cancel) break;
            store->fd = connect_once(ai, deadline);
            if (store->fd < 0) {
                snprintf(last, sizeof(last), "%s", strerror(errno));
                continue;
            }
            store->broken[0] = '\0';
            hora_status_t status =
                store_request(store, BOOT_WIRE_OP_HELLO, NULL, job_id, strlen(job_id), BOOT_WIRE_VERSION, deadline);
            if (status == HORA_OK) {
                freeaddrinfo(ais);
                *out = store;
                return HORA_OK;
            }
            close(store->fd);
            if (status == HORA_ERR_INVALID_ARG) { /* the store answered: another job */
                freeaddrinfo(ais);
                free(store->reply);
                free(store);
                return status_set(HORA_ERR_MISMATCH, "%s", status_message()); /* names both ids */
            }
            snprintf(last, sizeof(last), "%s", status_message());
        }
        double left = deadline - boot_now_s();
        if (left <= 0 || (cancel && *cancel)) break;
        struct timespec ts = {0, (long)((pause < left ? pause : left) * 1e9)};
        nanosleep(&ts, NULL);
        if (pause < 0.5) pause *= 2;
    }
    freeaddrinfo(ais);
    free(store->reply);
    free(store);
    if (cancel && *cancel)
        return status_set(HORA_ERR_SHUTDOWN, "gave up reaching the rendezvous store at %s:%d: cancelled", host, port);
    return status_set(HORA_ERR_TIMEOUT, "cannot reach the rendezvous store at %s:%d within %g s (last error: %s)", host,
                      port, timeout_s, last);
}

void boot_store_close(boot_store_t *store)
{
    if (!store) return;
    if (store->fd >= 0) close(store->fd);
    free(store->reply);
    free(store);
}

const char *boot_store_address(const boot_store_t *store) { return store->address; }

static hora_status_t key_check(const char *key)
{
    if (!key || !key[0] || strlen(key) > BOOT_STORE_KEY_MAX)
        return status_set(HORA_ERR_INVALID_ARG, "rendezvous store: a key of 1 to %d bytes is needed, not '%.40s'",
                          BOOT_STORE_KEY_MAX, key ? key : "(null)");
    return HORA_OK;
}

hora_status_t boot_store_set(boot_store_t *store, const char *key, const void *value, size_t value_bytes)
{
    HORA_CHECK(key_check(key));
    if (value_bytes > BOOT_STORE_VALUE_MAX)
        return status_set(HORA_ERR_INVALID_ARG,
                          "rendezvous store: a value of %zu bytes for '%s' is over the limit of %u", value_bytes, key,
                          BOOT_STORE_VALUE_MAX);
    return store_request(store, BOOT_WIRE_OP_SET, key, value, value_bytes, 0, boot_now_s() + BOOT_STORE_REPLY_S);
}

/* Copy the reply's value out, NUL-terminated. */
static hora_status_t reply_value(boot_store_t *store, void **value, size_t *value_bytes)
{
    char *v = malloc(store->msg.value_bytes + 1);
    if (!v) return status_set(HORA_ERR_NO_MEMORY, "rendezvous store client: out of memory");
    memcpy(v, store->msg.value, store->msg.value_bytes);
    v[store->msg.value_bytes] = '\0';
    *value = v;
    if (value_bytes) *value_bytes = store->msg.value_bytes;
    return HORA_OK;
}

hora_status_t boot_store_get(boot_store_t *store, const char *key, double timeout_s, void **value, size_t *value_bytes)
{
    HORA_CHECK(key_check(key));
    int64_t wait_ms = timeout_s <= 0 ? 0 : (int64_t)(timeout_s * 1e3 + 0.5);
    if (wait_ms == 0 && timeout_s > 0) wait_ms = 1;
    HORA_CHECK(store_request(store, BOOT_WIRE_OP_GET, key, NULL, 0, wait_ms,
                             boot_now_s() + wait_ms * 1e-3 + BOOT_STORE_REPLY_S));
    if (store->msg.op == BOOT_WIRE_OP_NOT_FOUND)
        return status_set(HORA_ERR_TIMEOUT, "rendezvous store at %s: key '%s' was not set within %g s", store->address,
                          key, timeout_s);
    return reply_value(store, value, value_bytes);
}

hora_status_t boot_store_try_get(boot_store_t *store, const char *key, int *found, void **value, size_t *value_bytes)
{
    HORA_CHECK(key_check(key));
    HORA_CHECK(store_request(store, BOOT_WIRE_OP_GET, key, NULL, 0, 0, boot_now_s() + BOOT_STORE_REPLY_S));
    *found = store->msg.op == BOOT_WIRE_OP_OK;
    *value = NULL;
    if (value_bytes) *value_bytes = 0;
    return *found ? reply_value(store, value, value_bytes) : HORA_OK;
}

hora_status_t boot_store_add(boot_store_t *store, const char *key, int64_t delta, int64_t *value)
{
    HORA_CHECK(key_check(key));
    HORA_CHECK(store_request(store, BOOT_WIRE_OP_ADD, key, NULL, 0, delta, boot_now_s() + BOOT_STORE_REPLY_S));
    if (value) *value = store->msg.arg;
    return HORA_OK;
}

/* "key#n": the mark that key's count reached n. */
static hora_status_t count_key(char *out, size_t bytes, const char *key, int64_t n)
{
    if ((size_t)snprintf(out, bytes, "%s#%" PRId64, key, n) >= bytes)
        return status_set(HORA_ERR_INVALID_ARG, "rendezvous store: key '%.40s...' is too long for a count", key);
    return HORA_OK;
}

hora_status_t boot_store_count(boot_store_t *store, const char *key, int64_t *n)
{
    int64_t v;
    char mark[BOOT_STORE_KEY_MAX + 1];
    HORA_CHECK(boot_store_add(store, key, 1, &v));
    HORA_CHECK(count_key(mark, sizeof(mark), key, v));
    HORA_CHECK(boot_store_set(store, mark, NULL, 0));
    if (n) *n = v;
    return HORA_OK;
}

hora_status_t boot_store_wait_count(boot_store_t *store, const char *key, int64_t count, double timeout_s)
{
    char mark[BOOT_STORE_KEY_MAX + 1];
    void *value = NULL;
    HORA_CHECK(count_key(mark, sizeof(mark), key, count));
    hora_status_t status = boot_store_get(store, mark, timeout_s, &value, NULL);
    if (status == HORA_ERR_TIMEOUT) {
        int64_t now = 0;
        HORA_CHECK(boot_store_add(store, key, 0, &now));
        return status_set(HORA_ERR_TIMEOUT,
                          "rendezvous store at %s: '%s' counted %" PRId64 " of %" PRId64 " within %g s", store->address,
                          key, now, count, timeout_s);
    }
    HORA_CHECK(status);
    free(value);
    return HORA_OK;
}

hora_status_t boot_store_barrier(boot_store_t *store, const char *key, int64_t count, double timeout_s)
{
    HORA_CHECK(boot_store_count(store, key, NULL));
    return boot_store_wait_count(store, key, count, timeout_s);
}
