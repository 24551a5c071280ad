/*
 * threads.c - default compute threads from the CPU affinity (threads.h).
 *
 * mpirun decides which CPUs a rank may use (Open MPI binds each rank to one
 * core by default for np <= 2 and to a socket above; --bind-to none leaves
 * every CPU of the host to every rank; --map-by slot:PE=N gives each rank N
 * cores). More compute threads than that make the threads take turns on
 * the cores, and a oneDNN parallel region waits for its slowest thread, so
 * the default follows the mask: every rank gathers every rank's host name
 * and mask once (one hora_allgatherv of 192 bytes per rank), and counts a
 * CPU that k ranks of its host may use as 1/k of a CPU for each.
 */
#define _GNU_SOURCE
#include "threads.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hora.h"

#define HOST_BYTES 64

/* One rank's record in the gather. */
typedef struct {
    char host[HOST_BYTES];
    tr_cpu_mask_t mask;
} rank_cpus_t;

int tr_cpu_mask_count(const tr_cpu_mask_t *mask)
{
    int n = 0;
    for (int w = 0; w < TR_CPU_MASK_WORDS; w++) n += __builtin_popcountll(mask->words[w]);
    return n;
}

int tr_threads_share(const tr_cpu_mask_t *masks, int count, int self, int *sharers)
{
    if (sharers) *sharers = 1;
    if (!masks || self < 0 || self >= count) return 1;
    const tr_cpu_mask_t *mine = &masks[self];
    /* share = sum over my CPUs of 1/k, k the number of masks holding the
     * CPU: kept as an exact fraction num / den with den = lcm of the k
     * seen (at most count, so it stays small), no rounding below 1. */
    uint64_t num = 0, den = 1;
    for (int c = 0; c < TR_CPU_MASK_WORDS * 64; c++) {
        uint64_t bit = 1ULL << (c % 64);
        if (!(mine->words[c / 64] & bit)) continue;
        uint64_t k = 0;
        for (int i = 0; i < count; i++) k += (masks[i].words[c / 64] & bit) != 0;
        uint64_t a = den, b = k;
        while (b) {
            uint64_t t = a % b;
            a = b;
            b = t;
        }
        uint64_t lcm = den / a * k;
        num = num * (lcm / den) + lcm / k;
        den = lcm;
    }
    int overlapping = 0;
    for (int i = 0; i < count; i++) {
        int any = 0;
        for (int w = 0; w < TR_CPU_MASK_WORDS && !any; w++) any = (masks[i].words[w] & mine->words[w]) != 0;
        overlapping += any || i == self;
    }
    if (sharers) *sharers = overlapping;
    uint64_t share = num / den;
    return share >= 1 ? (int)(share > 1 << 20 ? 1 << 20 : share) : 1;
}

/* This process's affinity mask (all online CPUs if it cannot be read). */
static void own_mask(tr_cpu_mask_t *mask)
{
    memset(mask, 0, sizeof(*mask));
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE && c < TR_CPU_MASK_WORDS * 64; c++)
            if (CPU_ISSET(c, &set)) mask->words[c / 64] |= 1ULL << (c % 64);
        if (tr_cpu_mask_count(mask) > 0) return;
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < (online > 0 ? online : 1) && c < TR_CPU_MASK_WORDS * 64; c++)
        mask->words[c / 64] |= 1ULL << (c % 64);
}

static int cached;
static tr_threads_info_t cache;

/* Every rank's default from the gathered records: this rank's in *info,
 * and the job's smallest. */
static void from_records(const rank_cpus_t *all, int size, int rank, tr_threads_info_t *info)
{
    tr_cpu_mask_t *host = malloc((size_t)size * sizeof(*host));
    info->min_threads = 0;
    for (int r = 0; r < size; r++) {
        /* The ranks of r's host, r among them. */
        int count = 0, self = 0;
        for (int i = 0; host && i < size; i++)
            if (strncmp(all[i].host, all[r].host, HOST_BYTES) == 0) {
                if (i == r) self = count;
                host[count++] = all[i].mask;
            }
        int sharers = 1;
        int threads =
            host ? tr_threads_share(host, count, self, &sharers) : tr_threads_share(&all[r].mask, 1, 0, &sharers);
        int cpus = tr_cpu_mask_count(&all[r].mask);
        if (r == rank) {
            info->cpus = cpus;
            info->sharers = sharers;
            info->threads = threads;
        }
        if (info->min_threads == 0 || threads < info->min_threads) {
            info->min_threads = threads;
            info->min_rank = r;
            info->min_cpus = cpus;
            info->min_sharers = sharers;
        }
    }
    free(host);
}

