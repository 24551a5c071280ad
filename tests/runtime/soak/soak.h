/*
 * soak.h - what the files of hora-soak share: one iteration's plan (the
 * tensors every rank submits, drawn from a seed all ranks share), the
 * per-rank counters, and the functions that draw, run and check a plan.
 *
 *   soak.c        main: options, the loop, the ranks' agreement to stop,
 *                 RSS, the report, the watchdog
 *   soak_plan.c   one iteration's plan from (seed, iteration)
 *   soak_exec.c   buffers, submission, completion, the direct collectives
 *   soak_values.c inputs, expected results, element-wise comparison
 */
#ifndef HORA_SOAK_H
#define HORA_SOAK_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "hora.h"

#define SOAK_MAX_RANKS 64
#define SOAK_MAX_UNITS 24 /* submissions per iteration (a group is one) */
#define SOAK_MAX_GROUP 6  /* members of a grouped allreduce */
#define SOAK_MAX_TENSORS (SOAK_MAX_UNITS * SOAK_MAX_GROUP)
#define SOAK_MAX_DIRECT 3   /* direct collectives per iteration */
#define SOAK_GUARD_BYTES 64 /* checked bytes after every private buffer */
#define SOAK_WARM_PLANS 2   /* iterations 0, 1: the largest of everything (soak_plan.c) */

/* What one tensor goes through. */
enum soak_kind {
    SOAK_KIND_ALLREDUCE = 0, /* hora_allreduce_async */
    SOAK_KIND_GROUPED,       /* a member of hora_grouped_allreduce_async */
    SOAK_KIND_BROADCAST,     /* hora_broadcast_async */
    SOAK_KIND_ALLGATHER,     /* hora_allgather_async */
};

/* How this rank completes it. */
enum soak_finish {
    SOAK_FINISH_WAIT = 0, /* hora_wait */
    SOAK_FINISH_POLL,     /* hora_test until done */
    SOAK_FINISH_FREE,     /* hora_request_free alone (it waits), then check */
};

/* Where its buffers live. */
enum soak_mem {
    SOAK_MEM_MALLOC = 0, /* malloc'd, staged by the runtime */
    SOAK_MEM_SHARED,     /* its own block from hora_mem_alloc */
    SOAK_MEM_ARENA,      /* carved from the plan's arena (hora_mem_alloc), in place,
                            HORA_ALIGN_BYTES apart in plan order: the zero-copy layout */
};

struct soak_tensor {
    char name[48];
    enum soak_kind kind;
    hora_dtype_t dtype;
    hora_op_t op; /* allreduce and grouped */
    size_t count; /* elements on this rank (allgather: first[rank] * inner) */
    double prescale, postscale;
    hora_compression_t compression;
    int inplace; /* allreduce: send == recv */
    enum soak_mem mem;
    int root;                      /* broadcast */
    int ndim;                      /* 0: no shape in the options */
    int64_t inner;                 /* allgather: elements per row (product of dims 1..) */
    int64_t dims[3];               /* allgather dims 1.., broadcast's shape */
    int64_t first[SOAK_MAX_RANKS]; /* allgather: each rank's first dimension */
    uint64_t salt;                 /* inputs are a function of (salt, rank, element) */
    enum soak_finish finish;       /* this rank's choice */
    int deferred;                  /* completed at the end of the next iteration (every rank) */
    size_t arena_offset;           /* SOAK_MEM_ARENA: byte offset in the arena */
    /* state */
    void *send, *recv;
    size_t alloc_bytes; /* of send (and recv), guard included */
    hora_request_t req;
    int submitted, done;
};

/* A submission: one tensor, or the members of one group. */
struct soak_unit {
    int first, n;
};

enum soak_direct_kind {
    SOAK_DIRECT_ALLREDUCE = 0,
    SOAK_DIRECT_REDUCE_SCATTER,
    SOAK_DIRECT_ALLGATHERV,
    SOAK_DIRECT_BROADCAST,
    SOAK_DIRECT_KINDS
};

/* A blocking collective from the submitting thread, between two submissions
 * (at the same index of every rank's submission sequence). */
