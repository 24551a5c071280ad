/*
 * npz.c - .npy and .npz files (npz.h).
 *
 * .npy 1.0: "\x93NUMPY", major 1, minor 0, a u16 header length, then an
 * ASCII Python dict {'descr': '<f4', 'fortran_order': False, 'shape': (..), }
 * padded with spaces and ending in '\n' so that the data start at a
 * multiple of 64; then the array in C order. (2.0 differs only in a u32
 * header length.)
 *
 * .npz: a zip archive of NAME.npy members. Each is stored (method 0): a
 * local header (signature 0x04034b50, version 20, no flags, the fixed time
 * 1980-01-01 00:00 so that equal checkpoints give equal archives, CRC-32,
 * sizes, name), the bytes; at the end a central directory entry per member
 * (0x02014b50, with the local header's offset) and the end record
 * (0x06054b50: entry count, directory size and offset).
 */
#define _GNU_SOURCE
#include "npz.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define DOS_DATE_1980_01_01 0x0021

static void put16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static size_t dtype_size(npz_dtype_t d) { return d == NPZ_I64 ? 8 : 4; }
static const char *dtype_descr(npz_dtype_t d) { return d == NPZ_I64 ? "<i8" : "<f4"; }

/* The .npy header for the array, padded: its length. */
static size_t npy_header(uint8_t *h, size_t cap, npz_dtype_t dtype, int ndim, const int64_t *shape)
{
    char dict[512], dims[256] = "";
    size_t used = 0;
    for (int i = 0; i < ndim; i++)
        used += (size_t)snprintf(dims + used, sizeof(dims) - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (ndim == 1) snprintf(dims + used, sizeof(dims) - used, ",");
    int n = snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", dtype_descr(dtype),
                     dims);
    size_t total = (10 + (size_t)n + 1 + 63) / 64 * 64; /* magic .. '\n', to a multiple of 64 */
    if (total > cap) return 0;
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    put16(h + 8, (uint32_t)(total - 10));
    memcpy(h + 10, dict, (size_t)n);
    memset(h + 10 + n, ' ', total - 10 - (size_t)n - 1);
    h[total - 1] = '\n';
    return total;
}

static size_t array_count(int ndim, const int64_t *shape)
{
    size_t c = 1;
    for (int i = 0; i < ndim; i++) c *= (size_t)shape[i];
    return c;
}

hora_status_t npz_write_npy(const char *path, npz_dtype_t dtype, int ndim, const int64_t *shape, const void *data)
{
    uint8_t h[1024];
    size_t hn = npy_header(h, sizeof(h), dtype, ndim, shape);
    FILE *f = fopen(path, "wb");
    if (!f) return status_at(HORA_ERR_SYSTEM, STATUS_FILE(path), "cannot create: %s", strerror(errno));
    size_t bytes = array_count(ndim, shape) * dtype_size(dtype);
    int ok = hn > 0 && fwrite(h, 1, hn, f) == hn && fwrite(data, 1, bytes, f) == bytes;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (!ok) {
        unlink(path);
        return status_at(HORA_ERR_SYSTEM, STATUS_FILE(path), "write failed: %s", strerror(e));
    }
    return HORA_OK;
}

/* ---- reading .npy ---- */

void npz_array_free(npz_array_t *a)
{
    free(a->data);
    memset(a, 0, sizeof(*a));
}

/* The value after 'key': in the header dict, or NULL. */
static const char *dict_value(const char *dict, const char *key)
{
    char k[64];
    snprintf(k, sizeof(k), "'%s':", key);
    const char *p = strstr(dict, k);
    if (!p) return NULL;
    p += strlen(k);
    while (*p == ' ') p++;
    return p;
}

