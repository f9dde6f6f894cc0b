/* test_lease.c — leases with fencing epochs on the PostgreSQL store (issue 18, docs/CLUSTER.md),
 * through the store's API with two and three nodes on one schema: claims take only free,
 * expired or dead nodes' sessions; a node that lost a lease has its late writes refused
 * (XGR_ELEASE) — without a round trip when it no longer holds the session, by the fence when
 * another node claimed it meanwhile — and its heartbeat reports the loss; release gives the
 * sessions up; a killed node's sessions are claimable at once although their lease has not run
 * out; with hibernation, claims that hold sessions without loading them, the node's own due index
 * and a hibernated session's late write refused; two claims of one session on one node finishing
 * out of order (the earlier does nothing); a row naming a node that does not hold it given up by
 * its heartbeat; rebalancing hands hibernated sessions to a node below its share. Runs under tests/pg/pg_cluster.sh (XGR_PG_URL); skipped without it.
 *
 * No case depends on how much time passes between its steps (a loaded machine may stall the
 * process for seconds anywhere): a lease that must still hold is one of LONG_MS, a minute, and a
 * lease that must have run out is written into the past with SQL (lapse, as a node that stalled
 * past it leaves it) instead of being slept past. Each case has its own schema, its own node ids,
 * and its teardown closes the stores it left open, so a failing case leaves nothing that the
 * next one would trip over (rows, a live node id). */
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

#include "xgr/store.h"

#define OWNER "0x00000000000000000000000000000000000000aa"

static char base_url[1024], url[1280];   /* the database; the current case's schema in it */

static void sleep_ms(long ms) { nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL); }

/* A lease that no stall of the test can outlast: every lease that must still hold when the case
 * looks at it. */
#define LONG_MS 60000

static void sql(const char *q) {
  PGconn *c = PQconnectdb(url);
  assert_int_equal(PQstatus(c), CONNECTION_OK);
  PGresult *r = PQexec(c, q);
  if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) fail_msg("%s: %s", q, PQerrorMessage(c));
  PQclear(r);
  PQfinish(c);
}

static char *sql_value(const char *q) {
  PGconn *c = PQconnectdb(url);
  PGresult *r = PQexec(c, q);
  assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
  char *v = strdup(PQntuples(r) ? PQgetvalue(r, 0, 0) : "");
  PQclear(r);
  PQfinish(c);
  return v;
}

/* The one value query q reads equals want. */
static void assert_sql(const char *q, const char *want) {
  char *v = sql_value(q);
  assert_string_equal(v, want);
  free(v);
}

/* Wait until the one value query q reads equals want (a condition of the database, polled every
 * millisecond; fails after 10,000 polls). */
static void wait_sql(const char *q, const char *want) {
  char *v = NULL;
  for (int i = 0; i < 10000; i++) {
    free(v);
    v = sql_value(q);
    if (!strcmp(v, want)) break;
    sleep_ms(1);
  }
  assert_string_equal(v, want);
  free(v);
}

/* Session root's row is leased as want: "node/epoch" ("/epoch" when nobody holds it). */
static void assert_holder(unsigned root, const char *want) {
  char q[160];
  snprintf(q, sizeof q, "SELECT COALESCE(lease_owner, '') || '/' || lease_epoch FROM sessions WHERE root_pid = %u", root);
  assert_sql(q, want);
}

/* The stores the current case opened and has not closed (its teardown closes them: a failed case
 * must not leave a live node behind) */
static xgr_store *opened[8];

static xgr_store *node(const char *id, int64_t lease_ms) {
  xgr_store_config cfg = {.node_id = id, .lease_ms = lease_ms};
  xgr_error err;
  xgr_store *st = xgr_store_open(url, &cfg, &err);
  if (!st) fail_msg("open node %s: %s", id, err.message);
  size_t i = 0;
  while (i < sizeof opened / sizeof *opened && opened[i]) i++;
  assert_true(i < sizeof opened / sizeof *opened);
  opened[i] = st;
  assert_string_equal(xgr_store_node_id(st), id);
  return st;
}

/* Close a node's store (its connections close: the node is dead to the others). */
static void close_node(xgr_store *st) {
  for (size_t i = 0; i < sizeof opened / sizeof *opened; i++)
    if (opened[i] == st) opened[i] = NULL;
  xgr_store_close(st);
}

