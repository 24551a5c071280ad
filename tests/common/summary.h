/* summary.h - the end of a multi-rank test that counts its own failures and
 * checks: sum both over the ranks, print one verdict line on rank 0
 * ("TEST: N checks on R ranks, F failures -> PASS|FAIL"), return main's
 * exit status. test_summary sums with the runtime's own allreduce (so the
 * test needs no MPI of its own) and shuts the runtime down;
 * test_summary_mpi, for tests that include <mpi.h> first, sums over an MPI
 * communicator of their own (one that works whatever state the runtime is
 * in) and leaves shutdown and MPI to the caller. */
#ifndef HORA_TEST_SUMMARY_H
#define HORA_TEST_SUMMARY_H

#include <stdio.h>

#include "hora.h"

/* Returns main's exit status: 0 when no rank failed and shutdown worked. */
static inline int test_summary(const char *test, int failures, int checks)
{
    int local[2] = {failures, checks}, total[2];
    const int rank = hora_rank(), size = hora_size();
    hora_status_t st = hora_allreduce(local, total, 2, HORA_DTYPE_I32, HORA_OP_SUM);
    if (st != HORA_OK) {
        fprintf(stderr, "rank %d FAIL: final reduction: %s\n", rank, hora_last_error());
        total[0] = 1;
    }
    if (hora_shutdown() != HORA_OK) total[0]++;
    if (rank == 0)
        printf("%s: %d checks on %d ranks, %d failures -> %s\n", test, total[1], size, total[0],
               total[0] ? "FAIL" : "PASS");
    return total[0] ? 1 : 0;
}

#ifdef MPI_VERSION
static inline int test_summary_mpi(const char *test, MPI_Comm comm, int failures, int checks)
{
    int local[2] = {failures, checks}, total[2] = {1, 0}, rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Allreduce(local, total, 2, MPI_INT, MPI_SUM, comm);
    if (rank == 0)
        printf("%s: %d checks on %d ranks, %d failures -> %s\n", test, total[1], size, total[0],
               total[0] ? "FAIL" : "PASS");
    return total[0] ? 1 : 0;
}
#endif

#endif
