/* test_xgrd_exec.c — executions (XRC-137 §8.3) through xgrd with --engine-key, from the outside:
 * a token transfer whose transaction and receipt appear in the session's history, a reverted
 * execution with its reason, and the crash test: xgrd SIGKILLed while executions are in flight,
 * restarted on the same store and journal, and afterwards every execution mined exactly once —
 * counted as the token's Transfer logs on the real anvil. Run a second time under
 * tests/pg/pg_cluster.sh (test_xgrd_exec_pg: XGR_PG_URL set) with the store — and so the
 * execution journal, the table exec_journal — in PostgreSQL. Also: a cluster node with the engine
 * key beside the single writer is refused, and a journal that refuses a write fails its step. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../daemon/harness.h"
#include "anvil.h"

static anvil node;
static xh_daemon xd;          /* the xgrd under test; its directory also holds the key and the bundle */
static const char *dir = xd.dir;
static char token[43];
static json_t *pub;
static const char *pg_url;    /* XGR_PG_URL: the store (and journal) in PostgreSQL; NULL: SQLite */

static json_t *call(const char *method, json_t *params) { return xh_call(&xd, method, params); }

static int key_no;   /* the dev account whose key xgrd signs with (k<N>.key) */

static int start_xgrd(void) {
  char key[300];
  snprintf(key, sizeof key, "%s/k%d.key", dir, key_no);
  xh_spawn(&xd, (const char *[]){"--auth", "none", "--chain", node.url, "--engine-key", key, "--store", xd.store,
                                 "--workers", "2", NULL});
  return xh_wait_port(&xd);
}

/* Stop xgrd with sig; true when it exited with status 0 (a clean stop; under ASan also the leak
 * check). */
static bool stop_xgrd(int sig) { return xh_stop(&xd, sig) == 0; }

static int setup(void **st) {
  (void)st;
  if (anvil_start(&node, NULL)) return -1;
  xh_init(&xd, "xgrd-exec");
  if (pg_url) snprintf(xd.store, sizeof xd.store, "%s", pg_url);
  char path[512];
  snprintf(path, sizeof path, "%s/k0.key", dir);
  if (anvil_key_file(0, path)) return -1;
  /* account 0 (the engine key) holds the supply */
  if (!(pub = anvil_pay_bundle(&node, dir, path, token))) return -1;
  return start_xgrd();
}

static int teardown(void **st) {
  (void)st;
  int bad = stop_xgrd(SIGTERM) ? 0 : -1;
  if (bad) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "tail -40 %s >&2", xd.log);
    if (system(cmd)) {}
  }
  xh_remove(&xd);
  json_decref(pub);
  anvil_stop(&node);
  return bad;
}

static void enqueue(uint64_t root, const char *to, const char *amount) {
  json_t *r = call("xgr.enqueue", json_pack("{s:s, s:s, s:s, s:I, s:{s:s, s:{s:s, s:s}}}", "owner", node.accounts[0], "xrc729",
                                            json_string_value(json_object_get(pub, "registry")), "ostcId", "Pay", "rootPid",
                                            (json_int_t)root, "init", "stepId", "Pay", "payload", "To", to, "Amount", amount));
  if (!json_object_get(r, "result")) fail_msg("enqueue %llu: %s", (unsigned long long)root, json_dumps(r, JSON_COMPACT));
  json_decref(r);
}

/* The execution record of session root's first step once it is settled (10 s at most). */
static json_t *settled(uint64_t root) {
  for (int i = 0; i < 400; i++) {
    json_t *r = call("xgr.getSession", json_pack("{s:s, s:I}", "owner", node.accounts[0], "rootPid", (json_int_t)root));
    json_t *x = json_object_get(json_array_get(json_object_get(json_object_get(r, "result"), "history"), 0), "execution");
    const char *status = json_string_value(json_object_get(x, "status"));
    if (status && strcmp(status, "pending")) {
      json_incref(x);
      json_decref(r);
      return x;
    }
    json_decref(r);
    xh_msleep(25);
  }
  fail_msg("session %llu: execution never settled", (unsigned long long)root);
  return NULL;
}

