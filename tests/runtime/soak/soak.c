/*
 * soak.c - hora-soak: a long run of random work through hora's negotiated
 * API, every element checked exactly, memory watched.
 *
 * Each iteration draws, from a seed every rank shares, up to 24 submissions:
 * allreduces (every dtype and op, pre/postscale, fp16/bf16 wire compression
 * of f32, in place or not, malloc'd, shared or laid out in an arena for the
 * zero-copy path, now and then empty), grouped allreduces, broadcasts from
 * any root and allgathers with a first dimension of each rank's own. Names
 * come back with other dtypes, ops and counts, and fresh names keep coming,
 * so the response cache both hits and goes stale. Each rank submits them in
 * its own order, polls some with hora_test meanwhile, runs the plan's direct
 * collectives (hora_allreduce, hora_reduce_scatter, hora_allgatherv,
 * hora_broadcast) from the same thread between two submissions, and
 * completes each request its own way (hora_wait, hora_test until done, or
 * hora_request_free alone) in its own order; a fifth of them stay in flight
 * until the end of the next iteration. Every element of every result, the
 * unchanged send buffers and guard bytes after each private buffer are
 * checked. A failure names the iteration, the request (kind, name, dtype,
 * op, count, scales, buffers) and the first wrong elements with expected and
 * received values; the ranks stop together at the end of that iteration
 * and the exit status is 1. `--first-iteration N --iterations 1` with the
 * printed seed replays one iteration.
 *
 * Memory: at quiet points (every soak buffer freed, nothing in flight, free
 * heap pages returned with malloc_trim) the resident set is split in three:
 * anon (private: heap, mmap'd buffers), this rank's pool (the shared-memory
 * mapping behind hora_mem_alloc, which also holds the runtime's fusion and
 * staging buffers; found in /proc/self/smaps from a page the soak allocates
 * there) and other (libraries, and the pages of the peers' pools this rank
 * has touched, which each peer bounds as its own pool). The run fails if
 * anon + pool grew by more than --rss-bound-mib (16 MiB) between the end of
 * the warm-up and the end on any rank. Why that is a fair bound: the first
 * two iterations reach the largest size of every buffer the runtime keeps
 * (soak_plan.c), and the soak's scratch buffer is resident from the start,
 * so in a run without leaks anon + pool moves only by heap fragmentation at
 * page granularity: what the runtime keeps from one iteration to the next
 * (the response cache's 1024 entries, coordinator messages) pins at most a
 * page each, a few MiB in the worst case; measured, +0.0 to +0.4 MiB in
 * runs of 30 s to 10 min. 16 MiB is above that worst case and below what a
 * 2-minute run keeps of a leak of about 1 KiB per request, or of five
 * largest tensors. The total RSS is reported, not bounded: its peer-pool
 * pages grew by up to +18 MiB in a minute (smaps: 29 -> 39 MiB in 25 s)
 * while every pool stayed at 24 MiB, as the one-shot algorithm touched other
 * parts of the peers' buffers (up to all of them). Under AddressSanitizer RSS
 * is reported only (its quarantine keeps freed memory); LeakSanitizer
 * checks leaks at exit.
 *
 * Run:  mpirun -np 3 hora-soak [--seconds S | --iterations N] [--seed X]
 *       (tools/soak builds it and runs it; exit 0 = no failure)
 */
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "soak.h"

#if defined(__SANITIZE_ADDRESS__)
#define SOAK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SOAK_ASAN 1
#endif
#endif
#ifndef SOAK_ASAN
#define SOAK_ASAN 0
#endif

#define SOAK_MAX_REPORTS 20
#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * MIB)

int soak_rank, soak_size, soak_failures;
MPI_Comm soak_comm;
struct soak_counters soak_count;

void soak_fail(const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    if (soak_failures++ >= SOAK_MAX_REPORTS) return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "rank %d FAIL: %s\n", soak_rank, line);
}

/* ---------------------------------------------------------- options */

struct soak_options {
    double seconds, warmup_s, progress_s, rss_bound_mib;
    uint64_t iterations, first_iteration, seed;
    double tensor_mib, iteration_mib;
    unsigned watchdog_s;
    int rss_check;
};

