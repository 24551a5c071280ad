/* async_stress.c - mode stress: 2 threads per rank, thousands of random
 * subsets of 32 tensors submitted in a different order on every rank, every
 * result checked exactly. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_common.h"
#include "buf.h"
#include "rand.h"

#define STRESS_TENSORS 32
#define STRESS_MAX_SUBSET 16
#define STRESS_THREADS 2

struct stress_tensor {
    char name[16];
    hora_dtype_t dtype; /* f32 or i32 */
    size_t base_count;
    int shared, inplace;
    void *send, *recv;
};

static struct stress_tensor stress_t[STRESS_TENSORS];
static int stress_iterations;
static pthread_barrier_t stress_barrier;

/* One iteration: which tensors (the same on every rank), each one's op and
 * count (varied now and then so cached responses go stale), and this rank's
 * submission order. */
struct stress_plan {
    int n;
    int ids[STRESS_MAX_SUBSET];
    hora_op_t op[STRESS_TENSORS];
    size_t count[STRESS_TENSORS];
};

static void stress_plan_make(int it, struct stress_plan *p)
{
    test_rng_t rng = test_rng_seeded(0x5EED0000ull + (uint64_t)it);
    int all[STRESS_TENSORS];
    for (int j = 0; j < STRESS_TENSORS; j++) {
        all[j] = j;
        uint32_t h = mix3((uint32_t)it, (uint32_t)j, 77);
        p->op[j] = h % 16 == 0 ? HORA_OP_MAX : h % 16 == 1 ? HORA_OP_MIN : h % 16 == 2 ? HORA_OP_AVG : HORA_OP_SUM;
        p->count[j] = stress_t[j].base_count - ((h >> 8) % 32 == 0 ? 1 : 0);
    }
    p->n = 1 + (int)test_rng_below(&rng, STRESS_MAX_SUBSET);
    shuffle(all, STRESS_TENSORS, test_rng_u64(&rng)); /* common seed: same subset everywhere */
    memcpy(p->ids, all, sizeof(int) * (size_t)p->n);
    shuffle(p->ids, p->n, test_rng_u64(&rng) * 31 + (uint64_t)rank + 1); /* this rank's order */
}

static void stress_check(int j, int it, const struct stress_plan *p)
{
    struct stress_tensor *t = &stress_t[j];
    size_t count = p->count[j], wrong = 0, first = 0;
    double got_first = 0, want_first = 0;
    for (size_t i = 0; i < count; i++) {
        double want = stress_expected(j, i, it, p->op[j], t->dtype);
        double got = t->dtype == HORA_DTYPE_F32 ? ((float *)t->recv)[i] : ((int32_t *)t->recv)[i];
        if (got != want && wrong++ == 0) {
            first = i;
            got_first = got;
            want_first = want;
        }
    }
    atomic_fetch_add(&checks, 1);
    if (wrong)
        fail("stress iteration %d %s (%s %s, count %zu, %s%s): %zu wrong, first element %zu = %g, expected %g", it,
             t->name, hora_dtype_name(t->dtype), hora_op_name(p->op[j]), count, t->shared ? "arena" : "malloc",
             t->inplace ? " in place" : "", wrong, first, got_first, want_first);
    if (!t->inplace) {
        size_t changed = 0;
        for (size_t i = 0; i < count; i++) {
            int x = stress_input(j, i, it, rank);
            double got = t->dtype == HORA_DTYPE_F32 ? ((float *)t->send)[i] : ((int32_t *)t->send)[i];
            changed += got != x;
        }
        CHECK(changed == 0, "stress iteration %d %s: %zu send elements changed by an out-of-place allreduce", it,
              t->name, changed);
    }
}

