/* value.c — xgr's dynamic values: reference counting, strings, lists, insertion-ordered maps,
 * CEL equality and numeric comparison, hashing of map keys, text rendering and the deep list cap.
 * Layouts are documented in value_impl.h; the API contract in include/xgr/value.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "value/value_impl.h"
#include "util/alloc.h"
#include "util/hash.h"

/* ---- reference counting ------------------------------------------------------------------ */

static void list_free(xgr_list *l) {
  for (uint32_t i = 0; i < l->len; i++) xgr_value_release(l->items[i]);
  free(l->items);
  free(l);
}

static void map_free(xgr_map *m) {
  for (uint32_t i = 0; i < m->len; i++) {
    xgr_value_release(m->e[i].key);
    xgr_value_release(m->e[i].val);
  }
  free(m->e);
  free(m->slots);
  free(m);
}

/* Pinned objects carry RC_PINNED in their count: retain and release leave them alone, so threads
 * sharing a rule's constants never write (and bounce) the cache line that holds the count. */
#define RC_PINNED 0x80000000u

static inline bool pinned(atomic_uint *rc) {
  return atomic_load_explicit(rc, memory_order_relaxed) & RC_PINNED;
}

static inline void rc_inc(atomic_uint *rc) {
  if (!pinned(rc)) atomic_fetch_add_explicit(rc, 1, memory_order_relaxed);
}

/* True when the caller dropped the last reference. */
static inline bool rc_dec(atomic_uint *rc) {
  return !pinned(rc) && atomic_fetch_sub_explicit(rc, 1, memory_order_acq_rel) == 1;
}

xgr_value xgr_value_retain(xgr_value v) {
  switch (v.kind) {
    case XGR_VSTRING:
    case XGR_VBYTES: rc_inc(&v.as.s->rc); break;
    case XGR_VLIST: rc_inc(&v.as.l->rc); break;
    case XGR_VMAP: rc_inc(&v.as.m->rc); break;
    case XGR_VBIGINT: rc_inc(&v.as.n->rc); break;
    default: break;
  }
  return v;
}

void xgr_value_release(xgr_value v) {
  switch (v.kind) {
    case XGR_VSTRING:
    case XGR_VBYTES:
      if (rc_dec(&v.as.s->rc)) free(v.as.s);
      break;
    case XGR_VLIST:
      if (rc_dec(&v.as.l->rc)) list_free(v.as.l);
      break;
    case XGR_VMAP:
      if (rc_dec(&v.as.m->rc)) map_free(v.as.m);
      break;
    case XGR_VBIGINT:
      if (rc_dec(&v.as.n->rc)) {
        mpz_clear(v.as.n->z);
        free(v.as.n);
      }
      break;
    default: break;
  }
}

static atomic_uint *rc_of(xgr_value v) {
  switch (v.kind) {
    case XGR_VSTRING:
    case XGR_VBYTES: return &v.as.s->rc;
    case XGR_VLIST: return &v.as.l->rc;
    case XGR_VMAP: return &v.as.m->rc;
    case XGR_VBIGINT: return &v.as.n->rc;
    default: return NULL;
  }
}

/* Set (pin) or clear the pinned bit of v and of everything inside it; a subtree already in the
 * wanted state is skipped, so shared parts are visited once. */
static void pin_deep(xgr_value v, bool pin) {
  atomic_uint *rc = rc_of(v);
  if (!rc || pinned(rc) == pin) return;
  if (pin) atomic_fetch_or_explicit(rc, RC_PINNED, memory_order_relaxed);
  else atomic_fetch_and_explicit(rc, ~RC_PINNED, memory_order_relaxed);
  if (v.kind == XGR_VLIST) {
    for (uint32_t i = 0; i < v.as.l->len; i++) pin_deep(v.as.l->items[i], pin);
  } else if (v.kind == XGR_VMAP) {
    for (uint32_t i = 0; i < v.as.m->len; i++) {
      pin_deep(v.as.m->e[i].key, pin);
      pin_deep(v.as.m->e[i].val, pin);
    }
  }
}

