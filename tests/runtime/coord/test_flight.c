/*
 * test_flight.c - the flight recorder (runtime/coord/flight.c) without MPI:
 * the ring keeps the newest HORA_FLIGHT_RECORDER entries oldest first, an
 * update of an overwritten entry is dropped, names are counted per
 * occurrence, cut to the field and kept on one line; SIGUSR1 writes the file
 * and the process goes on; a SIGSEGV writes it and the process still dies of
 * SIGSEGV; and what one collective costs (enqueue, negotiated, running,
 * waited, end), which must stay under 1 us.
 * Run: test_flight   (exit 0 = all passed; prints ns per collective)
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h"
#include "coord/flight.h"
#include "file.h"

static int failures;
#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            failures++;                                          \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fputc('\n', stderr);                                 \
        }                                                        \
    } while (0)

static char dir[] = "/tmp/hora_test_flight_XXXXXX";

static struct hora_request request(const char *name, uint64_t count)
{
    struct hora_request r;
    memset(&r, 0, sizeof(r));
    r.name = (char *)name;
    r.meta.kind = COORD_KIND_ALLREDUCE;
    r.meta.dtype = HORA_DTYPE_F32;
    r.meta.op = HORA_OP_SUM;
    r.meta.count = count;
    return r;
}

static char *dump_text(int rank)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/flight.%d.txt", dir, rank);
    return test_read_file(path, NULL);
}

static int count_lines(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static void test_ring(struct config *cfg)
{
    cfg->flight_recorder = 4;
    snprintf(cfg->flight_dir, sizeof(cfg->flight_dir), "%s", dir);
    CHECK(flight_init(cfg, 1, 3) == HORA_OK, "flight_init: %s", hora_last_error());
    struct flight *f = flight_process();
    CHECK(f != NULL, "no recorder");
    char long_name[200];
    memset(long_name, 'x', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    const char *names[6] = {"a", "b", "a", "two\nlines", long_name, "a"};
    uint64_t seq[6];
    for (int i = 0; i < 6; i++) {
        struct hora_request r = request(names[i], 10 + (uint64_t)i);
        seq[i] = flight_enqueue(f, &r, 0, 1000 + i);
        CHECK(seq[i] == (uint64_t)i + 1, "seq %llu, expected %d", (unsigned long long)seq[i], i + 1);
    }
    flight_mark(f, seq[2], FLIGHT_STATE_NEGOTIATED);
    flight_mark(f, seq[2], FLIGHT_STATE_RUNNING);
    flight_waited(f, seq[2], "shm", 2);
    flight_end(f, seq[2], HORA_OK);
    flight_mark(f, seq[3], FLIGHT_STATE_RUNNING);
    flight_end(f, seq[3], HORA_ERR_TIMEOUT);
    flight_end(f, seq[1], HORA_OK); /* overwritten by seq 6: dropped */
    flight_dump(f, "test");
    char *text = dump_text(1);
    CHECK(text != NULL, "no dump");
    if (text) {
        CHECK(!strncmp(text, "# hora flight recorder 1\nrank 1 size 3 pid ", 43), "header: %.80s", text);
        CHECK(strstr(text, " reason test ") != NULL, "reason missing");
        CHECK(count_lines(text, "\nseq ") == 4, "%d entries, expected the newest 4", count_lines(text, "\nseq "));
        const char *s3 = strstr(text, "\nseq 3 "), *s4 = strstr(text, "\nseq 4 "), *s5 = strstr(text, "\nseq 5 "),
                   *s6 = strstr(text, "\nseq 6 ");
        CHECK(s3 && s4 && s5 && s6 && s3 < s4 && s4 < s5 && s5 < s6, "entries 3..6 not oldest first");
        CHECK(!strstr(text, "\nseq 2 ") && !strstr(text, "\nseq 1 "), "overwritten entries dumped");
        if (s3)
            CHECK(!strncmp(s3,
                           "\nseq 3 occ 2 set 0 state done kind allreduce op sum dtype f32 bytes 48 "
                           "memory host status 0 transport shm peer 2 enqueue_ns 1002000 ",
                           131),
                  "entry 3: %.140s", s3 + 1);
        if (s4)
            CHECK(strstr(s4, "state failed") && strstr(s4, " status -") && strstr(s4, "name two?lines\n"),
                  "entry 4: %.200s", s4 + 1);
        if (s6)
            CHECK(!strncmp(s6, "\nseq 6 occ 3 ", 13) && strstr(s6, " state queued ") && strstr(s6, " peer -1 ") &&
                      strstr(s6, " start_ns 0 end_ns 0 name a\n"),
                  "entry 6: %.200s", s6 + 1);
        if (s5) {
            const char *name = strstr(s5, " name ");
            CHECK(name && strcspn(name + 6, "\n") == FLIGHT_NAME_BYTES - 1, "long name not cut to %d bytes",
                  FLIGHT_NAME_BYTES - 1);
        }
        free(text);
    }

    /* SIGUSR1: written again, and we are still here. */
    flight_end(f, seq[5], HORA_OK);
    raise(SIGUSR1);
    text = dump_text(1);
    CHECK(text && strstr(text, " reason SIGUSR1 ") && strstr(text, "\nseq 6 occ 3 set 0 state done "),
          "SIGUSR1 did not write the recorder");
    free(text);
    flight_free();
    CHECK(flight_process() == NULL, "recorder left after flight_free");
}

