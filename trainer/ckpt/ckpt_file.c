/*
 * ckpt_file.c - the checkpoint file (ckpt_file.h; the bytes: CHECKPOINT.md).
 *
 * The writer lays out header, table and sections in one pass and writes them
 * sequentially with write(2), so fd may be anything that takes bytes (a
 * regular file, /dev/full in the tests). Every integer is encoded byte by
 * byte, little-endian, whatever the host.
 *
 * The reader trusts nothing: the table is read only once the header says it
 * fits in the file, the header CRC (over the header and the whole table) is
 * checked before any table field is used, and every section must lie inside
 * the file, start at a TR_CKPT_ALIGN multiple, overlap no other and carry a
 * unique NUL-terminated name. Section data are read with pread, so the open
 * file can be shared by threads.
 */
#define _GNU_SOURCE
#include "ckpt_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "le.h"

#define HEADER_BYTES 64
#define HEADER_CRC_OFFSET 60 /* the CRC covers bytes [0, 60) and then the table */
#define ENTRY_BYTES 64
#define IO_CHUNK_BYTES (1u << 20) /* verify's streaming buffer; the largest single read/write */

_Static_assert(TR_CKPT_ALIGN >= HEADER_BYTES && TR_CKPT_ALIGN % 8 == 0, "sections must not share the header");

static uint64_t align_up(uint64_t v) { return (v + TR_CKPT_ALIGN - 1) / TR_CKPT_ALIGN * TR_CKPT_ALIGN; }

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

/* A name as the table holds it: 1..23 printable ASCII characters, no
 * spaces (so it can stand in a line of text), NUL-terminated and padded. */
static int name_valid(const char name[TR_CKPT_NAME_BYTES])
{
    size_t n = strnlen(name, TR_CKPT_NAME_BYTES);
    if (n == 0 || n == TR_CKPT_NAME_BYTES) return 0;
    for (size_t i = 0; i < n; i++)
        if (name[i] <= ' ' || name[i] > '~') return 0;
    return 1;
}

/* ---- writing ---- */

/* Write all of data (short writes and EINTR retried). 0, or -1 with errno. */
static int write_all(int fd, const void *data, uint64_t bytes)
{
    const uint8_t *p = data;
    while (bytes > 0) {
        size_t n = bytes > IO_CHUNK_BYTES ? IO_CHUNK_BYTES : (size_t)bytes;
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (w == 0) { /* a write that takes nothing and says no error: treat as a full device */
            errno = ENOSPC;
            return -1;
        }
        p += w;
        bytes -= (uint64_t)w;
    }
    return 0;
}

