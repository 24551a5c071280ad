/* async_timeline.c - mode timeline: HORA_TIMELINE is valid JSON mid-run and
 * after shutdown, has the expected phases, and tools/hora-timeline reads it. */
#define _GNU_SOURCE /* strcasestr */
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
            if (!ok[t]) continue;
            snprintf(what, sizeof(what), "timeline iteration %d tl.%d", it, t);
            if (wait_ok(req[t], what)) {
                size_t wrong = 0;
                for (size_t i = 0; i < counts[t]; i++)
                    wrong += ((float *)buf[t])[i] != (float)stress_expected(t, i, it, HORA_OP_SUM, HORA_DTYPE_F32);
                CHECK(wrong == 0, "%s: %zu of %zu elements wrong", what, wrong, counts[t]);
            }
            hora_request_free(req[t]);
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
