/*
 * bench_cli.c - the benchmarks' one option parser and its --help (see
 * bench_cli.h), and the value parsers it shares with them.
 *
 * Build: bench_harness (bench/meson.build), linked by every hora-bench-*.
 */
#include "bench_cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --help: option column width and the width text wraps at. */
#define CLI_HELP_INDENT 28
#define CLI_HELP_WIDTH 100

int bench_size_parse(const char *text, size_t *bytes)
{
    if (text == NULL || !isdigit((unsigned char)text[0])) return -1; /* strtoull would accept "-1", " 1" and "+1" */
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0) return -1;

    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K':
        shift = 10;
        end++;
        break;
    case 'M':
        shift = 20;
        end++;
        break;
    case 'G':
        shift = 30;
        end++;
        break;
    default: break;
    }
    if (toupper((unsigned char)*end) == 'B') end++;
    if (*end != '\0') return -1;
    if (value > (unsigned long long)(SIZE_MAX >> shift)) return -1;
    *bytes = (size_t)value << shift;
    return 0;
}

void bench_size_label(size_t bytes, char *buf, size_t len)
{
    static const char suffixes[] = {'G', 'M', 'K'};
    for (int i = 0; i < 3; i++) {
        unsigned shift = 30u - 10u * (unsigned)i;
        size_t unit = (size_t)1 << shift;
        if (bytes >= unit && bytes % unit == 0) {
            snprintf(buf, len, "%zu%c", bytes >> shift, suffixes[i]);
            return;
        }
    }
    snprintf(buf, len, "%zu", bytes);
}

int bench_int_parse(const char *text, long min, long max, long *value)
{
    if (text == NULL || text[0] == '\0' || isspace((unsigned char)text[0])) return -1;
    char *end;
    errno = 0;
    long parsed = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || parsed < min || parsed > max) return -1;
    *value = parsed;
    return 0;
}

int bench_launcher_rank(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        long rank;
        const char *text = getenv(names[i]);
        if (text != NULL && bench_int_parse(text, 0, INT_MAX, &rank) == 0) return (int)rank;
    }
    return 0;
}

double bench_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double bench_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- one value ------------------------------------------------------------ */

static int cli_has_range(const bench_cli_option_t *o) { return o->min != 0.0 || o->max != 0.0; }

/* A single value of a scalar kind into dest (an element of a list or the
 * option's own dest). Returns 0 or -1. */
static int cli_scalar_parse(const bench_cli_option_t *o, const char *text, void *dest)
{
    switch (o->kind) {
    case BENCH_CLI_SIZE: {
        size_t bytes;
        if (bench_size_parse(text, &bytes) != 0) return -1;
        if (cli_has_range(o) && ((double)bytes < o->min || (double)bytes > o->max)) return -1;
        *(size_t *)dest = bytes;
        return 0;
    }
    case BENCH_CLI_INT: {
        long value;
        long min = cli_has_range(o) ? (long)o->min : INT_MIN, max = cli_has_range(o) ? (long)o->max : INT_MAX;
        if (bench_int_parse(text, min, max, &value) != 0) return -1;
        *(int *)dest = (int)value;
        return 0;
    }
    case BENCH_CLI_DOUBLE: {
        if (text[0] == '\0' || isspace((unsigned char)text[0])) return -1;
        char *end;
        double value = strtod(text, &end);
        if (*end != '\0' || !isfinite(value)) return -1;
        if (cli_has_range(o) && (value < o->min || value > o->max || (o->open_min && value == o->min))) return -1;
        *(double *)dest = value;
        return 0;
    }
    default: return -1;
    }
}

static size_t cli_element_bytes(bench_cli_kind_t kind)
{
    return kind == BENCH_CLI_SIZE ? sizeof(size_t) : kind == BENCH_CLI_INT ? sizeof(int) : sizeof(double);
}

/* The option's value (or its default) into its dest. Returns 0 or -1. */
static int cli_value_parse(const bench_cli_option_t *o, const char *text)
{
    if (o->list_count != NULL) {
        /* Parsed into a scratch copy first: a bad list leaves dest alone. */
        int count = 0;
        size_t element = cli_element_bytes(o->kind);
        char item[256];
        const char *p = text;
        double scratch_elements[64]; /* aligned for size_t, int and double */
        unsigned char *scratch = (unsigned char *)scratch_elements;
        if ((size_t)o->list_max * element > sizeof(scratch_elements)) return -1;
        for (;;) {
            size_t len = strcspn(p, ",");
            if (len == 0 || len >= sizeof(item) || count == o->list_max) return -1;
            memcpy(item, p, len);
            item[len] = '\0';
            if (cli_scalar_parse(o, item, scratch + (size_t)count * element) != 0) return -1;
            count++;
            if (p[len] == '\0') break;
            p += len + 1;
        }
        memcpy(o->dest, scratch, (size_t)count * element);
        *o->list_count = count;
        return 0;
    }
    switch (o->kind) {
    case BENCH_CLI_FLAG: *(int *)o->dest = 1; return 0;
    case BENCH_CLI_STRING:
        if (text[0] == '\0') return -1;
        *(const char **)o->dest = text;
        return 0;
    case BENCH_CLI_CHOICE:
        for (int i = 0; o->choices[i] != NULL; i++)
            if (strcmp(text, o->choices[i]) == 0) {
                *(int *)o->dest = i;
                return 0;
            }
        return -1;
    case BENCH_CLI_CUSTOM: return o->parse(text, o->dest);
    default: return cli_scalar_parse(o, text, o->dest);
    }
}

