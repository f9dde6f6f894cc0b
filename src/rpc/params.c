/* params.c — the parameter parsers every method of xgrd's service shares (see rpc_impl.h), and
 * the generic parameter helpers of xgr/rpc.h (xgr_rpc_param_*, xgr_rpc_params_object).
 *
 * One parser per kind of value, so that every method accepts and refuses the same way: one
 * unsigned-integer parser (xgr__rpc_uint, range-checked: a decimal string beyond 2^64-1 is refused,
 * never clamped), one rule for the names that become registry keys (xgr__rpc_check_name: registry
 * names, ostcIds, rule keys), one owner parser, one target parser. A refused call goes through
 * xgr__rpc_fail, which fills the error (code, field path, message) and returns the JSON-RPC code.
 *
 * Every parameter object is also checked for keys its method does not read (xgr__rpc_named for
 * params itself, xgr__rpc_keys for the objects inside it): a misspelt key (`init.stepID`,
 * `paylod`, `rootpid`) is refused with its path and the nearest known key, never ignored, so a
 * typo cannot start the wrong work.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_impl.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/suggest.h"

int xgr__rpc_fail(xgr_error *err, int code, const char *path, const char *fmt, ...) {
  assert(code < 0 && code > XGR_ERRCODE_MIN_);
  va_list ap;
  va_start(ap, fmt);
  xgr_error_vset(err, code, path, fmt, ap);
  va_end(ap);
  return code;
}

int xgr__rpc_code(int rc, xgr_error *err) {
  if (!err->message[0]) xgr_error_set(err, rc, err->path, "%s", xgr_errcode_name(rc));
  return rc;
}

/* v as compact JSON for a message (owned; "missing" stands in for NULL). */
static char *shown(const json_t *v) {
  char *t = v ? xgr_json_dumps_compact(v) : NULL;
  return t ? t : xgr__xstrdup(v ? "?" : "missing");
}

static int wrong(const json_t *v, const char *path, const char *what, xgr_error *err) {
  char *t = shown(v);
  xgr_error_set(err, XGR_ESCHEMA, path, "is %.60s; expected %s", t, what);
  free(t);
  return XGR_ESCHEMA;
}

int xgr__rpc_uint(const json_t *v, const char *path, uint64_t *out, xgr_error *err) {
  if (json_is_integer(v) && json_integer_value(v) >= 0) {
    *out = (uint64_t)json_integer_value(v);
    return 0;
  }
  xgr_value x;
  if (xgr_json_exact_integer(v, &x)) {   /* a number beyond int64 in the request */
    bool fits = x.kind == XGR_VUINT;
    if (fits) *out = x.as.u;
    char dec[96];
    xgr_bigint_to_dec(x, dec, sizeof dec);
    xgr_value_release(x);
    if (fits) return 0;
    return xgr__rpc_fail(err, XGR_ESCHEMA, path,
                         "is %.60s; expected a non-negative integer of at most 64 bits (<= %llu)", dec,
                         (unsigned long long)UINT64_MAX);
  }
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    if (*s >= '0' && *s <= '9') {
      char *end;
      errno = 0;
      unsigned long long u = strtoull(s, &end, 10);
      if (!*end && errno != ERANGE) {
        *out = u;
        return 0;
      }
      if (!*end)
        return xgr__rpc_fail(err, XGR_ESCHEMA, path,
                             "is \"%.60s\"; expected a non-negative integer of at most 64 bits (<= %llu)", s,
                             (unsigned long long)UINT64_MAX);
    }
  }
  return wrong(v, path, "a non-negative integer or its decimal string", err);
}

static bool name_ok(const char *v, size_t max, const char *forbid) {
  return *v && strlen(v) <= max && !strpbrk(v, forbid);
}

int xgr__rpc_check_name(const char *v, size_t max, const char *forbid, const char *path, const char *what,
                        xgr_error *err) {
  if (!name_ok(v, max, forbid))
    return xgr__rpc_fail(err, XGR_ESCHEMA, path, "is \"%.80s\"; expected %s", v, what);
  return 0;
}

int xgr__rpc_ostc_id(const json_t *o, const char **out, xgr_error *err) {
  int rc = xgr__rpc_opt_str(o, "ostcId", out, err);
  if (rc || !*out) return rc;
  return xgr__rpc_check_name(*out, XGR__RPC_MAX_OSTC_ID, "/", "ostcId",
                             "a non-empty id without '/' (at most 96 bytes)", err);
}

void xgr__rpc_registry_key(char key[XGR__RPC_KEY_SIZE], const char *reg, const char *ostc_id) {
  assert(strlen(reg) <= XGR__RPC_MAX_REGISTRY && (!ostc_id || strlen(ostc_id) <= XGR__RPC_MAX_OSTC_ID));
  if (ostc_id) snprintf(key, XGR__RPC_KEY_SIZE, "%s/%s", reg, ostc_id);
  else snprintf(key, XGR__RPC_KEY_SIZE, "%s", reg);
}

