/*
 * hora-ckpt - look into hora-train's checkpoints (trainer/ckpt/CHECKPOINT.md):
 *
 *   hora-ckpt info FILE                  the model, where the run stands, every section
 *   hora-ckpt verify FILE...             every CRC (header, table, sections), the padding,
 *                                        the model description and the tensor sections' sizes
 *   hora-ckpt diff A B                   per section: equal, or the first difference; the
 *                                        run state's measurements (timings) apart
 *   hora-ckpt export FILE --npz OUT [--momentum]
 *                                        a NumPy .npz with torchvision's names and shapes
 *   hora-ckpt logits FILE --input IN.npy --out OUT.npy [--threads N]
 *                                        inference on the cpu backend (running statistics)
 *
 * Exit status: 0 success (diff: equal, measurements aside); 1 a bad checkpoint or a failure
 * (diff: they differ); 2 bad usage (diff: any error).
 *
 * Built by the top-level meson.build (build/hora-ckpt). It reads files with
 * trainer/ckpt/ckpt_file.h and trainer/ckpt/ckpt_desc.h; logits builds the model with
 * trainer/ckpt/checkpoint.h (tr_ckpt_load, tr_ckpt_build_model).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "ckpt_desc.h"
#include "ckpt_file.h"
#include "npz.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: hora-ckpt COMMAND ...\n"
                 "  info FILE                          the model description, step and epoch, loss scale,\n"
                 "                                     every section (offset, bytes, CRC32C), tensor counts\n"
                 "  verify FILE...                     check every CRC (header and table, each section),\n"
                 "                                     the padding and the model description; exit 1 if bad\n"
                 "  diff A B                           per section 'equal' or its first difference (tensor\n"
                 "                                     and index, bit-exact); run_state's measurements\n"
                 "                                     (overlap_probe_s, precision_measured,\n"
                 "                                     precision_probe_ms) are not training state: last line\n"
                 "                                     'equal', 'equal (measurements differ: KEYS)' or\n"
                 "                                     'differ'; exit 0 equal (measurements aside), 1 differ,\n"
                 "                                     2 error\n"
                 "  export FILE --npz OUT [--momentum] every parameter under its torchvision name and shape,\n"
                 "                                     BN running_mean / running_var / num_batches_tracked\n"
                 "                                     (f32, int64), with --momentum also momentum.NAME:\n"
                 "                                     model.load_state_dict({k: torch.from_numpy(v) ...})\n"
                 "  logits FILE --input IN.npy --out OUT.npy [--threads N]\n"
                 "                                     the model's logits (inference, running statistics)\n"
                 "                                     for an NCHW float32 input, on the cpu backend\n"
                 "exit status: 0 ok, 1 bad checkpoint or failure, 2 bad usage\n");
}

/* ---- a checkpoint opened and its texts read ---- */

typedef struct {
    tr_ckpt_file_t file;
    char *model_text, *state_text; /* NULL when the section is missing */
    tr_ckpt_desc_t desc;
    int have_desc;
} ckpt_t;

static void ckpt_close(ckpt_t *c)
{
    tr_ckpt_close(&c->file);
    free(c->model_text);
    free(c->state_text);
    tr_ckpt_desc_free(&c->desc);
    memset(c, 0, sizeof(*c));
    c->file.fd = -1;
}

/* Open path, read its text sections; with need_desc the model section must
 * be there and parse. 0, or -1 with the message in status_message(). */
