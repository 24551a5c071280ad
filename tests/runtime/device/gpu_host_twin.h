/*
 * gpu_host_twin.h - test_gpu_coll's host twin (built with -DGC_HOST_TWIN,
 * included by gpu_coll.h): the same test code on host memory, so that the
 * test's own logic (inputs, expected results, guards, batches, groups,
 * allgather offsets, completion orders) is checked on every machine, also
 * without a GPU. The CUDA calls the test makes become host stand-ins
 * (gpu_host_twin.c: a "device" buffer is malloc'd, copies are memcpy, work
 * queued on a stream runs at once, a host function runs in the call),
 * HORA_MEMORY_CUDA requests become host ones, hora_mem_alloc_device is
 * hora_mem_alloc (shared host memory) and hora_stream_wait a hora_wait.
 * It checks the test, not the device path: mode errors does not run.
 */
#ifndef HORA_TEST_GPU_HOST_TWIN_H
#define HORA_TEST_GPU_HOST_TWIN_H

#include <cuda_runtime_api.h>

#include "hora.h"

cudaError_t twin_get_device_count(int *count);
cudaError_t twin_set_device(int device);
cudaError_t twin_get_device_properties(struct cudaDeviceProp *prop, int device);
cudaError_t twin_malloc(void **p, size_t bytes);
cudaError_t twin_free(void *p);
cudaError_t twin_malloc_host(void **p, size_t bytes);
cudaError_t twin_free_host(void *p);
cudaError_t twin_memcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);
cudaError_t twin_memcpy_async(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s);
cudaError_t twin_memset(void *p, int value, size_t bytes);
cudaError_t twin_memset_async(void *p, int value, size_t bytes, cudaStream_t s);
cudaError_t twin_synchronize(void);
cudaError_t twin_stream_create(cudaStream_t *s, unsigned flags);
cudaError_t twin_stream_destroy(cudaStream_t s);
cudaError_t twin_stream_synchronize(cudaStream_t s);
cudaError_t twin_event_create(cudaEvent_t *e, unsigned flags);
cudaError_t twin_event_record(cudaEvent_t e, cudaStream_t s);
cudaError_t twin_event_destroy(cudaEvent_t e);
cudaError_t twin_launch_host_func(cudaStream_t s, cudaHostFn_t fn, void *arg);
hora_status_t twin_stream_wait(hora_request_t req, void *stream);

#define cudaGetDeviceCount twin_get_device_count
#define cudaSetDevice twin_set_device
#define cudaGetDeviceProperties twin_get_device_properties
#define cudaMalloc twin_malloc
#define cudaFree twin_free
#define cudaMallocHost twin_malloc_host
#define cudaFreeHost twin_free_host
#define cudaMemcpy twin_memcpy
#define cudaMemcpyAsync twin_memcpy_async
#define cudaMemset twin_memset
#define cudaMemsetAsync twin_memset_async
#define cudaDeviceSynchronize twin_synchronize
#define cudaStreamCreateWithFlags twin_stream_create
#define cudaStreamDestroy twin_stream_destroy
#define cudaStreamSynchronize twin_stream_synchronize
#define cudaEventCreateWithFlags twin_event_create
#define cudaEventRecord twin_event_record
#define cudaEventDestroy twin_event_destroy
#define cudaLaunchHostFunc twin_launch_host_func
#define hora_stream_wait twin_stream_wait
#define hora_mem_alloc_device hora_mem_alloc
#define hora_cuda_device() gc_device
#define GC_MEMORY_DEVICE HORA_MEMORY_HOST

#endif
