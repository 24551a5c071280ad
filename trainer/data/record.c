/*
 * record.c - record shard writer and validating reader (format: README.md).
 *
 * The reader trusts nothing it reads: every length is bounded by the file
 * size (known from fstat at open) and by the index before it is used to size
 * an allocation, and every header is CRC-checked before its fields are used.
 * Reads use pread so loader threads can share one reader.
 */
#define _GNU_SOURCE
#include "record.h"

#include "base/status.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "le.h"

struct tr_record_writer {
    FILE *file;
    char *path;
    uint64_t offset;   /* bytes written so far */
    uint64_t *offsets; /* (count) record offsets */
    uint64_t count;
    uint64_t capacity_count;
};

struct tr_record_reader {
    int fd;
    char *path;
    uint64_t file_bytes;
    uint64_t count;
    uint64_t index_offset;
    uint64_t *offsets; /* (count + 1): the last entry is index_offset */
};

static void shard_header_encode(uint8_t h[TR_RECORD_SHARD_HEADER_BYTES], uint64_t count, uint64_t index_offset)
{
    memset(h, 0, TR_RECORD_SHARD_HEADER_BYTES);
    memcpy(h, TR_RECORD_MAGIC, 8);
    tr_le_put_u32(h + 8, TR_RECORD_VERSION);
    tr_le_put_u32(h + 12, 0); /* flags, reserved */
    tr_le_put_u64(h + 16, count);
    tr_le_put_u64(h + 24, index_offset);
    tr_le_put_u32(h + 32, tr_crc32c(0, h, 32));
    tr_le_put_u32(h + 36, 0); /* padding: records start 8-byte aligned */
}

/* ---- writer ---- */

static hora_status_t writer_put(tr_record_writer_t *w, const void *data, size_t bytes)
{
    if (bytes > 0 && fwrite(data, 1, bytes, w->file) != bytes)
        return status_at(HORA_ERR_SYSTEM, STATUS_FILE_AT(w->path, w->offset), "write failed: %s", strerror(errno));
    w->offset += bytes;
    return HORA_OK;
}

hora_status_t tr_record_writer_open(const char *path, tr_record_writer_t **writer_out)
{
    if (!path || !writer_out) return status_at(HORA_ERR_INVALID_ARG, STATUS_FILE_AT(path, 0), "NULL argument");
    tr_record_writer_t *w = calloc(1, sizeof(*w));
    if (!w) return status_at(HORA_ERR_NO_MEMORY, STATUS_FILE_AT(path, 0), "out of memory");
    w->path = strdup(path);
    if (!w->path) {
        free(w);
        return status_at(HORA_ERR_NO_MEMORY, STATUS_FILE_AT(path, 0), "out of memory");
    }
    w->file = fopen(path, "wb");
    if (!w->file) {
        hora_status_t status =
            status_at(HORA_ERR_SYSTEM, STATUS_FILE_AT(path, 0), "cannot create: %s", strerror(errno));
        free(w->path);
        free(w);
        return status;
    }
    /* Provisional header: index_offset 0 marks an unfinished shard, which a
     * reader rejects; close rewrites it. */
    uint8_t h[TR_RECORD_SHARD_HEADER_BYTES];
    shard_header_encode(h, 0, 0);
    hora_status_t status = writer_put(w, h, sizeof(h));
    if (status != HORA_OK) {
        fclose(w->file);
        free(w->path);
        free(w);
        return status;
    }
    *writer_out = w;
    return HORA_OK;
}

uint64_t tr_record_writer_count(const tr_record_writer_t *writer) { return writer->count; }

