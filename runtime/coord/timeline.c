/* timeline.c - the Chrome-trace timeline (HORA_TIMELINE).
 *
 * Protocol of the file: it is always
 *     "[\n" + events joined by ",\n" + "\n]\n"
 * so it parses as a JSON array at every moment. tail_offset is where the
 * closing "\n]\n" starts; a new event is appended by ONE pwrite at tail_offset
 * of [",\n"] event "\n]\n", which overwrites the old terminator with a longer
 * text that ends in a new one. A reader racing with that pwrite sees the old
 * or the new complete array in the common case (a regular-file write is not
 * split by the kernel for sizes like these); the one-call rule is what makes
 * that so, and pwrite at a tracked offset (never lseek + write) is what keeps
 * two writers from racing on the file position. Writers serialise on a mutex.
 *
 * A row (the Chrome "tid") per tensor: the first event on a tensor is
 * preceded, in the same pwrite, by a "thread_name" metadata event that names
 * the row, so a row is never seen without its name.
 *
 * Nothing is fsync'd: the trace is a diagnostic and must not slow the
 * coordinator's cycle; the page cache makes it visible to readers at once. */
#define _GNU_SOURCE
#include "coord/timeline.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/status.h"

#define TIMELINE_HEAD "[\n"
#define TIMELINE_SEP ",\n"
#define TIMELINE_TAIL "\n]\n"
#define TIMELINE_TAIL_BYTES (sizeof(TIMELINE_TAIL) - 1)
#define TIMELINE_FIRST_SLOTS 64
/* Nesting allowed in args_json by the structural check. */
#define TIMELINE_ARGS_DEPTH 64

/* A growable text buffer; failed is sticky so formatting can go on unchecked
 * and be tested once at the end. */
struct timeline_text {
    char *data;
    size_t len, cap;
    int failed;
};

/* One open-addressing slot: tensor name -> row. */
struct timeline_slot {
    char *tensor; /* owned; NULL = empty slot */
    uint64_t hash;
    int row;
};

struct timeline {
    pthread_mutex_t lock; /* guards everything below except fd, path, max_bytes, start */
    int fd;
    char *path;                  /* owned, for messages */
    size_t max_bytes;            /* 0 = unbounded */
    struct timespec start;       /* CLOCK_MONOTONIC at open; ts 0 */
    off_t tail_offset;           /* where TIMELINE_TAIL starts; the next event overwrites it */
    size_t event_count;          /* events in the file, metadata included */
    int stopped;                 /* max_bytes reached or a write failed: nothing more is written */
    int warned_args;             /* one warning for malformed args_json, not one per event */
    struct timeline_slot *slots; /* power-of-two capacity, at most half full */
    size_t slot_cap;
    int row_count;             /* rows are 1..row_count */
    struct timeline_text text; /* the pending write, reused across events */
};

/* ---- text building ---------------------------------------------------- */

static void timeline_text_put(struct timeline_text *t, const char *s, size_t n)
{
    if (t->failed) return;
    if (t->len + n + 1 > t->cap) {
        size_t ncap = t->cap ? t->cap : 256;
        while (t->len + n + 1 > ncap) ncap *= 2;
        char *nd = realloc(t->data, ncap);
        if (!nd) {
            t->failed = 1;
            return;
        }
        t->data = nd;
        t->cap = ncap;
    }
    memcpy(t->data + t->len, s, n);
    t->len += n;
    t->data[t->len] = '\0';
}

static void timeline_text_puts(struct timeline_text *t, const char *s) { timeline_text_put(t, s, strlen(s)); }

/* Length of the valid UTF-8 sequence at s, or 0 if s does not start one.
 * Strict like the readers (Python's json, Perfetto): no overlong forms, no
 * surrogates, nothing above U+10FFFF. */
static size_t timeline_utf8_length(const unsigned char *s)
{
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */

    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4;
    else
        return 0;
    if (c == 0xE0)
        lo = 0xA0; /* overlong 3-byte */
    else if (c == 0xED)
        hi = 0x9F; /* UTF-16 surrogates */
    else if (c == 0xF0)
        lo = 0x90; /* overlong 4-byte */
    else if (c == 0xF4)
        hi = 0x8F; /* above U+10FFFF */
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return n;
}