void xgr_value_pin(xgr_value v) { pin_deep(v, true); }

void xgr_value_unpin(xgr_value v) { pin_deep(v, false); }

/* ---- strings ------------------------------------------------------------------------------ */

static xgr_value str_new(uint8_t kind, const void *p, size_t len) {
  if (len > UINT32_MAX - 64) {
    fputs("xgr: string too large\n", stderr);
    abort();
  }
  xgr_str *s = xgr__xmalloc(sizeof *s + len + 1);
  atomic_init(&s->rc, 1);
  s->len = (uint32_t)len;
  if (len) memcpy(s->data, p, len);
  s->data[len] = '\0';
  xgr_value v = {0};
  v.kind = kind;
  v.as.s = s;
  return v;
}

xgr_value xgr_value_string(const char *s, size_t len) { return str_new(XGR_VSTRING, s, len); }
xgr_value xgr_value_cstring(const char *s) { return str_new(XGR_VSTRING, s, strlen(s)); }
xgr_value xgr_value_bytes(const void *p, size_t len) { return str_new(XGR_VBYTES, p, len); }

const char *xgr_value_str(xgr_value v, size_t *len) {
  if (v.kind != XGR_VSTRING && v.kind != XGR_VBYTES) {
    if (len) *len = 0;
    return NULL;
  }
  if (len) *len = v.as.s->len;
  return v.as.s->data;
}

bool xgr_utf8_valid(const char *s, size_t len) {
  const unsigned char *p = (const unsigned char *)s, *end = p + len;
  while (p < end) {
    unsigned c = *p;
    if (c < 0x80) {
      p++;
      continue;
    }
    size_t n;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) n = 1, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) n = 2, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) n = 3, cp = c & 0x07;
    else return false;
    if ((size_t)(end - p) <= n) return false;
    for (size_t i = 1; i <= n; i++) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    p += n + 1;
  }
  return true;
}

/* ---- lists -------------------------------------------------------------------------------- */

static uint32_t deepmax_of(xgr_value v) {
  if (v.kind == XGR_VLIST) return v.as.l->deepmax;
  if (v.kind == XGR_VMAP) return v.as.m->deepmax;
  return 0;
}

xgr_value xgr_list_new(size_t cap) {
  xgr_list *l = xgr__xmalloc(sizeof *l);
  atomic_init(&l->rc, 1);
  l->len = 0;
  l->cap = (uint32_t)(cap ? cap : 4);
  l->deepmax = 0;
  l->items = xgr__xmalloc(l->cap * sizeof(xgr_value));
  xgr_value v = {0};
  v.kind = XGR_VLIST;
  v.as.l = l;
  return v;
}

void xgr_list_push(xgr_value list, xgr_value take_item) {
  xgr_list *l = list.as.l;
  if (l->len == l->cap) {
    l->cap = l->cap * 2;
    l->items = xgr__xrealloc(l->items, l->cap * sizeof(xgr_value));
  }
  l->items[l->len++] = take_item;
  uint32_t d = deepmax_of(take_item);
  if (l->len > l->deepmax) l->deepmax = l->len;
  if (d > l->deepmax) l->deepmax = d;
}

size_t xgr_list_size(xgr_value list) { return list.kind == XGR_VLIST ? list.as.l->len : 0; }
xgr_value xgr_list_get(xgr_value list, size_t i) { return list.as.l->items[i]; }

/* ---- hashing ------------------------------------------------------------------------------ */

uint64_t xgr__hash_bytes(const void *p, size_t n) {
  /* FNV-1a with a final avalanche (keys are short; this is fast enough and has no seeds). */
  const unsigned char *s = p;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}


