/* test_json_depth.c — the nesting scanner xgrd runs on every request body before parsing it
 * (xgr_json_check_depth, src/value/json.c): the limit and its path, and a body that ends inside a
 * string right after a backslash (the fuzzer found the scanner reading past such a body). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "xgr/value.h"

/* The scanner on an exact-size heap copy (no NUL after it), so ASan sees any read past the end. */
static int scan(const char *text, size_t max, xgr_error *e) {
  size_t n = strlen(text);
  char *copy = malloc(n ? n : 1);
  memcpy(copy, text, n);
  int rc = xgr_json_check_depth(copy, n, max, e);
  free(copy);
  return rc;
}

static void test_trailing_backslash(void **s) {
  (void)s;
  xgr_error e;
  assert_int_equal(scan("\"ab\\", 8, &e), 0);
  assert_int_equal(scan("{\"k\\", 8, &e), 0);
  assert_int_equal(scan("\"\\", 8, &e), 0);
}

static void test_limit_and_path(void **s) {
  (void)s;
  xgr_error e;
  assert_int_equal(scan("{\"a\":[1,[2]]}", 3, &e), 0);
  assert_int_not_equal(scan("{\"a\":[1,{\"b\":[[]]}]}", 3, &e), 0);
  assert_int_equal(e.code, XGR_ELIMIT);
  assert_string_equal(e.path, "a[1].b");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_trailing_backslash), cmocka_unit_test(test_limit_and_path)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
