/*
 * test_gpu_nn.c - the layer kernels of kernels/cuda (k_cuda_* of
 * k_cuda_nn.h: batch norm, pooling, relu, add) against their CPU twins
 * (k_twin_*), bit for bit, on a GPU: every dtype (f32, f16, bf16), the
 * batch-norm variants (relu, residual + relu, inference, backward with
 * the relu mask and dresidual, dgamma / dbeta in every grad dtype, dx in
 * place), shapes from one partial chunk to more chunks than merge threads
 * and C not a multiple of 8 or of 32, a NaN planted in one channel; max
 * pools (ResNet's 3x3 s2 p1 and others, ties and NaNs) forward and
 * backward; global average pool; relu, relu backward, add (+relu), in
 * place too; the 16-byte vector paths (aligned buffers, c a multiple of
 * the vector) and the scalar ones (an input one element off, other c);
 * bad arguments (K_CUDA_ERR_INVALID_VALUE).
 *
 * Device outputs are filled with all-ones bits (a NaN) and the twin's with
 * 0x5A bytes (finite) before each call, so an unwritten element cannot
 * pass; a guard after each device output must stay. Comparisons are on
 * bits; a NaN equals any NaN (payloads are not specified).
 *
 *   test_gpu_nn          exit 0 pass, 1 fail, 77 skip (no usable GPU)
 *   test_gpu_nn bench    also times batch norm on a ResNet-50 shape
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "clock.h"
#include "floats.h"
#include "cuda_ok.h"
#include "k_cpu.h"
#include "k_cuda_nn.h"
#include "rand.h"

#define GUARD 64
#define GUARD_BYTE 0xC3

static test_rng_t rng;
static cudaStream_t stream;
static int printed;

static const k_dtype_t dtypes[3] = {K_DTYPE_F32, K_DTYPE_F16, K_DTYPE_BF16};

static const char *dname(k_dtype_t dt) { return dt == K_DTYPE_F16 ? "f16" : dt == K_DTYPE_BF16 ? "bf16" : "f32"; }

/* ---- paired buffers: a host one (the twin's) and a device one ----------------------- */

typedef struct {
    unsigned char *host;
    unsigned char *dev; /* base + offset: bytes, then GUARD */
    unsigned char *base;
    size_t bytes;
} pair_t;

/* The device side at offset bytes past a 256-byte boundary: 0 takes the
 * 16-byte vector paths, an element's size the scalar ones. */
static pair_t pair_new_at(size_t bytes, size_t offset)
{
    pair_t p = {malloc(bytes ? bytes : 1), NULL, NULL, bytes};
    if (p.host == NULL) {
        fprintf(stderr, "FAIL: out of host memory\n");
        exit(1);
    }
    CUDA_OK(cudaMalloc((void **)&p.base, offset + bytes + GUARD));
    p.dev = p.base + offset;
    return p;
}

static pair_t pair_new(size_t bytes) { return pair_new_at(bytes, 0); }

static void pair_free(pair_t *p)
{
    free(p->host);
    CUDA_OK(cudaFree(p->base));
}

