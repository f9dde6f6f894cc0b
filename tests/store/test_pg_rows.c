/* test_pg_rows.c — the PostgreSQL store's direct path for new process rows (docs/STORE.md, "The
 * bulk path"): a group reads its sessions' stored next_iter and COPYs the process rows at or
 * above it straight into proc_rt, without the staging table and the upsert. Checked here: a row
 * taken for new that exists after all (put there by hand) does not fail anything — the group is
 * rolled back and redone through the upsert (xgr_store_stats.group_redos counts it), and when the same
 * group also holds a batch with a fault of its own (a second history row) only that batch fails;
 * a process created by one batch and changed by the next in the same group lands with its last
 * state; new sessions' rows and updates of stored rows come back as written. A group is made
 * deterministic by holding the writer on a table lock of a second connection while the batches
 * are queued behind it. A large group is spread over the writer's connections by session
 * (commit_split): each session's batches keep their order, the owner's counter is raised, a
 * batch's own fault fails it alone, and a batch that names sessions of two parts keeps its group
 * on one connection. The record of a process that a step's result ended is kept with that result's
 * history row (migration 12), and the live processes a group makes for a session share one row (test_fewer_rows);
 * a group that loses a deadlock is tried again (test_deadlock_retried). Runs under tests/pg/pg_cluster.sh (XGR_PG_URL); skipped without it. */
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

#include "xgr/session.h"
#include "xgr/store.h"

#define OWNER "0x00000000000000000000000000000000000000bb"


/* The store's count of groups redone through the upsert. */
static uint64_t redos(xgr_store *st) {
  xgr_store_stats ss;
  xgr_store_get_stats(st, &ss);
  return ss.group_redos;
}
static char url[1024];

static PGconn *pg(void) {
  PGconn *c = PQconnectdb(url);
  assert_int_equal(PQstatus(c), CONNECTION_OK);
  return c;
}

static void sql_on(PGconn *c, const char *q) {
  PGresult *r = PQexec(c, q);
  if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) fail_msg("%s: %s", q, PQerrorMessage(c));
  PQclear(r);
}

static void sql(const char *q) {
  PGconn *c = pg();
  sql_on(c, q);
  PQfinish(c);
}

/* The one value query q reads equals want ("" for no row). */
static void assert_sql(const char *q, const char *want) {
  PGconn *c = pg();
  PGresult *r = PQexec(c, q);
  assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
  const char *v = PQntuples(r) ? PQgetvalue(r, 0, 0) : "";
  if (strcmp(v, want)) fail_msg("%s: got '%s', want '%s'", q, v, want);
  PQclear(r);
  PQfinish(c);
}

/* The store's process records of session root read back, as "iter:status payload,..." */
static void assert_procs(xgr_store *st, uint64_t root, const char *want) {
  xgr_store_proc *p;
  size_t n;
  xgr_error err;
  if (xgr_store_procs(st, OWNER, root, &p, &n, &err)) fail_msg("procs: %s", err.message);
  char got[4096] = "";
  size_t k = 0;
  for (size_t i = 0; i < n && k < sizeof got; i++)
    k += (size_t)snprintf(got + k, sizeof got - k, "%s%llu:%u%s", i ? "," : "", (unsigned long long)p[i].iter,
                          (unsigned)p[i].status, p[i].payload);
  xgr_store_procs_free(p, n);
  if (strcmp(got, want)) fail_msg("procs of %llu: got '%s', want '%s'", (unsigned long long)root, got, want);
}

static void sleep_ms(long ms) { nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL); }

/* An empty schema, then a store on it (the migrations make the tables). */
static xgr_store *fresh_store(void) {
  sql("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public");
  xgr_error err;
  xgr_store *st = xgr_store_open(url, &(xgr_store_config){.gc_interval_ms = -1}, &err);
  if (!st) fail_msg("open: %s", err.message);
  return st;
}

static void add_session(xgr_store_changes *b, uint64_t root, uint64_t next_iter) {
  xgr_store_session s = {.owner = OWNER, .root_pid = root, .registry = "", .ostc_id = "t", .ostc_hash = "",
                         .next_iter = next_iter, .next_group = 1};
  xgr_store_changes_session(b, &s);
}

static void add_proc(xgr_store_changes *b, uint64_t root, uint64_t iter, uint8_t status, const char *payload) {
  xgr_store_proc p = {.iter = iter, .parent_iter = iter > 1 ? 1 : 0, .step = 0, .step_id = "A", .status = status,
                      .valid = -1, .payload = (char *)payload};
  xgr_store_changes_proc(b, OWNER, root, &p);
}

static void add_hist(xgr_store_changes *b, uint64_t root, uint64_t iter) {
  xgr_store_hist h = {.iter = iter, .step_id = "A", .status = XGR_PROC_DONE, .valid = 1, .payload = "{}"};
  xgr_store_changes_hist(b, OWNER, root, &h);
}

