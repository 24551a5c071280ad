/*
 * ckpt_writer.c - the checkpoint directory (checkpoint.h): its file names,
 * the list a resume tries in order, and rank 0's writer thread with the
 * atomic write sequence, pruning and the crash hook of the tests; and the
 * in-memory commit (--elastic), the same snapshot kept instead of written.
 * What goes into a file (the texts, loading, checking) is checkpoint.c's.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "ckpt_file.h"
#include "train.h"

/* ---- the directory ---- */

/* "ckpt-SSSSSSSSSS.hckpt": 1 and the step, else 0. */
static int ckpt_name_step(const char *name, uint64_t *step)
{
    unsigned long long s;
    int used = 0;
    if (strlen(name) != 5 + 10 + 6 || sscanf(name, "ckpt-%10llu.hckpt%n", &s, &used) != 1 || used != 21) return 0;
    *step = s;
    return 1;
}

static int is_temp_name(const char *name)
{
    return (strncmp(name, "ckpt-", 5) == 0 || strncmp(name, "latest.", 7) == 0) && strstr(name, ".tmp.") != NULL;
}

typedef struct {
    uint64_t step;
    char name[64];
} ckpt_entry_t;

static int entry_newest_first(const void *a, const void *b)
{
    uint64_t x = ((const ckpt_entry_t *)a)->step, y = ((const ckpt_entry_t *)b)->step;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* dir's checkpoint files, newest first. */
static hora_status_t scan_dir(const char *dir, ckpt_entry_t **out, int *count)
{
    *out = NULL;
    *count = 0;
    DIR *dp = opendir(dir);
    if (!dp) return errno == ENOENT ? HORA_OK : HORA_ERR_SYSTEM;
    ckpt_entry_t *e = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        uint64_t step;
        if (!ckpt_name_step(de->d_name, &step)) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            ckpt_entry_t *g = realloc(e, (size_t)cap * sizeof(*e));
            if (!g) {
                free(e);
                closedir(dp);
                return HORA_ERR_NO_MEMORY;
            }
            e = g;
        }
        e[n].step = step;
        snprintf(e[n].name, sizeof(e[n].name), "%s", de->d_name);
        n++;
    }
    closedir(dp);
    qsort(e, (size_t)n, sizeof(*e), entry_newest_first);
    *out = e;
    *count = n;
    return HORA_OK;
}

/* The file name latest holds ("" when none or unreadable). */
static void read_latest(const char *dir, char *name, size_t n)
{
    name[0] = 0;
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, TR_CKPT_LATEST);
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (fgets(name, (int)n, f))
        name[strcspn(name, "\r\n")] = 0;
    else
        name[0] = 0;
    fclose(f);
    uint64_t step;
    if (!ckpt_name_step(name, &step)) name[0] = 0;
}

hora_status_t tr_ckpt_list(const char *dir, char ***paths, int *count)
{
    *paths = NULL;
    *count = 0;
    ckpt_entry_t *e;
    int n;
    hora_status_t status = scan_dir(dir, &e, &n);
    if (status != HORA_OK || n == 0) return status;
    char latest[64];
    read_latest(dir, latest, sizeof(latest));
    for (int i = 1; i < n; i++) /* latest's choice first */
        if (latest[0] && strcmp(e[i].name, latest) == 0) {
            ckpt_entry_t t = e[i];
            memmove(&e[1], &e[0], (size_t)i * sizeof(*e));
            e[0] = t;
        }
    char **p = calloc((size_t)n, sizeof(*p));
    for (int i = 0; p && i < n; i++) {
        size_t len = strlen(dir) + strlen(e[i].name) + 2;
        p[i] = malloc(len);
        if (!p[i]) {
            tr_ckpt_list_free(p, i);
            p = NULL;
            break;
        }
        snprintf(p[i], len, "%s/%s", dir, e[i].name);
    }
    free(e);
    if (!p) return HORA_ERR_NO_MEMORY;
    *paths = p;
    *count = n;
    return HORA_OK;
}

void tr_ckpt_list_free(char **paths, int count)
{
    for (int i = 0; paths && i < count; i++) free(paths[i]);
    free(paths);
}

