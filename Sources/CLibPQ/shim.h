#ifndef ASTRO_CLIBPQ_SHIM_H
#define ASTRO_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
