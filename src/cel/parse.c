/* parse.c — the CEL front end: lexer, recursive-descent parser (CEL precedence, macros) and the
 * resolver/checker that turns identifiers into slots or type constants, resolves function names
 * and arities, precompiles constant regular expressions and enforces the AST caps.
 *
 * The lexer works on demand over a length-aware buffer (sources may contain NUL). Literals are
 * decoded straight into constants (strings with every CEL escape, bytes, ints with the
 * `-9223372036854775808` special case folded into the literal). Errors are XGR_EPARSE
 * "at <offset>: <what>" and stop the parse at once. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cel/cel_impl.h"

/* ---- tokens ------------------------------------------------------------------------------- */

typedef enum tok_kind {
  T_EOF, T_INT, T_UINT, T_DOUBLE, T_STRING, T_BYTES, T_IDENT, T_QIDENT, T_TRUE, T_FALSE, T_NULL,
  T_IN, T_LPAREN, T_RPAREN, T_LBRACK, T_RBRACK, T_LBRACE, T_RBRACE, T_DOT, T_COMMA, T_QUEST,
  T_COLON, T_NOT, T_MINUS, T_PLUS, T_STAR, T_SLASH, T_PERCENT, T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE,
  T_AND, T_OR, T_ERROR
} tok_kind;

typedef struct tok {
  tok_kind k;
  uint32_t pos, end;
  uint64_t mag;        /* T_INT / T_UINT magnitude */
  bool overflow;       /* T_INT / T_UINT did not fit 64 bits */
  double d;
  xgr_value str;       /* T_STRING / T_BYTES (owned by the parser until used) */
} tok;

typedef struct parser {
  const char *s;
  size_t n, i;
  tok t;
  xgr_cel_program *p;
  const xgr_cel_options *o;
  xgr_error *e;
  bool failed;
  size_t depth, max_depth;
  uint32_t node_cap, kid_cap, const_cap;
} parser;

