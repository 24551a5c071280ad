/*
 * bench_allreduce_options.c - hora-bench-allreduce's command line: the
 * nccl-tests flags (-b -e -f -n -w -c -d -o) and hora's own (--baseline,
 * --memory, --json, --plot, --transport, --print-config, --nccl-lib) as a
 * bench_cli table (bench_cli.h parses them and writes --help), then the
 * checks that involve two flags.
 *
 * Build: part of hora-bench-allreduce (bench/meson.build).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_allreduce.h"
#include "bench_cli.h"
#include "hora.h"

static const char *const bench_memory_names[] = {"host", "cuda", NULL}; /* bench_memory_t order */
static const char *const bench_transport_names[] = {"shm", "ucx", "mpi", "auto", NULL};
/* --baseline's names, and the peer each one means. */
static const char *const bench_baseline_names[] = {"mpi", "nccl", "copy", "none", NULL};
static const bench_peer_t bench_baseline_peers[] = {BENCH_PEER_MPI, BENCH_PEER_NCCL, BENCH_PEER_COPY, BENCH_PEER_NONE};

/* -d and -o: "all" (every index below count), or one name parse knows.
 * Fills values and *value_count; -1 when the name is unknown. */
static int bench_all_or_one(const char *text, int (*parse)(const char *), int count, int *values, int *value_count)
{
    int one = strcmp(text, "all") == 0 ? -1 : parse(text);
    if (one != -1 && (one < 0 || one >= count)) return -1;
    *value_count = one == -1 ? count : 1;
    for (int i = 0; i < *value_count; i++) values[i] = one == -1 ? i : one;
    return 0;
}

static int bench_dtype_option(const char *text, void *dest)
{
    bench_options_t *o = dest;
    int values[HORA_DTYPE_COUNT];
    if (bench_all_or_one(text, hora_dtype_parse, HORA_DTYPE_COUNT, values, &o->dtype_count) != 0) return -1;
    for (int i = 0; i < o->dtype_count; i++) o->dtypes[i] = (hora_dtype_t)values[i];
    return 0;
}

static int bench_op_option(const char *text, void *dest)
{
    bench_options_t *o = dest;
    int values[HORA_OP_COUNT];
    if (bench_all_or_one(text, hora_op_parse, HORA_OP_COUNT, values, &o->op_count) != 0) return -1;
    for (int i = 0; i < o->op_count; i++) o->ops[i] = (hora_op_t)values[i];
    return 0;
}

/* Fills options from argv. Errors and --help print on the launcher's first
 * rank only (MPI is not up yet). */
