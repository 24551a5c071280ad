/* mem_dev.c - the device and its pool (mem_dev.h). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/status.h"
#include "mem/mem_dev.h"
#include "mem/mem_pool.h"

#ifdef HORA_HAVE_CUDA
#include <cuda.h> /* types and constants of the driver API only: never linked (-lcuda) */
#include <cuda_runtime_api.h>
#endif

#define MEM_DEV_FLAGS 4096

/* Blocks start at multiples of 256 bytes: what cudaMalloc guarantees and the
 * kernels' vector loads like; HORA_ALIGN_BYTES divides it. */
#define MEM_DEV_ALIGN ((size_t)256)

static size_t mem_dev_round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

hora_status_t mem_dev_fail(int err, const char *fmt, ...)
{
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
#ifdef HORA_HAVE_CUDA
    const cudaError_t e = (cudaError_t)err;
    return status_fail(e == cudaErrorMemoryAllocation ? HORA_ERR_NO_MEMORY : HORA_ERR_INTERNAL, "%s: %s: %s", what,
                       cudaGetErrorName(e), cudaGetErrorString(e));
#else
    return status_fail(HORA_ERR_INTERNAL, "%s: CUDA error %d", what, err);
#endif
}

#ifdef HORA_HAVE_CUDA

/* Does this process have a device to use? The calling thread's current one,
 * or with local_device >= 0 that index modulo the device count, made current. */
static int mem_dev_probe(int mode, int local_device, int *device, char *why, size_t why_bytes)
{
    int n = 0;
    if (mode == 1) {
        snprintf(why, why_bytes, "HORA_CUDA=0");
        return 0;
    }
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(why, why_bytes, "no usable CUDA device (cudaGetDeviceCount: %s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        cudaGetLastError();
        return 0;
    }
    if (local_device >= 0 && (e = cudaSetDevice(local_device % n)) != cudaSuccess) {
        snprintf(why, why_bytes, "cudaSetDevice(%d) failed (HORA_CUDA_DEVICE=local): %s", local_device % n,
                 cudaGetErrorString(e));
        cudaGetLastError();
        return 0;
    }
    if ((e = cudaGetDevice(device)) == cudaSuccess) e = cudaFree(NULL); /* creates the context */
    if (e != cudaSuccess) {
        snprintf(why, why_bytes, "the CUDA device cannot be used (%s)", cudaGetErrorString(e));
        cudaGetLastError();
        return 0;
    }
    return 1;
}

/* What each rank tells its host peers about its pool. */
struct mem_dev_card {
    cudaIpcMemHandle_t handle;
    uint64_t bytes;
    int32_t device;
    int32_t ok;
};

static hora_status_t mem_dev_open_peers(struct mem_dev *d, const struct topo *topo)
{
    struct mem_dev_card mine = {0}, *all = calloc((size_t)topo->host_size, sizeof(*all));
    if (!all) return status_fail(HORA_ERR_NO_MEMORY, "out of memory opening the peers' device pools");
    cudaError_t e = cudaIpcGetMemHandle(&mine.handle, d->base);
    mine.ok = e == cudaSuccess;
    mine.bytes = d->bytes;
    mine.device = d->device;
    if (!mine.ok) {
        log_info("cudaIpcGetMemHandle of the device pool failed (%s): host peers reach it through host memory",
                 cudaGetErrorString(e));
        cudaGetLastError();
    }
    hora_status_t gathered = boot_comm_allgather(topo->host_comm, &mine, sizeof(mine), all, "device pool handles");
    if (gathered != HORA_OK) {
        free(all);
        return gathered;
    }
    for (int p = 0; p < d->peer_count; p++) {
        if (p == d->self || !all[p].ok) continue;
        void *ptr = NULL;
        e = cudaIpcOpenMemHandle(&ptr, all[p].handle, cudaIpcMemLazyEnablePeerAccess);
        if (e != cudaSuccess) {
            log_info("cannot open host rank %d's device pool (device %d from device %d: %s): device data to it "
                     "goes through host memory",
                     p, all[p].device, d->device, cudaGetErrorString(e));
            cudaGetLastError();
            continue;
        }
        d->peer_base[p] = ptr;
        d->peer_bytes[p] = all[p].bytes;
    }
    free(all);
    return HORA_OK;
}