int xgr__rpc_version(const json_t *o, uint32_t *out, xgr_error *err) {
  uint64_t v = 0;
  int rc = xgr_rpc_param_uint(o, "version", false, &v, err);
  if (rc) return rc;
  if (v > UINT32_MAX)
    return xgr__rpc_fail(err, XGR_ESCHEMA, "version",
                         "is %llu; expected a registry version (at most %lu)", (unsigned long long)v,
                         (unsigned long)UINT32_MAX);
  *out = (uint32_t)v;
  return 0;
}

int xgr__rpc_opt_str(const json_t *o, const char *key, const char **out, xgr_error *err) {
  return xgr_rpc_param_string(o, key, false, out, err);
}

int xgr__rpc_opt_address(const json_t *o, const char *key, char out[43], bool *has, xgr_error *err) {
  const char *v;
  *has = false;
  out[0] = 0;
  int rc = xgr__rpc_opt_str(o, key, &v, err);
  if (rc || !v) return rc;
  if (!xgr_rpc_is_address(v))
    return xgr__rpc_fail(err, XGR_ESCHEMA, key, "is \"%.80s\"; expected an owner's address (0x + 40 hex)", v);
  xgr__str_copy(out, 43, v);
  xgr__rpc_lower(out);
  *has = true;
  return 0;
}

const char *xgr__rpc_first_key(const json_t *o, const char *const *keys) {
  assert(keys[0]);
  for (; *keys; keys++) {
    const json_t *v = json_object_get(o, *keys);
    if (v && !json_is_null(v)) return *keys;
  }
  return keys[-1];
}

void xgr__rpc_client_addr(const xgr_rpc_caller *caller, char *out, size_t n) {
  const char *r = caller && caller->remote && *caller->remote ? caller->remote : "?";
  const char *colon = strrchr(r, ':');
  size_t len = colon && colon != r ? (size_t)(colon - r) : strlen(r);
  snprintf(out, n, "%.*s", (int)len, r);
}

void xgr__rpc_lower(char *s) {
  for (; *s; s++) *s = (char)tolower((unsigned char)*s);
}

void xgr__rpc_access_mark(json_t *o, const xgr_node_access_info *a) {
  json_object_set_new(o, "access", json_string(xgr_rpc_access_name(a)));
  json_object_set_new(o, "rights", json_integer(a->rights));
  if (a->via == XGR_NODE_VIA_GRANT) json_object_set_new(o, "grantExpiresAt", json_integer(a->expires_at));
}

json_t *xgr__rpc_pid_json(uint64_t root, uint64_t iter) {
  if (!iter) return xgr__rpc_u64_json(root);   /* a whole session: "R", never "R:0" */
  char b[48];
  xgr_pid_format(root, iter, b, sizeof b);
  return json_string(b);
}

json_t *xgr__rpc_u64_json(uint64_t v) {
  char b[20];
  return json_stringn_nocheck(b, xgr__u64_dec(b, v));
}

void xgr__rpc_proc_state(json_t *it, const xgr_store_proc *p) {
  json_object_set_new(it, "valid", p->valid < 0 ? json_null() : json_boolean(p->valid));
  if (p->status == XGR_PROC_WAITING) {   /* when it wakes on its own, and else what it waits for */
    static const char *const waits[] = {[XGR_NODE_WAIT_TIMER] = "timer", [XGR_NODE_WAIT_RESUME] = "resume",
                                        [XGR_NODE_WAIT_JOIN] = "join", [XGR_NODE_WAIT_WAKEUP] = "wakeUp"};
    int64_t w;
    xgr_node_wait why = xgr_node_proc_wait(p, &w);
    json_object_set_new(it, "nextWakeAt", w == XGR_NEVER ? json_null() : json_integer(w));
    json_object_set_new(it, "waitsFor", json_string(waits[why]));
  }
  if (p->status == XGR_PROC_ABORTED)
    json_object_set_new(it, "abortReason", json_string(xgr_abort_reason_name(p->abort_reason)));
  if (p->error) json_object_set_new(it, "error", json_string(p->error));
}

const char *xgr__rpc_proc_status(const xgr_store_proc *p) {
  if (p->status == XGR_PROC_WAITING && p->paused) return "paused";
  return xgr_proc_status_name((xgr_proc_status)p->status);
}

const char *xgr__rpc_session_status(const xgr_store_session *s) {
  if (s->status == XGR_RESULT_RUNNING && s->paused) return "paused";
  return xgr_session_result_name((xgr_session_result)s->status);
}

