/*
 * sim.h - hora-sim's model of one data-parallel training step (prefix sim_).
 *
 * Three layers, one file each:
 *   sim_net.c   a topology of links with alpha-beta costs and the time of a
 *               phase of concurrent flows (max-min fair share, or the busiest
 *               link's bytes for the parameter-server schedules);
 *   sim_coll.c  the message schedules: hora's flat ring and hierarchical
 *               all-reduce, MXNet's dist_device_sync and TensorFlow's
 *               parameter servers, as phases of flows;
 *   sim_step.c  one step: the model's gradients (trainer/model/model.h's
 *               tr_model_describe) ready in backprop order, the coordinator's
 *               cycles, fusion by the runtime's own coord_fuse_list, the
 *               exchanges one after another, their overlap with backward.
 * sim_report.h declares the reports built on it (presets, sweeps, tables,
 * JSON, plots, the study, the validation against measured runs); hora-sim.c
 * is the program.
 */
#ifndef HORA_SIM_H
#define HORA_SIM_H

#include <stddef.h>

#include "model.h"

#define SIM_GBIT (1e9 / 8) /* bytes/s in one Gbit/s */

/* One direction of a port. A TCP connection alone uses eff_uni of the
 * bandwidth when it carries data one way, eff_bidir when data flows both
 * ways on it (a ring of two, where left and right are the same peer:
 * acknowledgements queue behind data). Connections sharing a port fill each
 * other's gaps: the port idles only when every one of them idles, so k
 * connections of efficiency e_i use 1 - prod(1 - e_i) of it. */
struct sim_link {
    double bandwidth; /* bytes/s, > 0 */
    double latency_s; /* alpha: per message */
    double eff_uni, eff_bidir;
};

/* Worker nodes of ranks_per_node ranks (rank r on node r / ranks_per_node),
 * each rank with its own port inside the node (NVLink, shared memory) and
 * each node with nics NICs (local rank l uses NIC l % nics). Parameter
 * servers live on endpoints after the ranks (sim_coll.c places them). */
struct sim_topo {
    int nodes;
    int ranks_per_node;
    int nics;
    struct sim_link intra;
    struct sim_link nic;
};

/* A connection of src -> dst moving bytes, weight identical connections
 * on the same path (what one flow entry stands for). Endpoints: ranks
 * 0..ranks-1, then servers; node_of gives each endpoint's node and nic its
 * NIC on that node. */
struct sim_flow {
    int src, dst;
    double bytes;  /* per connection */
    double weight; /* identical connections, >= 1 */
};

/* Where an endpoint lives. */
struct sim_place {
    int node, nic;
};

/* Bytes through each node's NICs (all of them together), per direction,
 * accumulated over the phases of a step. */
struct sim_traffic {
    double *node_bytes; /* [2 * nodes]: out, in */
    int nodes;
};

/* dst += factor x src. HORA_ERR_NO_MEMORY. */
hora_status_t sim_traffic_add(struct sim_traffic *dst, const struct sim_traffic *src, double factor);
/* The busiest node's busiest direction. */
double sim_traffic_max(const struct sim_traffic *t);
void sim_traffic_free(struct sim_traffic *t);

/* A phase: flows that start together; the time until the last one ends.
 * max-min fair share (progressive filling, rates recomputed as flows end)
 * when fair, else the busiest link's bytes over its capacity (a lower
 * bound, exact while that link stays busy: used where thousands of flows
 * make progressive filling slow). Plus the largest latency of a path.
 * places[e] for every endpoint used; traffic (may be NULL) accumulates.
 * HORA_ERR_NO_MEMORY. */
hora_status_t sim_phase_time(const struct sim_topo *t, const struct sim_place *places, int endpoints,
                             const struct sim_flow *flows, int count, int fair, struct sim_traffic *traffic,
                             double *time_out);

/* How a gradient buffer is exchanged. */
typedef enum {
    SIM_ALGO_RING = 0,     /* hora's flat ring over every rank */
    SIM_ALGO_HIER = 1,     /* hora's hierarchical: node reduce-scatter, cross rings, node allgather */
    SIM_ALGO_MXNET_PS = 2, /* MXNet kvstore dist_device_sync */
    SIM_ALGO_TF_PS = 3,    /* TensorFlow's native parameter servers */
    SIM_ALGO_COUNT = 4,
} sim_algo_t;

const char *sim_algo_name(sim_algo_t algo);
/* SIM_ALGO_COUNT for an unknown name. */
sim_algo_t sim_algo_from_name(const char *name);