static void mem_dev_close_peers(struct mem_dev *d)
{
    for (int p = 0; p < d->peer_count; p++)
        if (p != d->self && d->peer_base[p]) cudaIpcCloseMemHandle(d->peer_base[p]);
}

/* The completion flags and the driver's stream wait. Without them
 * hora_stream_wait waits on the host: not an error. */
static void mem_dev_flags_init(struct mem_dev *d)
{
    void *host = NULL, *dev = NULL, *fn = NULL;
    enum cudaDriverEntryPointQueryResult found;
    d->flag_generation = calloc(MEM_DEV_FLAGS, sizeof(*d->flag_generation));
    d->flag_free = malloc(MEM_DEV_FLAGS * sizeof(*d->flag_free));
    if (!d->flag_generation || !d->flag_free ||
        cudaHostAlloc(&host, MEM_DEV_FLAGS * sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable) !=
            cudaSuccess ||
        cudaHostGetDevicePointer(&dev, host, 0) != cudaSuccess) {
        cudaGetLastError();
        if (host) cudaFreeHost(host);
        free(d->flag_generation);
        free(d->flag_free);
        d->flag_generation = NULL;
        d->flag_free = NULL;
        return;
    }
    memset(host, 0, MEM_DEV_FLAGS * sizeof(uint32_t));
    d->flags = host;
    d->flags_dev = (uint64_t)(uintptr_t)dev;
    d->flag_count = MEM_DEV_FLAGS;
    for (int i = 0; i < MEM_DEV_FLAGS; i++) d->flag_free[i] = MEM_DEV_FLAGS - 1 - i;
    d->flag_free_count = MEM_DEV_FLAGS;
    /* Supported by default since CUDA 12 on every device hora builds for; a
     * device that refuses makes mem_dev_flag_stream_wait fail, and the
     * caller waits on the host. */
    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
        d->wait_value32 = fn;
    cudaGetLastError();
}

static void mem_dev_flags_free(struct mem_dev *d)
{
    if (d->flags) cudaFreeHost((void *)d->flags);
    free(d->flag_generation);
    free(d->flag_free);
}

