/*
 * main_ckpt.c - hora-train's side of checkpoints (main_ckpt.h): reading
 * the one to resume from and telling every rank, applying it to the built
 * model, saving the run as it stands, and converting a resumed position to
 * another world size or batch. The file format and the writer thread are
 * checkpoint.c's and ckpt_writer.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "main_ckpt.h"
#include "precision.h"

/* A message into buf, cut to n bytes (a long path may cut it). */
__attribute__((format(printf, 3, 4))) static void msg_printf(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}

/* Rank 0 refused the resume and printed why (msg); every rank learns it
 * (outcome < 0 on rank 0 only until now), and the others keep rank 0's
 * words as their own error, unprinted: what their hora_abort says, instead
 * of a status name. */
static hora_status_t share_refusal(run_t *r, int32_t *outcome, char *msg, size_t msg_bytes)
{
    if (r->size == 1) return HORA_OK;
    CHECK(hora_broadcast(outcome, 1, HORA_DTYPE_I32, 0));
    if (*outcome >= 0) return HORA_OK;
    CHECK(hora_broadcast(msg, msg_bytes, HORA_DTYPE_U8, 0));
    msg[msg_bytes - 1] = 0;
    if (r->rank != 0) main_report_keep(msg);
    return HORA_OK;
}

/* --resume: rank 0 picks and reads the checkpoint (auto: the newest whose
 * every CRC and text checks out, reporting and skipping damaged ones) and
 * tells every rank the outcome and the run state. Runs before the loaders
 * open, since they are keyed by the state's data seed. */
hora_status_t main_resume_read(run_t *r)
{
    const tr_options_t *o = &r->opt;
    if (!o->resume) return HORA_OK;
    int32_t found = 0; /* 1: read, 0: nothing to resume (auto, empty directory), -1: failed */
    char msg[TR_RESUME_MSG_BYTES] = "";
    if (r->rank == 0) {
        if (strcmp(o->resume, "auto") == 0) {
            char **paths;
            int count;
            if (tr_ckpt_list(o->checkpoint_dir, &paths, &count) != HORA_OK) {
                msg_printf(msg, sizeof(msg), "hora-train: --resume auto: cannot list %s: %s", o->checkpoint_dir,
                           strerror(errno));
                found = -1;
            } else {
                for (int i = 0; i < count && found == 0; i++) {
                    if (tr_ckpt_load(paths[i], &r->resume) == HORA_OK) {
                        found = 1;
                    } else {
                        fprintf(stderr, "hora-train: --resume auto: skipping a damaged checkpoint: %s%s\n",
                                status_message(), i + 1 < count ? "; trying the previous one" : "");
                    }
                }
                if (found == 0 && count > 0) {
                    msg_printf(msg, sizeof(msg),
                               "hora-train: --resume auto: none of the %d checkpoints in %s is usable "
                               "(each one's damage is above); a new --checkpoint-dir starts afresh",
                               count, o->checkpoint_dir);
                    found = -1;
                } else if (found == 0) {
                    printf("hora-train: --resume auto: no checkpoint in %s yet, starting from step 0\n",
                           o->checkpoint_dir);
                }
                tr_ckpt_list_free(paths, count);
            }
        } else if (tr_ckpt_load(o->resume, &r->resume) == HORA_OK) {
            found = 1;
        } else {
            msg_printf(msg, sizeof(msg), "hora-train: --resume: %s", status_message());
            found = -1;
        }
        if (found < 0) main_report("%s", msg);
    }
    CHECK(share_refusal(r, &found, msg, sizeof(msg)));
    if (found < 0) return HORA_ERR_CORRUPT;
    if (found == 0) return HORA_OK;
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
    r->saved = (tr_ckpt_run_info_t){
        .world_size = (int)layout[0], .batch = (int)layout[1], .steps_per_epoch = (uint64_t)layout[2]};
    if (o->keep_global_batch) {
        int64_t global = layout[0] * layout[1];
        const int batch = tr_run_world_batch(r->saved.world_size, r->saved.batch, r->size, o->batch, 1);
        if (!batch) {
            /* Every rank knows: rank 0 prints it, the others keep it. */
            msg_printf(msg, sizeof(msg),
                       "hora-train: cannot resume with --keep-global-batch: the checkpoint has "
                       "global batch %" PRId64 " (%d ranks x %d), which this run's %d ranks do not divide: run on a "
                       "number of ranks that divides %" PRId64 ", or leave out --keep-global-batch to keep the "
                       "per-rank batch",
                       global, r->saved.world_size, r->saved.batch, r->size, global);
            if (r->rank == 0)
                main_report("%s", msg);
            else
                main_report_keep(msg);
            return HORA_ERR_INVALID_ARG;
        }
        r->opt.batch = batch;
    }
    return HORA_OK;
}

