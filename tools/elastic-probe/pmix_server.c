/*
 * pmix_server.c - can a small launcher be the PMIx server of the MPI
 * processes it starts (direct launch, as Slurm's srun does), so that MPI
 * programs start with no mpirun and no ssh?
 *
 * One host, one job: the launcher initialises Debian's PMIx 4.2 server
 * library (PMIx_server_init with a module of upcalls), registers one
 * namespace of NP processes with the job-level and per-process keys Open
 * MPI 4.1 reads at MPI_Init (sizes, ranks, local ranks and peers, node and
 * process maps), registers each client, asks PMIx_server_setup_fork for
 * its environment and fork/execs PROGRAM with it. The module's fence_nb
 * upcall completes every fence at once with the data the library collected
 * (one server holds every process: nothing to exchange with other hosts);
 * abort kills the children. The launcher waits for them and exits with the
 * first non-zero status.
 *
 *   pmix_server [--np N] PROGRAM [ARGS...]
 *
 * Build: cc -o pmix_server pmix_server.c -I/usr/lib/x86_64-linux-gnu/pmix2/include
 *        -L/usr/lib/x86_64-linux-gnu/pmix2/lib -lpmix  (tools/elastic-probe/run does it)
 *
 * Exit 0 when every child exited 0; 1 otherwise; 2 bad arguments.
 */
#define _GNU_SOURCE
#include <pmix.h>
#include <pmix_server.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 64

static pid_t children[MAX_PROCS];
static int child_count;
static volatile int fence_count;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static pmix_status_t on_connected(const pmix_proc_t *proc, void *server_object, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)proc;
    (void)server_object;
    if (cbfunc) cbfunc(PMIX_SUCCESS, cbdata);
    return PMIX_SUCCESS;
}

static pmix_status_t on_finalized(const pmix_proc_t *proc, void *server_object, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)server_object;
    fprintf(stderr, "pmix_server: rank %u finalized\n", proc->rank);
    if (cbfunc) cbfunc(PMIX_SUCCESS, cbdata);
    return PMIX_SUCCESS;
}

static pmix_status_t on_abort(const pmix_proc_t *proc, void *server_object, int status, const char msg[],
                              pmix_proc_t procs[], size_t nprocs, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)server_object;
    (void)procs;
    (void)nprocs;
    fprintf(stderr, "pmix_server: rank %u aborted (status %d): %s\n", proc->rank, status, msg ? msg : "");
    for (int i = 0; i < child_count; i++) kill(children[i], SIGKILL);
    if (cbfunc) cbfunc(PMIX_SUCCESS, cbdata);
    return PMIX_SUCCESS;
}

/* Every local process has contributed: with one server there is no one
 * else to hear from, so the fence completes with what was collected. */
static pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo,
                              char *data, size_t ndata, pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    (void)procs;
    (void)nprocs;
    (void)info;
    (void)ninfo;
    fence_count++;
    if (cbfunc) cbfunc(PMIX_SUCCESS, data, ndata, cbdata, NULL, NULL);
    return PMIX_SUCCESS;
}

/* A direct-modex request can only be for a local process, whose data the
 * library already has: there is nothing for the host to fetch. */
static pmix_status_t on_dmodex(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                               pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    (void)proc;
    (void)info;
    (void)ninfo;
    (void)cbfunc;
    (void)cbdata;
    return PMIX_ERR_NOT_SUPPORTED;
}

static pmix_server_module_t server_module = {
    .client_connected = on_connected,
    .client_finalized = on_finalized,
    .abort = on_abort,
    .fence_nb = on_fence,
    .direct_modex = on_dmodex,
};

/* The job-level and per-process keys of one namespace of np processes on
 * this host, as Open MPI's MPI_Init looks them up. */