hora_status_t tr_record_writer_append(tr_record_writer_t *w, const tr_record_t *rec)
{
    if (!w || !rec || (rec->payload_bytes > 0 && !rec->payload))
        return status_at(HORA_ERR_INVALID_ARG, STATUS_FILE_AT(w ? w->path : NULL, w ? w->offset : 0), "NULL argument");
    if (rec->payload_bytes > TR_RECORD_MAX_PAYLOAD_BYTES)
        return status_at(HORA_ERR_INVALID_ARG, STATUS_FILE_AT(w->path, w->offset),
                         "payload of %" PRIu64 " bytes exceeds the %" PRIu64 "-byte limit", rec->payload_bytes,
                         TR_RECORD_MAX_PAYLOAD_BYTES);
    if (rec->kind != TR_PAYLOAD_KIND_RAW_U8 && rec->kind != TR_PAYLOAD_KIND_JPEG)
        return status_at(HORA_ERR_INVALID_ARG, STATUS_FILE_AT(w->path, w->offset), "bad payload kind %d",
                         (int)rec->kind);
    if (rec->channels > 0xffff)
        return status_at(HORA_ERR_INVALID_ARG, STATUS_FILE_AT(w->path, w->offset), "%u channels", rec->channels);
    if (rec->kind == TR_PAYLOAD_KIND_RAW_U8 && (uint64_t)rec->height * rec->width * rec->channels != rec->payload_bytes)
        return status_at(HORA_ERR_INVALID_ARG, STATUS_FILE_AT(w->path, w->offset),
                         "raw payload of %" PRIu64 " bytes is not %ux%ux%u", rec->payload_bytes, rec->height,
                         rec->width, rec->channels);
    if (w->count == w->capacity_count) {
        uint64_t capacity = w->capacity_count ? 2 * w->capacity_count : 1024;
        uint64_t *offsets = realloc(w->offsets, capacity * sizeof(*offsets));
        if (!offsets) return status_at(HORA_ERR_NO_MEMORY, STATUS_FILE_AT(w->path, w->offset), "out of memory");
        w->offsets = offsets;
        w->capacity_count = capacity;
    }
    uint64_t record_offset = w->offset;
    uint8_t h[TR_RECORD_HEADER_BYTES];
    tr_le_put_u64(h + 0, rec->payload_bytes);
    tr_le_put_u32(h + 8, (uint32_t)rec->label);
    tr_le_put_u16(h + 12, (uint16_t)rec->kind);
    tr_le_put_u16(h + 14, (uint16_t)rec->channels);
    tr_le_put_u32(h + 16, rec->height);
    tr_le_put_u32(h + 20, rec->width);
    tr_le_put_u32(h + 24, tr_crc32c(0, h, 24));
    uint8_t trailer[TR_RECORD_TRAILER_BYTES];
    tr_le_put_u32(trailer, tr_crc32c(0, rec->payload, (size_t)rec->payload_bytes));
    hora_status_t status = writer_put(w, h, sizeof(h));
    if (status == HORA_OK) status = writer_put(w, rec->payload, (size_t)rec->payload_bytes);
    if (status == HORA_OK) status = writer_put(w, trailer, sizeof(trailer));
    if (status != HORA_OK) return status;
    w->offsets[w->count++] = record_offset;
    return HORA_OK;
}

hora_status_t tr_record_writer_close(tr_record_writer_t *w)
{
    if (!w) return HORA_OK;
    hora_status_t status = HORA_OK;
    uint64_t index_offset = w->offset;
    uint32_t crc = 0;
    uint8_t buf[8 * 512];
    for (uint64_t i = 0; i < w->count && status == HORA_OK;) {
        size_t n = 0;
        for (; n < 512 && i < w->count; n++, i++) tr_le_put_u64(buf + 8 * n, w->offsets[i]);
        crc = tr_crc32c(crc, buf, 8 * n);
        status = writer_put(w, buf, 8 * n);
    }
    if (status == HORA_OK) {
        tr_le_put_u32(buf, crc);
        status = writer_put(w, buf, 4);
    }
    if (status == HORA_OK) {
        uint8_t h[TR_RECORD_SHARD_HEADER_BYTES];
        shard_header_encode(h, w->count, index_offset);
        if (fseek(w->file, 0, SEEK_SET) != 0 || fwrite(h, 1, sizeof(h), w->file) != sizeof(h))
            status =
                status_at(HORA_ERR_SYSTEM, STATUS_FILE_AT(w->path, 0), "header rewrite failed: %s", strerror(errno));
    }
    if (fclose(w->file) != 0 && status == HORA_OK)
        status = status_at(HORA_ERR_SYSTEM, STATUS_FILE_AT(w->path, w->offset), "close failed: %s", strerror(errno));
    free(w->offsets);
    free(w->path);
    free(w);
    return status;
}

/* ---- reader ---- */

