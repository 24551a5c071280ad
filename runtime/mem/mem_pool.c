/* mem.c - the shared pool: creation, peer mapping, and a first-fit allocator
 * over page-aligned extents (allocations are few and large: gradient arenas,
 * fusion and staging buffers, so a sorted array is plenty). */
#define _GNU_SOURCE
#include "mem/mem_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/status.h"

#define MEM_PAGE ((size_t)4096)
#define MEM_NAME_BYTES 64

static size_t mem_round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

const char *mem_format_bytes(size_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%zu B", bytes);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

/* Free and total bytes of the file system behind /dev/shm (0, 0 if unknown). */
static void mem_shm_space(size_t *free_bytes, size_t *total_bytes)
{
    struct statvfs v;
    *free_bytes = *total_bytes = 0;
    if (statvfs("/dev/shm", &v) == 0) {
        *free_bytes = (size_t)v.f_bavail * (size_t)v.f_frsize;
        *total_bytes = (size_t)v.f_blocks * (size_t)v.f_frsize;
    }
}

/* What to do about a full /dev/shm, for messages. */
static const char *const mem_shm_advice =
    "enlarge /dev/shm (mount -o remount,size=<bytes> /dev/shm; in a container docker run --shm-size=<bytes>)";

hora_status_t mem_pool_check_space(const struct topo *topo, boot_comm_t *world, size_t per_rank_bytes, const char *why)
{
    size_t free_bytes, total_bytes;
    mem_shm_space(&free_bytes, &total_bytes);
    const size_t need = per_rank_bytes * (size_t)topo->host_size;
    /* Unknown (no statvfs): let the allocations report it. The first rank
     * whose host lacks the space (size: none) is named. */
    struct {
        int ok, rank;
    } mine = {total_bytes == 0 || need <= free_bytes, topo->rank}, all;
    int first = mine.ok ? topo->size : topo->rank;
    HORA_CHECK(boot_comm_allreduce_int(world, &first, &all.rank, 1, BOOT_OP_MIN, "/dev/shm space"));
    all.ok = all.rank == topo->size;
    if (all.ok) return HORA_OK;
    char host[256] = "?", f[32], t[32], n[32], each[32];
    gethostname(host, sizeof(host) - 1);
    if (!mine.ok)
        return status_fail(HORA_ERR_NO_MEMORY,
                           "hora_init: /dev/shm on host %s has %s free (of %s), but its %d ranks need %s of it: "
                           "each rank's pool commits %s (%s). Either %s, or lower those settings",
                           host, mem_format_bytes(free_bytes, f, sizeof(f)),
                           mem_format_bytes(total_bytes, t, sizeof(t)), topo->host_size,
                           mem_format_bytes(need, n, sizeof(n)), mem_format_bytes(per_rank_bytes, each, sizeof(each)),
                           why, mem_shm_advice);
    return status_fail(HORA_ERR_NO_MEMORY,
                       "hora_init: /dev/shm is too small on the host of rank %d (its message says how much it needs: "
                       "%s, or lower HORA_FUSION_THRESHOLD / HORA_SHM_POOL_BYTES)",
                       all.rank, mem_shm_advice);
}

static hora_status_t mem_pool_create(struct mem_pool *pool, const struct topo *topo, char *name)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* Unique per job and rank, never derived from the hostname: ranks in
     * different network namespaces share /dev/shm and the hostname. */
    snprintf(name, MEM_NAME_BYTES, "/hora-%d-%d-%lx", (int)getpid(), topo->rank,
             (unsigned long)(ts.tv_nsec ^ ((unsigned long)ts.tv_sec << 20)));
    pool->fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (pool->fd < 0) return status_fail(HORA_ERR_SYSTEM, "shm_open(%s) failed: %s", name, strerror(errno));
    if (ftruncate(pool->fd, (off_t)pool->bytes) != 0) {
        int e = errno;
        shm_unlink(name);
        close(pool->fd);
        return status_fail(HORA_ERR_SYSTEM, "ftruncate of the %zu-byte pool %s failed: %s (lower HORA_SHM_POOL_BYTES)",
                           pool->bytes, name, strerror(e));
    }
    pool->base = mmap(NULL, pool->bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, pool->fd, 0);
    if (pool->base == MAP_FAILED) {
        int e = errno;
        shm_unlink(name);
        close(pool->fd);
        return status_fail(HORA_ERR_SYSTEM, "mmap of the %zu-byte pool failed: %s (lower HORA_SHM_POOL_BYTES)",
                           pool->bytes, strerror(e));
    }
    int e = posix_fallocate(pool->fd, 0, (off_t)MEM_POOL_CTRL_BYTES);
    if (e) {
        munmap(pool->base, pool->bytes);
        shm_unlink(name);
        close(pool->fd);
        return status_fail(HORA_ERR_NO_MEMORY, "cannot commit the pool's control block in /dev/shm: %s", strerror(e));
    }
    return HORA_OK;
}