static void soak_usage(FILE *out)
{
    fprintf(out, "usage: mpirun -np N hora-soak [options]\n"
                 "  --seconds S           run for S seconds (default 60)\n"
                 "  --iterations N        run N iterations instead\n"
                 "  --seed X              the plans' seed (default 0x50a4)\n"
                 "  --first-iteration I   start at iteration I (replays a failure with --iterations 1)\n"
                 "  --tensor-mib M        largest tensor (default 4)\n"
                 "  --iteration-mib M     tensor bytes of one iteration on one rank (default 16)\n"
                 "  --warmup-s W          RSS baseline after W s (default S/10, within 5..60)\n"
                 "  --rss-bound-mib B     fail when RSS grew by more than B MiB after the warm-up (default 16)\n"
                 "  --no-rss-check        report RSS only\n"
                 "  --progress-s P        a progress line every P s (default 60, 0: none)\n"
                 "  --watchdog-s W        fail a run that hangs (default: run time + 300 s)\n");
}

static int soak_parse(int argc, char **argv, struct soak_options *o)
{
    *o = (struct soak_options){.seconds = 60,
                               .warmup_s = -1,
                               .progress_s = 60,
                               .rss_bound_mib = 16,
                               .seed = 0x50a4,
                               .tensor_mib = 4,
                               .iteration_mib = 16,
                               .rss_check = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--no-rss-check")) {
            o->rss_check = 0;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (!v) return -1;
        i++;
        if (!strcmp(a, "--seconds"))
            o->seconds = strtod(v, &end);
        else if (!strcmp(a, "--iterations"))
            o->iterations = strtoull(v, &end, 0);
        else if (!strcmp(a, "--seed"))
            o->seed = strtoull(v, &end, 0);
        else if (!strcmp(a, "--first-iteration"))
            o->first_iteration = strtoull(v, &end, 0);
        else if (!strcmp(a, "--tensor-mib"))
            o->tensor_mib = strtod(v, &end);
        else if (!strcmp(a, "--iteration-mib"))
            o->iteration_mib = strtod(v, &end);
        else if (!strcmp(a, "--warmup-s"))
            o->warmup_s = strtod(v, &end);
        else if (!strcmp(a, "--rss-bound-mib"))
            o->rss_bound_mib = strtod(v, &end);
        else if (!strcmp(a, "--progress-s"))
            o->progress_s = strtod(v, &end);
        else if (!strcmp(a, "--watchdog-s"))
            o->watchdog_s = (unsigned)strtoul(v, &end, 0);
        else
            return -1;
        if (!end || *end || end == v) return -1;
    }
    if (o->seconds <= 0 || o->tensor_mib <= 0 || o->iteration_mib < o->tensor_mib) return -1;
    if (o->warmup_s < 0) o->warmup_s = o->seconds / 10 < 5 ? 5 : o->seconds / 10 > 60 ? 60 : o->seconds / 10;
    if (!o->watchdog_s) o->watchdog_s = o->iterations ? 3600 : (unsigned)(o->seconds + 300);
    return 0;
}

/* ---------------------------------------------------------- watchdog */

static char soak_watchdog_msg[128];
static size_t soak_watchdog_len;

static void soak_watchdog_fire(int sig)
{
    (void)sig;
    ssize_t ignored = write(2, soak_watchdog_msg, soak_watchdog_len);
    (void)ignored;
    _exit(3);
}

static void soak_watchdog_arm(unsigned seconds)
{
    int n = snprintf(soak_watchdog_msg, sizeof(soak_watchdog_msg),
                     "rank %d FAIL: hora-soak still running after %u s (hang)\n", soak_rank, seconds);
    soak_watchdog_len = n > 0 ? (size_t)n : 0;
    signal(SIGALRM, soak_watchdog_fire);
    alarm(seconds);
}

/* ---------------------------------------------------------- memory */

/* The resident set at a quiet point, in three parts. */
struct soak_rss {
    double total_bytes; /* everything resident (statm) */
    double anon_bytes;  /* private: heap, mmap'd buffers, stacks (total less file and shmem pages) */
    double pool_bytes;  /* this rank's shared-memory pool (hora_mem_alloc, fusion and staging buffers) */
};

/* Resident bytes of the mappings of the file that backs the page at probe
 * (the pool: one file, possibly several mappings), from /proc/self/smaps. */
