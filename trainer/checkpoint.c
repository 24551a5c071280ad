/*
 * checkpoint.c - hora-train's checkpoints (checkpoint.h): the description
 * and run-state texts, loading and checking a file against this run, and
 * the writer thread with its atomic sequence.
 */
#define _GNU_SOURCE
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_desc.h"
#include "ckpt_file.h"
#include "train.h"

/* The f32 sections are the arenas' bytes as they are: little-endian, as
 * CHECKPOINT.md says, only on a little-endian host. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checkpoints store host floats as little-endian");

__attribute__((format(printf, 4, 5))) static hora_status_t ck_fail(hora_status_t status, char *err, size_t n,
                                                                   const char *fmt, ...)
{
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* ---- texts ---- */

typedef struct {
    char *buf;
    size_t len, cap;
    int oom;
} text_t;

__attribute__((format(printf, 2, 3))) static void tx_printf(text_t *t, const char *fmt, ...)
{
    if (t->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->oom = 1;
            return;
        }
        if (t->buf && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 4096;
        while (cap < t->len + (size_t)n + 1)
            cap *= 2;
        char *b = realloc(t->buf, cap);
        if (!b) {
            t->oom = 1;
            return;
        }
        t->buf = b;
        t->cap = cap;
    }
}

static char *tx_take(text_t *t)
{
    if (t->oom || !t->buf) {
        free(t->buf);
        return NULL;
    }
    return t->buf;
}

char *tr_ckpt_describe(const tr_model_t *model, const tr_ckpt_run_info_t *info)
{
    const tr_model_spec_t *s = tr_model_spec(model);
    text_t t = {0};
    tx_printf(&t, "format hora-model 1\narch %s\nstem %s\nblock %s\nblocks", info->arch, tr_ckpt_stem_name(s->stem),
              tr_ckpt_block_name(s->block));
    for (int i = 0; i < s->stage_count; i++)
        tx_printf(&t, " %d", s->blocks[i]);
    tx_printf(&t, "\nwidth %d\ninput %d %d %d\nclasses %d\ncompute_dtype %s\ngrad_dtype %s\n", s->base_width,
              s->in_channels, s->height, s->width, s->classes, tr_dtype_name(s->compute_dtype),
              tr_dtype_name(s->grad_dtype));
    tx_printf(&t, "bn_epsilon %.9g\nbn_momentum %.9g\nzero_init_last_bn %d\nworld_size %d\nbatch %d\n", s->bn_epsilon,
              s->bn_momentum, s->zero_init_last_bn, info->world_size, info->batch);
    tx_printf(&t, "params_count %zu\nstats_count %zu\n", tr_tensor_count(tr_model_arena(model, TR_ARENA_PARAMS)),
              tr_tensor_count(tr_model_arena(model, TR_ARENA_STATS)));
    for (int i = 0; i < tr_model_param_count(model); i++) {
        const tr_param_t *p = tr_model_param(model, i);
        tx_printf(&t, "param %s %s %zu %zu", p->name, tr_ckpt_param_kind_name(p->kind), p->offset, p->count);
        for (int d = 0; d < p->ndim; d++)
            tx_printf(&t, " %d", p->dims[d]);
        tx_printf(&t, "\n");
    }
    for (int i = 0; i < tr_model_bn_count(model); i++) {
        const tr_bn_stats_t *b = tr_model_bn(model, i);
        tx_printf(&t, "bn %s %d %zu\n", b->name, b->channels, b->offset);
    }
    return tx_take(&t);
}

char *tr_ckpt_state_text(const tr_run_state_t *s, const tr_ckpt_run_info_t *info)
{
    text_t t = {0};
    tx_printf(&t, "format hora-run-state 1\nseed %" PRIu64 "\ndata_seed %" PRIu64 "\nepoch %" PRIu64
              "\nstep_in_epoch %" PRIu64 "\nepoch_sample_offset %" PRIu64 "\nstep %" PRIu64 "\nimages %" PRIu64 "\n",
              s->seed, s->data_seed, s->epoch, s->step_in_epoch, s->epoch_sample_offset, s->step, s->images);
    tx_printf(&t, "steps_per_epoch %" PRIu64 "\nworld_size %d\nbatch %d\n", info->steps_per_epoch, info->world_size,
              info->batch);
    tx_printf(&t, "overlap_mode %d\noverlap_probe_step %d\noverlap_probe_s %a %a\n", s->overlap.mode,
              s->overlap.probe_step, s->overlap.probe_s[0], s->overlap.probe_s[1]);
    tx_printf(&t, "loss_scale %a\nloss_scale_good_steps %" PRIu64 "\nloss_scale_skipped_steps %" PRIu64
              "\nloss_scale_consecutive_skips %" PRIu64 "\n", s->loss_scale.scale, s->loss_scale.good_steps,
              s->loss_scale.skipped_steps, s->loss_scale.consecutive_skips);
    return tx_take(&t);
}

