/*
 * elastic.c - hora-train --elastic (elastic.h), under hora-run --elastic.
 *
 * The training state - what a checkpoint holds (trainer/ckpt: the params,
 * momentum and BN statistics arenas and the run state: step, data position,
 * seeds, loss scale, overlap and precision) - is committed in host memory
 * every --commit-every-steps steps, at a step boundary, on every rank. When
 * a member of the world is lost, every survivor's collectives end with
 * HORA_ERR_PEER_LOST (libhora, once the launcher posts the verdict); main
 * frees what holds the ended world's memory (the model's gradient arena is
 * in hora's pool), and elastic_reform ends the generation and joins the
 * next (hora_shutdown, hora_init). There every rank - survivors and
 * newcomers alike - runs the same collectives in the same order:
 *
 *   1. elastic_join: the owner, the lowest rank holding the newest commit
 *      (one all-reduce: survivors whose last step failed may hold an older
 *      one than others); its run state and world (broadcast); who was lost
 *      (each survivor marks its old rank: one all-reduce); the CPU shares
 *      of the new world (tr_threads_default's gather); the batch rule.
 *   2. main's setup builds the backend (a newcomer's), the loaders for the
 *      new rank and size, the model and the trainer, as at start but with
 *      no collective of its own.
 *   3. elastic_sync: the owner loads its commit into its model and
 *      broadcasts params, momentum and BN statistics to every rank.
 *   4. loop_run starts over: steps per epoch, the schedule at the new global
 *      batch, the position re-sharded (main_reshard, as a resume on another
 *      world size does), a fresh commit, and --min-ranks.
 *
 * Hosts that arrive wait until a commit: there every rank asks
 * hora_elastic_check, and when hosts wait the loop returns, the world ends
 * its generation on purpose (hora_elastic_reform) and the same sequence
 * takes them in; their processes start fresh and come to step 1 from
 * elastic_start.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elastic.h"
#include "threads.h"

int elastic_commit_interval(const run_t *r)
{
    if (r->opt.commit_every_steps > 0) return r->opt.commit_every_steps;
    /* A commit copies params, momentum and statistics: about 2.2 MB for
     * ResNet-20, well under a millisecond against its 50-100 ms steps; 205
     * MB (about 20 ms) for ResNet-50, where every 10th step keeps the cost
     * under 3% of steps of 0.7 s and more. */
    return tr_tensor_count(tr_model_arena(r->model, TR_ARENA_PARAMS)) < 5000000 ? 1 : 10;
}

hora_status_t elastic_commit(run_t *r, uint64_t spe, int check)
{
    const double t0 = tr_now_s();
    CHECK(tr_trainer_settle(r->trainer)); /* a device step's all-reduces, before its arenas are read */
    const tr_ckpt_run_info_t info = {
        .arch = r->opt.model, .world_size = r->size, .batch = r->opt.batch, .steps_per_epoch = spe};
    CHECK(tr_ckpt_commit(&r->commit, r->model, &r->state, &info));
    if (!check) return HORA_OK;
    CHECK(hora_elastic_check(&r->hosts_waiting));
    r->commit_time += tr_now_s() - t0; /* the loop's commits: what --elastic costs a run */
    r->commits++;
    return HORA_OK;
}

/* Rank 0's line about the change: `world 3 -> 2 at step K (rank 2 lost:
 * REASON)`, `(hosts joined)`, or both, and what is trained again. */
static void say_change(run_t *r, int old_size, const int32_t *seen, uint64_t at_step)
{
    if (r->rank != 0) return;
    char lost[256] = "";
    int lost_count = 0, kept = 0;
    for (int i = 0; i < old_size; i++) {
        kept += seen[i] > 0;
        if (seen[i] > 0) continue;
        size_t used = strlen(lost);
        snprintf(lost + used, sizeof(lost) - used, "%s%d", lost_count ? ", " : "", i);
        lost_count++;
    }
    const int joined = r->size - kept;
    const char *reason = main_lost_reason()[0] ? main_lost_reason() : "no reason given";
    char why[1400];
    if (lost_count && joined > 0)
        snprintf(why, sizeof(why), "rank%s %s lost: %s; %d joined", lost_count > 1 ? "s" : "", lost, reason, joined);
    else if (lost_count)
        snprintf(why, sizeof(why), "rank%s %s lost: %s", lost_count > 1 ? "s" : "", lost, reason);
    else
        snprintf(why, sizeof(why), "hosts joined");
    const tr_run_state_t *st = &r->state;
    const uint64_t redone = at_step > st->step ? at_step - st->step : 0;
    if (r->tty) printf("\n");
    printf("hora-train: world %d -> %d at step %" PRIu64 " (%s); generation %d continues from rank %d's commit of "
           "that step (steps trained again: %" PRIu64 ")\n",
           old_size, r->size, st->step, why, hora_generation(), r->root, redone);
    fflush(stdout);
    main_log_json(r,
                  "{\"type\":\"elastic\",\"generation\":%d,\"from\":%d,\"to\":%d,\"step\":%" PRIu64
                  ",\"lost\":%d,\"joined\":%d,\"redone_steps\":%" PRIu64 "}",
                  hora_generation(), old_size, r->size, st->step, lost_count, joined > 0 ? joined : 0, redone);
}

/* Step 1 of a new generation (the file's comment): every rank, in the same
 * order. old_rank, old_size: this process's place in the ended world (-1, 0
 * for a newcomer); at_step: where it stood when that world ended. */
