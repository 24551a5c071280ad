/* api_sets.c - process sets (hora.h): creation and release, collective over
 * the world; the table every rank keeps of them; the coordinator a request
 * of a set goes to. A set's members get a communicator (MPI_Comm_create
 * over the world) and a coordinator of their own on it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "base/log.h"
#include "base/status.h"
#include "hora.h"

static struct api_set *api_set_get_locked(int set)
{
    return set > 0 && set < hora_rt.set_slots ? hora_rt.sets[set] : NULL;
}

hora_status_t api_set_coord(int set, const char *what, const char *name, struct coord **coord, int *size, int *rank)
{
    if (set == HORA_PROCESS_SET_WORLD) {
        *coord = hora_rt.coord;
        *size = hora_rt.topo.size;
        *rank = hora_rt.topo.rank;
        return HORA_OK;
    }
    pthread_mutex_lock(&hora_rt.sets_lock);
    const struct api_set *s = api_set_get_locked(set);
    hora_status_t status = HORA_OK;
    if (!s) {
        status = status_fail(HORA_ERR_INVALID_ARG,
                             "%s('%s'): process set %d does not exist (created with "
                             "hora_process_set_create and not freed)",
                             what, name, set);
    } else if (s->rank < 0) {
        char list[256];
        size_t used = 0;
        for (int q = 0; q < s->size && used < sizeof(list) - 16; q++)
            used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%d", q ? "," : "", s->members[q]);
        status = status_fail(HORA_ERR_INVALID_ARG, "%s('%s'): rank %d is not a member of process set %d (ranks %s)",
                             what, name, hora_rt.topo.rank, set, list);
    } else {
        *coord = s->coord;
        *size = s->size;
        *rank = s->rank;
    }
    pthread_mutex_unlock(&hora_rt.sets_lock);
    return status;
}

struct coord *api_request_coord(const struct hora_request *req)
{
    if (req->set == HORA_PROCESS_SET_WORLD) return hora_rt.coord;
    pthread_mutex_lock(&hora_rt.sets_lock);
    const struct api_set *s = api_set_get_locked(req->set);
    struct coord *c = s ? s->coord : NULL;
    pthread_mutex_unlock(&hora_rt.sets_lock);
    return c;
}

int api_set_place(int set, int world_rank)
{
    if (set == HORA_PROCESS_SET_WORLD) return world_rank >= 0 && world_rank < hora_rt.topo.size ? world_rank : -1;
    pthread_mutex_lock(&hora_rt.sets_lock);
    const struct api_set *s = api_set_get_locked(set);
    int place = -1;
    for (int q = 0; s && q < s->size && place < 0; q++)
        if (s->members[q] == world_rank) place = q;
    pthread_mutex_unlock(&hora_rt.sets_lock);
    return place;
}

static int api_int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void api_set_release(struct api_set *s)
{
    if (!s) return;
    /* After an abort (here or on a peer) the communicator is left alone:
     * freeing it may wait for ranks that are gone. */
    if (s->comm != MPI_COMM_NULL && coll_check_abort(&hora_rt.coll) == HORA_OK) MPI_Comm_free(&s->comm);
    free(s->members);
    free(s);
}

