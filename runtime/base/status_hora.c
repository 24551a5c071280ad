/* status_hora.c - what libhora adds to base/status.c: the hora.h functions
 * that name statuses, dtypes and ops, hora_last_error(), and MPI error
 * translation. Built into hora_core only (base/status.c, in libhora-base, has
 * no hora_* symbol and no MPI). */
#include "base/status.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *hora_status_string(hora_status_t status) { return status_name(status); }

static const char *const dtype_names[HORA_DTYPE_COUNT] = {"f32", "f16", "bf16", "f64", "i32", "i64",
                                                          "u8",  "i8",  "i16",  "u16", "bool"};
static const size_t dtype_sizes[HORA_DTYPE_COUNT] = {4, 2, 2, 8, 4, 8, 1, 1, 2, 2, 1};
static const char *const op_names[HORA_OP_COUNT] = {"sum", "avg", "min", "max", "prod"};

const char *hora_dtype_name(hora_dtype_t dtype)
{
    return (unsigned)dtype < HORA_DTYPE_COUNT ? dtype_names[dtype] : "invalid";
}

size_t hora_dtype_size(hora_dtype_t dtype) { return (unsigned)dtype < HORA_DTYPE_COUNT ? dtype_sizes[dtype] : 0; }

const char *hora_op_name(hora_op_t op)
{
    if (op == HORA_OP_ADASUM) return "adasum";
    return (unsigned)op < HORA_OP_COUNT ? op_names[op] : "invalid";
}

int hora_dtype_parse(const char *name)
{
    static const struct {
        const char *alias;
        hora_dtype_t dtype;
    } aliases[] = {
        {"float", HORA_DTYPE_F32},   {"float32", HORA_DTYPE_F32},   {"half", HORA_DTYPE_F16},
        {"float16", HORA_DTYPE_F16}, {"bfloat16", HORA_DTYPE_BF16}, {"double", HORA_DTYPE_F64},
        {"float64", HORA_DTYPE_F64}, {"int", HORA_DTYPE_I32},       {"int32", HORA_DTYPE_I32},
        {"int64", HORA_DTYPE_I64},   {"uint8", HORA_DTYPE_U8},      {"int8", HORA_DTYPE_I8},
        {"int16", HORA_DTYPE_I16},   {"uint16", HORA_DTYPE_U16},    {"boolean", HORA_DTYPE_BOOL},
    };
    if (!name) return -1;
    for (int i = 0; i < HORA_DTYPE_COUNT; i++)
        if (!strcasecmp(name, dtype_names[i])) return i;
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (!strcasecmp(name, aliases[i].alias)) return (int)aliases[i].dtype;
    return -1;
}

int hora_op_parse(const char *name)
{
    if (!name) return -1;
    for (int i = 0; i < HORA_OP_COUNT; i++)
        if (!strcasecmp(name, op_names[i])) return i;
    if (!strcasecmp(name, "mean") || !strcasecmp(name, "average")) return HORA_OP_AVG;
    if (!strcasecmp(name, "product")) return HORA_OP_PROD;
    if (!strcasecmp(name, "adasum")) return HORA_OP_ADASUM;
    return -1;
}

const char *hora_last_error(void) { return status_message(); }

hora_status_t status_mpi(int mpi_err, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_err, text, &len) != MPI_SUCCESS) snprintf(text, sizeof(text), "code %d", mpi_err);
    return status_fail(HORA_ERR_MPI, "%s failed: %s", what, text);
}