bool xgr__hash_key(xgr_value v, uint64_t *h) {
  switch (v.kind) {
    case XGR_VSTRING: *h = xgr__hash_bytes(v.as.s->data, v.as.s->len); return true;
    case XGR_VBOOL: *h = xgr__mix64(v.as.b ? 0x51ULL : 0x50ULL) ^ 0xb001; return true;
    case XGR_VINT: *h = xgr__mix64((uint64_t)v.as.i) ^ (v.as.i < 0 ? 0x7777 : 0); return true;
    case XGR_VUINT: *h = xgr__mix64(v.as.u); return true;
    case XGR_VDOUBLE: {
      double d = v.as.d;
      if (!(d == floor(d)) || fabs(d) >= 18446744073709551616.0) return false;
      if (d < 0) {
        if (d < -9223372036854775808.0) return false;
        return xgr__hash_key(xgr_value_int((int64_t)d), h);
      }
      return xgr__hash_key(xgr_value_uint((uint64_t)d), h);
    }
    default: return false;
  }
}

/* ---- numeric comparison ------------------------------------------------------------------- */

static int cmp_i_u(int64_t a, uint64_t b) {
  if (a < 0) return -1;
  return (uint64_t)a < b ? -1 : (uint64_t)a > b;
}

/* int/uint against double: CEL converts the integer to double (so 2^63-1 equals 2^63.0). */
static int cmp_dd(double a, double d) {
  if (isnan(d)) return 2;
  return a < d ? -1 : a > d;
}
static int cmp_i_d(int64_t a, double d) { return cmp_dd((double)a, d); }
static int cmp_u_d(uint64_t a, double d) { return cmp_dd((double)a, d); }

static int sgn(int c) { return c < 0 ? -1 : c > 0; }

int xgr__num_cmp(xgr_value a, xgr_value b) {
  if (a.kind == XGR_VBIGINT || b.kind == XGR_VBIGINT) {
    mpz_t x, y;
    mpz_inits(x, y, NULL);
    int r;
    if (a.kind == XGR_VDOUBLE || b.kind == XGR_VDOUBLE) {
      double d = a.kind == XGR_VDOUBLE ? a.as.d : b.as.d;
      xgr__to_mpz(a.kind == XGR_VDOUBLE ? b : a, x);
      if (isnan(d)) r = 2;
      else if (isinf(d)) r = d > 0 ? -1 : 1;
      else r = sgn(mpz_cmp_d(x, d));
      if (r != 2 && a.kind == XGR_VDOUBLE) r = -r;
    } else {
      xgr__to_mpz(a, x);
      xgr__to_mpz(b, y);
      r = sgn(mpz_cmp(x, y));
    }
    mpz_clears(x, y, NULL);
    return r;
  }
  switch (a.kind * 16 + b.kind) {
    case XGR_VINT * 16 + XGR_VINT: return a.as.i < b.as.i ? -1 : a.as.i > b.as.i;
    case XGR_VUINT * 16 + XGR_VUINT: return a.as.u < b.as.u ? -1 : a.as.u > b.as.u;
    case XGR_VDOUBLE * 16 + XGR_VDOUBLE:
      if (isnan(a.as.d) || isnan(b.as.d)) return 2;
      return a.as.d < b.as.d ? -1 : a.as.d > b.as.d;
    case XGR_VINT * 16 + XGR_VUINT: return cmp_i_u(a.as.i, b.as.u);
    case XGR_VUINT * 16 + XGR_VINT: return -cmp_i_u(b.as.i, a.as.u);
    case XGR_VINT * 16 + XGR_VDOUBLE: return cmp_i_d(a.as.i, b.as.d);
    case XGR_VDOUBLE * 16 + XGR_VINT: { int r = cmp_i_d(b.as.i, a.as.d); return r == 2 ? 2 : -r; }
    case XGR_VUINT * 16 + XGR_VDOUBLE: return cmp_u_d(a.as.u, b.as.d);
    case XGR_VDOUBLE * 16 + XGR_VUINT: { int r = cmp_u_d(b.as.u, a.as.d); return r == 2 ? 2 : -r; }
    default: return 2;
  }
}

/* ---- equality ----------------------------------------------------------------------------- */

static bool bigint_eq_string(xgr_value big, xgr_value s) {
  char buf[96];
  size_t n = xgr_bigint_to_dec(big, buf, sizeof buf);
  return n == s.as.s->len && memcmp(buf, s.as.s->data, n) == 0;
}

