/*
 * checkpoint.h - hora-train's checkpoints: what a run is (the model
 * description), where it stands (run.h's struct) and its tensors
 * (parameters = the f32 master weights, momentum, BN running statistics),
 * written by rank 0 as one ckpt_file.h file, atomically, from a snapshot on
 * a background thread; and read back, verified, checked against the
 * command line and broadcast to every rank.
 *
 * Sections (CHECKPOINT.md has the bytes):
 *   model      text: architecture, shapes, precision, world size, per-rank
 *              batch, and every tensor's name, shape and arena offset
 *   run_state  text: every field of tr_run_state_t, exactly (%a for doubles)
 *   params     f32, the params arena
 *   momentum   f32, the momentum arena (the params' layout)
 *   bn_stats   f32, the BN statistics arena
 *
 * A directory holds ckpt-SSSSSSSSSS.hckpt files (S: the step count, 10
 * digits) and `latest`, a small text file naming the newest one. Writing:
 * ckpt-....hckpt.tmp.PID in the same directory, fsync, rename, fsync the
 * directory; then latest the same way; then the oldest beyond keep are
 * removed. A crash at any point leaves the previous checkpoint and a latest
 * that names a complete file (or the one before).
 */
#ifndef TR_CHECKPOINT_H
#define TR_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt_desc.h"
#include "model.h"
#include "run.h"

#define TR_CKPT_LATEST "latest"

/* What a run is, beyond the model spec: recorded, and compared on resume
 * where it matters. */
typedef struct {
    const char *arch; /* --model */
    int world_size;
    int batch; /* per rank */
    uint64_t steps_per_epoch;
} tr_ckpt_run_info_t;

/* The model description text of the "model" section (malloc'd). */
char *tr_ckpt_describe(const tr_model_t *model, const tr_ckpt_run_info_t *info);

/* The run_state section's text (malloc'd) and its parse (every field
 * present; HORA_ERR_CORRUPT naming the first bad line otherwise). */
char *tr_ckpt_state_text(const tr_run_state_t *state, const tr_ckpt_run_info_t *info);
hora_status_t tr_ckpt_state_parse(const char *text, tr_run_state_t *state, tr_ckpt_run_info_t *info);

/* 1 when run_state's key (len bytes) is a measurement: a time recorded
 * while choosing something, or whether a choice was measured at all
 * (overlap_probe_s, precision_measured, precision_probe_ms), which two
 * runs with the same training state may differ in; 0 for the training
 * state (everything else, the choices made from the measurements too:
 * overlap_mode, precision). hora-ckpt diff tells the two apart. */
int tr_ckpt_state_key_is_measurement(const char *key, size_t len);

/* A checkpoint read into memory (tr_ckpt_load). */
typedef struct {
    char path[4096];
    char *model_text;
    char *state_text;
    tr_ckpt_desc_t desc; /* the model section parsed (and checked) */
    tr_run_state_t state;
    tr_ckpt_run_info_t info; /* info.arch points into desc */
    float *params, *momentum, *stats;
    size_t params_count, stats_count;
} tr_ckpt_data_t;

/* Read every section of path, check every CRC and parse the texts.
 * HORA_ERR_CORRUPT / HORA_ERR_SYSTEM with the file, section and offset in
 * status_message(). */
hora_status_t tr_ckpt_load(const char *path, tr_ckpt_data_t *data);
void tr_ckpt_data_free(tr_ckpt_data_t *data);

/* The model spec a checkpoint describes (its architecture: desc.arch). */
hora_status_t tr_ckpt_spec(const tr_ckpt_data_t *data, tr_model_spec_t *spec);

/* The first difference tr_ckpt_compare finds, as the description writes
 * it: the line's key ("arch", "classes", "compute_dtype", ...; "param" or
 * "bn" for a tensor's line) and its value in the checkpoint and in this run
 * (the rest of the line; "" where the line is only in the other). */
typedef struct {
    char key[32];
    char checkpoint[256];
    char run[256];
} tr_ckpt_difference_t;

/* The first difference between the description a checkpoint holds and the
 * model this run built ("classes: checkpoint 10, this run 100"), or 0 when
 * they agree on everything a resume needs (architecture, width, classes,
 * input shape, precision, every tensor's name and shape). World size and
 * batch may differ. difference (may be NULL) gets it field by field; the
 * text is in status_message() (HORA_ERR_MISMATCH). */
