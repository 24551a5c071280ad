/*
 * loop.h - hora-train's training loop (loop.c).
 */
#ifndef TR_CLI_LOOP_H
#define TR_CLI_LOOP_H

#include "session.h"

/* Train from where r->state stands to --epochs (or --steps), evaluating and
 * checkpointing on schedule; rank 0 prints the progress and the final
 * accuracy. A failure is reported (main_report) and its status returned. */
hora_status_t loop_run(run_t *r);

#endif
