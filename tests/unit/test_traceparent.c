/* test_traceparent.c — the W3C Trace Context `traceparent` parser (xgr/trace.h): the spec's example
 * and a sampled/unsampled flag, surrounding whitespace, a later version with more after a '-', and
 * every refusal the spec names (lengths, separators, uppercase and non-hex digits, version ff,
 * all-zero trace and parent ids, version 00 with trailing data); writing a header back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "xgr/error.h"
#include "xgr/trace.h"

static int parse(const char *s, xgr_traceparent *tp) { return xgr_traceparent_parse(s, strlen(s), tp); }

static void test_valid(void **st) {
  (void)st;
  xgr_traceparent tp;
  assert_int_equal(parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", &tp), 0);
  char t[33], p[17];
  xgr_trace_hex(tp.trace_id, 16, t);
  xgr_trace_hex(tp.parent_id, 8, p);
  assert_string_equal(t, "4bf92f3577b34da6a3ce929d0e0e4736");
  assert_string_equal(p, "00f067aa0ba902b7");
  assert_int_equal(tp.flags, 1);
  assert_int_equal(tp.version, 0);
  char back[XGR_TRACEPARENT_LEN + 1];
  xgr_traceparent_format(&tp, back);
  assert_string_equal(back, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  assert_int_equal(parse(" \t00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00 ", &tp), 0);
  assert_int_equal(tp.flags, 0);
  /* a later version: what follows a '-' after the four fields is ignored */
  assert_int_equal(parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", &tp), 0);
  assert_int_equal(tp.version, 0xcc);
  assert_int_equal(parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09", &tp), 0);
  assert_int_equal(tp.flags, 9);
  /* not NUL-terminated: only len bytes are read */
  const char *longer = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01GARBAGE";
  assert_int_equal(xgr_traceparent_parse(longer, XGR_TRACEPARENT_LEN, &tp), 0);
}

static void test_invalid(void **st) {
  (void)st;
  static const char *const bad[] = {
      "",
      "00",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",            /* short flags */
      "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",             /* short trace id */
      "00-4bf92f3577b34da6a3ce929d0e0e47366-00f067aa0ba902b7-01",           /* long trace id */
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01",             /* short parent id */
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",      /* version 00 with more */
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-011",           /* version 00, 56 chars */
      "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",           /* later version, no '-' */
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",            /* version ff */
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",            /* zero trace id */
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",            /* zero parent id */
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",            /* uppercase */
      "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",            /* bad version digit */
      "00-4bf92f3577b34da6a3ce929d0e0e473x-00f067aa0ba902b7-01",            /* bad trace digit */
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",            /* bad parent digit */
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0z",            /* bad flags digit */
      "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",            /* bad separators */
      "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
      "-00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    xgr_traceparent tp;
    memset(&tp, 0x5a, sizeof tp);
    assert_int_equal(parse(bad[i], &tp), XGR_EINVAL);
    assert_int_equal(tp.flags, 0x5a);   /* untouched */
  }
  xgr_traceparent tp;
  assert_int_equal(xgr_traceparent_parse(NULL, 0, &tp), XGR_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_valid), cmocka_unit_test(test_invalid)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
