/*
 * test_device_support.c - whether the runtime has device (CUDA) support, and
 * what it says when it has none. Runs on every machine: without a GPU (or a
 * build without CUDA) it checks the refusals, with one the device pool.
 *
 *  - HORA_CUDA=0: no device support (hora_cuda_device() == -1), and every
 *    device call (hora_mem_alloc_device, a HORA_MEMORY_CUDA request,
 *    hora_stream_wait) fails with HORA_ERR_UNSUPPORTED naming HORA_CUDA=0;
 *    host collectives still work.
 *  - auto: where hora_cuda_device() < 0 the same refusals ("not supported
 *    here"); where it has a device: hora_mem_alloc_device gives pool memory
 *    (hora_mem_is_shared), freeing twice is an error, a block larger than
 *    HORA_CUDA_POOL_BYTES fails naming it.
 *  - HORA_CUDA=1 on rank 0 only: where some rank has no device, hora_init
 *    fails on EVERY rank (HORA_ERR_UNSUPPORTED, naming HORA_CUDA=1), so no
 *    rank is left waiting in a collective the others never join.
 * Run: mpirun -np N test_device_support   (exit 0 = all passed)
 */
#define _GNU_SOURCE /* strcasestr */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hora.h"

static int wrank, wsize;

static void init_or_die(void)
{
    hora_status_t st = hora_init();
    if (st != HORA_OK) {
        fprintf(stderr, "rank %d FAIL: hora_init: %s\n", wrank, hora_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* A host all-reduce, checked exactly: the runtime still serves host memory. */
static void check_host_allreduce(void)
{
    int32_t v[7], want = 0;
    for (int r = 0; r < wsize; r++) want += r + 1;
    for (int i = 0; i < 7; i++) v[i] = wrank + 1 + i;
    hora_status_t st = hora_allreduce(v, v, 7, HORA_DTYPE_I32, HORA_OP_SUM);
    CHECK(st == HORA_OK, "host allreduce: %s: %s", hora_status_string(st), hora_last_error());
    for (int i = 0; i < 7 && st == HORA_OK; i++)
        CHECK(v[i] == want + wsize * i, "host allreduce [%d] = %d, expected %d", i, v[i], want + wsize * i);
}

/* No device support: every device call is refused, naming why (hint). */
static void check_refusals(const char *hint)
{
    void *p = (void *)0x1;
    hora_status_t st = hora_mem_alloc_device(4096, &p);
    CHECK(st == HORA_ERR_UNSUPPORTED, "hora_mem_alloc_device without device support: %s", hora_status_string(st));
    CHECK(p == (void *)0x1, "hora_mem_alloc_device set *ptr on failure");
    CHECK(strcasestr(hora_last_error(), "device") && strstr(hora_last_error(), hint),
          "hora_mem_alloc_device's message does not say device memory / '%s': %s", hint, hora_last_error());

    float buf[4] = {0};
    hora_opts_t opts = HORA_OPTS_INIT;
    opts.memory = HORA_MEMORY_CUDA;
    hora_request_t req = NULL;
    st = hora_allreduce_async("dev.refused", buf, buf, 4, HORA_DTYPE_F32, HORA_OP_SUM, &opts, &req);
    CHECK(st == HORA_ERR_UNSUPPORTED && req == NULL, "a HORA_MEMORY_CUDA request without device support: %s",
          hora_status_string(st));
    CHECK(strstr(hora_last_error(), hint) != NULL, "the request's refusal does not say '%s': %s", hint,
          hora_last_error());

    /* hora_stream_wait on a host request: refused the same way. */
    hora_opts_t host = HORA_OPTS_INIT;
    st = hora_allreduce_async("host.for.stream", buf, buf, 4, HORA_DTYPE_F32, HORA_OP_SUM, &host, &req);
    CHECK(st == HORA_OK, "host request: %s", hora_last_error());
    if (st == HORA_OK) {
        st = hora_stream_wait(req, NULL);
        CHECK(st == HORA_ERR_UNSUPPORTED, "hora_stream_wait without device support: %s", hora_status_string(st));
        CHECK(hora_wait(req) == HORA_OK, "the host request after hora_stream_wait: %s", hora_last_error());
        hora_request_free(req);
    }
    check_host_allreduce();
}

/* Device support on: the pool hands out blocks and refuses what it cannot. */
static void check_pool(void)
{
    void *p = NULL, *q = NULL;
    hora_status_t st = hora_mem_alloc_device(1 << 20, &p);
    CHECK(st == HORA_OK && p, "hora_mem_alloc_device(1 MiB): %s", hora_last_error());
    if (st != HORA_OK) return;
    CHECK(((uintptr_t)p % HORA_ALIGN_BYTES) == 0, "device block %p not HORA_ALIGN_BYTES aligned", p);
    CHECK(hora_mem_is_shared(p) && hora_mem_is_shared((char *)p + 100), "a device block is not 'shared'");
    st = hora_mem_alloc_device(100, &q);
    CHECK(st == HORA_OK && q && q != p, "a second device block: %s", hora_last_error());
    CHECK(hora_mem_free(p) == HORA_OK, "hora_mem_free(device block): %s", hora_last_error());
    st = hora_mem_free(p);
    CHECK(st == HORA_ERR_INVALID_ARG, "freeing a device block twice gave %s", hora_status_string(st));
    CHECK(hora_mem_free(q) == HORA_OK, "hora_mem_free(second block): %s", hora_last_error());
    st = hora_mem_alloc_device((size_t)1 << 50, &p);
    CHECK(st == HORA_ERR_NO_MEMORY && strstr(hora_last_error(), "HORA_CUDA_POOL_BYTES"),
          "a block larger than the pool: %s: %s", hora_status_string(st), hora_last_error());
    check_host_allreduce();
}

int main(int argc, char **argv)
{
    int provided;
    /* MPI first: hora_init may then run several times in this process. */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);

    /* HORA_CUDA=0: off, whatever the machine has. */
    setenv("HORA_CUDA", "0", 1);
    init_or_die();
    CHECK(hora_cuda_device() == -1, "HORA_CUDA=0 but hora_cuda_device() = %d", hora_cuda_device());
    check_refusals("HORA_CUDA=0");
    CHECK(hora_shutdown() == HORA_OK, "shutdown: %s", hora_last_error());

    /* auto: whatever this machine has. */
    unsetenv("HORA_CUDA");
    init_or_die();
    const int device = hora_cuda_device();
    int devices_here = device >= 0, devices_all = 0;
    MPI_Allreduce(&devices_here, &devices_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(devices_all == 0 || devices_all == wsize, "device support on %d of %d ranks: it must be all or none",
          devices_all, wsize);
    if (device < 0)
        check_refusals("not supported here");
    else
        check_pool();
    CHECK(hora_shutdown() == HORA_OK, "shutdown: %s", hora_last_error());

    /* HORA_CUDA=1 on rank 0 only: one outcome for the whole job. */
    if (wrank == 0) setenv("HORA_CUDA", "1", 1);
    hora_status_t st = hora_init();
    int ok = st == HORA_OK, ok_all = 0, ok_any = 0;
    MPI_Allreduce(&ok, &ok_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&ok, &ok_any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(ok_all == ok_any, "HORA_CUDA=1 on rank 0: hora_init succeeded on some ranks and failed on others");
    if (device < 0) {
        CHECK(st == HORA_ERR_UNSUPPORTED, "HORA_CUDA=1 without devices: hora_init returned %s", hora_status_string(st));
        CHECK(strstr(hora_last_error(), "HORA_CUDA=1") != NULL, "the message does not name HORA_CUDA=1: %s",
              hora_last_error());
        if (wrank == 0) printf("  HORA_CUDA=1 without a device: %s\n", hora_last_error());
    } else {
        CHECK(st == HORA_OK && hora_cuda_device() == device, "HORA_CUDA=1 with devices: %s", hora_last_error());
    }
    if (st == HORA_OK) CHECK(hora_shutdown() == HORA_OK, "shutdown: %s", hora_last_error());
    unsetenv("HORA_CUDA");

    int total = 0, total_checks = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&checks, &total_checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("test_device_support: %d ranks, device support %s, %d checks, %d failures\n", wsize,
               device >= 0 ? "on" : "off", total_checks, total);
    MPI_Finalize();
    return total ? 1 : 0;
}
