/* script.c — timed control actions for the engine (`xgr run --script`, the scenario files): each
 * entry is parsed into a control request and scheduled with xgr_engine_at; when its time comes
 * the timer thread sends it to the session's actor as an asynchronous control call labelled with
 * the entry's text, so the actor records it in the report exactly as the deterministic driver
 * does. Scripts are parsed by xgr_script_parse (xgr/script.h), as the deterministic driver does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "util/alloc.h"
#include "xgr/script.h"

typedef struct script_act {
  xgr_engine *e;
  xgr_engine_ctl c;
  char *step, *caller, *text;
  xgr_value payload;
} script_act;

static void act_free(script_act *a) {
  free(a->step);
  free(a->caller);
  free(a->text);
  xgr_value_release(a->payload);
  free(a);
}

static void act_fire(void *ctx, int64_t now) {
  script_act *a = ctx;
  xgr_engine_control(a->e, &a->c, NULL, NULL);
  act_free(a);
}

int xgr_engine_add_script(xgr_engine *e, uint64_t root_pid, const json_t *script, int64_t base_ms, xgr_error *err) {
  xgr_script_action *acts;
  size_t n;
  int rc = xgr_script_parse(script, &acts, &n, err);
  if (rc) return rc;
  static const xgr_engine_ctl_kind kind_of[] = {[XGR_SCRIPT_WAKE_PID] = XGR_CTL_WAKE_PID,
                                                [XGR_SCRIPT_WAKE_STEP] = XGR_CTL_WAKE_STEP,
                                                [XGR_SCRIPT_KILL] = XGR_CTL_KILL,
                                                [XGR_SCRIPT_PAUSE] = XGR_CTL_PAUSE,
                                                [XGR_SCRIPT_RESUME] = XGR_CTL_RESUME,
                                                [XGR_SCRIPT_RETRY] = XGR_CTL_RETRY};
  /* in time order, script order for ties (the timer heap keeps scheduling order) */
  for (size_t i = 0; i < n && !rc; i++) {
    script_act *x = xgr__xcalloc(1, sizeof *x);
    xgr_script_action *s = &acts[i];
    x->e = e;
    x->step = s->step;      /* the strings and the payload move into the action */
    x->caller = s->caller;
    x->text = s->text;
    x->payload = s->payload;
    s->step = s->caller = s->text = NULL;
    s->payload = xgr_value_null();
    x->c = (xgr_engine_ctl){.kind = kind_of[s->kind],
                            .root_pid = s->kind == XGR_SCRIPT_WAKE_STEP && !s->root_pid ? root_pid : s->root_pid,
                            .iter = s->iter,
                            .step = x->step,
                            .caller = x->caller,
                            .payload = x->payload,
                            .label = x->text};
    rc = xgr_engine_at(e, base_ms + s->at, act_fire, x);
    if (rc) {
      act_free(x);
      xgr_error_set(err, rc, NULL, "cannot schedule the script: the engine is shutting down");
    }
  }
  xgr_script_free(acts, n);
  return rc;
}
