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
 * --memory cuda puts send and recv in device memory (hora_mem_alloc_device):
 * the inputs are written on the host as above and copied to the device, and
 * the results copied back and checked on the host; each timed window ends
 * with cudaDeviceSynchronize. The peer there is ncclAllReduce on the same
 * buffers where NCCL can run, else a device-to-device copy of the same bytes
 * (bench_cuda_setup.c says why, bench/README.md what the ratio can reach).
 *
 * This file measures and checks; bench_allreduce_options.c parses the
 * flags, bench_report.c prints the table and writes --json and --plot;
 * bench_cuda*.c hold the CUDA and NCCL side. bench/ uses the public API only (hora.h) plus MPI for the baseline,
 * barriers and the reductions of timings and error counts.
 *
 * Build: meson (bench/meson.build) -> build/bench/hora-bench-allreduce.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "bench_allreduce.h"
#include "bench_check.h"
#include "bench_common.h"
#include "bench_cuda.h"
#include "hora.h"

/* Bytes after the output of each checked call that must keep the poison
 * byte: a runtime writing past count elements shows up in the footer's
 * "Out of bounds values". Buffers are allocated this much larger. */
#define BENCH_GUARD_BYTES 256
/* Mismatch details printed per rank; the counts are always complete. */
#define BENCH_MAX_MISMATCH_REPORTS 16

/* The buffers the collectives run on, and their host images: patterns are
 * written into and checked in host memory. With host memory the images are
 * the buffers themselves and uploads and downloads do nothing. */
typedef struct {
    bench_memory_t memory;
    unsigned char *send;      /* (max_bytes + BENCH_GUARD_BYTES) hora_mem_alloc or hora_mem_alloc_device */
    unsigned char *recv;      /* (max_bytes + BENCH_GUARD_BYTES) likewise */
    unsigned char *host_send; /* (max_bytes + BENCH_GUARD_BYTES) send, or its malloc'd image */
    unsigned char *host_recv; /* (max_bytes + BENCH_GUARD_BYTES) recv, or its malloc'd image */
} bench_buffers_t;

static int bench_mismatch_reports;

/* ------------------------------------------------------------------------ */
/* Timing and checking                                                       */
/* ------------------------------------------------------------------------ */

/* A failed collective ends the run: hora_abort tells the other ranks (their
 * calls fail with this rank's reason instead of waiting), and exiting
 * non-zero lets mpirun end the job. */
static void bench_fail_and_abort(hora_status_t status, const char *message, const char *hint)
{
    fprintf(stderr, "%s\n  (%s)\n", message, hint);
    hora_abort(status, message);
    exit(1);
}

static void bench_allreduce_or_abort(const void *send, void *recv, size_t count, hora_dtype_t dtype, hora_op_t op)
{
    hora_status_t status = hora_allreduce(send, recv, count, dtype, op);
    if (status == HORA_OK) return;
    char message[1024];
    snprintf(message, sizeof(message), BENCH_NAME ": rank %d: hora_allreduce(%s, %s, count %zu, %s) failed: %s: %s",
             hora_rank(), hora_dtype_name(dtype), hora_op_name(op), count, send == recv ? "in place" : "out of place",
             hora_status_string(status), hora_last_error());
    bench_fail_and_abort(status, message, "rerun with HORA_LOG_LEVEL=debug for the runtime's account");
}

/* A failed CUDA or NCCL call (result != 0) ends the run the same way. */
static void bench_cuda_or_abort(int result)
{
    if (result == 0) return;
    char message[1024];
    snprintf(message, sizeof(message), BENCH_NAME ": rank %d: %s", hora_rank(), status_message());
    bench_fail_and_abort(HORA_ERR_INTERNAL, message,
                         "a CUDA or NCCL call of the benchmark itself; CUDA_LAUNCH_BLOCKING=1 or NCCL_DEBUG=INFO "
                         "tell more");
}

/* Host image -> buffer (device memory) and back; nothing to do with host
 * memory, where image and buffer are one. */
static void bench_buffers_upload(const bench_buffers_t *buffers, void *buffer, const void *image, size_t bytes)
{
    if (buffers->memory == BENCH_MEMORY_CUDA) bench_cuda_or_abort(bench_cuda_copy(buffer, image, bytes));
}

static void bench_buffers_download(const bench_buffers_t *buffers, void *image, const void *buffer, size_t bytes)
{
    if (buffers->memory == BENCH_MEMORY_CUDA) bench_cuda_or_abort(bench_cuda_copy(image, buffer, bytes));
}

