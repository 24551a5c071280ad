/*
 * test_record.c - record shards: CRC32C vectors, round trip, index seeking,
 * partitioning, corruption (flipped bytes, truncation, absurd lengths), the
 * message shared with the rest of the data pipeline (error.h), and
 * hora-mkrecord round trips on a tiny IDX file (HORA_MKRECORD = tool path),
 * also into output folders that do not exist yet or cannot be made.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "data_test.h"
#include "crc32c.h"
#include "base/status.h"
#include "file.h"
#include "record.h"

/* check.h's CHECK with the condition as its message. */
#define CHECK_TRUE(cond) CHECK(cond, "%s", #cond)

static char dir[256];

/* Record i: label, kind and payload are a function of i. */
static void make_record(uint64_t i, tr_record_t *rec, uint8_t *buf)
{
    memset(rec, 0, sizeof(*rec));
    rec->label = (int32_t)(i % 7) - (i % 50 == 0 ? 3 : 0); /* a few negative labels */
    if (i % 3 == 0) {
        rec->kind = TR_PAYLOAD_KIND_JPEG; /* fake JPEG bytes: shape is informational */
        rec->height = 10 + (uint32_t)i;
        rec->width = 20;
        rec->channels = 3;
        rec->payload_bytes = (i * 37) % 301; /* includes 0 bytes */
        buf[0] = 0xff;
    } else {
        rec->kind = TR_PAYLOAD_KIND_RAW_U8;
        rec->height = 1 + (uint32_t)(i % 5);
        rec->width = 1 + (uint32_t)(i % 11);
        rec->channels = i % 2 ? 1 : 3;
        rec->payload_bytes = (uint64_t)rec->height * rec->width * rec->channels;
    }
    for (uint64_t k = 0; k < rec->payload_bytes; k++) buf[k] = (uint8_t)(i * 131 + k * 7);
    rec->payload = buf;
}

static int check_record(uint64_t i, const tr_record_t *got)
{
    uint8_t buf[512];
    tr_record_t want;
    make_record(i, &want, buf);
    return got->label == want.label && got->kind == want.kind && got->height == want.height &&
           got->width == want.width && got->channels == want.channels && got->payload_bytes == want.payload_bytes &&
           (want.payload_bytes == 0 || memcmp(got->payload, buf, want.payload_bytes) == 0);
}

static void write_shard(const char *path, uint64_t count)
{
    tr_record_writer_t *w;
    CHECK_TRUE(tr_record_writer_open(path, &w) == HORA_OK);
    uint8_t buf[512];
    for (uint64_t i = 0; i < count; i++) {
        tr_record_t rec;
        make_record(i, &rec, buf);
        CHECK_TRUE(tr_record_writer_append(w, &rec) == HORA_OK);
    }
    CHECK_TRUE(tr_record_writer_count(w) == count);
    CHECK_TRUE(tr_record_writer_close(w) == HORA_OK);
}

static uint8_t *slurp(const char *path, size_t *bytes)
{
    uint8_t *buf = (uint8_t *)test_read_file(path, bytes);
    if (!buf) abort();
    return buf;
}

static void spill(const char *path, const uint8_t *buf, size_t bytes)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, bytes, f) != bytes) abort();
    fclose(f);
}

/* Open and read every record; 0 if all fine, else the first failing status.
 * Every failure must leave a message naming the file and an offset. */
static int read_all(const char *path, uint64_t *good_out)
{
    tr_record_reader_t *r;
    *good_out = 0;
    hora_status_t status = tr_record_reader_open(path, &r);
    if (status != HORA_OK) {
        CHECK_TRUE(strstr(status_message(), path) && strstr(status_message(), "offset"));
        return status;
    }
    tr_record_t rec = {0};
    int first = 0;
    for (uint64_t i = 0; i < tr_record_reader_count(r); i++) {
        status = tr_record_read(r, i, &rec);
        if (status != HORA_OK) {
            CHECK_TRUE(strstr(status_message(), "offset"));
            if (!first) first = status;
            continue;
        }
        CHECK_TRUE(check_record(i, &rec)); /* never a silently wrong sample */
        (*good_out)++;
    }
    tr_record_free(&rec);
    tr_record_reader_close(r);
    return first;
}

