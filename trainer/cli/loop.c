/*
 * loop.c - hora-train's training loop (loop.h): epochs of steps over the
 * run state (run.h: r->state, what a checkpoint saves whole), the progress
 * lines, evaluation, checkpoints on schedule and the end of training, each
 * a named step of loop_run. Every rank runs the same steps: each one is a
 * collective.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "elastic.h"
#include "input.h"
#include "loop.h"
#include "main_ckpt.h"
#include "optim.h"

static void format_duration(double s, char *buf, size_t n)
{
    if (!(s >= 0) || s > 1e7) s = 0;
    int t = (int)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%dh%02dm%02ds", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%dm%02ds", t / 60, t % 60);
}

typedef struct {
    int64_t top1, top5, count;
} eval_result_t;

/* Top-1/top-5 over the validation split: each rank its part, in batches of
 * --eval-batch with no padding (a last batch takes what is left), summed
 * over ranks. */
static hora_status_t evaluate(run_t *r, eval_result_t *res)
{
    int64_t counts[3] = {0, 0, 0};
    CHECK(tr_trainer_settle(r->trainer)); /* the last step's all-reduces, on a device */
    const tr_model_spec_t *spec = tr_model_spec(r->model);
    if (r->val_loader) {
        CHECK(tr_loader_start_epoch(r->val_loader, 0, 0));
        for (;;) {
            tr_batch_t *b;
            CHECK(tr_loader_next(r->val_loader, &b));
            if (!b) break;
            if (b->count > 0) {
                tr_tensor_t x = input_batch_tensor(r, b, spec);
                int64_t t1, t5;
                CHECK(tr_model_forward(r->model, &x, 0));
                CHECK(tr_model_topk(r->model, b->labels, &t1, &t5));
                counts[0] += t1;
                counts[1] += t5;
                counts[2] += b->count;
            }
            tr_loader_release(r->val_loader, b);
        }
    } else {
        /* Synthetic: score the fixed batch (a sanity check, not a metric). */
        CHECK(tr_model_forward(r->model, &r->synthetic_x, 0));
        CHECK(tr_model_topk(r->model, r->synthetic_y, &counts[0], &counts[1]));
        counts[2] = r->opt.batch;
    }
    if (r->size > 1) CHECK(hora_allreduce(counts, counts, 3, HORA_DTYPE_I64, HORA_OP_SUM));
    res->top1 = counts[0];
    res->top5 = counts[1];
    res->count = counts[2];
    return HORA_OK;
}

/* Once --overlap auto has decided: what it measured (rank 0). */
static void report_overlap(run_t *r)
{
    double on, off;
    int overlap = tr_trainer_overlap(r->trainer, &on, &off);
    if (overlap < 0 || r->rank != 0) return;
    if (r->tty) printf("\n");
    printf("hora-train: overlap auto: %.1f ms/step with, %.1f ms/step without -> %s\n", on, off,
           overlap ? "on" : "off");
    fflush(stdout);
    main_log_json(r, "{\"type\":\"overlap\",\"ms_per_step_on\":%.3f,\"ms_per_step_off\":%.3f,\"overlap\":%s}", on, off,
                  overlap ? "true" : "false");
}

/* What the loop keeps besides the run state: the schedule it derives from
 * the options and the data, and its counters for the progress lines and the
 * final report. None of it is checkpointed: a resumed run derives it again. */
typedef struct {
    uint64_t spe;       /* steps per full epoch */
    uint64_t spe_epoch; /* steps of the epoch in progress: fewer in one resumed after a re-shard */
    uint64_t total;     /* the step this run stops at (--epochs, --steps) */
    int print_every;
    tr_lr_schedule_t sched;
    /* --profile: from the third step of this run (the first two make the
     * plans and primitives). */
    double profile_time;
    uint64_t profile_steps, run_steps;
    /* Since the last progress line. */
    double loss_sum;
    int loss_n;
    uint64_t images_since;
    double t_since;
    eval_result_t ev;   /* the last evaluation */
    int evaluated_last; /* 1: the last epoch ended with one */
    /* --preempt: the ranks agreed to stop after this step (-1: go on), who
     * asked first and why (hora_preempt_agree). */
    int64_t stop_step;
    int stop_rank, stop_cause;
} loop_t;

/* Steps per epoch: every rank must run the same number of steps (each step
 * is a collective); the loader gives every rank the same count, and the
 * smallest would decide if not. --synthetic: --steps-per-epoch. */