/* Node id's leases run out, as they would if it stalled past them, written into the past instead
 * of slept past: rows_lapse the running rows naming it (their own lease_expires, set by a claim or
 * an insert), node_lapse its node's lease (its row in nodes, which its heartbeats extend); lapse
 * both. A row is free for another node only when both ran out (or its node is dead). The node
 * itself stays alive (its lock). */
static void rows_lapse(const char *id) {
  char q[200];
  snprintf(q, sizeof q, "UPDATE sessions SET lease_expires = xgr_ms_now() - 1 WHERE lease_owner = '%s' AND status = 0", id);
  sql(q);
}
static void node_lapse(const char *id) {
  char q[200];
  snprintf(q, sizeof q, "UPDATE nodes SET expires_at = xgr_ms_now() - 1 WHERE node = '%s'", id);
  sql(q);
}
static void lapse(const char *id) {
  rows_lapse(id);
  node_lapse(id);
}

static int count_live(void *ctx, const xgr_store_live *l) {
  (void)l;
  ++*(int *)ctx;
  return 0;
}

static size_t claim(xgr_store *st) {
  size_t n = 0;
  int loaded = 0;
  xgr_error err;
  assert_int_equal(xgr_store_lease_claim(st, NULL, 0, false, 0, NULL, count_live, &loaded, &n, &err), 0);
  assert_int_equal((size_t)loaded, n);
  return n;
}

/* a state write of session root: its next_iter */
static int write_state(xgr_store *st, uint64_t root, uint64_t next_iter, xgr_error *err) {
  xgr_store_changes *c = xgr_store_changes_new();
  xgr_store_changes_session_state(c, OWNER, root, 0, 0, next_iter, 1, false);
  return xgr_store_commit(st, c, err);
}

/* the same, leaving the session hibernated until `due` */
static int write_state_due(xgr_store *st, uint64_t root, uint64_t next_iter, int64_t due, xgr_error *err) {
  xgr_store_changes *c = xgr_store_changes_new();
  xgr_store_changes_session_state(c, OWNER, root, 0, 0, next_iter, 1, false);
  xgr_store_changes_set_due(c, due);
  return xgr_store_commit(st, c, err);
}

static void on_lost(void *ctx, const char *owner, uint64_t root) {
  assert_string_equal(owner, OWNER);
  assert_int_equal(root, 1);
  ++*(int *)ctx;
}

static void test_fencing(void **state) {
  (void)state;
  sql("INSERT INTO sessions(owner, root_pid, ostc_id, ostc_hash, status, created_at, next_iter) VALUES('" OWNER
      "', 1, 't', '', 0, 1, 2)");
  xgr_store *a = node("fa", LONG_MS), *b = node("fb", LONG_MS);
  xgr_error err;
  assert_int_equal(claim(a), 1);   /* unleased: a takes it */
  assert_true(xgr_store_lease_held(a, OWNER, 1));
  assert_int_equal(claim(b), 0);   /* a is alive and its lease runs */
  assert_int_equal(write_state(a, 1, 5, &err), 0);
  /* b does not hold it: refused before anything is sent */
  assert_int_equal(write_state(b, 1, 99, &err), XGR_ELEASE);
  char node_id[64];
  bool valid = false, running = false;
  assert_int_equal(xgr_store_lease_holder(b, OWNER, 1, node_id, sizeof node_id, &valid, &running, &err), 0);
  assert_string_equal(node_id, "fa");
  assert_true(valid && running);

  /* a stalls past its lease: b claims (epoch 3), a's late write fails the fence in its transaction */
  lapse("fa");
  assert_int_equal(claim(b), 1);
  assert_holder(1, "fb/3");
  assert_int_equal(write_state(a, 1, 42, &err), XGR_ELEASE);
  assert_non_null(strstr(err.message, "lease"));
  assert_sql("SELECT next_iter FROM sessions WHERE root_pid = 1", "5");   /* nothing of the late write */
  xgr_store_lease_stats s;
  xgr_store_lease_get_stats(a, &s);
  assert_int_equal(s.refused_batches, 1);
  assert_int_equal(s.held, 0);   /* the refusal made a forget it */
  assert_int_equal(write_state(b, 1, 6, &err), 0);

  /* heartbeat: b renews; a session b lost is reported once */
  int lost = 0;
  assert_int_equal(xgr_store_lease_renew(b, on_lost, &lost, &err), 0);
  assert_int_equal(lost, 0);
  sql("UPDATE sessions SET lease_epoch = lease_epoch + 1 WHERE root_pid = 1");   /* as a claim elsewhere would */
  assert_int_equal(xgr_store_lease_renew(b, on_lost, &lost, &err), 0);
  assert_int_equal(lost, 1);
  assert_false(xgr_store_lease_held(b, OWNER, 1));
  assert_int_equal(write_state(b, 1, 7, &err), XGR_ELEASE);

  /* release: nobody holds it; a takes it back at once */
  assert_int_equal(xgr_store_lease_release_all(b, &err), 0);
  assert_int_equal(claim(a), 1);
  assert_int_equal(write_state(a, 1, 8, &err), 0);

  /* a dies (its connections close): c claims at once, although a's lease still runs */
  close_node(a);
  xgr_store *c = node("fc", LONG_MS);
  assert_int_equal(claim(c), 1);
  assert_int_equal(write_state(c, 1, 9, &err), 0);
  /* a session that ended needs no lease: forgotten, not lost */
  xgr_store_changes *ch = xgr_store_changes_new();
  xgr_store_changes_session_state(ch, OWNER, 1, XGR_RESULT_COMPLETED, 0, 10, 1, false);
  assert_int_equal(xgr_store_commit(c, ch, &err), 0);
  assert_false(xgr_store_lease_held(c, OWNER, 1));
  lost = 0;
  assert_int_equal(xgr_store_lease_renew(c, on_lost, &lost, &err), 0);
  assert_int_equal(lost, 0);
  close_node(b);
  close_node(c);
}