/* run_state's value of key as a number (the whole value, or its word-th
 * word); 0 on success. */
static int state_word(const char *text, const char *key, int word, char *buf, size_t n)
{
    size_t len;
    const char *v = tr_ckpt_text_value(text, key, &len);
    for (int w = 0; v && w < word; w++) {
        const char *sp = memchr(v, ' ', len);
        if (!sp)
            return -1;
        len -= (size_t)(sp + 1 - v);
        v = sp + 1;
    }
    if (!v)
        return -1;
    const char *sp = memchr(v, ' ', len);
    size_t k = sp ? (size_t)(sp - v) : len;
    if (k == 0 || k >= n)
        return -1;
    memcpy(buf, v, k);
    buf[k] = 0;
    return 0;
}

static int state_int(const char *text, const char *key, int *out)
{
    char buf[32], *end;
    if (state_word(text, key, 0, buf, sizeof(buf)))
        return -1;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (*end || errno || v < INT32_MIN || v > INT32_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

static int state_double(const char *text, const char *key, int word, double *out)
{
    char buf[64], *end;
    if (state_word(text, key, word, buf, sizeof(buf)))
        return -1;
    double v = strtod(buf, &end);
    if (*end)
        return -1;
    *out = v;
    return 0;
}

hora_status_t tr_ckpt_state_parse(const char *text, tr_run_state_t *s, tr_ckpt_run_info_t *info, char *err, size_t n)
{
    tr_run_state_t st = {0};
    tr_ckpt_run_info_t in = {0};
    if (strncmp(text, "format hora-run-state 1\n", 24) != 0)
        return ck_fail(HORA_ERR_CORRUPT, err, n, "run_state: not 'format hora-run-state 1'");
    const struct {
        const char *key;
        uint64_t *field;
    } u64s[] = {{"seed", &st.seed}, {"data_seed", &st.data_seed}, {"epoch", &st.epoch},
                {"step_in_epoch", &st.step_in_epoch}, {"epoch_sample_offset", &st.epoch_sample_offset},
                {"step", &st.step}, {"images", &st.images}, {"steps_per_epoch", &in.steps_per_epoch},
                {"loss_scale_good_steps", &st.loss_scale.good_steps},
                {"loss_scale_skipped_steps", &st.loss_scale.skipped_steps},
                {"loss_scale_consecutive_skips", &st.loss_scale.consecutive_skips}};
    for (size_t i = 0; i < sizeof(u64s) / sizeof(u64s[0]); i++)
        if (tr_ckpt_text_u64(text, u64s[i].key, u64s[i].field))
            return ck_fail(HORA_ERR_CORRUPT, err, n, "run_state: '%s' is missing or not a number", u64s[i].key);
    const struct {
        const char *key;
        int *field;
    } ints[] = {{"world_size", &in.world_size}, {"batch", &in.batch}, {"overlap_mode", &st.overlap.mode},
                {"overlap_probe_step", &st.overlap.probe_step}};
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
        if (state_int(text, ints[i].key, ints[i].field))
            return ck_fail(HORA_ERR_CORRUPT, err, n, "run_state: '%s' is missing or not an integer", ints[i].key);
    if (state_double(text, "overlap_probe_s", 0, &st.overlap.probe_s[0]) ||
        state_double(text, "overlap_probe_s", 1, &st.overlap.probe_s[1]) ||
        state_double(text, "loss_scale", 0, &st.loss_scale.scale))
        return ck_fail(HORA_ERR_CORRUPT, err, n, "run_state: 'overlap_probe_s' or 'loss_scale' is missing or malformed");
    if (in.world_size < 1 || in.batch < 1 || st.overlap.mode < -1 || st.overlap.mode > 1 || !(st.loss_scale.scale > 0))
        return ck_fail(HORA_ERR_CORRUPT, err, n, "run_state: world_size %d, batch %d, overlap_mode %d or loss_scale %g "
                       "out of range", in.world_size, in.batch, st.overlap.mode, st.loss_scale.scale);
    *s = st;
    if (info)
        *info = in;
    return HORA_OK;
}

/* ---- loading ---- */

void tr_ckpt_data_free(tr_ckpt_data_t *d)
{
    free(d->model_text);
    free(d->state_text);
    free(d->params);
    free(d->momentum);
    free(d->stats);
    tr_ckpt_desc_free(&d->desc);
    memset(d, 0, sizeof(*d));
}

static hora_status_t read_section(const tr_ckpt_file_t *f, const char *name, size_t want_bytes, int check_size,
                                  void **out, char *err, size_t n)
{
    const tr_ckpt_section_t *s = tr_ckpt_find(f, name);
    if (!s)
        return ck_fail(HORA_ERR_CORRUPT, err, n, "%s: no section '%s'", f->path, name);
    if (check_size && s->bytes != want_bytes)
        return ck_fail(HORA_ERR_CORRUPT, err, n, "%s: section '%s' at offset %" PRIu64 ": %" PRIu64
                       " bytes, the model section says %zu", f->path, name, s->offset, s->bytes, want_bytes);
    return tr_ckpt_read_alloc(f, s, out, err, n);
}

hora_status_t tr_ckpt_load(const char *path, tr_ckpt_data_t *d, char *err, size_t n)
{
    memset(d, 0, sizeof(*d));
    snprintf(d->path, sizeof(d->path), "%s", path);
    tr_ckpt_file_t f;
    hora_status_t status = tr_ckpt_open(path, &f, err, n);
    if (status != HORA_OK)
        return status;
    status = read_section(&f, "model", 0, 0, (void **)&d->model_text, err, n);
    if (status == HORA_OK)
        status = read_section(&f, "run_state", 0, 0, (void **)&d->state_text, err, n);
    if (status == HORA_OK) {
        char where[4200];
        snprintf(where, sizeof(where), "%s: section 'model' (offset %" PRIu64 ")", path,
                 tr_ckpt_find(&f, "model")->offset);
        status = tr_ckpt_desc_parse(d->model_text, where, &d->desc, err, n);
        d->params_count = (size_t)d->desc.params_count;
        d->stats_count = (size_t)d->desc.stats_count;
    }
    if (status == HORA_OK) {
        char why[256];
        status = tr_ckpt_state_parse(d->state_text, &d->state, &d->info, why, sizeof(why));
        if (status != HORA_OK)
            ck_fail(status, err, n, "%s: section 'run_state' (offset %" PRIu64 "): %s", path,
                    tr_ckpt_find(&f, "run_state")->offset, why);
        d->info.arch = d->desc.arch;
    }
    if (status == HORA_OK)
        status = read_section(&f, "params", d->params_count * sizeof(float), 1, (void **)&d->params, err, n);
    if (status == HORA_OK)
        status = read_section(&f, "momentum", d->params_count * sizeof(float), 1, (void **)&d->momentum, err, n);
    if (status == HORA_OK)
        status = read_section(&f, "bn_stats", d->stats_count * sizeof(float), 1, (void **)&d->stats, err, n);
    tr_ckpt_close(&f);
    if (status != HORA_OK) {
        char keep[4096];
        snprintf(keep, sizeof(keep), "%s", d->path);
        tr_ckpt_data_free(d);
        snprintf(d->path, sizeof(d->path), "%s", keep);
    }
    return status;
}

hora_status_t tr_ckpt_spec(const tr_ckpt_data_t *d, tr_model_spec_t *spec, char *err, size_t n)
{
    tr_model_spec_t named;
    const tr_model_spec_t *s = &d->desc.spec;
    if (tr_model_spec_from_name(d->desc.arch, &named) != HORA_OK)
        return ck_fail(HORA_ERR_CORRUPT, err, n, "%s: unknown architecture '%s'", d->path, d->desc.arch);
    if (named.stem != s->stem || named.block != s->block || named.stage_count != s->stage_count ||
        memcmp(named.blocks, s->blocks, sizeof(named.blocks)) != 0)
        return ck_fail(HORA_ERR_CORRUPT, err, n, "%s: section 'model': its stem, block or stages are not those of %s",
                       d->path, d->desc.arch);
    *spec = *s;
    return HORA_OK;
}

/* Keys of the description a resume may change. */
static int compare_ignored(const char *line)
{
    static const char *const keys[] = {"world_size ", "batch ", "bn_epsilon ", "bn_momentum ", "zero_init_last_bn "};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strncmp(line, keys[i], strlen(keys[i])) == 0)
            return 1;
    return 0;
}

/* The next line of *p not ignored; its length in *len; NULL at the end. */
static const char *next_line(const char **p, size_t *len)
{
    while (**p) {
        const char *line = *p;
        size_t k = strcspn(line, "\n");
        *p = line + k + (line[k] == '\n');
        if (!compare_ignored(line)) {
            *len = k;
            return line;
        }
    }
    return NULL;
}

int tr_ckpt_compare(const tr_ckpt_data_t *d, const tr_model_t *model, const char *arch, char *why, size_t n)
{
    tr_ckpt_run_info_t info = {.arch = arch, .world_size = 1, .batch = 1};
    char *mine = tr_ckpt_describe(model, &info);
    if (!mine) {
        snprintf(why, n, "out of memory describing this run's model");
        return 1;
    }
    const char *a = d->model_text, *b = mine;
    int differ = 0;
    for (;;) {
        size_t la = 0, lb = 0;
        const char *x = next_line(&a, &la), *y = next_line(&b, &lb);
        if (!x && !y)
            break;
        if (x && y && la == lb && memcmp(x, y, la) == 0)
            continue;
        differ = 1;
        if (!x || !y) {
            snprintf(why, n, "%s '%.*s' is not in the %s", x ? "the checkpoint's" : "this run's", (int)(x ? la : lb),
                     x ? x : y, x ? "model this run builds" : "checkpoint");
            break;
        }
        size_t kx = strcspn(x, " \n"), ky = strcspn(y, " \n");
        if (kx == ky && memcmp(x, y, kx) == 0 && strncmp(x, "param ", 6) != 0 && strncmp(x, "bn ", 3) != 0)
            snprintf(why, n, "%.*s: checkpoint %.*s, this run %.*s", (int)kx, x, (int)(la - kx - 1), x + kx + 1,
                     (int)(lb - ky - 1), y + ky + 1);
        else
            snprintf(why, n, "checkpoint '%.*s', this run '%.*s'", (int)la, x, (int)lb, y);
        break;
    }
    free(mine);
    return differ;
}

static hora_status_t upload_arena(tr_model_t *m, tr_arena_t arena, const float *host, size_t count)
{
    tr_tensor_t t = *tr_model_arena(m, arena);
    if (tr_tensor_count(&t) != count)
        return HORA_ERR_INVALID_ARG;
    if (count == 0)
        return HORA_OK;
    tr_backend_t *b = tr_model_backend(m);
    return b->ops->upload(b, &t, host);
}

hora_status_t tr_ckpt_apply(const tr_ckpt_data_t *d, tr_model_t *m)
{
    hora_status_t status = upload_arena(m, TR_ARENA_PARAMS, d->params, d->params_count);
    if (status == HORA_OK)
        status = upload_arena(m, TR_ARENA_MOMENTUM, d->momentum, d->params_count);
    if (status == HORA_OK)
        status = upload_arena(m, TR_ARENA_STATS, d->stats, d->stats_count);
    if (status == HORA_OK)
        status = tr_model_sync_compute(m);
    return status;
}

hora_status_t tr_ckpt_build_model(const tr_ckpt_data_t *d, tr_backend_t *backend, int batch, tr_model_t **out,
                                  char *err, size_t n)
{
    *out = NULL;
    tr_model_spec_t spec;
    hora_status_t status = tr_ckpt_spec(d, &spec, err, n);
    if (status != HORA_OK)
        return status;
    tr_model_t *m;
    status = tr_model_init(backend, &spec, batch, 0, d->state.seed, &m);
    if (status != HORA_OK)
        return ck_fail(status, err, n, "%s: cannot build its %s: %s", d->path, d->desc.arch,
                       hora_status_string(status));
    char why[512];
    if (tr_ckpt_compare(d, m, d->desc.arch, why, sizeof(why))) {
        tr_model_free(m);
        return ck_fail(HORA_ERR_CORRUPT, err, n, "%s: its tensors do not match its own description: %s", d->path, why);
    }
    status = tr_ckpt_apply(d, m);
    if (status != HORA_OK) {
        tr_model_free(m);
        return ck_fail(status, err, n, "%s: loading the tensors failed: %s", d->path, hora_status_string(status));
    }
    *out = m;
    return HORA_OK;
}

/* ---- the directory ---- */

/* "ckpt-SSSSSSSSSS.hckpt": 1 and the step, else 0. */
static int ckpt_name_step(const char *name, uint64_t *step)
{
    unsigned long long s;
    int used = 0;
    if (strlen(name) != 5 + 10 + 6 || sscanf(name, "ckpt-%10llu.hckpt%n", &s, &used) != 1 || used != 21)
        return 0;
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
    if (!dp)
        return errno == ENOENT ? HORA_OK : HORA_ERR_SYSTEM;
    ckpt_entry_t *e = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        uint64_t step;
        if (!ckpt_name_step(de->d_name, &step))
            continue;
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
    if (!f)
        return;
    if (fgets(name, (int)n, f))
        name[strcspn(name, "\r\n")] = 0;
    else
        name[0] = 0;
    fclose(f);
    uint64_t step;
    if (!ckpt_name_step(name, &step))
        name[0] = 0;
}

hora_status_t tr_ckpt_list(const char *dir, char ***paths, int *count)
{
    *paths = NULL;
    *count = 0;
    ckpt_entry_t *e;
    int n;
    hora_status_t status = scan_dir(dir, &e, &n);
    if (status != HORA_OK || n == 0)
        return status;
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
    if (!p)
        return HORA_ERR_NO_MEMORY;
    *paths = p;
    *count = n;
    return HORA_OK;
}

void tr_ckpt_list_free(char **paths, int count)
{
    for (int i = 0; paths && i < count; i++)
        free(paths[i]);
    free(paths);
}

/* ---- the writer ---- */

/* Test hook (tests/train): HORA_CKPT_CRASH=POINT[@STEP] names a moment of
 * the write (of every checkpoint, or of the one of step STEP) at which the
 * writing process kills itself with SIGKILL, as a crash would. */
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
    if (!v || !*v)
        return CRASH_NONE;
    static const char *const names[] = {"", "before-temp", "mid-data", "before-latest", "after-latest"};
    size_t len = strcspn(v, "@");
    for (int i = 1; i < 5; i++) {
        if (strlen(names[i]) != len || strncmp(v, names[i], len) != 0)
            continue;
        if (v[len] == '@') {
            char *end;
            *step = strtoull(v + len + 1, &end, 10);
            if (*end)
                break;
            *any_step = 0;
        }
        return (crash_point_t)i;
    }
    fprintf(stderr, "hora-train: HORA_CKPT_CRASH=%s: not before-temp, mid-data, before-latest or after-latest "
            "(optionally @STEP); ignored\n", v);
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
    hora_status_t status; /* of the last write */
    char err[TR_CKPT_ERR_BYTES];
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

static hora_status_t fsync_dir(const char *dir, char *err, size_t n)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return ck_fail(HORA_ERR_SYSTEM, err, n, "checkpoint directory %s: fsync: %s", dir, strerror(e));
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
    if (fd < 0)
        return ck_fail(HORA_ERR_SYSTEM, w->err, sizeof(w->err), "checkpoint %s: cannot create: %s", tmp,
                       strerror(errno));
    hora_status_t status = HORA_OK;
    if (sections) {
        status = tr_ckpt_write_fd(fd, final, sections, count, w->err, sizeof(w->err));
    } else {
        for (size_t left = strlen(text); left > 0 && status == HORA_OK;) {
            ssize_t got = write(fd, text, left);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                status = ck_fail(HORA_ERR_SYSTEM, w->err, sizeof(w->err), "checkpoint %s: write: %s", tmp,
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
        if (ftruncate(fd, size / 2) == 0)
            fsync(fd);
        crash_if(w, CRASH_MID_DATA);
    }
    if (status == HORA_OK && fsync(fd) != 0)
        status = ck_fail(HORA_ERR_SYSTEM, w->err, sizeof(w->err), "checkpoint %s: fsync: %s", tmp, strerror(errno));
    if (close(fd) != 0 && status == HORA_OK)
        status = ck_fail(HORA_ERR_SYSTEM, w->err, sizeof(w->err), "checkpoint %s: close: %s", tmp, strerror(errno));
    if (status == HORA_OK && rename(tmp, final) != 0)
        status = ck_fail(HORA_ERR_SYSTEM, w->err, sizeof(w->err), "checkpoint %s: rename to %s: %s", tmp, final,
                         strerror(errno));
    if (status != HORA_OK) {
        unlink(tmp);
        return status;
    }
    return fsync_dir(w->dir, w->err, sizeof(w->err));
}

/* Remove the oldest checkpoints beyond keep (never the newest). */
static void prune(tr_ckpt_writer_t *w)
{
    ckpt_entry_t *e;
    int n;
    if (scan_dir(w->dir, &e, &n) != HORA_OK)
        return;
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
    if (status != HORA_OK)
        return status;
    crash_if(w, CRASH_BEFORE_LATEST);
    char line[80];
    snprintf(line, sizeof(line), "%s\n", name);
    status = write_atomic(w, TR_CKPT_LATEST, NULL, 0, line, CRASH_NONE);
    if (status != HORA_OK)
        return status;
    crash_if(w, CRASH_AFTER_LATEST);
    prune(w);
    *bytes = 0;
    for (int i = 0; i < 5; i++)
        *bytes += s[i].bytes;
    return HORA_OK;
}

static void *writer_main(void *arg)
{
    tr_ckpt_writer_t *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->pending && !w->quit)
            pthread_cond_wait(&w->cond, &w->lock);
        if (!w->pending)
            break;
        pthread_mutex_unlock(&w->lock);
        double t0 = tr_now_s();
        uint64_t bytes = 0;
        hora_status_t status = write_snapshot(w, &bytes);
        double t1 = tr_now_s();
        pthread_mutex_lock(&w->lock);
        w->write_s = t1 - t0;
        w->bytes = bytes;
        w->status = status;
        w->pending = 0;
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* mkdir -p. */
static hora_status_t make_dirs(const char *dir, char *err, size_t n)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s", dir);
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(path, 0755) != 0 && errno != EEXIST)
                return ck_fail(HORA_ERR_SYSTEM, err, n, "checkpoint directory %s: cannot create %s: %s", dir, path,
                               strerror(errno));
            *p = c;
            if (!c)
                break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return ck_fail(HORA_ERR_SYSTEM, err, n, "checkpoint directory %s: not a directory", dir);
    return HORA_OK;
}

