/*
 * test_gpu_coll.c - libhora's collectives on device memory, N ranks sharing
 * the GPUs of one host (the lent machine: one H200 for all of them).
 *
 *   mpirun -np N test_gpu_coll [MODE]      exit 0 pass, 1 fail, 77 skip (no GPU)
 *
 * Modes: all (default: direct, errors, async), direct (gpu_direct.c),
 * errors (gpu_errors.c), async (gpu_async.c), direct-mismatch
 * (gpu_errors.c; alone: it fails the direct channel), kill / kill-staged
 * (gpu_kill.c; from run_gpu.py only).
 *
 * The skip decision. Every rank asks CUDA for a device (cudaGetDeviceCount,
 * then cudaSetDevice(local rank % count) and cudaFree(0) for a context)
 * before hora_init, and the ranks compare answers over MPI. No GPU on any
 * rank (no device, or CUDA fails where no NVIDIA driver is loaded) -> every
 * rank exits 77 (Open MPI 4.1's mpirun then exits 77 too: meson counts the
 * test as skipped). Anything else short of a device on every rank -> every
 * rank fails (exit 1; each rank without one says why): some ranks without a
 * GPU, or a GPU CUDA cannot use (a driver loaded but older than this CUDA
 * runtime, a device that refuses a context) - those must not pass as a
 * skip on the GPU machine. A device on every rank -> the test runs, and a
 * runtime without device support (hora_cuda_device() < 0) is a failure,
 * not a skip: this binary exists only in builds with CUDA.
 * TEST_GPU_HIDE_RANK=R hides the GPUs from rank R (CUDA_VISIBLE_DEVICES=""
 * before its first CUDA call): run_gpu.py's check that a job where one rank
 * lacks a GPU fails.
 *
 * The test's own bookkeeping (the probe's vote, the final failure count)
 * uses MPI on a private communicator, so it works whatever state the runtime
 * is in. A watchdog turns a hang into a failure that says what the rank was
 * doing: no progress (gc_phase) for GC_WATCHDOG_S ends the rank with exit 3.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_coll.h"
#include "summary.h"

/* More than the meson tests' HORA_TIMEOUT_S (20 s), so that the runtime's
 * own timeout reports a stuck peer first; well under the minutes the device
 * check gives all of these tests together, so that a hang still says where. */
#define GC_WATCHDOG_S 45u
#define GC_WATCHDOG_KILL_S 60u

static const char *gc_mode = "all";
static char watchdog_head[160];

static void watchdog_fire(int sig)
{
    (void)sig;
    ssize_t ignored = write(2, watchdog_head, strlen(watchdog_head));
    ignored = write(2, gc_phase_text, strnlen(gc_phase_text, sizeof(gc_phase_text)));
    ignored = write(2, "\n", 1);
    (void)ignored;
    _exit(3);
}

static void watchdog_arm(unsigned seconds)
{
    snprintf(watchdog_head, sizeof(watchdog_head),
             "rank %d FAIL: mode %s: no progress for %u s (hang); it was at: ", gc_rank, gc_mode, seconds);
    gc_watchdog_s = seconds;
    signal(SIGALRM, watchdog_fire);
    alarm(seconds);
}

/* What a rank found: no GPU (the only reason to skip), a GPU it cannot use
 * (a failure: a driver older than this CUDA runtime, a device that refuses a
 * context), or its device. */
enum probe_state { PROBE_NO_GPU, PROBE_BROKEN, PROBE_OK };

/* An NVIDIA driver is loaded here: a failing CUDA is then not "no GPU". */
static const char *probe_driver_present(void)
{
    static const char *const marks[] = {"/proc/driver/nvidia/version", "/dev/nvidia0", "/dev/nvidiactl"};
    for (size_t k = 0; k < sizeof(marks) / sizeof(marks[0]); k++)
        if (access(marks[k], F_OK) == 0) return marks[k];
    return NULL;
}