static int64_t bound_1000(void *ctx) {
  (void)ctx;
  return 1000;
}

static void count_lost(void *ctx, const char *owner, uint64_t root) {
  (void)owner, (void)root;
  ++*(int *)ctx;
}

/* Hibernation on cluster nodes (docs/CLUSTER.md "Hibernation"): a claim holds the sessions that
 * sleep beyond its bound without loading them; a node's due index shows only its rows; heartbeats
 * keep hibernated leases; another live node cannot load one; a node that stalled while it held a
 * session hibernated cannot load it back once it was claimed elsewhere, and its late write of it
 * is refused by the fence. */
static void test_hibernated(void **state) {
  (void)state;
  sql("INSERT INTO sessions(owner, root_pid, ostc_id, ostc_hash, status, created_at, next_iter, wake_due) VALUES"
      "('" OWNER "', 2, 't', '', 0, 1, 2, 1000000000000), ('" OWNER "', 3, 't', '', 0, 1, 2, NULL),"
      "('" OWNER "', 4, 't', '', 0, 1, 2, 500)");
  xgr_store *a = node("ia", LONG_MS), *b = node("ib", LONG_MS);
  xgr_error err;
  size_t n = 0, nl = 0;
  int loaded = 0;
  assert_int_equal(xgr_store_lease_claim_lazy(a, NULL, 0, false, 0, bound_1000, NULL, count_live, &loaded, &n, &nl,
                                              &err), 0);
  assert_int_equal(n, 3);                 /* all three are a's now ... */
  assert_int_equal(nl, 2);                /* ... the awake one and the one due by 1000 loaded */
  assert_int_equal(loaded, 2);
  assert_true(xgr_store_lease_held(a, OWNER, 2));   /* held hibernated: its epoch is remembered */
  assert_true(xgr_store_lease_current(a, OWNER, 2));   /* its row agrees: a loads it without a claim */
  assert_false(xgr_store_lease_current(b, OWNER, 2));
  xgr_store_lease_stats s;
  xgr_store_lease_get_stats(a, &s);
  assert_int_equal(s.claimed_hibernated, 1);
  /* the due index of a node: its own rows with a due time, in due order; b has none */
  xgr_store_due_key k[4];
  assert_int_equal(xgr_store_lease_due(a, NULL, INT64_MAX, k, 4, &n, &err), 0);
  assert_int_equal(n, 2);
  assert_int_equal(k[0].root_pid, 4);
  assert_int_equal(k[1].root_pid, 2);
  assert_int_equal(xgr_store_lease_due(a, &k[0], INT64_MAX, k, 4, &n, &err), 0);   /* after the cursor */
  assert_int_equal(n, 1);
  assert_int_equal(k[0].root_pid, 2);
  assert_int_equal(xgr_store_lease_due(b, NULL, INT64_MAX, k, 4, &n, &err), 0);
  assert_int_equal(n, 0);
  /* the heartbeat extends the hibernated lease too: past the rows' own lease (the claim's) b still
   * cannot take them. Before the beat nothing else held them (no row of a in nodes); after it, a's
   * node lease runs. */
  rows_lapse("ia");
  assert_sql("SELECT count(*) FROM nodes WHERE node = 'ia'", "0");
  int lost = 0;
  assert_int_equal(xgr_store_lease_renew(a, count_lost, &lost, &err), 0);
  assert_sql("SELECT expires_at > xgr_ms_now() FROM nodes WHERE node = 'ia'", "t");
  assert_sql("SELECT count(*) FROM sessions WHERE lease_owner = 'ia' AND lease_expires >= xgr_ms_now()", "0");
  assert_int_equal(claim(b), 0);
  loaded = 0;
  assert_int_equal(xgr_store_lease_claim(b, OWNER, 2, true, 1, NULL, count_live, &loaded, &n, &err), 0);
  assert_int_equal(n, 0);                 /* b may not load a session a holds */
  /* a writes it under the epoch it remembered (and it stays hibernated) */
  assert_int_equal(write_state_due(a, 2, 5, 1000000000000, &err), 0);

  /* a stalls past its lease; b claims the hibernated session without loading it */
  lapse("ia");
  loaded = 0;
  assert_int_equal(xgr_store_lease_claim_lazy(b, NULL, 0, false, 0, bound_1000, NULL, count_live, &loaded, &n, &nl,
                                              &err), 0);
  assert_int_equal(n, 3);
  assert_int_equal(nl, 2);
  assert_holder(2, "ib/3");
  /* a comes back: it cannot load the session (b holds it) and its late write is refused */
  assert_true(xgr_store_lease_held(a, OWNER, 2));   /* a's memory still says so ... */
  assert_false(xgr_store_lease_current(a, OWNER, 2));   /* ... its row does not */
  loaded = 0;
  assert_int_equal(xgr_store_lease_claim(a, OWNER, 2, true, 1, NULL, count_live, &loaded, &n, &err), 0);
  assert_int_equal(n, 0);
  assert_int_equal(loaded, 0);
  assert_int_equal(write_state_due(a, 2, 42, 1000000000000, &err), XGR_ELEASE);
  assert_sql("SELECT next_iter FROM sessions WHERE root_pid = 2", "5");   /* nothing of the late write */
  lost = 0;
  assert_int_equal(xgr_store_lease_renew(a, count_lost, &lost, &err), 0);
  assert_int_equal(lost, 2);              /* 3 and 4 (2 was forgotten with the refusal) */
  xgr_store_lease_get_stats(a, &s);
  assert_int_equal(s.held, 0);
  /* b loads it under its lease (the epoch goes up) and writes */
  loaded = 0;
  assert_int_equal(xgr_store_lease_claim(b, OWNER, 2, true, 1, NULL, count_live, &loaded, &n, &err), 0);
  assert_int_equal(n, 1);
  assert_int_equal(loaded, 1);
  assert_holder(2, "ib/4");
  assert_int_equal(write_state(b, 2, 6, &err), 0);
  close_node(a);
  close_node(b);
  sql("DELETE FROM sessions WHERE root_pid IN (2, 3, 4)");
}