hora_status_t tr_ckpt_writer_open(const char *dir, int keep, tr_ckpt_writer_t **out, char *err, size_t n)
{
    *out = NULL;
    if (strlen(dir) >= 4000)
        return ck_fail(HORA_ERR_INVALID_ARG, err, n, "checkpoint directory name too long");
    hora_status_t status = make_dirs(dir, err, n);
    if (status != HORA_OK)
        return status;
    DIR *dp = opendir(dir);
    if (!dp)
        return ck_fail(HORA_ERR_SYSTEM, err, n, "checkpoint directory %s: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (!is_temp_name(de->d_name))
            continue;
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (unlink(path) == 0)
            fprintf(stderr, "hora-train: removed %s, left by an interrupted checkpoint\n", path);
    }
    closedir(dp);
    tr_ckpt_writer_t *w = calloc(1, sizeof(*w));
    if (!w)
        return ck_fail(HORA_ERR_NO_MEMORY, err, n, "out of memory");
    snprintf(w->dir, sizeof(w->dir), "%s", dir);
    w->keep = keep;
    w->crash = crash_point_from_env(&w->crash_step, &w->crash_any_step);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return ck_fail(HORA_ERR_SYSTEM, err, n, "cannot start the checkpoint writer thread");
    }
    *out = w;
    return HORA_OK;
}

