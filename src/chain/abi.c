/* abi.c — Solidity ABI types, signatures, encoding and decoding (xgr/abi.h).
 *
 * A type is a small tree (tuples and arrays point to their components). Encoding follows the
 * head/tail layout of the Solidity ABI specification: static components inline in the head,
 * dynamic ones as an offset into the tail. Decoding walks the same layout over untrusted bytes:
 * every word that is used as an offset or length is checked to fit in 64 bits and inside the
 * region it points into before anything is read or allocated, static words are checked for
 * canonical padding, and a per-call budget bounds the values produced and the bytes copied so
 * that offsets pointing at shared regions cannot multiply the work.
 */
#include <assert.h>
#include <gmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "value/value_impl.h"
#include "xgr/abi.h"
#include "xgr/keccak.h"
#include "xgr/secp.h"
#include "xgr/xrc_types.h"

typedef enum tkind { T_UINT, T_INT, T_ADDRESS, T_BOOL, T_FBYTES, T_BYTES, T_STRING, T_ARRAY, T_FARRAY, T_TUPLE } tkind;

#define MAX_STATIC_SIZE (16u << 20) /* bytes of one static type's head */

struct xgr_abi_type {
  tkind k;
  unsigned size;              /* bits of uintN/intN, N of bytesN */
  size_t len;                 /* k of T[k] */
  xgr_abi_type *elem;         /* T of T[] / T[k] */
  size_t n;                   /* tuple components */
  xgr_abi_type **items;
  bool dynamic;
  size_t head;                /* bytes in the enclosing head: the static size, or 32 when dynamic */
};

/* ---- hex --------------------------------------------------------------------------------------- */

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

uint8_t *xgr_hex_decode_alloc(const char *s, size_t len, size_t *outlen) {
  if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s += 2, len -= 2;
  if (len % 2) return NULL;
  uint8_t *p = xgr__xmalloc(len / 2 + 1);
  for (size_t i = 0; i < len / 2; i++) {
    int a = hexval(s[2 * i]), b = hexval(s[2 * i + 1]);
    if (a < 0 || b < 0) {
      free(p);
      return NULL;
    }
    p[i] = (uint8_t)(a << 4 | b);
  }
  *outlen = len / 2;
  return p;
}

char *xgr_hex_encode_alloc(const uint8_t *p, size_t n) {
  char *s = xgr__xmalloc(2 * n + 3);
  xgr_hex_encode(p, n, s);
  return s;
}

/* ---- types ------------------------------------------------------------------------------------- */

void xgr_abi_type_free(xgr_abi_type *t) {
  if (!t) return;
  xgr_abi_type_free(t->elem);
  for (size_t i = 0; i < t->n; i++) xgr_abi_type_free(t->items[i]);
  free(t->items);
  free(t);
}

static xgr_abi_type *new_type(tkind k) {
  xgr_abi_type *t = xgr__xcalloc(1, sizeof *t);
  t->k = k;
  t->head = 32;
  return t;
}

/* Compute dynamic/head of a tuple; false when the static size exceeds MAX_STATIC_SIZE. */
static bool finish_tuple(xgr_abi_type *t) {
  size_t sum = 0;
  t->dynamic = false;
  for (size_t i = 0; i < t->n; i++) t->dynamic = t->dynamic || t->items[i]->dynamic;
  for (size_t i = 0; i < t->n; i++) {
    sum += t->items[i]->head;
    if (sum > MAX_STATIC_SIZE) return false;
  }
  t->head = t->dynamic ? 32 : sum;
  return true;
}

xgr_abi_type *xgr_abi_tuple_new(xgr_abi_type **take_items, size_t n) {
  xgr_abi_type *t = new_type(T_TUPLE);
  t->n = n;
  t->items = xgr__xcalloc(n ? n : 1, sizeof *t->items);
  for (size_t i = 0; i < n; i++) t->items[i] = take_items[i];
  if (!finish_tuple(t)) {
    xgr_abi_type_free(t);
    return NULL;
  }
  return t;
}

size_t xgr_abi_tuple_size(const xgr_abi_type *t) { return t && t->k == T_TUPLE ? t->n : 0; }

typedef struct parser {
  const char *s;
  size_t len, pos;
  xgr_error *e;
} parser;

static void skip_ws(parser *p) {
  while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t')) p->pos++;
}