hora_status_t mem_dev_init(struct mem_dev *d, const struct topo *topo, boot_comm_t *world, size_t bytes, int mode,
                           int local_device)
{
    hora_status_t status = HORA_OK;
    int device = -1, have, all = 0;
    memset(d, 0, sizeof(*d));
    d->device = -1;
    have = mem_dev_probe(mode, local_device ? topo->host_rank : -1, &device, d->why_none, sizeof(d->why_none));
    /* Agreed: all ranks have a device, and some rank requires one. */
    int required = mode == 2, required_by = required ? topo->rank : topo->size;
    int agree[2] = {have, -required}, agreed[2] = {0, 0};
    HORA_CHECK(boot_comm_allreduce_int(world, agree, agreed, 2, BOOT_OP_MIN, "device support"));
    all = agreed[0];
    if (!all) {
        /* The first rank without a device, and the first that requires one,
         * for everybody's message. */
        int mine[2] = {have ? topo->size : topo->rank, required_by}, first[2] = {0, 0};
        HORA_CHECK(boot_comm_allreduce_int(world, mine, first, 2, BOOT_OP_MIN, "device support"));
        if (have) snprintf(d->why_none, sizeof(d->why_none), "rank %d has no usable CUDA device", first[0]);
        if (required) return status_fail(HORA_ERR_UNSUPPORTED, "HORA_CUDA=1 but %s", d->why_none);
        if (agreed[1] < 0) /* another rank requires it: everyone fails */
            return status_fail(HORA_ERR_UNSUPPORTED, "rank %d requires device support (HORA_CUDA=1) but %s%s", first[1],
                               have ? "" : "this rank has none: ", d->why_none);
        log_debug("device memory support off: %s", d->why_none);
        return HORA_OK;
    }

    d->bytes = mem_dev_round_up(bytes, 2u << 20);
    d->peer_count = topo->host_size;
    d->self = topo->host_rank;
    d->peer_base = calloc((size_t)d->peer_count, sizeof(*d->peer_base));
    d->peer_bytes = calloc((size_t)d->peer_count, sizeof(*d->peer_bytes));
    int ok = d->peer_base && d->peer_bytes;
    char reason[384] = "out of host memory";
    if (ok) {
        cudaError_t e = cudaMalloc((void **)&d->base, d->bytes);
        if (e != cudaSuccess) {
            char b[32];
            snprintf(reason, sizeof(reason),
                     "cudaMalloc(%s) of the device pool failed on device %d: %s (lower HORA_CUDA_POOL_BYTES)",
                     mem_format_bytes(d->bytes, b, sizeof(b)), device, cudaGetErrorString(e));
            cudaGetLastError();
            d->base = NULL;
            ok = 0;
        }
    }
    if (ok) ok = mem_extents_init(&d->blocks, 0, d->bytes) == HORA_OK;
    /* Every rank fails when one does: the pools are used together. */
    int mine = ok ? topo->size : topo->rank, first = 0;
    status = boot_comm_allreduce_int(world, &mine, &first, 1, BOOT_OP_MIN, "device pools");
    if (status != HORA_OK) goto err_free;
    if (first < topo->size) {
        status = ok ? status_fail(HORA_ERR_NO_MEMORY, "rank %d could not create its device pool", first)
                    : status_fail(HORA_ERR_NO_MEMORY, "%s", reason);
        goto err_free;
    }
    d->device = device;
    d->peer_base[d->self] = d->base;
    d->peer_bytes[d->self] = d->bytes;
    pthread_mutex_init(&d->lock, NULL);
    status = mem_dev_open_peers(d, topo);
    if (status < 0) {
        mem_dev_close_peers(d);
        pthread_mutex_destroy(&d->lock);
        d->device = -1;
        goto err_free;
    }
    mem_dev_flags_init(d);
    char b[32];
    log_info("device memory: CUDA device %d, pool %s, stream waits %s", device,
             mem_format_bytes(d->bytes, b, sizeof(b)), d->wait_value32 ? "on the device" : "on the host");
    return HORA_OK;

err_free:
    if (d->base) cudaFree(d->base);
    mem_extents_free(&d->blocks);
    free(d->peer_base);
    free(d->peer_bytes);
    memset(d, 0, sizeof(*d));
    d->device = -1;
    snprintf(d->why_none, sizeof(d->why_none), "device support failed at init");
    return status;
}

void mem_dev_free(struct mem_dev *d)
{
    if (d->device < 0) return;
    if (d->blocks.used_count)
        log_debug("%zu blocks from hora_mem_alloc_device were not freed before shutdown", d->blocks.used_count);
    mem_dev_close_peers(d);
    cudaFree(d->base);
    mem_dev_flags_free(d);
    pthread_mutex_destroy(&d->lock);
    mem_extents_free(&d->blocks);
    free(d->peer_base);
    free(d->peer_bytes);
    memset(d, 0, sizeof(*d));
    d->device = -1;
    snprintf(d->why_none, sizeof(d->why_none), "the runtime is shut down");
}

hora_memory_t mem_dev_kind_of(const struct mem_dev *d, const void *ptr)
{
    uint64_t off;
    struct cudaPointerAttributes a;
    if (d->device < 0 || !ptr) return HORA_MEMORY_HOST;
    if (mem_dev_offset(d, ptr, 1, &off)) return HORA_MEMORY_CUDA;
    if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
        cudaGetLastError();
        return HORA_MEMORY_HOST;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ? HORA_MEMORY_CUDA : HORA_MEMORY_HOST;
}

hora_status_t mem_dev_pin(const struct mem_dev *d, void *ptr, size_t bytes)
{
    if (d->device < 0) return HORA_OK;
    cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterDefault);
    if (e != cudaSuccess) return mem_dev_fail(e, "cudaHostRegister(%zu bytes of staging)", bytes);
    return HORA_OK;
}

void mem_dev_unpin(const struct mem_dev *d, void *ptr)
{
    if (d->device >= 0 && cudaHostUnregister(ptr) != cudaSuccess) cudaGetLastError();
}

