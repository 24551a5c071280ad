/*
 * bench_report.c - hora-bench-allreduce's output: the nccl-tests style table
 * on stdout (header, one line per row, footer), --json and --plot, written
 * through the benchmarks' report writer (bench_output.h).
 *
 * Build: part of hora-bench-allreduce (bench/meson.build).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "bench_allreduce.h"
#include "bench_common.h"
#include "hora.h"

/* Columns of the table: 4 + 2 placements x 4 + the peer's 2. */
enum { REPORT_COLUMNS_MAX = 14 };

const char *bench_peer_name(bench_peer_t peer)
{
    switch (peer) {
    case BENCH_PEER_NONE: return "none";
    case BENCH_PEER_MPI: return "mpi";
    case BENCH_PEER_NCCL: return "nccl";
    case BENCH_PEER_COPY: return "copy";
    case BENCH_PEER_AUTO: return "auto";
    }
    return "?";
}

/* The peer block's heading and its bandwidth column. */
static const char *report_peer_heading(bench_peer_t peer)
{
    return peer == BENCH_PEER_MPI ? "mpi baseline" : peer == BENCH_PEER_NCCL ? "nccl peer" : "copy peer";
}

static const char *report_peer_column(bench_peer_t peer)
{
    return peer == BENCH_PEER_MPI ? "mpi_busbw" : peer == BENCH_PEER_NCCL ? "nccl_busbw" : "copy_bw";
}

/* The series name of the peer in --plot. */
static const char *report_peer_series(bench_peer_t peer)
{
    return peer == BENCH_PEER_MPI    ? "MPI_Allreduce"
           : peer == BENCH_PEER_NCCL ? "ncclAllReduce"
                                     : "device copy (bytes / time)";
}

/* The table in nccl-tests' layout (each row leads with a blank, the header
 * lines with '#'), into columns. */
static bench_table_t report_table(const bench_options_t *options, bench_column_t columns[REPORT_COLUMNS_MAX])
{
    static const bench_column_t fixed[] = {
        {.name = "size", .unit = "(B)", .width = 11},
        {.name = "count", .unit = "(elements)", .width = 12},
        {.name = "type", .width = 6},
        {.name = "redop", .width = 6},
    };
    static const bench_column_t placement[] = {
        {.name = "time", .unit = "(us)", .width = 10, .group_span = 4},
        {.name = "algbw", .unit = "(GB/s)", .width = 8},
        {.name = "busbw", .unit = "(GB/s)", .width = 8},
        {.name = "#wrong", .width = 7},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) columns[n++] = fixed[i];
    for (int block = 0; block < 2; block++) {
        columns[n] = placement[0];
        columns[n].group = block == 0 ? "out-of-place" : "in-place";
        n++;
        for (size_t i = 1; i < sizeof(placement) / sizeof(placement[0]); i++) columns[n++] = placement[i];
    }
    if (options->peer != BENCH_PEER_NONE) {
        columns[n++] = (bench_column_t){.name = report_peer_column(options->peer),
                                        .unit = "(GB/s)",
                                        .width = 10,
                                        .group = report_peer_heading(options->peer),
                                        .group_span = 2};
        columns[n++] = (bench_column_t){.name = "ratio", .width = 7};
    }
    return (bench_table_t){.out = stdout, .columns = columns, .column_count = n, .indent = " ", .comment = 1};
}

