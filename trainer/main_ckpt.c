/*
 * main_ckpt.c - hora-train's side of checkpoints (main_internal.h): reading
 * the one to resume from and telling every rank, applying it to the built
 * model, saving the run as it stands, and converting a resumed position to
 * another world size or batch. The file format and the writer thread are
 * checkpoint.c's and ckpt_writer.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "main_internal.h"

/* --resume: rank 0 picks and reads the checkpoint (auto: the newest whose
 * every CRC and text checks out, reporting and skipping damaged ones) and
 * tells every rank the outcome and the run state. Runs before the loaders
 * open, since they are keyed by the state's data seed. */
hora_status_t main_resume_read(run_t *r)
{
    const tr_options_t *o = &r->opt;
    if (!o->resume)
        return HORA_OK;
    int32_t found = 0; /* 1: read, 0: nothing to resume (auto, empty directory), -1: failed */
    if (r->rank == 0) {
        char err[TR_CKPT_ERR_BYTES];
        if (strcmp(o->resume, "auto") == 0) {
            char **paths;
            int count;
            if (tr_ckpt_list(o->checkpoint_dir, &paths, &count) != HORA_OK) {
                main_report("hora-train: --resume auto: cannot list %s: %s", o->checkpoint_dir, strerror(errno));
                found = -1;
            } else {
                for (int i = 0; i < count && found == 0; i++) {
                    if (tr_ckpt_load(paths[i], &r->resume, err, sizeof(err)) == HORA_OK) {
                        found = 1;
                    } else {
                        fprintf(stderr, "hora-train: --resume auto: skipping a damaged checkpoint: %s%s\n", err,
                                i + 1 < count ? "; trying the previous one" : "");
                    }
                }
                if (found == 0 && count > 0) {
                    main_report("hora-train: --resume auto: none of the %d checkpoints in %s is usable", count,
                           o->checkpoint_dir);
                    found = -1;
                } else if (found == 0) {
                    printf("hora-train: --resume auto: no checkpoint in %s yet, starting from step 0\n",
                           o->checkpoint_dir);
                }
                tr_ckpt_list_free(paths, count);
            }
        } else if (tr_ckpt_load(o->resume, &r->resume, err, sizeof(err)) == HORA_OK) {
            found = 1;
        } else {
            main_report("hora-train: --resume: %s", err);
            found = -1;
        }
    }
    if (r->size > 1)
        CHECK(hora_broadcast(&found, 1, HORA_DTYPE_I32, 0));
    if (found < 0)
        return HORA_ERR_CORRUPT;
    if (found == 0)
        return HORA_OK;
    int64_t layout[3] = {0, 0, 0};
    if (r->rank == 0) {
        r->state = r->resume.state;
        layout[0] = r->resume.info.world_size;
        layout[1] = r->resume.info.batch;
        layout[2] = (int64_t)r->resume.info.steps_per_epoch;
    }
    if (r->size > 1) {
        CHECK(hora_broadcast(&r->state, sizeof(r->state), HORA_DTYPE_U8, 0));
        CHECK(hora_broadcast(layout, 3, HORA_DTYPE_I64, 0));
    }
    r->resumed = 1;
    r->saved = (tr_ckpt_run_info_t){.world_size = (int)layout[0], .batch = (int)layout[1],
                                    .steps_per_epoch = (uint64_t)layout[2]};
    if (o->keep_global_batch) {
        int64_t global = layout[0] * layout[1];
        if (global % r->size) {
            if (r->rank == 0)
                main_report("hora-train: --keep-global-batch: the checkpoint's global batch %" PRId64 " (%d ranks x "
                       "%d) does not divide over %d ranks", global, r->saved.world_size, r->saved.batch, r->size);
            return HORA_ERR_INVALID_ARG;
        }
        r->opt.batch = (int)(global / r->size);
    }
    return HORA_OK;
}

/* After the model is built: rank 0 checks the checkpoint's description
 * against it and loads the tensors; every rank learns whether that worked
 * (the tensors themselves travel with the state broadcast). */