struct soak_direct {
    enum soak_direct_kind kind;
    hora_dtype_t dtype;
    hora_op_t op;
    size_t count;                  /* allgatherv: ignored (counts) */
    size_t counts[SOAK_MAX_RANKS]; /* allgatherv */
    int inplace, shared, root;
    int position; /* runs before submission number `position` */
    uint64_t salt;
};

struct soak_plan {
    uint64_t iteration;
    int ntensors, nunits, ndirect;
    struct soak_tensor tensor[SOAK_MAX_TENSORS];
    struct soak_unit unit[SOAK_MAX_UNITS];
    int order[SOAK_MAX_UNITS]; /* this rank's submission order (unit ids) */
    struct soak_direct direct[SOAK_MAX_DIRECT];
    uint64_t rank_seed; /* this rank's own choices (polls, finish order) */
    size_t arena_bytes;
    void *arena;
};

/* Limits of what a plan may draw. */
struct soak_limits {
    size_t tensor_bytes;    /* largest tensor */
    size_t iteration_bytes; /* all tensors of one iteration on one rank */
};

/* Per-rank tallies (summed over the run; every rank runs the same plans). */
struct soak_counters {
    uint64_t iterations, requests, grouped_calls, direct_calls, polls;
    uint64_t bytes_reduced;   /* allreduce inputs (async, grouped, direct, reduce-scatter) */
    uint64_t bytes_broadcast; /* broadcast buffers */
    uint64_t bytes_gathered;  /* allgather results */
    uint64_t checks;
};

/* This process: rank and size in soak_comm, the soak's own communicator
 * (stop agreement and report; the runtime never uses it). */
extern int soak_rank, soak_size;
extern MPI_Comm soak_comm;
extern struct soak_counters soak_count;
extern int soak_failures;

/* Count a failure and print it with the rank (the first few per rank). */
void soak_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* soak_plan.c */
void soak_plan_make(struct soak_plan *p, uint64_t seed, uint64_t iteration, const struct soak_limits *lim);
/* "allreduce f16 max count 7 pre 2 post 0.5 fp16-wire in-place arena" */
void soak_tensor_describe(const struct soak_tensor *t, char *out, size_t len);

/* soak_exec.c */
/* Submit the plan's units in this rank's order, with its direct collectives
 * in between and hora_test polls of earlier requests. */
void soak_plan_submit(struct soak_plan *p);
/* Complete and check every non-deferred tensor of cur and every deferred one
 * of prev (may be NULL), in an order of this rank's own; then free prev. */
void soak_plan_finish(struct soak_plan *cur, struct soak_plan *prev);
/* Complete and free everything left of p (the last iteration's deferred). */
void soak_plan_drain(struct soak_plan *p);
/* The buffer expected results are built in: made resident at the start with
 * the largest size a plan needs, so it never grows after the warm-up. */
void soak_scratch_reserve(size_t bytes);
void soak_scratch_release(void);

/* soak_values.c */
/* Rank r's input of an allreduce element: a small integer (exact.h). */
double soak_ar_input(const struct soak_tensor *t, int r, size_t i);
/* The exact result of element i, as the runtime must round it. */
double soak_ar_expected(const struct soak_tensor *t, size_t i);
void soak_ar_fill(const struct soak_tensor *t, void *buf, size_t count);
/* Bit patterns of any kind (copies must keep every bit): rank r's element i. */
void soak_bits_fill(void *buf, size_t offset, size_t count, size_t elem_bytes, uint64_t salt, int r);
/* Compare count elements of got with want (both dtype); on a difference report
 * what, the first few wrong elements (index, expected, got, bits), count it.
 * Returns the number of wrong elements. */
size_t soak_compare(const char *what, const void *got, const void *want, size_t count, hora_dtype_t dtype);
/* The guard after a private buffer: fill / check (report names what). */
void soak_guard_fill(void *p, size_t bytes);
void soak_guard_check(const char *what, const void *p, size_t bytes);
/* Element i of buf as a double (for messages). */
double soak_value_at(const void *buf, size_t i, hora_dtype_t dtype);

#endif
