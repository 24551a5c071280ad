/* coord_table.h - rank 0's negotiation table and its stall inspector
 * (coord_table.c): the names some ranks have submitted and not all, which
 * ranks have joined, and the responses that become ready. Its state is
 * struct coord_table, which only coord_table.c changes. */
#ifndef HORA_COORD_TABLE_H
#define HORA_COORD_TABLE_H

#include <stdint.h>

#include "base/config.h"
#include "coord/coord_map.h"
#include "coord/coord_wire.h"

struct coord_entry; /* one name: who submitted it, with which parameters, when */
struct timeline;
struct stack_channel;

struct coord_table {
    /* set by coord_table_init, or after it, read-only after */
    int size;
    const int *members;           /* a process set's world ranks (messages name them), NULL: the world's */
    const struct config *cfg;     /* HORA_STALL_CHECK_S, HORA_STALL_SHUTDOWN_S */
    struct timeline *tl;          /* NEGOTIATE spans, NULL: none */
    struct stack_channel *stacks; /* the stall inspector asks late ranks for their stacks, NULL: not */

    struct coord_map names;                      /* name -> entry */
    struct coord_entry *order_head, *order_tail; /* arrival order */
    int64_t last_inspect_us;                     /* the stall inspector's last forced slow path */
    uint8_t *joined_ranks;                       /* [size] */
    int joined_count;
    int last_joined;
};

/* 0, or -1 out of memory (then coord_table_free). */
int coord_table_init(struct coord_table *t, int size, const int *members, const struct config *cfg);
void coord_table_free(struct coord_table *t);

/* Merge every rank's submissions (bufs[r], coord_encode_requests' bytes)
 * into the table and append the responses that became ready (validated;
 * errors naming both values; join; the stall inspector's shutdown). */
hora_status_t coord_table_negotiate(struct coord_table *t, struct coord_buf *bufs, struct coord_responses *out);

/* Names wait in the table. */
static inline int coord_table_busy(const struct coord_table *t) { return t->order_head != NULL; }
/* The stall inspector sees stalls only in the slow path: while names wait,
 * it wants one every period_us even when nobody has anything new. 1 when
 * one is due now (and counts it as forced at now_us). */
int coord_table_inspect_due(struct coord_table *t, int64_t now_us, int64_t period_us);

#endif
