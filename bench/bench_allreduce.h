/*
 * bench_allreduce.h - what the parts of hora-bench-allreduce share: the
 * options of the run (parsed by bench_allreduce_options.c) and one measured
 * row per (type, op, size) (bench_allreduce.c measures, bench_report.c
 * prints).
 *
 * Build: part of hora-bench-allreduce (bench/meson.build).
 */
#ifndef BENCH_ALLREDUCE_H
#define BENCH_ALLREDUCE_H

#include <stddef.h>
#include <stdio.h>

#include "bench_cli.h"
#include "bench_output.h"
#include "hora.h"

#define BENCH_NAME "hora-bench-allreduce"

/* Where the send and recv buffers live (--memory). */
typedef enum {
    BENCH_MEMORY_HOST = 0, /* hora_mem_alloc */
    BENCH_MEMORY_CUDA = 1, /* hora_mem_alloc_device, on this rank's GPU */
} bench_memory_t;

/* What the last columns compare hora with (--baseline). */
typedef enum {
    BENCH_PEER_NONE = 0,
    BENCH_PEER_MPI = 1,  /* MPI_Allreduce in place on recv (host memory) */
    BENCH_PEER_NCCL = 2, /* ncclAllReduce in place on the same device buffers */
    BENCH_PEER_COPY = 3, /* one device-to-device cudaMemcpyAsync of the row's bytes */
    BENCH_PEER_AUTO = 4, /* asked only: nccl where it can run, else copy */
} bench_peer_t;

/* Bytes of the texts the run fills in below. */
#define BENCH_NOTE_BYTES 768

typedef struct {
    size_t min_bytes;
    size_t max_bytes;
    size_t step_factor;
    int iters;
    int warmup_iters;
    int check;
    hora_dtype_t dtypes[HORA_DTYPE_COUNT];
    int dtype_count;
    hora_op_t ops[HORA_OP_COUNT];
    int op_count;
    bench_memory_t memory;
    bench_peer_t baseline;    /* as asked; BENCH_PEER_AUTO is --memory cuda's default */
    const char *nccl_library; /* dlopen name or path of NCCL */
    const char *json_path;    /* NULL: no JSON */
    const char *plot_path;    /* NULL: no plot */
    const char *transport;    /* "shm", "mpi" or "auto" */
    int print_config;

    /* Filled in by the run before the header, the same on every rank. */
    bench_peer_t peer;                /* what the last columns measure; never AUTO */
    char peer_detail[64];             /* "NCCL 2.28.9"; "" when nothing to add */
    char peer_note[BENCH_NOTE_BYTES]; /* why this peer when not the one asked, or "" */
    char cuda_pool_bytes[32];         /* HORA_CUDA_POOL_BYTES in force ("192M"); "" with host memory */
    int cuda_pool_from_user;          /* 1: the caller's value was kept, 0: the bench set it */
    int gpu_turns;                    /* most ranks on one GPU: the copy peer runs in that many turns */
    /* This rank's GPU (--memory cuda). */
    int gpu_device;      /* -1 with host memory */
    char gpu_bus_id[32]; /* "0000:41:00.0" */
    int gpu_turn;        /* 0 .. gpu_turns-1: this rank's place among the ranks of its GPU */
} bench_options_t;

/* One line of the table. Times are microseconds per call, bandwidths GB/s
 * (1e9 bytes); wrong counts are summed over ranks, -1 when not checked. */
typedef struct {
    size_t bytes;
    size_t count;
    hora_dtype_t dtype;
    hora_op_t op;
    double oop_time_us, oop_algbw, oop_busbw;
    long long oop_wrong;
    double ip_time_us, ip_algbw, ip_busbw;
    long long ip_wrong;
    long long out_of_bounds; /* guard bytes overwritten, send elements changed */
    int has_peer;            /* 0: no peer, or it cannot run this row (MPI has no f16/bf16 type; count > INT_MAX) */
    double peer_time_us;
    /* mpi, nccl: the peer's busbw; copy: bytes / time (a copy has no bus
     * factor), the device's speed of moving the row's bytes. */
    double peer_bw;
    double ratio; /* peer_time / ip_time (= ip_busbw / peer busbw); NAN when undefined */
} bench_row_t;

/* The command line (bench_allreduce_options.c, through bench_cli.h). */
bench_cli_result_t bench_options_parse(int argc, char **argv, bench_options_t *options);
/* --transport: sets the runtime's kill switches before hora_init; 0 or -1. */
int bench_transport_select(const char *transport);

/* "mpi", "nccl", "copy", "none" (the --baseline names). */
const char *bench_peer_name(bench_peer_t peer);

/* --memory cuda's set-up (bench_cuda_setup.c). Before hora_init, on every
 * rank: set HORA_CUDA_POOL_BYTES (unless the caller did) to hold the send
 * and recv buffers, and make this rank's GPU current. Returns 0, or -1 with
 * the reason in why (BENCH_WHY_BYTES); the run goes on to hora_init either
 * way, so that the ranks can agree to stop. */
int bench_cuda_prepare(bench_options_t *options, char *why, size_t why_len);
/* After hora_init, collective: agree that every rank's GPU works for hora
 * (prepared is bench_cuda_prepare's result on this rank), find the ranks
 * that share a GPU, choose the peer (options->peer, peer_note, peer_detail),
 * and load NCCL when it is the peer. Returns 0, or -1 on every rank with
 * the first failing rank's reason in why. */
int bench_cuda_setup(bench_options_t *options, int prepared, char *why, size_t why_len);

/* Rank 0 only, except bench_report_header, which is collective (it gathers
 * every rank's pid and host). */
void bench_report_header(const bench_options_t *options, int rank, int nranks);
void bench_report_row(const bench_options_t *options, const bench_row_t *row);
/* Prints the footer; returns 1 when a result was wrong or written out of
 * bounds, else 0. */
int bench_report_footer(const bench_options_t *options, const bench_row_t *rows, size_t row_count);
/* The rows as a JSON array, one object per row. */
void bench_report_json(bench_json_t *json, const bench_options_t *options, const bench_row_t *rows, size_t row_count,
                       int nranks);
/* --plot through gnuplot; a missing or failing gnuplot is only a warning.
 * Rows come grouped by (type, op), types outer, one row per size. */
void bench_report_plot(const bench_options_t *options, const bench_row_t *rows, size_t row_count, const size_t *sizes,
                       size_t size_count, int nranks);

#endif /* BENCH_ALLREDUCE_H */
