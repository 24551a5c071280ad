/*
 * ops_tensor.c - tensors and the contract around the ops: import/export
 * round trips and the blocked layouts' element positions, a batch prefix of
 * a tensor, upload / download / fill_zero / gradient_ready, and the checks
 * every op makes of its tensors (memory kind, dtype, layout, shape).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_test.h"

void test_tensor_roundtrip(int n, int c, int h, int w)
{
    size_t count = (size_t)n * c * h * w;
    tr_tensor_t t = tensor_make(n, c, h, w);
    float *in = rand_array(count, 1.0f), *out = nan_array(count);
    tensor_put(&t, in);
    tensor_get(&t, out);
    int block = tensor_layout_block(&t);
    long wrong = memcmp(in, out, count * sizeof(float)) != 0;
    /* Where each element sits: nChw<B>c puts (n, c, h, w) at
     * ((n * C/B + c/B) * H*W + h*W + w) * B + c%B (nhwc: B = C); nchw at the usual place. */
    CHECK(t.layout == TR_LAYOUT_NCHW || c % block == 0, "layout %s for C %d", tr_layout_name(t.layout), c);
    CHECK(t.bytes >= count * sizeof(float) && t.dtype == TR_DTYPE_F32 && t.memory == ops->memory && t.ndim == 4,
          "tensor %zu bytes, %s, %s memory, ndim %d", t.bytes, tr_dtype_name(t.dtype), tr_memory_name(t.memory),
          t.ndim);
    const float *data = t.data;
    size_t hw = (size_t)h * w;
    for (int in_ = 0; in_ < n; in_++)
        for (int ic = 0; ic < c; ic++)
            for (size_t i = 0; i < hw; i++) {
                size_t pos = block == 1 ? ((size_t)in_ * c + ic) * hw + i
                                        : (((size_t)in_ * (c / block) + ic / block) * hw + i) * block + ic % block;
                wrong += memcmp(&data[pos], &in[((size_t)in_ * c + ic) * hw + i], sizeof(float)) != 0;
            }
    CHECK(wrong == 0, "tensor %dx%dx%dx%d %s: %ld misplaced", n, c, h, w, tr_layout_name(t.layout), wrong);
    /* A batch prefix: export the first n - 1 samples only, and import them
     * into a tensor whose last sample must stay as it was. */
    long prefix_wrong = 0;
    if (n > 1) {
        prefix_wrong = tensor_prefix_wrong(&t, in, in);
        tr_tensor_t too_many = param_nan(4, (const int[]){n + 1, c, h, w}); /* its own size: nothing read past it */
        CHECK(ops->tensor_import(be, &too_many, &t) == HORA_ERR_INVALID_ARG, "import of %d samples into %d accepted",
              n + 1, n);
        free(too_many.data);
    }
    CHECK(prefix_wrong == 0, "tensor %dx%dx%dx%d: the first %d samples alone did not round-trip", n, c, h, w, n - 1);
    printf("%s tensor %dx%dx%dx%d %-8s import/export round trip, element positions, batch prefix\n",
           wrong || prefix_wrong ? "FAIL" : "ok  ", n, c, h, w, tr_layout_name(t.layout));
    ops->tensor_free(be, &t);
    CHECK(t.data == NULL, "tensor_free left data");
    free(in);
    free(out);
}

void test_data_movement(void)
{
    const size_t count = 1001;
    void *buf = NULL;
    STATUS_OK(ops->buffer_alloc(be, count * sizeof(float), &buf));
    tr_tensor_t t = tr_tensor_plain(buf, TR_DTYPE_F32, ops->memory, 2, (const int[]){7, 143});
    float *in = rand_array(count, 1.0f), *out = nan_array(count);
    STATUS_OK(ops->upload(be, &t, in));
    STATUS_OK(ops->download(be, &t, out));
    int ok = memcmp(in, out, count * sizeof(float)) == 0;
    /* A view of the middle: only its bytes move. */
    tr_tensor_t mid = tr_tensor_view(&t, 100, 1, (const int[]){50});
    float fifty[50] = {0};
    STATUS_OK(ops->upload(be, &mid, fifty));
    STATUS_OK(ops->download(be, &t, out));
    ok &= out[99] == in[99] && out[100] == 0.0f && out[149] == 0.0f && out[150] == in[150];
    STATUS_OK(ops->fill_zero(be, &t));
    STATUS_OK(ops->download(be, &t, out));
    for (size_t i = 0; i < count; i++) ok &= out[i] == 0.0f;
    tr_event_t event = (tr_event_t)&event;
    STATUS_OK(ops->gradient_ready(be, &event));
    CHECK(ops->memory != TR_MEMORY_HOST || event == NULL, "gradient_ready on a host backend gave an event to wait on");
    CHECK(ok, "upload / download / fill_zero of %zu floats and a view of 50", count);
    tr_tensor_t blocked = t;
    blocked.layout = TR_LAYOUT_NCHW16C;
    CHECK(ops->upload(be, &blocked, in) == HORA_ERR_INVALID_ARG, "upload into a blocked tensor accepted");
    printf("%s data movement: upload, download, a view, fill_zero, gradient_ready\n", ok ? "ok  " : "FAIL");
    ops->buffer_free(be, buf);
    free(in);
    free(out);
}