/* Two claims of one session on one node that finish out of order (a claim round and a load on
 * other threads in xgrd): the later claim (higher epoch) loaded the session; the earlier one, when
 * it gets to the session, must do nothing — neither drop the later one's incarnation (its
 * `before`) nor hold or load it from its own older rows, which would run again what the later
 * one committed, under the epoch the fence now accepts. The earlier claim's bound callback runs
 * right after its claim committed, so the later claim is made there. */
typedef struct race {
  xgr_store *st;
  int before_calls, loads, inner_loads;
  size_t inner_claimed;
} race;

static bool race_before(void *ctx, const char *owner, uint64_t root) {
  (void)owner, (void)root;
  ((race *)ctx)->before_calls++;
  return true;
}

static int race_load(void *ctx, const xgr_store_live *l) {
  (void)l;
  ((race *)ctx)->loads++;
  return 0;
}

static int race_inner_load(void *ctx, const xgr_store_live *l) {
  (void)l;
  ((race *)ctx)->inner_loads++;
  return 0;
}

static int64_t race_bound(void *ctx) {   /* the later claim, made inside the earlier one */
  race *r = ctx;
  xgr_error err;
  assert_int_equal(xgr_store_lease_claim(r->st, OWNER, 5, true, 1, NULL, race_inner_load, r, &r->inner_claimed, &err), 0);
  return 1000;
}

