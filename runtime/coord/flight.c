/* flight.c - the flight recorder (flight.h says what it keeps, when it is
 * written and the file format) and its signal handlers (the coordinator's
 * hooks into it: coord_flight.c).
 *
 * One recorder per process, shared by the world's coordinator and its
 * process sets' (they submit from application threads under different
 * locks, so the ring has a lock of its own). The signal handlers read it
 * without the lock: a dump taken while an entry is being written may show
 * that entry half updated, never more than its fixed-size fields. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/status.h"
#include "coord/flight.h"

struct flight_entry {
    uint64_t seq; /* 0: empty slot */
    uint32_t occurrence;
    uint32_t kind, op, dtype, memory;
    int32_t set, peer, status;
    _Atomic uint32_t state;
    uint64_t bytes;
    int64_t enqueue_ns, negotiate_ns, start_ns, end_ns;
    const char *transport; /* a transport's static name, or NULL */
    char name[FLIGHT_NAME_BYTES];
};

/* The occurrence count per name: open addressing on a 64-bit hash, a
 * fixed number of slots (a job has a bounded set of names; one whose new
 * names keep coming fills it, and then records occurrence 0). */
#define FLIGHT_NAME_SLOTS 16384
#define FLIGHT_NAME_PROBES 32

struct flight {
    pthread_mutex_t lock; /* enqueue: seq, the slot, the name table */
    struct flight_entry *ring;
    uint64_t capacity;
    uint64_t next_seq; /* last seq handed out */
    uint64_t *name_hash;
    uint32_t *name_count;
    int rank, size;
    int has_dir;
    char path[600], tmp_path[608];
    atomic_flag dumping;
};

static struct flight *flight_global;

/* The signals we dump on; their handlers before ours. */
static const int flight_fatal_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
#define FLIGHT_FATAL_COUNT (int)(sizeof(flight_fatal_signals) / sizeof(flight_fatal_signals[0]))
static struct sigaction flight_old_fatal[FLIGHT_FATAL_COUNT], flight_old_usr1;
static int flight_handlers_installed;

static int64_t flight_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct flight *flight_process(void) { return flight_global; }

/* ------------------------------------------------------------- recording */

static uint64_t flight_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h ? h : 1;
}

/* Under f->lock. */
static uint32_t flight_occurrence(struct flight *f, const char *name)
{
    const uint64_t h = flight_hash(name);
    for (uint64_t i = 0; i < FLIGHT_NAME_PROBES; i++) {
        const uint64_t slot = (h + i) % FLIGHT_NAME_SLOTS;
        if (f->name_hash[slot] == h) return ++f->name_count[slot];
        if (!f->name_hash[slot]) {
            f->name_hash[slot] = h;
            return f->name_count[slot] = 1;
        }
    }
    return 0;
}

uint64_t flight_enqueue(struct flight *f, const struct hora_request *req, int set, int64_t now_us)
{
    if (!f) return 0;
    pthread_mutex_lock(&f->lock);
    const uint64_t seq = ++f->next_seq;
    struct flight_entry *e = &f->ring[seq % f->capacity];
    e->seq = 0; /* a dump skips it while it is rewritten */
    e->occurrence = flight_occurrence(f, req->name);
    e->kind = req->meta.kind;
    e->op = req->meta.op;
    e->dtype = req->meta.dtype;
    e->memory = req->meta.memory;
    e->set = set;
    e->peer = -1;
    e->status = 0;
    e->bytes = req->meta.count * hora_dtype_size((hora_dtype_t)req->meta.dtype);
    e->enqueue_ns = now_us * 1000;
    e->negotiate_ns = e->start_ns = e->end_ns = 0;
    e->transport = NULL;
    /* The name, cut to the field, one line: the file is line-based. */
    size_t i = 0;
    for (; req->name[i] && i < FLIGHT_NAME_BYTES - 1; i++) {
        const char ch = req->name[i];
        e->name[i] = ch == '\n' || ch == '\r' ? '?' : ch;
    }
    e->name[i] = '\0';
    atomic_store_explicit(&e->state, FLIGHT_STATE_QUEUED, memory_order_relaxed);
    e->seq = seq;
    pthread_mutex_unlock(&f->lock);
    return seq;
}

/* The entry of seq while nobody has reused its slot, else NULL. */
static struct flight_entry *flight_entry_of(struct flight *f, uint64_t seq)
{
    if (!f || !seq) return NULL;
    struct flight_entry *e = &f->ring[seq % f->capacity];
    return e->seq == seq ? e : NULL;
}

void flight_mark(struct flight *f, uint64_t seq, enum flight_state state)
{
    struct flight_entry *e = flight_entry_of(f, seq);
    if (!e) return;
    const int64_t now = flight_now_ns();
    if (state == FLIGHT_STATE_NEGOTIATED) e->negotiate_ns = now;
    if (state == FLIGHT_STATE_RUNNING) {
        e->start_ns = now;
        if (!e->negotiate_ns) e->negotiate_ns = now;
    }
    atomic_store_explicit(&e->state, state, memory_order_relaxed);
}

