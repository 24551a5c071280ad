/*
 * test_bench_cli.c - the benchmarks' option parser (bench/bench_cli.h) and
 * table writer (bench/bench_output.h): every kind's default and values, the
 * forms of a flag (--name value, --name=value, -x value, -xvalue, a unique
 * prefix), a bad value of every kind refused with "bad value for --flag:
 * 'x'" and its dest untouched, unknown / ambiguous / valueless flags,
 * --help listing every option with its default, and the table's header and
 * rows lining up. Rank 1 of an Open MPI job (OMPI_COMM_WORLD_RANK=1) gets
 * the same results and prints nothing.
 *
 * Build: tests/meson.build (suite unit), links bench_harness.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_cli.h"
#include "bench_output.h"

static int failures;

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stdout, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stdout, __VA_ARGS__);                                   \
            fputc('\n', stdout);                                            \
            failures++;                                                     \
        }                                                                   \
    } while (0)

/* Everything a parse can fill. */
typedef struct {
    int iters, warmup, check, choice, flag, custom;
    size_t bytes;
    double seconds;
    const char *json, *name;
    size_t sizes[4];
    int size_count;
    int ints[3];
    int int_count;
} opts_t;

static const char *const colours[] = {"red", "green", "blue", NULL};

/* CUSTOM: "even" numbers only. */
static int even_option(const char *text, void *dest)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (*end != '\0' || end == text || v % 2 != 0) return -1;
    *(int *)dest = (int)v;
    return 0;
}

static opts_t opts;
static const bench_cli_option_t table[] = {
    BENCH_CLI_ITERS(&opts.iters, "20", "timed calls"),
    BENCH_CLI_WARMUP(&opts.warmup, "5", "untimed calls before them"),
    {.long_name = "check",
     .short_name = 'c',
     .kind = BENCH_CLI_INT,
     .dest = &opts.check,
     .value = "1",
     .min = 0,
     .max = 1,
     .expect = "0 or 1",
     .help = "check the results"},
    {.long_name = "bytes",
     .short_name = 'b',
     .kind = BENCH_CLI_SIZE,
     .dest = &opts.bytes,
     .value = "4K",
     .min = 1,
     .max = 0x1p40,
     .value_name = "SIZE",
     .help = "a size"},
    {.long_name = "seconds",
     .kind = BENCH_CLI_DOUBLE,
     .dest = &opts.seconds,
     .value = "2.5",
     .min = 0,
     .max = 60,
     .open_min = 1,
     .value_name = "S",
     .help = "a time"},
    {.long_name = "colour",
     .kind = BENCH_CLI_CHOICE,
     .dest = &opts.choice,
     .value = "green",
     .choices = colours,
     .help = "a choice"},
    {.long_name = "name",
     .kind = BENCH_CLI_STRING,
     .dest = &opts.name,
     .value = "hora",
     .value_name = "NAME",
     .help = "a string"},
    {.long_name = "even",
     .kind = BENCH_CLI_CUSTOM,
     .dest = &opts.custom,
     .parse = even_option,
     .value = "2",
     .expect = "an even integer",
     .value_name = "N",
     .help = "parsed by the benchmark"},
    {.long_name = "sizes",
     .kind = BENCH_CLI_SIZE,
     .dest = opts.sizes,
     .list_count = &opts.size_count,
     .list_max = 4,
     .value_name = "LIST",
     .help = "a list of sizes"},
    {.long_name = "sweep",
     .kind = BENCH_CLI_INT,
     .dest = opts.ints,
     .list_count = &opts.int_count,
     .list_max = 3,
     .min = 1,
     .max = 9,
     .value_name = "LIST",
     .default_note = "1,2",
     .help = "a list of integers"},
    {.long_name = "print-config", .kind = BENCH_CLI_FLAG, .dest = &opts.flag, .help = "a flag"},
    BENCH_CLI_JSON(&opts.json, "write JSON"),
    {0},
};
static const bench_cli_t cli = {
    .program = "test-bench",
    .synopsis = "test-bench [flags]",
    .about = "A table of every kind.",
    .epilog = "Exit status: 0, or 2 on a bad flag.",
    .options = table,
};

/* stderr of one parse, captured in a file. */
static char captured[4096];

/* Parses the NULL-terminated words as rank `rank` of an Open MPI job
 * would (every rank but 0 keeps quiet), with stderr captured. */
