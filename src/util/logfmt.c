/* logfmt.c — the logfmt line writer of xgr/logfmt.h: pairs appended into the caller's bounded
 * buffer, values quoted and escaped only as logfmt needs, one locked write per line. */
#include "xgr/logfmt.h"

#include <assert.h>
#include <string.h>
#include <time.h>

/* Room kept at the end of buf for a cut value's `..."` and the NUL. */
#define TAIL 5

static void put(xgr_logfmt *l, const char *s, size_t n) {
  if (l->cut) return;
  if (l->len + n + TAIL > sizeof l->buf) {
    l->cut = true;
    return;
  }
  memcpy(l->buf + l->len, s, n);
  l->len += n;
  l->buf[l->len] = '\0';
}

/* A bare value may hold no space, control character, quote, '=' or DEL; and must not be empty
 * to need no quotes (empty values are written bare too: `key=`). */
static bool needs_quotes(const char *v) {
  for (const unsigned char *p = (const unsigned char *)v; *p; p++)
    if (*p <= ' ' || *p == '"' || *p == '=' || *p == 0x7f) return true;
  return false;
}

static void key(xgr_logfmt *l, const char *k) {
  assert(k && *k && !needs_quotes(k));
  if (l->len) put(l, " ", 1);
  put(l, k, strlen(k));
  put(l, "=", 1);
}

/* v in double quotes, escaped; cut with `..."` when it does not fit. */
static void quoted(xgr_logfmt *l, const char *v) {
  if (l->cut) return;
  size_t start = l->len;
  put(l, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)v; *p && !l->cut; p++) {
    char esc[8];
    size_t n;
    switch (*p) {
    case '"': n = (size_t)snprintf(esc, sizeof esc, "\\\""); break;
    case '\\': n = (size_t)snprintf(esc, sizeof esc, "\\\\"); break;
    case '\n': n = (size_t)snprintf(esc, sizeof esc, "\\n"); break;
    case '\r': n = (size_t)snprintf(esc, sizeof esc, "\\r"); break;
    case '\t': n = (size_t)snprintf(esc, sizeof esc, "\\t"); break;
    default:
      if (*p < 0x20 || *p == 0x7f) n = (size_t)snprintf(esc, sizeof esc, "\\u%04x", *p);
      else {
        esc[0] = (char)*p;
        n = 1;
      }
    }
    put(l, esc, n);
  }
  if (!l->cut) {
    put(l, "\"", 1);
    return;
  }
  if (l->len == start) return;   /* not even the opening quote fitted: the line ends in `key=` */
  /* cut: what fitted, then `..."` in the room kept for it (never inside an escape: the escape that
   * did not fit was not written at all) */
  assert(l->len >= start && l->len + TAIL <= sizeof l->buf);
  memcpy(l->buf + l->len, "...\"", 4);
  l->len += 4;
  l->buf[l->len] = '\0';
}

static void value(xgr_logfmt *l, const char *v) {
  size_t n = strlen(v);
  if ((*v && needs_quotes(v)) || l->len + n + TAIL > sizeof l->buf) quoted(l, v);   /* (a cut value is quoted) */
  else put(l, v, n);
}

void xgr_logfmt_begin(xgr_logfmt *l, bool with_ts, const char *level, const char *msg) {
  l->len = 0;
  l->cut = false;
  l->buf[0] = '\0';
  if (with_ts) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char t[40];
    size_t n = strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(t + n, sizeof t - n, ".%03ldZ", ts.tv_nsec / 1000000);
    xgr_logfmt_str(l, "ts", t);
  }
  xgr_logfmt_str(l, "level", level);
  xgr_logfmt_str(l, "msg", msg);
}

void xgr_logfmt_str(xgr_logfmt *l, const char *k, const char *v) {
  key(l, k);
  value(l, v ? v : "");
}

void xgr_logfmt_quoted(xgr_logfmt *l, const char *k, const char *v) {
  key(l, k);
  quoted(l, v ? v : "");
}

void xgr_logfmt_u64(xgr_logfmt *l, const char *k, uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "%llu", (unsigned long long)v);
  xgr_logfmt_str(l, k, b);
}

void xgr_logfmt_i64(xgr_logfmt *l, const char *k, int64_t v) {
  char b[24];
  snprintf(b, sizeof b, "%lld", (long long)v);
  xgr_logfmt_str(l, k, b);
}

void xgr_logfmt_printf(xgr_logfmt *l, const char *k, const char *fmt, ...) {
  char b[XGR_LOGFMT_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  xgr_logfmt_str(l, k, b);
}

const char *xgr_logfmt_text(const xgr_logfmt *l) { return l->len ? l->buf : ""; }

void xgr_logfmt_write(const xgr_logfmt *l, FILE *f) {
  if (!f) return;
  flockfile(f);
  fwrite(l->buf, 1, l->len, f);
  fputc('\n', f);
  fflush(f);
  funlockfile(f);
}
