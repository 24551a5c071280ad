/* workers.c - start, watch and stop hora-run's local workers (workers.h).
 *
 * The environment is built in full before fork: hora-run has a thread (the
 * store's server), so between fork and exec the child calls only
 * async-signal-safe functions. */
#define _GNU_SOURCE /* execvpe, pipe2 */
#include "workers.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/status.h"
#include "boot/store.h"

extern char **environ;

/* The variables hora-run sets; any of them inherited is replaced. Those
 * from ELASTIC_FIRST on are set only with --elastic. HORA_JOIN_TIMEOUT_S
 * always: libhora's store bootstrap waits that long for a peer's values. */
static const char *const owned_vars[] = {
    "HORA_RANK",           "HORA_SIZE",    "HORA_LOCAL_RANK",  "HORA_LOCAL_SIZE",      "HORA_NODE_RANK",
    "HORA_NODE_COUNT",     "HORA_RDZV",    "HORA_JOB_ID",      "HORA_GENERATION",      "RANK",
    "WORLD_SIZE",          "LOCAL_RANK",   "LOCAL_WORLD_SIZE", "MASTER_ADDR",          "MASTER_PORT",
    "HORA_JOIN_TIMEOUT_S", "HORA_ELASTIC", "HORA_WORKER_ID",   "HORA_ELASTIC_GRACE_S",
};
#define ELASTIC_FIRST 16
#define OWNED_COUNT (sizeof(owned_vars) / sizeof(owned_vars[0]))

static int owned(const char *entry)
{
    for (size_t i = 0; i < OWNED_COUNT; i++) {
        size_t n = strlen(owned_vars[i]);
        if (strncmp(entry, owned_vars[i], n) == 0 && entry[n] == '=') return 1;
    }
    return 0;
}

/* environ without our variables, then ours for local rank `local`
 * (malloc'd strings; NULL when out of memory). */
static char **worker_environ(const workers_env_t *env, int local)
{
    size_t inherited = 0;
    while (environ[inherited]) inherited++;
    char **out = calloc(inherited + OWNED_COUNT + 1, sizeof(char *));
    if (!out) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < inherited; i++)
        if (!owned(environ[i])) out[n++] = environ[i];
    int rank = env->rank_base + local;
    char rdzv[300], worker_id[32], join_timeout[32], grace[32];
    snprintf(rdzv, sizeof(rdzv), "%s:%d", env->rdzv_host, env->rdzv_port);
    snprintf(worker_id, sizeof(worker_id), "%d.%d", env->host_id, local);
    snprintf(join_timeout, sizeof(join_timeout), "%g", env->join_timeout_s);
    snprintf(grace, sizeof(grace), "%g", env->elastic_grace_s);
    /* In owned_vars' order: a text, or a number where text is NULL. */
    const struct {
        const char *text;
        long number;
    } values[OWNED_COUNT] = {
        {NULL, rank},
        {NULL, env->world_size},
        {NULL, local},
        {NULL, env->local_size},
        {NULL, env->node_rank},
        {NULL, env->node_count},
        {rdzv, 0},
        {env->job_id, 0},
        {NULL, env->generation},
        {NULL, rank},
        {NULL, env->world_size},
        {NULL, local},
        {NULL, env->local_size},
        {env->rdzv_host, 0},
        {NULL, env->rdzv_port},
        {join_timeout, 0},
        {"1", 0},
        {worker_id, 0},
        {grace, 0},
    };
    size_t first_owned = n;
    for (size_t i = 0; i < (env->elastic ? OWNED_COUNT : ELASTIC_FIRST); i++) {
        size_t bytes = strlen(owned_vars[i]) + (values[i].text ? strlen(values[i].text) : 24) + 2;
        char *e = malloc(bytes);
        if (!e) {
            for (size_t j = first_owned; j < n; j++) free(out[j]);
            free(out);
            return NULL;
        }
        if (values[i].text)
            snprintf(e, bytes, "%s=%s", owned_vars[i], values[i].text);
        else
            snprintf(e, bytes, "%s=%ld", owned_vars[i], values[i].number);
        out[n++] = e;
    }
    out[n] = NULL;
    return out;
}

static void environ_free(char **envp)
{
    for (size_t i = 0; envp[i]; i++)
        if (owned(envp[i])) free(envp[i]); /* ours: worker_environ left out the inherited ones */
    free(envp);
}

