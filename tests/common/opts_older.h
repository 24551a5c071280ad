/* opts_older.h - hora_opts_t as an older hora.h declared it, one that ended
 * with ready_event (before process sets and reproducible sums): what a
 * program built against that header passes, struct_bytes being its sizeof.
 * The tests of hora.h's struct_bytes rule (unit/test_opts.c,
 * mpi/async/async_errors.c) hand it to libhora and expect the fields it
 * lacks to take their HORA_OPTS_INIT values. */
#ifndef HORA_TEST_OPTS_OLDER_H
#define HORA_TEST_OPTS_OLDER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hora.h"

struct opts_older {
    size_t struct_bytes;
    double prescale;
    double postscale;
    hora_compression_t compression;
    hora_memory_t memory;
    int ndim;
    int64_t dims[HORA_MAX_DIMS];
    int device;
    void *stream;
    void *ready_event;
};
_Static_assert(sizeof(struct opts_older) == offsetof(hora_opts_t, process_set),
               "opts_older is hora_opts_t up to (not including) process_set");

/* An older struct followed in memory by the bytes a reader of the whole
 * current hora_opts_t would take for process_set and reproducible, set to
 * 0x7f (an unknown process set, an invalid mode): libhora must not read them. */
union opts_older_poisoned {
    struct opts_older older;
    unsigned char bytes[sizeof(hora_opts_t)];
};

/* HORA_OPTS_INIT's values in the older layout, past it poisoned. */
static inline void opts_older_init(union opts_older_poisoned *u)
{
    memset(u->bytes, 0x7f, sizeof(u->bytes));
    memset(&u->older, 0, sizeof(u->older));
    u->older.struct_bytes = sizeof(struct opts_older);
    u->older.prescale = 1.0;
    u->older.postscale = 1.0;
    u->older.compression = HORA_COMPRESSION_NONE;
    u->older.memory = HORA_MEMORY_HOST;
    u->older.device = -1;
}

/* The union as the hora_opts_t pointer libhora's calls take. */
static inline const hora_opts_t *opts_older_as_opts(const union opts_older_poisoned *u)
{
    return (const hora_opts_t *)(const void *)u->bytes;
}

#endif