hora_status_t hora_process_set_create(const int *ranks, int count, int *set)
{
    const int world = hora_rt.topo.size;
    HORA_CHECK(api_check_initialized("hora_process_set_create"));
    /* Every rank refuses alike: the bootstrap is the same everywhere. */
    if (hora_rt.store)
        return status_fail(HORA_ERR_UNSUPPORTED, "hora_process_set_create: process sets run over MPI, which a job "
                                                 "started by hora-run does not have (start it with mpirun)");
    if (!set || (!ranks && count) || count < 0)
        return status_fail(HORA_ERR_INVALID_ARG, "hora_process_set_create: bad arguments");
    /* Checked locally first, then agreed: every rank must pass the same
     * list (the same members in any order), or every rank fails. */
    int *sorted = malloc(sizeof(int) * (size_t)(count ? count : 1));
    if (!sorted) return status_fail(HORA_ERR_NO_MEMORY, "hora_process_set_create: out of memory");
    if (count) memcpy(sorted, ranks, sizeof(int) * (size_t)count);
    qsort(sorted, (size_t)count, sizeof(int), api_int_cmp);
    char bad[160] = "";
    if (count == 0) snprintf(bad, sizeof(bad), "an empty process set");
    for (int q = 0; q < count && !bad[0]; q++) {
        if (sorted[q] < 0 || sorted[q] >= world)
            snprintf(bad, sizeof(bad), "rank %d is not a rank of the job (0..%d)", sorted[q], world - 1);
        else if (q && sorted[q] == sorted[q - 1])
            snprintf(bad, sizeof(bad), "rank %d is listed twice", sorted[q]);
    }
    /* Agreement: a hash of the sorted list and its length, min and max
     * over the ranks, and whether any rank found the list bad. */
    uint64_t h = 1469598103934665603ull ^ (uint64_t)count;
    for (int q = 0; q < count; q++) h = (h ^ (uint64_t)(uint32_t)sorted[q]) * 1099511628211ull;
    long long mine[3] = {(long long)(h >> 1), -(long long)(h >> 1), bad[0] ? 1 : 0}, all[3];
    int err = MPI_Allreduce(mine, all, 3, MPI_LONG_LONG, MPI_MAX, hora_rt.world);
    if (err != MPI_SUCCESS) {
        free(sorted);
        return status_mpi(err, "hora_process_set_create: MPI_Allreduce");
    }
    if (bad[0] || all[2]) {
        free(sorted);
        return status_fail(HORA_ERR_INVALID_ARG, "hora_process_set_create: %s",
                           bad[0] ? bad : "another rank passed a bad list of ranks");
    }
    if (all[0] != -all[1]) {
        int lowest = sorted[0];
        free(sorted);
        return status_fail(HORA_ERR_MISMATCH,
                           "hora_process_set_create: the ranks passed different lists of members (rank %d: %d "
                           "ranks from %d)",
                           hora_rt.topo.rank, count, lowest);
    }

    struct api_set *s = calloc(1, sizeof(*s));
    if (!s) {
        free(sorted);
        return status_fail(HORA_ERR_NO_MEMORY, "hora_process_set_create: out of memory");
    }
    s->members = sorted;
    s->size = count;
    s->rank = -1;
    s->comm = MPI_COMM_NULL;
    for (int q = 0; q < count; q++)
        if (sorted[q] == hora_rt.topo.rank) s->rank = q;
    /* Collective over the world: MPI_COMM_NULL outside the set. */
    MPI_Group world_group, group;
    MPI_Comm_group(hora_rt.world, &world_group);
    MPI_Group_incl(world_group, count, sorted, &group);
    err = MPI_Comm_create(hora_rt.world, group, &s->comm);
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    hora_status_t status = err == MPI_SUCCESS ? HORA_OK : status_mpi(err, "hora_process_set_create: MPI_Comm_create");

    pthread_mutex_lock(&hora_rt.sets_lock);
    /* Ids count up from 1 on every rank alike: one per creation. */
    int id = hora_rt.set_slots ? hora_rt.set_slots : 1;
    struct api_set **slots = status == HORA_OK ? realloc(hora_rt.sets, sizeof(*slots) * (size_t)(id + 1)) : NULL;
    if (status == HORA_OK && !slots) status = status_fail(HORA_ERR_NO_MEMORY, "hora_process_set_create: out of memory");
    if (slots) {
        hora_rt.sets = slots;
        for (int k = hora_rt.set_slots; k <= id; k++) slots[k] = NULL;
        hora_rt.set_slots = id + 1;
    }
    pthread_mutex_unlock(&hora_rt.sets_lock);
    s->id = id;
    /* The members start its coordinator (collective over the set), with
     * the timeline of the moment: timeline_lock until the set is listed, so
     * that a hora_timeline_start/stop on another thread sees it. */
    pthread_mutex_lock(&hora_rt.timeline_lock);
    if (status == HORA_OK && s->rank >= 0) {
        const struct coord_env env = {.world = s->comm,
                                      .cfg = &hora_rt.cfg,
                                      .coll = &hora_rt.coll,
                                      .pool = &hora_rt.pool,
                                      .dev = &hora_rt.dev,
                                      .members = s->members,
                                      .set_id = id,
                                      .timeline = hora_rt.timeline,
                                      .timeline_mark_cycles = hora_rt.timeline_mark_cycles};
        status = coord_start(&env, &s->coord);
    }
    if (status < 0) {
        pthread_mutex_unlock(&hora_rt.timeline_lock);
        /* The id stays taken (ids never repeat); the set does not exist. */
        api_set_release(s);
        return status;
    }
    pthread_mutex_lock(&hora_rt.sets_lock);
    hora_rt.sets[id] = s;
    pthread_mutex_unlock(&hora_rt.sets_lock);
    pthread_mutex_unlock(&hora_rt.timeline_lock);
    log_info("process set %d: %d ranks (this rank %d)", id, count, s->rank);
    *set = id;
    return HORA_OK;
}