static void add_state(xgr_store_changes *b, uint64_t root, uint64_t next_iter) {
  xgr_store_changes_session_state(b, OWNER, root, XGR_RESULT_RUNNING, 0, next_iter, 1, false);
}

static void commit_ok(xgr_store *st, xgr_store_changes *b) {
  xgr_error err;
  if (xgr_store_commit(st, b, &err)) fail_msg("commit: %s", err.message);
}

typedef struct outcome {
  int rc, called;
} outcome;

static void on_done(void *ctx, int rc, const xgr_error *err) {
  (void)err;
  outcome *o = ctx;
  o->rc = rc;
  __atomic_store_n(&o->called, 1, __ATOMIC_SEQ_CST);
}

/* Hold the writer: a second connection locks proc_steps, then a batch with a history row is
 * submitted (its group waits on the lock); what is submitted next queues behind it and goes in
 * one group once release() commits the lock. root: a session of its own for the blocker. */
static PGconn *hold_writer(xgr_store *st, uint64_t root, outcome *o) {
  PGconn *c = pg();
  sql_on(c, "BEGIN");
  sql_on(c, "LOCK TABLE proc_steps IN SHARE ROW EXCLUSIVE MODE");
  xgr_store_changes *b = xgr_store_changes_new();
  add_session(b, root, 2);
  add_hist(b, root, 1);
  assert_int_equal(xgr_store_submit(st, b, on_done, o), 0);
  sleep_ms(300);   /* the writer took it and waits on the lock */
  return c;
}

static void release(PGconn *c) {
  sql_on(c, "COMMIT");
  PQfinish(c);
}

/* A process row taken for new exists (inserted by hand): the group is redone through the upsert;
 * a batch of the same group with a second history row fails alone; nothing else is lost. */
static void test_existing_row_redone(void **state) {
  (void)state;
  xgr_store *st = fresh_store();
  xgr_store_changes *b = xgr_store_changes_new();   /* session 1: iter 1 stored, next_iter 2 */
  add_session(b, 1, 2);
  add_proc(b, 1, 1, XGR_PROC_RUNNING, "{\"v\":1}");
  add_hist(b, 1, 1);
  commit_ok(st, b);
  b = xgr_store_changes_new();   /* session 3 with history row 1 */
  add_session(b, 3, 2);
  add_proc(b, 3, 1, XGR_PROC_RUNNING, "{}");
  add_hist(b, 3, 1);
  commit_ok(st, b);
  assert_int_equal(redos(st), 0);
  /* a row at iter 2 that the stored next_iter (2) says cannot exist */
  sql("INSERT INTO proc_rt(owner, root_pid, iter, parent_iter, step, step_id, status, paused, valid, abort_reason,"
      " join_group, join_from_group, next_wake_at, created_at, started_at, finished_at, payload)"
      " VALUES('" OWNER "', 1, 2, 1, 0, 'stale', 0, 0, -1, 0, 0, 0, 0, 0, 0, 0, '{\"stale\":true}')");

  outcome blk = {0}, oa = {0}, ob = {0}, oc = {0};
  PGconn *lock = hold_writer(st, 9, &blk);
  b = xgr_store_changes_new();   /* A: session 1 creates iter 2 (which "exists") and finishes iter 1 */
  add_proc(b, 1, 1, XGR_PROC_DONE, "{\"v\":1}");
  add_proc(b, 1, 2, XGR_PROC_DONE, "{\"v\":2}");
  add_hist(b, 1, 2);
  add_state(b, 1, 3);
  assert_int_equal(xgr_store_submit(st, b, on_done, &oa), 0);
  b = xgr_store_changes_new();   /* B: a new session 2 */
  add_session(b, 2, 3);
  add_proc(b, 2, 1, XGR_PROC_DONE, "{\"b\":1}");
  add_proc(b, 2, 2, XGR_PROC_WAITING, "{\"b\":2}");
  add_hist(b, 2, 1);
  assert_int_equal(xgr_store_submit(st, b, on_done, &ob), 0);
  b = xgr_store_changes_new();   /* C: session 3's history row 1 again, a new process and a state */
  add_proc(b, 3, 2, XGR_PROC_RUNNING, "{\"c\":2}");
  add_hist(b, 3, 1);
  add_state(b, 3, 9);
  assert_int_equal(xgr_store_submit(st, b, on_done, &oc), 0);
  release(lock);
  xgr_store_flush(st);
  assert_int_equal(blk.rc, 0);
  assert_int_equal(oa.rc, 0);
  assert_int_equal(ob.rc, 0);
  assert_int_equal(oc.rc, XGR_ECONFLICT);
  assert_int_equal(redos(st), 1);
  /* A: iter 2 carries A's state (the upsert replaced the stale row), iter 1 finished */
  assert_sql("SELECT step_id || ' ' || status || ' ' || payload || ' ' || (terminal_at IS NOT NULL) FROM proc_rt"
             " WHERE root_pid = 1 AND iter = 2", "A 2 {\"v\":2} true");
  assert_sql("SELECT status || ' ' || payload FROM proc_rt WHERE root_pid = 1 AND iter = 1", "2 {\"v\":1}");
  assert_sql("SELECT count(*) FROM proc_steps WHERE root_pid = 1", "2");
  assert_sql("SELECT next_iter FROM sessions WHERE root_pid = 1", "3");
  /* B: all of it */
  assert_sql("SELECT string_agg(iter || ':' || status || payload, ',' ORDER BY iter) FROM proc_rt WHERE root_pid = 2",
             "1:2{\"b\":1},2:0{\"b\":2}");
  assert_sql("SELECT count(*) FROM proc_steps WHERE root_pid = 2", "1");
  assert_sql("SELECT next_iter FROM sessions WHERE root_pid = 2", "3");
  /* C: nothing of it */
  assert_sql("SELECT count(*) FROM proc_rt WHERE root_pid = 3", "1");
  assert_sql("SELECT next_iter FROM sessions WHERE root_pid = 3", "2");
  assert_sql("SELECT count(*) FROM proc_steps WHERE root_pid = 3", "1");
  /* the store goes on: a later group on the direct path */
  b = xgr_store_changes_new();
  add_proc(b, 1, 3, XGR_PROC_WAITING, "{\"v\":3}");
  add_state(b, 1, 4);
  commit_ok(st, b);
  assert_sql("SELECT payload FROM proc_rt WHERE root_pid = 1 AND iter = 3", "{\"v\":3}");
  assert_int_equal(redos(st), 1);
  xgr_store_close(st);
}

