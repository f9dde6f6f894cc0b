/* test_group_commit.c — group commit under several producer threads: every batch is committed
 * exactly once, its callback runs only after its rows are visible (durably committed), batches
 * are grouped (fewer transactions than batches), and a batch with a duplicate history row fails
 * alone while the batches grouped with it commit. Runs in suites 'store' and 'tsan'; with
 * XGR_PG_URL set (test_group_commit_pg) on PostgreSQL too. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <libpq-fe.h>

#include "store_util.h"

/* A PostgreSQL URL on an empty schema `name` of XGR_PG_URL's database (tests/pg/pg_cluster.sh
 * sets it; meson runs this program a second time that way), or NULL when there is none. */
static char *pg_fresh(const char *name) {
  const char *u = getenv("XGR_PG_URL");
  if (!u || !*u) return NULL;
  PGconn *c = PQconnectdb(u);
  assert_int_equal(PQstatus(c), CONNECTION_OK);
  char sql[256];
  snprintf(sql, sizeof sql, "SET client_min_messages = warning; DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s",
           name, name);
  PGresult *r = PQexec(c, sql);
  assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
  PQclear(r);
  PQfinish(c);
  char *url = malloc(strlen(u) + strlen(name) + 40);
  sprintf(url, "%s%soptions=-csearch_path%%3D%s", u, strchr(u, '?') ? "&" : "?", name);
  return url;
}

#define THREADS 4
#define PER_THREAD 1500

typedef struct prod {
  xgr_store *st;
  int id;
  int calls[PER_THREAD];        /* callbacks seen per batch (atomic) */
  int bad;                      /* callbacks that did not find their rows (atomic) */
  int failed;                   /* callbacks with rc != 0 (atomic) */
} prod;

typedef struct ticket {
  prod *p;
  int i;
} ticket;

static void on_done(void *ctx, int rc, const xgr_error *err) {
  ticket *t = ctx;
  __atomic_add_fetch(&t->p->calls[t->i], 1, __ATOMIC_SEQ_CST);
  if (rc) {
    fprintf(stderr, "batch %d/%d failed: %s\n", t->p->id, t->i, err ? err->message : "?");
    __atomic_add_fetch(&t->p->failed, 1, __ATOMIC_SEQ_CST);
  } else if (t->i % 97 == 0) {
    /* effects happen after commit: the rows are there for any reader now */
    xgr_store_session ss;
    if (xgr_store_session_get(t->p->st, T_OWNER, (uint64_t)t->p->id, &ss, NULL) ||
        ss.next_iter < (uint64_t)t->i + 2)   /* later batches of the group may be in too */
      __atomic_add_fetch(&t->p->bad, 1, __ATOMIC_SEQ_CST);
    xgr_store_session_clear(&ss);
  }
  free(t);
}

static void *producer(void *arg) {
  prod *p = arg;
  xgr_store_session ss = {.owner = T_OWNER, .root_pid = (uint64_t)p->id, .ostc_id = "t", .ostc_hash = "", .next_iter = 1};
  xgr_store_changes *b = xgr_store_changes_new();
  xgr_store_changes_session(b, &ss);
  xgr_store_commit(p->st, b, NULL);
  for (int i = 0; i < PER_THREAD; i++) {
    b = xgr_store_changes_new();
    uint64_t iter = (uint64_t)i + 1;
    xgr_store_proc pr = {.iter = iter, .step_id = "B", .status = XGR_PROC_DONE, .valid = 1, .payload = "{\"v\":1}"};
    xgr_store_changes_proc(b, T_OWNER, (uint64_t)p->id, &pr);
    xgr_store_hist h = {.iter = iter, .step_id = "B", .status = XGR_PROC_DONE, .valid = 1, .payload = "{\"v\":1}"};
    xgr_store_changes_hist(b, T_OWNER, (uint64_t)p->id, &h);
    xgr_store_changes_session_state(b, T_OWNER, (uint64_t)p->id, 0, 0, iter + 1, 1, false);
    ticket *t = malloc(sizeof *t);
    *t = (ticket){p, i};
    xgr_store_submit(p->st, b, on_done, t);
  }
  return NULL;
}

static void run_producers(const char *url) {
  xgr_error e;
  xgr_store_config cfg = {.sync = XGR_STORE_SYNC_NORMAL};
  xgr_store *st = xgr_store_open(url, &cfg, &e);
  assert_non_null(st);
  static prod ps[THREADS];
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) {
    memset(&ps[t], 0, sizeof ps[t]);
    ps[t].st = st;
    ps[t].id = t + 1;
    assert_int_equal(pthread_create(&th[t], NULL, producer, &ps[t]), 0);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  xgr_store_flush(st);
  for (int t = 0; t < THREADS; t++) {
    for (int i = 0; i < PER_THREAD; i++) assert_int_equal(__atomic_load_n(&ps[t].calls[i], __ATOMIC_SEQ_CST), 1);
    assert_int_equal(ps[t].bad, 0);
    assert_int_equal(ps[t].failed, 0);
    xgr_store_hist *hs;
    size_t nh;
    assert_int_equal(xgr_store_history(st, T_OWNER, (uint64_t)t + 1, &hs, &nh, &e), 0);
    assert_int_equal(nh, PER_THREAD);
    for (size_t i = 0; i < nh; i++) assert_int_equal(hs[i].iter, i + 1);
    xgr_store_hists_free(hs, nh);
  }
  xgr_store_stats s;
  xgr_store_get_stats(st, &s);
  fprintf(stderr, "%s: %llu batches in %llu transactions (largest group %llu)\n", xgr_store_backend(st),
          (unsigned long long)s.batches, (unsigned long long)s.transactions, (unsigned long long)s.max_batches_per_tx);
  assert_int_equal(s.batches, THREADS * (PER_THREAD + 1));
  if (strcmp(xgr_store_backend(st), "memory")) assert_true(s.transactions < s.batches);
  xgr_store_close(st);
}

