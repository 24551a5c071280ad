/*
 * cpu_backend.h - the cpu backend's ops table (oneDNN), for tr_backend_find
 * in ../backend.c. Everything else about it is reached through the table.
 */
#ifndef TR_BACKEND_CPU_H
#define TR_BACKEND_CPU_H

#include "backend.h"

extern const struct tr_backend_ops tr_backend_cpu_ops;

#endif
