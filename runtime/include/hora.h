/*
 * hora.h - public API of libhora, hora's communication runtime.
 *
 * C11, opaque state, every call returns a hora_status_t (HORA_OK = 0,
 * HORA_IN_PROGRESS = 1, negative values are errors). After a failed call,
 * hora_last_error() returns a human-readable message for the calling thread.
 *
 * Build: part of the meson project (libhora); link with -lhora and MPI.
 */
#ifndef HORA_H
#define HORA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* libhora.so exports exactly the functions declared with HORA_API (it is
 * built with -fvisibility=hidden): nothing of the runtime's internals. */
#if defined(__GNUC__) || defined(__clang__)
#define HORA_API __attribute__((visibility("default")))
#else
#define HORA_API
#endif

/* Alignment of the tensors in a fused buffer, in bytes: each tensor starts
 * at the first multiple of it after the previous one ends. In-place
 * all-reduces (send == recv) of uncompressed tensors in memory from
 * hora_mem_alloc that the coordinator fuses into one response, laid out the
 * same way (each at the first multiple of HORA_ALIGN_BYTES after the
 * previous one, in the order they are fused: a gradient arena in backprop
 * order), run where they are, without a copy into the fusion buffer. */
#define HORA_ALIGN_BYTES 64

/*
 * One status type for the whole stack. The runtime, the kernels' callers and
 * hora-train (its compute backends and data pipeline) all return
 * hora_status_t, so an error found in any layer travels up unchanged and a
 * failing rank can hand it to the runtime's abort path as it is. Two codes
 * are raised mostly above the runtime but belong to every layer:
 * HORA_ERR_CORRUPT (data that fails a check: a CRC, a magic number, a
 * length, a truncated file or a malformed coordinator message) and
 * HORA_ERR_INTERNAL (a library below hora failed: oneDNN, cuDNN, CUDA; the
 * message names the call).
 */
typedef enum {
    HORA_OK = 0,
    HORA_IN_PROGRESS = 1,
    HORA_ERR_INVALID_ARG = -1,     /* a bad argument (NULL buffer, bad dtype/op/root, ...) */
    HORA_ERR_NO_MEMORY = -2,       /* malloc, shared-memory pool or /dev/shm exhausted */
    HORA_ERR_NOT_INITIALIZED = -3, /* called before hora_init or after hora_shutdown */
    HORA_ERR_UNSUPPORTED = -4,     /* an operation a transport/backend does not provide */
    HORA_ERR_MPI = -5,             /* an MPI call failed */
    HORA_ERR_TRANSPORT = -6,       /* a transport failed (peer died, connect failed) */
    HORA_ERR_CONFIG = -7,          /* a HORA_* variable has a bad value */
    HORA_ERR_SYSTEM = -8,          /* an OS call failed (shm_open, mmap, ...) */
    HORA_ERR_MISMATCH = -9,        /* ranks called a collective with different arguments */
    HORA_ERR_DUPLICATE = -10,      /* a request with the same name is already in flight */
    HORA_ERR_SHUTDOWN = -11,       /* the runtime shut down before the request finished */
    HORA_ERR_TIMEOUT = -12,        /* a peer did not answer within HORA_TIMEOUT_S */
    HORA_ERR_ALREADY_INITIALIZED = -13,
    HORA_ERR_CORRUPT = -14,   /* data failed a check (CRC, magic, length, truncation, malformed message) */
    HORA_ERR_INTERNAL = -15,  /* a library below hora (oneDNN, cuDNN, CUDA, ...) failed; the message names the call */
    HORA_ERR_PEER_LOST = -16, /* a member of this world was lost (hora-run): re-form (hora_elastic_reform's notes) */
} hora_status_t;

/* Element types. Values are stable (they travel between ranks). */
typedef enum {
    HORA_DTYPE_F32 = 0,
    HORA_DTYPE_F16 = 1,  /* IEEE binary16, reduced with fp32 accumulation (see hora_allreduce) */
    HORA_DTYPE_BF16 = 2, /* bfloat16, reduced with fp32 accumulation (see hora_allreduce) */
    HORA_DTYPE_F64 = 3,
    HORA_DTYPE_I32 = 4,
    HORA_DTYPE_I64 = 5,
    HORA_DTYPE_U8 = 6,
    HORA_DTYPE_I8 = 7,
    HORA_DTYPE_I16 = 8,
    HORA_DTYPE_U16 = 9,
    HORA_DTYPE_BOOL = 10, /* one byte: 0 false, anything else true (reduced results are 0 or 1) */
    HORA_DTYPE_COUNT = 11
} hora_dtype_t;

/* Reduction operations. Integer SUM and PROD wrap modulo 2^bits; AVG is SUM
 * followed by a division by the number of ranks (truncating for integers,
 * in fp32 for f32/f16/bf16, in fp64 for f64). MIN and MAX propagate NaN,
 * and compare integers signed or unsigned as their type is. prescale and
 * postscale on an integer truncate toward zero (C's conversion, as Horovod
 * does) and saturate at the type's range (where C's conversion is undefined).
 * bool: SUM and MAX are logical OR ("any rank true"), MIN and PROD logical
 * AND ("all ranks true"), every output byte 0 or 1; AVG and a prescale or
 * postscale other than 1 are refused (HORA_ERR_INVALID_ARG, at the call,
 * on every rank that makes it). Broadcast and allgather move the bytes of
 * every dtype unchanged.
 *
 * HORA_OP_ADASUM is not element-wise, and lies outside 0..HORA_OP_COUNT-1
 * (the element-wise ops): Adaptive Summation (Maleki et al., MLSys 2021;
 * Horovod's op=Adasum). Two vectors a and b combine into
 * (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b (a coefficient is 1
 * where that vector's squared norm is below sqrt(DBL_MIN)): the sum of
 * orthogonal vectors, the mean of parallel ones. Over 2^k ranks the pairs
 * combine as a binary tree in rank order ((r0 + r1) + (r2 + r3), ...),
 * computed by vector halving and distance doubling (each rank reduces a
 * 1/2^k slice; dot products and norms in fp64, summed over the ranks that
 * hold the slices of one vector), then an allgather in reverse: every rank
 * gets the same bits. hora_allreduce, hora_allreduce_async and
 * hora_grouped_allreduce_async take it (every tensor of a group or a fusion
 * is its own vector: Adasum requests are never fused); f32, f64, and f16 /
 * bf16 (computed in fp32, rounded once at the end); host memory, the world
 * only. Refused on every rank: HORA_ERR_UNSUPPORTED for a world size that is
 * not a power of two, device memory, a process set or a build without the
 * mpi transport (HORA_DISABLE_MPI=1: the pairwise exchanges are MPI
 * point-to-point); HORA_ERR_INVALID_ARG for other dtypes, for
 * hora_reduce_scatter and hora_reducescatter_async. prescale/postscale of
 * an async request apply before/after, as for the other ops. */
