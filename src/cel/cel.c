/* cel.c — the public face of the expression engine (xgr/cel.h) and the XDaLa layer: options and
 * caps, the template-vs-expression classifier of SEMANTICS §8, the placeholder rewriter of the
 * guide §3, template rendering, the digits-only literal short-circuit, and compile/eval/free. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cel/cel_impl.h"
#include "util/alloc.h"

int xgr__cel_eval_program(const xgr_cel_program *p, const xgr_cel_vars *vars, xgr_value *result,
                     xgr_error *e);

xgr_cel_options xgr_cel_options_default(xgr_cel_mode mode) {
  xgr_cel_options o = {0};
  o.mode = mode;
  if (mode != XGR_CEL_MODE_PLAIN) {
    o.max_expr_len = XGR_CEL_MAX_EXPR_LEN;
    o.max_ast_nodes = XGR_CEL_MAX_AST_NODES;
    o.max_list_cap = XGR_CEL_MAX_LIST_CAP;
  }
  return o;
}

const char *xgr_cel_status_name(int status) {
  switch (status) {
    case XGR_CEL_OK: return "ok";
    case XGR_CEL_SOFT_INVALID: return "soft_invalid";
    case XGR_CEL_MISSING: return "missing";
    default: return "error";
  }
}

/* ---- lexical helpers of the XDaLa layer --------------------------------------------------- */