/* ---- the writer ---- */

/* Test hook (tests/trainer/ckpt): HORA_CKPT_CRASH=POINT[@STEP] names a moment of
 * the write (of every checkpoint, or of the one of step STEP) at which the
 * writing process kills itself with SIGKILL, as a crash would. libhora
 * lists the name among its tools' variables (runtime/base/config.c), so
 * setting it draws no "unknown setting" warning. */
typedef enum {
    CRASH_NONE = 0,
    CRASH_BEFORE_TEMP,   /* nothing of this checkpoint on disk yet */
    CRASH_MID_DATA,      /* the temp file holds half its bytes */
    CRASH_BEFORE_LATEST, /* renamed into place, latest still names the previous one */
    CRASH_AFTER_LATEST,  /* complete; the old ones not yet pruned */
} crash_point_t;

static crash_point_t crash_point_from_env(uint64_t *step, int *any_step)
{
    const char *v = getenv("HORA_CKPT_CRASH");
    *any_step = 1;
    if (!v || !*v) return CRASH_NONE;
    static const char *const names[] = {"", "before-temp", "mid-data", "before-latest", "after-latest"};
    size_t len = strcspn(v, "@");
    for (int i = 1; i < 5; i++) {
        if (strlen(names[i]) != len || strncmp(v, names[i], len) != 0) continue;
        if (v[len] == '@') {
            char *end;
            *step = strtoull(v + len + 1, &end, 10);
            if (*end) break;
            *any_step = 0;
        }
        return (crash_point_t)i;
    }
    fprintf(stderr,
            "hora-train: HORA_CKPT_CRASH=%s: not before-temp, mid-data, before-latest or after-latest "
            "(optionally @STEP); ignored\n",
            v);
    return CRASH_NONE;
}

static void crash_if(const tr_ckpt_writer_t *w, crash_point_t at);

struct tr_ckpt_writer {
    char dir[4096];
    int keep;
    crash_point_t crash;
    uint64_t crash_step; /* with crash_any_step 0: only that step's checkpoint */
    int crash_any_step;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int pending; /* a snapshot is waiting or being written */
    int quit;
    hora_status_t status;           /* of the last write */
    char err[STATUS_MESSAGE_BYTES]; /* the writer thread's message of the last write, for the caller's thread */
    /* the snapshot */
    float *params, *momentum, *stats;
    size_t params_count, stats_count;
    char *model_text, *state_text;
    uint64_t step;
    double stall_s, write_s;
    uint64_t bytes;
};

static void crash_if(const tr_ckpt_writer_t *w, crash_point_t at)
{
    if (w->crash == at && (w->crash_any_step || w->crash_step == w->step)) {
        fprintf(stderr, "hora-train: HORA_CKPT_CRASH: killing myself at step %" PRIu64 "'s checkpoint\n", w->step);
        fflush(stderr);
        raise(SIGKILL);
    }
}

static hora_status_t fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return status_set(HORA_ERR_SYSTEM, "checkpoint directory %s: fsync: %s", dir, strerror(e));
    }
    close(fd);
    return HORA_OK;
}

