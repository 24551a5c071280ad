/*
 * bench_cli.h - the command line of every hora benchmark: one table of
 * options per program, parsed by one parser, with --help generated from the
 * table (nccl-tests' common harness is the model: each test names its
 * flags, the harness does the rest).
 *
 * A benchmark lists its options (long and short name, kind, default, help,
 * where the value goes), hands the table to bench_cli_parse, and gets
 * either "run", "help" (usage printed, exit 0) or "error" (one message
 * printed, exit 2). Every message is printed by the launcher's first rank
 * only (quiet on the others), so an mpirun job says it once.
 *
 * Also the parsing helpers the options share (sizes with K/M/G suffixes,
 * integers in a range), the launcher's rank and the clocks: what a
 * benchmark's main needs before MPI is up. No MPI and no libhora here:
 * hora-bench-loader links neither.
 *
 * Build: bench_harness (bench/meson.build), linked by every hora-bench-*.
 */
#ifndef BENCH_CLI_H
#define BENCH_CLI_H

#include <stddef.h>
#include <stdio.h>

/* Parse a byte count: decimal digits with an optional binary suffix K, M or
 * G (case-insensitive, 1K = 1024), optionally followed by "B" ("64M", "4KB",
 * "1000"). Returns 0 and sets *bytes, or -1 when the text is not a size or
 * overflows size_t. */
int bench_size_parse(const char *text, size_t *bytes);

/* Shortest exact label for a byte count: "512", "4K", "64M", "1G", "3000". */
void bench_size_label(size_t bytes, char *buf, size_t len);

/* Parse a decimal integer in [min, max], the whole string. Returns 0 or -1. */
int bench_int_parse(const char *text, long min, long max, long *value);

/* This process's rank as the launcher announces it in the environment
 * (Open MPI, MPICH/PMI, PMIx, Slurm), 0 when none does. Lets a benchmark
 * print a usage error once rather than once per rank, before MPI is up. */
int bench_launcher_rank(void);

/* Seconds on the monotonic clock (differences only), and this process's
 * CPU seconds, every thread's: the benchmarks' two clocks. */
double bench_wall_s(void);
double bench_cpu_s(void);

/* What an option's value is, and what its dest points to. */
typedef enum {
    BENCH_CLI_FLAG = 0, /* no value; int: set to 1 */
    BENCH_CLI_SIZE,     /* size_t: bench_size_parse, in [min, max] */
    BENCH_CLI_INT,      /* int: decimal, in [min, max] */
    BENCH_CLI_DOUBLE,   /* double: finite, in [min, max] (above min with open_min) */
    BENCH_CLI_STRING,   /* const char *: the argument itself, not empty */
    BENCH_CLI_CHOICE,   /* int: the index of the value in choices */
    BENCH_CLI_CUSTOM,   /* parse(text, dest) decides */
} bench_cli_kind_t;

/* One option. Zero fields mean "none": no short name, no default, no
 * range check (min == max == 0), no list. */
typedef struct {
    const char *long_name; /* "iters" for --iters; NULL ends the table */
    char short_name;       /* 'n' for -n, or 0 */
    bench_cli_kind_t kind;
    void *dest;             /* where the value goes (see the kinds) */
    const char *value_name; /* in --help: "N", "SIZE"; CHOICE: the choices when NULL */
    const char *help;       /* one sentence; wrapped by --help */
    /* The default as the user would type it ("20", "4K"), parsed into dest
     * before argv; NULL leaves dest as the caller set it. */
    const char *value;
    const char *default_note;                   /* --help's "(default ...)" when value is NULL ("auto") */
    double min, max;                            /* SIZE, INT, DOUBLE (and their lists) */
    int open_min;                               /* DOUBLE: the value must be above min */
    const char *const *choices;                 /* CHOICE: NULL-terminated names */
    int (*parse)(const char *text, void *dest); /* CUSTOM: 0, or -1 when bad */
    const char *expect; /* how a good value looks, for the error text ("f32, f16, ... or all") */
    /* A comma-separated list ("0,4M,32M") of SIZE, INT or DOUBLE: dest is an
     * array of list_max elements, *list_count receives how many. */
    int *list_count;
    int list_max;
} bench_cli_option_t;

/* The options every benchmark words the same way. */
#define BENCH_CLI_ITERS(dest_, value_, help_)                                                               \
    {                                                                                                       \
        .long_name = "iters", .short_name = 'n', .kind = BENCH_CLI_INT, .dest = (dest_), .value_name = "N", \
        .help = (help_), .value = (value_), .min = 1, .max = 1000000000                                     \
    }
#define BENCH_CLI_WARMUP(dest_, value_, help_)                                                                     \
    {                                                                                                              \
        .long_name = "warmup_iters", .short_name = 'w', .kind = BENCH_CLI_INT, .dest = (dest_), .value_name = "N", \
        .help = (help_), .value = (value_), .min = 0, .max = 1000000000                                            \
    }
#define BENCH_CLI_JSON(dest_, help_)                                                                          \
    {                                                                                                         \
        .long_name = "json", .kind = BENCH_CLI_STRING, .dest = (dest_), .value_name = "FILE", .help = (help_) \
    }
#define BENCH_CLI_PLOT(dest_, help_)                                                                              \
    {                                                                                                             \
        .long_name = "plot", .kind = BENCH_CLI_STRING, .dest = (dest_), .value_name = "FILE.png", .help = (help_) \
    }

/* A benchmark's command line. -h/--help is added by the parser. */
typedef struct {
    const char *program;               /* "hora-bench-allreduce": the first word of every message */
    const char *synopsis;              /* "mpirun -np N hora-bench-allreduce [flags]" */
    const char *about;                 /* a paragraph after the usage line, or NULL */
    const char *epilog;                /* a paragraph after the options (exit status), or NULL */
    const bench_cli_option_t *options; /* ends with a {0} entry */
} bench_cli_t;

/* What the parse asks of main: go on, or exit with this value as status. */
typedef enum {
    BENCH_CLI_RUN = -1,
    BENCH_CLI_HELP = 0,  /* --help printed: exit 0 */
    BENCH_CLI_ERROR = 2, /* a message printed: exit 2 */
} bench_cli_result_t;

/* Fills every option's dest: its default first, then argv (--name value,
 * --name=value, -x value, -xvalue; a unique prefix of a long name; "--"
 * ends the options). On the launcher's first rank --help goes to stdout
 * and errors to stderr, as "PROGRAM: bad value for -n/--iters: 'x' (an
 * integer in [1, 1000000000])"; the other ranks print nothing (an mpirun
 * job says it once) and return the same. */
bench_cli_result_t bench_cli_parse(const bench_cli_t *cli, int argc, char **argv);

/* The usage text, generated from the table. */
void bench_cli_usage(const bench_cli_t *cli, FILE *out);

/* A check after parsing (-b larger than -e, ...): prints "PROGRAM: " and
 * the message on the launcher's first rank, and returns BENCH_CLI_ERROR. */
__attribute__((format(printf, 2, 3))) bench_cli_result_t bench_cli_fail(const bench_cli_t *cli, const char *format,
                                                                        ...);

#endif /* BENCH_CLI_H */
