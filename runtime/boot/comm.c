/* comm.c - the bootstrap's collectives (comm.h): MPI calls in MPI mode, the
 * rendezvous store's keys in store mode. Store mode builds everything on one
 * gather: each member sets its part, the first member collects the parts
 * (waiting on the server for each) and sets their concatenation, every
 * member reads it; reductions, splits and barriers reduce that locally. */
#include "boot/comm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"

void boot_comm_from_mpi(boot_comm_t *c, MPI_Comm mpi)
{
    memset(c, 0, sizeof(*c));
    c->kind = BOOT_COMM_MPI;
    c->mpi = mpi;
    c->borrowed = 1;
    MPI_Comm_rank(mpi, &c->rank);
    MPI_Comm_size(mpi, &c->size);
}

static hora_status_t boot_comm_store_init(boot_comm_t *c, boot_link_t *link, const char *prefix, int rank, int size)
{
    memset(c, 0, sizeof(*c));
    c->mpi = MPI_COMM_NULL;
    c->members = malloc(sizeof(int) * (size_t)(size > 0 ? size : 1));
    if (!c->members) return status_fail(HORA_ERR_NO_MEMORY, "out of memory for a bootstrap communicator");
    c->kind = BOOT_COMM_STORE;
    c->link = link;
    c->rank = rank;
    c->size = size;
    snprintf(c->prefix, sizeof(c->prefix), "%s", prefix);
    return HORA_OK;
}

hora_status_t boot_comm_from_store(boot_comm_t *c, boot_link_t *link, const char *prefix, int rank, int size)
{
    HORA_CHECK(boot_comm_store_init(c, link, prefix, rank, size));
    for (int r = 0; r < size; r++) c->members[r] = r;
    return HORA_OK;
}

MPI_Comm boot_comm_mpi(const boot_comm_t *c) { return c->kind == BOOT_COMM_MPI ? c->mpi : MPI_COMM_NULL; }

void boot_comm_free(boot_comm_t *c)
{
    if (c->kind == BOOT_COMM_MPI && !c->borrowed && c->mpi != MPI_COMM_NULL) MPI_Comm_free(&c->mpi);
    free(c->members);
    memset(c, 0, sizeof(*c));
    c->mpi = MPI_COMM_NULL;
}

/* ---------------------------------------------------------------- store */

static void boot_comm_key(const boot_comm_t *c, unsigned long seq, int member, char *key, size_t bytes)
{
    if (member < 0)
        snprintf(key, bytes, "%s/%lu/all", c->prefix, seq);
    else
        snprintf(key, bytes, "%s/%lu/%d", c->prefix, seq, member);
}

static hora_status_t boot_comm_set(boot_comm_t *c, const char *key, const void *value, size_t bytes)
{
    pthread_mutex_lock(&c->link->lock);
    hora_status_t status = boot_store_set(c->link->store, key, value, bytes);
    pthread_mutex_unlock(&c->link->lock);
    return status;
}

/* Wait for key (a value of member, -1: the gathered one) within the link's
 * timeout; the message names who was waited for. */
static hora_status_t boot_comm_get(boot_comm_t *c, const char *key, int member, const char *what, void **value,
                                   size_t *bytes)
{
    pthread_mutex_lock(&c->link->lock);
    hora_status_t status = boot_store_get(c->link->store, key, c->link->timeout_s, value, bytes);
    pthread_mutex_unlock(&c->link->lock);
    if (status == HORA_ERR_TIMEOUT) {
        if (member >= 0)
            return status_fail(HORA_ERR_TIMEOUT,
                               "bootstrap: rank %d waited %.0f s for rank %d's %s (rendezvous store key '%s'): did "
                               "every worker of the job start, and call hora_init?",
                               c->members[c->rank], c->link->timeout_s, c->members[member], what, key);
        return status_fail(HORA_ERR_TIMEOUT,
                           "bootstrap: rank %d waited %.0f s for the %s gathered by rank %d (rendezvous store key "
                           "'%s')",
                           c->members[c->rank], c->link->timeout_s, what, c->members[0], key);
    }
    return status;
}

/* The gather every store collective is made of: every member's bytes, with
 * a 4-byte length before each, in member order, into *all (malloc'd). */
