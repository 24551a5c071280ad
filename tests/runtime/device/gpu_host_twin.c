/* gpu_host_twin.c - the host stand-ins of test_gpu_coll's host twin
 * (gpu_host_twin.h says why). Work "queued on a stream" runs at once, so
 * every ordering the device test relies on holds trivially. */
#include <stdlib.h>
#include <string.h>

#include "gpu_coll.h"

/* Streams and events are opaque pointers; any distinct address will do. */
static char twin_handles[64];
static int twin_next_handle;

/* One "device", hidden as CUDA hides them (CUDA_VISIBLE_DEVICES empty):
 * the twin takes test_gpu_coll's skip and mixed paths too. */
cudaError_t twin_get_device_count(int *count)
{
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    *count = visible && !*visible ? 0 : 1;
    return *count ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t twin_set_device(int device)
{
    (void)device;
    return cudaSuccess;
}

cudaError_t twin_get_device_properties(struct cudaDeviceProp *prop, int device)
{
    (void)device;
    memset(prop, 0, sizeof(*prop));
    strcpy(prop->name, "host twin (no device)");
    return cudaSuccess;
}

cudaError_t twin_malloc(void **p, size_t bytes)
{
    if (!bytes) { /* cudaFree(0) and cudaMalloc(0) in the real API: nothing */
        *p = NULL;
        return cudaSuccess;
    }
    *p = malloc(bytes);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t twin_free(void *p)
{
    free(p);
    return cudaSuccess;
}

cudaError_t twin_malloc_host(void **p, size_t bytes)
{
    *p = malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t twin_free_host(void *p)
{
    free(p);
    return cudaSuccess;
}

cudaError_t twin_memcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    (void)kind;
    if (bytes) memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t twin_memcpy_async(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s)
{
    (void)s;
    return twin_memcpy(dst, src, bytes, kind);
}

cudaError_t twin_memset(void *p, int value, size_t bytes)
{
    if (bytes) memset(p, value, bytes);
    return cudaSuccess;
}

cudaError_t twin_memset_async(void *p, int value, size_t bytes, cudaStream_t s)
{
    (void)s;
    return twin_memset(p, value, bytes);
}

cudaError_t twin_synchronize(void) { return cudaSuccess; }

cudaError_t twin_stream_create(cudaStream_t *s, unsigned flags)
{
    (void)flags;
    *s = (cudaStream_t)(void *)&twin_handles[twin_next_handle++ % 64];
    return cudaSuccess;
}

cudaError_t twin_stream_destroy(cudaStream_t s)
{
    (void)s;
    return cudaSuccess;
}

cudaError_t twin_stream_synchronize(cudaStream_t s)
{
    (void)s;
    return cudaSuccess;
}

cudaError_t twin_event_create(cudaEvent_t *e, unsigned flags)
{
    (void)flags;
    *e = (cudaEvent_t)(void *)&twin_handles[twin_next_handle++ % 64];
    return cudaSuccess;
}

cudaError_t twin_event_record(cudaEvent_t e, cudaStream_t s)
{
    (void)e;
    (void)s;
    return cudaSuccess;
}

cudaError_t twin_event_destroy(cudaEvent_t e)
{
    (void)e;
    return cudaSuccess;
}

cudaError_t twin_launch_host_func(cudaStream_t s, cudaHostFn_t fn, void *arg)
{
    (void)s;
    fn(arg);
    return cudaSuccess;
}

hora_status_t twin_stream_wait(hora_request_t req, void *stream)
{
    (void)stream;
    return hora_wait(req); /* hora.h: where the stream cannot wait, the call waits on the host */
}