hora_status_t tr_ckpt_write_fd(int fd, const char *path, tr_ckpt_section_t *sections, int count)
{
    static const uint8_t zeros[TR_CKPT_ALIGN];
    if (!path) path = "(checkpoint)";
    if (count < 0 || count > TR_CKPT_MAX_SECTIONS || (count > 0 && !sections))
        return status_set(HORA_ERR_INVALID_ARG, "%s: %d sections (at most %d)", path, count, TR_CKPT_MAX_SECTIONS);
    for (int i = 0; i < count; i++) {
        if (!name_valid(sections[i].name))
            return status_set(HORA_ERR_INVALID_ARG,
                              "%s: section %d: bad name (1 to %d printable characters, no spaces)", path, i,
                              TR_CKPT_NAME_BYTES - 1);
        if (!sections[i].data && sections[i].bytes > 0)
            return status_set(HORA_ERR_INVALID_ARG, "%s: section '%s': no data for %" PRIu64 " bytes", path,
                              sections[i].name, sections[i].bytes);
        for (int j = 0; j < i; j++)
            if (strncmp(sections[i].name, sections[j].name, TR_CKPT_NAME_BYTES) == 0)
                return status_set(HORA_ERR_INVALID_ARG, "%s: two sections called '%s'", path, sections[i].name);
    }

    /* Layout: header, table, then each section at the next multiple. */
    uint64_t table_bytes = (uint64_t)count * ENTRY_BYTES;
    uint64_t end = HEADER_BYTES + table_bytes;
    for (int i = 0; i < count; i++) {
        sections[i].offset = align_up(end);
        sections[i].crc = tr_crc32c(0, sections[i].data, (size_t)sections[i].bytes);
        end = sections[i].offset + sections[i].bytes;
    }

    uint8_t head[HEADER_BYTES + TR_CKPT_MAX_SECTIONS * ENTRY_BYTES];
    memset(head, 0, sizeof(head));
    memcpy(head, TR_CKPT_MAGIC, 8);
    tr_le_put_u32(head + 8, TR_CKPT_VERSION);
    tr_le_put_u32(head + 12, (uint32_t)count);
    tr_le_put_u64(head + 16, end);          /* file_bytes */
    tr_le_put_u64(head + 24, HEADER_BYTES); /* table_offset */
    tr_le_put_u64(head + 32, table_bytes);
    for (int i = 0; i < count; i++) {
        uint8_t *e = head + HEADER_BYTES + (size_t)i * ENTRY_BYTES;
        strncpy((char *)e, sections[i].name, TR_CKPT_NAME_BYTES); /* NUL-padded */
        tr_le_put_u64(e + 24, sections[i].offset);
        tr_le_put_u64(e + 32, sections[i].bytes);
        tr_le_put_u32(e + 40, sections[i].crc);
    }
    uint32_t crc = tr_crc32c(0, head, HEADER_CRC_OFFSET);
    crc = tr_crc32c(crc, head + HEADER_BYTES, (size_t)table_bytes);
    tr_le_put_u32(head + HEADER_CRC_OFFSET, crc);

    if (write_all(fd, head, HEADER_BYTES + table_bytes) != 0)
        return status_set(HORA_ERR_SYSTEM, "%s: writing the header and section table at offset 0: %s", path,
                          strerror(errno));
    uint64_t at = HEADER_BYTES + table_bytes;
    for (int i = 0; i < count; i++) {
        const tr_ckpt_section_t *s = &sections[i];
        if (write_all(fd, zeros, s->offset - at) != 0 || write_all(fd, s->data, s->bytes) != 0)
            return status_at(HORA_ERR_SYSTEM, STATUS_SECTION_AT(path, s->name, s->offset),
                             "writing %" PRIu64 " bytes: %s", s->bytes, strerror(errno));
        at = s->offset + s->bytes;
    }
    return HORA_OK;
}

/* ---- reading ---- */

/* Read bytes at offset (EINTR and short reads retried). 0; 1 at end of
 * file before bytes; -1 with errno. */
static int pread_all(int fd, void *buf, uint64_t bytes, uint64_t offset)
{
    uint8_t *p = buf;
    while (bytes > 0) {
        size_t n = bytes > IO_CHUNK_BYTES ? IO_CHUNK_BYTES : (size_t)bytes;
        ssize_t r = pread(fd, p, n, (off_t)offset);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) return 1;
        p += r;
        bytes -= (uint64_t)r;
        offset += (uint64_t)r;
    }
    return 0;
}

