/* engine_k.h - what the two engines (engine_host.c, engine_cuda.c) share
 * to call the kernels: hora's dtypes are the kernels' (checked here), and
 * the kernels' op of a reduction op. Included by those two files only: the
 * rest of coll/ reaches the kernels through an engine. */
#ifndef HORA_COLL_ENGINE_K_H
#define HORA_COLL_ENGINE_K_H

#include "hora.h"
#include "k_cpu.h"

_Static_assert((int)HORA_DTYPE_F32 == (int)K_DTYPE_F32 && (int)HORA_DTYPE_F16 == (int)K_DTYPE_F16 &&
                   (int)HORA_DTYPE_BF16 == (int)K_DTYPE_BF16 && (int)HORA_DTYPE_F64 == (int)K_DTYPE_F64 &&
                   (int)HORA_DTYPE_I32 == (int)K_DTYPE_I32 && (int)HORA_DTYPE_I64 == (int)K_DTYPE_I64 &&
                   (int)HORA_DTYPE_U8 == (int)K_DTYPE_U8 && (int)HORA_DTYPE_I8 == (int)K_DTYPE_I8 &&
                   (int)HORA_DTYPE_I16 == (int)K_DTYPE_I16 && (int)HORA_DTYPE_U16 == (int)K_DTYPE_U16 &&
                   (int)HORA_DTYPE_BOOL == (int)K_DTYPE_BOOL && (int)HORA_DTYPE_COUNT == (int)K_DTYPE_COUNT,
               "hora and kernel dtypes must agree");

/* The kernels' op of a reduction op (AVG: its sum). */
static inline k_op_t coll_engine_k_op(hora_op_t op)
{
    switch (op) {
    case HORA_OP_MIN: return K_OP_MIN;
    case HORA_OP_MAX: return K_OP_MAX;
    case HORA_OP_PROD: return K_OP_PROD;
    default: return K_OP_SUM; /* SUM, and AVG's sum */
    }
}

#endif
