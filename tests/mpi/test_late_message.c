/*
 * test_late_message.c - a receive abandoned by a timed-out collective must
 * not be written later (issue 31, item 3). Over the mpi transport
 * (HORA_DISABLE_SHM=1 HORA_DISABLE_UCX=1), np 3, an 8-byte all-reduce takes
 * recursive doubling with a fold: rank 0 hands its input to rank 1 and
 * posts a receive for the result, straight into its output buffer. Rank 1
 * sleeps past HORA_TIMEOUT_S before it calls, so ranks 0 and 2 time out; then
 * it completes the operation (both inputs are waiting for it) and sends rank
 * 0 the result. Rank 0, after its failure, fills the output buffer with a
 * pattern and drives MPI (two barriers, after rank 1's call): a receive left
 * pending would now write the result over the pattern.
 *
 * Run: mpirun -np 3 test_late_message (HORA_TIMEOUT_S=1 and the two disables
 * in the environment). Exit 0 pass, 1 fail (with a line saying why).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hora.h"

#define PATTERN 0x5a5a5a5a5a5a5a5aull

static uint64_t out_buf; /* static: never freed, so only a late write can change it */

int main(void)
{
    int fails = 0;
    if (hora_init() != HORA_OK) {
        fprintf(stderr, "hora_init: %s\n", hora_last_error());
        return 1;
    }
    const int rank = hora_rank(), size = hora_size();
    if (size != 3) {
        fprintf(stderr, "test_late_message: needs exactly 3 ranks (got %d)\n", size);
        return 1;
    }
    int64_t in = rank + 1;
    if (rank == 1) sleep(3); /* past HORA_TIMEOUT_S=1 on ranks 0 and 2 */
    hora_status_t status = hora_allreduce(&in, &out_buf, 1, HORA_DTYPE_I64, HORA_OP_SUM);
    printf("rank %d: allreduce %s%s%s\n", rank, hora_status_string(status), status < 0 ? ": " : "",
           status < 0 ? hora_last_error() : "");
    if (rank != 1 && status != HORA_ERR_TIMEOUT) {
        printf("rank %d: FAIL: expected HORA_ERR_TIMEOUT\n", rank);
        fails++;
    }
    if (rank == 0) out_buf = PATTERN;
    /* Rank 1 enters after its all-reduce has sent rank 0 the result; every
     * MPI call on rank 0 from here progresses its receives. */
    MPI_Barrier(MPI_COMM_WORLD);
    usleep(200 * 1000);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && out_buf != PATTERN) {
        printf("rank 0: FAIL: the abandoned receive wrote 0x%016llx over the pattern after the all-reduce failed\n",
               (unsigned long long)out_buf);
        fails++;
    }
    hora_shutdown();
    printf("rank %d: %s\n", rank, fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