/* The input step: u8 NHWC pixels of a batch prefix, normalised into an
 * activation, equal (p / 255 - mean) / std computed here in float, bit for
 * bit (p / 255 where std is 0); the last sample stays as it was; host
 * memory from host_alloc comes zeroed; pixels of another dtype or layout
 * are refused. */
void test_input_import(int n, int c, int h, int w)
{
    const size_t count = (size_t)n * c * h * w, per = count / (size_t)n;
    const float mean[3] = {0.485f, 0.456f, -0.25f}, std[3] = {0.229f, 0.0f, 2.5f};
    uint8_t *pixels = NULL;
    STATUS_OK(ops->host_alloc(be, count, (void **)&pixels));
    long wrong = 0;
    for (size_t i = 0; i < count; i++) wrong += pixels[i] != 0;
    CHECK(wrong == 0, "host_alloc: %ld bytes not zeroed", wrong);
    for (size_t i = 0; i < count; i++) pixels[i] = (uint8_t)(i < 256 ? i : rng_u64() >> 56);
    tr_tensor_t t = tensor_make(n, c, h, w);
    float *zeros = calloc(count, sizeof(float)), *got = nan_array(count);
    tensor_put(&t, zeros);
    tr_tensor_t px = tr_tensor_plain(pixels, TR_DTYPE_U8, TR_MEMORY_HOST, 4, (const int[]){n > 1 ? n - 1 : 1, c, h, w});
    px.layout = TR_LAYOUT_NHWC;
    STATUS_OK(ops->input_import(be, &px, mean, std, &t));
    tensor_get(&t, got);
    const size_t hw = (size_t)h * w;
    for (int s = 0; s < px.n; s++)
        for (int k = 0; k < c; k++)
            for (size_t p = 0; p < hw; p++) {
                float v = (float)pixels[((size_t)s * hw + p) * c + k];
                float want = std[k % 3] > 0.0f ? (v / 255.0f - mean[k % 3]) / std[k % 3] : v / 255.0f;
                wrong += memcmp(&got[((size_t)s * c + k) * hw + p], &want, sizeof(float)) != 0;
            }
    if (n > 1) wrong += memcmp(got + count - per, zeros, per * sizeof(float)) != 0;
    tr_tensor_t nchw = px;
    nchw.layout = TR_LAYOUT_NCHW;
    CHECK(ops->input_import(be, &nchw, mean, std, &t) == HORA_ERR_INVALID_ARG, "input_import of nchw pixels accepted");
    tr_tensor_t f32 = host_tensor(zeros, TR_DTYPE_F32, 4, (const int[]){n, c, h, w});
    f32.layout = TR_LAYOUT_NHWC;
    CHECK(ops->input_import(be, &f32, mean, std, &t) == HORA_ERR_INVALID_ARG, "input_import of f32 accepted");
    CHECK(wrong == 0, "input_import %dx%dx%dx%d: %ld values differ", n, c, h, w, wrong);
    printf("%s input_import %dx%dx%dx%d %-8s u8 nhwc -> normalised, batch prefix\n", wrong ? "FAIL" : "ok  ", n, c, h,
           w, tr_layout_name(t.layout));
    ops->tensor_free(be, &t);
    ops->host_free(be, pixels);
    free(zeros);
    free(got);
}

/* Every op takes tensors that say their memory kind, dtype and layout, and
 * refuses the ones it cannot take. */
