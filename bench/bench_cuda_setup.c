/*
 * bench_cuda_setup.c - hora-bench-allreduce --memory cuda: the device pool's
 * size, each rank's GPU, which ranks share one, and which peer the last
 * columns show (see bench_allreduce.h).
 *
 * The runtime binds itself at hora_init to the device current then and
 * carves hora_mem_alloc_device out of a pool of HORA_CUDA_POOL_BYTES
 * allocated there; so both are settled before hora_init
 * (bench_cuda_prepare), and everything that needs the other ranks after it
 * (bench_cuda_setup).
 *
 * The peer. NCCL (one communicator over all ranks, on the same device
 * buffers) is the reference where it runs; it refuses two ranks on one GPU,
 * and the lent machine has one GPU. Then - and with --baseline copy - the
 * peer is a device-to-device copy of the row's bytes: the speed at which
 * the GPU moves them, the roof of any all-reduce that must move them
 * (bench/README.md works out what fraction of it an all-reduce can reach).
 * Ranks that share a GPU time their copies in turns, so each measures the
 * device alone.
 *
 * Only bench_cuda.h's calls touch CUDA, so this file builds without it.
 *
 * Build: part of hora-bench-allreduce (bench/meson.build).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "bench_allreduce.h"
#include "bench_common.h"
#include "bench_cuda.h"
#include "hora.h"

/* Room in the pool beyond the send and recv buffers: the runtime's own
 * device staging and fusion buffer come from the same pool. */
#define BENCH_CUDA_POOL_SLACK_BYTES ((size_t)64 << 20)
/* Each buffer is rounded up to this, so the pool's block alignment never
 * makes two buffers of max_bytes + guard overflow it. */
#define BENCH_CUDA_POOL_ROUND_BYTES ((size_t)2 << 20)

int bench_cuda_prepare(bench_options_t *options, char *why, size_t why_len)
{
    /* Two buffers of max_bytes + the guard (bench_allreduce.c allocates
     * 256 guard bytes; one rounding step covers them). */
    size_t round = BENCH_CUDA_POOL_ROUND_BYTES;
    size_t buffer_bytes = (options->max_bytes + 4096 + round - 1) / round * round;
    size_t pool_bytes = 2 * buffer_bytes + BENCH_CUDA_POOL_SLACK_BYTES;
    const char *user = getenv("HORA_CUDA_POOL_BYTES");
    if (user != NULL && user[0] != '\0') {
        /* The caller's value stands (setenv would not override it either);
         * the header shows it, and a pool too small fails in
         * hora_mem_alloc_device with a message naming the variable. */
        snprintf(options->cuda_pool_bytes, sizeof(options->cuda_pool_bytes), "%s", user);
        options->cuda_pool_from_user = 1;
    } else {
        bench_size_label(pool_bytes, options->cuda_pool_bytes, sizeof(options->cuda_pool_bytes));
        if (setenv("HORA_CUDA_POOL_BYTES", options->cuda_pool_bytes, 0) != 0) {
            snprintf(why, why_len, "setenv(HORA_CUDA_POOL_BYTES) failed");
            return -1;
        }
    }

    int device = -1;
    if (bench_cuda_select(bench_launcher_local_rank(), &device) != 0) {
        snprintf(why, why_len, "no usable GPU: %s", status_message());
        return -1;
    }
    options->gpu_device = device;
    return 0;
}

/* Which GPU each rank has: ranks on one host with one PCI bus id share it. */
typedef struct {
    char host[MPI_MAX_PROCESSOR_NAME];
    char bus_id[32];
} bench_gpu_place_t;

/* Sets gpu_turn and gpu_turns; writes into shared (len bytes) a sentence
 * naming the first two ranks that share a GPU, "" when none do. */
