/*
 * idx.c - IDX (MNIST / Fashion-MNIST) reader; the format and what is checked
 * are in idx.h.
 */
#define _GNU_SOURCE
#include "idx.h"

#include "base/status.h"
#include "gz.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Read exactly bytes (of the decompressed stream); a short read is a
 * truncated file (or a damaged gzip stream: zlib says which). */
static hora_status_t idx_read(tr_gz_t *f, const char *path, uint64_t offset, void *buf, size_t bytes)
{
    size_t done = 0;
    while (done < bytes) {
        size_t n;
        hora_status_t status = tr_gz_read(f, (uint8_t *)buf + done, bytes - done, &n);
        if (status != HORA_OK)
            return status_at(status, STATUS_FILE_AT(path, offset + done), "read failed: %s", status_message());
        if (n == 0)
            return status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(path, offset + done),
                             "file ends early: %zu more bytes expected", bytes - done);
        done += n;
    }
    return HORA_OK;
}

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Open path, check the magic and read dim_count dimensions. */
static hora_status_t idx_open(const char *path, uint32_t want_magic, uint32_t *dims, unsigned dim_count,
                              tr_gz_t **file_out)
{
    tr_gz_t *f;
    hora_status_t status = tr_gz_open(path, &f);
    if (status != HORA_OK) return status;
    uint8_t header[16];
    status = idx_read(f, path, 0, header, 4 * (1 + dim_count));
    if (status != HORA_OK) goto err_close;
    uint32_t magic = get_be32(header);
    if (magic != want_magic) {
        status = status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(path, 0), "IDX magic 0x%08x, expected 0x%08x (%s)", magic,
                           want_magic, want_magic == TR_IDX_MAGIC_IMAGES_U8 ? "u8 images" : "u8 labels");
        goto err_close;
    }
    for (unsigned d = 0; d < dim_count; d++) {
        dims[d] = get_be32(header + 4 * (1 + d));
        if (dims[d] == 0 || dims[d] > TR_IDX_MAX_COUNT) {
            status = status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(path, 4 + 4 * (uint64_t)d),
                               "dimension %u is %" PRIu32 ", expected 1..%u", d, dims[d], TR_IDX_MAX_COUNT);
            goto err_close;
        }
    }
    *file_out = f;
    return HORA_OK;
err_close:
    tr_gz_close(f);
    return status;
}

/* After the data: the stream must end here (a longer file means the header
 * does not describe it). */
static hora_status_t idx_expect_end(tr_gz_t *f, const char *path, uint64_t offset)
{
    uint8_t extra;
    size_t n;
    hora_status_t status = tr_gz_read(f, &extra, 1, &n);
    if (status != HORA_OK) return status_at(status, STATUS_FILE_AT(path, offset), "read failed: %s", status_message());
    if (n > 0)
        return status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(path, offset),
                         "trailing bytes after the data the header describes");
    return HORA_OK;
}

hora_status_t tr_idx_load(const char *images_path, const char *labels_path, tr_idx_t *idx)
{
    memset(idx, 0, sizeof(*idx));
    tr_gz_t *images = NULL, *labels = NULL;
    uint32_t idims[3] = {0}, ldims[1] = {0};
    hora_status_t status = idx_open(images_path, TR_IDX_MAGIC_IMAGES_U8, idims, 3, &images);
    if (status != HORA_OK) return status;
    status = idx_open(labels_path, TR_IDX_MAGIC_LABELS_U8, ldims, 1, &labels);
    if (status != HORA_OK) goto err_images;
    if (idims[0] != ldims[0]) {
        status = status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(images_path, 4),
                           "%" PRIu32 " images but %s has %" PRIu32 " labels", idims[0], labels_path, ldims[0]);
        goto err_labels;
    }
    uint64_t pixels = (uint64_t)idims[1] * idims[2];
    if (pixels > TR_IDX_MAX_IMAGE_PIXELS) {
        status = status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(images_path, 8),
                           "implausible image size %" PRIu32 "x%" PRIu32, idims[1], idims[2]);
        goto err_labels;
    }
    uint64_t image_bytes = pixels * idims[0];
    if (image_bytes > SIZE_MAX / 2) {
        status =
            status_at(HORA_ERR_CORRUPT, STATUS_FILE_AT(images_path, 4), "%" PRIu64 " bytes of images", image_bytes);
        goto err_labels;
    }
    /* The allocation is sized from the header; the reads below then prove
     * the file really holds that much (and no more). */
    idx->images = malloc((size_t)image_bytes);
    idx->labels = malloc(ldims[0]);
    if (!idx->images || !idx->labels) {
        status = status_at(HORA_ERR_NO_MEMORY, STATUS_FILE_AT(images_path, 0), "out of memory for %" PRIu64 " bytes",
                           image_bytes);
        goto err_buffers;
    }
    status = idx_read(images, images_path, 16, idx->images, (size_t)image_bytes);
    if (status == HORA_OK) status = idx_expect_end(images, images_path, 16 + image_bytes);
    if (status == HORA_OK) status = idx_read(labels, labels_path, 8, idx->labels, ldims[0]);
    if (status == HORA_OK) status = idx_expect_end(labels, labels_path, 8 + (uint64_t)ldims[0]);
    if (status != HORA_OK) goto err_buffers;
    int largest = 0;
    for (uint32_t i = 0; i < ldims[0]; i++) largest = idx->labels[i] > largest ? idx->labels[i] : largest;
    idx->count = idims[0];
    idx->rows = idims[1];
    idx->cols = idims[2];
    idx->classes = largest + 1;
    tr_gz_close(labels);
    tr_gz_close(images);
    return HORA_OK;
err_buffers:
    free(idx->images);
    free(idx->labels);
    memset(idx, 0, sizeof(*idx));
err_labels:
    tr_gz_close(labels);
err_images:
    tr_gz_close(images);
    return status;
}

void tr_idx_free(tr_idx_t *idx)
{
    free(idx->images);
    free(idx->labels);
    memset(idx, 0, sizeof(*idx));
}
