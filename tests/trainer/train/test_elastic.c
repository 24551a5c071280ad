/*
 * test_elastic.c - the pieces of hora-train --elastic (trainer/cli/elastic.c)
 * that need no elastic launcher. One mode per test:
 *
 *   reshard   the world-change rule (trainer/core/run.c) as a function of
 *             (old size, new size): the per-rank batch with and without
 *             --keep-global-batch, and the position in the epoch converted
 *             (data and synthetic), against numbers worked out by hand.
 *   rollback  one process: train 3 steps, commit (tr_ckpt_commit), train 4
 *             more, then build the model again (another seed), load the
 *             commit into it (tr_ckpt_apply) with its run state, and train
 *             the same 4 steps again: parameters, momentum, BN statistics
 *             and the run state (step, images, dynamic loss scale) are
 *             bitwise those of the first pass, and differ from the commit's.
 *   sync      mpirun -np 2: rank 0 trains 3 steps alone and commits; rank 1
 *             is new (another seed, no commit). After hora_init the commit's
 *             owner (tr_ckpt_commit_owner) is rank 0 on both, rank 1 gets
 *             its run state and world (tr_ckpt_commit_share) and, from a
 *             model rank 0 built again and loaded, its tensors
 *             (tr_trainer_broadcast_state from the owner); rank 1's tensors
 *             are then rank 0's commit exactly, and after 3 data-parallel
 *             steps both ranks hold the same bits. The owner rule: the
 *             newest commit wins, the lowest rank on a tie.
 *
 * usage: test_elastic reshard|rollback; mpirun -np 2 test_elastic sync
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "checkpoint.h"
#include "model.h"
#include "rand.h"
#include "run.h"
#include "train.h"

#define B 4       /* per-rank batch */
#define STEPS_A 3 /* before the commit */
#define STEPS_B 4 /* after it, twice in rollback */
#define CLASSES 5

static tr_model_spec_t small_spec(void)
{
    tr_model_spec_t spec;
    if (tr_model_spec_from_name("resnet8", &spec) != HORA_OK) exit(1);
    spec.in_channels = 1;
    spec.height = spec.width = 12;
    spec.base_width = 8;
    spec.classes = CLASSES;
    spec.zero_init_last_bn = 0;
    return spec;
}

/* The arena's values (the cpu backend's memory is the host's). */
static float *arena(tr_model_t *m, tr_arena_t a, size_t *count)
{
    const tr_tensor_t *t = tr_model_arena(m, a);
    if (count) *count = tr_tensor_count(t);
    return t->data;
}

/* The params, momentum and statistics arenas, copied. */
typedef struct {
    float *a[3];
    size_t n[3];
} tensors_t;

static const tr_arena_t kept[3] = {TR_ARENA_PARAMS, TR_ARENA_MOMENTUM, TR_ARENA_STATS};
static const char *const kept_names[3] = {"params", "momentum", "BN statistics"};

static tensors_t tensors_copy(tr_model_t *m)
{
    tensors_t t;
    for (int i = 0; i < 3; i++) {
        const float *src = arena(m, kept[i], &t.n[i]);
        t.a[i] = malloc((t.n[i] ? t.n[i] : 1) * sizeof(float));
        memcpy(t.a[i], src, t.n[i] * sizeof(float));
    }
    return t;
}

static void tensors_free(tensors_t *t)
{
    for (int i = 0; i < 3; i++) free(t->a[i]);
}

static tr_step_config_t step_config(void)
{
    tr_step_config_t sc = {.overlap = TR_OVERLAP_OFF,
                           .optim = {.momentum = 0.9, .weight_decay = 1e-3, .nesterov = 1, .decay_bn_bias = 0},
                           /* dynamic scaling with a short window: the scale changes every 2 steps, so the run
                            * state a rollback restores is not the trivial one */
                           .loss_scale = {.mode = TR_LOSS_SCALE_DYNAMIC, .initial = 1024, .window = 2}};
    return sc;
}

