/* coord_queue.h - the queue between application threads and the
 * coordinator thread (coord_queue.c): submission, waiting and polling,
 * completion, and the coordinator's nap between cycles. api/ calls the
 * first four through coord.h. */
#ifndef HORA_COORD_QUEUE_H
#define HORA_COORD_QUEUE_H

#include <stdint.h>

#include "coord/coord_request.h"

struct coord;

/* Hand a request (or a group of them) to the coordinator. */
hora_status_t coord_submit(struct coord *c, struct hora_request **reqs, int n);
/* Mark a request finished and wake waiters (any thread). */
void coord_complete(struct coord *c, struct hora_request *req, hora_status_t status, const char *error);
hora_status_t coord_wait(struct coord *c, struct hora_request *req);
int coord_is_done(struct coord *c, struct hora_request *req, hora_status_t *status);

/* The coordinator thread: a request leaves its tables (pending, the cache
 * path, the uncached list, the join) and completes. */
void coord_finish_pending(struct coord *c, struct hora_request *req, hora_status_t status, const char *error);
/* The nap after a cycle that started at start_us; idle_us is how long to
 * sleep with nothing in flight (the stall-inspection period). */
void coord_nap(struct coord *c, int64_t start_us, int64_t idle_us);

#endif
