/*
 * elastic_compat.h - TEMPORARY: the names of the elastic contract
 * (/work/elastic-contract.md section 1) until libhora's land on main; then
 * this file goes and hora.h declares them. Under mpirun these are what the
 * contract says libhora gives: not elastic, generation 0.
 */
#ifndef TR_CLI_ELASTIC_COMPAT_H
#define TR_CLI_ELASTIC_COMPAT_H

#include "hora.h"

#define HORA_ERR_PEER_LOST ((hora_status_t)-16)
static inline const char *hora_bootstrap(void) { return hora_initialized() ? "mpi" : "none"; }
static inline int hora_generation(void) { return hora_initialized() ? 0 : -1; }
static inline int hora_elastic(void) { return 0; }
static inline hora_status_t hora_elastic_check(int *hosts_waiting)
{
    *hosts_waiting = 0;
    return HORA_OK;
}
static inline hora_status_t hora_elastic_reform(void) { return HORA_ERR_UNSUPPORTED; }

#endif