static int ckpt_open(const char *path, ckpt_t *c, int need_desc)
{
    memset(c, 0, sizeof(*c));
    if (tr_ckpt_open(path, &c->file) != HORA_OK) return -1;
    const tr_ckpt_section_t *m = tr_ckpt_find(&c->file, "model"), *s = tr_ckpt_find(&c->file, "run_state");
    if ((m && tr_ckpt_read_alloc(&c->file, m, (void **)&c->model_text) != HORA_OK) ||
        (s && tr_ckpt_read_alloc(&c->file, s, (void **)&c->state_text) != HORA_OK)) {
        ckpt_close(c);
        return -1;
    }
    if (c->model_text) {
        char where[4200];
        snprintf(where, sizeof(where), "%s: section 'model': offset %" PRIu64, path, m->offset);
        if (strlen(c->model_text) != m->bytes)
            status_set(HORA_ERR_CORRUPT, "%s: a NUL byte in the text", where);
        else if (tr_ckpt_desc_parse(c->model_text, where, &c->desc) == HORA_OK)
            c->have_desc = 1;
    } else {
        tr_ckpt_expect(&c->file, "model", TR_CKPT_ANY_BYTES);
    }
    if (need_desc && !c->have_desc) {
        ckpt_close(c);
        return -1;
    }
    return 0;
}

/* A tensor section read whole, its size checked against count floats. */
static float *read_floats(const ckpt_t *c, const char *name, uint64_t count)
{
    const tr_ckpt_section_t *s = tr_ckpt_expect(&c->file, name, count * sizeof(float));
    if (!s) return NULL;
    void *buf;
    if (tr_ckpt_read_alloc(&c->file, s, &buf) != HORA_OK) return NULL;
    return buf;
}

/* ---- info ---- */

static const char *state_word(const ckpt_t *c, const char *key, char *buf, size_t n)
{
    size_t len;
    const char *v = c->state_text ? tr_ckpt_text_value(c->state_text, key, &len) : NULL;
    if (!v) return "?";
    snprintf(buf, n, "%.*s", (int)len, v);
    return buf;
}

static int cmd_info(const char *path)
{
    ckpt_t c;
    if (ckpt_open(path, &c, 0) != 0) {
        fprintf(stderr, "hora-ckpt: %s\n", status_message());
        return 1;
    }
    printf("file        %s\n", path);
    printf("format      version %" PRIu32 ", %d sections, %" PRIu64 " bytes\n", c.file.version, c.file.section_count,
           c.file.file_bytes);
    if (c.have_desc) {
        const tr_ckpt_desc_t *d = &c.desc;
        const tr_model_spec_t *s = &d->spec;
        printf("arch        %s (stem %s, block %s, blocks", d->arch, tr_ckpt_stem_name(s->stem),
               tr_ckpt_block_name(s->block));
        for (int i = 0; i < s->stage_count; i++) printf(" %d", s->blocks[i]);
        printf(", width %d)\n", s->base_width);
        printf("input       %dx%dx%d (C x H x W), %d classes\n", s->in_channels, s->height, s->width, s->classes);
        printf("precision   compute %s, gradients %s\n", tr_dtype_name(s->compute_dtype), tr_dtype_name(s->grad_dtype));
        printf("run         world size %d, batch %d per rank (global %lld)\n", d->world_size, d->batch,
               (long long)d->world_size * d->batch);
        uint64_t stats = 0;
        for (int i = 0; i < d->bn_count; i++) stats += 2 * (uint64_t)d->bns[i].channels;
        printf("tensors     %d parameter tensors, %" PRIu64 " parameters; %d BN layers, %" PRIu64 " statistics\n",
               d->param_count, d->params_count, d->bn_count, stats);
    } else {
        printf("model       (unreadable: %s)\n", status_message());
    }
    if (c.state_text) {
        char a[64], b[64], e[64], f[64], g[64];
        printf("position    step %s, epoch %s, step in epoch %s of %s, images %s\n", state_word(&c, "step", a, 64),
               state_word(&c, "epoch", b, 64), state_word(&c, "step_in_epoch", e, 64),
               state_word(&c, "steps_per_epoch", f, 64), state_word(&c, "images", g, 64));
        size_t len;
        const char *v = tr_ckpt_text_value(c.state_text, "loss_scale", &len);
        double scale = v ? strtod(v, NULL) : NAN;
        printf("loss scale  %.9g (good steps %s, skipped steps %s, consecutive skips %s)\n", scale,
               state_word(&c, "loss_scale_good_steps", a, 64), state_word(&c, "loss_scale_skipped_steps", b, 64),
               state_word(&c, "loss_scale_consecutive_skips", e, 64));
        printf("seeds       seed %s, data seed %s\n", state_word(&c, "seed", a, 64),
               state_word(&c, "data_seed", b, 64));
    } else {
        printf("position    (no run_state section)\n");
    }
    printf("sections    %-12s %12s %12s  %s\n", "name", "offset", "bytes", "crc32c");
    for (int i = 0; i < c.file.section_count; i++) {
        const tr_ckpt_section_t *s = &c.file.sections[i];
        printf("            %-12s %12" PRIu64 " %12" PRIu64 "  0x%08" PRIx32 "\n", s->name, s->offset, s->bytes,
               s->crc);
    }
    ckpt_close(&c);
    return 0;
}