bool xgr_value_equal(xgr_value a, xgr_value b) {
  if (xgr_value_is_number(a) && xgr_value_is_number(b)) return xgr__num_cmp(a, b) == 0;
  if (a.kind == XGR_VBIGINT && b.kind == XGR_VSTRING) return bigint_eq_string(a, b);
  if (b.kind == XGR_VBIGINT && a.kind == XGR_VSTRING) return bigint_eq_string(b, a);
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case XGR_VNULL: return true;
    case XGR_VBOOL: return a.as.b == b.as.b;
    case XGR_VSTRING:
    case XGR_VBYTES:
      return a.as.s->len == b.as.s->len && memcmp(a.as.s->data, b.as.s->data, a.as.s->len) == 0;
    case XGR_VTYPE: return a.sub == b.sub && a.flags == b.flags;
    case XGR_VLIST: {
      if (a.as.l->len != b.as.l->len) return false;
      for (uint32_t i = 0; i < a.as.l->len; i++)
        if (!xgr_value_equal(a.as.l->items[i], b.as.l->items[i])) return false;
      return true;
    }
    case XGR_VMAP: {
      if (a.as.m->len != b.as.m->len) return false;
      for (uint32_t i = 0; i < a.as.m->len; i++) {
        xgr_value other;
        if (!xgr__map_get(b.as.m, a.as.m->e[i].key, &other)) return false;
        if (!xgr_value_equal(a.as.m->e[i].val, other)) return false;
      }
      return true;
    }
    default: return false;
  }
}

const char *xgr_value_kind_name(xgr_value v) {
  static const char *const names[] = {"null_type", "bool", "int", "uint", "double", "string",
                                      "bytes", "list", "map", "type", "uint256"};
  if (v.kind == XGR_VBIGINT) return (v.flags & XGR_VF_SIGNED) ? "int256" : "uint256";
  return v.kind <= XGR_VBIGINT ? names[v.kind] : "unknown";
}

/* ---- maps --------------------------------------------------------------------------------- */

xgr_value xgr_map_new(size_t cap) {
  xgr_map *m = xgr__xmalloc(sizeof *m);
  atomic_init(&m->rc, 1);
  m->len = 0;
  m->cap = (uint32_t)(cap ? cap : 4);
  m->deepmax = 0;
  m->nslots = 0;
  m->slots = NULL;
  m->e = xgr__xmalloc(m->cap * sizeof(xgr_map_ent));
  xgr_value v = {0};
  v.kind = XGR_VMAP;
  v.as.m = m;
  return v;
}

static bool key_eq(xgr_value a, xgr_value b) {
  if (a.kind == XGR_VSTRING || b.kind == XGR_VSTRING) {
    return a.kind == b.kind && a.as.s->len == b.as.s->len &&
           memcmp(a.as.s->data, b.as.s->data, a.as.s->len) == 0;
  }
  if (a.kind == XGR_VBOOL || b.kind == XGR_VBOOL) return a.kind == b.kind && a.as.b == b.as.b;
  if (xgr_value_is_number(a) && xgr_value_is_number(b)) return xgr__num_cmp(a, b) == 0;
  return false;
}

static void map_reindex(xgr_map *m) {
  uint32_t n = 16;
  while (n < m->len * 2) n *= 2;
  free(m->slots);
  m->slots = xgr__xcalloc(n, sizeof(uint32_t));
  m->nslots = n;
  for (uint32_t i = 0; i < m->len; i++) {
    uint32_t s = (uint32_t)m->e[i].hash & (n - 1);
    while (m->slots[s]) s = (s + 1) & (n - 1);
    m->slots[s] = i + 1;
  }
}

/* Index of the entry with key k (hash h), or -1. */
static int64_t map_find(const xgr_map *m, xgr_value k, uint64_t h) {
  if (m->nslots) {
    uint32_t mask = m->nslots - 1, s = (uint32_t)h & mask;
    for (uint32_t idx; (idx = m->slots[s]) != 0; s = (s + 1) & mask)
      if (m->e[idx - 1].hash == h && key_eq(m->e[idx - 1].key, k)) return idx - 1;
    return -1;
  }
  for (uint32_t i = 0; i < m->len; i++)
    if (m->e[i].hash == h && key_eq(m->e[i].key, k)) return i;
  return -1;
}

