/*
 * backend.c - tr_backend_find: the compute backends built into this
 * binary, by name. "cpu" (oneDNN, cpu/cpu_backend.c) when meson builds it
 * and defines HORA_HAVE_CPU_BACKEND; "cuda" (cuDNN + cuBLAS + kernels/cuda,
 * cuda/cuda_backend.c) when it defines HORA_HAVE_CUDA_BACKEND. At least one
 * of the two (trainer/meson.build builds no trainer without a backend).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#ifdef HORA_HAVE_CPU_BACKEND
#include "cpu/cpu_backend.h"
#endif
#ifdef HORA_HAVE_CUDA_BACKEND
#include "cuda/cuda_backend.h"
#endif

static const struct tr_backend_ops *const tr_backends[] = {
#ifdef HORA_HAVE_CPU_BACKEND
    &tr_backend_cpu_ops,
#endif
#ifdef HORA_HAVE_CUDA_BACKEND
    &tr_backend_cuda_ops,
#endif
};

/* Every backend hora has, built in or not. */
static const char *const tr_backend_all_names[] = {"cpu", "cuda"};

#define TR_BACKEND_COUNT (sizeof(tr_backends) / sizeof(tr_backends[0]))

const char *const tr_cpu_layout_names[] = {"auto", "nchw", "nchw8c", "nchw16c", "nhwc", NULL};
const int tr_cpu_layout_blocks[] = {0, 1, 8, 16, -1};

const struct tr_backend_ops *tr_backend_find(const char *name)
{
    if (name == NULL) return NULL;
    for (size_t i = 0; i < TR_BACKEND_COUNT; i++)
        if (strcmp(tr_backends[i]->name, name) == 0) return tr_backends[i];
    return NULL;
}

const char *tr_backend_names(void)
{
    static char names[64];
    if (names[0] == '\0')
        for (size_t i = 0; i < TR_BACKEND_COUNT; i++)
            snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? ", " : "", tr_backends[i]->name);
    return names;
}

int tr_backend_known(const char *name)
{
    for (size_t i = 0; name && i < sizeof(tr_backend_all_names) / sizeof(tr_backend_all_names[0]); i++)
        if (strcmp(tr_backend_all_names[i], name) == 0) return 1;
    return 0;
}