static int perr(parser *p, const char *what) {
  if (p->pos < p->len)
    return xgr_error_set(p->e, XGR_EPARSE, NULL, "ABI signature \"%.*s\": at offset %zu ('%c'): expected %s",
                         (int)(p->len > 200 ? 200 : p->len), p->s, p->pos, p->s[p->pos], what);
  return xgr_error_set(p->e, XGR_EPARSE, NULL, "ABI signature \"%.*s\": unexpected end: expected %s",
                       (int)(p->len > 200 ? 200 : p->len), p->s, what);
}

static bool parse_num(const char *s, size_t n, unsigned long *out) {
  if (n == 0 || n > 6 || (n > 1 && s[0] == '0')) return false;
  unsigned long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (unsigned long)(s[i] - '0');
  }
  *out = v;
  return true;
}

static int parse_type(parser *p, int depth, xgr_abi_type **out);

static int parse_tuple(parser *p, int depth, xgr_abi_type **out) {
  if (depth > XGR_ABI_MAX_DEPTH)
    return xgr_error_set(p->e, XGR_ELIMIT, NULL, "ABI type nests deeper than %d levels", XGR_ABI_MAX_DEPTH);
  skip_ws(p);
  if (p->pos >= p->len || p->s[p->pos] != '(') return perr(p, "'('");
  p->pos++;
  xgr_abi_type *items[XGR_ABI_MAX_TUPLE];
  size_t n = 0;
  skip_ws(p);
  int rc = 0;
  if (p->pos < p->len && p->s[p->pos] == ')') {
    p->pos++;
  } else {
    for (;;) {
      if (n == XGR_ABI_MAX_TUPLE) {
        rc = xgr_error_set(p->e, XGR_ELIMIT, NULL, "ABI tuple has more than %d components", XGR_ABI_MAX_TUPLE);
        break;
      }
      rc = parse_type(p, depth + 1, &items[n]);
      if (rc) break;
      n++;
      skip_ws(p);
      if (p->pos < p->len && p->s[p->pos] == ',') {
        p->pos++;
        continue;
      }
      if (p->pos < p->len && p->s[p->pos] == ')') {
        p->pos++;
        break;
      }
      rc = perr(p, "',' or ')'");
      break;
    }
  }
  if (rc) {
    for (size_t i = 0; i < n; i++) xgr_abi_type_free(items[i]);
    return rc;
  }
  *out = xgr_abi_tuple_new(items, n);
  if (!*out) return xgr_error_set(p->e, XGR_ELIMIT, NULL, "ABI tuple is larger than %u bytes", MAX_STATIC_SIZE);
  return 0;
}

static int parse_elementary(parser *p, xgr_abi_type **out) {
  size_t st = p->pos;
  while (p->pos < p->len && ((p->s[p->pos] >= 'a' && p->s[p->pos] <= 'z') || (p->s[p->pos] >= '0' && p->s[p->pos] <= '9')))
    p->pos++;
  const char *w = p->s + st;
  size_t n = p->pos - st;
  unsigned long num = 0;
  xgr_abi_type *t = NULL;
#define IS(lit) (n == sizeof(lit) - 1 && !memcmp(w, lit, n))
  if (IS("address")) t = new_type(T_ADDRESS);
  else if (IS("bool")) t = new_type(T_BOOL);
  else if (IS("string")) t = new_type(T_STRING), t->dynamic = true;
  else if (IS("bytes")) t = new_type(T_BYTES), t->dynamic = true;
  else if (IS("uint") || IS("int")) t = new_type(w[0] == 'u' ? T_UINT : T_INT), t->size = 256;
  else if (n > 4 && !memcmp(w, "uint", 4) && parse_num(w + 4, n - 4, &num) && num >= 8 && num <= 256 && num % 8 == 0)
    t = new_type(T_UINT), t->size = (unsigned)num;
  else if (n > 3 && !memcmp(w, "int", 3) && parse_num(w + 3, n - 3, &num) && num >= 8 && num <= 256 && num % 8 == 0)
    t = new_type(T_INT), t->size = (unsigned)num;
  else if (n > 5 && !memcmp(w, "bytes", 5) && parse_num(w + 5, n - 5, &num) && num >= 1 && num <= 32)
    t = new_type(T_FBYTES), t->size = (unsigned)num;
#undef IS
  if (!t) {
    p->pos = st;
    return perr(p, "an ABI type (uint<N>, int<N>, address, bool, bytes<N>, bytes, string, a tuple)");
  }
  *out = t;
  return 0;
}

