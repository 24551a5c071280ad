/*
 * test_faults.c - one injected fault per run; tests/runtime/faults/faults.py starts it
 * under mpirun, times it and checks what every rank reports.
 *
 *   test_faults MODE        (TEST_FAULTS_DIR: where each rank writes its report)
 *
 * The victim is the last rank. Modes:
 *   sigstop      a helper process stops the victim (SIGSTOP) a few ms into a
 *                64 MiB all-reduce for HORA_TIMEOUT_S + 1.5 s, then continues it
 *                (SIGCONT). Every rank must fail the same operation with the
 *                same status (none may return HORA_OK for it); then every rank
 *                calls hora_shutdown, which must return.
 *   abort        the peers are blocked in a direct all-reduce the victim never
 *                joins; the victim calls hora_abort(HORA_ERR_CORRUPT, reason)
 *                and exits 1. The peers' all-reduce must fail with that status
 *                and "rank V aborted: reason"; they hora_abort too and exit 1.
 *   abort-async  the same while the peers wait (hora_wait) for pending async
 *                requests; every one of them, and a request submitted after,
 *                must fail with the victim's status and reason.
 *   sigstop-small  the same on all-reduces of 8 bytes (the latency path,
 *                one flag round through the shm transport's slots: the stop
 *                lands a few ms after iteration FAULT_AT, in whichever call
 *                the victim is in then, or between two).
 *   kill         the helper SIGKILLs the victim a few ms into an all-reduce
 *                (run under mpirun --enable-recovery): every survivor fails the
 *                same operation with HORA_ERR_TRANSPORT naming the dead rank.
 *   kill-small   the same on all-reduces of 8 bytes.
 *   sigstop-fused / kill-fused  the same on a fused many-tensor all-reduce:
 *                FUSED_TENSORS async all-reduces of 512 KiB each (16 MiB, one
 *                fusion buffer) submitted, then waited for, every iteration;
 *                the report adds each request's status of the failed
 *                iteration (`statuses`), which must be the same on every rank.
 *   TEST_FAULTS_DELAY_S (environment, sigstop* / kill*): the signal comes
 *   that long into iteration FAULT_AT instead of 4 ms (tests/runtime/faults/outcome.py
 *   draws it at random: one outcome at any moment). TEST_FAULTS_STOP_S
 *   (sigstop*): how long the victim stays stopped, instead of
 *   HORA_TIMEOUT_S + 1.5 s (outcome.py: + 0.5 s, enough for its peers to
 *   time out).
 *   shutdown     the peers are blocked in a direct all-reduce; the victim calls
 *                hora_shutdown instead of joining it (a program that hit an
 *                error and shuts down). The peers must fail at once with
 *                HORA_ERR_SHUTDOWN naming the victim, and every hora_shutdown
 *                must return.
 *   shutdown-async  the same while the peers wait for async requests.
 *   stall        the victim stops submitting the common requests and waits for
 *                one nobody else submits; HORA_STALL_SHUTDOWN_S ends every
 *                pending request on every rank with HORA_ERR_SHUTDOWN, and
 *                hora_shutdown returns.
 *   shm-small    run over a small /dev/shm (faults.py mounts one): hora_init
 *                must fail naming /dev/shm and the settings to change.
 *   shm-stage    over a small /dev/shm with a small HORA_FUSION_THRESHOLD:
 *                hora_init succeeds, then a 48 MiB all-reduce of malloc'd
 *                buffers fails on every rank with a message about staging
 *                (not blaming hora_mem_alloc, which the caller never called).
 *
 * Report (DIR/rank<R>, "key=value" lines, written with one write each):
 *   pid= at start; then mode, iteration (of the first failed call, -1 none),
 *   status, message, call_s (how long that call took), fail_at (CLOCK_REALTIME
 *   when it returned), abort_at (victim: when it called hora_abort),
 *   agree (sigstop/kill: every rank reported the same iteration and status),
 *   shutdown_s / shutdown_status, exit.
 * Exit: 3 after the expected failure, 1 after hora_abort, 2 when something
 * else went wrong (no failure, a wrong one: the report says what).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "hora.h"
#include "clock.h"
#include "report.h"

#define FAULT_ITERS 200
#define FAULT_AT 3                    /* the victim's fault comes in this iteration */
#define FAULT_SMALL_ITERS 2000000000L /* the *-small modes: until the fault (a few ms after FAULT_AT) */

