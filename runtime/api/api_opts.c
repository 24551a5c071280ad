/* api_opts.c - hora_opts_t's struct_bytes rule (hora.h): what a caller built
 * against an older, smaller hora_opts_t passes is read field by field, and
 * the fields it does not know take their HORA_OPTS_INIT values. */
#include <stddef.h>
#include <string.h>

#include "api/api_opts.h"
#include "base/status.h"

/* hora_opts_t's fields after struct_bytes, in order: each is copied when it
 * lies wholly inside the caller's struct_bytes. A field added to hora.h
 * (at the end) gets a row here; the assertion below fails until it has. */
#define API_OPTS_FIELD(field)                                           \
    {                                                                   \
        offsetof(hora_opts_t, field), sizeof(((hora_opts_t *)0)->field) \
    }
static const struct {
    size_t offset, bytes;
} api_opts_fields[] = {
    API_OPTS_FIELD(prescale),    API_OPTS_FIELD(postscale),   API_OPTS_FIELD(compression),  API_OPTS_FIELD(memory),
    API_OPTS_FIELD(ndim),        API_OPTS_FIELD(dims),        API_OPTS_FIELD(device),       API_OPTS_FIELD(stream),
    API_OPTS_FIELD(ready_event), API_OPTS_FIELD(process_set), API_OPTS_FIELD(reproducible),
};
/* The last row's field ends where hora_opts_t does (but for tail padding). */
#define API_OPTS_LAST reproducible
#define API_OPTS_LAST_END (offsetof(hora_opts_t, API_OPTS_LAST) + sizeof(((hora_opts_t *)0)->API_OPTS_LAST))
_Static_assert(sizeof(hora_opts_t) - API_OPTS_LAST_END < _Alignof(hora_opts_t),
               "hora_opts_t has a field after API_OPTS_LAST: add it to api_opts_fields and make it API_OPTS_LAST");

/* The caller's struct_bytes, by hora.h's rule (the words name the fix). */
static hora_status_t api_opts_check_bytes(const char *what, const char *name, const char *field, size_t bytes)
{
    if (bytes == 0)
        return status_fail(HORA_ERR_INVALID_ARG, "%s('%s'): %s is 0: initialise hora_opts_t with HORA_OPTS_INIT", what,
                           name, field);
    if (bytes < sizeof(size_t))
        return status_fail(HORA_ERR_INVALID_ARG,
                           "%s('%s'): %s %zu is too small (it cannot hold struct_bytes itself, %zu bytes): "
                           "initialise hora_opts_t with HORA_OPTS_INIT",
                           what, name, field, bytes, sizeof(size_t));
    if (bytes > sizeof(hora_opts_t))
        return status_fail(HORA_ERR_INVALID_ARG,
                           "%s('%s'): %s %zu is larger than this libhora's hora_opts_t (%zu bytes): the program was "
                           "built against a newer hora.h, or an older one without struct_bytes; rebuild it against "
                           "the hora.h of the libhora it loads",
                           what, name, field, bytes, sizeof(hora_opts_t));
    return HORA_OK;
}

hora_status_t api_opts_read(const char *what, const char *name, const hora_opts_t *opts, int index, hora_opts_t *out)
{
    hora_opts_t o = HORA_OPTS_INIT;
    if (opts) {
        /* Through bytes: the caller's struct may be shorter than ours. */
        size_t stride, bytes;
        memcpy(&stride, opts, sizeof(stride));
        HORA_CHECK(api_opts_check_bytes(what, name, index ? "opts[0].struct_bytes" : "opts->struct_bytes", stride));
        const char *in = (const char *)opts + (size_t)index * stride;
        memcpy(&bytes, in, sizeof(bytes));
        if (bytes != stride)
            return status_fail(HORA_ERR_INVALID_ARG,
                               "%s('%s'): opts[%d].struct_bytes is %zu, opts[0]'s %zu: the members of an array of "
                               "options are all initialised with the same HORA_OPTS_INIT",
                               what, name, index, bytes, stride);
        for (size_t f = 0; f < sizeof(api_opts_fields) / sizeof(api_opts_fields[0]); f++)
            if (api_opts_fields[f].offset + api_opts_fields[f].bytes <= bytes)
                memcpy((char *)&o + api_opts_fields[f].offset, in + api_opts_fields[f].offset,
                       api_opts_fields[f].bytes);
    }
    *out = o;
    return HORA_OK;
}
