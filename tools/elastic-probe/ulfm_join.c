/*
 * ulfm_join.c - after ULFM has shrunk the world (ulfm_shrink.c's recovery),
 * can a new process be taken in, and how long does it take?
 *
 * 4 ranks run MPI_Allreduce(SUM) of COUNT int64 values; every process has a
 * member id (its first MPI_COMM_WORLD rank; a newcomer takes the id it is
 * given) and contributes (id + 1) * 1000003 + iter * 131 + index, so every
 * result is checked exactly against the ids that are members. At
 * --kill-iter the member --kill-rank SIGKILLs itself; the survivors revoke,
 * shrink and agree (as in ulfm_shrink.c), then take a newcomer in with id
 * --kill-rank, by one of:
 *
 *   --mode spawn    MPI_Comm_spawn of this program (collective over the
 *                   shrunk communicator, root 0), MPI_Intercomm_merge;
 *   --mode accept   MPI_Open_port; member 0 writes the port name to
 *                   --port-file; MPI_Comm_accept, MPI_Intercomm_merge. The
 *                   newcomer is started apart (a second mpirun, or a
 *                   singleton) as `ulfm_join --connect --port-file F`.
 *
 * The newcomer receives the iteration to resume at by MPI_Bcast from the
 * survivors (standing in for the training state a live peer would send),
 * and the 4 members finish the loop. Times are printed relative to the kill
 * (CLOCK_REALTIME written to --stamp by the killed rank).
 *
 *   mpirun --with-ft ulfm -np 4 ./ulfm_join [--mode spawn|accept]
 *          [--iters N] [--count C] [--kill-rank R] [--kill-iter K]
 *          [--stamp FILE] [--port-file FILE]
 *
 * Exit 0 when every checked allreduce matched; 1 otherwise; 2 bad arguments.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_MEMBERS 64

struct join_options {
    int iters, count, kill_rank, kill_iter, connect, spawned_id;
    const char *mode, *stamp, *port_file;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double since_kill(const struct join_options *o)
{
    double t = 0;
    FILE *f = fopen(o->stamp, "r");
    if (!f) return -1;
    if (fscanf(f, "%lf", &t) != 1) t = 0;
    fclose(f);
    return t > 0 ? now_s() - t : -1;
}

static int64_t value_of(int id, int iter, int index)
{
    return (int64_t)(id + 1) * 1000003 + (int64_t)iter * 131 + index;
}

/* Every member's id, in comm's rank order. */
static int ids_of(MPI_Comm comm, int my_id, int *ids, int *count)
{
    MPI_Comm_size(comm, count);
    if (*count > MAX_MEMBERS) return MPI_ERR_OTHER;
    return MPI_Allgather(&my_id, 1, MPI_INT, ids, 1, MPI_INT, comm);
}

/* Runs iterations [iter, iters) on comm; returns MPI_SUCCESS, the failing
 * call's code (*at = the iteration), or MPI_ERR_OTHER on a wrong element. */
static int run_loop(const struct join_options *o, MPI_Comm comm, int my_id, int iter, int *at, int report)
{
    int ids[MAX_MEMBERS], n;
    int rc = ids_of(comm, my_id, ids, &n);
    if (rc != MPI_SUCCESS) return rc;
    int64_t *in = malloc((size_t)o->count * sizeof(int64_t)), *out = malloc((size_t)o->count * sizeof(int64_t));
    for (; iter < o->iters; iter++) {
        if (iter == o->kill_iter && my_id == o->kill_rank && !o->connect && o->spawned_id < 0) {
            FILE *f = fopen(o->stamp, "w");
            if (f) {
                fprintf(f, "%.9f\n", now_s());
                fclose(f);
            }
            raise(SIGKILL);
        }
        for (int j = 0; j < o->count; j++) in[j] = value_of(my_id, iter, j);
        rc = MPI_Allreduce(in, out, o->count, MPI_INT64_T, MPI_SUM, comm);
        if (rc != MPI_SUCCESS) {
            *at = iter;
            break;
        }
        int wrong = 0;
        for (int j = 0; j < o->count; j++) {
            int64_t want = 0;
            for (int m = 0; m < n; m++) want += value_of(ids[m], iter, j);
            wrong += out[j] != want;
        }
        if (wrong) {
            fprintf(stderr, "ulfm_join: id %d iter %d: %d elements wrong\n", my_id, iter, wrong);
            rc = MPI_ERR_OTHER;
            break;
        }
        if (report) {
            printf("id %d: first allreduce with %d members ok at kill + %.3f s (iter %d)\n", my_id, n, since_kill(o),
                   iter);
            fflush(stdout);
            report = 0;
        }
    }
    free(in);
    free(out);
    return rc;
}