static int perr(parser *ps, uint32_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(parser *ps, uint32_t pos, const char *fmt, ...) {
  ps->t.k = T_ERROR; /* never act on a half-read token */
  ps->t.end = ps->t.pos;
  if (ps->failed) return XGR_EPARSE;
  ps->failed = true;
  char m[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  xgr_error_set(ps->e, XGR_EPARSE, NULL, "at %u: %s", pos, m);
  return XGR_EPARSE;
}

static const char *tok_text(parser *ps, char *buf, size_t n) {
  if (ps->t.k == T_EOF) return "end of input";
  size_t len = ps->t.end - ps->t.pos;
  if (len > 20) len = 20;
  snprintf(buf, n, "'%.*s'", (int)len, ps->s + ps->t.pos);
  return buf;
}

static bool is_id0(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_id(int c) { return is_id0(c) || (c >= '0' && c <= '9'); }
static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Lex a string or bytes literal starting at ps->i (after any prefix). */
static int lex_string(parser *ps, uint32_t start, bool raw, bool bytes) {
  const char *s = ps->s;
  size_t n = ps->n, i = ps->i;
  char q = s[i];
  bool triple = i + 2 < n && s[i + 1] == q && s[i + 2] == q;
  i += triple ? 3 : 1;
  xgr_buf b = {0};
  for (;;) {
    if (i >= n) {
      free(b.p);
      return perr(ps, start, "unterminated string literal");
    }
    char c = s[i];
    if (c == q && (!triple || (i + 2 < n && s[i + 1] == q && s[i + 2] == q))) {
      i += triple ? 3 : 1;
      break;
    }
    if (!triple && (c == '\n' || c == '\r')) {
      free(b.p);
      return perr(ps, (uint32_t)i, "newline in a single-line string literal");
    }
    if (c != '\\' || raw) {
      xgr__buf_putc(&b, c);
      i++;
      continue;
    }
    if (i + 1 >= n) {
      free(b.p);
      return perr(ps, (uint32_t)i, "unterminated escape");
    }
    char k = s[i + 1];
    uint32_t esc_pos = (uint32_t)i;
    i += 2;
    switch (k) {
      case 'a': xgr__buf_putc(&b, '\a'); break;
      case 'b': xgr__buf_putc(&b, '\b'); break;
      case 'f': xgr__buf_putc(&b, '\f'); break;
      case 'n': xgr__buf_putc(&b, '\n'); break;
      case 'r': xgr__buf_putc(&b, '\r'); break;
      case 't': xgr__buf_putc(&b, '\t'); break;
      case 'v': xgr__buf_putc(&b, '\v'); break;
      case '\\': case '?': case '"': case '\'': case '`': xgr__buf_putc(&b, k); break;
      case 'x': case 'X': case 'u': case 'U': {
        int digits = (k == 'x' || k == 'X') ? 2 : k == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (int d = 0; d < digits; d++) {
          int h = i < n ? hexval((unsigned char)s[i]) : -1;
          if (h < 0) {
            free(b.p);
            return perr(ps, esc_pos, "bad \\%c escape: expected %d hex digits", k, digits);
          }
          v = v * 16 + (uint32_t)h;
          i++;
        }
        if (digits == 2 && bytes) xgr__buf_putc(&b, (char)v);
        else if (digits == 2) xgr__buf_put_utf8(&b, v);
        else {
          if (bytes && digits > 2) {
            free(b.p);
            return perr(ps, esc_pos, "\\%c escapes are not allowed in bytes literals", k);
          }
          if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
            free(b.p);
            return perr(ps, esc_pos, "escape \\%c denotes an invalid code point", k);
          }
          xgr__buf_put_utf8(&b, v);
        }
        break;
      }
      case '0': case '1': case '2': case '3': {
        uint32_t v = (uint32_t)(k - '0');
        for (int d = 0; d < 2; d++) {
          if (i >= n || s[i] < '0' || s[i] > '7') {
            free(b.p);
            return perr(ps, esc_pos, "bad octal escape: expected 3 octal digits");
          }
          v = v * 8 + (uint32_t)(s[i] - '0');
          i++;
        }
        if (bytes) xgr__buf_putc(&b, (char)v);
        else xgr__buf_put_utf8(&b, v);
        break;
      }
      default:
        free(b.p);
        return perr(ps, esc_pos, "unknown escape sequence '\\%c'", k);
    }
  }
  ps->i = i;
  if (!bytes && !xgr_utf8_valid(b.p ? b.p : "", b.len)) {
    free(b.p);
    return perr(ps, start, "string literal is not valid UTF-8");
  }
  ps->t.k = bytes ? T_BYTES : T_STRING;
  ps->t.str = bytes ? xgr_value_bytes(b.p ? b.p : "", b.len) : xgr_value_string(b.p ? b.p : "", b.len);
  free(b.p);
  return 0;
}

static int lex_number(parser *ps, uint32_t start) {
  const char *s = ps->s;
  size_t n = ps->n, i = ps->i;
  tok *t = &ps->t;
  if (s[i] == '0' && i + 1 < n && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
    i += 2;
    size_t d0 = i;
    uint64_t v = 0;
    bool over = false;
    while (i < n && hexval((unsigned char)s[i]) >= 0) {
      if (v >> 60) over = true;
      v = v * 16 + (uint64_t)hexval((unsigned char)s[i]);
      i++;
    }
    if (i == d0) return perr(ps, start, "hex literal without digits");
    t->mag = v;
    t->overflow = over;
    t->k = T_INT;
    if (i < n && (s[i] == 'u' || s[i] == 'U')) t->k = T_UINT, i++;
  } else {
    size_t d0 = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    bool isdbl = false;
    if (i + 1 < n && s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9') {
      isdbl = true;
      i++;
      while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
      size_t j = i + 1;
      if (j < n && (s[j] == '+' || s[j] == '-')) j++;
      if (j < n && s[j] >= '0' && s[j] <= '9') {
        isdbl = true;
        i = j;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
      }
    }
    char buf[400];
    size_t len = i - d0;
    if (len >= sizeof buf) return perr(ps, start, "number literal too long");
    memcpy(buf, s + d0, len);
    buf[len] = '\0';
    if (isdbl) {
      t->k = T_DOUBLE;
      t->d = strtod(buf, NULL);
    } else {
      uint64_t v = 0;
      bool over = false;
      for (size_t k = 0; k < len; k++) {
        unsigned d = (unsigned)(buf[k] - '0');
        if (v > (UINT64_MAX - d) / 10) over = true;
        v = v * 10 + d;
      }
      t->mag = v;
      t->overflow = over;
      t->k = T_INT;
      if (i < n && (s[i] == 'u' || s[i] == 'U')) t->k = T_UINT, i++;
    }
  }
  if (i < n && is_id(s[i])) return perr(ps, (uint32_t)i, "unexpected character '%c' after a number", s[i]);
  ps->i = i;
  return 0;
}

static int lex(parser *ps) {
  const char *s = ps->s;
  size_t n = ps->n;
  tok *t = &ps->t;
  xgr_value_clear(&t->str);
  for (;;) {
    while (ps->i < n && (s[ps->i] == ' ' || s[ps->i] == '\t' || s[ps->i] == '\n' ||
                         s[ps->i] == '\r' || s[ps->i] == '\f'))
      ps->i++;
    if (ps->i + 1 < n && s[ps->i] == '/' && s[ps->i + 1] == '/') {
      while (ps->i < n && s[ps->i] != '\n') ps->i++;
      continue;
    }
    break;
  }
  uint32_t start = (uint32_t)ps->i;
  t->pos = start;
  t->overflow = false;
  if (ps->i >= n) {
    t->k = T_EOF;
    t->end = start;
    return 0;
  }
  char c = s[ps->i];
  int rc = 0;
  /* string prefixes: r, b, rb, br (any case) */
  if (c == 'r' || c == 'R' || c == 'b' || c == 'B') {
    size_t j = ps->i;
    bool raw = false, bytes = false;
    for (int k = 0; k < 2 && j < n; k++, j++) {
      char x = s[j];
      if ((x == 'r' || x == 'R') && !raw) raw = true;
      else if ((x == 'b' || x == 'B') && !bytes) bytes = true;
      else break;
    }
    if (j < n && (s[j] == '"' || s[j] == '\'')) {
      ps->i = j;
      rc = lex_string(ps, start, raw, bytes);
      t->end = (uint32_t)ps->i;
      return rc;
    }
  }
  if (is_id0(c)) {
    size_t j = ps->i;
    while (j < n && is_id(s[j])) j++;
    size_t len = j - ps->i;
    const char *w = s + ps->i;
    ps->i = j;
    t->end = (uint32_t)j;
    t->k = T_IDENT;
    if (len == 4 && !memcmp(w, "true", 4)) t->k = T_TRUE;
    else if (len == 5 && !memcmp(w, "false", 5)) t->k = T_FALSE;
    else if (len == 4 && !memcmp(w, "null", 4)) t->k = T_NULL;
    else if (len == 2 && !memcmp(w, "in", 2)) t->k = T_IN;
    return 0;
  }
  if ((c >= '0' && c <= '9') || (c == '.' && ps->i + 1 < n && s[ps->i + 1] >= '0' && s[ps->i + 1] <= '9')) {
    rc = lex_number(ps, start);
    t->end = (uint32_t)ps->i;
    return rc;
  }
  if (c == '"' || c == '\'') {
    rc = lex_string(ps, start, false, false);
    t->end = (uint32_t)ps->i;
    return rc;
  }
  if (c == '`') {
    size_t j = ps->i + 1;
    while (j < n && s[j] != '`' && s[j] != '\n') j++;
    if (j >= n || s[j] != '`' || j == ps->i + 1) return perr(ps, start, "bad quoted identifier");
    t->k = T_QIDENT;
    t->str = xgr_value_string(s + ps->i + 1, j - ps->i - 1);
    ps->i = j + 1;
    t->end = (uint32_t)ps->i;
    return 0;
  }
  char d = ps->i + 1 < n ? s[ps->i + 1] : 0;
  size_t len = 1;
  switch (c) {
    case '(': t->k = T_LPAREN; break;
    case ')': t->k = T_RPAREN; break;
    case '[': t->k = T_LBRACK; break;
    case ']': t->k = T_RBRACK; break;
    case '{': t->k = T_LBRACE; break;
    case '}': t->k = T_RBRACE; break;
    case '.': t->k = T_DOT; break;
    case ',': t->k = T_COMMA; break;
    case '?': t->k = T_QUEST; break;
    case ':': t->k = T_COLON; break;
    case '+': t->k = T_PLUS; break;
    case '-': t->k = T_MINUS; break;
    case '*': t->k = T_STAR; break;
    case '/': t->k = T_SLASH; break;
    case '%': t->k = T_PERCENT; break;
    case '!': if (d == '=') t->k = T_NE, len = 2; else t->k = T_NOT; break;
    case '=': if (d == '=') { t->k = T_EQ; len = 2; break; } return perr(ps, start, "unexpected '=' (did you mean '=='?)");
    case '<': if (d == '=') t->k = T_LE, len = 2; else t->k = T_LT; break;
    case '>': if (d == '=') t->k = T_GE, len = 2; else t->k = T_GT; break;
    case '&': if (d == '&') { t->k = T_AND; len = 2; break; } return perr(ps, start, "unexpected '&' (did you mean '&&'?)");
    case '|': if (d == '|') { t->k = T_OR; len = 2; break; } return perr(ps, start, "unexpected '|' (did you mean '||'?)");
    default:
      if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7F)
        return perr(ps, start, "unexpected character 0x%02x", (unsigned char)c);
      return perr(ps, start, "unexpected character '%c'", c);
  }
  ps->i += len;
  t->end = (uint32_t)ps->i;
  return 0;
}

/* ---- program building --------------------------------------------------------------------- */

static int32_t new_node(parser *ps, node_op op, uint32_t pos) {
  xgr_cel_program *p = ps->p;
  if (p->nnodes == ps->node_cap) {
    ps->node_cap = ps->node_cap ? ps->node_cap * 2 : 32;
    p->nodes = xgr__xrealloc(p->nodes, ps->node_cap * sizeof(cel_node));
  }
  cel_node *n = &p->nodes[p->nnodes];
  memset(n, 0, sizeof *n);
  n->op = (uint8_t)op;
  n->pos = pos;
  n->a = n->b = n->c = -1;
  return (int32_t)p->nnodes++;
}

static uint32_t add_kids(parser *ps, const int32_t *k, size_t n) {
  xgr_cel_program *p = ps->p;
  while (p->nkids + n > ps->kid_cap) {
    ps->kid_cap = ps->kid_cap ? ps->kid_cap * 2 : 32;
    p->kids = xgr__xrealloc(p->kids, ps->kid_cap * sizeof(int32_t));
  }
  uint32_t at = p->nkids;
  if (n) memcpy(p->kids + at, k, n * sizeof(int32_t));
  p->nkids += (uint32_t)n;
  return at;
}

/* Add a constant (takes ownership). */
static int32_t add_const(parser *ps, xgr_value v) {
  xgr_cel_program *p = ps->p;
  if (p->nconsts == ps->const_cap) {
    ps->const_cap = ps->const_cap ? ps->const_cap * 2 : 16;
    p->consts = xgr__xrealloc(p->consts, ps->const_cap * sizeof(xgr_value));
    p->hashes = xgr__xrealloc(p->hashes, ps->const_cap * sizeof(uint64_t));
  }
  p->consts[p->nconsts] = v;
  p->hashes[p->nconsts] = v.kind == XGR_VSTRING ? xgr__hash_bytes(v.as.s->data, v.as.s->len) : 0;
  return (int32_t)p->nconsts++;
}

static int32_t const_node(parser *ps, xgr_value v, uint32_t pos) {
  int32_t c = add_const(ps, v);
  int32_t n = new_node(ps, N_CONST, pos);
  ps->p->nodes[n].a = c;
  return n;
}

/* ---- parser ------------------------------------------------------------------------------- */

static int32_t p_expr(parser *ps);

static bool accept(parser *ps, tok_kind k) {
  if (ps->failed || ps->t.k != k) return false;
  lex(ps);
  return true;
}

static bool expect(parser *ps, tok_kind k, const char *what) {
  if (ps->failed) return false;
  if (ps->t.k == k) {
    lex(ps);
    return true;
  }
  char b[40];
  perr(ps, ps->t.pos, "expected %s, found %s", what, tok_text(ps, b, sizeof b));
  return false;
}

static const char *const reserved[] = {"as", "break", "const", "continue", "else", "for",
                                       "function", "if", "import", "let", "loop", "package",
                                       "namespace", "return", "var", "void", "while", NULL};

static bool is_reserved(const char *w, size_t n) {
  for (int i = 0; reserved[i]; i++)
    if (strlen(reserved[i]) == n && !memcmp(reserved[i], w, n)) return true;
  return false;
}

/* Parse a comma-separated argument list up to `close`; node ids into *out (malloc'd). */
static int p_args(parser *ps, tok_kind close, int32_t **out, size_t *nout) {
  size_t n = 0, cap = 4;
  int32_t *a = xgr__xmalloc(cap * sizeof *a);
  if (ps->t.k != close) {
    for (;;) {
      int32_t x = p_expr(ps);
      if (ps->failed) break;
      if (n == cap) a = xgr__xrealloc(a, (cap *= 2) * sizeof *a);
      a[n++] = x;
      if (!accept(ps, T_COMMA)) break;
      if (ps->t.k == close) break; /* trailing comma */
    }
  }
  if (!ps->failed) expect(ps, close, close == T_RPAREN ? "')'" : "']'");
  if (ps->failed) {
    free(a);
    return XGR_EPARSE;
  }
  *out = a;
  *nout = n;
  return 0;
}

static int32_t make_call(parser *ps, uint32_t pos, const char *name, size_t nlen, int32_t recv,
                         int32_t *args, size_t nargs) {
  xgr_cel_program *p = ps->p;
  /* macros */
  if (recv < 0 && nlen == 3 && !memcmp(name, "has", 3)) {
    if (nargs != 1 || p->nodes[args[0]].op != N_SELECT) {
      perr(ps, pos, "has() needs one field selection argument, like has(m.key)");
      return -1;
    }
    p->nodes[args[0]].op = N_HAS;
    return args[0];
  }
  if (recv >= 0) {
    int mk = -1;
    if (nlen == 3 && !memcmp(name, "all", 3) && nargs == 2) mk = M_ALL;
    else if (nlen == 6 && !memcmp(name, "exists", 6) && nargs == 2) mk = M_EXISTS;
    else if (nlen == 10 && !memcmp(name, "exists_one", 10) && nargs == 2) mk = M_EXISTS_ONE;
    else if (nlen == 3 && !memcmp(name, "map", 3) && (nargs == 2 || nargs == 3)) mk = nargs == 2 ? M_MAP : M_MAP3;
    else if (nlen == 6 && !memcmp(name, "filter", 6) && nargs == 2) mk = M_FILTER;
    if (mk >= 0) {
      if (p->nodes[args[0]].op != N_IDENT) {
        perr(ps, p->nodes[args[0]].pos, "the first argument of %.*s() must be a simple name", (int)nlen, name);
        return -1;
      }
      int32_t c = new_node(ps, N_COMP, pos);
      cel_node *cn = &p->nodes[c];
      cn->fn = (uint8_t)mk;
      cn->a = recv;
      cn->b = args[1];
      cn->c = nargs == 3 ? args[2] : -1;
      cn->slot = (uint32_t)p->nodes[args[0]].b; /* name constant; the resolver makes it a slot */
      return c;
    }
  }
  size_t total = nargs + (recv >= 0);
  int32_t tmp[260];
  if (total > 255) {
    perr(ps, pos, "too many arguments");
    return -1;
  }
  size_t k = 0;
  if (recv >= 0) tmp[k++] = recv;
  for (size_t i = 0; i < nargs; i++) tmp[k++] = args[i];
  int fn = xgr__cel_fn_lookup(name, nlen);
  const char *why = NULL;
  char whybuf[160];
  if (fn < 0) {
    snprintf(whybuf, sizeof whybuf, "unknown function '%.*s'", (int)nlen, name);
    why = whybuf;
  } else {
    const cel_fndef *d = &xgr__cel_functions[fn];
    if (!(d->style & (recv >= 0 ? 2 : 1))) {
      snprintf(whybuf, sizeof whybuf, recv >= 0 ? "'%s' is a function, not a method: write %s(...)"
                                                : "'%s' is a method: write x.%s(...)",
               d->name, d->name);
      why = whybuf;
    } else if (total < d->min || total > d->max) {
      if (d->min == d->max)
        snprintf(whybuf, sizeof whybuf, "%s() takes %d argument%s, got %zu", d->name, d->min,
                 d->min == 1 ? "" : "s", total);
      else
        snprintf(whybuf, sizeof whybuf, "%s() takes %d to %d arguments, got %zu", d->name, d->min,
                 d->max, total);
      why = whybuf;
    }
  }
  if (why) {
    if (ps->o->mode != XGR_CEL_MODE_PLAIN) {
      ps->failed = true;
      xgr_error_set(ps->e, XGR_EEVAL, NULL, "at %u: %s", pos, why);
      return -1;
    }
    int32_t en = new_node(ps, N_ERROR, pos);
    p->nodes[en].b = add_const(ps, xgr_value_cstring(why));
    p->nodes[en].args = add_kids(ps, tmp, k);
    p->nodes[en].nargs = (uint16_t)k;
    return en;
  }
  int32_t c = new_node(ps, N_CALL, pos);
  p->nodes[c].fn = (uint8_t)fn;
  p->nodes[c].args = add_kids(ps, tmp, k);
  p->nodes[c].nargs = (uint16_t)k;
  return c;
}

static int32_t p_primary(parser *ps) {
  if (ps->failed) return -1;
  xgr_cel_program *p = ps->p;
  tok *t = &ps->t;
  uint32_t pos = t->pos;
  char b[40];
  switch (t->k) {
    case T_INT:
      if (t->overflow || t->mag > INT64_MAX) {
        perr(ps, pos, "integer literal out of the int64 range (use a 'u' suffix or u256(\"...\"))");
        return -1;
      } else {
        int32_t n = const_node(ps, xgr_value_int((int64_t)t->mag), pos);
        lex(ps);
        return n;
      }
    case T_UINT:
      if (t->overflow) {
        perr(ps, pos, "unsigned integer literal out of the uint64 range");
        return -1;
      } else {
        int32_t n = const_node(ps, xgr_value_uint(t->mag), pos);
        lex(ps);
        return n;
      }
    case T_DOUBLE: {
      int32_t n = const_node(ps, xgr_value_double(t->d), pos);
      lex(ps);
      return n;
    }
    case T_STRING:
    case T_BYTES: {
      int32_t n = const_node(ps, t->str, pos);
      t->str = xgr_value_null();
      lex(ps);
      return n;
    }
    case T_TRUE: case T_FALSE: {
      int32_t n = const_node(ps, xgr_value_bool(t->k == T_TRUE), pos);
      lex(ps);
      return n;
    }
    case T_NULL: {
      int32_t n = const_node(ps, xgr_value_null(), pos);
      lex(ps);
      return n;
    }
    case T_LPAREN: {
      lex(ps);
      int32_t e = p_expr(ps);
      expect(ps, T_RPAREN, "')'");
      return e;
    }
    case T_LBRACK: {
      lex(ps);
      int32_t *a;
      size_t na;
      if (p_args(ps, T_RBRACK, &a, &na)) return -1;
      int32_t n = new_node(ps, N_LIST, pos);
      p->nodes[n].args = add_kids(ps, a, na);
      p->nodes[n].nargs = (uint16_t)(na > 65535 ? 65535 : na);
      free(a);
      if (na > 65535) perr(ps, pos, "list literal too long");
      return n;
    }
    case T_LBRACE: {
      lex(ps);
      size_t cap = 8, na = 0;
      int32_t *a = xgr__xmalloc(cap * sizeof *a);
      while (!ps->failed && t->k != T_RBRACE) {
        int32_t k = p_expr(ps);
        expect(ps, T_COLON, "':'");
        int32_t v = p_expr(ps);
        if (ps->failed) break;
        if (na + 2 > cap) a = xgr__xrealloc(a, (cap *= 2) * sizeof *a);
        a[na++] = k;
        a[na++] = v;
        if (!accept(ps, T_COMMA)) break;
      }
      expect(ps, T_RBRACE, "'}'");
      int32_t n = -1;
      if (!ps->failed) {
        n = new_node(ps, N_MAP, pos);
        p->nodes[n].args = add_kids(ps, a, na);
        p->nodes[n].nargs = (uint16_t)(na / 2 > 65535 ? 65535 : na / 2);
      }
      free(a);
      return n;
    }
    case T_DOT:
    case T_IDENT: {
      if (t->k == T_DOT) {
        lex(ps); /* leading dot: root-scoped name; same as the plain name here */
        if (t->k != T_IDENT) {
          perr(ps, t->pos, "expected a name after '.', found %s", tok_text(ps, b, sizeof b));
          return -1;
        }
      }
      const char *name = ps->s + t->pos;
      size_t nlen = t->end - t->pos;
      uint32_t npos = t->pos;
      lex(ps);
      if (t->k == T_LPAREN) {
        lex(ps);
        int32_t *a;
        size_t na;
        if (p_args(ps, T_RPAREN, &a, &na)) return -1;
        int32_t n = make_call(ps, npos, name, nlen, -1, a, na);
        free(a);
        return n;
      }
      if (is_reserved(name, nlen)) {
        perr(ps, npos, "'%.*s' is a reserved word", (int)nlen, name);
        return -1;
      }
      int32_t n = new_node(ps, N_IDENT, npos);
      p->nodes[n].b = add_const(ps, xgr_value_string(name, nlen));
      return n;
    }
    default:
      perr(ps, pos, "expected an expression, found %s", tok_text(ps, b, sizeof b));
      return -1;
  }
}

static int32_t p_member(parser *ps, int32_t n) {
  xgr_cel_program *p = ps->p;
  tok *t = &ps->t;
  char b[40];
  while (!ps->failed) {
    if (t->k == T_DOT) {
      lex(ps);
      uint32_t pos = t->pos;
      xgr_value fname;
      if (t->k == T_IDENT) fname = xgr_value_string(ps->s + t->pos, t->end - t->pos);
      else if (t->k == T_QIDENT) fname = xgr_value_retain(t->str);
      else if (t->k == T_TRUE || t->k == T_FALSE || t->k == T_NULL || t->k == T_IN)
        fname = xgr_value_string(ps->s + t->pos, t->end - t->pos);
      else {
        perr(ps, pos, "expected a field name after '.', found %s", tok_text(ps, b, sizeof b));
        return -1;
      }
      bool quoted = t->k == T_QIDENT;
      lex(ps);
      if (t->k == T_LPAREN && !quoted) {
        lex(ps);
        int32_t *a;
        size_t na;
        if (p_args(ps, T_RPAREN, &a, &na)) {
          xgr_value_release(fname);
          return -1;
        }
        n = make_call(ps, pos, fname.as.s->data, fname.as.s->len, n, a, na);
        xgr_value_release(fname);
        free(a);
        if (n < 0) return -1;
        continue;
      }
      int32_t s = new_node(ps, N_SELECT, pos);
      p->nodes[s].a = n;
      p->nodes[s].b = add_const(ps, fname);
      n = s;
    } else if (t->k == T_LBRACK) {
      uint32_t pos = t->pos;
      lex(ps);
      int32_t ix = p_expr(ps);
      expect(ps, T_RBRACK, "']'");
      int32_t s = new_node(ps, N_INDEX, pos);
      p->nodes[s].a = n;
      p->nodes[s].b = ix;
      n = s;
    } else {
      break;
    }
  }
  return n;
}

static int32_t p_unary(parser *ps) {
  tok *t = &ps->t;
  if (ps->failed) return -1;
  if (++ps->depth > ps->max_depth) {
    perr(ps, t->pos, "expression nested deeper than %zu levels", ps->max_depth);
    return -1;
  }
  int32_t r;
  if (t->k == T_NOT || t->k == T_MINUS) {
    tok_kind k = t->k;
    uint32_t pos = t->pos;
    lex(ps);
    if (k == T_MINUS && (t->k == T_INT || t->k == T_DOUBLE)) {
      /* fold the sign into the literal (so -9223372036854775808 is an int) */
      uint32_t lpos = t->pos;
      int32_t lit;
      if (t->k == T_DOUBLE) lit = const_node(ps, xgr_value_double(-t->d), pos);
      else if (t->overflow || t->mag > (uint64_t)INT64_MAX + 1) {
        perr(ps, lpos, "integer literal out of the int64 range");
        lit = -1;
      } else
        lit = const_node(ps, xgr_value_int(t->mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)t->mag), pos);
      if (!ps->failed) lex(ps);
      r = ps->failed ? -1 : p_member(ps, lit);
    } else {
      int32_t x = p_unary(ps);
      if (ps->failed) r = -1;
      else {
        r = new_node(ps, k == T_NOT ? N_NOT : N_NEG, pos);
        ps->p->nodes[r].a = x;
      }
    }
  } else {
    int32_t x = p_primary(ps);
    r = ps->failed ? -1 : p_member(ps, x);
  }
  ps->depth--;
  return r;
}