/* s as a quoted JSON string: quotes, backslashes and control characters
 * escaped; bytes that are not UTF-8 become U+FFFD, since one bad byte in a
 * tensor name would otherwise make the whole file unreadable. */
static void timeline_text_put_string(struct timeline_text *t, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    timeline_text_put(t, "\"", 1);
    while (*p) {
        const unsigned char *run = p; /* copy plain bytes in runs */
        while (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') p++;
        timeline_text_put(t, (const char *)run, (size_t)(p - run));
        if (!*p) break;
        if (*p >= 0x80) {
            size_t n = timeline_utf8_length(p);
            if (n)
                timeline_text_put(t, (const char *)p, n);
            else
                timeline_text_puts(t, "\\ufffd");
            p += n ? n : 1;
            continue;
        }
        char esc[8];
        switch (*p) {
        case '"': timeline_text_puts(t, "\\\""); break;
        case '\\': timeline_text_puts(t, "\\\\"); break;
        case '\n': timeline_text_puts(t, "\\n"); break;
        case '\r': timeline_text_puts(t, "\\r"); break;
        case '\t': timeline_text_puts(t, "\\t"); break;
        case '\b': timeline_text_puts(t, "\\b"); break;
        case '\f': timeline_text_puts(t, "\\f"); break;
        default: snprintf(esc, sizeof(esc), "\\u%04x", *p); timeline_text_puts(t, esc);
        }
        p++;
    }
    timeline_text_put(t, "\"", 1);
}

/* A cheap structural check of args_json, not a parser: one object, brackets
 * balanced and properly nested, strings closed, valid escapes, no raw control
 * characters in strings. It catches the usual mistakes (truncated snprintf,
 * an unescaped quote or name) that would make the whole file unreadable. */
static int timeline_args_is_object(const char *s)
{
    char open[TIMELINE_ARGS_DEPTH];
    int depth = 0, in_string = 0;

    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
    if (*s != '{') return 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (in_string) {
            if (c == '\\') {
                if (!s[1] || !strchr("\"\\/bfnrtu", s[1])) return 0;
                s++;
            } else if (c == '"') {
                in_string = 0;
            } else if (c < 0x20) {
                return 0;
            }
            continue;
        }
        if (c == '"') {
            in_string = 1;
        } else if (c == '{' || c == '[') {
            if (depth == TIMELINE_ARGS_DEPTH) return 0;
            open[depth++] = (char)c;
        } else if (c == '}' || c == ']') {
            if (!depth || open[depth - 1] != (c == '}' ? '{' : '[')) return 0;
            if (--depth == 0) break;
        }
    }
    if (!*s) return 0; /* ran out before the object closed */
    for (s++; *s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'; s++) {
    }
    return *s == '\0';
}

/* ---- rows --------------------------------------------------------------- */

static uint64_t timeline_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static struct timeline_slot *timeline_slot_find(struct timeline_slot *slots, size_t cap, const char *tensor,
                                                uint64_t hash)
{
    for (size_t i = hash & (cap - 1);; i = (i + 1) & (cap - 1))
        if (!slots[i].tensor || (slots[i].hash == hash && !strcmp(slots[i].tensor, tensor))) return &slots[i];
}

static int timeline_slots_grow(struct timeline *tl)
{
    size_t ncap = tl->slot_cap ? tl->slot_cap * 2 : TIMELINE_FIRST_SLOTS;
    struct timeline_slot *n = calloc(ncap, sizeof(*n));
    if (!n) return -1;
    for (size_t i = 0; i < tl->slot_cap; i++)
        if (tl->slots[i].tensor) *timeline_slot_find(n, ncap, tl->slots[i].tensor, tl->slots[i].hash) = tl->slots[i];
    free(tl->slots);
    tl->slots = n;
    tl->slot_cap = ncap;
    return 0;
}

/* The row of tensor, creating it if needed (*created = 1). Returns -1 when out
 * of memory. */