static hora_status_t boot_comm_gather(boot_comm_t *c, const void *mine, size_t bytes, void **all, size_t *all_bytes,
                                      const char *what)
{
    char key[BOOT_STORE_KEY_MAX];
    unsigned long seq = c->seq++;
    *all = NULL;
    if (c->rank != 0) {
        boot_comm_key(c, seq, c->rank, key, sizeof(key));
        HORA_CHECK(boot_comm_set(c, key, mine, bytes));
        boot_comm_key(c, seq, -1, key, sizeof(key));
        return boot_comm_get(c, key, -1, what, all, all_bytes);
    }
    size_t cap = 0, used = 0;
    uint8_t *out = NULL;
    hora_status_t status = HORA_OK;
    for (int m = 0; m < c->size && status == HORA_OK; m++) {
        void *v = NULL;
        size_t n = bytes;
        if (m == 0) {
            v = (void *)mine;
        } else {
            boot_comm_key(c, seq, m, key, sizeof(key));
            if ((status = boot_comm_get(c, key, m, what, &v, &n)) != HORA_OK) break;
        }
        if (used + 4 + n > cap) {
            size_t want = (used + 4 + n) * 2;
            uint8_t *grown = realloc(out, want);
            if (!grown) {
                if (m) free(v);
                status = status_fail(HORA_ERR_NO_MEMORY, "bootstrap: out of memory gathering the %s", what);
                break;
            }
            out = grown;
            cap = want;
        }
        uint32_t len = (uint32_t)n;
        memcpy(out + used, &len, 4);
        if (n) memcpy(out + used + 4, v, n);
        used += 4 + n;
        if (m) free(v);
    }
    if (status == HORA_OK && used > BOOT_STORE_VALUE_MAX)
        status = status_fail(HORA_ERR_UNSUPPORTED,
                             "bootstrap: the gathered %s take %zu bytes, more than the rendezvous store's %u per value",
                             what, used, BOOT_STORE_VALUE_MAX);
    if (status == HORA_OK) {
        boot_comm_key(c, seq, -1, key, sizeof(key));
        status = boot_comm_set(c, key, out, used);
    }
    if (status != HORA_OK) {
        free(out);
        return status;
    }
    *all = out;
    *all_bytes = used;
    return HORA_OK;
}

/* Walk a gather's parts: part m's bytes and count. */
static hora_status_t boot_comm_parts(const boot_comm_t *c, const uint8_t *all, size_t all_bytes, const uint8_t **part,
                                     size_t *count, const char *what)
{
    size_t at = 0;
    for (int m = 0; m < c->size; m++) {
        uint32_t len;
        if (at + 4 > all_bytes) goto bad;
        memcpy(&len, all + at, 4);
        if (at + 4 + len > all_bytes) goto bad;
        part[m] = all + at + 4;
        count[m] = len;
        at += 4 + len;
    }
    if (at == all_bytes) return HORA_OK;
bad:
    return status_fail(HORA_ERR_CORRUPT, "bootstrap: the gathered %s (%zu bytes) do not hold %d parts", what, all_bytes,
                       c->size);
}

/* Gather, then split into parts (arrays of c->size, the caller frees *all). */
static hora_status_t boot_comm_gather_parts(boot_comm_t *c, const void *mine, size_t bytes, void **all,
                                            const uint8_t ***part, size_t **count, const char *what)
{
    size_t all_bytes = 0;
    *part = NULL;
    *count = NULL;
    HORA_CHECK(boot_comm_gather(c, mine, bytes, all, &all_bytes, what));
    *part = malloc(sizeof(**part) * (size_t)c->size);
    *count = malloc(sizeof(**count) * (size_t)c->size);
    hora_status_t status = (*part && *count) ? boot_comm_parts(c, *all, all_bytes, *part, *count, what)
                                             : status_fail(HORA_ERR_NO_MEMORY, "bootstrap: out of memory");
    if (status != HORA_OK) {
        free(*all);
        free(*part);
        free(*count);
        *all = NULL;
        *part = NULL;
        *count = NULL;
    }
    return status;
}

/* ---------------------------------------------------------------- operations */

