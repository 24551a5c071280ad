/*
 * test_late_message.c - a receive abandoned by a timed-out collective must
 * not be written later (issue 31, item 3). Over the mpi transport
 * (HORA_DISABLE_SHM=1 HORA_DISABLE_UCX=1), np 3, a 2112-byte all-reduce with
 * HORA_LATENCY_BYTES=4K takes recursive doubling with a fold (up to 2 KiB
 * the latency path rides in the outcome agreement instead, whose receives
 * never reach the caller's buffer): rank 0 hands its input to rank 1 and
 * posts a receive for the result, straight into its output buffer. Rank 1
 * sleeps past HORA_TIMEOUT_S before it calls, so ranks 0 and 2 time out; then
 * it runs the operation's exchanges (both inputs are waiting for it) and
 * sends rank 0 the result, and fails it too at the outcome agreement (every
 * rank must return HORA_ERR_TIMEOUT). Rank 0, after its failure, fills the
 * output buffer with a pattern and drives MPI (two barriers, after rank 1's
 * call): a receive left pending would now write the result over the pattern.
 *
 * Run: mpirun -np 3 test_late_message (HORA_TIMEOUT_S=1, HORA_LATENCY_BYTES=4K
 * and the two disables in the environment). Exit 0 pass, 1 fail (with a line
 * saying why).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hora.h"

#define PATTERN 0x5a5a5a5a5a5a5a5aull
#define COUNT 264 /* 2112 bytes: over the agreement's 2 KiB, within HORA_LATENCY_BYTES=4K and MPI's eager sizes */

static uint64_t out_buf[COUNT]; /* static: never freed, so only a late write can change it */

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
    static int64_t in[COUNT];
    for (int i = 0; i < COUNT; i++) in[i] = rank + 1;
    if (rank == 1) sleep(3); /* past HORA_TIMEOUT_S=1 on ranks 0 and 2 */
    hora_status_t status = hora_allreduce(in, out_buf, COUNT, HORA_DTYPE_I64, HORA_OP_SUM);
    printf("rank %d: allreduce %s%s%s\n", rank, hora_status_string(status), status < 0 ? ": " : "",
           status < 0 ? hora_last_error() : "");
    if (status != HORA_ERR_TIMEOUT) {
        printf("rank %d: FAIL: expected HORA_ERR_TIMEOUT (one outcome)\n", rank);
        fails++;
    }
    if (rank == 0)
        for (int i = 0; i < COUNT; i++) out_buf[i] = PATTERN;
    /* Rank 1 enters after its all-reduce has sent rank 0 the result; every
     * MPI call on rank 0 from here progresses its receives. */
    MPI_Barrier(MPI_COMM_WORLD);
    usleep(200 * 1000);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; rank == 0 && i < COUNT; i++)
        if (out_buf[i] != PATTERN) {
            printf("rank 0: FAIL: the abandoned receive wrote 0x%016llx over the pattern (element %d) after the "
                   "all-reduce failed\n",
                   (unsigned long long)out_buf[i], i);
            fails++;
            break;
        }
    hora_shutdown();
    printf("rank %d: %s\n", rank, fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