typedef enum {
    HORA_OP_SUM = 0,
    HORA_OP_AVG = 1,
    HORA_OP_MIN = 2,
    HORA_OP_MAX = 3,
    HORA_OP_PROD = 4,
    HORA_OP_COUNT = 5, /* the element-wise ops are 0..HORA_OP_COUNT-1 */
    HORA_OP_ADASUM = 16
} hora_op_t;

/* Status, dtype and op names ("HORA_ERR_TIMEOUT", "f32", "sum", "adasum"). */
HORA_API const char *hora_status_string(hora_status_t status);
HORA_API const char *hora_dtype_name(hora_dtype_t dtype);
HORA_API const char *hora_op_name(hora_op_t op);
/* Bytes per element, 0 for an invalid dtype. */
HORA_API size_t hora_dtype_size(hora_dtype_t dtype);
/* Parse "f32", "float", "half", ... / "sum", "avg", ...; -1 when unknown. */
HORA_API int hora_dtype_parse(const char *name);
HORA_API int hora_op_parse(const char *name);

/* Message describing the last error returned to the calling thread ("" if none). */
HORA_API const char *hora_last_error(void);

/*
 * hora_init - start the runtime on every rank (collective over MPI_COMM_WORLD,
 * or over the workers of a generation under hora-run: hora_bootstrap).
 * Initialises MPI (MPI_THREAD_MULTIPLE) if the caller has not (never under
 * hora-run, where the rendezvous store replaces MPI); reads and
 * validates every HORA_* variable (a bad value -> HORA_ERR_CONFIG naming it),
 * finds the topology, maps the peers' shared-memory pools and connects the
 * transports. hora_init after hora_shutdown works; MPI itself stays up until
 * process exit when hora started it.
 * Returns HORA_OK, HORA_ERR_ALREADY_INITIALIZED, HORA_ERR_CONFIG, HORA_ERR_MPI,
 * HORA_ERR_SYSTEM, HORA_ERR_NO_MEMORY, HORA_ERR_TRANSPORT.
 */
HORA_API hora_status_t hora_init(void);
/* Collective. Releases every resource of the runtime; memory from
 * hora_mem_alloc becomes invalid. Threads: as with MPI_Finalize, no other
 * thread may start a hora_* call while hora_shutdown runs; a thread already
 * blocked in hora_wait (or hora_join) returns HORA_ERR_SHUTDOWN before it
 * completes. The first rank that calls it stops every rank's coordinator:
 * requests still pending anywhere fail with HORA_ERR_SHUTDOWN, and a host
 * peer blocked in a direct collective that needs this rank fails with
 * HORA_ERR_SHUTDOWN instead of timing out. It never waits for a rank that
 * aborted (hora_abort) or whose process is gone: then it releases this
 * rank's resources without the peers and returns that failure (the status
 * of the abort, or HORA_ERR_TRANSPORT), hora skips MPI_Finalize at exit and
 * hora_init refuses to run again; the program should exit non-zero.
 * Returns HORA_OK, HORA_ERR_NOT_INITIALIZED, or such a failure. */
HORA_API hora_status_t hora_shutdown(void);
HORA_API int hora_initialized(void);

/*
 * hora_abort - an error exit: this rank gives up, and the others must not
 * wait for it. Not collective; call it from any application thread when the
 * program is about to end on an error (a corrupt record, a failed write, out
 * of memory, a failed collective), then exit non-zero:
 *
 *     hora_status_t st = ...;                  // the error, from any layer
 *     fprintf(stderr, "prog: %s\n", msg);
 *     hora_abort(st, msg);                     // msg: what a peer should print
 *     exit(1);                                 // no hora_shutdown, no MPI_Finalize
 *
 * It prints nothing at the default log level: the error is the caller's to
 * print, once (as above); HORA_LOG_LEVEL=debug shows the abort itself.
 * What it does, in this order, without waiting for any peer to agree:
 *  - every rank on this host learns of it through shared memory at once
 *    (their blocked waits wake up); every rank, on this host or another,
 *    through an MPI message that its coordinator and its waits poll for
 *    (about every 20 ms, or within 1 s when its coordinator is idle). From
 *    then on their blocked direct collectives, their pending requests and
 *    every later request or collective fail with `status` and the message
 *    "rank R aborted: <message>"; their hora_shutdown returns that failure
 *    without waiting for this rank. A peer blocked on this rank over UCX
 *    also sees it lose this rank once this process exits.
 *  - this rank's coordinator stops (its pending requests fail the same way).
 *  - it returns once the MPI messages are out and every host peer has seen
 *    the abort, or after 2 s at most (a peer busy outside hora sees it later).
 * It does not call MPI_Abort: the peers are meant to report the reason
 * themselves. Ending the job is left to mpirun, which kills what is left of
 * it as soon as a rank exits non-zero without MPI_Finalize (Open MPI: within
 * a second). After hora_abort do not call MPI_Finalize (it would wait for
 * peers that may never come; hora skips its own at exit) and do not call
 * hora_* functions other than hora_shutdown, hora_wait/test and
 * hora_request_* (which return the failure); hora_init refuses to run again.
 * Nothing of hora's is left in /dev/shm: its pools are unlinked as soon as
 * the host peers have mapped them, at hora_init. (Open MPI 4.1's own
 * shared-memory BTL may leave its 4 MiB segment files there after any
 * abnormal end of a job, MPI_Abort included;
 * OMPI_MCA_btl_vader_backing_directory puts them elsewhere.)
 * status: any error code (HORA_OK or HORA_IN_PROGRESS become
 * HORA_ERR_SHUTDOWN); message may be NULL. Returns
 * status (so `return hora_abort(st, msg);` works), or
 * HORA_ERR_NOT_INITIALIZED outside hora_init .. hora_shutdown.
 */