bench_cli_result_t bench_options_parse(int argc, char **argv, bench_options_t *options)
{
    bench_options_t o = {.gpu_device = -1, .gpu_turns = 1};
    int step_factor, memory, transport, baseline = -1; /* -1: not given, resolved once --memory is known */
    const bench_cli_option_t table[] = {
        {.long_name = "minbytes",
         .short_name = 'b',
         .kind = BENCH_CLI_SIZE,
         .dest = &o.min_bytes,
         .value = "4K",
         .value_name = "SIZE",
         .min = 1,
         .max = 0x1p50,
         .help = "smallest message, K/M/G = 2^10/2^20/2^30"},
        {.long_name = "maxbytes",
         .short_name = 'e',
         .kind = BENCH_CLI_SIZE,
         .dest = &o.max_bytes,
         .value = "64M",
         .value_name = "SIZE",
         .min = 1,
         .max = 0x1p50,
         .help = "largest message (the send and recv buffers are this big)"},
        {.long_name = "stepfactor",
         .short_name = 'f',
         .kind = BENCH_CLI_INT,
         .dest = &step_factor,
         .value = "2",
         .value_name = "N",
         .min = 2,
         .max = 1 << 20,
         .help = "multiply the size by N between rows"},
        BENCH_CLI_ITERS(&o.iters, "20", "timed calls per row and placement"),
        BENCH_CLI_WARMUP(&o.warmup_iters, "5", "untimed calls before them"),
        {.long_name = "check",
         .short_name = 'c',
         .kind = BENCH_CLI_INT,
         .dest = &o.check,
         .value = "1",
         .value_name = "0|1",
         .min = 0,
         .max = 1,
         .expect = "0 or 1",
         .help = "run one more call per placement and compare every element"},
        {.long_name = "datatype",
         .short_name = 'd',
         .kind = BENCH_CLI_CUSTOM,
         .dest = &o,
         .value = "f32",
         .parse = bench_dtype_option,
         .value_name = "TYPE",
         .expect = "f32, f16, bf16, f64, i32, i64, u8, i8, i16, u16, bool or all",
         .help = "f32, f16, bf16, f64, i32, i64, u8, i8, i16, u16, bool, ... or all"},
        {.long_name = "op",
         .short_name = 'o',
         .kind = BENCH_CLI_CUSTOM,
         .dest = &o,
         .value = "sum",
         .parse = bench_op_option,
         .value_name = "OP",
         .expect = "sum, avg, min, max, prod or all",
         .help = "sum, avg, min, max, prod or all"},
        {.long_name = "memory",
         .kind = BENCH_CLI_CHOICE,
         .dest = &memory,
         .value = "host",
         .choices = bench_memory_names,
         .help = "where send and recv live: hora_mem_alloc, or hora_mem_alloc_device on this rank's GPU "
                 "(local rank % GPUs)"},
        {.long_name = "baseline",
         .kind = BENCH_CLI_CHOICE,
         .dest = &baseline,
         .choices = bench_baseline_names,
         .value_name = "PEER",
         .default_note = "none with host memory; with device memory nccl where it can run, else copy",
         .help = "also time a peer on the same buffers; print its bandwidth and ratio = peer time / hora "
                 "in-place time. Host memory: mpi (MPI_Allreduce in place) or none. Device memory: nccl "
                 "(ncclAllReduce in place; one rank per GPU), copy (a device-to-device cudaMemcpyAsync of "
                 "the bytes) or none"},
        {.long_name = "nccl-lib",
         .kind = BENCH_CLI_STRING,
         .dest = &o.nccl_library,
         .value = "libnccl.so.2",
         .value_name = "PATH",
         .help = "NCCL to dlopen (found through LD_LIBRARY_PATH)"},
        BENCH_CLI_JSON(&o.json_path, "write one JSON object per row to FILE (rank 0)"),
        BENCH_CLI_PLOT(&o.plot_path, "plot busbw against size with gnuplot (rank 0)"),
        {.long_name = "transport",
         .kind = BENCH_CLI_CHOICE,
         .dest = &transport,
         .value = "auto",
         .choices = bench_transport_names,
         .help = "sets the other transports' HORA_DISABLE_<NAME>=1 before hora_init"},
        {.long_name = "print-config",
         .kind = BENCH_CLI_FLAG,
         .dest = &o.print_config,
         .help = "print every HORA_* setting and exit"},
        {0},
    };
    const bench_cli_t cli = {
        .program = BENCH_NAME,
        .synopsis = "mpirun -np N " BENCH_NAME " [flags]",
        .about = "All-reduce bandwidth of hora (out of place and in place), nccl-tests style.",
        .epilog = "Exit status: 0 on success, 1 when a result is wrong or a call fails, 2 on a bad flag.",
        .options = table,
    };

    bench_cli_result_t result = bench_cli_parse(&cli, argc, argv);
    if (result != BENCH_CLI_RUN) return result;
    o.step_factor = (size_t)step_factor;
    o.memory = (bench_memory_t)memory;
    o.transport = bench_transport_names[transport];
    if (o.min_bytes > o.max_bytes)
        return bench_cli_fail(&cli, "-b/--minbytes (%zu) is larger than -e/--maxbytes (%zu)", o.min_bytes, o.max_bytes);
    /* The peers each memory kind can have. */
    o.baseline = baseline < 0 ? BENCH_PEER_AUTO : bench_baseline_peers[baseline];
    if (o.memory == BENCH_MEMORY_HOST) {
        if (baseline < 0) o.baseline = BENCH_PEER_NONE;
        if (o.baseline == BENCH_PEER_NCCL || o.baseline == BENCH_PEER_COPY)
            return bench_cli_fail(&cli, "--baseline %s needs --memory cuda (host memory: mpi or none)",
                                  bench_peer_name(o.baseline));
    } else if (o.baseline == BENCH_PEER_MPI) {
        return bench_cli_fail(&cli, "--baseline mpi with --memory cuda would need a CUDA-aware MPI, which this "
                                    "benchmark does not assume (device memory: nccl, copy or none)");
    }
    o.peer = o.baseline == BENCH_PEER_AUTO ? BENCH_PEER_NONE : o.baseline; /* settled at run time */
    *options = o;
    return BENCH_CLI_RUN;
}

/* --transport: the runtime reads its kill switches at hora_init. */
int bench_transport_select(const char *transport)
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
