/* json.c — JSON <-> xgr_value. A small reader of its own (jansson cannot hold integers above
 * int64): integers stay exact (int, uint, bigint), numbers with a fraction or exponent become
 * doubles, object keys keep document order and duplicates are rejected. The writer prints numbers
 * exactly and keeps doubles recognisable as doubles ("2.0"). Conversions to and from jansson's
 * json_t are here too. */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "value/value_impl.h"
#include "xgr/json.h"

/* ---- reader ------------------------------------------------------------------------------- */


typedef struct jr {
  const char *s, *end, *p;
  unsigned flags;
  xgr_error *e;
} jr;

static int jr_fail(jr *r, const char *what) {
  size_t line = 1, col = 1;
  for (const char *q = r->s; q < r->p && q < r->end; q++) {
    if (*q == '\n') line++, col = 1;
    else col++;
  }
  return xgr_error_set(r->e, XGR_EPARSE, NULL, "invalid JSON at line %zu, column %zu: %s", line, col,
                       what);
}

static void jr_ws(jr *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static int hex4(const char *p, uint32_t *out) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
    else return -1;
  }
  *out = v;
  return 0;
}

static int jr_string(jr *r, xgr_buf *b) {
  r->p++; /* opening quote */
  for (;;) {
    if (r->p >= r->end) return jr_fail(r, "unterminated string");
    unsigned char c = (unsigned char)*r->p;
    if (c == '"') {
      r->p++;
      break;
    }
    if (c < 0x20) return jr_fail(r, "control character in string");
    if (c != '\\') {
      const char *q = r->p;
      while (q < r->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20) q++;
      xgr__buf_put(b, r->p, (size_t)(q - r->p));
      r->p = q;
      continue;
    }
    if (r->end - r->p < 2) return jr_fail(r, "unterminated string");
    char k = r->p[1];
    r->p += 2;
    switch (k) {
      case '"': xgr__buf_putc(b, '"'); break;
      case '\\': xgr__buf_putc(b, '\\'); break;
      case '/': xgr__buf_putc(b, '/'); break;
      case 'b': xgr__buf_putc(b, '\b'); break;
      case 'f': xgr__buf_putc(b, '\f'); break;
      case 'n': xgr__buf_putc(b, '\n'); break;
      case 'r': xgr__buf_putc(b, '\r'); break;
      case 't': xgr__buf_putc(b, '\t'); break;
      case 'u': {
        uint32_t cp;
        if (r->end - r->p < 4 || hex4(r->p, &cp)) return jr_fail(r, "bad \\u escape");
        r->p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t lo;
          if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' || hex4(r->p + 2, &lo) ||
              lo < 0xDC00 || lo > 0xDFFF)
            return jr_fail(r, "unpaired surrogate in \\u escape");
          r->p += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return jr_fail(r, "unpaired surrogate in \\u escape");
        }
        xgr__buf_put_utf8(b, cp);
        break;
      }
      default: return jr_fail(r, "bad escape in string");
    }
  }
  if (!xgr_utf8_valid(b->p ? b->p : "", b->len)) return jr_fail(r, "string is not valid UTF-8");
  return 0;
}