/* ---- names and messages -------------------------------------------------- */

/* "-n/--iters" or "--json". */
static const char *cli_label(const bench_cli_option_t *o, char *buf, size_t len)
{
    if (o->short_name)
        snprintf(buf, len, "-%c/--%s", o->short_name, o->long_name);
    else
        snprintf(buf, len, "--%s", o->long_name);
    return buf;
}

/* "a, b or c" (join ", ", last " or ") or "a|b|c" into buf. */
static void cli_choices_text(const char *const *choices, const char *join_text, const char *last_join, char *buf,
                             size_t len)
{
    buf[0] = '\0';
    for (int i = 0; choices[i] != NULL; i++) {
        size_t used = strlen(buf);
        const char *join = i == 0 ? "" : choices[i + 1] == NULL ? last_join : join_text;
        snprintf(buf + used, len - used, "%s%s", join, choices[i]);
    }
}

static void cli_number_text(const bench_cli_option_t *o, double value, char *buf, size_t len)
{
    if (o->kind == BENCH_CLI_SIZE && value == floor(value) && value < 1e19)
        bench_size_label((size_t)value, buf, len);
    else
        snprintf(buf, len, "%.15g", value);
}

/* What a good value looks like: the text the error message ends with. */
static void cli_expect_text(const bench_cli_option_t *o, char *buf, size_t len)
{
    char lo[32], hi[32], range[96] = "";
    if (o->expect != NULL) {
        snprintf(buf, len, "%s", o->expect);
        return;
    }
    if (cli_has_range(o)) {
        cli_number_text(o, o->min, lo, sizeof(lo));
        cli_number_text(o, o->max, hi, sizeof(hi));
        snprintf(range, sizeof(range), " in %s%s, %s]", o->open_min ? "(" : "[", lo, hi);
    }
    const char *what = o->kind == BENCH_CLI_SIZE ? "a size" : o->kind == BENCH_CLI_INT ? "an integer" : "a number";
    const char *how = o->kind == BENCH_CLI_SIZE ? ": digits with an optional K, M or G suffix" : "";
    switch (o->kind) {
    case BENCH_CLI_SIZE:
    case BENCH_CLI_INT:
    case BENCH_CLI_DOUBLE:
        if (o->list_count != NULL)
            snprintf(buf, len, "up to %d comma-separated values, each %s%s%s", o->list_max, what, range, how);
        else
            snprintf(buf, len, "%s%s%s", what, range, how);
        break;
    case BENCH_CLI_CHOICE: cli_choices_text(o->choices, ", ", " or ", buf, len); break;
    case BENCH_CLI_STRING: snprintf(buf, len, "not empty"); break;
    default: snprintf(buf, len, "see --help"); break;
    }
}

bench_cli_result_t bench_cli_fail(const bench_cli_t *cli, const char *format, ...)
{
    if (bench_launcher_rank() != 0) return BENCH_CLI_ERROR;
    va_list args;
    va_start(args, format);
    fprintf(stderr, "%s: ", cli->program);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    return BENCH_CLI_ERROR;
}

static bench_cli_result_t cli_bad_value(const bench_cli_t *cli, const bench_cli_option_t *o, const char *text)
{
    char label[64], expect[256];
    cli_expect_text(o, expect, sizeof(expect));
    return bench_cli_fail(cli, "bad value for %s: '%s' (%s)", cli_label(o, label, sizeof(label)), text, expect);
}

/* ---- --help ---------------------------------------------------------------- */

/* text from column `column` on, wrapped at CLI_HELP_WIDTH with continuation
 * lines indented to `indent`. */
static void cli_wrap(FILE *out, const char *text, int column, int indent)
{
    const char *p = text;
    while (*p != '\0') {
        size_t word = strcspn(p, " ");
        if (column > indent && column + 1 + (int)word > CLI_HELP_WIDTH) {
            fprintf(out, "\n%*s", indent, "");
            column = indent;
        } else if (column > indent) {
            fputc(' ', out);
            column++;
        }
        fprintf(out, "%.*s", (int)word, p);
        column += (int)word;
        p += word;
        while (*p == ' ') p++;
    }
}