static int parse_type(parser *p, int depth, xgr_abi_type **out) {
  if (depth > XGR_ABI_MAX_DEPTH)
    return xgr_error_set(p->e, XGR_ELIMIT, NULL, "ABI type nests deeper than %d levels", XGR_ABI_MAX_DEPTH);
  skip_ws(p);
  xgr_abi_type *t = NULL;
  int rc = (p->pos < p->len && p->s[p->pos] == '(') ? parse_tuple(p, depth, &t) : parse_elementary(p, &t);
  if (rc) return rc;
  while (p->pos < p->len && p->s[p->pos] == '[') {
    if (++depth > XGR_ABI_MAX_DEPTH) {
      xgr_abi_type_free(t);
      return xgr_error_set(p->e, XGR_ELIMIT, NULL, "ABI type nests deeper than %d levels", XGR_ABI_MAX_DEPTH);
    }
    p->pos++;
    size_t st = p->pos;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    if (p->pos >= p->len || p->s[p->pos] != ']') {
      xgr_abi_type_free(t);
      return perr(p, "']'");
    }
    xgr_abi_type *a;
    if (p->pos == st) {
      a = new_type(T_ARRAY);
      a->dynamic = true;
    } else {
      unsigned long k;
      if (!parse_num(p->s + st, p->pos - st, &k) || k == 0 || k > XGR_ABI_MAX_FIXED) {
        p->pos = st;
        xgr_abi_type_free(t);
        return xgr_error_set(p->e, XGR_ELIMIT, NULL, "ABI fixed array length \"%.*s\": expected 1..%d",
                             (int)(p->pos < p->len ? 8 : 0), p->s + st, XGR_ABI_MAX_FIXED);
      }
      a = new_type(T_FARRAY);
      a->len = k;
      a->dynamic = t->dynamic;
      if (!t->dynamic) {
        if (t->head > MAX_STATIC_SIZE / k) {
          xgr_abi_type_free(t);
          free(a);
          return xgr_error_set(p->e, XGR_ELIMIT, NULL, "ABI fixed array is larger than %u bytes", MAX_STATIC_SIZE);
        }
        a->head = t->head * k;
      }
    }
    p->pos++;
    a->elem = t;
    t = a;
  }
  *out = t;
  return 0;
}

int xgr_abi_type_parse(const char *s, size_t len, xgr_abi_type **out, xgr_error *e) {
  *out = NULL;
  if (len > XGR_ABI_MAX_SIG_LEN)
    return xgr_error_set(e, XGR_ELIMIT, NULL, "ABI type is %zu bytes; the maximum is %d", len, XGR_ABI_MAX_SIG_LEN);
  parser p = {s, len, 0, e};
  xgr_abi_type *t = NULL;
  int rc = parse_type(&p, 0, &t);
  if (rc) return rc;
  skip_ws(&p);
  if (p.pos != p.len) {
    xgr_abi_type_free(t);
    return perr(&p, "the end of the type");
  }
  *out = t;
  return 0;
}

static void type_text(xgr_buf *b, const xgr_abi_type *t) {
  switch (t->k) {
    case T_UINT: xgr__buf_printf(b, "uint%u", t->size); break;
    case T_INT: xgr__buf_printf(b, "int%u", t->size); break;
    case T_ADDRESS: xgr__buf_puts(b, "address"); break;
    case T_BOOL: xgr__buf_puts(b, "bool"); break;
    case T_FBYTES: xgr__buf_printf(b, "bytes%u", t->size); break;
    case T_BYTES: xgr__buf_puts(b, "bytes"); break;
    case T_STRING: xgr__buf_puts(b, "string"); break;
    case T_ARRAY: type_text(b, t->elem); xgr__buf_puts(b, "[]"); break;
    case T_FARRAY: type_text(b, t->elem); xgr__buf_printf(b, "[%zu]", t->len); break;
    case T_TUPLE:
      xgr__buf_putc(b, '(');
      for (size_t i = 0; i < t->n; i++) {
        if (i) xgr__buf_putc(b, ',');
        type_text(b, t->items[i]);
      }
      xgr__buf_putc(b, ')');
      break;
  }
}

