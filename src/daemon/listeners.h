/* listeners.h -- the control-plane and data-plane listeners, started over the tables assembled
 * from the front ends (listeners.c) */
#ifndef SPACE_LISTENERS_H
#define SPACE_LISTENERS_H

#include "err.h"

struct spaced;

/* Binds and serves both planes (api_start, dataplane_start). */
int listeners_start(struct spaced *d, space_err *err);
/* The data plane's table alone (the HTTP stage's stub serves it beside a control plane of its
 * own). */
struct front_tables;
int listeners_data_tables(struct spaced *d, struct front_tables *t, space_err *err);

#endif