static void *stress_worker(void *arg)
{
    int tid = (int)(intptr_t)arg;
    struct stress_plan p;
    for (int it = 0; it < stress_iterations; it++) {
        hora_request_t req[STRESS_MAX_SUBSET];
        int ok[STRESS_MAX_SUBSET] = {0};
        stress_plan_make(it, &p);
        int half = (p.n + 1) / 2, lo = tid == 0 ? 0 : half, hi = tid == 0 ? half : p.n;
        for (int k = lo; k < hi; k++) {
            int j = p.ids[k];
            struct stress_tensor *t = &stress_t[j];
            for (size_t i = 0; i < p.count[j]; i++) {
                int x = stress_input(j, i, it, rank);
                if (t->dtype == HORA_DTYPE_F32)
                    ((float *)t->send)[i] = (float)x;
                else
                    ((int32_t *)t->send)[i] = x;
            }
            if (!t->inplace) memset(t->recv, 0xA5, p.count[j] * 4);
            hora_status_t st =
                hora_allreduce_async(t->name, t->send, t->recv, p.count[j], t->dtype, p.op[j], NULL, &req[k]);
            CHECK(st == HORA_OK, "stress iteration %d %s: enqueue returned %s: %s", it, t->name, hora_status_string(st),
                  hora_last_error());
            ok[k] = st == HORA_OK;
        }
        for (int k = lo; k < hi; k++) {
            char what[64];
            if (!ok[k]) continue;
            snprintf(what, sizeof(what), "stress iteration %d %s", it, stress_t[p.ids[k]].name);
            if (wait_ok(req[k], what)) stress_check(p.ids[k], it, &p);
            hora_request_free(req[k]);
        }
        pthread_barrier_wait(&stress_barrier); /* names and buffers are reused next iteration */
    }
    return NULL;
}

void mode_stress(void)
{
    void *arena = NULL;
    size_t arena_bytes = 0;

    if (!runtime_start("stress")) return;
    stress_iterations = iterations ? iterations : quick ? 300 : 2000;
    for (int j = 0; j < STRESS_TENSORS; j++) {
        struct stress_tensor *t = &stress_t[j];
        snprintf(t->name, sizeof(t->name), "t%02d", j);
        t->dtype = j % 3 == 2 ? HORA_DTYPE_I32 : HORA_DTYPE_F32;
        int large = j == 4 || j == 11 || j == 20 || j == 27;
        t->base_count = large ? 300000 + (size_t)j : 2 + mix3((uint32_t)j, 1, 2) % 4999;
        t->shared = j % 2 == 0;
        t->inplace = t->shared || j % 4 == 3;
        if (t->shared) arena_bytes += t->base_count * 4;
    }
    /* One arena, tensors back to back in backprop order (last layer first),
     * as the trainer lays out its gradients, so fusion can work in place. */
    arena = test_buf_alloc(1, arena_bytes);
    size_t at = 0;
    for (int j = STRESS_TENSORS - 1; j >= 0; j--) {
        struct stress_tensor *t = &stress_t[j];
        if (t->shared) {
            t->send = t->recv = (char *)arena + at;
            at += t->base_count * 4;
        } else {
            t->send = test_buf_alloc(0, t->base_count * 4);
            t->recv = t->inplace ? t->send : test_buf_alloc(0, t->base_count * 4);
        }
    }
    if (rank == 0)
        printf("test_async stress: %d ranks x %d threads, %d iterations, arena %zu bytes\n", size, STRESS_THREADS,
               stress_iterations, arena_bytes);

    double t0 = test_now_s();
    pthread_t thread;
    pthread_barrier_init(&stress_barrier, NULL, STRESS_THREADS);
    pthread_create(&thread, NULL, stress_worker, (void *)(intptr_t)1);
    stress_worker((void *)(intptr_t)0);
    pthread_join(thread, NULL);
    pthread_barrier_destroy(&stress_barrier);
    if (rank == 0) printf("test_async stress: %.1f s\n", test_now_s() - t0);

    for (int j = 0; j < STRESS_TENSORS; j++) {
        struct stress_tensor *t = &stress_t[j];
        if (t->shared) continue;
        if (!t->inplace) free(t->recv);
        free(t->send);
    }
    hora_mem_free(arena);
    runtime_stop("stress");
}
