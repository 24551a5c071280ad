/* coord_flight.h - the coordinator's hooks into the flight recorder
 * (coord_flight.c; the recorder itself: flight.h). */
#ifndef HORA_COORD_FLIGHT_H
#define HORA_COORD_FLIGHT_H

#include "coord/coord_core.h"
#include "coord/coord_wire.h"

/* The cycle agreed on list: its requests are NEGOTIATED. */
void coord_flight_negotiated(struct coord *c, const struct coord_responses *list);
/* coord_execute starts (RUNNING; and the straggler report notes when each
 * was submitted) / has run the data of reqs: records the transport and peer
 * coll last waited on. */
void coord_flight_running(struct coord *c, struct hora_request **reqs, int n);
void coord_flight_waited(struct coord *c, struct hora_request **reqs, int n);
/* The coordinator fails everything with status: dump unless it is an
 * orderly shutdown (HORA_ERR_SHUTDOWN) or it has been written already: an
 * abort and a shutdown response from rank 0 (stall inspector) call
 * coord_flight_dump themselves, before the requests fail. */
void coord_flight_fail(struct coord *c, hora_status_t status);
void coord_flight_dump(struct coord *c, const char *reason);

#endif
