/* config.h - every HORA_* setting, declared once in a table (config.c):
 * name, type, default, bounds, doc. config_load() reads the environment and
 * rejects a bad value with HORA_ERR_CONFIG naming the variable. */
#ifndef HORA_CONFIG_H
#define HORA_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "hora.h"

struct config {
    int log_level;           /* HORA_LOG_LEVEL: 0 error .. 3 debug */
    int fake_nodes;          /* HORA_FAKE_NODES: 0 = real topology */
    size_t chunk_bytes;      /* HORA_CHUNK_BYTES: pipeline chunk of the ring */
    bool disable_shm;        /* HORA_DISABLE_SHM */
    bool disable_ucx;        /* HORA_DISABLE_UCX */
    bool disable_mpi;        /* HORA_DISABLE_MPI */
    bool disable_cudaipc;    /* HORA_DISABLE_CUDAIPC */
    int cuda;                /* HORA_CUDA: 0 auto, 1 off, 2 on */
    int bootstrap;           /* HORA_BOOTSTRAP: 0 auto, 1 mpi, 2 store */
    int cuda_device;         /* HORA_CUDA_DEVICE: 0 the current device, 1 host-local rank % devices */
    size_t cuda_pool_bytes;  /* HORA_CUDA_POOL_BYTES: each rank's device pool */
    size_t cuda_stage_bytes; /* HORA_CUDA_STAGE_BYTES: chunk of device data staged through host memory */
    size_t shm_pool_bytes;   /* HORA_SHM_POOL_BYTES: virtual size of each rank's pool */
    double timeout_s;        /* HORA_TIMEOUT_S: longest wait for a peer */
    long spin_count;         /* HORA_SPIN_COUNT: busy-wait iterations before sleeping; -1 auto */
    double yield_us;         /* HORA_YIELD_US: sched_yield polling after the spins, before sleeping; -1 auto */
    size_t latency_bytes;    /* HORA_LATENCY_BYTES: all-reduces up to this size take the latency path, 0 = never */
    int algorithm;           /* HORA_ALGORITHM: 0 auto, 1 ring, 2 oneshot */
    int hierarchical;        /* HORA_HIERARCHICAL: 0 auto, 1 off, 2 on */
    int reproducible;        /* HORA_REPRODUCIBLE: 0 off, 1 rank order, 2 exact (hora_reproducible_t) */
    double cycle_time_ms;    /* HORA_CYCLE_TIME_MS: coordinator cycle */
    double defer_ms;         /* HORA_DEFER_MS: longest deferral of a host request nothing waits for, 0 = none */
    size_t fusion_threshold; /* HORA_FUSION_THRESHOLD: bytes per fused buffer, 0 = no fusion */
    int cache_capacity;      /* HORA_CACHE_CAPACITY: response-cache entries, 0 = off */
    double stall_check_s;    /* HORA_STALL_CHECK_S */
    double stall_shutdown_s; /* HORA_STALL_SHUTDOWN_S: 0 = never */
    bool stall_stacks;       /* HORA_STALL_STACKS: rank 0 prints a missing rank's stack under a stall warning */
    char timeline[512];      /* HORA_TIMELINE: Chrome-trace file written by rank 0, "" = off */
    int timeline_max_mb;     /* HORA_TIMELINE_MAX_MB */
    int flight_recorder;     /* HORA_FLIGHT_RECORDER: collectives kept per process, 0 = off */
    char flight_dir[512];    /* HORA_FLIGHT_DIR: where the recorder is written, "" = nowhere */
    double straggler_s;      /* HORA_STRAGGLER_S: rank 0's straggler report period, 0 = off */
    bool autotune;           /* HORA_AUTOTUNE */
    char autotune_log[512];  /* HORA_AUTOTUNE_LOG: CSV of every sample */
    char library[512];       /* HORA_LIBRARY: the libhora.so hora.torch loads (read there, not here) */
    char process_sets[512];  /* HORA_PROCESS_SETS: sets created at hora_init, "0,1;2,3" */
    char fault_stop[512];    /* HORA_FAULT_STOP: fault injection for tests, "POINT:RANK:N", "" = none */
    char preempt_file[512];  /* HORA_PREEMPT_FILE: a file whose existence asks for a stop, "" = none */
};

enum config_type {
    CONFIG_TYPE_BOOL,
    CONFIG_TYPE_INT,
    CONFIG_TYPE_SIZE,
    CONFIG_TYPE_DOUBLE,
    CONFIG_TYPE_ENUM,
    CONFIG_TYPE_STRING, /* char[512] field */
};

struct config_entry {
    const char *name;
    enum config_type type;
    const char *default_value;
    double min, max;            /* bounds for INT, SIZE, DOUBLE */
    const char *const *choices; /* ENUM: NULL-terminated, the value is the index */
    size_t offset;              /* field in struct config */
    const char *doc;
};

/* The table, terminated by an entry with name == NULL. */
extern const struct config_entry config_table[];

/* HORA_* variables of hora's tools (hora-train's test hook, tools/test,
 * the netns scripts), not settings of libhora: name and who reads it.
 * Terminated by an entry with name == NULL. */
struct config_tool_variable {
    const char *name;
    const char *reader;
};
extern const struct config_tool_variable config_tool_variables[];

/* Fill cfg from defaults and the environment. HORA_OK or HORA_ERR_CONFIG (message
 * names the variable, the bad value and what is accepted). A HORA_* variable
 * that is neither in config_table nor in config_tool_variables gives a
 * warning (a typo would otherwise be silently ignored). */
hora_status_t config_load(struct config *cfg);

/* Parse one value for one entry into cfg (used by config_load and the tests). */
hora_status_t config_parse(const struct config_entry *entry, const char *text, struct config *cfg);

/* 1 when the variable is set in the environment (autotune leaves those fixed). */
int config_is_set(const char *name);

/* Print every entry with the value in force (from cfg), its default and doc,
 * then the tools' variables as '#' lines. */
void config_print(const struct config *cfg, FILE *out);

#endif
