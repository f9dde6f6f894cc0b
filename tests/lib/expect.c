/* expect.c — the failure count and the messages of expect.h. Each failure is one line on stdout
 * (with stdout flushed, so the line lands before a later crash or abort would hide it). */
#include "expect.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int checked, failures;

int expect_failures(void) { return atomic_load(&failures); }

int expect_done(void) {
  int n = atomic_load(&checked), f = expect_failures();
  if (f) printf("FAIL: %d of %d expectations failed\n", f, n);
  else printf("ok: %d expectations held\n", n);
  return f ? 1 : 0;
}

bool expect__held(bool held) {
  atomic_fetch_add(&checked, 1);
  return held;
}

/* One FAIL line: where, what, then the formatted detail (fmt starts with a space; alone it means
 * no detail). */
static void report(const char *file, int line, const char *what, const char *fmt, va_list ap) {
  flockfile(stdout);
  printf("FAIL %s:%d: %s", file, line, what);
  if (fmt[1]) {
    putchar(':');
    vprintf(fmt, ap);
  }
  putchar('\n');
  fflush(stdout);
  funlockfile(stdout);
}

void expect__fail(const char *file, int line, const char *what, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report(file, line, what, fmt, ap);
  va_end(ap);
  atomic_fetch_add(&failures, 1);
}

void expect__abort(const char *file, int line, const char *what, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report(file, line, what, fmt, ap);
  va_end(ap);
  atomic_fetch_add(&failures, 1);
  abort();
}

/* ws, the expected expression, when it is not the literal number want_text itself; else NULL. */
static const char *named(const char *ws, const char *want_text) { return strcmp(ws, want_text) ? ws : NULL; }

bool expect__eq_int(const char *file, int line, const char *gs, const char *ws, long long got, long long want) {
  if (expect__held(got == want)) return true;
  char w[32];
  snprintf(w, sizeof w, "%lld", want);
  const char *n = named(ws, w);
  expect__fail(file, line, gs, " %lld, expected %s%s%lld", got, n ? n : "", n ? " = " : "", want);
  return false;
}

bool expect__eq_uint(const char *file, int line, const char *gs, const char *ws, unsigned long long got,
                     unsigned long long want) {
  if (expect__held(got == want)) return true;
  char w[32];
  snprintf(w, sizeof w, "%llu", want);
  const char *n = named(ws, w);
  expect__fail(file, line, gs, " %llu, expected %s%s%llu", got, n ? n : "", n ? " = " : "", want);
  return false;
}

bool expect__eq_str(const char *file, int line, const char *gs, const char *ws, const char *got, const char *want) {
  if (expect__held(got == want || (got && want && !strcmp(got, want)))) return true;
  const char *n = ws[0] == '"' ? NULL : ws; /* a literal names itself */
  expect__fail(file, line, gs, " %s%s%s, expected %s%s%s%s%s", got ? "\"" : "", got ? got : "NULL", got ? "\"" : "",
               n ? n : "", n ? " = " : "", want ? "\"" : "", want ? want : "NULL", want ? "\"" : "");
  return false;
}

bool expect__ok(const char *file, int line, const char *rcs, int rc, const xgr_error *err) {
  if (expect__held(rc == 0)) return true;
  expect__fail(file, line, rcs, " returned %d (%s): %s%s%s", rc, xgr_errcode_name(err->code), err->path,
               *err->path ? ": " : "", err->message);
  return false;
}
