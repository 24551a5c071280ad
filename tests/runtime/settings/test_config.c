/*
 * test_config.c - the HORA_* settings table (parsing, bounds, error messages
 * naming the variable), the unknown-variable warning (a typo warns, the
 * tools' variables do not), the virtual-node split and the shard layout, and
 * that runtime/README.md lists every setting of the table and
 * docs/architecture.md every tool variable.
 * Run: test_config   (exit 0 = all passed)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"
#include "base/log.h"
#include "hora.h"
#include "mem/topo.h"

#include "check.h"
#include "file.h"

static const struct config_entry *entry(const char *name)
{
    for (const struct config_entry *e = config_table; e->name; e++)
        if (!strcmp(e->name, name)) return e;
    fprintf(stderr, "no entry %s\n", name);
    exit(1);
}

static void expect_bad(const char *name, const char *value)
{
    struct config cfg;
    memset(&cfg, 0, sizeof(cfg));
    hora_status_t st = config_parse(entry(name), value, &cfg);
    CHECK(st == HORA_ERR_CONFIG, "%s='%s' accepted", name, value);
    CHECK(strstr(hora_last_error(), name) != NULL, "message for %s='%s' does not name it: %s", name, value,
          hora_last_error());
}

static void test_parse(void)
{
    struct config cfg;
    memset(&cfg, 0, sizeof(cfg));
    CHECK(config_parse(entry("HORA_CHUNK_BYTES"), "64K", &cfg) == HORA_OK && cfg.chunk_bytes == 65536, "64K");
    CHECK(config_parse(entry("HORA_CHUNK_BYTES"), "2MiB", &cfg) == HORA_OK && cfg.chunk_bytes == 2u << 20, "2MiB");
    CHECK(config_parse(entry("HORA_CHUNK_BYTES"), "8192", &cfg) == HORA_OK && cfg.chunk_bytes == 8192, "8192");
    expect_bad("HORA_CHUNK_BYTES", "12Q");
    expect_bad("HORA_CHUNK_BYTES", "-4K");
    expect_bad("HORA_CHUNK_BYTES", "1"); /* below the minimum */
    expect_bad("HORA_CHUNK_BYTES", "");
    CHECK(config_parse(entry("HORA_DISABLE_SHM"), "yes", &cfg) == HORA_OK && cfg.disable_shm, "yes");
    CHECK(config_parse(entry("HORA_DISABLE_SHM"), "0", &cfg) == HORA_OK && !cfg.disable_shm, "0");
    expect_bad("HORA_DISABLE_SHM", "maybe");
    CHECK(config_parse(entry("HORA_FAKE_NODES"), "3", &cfg) == HORA_OK && cfg.fake_nodes == 3, "3");
    expect_bad("HORA_FAKE_NODES", "2.5");
    expect_bad("HORA_FAKE_NODES", "-1");
    expect_bad("HORA_FAKE_NODES", "two");
    CHECK(config_parse(entry("HORA_TIMEOUT_S"), "2.5", &cfg) == HORA_OK && cfg.timeout_s == 2.5, "2.5");
    expect_bad("HORA_TIMEOUT_S", "0");
    expect_bad("HORA_TIMEOUT_S", "nan");
    CHECK(config_parse(entry("HORA_LOG_LEVEL"), "DEBUG", &cfg) == HORA_OK && cfg.log_level == 3, "DEBUG");
    expect_bad("HORA_LOG_LEVEL", "loud");
    CHECK(config_parse(entry("HORA_SPIN_COUNT"), "-1", &cfg) == HORA_OK && cfg.spin_count == -1, "-1");
    /* The flight recorder's ring and the straggler report. */
    CHECK(config_parse(entry("HORA_FLIGHT_RECORDER"), "0", &cfg) == HORA_OK && cfg.flight_recorder == 0, "0");
    CHECK(config_parse(entry("HORA_FLIGHT_RECORDER"), "500", &cfg) == HORA_OK && cfg.flight_recorder == 500, "500");
    expect_bad("HORA_FLIGHT_RECORDER", "-1");
    expect_bad("HORA_FLIGHT_RECORDER", "lots");
    expect_bad("HORA_FLIGHT_RECORDER", "2.5");
    expect_bad("HORA_FLIGHT_RECORDER", "1e9");
    CHECK(config_parse(entry("HORA_STRAGGLER_S"), "0", &cfg) == HORA_OK && cfg.straggler_s == 0, "0");
    expect_bad("HORA_STRAGGLER_S", "-3");
    expect_bad("HORA_STRAGGLER_S", "often");
}