static int rank = -1, size = 0, victim = -1;
static int helper_fd = -1; /* victim: commands to the helper process */

/* ------------------------------------------------------------ the helper */

/* Before MPI starts (fork is safe then): a child that, on command, sends
 * the victim a signal after a delay, and SIGCONT after another (0: none). */
struct helper_cmd {
    double delay_s;
    int signal;
    double cont_after_s;
};

static void helper_start(void)
{
    int fds[2];
    if (pipe(fds) != 0) {
        perror("test_faults: pipe");
        exit(2);
    }
    const pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) {
        perror("test_faults: fork");
        exit(2);
    }
    if (child == 0) {
        close(fds[1]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        struct helper_cmd cmd;
        while (read(fds[0], &cmd, sizeof(cmd)) == (ssize_t)sizeof(cmd)) {
            test_sleep_s(cmd.delay_s);
            kill(parent, cmd.signal);
            if (cmd.cont_after_s > 0) {
                test_sleep_s(cmd.cont_after_s);
                kill(parent, SIGCONT);
            }
        }
        _exit(0);
    }
    close(fds[0]);
    helper_fd = fds[1];
}

static void helper_send(double delay_s, int sig, double cont_after_s)
{
    struct helper_cmd cmd = {delay_s, sig, cont_after_s};
    if (write(helper_fd, &cmd, sizeof(cmd)) != (ssize_t)sizeof(cmd)) perror("test_faults: helper");
}

/* --------------------------------------------------------------- reports */

static void report_failure(const char *mode, int iteration, hora_status_t st, const char *message, double call_s)
{
    test_report("mode", "%s", mode);
    test_report("iteration", "%d", iteration);
    test_report("status", "%s", hora_status_string(st));
    test_report("message", "%s", message);
    test_report("call_s", "%.3f", call_s);
    test_report("fail_at", "%.6f", test_now_real());
}

/* How long a rank that gave up waits before it exits: in the abort modes
 * the victim is still timing its own hora_abort when its peers have failed
 * (their failure comes within milliseconds through shared memory), and
 * mpirun kills what is left of a job as soon as one rank exits non-zero. A
 * second lets the victim report, even on a loaded machine; a victim whose
 * hora_abort hangs is still killed and fails the test. */
static double linger_s;

/* After a failure the program gives up the way a real one should. */
static int give_up(hora_status_t st, const char *message)
{
    char copy[1024];
    snprintf(copy, sizeof(copy), "test_faults rank %d: %s", rank, message);
    double t0 = test_now_s();
    hora_abort(st, copy);
    test_report("abort_s", "%.3f", test_now_s() - t0);
    test_report("exit", "1");
    if (linger_s > 0) test_sleep_s(linger_s);
    return 1;
}

/* Every rank's (iteration, status) over MPI: 1 when all are the same. */
static int agree(int iteration, hora_status_t st)
{
    int mine[2] = {iteration, (int)st}, *all = calloc((size_t)size * 2, sizeof(int)), same = 1;
    MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        if (all[2 * r] != iteration || all[2 * r + 1] != (int)st) same = 0;
    char line[1024];
    size_t k = 0;
    for (int r = 0; r < size && k < sizeof(line); r++)
        k += (size_t)snprintf(line + k, sizeof(line) - k, "%srank %d: #%d %s", r ? ", " : "", r, all[2 * r],
                              hora_status_string((hora_status_t)all[2 * r + 1]));
    test_report("all", "%s", line);
    test_report("agree", "%d", same);
    free(all);
    return same;
}

static int finish_with_shutdown(void)
{
    double t0 = test_now_s();
    hora_status_t st = hora_shutdown();
    test_report("shutdown_s", "%.3f", test_now_s() - t0);
    test_report("shutdown_status", "%s", hora_status_string(st));
    test_report("exit", "3");
    return 3;
}