/* ---- verify ---- */

static int verify_one(const char *path)
{
    ckpt_t c;
    if (ckpt_open(path, &c, 1) != 0) {
        fprintf(stderr, "hora-ckpt: %s\n", status_message());
        return 1;
    }
    int bad = tr_ckpt_verify(&c.file) != HORA_OK;
    static const char *const f32_sections[] = {"params", "momentum", "bn_stats"};
    for (int i = 0; i < 3 && !bad; i++) {
        uint64_t want = (i < 2 ? c.desc.params_count : c.desc.stats_count) * sizeof(float);
        bad = !tr_ckpt_expect(&c.file, f32_sections[i], want);
    }
    if (!bad && !c.state_text) bad = !tr_ckpt_expect(&c.file, "run_state", TR_CKPT_ANY_BYTES);
    if (bad)
        fprintf(stderr, "hora-ckpt: %s\n", status_message());
    else
        printf("%s: OK (header and %d sections, %" PRIu64 " bytes)\n", path, c.file.section_count, c.file.file_bytes);
    ckpt_close(&c);
    return bad;
}

static int cmd_verify(int argc, char **argv)
{
    int bad = 0;
    for (int i = 0; i < argc; i++) bad |= verify_one(argv[i]);
    return bad;
}

/* ---- diff ---- */

/* Where flat element i of a tensor section lies: "layer1.0.conv1.weight[7]". */
static void element_name(const tr_ckpt_desc_t *d, int stats, uint64_t i, char *buf, size_t n)
{
    if (d && !stats) {
        for (int k = 0; k < d->param_count; k++) {
            const tr_ckpt_param_desc_t *p = &d->params[k];
            if (i >= p->offset && i < p->offset + p->count) {
                snprintf(buf, n, "%s[%" PRIu64 "]", p->name, i - p->offset);
                return;
            }
        }
    } else if (d) {
        for (int k = 0; k < d->bn_count; k++) {
            const tr_ckpt_bn_desc_t *b = &d->bns[k];
            uint64_t ch = (uint64_t)b->channels;
            if (i >= b->offset && i < b->offset + 2 * ch) {
                int var = i >= b->offset + ch;
                snprintf(buf, n, "%s.%s[%" PRIu64 "]", b->name, var ? "running_var" : "running_mean",
                         i - b->offset - (var ? ch : 0));
                return;
            }
        }
    }
    snprintf(buf, n, "element %" PRIu64 " (in no tensor)", i);
}

static void print_float(const char *label, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    printf("%s %.9g (0x%08" PRIx32 ")", label, (double)v, bits);
}

/* Compare two f32 sections bit by bit; 1 when they differ. */
static int diff_floats(const char *name, const float *a, const float *b, uint64_t count, const tr_ckpt_desc_t *d,
                       int stats)
{
    uint64_t differ = 0, first = 0;
    double max_abs = 0; /* over the pairs whose difference is a number; NaN when any is not */
    int nan_seen = 0;
    for (uint64_t i = 0; i < count; i++) {
        if (memcmp(&a[i], &b[i], sizeof(float)) == 0) continue;
        if (differ++ == 0) first = i;
        double diff = fabs((double)a[i] - (double)b[i]);
        if (isnan(diff))
            nan_seen = 1;
        else if (diff > max_abs)
            max_abs = diff;
    }
    if (nan_seen) max_abs = NAN;
    if (!differ) {
        printf("%s: equal\n", name);
        return 0;
    }
    char where[160];
    element_name(d, stats, first, where, sizeof(where));
    printf("%s: differ: %" PRIu64 " of %" PRIu64 " elements, max abs difference %.9g; first at %s (offset %" PRIu64
           "): ",
           name, differ, count, max_abs, where, first);
    print_float("A", a[first]);
    print_float(", B", b[first]);
    printf("\n");
    return 1;
}

