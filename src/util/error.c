/* error.c — error values, JSON path building and diagnostic lists (see xgr/error.h). */
#include "xgr/error.h"
#include "util/alloc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const code_names[] = {
  "ok", "invalid_argument", "out_of_memory", "io_error", "parse_error", "schema_error",
  "limit_exceeded", "unknown_step", "legacy_format", "k_out_of_range", "missing_rule",
  "invalid_identifier", "join_unfulfillable", "duplicate", "unknown_rule", "eval_error",
  "not_found", "invalid_state", "unsupported", "timeout", "http_error", "not_permitted",
  "conflict", "registry_mismatch", "lease_lost",
};

const char *xgr_errcode_name(int code) {
  if (code > 0 || code <= XGR_ERRCODE_MIN_) return "unknown";
  return code_names[-code];
}

void xgr_error_clear(xgr_error *e) {
  if (!e) return;
  e->code = XGR_OK;
  e->path[0] = '\0';
  e->message[0] = '\0';
}

int xgr_error_vset(xgr_error *e, int code, const char *path, const char *fmt, va_list ap) {
  if (!e) return code;
  e->code = code;
  snprintf(e->path, sizeof e->path, "%s", path ? path : "");
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  return code;
}

int xgr_error_set(xgr_error *e, int code, const char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  xgr_error_vset(e, code, path, fmt, ap);
  va_end(ap);
  return code;
}

/* ---- paths ---- */

void xgr_path_init(xgr_path *p) {
  p->buf[0] = '\0';
  p->len = 0;
}

static void path_append(xgr_path *p, const char *s) {
  size_t room = sizeof p->buf - p->len;
  int n = snprintf(p->buf + p->len, room, "%s", s);
  if (n < 0) return;
  if ((size_t)n >= room) {            /* truncated: mark the end so nobody mistakes it */
    p->len = sizeof p->buf - 1;
    memcpy(p->buf + sizeof p->buf - 4, "...", 4);
  } else {
    p->len += (size_t)n;
  }
}

static int is_ident(const char *k) {
  if (!*k) return 0;
  for (const char *c = k; *c; c++)
    if (!(isalnum((unsigned char)*c) || *c == '_' || *c == '-' || *c == '$')) return 0;
  return 1;
}

size_t xgr_path_key(xgr_path *p, const char *key) {
  size_t before = p->len;
  if (is_ident(key)) {
    if (p->len) path_append(p, ".");
    path_append(p, key);
  } else {
    char tmp[XGR_PATH_MAX];
    snprintf(tmp, sizeof tmp, "[\"%s\"]", key);
    path_append(p, tmp);
  }
  return before;
}

size_t xgr_path_index(xgr_path *p, size_t index) {
  size_t before = p->len;
  char tmp[32];
  snprintf(tmp, sizeof tmp, "[%zu]", index);
  path_append(p, tmp);
  return before;
}

void xgr_path_pop(xgr_path *p, size_t len) {
  if (len < p->len) {
    p->len = len;
    p->buf[len] = '\0';
  }
}

/* ---- diagnostics ---- */

void xgr_diags_init(xgr_diags *d) { memset(d, 0, sizeof *d); }

void xgr_diags_free(xgr_diags *d) {
  for (size_t i = 0; i < d->n; i++) {
    free(d->items[i].path);
    free(d->items[i].message);
  }
  free(d->items);
  memset(d, 0, sizeof *d);
}

static int diags_push(xgr_diags *d, xgr_severity sev, const char *code, const char *path,
                      const char *msg) {
  if (d->n == d->cap) {
    size_t ncap = d->cap ? d->cap * 2 : 8;
    xgr_diag *ni = xgr__xrealloc(d->items, ncap * sizeof *ni);
    d->items = ni;
    d->cap = ncap;
  }
  xgr_diag *g = &d->items[d->n];
  g->severity = sev;
  g->code = code;
  g->path = xgr__xstrdup(path ? path : "");
  g->message = xgr__xstrdup(msg);
  d->n++;
  return 0;
}

int xgr_diags_add(xgr_diags *d, xgr_severity sev, const char *code, const char *path,
                  const char *fmt, ...) {
  char msg[XGR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return diags_push(d, sev, code, path, msg);
}

int xgr_diags_add_error(xgr_diags *d, const xgr_error *e) {
  return diags_push(d, XGR_SEV_ERROR, xgr_errcode_name(e->code), e->path, e->message);
}

size_t xgr_diags_count(const xgr_diags *d, xgr_severity sev) {
  size_t c = 0;
  for (size_t i = 0; i < d->n; i++) c += d->items[i].severity == sev;
  return c;
}

void xgr_diags_prefix(xgr_diags *d, size_t from, const char *prefix) {
  for (size_t i = from; d && i < d->n; i++) {
    const char *p = d->items[i].path;
    size_t n = strlen(prefix) + strlen(p) + 2;
    char *np = xgr__xmalloc(n);
    snprintf(np, n, "%s%s%s", prefix, *p && *p != '[' ? "." : "", p);
    free(d->items[i].path);
    d->items[i].path = np;
  }
}
