/*
 * test_data_parallel.c - data parallelism is what it claims to be.
 *
 * Every rank derives the same global batch of size x B samples from a seed
 * and trains on its own block of B through the trainer (gradients averaged
 * by hora during backprop). Each rank also computes, without any
 * communication, the gradients of every block separately on a second copy of
 * the model and averages them. Batch norm statistics are per rank, so that
 * average - not one batch of size x B - is the reference: the all-reduced
 * gradients and the weights after the optimizer step must equal it up to
 * fp32 rounding of the average. Checked with overlap on, off and auto
 * (which switches between the two while it times them, then keeps one: the
 * same one on every rank), several steps in a row. With HORA_TIMELINE set
 * (meson sets it), rank 0 also checks in the trace that every fused gradient
 * all-reduce ran in place in the arena ("zero-copy"), never through the
 * fusion buffer. The last step of each run takes a smaller batch (B - 1 per
 * rank), as an epoch's last step does.
 *
 * usage: mpirun -np N test_data_parallel [MODEL]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "model.h"
#include "optim.h"
#include "rand.h"
#include "train.h"

#define B 4

static int failures;

/* An arena's values; the cpu backend's memory is the host's. */
static float *arena(tr_model_t *m, tr_arena_t a, size_t *count)
{
    const tr_tensor_t *t = tr_model_arena(m, a);
    if (t->memory != TR_MEMORY_HOST) {
        fprintf(stderr, "the test reads arenas in host memory\n");
        exit(1);
    }
    if (count) *count = tr_tensor_count(t);
    return t->data;
}

static void check(const char *what, const float *got, const float *want, size_t n, int rank)
{
    double max_abs = 0, max_ref = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= max_abs)) max_abs = isnan(d) ? INFINITY : d;
        max_ref = fmax(max_ref, fabs((double)want[i]));
    }
    /* Both sides compute the same per-block gradients with the same
     * primitives; only the averaging may round differently. */
    int ok = max_abs <= 1e-6 * (max_ref + 1e-3);
    if (!ok) failures++;
    if (rank == 0 || !ok)
        printf("rank %d: %-28s max|ref| %.3e max abs err %.3e %s\n", rank, what, max_ref, max_abs, ok ? "ok" : "FAIL");
}

