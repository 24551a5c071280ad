/* async_timeline.c - mode timeline: HORA_TIMELINE is valid JSON mid-run and
 * after shutdown, has the expected phases, and tools/hora-timeline reads it.
 * Mode timeline_dynamic: hora_timeline_start/stop/mark_cycles (HORA_TIMELINE's
 * file stopped, refusals, a
 * start with requests in flight, nothing written after a stop, starting
 * over without a stop, the same file again, cycle marks, a process set's
 * file, another thread flipping it while requests run, hora_shutdown
 * closing it); each stopped file is checked by check_timeline.py. */
#define _GNU_SOURCE /* strcasestr */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "async_common.h"
#include "buf.h"
#include "file.h"

#ifndef HORA_SOURCE_DIR
#define HORA_SOURCE_DIR "."
#endif

static int run_ok(const char *cmd)
{
    int rc = system(cmd);
    return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

static void timeline_check_json(const char *path, const char *when)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "python3 -m json.tool '%s' > /dev/null", path);
    CHECK(run_ok(cmd), "timeline %s: '%s' is not valid JSON (python3 -m json.tool failed)", when, path);
}

/* Wait for the sum of stress_input(t, i, it, rank) over the ranks into buf,
 * check it exactly and free req. */
static void timeline_finish(hora_request_t req, const float *buf, size_t count, int t, int it, const char *what)
{
    if (wait_ok(req, what)) {
        size_t wrong = 0;
        for (size_t i = 0; i < count; i++)
            wrong += buf[i] != (float)stress_expected(t, i, it, HORA_OP_SUM, HORA_DTYPE_F32);
        CHECK(wrong == 0, "%s: %zu of %zu elements wrong", what, wrong, count);
    }
    hora_request_free(req);
}

void mode_timeline(void)
{
    enum { N = 6 };
    static const size_t counts[N] = {100, 257, 1000, 500, 700, 200000};
    const char *path = getenv("HORA_TIMELINE");
    int iterations = quick ? 150 : 300;
    void *buf[N], *arena;

    CHECK(path && path[0], "timeline: HORA_TIMELINE is not set");
    if (!path || !path[0]) return;
    if (!runtime_start("timeline")) return;
    /* Small malloc'd tensors are fused by copying; two arena neighbours may
     * be fused in place. */
    arena = test_buf_alloc(1, (counts[3] + counts[4]) * sizeof(float));
    for (int t = 0; t < N; t++)
        buf[t] = t == 3 ? arena : t == 4 ? (char *)arena + counts[3] * sizeof(float) : test_buf_alloc(0, counts[t] * 4);

    for (int it = 0; it < iterations; it++) {
        hora_request_t req[N];
        int ok[N];
        for (int t = 0; t < N; t++) {
            char name[16];
            snprintf(name, sizeof(name), "tl.%d", t);
            for (size_t i = 0; i < counts[t]; i++) ((float *)buf[t])[i] = (float)stress_input(t, i, it, rank);
            hora_status_t st =
                hora_allreduce_async(name, buf[t], buf[t], counts[t], HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req[t]);
            CHECK(st == HORA_OK, "timeline iteration %d %s: enqueue returned %s", it, name, hora_status_string(st));
            ok[t] = st == HORA_OK;
        }
        if (rank == 0 && it == iterations / 2) timeline_check_json(path, "mid-run, requests in flight");
        for (int t = 0; t < N; t++) {
            char what[64];
            snprintf(what, sizeof(what), "timeline iteration %d tl.%d", it, t);
            if (ok[t]) timeline_finish(req[t], buf[t], counts[t], t, it, what);
        }
    }
    for (int t = 0; t < N; t++)
        if (t != 3 && t != 4) free(buf[t]);
    hora_mem_free(arena);
    runtime_stop("timeline");

    if (rank != 0) return;
    timeline_check_json(path, "after hora_shutdown");
    char *text = test_read_file(path, NULL);
    CHECK(text != NULL, "timeline: cannot read '%s'", path);
    if (!text) return;
    CHECK(strstr(text, "NEGOTIATE") != NULL, "timeline: no NEGOTIATE event");
    CHECK(strstr(text, "ALLREDUCE") || strstr(text, "REDUCE_SCATTER"), "timeline: no ALLREDUCE / REDUCE_SCATTER event");
    CHECK(strstr(text, "MEMCPY_IN_FUSION") || strcasestr(text, "zero_copy") || strcasestr(text, "zerocopy") ||
              strcasestr(text, "zero-copy"),
          "timeline: no MEMCPY_IN_FUSION or zero-copy event");
    free(text);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "'%s/tools/hora-timeline' '%s' > /dev/null", HORA_SOURCE_DIR, path);
    CHECK(run_ok(cmd), "timeline: %s failed", cmd);
}

