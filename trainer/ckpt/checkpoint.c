/*
 * checkpoint.c - hora-train's checkpoints (checkpoint.h): the description
 * and run-state texts, loading a file and checking it against this run,
 * applying it to a model. The directory and the writer thread are
 * ckpt_writer.c's.
 */
#define _GNU_SOURCE
#include "checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_desc.h"
#include "ckpt_file.h"

/* The f32 sections are the arenas' bytes as they are: little-endian, as
 * CHECKPOINT.md says, only on a little-endian host. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checkpoints store host floats as little-endian");

/* ---- texts ---- */

typedef struct {
    char *buf;
    size_t len, cap;
    int oom;
} text_t;

__attribute__((format(printf, 2, 3))) static void tx_printf(text_t *t, const char *fmt, ...)
{
    if (t->oom) return;
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
        while (cap < t->len + (size_t)n + 1) cap *= 2;
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
    for (int i = 0; i < s->stage_count; i++) tx_printf(&t, " %d", s->blocks[i]);
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
        for (int d = 0; d < p->ndim; d++) tx_printf(&t, " %d", p->dims[d]);
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
    tx_printf(&t,
              "format hora-run-state 1\nseed %" PRIu64 "\ndata_seed %" PRIu64 "\nepoch %" PRIu64
              "\nstep_in_epoch %" PRIu64 "\nepoch_sample_offset %" PRIu64 "\nstep %" PRIu64 "\nimages %" PRIu64 "\n",
              s->seed, s->data_seed, s->epoch, s->step_in_epoch, s->epoch_sample_offset, s->step, s->images);
    tx_printf(&t, "steps_per_epoch %" PRIu64 "\nworld_size %d\nbatch %d\n", info->steps_per_epoch, info->world_size,
              info->batch);
    tx_printf(&t, "overlap_mode %d\noverlap_probe_step %d\noverlap_probe_s %a %a\n", s->overlap.mode,
              s->overlap.probe_step, s->overlap.probe_s[0], s->overlap.probe_s[1]);
    tx_printf(&t,
              "loss_scale %a\nloss_scale_good_steps %" PRIu64 "\nloss_scale_skipped_steps %" PRIu64
              "\nloss_scale_consecutive_skips %" PRIu64 "\n",
              s->loss_scale.scale, s->loss_scale.good_steps, s->loss_scale.skipped_steps,
              s->loss_scale.consecutive_skips);
    static const char *const precisions[] = {"fp32", "bf16", "fp16"}; /* tr_precision_t */
    const int choice = s->precision.choice;
    tx_printf(&t, "precision %s\nprecision_measured %d\nprecision_probe_ms %a %a %a\n",
              choice >= 0 && choice < 3 ? precisions[choice] : "none", s->precision.measured, s->precision.probe_ms[0],
              s->precision.probe_ms[1], s->precision.probe_ms[2]);
    return tx_take(&t);
}

int tr_ckpt_state_key_is_measurement(const char *key, size_t len)
{
    /* The measured lines tr_ckpt_state_text writes; what they chose
     * (overlap_mode, precision) changes training and is state. */
    static const char *const keys[] = {"overlap_probe_s", "precision_measured", "precision_probe_ms"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strlen(keys[i]) == len && memcmp(key, keys[i], len) == 0) return 1;
    return 0;
}

/* run_state's value of key as a number (the whole value, or its word-th
 * word); 0 on success. */
static int state_word(const char *text, const char *key, int word, char *buf, size_t n)
{
    size_t len;
    const char *v = tr_ckpt_text_value(text, key, &len);
    for (int w = 0; v && w < word; w++) {
        const char *sp = memchr(v, ' ', len);
        if (!sp) return -1;
        len -= (size_t)(sp + 1 - v);
        v = sp + 1;
    }
    if (!v) return -1;
    const char *sp = memchr(v, ' ', len);
    size_t k = sp ? (size_t)(sp - v) : len;
    if (k == 0 || k >= n) return -1;
    memcpy(buf, v, k);
    buf[k] = 0;
    return 0;
}

static int state_int(const char *text, const char *key, int *out)
{
    char buf[32], *end;
    if (state_word(text, key, 0, buf, sizeof(buf))) return -1;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (*end || errno || v < INT32_MIN || v > INT32_MAX) return -1;
    *out = (int)v;
    return 0;
}

