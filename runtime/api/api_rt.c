/* api_rt.c - the runtime's one process-wide instance (api.h) and the check
 * every public call makes first. Apart from hora.c, which builds and tears
 * it down, so that api_sets.c, api_async.c and api_coll.c read it without
 * calling up into the file that calls them. */
#include "api/api.h"
#include "base/status.h"

struct hora_rt hora_rt;

hora_status_t api_check_initialized(const char *what)
{
    if (!hora_rt.initialized || !hora_rt.coord)
        return status_set(HORA_ERR_NOT_INITIALIZED, "%s called before hora_init (or after hora_shutdown)", what);
    return HORA_OK;
}