static bench_cli_result_t parse_list(int rank, const char *first, va_list args)
{
    char *argv[32] = {"test-bench"};
    int argc = 1;
    for (const char *w = first; w != NULL && argc < 31; w = va_arg(args, const char *)) argv[argc++] = (char *)w;

    char rank_text[16];
    snprintf(rank_text, sizeof(rank_text), "%d", rank);
    setenv("OMPI_COMM_WORLD_RANK", rank_text, 1);
    memset(&opts, 0, sizeof(opts));
    opts.ints[0] = 1, opts.ints[1] = 2, opts.int_count = 2; /* a caller's own default */
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved = dup(fileno(stderr));
    dup2(fileno(tmp), fileno(stderr));
    bench_cli_result_t result = bench_cli_parse(&cli, argc, argv);
    fflush(stderr);
    dup2(saved, fileno(stderr));
    close(saved);
    rewind(tmp);
    size_t n = fread(captured, 1, sizeof(captured) - 1, tmp);
    captured[n] = '\0';
    fclose(tmp);
    return result;
}

static bench_cli_result_t parse_words(int rank, const char *first, ...)
{
    va_list args;
    va_start(args, first);
    bench_cli_result_t result = parse_list(rank, first, args);
    va_end(args);
    return result;
}

#define PARSE(...) parse_words(0, __VA_ARGS__, NULL)

/* The words are refused (exit 2) with exactly the message want; on rank 1
 * the same, silently. */
static void refused(const char *want, const char *first, ...)
{
    va_list args;
    for (int rank = 0; rank < 2; rank++) {
        va_start(args, first);
        bench_cli_result_t result = parse_list(rank, first, args);
        va_end(args);
        CHECK(result == BENCH_CLI_ERROR, "rank %d: %s ... accepted", rank, first ? first : "");
        CHECK(strcmp(captured, rank == 0 ? want : "") == 0, "rank %d: got \"%s\", want \"%s\"", rank, captured,
              rank == 0 ? want : "");
    }
}
static void test_defaults(void)
{
    CHECK(parse_words(0, NULL) == BENCH_CLI_RUN, "no flags");
    CHECK(opts.iters == 20 && opts.warmup == 5 && opts.check == 1, "%d %d %d", opts.iters, opts.warmup, opts.check);
    CHECK(opts.bytes == 4096, "%zu", opts.bytes);
    CHECK(opts.seconds == 2.5, "%g", opts.seconds);
    CHECK(opts.choice == 1, "%d", opts.choice);
    CHECK(opts.name && strcmp(opts.name, "hora") == 0, "name %s", opts.name ? opts.name : "(none)");
    CHECK(opts.custom == 2, "%d", opts.custom);
    CHECK(opts.size_count == 0, "%d", opts.size_count);
    CHECK(opts.int_count == 2 && opts.ints[0] == 1 && opts.ints[1] == 2, "the caller's default list kept");
    CHECK(opts.flag == 0 && opts.json == NULL, "flag %d json %p", opts.flag, (const void *)opts.json);
    CHECK(captured[0] == '\0', "no message: %s", captured);
}

static void test_values(void)
{
    CHECK(PARSE("-n", "7", "--warmup_iters=0", "-c0", "--bytes", "64M", "--seconds", "0.25", "--colour", "blue",
                "--name=x", "--even", "-4", "--sizes", "0,4K,1G", "--sweep", "3,9,1", "--print-config", "--json",
                "out.json") == BENCH_CLI_RUN,
          "%s", captured);
    CHECK(opts.iters == 7 && opts.warmup == 0 && opts.check == 0, "%d %d %d", opts.iters, opts.warmup, opts.check);
    CHECK(opts.bytes == (size_t)64 << 20, "%zu", opts.bytes);
    CHECK(opts.seconds == 0.25, "%g", opts.seconds);
    CHECK(opts.choice == 2, "%d", opts.choice);
    CHECK(opts.name && strcmp(opts.name, "x") == 0, "name %s", opts.name ? opts.name : "(none)");
    CHECK(opts.custom == -4, "%d", opts.custom);
    CHECK(opts.size_count == 3 && opts.sizes[0] == 0 && opts.sizes[1] == 4096 && opts.sizes[2] == (size_t)1 << 30, "%d",
          opts.size_count);
    CHECK(opts.int_count == 3 && opts.ints[0] == 3 && opts.ints[1] == 9 && opts.ints[2] == 1, "%d", opts.int_count);
    CHECK(opts.flag == 1 && opts.json && strcmp(opts.json, "out.json") == 0, "%d", opts.flag);
    /* The last of a repeated flag wins; a unique prefix names its flag. */
    CHECK(PARSE("-n", "3", "--iters", "4", "--warm", "9", "--sec=1") == BENCH_CLI_RUN, "%s", captured);
    CHECK(opts.iters == 4 && opts.warmup == 9 && opts.seconds == 1.0, "%d %d %g", opts.iters, opts.warmup,
          opts.seconds);
}