hora_status_t npz_read_f32(const char *path, npz_array_t *out)
{
    memset(out, 0, sizeof(*out));
    FILE *f = fopen(path, "rb");
    if (!f) return status_at(HORA_ERR_SYSTEM, STATUS_FILE(path), "cannot open: %s", strerror(errno));
    uint8_t pre[12];
    char *dict = NULL;
    hora_status_t rc = HORA_ERR_CORRUPT;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        rc = status_at(HORA_ERR_CORRUPT, STATUS_FILE(path), "not a .npy file (no \\x93NUMPY magic)");
        goto out;
    }
    size_t hlen;
    if (pre[6] == 1) {
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            rc = status_at(HORA_ERR_CORRUPT, STATUS_FILE(path), "truncated header");
            goto out;
        }
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    } else {
        rc = status_at(HORA_ERR_CORRUPT, STATUS_FILE(path), ".npy format version %d.%d (this reads 1.0 and 2.0)",
                       pre[6], pre[7]);
        goto out;
    }
    if (hlen > (1u << 20) || !(dict = malloc(hlen + 1)) || fread(dict, 1, hlen, f) != hlen) {
        rc = status_at(HORA_ERR_CORRUPT, STATUS_FILE(path), "bad or truncated .npy header");
        goto out;
    }
    dict[hlen] = '\0';
    const char *descr = dict_value(dict, "descr"), *order = dict_value(dict, "fortran_order"),
               *shape = dict_value(dict, "shape");
    if (!descr || !order || !shape) {
        rc = status_at(HORA_ERR_CORRUPT, STATUS_FILE(path), ".npy header without descr, fortran_order or shape: %s",
                       dict);
        goto out;
    }
    if (strncmp(descr, "'<f4'", 5) != 0) {
        rc = status_at(HORA_ERR_CORRUPT, STATUS_FILE(path),
                       "dtype %.8s, expected '<f4' (float32; np.asarray(x, dtype='<f4'))", descr);
        goto out;
    }
    if (strncmp(order, "False", 5) != 0) {
        rc = status_at(HORA_ERR_CORRUPT, STATUS_FILE(path), "Fortran order; expected C order (np.ascontiguousarray)");
        goto out;
    }
    if (*shape != '(') {
        rc = status_at(HORA_ERR_CORRUPT, STATUS_FILE(path), "bad shape in the .npy header");
        goto out;
    }
    const char *p = shape + 1;
    out->count = 1;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        char *end;
        errno = 0;
        long long d = strtoll(p, &end, 10);
        if (end == p || errno || d < 0 || out->ndim == NPZ_MAX_DIMS || d > (1LL << 40)) {
            rc = status_at(HORA_ERR_CORRUPT, STATUS_FILE(path), "bad shape in the .npy header");
            goto out;
        }
        out->shape[out->ndim++] = d;
        out->count *= (size_t)d;
        if (out->count > ((size_t)1 << 40)) {
            rc = status_at(HORA_ERR_INVALID_ARG, STATUS_FILE(path), "array too large");
            goto out;
        }
        p = end;
    }
    out->data = malloc(out->count ? out->count * sizeof(float) : 1);
    if (!out->data) {
        rc = status_at(HORA_ERR_NO_MEMORY, STATUS_FILE(path), "out of memory for %zu floats", out->count);
        goto out;
    }
    if (fread(out->data, sizeof(float), out->count, f) != out->count) {
        rc = status_at(HORA_ERR_CORRUPT, STATUS_FILE(path), "truncated: fewer than the %zu floats its header gives",
                       out->count);
        goto out;
    }
    if (fgetc(f) != EOF) {
        rc = status_at(HORA_ERR_CORRUPT, STATUS_FILE(path), "bytes after the %zu floats its header gives", out->count);
        goto out;
    }
    rc = HORA_OK;
out:
    free(dict);
    fclose(f);
    if (rc != 0) npz_array_free(out);
    return rc;
}

/* ---- writing .npz ---- */

typedef struct {
    char *name;
    uint32_t crc, bytes, offset;
} member_t;

struct npz_writer {
    FILE *file;
    char *path;
    uint64_t offset;
    member_t *members;
    int count, capacity;
    int failed;
};

npz_writer_t *npz_open(const char *path)
{
    npz_writer_t *w = calloc(1, sizeof(*w));
    if (!w || !(w->path = strdup(path))) {
        free(w);
        status_at(HORA_ERR_NO_MEMORY, STATUS_FILE(path), "out of memory");
        return NULL;
    }
    w->file = fopen(path, "wb");
    if (!w->file) {
        status_at(HORA_ERR_SYSTEM, STATUS_FILE(path), "cannot create: %s", strerror(errno));
        free(w->path);
        free(w);
        return NULL;
    }
    return w;
}

static hora_status_t put(npz_writer_t *w, const void *data, size_t n)
{
    if (n && fwrite(data, 1, n, w->file) != n) {
        w->failed = 1;
        return status_at(HORA_ERR_SYSTEM, STATUS_FILE(w->path), "write failed at offset %llu: %s",
                         (unsigned long long)w->offset, strerror(errno));
    }
    w->offset += n;
    return HORA_OK;
}

