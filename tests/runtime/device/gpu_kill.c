/*
 * gpu_kill.c - modes kill / kill-staged: the last rank is SIGKILLed in the
 * middle of a loop of 64 MiB device all-reduces (hora_mem_alloc_device
 * buffers, reduced where they are; kill-staged: cudaMalloc'd ones, staged
 * through the pool). Every survivor's all-reduce must fail within seconds
 * with HORA_ERR_TRANSPORT naming the dead rank (hora.h: a dead peer), not
 * hang and not wait for HORA_TIMEOUT_S; it then gives up the way a program
 * should (hora_abort, exit 1). run_gpu.py starts it under
 * `mpirun --enable-recovery` (so that mpirun leaves the survivors running),
 * times it and checks every rank's report.
 *
 * Report (TEST_GPU_DIR/rank<R>, "key=value" lines, one write each): pid at
 * start; skip (no GPU anywhere: the reason); mode; the victim: kill_at
 * (CLOCK_REALTIME just before it kills itself); a survivor: iteration (of the
 * failed call), status, message, call_s (how long that call took), fail_at
 * (CLOCK_REALTIME when it returned), abort_s (how long hora_abort took),
 * exit. A rank whose loop ran out without a failure: iteration=-1, exit=2.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu_coll.h"

#define KILL_COUNT ((size_t)16 << 20) /* f32: 64 MiB */
#define KILL_AFTER_S 0.5              /* into the loop */
#define KILL_LOOP_S 30.0              /* a survivor gives up waiting for the failure after this */

/* The victim's own timer: SIGKILL from another thread ends the whole
 * process at once, whatever the main thread is doing (inside an all-reduce:
 * the loop does nothing else). */
static void *kill_timer(void *arg)
{
    (void)arg;
    test_sleep_s(KILL_AFTER_S);
    test_report("kill_at", "%.6f", test_now_real());
    kill(getpid(), SIGKILL);
    return NULL;
}

int gc_kill(int staged)
{
    const int victim = gc_size - 1;
    const size_t bytes = KILL_COUNT * sizeof(float);
    struct gc_dbuf buf;
    test_report("mode", "%s", staged ? "kill-staged" : "kill");
    if (gc_size < 2) {
        test_report("setup", "the kill modes need 2 ranks or more");
        test_report("exit", "2");
        return 2;
    }
    gc_dbuf_alloc(&buf, staged ? GC_BUF_CUDA : GC_BUF_POOL, bytes, 0);
    GC_CUDA(cudaMemset(buf.ptr, 0, bytes)); /* zeros: the sums never change */
    GC_CUDA(cudaDeviceSynchronize());
    /* One call together first: connections and the pool's peers are set up. */
    hora_status_t st = hora_allreduce(buf.ptr, buf.ptr, KILL_COUNT, HORA_DTYPE_F32, HORA_OP_SUM);
    if (st != HORA_OK) {
        test_report("setup", "the first all-reduce failed: %s: %s", hora_status_string(st), hora_last_error());
        test_report("exit", "2");
        return 2;
    }
    MPI_Barrier(gc_comm);
    if (gc_rank == victim) {
        pthread_t t;
        if (pthread_create(&t, NULL, kill_timer, NULL) != 0) {
            test_report("setup", "pthread_create failed");
            test_report("exit", "2");
            return 2;
        }
    }
    const double start = test_now_s();
    for (int it = 0; test_now_s() - start < KILL_LOOP_S; it++) {
        gc_phase("kill: all-reduce %d", it);
        const double t0 = test_now_s();
        st = hora_allreduce(buf.ptr, buf.ptr, KILL_COUNT, HORA_DTYPE_F32, HORA_OP_SUM);
        if (st != HORA_OK) {
            char msg[1024];
            const double call_s = test_now_s() - t0;
            snprintf(msg, sizeof(msg), "%s", hora_last_error());
            test_report("iteration", "%d", it);
            test_report("status", "%s", hora_status_string(st));
            test_report("message", "%s", msg);
            test_report("call_s", "%.3f", call_s);
            test_report("fail_at", "%.6f", test_now_real());
            /* Give up the way a program should: the others must not wait. */
            char reason[1100];
            snprintf(reason, sizeof(reason), "test_gpu_coll rank %d: %s", gc_rank, msg);
            const double a0 = test_now_s();
            hora_abort(st, reason);
            test_report("abort_s", "%.3f", test_now_s() - a0);
            test_report("exit", "1");
            return 1;
        }
    }
    test_report("iteration", "-1");
    test_report("status", "%s", hora_status_string(HORA_OK));
    test_report("message", "no all-reduce failed in %.0f s", KILL_LOOP_S);
    test_report("exit", "2");
    return 2;
}
