/*
 * test_timeline.c - the Chrome-trace timeline: the file is a valid JSON array
 * with the right number of events after every event, names are escaped (and
 * bad UTF-8 replaced) so they read back exactly, max_bytes stops growth with
 * one warning and a valid file, an unwritable path fails with the path in the
 * message, two writer threads lose nothing, and tools/hora-timeline reads the
 * result (also a copy cut mid-event).
 *
 * Validity is checked after every event by a small strict JSON validator here
 * and, a handful of times, by Python's json module (python3 is in CI).
 * Build: meson (tests/runtime/coord/meson.build), or by hand:
 *   mpicc -std=gnu11 -Iruntime/include -Iruntime -Itests/common tests/runtime/coord/test_timeline.c
 *         runtime/coord/timeline.c runtime/base/log.c runtime/base/status.c runtime/base/status_hora.c
 *         -lpthread
 * Run: test_timeline   (exit 0 = all passed)
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hora.h"
#include "base/log.h"
#include "coord/timeline.h"

#ifndef HORA_SOURCE_DIR
#define HORA_SOURCE_DIR "."
#endif

#define TOOL HORA_SOURCE_DIR "/tools/hora-timeline"
#define PY_LOAD "python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding=\"utf-8\"))'"
#define THREAD_ITERS 2000

#include "check.h"
#include "file.h"

/* ---- a strict JSON validator (RFC 8259 syntax; UTF-8 is Python's job) ---- */

#define JSON_MAX_DEPTH 64

static const char *json_value(const char *p, int depth);

static const char *json_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

static const char *json_string(const char *p)
{
    if (*p++ != '"') return NULL;
    while (*p != '"') {
        if ((unsigned char)*p < 0x20) return NULL; /* also the end of the text */
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!isxdigit((unsigned char)p[i])) return NULL;
                p += 4;
            } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
                return NULL;
            }
        }
        p++;
    }
    return p + 1;
}

static const char *json_digits(const char *p)
{
    if (!isdigit((unsigned char)*p)) return NULL;
    while (isdigit((unsigned char)*p)) p++;
    return p;
}

static const char *json_number(const char *p)
{
    if (*p == '-') p++;
    if (*p == '0')
        p++;
    else if (!(p = json_digits(p)))
        return NULL;
    if (*p == '.' && !(p = json_digits(p + 1))) return NULL;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(p = json_digits(p))) return NULL;
    }
    return p;
}

/* Object or array: the members after the opening bracket. */
static const char *json_members(const char *p, char close, int depth)
{
    p = json_ws(p);
    if (*p == close) return p + 1;
    for (;;) {
        if (close == '}') {
            if (!(p = json_string(json_ws(p)))) return NULL;
            p = json_ws(p);
            if (*p++ != ':') return NULL;
        }
        if (!(p = json_value(p, depth + 1))) return NULL;
        p = json_ws(p);
        if (*p == close) return p + 1;
        if (*p++ != ',') return NULL;
    }
}

static const char *json_value(const char *p, int depth)
{
    if (depth > JSON_MAX_DEPTH) return NULL;
    p = json_ws(p);
    switch (*p) {
    case '{': return json_members(p + 1, '}', depth);
    case '[': return json_members(p + 1, ']', depth);
    case '"': return json_string(p);
    case 't': return strncmp(p, "true", 4) ? NULL : p + 4;
    case 'f': return strncmp(p, "false", 5) ? NULL : p + 5;
    case 'n': return strncmp(p, "null", 4) ? NULL : p + 4;
    default: return json_number(p);
    }
}

/* The number of events (objects) if the file is exactly one JSON array of
 * objects, else -1. */
static long count_events(const char *path)
{
    size_t len;
    char *text = test_read_file(path, &len);
    long count = 0;
    const char *p;

    if (!text) return -1;
    if (strlen(text) != len) goto bad; /* a NUL byte: a hole or garbage */
    p = json_ws(text);
    if (*p++ != '[') goto bad;
    p = json_ws(p);
    if (*p == ']') {
        p++;
    } else {
        for (;;) {
            p = json_ws(p);
            if (*p != '{' || !(p = json_value(p, 1))) goto bad;
            count++;
            p = json_ws(p);
            if (*p == ']') {
                p++;
                break;
            }
            if (*p++ != ',') goto bad;
        }
    }
    if (*json_ws(p)) goto bad;
    free(text);
    return count;
bad:
    free(text);
    return -1;
}