hora_status_t npz_add(npz_writer_t *w, const char *name, npz_dtype_t dtype, int ndim, const int64_t *shape,
                      const void *data)
{
    uint8_t h[1024];
    size_t hn = npy_header(h, sizeof(h), dtype, ndim, shape);
    size_t data_bytes = array_count(ndim, shape) * dtype_size(dtype);
    char member[512];
    int name_len = snprintf(member, sizeof(member), "%s.npy", name);
    if (hn == 0 || name_len <= 0 || (size_t)name_len >= sizeof(member))
        return status_at(HORA_ERR_INVALID_ARG, STATUS_FILE(w->path), "entry '%s': name or shape too long", name);
    uint64_t bytes = hn + data_bytes;
    if (w->count >= 65535 || bytes > UINT32_MAX || w->offset + 30 + (uint64_t)name_len + bytes > UINT32_MAX) {
        w->failed = 1;
        return status_at(HORA_ERR_INVALID_ARG, STATUS_FILE(w->path),
                         "entry '%s': past the 4 GiB / 65535 entries of a zip without ZIP64", name);
    }
    if (w->count == w->capacity) {
        int cap = w->capacity ? 2 * w->capacity : 64;
        member_t *m = realloc(w->members, (size_t)cap * sizeof(*m));
        if (!m) {
            w->failed = 1;
            return status_at(HORA_ERR_NO_MEMORY, STATUS_FILE(w->path), "out of memory");
        }
        w->members = m;
        w->capacity = cap;
    }
    member_t *m = &w->members[w->count];
    m->name = strdup(member);
    if (!m->name) {
        w->failed = 1;
        return status_at(HORA_ERR_NO_MEMORY, STATUS_FILE(w->path), "out of memory");
    }
    w->count++;
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, h, (uInt)hn);
    const uint8_t *d = data;
    for (size_t done = 0; done < data_bytes;) { /* uInt is 32 bits */
        size_t n = data_bytes - done > (1u << 30) ? (1u << 30) : data_bytes - done;
        crc = crc32(crc, d + done, (uInt)n);
        done += n;
    }
    m->crc = (uint32_t)crc;
    m->bytes = (uint32_t)bytes;
    m->offset = (uint32_t)w->offset;

    uint8_t local[30];
    memset(local, 0, sizeof(local));
    put32(local, 0x04034b50);
    put16(local + 4, 20); /* version needed: 2.0 */
    put16(local + 10, 0); /* time 00:00 */
    put16(local + 12, DOS_DATE_1980_01_01);
    put32(local + 14, m->crc);
    put32(local + 18, m->bytes); /* compressed = uncompressed: stored */
    put32(local + 22, m->bytes);
    put16(local + 26, (uint32_t)name_len);
    hora_status_t status = put(w, local, sizeof(local));
    if (status == HORA_OK) status = put(w, member, (size_t)name_len);
    if (status == HORA_OK) status = put(w, h, hn);
    if (status == HORA_OK) status = put(w, data, data_bytes);
    return status;
}

static void writer_free(npz_writer_t *w)
{
    for (int i = 0; i < w->count; i++) free(w->members[i].name);
    free(w->members);
    free(w->path);
    free(w);
}

void npz_abort(npz_writer_t *w)
{
    if (!w) return;
    fclose(w->file);
    unlink(w->path);
    writer_free(w);
}

hora_status_t npz_close(npz_writer_t *w)
{
    hora_status_t rc = w->failed ? HORA_ERR_SYSTEM : HORA_OK; /* its message set when it failed */
    uint64_t dir_offset = w->offset;
    for (int i = 0; i < w->count && rc == 0; i++) {
        const member_t *m = &w->members[i];
        uint8_t c[46];
        memset(c, 0, sizeof(c));
        put32(c, 0x02014b50);
        put16(c + 4, 20); /* made by: 2.0 (MS-DOS attributes, none set) */
        put16(c + 6, 20);
        put16(c + 14, DOS_DATE_1980_01_01);
        put32(c + 16, m->crc);
        put32(c + 20, m->bytes);
        put32(c + 24, m->bytes);
        put16(c + 28, (uint32_t)strlen(m->name));
        put32(c + 42, m->offset);
        rc = put(w, c, sizeof(c));
        if (rc == HORA_OK) rc = put(w, m->name, strlen(m->name));
    }
    if (rc == 0 && w->offset > UINT32_MAX)
        rc = status_at(HORA_ERR_INVALID_ARG, STATUS_FILE(w->path), "over 4 GiB (no ZIP64)");
    if (rc == 0) {
        uint8_t e[22];
        memset(e, 0, sizeof(e));
        put32(e, 0x06054b50);
        put16(e + 8, (uint32_t)w->count);
        put16(e + 10, (uint32_t)w->count);
        put32(e + 12, (uint32_t)(w->offset - dir_offset));
        put32(e + 16, (uint32_t)dir_offset);
        rc = put(w, e, sizeof(e));
    }
    if (fclose(w->file) != 0 && rc == 0)
        rc = status_at(HORA_ERR_SYSTEM, STATUS_FILE(w->path), "write failed: %s", strerror(errno));
    if (rc != 0) unlink(w->path);
    writer_free(w);
    return rc;
}