hora_status_t mem_dev_use(const struct mem_dev *d)
{
    static _Thread_local int current = -1;
    if (d->device < 0)
        return status_fail(HORA_ERR_UNSUPPORTED, "device (CUDA) memory is not supported here: %s", d->why_none);
    if (current == d->device) return HORA_OK;
    cudaError_t e = cudaSetDevice(d->device);
    if (e != cudaSuccess) return mem_dev_fail(e, "cudaSetDevice(%d)", d->device);
    current = d->device;
    return HORA_OK;
}

int mem_dev_flag_take(struct mem_dev *d, uint32_t *value)
{
    int slot = -1;
    if (d->device < 0 || !d->flags) return -1;
    pthread_mutex_lock(&d->lock);
    if (d->flag_free_count > 0) {
        slot = d->flag_free[--d->flag_free_count];
        *value = ++d->flag_generation[slot];
    }
    pthread_mutex_unlock(&d->lock);
    return slot;
}

void mem_dev_flag_signal(struct mem_dev *d, int slot, uint32_t value)
{
    if (slot >= 0 && slot < d->flag_count) atomic_store_explicit(&d->flags[slot], value, memory_order_release);
}

void mem_dev_flag_give(struct mem_dev *d, int slot)
{
    if (slot < 0 || slot >= d->flag_count) return;
    pthread_mutex_lock(&d->lock);
    d->flag_free[d->flag_free_count++] = slot;
    pthread_mutex_unlock(&d->lock);
}