/* ------------------------------------------------ mode timeline_dynamic */

/* tests/runtime/async/check_timeline.py on path with its arguments (rank 0). */
static void dynamic_check(const char *path, const char *args, const char *when)
{
    char cmd[1600];
    snprintf(cmd, sizeof(cmd), "python3 '%s/tests/runtime/async/check_timeline.py' '%s' %s", HORA_SOURCE_DIR, path,
             args);
    CHECK(run_ok(cmd), "timeline_dynamic %s: %s failed", when, cmd);
}

/* count allreduces named "<prefix>.<t>" on every rank, checked exactly;
 * hook (may be NULL) runs while they are in flight. */
static void dynamic_allreduces(const char *prefix, int count, int salt, void (*hook)(void *), void *arg)
{
    enum { N = 257 };
    float buf[4][N];
    hora_request_t req[4];
    int ok[4];
    for (int t = 0; t < count; t++) {
        char name[64];
        snprintf(name, sizeof(name), "%s.%d", prefix, t);
        for (size_t i = 0; i < N; i++) buf[t][i] = (float)stress_input(t, i, salt, rank);
        hora_status_t st = hora_allreduce_async(name, buf[t], buf[t], N, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req[t]);
        CHECK(st == HORA_OK, "timeline_dynamic %s: enqueue returned %s", name, hora_status_string(st));
        ok[t] = st == HORA_OK;
    }
    if (hook) hook(arg);
    for (int t = 0; t < count; t++) {
        char what[96];
        snprintf(what, sizeof(what), "timeline_dynamic %s.%d", prefix, t);
        if (ok[t]) timeline_finish(req[t], buf[t], N, t, salt, what);
    }
}

static void dynamic_start(const char *path, const char *when)
{
    hora_status_t st = hora_timeline_start(path);
    CHECK(st == HORA_OK, "timeline_dynamic %s: hora_timeline_start(%s): %s: %s", when, path, hora_status_string(st),
          hora_last_error());
}

static void dynamic_stop(const char *when)
{
    hora_status_t st = hora_timeline_stop();
    CHECK(st == HORA_OK, "timeline_dynamic %s: hora_timeline_stop: %s: %s", when, hora_status_string(st),
          hora_last_error());
}

static void dynamic_start_hook(void *path) { dynamic_start(path, "start with requests in flight"); }

/* Another thread starts and stops the timeline over and over while the
 * main thread's requests run (TSan sees both sides). */
struct dynamic_flipper {
    const char *path;
    atomic_int stop;
    int flips;
};

static void *dynamic_flip(void *arg)
{
    struct dynamic_flipper *f = arg;
    while (!atomic_load(&f->stop)) {
        dynamic_start(f->path, "flipping thread");
        dynamic_stop("flipping thread");
        f->flips++;
    }
    return NULL;
}

static size_t file_bytes(const char *path)
{
    size_t len = 0;
    char *text = test_read_file(path, &len);
    free(text);
    return text ? len : (size_t)-1;
}