static const char *const session_words[] = {"running", "waiting", "paused", "live", "completed", "killed", "stalled",
                                            "limit", "finished"};
static const char *const proc_words[] = {"waiting", "running", "paused", "done", "aborted"};

int xgr__rpc_status_check(const char *status, const char *path, bool sessions, xgr_error *err) {
  if (!status) return 0;
  const char *const *w = sessions ? session_words : proc_words;
  size_t n = sessions ? sizeof session_words / sizeof *session_words : sizeof proc_words / sizeof *proc_words;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(status, w[i])) return 0;
  const char *near = xgr__nearest_key(status, w, n);
  xgr_buf b = {0};
  for (size_t i = 0; i < n; i++) xgr__buf_printf(&b, "%s%s", i ? (i + 1 == n ? " or " : ", ") : "", w[i]);
  char *list = xgr__buf_finish(&b, NULL);
  xgr__rpc_fail(err, XGR_ESCHEMA, path, "is \"%.40s\"; expected a %s status: %s%s%s%s", status,
                sessions ? "session" : "process", list, near ? " (did you mean \"" : "", near ? near : "", near ? "\"?)" : "");
  free(list);
  return XGR_ESCHEMA;
}

bool xgr__rpc_session_status_is(const xgr_node_session *ns, const char *want) {
  const xgr_store_session *s = &ns->row;
  bool live = s->status == XGR_RESULT_RUNNING;
  if (!strcmp(want, "live")) return live;
  if (!strcmp(want, "finished")) return !live;
  if (!strcmp(want, "running")) return live && !s->paused;
  if (!strcmp(want, "waiting"))   /* live, not paused, and no process runs now (a hibernated one: none) */
    return live && !s->paused && (!ns->in_engine || !ns->info.running);
  return !strcmp(want, xgr__rpc_session_status(s));
}

json_t *xgr__rpc_next_wake_json(const xgr_store_session *s, const xgr_store_proc *ps, size_t n) {
  int64_t next = xgr_node_session_next_wake(s, ps, n);
  return next == XGR_NEVER ? json_null() : json_integer(next);
}

int xgr__rpc_registry(const json_t *o, const char *const *keys, bool required, char *reg, size_t n, const char **path,
                      xgr_error *err) {
  static const char *const dflt[] = {"xrc729", "registry", NULL};
  const char *k = xgr__rpc_first_key(o, keys ? keys : dflt);
  const char *v;
  int rc = xgr_rpc_param_string(o, k, required, &v, err);
  if (rc) return rc;
  *path = k;
  if (!v || (!*v && !required)) v = "local";
  if (!name_ok(v, n - 1, "/#:")) {   /* the expectation is written for a refusal only */
    char what[120];
    snprintf(what, sizeof what, "an XRC-729 address (0x + 40 hex) or a name without '/', '#' or ':' (at most %zu bytes)",
             n - 1);
    return xgr__rpc_check_name(v, n - 1, "/#:", k, what, err);
  }
  xgr__str_copy(reg, n, v);
  xgr__rpc_lower(reg);
  return 0;
}

int xgr__rpc_owner(const json_t *o, const char *who, char *owner, size_t n, const char **path, xgr_error *err) {
  static const char *const keys[] = {"owner", "runner", NULL};
  const char *k = xgr__rpc_first_key(o, keys), *v;
  int rc = xgr__rpc_opt_str(o, k, &v, err);
  if (rc) return rc;
  *path = k;
  if (!v) v = who;
  if (!v || !*v)
    return xgr__rpc_fail(err, XGR_ESCHEMA, "owner",
                         "missing; expected the owner's address (0x + 40 hex)");
  if (!xgr_rpc_is_address(v))
    return xgr__rpc_fail(err, XGR_ESCHEMA, k, "is \"%.80s\"; expected an address (0x + 40 hex)",
                         v);
  xgr__str_copy(owner, n, v);
  xgr__rpc_lower(owner);
  return 0;
}

int xgr__rpc_target(const json_t *o, uint64_t *root, uint64_t *iter, const char **path, xgr_error *err) {
  static const char *const keys[] = {"pid", "processId", "rootPid", "sessionId", NULL};
  const char *k = xgr__rpc_first_key(o, keys);
  const json_t *v = json_object_get(o, k);
  *path = k;
  *iter = 0;
  if (!v || json_is_null(v))
    return xgr__rpc_fail(err, XGR_ESCHEMA, "pid",
                         "missing; expected \"pid\" (\"<rootPid>:<iter>\" or \"<rootPid>\") or \"rootPid\"");
  if (!strcmp(k, "pid") || !strcmp(k, "processId")) {
    xgr_value x;
    if (xgr_json_exact_integer(v, &x)) xgr_value_release(x);
    else x.kind = XGR_VNULL;
    if (json_is_integer(v) || x.kind != XGR_VNULL) return xgr__rpc_uint(v, k, root, err);
    if (!json_is_string(v) || xgr_pid_parse(json_string_value(v), root, iter) || !*root)
      return wrong(v, k, "\"<rootPid>:<iter>\" or \"<rootPid>\"", err);
    return 0;
  }
  return xgr__rpc_uint(v, k, root, err);
}