/* bytes of a buffer set to byte, finished on return. */
static void bench_buffers_fill(const bench_buffers_t *buffers, void *buffer, int byte, size_t bytes)
{
    if (buffers->memory == BENCH_MEMORY_CUDA)
        bench_cuda_or_abort(bench_cuda_fill(buffer, byte, bytes));
    else
        memset(buffer, byte, bytes);
}

/* Device memory: everything queued on this rank's GPU has run. The direct
 * collectives return complete, but a peer's calls are only enqueued. */
static void bench_buffers_synchronize(const bench_buffers_t *buffers)
{
    if (buffers->memory == BENCH_MEMORY_CUDA) bench_cuda_or_abort(bench_cuda_synchronize());
}

/* What bench_time_us times. */
typedef enum {
    BENCH_CALL_HORA,
    BENCH_CALL_MPI,  /* MPI_Allreduce(MPI_IN_PLACE, recv, ...) */
    BENCH_CALL_NCCL, /* ncclAllReduce(recv, recv, ...) */
    BENCH_CALL_COPY, /* cudaMemcpyAsync(recv, send, bytes, device to device) */
} bench_call_t;

static void bench_call(bench_call_t call, const void *send, void *recv, size_t count, hora_dtype_t dtype, hora_op_t op)
{
    switch (call) {
    case BENCH_CALL_HORA: bench_allreduce_or_abort(send, recv, count, dtype, op); break;
    case BENCH_CALL_MPI:
        MPI_Allreduce(MPI_IN_PLACE, recv, (int)count, bench_mpi_datatype(dtype), bench_mpi_op(op), MPI_COMM_WORLD);
        break;
    case BENCH_CALL_NCCL: bench_cuda_or_abort(bench_nccl_allreduce(recv, recv, count, dtype, op)); break;
    case BENCH_CALL_COPY: bench_cuda_or_abort(bench_cuda_copy_async(recv, send, count * hora_dtype_size(dtype))); break;
    }
}

/* Microseconds per call of iters calls after warmup_iters untimed ones:
 * each rank's average, the maximum over ranks (the slowest rank is the
 * collective's time). With device memory the device is synchronised before
 * the barrier that starts the clock and before the clock stops. The copy
 * runs in options->gpu_turns turns, the ranks of one GPU one after the
 * other (a copy involves one rank, so it measures the GPU alone); every
 * other call is one turn, all ranks at once. */