/* This rank's device (made current, with a context), or why it has none. */
static enum probe_state probe_device(int local_rank, char *reason, size_t reason_bytes)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        const char *driver = e == cudaErrorNoDevice ? NULL : probe_driver_present();
        snprintf(reason, reason_bytes, "cudaGetDeviceCount: %s (%s)%s%s%s", cudaGetErrorName(e), cudaGetErrorString(e),
                 driver ? ", although an NVIDIA driver is loaded (" : "", driver ? driver : "",
                 driver ? " exists)" : "");
        return driver ? PROBE_BROKEN : PROBE_NO_GPU;
    }
    if (count <= 0) {
        snprintf(reason, reason_bytes, "cudaGetDeviceCount: no device");
        return PROBE_NO_GPU;
    }
    gc_device = local_rank % count;
    if ((e = cudaSetDevice(gc_device)) != cudaSuccess || (e = cudaFree(0)) != cudaSuccess) {
        snprintf(reason, reason_bytes, "device %d of %d: cannot create a context: %s (%s)", gc_device, count,
                 cudaGetErrorName(e), cudaGetErrorString(e));
        gc_device = -1;
        return PROBE_BROKEN;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, gc_device) == cudaSuccess)
        snprintf(reason, reason_bytes, "device %d of %d: %s", gc_device, count, prop.name);
    else
        snprintf(reason, reason_bytes, "device %d of %d", gc_device, count);
    return PROBE_OK;
}

/* 77: no rank has a GPU; 1: some rank has none or cannot use its GPU while
 * the job is not all GPU-less; 0: every rank has its device (proceed). */
static int probe_vote(enum probe_state state, const char *reason, int kill_mode)
{
    int mine = (int)state, *all = gc_xmalloc(sizeof(int) * (size_t)gc_size), none = 0, ok = 0;
    MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, gc_comm);
    for (int r = 0; r < gc_size; r++) {
        none += all[r] == PROBE_NO_GPU;
        ok += all[r] == PROBE_OK;
    }
    const int verdict = ok == gc_size ? 0 : none == gc_size ? 77 : 1;
    if (verdict == 77) {
        if (gc_rank == 0)
            printf("test_gpu_coll %s: SKIP: no usable GPU on any of the %d ranks (rank 0: %s)\n", gc_mode, gc_size,
                   reason);
        if (kill_mode) test_report("skip", "no usable GPU: %s", reason);
    } else if (verdict == 1) {
        if (state != PROBE_OK)
            fprintf(stderr, "rank %d FAIL: %s: %s\n", gc_rank,
                    state == PROBE_NO_GPU ? "no usable GPU" : "a GPU that cannot be used", reason);
        if (gc_rank == 0)
            fprintf(stderr,
                    "test_gpu_coll %s: FAIL: %d of %d ranks have a usable GPU and the others not (see above): only "
                    "a job without any GPU skips\n",
                    gc_mode, ok, gc_size);
        if (kill_mode) test_report("setup", "only %d of %d ranks have a usable GPU: %s", ok, gc_size, reason);
    } else if (gc_rank == 0) {
        printf("test_gpu_coll %s: %d ranks, rank 0 on %s\n", gc_mode, gc_size, reason);
    }
    fflush(stdout);
    free(all);
    return verdict;
}

/* hora_cuda_device() must be the device this rank made current (hora.h:
 * the device current on the thread that called hora_init), on every rank. */
static int runtime_device_ok(void)
{
    const int dev = hora_cuda_device();
    int ok = dev == gc_device, all_ok = 0;
    if (dev < 0)
        fprintf(stderr,
                "rank %d FAIL: libhora has no device support (hora_cuda_device() = -1) although this rank has GPU %d "
                "and the build has CUDA (HORA_CUDA set to 0? see the runtime's log)\n",
                gc_rank, gc_device);
    else if (!ok)
        fprintf(stderr, "rank %d FAIL: hora_cuda_device() = %d, but the device current at hora_init was %d\n", gc_rank,
                dev, gc_device);
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, gc_comm);
    return all_ok;
}

