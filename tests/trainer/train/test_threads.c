/*
 * test_threads.c - the default compute thread count (trainer/backends/threads.c).
 *
 *   test_threads unit                                  tr_threads_share on hand-made masks
 *   mpirun --bind-to none -np N test_threads none      every rank may use every CPU of the host
 *   mpirun --bind-to core -np N test_threads core      each rank has its own core
 *
 * unit: the fair share (a CPU k ranks may use counts 1/k to each) on the
 * layouts mpirun makes (--bind-to none, --bind-to core, --map-by
 * slot:PE=2) and uneven ones, against counts worked out by hand.
 * none / core: tr_threads_default under a real mpirun, against what the
 * binding implies, computed here from this rank's own mask alone: with
 * --bind-to none every rank of the host holds the same mask, so the share
 * is floor(cpus / local ranks) and every local rank shares it; with
 * --bind-to core the masks are disjoint, so the share is the mask's CPU
 * count with no sharer. Every rank must see the same job-wide minimum, and
 * only rank 0 warns, once, about a --threads above it.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "hora.h"
#include "summary.h"
#include "threads.h"

static tr_cpu_mask_t mask_of(const int *cpus, int count)
{
    tr_cpu_mask_t m;
    memset(&m, 0, sizeof(m));
    for (int i = 0; i < count; i++) m.words[cpus[i] / 64] |= 1ULL << (cpus[i] % 64);
    return m;
}

static tr_cpu_mask_t range(int first, int count)
{
    tr_cpu_mask_t m;
    memset(&m, 0, sizeof(m));
    for (int c = first; c < first + count; c++) m.words[c / 64] |= 1ULL << (c % 64);
    return m;
}

static void unit(void)
{
    tr_cpu_mask_t m[8];
    int sharers;
    /* --bind-to none, 2 ranks on 2 cores: both hold {0, 1}: 1 each, 2 sharers. */
    m[0] = m[1] = range(0, 2);
    CHECK(tr_threads_share(m, 2, 0, &sharers) == 1 && sharers == 2, "bind-to none 2x2: %d, %d sharers",
          tr_threads_share(m, 2, 0, NULL), sharers);
    /* --bind-to core, 2 ranks: {0} and {1}: 1 each, alone. */
    m[0] = range(0, 1);
    m[1] = range(1, 1);
    CHECK(tr_threads_share(m, 2, 1, &sharers) == 1 && sharers == 1, "bind-to core: %d, %d sharers",
          tr_threads_share(m, 2, 1, NULL), sharers);
    /* --map-by slot:PE=2, 2 ranks on 4 cores: 2 each. */
    m[0] = range(0, 2);
    m[1] = range(2, 2);
    CHECK(tr_threads_share(m, 2, 0, &sharers) == 2 && sharers == 1, "PE=2: %d", tr_threads_share(m, 2, 0, NULL));
    /* One process, 8 CPUs: 8. */
    m[0] = range(0, 8);
    CHECK(tr_threads_share(m, 1, 0, &sharers) == 8 && sharers == 1, "alone on 8: %d", tr_threads_share(m, 1, 0, NULL));
    /* --bind-to none, 3 ranks on 8 CPUs: 8/3 -> 2 each. */
    m[0] = m[1] = m[2] = range(0, 8);
    CHECK(tr_threads_share(m, 3, 2, &sharers) == 2 && sharers == 3, "3 on 8: %d", tr_threads_share(m, 3, 2, NULL));
    /* 3 ranks on 3 CPUs: exactly 1 each (three thirds make one, no rounding below). */
    m[0] = m[1] = m[2] = range(0, 3);
    CHECK(tr_threads_share(m, 3, 1, NULL) == 1, "3 on 3: %d", tr_threads_share(m, 3, 1, NULL));
    /* 6 ranks on 12 CPUs: 2 each. */
    for (int i = 0; i < 6; i++) m[i] = range(0, 12);
    CHECK(tr_threads_share(m, 6, 5, NULL) == 2, "6 on 12: %d", tr_threads_share(m, 6, 5, NULL));
    /* Uneven: A {0..3}, B {0}, C {1}: A gets 1/2 + 1/2 + 1 + 1 = 3, B and C 1/2 -> 1. */
    m[0] = range(0, 4);
    m[1] = mask_of((const int[]){0}, 1);
    m[2] = mask_of((const int[]){1}, 1);
    CHECK(tr_threads_share(m, 3, 0, &sharers) == 3 && sharers == 3, "uneven A: %d, %d sharers",
          tr_threads_share(m, 3, 0, NULL), sharers);
    CHECK(tr_threads_share(m, 3, 1, &sharers) == 1 && sharers == 2, "uneven B: %d, %d sharers",
          tr_threads_share(m, 3, 1, NULL), sharers);
    /* Two groups on one host: {0..3} x 2 ranks and {4..7} alone: 2 and 4. */
    m[0] = m[1] = range(0, 4);
    m[2] = range(4, 4);
    CHECK(tr_threads_share(m, 3, 0, NULL) == 2 && tr_threads_share(m, 3, 2, NULL) == 4, "groups: %d, %d",
          tr_threads_share(m, 3, 0, NULL), tr_threads_share(m, 3, 2, NULL));
    /* CPUs past the first word, and the last CPU a mask holds. */
    m[0] = mask_of((const int[]){70, 130, 1023}, 3);
    m[1] = mask_of((const int[]){1023}, 1);
    CHECK(tr_cpu_mask_count(&m[0]) == 3, "count %d", tr_cpu_mask_count(&m[0]));
    CHECK(tr_threads_share(m, 2, 0, NULL) == 2, "high CPUs: %d", tr_threads_share(m, 2, 0, NULL));
    /* An empty mask and a bad index give 1, never 0. */
    memset(&m[0], 0, sizeof(m[0]));
    CHECK(tr_threads_share(m, 1, 0, NULL) == 1, "empty mask: %d", tr_threads_share(m, 1, 0, NULL));
    CHECK(tr_threads_share(m, 1, 3, NULL) == 1, "bad index");
    /* Without hora: the process's own mask. */
    cpu_set_t set;
    CPU_ZERO(&set);
    CHECK(sched_getaffinity(0, sizeof(set), &set) == 0, "sched_getaffinity");
    tr_threads_info_t info;
    int threads = tr_threads_default(&info);
    CHECK(threads == CPU_COUNT(&set) && info.cpus == CPU_COUNT(&set) && info.sharers == 1,
          "one process: %d threads, %d cpus, mask of %d", threads, info.cpus, CPU_COUNT(&set));
    CHECK(tr_threads_compute_default(1, NULL) == (threads > 1 ? threads - 1 : 1), "less one loader thread: %d",
          tr_threads_compute_default(1, NULL));
}