static int jr_number(jr *r, xgr_value *out) {
  const char *st = r->p;
  bool neg = false, frac = false;
  if (*r->p == '-') neg = true, r->p++;
  if (r->p >= r->end || *r->p < '0' || *r->p > '9') return jr_fail(r, "bad number");
  if (*r->p == '0') r->p++;
  else
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
  if (r->p < r->end && *r->p == '.') {
    frac = true;
    r->p++;
    if (r->p >= r->end || *r->p < '0' || *r->p > '9') return jr_fail(r, "bad number");
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
  }
  if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
    frac = true;
    r->p++;
    if (r->p < r->end && (*r->p == '+' || *r->p == '-')) r->p++;
    if (r->p >= r->end || *r->p < '0' || *r->p > '9') return jr_fail(r, "bad number");
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
  }
  size_t n = (size_t)(r->p - st);
  char buf[400];
  if (n >= sizeof buf) return jr_fail(r, "number too long");
  memcpy(buf, st, n);
  buf[n] = '\0';
  if (frac || (r->flags & XGR_JSON_NUMBERS_AS_DOUBLE)) {
    *out = xgr_value_double(strtod(buf, NULL));
    return 0;
  }
  /* exact integer */
  uint64_t u = 0;
  bool over = false;
  for (const char *q = buf + neg; *q; q++) {
    unsigned d = (unsigned)(*q - '0');
    if (u > (UINT64_MAX - d) / 10) {
      over = true;
      break;
    }
    u = u * 10 + d;
  }
  if (!over) {
    if (!neg && u <= INT64_MAX) *out = xgr_value_int((int64_t)u);
    else if (!neg) *out = xgr_value_uint(u);
    else if (u <= (uint64_t)INT64_MAX + 1) *out = xgr_value_int(u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u);
    else over = true;
    if (!over) return 0;
  }
  if (xgr_bigint_parse(buf, n, neg, out, NULL) == 0) return 0;
  *out = xgr_value_double(strtod(buf, NULL));
  return 0;
}

static int jr_value(jr *r, xgr_value *out, int depth);

static int jr_value(jr *r, xgr_value *out, int depth) {
  jr_ws(r);
  if (r->p >= r->end) return jr_fail(r, "unexpected end of input");
  char c = *r->p;
  if ((c == '{' || c == '[') && depth >= XGR_JSON_MAX_DEPTH) return jr_fail(r, "nesting deeper than 128");
  if (c == '{') {
    r->p++;
    xgr_value m = xgr_map_new(4);
    jr_ws(r);
    if (r->p < r->end && *r->p == '}') {
      r->p++;
      *out = m;
      return 0;
    }
    for (;;) {
      jr_ws(r);
      if (r->p >= r->end || *r->p != '"') {
        xgr_value_release(m);
        return jr_fail(r, "expected a string key");
      }
      xgr_buf kb = {0};
      if (jr_string(r, &kb)) {
        free(kb.p);
        xgr_value_release(m);
        return XGR_EPARSE;
      }
      size_t kl;
      char *ks = xgr__buf_finish(&kb, &kl);
      xgr_value dummy;
      if (xgr_map_get_str(m, ks, kl, &dummy)) {
        free(ks);
        xgr_value_release(m);
        return jr_fail(r, "duplicate object key");
      }
      jr_ws(r);
      if (r->p >= r->end || *r->p != ':') {
        free(ks);
        xgr_value_release(m);
        return jr_fail(r, "expected ':'");
      }
      r->p++;
      xgr_value v;
      if (jr_value(r, &v, depth + 1)) {
        free(ks);
        xgr_value_release(m);
        return XGR_EPARSE;
      }
      xgr_map_set_str(m, ks, kl, v);
      free(ks);
      jr_ws(r);
      if (r->p < r->end && *r->p == ',') {
        r->p++;
        continue;
      }
      if (r->p < r->end && *r->p == '}') {
        r->p++;
        *out = m;
        return 0;
      }
      xgr_value_release(m);
      return jr_fail(r, "expected ',' or '}'");
    }
  }
  if (c == '[') {
    r->p++;
    xgr_value l = xgr_list_new(4);
    jr_ws(r);
    if (r->p < r->end && *r->p == ']') {
      r->p++;
      *out = l;
      return 0;
    }
    for (;;) {
      xgr_value v;
      if (jr_value(r, &v, depth + 1)) {
        xgr_value_release(l);
        return XGR_EPARSE;
      }
      xgr_list_push(l, v);
      jr_ws(r);
      if (r->p < r->end && *r->p == ',') {
        r->p++;
        continue;
      }
      if (r->p < r->end && *r->p == ']') {
        r->p++;
        *out = l;
        return 0;
      }
      xgr_value_release(l);
      return jr_fail(r, "expected ',' or ']'");
    }
  }
  if (c == '"') {
    xgr_buf b = {0};
    if (jr_string(r, &b)) {
      free(b.p);
      return XGR_EPARSE;
    }
    *out = xgr_value_string(b.p ? b.p : "", b.len);
    free(b.p);
    return 0;
  }
  if (c == '-' || (c >= '0' && c <= '9')) return jr_number(r, out);
  static const struct { const char *w; size_t n; } lits[] = {{"true", 4}, {"false", 5}, {"null", 4}};
  for (int i = 0; i < 3; i++) {
    if ((size_t)(r->end - r->p) >= lits[i].n && memcmp(r->p, lits[i].w, lits[i].n) == 0) {
      r->p += lits[i].n;
      *out = i == 2 ? xgr_value_null() : xgr_value_bool(i == 0);
      return 0;
    }
  }
  return jr_fail(r, "unexpected character");
}

