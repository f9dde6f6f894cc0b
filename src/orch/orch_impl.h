/* orch_impl.h — private state of a parsed orchestration, shared by the files of src/orch. */
#ifndef XGR_ORCH_IMPL_H
#define XGR_ORCH_IMPL_H

#include "xgr/arena.h"
#include "xgr/orch.h"

typedef struct orch_impl {
  xgr_arena arena;                     /* owns every string and array of the model */
  uint16_t sorted[XGR_MAX_STEPS];      /* step indices sorted by id, for xgr_orch_find */
} orch_impl;

/* Fill o->reach_all and o->reach_scope (allocated in im->arena). Returns 0 or XGR_ENOMEM. */
int xgr__orch_compute_reach(xgr_orch *o, orch_impl *im);

#endif