void test_contract(void)
{
    tr_conv_desc_t d = {8, 5, 5, 8, 3, 1, 1, TR_DTYPE_F32, TR_DTYPE_F32};
    const int w_dims[4] = {8, 8, 3, 3};
    tr_layer_t *conv = NULL;
    STATUS_OK(ops->conv_create(be, &d, &conv));
    tr_tensor_t x = tensor_make(2, 8, 5, 5), y = tensor_make(2, 8, 5, 5);
    tr_tensor_t w = param_rand(4, w_dims, 0.5f);
    tensor_put(&x, w.data); /* any finite values: 400 of the 576 */
    STATUS_OK(ops->conv_forward(conv, &x, &w, &y));

    tr_tensor_t device = x;
    device.memory = TR_MEMORY_DEVICE;
    CHECK(ops->memory == TR_MEMORY_DEVICE || ops->conv_forward(conv, &device, &w, &y) == HORA_ERR_INVALID_ARG,
          "conv_forward took a device-memory input on a host backend");
    tr_tensor_t w_device = w;
    w_device.memory = TR_MEMORY_DEVICE;
    CHECK(ops->memory == TR_MEMORY_DEVICE || ops->conv_forward(conv, &x, &w_device, &y) == HORA_ERR_INVALID_ARG,
          "conv_forward took device-memory weights on a host backend");
    tr_tensor_t w_bf16 = w;
    w_bf16.dtype = TR_DTYPE_BF16;
    CHECK(ops->conv_forward(conv, &x, &w_bf16, &y) == HORA_ERR_INVALID_ARG, "conv_forward took bf16 weights");
    tr_tensor_t w_flat = host_tensor(w.data, TR_DTYPE_F32, 1, (const int[]){(int)tr_tensor_count(&w)});
    CHECK(ops->conv_forward(conv, &x, &w_flat, &y) == HORA_ERR_INVALID_ARG, "conv_forward took 1-D weights");
    tr_tensor_t x_relaid = x;
    x_relaid.layout = x.layout == TR_LAYOUT_NCHW ? TR_LAYOUT_NHWC : TR_LAYOUT_NCHW;
    CHECK(ops->conv_forward(conv, &x_relaid, &w, &y) == HORA_ERR_INVALID_ARG, "conv_forward took another layout");
    tr_tensor_t t = {0};
    hora_status_t st = ops->tensor_alloc(be, 2, 8, 5, 5, TR_DTYPE_BF16, &t);
    CHECK(st == HORA_ERR_UNSUPPORTED || (st == HORA_OK && t.dtype == TR_DTYPE_BF16),
          "tensor_alloc of bf16 activations: %d", (int)st);
    if (st == HORA_OK) ops->tensor_free(be, &t);
    /* The running statistics of another channel count. */
    tr_bn_desc_t bd = {8, 5, 5, 1e-5f, 0.1f, 0, TR_DTYPE_F32, TR_DTYPE_F32};
    tr_layer_t *bn = NULL;
    STATUS_OK(ops->bn_create(be, &bd, &bn));
    tr_tensor_t g8 = param_rand(1, (const int[]){8}, 1.0f), g7 = param_rand(1, (const int[]){7}, 1.0f);
    CHECK(ops->bn_forward_train(bn, &y, &g8, &g8, &g7, &g8, &x) == HORA_ERR_INVALID_ARG,
          "bn_forward_train took 7 running means for 8 channels");
    printf("ok   contract: memory kind, dtype, layout and shape of every kind of argument are checked\n");
    ops->layer_free(conv);
    ops->layer_free(bn);
    ops->tensor_free(be, &x);
    ops->tensor_free(be, &y);
    free(w.data);
    free(g8.data);
    free(g7.data);
}

void test_api(void)
{
    CHECK(tr_backend_find("cpu") == ops, "tr_backend_find(cpu)");
    CHECK(tr_backend_find("no-such-backend") == NULL && tr_backend_find(NULL) == NULL, "unknown backend found");
    CHECK(strstr(tr_backend_names(), "cpu") != NULL, "tr_backend_names: %s", tr_backend_names());
    CHECK(strcmp(tr_layout_name(TR_LAYOUT_NCHW16C), "nChw16c") == 0, "layout name");
    CHECK(tr_dtype_size(TR_DTYPE_BF16) == 2 && tr_dtype_size(TR_DTYPE_I32) == 4 &&
              !strcmp(tr_dtype_name(TR_DTYPE_F16), "f16"),
          "dtype sizes and names");
    tr_tensor_t t;
    CHECK(ops->tensor_alloc(be, 0, 1, 1, 1, TR_DTYPE_F32, &t) == HORA_ERR_INVALID_ARG, "tensor_alloc n = 0");
    tr_conv_desc_t bad = {1, 2, 2, 1, 5, 1, 0, TR_DTYPE_F32, TR_DTYPE_F32};
    tr_layer_t *layer = NULL;
    CHECK(ops->conv_create(be, &bad, &layer) == HORA_ERR_INVALID_ARG && layer == NULL, "conv bigger than input");
    void *buf = NULL;
    STATUS_OK(ops->buffer_alloc(be, 100, &buf));
    CHECK(buf != NULL && ((const unsigned char *)buf)[99] == 0, "buffer_alloc not zeroed");
    ops->buffer_free(be, buf);
    STATUS_OK(ops->synchronize(be));
    printf("ok   api: find, layout names, argument checks, buffers\n");
}
