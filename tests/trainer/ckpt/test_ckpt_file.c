/*
 * test_ckpt_file.c - the checkpoint file format (trainer/ckpt/ckpt_file.h,
 * trainer/ckpt/CHECKPOINT.md), byte by byte:
 *   - the layout of a small file against the documented offsets;
 *   - round trips of random section sets (sizes 0, 1, 63, 64, 65, ...);
 *   - every byte of the header and table flipped, and bytes of every section
 *     and of the padding: each rejected, naming the header or the section
 *     and its offset, the other sections still readable;
 *   - truncation at many points (and trailing bytes): rejected as truncated
 *     with both sizes;
 *   - a table that passes its CRC but breaks the rules (unaligned,
 *     overlapping, outside the file, duplicate or unterminated names);
 *   - the writer: bad names refused, ENOSPC (/dev/full) and short writes
 *     interrupted by signals (a pipe, SIGALRM without SA_RESTART).
 * The model section's parser (trainer/ckpt/ckpt_desc.h) is in test_ckpt_desc.c.
 *
 * usage: test_ckpt_file [TMPDIR]     (KEEP=1: leave its files in TMPDIR/test_ckpt_file.*)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_file.h"
#include "crc32c.h"
#include "file.h"
#include "rand.h"

static char tmpdir[4096];

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Write sections to path; the status. */
static hora_status_t write_file(const char *path, tr_ckpt_section_t *s, int n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        return status_at(HORA_ERR_SYSTEM, STATUS_FILE(path), "%s", strerror(errno));
    }
    hora_status_t st = tr_ckpt_write_fd(fd, path, s, n);
    close(fd);
    return st;
}

static int put_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* Open and verify; the status and the message. */
static hora_status_t open_verify(const char *path)
{
    tr_ckpt_file_t f;
    hora_status_t st = tr_ckpt_open(path, &f);
    if (st != HORA_OK) {
        CHECK(f.fd == -1, "a failed open leaves no file open");
        return st;
    }
    st = tr_ckpt_verify(&f);
    tr_ckpt_close(&f);
    return st;
}

/* Recompute the header CRC after editing the header or table (to test the
 * checks behind it). */
static void reseal(uint8_t *file)
{
    uint32_t count = le32(file + 12);
    uint32_t crc = tr_crc32c(0, file, 60);
    crc = tr_crc32c(crc, file + 64, (size_t)count * 64);
    put32(file + 60, crc);
}

/* ---- the documented layout ---- */

