/* tp_ucx.c - the UCX transport: tagged messages over UCP, for ring
 * neighbours on any host (the inter-node transport; on one host UCX picks its
 * own shared memory or TCP).
 *
 * One UCP context and worker per connected struct tp, i.e. per channel. A
 * channel is used by exactly one thread (the caller's or the coordinator's),
 * so the workers run in UCS_THREAD_MODE_SINGLE and never share anything.
 *
 * Connect (collective over rt->world, every rank calls it for the same
 * channel in the same order): each rank packs its worker address; the ranks
 * allgather (address size, host name), then allgatherv the addresses. A rank
 * that could not open UCX sends size -1, so all ranks fail together instead
 * of some waiting in the allgatherv. Endpoints are created lazily on first
 * use of a peer (for a send or a receive: a rank that only receives from its
 * left neighbour still needs an endpoint to notice that neighbour die), so a
 * big job opens two per rank, not one per rank of the world.
 *
 * Tags: 64 bits = (source world rank << 32) | user tag, matched with a full
 * mask, so messages from different peers never match each other. UCP keeps
 * messages of one tag from one sender in order, which ring.c relies on (it
 * sends a block as several pieces with the same tag).
 *
 * Requests carry no callback: wait polls ucp_request_check_status while
 * driving ucp_worker_progress (spin only if HORA_SPIN_COUNT says so, then
 * yield, then sleep briefly: over TCP the kernel needs the core). Every request not yet waited for sits in a list (the
 * request private area UCP reserves for us holds the links), so that after an error the rest can be cancelled (a
 * receive posted into a buffer the ring then frees must not land later) and close() can free them.
 *
 * Failure: endpoints use UCP_ERR_HANDLING_MODE_PEER; the error callback
 * records the status per peer, and a wait on that peer fails with
 * HORA_ERR_TRANSPORT naming its rank and host. A peer that stays silent
 * gives HORA_ERR_TIMEOUT after HORA_TIMEOUT_S, and a rank's abort notice
 * (tp_notice.c) ends every wait with its reason. Never a hang. The outcome
 * of an operation is agreed above, in coll/outcome.c (hora.h says what is
 * guaranteed). */
#define _GNU_SOURCE
#include "tp/tp.h"

#include <stdlib.h>

#include "base/status.h"

#ifdef HORA_HAVE_UCX

#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#define TP_UCX_HOST_BYTES 64
#define TP_UCX_TAG(source, tag) (((ucp_tag_t)(uint32_t)(source) << 32) | (uint32_t)(tag))
#define TP_UCX_TAG_MASK UINT64_MAX
/* After the spins, yield this long before sleeping between polls. */
#define TP_UCX_YIELD_S 1e-3
#define TP_UCX_SLEEP_NS 50000L
/* close(): longest wait for endpoint flushes and for cancelled requests. */
#define TP_UCX_CLOSE_S 2.0

/* Lives in the space UCP reserves in each request (ucp_params.request_size):
 * the request handle UCP returns points here. */
struct tp_ucx_req {
    struct tp_ucx_req *prev, *next; /* tp_ucx.pending */
    int peer;
    int is_recv;
};

struct tp_ucx_peer {
    ucp_ep_h ep;         /* NULL until first use */
    _Atomic int failure; /* ucs_status_t from the error callback; UCS_OK while healthy */
    int rank;
    size_t address_offset; /* in tp_ucx.addresses */
    char host[TP_UCX_HOST_BYTES];
};

struct tp_ucx {
    ucp_context_h context;
    ucp_worker_h worker;
    int rank, size;
    struct tp_ucx_peer *peers; /* (size) */
    uint8_t *addresses;        /* every rank's packed worker address, back to back */
    struct tp_ucx_req pending; /* list head: requests issued and not yet waited for */
    long spin_count;
    double timeout_s;
    struct tp_env *env; /* notices (tp_notice.c) */
};

/* What each rank tells the others at connect. */
struct tp_ucx_card {
    int32_t address_bytes; /* -1: this rank could not open UCX */
    char host[TP_UCX_HOST_BYTES];
};

static double tp_ucx_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool tp_ucx_can_connect(const struct tp_env *env, int peer)
{
    (void)peer;
    return !env->disable[TP_KIND_UCX];
}

