/* coord_slow.h - the slow path (request lists to rank 0, responses back)
 * and autotune's settings from rank 0 (coord_slow.c), under
 * HORA_TIMEOUT_S: a rank that does not come makes every rank fail with
 * HORA_ERR_TIMEOUT naming it. The world's run as collectives on its
 * channel, a process set's as point-to-point MPI messages. */
#ifndef HORA_COORD_SLOW_H
#define HORA_COORD_SLOW_H

#include "coord/coord_core.h"
#include "coord/coord_wire.h"

/* Hands c->uncached to rank 0 and appends the responses (fused) to out. */
hora_status_t coord_slow_path(struct coord *c, struct coord_responses *out);
hora_status_t coord_slow_settings(struct coord *c, struct coord_settings *s);

#endif
