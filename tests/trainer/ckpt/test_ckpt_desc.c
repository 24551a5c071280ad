/*
 * test_ckpt_desc.c - the model section (trainer/ckpt/ckpt_desc.h) against what
 * hora-train writes: the description tr_ckpt_describe makes for several
 * architectures parses back to every tensor's name, kind, shape, offset and
 * count and the spec; broken descriptions are refused naming the line; and
 * the fixture checkpoints the hora-ckpt tests use.
 *
 * usage: test_ckpt_desc                  the parser checks
 *        test_ckpt_desc --fixtures DIR   write DIR/a, DIR/b, DIR/c, each holding
 *                                        ckpt-0000000003.hckpt from tr_ckpt_writer
 *                                        (tests/trainer/ckpt/ckpt_tool.py says what differs)
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "check.h"
#include "checkpoint.h"
#include "ckpt_desc.h"

static tr_backend_t *backend_start(void)
{
    const struct tr_backend_ops *ops = tr_backend_find("cpu");
    tr_backend_config_t bc = {.threads = 1};
    tr_backend_t *b = NULL;
    if (!ops || ops->init(&bc, &b) != HORA_OK) return NULL;
    return b;
}

static tr_model_t *model_make(tr_backend_t *b, const char *arch, int c, int hw, int classes, int width,
                              tr_dtype_t compute)
{
    tr_model_spec_t spec;
    if (tr_model_spec_from_name(arch, &spec) != HORA_OK) return NULL;
    spec.in_channels = c;
    spec.height = spec.width = hw;
    spec.classes = classes;
    if (width) spec.base_width = width;
    spec.compute_dtype = compute;
    spec.grad_dtype = compute;
    tr_model_t *m = NULL;
    if (tr_model_init(b, &spec, 1, 0, 5, &m) != HORA_OK) return NULL;
    return m;
}

/* ---- the description hora-train writes, read back ---- */

static void check_round_trip(tr_backend_t *b, const char *arch, int c, int hw, int classes, int width,
                             tr_dtype_t compute)
{
    tr_model_t *m = model_make(b, arch, c, hw, classes, width, compute);
    if (!m) {
        /* bf16 where the CPU has no bf16 kernels: the cpu backend refuses */
        CHECK(compute != TR_DTYPE_F32, "%s: model init", arch);
        return;
    }
    tr_ckpt_run_info_t info = {.arch = arch, .world_size = 3, .batch = 17, .steps_per_epoch = 9};
    char *text = tr_ckpt_describe(m, &info);
    CHECK(text != NULL, "%s: describe", arch);
    tr_ckpt_desc_t d;
    hora_status_t st = text ? tr_ckpt_desc_parse(text, "model", &d) : HORA_ERR_NO_MEMORY;
    CHECK(st == HORA_OK, "%s: parse: %s", arch, status_message());
    if (st == HORA_OK) {
        const tr_model_spec_t *s = tr_model_spec(m);
        CHECK(strcmp(d.arch, arch) == 0 && d.world_size == 3 && d.batch == 17, "%s: arch, world size, batch", arch);
        CHECK(d.spec.stem == s->stem && d.spec.block == s->block && d.spec.stage_count == s->stage_count &&
                  memcmp(d.spec.blocks, s->blocks, sizeof(s->blocks)) == 0 && d.spec.base_width == s->base_width &&
                  d.spec.in_channels == s->in_channels && d.spec.height == s->height && d.spec.width == s->width &&
                  d.spec.classes == s->classes && d.spec.compute_dtype == s->compute_dtype &&
                  d.spec.grad_dtype == s->grad_dtype && d.spec.bn_epsilon == s->bn_epsilon &&
                  d.spec.bn_momentum == s->bn_momentum && d.spec.zero_init_last_bn == s->zero_init_last_bn,
              "%s: the spec back, exactly", arch);
        CHECK(d.params_count == tr_tensor_count(tr_model_arena(m, TR_ARENA_PARAMS)) &&
                  d.stats_count == tr_tensor_count(tr_model_arena(m, TR_ARENA_STATS)),
              "%s: arena counts", arch);
        CHECK(d.param_count == tr_model_param_count(m) && d.bn_count == tr_model_bn_count(m),
              "%s: %d params (model %d), %d BNs (model %d)", arch, d.param_count, tr_model_param_count(m), d.bn_count,
              tr_model_bn_count(m));
        for (int i = 0; i < d.param_count && i < tr_model_param_count(m); i++) {
            const tr_param_t *p = tr_model_param(m, i);
            const tr_ckpt_param_desc_t *q = &d.params[i];
            int same = strcmp(p->name, q->name) == 0 && p->kind == q->kind && p->ndim == q->ndim &&
                       p->offset == q->offset && p->count == q->count;
            for (int k = 0; k < p->ndim; k++) same &= p->dims[k] == q->dims[k];
            CHECK(same, "%s: param %d '%s' back as '%s'", arch, i, p->name, q->name);
        }
        for (int i = 0; i < d.bn_count && i < tr_model_bn_count(m); i++) {
            const tr_bn_stats_t *p = tr_model_bn(m, i);
            CHECK(strcmp(p->name, d.bns[i].name) == 0 && p->channels == d.bns[i].channels &&
                      p->offset == d.bns[i].offset,
                  "%s: bn %d '%s'", arch, i, p->name);
        }
        tr_ckpt_desc_free(&d);
    }
    free(text);
    tr_model_free(m);
}