hora_status_t mem_dev_flag_stream_wait(struct mem_dev *d, void *stream, int slot, uint32_t value)
{
    typedef CUresult (*wait_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
    if (!d->wait_value32 || slot < 0 || slot >= d->flag_count)
        return status_set(HORA_ERR_UNSUPPORTED, "stream waits on the device are not available");
    CUresult r = ((wait_fn)d->wait_value32)((CUstream)stream, (CUdeviceptr)(d->flags_dev + 4u * (uint64_t)slot), value,
                                            CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS) return status_set(HORA_ERR_UNSUPPORTED, "cuStreamWaitValue32 failed (CUresult %d)", (int)r);
    return HORA_OK;
}

hora_status_t mem_dev_event_record(const struct mem_dev *d, void *stream, void **event)
{
    cudaEvent_t e;
    HORA_CHECK(mem_dev_use(d));
    cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    if (err != cudaSuccess) return mem_dev_fail(err, "cudaEventCreateWithFlags");
    if ((err = cudaEventRecord(e, (cudaStream_t)stream)) != cudaSuccess) {
        cudaEventDestroy(e);
        return mem_dev_fail(err, "cudaEventRecord(the request's stream)");
    }
    *event = e;
    return HORA_OK;
}

void mem_dev_event_destroy(void *event)
{
    if (event) cudaEventDestroy((cudaEvent_t)event);
}

hora_status_t mem_dev_malloc(const struct mem_dev *d, size_t bytes, const char *what, void **ptr)
{
    HORA_CHECK(mem_dev_use(d));
    cudaError_t e = cudaMalloc(ptr, bytes ? bytes : 1);
    if (e != cudaSuccess) return mem_dev_fail(e, "cudaMalloc(%zu) for %s", bytes, what);
    return HORA_OK;
}

void mem_dev_free_buffer(void *ptr)
{
    if (ptr) cudaFree(ptr);
}

#else /* no CUDA in this build */

int mem_dev_flag_take(struct mem_dev *d, uint32_t *value)
{
    (void)d, (void)value;
    return -1;
}

void mem_dev_flag_signal(struct mem_dev *d, int slot, uint32_t value) { (void)d, (void)slot, (void)value; }
void mem_dev_flag_give(struct mem_dev *d, int slot) { (void)d, (void)slot; }

hora_status_t mem_dev_flag_stream_wait(struct mem_dev *d, void *stream, int slot, uint32_t value)
{
    (void)d, (void)stream, (void)slot, (void)value;
    return status_set(HORA_ERR_UNSUPPORTED, "stream waits on the device are not available");
}

hora_status_t mem_dev_event_record(const struct mem_dev *d, void *stream, void **event)
{
    (void)stream, (void)event;
    return mem_dev_use(d);
}

void mem_dev_event_destroy(void *event) { (void)event; }

hora_status_t mem_dev_malloc(const struct mem_dev *d, size_t bytes, const char *what, void **ptr)
{
    (void)bytes, (void)what, (void)ptr;
    return mem_dev_use(d);
}

void mem_dev_free_buffer(void *ptr) { (void)ptr; }

hora_status_t mem_dev_init(struct mem_dev *d, const struct topo *topo, boot_comm_t *world, size_t bytes, int mode,
                           int local_device)
{
    (void)bytes, (void)local_device;
    memset(d, 0, sizeof(*d));
    d->device = -1;
    snprintf(d->why_none, sizeof(d->why_none), "%s",
             mode == 1 ? "HORA_CUDA=0" : "this build of hora has no CUDA (meson -Dcuda=enabled needs nvcc)");
    /* Every rank fails when one requires device support. */
    int required = mode == 2, required_by = required ? topo->rank : topo->size, first = 0;
    HORA_CHECK(boot_comm_allreduce_int(world, &required_by, &first, 1, BOOT_OP_MIN, "device support"));
    if (required) return status_fail(HORA_ERR_UNSUPPORTED, "HORA_CUDA=1 but %s", d->why_none);
    if (first < topo->size)
        return status_fail(HORA_ERR_UNSUPPORTED, "rank %d requires device support (HORA_CUDA=1) but %s", first,
                           d->why_none);
    return HORA_OK;
}

void mem_dev_free(struct mem_dev *d) { (void)d; }

hora_memory_t mem_dev_kind_of(const struct mem_dev *d, const void *ptr)
{
    (void)d, (void)ptr;
    return HORA_MEMORY_HOST;
}

hora_status_t mem_dev_pin(const struct mem_dev *d, void *ptr, size_t bytes)
{
    (void)d, (void)ptr, (void)bytes;
    return HORA_OK;
}

void mem_dev_unpin(const struct mem_dev *d, void *ptr) { (void)d, (void)ptr; }

hora_status_t mem_dev_use(const struct mem_dev *d)
{
    return status_fail(HORA_ERR_UNSUPPORTED, "device (CUDA) memory is not supported here: %s", d->why_none);
}

#endif

hora_status_t mem_dev_alloc(struct mem_dev *d, size_t bytes, const char *what, void **ptr)
{
    size_t want, offset;
    char b[32], p[32];
    if (d->device < 0)
        return status_fail(HORA_ERR_UNSUPPORTED, "%s: device (CUDA) memory is not supported here: %s", what,
                           d->why_none);
    want = mem_dev_round_up(bytes ? bytes : 1, MEM_DEV_ALIGN);
    pthread_mutex_lock(&d->lock);
    hora_status_t status = HORA_OK;
    if (!mem_extents_find(&d->blocks, want, &offset))
        status = status_fail(HORA_ERR_NO_MEMORY,
                             "%s: no room for %s left in the device pool (raise HORA_CUDA_POOL_BYTES=%s)", what,
                             mem_format_bytes(bytes, b, sizeof(b)), mem_format_bytes(d->bytes, p, sizeof(p)));
    else if ((status = mem_extents_take(&d->blocks, offset, want)) == HORA_OK)
        *ptr = d->base + offset;
    pthread_mutex_unlock(&d->lock);
    return status;
}

hora_status_t mem_dev_release(struct mem_dev *d, void *ptr)
{
    size_t bytes;
    uint8_t *p = ptr;
    if (d->device < 0 || p < d->base || p >= d->base + d->bytes) return HORA_ERR_INVALID_ARG;
    pthread_mutex_lock(&d->lock);
    hora_status_t status = mem_extents_give(&d->blocks, (size_t)(p - d->base), &bytes);
    pthread_mutex_unlock(&d->lock);
    return status;
}

bool mem_dev_offset(const struct mem_dev *d, const void *ptr, size_t bytes, uint64_t *offset)
{
    const uint8_t *p = ptr;
    if (d->device < 0 || !d->base || p < d->base || p >= d->base + d->bytes) return false;
    if ((size_t)(d->base + d->bytes - p) < bytes) return false;
    *offset = (uint64_t)(p - d->base);
    return true;
}

void *mem_dev_peer(const struct mem_dev *d, int host_rank, uint64_t offset)
{
    if (d->device < 0 || host_rank < 0 || host_rank >= d->peer_count || !d->peer_base[host_rank]) return NULL;
    return d->peer_base[host_rank] + offset;
}
