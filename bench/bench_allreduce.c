/*
 * bench_allreduce.c - hora-bench-allreduce: all-reduce bandwidth of hora,
 * optionally against MPI_Allreduce, in the vocabulary and layout of
 * nccl-tests (size, count, type, redop, time, algbw, busbw, #wrong).
 *
 *   mpirun -np 4 hora-bench-allreduce -b 4K -e 64M -f 2 --baseline mpi
 *
 * For every dtype, op and size, each rank runs -w warm-up and then -n timed
 * hora_allreduce calls out of place (send -> recv) and in place (recv ->
 * recv); the time of a row is each rank's average per call, maximum over
 * ranks. algbw = bytes / time; busbw = algbw * 2(n-1)/n, the traffic each
 * rank's link carries in a ring, comparable across rank counts. With -c 1 one
 * more call per placement runs on inputs whose result is exactly computable
 * (bench_check.h) and every element is compared bitwise.
 *
 * This file parses the flags, measures and checks; bench_report.c prints the
 * table and writes --json and --plot. bench/ uses the public API only
 * (hora.h) plus MPI for the baseline, barriers and the reductions of timings
 * and error counts.
 *
 * Build: meson (bench/meson.build) -> build/bench/hora-bench-allreduce.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "bench_allreduce.h"
#include "bench_check.h"
#include "bench_common.h"
#include "hora.h"

/* Bytes after the output of each checked call that must keep the poison
 * byte: a runtime writing past count elements shows up in the footer's
 * "Out of bounds values". Buffers are allocated this much larger. */
#define BENCH_GUARD_BYTES 256
/* Mismatch details printed per rank; the counts are always complete. */
#define BENCH_MAX_MISMATCH_REPORTS 16

typedef enum {
    BENCH_PARSE_RUN = 0,
    BENCH_PARSE_HELP = 1,
    BENCH_PARSE_ERROR = 2,
} bench_parse_t;

typedef struct {
    unsigned char *send; /* (max_bytes + BENCH_GUARD_BYTES) from hora_mem_alloc */
    unsigned char *recv; /* (max_bytes + BENCH_GUARD_BYTES) from hora_mem_alloc */
} bench_buffers_t;

static int bench_mismatch_reports;

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

enum {
    OPT_BASELINE = 256,
    OPT_JSON,
    OPT_PLOT,
    OPT_TRANSPORT,
    OPT_PRINT_CONFIG,
};

static const char bench_short_options[] = ":b:e:f:n:w:c:d:o:h";
static const struct option bench_long_options[] = {
    {"minbytes", required_argument, NULL, 'b'},
    {"maxbytes", required_argument, NULL, 'e'},
    {"stepfactor", required_argument, NULL, 'f'},
    {"iters", required_argument, NULL, 'n'},
    {"warmup_iters", required_argument, NULL, 'w'},
    {"check", required_argument, NULL, 'c'},
    {"datatype", required_argument, NULL, 'd'},
    {"op", required_argument, NULL, 'o'},
    {"baseline", required_argument, NULL, OPT_BASELINE},
    {"json", required_argument, NULL, OPT_JSON},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"transport", required_argument, NULL, OPT_TRANSPORT},
    {"print-config", no_argument, NULL, OPT_PRINT_CONFIG},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void bench_usage(FILE *out)
{
    fprintf(out,
            "usage: mpirun -np N " BENCH_NAME " [flags]\n"
            "\n"
            "All-reduce bandwidth of hora (out of place and in place), nccl-tests style.\n"
            "\n"
            "  -b, --minbytes SIZE    smallest message, K/M/G = 2^10/2^20/2^30 (default 4K)\n"
            "  -e, --maxbytes SIZE    largest message (default 64M)\n"
            "  -f, --stepfactor N     multiply the size by N between rows, N >= 2 (default 2)\n"
            "  -n, --iters N          timed iterations per row (default 20)\n"
            "  -w, --warmup_iters N   untimed iterations before them (default 5)\n"
            "  -c, --check 0|1        check every element of one more call (default 1)\n"
            "  -d, --datatype TYPE    f32 (default), f16, bf16, f64, i32, i64, u8, ... or all\n"
            "  -o, --op OP            sum (default), avg, min, max, prod or all\n"
            "      --baseline mpi     also time MPI_Allreduce in place; print mpi_busbw and\n"
            "                         ratio = hora in-place busbw / mpi_busbw\n"
            "      --json FILE        write one JSON object per row to FILE (rank 0)\n"
            "      --plot FILE.png    plot busbw against size with gnuplot (rank 0)\n"
            "      --transport T      shm, ucx, mpi or auto (default): sets the other\n"
            "                         transports' HORA_DISABLE_<NAME>=1 before hora_init\n"
            "      --print-config     print every HORA_* setting and exit\n"
            "  -h, --help             this text\n"
            "\n"
            "Exit status: 0 on success, 1 when a result is wrong or a call fails, 2 on a bad flag.\n");
}