static int run(const char *model_name, tr_overlap_t overlap, int rank, int size)
{
    tr_model_spec_t spec;
    if (tr_model_spec_from_name(model_name, &spec) != HORA_OK) return -1;
    spec.in_channels = 1;
    spec.height = spec.width = spec.stem == TR_STEM_IMAGENET ? 32 : 12;
    spec.base_width = 8;
    spec.classes = 5;
    spec.zero_init_last_bn = 0; /* every gradient nonzero */
    const struct tr_backend_ops *ops = tr_backend_find("cpu");
    tr_backend_config_t bc = {.threads = 1};
    tr_backend_t *backend;
    if (!ops || ops->init(&bc, &backend) != HORA_OK) return -1;
    tr_model_t *dist, *ref;
    if (tr_model_init(backend, &spec, B, 1, 7, &dist) != HORA_OK ||
        tr_model_init(backend, &spec, B, 0, 7, &ref) != HORA_OK)
        return -1;
    tr_step_config_t sc = {.overlap = overlap,
                           .optim = {.momentum = 0.9, .weight_decay = 1e-3, .nesterov = 1, .decay_bn_bias = 0}};
    tr_run_state_t state = tr_run_state_begin(7);
    tr_trainer_t *trainer;
    if (tr_trainer_init(dist, &sc, &state, &trainer) != HORA_OK) return -1;
    /* Rank 0's initial state everywhere (the seed is the same anyway; this
     * checks the broadcast keeps it). */
    if (tr_trainer_broadcast_state(trainer, 0, 0) != HORA_OK) return -1;
    size_t np;
    float *ref_params = arena(ref, TR_ARENA_PARAMS, &np);
    memcpy(ref_params, arena(dist, TR_ARENA_PARAMS, NULL), np * sizeof(float));

    size_t sample = (size_t)spec.in_channels * spec.height * spec.width;
    float *x = malloc((size_t)size * B * sample * sizeof(float));
    int32_t *y = malloc((size_t)size * B * sizeof(int32_t));
    size_t ng; /* gradients: np plus the arena's zero alignment gaps */
    arena(ref, TR_ARENA_GRADS, &ng);
    float *avg = calloc(ng, sizeof(float));
    /* Auto: through its probe and two steps past its decision. */
    int steps = overlap == TR_OVERLAP_AUTO ? TR_OVERLAP_PROBE_WARMUP + TR_OVERLAP_PROBE_STEPS + 2 : 3;
    for (int step = 0; step < steps; step++) {
        const int b = step == steps - 1 ? B - 1 : B; /* the last step: a partial batch */
        for (size_t i = 0; i < (size_t)size * b * sample; i++) x[i] = test_hash_signed(100 + step, i);
        for (int i = 0; i < size * b; i++) y[i] = (int32_t)((i * 7 + step) % spec.classes);

        /* Reference: each block's gradients on the local copy, averaged
         * exactly as the all-reduce does (sum in rank order, then / size). */
        float *rg = arena(ref, TR_ARENA_GRADS, NULL);
        for (int r = 0; r < size; r++) {
            float loss;
            tr_tensor_t xr = tr_tensor_plain(x + (size_t)r * b * sample, TR_DTYPE_F32, TR_MEMORY_HOST, 4,
                                             (const int[]){b, spec.in_channels, spec.height, spec.width});
            if (tr_model_forward(ref, &xr, 1) != HORA_OK ||
                tr_model_backward(ref, y + r * b, 0.0f, 1.0f, NULL, NULL, &loss) != HORA_OK)
                return -1;
            for (size_t k = 0; k < ng; k++) avg[k] = r == 0 ? rg[k] : avg[k] + rg[k];
        }
        for (size_t k = 0; k < ng; k++) avg[k] /= (float)size;

        float loss;
        tr_tensor_t xm = tr_tensor_plain(x + (size_t)rank * b * sample, TR_DTYPE_F32, TR_MEMORY_HOST, 4,
                                         (const int[]){b, spec.in_channels, spec.height, spec.width});
        if (tr_trainer_gradients(trainer, &xm, y + rank * b, &loss) != HORA_OK) {
            failures++;
            break;
        }
        char what[64];
        snprintf(what, sizeof(what), "step %d (batch %d) gradients", step, b);
        check(what, arena(dist, TR_ARENA_GRADS, NULL), avg, ng, rank);

        /* Same update on both sides from the same gradients. */
        double lr = 0.05 * (step % 3 + 1);
        memcpy(rg, avg, ng * sizeof(float));
        if (tr_optim_step(dist, &sc.optim, lr, 1.0) != HORA_OK || tr_optim_step(ref, &sc.optim, lr, 1.0) != HORA_OK)
            return -1;
        snprintf(what, sizeof(what), "step %d (batch %d) weights", step, b);
        check(what, arena(dist, TR_ARENA_PARAMS, NULL), arena(ref, TR_ARENA_PARAMS, NULL), np, rank);
        /* Keep the reference exactly on the distributed trajectory. */
        memcpy(arena(ref, TR_ARENA_PARAMS, NULL), arena(dist, TR_ARENA_PARAMS, NULL), np * sizeof(float));
    }
    if (overlap == TR_OVERLAP_AUTO) {
        double on, off;
        int got = tr_trainer_overlap(trainer, &on, &off);
        int range[2] = {-got, got}; /* every rank must have kept the same mode */
        hora_allreduce(range, range, 2, HORA_DTYPE_I32, HORA_OP_MAX);
        int ok = (got == 0 || got == 1) && -range[0] == range[1] && on > 0 && off > 0;
        if (!ok) failures++;
        if (rank == 0 || !ok)
            printf("rank %d: auto kept overlap %s (%.2f ms/step on, %.2f off; %s on every rank) %s\n", rank,
                   got == 1   ? "on"
                   : got == 0 ? "off"
                              : "undecided",
                   on, off, -range[0] == range[1] ? "the same" : "NOT the same", ok ? "ok" : "FAIL");
    }
    free(x);
    free(y);
    free(avg);
    tr_trainer_free(trainer);
    tr_model_free(dist);
    tr_model_free(ref);
    backend->ops->free(backend);
    return 0;
}

/* Occurrences of needle in the file at path; -1 if it cannot be read. */
static int count_in_file(const char *path, const char *needle)
{
    char *text = test_read_file(path, NULL);
    if (!text) return -1;
    int count = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) count++;
    free(text);
    return count;
}

int main(int argc, char **argv)
{
    const char *model = argc > 1 ? argv[1] : "resnet8";
    if (hora_init() != HORA_OK) {
        fprintf(stderr, "hora_init failed: %s\n", hora_last_error());
        return 1;
    }
    int rank = hora_rank(), size = hora_size();
    static const tr_overlap_t modes[] = {TR_OVERLAP_ON, TR_OVERLAP_OFF, TR_OVERLAP_AUTO};
    static const char *const mode_names[] = {"on", "off", "auto"};
    for (int m = 0; m < 3; m++) {
        if (rank == 0) printf("== %s, %d ranks x batch %d, overlap %s\n", model, size, B, mode_names[m]);
        if (run(model, modes[m], rank, size)) {
            fprintf(stderr, "rank %d: setup failed\n", rank);
            failures++;
        }
    }
    int total = failures;
    hora_allreduce(&total, &total, 1, HORA_DTYPE_I32, HORA_OP_SUM);
    hora_shutdown();
    const char *trace = getenv("HORA_TIMELINE");
    if (rank == 0 && trace && *trace) {
        int zero_copy = count_in_file(trace, "\"path\":\"zero-copy\""),
            copied = count_in_file(trace, "\"path\":\"fusion-buffer\"");
        int ok = zero_copy > 0 && copied == 0;
        printf("rank 0: timeline %s: %d all-reduce(s) in place, %d through the fusion buffer %s\n", trace, zero_copy,
               copied, ok ? "ok" : "FAIL");
        total += !ok;
    }
    if (rank == 0) printf("%s: %d failure(s)\n", total ? "FAIL" : "PASS", total);
    return total ? 1 : 0;
}
