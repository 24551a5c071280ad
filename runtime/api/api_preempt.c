/* api_preempt.c - preemption (hora.h): a stop asked for by SIGTERM, by the
 * file HORA_PREEMPT_FILE or by the program, and the agreement at a step
 * boundary that makes every rank stop at the same step.
 *
 * The request is one process-wide atomic word of HORA_PREEMPT_CAUSE_* bits:
 * the SIGTERM handler and hora_preempt_request only OR a bit into it
 * (lock-free, so async-signal-safe). The agreement is one direct all-reduce
 * (MAX) of four int64 on the user's channels (coll/, the latency path: one
 * flag round over shared memory), whose result every rank reads the same way:
 *   [0] the request: (size - rank) << 3 | causes on a rank that asks, else
 *       0; the MAX is the lowest asking rank, with its causes
 *   [1] step, [2] -step: MAX and -MIN of the ranks' steps (they must agree)
 *   [3] 1 on a rank that passed a NULL stop_step
 * so a bad argument anywhere fails everywhere, and a failed all-reduce fails
 * on every rank as the direct collectives do. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api.h"
#include "base/status.h"
#include "hora.h"

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the SIGTERM handler needs a lock-free atomic int");

static atomic_int api_preempt_causes;
/* hora_preempt_watch's state: whether the handler is in, and the action it
 * replaced (put back by hora_preempt_watch(0)). */
static pthread_mutex_t api_preempt_lock = PTHREAD_MUTEX_INITIALIZER;
static int api_preempt_watching;
static struct sigaction api_preempt_previous;

static void api_preempt_on_sigterm(int sig)
{
    (void)sig;
    atomic_fetch_or_explicit(&api_preempt_causes, HORA_PREEMPT_CAUSE_SIGTERM, memory_order_relaxed);
}

hora_status_t hora_preempt_watch(int flags)
{
    if (flags & ~HORA_PREEMPT_WATCH_SIGTERM)
        return status_set(HORA_ERR_INVALID_ARG,
                          "hora_preempt_watch: unknown flags 0x%x (HORA_PREEMPT_WATCH_SIGTERM or 0)", (unsigned)flags);
    hora_status_t status = HORA_OK;
    pthread_mutex_lock(&api_preempt_lock);
    if ((flags & HORA_PREEMPT_WATCH_SIGTERM) && !api_preempt_watching) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = api_preempt_on_sigterm;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGTERM, &sa, &api_preempt_previous) == 0)
            api_preempt_watching = 1;
        else
            status = status_set(HORA_ERR_SYSTEM, "hora_preempt_watch: sigaction(SIGTERM): %s", strerror(errno));
    } else if (!(flags & HORA_PREEMPT_WATCH_SIGTERM) && api_preempt_watching) {
        if (sigaction(SIGTERM, &api_preempt_previous, NULL) == 0)
            api_preempt_watching = 0;
        else
            status = status_set(HORA_ERR_SYSTEM, "hora_preempt_watch(0): sigaction(SIGTERM): %s", strerror(errno));
    }
    pthread_mutex_unlock(&api_preempt_lock);
    return status;
}

hora_status_t hora_preempt_request(void)
{
    atomic_fetch_or_explicit(&api_preempt_causes, HORA_PREEMPT_CAUSE_REQUEST, memory_order_relaxed);
    return HORA_OK;
}

hora_status_t api_preempt_check_config(const struct config *cfg)
{
    const char *path = cfg->preempt_file;
    if (!path[0]) return HORA_OK;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return status_fail(HORA_ERR_CONFIG,
                           "bad value for HORA_PREEMPT_FILE: '%s' is a directory (name a file that a scheduler "
                           "or a person creates to stop the run)",
                           path);
    /* The directory the file would appear in: a typo there would make the
     * request impossible, and nobody would know until the machine is gone. */
    char dir[sizeof(cfg->preempt_file)];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return HORA_OK; /* the working directory */
    if (slash == dir)
        slash[1] = '\0';
    else
        *slash = '\0';
    const int missing = stat(dir, &st) != 0;
    if (missing || !S_ISDIR(st.st_mode))
        return status_fail(HORA_ERR_CONFIG,
                           "bad value for HORA_PREEMPT_FILE: '%s': its directory %s %s (the file could "
                           "never appear)",
                           path, dir, missing ? "does not exist" : "is not a directory");
    return HORA_OK;
}

hora_status_t hora_preempt_agree(int64_t step, int64_t *stop_step, int *by_rank, int *cause)
{
    HORA_CHECK(api_check_initialized("hora_preempt_agree"));
    int causes = atomic_load_explicit(&api_preempt_causes, memory_order_relaxed);
    struct stat st;
    if (hora_rt.cfg.preempt_file[0] && stat(hora_rt.cfg.preempt_file, &st) == 0) causes |= HORA_PREEMPT_CAUSE_FILE;
    const int size = hora_rt.topo.size, rank = hora_rt.topo.rank;
    /* A negative step is refused after the all-reduce, on every rank; -INT64_MIN would overflow. */
    const int64_t mine = step < 0 ? -1 : step;
    int64_t v[4] = {causes ? (int64_t)(size - rank) << 3 | causes : 0, mine, -mine, stop_step == NULL};
    HORA_CHECK(
        coll_allreduce(&hora_rt.coll, COLL_PURPOSE_USER, HORA_MEMORY_HOST, v, v, 4, HORA_DTYPE_I64, HORA_OP_MAX, NULL));
    if (v[3]) return status_set(HORA_ERR_INVALID_ARG, "hora_preempt_agree: a rank passed stop_step NULL");
    if (v[1] != -v[2])
        return status_set(HORA_ERR_MISMATCH,
                          "hora_preempt_agree: the ranks are at different steps (%" PRId64 " and %" PRId64
                          "): every rank must call it at the same step boundary",
                          -v[2], v[1]);
    if (v[1] < 0) return status_set(HORA_ERR_INVALID_ARG, "hora_preempt_agree: step %" PRId64 " < 0", step);
    *stop_step = v[0] ? step : -1;
    if (by_rank) *by_rank = v[0] ? size - (int)(v[0] >> 3) : -1;
    if (cause) *cause = (int)(v[0] & 7);
    return HORA_OK;
}