/* "-b/--minbytes" for the option whose getopt value is val. */
static const char *bench_option_label(int val, char *buf, size_t len)
{
    for (const struct option *o = bench_long_options; o->name != NULL; o++) {
        if (o->val != val)
            continue;
        if (val < 256)
            snprintf(buf, len, "-%c/--%s", val, o->name);
        else
            snprintf(buf, len, "--%s", o->name);
        return buf;
    }
    snprintf(buf, len, "-%c", val);
    return buf;
}

/* Fills options from argv. Errors and --help print on the first rank only
 * (MPI is not up yet: the launcher's environment tells the rank). */
static bench_parse_t bench_options_parse(int argc, char **argv, bench_options_t *options, int quiet)
{
    bench_options_t o = {
        .min_bytes = 4096,
        .max_bytes = 64u << 20,
        .step_factor = 2,
        .iters = 20,
        .warmup_iters = 5,
        .check = 1,
        .dtypes = {HORA_DTYPE_F32},
        .dtype_count = 1,
        .ops = {HORA_OP_SUM},
        .op_count = 1,
        .transport = "auto",
    };
    FILE *err = quiet ? NULL : stderr;
    char label[64];
    long value;
    int c;

    opterr = 0; /* getopt's own messages would repeat on every rank */
    while ((c = getopt_long(argc, argv, bench_short_options, bench_long_options, NULL)) != -1) {
        const char *name = bench_option_label(c, label, sizeof(label));
        switch (c) {
        case 'b':
        case 'e': {
            size_t bytes;
            if (bench_size_parse(optarg, &bytes) != 0) {
                if (err)
                    fprintf(err, BENCH_NAME ": %s: '%s' is not a size (digits with an optional K, M or G suffix)\n",
                            name, optarg);
                return BENCH_PARSE_ERROR;
            }
            *(c == 'b' ? &o.min_bytes : &o.max_bytes) = bytes;
            break;
        }
        case 'f':
            if (bench_int_parse(optarg, 2, 1 << 20, &value) != 0) {
                if (err)
                    fprintf(err, BENCH_NAME ": %s: '%s' is not an integer factor in [2, 1048576]\n", name, optarg);
                return BENCH_PARSE_ERROR;
            }
            o.step_factor = (size_t)value;
            break;
        case 'n':
        case 'w':
            if (bench_int_parse(optarg, c == 'n' ? 1 : 0, 1000000000, &value) != 0) {
                if (err)
                    fprintf(err, BENCH_NAME ": %s: '%s' is not an integer in [%d, 1000000000]\n", name,
                            optarg, c == 'n' ? 1 : 0);
                return BENCH_PARSE_ERROR;
            }
            *(c == 'n' ? &o.iters : &o.warmup_iters) = (int)value;
            break;
        case 'c':
            if (bench_int_parse(optarg, 0, 1, &value) != 0) {
                if (err)
                    fprintf(err, BENCH_NAME ": %s: '%s' must be 0 or 1\n", name, optarg);
                return BENCH_PARSE_ERROR;
            }
            o.check = (int)value;
            break;
        case 'd':
            if (strcmp(optarg, "all") == 0) {
                for (int i = 0; i < HORA_DTYPE_COUNT; i++)
                    o.dtypes[i] = (hora_dtype_t)i;
                o.dtype_count = HORA_DTYPE_COUNT;
            } else {
                int dtype = hora_dtype_parse(optarg);
                if (dtype < 0 || dtype >= HORA_DTYPE_COUNT) {
                    if (err)
                        fprintf(err, BENCH_NAME ": %s: unknown type '%s' (f32, f16, bf16, f64, i32, i64, u8 or all)\n",
                                name, optarg);
                    return BENCH_PARSE_ERROR;
                }
                o.dtypes[0] = (hora_dtype_t)dtype;
                o.dtype_count = 1;
            }
            break;
        case 'o':
            if (strcmp(optarg, "all") == 0) {
                for (int i = 0; i < HORA_OP_COUNT; i++)
                    o.ops[i] = (hora_op_t)i;
                o.op_count = HORA_OP_COUNT;
            } else {
                int op = hora_op_parse(optarg);
                if (op < 0 || op >= HORA_OP_COUNT) {
                    if (err)
                        fprintf(err, BENCH_NAME ": %s: unknown op '%s' (sum, avg, min, max, prod or all)\n",
                                name, optarg);
                    return BENCH_PARSE_ERROR;
                }
                o.ops[0] = (hora_op_t)op;
                o.op_count = 1;
            }
            break;
        case OPT_BASELINE:
            if (strcmp(optarg, "mpi") != 0) {
                if (err)
                    fprintf(err, BENCH_NAME ": %s: unknown baseline '%s' (only 'mpi')\n", name, optarg);
                return BENCH_PARSE_ERROR;
            }
            o.baseline_mpi = 1;
            break;
        case OPT_JSON:
        case OPT_PLOT:
            if (optarg[0] == '\0') {
                if (err)
                    fprintf(err, BENCH_NAME ": %s: needs a file name\n", name);
                return BENCH_PARSE_ERROR;
            }
            *(c == OPT_JSON ? &o.json_path : &o.plot_path) = optarg;
            break;
        case OPT_TRANSPORT:
            if (strcmp(optarg, "shm") != 0 && strcmp(optarg, "ucx") != 0 && strcmp(optarg, "mpi") != 0 &&
                strcmp(optarg, "auto") != 0) {
                if (err)
                    fprintf(err, BENCH_NAME ": %s: unknown transport '%s' (shm, ucx, mpi or auto)\n", name,
                            optarg);
                return BENCH_PARSE_ERROR;
            }
            o.transport = optarg;
            break;
        case OPT_PRINT_CONFIG: o.print_config = 1; break;
        case 'h':
            if (!quiet)
                bench_usage(stdout);
            return BENCH_PARSE_HELP;
        case ':':
            if (err)
                fprintf(err, BENCH_NAME ": %s needs a value (see --help)\n",
                        bench_option_label(optopt, label, sizeof(label)));
            return BENCH_PARSE_ERROR;
        default: /* '?' */
            if (err) {
                if (optopt == OPT_PRINT_CONFIG || optopt == 'h')
                    fprintf(err, BENCH_NAME ": %s takes no value\n", bench_option_label(optopt, label, sizeof(label)));
                else if (optopt != 0)
                    fprintf(err, BENCH_NAME ": unknown flag -%c (see --help)\n", optopt);
                else
                    fprintf(err, BENCH_NAME ": unknown flag '%s' (see --help)\n", argv[optind - 1]);
            }
            return BENCH_PARSE_ERROR;
        }
    }
    if (optind < argc) {
        if (err)
            fprintf(err, BENCH_NAME ": unexpected argument '%s' (see --help)\n", argv[optind]);
        return BENCH_PARSE_ERROR;
    }
    if (o.min_bytes == 0 || o.max_bytes == 0) {
        if (err)
            fprintf(err, BENCH_NAME ": %s must be at least 1 byte\n", o.min_bytes == 0 ? "-b/--minbytes" : "-e/--maxbytes");
        return BENCH_PARSE_ERROR;
    }
    if (o.min_bytes > o.max_bytes) {
        if (err)
            fprintf(err, BENCH_NAME ": -b/--minbytes (%zu) is larger than -e/--maxbytes (%zu)\n", o.min_bytes,
                    o.max_bytes);
        return BENCH_PARSE_ERROR;
    }
    if (o.max_bytes > SIZE_MAX / 4) {
        if (err)
            fprintf(err, BENCH_NAME ": -e/--maxbytes (%zu) is too large\n", o.max_bytes);
        return BENCH_PARSE_ERROR;
    }
    *options = o;
    return BENCH_PARSE_RUN;
}

