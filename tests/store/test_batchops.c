/* test_batchops.c — the store's batch operations (xgr_store_batchop_*, table batch_ops, schema 16)
 * on every backend: memory, SQLite, and PostgreSQL when XGR_PG_URL names a database (meson runs
 * the program a second time under tests/pg/pg_cluster.sh). Checked: create (a second create of an
 * id conflicts), claims (oldest first; a live claim of another node is left alone; an expired one
 * is taken over with the epoch raised; force takes any running one), fenced progress (a driver at
 * an old epoch or another node writes nothing and learns it lost the claim), the state machine
 * (only running moves; cancel keeps `cancelled` while the driver's counts still land), reads and
 * listings (newest first, by caller, limit), and the rows after reopening the store. Then the
 * bounds and retention (test_batch_retention): a caller's running operations are bounded at create
 * (XGR_ELIMIT, nothing written; another caller is not held back), its finished ones past the newest
 * max_kept go at its next create, and with batch_secs 1 a full retention pass deletes the done and
 * cancelled operations finished more than a second ago, leaving a running one (however old) and a
 * recently finished one.
 */
#include <ctype.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "xgr/store.h"

#define IDA "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define IDB "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define IDC "cccccccccccccccccccccccccccccccc"
#define C1 "0x00000000000000000000000000000000000000c1"
#define C2 "0x00000000000000000000000000000000000000c2"

static char dir[] = "/tmp/xgr-test-batchops-XXXXXX";

/* The store of backend k (0 memory, 1 SQLite, 2 PostgreSQL: a fresh schema "batchops_test" the
 * first time, reopened as it is with again), with cfg (NULL: defaults). */
static xgr_store *open_cfg(int k, bool again, const xgr_store_config *cfg) {
  char url[600];
  if (k == 2) {
    const char *u = getenv("XGR_PG_URL");
    if (!again) {
      PGconn *c = PQconnectdb(u);
      assert_int_equal(PQstatus(c), CONNECTION_OK);
      PGresult *r = PQexec(c, "SET client_min_messages = warning; DROP SCHEMA IF EXISTS batchops_test CASCADE;"
                              " CREATE SCHEMA batchops_test");
      assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
      PQclear(r);
      PQfinish(c);
    }
    snprintf(url, sizeof url, "%s%soptions=-csearch_path%%3Dbatchops_test", u, strchr(u, '?') ? "&" : "?");
  } else {
    snprintf(url, sizeof url, "sqlite:%s/b.db", dir);
    if (k == 1 && !again) unlink(url + 7);
  }
  xgr_error e;
  xgr_store *st = xgr_store_open(k ? url : "memory:", cfg, &e);
  if (!st) fail_msg("open %s: %s", url, e.message);
  return st;
}

static xgr_store *open_kind(int k, bool again) { return open_cfg(k, again, NULL); }

/* Create id for caller with the bounds max_running and max_kept (0: none). */
static void create_bounded(xgr_store *st, const char *id, const char *caller, uint32_t max_running,
                           uint32_t max_kept, int want) {
  xgr_store_batchop op = {.id = (char *)id, .caller = (char *)caller, .action = "kill",
                          .spec = "{\"selection\":{\"owner\":\"" C1 "\"}}", .total = 5};
  xgr_error e;
  assert_int_equal(xgr_store_batchop_create(st, &op, max_running, max_kept, &e), want);
}

static void create(xgr_store *st, const char *id, const char *caller, uint64_t total, int want) {
  xgr_store_batchop op = {.id = (char *)id, .caller = (char *)caller, .action = "kill",
                          .spec = "{\"selection\":{\"owner\":\"" C1 "\"}}", .total = total};
  xgr_error e;
  assert_int_equal(xgr_store_batchop_create(st, &op, 0, 0, &e), want);
}

/* Claim for node: the id claimed ("" none) into out; *epoch its epoch. */
static void claim(xgr_store *st, const char *node, int64_t ms, bool force, char *out, int64_t *epoch) {
  xgr_store_batchop op;
  bool found;
  xgr_error e;
  assert_int_equal(xgr_store_batchop_claim(st, node, ms, force, &op, &found, &e), 0);
  snprintf(out, 40, "%s", found ? op.id : "");
  if (found) {
    assert_string_equal(op.driver, node);
    assert_string_equal(op.state, "running");
    assert_true(op.started_at > 0 && op.expires > 0);
    *epoch = op.epoch;
  }
  xgr_store_batchop_clear(&op);
}