/* A child that crashes: the recorder is written, and it still dies of it. */
static void test_fatal(struct config *cfg)
{
    pid_t pid = fork();
    if (pid == 0) {
        /* The recorder chains to the handler it found: the default here,
         * not AddressSanitizer's (which would report and exit 1). */
        signal(SIGSEGV, SIG_DFL);
        cfg->flight_recorder = 8;
        if (flight_init(cfg, 7, 8) != HORA_OK) _exit(2);
        struct hora_request r = request("before_the_crash", 1);
        flight_enqueue(flight_process(), &r, 0, 5);
        /* A real fault, on an unmapped page; not NULL, which UBSan's
         * null check would stop first. */
        volatile uintptr_t unmapped = 64;
        *(volatile int *)unmapped = 1;
        _exit(3);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "child did not die of SIGSEGV (status %#x)", st);
    char *text = dump_text(7);
    CHECK(text && strstr(text, " reason SIGSEGV ") && strstr(text, " name before_the_crash\n"), "no SIGSEGV dump");
    free(text);
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* What one collective costs: the hooks the coordinator runs for it. */
static void test_cost(struct config *cfg)
{
    cfg->flight_recorder = 2000;
    cfg->flight_dir[0] = '\0';
    CHECK(flight_init(cfg, 0, 2) == HORA_OK, "flight_init: %s", hora_last_error());
    struct flight *f = flight_process();
    char names[64][32];
    struct hora_request reqs[64];
    for (int i = 0; i < 64; i++) {
        snprintf(names[i], sizeof(names[i]), "model.layer%d.weight.grad", i);
        reqs[i] = request(names[i], 1000);
    }
    const int n = 200000;
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_ns();
        for (int i = 0; i < n; i++) {
            uint64_t s = flight_enqueue(f, &reqs[i % 64], 0, i);
            flight_mark(f, s, FLIGHT_STATE_NEGOTIATED);
            flight_mark(f, s, FLIGHT_STATE_RUNNING);
            flight_waited(f, s, "shm", 1);
            flight_end(f, s, HORA_OK);
        }
        double per = (now_ns() - t0) / n;
        if (per < best) best = per;
    }
    printf("flight recorder: %.0f ns per collective (enqueue, negotiated, running, waited, end; best of 5 x %d)\n",
           best, n);
    CHECK(best < 1000, "flight recorder costs %.0f ns per collective (limit 1 us)", best);
    flight_free();
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    struct config cfg;
    if (config_load(&cfg) != HORA_OK) {
        fprintf(stderr, "config_load: %s\n", hora_last_error());
        return 1;
    }
    test_ring(&cfg);
    test_fatal(&cfg);
    test_cost(&cfg);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    printf("test_flight: %s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