HORA_API hora_status_t hora_abort(hora_status_t status, const char *message);

/*
 * Bootstraps and elastic worlds (runtime/README.md "Bootstraps and elastic
 * worlds"). Under mpirun a world has one generation and fixed members. Under
 * hora-run (HORA_RDZV set, no MPI launcher; HORA_BOOTSTRAP) hora_init takes
 * its world from hora-run's rendezvous store, without MPI: then process
 * sets, alltoall and op Adasum are HORA_ERR_UNSUPPORTED, and the stall
 * inspector names missing ranks without their stacks.
 *
 * With hora-run --elastic the world re-forms without restarting processes:
 *  - a lost member (a worker or host that dies): every survivor's pending and
 *    later collectives and requests fail with HORA_ERR_PEER_LOST and
 *    "generation G: <what hora-run saw>", within about hora-run's heartbeat
 *    timeout; nothing half-reduced succeeds. Each survivor calls
 *    hora_shutdown (its status may be ignored), then hora_init, which joins
 *    generation G+1 with the new rank and size hora-run assigned (it waits
 *    up to HORA_JOIN_TIMEOUT_S for it);
 *  - a host that arrives waits until hora_elastic_check, called by every
 *    rank at a boundary of the program's choosing (after a commit of its
 *    state), says hosts wait; every rank then calls hora_elastic_reform and
 *    hora_init, and the newcomers' first hora_init joins the same generation.
 *    The newcomers have no state: the program sends it (a broadcast).
 *
 * hora_bootstrap: "mpi", "store"; "none" outside hora_init .. hora_shutdown.
 * hora_generation: 0 under mpi, the store's generation under hora-run; -1
 * outside. hora_elastic: 1 when the world can re-form.
 * hora_elastic_check: collective; *hosts_waiting (the same on every rank)
 * the hosts waiting to be taken in; 0 when not elastic. One 8-byte
 * all-reduce (and a store request on rank 0).
 * hora_elastic_reform: collective; ends this generation as hora_shutdown
 * does and asks hora-run for the next one (then call hora_init).
 * HORA_ERR_UNSUPPORTED where hora_elastic() is 0. */
HORA_API const char *hora_bootstrap(void);
HORA_API int hora_generation(void);
HORA_API int hora_elastic(void);
HORA_API hora_status_t hora_elastic_check(int *hosts_waiting);
HORA_API hora_status_t hora_elastic_reform(void);

/* Topology. Undefined (-1) before hora_init. */
HORA_API int hora_rank(void);       /* rank in MPI_COMM_WORLD */
HORA_API int hora_size(void);       /* number of ranks */
HORA_API int hora_local_rank(void); /* rank inside this (possibly virtual, HORA_FAKE_NODES) node */
HORA_API int hora_local_size(void);
HORA_API int hora_node_rank(void); /* index of this node, 0 .. node_count-1 */
HORA_API int hora_node_count(void);

/* Name of the transport the flat ring uses ("shm", "mpi"). */
HORA_API const char *hora_transport_name(void);

/* What this libhora was built with, callable before hora_init: words
 * "key=value" separated by spaces, "version=" (the project's version) then
 * "shm=", "ucx=", "mpi=", "cudaipc=" (the transports) and "cuda=" (the
 * device engine), each 1 or 0. A later libhora may add keys. */
HORA_API const char *hora_build_info(void);

/* Rank 0's latest straggler report (HORA_STRAGGLER_S, every that many
 * seconds): *rank is the rank that was the last to submit in at least half
 * of the coordinator's cycles of the period (and clearly more often than
 * chance), *last_fraction that share, *lag_ms its median lag behind the
 * other ranks, *cycles the cycles counted; *rank is -1 when no rank
 * stands out, before the first report, on other ranks than 0, and with
 * HORA_STRAGGLER_S=0. Any pointer may be NULL. HORA_OK, or
 * HORA_ERR_NOT_INITIALIZED. */
HORA_API hora_status_t hora_straggler(int *rank, double *last_fraction, double *lag_ms, long long *cycles);

/*
 * The timeline: a Chrome-trace JSON file (chrome://tracing, Perfetto,
 * tools/hora-timeline) of every request the coordinator runs, a row per
 * tensor name with its NEGOTIATE, QUEUE, op and copy spans, written by rank
 * 0 only (a process set's coordinator: by its first member, to the path
 * with ".set<id>" appended). The file is a valid JSON array after every
 * event, bounded by HORA_TIMELINE_MAX_MB. HORA_TIMELINE starts one at
 * hora_init; these calls start and stop one at any time after it.
 *
 * hora_timeline_start: stop the running timeline if there is one (from
 * HORA_TIMELINE or an earlier call; its file is complete), then open path
 * (truncated; the same path again starts it over) and write every later
 * event to it, in every coordinator of this rank: the world's and those of
 * the process sets this rank is in, and the sets created while it runs.
 * Not collective, and no peer is waited for: call it on every rank, as
 * Horovod's users do (ranks other than 0 only record that it runs). Starting
 * twice is starting again (the first file is complete and closed).
 * Returns HORA_OK, HORA_ERR_INVALID_ARG (path NULL, empty or over 511
 * bytes), HORA_ERR_SYSTEM (rank 0 cannot create or write the file: the
 * message names it and the OS error; no timeline runs then),
 * HORA_ERR_NO_MEMORY, HORA_ERR_NOT_INITIALIZED, HORA_ERR_SHUTDOWN (after
 * an abort).
 *
 * hora_timeline_stop: the running timeline's file is complete and closed
 * when it returns (no event is written to it later, so it may be read,
 * moved or started again); HORA_OK also when none runs (nothing happens).
 * Returns HORA_OK, HORA_ERR_NO_MEMORY, HORA_ERR_NOT_INITIALIZED,
 * HORA_ERR_SHUTDOWN (after an abort).
 *
 * hora_timeline_mark_cycles: on (non-zero) adds a CYCLE_START instant, on a
 * row of its own named "cycles", at the start of every coordinator cycle
 * (every HORA_CYCLE_TIME_MS while requests wait, about once a second when
 * idle) to the running timeline and those started later; 0 stops it (the
 * default). Returns HORA_OK, HORA_ERR_NO_MEMORY, HORA_ERR_NOT_INITIALIZED,
 * HORA_ERR_SHUTDOWN.
 *
 * Thread-safe, also while requests run: the coordinators take the change
 * between two cycles, so each call waits at most for the cycle in progress
 * (its negotiation and the collectives it runs), never for a nap. Not
 * while hora_shutdown runs on another thread.
 */