/* Write data to dir/name through a temp file, fsync, rename, fsync dir. */
static hora_status_t write_atomic(tr_ckpt_writer_t *w, const char *name, tr_ckpt_section_t *sections, int count,
                                  const char *text, crash_point_t mid)
{
    char tmp[4300], final[4200];
    snprintf(final, sizeof(final), "%s/%s", w->dir, name);
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", final, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return status_set(HORA_ERR_SYSTEM, "checkpoint %s: cannot create: %s", tmp, strerror(errno));
    hora_status_t status = HORA_OK;
    if (sections) {
        status = tr_ckpt_write_fd(fd, final, sections, count);
    } else {
        for (size_t left = strlen(text); left > 0 && status == HORA_OK;) {
            ssize_t got = write(fd, text, left);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0)
                status = status_set(HORA_ERR_SYSTEM, "checkpoint %s: write: %s", tmp,
                                    got < 0 ? strerror(errno) : "nothing written");
            else {
                text += got;
                left -= (size_t)got;
            }
        }
    }
    if (status == HORA_OK && mid == CRASH_MID_DATA && w->crash == CRASH_MID_DATA &&
        (w->crash_any_step || w->crash_step == w->step)) {
        off_t size = lseek(fd, 0, SEEK_END);
        if (ftruncate(fd, size / 2) == 0) fsync(fd);
        crash_if(w, CRASH_MID_DATA);
    }
    if (status == HORA_OK && fsync(fd) != 0)
        status = status_set(HORA_ERR_SYSTEM, "checkpoint %s: fsync: %s", tmp, strerror(errno));
    if (close(fd) != 0 && status == HORA_OK)
        status = status_set(HORA_ERR_SYSTEM, "checkpoint %s: close: %s", tmp, strerror(errno));
    if (status == HORA_OK && rename(tmp, final) != 0)
        status = status_set(HORA_ERR_SYSTEM, "checkpoint %s: rename to %s: %s", tmp, final, strerror(errno));
    if (status != HORA_OK) {
        unlink(tmp);
        return status;
    }
    return fsync_dir(w->dir);
}

/* Remove the oldest checkpoints beyond keep (never the newest). */
static void prune(tr_ckpt_writer_t *w)
{
    ckpt_entry_t *e;
    int n;
    if (scan_dir(w->dir, &e, &n) != HORA_OK) return;
    for (int i = w->keep > 0 ? w->keep : 1; i < n; i++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", w->dir, e[i].name);
        if (unlink(path) != 0)
            fprintf(stderr, "hora-train: cannot remove old checkpoint %s: %s\n", path, strerror(errno));
    }
    free(e);
}

static hora_status_t write_snapshot(tr_ckpt_writer_t *w, uint64_t *bytes)
{
    char name[64];
    snprintf(name, sizeof(name), "ckpt-%010" PRIu64 ".hckpt", w->step);
    tr_ckpt_section_t s[5] = {
        {.name = "model", .data = w->model_text, .bytes = strlen(w->model_text)},
        {.name = "run_state", .data = w->state_text, .bytes = strlen(w->state_text)},
        {.name = "params", .data = w->params, .bytes = w->params_count * sizeof(float)},
        {.name = "momentum", .data = w->momentum, .bytes = w->params_count * sizeof(float)},
        {.name = "bn_stats", .data = w->stats, .bytes = w->stats_count * sizeof(float)},
    };
    crash_if(w, CRASH_BEFORE_TEMP);
    hora_status_t status = write_atomic(w, name, s, 5, NULL, CRASH_MID_DATA);
    if (status != HORA_OK) return status;
    crash_if(w, CRASH_BEFORE_LATEST);
    char line[80];
    snprintf(line, sizeof(line), "%s\n", name);
    status = write_atomic(w, TR_CKPT_LATEST, NULL, 0, line, CRASH_NONE);
    if (status != HORA_OK) return status;
    crash_if(w, CRASH_AFTER_LATEST);
    prune(w);
    *bytes = 0;
    for (int i = 0; i < 5; i++) *bytes += s[i].bytes;
    return HORA_OK;
}

static void *writer_main(void *arg)
{
    tr_ckpt_writer_t *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->pending && !w->quit) pthread_cond_wait(&w->cond, &w->lock);
        if (!w->pending) break;
        pthread_mutex_unlock(&w->lock);
        double t0 = tr_now_s();
        uint64_t bytes = 0;
        hora_status_t status = write_snapshot(w, &bytes);
        double t1 = tr_now_s();
        pthread_mutex_lock(&w->lock);
        w->write_s = t1 - t0;
        w->bytes = bytes;
        w->status = status;
        if (status != HORA_OK) snprintf(w->err, sizeof(w->err), "%s", status_message());
        w->pending = 0;
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* mkdir -p. */
static hora_status_t make_dirs(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s", dir);
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(path, 0755) != 0 && errno != EEXIST)
                return status_set(HORA_ERR_SYSTEM, "checkpoint directory %s: cannot create %s: %s", dir, path,
                                  strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return status_set(HORA_ERR_SYSTEM, "checkpoint directory %s: not a directory", dir);
    return HORA_OK;
}

