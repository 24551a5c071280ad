/*
 * ulfm_shrink.c - does Open MPI 5's ULFM let the survivors of a SIGKILL
 * re-form a smaller communicator and keep going, and how long does it take?
 *
 * Every rank runs MPI_Allreduce(SUM) of COUNT int64 values on a dup of
 * MPI_COMM_WORLD with MPI_ERRORS_RETURN. Rank i's value at iteration t and
 * index j is (i + 1) * 1000003 + t * 131 + j, so every rank can compute the
 * exact sum over whichever world ranks are still members. At iteration
 * --kill-iter, each world rank in --kill-rank (one rank or a comma list, e.g.
 * both ranks of one host) writes its CLOCK_REALTIME to --stamp and SIGKILLs
 * itself. The survivors report the error class their allreduce
 * returned and when, then revoke, shrink, agree (MPIX_Comm_agree) on the
 * iteration to redo (the lowest any survivor failed at), and run the rest
 * of the loop on the shrunk communicator, checking every element. Times are
 * printed relative to the kill, from the stamp file (same kernel clock: one
 * machine, or network namespaces on it).
 *
 * --threads: MPI_THREAD_MULTIPLE, and a second thread that keeps a
 * nonblocking allreduce going on a communicator of its own (as libhora's
 * coordinator thread polls MPI_Test on its dup) until that fails too; the
 * main thread recovers as above once the second thread has stopped.
 * --kill-daemon: each killed rank first SIGKILLs its parent (under mpirun
 * across hosts, that host's prted), which is closer to losing the host.
 *
 * Two builds of this one file (tools/elastic-probe/run):
 *   - against Open MPI 5's mpi.h + mpi-ext.h (the wheel's mpicc): the MPIX_
 *     calls are linked directly;
 *   - with -DPROBE_DLSYM against Debian's Open MPI 4.1 mpi.h (as libhora is
 *     built), which has no ULFM: the MPIX_ functions are looked up with
 *     dlsym at run time and the error classes are Open MPI 5's numbers
 *     (75/76/77 in its mpi.h), run with the 5.0.11 libmpi.so.40.
 *
 *   mpirun --with-ft ulfm -np 4 ./ulfm_shrink [--iters N] [--count C]
 *          [--kill-rank R[,R...]] [--kill-iter K|-1] [--stamp FILE]
 *          [--threads] [--kill-daemon]
 *
 * Exit 0 when every checked allreduce matched and the survivors finished;
 * 1 with a message otherwise; 2 bad arguments.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>

#ifdef PROBE_DLSYM
#include <dlfcn.h>
/* Open MPI 5.0.11's mpi.h: MPI_ERR_PROC_FAILED 75, _PENDING 76, REVOKED 77. */
enum { PROBE_ERR_PROC_FAILED = 75, PROBE_ERR_PROC_FAILED_PENDING = 76, PROBE_ERR_REVOKED = 77 };
static int (*probe_comm_revoke)(MPI_Comm);
static int (*probe_comm_shrink)(MPI_Comm, MPI_Comm *);
static int (*probe_comm_agree)(MPI_Comm, int *);
static int (*probe_comm_failure_ack)(MPI_Comm);

/* Looks the ULFM entry points up in whatever libmpi the process runs with;
 * returns the name of the first one missing, NULL when all are there. */
static const char *probe_resolve(void)
{
    struct {
        const char *name;
        void **fn;
    } want[] = {{"MPIX_Comm_revoke", (void **)&probe_comm_revoke},
                {"MPIX_Comm_shrink", (void **)&probe_comm_shrink},
                {"MPIX_Comm_agree", (void **)&probe_comm_agree},
                {"MPIX_Comm_failure_ack", (void **)&probe_comm_failure_ack}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        *want[i].fn = dlsym(RTLD_DEFAULT, want[i].name);
        if (!*want[i].fn) return want[i].name;
    }
    return NULL;
}
#else
#include <mpi-ext.h>
enum {
    PROBE_ERR_PROC_FAILED = MPIX_ERR_PROC_FAILED,
    PROBE_ERR_PROC_FAILED_PENDING = MPIX_ERR_PROC_FAILED_PENDING,
    PROBE_ERR_REVOKED = MPIX_ERR_REVOKED
};
#define probe_comm_revoke MPIX_Comm_revoke
#define probe_comm_shrink MPIX_Comm_shrink
#define probe_comm_agree MPIX_Comm_agree
#define probe_comm_failure_ack MPIX_Comm_failure_ack
static const char *probe_resolve(void) { return NULL; }
#endif

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *class_name(int cls)
{
    if (cls == MPI_SUCCESS) return "MPI_SUCCESS";
    if (cls == PROBE_ERR_PROC_FAILED) return "MPIX_ERR_PROC_FAILED";
    if (cls == PROBE_ERR_PROC_FAILED_PENDING) return "MPIX_ERR_PROC_FAILED_PENDING";
    if (cls == PROBE_ERR_REVOKED) return "MPIX_ERR_REVOKED";
    return "other";
}