static void test_stale_claim(void **state) {
  (void)state;
  sql("INSERT INTO sessions(owner, root_pid, ostc_id, ostc_hash, status, created_at, next_iter, wake_due) VALUES"
      "('" OWNER "', 5, 't', '', 0, 1, 2, 1000000000000)");
  xgr_store *a = node("sa", LONG_MS);
  xgr_error err;
  race r = {.st = a};
  size_t n = 0, nl = 0;
  /* the earlier claim: epoch 2 (it would only hold the session: due beyond its bound) */
  assert_int_equal(xgr_store_lease_claim_lazy(a, OWNER, 5, true, 1, race_bound, race_before, race_load, &r, &n, &nl,
                                              &err), 0);
  assert_int_equal(n, 1);
  assert_int_equal(r.inner_claimed, 1);   /* the later claim: epoch 3, loaded */
  assert_int_equal(r.inner_loads, 1);
  assert_int_equal(r.before_calls, 0);    /* the earlier one dropped nothing ... */
  assert_int_equal(r.loads, 0);           /* ... and loaded nothing */
  xgr_store_lease_stats s;
  xgr_store_lease_get_stats(a, &s);
  assert_int_equal(s.stale_claims, 1);
  assert_holder(5, "sa/3");
  assert_true(xgr_store_lease_current(a, OWNER, 5));   /* the node holds the later epoch */
  assert_int_equal(write_state_due(a, 5, 7, 1000000000000, &err), 0);

  /* the same when the earlier claim would load it (due within its bound) */
  sql("UPDATE sessions SET wake_due = 500 WHERE root_pid = 5");
  r = (race){.st = a};
  assert_int_equal(xgr_store_lease_claim_lazy(a, OWNER, 5, true, 1, race_bound, race_before, race_load, &r, &n, &nl,
                                              &err), 0);
  assert_int_equal(r.inner_loads, 1);
  assert_int_equal(r.before_calls, 0);
  assert_int_equal(r.loads, 0);
  assert_holder(5, "sa/5");
  assert_int_equal(write_state(a, 5, 8, &err), 0);
  close_node(a);
  sql("DELETE FROM sessions WHERE root_pid = 5");
}

/* A row naming a node that the node does not hold runs nowhere while the node's heartbeats renew
 * it: after a few beats at one epoch the heartbeat gives it up, and a claim (of any node) takes
 * it. A row the node holds is never given up. */
static void test_orphan_released(void **state) {
  (void)state;
  sql("INSERT INTO sessions(owner, root_pid, ostc_id, ostc_hash, status, created_at, next_iter, wake_due) VALUES"
      "('" OWNER "', 6, 't', '', 0, 1, 2, 1000000000000), ('" OWNER "', 7, 't', '', 0, 1, 2, 1000000000000)");
  xgr_store *a = node("oa", LONG_MS), *b = node("ob", LONG_MS);
  xgr_error err;
  assert_int_equal(claim(a), 2);
  xgr_store_lease_forget(a, OWNER, 6);   /* a could not load it: it no longer holds 6 */
  assert_false(xgr_store_lease_held(a, OWNER, 6));
  assert_int_equal(write_state(a, 6, 9, &err), XGR_ELEASE);
  int lost = 0;
  for (int beat = 0; beat < 2; beat++) {
    assert_int_equal(xgr_store_lease_renew(a, count_lost, &lost, &err), 0);
    assert_sql("SELECT lease_owner FROM sessions WHERE root_pid = 6", "oa");   /* not yet: a claim in progress holds it */
    assert_int_equal(claim(b), 0);
  }
  assert_int_equal(xgr_store_lease_renew(a, count_lost, &lost, &err), 0);   /* the third beat */
  assert_int_equal(lost, 0);
  xgr_store_lease_stats s;
  xgr_store_lease_get_stats(a, &s);
  assert_int_equal(s.orphans_released, 1);
  assert_holder(6, "/2");
  assert_int_equal(claim(b), 1);          /* free now: b takes 6, not 7 (a holds it) */
  assert_true(xgr_store_lease_held(b, OWNER, 6));
  assert_int_equal(write_state(b, 6, 10, &err), 0);
  assert_holder(7, "oa/2");
  close_node(a);
  close_node(b);
  sql("DELETE FROM sessions WHERE root_pid IN (6, 7)");
}

/* A single writer (no node id) and cluster nodes exclude each other. */
static void test_single_writer_excludes_nodes(void **state) {
  (void)state;
  xgr_store *a = node("wa", LONG_MS);
  xgr_store_config cfg = {.busy_timeout_ms = 200};
  xgr_error err;
  xgr_store *w = xgr_store_open(url, &cfg, &err);
  assert_null(w);
  assert_non_null(strstr(err.message, "another xgr process writes"));
  assert_int_equal(xgr_store_lease_claim(w, NULL, 0, false, 0, NULL, NULL, NULL, NULL, &err), XGR_EUNSUPPORTED);
  close_node(a);
}

