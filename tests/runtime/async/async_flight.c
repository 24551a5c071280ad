/* async_flight.c - modes flight_stall, flight_usr1 and straggler: the flight
 * recorder is written on every rank when one rank stops submitting and the
 * others give up, and tools/hora-frtrace names that rank and the first
 * collective the ranks disagree on; SIGUSR1 writes it while the job goes on;
 * rank 0 names the rank that is always late to submit (HORA_STRAGGLER_S).
 * HORA_FLIGHT_DIR comes from the meson test. */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "async_common.h"
#include "file.h"

#define FLIGHT_STEPS 10
#define FLIGHT_LATE_STEP 6

static const char *flight_dir(const char *what)
{
    const char *dir = getenv("HORA_FLIGHT_DIR");
    if (!dir || !*dir) fail("%s: HORA_FLIGHT_DIR is not set (the meson test sets it)", what);
    return dir && *dir ? dir : NULL;
}

/* Rank 0 removes the dumps of an earlier run before anyone starts. */
static void flight_clean(const char *dir)
{
    if (rank == 0 && dir) {
        DIR *d = opendir(dir);
        for (struct dirent *e; d && (e = readdir(d));) {
            if (strncmp(e->d_name, "flight.", 7)) continue;
            char path[1024];
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
        if (d) closedir(d);
    }
    barrier();
}

static char *flight_read(const char *dir, int r)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/flight.%d.txt", dir, r);
    return test_read_file(path, NULL);
}

/* The line of the entry named name in a dump, or NULL. */
static const char *flight_entry(const char *text, const char *name)
{
    char needle[128];
    snprintf(needle, sizeof(needle), " name %s\n", name);
    const char *p = strstr(text, needle);
    if (!p) return NULL;
    while (p > text && p[-1] != '\n') p--;
    return p;
}

static int flight_entry_state(const char *line, const char *state)
{
    char needle[64];
    snprintf(needle, sizeof(needle), " state %s ", state);
    const char *end = strchr(line, '\n');
    const char *p = strstr(line, needle);
    return p && (!end || p < end);
}

void mode_flight_stall(void)
{
    const char *dir = flight_dir("flight_stall");
    const int late = size - 1;
    float x[64], y[64];
    int stopped_at = -1;

    if (!dir) return;
    flight_clean(dir);
    if (!runtime_start("flight_stall")) return;
    for (int step = 0; step < FLIGHT_STEPS && stopped_at < 0; step++) {
        char name[64];
        snprintf(name, sizeof(name), "flight_step%d", step);
        for (int i = 0; i < 64; i++) x[i] = (float)(rank + i);
        /* The late rank stops between collectives, past the stall shutdown
         * (and HORA_TIMEOUT_S): the others give up without it. */
        if (rank == late && step == FLIGHT_LATE_STEP) test_sleep_s(4.5);
        hora_request_t req = REQ_SENTINEL;
        hora_status_t st = hora_allreduce_async(name, x, y, 64, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req);
        if (st == HORA_OK) {
            st = hora_wait(req);
            hora_request_free(req);
        }
        if (st != HORA_OK) stopped_at = step;
    }
    CHECK(stopped_at == FLIGHT_LATE_STEP, "flight_stall: the collectives stopped at step %d, expected %d", stopped_at,
          FLIGHT_LATE_STEP);
    barrier();

    /* Every rank's dump: the late rank never enqueued the late step and
     * finished the one before; the others did not finish it. */
    char *text = flight_read(dir, rank);
    CHECK(text != NULL, "flight_stall: no %s/flight.%d.txt", dir, rank);
    if (text) {
        char before[64], at[64];
        snprintf(before, sizeof(before), "flight_step%d", FLIGHT_LATE_STEP - 1);
        snprintf(at, sizeof(at), "flight_step%d", FLIGHT_LATE_STEP);
        const char *b = flight_entry(text, before), *a = flight_entry(text, at);
        CHECK(strncmp(text, "# hora flight recorder 1\n", 25) == 0, "flight_stall: bad header: %.60s", text);
        CHECK(b && flight_entry_state(b, "done"), "flight_stall: %s is not done in rank %d's dump", before, rank);
        if (rank == late)
            CHECK(a == NULL, "flight_stall: the late rank recorded %s, which it never submitted", at);
        else
            CHECK(a && !flight_entry_state(a, "done"), "flight_stall: %s is %s in rank %d's dump", at,
                  a ? "done" : "missing", rank);
        free(text);
    }
    barrier();

    if (rank == 0) {
        char cmd[2048], out[4096];
        snprintf(cmd, sizeof(cmd), "python3 %s/tools/hora-frtrace %s 2>&1", HORA_SOURCE_DIR, dir);
        FILE *p = popen(cmd, "r");
        size_t n = p ? fread(out, 1, sizeof(out) - 1, p) : 0;
        out[n] = '\0';
        int rc = p ? pclose(p) : -1;
        char behind[32], first[96];
        snprintf(behind, sizeof(behind), "behind: rank %d\n", late);
        snprintf(first, sizeof(first), "'flight_step%d'", FLIGHT_LATE_STEP);
        const char *dis = strstr(out, "first disagreement: ");
        CHECK(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "flight_stall: hora-frtrace exit %d", rc);
        CHECK(dis && strstr(dis, first) && strchr(dis, '\n') > strstr(dis, first),
              "flight_stall: hora-frtrace does not name %s first", first);
        CHECK(strstr(out, behind) != NULL, "flight_stall: hora-frtrace does not say '%.*s'", (int)strlen(behind) - 1,
              behind);
        if (atomic_load(&failures)) fprintf(stderr, "---- hora-frtrace %s ----\n%s---- end ----\n", dir, out);
    }
    hora_status_t st = hora_shutdown();
    CHECK(st == HORA_OK || st == HORA_ERR_SHUTDOWN, "flight_stall: hora_shutdown returned %s: %s",
          hora_status_string(st), hora_last_error());
}