static int64_t value_of(int world_rank, int iter, int index)
{
    return (int64_t)(world_rank + 1) * 1000003 + (int64_t)iter * 131 + index;
}

/* The world ranks that are members of comm, in comm's rank order. */
static void members_of(MPI_Comm comm, int *world_ranks, int *count)
{
    MPI_Group world_group, group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Comm_group(comm, &group);
    MPI_Group_size(group, count);
    int ranks[256];
    for (int i = 0; i < *count; i++) ranks[i] = i;
    MPI_Group_translate_ranks(group, *count, ranks, world_group, world_ranks);
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
}

/* Fails (returns the number of wrong elements) unless out is the exact sum
 * of every member's values at iter. */
static int check_sum(const int64_t *out, int count, int iter, const int *members, int member_count)
{
    int wrong = 0;
    for (int j = 0; j < count; j++) {
        int64_t want = 0;
        for (int m = 0; m < member_count; m++) want += value_of(members[m], iter, j);
        if (out[j] != want && !wrong++)
            fprintf(stderr, "ulfm_shrink: iter %d element %d: got %lld, want %lld (the members' sum)\n", iter, j,
                    (long long)out[j], (long long)want);
    }
    return wrong;
}

/* --threads: the second thread's loop, on its own communicator. */
struct side_loop {
    MPI_Comm comm;
    volatile int stop;
    int rounds, failed_class;
};

static void *side_loop_run(void *arg)
{
    struct side_loop *side = arg;
    int64_t in = 1, out = 0;
    while (!side->stop) {
        MPI_Request req;
        int rc = MPI_Iallreduce(&in, &out, 1, MPI_INT64_T, MPI_SUM, side->comm, &req), done = 0;
        while (rc == MPI_SUCCESS && !done) {
            rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            if (!done) usleep(100);
        }
        if (rc != MPI_SUCCESS) {
            MPI_Error_class(rc, &side->failed_class);
            break;
        }
        side->rounds++;
    }
    return NULL;
}

static double read_stamp(const char *path)
{
    double t = 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    if (fscanf(f, "%lf", &t) != 1) t = 0;
    fclose(f);
    return t;
}

