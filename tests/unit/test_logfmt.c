/* test_logfmt.c — the logfmt line writer (xgr/logfmt.h): bare and quoted values, the escapes that
 * keep a line one parsable line, empty and NULL values, numbers, the ts/level/msg start, a line cut
 * at the buffer's end (still well formed), and the written line (one line, newline-terminated);
 * and the node's log on it (xgr/node.h): an error message holding quotes and newlines stays one
 * line, escaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "xgr/logfmt.h"
#include "xgr/node.h"

static void test_values(void **s) {
  (void)s;
  xgr_logfmt l;
  xgr_logfmt_begin(&l, false, "info", "ready");
  xgr_logfmt_str(&l, "addr", "127.0.0.1:80");
  xgr_logfmt_str(&l, "path", "");
  xgr_logfmt_str(&l, "none", NULL);
  xgr_logfmt_str(&l, "two", "a b");
  xgr_logfmt_str(&l, "eq", "a=b");
  xgr_logfmt_quoted(&l, "error", "timeout");
  xgr_logfmt_quoted(&l, "e2", NULL);
  xgr_logfmt_u64(&l, "n", UINT64_MAX);
  xgr_logfmt_i64(&l, "d", -5);
  xgr_logfmt_printf(&l, "scale", "%g", 2.5);
  assert_string_equal(xgr_logfmt_text(&l), "level=info msg=ready addr=127.0.0.1:80 path= none= two=\"a b\" eq=\"a=b\" "
                                           "error=\"timeout\" e2=\"\" n=18446744073709551615 d=-5 scale=2.5");
  assert_false(l.cut);
}

static void test_escapes(void **s) {
  (void)s;
  xgr_logfmt l;
  xgr_logfmt_begin(&l, false, "warn", "session aborted: step \"a\" failed");
  xgr_logfmt_str(&l, "x", "back\\slash\nline\ttab\r\x01\x7f");
  xgr_logfmt_str(&l, "utf8", "gr\xc3\xbc\xc3\x9f");   /* non-ASCII text stays bare and unchanged */
  assert_string_equal(xgr_logfmt_text(&l), "level=warn msg=\"session aborted: step \\\"a\\\" failed\" "
                                           "x=\"back\\\\slash\\nline\\ttab\\r\\u0001\\u007f\" utf8=gr\xc3\xbc\xc3\x9f");
}

static void test_ts(void **s) {
  (void)s;
  xgr_logfmt l;
  xgr_logfmt_begin(&l, true, "info", "stopping");
  const char *t = xgr_logfmt_text(&l);
  /* ts=YYYY-MM-DDTHH:MM:SS.mmmZ */
  assert_int_equal(strlen(t), strlen("ts=2026-11-28T10:00:00.123Z level=info msg=stopping"));
  assert_memory_equal(t, "ts=", 3);
  assert_int_equal(t[13], 'T');
  assert_int_equal(t[22], '.');
  assert_int_equal(t[26], 'Z');
  assert_string_equal(t + 27, " level=info msg=stopping");
}

/* A value that does not fit is cut inside its quotes and ends in `..."`; later pairs are dropped. */
static void test_cut(void **s) {
  (void)s;
  char big[3 * XGR_LOGFMT_MAX];
  memset(big, 'y', sizeof big - 1);
  big[sizeof big - 1] = 0;
  for (int quotes = 0; quotes < 2; quotes++) {
    xgr_logfmt l;
    xgr_logfmt_begin(&l, false, "error", "big");
    big[10] = quotes ? '"' : 'y';
    xgr_logfmt_str(&l, "v", big);
    xgr_logfmt_str(&l, "after", "1");
    const char *t = xgr_logfmt_text(&l);
    assert_true(l.cut);
    assert_true(strlen(t) < XGR_LOGFMT_MAX);
    assert_true(strlen(t) > XGR_LOGFMT_MAX - 16);
    assert_memory_equal(t, "level=error msg=big v=\"yyyyyyyyyy", 33);
    assert_string_equal(t + strlen(t) - 4, "...\"");
    assert_null(strstr(t, "after="));
  }
}

static void test_write(void **s) {
  (void)s;
  FILE *f = tmpfile();
  assert_non_null(f);
  xgr_logfmt l;
  xgr_logfmt_begin(&l, false, "info", "one");
  xgr_logfmt_write(&l, f);
  xgr_logfmt_begin(&l, false, "info", "two words");
  xgr_logfmt_write(&l, f);
  xgr_logfmt_write(&l, NULL);   /* no stream: nothing */
  rewind(f);
  char got[256] = {0};
  size_t n = fread(got, 1, sizeof got - 1, f);
  fclose(f);
  assert_int_equal(n, strlen(got));
  assert_string_equal(got, "level=info msg=one\nlevel=info msg=\"two words\"\n");
}

/* The node's log lines (a memory-store node): "ts=... " then the pairs; free text escaped. */
static void test_node_log(void **s) {
  (void)s;
  FILE *f = tmpfile();
  assert_non_null(f);
  xgr_error err;
  xgr_node *n = xgr_node_new(&(xgr_node_config){.workers = 1, .log = f}, &err);
  assert_non_null(n);
  xgr_node_log_error(n, "error", "cannot read the outbox", "near \"x\": syntax error\nat line 2");
  xgr_node_log_session(n, "warn", "lease lost: the session left this node", "0xab", 7, NULL);
  xgr_node_log_session(n, "error", "cannot recover session", "0xab", 8, "bad \\ path");
  xgr_logfmt l;
  xgr_node_log_begin(n, &l, "info", "recovered");
  xgr_logfmt_str(&l, "store", "memory");
  xgr_logfmt_i64(&l, "hibernate_after_ms", -1);
  xgr_node_log_end(n, &l);
  xgr_node_free(n);
  n = xgr_node_new(&(xgr_node_config){.workers = 1}, &err);   /* no log: nothing, no crash */
  assert_non_null(n);
  xgr_node_log_error(n, "error", "x", "y");
  xgr_node_free(n);
  rewind(f);
  const char *want[] = {
      "level=error msg=\"cannot read the outbox\" error=\"near \\\"x\\\": syntax error\\nat line 2\"",
      "level=warn msg=\"lease lost: the session left this node\" owner=0xab rootPid=7",
      "level=error msg=\"cannot recover session\" owner=0xab rootPid=8 error=\"bad \\\\ path\"",
      "level=info msg=recovered store=memory hibernate_after_ms=-1",
  };
  char line[512];
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    assert_non_null(fgets(line, sizeof line, f));
    assert_memory_equal(line, "ts=", 3);
    assert_int_equal(line[26], 'Z');
    line[strcspn(line, "\n")] = 0;
    assert_string_equal(line + 28, want[i]);
  }
  assert_null(fgets(line, sizeof line, f));
  fclose(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values), cmocka_unit_test(test_escapes), cmocka_unit_test(test_ts),
      cmocka_unit_test(test_cut),    cmocka_unit_test(test_write), cmocka_unit_test(test_node_log),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