/* One group with two batches of one session: the first creates iter 2, the second changes it and
 * creates iter 3; the rows land with their last states, without a redo. Stored rows of other
 * sessions are updated in the same group. */
static void test_created_and_changed_in_one_group(void **state) {
  (void)state;
  xgr_store *st = fresh_store();
  xgr_store_changes *b = xgr_store_changes_new();
  add_session(b, 4, 2);
  add_proc(b, 4, 1, XGR_PROC_RUNNING, "{}");
  add_session(b, 5, 3);
  add_proc(b, 5, 1, XGR_PROC_RUNNING, "{}");
  add_proc(b, 5, 2, XGR_PROC_WAITING, "{}");
  commit_ok(st, b);
  outcome blk = {0}, o1 = {0}, o2 = {0}, o3 = {0};
  PGconn *lock = hold_writer(st, 9, &blk);
  b = xgr_store_changes_new();
  add_proc(b, 4, 2, XGR_PROC_RUNNING, "{\"first\":1}");
  add_state(b, 4, 3);
  assert_int_equal(xgr_store_submit(st, b, on_done, &o1), 0);
  b = xgr_store_changes_new();
  add_proc(b, 4, 2, XGR_PROC_DONE, "{\"second\":2}");
  add_proc(b, 4, 3, XGR_PROC_WAITING, "{\"third\":3}");
  add_hist(b, 4, 2);
  add_state(b, 4, 4);
  assert_int_equal(xgr_store_submit(st, b, on_done, &o2), 0);
  b = xgr_store_changes_new();   /* session 5: a stored row changes, a new one comes */
  add_proc(b, 5, 2, XGR_PROC_DONE, "{\"five\":2}");
  add_proc(b, 5, 3, XGR_PROC_WAITING, "{\"five\":3}");
  add_state(b, 5, 4);
  assert_int_equal(xgr_store_submit(st, b, on_done, &o3), 0);
  release(lock);
  xgr_store_flush(st);
  assert_int_equal(blk.rc, 0);
  assert_int_equal(o1.rc, 0);
  assert_int_equal(o2.rc, 0);
  assert_int_equal(o3.rc, 0);
  assert_int_equal(redos(st), 0);
  xgr_store_stats s;
  xgr_store_get_stats(st, &s);
  assert_true(s.max_batches_per_tx >= 3);   /* the three went in one group */
  assert_sql("SELECT string_agg(iter || ':' || status || payload, ',' ORDER BY iter) FROM proc_rt WHERE root_pid = 4",
             "1:1{},2:2{\"second\":2},3:0{\"third\":3}");
  /* session 5's first two processes were made together: one row of proc_born holds both, and 2's
   * later state is a row of proc_rt that supersedes its member */
  assert_sql("SELECT string_agg(iter || ':' || status || payload, ',' ORDER BY iter) FROM proc_rt WHERE root_pid = 5",
             "2:2{\"five\":2},3:0{\"five\":3}");
  assert_sql("SELECT first_iter || '-' || last_iter || ' ' || json_array_length(members::json) FROM proc_born"
             " WHERE root_pid = 5", "1-2 2");
  assert_procs(st, 5, "1:1{},2:2{\"five\":2},3:0{\"five\":3}");
  assert_sql("SELECT next_iter FROM sessions WHERE root_pid = 4", "4");
  /* read back through the store too */
  xgr_store_proc *p;
  size_t n;
  xgr_error err;
  assert_int_equal(xgr_store_procs(st, OWNER, 4, &p, &n, &err), 0);
  assert_int_equal(n, 3);
  assert_string_equal(p[1].payload, "{\"second\":2}");
  assert_int_equal(p[1].status, XGR_PROC_DONE);
  xgr_store_procs_free(p, n);
  xgr_store_close(st);
}