int main(int argc, char **argv)
{
    int iters = 20, count = 4096, kill_iter = 5, threads = 0, kill_daemon = 0;
    const char *kill_list = "2";
    const char *stamp = "/tmp/ulfm_shrink.stamp";
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--iters"))
            iters = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--count"))
            count = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--kill-rank"))
            kill_list = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--kill-iter"))
            kill_iter = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--stamp"))
            stamp = argv[++i];
        else if (!strcmp(argv[i], "--threads"))
            threads = 1;
        else if (!strcmp(argv[i], "--kill-daemon"))
            kill_daemon = 1;
        else {
            fprintf(stderr, "ulfm_shrink: bad argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (iters < 1 || count < 1 || kill_iter < -1 || kill_iter >= iters) {
        fprintf(stderr, "ulfm_shrink: need iters >= 1, count >= 1, -1 <= kill-iter < iters (-1: no kill)\n");
        return 2;
    }

    int provided = MPI_THREAD_SINGLE;
    if (threads)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else
        MPI_Init(&argc, &argv);
    int world_rank, world_size;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    const char *missing = probe_resolve();
    if (missing) {
        fprintf(stderr, "ulfm_shrink: rank %d: %s not found in the MPI library this process runs with\n", world_rank,
                missing);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int killed_here = 0, kill_count = 0;
    for (const char *p = kill_list; *p;) {
        char *end;
        long r = strtol(p, &end, 10);
        if (end == p || r < 0 || r >= world_size || (*end && *end != ',')) {
            kill_count = -1;
            break;
        }
        killed_here |= r == world_rank;
        kill_count++;
        p = *end ? end + 1 : end;
    }
    if (world_size > 256 || kill_count < 1 || kill_count >= world_size) {
        if (world_rank == 0)
            fprintf(stderr,
                    "ulfm_shrink: need world size <= 256 and --kill-rank a list of ranks < size, not all "
                    "(got '%s')\n",
                    kill_list);
        MPI_Finalize();
        return 2;
    }
    if (world_rank == 0) unlink(stamp);

    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int members[256], member_count;
    members_of(comm, members, &member_count);
    MPI_Barrier(comm);

    /* --threads: the second thread and its communicator. It ends when its
     * communicator is revoked: by the main thread at the first failure, or
     * at the end (a revoke is how every rank's thread leaves together). */
    struct side_loop side = {.comm = MPI_COMM_NULL};
    pthread_t side_thread;
    if (threads) {
        if (provided != MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "ulfm_shrink: rank %d: MPI_THREAD_MULTIPLE not provided (%d)\n", world_rank, provided);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Comm_dup(MPI_COMM_WORLD, &side.comm);
        MPI_Comm_set_errhandler(side.comm, MPI_ERRORS_RETURN);
        pthread_create(&side_thread, NULL, side_loop_run, &side);
    }

    int64_t *in = malloc((size_t)count * sizeof(int64_t));
    int64_t *out = malloc((size_t)count * sizeof(int64_t));
    int failures_seen = 0, ok = 1;
    double t_fail = 0, t_loop = now_s();
    for (int iter = 0; iter < iters;) {
        if (iter == kill_iter && killed_here) {
            FILE *f = fopen(stamp, "w");
            if (f) {
                fprintf(f, "%.9f\n", now_s());
                fclose(f);
            }
            if (kill_daemon) kill(getppid(), SIGKILL);
            raise(SIGKILL);
        }
        for (int j = 0; j < count; j++) in[j] = value_of(world_rank, iter, j);
        int rc = MPI_Allreduce(in, out, count, MPI_INT64_T, MPI_SUM, comm);
        if (rc == MPI_SUCCESS) {
            int wrong = check_sum(out, count, iter, members, member_count);
            if (wrong) {
                fprintf(stderr, "ulfm_shrink: rank %d iter %d: %d of %d elements wrong\n", world_rank, iter, wrong,
                        count);
                ok = 0;
            }
            if (failures_seen && t_fail > 0) {
                double t_kill = read_stamp(stamp);
                printf("rank %d: first allreduce on the %d-rank communicator ok at kill + %.3f s (iter %d)\n",
                       world_rank, member_count, now_s() - t_kill, iter);
                t_fail = 0;
            }
            iter++;
            continue;
        }

        /* The failure: what the survivor saw, and when. */
        double t_seen = now_s();
        int cls;
        MPI_Error_class(rc, &cls);
        double t_kill = read_stamp(stamp);
        printf("rank %d: iter %d allreduce returned %s (class %d) at kill + %.3f s\n", world_rank, iter,
               class_name(cls), cls, t_kill > 0 ? t_seen - t_kill : -1.0);
        if (cls != PROBE_ERR_PROC_FAILED && cls != PROBE_ERR_PROC_FAILED_PENDING && cls != PROBE_ERR_REVOKED) {
            fprintf(stderr, "ulfm_shrink: rank %d: not a process-failure class, giving up\n", world_rank);
            ok = 0;
            break;
        }
        failures_seen++;
        t_fail = t_seen;

        /* Revoke so every survivor leaves comm, even one that was not
         * waiting on the dead rank; then shrink to the survivors. */
        probe_comm_revoke(comm);
        if (threads && side.comm != MPI_COMM_NULL) {
            side.stop = 1;
            probe_comm_revoke(side.comm);
            pthread_join(side_thread, NULL);
            printf("rank %d: second thread stopped after %d rounds with %s at kill + %.3f s\n", world_rank, side.rounds,
                   class_name(side.failed_class), now_s() - read_stamp(stamp));
            MPI_Comm_free(&side.comm);
        }
        MPI_Comm shrunk;
        double t0 = now_s();
        rc = probe_comm_shrink(comm, &shrunk);
        double t_shrink = now_s() - t0;
        if (rc != MPI_SUCCESS) {
            fprintf(stderr, "ulfm_shrink: rank %d: MPIX_Comm_shrink failed (%d)\n", world_rank, rc);
            ok = 0;
            break;
        }
        MPI_Comm_free(&comm);
        comm = shrunk;
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        members_of(comm, members, &member_count);

        /* MPIX_Comm_agree (a fault-tolerant AND of a flag) confirms that
         * every member of the shrunk communicator got this far; then all
         * redo the lowest iteration any of them failed at (a rank may fail
         * one collective later than another). */
        int flag = 1;
        t0 = now_s();
        rc = probe_comm_agree(comm, &flag);
        double t_agree = now_s() - t0;
        int redo = iter;
        if (rc == MPI_SUCCESS) rc = MPI_Allreduce(&iter, &redo, 1, MPI_INT, MPI_MIN, comm);
        if (rc != MPI_SUCCESS || flag != 1) {
            fprintf(stderr, "ulfm_shrink: rank %d: agree/min after shrink failed (rc %d flag %d)\n", world_rank, rc,
                    flag);
            ok = 0;
            break;
        }
        int new_rank;
        MPI_Comm_rank(comm, &new_rank);
        printf("rank %d: shrink %.3f s, agree %.3f s -> rank %d of %d, redo from iter %d (members:", world_rank,
               t_shrink, t_agree, new_rank, member_count, redo);
        for (int m = 0; m < member_count; m++) printf(" %d", members[m]);
        printf(")\n");
        fflush(stdout);
        iter = redo;
    }

    if (threads && side.comm != MPI_COMM_NULL) {
        side.stop = 1;
        probe_comm_revoke(side.comm);
        pthread_join(side_thread, NULL);
        MPI_Comm_free(&side.comm);
    }

    t_loop = now_s() - t_loop;

    /* Every survivor's verdict, on the final communicator. */
    int all_ok = 0;
    int rc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (world_rank == members[0])
        printf("ulfm_shrink: %s: %d survivors, %d iterations checked, %d failure(s) seen, %.1f us per iteration\n",
               rc == MPI_SUCCESS && all_ok ? "PASS" : "FAIL", member_count, iters, failures_seen, 1e6 * t_loop / iters);
    free(in);
    free(out);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return rc == MPI_SUCCESS && all_ok ? 0 : 1;
}
