/*
 * cuda_ok.h - the GPU kernel tests' check of a CUDA runtime call that must
 * work (allocation, copies, synchronisation): on failure it prints file,
 * line, the call and CUDA's message, and ends the test (exit 1); and
 * gpu_test_open, how each of them starts.
 */
#ifndef HORA_TEST_CUDA_OK_H
#define HORA_TEST_CUDA_OK_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#define CUDA_OK(call)                                                                                   \
    do {                                                                                                \
        cudaError_t e_ = (call);                                                                        \
        if (e_ != cudaSuccess) {                                                                        \
            fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)

/* Device 0 current, its name printed after the test's; exits 77 (skipped)
 * with the reason where CUDA finds no usable device. */
static inline void gpu_test_open(const char *test)
{
    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
        printf("SKIP %s: %s\n", test, e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found no device");
        exit(77);
    }
    struct cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    CUDA_OK(cudaSetDevice(0));
    printf("%s: %s (sm_%d%d, %d SMs)\n", test, prop.name, prop.major, prop.minor, prop.multiProcessorCount);
}

#endif
