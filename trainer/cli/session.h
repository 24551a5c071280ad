/*
 * session.h - one run of hora-train, shared by its files (main.c: setup;
 * input.c: the loaders and batches; loop.c: the training loop and
 * evaluation; main_ckpt.c: resuming and saving checkpoints): the run
 * (run_t), the error report and the JSON log (session.c). Nothing outside
 * cli/ includes it.
 */
#ifndef TR_CLI_SESSION_H
#define TR_CLI_SESSION_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "base/status.h"
#include "checkpoint.h"
#include "loader.h"
#include "loss_scale.h"
#include "model.h"
#include "options.h"
#include "run.h"
#include "train.h"

/* Everything one run holds. Where the run stands (what a checkpoint
 * saves, and a resume restores, whole) is state (run.h); the rest is built
 * from the options at start. */
typedef struct {
    tr_options_t opt;
    tr_run_state_t state;
    tr_loss_scale_config_t scaler; /* from --precision / --loss-scale */
    int rank, size;
    tr_backend_t *backend;
    tr_model_t *model;
    tr_trainer_t *trainer;
    tr_loader_t *train_loader, *val_loader;
    tr_tensor_t synthetic_x;
    int32_t *synthetic_y;
    FILE *log;
    int tty;
    double t0;
    /* Checkpoints: the writer (rank 0, with --checkpoint-dir); what a
     * resume read (rank 0 holds the tensors until they are applied; every
     * rank the layout of the run that wrote it). */
    tr_ckpt_writer_t *ckpt;
    uint64_t last_saved_step;
    int resumed;
    tr_ckpt_data_t resume;
    tr_ckpt_run_info_t saved; /* world size, batch and steps per epoch of the run that wrote it */
    /* --preempt: 1 when the ranks agree at every step boundary whether to
     * stop (SIGTERM watched, HORA_PREEMPT_FILE looked for). */
    int preempt;
    /* --elastic (elastic.c): the last commit in memory (params NULL: none
     * yet, a newcomer's), every how many steps; reformed: this process has
     * joined a later generation, so setup leaves the tensors to
     * elastic_sync; root: the rank whose commit everyone continues from;
     * hosts_waiting: the last commit found hosts to take in (the loop
     * returns for a re-form); below_min_ranks: the world fell below
     * --min-ranks and the run stopped. train_time: seconds in steps over
     * every generation (the summary's rate); commit_time, commits: seconds
     * in the commits and checks of the loop, and how many (its cost). */
    int commit_every;
    tr_ckpt_data_t commit;
    int reformed, root, hosts_waiting, below_min_ranks;
    double train_time, commit_time;
    uint64_t commits;
} run_t;

/* Print an error on stderr (one line) and keep this rank's first one: what
 * hora_abort tells the peers. */
void main_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Keep line as this rank's first error without printing it (another rank
 * printed it): what hora_abort tells the peers. */
void main_report_keep(const char *line);

/* This rank's first error ("" when none): what hora_abort tells the peers. */
const char *main_first_error(void);

/* The longest message a refused resume sends from rank 0 to every rank. */
#define TR_RESUME_MSG_BYTES 1024

/* A collective ended with HORA_ERR_PEER_LOST (an elastic world lost a
 * member): keep its message (the reason the launcher gave), print nothing;
 * main_lost_reason() gives it back for the re-form's line. */
void main_note_lost(const char *message);
const char *main_lost_reason(void);

/* A JSON-lines record into --log (rank 0; nothing without a log). */
void main_log_json(run_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A failed call: report it with its message - a runtime call's from
 * hora_last_error(), the trainer's own (backends, model, data,
 * checkpoints: base/status.h) from status_message(), cleared before the
 * call so that it is this call's - and return its status. */
#define CHECK(call)                                                                                              \
    do {                                                                                                         \
        status_clear();                                                                                          \
        hora_status_t status_ = (call);                                                                          \
        if (status_ != HORA_OK) {                                                                                \
            const char *message_ = strncmp(#call, "hora_", 5) == 0 ? hora_last_error() : status_message();       \
            if (status_ == HORA_ERR_PEER_LOST) { /* not an error: the world re-forms (--elastic) */              \
                main_note_lost(message_);                                                                        \
                return status_;                                                                                  \
            }                                                                                                    \
            main_report("hora-train: rank %d: %s failed: %s%s%s%s", r->rank, #call, hora_status_string(status_), \
                        message_[0] ? " (" : "", message_, message_[0] ? ")" : "");                              \
            return status_;                                                                                      \
        }                                                                                                        \
    } while (0)

/* A failed call of hora-train's own that has reported its failure itself
 * (with CHECK or main_report): return its status, without a second line. */
#define RETURN_ON_ERROR(call)                   \
    do {                                        \
        hora_status_t status_ = (call);         \
        if (status_ != HORA_OK) return status_; \
    } while (0)

#endif
