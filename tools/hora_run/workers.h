/* workers.h - hora-run's local workers: start K processes with their
 * ranks in the environment, watch them, stop them (README.md). */
#ifndef HORA_RUN_WORKERS_H
#define HORA_RUN_WORKERS_H

#include <sys/types.h>

#include "hora.h"
#include "output.h"

/* What the workers of one generation are told (the environment). */
typedef struct {
    int rank_base;  /* the global rank of local worker 0 */
    int world_size; /* HORA_SIZE */
    int local_size; /* K */
    int node_rank, node_count;
    int generation;
    const char *rdzv_host;
    int rdzv_port;
    const char *job_id;
    int prefix_output; /* --prefix-output: the workers' output through pipes (output.h) */
    /* --elastic: HORA_ELASTIC=1, HORA_WORKER_ID=<host_id>.<slot>,
     * HORA_JOIN_TIMEOUT_S, HORA_ELASTIC_GRACE_S (none of them without). */
    int elastic;
    int host_id;
    double join_timeout_s, elastic_grace_s;
} workers_env_t;

/* A worker's slot is its index in workers_t.w, fixed for its life; its
 * rank and local rank are those of the current generation (--elastic: they
 * change when the world re-forms, workers_renumber). */
typedef struct {
    pid_t pid;  /* 0 before start; -pid once reaped */
    int status; /* waitpid's, once reaped */
    int rank;
    int local_rank;
} worker_t;

typedef struct {
    worker_t *w;
    int count;
    int running;              /* not yet reaped */
    output_stream_t *streams; /* stdout, stderr of each worker; NULL without --prefix-output */
    int stream_count;
} workers_t;

/* Fork and exec argv (searched on PATH) local_size times; each worker is
 * the leader of a process group of its own (stopped as a group) and dies
 * with hora-run (PR_SET_PDEATHSIG). HORA_ERR_SYSTEM when fork fails (the
 * ones started are stopped). An exec failure is the worker's exit 127. */
hora_status_t workers_start(workers_t *ws, const workers_env_t *env, char *const argv[]);
/* Reap the workers that ended, without waiting. The first that ended badly
 * (non-zero exit or a signal) is described into failure (empty otherwise),
 * with its rank, local rank, host and pid. Returns how many still run. */
int workers_poll(workers_t *ws, int node_rank, char *failure, size_t failure_bytes);
/* --elastic, after a generation failed and the next one formed: the
 * workers still running, in slot order, take ranks rank_base, rank_base +
 * 1, ... and local ranks 0, 1, ... (their --prefix-output too). Returns how
 * many run. */
int workers_renumber(workers_t *ws, int rank_base);
/* Forward the workers' output (--prefix-output) for up to timeout_s, or
 * sleep that long. */
void workers_pump(workers_t *ws, double timeout_s);
/* SIGTERM to every running worker's group, up to grace_s for them to end,
 * then SIGKILL; returns once every one is reaped and its output (up to
 * 0.5 s more) forwarded. */
void workers_stop(workers_t *ws, double grace_s);
void workers_free(workers_t *ws);

#endif
