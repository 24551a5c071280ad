/*
 * cpu_eltwise.c - the cpu backend's element-wise ops: ReLU, its backward and
 * the residual add (optionally followed by a ReLU), on kernels/'s k_relu,
 * k_relu_backward and k_add (k_cpu.h; the definitions in k_train_numeric.h:
 * relu keeps NaN and -0, as PyTorch's CPU relu), split across the backend's
 * threads for large tensors. Both operands of every op share shape and
 * layout, and our layouts have no padding, so each op is one flat range
 * over the elements.
 */
#include "cpu_internal.h"

typedef struct {
    const char *a, *b; /* relu: a = x; relu backward: a = y, b = dy */
    char *y;
    size_t size; /* bytes per element */
    k_dtype_t dtype;
    int relu;
} cpu_eltwise_args_t;

static void cpu_relu_range(const void *ctx, size_t begin, size_t end)
{
    const cpu_eltwise_args_t *r = ctx;
    (void)k_relu(r->y + begin * r->size, r->a + begin * r->size, r->dtype, end - begin);
}

static void cpu_relu_backward_range(const void *ctx, size_t begin, size_t end)
{
    const cpu_eltwise_args_t *r = ctx;
    (void)k_relu_backward(r->y + begin * r->size, r->a + begin * r->size, r->b + begin * r->size, r->dtype,
                          end - begin);
}

static void cpu_add_range(const void *ctx, size_t begin, size_t end)
{
    const cpu_eltwise_args_t *r = ctx;
    (void)k_add(r->y + begin * r->size, r->a + begin * r->size, r->b + begin * r->size, r->dtype, end - begin, r->relu);
}

/* The arguments of an op over tensors of ref's dtype (checked by then). */
static cpu_eltwise_args_t cpu_eltwise_args(const tr_tensor_t *ref, const void *a, const void *b, void *y, int relu)
{
    return (cpu_eltwise_args_t){.a = a,
                                .b = b,
                                .y = y,
                                .size = tr_dtype_size(ref->dtype),
                                .dtype = tr_dtype_kernel(ref->dtype),
                                .relu = relu != 0};
}

/* t has ref's shape and dtype; ref's dtype is one the element-wise ops
 * take (f32, bf16, f16). */
static hora_status_t cpu_check_same(const cpu_backend_t *backend, const tr_tensor_t *ref, const tr_tensor_t *t,
                                    const char *what)
{
    if (ref->dtype != TR_DTYPE_F32 && ref->dtype != TR_DTYPE_BF16 && ref->dtype != TR_DTYPE_F16)
        return cpu_invalid("%s: %s tensor (the cpu backend's element-wise ops take f32, bf16 and f16)", what,
                           tr_dtype_name(ref->dtype));
    if (cpu_compute_dtype_ok(ref->dtype) != HORA_OK) /* no such tensor comes from tensor_alloc */
        return cpu_invalid("%s: %s tensor, which this backend does not compute in: %s", what, tr_dtype_name(ref->dtype),
                           status_message());
    return cpu_check_tensor(backend, t, ref->n, ref->c, ref->h, ref->w, ref->dtype, what);
}

/* Checks an op's operands (named in its messages "op name": each of a's
 * shape and dtype; b absent where its name is NULL) and runs range over
 * them, split across the backend's threads. */
static hora_status_t cpu_eltwise_run(tr_backend_t *backend_base, const char *op, const char *const names[3],
                                     const tr_tensor_t *a, const tr_tensor_t *b, tr_tensor_t *y, int relu,
                                     void (*range)(const void *, size_t, size_t))
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL || a == NULL) return cpu_invalid("%s: NULL argument", op);
    const tr_tensor_t *operands[3] = {a, b, y};
    for (int i = 0; i < 3; i++) {
        if (names[i] == NULL) continue;
        char what[64];
        snprintf(what, sizeof(what), "%s %s", op, names[i]);
        CPU_CHECK(cpu_check_same(backend, a, operands[i], what));
    }
    const cpu_eltwise_args_t args = cpu_eltwise_args(a, a->data, b != NULL ? b->data : NULL, y->data, relu);
    cpu_split(backend, tr_tensor_count(a), range, &args);
    return HORA_OK;
}

hora_status_t cpu_relu_forward(tr_backend_t *backend_base, const tr_tensor_t *x, tr_tensor_t *y)
{
    static const char *const names[3] = {"x", NULL, "y"};
    return cpu_eltwise_run(backend_base, "relu_forward", names, x, NULL, y, 0, cpu_relu_range);
}

hora_status_t cpu_relu_backward(tr_backend_t *backend_base, const tr_tensor_t *y, const tr_tensor_t *dy,
                                tr_tensor_t *dx)
{
    static const char *const names[3] = {"y", "dy", "dx"};
    return cpu_eltwise_run(backend_base, "relu_backward", names, y, dy, dx, 0, cpu_relu_backward_range);
}

hora_status_t cpu_add_forward(tr_backend_t *backend_base, const tr_tensor_t *a, const tr_tensor_t *b, int relu,
                              tr_tensor_t *y)
{
    static const char *const names[3] = {"a", "b", "y"};
    return cpu_eltwise_run(backend_base, "add_forward", names, a, b, y, relu, cpu_add_range);
}