/* Compare two text sections line by line; 1 when they differ. */
static int diff_text(const char *name, const char *a, const char *b)
{
    int line = 1;
    for (;;) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (!*a && !*b) {
            printf("%s: equal\n", name);
            return 0;
        }
        if (!*a || !*b) {
            printf("%s: differ at line %d: %s has no more lines, %s '%.*s'\n", name, line, *a ? "B" : "A",
                   *a ? "A" : "B", (int)(*a ? la : lb), *a ? a : b);
            return 1;
        }
        if (la != lb || memcmp(a, b, la) != 0 || a[la] != b[lb]) {
            printf("%s: differ at line %d: A '%.*s', B '%.*s'\n", name, line, (int)la, a, (int)lb, b);
            return 1;
        }
        a += la + (a[la] == '\n');
        b += lb + (b[lb] == '\n');
        line++;
    }
}

/* The line of text whose first word is the key (k bytes) at key; NULL
 * when none is. */
static const char *find_key_line(const char *text, const char *key, size_t k)
{
    for (const char *line = text; *line;) {
        size_t len = strcspn(line, "\n");
        if (strcspn(line, " \n") == k && memcmp(line, key, k) == 0) return line;
        line += len + (line[len] == '\n');
    }
    return NULL;
}

/* The value of a line of k-byte key ("" without one), its length in *n. */
static const char *line_value(const char *line, size_t k, int *n)
{
    size_t len = strcspn(line, "\n");
    *n = len > k ? (int)(len - k - 1) : 0;
    return len > k ? line + k + 1 : "";
}

/* A measured line of run_state that differs: "key (A value, B value)"
 * appended to list and key to names (", " between items); a or b NULL
 * where that file has no such line. */
static void add_measurement(char *list, size_t n, char *names, size_t names_n, const char *a, const char *b)
{
    const char *line = a ? a : b;
    const size_t k = strcspn(line, " \n");
    int na = 4, nb = 4;
    const char *va = a ? line_value(a, k, &na) : "none", *vb = b ? line_value(b, k, &nb) : "none";
    size_t used = strlen(list), used_names = strlen(names);
    snprintf(list + used, n - used, "%s%.*s (A %.*s, B %.*s)", used ? ", " : "", (int)k, line, na, va, nb, vb);
    snprintf(names + used_names, names_n - used_names, "%s%.*s", used_names ? ", " : "", (int)k, line);
}

/* run_state key by key (trainer/core/run.h): the first difference in the
 * training state is printed (with its line number) and gives 1;
 * differences only in measurements (tr_ckpt_state_key_is_measurement:
 * timings taken to choose, which two runs of the same training state may
 * differ in) are printed in one line, their keys go into names, and give
 * 0. */
