/*
 * bench_output.c - the benchmarks' table, --json and --plot (see
 * bench_output.h).
 *
 * Build: bench_harness (bench/meson.build), linked by every hora-bench-*.
 */
#include "bench_output.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the table --------------------------------------------------------------- */

/* A header line is built in a buffer, so that its trailing blanks (empty
 * right-aligned cells) can be trimmed before it is printed. */
typedef struct {
    char text[1024];
    size_t used;
} table_line_t;

__attribute__((format(printf, 2, 3))) static void table_line_add(table_line_t *line, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    size_t room = sizeof(line->text) - line->used;
    int written = vsnprintf(line->text + line->used, room, format, args);
    va_end(args);
    if (written > 0) line->used += (size_t)written < room ? (size_t)written : room - 1;
}

/* The header lines start with '#': over the indent when there is one, else
 * in front of a first column one narrower, so the columns stay where the
 * rows have them. */
static void table_line_begin(const bench_table_t *table, table_line_t *line)
{
    line->used = 0;
    line->text[0] = '\0';
    if (!table->comment)
        table_line_add(line, "%s", table->indent);
    else if (table->indent[0] != '\0')
        table_line_add(line, "#%s", table->indent + 1);
    else
        table_line_add(line, "#");
}

static int table_first_width(const bench_table_t *table)
{
    int width = table->columns[0].width;
    return table->comment && table->indent[0] == '\0' ? width - 1 : width;
}

static void table_line_print(const bench_table_t *table, table_line_t *line)
{
    while (line->used > 0 && line->text[line->used - 1] == ' ') line->used--;
    line->text[line->used] = '\0';
    fprintf(table->out, "%s\n", line->text);
}

/* One line of labels (names or units), aligned as the rows are. */
static void table_labels(const bench_table_t *table, int units)
{
    table_line_t line;
    table_line_begin(table, &line);
    for (int i = 0; i < table->column_count; i++) {
        const bench_column_t *c = &table->columns[i];
        const char *label = units ? (c->unit ? c->unit : "") : c->name;
        int width = i == 0 ? table_first_width(table) : c->width;
        table_line_add(&line, c->left ? "%s%-*s" : "%s%*s", i ? " " : "", width, label);
    }
    table_line_print(table, &line);
}

void bench_table_header(bench_table_t *table)
{
    int groups = 0, units = 0;
    for (int i = 0; i < table->column_count; i++) {
        groups |= table->columns[i].group != NULL;
        units |= table->columns[i].unit != NULL;
    }
    if (groups) {
        table_line_t line;
        table_line_begin(table, &line);
        for (int i = 0; i < table->column_count;) {
            const bench_column_t *c = &table->columns[i];
            int span = c->group ? (c->group_span > 0 ? c->group_span : 1) : 1;
            /* The width the span takes in a row, its leading blank included. */
            int width = 0;
            for (int k = i; k < i + span && k < table->column_count; k++)
                width += (k == 0 ? table_first_width(table) : table->columns[k].width) + (k ? 1 : 0);
            if (c->group) {
                int len = (int)strlen(c->group);
                int left = (width - len + 2) / 2; /* a blank more on the left: the rows lead with one */
                table_line_add(&line, "%*s%s%*s", left, "", c->group, width - len - left, "");
            } else
                table_line_add(&line, "%*s", width, "");
            i += span;
        }
        table_line_print(table, &line);
    }
    table_labels(table, 0);
    if (units) table_labels(table, 1);
    fflush(table->out);
}

void bench_table_text(bench_table_t *table, const char *text)
{
    if (table->cell >= table->column_count) return;
    const bench_column_t *c = &table->columns[table->cell];
    fprintf(table->out, c->left ? "%s%-*s" : "%s%*s", table->cell ? " " : table->indent, c->width, text);
    table->cell++;
}

void bench_table_cell(bench_table_t *table, const char *format, ...)
{
    char text[256];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof(text), format, args);
    va_end(args);
    bench_table_text(table, text);
}

void bench_table_number(bench_table_t *table, double value, const char *format)
{
    char text[64];
    snprintf(text, sizeof(text), format, value);
    if (table->cell < table->column_count && (int)strlen(text) > table->columns[table->cell].width)
        snprintf(text, sizeof(text), "%.2e", value);
    bench_table_text(table, text);
}

void bench_table_end_row(bench_table_t *table)
{
    fputc('\n', table->out);
    fflush(table->out);
    table->cell = 0;
}

/* ---- --json ------------------------------------------------------------------ */

int bench_json_open(bench_json_t *json, const char *program, const char *path, int lines_depth)
{
    *json = (bench_json_t){.lines_depth = lines_depth};
    json->out = fopen(path, "w");
    if (json->out == NULL) {
        fprintf(stderr, "%s: --json: cannot open '%s' for writing: %s\n", program, path, strerror(errno));
        return -1;
    }
    return 0;
}

static void json_string_body(FILE *out, const char *text)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