static void test_layout(void)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/layout.hckpt", tmpdir);
    tr_ckpt_section_t s[3] = {
        {.name = "model", .data = "abc", .bytes = 3},
        {.name = "empty", .data = NULL, .bytes = 0},
        {.name = "params", .data = "0123456789", .bytes = 10},
    };
    CHECK(write_file(path, s, 3) == HORA_OK, "write: %s", status_message());
    size_t len;
    uint8_t *b = (uint8_t *)test_read_file(path, &len);
    CHECK(b != NULL, "read back %s", path);
    if (!b) return;
    /* header 64 + table 3 x 64 = 256: model at 256 (3 bytes), empty at 320,
     * params at 320 (the empty one ends where it starts), file 330 bytes. */
    CHECK(s[0].offset == 256 && s[1].offset == 320 && s[2].offset == 320, "offsets %" PRIu64 " %" PRIu64 " %" PRIu64,
          s[0].offset, s[1].offset, s[2].offset);
    CHECK(len == 330, "file is %zu bytes, want 330", len);
    CHECK(memcmp(b, "HORACKPT", 8) == 0, "magic");
    CHECK(le32(b + 8) == 1 && le32(b + 12) == 3, "version %u, count %u", le32(b + 8), le32(b + 12));
    CHECK(le64(b + 16) == len && le64(b + 24) == 64 && le64(b + 32) == 192,
          "file_bytes %" PRIu64 " table %" PRIu64 " %" PRIu64, le64(b + 16), le64(b + 24), le64(b + 32));
    int zero = 1;
    for (int i = 40; i < 60; i++) zero &= b[i] == 0;
    CHECK(zero, "header reserved bytes 40-59 zero");
    uint32_t crc = tr_crc32c(tr_crc32c(0, b, 60), b + 64, 192);
    CHECK(le32(b + 60) == crc, "header CRC 0x%08x, want 0x%08x (bytes 0-59 then the table)", le32(b + 60), crc);
    const uint8_t *e = b + 64;
    CHECK(memcmp(e, "model\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 24) == 0, "name NUL-padded");
    CHECK(le64(e + 24) == 256 && le64(e + 32) == 3, "entry 0 offset/bytes");
    CHECK(le32(e + 40) == 0x364B3FB7u, "CRC32C(\"abc\") = 0x%08x, want 0x364b3fb7", le32(e + 40));
    CHECK(le32(e + 40) == s[0].crc, "writer's crc field");
    zero = 1;
    for (int k = 0; k < 3; k++)
        for (int i = 44; i < 64; i++) zero &= b[64 + 64 * k + i] == 0;
    CHECK(zero, "entry reserved bytes zero");
    CHECK(le64(b + 128 + 24) == 320 && le64(b + 128 + 32) == 0 && le32(b + 128 + 40) == 0,
          "empty entry (CRC of nothing 0)");
    CHECK(memcmp(b + 256, "abc", 3) == 0 && memcmp(b + 320, "0123456789", 10) == 0, "section bytes in place");
    zero = 1;
    for (int i = 259; i < 320; i++) zero &= b[i] == 0;
    CHECK(zero, "padding zero");
    free(b);
    CHECK(open_verify(path) == HORA_OK, "verify: %s", status_message());
}

/* ---- round trips ---- */

static void test_round_trip(test_rng_t *rng)
{
    static const uint64_t sizes[] = {0, 1, 3, 63, 64, 65, 127, 128, 1000, 4096, 70001, (1u << 20) + 3};
    char path[4200];
    snprintf(path, sizeof(path), "%s/round.hckpt", tmpdir);
    for (int trial = 0; trial < 40; trial++) {
        int n = trial == 0 ? 0 : trial == 1 ? TR_CKPT_MAX_SECTIONS : 1 + (int)test_rng_below(rng, TR_CKPT_MAX_SECTIONS);
        tr_ckpt_section_t s[TR_CKPT_MAX_SECTIONS];
        uint8_t *data[TR_CKPT_MAX_SECTIONS];
        memset(s, 0, sizeof(s));
        for (int i = 0; i < n; i++) {
            /* names of 1..23 characters, unique by their index prefix */
            int len = 1 + (int)test_rng_below(rng, TR_CKPT_NAME_BYTES - 1);
            snprintf(s[i].name, sizeof(s[i].name), "%c", 'a' + i);
            for (int k = 1; k < len; k++)
                s[i].name[k] = "abcdefghijklmnopqrstuvwxyz_.0123456789"[test_rng_below(rng, 38)];
            s[i].name[len] = '\0';
            s[i].bytes = sizes[test_rng_below(rng, trial < 20 ? 9 : 12)];
            data[i] = malloc(s[i].bytes + 1);
            for (uint64_t k = 0; k < s[i].bytes; k++) data[i][k] = (uint8_t)test_rng_u64(rng);
            s[i].data = data[i];
        }
        CHECK(write_file(path, s, n) == HORA_OK, "trial %d: write: %s", trial, status_message());
        tr_ckpt_file_t f;
        hora_status_t st = tr_ckpt_open(path, &f);
        CHECK(st == HORA_OK, "trial %d: open: %s", trial, status_message());
        if (st == HORA_OK) {
            struct stat sb;
            stat(path, &sb);
            CHECK(f.section_count == n && f.version == 1 && f.file_bytes == (uint64_t)sb.st_size,
                  "trial %d: %d sections, version %u, %" PRIu64 " bytes", trial, f.section_count, f.version,
                  f.file_bytes);
            CHECK(tr_ckpt_verify(&f) == HORA_OK, "trial %d: verify: %s", trial, status_message());
            for (int i = 0; i < n && i < f.section_count; i++) {
                const tr_ckpt_section_t *r = tr_ckpt_find(&f, s[i].name);
                CHECK(r == &f.sections[i], "trial %d: find '%s'", trial, s[i].name);
                if (!r) continue;
                CHECK(r->bytes == s[i].bytes && r->offset == s[i].offset && r->crc == s[i].crc && r->offset % 64 == 0,
                      "trial %d: section '%s' table entry", trial, s[i].name);
                CHECK(r->crc == tr_crc32c(0, data[i], s[i].bytes), "trial %d: '%s' CRC", trial, s[i].name);
                void *back = NULL;
                CHECK(tr_ckpt_read_alloc(&f, r, &back) == HORA_OK, "trial %d: read '%s': %s", trial, s[i].name,
                      status_message());
                if (back) {
                    CHECK(memcmp(back, data[i], s[i].bytes) == 0 && ((char *)back)[s[i].bytes] == '\0',
                          "trial %d: '%s' bytes back, NUL after them", trial, s[i].name);
                    free(back);
                }
            }
            CHECK(tr_ckpt_find(&f, "no-such-section") == NULL, "find of a missing name");
            tr_ckpt_close(&f);
            CHECK(f.fd == -1, "close");
        }
        for (int i = 0; i < n; i++) free(data[i]);
    }
}

/* ---- the five sections hora-train writes, corrupted ---- */

typedef struct {
    tr_ckpt_section_t s[5];
    float params[1000], momentum[1000], stats[130];
} sample_t;

static void sample_make(sample_t *x, test_rng_t *rng)
{
    static const char model[] = "format hora-model 1\narch resnet8\n";
    static const char state[] = "format hora-run-state 1\nstep 3\n";
    for (int i = 0; i < 1000; i++) {
        x->params[i] = (float)test_rng_u64(rng) / 1e19f;
        x->momentum[i] = -x->params[i];
    }
    for (int i = 0; i < 130; i++) x->stats[i] = (float)i;
    tr_ckpt_section_t s[5] = {
        {.name = "model", .data = model, .bytes = sizeof(model) - 1},
        {.name = "run_state", .data = state, .bytes = sizeof(state) - 1},
        {.name = "params", .data = x->params, .bytes = sizeof(x->params)},
        {.name = "momentum", .data = x->momentum, .bytes = sizeof(x->momentum)},
        {.name = "bn_stats", .data = x->stats, .bytes = sizeof(x->stats)},
    };
    memcpy(x->s, s, sizeof(s));
}

/* What each corruption test gets: the sample, its file read back whole (good, len bytes) and the path bad
 * (bad_size bytes) where it writes its corrupted copies. */
typedef void sample_test_fn(const sample_t *x, const uint8_t *good, size_t len, char *bad, size_t bad_size);

/* A fresh sample written to TMPDIR/<name>.hckpt, read back and handed to test with TMPDIR/<bad_name>.hckpt. */
static void sample_run(sample_test_fn *test, test_rng_t *rng, const char *name, const char *bad_name)
{
    sample_t *x = malloc(sizeof(*x));
    char path[4200], bad[4200];
    sample_make(x, rng);
    snprintf(path, sizeof(path), "%s/%s.hckpt", tmpdir, name);
    snprintf(bad, sizeof(bad), "%s/%s.hckpt", tmpdir, bad_name);
    CHECK(write_file(path, x->s, 5) == HORA_OK, "write: %s", status_message());
    size_t len;
    uint8_t *good = (uint8_t *)test_read_file(path, &len);
    if (good) test(x, good, len, bad, sizeof(bad));
    free(good);
    free(x);
}

static void test_flips(const sample_t *x, const uint8_t *good, size_t len, char *bad, size_t bad_size)
{
    (void)bad_size;
    uint8_t *b = malloc(len);
    if (!b) return;

    /* Every byte of the header and the table. */
    int header_ok = 1;
    for (size_t at = 0; at < 64 + 5 * 64; at++) {
        memcpy(b, good, len);
        b[at] ^= (uint8_t)(1u << (at % 8));
        put_bytes(bad, b, len);
        hora_status_t st = open_verify(bad);
        const char *want = at < 8 ? "not a hora checkpoint" : "header";
        if (st != HORA_ERR_CORRUPT || !strstr(status_message(), want) || !strstr(status_message(), "offset") ||
            !strstr(status_message(), bad)) {
            header_ok = 0;
            CHECK(0, "flip at byte %zu: status %d, message '%s' (want CORRUPT, '%s', the offset and the path)", at, st,
                  status_message(), want);
        }
    }
    CHECK(header_ok, "every header and table byte flipped is rejected");
    /* the message for a table byte */
    memcpy(b, good, len);
    b[64 + 64 + 30] ^= 4;
    put_bytes(bad, b, len);
    open_verify(bad);
    CHECK(strstr(status_message(), "offset 0: header and section table (384 bytes): CRC32C 0x") &&
              strstr(status_message(), ", stored 0x"),
          "table flip message: %s", status_message());

    /* Bytes of each section: the open succeeds (the table is intact), the
     * section fails its CRC by name and offset, the others still read. */
    for (int i = 0; i < 5; i++) {
        const tr_ckpt_section_t *s = &x->s[i];
        uint64_t where[3] = {s->offset, s->offset + s->bytes / 2, s->offset + s->bytes - 1};
        for (int k = 0; k < 3; k++) {
            memcpy(b, good, len);
            b[where[k]] ^= 0x80;
            put_bytes(bad, b, len);
            tr_ckpt_file_t f;
            hora_status_t st = tr_ckpt_open(bad, &f);
            CHECK(st == HORA_OK, "section '%s' flipped at %" PRIu64 ": open: %s", s->name, where[k], status_message());
            if (st != HORA_OK) continue;
            char want[4400];
            snprintf(want, sizeof(want), "%s: section '%s': offset %" PRIu64 ": CRC32C 0x", bad, s->name, s->offset);
            st = tr_ckpt_verify(&f);
            CHECK(st == HORA_ERR_CORRUPT && strncmp(status_message(), want, strlen(want)) == 0,
                  "verify, '%s' flipped at %" PRIu64 ": %d '%s', want '%s...'", s->name, where[k], st, status_message(),
                  want);
            for (int j = 0; j < 5; j++) {
                void *buf = NULL;
                st = tr_ckpt_read_alloc(&f, tr_ckpt_find(&f, x->s[j].name), &buf);
                if (j == i)
                    CHECK(st == HORA_ERR_CORRUPT && strncmp(status_message(), want, strlen(want)) == 0 && !buf,
                          "read of flipped '%s': %d '%s'", s->name, st, status_message());
                else
                    CHECK(st == HORA_OK && memcmp(buf, x->s[j].data, x->s[j].bytes) == 0,
                          "'%s' still reads with '%s' flipped: %s", x->s[j].name, s->name, status_message());
                free(buf);
            }
            tr_ckpt_close(&f);
        }
    }

    /* Padding between sections: no CRC covers it, verify checks it. */
    uint64_t pad = x->s[0].offset + x->s[0].bytes; /* after "model" */
    CHECK(pad % 64 != 0, "the sample has padding after 'model'");
    memcpy(b, good, len);
    b[pad + 1] = 1;
    put_bytes(bad, b, len);
    CHECK(open_verify(bad) == HORA_ERR_CORRUPT && strstr(status_message(), "padding at offset") &&
              strstr(status_message(), "before section 'run_state'"),
          "padding flip: %s", status_message());
    free(b);
}

static void test_truncation(const sample_t *x, const uint8_t *good, size_t len, char *cut, size_t cut_size)
{
    size_t points[] = {0,
                       1,
                       7,
                       8,
                       40,
                       63,
                       64,
                       65,
                       200,
                       383,
                       384,
                       (size_t)x->s[2].offset,
                       (size_t)x->s[2].offset + 100,
                       (size_t)x->s[4].offset,
                       len - 1};
    for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++) {
        size_t n = points[i];
        put_bytes(cut, good, n);
        hora_status_t st = open_verify(cut);
        char sizes[128];
        snprintf(sizes, sizeof(sizes), "the file has %zu bytes", n);
        CHECK(st == HORA_ERR_CORRUPT && strstr(status_message(), "truncated") && strstr(status_message(), sizes) &&
                  strstr(status_message(), cut),
              "cut at %zu: %d '%s'", n, st, status_message());
        if (n >= 64) {
            snprintf(sizes, sizeof(sizes), "its header says %zu", len);
            CHECK(strstr(status_message(), sizes) != NULL, "cut at %zu names the size the header gives: %s", n,
                  status_message());
        }
    }
    /* Bytes past the end the header gives. */
    uint8_t *longer = calloc(1, len + 5);
    memcpy(longer, good, len);
    put_bytes(cut, longer, len + 5);
    CHECK(open_verify(cut) == HORA_ERR_CORRUPT && strstr(status_message(), "5 bytes past the end"),
          "trailing bytes: %s", status_message());
    /* Not a checkpoint at all. */
    put_bytes(cut, "HORAREC1 and more bytes", 23);
    CHECK(open_verify(cut) == HORA_ERR_CORRUPT && strstr(status_message(), "not a hora checkpoint"), "%s",
          status_message());
    snprintf(cut, cut_size, "%s/does-not-exist.hckpt", tmpdir);
    CHECK(open_verify(cut) == HORA_ERR_SYSTEM && strstr(status_message(), "No such file"), "missing: %s",
          status_message());
    free(longer);
}