static int run_status(const char *cmd)
{
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int python_loads(const char *path)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), PY_LOAD " '%s'", path);
    return run_status(cmd) == 0;
}

static void temp_path(char *path, size_t size, const char *what)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, size, "%s/hora-%s-XXXXXX", dir && *dir ? dir : "/tmp", what);
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        exit(1);
    }
    close(fd);
}

static int file_contains(const char *path, const char *needle)
{
    char *text = test_read_file(path, NULL);
    int found = text && strstr(text, needle);
    free(text);
    return found;
}

/* ---- the tests ------------------------------------------------------------ */

/* Every event keeps the file a valid array with one more event (two for the
 * first event on a tensor: its row's name comes first). */
static void test_every_event(const char *path)
{
    struct timeline *tl = NULL;
    long expect = 0;
    int64_t last = -1;

    CHECK(timeline_open(&tl, path, 0) == HORA_OK && tl, "open %s: %s", path, hora_last_error());
    if (!tl) return;
    log_set_level(LOG_LEVEL_ERROR); /* the malformed args below warn, as they should */
    CHECK(count_events(path) == 0, "a fresh timeline is not an empty array");
    CHECK(python_loads(path), "python cannot load a fresh timeline");

    static const struct {
        const char *tensor, *phase;
        char kind; /* B, E, i */
        int new_row;
        const char *args;
    } steps[] = {
        {"grad/conv1", "ALLREDUCE", 'B', 1, NULL},
        {"grad/conv1", "NEGOTIATE", 'B', 0, NULL},
        {"grad/fc", "ALLREDUCE", 'B', 1, NULL},
        {"grad/conv1", "NEGOTIATE", 'E', 0, "{\"ranks_ready_us\":[12,40]}"},
        {"grad/fc", "NEGOTIATE", 'B', 0, NULL},
        {"grad/conv1", "QUEUE", 'B', 0, NULL},
        {"grad/fc", "NEGOTIATE", 'E', 0, "{\"nested\":{\"a\":[1,{\"b\":\"}]\\\"\"}],\"c\":null}}"},
        {"grad/conv1", "QUEUE", 'E', 0, NULL},
        {"grad/conv1", "MEMCPY_IN_FUSION", 'B', 0, NULL},
        {"grad/conv1", "MEMCPY_IN_FUSION", 'E', 0, NULL},
        {"grad/conv1", "REDUCE_SCATTER", 'B', 0, NULL},
        {"grad/conv1", "CYCLE_START", 'i', 0, "{\"cycle\":7}"},
        {"grad/conv1", "REDUCE_SCATTER", 'E', 0, NULL},
        {"grad/conv1", "ALLGATHER", 'B', 0, NULL},
        {"grad/conv1", "ALLGATHER", 'E', 0, NULL},
        {"grad/conv1", "MEMCPY_OUT", 'B', 0, NULL},
        {"grad/conv1", "MEMCPY_OUT", 'E', 0, NULL},
        {"grad/conv1", "ALLREDUCE", 'E', 0, NULL},
        {"grad/fc", "ALLREDUCE", 'E', 0, "not json {"},          /* kept as a string */
        {"bcast/w", "BROADCAST", 'B', 1, "{\"root\":0}  "},      /* trailing blanks are fine */
        {"bcast/w", "BROADCAST", 'E', 0, "{\"a\":1} {\"b\":2}"}, /* two objects: not one */
        {"bcast/w", "BROADCAST", 'i', 0, "{\"x\":\"\x01\"}"},    /* raw control char: not valid */
    };
    size_t n = sizeof(steps) / sizeof(steps[0]);
    for (size_t i = 0; i < n; i++) {
        if (steps[i].kind == 'B')
            timeline_begin(tl, steps[i].tensor, steps[i].phase, -1, steps[i].args);
        else if (steps[i].kind == 'E')
            timeline_end(tl, steps[i].tensor, steps[i].phase, -1, steps[i].args);
        else
            timeline_instant(tl, steps[i].tensor, steps[i].phase, -1, steps[i].args);
        expect += 1 + steps[i].new_row;
        long got = count_events(path);
        CHECK(got == expect, "after step %zu (%s %s %c): %ld events, want %ld", i, steps[i].tensor, steps[i].phase,
              steps[i].kind, got, expect);
        if (i % 6 == 5) CHECK(python_loads(path), "python cannot load the timeline after step %zu", i);
        int64_t now = timeline_now_us(tl);
        CHECK(now >= last, "timeline_now_us went back: %lld after %lld", (long long)now, (long long)last);
        last = now;
    }
    /* Explicit timestamps are written as given. */
    timeline_begin(tl, "grad/fc", "MEMCPY_OUT", 123456789, NULL);
    timeline_end(tl, "grad/fc", "MEMCPY_OUT", 123456999, NULL);
    expect += 2;
    CHECK(count_events(path) == expect, "explicit-ts events missing");
    CHECK(file_contains(path, "\"ts\":123456789,") && file_contains(path, "\"ts\":123456999,"),
          "explicit timestamps not written as given");
    CHECK(file_contains(path, "\"args\":{\"ranks_ready_us\":[12,40]}"), "args_json not placed as args");
    CHECK(file_contains(path, "\"args\":{\"invalid_args\":\"not json {\"}"), "bad args not kept as a string");
    CHECK(file_contains(path, "\"ph\":\"i\",\"s\":\"t\""), "instant event lacks \"s\":\"t\"");
    CHECK(file_contains(path,
                        "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":3,\"args\":{\"name\":\"bcast/w\"}}"),
          "third row not named after its tensor");
    CHECK(python_loads(path), "python cannot load the finished timeline");
    timeline_close(tl);
    log_set_level(LOG_LEVEL_WARN);
    CHECK(count_events(path) == expect, "closing changed the file");

    /* NULL handle: every call is a no-op. */
    timeline_begin(NULL, "x", "y", -1, NULL);
    timeline_end(NULL, "x", "y", -1, NULL);
    timeline_instant(NULL, "x", "y", -1, NULL);
    timeline_close(NULL);
    CHECK(timeline_now_us(NULL) == 0, "timeline_now_us(NULL) != 0");
}