/* The separator before a member, then its key. */
static void json_member(bench_json_t *json, const char *key)
{
    if (json->depth > 0) {
        int *members = &json->members[json->depth - 1];
        if (json->depth <= json->lines_depth)
            fprintf(json->out, "%s\n%*s", *members ? "," : "", 2 * json->depth, "");
        else if (*members)
            fputs(", ", json->out);
        (*members)++;
    }
    if (key != NULL) {
        json_string_body(json->out, key);
        fputs(": ", json->out);
    }
}

static void json_open(bench_json_t *json, const char *key, char opener, char closer)
{
    json_member(json, key);
    fputc(opener, json->out);
    if (json->depth < BENCH_JSON_MAX_DEPTH) {
        json->members[json->depth] = 0;
        json->closers[json->depth] = closer;
        json->depth++;
    }
}

void bench_json_object(bench_json_t *json, const char *key) { json_open(json, key, '{', '}'); }

void bench_json_array(bench_json_t *json, const char *key) { json_open(json, key, '[', ']'); }

void bench_json_end(bench_json_t *json)
{
    if (json->depth == 0) return;
    json->depth--;
    if (json->depth < json->lines_depth && json->members[json->depth] > 0)
        fprintf(json->out, "\n%*s", 2 * json->depth, "");
    fputc(json->closers[json->depth], json->out);
}

void bench_json_string(bench_json_t *json, const char *key, const char *text)
{
    json_member(json, key);
    json_string_body(json->out, text);
}

void bench_json_number(bench_json_t *json, const char *key, const char *format, double value, int present)
{
    json_member(json, key);
    if (present && isfinite(value))
        fprintf(json->out, format, value);
    else
        fputs("null", json->out);
}

void bench_json_integer(bench_json_t *json, const char *key, long long value)
{
    json_member(json, key);
    fprintf(json->out, "%lld", value);
}

void bench_json_bool(bench_json_t *json, const char *key, int value)
{
    json_member(json, key);
    fputs(value ? "true" : "false", json->out);
}

void bench_json_raw(bench_json_t *json, const char *key, const char *text)
{
    json_member(json, key);
    fputs(text, json->out);
}

int bench_json_close(bench_json_t *json, const char *program, const char *path)
{
    if (json->out == NULL) return -1;
    while (json->depth > 0) bench_json_end(json);
    fputc('\n', json->out);
    int failed = ferror(json->out);
    failed |= fclose(json->out) != 0;
    json->out = NULL;
    if (failed) fprintf(stderr, "%s: warning: --json: error writing %s\n", program, path);
    return failed ? -1 : 0;
}

/* ---- --plot ------------------------------------------------------------------ */

void bench_gnuplot_quote(FILE *gp, const char *text)
{
    fputc('\'', gp);
    for (const char *p = text; *p != '\0'; p++) {
        if (*p == '\'') fputc('\'', gp);
        fputc(*p, gp);
    }
    fputc('\'', gp);
}

int bench_program_on_path(const char *name)
{
    const char *path = getenv("PATH");
    if (path == NULL || path[0] == '\0') path = "/usr/bin:/bin";
    char candidate[4096];
    while (*path != '\0') {
        size_t dir_len = strcspn(path, ":");
        /* An empty entry means the current directory. */
        int written = dir_len ? snprintf(candidate, sizeof(candidate), "%.*s/%s", (int)dir_len, path, name)
                              : snprintf(candidate, sizeof(candidate), "./%s", name);
        if (written > 0 && (size_t)written < sizeof(candidate) && access(candidate, X_OK) == 0) return 1;
        path += dir_len;
        if (*path == ':') path++;
    }
    return 0;
}

FILE *bench_plot_open(const char *program, const char *png_path, int width, int height, int font_size)
{
    if (!bench_program_on_path("gnuplot")) {
        fprintf(stderr,
                "%s: warning: --plot: gnuplot is not on PATH; %s was not written "
                "(install gnuplot, or plot the --json output)\n",
                program, png_path);
        return NULL;
    }
    FILE *gp = popen("gnuplot", "w");
    if (gp == NULL) {
        fprintf(stderr, "%s: warning: --plot: cannot start gnuplot; %s was not written\n", program, png_path);
        return NULL;
    }
    fprintf(gp,
            "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size %d,%d font ',%d' } "
            "else { set terminal png size %d,%d }\n",
            width, height, font_size, width, height);
    fprintf(gp, "set output ");
    bench_gnuplot_quote(gp, png_path);
    fprintf(gp, "\nset encoding utf8\nset termoption noenhanced\n");
    return gp;
}

void bench_plot_close(FILE *gp, const char *program, const char *png_path)
{
    int status = pclose(gp);
    if (status != 0)
        fprintf(stderr, "%s: warning: --plot: gnuplot failed (status %d); %s may be missing\n", program, status,
                png_path);
    else
        printf("# Plot written to %s\n", png_path);
}
