/*
 * gz.c - a file that may be gzip-compressed, through zlib where the build
 * has it, plain files only where not (gz.h).
 */
#include "gz.h"

#include "base/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef HORA_HAVE_ZLIB
#include <zlib.h>
#endif

#define GZ_MAX_READ_BYTES (1u << 30)

#ifdef HORA_HAVE_ZLIB

struct tr_gz {
    gzFile z;
};

hora_status_t tr_gz_open(const char *path, tr_gz_t **out)
{
    tr_gz_t *f = malloc(sizeof(*f));
    if (!f) return status_at(HORA_ERR_NO_MEMORY, STATUS_FILE_AT(path, 0), "out of memory");
    f->z = gzopen(path, "rb");
    if (!f->z) {
        free(f);
        return status_at(HORA_ERR_SYSTEM, STATUS_FILE_AT(path, 0), "cannot open: %s", strerror(errno));
    }
    *out = f;
    return HORA_OK;
}

hora_status_t tr_gz_read(tr_gz_t *f, void *buf, size_t bytes, size_t *got)
{
    int n = gzread(f->z, buf, (unsigned)(bytes < GZ_MAX_READ_BYTES ? bytes : GZ_MAX_READ_BYTES));
    if (n < 0) {
        int zerr;
        const char *msg = gzerror(f->z, &zerr);
        if (zerr == Z_ERRNO) return status_set(HORA_ERR_SYSTEM, "%s", strerror(errno));
        return status_set(HORA_ERR_CORRUPT, "%s", msg);
    }
    *got = (size_t)n;
    return HORA_OK;
}

void tr_gz_close(tr_gz_t *f)
{
    if (!f) return;
    gzclose(f->z);
    free(f);
}

#else /* !HORA_HAVE_ZLIB */

struct tr_gz {
    FILE *file;
};

hora_status_t tr_gz_open(const char *path, tr_gz_t **out)
{
    tr_gz_t *f = malloc(sizeof(*f));
    if (!f) return status_at(HORA_ERR_NO_MEMORY, STATUS_FILE_AT(path, 0), "out of memory");
    f->file = fopen(path, "rb");
    if (!f->file) {
        free(f);
        return status_at(HORA_ERR_SYSTEM, STATUS_FILE_AT(path, 0), "cannot open: %s", strerror(errno));
    }
    unsigned char magic[2];
    size_t n = fread(magic, 1, sizeof(magic), f->file);
    if (n == sizeof(magic) && magic[0] == 0x1f && magic[1] == 0x8b) {
        fclose(f->file);
        free(f);
        return status_at(HORA_ERR_UNSUPPORTED, STATUS_FILE_AT(path, 0),
                         "gzip-compressed, but this build has no zlib (meson -Dzlib=disabled or "
                         "zlib not found): gunzip the file or rebuild with zlib");
    }
    rewind(f->file);
    *out = f;
    return HORA_OK;
}

hora_status_t tr_gz_read(tr_gz_t *f, void *buf, size_t bytes, size_t *got)
{
    size_t n = fread(buf, 1, bytes < GZ_MAX_READ_BYTES ? bytes : GZ_MAX_READ_BYTES, f->file);
    if (n == 0 && ferror(f->file)) {
        return status_set(HORA_ERR_SYSTEM, "%s", strerror(errno));
    }
    *got = n;
    return HORA_OK;
}

void tr_gz_close(tr_gz_t *f)
{
    if (!f) return;
    fclose(f->file);
    free(f);
}

#endif
