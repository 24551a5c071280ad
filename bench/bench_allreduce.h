/*
 * bench_allreduce.h - what hora-bench-allreduce's measuring part
 * (bench_allreduce.c) hands to its reporting part (bench_report.c): the
 * options of the run and one measured row per (type, op, size).
 *
 * Build: part of hora-bench-allreduce (bench/meson.build).
 */
#ifndef BENCH_ALLREDUCE_H
#define BENCH_ALLREDUCE_H

#include <stddef.h>
#include <stdio.h>

#include "hora.h"

#define BENCH_NAME "hora-bench-allreduce"

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
    int baseline_mpi;
    const char *json_path; /* NULL: no JSON */
    const char *plot_path; /* NULL: no plot */
    const char *transport; /* "shm", "mpi" or "auto" */
    int print_config;
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
    int has_mpi;             /* 0: no baseline asked, no MPI type, or count > INT_MAX */
    double mpi_time_us, mpi_busbw;
    double ratio; /* mpi_time / ip_time = ip_busbw / mpi_busbw; NAN when undefined */
} bench_row_t;

/* Rank 0 only, except bench_report_header, which is collective (it gathers
 * every rank's pid and host). */
void bench_report_header(const bench_options_t *options, int rank, int nranks);
void bench_report_row(const bench_options_t *options, const bench_row_t *row);
/* Prints the footer; returns 1 when a result was wrong or written out of
 * bounds, else 0. */
int bench_report_footer(const bench_options_t *options, const bench_row_t *rows, size_t row_count);
/* Writes the rows as a JSON array; returns 0 or -1 on a write error. */
int bench_report_json(FILE *out, const bench_row_t *rows, size_t row_count, int nranks);
/* --plot through gnuplot; a missing or failing gnuplot is only a warning.
 * Rows come grouped by (type, op), types outer, one row per size. */
void bench_report_plot(const bench_options_t *options, const bench_row_t *rows, size_t row_count,
                       const size_t *sizes, size_t size_count, int nranks);

#endif /* BENCH_ALLREDUCE_H */