static uint64_t transactions(xgr_store *st) {
  xgr_store_stats s;
  xgr_store_get_stats(st, &s);
  return s.transactions;
}

/* A group of 2 x 150 batches: a new session each (rootPids 100..249), then each session's next
 * batch, which changes the process the first created; one more batch repeats a stored history
 * row. The group is split over the two writer connections (more transactions than one, none
 * holding every batch); every session lands with its second batch's state, the owner's counter
 * is past the largest rootPid, and only the faulty batch fails. */
static void test_split_group(void **state) {
  (void)state;
  xgr_store *st = fresh_store();
  xgr_store_changes *b = xgr_store_changes_new();   /* session 1 with history row 1, stored */
  add_session(b, 1, 2);
  add_proc(b, 1, 1, XGR_PROC_RUNNING, "{}");
  add_hist(b, 1, 1);
  commit_ok(st, b);
  enum { N = 150 };
  static outcome first[N], second[N];
  outcome blk = {0}, bad = {0};
  uint64_t tx0 = transactions(st);
  PGconn *lock = hold_writer(st, 9, &blk);
  for (int i = 0; i < N; i++) {
    b = xgr_store_changes_new();
    add_session(b, 100 + (uint64_t)i, 3);
    add_proc(b, 100 + (uint64_t)i, 1, XGR_PROC_DONE, "{}");
    add_proc(b, 100 + (uint64_t)i, 2, XGR_PROC_WAITING, "{\"turn\":1}");
    add_hist(b, 100 + (uint64_t)i, 1);
    assert_int_equal(xgr_store_submit(st, b, on_done, &first[i]), 0);
  }
  b = xgr_store_changes_new();   /* session 1's history row 1 again: this batch's own fault */
  add_proc(b, 1, 2, XGR_PROC_WAITING, "{}");
  add_hist(b, 1, 1);
  add_state(b, 1, 3);
  assert_int_equal(xgr_store_submit(st, b, on_done, &bad), 0);
  for (int i = 0; i < N; i++) {
    b = xgr_store_changes_new();
    add_proc(b, 100 + (uint64_t)i, 2, XGR_PROC_DONE, "{\"turn\":2}");
    add_hist(b, 100 + (uint64_t)i, 2);
    add_state(b, 100 + (uint64_t)i, 3);
    assert_int_equal(xgr_store_submit(st, b, on_done, &second[i]), 0);
  }
  release(lock);
  xgr_store_flush(st);
  assert_int_equal(blk.rc, 0);
  for (int i = 0; i < N; i++) {
    assert_int_equal(first[i].rc, 0);
    assert_int_equal(second[i].rc, 0);
  }
  assert_int_equal(bad.rc, XGR_ECONFLICT);
  xgr_store_stats s;
  xgr_store_get_stats(st, &s);
  assert_true(s.transactions - tx0 >= 3);       /* the blocker, then the group in parts */
  assert_true(s.max_batches_per_tx < 2 * N);    /* no one transaction held the whole group */
  assert_sql("SELECT count(*) FROM proc_rt WHERE root_pid BETWEEN 100 AND 249 AND iter = 2 AND status = 2"
             " AND payload = '{\"turn\":2}'", "150");
  assert_sql("SELECT count(*) FROM proc_steps WHERE root_pid BETWEEN 100 AND 249", "300");
  assert_sql("SELECT count(*) FROM sessions WHERE root_pid BETWEEN 100 AND 249 AND next_iter = 3", "150");
  assert_sql("SELECT next_root FROM owners WHERE owner = '" OWNER "'", "250");
  assert_sql("SELECT count(*) FROM proc_rt WHERE root_pid = 1", "1");   /* nothing of the faulty batch */
  assert_sql("SELECT next_iter FROM sessions WHERE root_pid = 1", "2");
  uint64_t next = 0;
  xgr_error err;
  assert_int_equal(xgr_store_peek_process_id(st, OWNER, &next, &err), 0);
  assert_int_equal(next, 250);

  /* a batch naming two sessions (whatever their parts): the group stays on one connection and
   * lands whole */
  tx0 = transactions(st);
  lock = hold_writer(st, 8, &blk);
  static outcome more[N];
  for (int i = 0; i < N; i++) {
    b = xgr_store_changes_new();
    add_state(b, 100 + (uint64_t)i, 4);
    for (uint64_t k = 1; !i && k < 10; k++) add_state(b, 100 + k, 4);   /* ten sessions: of both parts */
    assert_int_equal(xgr_store_submit(st, b, on_done, &more[i]), 0);
  }
  release(lock);
  xgr_store_flush(st);
  for (int i = 0; i < N; i++) assert_int_equal(more[i].rc, 0);
  assert_int_equal(transactions(st) - tx0, 2);   /* the blocker and the whole group */
  assert_sql("SELECT count(*) FROM sessions WHERE root_pid BETWEEN 100 AND 249 AND next_iter = 4", "150");
  xgr_store_close(st);
}

