/* coord_request.c - the request's helpers every piece of the coordinator
 * may call: the clock, the kinds' names, the FIFO, an allgather's result. */
#include <stdlib.h>
#include <time.h>

#include "coord/coord_request.h"
#include "mem/mem_dev.h"

int64_t coord_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int coord_kind_cacheable(uint32_t kind)
{
    /* Not allgather and alltoall, whose counts differ between ranks, nor
     * barrier, which moves nothing. */
    return kind == COORD_KIND_ALLREDUCE || kind == COORD_KIND_BROADCAST || kind == COORD_KIND_REDUCESCATTER;
}

const char *coord_kind_name(uint32_t kind)
{
    switch (kind) {
    case COORD_KIND_ALLREDUCE: return "allreduce";
    case COORD_KIND_BROADCAST: return "broadcast";
    case COORD_KIND_ALLGATHER: return "allgather";
    case COORD_KIND_JOIN: return "join";
    case COORD_KIND_ERROR: return "error";
    case COORD_KIND_SHUTDOWN: return "shutdown";
    case COORD_KIND_BARRIER: return "barrier";
    case COORD_KIND_ALLTOALL: return "alltoall";
    case COORD_KIND_REDUCESCATTER: return "reducescatter";
    }
    return "unknown";
}

void coord_fifo_remove(struct coord_fifo *f, struct hora_request *req)
{
    for (struct hora_request **link = &f->head, *prev = NULL; *link; prev = *link, link = &(*link)->next)
        if (*link == req) {
            *link = req->next;
            if (f->tail == req) f->tail = prev;
            req->next = NULL;
            break;
        }
}

void coord_free_result(hora_memory_t memory, void *result)
{
    if (memory == HORA_MEMORY_HOST)
        free(result);
    else
        mem_dev_free_buffer(result);
}
