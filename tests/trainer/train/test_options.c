/*
 * test_options.c - hora-train's flags table (trainer/cli/options.c): the
 * defaults, every kind of value, the errors for bad ones (which must name
 * the flag and what it accepts), and that --help and the parser come from
 * one table: every flag --help lists is accepted, with the default --help
 * prints for it.
 *
 * Run: test_options   (exit 0 = all passed)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "file.h"
#include "options.h"

/* Parse argv (NULL-terminated, without the program name), with stderr
 * captured into *err (free it). */
static int parse(const char *const *args, tr_options_t *o, char **err)
{
    const char *argv[64] = {"hora-train"};
    int argc = 1;
    while (args[argc - 1] && argc < 63) {
        argv[argc] = args[argc - 1];
        argc++;
    }
    char path[] = "/tmp/test_options_XXXXXX";
    int fd = mkstemp(path);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    int rc = tr_options_parse(argc, (char **)argv, o);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fd);
    *err = test_read_file(path, NULL);
    unlink(path);
    return rc;
}

static void expect_ok(const char *const *args, tr_options_t *o, const char *what)
{
    char *err = NULL;
    int rc = parse(args, o, &err);
    CHECK(rc == 0, "%s: refused (%d): %s", what, rc, err ? err : "");
    free(err);
}

/* The call fails and stderr names every needle. */
static void expect_bad(const char *const *args, const char *needle1, const char *needle2)
{
    tr_options_t o;
    char *err = NULL;
    int rc = parse(args, &o, &err);
    CHECK(rc == -1, "%s %s: accepted", args[0], args[1] ? args[1] : "");
    CHECK(err && strstr(err, needle1) && (!needle2 || strstr(err, needle2)),
          "%s %s: the message '%s' does not name '%s' and '%s'", args[0], args[1] ? args[1] : "", err ? err : "",
          needle1, needle2 ? needle2 : "");
    free(err);
}

static void test_defaults_and_values(void)
{
    tr_options_t o;
    expect_ok((const char *[]){"--synthetic", NULL}, &o, "defaults");
    CHECK(o.batch == 64 && o.eval_batch == 0 && o.epochs == 1 && o.lr == 0.1 && o.optim.momentum == 0.9 &&
              o.optim.nesterov == 1 && o.optim.decay_bn_bias == 1 && o.zero_init == 1 && o.flip == 1 && o.rrc == -1 &&
              o.pad_crop == -1 && o.threads == 0 && o.seed == 42 && o.synthetic == 1 && o.overlap == TR_OVERLAP_AUTO &&
              o.lr_decay == TR_LR_DECAY_POLY && o.progress == TR_PROGRESS_AUTO && !strcmp(o.model, "resnet20") &&
              !strcmp(o.backend, "cpu") && o.max_steps == 0 && o.image[0] == 0,
          "defaults: batch %d lr %g overlap %d decay %d flip %d rrc %d pad %d", o.batch, o.lr, o.overlap, o.lr_decay,
          o.flip, o.rrc, o.pad_crop);
    expect_ok(
        (const char *[]){
            "--data",    "/d",           "--batch=32", "--lr",       "0.4",          "--lr-decay", "cosine",
            "--image",   "1x28x28",      "--pad-crop", "2",          "--no-overlap", "--lr-steps", "1,2.5",
            "--no-flip", "--rrc",        "--seed",     "7",          "--steps",      "150",        "--bn-eps",
            "0.001",     "--eval-batch", "100",        "--progress", "lines",        "--threads",  "auto",
            NULL},
        &o, "one of each kind");
    CHECK(o.batch == 32 && o.lr == 0.4 && o.lr_decay == TR_LR_DECAY_COSINE && o.image[0] == 1 && o.image[1] == 28 &&
              o.image[2] == 28 && o.pad_crop == 2 && o.overlap == TR_OVERLAP_OFF && !strcmp(o.lr_steps, "1,2.5") &&
              o.flip == 0 && o.rrc == 1 && o.seed == 7 && o.max_steps == 150 && o.bn_eps == 0.001f &&
              o.eval_batch == 100 && o.progress == TR_PROGRESS_LINES && o.threads == 0 && !strcmp(o.data, "/d"),
          "values parsed");
    double epochs[8];
    CHECK(tr_options_lr_steps("30,60,80", epochs, 8) == 3 && epochs[2] == 80, "lr steps list");
    CHECK(tr_options_lr_steps("30,,60", epochs, 8) == -1 && tr_options_lr_steps("1,2,3", epochs, 2) == -1,
          "malformed lr steps refused");
}