static void test_producers_memory(void **state) {
  (void)state;
  run_producers("memory:");
}

static void test_producers_sqlite(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  char path[512];
  snprintf(path, sizeof path, "%s/gc.db", dir);
  run_producers(path);
  t_rmdir(dir);
}

/* One bad batch (a history row twice) in a group fails alone. */
typedef struct res {
  int rc[64];
  int n;
} res;

static void on_res(void *ctx, int rc, const xgr_error *err) {
  (void)err;
  res *r = ctx;
  r->rc[r->n++] = rc;
}

static void bad_batch_fails_alone(const char *path) {
  xgr_error e;
  xgr_store *st = xgr_store_open(path, NULL, &e);
  assert_non_null(st);
  res r = {.n = 0};
  /* a blocker batch keeps the writer busy so the next ones queue up and form one group */
  for (int i = 0; i < 40; i++) {
    xgr_store_changes *b = xgr_store_changes_new();
    xgr_store_hist h = {.iter = (uint64_t)(i == 20 ? 5 : i + 1), .step_id = "B", .status = 2, .valid = 1};
    xgr_store_changes_hist(b, T_OWNER, 1, &h);
    xgr_store_submit(st, b, on_res, &r);
  }
  xgr_store_flush(st);
  assert_int_equal(r.n, 40);
  for (int i = 0; i < 40; i++) assert_int_equal(r.rc[i], i == 20 ? XGR_ECONFLICT : 0);
  xgr_store_hist *hs;
  size_t nh;
  assert_int_equal(xgr_store_history(st, T_OWNER, 1, &hs, &nh, &e), 0);
  assert_int_equal(nh, 39);
  xgr_store_hists_free(hs, nh);
  assert_int_equal(xgr_store_failed(st, NULL), 0);
  xgr_store_close(st);
}

static void test_bad_batch_fails_alone(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  char path[512];
  snprintf(path, sizeof path, "%s/bad.db", dir);
  bad_batch_fails_alone(path);
  t_rmdir(dir);
}

static void test_producers_postgres(void **state) {
  (void)state;
  char *url = pg_fresh("producers");
  if (!url) skip();
  run_producers(url);
  free(url);
}

static void test_bad_batch_fails_alone_postgres(void **state) {
  (void)state;
  char *url = pg_fresh("bad");
  if (!url) skip();
  bad_batch_fails_alone(url);
  free(url);
}

/* Session rows of the same session in several batches that go in one group (the PostgreSQL bulk
 * path sends a session's first row in one statement and its later rows after it, in order): the
 * last row wins and every batch succeeds. */
static void session_rows_in_one_group(const char *path) {
  xgr_error e;
  xgr_store *st = xgr_store_open(path, NULL, &e);
  assert_non_null(st);
  res r = {.n = 0};
  for (int i = 0; i < 40; i++) {
    xgr_store_changes *b = xgr_store_changes_new();
    char reg[16], hash[16];
    snprintf(reg, sizeof reg, "r%d", i);
    snprintf(hash, sizeof hash, "h%d", i);
    xgr_store_session s = {.owner = T_OWNER, .root_pid = 100 + (uint64_t)(i % 10), .registry = reg, .ostc_id = "O",
                           .ostc_hash = hash, .created_at = 1000 + i, .next_iter = (uint64_t)i + 2, .next_group = 1,
                           .max_total_gas = ""};
    xgr_store_changes_session(b, &s);
    xgr_store_submit(st, b, on_res, &r);
  }
  xgr_store_flush(st);
  assert_int_equal(r.n, 40);
  for (int i = 0; i < 40; i++) assert_int_equal(r.rc[i], 0);
  for (int k = 0; k < 10; k++) {
    xgr_store_session s;
    assert_int_equal(xgr_store_session_get(st, T_OWNER, 100 + (uint64_t)k, &s, &e), 0);
    char want[16];
    snprintf(want, sizeof want, "r%d", 30 + k);
    assert_string_equal(s.registry, want);
    assert_int_equal(s.next_iter, 32 + k);
    xgr_store_session_clear(&s);
  }
  assert_int_equal(xgr_store_failed(st, NULL), 0);
  xgr_store_close(st);
}

static void test_session_rows_in_one_group(void **state) {
  (void)state;
  session_rows_in_one_group("memory:");
  char *dir = t_tmpdir();
  char path[512];
  snprintf(path, sizeof path, "%s/rows.db", dir);
  session_rows_in_one_group(path);
  t_rmdir(dir);   /* frees dir */
}

static void test_session_rows_in_one_group_postgres(void **state) {
  (void)state;
  char *url = pg_fresh("rows");
  if (!url) skip();
  session_rows_in_one_group(url);
  free(url);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_producers_memory),
      cmocka_unit_test(test_producers_sqlite),
      cmocka_unit_test(test_bad_batch_fails_alone),
      cmocka_unit_test(test_producers_postgres),
      cmocka_unit_test(test_bad_batch_fails_alone_postgres),
      cmocka_unit_test(test_session_rows_in_one_group),
      cmocka_unit_test(test_session_rows_in_one_group_postgres),
  };
  return cmocka_run_group_tests_name("store_group_commit", tests, NULL, NULL);
}