void mode_timeline_dynamic(void)
{
    const char *prefix = getenv("TEST_TIMELINE_PREFIX");
    char a[600], b[600], c[600], d[600], e[600], missing[700], set_file[700];
    hora_status_t st;

    CHECK(prefix && prefix[0], "timeline_dynamic: TEST_TIMELINE_PREFIX is not set");
    if (!prefix || !prefix[0]) return;
    snprintf(a, sizeof(a), "%s.a.json", prefix);
    snprintf(b, sizeof(b), "%s.b.json", prefix);
    snprintf(c, sizeof(c), "%s.c.json", prefix);
    snprintf(d, sizeof(d), "%s.d.json", prefix);
    snprintf(e, sizeof(e), "%s.e.json", prefix);
    snprintf(missing, sizeof(missing), "%s.no-such-dir/t.json", prefix);
    st = hora_timeline_start(a);
    CHECK(st == HORA_ERR_NOT_INITIALIZED, "timeline_dynamic: start before hora_init returned %s",
          hora_status_string(st));
    if (!runtime_start("timeline_dynamic")) return;

    /* HORA_TIMELINE's file, started at init, is complete after a stop. */
    const char *at_init = getenv("HORA_TIMELINE");
    CHECK(at_init && at_init[0], "timeline_dynamic: HORA_TIMELINE is not set");
    dynamic_allreduces("dyn.init", 2, 0, NULL, NULL);
    dynamic_stop("HORA_TIMELINE's");
    dynamic_allreduces("dyn.before", 2, 1, NULL, NULL);
    barrier();
    if (rank == 0 && at_init && at_init[0])
        dynamic_check(at_init, "+dyn.init.0:ALLREDUCE +dyn.init.1:ALLREDUCE -dyn.before.0", "HORA_TIMELINE's file");

    /* Refusals, and a stop with nothing running. */
    st = hora_timeline_stop();
    CHECK(st == HORA_OK, "timeline_dynamic: stop with no timeline returned %s", hora_status_string(st));
    st = hora_timeline_start(NULL);
    CHECK(st == HORA_ERR_INVALID_ARG && strstr(hora_last_error(), "no path"),
          "timeline_dynamic: start(NULL) returned %s (%s)", hora_status_string(st), hora_last_error());
    st = hora_timeline_start("");
    CHECK(st == HORA_ERR_INVALID_ARG, "timeline_dynamic: start(\"\") returned %s", hora_status_string(st));
    char longpath[700];
    memset(longpath, 'x', sizeof(longpath) - 1);
    longpath[sizeof(longpath) - 1] = '\0';
    st = hora_timeline_start(longpath);
    CHECK(st == HORA_ERR_INVALID_ARG && strstr(hora_last_error(), "longer"),
          "timeline_dynamic: a 699-byte path returned %s (%s)", hora_status_string(st), hora_last_error());
    /* Only rank 0 writes, so only rank 0 finds out the directory is missing. */
    st = hora_timeline_start(missing);
    if (rank == 0)
        CHECK(st == HORA_ERR_SYSTEM && strstr(hora_last_error(), missing) && strstr(hora_last_error(), "No such file"),
              "timeline_dynamic: start in a missing directory returned %s (%s)", hora_status_string(st),
              hora_last_error());
    else
        CHECK(st == HORA_OK, "timeline_dynamic: rank %d: start in a missing directory returned %s", rank,
              hora_status_string(st));
    dynamic_stop("after the refusals");

    /* a: started while requests are in flight, stopped, then no more writes. */
    dynamic_allreduces("dyn.a", 3, 2, dynamic_start_hook, a);
    dynamic_allreduces("dyn.a2", 2, 3, NULL, NULL);
    dynamic_stop("a");
    barrier();
    size_t a_bytes = rank == 0 ? file_bytes(a) : 0;
    dynamic_allreduces("dyn.after", 2, 4, NULL, NULL);
    barrier();
    if (rank == 0) {
        dynamic_check(a,
                      "+dyn.a2.0:ALLREDUCE +dyn.a2.1:ALLREDUCE +dyn.a2.0:NEGOTIATE -dyn.before.0 -dyn.after.0 "
                      "'!CYCLE_START'",
                      "a");
        CHECK(file_bytes(a) == a_bytes, "timeline_dynamic: %s changed after hora_timeline_stop (%zu -> %zu bytes)", a,
              a_bytes, file_bytes(a));
    }

    /* b then c without a stop between: b is complete, c takes over. */
    dynamic_start(b, "b");
    dynamic_allreduces("dyn.b", 2, 5, NULL, NULL);
    dynamic_start(c, "c over b");
    dynamic_allreduces("dyn.c", 2, 6, NULL, NULL);
    dynamic_stop("c");
    barrier();
    if (rank == 0) {
        dynamic_check(b, "+dyn.b.0:ALLREDUCE +dyn.b.1:ALLREDUCE -dyn.c.0", "b (started over)");
        dynamic_check(c, "+dyn.c.0:ALLREDUCE +dyn.c.1:ALLREDUCE -dyn.b.0", "c");
    }

    /* a again (truncated), with the cycles marked, on a process set too. */
    int ranks[2] = {0, 1}, set = -1;
    st = hora_process_set_create(ranks, 2, &set);
    CHECK(st == HORA_OK, "timeline_dynamic: hora_process_set_create: %s: %s", hora_status_string(st),
          hora_last_error());
    snprintf(set_file, sizeof(set_file), "%s.set%d", a, set);
    st = hora_timeline_mark_cycles(1);
    CHECK(st == HORA_OK, "timeline_dynamic: hora_timeline_mark_cycles(1): %s", hora_status_string(st));
    dynamic_start(a, "a again");
    dynamic_allreduces("dyn.again", 2, 7, NULL, NULL);
    if (st == HORA_OK && set > 0 && rank < 2) {
        float v[3] = {(float)rank, 1.0f, 2.0f * (float)rank};
        hora_opts_t opts = HORA_OPTS_INIT;
        hora_request_t req;
        opts.process_set = set;
        st = hora_allreduce_async("dyn.set", v, v, 3, HORA_DTYPE_F32, HORA_OP_SUM, &opts, &req);
        CHECK(st == HORA_OK, "timeline_dynamic: set allreduce: %s", hora_status_string(st));
        if (st == HORA_OK && wait_ok(req, "timeline_dynamic set allreduce"))
            CHECK(v[0] == 1.0f && v[1] == 2.0f && v[2] == 2.0f, "timeline_dynamic: set allreduce gave %g %g %g",
                  (double)v[0], (double)v[1], (double)v[2]);
        if (st == HORA_OK) hora_request_free(req);
    }
    dynamic_stop("a again");
    hora_timeline_mark_cycles(0);
    barrier();
    if (rank == 0) {
        dynamic_check(a, "+dyn.again.0:ALLREDUCE -dyn.a.0 -dyn.set '~CYCLE_START'", "a again");
        dynamic_check(set_file, "+dyn.set:ALLREDUCE -dyn.again.0 '~CYCLE_START'", "a's process set file");
    }
    if (set > 0) hora_process_set_free(set);

    /* d: started and stopped by another thread, many times, while requests run. */
    struct dynamic_flipper flipper = {.path = d};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, dynamic_flip, &flipper) == 0, "timeline_dynamic: pthread_create failed");
    for (int it = 0; it < 40; it++) {
        char p[32];
        snprintf(p, sizeof(p), "dyn.flip%d", it % 4);
        dynamic_allreduces(p, 4, 100 + it, NULL, NULL);
    }
    atomic_store(&flipper.stop, 1);
    pthread_join(thread, NULL);
    CHECK(flipper.flips > 0, "timeline_dynamic: the flipping thread never started a timeline");
    barrier();
    if (rank == 0) dynamic_check(d, "", "d (flipped by another thread)");

    /* e: left running at hora_shutdown, which completes it. */
    dynamic_start(e, "e");
    dynamic_allreduces("dyn.e", 1, 200, NULL, NULL);
    runtime_stop("timeline_dynamic");
    st = hora_timeline_stop();
    CHECK(st == HORA_ERR_NOT_INITIALIZED, "timeline_dynamic: stop after hora_shutdown returned %s",
          hora_status_string(st));
    if (rank == 0) dynamic_check(e, "+dyn.e.0:ALLREDUCE", "e (closed by hora_shutdown)");
}