static hora_status_t loop_steps_per_epoch(run_t *r, uint64_t *spe)
{
    *spe = (uint64_t)r->opt.steps_per_epoch;
    if (!r->train_loader) return HORA_OK;
    tr_loader_info_t info;
    tr_loader_info(r->train_loader, &info);
    int64_t steps = (int64_t)info.steps_per_epoch;
    if (r->size > 1) CHECK(hora_allreduce(&steps, &steps, 1, HORA_DTYPE_I64, HORA_OP_MIN));
    *spe = (uint64_t)steps;
    if (*spe == 0) {
        main_report("hora-train: the dataset has fewer than %d samples per epoch", r->size);
        return HORA_ERR_INVALID_ARG;
    }
    return HORA_OK;
}

/* The learning-rate schedule in steps of this run, where it stops and how
 * often it prints. */
static void loop_schedule(run_t *r, loop_t *l)
{
    const tr_options_t *o = &r->opt;
    const uint64_t spe = l->spe;
    int global_batch = o->batch * r->size;
    tr_lr_schedule_t sched = {0};
    sched.peak_lr = o->lr * global_batch / 256.0;
    sched.warmup_lr = o->warmup_lr;
    sched.warmup_steps = (uint64_t)llround(o->warmup_epochs * (double)spe);
    sched.total_steps = (uint64_t)o->epochs * spe;
    sched.decay = (tr_lr_decay_t)o->lr_decay;
    sched.power = o->power;
    sched.gamma = o->gamma;
    if (sched.decay == TR_LR_DECAY_STEP) {
        double epochs[TR_LR_MAX_MILESTONES];
        int n = tr_options_lr_steps(o->lr_steps, epochs, TR_LR_MAX_MILESTONES);
        for (int i = 0; i < n; i++) sched.milestones[sched.milestone_count++] = (uint64_t)(epochs[i] * (double)spe);
    }
    l->sched = sched;
    l->total = sched.total_steps;
    if (o->max_steps > 0 && (uint64_t)o->max_steps < l->total) l->total = (uint64_t)o->max_steps;
    l->print_every = o->print_every ? o->print_every : (int)(spe / 10 ? spe / 10 : 1);
}

/* The next training batch: the loader's (released by the caller), or the
 * --synthetic one. */
static hora_status_t loop_next_batch(run_t *r, const loop_t *l, tr_tensor_t *x, const int32_t **y, tr_batch_t **bp)
{
    const tr_run_state_t *st = &r->state;
    *x = r->synthetic_x;
    *y = r->synthetic_y;
    *bp = NULL;
    if (!r->train_loader) return HORA_OK;
    tr_batch_t *b = NULL;
    hora_status_t next = tr_loader_next(r->train_loader, &b);
    if (next != HORA_OK) {
        main_report("hora-train: rank %d: training data, epoch %d step %" PRIu64 ": %s", r->rank, (int)st->epoch + 1,
                    st->step_in_epoch, status_message());
        return next;
    }
    if (!b || b->count < 1) {
        main_report("hora-train: rank %d: the loader ended epoch %d after %" PRIu64 " of %" PRIu64 " steps", r->rank,
                    (int)st->epoch, st->step_in_epoch, l->spe_epoch);
        if (b) tr_loader_release(r->train_loader, b);
        return HORA_ERR_INTERNAL;
    }
    *x = input_batch_tensor(r, b, tr_model_spec(r->model));
    *y = b->labels;
    *bp = b;
    return HORA_OK;
}

/* Rank 0's progress line (a bar rewritten in place on a terminal, a plain
 * line otherwise) and its JSON record. */