/* Read exactly bytes at offset; a short read is a truncated file. */
static hora_status_t reader_pread(const tr_record_reader_t *r, void *buf, size_t bytes, uint64_t offset,
                                  const char *what)
{
    size_t done = 0;
    while (done < bytes) {
        ssize_t n = pread(r->fd, (uint8_t *)buf + done, bytes - done, (off_t)(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            return status_at(HORA_ERR_SYSTEM, STATUS_FILE_AT(r->path, offset + done), "reading %s: %s", what,
                             strerror(errno));
        if (n == 0)
            return status_at(TR_ERR_CORRUPT, STATUS_FILE_AT(r->path, offset + done), "file ends inside %s (truncated?)",
                             what);
        done += (size_t)n;
    }
    return HORA_OK;
}

static hora_status_t reader_load_index(tr_record_reader_t *r)
{
    uint8_t h[TR_RECORD_SHARD_HEADER_BYTES];
    if (r->file_bytes < sizeof(h))
        return status_at(TR_ERR_CORRUPT, STATUS_FILE_AT(r->path, 0),
                         "%" PRIu64 " bytes is too short for a shard header (truncated?)", r->file_bytes);
    hora_status_t status = reader_pread(r, h, sizeof(h), 0, "the shard header");
    if (status != HORA_OK) return status;
    if (memcmp(h, TR_RECORD_MAGIC, 8) != 0)
        return status_at(TR_ERR_CORRUPT, STATUS_FILE_AT(r->path, 0), "bad magic (not a .hrec shard)");
    if (tr_le_get_u32(h + 32) != tr_crc32c(0, h, 32))
        return status_at(TR_ERR_CORRUPT, STATUS_FILE_AT(r->path, 32), "shard header CRC mismatch");
    if (tr_le_get_u32(h + 36) != 0) /* padding is outside the CRC, so pin it */
        return status_at(TR_ERR_CORRUPT, STATUS_FILE_AT(r->path, 36), "nonzero header padding");
    uint32_t version = tr_le_get_u32(h + 8);
    if (version != TR_RECORD_VERSION)
        return status_at(TR_ERR_CORRUPT, STATUS_FILE_AT(r->path, 8), "version %u, this reader knows %u", version,
                         TR_RECORD_VERSION);
    uint64_t count = tr_le_get_u64(h + 16);
    uint64_t index_offset = tr_le_get_u64(h + 24);
    if (index_offset == 0)
        return status_at(TR_ERR_CORRUPT, STATUS_FILE_AT(r->path, 24),
                         "index offset 0: the writer never finished this shard");
    /* The index is the last thing in the file: index_offset + 8*count + 4 ==
     * file size, checked without overflow before count sizes anything. Each
     * record takes at least header + trailer bytes, which bounds count too. */
    uint64_t min_record_bytes = TR_RECORD_HEADER_BYTES + TR_RECORD_TRAILER_BYTES;
    if (index_offset < sizeof(h) || index_offset > r->file_bytes ||
        count > (index_offset - sizeof(h)) / min_record_bytes || r->file_bytes - index_offset < 4 ||
        count > (r->file_bytes - index_offset - 4) / 8 || index_offset + 8 * count + 4 != r->file_bytes)
        return status_at(TR_ERR_CORRUPT, STATUS_FILE_AT(r->path, 16),
                         "record count %" PRIu64 " / index offset %" PRIu64 " do not fit a file of %" PRIu64
                         " bytes (truncated?)",
                         count, index_offset, r->file_bytes);
    uint64_t *offsets = malloc((count + 1) * sizeof(*offsets));
    if (!offsets) return status_at(HORA_ERR_NO_MEMORY, STATUS_FILE_AT(r->path, index_offset), "out of memory");
    uint8_t buf[8 * 512];
    uint32_t crc = 0;
    for (uint64_t i = 0; i < count;) {
        size_t n = count - i < 512 ? (size_t)(count - i) : 512;
        status = reader_pread(r, buf, 8 * n, index_offset + 8 * i, "the index");
        if (status != HORA_OK) {
            free(offsets);
            return status;
        }
        crc = tr_crc32c(crc, buf, 8 * n);
        for (size_t k = 0; k < n; k++, i++) offsets[i] = tr_le_get_u64(buf + 8 * k);
    }
    uint8_t stored[4];
    status = reader_pread(r, stored, 4, index_offset + 8 * count, "the index CRC");
    if (status != HORA_OK) {
        free(offsets);
        return status;
    }
    if (tr_le_get_u32(stored) != crc) {
        free(offsets);
        return status_at(TR_ERR_CORRUPT, STATUS_FILE_AT(r->path, index_offset + 8 * count), "index CRC mismatch");
    }
    /* Records are contiguous: the first starts right after the header, each
     * next one after the previous, and the last ends at the index. */
    offsets[count] = index_offset;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t expected_min = i == 0 ? sizeof(h) : offsets[i - 1] + min_record_bytes;
        if ((i == 0 && offsets[0] != sizeof(h)) || offsets[i] < expected_min ||
            offsets[i] > index_offset - min_record_bytes) {
            status = status_at(TR_ERR_CORRUPT, STATUS_FILE_AT(r->path, index_offset + 8 * i),
                               "index entry %" PRIu64 " = %" PRIu64 " is out of order or bounds", i, offsets[i]);
            free(offsets);
            return status;
        }
    }
    r->count = count;
    r->index_offset = index_offset;
    r->offsets = offsets;
    return HORA_OK;
}

hora_status_t tr_record_reader_open(const char *path, tr_record_reader_t **reader_out)
{
    if (!path || !reader_out) return status_at(HORA_ERR_INVALID_ARG, STATUS_FILE_AT(path, 0), "NULL argument");
    tr_record_reader_t *r = calloc(1, sizeof(*r));
    if (!r) return status_at(HORA_ERR_NO_MEMORY, STATUS_FILE_AT(path, 0), "out of memory");
    hora_status_t status;
    r->path = strdup(path);
    if (!r->path) {
        status = status_at(HORA_ERR_NO_MEMORY, STATUS_FILE_AT(path, 0), "out of memory");
        goto err_free_reader;
    }
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        status = status_at(HORA_ERR_SYSTEM, STATUS_FILE_AT(path, 0), "cannot open: %s", strerror(errno));
        goto err_free_path;
    }
    struct stat st;
    if (fstat(r->fd, &st) != 0) {
        status = status_at(HORA_ERR_SYSTEM, STATUS_FILE_AT(path, 0), "fstat: %s", strerror(errno));
        goto err_close;
    }
    r->file_bytes = (uint64_t)st.st_size;
    status = reader_load_index(r);
    if (status != HORA_OK) goto err_close;
    *reader_out = r;
    return HORA_OK;

err_close:
    close(r->fd);
err_free_path:
    free(r->path);
err_free_reader:
    free(r);
    return status;
}