/* ---- broken descriptions ---- */

static const char good[] =
    "format hora-model 1\narch tiny\nstem cifar\nblock basic\nblocks 1\nwidth 2\ninput 1 4 4\nclasses 3\n"
    "compute_dtype f32\ngrad_dtype bf16\nbn_epsilon 9.99999975e-06\nbn_momentum 0.100000001\nzero_init_last_bn 1\n"
    "world_size 2\nbatch 8\nparams_count 30\nstats_count 4\n"
    "param conv1.weight conv_weight 0 18 2 1 3 3\n"
    "param bn1.weight bn_gamma 18 2 2\n"
    "param bn1.bias bn_beta 20 2 2\n"
    "param fc.weight linear_weight 22 6 3 2\n"
    "param fc.bias linear_bias 28 2 2\n"
    "bn bn1 2 0\n";

/* good with line `line` (1-based) replaced by `with` (NULL: removed), or
 * `with` appended when line is 0. */
static char *edit(int line, const char *with)
{
    size_t n = strlen(good) + (with ? strlen(with) : 0) + 2;
    char *out = malloc(n), *o = out;
    const char *p = good;
    for (int l = 1; *p; l++) {
        const char *end = strchr(p, '\n') + 1;
        if (l == line) {
            if (with) o += sprintf(o, "%s", with);
        } else {
            memcpy(o, p, (size_t)(end - p));
            o += end - p;
        }
        p = end;
    }
    if (line == 0 && with) o += sprintf(o, "%s", with);
    *o = '\0';
    return out;
}

