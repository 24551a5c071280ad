/*
 * bench_common.h - helpers shared by hora's runtime benchmarks (the ones
 * that link libhora and MPI): fp16/bf16 rounding, hora -> MPI type and op
 * mapping, the launcher's local rank, one verdict for all ranks. The
 * command line and the output of every benchmark are bench_cli.h's and
 * bench_output.h's.
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

#include "bench_cli.h"
#include "bench_output.h"
#include "hora.h"

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

#endif /* BENCH_COMMON_H */