static void loop_progress_print(run_t *r, const loop_t *l, double loss, double lr, double ips, double elapsed,
                                double eta, uint64_t bad)
{
    const tr_options_t *o = &r->opt;
    const tr_run_state_t *st = &r->state;
    const int epoch = (int)st->epoch;
    char eta_s[32], scaling[128] = "";
    format_duration(eta, eta_s, sizeof(eta_s));
    if (tr_loss_scale_active(&r->scaler))
        snprintf(scaling, sizeof(scaling), "  scale %g skipped %" PRIu64, st->loss_scale.scale,
                 st->loss_scale.skipped_steps);
    /* The rank the coordinator finds last to submit (HORA_STRAGGLER_S). */
    int straggler = -1;
    double straggler_share = 0, straggler_ms = 0;
    if (r->size > 1 && hora_straggler(&straggler, &straggler_share, &straggler_ms, NULL) == HORA_OK && straggler >= 0) {
        size_t used = strlen(scaling);
        snprintf(scaling + used, sizeof(scaling) - used, "  straggler rank %d (%.0f%%, +%.3g ms)", straggler,
                 100 * straggler_share, straggler_ms);
    }
    double frac = (double)(st->step_in_epoch + (l->spe - l->spe_epoch)) / (double)l->spe;
    if (r->tty) {
        char bar[21];
        int fill = (int)(frac * 20);
        for (int k = 0; k < 20; k++) bar[k] = k < fill ? '#' : '.';
        bar[20] = 0;
        printf("\repoch %d/%d [%s] step %" PRIu64 "  %.0f img/s  loss %.4f  lr %.4g  ETA %s"
               "%s%s   ",
               epoch + 1, o->epochs, bar, st->step, ips, loss, lr, eta_s, scaling,
               bad ? "  (bad samples skipped)" : "");
    } else {
        printf("epoch %d/%d step %" PRIu64 " (%.0f%%)  %.0f img/s  loss %.4f  lr %.4g  ETA %s"
               "%s  bad %" PRIu64 "\n",
               epoch + 1, o->epochs, st->step, 100 * frac, ips, loss, lr, eta_s, scaling, bad);
    }
    fflush(stdout);
    main_log_json(r,
                  "{\"type\":\"train\",\"epoch\":%.4f,\"step\":%" PRIu64 ",\"loss\":%.6f,"
                  "\"lr\":%.6g,\"img_per_s\":%.1f,\"elapsed_s\":%.3f,\"bad_samples\":%" PRIu64
                  ",\"loss_scale\":%.9g,\"skipped_steps\":%" PRIu64 "}",
                  epoch + frac, st->step, loss, lr, ips, elapsed, bad, st->loss_scale.scale,
                  st->loss_scale.skipped_steps);
}

/* Every --print-every steps and at the end of an epoch or of training: the
 * loss averaged over ranks (the same steps on every rank, so this small
 * collective is safe), the rate, and rank 0's line. */
static hora_status_t loop_progress(run_t *r, loop_t *l, double lr)
{
    const tr_run_state_t *st = &r->state;
    if (!(st->step % (uint64_t)l->print_every == 0 || st->step == l->total || st->step_in_epoch == l->spe_epoch))
        return HORA_OK;
    double loss = l->loss_sum / l->loss_n;
    if (r->size > 1) CHECK(hora_allreduce(&loss, &loss, 1, HORA_DTYPE_F64, HORA_OP_AVG));
    double t = tr_now_s();
    double ips = l->images_since / (t - l->t_since);
    double elapsed = t - r->t0;
    double eta = (double)(l->total - st->step) * (elapsed / (double)st->step);
    uint64_t bad = r->train_loader ? tr_loader_bad_count(r->train_loader) : 0;
    if (r->rank == 0) loop_progress_print(r, l, loss, lr, ips, elapsed, eta, bad);
    l->loss_sum = 0;
    l->loss_n = 0;
    l->images_since = 0;
    l->t_since = tr_now_s();
    return HORA_OK;
}

/* One training step: a batch, the trainer's step at this step's learning
 * rate, the run state advanced, progress, and a checkpoint every
 * --checkpoint-every-steps. */
