/* replay.c — turn a trace of `xgr explore` (xgr/explore.h) back into a run of the deterministic
 * driver: each promote, finish (forced outcome or the step's rule) and clock advance is applied
 * in the trace's order through the driver's forced-run calls, so the driver records and prints the
 * run as usual (timeline, tree, --json report). Forced outcomes are built exactly as the explorer
 * builds them: the payload passes through and valid/invalid take the branch's literal waitSec. */
#include "explore/explore_impl.h"

#include <string.h>

#include "util/alloc.h"

int xgr_explore_replay(xgr_driver *d, const xgr_bundle *b, const json_t *file, xgr_error *err) {
  const json_t *trace = json_object_get(file, "trace");
  if (!json_is_array(trace)) return xgr_error_set(err, XGR_EINVAL, "trace", "the replay file has no \"trace\" array");
  size_t i;
  const json_t *a;
  json_array_foreach(trace, i, a) {
    char path[32];
    snprintf(path, sizeof path, "trace[%zu]", i);
    const xgr_session *s = xgr_driver_session(d, 0);
    if (!s) return xgr_error_set(err, XGR_ESTATE, path, "the driver has no session");
    const json_t *adv = json_object_get(a, "advance");
    const char *pid_s = json_string_value(json_object_get(a, "promote"));
    const char *fin_s = json_string_value(json_object_get(a, "finish"));
    if (json_is_integer(adv)) {
      xgr_driver_force_clock(d, (int64_t)json_integer_value(adv));
      continue;
    }
    uint64_t root, iter;
    if ((!pid_s && !fin_s) || xgr_pid_parse(pid_s ? pid_s : fin_s, &root, &iter) || !iter)
      return xgr_error_set(err, XGR_EINVAL, path, "expected {\"promote\":PID}, {\"finish\":PID,...} or {\"advance\":MS}");
    if (pid_s) {
      if (xgr_driver_force_promote(d, 0, iter, err)) return err->code;
      continue;
    }
    const xgr_proc *p = xgr_session_find(s, iter);
    if (!p || p->status != XGR_PROC_RUNNING)
      return xgr_error_set(err, XGR_ESTATE, path, "process %s is not running at this point of the trace", fin_s);
    const char *by = json_string_value(json_object_get(a, "by"));
    const char *oc = json_string_value(json_object_get(a, "outcome"));
    xgr_step_outcome o;
    memset(&o, 0, sizeof o);
    int rc;
    if (by && !strcmp(by, "rule")) {
      if (!b->step_rule || !b->step_rule[p->step])
        return xgr_error_set(err, XGR_EINVAL, path, "step %s has no rule to run", b->orch->steps[p->step].id);
      xgr_step_ctx ctx = {.owner = xgr_session_owner(s), .session_id = xgr_session_root_pid(s), .pid = fin_s,
                          .step_id = b->orch->steps[p->step].id};
      xgr_step_result res;
      memset(&res, 0, sizeof res);
      xgr_value pl = xgr_value_retain(p->payload);
      xgr_step_run(b->step_rule[p->step], pl, &ctx, NULL, &res);
      xgr_value_release(pl);
      xgr_outcome_buf ob;
      xgr_outcome_from_result(&res, b->step_rule_address[p->step], &ob, &o);
      o.nwakeups = 0;   /* as explored: internal wake-ups leave the session */
      rc = xgr_driver_force_result(d, 0, iter, &o, err);
      xgr_step_result_free(&res);
    } else {
      if (!oc || (strcmp(oc, "valid") && strcmp(oc, "invalid") && strcmp(oc, "error")))
        return xgr_error_set(err, XGR_EINVAL, path, "outcome is '%s'; expected valid, invalid or error", oc ? oc : "(none)");
      o.effective = p->payload;
      o.outcome_payload = xgr_value_null();
      if (!strcmp(oc, "error")) {
        o.kind = XGR_OUTCOME_HARD_ERROR;
        o.error = "explore: forced hard error";
      } else {
        o.kind = !strcmp(oc, "valid") ? XGR_OUTCOME_VALID : XGR_OUTCOME_INVALID;
        o.wait_sec = xgr__explore_branch_wait(b, p->step, o.kind == XGR_OUTCOME_VALID);
      }
      xgr_value pl = xgr_value_retain(p->payload);   /* p may be freed by the call */
      o.effective = pl;
      rc = xgr_driver_force_result(d, 0, iter, &o, err);
      xgr_value_release(pl);
    }
    if (rc) return rc;
  }
  return 0;
}
