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

hora_status_t cpu_relu_forward(tr_backend_t *backend_base, const tr_tensor_t *x, tr_tensor_t *y)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL || x == NULL) return cpu_invalid("relu_forward: NULL argument");
    CPU_CHECK(cpu_check_same(backend, x, x, "relu_forward x"));
    CPU_CHECK(cpu_check_same(backend, x, y, "relu_forward y"));
    const cpu_eltwise_args_t args = cpu_eltwise_args(x, x->data, NULL, y->data, 0);
    cpu_split(backend, tr_tensor_count(x), cpu_relu_range, &args);
    return HORA_OK;
}

hora_status_t cpu_relu_backward(tr_backend_t *backend_base, const tr_tensor_t *y, const tr_tensor_t *dy,
                                tr_tensor_t *dx)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL || y == NULL) return cpu_invalid("relu_backward: NULL argument");
    CPU_CHECK(cpu_check_same(backend, y, y, "relu_backward y"));
    CPU_CHECK(cpu_check_same(backend, y, dy, "relu_backward dy"));
    CPU_CHECK(cpu_check_same(backend, y, dx, "relu_backward dx"));
    const cpu_eltwise_args_t args = cpu_eltwise_args(y, y->data, dy->data, dx->data, 0);
    cpu_split(backend, tr_tensor_count(y), cpu_relu_backward_range, &args);
    return HORA_OK;
}

hora_status_t cpu_add_forward(tr_backend_t *backend_base, const tr_tensor_t *a, const tr_tensor_t *b, int relu,
                              tr_tensor_t *y)
{
    cpu_backend_t *backend = (cpu_backend_t *)backend_base;
    if (backend == NULL || a == NULL) return cpu_invalid("add_forward: NULL argument");
    CPU_CHECK(cpu_check_same(backend, a, a, "add_forward a"));
    CPU_CHECK(cpu_check_same(backend, a, b, "add_forward b"));
    CPU_CHECK(cpu_check_same(backend, a, y, "add_forward y"));
    const cpu_eltwise_args_t args = cpu_eltwise_args(a, a->data, b->data, y->data, relu);
    cpu_split(backend, tr_tensor_count(a), cpu_add_range, &args);
    return HORA_OK;
}
