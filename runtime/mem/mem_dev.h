/* mem_dev.h - each rank's device (CUDA) memory: which device the runtime
 * uses, and the device pool the ranks of a host share through CUDA IPC.
 *
 * At hora_init (collective over world) every rank that has a GPU takes the
 * device current on the calling thread, allocates one pool there
 * (HORA_CUDA_POOL_BYTES, one cudaMalloc: an IPC handle covers a whole
 * allocation), exports its handle, and opens the handles of its host peers
 * (cudaIpcOpenMemHandle; a process cannot open its own, so its own slot is
 * its pointer). Device support is all or nothing: when a rank has no GPU
 * (or HORA_CUDA=0) no rank has it. hora_mem_alloc_device carves blocks out
 * of the pool (mem_extents); a peer names pool memory by offset, like the
 * host pool. Host memory the device copies to and from (staging for the
 * host transports) is pinned with mem_dev_pin.
 *
 * Without CUDA in the build every function here reports "no device": the
 * same interface, so the layers above need no #ifdef. */
#ifndef HORA_MEM_DEV_H
#define HORA_MEM_DEV_H

#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hora.h"
#include "mem/mem_extents.h"
#include "mem/topo.h"

struct mem_dev {
    int device;    /* CUDA device ordinal; -1: no device support */
    uint8_t *base; /* own pool (device memory) */
    size_t bytes;
    int peer_count;      /* host ranks */
    int self;            /* host rank */
    uint8_t **peer_base; /* [peer_count]: opened IPC handles, NULL where a peer could not be opened */
    size_t *peer_bytes;
    pthread_mutex_t lock;
    struct mem_extents blocks;
    char why_none[256]; /* why device support is off (for messages) */
    /* Completion flags (hora_stream_wait): host-mapped words a stream can
     * wait on. A slot belongs to one request at a time; its value only grows
     * (generation per use), so a stream still waiting for an old use is
     * released by every later one too. */
    _Atomic uint32_t *flags;   /* [flag_count], pinned and mapped */
    uint64_t flags_dev;        /* their device address */
    uint32_t *flag_generation; /* [flag_count] */
    int *flag_free;            /* stack of free slots */
    int flag_count, flag_free_count;
    void *wait_value32; /* the driver's cuStreamWaitValue32, NULL where unavailable */
};

/* Collective over world. mode: 0 auto, 1 off, 2 required (config's HORA_CUDA).
 * local_device (HORA_CUDA_DEVICE=local): the device is the host-local rank
 * modulo the device count, made current on the calling thread; else the
 * one current on it. HORA_OK with d->device >= 0 (support on) or -1 (off: why_none says why);
 * an error on every rank when a rank's pool could not be made, or when mode
 * 2 and some rank has no device. */
hora_status_t mem_dev_init(struct mem_dev *d, const struct topo *topo, boot_comm_t *world, size_t bytes, int mode,
                           int local_device);
/* Local; after the shutdown barrier (peers may be reading this pool). */
void mem_dev_free(struct mem_dev *d);

static inline bool mem_dev_on(const struct mem_dev *d) { return d->device >= 0; }

hora_status_t mem_dev_alloc(struct mem_dev *d, size_t bytes, const char *what, void **ptr);
/* HORA_ERR_INVALID_ARG (no message set) when ptr is not a block of the pool. */
hora_status_t mem_dev_release(struct mem_dev *d, void *ptr);
bool mem_dev_offset(const struct mem_dev *d, const void *ptr, size_t bytes, uint64_t *offset);
void *mem_dev_peer(const struct mem_dev *d, int host_rank, uint64_t offset);

/* Where ptr points: HORA_MEMORY_CUDA for device (or managed) memory that
 * CUDA knows, else HORA_MEMORY_HOST. Without device support: host. */
hora_memory_t mem_dev_kind_of(const struct mem_dev *d, const void *ptr);

/* Page-lock host memory for fast device copies (cudaHostRegister); unpin
 * with the same pointer. */
hora_status_t mem_dev_pin(const struct mem_dev *d, void *ptr, size_t bytes);
void mem_dev_unpin(const struct mem_dev *d, void *ptr);

/* Completion flags. take: a free slot and the value its completion will
 * store (-1: none free; the caller waits on the host instead). signal:
 * completion. give: the request is freed (after it completed). stream_wait:
 * queue "wait until slot >= value" on stream; HORA_ERR_UNSUPPORTED where
 * the device or driver cannot. */
int mem_dev_flag_take(struct mem_dev *d, uint32_t *value);
void mem_dev_flag_signal(struct mem_dev *d, int slot, uint32_t value);
void mem_dev_flag_give(struct mem_dev *d, int slot);
hora_status_t mem_dev_flag_stream_wait(struct mem_dev *d, void *stream, int slot, uint32_t value);

/* Events: record one on stream (a new cudaEvent_t, timing off), destroy. */
hora_status_t mem_dev_event_record(const struct mem_dev *d, void *stream, void **event);
void mem_dev_event_destroy(void *event);

/* Plain device buffers outside the pool (an allgather's result). */
hora_status_t mem_dev_malloc(const struct mem_dev *d, size_t bytes, const char *what, void **ptr);
void mem_dev_free_buffer(void *ptr);

/* Make the calling thread use the runtime's device (every thread that calls
 * CUDA for the runtime: the coordinator, the application's threads). */
hora_status_t mem_dev_use(const struct mem_dev *d);

/* A CUDA call failed: HORA_ERR_INTERNAL (HORA_ERR_NO_MEMORY for
 * cudaErrorMemoryAllocation) with "what: cudaErrorName: description". err is
 * a cudaError_t. */
hora_status_t mem_dev_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