/* With pg_writers 1 the same kind of group goes in one transaction. */
static void test_one_writer(void **state) {
  (void)state;
  sql("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public");
  xgr_error err;
  xgr_store *st = xgr_store_open(url, &(xgr_store_config){.gc_interval_ms = -1, .pg_writers = 1}, &err);
  if (!st) fail_msg("open: %s", err.message);
  enum { N = 100 };
  static outcome o[N];
  outcome blk = {0};
  uint64_t tx0 = transactions(st);
  PGconn *lock = hold_writer(st, 9, &blk);
  for (int i = 0; i < N; i++) {
    xgr_store_changes *b = xgr_store_changes_new();
    add_session(b, 10 + (uint64_t)i, 2);
    add_proc(b, 10 + (uint64_t)i, 1, XGR_PROC_WAITING, "{}");
    assert_int_equal(xgr_store_submit(st, b, on_done, &o[i]), 0);
  }
  release(lock);
  xgr_store_flush(st);
  for (int i = 0; i < N; i++) assert_int_equal(o[i].rc, 0);
  assert_int_equal(transactions(st) - tx0, 2);
  assert_sql("SELECT count(*) FROM proc_rt", "100");
  assert_sql("SELECT next_root FROM owners WHERE owner = '" OWNER "'", "110");
  xgr_store_close(st);
}

/* ---- process records kept with history rows (migration 12) ---- */

static int64_t fake_ms;
static int64_t fake_clock(void *ctx) {
  (void)ctx;
  return fake_ms;
}

/* The state a step's result leaves its process in, and the history row of that result: the
 * record's started_at is the row's at, and the other columns both have agree. */
static xgr_store_proc ended(uint64_t iter, const char *payload) {
  return (xgr_store_proc){.iter = iter, .parent_iter = iter > 1 ? 1 : 0, .step = 1, .step_id = "B",
                          .status = XGR_PROC_DONE, .paused = true, .valid = 1, .group = 3, .from_group = 2,
                          .next_wake_at = 77, .created_at = 10, .started_at = 20, .finished_at = 30,
                          .payload = (char *)payload, .join = "{\"closed\":true}"};
}
static xgr_store_hist result_of(const xgr_store_proc *p) {
  return (xgr_store_hist){.iter = p->iter, .parent_iter = p->parent_iter, .step = p->step, .step_id = p->step_id,
                          .status = p->status, .valid = p->valid, .at = p->started_at, .finished_at = p->finished_at,
                          .payload = p->payload};
}

typedef struct live_seen {
  size_t sessions, procs;
  uint64_t iters[8];
} live_seen;
static int on_live(void *ctx, const xgr_store_live *l) {
  live_seen *v = ctx;
  v->sessions++;
  for (size_t i = 0; i < l->nprocs && v->procs < 8; i++) v->iters[v->procs++] = l->procs[i].iter;
  return 0;
}

/* Fewer row writes per step (migration 12). A process that a step's result ended has its record
 * written into that result's history row instead of a process row: a stored process's row is then
 * stale (reads and recovery pass it over, retention deletes it), and one made and ended in the
 * same group gets no row at all; a history row that disagrees with the process's state keeps
 * nothing. The live processes a group makes for one session share one row of proc_born (a pack),
 * whose members later rows supersede. Reads give the same records either way; records kept in
 * history rows are listed for ttl_secs; retention deletes a pack once no member is live, and a
 * history row by age only once no pack holds its process (else the process would look live
 * again), with the stale row of its record; ending or removing a session drops its packs, and
 * removing it the records its history rows keep. */