static void check_broken(void)
{
    tr_ckpt_desc_t d;
    hora_status_t st = tr_ckpt_desc_parse(good, "x.hckpt: section 'model'", &d);
    CHECK(st == HORA_OK, "the small description parses: %s", status_message());
    if (st == HORA_OK) {
        CHECK(d.param_count == 5 && d.bn_count == 1 && d.params[3].dims[0] == 3 && d.params[3].dims[1] == 2 &&
                  d.spec.grad_dtype == TR_DTYPE_BF16 && d.spec.bn_epsilon == 1e-5f && d.spec.bn_momentum == 0.1f,
              "its fields");
        tr_ckpt_desc_free(&d);
    }
    struct {
        int line;
        const char *with, *want; /* want NULL: parses */
    } cases[] = {
        {0, "future_key anything  at all\n", NULL},
        {0, "future_key\n", NULL},
        {3, "stem cifar\nnotes two  spaces are fine here\n", NULL},
        {1, "format hora-model 2\n", "line 1: model description format 2"},
        {1, "arch tiny\n", "line 1: the first line must be 'format hora-model 1'"},
        {2, NULL, "no 'arch' line"},
        {8, NULL, "no 'classes' line"},
        {0, "width 3\n", "line 24: a second 'width' line"},
        {6, "width two\n", "line 6: expected 'width N'"},
        {6, "width  2\n", "line 6: malformed 'width' line"},
        {9, "compute_dtype f64\n", "line 9: expected 'compute_dtype f32|bf16|f16'"},
        {4, "block wide\n", "line 4: expected 'block basic' or 'block bottleneck'"},
        {18, "param conv1.weight conv_weight 0 17 2 1 3 3\n", "line 18: parameter 'conv1.weight': count 17 is not"},
        {18, "param conv1.weight conv_weight 0 18 2 9\n",
         "line 18: parameter 'conv1.weight': 2 dimensions, a conv_weight has 4"},
        {19, "param bn1.weight bn_gamma 17 2 2\n", "line 19: parameter 'bn1.weight' at offset 17"},
        {22, "param fc.bias linear_bias 29 2 2\n", "line 22: parameter 'fc.bias' at offset 29 (2 elements): outside"},
        {22, "param fc.weight linear_bias 28 2 2\n", "line 22: parameter 'fc.weight' a second time"},
        {19, "param bn1.weight bn_norm 18 2 2\n", "line 19: parameter 'bn1.weight': unknown kind 'bn_norm'"},
        {23, "bn bn1 3 0\n", "line 23: BN 'bn1' at offset 0 (2 x 3 elements): outside"},
        {0, "bn bn1 1 4\n", "line 24: BN 'bn1' at offset 4"},
        {16, NULL, "line 17: a 'param' line before the params_count and stats_count lines"},
        {10, "\n", "line 10: empty line"},
        {0, "trailing", "line 24: the last line does not end in a newline"},
        {23, NULL, NULL}, /* no BN lines is allowed (a model without BN) */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *text = edit(cases[i].line, cases[i].with);
        st = tr_ckpt_desc_parse(text, "x.hckpt: section 'model'", &d);
        if (!cases[i].want) {
            CHECK(st == HORA_OK, "case %zu parses: %s", i, status_message());
            if (st == HORA_OK) tr_ckpt_desc_free(&d);
        } else {
            CHECK(st == HORA_ERR_CORRUPT && strncmp(status_message(), "x.hckpt: section 'model': ", 26) == 0 &&
                      strstr(status_message(), cases[i].want),
                  "case %zu: %d '%s', want '%s'", i, st, status_message(), cases[i].want);
        }
        free(text);
    }
    /* the key lookup of text sections */
    const char *state = "format hora-run-state 1\nstep 12\nsteps_per_epoch 40\nloss_scale 0x1p+10\n";
    uint64_t v = 0;
    size_t len = 0;
    CHECK(tr_ckpt_text_u64(state, "step", &v) == 0 && v == 12, "step %" PRIu64, v);
    CHECK(tr_ckpt_text_u64(state, "steps_per_epoch", &v) == 0 && v == 40, "steps_per_epoch %" PRIu64, v);
    CHECK(tr_ckpt_text_u64(state, "loss_scale", &v) != 0 && tr_ckpt_text_u64(state, "epoch", &v) != 0,
          "not a number, missing");
    const char *s = tr_ckpt_text_value(state, "loss_scale", &len);
    CHECK(s && len == 7 && strncmp(s, "0x1p+10\n", 8) == 0, "loss_scale value");
    CHECK(tr_ckpt_text_value(state, "step_", &len) == NULL, "no prefix matches");
}

/* ---- fixtures for the hora-ckpt tests ---- */

static int upload(tr_model_t *m, tr_arena_t arena, const float *host)
{
    tr_tensor_t t = *tr_model_arena(m, arena);
    tr_backend_t *b = tr_model_backend(m);
    return b->ops->upload(b, &t, host) == HORA_OK ? 0 : -1;
}

static int param_offset(tr_model_t *m, const char *name)
{
    for (int i = 0; i < tr_model_param_count(m); i++)
        if (strcmp(tr_model_param(m, i)->name, name) == 0) return (int)tr_model_param(m, i)->offset;
    return -1;
}

static int bn_offset(tr_model_t *m, const char *name)
{
    for (int i = 0; i < tr_model_bn_count(m); i++)
        if (strcmp(tr_model_bn(m, i)->name, name) == 0) return (int)tr_model_bn(m, i)->offset;
    return -1;
}

/* One checkpoint of m into dir with the writer hora-train uses. */
static int save(const char *dir, tr_model_t *m, const tr_run_state_t *s)
{
    tr_ckpt_writer_t *w;
    tr_ckpt_run_info_t info = {.arch = "resnet8", .world_size = 2, .batch = 16, .steps_per_epoch = 60};
    if (tr_ckpt_writer_open(dir, 3, &w) != HORA_OK || tr_ckpt_writer_save(w, m, s, &info) != HORA_OK ||
        tr_ckpt_writer_close(w) != HORA_OK) {
        fprintf(stderr, "fixture %s: %s\n", dir, status_message());
        return -1;
    }
    return 0;
}

/* a: resnet8 on 1x8x8, 10 classes, after "3 steps"; c: a again; b: a with
 *   params  layer1.0.conv2.weight[7] 0.5 -> 0.75, fc.bias[2] 0.125 -> 0.1875
 *   momentum conv1.weight[0] +0 -> -0
 *   bn_stats layer2.0.bn1.running_var[3] 1.5 -> 2
 *   run_state images 96 -> 97 */