/* A refused resume in words: the field that differs, the checkpoint's
 * value, this run's, and the flags that continue the checkpoint's run where
 * there are such. */
static void refusal_text(const tr_ckpt_data_t *d, const tr_ckpt_difference_t *df, const char *why, char *msg, size_t n)
{
    const char *k = df->key, *ck = df->checkpoint, *me = df->run;
    msg_printf(msg, n, "hora-train: cannot resume from %s: ", d->path);
    const size_t head = strlen(msg);
    msg += head;
    n -= head;
    const int choice = d->state.precision.choice;
    const char *precision = choice >= 0 && choice < TR_PRECISION_COUNT ? tr_precision_names[choice] : "fp32";
    if (!ck[0] || !me[0] || strcmp(k, "param") == 0 || strcmp(k, "bn") == 0) {
        /* A tensor or a line only one side has: the description's words. */
        msg_printf(msg, n, "its model and the one this command line builds differ: %s", why);
    } else if (strcmp(k, "arch") == 0) {
        msg_printf(msg, n,
                   "the checkpoint has arch %s, this run asks for %s: --model %s continues it (a new "
                   "--checkpoint-dir, without --resume, trains %s from scratch)",
                   ck, me, ck, me);
    } else if (strcmp(k, "width") == 0 || strcmp(k, "classes") == 0) {
        msg_printf(msg, n, "the checkpoint has %s %s, this run asks for %s: --%s %s continues it", k, ck, me, k, ck);
    } else if (strcmp(k, "input") == 0) {
        char a[sizeof(df->checkpoint)], b[sizeof(df->run)];
        memcpy(a, ck, sizeof(a));
        memcpy(b, me, sizeof(b));
        for (char *c = a; *c; c++) *c = *c == ' ' ? 'x' : *c;
        for (char *c = b; *c; c++) *c = *c == ' ' ? 'x' : *c;
        msg_printf(msg, n,
                   "the checkpoint has input %s, this run asks for %s: it continues on data of %s images "
                   "(--data, or --synthetic --image %s)",
                   a, b, a, a);
    } else if (strcmp(k, "compute_dtype") == 0) {
        msg_printf(msg, n,
                   "the checkpoint has compute dtype %s (precision %s), this run asks for %s: --precision %s, "
                   "or --precision auto (which keeps the checkpoint's), continues it",
                   ck, precision, me, precision);
    } else if (strcmp(k, "grad_dtype") == 0) {
        msg_printf(msg, n,
                   "the checkpoint has gradient dtype %s (precision %s), this run asks for %s: --precision %s "
                   "--grad-dtype %s continues it",
                   ck, precision, me, precision, ck);
    } else {
        msg_printf(msg, n, "the checkpoint has %s %s, this run asks for %s", k, ck, me);
    }
}

/* After the model is built: rank 0 checks the checkpoint's description
 * against it and loads the tensors; every rank learns whether that worked
 * (the tensors themselves travel with the state broadcast). A refusal is
 * reported here (rank 0 prints it, every rank's abort carries it). */
hora_status_t main_resume_apply(run_t *r)
{
    if (!r->resumed) return HORA_OK;
    int32_t ok = 1;
    char msg[TR_RESUME_MSG_BYTES] = "";
    if (r->rank == 0) {
        tr_ckpt_difference_t df;
        hora_status_t status;
        if (tr_ckpt_compare(&r->resume, r->model, r->opt.model, &df)) {
            refusal_text(&r->resume, &df, status_message(), msg, sizeof(msg));
            ok = -1;
        } else if ((status = tr_ckpt_apply(&r->resume, r->model)) != HORA_OK) {
            msg_printf(msg, sizeof(msg),
                       "hora-train: cannot resume from %s: loading its tensors into the model "
                       "failed: %s",
                       r->resume.path, hora_status_string(status));
            ok = -1;
        } else {
            printf("hora-train: resuming from %s: epoch %" PRIu64 ", step %" PRIu64 " (written by %d ranks x batch "
                   "%d)\n",
                   r->resume.path, r->state.epoch + 1, r->state.step, r->saved.world_size, r->saved.batch);
            fflush(stdout);
        }
        if (ok < 0) main_report("%s", msg);
        tr_ckpt_data_free(&r->resume);
    }
    CHECK(share_refusal(r, &ok, msg, sizeof(msg)));
    return ok > 0 ? HORA_OK : HORA_ERR_INVALID_ARG;
}

