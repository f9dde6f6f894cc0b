/* test_exec_journal.c — the shared execution journal of cluster nodes (src/chain/exec_journal.c,
 * docs/CLUSTER.md "Executions"), through its private API on a real PostgreSQL (run under
 * tests/pg/pg_cluster.sh: XGR_PG_URL; skipped without it): one sender at a time; a sender that
 * stalled past its lease has its late state change refused (XGR__XJ_NOT_SENDER, nothing written)
 * and does not send again while the new sender's lease runs; a dead node's lease is taken at
 * once; a sender that closes its journal gives the lease up; a node with another engine key is
 * refused at open and never sends; a journal made by a single writer (no exec_leader table yet)
 * gets one from the first node. */
#include <libpq-fe.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "chain/exec_journal_impl.h"
#include "xgr/store.h"

static char url[1024];

static char *sql_value(const char *q) {
  PGconn *c = PQconnectdb(url);
  PGresult *r = PQexec(c, q);
  if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK) fail_msg("%s: %s", q, PQerrorMessage(c));
  char *v = strdup(PQntuples(r) ? PQgetvalue(r, 0, 0) : "");
  PQclear(r);
  PQfinish(c);
  return v;
}

static void assert_sql(const char *q, const char *want) {
  char *v = sql_value(q);
  assert_string_equal(v, want);
  free(v);
}

static void sleep_ms(long ms) { nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL); }

/* A cluster node's store (it holds the node's liveness lock) and its shared journal. */
static xgr_store *store_of(const char *id) {
  xgr_store_config cfg = {.node_id = id, .lease_ms = 300};
  xgr_error err;
  xgr_store *st = xgr_store_open(url, &cfg, &err);
  if (!st) fail_msg("open node %s: %s", id, err.message);
  return st;
}

/* the engine key's address every node uses here, and another one */
#define KEY1 "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
#define KEY2 "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"

static xgr__xjournal *journal_of(const char *id, int64_t lease_ms) {
  xgr_error err;
  xgr__xjournal *j = xgr__xjournal_open_shared(url, id, lease_ms, KEY1, &err);
  if (!j) fail_msg("open journal %s: %s", id, err.message);
  assert_true(xgr__xjournal_shared(j));
  return j;
}

static int lead(xgr__xjournal *j) {
  char msg[256] = "";
  int rc = xgr__xjournal_lead(j, msg, sizeof msg);
  if (rc < 0) fail_msg("lead: %s", msg);
  return rc;
}

static void add(xgr__xjournal *j, uint64_t root) {
  xgr__xjournal_intent in = {.owner = "0xaa", .root = root, .iter = 1, .step = "Pay", .target = "0x01", .data = "0x",
                             .state = XGR__XJ_INTENT};
  char msg[256];
  if (xgr__xjournal_add(j, &in, msg, sizeof msg)) fail_msg("add: %s", msg);
}

static void test_one_sender(void **state) {
  (void)state;
  xgr_store *sa = store_of("a"), *sb = store_of("b");
  /* a's lease is short (it will stall past it), b's long (only its death ends it) */
  xgr__xjournal *a = journal_of("a", 300), *b = journal_of("b", 60000);
  char msg[256];
  assert_int_equal(lead(a), 0);   /* no execution anywhere yet: nothing to lead */
  add(b, 1);                      /* the first write makes the tables (any node) */
  assert_int_equal(lead(a), 1);
  assert_int_equal(lead(b), 0);   /* a holds the lease and lives */
  xgr__xjournal_row r;
  assert_int_equal(xgr__xjournal_next(a, &r, msg, sizeof msg), 1);
  assert_int_equal(xgr__xjournal_mark(a, r.id, XGR__XJ_SIGNED, "0xraw", "0xhash", 7, NULL, msg, sizeof msg), 0);
  /* b never sends while a holds it: its state changes are refused without a write */
  assert_int_equal(xgr__xjournal_mark(b, r.id, XGR__XJ_DONE, "0xother", "0xother", 9, "{}", msg, sizeof msg), XGR__XJ_NOT_SENDER);
  assert_sql("SELECT state || '/' || raw || '/' || nonce FROM exec_journal", "1/0xraw/7");

  /* a stalls past its lease: b takes over (epoch 2); a's late change is refused and written nowhere */
  sleep_ms(400);
  assert_int_equal(lead(b), 1);
  assert_sql("SELECT node || '/' || epoch FROM exec_leader", "b/2");
  int rc = xgr__xjournal_mark(a, r.id, XGR__XJ_DONE, "0xlate", "0xlate", 8, "{\"late\":true}", msg, sizeof msg);
  assert_int_equal(rc, XGR__XJ_NOT_SENDER);
  assert_non_null(strstr(msg, "another node took over"));
  assert_sql("SELECT state || '/' || raw || '/' || nonce FROM exec_journal", "1/0xraw/7");
  assert_int_equal(lead(a), 0);   /* and it does not take the lease back while b's runs */
  assert_int_equal(xgr__xjournal_mark(b, r.id, XGR__XJ_DONE, "0xraw", "0xhash", 7, "{}", msg, sizeof msg), 0);
  assert_sql("SELECT state FROM exec_journal", "2");
  xgr__xjournal_row_clear(&r);

  /* b dies (its store's liveness lock goes with its connection; the server drops it a moment after
   * the client closed): a takes over long before b's 60 s lease would run out */
  xgr_store_close(sb);
  int got = 0;
  for (int i = 0; i < 100 && !(got = lead(a)); i++) sleep_ms(20);
  assert_int_equal(got, 1);
  assert_sql("SELECT node || '/' || epoch FROM exec_leader", "a/3");
  /* a closes its journal cleanly: the lease is given up, the next node takes it without waiting */
  xgr__xjournal_close(b);
  sb = store_of("b");
  b = journal_of("b", 60000);
  xgr__xjournal_close(a);
  assert_sql("SELECT node || '/' || expires FROM exec_leader", "a/0");   /* given up, not run out */
  assert_int_equal(lead(b), 1);
  assert_sql("SELECT node || '/' || epoch FROM exec_leader", "b/4");
  xgr__xjournal_close(b);
  xgr_store_close(sb);
  xgr_store_close(sa);
}