static int32_t binop(parser *ps, node_op op, uint32_t pos, int32_t a, int32_t b) {
  int32_t n = new_node(ps, op, pos);
  ps->p->nodes[n].a = a;
  ps->p->nodes[n].b = b;
  return n;
}

static int32_t p_mul(parser *ps) {
  int32_t l = p_unary(ps);
  while (!ps->failed) {
    node_op op;
    if (ps->t.k == T_STAR) op = N_MUL;
    else if (ps->t.k == T_SLASH) op = N_DIV;
    else if (ps->t.k == T_PERCENT) op = N_MOD;
    else break;
    uint32_t pos = ps->t.pos;
    lex(ps);
    int32_t r = p_unary(ps);
    l = binop(ps, op, pos, l, r);
  }
  return l;
}

static int32_t p_add(parser *ps) {
  int32_t l = p_mul(ps);
  while (!ps->failed && (ps->t.k == T_PLUS || ps->t.k == T_MINUS)) {
    node_op op = ps->t.k == T_PLUS ? N_ADD : N_SUB;
    uint32_t pos = ps->t.pos;
    lex(ps);
    int32_t r = p_mul(ps);
    l = binop(ps, op, pos, l, r);
  }
  return l;
}

static int32_t p_rel(parser *ps) {
  int32_t l = p_add(ps);
  while (!ps->failed) {
    node_op op;
    switch (ps->t.k) {
      case T_EQ: op = N_EQ; break;
      case T_NE: op = N_NE; break;
      case T_LT: op = N_LT; break;
      case T_LE: op = N_LE; break;
      case T_GT: op = N_GT; break;
      case T_GE: op = N_GE; break;
      case T_IN: op = N_IN; break;
      default: return l;
    }
    uint32_t pos = ps->t.pos;
    lex(ps);
    int32_t r = p_add(ps);
    l = binop(ps, op, pos, l, r);
  }
  return l;
}

