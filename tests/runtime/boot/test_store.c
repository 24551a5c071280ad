/* test_store.c - the rendezvous store (runtime/boot/store.h) with real
 * sockets and threads in one process: set/get/add from several clients,
 * a get that waits for a later set, timeouts measured against their bound,
 * another job's client refused with both ids named, clients that misbehave
 * or vanish at any point of a frame (the server goes on serving), oversized
 * and malformed frames refused, a store that starts after its client, and
 * counts and barriers. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/status.h"
#include "boot/store.h"
#include "boot/wire.h"
#include "check.h"
#include "clock.h"

#define JOB "job-a"

typedef struct {
    boot_store_server_t *server;
    pthread_t thread;
    int port;
} test_server_t;

static void *server_main(void *arg)
{
    boot_store_server_run(arg);
    return NULL;
}

static int server_start(test_server_t *ts, int port)
{
    if (boot_store_server_open("127.0.0.1", port, JOB, &ts->server) != HORA_OK) {
        fprintf(stderr, "server_start: %s\n", status_message());
        return -1;
    }
    ts->port = boot_store_server_port(ts->server);
    pthread_create(&ts->thread, NULL, server_main, ts->server);
    return 0;
}

static void server_end(test_server_t *ts)
{
    boot_store_server_stop(ts->server);
    pthread_join(ts->thread, NULL);
    boot_store_server_close(ts->server);
}

static boot_store_t *client(int port)
{
    boot_store_t *store = NULL;
    if (boot_store_connect("127.0.0.1", port, JOB, 5.0, &store) != HORA_OK)
        fprintf(stderr, "connect: %s\n", status_message());
    return store;
}

/* A raw TCP connection, for the clients that break the protocol. */
static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static void raw_frame(int fd, uint8_t op, int64_t arg, const char *key, const void *value, size_t value_bytes,
                      size_t send_bytes)
{
    size_t key_bytes = key ? strlen(key) : 0, bytes = boot_wire_frame_bytes(key_bytes, value_bytes);
    uint8_t *buf = malloc(bytes);
    boot_wire_encode(buf, op, arg, key, key_bytes, value, value_bytes);
    if (send_bytes > bytes) send_bytes = bytes;
    ssize_t n = send(fd, buf, send_bytes, MSG_NOSIGNAL);
    (void)n;
    free(buf);
}

/* Read one reply frame: its op (and the message of an ERROR into text), or
 * -1 when the connection closed first. */
static int raw_reply(int fd, char *text, size_t text_bytes)
{
    uint8_t prefix[4];
    if (recv(fd, prefix, 4, MSG_WAITALL) != 4) return -1;
    uint32_t body = boot_wire_body_bytes(prefix);
    uint8_t *buf = malloc(body);
    if (recv(fd, buf, body, MSG_WAITALL) != (ssize_t)body) {
        free(buf);
        return -1;
    }
    boot_wire_msg_t m;
    const char *why;
    int op = boot_wire_decode(buf, body, &m, &why) == 0 ? m.op : -1;
    if (text) snprintf(text, text_bytes, "%.*s", (int)m.value_bytes, (const char *)m.value);
    free(buf);
    return op;
}

static int raw_closed(int fd)
{
    char c;
    return recv(fd, &c, 1, 0) == 0;
}

static void raw_hello(int fd)
{
    raw_frame(fd, BOOT_WIRE_OP_HELLO, BOOT_WIRE_VERSION, NULL, JOB, strlen(JOB), SIZE_MAX);
    char text[256];
    int op = raw_reply(fd, text, sizeof(text));
    CHECK(op == BOOT_WIRE_OP_OK, "raw hello: reply %d (%s)", op, text);
}

