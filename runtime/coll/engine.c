/* engine.c - the engine of a memory kind (engine.h): the host engine
 * (engine_host.c) or, with device support started, the device engine
 * (engine_cuda.c). The two engines never call each other. */
#include <stddef.h>

#include "coll/engine.h"

const struct coll_engine_ops *coll_engine_for(hora_memory_t memory)
{
    if (memory == HORA_MEMORY_HOST) return coll_engine_host();
    return memory == HORA_MEMORY_CUDA ? coll_engine_cuda() : NULL;
}