/* ----------------------------------------------------------------- modes */

/* The first failed call of a run. */
struct outcome {
    int iteration; /* -1: none failed */
    hora_status_t status;
    char message[1024];
};

static void outcome_set(struct outcome *o, int iteration, hora_status_t st, const char *message, double call_s,
                        const char *mode)
{
    o->iteration = iteration;
    o->status = st;
    snprintf(o->message, sizeof(o->message), "%s", message);
    report_failure(mode, iteration, st, message, call_s);
}

static float *shared_floats(size_t count)
{
    float *p = NULL;
    hora_status_t st = hora_mem_alloc(count * sizeof(float), (void **)&p);
    if (st != HORA_OK) {
        test_report("setup", "hora_mem_alloc: %s", hora_last_error());
        test_report("exit", "2");
        exit(2);
    }
    for (size_t i = 0; i < count; i++) p[i] = 1.0f;
    return p;
}

/* Direct all-reduces until one fails; in iteration FAULT_AT the victim's
 * helper sends it sig 4 ms into the call (and SIGCONT cont_after_s later). */
static double fault_delay_s(void)
{
    const char *d = getenv("TEST_FAULTS_DELAY_S");
    return d ? atof(d) : 0.004;
}

static void run_direct(const char *mode, int sig, double cont_after_s, size_t count, struct outcome *o)
{
    float *buf = shared_floats(count);
    /* Small calls take a microsecond: enough of them to reach the fault. */
    const long iters = count < 1024 ? FAULT_SMALL_ITERS : FAULT_ITERS;
    for (long it = 0; it < iters; it++) {
        if (rank == victim && it == FAULT_AT) helper_send(fault_delay_s(), sig, cont_after_s);
        double t0 = test_now_s();
        hora_status_t st = hora_allreduce(buf, buf, count, HORA_DTYPE_F32, HORA_OP_SUM);
        if (st != HORA_OK) {
            outcome_set(o, (int)it, st, hora_last_error(), test_now_s() - t0, mode);
            return;
        }
    }
    outcome_set(o, -1, HORA_OK, "no call failed", 0, mode);
}

#define FUSED_TENSORS 32
#define FUSED_COUNT ((size_t)128 << 10) /* floats: 512 KiB per tensor */

/* Like run_direct on FUSED_TENSORS async all-reduces per iteration (they
 * fuse: same dtype and op, 16 MiB under HORA_FUSION_THRESHOLD). The first
 * iteration with a failed request is the outcome (its first failure's
 * status and message); `statuses` lists every request's status of it, one
 * letter each (o ok, t timeout, x transport, s shutdown, other: e). */
static void run_fused(const char *mode, int sig, double cont_after_s, struct outcome *o)
{
    float *buf[FUSED_TENSORS];
    for (int t = 0; t < FUSED_TENSORS; t++) buf[t] = shared_floats(FUSED_COUNT);
    for (int it = 0; it < FAULT_ITERS; it++) {
        if (rank == victim && it == FAULT_AT) helper_send(fault_delay_s(), sig, cont_after_s);
        hora_request_t req[FUSED_TENSORS];
        hora_status_t st[FUSED_TENSORS];
        char message[1024] = "", letters[FUSED_TENSORS + 1];
        double t0 = test_now_s();
        for (int t = 0; t < FUSED_TENSORS; t++) {
            char name[32];
            snprintf(name, sizeof(name), "grad.%d", t);
            st[t] = hora_allreduce_async(name, buf[t], buf[t], FUSED_COUNT, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req[t]);
            if (st[t] != HORA_OK && !message[0]) snprintf(message, sizeof(message), "%s", hora_last_error());
        }
        int first = -1;
        for (int t = 0; t < FUSED_TENSORS; t++) {
            if (st[t] == HORA_OK) {
                st[t] = hora_wait(req[t]);
                if (st[t] != HORA_OK && !message[0])
                    snprintf(message, sizeof(message), "%s", hora_request_error(req[t]));
                hora_request_free(req[t]);
            }
            if (st[t] != HORA_OK && first < 0) first = t;
            letters[t] = st[t] == HORA_OK              ? 'o'
                         : st[t] == HORA_ERR_TIMEOUT   ? 't'
                         : st[t] == HORA_ERR_TRANSPORT ? 'x'
                         : st[t] == HORA_ERR_SHUTDOWN  ? 's'
                                                       : 'e';
        }
        letters[FUSED_TENSORS] = 0;
        if (first >= 0) {
            outcome_set(o, it, st[first], message, test_now_s() - t0, mode);
            test_report("statuses", "%s", letters);
            return;
        }
    }
    outcome_set(o, -1, HORA_OK, "no request failed", 0, mode);
}