static int fixtures(const char *dir)
{
    tr_backend_t *b = backend_start();
    tr_model_t *m = b ? model_make(b, "resnet8", 1, 8, 10, 0, TR_DTYPE_F32) : NULL;
    if (!m) {
        fprintf(stderr, "fixtures: no model\n");
        return 1;
    }
    size_t np = tr_tensor_count(tr_model_arena(m, TR_ARENA_PARAMS));
    size_t ns = tr_tensor_count(tr_model_arena(m, TR_ARENA_STATS));
    float *params = malloc(np * sizeof(float)), *mom = malloc(np * sizeof(float)), *stats = malloc(ns * sizeof(float));
    tr_tensor_t pa = *tr_model_arena(m, TR_ARENA_PARAMS);
    if (!params || !mom || !stats || b->ops->download(b, &pa, params) != HORA_OK) return 1;
    for (size_t i = 0; i < np; i++) mom[i] = (float)((int)(i % 17) - 8) / 1024.0f;
    for (size_t i = 0; i < ns; i++) stats[i] = 0.25f * (float)(i % 5);
    int conv2 = param_offset(m, "layer1.0.conv2.weight"), fcb = param_offset(m, "fc.bias"),
        c1 = param_offset(m, "conv1.weight"), bn = bn_offset(m, "layer2.0.bn1");
    if (conv2 < 0 || fcb < 0 || c1 < 0 || bn < 0) return 1;
    int var3 = -1; /* layer2.0.bn1.running_var[3]: after the layer's running means */
    for (int i = 0; i < tr_model_bn_count(m); i++)
        if (strcmp(tr_model_bn(m, i)->name, "layer2.0.bn1") == 0) var3 = bn + tr_model_bn(m, i)->channels + 3;
    if (var3 < 0) return 1;
    params[conv2 + 7] = 0.5f;
    params[fcb + 2] = 0.125f;
    mom[c1] = 0.0f;
    stats[var3] = 1.5f;
    tr_run_state_t s = tr_run_state_begin(5);
    s.step = 3;
    s.step_in_epoch = 3;
    s.images = 96;
    s.overlap.mode = 0;
    s.overlap.probe_step = 2;
    s.overlap.probe_s[0] = 0.1;
    s.overlap.probe_s[1] = 0.3;
    char path[4200];
    int rc = 0;
    rc |= upload(m, TR_ARENA_PARAMS, params) | upload(m, TR_ARENA_MOMENTUM, mom) | upload(m, TR_ARENA_STATS, stats);
    snprintf(path, sizeof(path), "%s/a", dir);
    rc |= save(path, m, &s);
    snprintf(path, sizeof(path), "%s/c", dir);
    rc |= save(path, m, &s);
    params[conv2 + 7] = 0.75f;
    params[fcb + 2] = 0.1875f;
    mom[c1] = -0.0f;
    stats[var3] = 2.0f;
    s.images = 97;
    rc |= upload(m, TR_ARENA_PARAMS, params) | upload(m, TR_ARENA_MOMENTUM, mom) | upload(m, TR_ARENA_STATS, stats);
    snprintf(path, sizeof(path), "%s/b", dir);
    rc |= save(path, m, &s);
    free(params);
    free(mom);
    free(stats);
    tr_model_free(m);
    b->ops->free(b);
    if (rc) fprintf(stderr, "fixtures: writing failed\n");
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--fixtures") == 0) return fixtures(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: test_ckpt_desc [--fixtures DIR]\n");
        return 2;
    }
    check_broken();
    tr_backend_t *b = backend_start();
    CHECK(b != NULL, "cpu backend");
    if (b) {
        check_round_trip(b, "resnet8", 3, 32, 10, 0, TR_DTYPE_F32);
        check_round_trip(b, "resnet20", 1, 28, 10, 0, TR_DTYPE_F32);
        check_round_trip(b, "resnet18", 3, 32, 7, 8, TR_DTYPE_F32);
        check_round_trip(b, "resnet50", 3, 32, 5, 4, TR_DTYPE_F32);
        check_round_trip(b, "resnet8", 3, 16, 10, 0, TR_DTYPE_BF16);
        b->ops->free(b);
    }
    printf("test_ckpt_desc: %d checks, %d failures -> %s\n", checks, failures, failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
