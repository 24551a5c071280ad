/*
 * ckpt_file.h - the checkpoint file: a header, a table of named sections
 * and their bytes, a CRC32C (data/crc32c.h) per section and one over the
 * header and table. What the sections hold is checkpoint.h's business; this
 * file only writes, finds, reads and verifies them. The byte layout is
 * documented in CHECKPOINT.md next to this file.
 *
 * Errors carry a message in the caller's buffer, naming the file, the
 * section and the offset ("ckpt-000120.hckpt: section 'params' at offset
 * 4096 (1048576 bytes): CRC32C 0x1234abcd, stored 0x89ab0123").
 */
#ifndef TR_CKPT_FILE_H
#define TR_CKPT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "hora.h"

/* Format a message into err (when err_bytes > 0) and return status: how
 * every checkpoint function reports (checkpoint.c, ckpt_writer.c too). */
__attribute__((format(printf, 4, 5)))
hora_status_t tr_ckpt_fail(hora_status_t status, char *err, size_t err_bytes, const char *fmt, ...);

#define TR_CKPT_MAGIC "HORACKPT" /* 8 bytes, no terminator in the file */
#define TR_CKPT_VERSION 1u
#define TR_CKPT_MAX_SECTIONS 16
#define TR_CKPT_NAME_BYTES 24   /* a section name, NUL-padded: 1 to 23 printable ASCII characters, no space */
#define TR_CKPT_ALIGN 64        /* every section starts at a multiple of this */

typedef struct {
    char name[TR_CKPT_NAME_BYTES];
    const void *data;   /* writer: the bytes; reader: NULL */
    uint64_t bytes;
    uint64_t offset;    /* in the file (set by the writer and the reader) */
    uint32_t crc;       /* CRC32C of the bytes (set by the writer and the reader) */
} tr_ckpt_section_t;

/* Write a whole checkpoint file to fd (open for writing, at offset 0, empty):
 * header, table, then each section's bytes at the next TR_CKPT_ALIGN
 * multiple, sequentially with write(2) (short writes and EINTR retried; fd
 * need not be seekable). sections[i].crc and .offset are filled in. No fsync
 * (the caller decides). HORA_ERR_INVALID_ARG (bad or duplicate name, too
 * many sections, NULL data with bytes > 0),
 * HORA_ERR_SYSTEM (write failed: the message has strerror, e.g. "No space
 * left on device", and what was being written). path is for messages. */
hora_status_t tr_ckpt_write_fd(int fd, const char *path, tr_ckpt_section_t *sections, int count, char *err,
                               size_t err_bytes);

typedef struct {
    char path[4096];
    int fd;
    uint64_t file_bytes;
    uint32_t version;
    int section_count;
    tr_ckpt_section_t sections[TR_CKPT_MAX_SECTIONS];
} tr_ckpt_file_t;

/* Open path and check the header and table: magic, version, header CRC,
 * file_bytes equal to the file's size (a shorter file is "truncated", with
 * both sizes), every section inside the file, at a TR_CKPT_ALIGN multiple,
 * not overlapping, with a unique NUL-terminated name (CHECKPOINT.md lists
 * the checks in order). HORA_ERR_SYSTEM (cannot open/read), HORA_ERR_CORRUPT
 * (anything wrong, with the offset). On failure f holds no open file (fd
 * -1). */
hora_status_t tr_ckpt_open(const char *path, tr_ckpt_file_t *f, char *err, size_t err_bytes);
void tr_ckpt_close(tr_ckpt_file_t *f);

/* The section called name, or NULL. */
const tr_ckpt_section_t *tr_ckpt_find(const tr_ckpt_file_t *f, const char *name);

/* Read section s whole into buf (s->bytes bytes) and check its CRC.
 * HORA_ERR_CORRUPT names the section and its offset. */
hora_status_t tr_ckpt_read(const tr_ckpt_file_t *f, const tr_ckpt_section_t *s, void *buf, char *err,
                           size_t err_bytes);
/* Read section s into a fresh malloc'd buffer (one extra NUL byte after the
 * data, so a text section is a C string); *out NULL on failure. */
hora_status_t tr_ckpt_read_alloc(const tr_ckpt_file_t *f, const tr_ckpt_section_t *s, void **out, char *err,
                                 size_t err_bytes);

/* Check every section's CRC, streaming (no whole-section buffer), then that
 * the padding between sections is zero (no CRC covers it); the first bad one
 * is the error. */
hora_status_t tr_ckpt_verify(const tr_ckpt_file_t *f, char *err, size_t err_bytes);

#endif
