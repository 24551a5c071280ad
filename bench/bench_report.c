/*
 * bench_report.c - hora-bench-allreduce's output: the nccl-tests style table
 * on stdout (header, one line per row, footer), --json and --plot.
 *
 * Build: part of hora-bench-allreduce (bench/meson.build).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "bench_allreduce.h"
#include "bench_common.h"
#include "hora.h"

/* Column widths, shared by the header and the rows so they stay aligned. */
enum {
    W_SIZE = 12,
    W_COUNT = 13,
    W_TYPE = 7,
    W_OP = 7,
    W_TIME = 11,
    W_BW = 9,
    W_WRONG = 8,
    W_MPI = 11,
    W_RATIO = 8,
    W_BLOCK = W_TIME + 2 * W_BW + W_WRONG,
};

/* The column headings are built in a line buffer and printed without the
 * trailing blanks that right-aligned empty cells leave. */
typedef struct {
    char text[512];
    size_t used;
} report_line_t;

__attribute__((format(printf, 2, 3))) static void report_line_add(report_line_t *line, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    int written = vsnprintf(line->text + line->used, sizeof(line->text) - line->used, format, args);
    va_end(args);
    if (written > 0)
        line->used += (size_t)written < sizeof(line->text) - line->used ? (size_t)written
                                                                         : sizeof(line->text) - line->used - 1;
}

/* label centred in width columns, with the columns' leading gap kept. */
static void report_line_add_centered(report_line_t *line, const char *label, int width)
{
    int len = (int)strlen(label);
    int left = (width - len + 2) / 2;
    report_line_add(line, "%*s%s%*s", left, "", label, width - len - left, "");
}

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

static void report_line_print(report_line_t *line)
{
    while (line->used > 0 && line->text[line->used - 1] == ' ')
        line->used--;
    line->text[line->used] = '\0';
    puts(line->text);
    line->used = 0;
    line->text[0] = '\0';
}

void bench_report_header(const bench_options_t *options, int rank, int nranks)
{
    /* Every rank's identity, gathered to rank 0 like nccl-tests' device list. */
    struct {
        int pid, local_rank, node, gpu;
        char host[MPI_MAX_PROCESSOR_NAME];
        char gpu_bus_id[32];
    } me = {.pid = (int)getpid(), .local_rank = hora_local_rank(), .node = hora_node_rank(),
            .gpu = options->gpu_device},
      *all = NULL;
    snprintf(me.gpu_bus_id, sizeof(me.gpu_bus_id), "%s", options->gpu_bus_id);
    int host_len = 0;
    MPI_Get_processor_name(me.host, &host_len);
    if (rank == 0)
        all = calloc((size_t)nranks, sizeof(me));
    MPI_Gather(&me, (int)sizeof(me), MPI_BYTE, all, (int)sizeof(me), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank != 0)
        return;

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
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? " " : "",
                 hora_op_name(options->ops[i]));
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
    if (options->peer_note[0] != '\0')
        printf("#  peer note    : %s\n", options->peer_note);
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

    report_line_t line = {.used = 0};
    report_line_add(&line, "#%*s", W_SIZE + W_COUNT + W_TYPE + W_OP - 1, "");
    report_line_add_centered(&line, "out-of-place", W_BLOCK);
    report_line_add_centered(&line, "in-place", W_BLOCK);
    int has_peer = options->peer != BENCH_PEER_NONE;
    if (has_peer)
        report_line_add_centered(&line, report_peer_heading(options->peer), W_MPI + W_RATIO);
    report_line_print(&line);
    report_line_add(&line, "#%*s%*s%*s%*s", W_SIZE - 1, "size", W_COUNT, "count", W_TYPE, "type", W_OP, "redop");
    for (int i = 0; i < 2; i++)
        report_line_add(&line, "%*s%*s%*s%*s", W_TIME, "time", W_BW, "algbw", W_BW, "busbw", W_WRONG, "#wrong");
    if (has_peer)
        report_line_add(&line, "%*s%*s", W_MPI, report_peer_column(options->peer), W_RATIO, "ratio");
    report_line_print(&line);
    report_line_add(&line, "#%*s%*s%*s%*s", W_SIZE - 1, "(B)", W_COUNT, "(elements)", W_TYPE, "", W_OP, "");
    for (int i = 0; i < 2; i++)
        report_line_add(&line, "%*s%*s%*s%*s", W_TIME, "(us)", W_BW, "(GB/s)", W_BW, "(GB/s)", W_WRONG, "");
    if (has_peer)
        report_line_add(&line, "%*s%*s", W_MPI, "(GB/s)", W_RATIO, "");
    report_line_print(&line);
    fflush(stdout);
}