hora_status_t tr_ckpt_writer_open(const char *dir, int keep, tr_ckpt_writer_t **out)
{
    *out = NULL;
    if (strlen(dir) >= 4000) return status_set(HORA_ERR_INVALID_ARG, "checkpoint directory name too long");
    hora_status_t status = make_dirs(dir);
    if (status != HORA_OK) return status;
    DIR *dp = opendir(dir);
    if (!dp) return status_set(HORA_ERR_SYSTEM, "checkpoint directory %s: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (!is_temp_name(de->d_name)) continue;
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (unlink(path) == 0) fprintf(stderr, "hora-train: removed %s, left by an interrupted checkpoint\n", path);
    }
    closedir(dp);
    tr_ckpt_writer_t *w = calloc(1, sizeof(*w));
    if (!w) return status_set(HORA_ERR_NO_MEMORY, "out of memory");
    snprintf(w->dir, sizeof(w->dir), "%s", dir);
    w->keep = keep;
    w->crash = crash_point_from_env(&w->crash_step, &w->crash_any_step);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return status_set(HORA_ERR_SYSTEM, "cannot start the checkpoint writer thread");
    }
    *out = w;
    return HORA_OK;
}

/* Wait for the write in flight (lock held). */
static hora_status_t wait_locked(tr_ckpt_writer_t *w)
{
    while (w->pending) pthread_cond_wait(&w->cond, &w->lock);
    if (w->status != HORA_OK) status_set(w->status, "%s", w->err);
    return w->status;
}

hora_status_t tr_ckpt_writer_wait(tr_ckpt_writer_t *w)
{
    pthread_mutex_lock(&w->lock);
    hora_status_t status = wait_locked(w);
    pthread_mutex_unlock(&w->lock);
    return status;
}

static hora_status_t reserve_arena(const tr_model_t *m, tr_arena_t arena, float **buf, size_t *have)
{
    size_t count = tr_tensor_count(tr_model_arena(m, arena));
    if (count == *have && *buf) return HORA_OK;
    float *b = realloc(*buf, (count ? count : 1) * sizeof(float));
    if (!b) return HORA_ERR_NO_MEMORY;
    memset(b, 0, (count ? count : 1) * sizeof(float)); /* fault the pages in now, not during a save */
    *buf = b;
    *have = count;
    return HORA_OK;
}

static hora_status_t snapshot_arena(const tr_model_t *m, tr_arena_t arena, float **buf, size_t *have)
{
    hora_status_t status = reserve_arena(m, arena, buf, have);
    const tr_tensor_t *a = tr_model_arena(m, arena);
    if (status != HORA_OK || *have == 0) return status;
    tr_backend_t *backend = tr_model_backend(m);
    return backend->ops->download(backend, a, *buf);
}

hora_status_t tr_ckpt_writer_reserve(tr_ckpt_writer_t *w, const tr_model_t *m)
{
    pthread_mutex_lock(&w->lock);
    while (w->pending) pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    size_t momentum_count = w->params_count;
    hora_status_t status = reserve_arena(m, TR_ARENA_PARAMS, &w->params, &w->params_count);
    if (status == HORA_OK) status = reserve_arena(m, TR_ARENA_MOMENTUM, &w->momentum, &momentum_count);
    if (status == HORA_OK) status = reserve_arena(m, TR_ARENA_STATS, &w->stats, &w->stats_count);
    return status;
}

