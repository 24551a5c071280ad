/*
 * threads.h - how many compute threads a rank should run: its share of the
 * CPUs its affinity mask allows, divided among the ranks of its host whose
 * masks overlap it (hora-train, hora-bench-train, the cpu backend's default).
 *
 *   mpirun --bind-to none -np 2 (2 cores)     both ranks may use both cores -> 1 each
 *   mpirun --bind-to core -np 2               one core each                 -> 1 each
 *   mpirun --map-by slot:PE=2 -np 2 (4 cores) two cores each                -> 2 each
 *   one process, no mpirun, 8 cores           all 8                         -> 8
 *
 * A CPU that k ranks of the host may use counts 1/k towards each of them; a
 * rank's default is the floor of its sum, at least 1.
 */
#ifndef TR_THREADS_H
#define TR_THREADS_H

#include <stdint.h>

/* A CPU affinity mask: bit c of words[c / 64] is CPU c (as cpu_set_t's
 * CPU_SETSIZE = 1024 CPUs). */
#define TR_CPU_MASK_WORDS 16
typedef struct {
    uint64_t words[TR_CPU_MASK_WORDS];
} tr_cpu_mask_t;

/* CPUs in mask. */
int tr_cpu_mask_count(const tr_cpu_mask_t *mask);

/* The pure computation: masks[0..count) are the affinity masks of the
 * ranks on one host, self the index of this rank's. Returns this rank's
 * share: the sum over the CPUs of masks[self] of 1 / (how many of the
 * masks hold that CPU), rounded down, at least 1 (also for an empty mask).
 * *sharers (may be NULL): how many masks overlap masks[self], itself
 * included. */
int tr_threads_share(const tr_cpu_mask_t *masks, int count, int self, int *sharers);

/* What tr_threads_default found. */
typedef struct {
    int cpus;                  /* CPUs in this process's affinity mask (sched_getaffinity) */
    int sharers;               /* ranks of this host whose masks overlap this one's, itself included */
    int threads;               /* this rank's default: tr_threads_share */
    int host_cpus;             /* CPUs online on this host */
    int min_threads;           /* the smallest default over every rank of the job */
    int min_rank;              /* a rank that has it (the lowest) */
    int min_cpus, min_sharers; /* that rank's cpus and sharers */
} tr_threads_info_t;

/* The default compute thread count of this rank (>= 1). After hora_init on
 * more than one rank the first call is COLLECTIVE: every rank must make it
 * (hora-train and the benchmarks call it right after hora_init); it gathers
 * every rank's host name and affinity mask with hora_allgatherv and
 * caches the result, so later calls (the cpu backend's, for threads = 0)
 * are local. Without hora (not initialised) or on one rank: the CPUs of
 * this process's mask, nothing cached. info (may be NULL) gets the
 * details. */
int tr_threads_default(tr_threads_info_t *info);

/* Forget what tr_threads_default cached: the world changed (an elastic
 * re-form), and its next call gathers the new world's masks. Every rank of
 * the new world calls both, so the gather stays collective. */
void tr_threads_forget(void);

/* An explicit --threads: when requested is above some rank's default
 * (tr_threads_default must have run), rank 0 prints one warning on stderr
 * naming that rank, the cause (its mask, or the ranks sharing it) and the
 * fix (`mpirun --bind-to none`, `--map-by slot:PE=N`, or a smaller
 * --threads). program names the caller ("hora-train"). Returns 1 when it
 * warned (on rank 0), else 0. Not collective. */
int tr_threads_check(const char *program, int requested);

/* hora-train's compute threads when --threads is auto: the default minus
 * the loader's data_threads (0 without a loader) while that leaves at
 * least one, so compute threads and loader threads together do not
 * oversubscribe the rank's share. */
int tr_threads_compute_default(int data_threads, tr_threads_info_t *info);

#endif
