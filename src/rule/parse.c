/* parse.c — XRC-137 rule documents into the immutable model of rule_impl.h.
 *
 * The document is read with the value model's JSON parser (exact integers, so uint256 defaults
 * survive; duplicate keys rejected; document order kept) and walked once, section by section.
 * The first load error stops parsing; it carries the JSON path of the field, and for caps the
 * cap's name, the value seen and the maximum. While walking, every expression is compiled in the
 * mode its place asks for (RULE, VALUE, EXTRACT), every template is split into segments, every
 * default is cast to its declared type. Unknown keys are ignored (forward compatibility).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rule/rule_impl.h"
#include "util/alloc.h"
#include "xgr/json.h"

typedef struct pc {
  xgr_rule *r;
  xgr_error *e;
  xgr_path path;
} pc;

static int perr(pc *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(pc *c, int code, const char *fmt, ...) {
  char msg[XGR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return xgr_error_set(c->e, code, c->path.buf, "%s", msg);
}

/* A missing field: the error's path is the field's own path. */
static int pmiss(pc *c, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int pmiss(pc *c, const char *key, const char *fmt, ...) {
  char msg[XGR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  xgr_path_key(&c->path, key);
  return xgr_error_set(c->e, XGR_ESCHEMA, c->path.buf, "%s", msg);
}

static const char *jtype(xgr_value v) {
  switch (v.kind) {
    case XGR_VNULL: return "null";
    case XGR_VBOOL: return "boolean";
    case XGR_VSTRING: return "string";
    case XGR_VLIST: return "array";
    case XGR_VMAP: return "object";
    case XGR_VINT: case XGR_VUINT: case XGR_VDOUBLE: case XGR_VBIGINT: return "number";
    default: return xgr_value_kind_name(v);
  }
}

static void preview(xgr_value v, char *b, size_t n) {
  size_t len = 0;
  char *t = xgr_value_to_json_text(v, 0, &len);
  if (!t) { snprintf(b, n, "?"); return; }
  if (len > 48) snprintf(b, n, "%.45s...", t);
  else snprintf(b, n, "%s", t);
  free(t);
}

static int want(pc *c, xgr_value v, xgr_vkind k) {
  if (v.kind == k) return 0;
  const char *exp = k == XGR_VMAP ? "object" : k == XGR_VLIST ? "array" : k == XGR_VSTRING ? "string"
                  : k == XGR_VBOOL ? "boolean" : "value";
  char p[64];
  preview(v, p, sizeof p);
  return perr(c, XGR_ESCHEMA, "expected %s, got %s %s", exp, jtype(v), p);
}

static char *adup(pc *c, const char *s, size_t n) {
  char *d = xgr_arena_alloc(&c->r->arena, n + 1);
  if (!d) abort();
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

static const char *path_dup(pc *c) { return adup(c, c->path.buf, c->path.len); }

static void *aalloc(pc *c, size_t n) {
  void *p = xgr_arena_alloc(&c->r->arena, n ? n : 1);
  if (!p) abort();
  return p;
}

/* Keep a reference for xgr_rule_free and return v. */
static xgr_value keep(pc *c, xgr_value v) {
  xgr_rule *r = c->r;
  if (v.kind < XGR_VSTRING || v.kind == XGR_VTYPE) return v;
  if (r->nvals == r->capvals) {
    r->capvals = r->capvals ? r->capvals * 2 : 32;
    r->vals = xgr__xrealloc(r->vals, r->capvals * sizeof *r->vals);
  }
  r->vals[r->nvals++] = v;
  return v;
}

static void keep_prog(pc *c, xgr_cel_program *p) {
  xgr_rule *r = c->r;
  if (r->nprogs == r->capprogs) {
    r->capprogs = r->capprogs ? r->capprogs * 2 : 16;
    r->progs = xgr__xrealloc(r->progs, r->capprogs * sizeof *r->progs);
  }
  r->progs[r->nprogs++] = p;
}

static bool get(xgr_value obj, const char *k, xgr_value *out) {
  return xgr_map_get_str(obj, k, strlen(k), out);
}

/* Field names: ASCII identifiers [A-Za-z0-9_-], 1..MaxFieldNameLen characters. */
static int check_name(pc *c, const char *s, size_t n, const char *what) {
  if (n == 0) return perr(c, XGR_EIDENT, "%s is empty; expected an ASCII identifier [A-Za-z0-9_-]", what);
  if (n > XGR_MAX_FIELD_NAME_LEN)
    return perr(c, XGR_ELIMIT, "MaxFieldNameLen exceeded: %s \"%.32s...\" is %zu characters, maximum %d", what, s,
                n, XGR_MAX_FIELD_NAME_LEN);
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch > 127 || !(isalnum(ch) || ch == '_' || ch == '-'))
      return perr(c, XGR_EIDENT, "%s \"%.64s\" has character '%c' at %zu; expected an ASCII identifier [A-Za-z0-9_-]",
                  what, s, isprint(ch) ? ch : '?', i);
  }
  return 0;
}

static int check_count(pc *c, size_t n, size_t max, const char *cap, const char *what) {
  if (n > max) return perr(c, XGR_ELIMIT, "%s exceeded: %s has %zu entries, maximum %zu", cap, what, n, max);
  return 0;
}

static int check_len(pc *c, size_t n, size_t max, const char *cap, const char *what) {
  if (n > max) return perr(c, XGR_ELIMIT, "%s exceeded: %s is %zu characters, maximum %zu", cap, what, n, max);
  return 0;
}

/* Deep check of MaxStringValueLen over a literal (strings inside arrays and objects too). */
static int check_literal_strings(pc *c, xgr_value v) {
  size_t n;
  if (v.kind == XGR_VSTRING) {
    xgr_value_str(v, &n);
    return check_len(c, n, XGR_MAX_STRING_VALUE_LEN, "MaxStringValueLen", "string value");
  }
  if (v.kind == XGR_VLIST)
    for (size_t i = 0; i < xgr_list_size(v); i++)
      if (check_literal_strings(c, xgr_list_get(v, i))) return c->e->code;
  if (v.kind == XGR_VMAP)
    for (size_t i = 0; i < xgr_map_size(v); i++) {
      xgr_value k, x;
      xgr_map_entry(v, i, &k, &x);
      if (check_literal_strings(c, x)) return c->e->code;
    }
  return 0;
}

static unsigned prog_flags(const xgr_cel_program *p) {
  unsigned f = 0;
  for (size_t i = 0; i < xgr_cel_program_nvars(p); i++) {
    const char *n = xgr_cel_program_var(p, i);
    size_t len = strlen(n);
    if (xgr__rule_is_ctx_var(n, len)) f |= RX_CTX;
    else if (n[0] == '_') f |= RX_HIDDEN;
  }
  return f;
}

static unsigned tpl_flags(const rtemplate *t) {
  unsigned f = t->hidden ? RX_HIDDEN : 0;
  for (size_t i = 0; i < t->nseg; i++)
    if (t->seg[i].is_var && xgr__rule_is_ctx_var(t->seg[i].text, t->seg[i].len)) f |= RX_CTX;
  return f;
}

static int compile(pc *c, const char *src, size_t len, xgr_cel_mode mode, rvalue *out) {
  xgr_cel_options o = xgr_cel_options_default(mode);
  xgr_cel_program *p = NULL;
  xgr_error ce;
  xgr_error_clear(&ce);
  int rc = xgr_cel_compile(src, len, &o, &p, &ce);
  if (rc != 0 || !p) return perr(c, rc ? rc : XGR_EEVAL, "%s", ce.message[0] ? ce.message : "expression does not compile");
  keep_prog(c, p);
  out->kind = RV_PROGRAM;
  out->prog = p;
  out->flags = prog_flags(p);
  out->path = path_dup(c);
  return 0;
}

/* "0x" followed by at least one hex digit and nothing else. */
static bool is_hex_literal(const char *s, size_t n) {
  if (n < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  for (size_t i = 2; i < n; i++)
    if (!isxdigit((unsigned char)s[i])) return false;
  return true;
}

/* A resolvable value: non-string literal, template, or expression (EvalOrRender). String lengths
 * are capped by MaxStringValueLen. */
static int parse_rvalue(pc *c, xgr_value v, rvalue *out) {
  memset(out, 0, sizeof *out);
  if (v.kind != XGR_VSTRING) {
    if (check_literal_strings(c, v)) return c->e->code;
    out->kind = RV_LITERAL;
    out->literal = keep(c, xgr_value_retain(v));
    out->path = path_dup(c);
    return 0;
  }
  size_t n;
  const char *s = xgr_value_str(v, &n);
  if (check_len(c, n, XGR_MAX_STRING_VALUE_LEN, "MaxStringValueLen", "string value")) return c->e->code;
  if (is_hex_literal(s, n)) {  /* "0x" + hex digits (addresses, bytes, hex uint256): text, not a CEL int */
    out->kind = RV_LITERAL;
    out->literal = keep(c, xgr_value_retain(v));
    out->path = path_dup(c);
    return 0;
  }
  if (xgr_cel_classify(s, n) == XGR_CEL_KIND_TEMPLATE) {
    out->kind = RV_TEMPLATE;
    xgr__rule_template_parse(&c->r->arena, adup(c, s, n), n, &out->tpl);
    out->flags = tpl_flags(&out->tpl);
    out->path = path_dup(c);
    return 0;
  }
  if (compile(c, s, n, XGR_CEL_MODE_VALUE, out) == 0) return 0;
  /* The template-or-expression trap: text with placeholders that holds an operator character is
   * an expression, and prose does not compile. Say why it was read as one and how to write it. */
  char tok = 0;
  bool quoted = false;
  for (size_t i = 0, depth = 0; i < n && !tok; i++) {
    char ch = s[i];
    if (ch == '\'' || ch == '"') quoted = !quoted;
    else if (!quoted && ch == '[') depth++;
    else if (!quoted && ch == ']' && depth) depth--;
    else if (!quoted && !depth && strchr("*/%()<>!=|&", ch)) tok = ch;
  }
  if (memchr(s, '[', n) && memchr(s, ' ', n)) {
    char hint[sizeof c->e->message + 512];
    snprintf(hint, sizeof hint,
             "%.200s — this string is read as an expression, not a template, because %s%c%s appears outside "
             "placeholders and quotes (docs/SEMANTICS.md, \"Template or expression\"); for text, leave out that "
             "character, or write the whole value as an expression, e.g. '\"Hello \" + [Name]'",
             c->e->message, tok ? "`" : "an operator", tok ? tok : ' ', tok ? "`" : "");
    size_t hl = strnlen(hint, sizeof c->e->message - 1);   /* cut at the message size */
    memcpy(c->e->message, hint, hl);
    c->e->message[hl] = '\0';
  }
  return c->e->code;
}

static int parse_type(pc *c, xgr_value obj, xgr_xrc_type *t) {
  xgr_value tv;
  if (!get(obj, "type", &tv)) return pmiss(c, "type", "missing `type`; expected one of %s", xgr_xrc_type_list());
  size_t m = xgr_path_key(&c->path, "type");
  if (want(c, tv, XGR_VSTRING)) return c->e->code;
  const char *name = xgr_value_str(tv, NULL);
  if (xgr_xrc_type_parse(name, t))
    return perr(c, XGR_ESCHEMA, "unknown XRC type \"%.40s\"; expected one of %s", name, xgr_xrc_type_list());
  xgr_path_pop(&c->path, m);
  return 0;
}

/* `default` of a field: cast to t at load. */
static int parse_default(pc *c, xgr_value obj, xgr_xrc_type t, bool *has, xgr_value *out) {
  xgr_value d;
  *has = false;
  *out = xgr_value_null();
  if (!get(obj, "default", &d)) return 0;
  size_t m = xgr_path_key(&c->path, "default");
  if (check_literal_strings(c, d)) return c->e->code;
  xgr_error ce;
  if (xgr_xrc_cast(t, d, out, &ce)) return perr(c, XGR_ESCHEMA, "default: %s", ce.message);
  keep(c, *out);
  *has = true;
  xgr_path_pop(&c->path, m);
  return 0;
}

/* Non-negative integer field below max. */
static int get_uint(pc *c, xgr_value v, uint64_t max, uint64_t *out) {
  if (v.kind == XGR_VINT && v.as.i >= 0 && (uint64_t)v.as.i <= max) *out = (uint64_t)v.as.i;
  else if (v.kind == XGR_VUINT && v.as.u <= max) *out = v.as.u;
  else {
    char p[64];
    preview(v, p, sizeof p);
    return perr(c, XGR_ESCHEMA, "expected an integer in 0..%llu, got %s %s", (unsigned long long)max, jtype(v), p);
  }
  return 0;
}

static int opt_uint(pc *c, xgr_value obj, const char *key, uint64_t max, bool *has, uint64_t *out) {
  xgr_value v;
  *has = false;
  if (!get(obj, key, &v)) return 0;
  size_t m = xgr_path_key(&c->path, key);
  if (get_uint(c, v, max, out)) return c->e->code;
  xgr_path_pop(&c->path, m);
  *has = true;
  return 0;
}

/* Solidity-style signature: name(type,...) optionally followed by (returns). Light syntax check. */
static int check_signature(pc *c, const char *s) {
  size_t i = 0;
  if (!(isalpha((unsigned char)s[0]) || s[0] == '_')) goto bad;
  while (isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '$') i++;
  if (s[i] != '(') goto bad;
  int depth = 0;
  for (; s[i]; i++) {
    if (s[i] == '(') depth++;
    else if (s[i] == ')') { if (--depth < 0) goto bad; }
    else if (!(isalnum((unsigned char)s[i]) || s[i] == ',' || s[i] == '[' || s[i] == ']' || s[i] == ' ' || s[i] == '_')) goto bad;
  }
  if (depth != 0 || s[i - 1] != ')') goto bad;
  return 0;
bad:
  return perr(c, XGR_ESCHEMA, "`function` \"%.80s\" is not a Solidity signature such as \"balanceOf(address)\"", s);
}

static int get_string(pc *c, xgr_value obj, const char *key, bool required, const char **out, size_t *len) {
  xgr_value v;
  *out = NULL;
  if (!get(obj, key, &v)) {
    if (required) return pmiss(c, key, "missing `%s`", key);
    return 0;
  }
  size_t m = xgr_path_key(&c->path, key);
  if (want(c, v, XGR_VSTRING)) return c->e->code;
  size_t n;
  const char *s = xgr_value_str(v, &n);
  if (check_len(c, n, XGR_MAX_STRING_VALUE_LEN, "MaxStringValueLen", "string value")) return c->e->code;
  xgr_path_pop(&c->path, m);
  *out = adup(c, s, n);
  if (len) *len = n;
  return 0;
}

/* A TypedValue (spec §6.3): {type, value|expr, default?}. */
static int parse_typed(pc *c, xgr_value obj, rtyped *t) {
  memset(t, 0, sizeof *t);
  if (want(c, obj, XGR_VMAP)) return c->e->code;
  if (parse_type(c, obj, &t->type)) return c->e->code;
  xgr_value v, x;
  bool hv = get(obj, "value", &v), hx = get(obj, "expr", &x);
  if (hv && hx) return perr(c, XGR_ESCHEMA, "both `value` and `expr` are set; write exactly one");
  if (!hv && !hx) return pmiss(c, "value", "missing `value` (or `expr`)");
  size_t m = xgr_path_key(&c->path, hv ? "value" : "expr");
  if (hx && want(c, x, XGR_VSTRING)) return c->e->code;
  if (parse_rvalue(c, hv ? v : x, &t->v)) return c->e->code;
  xgr_path_pop(&c->path, m);
  if (t->v.kind == RV_LITERAL) {  /* a literal must cast now: a wrong one is an authoring error */
    xgr_value cv;
    xgr_error ce;
    m = xgr_path_key(&c->path, "value");
    if (xgr_xrc_cast(t->type, t->v.literal, &cv, &ce)) return perr(c, XGR_ESCHEMA, "%s", ce.message);
    t->v.literal = keep(c, cv);
    xgr_path_pop(&c->path, m);
  }
  return parse_default(c, obj, t->type, &t->has_default, &t->def);
}

/* ---- sections -------------------------------------------------------------------------------- */

static int parse_inputs(pc *c, xgr_value doc) {
  xgr_value p;
  if (!get(doc, "payload", &p))
    return pmiss(c, "payload", "missing `payload` (the input schema; write {} when the step has no inputs)");
  size_t m = xgr_path_key(&c->path, "payload");
  if (want(c, p, XGR_VMAP)) return c->e->code;
  size_t n = xgr_map_size(p);
  if (check_count(c, n, XGR_MAX_PAYLOAD_FIELDS, "MaxPayloadFields", "payload")) return c->e->code;
  c->r->inputs = aalloc(c, n * sizeof *c->r->inputs);
  for (size_t i = 0; i < n; i++) {
    xgr_value k, f;
    xgr_map_entry(p, i, &k, &f);
    size_t kl;
    const char *ks = xgr_value_str(k, &kl);
    size_t m2 = xgr_path_key(&c->path, ks);
    if (check_name(c, ks, kl, "payload field name")) return c->e->code;
    if (want(c, f, XGR_VMAP)) return c->e->code;
    rinput *in = &c->r->inputs[i];
    in->name = adup(c, ks, kl);
    in->len = kl;
    in->key = keep(c, xgr_value_retain(k));
    if (parse_type(c, f, &in->type)) return c->e->code;
    if (parse_default(c, f, in->type, &in->has_default, &in->def)) return c->e->code;
    xgr_path_pop(&c->path, m2);
  }
  c->r->ninputs = n;
  xgr_path_pop(&c->path, m);
  return 0;
}

static int parse_template_field(pc *c, xgr_value obj, const char *key, size_t max, const char *cap,
                                bool required, bool *has, rtemplate *t) {
  xgr_value v;
  *has = false;
  if (!get(obj, key, &v)) return required ? pmiss(c, key, "missing `%s`", key) : 0;
  size_t m = xgr_path_key(&c->path, key);
  if (want(c, v, XGR_VSTRING)) return c->e->code;
  size_t n;
  const char *s = xgr_value_str(v, &n);
  if (check_len(c, n, max, cap, key)) return c->e->code;
  xgr__rule_template_parse(&c->r->arena, adup(c, s, n), n, t);
  xgr_path_pop(&c->path, m);
  *has = true;
  return 0;
}

static int parse_extract(pc *c, xgr_value em, rapi *a) {
  if (want(c, em, XGR_VMAP)) return c->e->code;
  size_t n = xgr_map_size(em);
  if (check_count(c, n, XGR_MAX_EXTRACT_MAP_ENTRIES, "MaxExtractMapEntries", "extractMap")) return c->e->code;
  a->extract = aalloc(c, n * sizeof *a->extract);
  a->nextract = n;
  c->r->nextract_total += n;
  for (size_t i = 0; i < n; i++) {
    xgr_value k, f;
    xgr_map_entry(em, i, &k, &f);
    size_t kl;
    const char *ks = xgr_value_str(k, &kl);
    size_t m = xgr_path_key(&c->path, ks);
    if (check_name(c, ks, kl, "extractMap key")) return c->e->code;
    if (want(c, f, XGR_VMAP)) return c->e->code;
    rextract *x = &a->extract[i];
    x->key = keep(c, xgr_value_retain(k));
    x->name = adup(c, ks, kl);
    if (parse_type(c, f, &x->type)) return c->e->code;
    xgr_value ev, vv;
    bool he = get(f, "expr", &ev), hv = get(f, "value", &vv);
    if (he && hv) return perr(c, XGR_ESCHEMA, "both `expr` and `value` are set; write exactly one");
    if (!he && !hv) return pmiss(c, "expr", "missing `expr` (or `value`): the CEL expression over `resp`");
    size_t m2 = xgr_path_key(&c->path, he ? "expr" : "value");
    xgr_value src = he ? ev : vv;
    if (want(c, src, XGR_VSTRING)) return c->e->code;
    size_t sl;
    const char *ss = xgr_value_str(src, &sl);
    if (check_len(c, sl, XGR_MAX_RULE_EXPR_LEN, "MaxExprLen", "expression")) return c->e->code;
    if (compile(c, ss, sl, XGR_CEL_MODE_EXTRACT, &x->expr)) return c->e->code;
    xgr_path_pop(&c->path, m2);
    if (parse_default(c, f, x->type, &x->has_default, &x->def)) return c->e->code;
    xgr_path_pop(&c->path, m);
  }
  return 0;
}

static int parse_api(pc *c, xgr_value doc) {
  xgr_value arr;
  if (!get(doc, "apiCalls", &arr)) return 0;
  size_t m = xgr_path_key(&c->path, "apiCalls");
  if (want(c, arr, XGR_VLIST)) return c->e->code;
  size_t n = xgr_list_size(arr);
  if (check_count(c, n, XGR_MAX_API_CALLS, "MaxAPICalls", "apiCalls")) return c->e->code;
  c->r->api = aalloc(c, n * sizeof *c->r->api);
  c->r->napi = n;
  for (size_t i = 0; i < n; i++) {
    xgr_value o = xgr_list_get(arr, i);
    size_t m2 = xgr_path_index(&c->path, i);
    rapi *a = &c->r->api[i];
    a->path = path_dup(c);
    if (want(c, o, XGR_VMAP)) return c->e->code;
    size_t nl;
    if (get_string(c, o, "name", true, &a->name, &nl)) return c->e->code;
    for (size_t j = 0; j < i; j++)
      if (!strcmp(c->r->api[j].name, a->name)) {
        xgr_path_key(&c->path, "name");
        return perr(c, XGR_EDUP, "apiCalls name \"%.64s\" is used twice (also apiCalls[%zu]); names must be unique", a->name, j);
      }
    if (get_string(c, o, "method", true, &a->method, NULL)) return c->e->code;
    {
      char *meth = (char *)a->method;
      size_t ml = strlen(meth);
      bool ok = ml > 0 && ml <= 16;
      for (size_t k = 0; k < ml; k++) {
        meth[k] = (char)toupper((unsigned char)meth[k]);
        ok = ok && isalpha((unsigned char)meth[k]);
      }
      if (!ok) {
        xgr_path_key(&c->path, "method");
        return perr(c, XGR_ESCHEMA, "`method` \"%.20s\" is not an HTTP method such as GET or POST", a->method);
      }
    }
    bool has;
    if (parse_template_field(c, o, "urlTemplate", XGR_MAX_URL_TEMPLATE_LEN, "MaxURLTemplateLen", true, &has, &a->url))
      return c->e->code;
    if (parse_template_field(c, o, "bodyTemplate", XGR_MAX_BODY_TEMPLATE_LEN, "MaxBodyTemplateLen", false,
                             &a->has_body, &a->body))
      return c->e->code;
    const char *ct;
    if (get_string(c, o, "contentType", false, &ct, NULL)) return c->e->code;
    if (ct && strcmp(ct, "json")) {
      xgr_path_key(&c->path, "contentType");
      return perr(c, XGR_ESCHEMA, "`contentType` \"%.40s\" is not supported; expected \"json\"", ct);
    }
    a->json_body = ct != NULL;
    xgr_value hv;
    if (get(o, "headers", &hv)) {
      size_t m3 = xgr_path_key(&c->path, "headers");
      if (want(c, hv, XGR_VMAP)) return c->e->code;
      a->nheaders = xgr_map_size(hv);
      if (check_count(c, a->nheaders, 64, "headers cap", "headers")) return c->e->code;
      a->headers = aalloc(c, a->nheaders * sizeof *a->headers);
      for (size_t j = 0; j < a->nheaders; j++) {
        xgr_value k, v;
        xgr_map_entry(hv, j, &k, &v);
        size_t kl;
        const char *ks = xgr_value_str(k, &kl);
        size_t m4 = xgr_path_key(&c->path, ks);
        bool tok = kl > 0 && kl <= 128;
        for (size_t q = 0; q < kl && tok; q++)
          tok = isalnum((unsigned char)ks[q]) || strchr("!#$%&'*+-.^_`|~", ks[q]);
        if (!tok) return perr(c, XGR_ESCHEMA, "header name \"%.64s\" is not an HTTP token", ks);
        if (want(c, v, XGR_VSTRING)) return c->e->code;
        size_t vl;
        const char *vs = xgr_value_str(v, &vl);
        if (check_len(c, vl, XGR_MAX_STRING_VALUE_LEN, "MaxStringValueLen", "header value")) return c->e->code;
        for (size_t q = 0; q < vl; q++)
          if (vs[q] == '\r' || vs[q] == '\n') return perr(c, XGR_ESCHEMA, "header value contains a line break");
        a->headers[j].name = adup(c, ks, kl);
        xgr__rule_template_parse(&c->r->arena, adup(c, vs, vl), vl, &a->headers[j].value);
        xgr_path_pop(&c->path, m4);
      }
      xgr_path_pop(&c->path, m3);
    }
    uint64_t to = XGR_HTTP_DEFAULT_TIMEOUT_MS;
    if (opt_uint(c, o, "timeoutMs", 600000, &has, &to)) return c->e->code;
    if (has && to == 0) {
      xgr_path_key(&c->path, "timeoutMs");
      return perr(c, XGR_ESCHEMA, "`timeoutMs` is 0; expected 1..600000 milliseconds");
    }
    a->timeout_ms = (long)to;
    xgr_value em;
    if (!get(o, "extractMap", &em)) return pmiss(c, "extractMap", "missing `extractMap`");
    size_t m3 = xgr_path_key(&c->path, "extractMap");
    if (parse_extract(c, em, a)) return c->e->code;
    xgr_path_pop(&c->path, m3);
    xgr_path_pop(&c->path, m2);
  }
  xgr_path_pop(&c->path, m);
  return 0;
}

static int parse_reads(pc *c, xgr_value doc) {
  xgr_value arr;
  if (!get(doc, "contractReads", &arr)) return 0;
  size_t m = xgr_path_key(&c->path, "contractReads");
  if (want(c, arr, XGR_VLIST)) return c->e->code;
  size_t n = xgr_list_size(arr);
  if (check_count(c, n, XGR_MAX_CONTRACT_READS, "MaxContractReads", "contractReads")) return c->e->code;
  c->r->reads = aalloc(c, n * sizeof *c->r->reads);
  c->r->nreads = n;
  for (size_t i = 0; i < n; i++) {
    xgr_value o = xgr_list_get(arr, i);
    size_t m2 = xgr_path_index(&c->path, i);
    rread *rd = &c->r->reads[i];
    rd->path = path_dup(c);
    if (want(c, o, XGR_VMAP)) return c->e->code;
    xgr_value tv;
    if (!get(o, "to", &tv)) return pmiss(c, "to", "missing `to` (the contract address)");
    size_t m3 = xgr_path_key(&c->path, "to");
    if (want(c, tv, XGR_VSTRING)) return c->e->code;
    if (parse_rvalue(c, tv, &rd->to)) return c->e->code;
    xgr_path_pop(&c->path, m3);
    if (get_string(c, o, "function", true, &rd->function, NULL)) return c->e->code;
    m3 = xgr_path_key(&c->path, "function");
    if (check_signature(c, rd->function)) return c->e->code;
    xgr_path_pop(&c->path, m3);
    if (get_string(c, o, "rpc", false, &rd->rpc, NULL)) return c->e->code;
    xgr_value av;
    if (get(o, "args", &av)) {
      m3 = xgr_path_key(&c->path, "args");
      if (want(c, av, XGR_VLIST)) return c->e->code;
      rd->nargs = xgr_list_size(av);
      if (check_count(c, rd->nargs, XGR_MAX_EXEC_ARGS, "MaxExecArgs", "args")) return c->e->code;
      rd->args = aalloc(c, rd->nargs * sizeof *rd->args);
      rd->arg_types = aalloc(c, rd->nargs * sizeof *rd->arg_types);
      for (size_t j = 0; j < rd->nargs; j++) {
        size_t m4 = xgr_path_index(&c->path, j);
        if (parse_typed(c, xgr_list_get(av, j), &rd->args[j])) return c->e->code;
        rd->arg_types[j] = rd->args[j].type;
        xgr_path_pop(&c->path, m4);
      }
      xgr_path_pop(&c->path, m3);
    }
    xgr_value sv;
    if (get(o, "saveAs", &sv)) {
      m3 = xgr_path_key(&c->path, "saveAs");
      if (want(c, sv, XGR_VMAP)) return c->e->code;
      rd->nsave = xgr_map_size(sv);
      if (check_count(c, rd->nsave, XGR_MAX_CONTRACT_READ_SAVE_AS, "MaxContractReadSaveAs", "saveAs")) return c->e->code;
      rd->save = aalloc(c, rd->nsave * sizeof *rd->save);
      c->r->nextract_total += rd->nsave;
      for (size_t j = 0; j < rd->nsave; j++) {
        xgr_value k, f;
        xgr_map_entry(sv, j, &k, &f);
        size_t kl;
        const char *ks = xgr_value_str(k, &kl);
        size_t m4 = xgr_path_key(&c->path, ks);
        char *end = NULL;
        unsigned long idx = strtoul(ks, &end, 10);
        if (kl == 0 || kl > 3 || !isdigit((unsigned char)ks[0]) || *end || (kl > 1 && ks[0] == '0'))
          return perr(c, XGR_ESCHEMA, "saveAs key \"%.40s\" is not a return index (\"0\", \"1\", ...)", ks);
        if (want(c, f, XGR_VMAP)) return c->e->code;
        rsave *s = &rd->save[j];
        s->index = (uint32_t)idx;
        const char *key;
        size_t keyl;
        if (get_string(c, f, "key", true, &key, &keyl)) return c->e->code;
        size_t m5 = xgr_path_key(&c->path, "key");
        if (check_name(c, key, keyl, "saveAs key")) return c->e->code;
        xgr_path_pop(&c->path, m5);
        s->name = key;
        s->key = keep(c, xgr_value_string(key, keyl));
        if (parse_type(c, f, &s->type)) return c->e->code;
        if (parse_default(c, f, s->type, &s->has_default, &s->def)) return c->e->code;
        xgr_path_pop(&c->path, m4);
      }
      xgr_path_pop(&c->path, m3);
    }
    xgr_path_pop(&c->path, m2);
  }
  xgr_path_pop(&c->path, m);
  return 0;
}

static int parse_rules(pc *c, xgr_value doc) {
  xgr_value arr;
  if (!get(doc, "rules", &arr)) return 0;  /* absent = empty (the public IterationOfPi omits it) */
  size_t m = xgr_path_key(&c->path, "rules");
  if (want(c, arr, XGR_VLIST)) return c->e->code;
  size_t n = xgr_list_size(arr);
  if (check_count(c, n, XGR_MAX_RULES, "MaxRules", "rules")) return c->e->code;
  c->r->rules = aalloc(c, n * sizeof *c->r->rules);
  c->r->nrules = n;
  for (size_t i = 0; i < n; i++) {
    xgr_value o = xgr_list_get(arr, i), src = o;
    size_t m2 = xgr_path_index(&c->path, i);
    rrule *rr = &c->r->rules[i];
    rr->type = RR_VALIDATE;
    size_t m3 = c->path.len;
    if (o.kind == XGR_VMAP) {
      const char *t;
      if (get_string(c, o, "type", false, &t, NULL)) return c->e->code;
      if (t && !strcmp(t, "abortStep")) rr->type = RR_ABORT_STEP;
      else if (t && !strcmp(t, "cancelSession")) rr->type = RR_CANCEL_SESSION;
      else if (t && strcmp(t, "validate")) {
        xgr_path_key(&c->path, "type");
        return perr(c, XGR_ESCHEMA, "rule type \"%.40s\" is unknown; expected validate, abortStep or cancelSession", t);
      }
      if (!get(o, "expression", &src)) return pmiss(c, "expression", "missing `expression`");
      m3 = xgr_path_key(&c->path, "expression");
    }
    if (src.kind != XGR_VSTRING) {
      char p[64];
      preview(src, p, sizeof p);
      return perr(c, XGR_ESCHEMA, "expected a rule expression string (or {\"type\", \"expression\"}), got %s %s",
                  jtype(src), p);
    }
    size_t sl;
    const char *ss = xgr_value_str(src, &sl);
    if (check_len(c, sl, XGR_MAX_RULE_EXPR_LEN, "MaxExprLen", "rule expression")) return c->e->code;
    if (compile(c, ss, sl, XGR_CEL_MODE_RULE, &rr->expr)) return c->e->code;
    xgr_path_pop(&c->path, m3);
    xgr_path_pop(&c->path, m2);
  }
  xgr_path_pop(&c->path, m);
  return 0;
}

/* An object of output keys -> resolvable values (branch payload, wake-up payload). */
static int parse_outs(pc *c, xgr_value obj, size_t max, const char *cap, rout **out, size_t *nout) {
  if (want(c, obj, XGR_VMAP)) return c->e->code;
  size_t n = xgr_map_size(obj);
  if (check_count(c, n, max, cap, "payload")) return c->e->code;
  *out = aalloc(c, n * sizeof **out);
  *nout = n;
  for (size_t i = 0; i < n; i++) {
    xgr_value k, v;
    xgr_map_entry(obj, i, &k, &v);
    size_t kl;
    const char *ks = xgr_value_str(k, &kl);
    size_t m = xgr_path_key(&c->path, ks);
    if (check_name(c, ks, kl, "output key")) return c->e->code;
    (*out)[i].key = keep(c, xgr_value_retain(k));
    (*out)[i].name = adup(c, ks, kl);
    if (parse_rvalue(c, v, &(*out)[i].v)) return c->e->code;
    xgr_path_pop(&c->path, m);
  }
  return 0;
}

static int parse_exec(pc *c, xgr_value o, rexec *x) {
  x->path = path_dup(c);
  if (want(c, o, XGR_VMAP)) return c->e->code;
  xgr_value tv;
  if (!get(o, "to", &tv)) return pmiss(c, "to", "missing `to` (the target address)");
  size_t m = xgr_path_key(&c->path, "to");
  if (want(c, tv, XGR_VSTRING)) return c->e->code;
  if (parse_rvalue(c, tv, &x->to)) return c->e->code;
  xgr_path_pop(&c->path, m);
  xgr_value gv;
  if (get(o, "gas", &gv)) {
    m = xgr_path_key(&c->path, "gas");
    if (want(c, gv, XGR_VMAP)) return c->e->code;
    if (opt_uint(c, gv, "limit", UINT64_MAX, &x->has_gas, &x->gas_limit)) return c->e->code;
    xgr_path_pop(&c->path, m);
  }
  if (get_string(c, o, "function", false, &x->function, NULL)) return c->e->code;
  if (x->function) {
    m = xgr_path_key(&c->path, "function");
    if (check_signature(c, x->function)) return c->e->code;
    xgr_path_pop(&c->path, m);
  }
  xgr_value av;
  if (get(o, "args", &av)) {
    m = xgr_path_key(&c->path, "args");
    if (want(c, av, XGR_VLIST)) return c->e->code;
    x->nargs = xgr_list_size(av);
    if (check_count(c, x->nargs, XGR_MAX_EXEC_ARGS, "MaxExecArgs", "execution.args")) return c->e->code;
    x->args = aalloc(c, x->nargs * sizeof *x->args);
    for (size_t j = 0; j < x->nargs; j++) {
      size_t m2 = xgr_path_index(&c->path, j);
      if (parse_typed(c, xgr_list_get(av, j), &x->args[j])) return c->e->code;
      xgr_path_pop(&c->path, m2);
    }
    xgr_path_pop(&c->path, m);
  }
  xgr_value vv;
  if (get(o, "value", &vv)) {
    m = xgr_path_key(&c->path, "value");
    if (parse_typed(c, vv, &x->value)) return c->e->code;
    x->has_value = true;
    xgr_path_pop(&c->path, m);
  }
  x->extras = xgr_value_null();
  xgr_value ev;
  if (get(o, "extras", &ev)) {
    m = xgr_path_key(&c->path, "extras");
    if (want(c, ev, XGR_VMAP)) return c->e->code;
    if (check_literal_strings(c, ev)) return c->e->code;
    x->extras = keep(c, xgr_value_retain(ev));
    xgr_path_pop(&c->path, m);
  }
  return 0;
}

static int parse_wake(pc *c, xgr_value o, rwake *w) {
  w->path = path_dup(c);
  if (want(c, o, XGR_VMAP)) return c->e->code;
  static const char *const req[] = {"runner", "sessionId", "stepId"};
  rvalue *dst[] = {&w->runner, &w->session, &w->step};
  for (int i = 0; i < 3; i++) {
    xgr_value v;
    if (!get(o, req[i], &v)) return pmiss(c, req[i], "missing `%s`", req[i]);
    size_t m = xgr_path_key(&c->path, req[i]);
    if (v.kind != XGR_VSTRING && !(i == 1 && (v.kind == XGR_VINT || v.kind == XGR_VUINT))) {
      char p[64];
      preview(v, p, sizeof p);
      return perr(c, XGR_ESCHEMA, "expected %s, got %s %s", i == 1 ? "an integer or a string" : "string", jtype(v), p);
    }
    if (parse_rvalue(c, v, dst[i])) return c->e->code;
    xgr_path_pop(&c->path, m);
  }
  xgr_value pv;
  if (get(o, "payload", &pv)) {
    size_t m = xgr_path_key(&c->path, "payload");
    if (parse_outs(c, pv, XGR_MAX_OUTCOME_KEYS, "MaxOutcomeKeys", &w->pay, &w->npay)) return c->e->code;
    xgr_path_pop(&c->path, m);
  }
  return 0;
}

static int parse_branch(pc *c, xgr_value doc, const char *name, rbranch *b) {
  b->encrypt_logs = -1;
  xgr_value o;
  size_t m = xgr_path_key(&c->path, name);
  b->path = path_dup(c);
  if (!get(doc, name, &o)) {
    xgr_path_pop(&c->path, m);
    return 0;
  }
  if (want(c, o, XGR_VMAP)) return c->e->code;
  xgr_value v;
  if (get(o, "payload", &v)) {
    size_t m2 = xgr_path_key(&c->path, "payload");
    if (parse_outs(c, v, XGR_MAX_OUTCOME_KEYS, "MaxOutcomeKeys", &b->out, &b->nout)) return c->e->code;
    xgr_path_pop(&c->path, m2);
  }
  if (opt_uint(c, o, "waitSec", UINT32_MAX, &b->has_wait, &b->wait_sec)) return c->e->code;
  uint64_t led;
  if (opt_uint(c, o, "logExpireDays", 36500, &b->has_log_expire, &led)) return c->e->code;
  b->log_expire_days = (uint32_t)led;
  if (get(o, "encryptLogs", &v)) {
    size_t m2 = xgr_path_key(&c->path, "encryptLogs");
    if (want(c, v, XGR_VBOOL)) return c->e->code;
    b->encrypt_logs = v.as.b ? 1 : 0;
    xgr_path_pop(&c->path, m2);
  }
  if (get(o, "execution", &v)) {
    size_t m2 = xgr_path_key(&c->path, "execution");
    b->exec = aalloc(c, sizeof *b->exec);
    if (parse_exec(c, v, b->exec)) return c->e->code;
    xgr_path_pop(&c->path, m2);
  }
  if (get(o, "grants", &v)) {
    size_t m2 = xgr_path_key(&c->path, "grants");
    if (want(c, v, XGR_VLIST)) return c->e->code;
    b->ngrants = xgr_list_size(v);
    if (check_count(c, b->ngrants, XGR_MAX_GRANTS, "MaxGrants", "grants")) return c->e->code;
    b->grants = aalloc(c, b->ngrants * sizeof *b->grants);
    for (size_t i = 0; i < b->ngrants; i++) {
      size_t m3 = xgr_path_index(&c->path, i);
      xgr_value g = xgr_list_get(v, i), av, rv;
      if (want(c, g, XGR_VMAP)) return c->e->code;
      if (!get(g, "address", &av)) return pmiss(c, "address", "missing `address`");
      size_t m4 = xgr_path_key(&c->path, "address");
      if (want(c, av, XGR_VSTRING)) return c->e->code;
      if (parse_rvalue(c, av, &b->grants[i].address)) return c->e->code;
      xgr_path_pop(&c->path, m4);
      if (!get(g, "rights", &rv)) return pmiss(c, "rights", "missing `rights` (bitmask: 1 READ, 2 WRITE, 4 MANAGE)");
      m4 = xgr_path_key(&c->path, "rights");
      uint64_t rights = 0;
      if (get_uint(c, rv, 7, &rights)) return c->e->code;
      if (rights == 0) return perr(c, XGR_ESCHEMA, "`rights` is 0; expected a bitmask in 1..7 (1 READ, 2 WRITE, 4 MANAGE)");
      b->grants[i].rights = (uint32_t)rights;
      xgr_path_pop(&c->path, m4);
      uint64_t ed;
      if (opt_uint(c, g, "expireDays", 36500, &b->grants[i].has_expire, &ed)) return c->e->code;
      b->grants[i].expire_days = (uint32_t)ed;
      xgr_path_pop(&c->path, m3);
    }
    xgr_path_pop(&c->path, m2);
  }
  if (get(o, "wakeUps", &v)) {
    size_t m2 = xgr_path_key(&c->path, "wakeUps");
    if (want(c, v, XGR_VLIST)) return c->e->code;
    b->nwake = xgr_list_size(v);
    if (check_count(c, b->nwake, XGR_MAX_WAKEUPS, "xgr's wakeUps cap (docs/RULE_FORMAT.md, \"Limits\")", "wakeUps"))
      return c->e->code;
    b->wake = aalloc(c, b->nwake * sizeof *b->wake);
    for (size_t i = 0; i < b->nwake; i++) {
      size_t m3 = xgr_path_index(&c->path, i);
      if (parse_wake(c, xgr_list_get(v, i), &b->wake[i])) return c->e->code;
      xgr_path_pop(&c->path, m3);
    }
    xgr_path_pop(&c->path, m2);
  }
  xgr_path_pop(&c->path, m);
  return 0;
}

/* ---- public ------------------------------------------------------------------------------------ */

int xgr_rule_parse(const char *bytes, size_t len, xgr_rule **out, xgr_error *e) {
  xgr_error tmp;
  if (!e) e = &tmp;
  xgr_error_clear(e);
  *out = NULL;
  if (len > XGR_MAX_XRC137_BYTES)
    return xgr_error_set(e, XGR_ELIMIT, "", "MaxXRC137Bytes exceeded: document is %zu bytes, maximum %d", len,
                         XGR_MAX_XRC137_BYTES);
  xgr_value doc;
  int rc = xgr_value_from_json_text(bytes, len, 0, &doc, e);
  if (rc) return rc;
  xgr_rule *r = xgr__xcalloc(1, sizeof *r);
  xgr_arena_init(&r->arena, 8192);
  r->empty_map = xgr_map_new(0);
  r->empty_list = xgr_list_new(0);
  pc c = {.r = r, .e = e};
  xgr_path_init(&c.path);
  if (doc.kind != XGR_VMAP) {
    char p[64];
    preview(doc, p, sizeof p);
    rc = xgr_error_set(e, XGR_ESCHEMA, "", "a rule document is a JSON object; got %s %s", jtype(doc), p);
  } else if (!(rc = parse_inputs(&c, doc)) && !(rc = parse_reads(&c, doc)) && !(rc = parse_api(&c, doc)) &&
             !(rc = parse_rules(&c, doc)) && !(rc = parse_branch(&c, doc, "onValid", &r->branch[0]))) {
    rc = parse_branch(&c, doc, "onInvalid", &r->branch[1]);
  }
  xgr_value_release(doc);
  if (rc) {
    xgr_rule_free(r);
    return rc;
  }
  /* the rule's constants are read by every session on every worker: pin them (see xgr_rule_free) */
  for (size_t i = 0; i < r->nvals; i++) xgr_value_pin(r->vals[i]);
  for (size_t i = 0; i < r->nprogs; i++) xgr_cel_program_pin(r->progs[i]);
  xgr_value_pin(r->empty_map);
  xgr_value_pin(r->empty_list);
  *out = r;
  return 0;
}

int xgr_rule_load_file(const char *path, xgr_rule **out, xgr_error *e) {
  char *buf = NULL;
  size_t len = 0;
  *out = NULL;
  int rc = xgr_file_read(path, &buf, &len, XGR_MAX_XRC137_BYTES, e);
  if (rc) {
    if (rc == XGR_ELIMIT && e)
      xgr_error_set(e, XGR_ELIMIT, "", "MaxXRC137Bytes exceeded: %s is larger than %d bytes", path, XGR_MAX_XRC137_BYTES);
    return rc;
  }
  rc = xgr_rule_parse(buf, len, out, e);
  free(buf);
  return rc;
}

void xgr_rule_free(xgr_rule *r) {
  if (!r) return;
  /* unpin everything before releasing anything: constants may share parts */
  for (size_t i = 0; i < r->nvals; i++) xgr_value_unpin(r->vals[i]);
  xgr_value_unpin(r->empty_map);
  xgr_value_unpin(r->empty_list);
  for (size_t i = 0; i < r->nvals; i++) xgr_value_release(r->vals[i]);
  for (size_t i = 0; i < r->nprogs; i++) xgr_cel_program_free(r->progs[i]);
  free(r->vals);
  free(r->progs);
  xgr_value_release(r->empty_map);
  xgr_value_release(r->empty_list);
  xgr_arena_free(&r->arena);
  free(r);
}

size_t xgr_rule_napi_calls(const xgr_rule *r) { return r->napi; }
size_t xgr_rule_ncontract_reads(const xgr_rule *r) { return r->nreads; }
size_t xgr_rule_nrules(const xgr_rule *r) { return r->nrules; }
size_t xgr_rule_nwakeups(const xgr_rule *r) { return r->branch[0].nwake + r->branch[1].nwake; }
size_t xgr_rule_ninputs(const xgr_rule *r) { return r->ninputs; }
const char *xgr_rule_input_name(const xgr_rule *r, size_t i) { return r->inputs[i].name; }
xgr_xrc_type xgr_rule_input_type(const xgr_rule *r, size_t i) { return r->inputs[i].type; }
bool xgr_rule_input_required(const xgr_rule *r, size_t i) { return !r->inputs[i].has_default; }
uint64_t xgr_rule_branch_wait(const xgr_rule *r, bool valid) {
  const rbranch *br = &r->branch[valid ? 0 : 1];
  return br->has_wait ? br->wait_sec : 0;
}
bool xgr_rule_has_action(const xgr_rule *r, xgr_rule_action a) {
  _Static_assert((int)RR_ABORT_STEP == (int)XGR_ACTION_ABORT_STEP && (int)RR_CANCEL_SESSION == (int)XGR_ACTION_CANCEL_SESSION,
                 "rule types and actions share their numbers");
  if (a == XGR_ACTION_NONE) return false;
  for (size_t k = 0; k < r->nrules; k++)
    if ((int)r->rules[k].type == (int)a) return true;
  return false;
}
