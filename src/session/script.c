/* script.c — parse timed control actions (see xgr/script.h); shared by the deterministic driver
 * and the concurrent engine so that both read scripts the same way. */
#include "xgr/script.h"
#include "util/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/suggest.h"
#include "xgr/session.h"
#include "xgr/xrc_types.h"

static int act_err(xgr_error *err, size_t i, const char *field, const char *msg) {
  char path[160];
  snprintf(path, sizeof path, "[%zu]%s%.120s", i, field ? "." : "", field ? field : "");
  return xgr_error_set(err, XGR_ESCHEMA, path, "%s", msg);
}

static int parse_pid(const json_t *v, uint64_t *root, uint64_t *iter) {
  if (!json_is_string(v)) return XGR_EINVAL;
  return xgr_pid_parse(json_string_value(v), root, iter);
}

static char *dup(const char *s) {
  char *d = xgr__xstrdup(s);
  return d;
}

/* Refuse keys of object o (entry i, member `field` or NULL) that are not in known[0..n), naming the
 * nearest known key: a misspelt key (`from` for `caller`) must not be silently ignored. */
static int check_keys(const json_t *o, size_t i, const char *field, const char *const *known, size_t n,
                      xgr_error *err) {
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)o, k, v) {
    if (xgr__key_known(k, known, n)) continue;
    const char *near = xgr__nearest_key(k, known, n);
    char list[160], path[96], msg[320];
    xgr__keys_join(list, sizeof list, known, n);
    snprintf(path, sizeof path, "%s%s%.60s", field ? field : "", field ? "." : "", k);
    if (near) snprintf(msg, sizeof msg, "unknown key \"%.60s\" (did you mean \"%s\"?); expected one of %s", k, near, list);
    else snprintf(msg, sizeof msg, "unknown key \"%.60s\"; expected one of %s", k, list);
    return act_err(err, i, path, msg);
  }
  return 0;
}