/* A table that passes the CRC but breaks a rule. */
static void test_table_rules(const sample_t *x, const uint8_t *good, size_t len, char *bad, size_t bad_size)
{
    (void)x;
    (void)bad_size;
    uint8_t *b = malloc(len);
    if (!b) return;
    struct {
        const char *what, *want;
        int entry, field; /* field: 0 name, 24 offset, 32 bytes, 44 reserved */
        uint64_t value;
        const char *name;
    } cases[] = {
        {"unaligned offset", "not a multiple of 64", 2, 24, 0, NULL},
        {"offset inside the table", "not a multiple of 64 after the table", 2, 24, 64, NULL},
        {"overlap", "overlaps section", 2, 32, 0, NULL},
        {"past the end", "ends past the end of the file", 4, 32, 1u << 20, NULL},
        {"duplicate name", "a second section of that name", 3, 0, 0, "params"},
        {"empty name", "bad name", 1, 0, 0, ""},
        {"name with a space", "bad name", 1, 0, 0, "run state"},
        {"name without NUL", "bad name", 1, 0, 0, "abcdefghijklmnopqrstuvwx"},
        {"reserved", "reserved bytes are not zero", 0, 44, 1, NULL},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        memcpy(b, good, len);
        uint8_t *e = b + 64 + 64 * cases[c].entry;
        if (cases[c].field == 0) {
            memset(e, 0, 24);
            memcpy(e, cases[c].name, strlen(cases[c].name));
        } else if (cases[c].field == 44) {
            e[50] = (uint8_t)cases[c].value;
        } else {
            uint64_t v = le64(e + cases[c].field);
            if (c == 0)
                v += 8;
            else if (c == 2)
                v += 64; /* params runs into momentum */
            else if (c == 3)
                v += cases[c].value;
            else
                v = cases[c].value;
            put64(e + cases[c].field, v);
        }
        reseal(b);
        put_bytes(bad, b, len);
        hora_status_t st = open_verify(bad);
        CHECK(st == HORA_ERR_CORRUPT && strstr(status_message(), cases[c].want) && strstr(status_message(), "offset"),
              "%s: %d '%s' (want '%s')", cases[c].what, st, status_message(), cases[c].want);
    }
    /* Header fields the CRC cannot be computed without. */
    memcpy(b, good, len);
    put32(b + 12, 17);
    put_bytes(bad, b, len);
    CHECK(open_verify(bad) == HORA_ERR_CORRUPT && strstr(status_message(), "offset 12: 17 sections"), "%s",
          status_message());
    memcpy(b, good, len);
    put32(b + 8, 2);
    reseal(b);
    put_bytes(bad, b, len);
    CHECK(open_verify(bad) == HORA_ERR_CORRUPT && strstr(status_message(), "format version 2"), "%s", status_message());
    free(b);
}

