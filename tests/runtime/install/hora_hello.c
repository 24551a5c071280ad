/*
 * hora_hello.c - a libhora user outside the source tree: compiled by
 * tests/runtime/install/run against an installed copy with nothing but
 * `pkg-config --cflags --libs hora`, and run under mpirun. It checks one
 * direct and one negotiated allreduce exactly and prints "hora_hello: ok".
 */
#include <stdio.h>
#include <stdlib.h>

#include <hora.h>

#define COUNT 1001

int main(void)
{
    hora_status_t status = hora_init();
    if (status != HORA_OK) {
        fprintf(stderr, "hora_hello: hora_init: %s (%s)\n", hora_status_string(status), hora_last_error());
        return 1;
    }
    const int rank = hora_rank(), size = hora_size();
    float *grad = NULL;
    double *sums = malloc(COUNT * sizeof(double));
    int wrong = 0;
    status = hora_mem_alloc(COUNT * sizeof(float), (void **)&grad);
    if (status == HORA_OK && sums) {
        for (int i = 0; i < COUNT; i++) grad[i] = (float)(rank + 1) * (float)(i % 7);
        status = hora_allreduce(grad, grad, COUNT, HORA_DTYPE_F32, HORA_OP_SUM);
        /* sum over ranks of (r + 1) * (i % 7) = size (size + 1) / 2 * (i % 7), exact in f32 */
        for (int i = 0; status == HORA_OK && i < COUNT; i++)
            wrong += grad[i] != (float)(size * (size + 1) / 2 * (i % 7));
        for (int i = 0; i < COUNT; i++) sums[i] = rank * 1000.0 + i;
        hora_request_t req = NULL;
        if (status == HORA_OK)
            status = hora_allreduce_async("hello.sums", sums, sums, COUNT, HORA_DTYPE_F64, HORA_OP_MAX, NULL, &req);
        if (status == HORA_OK) status = hora_wait(req);
        hora_request_free(req);
        for (int i = 0; status == HORA_OK && i < COUNT; i++) wrong += sums[i] != (size - 1) * 1000.0 + i;
    } else if (status == HORA_OK) {
        status = HORA_ERR_NO_MEMORY;
    }
    if (status != HORA_OK) fprintf(stderr, "hora_hello: %s (%s)\n", hora_status_string(status), hora_last_error());
    hora_mem_free(grad);
    free(sums);
    hora_status_t down = hora_shutdown();
    if (status == HORA_OK && wrong == 0 && down == HORA_OK) {
        if (rank == 0) printf("hora_hello: ok (%d ranks, transport checked exactly)\n", size);
        return 0;
    }
    fprintf(stderr, "hora_hello: rank %d: %d wrong elements\n", rank, wrong);
    return 1;
}