/* Parse entry i of the script into *x (zeroed by the caller). */
static int parse_one(const json_t *a, size_t i, xgr_script_action *x, xgr_error *err) {
  if (!json_is_object(a)) return act_err(err, i, NULL, "an action is an object");
  static const char *const keys[] = {"at", "wake", "kill", "pause", "resume", "retry", "caller", "payload", "session"};
  static const char *const wake_keys[] = {"pid", "step"};
  int rc = check_keys(a, i, NULL, keys, sizeof keys / sizeof *keys, err);
  if (rc) return rc;
  const json_t *wk = json_object_get(a, "wake");
  if (json_is_object(wk) && (rc = check_keys(wk, i, "wake", wake_keys, 2, err))) return rc;
  x->payload = xgr_value_null();
  const json_t *at = json_object_get(a, "at");
  if (at && (!json_is_integer(at) || json_integer_value(at) < 0))
    return act_err(err, i, "at", "expected a non-negative integer (milliseconds on the session clock)");
  x->at = at ? (int64_t)json_integer_value(at) : 0;
  const json_t *v;
  int kinds = 0;
  if ((v = json_object_get(a, "wake"))) {
    kinds++;
    const json_t *pid = json_object_get(v, "pid"), *step = json_object_get(v, "step");
    if (pid && step)   /* one of them would be ignored: the action must say which */
      return act_err(err, i, "wake", "give \"pid\" (PID mode) or \"step\" (step mode), not both");
    if (pid) {
      if (parse_pid(pid, &x->root_pid, &x->iter) || x->iter == 0)
        return act_err(err, i, "wake.pid", "expected a process id \"<rootPid>:<iter>\"");
      x->kind = XGR_SCRIPT_WAKE_PID;
    } else if (json_is_string(step)) {
      x->kind = XGR_SCRIPT_WAKE_STEP;
      x->step = dup(json_string_value(step));
      const json_t *sess = json_object_get(a, "session");
      if (sess && !(json_is_integer(sess) && json_integer_value(sess) > 0))
        return act_err(err, i, "session", "expected a rootPid (a positive integer)");
      x->root_pid = sess ? (uint64_t)json_integer_value(sess) : 0;
    } else {
      return act_err(err, i, "wake", "expected {\"pid\": \"<rootPid>:<iter>\"} or {\"step\": STEP}");
    }
  }
  static const char *const names[] = {"kill", "pause", "resume", "retry"};
  static const xgr_script_kind kinds_of[] = {XGR_SCRIPT_KILL, XGR_SCRIPT_PAUSE, XGR_SCRIPT_RESUME, XGR_SCRIPT_RETRY};
  for (int k = 0; k < 4; k++)
    if ((v = json_object_get(a, names[k]))) {
      kinds++;
      x->kind = kinds_of[k];
      if (parse_pid(v, &x->root_pid, &x->iter) || (kinds_of[k] == XGR_SCRIPT_RETRY && x->iter == 0))
        return act_err(err, i, names[k], kinds_of[k] == XGR_SCRIPT_RETRY ? "expected a process id \"<rootPid>:<iter>\""
                                                                         : "expected \"<rootPid>\" or \"<rootPid>:<iter>\"");
    }
  if (kinds != 1) return act_err(err, i, NULL, "expected exactly one of wake, kill, pause, resume, retry");
  /* keys that only one kind of action reads are refused elsewhere rather than ignored */
  if (json_object_get(a, "session") && x->kind != XGR_SCRIPT_WAKE_STEP)
    return act_err(err, i, "session", "only a step-mode wake ({\"wake\":{\"step\":...}}) names a session; a pid names its own");
  if (json_object_get(a, "payload") && x->kind != XGR_SCRIPT_WAKE_PID && x->kind != XGR_SCRIPT_WAKE_STEP &&
      x->kind != XGR_SCRIPT_RETRY)
    return act_err(err, i, "payload", "only a wake or a retry carries a payload");
  const json_t *caller = json_object_get(a, "caller");
  if (caller && !(json_is_string(caller) && xgr_xrc_is_address(json_string_value(caller), json_string_length(caller))))
    return act_err(err, i, "caller", "expected an address (\"0x\" and 40 hex digits)");
  if (caller) x->caller = dup(json_string_value(caller));
  const json_t *pl = json_object_get(a, "payload");
  if (pl) {
    if (!json_is_object(pl)) return act_err(err, i, "payload", "expected an object");
    xgr_value_from_json(pl, 0, &x->payload, NULL);
  }
  x->text = json_dumps(a, JSON_COMPACT);
  if (!x->text) abort();
  return 0;
}

void xgr_script_free(xgr_script_action *a, size_t n) {
  for (size_t i = 0; a && i < n; i++) {
    free(a[i].step);
    free(a[i].caller);
    free(a[i].text);
    xgr_value_release(a[i].payload);
  }
  free(a);
}

int xgr_script_parse(const json_t *script, xgr_script_action **out, size_t *nout, xgr_error *err) {
  *out = NULL;
  *nout = 0;
  if (!json_is_array(script)) return xgr_error_set(err, XGR_ESCHEMA, "", "a script is an array of actions");
  size_t n = json_array_size(script);
  xgr_script_action *a = xgr__xcalloc(n ? n : 1, sizeof *a);
  for (size_t i = 0; i < n; i++) {
    int rc = parse_one(json_array_get(script, i), i, &a[i], err);
    if (rc) {
      xgr_script_free(a, i + 1);
      return rc;
    }
  }
  for (size_t i = 1; i < n; i++) {   /* stable insertion sort by time: scripts are short */
    xgr_script_action v = a[i];
    size_t j = i;
    while (j > 0 && a[j - 1].at > v.at) {
      a[j] = a[j - 1];
      j--;
    }
    a[j] = v;
  }
  *out = a;
  *nout = n;
  return 0;
}