hora_status_t main_resume_apply(run_t *r)
{
    if (!r->resumed)
        return HORA_OK;
    int32_t ok = 1;
    if (r->rank == 0) {
        char why[1024];
        if (tr_ckpt_compare(&r->resume, r->model, r->opt.model, why, sizeof(why))) {
            main_report("hora-train: cannot resume from %s: it holds another model than this command line "
                   "builds: %s", r->resume.path, why);
            ok = 0;
        } else if (tr_ckpt_apply(&r->resume, r->model) != HORA_OK) {
            main_report("hora-train: cannot resume from %s: loading its tensors failed", r->resume.path);
            ok = 0;
        } else {
            printf("hora-train: resuming from %s: epoch %" PRIu64 ", step %" PRIu64 " (written by %d ranks x batch "
                   "%d)\n", r->resume.path, r->state.epoch + 1, r->state.step, r->saved.world_size, r->saved.batch);
            fflush(stdout);
        }
        tr_ckpt_data_free(&r->resume);
    }
    if (r->size > 1)
        CHECK(hora_broadcast(&ok, 1, HORA_DTYPE_I32, 0));
    return ok ? HORA_OK : HORA_ERR_INVALID_ARG;
}

/* A checkpoint of where the run stands now (rank 0, with --checkpoint-dir):
 * a finished epoch is saved as the start of the next. */
hora_status_t main_save_checkpoint(run_t *r, uint64_t spe_epoch, uint64_t spe)
{
    CHECK(tr_trainer_settle(r->trainer)); /* every rank: a failed all-reduce stops them all */
    if (!r->ckpt || r->last_saved_step == r->state.step + 1)
        return HORA_OK;
    tr_run_state_t s = r->state;
    if (s.step_in_epoch >= spe_epoch) {
        s.epoch++;
        s.step_in_epoch = 0;
        s.epoch_sample_offset = 0;
    }
    tr_ckpt_run_info_t info = {.arch = r->opt.model, .world_size = r->size, .batch = r->opt.batch,
                               .steps_per_epoch = spe};
    char err[TR_CKPT_ERR_BYTES];
    hora_status_t status = tr_ckpt_writer_save(r->ckpt, r->model, &s, &info, err, sizeof(err));
    if (status != HORA_OK) {
        main_report("hora-train: rank 0: checkpoint failed: %s", err);
        return status;
    }
    r->last_saved_step = r->state.step + 1; /* + 1: 0 means none yet */
    double stall, write;
    uint64_t bytes;
    tr_ckpt_writer_times(r->ckpt, &stall, &write, &bytes);
    main_log_json(r, "{\"type\":\"checkpoint\",\"step\":%" PRIu64 ",\"stall_s\":%.6f,\"previous_write_s\":%.6f,"
             "\"previous_bytes\":%" PRIu64 "}", r->state.step, stall, write, bytes);
    return HORA_OK;
}

/* A resume on another world size or batch: the epoch continues after the
 * samples the checkpoint's run trained on (re-sharded over this run's
 * ranks), and the step count and schedule position are converted to this
 * run's step size. Says what changed. */
void main_reshard(run_t *r, uint64_t spe, double peak_lr)
{
    tr_run_state_t *st = &r->state;
    const int w0 = r->saved.world_size, b0 = r->saved.batch;
    if (!r->resumed || (w0 == r->size && b0 == r->opt.batch))
        return;
    const uint64_t g0 = (uint64_t)w0 * (uint64_t)b0, g1 = (uint64_t)r->size * (uint64_t)r->opt.batch;
    uint64_t consumed = st->epoch_sample_offset + st->step_in_epoch * g0;
    if (r->train_loader) {
        tr_loader_info_t info;
        tr_loader_info(r->train_loader, &info);
        if (consumed > info.samples)
            consumed = info.samples;
        st->epoch_sample_offset = consumed;
        st->step_in_epoch = 0;
    } else {
        /* Synthetic data has no order: keep the position in the epoch. */
        st->epoch_sample_offset = 0;
        st->step_in_epoch = consumed / g1 < spe ? consumed / g1 : spe;
    }
    st->step = st->epoch * spe + (consumed + g1 / 2) / g1;
    if (r->rank == 0) {
        printf("hora-train: resumed on %d ranks x batch %d (global %" PRIu64 ") from a checkpoint of %d x %d (global "
               "%" PRIu64 "): %s; peak lr %.4g -> %.4g; epoch %" PRIu64 " continues after its first %" PRIu64
               " samples, at step %" PRIu64 "\n", r->size, r->opt.batch, g1, w0, b0, g0,
               r->opt.keep_global_batch ? "--keep-global-batch kept the global batch"
                                        : "per-rank batch kept, lr scaled with the global batch",
               r->opt.lr * (double)g0 / 256.0, peak_lr, st->epoch + 1, consumed, st->step);
        fflush(stdout);
    }
}