int xgr_map_set(xgr_value map, xgr_value take_key, xgr_value take_val) {
  xgr_map *m = map.as.m;
  uint64_t h;
  if (take_key.kind == XGR_VDOUBLE || !xgr__hash_key(take_key, &h)) {
    xgr_value_release(take_key);
    xgr_value_release(take_val);
    return XGR_EINVAL;
  }
  int64_t at = map_find(m, take_key, h);
  if (at >= 0) {
    /* keep the new key object, equal to the old one: maps copied from a map shared by many
     * sessions (a start payload) then hold the writer's keys — usually a rule's pinned constants —
     * instead of sharing, and counting references on, the first map's keys forever */
    xgr_value_release(m->e[at].key);
    m->e[at].key = take_key;
    xgr_value_release(m->e[at].val);
    m->e[at].val = take_val;
  } else {
    if (m->len == m->cap) {
      m->cap *= 2;
      m->e = xgr__xrealloc(m->e, m->cap * sizeof(xgr_map_ent));
    }
    m->e[m->len].key = take_key;
    m->e[m->len].val = take_val;
    m->e[m->len].hash = h;
    m->len++;
    if (m->len >= XGR_MAP_INDEX_MIN && m->len * 2 > m->nslots) map_reindex(m);
    else if (m->nslots) {
      uint32_t mask = m->nslots - 1, s = (uint32_t)h & mask;
      while (m->slots[s]) s = (s + 1) & mask;
      m->slots[s] = m->len;
    }
  }
  uint32_t d = deepmax_of(take_val);
  if (d > m->deepmax) m->deepmax = d;
  return 0;
}

int xgr_map_set_str(xgr_value map, const char *key, size_t len, xgr_value take_val) {
  return xgr_map_set(map, xgr_value_string(key, len), take_val);
}

bool xgr_map_remove_str(xgr_value map, const char *key, size_t len) {
  xgr_map *m = map.as.m;
  xgr_value k = {0};
  k.kind = XGR_VSTRING;
  uint64_t h = xgr__hash_bytes(key, len);
  int64_t at = -1;
  for (uint32_t i = 0; i < m->len; i++)
    if (m->e[i].hash == h && m->e[i].key.kind == XGR_VSTRING && m->e[i].key.as.s->len == len &&
        memcmp(m->e[i].key.as.s->data, key, len) == 0) {
      at = i;
      break;
    }
  (void)k;
  if (at < 0) return false;
  xgr_value_release(m->e[at].key);
  xgr_value_release(m->e[at].val);
  memmove(&m->e[at], &m->e[at + 1], (m->len - (size_t)at - 1) * sizeof(xgr_map_ent));
  m->len--;
  if (m->nslots) map_reindex(m);
  /* deepmax stays an upper bound; recompute exactly */
  m->deepmax = 0;
  for (uint32_t i = 0; i < m->len; i++) {
    uint32_t d = deepmax_of(m->e[i].val);
    if (d > m->deepmax) m->deepmax = d;
  }
  return true;
}

bool xgr__map_get_str_hashed(const xgr_map *m, const char *key, size_t len, uint64_t h,
                             xgr_value *out) {
  if (m->nslots) {
    uint32_t mask = m->nslots - 1, s = (uint32_t)h & mask;
    for (uint32_t idx; (idx = m->slots[s]) != 0; s = (s + 1) & mask) {
      const xgr_map_ent *e = &m->e[idx - 1];
      if (e->hash == h && e->key.kind == XGR_VSTRING && e->key.as.s->len == len &&
          memcmp(e->key.as.s->data, key, len) == 0) {
        *out = e->val;
        return true;
      }
    }
    return false;
  }
  for (uint32_t i = 0; i < m->len; i++) {
    const xgr_map_ent *e = &m->e[i];
    if (e->hash == h && e->key.kind == XGR_VSTRING && e->key.as.s->len == len &&
        memcmp(e->key.as.s->data, key, len) == 0) {
      *out = e->val;
      return true;
    }
  }
  return false;
}