/* The store still works: a fresh client sets and reads a key. */
static void check_serving(int port, const char *after)
{
    boot_store_t *s = client(port);
    CHECK(s != NULL, "after %s: no connection", after);
    if (!s) return;
    void *v = NULL;
    size_t n = 0;
    CHECK(boot_store_set(s, "alive", after, strlen(after)) == HORA_OK, "after %s: set: %s", after, status_message());
    CHECK(boot_store_get(s, "alive", 1.0, &v, &n) == HORA_OK && n == strlen(after) && memcmp(v, after, n) == 0,
          "after %s: get: %s", after, status_message());
    free(v);
    boot_store_close(s);
}

static void test_basic(int port)
{
    boot_store_t *s = client(port);
    CHECK(s != NULL, "connect");
    if (!s) return;
    void *v = NULL;
    size_t n = 99;
    int found = 1;
    CHECK(boot_store_try_get(s, "none", &found, &v, &n) == HORA_OK && !found && !v && n == 0,
          "try_get of a missing key");
    CHECK(boot_store_set(s, "k", "v1", 2) == HORA_OK, "set: %s", status_message());
    CHECK(boot_store_set(s, "k", "value2", 6) == HORA_OK, "set again: %s", status_message());
    CHECK(boot_store_get(s, "k", 0.0, &v, &n) == HORA_OK && n == 6 && memcmp(v, "value2", 7) == 0,
          "get the newer value (NUL-terminated): %s", status_message());
    free(v);
    CHECK(boot_store_set(s, "empty", NULL, 0) == HORA_OK, "set an empty value");
    CHECK(boot_store_try_get(s, "empty", &found, &v, &n) == HORA_OK && found && n == 0, "an empty value exists");
    free(v);
    /* A value of the largest size, with every byte checked. */
    size_t big = BOOT_STORE_VALUE_MAX;
    uint8_t *b = malloc(big);
    for (size_t i = 0; i < big; i++) b[i] = (uint8_t)(i * 7 + 3);
    CHECK(boot_store_set(s, "big", b, big) == HORA_OK, "set %zu bytes: %s", big, status_message());
    CHECK(boot_store_get(s, "big", 1.0, &v, &n) == HORA_OK && n == big && memcmp(v, b, big) == 0, "get %zu bytes", big);
    free(v);
    CHECK(boot_store_set(s, "big2", b, big + 1) == HORA_ERR_INVALID_ARG && strstr(status_message(), "over the limit"),
          "a value over the limit refused by the client: %s", status_message());
    free(b);
    char long_key[BOOT_STORE_KEY_MAX + 2];
    memset(long_key, 'x', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    CHECK(boot_store_set(s, long_key, "v", 1) == HORA_ERR_INVALID_ARG, "a key over the limit refused");
    int64_t c = 0;
    CHECK(boot_store_add(s, "ctr", 5, &c) == HORA_OK && c == 5, "add 5 -> %lld", (long long)c);
    CHECK(boot_store_add(s, "ctr", -7, &c) == HORA_OK && c == -2, "add -7 -> %lld", (long long)c);
    CHECK(boot_store_add(s, "k", 1, &c) == HORA_ERR_INVALID_ARG && strstr(status_message(), "not a counter"),
          "add on a value refused: %s", status_message());
    CHECK(boot_store_set(s, "after-error", "x", 1) == HORA_OK, "the connection survives a refused add");
    boot_store_close(s);
}

#define ADD_THREADS 6
#define ADD_EACH 200
static int add_port;
static uint8_t add_seen[ADD_THREADS * ADD_EACH + 1];

static void *add_main(void *arg)
{
    (void)arg;
    boot_store_t *s = client(add_port);
    if (!s) return (void *)1;
    for (int i = 0; i < ADD_EACH; i++) {
        int64_t v;
        if (boot_store_add(s, "counter", 1, &v) != HORA_OK || v < 1 || v > ADD_THREADS * ADD_EACH) return (void *)1;
        __atomic_fetch_add(&add_seen[v], 1, __ATOMIC_RELAXED);
    }
    boot_store_close(s);
    return NULL;
}

static void test_add_threads(int port)
{
    add_port = port;
    pthread_t t[ADD_THREADS];
    for (int i = 0; i < ADD_THREADS; i++) pthread_create(&t[i], NULL, add_main, NULL);
    int bad = 0;
    for (int i = 0; i < ADD_THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += r != NULL;
    }
    CHECK(bad == 0, "%d of %d adding threads failed", bad, ADD_THREADS);
    int dup = 0;
    for (int v = 1; v <= ADD_THREADS * ADD_EACH; v++) dup += add_seen[v] != 1;
    CHECK(dup == 0, "%d counter values not returned exactly once", dup);
}

typedef struct {
    int port;
    double timeout_s, elapsed_s;
    hora_status_t status;
    char value[64];
} getter_t;

static void *getter_main(void *arg)
{
    getter_t *g = arg;
    boot_store_t *s = client(g->port);
    double t0 = test_now_s();
    void *v = NULL;
    g->status = s ? boot_store_get(s, "late", g->timeout_s, &v, NULL) : HORA_ERR_TRANSPORT;
    g->elapsed_s = test_now_s() - t0;
    if (v) snprintf(g->value, sizeof(g->value), "%s", (char *)v);
    free(v);
    boot_store_close(s);
    return NULL;
}

static void test_get_waits(int port)
{
    getter_t g[3] = {
        {.port = port, .timeout_s = 5.0}, {.port = port, .timeout_s = 5.0}, {.port = port, .timeout_s = 5.0}};
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, getter_main, &g[i]);
    test_sleep_s(0.4);
    boot_store_t *s = client(port);
    CHECK(s && boot_store_set(s, "late", "here", 4) == HORA_OK, "set the awaited key");
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        CHECK(g[i].status == HORA_OK && strcmp(g[i].value, "here") == 0, "waiter %d: %s '%s'", i,
              status_name(g[i].status), g[i].value);
        CHECK(g[i].elapsed_s >= 0.3 && g[i].elapsed_s < 2.0, "waiter %d returned after %.3f s (set at 0.4 s)", i,
              g[i].elapsed_s);
    }
    /* A get that times out: within its bound, the key named. */
    double t0 = test_now_s();
    void *v = NULL;
    hora_status_t status = boot_store_get(s, "never", 0.3, &v, NULL);
    double dt = test_now_s() - t0;
    CHECK(status == HORA_ERR_TIMEOUT && strstr(status_message(), "'never'") && strstr(status_message(), "0.3 s"),
          "get timeout: %s: %s", status_name(status), status_message());
    CHECK(dt >= 0.29 && dt < 1.0, "get with timeout 0.3 s returned after %.3f s", dt);
    printf("get of a missing key, timeout 0.3 s: returned after %.3f s\n", dt);
    CHECK(boot_store_set(s, "after-timeout", "x", 1) == HORA_OK, "the connection survives a get timeout");
    boot_store_close(s);
}