/* struct tp_req's bytes hold the UCP request handle (NULL once complete). */
_Static_assert(sizeof(struct tp_ucx_req *) <= TP_REQ_BYTES, "a request pointer must fit struct tp_req");
static struct tp_ucx_req **tp_ucx_handle(struct tp_req *req) { return (struct tp_ucx_req **)(void *)req->opaque; }

/* ------------------------------------------------------------ request list */

static void tp_ucx_req_link(struct tp_ucx *s, struct tp_ucx_req *r)
{
    r->next = &s->pending;
    r->prev = s->pending.prev;
    s->pending.prev->next = r;
    s->pending.prev = r;
}

static void tp_ucx_req_release(struct tp_ucx_req *r)
{
    r->prev->next = r->next;
    r->next->prev = r->prev;
    ucp_request_free(r);
}

/* After an error the caller abandons its other requests: cancel them so no
 * receive lands in a buffer that is about to be freed. They stay listed until
 * waited for (status UCS_ERR_CANCELED) or until close(). */
static void tp_ucx_cancel_pending(struct tp_ucx *s)
{
    for (struct tp_ucx_req *r = s->pending.next; r != &s->pending; r = r->next) ucp_request_cancel(s->worker, r);
}

/* ---------------------------------------------------------------- failures */

static void tp_ucx_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    struct tp_ucx_peer *p = arg;
    int healthy = UCS_OK;
    (void)ep;
    atomic_compare_exchange_strong(&p->failure, &healthy, (int)status);
}

/* A peer that aborted (hora_abort) also ends its connections; its notice
 * says why and usually comes within milliseconds, so look for it a moment
 * before reporting a bare loss. */
#define TP_UCX_NOTICE_GRACE_S 0.2

static hora_status_t tp_ucx_peer_lost(struct tp_ucx *s, const struct tp_ucx_peer *p)
{
    for (const double until = tp_ucx_now() + TP_UCX_NOTICE_GRACE_S;;) {
        hora_status_t notice = tp_notice_check(s->env, NULL, 0);
        if (notice < 0) return notice;
        if (tp_ucx_now() > until) break;
        struct timespec nap = {0, 5 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    char what[256];
    snprintf(what, sizeof(what), "ucx transport: rank %d lost rank %d (%s): %s", s->rank, p->rank, p->host,
             ucs_status_string((ucs_status_t)atomic_load(&p->failure)));
    /* In an elastic world the launcher's verdict is what gets reported: no
     * error line for the loss it is about to announce. */
    if (s->env->lost_grace_s > 0) return tp_notice_await_verdict(s->env, status_set(HORA_ERR_TRANSPORT, "%s", what));
    return status_fail(HORA_ERR_TRANSPORT, "%s", what);
}

/* ---------------------------------------------------------------- connect */

/* Context, worker and the packed worker address; errors are logged here. */
static hora_status_t tp_ucx_open(struct tp_ucx *s, ucp_address_t **address, size_t *address_bytes)
{
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                      UCP_PARAM_FIELD_NAME,
        .features = UCP_FEATURE_TAG,
        .request_size = sizeof(struct tp_ucx_req),
        .estimated_num_eps = 2, /* the ring neighbours */
        .name = "hora",
    };
    ucp_worker_params_t worker_params = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };
    ucs_status_t status;

    status = ucp_init(&params, NULL, &s->context);
    if (status != UCS_OK) {
        s->context = NULL;
        return status_fail(HORA_ERR_TRANSPORT, "ucx transport: rank %d: ucp_init: %s", s->rank,
                           ucs_status_string(status));
    }
    status = ucp_worker_create(s->context, &worker_params, &s->worker);
    if (status != UCS_OK) {
        s->worker = NULL;
        return status_fail(HORA_ERR_TRANSPORT, "ucx transport: rank %d: ucp_worker_create: %s", s->rank,
                           ucs_status_string(status));
    }
    status = ucp_worker_get_address(s->worker, address, address_bytes);
    if (status != UCS_OK) {
        *address = NULL;
        return status_fail(HORA_ERR_TRANSPORT, "ucx transport: rank %d: ucp_worker_get_address: %s", s->rank,
                           ucs_status_string(status));
    }
    if (*address_bytes > INT32_MAX / 2)
        return status_fail(HORA_ERR_TRANSPORT, "ucx transport: rank %d: worker address of %zu bytes", s->rank,
                           *address_bytes);
    return HORA_OK;
}