void bench_report_header(const bench_options_t *options, int rank, int nranks)
{
    /* Every rank's identity, gathered to rank 0 like nccl-tests' device list. */
    struct {
        int pid, local_rank, node, gpu;
        char host[MPI_MAX_PROCESSOR_NAME];
        char gpu_bus_id[32];
    } me = {.pid = (int)getpid(),
            .local_rank = hora_local_rank(),
            .node = hora_node_rank(),
            .gpu = options->gpu_device},
      *all = NULL;
    snprintf(me.gpu_bus_id, sizeof(me.gpu_bus_id), "%s", options->gpu_bus_id);
    int host_len = 0;
    MPI_Get_processor_name(me.host, &host_len);
    if (rank == 0) all = calloc((size_t)nranks, sizeof(me));
    MPI_Gather(&me, (int)sizeof(me), MPI_BYTE, all, (int)sizeof(me), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank != 0) return;

    char min_label[32], max_label[32], list[128];
    bench_size_label(options->min_bytes, min_label, sizeof(min_label));
    bench_size_label(options->max_bytes, max_label, sizeof(max_label));
    printf("# " BENCH_NAME "\n");
    printf("#  ranks        : %d\n", nranks);
    printf("#  nodes        : %d\n", hora_node_count());
    printf("#  transport    : %s", hora_transport_name());
    if (strcmp(options->transport, "auto") != 0 && strcmp(options->transport, hora_transport_name()) != 0)
        printf("   (WARNING: --transport %s was asked for)", options->transport);
    printf("\n");
    printf("#  sizes        : %s .. %s bytes, factor %zu\n", min_label, max_label, options->step_factor);
    list[0] = '\0';
    for (int i = 0; i < options->dtype_count; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? " " : "",
                 hora_dtype_name(options->dtypes[i]));
    printf("#  types        : %s\n", list);
    list[0] = '\0';
    for (int i = 0; i < options->op_count; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? " " : "", hora_op_name(options->ops[i]));
    printf("#  redops       : %s\n", list);
    printf("#  iterations   : %d timed, %d warm-up; check %s\n", options->iters, options->warmup_iters,
           options->check ? "on" : "off");
    if (options->memory == BENCH_MEMORY_CUDA)
        printf("#  memory       : cuda (hora_mem_alloc_device; HORA_CUDA_POOL_BYTES=%s, %s)\n",
               options->cuda_pool_bytes, options->cuda_pool_from_user ? "yours" : "set by the benchmark");
    switch (options->peer) {
    case BENCH_PEER_MPI: printf("#  baseline     : MPI_Allreduce in place (avg as MPI_SUM)\n"); break;
    case BENCH_PEER_NCCL:
        printf("#  baseline     : nccl: ncclAllReduce in place on the same device buffers (%s)\n",
               options->peer_detail[0] ? options->peer_detail : "NCCL");
        break;
    case BENCH_PEER_COPY:
        printf("#  baseline     : copy: one device-to-device cudaMemcpyAsync of the row's bytes per call%s;\n"
               "#                 ratio = hora in-place algbw / copy_bw (bench/README.md: what it can reach)\n",
               options->gpu_turns > 1 ? ", the ranks of a GPU in turns" : "");
        break;
    case BENCH_PEER_NONE:
    case BENCH_PEER_AUTO: printf("#  baseline     : none\n"); break;
    }
    if (options->peer_note[0] != '\0') printf("#  peer note    : %s\n", options->peer_note);
    printf("#  busbw        : algbw * 2(n-1)/n = algbw * %.4f\n", bench_allreduce_bus_factor(nranks));
    printf("#\n");
    if (all != NULL) {
        for (int r = 0; r < nranks; r++) {
            if (options->memory == BENCH_MEMORY_CUDA)
                printf("#  Rank %3d Pid %7d on %-20s node %3d local rank %3d device %2d [%s]\n", r, all[r].pid,
                       all[r].host, all[r].node, all[r].local_rank, all[r].gpu, all[r].gpu_bus_id);
            else
                printf("#  Rank %3d Pid %7d on %-20s node %3d local rank %3d\n", r, all[r].pid, all[r].host,
                       all[r].node, all[r].local_rank);
        }
        printf("#\n");
    }
    free(all);

    bench_column_t columns[REPORT_COLUMNS_MAX];
    bench_table_t table = report_table(options, columns);
    bench_table_header(&table);
}

