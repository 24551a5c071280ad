/*
 * bench_common.h - helpers shared by hora's benchmarks: size arguments with
 * K/M/G suffixes, fp16/bf16 rounding, hora -> MPI type and op mapping, a
 * few process-level utilities, and the start of a --plot gnuplot script.
 *
 * bench/ sees the runtime through its public header only (hora.h) plus MPI;
 * nothing here may include a runtime/ internal header.
 *
 * Build: compiled into each hora-bench-* executable (bench/meson.build).
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <mpi.h>

#include "hora.h"

/* Parse a byte count: decimal digits with an optional binary suffix K, M or
 * G (case-insensitive, 1K = 1024), optionally followed by "B" ("64M", "4KB",
 * "1000"). Returns 0 and sets *bytes, or -1 when the text is not a size or
 * overflows size_t. */
int bench_size_parse(const char *text, size_t *bytes);

/* Shortest exact label for a byte count: "512", "4K", "64M", "1G", "3000". */
void bench_size_label(size_t bytes, char *buf, size_t len);

/* Parse a decimal integer in [min, max], the whole string. Returns 0 or -1. */
int bench_int_parse(const char *text, long min, long max, long *value);

/* fp32 -> IEEE binary16 / bfloat16 bits, rounding to nearest even; NaN stays
 * NaN, values past the largest finite become infinities. */
uint16_t bench_f16_from_f32(float value);
uint16_t bench_bf16_from_f32(float value);

/* The MPI datatype of a hora dtype; MPI_DATATYPE_NULL for f16 and bf16, which
 * MPI does not define. */
MPI_Datatype bench_mpi_datatype(hora_dtype_t dtype);
/* The MPI op closest to a hora op; AVG maps to MPI_SUM (MPI has no average:
 * the division by the rank count is a local pass the baseline leaves out). */
MPI_Op bench_mpi_op(hora_op_t op);

/* busbw / algbw for an all-reduce over nranks: 2(n-1)/n, the fraction of the
 * data each rank's link carries in a ring (0 for one rank). */
double bench_allreduce_bus_factor(int nranks);

/* This process's rank as the launcher announces it in the environment
 * (Open MPI, MPICH/PMI, PMIx, Slurm), 0 when none does. Lets a benchmark
 * print a usage error once rather than once per rank, before MPI is up. */
int bench_launcher_rank(void);

/* This process's rank among the processes of its host as the launcher
 * announces it (Open MPI, MPICH/Hydra, MVAPICH, Slurm), -1 when none does.
 * Lets a benchmark pick its GPU before hora_init, which binds the runtime to
 * the device current at that moment. */
int bench_launcher_local_rank(void);

/* Collective over MPI_COMM_WORLD: 1 when ok is true on every rank. Otherwise
 * 0, and why (len bytes, len <= BENCH_WHY_BYTES) receives, on every rank,
 * "rank R: " followed by the why of the lowest rank whose ok was false (that
 * rank filled its why before the call). One message for the whole job instead
 * of one per rank, and no rank goes on alone into a collective the others
 * skip. */
#define BENCH_WHY_BYTES 512
int bench_all_ok(int ok, char *why, size_t len);

/* 1 if an executable called name lies on $PATH. */
int bench_program_on_path(const char *name);

/* text as a gnuplot single-quoted string: everything but ' is literal there,
 * and ' is written twice. */
void bench_gnuplot_quote(FILE *gp, const char *text);
/* The first lines of a gnuplot script that draws a width x height PNG at
 * png_path: pngcairo (font_size points) when gnuplot has it, else png; and
 * noenhanced text, so titles, labels and keys print literally (enhanced mode
 * would make the underscores of HORA_FUSION_THRESHOLD subscripts). */
void bench_gnuplot_begin(FILE *gp, const char *png_path, int width, int height, int font_size);

#endif /* BENCH_COMMON_H */
