/*
 * test_preempt.c - preemption's C API (hora.h: hora_preempt_watch,
 * hora_preempt_request, hora_preempt_agree) under mpirun: the refusals before
 * hora_init and of bad HORA_PREEMPT_FILE values; an agreement with no request
 * going on on every rank; steps that differ, a negative step and a NULL
 * stop_step on one rank failing on every rank; the file appearing (every
 * rank stops, the lowest rank named), hora_preempt_request on the last rank,
 * and a real SIGTERM on rank 0 with the handler watched (the process lives,
 * every rank stops). Prints the cost of one agreement (microseconds per call,
 * with and without HORA_PREEMPT_FILE, beside a 4 x int64 hora_allreduce).
 * Run: mpirun -np N test_preempt   (exit 0 = all passed)
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "hora.h"

static int rank, size;

/* hora_init fails with HORA_ERR_CONFIG naming HORA_PREEMPT_FILE and value. */
static void expect_init_refuses(const char *value, const char *why)
{
    setenv("HORA_PREEMPT_FILE", value, 1);
    hora_status_t st = hora_init();
    CHECK(st == HORA_ERR_CONFIG, "HORA_PREEMPT_FILE=%s (%s): hora_init returned %s", value, why,
          hora_status_string(st));
    CHECK(strstr(hora_last_error(), "HORA_PREEMPT_FILE") && strstr(hora_last_error(), value),
          "HORA_PREEMPT_FILE=%s: the message names neither: %s", value, hora_last_error());
    if (st == HORA_OK) hora_shutdown();
    unsetenv("HORA_PREEMPT_FILE");
}

/* One agreement at step, expecting that outcome on this rank. */
static void expect_agree(int64_t step, int64_t want_stop, int want_rank, int want_cause, const char *what)
{
    int64_t stop = -7;
    int by = -7, cause = -7;
    hora_status_t st = hora_preempt_agree(step, &stop, &by, &cause);
    CHECK(st == HORA_OK, "%s: hora_preempt_agree: %s (%s)", what, hora_status_string(st), hora_last_error());
    CHECK(stop == want_stop && by == want_rank && cause == want_cause,
          "%s: rank %d: stop_step %lld by_rank %d cause %d, expected %lld %d %d", what, rank, (long long)stop, by,
          cause, (long long)want_stop, want_rank, want_cause);
}

/* One agreement that must fail with want on every rank (the message too). */
static void expect_agree_fails(int64_t step, int null_stop, hora_status_t want, const char *words, const char *what)
{
    int64_t stop = -7;
    hora_status_t st = hora_preempt_agree(step, null_stop ? NULL : &stop, NULL, NULL);
    CHECK(st == want, "%s: rank %d: %s, expected %s (%s)", what, rank, hora_status_string(st), hora_status_string(want),
          hora_last_error());
    CHECK(strstr(hora_last_error(), words), "%s: the message lacks '%s': %s", what, words, hora_last_error());
    CHECK(stop == -7, "%s: stop_step written on failure", what);
}

/* Microseconds per agreement, and per 4 x int64 all-reduce (MAX), over
 * iters calls each (the latter with no request anywhere). */