static void tp_ucx_close(struct tp *tp);

/* Exchange cards and addresses (the bootstrap's collectives: MPI or the
 * rendezvous store); on HORA_OK every peer is described. Out of memory on
 * one rank alone would leave the others in a collective; every rank
 * allocates the same sizes, so it is everyone's. */
static hora_status_t tp_ucx_exchange(struct tp_ucx *s, boot_comm_t *world, const struct tp_ucx_card *card,
                                     const ucp_address_t *address)
{
    const size_t n = s->size > 0 ? (size_t)s->size : 1;
    struct tp_ucx_card *cards = calloc(n, sizeof(*cards));
    size_t *counts = calloc(n, sizeof(*counts));
    hora_status_t status = HORA_OK;
    int missing = -1;
    void *addresses = NULL;

    if (!cards || !counts) {
        status = status_fail(HORA_ERR_NO_MEMORY, "out of memory connecting the ucx transport");
        goto out;
    }
    status = boot_comm_allgather(world, card, sizeof(*card), cards, "ucx worker address sizes");
    if (status != HORA_OK) goto out;
    for (int r = 0; r < s->size; r++) {
        cards[r].host[TP_UCX_HOST_BYTES - 1] = '\0';
        if (cards[r].address_bytes < 0 && missing < 0) missing = r;
    }
    if (missing >= 0) {
        /* Our own failure was logged where it happened. */
        status = card->address_bytes < 0
                     ? HORA_ERR_TRANSPORT
                     : status_fail(HORA_ERR_TRANSPORT, "ucx transport: rank %d (%s) could not open UCX", missing,
                                   cards[missing].host);
        goto out;
    }
    status =
        boot_comm_allgatherv(world, address, (size_t)card->address_bytes, &addresses, counts, "ucx worker addresses");
    if (status != HORA_OK) goto out;
    s->peers = calloc(n, sizeof(*s->peers));
    if (!s->peers) {
        status = status_fail(HORA_ERR_NO_MEMORY, "out of memory for the ucx peers");
        goto out;
    }
    s->addresses = addresses;
    addresses = NULL;
    size_t at = 0;
    for (int r = 0; r < s->size; r++) {
        if (counts[r] != (size_t)cards[r].address_bytes) {
            status = status_fail(HORA_ERR_CORRUPT, "ucx transport: rank %d's address has %zu bytes, its card says %d",
                                 r, counts[r], cards[r].address_bytes);
            goto out;
        }
        s->peers[r].rank = r;
        s->peers[r].address_offset = at;
        at += counts[r];
        atomic_init(&s->peers[r].failure, UCS_OK);
        memcpy(s->peers[r].host, cards[r].host, TP_UCX_HOST_BYTES);
    }
out:
    free(addresses);
    free(cards);
    free(counts);
    return status;
}

static hora_status_t tp_ucx_connect(struct tp *tp)
{
    const struct tp_env *env = tp->env;
    struct tp_ucx *s = calloc(1, sizeof(*s));
    struct tp_ucx_card card = {.address_bytes = -1};
    ucp_address_t *address = NULL;
    size_t address_bytes = 0;
    hora_status_t status;

    if (!s) return status_fail(HORA_ERR_NO_MEMORY, "out of memory connecting the ucx transport");
    s->rank = env->topo->rank;
    s->size = env->topo->size;
    s->pending.next = s->pending.prev = &s->pending;
    /* Over TCP the kernel moves the bytes: a rank that busy-polls takes the
     * core its own network stack needs (2 hosts x 1 rank on the dev machine:
     * 0.26 GB/s spinning, 0.65 GB/s yielding). Spin only when asked to. */
    s->spin_count = env->spin_auto ? 0 : env->spin_count;
    s->timeout_s = env->timeout_s;
    s->env = tp->env;
    tp->state = s;
    if (gethostname(card.host, sizeof(card.host) - 1) != 0) snprintf(card.host, sizeof(card.host), "?");
    /* A rank that cannot open UCX still takes part in the exchange (size -1),
     * so that all ranks fail together. */
    if (tp_ucx_open(s, &address, &address_bytes) == HORA_OK) card.address_bytes = (int32_t)address_bytes;
    status = tp_ucx_exchange(s, env->boot, &card, address);
    if (address) ucp_worker_release_address(s->worker, address);
    if (status < 0) {
        tp_ucx_close(tp);
        return status;
    }
    return HORA_OK;
}

