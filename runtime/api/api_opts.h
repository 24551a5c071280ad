/* api_opts.h - a caller's hora_opts_t as this libhora's, by hora.h's
 * struct_bytes rule (the fields inside the caller's struct_bytes are read,
 * the others take their HORA_OPTS_INIT values). */
#ifndef HORA_API_OPTS_H
#define HORA_API_OPTS_H

#include "hora.h"

/* Member `index` of the caller's options (an array of them, strided by
 * opts[0].struct_bytes; index 0 for a single one) into *out, complete, with
 * out->struct_bytes = sizeof(hora_opts_t). opts NULL gives HORA_OPTS_INIT.
 * HORA_ERR_INVALID_ARG, naming what and name, for a struct_bytes hora.h's
 * rule refuses, or a member whose struct_bytes differs from opts[0]'s;
 * *out is set only on success. */
hora_status_t api_opts_read(const char *what, const char *name, const hora_opts_t *opts, int index, hora_opts_t *out);

#endif