/* A checkpoint of where the run stands now (rank 0, with --checkpoint-dir):
 * a finished epoch is saved as the start of the next. */
hora_status_t main_save_checkpoint(run_t *r, uint64_t spe_epoch, uint64_t spe)
{
    CHECK(tr_trainer_settle(r->trainer)); /* every rank: a failed all-reduce stops them all */
    if (!r->ckpt || r->last_saved_step == r->state.step + 1) return HORA_OK;
    tr_run_state_t s = r->state;
    if (s.step_in_epoch >= spe_epoch) {
        s.epoch++;
        s.step_in_epoch = 0;
        s.epoch_sample_offset = 0;
    }
    tr_ckpt_run_info_t info = {
        .arch = r->opt.model, .world_size = r->size, .batch = r->opt.batch, .steps_per_epoch = spe};
    hora_status_t status = tr_ckpt_writer_save(r->ckpt, r->model, &s, &info);
    if (status != HORA_OK) {
        main_report("hora-train: rank 0: checkpoint failed: %s", status_message());
        return status;
    }
    r->last_saved_step = r->state.step + 1; /* + 1: 0 means none yet */
    double stall, write;
    uint64_t bytes;
    tr_ckpt_writer_times(r->ckpt, &stall, &write, &bytes);
    main_log_json(r,
                  "{\"type\":\"checkpoint\",\"step\":%" PRIu64 ",\"stall_s\":%.6f,\"previous_write_s\":%.6f,"
                  "\"previous_bytes\":%" PRIu64 "}",
                  r->state.step, stall, write, bytes);
    return HORA_OK;
}

/* A resume on another world size or batch, or an elastic re-form: the
 * epoch continues after the samples the saved (or committed) run trained
 * on (re-sharded over this run's ranks), and the step count and schedule
 * position are converted to this run's step size (tr_run_reshard). Says
 * what changed. */
void main_reshard(run_t *r, uint64_t spe, double peak_lr)
{
    tr_run_state_t *st = &r->state;
    const int w0 = r->saved.world_size, b0 = r->saved.batch;
    if (!r->resumed || (w0 == r->size && b0 == r->opt.batch)) return;
    const uint64_t g0 = (uint64_t)w0 * (uint64_t)b0, g1 = (uint64_t)r->size * (uint64_t)r->opt.batch;
    uint64_t samples = 0;
    if (r->train_loader) {
        tr_loader_info_t info;
        tr_loader_info(r->train_loader, &info);
        samples = info.samples;
    }
    const uint64_t consumed = tr_run_reshard(st, g0, g1, r->train_loader != NULL, samples, spe);
    if (r->rank == 0) {
        const char *rule = r->opt.batch != b0 ? "--keep-global-batch kept the global batch"
                           : r->opt.keep_global_batch
                               ? "per-rank batch kept, lr scaled with the global batch (--keep-global-batch: "
                                 "these ranks do not divide the global batch)"
                               : "per-rank batch kept, lr scaled with the global batch";
        printf("hora-train: %s on %d ranks x batch %d (global %" PRIu64 ") from %s of %d x %d (global "
               "%" PRIu64 "): %s; peak lr %.4g -> %.4g; epoch %" PRIu64 " continues after its first %" PRIu64
               " samples, at step %" PRIu64 "\n",
               r->reformed ? "re-formed" : "resumed", r->size, r->opt.batch, g1,
               r->reformed ? "the commit" : "a checkpoint", w0, b0, g0, rule, r->opt.lr * (double)g0 / 256.0, peak_lr,
               st->epoch + 1, consumed, st->step);
        fflush(stdout);
    }
}