static int state_double(const char *text, const char *key, int word, double *out)
{
    char buf[64], *end;
    if (state_word(text, key, word, buf, sizeof(buf))) return -1;
    double v = strtod(buf, &end);
    if (*end) return -1;
    *out = v;
    return 0;
}

hora_status_t tr_ckpt_state_parse(const char *text, tr_run_state_t *s, tr_ckpt_run_info_t *info)
{
    tr_run_state_t st = {0};
    tr_ckpt_run_info_t in = {0};
    if (strncmp(text, "format hora-run-state 1\n", 24) != 0)
        return status_set(HORA_ERR_CORRUPT, "run_state: not 'format hora-run-state 1'");
    const struct {
        const char *key;
        uint64_t *field;
    } u64s[] = {{"seed", &st.seed},
                {"data_seed", &st.data_seed},
                {"epoch", &st.epoch},
                {"step_in_epoch", &st.step_in_epoch},
                {"epoch_sample_offset", &st.epoch_sample_offset},
                {"step", &st.step},
                {"images", &st.images},
                {"steps_per_epoch", &in.steps_per_epoch},
                {"loss_scale_good_steps", &st.loss_scale.good_steps},
                {"loss_scale_skipped_steps", &st.loss_scale.skipped_steps},
                {"loss_scale_consecutive_skips", &st.loss_scale.consecutive_skips}};
    for (size_t i = 0; i < sizeof(u64s) / sizeof(u64s[0]); i++)
        if (tr_ckpt_text_u64(text, u64s[i].key, u64s[i].field))
            return status_set(HORA_ERR_CORRUPT, "run_state: '%s' is missing or not a number", u64s[i].key);
    const struct {
        const char *key;
        int *field;
    } ints[] = {{"world_size", &in.world_size},
                {"batch", &in.batch},
                {"overlap_mode", &st.overlap.mode},
                {"overlap_probe_step", &st.overlap.probe_step}};
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
        if (state_int(text, ints[i].key, ints[i].field))
            return status_set(HORA_ERR_CORRUPT, "run_state: '%s' is missing or not an integer", ints[i].key);
    if (state_double(text, "overlap_probe_s", 0, &st.overlap.probe_s[0]) ||
        state_double(text, "overlap_probe_s", 1, &st.overlap.probe_s[1]) ||
        state_double(text, "loss_scale", 0, &st.loss_scale.scale))
        return status_set(HORA_ERR_CORRUPT, "run_state: 'overlap_probe_s' or 'loss_scale' is missing or malformed");
    /* The precision lines came later (--precision auto): a file without
     * them has choice -1, which tr_ckpt_load derives from the model
     * section's dtypes. */
    st.precision.choice = -1;
    size_t plen;
    const char *pv = tr_ckpt_text_value(text, "precision", &plen);
    if (pv) {
        static const char *const precisions[] = {"fp32", "bf16", "fp16", "none"};
        int found = -2;
        for (int i = 0; i < 4; i++)
            if (strlen(precisions[i]) == plen && strncmp(pv, precisions[i], plen) == 0) found = i < 3 ? i : -1;
        if (found == -2 || state_int(text, "precision_measured", &st.precision.measured) ||
            state_double(text, "precision_probe_ms", 0, &st.precision.probe_ms[0]) ||
            state_double(text, "precision_probe_ms", 1, &st.precision.probe_ms[1]) ||
            state_double(text, "precision_probe_ms", 2, &st.precision.probe_ms[2]))
            return status_set(HORA_ERR_CORRUPT, "run_state: 'precision' (fp32, bf16, fp16 or none), "
                                                "'precision_measured' or 'precision_probe_ms' is malformed");
        st.precision.choice = found;
    }
    if (in.world_size < 1 || in.batch < 1 || st.overlap.mode < -1 || st.overlap.mode > 1 || !(st.loss_scale.scale > 0))
        return status_set(HORA_ERR_CORRUPT,
                          "run_state: world_size %d, batch %d, overlap_mode %d or loss_scale %g "
                          "out of range",
                          in.world_size, in.batch, st.overlap.mode, st.loss_scale.scale);
    *s = st;
    if (info) *info = in;
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
                                  void **out)
{
    const tr_ckpt_section_t *s = tr_ckpt_expect(f, name, check_size ? want_bytes : TR_CKPT_ANY_BYTES);
    if (!s) return HORA_ERR_CORRUPT;
    return tr_ckpt_read_alloc(f, s, out);
}

