/*
 * model_bufs.c - the model's per-sample tensors (model_bufs.h): activations,
 * their gradients, logits and labels. Each is registered in model->bufs when
 * model_build.c makes it, for the model's capacity of samples; a call with batch n
 * sets each one's n (its first n samples: every layout here keeps the batch
 * outermost), and a batch above the capacity first remakes them all bigger
 * (model_pass.c).
 */
#include <stdlib.h>

#include "model_bufs.h"

hora_status_t model_buf_add(tr_model_t *m, tr_tensor_t *t, int plain_ndim, int c, int h, int w, tr_dtype_t dtype)
{
    if (m->buf_count == m->buf_capacity) {
        int cap = m->buf_capacity ? 2 * m->buf_capacity : 128;
        model_buf_t *b = realloc(m->bufs, (size_t)cap * sizeof(*b));
        if (!b) return HORA_ERR_NO_MEMORY;
        m->bufs = b;
        m->buf_capacity = cap;
    }
    m->bufs[m->buf_count++] = (model_buf_t){.t = t, .plain_ndim = plain_ndim, .c = c, .h = h, .w = w, .dtype = dtype};
    return HORA_OK;
}

/* An activation (or its gradient): in the compute dtype. */
hora_status_t model_act(tr_model_t *m, tr_tensor_t *t, int c, int h, int w)
{
    return model_buf_add(m, t, 0, c, h, w, m->spec.compute_dtype);
}

static void model_buf_release(tr_model_t *m, model_buf_t *b)
{
    if (!b->t->data) return;
    if (b->plain_ndim)
        B_OPS(m)->buffer_free(m->backend, b->t->data);
    else
        B_OPS(m)->tensor_free(m->backend, b->t);
    b->t->data = NULL;
}

/* (Re)make every per-sample tensor for capacity samples. */
hora_status_t model_bufs_alloc(tr_model_t *m, int capacity)
{
    const struct tr_backend_ops *ops = B_OPS(m);
    for (int i = 0; i < m->buf_count; i++) {
        model_buf_t *b = &m->bufs[i];
        model_buf_release(m, b);
        hora_status_t status;
        if (b->plain_ndim) {
            void *data = NULL;
            size_t bytes = (size_t)capacity * (size_t)b->c * tr_dtype_size(b->dtype);
            status = ops->buffer_alloc(m->backend, bytes, &data);
            if (status == HORA_OK)
                *b->t = tr_tensor_plain(data, b->dtype, ops->memory, b->plain_ndim, (const int[]){capacity, b->c});
        } else {
            status = ops->tensor_alloc(m->backend, capacity, b->c, b->h, b->w, b->dtype, b->t);
        }
        if (status != HORA_OK) return status;
        b->sample_bytes = b->t->bytes / (size_t)capacity;
    }
    float *host = realloc(m->logits_host, (size_t)capacity * (size_t)m->spec.classes * sizeof(float));
    if (!host) return HORA_ERR_NO_MEMORY;
    m->logits_host = host;
    m->capacity = m->batch = capacity;
    m->forward_train = 0;
    return HORA_OK;
}

/* Point every per-sample tensor at its first n samples (n <= capacity). */
void model_set_batch(tr_model_t *m, int n)
{
    for (int i = 0; i < m->buf_count; i++) {
        model_buf_t *b = &m->bufs[i];
        b->t->n = n;
        b->t->bytes = b->sample_bytes * (size_t)n;
    }
    m->batch = n;
}

/* Every per-sample tensor freed, and the list. */
void model_bufs_free(tr_model_t *m)
{
    for (int i = 0; i < m->buf_count; i++) model_buf_release(m, &m->bufs[i]);
    free(m->bufs);
}