HORA_API hora_status_t hora_timeline_start(const char *path);
HORA_API hora_status_t hora_timeline_stop(void);
HORA_API hora_status_t hora_timeline_mark_cycles(int on);

/* What this process's application is doing, as text: called (on a helper
 * thread of libhora's, never the application's) when rank 0's stall
 * inspector asks this rank for its stack (HORA_STALL_STACKS). It writes at
 * most buf_bytes bytes of text, lines ending in '\n', into buf and returns
 * how many it wrote; the text is cut to buf_bytes - 1. It may take its time:
 * rank 0 reports the rank silent after a few seconds and goes on. */
typedef size_t (*hora_stack_provider_t)(char *buf, size_t buf_bytes, void *arg);

/* Register the provider of this process's stack text (hora.torch registers
 * one that formats the Python stack of the main thread); NULL goes back to
 * the default, a native backtrace of the thread that last submitted a
 * request (or called hora_init), which libhora takes by sending that thread
 * a real-time signal (SIGRTMIN+7; not where the program handles it itself;
 * a sleep it interrupts returns early with EINTR). Callable at any time,
 * before hora_init too; the provider stays until replaced: unregister it
 * before whatever it calls goes away. Returns HORA_OK. */
HORA_API hora_status_t hora_set_stack_provider(hora_stack_provider_t provider, void *arg);

/*
 * Memory the transports can share without copies: on one host, peers map it
 * and reduce straight from it. Ordinary malloc'd buffers work everywhere too,
 * at the price of a copy through a staging buffer. Must be called between
 * hora_init and hora_shutdown; HORA_ALIGN_BYTES aligned (page aligned in practice).
 * hora_mem_alloc returns HORA_OK, HORA_ERR_NO_MEMORY, HORA_ERR_INVALID_ARG,
 * HORA_ERR_NOT_INITIALIZED; *ptr is set only on success.
 */
HORA_API hora_status_t hora_mem_alloc(size_t bytes, void **ptr);
HORA_API hora_status_t hora_mem_free(void *ptr);
/* 1 if ptr lies inside memory from hora_mem_alloc or hora_mem_alloc_device. */
HORA_API int hora_mem_is_shared(const void *ptr);

/*
 * Device memory the ranks of a host share (cudaipc): carved out of one
 * device pool per rank (HORA_CUDA_POOL_BYTES, allocated on the runtime's
 * device at hora_init, its IPC handle opened by every host peer), so a
 * one-host device all-reduce reads and writes the peers' buffers directly.
 * cudaMalloc'd buffers work too, through a copy into the pool. HORA_ALIGN_BYTES
 * aligned; freed with hora_mem_free. HORA_ERR_UNSUPPORTED without device
 * support (hora_cuda_device() < 0), HORA_ERR_NO_MEMORY when the pool is full
 * (the message names HORA_CUDA_POOL_BYTES).
 */
HORA_API hora_status_t hora_mem_alloc_device(size_t bytes, void **ptr);
/* The CUDA device the runtime uses on this rank, -1 when it has none (a build
 * without CUDA, no device, HORA_CUDA=0, or a rank of the job without one):
 * the device current on the thread that called hora_init, or with
 * HORA_CUDA_DEVICE=local the host-local rank modulo the device count, which
 * hora_init makes current on that thread. */
HORA_API int hora_cuda_device(void);

/*
 * Direct (non-negotiated) collectives over all ranks. Every rank calls them
 * in the same order with the same count, dtype and op (a mismatch the
 * transport can see gives HORA_ERR_MISMATCH). Blocking. send == recv means in
 * place. Any count, including 0 and counts smaller than the number of ranks.
 *
 * Buffers may be device memory of the runtime's device (found with
 * cudaPointerGetAttributes; all buffers of a call in the same kind, every
 * rank passing the same kind): the data must be ready when the call is made
 * (synchronise the stream that produced it), and the result is complete on
 * the device when the call returns. Device buffers from hora_mem_alloc_device
 * are reduced in place across the ranks of a host; others go through the
 * device pool (one copy each way).
 *
 * Failures. A peer that does not answer within HORA_TIMEOUT_S gives
 * HORA_ERR_TIMEOUT, a dead one HORA_ERR_TRANSPORT, a peer that called
 * hora_abort its status ("rank R aborted: ..."), one that called
 * hora_shutdown HORA_ERR_SHUTDOWN. One outcome: over shared memory (the shm
 * transport: every rank of the operation on one host) every rank that
 * returns from an operation returns the same status, also a rank that was
 * stopped past the timeout and resumed after its peers gave up; the
 * message of a rank that did not itself detect the failure names the rank
 * that did and its reason. Over ucx and mpi (between hosts, or with shm
 * disabled) the same holds through an agreement at the end of every
 * operation: the operation's first rank decides success only after every
 * rank reported success, and sends every rank the verdict (a stopped rank
 * finds it when resumed). One case is left: that deciding rank stopped
 * longer than twice HORA_TIMEOUT_S after every report came and before its
 * verdict left; the others then fail with HORA_ERR_TIMEOUT naming it while
 * it, resumed, returns HORA_OK. After a failure the contents of
 * recv are undefined, and every later direct collective fails at once with
 * the same status: the program should end (hora_abort, exit non-zero).
 */

