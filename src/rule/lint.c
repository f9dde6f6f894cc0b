/* lint.c — warnings for XRC-137 rule documents (xgr_rule_lint, issue 15): what the parser accepts
 * but a new author probably did not mean.
 *   unknown_key        a key the parser ignores (`waitsec`, `paylod`, `rulez`), with the nearest
 *                      known key; at the top level only keys that look like a typo of a known one
 *                      (documents may carry their own metadata there, as orchestrations do).
 *   template_operator  a string classified as a template (docs/SEMANTICS.md, "Template or
 *                      expression") in which `+` or `-` sits between placeholders or a placeholder
 *                      and a number without spaces: `[a]-[b]` renders the text "5-3", not 2.
 * Pure: reads the JSON tree, appends findings to a diagnostics list. */
#include <stdio.h>
#include <string.h>

#include "util/suggest.h"
#include "xgr/cel.h"
#include "xgr/rule.h"

typedef struct lint {
  xgr_diags *d;
  xgr_path path;
} lint;

#define N(a) (sizeof(a) / sizeof *(a))

static const char *const K_TOP[] = {"payload", "apiCalls", "contractReads", "rules", "onValid", "onInvalid"};
static const char *const K_FIELD[] = {"type", "default"};
static const char *const K_API[] = {"name", "method", "urlTemplate", "bodyTemplate", "headers", "contentType",
                                    "timeoutMs", "extractMap"};
static const char *const K_EXTRACT[] = {"type", "expr", "value", "default"};
static const char *const K_READ[] = {"to", "function", "args", "saveAs", "rpc"};
static const char *const K_SAVE[] = {"key", "type", "default"};
static const char *const K_TYPED[] = {"type", "value", "expr", "default"};
static const char *const K_RULE[] = {"type", "expression"};
static const char *const K_BRANCH[] = {"payload", "waitSec", "logExpireDays", "encryptLogs", "execution", "grants",
                                       "wakeUps"};
static const char *const K_WAKE[] = {"runner", "sessionId", "stepId", "payload"};
static const char *const K_GRANT[] = {"address", "rights", "expireDays"};
static const char *const K_EXEC[] = {"to", "gas", "function", "args", "value", "extras"};
static const char *const K_GAS[] = {"limit"};

static void keys(lint *l, const json_t *o, const char *const *known, size_t n, const char *what, bool typos_only) {
  if (!json_is_object(o)) return;
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)o, k, v) {
    if (xgr__key_known(k, known, n)) continue;
    const char *near = xgr__nearest_key(k, known, n);
    if (typos_only && !near) continue;
    size_t m = xgr_path_key(&l->path, k);
    char list[200];
    xgr__keys_join(list, sizeof list, known, n);
    if (near)
      xgr_diags_add(l->d, XGR_SEV_WARNING, "unknown_key", l->path.buf,
                    "unknown key `%.80s` in %s is ignored — did you mean `%s`? (known: %s)", k, what, near, list);
    else
      xgr_diags_add(l->d, XGR_SEV_WARNING, "unknown_key", l->path.buf, "unknown key `%.80s` in %s is ignored (known: %s)",
                    k, what, list);
    xgr_path_pop(&l->path, m);
  }
}

/* `+` / `-` glued to a placeholder in a string that is a template: the author likely meant
 * arithmetic. Returns the operator's offset or -1. */
static long glued_operator(const char *s, size_t n) {
  for (size_t i = 1; i + 1 < n; i++) {
    if (s[i] != '+' && s[i] != '-') continue;
    char a = s[i - 1], b = s[i + 1];
    bool left = a == ']' || (a >= '0' && a <= '9'), right = b == '[' || (b >= '0' && b <= '9');
    if ((a == ']' || b == '[') && left && right) return (long)i;
  }
  return -1;
}

