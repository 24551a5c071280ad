/* buf.h - test buffers of either kind the collectives accept: shared ones
 * from hora_mem_alloc (peers read them where they are) and plain malloc'd
 * ones (staged by the runtime). Out of memory ends the test process: a
 * multi-rank test cannot go on with a rank missing its buffers. */
#ifndef HORA_TEST_BUF_H
#define HORA_TEST_BUF_H

#include <stdio.h>
#include <stdlib.h>

#include "hora.h"

/* bytes (at least 1) from hora_mem_alloc when shared, else from malloc. */
static inline void *test_buf_alloc(int shared, size_t bytes)
{
    void *p = NULL;
    if (bytes == 0) bytes = 1;
    if (shared) {
        hora_status_t st = hora_mem_alloc(bytes, &p);
        if (st != HORA_OK) {
            fprintf(stderr, "rank %d FAIL: hora_mem_alloc(%zu): %s: %s\n", hora_rank(), bytes, hora_status_string(st),
                    hora_last_error());
            exit(1);
        }
    } else if (!(p = malloc(bytes))) {
        fprintf(stderr, "rank %d FAIL: out of memory (%zu bytes)\n", hora_rank(), bytes);
        exit(1);
    }
    return p;
}

/* Frees p from test_buf_alloc(shared, ...). */
static inline void test_buf_free(int shared, void *p)
{
    if (shared)
        hora_mem_free(p);
    else
        free(p);
}

#endif