static void test_crc(void)
{
    CHECK_TRUE(tr_crc32c(0, "123456789", 9) == 0xE3069283u);
    CHECK_TRUE(tr_crc32c_sw(0, "123456789", 9) == 0xE3069283u);
    CHECK_TRUE(tr_crc32c(0, "", 0) == 0);
    uint8_t zeros[32] = {0}, ones[32];
    memset(ones, 0xff, sizeof(ones));
    CHECK_TRUE(tr_crc32c(0, zeros, 32) == 0x8A9136AAu); /* RFC 3720 B.4 */
    CHECK_TRUE(tr_crc32c(0, ones, 32) == 0x62A8AB43u);
    uint8_t data[1000];
    for (int i = 0; i < 1000; i++) data[i] = (uint8_t)(i * 29 + 3);
    for (size_t off = 0; off < 9; off++)
        for (size_t len = 0; len < 100; len += 7) {
            uint32_t a = tr_crc32c(0, data + off, len), b = tr_crc32c_sw(0, data + off, len);
            CHECK_TRUE(a == b);
            uint32_t chained = tr_crc32c(tr_crc32c(0, data + off, len / 2), data + off + len / 2, len - len / 2);
            CHECK_TRUE(chained == a);
        }
    printf("crc32c: vectors ok (hardware path %s)\n", tr_crc32c_hw_available() ? "used" : "unavailable");
}

static void test_round_trip(void)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/rt.hrec", dir);
    const uint64_t count = 1000;
    write_shard(path, count);
    uint64_t good;
    CHECK_TRUE(read_all(path, &good) == 0 && good == count);

    /* Seeking: random order, reusing one buffer. */
    tr_record_reader_t *r;
    CHECK_TRUE(tr_record_reader_open(path, &r) == HORA_OK);
    CHECK_TRUE(tr_record_reader_count(r) == count);
    CHECK_TRUE(tr_record_reader_offset(r, 0) == TR_RECORD_SHARD_HEADER_BYTES);
    tr_record_t rec = {0};
    uint64_t x = 12345;
    for (int k = 0; k < 2000; k++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        uint64_t i = (x >> 33) % count;
        CHECK_TRUE(tr_record_read(r, i, &rec) == HORA_OK && check_record(i, &rec));
    }
    CHECK_TRUE(tr_record_read(r, count, &rec) == HORA_ERR_INVALID_ARG);
    tr_record_free(&rec);
    tr_record_reader_close(r);

    /* Empty shard. */
    snprintf(path, sizeof(path), "%s/empty.hrec", dir);
    write_shard(path, 0);
    CHECK_TRUE(read_all(path, &good) == 0 && good == 0);

    /* Writer rejects a raw payload whose size does not match its shape. */
    tr_record_writer_t *w;
    CHECK_TRUE(tr_record_writer_open(path, &w) == HORA_OK);
    uint8_t b[6] = {0};
    tr_record_t bad = {
        .kind = TR_PAYLOAD_KIND_RAW_U8, .height = 2, .width = 2, .channels = 1, .payload_bytes = 6, .payload = b};
    CHECK_TRUE(tr_record_writer_append(w, &bad) == HORA_ERR_INVALID_ARG);
    bad.kind = 9;
    CHECK_TRUE(tr_record_writer_append(w, &bad) == HORA_ERR_INVALID_ARG);
    CHECK_TRUE(tr_record_writer_close(w) == HORA_OK);
    printf("round trip: %" PRIu64 " records, 2000 random seeks ok\n", count);
}