static void test_fewer_rows(void **state) {
  (void)state;
  sql("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public");
  fake_ms = 1000000;
  xgr_error err;
  xgr_store *st = xgr_store_open(url, &(xgr_store_config){.gc_interval_ms = -1, .ttl_secs = 60, .history_secs = 3600,
                                                          .clock_ms = fake_clock}, &err);
  if (!st) fail_msg("open: %s", err.message);
  xgr_store_changes *b = xgr_store_changes_new();   /* 1 alone: a row of proc_rt */
  add_session(b, 20, 2);
  add_proc(b, 20, 1, XGR_PROC_RUNNING, "{}");
  commit_ok(st, b);
  b = xgr_store_changes_new();   /* 2 and 3 together: one pack */
  add_proc(b, 20, 2, XGR_PROC_WAITING, "{\"two\":0}");
  add_proc(b, 20, 3, XGR_PROC_WAITING, "{\"three\":0}");
  add_state(b, 20, 4);
  commit_ok(st, b);
  assert_sql("SELECT string_agg((e->>0) || ' ' || (e->>14), ',') FROM proc_born, json_array_elements(members::json) e",
             "2 {\"two\":0},3 {\"three\":0}");
  /* 1 and 2 end; 4 is made and ends; 5 is made and ends, but its history row disagrees */
  b = xgr_store_changes_new();
  xgr_store_proc p1 = ended(1, "{\"one\":1}"), p2 = ended(2, "{\"two\":2}"), p4 = ended(4, "{\"four\":4}"),
                 p5 = ended(5, "{\"five\":5}");
  xgr_store_hist h1 = result_of(&p1), h2 = result_of(&p2), h4 = result_of(&p4), h5 = result_of(&p5);
  h5.payload = "{\"other\":5}";
  const xgr_store_proc *ps[] = {&p1, &p2, &p4, &p5};
  const xgr_store_hist *hs[] = {&h1, &h2, &h4, &h5};
  for (int i = 0; i < 4; i++) {
    xgr_store_changes_proc(b, OWNER, 20, ps[i]);
    xgr_store_changes_hist(b, OWNER, 20, hs[i]);
  }
  add_state(b, 20, 6);
  commit_ok(st, b);
  assert_sql("SELECT string_agg(iter || ':' || status, ',' ORDER BY iter) FROM proc_rt", "1:1,5:2");
  assert_sql("SELECT string_agg(iter::text, ',' ORDER BY iter) FROM proc_steps WHERE rt_created_at IS NOT NULL", "1,2,4");
  xgr_store_proc *p;
  size_t n;
  assert_int_equal(xgr_store_procs(st, OWNER, 20, &p, &n, &err), 0);
  assert_int_equal(n, 5);
  const xgr_store_proc *want[] = {&p1, &p2, NULL, &p4, &p5};
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(p[i].iter, i + 1);
    if (!want[i]) {
      assert_int_equal(p[i].status, XGR_PROC_WAITING);
      assert_string_equal(p[i].payload, "{\"three\":0}");
      assert_null(p[i].error);
      assert_null(p[i].join);
      continue;
    }
    const xgr_store_proc *w = want[i];
    assert_int_equal(p[i].status, XGR_PROC_DONE);
    assert_true(p[i].parent_iter == w->parent_iter && p[i].step == w->step && p[i].paused == w->paused &&
                p[i].valid == w->valid && p[i].group == w->group && p[i].from_group == w->from_group &&
                p[i].next_wake_at == w->next_wake_at && p[i].created_at == w->created_at &&
                p[i].started_at == w->started_at && p[i].finished_at == w->finished_at);
    assert_string_equal(p[i].step_id, w->step_id);
    assert_string_equal(p[i].payload, w->payload);
    assert_string_equal(p[i].join, w->join);
    assert_null(p[i].error);
  }
  xgr_store_procs_free(p, n);
  live_seen seen = {0};
  assert_int_equal(xgr_store_load_live(st, on_live, &seen, &err), 0);   /* 1's stale row and 2 are not live */
  assert_int_equal(seen.sessions, 1);
  assert_int_equal(seen.procs, 1);
  assert_int_equal(seen.iters[0], 3);
  /* retention deletes the stale row at once and keeps the pack (3 lives); records stay listed
   * until the TTL */
  size_t d;
  assert_int_equal(xgr_store_gc(st, &d, &err), 0);
  assert_sql("SELECT string_agg(iter::text, ',' ORDER BY iter) FROM proc_rt", "5");
  assert_sql("SELECT count(*) FROM proc_born", "1");
  assert_procs(st, 20, "1:2{\"one\":1},2:2{\"two\":2},3:0{\"three\":0},4:2{\"four\":4},5:2{\"five\":5}");
  fake_ms += 61 * 1000;
  assert_int_equal(xgr_store_gc(st, &d, &err), 0);   /* 5's terminal row goes */
  assert_procs(st, 20, "3:0{\"three\":0}");
  /* an hour on, the history rows go, but 2's while its pack is there */
  fake_ms += 3600 * 1000;
  assert_int_equal(xgr_store_gc(st, &d, &err), 0);
  assert_sql("SELECT string_agg(iter::text, ',' ORDER BY iter) FROM proc_steps", "2");
  assert_procs(st, 20, "3:0{\"three\":0}");
  seen = (live_seen){0};
  assert_int_equal(xgr_store_load_live(st, on_live, &seen, &err), 0);
  assert_true(seen.procs == 1 && seen.iters[0] == 3);
  /* 3 ends: the pack has no live member and goes, and then 2's history row */
  b = xgr_store_changes_new();
  xgr_store_proc p3 = ended(3, "{\"three\":3}");
  xgr_store_hist h3 = result_of(&p3);
  xgr_store_changes_proc(b, OWNER, 20, &p3);
  xgr_store_changes_hist(b, OWNER, 20, &h3);
  add_state(b, 20, 6);
  commit_ok(st, b);
  assert_int_equal(xgr_store_gc(st, &d, &err), 0);
  assert_sql("SELECT count(*) FROM proc_born", "0");
  assert_sql("SELECT string_agg(iter::text, ',' ORDER BY iter) FROM proc_steps", "3");
  /* a stale row left behind (as before retention's sweep got to it) goes with its history row */
  sql("INSERT INTO proc_rt SELECT owner, root_pid, 3, 1, 0, 'A', 1, 0, -1, 0, 0, 0, 0, 0, 0, 0, '{}', NULL, NULL, NULL"
      " FROM sessions WHERE root_pid = 20");
  assert_procs(st, 20, "3:2{\"three\":3}");
  fake_ms += 3601 * 1000;
  assert_int_equal(xgr_store_gc(st, &d, &err), 0);
  assert_sql("SELECT count(*) FROM proc_steps", "0");
  assert_sql("SELECT count(*) FROM proc_rt", "0");
  /* removing a session drops its packs and the records its history rows keep (the rows stay) */
  b = xgr_store_changes_new();
  xgr_store_proc p6 = ended(6, "{}");
  xgr_store_hist h6 = result_of(&p6);
  xgr_store_changes_proc(b, OWNER, 20, &p6);
  xgr_store_changes_hist(b, OWNER, 20, &h6);
  add_proc(b, 20, 7, XGR_PROC_WAITING, "{}");
  add_proc(b, 20, 8, XGR_PROC_WAITING, "{}");
  add_state(b, 20, 9);
  commit_ok(st, b);
  assert_sql("SELECT count(*) || '/' || count(rt_created_at) FROM proc_steps", "1/1");
  assert_sql("SELECT count(*) FROM proc_born", "1");
  b = xgr_store_changes_new();
  xgr_store_changes_remove_session(b, OWNER, 20);
  commit_ok(st, b);
  assert_procs(st, 20, "");
  assert_sql("SELECT count(*) || '/' || count(rt_created_at) FROM proc_steps", "1/0");
  assert_sql("SELECT count(*) FROM proc_born", "0");
  /* a session that ends drops its packs in the same commit */
  b = xgr_store_changes_new();
  add_session(b, 21, 3);
  add_proc(b, 21, 1, XGR_PROC_WAITING, "{}");
  add_proc(b, 21, 2, XGR_PROC_WAITING, "{}");
  commit_ok(st, b);
  assert_sql("SELECT count(*) FROM proc_born WHERE root_pid = 21", "1");
  b = xgr_store_changes_new();
  xgr_store_changes_session_state(b, OWNER, 21, XGR_RESULT_KILLED, 5, 3, 1, false);
  commit_ok(st, b);
  assert_sql("SELECT count(*) FROM proc_born", "0");
  /* packs are bounded: 600 new processes make packs of 512 and 88; three with 200 KB payloads
   * make a pack of two (past 256 KB it takes no more) and a row of proc_rt */
  b = xgr_store_changes_new();
  add_session(b, 22, 601);
  for (uint64_t i = 1; i <= 600; i++) add_proc(b, 22, i, XGR_PROC_WAITING, "{}");
  char *big = malloc(200 << 10);
  memset(big, 'x', (200 << 10) - 1);
  big[0] = '"';
  big[(200 << 10) - 2] = '"';
  big[(200 << 10) - 1] = 0;
  add_session(b, 23, 4);
  for (uint64_t i = 1; i <= 3; i++) add_proc(b, 23, i, XGR_PROC_WAITING, big);
  commit_ok(st, b);
  free(big);
  assert_sql("SELECT string_agg(json_array_length(members::json)::text, ',' ORDER BY first_iter) FROM proc_born WHERE root_pid = 22",
             "512,88");
  assert_sql("SELECT string_agg(json_array_length(members::json)::text, ',' ORDER BY first_iter) FROM proc_born WHERE root_pid = 23",
             "2");
  assert_sql("SELECT string_agg(iter::text, ',') FROM proc_rt WHERE root_pid = 23", "3");
  assert_int_equal(xgr_store_procs(st, OWNER, 22, &p, &n, &err), 0);
  assert_int_equal(n, 600);
  for (size_t i = 0; i < n; i++) assert_int_equal(p[i].iter, i + 1);
  xgr_store_procs_free(p, n);
  assert_int_equal(xgr_store_procs(st, OWNER, 23, &p, &n, &err), 0);
  assert_int_equal(n, 3);
  assert_int_equal(strlen(p[2].payload), (200 << 10) - 1);
  xgr_store_procs_free(p, n);
  /* every text of a packed record comes back byte for byte: quotes, backslashes, control
   * characters, escapes as written, non-ASCII */
  const char *odd = "{\"q\":\"a\\\"b\\\\c\\n\\u0001\", \"t\":\"\t\xc3\xa9\xe2\x82\xac\"}  ";
  b = xgr_store_changes_new();
  add_session(b, 24, 3);
  xgr_store_proc q1 = {.iter = 1, .step_id = "S\"1\\", .status = XGR_PROC_WAITING, .valid = -1, .payload = (char *)odd,
                       .error = "bad\x01\nthing", .join = "{\"closed\":false}", .next_wake_at = INT64_MAX,
                       .created_at = INT64_MIN, .group = UINT32_MAX};
  xgr_store_proc q2 = {.iter = UINT64_MAX - 1, .parent_iter = UINT64_MAX, .step_id = "", .status = XGR_PROC_RUNNING,
                       .valid = -1, .payload = "{}"};
  xgr_store_changes_proc(b, OWNER, 24, &q1);
  xgr_store_changes_proc(b, OWNER, 24, &q2);
  commit_ok(st, b);
  assert_sql("SELECT count(*) FROM proc_born WHERE root_pid = 24", "1");
  assert_int_equal(xgr_store_procs(st, OWNER, 24, &p, &n, &err), 0);
  assert_int_equal(n, 2);
  assert_string_equal(p[0].payload, odd);
  assert_string_equal(p[0].step_id, q1.step_id);
  assert_string_equal(p[0].error, q1.error);
  assert_string_equal(p[0].join, q1.join);
  assert_true(p[0].next_wake_at == INT64_MAX && p[0].created_at == INT64_MIN && p[0].group == UINT32_MAX);
  assert_true(p[1].iter == UINT64_MAX - 1 && p[1].parent_iter == UINT64_MAX && p[1].status == XGR_PROC_RUNNING);
  assert_string_equal(p[1].step_id, "");
  assert_null(p[1].error);
  assert_null(p[1].join);
  xgr_store_procs_free(p, n);
  xgr_store_close(st);
}