/* Names with quotes, backslashes, control characters and bad UTF-8 read back
 * exactly (bad bytes as U+FFFD), compared as hex through Python. */
static void test_escaping(const char *path)
{
    static const struct {
        const char *name, *expect;
    } names[] = {
        {"quo\"ted", "quo\"ted"},
        {"back\\slash\\", "back\\slash\\"},
        {"new\nline\r\n", "new\nline\r\n"},
        {"tab\tctl\x01\x1f\x7f\b\f", "tab\tctl\x01\x1f\x7f\b\f"},
        {"caf\xc3\xa9 \xf0\x9f\x98\x80", "caf\xc3\xa9 \xf0\x9f\x98\x80"},
        {"bad\xff"
         "byte",
         "bad\xef\xbf\xbd"
         "byte"},
        {"\xed\xa0\x80surrogate", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdsurrogate"},
        {"\xc0\xafoverlong", "\xef\xbf\xbd\xef\xbf\xbdoverlong"},
        {"cut\xe2\x82", "cut\xef\xbf\xbd\xef\xbf\xbd"},
        {"", ""},
        {"{\"name\":\"inject\"}],[", "{\"name\":\"inject\"}],["},
    };
    size_t n = sizeof(names) / sizeof(names[0]);
    struct timeline *tl = NULL;

    CHECK(timeline_open(&tl, path, 0) == HORA_OK, "open %s: %s", path, hora_last_error());
    if (!tl) return;
    for (size_t i = 0; i < n; i++) {
        timeline_begin(tl, names[i].name, "PH\"A\\SE\n", -1, NULL);
        timeline_end(tl, names[i].name, "PH\"A\\SE\n", -1, NULL);
        CHECK(count_events(path) == (long)(3 * (i + 1)), "escaping name %zu broke the file", i);
    }
    timeline_close(tl);
    CHECK(python_loads(path), "python cannot load the escaped names");

    char cmd[1024];
    snprintf(
        cmd, sizeof(cmd),
        "python3 -c 'import json,sys\n"
        "for e in json.load(open(sys.argv[1], encoding=\"utf-8\")):\n"
        "    print(e[\"args\"][\"name\"].encode().hex() if e[\"ph\"] == \"M\" else e[\"name\"].encode().hex())' '%s'",
        path);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL, "popen python3");
    if (!p) return;
    char line[512];
    for (size_t i = 0; i < n; i++) {
        char want[512] = "";
        for (size_t k = 0; names[i].expect[k]; k++)
            snprintf(want + 2 * k, sizeof(want) - 2 * k, "%02x", (unsigned char)names[i].expect[k]);
        CHECK(fgets(line, sizeof(line), p) != NULL, "python printed too few names");
        line[strcspn(line, "\n")] = '\0';
        CHECK(!strcmp(line, want), "name %zu reads back as %s, want %s", i, line, want);
        for (int k = 0; k < 2; k++) {
            CHECK(fgets(line, sizeof(line), p) != NULL, "python printed too few phases");
            CHECK(!strcmp(line, "504822415c53450a\n"), "phase name %zu reads back as %s", i, line);
        }
    }
    CHECK(pclose(p) == 0, "python failed reading the names back");
}