/* One engine key per schema: a node whose key differs from the one the lease records is refused
 * at open (xgrd exits 3), and one that opened before the row existed never takes the lease. */
static void test_other_key_refused(void **state) {
  (void)state;
  xgr_store *sa = store_of("a"), *sc = store_of("c");
  xgr__xjournal *a = journal_of("a", 300);
  assert_int_equal(lead(a), 1);   /* the row exists (test_one_sender made the tables) and names KEY1 */
  xgr_error err;
  assert_null(xgr__xjournal_open_shared(url, "c", 300, KEY2, &err));
  assert_non_null(strstr(err.message, "this node's --engine-key is " KEY2));
  /* c opened with KEY2 before the row named KEY1: it never takes the lease, not even expired */
  free(sql_value("DELETE FROM exec_leader"));
  xgr__xjournal *c = xgr__xjournal_open_shared(url, "c", 300, KEY2, &err);
  assert_non_null(c);
  sleep_ms(120);                  /* a's renewal is due (a third of its lease): it finds no row */
  assert_int_equal(lead(a), 1);   /* and makes it again (KEY1) */
  assert_sql("SELECT node || '/' || sender FROM exec_leader", "a/" KEY1);
  sleep_ms(400);                  /* a's lease runs out */
  char msg[256];
  assert_int_equal(xgr__xjournal_lead(c, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "one engine key for every node of a schema"));
  assert_sql("SELECT node || '/' || sender FROM exec_leader", "a/" KEY1);
  xgr__xjournal_close(c);
  xgr__xjournal_close(a);
  xgr_store_close(sc);
  xgr_store_close(sa);
}

/* A journal a single writer made has no exec_leader: the first node makes it, and the rows
 * already there are sent by it. */
static void test_single_writer_journal_upgraded(void **state) {
  (void)state;
  free(sql_value("DROP TABLE exec_leader; DELETE FROM exec_journal"));
  xgr_store *sa = store_of("a");
  xgr__xjournal *a = journal_of("a", 300);
  free(sql_value("INSERT INTO exec_journal(owner, root, iter, step, target, data, gas, state)"
                 " VALUES('0xaa', 5, 1, 'Pay', '0x01', '0x', 0, 0)"));
  assert_int_equal(lead(a), 1);
  assert_sql("SELECT node || '/' || epoch FROM exec_leader", "a/1");
  xgr__xjournal_row r;
  char msg[256];
  assert_int_equal(xgr__xjournal_next(a, &r, msg, sizeof msg), 1);
  xgr__xjournal_row_clear(&r);
  xgr__xjournal_close(a);
  xgr_store_close(sa);
}

int main(void) {
  const char *u = getenv("XGR_PG_URL");
  if (!u || !*u) {
    printf("test_exec_journal: skipped (no XGR_PG_URL; run it under tests/pg/pg_cluster.sh)\n");
    return 77;
  }
  snprintf(url, sizeof url, "%s", u);
  free(sql_value("CREATE SCHEMA xjournal_t"));
  snprintf(url, sizeof url, "%s%soptions=-csearch_path%%3Dxjournal_t", u, strchr(u, '?') ? "&" : "?");
  xgr_store *st = xgr_store_open(url, NULL, &(xgr_error){0});   /* the store's schema (xgr_node_alive) */
  assert_non_null(st);
  xgr_store_close(st);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_one_sender), cmocka_unit_test(test_other_key_refused),
                                     cmocka_unit_test(test_single_writer_journal_upgraded)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
