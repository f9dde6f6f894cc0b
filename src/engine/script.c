/* script.c — timed control actions for the engine (`xgr run --script`, the scenario files): each
 * entry is parsed into a control request and scheduled with xgr_engine_at; when its time comes
 * the timer thread sends it to the session's actor as an asynchronous control call labelled with
 * the entry's text, so the actor records it in the report exactly as the deterministic driver
 * does. The format is that of xgr_driver_add_script. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

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

static int act_err(xgr_error *err, size_t i, const char *field, const char *msg) {
  char path[64];
  snprintf(path, sizeof path, "[%zu]%s%s", i, field ? "." : "", field ? field : "");
  return xgr_error_set(err, XGR_ESCHEMA, path, "%s", msg);
}

static int parse_pid(const json_t *v, uint64_t *root, uint64_t *iter) {
  if (!json_is_string(v)) return XGR_EINVAL;
  return xgr_pid_parse(json_string_value(v), root, iter);
}

/* Parse entry i into a new action, or fill *err. */
static script_act *parse_one(xgr_engine *e, uint64_t root_pid, const json_t *a, size_t i, xgr_error *err) {
  if (!json_is_object(a)) {
    act_err(err, i, NULL, "an action is an object");
    return NULL;
  }
  script_act *x = calloc(1, sizeof *x);
  if (!x) abort();
  x->e = e;
  x->payload = xgr_value_null();
  const json_t *v;
  int kinds = 0;
  if ((v = json_object_get(a, "wake"))) {
    kinds++;
    const json_t *pid = json_object_get(v, "pid"), *step = json_object_get(v, "step");
    if (pid) {
      if (parse_pid(pid, &x->c.root_pid, &x->c.iter) || x->c.iter == 0) {
        act_err(err, i, "wake.pid", "expected a process id \"<rootPid>:<iter>\"");
        goto fail;
      }
      x->c.kind = XGR_CTL_WAKE_PID;
    } else if (json_is_string(step)) {
      x->c.kind = XGR_CTL_WAKE_STEP;
      x->step = strdup(json_string_value(step));
      const json_t *sess = json_object_get(a, "session");
      x->c.root_pid = json_is_integer(sess) ? (uint64_t)json_integer_value(sess) : root_pid;
    } else {
      act_err(err, i, "wake", "expected {\"pid\": \"<rootPid>:<iter>\"} or {\"step\": STEP}");
      goto fail;
    }
  }
  static const char *const names[] = {"kill", "pause", "resume"};
  static const xgr_engine_ctl_kind kinds_of[] = {XGR_CTL_KILL, XGR_CTL_PAUSE, XGR_CTL_RESUME};
  for (int k = 0; k < 3; k++)
    if ((v = json_object_get(a, names[k]))) {
      kinds++;
      x->c.kind = kinds_of[k];
      if (parse_pid(v, &x->c.root_pid, &x->c.iter)) {
        act_err(err, i, names[k], "expected \"<rootPid>\" or \"<rootPid>:<iter>\"");
        goto fail;
      }
    }
  if (kinds != 1) {
    act_err(err, i, NULL, "expected exactly one of wake, kill, pause, resume");
    goto fail;
  }
  const json_t *caller = json_object_get(a, "caller");
  if (caller && !json_is_string(caller)) {
    act_err(err, i, "caller", "expected an address string");
    goto fail;
  }
  if (caller) x->caller = strdup(json_string_value(caller));
  const json_t *pl = json_object_get(a, "payload");
  if (pl) {
    if (!json_is_object(pl)) {
      act_err(err, i, "payload", "expected an object");
      goto fail;
    }
    xgr_value_from_json(pl, 0, &x->payload, NULL);
  }
  x->text = json_dumps(a, JSON_COMPACT);
  x->c.step = x->step;
  x->c.caller = x->caller;
  x->c.payload = x->payload;
  x->c.label = x->text;
  return x;
fail:
  act_free(x);
  return NULL;
}

int xgr_engine_add_script(xgr_engine *e, uint64_t root_pid, const json_t *script, int64_t base_ms, xgr_error *err) {
  if (!json_is_array(script)) return xgr_error_set(err, XGR_ESCHEMA, "", "a script is an array of actions");
  size_t n = json_array_size(script);
  script_act **acts = calloc(n ? n : 1, sizeof *acts);
  int64_t *ats = calloc(n ? n : 1, sizeof *ats);
  if (!acts || !ats) abort();
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    const json_t *a = json_array_get(script, i);
    const json_t *at = json_is_object(a) ? json_object_get(a, "at") : NULL;
    if (at && (!json_is_integer(at) || json_integer_value(at) < 0)) {
      rc = act_err(err, i, "at", "expected a non-negative integer (milliseconds on the session clock)");
      break;
    }
    ats[i] = at ? (int64_t)json_integer_value(at) : 0;
    acts[i] = parse_one(e, root_pid, a, i, err);
    if (!acts[i]) rc = err->code ? err->code : XGR_ESCHEMA;
  }
  /* schedule in time order, script order for ties (the timer heap keeps scheduling order) */
  for (size_t i = 0; i < n && !rc; i++) {
    size_t best = n;
    for (size_t k = 0; k < n; k++)
      if (acts[k] && (best == n || ats[k] < ats[best])) best = k;
    if (best == n) break;
    rc = xgr_engine_at(e, base_ms + ats[best], act_fire, acts[best]);
    if (rc) {
      xgr_error_set(err, rc, NULL, "cannot schedule the script: the engine is shutting down");
      break;
    }
    acts[best] = NULL;
  }
  for (size_t i = 0; i < n; i++)
    if (acts[i]) act_free(acts[i]);
  free(acts);
  free(ats);
  return rc;
}