int tr_threads_default(tr_threads_info_t *info)
{
    if (cached) {
        if (info) *info = cache;
        return cache.threads;
    }
    tr_threads_info_t in = {0};
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    in.host_cpus = online > 0 ? (int)online : 1;
    rank_cpus_t me;
    memset(&me, 0, sizeof(me));
    own_mask(&me.mask);
    if (gethostname(me.host, HOST_BYTES - 1) != 0) snprintf(me.host, HOST_BYTES, "?");
    int distributed = hora_initialized() && hora_size() > 1;
    rank_cpus_t *all = NULL;
    size_t *counts = NULL;
    if (distributed) {
        int size = hora_size();
        all = malloc((size_t)size * sizeof(*all));
        counts = malloc((size_t)size * sizeof(*counts));
        for (int r = 0; counts && r < size; r++) counts[r] = sizeof(rank_cpus_t);
        if (all && counts && hora_allgatherv(&me, all, counts, HORA_DTYPE_U8) == HORA_OK) {
            from_records(all, size, hora_rank(), &in);
        } else {
            fprintf(stderr,
                    "tr_threads_default: rank %d: cannot gather the ranks' CPU masks (%s); counting "
                    "this rank's mask alone\n",
                    hora_rank(), hora_last_error());
            from_records(&me, 1, 0, &in);
            in.min_rank = hora_rank();
        }
    } else {
        from_records(&me, 1, 0, &in);
        in.min_rank = hora_initialized() ? hora_rank() : 0;
    }
    free(all);
    free(counts);
    if (distributed) {
        cache = in;
        cached = 1;
    }
    if (info) *info = in;
    return in.threads;
}

void tr_threads_forget(void) { cached = 0; }

int tr_threads_compute_default(int data_threads, tr_threads_info_t *info)
{
    tr_threads_info_t in;
    int share = tr_threads_default(&in);
    if (info) *info = in;
    return data_threads > 0 && share - data_threads >= 1 ? share - data_threads : share;
}

int tr_threads_check(const char *program, int requested)
{
    tr_threads_info_t in;
    if (!cached && hora_initialized() && hora_size() > 1)
        return 0; /* the collective has not run: nothing known about the others */
    tr_threads_default(&in);
    if (requested <= in.min_threads || (hora_initialized() && hora_rank() != 0)) return 0;
    const int r = in.min_rank;
    if (in.min_sharers > 1) {
        fprintf(stderr,
                "%s: warning: --threads %d is more than rank %d's share of its CPUs: its affinity mask "
                "holds %d CPU%s, which %d ranks of its host may all use, so %d compute thread%s per rank fit; "
                "with more the threads take turns on the cores and every step waits for the slowest. Fix: "
                "--threads %d (or auto), or give each rank cores of its own with `mpirun --map-by slot:PE=%d` "
                "(on a host with that many cores per rank)\n",
                program, requested, r, in.min_cpus, in.min_cpus == 1 ? "" : "s", in.min_sharers, in.min_threads,
                in.min_threads == 1 ? "" : "s", in.min_threads, requested);
    } else {
        fprintf(stderr,
                "%s: warning: --threads %d is more than the %d CPU%s rank %d may run on (its affinity "
                "mask: mpirun binds each rank to %s by default); the extra threads would take turns on %s. "
                "Fix: `mpirun --bind-to none` (every rank may use every core of the host), or `mpirun --map-by "
                "slot:PE=%d` (%d cores per rank), or --threads %d\n",
                program, requested, in.min_cpus, in.min_cpus == 1 ? "" : "s", r,
                in.min_cpus == 1 ? "one core" : "a core or socket", in.min_cpus == 1 ? "that core" : "those cores",
                requested, requested, in.min_threads);
    }
    return 1;
}