/*
 * recv[i] = op over ranks of send[i], i < count.
 *
 * f16 and bf16 accumulate in fp32. Over peer memory (one host, the one-shot
 * algorithm) every element is reduced by one rank from all n inputs at once:
 * the inputs are widened to fp32 and combined in rank order 0..n-1 (and
 * divided by n for AVG) in fp32, and the result is rounded once - the same
 * bits as rounding that fp32 result yourself. The ring (HORA_ALGORITHM=ring,
 * the ucx and mpi transports, the hierarchical all-reduce) passes partial
 * sums between ranks in the dtype itself, so each of at most n-1 partial
 * sums is rounded once: |result - exact sum| <= g(n-1) * sum_i |x_i| (for
 * AVG, both sides divided by n), g(k) = k u / (1 - k u), u = 2^-11 for f16
 * and 2^-8 for bf16, plus a term of 2^-22 sum_i |x_i| for the fp32
 * arithmetic in between. Other dtypes reduce in their own arithmetic; f32
 * and f64 sums depend on the order, which is fixed per algorithm and rank
 * count (every rank gets the same bits). HORA_REPRODUCIBLE=1 or exact fixes
 * the order, or removes it (hora_reproducible_t, above the async API).
 */
HORA_API hora_status_t hora_allreduce(const void *send, void *recv, size_t count, hora_dtype_t dtype, hora_op_t op);

/* Rank r's shard of a vector of count elements: elements
 * [offset, offset + shard_count); shards differ by at most one element, the
 * first count % size shards are one longer. */
HORA_API void hora_shard(size_t count, int size, int rank, size_t *offset, size_t *shard_count);

/* Reduce count elements across ranks and leave rank r's shard (hora_shard) in
 * recv, which holds shard_count elements. recv must not overlap send. */
HORA_API hora_status_t hora_reduce_scatter(const void *send, void *recv, size_t count, hora_dtype_t dtype,
                                           hora_op_t op);

/* Rank r contributes counts[r] elements from send; recv (sum of counts
 * elements) receives every rank's block in rank order. counts[] must be the
 * same on every rank. send may be recv + (sum of counts[0..r-1]) (in place). */
HORA_API hora_status_t hora_allgatherv(const void *send, void *recv, const size_t *counts, hora_dtype_t dtype);

/* buf on root is sent to buf on every rank. */
HORA_API hora_status_t hora_broadcast(void *buf, size_t count, hora_dtype_t dtype, int root);

/* Returns once every rank has called it (on the user's channels, like the
 * collectives above; the coordinator's requests are not ordered by it). */
HORA_API hora_status_t hora_barrier(void);

/* ------------------------------------------------------------------------
 * Preemption: a clean stop at a step boundary, on every rank at the same step.
 *
 * A rank asks for a stop when it receives SIGTERM (only once the program
 * asked for that: hora_preempt_watch), when the file HORA_PREEMPT_FILE names
 * exists (every rank looks, with stat(), at each agreement), or when the
 * program calls hora_preempt_request. At every step boundary every rank calls
 * hora_preempt_agree with the step it has completed; the call tells every rank
 * the same thing: go on, or stop here because some rank asked. A rank that
 * asks during step k (or before it) therefore stops all ranks at the end of
 * step k, or at the end of k + 1 when its request comes after its own
 * agreement of step k: within one step. A SIGTERM or hora_preempt_request
 * is never withdrawn (every later agreement says stop again); the file asks
 * while it exists. What a stop does (a checkpoint, an
 * exception in hora.torch, exit 0) is the program's: hora-train writes a
 * checkpoint on rank 0 and every rank exits 0 (trainer/README.md).
 *
 * Launchers: Open MPI's mpirun, when it receives SIGTERM itself, forwards it
 * to the ranks and kills them shortly after; send SIGTERM to the ranks (or
 * create HORA_PREEMPT_FILE) to give them time to save.
 * ------------------------------------------------------------------------ */

/* Why a rank asked (bits of hora_preempt_agree's *cause). */
#define HORA_PREEMPT_CAUSE_SIGTERM 1 /* SIGTERM, watched (hora_preempt_watch) */
#define HORA_PREEMPT_CAUSE_FILE 2    /* the file HORA_PREEMPT_FILE names exists */
#define HORA_PREEMPT_CAUSE_REQUEST 4 /* hora_preempt_request */

/* hora_preempt_watch's flags. */
#define HORA_PREEMPT_WATCH_SIGTERM 1

/* flags HORA_PREEMPT_WATCH_SIGTERM: install a SIGTERM handler that asks
 * for a stop, replacing the action SIGTERM had; 0: put that action back.
 * The handler only sets an atomic flag (SA_RESTART: interrupted system
 * calls go on), every time: a second SIGTERM (a launcher forwarding the
 * one it got) does not kill the process either. Process-wide, callable at
 * any time, before hora_init too; a SIGTERM received before the next
 * agreement is kept. Not from a signal handler. Returns HORA_OK,
 * HORA_ERR_INVALID_ARG (another bit in flags), HORA_ERR_SYSTEM (sigaction
 * failed). */
HORA_API hora_status_t hora_preempt_watch(int flags);

/* Ask for a stop from the program (its own signal handler, a scheduler's
 * notice): the next agreement stops every rank. Async-signal-safe, callable
 * at any time, before hora_init too. Returns HORA_OK. */
HORA_API hora_status_t hora_preempt_request(void);