static int32_t p_and(parser *ps) {
  int32_t l = p_rel(ps);
  while (!ps->failed && ps->t.k == T_AND) {
    uint32_t pos = ps->t.pos;
    lex(ps);
    int32_t r = p_rel(ps);
    l = binop(ps, N_AND, pos, l, r);
  }
  return l;
}

static int32_t p_or(parser *ps) {
  int32_t l = p_and(ps);
  while (!ps->failed && ps->t.k == T_OR) {
    uint32_t pos = ps->t.pos;
    lex(ps);
    int32_t r = p_and(ps);
    l = binop(ps, N_OR, pos, l, r);
  }
  return l;
}

static int32_t p_expr(parser *ps) {
  if (++ps->depth > ps->max_depth) {
    perr(ps, ps->t.pos, "expression nested deeper than %zu levels", ps->max_depth);
    return -1;
  }
  int32_t c = p_or(ps);
  if (!ps->failed && ps->t.k == T_QUEST) {
    uint32_t pos = ps->t.pos;
    lex(ps);
    int32_t a = p_or(ps);
    expect(ps, T_COLON, "':'");
    int32_t b = p_expr(ps);
    if (!ps->failed) {
      int32_t n = new_node(ps, N_COND, pos);
      ps->p->nodes[n].a = c;
      ps->p->nodes[n].b = a;
      ps->p->nodes[n].c = b;
      c = n;
    }
  }
  ps->depth--;
  return c;
}