/* Wait for the write in flight (lock held). */
static hora_status_t wait_locked(tr_ckpt_writer_t *w, char *err, size_t n)
{
    while (w->pending)
        pthread_cond_wait(&w->cond, &w->lock);
    if (w->status != HORA_OK)
        ck_fail(w->status, err, n, "%s", w->err);
    return w->status;
}

hora_status_t tr_ckpt_writer_wait(tr_ckpt_writer_t *w, char *err, size_t n)
{
    pthread_mutex_lock(&w->lock);
    hora_status_t status = wait_locked(w, err, n);
    pthread_mutex_unlock(&w->lock);
    return status;
}

static hora_status_t reserve_arena(const tr_model_t *m, tr_arena_t arena, float **buf, size_t *have)
{
    size_t count = tr_tensor_count(tr_model_arena(m, arena));
    if (count == *have && *buf)
        return HORA_OK;
    float *b = realloc(*buf, (count ? count : 1) * sizeof(float));
    if (!b)
        return HORA_ERR_NO_MEMORY;
    memset(b, 0, (count ? count : 1) * sizeof(float)); /* fault the pages in now, not during a save */
    *buf = b;
    *have = count;
    return HORA_OK;
}

static hora_status_t snapshot_arena(const tr_model_t *m, tr_arena_t arena, float **buf, size_t *have)
{
    hora_status_t status = reserve_arena(m, arena, buf, have);
    const tr_tensor_t *a = tr_model_arena(m, arena);
    if (status != HORA_OK || *have == 0)
        return status;
    tr_backend_t *backend = tr_model_backend(m);
    return backend->ops->download(backend, a, *buf);
}

