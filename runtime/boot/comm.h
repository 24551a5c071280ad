/* comm.h - the bootstrap's collectives, over MPI or over the rendezvous store.
 *
 * hora_init exchanges a few small values per rank (host identity, pool
 * names, device ids, UCX addresses, votes). Under mpirun they go through an
 * MPI communicator, as before; under hora-run through the store: every
 * member sets its part under "<prefix>/<seq>/<rank>", the first member
 * gathers them into "<prefix>/<seq>/all", and every member reads that (one
 * set and one get per member, n gets for the first). Members call the same
 * operations in the same order, as with MPI; seq numbers them.
 *
 * A boot_comm_t is used by one thread at a time. Every store wait ends
 * within the link's timeout, naming the rank and the value it waited for. */
#ifndef HORA_BOOT_COMM_H
#define HORA_BOOT_COMM_H

#include <mpi.h>
#include <pthread.h>
#include <stddef.h>

#include "boot/store.h"
#include "hora.h"

/* The store connection of one process's bootstrap (store mode). */
typedef struct {
    boot_store_t *store;
    pthread_mutex_t lock; /* one request at a time: the init thread, hora_elastic_* */
    double timeout_s;     /* longest wait for a peer's value */
} boot_link_t;

typedef enum { BOOT_COMM_NONE, BOOT_COMM_MPI, BOOT_COMM_STORE } boot_comm_kind_t;
typedef enum { BOOT_OP_MIN, BOOT_OP_MAX, BOOT_OP_SUM } boot_op_t;

typedef struct {
    boot_comm_kind_t kind;
    int rank, size;
    MPI_Comm mpi;      /* BOOT_COMM_MPI: owned (freed by boot_comm_free) unless borrowed */
    int borrowed;      /* BOOT_COMM_MPI: mpi belongs to the caller */
    boot_link_t *link; /* BOOT_COMM_STORE */
    int *members;      /* BOOT_COMM_STORE: world rank of each member, [size] */
    char prefix[192];  /* BOOT_COMM_STORE: key prefix, unique per communicator */
    unsigned long seq; /* BOOT_COMM_STORE: operations so far */
} boot_comm_t;

/* Wrap an MPI communicator (not freed by boot_comm_free). */
void boot_comm_from_mpi(boot_comm_t *c, MPI_Comm mpi);
/* A world of size ranks through link, keys under prefix. */
hora_status_t boot_comm_from_store(boot_comm_t *c, boot_link_t *link, const char *prefix, int rank, int size);
/* The MPI communicator (MPI_COMM_NULL in store mode). */
MPI_Comm boot_comm_mpi(const boot_comm_t *c);

/* Every member's bytes (the same count everywhere) into all[size * bytes],
 * in rank order. */
hora_status_t boot_comm_allgather(boot_comm_t *c, const void *mine, size_t bytes, void *all, const char *what);
/* Bytes that differ per member: *all (malloc'd, the caller frees it) holds
 * them in rank order, counts[r] each member's count. */
hora_status_t boot_comm_allgatherv(boot_comm_t *c, const void *mine, size_t bytes, void **all, size_t *counts,
                                   const char *what);
/* n ints, element-wise. */
hora_status_t boot_comm_allreduce_int(boot_comm_t *c, const int *in, int *out, int n, boot_op_t op, const char *what);
hora_status_t boot_comm_bcast(boot_comm_t *c, void *buf, size_t bytes, int root, const char *what);
hora_status_t boot_comm_barrier(boot_comm_t *c, const char *what);
/* A barrier that calls check (when not NULL) every few milliseconds while
 * it waits and gives up with its failure: hora_shutdown's, which must not
 * wait for a rank that aborted or died. No timeout of its own. */
hora_status_t boot_comm_barrier_until(boot_comm_t *c, const char *what, hora_status_t (*check)(void *arg), void *arg);
/* Members of one color, ordered by (key, rank); color < 0: not a member
 * of any (out->kind BOOT_COMM_NONE, size 0). */
hora_status_t boot_comm_split(boot_comm_t *c, int color, int key, boot_comm_t *out, const char *what);
/* The same members, traffic of its own. */
hora_status_t boot_comm_dup(boot_comm_t *c, boot_comm_t *out, const char *what);
void boot_comm_free(boot_comm_t *c);

#endif
