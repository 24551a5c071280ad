/*
 * ckpt_desc.c - the model section parsed and checked (ckpt_desc.h; the
 * lines: CHECKPOINT.md). The text comes from a file whose CRC matched, but
 * a writer's bug must not become an out-of-bounds read in a tool, so every
 * number is range-checked and every tensor must lie inside its arena.
 */
#include "ckpt_desc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"

#define MAX_WORDS 12
#define MAX_DIM 1000000000 /* a dimension above this is a broken file, not a model */

static const char *const kind_names[] = {
    [TR_PARAM_CONV_WEIGHT] = "conv_weight",     [TR_PARAM_BN_GAMMA] = "bn_gamma",       [TR_PARAM_BN_BETA] = "bn_beta",
    [TR_PARAM_LINEAR_WEIGHT] = "linear_weight", [TR_PARAM_LINEAR_BIAS] = "linear_bias",
};
static const int kind_ndim[] = {
    [TR_PARAM_CONV_WEIGHT] = 4,   [TR_PARAM_BN_GAMMA] = 1,    [TR_PARAM_BN_BETA] = 1,
    [TR_PARAM_LINEAR_WEIGHT] = 2, [TR_PARAM_LINEAR_BIAS] = 1,
};
#define KIND_COUNT ((int)(sizeof(kind_names) / sizeof(kind_names[0])))

const char *tr_ckpt_param_kind_name(tr_param_kind_t kind)
{
    return (int)kind >= 0 && (int)kind < KIND_COUNT ? kind_names[kind] : "unknown";
}

int tr_ckpt_param_kind_parse(const char *name)
{
    for (int i = 0; i < KIND_COUNT; i++)
        if (strcmp(name, kind_names[i]) == 0) return i;
    return -1;
}

const char *tr_ckpt_stem_name(tr_stem_t stem) { return stem == TR_STEM_IMAGENET ? "imagenet" : "cifar"; }
const char *tr_ckpt_block_name(tr_block_kind_t block) { return block == TR_BLOCK_BOTTLENECK ? "bottleneck" : "basic"; }

/* ---- "key value" lines ---- */

const char *tr_ckpt_text_value(const char *text, const char *key, size_t *len)
{
    size_t key_len = strlen(key);
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t line_len = end ? (size_t)(end - line) : strlen(line);
        if (line_len > key_len && strncmp(line, key, key_len) == 0 && line[key_len] == ' ') {
            if (len) *len = line_len - key_len - 1;
            return line + key_len + 1;
        }
        line = end ? end + 1 : NULL;
    }
    return NULL;
}

/* A decimal number, digits only, that fits. */
static int parse_u64(const char *s, size_t len, uint64_t *v)
{
    if (len == 0 || len > 20) return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (x > (UINT64_MAX - d) / 10) return -1;
        x = x * 10 + d;
    }
    *v = x;
    return 0;
}

int tr_ckpt_text_u64(const char *text, const char *key, uint64_t *value)
{
    size_t len;
    const char *v = tr_ckpt_text_value(text, key, &len);
    return v ? parse_u64(v, len, value) : -1;
}

/* ---- the model section ---- */

typedef struct {
    const char *where;
    int line;
} parser_t;

