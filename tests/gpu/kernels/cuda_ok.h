/*
 * cuda_ok.h - the GPU kernel tests' check of a CUDA runtime call that must
 * work (allocation, copies, synchronisation): on failure it prints file,
 * line, the call and CUDA's message, and ends the test (exit 1).
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

#endif
