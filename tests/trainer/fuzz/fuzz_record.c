/*
 * fuzz_record.c - libFuzzer target for the record shard reader: the input is
 * a whole .hrec file. Opening it must either fail with a status and a
 * message or give a reader whose every record reads (or fails) without
 * touching memory it does not own; a header-only read must agree with the
 * full read about each record's shape.
 *
 * Build: meson setup build-fuzz -Dfuzz=true with CC=clang (see
 * tests/trainer/fuzz/README.md); run: build-fuzz/trainer/data/fuzz_record
 * tests/trainer/fuzz/corpus/record.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/status.h"
#include "record.h"

/* The reader wants a path: one in-memory file, rewritten per input. */
static int fuzz_fd = -1;
static char fuzz_path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fuzz_fd < 0) {
        fuzz_fd = memfd_create("fuzz_record", 0);
        if (fuzz_fd < 0) abort();
        snprintf(fuzz_path, sizeof(fuzz_path), "/proc/self/fd/%d", fuzz_fd);
    }
    if (ftruncate(fuzz_fd, 0) != 0 || (size > 0 && pwrite(fuzz_fd, data, size, 0) != (ssize_t)size)) abort();
    tr_record_reader_t *reader;
    if (tr_record_reader_open(fuzz_path, &reader) != HORA_OK) {
        if (status_message()[0] == '\0') abort(); /* a failure must say why */
        return 0;
    }
    tr_record_t rec = {0}, header = {0};
    uint64_t count = tr_record_reader_count(reader);
    for (uint64_t i = 0; i < count; i++) {
        hora_status_t head_status = tr_record_read_header(reader, i, &header);
        hora_status_t status = tr_record_read(reader, i, &rec);
        if (status == HORA_OK) {
            if (head_status != HORA_OK || header.payload_bytes != rec.payload_bytes || header.kind != rec.kind ||
                header.label != rec.label)
                abort();
            /* touch every payload byte: ASan catches a short buffer */
            volatile uint8_t sum = 0;
            for (uint64_t k = 0; k < rec.payload_bytes; k++) sum ^= rec.payload[k];
            (void)sum;
        }
    }
    tr_record_free(&rec);
    tr_record_reader_close(reader);
    return 0;
}
