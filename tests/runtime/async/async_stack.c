/* async_stack.c - mode stall_stack: under the stall inspector's warning,
 * rank 0 prints what the missing rank is doing. The last rank sleeps inside
 * late_rank_sleeps_here (exported: test_async is linked with
 * --export-dynamic-symbol for it, so dladdr names it) past HORA_STALL_CHECK_S before it submits 'late_tensor';
 * rank 0's stderr must hold "stall: rank L missing for 'late_tensor' ...;
 * rank L is at:" with a native backtrace naming that function in the lines
 * under it, and the allreduce must still be right. With HORA_STALL_STACKS=0
 * the warning stays and no stack (nor a silence) is reported. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "async_common.h"
#include "file.h"

/* Sleeps for seconds, through the capture signal's EINTR. Not static and
 * never inlined: its name must be in the backtrace. */
__attribute__((noinline)) double late_rank_sleeps_here(double seconds);
__attribute__((noinline)) double late_rank_sleeps_here(double seconds)
{
    const double end = test_now_s() + seconds;
    int interrupted = 0;
    for (double left; (left = end - test_now_s()) > 0;) {
        struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        interrupted += nanosleep(&ts, NULL) != 0;
    }
    return (double)interrupted;
}

/* The block under rank 0's header: from the header to the next line that
 * starts a log message ("hora[") or the end. */
static void stack_check_text(const char *text, int late, int stacks_on)
{
    char header[128];
    snprintf(header, sizeof(header), "stall: rank %d missing for 'late_tensor' (waited ", late);
    const char *h = strstr(text, header);
    char at[64];
    snprintf(at, sizeof(at), "rank %d is at:\n", late);
    if (!stacks_on) {
        CHECK(strstr(text, "missing ranks: ") != NULL, "stall_stack: HORA_STALL_STACKS=0 left no stall warning");
        CHECK(h == NULL && !strstr(text, " is at:") && !strstr(text, "no answer to the stack request"),
              "stall_stack: HORA_STALL_STACKS=0, yet rank 0 reported a stack or a silence");
        return;
    }
    CHECK(h != NULL, "stall_stack: rank 0's stderr has no '%s...' line", header);
    if (!h) return;
    const char *eol = strchr(h, '\n');
    CHECK(eol && eol - (int)strlen(at) + 1 >= h && !strncmp(eol - strlen(at) + 1, at, strlen(at)),
          "stall_stack: the header does not end in '%.*s': '%.*s'", (int)strlen(at) - 1, at,
          (int)(eol ? eol - h : (long)strlen(h)), h);
    if (!eol) return;
    const char *end = strstr(eol, "\nhora[");
    size_t block = end ? (size_t)(end - eol) : strlen(eol);
    char *lines = strndup(eol, block);
    CHECK(lines && strstr(lines, "native backtrace of thread "),
          "stall_stack: the block under the header is no native backtrace:%s", lines ? lines : "(none)");
    CHECK(lines && strstr(lines, "late_rank_sleeps_here+0x"),
          "stall_stack: the backtrace under the header does not name late_rank_sleeps_here:%s",
          lines ? lines : "(none)");
    free(lines);
}

void mode_stall_stack(void)
{
    struct stderr_capture cap;
    const char *env = getenv("HORA_STALL_STACKS");
    const int stacks_on = !env || strcmp(env, "0") != 0;
    const int late = size - 1;

    if (rank == 0 && !stderr_capture_begin(&cap, "stall_stack")) return;
    if (!runtime_start("stall_stack")) goto out;
    struct ar_case c;
    ar_case_init(&c, "late", HORA_DTYPE_F32, HORA_OP_SUM, 1000, 0, 0, 37);
    snprintf(c.name, sizeof(c.name), "late_tensor");
    if (rank == late) late_rank_sleeps_here(3.5);
    ar_case_start(&c);
    ar_case_finish(&c, 0);
    runtime_stop("stall_stack");
out:
    if (rank == 0) {
        char *text = stderr_capture_end(&cap);
        if (!text) {
            fail("stall_stack: cannot read back %s", cap.path);
            return;
        }
        const int before = atomic_load(&failures);
        stack_check_text(text, late, stacks_on);
        if (atomic_load(&failures) != before || getenv("TEST_ASYNC_VERBOSE"))
            fprintf(stderr, "---- rank 0 stderr during the stall_stack test ----\n%s---- end ----\n", text);
        free(text);
    }
}