static void test_load(void)
{
    struct config cfg;
    unsetenv("HORA_CHUNK_BYTES");
    CHECK(config_load(&cfg) == HORA_OK, "defaults load: %s", hora_last_error());
    CHECK(cfg.chunk_bytes == 256 * 1024 && cfg.timeout_s == 60 && cfg.fake_nodes == 0, "default values");
    setenv("HORA_CHUNK_BYTES", "1M", 1);
    CHECK(config_load(&cfg) == HORA_OK && cfg.chunk_bytes == 1 << 20, "env value used");
    setenv("HORA_TIMEOUT_S", "soon", 1);
    CHECK(config_load(&cfg) == HORA_ERR_CONFIG, "bad env value rejected");
    CHECK(strstr(hora_last_error(), "HORA_TIMEOUT_S") && strstr(hora_last_error(), "soon"),
          "message names variable and value: %s", hora_last_error());
    unsetenv("HORA_TIMEOUT_S");
    setenv("HORA_FLIGHT_RECORDER", "-5", 1);
    CHECK(config_load(&cfg) == HORA_ERR_CONFIG, "bad HORA_FLIGHT_RECORDER rejected");
    CHECK(strstr(hora_last_error(), "HORA_FLIGHT_RECORDER") && strstr(hora_last_error(), "-5"),
          "message names variable and value: %s", hora_last_error());
    unsetenv("HORA_FLIGHT_RECORDER");
    CHECK(config_load(&cfg) == HORA_OK && cfg.flight_recorder == 2000 && cfg.straggler_s == 60,
          "flight recorder and straggler defaults");
    unsetenv("HORA_CHUNK_BYTES");
    /* Every entry's default parses and every entry has a doc string. */
    for (const struct config_entry *e = config_table; e->name; e++) {
        CHECK(config_parse(e, e->default_value, &cfg) == HORA_OK, "default of %s", e->name);
        CHECK(e->doc && strlen(e->doc) > 10 && !strncmp(e->name, "HORA_", 5), "doc of %s", e->name);
    }
}

/* config_load with fd 2 pointed at a file: what it warned (free() it). */
static char *load_warnings(hora_status_t *status)
{
    char path[] = "/tmp/hora-test-config-XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp for the captured stderr");
    if (fd < 0) return NULL;
    fflush(stderr);
    const int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    struct config cfg;
    *status = config_load(&cfg);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fd);
    char *text = test_read_file(path, NULL);
    unlink(path);
    return text;
}

/* A HORA_* name in neither table warns, naming it: a typo of a
 * setting must not pass unnoticed. The tools' variables (HORA_PHASE_LOG,
 * which tools/test exports to every test, ...) pass silently, are not
 * settings, are printed apart by config_print, and docs/architecture.md
 * lists each. */
static void test_unknown(void)
{
    log_set_level(LOG_LEVEL_WARN);
    setenv("HORA_CHUNK_BYTE", "1M", 1); /* HORA_CHUNK_BYTES, mistyped */
    for (const struct config_tool_variable *v = config_tool_variables; v->name; v++) setenv(v->name, "x", 1);
    hora_status_t status = HORA_OK;
    char *text = load_warnings(&status);
    unsetenv("HORA_CHUNK_BYTE");
    CHECK(status == HORA_OK, "an unknown variable fails the load: %s", hora_last_error());
    CHECK(text && strstr(text, "unknown setting HORA_CHUNK_BYTE ignored"), "no warning for HORA_CHUNK_BYTE: '%s'",
          text ? text : "");

    char *doc = test_read_file(HORA_SOURCE_DIR "/docs/architecture.md", NULL);
    const char *section = doc ? strstr(doc, "Variables of hora's tools") : NULL;
    CHECK(section != NULL, "docs/architecture.md has no \"Variables of hora's tools\" table");
    char *printed = NULL;
    size_t printed_len = 0;
    FILE *mem = open_memstream(&printed, &printed_len);
    if (mem) {
        struct config cfg;
        if (config_load(&cfg) == HORA_OK) config_print(&cfg, mem);
        fclose(mem);
    }
    for (const struct config_tool_variable *v = config_tool_variables; v->name; v++) {
        char needle[96];
        snprintf(needle, sizeof(needle), "unknown setting %s ", v->name);
        CHECK(text && !strstr(text, needle), "%s warns: '%s'", v->name, text ? text : "");
        CHECK(!strncmp(v->name, "HORA_", 5) && v->reader && strlen(v->reader) > 10, "name and reader of %s", v->name);
        for (const struct config_entry *e = config_table; e->name; e++)
            CHECK(strcmp(e->name, v->name) != 0, "%s is both a setting and a tool's variable", v->name);
        snprintf(needle, sizeof(needle), "#   %s ", v->name);
        CHECK(printed && strstr(printed, needle), "config_print does not list %s", v->name);
        snprintf(needle, sizeof(needle), "`%s`", v->name);
        CHECK(section && strstr(section, needle), "docs/architecture.md's tools table does not list %s", v->name);
        unsetenv(v->name);
    }
    free(printed);
    free(doc);
    free(text);
}

