/* file.h - read a whole file into memory (the tests that check what the
 * runtime wrote: timelines, autotune logs, captured stderr). */
#ifndef HORA_TEST_FILE_H
#define HORA_TEST_FILE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The file's bytes plus a terminating NUL (free() it), its length in *len
 * when len is not NULL; NULL if it cannot be opened or memory runs out. */
static inline char *test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *text = malloc(cap + 1);
    while (text && (got = fread(text + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(text, (cap *= 2) + 1);
            if (!bigger) free(text);
            text = bigger;
        }
    }
    fclose(f);
    if (!text) return NULL;
    text[n] = '\0';
    if (len) *len = n;
    return text;
}

#endif
