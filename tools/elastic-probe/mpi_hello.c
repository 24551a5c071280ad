/*
 * mpi_hello.c - the program pmix_server.c starts: MPI_Init, one
 * MPI_Allreduce(SUM) of COUNT int64 values checked exactly (rank r gives
 * (r + 1) * 1000003 + index), a line per rank, MPI_Finalize. Built with
 * Debian's mpicc (Open MPI 4.1), as libhora is.
 *
 *   mpi_hello [COUNT]       exit 0 when the sum matched on this rank
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    MPI_Init(&argc, &argv);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int rank, size, count = argc > 1 ? atoi(argv[1]) : 1024, wrong = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (count < 1) count = 1;
    int64_t *in = malloc((size_t)count * sizeof(int64_t)), *out = malloc((size_t)count * sizeof(int64_t));
    for (int j = 0; j < count; j++) in[j] = (int64_t)(rank + 1) * 1000003 + j;
    MPI_Allreduce(in, out, count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    for (int j = 0; j < count; j++) {
        int64_t want = (int64_t)size * (size + 1) / 2 * 1000003 + (int64_t)size * j;
        wrong += out[j] != want;
    }
    char name[MPI_MAX_PROCESSOR_NAME];
    int len;
    MPI_Get_processor_name(name, &len);
    printf("mpi_hello: rank %d of %d on %s: MPI_Init %.3f s, allreduce of %d int64 %s\n", rank, size, name,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), count,
           wrong ? "WRONG" : "exact");
    free(in);
    free(out);
    MPI_Finalize();
    return wrong ? 1 : 0;
}
