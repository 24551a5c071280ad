/* coord_cycle.h - the coordinator thread (coord_cycle.c). */
#ifndef HORA_COORD_CYCLE_H
#define HORA_COORD_CYCLE_H

/* The thread's body (arg: its struct coord): turns cycles until the
 * coordinator stops (hora_shutdown on some rank, an abort, an error), and
 * fails every request left. */
void *coord_cycle_main(void *arg);

#endif