/* The newcomer's side: merge into the survivors' communicator, learn the
 * iteration to resume at, run the rest. */
static int newcomer(const struct join_options *o, MPI_Comm inter)
{
    MPI_Comm comm;
    MPI_Intercomm_merge(inter, 1, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int resume = 0, at = 0;
    MPI_Bcast(&resume, 1, MPI_INT, 0, comm);
    int id = o->spawned_id >= 0 ? o->spawned_id : o->kill_rank;
    printf("id %d: newcomer joined at kill + %.3f s, resumes at iter %d\n", id, since_kill(o), resume);
    fflush(stdout);
    int rc = run_loop(o, comm, id, resume, &at, 0);
    int all_ok = 0, ok = rc == MPI_SUCCESS;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    MPI_Comm_free(&comm);
    return all_ok ? 0 : 1;
}

/* The survivors' side after the shrink: take a newcomer in. */
static int take_in(const struct join_options *o, MPI_Comm shrunk, char **argv, MPI_Comm *merged)
{
    int rank;
    MPI_Comm_rank(shrunk, &rank);
    MPI_Comm inter;
    double t0 = now_s();
    int rc;
    if (!strcmp(o->mode, "spawn")) {
        char id[16];
        snprintf(id, sizeof(id), "%d", o->kill_rank);
        char *child_argv[16];
        int a = 0;
        const char *flags[] = {"--iters", "--count", "--kill-iter", "--stamp"};
        char vals[4][32];
        snprintf(vals[0], sizeof(vals[0]), "%d", o->iters);
        snprintf(vals[1], sizeof(vals[1]), "%d", o->count);
        snprintf(vals[2], sizeof(vals[2]), "%d", o->kill_iter);
        for (int i = 0; i < 4; i++) {
            child_argv[a++] = (char *)flags[i];
            child_argv[a++] = i == 3 ? (char *)o->stamp : vals[i];
        }
        child_argv[a++] = "--spawned-id";
        child_argv[a++] = id;
        child_argv[a] = NULL;
        int errcode = MPI_SUCCESS;
        rc = MPI_Comm_spawn(argv[0], child_argv, 1, MPI_INFO_NULL, 0, shrunk, &inter, &errcode);
        if (rc == MPI_SUCCESS && errcode != MPI_SUCCESS) rc = errcode;
    } else {
        char port[MPI_MAX_PORT_NAME] = "";
        if (rank == 0) {
            MPI_Open_port(MPI_INFO_NULL, port);
            FILE *f = fopen(o->port_file, "w");
            if (f) {
                fprintf(f, "%s\n", port);
                fclose(f);
            }
            printf("id 0: port open, waiting for a newcomer (ulfm_join --connect --port-file %s)\n", o->port_file);
            fflush(stdout);
        }
        rc = MPI_Comm_accept(port, MPI_INFO_NULL, 0, shrunk, &inter);
    }
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "ulfm_join: %s failed: %s\n", o->mode, msg);
        return rc;
    }
    int newcomers = 0;
    MPI_Comm_remote_size(inter, &newcomers);
    if (newcomers != 1) {
        fprintf(stderr, "ulfm_join: %s returned success with %d newcomers, not 1\n", o->mode, newcomers);
        return MPI_ERR_OTHER;
    }
    double t_conn = now_s() - t0;
    t0 = now_s();
    MPI_Intercomm_merge(inter, 0, merged);
    MPI_Comm_set_errhandler(*merged, MPI_ERRORS_RETURN);
    if (rank == 0)
        printf("survivors: %s took %.3f s, merge %.3f s (at kill + %.3f s)\n", o->mode, t_conn, now_s() - t0,
               since_kill(o));
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    struct join_options o = {.iters = 20,
                             .count = 4096,
                             .kill_rank = 2,
                             .kill_iter = 5,
                             .spawned_id = -1,
                             .mode = "spawn",
                             .stamp = "/tmp/ulfm_join.stamp",
                             .port_file = "/tmp/ulfm_join.port"};
    for (int i = 1; i < argc; i++) {
        int more = i + 1 < argc;
        if (more && !strcmp(argv[i], "--iters"))
            o.iters = atoi(argv[++i]);
        else if (more && !strcmp(argv[i], "--count"))
            o.count = atoi(argv[++i]);
        else if (more && !strcmp(argv[i], "--kill-rank"))
            o.kill_rank = atoi(argv[++i]);
        else if (more && !strcmp(argv[i], "--kill-iter"))
            o.kill_iter = atoi(argv[++i]);
        else if (more && !strcmp(argv[i], "--stamp"))
            o.stamp = argv[++i];
        else if (more && !strcmp(argv[i], "--port-file"))
            o.port_file = argv[++i];
        else if (more && !strcmp(argv[i], "--mode"))
            o.mode = argv[++i];
        else if (more && !strcmp(argv[i], "--spawned-id"))
            o.spawned_id = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--connect"))
            o.connect = 1;
        else {
            fprintf(stderr, "ulfm_join: bad argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (strcmp(o.mode, "spawn") && strcmp(o.mode, "accept")) {
        fprintf(stderr, "ulfm_join: --mode must be spawn or accept, not '%s'\n", o.mode);
        return 2;
    }
    if (o.iters < 1 || o.count < 1 || o.kill_iter < 0 || o.kill_iter >= o.iters) {
        fprintf(stderr, "ulfm_join: need iters >= 1, count >= 1, 0 <= kill-iter < iters\n");
        return 2;
    }

    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        int rc = newcomer(&o, parent);
        MPI_Finalize();
        return rc;
    }
    if (o.connect) {
        char port[MPI_MAX_PORT_NAME] = "";
        double t0 = now_s();
        FILE *f = NULL;
        while (!(f = fopen(o.port_file, "r")) && now_s() - t0 < 20) usleep(10000);
        if (!f || !fgets(port, sizeof(port), f)) {
            fprintf(stderr, "ulfm_join: no port name in %s\n", o.port_file);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fclose(f);
        port[strcspn(port, "\n")] = 0;
        MPI_Comm inter;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
        if (rc != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            int len;
            MPI_Error_string(rc, msg, &len);
            fprintf(stderr, "ulfm_join: MPI_Comm_connect failed: %s\n", msg);
            MPI_Finalize();
            return 1;
        }
        rc = newcomer(&o, inter);
        MPI_Finalize();
        return rc;
    }

    int world_rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    if (world_rank == 0) {
        unlink(o.stamp);
        unlink(o.port_file);
    }
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Barrier(comm);

    int at = 0, ok = 1;
    int rc = run_loop(&o, comm, world_rank, 0, &at, 0);
    if (rc != MPI_SUCCESS && rc != MPI_ERR_OTHER) {
        MPIX_Comm_revoke(comm);
        MPI_Comm shrunk, merged;
        int flag = 1;
        rc = MPIX_Comm_shrink(comm, &shrunk);
        if (rc == MPI_SUCCESS) rc = MPIX_Comm_agree(shrunk, &flag);
        int redo = at;
        if (rc == MPI_SUCCESS) rc = MPI_Allreduce(&at, &redo, 1, MPI_INT, MPI_MIN, shrunk);
        MPI_Comm_free(&comm);
        if (rc == MPI_SUCCESS && world_rank == 0)
            printf("survivors: shrunk at kill + %.3f s, redo from iter %d\n", since_kill(&o), redo);
        if (rc == MPI_SUCCESS) rc = take_in(&o, shrunk, argv, &merged);
        if (rc == MPI_SUCCESS) {
            /* The state a live peer sends: here the iteration to resume. */
            MPI_Bcast(&redo, 1, MPI_INT, 0, merged);
            comm = merged;
            rc = run_loop(&o, comm, world_rank, redo, &at, 1);
        } else {
            comm = shrunk;
        }
    }
    ok = rc == MPI_SUCCESS;
    int all_ok = 0, n;
    MPI_Comm_size(comm, &n);
    rc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (world_rank == 0)
        printf("ulfm_join: %s: %d members at the end, %d iterations checked\n",
               rc == MPI_SUCCESS && all_ok ? "PASS" : "FAIL", n, o.iters);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return rc == MPI_SUCCESS && all_ok ? 0 : 1;
}