/* ---- the writer ---- */

static void test_writer_args(void)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/args.hckpt", tmpdir);
    tr_ckpt_section_t s[TR_CKPT_MAX_SECTIONS + 1];
    memset(s, 0, sizeof(s));
    for (int i = 0; i <= TR_CKPT_MAX_SECTIONS; i++) snprintf(s[i].name, sizeof(s[i].name), "s%d", i);
    CHECK(write_file(path, s, TR_CKPT_MAX_SECTIONS + 1) == HORA_ERR_INVALID_ARG, "17 sections: %s", status_message());
    strcpy(s[1].name, "s0");
    CHECK(write_file(path, s, 2) == HORA_ERR_INVALID_ARG && strstr(status_message(), "two sections called 's0'"),
          "duplicate: %s", status_message());
    strcpy(s[1].name, "has space");
    CHECK(write_file(path, s, 2) == HORA_ERR_INVALID_ARG && strstr(status_message(), "bad name"), "space: %s",
          status_message());
    memset(s[1].name, 'x', sizeof(s[1].name)); /* 24 characters, no NUL */
    CHECK(write_file(path, s, 2) == HORA_ERR_INVALID_ARG, "24-character name: %s", status_message());
    strcpy(s[1].name, "nodata");
    s[1].bytes = 5;
    CHECK(write_file(path, s, 2) == HORA_ERR_INVALID_ARG && strstr(status_message(), "no data"), "%s",
          status_message());
}