hora_status_t tr_ckpt_load(const char *path, tr_ckpt_data_t *d)
{
    memset(d, 0, sizeof(*d));
    snprintf(d->path, sizeof(d->path), "%s", path);
    tr_ckpt_file_t f;
    hora_status_t status = tr_ckpt_open(path, &f);
    if (status != HORA_OK) return status;
    status = read_section(&f, "model", 0, 0, (void **)&d->model_text);
    if (status == HORA_OK) status = read_section(&f, "run_state", 0, 0, (void **)&d->state_text);
    if (status == HORA_OK) {
        char where[4200];
        snprintf(where, sizeof(where), "%s: section 'model': offset %" PRIu64, path, tr_ckpt_find(&f, "model")->offset);
        status = tr_ckpt_desc_parse(d->model_text, where, &d->desc);
        d->params_count = (size_t)d->desc.params_count;
        d->stats_count = (size_t)d->desc.stats_count;
    }
    if (status == HORA_OK) {
        status = tr_ckpt_state_parse(d->state_text, &d->state, &d->info);
        if (status != HORA_OK)
            status_at(status, STATUS_SECTION_AT(path, "run_state", tr_ckpt_find(&f, "run_state")->offset), "%s",
                      status_message());
        d->info.arch = d->desc.arch;
        if (status == HORA_OK && d->state.precision.choice < 0) {
            /* Written before the run state had its precision: what the
             * model section's dtypes say it computed in (fp16 where it
             * fell back to f32 compute with f16 gradients). */
            const tr_model_spec_t *s = &d->desc.spec;
            d->state.precision.choice = s->compute_dtype == TR_DTYPE_BF16  ? 1
                                        : s->compute_dtype == TR_DTYPE_F16 ? 2
                                        : s->grad_dtype == TR_DTYPE_F16    ? 2
                                                                           : 0;
        }
    }
    if (status == HORA_OK) status = read_section(&f, "params", d->params_count * sizeof(float), 1, (void **)&d->params);
    if (status == HORA_OK)
        status = read_section(&f, "momentum", d->params_count * sizeof(float), 1, (void **)&d->momentum);
    if (status == HORA_OK) status = read_section(&f, "bn_stats", d->stats_count * sizeof(float), 1, (void **)&d->stats);
    tr_ckpt_close(&f);
    if (status != HORA_OK) {
        char keep[4096];
        snprintf(keep, sizeof(keep), "%s", d->path);
        tr_ckpt_data_free(d);
        snprintf(d->path, sizeof(d->path), "%s", keep);
    }
    return status;
}

hora_status_t tr_ckpt_spec(const tr_ckpt_data_t *d, tr_model_spec_t *spec)
{
    tr_model_spec_t named;
    const tr_model_spec_t *s = &d->desc.spec;
    if (tr_model_spec_from_name(d->desc.arch, &named) != HORA_OK)
        return status_set(HORA_ERR_CORRUPT, "%s: unknown architecture '%s'", d->path, d->desc.arch);
    if (named.stem != s->stem || named.block != s->block || named.stage_count != s->stage_count ||
        memcmp(named.blocks, s->blocks, sizeof(named.blocks)) != 0)
        return status_set(HORA_ERR_CORRUPT, "%s: section 'model': its stem, block or stages are not those of %s",
                          d->path, d->desc.arch);
    *spec = *s;
    return HORA_OK;
}

/* Keys of the description a resume may change. */
static int compare_ignored(const char *line)
{
    static const char *const keys[] = {"world_size ", "batch ", "bn_epsilon ", "bn_momentum ", "zero_init_last_bn "};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strncmp(line, keys[i], strlen(keys[i])) == 0) return 1;
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

/* One side of a difference: the line's value after its key (all of it for
 * a tensor's line, whose key does not say which tensor). */
static void difference_side(const char *line, size_t len, char *out, size_t n)
{
    size_t k = strcspn(line, " \n");
    if (k > len) k = len;
    int tensor = (k == 5 && strncmp(line, "param", 5) == 0) || (k == 2 && strncmp(line, "bn", 2) == 0);
    if (!tensor && k < len) {
        line += k + 1;
        len -= k + 1;
    }
    snprintf(out, n, "%.*s", (int)len, line);
}

