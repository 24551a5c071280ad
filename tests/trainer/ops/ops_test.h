/*
 * ops_test.h - what the files of test_ops share (ops_common.c): the backend
 * under test, random numbers, host arrays, error bookkeeping against
 * references, backend tensors filled from and read into host arrays, and
 * the finite-difference check.
 *
 * test_ops checks every op of a compute backend (trainer/backends/backend.h) on small
 * shapes, one file per family of ops:
 *   ops_conv.c        convolution
 *   ops_bn.c          batch norm (+ fused relu)
 *   ops_pool_linear.c max / global average pooling, the linear layer
 *   ops_misc.c        relu, add, softmax cross-entropy, SGD
 *   ops_tensor.c      tensors, layouts, data movement, the contract's checks
 *   test_ops.c        main: the shapes and batch sizes each test runs at
 * Layers are created once and run at several batch sizes in turn (more than
 * a layer caches), each checked in full, as a run's last partial batch and
 * its evaluation batches use them.
 */
#ifndef TEST_OPS_H
#define TEST_OPS_H

#define CHECK_SHARED
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "check.h"
#include "rand.h"

extern const struct tr_backend_ops *ops;
extern tr_backend_t *be;
extern test_rng_t ops_rng; /* one fixed stream for the whole run */

static inline uint64_t rng_u64(void) { return test_rng_u64(&ops_rng); }
static inline double rng_unit(void) { return test_rng_unit(&ops_rng); }
static inline float rng_sym(float scale) { return (float)((2.0 * rng_unit() - 1.0) * scale); }

float *rand_array(size_t count, float scale);
float *nan_array(size_t count);
double dot(const float *y, const float *r, size_t count);

/* got against want: passes when max |got - want| <= tol * max |want| (an
 * error relative to the tensor's scale) and every value is finite. */
void compare(const char *what, const float *got, const double *want, size_t count, double tol);

#define STATUS_OK(call)                                           \
    do {                                                          \
        hora_status_t st_ = (call);                               \
        CHECK(st_ == HORA_OK, "%s returned %d", #call, (int)st_); \
    } while (0)

/* Backend activations and host arrays in NCHW. */
tr_tensor_t tensor_make(int n, int c, int h, int w);
void tensor_put(tr_tensor_t *t, const float *host);
void tensor_get(const tr_tensor_t *t, float *host);
/* A batch prefix of t (n > 1 samples): the first n - 1 exported must equal
 * expect (the slot after them untouched: NaN), and importing the first n - 1
 * of in over a zeroed t must give expect there and leave the last sample 0.
 * Returns how many of the two checks failed. */
long tensor_prefix_wrong(tr_tensor_t *t, const float *in, const float *expect);
/* The channel block of t's layout: 8 or 16 for nChw8c / nChw16c, c for NHWC, 1 for NCHW. */
int tensor_layout_block(const tr_tensor_t *t);
void tensor_poison(tr_tensor_t *t);
/* A plain host tensor over data (parameters, logits, ...): the cpu
 * backend's memory is the host's. */
tr_tensor_t host_tensor(void *data, tr_dtype_t dtype, int ndim, const int *dims);
/* The same over a fresh host array of count floats from rand_array / nan_array. */
tr_tensor_t param_rand(int ndim, const int *dims, float scale);
tr_tensor_t param_nan(int ndim, const int *dims);

/* Compare analytic[i] with (L(p + eps e_i) - L(p - eps e_i)) / 2 eps for
 * all i (small tensors) or a sample; loss reads p, which this perturbs in
 * place and restores. skip[i] != 0 leaves an element out (next to a kink). */
typedef double (*loss_fn)(void *ctx);
void fd_check(const char *what, float *p, size_t count, const float *analytic, double eps, loss_fn loss, void *ctx,
              const unsigned char *skip, double tol);

/* A convolution or pooling layer under fd_check: its loss (fd_layer_loss) is
 * forward(x_host) . r, with y read back into y_host. */
typedef struct fd_layer fd_layer_t;
struct fd_layer {
    tr_layer_t *layer;
    tr_tensor_t x, y, w; /* w: a convolution's weights */
    float *x_host, *y_host, *r;
    size_t y_count;
    void (*forward)(fd_layer_t *c); /* y from x (and w), its status checked */
};
double fd_layer_loss(void *p);
/* Frees what c holds: its tensors and arrays, and its layer when the test
 * made it (the caller's layer, given as `layer`, was NULL). */
void fd_layer_free(fd_layer_t *c, const tr_layer_t *layer);

/* The families (one file each). */
void test_conv(tr_layer_t *layer, const tr_conv_desc_t *d, int n);
void test_bn(tr_layer_t *layer, const tr_bn_desc_t *d, int n);
void test_pool(tr_layer_t *layer, const tr_pool_desc_t *d, int n);
void test_linear(tr_layer_t *layer, const tr_linear_desc_t *d, int n);
void test_eltwise(int n, int c, int h, int w);
void test_softmax_xent(int n, int k, float smoothing);
void test_sgd(size_t count);
/* backend.h's SGD step on f32 (or widened) gradients, g = grad * grad_scale
 * first (0 means 1), one rounding per operation (no FMA). */
void sgd_ref(float *p, const float *g, float *m_buf, size_t count, const tr_sgd_args_t *a);
/* The convolution in double (NCHW): y, and with dy also dx and dw (else
 * all three NULL); ops_common.c. */
void conv_ref(const tr_conv_desc_t *d, int batch, int ho, int wo, const float *x, const float *w, const float *dy,
              double *y, double *dx, double *dw);
/* Channel c's batch mean and biased variance in double (NCHW); ops_common.c. */
void bn_stats_ref(const float *x, int batch, int channels, size_t hw, int c, double *mean, double *var);
void test_tensor_roundtrip(int n, int c, int h, int w);
void test_data_movement(void);
void test_input_import(int n, int c, int h, int w);
void test_contract(void);
void test_api(void);

#endif