static int section_by_offset(const void *a, const void *b)
{
    const tr_ckpt_section_t *x = *(const tr_ckpt_section_t *const *)a, *y = *(const tr_ckpt_section_t *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Check the header and table read into head (table_bytes after the
 * header); fill f's sections. */
static hora_status_t table_check(tr_ckpt_file_t *f, const uint8_t *head, uint64_t table_bytes)
{
    const char *path = f->path;
    uint64_t data_begin = HEADER_BYTES + table_bytes;
    const tr_ckpt_section_t *order[TR_CKPT_MAX_SECTIONS];
    for (int i = 0; i < f->section_count; i++) {
        const uint8_t *e = head + HEADER_BYTES + (size_t)i * ENTRY_BYTES;
        uint64_t at = HEADER_BYTES + (uint64_t)i * ENTRY_BYTES;
        tr_ckpt_section_t *s = &f->sections[i];
        memset(s, 0, sizeof(*s));
        memcpy(s->name, e, TR_CKPT_NAME_BYTES);
        size_t n = strnlen(s->name, TR_CKPT_NAME_BYTES);
        if (!name_valid(s->name) || !all_zero(e + n, TR_CKPT_NAME_BYTES - n))
            return status_set(HORA_ERR_CORRUPT,
                              "%s: section table entry %d at offset %" PRIu64 ": bad name (not a NUL-padded name of "
                              "1 to %d printable characters)",
                              path, i, at, TR_CKPT_NAME_BYTES - 1);
        s->offset = tr_le_get_u64(e + 24);
        s->bytes = tr_le_get_u64(e + 32);
        s->crc = tr_le_get_u32(e + 40);
        if (!all_zero(e + 44, 20))
            return status_set(HORA_ERR_CORRUPT,
                              "%s: section '%s' (table entry at offset %" PRIu64 "): reserved bytes are not zero", path,
                              s->name, at);
        if (s->offset % TR_CKPT_ALIGN != 0 || s->offset < data_begin)
            return status_at(HORA_ERR_CORRUPT, STATUS_SECTION_AT(path, s->name, s->offset),
                             "not a multiple of %d after the table (which ends at %" PRIu64 ")", TR_CKPT_ALIGN,
                             data_begin);
        if (s->offset > f->file_bytes || s->bytes > f->file_bytes - s->offset)
            return status_at(HORA_ERR_CORRUPT, STATUS_SECTION_AT(path, s->name, s->offset),
                             "%" PRIu64 " bytes: ends past the end of the file (%" PRIu64 " bytes)", s->bytes,
                             f->file_bytes);
        for (int j = 0; j < i; j++)
            if (strcmp(s->name, f->sections[j].name) == 0)
                return status_set(HORA_ERR_CORRUPT,
                                  "%s: section '%s' (table entry at offset %" PRIu64 "): a second section of that name",
                                  path, s->name, at);
        order[i] = s;
    }
    qsort(order, (size_t)f->section_count, sizeof(order[0]), section_by_offset);
    for (int i = 1; i < f->section_count; i++) {
        const tr_ckpt_section_t *a = order[i - 1], *b = order[i];
        if (a->offset + a->bytes > b->offset)
            return status_set(HORA_ERR_CORRUPT,
                              "%s: section '%s' at offset %" PRIu64 " (%" PRIu64
                              " bytes) overlaps section '%s' at offset "
                              "%" PRIu64,
                              path, a->name, a->offset, a->bytes, b->name, b->offset);
    }
    return HORA_OK;
}

hora_status_t tr_ckpt_open(const char *path, tr_ckpt_file_t *f)
{
    memset(f, 0, sizeof(*f));
    f->fd = -1;
    if (!path || strlen(path) >= sizeof(f->path))
        return status_set(HORA_ERR_INVALID_ARG, "checkpoint path missing or too long");
    snprintf(f->path, sizeof(f->path), "%s", path);

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return status_set(HORA_ERR_SYSTEM, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return status_set(HORA_ERR_SYSTEM, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return status_set(HORA_ERR_SYSTEM, "%s: not a regular file", path);
    }
    uint64_t real_bytes = (uint64_t)st.st_size;
    hora_status_t status = HORA_ERR_CORRUPT;
    uint8_t head[HEADER_BYTES + TR_CKPT_MAX_SECTIONS * ENTRY_BYTES];
    memset(head, 0, sizeof(head));

    uint64_t got = real_bytes < HEADER_BYTES ? real_bytes : HEADER_BYTES;
    int r = pread_all(fd, head, got, 0);
    if (r != 0) {
        status = status_set(r < 0 ? HORA_ERR_SYSTEM : HORA_ERR_CORRUPT, "%s: reading the header: %s", path,
                            r < 0 ? strerror(errno) : "the file shrank while being read");
        goto err_close;
    }
    if (memcmp(head, TR_CKPT_MAGIC, got < 8 ? (size_t)got : 8) != 0) {
        status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(path, 0), "not a hora checkpoint (no \"%s\" magic)", TR_CKPT_MAGIC);
        goto err_close;
    }
    if (real_bytes < HEADER_BYTES) {
        status_set(HORA_ERR_CORRUPT, "%s: truncated: the file has %" PRIu64 " bytes, the header alone %d", path,
                   real_bytes, HEADER_BYTES);
        goto err_close;
    }
    f->version = tr_le_get_u32(head + 8);
    uint32_t count = tr_le_get_u32(head + 12);
    f->file_bytes = tr_le_get_u64(head + 16);
    uint64_t table_offset = tr_le_get_u64(head + 24), table_bytes = tr_le_get_u64(head + 32);
    if (f->version != TR_CKPT_VERSION) {
        status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(path, 8), "header: format version %" PRIu32 " (this build reads %u)",
                  f->version, TR_CKPT_VERSION);
        goto err_close;
    }
    /* These fields say how much to read for the CRC, so they are checked
     * before it can be. */
    if (count > TR_CKPT_MAX_SECTIONS) {
        status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(path, 12), "%" PRIu32 " sections in the header (at most %d)", count,
                  TR_CKPT_MAX_SECTIONS);
        goto err_close;
    }
    if (table_offset != HEADER_BYTES) {
        status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(path, 24),
                  "header: section table at offset %" PRIu64 " (version 1 has it at %d)", table_offset, HEADER_BYTES);
        goto err_close;
    }
    if (table_bytes != (uint64_t)count * ENTRY_BYTES) {
        status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(path, 32),
                  "header: section table of %" PRIu64 " bytes for %" PRIu32 " sections (%d bytes each)", table_bytes,
                  count, ENTRY_BYTES);
        goto err_close;
    }
    if (real_bytes < HEADER_BYTES + table_bytes) {
        status_set(HORA_ERR_CORRUPT,
                   "%s: truncated: the file has %" PRIu64 " bytes, its header says %" PRIu64
                   " (the section table alone "
                   "ends at %" PRIu64 ")",
                   path, real_bytes, f->file_bytes, HEADER_BYTES + table_bytes);
        goto err_close;
    }
    r = pread_all(fd, head + HEADER_BYTES, table_bytes, HEADER_BYTES);
    if (r != 0) {
        status = status_set(r < 0 ? HORA_ERR_SYSTEM : HORA_ERR_CORRUPT, "%s: reading the section table: %s", path,
                            r < 0 ? strerror(errno) : "the file shrank while being read");
        goto err_close;
    }
    uint32_t crc = tr_crc32c(0, head, HEADER_CRC_OFFSET);
    crc = tr_crc32c(crc, head + HEADER_BYTES, (size_t)table_bytes);
    uint32_t stored = tr_le_get_u32(head + HEADER_CRC_OFFSET);
    if (crc != stored) {
        status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(path, 0),
                  "header and section table (%" PRIu64 " bytes): CRC32C 0x%08" PRIx32 ", stored 0x%08" PRIx32,
                  HEADER_BYTES + table_bytes, crc, stored);
        goto err_close;
    }
    if (!all_zero(head + 40, 20)) {
        status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(path, 40), "header: reserved bytes are not zero");
        goto err_close;
    }
    if (f->file_bytes != real_bytes) {
        if (real_bytes < f->file_bytes)
            status_set(HORA_ERR_CORRUPT, "%s: truncated: the file has %" PRIu64 " bytes, its header says %" PRIu64,
                       path, real_bytes, f->file_bytes);
        else
            status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(path, f->file_bytes),
                      "%" PRIu64 " bytes past the end its header gives (%" PRIu64 " bytes)", real_bytes - f->file_bytes,
                      f->file_bytes);
        goto err_close;
    }
    f->section_count = (int)count;
    status = table_check(f, head, table_bytes);
    if (status != HORA_OK) goto err_close;
    f->fd = fd;
    return HORA_OK;