void mode_flight_usr1(void)
{
    const char *dir = flight_dir("flight_usr1");
    const int target = size - 1;
    if (!dir) return;
    flight_clean(dir);
    int pid = (int)getpid(), target_pid = 0;
    MPI_Bcast(rank == target ? &pid : &target_pid, 1, MPI_INT, target, test_comm);
    if (rank == target) target_pid = pid;
    if (!runtime_start("flight_usr1")) return;
    for (int step = 0; step < 200; step++) {
        struct ar_case c;
        ar_case_init(&c, "flight_usr1", HORA_DTYPE_F32, HORA_OP_SUM, 256, 0, 0, (unsigned)step % 8);
        snprintf(c.name, sizeof(c.name), "flight_usr1_%d", step % 8);
        if (rank == 0 && step == 50)
            CHECK(kill(target_pid, SIGUSR1) == 0, "flight_usr1: kill(%d, SIGUSR1) failed", target_pid);
        ar_case_start(&c);
        ar_case_finish(&c, 0);
    }
    barrier();
    if (rank == target) {
        char *text = flight_read(dir, rank);
        CHECK(text != NULL, "flight_usr1: SIGUSR1 left no %s/flight.%d.txt", dir, rank);
        if (text) {
            CHECK(strstr(text, " reason SIGUSR1 ") != NULL, "flight_usr1: the dump does not say reason SIGUSR1");
            CHECK(strstr(text, " state done ") && strstr(text, " name flight_usr1_"),
                  "flight_usr1: the dump has no finished flight_usr1_ entry");
            free(text);
        }
    } else {
        char *text = flight_read(dir, rank);
        CHECK(text == NULL, "flight_usr1: rank %d, which got no signal, wrote a dump", rank);
        free(text);
    }
    runtime_stop("flight_usr1");
}

void mode_straggler(void)
{
    struct stderr_capture cap;
    const int late = size - 1;

    if (rank == 0 && !stderr_capture_begin(&cap, "straggler")) return;
    int reported = -1;
    double fraction = 0, lag_ms = 0;
    long long cycles = 0;
    if (!runtime_start("straggler")) goto out;
    const double t0 = test_now_s();
    for (int step = 0; test_now_s() - t0 < 2.6; step++) {
        float x[16], y[16];
        char name[32];
        snprintf(name, sizeof(name), "straggler_%d", step % 4);
        for (int i = 0; i < 16; i++) x[i] = (float)(rank * 16 + i);
        if (rank == late) test_sleep_s(0.004);
        hora_request_t req = REQ_SENTINEL;
        hora_status_t st = hora_allreduce_async(name, x, y, 16, HORA_DTYPE_F32, HORA_OP_SUM, NULL, &req);
        CHECK(st == HORA_OK, "straggler: enqueue %s: %s", name, hora_last_error());
        if (st != HORA_OK) break;
        if (!wait_ok(req, name)) break;
        for (int i = 0; i < 16; i++) {
            const float want = (float)(16 * size * (size - 1) / 2 + size * i);
            if (y[i] != want) {
                fail("straggler: %s[%d] = %g, expected %g", name, i, y[i], want);
                break;
            }
        }
        /* Stay in step: the late rank must be late at every step. */
        if (step % 64 == 63) barrier();
    }
    hora_status_t st = hora_straggler(&reported, &fraction, &lag_ms, &cycles);
    CHECK(st == HORA_OK, "straggler: hora_straggler returned %s", hora_status_string(st));
    runtime_stop("straggler");
out:
    if (rank == 0) {
        char *text = stderr_capture_end(&cap);
        char want[64];
        snprintf(want, sizeof(want), "stragglers: rank %d last in ", late);
        CHECK(text && strstr(text, want), "straggler: rank 0's log does not say '%s...'", want);
        CHECK(reported == late, "straggler: hora_straggler names rank %d (%.0f%% of %lld cycles), expected %d",
              reported, fraction * 100, cycles, late);
        CHECK(reported != late || lag_ms > 1.0, "straggler: median lag %.3g ms for a rank 4 ms late", lag_ms);
        if (text && strstr(text, want)) { /* the report, for the test log */
            const char *line = strstr(text, want);
            while (line > text && line[-1] != '\n') line--;
            printf("%.*s\n", (int)strcspn(line, "\n"), line);
        }
        if (!text || !strstr(text, want) || atomic_load(&failures))
            fprintf(stderr, "---- rank 0 stderr during the straggler test ----\n%s---- end ----\n", text ? text : "");
        free(text);
    } else {
        CHECK(reported == -1, "straggler: rank %d reports a straggler (only rank 0 does)", rank);
    }
}
