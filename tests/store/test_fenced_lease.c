/* test_fenced_lease.c — the fenced-lease primitive (xgr_store_fenced_sql, xgr/store.h): the exact
 * SQL of its four verbs for the two kinds of lease rows the project has (a session's row of
 * `sessions`, the executor's one row of exec_leader), so a change to what "free", "held" or
 * "fenced" means shows here; and the renewal period. test_lease_pg and test_exec_journal_pg run
 * these statements against PostgreSQL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "xgr/store.h"

static const xgr_store_fenced_lease SESSION = {"sessions", "s", "lease_owner", "lease_epoch", "lease_expires"};
static const xgr_store_fenced_lease LEADER = {"exec_leader", NULL, "node", "epoch", "expires"};

static void expect_sql(const xgr_store_fenced_lease *l, xgr_store_fenced_verb v, const xgr_store_fenced_stmt *s,
                       const char *want) {
  char *got = xgr_store_fenced_sql(l, v, s);
  assert_string_equal(got, want);
  free(got);
}

static void test_take(void **state) {
  (void)state;
  /* the primitive's own test of a free lease (and an upsert of the first row) */
  expect_sql(&LEADER, XGR_STORE_FENCED_TAKE,
             &(xgr_store_fenced_stmt){.insert = "INSERT INTO exec_leader(id, node, epoch, expires) VALUES(1, $1, 1, 0)",
                                      .conflict = "id", .node = "$1", .ms = "$2::bigint"},
             "INSERT INTO exec_leader(id, node, epoch, expires) VALUES(1, $1, 1, 0) ON CONFLICT (id) DO UPDATE SET"
             " node = $1, epoch = exec_leader.epoch + 1, expires = xgr_ms_now() + $2::bigint WHERE"
             " (exec_leader.node IS NULL OR exec_leader.node = $1 OR exec_leader.expires < xgr_ms_now() OR NOT"
             " xgr_node_alive(exec_leader.node)) RETURNING exec_leader.epoch");
  /* rows the caller chose (a claim's CTE) */
  expect_sql(&SESSION, XGR_STORE_FENCED_TAKE,
             &(xgr_store_fenced_stmt){.from = "c", .key = "s.owner = c.owner", .chosen = true, .node = "$1",
                                      .ms = "$3::bigint", .returning = "s.owner"},
             "UPDATE sessions s SET lease_owner = $1, lease_epoch = s.lease_epoch + 1, lease_expires = xgr_ms_now() +"
             " $3::bigint FROM c WHERE s.owner = c.owner RETURNING s.owner");
}

static void test_renew_release_check(void **state) {
  (void)state;
  expect_sql(&LEADER, XGR_STORE_FENCED_RENEW,
             &(xgr_store_fenced_stmt){.key = "id = 1", .node = "$1", .ms = "$2::bigint", .epoch = "$3"},
             "UPDATE exec_leader SET expires = xgr_ms_now() + $2::bigint WHERE (id = 1) AND exec_leader.node = $1 AND"
             " exec_leader.epoch = $3 RETURNING exec_leader.epoch");
  expect_sql(&LEADER, XGR_STORE_FENCED_RELEASE, &(xgr_store_fenced_stmt){.key = "id = 1", .node = "$1", .epoch = "$2"},
             "UPDATE exec_leader SET expires = 0 WHERE (id = 1) AND exec_leader.node = $1 AND exec_leader.epoch = $2");
  /* every epoch of a node, holder cleared */
  expect_sql(&SESSION, XGR_STORE_FENCED_RELEASE, &(xgr_store_fenced_stmt){.node = "$1", .clear = true},
             "UPDATE sessions s SET lease_owner = NULL, lease_expires = 0 WHERE s.lease_owner = $1");
  /* the fence: inside the writing statement, share-locking the row at (holder, epoch) */
  expect_sql(&LEADER, XGR_STORE_FENCED_CHECK,
             &(xgr_store_fenced_stmt){.key = "id = 1", .node = "$7", .epoch = "$8", .lock = true},
             "SELECT 1 FROM exec_leader WHERE (id = 1) AND exec_leader.node = $7 AND exec_leader.epoch = $8 FOR SHARE OF"
             " exec_leader");
  expect_sql(&SESSION, XGR_STORE_FENCED_CHECK,
             &(xgr_store_fenced_stmt){.from = "unnest($1::text[]) AS u(owner)", .key = "s.owner = u.owner",
                                      .node = "$2", .epoch = "$3::bigint"},
             "SELECT 1 FROM sessions s, unnest($1::text[]) AS u(owner) WHERE (s.owner = u.owner) AND s.lease_owner = $2"
             " AND s.lease_epoch = $3::bigint");
}

static void test_renew_period(void **state) {
  (void)state;
  assert_int_equal(xgr_store_fenced_renew_ms(10000), 3333);
  assert_int_equal(xgr_store_fenced_renew_ms(300), 100);
  assert_int_equal(xgr_store_fenced_renew_ms(2), 1);   /* never 0: a renewal loop must not spin */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_take),
      cmocka_unit_test(test_renew_release_check),
      cmocka_unit_test(test_renew_period),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
