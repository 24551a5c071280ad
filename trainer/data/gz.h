/*
 * gz.h - reading a file that may be gzip-compressed (IDX files ship as .gz).
 *
 * With zlib (HORA_HAVE_ZLIB) gzread inflates a gzip file and passes a plain
 * one through. Without it a plain file is read as it is, and one that starts
 * with gzip's magic bytes (1f 8b) is refused at open: HORA_ERR_UNSUPPORTED,
 * "PATH: offset 0: gzip-compressed, but this build has no zlib (...)".
 * Messages go to base/status.h's store (status_message()).
 */
#ifndef TR_DATA_GZ_H
#define TR_DATA_GZ_H

#include <stddef.h>

#include "hora.h"

typedef struct tr_gz tr_gz_t;

/* Open path for reading. HORA_ERR_SYSTEM (cannot open, errno's reason) or
 * HORA_ERR_UNSUPPORTED (gzip without zlib), the message set; *out only on
 * success. */
hora_status_t tr_gz_open(const char *path, tr_gz_t **out);
/* Read up to bytes (at most 1 GiB) of the decompressed stream: *got is how
 * many, 0 at its end. A failure is HORA_ERR_SYSTEM (errno) or
 * HORA_ERR_CORRUPT (a damaged gzip stream), the message saying which,
 * without a place (the caller knows the offset, and wraps it:
 * status_at(s, STATUS_FILE_AT(path, offset), "read failed: %s",
 * status_message())). */
hora_status_t tr_gz_read(tr_gz_t *f, void *buf, size_t bytes, size_t *got);
void tr_gz_close(tr_gz_t *f);

#endif
