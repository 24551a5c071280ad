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

static int kill_report_fd = -1;

static double kill_now_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void gc_report(const char *key, const char *fmt, ...)
{
    char line[2048];
    int n = snprintf(line, sizeof(line), "%s=", key);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(line) - 2) n = (int)sizeof(line) - 2;
    for (int i = 0; i < n; i++)
        if (line[i] == '\n') line[i] = ' ';
    line[n++] = '\n';
    if (kill_report_fd >= 0 && write(kill_report_fd, line, (size_t)n) != n) perror("test_gpu_coll: report");
}

/* Before MPI starts: the report file of this rank (mpirun's environment
 * names the rank). Exits 2 when not run by run_gpu.py. */
void gc_report_open(void)
{
    const char *dir = getenv("TEST_GPU_DIR"), *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!dir || !r) {
        fprintf(stderr, "test_gpu_coll: the kill modes run from tests/runtime/device/run_gpu.py (TEST_GPU_DIR, mpirun)\n");
        exit(2);
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/rank%s", dir, r);
    kill_report_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (kill_report_fd < 0) {
        fprintf(stderr, "test_gpu_coll: cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
    gc_report("pid", "%d", (int)getpid());
}

/* The victim's own timer: SIGKILL from another thread ends the whole
 * process at once, whatever the main thread is doing (inside an all-reduce:
 * the loop does nothing else). */
static void *kill_timer(void *arg)
{
    (void)arg;
    gc_sleep(KILL_AFTER_S);
    gc_report("kill_at", "%.6f", kill_now_real());
    kill(getpid(), SIGKILL);
    return NULL;
}

int gc_kill(int staged)
{
    const int victim = gc_size - 1;
    const size_t bytes = KILL_COUNT * sizeof(float);
    struct gc_dbuf buf;
    gc_report("mode", "%s", staged ? "kill-staged" : "kill");
    if (gc_size < 2) {
        gc_report("setup", "the kill modes need 2 ranks or more");
        gc_report("exit", "2");
        return 2;
    }
    gc_dbuf_alloc(&buf, staged ? GC_BUF_CUDA : GC_BUF_POOL, bytes, 0);
    GC_CUDA(cudaMemset(buf.ptr, 0, bytes)); /* zeros: the sums never change */
    GC_CUDA(cudaDeviceSynchronize());
    /* One call together first: connections and the pool's peers are set up. */
    hora_status_t st = hora_allreduce(buf.ptr, buf.ptr, KILL_COUNT, HORA_DTYPE_F32, HORA_OP_SUM);
    if (st != HORA_OK) {
        gc_report("setup", "the first all-reduce failed: %s: %s", hora_status_string(st), hora_last_error());
        gc_report("exit", "2");
        return 2;
    }
    MPI_Barrier(gc_comm);
    if (gc_rank == victim) {
        pthread_t t;
        if (pthread_create(&t, NULL, kill_timer, NULL) != 0) {
            gc_report("setup", "pthread_create failed");
            gc_report("exit", "2");
            return 2;
        }
    }
    const double start = gc_now();
    for (int it = 0; gc_now() - start < KILL_LOOP_S; it++) {
        gc_phase("kill: all-reduce %d", it);
        const double t0 = gc_now();
        st = hora_allreduce(buf.ptr, buf.ptr, KILL_COUNT, HORA_DTYPE_F32, HORA_OP_SUM);
        if (st != HORA_OK) {
            char msg[1024];
            const double call_s = gc_now() - t0;
            snprintf(msg, sizeof(msg), "%s", hora_last_error());
            gc_report("iteration", "%d", it);
            gc_report("status", "%s", hora_status_string(st));
            gc_report("message", "%s", msg);
            gc_report("call_s", "%.3f", call_s);
            gc_report("fail_at", "%.6f", kill_now_real());
            /* Give up the way a program should: the others must not wait. */
            char reason[1100];
            snprintf(reason, sizeof(reason), "test_gpu_coll rank %d: %s", gc_rank, msg);
            const double a0 = gc_now();
            hora_abort(st, reason);
            gc_report("abort_s", "%.3f", gc_now() - a0);
            gc_report("exit", "1");
            return 1;
        }
    }
    gc_report("iteration", "-1");
    gc_report("status", "%s", hora_status_string(HORA_OK));
    gc_report("message", "no all-reduce failed in %.0f s", KILL_LOOP_S);
    gc_report("exit", "2");
    return 2;
}