err_close:
    close(fd);
    f->section_count = 0;
    return status;
}

void tr_ckpt_close(tr_ckpt_file_t *f)
{
    if (f && f->fd >= 0) {
        close(f->fd);
        f->fd = -1;
    }
}

const tr_ckpt_section_t *tr_ckpt_find(const tr_ckpt_file_t *f, const char *name)
{
    for (int i = 0; i < f->section_count; i++)
        if (strncmp(f->sections[i].name, name, TR_CKPT_NAME_BYTES) == 0) return &f->sections[i];
    return NULL;
}

const tr_ckpt_section_t *tr_ckpt_expect(const tr_ckpt_file_t *f, const char *name, uint64_t want_bytes)
{
    const tr_ckpt_section_t *s = tr_ckpt_find(f, name);
    if (!s) {
        status_at(HORA_ERR_CORRUPT, STATUS_FILE(f->path), "no '%s' section", name);
        return NULL;
    }
    if (want_bytes != TR_CKPT_ANY_BYTES && s->bytes != want_bytes) {
        status_at(HORA_ERR_CORRUPT, STATUS_SECTION_AT(f->path, name, s->offset),
                  "%" PRIu64 " bytes, the model section says %" PRIu64, s->bytes, want_bytes);
        return NULL;
    }
    return s;
}

static hora_status_t crc_mismatch(const tr_ckpt_file_t *f, const tr_ckpt_section_t *s, uint32_t crc)
{
    return status_at(HORA_ERR_CORRUPT, STATUS_SECTION_AT(f->path, s->name, s->offset),
                     "CRC32C 0x%08" PRIx32 ", stored 0x%08" PRIx32 " (%" PRIu64 " bytes)", crc, s->crc, s->bytes);
}