static void test_transfer_in_history(void **st) {
  (void)st;
  enqueue(1, node.accounts[5], "7");
  json_t *x = settled(1);
  assert_string_equal(json_string_value(json_object_get(x, "status")), "success");
  assert_true(json_is_true(json_object_get(x, "return")));
  assert_true(json_integer_value(json_object_get(x, "gasUsed")) > 21000);
  assert_true(json_integer_value(json_object_get(x, "blockNumber")) > 0);
  const char *hash = json_string_value(json_object_get(x, "txHash"));
  json_t *res;
  xgr_error e;
  assert_int_equal(xgr_chain_rpc(node.chain, NULL, "eth_getTransactionReceipt", json_pack("[s]", hash), &res, NULL, &e), 0);
  assert_string_equal(json_string_value(json_object_get(res, "from")), node.accounts[0]);
  json_decref(res);
  /* `xgr show` prints it under the step */
  char cmd[512], out[8192];
  snprintf(cmd, sizeof cmd, "%s show 1 --owner %s --url http://127.0.0.1:%d/", getenv("XGR"), node.accounts[0], xd.port);
  FILE *p = popen(cmd, "r");
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = 0;
  assert_int_equal(pclose(p), 0);
  char want[128];
  snprintf(want, sizeof want, "execution success %s", hash);
  if (!strstr(out, want)) fail_msg("xgr show lacks \"%s\": %s", want, out);
  json_decref(x);
}

static void test_reverted(void **st) {
  (void)st;
  enqueue(2, node.accounts[5], "99999999999");
  json_t *x = settled(2);
  assert_string_equal(json_string_value(json_object_get(x, "status")), "reverted");
  assert_string_equal(json_string_value(json_object_get(x, "revertReason")), "ERC20: insufficient balance");
  assert_non_null(json_string_value(json_object_get(x, "txHash")));
  json_decref(x);
}

/* Transfer(account 0 -> to) logs of the token. */
static size_t transfers_to(const char *to) {
  long n = anvil_transfers(&node, token, to);
  assert_true(n >= 0);
  return (size_t)n;
}

static void test_crash_exactly_once(void **st) {
  (void)st;
  enum { N = 30 };
  const char *to = node.accounts[6];
  for (uint64_t s = 0; s < N; s++) enqueue(100 + s, to, "1");
  stop_xgrd(SIGKILL);   /* executions in flight: some not signed, some signed and not sent, some sent */
  size_t before = transfers_to(to);
  printf("SIGKILL with %zu of %d transfers mined\n", before, N);
  assert_int_equal(start_xgrd(), 0);
  for (uint64_t s = 0; s < N; s++) {
    json_t *x = settled(100 + s);
    assert_string_equal(json_string_value(json_object_get(x, "status")), "success");
    json_decref(x);
  }
  /* exactly once: N Transfer logs and a balance of N */
  assert_int_equal(transfers_to(to), N);
  char *t = anvil_balance(&node, token, to);
  assert_string_equal(t, "[\"30\"]");
  free(t);
  /* a second restart sends nothing again */
  assert_true(stop_xgrd(SIGTERM));
  assert_int_equal(start_xgrd(), 0);
  xh_msleep(500);
  assert_int_equal(transfers_to(to), N);
  if (pg_url) {   /* the journal is the store database's table (no PATH-exec file beside a URI) */
    PGconn *c = PQconnectdb(pg_url);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PGresult *r = PQexec(c, "SELECT count(*) FILTER (WHERE state = 2), count(*) FILTER (WHERE state < 2),"
                            " count(DISTINCT nonce) FILTER (WHERE raw IS NOT NULL) FROM exec_journal");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_int_equal(atoi(PQgetvalue(r, 0, 0)), N + 2);   /* + test_transfer_in_history, test_reverted */
    assert_int_equal(atoi(PQgetvalue(r, 0, 1)), 0);
    assert_int_equal(atoi(PQgetvalue(r, 0, 2)), N + 2);
    PQclear(r);
    PQfinish(c);
  }
}

/* PostgreSQL only: the journal's connection is terminated by the server while xgrd runs (as when
 * the database restarts or a proxy drops it); the executor reconnects, takes its lock again and
 * every execution submitted afterwards is still mined exactly once. */
