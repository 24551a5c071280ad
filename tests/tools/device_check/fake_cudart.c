/* fake_cudart.c - a stand-in for libcudart.so.13 in tools/device-check's
 * self-test: the calls of the probe's device query (cudart_query.py),
 * answered from the environment:
 *   FAKE_CUDA_DEVICES   devices (default 1)
 *   FAKE_CUDA_COUNT_RC  what cudaGetDeviceCount returns (default 0; 35: the
 *                       driver is older than the runtime, 100: no device)
 *   FAKE_CUDA_DRIVER    the driver's CUDA version (default 13000)
 * Built by selftest.py: cc -shared -fPIC -Wl,-soname,libcudart.so.13. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static int fake_env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? atoi(v) : fallback;
}

int cudaRuntimeGetVersion(int *version)
{
    *version = 13000;
    return 0;
}

int cudaDriverGetVersion(int *version)
{
    *version = fake_env_int("FAKE_CUDA_DRIVER", 13000);
    return 0;
}

int cudaGetDeviceCount(int *count)
{
    int rc = fake_env_int("FAKE_CUDA_COUNT_RC", 0);
    *count = rc != 0 ? 0 : fake_env_int("FAKE_CUDA_DEVICES", 1);
    return rc;
}

const char *cudaGetErrorString(int rc)
{
    switch (rc) {
    case 35: return "CUDA driver version is insufficient for CUDA runtime version";
    case 100: return "no CUDA-capable device is detected";
    default: return "unknown error";
    }
}

/* cudaDeviceProp starts with char name[256]. */
int cudaGetDeviceProperties_v2(void *prop, int device)
{
    (void)device;
    memset(prop, 0, 256);
    strcpy((char *)prop, "Fake H200");
    return 0;
}

/* 75, 76: compute capability major, minor; 16: multiprocessors. */
int cudaDeviceGetAttribute(int *value, int attr, int device)
{
    (void)device;
    *value = attr == 75 ? 9 : attr == 76 ? 0 : attr == 16 ? 132 : 0;
    return 0;
}

int cudaSetDevice(int device)
{
    (void)device;
    return 0;
}

int cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    *total_bytes = (size_t)140 << 30;
    *free_bytes = (size_t)279 << 29; /* 139.5 GiB */
    return 0;
}