/* An input: the same random bytes on both sides (set by the caller in host). */
static void pair_upload(const pair_t *p)
{
    CUDA_OK(cudaMemcpy(p->dev, p->host, p->bytes, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(p->dev + p->bytes, GUARD_BYTE, GUARD));
}

/* An output: poisoned differently on the two sides. */
static void pair_poison(const pair_t *p)
{
    memset(p->host, 0x5A, p->bytes);
    CUDA_OK(cudaMemset(p->dev, 0xFF, p->bytes));
    CUDA_OK(cudaMemset(p->dev + p->bytes, GUARD_BYTE, GUARD));
}

static int raw_nan(k_dtype_t dt, const unsigned char *p)
{
    if (dt == K_DTYPE_F32) {
        uint32_t v;
        memcpy(&v, p, 4);
        return (v & 0x7FFFFFFFu) > 0x7F800000u;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return dt == K_DTYPE_F16 ? (h & 0x7FFFu) > 0x7C00u : (h & 0x7FFFu) > 0x7F80u;
}

/* Reads the device side back and compares it with the twin's, element by
 * element of size(dt) bytes (dt < 0: raw bytes). */
static void pair_compare(const pair_t *p, int dt, const char *what)
{
    unsigned char *back = malloc(p->bytes + GUARD);
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaMemcpy(back, p->dev, p->bytes + GUARD, cudaMemcpyDeviceToHost));
    size_t size = dt < 0 ? 1 : k_dtype_size((k_dtype_t)dt), bad = 0, first = 0;
    for (size_t i = 0; i < p->bytes / size; i++) {
        const unsigned char *a = back + i * size, *b = p->host + i * size;
        int same = memcmp(a, b, size) == 0 || (dt >= 0 && raw_nan((k_dtype_t)dt, a) && raw_nan((k_dtype_t)dt, b));
        if (!same && bad++ == 0) first = i;
    }
    int guard = 1;
    for (size_t i = 0; i < GUARD; i++) guard &= back[p->bytes + i] == GUARD_BYTE;
    checks++;
    if (bad || !guard) {
        failures++;
        if (printed++ < 30) {
            uint32_t g = 0, t = 0;
            if (bad) {
                memcpy(&g, back + first * size, size);
                memcpy(&t, p->host + first * size, size);
            }
            fprintf(stderr, "FAIL %s: %zu of %zu elements differ (first %zu: gpu 0x%x twin 0x%x)%s\n", what, bad,
                    p->bytes / size, first, g, t, guard ? "" : ", guard overwritten");
        }
    }
    free(back);
}

static void fill(pair_t *p, k_dtype_t dt, size_t count, double mu, double sigma)
{
    for (size_t i = 0; i < count; i++) test_float_put(p->host, dt, i, mu + sigma * (2.0 * test_rng_unit(&rng) - 1.0));
    pair_upload(p);
}

static void fill_f32(pair_t *p, int c, double lo, double hi)
{
    for (int i = 0; i < c; i++) test_float_put(p->host, K_DTYPE_F32, i, lo + (hi - lo) * test_rng_unit(&rng));
    pair_upload(p);
}

/* ---- batch norm ---------------------------------------------------------------------- */

static void test_bn(size_t rows, int c, k_dtype_t dt, k_dtype_t gdt, int relu, int with_res, int plant_nan, double mu,
                    int unaligned)
{
    const size_t size = k_dtype_size(dt), bytes = rows * c * size, cb = (size_t)c * 4;
    char what[160];
    snprintf(what, sizeof(what), "bn %zux%d %s grad %s%s%s%s%s", rows, c, dname(dt), dname(gdt), relu ? " relu" : "",
             with_res ? " +res" : "", plant_nan ? " nan" : "", unaligned ? " unaligned" : "");
    pair_t x = pair_new_at(bytes, unaligned ? size : 0), res = pair_new(bytes), y = pair_new(bytes);
    pair_t dy = pair_new(bytes);
    pair_t dx = pair_new(bytes), dres = pair_new(bytes), yi = pair_new(bytes);
    pair_t gamma = pair_new(cb), beta = pair_new(cb), rm = pair_new(cb), rv = pair_new(cb);
    pair_t mean = pair_new(cb), invstd = pair_new(cb);
    pair_t dgamma = pair_new((size_t)c * k_dtype_size(gdt)), dbeta = pair_new((size_t)c * k_dtype_size(gdt));
    void *ws;
    CUDA_OK(cudaMalloc(&ws, K_CUDA_BN_WORKSPACE_BYTES(rows, c)));
    fill(&x, dt, rows * c, mu, 1.0);
    if (plant_nan) {
        test_float_put(x.host, dt, test_rng_below(&rng, (uint32_t)(rows * c)), NAN);
        pair_upload(&x);
    }
    fill(&res, dt, rows * c, 0.0, 1.0);
    fill(&dy, dt, rows * c, 0.0, 1.0);
    fill_f32(&gamma, c, 0.5, 2.0);
    fill_f32(&beta, c, -1.0, 1.0);
    fill_f32(&rm, c, -1.0, 1.0);
    fill_f32(&rv, c, 0.5, 2.0);
    pair_poison(&y), pair_poison(&mean), pair_poison(&invstd);
    const void *r_dev = with_res ? res.dev : NULL, *r_host = with_res ? res.host : NULL;
    int st = k_cuda_bn_forward_train(y.dev, x.dev, r_dev, dt, rows, c, (float *)gamma.dev, (float *)beta.dev,
                                     (float *)rm.dev, (float *)rv.dev, 0.1f, 1e-5f, relu, (float *)mean.dev,
                                     (float *)invstd.dev, ws, stream);
    int tt = k_twin_bn_forward_train(y.host, x.host, r_host, dt, rows, c, (float *)gamma.host, (float *)beta.host,
                                     (float *)rm.host, (float *)rv.host, 0.1f, 1e-5f, relu, (float *)mean.host,
                                     (float *)invstd.host);
    CHECK(st == 0 && tt == 0, "%s: forward status %d (%s), twin %d", what, st, k_cuda_error_string(st), tt);
    char sub[200];
    snprintf(sub, sizeof(sub), "%s: y", what), pair_compare(&y, dt, sub);
    snprintf(sub, sizeof(sub), "%s: mean", what), pair_compare(&mean, K_DTYPE_F32, sub);
    snprintf(sub, sizeof(sub), "%s: invstd", what), pair_compare(&invstd, K_DTYPE_F32, sub);
    snprintf(sub, sizeof(sub), "%s: running mean", what), pair_compare(&rm, K_DTYPE_F32, sub);
    snprintf(sub, sizeof(sub), "%s: running var", what), pair_compare(&rv, K_DTYPE_F32, sub);

    pair_poison(&yi);
    st = k_cuda_bn_forward_infer(yi.dev, x.dev, r_dev, dt, rows, c, (float *)gamma.dev, (float *)beta.dev,
                                 (float *)rm.dev, (float *)rv.dev, 1e-5f, relu, ws, stream);
    tt = k_twin_bn_forward_infer(yi.host, x.host, r_host, dt, rows, c, (float *)gamma.host, (float *)beta.host,
                                 (float *)rm.host, (float *)rv.host, 1e-5f, relu);
    CHECK(st == 0 && tt == 0, "%s: inference status %d, twin %d", what, st, tt);
    snprintf(sub, sizeof(sub), "%s: inference y", what), pair_compare(&yi, dt, sub);

    /* Backward: relu mask from y when relu; dresidual with the residual;
     * in place (dx = dy) without it. */
    const int in_place = !with_res && !relu;
    pair_poison(&dx), pair_poison(&dres), pair_poison(&dgamma), pair_poison(&dbeta);
    void *out_dev = in_place ? dy.dev : dx.dev, *out_host = in_place ? dy.host : dx.host;
    st = k_cuda_bn_backward(out_dev, with_res && relu ? dres.dev : NULL, x.dev, dy.dev, relu ? y.dev : NULL, dt, rows,
                            c, (float *)gamma.dev, (float *)mean.dev, (float *)invstd.dev, dgamma.dev, dbeta.dev, gdt,
                            ws, stream);
    tt = k_twin_bn_backward(out_host, with_res && relu ? dres.host : NULL, x.host, dy.host, relu ? y.host : NULL, dt,
                            rows, c, (float *)gamma.host, (float *)mean.host, (float *)invstd.host, dgamma.host,
                            dbeta.host, gdt);
    CHECK(st == 0 && tt == 0, "%s: backward status %d, twin %d", what, st, tt);
    snprintf(sub, sizeof(sub), "%s: dx%s", what, in_place ? " in place" : "");
    pair_compare(in_place ? &dy : &dx, dt, sub);
    if (with_res && relu) snprintf(sub, sizeof(sub), "%s: dresidual", what), pair_compare(&dres, dt, sub);
    snprintf(sub, sizeof(sub), "%s: dgamma", what), pair_compare(&dgamma, gdt, sub);
    snprintf(sub, sizeof(sub), "%s: dbeta", what), pair_compare(&dbeta, gdt, sub);

    CUDA_OK(cudaFree(ws));
    pair_t *all[] = {&x, &res, &y, &dy, &dx, &dres, &yi, &gamma, &beta, &rm, &rv, &mean, &invstd, &dgamma, &dbeta};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) pair_free(all[i]);
}