bool xgr__map_get(const xgr_map *m, xgr_value key, xgr_value *out) {
  uint64_t h;
  if (!xgr__hash_key(key, &h)) return false;
  int64_t at = map_find(m, key, h);
  if (at < 0) return false;
  *out = m->e[at].val;
  return true;
}

bool xgr_map_get(xgr_value map, xgr_value key, xgr_value *out) {
  return map.kind == XGR_VMAP && xgr__map_get(map.as.m, key, out);
}

bool xgr_map_get_str(xgr_value map, const char *key, size_t len, xgr_value *out) {
  return map.kind == XGR_VMAP &&
         xgr__map_get_str_hashed(map.as.m, key, len, xgr__hash_bytes(key, len), out);
}

size_t xgr_map_size(xgr_value map) { return map.kind == XGR_VMAP ? map.as.m->len : 0; }

void xgr_map_entry(xgr_value map, size_t i, xgr_value *key, xgr_value *val) {
  if (key) *key = map.as.m->e[i].key;
  if (val) *val = map.as.m->e[i].val;
}

xgr_value xgr_map_copy(xgr_value map) {
  xgr_value c = xgr_map_new(map.as.m->len + 4);
  for (uint32_t i = 0; i < map.as.m->len; i++)
    xgr_map_set(c, xgr_value_retain(map.as.m->e[i].key), xgr_value_retain(map.as.m->e[i].val));
  return c;
}

/* ---- caps --------------------------------------------------------------------------------- */

size_t xgr_value_max_list_len(xgr_value v) { return deepmax_of(v); }

int xgr_value_check_list_cap(xgr_value v, size_t max, xgr_error *e) {
  size_t n = deepmax_of(v);
  if (n > max)
    return xgr_error_set(e, XGR_ELIMIT, NULL, "a list has %zu elements, MaxListCap is %zu", n, max);
  return 0;
}

/* ---- text --------------------------------------------------------------------------------- */

size_t xgr_format_double(double d, char *buf, size_t n) {
  int k;
  if (!buf || n < 32) return 0;
  if (isnan(d)) k = snprintf(buf, n, "NaN");
  else if (isinf(d)) k = snprintf(buf, n, d > 0 ? "Infinity" : "-Infinity");
  else {
    k = snprintf(buf, n, "%.15g", d);
    if (strtod(buf, NULL) != d) k = snprintf(buf, n, "%.16g", d);
    if (strtod(buf, NULL) != d) k = snprintf(buf, n, "%.17g", d);
  }
  return k < 0 ? 0 : (size_t)k;
}

char *xgr_value_render(xgr_value v, size_t *len) {
  xgr_buf b = {0};
  char tmp[96];
  size_t n;
  switch (v.kind) {
    case XGR_VNULL: xgr__buf_puts(&b, "null"); break;
    case XGR_VBOOL: xgr__buf_puts(&b, v.as.b ? "true" : "false"); break;
    case XGR_VINT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.as.i); xgr__buf_puts(&b, tmp); break;
    case XGR_VUINT: snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v.as.u); xgr__buf_puts(&b, tmp); break;
    case XGR_VDOUBLE: n = xgr_format_double(v.as.d, tmp, sizeof tmp); xgr__buf_put(&b, tmp, n); break;
    case XGR_VSTRING:
    case XGR_VBYTES: xgr__buf_put(&b, v.as.s->data, v.as.s->len); break;
    case XGR_VBIGINT: n = xgr_bigint_to_dec(v, tmp, sizeof tmp); xgr__buf_put(&b, tmp, n); break;
    case XGR_VTYPE: {
      xgr_value t = {0};
      t.kind = v.sub;
      t.flags = v.flags;
      xgr__buf_puts(&b, xgr_value_kind_name(t));
      break;
    }
    default: xgr__json_write(&b, v, 0, -1); break;
  }
  return xgr__buf_finish(&b, len);
}
