/* tp.h - the transport ops table.
 *
 * Transports come in two flavours and say which through caps:
 *  - message transports (ucx, mpi) move bytes: isend / irecv / wait;
 *  - peer-memory transports (shm, later cudaipc) map the peers' buffers, so a
 *    rank reduces straight from a neighbour's memory; ranks agree on progress
 *    through monotonically increasing positions (mem_post / mem_wait) and
 *    describe their buffers for the current operation (mem_publish / mem_desc).
 * Slots a transport does not provide point to tp_unsupported_* (returning
 * HORA_ERR_UNSUPPORTED), never NULL. They are tried in the order of
 * tp_registry; HORA_DISABLE_<NAME>=1 removes one. Peers are world ranks. */
#ifndef HORA_TP_H
#define HORA_TP_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hora.h"

struct hora_rt;
struct tp;

enum tp_kind { TP_KIND_SHM = 0, TP_KIND_UCX = 1, TP_KIND_MPI = 2, TP_KIND_COUNT = 3 };

enum tp_caps { TP_CAP_MESSAGE = 1u << 0, TP_CAP_PEER_MEMORY = 1u << 1 };

struct tp_req {
    MPI_Request mpi;
    void *ucx; /* the UCP request, NULL once complete (tp_ucx.c) */
};

/* What a rank publishes about the operation it is running (peer-memory
 * transports). Neighbours check it against their own call: a mismatch means
 * the ranks did not call the same collective. */
struct tp_mem_desc {
    uint64_t op_seq;
    uint32_t kind;        /* enum ring_kind */
    uint32_t dtype, op;
    int32_t root;
    uint64_t count;
    uint64_t chunk_elems;
    uint64_t send_offset; /* in the publishing rank's pool */
    uint64_t work_offset;
};

struct tp_ops {
    const char *name;
    unsigned caps;
    bool (*can_connect)(const struct hora_rt *rt, int peer);
    hora_status_t (*connect)(struct tp *tp, struct hora_rt *rt);
    void (*close)(struct tp *tp);
    /* message transports */
    hora_status_t (*isend)(struct tp *tp, int peer, const void *buf, size_t bytes, int tag, struct tp_req *req);
    hora_status_t (*irecv)(struct tp *tp, int peer, void *buf, size_t bytes, int tag, struct tp_req *req);
    hora_status_t (*wait)(struct tp *tp, int peer, struct tp_req *req);
    /* peer-memory transports */
    hora_status_t (*mem_publish)(struct tp *tp, const struct tp_mem_desc *desc);
    hora_status_t (*mem_desc)(struct tp *tp, int peer, struct tp_mem_desc *desc);
    hora_status_t (*mem_post)(struct tp *tp, uint64_t position);
    hora_status_t (*mem_wait)(struct tp *tp, int peer, uint64_t position);
    bool (*mem_local_offset)(struct tp *tp, const void *ptr, size_t bytes, uint64_t *offset);
    void *(*mem_peer_ptr)(struct tp *tp, int peer, uint64_t offset);
};

struct tp {
    const struct tp_ops *ops;
    void *state;
    struct hora_rt *rt;
    int channel; /* enum rt_channel */
};

extern const struct tp_ops tp_shm_ops;
/* Without UCX (meson -Ducx=disabled, or libucx-dev missing) this is a stand-in
 * that connects nobody, so the registry keeps its order. */
extern const struct tp_ops tp_ucx_ops;
extern const struct tp_ops tp_mpi_ops;

/* Ordered: the first transport that can connect every ring neighbour wins. */
extern const struct tp_ops *const tp_registry[TP_KIND_COUNT];

/* Positions compare modulo 2^64 (they only ever differ by a little). */
static inline bool tp_position_reached(uint64_t have, uint64_t want) { return (int64_t)(have - want) >= 0; }

/* Stand-ins for the slots a transport does not provide. */
hora_status_t tp_unsupported_isend(struct tp *, int, const void *, size_t, int, struct tp_req *);
hora_status_t tp_unsupported_irecv(struct tp *, int, void *, size_t, int, struct tp_req *);
hora_status_t tp_unsupported_wait(struct tp *, int, struct tp_req *);
hora_status_t tp_unsupported_mem_publish(struct tp *, const struct tp_mem_desc *);
hora_status_t tp_unsupported_mem_desc(struct tp *, int, struct tp_mem_desc *);
hora_status_t tp_unsupported_mem_post(struct tp *, uint64_t);
hora_status_t tp_unsupported_mem_wait(struct tp *, int, uint64_t);
bool tp_unsupported_mem_local_offset(struct tp *, const void *, size_t, uint64_t *);
void *tp_unsupported_mem_peer_ptr(struct tp *, int, uint64_t);

#endif