static hora_status_t loop_step(run_t *r, loop_t *l)
{
    const tr_options_t *o = &r->opt;
    tr_run_state_t *st = &r->state;
    tr_tensor_t x;
    const int32_t *y;
    tr_batch_t *b;
    RETURN_ON_ERROR(loop_next_batch(r, l, &x, &y, &b));
    const int samples = x.n;
    double lr = tr_lr_at(&l->sched, st->step);
    float loss;
    if (o->profile && l->run_steps == 2) CHECK(tr_model_profile(r->model, 1));
    double ts = tr_now_s();
    int probing = tr_trainer_overlap(r->trainer, NULL, NULL) < 0;
    CHECK(tr_trainer_step(r->trainer, &x, y, lr, &loss, NULL));
    if (o->profile && l->run_steps >= 2) {
        CHECK(tr_trainer_settle(r->trainer));
        CHECK(r->backend->ops->synchronize(r->backend));
        l->profile_time += tr_now_s() - ts;
        l->profile_steps++;
    }
    l->run_steps++;
    r->train_time += tr_now_s() - ts; /* over every generation of an elastic run */
    st->step++;
    st->step_in_epoch++;
    st->images += (uint64_t)samples * (uint64_t)r->size;
    if (probing) report_overlap(r);
    if (b) tr_loader_release(r->train_loader, b);
    if (!isfinite(loss)) {
        main_report("hora-train: rank %d: loss is %g at step %" PRIu64 "; stopping", r->rank, loss, st->step - 1);
        return HORA_ERR_INTERNAL;
    }
    l->loss_sum += loss;
    l->loss_n++;
    l->images_since += (uint64_t)samples * (uint64_t)r->size;
    RETURN_ON_ERROR(loop_progress(r, l, lr));
    if (o->checkpoint_every_steps && st->step % (uint64_t)o->checkpoint_every_steps == 0)
        CHECK(main_save_checkpoint(r, l->spe_epoch, l->spe));
    /* --preempt: every rank learns here whether any rank asked for a stop
     * (SIGTERM, HORA_PREEMPT_FILE), and so all stop after the same step. */
    if (r->preempt) CHECK(hora_preempt_agree((int64_t)st->step, &l->stop_step, &l->stop_rank, &l->stop_cause));
    /* --elastic: the state in memory every --commit-every-steps, and there
     * whether hosts wait to be taken in (the same answer on every rank; not
     * after the last step, where the run ends anyway). */
    if (o->elastic && st->step % (uint64_t)r->commit_every == 0)
        RETURN_ON_ERROR(elastic_commit(r, l->spe, st->step < l->total));
    return HORA_OK;
}

/* A checkpoint of where the run stands (rank 0, with --checkpoint-dir),
 * waited for; its times (tr_ckpt_writer_times) on rank 0. */
static hora_status_t loop_checkpoint_wait(run_t *r, uint64_t spe_epoch, uint64_t spe, double *stall, double *write,
                                          uint64_t *bytes)
{
    CHECK(main_save_checkpoint(r, spe_epoch, spe));
    if (!r->ckpt) return HORA_OK;
    hora_status_t status = tr_ckpt_writer_wait(r->ckpt);
    if (status != HORA_OK) {
        main_report("hora-train: rank 0: checkpoint failed: %s", status_message());
        return status;
    }
    tr_ckpt_writer_times(r->ckpt, stall, write, bytes);
    return HORA_OK;
}

/* The agreed stop: rank 0 saves the step just completed (the epoch in
 * progress continues from there on --resume auto) and waits for the write;
 * every rank says where it stopped. No evaluation: the time before the
 * machine goes is the checkpoint's. */
static hora_status_t loop_preempted(run_t *r, const loop_t *l)
{
    const tr_run_state_t *st = &r->state;
    double stall, write;
    uint64_t bytes;
    RETURN_ON_ERROR(loop_checkpoint_wait(r, l->spe_epoch, l->spe, &stall, &write, &bytes));
    if (r->ckpt) {
        /* Why that rank asked, in words. */
        static const struct {
            int bit;
            const char *word;
        } causes[] = {{HORA_PREEMPT_CAUSE_SIGTERM, "SIGTERM"},
                      {HORA_PREEMPT_CAUSE_FILE, "HORA_PREEMPT_FILE"},
                      {HORA_PREEMPT_CAUSE_REQUEST, "hora_preempt_request"}};
        char why[96] = "";
        for (size_t i = 0; i < sizeof(causes) / sizeof(causes[0]); i++)
            if (l->stop_cause & causes[i].bit)
                snprintf(why + strlen(why), sizeof(why) - strlen(why), "%s%s", why[0] ? ", " : "", causes[i].word);
        printf("hora-train: stop asked by rank %d (%s); checkpoint: step %" PRIu64
               " in %s, %.1f MB written in %.3f s\n",
               l->stop_rank, why, st->step, r->opt.checkpoint_dir, (double)bytes / 1e6, write);
        main_log_json(r, "{\"type\":\"preempted\",\"step\":%" PRIu64 ",\"by_rank\":%d,\"cause\":%d}", st->step,
                      l->stop_rank, l->stop_cause);
    }
    printf("hora-train: preempted at step %" PRIu64 "; resume with --resume auto\n", st->step);
    fflush(stdout);
    return HORA_OK;
}

/* --elastic: a world re-formed with fewer than --min-ranks ranks stops at
 * the step it continues from: rank 0 checkpoints it (its position already
 * re-sharded for this world, which a resume converts again) and every rank
 * waits for the write, says how to go on, and the process exits 1. */