static void test_enospc(void)
{
    int fd = open("/dev/full", O_WRONLY);
    CHECK(fd >= 0, "/dev/full: %s", strerror(errno));
    if (fd < 0) return;
    static float big[4096];
    tr_ckpt_section_t s[2] = {{.name = "model", .data = "x", .bytes = 1},
                              {.name = "params", .data = big, .bytes = sizeof(big)}};
    hora_status_t st = tr_ckpt_write_fd(fd, "/ckpt/ckpt-0000000007.hckpt", s, 2);
    CHECK(st == HORA_ERR_SYSTEM && strstr(status_message(), "No space left on device") &&
              strstr(status_message(), "ckpt-0000000007.hckpt") && strstr(status_message(), "offset 0"),
          "/dev/full: %d '%s'", st, status_message());
    close(fd);
}

/* Short writes and EINTR: a pipe read slowly while SIGALRM (no
 * SA_RESTART) interrupts the writer; the bytes must equal a file's. */
static void on_alarm(int sig) { (void)sig; }

typedef struct {
    int fd;
    uint8_t *buf;
    size_t cap, len;
} drain_t;

static void *drain(void *arg)
{
    drain_t *d = arg;
    for (;;) {
        if (d->len == d->cap) break;
        size_t want = d->cap - d->len < 4096 ? d->cap - d->len : 4096;
        ssize_t r = read(d->fd, d->buf + d->len, want);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        d->len += (size_t)r;
    }
    return NULL;
}