static void under_mpirun(const char *mode)
{
    const int rank = hora_rank();
    cpu_set_t set;
    CPU_ZERO(&set);
    CHECK(sched_getaffinity(0, sizeof(set), &set) == 0, "sched_getaffinity");
    const int cpus = CPU_COUNT(&set), local = hora_local_size();
    tr_threads_info_t info;
    int threads = tr_threads_default(&info);
    CHECK(info.cpus == cpus, "rank %d: %d cpus, its mask has %d", rank, info.cpus, cpus);
    if (strcmp(mode, "none") == 0) {
        int want = cpus / local > 0 ? cpus / local : 1;
        CHECK(threads == want && info.sharers == local,
              "rank %d, --bind-to none: %d threads and %d sharers, want "
              "%d (%d CPUs / %d local ranks) and %d",
              rank, threads, info.sharers, want, cpus, local, local);
    } else {
        CHECK(threads == cpus && info.sharers == 1,
              "rank %d, --bind-to core: %d threads and %d sharers, want %d "
              "(its own %d CPU%s) and 1",
              rank, threads, info.sharers, cpus, cpus, cpus == 1 ? "" : "s");
    }
    /* The job-wide minimum, the same on every rank, and the cached result. */
    int lo = threads, hi, mins[2] = {info.min_threads, -info.min_threads};
    hora_allreduce(&threads, &lo, 1, HORA_DTYPE_I32, HORA_OP_MIN);
    hora_allreduce(mins, mins, 2, HORA_DTYPE_I32, HORA_OP_MIN);
    hi = -mins[1];
    CHECK(info.min_threads == lo && mins[0] == hi, "rank %d: minimum %d, the ranks' smallest %d (seen %d..%d)", rank,
          info.min_threads, lo, mins[0], hi);
    CHECK(tr_threads_default(NULL) == threads, "rank %d: the second call differs", rank);
    /* One warning, on rank 0, for a count above the minimum; none at it. */
    CHECK(tr_threads_check("test_threads", info.min_threads) == 0, "rank %d: warned at the share", rank);
    int warned = tr_threads_check("test_threads", info.min_threads + 1), count = 0;
    hora_allreduce(&warned, &count, 1, HORA_DTYPE_I32, HORA_OP_SUM);
    CHECK(count == 1 && warned == (rank == 0), "rank %d: %d ranks warned (want 1: rank 0)", rank, count);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "unit") == 0) {
        unit();
        printf("test_threads unit: %d checks, %d failures -> %s\n", checks, failures, failures ? "FAIL" : "PASS");
        return failures ? 1 : 0;
    }
    if (strcmp(mode, "none") != 0 && strcmp(mode, "core") != 0) {
        fprintf(stderr, "usage: test_threads unit | none | core (under mpirun --bind-to none / core)\n");
        return 2;
    }
    if (hora_init() != HORA_OK) {
        fprintf(stderr, "test_threads: hora_init: %s\n", hora_last_error());
        return 1;
    }
    under_mpirun(mode);
    return test_summary("test_threads", failures, checks);
}