/* A value that outgrows its column (in-place algbw on one rank, where the
 * call has nothing to do) turns to %.2e and still leaves a blank before it. */
void bench_report_row(const bench_options_t *options, const bench_row_t *row)
{
    bench_column_t columns[REPORT_COLUMNS_MAX];
    bench_table_t table = report_table(options, columns);
    bench_table_cell(&table, "%zu", row->bytes);
    bench_table_cell(&table, "%zu", row->count);
    bench_table_text(&table, hora_dtype_name(row->dtype));
    bench_table_text(&table, hora_op_name(row->op));

    const double times[2] = {row->oop_time_us, row->ip_time_us};
    const double algbws[2] = {row->oop_algbw, row->ip_algbw};
    const double busbws[2] = {row->oop_busbw, row->ip_busbw};
    const long long wrongs[2] = {row->oop_wrong, row->ip_wrong};
    for (int i = 0; i < 2; i++) {
        bench_table_number(&table, times[i], "%.2f");
        bench_table_number(&table, algbws[i], "%.2f");
        bench_table_number(&table, busbws[i], "%.2f");
        if (wrongs[i] < 0)
            bench_table_text(&table, "N/A");
        else
            bench_table_cell(&table, "%lld", wrongs[i]);
    }
    if (options->peer != BENCH_PEER_NONE) {
        if (row->has_peer)
            bench_table_number(&table, row->peer_bw, "%.2f");
        else
            bench_table_text(&table, "n/a");
        if (isnan(row->ratio))
            bench_table_text(&table, "n/a");
        else
            bench_table_number(&table, row->ratio, "%.2f");
    }
    bench_table_end_row(&table);
}