hora_status_t boot_comm_allgather(boot_comm_t *c, const void *mine, size_t bytes, void *all, const char *what)
{
    if (c->kind == BOOT_COMM_MPI) {
        int err = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, c->mpi);
        if (err != MPI_SUCCESS) {
            char call[160];
            snprintf(call, sizeof(call), "MPI_Allgather(%s)", what);
            return status_mpi(err, call);
        }
        return HORA_OK;
    }
    void *gathered;
    const uint8_t **part;
    size_t *count;
    HORA_CHECK(boot_comm_gather_parts(c, mine, bytes, &gathered, &part, &count, what));
    hora_status_t status = HORA_OK;
    for (int m = 0; m < c->size; m++) {
        if (count[m] != bytes) {
            status = status_fail(HORA_ERR_MISMATCH, "bootstrap: rank %d gave %zu bytes of %s, rank %d %zu",
                                 c->members[m], count[m], what, c->members[c->rank], bytes);
            break;
        }
        if (bytes) memcpy((uint8_t *)all + (size_t)m * bytes, part[m], bytes);
    }
    free(gathered);
    free(part);
    free(count);
    return status;
}

hora_status_t boot_comm_allgatherv(boot_comm_t *c, const void *mine, size_t bytes, void **all, size_t *counts,
                                   const char *what)
{
    *all = NULL;
    if (c->kind == BOOT_COMM_MPI) {
        int n = (int)bytes, *ns = calloc((size_t)c->size, sizeof(int)), *displs = calloc((size_t)c->size, sizeof(int));
        char call[160];
        hora_status_t status = HORA_OK;
        size_t total = 0;
        if (!ns || !displs) {
            status = status_fail(HORA_ERR_NO_MEMORY, "bootstrap: out of memory");
            goto mpi_out;
        }
        int err = MPI_Allgather(&n, 1, MPI_INT, ns, 1, MPI_INT, c->mpi);
        if (err != MPI_SUCCESS) {
            snprintf(call, sizeof(call), "MPI_Allgather(%s sizes)", what);
            status = status_mpi(err, call);
            goto mpi_out;
        }
        for (int r = 0; r < c->size; r++) {
            displs[r] = (int)total;
            counts[r] = (size_t)ns[r];
            total += (size_t)ns[r];
        }
        if (total > (size_t)INT32_MAX) {
            status = status_fail(HORA_ERR_UNSUPPORTED, "bootstrap: %zu bytes of %s exceed 2 GiB", total, what);
            goto mpi_out;
        }
        if (!(*all = malloc(total ? total : 1))) {
            status = status_fail(HORA_ERR_NO_MEMORY, "bootstrap: out of memory for %zu bytes of %s", total, what);
            goto mpi_out;
        }
        err = MPI_Allgatherv(mine, n, MPI_BYTE, *all, ns, displs, MPI_BYTE, c->mpi);
        if (err != MPI_SUCCESS) {
            snprintf(call, sizeof(call), "MPI_Allgatherv(%s)", what);
            status = status_mpi(err, call);
            free(*all);
            *all = NULL;
        }
    mpi_out:
        free(ns);
        free(displs);
        return status;
    }
    void *gathered;
    const uint8_t **part;
    size_t *count, total = 0;
    HORA_CHECK(boot_comm_gather_parts(c, mine, bytes, &gathered, &part, &count, what));
    for (int m = 0; m < c->size; m++) total += counts[m] = count[m];
    hora_status_t status = HORA_OK;
    uint8_t *out = malloc(total ? total : 1);
    if (!out) {
        status = status_fail(HORA_ERR_NO_MEMORY, "bootstrap: out of memory for %zu bytes of %s", total, what);
    } else {
        size_t at = 0;
        for (int m = 0; m < c->size; m++) {
            if (count[m]) memcpy(out + at, part[m], count[m]);
            at += count[m];
        }
        *all = out;
    }
    free(gathered);
    free(part);
    free(count);
    return status;
}