static int diff_run_state(const char *a, const char *b, char *names, size_t names_n)
{
    char list[2048] = "";
    int line_no = 1;
    for (const char *line = a; *line; line_no++) { /* A's lines, in order */
        size_t len = strcspn(line, "\n"), k = strcspn(line, " \n");
        const char *peer = find_key_line(b, line, k);
        size_t plen = peer ? strcspn(peer, "\n") : 0;
        if (!peer || plen != len || memcmp(peer, line, len) != 0) {
            if (tr_ckpt_state_key_is_measurement(line, k)) {
                add_measurement(list, sizeof(list), names, names_n, line, peer);
            } else if (!peer) {
                printf("run_state: differ at line %d: A '%.*s', B has no '%.*s'\n", line_no, (int)len, line, (int)k,
                       line);
                return 1;
            } else {
                printf("run_state: differ at line %d: A '%.*s', B '%.*s'\n", line_no, (int)len, line, (int)plen, peer);
                return 1;
            }
        }
        line += len + (line[len] == '\n');
    }
    line_no = 1;
    for (const char *line = b; *line; line_no++) { /* then those only B has */
        size_t len = strcspn(line, "\n"), k = strcspn(line, " \n");
        if (!find_key_line(a, line, k)) {
            if (!tr_ckpt_state_key_is_measurement(line, k)) {
                printf("run_state: differ at B's line %d: A has no '%.*s', B '%.*s'\n", line_no, (int)k, line, (int)len,
                       line);
                return 1;
            }
            add_measurement(list, sizeof(list), names, names_n, NULL, line);
        }
        line += len + (line[len] == '\n');
    }
    if (list[0])
        printf("run_state: equal training state; measurements differ: %s\n", list);
    else
        printf("run_state: equal\n");
    return 0;
}

/* Sections of other sizes, and any other section: byte by byte. */
static int diff_bytes(const char *name, const uint8_t *a, uint64_t na, const uint8_t *b, uint64_t nb)
{
    if (na != nb) {
        printf("%s: differ in size: A %" PRIu64 " bytes, B %" PRIu64 " bytes\n", name, na, nb);
        return 1;
    }
    for (uint64_t i = 0; i < na; i++)
        if (a[i] != b[i]) {
            printf("%s: differ at byte %" PRIu64 ": A 0x%02x, B 0x%02x\n", name, i, a[i], b[i]);
            return 1;
        }
    printf("%s: equal\n", name);
    return 0;
}

/* One section of both files; 1 differ, 0 equal, -1 error (message printed).
 * run_state's differing measurements go into measured. */
static int diff_section(const ckpt_t *a, const ckpt_t *b, const char *name, char *measured, size_t measured_bytes)
{
    const tr_ckpt_section_t *sa = tr_ckpt_find(&a->file, name), *sb = tr_ckpt_find(&b->file, name);
    if (!sa || !sb) {
        printf("%s: differ: only in %s\n", name, sa ? "A" : "B");
        return 1;
    }
    void *da = NULL, *db = NULL;
    if (tr_ckpt_read_alloc(&a->file, sa, &da) != HORA_OK || tr_ckpt_read_alloc(&b->file, sb, &db) != HORA_OK) {
        fprintf(stderr, "hora-ckpt: %s\n", status_message());
        free(da);
        return -1;
    }
    int rc;
    int tensors = strcmp(name, "params") == 0 || strcmp(name, "momentum") == 0;
    int stats = strcmp(name, "bn_stats") == 0;
    if (strcmp(name, "run_state") == 0) {
        rc = diff_run_state(da, db, measured, measured_bytes);
    } else if (strcmp(name, "model") == 0) {
        rc = diff_text(name, da, db);
    } else if ((tensors || stats) && sa->bytes == sb->bytes && sa->bytes % sizeof(float) == 0) {
        /* Named by A's description when it has one that covers the section. */
        const tr_ckpt_desc_t *d = a->have_desc ? &a->desc : b->have_desc ? &b->desc : NULL;
        uint64_t want = d ? (stats ? d->stats_count : d->params_count) * sizeof(float) : 0;
        rc = diff_floats(name, da, db, sa->bytes / sizeof(float), want == sa->bytes ? d : NULL, stats);
    } else {
        rc = diff_bytes(name, da, sa->bytes, db, sb->bytes);
    }
    free(da);
    free(db);
    return rc;
}