static int summary(void)
{
    int failed = gc_failures;
    gc_phase("hora_shutdown");
    hora_status_t st = hora_shutdown();
    if (st != HORA_OK) {
        fprintf(stderr, "rank %d FAIL: hora_shutdown: %s: %s\n", gc_rank, hora_status_string(st), hora_last_error());
        failed++;
    }
    char test[96];
    snprintf(test, sizeof(test), "test_gpu_coll %s", gc_mode);
    int status = test_summary_mpi(test, gc_comm, failed, gc_checks);
    alarm(0);
    MPI_Comm_free(&gc_comm);
    MPI_Finalize();
    return status;
}

int main(int argc, char **argv)
{
    static const char *const modes[] = {"all", "direct", "errors", "async", "kill", "kill-staged", "direct-mismatch"};
    int known = 0;
    if (argc > 1) gc_mode = argv[1];
    for (size_t k = 0; k < sizeof(modes) / sizeof(modes[0]); k++) known |= !strcmp(gc_mode, modes[k]);
    if (!known || argc > 2) {
        fprintf(stderr,
                "usage: mpirun -np N test_gpu_coll [all|direct|errors|async|kill|kill-staged|direct-mismatch]\n");
        return 2;
    }
    const int kill_mode = !strncmp(gc_mode, "kill", 4);
    if (kill_mode) test_report_open("test_gpu_coll", "TEST_GPU_DIR", "tests/runtime/device/run_gpu.py");

    /* Before any CUDA call: CUDA reads CUDA_VISIBLE_DEVICES once. */
    const char *hide = getenv("TEST_GPU_HIDE_RANK"), *world_rank = getenv("OMPI_COMM_WORLD_RANK");
    if (hide && world_rank && !strcmp(hide, world_rank)) setenv("CUDA_VISIBLE_DEVICES", "", 1);

    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_dup(MPI_COMM_WORLD, &gc_comm);
    MPI_Comm_rank(gc_comm, &gc_rank);
    MPI_Comm_size(gc_comm, &gc_size);
    MPI_Comm node;
    int local_rank = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);

    char reason[300];
    const enum probe_state state = probe_device(local_rank, reason, sizeof(reason));
    const int verdict = probe_vote(state, reason, kill_mode);
    if (verdict) {
        if (kill_mode) test_report("exit", "%d", verdict);
        MPI_Comm_free(&gc_comm);
        MPI_Finalize();
        return verdict;
    }

    watchdog_arm(kill_mode ? GC_WATCHDOG_KILL_S : GC_WATCHDOG_S);
    gc_phase("hora_init");
    hora_status_t st = hora_init();
    if (st != HORA_OK) {
        /* No MPI_Finalize: a peer may still be inside hora_init. */
        fprintf(stderr, "rank %d FAIL: hora_init: %s: %s\n", gc_rank, hora_status_string(st), hora_last_error());
        if (kill_mode) {
            test_report("setup", "hora_init: %s: %s", hora_status_string(st), hora_last_error());
            test_report("exit", "2");
        }
        return kill_mode ? 2 : 1;
    }
    if (!runtime_device_ok()) {
        if (kill_mode) {
            test_report("setup", "the runtime does not use this rank's GPU (hora_cuda_device() = %d)",
                        hora_cuda_device());
            test_report("exit", "2");
            hora_shutdown();
            return 2;
        }
        gc_failures++;
        return summary();
    }
    if (kill_mode) return gc_kill(!strcmp(gc_mode, "kill-staged")); /* no MPI_Finalize after hora_abort */

    const int all = !strcmp(gc_mode, "all");
    if (all || !strcmp(gc_mode, "direct")) gc_direct();
#ifndef GC_HOST_TWIN /* the twin checks the test's logic; these checks are about device memory itself */
    if (all || !strcmp(gc_mode, "errors")) gc_errors();
#endif
    if (all || !strcmp(gc_mode, "async")) gc_async();
#ifndef GC_HOST_TWIN
    if (!strcmp(gc_mode, "direct-mismatch")) gc_direct_mismatch(); /* last: it fails the direct channel */
#endif
    return summary();
}