static hora_status_t read_failed(const tr_ckpt_file_t *f, const tr_ckpt_section_t *s, int r, uint64_t at)
{
    return status_at(r < 0 ? HORA_ERR_SYSTEM : HORA_ERR_CORRUPT, STATUS_SECTION_AT(f->path, s->name, at),
                     "cannot read: %s (the section: %" PRIu64 " bytes from offset %" PRIu64 ")",
                     r < 0 ? strerror(errno) : "truncated since it was opened", s->bytes, s->offset);
}

hora_status_t tr_ckpt_read(const tr_ckpt_file_t *f, const tr_ckpt_section_t *s, void *buf)
{
    if (f->fd < 0) return status_set(HORA_ERR_INVALID_ARG, "%s: not open", f->path);
    int r = pread_all(f->fd, buf, s->bytes, s->offset);
    if (r != 0) return read_failed(f, s, r, s->offset);
    uint32_t crc = tr_crc32c(0, buf, (size_t)s->bytes);
    if (crc != s->crc) return crc_mismatch(f, s, crc);
    return HORA_OK;
}

hora_status_t tr_ckpt_read_alloc(const tr_ckpt_file_t *f, const tr_ckpt_section_t *s, void **out)
{
    *out = NULL;
    char *buf = malloc((size_t)s->bytes + 1);
    if (!buf)
        return status_set(HORA_ERR_NO_MEMORY, "%s: section '%s': out of memory for %" PRIu64 " bytes", f->path, s->name,
                          s->bytes);
    hora_status_t status = tr_ckpt_read(f, s, buf);
    if (status != HORA_OK) {
        free(buf);
        return status;
    }
    buf[s->bytes] = '\0';
    *out = buf;
    return HORA_OK;
}

/* The zero padding before each section (and after the last) as the writer
 * left it: no CRC covers it, so verify looks at it instead. */
static hora_status_t padding_check(const tr_ckpt_file_t *f)
{
    const tr_ckpt_section_t *order[TR_CKPT_MAX_SECTIONS];
    for (int i = 0; i < f->section_count; i++) order[i] = &f->sections[i];
    qsort(order, (size_t)f->section_count, sizeof(order[0]), section_by_offset);
    uint64_t at = HEADER_BYTES + (uint64_t)f->section_count * ENTRY_BYTES;
    for (int i = 0; i <= f->section_count; i++) {
        uint64_t next = i < f->section_count ? order[i]->offset : f->file_bytes;
        uint8_t gap[TR_CKPT_ALIGN];
        if (next > at) {
            uint64_t n = next - at;
            int r = n <= sizeof(gap) ? pread_all(f->fd, gap, n, at) : 0;
            if (n > sizeof(gap) || r != 0 || !all_zero(gap, (size_t)n))
                return status_set(r < 0 ? HORA_ERR_SYSTEM : HORA_ERR_CORRUPT,
                                  "%s: padding at offset %" PRIu64 " (%" PRIu64 " bytes, before %s%s%s): %s", f->path,
                                  at, n, i < f->section_count ? "section '" : "the end of the file",
                                  i < f->section_count ? order[i]->name : "", i < f->section_count ? "'" : "",
                                  r < 0             ? strerror(errno)
                                  : r > 0           ? "truncated since it was opened"
                                  : n > sizeof(gap) ? "longer than the alignment needs"
                                                    : "not zero");
        }
        if (i < f->section_count) at = order[i]->offset + order[i]->bytes;
    }
    return HORA_OK;
}

hora_status_t tr_ckpt_verify(const tr_ckpt_file_t *f)
{
    if (f->fd < 0) return status_set(HORA_ERR_INVALID_ARG, "%s: not open", f->path);
    uint8_t *buf = malloc(IO_CHUNK_BYTES);
    if (!buf) return status_set(HORA_ERR_NO_MEMORY, "%s: out of memory", f->path);
    hora_status_t status = HORA_OK;
    for (int i = 0; i < f->section_count && status == HORA_OK; i++) {
        const tr_ckpt_section_t *s = &f->sections[i];
        uint32_t crc = 0;
        for (uint64_t done = 0; done < s->bytes;) {
            uint64_t n = s->bytes - done < IO_CHUNK_BYTES ? s->bytes - done : IO_CHUNK_BYTES;
            int r = pread_all(f->fd, buf, n, s->offset + done);
            if (r != 0) {
                status = read_failed(f, s, r, s->offset + done);
                break;
            }
            crc = tr_crc32c(crc, buf, (size_t)n);
            done += n;
        }
        if (status == HORA_OK && crc != s->crc) status = crc_mismatch(f, s, crc);
    }
    free(buf);
    if (status == HORA_OK) status = padding_check(f);
    return status;
}