hora_status_t tr_ckpt_writer_save(tr_ckpt_writer_t *w, const tr_model_t *m, const tr_run_state_t *state,
                                  const tr_ckpt_run_info_t *info)
{
    double t0 = tr_now_s();
    pthread_mutex_lock(&w->lock);
    hora_status_t status = wait_locked(w);
    pthread_mutex_unlock(&w->lock);
    if (status != HORA_OK) return status;
    /* The thread is idle: the snapshot is ours to rewrite. */
    size_t momentum_count = w->params_count;
    status = snapshot_arena(m, TR_ARENA_PARAMS, &w->params, &w->params_count);
    if (status == HORA_OK) status = snapshot_arena(m, TR_ARENA_MOMENTUM, &w->momentum, &momentum_count);
    if (status == HORA_OK) status = snapshot_arena(m, TR_ARENA_STATS, &w->stats, &w->stats_count);
    free(w->model_text);
    free(w->state_text);
    w->model_text = tr_ckpt_describe(m, info);
    w->state_text = tr_ckpt_state_text(state, info);
    if (status == HORA_OK && (!w->model_text || !w->state_text)) status = HORA_ERR_NO_MEMORY;
    if (status != HORA_OK)
        return status_set(status, "checkpoint at step %" PRIu64 ": taking the snapshot failed: %s", state->step,
                          hora_status_string(status));
    w->step = state->step;
    pthread_mutex_lock(&w->lock);
    w->pending = 1;
    w->stall_s = tr_now_s() - t0;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    return HORA_OK;
}

hora_status_t tr_ckpt_commit(tr_ckpt_data_t *c, const tr_model_t *m, const tr_run_state_t *state,
                             const tr_ckpt_run_info_t *info)
{
    size_t momentum_count = c->params_count;
    hora_status_t status = snapshot_arena(m, TR_ARENA_PARAMS, &c->params, &c->params_count);
    if (status == HORA_OK) status = snapshot_arena(m, TR_ARENA_MOMENTUM, &c->momentum, &momentum_count);
    if (status == HORA_OK) status = snapshot_arena(m, TR_ARENA_STATS, &c->stats, &c->stats_count);
    if (status != HORA_OK) {
        tr_ckpt_data_free(c); /* a partial commit is none */
        return status_set(status, "commit at step %" PRIu64 ": copying the arenas failed: %s", state->step,
                          hora_status_string(status));
    }
    c->state = *state;
    c->info = *info;
    return HORA_OK;
}

hora_status_t tr_ckpt_commit_owner(const tr_ckpt_data_t *c, int *root)
{
    /* The highest step wins, then the lowest rank: (step + 1) above the
     * rank's complement in one MAX; 0 from a rank without a commit. */
    const int rank_bits = 24;
    const int64_t rank_mask = ((int64_t)1 << rank_bits) - 1;
    int64_t key = c->params ? ((int64_t)(c->state.step + 1) << rank_bits) | (rank_mask - hora_rank()) : 0;
    hora_status_t status = hora_allreduce(&key, &key, 1, HORA_DTYPE_I64, HORA_OP_MAX);
    if (status != HORA_OK) return status;
    *root = key ? (int)(rank_mask - (key & rank_mask)) : -1;
    return HORA_OK;
}

hora_status_t tr_ckpt_commit_share(const tr_ckpt_data_t *c, int root, tr_run_state_t *state, tr_ckpt_run_info_t *info)
{
    int64_t world[3] = {c->info.world_size, c->info.batch, (int64_t)c->info.steps_per_epoch};
    tr_run_state_t s = c->state;
    hora_status_t status = hora_broadcast(&s, sizeof(s), HORA_DTYPE_U8, root);
    if (status == HORA_OK) status = hora_broadcast(world, 3, HORA_DTYPE_I64, root);
    if (status != HORA_OK) return status;
    *state = s;
    info->world_size = (int)world[0];
    info->batch = (int)world[1];
    info->steps_per_epoch = (uint64_t)world[2];
    return HORA_OK;
}

void tr_ckpt_writer_times(const tr_ckpt_writer_t *w, double *stall_s, double *write_s, uint64_t *bytes)
{
    tr_ckpt_writer_t *mw = (tr_ckpt_writer_t *)w;
    pthread_mutex_lock(&mw->lock);
    *stall_s = w->stall_s;
    *write_s = w->write_s;
    *bytes = w->bytes;
    pthread_mutex_unlock(&mw->lock);
}

hora_status_t tr_ckpt_writer_close(tr_ckpt_writer_t *w)
{
    if (!w) return HORA_OK;
    pthread_mutex_lock(&w->lock);
    hora_status_t status = wait_locked(w);
    w->quit = 1;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w->params);
    free(w->momentum);
    free(w->stats);
    free(w->model_text);
    free(w->state_text);
    free(w);
    return status;
}