/* ---- depth scanner ------------------------------------------------------------------------ */

typedef struct dseg {
  bool arr;
  size_t idx;
  char key[48];
} dseg;

static void depth_path(const dseg *st, size_t n, char *out, size_t cap) {
  size_t k = 0;
  out[0] = 0;
  for (size_t i = 0; i < n && k + 1 < cap; i++) {
    char seg[64];
    int m = st[i].arr ? snprintf(seg, sizeof seg, "[%zu]", st[i].idx)
                      : snprintf(seg, sizeof seg, "%s%s", k ? "." : "", st[i].key);
    if (m < 0) m = 0;
    if (k + (size_t)m + 4 >= cap) {   /* no room: mark the cut */
      snprintf(out + k, cap - k, "...");
      return;
    }
    memcpy(out + k, seg, (size_t)m + 1);
    k += (size_t)m;
  }
}

/* The slow scan of xgr_json_check_depth: the same walk with the path of every open container, run
 * only once the fast one found the limit crossed. */
static int check_depth_path(const char *text, size_t len, size_t max, xgr_error *e) {
  dseg *st = xgr__xcalloc(max + 1, sizeof *st);
  size_t n = 0;
  char last[48] = "";
  int rc = 0;
  for (size_t i = 0; i < len && !rc; i++) {
    char c = text[i];
    if (c == '"') {
      size_t j = ++i, kl = 0;
      while (i < len && text[i] != '"') {
        if (text[i] == '\\') i++;
        i++;
      }
      if (i > len) i = len;   /* a text ending in a backslash inside a string */
      kl = i - j < sizeof last - 1 ? i - j : sizeof last - 1;
      memcpy(last, text + j, kl);
      last[kl] = 0;
    } else if (c == ':') {
      if (n && !st[n - 1].arr) snprintf(st[n - 1].key, sizeof st[n - 1].key, "%s", last);
    } else if (c == ',') {
      if (n && st[n - 1].arr) st[n - 1].idx++;
    } else if (c == '{' || c == '[') {
      if (n == max) {
        char path[XGR_PATH_MAX];
        depth_path(st, n, path, sizeof path);
        rc = xgr_error_set(e, XGR_ELIMIT, path, "is nested deeper than %zu levels (the limit of every JSON xgr reads)",
                           max);
        break;
      }
      st[n++] = (dseg){.arr = c == '['};
    } else if (c == '}' || c == ']') {
      if (n) n--;
    }
  }
  free(st);
  return rc;
}

int xgr_json_check_depth(const char *text, size_t len, size_t max, xgr_error *e) {
  assert(max > 0 && max <= 4096);
  /* every request body passes here: count only (no allocation, no key copies); the same walk as
   * check_depth_path, which names the path once the limit is crossed */
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    char c = text[i];
    if (c == '"') {
      i++;
      while (i < len && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
    } else if (c == '{' || c == '[') {
      if (n == max) return check_depth_path(text, len, max, e);
      n++;
    } else if ((c == '}' || c == ']') && n) {
      n--;
    }
  }
  return 0;
}