static void test_journal_connection_lost(void **st) {
  (void)st;
  if (!pg_url) skip();
  enum { M = 10 };
  const char *to = node.accounts[7];
  PGconn *c = PQconnectdb(pg_url);
  assert_int_equal(PQstatus(c), CONNECTION_OK);
  PGresult *r = PQexec(c, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                          " WHERE application_name = 'xgr exec journal'");
  assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
  assert_int_equal(atoi(PQgetvalue(r, 0, 0)), 1);
  PQclear(r);
  for (uint64_t s = 0; s < M; s++) enqueue(200 + s, to, "1");
  for (uint64_t s = 0; s < M; s++) {
    json_t *x = settled(200 + s);
    assert_string_equal(json_string_value(json_object_get(x, "status")), "success");
    json_decref(x);
  }
  assert_int_equal(transfers_to(to), M);
  r = PQexec(c, "SELECT count(*) FROM exec_journal WHERE root >= 200 AND root < 300 AND state = 2");
  assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
  assert_int_equal(atoi(PQgetvalue(r, 0, 0)), M);
  PQclear(r);
  PQfinish(c);
}

/* Make the execution journal refuse (on) or accept again (off) the intents of session root: a
 * trigger of the test on the real journal (the SQLite file PATH-exec, or PostgreSQL's table
 * exec_journal), as a full disk or a failing database would. */
static void journal_refuse(bool on, uint64_t root) {
  char sql[600];
  if (pg_url) {
    PGconn *c = PQconnectdb(pg_url);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    if (on)
      snprintf(sql, sizeof sql,
               "CREATE FUNCTION xgr_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.root = %llu THEN"
               " RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$;"
               "CREATE TRIGGER xgr_test_refuse BEFORE INSERT ON exec_journal FOR EACH ROW EXECUTE FUNCTION xgr_test_refuse()",
               (unsigned long long)root);
    else snprintf(sql, sizeof sql, "DROP TRIGGER xgr_test_refuse ON exec_journal; DROP FUNCTION xgr_test_refuse()");
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    return;
  }
  char path[1024];
  snprintf(path, sizeof path, "%s-exec", xd.store + (strncmp(xd.store, "sqlite:", 7) ? 0 : 7));
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  sqlite3_busy_timeout(db, 10000);
  if (on)
    snprintf(sql, sizeof sql,
             "CREATE TRIGGER xgr_test_refuse BEFORE INSERT ON chain_exec WHEN NEW.root = %llu"
             " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
             (unsigned long long)root);
  else snprintf(sql, sizeof sql, "DROP TRIGGER xgr_test_refuse");
  char *msg = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) fail_msg("%s: %s", sql, msg);
  sqlite3_close(db);
}

/* A journal write that fails fails its step (before: the step's result was applied and the
 * execution silently dropped). Session 500's intent is refused by the journal: its step ends in
 * a hard error that says so, and nothing is sent for it. Once the journal accepts writes again
 * the next session's execution goes out as before. */
static void test_journal_write_fails(void **st) {
  (void)st;
  const char *to = node.accounts[9];
  size_t before = transfers_to(to);
  journal_refuse(true, 500);
  enqueue(500, to, "1");
  const char *error = NULL;
  json_t *r = NULL;
  for (int i = 0; i < 400 && !error; i++) {
    json_decref(r);
    xh_msleep(25);
    r = call("xgr.getSession", json_pack("{s:s, s:I}", "owner", node.accounts[0], "rootPid", (json_int_t)500));
    json_t *h = json_array_get(json_object_get(json_object_get(r, "result"), "history"), 0);
    error = json_string_value(json_object_get(h, "error"));
  }
  if (!error) fail_msg("session 500: no hard error: %s", json_dumps(r, JSON_COMPACT));
  if (!strstr(error, "execution: the execution could not be written to the execution journal") ||
      !strstr(error, "refused by the test") || !strstr(error, "[io_error]"))
    fail_msg("session 500: unexpected error: %s", error);
  json_t *h = json_array_get(json_object_get(json_object_get(r, "result"), "history"), 0);
  json_t *x = json_object_get(h, "execution");
  if (x && !json_is_null(x)) fail_msg("session 500: an execution in history: %s", json_dumps(h, JSON_COMPACT));
  json_decref(r);
  journal_refuse(false, 500);
  enqueue(501, to, "1");
  json_t *ok = settled(501);
  assert_string_equal(json_string_value(json_object_get(ok, "status")), "success");
  json_decref(ok);
  assert_int_equal(transfers_to(to), before + 1);   /* 501's only: nothing was ever sent for 500 */
  static char log[1 << 20];
  if (!strstr(xh_read_log(&xd, log, sizeof log), "execution journal write failed; the step fails"))
    fail_msg("the log does not say so");
}

