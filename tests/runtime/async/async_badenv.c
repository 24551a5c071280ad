/* async_badenv.c - mode badenv: a bad HORA_* value fails hora_init with
 * HORA_ERR_CONFIG and a message naming the variable; good settings work. */
#include <stdlib.h>
#include <string.h>

#include "async_common.h"

void mode_badenv(void)
{
    static const char *const bad[][2] = {
        {"HORA_CYCLE_TIME_MS", "-1"},
        {"HORA_FUSION_THRESHOLD", "lots"},
        {"HORA_CACHE_CAPACITY", "-5"},
        {"HORA_STALL_CHECK_S", "abc"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        setenv(bad[k][0], bad[k][1], 1);
        hora_status_t st = hora_init();
        CHECK(st == HORA_ERR_CONFIG, "%s=%s: hora_init returned %s, expected HORA_ERR_CONFIG", bad[k][0], bad[k][1],
              hora_status_string(st));
        CHECK(strstr(hora_last_error(), bad[k][0]) != NULL, "%s=%s: the message does not name the variable: '%s'",
              bad[k][0], bad[k][1], hora_last_error());
        CHECK(!hora_initialized(), "%s=%s: hora_initialized() after a failed hora_init", bad[k][0], bad[k][1]);
        if (st == HORA_OK) hora_shutdown();
        unsetenv(bad[k][0]);
    }
    if (!runtime_start("badenv, good settings")) return;
    ar_case_next_ok("badenv");
    runtime_stop("badenv");
}
