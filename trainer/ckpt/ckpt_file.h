/*
 * ckpt_file.h - the checkpoint file: a header, a table of named sections
 * and their bytes, a CRC32C (data/crc32c.h) per section and one over the
 * header and table. What the sections hold is checkpoint.h's business; this
 * file only writes, finds, reads and verifies them. The byte layout is
 * documented in CHECKPOINT.md next to this file.
 *
 * Errors set libhora-base's message (base/status.h), naming the file, the
 * section and the offset ("ckpt-000120.hckpt: section 'params': offset
 * 4096: CRC32C 0x1234abcd, stored 0x89ab0123 (1048576 bytes)").
 */
#ifndef TR_CKPT_FILE_H
#define TR_CKPT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Every checkpoint function (checkpoint.c, ckpt_desc.c, ckpt_writer.c too)
 * reports a failure through libhora-base: a status, and the message in
 * status_message(), "PATH: section 'S': offset N: what" where the place is
 * known (status_at). None prints. */

#define TR_CKPT_MAGIC "HORACKPT" /* 8 bytes, no terminator in the file */
#define TR_CKPT_VERSION 1u
#define TR_CKPT_MAX_SECTIONS 16
#define TR_CKPT_NAME_BYTES 24 /* a section name, NUL-padded: 1 to 23 printable ASCII characters, no space */
#define TR_CKPT_ALIGN 64      /* every section starts at a multiple of this */

typedef struct {
    char name[TR_CKPT_NAME_BYTES];
    const void *data; /* writer: the bytes; reader: NULL */
    uint64_t bytes;
    uint64_t offset; /* in the file (set by the writer and the reader) */
    uint32_t crc;    /* CRC32C of the bytes (set by the writer and the reader) */
} tr_ckpt_section_t;

/* Write a whole checkpoint file to fd (open for writing, at offset 0, empty):
 * header, table, then each section's bytes at the next TR_CKPT_ALIGN
 * multiple, sequentially with write(2) (short writes and EINTR retried; fd
 * need not be seekable). sections[i].crc and .offset are filled in. No fsync
 * (the caller decides). HORA_ERR_INVALID_ARG (bad or duplicate name, too
 * many sections, NULL data with bytes > 0),
 * HORA_ERR_SYSTEM (write failed: the message has strerror, e.g. "No space
 * left on device", and what was being written). path is for messages. */
hora_status_t tr_ckpt_write_fd(int fd, const char *path, tr_ckpt_section_t *sections, int count);

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
hora_status_t tr_ckpt_open(const char *path, tr_ckpt_file_t *f);
void tr_ckpt_close(tr_ckpt_file_t *f);

/* The section called name, or NULL. */
const tr_ckpt_section_t *tr_ckpt_find(const tr_ckpt_file_t *f, const char *name);
/* The section name, which must be there and (want_bytes != TR_CKPT_ANY_BYTES)
 * hold want_bytes (what the model section says); else NULL with
 * HORA_ERR_CORRUPT's message, "PATH: no 'params' section" or "PATH: section
 * 'params': offset N: B bytes, the model section says W". hora-train and
 * hora-ckpt both ask through this, so they say the same. */
#define TR_CKPT_ANY_BYTES UINT64_MAX
const tr_ckpt_section_t *tr_ckpt_expect(const tr_ckpt_file_t *f, const char *name, uint64_t want_bytes);

/* Read section s whole into buf (s->bytes bytes) and check its CRC.
 * HORA_ERR_CORRUPT names the section and its offset. */
hora_status_t tr_ckpt_read(const tr_ckpt_file_t *f, const tr_ckpt_section_t *s, void *buf);
/* Read section s into a fresh malloc'd buffer (one extra NUL byte after the
 * data, so a text section is a C string); *out NULL on failure. */
hora_status_t tr_ckpt_read_alloc(const tr_ckpt_file_t *f, const tr_ckpt_section_t *s, void **out);

/* Check every section's CRC, streaming (no whole-section buffer), then that
 * the padding between sections is zero (no CRC covers it); the first bad one
 * is the error. */
hora_status_t tr_ckpt_verify(const tr_ckpt_file_t *f);

#endif
