/* config.c - the table of HORA_* settings and their parser. Adding a setting
 * means adding a field to struct config and one row here; --print-config,
 * validation and the unknown-variable warning follow from the table. The
 * HORA_* variables of hora's tools (config_tool_variables) are listed here
 * too, so that they pass without that warning. */
#include "base/config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/status.h"

extern char **environ;

static const char *const config_log_levels[] = {"error", "warn", "info", "debug", NULL};
static const char *const config_algorithms[] = {"auto", "ring", "oneshot", NULL};
static const char *const config_auto_off_on[] = {"auto", "0", "1", NULL};
static const char *const config_reproducible[] = {"0", "1", "exact", NULL};
static const char *const config_cuda_devices[] = {"current", "local", NULL};
static const char *const config_bootstraps[] = {"auto", "mpi", "store", NULL};

#define CONFIG_FIELD(f) offsetof(struct config, f)
#define GiB (1024.0 * 1024.0 * 1024.0)

const struct config_entry config_table[] = {
    {"HORA_LOG_LEVEL", CONFIG_TYPE_ENUM, "warn", 0, 0, config_log_levels, CONFIG_FIELD(log_level),
     "messages printed to stderr: error, warn, info or debug"},
    {"HORA_FAKE_NODES", CONFIG_TYPE_INT, "0", 0, 4096, NULL, CONFIG_FIELD(fake_nodes),
     "split each host's ranks into this many virtual nodes (0 = real topology); "
     "exercises the multi-node paths on one machine"},
    {"HORA_CHUNK_BYTES", CONFIG_TYPE_SIZE, "256K", 4096, 1 * GiB, NULL, CONFIG_FIELD(chunk_bytes),
     "ring pipeline chunk: moving chunk k+1 overlaps reducing chunk k; sized to stay in cache"},
    {"HORA_DISABLE_SHM", CONFIG_TYPE_BOOL, "0", 0, 1, NULL, CONFIG_FIELD(disable_shm),
     "never use the shared-memory transport"},
    {"HORA_BOOTSTRAP", CONFIG_TYPE_ENUM, "auto", 0, 0, config_bootstraps, CONFIG_FIELD(bootstrap),
     "how hora_init finds the other ranks: mpi (MPI_COMM_WORLD), store (the rendezvous store hora-run names in "
     "HORA_RDZV, no MPI at all), auto (store when HORA_RDZV is set and no MPI launcher started the process)"},
    {"HORA_DISABLE_UCX", CONFIG_TYPE_BOOL, "0", 0, 1, NULL, CONFIG_FIELD(disable_ucx),
     "never use the UCX transport (tagged messages over UCP; any peer, any host)"},
    {"HORA_DISABLE_MPI", CONFIG_TYPE_BOOL, "0", 0, 1, NULL, CONFIG_FIELD(disable_mpi),
     "never use the MPI point-to-point transport (fallback)"},
    {"HORA_DISABLE_CUDAIPC", CONFIG_TYPE_BOOL, "0", 0, 1, NULL, CONFIG_FIELD(disable_cudaipc),
     "never use the CUDA IPC transport (device buffers of one host then travel through host memory)"},
    {"HORA_CUDA", CONFIG_TYPE_ENUM, "auto", 0, 0, config_auto_off_on, CONFIG_FIELD(cuda),
     "device (CUDA) memory support: auto (when every rank has a GPU), 0 (never touch CUDA), 1 (an error "
     "at init when a rank has none)"},
    {"HORA_CUDA_DEVICE", CONFIG_TYPE_ENUM, "current", 0, 0, config_cuda_devices, CONFIG_FIELD(cuda_device),
     "which CUDA device the runtime uses: current (the one current on the thread that calls hora_init) or "
     "local (the host-local rank modulo the device count, made current on that thread; hora.torch asks for it "
     "when torch has not touched CUDA before hvd.init)"},
    {"HORA_CUDA_POOL_BYTES", CONFIG_TYPE_SIZE, "512M", 2.0 * 1024 * 1024, 16384 * GiB, NULL,
     CONFIG_FIELD(cuda_pool_bytes),
     "device memory allocated per rank at init for hora_mem_alloc_device, the device fusion buffer and "
     "staging; the ranks of a host open each other's pools (CUDA IPC)"},
    {"HORA_CUDA_STAGE_BYTES", CONFIG_TYPE_SIZE, "4M", 64.0 * 1024, 1 * GiB, NULL, CONFIG_FIELD(cuda_stage_bytes),
     "chunk in which device data crosses to a host-memory transport (ucx, mpi): copying chunk k+1 "
     "overlaps the collective on chunk k"},
    {"HORA_SHM_POOL_BYTES", CONFIG_TYPE_SIZE, "64G", 16.0 * 1024 * 1024, 16384 * GiB, NULL,
     CONFIG_FIELD(shm_pool_bytes),
     "address space reserved per rank for hora_mem_alloc and staging; pages are "
     "committed only when allocated"},
    {"HORA_TIMEOUT_S", CONFIG_TYPE_DOUBLE, "60", 0.1, 1e7, NULL, CONFIG_FIELD(timeout_s),
     "longest wait for a peer before a collective fails with HORA_ERR_TIMEOUT"},
    {"HORA_SPIN_COUNT", CONFIG_TYPE_INT, "-1", -1, 1e9, NULL, CONFIG_FIELD(spin_count),
     "busy-wait iterations before a waiting rank sleeps (-1 = auto: spin only when "
     "every local rank has a core of its own, and in the coordinator only while the "
     "application waits in hora_wait)"},
    {"HORA_YIELD_US", CONFIG_TYPE_DOUBLE, "-1", -1, 1e7, NULL, CONFIG_FIELD(yield_us),
     "after the spins, how long a waiting rank polls with sched_yield before it sleeps, in microseconds "
     "(-1 = auto: 1000 when the local ranks outnumber the cores, so that a waiter hands its core to the "
     "peer it waits for instead of paying a sleep and a wake-up, else 0; in the coordinator only while "
     "the application waits in hora_wait)"},
    {"HORA_LATENCY_BYTES", CONFIG_TYPE_SIZE, "2K", 0, 1024.0 * 1024, NULL, CONFIG_FIELD(latency_bytes),
     "all-reduces of host memory up to this size take the latency path (HORA_ALGORITHM=auto): over "
     "shared memory one flag round (each rank copies its input into a slot of its own and reduces every "
     "member's slot; at most 16K); over messages (ucx, mpi) up to 2K the outcome agreement's star carries "
     "the data (every input to one rank, which reduces them all and sends back the result), recursive "
     "doubling above 2K; 0 = never"},
    {"HORA_ALGORITHM", CONFIG_TYPE_ENUM, "auto", 0, 0, config_algorithms, CONFIG_FIELD(algorithm),
     "collective algorithm: ring (reduce-scatter + allgather, pipelined), oneshot (shared memory: each "
     "rank reduces its shard from every peer and writes it to all), auto (all-reduces up to "
     "HORA_LATENCY_BYTES on the latency path, else oneshot on shm, else ring); ring and oneshot hold at "
     "every size"},
    {"HORA_HIERARCHICAL", CONFIG_TYPE_ENUM, "auto", 0, 0, config_auto_off_on, CONFIG_FIELD(hierarchical),
     "allreduce as node reduce-scatter + one cross-node ring per local rank + node allgather: auto (more "
     "than one node and more than one rank per node), 0 or 1"},
    {"HORA_REPRODUCIBLE", CONFIG_TYPE_ENUM, "0", 0, 0, config_reproducible, CONFIG_FIELD(reproducible),
     "bitwise-reproducible f32/f16/bf16 all-reduce sums: 1 (the same bits for a given world size whatever "
     "the algorithm, transport, fusion layout or arrival order: each element summed in rank order in fp32, "
     "rounded once), exact (the same bits for any world size: each element summed exactly, rounded once), "
     "0 (off: the fastest algorithm's order)"},
    {"HORA_CYCLE_TIME_MS", CONFIG_TYPE_DOUBLE, "1", 0.01, 10000, NULL, CONFIG_FIELD(cycle_time_ms),
     "coordinator cycle: how often ranks agree which named requests are ready"},
    {"HORA_DEFER_MS", CONFIG_TYPE_DOUBLE, "20", 0, 10000, NULL, CONFIG_FIELD(defer_ms),
     "host-memory requests that no thread waits on or polls start within this long, not at once: the "
     "compute they would interrupt goes on (0 = start at once; device memory always starts at once)"},
    {"HORA_FUSION_THRESHOLD", CONFIG_TYPE_SIZE, "128M", 0, 64 * GiB, NULL, CONFIG_FIELD(fusion_threshold),
     "pack ready allreduces into buffers of up to this many bytes (0 = no fusion)"},
    {"HORA_CACHE_CAPACITY", CONFIG_TYPE_INT, "1024", 0, 65536, NULL, CONFIG_FIELD(cache_capacity),
     "response-cache entries: requests seen before are agreed by one bitwise allreduce (0 = off)"},
    {"HORA_STALL_CHECK_S", CONFIG_TYPE_DOUBLE, "60", 0.01, 1e7, NULL, CONFIG_FIELD(stall_check_s),
     "warn about requests some ranks have submitted and others not for this long"},
    {"HORA_STALL_SHUTDOWN_S", CONFIG_TYPE_DOUBLE, "0", 0, 1e7, NULL, CONFIG_FIELD(stall_shutdown_s),
     "shut the runtime down when a request stalls this long (0 = never)"},
    {"HORA_STALL_STACKS", CONFIG_TYPE_BOOL, "1", 0, 1, NULL, CONFIG_FIELD(stall_stacks),
     "under a stall warning, rank 0 also prints what each missing rank's application thread is doing: its "
     "Python stack under hora.torch, else a native backtrace (0 = off; a rank with 0 answers that it is off)"},
    {"HORA_TIMELINE", CONFIG_TYPE_STRING, "", 0, 0, NULL, CONFIG_FIELD(timeline),
     "write a Chrome-trace timeline (Perfetto) of every request to this file (rank 0)"},
    {"HORA_TIMELINE_MAX_MB", CONFIG_TYPE_INT, "1024", 0, 1e6, NULL, CONFIG_FIELD(timeline_max_mb),
     "stop adding timeline events past this size (0 = unbounded)"},
    {"HORA_FLIGHT_RECORDER", CONFIG_TYPE_INT, "2000", 0, 1e7, NULL, CONFIG_FIELD(flight_recorder),
     "flight recorder: each process keeps its last this many coordinated collectives (name, operation, "
     "state, times, transport, the peer last waited on) for HORA_FLIGHT_DIR (0 = off)"},
    {"HORA_FLIGHT_DIR", CONFIG_TYPE_STRING, "", 0, 0, NULL, CONFIG_FIELD(flight_dir),
     "write the flight recorder to DIR/flight.<rank>.txt on a timeout, an abort, a fatal signal and "
     "SIGUSR1 (the job goes on); read the files with tools/hora-frtrace DIR"},
    {"HORA_STRAGGLER_S", CONFIG_TYPE_DOUBLE, "60", 0, 1e7, NULL, CONFIG_FIELD(straggler_s),
     "every this many seconds rank 0 reports the rank that is most often last to submit, in the log "
     "and the timeline (0 = off)"},
    {"HORA_AUTOTUNE", CONFIG_TYPE_BOOL, "0", 0, 1, NULL, CONFIG_FIELD(autotune),
     "tune fusion threshold, cycle time and chunk size online (variables set explicitly stay fixed)"},
    {"HORA_AUTOTUNE_LOG", CONFIG_TYPE_STRING, "", 0, 0, NULL, CONFIG_FIELD(autotune_log),
     "CSV file of every autotune sample and the winner"},
    {"HORA_LIBRARY", CONFIG_TYPE_STRING, "", 0, 0, NULL, CONFIG_FIELD(library),
     "the libhora.so the Python binding (runtime/python, hora.torch) loads; libhora itself does not use it"},
    {"HORA_PROCESS_SETS", CONFIG_TYPE_STRING, "", 0, 0, NULL, CONFIG_FIELD(process_sets),
     "process sets created at hora_init, ids 1, 2, ... in order: rank lists separated by ';' (\"0,1;2,3\")"},
    {"HORA_FAULT_STOP", CONFIG_TYPE_STRING, "", 0, 0, NULL, CONFIG_FIELD(fault_stop),
     "fault injection for tests: POINT:RANK:N stops rank RANK's process (SIGSTOP) in the N-th slow path in "
     "which its world coordinator hands in requests of its own, at POINT: slow-lists (before it hands in its "
     "request list) or slow-responses (rank 0, before it sends the responses)"},
    {"HORA_PREEMPT_FILE", CONFIG_TYPE_STRING, "", 0, 0, NULL, CONFIG_FIELD(preempt_file),
     "preemption: while this file exists, every hora_preempt_agree (hora-train's step boundary, hora.torch's "
     "check) stops the run, as a SIGTERM does; looked for (stat) at each agreement by every rank; its directory "
     "must exist at hora_init (\"\" = none)"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

/* Not libhora's, but they reach processes that call hora_init: tools/test
 * exports HORA_PHASE_LOG to everything it runs, hora-train reads
 * HORA_CKPT_CRASH itself, and tests/env/netns-run and bench/netns-bench export
 * HORA_NETNS_PREFIX. Without this list every rank of every such process
 * would warn about them; any other unknown HORA_* name still warns (a typo
 * of a setting is otherwise silently ignored). docs/architecture.md lists
 * the same names (tests/runtime/settings/test_config.c checks). */
const struct config_tool_variable config_tool_variables[] = {
    {"HORA_CKPT_CRASH",
     "hora-train (trainer/ckpt/ckpt_writer.c): test hook that kills the checkpoint writer at a point"},
    {"HORA_NETNS_PREFIX",
     "tools/netns-cluster, bench/netns-bench (exported there and by tests/env/netns-run): the test "
     "cluster's name prefix"},
    {"HORA_PHASE_LOG", "tools/setup, set by tools/test: the file each build step's time is appended to"},
    {"HORA_RANK", "set by hora-run (tools/hora_run) for its workers: the worker's global rank"},
    {"HORA_SIZE", "set by hora-run (tools/hora_run) for its workers: the number of workers in the job"},
    {"HORA_LOCAL_RANK", "set by hora-run (tools/hora_run) for its workers: the worker's rank on its host"},
    {"HORA_LOCAL_SIZE", "set by hora-run (tools/hora_run) for its workers: the number of workers on its host"},
    {"HORA_NODE_RANK", "set by hora-run (tools/hora_run) for its workers: its host's rank"},
    {"HORA_NODE_COUNT", "set by hora-run (tools/hora_run) for its workers: the number of hosts"},
    {"HORA_RDZV", "set by hora-run (tools/hora_run) for its workers: the rendezvous store's host:port"},
    {"HORA_JOB_ID", "set by hora-run (tools/hora_run) for its workers: the job id"},
    {"HORA_GENERATION", "set by hora-run (tools/hora_run) for its workers: the generation of the job's world (0, then "
                        "1 after a restart, ...)"},
    {"HORA_ELASTIC", "set by hora-run --elastic (tools/hora_run) for its workers: 1, this world can re-form"},
    {"HORA_WORKER_ID", "set by hora-run --elastic (tools/hora_run) for its workers: H.S, host H's worker in slot S, "
                       "the key of its place in each later generation (gen<G>/assign/H.S)"},
    {"HORA_JOIN_TIMEOUT_S", "set by hora-run (tools/hora_run) for its workers: its --join-timeout, how long a "
                            "worker waits for a peer's values or (--elastic) its place in the next generation"},
    {"HORA_ELASTIC_GRACE_S", "set by hora-run --elastic (tools/hora_run) for its workers: --heartbeat-timeout + 2, "
                             "how long a transport that saw a peer die waits for hora-run's verdict"},
    {NULL, NULL},
};

static const char *config_type_hint(const struct config_entry *e, char *buf, size_t len)
{
    switch (e->type) {
    case CONFIG_TYPE_BOOL: return "0/1, true/false, yes/no or on/off";
    case CONFIG_TYPE_INT: snprintf(buf, len, "an integer in [%.0f, %.0f]", e->min, e->max); return buf;
    case CONFIG_TYPE_SIZE:
        snprintf(buf, len, "a size in bytes with optional K/M/G/T suffix, in [%.0f, %.0f]", e->min, e->max);
        return buf;
    case CONFIG_TYPE_DOUBLE: snprintf(buf, len, "a number in [%g, %g]", e->min, e->max); return buf;
    case CONFIG_TYPE_STRING: return "a path of at most 511 bytes";
    case CONFIG_TYPE_ENUM: {
        size_t used = 0;
        buf[0] = '\0';
        for (int i = 0; e->choices[i]; i++)
            used +=
                (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s", i ? ", " : "one of ", e->choices[i]);
        return buf;
    }
    }
    return "?";
}

static hora_status_t config_bad(const struct config_entry *e, const char *text)
{
    char hint[256];
    return status_fail(HORA_ERR_CONFIG, "bad value for %s: '%s' (expected %s)", e->name, text,
                       config_type_hint(e, hint, sizeof(hint)));
}

/* Strict number parsing: the whole string must be consumed. */
static int config_parse_double(const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    while (isspace((unsigned char)*end)) end++;
    if (end == text || *end || errno || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int config_parse_size(const char *text, double *out)
{
    char *end;
    double mult = 1;
    errno = 0;
    if (!isdigit((unsigned char)text[0])) return -1;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text) return -1;
    switch (toupper((unsigned char)*end)) {
    case '\0': break;
    case 'K':
        mult = 1024.0;
        end++;
        break;
    case 'M':
        mult = 1024.0 * 1024;
        end++;
        break;
    case 'G':
        mult = GiB;
        end++;
        break;
    case 'T':
        mult = GiB * 1024;
        end++;
        break;
    default: return -1;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I')) end++;
    if (mult > 1 && (*end == 'b' || *end == 'B')) end++;
    if (*end) return -1;
    *out = (double)v * mult;
    return 0;
}

hora_status_t config_parse(const struct config_entry *e, const char *text, struct config *cfg)
{
    char *field = (char *)cfg + e->offset;
    double v;

    switch (e->type) {
    case CONFIG_TYPE_BOOL:
        if (!strcmp(text, "1") || !strcasecmp(text, "true") || !strcasecmp(text, "yes") || !strcasecmp(text, "on"))
            *(bool *)field = true;
        else if (!strcmp(text, "0") || !strcasecmp(text, "false") || !strcasecmp(text, "no") ||
                 !strcasecmp(text, "off"))
            *(bool *)field = false;
        else
            return config_bad(e, text);
        return HORA_OK;
    case CONFIG_TYPE_INT:
        if (config_parse_double(text, &v) || v != floor(v) || v < e->min || v > e->max) return config_bad(e, text);
        if (e->offset == CONFIG_FIELD(spin_count))
            *(long *)field = (long)v;
        else
            *(int *)field = (int)v;
        return HORA_OK;
    case CONFIG_TYPE_SIZE:
        if (config_parse_size(text, &v) || v < e->min || v > e->max) return config_bad(e, text);
        *(size_t *)field = (size_t)v;
        return HORA_OK;
    case CONFIG_TYPE_DOUBLE:
        if (config_parse_double(text, &v) || v < e->min || v > e->max) return config_bad(e, text);
        *(double *)field = v;
        return HORA_OK;
    case CONFIG_TYPE_ENUM:
        for (int i = 0; e->choices[i]; i++)
            if (!strcasecmp(text, e->choices[i])) {
                *(int *)field = i;
                return HORA_OK;
            }
        return config_bad(e, text);
    case CONFIG_TYPE_STRING:
        if (strlen(text) >= sizeof(cfg->timeline)) return config_bad(e, text);
        snprintf(field, sizeof(cfg->timeline), "%s", text);
        return HORA_OK;
    }
    return config_bad(e, text);
}

static const struct config_entry *config_find(const char *name, size_t len)
{
    for (const struct config_entry *e = config_table; e->name; e++)
        if (strlen(e->name) == len && !strncmp(e->name, name, len)) return e;
    return NULL;
}

/* A setting of the table or a tool's variable: either passes silently. */
static int config_known(const char *name, size_t len)
{
    if (config_find(name, len)) return 1;
    for (const struct config_tool_variable *v = config_tool_variables; v->name; v++)
        if (strlen(v->name) == len && !strncmp(v->name, name, len)) return 1;
    return 0;
}

hora_status_t config_load(struct config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    for (const struct config_entry *e = config_table; e->name; e++) HORA_CHECK(config_parse(e, e->default_value, cfg));
    for (const struct config_entry *e = config_table; e->name; e++) {
        const char *text = getenv(e->name);
        if (text) HORA_CHECK(config_parse(e, text, cfg));
    }
    for (char **env = environ; env && *env; env++) {
        const char *eq = strchr(*env, '=');
        if (strncmp(*env, "HORA_", 5) || !eq) continue;
        if (!config_known(*env, (size_t)(eq - *env)))
            log_warn("unknown setting %.*s ignored (hora-bench-allreduce --print-config lists them)", (int)(eq - *env),
                     *env);
    }
    return HORA_OK;
}

int config_is_set(const char *name) { return getenv(name) != NULL; }

static void config_format(const struct config_entry *e, const struct config *cfg, char *buf, size_t len)
{
    const char *field = (const char *)cfg + e->offset;
    switch (e->type) {
    case CONFIG_TYPE_BOOL: snprintf(buf, len, "%d", *(const bool *)field); break;
    case CONFIG_TYPE_INT:
        if (e->offset == CONFIG_FIELD(spin_count))
            snprintf(buf, len, "%ld", *(const long *)field);
        else
            snprintf(buf, len, "%d", *(const int *)field);
        break;
    case CONFIG_TYPE_SIZE: snprintf(buf, len, "%zu", *(const size_t *)field); break;
    case CONFIG_TYPE_DOUBLE: snprintf(buf, len, "%g", *(const double *)field); break;
    case CONFIG_TYPE_ENUM: snprintf(buf, len, "%s", e->choices[*(const int *)field]); break;
    case CONFIG_TYPE_STRING: snprintf(buf, len, "%s", *field ? field : "\"\""); break;
    }
}

void config_print(const struct config *cfg, FILE *out)
{
    fprintf(out, "# %-22s %-14s %-8s %s\n", "variable", "value", "default", "meaning");
    for (const struct config_entry *e = config_table; e->name; e++) {
        char value[64];
        config_format(e, cfg, value, sizeof(value));
        fprintf(out, "%-24s %-14s %-8s %s%s\n", e->name, value, *e->default_value ? e->default_value : "\"\"", e->doc,
                getenv(e->name) ? " [set]" : "");
    }
    fprintf(out, "# read by hora's tools, not by libhora (accepted without a warning):\n");
    for (const struct config_tool_variable *v = config_tool_variables; v->name; v++)
        fprintf(out, "#   %-22s %s%s\n", v->name, v->reader, getenv(v->name) ? " [set]" : "");
}
