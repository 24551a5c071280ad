/*
 * fuzz_jpeg.c - libFuzzer target for the loader's JPEG path: scaled decode,
 * crop choice, bilinear resampling, colour jitter, lighting, pad/crop, flip
 * and the normalising store (pipeline.c), on arbitrary bytes.
 *
 * Input: one mode byte, then the JPEG bytes. The mode picks train or val,
 * strict or not, NCHW or NHWC, f32 or f16 and one of a few output sizes, so
 * every branch is reachable from the corpus. Whatever the bytes, the result
 * is HORA_OK with every output value finite, or HORA_ERR_CORRUPT with a
 * message naming the sample; never a crash, a leak or a hang (the pixel
 * limit here is 4 megapixels so that huge headers fail fast).
 *
 * Build and run: see tests/trainer/fuzz/README.md.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "k_cpu.h"
#include "pipeline.h"

#define FUZZ_MAX_PIXELS (UINT64_C(1) << 22)

static const int fuzz_sizes[4] = {1, 7, 32, 61};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    uint8_t mode = data[0];
    tr_loader_config_t config = {.path = "fuzz",
                                 .split = mode & 1 ? TR_SPLIT_VAL : TR_SPLIT_TRAIN,
                                 .world = 1,
                                 .batch = 1,
                                 .seed = 42,
                                 .strict = (mode >> 1) & 1,
                                 .layout = (mode >> 2) & 1 ? TR_LAYOUT_NHWC : TR_LAYOUT_NCHW,
                                 .dtype = (mode >> 3) & 1 ? TR_DTYPE_F16 : TR_DTYPE_F32,
                                 .height = fuzz_sizes[(mode >> 4) & 3],
                                 .width = fuzz_sizes[(mode >> 6) & 3],
                                 .pad_crop = 2,
                                 .flip = 1,
                                 .random_resized_crop = 1,
                                 .jitter = 0.4f,
                                 .hue = 0.1f,
                                 .lighting = 0.1f,
                                 .mean = {0.485f, 0.456f, 0.406f},
                                 .std = {0.229f, 0.224f, 0.225f}};
    tr_dataset_t dataset = {.count = 1, .classes = 1, .kind = TR_PAYLOAD_KIND_JPEG, .channels = 3};
    tr_pipeline_t pipeline;
    if (tr_pipeline_init(&pipeline, &config, &dataset) != HORA_OK) abort();
    pipeline.max_pixels = FUZZ_MAX_PIXELS;
    tr_pipeline_scratch_t scratch;
    if (tr_pipeline_scratch_init(&pipeline, 1, &scratch) != HORA_OK) abort();
    size_t bytes = tr_pipeline_sample_bytes(&pipeline);
    uint8_t *out = malloc(bytes);
    tr_sample_t sample = {.label = 0,
                          .kind = TR_PAYLOAD_KIND_JPEG,
                          .channels = 3,
                          .data = data + 1,
                          .bytes = size - 1,
                          .path = "fuzz-input"};
    hora_status_t status = tr_pipeline_sample(&pipeline, &scratch, mode, 0, &sample, out);
    if (status == HORA_OK) {
        size_t count = bytes / (config.dtype == TR_DTYPE_F16 ? 2 : 4);
        for (size_t i = 0; i < count; i++) {
            float v = config.dtype == TR_DTYPE_F16 ? k_f16_to_f32(((uint16_t *)out)[i]) : ((float *)out)[i];
            if (!isfinite(v)) abort();
        }
    } else if (status != HORA_ERR_CORRUPT || strstr(status_message(), "fuzz-input") == NULL) {
        abort();
    }
    free(out);
    tr_pipeline_scratch_free(&scratch);
    return 0;
}