/* The agreement, at a step boundary: collective over the world, a direct
 * collective (the rules of hora_allreduce: every rank calls it in the same
 * order with the other direct collectives, from one thread at a time).
 * step: the step every rank has just completed (>= 0, the same on every
 * rank). On HORA_OK *stop_step is step when some rank asked for a stop
 * (every rank stops there), else -1; *by_rank (may be NULL) the lowest rank
 * that asked (-1: none), *cause (may be NULL) that rank's causes
 * (HORA_PREEMPT_CAUSE_*; 0: none). Every rank returns the same outcome and
 * values: the ranks' requests and steps travel in one 32-byte all-reduce
 * (MAX), so a step that differs between ranks fails on every rank with
 * HORA_ERR_MISMATCH naming both, a negative step or a NULL stop_step on any
 * rank with HORA_ERR_INVALID_ARG, and a failed collective on every rank as
 * hora_allreduce fails (HORA_ERR_TIMEOUT, HORA_ERR_TRANSPORT, a peer's
 * abort, HORA_ERR_SHUTDOWN). HORA_ERR_NOT_INITIALIZED outside hora_init ..
 * hora_shutdown (on that rank alone). Cost: one small all-reduce, about a
 * microsecond or less at np 2 over shared memory, plus a stat() when
 * HORA_PREEMPT_FILE is set. */
HORA_API hora_status_t hora_preempt_agree(int64_t step, int64_t *stop_step, int *by_rank, int *cause);

/* ------------------------------------------------------------------------
 * Negotiated asynchronous operations (the coordinator).
 *
 * Any thread may enqueue requests, each under a name that must be unique
 * among requests in flight on this rank. A background coordinator thread
 * agrees with the other ranks which named requests are ready everywhere,
 * fuses small allreduces into one buffer (HORA_FUSION_THRESHOLD), and runs
 * them in the same order on every rank. Requests that disagree across ranks
 * (dtype, shape, op, root, scales, memory kind) fail on every rank with a
 * message naming both values; the runtime keeps serving the next ones.
 * ------------------------------------------------------------------------ */

typedef struct hora_request *hora_request_t;

typedef enum {
    HORA_COMPRESSION_NONE = 0,
    HORA_COMPRESSION_FP16 = 1, /* f32 data travels as fp16 (reduced with fp32 accumulation) */
    HORA_COMPRESSION_BF16 = 2,
} hora_compression_t;

/* Where a request's buffers live. HORA_MEMORY_CUDA: device memory of the
 * runtime's CUDA device (hora_cuda_device: the device current on the thread
 * that called hora_init); cudaMalloc'd, or from hora_mem_alloc_device, which
 * the ranks of a host reduce from without a copy (cudaipc). A build without
 * CUDA, or a job where a rank has no device, refuses HORA_MEMORY_CUDA with
 * HORA_ERR_UNSUPPORTED at submission. */
typedef enum { HORA_MEMORY_HOST = 0, HORA_MEMORY_CUDA = 1, HORA_MEMORY_COUNT = 2 } hora_memory_t;

#define HORA_MAX_DIMS 8

/*
 * Bitwise-reproducible all-reduce sums (hora_opts_t.reproducible, and
 * HORA_REPRODUCIBLE=0|1|exact for every all-reduce, direct or negotiated).
 *  - HORA_REPRODUCIBLE_RANKS (HORA_REPRODUCIBLE=1): every element is reduced
 *    by one n-way reduce of all n inputs in rank order 0..n-1 (f16/bf16 in
 *    fp32, rounded once; f32 in fp32): the one-shot algorithm's result
 *    (hora_allreduce), the same bits for a given world size whatever the
 *    algorithm (HORA_ALGORITHM, HORA_HIERARCHICAL), transport, fusion layout
 *    or order in which ranks arrive. Over shared memory it runs one shot;
 *    over ucx/mpi every rank gathers its shard from every rank, reduces it
 *    and the shards are allgathered (the ring's traffic); the hierarchical
 *    all-reduce is not used.
 *  - HORA_REPRODUCIBLE_EXACT (HORA_REPRODUCIBLE=exact): the same, but each
 *    f32/f16/bf16 element's SUM is the exact sum of its inputs rounded once
 *    to nearest even, so the bits depend only on the multiset of addends:
 *    also the same for any world size. A NaN, or +inf with -inf, gives the
 *    dtype's default quiet NaN. AVG rounds the exact sum to f32, divides in
 *    f32 and rounds to the dtype. Host memory (device buffers on a channel
 *    through host memory too); device buffers reduced on the device are
 *    refused with HORA_ERR_UNSUPPORTED.
 * Other dtypes and ops reduce in rank order in both modes (integers are
 * exact anyway; f64 sums and float products are reproducible for a given
 * world size only). All-reduce only (reduce-scatter keeps its algorithm's
 * order); a process set (opts.process_set != 0) refuses both modes
 * (HORA_ERR_UNSUPPORTED: its MPI reduction fixes no order). Every rank must
 * ask for the same mode: the coordinator fails a request whose ranks
 * disagree (HORA_ERR_MISMATCH); direct collectives need the same
 * HORA_REPRODUCIBLE on every rank.
 */
typedef enum {
    HORA_REPRODUCIBLE_DEFAULT = 0, /* what HORA_REPRODUCIBLE says (0: off) */
    HORA_REPRODUCIBLE_RANKS = 1,   /* rank order: the same bits for a given world size */
    HORA_REPRODUCIBLE_EXACT = 2,   /* exact sum rounded once: the same bits for any world size */
} hora_reproducible_t;