/* Footer; returns 1 when any result was wrong or written out of bounds. */
int bench_report_footer(const bench_options_t *options, const bench_row_t *rows, size_t row_count)
{
    long long wrong = 0, out_of_bounds = 0;
    double busbw_sum = 0.0, ratio_sum = 0.0;
    size_t ratio_count = 0;
    for (size_t i = 0; i < row_count; i++) {
        if (options->check) {
            wrong += rows[i].oop_wrong + rows[i].ip_wrong;
            out_of_bounds += rows[i].out_of_bounds;
        }
        busbw_sum += rows[i].ip_busbw;
        if (!isnan(rows[i].ratio)) {
            ratio_sum += rows[i].ratio;
            ratio_count++;
        }
    }
    if (options->check)
        printf("# Out of bounds values : %lld %s\n", out_of_bounds, out_of_bounds ? "FAILED" : "OK");
    else
        printf("# Out of bounds values : not checked (-c 0)\n");
    printf("# Avg bus bandwidth    : %g\n", row_count ? busbw_sum / (double)row_count : 0.0);
    if (options->peer != BENCH_PEER_NONE) {
        const char *label = options->peer == BENCH_PEER_MPI    ? "Avg ratio vs MPI     "
                            : options->peer == BENCH_PEER_NCCL ? "Avg ratio vs NCCL    "
                                                               : "Avg ratio vs copy    ";
        if (ratio_count)
            printf("# %s: %g\n", label, ratio_sum / (double)ratio_count);
        else
            printf("# %s: n/a\n", label);
    }
    if (options->check) printf("# Wrong results        : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
    printf("#\n");
    fflush(stdout);
    return wrong != 0 || out_of_bounds != 0;
}

/* One object per row; in-place values appear twice, once under the plain
 * names (time_us, algbw, busbw) that other hora benchmarks also use. */
void bench_report_json(bench_json_t *json, const bench_options_t *options, const bench_row_t *rows, size_t row_count,
                       int nranks)
{
    bench_json_array(json, NULL);
    for (size_t i = 0; i < row_count; i++) {
        const bench_row_t *r = &rows[i];
        bench_json_object(json, NULL);
        bench_json_integer(json, "bytes", (long long)r->bytes);
        bench_json_integer(json, "count", (long long)r->count);
        bench_json_string(json, "type", hora_dtype_name(r->dtype));
        bench_json_string(json, "op", hora_op_name(r->op));
        bench_json_integer(json, "ranks", nranks);
        bench_json_string(json, "transport", hora_transport_name());
        bench_json_number(json, "oop_time_us", "%.6g", r->oop_time_us, 1);
        bench_json_number(json, "oop_algbw", "%.6g", r->oop_algbw, 1);
        bench_json_number(json, "oop_busbw", "%.6g", r->oop_busbw, 1);
        bench_json_number(json, "ip_time_us", "%.6g", r->ip_time_us, 1);
        bench_json_number(json, "ip_algbw", "%.6g", r->ip_algbw, 1);
        bench_json_number(json, "ip_busbw", "%.6g", r->ip_busbw, 1);
        bench_json_number(json, "time_us", "%.6g", r->ip_time_us, 1);
        bench_json_number(json, "algbw", "%.6g", r->ip_algbw, 1);
        bench_json_number(json, "busbw", "%.6g", r->ip_busbw, 1);
        if (r->oop_wrong < 0)
            bench_json_raw(json, "wrong", "null");
        else
            bench_json_integer(json, "wrong", r->oop_wrong + r->ip_wrong);
        bench_json_number(json, "mpi_busbw", "%.6g", r->peer_bw, r->has_peer && options->peer == BENCH_PEER_MPI);
        bench_json_number(json, "ratio", "%.6g", r->ratio, !isnan(r->ratio));
        bench_json_number(json, "peer_time_us", "%.6g", r->peer_time_us, r->has_peer);
        /* Device memory: where the buffers were and what the peer was. */
        if (options->memory == BENCH_MEMORY_CUDA) {
            bench_json_string(json, "memory", "cuda");
            bench_json_string(json, "peer", bench_peer_name(options->peer));
            bench_json_number(json, "peer_bw", "%.6g", r->peer_bw, r->has_peer);
        }
        bench_json_end(json);
    }
    bench_json_end(json);
}

/* Series of one panel: hora in place, hora out of place, the peer. */
enum { PLOT_IN_PLACE, PLOT_OUT_OF_PLACE, PLOT_PEER, PLOT_KINDS };

/* One panel: busbw against size of one (type, op) group of rows. */
static void report_plot_panel(FILE *gp, const bench_row_t *group, size_t size_count, bench_peer_t peer)
{
    const char *const names[PLOT_KINDS] = {"hora in-place", "hora out-of-place", report_peer_series(peer)};
    static const char *const styles[PLOT_KINDS] = {"lw 2 pt 7", "lw 2 pt 5 dt 2", "lw 2 pt 9 dt 3"};
    int kinds = peer != BENCH_PEER_NONE && group->has_peer ? 3 : 2;

    /* One rank: busbw is 0 throughout; give gnuplot a range it can draw. */
    double top = 0.0;
    for (size_t i = 0; i < size_count; i++) {
        const double values[3] = {group[i].ip_busbw, group[i].oop_busbw, group[i].peer_bw};
        for (int kind = 0; kind < kinds; kind++) top = values[kind] > top ? values[kind] : top;
    }
    fprintf(gp, top > 0.0 ? "set yrange [0:*]\n" : "set yrange [0:1]\n");

    fprintf(gp, "plot ");
    for (int kind = 0; kind < kinds; kind++)
        fprintf(gp, "%s'-' using 1:2 with linespoints %s title '%s'", kind ? ", " : "", styles[kind], names[kind]);
    fprintf(gp, "\n");
    /* Inline data, one block per series in the order of the plot command. */
    for (int kind = 0; kind < kinds; kind++) {
        for (size_t i = 0; i < size_count; i++) {
            const bench_row_t *r = &group[i];
            double busbw = kind == PLOT_IN_PLACE ? r->ip_busbw : kind == PLOT_OUT_OF_PLACE ? r->oop_busbw : r->peer_bw;
            if (r->bytes > 0) /* log axis */
                fprintf(gp, "%zu %.6g\n", r->bytes, busbw);
        }
        fprintf(gp, "e\n");
    }
}

/* --plot: one panel per (type, op), laid out types down and ops across when
 * there are several. A missing or failing gnuplot is a warning: the numbers
 * are on stdout (and in --json) anyway. */
void bench_report_plot(const bench_options_t *options, const bench_row_t *rows, size_t row_count, const size_t *sizes,
                       size_t size_count, int nranks)
{
    /* Rows come grouped by (type, op), types outer, one row per size. */
    size_t groups = size_count ? row_count / size_count : 0;
    int multi = groups > 1;
    /* Panels: types down and ops across when both vary, else a near-square
     * grid (7 types of one op: 3 x 3, not 7 x 1). */
    int columns = options->op_count, lines = options->dtype_count;
    if (multi && (columns == 1 || lines == 1)) {
        columns = 1;
        while ((size_t)(columns * columns) < groups) columns++;
        lines = ((int)groups + columns - 1) / columns;
    }
    int width = multi ? 40 + 400 * columns : 1000;
    int height = multi ? 60 + 320 * lines : 650;
    FILE *gp = bench_plot_open(BENCH_NAME, options->plot_path, width, height, multi ? 9 : 12);
    if (gp == NULL) return;
    fprintf(gp, "set logscale x 2\nset grid\nset xrange [%zu:%zu]\n", sizes[0] > 1 ? sizes[0] - sizes[0] / 4 : 1,
            sizes[size_count - 1] + sizes[size_count - 1] / 4);
    /* Panels are small: their axis labels move into the overall title. */
    if (multi)
        fprintf(gp, "unset xlabel\nunset ylabel\n");
    else
        fprintf(gp, "set xlabel 'message size (bytes)'\nset ylabel 'busbw (GB/s)'\n");
    /* Tics at the measured sizes, labelled 4K, 1M, ...; rotated when crowded. */
    fprintf(gp, "set xtics %s(", size_count > (multi ? 6u : 12u) ? "rotate by -45 " : "");
    for (size_t i = 0; i < size_count; i++) {
        char label[32];
        bench_size_label(sizes[i], label, sizeof(label));
        fprintf(gp, "%s'%s' %zu", i ? ", " : "", label, sizes[i]);
    }
    fprintf(gp, ")\n");

    char title[200];
    snprintf(title, sizeof(title), "hora all-reduce bus bandwidth%s, %d ranks, %s transport%s",
             multi ? " (GB/s) against message size (bytes)" : "", nranks, hora_transport_name(),
             options->memory == BENCH_MEMORY_CUDA ? ", device memory" : "");
    if (multi) {
        fprintf(gp, "set multiplot layout %d,%d title ", lines, columns);
        bench_gnuplot_quote(gp, title);
        fprintf(gp, "\n");
        for (size_t g = 0; g < groups; g++) {
            const bench_row_t *group = &rows[g * size_count];
            fprintf(gp, "set title '%s %s'\n", hora_dtype_name(group->dtype), hora_op_name(group->op));
            /* Every panel draws the same series; a key below each keeps
             * the panels the same size and off the data. */
            fprintf(gp, "set key below horizontal\n");
            report_plot_panel(gp, group, size_count, options->peer);
        }
        fprintf(gp, "unset multiplot\n");
    } else if (groups == 1) {
        snprintf(title + strlen(title), sizeof(title) - strlen(title), ", %s %s", hora_dtype_name(rows[0].dtype),
                 hora_op_name(rows[0].op));
        fprintf(gp, "set key top left\nset title ");
        bench_gnuplot_quote(gp, title);
        fprintf(gp, "\n");
        report_plot_panel(gp, rows, size_count, options->peer);
    }
    bench_plot_close(gp, BENCH_NAME, options->plot_path);
}