/* ---- resolver ----------------------------------------------------------------------------- */

typedef struct scope {
  int32_t name;     /* constant index of the name */
  uint32_t slot;
} scope;

typedef struct resolver {
  parser *ps;
  scope sc[512];
  int nsc;
  uint32_t nlocal;
  size_t height, max_height;
} resolver;

static bool const_eq_str(const xgr_cel_program *p, int32_t c, const char *s, size_t n) {
  xgr_value v = p->consts[c];
  return v.kind == XGR_VSTRING && v.as.s->len == n && !memcmp(v.as.s->data, s, n);
}

/* Slot of free variable `name`, adding it if new. */
static uint32_t var_slot(parser *ps, const char *name, size_t n) {
  xgr_cel_program *p = ps->p;
  for (uint32_t i = 0; i < p->nvars; i++)
    if (p->vars[i].len == n && !memcmp(p->vars[i].name, name, n)) return i;
  if ((p->nvars & (p->nvars - 1)) == 0 || p->nvars == 0)
    p->vars = xgr__xrealloc(p->vars, (p->nvars ? p->nvars * 2 : 4) * sizeof(cel_var));
  cel_var *v = &p->vars[p->nvars];
  v->name = xgr__xmalloc(n + 1);
  memcpy(v->name, name, n);
  v->name[n] = '\0';
  v->len = n;
  v->hash = xgr__hash_bytes(name, n);
  return p->nvars++;
}

