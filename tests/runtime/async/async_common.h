/*
 * async_common.h - what the modes of test_async share: the rank's place in the
 * test's own MPI communicator, the thread-safe CHECK that counts every check,
 * request helpers (wait, poll, start/stop the runtime), inputs whose results
 * are exact, and `struct ar_case`, one allreduce with its expected result.
 * Each mode lives in its own async_<mode>.c; test_async.c holds main().
 */
#ifndef HORA_TEST_ASYNC_COMMON_H
#define HORA_TEST_ASYNC_COMMON_H

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "hora.h"

/* This process in test_comm (private to the test: the coordinator thread never
 * uses it, and it works whatever state the runtime is in). quick comes from
 * TEST_ASYNC_QUICK, iterations (0: the mode's own count) from
 * TEST_ASYNC_ITERATIONS. */
extern int rank, size, quick, iterations;
extern MPI_Comm test_comm;
/* Over every thread of this rank; main() sums them over the ranks. */
extern atomic_int failures, checks;

#define TEST_MAX_REPORTS 40

/* Count a failure and report it with the rank (the first TEST_MAX_REPORTS). */
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Count a check; report when cond is false. */
#define CHECK(cond, ...)                \
    do {                                \
        atomic_fetch_add(&checks, 1);   \
        if (!(cond)) fail(__VA_ARGS__); \
    } while (0)

/* A value no request handle has: outputs must stay untouched on failure. */
#define REQ_SENTINEL ((hora_request_t)(uintptr_t)0x5e471)

/* ---------------------------------------------------------------- helpers */

void barrier(void); /* over test_comm */
uint32_t mix3(uint32_t a, uint32_t b, uint32_t c);
/* A fixed permutation of a[0..n) for seed (tests/common/rand.h's stream). */
void shuffle(int *a, int n, uint64_t seed);

/* hora_request_error, which must never be NULL. */
const char *request_message(hora_request_t req);
/* Wait for req, which must succeed with an empty message; 1 if it did. */
int wait_ok(hora_request_t req, const char *what);
/* Poll hora_test until req completes (*done = 1, its status returned) or
 * limit_s passes (*done = 0). */
hora_status_t poll_until(hora_request_t req, double limit_s, int *done, const char *what);
/* hora_init / hora_shutdown, checked; runtime_start returns 1 on success. */
int runtime_start(const char *what);
void runtime_stop(const char *what);
/* This process's stderr (fd 2) into a temporary file while a mode runs, to
 * check what libhora logged: begin returns 1, or 0 after a fail() naming
 * what; end puts stderr back and returns the text (malloc'd; NULL if it
 * cannot be read back), the file removed. */
struct stderr_capture {
    char path[64];
    int saved, fd;
};
int stderr_capture_begin(struct stderr_capture *cap, const char *what);
char *stderr_capture_end(struct stderr_capture *cap);

/* ------------------------------------------------- values and comparisons */

/* Input of rank r, element i of the tensor `salt`: a small integer exact in
 * every dtype under op (see exact.h). */
int64_t input_value(hora_dtype_t dtype, hora_op_t op, int r, size_t i, unsigned salt);
/* Element-wise compare (one check); reports the first wrong element.
 * Returns how many are wrong. */
size_t compare(const char *what, const void *got, const void *want, size_t count, hora_dtype_t dtype);
/* Input b + r * d of rank r, element i of tensor j in iteration it (b in
 * -5..5, d in -1..1), and the result of op over all ranks in closed form. */
int stress_input(int j, size_t i, int it, int r);
double stress_expected(int j, size_t i, int it, hora_op_t op, hora_dtype_t dtype);

/* ---------------------------------------------------- one allreduce case */

/* One allreduce: its inputs, options and expected result. */
struct ar_case {
    char name[96];
    hora_dtype_t dtype;
    hora_op_t op;
    size_t count;
    int inplace, shared;
    int by_size; /* inputs multiplied by the number of ranks: AVG divides exactly */
    unsigned salt;
    hora_opts_t opts;
    void *send, *recv;
    hora_request_t req;
    int enqueued;
};

/* Default options; the name says tag, salt, dtype, op, count and buffers. */
void ar_case_init(struct ar_case *c, const char *tag, hora_dtype_t dtype, hora_op_t op, size_t count, int inplace,
                  int shared, unsigned salt);
/* Rank r's input at element i. */
double ar_input(const struct ar_case *c, int r, size_t i);
/* Allocate, fill and enqueue (checked). */
void ar_case_start(struct ar_case *c);
/* Wait (or poll with hora_test), compare with the expected result and the
 * untouched send buffer, free. */
void ar_case_finish(struct ar_case *c, int poll);
/* A correct allreduce (named after `after`) on every rank: the runtime must
 * keep serving after an error. */
void ar_case_next_ok(const char *after);

/* ------------------------------------------------------------------ modes */

void mode_basic(void);
void mode_errors(void);
void errors_memory_refused(void); /* part of mode errors */
void mode_join(void);
void mode_defer(void);
void mode_stress(void);
void mode_stall(void);
void mode_stall_shutdown(void);
void mode_stall_busy(void);
void mode_stall_stack(void);
void mode_timeline(void);
void mode_timeline_dynamic(void);
void mode_badenv(void);
void mode_idle(void);
void mode_ops(void);
void mode_sets(void);
void mode_flight_stall(void);
void mode_flight_usr1(void);
void mode_straggler(void);

#endif