/* "WHERE: line L: what" (the line left out before the first). */
__attribute__((format(printf, 2, 3))) static hora_status_t bad(parser_t *p, const char *fmt, ...)
{
    char what[STATUS_MESSAGE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (p->line > 0) return status_set(HORA_ERR_CORRUPT, "%s: line %d: %s", p->where, p->line, what);
    return status_set(HORA_ERR_CORRUPT, "%s: %s", p->where, what);
}

/* An int in [lo, hi]. */
static int word_int(const char *w, int lo, int hi, int *out)
{
    uint64_t v;
    if (parse_u64(w, strlen(w), &v) != 0 || v < (uint64_t)lo || v > (uint64_t)hi) return -1;
    *out = (int)v;
    return 0;
}

static int word_float(const char *w, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(w, &end);
    if (end == w || *end || errno == ERANGE) return -1;
    *out = v;
    return 0;
}

static int word_dtype(const char *w, tr_dtype_t *out)
{
    static const tr_dtype_t dtypes[] = {TR_DTYPE_F32, TR_DTYPE_BF16, TR_DTYPE_F16};
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (strcmp(w, tr_dtype_name(dtypes[i])) == 0) {
            *out = dtypes[i];
            return 0;
        }
    return -1;
}

enum {
    KEY_FORMAT,
    KEY_ARCH,
    KEY_STEM,
    KEY_BLOCK,
    KEY_BLOCKS,
    KEY_WIDTH,
    KEY_INPUT,
    KEY_CLASSES,
    KEY_COMPUTE,
    KEY_GRAD,
    KEY_EPS,
    KEY_MOMENTUM,
    KEY_ZERO_INIT,
    KEY_WORLD,
    KEY_BATCH,
    KEY_PARAMS_COUNT,
    KEY_STATS_COUNT,
    KEY_COUNT
};
static const char *const key_names[KEY_COUNT] = {
    "format",
    "arch",
    "stem",
    "block",
    "blocks",
    "width",
    "input",
    "classes",
    "compute_dtype",
    "grad_dtype",
    "bn_epsilon",
    "bn_momentum",
    "zero_init_last_bn",
    "world_size",
    "batch",
    "params_count",
    "stats_count",
};

/* One known key's words (w[0] is the key). */
static hora_status_t parse_key(parser_t *p, int key, char **w, int n, tr_ckpt_desc_t *d)
{
    tr_model_spec_t *s = &d->spec;
    uint64_t v;
    switch (key) {
    case KEY_FORMAT: {
        int version;
        if (n != 3 || strcmp(w[1], TR_CKPT_MODEL_FORMAT) != 0 || word_int(w[2], 0, 1000000, &version) != 0)
            return bad(p, "expected 'format %s %d'", TR_CKPT_MODEL_FORMAT, TR_CKPT_MODEL_FORMAT_VERSION);
        if (version != TR_CKPT_MODEL_FORMAT_VERSION)
            return bad(p, "model description format %d (this build reads %d)", version, TR_CKPT_MODEL_FORMAT_VERSION);
        return HORA_OK;
    }
    case KEY_ARCH:
        if (n != 2 || strlen(w[1]) >= sizeof(d->arch)) return bad(p, "expected 'arch NAME'");
        strcpy(d->arch, w[1]);
        return HORA_OK;
    case KEY_STEM:
        if (n == 2 && strcmp(w[1], "cifar") == 0)
            s->stem = TR_STEM_CIFAR;
        else if (n == 2 && strcmp(w[1], "imagenet") == 0)
            s->stem = TR_STEM_IMAGENET;
        else
            return bad(p, "expected 'stem cifar' or 'stem imagenet'");
        return HORA_OK;
    case KEY_BLOCK:
        if (n == 2 && strcmp(w[1], "basic") == 0)
            s->block = TR_BLOCK_BASIC;
        else if (n == 2 && strcmp(w[1], "bottleneck") == 0)
            s->block = TR_BLOCK_BOTTLENECK;
        else
            return bad(p, "expected 'block basic' or 'block bottleneck'");
        return HORA_OK;
    case KEY_BLOCKS:
        if (n < 2 || n > 1 + TR_MODEL_MAX_STAGES)
            return bad(p, "expected 'blocks N...' (1 to %d stages)", TR_MODEL_MAX_STAGES);
        s->stage_count = n - 1;
        for (int i = 1; i < n; i++)
            if (word_int(w[i], 1, 100000, &s->blocks[i - 1]) != 0) return bad(p, "bad block count '%s'", w[i]);
        return HORA_OK;
    case KEY_WIDTH:
        if (n != 2 || word_int(w[1], 1, 1000000, &s->base_width) != 0) return bad(p, "expected 'width N'");
        return HORA_OK;
    case KEY_INPUT:
        if (n != 4 || word_int(w[1], 1, MAX_DIM, &s->in_channels) != 0 || word_int(w[2], 1, MAX_DIM, &s->height) != 0 ||
            word_int(w[3], 1, MAX_DIM, &s->width) != 0)
            return bad(p, "expected 'input C H W'");
        return HORA_OK;
    case KEY_CLASSES:
        if (n != 2 || word_int(w[1], 1, MAX_DIM, &s->classes) != 0) return bad(p, "expected 'classes N'");
        return HORA_OK;
    case KEY_COMPUTE:
    case KEY_GRAD:
        if (n != 2 || word_dtype(w[1], key == KEY_COMPUTE ? &s->compute_dtype : &s->grad_dtype) != 0)
            return bad(p, "expected '%s f32|bf16|f16'", w[0]);
        return HORA_OK;
    case KEY_EPS:
    case KEY_MOMENTUM:
        if (n != 2 || word_float(w[1], key == KEY_EPS ? &s->bn_epsilon : &s->bn_momentum) != 0)
            return bad(p, "expected '%s NUMBER'", w[0]);
        return HORA_OK;
    case KEY_ZERO_INIT:
        if (n != 2 || word_int(w[1], 0, 1, &s->zero_init_last_bn) != 0)
            return bad(p, "expected 'zero_init_last_bn 0|1'");
        return HORA_OK;
    case KEY_WORLD:
    case KEY_BATCH:
        if (n != 2 || word_int(w[1], 1, 1 << 30, key == KEY_WORLD ? &d->world_size : &d->batch) != 0)
            return bad(p, "expected '%s N' (N >= 1)", w[0]);
        return HORA_OK;
    case KEY_PARAMS_COUNT:
    case KEY_STATS_COUNT:
        if (n != 2 || parse_u64(w[1], strlen(w[1]), &v) != 0 || v > (UINT64_MAX >> 8))
            return bad(p, "expected '%s N'", w[0]);
        *(key == KEY_PARAMS_COUNT ? &d->params_count : &d->stats_count) = v;
        return HORA_OK;
    }
    return HORA_OK;
}

/* Grow an array of item_bytes items to hold one more. */
static int grow(void **items, int count, int *capacity, size_t item_bytes)
{
    if (count < *capacity) return 0;
    int cap = *capacity ? 2 * *capacity : 64;
    void *n = realloc(*items, (size_t)cap * item_bytes);
    if (!n) return -1;
    *items = n;
    *capacity = cap;
    return 0;
}

static hora_status_t parse_param(parser_t *p, char **w, int n, tr_ckpt_desc_t *d, int *capacity)
{
    if (n < 6 || n > 9) return bad(p, "expected 'param NAME KIND OFFSET COUNT D0 [D1 D2 D3]'");
    if (grow((void **)&d->params, d->param_count, capacity, sizeof(*d->params)) != 0) return HORA_ERR_NO_MEMORY;
    tr_ckpt_param_desc_t *t = &d->params[d->param_count];
    memset(t, 0, sizeof(*t));
    if (strlen(w[1]) >= sizeof(t->name))
        return bad(p, "parameter name longer than %zu characters", sizeof(t->name) - 1);
    strcpy(t->name, w[1]);
    int kind = tr_ckpt_param_kind_parse(w[2]);
    if (kind < 0) return bad(p, "parameter '%s': unknown kind '%s'", t->name, w[2]);
    t->kind = (tr_param_kind_t)kind;
    if (parse_u64(w[3], strlen(w[3]), &t->offset) != 0 || parse_u64(w[4], strlen(w[4]), &t->count) != 0)
        return bad(p, "parameter '%s': bad offset or count", t->name);
    t->ndim = n - 5;
    if (t->ndim != kind_ndim[kind])
        return bad(p, "parameter '%s': %d dimensions, a %s has %d", t->name, t->ndim, w[2], kind_ndim[kind]);
    uint64_t product = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (word_int(w[5 + i], 1, MAX_DIM, &t->dims[i]) != 0)
            return bad(p, "parameter '%s': bad dimension '%s'", t->name, w[5 + i]);
        product *= (uint64_t)t->dims[i];
        if (product > d->params_count) break; /* caught below; stops the product from overflowing */
    }
    if (product != t->count)
        return bad(p, "parameter '%s': count %" PRIu64 " is not the product of its shape", t->name, t->count);
    uint64_t begin = d->param_count ? d->params[d->param_count - 1].offset + d->params[d->param_count - 1].count : 0;
    if (t->offset < begin || t->offset > d->params_count || t->count > d->params_count - t->offset)
        return bad(p,
                   "parameter '%s' at offset %" PRIu64 " (%" PRIu64 " elements): outside the params arena (%" PRIu64
                   " elements) or before the end of the previous parameter (%" PRIu64 ")",
                   t->name, t->offset, t->count, d->params_count, begin);
    for (int i = 0; i < d->param_count; i++)
        if (strcmp(d->params[i].name, t->name) == 0) return bad(p, "parameter '%s' a second time", t->name);
    d->param_count++;
    return HORA_OK;
}

