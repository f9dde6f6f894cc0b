/* buf.c — the growable byte buffer (util/buf.h). */
#include "util/buf.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

static void reserve(xgr_buf *b, size_t n) {
  if (b->len + n + 1 <= b->cap) return;
  size_t c = b->cap ? b->cap : 64;
  while (c < b->len + n + 1) c *= 2;
  b->p = xgr__xrealloc(b->p, c);
  b->cap = c;
}

void xgr__buf_reserve(xgr_buf *b, size_t n) { reserve(b, n); }

void xgr__buf_put(xgr_buf *b, const void *p, size_t n) {
  reserve(b, n);
  if (n) memcpy(b->p + b->len, p, n);   /* p may be NULL when n is 0 (an empty ABI value) */
  b->len += n;
}

void xgr__buf_printf(xgr_buf *b, const char *fmt, ...) {
  char tmp[256];   /* most pieces fit: formatted once */
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n <= 0) return;
  if ((size_t)n < sizeof tmp) {
    xgr__buf_put(b, tmp, (size_t)n);
    return;
  }
  reserve(b, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

char *xgr__buf_finish(xgr_buf *b, size_t *len) {
  if (!b->p) reserve(b, 0);
  b->p[b->len] = '\0';
  char *r = b->p;
  if (len) *len = b->len;
  b->p = NULL;
  b->len = b->cap = 0;
  return r;
}

size_t xgr__u64_dec(char out[20], uint64_t v) {
  char tmp[20];
  size_t k = 0;
  do tmp[k++] = (char)('0' + v % 10); while ((v /= 10));
  for (size_t i = 0; i < k; i++) out[i] = tmp[k - 1 - i];
  return k;
}

void xgr__buf_put_u64(xgr_buf *b, uint64_t v) {
  char d[20];
  xgr__buf_put(b, d, xgr__u64_dec(d, v));
}

void xgr__buf_put_i64(xgr_buf *b, int64_t v) {
  if (v < 0) xgr__buf_putc(b, '-');
  xgr__buf_put_u64(b, v < 0 ? -(uint64_t)v : (uint64_t)v);
}

size_t xgr__str_copy(char *dst, size_t cap, const char *src) {
  size_t n = strnlen(src, cap - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
  return n;
}

void xgr__buf_put_utf8(xgr_buf *b, uint32_t cp) {
  assert(cp <= 0x10FFFF);
  char t[4];
  size_t n;
  if (cp < 0x80) t[0] = (char)cp, n = 1;
  else if (cp < 0x800) t[0] = (char)(0xC0 | (cp >> 6)), t[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
  else if (cp < 0x10000)
    t[0] = (char)(0xE0 | (cp >> 12)), t[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
    t[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
  else
    t[0] = (char)(0xF0 | (cp >> 18)), t[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
    t[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), t[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
  xgr__buf_put(b, t, n);
}