static bool id0(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool idc(int c) { return id0(c) || (c >= '0' && c <= '9'); }
static bool dig(int c) { return c >= '0' && c <= '9'; }
static bool wsp(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool xgr__cel_is_ident(const char *s, size_t n) {
  if (n == 0 || !id0((unsigned char)s[0])) return false;
  for (size_t i = 1; i < n; i++)
    if (!idc((unsigned char)s[i])) return false;
  return true;
}

/* Length of a placeholder `[Ident]` at s[i] (0 if none). */
static size_t placeholder_at(const char *s, size_t n, size_t i) {
  if (i >= n || s[i] != '[' || i + 1 >= n || !id0((unsigned char)s[i + 1])) return 0;
  size_t j = i + 2;
  while (j < n && idc((unsigned char)s[j])) j++;
  return j < n && s[j] == ']' ? j + 1 - i : 0;
}

/* End of a quoted region starting at s[i] (a quote char); n if unterminated. Honours
 * backslash escapes unless raw, and triple quotes. */
static size_t skip_quoted(const char *s, size_t n, size_t i, bool raw) {
  char q = s[i];
  bool triple = i + 2 < n && s[i + 1] == q && s[i + 2] == q;
  size_t j = i + (triple ? 3 : 1);
  while (j < n) {
    if (s[j] == '\\' && !raw) {
      j += 2;
      continue;
    }
    if (s[j] == q) {
      if (!triple) return j + 1;
      if (j + 2 < n && s[j + 1] == q && s[j + 2] == q) return j + 3;
    }
    j++;
  }
  return (size_t)-1;
}

static void trim(const char **s, size_t *n) {
  while (*n && wsp((unsigned char)**s)) (*s)++, (*n)--;
  while (*n && wsp((unsigned char)(*s)[*n - 1])) (*n)--;
}

static bool is_number_lit(const char *s, size_t n) {
  size_t i = 0;
  if (i < n && (s[i] == '-' || s[i] == '+')) i++;
  if (i + 1 < n && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
    i += 2;
    size_t d0 = i;
    while (i < n && ((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || (s[i] >= 'A' && s[i] <= 'F'))) i++;
    if (i == d0) return false;
  } else {
    size_t d0 = i;
    while (i < n && dig((unsigned char)s[i])) i++;
    if (i == d0) return false;
    if (i < n && s[i] == '.') {
      i++;
      size_t f0 = i;
      while (i < n && dig((unsigned char)s[i])) i++;
      if (i == f0) return false;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
      i++;
      if (i < n && (s[i] == '+' || s[i] == '-')) i++;
      size_t e0 = i;
      while (i < n && dig((unsigned char)s[i])) i++;
      if (i == e0) return false;
    }
  }
  if (i < n && (s[i] == 'u' || s[i] == 'U')) i++;
  return i == n;
}

xgr_cel_kind xgr_cel_classify(const char *src, size_t len) {
  const char *s = src;
  size_t n = len == (size_t)-1 ? strlen(src) : len;
  trim(&s, &n);
  if (n == 0) return XGR_CEL_KIND_TEMPLATE;
  if (placeholder_at(s, n, 0) == n) return XGR_CEL_KIND_EXPRESSION;
  bool digits = true;
  for (size_t i = 0; i < n && digits; i++) digits = dig((unsigned char)s[i]);
  if (digits && n >= XGR_CEL_BIGLIT_DIGITS) return XGR_CEL_KIND_BIGLITERAL;
  if (is_number_lit(s, n)) return XGR_CEL_KIND_EXPRESSION;
  if ((n == 4 && !memcmp(s, "true", 4)) || (n == 5 && !memcmp(s, "false", 5)) ||
      (n == 4 && !memcmp(s, "null", 4)))
    return XGR_CEL_KIND_EXPRESSION;
  if ((s[0] == '"' || s[0] == '\'') && skip_quoted(s, n, 0, false) == n) return XGR_CEL_KIND_EXPRESSION;
  bool has_ph = false, strong = false, arith = false;
  for (size_t i = 0; i < n;) {
    char c = s[i];
    size_t ph = placeholder_at(s, n, i);
    if (ph) {
      has_ph = true;
      i += ph;
      continue;
    }
    if (c == '"' || c == '\'') {
      size_t e = skip_quoted(s, n, i, false);
      if (e == (size_t)-1) break; /* an unterminated quote: the rest is text */
      i = e;
      continue;
    }
    if (strchr("*/%()<>!=|&", c)) strong = true;
    if (c == '+' || c == '-') {
      int before = i ? (unsigned char)s[i - 1] : ' ';
      int after = i + 1 < n ? (unsigned char)s[i + 1] : ' ';
      if (i > 0 && i + 1 < n && wsp(before) && wsp(after)) arith = true;
      if ((dig(before) || before == ')') && i > 0 && (dig(after) || after == '(' || after == '[')) arith = true;
      if (before == ']' && i > 0 && (dig(after) || after == '(')) arith = true;
    }
    i++;
  }
  if (!has_ph && !strong) return XGR_CEL_KIND_TEMPLATE;
  return strong || arith ? XGR_CEL_KIND_EXPRESSION : XGR_CEL_KIND_TEMPLATE;
}

/* ---- placeholder rewriting ---------------------------------------------------------------- */

static bool is_str_prefix(const char *w, size_t n) {
  if (n == 1) return strchr("rRbB", w[0]) != NULL;
  if (n == 2) {
    bool r = strchr("rR", w[0]) || strchr("rR", w[1]);
    bool b = strchr("bB", w[0]) || strchr("bB", w[1]);
    return r && b;
  }
  return false;
}

int xgr_cel_rewrite(const char *src, size_t len, char **out, xgr_error *e) {
  const char *s = src;
  size_t n = len == (size_t)-1 ? strlen(src) : len;
  xgr_buf b = {0};
  size_t i = 0;
  while (i < n) {
    char c = s[i];
    if (id0((unsigned char)c)) {
      size_t j = i;
      while (j < n && idc((unsigned char)s[j])) j++;
      if (j < n && (s[j] == '"' || s[j] == '\'') && is_str_prefix(s + i, j - i)) {
        bool raw = memchr(s + i, 'r', j - i) || memchr(s + i, 'R', j - i);
        size_t end = skip_quoted(s, n, j, raw);
        if (end == (size_t)-1) {
          free(b.p);
          return xgr_error_set(e, XGR_EPARSE, NULL, "at %zu: unterminated string literal", j);
        }
        xgr__buf_put(&b, s + i, end - i);
        i = end;
        continue;
      }
      xgr__buf_put(&b, s + i, j - i);
      i = j;
      continue;
    }
    if (dig((unsigned char)c)) {
      size_t j = i;
      while (j < n && (idc((unsigned char)s[j]) || s[j] == '.')) j++;
      xgr__buf_put(&b, s + i, j - i);
      i = j;
      continue;
    }
    if (c == '"' || c == '\'') {
      size_t end = skip_quoted(s, n, i, false);
      if (end == (size_t)-1) {
        free(b.p);
        return xgr_error_set(e, XGR_EPARSE, NULL, "at %zu: unterminated string literal", i);
      }
      bool triple = i + 2 < n && s[i + 1] == c && s[i + 2] == c;
      if (c == '"' || triple) {
        xgr__buf_put(&b, s + i, end - i);
      } else {
        /* 'text' -> "text": unescape \' and escape " */
        xgr__buf_putc(&b, '"');
        for (size_t k = i + 1; k < end - 1; k++) {
          if (s[k] == '\\' && k + 1 < end - 1) {
            if (s[k + 1] == '\'') xgr__buf_putc(&b, '\'');
            else xgr__buf_put(&b, s + k, 2);
            k++;
          } else if (s[k] == '"') {
            xgr__buf_put(&b, "\\\"", 2);
          } else {
            xgr__buf_putc(&b, s[k]);
          }
        }
        xgr__buf_putc(&b, '"');
      }
      i = end;
      continue;
    }
    if (c == '`') { /* quoted field name: copy verbatim */
      size_t j = i + 1;
      while (j < n && s[j] != '`') j++;
      if (j < n) j++;
      xgr__buf_put(&b, s + i, j - i);
      i = j;
      continue;
    }
    size_t ph = placeholder_at(s, n, i);
    if (ph) {
      /* `x[i]` / `f(x)[k]` / `l[0][k]` index with a name: not a placeholder; but `in[A]` is */
      bool index = false;
      if (i > 0) {
        char pc = s[i - 1];
        if (pc == ']' || pc == ')') index = true;
        else if (idc((unsigned char)pc)) {
          size_t w = i;
          while (w > 0 && idc((unsigned char)s[w - 1])) w--;
          index = !(i - w == 2 && !memcmp(s + w, "in", 2));
        }
      }
      if (!index) {
        if (b.len && idc((unsigned char)b.p[b.len - 1])) xgr__buf_putc(&b, ' ');
        xgr__buf_put(&b, s + i + 1, ph - 2);
        if (i + ph < n && (idc((unsigned char)s[i + ph]) || s[i + ph] == '"' || s[i + ph] == '\''))
          xgr__buf_putc(&b, ' ');
        i += ph;
        continue;
      }
    }
    xgr__buf_putc(&b, c);
    i++;
  }
  *out = xgr__buf_finish(&b, NULL);
  return 0;
}

/* ---- programs ----------------------------------------------------------------------------- */

void xgr_cel_program_pin(xgr_cel_program *p) {
  for (uint32_t i = 0; i < p->nconsts; i++) xgr_value_pin(p->consts[i]);
  p->pinned = true;
}

void xgr__cel_program_clear(xgr_cel_program *p) {
  if (p->pinned)
    for (uint32_t i = 0; i < p->nconsts; i++) xgr_value_unpin(p->consts[i]);
  for (uint32_t i = 0; i < p->nconsts; i++) xgr_value_release(p->consts[i]);
  for (uint32_t i = 0; i < p->nvars; i++) free(p->vars[i].name);
  for (uint32_t i = 0; i < p->nregex; i++) pcre2_code_free(p->regex[i]);
  free(p->consts);
  free(p->hashes);
  free(p->vars);
  free(p->regex);
  free(p->nodes);
  free(p->kids);
  free(p->source);
}

void xgr_cel_program_free(xgr_cel_program *p) {
  if (!p) return;
  xgr__cel_program_clear(p);
  free(p);
}

xgr_cel_kind xgr_cel_program_kind(const xgr_cel_program *p) { return p->kind; }
size_t xgr_cel_program_nvars(const xgr_cel_program *p) { return p->nroots; }
const char *xgr_cel_program_var(const xgr_cel_program *p, size_t i) { return p->vars[i].name; }
const char *xgr_cel_program_source(const xgr_cel_program *p) { return p->source; }

static void add_var(xgr_cel_program *p, const char *name, size_t n) {
  for (uint32_t i = 0; i < p->nvars; i++)
    if (p->vars[i].len == n && !memcmp(p->vars[i].name, name, n)) return;
  p->vars = xgr__xrealloc(p->vars, (p->nvars + 1) * sizeof *p->vars);
  cel_var *v = &p->vars[p->nvars++];
  v->name = xgr__xmalloc(n + 1);
  memcpy(v->name, name, n);
  v->name[n] = '\0';
  v->len = n;
  v->hash = xgr__hash_bytes(name, n);
}

static char *dupn(const char *s, size_t n) {
  char *r = xgr__xmalloc(n + 1);
  memcpy(r, s, n);
  r[n] = '\0';
  return r;
}

int xgr_cel_compile(const char *src, size_t len, const xgr_cel_options *opts,
                    xgr_cel_program **out, xgr_error *e) {
  xgr_cel_options o = opts ? *opts : xgr_cel_options_default(XGR_CEL_MODE_VALUE);
  if (!src) return xgr_error_set(e, XGR_EINVAL, NULL, "no expression");
  if (len == (size_t)-1) len = strlen(src);
  if (o.max_expr_len && len > o.max_expr_len)
    return xgr_error_set(e, XGR_ELIMIT, NULL, "expression is %zu bytes, MaxExprLen is %zu", len,
                         o.max_expr_len);
  xgr_cel_program *p = xgr__xcalloc(1, sizeof *p);
  p->mode = o.mode;
  p->max_list_cap = o.max_list_cap;
  p->max_cost = o.max_cost ? o.max_cost : 10000000;
  p->kind = XGR_CEL_KIND_EXPRESSION;
  if (o.mode == XGR_CEL_MODE_VALUE) p->kind = xgr_cel_classify(src, len);
  else if (o.mode == XGR_CEL_MODE_EXTRACT && xgr_cel_classify(src, len) == XGR_CEL_KIND_BIGLITERAL)
    p->kind = XGR_CEL_KIND_BIGLITERAL;
  int rc = 0;
  if (p->kind == XGR_CEL_KIND_BIGLITERAL) {
    const char *s = src;
    size_t n = len;
    trim(&s, &n);
    p->source = dupn(s, n);
    p->source_len = n;
    p->consts = xgr__xmalloc(sizeof *p->consts);
    p->hashes = xgr__xmalloc(sizeof *p->hashes);
    p->consts[0] = xgr_value_string(s, n);
    p->hashes[0] = 0;
    p->nconsts = 1;
    p->nodes = xgr__xcalloc(1, sizeof *p->nodes);
    p->nodes[0].op = N_CONST;
    p->nodes[0].a = 0;
    p->nnodes = 1;
  } else if (p->kind == XGR_CEL_KIND_TEMPLATE) {
    p->source = dupn(src, len);
    p->source_len = len;
    for (size_t i = 0; i < len;) {
      size_t ph = placeholder_at(src, len, i);
      if (ph) {
        add_var(p, src + i + 1, ph - 2);
        i += ph;
      } else {
        i++;
      }
    }
    p->nroots = p->nvars;
  } else {
    char *rw = NULL;
    if (o.mode == XGR_CEL_MODE_PLAIN) rw = dupn(src, len);
    else if ((rc = xgr_cel_rewrite(src, len, &rw, e)) != 0) goto fail;
    p->source = rw;
    p->source_len = o.mode == XGR_CEL_MODE_PLAIN ? len : strlen(rw);
    rc = xgr__cel_parse_into(p, p->source, p->source_len, &o, e);
    if (rc) goto fail;
  }
  *out = p;
  return 0;
fail:
  xgr_cel_program_free(p);
  return rc;
}

/* ---- templates ---------------------------------------------------------------------------- */

static bool lookup_name(const xgr_cel_vars *vars, const char *name, size_t n, xgr_value *out) {
  for (const xgr_cel_vars *l = vars; l; l = l->next) {
    switch (l->type) {
      case XGR_CEL_VARS_MAP:
        if (xgr_map_get_str(l->map, name, n, out)) return true;
        break;
      case XGR_CEL_VARS_ONE:
        if (l->name && strlen(l->name) == n && !memcmp(l->name, name, n)) {
          *out = l->value;
          return true;
        }
        break;
      case XGR_CEL_VARS_FN:
        if (l->fn && l->fn(l->ctx, name, n, out)) return true;
        break;
    }
  }
  return false;
}

int xgr_cel_render_template(const char *src, size_t len, const xgr_cel_vars *vars, char **out,
                            xgr_error *e) {
  if (len == (size_t)-1) len = strlen(src);
  xgr_buf b = {0};
  for (size_t i = 0; i < len;) {
    size_t ph = placeholder_at(src, len, i);
    if (!ph) {
      xgr__buf_putc(&b, src[i++]);
      continue;
    }
    xgr_value v;
    if (!lookup_name(vars, src + i + 1, ph - 2, &v)) {
      free(b.p);
      xgr_error_set(e, XGR_ENOTFOUND, NULL, "missing key '%.*s'", (int)(ph - 2), src + i + 1);
      return XGR_CEL_SOFT_INVALID;
    }
    size_t k;
    char *t = xgr_value_render(v, &k);
    xgr__buf_put(&b, t, k);
    free(t);
    i += ph;
  }
  *out = xgr__buf_finish(&b, NULL);
  return XGR_CEL_OK;
}

int xgr_cel_eval(const xgr_cel_program *p, const xgr_cel_vars *vars, xgr_value *result,
                 xgr_error *e) {
  if (p->kind == XGR_CEL_KIND_TEMPLATE) {
    char *s;
    *result = xgr_value_null();
    int st = xgr_cel_render_template(p->source, p->source_len, vars, &s, e);
    if (st != XGR_CEL_OK) return p->mode == XGR_CEL_MODE_RULE ? XGR_CEL_MISSING : st;
    *result = xgr_value_cstring(s);
    free(s);
    return XGR_CEL_OK;
  }
  return xgr__cel_eval_program(p, vars, result, e);
}