/* --------------------------------------------------------------- messages */

/* The endpoint to peer, created on first use. */
static hora_status_t tp_ucx_endpoint(struct tp_ucx *s, int peer, ucp_ep_h *ep)
{
    if (peer < 0 || peer >= s->size)
        return status_fail(HORA_ERR_INVALID_ARG, "ucx transport: no rank %d (world size %d)", peer, s->size);
    struct tp_ucx_peer *p = &s->peers[peer];
    if (atomic_load_explicit(&p->failure, memory_order_relaxed) != UCS_OK) return tp_ucx_peer_lost(s, p);
    if (!p->ep) {
        ucp_ep_params_t params = {
            .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                          UCP_EP_PARAM_FIELD_ERR_HANDLER,
            .address = (const ucp_address_t *)(s->addresses + p->address_offset),
            .err_mode = UCP_ERR_HANDLING_MODE_PEER,
            .err_handler = {.cb = tp_ucx_ep_error, .arg = p},
        };
        ucp_ep_h created;
        ucs_status_t status = ucp_ep_create(s->worker, &params, &created);
        if (status != UCS_OK)
            return status_fail(HORA_ERR_TRANSPORT, "ucx transport: rank %d cannot reach rank %d (%s): %s", s->rank,
                               peer, p->host, ucs_status_string(status));
        p->ep = created;
    }
    *ep = p->ep;
    return HORA_OK;
}

/* Remember what a *_nbx call returned: done (NULL), failed, or a request. */
static hora_status_t tp_ucx_track(struct tp_ucx *s, ucs_status_ptr_t ptr, int peer, int is_recv, struct tp_req *req)
{
    if (UCS_PTR_IS_PTR(ptr)) {
        struct tp_ucx_req *r = ptr;
        r->peer = peer;
        r->is_recv = is_recv;
        tp_ucx_req_link(s, r);
        *tp_ucx_handle(req) = r;
        return HORA_OK;
    }
    ucs_status_t status = UCS_PTR_STATUS(ptr);
    if (status == UCS_OK) return HORA_OK; /* completed at once */
    if (atomic_load_explicit(&s->peers[peer].failure, memory_order_relaxed) != UCS_OK)
        return tp_ucx_peer_lost(s, &s->peers[peer]);
    return status_fail(HORA_ERR_TRANSPORT, "ucx transport: rank %d, %s rank %d (%s): %s", s->rank,
                       is_recv ? "receive from" : "send to", peer, s->peers[peer].host, ucs_status_string(status));
}

static hora_status_t tp_ucx_isend(struct tp *tp, int peer, const void *buf, size_t bytes, int tag, struct tp_req *req)
{
    struct tp_ucx *s = tp->state;
    ucp_request_param_t param = {.op_attr_mask = 0};
    ucp_ep_h ep;

    *tp_ucx_handle(req) = NULL;
    if (tag < 0) return status_fail(HORA_ERR_INVALID_ARG, "ucx transport: negative tag %d", tag);
    HORA_CHECK(tp_ucx_endpoint(s, peer, &ep));
    return tp_ucx_track(s, ucp_tag_send_nbx(ep, buf, bytes, TP_UCX_TAG(s->rank, tag), &param), peer, 0, req);
}

static hora_status_t tp_ucx_irecv(struct tp *tp, int peer, void *buf, size_t bytes, int tag, struct tp_req *req)
{
    struct tp_ucx *s = tp->state;
    ucp_request_param_t param = {.op_attr_mask = 0};
    ucp_ep_h ep;

    *tp_ucx_handle(req) = NULL;
    if (tag < 0) return status_fail(HORA_ERR_INVALID_ARG, "ucx transport: negative tag %d", tag);
    /* Receives match on the worker; the endpoint is for noticing the peer die. */
    HORA_CHECK(tp_ucx_endpoint(s, peer, &ep));
    return tp_ucx_track(s, ucp_tag_recv_nbx(s->worker, buf, bytes, TP_UCX_TAG(peer, tag), TP_UCX_TAG_MASK, &param),
                        peer, 1, req);
}