static int bench_cuda_find_sharing(bench_options_t *options, int rank, int nranks, char *shared, size_t len)
{
    bench_gpu_place_t mine;
    memset(&mine, 0, sizeof(mine));
    int host_len = 0;
    MPI_Get_processor_name(mine.host, &host_len);
    snprintf(mine.bus_id, sizeof(mine.bus_id), "%s", options->gpu_bus_id);
    bench_gpu_place_t *all = calloc((size_t)nranks, sizeof(*all));
    int ok = all != NULL;
    if (!ok) snprintf(shared, len, "out of memory gathering the ranks' GPUs");
    if (!bench_all_ok(ok, shared, len)) {
        free(all);
        return -1;
    }
    MPI_Allgather(&mine, (int)sizeof(mine), MPI_BYTE, all, (int)sizeof(mine), MPI_BYTE, MPI_COMM_WORLD);

    shared[0] = '\0';
    int turns = 1;
    for (int r = 0; r < nranks; r++) {
        int before = 0; /* ranks below r on r's GPU */
        for (int q = 0; q < r; q++) {
            if (strcmp(all[q].host, all[r].host) != 0 || strcmp(all[q].bus_id, all[r].bus_id) != 0) continue;
            if (before == 0 && shared[0] == '\0')
                snprintf(shared, len, "ranks %d and %d share GPU %s on %s", q, r, all[r].bus_id, all[r].host);
            before++;
        }
        if (r == rank) options->gpu_turn = before;
        if (before + 1 > turns) turns = before + 1;
    }
    options->gpu_turns = turns;
    free(all);
    return 0;
}

int bench_cuda_setup(bench_options_t *options, int prepared, char *why, size_t why_len)
{
    int rank = hora_rank(), nranks = hora_size();

    /* Every rank must have its GPU, and the runtime must have taken it. */
    int ok = prepared;
    if (ok && hora_cuda_device() < 0) {
        snprintf(why, why_len,
                 "hora has no device support (hora_cuda_device() = -1: libhora built without CUDA, "
                 "HORA_CUDA=0, or another rank has no GPU; HORA_LOG_LEVEL=debug says which)");
        ok = 0;
    }
    if (ok) {
        /* The runtime's device is the one the buffers will live on. */
        options->gpu_device = hora_cuda_device();
        if (bench_cuda_use(options->gpu_device) != 0 ||
            bench_cuda_bus_id(options->gpu_device, options->gpu_bus_id, sizeof(options->gpu_bus_id)) != 0) {
            snprintf(why, why_len, "%s", status_message());
            ok = 0;
        }
    }
    if (!bench_all_ok(ok, why, why_len)) return -1;

    char shared[BENCH_NOTE_BYTES];
    if (bench_cuda_find_sharing(options, rank, nranks, shared, sizeof(shared)) != 0) {
        snprintf(why, why_len, "%s", shared);
        return -1;
    }

    options->peer = options->baseline;
    options->peer_note[0] = '\0';
    options->peer_detail[0] = '\0';
    if (options->baseline != BENCH_PEER_AUTO && options->baseline != BENCH_PEER_NCCL) return 0;

    const char *asked = options->baseline == BENCH_PEER_NCCL ? "--baseline nccl asked for, but " : "";
    if (shared[0] != '\0') {
        snprintf(options->peer_note, sizeof(options->peer_note),
                 "%sNCCL not used: %s, and NCCL refuses two ranks on one GPU", asked, shared);
        options->peer = BENCH_PEER_COPY;
        return 0;
    }
    char nccl_why[BENCH_WHY_BYTES];
    if (bench_nccl_init(options->nccl_library, options->peer_detail, sizeof(options->peer_detail), nccl_why,
                        sizeof(nccl_why)) != 0) {
        snprintf(options->peer_note, sizeof(options->peer_note), "%sNCCL not used: %s", asked, nccl_why);
        options->peer_detail[0] = '\0';
        options->peer = BENCH_PEER_COPY;
        return 0;
    }
    options->peer = BENCH_PEER_NCCL;
    return 0;
}
