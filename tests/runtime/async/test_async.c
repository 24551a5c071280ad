/*
 * test_async.c - the negotiated asynchronous API (hora_*_async, hora_join,
 * hora_wait / hora_test) on N ranks, one mode per meson test:
 *
 *   basic          allreduce of every dtype x op, in place and out of place,
 *                  shared and malloc'd, with pre/postscale and fp16/bf16
 *                  compression; broadcast from every root; allgather with a
 *                  first dimension that differs per rank; a grouped allreduce;
 *                  hora_test polling. All enqueued at once, in a different
 *                  order on every rank.
 *   errors         cross-rank mismatches fail on every rank with a message
 *                  naming both values, and the next request works; local
 *                  argument errors; duplicate names; calls outside
 *                  init/shutdown; init -> shutdown -> init.
 *   join           ranks run different numbers of steps, then hora_join;
 *                  an allgather while a rank has joined fails.
 *   stress         2 threads per rank, thousands of random subsets of 32
 *                  tensors submitted in a different order on every rank.
 *   stall          the stall inspector names the tensor and the missing rank.
 *   stall_shutdown HORA_STALL_SHUTDOWN_S ends stalled requests with
 *                  HORA_ERR_SHUTDOWN and hora_shutdown still returns.
 *   stall_busy     the same while every rank keeps other requests going.
 *   stall_stack    rank 0 prints the late rank's native backtrace under the
 *                  stall warning (none with HORA_STALL_STACKS=0).
 *   idle           with nothing in flight the coordinator sleeps instead of
 *                  cycling: the whole process uses under 2% of a core while
 *                  idle; then ranks submit seconds apart and the result is
 *                  exact.
 *   timeline       HORA_TIMELINE is valid JSON mid-run and after shutdown.
 *   timeline_dynamic hora_timeline_start/stop: each stopped file is a
 *                  complete Chrome trace of what ran while it was started.
 *   badenv         a bad HORA_* value fails hora_init with HORA_ERR_CONFIG.
 *   ops            reducescatter (grouped too), alltoall with splits,
 *                  barrier (negotiated and direct), integer scaling
 *                  truncating toward zero.
 *   sets           process sets: every operation on overlapping and
 *                  disjoint sets beside the world, concurrency, refusals,
 *                  creation and release (HORA_PROCESS_SETS=0,1 too).
 *   flight_stall   one rank stops submitting past the stall shutdown: every
 *                  rank writes its flight recorder to HORA_FLIGHT_DIR and
 *                  tools/hora-frtrace names that rank and the collective.
 *   flight_usr1    SIGUSR1 writes the recorder; the job goes on, exact.
 *   straggler      one rank submits 4 ms late every step: rank 0's log and
 *                  hora_straggler name it (HORA_STRAGGLER_S=1).
 *
 * Inputs are small integers derived from (rank, tensor, element, iteration),
 * so every rank computes the exact expected result in every dtype.
 * The test's own bookkeeping (barriers, the final failure count) uses MPI on
 * a private communicator: it must work whatever state the runtime under test
 * is in (shut down by the stall inspector, never initialised, ...), and it
 * never shares a communicator with the coordinator thread.
 * A watchdog (alarm) turns a hang into a failure with the mode's name.
 *
 * Files: this one holds main() and the watchdog; mode M lives in async_M.c
 * (the three stall modes in async_stall.c), the helpers they share in
 * async_common.c / .h and one allreduce with its expected result
 * (struct ar_case) in async_ar_case.c.
 *
 * Run: mpirun -np N test_async MODE   (N = 2..4; exit 0 = all passed)
 *      TEST_ASYNC_QUICK=1 shortens stress and timeline;
 *      TEST_ASYNC_ITERATIONS=N runs stress N iterations (the sanitizer
 *      builds: an iteration there costs ten times as much).
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "async_common.h"
#include "summary.h"

static char watchdog_msg[160];
static size_t watchdog_len;

static void watchdog_fire(int sig)
{
    (void)sig;
    ssize_t ignored = write(2, watchdog_msg, watchdog_len);
    (void)ignored;
    _exit(3);
}

/* A hang becomes a failure that names the mode. */
static void watchdog_arm(const char *mode, unsigned seconds)
{
    int n = snprintf(watchdog_msg, sizeof(watchdog_msg), "rank %d FAIL: mode %s still running after %u s (hang)\n",
                     rank, mode, seconds);
    watchdog_len = n > 0 ? (size_t)n : 0;
    signal(SIGALRM, watchdog_fire);
    alarm(seconds);
}

/* ------------------------------------------------------------------- main */

static const struct {
    const char *name;
    void (*run)(void);
    unsigned watchdog_s;
} modes[] = {
    {"basic", mode_basic, 600},
    {"errors", mode_errors, 300},
    {"join", mode_join, 300},
    {"stress", mode_stress, 1500},
    {"stall", mode_stall, 120},
    {"stall_shutdown", mode_stall_shutdown, 120},
    {"stall_busy", mode_stall_busy, 120},
    {"stall_stack", mode_stall_stack, 60},
    {"timeline", mode_timeline, 600},
    {"timeline_dynamic", mode_timeline_dynamic, 120},
    {"badenv", mode_badenv, 120},
    {"idle", mode_idle, 120},
    {"defer", mode_defer, 120},
    {"ops", mode_ops, 300},
    {"sets", mode_sets, 300},
    {"flight_stall", mode_flight_stall, 60},
    {"flight_usr1", mode_flight_usr1, 60},
    {"straggler", mode_straggler, 60},
};

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "basic";
    int provided = 0, m = -1;
    const char *q = getenv("TEST_ASYNC_QUICK");

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_dup(MPI_COMM_WORLD, &test_comm);
    MPI_Comm_rank(test_comm, &rank);
    MPI_Comm_size(test_comm, &size);
    quick = q && q[0] && strcmp(q, "0") != 0;
    const char *n = getenv("TEST_ASYNC_ITERATIONS");
    if (n && n[0]) {
        char *end;
        long v = strtol(n, &end, 10);
        if (*end || v < 1 || v > 1000000) {
            if (rank == 0)
                fprintf(stderr, "test_async: TEST_ASYNC_ITERATIONS=%s is not a count from 1 to 1000000\n", n);
            MPI_Finalize();
            return 2;
        }
        iterations = (int)v;
    }
    for (size_t k = 0; k < sizeof(modes) / sizeof(modes[0]); k++)
        if (!strcmp(mode, modes[k].name)) m = (int)k;
    if (m < 0 || size < 2) {
        if (rank == 0) {
            fprintf(stderr, "usage: mpirun -np N test_async MODE   (N >= 2; MODE one of");
            for (size_t k = 0; k < sizeof(modes) / sizeof(modes[0]); k++) fprintf(stderr, " %s", modes[k].name);
            fprintf(stderr, ")\n");
        }
        MPI_Finalize();
        return 2;
    }
    watchdog_arm(mode, modes[m].watchdog_s);
    modes[m].run();

    char test[96];
    snprintf(test, sizeof(test), "test_async %s", mode);
    int status = test_summary_mpi(test, test_comm, atomic_load(&failures), atomic_load(&checks));
    alarm(0);
    MPI_Comm_free(&test_comm);
    MPI_Finalize();
    return status;
}