/* A cell: one space, then the text right-aligned in the rest of the column,
 * so neighbours never run together even when a value outgrows its column
 * (in-place algbw on one rank, where the call has nothing to do). */
static void report_cell_text(const char *text, int width)
{
    printf(" %*s", width - 1, text);
}

static void report_cell_number(double value, int width)
{
    char text[64];
    snprintf(text, sizeof(text), "%.2f", value);
    if ((int)strlen(text) > width - 1)
        snprintf(text, sizeof(text), "%.2e", value);
    report_cell_text(text, width);
}

void bench_report_row(const bench_options_t *options, const bench_row_t *row)
{
    char text[32];
    snprintf(text, sizeof(text), "%zu", row->bytes);
    report_cell_text(text, W_SIZE);
    snprintf(text, sizeof(text), "%zu", row->count);
    report_cell_text(text, W_COUNT);
    report_cell_text(hora_dtype_name(row->dtype), W_TYPE);
    report_cell_text(hora_op_name(row->op), W_OP);

    const double times[2] = {row->oop_time_us, row->ip_time_us};
    const double algbws[2] = {row->oop_algbw, row->ip_algbw};
    const double busbws[2] = {row->oop_busbw, row->ip_busbw};
    const long long wrongs[2] = {row->oop_wrong, row->ip_wrong};
    for (int i = 0; i < 2; i++) {
        report_cell_number(times[i], W_TIME);
        report_cell_number(algbws[i], W_BW);
        report_cell_number(busbws[i], W_BW);
        if (wrongs[i] < 0)
            snprintf(text, sizeof(text), "N/A");
        else
            snprintf(text, sizeof(text), "%lld", wrongs[i]);
        report_cell_text(text, W_WRONG);
    }
    if (options->peer != BENCH_PEER_NONE) {
        if (row->has_peer)
            report_cell_number(row->peer_bw, W_MPI);
        else
            report_cell_text("n/a", W_MPI);
        if (isnan(row->ratio))
            report_cell_text("n/a", W_RATIO);
        else
            report_cell_number(row->ratio, W_RATIO);
    }
    printf("\n");
    fflush(stdout);
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
    if (options->check)
        printf("# Wrong results        : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
    printf("#\n");
    fflush(stdout);
    return wrong != 0 || out_of_bounds != 0;
}

static void report_json_number(FILE *out, const char *key, double value, int present)
{
    if (present && isfinite(value))
        fprintf(out, ", \"%s\": %.6g", key, value);
    else
        fprintf(out, ", \"%s\": null", key);
}

static void report_json_string(FILE *out, const char *text)
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

/* One object per row; in-place values appear twice, once under the plain
 * names (time_us, algbw, busbw) that other hora benchmarks also use. */
int bench_report_json(FILE *out, const bench_options_t *options, const bench_row_t *rows, size_t row_count,
                      int nranks)
{
    fprintf(out, "[\n");
    for (size_t i = 0; i < row_count; i++) {
        const bench_row_t *r = &rows[i];
        fprintf(out, "  {\"bytes\": %zu, \"count\": %zu, \"type\": ", r->bytes, r->count);
        report_json_string(out, hora_dtype_name(r->dtype));
        fprintf(out, ", \"op\": ");
        report_json_string(out, hora_op_name(r->op));
        fprintf(out, ", \"ranks\": %d, \"transport\": ", nranks);
        report_json_string(out, hora_transport_name());
        report_json_number(out, "oop_time_us", r->oop_time_us, 1);
        report_json_number(out, "oop_algbw", r->oop_algbw, 1);
        report_json_number(out, "oop_busbw", r->oop_busbw, 1);
        report_json_number(out, "ip_time_us", r->ip_time_us, 1);
        report_json_number(out, "ip_algbw", r->ip_algbw, 1);
        report_json_number(out, "ip_busbw", r->ip_busbw, 1);
        report_json_number(out, "time_us", r->ip_time_us, 1);
        report_json_number(out, "algbw", r->ip_algbw, 1);
        report_json_number(out, "busbw", r->ip_busbw, 1);
        if (r->oop_wrong < 0)
            fprintf(out, ", \"wrong\": null");
        else
            fprintf(out, ", \"wrong\": %lld", r->oop_wrong + r->ip_wrong);
        report_json_number(out, "mpi_busbw", r->peer_bw, r->has_peer && options->peer == BENCH_PEER_MPI);
        report_json_number(out, "ratio", r->ratio, !isnan(r->ratio));
        report_json_number(out, "peer_time_us", r->peer_time_us, r->has_peer);
        /* Device memory: where the buffers were and what the peer was. */
        if (options->memory == BENCH_MEMORY_CUDA) {
            fprintf(out, ", \"memory\": \"cuda\", \"peer\": ");
            report_json_string(out, bench_peer_name(options->peer));
            report_json_number(out, "peer_bw", r->peer_bw, r->has_peer);
        }
        fprintf(out, "}%s\n", i + 1 < row_count ? "," : "");
    }
    fprintf(out, "]\n");
    return ferror(out) ? -1 : 0;
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
        for (int kind = 0; kind < kinds; kind++)
            top = values[kind] > top ? values[kind] : top;
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
void bench_report_plot(const bench_options_t *options, const bench_row_t *rows, size_t row_count,
                       const size_t *sizes, size_t size_count, int nranks)
{
    if (!bench_program_on_path("gnuplot")) {
        fprintf(stderr, BENCH_NAME ": warning: --plot: gnuplot is not on PATH; %s was not written "
                        "(install gnuplot, or plot the --json output)\n",
                options->plot_path);
        return;
    }
    FILE *gp = popen("gnuplot", "w");
    if (gp == NULL) {
        fprintf(stderr, BENCH_NAME ": warning: --plot: cannot start gnuplot; %s was not written\n",
                options->plot_path);
        return;
    }

    /* Rows come grouped by (type, op), types outer, one row per size. */
    size_t groups = size_count ? row_count / size_count : 0;
    int multi = groups > 1;
    /* Panels: types down and ops across when both vary, else a near-square
     * grid (7 types of one op: 3 x 3, not 7 x 1). */
    int columns = options->op_count, lines = options->dtype_count;
    if (multi && (columns == 1 || lines == 1)) {
        columns = 1;
        while ((size_t)(columns * columns) < groups)
            columns++;
        lines = ((int)groups + columns - 1) / columns;
    }
    int width = multi ? 40 + 400 * columns : 1000;
    int height = multi ? 60 + 320 * lines : 650;
    bench_gnuplot_begin(gp, options->plot_path, width, height, multi ? 9 : 12);
    fprintf(gp, "set logscale x 2\nset grid\nset xrange [%zu:%zu]\n",
            sizes[0] > 1 ? sizes[0] - sizes[0] / 4 : 1, sizes[size_count - 1] + sizes[size_count - 1] / 4);
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
    int status = pclose(gp);
    if (status != 0)
        fprintf(stderr, BENCH_NAME ": warning: --plot: gnuplot failed (status %d); %s may be missing\n", status,
                options->plot_path);
    else
        printf("# Plot written to %s\n", options->plot_path);
}