static void test_partition_and_names(void)
{
    for (uint64_t count = 0; count < 40; count++)
        for (unsigned parts = 1; parts < 9; parts++) {
            uint64_t next = 0;
            for (unsigned p = 0; p < parts; p++) {
                uint64_t begin, end;
                tr_record_partition(count, p, parts, &begin, &end);
                CHECK_TRUE(begin == next && end >= begin);
                CHECK_TRUE(end - begin == count / parts || end - begin == count / parts + 1);
                next = end;
            }
            CHECK_TRUE(next == count);
        }
    char name[64];
    CHECK_TRUE(tr_record_shard_name("x/train", 3, 8, name, sizeof(name)) == HORA_OK);
    CHECK_TRUE(strcmp(name, "x/train-00003-of-00008.hrec") == 0);
    CHECK_TRUE(tr_record_shard_name("x", 8, 8, name, sizeof(name)) == HORA_ERR_INVALID_ARG);
    CHECK_TRUE(tr_record_shard_name("a-very-long-prefix", 0, 1, name, 10) == HORA_ERR_INVALID_ARG);
    printf("partition and shard names ok\n");
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Rewrite a record header with new fields and a correct CRC, so only the
 * length validation stands between it and a huge allocation. */
static void forge_header(uint8_t *h, uint64_t payload_bytes)
{
    put64(h, payload_bytes);
    uint32_t crc = tr_crc32c(0, h, 24);
    for (int i = 0; i < 4; i++) h[24 + i] = (uint8_t)(crc >> (8 * i));
}

static void test_corruption(void)
{
    char path[512], bad_path[512];
    snprintf(path, sizeof(path), "%s/c.hrec", dir);
    snprintf(bad_path, sizeof(bad_path), "%s/bad.hrec", dir);
    const uint64_t count = 50;
    write_shard(path, count);
    size_t bytes;
    uint8_t *orig = slurp(path, &bytes);
    uint8_t *buf = malloc(bytes);
    uint64_t good;

    /* Flip every byte in turn (a sample of them for speed): either the open
     * fails or exactly the touched record fails; never a wrong sample. */
    int open_failures = 0, record_failures = 0;
    for (size_t pos = 0; pos < bytes; pos += (pos < 200 ? 1 : 13)) {
        memcpy(buf, orig, bytes);
        buf[pos] ^= 0x5a;
        spill(bad_path, buf, bytes);
        int status = read_all(bad_path, &good);
        CHECK_TRUE(status != 0);
        if (status != 0 && good == 0 && status != HORA_OK) open_failures++;
        if (good == count - 1) record_failures++;
        CHECK_TRUE(good == 0 || good == count - 1);
    }
    CHECK_TRUE(open_failures > 0 && record_failures > 0);

    /* Record 1's header, payload: flipped -> that record only, message with its offset. */
    tr_record_reader_t *r;
    CHECK_TRUE(tr_record_reader_open(path, &r) == HORA_OK);
    uint64_t off1 = tr_record_reader_offset(r, 1), off2 = tr_record_reader_offset(r, 2);
    tr_record_reader_close(r);
    char expect[64];
    memcpy(buf, orig, bytes);
    buf[off1 + 4] ^= 1;
    spill(bad_path, buf, bytes);
    CHECK_TRUE(tr_record_reader_open(bad_path, &r) == HORA_OK);
    tr_record_t rec = {0};
    CHECK_TRUE(tr_record_read(r, 1, &rec) == TR_ERR_CORRUPT);
    snprintf(expect, sizeof(expect), "offset %" PRIu64 ":", off1);
    CHECK_TRUE(strstr(status_message(), expect) != NULL);
    printf("  header flip -> %s\n", status_message());
    CHECK_TRUE(tr_record_read(r, 2, &rec) == HORA_OK && check_record(2, &rec));
    tr_record_reader_close(r);

    memcpy(buf, orig, bytes);
    buf[off2 - 5] ^= 1; /* last payload byte of record 1 */
    spill(bad_path, buf, bytes);
    CHECK_TRUE(tr_record_reader_open(bad_path, &r) == HORA_OK);
    CHECK_TRUE(tr_record_read(r, 1, &rec) == TR_ERR_CORRUPT);
    CHECK_TRUE(strstr(status_message(), "payload CRC") != NULL);
    printf("  payload flip -> %s\n", status_message());
    tr_record_reader_close(r);

    /* Index flip. */
    memcpy(buf, orig, bytes);
    buf[bytes - 4 - 8 * 10] ^= 1;
    spill(bad_path, buf, bytes);
    CHECK_TRUE(tr_record_reader_open(bad_path, &r) == TR_ERR_CORRUPT);
    CHECK_TRUE(strstr(status_message(), "index CRC") != NULL);
    printf("  index flip -> %s\n", status_message());

    /* Absurd lengths with valid CRCs: payload 2^62, and payload one too big. */
    uint64_t absurd[] = {UINT64_C(1) << 62, UINT64_MAX, (off2 - off1) - 32 + 1, 1u << 29};
    for (size_t k = 0; k < sizeof(absurd) / sizeof(absurd[0]); k++) {
        memcpy(buf, orig, bytes);
        forge_header(buf + off1, absurd[k]);
        spill(bad_path, buf, bytes);
        CHECK_TRUE(tr_record_reader_open(bad_path, &r) == HORA_OK);
        CHECK_TRUE(tr_record_read(r, 1, &rec) == TR_ERR_CORRUPT);
        CHECK_TRUE(rec.payload_capacity_bytes < 4096); /* nothing big was allocated */
        tr_record_reader_close(r);
    }
    printf("  absurd length -> %s\n", status_message());

    /* Absurd record count / index offset in the shard header (with a valid CRC). */
    uint64_t counts[] = {UINT64_C(1) << 62, UINT64_MAX, count + 1, UINT64_MAX / 8 + 1};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        memcpy(buf, orig, bytes);
        put64(buf + 16, counts[k]);
        uint32_t crc = tr_crc32c(0, buf, 32);
        for (int i = 0; i < 4; i++) buf[32 + i] = (uint8_t)(crc >> (8 * i));
        spill(bad_path, buf, bytes);
        CHECK_TRUE(tr_record_reader_open(bad_path, &r) == TR_ERR_CORRUPT);
    }
    printf("  absurd count -> %s\n", status_message());

    /* Truncation at many offsets: always a clean error at open. */
    for (size_t len = 0; len < bytes; len += (len < 100 ? 1 : 37)) {
        spill(bad_path, orig, len);
        CHECK_TRUE(tr_record_reader_open(bad_path, &r) != HORA_OK);
    }
    spill(bad_path, orig, bytes / 2);
    CHECK_TRUE(tr_record_reader_open(bad_path, &r) == TR_ERR_CORRUPT);
    printf("  truncated -> %s\n", status_message());
    /* Trailing garbage is not accepted either. */
    spill(bad_path, orig, bytes);
    FILE *f = fopen(bad_path, "ab");
    fputc(0, f);
    fclose(f);
    CHECK_TRUE(tr_record_reader_open(bad_path, &r) == TR_ERR_CORRUPT);
    /* Missing file. */
    CHECK_TRUE(tr_record_reader_open("/nonexistent/x.hrec", &r) == HORA_ERR_SYSTEM);

    tr_record_free(&rec);
    free(buf);
    free(orig);
    printf("corruption cases ok\n");
}

