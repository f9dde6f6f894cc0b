/* test_error.c — error values, JSON path building and diagnostics lists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "xgr/error.h"

static void test_paths(void **s) {
  (void)s;
  xgr_path p;
  xgr_path_init(&p);
  xgr_path_key(&p, "structure");
  size_t m = xgr_path_key(&p, "A1");
  xgr_path_key(&p, "onValid");
  xgr_path_key(&p, "join");
  xgr_path_key(&p, "from");
  xgr_path_index(&p, 2);
  xgr_path_key(&p, "node");
  assert_string_equal(p.buf, "structure.A1.onValid.join.from[2].node");
  xgr_path_pop(&p, m);
  assert_string_equal(p.buf, "structure");
  xgr_path_key(&p, "has space");
  assert_string_equal(p.buf, "structure[\"has space\"]");
}

static void test_overlong_path_is_truncated(void **s) {
  (void)s;
  xgr_path p;
  xgr_path_init(&p);
  for (int i = 0; i < 100; i++) xgr_path_key(&p, "abcdefghij");
  assert_true(strlen(p.buf) < XGR_PATH_MAX);
  assert_non_null(strstr(p.buf, "..."));
}

static void test_error_set(void **s) {
  (void)s;
  xgr_error e;
  xgr_error_clear(&e);
  assert_int_equal(e.code, 0);
  int rc = xgr_error_set(&e, XGR_ELIMIT, "structure", "MaxSteps: %d steps, maximum %d", 129, 128);
  assert_int_equal(rc, XGR_ELIMIT);
  assert_string_equal(xgr_errcode_name(rc), "limit_exceeded");
  assert_string_equal(e.message, "MaxSteps: 129 steps, maximum 128");
  assert_string_equal(xgr_errcode_name(1), "unknown");
  assert_string_equal(xgr_errcode_name(XGR_EMISMATCH), "registry_mismatch");
}

static void test_diags(void **s) {
  (void)s;
  xgr_diags d;
  xgr_diags_init(&d);
  for (int i = 0; i < 20; i++) xgr_diags_add(&d, i % 2 ? XGR_SEV_WARNING : XGR_SEV_ERROR, "x", "p", "m%d", i);
  assert_int_equal(xgr_diags_count(&d, XGR_SEV_ERROR), 10);
  assert_int_equal(xgr_diags_count(&d, XGR_SEV_WARNING), 10);
  assert_string_equal(d.items[19].message, "m19");
  xgr_diags_free(&d);
  xgr_diags_init(&d);
  xgr_diags_add(&d, XGR_SEV_ERROR, "x", "structure.A", "a");
  xgr_diags_add(&d, XGR_SEV_ERROR, "x", "[2]", "b");
  xgr_diags_add(&d, XGR_SEV_ERROR, "x", "", "c");
  xgr_diags_prefix(&d, 1, "orchestration");
  assert_string_equal(d.items[0].path, "structure.A");   /* before `from`: untouched */
  assert_string_equal(d.items[1].path, "orchestration[2]");
  assert_string_equal(d.items[2].path, "orchestration");
  xgr_diags_free(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_paths),
    cmocka_unit_test(test_overlong_path_is_truncated),
    cmocka_unit_test(test_error_set),
    cmocka_unit_test(test_diags),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
