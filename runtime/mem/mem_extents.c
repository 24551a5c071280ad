/* mem_extents.c - first-fit offsets with coalescing (mem_extents.h). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "mem/mem_extents.h"

static hora_status_t mem_list_insert(struct mem_extent **list, size_t *count, size_t *cap, size_t at,
                                     struct mem_extent e)
{
    if (*count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        struct mem_extent *n = realloc(*list, ncap * sizeof(*n));
        if (!n) return status_fail(HORA_ERR_NO_MEMORY, "out of memory growing the pool's block list");
        *list = n;
        *cap = ncap;
    }
    memmove(*list + at + 1, *list + at, (*count - at) * sizeof(**list));
    (*list)[at] = e;
    (*count)++;
    return HORA_OK;
}

static void mem_list_remove(struct mem_extent *list, size_t *count, size_t at)
{
    memmove(list + at, list + at + 1, (*count - at - 1) * sizeof(*list));
    (*count)--;
}

hora_status_t mem_extents_init(struct mem_extents *e, size_t offset, size_t bytes)
{
    memset(e, 0, sizeof(*e));
    return mem_list_insert(&e->free_list, &e->free_count, &e->free_cap, 0, (struct mem_extent){offset, bytes});
}

void mem_extents_free(struct mem_extents *e)
{
    free(e->free_list);
    free(e->used_list);
    memset(e, 0, sizeof(*e));
}

bool mem_extents_find(const struct mem_extents *e, size_t bytes, size_t *offset)
{
    for (size_t i = 0; i < e->free_count; i++)
        if (e->free_list[i].bytes >= bytes) {
            *offset = e->free_list[i].offset;
            return true;
        }
    return false;
}

hora_status_t mem_extents_take(struct mem_extents *e, size_t offset, size_t bytes)
{
    size_t i, at;
    for (i = 0; i < e->free_count && e->free_list[i].offset != offset; i++) {
    }
    if (i == e->free_count || e->free_list[i].bytes < bytes)
        return status_fail(HORA_ERR_INVALID_ARG, "pool: no free extent of %zu bytes at offset %zu", bytes, offset);
    for (at = 0; at < e->used_count && e->used_list[at].offset < offset; at++) {
    }
    HORA_CHECK(mem_list_insert(&e->used_list, &e->used_count, &e->used_cap, at, (struct mem_extent){offset, bytes}));
    e->free_list[i].offset += bytes;
    e->free_list[i].bytes -= bytes;
    if (e->free_list[i].bytes == 0) mem_list_remove(e->free_list, &e->free_count, i);
    return HORA_OK;
}

hora_status_t mem_extents_give(struct mem_extents *e, size_t offset, size_t *bytes)
{
    size_t i, at;
    for (i = 0; i < e->used_count && e->used_list[i].offset != offset; i++) {
    }
    if (i == e->used_count) return HORA_ERR_INVALID_ARG; /* the caller says whose block it is not */
    struct mem_extent block = e->used_list[i];
    mem_list_remove(e->used_list, &e->used_count, i);
    *bytes = block.bytes;
    for (at = 0; at < e->free_count && e->free_list[at].offset < block.offset; at++) {
    }
    HORA_CHECK(mem_list_insert(&e->free_list, &e->free_count, &e->free_cap, at, block));
    /* Coalesce with the following and the preceding extent. */
    if (at + 1 < e->free_count && e->free_list[at].offset + e->free_list[at].bytes == e->free_list[at + 1].offset) {
        e->free_list[at].bytes += e->free_list[at + 1].bytes;
        mem_list_remove(e->free_list, &e->free_count, at + 1);
    }
    if (at > 0 && e->free_list[at - 1].offset + e->free_list[at - 1].bytes == e->free_list[at].offset) {
        e->free_list[at - 1].bytes += e->free_list[at].bytes;
        mem_list_remove(e->free_list, &e->free_count, at);
    }
    return HORA_OK;
}