/* A request finished with status: free it, translate a failure. */
static hora_status_t tp_ucx_finish(struct tp_ucx *s, struct tp_req *req, ucs_status_t status)
{
    struct tp_ucx_req *r = *tp_ucx_handle(req);
    const int peer = r->peer, is_recv = r->is_recv;
    const struct tp_ucx_peer *p = &s->peers[peer];

    tp_ucx_req_release(r);
    *tp_ucx_handle(req) = NULL;
    if (status == UCS_OK) return HORA_OK;
    tp_ucx_cancel_pending(s);
    if (atomic_load_explicit(&p->failure, memory_order_relaxed) != UCS_OK) return tp_ucx_peer_lost(s, p);
    return status_fail(HORA_ERR_TRANSPORT, "ucx transport: rank %d, %s rank %d (%s): %s", s->rank,
                       is_recv ? "receive from" : "send to", peer, p->host, ucs_status_string(status));
}

static hora_status_t tp_ucx_wait(struct tp *tp, int peer, struct tp_req *req)
{
    struct tp_ucx *s = tp->state;
    struct tp_ucx_req *r = *tp_ucx_handle(req);
    (void)peer; /* the request knows its peer */

    if (!r) return HORA_OK;
    tp->env->last_peer[tp->channel] = r->peer;
    const struct tp_ucx_peer *p = &s->peers[r->peer];
    const double start = tp_ucx_now();
    for (long i = 1;; i++) {
        unsigned events = ucp_worker_progress(s->worker);
        ucs_status_t status = ucp_request_check_status(r);
        if (status != UCS_INPROGRESS) return tp_ucx_finish(s, req, status);
        /* A dead peer: once progress brings nothing more, whatever it sent
         * before dying has landed, and this request never will. */
        if (!events && atomic_load_explicit(&p->failure, memory_order_relaxed) != UCS_OK) {
            tp_ucx_cancel_pending(s);
            return tp_ucx_peer_lost(s, p);
        }
        if (i <= s->spin_count && (i & 1023)) continue;
        /* A rank that aborted (tp_notice.c) will never answer. */
        hora_status_t notice = tp_notice_check(tp->env, NULL, 0);
        if (notice < 0) {
            tp_ucx_cancel_pending(s);
            return notice;
        }
        double waited = tp_ucx_now() - start;
        if (waited > s->timeout_s) {
            tp_ucx_cancel_pending(s);
            hora_status_t silent = status_blame(status_fail(HORA_ERR_TIMEOUT,
                                                            "ucx transport: rank %d heard nothing from rank %d "
                                                            "(%s) for %.1f s (HORA_TIMEOUT_S)",
                                                            s->rank, p->rank, p->host, s->timeout_s),
                                                p->rank);
            return tp_notice_await_verdict(tp->env, silent);
        }
        if (events || i <= s->spin_count) continue;
        if (waited < TP_UCX_YIELD_S) {
            sched_yield();
        } else {
            struct timespec nap = {0, TP_UCX_SLEEP_NS};
            nanosleep(&nap, NULL);
        }
    }
}

/* ------------------------------------------------------------------ close */

/* Progress until every non-NULL request in requests has completed or
 * seconds have passed; frees them all either way. */
static void tp_ucx_drive(struct tp_ucx *s, void **requests, size_t count, double seconds)
{
    const double deadline = tp_ucx_now() + seconds;
    for (;;) {
        size_t running = 0;
        ucp_worker_progress(s->worker);
        for (size_t i = 0; i < count; i++) {
            if (!requests[i]) continue;
            if (ucp_request_check_status(requests[i]) != UCS_INPROGRESS) {
                ucp_request_free(requests[i]);
                requests[i] = NULL;
            } else {
                running++;
            }
        }
        if (!running) return;
        if (tp_ucx_now() > deadline) break;
        sched_yield();
    }
    /* Freed while running: UCP releases them when they complete (or with the
     * worker). */
    for (size_t i = 0; i < count; i++)
        if (requests[i]) ucp_request_free(requests[i]);
}