/* One step on rank's block of the global batch the step number keys. */
static int train_step(tr_trainer_t *t, tr_run_state_t *st, const tr_model_spec_t *spec, int rank, int size)
{
    const size_t sample = (size_t)spec->in_channels * spec->height * spec->width;
    float *x = malloc((size_t)B * sample * sizeof(float));
    int32_t y[B];
    for (size_t i = 0; i < (size_t)B * sample; i++)
        x[i] = test_hash_signed(1000 + st->step, (size_t)rank * B * sample + i);
    for (int i = 0; i < B; i++) y[i] = (int32_t)((st->step * 3 + (uint64_t)(rank * B + i) * 7) % CLASSES);
    tr_tensor_t xt = tr_tensor_plain(x, TR_DTYPE_F32, TR_MEMORY_HOST, 4,
                                     (const int[]){B, spec->in_channels, spec->height, spec->width});
    float loss;
    int skipped;
    hora_status_t status = tr_trainer_step(t, &xt, y, 0.05 + 0.01 * (double)(st->step % 3), &loss, &skipped);
    free(x);
    if (status != HORA_OK) {
        fprintf(stderr, "step %" PRIu64 ": %s (%s)\n", st->step, hora_status_string(status), status_message());
        return -1;
    }
    st->step++;
    st->step_in_epoch++;
    st->images += (uint64_t)B * (uint64_t)size;
    return 0;
}

typedef struct {
    tr_model_t *model;
    tr_trainer_t *trainer;
} net_t;

static int net_init(tr_backend_t *backend, const tr_model_spec_t *spec, uint64_t seed, int shared, tr_run_state_t *st,
                    net_t *n)
{
    tr_step_config_t sc = step_config();
    if (tr_model_init(backend, spec, B, shared, seed, &n->model) != HORA_OK) return -1;
    return tr_trainer_init(n->model, &sc, st, &n->trainer) == HORA_OK ? 0 : -1;
}

static void net_free(net_t *n)
{
    tr_trainer_free(n->trainer);
    tr_model_free(n->model);
}

static tr_backend_t *cpu_backend(void)
{
    const struct tr_backend_ops *ops = tr_backend_find("cpu");
    tr_backend_config_t bc = {.threads = 1};
    tr_backend_t *backend;
    if (!ops || ops->init(&bc, &backend) != HORA_OK) exit(1);
    return backend;
}