void flight_waited(struct flight *f, uint64_t seq, const char *transport, int peer)
{
    struct flight_entry *e = flight_entry_of(f, seq);
    if (!e) return;
    e->transport = transport;
    e->peer = peer;
}

void flight_end(struct flight *f, uint64_t seq, hora_status_t status)
{
    struct flight_entry *e = flight_entry_of(f, seq);
    if (!e) return;
    e->end_ns = flight_now_ns();
    e->status = status;
    atomic_store_explicit(&e->state, status == HORA_OK ? FLIGHT_STATE_DONE : FLIGHT_STATE_FAILED, memory_order_relaxed);
}

/* ------------------------------------------------------------------ dump */

/* A line being formatted without stdio (async-signal-safe). */
struct flight_line {
    char buf[512];
    size_t len;
};

static void flight_put(struct flight_line *l, const char *s)
{
    for (; s && *s && l->len < sizeof(l->buf) - 1; s++) l->buf[l->len++] = *s;
}

static void flight_put_n(struct flight_line *l, const char *s, size_t max)
{
    for (size_t i = 0; i < max && s[i] && l->len < sizeof(l->buf) - 1; i++) l->buf[l->len++] = s[i];
}

static void flight_put_i64(struct flight_line *l, int64_t v)
{
    char digits[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) flight_put(l, "-");
    while (n && l->len < sizeof(l->buf) - 1) l->buf[l->len++] = digits[--n];
}

static void flight_put_kv(struct flight_line *l, const char *key, int64_t v)
{
    flight_put(l, key);
    flight_put_i64(l, v);
}

static const char *flight_state_name(uint32_t s)
{
    static const char *const names[] = {"queued", "negotiated", "running", "done", "failed"};
    return s < 5 ? names[s] : "unknown";
}

static int flight_write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

void flight_dump(struct flight *f, const char *reason)
{
    if (!f || !f->has_dir) return;
    if (atomic_flag_test_and_set(&f->dumping)) return; /* one at a time (a signal during a dump) */
    const int saved_errno = errno;
    int fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) goto out;
    struct flight_line l = {.len = 0};
    flight_put(&l, "# hora flight recorder 1\nrank ");
    flight_put_i64(&l, f->rank);
    flight_put_kv(&l, " size ", f->size);
    flight_put_kv(&l, " pid ", getpid());
    flight_put(&l, " reason ");
    flight_put(&l, reason);
    flight_put_kv(&l, " now_ns ", flight_now_ns());
    flight_put_kv(&l, " capacity ", (int64_t)f->capacity);
    flight_put(&l, "\n");
    int ok = !flight_write_all(fd, l.buf, l.len);
    /* Oldest first: the slots after the newest, wrapping. */
    const uint64_t last = f->next_seq;
    const uint64_t first = last >= f->capacity ? last - f->capacity + 1 : 1;
    for (uint64_t seq = first; ok && seq <= last; seq++) {
        const struct flight_entry *e = &f->ring[seq % f->capacity];
        if (e->seq != seq) continue; /* being rewritten */
        l.len = 0;
        flight_put_kv(&l, "seq ", (int64_t)e->seq);
        flight_put_kv(&l, " occ ", e->occurrence);
        flight_put_kv(&l, " set ", e->set);
        flight_put(&l, " state ");
        flight_put(&l, flight_state_name(atomic_load_explicit(&e->state, memory_order_relaxed)));
        flight_put(&l, " kind ");
        flight_put(&l, coord_kind_name(e->kind));
        flight_put(&l, " op ");
        flight_put(&l, hora_op_name((hora_op_t)e->op));
        flight_put(&l, " dtype ");
        flight_put(&l, hora_dtype_name((hora_dtype_t)e->dtype));
        flight_put_kv(&l, " bytes ", (int64_t)e->bytes);
        flight_put(&l, e->memory == HORA_MEMORY_HOST ? " memory host" : " memory device");
        flight_put_kv(&l, " status ", e->status);
        flight_put(&l, " transport ");
        flight_put(&l, e->transport ? e->transport : "-");
        flight_put_kv(&l, " peer ", e->peer);
        flight_put_kv(&l, " enqueue_ns ", e->enqueue_ns);
        flight_put_kv(&l, " negotiate_ns ", e->negotiate_ns);
        flight_put_kv(&l, " start_ns ", e->start_ns);
        flight_put_kv(&l, " end_ns ", e->end_ns);
        flight_put(&l, " name ");
        flight_put_n(&l, e->name, FLIGHT_NAME_BYTES - 1);
        flight_put(&l, "\n");
        ok = !flight_write_all(fd, l.buf, l.len);
    }
    close(fd);
    /* Readers see the old file or the whole new one. */
    if (ok) rename(f->tmp_path, f->path);
out:
    errno = saved_errno;
    atomic_flag_clear(&f->dumping);
}

/* --------------------------------------------------------------- signals */

