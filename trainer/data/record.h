/*
 * record.h - hora's record shards (.hrec): writer and validating reader.
 *
 * The byte-by-byte format is in README.md (this directory). In short: a
 * 40-byte shard header, records {28-byte header with its own CRC32C,
 * payload, payload CRC32C}, and an index of u64 record offsets (plus CRC) at
 * the end, so record i is one pread away and shards split without scanning.
 *
 * Every length read from a file is checked against the file size (and its
 * CRC) before anything is allocated; a bad shard gives a status and a message
 * "FILE: offset N: what" (status_message(), base/status.h), never a crash.
 *
 * Statuses: HORA_OK; HORA_ERR_INVALID_ARG (bad argument);
 * TR_ERR_CORRUPT (bad CRC, bad magic, impossible length, truncated file);
 * HORA_ERR_SYSTEM (open/read/write failed); HORA_ERR_NO_MEMORY.
 */
#ifndef TR_RECORD_H
#define TR_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "hora.h"

/* Stored data that fails a check; the message says what and where. */
#define TR_ERR_CORRUPT HORA_ERR_CORRUPT

#define TR_RECORD_MAGIC "HORAREC1"
#define TR_RECORD_VERSION 1u
#define TR_RECORD_SHARD_HEADER_BYTES 40u
#define TR_RECORD_HEADER_BYTES 28u
#define TR_RECORD_TRAILER_BYTES 4u /* payload CRC32C */
/* Largest payload a writer accepts and a reader believes (1 GiB). */
#define TR_RECORD_MAX_PAYLOAD_BYTES (UINT64_C(1) << 30)

typedef enum {
    TR_PAYLOAD_KIND_RAW_U8 = 1, /* height * width * channels bytes, HWC order */
    TR_PAYLOAD_KIND_JPEG = 2,   /* a JPEG file as-is; shape from its header */
} tr_payload_kind_t;

/* One record. The payload buffer is owned by the struct when filled by
 * tr_record_read (reused across reads, released by tr_record_free); for
 * tr_record_writer_append it is the caller's. Zero-initialise before use. */
typedef struct {
    int32_t label;
    tr_payload_kind_t kind;
    uint32_t height;
    uint32_t width;
    uint32_t channels;
    uint64_t payload_bytes;
    uint8_t *payload;
    size_t payload_capacity_bytes; /* tr_record_read's buffer size */
} tr_record_t;

typedef struct tr_record_writer tr_record_writer_t;
typedef struct tr_record_reader tr_record_reader_t;

/* Create (truncate) path and write a provisional shard header. */
hora_status_t tr_record_writer_open(const char *path, tr_record_writer_t **writer_out);
/* Append one record. RAW_U8 needs payload_bytes == height*width*channels. */
hora_status_t tr_record_writer_append(tr_record_writer_t *writer, const tr_record_t *rec);
/* Write the index, patch the header, close and free (also on error). */
hora_status_t tr_record_writer_close(tr_record_writer_t *writer);
/* Records appended so far. */
uint64_t tr_record_writer_count(const tr_record_writer_t *writer);

/* Open a shard: checks header (magic, version, CRC) and index (bounds,
 * ordering, CRC, exact file size) before allocating the index. */
hora_status_t tr_record_reader_open(const char *path, tr_record_reader_t **reader_out);
void tr_record_reader_close(tr_record_reader_t *reader);
uint64_t tr_record_reader_count(const tr_record_reader_t *reader);
/* Byte offset of record index in the shard (for messages). */
uint64_t tr_record_reader_offset(const tr_record_reader_t *reader, uint64_t index);
const char *tr_record_reader_path(const tr_record_reader_t *reader);

/* Read record index into rec: header CRC and lengths are checked against the
 * index (and so the file size) before the payload buffer grows, then the
 * payload CRC. Thread-safe for distinct rec (pread). On error rec's fields
 * other than its buffer are unspecified. */
hora_status_t tr_record_read(tr_record_reader_t *reader, uint64_t index, tr_record_t *rec);
/* Only the record header: its CRC and lengths checked as tr_record_read does,
 * label/kind/shape/payload_bytes filled, the buffer untouched (one small
 * pread: for listing labels without reading payloads). */
hora_status_t tr_record_read_header(tr_record_reader_t *reader, uint64_t index, tr_record_t *rec);
/* Release the buffer tr_record_read grew. */
void tr_record_free(tr_record_t *rec);

/* "PREFIX-00003-of-00008.hrec" into buf; HORA_ERR_INVALID_ARG if it does not fit. */
hora_status_t tr_record_shard_name(const char *prefix, unsigned shard, unsigned shard_count, char *buf,
                                   size_t buf_bytes);
/* Contiguous split of count items into part_count parts: part gets
 * [*begin, *end); sizes differ by at most one, the first parts larger. */
void tr_record_partition(uint64_t count, unsigned part, unsigned part_count, uint64_t *begin, uint64_t *end);

#endif
