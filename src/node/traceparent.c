/* traceparent.c — the W3C Trace Context `traceparent` header (xgr/trace.h): parse it strictly (the
 * tracer continues a caller's trace only from a well-formed header, and ignores any other) and
 * write it. */
#include "xgr/trace.h"

#include <assert.h>
#include <stdbool.h>
#include <stdio.h>

#include "xgr/error.h"

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;   /* uppercase is not allowed by the spec */
}

/* n bytes from 2n lowercase hex digits at s; false on any other character. */
static bool unhex(const char *s, uint8_t *out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  return true;
}

static bool all_zero(const uint8_t *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (b[i]) return false;
  return true;
}

int xgr_traceparent_parse(const char *s, size_t len, xgr_traceparent *out) {
  assert(out && (s || !len));
  while (len && (s[0] == ' ' || s[0] == '\t')) s++, len--;   /* OWS */
  while (len && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
  if (len < XGR_TRACEPARENT_LEN) return XGR_EINVAL;
  xgr_traceparent tp;
  if (!unhex(s, &tp.version, 1) || tp.version == 0xff) return XGR_EINVAL;
  if (s[2] != '-' || s[35] != '-' || s[52] != '-') return XGR_EINVAL;
  if (!unhex(s + 3, tp.trace_id, 16) || !unhex(s + 36, tp.parent_id, 8) || !unhex(s + 53, &tp.flags, 1))
    return XGR_EINVAL;
  if (all_zero(tp.trace_id, 16) || all_zero(tp.parent_id, 8)) return XGR_EINVAL;
  /* version 00 is exactly 55 characters; a later one may go on after a '-' */
  if (len > XGR_TRACEPARENT_LEN && (tp.version == 0 || s[XGR_TRACEPARENT_LEN] != '-')) return XGR_EINVAL;
  *out = tp;
  return 0;
}

void xgr_trace_hex(const uint8_t *b, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[b[i] >> 4];
    out[2 * i + 1] = digits[b[i] & 15];
  }
  out[2 * n] = '\0';
}

void xgr_traceparent_format(const xgr_traceparent *tp, char out[XGR_TRACEPARENT_LEN + 1]) {
  char t[33], p[17];
  xgr_trace_hex(tp->trace_id, 16, t);
  xgr_trace_hex(tp->parent_id, 8, p);
  snprintf(out, XGR_TRACEPARENT_LEN + 1, "00-%s-%s-%02x", t, p, tp->flags);
}
