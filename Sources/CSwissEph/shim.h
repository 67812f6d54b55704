#ifndef ASTRO_CSWISSEPH_SHIM_H
#define ASTRO_CSWISSEPH_SHIM_H
#include <swephexp.h>
#endif