hora_status_t tr_ckpt_writer_reserve(tr_ckpt_writer_t *w, const tr_model_t *m)
{
    pthread_mutex_lock(&w->lock);
    while (w->pending)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    size_t momentum_count = w->params_count;
    hora_status_t status = reserve_arena(m, TR_ARENA_PARAMS, &w->params, &w->params_count);
    if (status == HORA_OK)
        status = reserve_arena(m, TR_ARENA_MOMENTUM, &w->momentum, &momentum_count);
    if (status == HORA_OK)
        status = reserve_arena(m, TR_ARENA_STATS, &w->stats, &w->stats_count);
    return status;
}

hora_status_t tr_ckpt_writer_save(tr_ckpt_writer_t *w, const tr_model_t *m, const tr_run_state_t *state,
                                  const tr_ckpt_run_info_t *info, char *err, size_t n)
{
    double t0 = tr_now_s();
    pthread_mutex_lock(&w->lock);
    hora_status_t status = wait_locked(w, err, n);
    pthread_mutex_unlock(&w->lock);
    if (status != HORA_OK)
        return status;
    /* The thread is idle: the snapshot is ours to rewrite. */
    size_t momentum_count = w->params_count;
    status = snapshot_arena(m, TR_ARENA_PARAMS, &w->params, &w->params_count);
    if (status == HORA_OK)
        status = snapshot_arena(m, TR_ARENA_MOMENTUM, &w->momentum, &momentum_count);
    if (status == HORA_OK)
        status = snapshot_arena(m, TR_ARENA_STATS, &w->stats, &w->stats_count);
    free(w->model_text);
    free(w->state_text);
    w->model_text = tr_ckpt_describe(m, info);
    w->state_text = tr_ckpt_state_text(state, info);
    if (status == HORA_OK && (!w->model_text || !w->state_text))
        status = HORA_ERR_NO_MEMORY;
    if (status != HORA_OK)
        return ck_fail(status, err, n, "checkpoint at step %" PRIu64 ": taking the snapshot failed: %s", state->step,
                       hora_status_string(status));
    w->step = state->step;
    pthread_mutex_lock(&w->lock);
    w->pending = 1;
    w->stall_s = tr_now_s() - t0;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
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

hora_status_t tr_ckpt_writer_close(tr_ckpt_writer_t *w, char *err, size_t n)
{
    if (!w)
        return HORA_OK;
    pthread_mutex_lock(&w->lock);
    hora_status_t status = wait_locked(w, err, n);
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