/* One bad value: refused, exit 2, the message names the flag and the value,
 * and the dest keeps its default. */
static void bad_value(const char *flag, const char *value, const char *label, const char *expect)
{
    char want[256];
    CHECK(PARSE(flag, value) == BENCH_CLI_ERROR, "%s %s accepted", flag, value);
    snprintf(want, sizeof(want), "test-bench: bad value for %s: '%s' (", label, value);
    CHECK(strncmp(captured, want, strlen(want)) == 0, "%s %s: got \"%s\", want \"%s...\"", flag, value, captured, want);
    CHECK(strstr(captured, expect) != NULL, "%s: \"%s\" lacks \"%s\"", flag, captured, expect);
    CHECK(strchr(captured, '\n') == captured + strlen(captured) - 1, "one line: %s", captured);
}

static void test_bad_values(void)
{
    bad_value("-n", "0", "-n/--iters", "an integer in [1, 1000000000]");
    bad_value("--iters", "12x", "-n/--iters", "an integer");
    bad_value("-w", "-1", "-w/--warmup_iters", "[0, 1000000000]");
    bad_value("-w", " 3", "-w/--warmup_iters", "an integer");
    bad_value("--iters", "99999999999999999999", "-n/--iters", "an integer");
    bad_value("-c", "2", "-c/--check", "0 or 1");
    bad_value("--bytes", "4Q", "-b/--bytes", "a size");
    bad_value("--bytes", "0", "-b/--bytes", "a size in [1, 1024G]");
    bad_value("--bytes", "-1", "-b/--bytes", "K, M or G");
    bad_value("--seconds", "0", "--seconds", "a number in (0, 60]");
    bad_value("--seconds", "nan", "--seconds", "a number");
    bad_value("--seconds", "1e999", "--seconds", "a number");
    bad_value("--colour", "Red", "--colour", "red, green or blue");
    bad_value("--name", "", "--name", "not empty");
    bad_value("--even", "3", "--even", "an even integer");
    bad_value("--sizes", "1K,,2K", "--sizes", "up to 4 comma-separated values");
    bad_value("--sizes", "1,2,3,4,5", "--sizes", "up to 4");
    bad_value("--sweep", "1,10", "--sweep", "each an integer in [1, 9]");
    bad_value("--json", "", "--json", "not empty");

    /* The dest keeps its default after a refusal. */
    CHECK(PARSE("--sweep", "4,x") == BENCH_CLI_ERROR, "accepted");
    CHECK(opts.int_count == 2 && opts.ints[0] == 1 && opts.ints[1] == 2, "a bad list changed the dest");
    CHECK(PARSE("-n", "abc") == BENCH_CLI_ERROR && opts.iters == 20, "iters %d", opts.iters);
}

static void test_bad_flags(void)
{
    refused("test-bench: unknown flag '--frob' (see --help)\n", "--frob", NULL);
    refused("test-bench: unknown flag '--frob' (see --help)\n", "--frob=3", NULL);
    refused("test-bench: unknown flag '-z' (see --help)\n", "-z", NULL);
    refused("test-bench: ambiguous flag '--s' (see --help)\n", "--s", "1", NULL); /* seconds, sizes, sweep */
    refused("test-bench: -n/--iters needs a value (see --help)\n", "-n", NULL);
    refused("test-bench: --print-config takes no value\n", "--print-config=1", NULL);
    refused("test-bench: unexpected argument 'stray' (see --help)\n", "stray", NULL);
    refused("test-bench: unexpected argument '-n' (see --help)\n", "--", "-n", NULL);
    refused("test-bench: bad value for -n/--iters: '0' (an integer in [1, 1000000000])\n", "-n", "0", NULL);

    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    CHECK(bench_cli_fail(&cli, "%s", "x") == BENCH_CLI_ERROR, "bench_cli_fail");
}