void tr_record_reader_close(tr_record_reader_t *r)
{
    if (!r) return;
    close(r->fd);
    free(r->offsets);
    free(r->path);
    free(r);
}

uint64_t tr_record_reader_count(const tr_record_reader_t *r) { return r->count; }
const char *tr_record_reader_path(const tr_record_reader_t *r) { return r->path; }

uint64_t tr_record_reader_offset(const tr_record_reader_t *r, uint64_t index)
{
    return index <= r->count ? r->offsets[index] : r->index_offset;
}

/* The header checks tr_record_read does first; also used alone to list
 * labels and shapes without reading payloads. */
hora_status_t tr_record_read_header(tr_record_reader_t *r, uint64_t index, tr_record_t *rec)
{
    if (!r || !rec) return status_at(HORA_ERR_INVALID_ARG, STATUS_FILE_AT(r ? r->path : NULL, 0), "NULL argument");
    if (index >= r->count)
        return status_at(HORA_ERR_INVALID_ARG, STATUS_FILE_AT(r->path, r->index_offset),
                         "record %" PRIu64 " of %" PRIu64, index, r->count);
    uint64_t offset = r->offsets[index];
    /* The index says how many bytes this record spans; the header must agree. */
    uint64_t span = r->offsets[index + 1] - offset;
    uint8_t h[TR_RECORD_HEADER_BYTES];
    hora_status_t status = reader_pread(r, h, sizeof(h), offset, "a record header");
    if (status != HORA_OK) return status;
    if (tr_le_get_u32(h + 24) != tr_crc32c(0, h, 24))
        return status_at(TR_ERR_CORRUPT, STATUS_FILE_AT(r->path, offset), "record %" PRIu64 " header CRC mismatch",
                         index);
    uint64_t payload_bytes = tr_le_get_u64(h + 0);
    if (payload_bytes > TR_RECORD_MAX_PAYLOAD_BYTES ||
        payload_bytes != span - TR_RECORD_HEADER_BYTES - TR_RECORD_TRAILER_BYTES)
        return status_at(TR_ERR_CORRUPT, STATUS_FILE_AT(r->path, offset),
                         "record %" PRIu64 " claims %" PRIu64 " payload bytes, the index "
                         "leaves room for %" PRIu64,
                         index, payload_bytes, span - TR_RECORD_HEADER_BYTES - TR_RECORD_TRAILER_BYTES);
    uint16_t kind = tr_le_get_u16(h + 12);
    uint32_t channels = tr_le_get_u16(h + 14), height = tr_le_get_u32(h + 16), width = tr_le_get_u32(h + 20);
    if (kind != TR_PAYLOAD_KIND_RAW_U8 && kind != TR_PAYLOAD_KIND_JPEG)
        return status_at(TR_ERR_CORRUPT, STATUS_FILE_AT(r->path, offset + 12),
                         "record %" PRIu64 " has unknown payload kind %u", index, kind);
    if (kind == TR_PAYLOAD_KIND_RAW_U8 && (uint64_t)height * width * channels != payload_bytes)
        return status_at(TR_ERR_CORRUPT, STATUS_FILE_AT(r->path, offset + 16),
                         "record %" PRIu64 ": raw %ux%ux%u is not %" PRIu64 " bytes", index, height, width, channels,
                         payload_bytes);
    rec->label = (int32_t)tr_le_get_u32(h + 8);
    rec->kind = (tr_payload_kind_t)kind;
    rec->height = height;
    rec->width = width;
    rec->channels = channels;
    rec->payload_bytes = payload_bytes;
    return HORA_OK;
}

