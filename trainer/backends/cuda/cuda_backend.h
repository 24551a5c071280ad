/*
 * cuda_backend.h - the cuda backend's ops table (cuDNN, cuBLASLt,
 * kernels/cuda), for tr_backend_find in ../backend.c. Everything else about
 * it is reached through the table.
 */
#ifndef TR_BACKEND_CUDA_H
#define TR_BACKEND_CUDA_H

#include "backend.h"

extern const struct tr_backend_ops tr_backend_cuda_ops;

#endif
