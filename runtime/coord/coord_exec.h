/* coord_exec.h - running one response on this rank (coord_exec.c). */
#ifndef HORA_COORD_EXEC_H
#define HORA_COORD_EXEC_H

#include "coord/coord_wire.h"

struct coord;

/* Run one response; HORA_OK, or a fatal transport error that stops the coordinator. */
hora_status_t coord_execute(struct coord *c, struct coord_response *resp);

#endif
