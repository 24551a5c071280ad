/*
 * pmix_server.c - can a small launcher be the PMIx server of the MPI
 * processes it starts (direct launch, as Slurm's srun does), so that MPI
 * programs start with no mpirun and no ssh?
 *
 * The launcher initialises Debian's PMIx 4.2 server library
 * (PMIx_server_init with a module of upcalls), registers one namespace with
 * the job-level and per-process keys Open MPI reads at MPI_Init (sizes,
 * ranks, local ranks and peers, node and process maps), registers each
 * local client, asks PMIx_server_setup_fork for its environment and
 * fork/execs PROGRAM with it. abort kills the children; a child that dies
 * is announced to the others with a PMIx event (notify_lost), which is how
 * Open MPI 5's ULFM learns of a failure.
 *
 * One host: NP processes; a fence completes with what the library
 * collected. Two hosts: one launcher per host, NP processes each (node 0
 * ranks 0..NP-1, node 1 the next NP), joined by one TCP connection
 * (--listen PORT on node 0, --connect IP:PORT on node 1, which is all the
 * "store" there is); the fence_nb upcall swaps the two hosts' blobs over it.
 *
 *   pmix_server [--np N] [--listen PORT | --connect IP:PORT] PROGRAM [ARGS...]
 *
 * Build: cc -o pmix_server pmix_server.c -I/usr/lib/x86_64-linux-gnu/pmix2/include
 *        -L/usr/lib/x86_64-linux-gnu/pmix2/lib -lpmix  (tools/elastic-probe/run does it)
 *
 * Exit 0 when every local child exited 0; 1 otherwise; 2 bad arguments.
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
#include <pthread.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define MAX_PROCS 64

static pid_t children[MAX_PROCS];
static int child_count;
static volatile int fence_count;

/* The job: np processes on each of nodes hosts (one, or two joined by a
 * TCP connection between their launchers); node i runs ranks
 * [i * np, (i + 1) * np). */
struct launch {
    int np, nodes, node_id, peer_fd;
    char hosts[2][64];
    pmix_nspace_t nspace;
    /* The peer channel: one reader thread; writers take send_lock. */
    pthread_mutex_t lock, send_lock;
    pthread_cond_t blob_ready;
    /* The peer's fence blobs not yet taken, oldest first: the peer may
     * reach its next fence before this side has woken from the last. */
    char *peer_blob[8];
    uint64_t peer_blob_bytes[8];
    int peer_blob_count, peer_done, local_done;
};

static struct launch job = {.np = 2,
                            .nodes = 1,
                            .peer_fd = -1,
                            .lock = PTHREAD_MUTEX_INITIALIZER,
                            .send_lock = PTHREAD_MUTEX_INITIALIZER,
                            .blob_ready = PTHREAD_COND_INITIALIZER};

/* The launchers' messages: a header, then len bytes. */
enum peer_msg_type { PEER_MSG_FENCE = 1, PEER_MSG_LOST = 2, PEER_MSG_DONE = 3 };
struct peer_msg_header {
    uint32_t type, arg;
    uint64_t len;
};

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

static pmix_status_t fence_two_hosts(char *data, size_t ndata, pmix_modex_cbfunc_t cbfunc, void *cbdata);

/* Every local process has contributed. With one server there is no one
 * else to hear from, so the fence completes with what was collected; with
 * two, the peer's blob joins it (fence_two_hosts). */
static pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo,
                              char *data, size_t ndata, pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    (void)procs;
    (void)nprocs;
    (void)info;
    (void)ninfo;
    fence_count++;
    if (job.nodes == 2) return fence_two_hosts(data, ndata, cbfunc, cbdata);
    if (cbfunc) cbfunc(PMIX_SUCCESS, data, ndata, cbdata, NULL, NULL);
    return PMIX_SUCCESS;
}

/* Direct modex (fetching one process's data on demand) is not offered:
 * Open MPI's MPI_Init fences with data collection, so every process's data
 * is already here after it. */
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

