/*
 * bench_output.h - what every hora benchmark prints, written once: the
 * table on stdout (aligned columns, '#' header lines as in nccl-tests),
 * --json (a small streaming JSON writer) and --plot (gnuplot, started and
 * finished the same way by every benchmark).
 *
 * No MPI and no libhora here: the caller prints on rank 0 only.
 *
 * Build: bench_harness (bench/meson.build), linked by every hora-bench-*.
 */
#ifndef BENCH_OUTPUT_H
#define BENCH_OUTPUT_H

#include <stdio.h>

/* ---- the table --------------------------------------------------------------- */

/* One column. Cells are right-aligned in width characters (left-aligned
 * with left) and joined by one blank; a value wider than its column pushes
 * the rest of the line right rather than touching its neighbour. */
typedef struct {
    const char *name; /* the header line */
    const char *unit; /* the units line ("(GB/s)"), or NULL */
    int width;
    int left;
    /* A heading centred over this column and the next group_span - 1
     * ("out-of-place" over time, algbw, busbw, #wrong), or NULL. */
    const char *group;
    int group_span;
} bench_column_t;

typedef struct {
    FILE *out;
    const bench_column_t *columns;
    int column_count;
    const char *indent; /* before every line: " " (nccl-tests' rows) or "" */
    int comment;        /* header lines start with '#' */
    int cell;           /* the next cell of the current row */
} bench_table_t;

/* The group line (when a column has a group), the names and the units line
 * (when a column has a unit); trailing blanks trimmed. */
void bench_table_header(bench_table_t *table);
/* The next cell of the row: text, a printf format, or a number in format
 * ("%.2f") that falls back to "%.2e" when it would not fit its column. */
void bench_table_text(bench_table_t *table, const char *text);
__attribute__((format(printf, 2, 3))) void bench_table_cell(bench_table_t *table, const char *format, ...);
void bench_table_number(bench_table_t *table, double value, const char *format);
/* Ends the row (newline, flush). */
void bench_table_end_row(bench_table_t *table);

/* ---- --json ------------------------------------------------------------------ */

#define BENCH_JSON_MAX_DEPTH 8

/* A JSON document written as it goes: containers opened and closed,
 * members added with their key (NULL inside an array). Containers less
 * than lines_depth deep put each member on a line of its own, deeper ones
 * stay on one line. */
typedef struct {
    FILE *out;
    int lines_depth;
    int depth;
    int members[BENCH_JSON_MAX_DEPTH]; /* members written so far, per open container */
    char closers[BENCH_JSON_MAX_DEPTH];
} bench_json_t;

/* Opens path for writing; 0, or -1 with a message naming program, path and why. */
int bench_json_open(bench_json_t *json, const char *program, const char *path, int lines_depth);
void bench_json_object(bench_json_t *json, const char *key);
void bench_json_array(bench_json_t *json, const char *key);
void bench_json_end(bench_json_t *json); /* closes the innermost container */
void bench_json_string(bench_json_t *json, const char *key, const char *text);
/* A number in format ("%.6g"); null when it is not finite or present is 0. */
void bench_json_number(bench_json_t *json, const char *key, const char *format, double value, int present);
void bench_json_integer(bench_json_t *json, const char *key, long long value);
void bench_json_bool(bench_json_t *json, const char *key, int value);
/* A value that already is JSON text. */
void bench_json_raw(bench_json_t *json, const char *key, const char *text);
/* Closes what is open and the file; 0, or -1 with a warning on a write error. */
int bench_json_close(bench_json_t *json, const char *program, const char *path);

/* ---- --plot ------------------------------------------------------------------ */

/* text as a gnuplot single-quoted string: everything but ' is literal there,
 * and ' is written twice. */
void bench_gnuplot_quote(FILE *gp, const char *text);
/* 1 if an executable called name lies on $PATH. */
int bench_program_on_path(const char *name);
/* Starts gnuplot with the first lines of a script that draws a width x
 * height PNG at png_path: pngcairo (font_size points) when gnuplot has it,
 * else png; and noenhanced text, so titles, labels and keys print literally
 * (enhanced mode would make the underscores of HORA_FUSION_THRESHOLD
 * subscripts). NULL, with a warning on stderr, when gnuplot is missing or
 * does not start: a plot is never worth failing a run for. */
FILE *bench_plot_open(const char *program, const char *png_path, int width, int height, int font_size);
/* Ends the script; "# Plot written to PATH" on stdout, or a warning. */
void bench_plot_close(FILE *gp, const char *program, const char *png_path);

#endif /* BENCH_OUTPUT_H */