static void test_wrong_job(int port)
{
    boot_store_t *s = NULL;
    double t0 = test_now_s();
    hora_status_t status = boot_store_connect("127.0.0.1", port, "job-b", 5.0, &s);
    double dt = test_now_s() - t0;
    CHECK(status == HORA_ERR_MISMATCH && strstr(status_message(), "'job-b'") && strstr(status_message(), "'job-a'"),
          "another job refused naming both ids: %s: %s", status_name(status), status_message());
    CHECK(dt < 1.0, "the refusal took %.3f s (no retries)", dt);
    printf("wrong job id: %s (%.3f s)\n", status_message(), dt);
}

static void test_bad_clients(int port)
{
    char text[512];
    /* Vanishing at each point of a frame: before hello, inside the length
     * prefix, inside the header, inside the key, inside the value. */
    size_t cuts[] = {0, 2, 4 + 5, 4 + BOOT_WIRE_HEADER_BYTES + 1, 4 + BOOT_WIRE_HEADER_BYTES + 3 + 100};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        int fd = raw_connect(port);
        raw_hello(fd);
        char value[1000];
        memset(value, 'v', sizeof(value));
        raw_frame(fd, BOOT_WIRE_OP_SET, 0, "cut", value, sizeof(value), cuts[i]);
        close(fd);
    }
    /* Vanishing mid-hello, and while parked on a get. */
    int fd = raw_connect(port);
    raw_frame(fd, BOOT_WIRE_OP_HELLO, BOOT_WIRE_VERSION, NULL, JOB, strlen(JOB), 10);
    close(fd);
    fd = raw_connect(port);
    raw_hello(fd);
    raw_frame(fd, BOOT_WIRE_OP_GET, 60000, "parked", NULL, 0, SIZE_MAX);
    test_sleep_s(0.05);
    close(fd);
    check_serving(port, "clients vanishing mid-frame");
    boot_store_t *s = client(port);
    int found = 1;
    void *v = NULL;
    CHECK(s && boot_store_try_get(s, "cut", &found, &v, NULL) == HORA_OK && !found, "a cut set left no key");
    CHECK(s && boot_store_set(s, "parked", "p", 1) == HORA_OK, "a set of the gone client's awaited key");
    boot_store_close(s);

    /* Oversized: a length prefix over the limit is refused at once. */
    fd = raw_connect(port);
    raw_hello(fd);
    uint8_t prefix[4] = {0x7f, 0xff, 0xff, 0xff};
    send(fd, prefix, 4, MSG_NOSIGNAL);
    int op = raw_reply(fd, text, sizeof(text));
    CHECK(op == BOOT_WIRE_OP_ERROR && strstr(text, "over the limit"), "oversized frame: reply %d '%s'", op, text);
    CHECK(raw_closed(fd), "oversized frame: the connection is closed");
    close(fd);
    /* Malformed: lengths that do not add up, a frame before hello, an unknown op. */
    fd = raw_connect(port);
    raw_hello(fd);
    uint8_t bad[4 + BOOT_WIRE_HEADER_BYTES + 3];
    boot_wire_encode(bad, BOOT_WIRE_OP_SET, 0, "abc", 3, NULL, 0);
    bad[4 + 2] = 9; /* key length 9, with 3 bytes of key */
    send(fd, bad, sizeof(bad), MSG_NOSIGNAL);
    op = raw_reply(fd, text, sizeof(text));
    CHECK(op == BOOT_WIRE_OP_ERROR && strstr(text, "malformed"), "malformed frame: reply %d '%s'", op, text);
    CHECK(raw_closed(fd), "malformed frame: the connection is closed");
    close(fd);
    fd = raw_connect(port);
    raw_frame(fd, BOOT_WIRE_OP_SET, 0, "k", "v", 1, SIZE_MAX);
    op = raw_reply(fd, text, sizeof(text));
    CHECK(op == BOOT_WIRE_OP_ERROR && strstr(text, "hello"), "a set before hello: reply %d '%s'", op, text);
    close(fd);
    fd = raw_connect(port);
    raw_hello(fd);
    raw_frame(fd, 77, 0, "k", NULL, 0, SIZE_MAX);
    op = raw_reply(fd, text, sizeof(text));
    CHECK(op == BOOT_WIRE_OP_ERROR && strstr(text, "unknown request"), "an unknown op: reply %d '%s'", op, text);
    close(fd);
    /* Garbage that is not a frame at all (an HTTP request). */
    fd = raw_connect(port);
    const char *http = "GET / HTTP/1.0\r\n\r\n";
    send(fd, http, strlen(http), MSG_NOSIGNAL);
    op = raw_reply(fd, text, sizeof(text));
    CHECK(op == BOOT_WIRE_OP_ERROR, "an HTTP request: reply %d '%s'", op, text);
    close(fd);
    check_serving(port, "oversized and malformed frames");
}