/* --transport: the runtime reads its kill switches at hora_init. */
static int bench_transport_select(const char *transport)
{
    static const char *const names[] = {"shm", "ucx", "mpi"};
    int failed = 0;
    if (strcmp(transport, "auto") == 0) return 0;
    /* Keep the chosen one, switch the others off. */
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char var[32];
        snprintf(var, sizeof(var), "HORA_DISABLE_%c%c%c", names[i][0] - 32, names[i][1] - 32, names[i][2] - 32);
        failed |= setenv(var, strcmp(transport, names[i]) == 0 ? "0" : "1", 1);
    }
    return failed ? -1 : 0;
}

/* ------------------------------------------------------------------------ */
/* Timing and checking                                                       */
/* ------------------------------------------------------------------------ */

/* A failed collective ends the run: hora_abort tells the other ranks (their
 * calls fail with this rank's reason instead of waiting), and exiting
 * non-zero lets mpirun end the job. */
static void bench_allreduce_or_abort(const void *send, void *recv, size_t count, hora_dtype_t dtype,
                                     hora_op_t op)
{
    hora_status_t status = hora_allreduce(send, recv, count, dtype, op);
    if (status == HORA_OK)
        return;
    char message[1024];
    snprintf(message, sizeof(message), BENCH_NAME ": rank %d: hora_allreduce(%s, %s, count %zu, %s) failed: %s: %s",
             hora_rank(), hora_dtype_name(dtype), hora_op_name(op), count,
             send == recv ? "in place" : "out of place", hora_status_string(status), hora_last_error());
    fprintf(stderr, "%s\n  (rerun with HORA_LOG_LEVEL=debug for the runtime's account)\n", message);
    hora_abort(status, message);
    exit(1);
}

