/* tp_mpi.c - the MPI point-to-point transport: the fallback when nothing
 * faster connects, and a cross-check in the tests. Never the fast path.
 * Waits poll MPI_Test so that a silent peer becomes HORA_ERR_TIMEOUT after
 * HORA_TIMEOUT_S instead of a hang, and a rank's abort (tp_notice.c) ends
 * them with its reason. No agreement on an operation's outcome: a rank may
 * complete an operation its peers failed (hora.h). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "base/status.h"
#include "tp/tp.h"

struct tp_mpi {
    MPI_Comm comm; /* private: its tags never meet anyone else's */
};

/* struct tp_req's bytes hold the MPI request. */
_Static_assert(sizeof(MPI_Request) <= TP_REQ_BYTES, "an MPI_Request must fit struct tp_req");
static MPI_Request *tp_mpi_request(struct tp_req *req) { return (MPI_Request *)(void *)req->opaque; }

static bool tp_mpi_can_connect(const struct tp_env *env, int peer)
{
    (void)peer;
    return !env->disable[TP_KIND_MPI];
}

static hora_status_t tp_mpi_connect(struct tp *tp)
{
    struct tp_mpi *s = calloc(1, sizeof(*s));
    int err;

    if (!s) return status_fail(HORA_ERR_NO_MEMORY, "out of memory connecting the mpi transport");
    err = MPI_Comm_dup(tp->env->world, &s->comm);
    if (err != MPI_SUCCESS) {
        free(s);
        return status_mpi(err, "MPI_Comm_dup(mpi transport)");
    }
    tp->state = s;
    return HORA_OK;
}

static void tp_mpi_close(struct tp *tp)
{
    struct tp_mpi *s = tp->state;
    if (!s) return;
    MPI_Comm_free(&s->comm);
    free(s);
    tp->state = NULL;
}

static hora_status_t tp_mpi_isend(struct tp *tp, int peer, const void *buf, size_t bytes, int tag,
                                  struct tp_req *req)
{
    struct tp_mpi *s = tp->state;
    if (bytes > (size_t)INT32_MAX)
        return status_fail(HORA_ERR_INVALID_ARG, "mpi transport: message of %zu bytes exceeds 2 GiB", bytes);
    int err = MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, s->comm, tp_mpi_request(req));
    return err == MPI_SUCCESS ? HORA_OK : status_mpi(err, "MPI_Isend");
}

static hora_status_t tp_mpi_irecv(struct tp *tp, int peer, void *buf, size_t bytes, int tag, struct tp_req *req)
{
    struct tp_mpi *s = tp->state;
    if (bytes > (size_t)INT32_MAX)
        return status_fail(HORA_ERR_INVALID_ARG, "mpi transport: message of %zu bytes exceeds 2 GiB", bytes);
    int err = MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, s->comm, tp_mpi_request(req));
    return err == MPI_SUCCESS ? HORA_OK : status_mpi(err, "MPI_Irecv");
}

static hora_status_t tp_mpi_wait(struct tp *tp, int peer, struct tp_req *req)
{
    double deadline = 0;
    int done = 0;

    tp->env->last_peer[tp->channel] = peer;
    for (unsigned long spins = 0;; spins++) {
        int err = MPI_Test(tp_mpi_request(req), &done, MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS) return status_mpi(err, "MPI_Test");
        if (done) return HORA_OK;
        if ((spins & 1023) == 1023) {
            /* A rank that aborted will never send: fail with its reason. */
            hora_status_t status = tp_notice_check(tp->env, NULL, 0);
            if (status < 0) {
                MPI_Cancel(tp_mpi_request(req));
                return status;
            }
            double now = MPI_Wtime();
            if (deadline == 0)
                deadline = now + tp->env->timeout_s;
            else if (now > deadline)
                return status_fail(HORA_ERR_TIMEOUT,
                                   "mpi transport: rank %d heard nothing from rank %d for %.1f s (HORA_TIMEOUT_S)",
                                   tp->env->topo->rank, peer, tp->env->timeout_s);
            sched_yield();
        }
    }
}

const struct tp_ops tp_mpi_ops = {
    .name = "mpi",
    .caps = TP_CAP_MESSAGE,
    .memory_kinds = 1u << HORA_MEMORY_HOST,
    .can_connect = tp_mpi_can_connect,
    .connect = tp_mpi_connect,
    .close = tp_mpi_close,
    .isend = tp_mpi_isend,
    .irecv = tp_mpi_irecv,
    .wait = tp_mpi_wait,
    .mem_publish = tp_unsupported_mem_publish,
    .mem_desc = tp_unsupported_mem_desc,
    .mem_post = tp_unsupported_mem_post,
    .mem_wait = tp_unsupported_mem_wait,
    .mem_local_offset = tp_unsupported_mem_local_offset,
    .mem_peer_ptr = tp_unsupported_mem_peer_ptr,
    .mem_op_begin = tp_unsupported_mem_op_begin,
    .mem_op_end = tp_unsupported_mem_op_end,
    .mem_op_check = tp_unsupported_mem_op_check,
    .small_bytes = 0,
    .mem_small_post = tp_unsupported_mem_small_post,
    .mem_small_wait = tp_unsupported_mem_small_wait,
};
