/* coord_agree.h - the cycle's agreement on its bit vector, and how a
 * negotiation that a rank did not join fails (coord_agree.c); HORA_FAULT_STOP. */
#ifndef HORA_COORD_AGREE_H
#define HORA_COORD_AGREE_H

#include "coord/coord_core.h"

/* The cycle's agreement: every rank's c->vec merged into every rank's, or
 * HORA_ERR_TIMEOUT naming a rank that did not come within HORA_TIMEOUT_S
 * (c->agree_in_flight then says buffers are still in MPI). */
hora_status_t coord_allreduce_bits(struct coord *c);
/* HORA_ERR_TIMEOUT naming silent[0] (places of c) and how many more did not
 * come; decided_here: this rank saw it, else rank 0 told it. */
hora_status_t coord_agree_silent(struct coord *c, const int *silent, int count, int decided_here);
/* A failure of the world's negotiation over its channel (the agreement, the
 * slow path): a timeout the transports put down to a rank (status_culprit)
 * becomes "rank R did not join the negotiation" with the transport's words
 * after it; any other status stays as it is. */
hora_status_t coord_negotiation_failed(struct coord *c, hora_status_t status);
/* HORA_FAULT_STOP: this process stops itself (SIGSTOP) when this rank
 * reaches point the configured time (coord_start parses the setting). The
 * world's slow path counts only the slow paths in which this rank hands in
 * requests of its own: the N-th is the one of its N-th new tensor name when
 * it submits one at a time. */
void coord_fault_stop(struct coord *c, enum coord_fault_point point);
hora_status_t coord_fault_parse(struct coord *c, const char *spec);

#endif