static const struct { const char *name; uint8_t kind; } type_names[] = {
  {"int", XGR_VINT}, {"uint", XGR_VUINT}, {"double", XGR_VDOUBLE}, {"bool", XGR_VBOOL},
  {"string", XGR_VSTRING}, {"bytes", XGR_VBYTES}, {"list", XGR_VLIST}, {"map", XGR_VMAP},
  {"null_type", XGR_VNULL}, {"type", XGR_VTYPE}, {NULL, 0}};

static int resolve(resolver *r, int32_t id);

static int resolve_ident(resolver *r, int32_t id) {
  parser *ps = r->ps;
  xgr_cel_program *p = ps->p;
  cel_node *n = &p->nodes[id];
  xgr_value nm = p->consts[n->b];
  for (int i = r->nsc - 1; i >= 0; i--)
    if (const_eq_str(p, r->sc[i].name, nm.as.s->data, nm.as.s->len)) {
      n->op = N_LOCAL;
      n->a = (int32_t)r->sc[i].slot;
      return 0;
    }
  for (int i = 0; type_names[i].name; i++)
    if (const_eq_str(p, n->b, type_names[i].name, strlen(type_names[i].name))) {
      n->op = N_CONST;
      n->a = add_const(ps, xgr_value_type((xgr_vkind)type_names[i].kind, 0));
      return 0;
    }
  n->op = N_VAR;
  n->a = (int32_t)var_slot(ps, nm.as.s->data, nm.as.s->len);
  return 0;
}