/* record.c sets libhora-base's message (base/status.h), the one the loader,
 * dataset and every caller read: a record failure is in status_message(),
 * and a message built from it ("bad shard: %s", as dataset.c does) keeps the
 * old text intact. A place is written the one way, every part optional:
 * "rank R: PATH: section 'S': tensor 'T': offset N: what". */
static void test_shared_error(void)
{
    status_clear();
    CHECK_TRUE(status_message()[0] == '\0');
    tr_record_reader_t *r;
    CHECK_TRUE(tr_record_reader_open("/nonexistent/shared.hrec", &r) == HORA_ERR_SYSTEM);
    const char *message = status_message();
    CHECK_TRUE(message == status_message());
    CHECK_TRUE(strncmp(message, "/nonexistent/shared.hrec: offset 0: cannot open: ", 49) == 0);
    char before[1024];
    snprintf(before, sizeof(before), "%s", message);
    CHECK_TRUE(status_set(TR_ERR_CORRUPT, "bad shard: %s", status_message()) == TR_ERR_CORRUPT);
    char want[1100];
    snprintf(want, sizeof(want), "bad shard: %s", before);
    CHECK_TRUE(strcmp(status_message(), want) == 0);
    status_set(TR_ERR_CORRUPT, "%s", status_message()); /* copying a message onto itself */
    CHECK_TRUE(strcmp(status_message(), want) == 0);
    status_at(HORA_ERR_CORRUPT,
              (status_where_t){.file = "f.hckpt",
                               .section = "params",
                               .tensor = "fc.bias",
                               .offset = 64,
                               .has_offset = 1,
                               .rank = 3,
                               .has_rank = 1},
              "CRC32C %d", 5);
    CHECK_TRUE(strcmp(status_message(), "rank 3: f.hckpt: section 'params': tensor 'fc.bias': offset 64: CRC32C 5") ==
               0);
    status_at(HORA_ERR_CORRUPT, STATUS_SECTION_AT("f.hckpt", "model", 0), "x");
    CHECK_TRUE(strcmp(status_message(), "f.hckpt: section 'model': offset 0: x") == 0);
    status_at(HORA_ERR_CORRUPT, STATUS_FILE("f.hckpt"), "y");
    CHECK_TRUE(strcmp(status_message(), "f.hckpt: y") == 0);
    /* A path longer than the buffer is cut, not overrun. */
    char long_path[3000];
    memset(long_path, 'p', sizeof(long_path) - 1);
    long_path[sizeof(long_path) - 1] = '\0';
    CHECK_TRUE(status_at(HORA_ERR_SYSTEM, STATUS_FILE_AT(long_path, 7), "x") == HORA_ERR_SYSTEM);
    CHECK_TRUE(strlen(status_message()) < sizeof(long_path) - 1 && strncmp(status_message(), "ppp", 3) == 0);
    printf("  shared message -> %s\n", want);
    printf("shared error message ok\n");
}