hora_status_t workers_start(workers_t *ws, const workers_env_t *env, char *const argv[])
{
    *ws = (workers_t){.w = calloc((size_t)env->local_size, sizeof(worker_t))};
    if (!ws->w) return status_set(HORA_ERR_NO_MEMORY, "hora-run: out of memory");
    if (env->prefix_output && !(ws->streams = calloc(2 * (size_t)env->local_size, sizeof(output_stream_t)))) {
        free(ws->w);
        ws->w = NULL; /* the caller's workers_free frees it */
        return status_set(HORA_ERR_NO_MEMORY, "hora-run: out of memory");
    }
    pid_t parent = getpid();
    for (int local = 0; local < env->local_size; local++) {
        char **envp = worker_environ(env, local);
        if (!envp) {
            workers_stop(ws, 0);
            return status_set(HORA_ERR_NO_MEMORY, "hora-run: out of memory");
        }
        /* Both ends close on exec; the child's dup2 onto 1 and 2 keeps its own. */
        int pipes[2][2] = {{-1, -1}, {-1, -1}};
        if (ws->streams && (pipe2(pipes[0], O_CLOEXEC) != 0 || pipe2(pipes[1], O_CLOEXEC) != 0)) {
            int pipe_errno = errno;
            for (int k = 0; k < 4; k++)
                if (pipes[k / 2][k % 2] >= 0) close(pipes[k / 2][k % 2]);
            environ_free(envp);
            workers_stop(ws, 0);
            return status_set(HORA_ERR_SYSTEM, "hora-run: pipe for local worker %d: %s", local, strerror(pipe_errno));
        }
        pid_t pid = fork();
        if (pid == 0) {
            if (pipes[0][1] >= 0) {
                dup2(pipes[0][1], 1);
                dup2(pipes[1][1], 2);
            }
            setpgid(0, 0);
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(126); /* hora-run died before prctl */
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, NULL);
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            execvpe(argv[0], argv, envp);
            static const char msg[] = "hora-run: cannot execute the worker command\n";
            ssize_t k = write(2, msg, sizeof(msg) - 1);
            (void)k;
            _exit(127);
        }
        int fork_errno = errno;
        environ_free(envp);
        if (ws->streams) {
            close(pipes[0][1]);
            close(pipes[1][1]);
            output_stream_init(&ws->streams[ws->stream_count++], pipes[0][0], 1, env->rank_base + local);
            output_stream_init(&ws->streams[ws->stream_count++], pipes[1][0], 2, env->rank_base + local);
        }
        if (pid < 0) {
            workers_stop(ws, 0);
            return status_set(HORA_ERR_SYSTEM, "hora-run: fork of local worker %d: %s", local, strerror(fork_errno));
        }
        setpgid(pid, pid); /* also here: no race with a stop right after */
        ws->w[local] = (worker_t){.pid = pid, .rank = env->rank_base + local, .local_rank = local};
        ws->count++;
        ws->running++;
    }
    return HORA_OK;
}

static void describe(const worker_t *w, int node_rank, char *out, size_t bytes)
{
    int n = snprintf(out, bytes, "rank %d (local rank %d on host %d, pid %d) ", w->rank, w->local_rank, node_rank,
                     (int)w->pid);
    if (n < 0 || (size_t)n >= bytes) return;
    if (WIFEXITED(w->status))
        snprintf(out + n, bytes - (size_t)n, "exited with status %d", WEXITSTATUS(w->status));
    else if (WIFSIGNALED(w->status))
        snprintf(out + n, bytes - (size_t)n, "was killed by signal %d (%s)", WTERMSIG(w->status),
                 strsignal(WTERMSIG(w->status)));
}

int workers_poll(workers_t *ws, int node_rank, char *failure, size_t failure_bytes)
{
    if (failure_bytes) failure[0] = '\0';
    for (int i = 0; i < ws->count; i++) {
        worker_t *w = &ws->w[i];
        if (w->pid <= 0) continue;
        int st;
        pid_t r = waitpid(w->pid, &st, WNOHANG);
        if (r != w->pid) continue;
        w->status = st;
        ws->running--;
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && failure_bytes && !failure[0])
            describe(w, node_rank, failure, failure_bytes);
        w->pid = -w->pid; /* reaped: the number kept for its process group */
    }
    return ws->running;
}

int workers_renumber(workers_t *ws, int rank_base)
{
    int live = 0;
    for (int i = 0; i < ws->count; i++) {
        worker_t *w = &ws->w[i];
        if (w->pid <= 0) continue;
        w->rank = rank_base + live;
        w->local_rank = live++;
        /* Its stdout and stderr: workers_start made them in slot order. */
        for (int k = 0; ws->streams && k < 2; k++) ws->streams[2 * i + k].rank = w->rank;
    }
    return live;
}

void workers_pump(workers_t *ws, double timeout_s)
{
    double deadline = boot_now_s() + timeout_s, left = timeout_s;
    do {
        output_pump(ws->streams, ws->stream_count, left); /* sleeps when nothing is open */
        left = deadline - boot_now_s();
    } while (left > 0);
}

/* Every worker's group is signalled, also of those already reaped: a
 * worker's own children may outlive it. */
void workers_stop(workers_t *ws, double grace_s)
{
    for (int i = 0; i < ws->count; i++)
        if (ws->w[i].pid) kill(-abs(ws->w[i].pid), SIGTERM);
    double deadline = boot_now_s() + grace_s;
    while (workers_poll(ws, 0, NULL, 0) > 0 && boot_now_s() < deadline) workers_pump(ws, 0.02);
    for (int i = 0; i < ws->count; i++)
        if (ws->w[i].pid) kill(-abs(ws->w[i].pid), SIGKILL);
    for (int i = 0; i < ws->count; i++) {
        worker_t *w = &ws->w[i];
        if (w->pid <= 0) continue;
        while (waitpid(w->pid, &w->status, 0) < 0 && errno == EINTR) {
        }
        w->pid = -w->pid;
        ws->running--;
    }
    /* What the workers wrote last; a grandchild that keeps a pipe open
     * does not hold hora-run up for more than this. */
    deadline = boot_now_s() + 0.5;
    while (output_open_count(ws->streams, ws->stream_count) > 0 && boot_now_s() < deadline) workers_pump(ws, 0.05);
    output_close(ws->streams, ws->stream_count);
}

void workers_free(workers_t *ws)
{
    output_close(ws->streams, ws->stream_count);
    free(ws->streams);
    free(ws->w);
    *ws = (workers_t){0};
}
