/* gpu_common.c - the helpers of test_gpu_coll (gpu_coll.h says what each
 * does): failure counting, CUDA checks, device buffers, exact inputs and
 * expected results, comparison, the counts every collective runs with. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu_coll.h"
#include "exact.h"
#include "rand.h"

int gc_rank = -1, gc_size = 0, gc_device = -1;
MPI_Comm gc_comm = MPI_COMM_NULL;
int gc_failures, gc_checks;

const char *const gc_buf_kind_name[GC_BUF_KIND_COUNT] = {"hora_mem_alloc_device", "cudaMalloc"};

void gc_fail(const char *fmt, ...)
{
    char line[1200];
    va_list ap;
    gc_failures++;
    if (gc_failures > GC_MAX_REPORTS) return;
    int n = snprintf(line, sizeof(line), "rank %d FAIL: ", gc_rank);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    /* One write per line: the ranks share the terminal. */
    fprintf(stderr, "%s\n%s", line,
            gc_failures == GC_MAX_REPORTS ? "(further failures of this rank are counted, not shown)\n" : "");
}

void gc_fatal(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "rank %d FAIL: %s (giving up)\n", gc_rank, msg);
    fflush(stderr);
    if (hora_initialized()) hora_abort(HORA_ERR_INTERNAL, msg);
    exit(1);
}

void gc_cuda_check(cudaError_t e, const char *call, const char *file, int line)
{
    if (e != cudaSuccess) gc_fatal("%s:%d: %s: %s (%s)", file, line, call, cudaGetErrorString(e), cudaGetErrorName(e));
}

void *gc_xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) gc_fatal("out of host memory (%zu bytes)", bytes);
    return p;
}

/* ---------------------------------------------------------- device buffers */

void gc_dbuf_alloc(struct gc_dbuf *b, enum gc_buf_kind kind, size_t bytes, size_t offset)
{
    const size_t total = bytes + GC_GUARD_BYTES + offset;
    b->kind = kind;
    b->base = NULL;
    if (kind == GC_BUF_POOL) {
        hora_status_t st = hora_mem_alloc_device(total, &b->base);
        if (st != HORA_OK)
            gc_fatal("hora_mem_alloc_device(%zu): %s: %s", total, hora_status_string(st), hora_last_error());
        if ((uintptr_t)b->base % HORA_ALIGN_BYTES)
            gc_fail("hora_mem_alloc_device(%zu) = %p: not %d-byte aligned", total, b->base, HORA_ALIGN_BYTES);
    } else {
        GC_CUDA(cudaMalloc(&b->base, total));
    }
    b->ptr = (char *)b->base + offset;
}

void gc_dbuf_free(struct gc_dbuf *b)
{
    if (!b->base) return;
    if (b->kind == GC_BUF_POOL) {
        hora_status_t st = hora_mem_free(b->base);
        GC_CHECK(st == HORA_OK, "hora_mem_free(%p) of device memory: %s: %s", b->base, hora_status_string(st),
                 hora_last_error());
    } else {
        GC_CUDA(cudaFree(b->base));
    }
    b->base = b->ptr = NULL;
}

/* ------------------------------------------------- values and comparisons */

int64_t gc_input_value(hora_dtype_t dtype, hora_op_t op, int r, size_t i, unsigned salt)
{
    uint64_t h = (uint64_t)(i % GC_PERIOD) * 2654435761u + (uint64_t)r * 40503u + (uint64_t)salt * 0x9E3779B1u;
    h ^= h >> 13;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    return exact_value(dtype, op, r, h);
}

void gc_fill_input(void *buf, size_t offset, size_t count, hora_dtype_t dtype, hora_op_t op, int r, unsigned salt)
{
    for (size_t j = 0; j < count && j < GC_PERIOD; j++)
        exact_store_int(buf, j, dtype, gc_input_value(dtype, op, r, offset + j, salt));
    exact_tile(buf, count, hora_dtype_size(dtype), GC_PERIOD);
}