static void test_help(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    bench_cli_usage(&cli, out);
    fclose(out);
    CHECK(strncmp(text, "usage: test-bench [flags]\n", 26) == 0, "%s", text);
    CHECK(strstr(text, "Exit status: 0, or 2 on a bad flag.") != NULL, "no epilog");
    /* Every option, its short name and the default it prints. */
    for (const bench_cli_option_t *o = table; o->long_name != NULL; o++) {
        char want[128];
        if (o->short_name)
            snprintf(want, sizeof(want), "  -%c, --%s", o->short_name, o->long_name);
        else
            snprintf(want, sizeof(want), "      --%s", o->long_name);
        const char *line = strstr(text, want);
        CHECK(line != NULL, "--help lacks \"%s\"", want);
        const char *fallback = o->value ? o->value : o->default_note;
        if (line != NULL && fallback != NULL) {
            /* The default is on this option's lines, before the next option. */
            const char *next = strstr(line + 1, "\n  -");
            char dflt[64];
            snprintf(dflt, sizeof(dflt), "(default %s)", fallback);
            const char *at = strstr(line, dflt);
            CHECK(at != NULL && (next == NULL || at < next), "--%s: no \"%s\"", o->long_name, dflt);
        }
    }
    CHECK(strstr(text, "  -h, --help") != NULL, "--help lacks -h");
    CHECK(strstr(text, "--colour red|green|blue") != NULL, "choices not listed");
    /* No line runs past the wrap width. */
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        CHECK(n <= 100, "a line of %zu characters", n);
        p += n + (p[n] == '\n');
    }
    free(text);
    /* -h and --help print it (to stdout; rank 0 only) and exit 0. */
    CHECK(PARSE("-n", "3", "--help") == BENCH_CLI_HELP && BENCH_CLI_HELP == 0, "--help");
    CHECK(parse_words(1, "-h", NULL) == BENCH_CLI_HELP, "-h");
    CHECK(BENCH_CLI_ERROR == 2, "a bad flag's exit status");
}

static void test_sizes(void)
{
    size_t b;
    CHECK(bench_size_parse("64M", &b) == 0 && b == (size_t)64 << 20, "64M");
    CHECK(bench_size_parse("4kb", &b) == 0 && b == 4096, "4kb");
    CHECK(bench_size_parse("1000", &b) == 0 && b == 1000, "1000");
    CHECK(bench_size_parse("+1", &b) != 0 && bench_size_parse("1KK", &b) != 0 && bench_size_parse("", &b) != 0,
          "accepted junk");
    CHECK(bench_size_parse("17179869184G", &b) != 0, "2^64 accepted");
    char label[32];
    bench_size_label((size_t)3 << 20, label, sizeof(label));
    CHECK(strcmp(label, "3M") == 0, "%s", label);
    bench_size_label(3000, label, sizeof(label));
    CHECK(strcmp(label, "3000") == 0, "%s", label);
}

/* The header lines and the rows put each column's right edge (the left
 * edge of a left-aligned one) in the same place. */
static void test_table(void)
{
    static const bench_column_t columns[] = {
        {.name = " name", .width = 10, .left = 1},
        {.name = "size", .unit = "(B)", .width = 8, .group = "sizes", .group_span = 2},
        {.name = "count", .width = 6},
        {.name = "time", .unit = "(us)", .width = 9},
    };
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    for (int indent = 0; indent < 2; indent++) {
        bench_table_t table = {
            .out = out, .columns = columns, .column_count = 4, .indent = indent ? " " : "", .comment = 1};
        bench_table_header(&table);
        bench_table_text(&table, "default");
        bench_table_cell(&table, "%d", 4096);
        bench_table_cell(&table, "%d", 1024);
        bench_table_number(&table, 12.5, "%.2f");
        bench_table_end_row(&table);
        bench_table_text(&table, "x");
        bench_table_text(&table, "1");
        bench_table_text(&table, "2");
        bench_table_number(&table, 123456789.0, "%.2f"); /* too wide: %.2e */
        bench_table_end_row(&table);
    }
    fclose(out);
    /* Written out by hand from the widths: '#' takes the indent, or the
     * first column's first place when there is no indent. */
    const char *want = "#               sizes\n"
                       "# name         size  count      time\n"
                       "#               (B)             (us)\n"
                       "default        4096   1024     12.50\n"
                       "x                 1      2  1.23e+08\n"
                       "#                sizes\n"
                       "# name          size  count      time\n"
                       "#                (B)             (us)\n"
                       " default        4096   1024     12.50\n"
                       " x                 1      2  1.23e+08\n";
    CHECK(strcmp(text, want) == 0, "table:\n%s\nwant:\n%s", text, want);
    free(text);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    test_defaults();
    test_values();
    test_bad_values();
    test_bad_flags();
    test_help();
    test_sizes();
    test_table();
    if (failures)
        printf("%d check(s) failed\n", failures);
    else
        printf("ok\n");
    return failures ? 1 : 0;
}