/* Point fd 2 at a file for a while, to count the warnings log_warn writes. */
static int stderr_to(const char *path)
{
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    FILE *f = fopen(path, "w");
    if (saved < 0 || !f) {
        perror("redirect stderr");
        exit(1);
    }
    dup2(fileno(f), STDERR_FILENO);
    fclose(f);
    return saved;
}

static void stderr_restore(int saved)
{
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
}

static int count_substrings(const char *path, const char *needle)
{
    char *text = test_read_file(path, NULL);
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    free(text);
    return n;
}

static void test_max_bytes(const char *path, const char *log_path)
{
    const size_t max = 1000;
    struct timeline *tl = NULL;
    struct stat st;
    long prev = 0;
    int grew_after_stop = 0, stopped = 0;

    CHECK(timeline_open(&tl, path, max) == HORA_OK, "open %s: %s", path, hora_last_error());
    if (!tl) return;
    int saved = stderr_to(log_path);
    for (int i = 0; i < 100; i++) {
        char tensor[32];
        snprintf(tensor, sizeof(tensor), "t%d", i % 3);
        timeline_begin(tl, tensor, "ALLREDUCE", -1, "{\"bytes\":4096}");
        long got = count_events(path);
        if (got < 0) break;
        if (got == prev)
            stopped = 1;
        else if (stopped)
            grew_after_stop = 1;
        prev = got;
    }
    stderr_restore(saved);
    CHECK(stat(path, &st) == 0 && (size_t)st.st_size <= max, "file is %lld bytes, limit %zu", (long long)st.st_size,
          max);
    CHECK(count_events(path) == prev && prev > 3 && prev < 100, "limited file: %ld events", count_events(path));
    CHECK(stopped && !grew_after_stop, "growth did not stop for good at the limit");
    CHECK(python_loads(path), "python cannot load the limited timeline");
    CHECK(count_substrings(log_path, "warning") == 1 && count_substrings(log_path, "1000 bytes") == 1,
          "want exactly one warning naming the limit, log has %d", count_substrings(log_path, "warning"));
    timeline_close(tl);
}

static void test_open_fail(void)
{
    struct timeline *tl = (struct timeline *)&checks; /* must stay untouched */
    const char *bad = "/nonexistent-hora-dir/sub/timeline.json";

    log_set_level(-1); /* the error is expected; keep the output clean */
    CHECK(timeline_open(&tl, bad, 0) == HORA_ERR_SYSTEM, "open of %s did not fail with HORA_ERR_SYSTEM", bad);
    log_set_level(LOG_LEVEL_WARN);
    CHECK(tl == (struct timeline *)&checks, "*tl was set on failure");
    CHECK(strstr(hora_last_error(), bad) != NULL, "message does not name the path: %s", hora_last_error());
    CHECK(strstr(hora_last_error(), "No such file") != NULL, "message lacks strerror: %s", hora_last_error());
}

struct writer_arg {
    struct timeline *tl;
    int id;
};

static void *writer(void *p)
{
    struct writer_arg *a = p;
    char tensor[32], tick[32];
    snprintf(tensor, sizeof(tensor), "thread%d/grad", a->id);
    snprintf(tick, sizeof(tick), "TICK%d", a->id);
    for (int i = 0; i < THREAD_ITERS; i++) {
        timeline_begin(a->tl, tensor, "ALLREDUCE", -1, NULL);
        timeline_instant(a->tl, "shared", tick, -1, NULL);
        timeline_end(a->tl, tensor, "ALLREDUCE", -1, "{\"i\":1}");
    }
    return NULL;
}