/*
 * Options of a negotiated request. Initialise with HORA_OPTS_INIT (which sets
 * struct_bytes), then change the fields you need:
 *
 *     hora_opts_t opts = HORA_OPTS_INIT;
 *     opts.prescale = 0.5;
 *
 * The struct grows without breaking the programs built against an older
 * hora.h. struct_bytes is sizeof(hora_opts_t) as the caller's hora.h declares
 * it; libhora reads a field only when it lies wholly inside the caller's
 * first struct_bytes bytes, and gives every other field its HORA_OPTS_INIT
 * value. So an older program (a smaller struct_bytes) runs with a newer
 * libhora and gets the defaults of the fields it does not know. Refused, with
 * HORA_ERR_INVALID_ARG and a message saying which:
 *  - struct_bytes 0: the struct was not initialised with HORA_OPTS_INIT
 *    (e.g. `hora_opts_t o = {0}` or memset);
 *  - struct_bytes below sizeof(size_t): it cannot even hold struct_bytes;
 *  - struct_bytes above this libhora's sizeof(hora_opts_t): the program was
 *    built against a newer hora.h than the libhora it loaded (whose fields
 *    this libhora cannot honour), or against one from before struct_bytes
 *    (its first field, prescale, read as a size is far larger).
 * An array of options (hora_grouped_reducescatter_async) is strided by its
 * first member's struct_bytes, which every member must repeat.
 * For the maintainers: fields are only ever added at the end, each at or
 * after the previous sizeof(hora_opts_t) (never in its tail padding, which an
 * older caller counts in struct_bytes but leaves undefined), with a default
 * in HORA_OPTS_INIT, a row in runtime/api/api_opts.c (its build fails
 * without) and the field in runtime/python/hora's Opts (test 'python
 * binding' fails without).
 */
typedef struct {
    size_t struct_bytes; /* sizeof(hora_opts_t) of the caller's hora.h (HORA_OPTS_INIT sets it) */
    double prescale;     /* inputs multiplied by this before the reduction (1 = none) */
    double postscale;    /* results multiplied by this after it (1 = none) */
    hora_compression_t compression;
    hora_memory_t memory;
    int ndim;                    /* 0: a 1-D tensor of count elements */
    int64_t dims[HORA_MAX_DIMS]; /* shape; the product must equal count */
    /* HORA_MEMORY_CUDA only. device: the buffers' device (-1: the runtime's;
     * any other value must equal it). When the data is ready: ready_event
     * (a cudaEvent_t the caller recorded after producing it) if not NULL,
     * else the work queued so far on stream (a cudaStream_t; NULL is the
     * legacy default stream): the runtime records an event on it at
     * submission and its communication stream waits for that event. */
    int device;
    void *stream;
    void *ready_event;
    /* The ranks that run the request: HORA_PROCESS_SET_WORLD (0) or a set
     * from hora_process_set_create, which this rank must belong to. */
    int process_set;
    /* hora_allreduce_async / grouped: HORA_REPRODUCIBLE_RANKS or _EXACT asks
     * for that reproducible sum for this request whatever HORA_REPRODUCIBLE
     * says; HORA_REPRODUCIBLE_DEFAULT (0) follows HORA_REPRODUCIBLE. Other
     * requests must leave it 0. */
    int reproducible;
} hora_opts_t;

#define HORA_PROCESS_SET_WORLD 0

#define HORA_OPTS_INIT                                                                                  \
    {                                                                                                   \
        sizeof(hora_opts_t), 1.0, 1.0, HORA_COMPRESSION_NONE, HORA_MEMORY_HOST, 0, {0}, -1, NULL, NULL, \
            HORA_PROCESS_SET_WORLD, HORA_REPRODUCIBLE_DEFAULT                                           \
    }

/*
 * Process sets (Horovod's): a subset of the ranks with a coordinator of its
 * own, which negotiates, caches, fuses, inspects stalls and writes a
 * timeline (HORA_TIMELINE's or hora_timeline_start's path with ".set<id>"
 * appended) for its members only.
 * A request names its set in opts.process_set; ranks refer to world ranks
 * everywhere (a broadcast's root, messages), while an allgather's or
 * alltoall's per-rank counts, an alltoall's splits and a reducescatter's
 * shards are per member, in the order of ascending world rank. Requests on
 * disjoint sets, and on a set and the world, run concurrently. Sets move
 * host memory only (HORA_MEMORY_CUDA on a set is HORA_ERR_UNSUPPORTED), over
 * MPI on a communicator of their own; hora_join is the world's alone.
 *
 * hora_process_set_create: collective over every rank (members or not),
 * all passing the same ranks (any order, no repeats; a mismatch fails on
 * every rank with HORA_ERR_MISMATCH). *set is a new id > 0, the same on
 * every rank; ids are never reused. HORA_PROCESS_SETS=0,1;2,3 creates sets
 * (ids 1, 2, ...) at hora_init. hora_process_set_free: collective over every
 * rank; the set's pending requests fail with HORA_ERR_SHUTDOWN. hora_shutdown
 * frees the sets left.
 */
HORA_API hora_status_t hora_process_set_create(const int *ranks, int count, int *set);
HORA_API hora_status_t hora_process_set_free(int set);
/* Members (world ranks, ascending; up to max of them into ranks, which may be
 * NULL), and this rank's place among them (-1: not a member). Local: any
 * rank may ask about any set. HORA_ERR_INVALID_ARG for an unknown id. */
HORA_API hora_status_t hora_process_set_info(int set, int *size, int *rank_in_set, int *ranks, int max);

/*
 * Enqueue an allreduce of count elements from send into recv (may be equal).
 * opts may be NULL. On HORA_OK *req is set and must be released with
 * hora_request_free after it completes. Returns HORA_ERR_DUPLICATE at once when
 * a request with this name is in flight on this rank (that one still
 * completes), HORA_ERR_INVALID_ARG (also: a buffer that is not where
 * opts->memory says, opts->device other than the runtime's, or an
 * opts->struct_bytes that hora_opts_t's rule refuses; the same for every
 * *_async call), HORA_ERR_UNSUPPORTED (HORA_MEMORY_CUDA where the runtime
 * has no device, hora_cuda_device() < 0, or on a process set: the same for
 * every *_async call, and alltoall refuses HORA_MEMORY_CUDA even with a
 * device; a reproducible mode on a process set), HORA_ERR_NOT_INITIALIZED,
 * HORA_ERR_SHUTDOWN.
 */