char *xgr_abi_type_text(const xgr_abi_type *t) {
  xgr_buf b = {0};
  type_text(&b, t);
  return xgr__buf_finish(&b, NULL);
}

void xgr_abi_sig_free(xgr_abi_sig *s) {
  if (!s) return;
  free(s->name);
  free(s->canonical);
  xgr_abi_type_free(s->inputs);
  xgr_abi_type_free(s->outputs);
  free(s);
}

static bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$'; }

int xgr_abi_sig_parse(const char *sig, size_t len, xgr_abi_sig **out, xgr_error *e) {
  *out = NULL;
  if (len > XGR_ABI_MAX_SIG_LEN)
    return xgr_error_set(e, XGR_ELIMIT, NULL, "ABI signature is %zu bytes; the maximum is %d", len, XGR_ABI_MAX_SIG_LEN);
  parser p = {sig, len, 0, e};
  skip_ws(&p);
  size_t st = p.pos;
  if (p.pos >= len || !ident_start(sig[p.pos])) return perr(&p, "a function name");
  while (p.pos < len && (ident_start(sig[p.pos]) || (sig[p.pos] >= '0' && sig[p.pos] <= '9'))) p.pos++;
  xgr_abi_sig *s = xgr__xcalloc(1, sizeof *s);
  s->name = xgr__xmalloc(p.pos - st + 1);
  memcpy(s->name, sig + st, p.pos - st);
  s->name[p.pos - st] = 0;
  int rc = parse_tuple(&p, 0, &s->inputs);
  if (!rc) {
    skip_ws(&p);
    if (p.pos < len && sig[p.pos] == '(') rc = parse_tuple(&p, 0, &s->outputs);
  }
  if (!rc) {
    skip_ws(&p);
    if (p.pos != len) rc = perr(&p, "the end of the signature");
  }
  if (rc) {
    xgr_abi_sig_free(s);
    return rc;
  }
  xgr_buf b = {0};
  xgr__buf_puts(&b, s->name);
  type_text(&b, s->inputs);
  size_t cl;
  s->canonical = xgr__buf_finish(&b, &cl);
  uint8_t h[32];
  xgr_keccak256(s->canonical, cl, h);
  memcpy(s->selector, h, 4);
  *out = s;
  return 0;
}

/* ---- encoding ---------------------------------------------------------------------------------- */

typedef struct encoder {
  xgr_error *e;
  char path[160];
  size_t plen;
} encoder;

static size_t path_push(encoder *en, size_t i) {
  size_t old = en->plen;
  int n = snprintf(en->path + old, sizeof en->path - old, "[%zu]", i);
  if (n > 0 && (size_t)n < sizeof en->path - old) en->plen += (size_t)n;
  return old;
}

static void path_pop(encoder *en, size_t old) {
  en->plen = old;
  en->path[old] = 0;
}

static int enc_fail(encoder *en, const xgr_abi_type *t, xgr_value v, const char *why) {
  char *tt = xgr_abi_type_text(t);
  char *vt = xgr_value_render(v, NULL);
  int rc = xgr_error_set(en->e, XGR_EINVAL, en->path, "ABI argument %s: %.120s %s for %s: %s", en->plen ? en->path : "",
                         vt, xgr_value_kind_name(v), tt, why);
  free(tt);
  free(vt);
  return rc;
}

static void put_zero(xgr_buf *b, size_t n) {
  static const uint8_t z[32];
  while (n) {
    size_t k = n < 32 ? n : 32;
    xgr__buf_put(b, z, k);
    n -= k;
  }
}

static void put_u64_word(xgr_buf *b, uint64_t v) {
  uint8_t w[32] = {0};
  for (int i = 0; i < 8; i++) w[31 - i] = (uint8_t)(v >> (8 * i));
  xgr__buf_put(b, w, 32);
}