/* A group that the server picks as a deadlock's victim is tried again, not failed: a second
 * connection (another node's retention, say) holds session 31's pack while the writer deletes
 * the packs of 30 and 31 (both end in one batch), then asks for 30's; the writer, waiting longer,
 * is the victim, rolls back, waits and commits once the other is gone. */
static void test_deadlock_retried(void **state) {
  (void)state;
  xgr_store *st = fresh_store();
  xgr_store_changes *b = xgr_store_changes_new();
  for (uint64_t r = 30; r <= 31; r++) {
    add_session(b, r, 3);
    add_proc(b, r, 1, XGR_PROC_WAITING, "{}");
    add_proc(b, r, 2, XGR_PROC_WAITING, "{}");
  }
  commit_ok(st, b);
  assert_sql("SELECT count(*) FROM proc_born", "2");
  PGconn *c = pg();
  sql_on(c, "BEGIN");
  sql_on(c, "SET LOCAL deadlock_timeout = '20s'");   /* the writer's check (1 s) finds the cycle */
  sql_on(c, "DELETE FROM proc_born WHERE root_pid = 31");
  outcome o = {0};
  b = xgr_store_changes_new();
  for (uint64_t r = 30; r <= 31; r++) xgr_store_changes_session_state(b, OWNER, r, XGR_RESULT_KILLED, 5, 3, 1, false);
  assert_int_equal(xgr_store_submit(st, b, on_done, &o), 0);
  sleep_ms(300);   /* the writer holds 30's pack and waits for 31's */
  assert_int_equal(PQsendQuery(c, "DELETE FROM proc_born WHERE root_pid = 30"), 1);
  sleep_ms(2000);  /* the writer was the victim; c got 30's pack */
  PGresult *r;
  while ((r = PQgetResult(c))) {
    assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
    PQclear(r);
  }
  assert_int_equal(__atomic_load_n(&o.called, __ATOMIC_SEQ_CST), 0);   /* waits for c again */
  sql_on(c, "ROLLBACK");
  PQfinish(c);
  xgr_store_flush(st);
  assert_int_equal(o.rc, 0);
  xgr_store_stats ss;
  xgr_store_get_stats(st, &ss);
  assert_true(ss.group_retries >= 1);
  assert_sql("SELECT count(*) FROM proc_born", "0");
  assert_sql("SELECT count(*) FROM sessions WHERE status = 2", "2");
  xgr_store_close(st);
}

int main(void) {
  const char *u = getenv("XGR_PG_URL");
  if (!u || !*u) {
    printf("test_pg_rows: skipped (no XGR_PG_URL; run it under tests/pg/pg_cluster.sh)\n");
    return 77;
  }
  snprintf(url, sizeof url, "%s", u);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_existing_row_redone),
      cmocka_unit_test(test_created_and_changed_in_one_group),
      cmocka_unit_test(test_split_group),
      cmocka_unit_test(test_one_writer),
      cmocka_unit_test(test_fewer_rows),
      cmocka_unit_test(test_deadlock_retried),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