int xgr_value_from_json_text(const char *text, size_t len, unsigned flags, xgr_value *out,
                             xgr_error *e) {
  jr r = {text, text + len, text, flags, e};
  xgr_value v;
  if (jr_value(&r, &v, 0)) return XGR_EPARSE;
  jr_ws(&r);
  if (r.p != r.end) {
    xgr_value_release(v);
    return jr_fail(&r, "trailing characters after the value");
  }
  *out = v;
  return 0;
}

int xgr_value_from_json(const json_t *j, unsigned flags, xgr_value *out, xgr_error *e) {
  if (!j) return xgr_error_set(e, XGR_EINVAL, NULL, "no JSON value");
  switch (json_typeof(j)) {
    case JSON_NULL: *out = xgr_value_null(); return 0;
    case JSON_TRUE: *out = xgr_value_bool(true); return 0;
    case JSON_FALSE: *out = xgr_value_bool(false); return 0;
    case JSON_INTEGER:
      *out = (flags & XGR_JSON_NUMBERS_AS_DOUBLE) ? xgr_value_double((double)json_integer_value(j))
                                                  : xgr_value_int(json_integer_value(j));
      return 0;
    case JSON_REAL: *out = xgr_value_double(json_real_value(j)); return 0;
    case JSON_STRING:
      if (xgr_json_exact_integer(j, out)) return 0;
      *out = xgr_value_string(json_string_value(j), json_string_length(j));
      return 0;
    case JSON_ARRAY: {
      xgr_value l = xgr_list_new(json_array_size(j));
      for (size_t i = 0; i < json_array_size(j); i++) {
        xgr_value v;
        xgr_value_from_json(json_array_get(j, i), flags, &v, e);
        xgr_list_push(l, v);
      }
      *out = l;
      return 0;
    }
    case JSON_OBJECT: {
      xgr_value m = xgr_map_new(json_object_size(j));
      const char *k;
      json_t *v;
      json_object_foreach((json_t *)j, k, v) {
        xgr_value x;
        xgr_value_from_json(v, flags, &x, e);
        xgr_map_set_str(m, k, strlen(k), x);
      }
      *out = m;
      return 0;
    }
  }
  return xgr_error_set(e, XGR_EINVAL, NULL, "unknown JSON type");
}

/* ---- writer ------------------------------------------------------------------------------- */

void xgr__json_write_string(xgr_buf *b, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  xgr__buf_putc(b, '"');
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c != '"' && c != '\\') {
      run++;
      continue;
    }
    xgr__buf_put(b, s + i - run, run);
    run = 0;
    char esc[7] = {'\\', 0};
    switch (c) {
      case '"': esc[1] = '"'; xgr__buf_put(b, esc, 2); break;
      case '\\': esc[1] = '\\'; xgr__buf_put(b, esc, 2); break;
      case '\n': esc[1] = 'n'; xgr__buf_put(b, esc, 2); break;
      case '\r': esc[1] = 'r'; xgr__buf_put(b, esc, 2); break;
      case '\t': esc[1] = 't'; xgr__buf_put(b, esc, 2); break;
      default:
        memcpy(esc, "\\u00", 4);
        esc[4] = hex[c >> 4];
        esc[5] = hex[c & 15];
        xgr__buf_put(b, esc, 6);
    }
  }
  xgr__buf_put(b, s + n - run, run);
  xgr__buf_putc(b, '"');
}

static void b64(xgr_buf *b, const unsigned char *p, size_t n) {
  static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                 (i + 2 < n ? p[i + 2] : 0);
    char o[4] = {t[v >> 18], t[(v >> 12) & 63], i + 1 < n ? t[(v >> 6) & 63] : '=',
                 i + 2 < n ? t[v & 63] : '='};
    xgr__buf_put(b, o, 4);
  }
}