static hora_status_t loop_below_min_ranks(run_t *r, const loop_t *l)
{
    const tr_run_state_t *st = &r->state;
    double stall, write;
    uint64_t bytes;
    uint64_t spe_epoch = r->train_loader ? tr_loader_epoch_steps(r->train_loader, st->epoch_sample_offset) : l->spe;
    RETURN_ON_ERROR(loop_checkpoint_wait(r, spe_epoch, l->spe, &stall, &write, &bytes));
    int32_t written = 1; /* every rank past rank 0's write before any exits */
    if (r->size > 1) CHECK(hora_allreduce(&written, &written, 1, HORA_DTYPE_I32, HORA_OP_MIN));
    if (r->ckpt)
        printf("hora-train: checkpoint: step %" PRIu64 " in %s, %.1f MB written in %.3f s\n", st->step,
               r->opt.checkpoint_dir, (double)bytes / 1e6, write);
    printf("hora-train: rank %d: the world re-formed with %d rank%s, below --min-ranks %d: stopped at step %" PRIu64
           "; resume with --resume auto on at least %d ranks\n",
           r->rank, r->size, r->size == 1 ? "" : "s", r->opt.min_ranks, st->step, r->opt.min_ranks);
    fflush(stdout);
    main_log_json(r, "{\"type\":\"below_min_ranks\",\"step\":%" PRIu64 ",\"ranks\":%d,\"min_ranks\":%d}", st->step,
                  r->size, r->opt.min_ranks);
    r->below_min_ranks = 1;
    return HORA_OK;
}

/* The end of an epoch: evaluation every --eval-every epochs and after the
 * last, and a checkpoint every --checkpoint-every-epochs finished epochs. */
static hora_status_t loop_epoch_end(run_t *r, loop_t *l)
{
    const tr_options_t *o = &r->opt;
    const tr_run_state_t *st = &r->state;
    const int epoch = (int)st->epoch;
    int last = epoch + 1 == o->epochs || st->step >= l->total;
    l->evaluated_last = 0;
    if ((o->eval_every && (epoch + 1) % o->eval_every == 0) || last) {
        eval_result_t ev;
        CHECK(evaluate(r, &ev));
        l->ev = ev;
        l->evaluated_last = 1;
        double elapsed = tr_now_s() - r->t0;
        if (r->rank == 0) {
            if (r->tty) printf("\n");
            printf("epoch %d: test top-1 %.2f%% top-5 %.2f%% (%" PRId64 " images)  elapsed %.0f s\n", epoch + 1,
                   100.0 * ev.top1 / ev.count, 100.0 * ev.top5 / ev.count, ev.count, elapsed);
            fflush(stdout);
            main_log_json(r,
                          "{\"type\":\"eval\",\"epoch\":%d,\"top1\":%.6f,\"top5\":%.6f,\"images\":%" PRId64
                          ",\"elapsed_s\":%.3f}",
                          epoch + 1, (double)ev.top1 / ev.count, (double)ev.top5 / ev.count, ev.count, elapsed);
        }
        l->t_since = tr_now_s();
    }
    if (st->step_in_epoch >= l->spe_epoch && o->checkpoint_every_epochs &&
        (epoch + 1) % o->checkpoint_every_epochs == 0)
        CHECK(main_save_checkpoint(r, l->spe_epoch, l->spe));
    return HORA_OK;
}

/* With --checkpoint-dir, the end of training is saved too, and the last
 * write waited for. */
static hora_status_t loop_final_checkpoint(run_t *r, const loop_t *l)
{
    const tr_run_state_t *st = &r->state;
    if (!r->ckpt) return HORA_OK;
    uint64_t spe_epoch = r->train_loader ? tr_loader_epoch_steps(r->train_loader, st->epoch_sample_offset) : l->spe;
    double stall, write;
    uint64_t bytes;
    RETURN_ON_ERROR(loop_checkpoint_wait(r, spe_epoch, l->spe, &stall, &write, &bytes));
    printf("checkpoint: step %" PRIu64 " in %s, %.1f MB written in %.3f s, training stalled %.1f ms\n", st->step,
           r->opt.checkpoint_dir, (double)bytes / 1e6, write, 1e3 * stall);
    return HORA_OK;
}

/* Rank 0's summary: steps, throughput, the final accuracy (the line tests
 * and tools read), --profile's table, the final JSON record. */