static void flight_chain(const struct sigaction *old, int sig, siginfo_t *info, void *uctx)
{
    if (old->sa_flags & SA_SIGINFO) {
        if (old->sa_sigaction) old->sa_sigaction(sig, info, uctx);
    } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN && old->sa_handler) {
        old->sa_handler(sig);
    }
}

static void flight_on_fatal(int sig, siginfo_t *info, void *uctx)
{
    flight_dump(flight_global, sig == SIGSEGV   ? "SIGSEGV"
                               : sig == SIGBUS  ? "SIGBUS"
                               : sig == SIGABRT ? "SIGABRT"
                               : sig == SIGFPE  ? "SIGFPE"
                                                : "SIGILL");
    for (int i = 0; i < FLIGHT_FATAL_COUNT; i++) {
        if (flight_fatal_signals[i] != sig) continue;
        const struct sigaction *old = &flight_old_fatal[i];
        const int chains = (old->sa_flags & SA_SIGINFO) ? old->sa_sigaction != NULL
                                                        : old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN;
        /* The previous handler from here on; a default action happens once
         * we return: the faulting instruction runs again, a raised signal is
         * delivered as soon as this handler unblocks it. */
        sigaction(sig, old, NULL);
        if (chains) {
            flight_chain(old, sig, info, uctx);
            return;
        }
        if (sig == SIGABRT || info == NULL || info->si_code <= 0) raise(sig);
        return;
    }
}

static void flight_on_usr1(int sig, siginfo_t *info, void *uctx)
{
    flight_dump(flight_global, "SIGUSR1");
    flight_chain(&flight_old_usr1, sig, info, uctx);
}

static void flight_install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sa.sa_sigaction = flight_on_fatal;
    for (int i = 0; i < FLIGHT_FATAL_COUNT; i++) sigaction(flight_fatal_signals[i], &sa, &flight_old_fatal[i]);
    sa.sa_sigaction = flight_on_usr1;
    sigaction(SIGUSR1, &sa, &flight_old_usr1);
    flight_handlers_installed = 1;
}

static void flight_restore_handlers(void)
{
    if (!flight_handlers_installed) return;
    for (int i = 0; i < FLIGHT_FATAL_COUNT; i++) sigaction(flight_fatal_signals[i], &flight_old_fatal[i], NULL);
    sigaction(SIGUSR1, &flight_old_usr1, NULL);
    flight_handlers_installed = 0;
}

/* ------------------------------------------------------------ init, free */

hora_status_t flight_init(const struct config *cfg, int rank, int size)
{
    if (cfg->flight_recorder <= 0) return HORA_OK;
    struct flight *f = calloc(1, sizeof(*f));
    if (!f) return status_fail(HORA_ERR_NO_MEMORY, "out of memory for the flight recorder");
    f->capacity = (uint64_t)cfg->flight_recorder;
    f->ring = calloc(f->capacity, sizeof(*f->ring));
    f->name_hash = calloc(FLIGHT_NAME_SLOTS, sizeof(*f->name_hash));
    f->name_count = calloc(FLIGHT_NAME_SLOTS, sizeof(*f->name_count));
    if (!f->ring || !f->name_hash || !f->name_count) {
        free(f->ring);
        free(f->name_hash);
        free(f->name_count);
        free(f);
        return status_fail(HORA_ERR_NO_MEMORY, "out of memory for the flight recorder (HORA_FLIGHT_RECORDER=%d)",
                           cfg->flight_recorder);
    }
    pthread_mutex_init(&f->lock, NULL);
    atomic_flag_clear(&f->dumping);
    f->rank = rank;
    f->size = size;
    if (cfg->flight_dir[0]) {
        struct stat st;
        if (mkdir(cfg->flight_dir, 0777) != 0 && errno != EEXIST) {
            hora_status_t status = status_fail(HORA_ERR_CONFIG, "HORA_FLIGHT_DIR=%s: cannot create it: %s",
                                               cfg->flight_dir, strerror(errno));
            flight_global = f;
            flight_free();
            return status;
        }
        if (stat(cfg->flight_dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(cfg->flight_dir, W_OK) != 0) {
            hora_status_t status = status_fail(
                HORA_ERR_CONFIG, "HORA_FLIGHT_DIR=%s: not a directory this process can write to", cfg->flight_dir);
            flight_global = f;
            flight_free();
            return status;
        }
        snprintf(f->path, sizeof(f->path), "%s/flight.%d.txt", cfg->flight_dir, rank);
        snprintf(f->tmp_path, sizeof(f->tmp_path), "%s.tmp", f->path);
        f->has_dir = 1;
    }
    flight_global = f;
    if (f->has_dir) flight_install_handlers();
    return HORA_OK;
}

void flight_free(void)
{
    struct flight *f = flight_global;
    if (!f) return;
    flight_restore_handlers();
    flight_global = NULL;
    pthread_mutex_destroy(&f->lock);
    free(f->ring);
    free(f->name_hash);
    free(f->name_count);
    free(f);
}

int flight_has_dir(const struct flight *f) { return f && f->has_dir; }

int flight_rank(const struct flight *f) { return f ? f->rank : -1; }
