/*
 * golden.c - the golden file reader and what a file describes (golden.h).
 */
#include "golden.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int golden_failures;

static int read_u32(FILE *f, uint32_t *v)
{
    unsigned char b[4];
    if (fread(b, 1, 4, f) != 4) return -1;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}

int golden_load(const char *path, golden_t *g)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    char magic[8];
    uint32_t version, count;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "HORAGLD1", 8) || read_u32(f, &version) || version != 1 ||
        read_u32(f, &count) || count > 100000) {
        fprintf(stderr, "%s: not a version-1 golden file\n", path);
        fclose(f);
        return -1;
    }
    g->e = calloc(count, sizeof(entry_t));
    g->n = (int)count;
    for (uint32_t i = 0; i < count; i++) {
        entry_t *e = &g->e[i];
        uint32_t nb;
        if (read_u32(f, &nb) || nb >= sizeof(e->name) || fread(e->name, 1, nb, f) != nb || read_u32(f, &e->dtype) ||
            e->dtype > 1 || read_u32(f, &e->ndim) || e->ndim > 8)
            goto bad;
        e->count = 1;
        for (uint32_t k = 0; k < e->ndim; k++) {
            if (read_u32(f, &e->dims[k])) goto bad;
            e->count *= e->dims[k];
        }
        if (e->count > (1u << 26)) goto bad;
        e->data = malloc(e->count * 4 + 4);
        if (fread(e->data, 4, e->count, f) != e->count) goto bad;
    }
    fclose(f);
    return 0;
bad:
    fprintf(stderr, "%s: truncated or malformed entry\n", path);
    fclose(f);
    return -1;
}

void golden_free(golden_t *g)
{
    for (int i = 0; i < g->n; i++) free(g->e[i].data);
    free(g->e);
}

const entry_t *golden_find(const golden_t *g, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->e[i].name, name) == 0) return &g->e[i];
    return NULL;
}

/* The index-th entry whose name starts with prefix. */
const entry_t *golden_nth(const golden_t *g, const char *prefix, int index)
{
    size_t pl = strlen(prefix);
    for (int i = 0; i < g->n; i++)
        if (strncmp(g->e[i].name, prefix, pl) == 0 && index-- == 0) return &g->e[i];
    return NULL;
}

int golden_spec(const entry_t *meta, const entry_t *hyper, tr_model_spec_t *spec)
{
    const int32_t *mi = meta->data;
    const float *hp = hyper->data;
    memset(spec, 0, sizeof(*spec));
    spec->stem = mi[0] ? TR_STEM_IMAGENET : TR_STEM_CIFAR;
    spec->block = mi[1] ? TR_BLOCK_BOTTLENECK : TR_BLOCK_BASIC;
    spec->in_channels = mi[3];
    spec->height = mi[4];
    spec->width = mi[5];
    spec->classes = mi[6];
    spec->base_width = mi[7];
    spec->stage_count = mi[8];
    for (int i = 0; i < spec->stage_count && i < TR_MODEL_MAX_STAGES; i++) spec->blocks[i] = mi[9 + i];
    spec->bn_epsilon = hp[4];
    spec->bn_momentum = hp[5];
    return mi[2];
}

/* Parameters: same order and shapes as PyTorch's named_parameters,
 * uploaded into the model's f32 master views as any host data would be. */
int golden_params_upload(const golden_t *g, tr_model_t *model)
{
    tr_backend_t *backend = tr_model_backend(model);
    int np = tr_model_param_count(model);
    for (int i = 0; i < np; i++) {
        const tr_param_t *p = tr_model_param(model, i);
        const entry_t *e = golden_nth(g, "param/", i);
        tr_tensor_t value = p->value;
        if (!e || e->count != p->count || (int)e->ndim != p->ndim ||
            backend->ops->upload(backend, &value, e->data) != HORA_OK) {
            fprintf(stderr, "parameter %d (%s): golden has %s with %zu values\n", i, p->name, e ? e->name : "nothing",
                    e ? e->count : 0);
            return -1;
        }
    }
    if (golden_nth(g, "param/", np)) {
        fprintf(stderr, "golden has more parameters than hora's model (%d)\n", np);
        return -1;
    }
    return 0;
}