static double soak_mapping_rss(const void *probe)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    unsigned long lo, hi, off, inode, want_inode = 0;
    unsigned dev_major, dev_minor, want_major = 0, want_minor = 0;
    double rss = 0;
    int pass, counting = 0, found = 0;
    if (!f) return -1;
    /* Pass 0 finds the file behind probe, pass 1 sums its mappings. */
    for (pass = 0; pass < 2; pass++) {
        rewind(f);
        while (fgets(line, sizeof(line), f)) {
            char perms[8];
            unsigned long kb;
            if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &lo, &hi, perms, &off, &dev_major, &dev_minor, &inode) == 7) {
                if (pass == 0 && (uintptr_t)probe >= lo && (uintptr_t)probe < hi) {
                    want_inode = inode, want_major = dev_major, want_minor = dev_minor;
                    found = 1;
                }
                counting =
                    pass == 1 && found && inode == want_inode && dev_major == want_major && dev_minor == want_minor;
            } else if (counting && sscanf(line, "Rss: %lu kB", &kb) == 1) {
                rss += (double)kb * 1024.0;
            }
        }
        if (!found) break;
    }
    fclose(f);
    return found ? rss : -1;
}

static struct soak_rss soak_rss_now(const void *pool_probe)
{
    struct soak_rss r = {0, 0, 0};
    unsigned long size = 0, resident = 0, shared = 0;
    /* Free heap pages go back first: what remains is what is kept. */
    malloc_trim(0);
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lu %lu %lu", &size, &resident, &shared) != 3) resident = shared = 0;
        fclose(f);
    }
    const double page = (double)sysconf(_SC_PAGESIZE);
    r.total_bytes = (double)resident * page;
    r.anon_bytes = (double)(resident - (shared < resident ? shared : resident)) * page;
    r.pool_bytes = soak_mapping_rss(pool_probe);
    if (r.pool_bytes < 0) {
        soak_fail("cannot find the mapping of this rank's pool (%p) in /proc/self/smaps", pool_probe);
        r.pool_bytes = 0;
    }
    return r;
}

static double soak_peak_bytes(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss * 1024.0;
}

static double soak_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------- report */

/* What each rank sends rank 0 at the end. "Kept" is anon + pool, the part
 * the bound applies to. */
enum {
    R_WARM_TOTAL,
    R_WARM_ANON,
    R_WARM_POOL,
    R_END_TOTAL,
    R_END_ANON,
    R_END_POOL,
    R_PEAK,
    R_MIN_KEPT,
    R_MAX_KEPT,
    R_FIELDS
};

static void soak_rss_record(double *mine, int slot, struct soak_rss r)
{
    mine[slot] = r.total_bytes;
    mine[slot + 1] = r.anon_bytes;
    mine[slot + 2] = r.pool_bytes;
}

static void soak_report(const struct soak_options *o, double elapsed, double warm_at, const double *mine,
                        int *failures_total)
{
    double all[SOAK_MAX_RANKS * R_FIELDS];
    uint64_t c[9] = {soak_count.iterations,      soak_count.requests,       soak_count.grouped_calls,
                     soak_count.direct_calls,    soak_count.polls,          soak_count.bytes_reduced,
                     soak_count.bytes_broadcast, soak_count.bytes_gathered, soak_count.checks};
    uint64_t checks_total = 0;
    MPI_Gather(mine, R_FIELDS, MPI_DOUBLE, all, R_FIELDS, MPI_DOUBLE, 0, soak_comm);
    MPI_Reduce(&c[8], &checks_total, 1, MPI_UINT64_T, MPI_SUM, 0, soak_comm);
    int bad = 0;
    if (soak_rank == 0) {
        printf("hora-soak: %.0f s, %llu iterations, %llu requests (%llu grouped calls), %llu direct collectives, "
               "%llu hora_test polls\n",
               elapsed, (unsigned long long)c[0], (unsigned long long)c[1], (unsigned long long)c[2],
               (unsigned long long)c[3], (unsigned long long)c[4]);
        printf("hora-soak: per rank: reduced %.2f GiB, broadcast %.2f GiB, gathered %.2f GiB (%.0f MiB/s in all); "
               "%llu checks on %d ranks\n",
               (double)c[5] / GIB, (double)c[6] / GIB, (double)c[7] / GIB,
               (double)(c[5] + c[6] + c[7]) / MIB / (elapsed > 0 ? elapsed : 1), (unsigned long long)checks_total,
               soak_size);
        for (int r = 0; r < soak_size; r++) {
            const double *v = all + r * R_FIELDS;
            const double kept_warm = v[R_WARM_ANON] + v[R_WARM_POOL], kept_end = v[R_END_ANON] + v[R_END_POOL];
            const int over =
                o->rss_check && !SOAK_ASAN && warm_at >= 0 && kept_end - kept_warm > o->rss_bound_mib * MIB;
            bad += over;
            printf("hora-soak: RSS rank %d: after the warm-up (%.0f s) %.1f MiB = anon %.1f + pool %.1f + other %.1f; "
                   "end %.1f MiB = anon %.1f + pool %.1f + other %.1f; anon+pool %+.1f MiB (between %.1f and %.1f "
                   "at the quiet points), total %+.1f MiB; peak %.1f MiB%s\n",
                   r, warm_at, v[R_WARM_TOTAL] / MIB, v[R_WARM_ANON] / MIB, v[R_WARM_POOL] / MIB,
                   (v[R_WARM_TOTAL] - v[R_WARM_ANON] - v[R_WARM_POOL]) / MIB, v[R_END_TOTAL] / MIB, v[R_END_ANON] / MIB,
                   v[R_END_POOL] / MIB, (v[R_END_TOTAL] - v[R_END_ANON] - v[R_END_POOL]) / MIB,
                   (kept_end - kept_warm) / MIB, v[R_MIN_KEPT] / MIB, v[R_MAX_KEPT] / MIB,
                   (v[R_END_TOTAL] - v[R_WARM_TOTAL]) / MIB, v[R_PEAK] / MIB, over ? " -> FAIL" : "");
        }
        if (warm_at < 0)
            printf("hora-soak: the run ended before its warm-up did: RSS growth not measured\n");
        else if (SOAK_ASAN)
            printf("hora-soak: RSS not bounded under AddressSanitizer (its quarantine keeps freed memory); "
                   "LeakSanitizer reports leaks at exit\n");
        else if (o->rss_check)
            printf("hora-soak: RSS bound: anon + pool +%.0f MiB after the warm-up on every rank: %s\n",
                   o->rss_bound_mib, bad ? "FAIL" : "ok");
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, soak_comm);
    *failures_total += bad;
}