static double bench_time_us(const bench_options_t *options, const bench_buffers_t *buffers, bench_call_t call,
                            const void *send, void *recv, size_t count, hora_dtype_t dtype, hora_op_t op)
{
    int turns = call == BENCH_CALL_COPY ? options->gpu_turns : 1;
    int my_turn = call == BENCH_CALL_COPY ? options->gpu_turn : 0;
    double local_us = 0.0;
    for (int turn = 0; turn < turns; turn++) {
        int active = turn == my_turn;
        for (int i = 0; active && i < options->warmup_iters; i++) bench_call(call, send, recv, count, dtype, op);
        if (active) bench_buffers_synchronize(buffers);
        MPI_Barrier(MPI_COMM_WORLD);
        if (!active) continue;
        double start = MPI_Wtime();
        for (int i = 0; i < options->iters; i++) bench_call(call, send, recv, count, dtype, op);
        bench_buffers_synchronize(buffers);
        local_us = (MPI_Wtime() - start) * 1e6 / options->iters;
    }
    double max_us = 0.0;
    MPI_Allreduce(&local_us, &max_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max_us;
}

static size_t bench_guard_damage(const unsigned char *guard)
{
    size_t damaged = 0;
    for (size_t i = 0; i < BENCH_GUARD_BYTES; i++) damaged += guard[i] != BENCH_POISON_BYTE;
    return damaged;
}

static void bench_mismatch_report(const bench_pattern_t *pattern, const void *buf, size_t count, const char *what,
                                  size_t wrong, size_t first)
{
    if (wrong == 0 || bench_mismatch_reports++ >= BENCH_MAX_MISMATCH_REPORTS) return;
    char got[32], want[32];
    bench_pattern_format(pattern, buf, first, got, sizeof(got));
    bench_pattern_format_expected(pattern, first, want, sizeof(want));
    fprintf(stderr, BENCH_NAME ": rank %d: %s %s count %zu %s: %zu wrong, first at element %zu: %s, expected %s\n",
            hora_rank(), hora_dtype_name(pattern->dtype), hora_op_name(pattern->op), count, what, wrong, first, got,
            want);
}

/* One checked call with fresh inputs: out of place (the inputs in send,
 * recv and its guard poisoned) or in place (recv holds the inputs and
 * receives the result; its guard poisoned). Returns the wrong elements;
 * adds damage outside the output (guard bytes, changed send elements) to
 * *out_of_bounds. With device memory the inputs go up before the call and
 * output, guard and send come back after it. */
static size_t bench_check_call(const bench_pattern_t *pattern, bench_buffers_t *buffers, size_t count, int in_place,
                               size_t *out_of_bounds)
{
    size_t bytes = count * pattern->elem_bytes;
    size_t first = 0, poisoned_from = in_place ? bytes : 0;
    unsigned char *in = in_place ? buffers->recv : buffers->send;
    unsigned char *host_in = in_place ? buffers->host_recv : buffers->host_send;
    bench_pattern_fill(pattern, host_in, count);
    bench_buffers_upload(buffers, in, host_in, bytes);
    bench_buffers_fill(buffers, buffers->recv + poisoned_from, BENCH_POISON_BYTE,
                       bytes + BENCH_GUARD_BYTES - poisoned_from);
    bench_allreduce_or_abort(in, buffers->recv, count, pattern->dtype, pattern->op);
    bench_buffers_synchronize(buffers);
    bench_buffers_download(buffers, buffers->host_recv, buffers->recv, bytes + BENCH_GUARD_BYTES);

    size_t wrong = bench_pattern_count_wrong(pattern, buffers->host_recv, count, &first);
    bench_mismatch_report(pattern, buffers->host_recv, count, in_place ? "in place" : "out of place", wrong, first);
    if (!in_place) {
        bench_buffers_download(buffers, buffers->host_send, buffers->send, bytes);
        size_t changed = bench_pattern_count_changed(pattern, buffers->host_send, count, &first);
        if (changed != 0 && bench_mismatch_reports++ < BENCH_MAX_MISMATCH_REPORTS)
            fprintf(stderr, BENCH_NAME ": rank %d: out-of-place call changed %zu elements of its send buffer\n",
                    hora_rank(), changed);
        *out_of_bounds += changed;
    }
    *out_of_bounds += bench_guard_damage(buffers->host_recv + bytes);
    return wrong;
}

/* Once before the table, as nccl-tests does: touch every page of both
 * buffers and let hora and the peer set up whatever they set up lazily
 * (connections, staging memory, NCCL's channels), so the first row does
 * not pay for it. */
static void bench_warm_up(const bench_options_t *options, bench_buffers_t *buffers)
{
    size_t bytes = options->max_bytes + BENCH_GUARD_BYTES;
    bench_buffers_fill(buffers, buffers->send, 0, bytes);
    bench_buffers_fill(buffers, buffers->recv, 0, bytes);
    int calls = options->warmup_iters > 0 ? options->warmup_iters : 1;
    for (int i = 0; i < calls; i++) {
        bench_allreduce_or_abort(buffers->send, buffers->recv, options->max_bytes, HORA_DTYPE_U8, HORA_OP_SUM);
        bench_allreduce_or_abort(buffers->recv, buffers->recv, options->max_bytes, HORA_DTYPE_U8, HORA_OP_SUM);
        if (options->peer == BENCH_PEER_MPI && options->max_bytes <= INT_MAX)
            MPI_Allreduce(MPI_IN_PLACE, buffers->recv, (int)options->max_bytes, MPI_UINT8_T, MPI_SUM, MPI_COMM_WORLD);
        else if (options->peer == BENCH_PEER_NCCL)
            bench_call(BENCH_CALL_NCCL, NULL, buffers->recv, options->max_bytes, HORA_DTYPE_U8, HORA_OP_SUM);
        else if (options->peer == BENCH_PEER_COPY)
            bench_call(BENCH_CALL_COPY, buffers->send, buffers->recv, options->max_bytes, HORA_DTYPE_U8, HORA_OP_SUM);
    }
    bench_buffers_synchronize(buffers);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void bench_row_run(const bench_options_t *options, const bench_pattern_t *pattern, bench_buffers_t *buffers,
                          size_t count, bench_row_t *row)
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
    bench_pattern_fill(pattern, buffers->host_send, count);
    bench_pattern_fill(pattern, buffers->host_recv, count);
    bench_buffers_upload(buffers, buffers->send, buffers->host_send, bytes);
    bench_buffers_upload(buffers, buffers->recv, buffers->host_recv, bytes);

    row->oop_time_us = bench_time_us(options, buffers, BENCH_CALL_HORA, buffers->send, buffers->recv, count, dtype, op);
    if (options->check) wrong[0] = bench_check_call(pattern, buffers, count, 0, &out_of_bounds);

    row->ip_time_us = bench_time_us(options, buffers, BENCH_CALL_HORA, buffers->recv, buffers->recv, count, dtype, op);
    if (options->check) wrong[1] = bench_check_call(pattern, buffers, count, 1, &out_of_bounds);

    /* The peer runs last: its in-place calls leave recv to the next row's
     * fresh inputs. The copy moves the same bytes send -> recv. */
    bench_call_t peer_call = BENCH_CALL_HORA;
    switch (options->peer) {
    case BENCH_PEER_MPI:
        if (bench_mpi_datatype(dtype) != MPI_DATATYPE_NULL && count <= INT_MAX) peer_call = BENCH_CALL_MPI;
        break;
    case BENCH_PEER_NCCL: peer_call = BENCH_CALL_NCCL; break;
    case BENCH_PEER_COPY: peer_call = BENCH_CALL_COPY; break;
    case BENCH_PEER_NONE:
    case BENCH_PEER_AUTO: break;
    }
    if (peer_call != BENCH_CALL_HORA) {
        row->has_peer = 1;
        row->peer_time_us = bench_time_us(options, buffers, peer_call, buffers->send, buffers->recv, count, dtype, op);
    }

    /* Bandwidths in GB/s: bytes / (us * 1e-6) / 1e9 = bytes / us / 1e3. */
    row->oop_algbw = row->oop_time_us > 0 ? (double)bytes / row->oop_time_us / 1e3 : 0.0;
    row->oop_busbw = row->oop_algbw * bus_factor;
    row->ip_algbw = row->ip_time_us > 0 ? (double)bytes / row->ip_time_us / 1e3 : 0.0;
    row->ip_busbw = row->ip_algbw * bus_factor;
    if (row->has_peer) {
        /* A copy has no bus factor: its bandwidth is bytes / time. */
        double peer_factor = peer_call == BENCH_CALL_COPY ? 1.0 : bus_factor;
        row->peer_bw = row->peer_time_us > 0 ? (double)bytes / row->peer_time_us / 1e3 * peer_factor : 0.0;
        /* The time ratio equals the busbw ratio for n > 1 and stays defined
         * for one rank, where every busbw is 0; against the copy it is hora's
         * in-place algbw over the copy's bandwidth. */
        if (row->ip_time_us > 0 && row->peer_time_us > 0) row->ratio = row->peer_time_us / row->ip_time_us;
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

/* send and recv of max_bytes + the guard: from hora_mem_alloc, or from
 * hora_mem_alloc_device with malloc'd host images. Returns 0, or -1 after
 * saying what failed and which setting to change. */
static int bench_buffers_alloc(const bench_options_t *options, bench_buffers_t *buffers, int rank)
{
    size_t buffer_bytes = options->max_bytes + BENCH_GUARD_BYTES;
    int device = options->memory == BENCH_MEMORY_CUDA;
    hora_status_t (*alloc)(size_t, void **) = device ? hora_mem_alloc_device : hora_mem_alloc;
    hora_status_t status = alloc(buffer_bytes, (void **)&buffers->send);
    if (status == HORA_OK) status = alloc(buffer_bytes, (void **)&buffers->recv);
    if (status != HORA_OK) {
        if (device)
            fprintf(stderr,
                    BENCH_NAME ": rank %d: hora_mem_alloc_device(%zu) for the send and recv buffers failed: %s: %s\n"
                               "  (lower -e/--maxbytes, or raise HORA_CUDA_POOL_BYTES=%s%s)\n",
                    rank, buffer_bytes, hora_status_string(status), hora_last_error(), options->cuda_pool_bytes,
                    options->cuda_pool_from_user ? ", which you set" : ", which the benchmark set to fit them");
        else
            fprintf(stderr,
                    BENCH_NAME ": rank %d: hora_mem_alloc(%zu) for the send and recv buffers failed: %s: %s\n"
                               "  (lower -e/--maxbytes or raise HORA_SHM_POOL_BYTES; see --print-config)\n",
                    rank, buffer_bytes, hora_status_string(status), hora_last_error());
        return -1;
    }
    if (!device) {
        buffers->host_send = buffers->send;
        buffers->host_recv = buffers->recv;
        return 0;
    }
    buffers->host_send = malloc(buffer_bytes);
    buffers->host_recv = malloc(buffer_bytes);
    if (buffers->host_send == NULL || buffers->host_recv == NULL) {
        fprintf(stderr,
                BENCH_NAME ": rank %d: out of memory for the host images (2 x %zu bytes) of the device "
                           "buffers (lower -e/--maxbytes)\n",
                rank, buffer_bytes);
        return -1;
    }
    return 0;
}

static void bench_buffers_free(bench_buffers_t *buffers)
{
    if (buffers->memory == BENCH_MEMORY_CUDA) {
        free(buffers->host_recv);
        free(buffers->host_send);
    }
    if (buffers->recv != NULL) hora_mem_free(buffers->recv);
    if (buffers->send != NULL) hora_mem_free(buffers->send);
    *buffers = (bench_buffers_t){.memory = buffers->memory};
}

int main(int argc, char **argv)
{
    bench_options_t options;
    bench_cli_result_t parsed = bench_options_parse(argc, argv, &options);
    if (parsed != BENCH_CLI_RUN) return parsed;
    if (options.memory == BENCH_MEMORY_CUDA && !bench_cuda_built()) {
        if (bench_launcher_rank() == 0)
            fprintf(stderr, BENCH_NAME ": --memory cuda: this build has no CUDA (meson found no nvcc, or "
                                       "-Dcuda=disabled); rebuild with the CUDA toolkit to measure device memory\n");
        return 1;
    }
    if (bench_transport_select(options.transport) != 0) {
        perror(BENCH_NAME ": --transport: setenv");
        return 2;
    }
    /* The device pool's size and this rank's GPU are read at hora_init. A
     * failure is told after it, once the ranks can agree to stop. */
    char cuda_why[BENCH_WHY_BYTES] = "";
    int cuda_prepared =
        options.memory != BENCH_MEMORY_CUDA || bench_cuda_prepare(&options, cuda_why, sizeof(cuda_why)) == 0;

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
    bench_json_t json = {.out = NULL};
    int json_ok = 1;
    if (rank == 0 && options.json_path != NULL) json_ok = bench_json_open(&json, BENCH_NAME, options.json_path, 1) == 0;
    MPI_Bcast(&json_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!json_ok) {
        hora_shutdown();
        return 2;
    }

    /* Device memory: every rank's GPU, and the peer (NCCL or the copy). */
    int setup_ok = 1;
    if (options.memory == BENCH_MEMORY_CUDA &&
        bench_cuda_setup(&options, cuda_prepared, cuda_why, sizeof(cuda_why)) != 0) {
        if (rank == 0) fprintf(stderr, BENCH_NAME ": --memory cuda: %s\n", cuda_why);
        setup_ok = 0;
    }

    size_t sizes_capacity = 1;
    for (size_t s = options.min_bytes; s <= options.max_bytes / options.step_factor; s *= options.step_factor)
        sizes_capacity++;
    size_t *sizes = malloc(sizes_capacity * sizeof(*sizes));
    size_t size_count = 0;
    size_t row_capacity = sizes_capacity * (size_t)options.dtype_count * (size_t)options.op_count;
    bench_row_t *rows = calloc(row_capacity, sizeof(*rows));
    bench_buffers_t buffers = {.memory = options.memory};
    int alloc_ok = setup_ok && sizes != NULL && rows != NULL;
    if (alloc_ok) {
        for (size_t s = options.min_bytes;; s *= options.step_factor) {
            sizes[size_count++] = s;
            if (s > options.max_bytes / options.step_factor) break;
        }
        alloc_ok = bench_buffers_alloc(&options, &buffers, rank) == 0;
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
            if (options.dtypes[d] == HORA_DTYPE_BOOL && options.ops[o] == HORA_OP_AVG)
                continue; /* refused by hora.h (no average of truth values) */
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
                if (rank == 0) bench_report_row(&options, row);
            }
            bench_pattern_free(&pattern);
        }
    }

    if (rank == 0) {
        exit_code = bench_report_footer(&options, rows, row_count);
        if (json.out != NULL) {
            bench_report_json(&json, &options, rows, row_count, nranks);
            if (bench_json_close(&json, BENCH_NAME, options.json_path) != 0)
                exit_code = 1;
            else
                printf("# JSON written to %s\n", options.json_path);
        }
        if (options.plot_path != NULL) bench_report_plot(&options, rows, row_count, sizes, size_count, nranks);
    }
    /* Every rank exits with the same status. */
    MPI_Bcast(&exit_code, 1, MPI_INT, 0, MPI_COMM_WORLD);

out_free:
    if (json.out != NULL) /* only when the run did not start */
        fclose(json.out);
    bench_buffers_free(&buffers);
    if (options.memory == BENCH_MEMORY_CUDA) {
        bench_nccl_free();
        bench_cuda_release();
    }
    free(rows);
    free(sizes);
    hora_shutdown(); /* MPI stays up; hora finalizes it at exit when it started it */
    return exit_code;
}
