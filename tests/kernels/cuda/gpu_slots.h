/*
 * gpu_slots.h - the device buffers of a GPU kernel test (test_gpu_kernels,
 * test_gpu_step): SLOT_COUNT slots of SLOT_BYTES on the device, each holding
 * GUARD guard bytes, the data at an offset, and GUARD guard bytes again; a
 * host buffer a slot is read back into; the test's non-blocking stream,
 * which every other case uses instead of the legacy default one.
 *
 * Header-only, for one .c file: it defines SLOT_BYTES and SLOT_COUNT first,
 * and gets slots, host_back, stream, cases and the functions below as its
 * own statics. Guard bytes are TWIN_GUARD_BYTE (twin_data.h).
 */
#ifndef HORA_TEST_GPU_SLOTS_H
#define HORA_TEST_GPU_SLOTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda_ok.h"
#include "twin_data.h"

#if !defined(SLOT_BYTES) || !defined(SLOT_COUNT)
#error "define SLOT_BYTES and SLOT_COUNT before including gpu_slots.h"
#endif

#define GUARD 64

static unsigned char *slots[SLOT_COUNT]; /* device */
static unsigned char *host_back;         /* a slot's worth read back */
static cudaStream_t stream;
static long cases; /* cases run so far (sync_case counts them) */

static inline void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "FAIL: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

/* The device (exit 77 without one: gpu_test_open), the stream, the slots. */
static inline void slots_open(const char *test)
{
    gpu_test_open(test);
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int s = 0; s < SLOT_COUNT; s++) CUDA_OK(cudaMalloc((void **)&slots[s], SLOT_BYTES));
    host_back = xmalloc(SLOT_BYTES);
}

static inline void slots_close(void)
{
    for (int s = 0; s < SLOT_COUNT; s++) cudaFree(slots[s]);
    cudaStreamDestroy(stream);
    free(host_back);
}

/* Slot s: guards, then data (or, data NULL, bytes of poison) at GUARD +
 * offset; returns the device address of the data. Synchronises the device:
 * cudaMemset (and the tail of a pageable cudaMemcpy) may still run on the
 * legacy stream when a kernel starts on the non-blocking one. */
static inline unsigned char *slot_fill(int s, size_t offset, size_t bytes, const void *data, int poison)
{
    unsigned char *p = slots[s] + GUARD + offset;
    if (bytes + offset + 2 * GUARD > SLOT_BYTES) {
        fprintf(stderr, "FAIL: a buffer of %zu bytes does not fit a slot\n", bytes);
        exit(1);
    }
    CUDA_OK(cudaMemset(slots[s], TWIN_GUARD_BYTE, 2 * GUARD + offset + bytes));
    if (data && bytes)
        CUDA_OK(cudaMemcpy(p, data, bytes, cudaMemcpyHostToDevice));
    else if (bytes)
        CUDA_OK(cudaMemset(p, poison, bytes));
    CUDA_OK(cudaDeviceSynchronize());
    return p;
}

/* Reads slot s back; returns its data (in host_back, valid until the next
 * read) and sets *guards_ok to whether every guard byte held. */
static inline const unsigned char *slot_read(int s, size_t offset, size_t bytes, int *guards_ok)
{
    const size_t all = 2 * GUARD + offset + bytes;
    CUDA_OK(cudaMemcpy(host_back, slots[s], all, cudaMemcpyDeviceToHost));
    int ok = 1;
    for (size_t i = 0; i < GUARD + offset; i++) ok &= host_back[i] == TWIN_GUARD_BYTE;
    for (size_t i = GUARD + offset + bytes; i < all; i++) ok &= host_back[i] == TWIN_GUARD_BYTE;
    *guards_ok = ok;
    return host_back + GUARD + offset;
}

/* slot_read into out (bytes); returns whether the guards held. */
static inline int slot_read_into(int s, size_t offset, size_t bytes, void *out)
{
    int ok;
    memcpy(out, slot_read(s, offset, bytes, &ok), bytes);
    return ok;
}

/* NULL (the legacy default stream) or the test's stream, alternately. */
static inline void *case_stream(void) { return cases % 2 ? (void *)stream : NULL; }

#endif