static void test_threads(const char *path)
{
    struct timeline *tl = NULL;
    struct writer_arg args[2];
    pthread_t th[2];

    CHECK(timeline_open(&tl, path, 0) == HORA_OK, "open %s: %s", path, hora_last_error());
    if (!tl) return;
    for (int i = 0; i < 2; i++) {
        args[i] = (struct writer_arg){.tl = tl, .id = i};
        CHECK(pthread_create(&th[i], NULL, writer, &args[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    timeline_close(tl);
    long want = 2L * 3 * THREAD_ITERS + 3; /* events + three row names */
    long got = count_events(path);
    CHECK(got == want, "two writers: %ld events, want %ld", got, want);
    CHECK(python_loads(path), "python cannot load the two-writer timeline");
}

static void test_tool(const char *path, const char *threads_path, const char *cut_path)
{
    char cmd[2048];

    snprintf(cmd, sizeof(cmd), "python3 '%s' '%s' > /dev/null", TOOL, path);
    CHECK(run_status(cmd) == 0, "hora-timeline failed: %s", cmd);
    snprintf(cmd, sizeof(cmd), "python3 '%s' '%s' --json | " PY_LOAD " /dev/stdin", TOOL, path);
    CHECK(run_status(cmd) == 0, "hora-timeline --json output is not JSON: %s", cmd);

    /* Every span found: 2 x THREAD_ITERS ALLREDUCE spans. */
    snprintf(cmd, sizeof(cmd), "python3 '%s' '%s' --json | grep -q '\"count\": %d,'", TOOL, threads_path,
             2 * THREAD_ITERS);
    CHECK(run_status(cmd) == 0, "hora-timeline does not count %d spans: %s", 2 * THREAD_ITERS, cmd);

    /* A copy cut in the middle of its last event still reads. */
    size_t len;
    char *text = test_read_file(path, &len);
    FILE *f = fopen(cut_path, "wb");
    CHECK(text && f && len > 40, "cannot copy %s", path);
    if (text && f) fwrite(text, 1, len - 20, f);
    if (f) fclose(f);
    free(text);
    CHECK(count_events(cut_path) < 0, "the cut copy should not be valid JSON");
    snprintf(cmd, sizeof(cmd), "python3 '%s' '%s' --json | grep -q '\"truncated\": true'", TOOL, cut_path);
    CHECK(run_status(cmd) == 0, "hora-timeline cannot read a cut file: %s", cmd);

    snprintf(cmd, sizeof(cmd), "python3 '%s' '%s.missing' 2> /dev/null", TOOL, path);
    CHECK(run_status(cmd) == 1, "hora-timeline on a missing file should exit 1");
    f = fopen(cut_path, "w");
    if (f) {
        fputs("this is not a trace\n", f);
        fclose(f);
    }
    snprintf(cmd, sizeof(cmd), "python3 '%s' '%s' 2> /dev/null", TOOL, cut_path);
    CHECK(run_status(cmd) == 1, "hora-timeline on garbage should exit 1");
}

int main(void)
{
    char basic[512], escaped[512], limited[512], log_path[512], threads[512], cut[512];

    if (run_status("python3 -c 'pass'") != 0) {
        fprintf(stderr, "test_timeline: python3 is needed to cross-check the JSON\n");
        return 1;
    }
    temp_path(basic, sizeof(basic), "timeline");
    temp_path(escaped, sizeof(escaped), "timeline-esc");
    temp_path(limited, sizeof(limited), "timeline-max");
    temp_path(log_path, sizeof(log_path), "timeline-log");
    temp_path(threads, sizeof(threads), "timeline-mt");
    temp_path(cut, sizeof(cut), "timeline-cut");

    test_every_event(basic);
    test_escaping(escaped);
    test_max_bytes(limited, log_path);
    test_open_fail();
    test_threads(threads);
    test_tool(basic, threads, cut);

    if (failures) {
        fprintf(stderr, "files kept: %s %s %s %s %s %s\n", basic, escaped, limited, log_path, threads, cut);
    } else {
        unlink(basic);
        unlink(escaped);
        unlink(limited);
        unlink(log_path);
        unlink(threads);
        unlink(cut);
    }
    printf("test_timeline: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