static pmix_info_t *job_info(int np, const char *host, size_t *count)
{
    char peers[4 * MAX_PROCS] = "", *node_regex = NULL, *proc_regex = NULL;
    for (int r = 0; r < np; r++)
        snprintf(peers + strlen(peers), sizeof(peers) - strlen(peers), "%s%d", r ? "," : "", r);
    PMIx_generate_regex(host, &node_regex);
    PMIx_generate_ppn(peers, &proc_regex);
    uint32_t u32 = (uint32_t)np, zero = 0;
    pmix_rank_t leader = 0;
    size_t n = 0, max = 20;
    pmix_info_t *info;
    PMIX_INFO_CREATE(info, max + (size_t)np);
    PMIX_INFO_LOAD(&info[n++], PMIX_UNIV_SIZE, &u32, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_JOB_SIZE, &u32, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_LOCAL_SIZE, &u32, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_NODE_SIZE, &u32, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_MAX_PROCS, &u32, PMIX_UINT32);
    u32 = 1;
    PMIX_INFO_LOAD(&info[n++], PMIX_NUM_NODES, &u32, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_NODEID, &zero, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_APPNUM, &zero, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_APPLDR, &leader, PMIX_PROC_RANK);
    PMIX_INFO_LOAD(&info[n++], PMIX_LOCALLDR, &leader, PMIX_PROC_RANK);
    PMIX_INFO_LOAD(&info[n++], PMIX_LOCAL_PEERS, peers, PMIX_STRING);
    PMIX_INFO_LOAD(&info[n++], PMIX_NODE_MAP, node_regex, PMIX_REGEX);
    PMIX_INFO_LOAD(&info[n++], PMIX_PROC_MAP, proc_regex, PMIX_REGEX);
    PMIX_INFO_LOAD(&info[n++], PMIX_HOSTNAME, host, PMIX_STRING);
    PMIX_INFO_LOAD(&info[n++], PMIX_TMPDIR, "/tmp", PMIX_STRING);
    for (int r = 0; r < np; r++) {
        pmix_data_array_t *darray;
        PMIX_DATA_ARRAY_CREATE(darray, 5, PMIX_INFO);
        pmix_info_t *pi = (pmix_info_t *)darray->array;
        pmix_rank_t rank = (pmix_rank_t)r;
        uint16_t local = (uint16_t)r;
        PMIX_INFO_LOAD(&pi[0], PMIX_RANK, &rank, PMIX_PROC_RANK);
        PMIX_INFO_LOAD(&pi[1], PMIX_LOCAL_RANK, &local, PMIX_UINT16);
        PMIX_INFO_LOAD(&pi[2], PMIX_NODE_RANK, &local, PMIX_UINT16);
        PMIX_INFO_LOAD(&pi[3], PMIX_APPNUM, &zero, PMIX_UINT32);
        PMIX_INFO_LOAD(&pi[4], PMIX_HOSTNAME, host, PMIX_STRING);
        PMIX_INFO_LOAD(&info[n++], PMIX_PROC_DATA, darray, PMIX_DATA_ARRAY);
        PMIX_DATA_ARRAY_FREE(darray);
    }
    free(node_regex);
    free(proc_regex);
    *count = n;
    return info;
}

int main(int argc, char **argv)
{
    int np = 2, first = 1;
    if (argc > 2 && !strcmp(argv[1], "--np")) {
        np = atoi(argv[2]);
        first = 3;
    }
    if (first >= argc || np < 1 || np > MAX_PROCS) {
        fprintf(stderr, "usage: pmix_server [--np N (1..%d)] PROGRAM [ARGS...]\n", MAX_PROCS);
        return 2;
    }
    double t0 = now_s();
    char host[256];
    gethostname(host, sizeof(host));

    pmix_info_t server_info[1];
    PMIX_INFO_LOAD(&server_info[0], PMIX_SERVER_TMPDIR, "/tmp", PMIX_STRING);
    pmix_status_t status = PMIx_server_init(&server_module, server_info, 1);
    if (status != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_server: PMIx_server_init: %s\n", PMIx_Error_string(status));
        return 1;
    }

    pmix_nspace_t nspace;
    snprintf(nspace, sizeof(nspace), "hora-probe-%d", (int)getpid());
    size_t ninfo;
    pmix_info_t *info = job_info(np, host, &ninfo);
    /* A NULL callback makes the registration calls blocking (PMIx >= 4). */
    status = PMIx_server_register_nspace(nspace, np, info, ninfo, NULL, NULL);
    PMIX_INFO_FREE(info, ninfo);
    if (status != PMIX_SUCCESS && status != PMIX_OPERATION_SUCCEEDED) {
        fprintf(stderr, "pmix_server: PMIx_server_register_nspace: %s\n", PMIx_Error_string(status));
        PMIx_server_finalize();
        return 1;
    }

    extern char **environ;
    for (int r = 0; r < np; r++) {
        pmix_proc_t proc;
        PMIX_LOAD_PROCID(&proc, nspace, (pmix_rank_t)r);
        status = PMIx_server_register_client(&proc, getuid(), getgid(), NULL, NULL, NULL);
        if (status != PMIX_SUCCESS && status != PMIX_OPERATION_SUCCEEDED) {
            fprintf(stderr, "pmix_server: PMIx_server_register_client(%d): %s\n", r, PMIx_Error_string(status));
            break;
        }
        char **env = NULL;
        for (char **e = environ; *e; e++) pmix_argv_append_nosize(&env, *e);
        status = PMIx_server_setup_fork(&proc, &env);
        if (status != PMIX_SUCCESS) {
            fprintf(stderr, "pmix_server: PMIx_server_setup_fork(%d): %s\n", r, PMIx_Error_string(status));
            break;
        }
        pid_t pid = fork();
        if (pid == 0) {
            execve(argv[first], argv + first, env);
            fprintf(stderr, "pmix_server: exec %s failed\n", argv[first]);
            _exit(127);
        }
        children[child_count++] = pid;
    }

    int rc = child_count == np ? 0 : 1;
    for (int i = 0; i < child_count; i++) {
        int wstatus;
        pid_t pid = waitpid(-1, &wstatus, 0);
        if (pid < 0) break;
        if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
            fprintf(stderr, "pmix_server: child %d ended with %s %d\n", (int)pid,
                    WIFEXITED(wstatus) ? "status" : "signal",
                    WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : WTERMSIG(wstatus));
            rc = 1;
        }
    }
    fprintf(stderr, "pmix_server: %d processes, %d fence(s), %.3f s from start to the last exit\n", child_count,
            fence_count, now_s() - t0);
    PMIx_server_finalize();
    return rc;
}