static int mode_sigstop(const char *mode, size_t count)
{
    const char *t = getenv("HORA_TIMEOUT_S"), *stop = getenv("TEST_FAULTS_STOP_S");
    const double stop_s = stop ? atof(stop) : (t ? atof(t) : 60) + 1.5;
    struct outcome o;
    if (count)
        run_direct(mode, SIGSTOP, stop_s, count, &o);
    else
        run_fused(mode, SIGSTOP, stop_s, &o);
    /* Everyone is back, the victim too: compare over MPI, then shut down. */
    agree(o.iteration, o.status);
    if (o.iteration < 0) {
        test_report("exit", "2");
        return 2;
    }
    return finish_with_shutdown();
}

static int mode_kill(const char *mode, size_t count)
{
    struct outcome o;
    if (count)
        run_direct(mode, SIGKILL, 0, count, &o);
    else
        run_fused(mode, SIGKILL, 0, &o);
    if (o.iteration < 0) {
        test_report("exit", "2");
        return 2;
    }
    return give_up(o.status, o.message);
}

/* The victim, in iteration FAULT_AT once the peers wait in it: hora_abort with a corrupt record. */
static int victim_aborts(const char *mode)
{
    test_sleep_s(0.3);
    test_report("mode", "%s", mode);
    test_report("abort_at", "%.6f", test_now_real());
    double t0 = test_now_s();
    hora_abort(HORA_ERR_CORRUPT, "test_faults: corrupt record 42 (injected)");
    test_report("abort_s", "%.3f", test_now_s() - t0);
    test_report("exit", "1");
    return 1;
}

static int mode_abort(void)
{
    const size_t count = (size_t)1 << 20;
    linger_s = 1.0;
    float *buf = shared_floats(count);
    for (int it = 0; it < FAULT_ITERS; it++) {
        if (rank == victim && it == FAULT_AT)
            return victim_aborts("abort"); /* the peers are blocked in this iteration's all-reduce now */
        double t0 = test_now_s();
        hora_status_t st = hora_allreduce(buf, buf, count, HORA_DTYPE_F32, HORA_OP_SUM);
        if (st != HORA_OK) {
            struct outcome o;
            outcome_set(&o, it, st, hora_last_error(), test_now_s() - t0, "abort");
            return give_up(o.status, o.message);
        }
    }
    report_failure("abort", -1, HORA_OK, "no call failed", 0);
    test_report("exit", "2");
    return 2;
}

#define ASYNC_TENSORS 4

/* The victim, in iteration FAULT_AT: hora_shutdown instead of the call. */
static int victim_shuts_down(const char *mode)
{
    test_sleep_s(0.3); /* the peers are blocked in this iteration's call now */
    test_report("mode", "%s", mode);
    test_report("shutdown_at", "%.6f", test_now_real());
    return finish_with_shutdown();
}

static int mode_shutdown(void)
{
    const size_t count = (size_t)1 << 20;
    float *buf = shared_floats(count);
    for (int it = 0; it < FAULT_ITERS; it++) {
        if (rank == victim && it == FAULT_AT) return victim_shuts_down("shutdown");
        double t0 = test_now_s();
        hora_status_t st = hora_allreduce(buf, buf, count, HORA_DTYPE_F32, HORA_OP_SUM);
        if (st != HORA_OK) {
            struct outcome o;
            outcome_set(&o, it, st, hora_last_error(), test_now_s() - t0, "shutdown");
            return finish_with_shutdown();
        }
    }
    report_failure("shutdown", -1, HORA_OK, "no call failed", 0);
    test_report("exit", "2");
    return 2;
}