int tr_ckpt_compare(const tr_ckpt_data_t *data, const tr_model_t *model, const char *arch,
                    tr_ckpt_difference_t *difference);

/* Copy the checkpoint's tensors into the model's arenas (params, momentum,
 * statistics) and remake the low-precision copy. The description must
 * match (tr_ckpt_compare). */
hora_status_t tr_ckpt_apply(const tr_ckpt_data_t *data, tr_model_t *model);

/* A model built from a checkpoint on backend, with its parameters and
 * statistics (inference: tools). batch: activations for that many samples. */
hora_status_t tr_ckpt_build_model(const tr_ckpt_data_t *data, tr_backend_t *backend, int batch, tr_model_t **model);

/* ---- the in-memory commit (hora-train --elastic) ---- */

/* What a checkpoint file holds, kept in host memory instead: the run
 * state, the world it was taken in (info: world size, per-rank batch,
 * steps per epoch) and the params, momentum and BN statistics arenas,
 * in a tr_ckpt_data_t without texts or path (tr_ckpt_data_free frees it).
 * The first commit allocates; later ones copy into the same buffers, so a
 * commit costs what a checkpoint's stall does (the arenas' download). */
hora_status_t tr_ckpt_commit(tr_ckpt_data_t *commit, const tr_model_t *model, const tr_run_state_t *state,
                             const tr_ckpt_run_info_t *info);
/* Back to a commit: tr_ckpt_apply(commit, model) puts its tensors into a
 * model of the same architecture (a rebuilt one too), and commit->state is
 * the run state to continue from. */

/* Collective (an elastic world just re-formed): *root is the lowest rank
 * holding the newest commit (the highest step; a commit has params), the
 * same on every rank, or -1 when no rank holds one (every rank is new).
 * One all-reduce. */
hora_status_t tr_ckpt_commit_owner(const tr_ckpt_data_t *commit, int *root);
/* Collective: root's commit's run state and world (world size, per-rank
 * batch, steps per epoch; info->arch is left as it is) into every rank's
 * *state and *info. The tensors go later, from the model root rolled back
 * (tr_trainer_broadcast_state). */
hora_status_t tr_ckpt_commit_share(const tr_ckpt_data_t *commit, int root, tr_run_state_t *state,
                                   tr_ckpt_run_info_t *info);

/* ---- the writer (rank 0) ---- */

typedef struct tr_ckpt_writer tr_ckpt_writer_t;

/* Start the writer for dir (created if missing), keeping the newest keep
 * files. Leftover temporary files (*.tmp.*) in dir are removed. */
hora_status_t tr_ckpt_writer_open(const char *dir, int keep, tr_ckpt_writer_t **out);
/* Allocate (and touch) the snapshot buffers for model now, so that the
 * first save stalls training only for the copy (optional). */
hora_status_t tr_ckpt_writer_reserve(tr_ckpt_writer_t *w, const tr_model_t *model);
/* Snapshot the model's arenas and state now (the only part that stalls the
 * caller: waiting for the previous write, then copies), and write them on
 * the writer's thread. A failure of an earlier write is returned here (and
 * by _close). */
hora_status_t tr_ckpt_writer_save(tr_ckpt_writer_t *w, const tr_model_t *model, const tr_run_state_t *state,
                                  const tr_ckpt_run_info_t *info);
/* Wait for the write in flight; its status. */
hora_status_t tr_ckpt_writer_wait(tr_ckpt_writer_t *w);
/* Seconds the last save stalled its caller, and the last write took. */
void tr_ckpt_writer_times(const tr_ckpt_writer_t *w, double *stall_s, double *write_s, uint64_t *bytes);
/* Wait, then stop the thread. */
hora_status_t tr_ckpt_writer_close(tr_ckpt_writer_t *w);

/* ---- choosing what to resume ---- */

/* dir's checkpoints, newest first (by the step in the name; latest's
 * choice first when it names one): *paths malloc'd array of malloc'd
 * strings. */
hora_status_t tr_ckpt_list(const char *dir, char ***paths, int *count);
void tr_ckpt_list_free(char **paths, int count);

#endif