/* Rebalancing (docs/CLUSTER.md "Rebalancing"): a node above its share gives up hibernated sessions
 * beyond `after` that it holds and that are not busy (in memory), the longest sleepers first;
 * then, at its share, it leaves the released rows to the node below its share for a lease. */
static bool busy_129(void *ctx, const char *owner, uint64_t root) {
  (void)ctx;
  (void)owner;
  return root == 129;
}

static void test_balance(void **state) {
  (void)state;
  sql("DELETE FROM sessions; DELETE FROM nodes");
  sql("INSERT INTO sessions(owner, root_pid, ostc_id, ostc_hash, status, created_at, next_iter, wake_due)"
      " SELECT '" OWNER "', 100 + i, 't', '', 0, 1, 2, 1000000000000 + i FROM generate_series(0, 29) i");
  sql("INSERT INTO sessions(owner, root_pid, ostc_id, ostc_hash, status, created_at, next_iter) VALUES('" OWNER
      "', 130, 't', '', 0, 1, 2)");
  xgr_store *a = node("ba", LONG_MS);
  xgr_error err;
  size_t n = 0, nl = 0;
  int loaded = 0, lost = 0;
  assert_int_equal(xgr_store_lease_claim_lazy(a, NULL, 0, false, 0, bound_1000, NULL, count_live, &loaded, &n, &nl,
                                              &err), 0);
  assert_int_equal(n, 31);
  assert_int_equal(nl, 1);
  assert_int_equal(xgr_store_lease_renew(a, count_lost, &lost, &err), 0);
  /* alone: its share is everything */
  assert_int_equal(xgr_store_lease_balance(a, 0, 256, NULL, NULL, &n, &err), 0);
  assert_int_equal(n, 0);
  xgr_store *b = node("bb", LONG_MS);
  assert_int_equal(xgr_store_lease_renew(b, count_lost, &lost, &err), 0);   /* b's row: two live nodes */
  /* share 16 (slack 8): a gives up to 15, but only what sleeps beyond `after` (121..129) and is not
   * busy (129): 121..128 */
  assert_int_equal(xgr_store_lease_balance(a, 1000000000020, 256, busy_129, NULL, &n, &err), 0);
  assert_int_equal(n, 8);
  xgr_store_lease_stats s;
  xgr_store_lease_get_stats(a, &s);
  assert_true(s.handed_over == 8 && s.nodes == 2 && s.share == 16 && s.held == 23);
  assert_holder(121, "/2");
  assert_holder(128, "/2");
  assert_holder(129, "ba/2");
  assert_holder(120, "ba/2");
  assert_false(xgr_store_lease_held(a, OWNER, 121));
  /* a holds its share: its claim round leaves the released rows to b; b takes them */
  assert_int_equal(claim(a), 0);
  assert_int_equal(xgr_store_lease_claim_lazy(b, NULL, 0, false, 0, bound_1000, NULL, count_live, &loaded, &n, &nl,
                                              &err), 0);
  assert_int_equal(n, 8);
  assert_int_equal(nl, 0);                /* held hibernated, not loaded */
  assert_holder(121, "bb/3");
  /* 23 against 8: a is above 16 + 8 no more, so nothing moves; nothing beyond `after` either */
  assert_int_equal(xgr_store_lease_balance(a, 0, 256, NULL, NULL, &n, &err), 0);
  assert_int_equal(n, 0);
  /* b stops (its row goes): a alone again */
  assert_int_equal(xgr_store_lease_release_all(b, &err), 0);
  assert_sql("SELECT count(*) FROM nodes WHERE node = 'bb'", "0");
  close_node(b);
  assert_int_equal(xgr_store_lease_balance(a, 0, 256, NULL, NULL, &n, &err), 0);
  xgr_store_lease_get_stats(a, &s);
  assert_int_equal(s.nodes, 1);
  close_node(a);
  sql("DELETE FROM sessions");
}

/* A claim asks once per node whether it is alive, not once per row: 600 sessions leased to a,
 * one claim round of b, and the server's count of xgr_node_alive calls (track_functions) stays
 * at the number of nodes. (It was once per leased row: 0.74 s per claim with 17,000 sessions, so
 * a busy node's lease thread missed its heartbeats.) */