/* One all-reduce of count floats in place, submitted and waited for. On a failure the status and the message
 * (the submit's or the request's) are reported for mode at iteration it and the job is shut down: returns
 * finish_with_shutdown()'s exit code then, 0 when the all-reduce succeeded. */
static int async_step(const char *mode, int it, const char *name, float *buf, size_t count)
{
    hora_request_t req;
    double t0 = test_now_s();
    hora_status_t st = hora_allreduce_async(name, buf, buf, count, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req);
    char message[1024];
    snprintf(message, sizeof(message), "%s", hora_last_error());
    if (st == HORA_OK) {
        st = hora_wait(req);
        snprintf(message, sizeof(message), "%s", hora_request_error(req));
        hora_request_free(req);
    }
    if (st == HORA_OK) return 0;
    report_failure(mode, it, st, message, test_now_s() - t0);
    return finish_with_shutdown();
}

static int mode_shutdown_async(void)
{
    const size_t count = 4096;
    float *buf = shared_floats(count);
    for (int it = 0; it < FAULT_ITERS; it++) {
        if (rank == victim && it == FAULT_AT) return victim_shuts_down("shutdown-async");
        char name[64];
        snprintf(name, sizeof(name), "grad.%d", it);
        int code = async_step("shutdown-async", it, name, buf, count);
        if (code != 0) return code;
    }
    report_failure("shutdown-async", -1, HORA_OK, "no request failed", 0);
    test_report("exit", "2");
    return 2;
}

static int mode_abort_async(void)
{
    const size_t count = 4096;
    linger_s = 1.0;
    float *buf[ASYNC_TENSORS];
    for (int t = 0; t < ASYNC_TENSORS; t++) buf[t] = shared_floats(count);
    for (int it = 0; it < FAULT_ITERS; it++) {
        if (rank == victim && it == FAULT_AT)
            return victim_aborts("abort-async"); /* the peers wait for this iteration's requests now */
        hora_request_t req[ASYNC_TENSORS];
        double t0 = test_now_s();
        for (int t = 0; t < ASYNC_TENSORS; t++) {
            char name[64];
            snprintf(name, sizeof(name), "grad.%d.%d", it, t);
            hora_status_t st =
                hora_allreduce_async(name, buf[t], buf[t], count, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req[t]);
            if (st != HORA_OK) {
                report_failure("abort-async", it, st, hora_last_error(), test_now_s() - t0);
                test_report("exit", "2");
                return 2;
            }
        }
        int failed = 0, same = 1;
        hora_status_t first = HORA_OK;
        char message[1024] = "";
        for (int t = 0; t < ASYNC_TENSORS; t++) {
            hora_status_t st = hora_wait(req[t]);
            if (st != HORA_OK) {
                if (!failed) {
                    first = st;
                    snprintf(message, sizeof(message), "%s", hora_request_error(req[t]));
                } else if (st != first || strcmp(message, hora_request_error(req[t])) != 0) {
                    same = 0;
                }
                failed++;
            }
            hora_request_free(req[t]);
        }
        if (failed) {
            report_failure("abort-async", it, first, message, test_now_s() - t0);
            test_report("failed_requests", "%d", failed);
            test_report("same_failure", "%d", same);
            /* A request after the failure must fail too, at once. */
            hora_request_t late;
            double t1 = test_now_s();
            hora_status_t st =
                hora_allreduce_async("late", buf[0], buf[0], count, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &late);
            if (st == HORA_OK) {
                st = hora_wait(late);
                test_report("late_message", "%s", hora_request_error(late));
                hora_request_free(late);
            } else {
                test_report("late_message", "%s", hora_last_error());
            }
            test_report("late_status", "%s", hora_status_string(st));
            test_report("late_s", "%.3f", test_now_s() - t1);
            return give_up(first, message);
        }
    }
    report_failure("abort-async", -1, HORA_OK, "no request failed", 0);
    test_report("exit", "2");
    return 2;
}