static void test_errors(void)
{
    expect_bad((const char *[]){"--synthetic", "--batch", "0", NULL}, "--batch", "[1, 1048576]");
    expect_bad((const char *[]){"--synthetic", "--batch", "12x", NULL}, "--batch", "integer");
    expect_bad((const char *[]){"--synthetic", "--lr", "-1", NULL}, "--lr", "[0, 1e+06]");
    expect_bad((const char *[]){"--synthetic", "--overlap", "sometimes", NULL}, "--overlap wants", "off, on, auto");
    expect_bad((const char *[]){"--synthetic", "--lr-decay", "linear", NULL}, "--lr-decay", "poly");
    expect_bad((const char *[]){"--synthetic", "--image", "28x28", NULL}, "--image", "CxHxW");
    expect_bad((const char *[]){"--synthetic", "--lr-steps", "30,x", NULL}, "--lr-steps", NULL);
    expect_bad((const char *[]){"--synthetic", "--pad-crop", "65", NULL}, "--pad-crop", "or auto");
    expect_bad((const char *[]){"--synthetic", "--bogus", NULL}, "unknown option", "--bogus");
    expect_bad((const char *[]){"--synthetic", "--batch", NULL}, "--batch needs a value", NULL);
    expect_bad((const char *[]){"--synthetic", "--strict=1", NULL}, "--strict takes no value", NULL);
    expect_bad((const char *[]){"--batch", "8", NULL}, "--data DIR or --synthetic", NULL);
}

/* Every flag in --help is accepted: a value flag with the default --help
 * shows for it (or a sample value where it has none). */
static void test_help_matches_parser(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    tr_options_usage(f);
    fclose(f);
    CHECK(text && strstr(text, "HORA_TIMEOUT_S") != NULL, "--help does not list the runtime's HORA_* settings");
    int flags = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        /* "  --flag VALUE           doc": the flag and its value name fill
         * a 27-column head, then one space and the doc. */
        char head[28] = "", name[64] = "", value[64] = "";
        if (strncmp(line, "  --", 4)) continue;
        flags++;
        CHECK(strlen(line) > 30 && line[29] == ' ', "--help: '%s' does not keep the 27-column head", line);
        memcpy(head, line + 2, sizeof(head) - 1);
        sscanf(head, "%63s %63s", name, value);
        const char *def = strstr(line, "(default ");
        char given[64] = "";
        int takes_value = value[0] != '\0';
        if (takes_value && !(def && sscanf(def, "(default %63[^)])", given) == 1))
            snprintf(given, sizeof(given), "%s", !strcmp(name, "--data") ? "/nonexistent" : "out.jsonl");
        tr_options_t o;
        const char *args[4] = {"--synthetic", name, takes_value ? given : NULL, NULL};
        char *err = NULL;
        int rc = parse(args, &o, &err);
        CHECK(rc == 0, "--help lists %s (value '%s') but the parser refuses it: %s", name, given, err ? err : "");
        free(err);
    }
    CHECK(flags >= 40, "--help lists %d flags", flags);
    printf("test_options: --help lists %d flags, each accepted with its default\n", flags);
    free(text);
}

int main(void)
{
    test_defaults_and_values();
    test_errors();
    test_help_matches_parser();
    printf("test_options: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
