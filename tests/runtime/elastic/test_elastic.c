/* test_elastic.c - libhora's two bootstraps and elastic worlds (hora.h
 * "Bootstraps and elastic worlds"), with real processes; elastic.py runs it
 * under hora-run and mpirun.
 *
 *   test_elastic world mpi|store   exact collectives (direct, negotiated,
 *                                  broadcast) on the world the bootstrap
 *                                  gave; what each bootstrap refuses. The
 *                                  worker ELASTIC_ABSENT_RANK never calls
 *                                  hora_init
 *   test_elastic steps N [VICTIM K] N steps of exact all-reduces under
 *                                  hora-run --elastic; rank VICTIM of the
 *                                  first generation SIGKILLs itself at step
 *                                  K; the survivors re-form and finish. At
 *                                  every step boundary hora_elastic_check:
 *                                  hosts that arrive are taken in, and get
 *                                  the step from the lowest rank by a
 *                                  broadcast. Each re-form prints
 *                                  "world A -> B at step k (reason)".
 *                                  ELASTIC_STEP_MS pauses every step.
 *
 * Inputs derive from (step, rank, index), so every sum is known exactly. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hora.h"

static int failures;

#define CHECK(cond, ...)                                                               \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "rank %d: FAIL %s:%d: ", hora_rank(), __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                              \
            fprintf(stderr, "\n");                                                     \
            failures++;                                                                \
        }                                                                              \
    } while (0)

/* Wall-clock seconds: the victim and the survivors compare them (one
 * machine, or network namespaces of one machine). */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Element i of rank r at step s, and the sum over n ranks: small integers,
 * exact in f32. */
static float input(int64_t s, int r, size_t i) { return (float)((s % 50 + 1) * (r + 1) + (int)(i % 7)); }
static float sum(int64_t s, int n, size_t i) { return (float)((s % 50 + 1) * n * (n + 1) / 2 + n * (int)(i % 7)); }

/* One direct and one negotiated all-reduce of step s; HORA_OK or the first
 * failure (the caller tells a lost peer from a wrong result). */
static hora_status_t step_collectives(int64_t s, size_t count, float *a, float *b)
{
    const int r = hora_rank(), n = hora_size();
    for (size_t i = 0; i < count; i++) a[i] = input(s, r, i), b[i] = input(s + 1, r, i);
    hora_status_t st = hora_allreduce(a, a, count, HORA_DTYPE_F32, HORA_OP_SUM);
    if (st != HORA_OK) return st;
    hora_request_t req;
    char name[64];
    snprintf(name, sizeof(name), "step.%" PRId64, s % 4);
    st = hora_allreduce_async(name, b, b, count, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req);
    if (st != HORA_OK) return st;
    st = hora_wait(req);
    hora_request_free(req);
    if (st != HORA_OK) return st;
    size_t bad = count;
    for (size_t i = 0; i < count && bad == count; i++)
        if (a[i] != sum(s, n, i) || b[i] != sum(s + 1, n, i)) bad = i;
    CHECK(bad == count, "step %" PRId64 ": element %zu is %g / %g, expected %g / %g (size %d)", s, bad, a[bad], b[bad],
          sum(s, n, bad), sum(s + 1, n, bad), n);
    return HORA_OK;
}

static int mode_world(const char *want)
{
    /* ELASTIC_ABSENT_RANK: that worker never comes (the others' bootstrap
     * must end within the join timeout, naming it). */
    const char *absent = getenv("ELASTIC_ABSENT_RANK"), *me = getenv("HORA_RANK");
    if (absent && me && !strcmp(absent, me)) {
        sleep(30);
        return 0;
    }
    hora_status_t st = hora_init();
    if (st != HORA_OK) {
        fprintf(stderr, "hora_init: %s\n", hora_last_error());
        return 1;
    }
    const int r = hora_rank(), n = hora_size();
    CHECK(!strcmp(hora_bootstrap(), want), "bootstrap %s, expected %s", hora_bootstrap(), want);
    const int store = !strcmp(want, "store");
    if (store) {
        const char *g = getenv("HORA_GENERATION"), *er = getenv("HORA_RANK"), *es = getenv("HORA_SIZE");
        CHECK(g && hora_generation() == atoi(g), "generation %d, HORA_GENERATION %s", hora_generation(), g ? g : "-");
        CHECK(er && es && r == atoi(er) && n == atoi(es), "rank %d of %d, hora-run said %s of %s", r, n, er ? er : "-",
              es ? es : "-");
        int set;
        const int ranks[1] = {0};
        CHECK(hora_process_set_create(ranks, 1, &set) == HORA_ERR_UNSUPPORTED, "a process set was not refused");
        hora_request_t req;
        size_t splits[64];
        float x[64] = {0};
        for (int i = 0; i < n && i < 64; i++) splits[i] = 1;
        CHECK(n > 64 ||
                  hora_alltoall_async("a2a", x, (size_t)n, HORA_DTYPE_F32, splits, NULL, &req) == HORA_ERR_UNSUPPORTED,
              "alltoall was not refused");
    } else {
        CHECK(hora_generation() == 0 && !hora_elastic(), "generation %d elastic %d under mpi", hora_generation(),
              hora_elastic());
        CHECK(hora_elastic_reform() == HORA_ERR_UNSUPPORTED, "hora_elastic_reform under mpi: %s", hora_last_error());
    }
    int waiting = -1;
    CHECK(hora_elastic_check(&waiting) == HORA_OK && waiting == 0, "hora_elastic_check: %d (%s)", waiting,
          hora_last_error());

    /* Every size class: the latency path, one-shot or ring, and the cross-
     * host rings when hora-run put the ranks on two hosts. */
    const size_t counts[] = {1, 333, 4096, 300000};
    float *a = malloc(sizeof(float) * 300000), *b = malloc(sizeof(float) * 300000);
    for (int c = 0; c < 4; c++)
        for (int64_t s = 0; s < 3; s++) {
            st = step_collectives(s + 7 * c, counts[c], a, b);
            CHECK(st == HORA_OK, "count %zu: %s", counts[c], hora_last_error());
        }
    for (int root = 0; root < n; root++) {
        int64_t v[5] = {r, r, r, r, r};
        st = hora_broadcast(v, 5, HORA_DTYPE_I64, root);
        CHECK(st == HORA_OK && v[0] == root && v[4] == root, "broadcast from %d: %" PRId64 " (%s)", root, v[0],
              hora_last_error());
    }
    free(a);
    free(b);
    printf("rank %d of %d: bootstrap %s, generation %d, host %d of %d, transport %s\n", r, n, hora_bootstrap(),
           hora_generation(), hora_node_rank(), hora_node_count(), hora_transport_name());
    st = hora_shutdown();
    CHECK(st == HORA_OK, "hora_shutdown: %s", hora_last_error());
    return failures ? 1 : 0;
}

