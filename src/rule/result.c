/* result.c — the step result: its JSON form (`xgr step --json`, history records) and release. */
#include <stdlib.h>
#include <string.h>

#include "xgr/rule.h"

#include <stdbool.h>
#include <strings.h>

#include "rule/rule_impl.h"
#include "util/alloc.h"

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

static json_t *typed_json(const xgr_typed_value *t) {
  json_t *o = json_object();
  json_object_set_new(o, "type", json_string(xgr_xrc_type_name(t->type)));
  json_object_set_new(o, "value", xgr_value_to_json(t->value));
  return o;
}

json_t *xgr_step_result_to_json(const xgr_step_result *r) {
  json_t *o = json_object();
  bool err = r->error.code != 0;
  json_object_set_new(o, "valid", json_boolean(r->valid));
  json_object_set_new(o, "ruleAction", json_string(xgr_rule_action_name(r->action)));
  json_object_set_new(o, "payload", xgr_value_to_json(r->payload.kind == XGR_VMAP ? r->payload : xgr_value_null()));
  json_object_set_new(o, "extracted", xgr_value_to_json(r->extracted));
  json_object_set_new(o, "outputPayload", xgr_value_to_json(r->output));
  json_object_set_new(o, "effectivePayload", xgr_value_to_json(r->effective));
  json_t *soft = json_array();
  for (size_t i = 0; i < xgr_list_size(r->soft_invalid); i++)
    json_array_append_new(soft, xgr_value_to_json(xgr_list_get(r->soft_invalid, i)));
  json_object_set_new(o, "softInvalid", soft);
  json_object_set_new(o, "missingInput", json_boolean(r->missing_input));
  json_object_set_new(o, "waitSec", json_integer((json_int_t)r->wait_sec));
  json_t *w = json_array();
  for (size_t i = 0; i < r->nwakeups; i++) {
    const xgr_wakeup *x = &r->wakeups[i];
    json_t *e = json_object();
    json_object_set_new(e, "runner", str_or_null(x->runner));
    json_object_set_new(e, "sessionId", x->skipped && !x->session_id ? json_null() : json_integer((json_int_t)x->session_id));
    json_object_set_new(e, "stepId", str_or_null(x->step_id));
    json_object_set_new(e, "payload", xgr_value_to_json(x->payload));
    json_object_set_new(e, "skipped", json_boolean(x->skipped));
    json_object_set_new(e, "reason", str_or_null(x->skip_reason));
    json_array_append_new(w, e);
  }
  json_object_set_new(o, "wakeUps", w);
  if (r->execution) {
    const xgr_execution *x = r->execution;
    json_t *e = json_object();
    json_object_set_new(e, "to", json_string(x->to));
    if (x->has_gas) json_object_set_new(e, "gas", json_pack("{s:I}", "limit", (json_int_t)x->gas_limit));
    json_object_set_new(e, "function", str_or_null(x->function));
    json_t *args = json_array();
    for (size_t i = 0; i < x->nargs; i++) json_array_append_new(args, typed_json(&x->args[i]));
    json_object_set_new(e, "args", args);
    json_object_set_new(e, "value", x->has_value ? typed_json(&x->value) : json_null());
    if (x->extras.kind == XGR_VMAP) json_object_set_new(e, "extras", xgr_value_to_json(x->extras));
    json_object_set_new(o, "execution", e);
  } else {
    json_object_set_new(o, "execution", json_null());
  }
  json_t *g = json_array();
  for (size_t i = 0; i < r->ngrants; i++)
    json_array_append_new(g, json_pack("{s:s,s:i,s:i}", "address", r->grants[i].address, "rights",
                                       (int)r->grants[i].rights, "expireDays", (int)r->grants[i].expire_days));
  json_object_set_new(o, "grants", g);
  json_t *a = json_array();
  for (size_t i = 0; i < r->napi_calls; i++) {
    const xgr_api_call_report *c = &r->api_calls[i];
    json_t *e = json_object();
    json_object_set_new(e, "name", str_or_null(c->name));
    json_object_set_new(e, "status", json_integer(c->status));
    json_object_set_new(e, "ms", json_integer((json_int_t)(c->ms + 0.5)));
    json_object_set_new(e, "error", str_or_null(c->error));
    json_object_set_new(e, "url", str_or_null(c->url));
    json_array_append_new(a, e);
  }
  json_object_set_new(o, "apiCalls", a);
  json_t *rd = json_array();
  for (size_t i = 0; i < r->nreads; i++)
    json_array_append_new(rd, json_pack("{s:o,s:o,s:o}", "function", str_or_null(r->reads[i].function), "to",
                                        str_or_null(r->reads[i].to), "error", str_or_null(r->reads[i].error)));
  json_object_set_new(o, "contractReads", rd);
  static const char *const rname[] = {"false", "true", "missing", "error", "skipped"};
  static const char *const tname[] = {"validate", "abortStep", "cancelSession"};
  json_t *rr = json_array();
  for (size_t i = 0; i < r->nrule_reports; i++)
    json_array_append_new(rr, json_pack("{s:s,s:s,s:o}", "type", tname[r->rule_reports[i].type % 3], "result",
                                        rname[r->rule_reports[i].outcome % 5], "detail",
                                        str_or_null(r->rule_reports[i].detail)));
  json_object_set_new(o, "rules", rr);
  if (r->has_log_expire_days) json_object_set_new(o, "logExpireDays", json_integer(r->log_expire_days));
  if (r->encrypt_logs >= 0) json_object_set_new(o, "encryptLogs", json_boolean(r->encrypt_logs));
  if (err)
    json_object_set_new(o, "error", json_pack("{s:s,s:s,s:s}", "path", r->error.path, "code",
                                              xgr_errcode_name(r->error.code), "message", r->error.message));
  else
    json_object_set_new(o, "error", json_null());
  return o;
}

