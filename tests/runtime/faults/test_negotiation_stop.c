/*
 * test_negotiation_stop.c - a rank stopped outside any data collective
 * (issue 31, item 1). Every rank runs 8-byte async all-reduces
 * (hora_allreduce_async + hora_wait, checked exactly). In iteration
 * STOP_AT + 1 one rank (the victim) stops (SIGSTOP) for HORA_TIMEOUT_S +
 * 1.5 s (a child process sends SIGCONT). Every other rank's all-reduce of
 * that iteration must fail with HORA_ERR_TIMEOUT within HORA_TIMEOUT_S +
 * 1 s, with a message naming the victim; the victim's must fail too (none
 * may hang). Rank 0 prints each rank's time. Modes (argv[1]):
 *   between    (default) the last rank stops between collectives, before it
 *              submits: its coordinator idles, the cycle's agreement misses it;
 *   slow       every iteration has a new tensor name, so every cycle takes the
 *              slow path; the last rank's coordinator stops after the
 *              agreement, just before it hands in its request list;
 *   slow-root  the same on rank 0, just before it sends the responses.
 * The slow modes stop the coordinator where they must through libhora's
 * fault injection, HORA_FAULT_STOP=slow-lists:RANK:N or
 * slow-responses:0:N (set by meson: N = STOP_AT + 2, the slow path of the
 * victim's (STOP_AT + 2)-th name, iteration STOP_AT + 1); the victim checks
 * that it was the one stopped (its message names itself as "this rank").
 *
 * Run: mpirun -np 3 test_negotiation_stop [mode] (HORA_TIMEOUT_S in the
 * environment). Exit 0 pass, 1 fail.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "hora.h"

#define STOP_AT 5
#define ITERS 12

int main(int argc, char **argv)
{
    int fails = 0;
    const char *mode = argc > 1 ? argv[1] : "between";
    const int slow = strcmp(mode, "slow") == 0, slow_root = strcmp(mode, "slow-root") == 0;
    if (!slow && !slow_root && strcmp(mode, "between") != 0) {
        fprintf(stderr, "test_negotiation_stop: unknown mode '%s' (between, slow, slow-root)\n", mode);
        return 1;
    }
    if (hora_init() != HORA_OK) {
        fprintf(stderr, "hora_init: %s\n", hora_last_error());
        return 1;
    }
    const int rank = hora_rank(), size = hora_size(), victim = slow_root ? 0 : size - 1;
    const char *t_env = getenv("HORA_TIMEOUT_S");
    const double timeout_s = t_env ? atof(t_env) : 60.0;
    hora_status_t failed = HORA_OK;
    double fail_s = -1;
    int fail_iter = -1;
    char msg[512] = "";

    for (int it = 0; it < ITERS && failed == HORA_OK; it++) {
        if (rank == victim && it == STOP_AT + 1) {
            pid_t parent = getpid(), child = fork();
            if (child == 0) {
                usleep((useconds_t)((timeout_s + 1.5) * 1e6));
                kill(parent, SIGCONT);
                _exit(0);
            }
            if (!slow && !slow_root) raise(SIGSTOP); /* else the coordinator stops in this slow path */
        }
        int64_t in = rank + it, out = -1;
        hora_request_t req;
        char name[32] = "x";
        if (slow || slow_root) snprintf(name, sizeof(name), "x%d", it);
        const double t0 = test_now_s();
        hora_status_t status = hora_allreduce_async(name, &in, &out, 1, HORA_DTYPE_I64, HORA_OP_SUM, NULL, &req);
        if (status == HORA_OK) {
            status = hora_wait(req);
            if (status < 0) snprintf(msg, sizeof(msg), "%s", hora_request_error(req));
            hora_request_free(req);
        } else {
            snprintf(msg, sizeof(msg), "%s", hora_last_error());
        }
        const int64_t want = (int64_t)size * (size - 1) / 2 + (int64_t)size * it;
        if (status == HORA_OK && out != want) {
            printf("rank %d: FAIL: iteration %d: got %lld, want %lld\n", rank, it, (long long)out, (long long)want);
            fails++;
        }
        if (status < 0) {
            failed = status;
            fail_s = test_now_s() - t0;
            fail_iter = it;
        }
    }
    printf("rank %d: iteration %d: %s after %.2f s: %s\n", rank, fail_iter, hora_status_string(failed), fail_s, msg);
    char victim_name[32];
    snprintf(victim_name, sizeof(victim_name), "rank %d", victim);
    if (rank != victim) {
        if (failed != HORA_ERR_TIMEOUT || fail_iter != STOP_AT + 1) {
            printf("rank %d: FAIL: expected HORA_ERR_TIMEOUT in iteration %d\n", rank, STOP_AT + 1);
            fails++;
        } else if (fail_s > timeout_s + 1.0) {
            printf("rank %d: FAIL: took %.2f s, more than HORA_TIMEOUT_S + 1 s\n", rank, fail_s);
            fails++;
        }
        if (!strstr(msg, victim_name)) {
            printf("rank %d: FAIL: the message does not name %s\n", rank, victim_name);
            fails++;
        }
    } else if (failed == HORA_OK) {
        printf("rank %d: FAIL: the stopped rank's next all-reduce did not fail\n", rank);
        fails++;
    } else if ((slow || slow_root) && !strstr(msg, "(this rank)")) {
        printf("rank %d: FAIL: the coordinator was not the one stopped in the slow path\n", rank);
        fails++;
    }
    int all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    hora_shutdown();
    if (rank == 0)
        printf("negotiation stop (%s): %d ranks, %d failures -> %s\n", mode, size, all, all ? "FAIL" : "PASS");
    return all ? 1 : 0;
}
