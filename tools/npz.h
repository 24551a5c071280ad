/*
 * npz.h - NumPy's files for tools/hora-ckpt: .npy (format 1.0, C order,
 * '<f4' or '<i8') read and written, and .npz, a zip of .npy files stored
 * uncompressed, each with its CRC-32 (zlib), written. What numpy.load reads;
 * no ZIP64, so an archive stays under 4 GiB and 65535 entries.
 *
 * Only little-endian hosts (the arrays are written as they lie in memory).
 */
#ifndef HORA_TOOLS_NPZ_H
#define HORA_TOOLS_NPZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"

#define NPZ_MAX_DIMS 8

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npz.c writes arrays as they are in memory: '<' dtypes");

typedef enum { NPZ_F32 = 0, NPZ_I64 = 1 } npz_dtype_t;

/* An array read from a .npy file (npz_read_f32). */
typedef struct {
    int ndim;
    int64_t shape[NPZ_MAX_DIMS];
    size_t count;
    float *data; /* malloc'd */
} npz_array_t;

/* Read path: a version 1.0 (or 2.0) .npy of '<f4' in C order.
 *
 * Every function here returns HORA_OK, or a failure (HORA_ERR_SYSTEM,
 * HORA_ERR_CORRUPT, HORA_ERR_NO_MEMORY, HORA_ERR_INVALID_ARG; npz_open:
 * NULL) with the message, naming the file ("PATH: what"), in libhora-base's
 * status_message(); nothing prints. */
hora_status_t npz_read_f32(const char *path, npz_array_t *out);
void npz_array_free(npz_array_t *a);

/* Write one .npy file. */
hora_status_t npz_write_npy(const char *path, npz_dtype_t dtype, int ndim, const int64_t *shape, const void *data);

/* An .npz being written (entries in the order added). */
typedef struct npz_writer npz_writer_t;

npz_writer_t *npz_open(const char *path);
/* Add NAME.npy holding the array (shape dims[0..ndim), ndim 0: a scalar). */
hora_status_t npz_add(npz_writer_t *w, const char *name, npz_dtype_t dtype, int ndim, const int64_t *shape,
                      const void *data);
/* Write the central directory and close. After a failure anywhere the file
 * is removed. Frees w either way. */
hora_status_t npz_close(npz_writer_t *w);
/* Give up: close and remove the file. */
void npz_abort(npz_writer_t *w);

#endif