static void nl(xgr_buf *b, int indent) {
  if (indent < 0) return;
  xgr__buf_putc(b, '\n');
  for (int i = 0; i < indent; i++) xgr__buf_put(b, "  ", 2);
}

void xgr__json_write(xgr_buf *b, xgr_value v, unsigned flags, int indent) {
  char tmp[96];
  size_t n;
  switch (v.kind) {
    case XGR_VNULL: xgr__buf_puts(b, "null"); return;
    case XGR_VBOOL: xgr__buf_puts(b, v.as.b ? "true" : "false"); return;
    case XGR_VINT:
    case XGR_VUINT:
      n = xgr_bigint_to_dec(v, tmp, sizeof tmp);
      xgr__buf_put(b, tmp, n);
      return;
    case XGR_VDOUBLE:
      n = xgr_format_double(v.as.d, tmp, sizeof tmp);
      if (!isfinite(v.as.d)) {
        xgr__json_write_string(b, tmp, n);
        return;
      }
      xgr__buf_put(b, tmp, n);
      if (!strpbrk(tmp, ".eE")) xgr__buf_put(b, ".0", 2);
      return;
    case XGR_VSTRING: xgr__json_write_string(b, v.as.s->data, v.as.s->len); return;
    case XGR_VBYTES:
      xgr__buf_putc(b, '"');
      b64(b, (const unsigned char *)v.as.s->data, v.as.s->len);
      xgr__buf_putc(b, '"');
      return;
    case XGR_VBIGINT:
      n = xgr_bigint_to_dec(v, tmp, sizeof tmp);
      if (flags & XGR_JSON_BIGINT_NUMBERS) xgr__buf_put(b, tmp, n);
      else xgr__json_write_string(b, tmp, n);
      return;
    case XGR_VTYPE: {
      char *s = xgr_value_render(v, &n);
      xgr__json_write_string(b, s, n);
      free(s);
      return;
    }
    case XGR_VLIST: {
      xgr__buf_putc(b, '[');
      for (uint32_t i = 0; i < v.as.l->len; i++) {
        if (i) xgr__buf_putc(b, ',');
        nl(b, indent >= 0 ? indent + 1 : -1);
        xgr__json_write(b, v.as.l->items[i], flags, indent >= 0 ? indent + 1 : -1);
      }
      if (v.as.l->len) nl(b, indent);
      xgr__buf_putc(b, ']');
      return;
    }
    case XGR_VMAP: {
      xgr__buf_putc(b, '{');
      for (uint32_t i = 0; i < v.as.m->len; i++) {
        if (i) xgr__buf_putc(b, ',');
        nl(b, indent >= 0 ? indent + 1 : -1);
        xgr_value k = v.as.m->e[i].key;
        if (k.kind == XGR_VSTRING) xgr__json_write_string(b, k.as.s->data, k.as.s->len);
        else {
          char *s = xgr_value_render(k, &n);
          xgr__json_write_string(b, s, n);
          free(s);
        }
        xgr__buf_put(b, indent >= 0 ? ": " : ":", indent >= 0 ? 2 : 1);
        xgr__json_write(b, v.as.m->e[i].val, flags, indent >= 0 ? indent + 1 : -1);
      }
      if (v.as.m->len) nl(b, indent);
      xgr__buf_putc(b, '}');
      return;
    }
    default: xgr__buf_puts(b, "null"); return;
  }
}

char *xgr_value_to_json_text(xgr_value v, unsigned flags, size_t *len) {
  xgr_buf b = {0};
  xgr__json_write(&b, v, flags, (flags & XGR_JSON_PRETTY) ? 0 : -1);
  return xgr__buf_finish(&b, len);
}