int tr_ckpt_compare(const tr_ckpt_data_t *d, const tr_model_t *model, const char *arch,
                    tr_ckpt_difference_t *difference)
{
    tr_ckpt_run_info_t info = {.arch = arch, .world_size = 1, .batch = 1};
    char *mine = tr_ckpt_describe(model, &info);
    if (!mine) {
        status_set(HORA_ERR_NO_MEMORY, "out of memory describing this run's model");
        return 1;
    }
    const char *a = d->model_text, *b = mine;
    int differ = 0;
    for (;;) {
        size_t la = 0, lb = 0;
        const char *x = next_line(&a, &la), *y = next_line(&b, &lb);
        if (!x && !y) break;
        if (x && y && la == lb && memcmp(x, y, la) == 0) continue;
        differ = 1;
        if (difference) {
            const char *line = x ? x : y;
            size_t k = strcspn(line, " \n");
            memset(difference, 0, sizeof(*difference));
            snprintf(difference->key, sizeof(difference->key), "%.*s", (int)k, line);
            if (x) difference_side(x, la, difference->checkpoint, sizeof(difference->checkpoint));
            if (y) difference_side(y, lb, difference->run, sizeof(difference->run));
        }
        if (!x || !y) {
            status_set(HORA_ERR_MISMATCH, "%s '%.*s' is not in the %s", x ? "the checkpoint's" : "this run's",
                       (int)(x ? la : lb), x ? x : y, x ? "model this run builds" : "checkpoint");
            break;
        }
        size_t kx = strcspn(x, " \n"), ky = strcspn(y, " \n");
        if (kx == ky && memcmp(x, y, kx) == 0 && strncmp(x, "param ", 6) != 0 && strncmp(x, "bn ", 3) != 0)
            status_set(HORA_ERR_MISMATCH, "%.*s: checkpoint %.*s, this run %.*s", (int)kx, x, (int)(la - kx - 1),
                       x + kx + 1, (int)(lb - ky - 1), y + ky + 1);
        else
            status_set(HORA_ERR_MISMATCH, "checkpoint '%.*s', this run '%.*s'", (int)la, x, (int)lb, y);
        break;
    }
    free(mine);
    return differ;
}

static hora_status_t upload_arena(tr_model_t *m, tr_arena_t arena, const float *host, size_t count)
{
    tr_tensor_t t = *tr_model_arena(m, arena);
    if (tr_tensor_count(&t) != count) return HORA_ERR_INVALID_ARG;
    if (count == 0) return HORA_OK;
    tr_backend_t *b = tr_model_backend(m);
    return b->ops->upload(b, &t, host);
}

hora_status_t tr_ckpt_apply(const tr_ckpt_data_t *d, tr_model_t *m)
{
    hora_status_t status = upload_arena(m, TR_ARENA_PARAMS, d->params, d->params_count);
    if (status == HORA_OK) status = upload_arena(m, TR_ARENA_MOMENTUM, d->momentum, d->params_count);
    if (status == HORA_OK) status = upload_arena(m, TR_ARENA_STATS, d->stats, d->stats_count);
    if (status == HORA_OK) status = tr_model_sync_compute(m);
    return status;
}

hora_status_t tr_ckpt_build_model(const tr_ckpt_data_t *d, tr_backend_t *backend, int batch, tr_model_t **out)
{
    *out = NULL;
    tr_model_spec_t spec;
    hora_status_t status = tr_ckpt_spec(d, &spec);
    if (status != HORA_OK) return status;
    tr_model_t *m;
    status = tr_model_init(backend, &spec, batch, 0, d->state.seed, &m);
    if (status != HORA_OK)
        return status_set(status, "%s: cannot build its %s: %s", d->path, d->desc.arch,
                          status_message()[0] ? status_message() : hora_status_string(status));
    if (tr_ckpt_compare(d, m, d->desc.arch, NULL)) {
        tr_model_free(m);
        return status_set(HORA_ERR_CORRUPT, "%s: its tensors do not match its own description: %s", d->path,
                          status_message());
    }
    status = tr_ckpt_apply(d, m);
    if (status != HORA_OK) {
        tr_model_free(m);
        return status_set(status, "%s: loading the tensors failed: %s", d->path, hora_status_string(status));
    }
    *out = m;
    return HORA_OK;
}
