/* coord_set.c - a process set's data path: the coordinator's allreduce,
 * broadcast and allgather over MPI on the set's communicator (coll's
 * channels connect the world's rings, not a subset's). Nonblocking MPI
 * collectives polled with coord_mpi_wait, so an abort or HORA_TIMEOUT_S
 * ends them; reductions are MPI user ops that call the host engine, so
 * every dtype and op reduce exactly as on coll's path (f16/bf16 in fp32
 * per pair, AVG as a SUM and a division by the set's size). Counts beyond
 * MPI's int go in pieces. */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>

#include "base/status.h"
#include "coll/engine.h"
#include "coord/coord_set.h"

/* Process-wide, made once: a contiguous datatype per hora dtype (the user
 * ops find the dtype from it) and one op per reduction. MPI frees them at
 * MPI_Finalize. */
static pthread_once_t coord_set_once = PTHREAD_ONCE_INIT;
static MPI_Datatype coord_set_types[HORA_DTYPE_COUNT];
static MPI_Op coord_set_ops[HORA_OP_COUNT];
static int coord_set_ready;

static int coord_set_dtype_of(MPI_Datatype type)
{
    for (int d = 0; d < HORA_DTYPE_COUNT; d++)
        if (coord_set_types[d] == type) return d;
    return -1;
}

static void coord_set_reduce(void *in, void *inout, const int *len, const MPI_Datatype *type, hora_op_t op)
{
    const int dtype = coord_set_dtype_of(*type);
    const void *srcs[2] = {inout, in};
    if (dtype < 0) return; /* not one of ours: cannot happen */
    coll_engine_for(HORA_MEMORY_HOST)->reduce(inout, srcs, 2, (size_t)*len, (hora_dtype_t)dtype, op, 1);
}

static void coord_set_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    coord_set_reduce(in, inout, len, type, HORA_OP_SUM);
}
static void coord_set_min(void *in, void *inout, int *len, MPI_Datatype *type)
{
    coord_set_reduce(in, inout, len, type, HORA_OP_MIN);
}
static void coord_set_max(void *in, void *inout, int *len, MPI_Datatype *type)
{
    coord_set_reduce(in, inout, len, type, HORA_OP_MAX);
}
static void coord_set_prod(void *in, void *inout, int *len, MPI_Datatype *type)
{
    coord_set_reduce(in, inout, len, type, HORA_OP_PROD);
}

static void coord_set_init_once(void)
{
    int ok = 1;
    for (int d = 0; d < HORA_DTYPE_COUNT && ok; d++)
        ok = MPI_Type_contiguous((int)hora_dtype_size((hora_dtype_t)d), MPI_BYTE, &coord_set_types[d]) == MPI_SUCCESS &&
             MPI_Type_commit(&coord_set_types[d]) == MPI_SUCCESS;
    ok = ok && MPI_Op_create(coord_set_sum, 1, &coord_set_ops[HORA_OP_SUM]) == MPI_SUCCESS &&
         MPI_Op_create(coord_set_min, 1, &coord_set_ops[HORA_OP_MIN]) == MPI_SUCCESS &&
         MPI_Op_create(coord_set_max, 1, &coord_set_ops[HORA_OP_MAX]) == MPI_SUCCESS &&
         MPI_Op_create(coord_set_prod, 1, &coord_set_ops[HORA_OP_PROD]) == MPI_SUCCESS;
    coord_set_ops[HORA_OP_AVG] = coord_set_ops[HORA_OP_SUM];
    coord_set_ready = ok;
}

static hora_status_t coord_set_types_ready(void)
{
    pthread_once(&coord_set_once, coord_set_init_once);
    return coord_set_ready ? HORA_OK
                           : status_fail(HORA_ERR_MPI, "coordinator: cannot create the MPI datatypes and ops of a "
                                                       "process set's data path");
}

/* The largest piece one MPI call takes. */
#define COORD_SET_PIECE ((size_t)INT_MAX)

/* An in-place allreduce (root < 0) or broadcast of buf, in pieces MPI's int
 * counts can hold, each polled to its end. */
static hora_status_t coord_set_pieces(struct coord *c, void *buf, size_t count, hora_dtype_t dtype, hora_op_t op,
                                      int root)
{
    const size_t es = hora_dtype_size(dtype);
    const char *what = root < 0 ? "MPI_Iallreduce(process set)" : "MPI_Ibcast(process set)";
    HORA_CHECK(coord_set_types_ready());
    for (size_t at = 0; at < count;) {
        const size_t n = count - at < COORD_SET_PIECE ? count - at : COORD_SET_PIECE;
        void *piece = (char *)buf + at * es;
        MPI_Request req;
        int err = root < 0 ? MPI_Iallreduce(MPI_IN_PLACE, piece, (int)n, coord_set_types[dtype], coord_set_ops[op],
                                            c->comm, &req)
                           : MPI_Ibcast(piece, (int)n, coord_set_types[dtype], root, c->comm, &req);
        if (err != MPI_SUCCESS) return status_mpi(err, what);
        HORA_CHECK(coord_mpi_wait(c, &req, c->cfg->timeout_s, what));
        at += n;
    }
    return HORA_OK;
}

hora_status_t coord_set_allreduce(struct coord *c, void *buf, size_t count, hora_dtype_t dtype, hora_op_t op)
{
    HORA_CHECK(coord_set_pieces(c, buf, count, dtype, op, -1));
    if (op == HORA_OP_AVG && count) {
        const void *srcs[1] = {buf};
        return coll_engine_for(HORA_MEMORY_HOST)->reduce(buf, srcs, 1, count, dtype, HORA_OP_SUM, c->size);
    }
    return HORA_OK;
}

hora_status_t coord_set_broadcast(struct coord *c, void *buf, size_t count, hora_dtype_t dtype, int root)
{
    return coord_set_pieces(c, buf, count, dtype, HORA_OP_SUM, root);
}

hora_status_t coord_set_allgatherv(struct coord *c, const void *send, void *recv, const size_t *counts,
                                   hora_dtype_t dtype)
{
    const int n = c->size;
    int *rc = malloc(sizeof(int) * 2 * (size_t)n), *displ = rc + n;
    size_t total = 0;
    HORA_CHECK(coord_set_types_ready());
    if (!rc) return status_fail(HORA_ERR_NO_MEMORY, "coordinator: out of memory");
    for (int q = 0; q < n; q++) {
        /* Every rank has every count: the same refusal everywhere. */
        if (total + counts[q] > (size_t)INT_MAX) {
            free(rc);
            return status_fail(HORA_ERR_UNSUPPORTED,
                               "allgather on a process set: %zu elements in all, at most INT_MAX (MPI_Iallgatherv)",
                               total + counts[q]);
        }
        rc[q] = (int)counts[q];
        displ[q] = (int)total;
        total += counts[q];
    }
    /* This rank's block is already in place when send points at it. */
    const void *from = send ? send : MPI_IN_PLACE;
    if (send == (const char *)recv + (size_t)displ[c->rank] * hora_dtype_size(dtype)) from = MPI_IN_PLACE;
    MPI_Request req;
    int err = MPI_Iallgatherv(from, rc[c->rank], coord_set_types[dtype], recv, rc, displ, coord_set_types[dtype],
                              c->comm, &req);
    hora_status_t status = err == MPI_SUCCESS
                               ? coord_mpi_wait(c, &req, c->cfg->timeout_s, "MPI_Iallgatherv(process set)")
                               : status_mpi(err, "coordinator MPI_Iallgatherv(process set)");
    if (status == HORA_OK) free(rc); /* else MPI may still read the counts: kept */
    return status;
}