static int cmd_diff(const char *path_a, const char *path_b)
{
    ckpt_t a, b;
    if (ckpt_open(path_a, &a, 0) != 0) {
        fprintf(stderr, "hora-ckpt: %s\n", status_message());
        return 2;
    }
    if (ckpt_open(path_b, &b, 0) != 0) {
        fprintf(stderr, "hora-ckpt: %s\n", status_message());
        ckpt_close(&a);
        return 2;
    }
    int differ = 0, failed = 0;
    char measured[512] = "";
    /* A's sections in its order, then those only B has. */
    for (int i = 0; i < a.file.section_count + b.file.section_count && !failed; i++) {
        const char *name =
            i < a.file.section_count ? a.file.sections[i].name : b.file.sections[i - a.file.section_count].name;
        if (i >= a.file.section_count && tr_ckpt_find(&a.file, name)) continue;
        int rc = diff_section(&a, &b, name, measured, sizeof(measured));
        if (rc < 0)
            failed = 1;
        else
            differ |= rc;
    }
    ckpt_close(&a);
    ckpt_close(&b);
    if (failed) return 2;
    if (differ)
        printf("differ\n");
    else if (measured[0])
        printf("equal (measurements differ: %s)\n", measured);
    else
        printf("equal\n");
    return differ ? 1 : 0;
}

/* ---- export ---- */

static int add_param(npz_writer_t *w, const char *prefix, const tr_ckpt_param_desc_t *p, const float *arena)
{
    int64_t shape[4];
    for (int k = 0; k < p->ndim; k++) shape[k] = p->dims[k];
    char name[128];
    snprintf(name, sizeof(name), "%s%s", prefix, p->name);
    return npz_add(w, name, NPZ_F32, p->ndim, shape, arena + p->offset);
}

static int add_bn(npz_writer_t *w, const tr_ckpt_bn_desc_t *b, const float *stats, int64_t tracked)
{
    int64_t shape[1] = {b->channels};
    char name[128];
    snprintf(name, sizeof(name), "%s.running_mean", b->name);
    if (npz_add(w, name, NPZ_F32, 1, shape, stats + b->offset) != 0) return -1;
    snprintf(name, sizeof(name), "%s.running_var", b->name);
    if (npz_add(w, name, NPZ_F32, 1, shape, stats + b->offset + b->channels) != 0) return -1;
    snprintf(name, sizeof(name), "%s.num_batches_tracked", b->name);
    return npz_add(w, name, NPZ_I64, 0, NULL, &tracked);
}

static int cmd_export(const char *path, const char *out, int with_momentum)
{
    ckpt_t c;
    if (ckpt_open(path, &c, 1) != 0) {
        fprintf(stderr, "hora-ckpt: %s\n", status_message());
        return 1;
    }
    const tr_ckpt_desc_t *d = &c.desc;
    float *params = NULL, *momentum = NULL, *stats = NULL;
    uint64_t step = 0;
    int rc = 1;
    if (!c.state_text || tr_ckpt_text_u64(c.state_text, "step", &step) != 0 || step > INT64_MAX) {
        fprintf(stderr, "hora-ckpt: %s: section 'run_state': no 'step' (num_batches_tracked)\n", path);
        goto out;
    }
    if (!(params = read_floats(&c, "params", d->params_count)) ||
        !(stats = read_floats(&c, "bn_stats", d->stats_count)) ||
        (with_momentum && !(momentum = read_floats(&c, "momentum", d->params_count)))) {
        fprintf(stderr, "hora-ckpt: %s\n", status_message());
        goto out;
    }
    npz_writer_t *w = npz_open(out);
    if (!w) {
        fprintf(stderr, "hora-ckpt: %s\n", status_message());
        goto out;
    }
    /* state_dict's order: each BN's buffers after its bias. */
    char *done = calloc((size_t)d->bn_count + 1, 1);
    int ok = done != NULL;
    for (int i = 0; ok && i < d->param_count; i++) {
        const tr_ckpt_param_desc_t *p = &d->params[i];
        ok = add_param(w, "", p, params) == 0;
        size_t len = strlen(p->name);
        if (!ok || p->kind != TR_PARAM_BN_BETA || len < 5 || strcmp(p->name + len - 5, ".bias") != 0) continue;
        for (int k = 0; ok && k < d->bn_count; k++)
            if (!done[k] && strlen(d->bns[k].name) == len - 5 && strncmp(d->bns[k].name, p->name, len - 5) == 0) {
                ok = add_bn(w, &d->bns[k], stats, (int64_t)step) == 0;
                done[k] = 1;
            }
    }
    for (int k = 0; ok && k < d->bn_count; k++)
        if (!done[k]) ok = add_bn(w, &d->bns[k], stats, (int64_t)step) == 0;
    for (int i = 0; ok && with_momentum && i < d->param_count; i++)
        ok = add_param(w, "momentum.", &d->params[i], momentum) == 0;
    free(done);
    if (!ok) {
        npz_abort(w);
        fprintf(stderr, "hora-ckpt: %s\n", status_message()[0] ? status_message() : "out of memory");
        goto out;
    }
    if (npz_close(w) != 0) {
        fprintf(stderr, "hora-ckpt: %s\n", status_message());
        goto out;
    }
    printf("%s: %d parameters and %d BN layers (running_mean, running_var, num_batches_tracked %" PRIu64 ")%s\n", out,
           d->param_count, d->bn_count, step, with_momentum ? ", momentum.*" : "");
    rc = 0;
out:
    free(params);
    free(momentum);
    free(stats);
    ckpt_close(&c);
    return rc;
}