hora_status_t boot_comm_allreduce_int(boot_comm_t *c, const int *in, int *out, int n, boot_op_t op, const char *what)
{
    if (c->kind == BOOT_COMM_MPI) {
        MPI_Op mop = op == BOOT_OP_MIN ? MPI_MIN : op == BOOT_OP_MAX ? MPI_MAX : MPI_SUM;
        int err = MPI_Allreduce(in, out, n, MPI_INT, mop, c->mpi);
        if (err != MPI_SUCCESS) {
            char call[160];
            snprintf(call, sizeof(call), "MPI_Allreduce(%s)", what);
            return status_mpi(err, call);
        }
        return HORA_OK;
    }
    int *all = malloc(sizeof(int) * (size_t)n * (size_t)c->size);
    if (!all) return status_fail(HORA_ERR_NO_MEMORY, "bootstrap: out of memory");
    hora_status_t status = boot_comm_allgather(c, in, sizeof(int) * (size_t)n, all, what);
    for (int i = 0; status == HORA_OK && i < n; i++) {
        int v = all[i];
        for (int m = 1; m < c->size; m++) {
            int x = all[(size_t)m * (size_t)n + (size_t)i];
            v = op == BOOT_OP_MIN ? (x < v ? x : v) : op == BOOT_OP_MAX ? (x > v ? x : v) : v + x;
        }
        out[i] = v;
    }
    free(all);
    return status;
}

hora_status_t boot_comm_bcast(boot_comm_t *c, void *buf, size_t bytes, int root, const char *what)
{
    if (c->kind == BOOT_COMM_MPI) {
        int err = MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, c->mpi);
        if (err != MPI_SUCCESS) {
            char call[160];
            snprintf(call, sizeof(call), "MPI_Bcast(%s)", what);
            return status_mpi(err, call);
        }
        return HORA_OK;
    }
    char key[BOOT_STORE_KEY_MAX];
    unsigned long seq = c->seq++;
    boot_comm_key(c, seq, -1, key, sizeof(key));
    if (c->rank == root) return boot_comm_set(c, key, buf, bytes);
    void *v = NULL;
    size_t n = 0;
    HORA_CHECK(boot_comm_get(c, key, root, what, &v, &n));
    hora_status_t status = HORA_OK;
    if (n != bytes)
        status = status_fail(HORA_ERR_MISMATCH, "bootstrap: rank %d broadcast %zu bytes of %s, rank %d expected %zu",
                             c->members[root], n, what, c->members[c->rank], bytes);
    else if (bytes)
        memcpy(buf, v, bytes);
    free(v);
    return status;
}

hora_status_t boot_comm_barrier(boot_comm_t *c, const char *what)
{
    return boot_comm_barrier_until(c, what, NULL, NULL);
}