static int mode_stall(void)
{
    const size_t count = 4096;
    float *buf = shared_floats(count), *mine = shared_floats(count);
    for (int it = 0; it < FAULT_ITERS; it++) {
        char name[64];
        /* The victim stops submitting the common requests: it waits for one
         * of its own that nobody else ever submits. */
        if (rank == victim && it == FAULT_AT)
            snprintf(name, sizeof(name), "victim.only");
        else
            snprintf(name, sizeof(name), "step.%d", it);
        int code = async_step("stall", it, name, rank == victim && it == FAULT_AT ? mine : buf, count);
        if (code != 0) return code;
    }
    report_failure("stall", -1, HORA_OK, "no request failed", 0);
    test_report("exit", "2");
    return 2;
}

/* hora_init over a /dev/shm too small for it. */
static int mode_shm_small(hora_status_t init_status)
{
    test_report("mode", "shm-small");
    test_report("status", "%s", hora_status_string(init_status));
    test_report("message", "%s", hora_last_error());
    if (init_status == HORA_OK) {
        hora_shutdown();
        test_report("exit", "2");
        return 2;
    }
    test_report("exit", "3");
    return 3;
}

/* A large all-reduce of malloc'd buffers over a small /dev/shm. */
static int mode_shm_stage(void)
{
    const size_t count = (size_t)12 << 20; /* 48 MiB */
    float *buf = malloc(count * sizeof(float));
    if (!buf) return 2;
    for (size_t i = 0; i < count; i++) buf[i] = 1.0f;
    double t0 = test_now_s();
    hora_status_t st = hora_allreduce(buf, buf, count, HORA_DTYPE_F32, HORA_OP_SUM);
    struct outcome o;
    outcome_set(&o, st == HORA_OK ? -1 : 0, st, st == HORA_OK ? "no failure" : hora_last_error(), test_now_s() - t0,
                "shm-stage");
    agree(o.iteration, o.status);
    free(buf);
    if (st == HORA_OK) {
        hora_shutdown();
        test_report("exit", "2");
        return 2;
    }
    return finish_with_shutdown();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    test_report_open("test_faults", "TEST_FAULTS_DIR", "tests/runtime/faults/faults.py");
    const char *s = getenv("OMPI_COMM_WORLD_SIZE"), *r = getenv("OMPI_COMM_WORLD_RANK");
    size = s ? atoi(s) : 1;
    rank = r ? atoi(r) : 0;
    victim = size - 1;
    if (rank == victim && (!strncmp(mode, "sigstop", 7) || !strncmp(mode, "kill", 4))) helper_start();

    hora_status_t st = hora_init();
    if (!strcmp(mode, "shm-small")) return mode_shm_small(st);
    if (st != HORA_OK) {
        test_report("setup", "hora_init: %s: %s", hora_status_string(st), hora_last_error());
        test_report("exit", "2");
        return 2;
    }
    if (!strcmp(mode, "sigstop")) return mode_sigstop(mode, (size_t)16 << 20);
    if (!strcmp(mode, "sigstop-small")) return mode_sigstop(mode, 2);
    if (!strcmp(mode, "kill")) return mode_kill(mode, (size_t)16 << 20);
    if (!strcmp(mode, "kill-small")) return mode_kill(mode, 2);
    if (!strcmp(mode, "sigstop-fused")) return mode_sigstop(mode, 0);
    if (!strcmp(mode, "kill-fused")) return mode_kill(mode, 0);
    if (!strcmp(mode, "abort")) return mode_abort();
    if (!strcmp(mode, "abort-async")) return mode_abort_async();
    if (!strcmp(mode, "shutdown")) return mode_shutdown();
    if (!strcmp(mode, "shutdown-async")) return mode_shutdown_async();
    if (!strcmp(mode, "stall")) return mode_stall();
    if (!strcmp(mode, "shm-stage")) return mode_shm_stage();
    test_report("setup", "unknown mode '%s'", mode);
    test_report("exit", "2");
    hora_shutdown();
    return 2;
}