/* ---- pooling, element-wise ------------------------------------------------------------- */

static void test_maxpool(k_cuda_pool_t p, k_dtype_t dt, int ties)
{
    const int ho = (p.h + 2 * p.pad - p.kernel) / p.stride + 1, wo = (p.w + 2 * p.pad - p.kernel) / p.stride + 1;
    const size_t in = (size_t)p.n * p.h * p.w * p.c, out = (size_t)p.n * ho * wo * p.c, size = k_dtype_size(dt);
    char what[128];
    snprintf(what, sizeof(what), "maxpool %dx%dx%dx%d k%d s%d p%d %s%s", p.n, p.h, p.w, p.c, p.kernel, p.stride, p.pad,
             dname(dt), ties ? " ties" : "");
    pair_t x = pair_new(in * size), y = pair_new(out * size), am = pair_new(out), dy = pair_new(out * size);
    pair_t dx = pair_new(in * size);
    for (size_t i = 0; i < in; i++)
        test_float_put(x.host, dt, i, ties ? (double)test_rng_below(&rng, 3) : 4.0 * test_rng_unit(&rng) - 2.0);
    test_float_put(x.host, dt, test_rng_below(&rng, (uint32_t)in), NAN);
    pair_upload(&x);
    fill(&dy, dt, out, 0.0, 1.0);
    pair_poison(&y), pair_poison(&am), pair_poison(&dx);
    int st = k_cuda_maxpool_forward(y.dev, am.dev, x.dev, dt, &p, stream);
    int tt = k_twin_maxpool_forward(y.host, am.host, x.host, dt, &p);
    CHECK(st == 0 && tt == 0, "%s: status %d, twin %d", what, st, tt);
    pair_compare(&y, dt, what);
    pair_compare(&am, -1, what);
    /* The backward reads the argmax each side made (equal when the above passed). */
    st = k_cuda_maxpool_backward(dx.dev, dy.dev, am.dev, dt, &p, stream);
    tt = k_twin_maxpool_backward(dx.host, dy.host, am.host, dt, &p);
    CHECK(st == 0 && tt == 0, "%s: backward status %d, twin %d", what, st, tt);
    pair_compare(&dx, dt, what);
    pair_free(&x), pair_free(&y), pair_free(&am), pair_free(&dy), pair_free(&dx);
}

