/* stack.h - what a late rank is doing: when rank 0's stall inspector warns
 * that ranks are missing for a tensor, it asks each of them for the stack of
 * its application thread and prints the answer under the warning:
 *
 *   hora[0] warning: stall: rank 2 missing for 'grad.fc' (waited 3 s); rank 2 is at:
 *       native backtrace of thread 4242 (the last to submit a request):
 *       #0 clock_nanosleep+0x61 in /lib/x86_64-linux-gnu/libc.so.6
 *       #1 late_rank_sleeps_here+0x3c in ./train
 *       ...
 *
 * Two parts:
 *  - the capture (stack_capture.c, process-wide): a provider registered with
 *    hora_set_stack_provider (hora.torch: the Python stack of the main
 *    thread), else a native backtrace of the thread that last submitted a
 *    request (or called hora_init), taken by a signal to that thread whose
 *    handler only records return addresses; they are named afterwards with
 *    dladdr. It runs on a helper thread of its own, so the coordinator never
 *    waits on it (a provider needs the GIL, which a thread stuck in C code
 *    may hold for good).
 *  - the channel (stack.c, the world's coordinator): a private communicator
 *    on which rank 0 sends a request to a missing rank and that rank's
 *    coordinator, alive and cycling while its application thread is busy
 *    elsewhere, answers (STACK_TEXT_BYTES at most). Every coordinator polls
 *    it once per cycle (at most every 10 ms). Rank 0 never waits for an
 *    answer: a rank that gives none within its deadline (stopped, its
 *    coordinator busy in a long collective) is reported as silent and the
 *    job goes on.
 * HORA_STALL_STACKS=0 turns it off (rank 0 sends no requests; a rank with it
 * off answers that it is off).
 */
#ifndef HORA_COORD_STACK_H
#define HORA_COORD_STACK_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/status.h"
#include "hora.h"

/* The answer's text, at most (the message stays under MPI's usual eager
 * limits: 4 KiB for Open MPI's shared-memory BTL). */
#define STACK_TEXT_BYTES 3968

/* ---- capture (stack_capture.c) ---- */

/* The application thread to show, noted by the thread itself: the one that
 * submits (every submission: a thread-local load and an atomic store), and
 * the one that called hora_init, shown while none has submitted. */
void stack_capture_note_submit(void);
void stack_capture_note_init(void);
/* hora_set_stack_provider: NULL goes back to the native backtrace. */
void stack_capture_set_provider(hora_stack_provider_t provider, void *arg);
/* Start a capture on the helper thread: 1 when started, 0 when one is
 * still running (its result is then what stack_capture_take returns). */
int stack_capture_start(void);
/* A finished capture's text (NUL-terminated, cut to cap): 1 and the helper
 * is free again, or 0 while it runs or when none was started. */
int stack_capture_take(char *text, size_t cap);
/* Synchronously, on the calling thread (never the target thread): the
 * text of one capture. Used by the helper thread and by tests. */
void stack_capture_now(char *text, size_t cap);

/* ---- channel (stack.c) ---- */

struct stack_channel;

/* Collective over world (every rank's world coordinator): dups it. answer_s:
 * how long rank 0 waits for an answer before it reports the rank silent. */
hora_status_t stack_channel_open(struct stack_channel **out, const struct config *cfg, MPI_Comm world, double answer_s);
void stack_channel_close(struct stack_channel *s);
/* Rank 0's stall inspector: rank (of world) has not submitted name for
 * age_s. Asks it for its stack unless it was asked within the last
 * HORA_STALL_CHECK_S or HORA_STALL_STACKS=0. Never blocks. */
void stack_channel_request(struct stack_channel *s, int rank, const char *name, double age_s, int64_t now_us);
/* Every cycle, every rank: answer requests, print answers and silences. */
void stack_channel_poll(struct stack_channel *s, int64_t now_us);

#endif