/* ---- logits ---- */

static int cmd_logits(const char *path, const char *in_path, const char *out_path, int threads)
{
    npz_array_t x;
    if (npz_read_f32(in_path, &x) != 0) {
        fprintf(stderr, "hora-ckpt: %s\n", status_message());
        return 1;
    }
    tr_ckpt_data_t data;
    if (tr_ckpt_load(path, &data) != HORA_OK) {
        fprintf(stderr, "hora-ckpt: %s\n", status_message());
        npz_array_free(&x);
        return 1;
    }
    int rc = 1;
    tr_backend_t *backend = NULL;
    tr_model_t *model = NULL;
    float *logits = NULL;
    tr_model_spec_t spec;
    if (tr_ckpt_spec(&data, &spec) != HORA_OK) {
        fprintf(stderr, "hora-ckpt: %s\n", status_message());
        goto out;
    }
    if (x.ndim != 4 || x.shape[0] < 1 || x.shape[1] != spec.in_channels || x.shape[2] != spec.height ||
        x.shape[3] != spec.width) {
        fprintf(stderr, "hora-ckpt: %s: shape (", in_path);
        for (int i = 0; i < x.ndim; i++) fprintf(stderr, "%s%lld", i ? ", " : "", (long long)x.shape[i]);
        fprintf(stderr, "), the model takes (N, %d, %d, %d)\n", spec.in_channels, spec.height, spec.width);
        goto out;
    }
    const struct tr_backend_ops *ops = tr_backend_find("cpu");
    tr_backend_config_t bc = {.threads = threads};
    status_clear(); /* what follows reports its own failure's message, or none */
    if (!ops || ops->init(&bc, &backend) != HORA_OK) {
        fprintf(stderr, "hora-ckpt: the cpu backend does not start%s%s\n", status_message()[0] ? ": " : "",
                status_message());
        backend = NULL;
        goto out;
    }
    int64_t n = x.shape[0];
    int chunk = n < 32 ? (int)n : 32;
    if (tr_ckpt_build_model(&data, backend, chunk, &model) != HORA_OK) {
        fprintf(stderr, "hora-ckpt: %s\n", status_message());
        model = NULL;
        goto out;
    }
    logits = malloc((size_t)n * (size_t)spec.classes * sizeof(float));
    if (!logits) {
        fprintf(stderr, "hora-ckpt: out of memory\n");
        goto out;
    }
    size_t sample = (size_t)spec.in_channels * (size_t)spec.height * (size_t)spec.width;
    for (int64_t i = 0; i < n; i += chunk) {
        int m = n - i < chunk ? (int)(n - i) : chunk;
        tr_tensor_t t = tr_tensor_plain(x.data + (size_t)i * sample, TR_DTYPE_F32, TR_MEMORY_HOST, 4,
                                        (const int[]){m, spec.in_channels, spec.height, spec.width});
        hora_status_t status = tr_model_forward(model, &t, 0);
        if (status == HORA_OK) status = tr_model_logits(model, logits + (size_t)i * (size_t)spec.classes);
        if (status != HORA_OK) {
            fprintf(stderr, "hora-ckpt: %s: forward of samples %lld..%lld failed: %s\n", path, (long long)i,
                    (long long)(i + m - 1), status_message()[0] ? status_message() : hora_status_string(status));
            goto out;
        }
    }
    int64_t shape[2] = {n, spec.classes};
    if (npz_write_npy(out_path, NPZ_F32, 2, shape, logits) != 0) {
        fprintf(stderr, "hora-ckpt: %s\n", status_message());
        goto out;
    }
    printf("%s: logits (%lld, %d) of %s (%s, inference)\n", out_path, (long long)n, spec.classes, in_path,
           data.desc.arch);
    rc = 0;
out:
    free(logits);
    if (model) tr_model_free(model);
    if (backend) backend->ops->free(backend);
    tr_ckpt_data_free(&data);
    npz_array_free(&x);
    return rc;
}

