/*
 * idx.h - MNIST-style IDX files (gzip-compressed or not) read into memory.
 *
 * IDX is big-endian: a magic 0x00000800 | (type << 8) | dim_count, then
 * dim_count u32 sizes, then the data. hora reads the two kinds MNIST and
 * Fashion-MNIST use: images 0x00000803 (u8, [count, rows, cols]) and labels
 * 0x00000801 (u8, [count]). A .gz file is inflated by zlib (gz.h); a plain
 * file reads the same way. A build without zlib reads plain files only and
 * refuses a gzipped one (HORA_ERR_UNSUPPORTED, naming the file).
 *
 * Everything is checked before it is trusted: the magic, dimensions that are
 * nonzero and plausible (rows * cols <= 2^24), image and label counts that
 * agree, and a data length that is exactly what the header says (a short
 * file and trailing bytes are both errors). Errors are HORA_ERR_CORRUPT (the
 * file is wrong), HORA_ERR_SYSTEM (cannot open/read), HORA_ERR_UNSUPPORTED
 * (gzip without zlib) or HORA_ERR_NO_MEMORY, with a message "FILE: offset N:
 * what" in status_message() (base/status.h).
 */
#ifndef TR_DATA_IDX_H
#define TR_DATA_IDX_H

#include <stdint.h>

#include "hora.h"

#define TR_IDX_MAGIC_IMAGES_U8 0x00000803u
#define TR_IDX_MAGIC_LABELS_U8 0x00000801u
/* Largest image a reader believes (rows * cols), and largest count. */
#define TR_IDX_MAX_IMAGE_PIXELS (1u << 24)
#define TR_IDX_MAX_COUNT (1u << 30)

/* One split in memory. Owned by the struct; tr_idx_free releases it. */
typedef struct {
    uint32_t count;
    uint32_t rows, cols;
    uint8_t *images; /* (count, rows, cols) */
    uint8_t *labels; /* (count) */
    int classes;     /* 1 + the largest label */
} tr_idx_t;

/* Read an images file and a labels file into idx (zeroed on failure). */
hora_status_t tr_idx_load(const char *images_path, const char *labels_path, tr_idx_t *idx);
void tr_idx_free(tr_idx_t *idx);

#endif