/* Run xgrd with args (a shell fragment) to its exit: the exit status, stderr in out. */
static int run_xgrd(const char *args, char *out, size_t cap) {
  char cmd[2048], log[400];
  snprintf(log, sizeof log, "%s/run.log", dir);
  snprintf(cmd, sizeof cmd, "timeout 60 '%s' --auth none --listen 127.0.0.1:0 %s 2>%s", getenv("XGRD"), args, log);
  int rc = system(cmd);
  FILE *f = fopen(log, "r");
  size_t n = f ? fread(out, 1, cap - 1, f) : 0;
  out[n] = 0;
  if (f) fclose(f);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* PostgreSQL only: a second xgrd executing from the same schema's journal while the first runs
 * is refused (the journal's advisory lock, waited for 10 s; exit 3, a failure to start), so one
 * key's nonces are allocated by one executor. */
static void test_second_executor_refused(void **st) {
  (void)st;
  if (!pg_url) skip();
  char args[1200], out[4096];
  snprintf(args, sizeof args, "--chain %s --engine-key %s/k0.key --store '%s'", node.url, dir, pg_url);
  int rc = run_xgrd(args, out, sizeof out);
  if (rc != 3 || !strstr(out, "another xgrd sends executions from the execution journal of this database schema"))
    fail_msg("second executor: exit %d: %s", rc, out);
  /* the first one still works */
  enqueue(300, node.accounts[8], "1");
  json_t *x = settled(300);
  assert_string_equal(json_string_value(json_object_get(x, "status")), "success");
  json_decref(x);
}

/* PostgreSQL only: a cluster node (--node-id) with the engine key beside a single writer that
 * sends from the same schema's journal is refused (exit 3): the nodes share the journal's lock,
 * the single writer holds it alone (cluster executions: test_cluster_exec). */
static void test_cluster_node_beside_single_writer(void **st) {
  (void)st;
  if (!pg_url) skip();
  char args[1200], out[4096];
  snprintf(args, sizeof args, "--chain %s --engine-key %s/k0.key --node-id n1 --store '%s'", node.url, dir, pg_url);
  int rc = run_xgrd(args, out, sizeof out);
  if (rc != 3 || !strstr(out, "a single xgrd (without --node-id) sends executions from the execution journal"))
    fail_msg("cluster node beside the single writer: exit %d: %s", rc, out);
}

/* The engine key is changed (xgrd restarted with dev account 1's key on the same store and
 * journal): the new key's first execution takes the new key's own next nonce, not one past the
 * old key's journaled nonces (a gap that would leave it pending forever). */
static void test_key_changed(void **st) {
  (void)st;
  char path[512];
  snprintf(path, sizeof path, "%s/k1.key", dir);
  assert_int_equal(anvil_key_file(1, path), 0);
  assert_true(stop_xgrd(SIGTERM));
  key_no = 1;
  assert_int_equal(start_xgrd(), 0);
  enqueue(400, node.accounts[8], "0");   /* account 1 holds no tokens: a transfer of 0 */
  json_t *x = settled(400);
  assert_string_equal(json_string_value(json_object_get(x, "status")), "success");
  json_t *res;
  xgr_error e;
  assert_int_equal(xgr_chain_rpc(node.chain, NULL, "eth_getTransactionReceipt",
                                 json_pack("[s]", json_string_value(json_object_get(x, "txHash"))), &res, NULL, &e),
                   0);
  assert_string_equal(json_string_value(json_object_get(res, "from")), node.accounts[1]);
  json_decref(res);
  json_decref(x);
}

int main(void) {
  if (!anvil_test_begin()) return 77;
  pg_url = getenv("XGR_PG_URL");
  if (pg_url && !*pg_url) pg_url = NULL;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_transfer_in_history), cmocka_unit_test(test_reverted),
                                     cmocka_unit_test(test_crash_exactly_once), cmocka_unit_test(test_journal_connection_lost),
                                     cmocka_unit_test(test_second_executor_refused),
                                     cmocka_unit_test(test_cluster_node_beside_single_writer),
                                     cmocka_unit_test(test_journal_write_fails), cmocka_unit_test(test_key_changed)};
  return anvil_test_end(cmocka_run_group_tests(tests, setup, teardown));
}
