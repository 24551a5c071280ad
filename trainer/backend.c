/*
 * backend.c - tr_backend_find: the compute backends built into this
 * binary, by name ("cpu": oneDNN, cpu/backend_cpu.c). The cuda backend
 * (cuDNN + cuBLAS) joins the table when it exists.
 */
#include <stddef.h>
#include <string.h>

#include "backend.h"
#include "cpu/backend_cpu.h"

static const struct tr_backend_ops *const tr_backends[] = {
    &tr_backend_cpu_ops,
};

const struct tr_backend_ops *tr_backend_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof(tr_backends) / sizeof(tr_backends[0]); i++)
        if (strcmp(tr_backends[i]->name, name) == 0)
            return tr_backends[i];
    return NULL;
}
