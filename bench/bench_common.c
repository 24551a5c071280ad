/*
 * bench_common.c - helpers shared by hora's benchmarks (see bench_common.h).
 *
 * Build: compiled into each hora-bench-* executable (bench/meson.build).
 */
#include "bench_common.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint16_t bench_f16_from_f32(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof(bits));
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t exponent = (bits >> 23) & 0xffu;
    uint32_t mantissa = bits & 0x7fffffu;

    if (exponent == 0xffu) /* inf, or NaN kept quiet (payload bits may all be low) */
        return (uint16_t)(sign | 0x7c00u | (mantissa ? 0x200u | (mantissa >> 13) : 0u));

    /* Rebias 127 -> 15. */
    int32_t half_exponent = (int32_t)exponent - 127 + 15;
    if (half_exponent >= 31) return (uint16_t)(sign | 0x7c00u);
    if (half_exponent <= 0) {
        /* Subnormal (or zero) in binary16: units of 2^-24. The full 24-bit
         * significand times 2^(exponent - 150) equals significand >> shift
         * units of 2^-24 with shift = 14 - half_exponent. */
        if (half_exponent < -10) return sign; /* below half the smallest subnormal */
        uint32_t significand = mantissa | 0x800000u;
        uint32_t shift = (uint32_t)(14 - half_exponent);
        uint32_t result = significand >> shift;
        uint32_t rest = significand & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        if (rest > halfway || (rest == halfway && (result & 1u))) result++;
        return (uint16_t)(sign | result);
    }
    uint32_t result = ((uint32_t)half_exponent << 10) | (mantissa >> 13);
    uint32_t rest = mantissa & 0x1fffu;
    /* A carry out of the mantissa bumps the exponent, up to infinity: right. */
    if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) result++;
    return (uint16_t)(sign | result);
}

uint16_t bench_bf16_from_f32(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof(bits));
    if ((bits & 0x7fffffffu) > 0x7f800000u) /* NaN: truncating could make it inf */
        return (uint16_t)((bits >> 16) | 0x40u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

MPI_Datatype bench_mpi_datatype(hora_dtype_t dtype)
{
    switch (dtype) {
    case HORA_DTYPE_F32: return MPI_FLOAT;
    case HORA_DTYPE_F64: return MPI_DOUBLE;
    case HORA_DTYPE_I32: return MPI_INT32_T;
    case HORA_DTYPE_I64: return MPI_INT64_T;
    case HORA_DTYPE_U8: return MPI_UINT8_T;
    case HORA_DTYPE_I8: return MPI_INT8_T;
    case HORA_DTYPE_I16: return MPI_INT16_T;
    case HORA_DTYPE_U16: return MPI_UINT16_T;
    case HORA_DTYPE_BOOL: /* MPI_C_BOOL has no SUM/MIN/MAX/PROD (only the logical ops) */
    case HORA_DTYPE_F16:
    case HORA_DTYPE_BF16:
    case HORA_DTYPE_COUNT: break;
    }
    return MPI_DATATYPE_NULL;
}

MPI_Op bench_mpi_op(hora_op_t op)
{
    switch (op) {
    case HORA_OP_SUM:
    case HORA_OP_AVG: return MPI_SUM;
    case HORA_OP_MIN: return MPI_MIN;
    case HORA_OP_MAX: return MPI_MAX;
    case HORA_OP_PROD: return MPI_PROD;
    case HORA_OP_COUNT:
    case HORA_OP_ADASUM: break; /* not element-wise: the benchmarks do not run it */
    }
    return MPI_OP_NULL;
}

double bench_allreduce_bus_factor(int nranks) { return nranks > 0 ? 2.0 * (nranks - 1) / nranks : 0.0; }

int bench_launcher_local_rank(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
                                        "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        long rank;
        const char *text = getenv(names[i]);
        if (text != NULL && bench_int_parse(text, 0, INT_MAX, &rank) == 0) return (int)rank;
    }
    return -1;
}

int bench_all_ok(int ok, char *why, size_t len)
{
    int rank = 0, first_failed = INT_MAX;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int mine = ok ? INT_MAX : rank;
    MPI_Allreduce(&mine, &first_failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first_failed == INT_MAX) return 1;
    /* Every rank passes the same byte count to the broadcast. */
    char message[BENCH_WHY_BYTES];
    if (rank == first_failed) snprintf(message, sizeof(message), "rank %d: %s", rank, why);
    MPI_Bcast(message, (int)sizeof(message), MPI_CHAR, first_failed, MPI_COMM_WORLD);
    message[sizeof(message) - 1] = '\0';
    snprintf(why, len, "%s", message);
    return 0;
}