static hora_status_t elastic_join(run_t *r, int old_rank, int old_size, uint64_t at_step)
{
    tr_options_t *o = &r->opt;
    r->rank = hora_rank();
    r->size = hora_size();
    int root;
    CHECK(tr_ckpt_commit_owner(&r->commit, &root));
    if (root < 0) {
        /* Every rank sees the same: every rank stops with this. */
        main_report("hora-train: rank %d: generation %d: no rank holds a commit of the training state (the world "
                    "was lost before its first commit, or every rank is new): nothing to continue from; start again "
                    "(with --resume auto where --checkpoint-dir has a checkpoint)",
                    r->rank, hora_generation());
        return HORA_ERR_INVALID_ARG;
    }
    tr_ckpt_run_info_t info = {.arch = o->model};
    tr_run_state_t state;
    CHECK(tr_ckpt_commit_share(&r->commit, root, &state, &info));
    /* The ended world as the owner knew it (a newcomer knew none). */
    int64_t before[2] = {old_size, (int64_t)at_step};
    CHECK(hora_broadcast(before, 2, HORA_DTYPE_I64, root));
    if (before[0] < 1 || before[0] > (1 << 24)) {
        main_report("hora-train: rank %d: the owner of the commit says the ended world had %" PRId64 " ranks", r->rank,
                    before[0]);
        return HORA_ERR_INTERNAL;
    }
    /* Who was lost: each survivor marks its rank in the ended world. */
    int32_t *seen = calloc((size_t)before[0], sizeof(*seen));
    if (!seen) {
        main_report("hora-train: rank %d: out of memory", r->rank);
        return HORA_ERR_NO_MEMORY;
    }
    if (old_rank >= 0 && old_rank < before[0]) seen[old_rank] = 1;
    status_clear();
    hora_status_t status = hora_allreduce(seen, seen, (size_t)before[0], HORA_DTYPE_I32, HORA_OP_SUM);
    if (status == HORA_ERR_PEER_LOST) {
        main_note_lost(hora_last_error());
        free(seen);
        return status;
    }
    if (status != HORA_OK) {
        main_report("hora-train: rank %d: hora_allreduce (who was lost) failed: %s (%s)", r->rank,
                    hora_status_string(status), hora_last_error());
        free(seen);
        return status;
    }
    /* The new world's CPU shares: every rank gathers again (a newcomer's
     * --threads auto is decided from it). */
    tr_threads_forget();
    (void)tr_threads_default(NULL);
    r->state = state;
    r->saved = info;
    r->saved.arch = o->model;
    r->resumed = r->reformed = 1;
    r->root = root;
    /* The per-rank batch the committed world trained with is kept (the rate
     * follows the global batch), or with --keep-global-batch the global
     * batch, where the new size divides it (main_reshard says which). */
    const int batch = tr_run_world_batch(info.world_size, info.batch, r->size, info.batch, o->keep_global_batch);
    o->batch = batch ? batch : info.batch;
    say_change(r, (int)before[0], seen, (uint64_t)before[1]);
    free(seen);
    return HORA_OK;
}

hora_status_t elastic_start(run_t *r)
{
    if (!r->opt.elastic) return HORA_OK;
    if (!hora_elastic()) {
        char msg[512];
        snprintf(msg, sizeof(msg),
                 "hora-train: --elastic needs a world that can re-form: start hora-train under `hora-run --elastic` "
                 "(this world was started by %s and keeps its size; without --elastic it trains as before)",
                 strcmp(hora_bootstrap(), "mpi") == 0 ? "an MPI launcher" : "hora-run without --elastic");
        if (r->rank == 0)
            main_report("%s", msg);
        else
            main_report_keep(msg);
        return HORA_ERR_UNSUPPORTED;
    }
    if (hora_generation() > 0) return elastic_join(r, -1, 0, 0); /* a newcomer */
    return HORA_OK;
}

hora_status_t elastic_reform(run_t *r, hora_status_t why)
{
    const int old_rank = r->rank, old_size = r->size;
    const uint64_t at_step = r->state.step;
    if (why == HORA_OK) {
        /* Hosts wait: this generation ends on purpose. */
        status_clear();
        hora_status_t status = hora_elastic_reform();
        if (status == HORA_ERR_PEER_LOST) {
            main_note_lost(hora_last_error());
        } else if (status != HORA_OK) {
            main_report("hora-train: rank %d: hora_elastic_reform failed: %s (%s)", r->rank, hora_status_string(status),
                        hora_last_error());
            return status;
        }
    } else {
        (void)hora_shutdown(); /* after a loss it returns at once, with the loss's status */
    }
    r->hosts_waiting = 0;
    hora_status_t status = hora_init();
    if (status != HORA_OK) {
        main_report("hora-train: rank %d of generation %d: joining the next generation failed: hora_init: %s (%s)",
                    old_rank, hora_generation(), hora_status_string(status), hora_last_error());
        return status;
    }
    return elastic_join(r, old_rank, old_size, at_step);
}

hora_status_t elastic_sync(run_t *r)
{
    /* The owner's own state came with the share; its tensors now. */
    if (r->rank == r->root) CHECK(tr_ckpt_apply(&r->commit, r->model));
    CHECK(tr_trainer_broadcast_state(r->trainer, 1, r->root));
    return HORA_OK;
}
