/* test_marks.c — single-use marks in the store (xgr_store_mark_once), which keep a used control
 * permit's digest until its expiry: a second use is refused, also after reopening a SQLite store;
 * an expired mark frees its key; the memory backend behaves the same within a process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "xgr/store.h"

static void exercise(xgr_store *st) {
  xgr_error e;
  assert_int_equal(xgr_store_mark_once(st, "0xaa", 2000, 1000, &e), 0);
  assert_int_equal(xgr_store_mark_once(st, "0xaa", 2000, 1500, &e), XGR_ECONFLICT);
  assert_non_null(strstr(e.message, "already used"));
  assert_int_equal(xgr_store_mark_once(st, "0xbb", 1200, 1000, &e), 0);
  /* at 2000 the first mark has expired: its key may be used again (a new permit with the same
   * digest would be expired itself; the store just does not keep marks forever) */
  assert_int_equal(xgr_store_mark_once(st, "0xaa", 3000, 2000, &e), 0);
  assert_int_equal(xgr_store_mark_once(st, "0xaa", 3000, 2500, &e), XGR_ECONFLICT);
  assert_int_equal(xgr_store_mark_once(st, "", 3000, 2500, &e), XGR_EINVAL);
}

static void test_memory(void **state) {
  (void)state;
  xgr_error e;
  xgr_store *st = xgr_store_open("memory:", NULL, &e);
  assert_non_null(st);
  exercise(st);
  xgr_store_close(st);
}

static void test_sqlite_restart(void **state) {
  (void)state;
  char dir[] = "/tmp/xgr-marks-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/s.db", dir);
  xgr_error e;
  xgr_store *st = xgr_store_open(path, NULL, &e);
  assert_non_null(st);
  exercise(st);
  assert_int_equal(xgr_store_mark_once(st, "0xcc", 5000, 2500, &e), 0);
  xgr_store_close(st);
  st = xgr_store_open(path, NULL, &e);
  assert_non_null(st);
  assert_int_equal(xgr_store_mark_once(st, "0xcc", 5000, 2600, &e), XGR_ECONFLICT);
  assert_int_equal(xgr_store_mark_once(st, "0xaa", 3000, 2600, &e), XGR_ECONFLICT);
  assert_int_equal(xgr_store_mark_once(st, "0xdd", 5000, 2600, &e), 0);
  xgr_store_close(st);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_memory), cmocka_unit_test(test_sqlite_restart)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