static hora_status_t parse_bn(parser_t *p, char **w, int n, tr_ckpt_desc_t *d, int *capacity)
{
    if (n != 4) return bad(p, "expected 'bn NAME CHANNELS OFFSET'");
    if (grow((void **)&d->bns, d->bn_count, capacity, sizeof(*d->bns)) != 0) return HORA_ERR_NO_MEMORY;
    tr_ckpt_bn_desc_t *b = &d->bns[d->bn_count];
    memset(b, 0, sizeof(*b));
    if (strlen(w[1]) >= sizeof(b->name)) return bad(p, "BN name longer than %zu characters", sizeof(b->name) - 1);
    strcpy(b->name, w[1]);
    if (word_int(w[2], 1, MAX_DIM, &b->channels) != 0 || parse_u64(w[3], strlen(w[3]), &b->offset) != 0)
        return bad(p, "BN '%s': bad channels or offset", b->name);
    uint64_t begin = d->bn_count ? d->bns[d->bn_count - 1].offset + 2 * (uint64_t)d->bns[d->bn_count - 1].channels : 0;
    uint64_t span = 2 * (uint64_t)b->channels;
    if (b->offset < begin || b->offset > d->stats_count || span > d->stats_count - b->offset)
        return bad(p,
                   "BN '%s' at offset %" PRIu64 " (2 x %d elements): outside the stats arena (%" PRIu64
                   " elements) or before the end of the previous one (%" PRIu64 ")",
                   b->name, b->offset, b->channels, d->stats_count, begin);
    for (int i = 0; i < d->bn_count; i++)
        if (strcmp(d->bns[i].name, b->name) == 0) return bad(p, "BN '%s' a second time", b->name);
    d->bn_count++;
    return HORA_OK;
}