static void test_short_writes(test_rng_t *rng)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/pipe-ref.hckpt", tmpdir);
    size_t n = 3u << 20;
    uint8_t *data = malloc(n);
    for (size_t i = 0; i < n; i++) data[i] = (uint8_t)test_rng_u64(rng);
    tr_ckpt_section_t s[2] = {{.name = "a", .data = data, .bytes = 1000}, {.name = "big", .data = data, .bytes = n}};
    CHECK(write_file(path, s, 2) == HORA_OK, "reference: %s", status_message());
    size_t ref_len;
    uint8_t *ref = (uint8_t *)test_read_file(path, &ref_len);

    int p[2];
    if (pipe(p) != 0 || !ref) {
        CHECK(0, "pipe: %s", strerror(errno));
        return;
    }
    struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART: writes return early */
    sigemptyset(&sa.sa_mask);
    struct sigaction old;
    sigaction(SIGALRM, &sa, &old);
    drain_t d = {.fd = p[0], .buf = malloc(ref_len + 1), .cap = ref_len + 1};
    pthread_t t;
    pthread_create(&t, NULL, drain, &d);
    struct itimerval it = {.it_interval = {0, 200}, .it_value = {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    hora_status_t st = tr_ckpt_write_fd(p[1], "pipe", s, 2);
    struct itimerval off = {0};
    setitimer(ITIMER_REAL, &off, NULL);
    close(p[1]);
    pthread_join(t, NULL);
    close(p[0]);
    sigaction(SIGALRM, &old, NULL);
    CHECK(st == HORA_OK, "write through an interrupted pipe: %s", status_message());
    CHECK(d.len == ref_len && memcmp(d.buf, ref, ref_len) == 0, "pipe got %zu bytes, the file %zu: %s", d.len, ref_len,
          d.len == ref_len ? "different bytes" : "different lengths");
    free(d.buf);
    free(ref);
    free(data);
}

int main(int argc, char **argv)
{
    const char *base = argc > 1 ? argv[1] : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    snprintf(tmpdir, sizeof(tmpdir), "%s/test_ckpt_file.XXXXXX", base);
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "mkdtemp %s: %s\n", tmpdir, strerror(errno));
        return 1;
    }
    test_rng_t rng = test_rng_seeded(TEST_RNG_SEED);
    test_layout();
    test_round_trip(&rng);
    sample_run(test_flips, &rng, "good", "flipped");
    sample_run(test_truncation, &rng, "whole", "cut");
    sample_run(test_table_rules, &rng, "rules", "rules-bad");
    test_writer_args();
    test_enospc();
    test_short_writes(&rng);
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (failures == 0 && !getenv("KEEP") && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    printf("test_ckpt_file: %d checks, %d failures -> %s\n", checks, failures, failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
