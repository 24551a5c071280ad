/*
 * input.h - hora-train's input (input.c): the loaders over --data and their
 * batches as the model's input, or the one --synthetic batch. A device
 * backend takes u8 NHWC pixels in its pinned host memory and normalises them
 * itself; the cpu backend takes normalised f32 NCHW batches.
 */
#ifndef TR_CLI_INPUT_H
#define TR_CLI_INPUT_H

#include "session.h"

/* The mean and deviation the data is normalised with: Fashion-MNIST's for
 * one channel, ImageNet's for three. */
void input_stats(int channels, float mean[3], float std[3]);
/* 1 when the backend takes u8 pixels in device memory. */
int input_on_device(const run_t *r);
/* Batch memory from the backend's host memory (ctx: the tr_backend_t). */
void *input_batch_alloc(void *ctx, size_t bytes);
void input_batch_free(void *ctx, void *ptr);
/* A loader batch as the model's input: its valid samples only. */
tr_tensor_t input_batch_tensor(const run_t *r, const tr_batch_t *b, const tr_model_spec_t *spec);
/* A loader over split of --data (channels 0: not known yet); a failure is
 * reported. */
hora_status_t input_open_loader(run_t *r, tr_split_t split, int channels, tr_loader_t **out);
/* r->synthetic_x and r->synthetic_y for --synthetic. */
hora_status_t input_synthetic(run_t *r, const tr_model_spec_t *spec);

#endif
