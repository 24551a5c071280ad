/* straggler.h - which rank is consistently the last to submit (the world's
 * coordinator; HORA_STRAGGLER_S).
 *
 * Method. The cycle's agreement ends at the same moment on every rank (the
 * end of the bit-vector allreduce, c->sync_us, up to the polling of its
 * wait). For the requests a cycle runs, each rank knows the latest moment it
 * submitted one of them (its own clock), so sync - latest is how long this
 * rank had been ready: the last rank to submit has the smallest age, and
 * the difference of ages is how much later it submitted, with no clock
 * synchronisation (only durations on one clock are compared). In the next
 * cycle every rank puts its age (microseconds + 1, 32 bits; 0: it ran
 * nothing) in a slot of its own at the end of the OR'ed "requested" part
 * of the cycle vector, which therefore grows by ceil(size / 2) words per part
 * (c->words counts them; at most 256 ranks, beyond that it is off). Rank 0
 * reads all ages: the last rank of the cycle is the one with the smallest,
 * and its lag the median of the others' minus its own. Every HORA_STRAGGLER_S
 * it reports the rank most often last, the share of cycles and the median
 * lag, in the log and the timeline, and keeps the report for hora_straggler.
 *
 * May include: base/, coord/ (what coord_core.h includes). */
#ifndef HORA_STRAGGLER_H
#define HORA_STRAGGLER_H

#include <stdint.h>

#include "base/config.h"
#include "hora.h"

#define STRAGGLER_MAX_RANKS 256

struct straggler;
struct coord;
struct timeline;

/* Words each part of the cycle vector grows by (0: off). */
int straggler_words(const struct config *cfg, int size);
/* slot_word: the index in the cycle vector of the first slot word. */
hora_status_t straggler_init(struct straggler **out, const struct config *cfg, int rank, int size, int slot_word);
void straggler_free(struct straggler *s);

/* Hooks (coordinator thread): a request of this cycle starts running; the
 * cycle's vector is filled (before the allreduce: this rank's age from the
 * last cycle that ran something); the vector came back (rank 0: read every
 * rank's age, report when the period is over). */
void straggler_note(struct straggler *s, int64_t enqueue_us);
void straggler_fill(struct straggler *s, uint64_t *vec, int64_t last_sync_us);
void straggler_collect(struct straggler *s, const uint64_t *vec, int64_t now_us, struct timeline *tl);
/* The last report: rank -1 when none (or not rank 0). */
void straggler_get(struct straggler *s, int *rank, double *last_fraction, double *lag_ms, int64_t *cycles);

#endif