/* Map every host peer's pool, then unlink our own name once all have mapped. */
static hora_status_t mem_pool_map_peers(struct mem_pool *pool, const struct topo *topo, const char *name)
{
    struct {
        char name[MEM_NAME_BYTES];
        uint64_t bytes;
    } mine, *all;
    hora_status_t status = HORA_OK;

    all = calloc((size_t)pool->peer_count, sizeof(*all));
    if (!all) return status_fail(HORA_ERR_NO_MEMORY, "out of memory mapping peers");
    memset(&mine, 0, sizeof(mine));
    snprintf(mine.name, sizeof(mine.name), "%s", name);
    mine.bytes = pool->bytes;
    status = boot_comm_allgather(topo->host_comm, &mine, sizeof(mine), all, "pool names");
    if (status != HORA_OK) goto out;
    for (int p = 0; p < pool->peer_count && status == HORA_OK; p++) {
        if (p == pool->self) continue;
        int fd = shm_open(all[p].name, O_RDWR, 0);
        if (fd < 0) {
            status =
                status_fail(HORA_ERR_SYSTEM, "cannot open host peer %d's pool %s: %s", p, all[p].name, strerror(errno));
            break;
        }
        void *m = mmap(NULL, all[p].bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        close(fd);
        if (m == MAP_FAILED) {
            status = status_fail(HORA_ERR_SYSTEM, "cannot map host peer %d's pool: %s", p, strerror(errno));
            break;
        }
        pool->peer_base[p] = m;
        pool->peer_bytes[p] = all[p].bytes;
    }
out:
    /* Everyone must have opened every name (or failed) before any is unlinked. */
    hora_status_t barrier = boot_comm_barrier(topo->host_comm, "pool");
    shm_unlink(name);
    if (barrier != HORA_OK && status == HORA_OK) status = barrier;
    free(all);
    return status;
}

hora_status_t mem_pool_init(struct mem_pool *pool, const struct topo *topo, size_t bytes, bool share)
{
    char name[MEM_NAME_BYTES];
    hora_status_t status;

    memset(pool, 0, sizeof(*pool));
    pool->bytes = mem_round_up(bytes, MEM_PAGE);
    pool->peer_count = share ? topo->host_size : 1;
    pool->self = share ? topo->host_rank : 0;
    pool->peer_base = calloc((size_t)pool->peer_count, sizeof(*pool->peer_base));
    pool->peer_bytes = calloc((size_t)pool->peer_count, sizeof(*pool->peer_bytes));
    if (!pool->peer_base || !pool->peer_bytes) {
        status = status_fail(HORA_ERR_NO_MEMORY, "out of memory creating the pool");
        goto err_free_arrays;
    }
    pthread_mutex_init(&pool->lock, NULL);
    status = mem_pool_create(pool, topo, name);
    if (status < 0) goto err_free_arrays;
    pool->peer_base[pool->self] = pool->base;
    pool->peer_bytes[pool->self] = pool->bytes;
    if (share) {
        status = mem_pool_map_peers(pool, topo, name);
        if (status < 0) goto err_unmap;
    } else {
        shm_unlink(name);
    }
    status = mem_extents_init(&pool->blocks, MEM_POOL_CTRL_BYTES, pool->bytes - MEM_POOL_CTRL_BYTES);
    if (status < 0) goto err_unmap;
    return HORA_OK;

err_unmap:
    for (int p = 0; p < pool->peer_count; p++)
        if (pool->peer_base[p]) munmap(pool->peer_base[p], pool->peer_bytes[p]);
    close(pool->fd);
err_free_arrays:
    free(pool->peer_base);
    free(pool->peer_bytes);
    memset(pool, 0, sizeof(*pool));
    return status;
}

void mem_pool_free(struct mem_pool *pool)
{
    if (!pool->base) return;
    if (pool->blocks.used_count)
        log_debug("%zu blocks from hora_mem_alloc were not freed before shutdown", pool->blocks.used_count);
    for (int p = 0; p < pool->peer_count; p++)
        if (pool->peer_base[p]) munmap(pool->peer_base[p], pool->peer_bytes[p]);
    close(pool->fd);
    pthread_mutex_destroy(&pool->lock);
    free(pool->peer_base);
    free(pool->peer_bytes);
    mem_extents_free(&pool->blocks);
    memset(pool, 0, sizeof(*pool));
}

hora_status_t mem_pool_alloc(struct mem_pool *pool, size_t bytes, const char *what, void **ptr)
{
    hora_status_t status = HORA_OK;
    size_t want, offset;
    char b[32], p[32];

    if (bytes == 0) bytes = 1;
    if (bytes > pool->bytes)
        return status_fail(HORA_ERR_NO_MEMORY, "%s: %s is larger than the shared pool (HORA_SHM_POOL_BYTES=%s)", what,
                           mem_format_bytes(bytes, b, sizeof(b)), mem_format_bytes(pool->bytes, p, sizeof(p)));
    want = mem_round_up(bytes, MEM_PAGE);
    pthread_mutex_lock(&pool->lock);
    if (!mem_extents_find(&pool->blocks, want, &offset)) {
        status = status_fail(HORA_ERR_NO_MEMORY,
                             "%s: no room for %s left in the shared pool's address space (raise "
                             "HORA_SHM_POOL_BYTES=%s)",
                             what, mem_format_bytes(bytes, b, sizeof(b)), mem_format_bytes(pool->bytes, p, sizeof(p)));
        goto out;
    }
    int e = posix_fallocate(pool->fd, (off_t)offset, (off_t)want);
    if (e) {
        size_t free_bytes, total_bytes;
        char f[32], t[32];
        mem_shm_space(&free_bytes, &total_bytes);
        status = status_fail(HORA_ERR_NO_MEMORY,
                             "%s: cannot commit %s of shared memory: %s (/dev/shm has %s free of %s: %s, or use "
                             "smaller buffers)",
                             what, mem_format_bytes(bytes, b, sizeof(b)), strerror(e),
                             mem_format_bytes(free_bytes, f, sizeof(f)), mem_format_bytes(total_bytes, t, sizeof(t)),
                             mem_shm_advice);
        goto out;
    }
    status = mem_extents_take(&pool->blocks, offset, want);
    if (status == HORA_OK) *ptr = pool->base + offset;
out:
    pthread_mutex_unlock(&pool->lock);
    return status;
}

hora_status_t mem_pool_release(struct mem_pool *pool, void *ptr)
{
    hora_status_t status = HORA_ERR_INVALID_ARG;
    size_t bytes = 0;
    uint8_t *p = ptr;

    pthread_mutex_lock(&pool->lock);
    if (pool->base && p >= pool->base && p < pool->base + pool->bytes)
        status = mem_extents_give(&pool->blocks, (size_t)(p - pool->base), &bytes);
    /* Give the pages back to the system; the address range stays reserved. */
    if (bytes && fallocate(pool->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(p - pool->base), (off_t)bytes))
        log_debug("releasing pool pages failed: %s", strerror(errno));
    pthread_mutex_unlock(&pool->lock);
    if (status == HORA_ERR_INVALID_ARG)
        return status_fail(HORA_ERR_INVALID_ARG, "hora_mem_free(%p): not a block from hora_mem_alloc", ptr);
    return status;
}

bool mem_pool_offset(const struct mem_pool *pool, const void *ptr, size_t bytes, uint64_t *offset)
{
    const uint8_t *p = ptr;
    if (!pool->base || p < pool->base + MEM_POOL_CTRL_BYTES || p >= pool->base + pool->bytes) return false;
    if ((size_t)(pool->base + pool->bytes - p) < bytes) return false;
    *offset = (uint64_t)(p - pool->base);
    return true;
}

void *mem_pool_peer(const struct mem_pool *pool, int host_rank, uint64_t offset)
{
    if (host_rank < 0 || host_rank >= pool->peer_count || !pool->peer_base[host_rank]) return NULL;
    return pool->peer_base[host_rank] + offset;
}