/* Bytes of a bytes-like value: BYTES as is, STRING as 0x-hex. Caller frees *owned. */
static bool bytes_of(xgr_value v, const uint8_t **p, size_t *n, uint8_t **owned) {
  *owned = NULL;
  size_t sl;
  const char *s = xgr_value_str(v, &sl);
  if (v.kind == XGR_VBYTES) {
    *p = (const uint8_t *)s;
    *n = sl;
    return true;
  }
  if (v.kind != XGR_VSTRING || sl < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  *owned = xgr_hex_decode_alloc(s, sl, n);
  *p = *owned;
  return *owned != NULL;
}

static int enc_int(encoder *en, const xgr_abi_type *t, xgr_value v, xgr_buf *b) {
  bool sign = t->k == T_INT;
  mpz_t z;
  mpz_init(z);
  bool ok = xgr__to_mpz(v, z);
  if (!ok && v.kind == XGR_VSTRING) {
    size_t sl;
    const char *s = xgr_value_str(v, &sl);
    xgr_value tmp;
    if (xgr_bigint_parse(s, sl, sign, &tmp, NULL) == 0) {
      ok = xgr__to_mpz(tmp, z);
      xgr_value_release(tmp);
    }
  }
  if (!ok) {
    mpz_clear(z);
    return enc_fail(en, t, v, "expected an integer or a decimal / 0x-hex string");
  }
  bool in = true;
  if (!sign) in = mpz_sgn(z) >= 0 && mpz_sizeinbase(z, 2) <= t->size;
  else {
    mpz_t lim;
    mpz_init(lim);
    mpz_ui_pow_ui(lim, 2, t->size - 1);
    if (mpz_cmp(z, lim) >= 0) in = false;
    mpz_neg(lim, lim);
    if (mpz_cmp(z, lim) < 0) in = false;
    mpz_clear(lim);
  }
  if (!in) {
    mpz_clear(z);
    return enc_fail(en, t, v, "out of range");
  }
  uint8_t w[32];
  if (mpz_sgn(z) < 0) {
    mpz_t two;
    mpz_init(two);
    mpz_ui_pow_ui(two, 2, 256);
    mpz_add(z, z, two);
    mpz_clear(two);
  }
  memset(w, 0, 32);
  size_t cnt = 0;
  uint8_t tmpw[32];
  mpz_export(tmpw, &cnt, 1, 1, 1, 0, z);
  assert(cnt <= 32);
  memcpy(w + 32 - cnt, tmpw, cnt);
  mpz_clear(z);
  xgr__buf_put(b, w, 32);
  return 0;
}

static int enc_value(encoder *en, const xgr_abi_type *t, xgr_value v, xgr_buf *b, int depth);

/* Encode n components (tuple items, or n elements of t->elem) from vals[] or from a LIST. */
static int enc_seq(encoder *en, const xgr_abi_type *t, const xgr_value *vals, xgr_value list, size_t n, xgr_buf *out,
                   int depth) {
  size_t headsz = 0;
  for (size_t i = 0; i < n; i++) headsz += (t->k == T_TUPLE ? t->items[i] : t->elem)->head;
  xgr_buf heads = {0}, tails = {0};
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    const xgr_abi_type *it = t->k == T_TUPLE ? t->items[i] : t->elem;
    xgr_value v = vals ? vals[i] : xgr_list_get(list, i);
    size_t old = path_push(en, i);
    if (it->dynamic) {
      put_u64_word(&heads, headsz + tails.len);
      rc = enc_value(en, it, v, &tails, depth + 1);
    } else {
      rc = enc_value(en, it, v, &heads, depth + 1);
    }
    if (!rc) path_pop(en, old);
  }
  if (!rc) {
    xgr__buf_put(out, heads.p, heads.len);
    xgr__buf_put(out, tails.p, tails.len);
  }
  free(heads.p);
  free(tails.p);
  return rc;
}