/* All of bytes through a stream socket, or -1 (the peer is gone). */
static int transfer_all(int fd, char *p, size_t bytes, int sending)
{
    while (bytes) {
        ssize_t n = sending ? write(fd, p, bytes) : read(fd, p, bytes);
        if (n <= 0) return -1;
        p += n;
        bytes -= (size_t)n;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t bytes) { return transfer_all(fd, (char *)buf, bytes, 1); }

static int read_all(int fd, void *buf, size_t bytes) { return transfer_all(fd, buf, bytes, 0); }

static int peer_send(uint32_t type, uint32_t arg, const void *data, uint64_t len)
{
    struct peer_msg_header h = {.type = type, .arg = arg, .len = len};
    pthread_mutex_lock(&job.send_lock);
    int rc = write_all(job.peer_fd, &h, sizeof(h)) || (len && write_all(job.peer_fd, data, len)) ? -1 : 0;
    pthread_mutex_unlock(&job.send_lock);
    return rc;
}

/* Two launchers: every fence sends this host's collected blob to the peer
 * and waits for the peer's (the reader thread stores it); PMIx takes the
 * concatenation of every server's contribution, in node order. */
static void fence_release(void *cbdata) { free(cbdata); }

static pmix_status_t fence_two_hosts(char *data, size_t ndata, pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    if (peer_send(PEER_MSG_FENCE, 0, data, ndata)) {
        fprintf(stderr, "pmix_server: fence: the peer launcher is gone\n");
        return PMIX_ERROR;
    }
    pthread_mutex_lock(&job.lock);
    while (!job.peer_blob_count && !job.peer_done) pthread_cond_wait(&job.blob_ready, &job.lock);
    int ok = job.peer_blob_count > 0;
    char *theirs = ok ? job.peer_blob[0] : NULL;
    uint64_t theirs_bytes = ok ? job.peer_blob_bytes[0] : 0;
    if (ok) {
        job.peer_blob_count--;
        memmove(job.peer_blob, job.peer_blob + 1, (size_t)job.peer_blob_count * sizeof(job.peer_blob[0]));
        memmove(job.peer_blob_bytes, job.peer_blob_bytes + 1,
                (size_t)job.peer_blob_count * sizeof(job.peer_blob_bytes[0]));
    }
    pthread_mutex_unlock(&job.lock);
    if (!ok) {
        fprintf(stderr, "pmix_server: fence: the peer launcher is gone\n");
        return PMIX_ERROR;
    }
    char *all = malloc(ndata + theirs_bytes + 1);
    memcpy(all + (job.node_id == 0 ? 0 : theirs_bytes), data, ndata);
    memcpy(all + (job.node_id == 0 ? ndata : 0), theirs, theirs_bytes);
    free(theirs);
    cbfunc(PMIX_SUCCESS, all, ndata + theirs_bytes, cbdata, fence_release, all);
    return PMIX_SUCCESS;
}

static void notify_lost(int rank, int by_signal);

/* The reader of the peer channel: fence blobs, lost ranks, and the end.
 * A connection that ends without DONE means the peer host is gone: every
 * rank it ran is announced lost. */
static void *peer_reader(void *arg)
{
    (void)arg;
    for (;;) {
        struct peer_msg_header h;
        if (read_all(job.peer_fd, &h, sizeof(h))) break;
        char *payload = h.len ? malloc(h.len) : NULL;
        if (h.len && read_all(job.peer_fd, payload, h.len)) {
            free(payload);
            break;
        }
        if (h.type == PEER_MSG_FENCE) {
            pthread_mutex_lock(&job.lock);
            int full = job.peer_blob_count == 8;
            if (!full) {
                job.peer_blob[job.peer_blob_count] = payload;
                job.peer_blob_bytes[job.peer_blob_count++] = h.len;
            }
            pthread_cond_broadcast(&job.blob_ready);
            pthread_mutex_unlock(&job.lock);
            if (full) {
                fprintf(stderr, "pmix_server: more than 8 fence blobs waiting from the peer\n");
                free(payload);
                break;
            }
            continue;
        }
        free(payload);
        if (h.type == PEER_MSG_LOST) notify_lost((int)h.arg, 1);
        if (h.type == PEER_MSG_DONE) {
            job.peer_done = 1;
            break;
        }
    }
    pthread_mutex_lock(&job.lock);
    int clean = job.peer_done;
    job.peer_done = 1;
    pthread_cond_broadcast(&job.blob_ready);
    pthread_mutex_unlock(&job.lock);
    if (!clean && !job.local_done) {
        int other = 1 - job.node_id;
        fprintf(stderr, "pmix_server: the peer launcher (%s) is gone: its ranks are lost\n", job.hosts[other]);
        for (int r = other * job.np; r < (other + 1) * job.np; r++) notify_lost(r, 1);
    }
    return NULL;
}

/* The job-level and per-process keys of the namespace, as Open MPI's
 * MPI_Init looks them up. */
static pmix_info_t *job_info(size_t *count)
{
    int size = job.np * job.nodes, first = job.node_id * job.np;
    char peers[8 * MAX_PROCS] = "", ppn[16 * MAX_PROCS] = "", hosts[160] = "";
    char *node_regex = NULL, *proc_regex = NULL;
    for (int r = first; r < first + job.np; r++)
        snprintf(peers + strlen(peers), sizeof(peers) - strlen(peers), "%s%d", r > first ? "," : "", r);
    for (int node = 0; node < job.nodes; node++) {
        snprintf(hosts + strlen(hosts), sizeof(hosts) - strlen(hosts), "%s%s", node ? "," : "", job.hosts[node]);
        for (int r = node * job.np; r < (node + 1) * job.np; r++)
            snprintf(ppn + strlen(ppn), sizeof(ppn) - strlen(ppn), "%s%d", r == node * job.np ? (node ? ";" : "") : ",",
                     r);
    }
    PMIx_generate_regex(hosts, &node_regex);
    PMIx_generate_ppn(ppn, &proc_regex);
    uint32_t u32 = (uint32_t)size, local_size = (uint32_t)job.np, nodes = (uint32_t)job.nodes;
    uint32_t node_id = (uint32_t)job.node_id, zero = 0;
    pmix_rank_t app_leader = 0, local_leader = (pmix_rank_t)first;
    size_t n = 0;
    pmix_info_t *info;
    PMIX_INFO_CREATE(info, 20 + (size_t)size);
    PMIX_INFO_LOAD(&info[n++], PMIX_UNIV_SIZE, &u32, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_JOB_SIZE, &u32, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_MAX_PROCS, &u32, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_LOCAL_SIZE, &local_size, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_NODE_SIZE, &local_size, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_NUM_NODES, &nodes, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_NODEID, &node_id, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_APPNUM, &zero, PMIX_UINT32);
    PMIX_INFO_LOAD(&info[n++], PMIX_APPLDR, &app_leader, PMIX_PROC_RANK);
    PMIX_INFO_LOAD(&info[n++], PMIX_LOCALLDR, &local_leader, PMIX_PROC_RANK);
    PMIX_INFO_LOAD(&info[n++], PMIX_LOCAL_PEERS, peers, PMIX_STRING);
    PMIX_INFO_LOAD(&info[n++], PMIX_NODE_MAP, node_regex, PMIX_REGEX);
    PMIX_INFO_LOAD(&info[n++], PMIX_PROC_MAP, proc_regex, PMIX_REGEX);
    PMIX_INFO_LOAD(&info[n++], PMIX_HOSTNAME, job.hosts[job.node_id], PMIX_STRING);
    PMIX_INFO_LOAD(&info[n++], PMIX_TMPDIR, "/tmp", PMIX_STRING);
    for (int r = 0; r < size; r++) {
        pmix_data_array_t *darray;
        PMIX_DATA_ARRAY_CREATE(darray, 6, PMIX_INFO);
        pmix_info_t *pi = (pmix_info_t *)darray->array;
        pmix_rank_t rank = (pmix_rank_t)r;
        uint16_t local = (uint16_t)(r % job.np);
        uint32_t its_node = (uint32_t)(r / job.np);
        PMIX_INFO_LOAD(&pi[0], PMIX_RANK, &rank, PMIX_PROC_RANK);
        PMIX_INFO_LOAD(&pi[1], PMIX_LOCAL_RANK, &local, PMIX_UINT16);
        PMIX_INFO_LOAD(&pi[2], PMIX_NODE_RANK, &local, PMIX_UINT16);
        PMIX_INFO_LOAD(&pi[3], PMIX_APPNUM, &zero, PMIX_UINT32);
        PMIX_INFO_LOAD(&pi[4], PMIX_HOSTNAME, job.hosts[its_node], PMIX_STRING);
        PMIX_INFO_LOAD(&pi[5], PMIX_NODEID, &its_node, PMIX_UINT32);
        PMIX_INFO_LOAD(&info[n++], PMIX_PROC_DATA, darray, PMIX_DATA_ARRAY);
        PMIX_DATA_ARRAY_FREE(darray);
    }
    free(node_regex);
    free(proc_regex);
    *count = n;
    return info;
}

/* --listen PORT (node 0) or --connect IP:PORT (node 1): the launchers'
 * connection; the first message is each side's host name. */
static int peer_join(const char *listen_port, const char *connect_to)
{
    struct sockaddr_in addr = {.sin_family = AF_INET};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (listen_port) {
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        addr.sin_port = htons((uint16_t)atoi(listen_port));
        if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) || listen(fd, 1)) return -1;
        int peer = accept(fd, NULL, NULL);
        close(fd);
        fd = peer;
    } else {
        char ip[64];
        snprintf(ip, sizeof(ip), "%s", connect_to);
        char *colon = strchr(ip, ':');
        if (!colon) return -1;
        *colon = 0;
        addr.sin_port = htons((uint16_t)atoi(colon + 1));
        inet_pton(AF_INET, ip, &addr.sin_addr);
        int tries = 0;
        while (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) && tries++ < 100) usleep(50000);
        if (tries > 100) return -1;
    }
    if (fd < 0) return -1;
    char theirs[64] = "";
    if (write_all(fd, job.hosts[job.node_id], sizeof(theirs)) || read_all(fd, theirs, sizeof(theirs))) return -1;
    snprintf(job.hosts[1 - job.node_id], sizeof(job.hosts[0]), "%s", theirs);
    return fd;
}