hora_status_t boot_comm_barrier_until(boot_comm_t *c, const char *what, hora_status_t (*check)(void *arg), void *arg)
{
    const struct timespec nap = {0, 1000 * 1000};
    char call[160];
    if (c->kind == BOOT_COMM_MPI) {
        int err, done = 0;
        if (!check) {
            err = MPI_Barrier(c->mpi);
            snprintf(call, sizeof(call), "MPI_Barrier(%s)", what);
            return err == MPI_SUCCESS ? HORA_OK : status_mpi(err, call);
        }
        MPI_Request req;
        snprintf(call, sizeof(call), "MPI_Ibarrier(%s)", what);
        if ((err = MPI_Ibarrier(c->mpi, &req)) != MPI_SUCCESS) return status_mpi(err, call);
        for (long polls = 0;; polls++) {
            if ((err = MPI_Test(&req, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS) return status_mpi(err, call);
            if (done) return HORA_OK;
            if (polls < 64) continue;
            HORA_CHECK(check(arg));
            nanosleep(&nap, NULL);
        }
    }
    /* A count every member adds to, and a wait for it on the server, in
     * slices so that check runs in between. */
    char key[BOOT_STORE_KEY_MAX];
    snprintf(key, sizeof(key), "%s/%lu/barrier", c->prefix, c->seq++);
    pthread_mutex_lock(&c->link->lock);
    hora_status_t status = boot_store_count(c->link->store, key, NULL);
    pthread_mutex_unlock(&c->link->lock);
    HORA_CHECK(status);
    const double deadline = boot_now_s() + c->link->timeout_s;
    for (;;) {
        pthread_mutex_lock(&c->link->lock);
        status = boot_store_wait_count(c->link->store, key, c->size, check ? 0.02 : c->link->timeout_s);
        pthread_mutex_unlock(&c->link->lock);
        if (status != HORA_ERR_TIMEOUT) return status;
        if (check) HORA_CHECK(check(arg));
        if (!check || boot_now_s() > deadline)
            return status_fail(HORA_ERR_TIMEOUT, "bootstrap: rank %d waited %.0f s in the %s barrier of %d ranks",
                               c->members[c->rank], c->link->timeout_s, what, c->size);
    }
}

hora_status_t boot_comm_split(boot_comm_t *c, int color, int key, boot_comm_t *out, const char *what)
{
    if (c->kind == BOOT_COMM_MPI) {
        MPI_Comm m = MPI_COMM_NULL;
        int err = MPI_Comm_split(c->mpi, color < 0 ? MPI_UNDEFINED : color, key, &m);
        if (err != MPI_SUCCESS) {
            char call[160];
            snprintf(call, sizeof(call), "MPI_Comm_split(%s)", what);
            return status_mpi(err, call);
        }
        if (m == MPI_COMM_NULL) {
            memset(out, 0, sizeof(*out));
            out->mpi = MPI_COMM_NULL;
            return HORA_OK;
        }
        boot_comm_from_mpi(out, m);
        out->borrowed = 0;
        return HORA_OK;
    }
    int mine[2] = {color, key}, *all = malloc(sizeof(int) * 2 * (size_t)c->size);
    if (!all) return status_fail(HORA_ERR_NO_MEMORY, "bootstrap: out of memory");
    unsigned long seq = c->seq;
    hora_status_t status = boot_comm_allgather(c, mine, sizeof(mine), all, what);
    if (status != HORA_OK || color < 0) {
        free(all);
        memset(out, 0, sizeof(*out));
        out->mpi = MPI_COMM_NULL;
        return status;
    }
    int n = 0;
    for (int m = 0; m < c->size; m++) n += all[2 * m] == color;
    char prefix[sizeof(c->prefix) + 48];
    snprintf(prefix, sizeof(prefix), "%s/s%lu.%d", c->prefix, seq, color);
    if (strlen(prefix) >= sizeof(c->prefix)) {
        free(all);
        return status_fail(HORA_ERR_INTERNAL, "bootstrap: communicator names nested too deep (%s)", prefix);
    }
    status = boot_comm_store_init(out, c->link, prefix, 0, n);
    if (status != HORA_OK) {
        free(all);
        return status;
    }
    /* Members in (key, rank) order: insertion by key, stable in rank. */
    int placed = 0;
    for (int m = 0; m < c->size; m++) {
        if (all[2 * m] != color) continue;
        int at = placed++;
        while (at > 0 && all[2 * out->members[at - 1] + 1] > all[2 * m + 1]) {
            out->members[at] = out->members[at - 1];
            at--;
        }
        out->members[at] = m;
    }
    /* Members are indices into c; make them world ranks, and find us. */
    for (int i = 0; i < n; i++) {
        if (out->members[i] == c->rank) out->rank = i;
        out->members[i] = c->members[out->members[i]];
    }
    free(all);
    return HORA_OK;
}

hora_status_t boot_comm_dup(boot_comm_t *c, boot_comm_t *out, const char *what)
{
    if (c->kind == BOOT_COMM_MPI) {
        MPI_Comm m;
        int err = MPI_Comm_dup(c->mpi, &m);
        if (err != MPI_SUCCESS) {
            char call[160];
            snprintf(call, sizeof(call), "MPI_Comm_dup(%s)", what);
            return status_mpi(err, call);
        }
        boot_comm_from_mpi(out, m);
        out->borrowed = 0;
        return HORA_OK;
    }
    char prefix[sizeof(c->prefix) + 32];
    snprintf(prefix, sizeof(prefix), "%s/d%lu", c->prefix, c->seq++);
    if (strlen(prefix) >= sizeof(c->prefix))
        return status_fail(HORA_ERR_INTERNAL, "bootstrap: communicator names nested too deep (%s)", prefix);
    HORA_CHECK(boot_comm_store_init(out, c->link, prefix, c->rank, c->size));
    memcpy(out->members, c->members, sizeof(int) * (size_t)c->size);
    return HORA_OK;
}