/* PLAIN mode: a.b.c rooted at a free name becomes N_QUAL (longest bound prefix wins). */
static int try_qualified(resolver *r, int32_t id) {
  parser *ps = r->ps;
  xgr_cel_program *p = ps->p;
  int32_t fields[64];
  int nf = 0;
  int32_t cur = id;
  while (p->nodes[cur].op == N_SELECT && nf < 64) {
    fields[nf++] = cur;
    cur = p->nodes[cur].a;
  }
  if (p->nodes[cur].op != N_IDENT || nf == 0 || nf >= 64) return 1;
  xgr_value root = p->consts[p->nodes[cur].b];
  for (int i = r->nsc - 1; i >= 0; i--)
    if (const_eq_str(p, r->sc[i].name, root.as.s->data, root.as.s->len)) return 1;
  for (int i = 0; type_names[i].name; i++)
    if (const_eq_str(p, p->nodes[cur].b, type_names[i].name, strlen(type_names[i].name))) return 1;
  /* kids: field consts in order (outermost last), then slots for prefixes with 0..nf fields */
  int32_t k[130];
  xgr_buf name = {0};
  xgr__buf_put(&name, root.as.s->data, root.as.s->len);
  for (int i = 0; i < nf; i++) k[i] = p->nodes[fields[nf - 1 - i]].b;
  k[nf] = (int32_t)var_slot(ps, name.p, name.len);
  for (int i = 0; i < nf; i++) {
    xgr_value f = p->consts[k[i]];
    xgr__buf_putc(&name, '.');
    xgr__buf_put(&name, f.as.s->data, f.as.s->len);
    k[nf + 1 + i] = (int32_t)var_slot(ps, name.p, name.len);
  }
  free(name.p);
  cel_node *n = &p->nodes[id];
  n->op = N_QUAL;
  n->nargs = (uint16_t)nf;
  n->args = add_kids(ps, k, (size_t)(2 * nf + 1));
  return 0;
}

static int resolve(resolver *r, int32_t id) {
  parser *ps = r->ps;
  xgr_cel_program *p = ps->p;
  if (id < 0) return 0;
  if (++r->height > r->max_height) {
    ps->failed = true;
    xgr_error_set(ps->e, XGR_ELIMIT, NULL, "expression tree is deeper than %zu levels", r->max_height);
    return XGR_ELIMIT;
  }
  int rc = 0;
  cel_node n = p->nodes[id];
  switch ((node_op)n.op) {
    case N_IDENT: rc = resolve_ident(r, id); break;
    case N_SELECT:
      if (ps->o->mode == XGR_CEL_MODE_PLAIN && try_qualified(r, id) == 0) break;
      rc = resolve(r, n.a);
      break;
    case N_HAS: rc = resolve(r, n.a); break;
    case N_LIST: case N_CALL: case N_ERROR:
      for (uint32_t i = 0; i < n.nargs && !rc; i++) rc = resolve(r, p->kids[n.args + i]);
      break;
    case N_MAP:
      for (uint32_t i = 0; i < 2u * n.nargs && !rc; i++) rc = resolve(r, p->kids[n.args + i]);
      break;
    case N_COMP: {
      rc = resolve(r, n.a);
      if (rc) break;
      if (r->nsc >= 512) {
        ps->failed = true;
        rc = xgr_error_set(ps->e, XGR_ELIMIT, NULL, "too many nested comprehensions");
        break;
      }
      uint32_t slot = r->nlocal++;
      r->sc[r->nsc].name = (int32_t)n.slot;
      r->sc[r->nsc].slot = slot; /* relative: nvars is added after resolution */
      r->nsc++;
      p->nodes[id].slot = slot;
      rc = resolve(r, n.b);
      if (!rc) rc = resolve(r, n.c);
      r->nsc--;
      break;
    }
    default:
      if (n.a >= 0 && n.op != N_CONST && n.op != N_VAR && n.op != N_LOCAL) rc = resolve(r, n.a);
      if (!rc && n.b >= 0 && n.op != N_CONST && n.op != N_SELECT) rc = resolve(r, n.b);
      if (!rc && n.c >= 0) rc = resolve(r, n.c);
      break;
  }
  r->height--;
  return rc;
}