void bench_cli_usage(const bench_cli_t *cli, FILE *out)
{
    static const bench_cli_option_t help = {
        .long_name = "help", .short_name = 'h', .kind = BENCH_CLI_FLAG, .help = "this text"};
    fprintf(out, "usage: %s\n", cli->synopsis);
    if (cli->about != NULL) {
        fprintf(out, "\n");
        cli_wrap(out, cli->about, 0, 0);
        fprintf(out, "\n");
    }
    fprintf(out, "\n");
    for (const bench_cli_option_t *o = cli->options;; o++) {
        if (o->long_name == NULL) o = &help;
        char head[128], value[160] = "", text[1024];
        if (o->kind != BENCH_CLI_FLAG) {
            if (o->value_name != NULL)
                snprintf(value, sizeof(value), " %s", o->value_name);
            else if (o->kind == BENCH_CLI_CHOICE) {
                value[0] = ' ';
                cli_choices_text(o->choices, "|", "|", value + 1, sizeof(value) - 1);
            } else
                snprintf(value, sizeof(value), " VALUE");
        }
        if (o->short_name)
            snprintf(head, sizeof(head), "  -%c, --%s%s", o->short_name, o->long_name, value);
        else
            snprintf(head, sizeof(head), "      --%s%s", o->long_name, value);
        const char *fallback = o->value != NULL ? o->value : o->default_note;
        if (fallback != NULL)
            snprintf(text, sizeof(text), "%s (default %s)", o->help, fallback);
        else
            snprintf(text, sizeof(text), "%s", o->help);
        fprintf(out, "%s", head);
        int column = (int)strlen(head);
        if (column + 2 > CLI_HELP_INDENT) {
            fprintf(out, "\n%*s", CLI_HELP_INDENT, "");
        } else {
            fprintf(out, "%*s", CLI_HELP_INDENT - column, "");
        }
        cli_wrap(out, text, CLI_HELP_INDENT, CLI_HELP_INDENT);
        fprintf(out, "\n");
        if (o == &help) break;
    }
    if (cli->epilog != NULL) {
        fprintf(out, "\n");
        cli_wrap(out, cli->epilog, 0, 0);
        fprintf(out, "\n");
    }
}

/* ---- argv ------------------------------------------------------------------ */

/* The option --name (name_len bytes of it) means: exact match, else the one
 * option it is a prefix of. NULL when none or several. */
static const bench_cli_option_t *cli_find_long(const bench_cli_t *cli, const char *name, size_t name_len,
                                               int *ambiguous)
{
    const bench_cli_option_t *prefix_of = NULL;
    int prefixes = 0;
    *ambiguous = 0;
    for (const bench_cli_option_t *o = cli->options; o->long_name != NULL; o++) {
        if (strncmp(o->long_name, name, name_len) != 0) continue;
        if (o->long_name[name_len] == '\0') return o;
        prefix_of = o;
        prefixes++;
    }
    *ambiguous = prefixes > 1;
    return prefixes == 1 ? prefix_of : NULL;
}

static const bench_cli_option_t *cli_find_short(const bench_cli_t *cli, char name)
{
    for (const bench_cli_option_t *o = cli->options; o->long_name != NULL; o++)
        if (o->short_name == name) return o;
    return NULL;
}

static int cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

bench_cli_result_t bench_cli_parse(const bench_cli_t *cli, int argc, char **argv)
{
    /* Defaults first: the table's text goes through the same parser. */
    for (const bench_cli_option_t *o = cli->options; o->long_name != NULL; o++)
        if (o->value != NULL && o->kind != BENCH_CLI_FLAG && cli_value_parse(o, o->value) != 0)
            return bench_cli_fail(cli, "bad default for --%s: '%s' (a bug in the benchmark)", o->long_name, o->value);

    int options_end = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (options_end || arg[0] != '-' || arg[1] == '\0')
            return bench_cli_fail(cli, "unexpected argument '%s' (see --help)", arg);
        if (strcmp(arg, "--") == 0) {
            options_end = 1;
            continue;
        }
        if (cli_is_help(arg)) {
            if (bench_launcher_rank() == 0) bench_cli_usage(cli, stdout);
            return BENCH_CLI_HELP;
        }

        const bench_cli_option_t *o;
        const char *value = NULL; /* attached: --name=value, -xvalue */
        char label[64];
        if (arg[1] == '-') {
            const char *name = arg + 2;
            size_t name_len = strcspn(name, "=");
            int ambiguous;
            o = cli_find_long(cli, name, name_len, &ambiguous);
            if (o == NULL)
                return bench_cli_fail(cli, "%s flag '%.*s' (see --help)", ambiguous ? "ambiguous" : "unknown",
                                      (int)(name_len + 2), arg);
            if (name[name_len] == '=') value = name + name_len + 1;
        } else {
            o = cli_find_short(cli, arg[1]);
            if (o == NULL) return bench_cli_fail(cli, "unknown flag '-%c' (see --help)", arg[1]);
            if (arg[2] != '\0') value = arg + 2;
        }
        cli_label(o, label, sizeof(label));
        if (o->kind == BENCH_CLI_FLAG) {
            if (value != NULL) return bench_cli_fail(cli, "%s takes no value", label);
            *(int *)o->dest = 1;
            continue;
        }
        if (value == NULL) {
            if (i + 1 == argc) return bench_cli_fail(cli, "%s needs a value (see --help)", label);
            value = argv[++i];
        }
        if (cli_value_parse(o, value) != 0) return cli_bad_value(cli, o, value);
    }
    return BENCH_CLI_RUN;
}