hora_status_t tr_record_read(tr_record_reader_t *r, uint64_t index, tr_record_t *rec)
{
    hora_status_t status = tr_record_read_header(r, index, rec);
    if (status != HORA_OK) return status;
    uint64_t offset = r->offsets[index], payload_bytes = rec->payload_bytes;
    /* Only now, with the length proven, may the buffer grow. */
    if (rec->payload_capacity_bytes < payload_bytes) {
        uint8_t *buf = realloc(rec->payload, (size_t)payload_bytes);
        if (!buf) return status_at(HORA_ERR_NO_MEMORY, STATUS_FILE_AT(r->path, offset), "out of memory");
        rec->payload = buf;
        rec->payload_capacity_bytes = (size_t)payload_bytes;
    }
    status = reader_pread(r, rec->payload, (size_t)payload_bytes, offset + TR_RECORD_HEADER_BYTES, "a record payload");
    if (status != HORA_OK) return status;
    uint8_t stored[4];
    uint64_t trailer_offset = offset + TR_RECORD_HEADER_BYTES + payload_bytes;
    status = reader_pread(r, stored, 4, trailer_offset, "a payload CRC");
    if (status != HORA_OK) return status;
    if (tr_le_get_u32(stored) != tr_crc32c(0, rec->payload, (size_t)payload_bytes))
        return status_at(TR_ERR_CORRUPT, STATUS_FILE_AT(r->path, offset + TR_RECORD_HEADER_BYTES),
                         "record %" PRIu64 " payload CRC mismatch", index);
    return HORA_OK;
}

void tr_record_free(tr_record_t *rec)
{
    if (!rec) return;
    free(rec->payload);
    rec->payload = NULL;
    rec->payload_capacity_bytes = 0;
}

/* ---- naming and sharding ---- */

hora_status_t tr_record_shard_name(const char *prefix, unsigned shard, unsigned shard_count, char *buf,
                                   size_t buf_bytes)
{
    if (!prefix || !buf || shard >= shard_count)
        return status_at(HORA_ERR_INVALID_ARG, STATUS_FILE_AT(prefix, 0), "bad shard %u of %u", shard, shard_count);
    int n = snprintf(buf, buf_bytes, "%s-%05u-of-%05u.hrec", prefix, shard, shard_count);
    if (n < 0 || (size_t)n >= buf_bytes)
        return status_at(HORA_ERR_INVALID_ARG, STATUS_FILE_AT(prefix, 0), "shard name too long");
    return HORA_OK;
}

void tr_record_partition(uint64_t count, unsigned part, unsigned part_count, uint64_t *begin, uint64_t *end)
{
    if (part_count == 0 || part >= part_count) {
        *begin = *end = 0;
        return;
    }
    uint64_t base = count / part_count, extra = count % part_count;
    *begin = part * base + (part < extra ? part : extra);
    *end = *begin + base + (part < extra ? 1 : 0);
}