static void loop_summary(run_t *r, const loop_t *l)
{
    const tr_options_t *o = &r->opt;
    const tr_run_state_t *st = &r->state;
    const eval_result_t *ev = &l->ev;
    if (r->rank != 0) return;
    double ips = r->train_time > 0 ? (double)st->images / r->train_time : 0.0;
    printf("training: %" PRIu64 " steps (%" PRIu64 " skipped: gradient overflow), %" PRIu64 " images, %.1f img/s "
           "over %d ranks (compute and all-reduce only)\n",
           st->step, st->loss_scale.skipped_steps, st->images, ips, r->size);
    if (o->elastic && r->commits && r->train_time > 0)
        printf("elastic: %" PRIu64 " commits (every %d steps), %.3f ms each with the check for hosts; %.2f%% of the "
               "time in steps\n",
               r->commits, r->commit_every, 1e3 * r->commit_time / (double)r->commits,
               100.0 * r->commit_time / r->train_time);
    printf("final test top-1 %.2f%% top-5 %.2f%%\n", 100.0 * ev->top1 / ev->count, 100.0 * ev->top5 / ev->count);
    if (o->profile && l->profile_steps)
        tr_model_profile_print(r->model, 1e3 * l->profile_time / (double)l->profile_steps, stdout);
    else if (o->profile)
        printf("profile: no step was timed (--profile starts at the third step)\n");
    main_log_json(r,
                  "{\"type\":\"final\",\"steps\":%" PRIu64 ",\"skipped_steps\":%" PRIu64 ",\"images\":%" PRIu64
                  ",\"top1\":%.6f,\"top5\":%.6f,\"elapsed_s\":%.3f,\"train_img_per_s\":%.1f,\"loss_scale\":%.9g}",
                  st->step, st->loss_scale.skipped_steps, st->images, (double)ev->top1 / ev->count,
                  (double)ev->top5 / ev->count, tr_now_s() - r->t0, ips, st->loss_scale.scale);
}

hora_status_t loop_run(run_t *r)
{
    const tr_options_t *o = &r->opt;
    tr_run_state_t *st = &r->state;
    loop_t l = {.stop_step = -1};
    RETURN_ON_ERROR(loop_steps_per_epoch(r, &l.spe));
    loop_schedule(r, &l);
    main_reshard(r, l.spe, l.sched.peak_lr);
    if (r->rank == 0)
        printf("hora-train: %d epochs x %" PRIu64 " steps, global batch %d, peak lr %.4g, warmup %" PRIu64
               " steps, %s decay, overlap %s\n",
               o->epochs, l.spe, o->batch * r->size, l.sched.peak_lr, l.sched.warmup_steps,
               tr_lr_decay_names[o->lr_decay], r->size > 1 ? tr_overlap_names[o->overlap] : "off (one rank)");

    if (o->elastic) {
        /* A re-formed world below --min-ranks stops; any other starts with
         * a commit of where it stands, in its own world. */
        r->commit_every = elastic_commit_interval(r);
        if (r->reformed && r->size < o->min_ranks) return loop_below_min_ranks(r, &l);
        RETURN_ON_ERROR(elastic_commit(r, l.spe, 0));
    }

    /* The clock of elapsed_s (time to accuracy) starts at the first step,
     * after data loading and model building, as the PyTorch peer's does
     * (in an elastic run, at this process's first). */
    if (!r->reformed || !r->train_time) r->t0 = tr_now_s();
    l.t_since = tr_now_s();
    for (; st->epoch < (uint64_t)o->epochs && st->step < l.total;
         st->epoch++, st->step_in_epoch = 0, st->epoch_sample_offset = 0) {
        l.spe_epoch = l.spe;
        if (r->train_loader) {
            l.spe_epoch = tr_loader_epoch_steps(r->train_loader, st->epoch_sample_offset);
            CHECK(tr_loader_start_epoch_at(r->train_loader, st->epoch, st->step_in_epoch, st->epoch_sample_offset));
        }
        while (st->step_in_epoch < l.spe_epoch && st->step < l.total && l.stop_step < 0 && !r->hosts_waiting)
            RETURN_ON_ERROR(loop_step(r, &l));
        if (l.stop_step >= 0) return loop_preempted(r, &l); /* the epoch stays in progress */
        if (r->hosts_waiting) return HORA_OK;               /* main re-forms the world (--elastic) */
        RETURN_ON_ERROR(loop_epoch_end(r, &l));
        if (st->step_in_epoch < l.spe_epoch)
            break; /* stopped by --steps inside the epoch: the state stays where it is */
    }
    if (!l.evaluated_last) CHECK(evaluate(r, &l.ev));
    RETURN_ON_ERROR(loop_final_checkpoint(r, &l));
    loop_summary(r, &l);
    return HORA_OK;
}