/* A process died: tell the others through PMIx, as mpirun's runtime does.
 * Open MPI 5 with ULFM (mpi_ft_enable) marks the process failed on
 * PMIX_ERR_PROC_ABORTED_BY_SIG / PMIX_ERR_PROC_TERM_WO_SYNC carrying it as
 * PMIX_EVENT_AFFECTED_PROC; without ULFM the event aborts the job. */
static void notify_lost(int rank, int by_signal)
{
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, job.nspace, (pmix_rank_t)rank);
    pmix_info_t info[1];
    PMIX_INFO_LOAD(&info[0], PMIX_EVENT_AFFECTED_PROC, &proc, PMIX_PROC);
    pmix_status_t status = PMIx_Notify_event(by_signal ? PMIX_ERR_PROC_ABORTED_BY_SIG : PMIX_ERR_PROC_TERM_WO_SYNC,
                                             &proc, PMIX_RANGE_NAMESPACE, info, 1, NULL, NULL);
    fprintf(stderr, "pmix_server: told the local ranks that rank %d is gone (%s)\n", rank, PMIx_Error_string(status));
}

int main(int argc, char **argv)
{
    const char *listen_port = NULL, *connect_to = NULL;
    int first = 1;
    for (; first < argc && !strncmp(argv[first], "--", 2); first++) {
        if (first + 1 >= argc) break;
        if (!strcmp(argv[first], "--np"))
            job.np = atoi(argv[++first]);
        else if (!strcmp(argv[first], "--listen"))
            listen_port = argv[++first];
        else if (!strcmp(argv[first], "--connect"))
            connect_to = argv[++first];
        else
            break;
    }
    if (first >= argc || !strncmp(argv[first], "--", 2) || job.np < 1 || job.np > MAX_PROCS / 2 ||
        (listen_port && connect_to)) {
        fprintf(stderr, "usage: pmix_server [--np N (1..%d)] [--listen PORT | --connect IP:PORT] PROGRAM [ARGS...]\n",
                MAX_PROCS / 2);
        return 2;
    }
    double t0 = now_s();
    signal(SIGPIPE, SIG_IGN); /* a peer launcher that is gone is an error, not a signal */
    gethostname(job.hosts[0], sizeof(job.hosts[0]));
    if (listen_port || connect_to) {
        job.nodes = 2;
        job.node_id = connect_to ? 1 : 0;
        if (job.node_id == 1) memcpy(job.hosts[1], job.hosts[0], sizeof(job.hosts[0]));
        job.peer_fd = peer_join(listen_port, connect_to);
        if (job.peer_fd < 0) {
            fprintf(stderr, "pmix_server: no connection to the peer launcher (%s)\n",
                    listen_port ? listen_port : connect_to);
            return 1;
        }
        fprintf(stderr, "pmix_server: node %d of 2 (%s, %s), ranks %d..%d of %d\n", job.node_id, job.hosts[0],
                job.hosts[1], job.node_id * job.np, (job.node_id + 1) * job.np - 1, 2 * job.np);
    }
    int np = job.np, first_rank = job.node_id * job.np;

    pmix_info_t server_info[1];
    PMIX_INFO_LOAD(&server_info[0], PMIX_SERVER_TMPDIR, "/tmp", PMIX_STRING);
    pmix_status_t status = PMIx_server_init(&server_module, server_info, 1);
    if (status != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_server: PMIx_server_init: %s\n", PMIx_Error_string(status));
        return 1;
    }

    char *nspace = job.nspace;
    /* Both launchers must name the namespace alike: the port they share. */
    snprintf(nspace, sizeof(job.nspace), "hora-probe-%s",
             listen_port  ? listen_port
             : connect_to ? strchr(connect_to, ':') + 1
                          : "local");
    size_t ninfo;
    pmix_info_t *info = job_info(&ninfo);
    /* A NULL callback makes the registration calls blocking (PMIx >= 4). */
    status = PMIx_server_register_nspace(nspace, np, info, ninfo, NULL, NULL);
    PMIX_INFO_FREE(info, ninfo);
    if (status != PMIX_SUCCESS && status != PMIX_OPERATION_SUCCEEDED) {
        fprintf(stderr, "pmix_server: PMIx_server_register_nspace: %s\n", PMIx_Error_string(status));
        PMIx_server_finalize();
        return 1;
    }

    pthread_t reader;
    if (job.nodes == 2) pthread_create(&reader, NULL, peer_reader, NULL);

    extern char **environ;
    for (int r = 0; r < np; r++) {
        pmix_proc_t proc;
        PMIX_LOAD_PROCID(&proc, nspace, (pmix_rank_t)(first_rank + r));
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
            int rank = first_rank;
            for (int c = 0; c < child_count; c++)
                if (children[c] == pid) rank = first_rank + c;
            fprintf(stderr, "pmix_server: rank %d (pid %d) ended with %s %d\n", rank, (int)pid,
                    WIFEXITED(wstatus) ? "status" : "signal",
                    WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : WTERMSIG(wstatus));
            rc = 1;
            notify_lost(rank, !WIFEXITED(wstatus));
            if (job.nodes == 2) peer_send(PEER_MSG_LOST, (uint32_t)rank, NULL, 0);
        }
    }
    job.local_done = 1;
    if (job.nodes == 2) {
        peer_send(PEER_MSG_DONE, 0, NULL, 0);
        shutdown(job.peer_fd, SHUT_WR);
        pthread_join(reader, NULL);
    }
    fprintf(stderr, "pmix_server: %d processes, %d fence(s), %.3f s from start to the last exit\n", child_count,
            fence_count, now_s() - t0);
    PMIx_server_finalize();
    return rc;
}
