/*
 * test_peer_death.c - a rank dies (SIGKILL) in the middle of a large
 * allreduce; every other rank must get an error naming a lost peer within
 * HORA_TIMEOUT_S and exit non-zero, never hang. Run under
 * `mpirun --enable-recovery` (otherwise mpirun itself kills the survivors).
 * Exit: 3 when this rank saw the failure (expected), 0 when it did not.
 * Run: mpirun --enable-recovery -np N test_peer_death [victim_rank]
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "hora.h"

int main(int argc, char **argv)
{
    if (hora_init() != HORA_OK) {
        fprintf(stderr, "hora_init: %s\n", hora_last_error());
        return 1;
    }
    const int rank = hora_rank(), size = hora_size();
    const int victim = argc > 1 ? atoi(argv[1]) : size - 1;
    const size_t count = (size_t)16 << 20;
    float *buf;
    if (hora_mem_alloc(count * sizeof(float), (void **)&buf) != HORA_OK) return 1;
    for (size_t i = 0; i < count; i++) buf[i] = 1.0f;

    struct timespec t0, t1;
    for (int it = 0; it < 1000; it++) {
        if (rank == victim && it == 3) raise(SIGKILL);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        hora_status_t st = hora_allreduce(buf, buf, count, HORA_DTYPE_F32, HORA_OP_AVG);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (st != HORA_OK) {
            double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
            printf("rank %d detected the failure after %.1f s in iteration %d: %s: %s\n", rank, s, it,
                   hora_status_string(st), hora_last_error());
            fflush(stdout);
            _exit(3); /* the runtime's peers are gone: no orderly shutdown */
        }
    }
    printf("rank %d: no failure detected\n", rank);
    hora_shutdown();
    return 0;
}