HORA_API hora_status_t hora_allreduce_async(const char *name, const void *send, void *recv, size_t count,
                                            hora_dtype_t dtype, hora_op_t op, const hora_opts_t *opts,
                                            hora_request_t *req);

/* A group of allreduces negotiated and fused atomically: none of them runs
 * before all are ready on every rank. reqs[i] is set for each member. */
HORA_API hora_status_t hora_grouped_allreduce_async(int n, const char *const *names, const void *const *send,
                                                    void *const *recv, const size_t *counts, hora_dtype_t dtype,
                                                    hora_op_t op, const hora_opts_t *opts, hora_request_t *reqs);

/* Broadcast count elements of buf from root. */
HORA_API hora_status_t hora_broadcast_async(const char *name, void *buf, size_t count, hora_dtype_t dtype, int root,
                                            const hora_opts_t *opts, hora_request_t *req);

/* Allgather along the first dimension, which may differ per rank (all other
 * dimensions must match). The runtime allocates the result; after completion
 * hora_request_result gives it and each rank's count. */
HORA_API hora_status_t hora_allgather_async(const char *name, const void *send, size_t count, hora_dtype_t dtype,
                                            const hora_opts_t *opts, hora_request_t *req);
/* Result of a finished allgather or alltoall: data (owned by req, valid
 * until hora_request_free), total elements, and per-rank element counts
 * (size entries, owned by req). */
HORA_API hora_status_t hora_request_result(hora_request_t req, void **data, size_t *total_count,
                                           const size_t **rank_counts);

/* Reduce-scatter along the first dimension (Horovod's reducescatter):
 * send holds count elements of shape opts->dims (1-D when opts->ndim is 0);
 * the first dimension d0 is split as hora_shard(d0, size, rank) splits it
 * (the first d0 % size ranks get one row more), and recv receives this
 * rank's rows of the reduction: rows * (count / d0) elements. op and
 * prescale/postscale as for hora_allreduce_async (AVG divides by the number
 * of ranks); every rank passes the same shape. Compression is refused. */
HORA_API hora_status_t hora_reducescatter_async(const char *name, const void *send, void *recv, size_t count,
                                                hora_dtype_t dtype, hora_op_t op, const hora_opts_t *opts,
                                                hora_request_t *req);
/* A group of reduce-scatters negotiated atomically (none runs before all are
 * ready on every rank). opts: NULL, or an array of n (member i's shape and,
 * the same for every member, its scales and memory kind; strided by
 * opts[0].struct_bytes, see hora_opts_t). */
HORA_API hora_status_t hora_grouped_reducescatter_async(int n, const char *const *names, const void *const *send,
                                                        void *const *recv, const size_t *counts, hora_dtype_t dtype,
                                                        hora_op_t op, const hora_opts_t *opts, hora_request_t *reqs);

/* Alltoall along the first dimension (Horovod's alltoall): send holds count
 * elements of shape opts->dims (1-D when opts->ndim is 0); splits (size
 * entries, may be NULL) says how many first-dimension rows go to each rank,
 * in rank order, and sums to d0; NULL sends d0 / size rows to each (d0
 * must then be a multiple of size). Every dimension after the first must
 * match across ranks; splits may differ. The runtime allocates the result:
 * hora_request_result gives the rows received from every rank in rank order,
 * the total element count, and the elements received from each rank (size
 * entries; divide by count / d0 for rows). Host memory only (HORA_MEMORY_CUDA
 * is HORA_ERR_UNSUPPORTED). The data moves with MPI_Alltoallv, at most
 * INT_MAX elements per rank and call. */
HORA_API hora_status_t hora_alltoall_async(const char *name, const void *send, size_t count, hora_dtype_t dtype,
                                           const size_t *splits, const hora_opts_t *opts, hora_request_t *req);

/* A negotiated barrier: completes once every rank (of opts->process_set;
 * opts may be NULL) has submitted a barrier under this name, in the
 * coordinator's order with the other requests. */
HORA_API hora_status_t hora_barrier_async(const char *name, const hora_opts_t *opts, hora_request_t *req);

/*
 * Blocking. This rank has no more data: until every rank has joined it
 * contributes zeros to the allreduces that other ranks submit. Every other
 * operation (allgather, broadcast, alltoall, reducescatter, barrier)
 * submitted while a rank has joined (and had not submitted it before) fails
 * on every rank that submitted it, with HORA_ERR_INVALID_ARG and a message
 * naming the joined rank, as Horovod raises: at once, without waiting for
 * the other ranks to submit the same name. Returns when all ranks have
 * joined; *last_rank (may be NULL) is the rank that joined last (the
 * highest of those that joined in the last cycle).
 */
HORA_API hora_status_t hora_join(int *last_rank);

/* Order the work queued on stream after this request (a cudaStream_t, NULL:
 * the legacy default stream) without blocking the host: the stream waits on
 * a host-mapped flag the coordinator sets when the request completes
 * (cuStreamWaitValue32), or, where the device cannot do that, this call waits
 * for the request on the host and returns its failure, if any. Otherwise
 * the request's status comes from hora_wait or hora_test; after a failure the
 * stream is released too and the contents of recv are undefined.
 * HORA_ERR_UNSUPPORTED without device support. A caller's ready_event must
 * not be recorded again before the request completes. */
HORA_API hora_status_t hora_stream_wait(hora_request_t req, void *stream);

/* Block until req completes; returns its final status. */
HORA_API hora_status_t hora_wait(hora_request_t req);
/* *done = 1 when req completed (its status is returned), else HORA_IN_PROGRESS. */
HORA_API hora_status_t hora_test(hora_request_t req, int *done);
/* Human-readable message of a failed request ("" if it succeeded or is pending). */
HORA_API const char *hora_request_error(hora_request_t req);
/* Release a request; waits for it first if it is still in flight. */
HORA_API void hora_request_free(hora_request_t req);

/* Print every HORA_* setting: name, value in force, default and what it does;
 * then, as '#' lines, the HORA_* variables of hora's tools, which libhora
 * accepts without its unknown-setting warning. */
HORA_API void hora_config_print(FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* HORA_H */