static void test_avgpool(int n, int hw, int c, k_dtype_t dt)
{
    const size_t size = k_dtype_size(dt), in = (size_t)n * hw * c, out = (size_t)n * c;
    char what[96];
    snprintf(what, sizeof(what), "avgpool %dx%dx%d %s", n, hw, c, dname(dt));
    pair_t x = pair_new(in * size), y = pair_new(out * size), dx = pair_new(in * size);
    fill(&x, dt, in, 0.5, 2.0);
    pair_poison(&y), pair_poison(&dx);
    CHECK(k_cuda_avgpool_forward(y.dev, x.dev, dt, n, hw, c, stream) == 0 &&
              k_twin_avgpool_forward(y.host, x.host, dt, n, hw, c) == 0,
          "%s: status", what);
    pair_compare(&y, dt, what);
    CHECK(k_cuda_avgpool_backward(dx.dev, y.dev, dt, n, hw, c, stream) == 0 &&
              k_twin_avgpool_backward(dx.host, y.host, dt, n, hw, c) == 0,
          "%s: backward status", what);
    pair_compare(&dx, dt, what);
    pair_free(&x), pair_free(&y), pair_free(&dx);
}

static void test_elementwise(size_t count, k_dtype_t dt, int unaligned)
{
    const size_t size = k_dtype_size(dt);
    char what[96];
    pair_t a = pair_new_at(count * size, unaligned ? size : 0), b = pair_new(count * size), y = pair_new(count * size);
    fill(&a, dt, count, 0.0, 2.0);
    fill(&b, dt, count, 0.0, 2.0);
    if (count > 2) {
        test_float_put(a.host, dt, 0, NAN), test_float_put(a.host, dt, 1, -0.0);
        pair_upload(&a);
    }
    snprintf(what, sizeof(what), "relu %zu %s%s", count, dname(dt), unaligned ? " unaligned" : "");
    pair_poison(&y);
    CHECK(k_cuda_relu_forward(y.dev, a.dev, dt, count, stream) == 0 &&
              k_twin_relu_forward(y.host, a.host, dt, count) == 0,
          "%s: status", what);
    pair_compare(&y, dt, what);
    snprintf(what, sizeof(what), "relu backward %zu %s", count, dname(dt));
    /* in place: dx = dy = b */
    CHECK(k_cuda_relu_backward(b.dev, y.dev, b.dev, dt, count, stream) == 0 &&
              k_twin_relu_backward(b.host, y.host, b.host, dt, count) == 0,
          "%s: status", what);
    pair_compare(&b, dt, what);
    for (int relu = 0; relu < 2; relu++) {
        snprintf(what, sizeof(what), "add%s %zu %s", relu ? "+relu" : "", count, dname(dt));
        pair_poison(&y);
        CHECK(k_cuda_add_forward(y.dev, a.dev, b.dev, dt, count, relu, stream) == 0 &&
                  k_twin_add_forward(y.host, a.host, b.host, dt, count, relu) == 0,
              "%s: status", what);
        pair_compare(&y, dt, what);
    }
    pair_free(&a), pair_free(&b), pair_free(&y);
}

