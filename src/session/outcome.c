/* outcome.c — step result -> core outcome (see xgr/outcome.h). */
#include "xgr/outcome.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

json_t *xgr_outcome_api_json(const xgr_step_result *r, bool with_method) {
  json_t *a = json_array();
  for (size_t i = 0; i < r->napi_calls; i++) {
    const xgr_api_call_report *c = &r->api_calls[i];
    json_t *e = json_pack("{s:s, s:I, s:I}", "name", c->name ? c->name : "", "status", (json_int_t)c->status, "ms",
                          (json_int_t)(c->ms + 0.5));
    json_t *u = c->url ? json_stringn(c->url, strnlen(c->url, 300)) : NULL;   /* NULL too for a cut UTF-8 char */
    json_t *er = c->error ? json_stringn(c->error, strnlen(c->error, 300)) : NULL;
    json_object_set_new(e, "url", u ? u : json_null());
    json_object_set_new(e, "error", er ? er : c->error ? json_string("(not shown)") : json_null());
    if (with_method) json_object_set_new(e, "method", c->method ? json_string(c->method) : json_null());
    json_array_append_new(a, e);
  }
  return a;
}

void xgr_outcome_from_result(const xgr_step_result *r, const char *rule_address, xgr_outcome_buf *buf,
                             xgr_step_outcome *o) {
  memset(o, 0, sizeof *o);
  o->effective = r->effective;
  o->outcome_payload = r->output;
  o->wait_sec = (int64_t)r->wait_sec;
  o->rule_address = rule_address;
  if (r->napi_calls) {   /* what each API call did, for the history row (issue 15: a DNS failure is visible) */
    json_t *a = xgr_outcome_api_json(r, false);
    char *t = json_dumps(a, JSON_COMPACT);
    if (t && strlen(t) < sizeof buf->api) {
      memcpy(buf->api, t, strlen(t) + 1);
      o->api_json = buf->api;
    }
    free(t);
    json_decref(a);
  }
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