static void be32(FILE *f, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    fwrite(b, 1, 4, f);
}

#ifdef HORA_MKRECORD
#define MK_N 23
#define MK_ROWS 4
#define MK_COLS 5

/* The shards hora-mkrecord --shards 3 made from test_mkrecord's IDX files:
 * input record i is record i/3 of shard i%3. */
static void check_mk_shards(const char *prefix)
{
    const uint32_t n = MK_N, rows = MK_ROWS, cols = MK_COLS;
    for (unsigned s = 0; s < 3; s++) {
        char path[600];
        CHECK_TRUE(tr_record_shard_name(prefix, s, 3, path, sizeof(path)) == HORA_OK);
        tr_record_reader_t *r = NULL;
        CHECK_TRUE(tr_record_reader_open(path, &r) == HORA_OK);
        if (!r) continue;
        CHECK_TRUE(tr_record_reader_count(r) == (n - s + 2) / 3);
        tr_record_t rec = {0};
        for (uint64_t j = 0; j < tr_record_reader_count(r); j++) {
            uint32_t i = (uint32_t)(j * 3 + s);
            CHECK_TRUE(tr_record_read(r, j, &rec) == HORA_OK);
            CHECK_TRUE(rec.label == (int32_t)(i % 4) && rec.kind == TR_PAYLOAD_KIND_RAW_U8);
            CHECK_TRUE(rec.height == rows && rec.width == cols && rec.channels == 1);
            int same = rec.payload_bytes == rows * cols;
            for (uint32_t k = 0; same && k < rows * cols; k++) same = rec.payload[k] == (uint8_t)((i * 17 + k) & 0xff);
            CHECK_TRUE(same);
        }
        tr_record_free(&rec);
        tr_record_reader_close(r);
    }
}

/* hora-mkrecord into prefix whose folder cannot be made: exit 1, a message
 * naming want_in_message, and no shard. */
static void check_mk_fails(const char *images, const char *labels, const char *prefix, const char *want_in_message)
{
    char err_path[600], shard[700];
    snprintf(err_path, sizeof(err_path), "%s/mkdir-err.txt", dir);
    CHECK_TRUE(data_test_sh("%s --from idx %s %s %s --shards 3 >/dev/null 2>%s", HORA_MKRECORD, images, labels, prefix,
                            err_path) == 1);
    char *message = test_read_file(err_path, NULL);
    CHECK(message && strstr(message, "cannot create directory") && strstr(message, want_in_message),
          "hora-mkrecord into %s: stderr '%s' does not say 'cannot create directory' and '%s'", prefix,
          message ? message : "(unreadable)", want_in_message);
    printf("  %s -> %s", prefix, message ? message : "(no message)\n");
    free(message);
    CHECK_TRUE(tr_record_shard_name(prefix, 0, 3, shard, sizeof(shard)) == HORA_OK);
    CHECK_TRUE(access(shard, F_OK) != 0);
}
#endif