static int bitwise_equal(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

static void rollback(void)
{
    const tr_model_spec_t spec = small_spec();
    tr_backend_t *backend = cpu_backend();
    tr_run_state_t st = tr_run_state_begin(7);
    tr_step_config_t sc = step_config();
    tr_loss_scale_begin(&sc.loss_scale, &st.loss_scale);
    net_t n;
    if (net_init(backend, &spec, 7, 0, &st, &n)) exit(1);
    for (int i = 0; i < STEPS_A; i++)
        if (train_step(n.trainer, &st, &spec, 0, 1)) exit(1);
    tr_ckpt_data_t commit = {0};
    const tr_ckpt_run_info_t info = {.arch = "resnet8", .world_size = 1, .batch = B, .steps_per_epoch = 100};
    CHECK(tr_ckpt_commit(&commit, n.model, &st, &info) == HORA_OK, "commit: %s", status_message());
    tensors_t at_commit = tensors_copy(n.model);
    for (int i = 0; i < STEPS_B; i++)
        if (train_step(n.trainer, &st, &spec, 0, 1)) exit(1);
    tensors_t first = tensors_copy(n.model);
    const tr_run_state_t first_state = st;
    for (int i = 0; i < 3; i++) {
        CHECK(first.n[i] == commit.params_count || i == 2, "%s: %zu elements", kept_names[i], first.n[i]);
        CHECK(!bitwise_equal(first.a[i], at_commit.a[i], first.n[i]), "%s: the steps after the commit changed nothing",
              kept_names[i]);
    }
    CHECK(first_state.loss_scale.scale != commit.state.loss_scale.scale,
          "the loss scale stayed %g: the run state would not be checked", first_state.loss_scale.scale);

    /* The world is lost: the model goes; a new one, from another seed,
     * gets the commit, and the same steps run again. */
    net_free(&n);
    st = commit.state;
    if (net_init(backend, &spec, 1234, 0, &st, &n)) exit(1);
    CHECK(tr_ckpt_apply(&commit, n.model) == HORA_OK, "apply: %s", status_message());
    for (int i = 0; i < 3; i++) {
        size_t count;
        const float *now = arena(n.model, kept[i], &count);
        CHECK(count == at_commit.n[i] && bitwise_equal(now, at_commit.a[i], count),
              "%s after the rollback: not the commit's", kept_names[i]);
    }
    CHECK(st.step == STEPS_A, "the commit's step is %" PRIu64 ", not %d", st.step, STEPS_A);
    for (int i = 0; i < STEPS_B; i++)
        if (train_step(n.trainer, &st, &spec, 0, 1)) exit(1);
    tensors_t again = tensors_copy(n.model);
    for (int i = 0; i < 3; i++) {
        size_t differ = 0;
        for (size_t k = 0; k < first.n[i]; k++) differ += memcmp(&first.a[i][k], &again.a[i][k], sizeof(float)) != 0;
        CHECK(differ == 0, "%s: %zu of %zu elements differ between the first pass and the one after the rollback",
              kept_names[i], differ, first.n[i]);
    }
    CHECK(st.step == first_state.step && st.images == first_state.images &&
              st.step_in_epoch == first_state.step_in_epoch,
          "step %" PRIu64 "/%" PRIu64 ", images %" PRIu64 "/%" PRIu64, st.step, first_state.step, st.images,
          first_state.images);
    CHECK(st.loss_scale.scale == first_state.loss_scale.scale &&
              st.loss_scale.good_steps == first_state.loss_scale.good_steps,
          "loss scale %g (%" PRIu64 " good steps) after the rollback, %g (%" PRIu64 ") before", st.loss_scale.scale,
          st.loss_scale.good_steps, first_state.loss_scale.scale, first_state.loss_scale.good_steps);
    if (!failures)
        printf("rollback: %d steps, commit, %d steps; a new model from the commit, the same %d steps: bitwise equal "
               "(params %zu, momentum %zu, statistics %zu floats; loss scale %g)\n",
               STEPS_A, STEPS_B, STEPS_B, first.n[0], first.n[1], first.n[2], st.loss_scale.scale);
    tensors_free(&first);
    tensors_free(&again);
    tensors_free(&at_commit);
    tr_ckpt_data_free(&commit);
    net_free(&n);
    backend->ops->free(backend);
}

/* Whether every rank holds the same bits: the MIN and MAX over ranks of
 * each element's bit pattern agree. */
static int same_on_every_rank(const float *a, size_t n)
{
    int32_t *lo = malloc((n ? n : 1) * sizeof(int32_t)), *hi = malloc((n ? n : 1) * sizeof(int32_t));
    memcpy(lo, a, n * sizeof(float));
    memcpy(hi, a, n * sizeof(float));
    int ok = hora_allreduce(lo, lo, n, HORA_DTYPE_I32, HORA_OP_MIN) == HORA_OK &&
             hora_allreduce(hi, hi, n, HORA_DTYPE_I32, HORA_OP_MAX) == HORA_OK &&
             memcmp(lo, hi, n * sizeof(int32_t)) == 0;
    free(lo);
    free(hi);
    return ok;
}

static int owner_of(tr_ckpt_data_t *c)
{
    int root = -2;
    if (tr_ckpt_commit_owner(c, &root) != HORA_OK) return -3;
    return root;
}

static void sync_mode(void)
{
    const tr_model_spec_t spec = small_spec();
    tr_backend_t *backend = cpu_backend();
    /* Before hora_init: the launcher's rank. */
    const char *env = getenv("OMPI_COMM_WORLD_RANK");
    const int first_rank = env ? atoi(env) : 0;
    tr_ckpt_data_t commit = {0};
    tr_step_config_t sc = step_config();
    tr_run_state_t st = tr_run_state_begin(7);
    tr_loss_scale_begin(&sc.loss_scale, &st.loss_scale);
    if (first_rank == 0) {
        /* The survivor: trained alone (no hora yet: nothing all-reduced). */
        net_t n;
        if (net_init(backend, &spec, 7, 0, &st, &n)) exit(1);
        for (int i = 0; i < STEPS_A; i++)
            if (train_step(n.trainer, &st, &spec, 0, 1)) exit(1);
        const tr_ckpt_run_info_t info = {.arch = "resnet8", .world_size = 1, .batch = B, .steps_per_epoch = 100};
        CHECK(tr_ckpt_commit(&commit, n.model, &st, &info) == HORA_OK, "commit: %s", status_message());
        net_free(&n);
    }
    if (hora_init() != HORA_OK || hora_size() != 2) {
        fprintf(stderr, "run under mpirun -np 2: %s\n", hora_last_error());
        exit(1);
    }
    const int rank = hora_rank();

    int root = owner_of(&commit);
    CHECK(root == 0, "rank %d: the owner is %d, not rank 0 (the only commit)", rank, root);
    tr_run_state_t shared;
    tr_ckpt_run_info_t info = {.arch = "resnet8"};
    CHECK(tr_ckpt_commit_share(&commit, 0, &shared, &info) == HORA_OK, "share: %s", hora_last_error());
    CHECK(shared.step == STEPS_A && shared.images == STEPS_A * B && shared.step_in_epoch == STEPS_A,
          "rank %d: shared state at step %" PRIu64 ", %" PRIu64 " images", rank, shared.step, shared.images);
    CHECK(info.world_size == 1 && info.batch == B && info.steps_per_epoch == 100,
          "rank %d: shared world %d x %d, %" PRIu64 " steps per epoch", rank, info.world_size, info.batch,
          info.steps_per_epoch);
    /* Rank 0's loss scale travelled too. */
    double scale = shared.loss_scale.scale, scale_max = scale;
    hora_allreduce(&scale_max, &scale_max, 1, HORA_DTYPE_F64, HORA_OP_MAX);
    CHECK(scale == scale_max, "rank %d: loss scale %g, another rank %g", rank, scale, scale_max);

    /* Both build the model of the new world (rank 1 from another seed),
     * the owner loads its commit, the tensors go from it. */
    st = shared;
    net_t n;
    if (net_init(backend, &spec, rank == 0 ? 7 : 99, 1, &st, &n)) exit(1);
    if (rank == 0) CHECK(tr_ckpt_apply(&commit, n.model) == HORA_OK, "apply: %s", status_message());
    size_t np = tr_tensor_count(tr_model_arena(n.model, TR_ARENA_PARAMS));
    float *reference = malloc(np * sizeof(float));
    memcpy(reference, arena(n.model, TR_ARENA_PARAMS, NULL), np * sizeof(float));
    hora_broadcast(reference, np, HORA_DTYPE_F32, 0); /* the test's own copy of rank 0's commit */
    if (rank == 1)
        CHECK(!bitwise_equal(arena(n.model, TR_ARENA_PARAMS, NULL), reference, np),
              "rank 1's new model already held rank 0's parameters: the broadcast would not be checked");
    CHECK(tr_trainer_broadcast_state(n.trainer, 1, root) == HORA_OK, "broadcast: %s", hora_last_error());
    CHECK(bitwise_equal(arena(n.model, TR_ARENA_PARAMS, NULL), reference, np),
          "rank %d: the parameters after the sync are not rank 0's commit", rank);
    for (int i = 0; i < 3; i++) {
        size_t count;
        const float *a = arena(n.model, kept[i], &count);
        CHECK(same_on_every_rank(a, count), "after the sync: the ranks' %s differ", kept_names[i]);
    }
    for (int i = 0; i < STEPS_B; i++)
        if (train_step(n.trainer, &st, &spec, rank, 2)) exit(1);
    for (int i = 0; i < 2; i++) {
        size_t count;
        const float *a = arena(n.model, kept[i], &count);
        CHECK(same_on_every_rank(a, count), "after %d data-parallel steps: the ranks' %s differ", STEPS_B,
              kept_names[i]);
    }
    CHECK(!bitwise_equal(arena(n.model, TR_ARENA_PARAMS, NULL), reference, np), "the steps changed nothing");

    /* The owner rule: the newest commit wins, then the lowest rank. */
    const tr_ckpt_run_info_t winfo = {.arch = "resnet8", .world_size = 2, .batch = B, .steps_per_epoch = 100};
    tr_run_state_t older = st, newer = st;
    older.step = 10;
    newer.step = 11;
    CHECK(tr_ckpt_commit(&commit, n.model, rank == 1 ? &newer : &older, &winfo) == HORA_OK, "commit");
    root = owner_of(&commit);
    CHECK(root == 1, "rank %d: rank 1 holds the newer commit (step 11 against 10), the owner is %d", rank, root);
    CHECK(tr_ckpt_commit(&commit, n.model, &older, &winfo) == HORA_OK, "commit");
    root = owner_of(&commit);
    CHECK(root == 0, "rank %d: both hold step 10, the owner is %d, not the lowest rank", rank, root);
    if (rank == 0) tr_ckpt_data_free(&commit);
    root = owner_of(&commit);
    CHECK(root == 1, "rank %d: only rank 1 holds a commit, the owner is %d", rank, root);
    if (rank == 1) tr_ckpt_data_free(&commit);
    root = owner_of(&commit);
    CHECK(root == -1, "rank %d: no rank holds a commit, the owner is %d, not -1", rank, root);
    if (rank == 0 && !failures)
        printf("sync: rank 1 (new) got rank 0's commit of step %d by broadcast; %d data-parallel steps later both "
               "hold the same bits; owner rule checked\n",
               STEPS_A, STEPS_B);
    free(reference);
    net_free(&n);
    backend->ops->free(backend);
    int counts[2] = {failures, checks};
    hora_allreduce(counts, counts, 2, HORA_DTYPE_I32, HORA_OP_SUM);
    failures = counts[0];
    checks = counts[1];
    hora_shutdown();
}

static void reshard(void)
{
    /* The batch: 3 ranks x 16 (global 48) to 2 ranks: 24 each with
     * --keep-global-batch, 16 without; to 5 ranks 48 does not divide (0:
     * the caller refuses or keeps the batch); 2 x 24 back to 4: 12. */
    CHECK(tr_run_world_batch(3, 16, 2, 16, 1) == 24, "3x16 -> 2, keep global: %d", tr_run_world_batch(3, 16, 2, 16, 1));
    CHECK(tr_run_world_batch(3, 16, 2, 16, 0) == 16, "3x16 -> 2: %d", tr_run_world_batch(3, 16, 2, 16, 0));
    CHECK(tr_run_world_batch(3, 16, 5, 16, 1) == 0, "3x16 -> 5, keep global: %d", tr_run_world_batch(3, 16, 5, 16, 1));
    CHECK(tr_run_world_batch(2, 24, 4, 16, 1) == 12, "2x24 -> 4, keep global: %d", tr_run_world_batch(2, 24, 4, 16, 1));
    CHECK(tr_run_world_batch(2, 24, 4, 16, 0) == 16, "2x24 -> 4: %d", tr_run_world_batch(2, 24, 4, 16, 0));

    /* The position, with data: epoch 2 of a 1000-sample split, 7 steps of
     * 3 x 16 = 48 done (336 samples). On 2 x 16 = 32 (31 steps per epoch):
     * the epoch continues after 336 samples, and the step count is 2 x 31
     * + round(336 / 32 = 10.5) = 62 + 11 = 73. */
    tr_run_state_t st = tr_run_state_begin(1);
    st.epoch = 2;
    st.step_in_epoch = 7;
    st.step = 2 * 20 + 7; /* the old world's count: 20 steps per epoch */
    uint64_t consumed = tr_run_reshard(&st, 48, 32, 1, 1000, 31);
    CHECK(consumed == 336 && st.epoch_sample_offset == 336 && st.step_in_epoch == 0 && st.step == 73 && st.epoch == 2,
          "3x16 -> 2x16 at epoch 2 step 7: consumed %" PRIu64 ", offset %" PRIu64 ", step_in_epoch %" PRIu64
          ", step %" PRIu64,
          consumed, st.epoch_sample_offset, st.step_in_epoch, st.step);
    /* Again from there, 2 x 16 to 4 x 16 = 64 (15 steps per epoch), 3 more
     * steps done: 336 + 96 = 432 samples; 2 x 15 + round(6.75) = 37. */
    st.step_in_epoch = 3;
    consumed = tr_run_reshard(&st, 32, 64, 1, 1000, 15);
    CHECK(consumed == 432 && st.epoch_sample_offset == 432 && st.step_in_epoch == 0 && st.step == 37,
          "2x16 -> 4x16: consumed %" PRIu64 ", offset %" PRIu64 ", step %" PRIu64, consumed, st.epoch_sample_offset,
          st.step);
    /* With --keep-global-batch (48 -> 48) nothing moves but the offset. */
    st = tr_run_state_begin(1);
    st.epoch = 1;
    st.step_in_epoch = 5;
    st.step = 20 + 5;
    consumed = tr_run_reshard(&st, 48, 48, 1, 1000, 20);
    CHECK(consumed == 240 && st.step == 25 && st.epoch_sample_offset == 240,
          "keep global: consumed %" PRIu64 ", step %" PRIu64, consumed, st.step);
    /* Past the split's end (the last step of an epoch): capped. */
    st.step_in_epoch = 21;
    st.epoch_sample_offset = 0;
    consumed = tr_run_reshard(&st, 48, 32, 1, 1000, 31);
    CHECK(consumed == 1000 && st.epoch_sample_offset == 1000, "capped: consumed %" PRIu64, consumed);
    /* Synthetic data: the position as steps within the epoch (100 per
     * epoch), at most a whole epoch. 7 x 48 = 336 samples = 10 steps of 32
     * (rounded down) in the epoch, 11 in the count (rounded). */
    st = tr_run_state_begin(1);
    st.epoch = 0;
    st.step_in_epoch = 7;
    consumed = tr_run_reshard(&st, 48, 32, 0, 0, 100);
    CHECK(consumed == 336 && st.step_in_epoch == 10 && st.epoch_sample_offset == 0 && st.step == 11,
          "synthetic: step_in_epoch %" PRIu64 ", step %" PRIu64, st.step_in_epoch, st.step);
    st.step_in_epoch = 90;
    consumed = tr_run_reshard(&st, 48, 32, 0, 0, 100);
    CHECK(st.step_in_epoch == 100, "synthetic past the epoch: step_in_epoch %" PRIu64, st.step_in_epoch);
    if (!failures) printf("reshard: the batch and position rules checked\n");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "reshard"))
        reshard();
    else if (!strcmp(mode, "rollback"))
        rollback();
    else if (!strcmp(mode, "sync"))
        sync_mode();
    else {
        fprintf(stderr, "usage: test_elastic reshard|rollback|sync\n");
        return 2;
    }
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
