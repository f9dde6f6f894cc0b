/* outcome.c — step result -> core outcome (see xgr/outcome.h). */
#include "xgr/outcome.h"

#include <stdio.h>
#include <string.h>

void xgr_outcome_from_result(const xgr_step_result *r, const char *rule_address, xgr_outcome_buf *buf,
                             xgr_step_outcome *o) {
  memset(o, 0, sizeof *o);
  o->effective = r->effective;
  o->outcome_payload = r->output;
  o->wait_sec = (int64_t)r->wait_sec;
  o->rule_address = rule_address;
  if (r->error.code) {
    o->kind = XGR_OUTCOME_HARD_ERROR;
    snprintf(buf->error, sizeof buf->error, "%s%s%s [%s]", r->error.path, r->error.path[0] ? ": " : "",
             r->error.message, xgr_errcode_name(r->error.code));
    o->error = buf->error;
  } else if (r->action == XGR_ACTION_CANCEL_SESSION) {
    o->kind = XGR_OUTCOME_CANCEL_SESSION;
    o->error = "cancelSession";
  } else if (r->action == XGR_ACTION_ABORT_STEP) {
    o->kind = XGR_OUTCOME_ABORT_STEP;
    o->error = "abortStep";
  } else {
    o->kind = r->valid ? XGR_OUTCOME_VALID : XGR_OUTCOME_INVALID;
    size_t n = 0, cap = sizeof buf->wakeups / sizeof buf->wakeups[0];
    for (size_t i = 0; i < r->nwakeups && n < cap; i++) {
      if (r->wakeups[i].skipped) continue;
      buf->wakeups[n++] = (xgr_wakeup_req){r->wakeups[i].runner, r->wakeups[i].session_id, r->wakeups[i].step_id,
                                           r->wakeups[i].payload};
    }
    o->wakeups = buf->wakeups;
    o->nwakeups = n;
  }
}