static void time_agreement(const char *label, int iters)
{
    int64_t stop, v[4] = {rank, 1, 2, 3};
    hora_barrier();
    double t0 = test_now_s();
    for (int i = 0; i < iters; i++) hora_preempt_agree(i, &stop, NULL, NULL);
    double t1 = test_now_s();
    for (int i = 0; i < iters; i++) hora_allreduce(v, v, 4, HORA_DTYPE_I64, HORA_OP_MAX);
    double t2 = test_now_s();
    if (rank == 0)
        printf("test_preempt: np %d, %s: hora_preempt_agree %.2f us per call, hora_allreduce(4 x i64, max) %.2f us "
               "(%d calls, transport %s)\n",
               size, label, 1e6 * (t1 - t0) / iters, 1e6 * (t2 - t1) / iters, iters, hora_transport_name());
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    unsetenv("HORA_PREEMPT_FILE");

    /* Before hora_init: the agreement is refused, watching is allowed. */
    int64_t stop = -7;
    CHECK(hora_preempt_agree(0, &stop, NULL, NULL) == HORA_ERR_NOT_INITIALIZED && stop == -7,
          "hora_preempt_agree before hora_init: %s", hora_last_error());
    CHECK(hora_preempt_watch(2) == HORA_ERR_INVALID_ARG, "hora_preempt_watch(2) was not refused");
    CHECK(hora_preempt_watch(HORA_PREEMPT_WATCH_SIGTERM) == HORA_OK, "watch before init: %s", hora_last_error());
    CHECK(hora_preempt_watch(0) == HORA_OK, "unwatch: %s", hora_last_error());
    struct sigaction now;
    sigaction(SIGTERM, NULL, &now);
    CHECK(now.sa_handler == SIG_DFL, "hora_preempt_watch(0) did not put SIGTERM's default action back");

    /* Bad files: one that could never appear, a directory. */
    expect_init_refuses("/nonexistent-hora-dir/stop", "no such directory");
    expect_init_refuses("/tmp", "a directory");
    CHECK(!hora_initialized(), "a refused init left the runtime initialized");

    /* The first runtime: no file, no request. */
    if (hora_init() != HORA_OK) {
        fprintf(stderr, "FAIL: hora_init: %s\n", hora_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int64_t step = 0; step < 3; step++) expect_agree(step, -1, -1, 0, "no request");
    if (size > 1)
        expect_agree_fails(rank == size - 1 ? 6 : 5, 0, HORA_ERR_MISMATCH, "different steps", "steps that differ");
    expect_agree_fails(-3, 0, HORA_ERR_INVALID_ARG, "< 0", "a negative step");
    expect_agree_fails(4, rank == size - 1, HORA_ERR_INVALID_ARG, "NULL", "stop_step NULL on the last rank");
    expect_agree(4, -1, -1, 0, "after the refusals");
    time_agreement("no HORA_PREEMPT_FILE", 20000);
    /* A directory every rank can see for the file (one host). */
    char dir[64] = "/tmp/hora-preempt-XXXXXX";
    if (rank == 0 && !mkdtemp(dir)) {
        perror("mkdtemp");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    hora_broadcast(dir, sizeof(dir), HORA_DTYPE_U8, 0);
    CHECK(hora_shutdown() == HORA_OK, "shutdown");

    /* The second runtime: HORA_PREEMPT_FILE, created by the last rank. */
    char file[96];
    snprintf(file, sizeof(file), "%s/stop", dir);
    setenv("HORA_PREEMPT_FILE", file, 1);
    if (hora_init() != HORA_OK) {
        fprintf(stderr, "FAIL: hora_init with HORA_PREEMPT_FILE=%s: %s\n", file, hora_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    expect_agree(0, -1, -1, 0, "file absent");
    time_agreement("HORA_PREEMPT_FILE set, absent", 20000);
    if (rank == size - 1) fclose(fopen(file, "w"));
    hora_barrier();
    expect_agree(7, 7, 0, HORA_PREEMPT_CAUSE_FILE, "file present (every rank sees it: rank 0 named)");
    hora_barrier();
    if (rank == size - 1) unlink(file);
    hora_barrier();
    expect_agree(8, -1, -1, 0, "file removed");

    /* A request from the program on the last rank. */
    if (rank == size - 1) hora_preempt_request();
    expect_agree(9, 9, size - 1, HORA_PREEMPT_CAUSE_REQUEST, "hora_preempt_request on the last rank");
    expect_agree(10, 10, size - 1, HORA_PREEMPT_CAUSE_REQUEST, "the request stays");

    /* A real SIGTERM on rank 0, watched: the process lives, every rank stops, rank 0 named. */
    if (rank == 0) {
        CHECK(hora_preempt_watch(HORA_PREEMPT_WATCH_SIGTERM) == HORA_OK, "watch: %s", hora_last_error());
        raise(SIGTERM);
        raise(SIGTERM); /* a second one (a launcher forwarding it) changes nothing */
    }
    expect_agree(11, 11, 0,
                 rank == size - 1 && size == 1 ? HORA_PREEMPT_CAUSE_SIGTERM | HORA_PREEMPT_CAUSE_REQUEST
                                               : HORA_PREEMPT_CAUSE_SIGTERM,
                 "SIGTERM on rank 0");
    if (rank == 0) CHECK(hora_preempt_watch(0) == HORA_OK, "unwatch: %s", hora_last_error());
    CHECK(hora_shutdown() == HORA_OK, "shutdown");
    if (rank == 0) rmdir(dir);

    int total = 0, total_checks = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&checks, &total_checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_preempt: %d ranks, %d checks, %d failures\n", size, total_checks, total);
    MPI_Finalize();
    return total ? 1 : 0;
}
