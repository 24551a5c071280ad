/*
 * bench_allreduce_options.c - hora-bench-allreduce's command line: the
 * nccl-tests flags (-b -e -f -n -w -c -d -o) and hora's own (--baseline,
 * --memory, --json, --plot, --transport, --print-config, --nccl-lib), their
 * parsing into bench_options_t with a message per bad value, and --help.
 *
 * Build: part of hora-bench-allreduce (bench/meson.build).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_allreduce.h"
#include "bench_common.h"
#include "hora.h"

enum {
    OPT_BASELINE = 256,
    OPT_JSON,
    OPT_PLOT,
    OPT_TRANSPORT,
    OPT_PRINT_CONFIG,
    OPT_MEMORY,
    OPT_NCCL_LIB,
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
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"nccl-lib", required_argument, NULL, OPT_NCCL_LIB},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

void bench_usage(FILE *out)
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
            "  -d, --datatype TYPE    f32 (default), f16, bf16, f64, i32, i64, u8, i8, i16, u16, bool, ... or all\n"
            "  -o, --op OP            sum (default), avg, min, max, prod or all\n"
            "      --memory host|cuda where send and recv live: hora_mem_alloc (default) or\n"
            "                         hora_mem_alloc_device on this rank's GPU (local rank %% GPUs)\n"
            "      --baseline PEER    also time a peer on the same buffers; print its bandwidth and\n"
            "                         ratio = peer time / hora in-place time. Host memory: mpi\n"
            "                         (MPI_Allreduce in place) or none (default). Device memory:\n"
            "                         nccl (ncclAllReduce in place; one rank per GPU), copy (a\n"
            "                         device-to-device cudaMemcpyAsync of the bytes) or none;\n"
            "                         default nccl where it can run, else copy\n"
            "      --nccl-lib PATH    NCCL to dlopen (default libnccl.so.2, found through\n"
            "                         LD_LIBRARY_PATH)\n"
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
bench_parse_t bench_options_parse(int argc, char **argv, bench_options_t *options, int quiet)
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
        .memory = BENCH_MEMORY_HOST,
        .baseline = BENCH_PEER_AUTO, /* resolved below, once --memory is known */
        .nccl_library = "libnccl.so.2",
        .gpu_device = -1,
        .gpu_turns = 1,
    };
    int baseline_given = 0;
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
                        fprintf(err, BENCH_NAME ": %s: unknown type '%s' (f32, f16, bf16, f64, i32, i64, u8, i8, i16, u16, bool or all)\n",
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
        case OPT_BASELINE: {
            static const bench_peer_t peers[] = {BENCH_PEER_MPI, BENCH_PEER_NCCL, BENCH_PEER_COPY, BENCH_PEER_NONE};
            size_t i = 0;
            while (i < sizeof(peers) / sizeof(peers[0]) && strcmp(optarg, bench_peer_name(peers[i])) != 0)
                i++;
            if (i == sizeof(peers) / sizeof(peers[0])) {
                if (err)
                    fprintf(err, BENCH_NAME ": %s: unknown baseline '%s' (mpi, nccl, copy or none)\n", name, optarg);
                return BENCH_PARSE_ERROR;
            }
            o.baseline = peers[i];
            baseline_given = 1;
            break;
        }
        case OPT_MEMORY:
            if (strcmp(optarg, "host") == 0)
                o.memory = BENCH_MEMORY_HOST;
            else if (strcmp(optarg, "cuda") == 0)
                o.memory = BENCH_MEMORY_CUDA;
            else {
                if (err)
                    fprintf(err, BENCH_NAME ": %s: unknown memory '%s' (host or cuda)\n", name, optarg);
                return BENCH_PARSE_ERROR;
            }
            break;
        case OPT_NCCL_LIB:
            if (optarg[0] == '\0') {
                if (err)
                    fprintf(err, BENCH_NAME ": %s: needs a library name or path\n", name);
                return BENCH_PARSE_ERROR;
            }
            o.nccl_library = optarg;
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
    /* The peers each memory kind can have. */
    if (o.memory == BENCH_MEMORY_HOST) {
        if (!baseline_given)
            o.baseline = BENCH_PEER_NONE;
        if (o.baseline == BENCH_PEER_NCCL || o.baseline == BENCH_PEER_COPY) {
            if (err)
                fprintf(err, BENCH_NAME ": --baseline %s needs --memory cuda (host memory: mpi or none)\n",
                        bench_peer_name(o.baseline));
            return BENCH_PARSE_ERROR;
        }
    } else if (o.baseline == BENCH_PEER_MPI) {
        if (err)
            fprintf(err, BENCH_NAME ": --baseline mpi with --memory cuda would need a CUDA-aware MPI, which this "
                         "benchmark does not assume (device memory: nccl, copy or none)\n");
        return BENCH_PARSE_ERROR;
    }
    o.peer = o.baseline == BENCH_PEER_AUTO ? BENCH_PEER_NONE : o.baseline; /* settled at run time */
    *options = o;
    return BENCH_PARSE_RUN;
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
