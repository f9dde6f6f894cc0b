/* test_buf.c — the growable text buffer of src/util/buf.h: appends, printf beyond the stack
 * buffer, and an empty append from a NULL pointer (an empty ABI value does that; UBSan flagged the
 * memcpy it used to reach). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/buf.h"

static void test_appends(void **s) {
  (void)s;
  xgr_buf b = {0};
  xgr__buf_put(&b, NULL, 0);
  xgr__buf_puts(&b, "ab");
  xgr__buf_putc(&b, 'c');
  xgr__buf_put(&b, NULL, 0);
  char big[600];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  xgr__buf_printf(&b, "%s%d", big, 7);
  size_t len;
  char *out = xgr__buf_finish(&b, &len);
  assert_int_equal(len, 3 + 599 + 1);
  assert_memory_equal(out, "abc", 3);
  assert_int_equal(out[len - 1], '7');
  assert_int_equal(out[len], 0);
  free(out);
}

static void test_empty_finish(void **s) {
  (void)s;
  xgr_buf b = {0};
  xgr__buf_put(&b, NULL, 0);
  size_t len = 1;
  char *out = xgr__buf_finish(&b, &len);
  assert_non_null(out);
  assert_int_equal(len, 0);
  assert_string_equal(out, "");
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_appends), cmocka_unit_test(test_empty_finish)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