json_t *xgr_value_to_json(xgr_value v) {
  char tmp[96];
  size_t n;
  switch (v.kind) {
    case XGR_VNULL: return json_null();
    case XGR_VBOOL: return json_boolean(v.as.b);
    case XGR_VINT: return json_integer(v.as.i);
    case XGR_VUINT:
      if (v.as.u <= INT64_MAX) return json_integer((json_int_t)v.as.u);
      n = xgr_bigint_to_dec(v, tmp, sizeof tmp);
      return json_stringn(tmp, n);
    case XGR_VDOUBLE:
      if (isfinite(v.as.d)) return json_real(v.as.d);
      n = xgr_format_double(v.as.d, tmp, sizeof tmp);
      return json_stringn(tmp, n);
    case XGR_VSTRING: return json_stringn(v.as.s->data, v.as.s->len);
    case XGR_VLIST: {
      json_t *a = json_array();
      for (uint32_t i = 0; i < v.as.l->len; i++) json_array_append_new(a, xgr_value_to_json(v.as.l->items[i]));
      return a;
    }
    case XGR_VMAP: {
      json_t *o = json_object();
      for (uint32_t i = 0; i < v.as.m->len; i++) {
        xgr_value k = v.as.m->e[i].key;
        char *ks = xgr_value_render(k, &n);
        json_object_setn_new(o, ks, n, xgr_value_to_json(v.as.m->e[i].val));
        free(ks);
      }
      return o;
    }
    default: {
      /* bytes (base64), bigint (decimal), type (name): their JSON text is a string */
      xgr_buf b = {0};
      xgr__json_write(&b, v, 0, -1);
      char *s = xgr__buf_finish(&b, &n);
      json_t *r = NULL;
      if (n >= 2 && s[0] == '"') {
        /* strip quotes; content has no escapes for these kinds */
        r = json_stringn(s + 1, n - 2);
      }
      free(s);
      return r ? r : json_null();
    }
  }
}

char *xgr_json_dumps(const json_t *j, unsigned flags) {
  if (!j) return NULL;
  xgr_value v;
  if (xgr_value_from_json(j, 0, &v, NULL)) return NULL;
  /* an exact integer node is a number in the tree it came from: it stays one, however large */
  char *s = xgr_value_to_json_text(v, (flags & XGR_JSON_PRETTY) | XGR_JSON_BIGINT_NUMBERS, NULL);
  xgr_value_release(v);
  return s;
}

/* ---- exact integers in jansson trees ------------------------------------------------------ */

/* Bytes 0xFF 0xFE cannot occur in UTF-8, and jansson only parses UTF-8: no client makes this. */
static const char exact_prefix[] = XGR_JSON_EXACT_PREFIX;
#define EXACT_PREFIX_LEN XGR_JSON_EXACT_PREFIX_LEN

static json_t *exact_node(xgr_value v) {
  char tmp[96 + EXACT_PREFIX_LEN];
  memcpy(tmp, exact_prefix, EXACT_PREFIX_LEN);
  size_t n = xgr_bigint_to_dec(v, tmp + EXACT_PREFIX_LEN, sizeof tmp - EXACT_PREFIX_LEN);
  return json_stringn_nocheck(tmp, EXACT_PREFIX_LEN + n);
}

bool xgr_json_exact_integer(const json_t *j, xgr_value *out) {
  if (!xgr_json_is_exact(j)) return false;
  size_t n = json_string_length(j);
  const char *s = json_string_value(j);
  s += EXACT_PREFIX_LEN;
  n -= EXACT_PREFIX_LEN;
  xgr_value v;
  if (xgr_value_from_json_text(s, n, 0, &v, NULL)) return false;   /* digits: the reader is exact */
  if (v.kind != XGR_VINT && v.kind != XGR_VUINT && v.kind != XGR_VBIGINT) {
    xgr_value_release(v);
    return false;
  }
  *out = v;
  return true;
}