static int enc_value(encoder *en, const xgr_abi_type *t, xgr_value v, xgr_buf *b, int depth) {
  assert(depth <= 2 * XGR_ABI_MAX_DEPTH + 2);
  switch (t->k) {
    case T_UINT:
    case T_INT: return enc_int(en, t, v, b);
    case T_BOOL:
      if (v.kind != XGR_VBOOL) return enc_fail(en, t, v, "expected a bool");
      put_u64_word(b, v.as.b ? 1 : 0);
      return 0;
    case T_ADDRESS: {
      const uint8_t *p;
      size_t n;
      uint8_t *own = NULL;
      size_t sl;
      const char *s = xgr_value_str(v, &sl);
      bool ok = (v.kind == XGR_VBYTES || (v.kind == XGR_VSTRING && xgr_xrc_is_address(s, sl))) && bytes_of(v, &p, &n, &own) && n == 20;
      if (!ok) {
        free(own);
        return enc_fail(en, t, v, "expected \"0x\" + 40 hex digits");
      }
      put_zero(b, 12);
      xgr__buf_put(b, p, 20);
      free(own);
      return 0;
    }
    case T_FBYTES:
    case T_BYTES:
    case T_STRING: {
      const uint8_t *p;
      size_t n;
      uint8_t *own = NULL;
      if (t->k == T_STRING) {
        if (v.kind != XGR_VSTRING) return enc_fail(en, t, v, "expected a string");
        p = (const uint8_t *)xgr_value_str(v, &n);
      } else if (!bytes_of(v, &p, &n, &own)) {
        return enc_fail(en, t, v, "expected bytes or a \"0x\" hex string");
      }
      if (t->k == T_FBYTES) {
        if (n != t->size) {
          free(own);
          return enc_fail(en, t, v, "wrong length");
        }
        xgr__buf_put(b, p, n);
        put_zero(b, 32 - n);
      } else {
        put_u64_word(b, n);
        xgr__buf_put(b, p, n);
        put_zero(b, (32 - n % 32) % 32);
      }
      free(own);
      return 0;
    }
    case T_ARRAY:
      if (v.kind != XGR_VLIST) return enc_fail(en, t, v, "expected a list");
      put_u64_word(b, xgr_list_size(v));
      return enc_seq(en, t, NULL, v, xgr_list_size(v), b, depth);
    case T_FARRAY:
      if (v.kind != XGR_VLIST || xgr_list_size(v) != t->len) return enc_fail(en, t, v, "expected a list of that length");
      return enc_seq(en, t, NULL, v, t->len, b, depth);
    case T_TUPLE:
      if (v.kind != XGR_VLIST || xgr_list_size(v) != t->n) return enc_fail(en, t, v, "expected a list with one value per component");
      return enc_seq(en, t, NULL, v, t->n, b, depth);
  }
  return enc_fail(en, t, v, "unknown type");
}

int xgr_abi_encode(const xgr_abi_type *tuple, const xgr_value *vals, size_t n, uint8_t **out, size_t *outlen,
                   xgr_error *e) {
  *out = NULL;
  *outlen = 0;
  assert(tuple && tuple->k == T_TUPLE);
  if (n != tuple->n) {
    char *tt = xgr_abi_type_text(tuple);
    int rc = xgr_error_set(e, XGR_EINVAL, NULL, "ABI arguments: %zu given, %s takes %zu", n, tt, tuple->n);
    free(tt);
    return rc;
  }
  encoder en = {.e = e};
  xgr_buf b = {0};
  int rc = enc_seq(&en, tuple, vals, xgr_value_null(), n, &b, 0);
  if (rc) {
    free(b.p);
    return rc;
  }
  if (!b.p) xgr__buf_put(&b, "", 0);
  *out = (uint8_t *)b.p;
  *outlen = b.len;
  return 0;
}

int xgr_abi_encode_call(const xgr_abi_sig *sig, const xgr_value *args, size_t n, uint8_t **out, size_t *outlen,
                        xgr_error *e) {
  uint8_t *body;
  size_t bl;
  int rc = xgr_abi_encode(sig->inputs, args, n, &body, &bl, e);
  if (rc) return rc;
  uint8_t *p = xgr__xmalloc(bl + 4);
  memcpy(p, sig->selector, 4);
  memcpy(p + 4, body, bl);
  free(body);
  *out = p;
  *outlen = bl + 4;
  return 0;
}

/* ---- decoding ---------------------------------------------------------------------------------- */

typedef struct decoder {
  const uint8_t *start;       /* for messages: offsets are reported relative to it */
  size_t values, bytes;       /* budget used */
  size_t max_bytes;
  xgr_error *e;
  char path[160];
  size_t plen;
} decoder;