static void value_strings(lint *l, const json_t *v) {
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (xgr_cel_classify(s, n) != XGR_CEL_KIND_TEMPLATE) return;
    long at = glued_operator(s, n);
    if (at < 0) return;
    xgr_diags_add(l->d, XGR_SEV_WARNING, "template_operator", l->path.buf,
                  "\"%.120s\" is a template, not arithmetic: `%c` without spaces between a placeholder and a value "
                  "is text, so it renders e.g. \"5%c3\" (docs/SEMANTICS.md, \"Template or expression\"); write "
                  "`%.*s %c %s` for the %s, or keep it as text on purpose",
                  s, s[at], s[at], (int)at, s, s[at], s + at + 1, s[at] == '-' ? "difference" : "sum");
    return;
  }
  if (json_is_object(v)) {
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)v, k, x) {
      size_t m = xgr_path_key(&l->path, k);
      value_strings(l, x);
      xgr_path_pop(&l->path, m);
    }
  }
}

static void each(lint *l, const json_t *arr, const char *key, void (*fn)(lint *, const json_t *)) {
  const json_t *a = json_object_get(arr, key);
  if (!json_is_array(a)) return;
  size_t m = xgr_path_key(&l->path, key), i;
  json_t *x;
  json_array_foreach(a, i, x) {
    size_t m2 = xgr_path_index(&l->path, i);
    fn(l, x);
    xgr_path_pop(&l->path, m2);
  }
  xgr_path_pop(&l->path, m);
}

static void member(lint *l, const json_t *o, const char *key, void (*fn)(lint *, const json_t *)) {
  const json_t *x = json_object_get(o, key);
  if (!x) return;
  size_t m = xgr_path_key(&l->path, key);
  fn(l, x);
  xgr_path_pop(&l->path, m);
}

static void map_values(lint *l, const json_t *o, const char *key, const char *const *known, size_t n, const char *what) {
  const json_t *x = json_object_get(o, key);
  if (!json_is_object(x)) return;
  size_t m = xgr_path_key(&l->path, key);
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)x, k, v) {
    size_t m2 = xgr_path_key(&l->path, k);
    keys(l, v, known, n, what, false);
    xgr_path_pop(&l->path, m2);
  }
  xgr_path_pop(&l->path, m);
}

static void typed(lint *l, const json_t *o) { keys(l, o, K_TYPED, N(K_TYPED), "a typed value", false); }
static void rule(lint *l, const json_t *o) { keys(l, o, K_RULE, N(K_RULE), "a rule", false); }
static void grant(lint *l, const json_t *o) { keys(l, o, K_GRANT, N(K_GRANT), "a grant", false); }
static void payload_strings(lint *l, const json_t *o) { value_strings(l, o); }
static void gas(lint *l, const json_t *o) { keys(l, o, K_GAS, N(K_GAS), "gas", false); }

static void api(lint *l, const json_t *o) {
  keys(l, o, K_API, N(K_API), "an API call", false);
  map_values(l, o, "extractMap", K_EXTRACT, N(K_EXTRACT), "an extractMap entry");
}

static void read_(lint *l, const json_t *o) {
  keys(l, o, K_READ, N(K_READ), "a contract read", false);
  each(l, o, "args", typed);
  map_values(l, o, "saveAs", K_SAVE, N(K_SAVE), "a saveAs entry");
}

static void wake(lint *l, const json_t *o) {
  keys(l, o, K_WAKE, N(K_WAKE), "a wake-up", false);
  member(l, o, "payload", payload_strings);
}

static void exec_(lint *l, const json_t *o) {
  keys(l, o, K_EXEC, N(K_EXEC), "execution", false);
  member(l, o, "gas", gas);
  each(l, o, "args", typed);
  member(l, o, "value", typed);
}

static void branch(lint *l, const json_t *o) {
  keys(l, o, K_BRANCH, N(K_BRANCH), "a branch", false);
  member(l, o, "payload", payload_strings);
  each(l, o, "wakeUps", wake);
  each(l, o, "grants", grant);
  member(l, o, "execution", exec_);
}

void xgr_rule_lint(const json_t *doc, xgr_diags *d) {
  if (!json_is_object(doc) || !d) return;
  lint l = {.d = d};
  xgr_path_init(&l.path);
  keys(&l, doc, K_TOP, N(K_TOP), "a rule document", true);
  map_values(&l, doc, "payload", K_FIELD, N(K_FIELD), "an input field");
  each(&l, doc, "apiCalls", api);
  each(&l, doc, "contractReads", read_);
  each(&l, doc, "rules", rule);
  member(&l, doc, "onValid", branch);
  member(&l, doc, "onInvalid", branch);
}