/* Number of nodes in the subtree at id (for the per-iteration cost of comprehensions). */
static uint32_t subtree_size(const xgr_cel_program *p, int32_t id, int depth) {
  if (id < 0 || depth > 2100) return 0;
  const cel_node *n = &p->nodes[id];
  uint32_t k = 1;
  switch ((node_op)n->op) {
    case N_CONST: case N_VAR: case N_LOCAL: case N_QUAL: case N_IDENT: return 1;
    case N_LIST: case N_CALL: case N_ERROR:
      for (uint32_t i = 0; i < n->nargs; i++) k += subtree_size(p, p->kids[n->args + i], depth + 1);
      return k;
    case N_MAP:
      for (uint32_t i = 0; i < 2u * n->nargs; i++) k += subtree_size(p, p->kids[n->args + i], depth + 1);
      return k;
    case N_SELECT: case N_HAS: return 1 + subtree_size(p, n->a, depth + 1);
    default:
      return k + subtree_size(p, n->a, depth + 1) + subtree_size(p, n->b, depth + 1) +
             subtree_size(p, n->c, depth + 1);
  }
}

/* After resolution, local slots are numbered after the free variables. */
static void fix_local_slots(xgr_cel_program *p) {
  for (uint32_t i = 0; i < p->nnodes; i++) {
    cel_node *n = &p->nodes[i];
    if (n->op == N_LOCAL) n->a += (int32_t)p->nvars;
    else if (n->op == N_COMP) {
      n->slot += p->nvars;
      uint32_t body = subtree_size(p, n->b, 0) + subtree_size(p, n->c, 0);
      n->nargs = (uint16_t)(body > 65535 ? 65535 : body);
    }
  }
}

/* Precompile constant patterns of matches(); compile errors are reported in non-PLAIN modes. */
static int precompile_regex(parser *ps) {
  xgr_cel_program *p = ps->p;
  for (uint32_t i = 0; i < p->nnodes; i++) {
    cel_node *n = &p->nodes[i];
    if (n->op != N_CALL || n->fn != F_MATCHES || n->nargs != 2) continue;
    const cel_node *pat = &p->nodes[p->kids[n->args + 1]];
    if (pat->op != N_CONST || p->consts[pat->a].kind != XGR_VSTRING) continue;
    xgr_value s = p->consts[pat->a];
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)s.as.s->data, s.as.s->len, PCRE2_UTF, &ec, &eo, NULL);
    if (!re) {
      if (ps->o->mode == XGR_CEL_MODE_PLAIN) continue; /* reported when evaluated */
      PCRE2_UCHAR msg[160];
      pcre2_get_error_message(ec, msg, sizeof msg);
      ps->failed = true;
      return xgr_error_set(ps->e, XGR_EEVAL, NULL, "at %u: invalid regular expression: %s", pat->pos,
                           (const char *)msg);
    }
    p->regex = xgr__xrealloc(p->regex, (p->nregex + 1) * sizeof *p->regex);
    p->regex[p->nregex] = re;
    n->c = (int32_t)p->nregex++;
  }
  return 0;
}

int xgr__cel_parse_into(xgr_cel_program *p, const char *src, size_t len, const xgr_cel_options *o,
                   xgr_error *e) {
  parser ps = {0};
  ps.s = src;
  ps.n = len;
  ps.p = p;
  ps.o = o;
  ps.e = e;
  ps.max_depth = o->max_depth ? o->max_depth : 250;
  lex(&ps);
  int32_t root = ps.failed ? -1 : p_expr(&ps);
  if (!ps.failed && ps.t.k != T_EOF) {
    char b[40];
    perr(&ps, ps.t.pos, "unexpected %s after the expression", tok_text(&ps, b, sizeof b));
  }
  xgr_value_clear(&ps.t.str);
  if (ps.failed) return e ? (e->code ? e->code : XGR_EPARSE) : XGR_EPARSE;
  if (o->max_ast_nodes && p->nnodes > o->max_ast_nodes)
    return xgr_error_set(e, XGR_ELIMIT, NULL,
                         "expression has %u AST nodes, MaxAstNodes is %zu (too complex)", p->nnodes,
                         o->max_ast_nodes);
  resolver r = {0};
  r.ps = &ps;
  r.max_height = 2000;
  if (resolve(&r, root)) return e ? e->code : XGR_EPARSE;
  p->nroots = p->nvars;
  /* qualified-name candidates are vars too; all vars count as roots for PLAIN (no "missing") */
  fix_local_slots(p);
  p->nslots = p->nvars + r.nlocal;
  p->root = (uint32_t)root;
  if (precompile_regex(&ps)) return e ? e->code : XGR_EEVAL;
  return 0;
}