json_t *xgr_value_to_json_exact(xgr_value v) {
  switch (v.kind) {
    case XGR_VUINT:
      if (v.as.u <= INT64_MAX) return json_integer((json_int_t)v.as.u);
      return exact_node(v);
    case XGR_VBIGINT: return exact_node(v);
    case XGR_VLIST: {
      json_t *a = json_array();
      for (uint32_t i = 0; i < v.as.l->len; i++) json_array_append_new(a, xgr_value_to_json_exact(v.as.l->items[i]));
      return a;
    }
    case XGR_VMAP: {
      json_t *o = json_object();
      for (uint32_t i = 0; i < v.as.m->len; i++) {
        size_t n;
        char *ks = xgr_value_render(v.as.m->e[i].key, &n);
        json_object_setn_new(o, ks, n, xgr_value_to_json_exact(v.as.m->e[i].val));
        free(ks);
      }
      return o;
    }
    default: return xgr_value_to_json(v);
  }
}

/* ---- the common case of jansson's reader, without jansson's lexer ---------------------------- */

/* xgrd parses every request body with jansson; its lexer reads byte by byte through a stream and a
 * string buffer, which made a permit-carrying body (~1 KB) cost ~10 us of lexing alone. This reader
 * builds the same tree for the texts that are the common case and declines (NULL) everything else,
 * which then goes to jansson exactly as before: strings without escapes or control characters,
 * integers of at most 18 digits (no fraction or exponent), true/false/null, objects and arrays at
 * most XGR_JSON_MAX_DEPTH deep, an object or an array at the top, whitespace around. A duplicate
 * key, invalid UTF-8, anything jansson refuses and anything it reads differently is declined, so
 * errors and their messages stay jansson's (tests/fuzz/fuzz_json_exact compares the two trees). */
typedef struct fr {
  const char *p, *end;
} fr;

static void fr_ws(fr *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t')) r->p++;
}

/* At a '"': the string's bytes when it has no escape and no control character and is UTF-8. */
static bool fr_str(fr *r, const char **s, size_t *n) {
  const char *q = r->p + 1;
  unsigned char high = 0;   /* any byte >= 0x80: then the UTF-8 check (ASCII is UTF-8) */
  while (q < r->end && *q != '"') {
    unsigned char c = (unsigned char)*q;
    if (c < 0x20 || c == '\\') return false;
    high |= c;
    q++;
  }
  if (q >= r->end || ((high & 0x80) && !xgr_utf8_valid(r->p + 1, (size_t)(q - r->p - 1)))) return false;
  *s = r->p + 1;
  *n = (size_t)(q - r->p - 1);
  r->p = q + 1;
  return true;
}

static json_t *fr_value(fr *r, unsigned depth);

static json_t *fr_object(fr *r, unsigned depth) {
  json_t *o = json_object();
  r->p++;
  fr_ws(r);
  if (r->p < r->end && *r->p == '}') {
    r->p++;
    return o;
  }
  for (;;) {
    const char *k;
    size_t kn;
    if (r->p >= r->end || *r->p != '"' || !fr_str(r, &k, &kn)) break;
    fr_ws(r);
    if (r->p >= r->end || *r->p != ':') break;
    r->p++;
    fr_ws(r);
    json_t *v = fr_value(r, depth + 1);
    if (!v) break;
    size_t had = json_object_size(o);
    /* a duplicate key (jansson's error) replaces the value instead of adding one: no lookup first */
    if (json_object_setn_new_nocheck(o, k, kn, v) || json_object_size(o) == had) break;
    fr_ws(r);
    if (r->p < r->end && *r->p == ',') {
      r->p++;
      fr_ws(r);
      continue;
    }
    if (r->p < r->end && *r->p == '}') {
      r->p++;
      return o;
    }
    break;
  }
  json_decref(o);
  return NULL;
}