static int timeline_row(struct timeline *tl, const char *tensor, int *created)
{
    uint64_t hash = timeline_hash(tensor);
    struct timeline_slot *slot;

    *created = 0;
    if (tl->slot_cap) {
        slot = timeline_slot_find(tl->slots, tl->slot_cap, tensor, hash);
        if (slot->tensor) return slot->row;
    }
    if ((size_t)(tl->row_count + 1) * 2 > tl->slot_cap && timeline_slots_grow(tl) != 0) return -1;
    slot = timeline_slot_find(tl->slots, tl->slot_cap, tensor, hash);
    slot->tensor = strdup(tensor);
    if (!slot->tensor) return -1;
    slot->hash = hash;
    slot->row = ++tl->row_count;
    *created = 1;
    return slot->row;
}

/* ---- file ----------------------------------------------------------------- */

static int timeline_pwrite_all(int fd, const char *buf, size_t len, off_t offset)
{
    while (len) {
        ssize_t n = pwrite(fd, buf, len, offset);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
        offset += n;
    }
    return 0;
}

/* Stop writing for good (called with the lock held). */
static void timeline_stop(struct timeline *tl, const char *why)
{
    tl->stopped = 1;
    log_warn("timeline %s: %s; later events are dropped (the file stays valid JSON)", tl->path, why);
}

hora_status_t timeline_open(struct timeline **tl_out, const char *path, size_t max_bytes)
{
    hora_status_t status;
    struct timeline *tl;
    int e;

    if (!tl_out || !path || !*path) return status_fail(HORA_ERR_INVALID_ARG, "timeline_open: no path given");
    tl = calloc(1, sizeof(*tl));
    if (!tl) return status_fail(HORA_ERR_NO_MEMORY, "out of memory opening the timeline %s", path);
    tl->path = strdup(path);
    if (!tl->path) {
        status = status_fail(HORA_ERR_NO_MEMORY, "out of memory opening the timeline %s", path);
        goto err_free_tl;
    }
    tl->max_bytes = max_bytes;
    tl->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (tl->fd < 0) {
        status = status_fail(HORA_ERR_SYSTEM, "cannot open the timeline file %s: %s", path, strerror(errno));
        goto err_free_path;
    }
    /* Valid from the first byte a reader can see: an empty array. */
    if (timeline_pwrite_all(tl->fd, TIMELINE_HEAD TIMELINE_TAIL, sizeof(TIMELINE_HEAD TIMELINE_TAIL) - 1, 0) != 0) {
        status = status_fail(HORA_ERR_SYSTEM, "cannot write the timeline file %s: %s", path, strerror(errno));
        goto err_close;
    }
    tl->tail_offset = (off_t)(sizeof(TIMELINE_HEAD) - 1);
    e = pthread_mutex_init(&tl->lock, NULL);
    if (e) {
        status = status_fail(HORA_ERR_SYSTEM, "pthread_mutex_init for the timeline %s failed: %s", path, strerror(e));
        goto err_close;
    }
    clock_gettime(CLOCK_MONOTONIC, &tl->start);
    *tl_out = tl;
    return HORA_OK;

err_close:
    close(tl->fd);
err_free_path:
    free(tl->path);
err_free_tl:
    free(tl);
    return status;
}

void timeline_close(struct timeline *tl)
{
    if (!tl) return;
    close(tl->fd);
    for (size_t i = 0; i < tl->slot_cap; i++) free(tl->slots[i].tensor);
    free(tl->slots);
    free(tl->text.data);
    pthread_mutex_destroy(&tl->lock);
    free(tl->path);
    free(tl);
}

int64_t timeline_now_us(const struct timeline *tl)
{
    struct timespec now;
    if (!tl) return 0;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)(now.tv_sec - tl->start.tv_sec) * 1000000 + (now.tv_nsec - tl->start.tv_nsec) / 1000;
}