/* Shutdown comes after a barrier, so no collective is running. Requests left
 * behind by an error are cancelled and freed; every healthy endpoint is
 * flushed (our last sends complete at the peer: a send that completed
 * locally may still be on its way) with a bounded wait, then all are closed
 * in FORCE mode, which does not wait for the peer. */
static void tp_ucx_close(struct tp *tp)
{
    struct tp_ucx *s = tp->state;
    if (!s) return;
    if (s->worker) {
        tp_ucx_cancel_pending(s);
        const double deadline = tp_ucx_now() + TP_UCX_CLOSE_S;
        while (s->pending.next != &s->pending && tp_ucx_now() < deadline) {
            ucp_worker_progress(s->worker);
            for (struct tp_ucx_req *r = s->pending.next, *next; r != &s->pending; r = next) {
                next = r->next;
                if (ucp_request_check_status(r) != UCS_INPROGRESS) tp_ucx_req_release(r);
            }
        }
        while (s->pending.next != &s->pending) tp_ucx_req_release(s->pending.next);

        void **requests = s->peers ? calloc((size_t)s->size, sizeof(*requests)) : NULL;
        ucp_request_param_t flush = {.op_attr_mask = 0};
        ucp_request_param_t force = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
        if (requests) {
            for (int r = 0; r < s->size; r++) {
                struct tp_ucx_peer *p = &s->peers[r];
                if (!p->ep || atomic_load(&p->failure) != UCS_OK) continue;
                ucs_status_ptr_t ptr = ucp_ep_flush_nbx(p->ep, &flush);
                if (UCS_PTR_IS_PTR(ptr)) requests[r] = ptr;
            }
            tp_ucx_drive(s, requests, (size_t)s->size, TP_UCX_CLOSE_S);
            for (int r = 0; r < s->size; r++) {
                struct tp_ucx_peer *p = &s->peers[r];
                if (!p->ep) continue;
                ucs_status_ptr_t ptr = ucp_ep_close_nbx(p->ep, &force);
                if (UCS_PTR_IS_PTR(ptr)) requests[r] = ptr;
                p->ep = NULL;
            }
            tp_ucx_drive(s, requests, (size_t)s->size, TP_UCX_CLOSE_S);
            free(requests);
        }
        /* Without memory for the request table the worker destroys the
         * endpoints itself. */
        ucp_worker_destroy(s->worker);
    }
    if (s->context) ucp_cleanup(s->context);
    free(s->peers);
    free(s->addresses);
    free(s);
    tp->state = NULL;
}

#else /* !HORA_HAVE_UCX */

/* Built without UCX: a stand-in that connects nobody, so the registry keeps
 * its order and HORA_DISABLE_UCX stays a valid setting. */
static bool tp_ucx_can_connect(const struct tp_env *env, int peer)
{
    (void)env, (void)peer;
    return false;
}

static hora_status_t tp_ucx_connect(struct tp *tp)
{
    (void)tp;
    return status_fail(HORA_ERR_UNSUPPORTED, "ucx transport: hora was built without UCX (install libucx-dev)");
}

static void tp_ucx_close(struct tp *tp) { (void)tp; }

/* Nothing connects, so no message is ever posted or waited for. */
#define tp_ucx_isend tp_unsupported_isend
#define tp_ucx_irecv tp_unsupported_irecv
#define tp_ucx_wait tp_unsupported_wait

#endif /* HORA_HAVE_UCX */

/* One table for both builds. */
const struct tp_ops tp_ucx_ops = {
    .name = "ucx",
    .caps = TP_CAP_MESSAGE,
    .memory_kinds = 1u << HORA_MEMORY_HOST,
    .can_connect = tp_ucx_can_connect,
    .connect = tp_ucx_connect,
    .close = tp_ucx_close,
    .isend = tp_ucx_isend,
    .irecv = tp_ucx_irecv,
    .wait = tp_ucx_wait,
    TP_OPS_NO_PEER_MEMORY,
};