/* Microseconds per call of iters calls after warmup_iters untimed ones:
 * each rank's average, the maximum over ranks (the slowest rank is the
 * collective's time). mpi_datatype != MPI_DATATYPE_NULL times MPI_Allreduce
 * in place on recv instead of hora. */
static double bench_time_us(const bench_options_t *options, const void *send, void *recv, size_t count,
                            hora_dtype_t dtype, hora_op_t op, MPI_Datatype mpi_datatype)
{
    int total = options->warmup_iters + options->iters;
    double start = 0.0;
    for (int i = 0; i < total; i++) {
        if (i == options->warmup_iters) {
            MPI_Barrier(MPI_COMM_WORLD);
            start = MPI_Wtime();
        }
        if (mpi_datatype != MPI_DATATYPE_NULL)
            MPI_Allreduce(MPI_IN_PLACE, recv, (int)count, mpi_datatype, bench_mpi_op(op), MPI_COMM_WORLD);
        else
            bench_allreduce_or_abort(send, recv, count, dtype, op);
    }
    double local_us = (MPI_Wtime() - start) * 1e6 / options->iters;
    double max_us = 0.0;
    MPI_Allreduce(&local_us, &max_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max_us;
}

static size_t bench_guard_damage(const unsigned char *guard)
{
    size_t damaged = 0;
    for (size_t i = 0; i < BENCH_GUARD_BYTES; i++)
        damaged += guard[i] != BENCH_POISON_BYTE;
    return damaged;
}

static void bench_mismatch_report(const bench_pattern_t *pattern, const void *buf, size_t count,
                                  const char *what, size_t wrong, size_t first)
{
    if (wrong == 0 || bench_mismatch_reports++ >= BENCH_MAX_MISMATCH_REPORTS)
        return;
    char got[32], want[32];
    bench_pattern_format(pattern, buf, first, got, sizeof(got));
    bench_pattern_format_expected(pattern, first, want, sizeof(want));
    fprintf(stderr, BENCH_NAME ": rank %d: %s %s count %zu %s: %zu wrong, first at element %zu: %s, expected %s\n",
            hora_rank(), hora_dtype_name(pattern->dtype), hora_op_name(pattern->op), count, what, wrong, first,
            got, want);
}

/* One checked call out of place: fresh inputs, poisoned output and guard.
 * Returns the wrong elements; adds damage outside the output (guard bytes,
 * changed send elements) to *out_of_bounds. */
static size_t bench_check_out_of_place(const bench_pattern_t *pattern, bench_buffers_t *buffers,
                                       size_t count, size_t *out_of_bounds)
{
    size_t bytes = count * pattern->elem_bytes;
    size_t first = 0;
    bench_pattern_fill(pattern, buffers->send, count);
    memset(buffers->recv, BENCH_POISON_BYTE, bytes + BENCH_GUARD_BYTES);
    bench_allreduce_or_abort(buffers->send, buffers->recv, count, pattern->dtype, pattern->op);

    size_t wrong = bench_pattern_count_wrong(pattern, buffers->recv, count, &first);
    bench_mismatch_report(pattern, buffers->recv, count, "out of place", wrong, first);
    size_t changed = bench_pattern_count_changed(pattern, buffers->send, count, &first);
    if (changed != 0 && bench_mismatch_reports++ < BENCH_MAX_MISMATCH_REPORTS)
        fprintf(stderr, BENCH_NAME ": rank %d: out-of-place call changed %zu elements of its send buffer\n",
                hora_rank(), changed);
    *out_of_bounds += changed + bench_guard_damage(buffers->recv + bytes);
    return wrong;
}

/* The same in place: recv holds the inputs and receives the result. */
static size_t bench_check_in_place(const bench_pattern_t *pattern, bench_buffers_t *buffers, size_t count,
                                   size_t *out_of_bounds)
{
    size_t bytes = count * pattern->elem_bytes;
    size_t first = 0;
    bench_pattern_fill(pattern, buffers->recv, count);
    memset(buffers->recv + bytes, BENCH_POISON_BYTE, BENCH_GUARD_BYTES);
    bench_allreduce_or_abort(buffers->recv, buffers->recv, count, pattern->dtype, pattern->op);

    size_t wrong = bench_pattern_count_wrong(pattern, buffers->recv, count, &first);
    bench_mismatch_report(pattern, buffers->recv, count, "in place", wrong, first);
    *out_of_bounds += bench_guard_damage(buffers->recv + bytes);
    return wrong;
}

/* Once before the table, as nccl-tests does: touch every page of both
 * buffers and let hora and MPI set up whatever they set up lazily
 * (connections, staging memory), so the first row does not pay for it. */
static void bench_warm_up(const bench_options_t *options, bench_buffers_t *buffers)
{
    size_t bytes = options->max_bytes + BENCH_GUARD_BYTES;
    memset(buffers->send, 0, bytes);
    memset(buffers->recv, 0, bytes);
    int calls = options->warmup_iters > 0 ? options->warmup_iters : 1;
    for (int i = 0; i < calls; i++) {
        bench_allreduce_or_abort(buffers->send, buffers->recv, options->max_bytes, HORA_DTYPE_U8, HORA_OP_SUM);
        bench_allreduce_or_abort(buffers->recv, buffers->recv, options->max_bytes, HORA_DTYPE_U8, HORA_OP_SUM);
        if (options->baseline_mpi && options->max_bytes <= INT_MAX)
            MPI_Allreduce(MPI_IN_PLACE, buffers->recv, (int)options->max_bytes, MPI_UINT8_T, MPI_SUM,
                          MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static void bench_row_run(const bench_options_t *options, const bench_pattern_t *pattern,
                          bench_buffers_t *buffers, size_t count, bench_row_t *row)
{
    hora_dtype_t dtype = pattern->dtype;
    hora_op_t op = pattern->op;
    double bus_factor = bench_allreduce_bus_factor(pattern->nranks);
    size_t bytes = count * pattern->elem_bytes;
    size_t wrong[2] = {0, 0};
    size_t out_of_bounds = 0;

    *row = (bench_row_t){.bytes = bytes, .count = count, .dtype = dtype, .op = op, .ratio = NAN};

    /* The timed calls run on the check inputs. In place, values drift as the
     * calls repeat (SUM grows, up to inf in f16); none ever becomes
     * subnormal, the one kind of value that slows CPU arithmetic down. */
    bench_pattern_fill(pattern, buffers->send, count);
    bench_pattern_fill(pattern, buffers->recv, count);

    row->oop_time_us = bench_time_us(options, buffers->send, buffers->recv, count, dtype, op, MPI_DATATYPE_NULL);
    if (options->check)
        wrong[0] = bench_check_out_of_place(pattern, buffers, count, &out_of_bounds);

    row->ip_time_us = bench_time_us(options, buffers->recv, buffers->recv, count, dtype, op, MPI_DATATYPE_NULL);
    if (options->check)
        wrong[1] = bench_check_in_place(pattern, buffers, count, &out_of_bounds);

    MPI_Datatype mpi_datatype = bench_mpi_datatype(dtype);
    if (options->baseline_mpi && mpi_datatype != MPI_DATATYPE_NULL && count <= INT_MAX) {
        row->has_mpi = 1;
        row->mpi_time_us = bench_time_us(options, NULL, buffers->recv, count, dtype, op, mpi_datatype);
    }

    /* Bandwidths in GB/s: bytes / (us * 1e-6) / 1e9 = bytes / us / 1e3. */
    row->oop_algbw = row->oop_time_us > 0 ? (double)bytes / row->oop_time_us / 1e3 : 0.0;
    row->oop_busbw = row->oop_algbw * bus_factor;
    row->ip_algbw = row->ip_time_us > 0 ? (double)bytes / row->ip_time_us / 1e3 : 0.0;
    row->ip_busbw = row->ip_algbw * bus_factor;
    if (row->has_mpi) {
        row->mpi_busbw = row->mpi_time_us > 0 ? (double)bytes / row->mpi_time_us / 1e3 * bus_factor : 0.0;
        /* The time ratio equals the busbw ratio for n > 1 and stays defined
         * for one rank, where every busbw is 0. */
        if (row->ip_time_us > 0 && row->mpi_time_us > 0)
            row->ratio = row->mpi_time_us / row->ip_time_us;
    }

    if (options->check) {
        long long local[3] = {(long long)wrong[0], (long long)wrong[1], (long long)out_of_bounds};
        long long total[3];
        MPI_Allreduce(local, total, 3, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        row->oop_wrong = total[0];
        row->ip_wrong = total[1];
        row->out_of_bounds = total[2];
    } else {
        row->oop_wrong = row->ip_wrong = -1;
    }
}

/* ------------------------------------------------------------------------ */
/* main                                                                      */
/* ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    bench_options_t options;
    bench_parse_t parsed = bench_options_parse(argc, argv, &options, bench_launcher_rank() != 0);
    if (parsed != BENCH_PARSE_RUN)
        return parsed == BENCH_PARSE_HELP ? 0 : 2;
    if (bench_transport_select(options.transport) != 0) {
        perror(BENCH_NAME ": --transport: setenv");
        return 2;
    }

    hora_status_t status = hora_init();
    if (status != HORA_OK) {
        fprintf(stderr, BENCH_NAME ": hora_init failed: %s: %s%s\n", hora_status_string(status), hora_last_error(),
                status == HORA_ERR_CONFIG ? "\n  (fix or unset that HORA_* variable; --print-config lists them)" : "");
        return 1;
    }
    int rank = hora_rank();
    int nranks = hora_size();
    int exit_code = 0;

    if (options.print_config) {
        if (rank == 0) {
            hora_config_print(stdout);
            fflush(stdout);
        }
        hora_shutdown();
        return 0;
    }

    /* Open the JSON file before the run, so a bad path fails in a second. */
    FILE *json = NULL;
    int json_ok = 1;
    if (rank == 0 && options.json_path != NULL) {
        json = fopen(options.json_path, "w");
        if (json == NULL) {
            fprintf(stderr, BENCH_NAME ": --json: cannot open '%s' for writing: %s\n", options.json_path,
                    strerror(errno));
            json_ok = 0;
        }
    }
    MPI_Bcast(&json_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!json_ok) {
        hora_shutdown();
        return 2;
    }

    size_t sizes_capacity = 1;
    for (size_t s = options.min_bytes; s <= options.max_bytes / options.step_factor; s *= options.step_factor)
        sizes_capacity++;
    size_t *sizes = malloc(sizes_capacity * sizeof(*sizes));
    size_t size_count = 0;
    size_t row_capacity = sizes_capacity * (size_t)options.dtype_count * (size_t)options.op_count;
    bench_row_t *rows = calloc(row_capacity, sizeof(*rows));
    bench_buffers_t buffers = {NULL, NULL};
    int alloc_ok = sizes != NULL && rows != NULL;
    if (alloc_ok) {
        for (size_t s = options.min_bytes;; s *= options.step_factor) {
            sizes[size_count++] = s;
            if (s > options.max_bytes / options.step_factor)
                break;
        }
        size_t buffer_bytes = options.max_bytes + BENCH_GUARD_BYTES;
        status = hora_mem_alloc(buffer_bytes, (void **)&buffers.send);
        if (status == HORA_OK)
            status = hora_mem_alloc(buffer_bytes, (void **)&buffers.recv);
        if (status != HORA_OK) {
            fprintf(stderr,
                    BENCH_NAME ": rank %d: hora_mem_alloc(%zu) for the send and recv buffers failed: %s: %s\n"
                    "  (lower -e/--maxbytes or raise HORA_SHM_POOL_BYTES; see --print-config)\n",
                    rank, buffer_bytes, hora_status_string(status), hora_last_error());
            alloc_ok = 0;
        }
    }
    /* Every rank must agree before the first collective. */
    MPI_Allreduce(MPI_IN_PLACE, &alloc_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!alloc_ok) {
        exit_code = 1;
        goto out_free;
    }

    bench_report_header(&options, rank, nranks);
    bench_warm_up(&options, &buffers);

    size_t row_count = 0;
    for (int d = 0; d < options.dtype_count; d++) {
        for (int o = 0; o < options.op_count; o++) {
            bench_pattern_t pattern;
            if (bench_pattern_init(&pattern, options.dtypes[d], options.ops[o], rank, nranks) != 0) {
                char message[128];
                snprintf(message, sizeof(message), BENCH_NAME ": rank %d: out of memory building the check pattern",
                         rank);
                fprintf(stderr, "%s\n", message);
                hora_abort(HORA_ERR_NO_MEMORY, message);
                exit(1);
            }
            for (size_t s = 0; s < size_count; s++) {
                size_t count = sizes[s] / pattern.elem_bytes;
                bench_row_t *row = &rows[row_count++];
                bench_row_run(&options, &pattern, &buffers, count, row);
                if (rank == 0)
                    bench_report_row(&options, row);
            }
            bench_pattern_free(&pattern);
        }
    }

    if (rank == 0) {
        exit_code = bench_report_footer(&options, rows, row_count);
        if (json != NULL) {
            int failed = bench_report_json(json, rows, row_count, nranks) != 0;
            failed |= fclose(json) != 0;
            json = NULL;
            if (failed) {
                fprintf(stderr, BENCH_NAME ": --json: writing '%s' failed\n", options.json_path);
                exit_code = 1;
            } else {
                printf("# JSON written to %s\n", options.json_path);
            }
        }
        if (options.plot_path != NULL)
            bench_report_plot(&options, rows, row_count, sizes, size_count, nranks);
    }
    /* Every rank exits with the same status. */
    MPI_Bcast(&exit_code, 1, MPI_INT, 0, MPI_COMM_WORLD);

out_free:
    if (json != NULL) /* only when the run did not start */
        fclose(json);
    if (buffers.recv != NULL)
        hora_mem_free(buffers.recv);
    if (buffers.send != NULL)
        hora_mem_free(buffers.send);
    free(rows);
    free(sizes);
    hora_shutdown(); /* MPI stays up; hora finalizes it at exit when it started it */
    return exit_code;
}