/* Append the event (ph "B", "E" or "i") and, for a new row, its name first. */
static void timeline_event(struct timeline *tl, const char *tensor, const char *name, const char *ph, int64_t ts_us,
                           const char *args_json)
{
    struct timeline_text *t;
    size_t added = 1;
    int created, row;
    char num[64];

    if (!tl) return;
    if (!tensor) tensor = "";
    if (!name) name = "";
    if (ts_us < 0) ts_us = timeline_now_us(tl);

    pthread_mutex_lock(&tl->lock);
    if (tl->stopped) goto out;
    row = timeline_row(tl, tensor, &created);
    if (row < 0) {
        timeline_stop(tl, "out of memory");
        goto out;
    }
    t = &tl->text;
    t->len = 0;
    t->failed = 0;
    if (tl->event_count) timeline_text_puts(t, TIMELINE_SEP);
    if (created) {
        snprintf(num, sizeof(num), "%d", row);
        timeline_text_puts(t, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":");
        timeline_text_puts(t, num);
        timeline_text_puts(t, ",\"args\":{\"name\":");
        timeline_text_put_string(t, tensor);
        timeline_text_puts(t, "}}" TIMELINE_SEP);
        added++;
    }
    timeline_text_puts(t, "{\"name\":");
    timeline_text_put_string(t, name);
    timeline_text_puts(t, ",\"ph\":\"");
    timeline_text_puts(t, ph);
    timeline_text_puts(t, *ph == 'i' ? "\",\"s\":\"t\"" : "\"");
    snprintf(num, sizeof(num), ",\"ts\":%" PRId64 ",\"pid\":0,\"tid\":%d", ts_us, row);
    timeline_text_puts(t, num);
    if (args_json) {
        timeline_text_puts(t, ",\"args\":");
        if (timeline_args_is_object(args_json)) {
            timeline_text_puts(t, args_json);
        } else {
            /* Kept, but as a string, so the file stays valid. */
            if (!tl->warned_args) {
                log_warn("timeline %s: args of %s/%s are not a JSON object; stored as a string", tl->path, tensor,
                         name);
                tl->warned_args = 1;
            }
            timeline_text_puts(t, "{\"invalid_args\":");
            timeline_text_put_string(t, args_json);
            timeline_text_puts(t, "}");
        }
    }
    timeline_text_puts(t, "}" TIMELINE_TAIL);
    if (t->failed) {
        timeline_stop(tl, "out of memory");
        goto out;
    }
    if (tl->max_bytes && (size_t)tl->tail_offset + t->len > tl->max_bytes) {
        char why[96];
        snprintf(why, sizeof(why), "reached its limit of %zu bytes after %zu events", tl->max_bytes, tl->event_count);
        timeline_stop(tl, why);
        goto out;
    }
    if (timeline_pwrite_all(tl->fd, t->data, t->len, tl->tail_offset) != 0) {
        char why[160];
        snprintf(why, sizeof(why), "write failed: %s", strerror(errno));
        /* Best effort: put the terminator back where it was and cut any
         * partial event behind it. */
        if (timeline_pwrite_all(tl->fd, TIMELINE_TAIL, TIMELINE_TAIL_BYTES, tl->tail_offset) == 0 &&
            ftruncate(tl->fd, tl->tail_offset + (off_t)TIMELINE_TAIL_BYTES) != 0) {
            /* nothing more to try */
        }
        timeline_stop(tl, why);
        goto out;
    }
    tl->tail_offset += (off_t)(t->len - TIMELINE_TAIL_BYTES);
    tl->event_count += added;
out:
    pthread_mutex_unlock(&tl->lock);
}

void timeline_begin(struct timeline *tl, const char *tensor, const char *phase, int64_t ts_us, const char *args_json)
{
    timeline_event(tl, tensor, phase, "B", ts_us, args_json);
}

void timeline_end(struct timeline *tl, const char *tensor, const char *phase, int64_t ts_us, const char *args_json)
{
    timeline_event(tl, tensor, phase, "E", ts_us, args_json);
}

void timeline_instant(struct timeline *tl, const char *tensor, const char *name, int64_t ts_us, const char *args_json)
{
    timeline_event(tl, tensor, name, "i", ts_us, args_json);
}