/* One tensor of a buffer being exchanged: elements and its index in
 * PyTorch's (forward) order, which TensorFlow's round-robin placement uses. */
struct sim_tensor {
    size_t count;
    int var_index;
};

/* The time of exchanging (all-reducing, or pushing and pulling) one buffer
 * of bytes made of tensors[0..n) (elem_bytes each) on every rank (0 on one
 * rank). traffic (may be NULL) accumulates. HORA_ERR_NO_MEMORY,
 * HORA_ERR_INVALID_ARG for an unknown algo. */
hora_status_t sim_exchange_time(const struct sim_topo *t, sim_algo_t algo, size_t bytes,
                                const struct sim_tensor *tensors, int n, size_t elem_bytes, struct sim_traffic *traffic,
                                double *time_out);

/* The parameter-server schedules' two stages (push with MXNet's node
 * reduce, pull with its broadcast): stage_s[0], stage_s[1]; as
 * sim_exchange_time, whose time is their sum. HORA_ERR_INVALID_ARG for
 * hora's schedules. */
hora_status_t sim_ps_stages(const struct sim_topo *t, sim_algo_t algo, size_t bytes, const struct sim_tensor *tensors,
                            int n, size_t elem_bytes, struct sim_traffic *traffic, double stage_s[2]);

/* One ring all-reduce of count elements over ranks[0..n) of t (the flat
 * ring's building block, for the tests). HORA_ERR_NO_MEMORY. */
hora_status_t sim_ring_time(const struct sim_topo *t, const int *ranks, int n, size_t count, size_t elem_bytes,
                            struct sim_traffic *traffic, double *time_out);

/* The coordinator's settings (runtime/coord) and how far apart the ranks
 * make each gradient ready. */
struct sim_coord {
    size_t fusion_threshold; /* bytes; 0: no fusion */
    double cycle_time_s;
    double skew_s; /* how much later than the first rank the last submits a tensor */
};

/* Per-layer backward times: from FLOPs and a throughput, or measured. */
struct sim_model {
    char name[32];
    tr_param_desc_t *params; /* backprop order (tr_model_describe) */
    int count;
    size_t elem_bytes;  /* gradient dtype */
    double *backward_s; /* per parameter: its share of backward, ending when it is ready */
    double forward_s;
};

/* Describe model_name (tr_model_spec_from_name) with gradients of
 * elem_bytes (2: f16, 4: f32). HORA_ERR_INVALID_ARG (an unknown model, with
 * a message on stderr), HORA_ERR_NO_MEMORY. */
hora_status_t sim_model_init(struct sim_model *m, const char *model_name, size_t elem_bytes);
void sim_model_free(struct sim_model *m);
size_t sim_model_param_count(const struct sim_model *m);
/* Compute times from a per-GPU throughput: a step of batch images takes
 * batch / img_s, a third forward and two thirds backward (backward does
 * twice forward's FLOPs), backward split over the layers by their FLOPs. */
void sim_model_set_throughput(struct sim_model *m, int batch, double img_s);
/* Backward times from a `hora-train --profile` table (the unit lines:
 * name, forward, backward, total ms per step, share): each unit's backward
 * on its conv weight, forward the units' sum. HORA_ERR_INVALID_ARG when it
 * names a unit the model lacks or has none, HORA_ERR_SYSTEM. */
hora_status_t sim_model_load_profile(struct sim_model *m, const char *path);
/* Every gradient ready at once (hora-bench-gradset: no compute). */
void sim_model_set_no_compute(struct sim_model *m);

/* What one step costs. */
struct sim_result {
    double step_s;         /* forward + backward + the exchange left after it */
    double compute_s;      /* forward + backward */
    double comm_s;         /* the exchanges' busy time, negotiation included */
    double exposed_s;      /* step - compute: communication not hidden */
    double overlap;        /* 1 - exposed / comm: the part hidden behind backward */
    double img_s;          /* images/s of the whole job */
    double efficiency;     /* compute / step */
    int cycles, responses; /* coordinator cycles with work, fused responses */
    double nic_bytes;      /* per step through the busiest node's NICs, in one direction */
};

/* Simulate one steady-state step (response cache warm) of batch images per
 * rank. HORA_ERR_NO_MEMORY. */
hora_status_t sim_step(const struct sim_topo *t, const struct sim_model *m, const struct sim_coord *c, sim_algo_t algo,
                       int batch, struct sim_result *out);

#endif
