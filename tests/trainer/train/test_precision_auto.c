/*
 * test_precision_auto.c - --precision auto's measurement (trainer/core/precision.c)
 * on the cpu backend, under mpirun:
 *
 *   mpirun -np 2 test_precision_auto [slow-fp32 | slow-bf16]
 *
 * Every rank runs tr_precision_probe on a small ResNet-8 (batch 16, 3x16x16).
 * Checked on every run: every rank takes the same choice; the choice is a
 * candidate; fp32 always is one; a low precision is a candidate exactly when
 * the backend's compute_dtype says it computes it natively (else it is left
 * out with a reason); each candidate has a median > 0 and the choice is the
 * smallest (fp32 on a tie); the warm-up plus 3..7 timed rounds.
 * slow-P makes precision P's steps 150 ms slower on the last rank (a
 * gradient hook that sleeps), so the choice is known whatever this CPU's
 * real speeds: slow-fp32 must choose a low precision where there is a
 * candidate (fp32 where there is none), slow-bf16 must not choose bf16.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "hora.h"
#include "precision.h"
#include "summary.h"

typedef struct {
    tr_dtype_t slow; /* the gradient dtype whose steps sleep; -1: none */
    int sleeper;     /* this rank sleeps */
} slow_t;

static void slow_hook(void *ctx, int param_index, const tr_tensor_t *grad)
{
    const slow_t *s = ctx;
    if (s->sleeper && param_index == 0 && (int)grad->dtype == (int)s->slow)
        nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 150 * 1000 * 1000}, NULL);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "plain";
    if (strcmp(mode, "plain") && strcmp(mode, "slow-fp32") && strcmp(mode, "slow-bf16")) {
        fprintf(stderr, "usage: mpirun -np N test_precision_auto [plain | slow-fp32 | slow-bf16]\n");
        return 2;
    }
    if (hora_init() != HORA_OK) {
        fprintf(stderr, "test_precision_auto: hora_init: %s\n", hora_last_error());
        return 1;
    }
    const int rank = hora_rank(), size = hora_size();
    const struct tr_backend_ops *ops = tr_backend_find("cpu");
    tr_backend_config_t bc = {.threads = 1};
    tr_backend_t *backend = NULL;
    CHECK(ops && ops->init(&bc, &backend) == HORA_OK, "rank %d: the cpu backend", rank);
    if (!backend) return test_summary("test_precision_auto", failures, checks);

    slow_t slow = {.slow = (tr_dtype_t)-1, .sleeper = rank == size - 1};
    if (!strcmp(mode, "slow-fp32"))
        slow.slow = TR_DTYPE_F32;
    else if (!strcmp(mode, "slow-bf16"))
        slow.slow = TR_DTYPE_BF16;
    tr_precision_probe_config_t pc = {.batch = 16,
                                      .grad = TR_GRAD_DTYPE_AUTO,
                                      .loss_scale_opt = TR_LOSS_SCALE_OPT_AUTO,
                                      .loss_scale_window = 2000,
                                      .step = {.overlap = TR_OVERLAP_AUTO,
                                               .grad_hook = slow_hook,
                                               .grad_hook_ctx = &slow,
                                               .optim = {.momentum = 0.9, .nesterov = 1}},
                                      .grads_shared = size > 1,
                                      .seed = 3,
                                      .budget_s = 1.0};
    CHECK(tr_model_spec_from_name("resnet8", &pc.spec) == HORA_OK, "resnet8");
    pc.spec.in_channels = 3;
    pc.spec.height = pc.spec.width = 16;
    tr_precision_probe_t probe;
    hora_status_t status = tr_precision_probe(backend, &pc, &probe);
    CHECK(status == HORA_OK, "rank %d: probe: %s", rank, hora_status_string(status));

    /* The same choice on every rank. */
    int choice[2] = {(int)probe.choice, -(int)probe.choice};
    hora_allreduce(choice, choice, 2, HORA_DTYPE_I32, HORA_OP_MIN);
    CHECK(choice[0] == -choice[1], "the ranks chose differently: %s .. %s", tr_precision_names[choice[0]],
          tr_precision_names[-choice[1]]);
    /* The candidates are what the backend computes natively. */
    static const tr_dtype_t dtypes[TR_PRECISION_COUNT] = {TR_DTYPE_F32, TR_DTYPE_BF16, TR_DTYPE_F16};
    int lows = 0;
    CHECK(probe.candidate[TR_PRECISION_FP32], "fp32 is not a candidate");
    for (int p = 1; p < TR_PRECISION_COUNT; p++) {
        int native = backend->ops->compute_dtype(backend, dtypes[p]) == HORA_OK;
        CHECK(probe.candidate[p] == native, "rank %d: %s candidate %d, the backend computes it natively: %d", rank,
              tr_precision_names[p], probe.candidate[p], native);
        CHECK(probe.candidate[p] || probe.refused[p][0], "%s left out without a reason", tr_precision_names[p]);
        lows += probe.candidate[p];
    }
    CHECK(probe.candidate[probe.choice], "chose %s, not a candidate", tr_precision_names[probe.choice]);
    if (lows > 0) {
        CHECK(probe.steps >= TR_PRECISION_PROBE_WARMUP + TR_PRECISION_PROBE_MIN_ROUNDS &&
                  probe.steps <= TR_PRECISION_PROBE_WARMUP + TR_PRECISION_PROBE_MAX_ROUNDS,
              "%d steps", probe.steps);
        for (int p = 0; p < TR_PRECISION_COUNT; p++) {
            CHECK(!probe.candidate[p] || probe.ms[p] > 0, "%s: %.3f ms", tr_precision_names[p], probe.ms[p]);
            CHECK(!probe.candidate[p] || probe.ms[probe.choice] <= probe.ms[p],
                  "chose %s (%.2f ms), %s is faster "
                  "(%.2f ms)",
                  tr_precision_names[probe.choice], probe.ms[probe.choice], tr_precision_names[p], probe.ms[p]);
        }
    } else {
        CHECK(probe.steps == 0 && probe.choice == TR_PRECISION_FP32, "fp32 alone: %d steps measured", probe.steps);
    }
    if (slow.slow == TR_DTYPE_F32)
        CHECK(lows == 0 ? probe.choice == TR_PRECISION_FP32 : probe.choice != TR_PRECISION_FP32,
              "fp32 made 150 ms slower, and still %s was chosen (fp32 %.1f, bf16 %.1f, fp16 %.1f ms)",
              tr_precision_names[probe.choice], probe.ms[0], probe.ms[1], probe.ms[2]);
    if (slow.slow == TR_DTYPE_BF16)
        CHECK(probe.choice != TR_PRECISION_BF16,
              "bf16 made 150 ms slower, and still chosen (fp32 %.1f, bf16 %.1f "
              "ms)",
              probe.ms[0], probe.ms[1]);
    if (rank == 0) {
        char text[1024];
        tr_precision_describe(&probe, text, sizeof(text));
        printf("test_precision_auto %s: %s\n", mode, text);
    }
    backend->ops->free(backend);
    return test_summary("test_precision_auto", failures, checks);
}