/* Stop a set's coordinator (its pending requests fail) and drop it; under
 * timeline_lock, so that hora_timeline_start/stop never swap the timeline
 * of a coordinator that is going away. */
static void api_set_stop(int id)
{
    pthread_mutex_lock(&hora_rt.timeline_lock);
    pthread_mutex_lock(&hora_rt.sets_lock);
    struct api_set *s = api_set_get_locked(id);
    if (s) hora_rt.sets[id] = NULL;
    pthread_mutex_unlock(&hora_rt.sets_lock);
    if (s) {
        coord_stop(s->coord);
        api_set_release(s);
    }
    pthread_mutex_unlock(&hora_rt.timeline_lock);
}

hora_status_t hora_process_set_free(int set)
{
    HORA_CHECK(api_check_initialized("hora_process_set_free"));
    if (set == HORA_PROCESS_SET_WORLD)
        return status_fail(HORA_ERR_INVALID_ARG, "hora_process_set_free: the world (set 0) cannot be freed");
    pthread_mutex_lock(&hora_rt.sets_lock);
    int known = api_set_get_locked(set) != NULL;
    pthread_mutex_unlock(&hora_rt.sets_lock);
    if (!known) return status_fail(HORA_ERR_INVALID_ARG, "hora_process_set_free: process set %d does not exist", set);
    api_set_stop(set);
    return HORA_OK;
}

hora_status_t hora_process_set_info(int set, int *size, int *rank_in_set, int *ranks, int max)
{
    HORA_CHECK(api_check_initialized("hora_process_set_info"));
    if (set == HORA_PROCESS_SET_WORLD) {
        if (size) *size = hora_rt.topo.size;
        if (rank_in_set) *rank_in_set = hora_rt.topo.rank;
        for (int q = 0; ranks && q < max && q < hora_rt.topo.size; q++) ranks[q] = q;
        return HORA_OK;
    }
    pthread_mutex_lock(&hora_rt.sets_lock);
    const struct api_set *s = api_set_get_locked(set);
    if (s) {
        if (size) *size = s->size;
        if (rank_in_set) *rank_in_set = s->rank;
        for (int q = 0; ranks && q < max && q < s->size; q++) ranks[q] = s->members[q];
    }
    pthread_mutex_unlock(&hora_rt.sets_lock);
    if (!s) return status_fail(HORA_ERR_INVALID_ARG, "hora_process_set_info: process set %d does not exist", set);
    return HORA_OK;
}

hora_status_t api_sets_create_static(const char *spec)
{
    /* "0,1;2,3": sets separated by ';', ranks by ','. */
    int ranks[4096];
    const char *p = spec;
    while (p && *p) {
        int count = 0;
        char *end;
        while (*p && *p != ';') {
            long v = strtol(p, &end, 10);
            if (end == p || count == (int)(sizeof(ranks) / sizeof(ranks[0])))
                return status_fail(HORA_ERR_CONFIG, "HORA_PROCESS_SETS='%s': expected rank lists like 0,1;2,3", spec);
            ranks[count++] = (int)v;
            p = end;
            if (*p == ',') p++;
        }
        int id;
        hora_status_t status = hora_process_set_create(ranks, count, &id);
        if (status < 0) {
            char why[512];
            snprintf(why, sizeof(why), "%s", hora_last_error()); /* status_fail writes where it points */
            return status_fail(status == HORA_ERR_INVALID_ARG ? HORA_ERR_CONFIG : status, "HORA_PROCESS_SETS='%s': %s",
                               spec, why);
        }
        if (*p == ';') p++;
    }
    return HORA_OK;
}

void api_sets_stop_all(void)
{
    /* In id order on every rank: each stop needs the set's members. */
    for (int id = 1; id < hora_rt.set_slots; id++) api_set_stop(id);
    free(hora_rt.sets);
    hora_rt.sets = NULL;
    hora_rt.set_slots = 0;
}

void api_sets_abort_all(double wait_s)
{
    pthread_mutex_lock(&hora_rt.sets_lock);
    for (int id = 1; id < hora_rt.set_slots; id++)
        if (hora_rt.sets[id]) coord_abort(hora_rt.sets[id]->coord, wait_s);
    pthread_mutex_unlock(&hora_rt.sets_lock);
}