static void test_bad_arguments(void)
{
    const int E = K_CUDA_ERR_INVALID_VALUE;
    pair_t buf = pair_new(1024);
    pair_poison(&buf);
    float *d = (float *)buf.dev;
    CHECK(k_cuda_bn_forward_train(d, d, NULL, K_DTYPE_F32, 1, 1, d, d, d, d, 0.1f, 1e-5f, 0, d, d, d, stream) == E,
          "bn rows 1");
    CHECK(k_cuda_bn_forward_train(d, d, NULL, K_DTYPE_F64, 4, 1, d, d, d, d, 0.1f, 1e-5f, 0, d, d, d, stream) == E,
          "bn f64");
    CHECK(k_cuda_bn_forward_infer(d, d, NULL, K_DTYPE_F32, 4, 1, d, d, d, d, 1e-5f, 0, NULL, stream) == E,
          "bn no workspace");
    CHECK(k_cuda_bn_backward(d, d, d, d, NULL, K_DTYPE_F32, 4, 1, d, d, d, d, d, K_DTYPE_F32, d, stream) == E,
          "bn dresidual without y");
    k_cuda_pool_t bad = {1, 4, 4, 1, 3, 2, 2};
    CHECK(k_cuda_maxpool_forward(d, buf.dev, d, K_DTYPE_F32, &bad, stream) == E, "maxpool pad");
    CHECK(k_cuda_avgpool_forward(d, d, K_DTYPE_F32, 1, 0, 1, stream) == E, "avgpool hw 0");
    CHECK(k_cuda_relu_forward(d, d, K_DTYPE_I32, 4, stream) == E, "relu i32");
    CHECK(k_cuda_relu_forward(NULL, NULL, K_DTYPE_F32, 0, stream) == 0, "relu of nothing");
    memset(buf.host, 0xFF, buf.bytes); /* unwritten: still the device poison */
    pair_compare(&buf, -1, "bad arguments wrote nothing");
    pair_free(&buf);
}

/* ---- bench ---------------------------------------------------------------------------- */