static void test_claim_asks_each_node_once(void **state) {
  (void)state;
  sql("DELETE FROM sessions");
  sql("INSERT INTO sessions(owner, root_pid, ostc_id, ostc_hash, status, created_at, next_iter)"
      " SELECT '" OWNER "', 1000 + i, 't', '', 0, 1, 2 FROM generate_series(1, 600) i");
  xgr_store *a = node("qa", LONG_MS);
  size_t total = 0, n;
  while ((n = claim(a))) total += n;
  assert_int_equal(total, 600);
  sql("ALTER DATABASE xgr SET track_functions = 'all'");
  xgr_store *b = node("qb", LONG_MS);   /* its connections start with the setting */
  sql("SELECT pg_stat_reset_single_function_counters('xgr_node_alive(text)'::regprocedure)");
  sleep_ms(1100);                  /* b's connection flushes its counters at once (not in 10 s) only
                                    * when its last flush is a second old */
  assert_int_equal(claim(b), 0);   /* a is alive and its leases run */
  char *calls = NULL;
  for (int i = 0; i < 150; i++) {
    free(calls);
    calls = sql_value("SELECT COALESCE((SELECT calls FROM pg_stat_user_functions WHERE funcname = 'xgr_node_alive'"
                      " AND schemaname = current_schema()), 0)");
    if (strcmp(calls, "0")) break;
    sleep_ms(100);
  }
  sql("ALTER DATABASE xgr RESET track_functions");
  if (atoi(calls) < 1 || atoi(calls) > 2) fail_msg("xgr_node_alive was called %s times for one claim over 600 rows of one node", calls);
  free(calls);
  close_node(b);
  close_node(a);
  sql("DELETE FROM sessions");
}

/* The heartbeat renews all of a node's leases by one write (its row in `nodes`), not one per
 * session: the session rows are not rewritten (their xmin stays), yet past their own lease_expires
 * another node cannot claim them while the heartbeats go on (each extends the node's expiry), and
 * can once they stop (the node's expiry ran out). */
static void test_heartbeat_one_write(void **state) {
  (void)state;
  sql("DELETE FROM sessions");
  sql("INSERT INTO sessions(owner, root_pid, ostc_id, ostc_hash, status, created_at, next_iter)"
      " SELECT '" OWNER "', 2000 + i, 't', '', 0, 1, 2 FROM generate_series(1, 50) i");
  xgr_store *a = node("ha", LONG_MS), *b = node("hb", LONG_MS);
  assert_int_equal(claim(a), 50);
  xgr_error err;
  int lost = 0;
  rows_lapse("ha");   /* past the rows' own lease (the claim's) */
  char *before = sql_value("SELECT string_agg(xmin::text, ',' ORDER BY root_pid) FROM sessions");
  for (int i = 0; i < 4; i++) {   /* 4 beats, each extending the node's lease beyond the last one's */
    char *was = sql_value("SELECT COALESCE(max(expires_at), 0) FROM nodes WHERE node = 'ha'");
    char q[200];
    /* a beat made now writes a later expiry: the database's clock has moved on since the last */
    snprintf(q, sizeof q, "SELECT xgr_ms_now() + %d > %s", LONG_MS, was);
    wait_sql(q, "t");
    assert_int_equal(xgr_store_lease_renew(a, count_lost, &lost, &err), 0);
    snprintf(q, sizeof q, "SELECT expires_at > %s AND expires_at > xgr_ms_now() FROM nodes WHERE node = 'ha'", was);
    assert_sql(q, "t");
    free(was);
    assert_int_equal(claim(b), 0);
  }
  assert_int_equal(lost, 0);
  char *after = sql_value("SELECT string_agg(xmin::text, ',' ORDER BY root_pid) FROM sessions");
  assert_string_equal(before, after);   /* no session row was written by the heartbeats */
  assert_sql("SELECT count(*) FROM sessions WHERE lease_expires < xgr_ms_now()", "50");
  free(before);
  free(after);
  node_lapse("ha");                       /* a stops beating: its node's lease runs out */
  assert_int_equal(claim(b), 50);
  assert_int_equal(xgr_store_lease_renew(a, count_lost, &lost, &err), 0);
  assert_int_equal(lost, 50);
  close_node(a);
  close_node(b);
  sql("DELETE FROM sessions");
}