static void test_fake_nodes(void)
{
    for (int size = 1; size <= 9; size++)
        for (int k = 1; k <= size; k++) {
            int members[9] = {0}, prev = 0;
            for (int r = 0; r < size; r++) {
                int node = topo_fake_node_of(r, size, k);
                CHECK(node >= 0 && node < k, "node %d of %d in range", node, k);
                CHECK(node >= prev, "groups are contiguous");
                prev = node;
                members[node]++;
            }
            for (int i = 0; i < k; i++)
                CHECK(members[i] == size / k || members[i] == size / k + 1, "balanced: %d ranks in group %d of %d",
                      members[i], i, k);
        }
}

static void test_shard(void)
{
    size_t counts[] = {0, 1, 2, 3, 7, 1000003};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
        for (int n = 1; n <= 5; n++) {
            size_t next = 0;
            for (int r = 0; r < n; r++) {
                size_t off, len;
                hora_shard(counts[c], n, r, &off, &len);
                CHECK(off == next, "shard %d of %zu/%d starts where the previous ended", r, counts[c], n);
                CHECK(len == counts[c] / (size_t)n || len == counts[c] / (size_t)n + 1, "shard sizes differ by <= 1");
                next = off + len;
            }
            CHECK(next == counts[c], "shards of %zu over %d cover it", counts[c], n);
        }
}

static void test_names(void)
{
    for (int d = 0; d < HORA_DTYPE_COUNT; d++)
        CHECK(hora_dtype_parse(hora_dtype_name((hora_dtype_t)d)) == d, "dtype %d round-trips", d);
    for (int o = 0; o < HORA_OP_COUNT; o++)
        CHECK(hora_op_parse(hora_op_name((hora_op_t)o)) == o, "op %d round-trips", o);
    CHECK(hora_dtype_parse("half") == HORA_DTYPE_F16 && hora_dtype_parse("nope") == -1, "aliases");
    CHECK(!strcmp(hora_status_string(HORA_ERR_TIMEOUT), "HORA_ERR_TIMEOUT"), "status names");
    CHECK(hora_dtype_size(HORA_DTYPE_BF16) == 2 && hora_dtype_size(HORA_DTYPE_F64) == 8, "sizes");
}

/* runtime/README.md's settings list names every variable of the table. */
static void test_readme(void)
{
    char *readme = test_read_file(HORA_SOURCE_DIR "/runtime/README.md", NULL);
    CHECK(readme != NULL, "cannot read runtime/README.md");
    if (!readme) return;
    const char *list = strstr(readme, "## Settings");
    CHECK(list != NULL, "runtime/README.md has no '## Settings' section");
    for (const struct config_entry *e = config_table; e->name && list; e++) {
        char quoted[80];
        snprintf(quoted, sizeof(quoted), "`%s`", e->name);
        CHECK(strstr(list, quoted) != NULL, "runtime/README.md's settings do not list %s", e->name);
    }
    free(readme);
}

int main(void)
{
    test_parse();
    test_readme();
    test_load();
    test_unknown();
    test_fake_nodes();
    test_shard();
    test_names();
    printf("test_config: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