/* ---- unknown keys ------------------------------------------------------------------------------ */

int xgr__rpc_keys(const json_t *o, const char *path, const char *const *known, xgr_error *err) {
  assert(path && known);
  if (!json_is_object(o)) return 0;
  const char *cand[48];   /* known, and at the top level "from" (the caller's address: every method takes it) */
  size_t n = 0;
  for (; known[n]; n++) {
    assert(n + 1 < sizeof cand / sizeof *cand);
    cand[n] = known[n];
  }
  if (!*path) cand[n++] = "from";
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)o, k, v) {
    if (xgr__key_known(k, cand, n)) continue;
    char at[XGR_PATH_MAX];
    snprintf(at, sizeof at, "%s%s%.64s", path, *path ? "." : "", k);
    const char *near = xgr__nearest_key(k, cand, n);
    if (near)
      return xgr__rpc_fail(err, XGR_ESCHEMA, at, "params.%s: unknown key; did you mean \"%s\"?",
                           at, near);
    if (!known[0])
      return xgr__rpc_fail(err, XGR_ESCHEMA, at, "params.%s: unknown key; expected no parameters%s",
                           at, *path ? "" : " (other than from)");
    char list[400];
    xgr__keys_join(list, sizeof list, cand, n);
    return xgr__rpc_fail(err, XGR_ESCHEMA, at, "params.%s: unknown key; expected one of %s", at,
                         list);
  }
  return 0;
}

int xgr__rpc_named(const json_t *params, const char *const *known, const json_t **out, xgr_error *err) {
  int rc = xgr_rpc_params_object(params, out, err);
  return rc ? rc : xgr__rpc_keys(*out, "", known, err);
}

/* ---- the generic helpers of xgr/rpc.h --------------------------------------------------------- */

/* params[key], NULL when absent or null; a missing required key is refused. */
static int param(const json_t *params, const char *key, bool required, const json_t **v, const char *what,
                 xgr_error *err) {
  *v = json_is_object(params) ? json_object_get(params, key) : NULL;
  if (!*v || json_is_null(*v)) {
    *v = NULL;
    if (required) return xgr__rpc_fail(err, XGR_ESCHEMA, key, "missing; expected %s", what);
  }
  return 0;
}

int xgr_rpc_param_string(const json_t *params, const char *key, bool required, const char **out, xgr_error *err) {
  const json_t *v;
  *out = NULL;
  int rc = param(params, key, required, &v, "a string", err);
  if (rc || !v) return rc;
  xgr_value x;
  if (xgr_json_exact_integer(v, &x)) {   /* a number beyond int64: a number, not a string */
    char dec[96];
    xgr_bigint_to_dec(x, dec, sizeof dec);
    xgr_value_release(x);
    return xgr__rpc_fail(err, XGR_ESCHEMA, key, "is %.60s; expected a string", dec);
  }
  if (!json_is_string(v)) return wrong(v, key, "a string", err);
  *out = json_string_value(v);
  return 0;
}

int xgr_rpc_param_object(const json_t *params, const char *key, bool required, const json_t **out, xgr_error *err) {
  const json_t *v;
  *out = NULL;
  int rc = param(params, key, required, &v, "an object", err);
  if (rc || !v) return rc;
  if (!json_is_object(v)) return wrong(v, key, "an object", err);
  *out = v;
  return 0;
}

int xgr_rpc_param_uint(const json_t *params, const char *key, bool required, uint64_t *out, xgr_error *err) {
  const json_t *v;
  int rc = param(params, key, required, &v, "a non-negative integer (or its decimal string)", err);
  if (rc || !v) return rc;
  return xgr__rpc_uint(v, key, out, err);
}

int xgr_rpc_params_object(const json_t *params, const json_t **out, xgr_error *err) {
  *out = NULL;
  if (!params || json_is_null(params)) return 0;
  if (json_is_object(params)) {
    *out = params;
    return 0;
  }
  if (json_is_array(params) && json_array_size(params) == 0) return 0;
  if (json_is_array(params) && json_array_size(params) == 1 && json_is_object(json_array_get(params, 0))) {
    *out = json_array_get(params, 0);
    return 0;
  }
  return xgr__rpc_fail(err, XGR_ESCHEMA, json_is_array(params) ? "[0]" : "",
                       "params are an object, or an array holding one object (params[0])");
}