static void bench(void)
{
    /* ResNet-50's first BN: 256 x 112 x 112 x 64 f16. */
    const size_t rows = (size_t)256 * 112 * 112;
    const int c = 64;
    const size_t bytes = rows * c * 2;
    void *x, *y, *dy, *ws;
    float *v;
    CUDA_OK(cudaMalloc(&x, bytes));
    CUDA_OK(cudaMalloc(&y, bytes));
    CUDA_OK(cudaMalloc(&dy, bytes));
    CUDA_OK(cudaMalloc(&ws, K_CUDA_BN_WORKSPACE_BYTES(rows, c)));
    CUDA_OK(cudaMalloc((void **)&v, 8 * c * sizeof(float)));
    CUDA_OK(cudaMemset(x, 0x3C, bytes));
    CUDA_OK(cudaMemset(dy, 0x3C, bytes));
    CUDA_OK(cudaMemset(v, 0, 8 * c * sizeof(float)));
    for (int pass = 0; pass < 3; pass++) {
        const int reps = 10;
        CUDA_OK(cudaStreamSynchronize(stream));
        double t0 = test_now_s();
        for (int r = 0; r < reps; r++)
            k_cuda_bn_forward_train(y, x, NULL, K_DTYPE_F16, rows, c, v, v + c, v + 2 * c, v + 3 * c, 0.1f, 1e-5f, 1,
                                    v + 4 * c, v + 5 * c, ws, stream);
        CUDA_OK(cudaStreamSynchronize(stream));
        double t1 = test_now_s();
        for (int r = 0; r < reps; r++)
            k_cuda_bn_backward(dy, NULL, x, dy, y, K_DTYPE_F16, rows, c, v, v + 4 * c, v + 5 * c, v + 6 * c, v + 7 * c,
                               K_DTYPE_F32, ws, stream);
        CUDA_OK(cudaStreamSynchronize(stream));
        double t2 = test_now_s();
        double f = (t1 - t0) / reps, b = (t2 - t1) / reps;
        printf("bench bn 256x112x112x64 f16 +relu: forward %.3f ms (%.0f GB/s at 3 passes), backward %.3f ms "
               "(%.0f GB/s at 6 passes)\n",
               f * 1e3, 3.0 * bytes / f / 1e9, b * 1e3, 6.0 * bytes / b / 1e9);
    }
    CUDA_OK(cudaFree(x));
    CUDA_OK(cudaFree(y));
    CUDA_OK(cudaFree(dy));
    CUDA_OK(cudaFree(ws));
    CUDA_OK(cudaFree(v));
}

int main(int argc, char **argv)
{
    gpu_test_open("test_gpu_nn");
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    rng = test_rng_seeded(TEST_RNG_SEED ^ 0x67707532); /* "gpu2" */

    static const struct {
        size_t rows;
        int c;
        double mu;
    } shapes[] = {{2, 1, 0.0},    {3, 5, 1.0},      {127, 3, -2.0}, {128, 7, 0.0},    {129, 13, 5.0},   {1000, 33, 0.0},
                  {300, 64, 0.1}, {40000, 3, -1.0}, {257, 67, 3.0}, {6272, 256, 0.5}, {33000, 40, 30.0}};
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++)
        for (int d = 0; d < 3; d++) {
            test_bn(shapes[k].rows, shapes[k].c, dtypes[d], K_DTYPE_F32, 0, 0, 0, shapes[k].mu, 0);
            test_bn(shapes[k].rows, shapes[k].c, dtypes[d], dtypes[(d + k) % 3], 1, 0, k % 4 == 1, shapes[k].mu, 0);
            test_bn(shapes[k].rows, shapes[k].c, dtypes[d], dtypes[(d + k + 1) % 3], 1, 1, 0, shapes[k].mu, 0);
            test_bn(shapes[k].rows, shapes[k].c, dtypes[d], K_DTYPE_F32, 0, 1, 0, shapes[k].mu, 1);
        }
    const k_cuda_pool_t pools[] = {{2, 7, 5, 3, 3, 2, 1}, {1, 9, 9, 10, 3, 2, 1},    {3, 8, 6, 5, 2, 2, 0},
                                   {1, 6, 7, 9, 3, 1, 1}, {2, 3, 4, 2, 1, 1, 0},     {2, 11, 13, 3, 4, 3, 2},
                                   {1, 8, 9, 2, 2, 3, 0}, {4, 112, 112, 64, 3, 2, 1}};
    for (size_t k = 0; k < sizeof(pools) / sizeof(pools[0]); k++)
        for (int d = 0; d < 3; d++)
            for (int ties = 0; ties < 2; ties++) test_maxpool(pools[k], dtypes[d], ties);
    for (int d = 0; d < 3; d++) {
        test_avgpool(1, 1, 1, dtypes[d]);
        test_avgpool(3, 49, 67, dtypes[d]);
        test_avgpool(32, 49, 2048, dtypes[d]);
        for (size_t count = 1; count < 80; count += 13) test_elementwise(count, dtypes[d], (int)(count % 2));
        test_elementwise(1000003, dtypes[d], 0);
        test_elementwise(1000003, dtypes[d], 1);
    }
    test_bad_arguments();
    if (argc > 1 && strcmp(argv[1], "bench") == 0) bench();
    CUDA_OK(cudaStreamDestroy(stream));
    printf("%s: %d checks, %d failures\n", failures ? "FAIL" : "ok", checks, failures);
    return failures ? 1 : 0;
}
