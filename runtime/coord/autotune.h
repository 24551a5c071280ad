/* autotune.h - online tuning of fusion threshold, cycle time and ring chunk
 * size from measured allreduce throughput (HORA_AUTOTUNE=1).
 *
 * Only rank 0's coordinator owns a struct autotune: it feeds one measurement
 * per work cycle and, when autotune_record() says so, broadcasts the new
 * settings to every rank. Not thread-safe; one caller (the coordinator). */
#ifndef HORA_AUTOTUNE_H
#define HORA_AUTOTUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hora.h"

struct autotune_params {
    size_t fusion_threshold; /* bytes */
    double cycle_time_ms;
    size_t chunk_bytes; /* ring pipeline chunk */
};

/* A parameter the user set through its HORA_* variable is never changed. */
enum { AUTOTUNE_FIX_FUSION = 1, AUTOTUNE_FIX_CYCLE = 2, AUTOTUNE_FIX_CHUNK = 4 };

struct autotune_config {
    struct autotune_params initial; /* settings in force at start */
    unsigned fixed;                 /* AUTOTUNE_FIX_* bits */
    const char *log_path;           /* CSV log, or NULL (or "") for none */
    int warmup_samples;             /* samples discarded after every change of settings (<= 0: 1) */
    int samples_per_candidate;      /* scored samples per candidate, median taken (<= 0: 5) */
    int steps_per_sample;           /* work cycles accumulated into one sample (<= 0: 10) */
};

struct autotune;

/*
 * Create a tuner starting from cfg->initial. With a log path the CSV file is
 * created (truncated) and its header written.
 * Returns HORA_OK, HORA_ERR_INVALID_ARG (NULL at or cfg), HORA_ERR_NO_MEMORY,
 * HORA_ERR_SYSTEM (the log cannot be opened; the message names the path).
 * *at is set only on success.
 */
hora_status_t autotune_init(struct autotune **at, const struct autotune_config *cfg);
/* Closes the log. NULL is allowed. */
void autotune_free(struct autotune *at);

/*
 * One work cycle's measurement: bytes allreduced and the seconds from the
 * cycle's start to the end of its last collective. Measurements with
 * bytes == 0 or seconds not a positive finite number are ignored.
 * Returns true when the settings should change now; *next then holds the
 * full new settings (fixed parameters unchanged) and is not touched
 * otherwise. While tuning, it moves through candidates; the call that ends
 * tuning returns true once with the winner (even when the winner is already
 * in force, so the caller sees the end on a single call), and every later
 * call returns false.
 */
bool autotune_record(struct autotune *at, uint64_t bytes, double seconds, struct autotune_params *next);
bool autotune_finished(const struct autotune *at);
/* The best settings measured so far (cfg->initial before any was scored; the winner once finished). */
struct autotune_params autotune_best(const struct autotune *at);

#endif
