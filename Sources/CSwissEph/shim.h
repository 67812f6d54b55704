#ifndef ASTRO_CSWISSEPH_SHIM_H
#define ASTRO_CSWISSEPH_SHIM_H
#include <swephexp.h>

// Macros Swift does not import reliably (expressions, not plain literals), as typed constants.
static const int32 cswisseph_flag_swieph = SEFLG_SWIEPH;
static const int32 cswisseph_flag_moseph = SEFLG_MOSEPH;
static const int32 cswisseph_flag_speed = SEFLG_SPEED;
static const int32 cswisseph_flag_sidereal = SEFLG_SIDEREAL;
static const int32 cswisseph_greg_cal = SE_GREG_CAL;
// The size libswe expects for error and version buffers (AS_MAXCH).
static const int cswisseph_max_chars = AS_MAXCH;
#endif