/* The state a newcomer receives: the next step. */
static hora_status_t sync_step(int64_t *step)
{
    int64_t have = *step >= 0 ? hora_rank() : INT32_MAX, root = have;
    hora_status_t st = hora_allreduce(&have, &root, 1, HORA_DTYPE_I64, HORA_OP_MIN);
    if (st != HORA_OK) return st;
    return hora_broadcast(step, 1, HORA_DTYPE_I64, (int)root);
}

static int mode_steps(int64_t steps, int victim, int64_t kill_at)
{
    const size_t count = 20000;
    float *a = malloc(sizeof(float) * count), *b = malloc(sizeof(float) * count);
    int64_t step = getenv("HORA_GENERATION") && atoi(getenv("HORA_GENERATION")) > 0 ? -1 : 0; /* newcomer: none */
    int first_gen = 1, n_before = 0, reforms = 0;
    char reason[600] = "started";
    double lost_at = 0;
    /* ELASTIC_STEP_MS: a pause per step, so that a kill or a newcomer from
     * outside lands mid-run. */
    const long step_ms = getenv("ELASTIC_STEP_MS") ? atol(getenv("ELASTIC_STEP_MS")) : 0;
    for (;;) {
        hora_status_t st = hora_init();
        if (st != HORA_OK) {
            fprintf(stderr, "hora_init: %s\n", hora_last_error());
            return 1;
        }
        const int n = hora_size(), r = hora_rank();
        if (sync_step(&step) != HORA_OK) {
            snprintf(reason, sizeof(reason), "%s", hora_last_error());
            hora_shutdown();
            continue;
        }
        if (!first_gen) {
            if (r == 0) printf("world %d -> %d at step %" PRId64 " (%s)%s\n", n_before, n, step, reason, "");
            if (lost_at > 0)
                printf("rank %d: resumed at %.6f, %.3f s after it saw the loss\n", r, now_s(), now_s() - lost_at);
            fflush(stdout);
            reforms++;
        }
        first_gen = 0;
        n_before = n;
        lost_at = 0;
        for (; step < steps; step++) {
            if (victim >= 0 && hora_generation() == 0 && r == victim && step == kill_at) {
                printf("rank %d: SIGKILL at step %" PRId64 " at %.6f\n", r, step, now_s());
                fflush(stdout);
                raise(SIGKILL);
            }
            if (step_ms > 0) {
                struct timespec pause = {step_ms / 1000, (step_ms % 1000) * 1000000L};
                nanosleep(&pause, NULL);
            }
            if (r == 0 && step % 100 == 0) printf("rank 0: step %" PRId64 "\n", step);
            st = step_collectives(step, count, a, b);
            if (st == HORA_OK) {
                int waiting = 0;
                st = hora_elastic_check(&waiting);
                if (st == HORA_OK && waiting) {
                    snprintf(reason, sizeof(reason), "hosts joined");
                    step++;
                    if (hora_elastic_reform() != HORA_OK) {
                        fprintf(stderr, "rank %d: hora_elastic_reform: %s\n", r, hora_last_error());
                        return 1;
                    }
                    break;
                }
            }
            if (st != HORA_OK) {
                if (st != HORA_ERR_PEER_LOST) {
                    fprintf(stderr, "rank %d: step %" PRId64 ": %s (%s)\n", r, step, hora_last_error(),
                            hora_status_string(st));
                    return 1;
                }
                lost_at = now_s();
                snprintf(reason, sizeof(reason), "%s", hora_last_error());
                hora_shutdown(); /* the step is redone on the new world */
                break;
            }
        }
        if (step >= steps && hora_initialized()) break;
    }
    printf("rank %d of %d: %" PRId64 " steps done, generation %d, %d re-forms, %d failures\n", hora_rank(), hora_size(),
           step, hora_generation(), reforms, failures);
    fflush(stdout);
    hora_status_t st = hora_shutdown();
    CHECK(st == HORA_OK, "hora_shutdown: %s", hora_last_error());
    free(a);
    free(b);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && !strcmp(argv[1], "world")) return mode_world(argv[2]);
    if ((argc == 3 || argc == 5) && !strcmp(argv[1], "steps"))
        return mode_steps(atoll(argv[2]), argc == 5 ? atoi(argv[3]) : -1, argc == 5 ? atoll(argv[4]) : -1);
    fprintf(stderr, "usage: test_elastic world mpi|store | steps N [VICTIM STEP]\n");
    return 2;
}