void xgr_step_result_free(xgr_step_result *r) {
  if (!r) return;
  xgr_value_release(r->payload);
  xgr_value_release(r->extracted);
  xgr_value_release(r->output);
  xgr_value_release(r->effective);
  xgr_value_release(r->soft_invalid);
  for (size_t i = 0; i < r->nwakeups; i++) xgr_value_release(r->wakeups[i].payload);
  if (r->execution) {
    for (size_t i = 0; i < r->execution->nargs; i++) xgr_value_release(r->execution->args[i].value);
    if (r->execution->has_value) xgr_value_release(r->execution->value.value);
    xgr_value_release(r->execution->extras);
  }
  xgr_arena_free(&r->arena);
  memset(r, 0, sizeof *r);
}

static bool secret_name(const char *k, size_t n) {
  static const char *const words[] = {"key", "token", "secret", "pass", "auth", "sig"};
  for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
    size_t wl = strlen(words[w]);
    for (size_t i = 0; i + wl <= n; i++)
      if (!strncasecmp(k + i, words[w], wl)) return true;
  }
  return false;
}

char *xgr_rule_mask_url(const char *url) {
  size_t n = strlen(url);
  char *out = xgr__xmalloc(n * 3 + 8);   /* a masked part (at least 2 bytes: "@", "k=") grows by at most 3 */
  size_t o = 0;
  const char *p = url, *scheme = strstr(url, "://");
  if (scheme) {   /* the authority: scheme://[userinfo@]host... */
    const char *auth = scheme + 3, *end = auth + strcspn(auth, "/?#"), *at = memchr(auth, '@', (size_t)(end - auth));
    memcpy(out, url, (size_t)(auth - url));
    o = (size_t)(auth - url);
    if (at) {
      memcpy(out + o, "***", 3);
      o += 3;
      p = at;
    } else {
      p = auth;
    }
  }
  const char *q = strchr(p, '?');
  size_t head = q ? (size_t)(q - p) + 1 : strlen(p);
  memcpy(out + o, p, head);
  o += head;
  if (q) {
    const char *s = q + 1;
    while (*s && *s != '#') {
      size_t len = strcspn(s, "&#"), klen = strcspn(s, "=&#");
      if (klen < len && secret_name(s, klen)) {
        memcpy(out + o, s, klen + 1);
        o += klen + 1;
        memcpy(out + o, "***", 3);
        o += 3;
      } else {
        memcpy(out + o, s, len);
        o += len;
      }
      s += len;
      if (*s == '&') out[o++] = *s++;
    }
    size_t rest = strlen(s);
    memcpy(out + o, s, rest);
    o += rest;
  }
  out[o] = '\0';
  return out;
}