static void test_unreachable(void)
{
    /* A port nobody listens on: a store opened and closed. */
    test_server_t gone;
    if (server_start(&gone, 0) != 0) return;
    int port = gone.port;
    server_end(&gone);
    boot_store_t *s = NULL;
    double t0 = test_now_s();
    hora_status_t status = boot_store_connect("127.0.0.1", port, JOB, 0.6, &s);
    double dt = test_now_s() - t0;
    char want[128];
    snprintf(want, sizeof(want), "cannot reach the rendezvous store at 127.0.0.1:%d within 0.6 s", port);
    CHECK(status == HORA_ERR_TIMEOUT && strstr(status_message(), want), "unreachable: %s: %s", status_name(status),
          status_message());
    CHECK(dt >= 0.59 && dt < 1.2, "unreachable store, timeout 0.6 s: gave up after %.3f s", dt);
    printf("unreachable store, timeout 0.6 s: %.3f s: %s\n", dt, status_message());

    /* The store comes up 0.4 s after its client started trying. */
    getter_t g = {.port = port, .timeout_s = 3.0};
    pthread_t t;
    pthread_create(&t, NULL, getter_main, &g);
    test_sleep_s(0.4);
    test_server_t late;
    if (server_start(&late, port) != 0) {
        pthread_join(t, NULL);
        return;
    }
    boot_store_t *w = client(port);
    CHECK(w && boot_store_set(w, "late", "up", 2) == HORA_OK, "set on the late store");
    pthread_join(t, NULL);
    CHECK(g.status == HORA_OK && strcmp(g.value, "up") == 0, "a client that started before the store: %s",
          status_name(g.status));
    /* The store goes away under a client: its next call fails, promptly. */
    server_end(&late);
    t0 = test_now_s();
    void *v = NULL;
    status = boot_store_get(w, "late", 5.0, &v, NULL);
    dt = test_now_s() - t0;
    CHECK(status == HORA_ERR_TRANSPORT && strstr(status_message(), "lost the connection"),
          "a call after the store stopped: %s: %s", status_name(status), status_message());
    CHECK(dt < 1.0, "it failed after %.3f s", dt);
    CHECK(boot_store_set(w, "x", "y", 1) == HORA_ERR_TRANSPORT && strstr(status_message(), "lost the connection"),
          "a broken client stays broken: %s", status_message());
    boot_store_close(w);
}