/* ---------------------------------------------------------- main */

int main(int argc, char **argv)
{
    struct soak_options o;
    int provided = 0;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_dup(MPI_COMM_WORLD, &soak_comm);
    MPI_Comm_rank(soak_comm, &soak_rank);
    MPI_Comm_size(soak_comm, &soak_size);
    int parsed = soak_parse(argc, argv, &o);
    if (parsed != 0 || soak_size > SOAK_MAX_RANKS) {
        if (soak_rank == 0) soak_usage(parsed > 0 ? stdout : stderr);
        MPI_Finalize();
        return parsed > 0 ? 0 : 2;
    }
    /* Buffers of 128 KiB and more come from mmap and go back when freed:
     * the quiet-point RSS then shows what is kept, not where glibc's
     * adaptive threshold happened to be. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    soak_watchdog_arm(o.watchdog_s);

    hora_status_t st = hora_init();
    if (st != HORA_OK) {
        fprintf(stderr, "rank %d FAIL: hora_init: %s: %s\n", soak_rank, hora_status_string(st), hora_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const struct soak_limits lim = {.tensor_bytes = (size_t)(o.tensor_mib * MIB),
                                    .iteration_bytes = (size_t)(o.iteration_mib * MIB)};
    if (soak_rank == 0) {
        printf("hora-soak: %d ranks, transport %s, seed 0x%llx, ", soak_size, hora_transport_name(),
               (unsigned long long)o.seed);
        if (o.iterations)
            printf("%llu iterations from %llu", (unsigned long long)o.iterations,
                   (unsigned long long)o.first_iteration);
        else
            printf("%.0f s (RSS baseline after %.0f s)", o.seconds, o.warmup_s);
        printf(", tensors up to %.1f MiB, %.1f MiB per iteration\n", o.tensor_mib, o.iteration_mib);
        fflush(stdout);
    }

    struct soak_plan *plans = calloc(2, sizeof(*plans));
    void *pool_probe = NULL; /* one page of this rank's pool: tells its mapping */
    if (!plans || hora_mem_alloc(1, &pool_probe) != HORA_OK) {
        fprintf(stderr, "rank %d FAIL: out of memory: %s\n", soak_rank, hora_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(pool_probe, 0, 1);
    /* The largest expected result: a tensor, a fused group member, an allgather. */
    soak_scratch_reserve(lim.iteration_bytes + lim.tensor_bytes + (size_t)soak_size * 5000 * 8);

    const double t0 = soak_clock();
    double next_progress = o.progress_s > 0 ? o.progress_s : -1, warm_at = 0;
    double mine[R_FIELDS] = {0};
    int warm = 0, have_prev = 0;
    struct soak_plan *cur = NULL;
    uint64_t it = o.first_iteration;
    for (;; it++) {
        cur = &plans[it % 2];
        struct soak_plan *prev = have_prev ? &plans[(it + 1) % 2] : NULL;
        soak_plan_make(cur, o.seed, it, &lim);
        soak_plan_submit(cur);
        soak_plan_finish(cur, prev);
        soak_count.iterations++;
        have_prev = 1;

        /* Rank 0's clock decides for everyone; any failure stops everyone. */
        enum { A_STOP, A_WARM, A_SAMPLE, A_FAIL, A_FIELDS };
        int local[A_FIELDS] = {0, 0, 0, soak_failures}, agreed[A_FIELDS];
        if (soak_rank == 0) {
            const double el = soak_clock() - t0;
            const uint64_t done = it + 1 - o.first_iteration;
            local[A_STOP] = o.iterations ? done >= o.iterations : el >= o.seconds;
            local[A_WARM] = o.iterations ? done >= (o.iterations + 9) / 10 : el >= o.warmup_s;
            local[A_SAMPLE] = next_progress > 0 && el >= next_progress;
            if (local[A_SAMPLE])
                while (next_progress <= el) next_progress += o.progress_s;
        }
        MPI_Allreduce(local, agreed, A_FIELDS, MPI_INT, MPI_MAX, soak_comm);
        const int stop = agreed[A_STOP] || agreed[A_FAIL], warm_now = agreed[A_WARM] && !warm;
        if (!warm_now && !agreed[A_SAMPLE] && !stop) continue;

        /* A quiet point: nothing of the soak's in flight or allocated. */
        soak_plan_drain(cur);
        have_prev = 0;
        const struct soak_rss r = soak_rss_now(pool_probe);
        const double kept = r.anon_bytes + r.pool_bytes;
        if (warm_now || (stop && !warm)) {
            /* Stopped before the warm-up ended: the end is the baseline. */
            warm_at = warm_now ? soak_clock() - t0 : -1;
            warm = 1;
            soak_rss_record(mine, R_WARM_TOTAL, r);
            mine[R_MIN_KEPT] = mine[R_MAX_KEPT] = kept;
        }
        if (kept < mine[R_MIN_KEPT]) mine[R_MIN_KEPT] = kept;
        if (kept > mine[R_MAX_KEPT]) mine[R_MAX_KEPT] = kept;
        if (agreed[A_SAMPLE] && soak_rank == 0) {
            printf("hora-soak: %.0f s, %llu iterations, %llu requests, reduced %.2f GiB; rank 0 RSS %.1f MiB "
                   "(anon %.1f, pool %.1f)\n",
                   soak_clock() - t0, (unsigned long long)soak_count.iterations,
                   (unsigned long long)soak_count.requests, (double)soak_count.bytes_reduced / GIB, r.total_bytes / MIB,
                   r.anon_bytes / MIB, r.pool_bytes / MIB);
            fflush(stdout);
        }
        if (stop) {
            soak_rss_record(mine, R_END_TOTAL, r);
            break;
        }
    }
    const double elapsed = soak_clock() - t0;
    mine[R_PEAK] = soak_peak_bytes();
    free(plans);
    soak_scratch_release();
    hora_mem_free(pool_probe);

    int failures_total = 0;
    MPI_Allreduce(&soak_failures, &failures_total, 1, MPI_INT, MPI_SUM, soak_comm);
    if (failures_total && soak_rank == 0)
        fprintf(stderr,
                "hora-soak: stopped after iteration %llu on a failure; replay the iteration a FAIL line names with "
                "--seed 0x%llx --first-iteration I --iterations 1 (and the same -np)\n",
                (unsigned long long)it, (unsigned long long)o.seed);
    soak_report(&o, elapsed, warm_at, mine, &failures_total);
    st = hora_shutdown();
    if (st != HORA_OK) {
        fprintf(stderr, "rank %d FAIL: hora_shutdown: %s: %s\n", soak_rank, hora_status_string(st), hora_last_error());
        failures_total++;
    }
    int all_failures = 0;
    MPI_Allreduce(&failures_total, &all_failures, 1, MPI_INT, MPI_MAX, soak_comm);
    if (soak_rank == 0) printf("hora-soak: %d failures -> %s\n", all_failures, all_failures ? "FAIL" : "PASS");
    alarm(0);
    MPI_Comm_free(&soak_comm);
    MPI_Finalize();
    return all_failures ? 1 : 0;
}