/* Progress of (id, node, epoch): the state the store answers ("" when fenced off). */
static const char *progress(xgr_store *st, const char *id, const char *node, int64_t epoch, uint64_t done,
                            const char *state, int64_t ms) {
  static char got[16];
  xgr_store_batchop op = {.id = (char *)id, .driver = (char *)node, .epoch = epoch, .state = (char *)state,
                          .total = 5, .done = done, .cursor = "0xab/3", .error = !strcmp(state, "failed") ? "why" : NULL};
  xgr_error e;
  assert_int_equal(xgr_store_batchop_progress(st, &op, ms, got, &e), 0);
  return got;
}

static xgr_store_batchop get(xgr_store *st, const char *id) {
  xgr_store_batchop op;
  xgr_error e;
  assert_int_equal(xgr_store_batchop_get(st, id, &op, &e), 0);
  return op;
}

static void test_batchops(void **state) {
  (void)state;
  assert_non_null(mkdtemp(dir));
  const char *pg = getenv("XGR_PG_URL");
  int kinds = pg && *pg ? 3 : 2;
  for (int k = 0; k < kinds; k++) {
    xgr_store *st = open_kind(k, false);
    xgr_error e;
    create(st, IDA, C1, 5, 0);
    create(st, IDB, C1, 5, 0);
    create(st, IDA, C1, 5, XGR_ECONFLICT);
    char id[40];
    int64_t ea = 0, eb = 0, ex = 0;
    claim(st, "n1", 60000, false, id, &ea);
    assert_string_equal(id, IDA);   /* the oldest first */
    assert_int_equal(ea, 1);
    claim(st, "n2", 60000, false, id, &eb);
    assert_string_equal(id, IDB);   /* A is n1's: left alone */
    claim(st, "n3", 60000, false, id, &ex);
    assert_string_equal(id, "");    /* both held */
    /* fenced progress */
    assert_string_equal(progress(st, IDA, "n1", ea, 2, "running", 60000), "running");
    xgr_store_batchop a = get(st, IDA);
    assert_int_equal(a.done, 2);
    assert_string_equal(a.cursor, "0xab/3");
    xgr_store_batchop_clear(&a);
    assert_string_equal(progress(st, IDA, "n1", ea + 1, 4, "running", 60000), "");   /* not its epoch */
    assert_string_equal(progress(st, IDA, "n2", ea, 4, "running", 60000), "");       /* not its claim */
    a = get(st, IDA);
    assert_int_equal(a.done, 2);
    xgr_store_batchop_clear(&a);
    /* an expired claim is taken over, the epoch raised; the old driver is fenced off */
    assert_string_equal(progress(st, IDB, "n2", eb, 1, "running", 1), "running");
    usleep(20000);
    claim(st, "n3", 60000, false, id, &ex);
    assert_string_equal(id, IDB);
    assert_int_equal(ex, eb + 1);
    assert_string_equal(progress(st, IDB, "n2", eb, 3, "running", 60000), "");
    /* cancel: running -> cancelled once; the driver's counts still land, the state stays */
    bool changed;
    assert_int_equal(xgr_store_batchop_cancel(st, IDA, &changed, &e), 0);
    assert_true(changed);
    assert_int_equal(xgr_store_batchop_cancel(st, IDA, &changed, &e), 0);
    assert_false(changed);
    assert_int_equal(xgr_store_batchop_cancel(st, IDC, &changed, &e), XGR_ENOTFOUND);
    assert_string_equal(progress(st, IDA, "n1", ea, 3, "done", 60000), "cancelled");
    a = get(st, IDA);
    assert_string_equal(a.state, "cancelled");
    assert_int_equal(a.done, 3);
    assert_true(a.finished_at > 0);
    xgr_store_batchop_clear(&a);
    /* done is final */
    assert_string_equal(progress(st, IDB, "n3", ex, 5, "done", 60000), "done");
    assert_string_equal(progress(st, IDB, "n3", ex, 5, "running", 60000), "done");
    xgr_store_batchop b = get(st, IDB);
    assert_string_equal(b.state, "done");
    assert_null(b.error);
    xgr_store_batchop_clear(&b);
    /* force takes a running operation whatever its claim (a store with a single writer) */
    create(st, IDC, C2, 1, 0);
    claim(st, "n1", 60000, false, id, &ex);
    assert_string_equal(id, IDC);
    claim(st, "n9", 60000, false, id, &ex);
    assert_string_equal(id, "");
    claim(st, "n9", 60000, true, id, &ex);
    assert_string_equal(id, IDC);
    assert_int_equal(ex, 2);
    assert_string_equal(progress(st, IDC, "n9", ex, 1, "failed", 60000), "failed");
    /* reads */
    xgr_store_batchop *ops;
    size_t n;
    assert_int_equal(xgr_store_batchops(st, NULL, 0, &ops, &n, &e), 0);
    assert_int_equal(n, 3);
    assert_string_equal(ops[0].id, IDC);   /* newest first (ties: id descending) */
    assert_string_equal(ops[0].error, "why");
    xgr_store_batchops_free(ops, n);
    assert_int_equal(xgr_store_batchops(st, C1, 1, &ops, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(ops[0].caller, C1);
    xgr_store_batchops_free(ops, n);
    xgr_store_batchop none;
    assert_int_equal(xgr_store_batchop_get(st, IDC "0", &none, &e), XGR_ENOTFOUND);
    xgr_store_close(st);
    if (k) {   /* the rows are durable */
      st = open_kind(k, true);
      a = get(st, IDA);
      assert_string_equal(a.state, "cancelled");
      assert_int_equal(a.done, 3);
      assert_int_equal(a.epoch, 1);
      assert_string_equal(a.driver, "n1");
      xgr_store_batchop_clear(&a);
      xgr_store_close(st);
    }
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* Whether operation id is in the store. */
static bool exists(xgr_store *st, const char *id) {
  xgr_store_batchop op;
  xgr_error e;
  int rc = xgr_store_batchop_get(st, id, &op, &e);
  assert_true(rc == 0 || rc == XGR_ENOTFOUND);
  xgr_store_batchop_clear(&op);
  return rc == 0;
}

#define ID(c) c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c   /* 32 times c */

static void test_batch_retention(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/xgr-test-batchops-XXXXXX");   /* the first test's was made and removed */
  assert_non_null(mkdtemp(dir));
  const char *pg = getenv("XGR_PG_URL");
  int kinds = pg && *pg ? 3 : 2;
  for (int k = 0; k < kinds; k++) {
    xgr_store_config cfg = {.batch_secs = 1, .gc_interval_ms = -1};   /* passes only when asked */
    xgr_store *st = open_cfg(k, false, &cfg);
    xgr_error e;
    char id[40];
    int64_t ep = 0;
    /* long ago: one done, one cancelled, one still running */
    create_bounded(st, ID("1"), C1, 3, 0, 0);
    claim(st, "n1", 60000, true, id, &ep);
    assert_string_equal(id, ID("1"));
    assert_string_equal(progress(st, ID("1"), "n1", ep, 5, "done", 60000), "done");
    create_bounded(st, ID("2"), C1, 3, 0, 0);
    bool changed;
    assert_int_equal(xgr_store_batchop_cancel(st, ID("2"), &changed, &e), 0);
    assert_true(changed);
    create_bounded(st, ID("3"), C1, 3, 0, 0);
    /* the bound on running ones: C1 has one; two more fit, a fourth does not (nothing written) */
    create_bounded(st, ID("4"), C1, 3, 0, 0);
    create_bounded(st, ID("5"), C1, 3, 0, 0);
    create_bounded(st, ID("6"), C1, 3, 0, XGR_ELIMIT);
    assert_false(exists(st, ID("6")));
    create_bounded(st, ID("7"), C2, 3, 0, 0);   /* another caller's are its own */
    assert_int_equal(xgr_store_batchop_cancel(st, ID("4"), &changed, &e), 0);
    assert_int_equal(xgr_store_batchop_cancel(st, ID("5"), &changed, &e), 0);
    assert_int_equal(xgr_store_batchop_cancel(st, ID("7"), &changed, &e), 0);
    usleep(1300000);   /* past batch_secs (PostgreSQL: its own clock) */
    /* recent: C2 finishes one more; keeping 1 finished of C2's at its next create drops 7 */
    create_bounded(st, ID("8"), C2, 3, 0, 0);
    assert_int_equal(xgr_store_batchop_cancel(st, ID("8"), &changed, &e), 0);
    usleep(5000);
    create_bounded(st, ID("9"), C2, 3, 1, 0);
    assert_false(exists(st, ID("7")));
    assert_true(exists(st, ID("8")) && exists(st, ID("9")));
    size_t deleted = 0;
    assert_int_equal(xgr_store_gc(st, &deleted, &e), 0);
    assert_true(deleted >= 4);
    assert_false(exists(st, ID("1")));   /* done long ago */
    assert_false(exists(st, ID("2")));   /* cancelled long ago */
    assert_false(exists(st, ID("4")) || exists(st, ID("5")));
    assert_true(exists(st, ID("3")));    /* running: never, however old */
    assert_true(exists(st, ID("8")));    /* finished within batch_secs */
    assert_true(exists(st, ID("9")));
    xgr_store_close(st);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_batchops), cmocka_unit_test(test_batch_retention)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