/* ---- main ---- */

/* "--name VALUE" options after the positional arguments. */
static const char *option(int argc, char **argv, const char *name, int *used)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], name) == 0) {
            used[i] = 1;
            if (i + 1 < argc) {
                used[i + 1] = 1;
                return argv[i + 1];
            }
            return "";
        }
    return NULL;
}

static int flag(int argc, char **argv, const char *name, int *used)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], name) == 0) {
            used[i] = 1;
            return 1;
        }
    return 0;
}

/* 0 when every argument was taken; else names the first stray one. */
static int strays(const char *cmd, int argc, char **argv, const int *used)
{
    for (int i = 0; i < argc; i++)
        if (!used[i]) {
            fprintf(stderr, "hora-ckpt %s: unexpected argument '%s' (hora-ckpt --help)\n", cmd, argv[i]);
            return 1;
        }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    int rest = argc - 2;
    char **args = argv + 2;
    int used[64] = {0};
    if (rest > 64) {
        fprintf(stderr, "hora-ckpt: too many arguments\n");
        return 2;
    }
    if (strcmp(cmd, "info") == 0 && rest == 1) return cmd_info(args[0]);
    if (strcmp(cmd, "verify") == 0 && rest >= 1) return cmd_verify(rest, args);
    if (strcmp(cmd, "diff") == 0 && rest == 2) return cmd_diff(args[0], args[1]);
    if (strcmp(cmd, "export") == 0 && rest >= 1) {
        used[0] = 1;
        const char *out = option(rest, args, "--npz", used);
        int momentum = flag(rest, args, "--momentum", used);
        if (!out || !*out) {
            fprintf(stderr, "hora-ckpt export: --npz OUT is required\n");
            return 2;
        }
        if (strays(cmd, rest, args, used)) return 2;
        return cmd_export(args[0], out, momentum);
    }
    if (strcmp(cmd, "logits") == 0 && rest >= 1) {
        used[0] = 1;
        const char *in = option(rest, args, "--input", used), *out = option(rest, args, "--out", used);
        const char *threads = option(rest, args, "--threads", used);
        if (!in || !*in || !out || !*out) {
            fprintf(stderr, "hora-ckpt logits: --input IN.npy and --out OUT.npy are required\n");
            return 2;
        }
        char *end = NULL;
        long t = threads ? strtol(threads, &end, 10) : 0;
        if (threads && (!*threads || *end || t < 1 || t > 1024)) {
            fprintf(stderr, "hora-ckpt logits: --threads '%s': a number from 1 to 1024\n", threads);
            return 2;
        }
        if (strays(cmd, rest, args, used)) return 2;
        return cmd_logits(args[0], in, out, (int)t);
    }
    if (strcmp(cmd, "info") == 0 || strcmp(cmd, "verify") == 0 || strcmp(cmd, "diff") == 0 ||
        strcmp(cmd, "export") == 0 || strcmp(cmd, "logits") == 0)
        fprintf(stderr, "hora-ckpt %s: wrong number of arguments\n", cmd);
    else
        fprintf(stderr, "hora-ckpt: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
