/* api_timeline.c - the dynamic timeline (hora.h): hora_timeline_start,
 * hora_timeline_stop and hora_timeline_mark_cycles. Each coordinator of
 * this rank (the world's, and those of the process sets it belongs to)
 * writes its own file on its rank 0; this file opens the new files, hands
 * them to the coordinators, which take them between two cycles
 * (coord_timeline_swap), and remembers the path for the sets created later.
 * Every call holds hora_rt.timeline_lock, which also keeps the list of sets
 * still (api_sets.c takes it to create or free one). */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "base/status.h"
#include "hora.h"

/* The coordinators of this rank: the world's first, then its sets'. With
 * timeline_lock held, the list stays valid until it is unlocked. Returns
 * it (the caller frees it), or NULL when out of memory. */
static struct coord **api_timeline_coords(size_t *count)
{
    pthread_mutex_lock(&hora_rt.sets_lock);
    struct coord **list = malloc(sizeof(*list) * (size_t)(hora_rt.set_slots + 1));
    size_t n = 0;
    if (list) {
        list[n++] = hora_rt.coord;
        for (int id = 1; id < hora_rt.set_slots; id++)
            if (hora_rt.sets[id] && hora_rt.sets[id]->coord) list[n++] = hora_rt.sets[id]->coord;
    }
    pthread_mutex_unlock(&hora_rt.sets_lock);
    *count = n;
    return list;
}

/* The common checks; on HORA_OK timeline_lock is held and *coords listed. */
static hora_status_t api_timeline_begin(const char *what, struct coord ***coords, size_t *count)
{
    HORA_CHECK(api_check_initialized(what));
    if (hora_rt.aborted)
        return status_set(HORA_ERR_SHUTDOWN, "%s: the runtime ended in an abort (hora_abort, or a peer's)", what);
    pthread_mutex_lock(&hora_rt.timeline_lock);
    *coords = api_timeline_coords(count);
    if (!*coords) {
        pthread_mutex_unlock(&hora_rt.timeline_lock);
        return status_fail(HORA_ERR_NO_MEMORY, "%s: out of memory", what);
    }
    return HORA_OK;
}

static void api_timeline_end(struct coord **coords)
{
    free(coords);
    pthread_mutex_unlock(&hora_rt.timeline_lock);
}

/* Every coordinator stops writing; each file is complete on return. */
static void api_timeline_stop_all(struct coord **coords, size_t count)
{
    for (size_t i = 0; i < count; i++) coord_timeline_swap(coords[i], NULL);
    hora_rt.timeline[0] = '\0';
}

hora_status_t hora_timeline_start(const char *path)
{
    if (!path || !*path) return status_set(HORA_ERR_INVALID_ARG, "hora_timeline_start: no path given");
    if (strlen(path) >= sizeof(hora_rt.timeline))
        return status_set(HORA_ERR_INVALID_ARG, "hora_timeline_start: the path is longer than %zu bytes: %.64s...",
                          sizeof(hora_rt.timeline) - 1, path);
    struct coord **coords;
    size_t count;
    HORA_CHECK(api_timeline_begin("hora_timeline_start", &coords, &count));
    /* The running files first: path may name one of them, and opening it
     * again truncates it under its writer. */
    api_timeline_stop_all(coords, count);
    struct timeline **next = calloc(count, sizeof(*next));
    hora_status_t status = next ? HORA_OK : status_fail(HORA_ERR_NO_MEMORY, "hora_timeline_start: out of memory");
    for (size_t i = 0; status == HORA_OK && i < count; i++) status = coord_timeline_open(coords[i], path, &next[i]);
    if (status == HORA_OK) {
        for (size_t i = 0; i < count; i++) coord_timeline_swap(coords[i], next[i]);
        strcpy(hora_rt.timeline, path); /* fits: checked above */
    } else {
        for (size_t i = 0; next && i < count; i++) coord_timeline_discard(next[i]);
    }
    free(next);
    api_timeline_end(coords);
    return status;
}

hora_status_t hora_timeline_stop(void)
{
    struct coord **coords;
    size_t count;
    HORA_CHECK(api_timeline_begin("hora_timeline_stop", &coords, &count));
    api_timeline_stop_all(coords, count);
    api_timeline_end(coords);
    return HORA_OK;
}

hora_status_t hora_timeline_mark_cycles(int on)
{
    struct coord **coords;
    size_t count;
    HORA_CHECK(api_timeline_begin("hora_timeline_mark_cycles", &coords, &count));
    for (size_t i = 0; i < count; i++) coord_timeline_mark_cycles(coords[i], on != 0);
    hora_rt.timeline_mark_cycles = on != 0;
    api_timeline_end(coords);
    return HORA_OK;
}
