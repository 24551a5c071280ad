/*
 * make_corpus.c - write the fuzz targets' seed corpora (small valid inputs
 * the fuzzer mutates), so no binary files live in the repository:
 *   DIR/record/: shards with raw and JPEG records, an empty shard;
 *   DIR/jpeg/:   a mode byte + a JPEG: colour 4:2:0, greyscale, progressive
 *                4:4:4, CMYK (YCCK), in several modes (train/val, strict,
 *                layouts, dtypes, sizes).
 * Usage: fuzz_make_corpus DIR
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>

#include "record.h"

static int write_file(const char *path, const void *a, size_t a_bytes, const void *b, size_t b_bytes)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(a, 1, a_bytes, f) == a_bytes && (b_bytes == 0 || fwrite(b, 1, b_bytes, f) == b_bytes);
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* A w x h test pattern in pixel format pf, compressed with TurboJPEG. */
static unsigned char *make_jpeg(int w, int h, int pf, int subsamp, int flags, unsigned long *size)
{
    int ps = tjPixelSize[pf];
    unsigned char *pixels = malloc((size_t)w * (size_t)h * (size_t)ps), *jpeg = NULL;
    for (int i = 0; i < w * h * ps; i++) pixels[i] = (unsigned char)(i * 37 + (i / (w * ps)) * 11);
    tjhandle tj = tjInitCompress();
    *size = 0;
    if (tjCompress2(tj, pixels, w, 0, h, pf, &jpeg, size, subsamp, 85, flags) != 0) {
        fprintf(stderr, "fuzz_make_corpus: %s\n", tjGetErrorStr2(tj));
        exit(1);
    }
    tjDestroy(tj);
    free(pixels);
    return jpeg;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_make_corpus DIR\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/record", argv[1]);
    mkdir(argv[1], 0755);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/jpeg", argv[1]);
    mkdir(path, 0755);

    struct {
        int w, h, pf, subsamp, flags;
    } jpegs[] = {
        {16, 16, TJPF_RGB, TJSAMP_420, 0},
        {8, 8, TJPF_GRAY, TJSAMP_GRAY, 0},
        {24, 17, TJPF_RGB, TJSAMP_444, TJFLAG_PROGRESSIVE},
        {32, 32, TJPF_CMYK, TJSAMP_420, 0},
        {40, 9, TJPF_RGB, TJSAMP_422, 0},
    };
    const unsigned char modes[] = {0x00, 0x03, 0x5c, 0xa1, 0xf6};
    for (size_t j = 0; j < sizeof(jpegs) / sizeof(jpegs[0]); j++) {
        unsigned long size;
        unsigned char *jpeg = make_jpeg(jpegs[j].w, jpegs[j].h, jpegs[j].pf, jpegs[j].subsamp, jpegs[j].flags, &size);
        for (size_t m = 0; m < sizeof(modes); m++) {
            snprintf(path, sizeof(path), "%s/jpeg/seed-%zu-%02x", argv[1], j, modes[m]);
            if (write_file(path, &modes[m], 1, jpeg, size) != 0) return 1;
        }
        tjFree(jpeg);
    }

    /* Shards: three records of each kind, one record, none. */
    for (int variant = 0; variant < 3; variant++) {
        snprintf(path, sizeof(path), "%s/record/seed-%d.hrec", argv[1], variant);
        tr_record_writer_t *w;
        if (tr_record_writer_open(path, &w) != HORA_OK) return 1;
        int count = variant == 0 ? 3 : variant == 1 ? 1 : 0;
        for (int i = 0; i < count; i++) {
            uint8_t raw[6] = {1, 2, 3, 4, 5, 6};
            unsigned long size = 0;
            unsigned char *jpeg = i == 2 ? make_jpeg(8, 8, TJPF_RGB, TJSAMP_420, 0, &size) : NULL;
            tr_record_t rec = {.label = i,
                               .kind = jpeg ? TR_PAYLOAD_KIND_JPEG : TR_PAYLOAD_KIND_RAW_U8,
                               .height = jpeg ? 8 : 2,
                               .width = jpeg ? 8 : (i ? 1 : 3),
                               .channels = jpeg ? 3 : (i ? 3 : 1),
                               .payload_bytes = jpeg ? size : 6,
                               .payload = jpeg ? jpeg : raw};
            if (tr_record_writer_append(w, &rec) != HORA_OK) return 1;
            if (jpeg) tjFree(jpeg);
        }
        if (tr_record_writer_close(w) != HORA_OK) return 1;
    }
    printf("fuzz_make_corpus: seeds in %s/record and %s/jpeg\n", argv[1], argv[1]);
    return 0;
}