static json_t *fr_array(fr *r, unsigned depth) {
  json_t *a = json_array();
  r->p++;
  fr_ws(r);
  if (r->p < r->end && *r->p == ']') {
    r->p++;
    return a;
  }
  for (;;) {
    json_t *v = fr_value(r, depth + 1);
    if (!v || json_array_append_new(a, v)) break;
    fr_ws(r);
    if (r->p < r->end && *r->p == ',') {
      r->p++;
      fr_ws(r);
      continue;
    }
    if (r->p < r->end && *r->p == ']') {
      r->p++;
      return a;
    }
    break;
  }
  json_decref(a);
  return NULL;
}

static json_t *fr_value(fr *r, unsigned depth) {
  if (r->p >= r->end) return NULL;
  char c = *r->p;
  if (c == '{' || c == '[') {
    if (depth >= XGR_JSON_MAX_DEPTH) return NULL;
    return c == '{' ? fr_object(r, depth) : fr_array(r, depth);
  }
  if (c == '"') {
    const char *s;
    size_t n;
    return fr_str(r, &s, &n) ? json_stringn_nocheck(s, n) : NULL;
  }
  static const struct {
    const char *word;
    size_t n;
  } lits[] = {{"true", 4}, {"false", 5}, {"null", 4}};
  for (size_t i = 0; i < 3; i++)
    if ((size_t)(r->end - r->p) >= lits[i].n && !memcmp(r->p, lits[i].word, lits[i].n)) {
      r->p += lits[i].n;
      return i == 0 ? json_true() : i == 1 ? json_false() : json_null();
    }
  const char *q = r->p;
  bool neg = q < r->end && *q == '-';
  if (neg) q++;
  const char *d = q;
  if (q < r->end && *q == '0') q++;
  else
    while (q < r->end && *q >= '0' && *q <= '9') q++;
  if (q == d || q - d > 18) return NULL;
  if (q < r->end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E')) return NULL;
  json_int_t v = 0;
  for (const char *x = d; x < q; x++) v = v * 10 + (*x - '0');
  r->p = q;
  return json_integer(neg ? -v : v);
}

json_t *xgr__json_parse_fast(const char *text, size_t len) {
  fr r = {text, text + len};
  fr_ws(&r);
  if (r.p >= r.end || (*r.p != '{' && *r.p != '[')) return NULL;   /* jansson wants a container on top */
  json_t *j = fr_value(&r, 0);
  fr_ws(&r);
  if (j && r.p != r.end) {
    json_decref(j);
    return NULL;
  }
  return j;
}

int xgr_json_parse_exact(const char *text, size_t len, json_t **out, xgr_error *e) {
  json_error_t je;
  json_t *fast = xgr__json_parse_fast(text, len);
  if (fast) {
    *out = fast;
    return 0;
  }
  json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
  if (j) {
    *out = j;
    return 0;
  }
  if (!strstr(je.text, "too big integer"))
    return xgr_error_set(e, XGR_EPARSE, NULL, "invalid JSON at line %d, column %d: %s", je.line, je.column, je.text);
  /* integers beyond int64: the exact reader, then a tree with exact integer nodes */
  xgr_value v;
  if (xgr_value_from_json_text(text, len, 0, &v, e)) return XGR_EPARSE;
  *out = xgr_value_to_json_exact(v);
  xgr_value_release(v);
  return 0;
}

static bool has_exact(const json_t *j) {
  size_t i;
  const char *k;
  json_t *v;
  switch (json_typeof(j)) {
    case JSON_STRING: {
      xgr_value x;
      if (!xgr_json_exact_integer(j, &x)) return false;
      xgr_value_release(x);
      return true;
    }
    case JSON_ARRAY:
      json_array_foreach(j, i, v) if (has_exact(v)) return true;
      return false;
    case JSON_OBJECT:
      json_object_foreach((json_t *)j, k, v) if (has_exact(v)) return true;
      return false;
    default: return false;
  }
}

char *xgr_json_dumps_compact(const json_t *j) {
  if (!j) return NULL;
  if (!has_exact(j)) return json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
  return xgr_json_dumps(j, 0);
}