static int dec_fail(decoder *d, const uint8_t *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int dec_fail(decoder *d, const uint8_t *at, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return xgr_error_set(d->e, XGR_EINVAL, d->path, "ABI data%s%s at byte %zu: %s", d->plen ? " " : "", d->path,
                       (size_t)(at - d->start), msg);
}

static size_t dpath_push(decoder *d, size_t i) {
  size_t old = d->plen;
  int n = snprintf(d->path + old, sizeof d->path - old, "[%zu]", i);
  if (n > 0 && (size_t)n < sizeof d->path - old) d->plen += (size_t)n;
  return old;
}

static void dpath_pop(decoder *d, size_t old) {
  d->plen = old;
  d->path[old] = 0;
}

/* A word used as an offset or a length: must fit in 64 bits. */
static bool word_u64(const uint8_t *w, uint64_t *out) {
  for (int i = 0; i < 24; i++)
    if (w[i]) return false;
  uint64_t v = 0;
  for (int i = 24; i < 32; i++) v = v << 8 | w[i];
  *out = v;
  return true;
}

static int dec_value(decoder *d, const xgr_abi_type *t, const uint8_t *p, size_t avail, xgr_value *out);

/* Decode n components whose heads start at base (the region is avail bytes long). */
static int dec_seq(decoder *d, const xgr_abi_type *t, size_t n, const uint8_t *base, size_t avail, xgr_value *out) {
  xgr_value list = xgr_list_new(n < 64 ? n : 64);
  size_t pos = 0;
  for (size_t i = 0; i < n; i++) {
    const xgr_abi_type *it = t->k == T_TUPLE ? t->items[i] : t->elem;
    size_t old = dpath_push(d, i);
    if (it->head > avail || pos > avail - it->head) {
      xgr_value_release(list);
      return dec_fail(d, base + pos, "the head needs %zu bytes, %zu are left", it->head, pos < avail ? avail - pos : 0);
    }
    xgr_value v;
    int rc;
    if (it->dynamic) {
      uint64_t off;
      if (!word_u64(base + pos, &off) || off > avail) {
        rc = dec_fail(d, base + pos, "offset points outside the %zu bytes of its region", avail);
      } else {
        rc = dec_value(d, it, base + off, avail - (size_t)off, &v);
      }
    } else {
      rc = dec_value(d, it, base + pos, avail - pos, &v);
    }
    if (rc) {
      xgr_value_release(list);
      return rc;
    }
    dpath_pop(d, old);
    xgr_list_push(list, v);
    pos += it->head;
  }
  *out = list;
  return 0;
}

static int dec_value(decoder *d, const xgr_abi_type *t, const uint8_t *p, size_t avail, xgr_value *out) {
  if (++d->values > XGR_ABI_MAX_VALUES)
    return dec_fail(d, p, "more than %d values in one result", XGR_ABI_MAX_VALUES);
  if (avail < 32 && t->k != T_TUPLE && t->k != T_FARRAY)
    return dec_fail(d, p, "needs 32 bytes, %zu are left", avail);
  switch (t->k) {
    case T_UINT:
    case T_INT: {
      size_t pad = (256 - t->size) / 8;
      bool neg = t->k == T_INT && (p[pad] & 0x80);
      for (size_t i = 0; i < pad; i++)
        if (p[i] != (neg ? 0xff : 0)) return dec_fail(d, p, "%s%u value is not padded canonically", t->k == T_INT ? "int" : "uint", t->size);
      mpz_t z;
      mpz_init(z);
      mpz_import(z, 32, 1, 1, 1, 0, p);
      if (neg) {
        mpz_t two;
        mpz_init(two);
        mpz_ui_pow_ui(two, 2, 256);
        mpz_sub(z, z, two);
        mpz_clear(two);
      }
      *out = xgr__bigint_from_mpz(z, t->k == T_INT);
      mpz_clear(z);
      return 0;
    }
    case T_BOOL:
      for (int i = 0; i < 31; i++)
        if (p[i]) return dec_fail(d, p, "bool is neither 0 nor 1");
      if (p[31] > 1) return dec_fail(d, p, "bool is neither 0 nor 1");
      *out = xgr_value_bool(p[31] == 1);
      return 0;
    case T_ADDRESS: {
      for (int i = 0; i < 12; i++)
        if (p[i]) return dec_fail(d, p, "address has non-zero high bytes");
      char *s = xgr_hex_encode_alloc(p + 12, 20);
      *out = xgr_value_string(s, 42);
      free(s);
      return 0;
    }
    case T_FBYTES:
      for (size_t i = t->size; i < 32; i++)
        if (p[i]) return dec_fail(d, p, "bytes%u has non-zero padding", t->size);
      *out = xgr_value_bytes(p, t->size);
      return 0;
    case T_BYTES:
    case T_STRING: {
      uint64_t n;
      if (!word_u64(p, &n) || n > avail - 32)
        return dec_fail(d, p, "length exceeds the %zu bytes that follow", avail - 32);
      d->bytes += (size_t)n;
      if (d->bytes > d->max_bytes) return dec_fail(d, p, "result copies more bytes than it holds");
      *out = t->k == T_STRING ? xgr_value_string((const char *)p + 32, (size_t)n) : xgr_value_bytes(p + 32, (size_t)n);
      return 0;
    }
    case T_ARRAY: {
      uint64_t n;
      if (!word_u64(p, &n) || (t->elem->head ? n > (avail - 32) / t->elem->head : n > XGR_ABI_MAX_VALUES))
        return dec_fail(d, p, "array length does not fit the %zu bytes that follow", avail - 32);
      return dec_seq(d, t, (size_t)n, p + 32, avail - 32, out);
    }
    case T_FARRAY: return dec_seq(d, t, t->len, p, avail, out);
    case T_TUPLE: return dec_seq(d, t, t->n, p, avail, out);
  }
  return dec_fail(d, p, "unknown type");
}

int xgr_abi_decode(const xgr_abi_type *tuple, const uint8_t *data, size_t len, xgr_value *out, xgr_error *e) {
  assert(tuple && tuple->k == T_TUPLE);
  *out = xgr_value_null();
  decoder d = {.start = data, .max_bytes = 2 * len + 64, .e = e};
  static const uint8_t none[1] = {0};
  if (!data) data = none, d.start = none;
  return dec_seq(&d, tuple, tuple->n, data, len, out);
}

void xgr_abi_decode_slots(const xgr_abi_type *tuple, const uint8_t *data, size_t len, xgr_value *out) {
  assert(tuple && tuple->k == T_TUPLE);
  xgr_value list = xgr_list_new(tuple->n);
  size_t pos = 0;
  for (size_t i = 0; i < tuple->n; i++) {
    const xgr_abi_type *it = tuple->items[i];
    if (it->head > len || pos > len - it->head) break;
    decoder d = {.start = data, .max_bytes = 2 * len + 64, .e = NULL};
    xgr_value v = xgr_value_null();
    int rc;
    if (it->dynamic) {
      uint64_t off;
      rc = (!word_u64(data + pos, &off) || off > len) ? XGR_EINVAL : dec_value(&d, it, data + off, len - (size_t)off, &v);
    } else {
      rc = dec_value(&d, it, data + pos, len - pos, &v);
    }
    xgr_list_push(list, rc ? xgr_value_null() : v);
    pos += it->head;
  }
  *out = list;
}

char *xgr_abi_revert_reason(const uint8_t *data, size_t len) {
  static const uint8_t err_sel[4] = {0x08, 0xc3, 0x79, 0xa0}, panic_sel[4] = {0x4e, 0x48, 0x7b, 0x71};
  if (!data || len < 4) return NULL;
  bool is_err = !memcmp(data, err_sel, 4), is_panic = !memcmp(data, panic_sel, 4);
  if (!is_err && !is_panic) return NULL;
  xgr_abi_type *t = NULL;
  if (xgr_abi_type_parse(is_err ? "string" : "uint256", is_err ? 6 : 7, &t, NULL)) return NULL;
  xgr_abi_type *tup = xgr_abi_tuple_new(&t, 1);
  xgr_value v;
  char *r = NULL;
  if (tup && xgr_abi_decode(tup, data + 4, len - 4, &v, NULL) == 0) {
    xgr_value x = xgr_list_get(v, 0);
    if (is_err) {
      size_t n;
      const char *s = xgr_value_str(x, &n);
      r = xgr__xmalloc(n + 1);
      memcpy(r, s, n);
      r[n] = 0;
    } else {
      mpz_t z;
      mpz_init(z);
      xgr__to_mpz(x, z);
      char *hex = mpz_get_str(NULL, 16, z);
      size_t hl = strlen(hex);
      r = xgr__xmalloc(hl + 16);
      snprintf(r, hl + 16, "panic 0x%s", hex);
      void (*freefn)(void *, size_t);
      mp_get_memory_functions(NULL, NULL, &freefn);
      freefn(hex, hl + 1);
      mpz_clear(z);
    }
    xgr_value_release(v);
  }
  xgr_abi_type_free(tup);
  return r;
}