static int barrier_port;

static void *barrier_main(void *arg)
{
    (void)arg;
    boot_store_t *s = client(barrier_port);
    hora_status_t status = s ? boot_store_barrier(s, "bar", 4, 5.0) : HORA_ERR_TRANSPORT;
    boot_store_close(s);
    return status == HORA_OK ? NULL : (void *)1;
}

static void test_counts(int port)
{
    barrier_port = port;
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, barrier_main, NULL);
    test_sleep_s(0.2);
    boot_store_t *s = client(port);
    int64_t n = 0;
    CHECK(boot_store_add(s, "bar", 0, &n) == HORA_OK && n == 3, "3 of 4 in the barrier: %lld", (long long)n);
    CHECK(boot_store_barrier(s, "bar", 4, 5.0) == HORA_OK, "the 4th passes: %s", status_message());
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += r != NULL;
    }
    CHECK(bad == 0, "%d barrier threads failed", bad);
    double t0 = test_now_s();
    hora_status_t status = boot_store_barrier(s, "bar2", 2, 0.3);
    double dt = test_now_s() - t0;
    CHECK(status == HORA_ERR_TIMEOUT && strstr(status_message(), "'bar2' counted 1 of 2 within 0.3 s"),
          "a barrier short of one: %s", status_message());
    CHECK(dt >= 0.29 && dt < 1.0, "it gave up after %.3f s", dt);
    boot_store_close(s);
}

int main(void)
{
    test_server_t ts;
    if (server_start(&ts, 0) != 0) return 1;
    CHECK(ts.port > 0, "a port was picked: %d", ts.port);
    test_basic(ts.port);
    test_add_threads(ts.port);
    test_get_waits(ts.port);
    test_wrong_job(ts.port);
    test_bad_clients(ts.port);
    test_counts(ts.port);
    server_end(&ts);
    test_unreachable();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
