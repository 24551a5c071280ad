/*
 * test_topo.c - topology under mpirun: rank/size agree with MPI, node and
 * local numbers are consistent across ranks (also with HORA_FAKE_NODES), and
 * bad settings fail hora_init on every rank with a message naming them.
 * Run: mpirun -np N test_topo [expected_nodes]   (exit 0 = all passed)
 */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hora.h"
#include "check.h"

static void expect_init_fails(const char *name, const char *value)
{
    const char *old = getenv(name);
    char *saved = old ? strdup(old) : NULL;
    setenv(name, value, 1);
    hora_status_t st = hora_init();
    CHECK(st == HORA_ERR_CONFIG, "%s=%s: hora_init returned %s", name, value, hora_status_string(st));
    CHECK(strstr(hora_last_error(), name) != NULL, "message does not name %s: %s", name, hora_last_error());
    if (st == HORA_OK) hora_shutdown();
    if (saved) {
        setenv(name, saved, 1);
        free(saved);
    } else {
        unsetenv(name);
    }
}

/* The pool is unlinked as soon as every host peer mapped it, so while the
 * runtime runs nothing of this process is left in /dev/shm to leak on a crash. */
static void check_no_shm_names(void)
{
    char prefix[64];
    DIR *dir = opendir("/dev/shm");
    struct dirent *e;
    if (!dir) return;
    snprintf(prefix, sizeof(prefix), "hora-%d-", (int)getpid());
    while ((e = readdir(dir)))
        CHECK(strncmp(e->d_name, prefix, strlen(prefix)) != 0, "/dev/shm/%s still exists after hora_init", e->d_name);
    closedir(dir);
}

int main(int argc, char **argv)
{
    int expected_nodes = argc > 1 ? atoi(argv[1]) : 1;
    int provided;

    /* The caller initialises MPI itself here; hora must accept that. */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);

    expect_init_fails("HORA_CHUNK_BYTES", "lots");
    expect_init_fails("HORA_FAKE_NODES", "999");
    CHECK(!hora_initialized(), "a failed init left the runtime initialized");

    hora_status_t st = hora_init();
    if (st != HORA_OK) {
        fprintf(stderr, "FAIL: hora_init: %s\n", hora_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    CHECK(hora_rank() == wrank && hora_size() == wsize, "rank/size differ from MPI");
    check_no_shm_names();
    CHECK(hora_node_count() == expected_nodes, "node count %d, expected %d", hora_node_count(), expected_nodes);
    CHECK(hora_local_rank() >= 0 && hora_local_rank() < hora_local_size(), "local rank in range");

    int mine[3] = {hora_node_rank(), hora_local_rank(), hora_local_size()};
    int *all = malloc(sizeof(int) * 3 * (size_t)wsize);
    MPI_Allgather(mine, 3, MPI_INT, all, 3, MPI_INT, MPI_COMM_WORLD);
    int ranks_seen = 0;
    for (int node = 0; node < hora_node_count(); node++) {
        int members = 0, size = -1, next_local = 0;
        for (int r = 0; r < wsize; r++) {
            if (all[3 * r] != node) continue;
            CHECK(all[3 * r + 1] == next_local, "node %d: local ranks not 0,1,2... in world order", node);
            next_local++;
            if (size < 0) size = all[3 * r + 2];
            CHECK(all[3 * r + 2] == size, "node %d: local sizes disagree", node);
            members++;
        }
        CHECK(members == size, "node %d has %d members, local_size says %d", node, members, size);
        ranks_seen += members;
    }
    CHECK(ranks_seen == wsize, "every rank in exactly one node");
    free(all);

    CHECK(hora_shutdown() == HORA_OK, "shutdown");
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int total_checks = 0;
    MPI_Allreduce(&checks, &total_checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("test_topo: %d ranks, %d nodes expected, %d checks, %d failures\n", wsize, expected_nodes, total_checks,
               total);
    MPI_Finalize();
    return total ? 1 : 0;
}