void tr_ckpt_desc_free(tr_ckpt_desc_t *desc)
{
    if (!desc) return;
    free(desc->params);
    free(desc->bns);
    memset(desc, 0, sizeof(*desc));
}

hora_status_t tr_ckpt_desc_parse(const char *text, const char *where, tr_ckpt_desc_t *desc)
{
    parser_t p = {.where = where ? where : "model section", .line = 0};
    tr_ckpt_desc_t d;
    memset(&d, 0, sizeof(d));
    int seen[KEY_COUNT] = {0};
    int param_capacity = 0, bn_capacity = 0;
    hora_status_t status = HORA_OK;
    char buf[1024];

    for (const char *line = text; *line && status == HORA_OK;) {
        p.line++;
        const char *end = strchr(line, '\n');
        if (!end) {
            status = bad(&p, "the last line does not end in a newline");
            break;
        }
        size_t len = (size_t)(end - line);
        if (len == 0) {
            status = bad(&p, "empty line");
            break;
        }
        /* A known key's line fits buf; a longer one is cut there, which
         * leaves it malformed (unknown keys are skipped whatever their length). */
        int cut = len >= sizeof(buf);
        size_t copy = cut ? sizeof(buf) - 1 : len;
        memcpy(buf, line, copy);
        buf[copy] = '\0';
        line = end + 1;

        /* Words separated by single spaces; a line that is not (or has too
         * many words) is an error for a key this reader knows, and ignored
         * like any unknown key's otherwise. */
        size_t key_len = strcspn(buf, " ");
        int key = -1;
        for (int k = 0; k < KEY_COUNT && key < 0; k++)
            if (strlen(key_names[k]) == key_len && strncmp(buf, key_names[k], key_len) == 0) key = k;
        int tensor_line =
            (key_len == 5 && strncmp(buf, "param", 5) == 0) || (key_len == 2 && strncmp(buf, "bn", 2) == 0);
        char *w[MAX_WORDS];
        int n = 0, well_formed = !cut;
        for (char *s = buf; well_formed;) {
            if (n == MAX_WORDS || *s == '\0' || *s == ' ') {
                well_formed = 0;
                break;
            }
            w[n++] = s;
            char *sp = strchr(s, ' ');
            if (!sp) break;
            *sp = '\0';
            s = sp + 1;
        }
        if (p.line == 1 && key != KEY_FORMAT) {
            status =
                bad(&p, "the first line must be 'format %s %d'", TR_CKPT_MODEL_FORMAT, TR_CKPT_MODEL_FORMAT_VERSION);
            break;
        }
        if (key < 0 && !tensor_line) continue; /* a key this reader does not know */
        if (!well_formed) {
            status = bad(&p, "malformed '%.*s' line (words separated by one space, at most %d)", (int)key_len, buf,
                         MAX_WORDS);
            break;
        }
        if (tensor_line) {
            /* params_count and stats_count bound the tensor lines: they come first. */
            if (!seen[KEY_PARAMS_COUNT] || !seen[KEY_STATS_COUNT]) {
                status = bad(&p, "a '%s' line before the params_count and stats_count lines", w[0]);
                break;
            }
            status = w[0][0] == 'p' ? parse_param(&p, w, n, &d, &param_capacity) : parse_bn(&p, w, n, &d, &bn_capacity);
            continue;
        }
        if (seen[key]) {
            status = bad(&p, "a second '%s' line", key_names[key]);
            break;
        }
        seen[key] = 1;
        status = parse_key(&p, key, w, n, &d);
    }
    p.line = 0;
    for (int k = 0; k < KEY_COUNT && status == HORA_OK; k++)
        if (!seen[k]) status = bad(&p, "no '%s' line", key_names[k]);
    if (status == HORA_OK && d.param_count == 0) status = bad(&p, "no 'param' lines");
    if (status != HORA_OK) {
        if (status == HORA_ERR_NO_MEMORY) status_set(status, "%s: out of memory", p.where);
        tr_ckpt_desc_free(&d);
        return status;
    }
    *desc = d;
    return HORA_OK;
}