void gc_fill_expected(void *want, size_t offset, size_t count, hora_dtype_t dtype, hora_op_t op, unsigned salt)
{
    for (size_t j = 0; j < count && j < GC_PERIOD; j++) {
        const size_t i = offset + j;
        int64_t acc = gc_input_value(dtype, op, 0, i, salt);
        for (int r = 1; r < gc_size; r++)
            acc = (int64_t)exact_reduce(op, (double)acc, (double)gc_input_value(dtype, op, r, i, salt));
        if (op != HORA_OP_AVG) {
            exact_store_int(want, j, dtype, exact_truth(dtype, acc)); /* bool: 0 or 1 */
            continue;
        }
        switch (dtype) {
        case HORA_DTYPE_F32:
        case HORA_DTYPE_F16:
        case HORA_DTYPE_BF16: exact_store(want, j, dtype, (double)((float)acc / (float)gc_size)); break;
        case HORA_DTYPE_F64: exact_store(want, j, dtype, (double)acc / (double)gc_size); break;
        default: exact_store_int(want, j, dtype, acc / gc_size); break; /* C truncation, as hora.h says */
        }
    }
    exact_tile(want, count, hora_dtype_size(dtype), GC_PERIOD);
}

size_t gc_compare(const char *what, const void *got, const void *want, size_t count, hora_dtype_t dtype)
{
    const size_t es = hora_dtype_size(dtype);
    size_t wrong = 0, first = 0;
    gc_checks++;
    if (!memcmp(got, want, count * es)) return 0;
    for (size_t i = 0; i < count; i++)
        if (memcmp((const char *)got + i * es, (const char *)want + i * es, es)) {
            if (!wrong) first = i;
            wrong++;
        }
    uint64_t g = 0, w = 0;
    memcpy(&g, (const char *)got + first * es, es);
    memcpy(&w, (const char *)want + first * es, es);
    gc_fail("%s: %zu of %zu elements wrong, the first at %zu: 0x%llx, expected 0x%llx%s", what, wrong, count, first,
            (unsigned long long)g, (unsigned long long)w,
            g == (es == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * es)) - 1) ? " (the poison: never written)" : "");
    return wrong;
}

void gc_check_guard(const char *what, const void *guard)
{
    const unsigned char *g = guard;
    size_t bad = 0;
    for (size_t i = 0; i < GC_GUARD_BYTES; i++) bad += g[i] != 0xff;
    GC_CHECK(bad == 0, "%s: %zu of the %d guard bytes after the buffer were written", what, bad, GC_GUARD_BYTES);
}

/* HORA_FUSION_THRESHOLD in bytes ("1M", "64K", "0"; unset: hora's 128M). */
static double gc_fusion_threshold(void)
{
    const char *s = getenv("HORA_FUSION_THRESHOLD");
    if (!s || !*s) return 128.0 * 1024 * 1024;
    char *end = NULL;
    double v = strtod(s, &end);
    switch (end && *end ? *end : ' ') {
    case 'k':
    case 'K': v *= 1024; break;
    case 'm':
    case 'M': v *= 1024.0 * 1024; break;
    case 'g':
    case 'G': v *= 1024.0 * 1024 * 1024; break;
    default: break;
    }
    return v;
}

size_t gc_big_count(hora_dtype_t dtype)
{
    const double five_mib = 5.0 * 1024 * 1024, threshold = gc_fusion_threshold();
    /* Over a large threshold (hora's default) the buffers would crowd the
     * device pool: 5 MiB then, which the meson tests' 1M threshold exceeds. */
    double bytes = threshold <= 16.0 * 1024 * 1024 && threshold + 65536 > five_mib ? threshold + 65536 : five_mib;
    return ((size_t)bytes / hora_dtype_size(dtype)) | 1;
}

int gc_counts(hora_dtype_t dtype, size_t counts[8])
{
    int n = 0;
    counts[n++] = 0;
    counts[n++] = 1;
    if (gc_size - 1 > 1) counts[n++] = (size_t)gc_size - 1;
    counts[n++] = (size_t)gc_size + 1;
    counts[n++] = 1001;
    counts[n++] = 65537;
    counts[n++] = gc_big_count(dtype);
    return n;
}

unsigned gc_next_salt(void)
{
    static unsigned salt;
    return ++salt;
}

char gc_phase_text[256] = "starting";
unsigned gc_watchdog_s;

void gc_phase(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(gc_phase_text, sizeof(gc_phase_text), fmt, ap);
    va_end(ap);
    if (gc_watchdog_s) alarm(gc_watchdog_s);
}

void gc_shuffle(int *a, int n, uint64_t seed)
{
    test_rng_t rng = test_rng_seeded(seed);
    for (int i = n - 1; i > 0; i--) {
        int j = (int)test_rng_below(&rng, (uint32_t)i + 1), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}