static void test_mkrecord(void)
{
#ifdef HORA_MKRECORD
    char images[512], labels[512], prefix[512];
    snprintf(images, sizeof(images), "%s/img.idx", dir);
    snprintf(labels, sizeof(labels), "%s/lbl.idx", dir);
    snprintf(prefix, sizeof(prefix), "%s/mk", dir);
    const uint32_t n = MK_N, rows = MK_ROWS, cols = MK_COLS;
    FILE *fi = fopen(images, "wb"), *fl = fopen(labels, "wb");
    be32(fi, 0x803);
    be32(fi, n);
    be32(fi, rows);
    be32(fi, cols);
    be32(fl, 0x801);
    be32(fl, n);
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < rows * cols; k++) fputc((int)((i * 17 + k) & 0xff), fi);
        fputc((int)(i % 4), fl);
    }
    fclose(fi);
    fclose(fl);
    CHECK_TRUE(data_test_sh("%s --from idx %s %s %s --shards 3 >/dev/null", HORA_MKRECORD, images, labels, prefix) ==
               0);
    check_mk_shards(prefix);
    CHECK_TRUE(data_test_sh("%s --verify %s-0000[0-2]-of-00003.hrec >/dev/null", HORA_MKRECORD, prefix) == 0);
    /* Corrupt one payload byte of shard 1: --verify exits 1. */
    char path[600];
    tr_record_shard_name(prefix, 1, 3, path, sizeof(path));
    FILE *f = fopen(path, "r+b");
    fseek(f, TR_RECORD_SHARD_HEADER_BYTES + TR_RECORD_HEADER_BYTES + 3, SEEK_SET);
    int c = fgetc(f);
    fseek(f, TR_RECORD_SHARD_HEADER_BYTES + TR_RECORD_HEADER_BYTES + 3, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
    CHECK_TRUE(data_test_sh("%s --verify %s-0000[0-2]-of-00003.hrec >/dev/null 2>&1", HORA_MKRECORD, prefix) == 1);
    printf("hora-mkrecord idx round trip and --verify ok\n");

    /* The output folder and its missing parents are made, like mkdir -p
     * (also through "//"); the same shards land there. */
    char nested[600], classes[700];
    snprintf(nested, sizeof(nested), "%s/out/new//deeper/fm", dir);
    CHECK_TRUE(data_test_sh("%s --from idx %s %s %s --shards 3 >/dev/null", HORA_MKRECORD, images, labels, nested) ==
               0);
    check_mk_shards(nested);
    snprintf(classes, sizeof(classes), "%s.classes", nested);
    CHECK_TRUE(access(classes, F_OK) == 0);
    /* Into an existing folder again: fine. */
    CHECK_TRUE(data_test_sh("%s --from idx %s %s %s --shards 3 >/dev/null", HORA_MKRECORD, images, labels, nested) ==
               0);
    check_mk_shards(nested);
    /* A file where a folder must go: exit 1 and a message naming it. */
    char blocker[600], blocked[700];
    snprintf(blocker, sizeof(blocker), "%s/blocker", dir);
    spill(blocker, (const uint8_t *)"x", 1);
    snprintf(blocked, sizeof(blocked), "%s/sub/fm", blocker);
    check_mk_fails(images, labels, blocked, blocker);
    /* A folder that may not be written to (root may write anywhere). */
    if (geteuid() != 0) {
        char locked[600], denied[700], denied_dir[700];
        snprintf(locked, sizeof(locked), "%s/locked", dir);
        CHECK_TRUE(mkdir(locked, 0555) == 0);
        snprintf(denied, sizeof(denied), "%s/new/fm", locked);
        snprintf(denied_dir, sizeof(denied_dir), "%s/new", locked);
        check_mk_fails(images, labels, denied, denied_dir);
        chmod(locked, 0755);
    } else {
        printf("  permission case skipped (running as root)\n");
    }
    printf("hora-mkrecord makes its output folder (mkdir -p) ok\n");
#else
    printf("hora-mkrecord test skipped (HORA_MKRECORD not defined)\n");
#endif
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/test_record.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_crc();
    test_round_trip();
    test_partition_and_names();
    test_corruption();
    test_shared_error();
    test_mkrecord();
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    printf("test_record: %d checks, %d failures -> %s\n", checks, failures, failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