/* A case's setup: its own schema (named by its prestate), made by a store open, becomes `url`. */
static int case_schema(void **state) {
  const char *schema = *state;
  char q[96];
  snprintf(url, sizeof url, "%s", base_url);
  snprintf(q, sizeof q, "CREATE SCHEMA %s", schema);
  sql(q);
  snprintf(url, sizeof url, "%s%soptions=-csearch_path%%3D%s", base_url, strchr(base_url, '?') ? "&" : "?", schema);
  xgr_error err;
  xgr_store *st = xgr_store_open(url, NULL, &err);   /* its tables */
  if (!st) {
    fprintf(stderr, "schema %s: %s\n", schema, err.message);
    return -1;
  }
  xgr_store_close(st);
  return 0;
}

/* A forwarded command is withdrawn only while its target has not taken it: an asker that sees the
 * holder's lease lapse routes the call again only then; a command the target took (and may carry
 * out, its write passing the fence when nobody claimed the session yet) waits for its answer.
 * Before, the asker dropped the command either way and routed again: fault seed 1346's kill was
 * carried out by the stalled holder and answered "no live session" by the node it went to next. */
typedef struct withdraw_ctx {
  xgr_store *asker;
  int64_t id;
  bool withdrawn;
  int rc;
} withdraw_ctx;

static char *run_and_withdraw(void *ctx, int64_t id, const char *owner, uint64_t root, const char *body, int *rc) {
  (void)owner, (void)root, (void)body;
  withdraw_ctx *w = ctx;
  xgr_error err;
  w->rc = xgr_store_cmd_withdraw(w->asker, w->id, &w->withdrawn, &err);   /* the asker, meanwhile */
  assert_int_equal(id, w->id);
  *rc = 0;
  return strdup("{\"message\":\"ok\",\"woken\":0}");
}

static char *run_none(void *ctx, int64_t id, const char *owner, uint64_t root, const char *body, int *rc) {
  (void)ctx, (void)id, (void)owner, (void)root, (void)body, (void)rc;
  fail_msg("a withdrawn command was taken");
  return NULL;
}

static void test_command_withdraw(void **state) {
  (void)state;
  xgr_store *a = node("wa", LONG_MS), *b = node("wb", LONG_MS);
  xgr_error err;
  int64_t id = 0;
  bool withdrawn = false;
  /* not taken yet: withdrawn, and the target finds nothing */
  assert_int_equal(xgr_store_cmd_send(a, "wb", OWNER, 5, "{\"op\":1}", &id, &err), 0);
  assert_int_equal(xgr_store_cmd_withdraw(a, id, &withdrawn, &err), 0);
  assert_true(withdrawn);
  assert_int_equal(xgr_store_cmd_serve(b, run_none, NULL, &err), 0);
  /* taken: not withdrawn, and its answer reaches the asker */
  assert_int_equal(xgr_store_cmd_send(a, "wb", OWNER, 5, "{\"op\":1}", &id, &err), 0);
  withdraw_ctx w = {.asker = a, .id = id, .withdrawn = true, .rc = -1};
  assert_int_equal(xgr_store_cmd_serve(b, run_and_withdraw, &w, &err), 0);
  assert_int_equal(w.rc, 0);
  assert_false(w.withdrawn);
  bool done = false;
  int arc = -1;
  char *res = NULL;
  assert_int_equal(xgr_store_cmd_result(a, id, &done, &arc, &res, &err), 0);
  assert_true(done);
  assert_int_equal(arc, 0);
  assert_non_null(strstr(res, "ok"));
  free(res);
  close_node(a);
  close_node(b);
}

/* A case's teardown: the stores it left open (it failed before closing them) close. */
static int case_close(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof opened / sizeof *opened; i++)
    if (opened[i]) close_node(opened[i]);
  return 0;
}

#define CASE(f) cmocka_unit_test_prestate_setup_teardown(f, case_schema, case_close, "lease_" #f)

int main(void) {
  const char *u = getenv("XGR_PG_URL");
  if (!u || !*u) {
    printf("test_lease: skipped (no XGR_PG_URL; run it under tests/pg/pg_cluster.sh)\n");
    return 77;
  }
  snprintf(base_url, sizeof base_url, "%s", u);
  const struct CMUnitTest tests[] = {
      CASE(test_fencing),
      CASE(test_hibernated),
      CASE(test_stale_claim),
      CASE(test_orphan_released),
      CASE(test_single_writer_excludes_nodes),
      CASE(test_balance),
      CASE(test_claim_asks_each_node_once),
      CASE(test_heartbeat_one_write),
      CASE(test_command_withdraw),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
