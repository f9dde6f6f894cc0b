/* test_store.c — unit tests of the store (xgr/store.h) on both backends: a shared table of
 * operations that memory and SQLite must answer alike, unique history rows, registries and
 * owners, migrations (empty file, a v1 file written by SQL here), a full disk, a read-only
 * file, retention (TTL) on a fake clock, and recovery of a session core from stored rows
 * (a run interrupted and restored ends with exactly the rows of an uninterrupted run). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <pthread.h>
#include <cmocka.h>
#include <sqlite3.h>
#include <ctype.h>
#include <inttypes.h>
#include <libpq-fe.h>

#include "store_util.h"
#include "xgr/engine.h"

static xgr_orch *load_orch(void) {
  xgr_orch *o = NULL;
  xgr_error e;
  assert_int_equal(xgr_orch_parse(t_orch_doc, strlen(t_orch_doc), &o, &e, NULL), 0);
  return o;
}

/* Backends under test: 0 memory, 1 SQLite, 2 PostgreSQL (only when XGR_PG_URL names a database:
 * tests/pg/pg_cluster.sh sets it; meson runs this program a second time that way). */
static int nkinds(void) {
  const char *u = getenv("XGR_PG_URL");
  return u && *u ? 3 : 2;
}

static const char *const kind_names[] = {"memory", "sqlite", "postgresql"};

/* The PostgreSQL "file" of (dir, name): a schema of its own in XGR_PG_URL's database, selected
 * with the URI's `options=-csearch_path=...`. */
static void pg_schema(const char *dir, const char *name, char *out, size_t cap) {
  const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
  size_t n = 0;
  for (const char *p = base; *p && n + 2 < cap; p++) out[n++] = isalnum((unsigned char)*p) ? (char)tolower(*p) : '_';
  out[n++] = '_';
  for (const char *p = name; *p && n + 1 < cap; p++) out[n++] = isalnum((unsigned char)*p) ? (char)tolower(*p) : '_';
  out[n] = 0;
}

/* Drop and create the schema of (dir, name): an empty "file". */
static void pg_reset(const char *dir, const char *name) {
  char schema[128], sql[400];
  pg_schema(dir, name, schema, sizeof schema);
  PGconn *c = PQconnectdb(getenv("XGR_PG_URL"));
  assert_int_equal(PQstatus(c), CONNECTION_OK);
  snprintf(sql, sizeof sql, "SET client_min_messages = warning; DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s",
           schema, schema);
  PGresult *r = PQexec(c, sql);
  if (PQresultStatus(r) != PGRES_COMMAND_OK) fail_msg("%s: %s", sql, PQerrorMessage(c));
  PQclear(r);
  PQfinish(c);
}

static void pg_url(const char *dir, const char *name, char *out, size_t cap) {
  char schema[128];
  pg_schema(dir, name, schema, sizeof schema);
  const char *u = getenv("XGR_PG_URL");
  snprintf(out, cap, "%s%soptions=-csearch_path%%3D%s", u, strchr(u, '?') ? "&" : "?", schema);
}

/* Open backend k on (dir, name); the first open of a PostgreSQL (dir, name) in this process
 * starts from an empty schema, like a new file. */
static xgr_store *open_kind(int k, const char *dir, const char *name, const xgr_store_config *cfg) {
  static char seen[64][160];
  static int nseen;
  char path[512];
  if (k == 2) {
    char key[160];
    snprintf(key, sizeof key, "%s/%s", dir, name);
    bool known = false;
    for (int i = 0; i < nseen; i++) known = known || !strcmp(seen[i], key);
    if (!known) {
      pg_reset(dir, name);
      if (nseen < 64) snprintf(seen[nseen++], sizeof seen[0], "%s", key);
    }
    pg_url(dir, name, path, sizeof path);
  } else {
    snprintf(path, sizeof path, "%s/%s", dir, name);
  }
  xgr_error e;
  xgr_store *st = xgr_store_open(k ? path : "memory:", cfg, &e);
  if (!st) fprintf(stderr, "open: %s\n", e.message);
  assert_non_null(st);
  return st;
}

static xgr_store_proc mkproc(uint64_t iter, uint8_t status, const char *payload) {
  xgr_store_proc p = {.iter = iter, .parent_iter = iter > 1 ? 1 : 0, .step = 1, .step_id = "B", .status = status,
                      .valid = status == XGR_PROC_DONE ? 1 : -1, .group = 0, .next_wake_at = 5, .created_at = 1,
                      .started_at = -1, .finished_at = -1, .payload = (char *)payload};
  return p;
}

/* ---- the shared table ------------------------------------------------------------------------ */

typedef struct live_seen {
  int n;
  size_t procs, killed;
  uint64_t first;
} live_seen;

static int live_cb(void *ctx, const xgr_store_live *l) {
  live_seen *seen = ctx;
  seen->n++;
  seen->procs += l->nprocs;
  seen->killed += l->nkilled;
  if (l->nprocs) seen->first = l->procs[0].iter;
  return 0;
}

/* Every row: an action and what both backends must answer. */
static void shared_table(xgr_store *st) {
  xgr_error e;
  uint64_t pid;
  /* owners: 1, 2, 3 per owner, independent owners */
  assert_int_equal(xgr_store_next_process_id(st, "0xA", &pid, &e), 0);
  assert_int_equal(pid, 1);
  assert_int_equal(xgr_store_next_process_id(st, "0xA", &pid, &e), 0);
  assert_int_equal(pid, 2);
  assert_int_equal(xgr_store_next_process_id(st, "0xB", &pid, &e), 0);
  assert_int_equal(pid, 1);
  assert_int_equal(xgr_store_next_process_id(st, "", &pid, &e), XGR_EINVAL);
  /* getNextProcessId peeks: the expected id, not taken (twice the same), 1 for a new owner */
  assert_int_equal(xgr_store_peek_process_id(st, "0xA", &pid, &e), 0);
  assert_int_equal(pid, 3);
  assert_int_equal(xgr_store_peek_process_id(st, "0xA", &pid, &e), 0);
  assert_int_equal(pid, 3);
  assert_int_equal(xgr_store_peek_process_id(st, "0xC", &pid, &e), 0);
  assert_int_equal(pid, 1);
  assert_int_equal(xgr_store_peek_process_id(st, "", &pid, &e), XGR_EINVAL);
  /* a session started with rootPid 10 moves the expected id past it; taking then gives 11 */
  xgr_store_session s10 = {.owner = "0xD", .root_pid = 10, .registry = "reg", .ostc_id = "t", .ostc_hash = "0xh",
                           .status = XGR_RESULT_COMPLETED, .next_iter = 2};
  xgr_store_changes *b10 = xgr_store_changes_new();
  xgr_store_changes_session(b10, &s10);
  assert_int_equal(xgr_store_commit(st, b10, &e), 0);
  assert_int_equal(xgr_store_peek_process_id(st, "0xD", &pid, &e), 0);
  assert_int_equal(pid, 11);
  assert_int_equal(xgr_store_next_process_id(st, "0xD", &pid, &e), 0);
  assert_int_equal(pid, 11);
  assert_int_equal(xgr_store_peek_process_id(st, "0xD", &pid, &e), 0);
  assert_int_equal(pid, 12);
  /* registries: versions, idempotent re-registration, get by id / version / hash */
  xgr_store_doc d1, d2, d3, g;
  assert_int_equal(xgr_store_register(st, XGR_REG_ORCHESTRATION, "o1", "0xA", "{\"a\":1}", 7, &d1, &e), 0);
  assert_int_equal(d1.version, 1);
  assert_int_equal(xgr_store_register(st, XGR_REG_ORCHESTRATION, "o1", "0xA", "{\"a\":2}", 7, &d2, &e), 0);
  assert_int_equal(d2.version, 2);
  assert_int_equal(xgr_store_register(st, XGR_REG_ORCHESTRATION, "o1", "0xA", "{\"a\":1}", 7, &d3, &e), 0);
  assert_int_equal(d3.version, 1);
  assert_string_equal(d3.hash, d1.hash);
  assert_int_equal(xgr_store_doc_get(st, XGR_REG_ORCHESTRATION, "o1", 0, &g, &e), 0);
  assert_int_equal(g.version, 2);
  assert_string_equal(g.content, "{\"a\":2}");
  xgr_store_doc_clear(&g);
  assert_int_equal(xgr_store_doc_get(st, XGR_REG_ORCHESTRATION, "o1", 1, &g, &e), 0);
  assert_string_equal(g.content, "{\"a\":1}");
  xgr_store_doc_clear(&g);
  assert_int_equal(xgr_store_doc_by_hash(st, XGR_REG_ORCHESTRATION, d2.hash, &g, &e), 0);
  assert_int_equal(g.version, 2);
  xgr_store_doc_clear(&g);
  assert_int_equal(xgr_store_doc_get(st, XGR_REG_RULE, "o1", 0, &g, &e), XGR_ENOTFOUND);
  assert_int_equal(xgr_store_register(st, XGR_REG_RULE, "0xRULE", "0xA", "{}", 2, NULL, &e), 0);
  assert_int_equal(xgr_store_doc_get(st, XGR_REG_RULE, "0xRULE", 0, &g, &e), 0);
  assert_string_equal(g.owner, "0xA");
  xgr_store_doc_clear(&g);
  xgr_store_doc_clear(&d1);
  xgr_store_doc_clear(&d2);
  xgr_store_doc_clear(&d3);

  /* sessions and processes in one batch */
  xgr_store_session s = {.owner = "0xA", .root_pid = 1, .registry = "reg", .ostc_id = "t", .ostc_hash = "0xh",
                         .next_iter = 3, .next_group = 1};
  xgr_store_changes *b = xgr_store_changes_new();
  xgr_store_changes_session(b, &s);
  xgr_store_proc p1 = mkproc(1, XGR_PROC_RUNNING, "{\"x\":1}"), p2 = mkproc(2, XGR_PROC_WAITING, "{\"y\":[1,2.5,\"s\"]}");
  xgr_store_changes_proc(b, "0xA", 1, &p1);
  xgr_store_changes_proc(b, "0xA", 1, &p2);
  assert_int_equal(xgr_store_changes_size(b), 3);
  assert_int_equal(xgr_store_commit(st, b, &e), 0);
  assert_int_equal(xgr_store_peek_process_id(st, "0xA", &pid, &e), 0);
  assert_int_equal(pid, 3);   /* session 1 (below the expected id) changes nothing */
  /* upsert replaces; history appends */
  b = xgr_store_changes_new();
  p1.status = XGR_PROC_DONE;
  p1.payload = "{\"x\":2}";
  xgr_store_changes_proc(b, "0xA", 1, &p1);
  xgr_store_hist h1 = {.iter = 1, .step = 1, .step_id = "B", .status = XGR_PROC_DONE, .valid = 1, .at = 3,
                       .finished_at = 4, .payload = "{\"x\":2}"};
  xgr_store_changes_hist(b, "0xA", 1, &h1);
  xgr_store_changes_scope_killed(b, "0xA", 1, 7);
  xgr_store_changes_scope_killed(b, "0xA", 1, 7);
  xgr_store_changes_session_state(b, "0xA", 1, XGR_RESULT_RUNNING, 0, 4, 8, false);
  xgr_store_changes_session_state(b, "0xA", 1, XGR_RESULT_RUNNING, 0, 5, 8, true);   /* coalesced */
  assert_int_equal(xgr_store_changes_size(b), 5);
  assert_int_equal(xgr_store_commit(st, b, &e), 0);
  xgr_store_session got;
  assert_int_equal(xgr_store_session_get(st, "0xA", 1, &got, &e), 0);
  assert_int_equal(got.next_iter, 5);
  assert_int_equal(got.next_group, 8);
  assert_true(got.paused);
  assert_string_equal(got.registry, "reg");
  assert_int_equal(got.finished_at, 0);
  xgr_store_session_clear(&got);
  assert_int_equal(xgr_store_session_get(st, "0xA", 99, &got, &e), XGR_ENOTFOUND);
  xgr_store_proc *ps;
  size_t np;
  assert_int_equal(xgr_store_procs(st, "0xA", 1, &ps, &np, &e), 0);
  assert_int_equal(np, 2);
  assert_string_equal(ps[0].payload, "{\"x\":2}");
  assert_int_equal(ps[0].status, XGR_PROC_DONE);
  assert_string_equal(ps[1].payload, "{\"y\":[1,2.5,\"s\"]}");
  xgr_store_procs_free(ps, np);

  /* a second history row for the same (owner, rootPid, iter) fails its batch, and nothing of it lands */
  b = xgr_store_changes_new();
  p2.status = XGR_PROC_DONE;
  xgr_store_changes_proc(b, "0xA", 1, &p2);
  xgr_store_changes_hist(b, "0xA", 1, &h1);
  assert_int_equal(xgr_store_commit(st, b, &e), XGR_ECONFLICT);
  assert_non_null(strstr(e.message, "UNIQUE") ? e.message : strstr(e.message, "unique") ? e.message : NULL);
  assert_int_equal(xgr_store_procs(st, "0xA", 1, &ps, &np, &e), 0);
  assert_int_equal(ps[1].status, XGR_PROC_WAITING);
  xgr_store_procs_free(ps, np);
  assert_int_equal(xgr_store_failed(st, NULL), 0);   /* a bad batch does not stop the store */
  /* ... also inside one batch */
  b = xgr_store_changes_new();
  xgr_store_hist h2 = h1;
  h2.iter = 2;
  xgr_store_changes_hist(b, "0xA", 1, &h2);
  xgr_store_changes_hist(b, "0xA", 1, &h2);
  assert_int_equal(xgr_store_commit(st, b, &e), XGR_ECONFLICT);
  xgr_store_hist *hs;
  size_t nh;
  assert_int_equal(xgr_store_history(st, "0xA", 1, &hs, &nh, &e), 0);
  assert_int_equal(nh, 1);
  assert_int_equal(hs[0].iter, 1);
  assert_string_equal(hs[0].step_id, "B");
  assert_int_equal(hs[0].at, 3);
  xgr_store_hists_free(hs, nh);

  /* load_live: the running session with its live processes and killed scopes */
  live_seen seen = {0};
  assert_int_equal(xgr_store_load_live(st, live_cb, &seen, &e), 0);
  assert_int_equal(seen.n, 1);
  assert_int_equal(seen.procs, 1);   /* iter 2 waits; iter 1 is done */
  assert_int_equal(seen.killed, 1);
  assert_int_equal(seen.first, 2);

  /* the session ends: finished_at set, killed scopes gone, not live any more */
  b = xgr_store_changes_new();
  xgr_store_changes_session_state(b, "0xA", 1, XGR_RESULT_KILLED, 42, 5, 8, false);
  assert_int_equal(xgr_store_commit(st, b, &e), 0);
  assert_int_equal(xgr_store_session_get(st, "0xA", 1, &got, &e), 0);
  assert_int_equal(got.status, XGR_RESULT_KILLED);
  assert_int_equal(got.killed_at, 42);
  assert_true(got.finished_at > 0);
  xgr_store_session_clear(&got);
  memset(&seen, 0, sizeof seen);
  assert_int_equal(xgr_store_load_live(st, live_cb, &seen, &e), 0);
  assert_int_equal(seen.n, 0);

  /* removal: session and processes go, history stays */
  b = xgr_store_changes_new();
  xgr_store_changes_remove_session(b, "0xA", 1);
  assert_int_equal(xgr_store_commit(st, b, &e), 0);
  assert_int_equal(xgr_store_session_get(st, "0xA", 1, &got, &e), XGR_ENOTFOUND);
  assert_int_equal(xgr_store_procs(st, "0xA", 1, &ps, &np, &e), 0);
  assert_int_equal(np, 0);
  xgr_store_procs_free(ps, np);
  assert_int_equal(xgr_store_history(st, "0xA", 1, &hs, &nh, &e), 0);
  assert_int_equal(nh, 1);
  xgr_store_hists_free(hs, nh);
  xgr_store_stats stats;
  xgr_store_get_stats(st, &stats);
  assert_int_equal(stats.failed_batches, 2);
}

static void test_shared_table(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  for (int k = 0; k < nkinds(); k++) {
    xgr_store *st = open_kind(k, dir, "shared.db", NULL);
    assert_string_equal(xgr_store_backend(st), kind_names[k]);
    shared_table(st);
    xgr_store_close(st);
  }
  t_rmdir(dir);
}

/* The same session run on both backends leaves the same rows. */
static void test_backends_agree(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  xgr_orch *o = load_orch();
  char *dumps[3] = {NULL, NULL, NULL};
  for (int k = 0; k < nkinds(); k++) {
    xgr_store *st = open_kind(k, dir, "agree.db", NULL);
    int64_t now = 0;
    xgr_session *s = t_start(st, o, 1, now);
    t_run(st, s, &now, 1000, 1);
    assert_int_equal(xgr_session_result_of(s), XGR_RESULT_COMPLETED);
    dumps[k] = t_dump(st, 1);
    xgr_session_free(s);
    xgr_store_close(st);
  }
  assert_string_equal(dumps[0], dumps[1]);
  if (dumps[2]) assert_string_equal(dumps[0], dumps[2]);
  assert_non_null(strstr(dumps[0], "status=1 next_iter"));   /* completed */
  for (int k = 0; k < 3; k++) free(dumps[k]);
  xgr_orch_free(o);
  t_rmdir(dir);
}

/* Run s to its end in turns: each turn promotes up to 4 processes, applies their results, and puts
 * all of it in one batch (deferring live processes' records when `defer`). */
static void run_turns(xgr_store *st, xgr_session *s, bool defer) {
  xgr_effects fx;
  xgr_effects_init(&fx);
  const xgr_orch *o = xgr_session_orch(s);
  for (int64_t now = 1; now < 1000 && xgr_session_result_of(s) == XGR_RESULT_RUNNING; now++) {
    xgr_store_changes *b = xgr_store_changes_new();
    if (defer) xgr_store_changes_defer_live(b);
    xgr_session_promote(s, now, 4, &fx);
    uint64_t iters[4];
    size_t n = 0;
    for (size_t i = 0; i < fx.n && n < 4; i++)
      if (fx.items[i].kind == XGR_FX_RUN_STEP) iters[n++] = fx.items[i].proc->iter;
    xgr_store_changes_add_effects(b, s, &fx);
    xgr_effects_reset(&fx);
    for (size_t i = 0; i < n; i++) {
      const xgr_proc *p = xgr_session_find(s, iters[i]);
      const char *sid = o->steps[p->step].id;
      xgr_value eff = xgr_map_copy(p->payload);
      xgr_map_set_str(eff, sid, strlen(sid), xgr_value_int((int64_t)iters[i]));
      xgr_step_outcome oc = {.kind = t_outcome(iters[i], sid, 3), .effective = eff,
                             .outcome_payload = xgr_value_null(), .error = "boom"};
      xgr_session_step_result(s, iters[i], &oc, now, &fx, NULL);
      xgr_value_release(eff);
      xgr_store_changes_add_effects(b, s, &fx);
      xgr_effects_reset(&fx);
    }
    assert_int_equal(xgr_store_commit(st, b, NULL), 0);
  }
  assert_int_not_equal(xgr_session_result_of(s), XGR_RESULT_RUNNING);
  xgr_effects_free(&fx);
}

/* xgr_store_changes_defer_live: the same turns leave the same rows as records taken at every core
 * call, on every backend; a process that ended in a core call whose effects went to another batch
 * fails the batch that deferred it (and nothing of it is written); a seal before the session is
 * freed takes the records in time. */
static void test_defer_live(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  xgr_orch *o = load_orch();
  for (int k = 0; k < nkinds(); k++) {
    char *dumps[2];
    for (int d = 0; d < 2; d++) {
      xgr_store *st = open_kind(k, dir, d ? "defer.db" : "eager.db", NULL);
      xgr_session *s = t_start(st, o, 1, 0);
      run_turns(st, s, d == 1);
      dumps[d] = t_dump(st, 1);
      xgr_session_free(s);
      xgr_store_close(st);
    }
    assert_string_equal(dumps[0], dumps[1]);
    assert_non_null(strstr(dumps[0], "join={\"decl\""));   /* join targets' states are in it */
    free(dumps[0]);
    free(dumps[1]);

    xgr_store *st = open_kind(k, dir, "defer.db", NULL);
    xgr_session *s = t_start(st, o, 2, 0);
    xgr_effects fx;
    xgr_effects_init(&fx);
    xgr_store_changes *b1 = xgr_store_changes_new();
    xgr_store_changes_defer_live(b1);
    assert_int_equal(xgr_session_promote(s, 1, 1, &fx), 1);
    uint64_t iter = 0;
    for (size_t i = 0; i < fx.n; i++)
      if (fx.items[i].kind == XGR_FX_RUN_STEP) iter = fx.items[i].proc->iter;
    xgr_store_changes_add_effects(b1, s, &fx);   /* A, running: its record is left for the seal */
    xgr_effects_reset(&fx);
    xgr_step_outcome oc = {.kind = XGR_OUTCOME_HARD_ERROR, .effective = xgr_value_null(),
                           .outcome_payload = xgr_value_null(), .error = "boom"};
    xgr_session_step_result(s, iter, &oc, 2, &fx, NULL);
    xgr_store_changes *b2 = xgr_store_changes_new();
    xgr_store_changes_add_effects(b2, s, &fx);   /* ... but it ends in a call whose effects go elsewhere */
    xgr_effects_reset(&fx);
    xgr_error e;
    assert_int_equal(xgr_store_commit(st, b1, &e), XGR_EINVAL);
    assert_non_null(strstr(e.message, "ended after its state was added to this batch"));
    xgr_store_proc *ps;
    size_t np;
    assert_int_equal(xgr_store_procs(st, T_OWNER, 2, &ps, &np, NULL), 0);
    assert_int_equal(np, 1);
    assert_int_equal(ps[0].status, XGR_PROC_WAITING);   /* b1 wrote nothing */
    xgr_store_procs_free(ps, np);
    assert_int_equal(xgr_store_commit(st, b2, &e), 0);
    assert_int_equal(xgr_store_failed(st, NULL), 0);
    xgr_session_free(s);

    /* sealed, then the session goes, then the batch is committed */
    s = t_start(st, o, 3, 0);
    b1 = xgr_store_changes_new();
    xgr_store_changes_defer_live(b1);
    assert_int_equal(xgr_session_promote(s, 1, 1, &fx), 1);
    xgr_store_changes_add_effects(b1, s, &fx);
    xgr_effects_reset(&fx);
    xgr_store_changes_seal(b1);
    xgr_store_changes_seal(b1);   /* idempotent */
    xgr_session_free(s);
    assert_int_equal(xgr_store_commit(st, b1, &e), 0);
    assert_int_equal(xgr_store_procs(st, T_OWNER, 3, &ps, &np, NULL), 0);
    assert_int_equal(np, 1);
    assert_int_equal(ps[0].status, XGR_PROC_RUNNING);
    assert_string_equal(ps[0].step_id, "A");
    xgr_store_procs_free(ps, np);
    xgr_effects_free(&fx);
    xgr_store_close(st);
  }
  xgr_orch_free(o);
  t_rmdir(dir);
}

/* ---- recovery ------------------------------------------------------------------------------------ */

typedef struct restore_ctx {
  const xgr_orch *o;
  xgr_session *s;
  xgr_effects fx;
  int64_t now;
} restore_ctx;

static int restore_cb(void *ctx, const xgr_store_live *l) {
  restore_ctx *r = ctx;
  xgr_error e;
  r->s = xgr_store_restore_session(r->o, l, NULL, r->now, &r->fx, &e);
  if (!r->s) fprintf(stderr, "restore: %s: %s\n", e.path, e.message);
  return r->s ? 0 : XGR_EINVAL;
}

/* Interrupt a run after k steps at many k (drop the core, restore it from the store, go on): the
 * rows at the end are exactly those of an uninterrupted run. */
static void test_restore_matches_uninterrupted(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  xgr_orch *o = load_orch();
  for (unsigned salt = 1; salt <= 6; salt++) {
    xgr_store *ref = open_kind(0, dir, "", NULL);
    int64_t now = 0;
    xgr_session *s = t_start(ref, o, 1, now);
    int total = t_run(ref, s, &now, 100000, salt);
    char *want = t_dump(ref, 1);
    xgr_session_free(s);
    xgr_store_close(ref);
    for (int cut = 1; cut < total; cut += 1 + total / 12) {
      for (int k = 0; k < nkinds(); k++) {
        xgr_store *st = open_kind(k, dir, "restore.db", NULL);
        now = 0;
        s = t_start(st, o, 1, now);
        t_run(st, s, &now, cut, salt);
        xgr_session_free(s);   /* the "crash" */
        if (k) {               /* SQLite: really reopen the file */
          xgr_store_close(st);
          st = open_kind(k, dir, "restore.db", NULL);
        }
        restore_ctx rc = {.o = o, .now = now};
        xgr_effects_init(&rc.fx);
        xgr_error e;
        assert_int_equal(xgr_store_load_live(st, restore_cb, &rc, &e), 0);
        assert_non_null(rc.s);
        assert_int_equal(rc.fx.n, 0);   /* nothing was pending */
        xgr_effects_free(&rc.fx);
        t_run(st, rc.s, &now, 100000, salt);
        char *got = t_dump(st, 1);
        if (strcmp(got, want)) fprintf(stderr, "salt %u cut %d backend %d:\n--- want\n%s--- got\n%s", salt, cut, k, want, got);
        assert_string_equal(got, want);
        free(got);
        xgr_session_free(rc.s);
        xgr_store_close(st);
        char path[512];
        snprintf(path, sizeof path, "rm -f %s/restore.db*", dir);
        assert_int_equal(system(path), 0);
        if (k == 2) pg_reset(dir, "restore.db");
      }
    }
    free(want);
  }
  xgr_orch_free(o);
  t_rmdir(dir);
}

/* A process that was running when the process died runs again after recovery. */
static void test_restore_running_runs_again(void **state) {
  (void)state;
  xgr_orch *o = load_orch();
  xgr_store *st = xgr_store_open("memory:", NULL, NULL);
  xgr_session *s = t_start(st, o, 1, 0);
  xgr_effects fx;
  xgr_effects_init(&fx);
  assert_int_equal(xgr_session_promote(s, 0, 1, &fx), 1);
  xgr_store_changes *b = xgr_store_changes_new();
  xgr_store_changes_add_effects(b, s, &fx);
  assert_int_equal(xgr_store_commit(st, b, NULL), 0);
  xgr_effects_reset(&fx);
  xgr_session_free(s);
  xgr_store_proc *ps;
  size_t np;
  xgr_store_procs(st, T_OWNER, 1, &ps, &np, NULL);
  assert_int_equal(np, 1);
  assert_int_equal(ps[0].status, XGR_PROC_RUNNING);
  xgr_store_procs_free(ps, np);
  restore_ctx rc = {.o = o, .now = 10};
  xgr_effects_init(&rc.fx);
  assert_int_equal(xgr_store_load_live(st, restore_cb, &rc, NULL), 0);
  assert_int_equal(xgr_session_live(rc.s), 1);
  assert_int_equal(xgr_session_running(rc.s), 0);
  assert_int_equal(xgr_session_promote(rc.s, 10, 1, &fx), 1);   /* due at once */
  xgr_effects_free(&fx);
  xgr_effects_free(&rc.fx);
  xgr_session_free(rc.s);
  xgr_store_close(st);
  xgr_orch_free(o);
}

/* Malformed rows never crash recovery: they are refused with an error. */
static void test_restore_rejects_bad_rows(void **state) {
  (void)state;
  xgr_orch *o = load_orch();
  xgr_store_session ss = {.owner = T_OWNER, .root_pid = 1, .ostc_hash = o->hash, .next_iter = 3, .next_group = 2};
  const char *bad_joins[] = {"{", "{\"decl\":[0,0]}", "{\"decl\":[9,0],\"closed\":false,\"outcome\":0,\"closedAt\":0,\"inbox\":[],\"fail\":[]}",
                             "{\"decl\":[0,0],\"closed\":false,\"outcome\":0,\"closedAt\":0,\"inbox\":[null],\"fail\":[false]}",
                             "{\"decl\":[0,0],\"closed\":false,\"outcome\":7,\"closedAt\":0,\"inbox\":[null,null,null],\"fail\":[false,false,false]}",
                             "{\"decl\":[0,0],\"closed\":false,\"outcome\":0,\"closedAt\":0,\"inbox\":[1,null,null],\"fail\":[false,false,false]}"};
  for (size_t i = 0; i < sizeof bad_joins / sizeof *bad_joins; i++) {
    xgr_store_proc p = {.iter = 2, .step = 5 /* J */, .step_id = "J", .status = 0, .valid = -1, .from_group = 1,
                        .payload = "{}", .join = (char *)bad_joins[i]};
    xgr_store_live l = {&ss, &p, 1, NULL, 0};
    xgr_error e;
    xgr_session *s = xgr_store_restore_session(o, &l, NULL, 0, NULL, &e);
    assert_null(s);
    assert_int_not_equal(e.code, 0);
  }
  xgr_store_proc bad[] = {
      {.iter = 9, .step = 1, .status = 0, .payload = "{}"},             /* iter beyond next_iter */
      {.iter = 1, .step = 99, .status = 0, .payload = "{}"},            /* step out of range */
      {.iter = 1, .step = 1, .status = 2, .payload = "{}"},             /* terminal: skipped, not an error */
      {.iter = 1, .step = 1, .status = 0, .payload = "{\"a\":"},         /* broken payload */
      {.iter = 1, .step = 1, .status = 0, .group = 50, .payload = "{}"}, /* group beyond next_group */
  };
  int want_ok[] = {0, 0, 1, 0, 0};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    xgr_store_live l = {&ss, &bad[i], 1, NULL, 0};
    xgr_error e;
    xgr_session *s = xgr_store_restore_session(o, &l, NULL, 0, NULL, &e);
    assert_int_equal(s != NULL, want_ok[i]);
    xgr_session_free(s);
  }
  ss.ostc_hash = "0xother";
  xgr_store_live l = {&ss, NULL, 0, NULL, 0};
  xgr_error e;
  assert_null(xgr_store_restore_session(o, &l, NULL, 0, NULL, &e));
  assert_int_equal(e.code, XGR_EMISMATCH);
  xgr_orch_free(o);
}

/* ---- migrations ----------------------------------------------------------------------------------- */

/* How many processes, and history rows, session T_OWNER/root has in st (the read must succeed). */
static size_t procs_of(xgr_store *st, uint64_t root) {
  xgr_store_proc *ps;
  size_t n;
  xgr_error e;
  assert_int_equal(xgr_store_procs(st, T_OWNER, root, &ps, &n, &e), 0);
  xgr_store_procs_free(ps, n);
  return n;
}

static size_t hist_of(xgr_store *st, uint64_t root) {
  xgr_store_hist *hs;
  size_t n;
  xgr_error e;
  assert_int_equal(xgr_store_history(st, T_OWNER, root, &hs, &n, &e), 0);
  xgr_store_hists_free(hs, n);
  return n;
}

/* Run sql on the SQLite file dir/name (created when missing) with sqlite3 itself, as another
 * program or an older xgr would have written it; its path into path[n]. */
static void sql_file(const char *dir, const char *name, const char *sql, char *path, size_t n) {
  snprintf(path, n, "%s/%s", dir, name);
  sqlite3 *db;
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  char *msg = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  if (rc) fprintf(stderr, "fixture: %s\n", msg);
  sqlite3_free(msg);
  assert_int_equal(rc, SQLITE_OK);
  sqlite3_close(db);
}

/* Open the store at path, which must migrate from schema version `from` to the current one. */
static xgr_store *open_migrated(const char *path, int from) {
  xgr_error e;
  xgr_store *st = xgr_store_open(path, NULL, &e);
  if (!st) fail_msg("open: %s", e.message);
  int found;
  assert_int_equal(xgr_store_schema_version(st, &found), XGR_STORE_SCHEMA_VERSION);
  assert_int_equal(found, from);
  return st;
}

static void test_migrate_empty(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  xgr_store *st = open_kind(1, dir, "new.db", NULL);
  int found;
  assert_int_equal(xgr_store_schema_version(st, &found), XGR_STORE_SCHEMA_VERSION);
  assert_int_equal(found, 0);
  xgr_store_close(st);
  st = open_kind(1, dir, "new.db", NULL);   /* reopening migrates nothing */
  assert_int_equal(xgr_store_schema_version(st, &found), XGR_STORE_SCHEMA_VERSION);
  assert_int_equal(found, XGR_STORE_SCHEMA_VERSION);
  xgr_store_close(st);
  /* a file of another program is refused */
  char path[512];
  sql_file(dir, "other.db", "CREATE TABLE t(x)", path, sizeof path);
  xgr_error e;
  assert_null(xgr_store_open(path, NULL, &e));
  assert_non_null(strstr(e.message, "not an xgr store"));
  /* a newer schema is refused */
  sql_file(dir, "new.db", "INSERT INTO schema_version VALUES(99, 0)", path, sizeof path);
  assert_null(xgr_store_open(path, NULL, &e));
  assert_non_null(strstr(e.message, "schema version 99"));
  /* not a database at all */
  snprintf(path, sizeof path, "%s/junk.db", dir);
  FILE *f = fopen(path, "w");
  fputs("this is not a database, just some text that is long enough to look like a header..........", f);
  fclose(f);
  assert_null(xgr_store_open(path, NULL, &e));
  assert_int_equal(e.code, XGR_EIO);
  t_rmdir(dir);
}

/* The v1 schema exactly as it shipped (migration 1), written here by SQL with a live session. */
static const char *const v1_fixture =
    "CREATE TABLE schema_version(version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);"
    "INSERT INTO schema_version VALUES(1, 0);"
    "CREATE TABLE owners(owner TEXT PRIMARY KEY, next_root INTEGER NOT NULL);"
    "CREATE TABLE orchestrations(id TEXT NOT NULL, version INTEGER NOT NULL, hash TEXT NOT NULL,"
    "  owner TEXT NOT NULL, registered_at INTEGER NOT NULL, content BLOB NOT NULL, PRIMARY KEY(id, version));"
    "CREATE INDEX orchestrations_hash ON orchestrations(hash);"
    "CREATE TABLE rules(id TEXT NOT NULL, version INTEGER NOT NULL, hash TEXT NOT NULL,"
    "  owner TEXT NOT NULL, registered_at INTEGER NOT NULL, content BLOB NOT NULL, PRIMARY KEY(id, version));"
    "CREATE INDEX rules_hash ON rules(hash);"
    "CREATE TABLE sessions(owner TEXT NOT NULL, root_pid INTEGER NOT NULL, registry TEXT NOT NULL DEFAULT '',"
    "  ostc_id TEXT NOT NULL, ostc_hash TEXT NOT NULL, status INTEGER NOT NULL, killed_at INTEGER NOT NULL DEFAULT 0,"
    "  created_at INTEGER NOT NULL, finished_at INTEGER NOT NULL DEFAULT 0, next_iter INTEGER NOT NULL,"
    "  paused INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(owner, root_pid));"
    "CREATE TABLE proc_rt(owner TEXT NOT NULL, root_pid INTEGER NOT NULL, iter INTEGER NOT NULL,"
    "  parent_iter INTEGER NOT NULL, step INTEGER NOT NULL, step_id TEXT NOT NULL, status INTEGER NOT NULL,"
    "  paused INTEGER NOT NULL, valid INTEGER NOT NULL, abort_reason INTEGER NOT NULL, join_group INTEGER NOT NULL,"
    "  join_from_group INTEGER NOT NULL, next_wake_at INTEGER NOT NULL, created_at INTEGER NOT NULL,"
    "  started_at INTEGER NOT NULL, finished_at INTEGER NOT NULL, payload TEXT NOT NULL, error TEXT,"
    "  join_state TEXT, terminal_at INTEGER, PRIMARY KEY(owner, root_pid, iter)) WITHOUT ROWID;"
    "CREATE TABLE proc_steps(owner TEXT NOT NULL, root_pid INTEGER NOT NULL, iter INTEGER NOT NULL,"
    "  parent_iter INTEGER NOT NULL, step INTEGER NOT NULL, step_id TEXT NOT NULL, status INTEGER NOT NULL,"
    "  valid INTEGER NOT NULL, abort_reason INTEGER NOT NULL, at INTEGER NOT NULL, finished_at INTEGER NOT NULL,"
    "  error TEXT, payload TEXT, recorded_at INTEGER NOT NULL, PRIMARY KEY(owner, root_pid, iter)) WITHOUT ROWID;"
    "INSERT INTO owners VALUES('" T_OWNER "', 2);"
    /* session 1 of the test orchestration: A (iter 1) done, its kill join J (iter 2, group 0,
       from group 1) closed satisfied, B (iter 3) still running in the killed scope 1, J not run yet */
    "INSERT INTO sessions(owner, root_pid, ostc_id, ostc_hash, status, created_at, next_iter) VALUES('" T_OWNER
    "', 1, 't', '', 0, 1, 6);"
    "INSERT INTO proc_rt VALUES('" T_OWNER "', 1, 1, 0, 0, 'A', 2, 0, 1, 0, 0, 0, 0, 0, 0, 1, '{\"n\":1}', NULL, NULL, 5);"
    "INSERT INTO proc_rt VALUES('" T_OWNER "', 1, 2, 1, 5, 'J', 0, 0, -1, 0, 0, 1, 1, 1, -1, -1, '{\"n\":9}', NULL,"
    " '{\"decl\":[0,0],\"closed\":true,\"outcome\":1,\"closedAt\":3,\"inbox\":[{\"n\":2,\"_from\":\"B\",\"_when\":\"valid\"},"
    "{\"n\":2,\"_from\":\"C\",\"_when\":\"valid\"},null],\"fail\":[false,false,false]}', NULL);"
    "INSERT INTO proc_rt VALUES('" T_OWNER "', 1, 3, 1, 1, 'B', 1, 0, -1, 0, 1, 0, 1, 1, 2, -1, '{\"n\":1}', NULL, NULL, NULL);"
    "INSERT INTO proc_steps VALUES('" T_OWNER "', 1, 1, 0, 0, 'A', 2, 1, 0, 0, 1, NULL, '{\"n\":1}', 5);"
    "INSERT INTO orchestrations VALUES('t', 1, '0x00', '" T_OWNER "', 0, 'x');";

static void test_migrate_from_v1(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  char path[512];
  sql_file(dir, "v1.db", v1_fixture, path, sizeof path);
  xgr_store *st = open_migrated(path, 1);
  xgr_error e;
  /* data kept; next_group derived from the rows; the kill-closed scope found in the join state */
  xgr_store_session ss;
  assert_int_equal(xgr_store_session_get(st, T_OWNER, 1, &ss, &e), 0);
  assert_int_equal(ss.next_group, 2);
  assert_int_equal(ss.next_iter, 6);
  xgr_store_session_clear(&ss);
  uint64_t pid;
  assert_int_equal(xgr_store_next_process_id(st, T_OWNER, &pid, &e), 0);
  assert_int_equal(pid, 2);
  assert_int_equal(hist_of(st, 1), 1);
  /* and the session comes back: the running B is re-run, but the killed scope's gate aborts it */
  xgr_orch *o = load_orch();
  restore_ctx r = {.o = o, .now = 10};
  xgr_effects_init(&r.fx);
  assert_int_equal(xgr_store_load_live(st, restore_cb, &r, &e), 0);
  assert_non_null(r.s);
  assert_int_equal(xgr_session_live(r.s), 2);
  xgr_effects fx;
  xgr_effects_init(&fx);
  size_t n = xgr_session_promote(r.s, 10, 10, &fx);
  assert_int_equal(n, 1);   /* J runs; B (dispatch gate of the killed scope) is aborted */
  const xgr_proc *b = NULL;
  for (size_t i = 0; i < fx.n; i++)
    if (fx.items[i].kind == XGR_FX_PROC && fx.items[i].proc->iter == 3) b = fx.items[i].proc;
  assert_non_null(b);
  assert_int_equal(b->status, XGR_PROC_ABORTED);
  assert_int_equal(b->abort_reason, XGR_ABORT_JOIN_KILL);
  xgr_effects_free(&fx);
  xgr_effects_free(&r.fx);
  xgr_session_free(r.s);
  xgr_orch_free(o);
  xgr_store_close(st);
  /* a migrated file opens as current from now on */
  st = open_migrated(path, XGR_STORE_SCHEMA_VERSION);
  xgr_store_close(st);
  t_rmdir(dir);
}

/* ---- listing by owner ------------------------------------------------------------------------------ */

/* xgr_store_sessions: the owner's sessions only, newest rootPid first, finished ones included,
 * limit respected; the same on both backends and after reopening the file. */
static void test_sessions_by_owner(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  const char *other = "0x00000000000000000000000000000000000000bb", *other2 = "0x00000000000000000000000000000000000000a9";
  for (int k = 0; k < nkinds(); k++) {
    xgr_store *st = open_kind(k, dir, "owners.db", NULL);
    xgr_error e;
    xgr_store_session *ss;
    size_t n;
    assert_int_equal(xgr_store_sessions(st, T_OWNER, 0, 10, &ss, &n, &e), 0);
    assert_int_equal(n, 0);
    xgr_store_sessions_free(ss, n);
    xgr_store_changes *b = xgr_store_changes_new();
    static const uint64_t roots[] = {7, 2, 30, 11, 5};
    for (size_t i = 0; i < 5; i++) {
      xgr_store_session row = {.owner = T_OWNER, .root_pid = roots[i], .registry = "r", .ostc_id = "t",
                               .ostc_hash = "0x00", .status = i == 1 ? XGR_RESULT_COMPLETED : XGR_RESULT_RUNNING,
                               .next_iter = 2, .next_group = 1};
      xgr_store_changes_session(b, &row);
    }
    /* neighbours on both sides of the owner in key order, and rows without a session row */
    xgr_store_session o1 = {.owner = (char *)other, .root_pid = 1, .registry = "", .ostc_id = "t", .ostc_hash = ""};
    xgr_store_session o2 = {.owner = (char *)other2, .root_pid = 99, .registry = "", .ostc_id = "t", .ostc_hash = ""};
    xgr_store_changes_session(b, &o1);
    xgr_store_changes_session(b, &o2);
    xgr_store_proc p = mkproc(1, XGR_PROC_WAITING, "{}");
    xgr_store_changes_proc(b, T_OWNER, 40, &p);
    assert_int_equal(xgr_store_commit(st, b, &e), 0);
    for (int reopen = 0; reopen < 1 + k; reopen++) {
      if (reopen) {
        xgr_store_close(st);
        st = open_kind(k, dir, "owners.db", NULL);
      }
      assert_int_equal(xgr_store_sessions(st, T_OWNER, 0, 0, &ss, &n, &e), 0);
      assert_int_equal(n, 5);
      static const uint64_t want[] = {30, 11, 7, 5, 2};
      for (size_t i = 0; i < n; i++) {
        assert_int_equal(ss[i].root_pid, want[i]);
        assert_string_equal(ss[i].owner, T_OWNER);
      }
      assert_int_equal(ss[4].status, XGR_RESULT_COMPLETED);
      xgr_store_sessions_free(ss, n);
      assert_int_equal(xgr_store_sessions(st, T_OWNER, 0, 2, &ss, &n, &e), 0);
      assert_int_equal(n, 2);
      assert_int_equal(ss[1].root_pid, 11);
      xgr_store_sessions_free(ss, n);
      /* paging: the next page starts below the last rootPid seen */
      assert_int_equal(xgr_store_sessions(st, T_OWNER, 11, 2, &ss, &n, &e), 0);
      assert_int_equal(n, 2);
      assert_int_equal(ss[0].root_pid, 7);
      assert_int_equal(ss[1].root_pid, 5);
      xgr_store_sessions_free(ss, n);
      assert_int_equal(xgr_store_sessions(st, T_OWNER, 5, 2, &ss, &n, &e), 0);
      assert_int_equal(n, 1);
      assert_int_equal(ss[0].root_pid, 2);
      xgr_store_sessions_free(ss, n);
      assert_int_equal(xgr_store_sessions(st, T_OWNER, 2, 2, &ss, &n, &e), 0);
      assert_int_equal(n, 0);
      xgr_store_sessions_free(ss, n);
      assert_int_equal(xgr_store_sessions(st, other, 0, 5, &ss, &n, &e), 0);
      assert_int_equal(n, 1);
      xgr_store_sessions_free(ss, n);
      assert_int_equal(xgr_store_sessions(st, "0x0", 0, 5, &ss, &n, &e), 0);
      assert_int_equal(n, 0);
      xgr_store_sessions_free(ss, n);
    }
    /* no owner: every owner's rows, rootPid descending (an operator's listing) */
    assert_int_equal(xgr_store_sessions(st, NULL, 0, 100, &ss, &n, &e), 0);
    assert_int_equal(n, 7);
    assert_int_equal(ss[0].root_pid, 99);
    for (size_t i = 1; i < n; i++) assert_true(ss[i - 1].root_pid >= ss[i].root_pid);
    bool other_seen = false;
    for (size_t i = 0; i < n; i++) other_seen |= !strcmp(ss[i].owner, other);
    assert_true(other_seen);
    xgr_store_sessions_free(ss, n);
    assert_int_equal(xgr_store_sessions(st, NULL, 0, 2, &ss, &n, &e), 0);
    assert_int_equal(n, 2);
    xgr_store_sessions_free(ss, n);
    xgr_store_close(st);
  }
  t_rmdir(dir);
}

/* xgr_store_live_owners: owners with running sessions (paused ones included, finished ones not),
 * most first, ties by owner, max respected; xgr_store_owners_after: every owner with rows,
 * ascending, after a cursor; the same on every backend and after reopening. */
static void test_live_owners(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  const char *a = "0x00000000000000000000000000000000000000a1", *b = "0x00000000000000000000000000000000000000b2",
             *c = "0x00000000000000000000000000000000000000c3", *d = "0x00000000000000000000000000000000000000d4";
  for (int k = 0; k < nkinds(); k++) {
    xgr_store *st = open_kind(k, dir, "live_owners.db", NULL);
    xgr_error e;
    xgr_store_owner_live *ol;
    size_t n;
    assert_int_equal(xgr_store_live_owners(st, NULL, 0, &ol, &n, &e), 0);
    assert_int_equal(n, 0);
    xgr_store_owners_free(ol, n);
    /* c: 3 running; a: 2 running, 1 paused, 1 completed; b: 1 running, 1 killed; d: only finished */
    static const struct { int who; uint64_t root; uint8_t status; bool paused; } rows[] = {
        {0, 1, XGR_RESULT_RUNNING, false}, {0, 2, XGR_RESULT_RUNNING, true}, {0, 3, XGR_RESULT_COMPLETED, false},
        {0, 4, XGR_RESULT_RUNNING, false}, {1, 1, XGR_RESULT_RUNNING, false}, {1, 2, XGR_RESULT_KILLED, false},
        {2, 1, XGR_RESULT_RUNNING, false}, {2, 2, XGR_RESULT_RUNNING, false}, {2, 3, XGR_RESULT_RUNNING, false},
        {3, 1, XGR_RESULT_COMPLETED, false}};
    const char *owners[] = {a, b, c, d};
    xgr_store_changes *bt = xgr_store_changes_new();
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
      xgr_store_session row = {.owner = (char *)owners[rows[i].who], .root_pid = rows[i].root, .registry = "r",
                               .ostc_id = "t", .ostc_hash = "0x00", .status = rows[i].status,
                               .paused = rows[i].paused, .next_iter = 2, .next_group = 1};
      xgr_store_changes_session(bt, &row);
    }
    assert_int_equal(xgr_store_commit(st, bt, &e), 0);
    for (int reopen = 0; reopen < 1 + (k > 0); reopen++) {
      if (reopen) {
        xgr_store_close(st);
        st = open_kind(k, dir, "live_owners.db", NULL);
      }
      assert_int_equal(xgr_store_live_owners(st, NULL, 0, &ol, &n, &e), 0);
      assert_int_equal(n, 3);
      assert_string_equal(ol[0].owner, a);   /* 3 live, ties with c: by owner */
      assert_int_equal(ol[0].live, 3);
      assert_string_equal(ol[1].owner, c);
      assert_int_equal(ol[1].live, 3);
      assert_string_equal(ol[2].owner, b);
      assert_int_equal(ol[2].live, 1);
      xgr_store_owners_free(ol, n);
      assert_int_equal(xgr_store_live_owners(st, NULL, 2, &ol, &n, &e), 0);
      assert_int_equal(n, 2);
      assert_string_equal(ol[1].owner, c);
      xgr_store_owners_free(ol, n);
      /* one owner */
      assert_int_equal(xgr_store_live_owners(st, b, 0, &ol, &n, &e), 0);
      assert_int_equal(n, 1);
      assert_string_equal(ol[0].owner, b);
      assert_int_equal(ol[0].live, 1);
      xgr_store_owners_free(ol, n);
      assert_int_equal(xgr_store_live_owners(st, d, 0, &ol, &n, &e), 0);
      assert_int_equal(n, 0);
      xgr_store_owners_free(ol, n);
      /* xgr_store_owners_after: every owner with rows (d's are all finished), ascending, paged */
      assert_int_equal(xgr_store_owners_after(st, NULL, 0, &ol, &n, &e), 0);
      assert_int_equal(n, 4);
      assert_string_equal(ol[0].owner, a);
      assert_string_equal(ol[3].owner, d);
      xgr_store_owners_free(ol, n);
      assert_int_equal(xgr_store_owners_after(st, a, 2, &ol, &n, &e), 0);
      assert_int_equal(n, 2);
      assert_string_equal(ol[0].owner, b);
      assert_string_equal(ol[1].owner, c);
      xgr_store_owners_free(ol, n);
      assert_int_equal(xgr_store_owners_after(st, d, 0, &ol, &n, &e), 0);
      assert_int_equal(n, 0);
      xgr_store_owners_free(ol, n);
    }
    xgr_store_close(st);
  }
  t_rmdir(dir);
}

/* ---- failures: a full disk, a read-only file ------------------------------------------------------- */

/* xgr_store_changes_session_new: the row goes in only if the session has none; otherwise the
 * batch fails alone with XGR_ECONFLICT and writes nothing, while a batch committed in the same
 * group goes through. */
typedef struct rc_box {
  int rc;
  bool done;
} rc_box;

static void rc_done(void *ctx, int rc, const xgr_error *err) {
  (void)err;
  rc_box *b = ctx;
  b->rc = rc;
  b->done = true;
}

static xgr_store_changes *new_session_batch(const xgr_orch *o, uint64_t root, const char *extra_payload) {
  xgr_session *s = xgr_session_new(o, T_OWNER, root, NULL);
  xgr_effects fx;
  xgr_effects_init(&fx);
  assert_int_equal(xgr_session_start(s, 0, xgr_value_null(), 10, &fx, NULL), 0);
  xgr_store_changes *b = xgr_store_changes_new();
  xgr_store_session row = {.owner = T_OWNER, .root_pid = root, .registry = "test", .ostc_id = o->id,
                           .ostc_hash = (char *)o->hash, .status = XGR_RESULT_RUNNING, .next_iter = 2, .next_group = 1};
  xgr_store_changes_session_new(b, &row);
  xgr_store_changes_add_effects(b, s, &fx);
  if (extra_payload) {
    xgr_store_proc p = mkproc(7, XGR_PROC_WAITING, extra_payload);
    xgr_store_changes_proc(b, T_OWNER, root, &p);
  }
  xgr_effects_free(&fx);
  xgr_session_free(s);
  return b;
}

static void test_session_new(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  xgr_orch *o = load_orch();
  for (int k = 0; k < nkinds(); k++) {
    xgr_store *st = open_kind(k, dir, "new.db", NULL);
    xgr_error e;
    assert_int_equal(xgr_store_commit(st, new_session_batch(o, 1, NULL), &e), 0);
    assert_int_equal(procs_of(st, 1), 1);
    /* again, with one more row: refused whole */
    assert_int_equal(xgr_store_commit(st, new_session_batch(o, 1, "{\"x\":1}"), &e), XGR_ECONFLICT);
    assert_int_equal(procs_of(st, 1), 1);
    /* a conflicting batch and a good one submitted together: only the conflicting one fails */
    rc_box bad = {0}, good = {0};
    xgr_store_submit(st, new_session_batch(o, 1, "{}"), rc_done, &bad);
    xgr_store_submit(st, new_session_batch(o, 2, "{}"), rc_done, &good);
    xgr_store_flush(st);
    assert_true(bad.done && good.done);
    assert_int_equal(bad.rc, XGR_ECONFLICT);
    assert_int_equal(good.rc, 0);
    assert_int_equal(procs_of(st, 2), 2);
    assert_int_equal(procs_of(st, 1), 1);
    xgr_store_close(st);
  }
  xgr_orch_free(o);
  t_rmdir(dir);
}

/* A new session's row and a state entry in the same batch (an enqueue's first batch): the state is
 * what the row holds afterwards, whether it repeats the row's values (SQLite skips that UPDATE),
 * changes the counters, hibernates the row or ends the session (killedAt and finished_at set). */
static void test_session_new_then_state(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  xgr_orch *o = load_orch();
  for (int k = 0; k < nkinds(); k++) {
    xgr_store *st = open_kind(k, dir, "newstate.db", NULL);
    xgr_error e;
    xgr_session *core = xgr_session_new(o, T_OWNER, 1, NULL);
    xgr_effects fx;
    xgr_effects_init(&fx);
    assert_int_equal(xgr_session_start(core, 0, xgr_value_null(), 10, &fx, NULL), 0);
    xgr_session_state ss;
    xgr_session_state_get(core, &ss);
    for (uint64_t root = 1; root <= 4; root++) {
      xgr_store_changes *b = new_session_batch(o, root, NULL);   /* row, processes, the same state */
      if (root == 2) xgr_store_changes_session_state(b, T_OWNER, root, XGR_RESULT_RUNNING, 0, 9, 7, true);
      if (root == 3) xgr_store_changes_set_due(b, 500);
      if (root == 4) {
        xgr_store_changes_scope_killed(b, T_OWNER, root, 1);
        xgr_store_changes_session_state(b, T_OWNER, root, XGR_RESULT_KILLED, 42, ss.next_iter, ss.next_group, false);
      }
      assert_int_equal(xgr_store_commit(st, b, &e), 0);
      xgr_store_session got;
      assert_int_equal(xgr_store_session_get(st, T_OWNER, root, &got, &e), 0);
      assert_int_equal(got.status, root == 4 ? XGR_RESULT_KILLED : XGR_RESULT_RUNNING);
      assert_true(got.next_iter == (root == 2 ? 9 : ss.next_iter));
      assert_int_equal(got.next_group, root == 2 ? 7 : ss.next_group);
      assert_int_equal(got.paused, root == 2);
      assert_true(got.wake_due == (root == 3 ? 500 : 0));
      assert_true(got.killed_at == (root == 4 ? 42 : 0));
      assert_true(root == 4 ? got.finished_at > 0 : got.finished_at == 0);
      xgr_store_session_clear(&got);
    }
    xgr_effects_free(&fx);
    xgr_session_free(core);
    xgr_store_close(st);
  }
  xgr_orch_free(o);
  t_rmdir(dir);
}

/* The outbox of internal wake-ups (issue 14): rows written with a batch, removed by id in another,
 * read back oldest first; a batch that fails writes none; SQLite keeps them across a reopen. */
static void test_outbox(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  xgr_orch *o = load_orch();
  for (int k = 0; k < nkinds(); k++) {
    xgr_store *st = open_kind(k, dir, "outbox.db", NULL);
    xgr_error e;
    xgr_store_changes *c = new_session_batch(o, 1, NULL);
    xgr_store_wake w = {.id = "00000000000000000000000000000001", .from_owner = T_OWNER, .from_root = 1,
                        .to_owner = T_OWNER, .to_root = 18446744073709551615ull, .step = "B", .caller = T_OWNER,
                        .rule = NULL, .payload = "{\"Round\":1}"};
    xgr_store_changes_wake_out(c, &w);
    w.id = "00000000000000000000000000000002";
    w.rule = "0x00000000000000000000000000000000000000ee";
    w.from_iter = 7;   /* the sender (process 7, step A), for the refusal's history row */
    w.from_step = "A";
    xgr_store_changes_wake_out(c, &w);
    w.from_iter = 0;
    w.from_step = NULL;
    assert_int_equal(xgr_store_commit(st, c, &e), 0);
    /* a refused batch (the session exists) writes no outbox row */
    c = new_session_batch(o, 1, NULL);
    w.id = "00000000000000000000000000000003";
    xgr_store_changes_wake_out(c, &w);
    assert_int_equal(xgr_store_commit(st, c, &e), XGR_ECONFLICT);
    if (k) {   /* durable: a reopened file has them */
      xgr_store_close(st);
      st = open_kind(k, dir, "outbox.db", NULL);
    }
    xgr_store_wake *ws;
    size_t n;
    assert_int_equal(xgr_store_outbox(st, &ws, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_string_equal(ws[0].id, "00000000000000000000000000000001");
    assert_int_equal(ws[0].to_root, 18446744073709551615ull);
    assert_null(ws[0].rule);
    assert_string_equal(ws[0].payload, "{\"Round\":1}");
    assert_string_equal(ws[1].rule, "0x00000000000000000000000000000000000000ee");
    xgr_store_wakes_free(ws, n);
    /* removed by id (an unknown id is nothing) */
    c = xgr_store_changes_new();
    xgr_store_changes_wake_done(c, "00000000000000000000000000000001", NULL);
    xgr_store_changes_wake_done(c, "ffffffffffffffffffffffffffffffff", NULL);
    assert_int_equal(xgr_store_commit(st, c, &e), 0);
    assert_int_equal(xgr_store_outbox(st, &ws, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(ws[0].id, "00000000000000000000000000000002");
    xgr_store_wakes_free(ws, n);
    /* refused: no longer pending, kept as the producer's record until its rows go */
    c = xgr_store_changes_new();
    xgr_store_changes_wake_done(c, "00000000000000000000000000000002", "not allowed");
    assert_int_equal(xgr_store_commit(st, c, &e), 0);
    assert_int_equal(xgr_store_outbox(st, &ws, &n, &e), 0);
    assert_int_equal(n, 0);
    xgr_store_wakes_free(ws, n);
    assert_int_equal(xgr_store_wakes_refused(st, T_OWNER, 1, &ws, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(ws[0].refused, "not allowed");
    assert_int_equal(ws[0].from_iter, 7);   /* every backend keeps the sender (schema 8) */
    assert_string_equal(ws[0].from_step, "A");
    xgr_store_wakes_free(ws, n);
    c = xgr_store_changes_new();
    xgr_store_changes_remove_session(c, T_OWNER, 1);
    assert_int_equal(xgr_store_commit(st, c, &e), 0);
    assert_int_equal(xgr_store_wakes_refused(st, T_OWNER, 1, &ws, &n, &e), 0);
    assert_int_equal(n, 0);
    xgr_store_wakes_free(ws, n);
    xgr_store_close(st);
  }
  xgr_orch_free(o);
  t_rmdir(dir);
}

/* The audit trail (schema 15): entries written with a batch (directly and through the engine's
 * batch, xgr_store_changes_add_batch) come back in (session_at, written) order with every field; a
 * refused batch writes none of its entries; they survive a reopen and the session row's removal
 * (they are history) and leave with history retention. */
static void test_audit(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  xgr_orch *o = load_orch();
  for (int k = 0; k < nkinds(); k++) {
    t_clock clk = {.ms = 5000000};
    xgr_store_config cfg = {.history_secs = 3600, .gc_interval_ms = -1, .clock_ms = t_clock_ms, .clock_ctx = &clk};
    xgr_store *st = open_kind(k, dir, "audit.db", &cfg);
    xgr_error e;
    xgr_store_changes *c = new_session_batch(o, 1, NULL);
    xgr_store_audit a = {.kind = "pause", .actor = "0x00000000000000000000000000000000000000bb", .node = "n1",
                         .permit = "0xabc", .detail = "{\"iter\":2}", .session_at = 5};
    xgr_store_changes_audit(c, T_OWNER, 1, &a);
    assert_int_equal(xgr_store_commit(st, c, &e), 0);
    /* the engine's batch: an audit entry of an earlier iter and one of the same iter, after */
    xgr_engine_audit ea[2] = {{.kind = "wake", .actor = "auth-none", .node = "n2", .detail = "{\"keys\":[\"x\"]}",
                               .session_at = 3},
                              {.kind = "kill", .actor = "operator", .node = "n2", .permit = "0xdef", .session_at = 5}};
    xgr_store_batch eb = {.owner = T_OWNER, .root_pid = 1, .orch = o, .naudit = 2, .audit = ea, .next_iter = 5,
                          .next_group = 1};
    c = xgr_store_changes_new();
    xgr_store_changes_add_batch(c, &eb);
    clk.ms += 10;
    assert_int_equal(xgr_store_commit(st, c, &e), 0);
    /* refused whole (the session exists): its entry is not written */
    c = new_session_batch(o, 1, NULL);
    a.kind = "resume";
    xgr_store_changes_audit(c, T_OWNER, 1, &a);
    assert_int_equal(xgr_store_commit(st, c, &e), XGR_ECONFLICT);
    if (k) {
      xgr_store_close(st);
      st = open_kind(k, dir, "audit.db", &cfg);
    }
    c = xgr_store_changes_new();
    xgr_store_changes_remove_session(c, T_OWNER, 1);
    assert_int_equal(xgr_store_commit(st, c, &e), 0);
    xgr_store_audit *as;
    size_t n;
    assert_int_equal(xgr_store_audits(st, T_OWNER, 1, &as, &n, &e), 0);
    assert_int_equal(n, 3);
    assert_string_equal(as[0].kind, "wake");
    assert_string_equal(as[0].actor, "auth-none");
    assert_null(as[0].permit);
    assert_string_equal(as[0].detail, "{\"keys\":[\"x\"]}");
    assert_int_equal(as[0].session_at, 3);
    assert_int_equal(as[0].at, 5000010);
    assert_string_equal(as[1].kind, "pause");
    assert_string_equal(as[1].actor, "0x00000000000000000000000000000000000000bb");
    assert_string_equal(as[1].node, "n1");
    assert_string_equal(as[1].permit, "0xabc");
    assert_int_equal(as[1].at, 5000000);
    assert_string_equal(as[2].kind, "kill");
    assert_null(as[2].detail);
    xgr_store_audits_free(as, n);
    assert_int_equal(xgr_store_audits(st, T_OWNER, 2, &as, &n, &e), 0);
    assert_int_equal(n, 0);
    xgr_store_audits_free(as, n);
    clk.ms += 3601 * 1000;   /* retention: the trail is history */
    size_t d;
    assert_int_equal(xgr_store_gc(st, &d, &e), 0);
    assert_int_equal(xgr_store_audits(st, T_OWNER, 1, &as, &n, &e), 0);
    assert_int_equal(n, 0);
    xgr_store_audits_free(as, n);
    xgr_store_close(st);
  }
  xgr_orch_free(o);
  t_rmdir(dir);
}

/* session_grants (schema 18): branch grants through the engine's batch (in the step's commit),
 * xgr_store_changes_grant's upserts (same id, new rights) and revokes, every filter of
 * xgr_store_grants and its id cursor, the rows across a reopen, and their going with the session's
 * row: removed with it (xgr_store_changes_remove_session) and by retention once its row is gone. */
static void test_grants(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  xgr_orch *o = load_orch();
  static const char *const GA = "0x00000000000000000000000000000000000000a1";
  static const char *const GB = "0x00000000000000000000000000000000000000b2";
  static const char *const GC = "0x00000000000000000000000000000000000000c3";
  static const char *const RULE = "0x00000000000000000000000000000000000000e1";
  for (int k = 0; k < nkinds(); k++) {
    t_clock clk = {.ms = 7000000};
    xgr_store_config cfg = {.history_secs = 3600, .gc_interval_ms = -1, .clock_ms = t_clock_ms, .clock_ctx = &clk};
    xgr_store *st = open_kind(k, dir, "grants.db", &cfg);
    xgr_error e;
    assert_int_equal(xgr_store_commit(st, new_session_batch(o, 1, NULL), &e), 0);
    assert_int_equal(xgr_store_commit(st, new_session_batch(o, 2, NULL), &e), 0);
    /* the engine's batch of session 1: two branch grants */
    xgr_engine_grant eg[2] = {{.grantee = GA, .rights = 1, .expires_at = 9000000, .rule = RULE, .step = "K"},
                              {.grantee = GB, .rights = 3, .expires_at = 8000000, .rule = RULE, .step = "K"}};
    xgr_store_batch eb = {.owner = T_OWNER, .root_pid = 1, .orch = o, .ngrants = 2, .grants = eg, .next_iter = 2,
                          .next_group = 1};
    xgr_store_changes *c = xgr_store_changes_new();
    xgr_store_changes_add_batch(c, &eb);
    assert_int_equal(xgr_store_commit(st, c, &e), 0);
    /* managed: C on session 1, A on session 2; then A's rights on 1 change and B is revoked */
    c = xgr_store_changes_new();
    xgr_store_grant g = {.owner = T_OWNER, .root_pid = 1, .grantee = (char *)GC, .rights = 5, .expires_at = 9500000,
                         .enc_dek = "0xdek", .created_by = T_OWNER};
    xgr_store_changes_grant(c, &g);
    g.root_pid = 2, g.grantee = (char *)GA, g.rights = 1, g.enc_dek = NULL;
    xgr_store_changes_grant(c, &g);
    clk.ms += 5;
    assert_int_equal(xgr_store_commit(st, c, &e), 0);
    xgr_store_grant *gs;
    size_t n;
    xgr_store_grant_filter f = {.owner = T_OWNER, .root_pid = 1};
    assert_int_equal(xgr_store_grants(st, &f, &gs, &n, &e), 0);
    assert_int_equal(n, 3);
    int64_t id_a = gs[0].id;
    assert_string_equal(gs[0].grantee, GA);
    assert_string_equal(gs[0].rule, RULE);
    assert_string_equal(gs[0].step, "K");
    assert_string_equal(gs[0].created_by, RULE);
    assert_int_equal(gs[0].created_at, 7000000);
    assert_true(gs[1].id > gs[0].id && gs[2].id > gs[1].id);
    assert_string_equal(gs[2].enc_dek, "0xdek");
    assert_null(gs[2].rule);
    assert_int_equal(gs[2].created_at, 7000005);
    xgr_store_grants_free(gs, n);
    c = xgr_store_changes_new();
    g = (xgr_store_grant){.owner = T_OWNER, .root_pid = 1, .grantee = (char *)GA, .rights = 7, .expires_at = 9900000,
                          .created_by = (char *)GC};
    xgr_store_changes_grant(c, &g);
    g.grantee = (char *)GB, g.rights = 0;
    xgr_store_changes_grant(c, &g);
    assert_int_equal(xgr_store_commit(st, c, &e), 0);
    if (k) {   /* durable */
      xgr_store_close(st);
      st = open_kind(k, dir, "grants.db", &cfg);
    }
    assert_int_equal(xgr_store_grants(st, &f, &gs, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_int_equal(gs[0].id, id_a);   /* rewritten in place */
    assert_int_equal(gs[0].rights, 7);
    assert_int_equal(gs[0].expires_at, 9900000);
    assert_null(gs[0].rule);
    assert_string_equal(gs[0].created_by, GC);
    assert_string_equal(gs[1].grantee, GC);
    xgr_store_grants_free(gs, n);
    /* filters: grantee, party, expiry window, rule, cursor */
    f = (xgr_store_grant_filter){.grantee = GA};
    assert_int_equal(xgr_store_grants(st, &f, &gs, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_int_equal(gs[0].root_pid, 1);
    assert_int_equal(gs[1].root_pid, 2);
    f.after_id = gs[0].id;
    xgr_store_grants_free(gs, n);
    assert_int_equal(xgr_store_grants(st, &f, &gs, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_int_equal(gs[0].root_pid, 2);
    xgr_store_grants_free(gs, n);
    f = (xgr_store_grant_filter){.party = T_OWNER, .limit = 2};
    assert_int_equal(xgr_store_grants(st, &f, &gs, &n, &e), 0);
    assert_int_equal(n, 2);   /* of three, the page's limit */
    xgr_store_grants_free(gs, n);
    f = (xgr_store_grant_filter){.party = GC};
    assert_int_equal(xgr_store_grants(st, &f, &gs, &n, &e), 0);
    assert_int_equal(n, 1);
    xgr_store_grants_free(gs, n);
    f = (xgr_store_grant_filter){.expires_after = 9500000, .expires_until = 9900000};
    assert_int_equal(xgr_store_grants(st, &f, &gs, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_int_equal(gs[0].expires_at, 9900000);
    xgr_store_grants_free(gs, n);
    f = (xgr_store_grant_filter){.rule = RULE};
    assert_int_equal(xgr_store_grants(st, &f, &gs, &n, &e), 0);
    assert_int_equal(n, 0);   /* A's rewrite named no rule; B was revoked */
    xgr_store_grants_free(gs, n);
    /* with the session's row: removed with it; retention takes those whose row it deleted */
    c = xgr_store_changes_new();
    xgr_store_changes_remove_session(c, T_OWNER, 1);
    xgr_store_changes_session_state(c, T_OWNER, 2, XGR_RESULT_COMPLETED, 0, 2, 1, false);
    assert_int_equal(xgr_store_commit(st, c, &e), 0);
    f = (xgr_store_grant_filter){0};
    assert_int_equal(xgr_store_grants(st, &f, &gs, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_int_equal(gs[0].root_pid, 2);
    xgr_store_grants_free(gs, n);
    size_t d;
    assert_int_equal(xgr_store_gc(st, &d, &e), 0);
    assert_int_equal(xgr_store_grants(st, &f, &gs, &n, &e), 0);
    assert_int_equal(n, 1);   /* its row is kept for the retention time */
    xgr_store_grants_free(gs, n);
    clk.ms += 3601 * 1000;
    for (int i = 0; i < 4; i++) assert_int_equal(xgr_store_gc(st, &d, &e), 0);
    assert_int_equal(xgr_store_grants(st, &f, &gs, &n, &e), 0);
    assert_int_equal(n, 0);
    xgr_store_grants_free(gs, n);
    xgr_store_close(st);
  }
  xgr_orch_free(o);
  t_rmdir(dir);
}

/* xgr_store_changes_add_batch, the rows of an actor's turn: the first batch's session row (insert
 * if absent, with its registry and gas budget), one row per process in its last snapshot, history
 * rows that take parent, payload, error and end time from their process's row, the outbox rows,
 * the session state; an ended session's row is not brought back by a later batch of outbox
 * entries alone; a second first batch is refused whole. */
static void test_add_batch(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  xgr_orch *o = load_orch();
  for (int k = 0; k < nkinds(); k++) {
    xgr_store *st = open_kind(k, dir, "batch.db", NULL);
    xgr_error e;
    xgr_value p1 = xgr_value_null(), p2 = xgr_value_null(), wp = xgr_value_null();
    assert_int_equal(xgr_value_from_json_text("{\"x\":1}", 7, 0, &p1, &e), 0);
    assert_int_equal(xgr_value_from_json_text("{\"x\":2}", 7, 0, &p2, &e), 0);
    assert_int_equal(xgr_value_from_json_text("{\"w\":true}", 10, 0, &wp, &e), 0);
    xgr_engine_proc procs[3] = {
        {.iter = 1, .step = 0, .step_id = "A", .status = XGR_PROC_RUNNING, .valid = -1, .created_at = 10,
         .started_at = 11, .payload = p1},
        {.iter = 2, .parent_iter = 1, .step = 1, .step_id = "B", .status = XGR_PROC_WAITING, .valid = -1,
         .group = 1, .created_at = 20, .next_wake_at = 90, .payload = p1},
        {.iter = 1, .step = 0, .step_id = "A", .status = XGR_PROC_DONE, .valid = 1, .created_at = 10, .started_at = 11,
         .finished_at = 30, .payload = p2, .error = NULL},
    };
    xgr_engine_hist hist[1] = {{.iter = 1, .step = 0, .status = XGR_PROC_DONE, .valid = 1, .at = 11, .api = "[]"}};
    xgr_engine_wake wakes[1] = {{.id = "0000000000000000000000000000000a", .to_owner = T_OWNER, .to_root = 9,
                                 .step = "B", .caller = T_OWNER, .payload = wp, .from_iter = 1, .from_step = "A"}};
    xgr_store_batch b = {.owner = T_OWNER, .root_pid = 5, .orch = o, .nprocs = 3, .procs = procs, .nhist = 1,
                         .hist = hist, .nwakes = 1, .wakes = wakes, .next_iter = 3, .next_group = 2,
                         .session_new = true, .registry = "reg", .max_total_gas = "1000"};
    xgr_store_changes *c = xgr_store_changes_new();
    xgr_store_changes_add_batch(c, &b);
    assert_int_equal(xgr_store_commit(st, c, &e), 0);
    xgr_store_session row;
    assert_int_equal(xgr_store_session_get(st, T_OWNER, 5, &row, &e), 0);
    assert_string_equal(row.registry, "reg");
    assert_string_equal(row.max_total_gas, "1000");
    assert_int_equal(row.status, XGR_RESULT_RUNNING);
    assert_true(row.next_iter == 3 && row.next_group == 2);
    xgr_store_session_clear(&row);
    xgr_store_proc *ps;
    size_t n;
    assert_int_equal(xgr_store_procs(st, T_OWNER, 5, &ps, &n, &e), 0);
    assert_int_equal(n, 2);   /* iter 1 once, in its last snapshot */
    assert_true(ps[0].iter == 1 && ps[0].status == XGR_PROC_DONE && ps[0].finished_at == 30);
    assert_string_equal(ps[0].payload, "{\"x\":2}");
    assert_true(ps[1].iter == 2 && ps[1].parent_iter == 1 && ps[1].next_wake_at == 90);
    xgr_store_procs_free(ps, n);
    xgr_store_hist *hs;
    assert_int_equal(xgr_store_history(st, T_OWNER, 5, &hs, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(hs[0].step_id, "A");
    assert_string_equal(hs[0].payload, "{\"x\":2}");
    assert_true(hs[0].at == 11 && hs[0].finished_at == 30 && hs[0].valid == 1);
    assert_string_equal(hs[0].api, "[]");
    xgr_store_hists_free(hs, n);
    xgr_store_wake *ws;
    assert_int_equal(xgr_store_outbox(st, &ws, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(ws[0].payload, "{\"w\":true}");
    assert_true(ws[0].from_root == 5 && ws[0].from_iter == 1);
    xgr_store_wakes_free(ws, n);
    /* the same session's first batch again: refused whole */
    c = xgr_store_changes_new();
    xgr_store_changes_add_batch(c, &b);
    assert_int_equal(xgr_store_commit(st, c, &e), XGR_ECONFLICT);
    /* it ends; then a batch of outbox entries alone leaves the ended row as it is */
    xgr_store_batch fin = {.owner = T_OWNER, .root_pid = 5, .orch = o, .nprocs = 1, .procs = &procs[1],
                           .finished = true, .result = XGR_RESULT_COMPLETED, .next_iter = 3, .next_group = 2};
    procs[1].status = XGR_PROC_DONE;
    procs[1].finished_at = 40;
    /* the quotas' count (docs/SECURITY.md): the batch's bytes (its process row: 64 + the payload's
     * text) go into the session's row on top of the count before it; the owner's bytes are the sum
     * over its rows, and go with a removed row */
    xgr_store_quota q = {.stored_bytes = 1000};
    fin.quota = &q;
    c = xgr_store_changes_new();
    xgr_store_changes_add_batch(c, &fin);
    assert_int_equal(q.batch_bytes, XGR_STORE_ROW_BYTES + strlen("{\"x\":2}"));
    assert_int_equal(xgr_store_commit(st, c, &e), 0);
    assert_int_equal(xgr_store_session_get(st, T_OWNER, 5, &row, &e), 0);
    assert_int_equal(row.stored_bytes, 1000 + q.batch_bytes);
    xgr_store_session_clear(&row);
    uint64_t ob = 0;
    assert_int_equal(xgr_store_owner_bytes(st, T_OWNER, &ob, &e), 0);
    assert_int_equal(ob, 1000 + q.batch_bytes);
    const char *done[1] = {"0000000000000000000000000000000a"};
    const char *why[1] = {NULL};
    xgr_store_batch only = {.owner = T_OWNER, .root_pid = 5, .orch = o, .ndone = 1, .done = done, .done_reason = why};
    c = xgr_store_changes_new();
    xgr_store_changes_add_batch(c, &only);
    assert_int_equal(xgr_store_changes_size(c), 1);
    assert_int_equal(xgr_store_commit(st, c, &e), 0);
    assert_int_equal(xgr_store_session_get(st, T_OWNER, 5, &row, &e), 0);
    assert_int_equal(row.status, XGR_RESULT_COMPLETED);
    xgr_store_session_clear(&row);
    assert_int_equal(xgr_store_outbox(st, &ws, &n, &e), 0);
    assert_int_equal(n, 0);
    xgr_store_wakes_free(ws, n);
    c = xgr_store_changes_new();   /* a batch without a quota leaves the count; a removal takes it off the owner */
    xgr_store_changes_remove_session(c, T_OWNER, 5);
    assert_int_equal(xgr_store_commit(st, c, &e), 0);
    assert_int_equal(xgr_store_owner_bytes(st, T_OWNER, &ob, &e), 0);
    assert_int_equal(ob, 0);
    xgr_value_release(p1);
    xgr_value_release(p2);
    xgr_value_release(wp);
    xgr_store_close(st);
  }
  xgr_orch_free(o);
  t_rmdir(dir);
}

static void test_full_disk(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  xgr_store_config cfg = {.max_page_count = 64};
  xgr_store *st = open_kind(1, dir, "full.db", &cfg);
  char big[4096];
  memset(big, 'x', sizeof big);
  memcpy(big, "{\"b\":\"", 6);
  memcpy(big + sizeof big - 3, "\"}", 3);
  xgr_error e;
  int rc = 0;
  uint64_t committed = 0;
  for (uint64_t i = 1; i < 10000 && !rc; i++) {
    xgr_store_changes *b = xgr_store_changes_new();
    xgr_store_proc p = mkproc(i, XGR_PROC_WAITING, big);
    xgr_store_changes_proc(b, T_OWNER, 1, &p);
    rc = xgr_store_commit(st, b, &e);
    if (!rc) committed = i;
  }
  assert_int_equal(rc, XGR_EIO);
  assert_non_null(strstr(e.message, "full"));
  fprintf(stderr, "full disk after %llu rows: %s\n", (unsigned long long)committed, e.message);
  /* the store refuses to go on */
  xgr_error f;
  assert_int_equal(xgr_store_failed(st, &f), XGR_EIO);
  assert_string_equal(f.message, e.message);
  xgr_store_changes *b = xgr_store_changes_new();
  xgr_store_changes_scope_killed(b, T_OWNER, 1, 1);
  assert_int_equal(xgr_store_submit(st, b, NULL, NULL), XGR_EIO);
  uint64_t pid;
  assert_int_equal(xgr_store_next_process_id(st, T_OWNER, &pid, &e), XGR_EIO);
  xgr_store_close(st);
  /* nothing committed was lost */
  st = open_kind(1, dir, "full.db", NULL);
  assert_int_equal(procs_of(st, 1), committed);
  xgr_store_close(st);
  t_rmdir(dir);
}

static void test_read_only_file(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  xgr_store *st = open_kind(1, dir, "ro.db", NULL);
  uint64_t pid;
  assert_int_equal(xgr_store_next_process_id(st, T_OWNER, &pid, NULL), 0);
  xgr_store_close(st);
  char path[512];
  snprintf(path, sizeof path, "%s/ro.db", dir);
  /* root writes any file: try it as an unprivileged user in a child, with the file 0444 */
  assert_int_equal(chmod(dir, 0755), 0);
  assert_int_equal(chmod(path, 0444), 0);
  snprintf(path, sizeof path, "%s/ro.db-wal", dir);
  chmod(path, 0444);
  snprintf(path, sizeof path, "%s/ro.db-shm", dir);
  chmod(path, 0444);
  snprintf(path, sizeof path, "%s/ro.db", dir);
  int pfd[2];
  assert_int_equal(pipe(pfd), 0);
  pid_t child = fork();
  if (child == 0) {
    close(pfd[0]);
    if (getuid() == 0 && (setgid(65534) || setuid(65534))) _exit(3);
    xgr_error e;
    xgr_store *s2 = xgr_store_open(path, NULL, &e);
    if (s2) _exit(1);
    if (write(pfd[1], e.message, strlen(e.message)) < 0) _exit(4);
    _exit(0);
  }
  close(pfd[1]);
  char msg[600] = {0};
  ssize_t n = read(pfd[0], msg, sizeof msg - 1);
  close(pfd[0]);
  int status;
  waitpid(child, &status, 0);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_true(n > 0);
  fprintf(stderr, "read-only file: %s\n", msg);
  assert_non_null(strstr(msg, "read-only"));
  /* read_only mode reads it */
  xgr_store_config cfg = {.read_only = true};
  xgr_error e;
  st = xgr_store_open(path, &cfg, &e);
  assert_non_null(st);
  xgr_store_changes *b = xgr_store_changes_new();
  assert_int_equal(xgr_store_submit(st, b, NULL, NULL), XGR_EPERM);
  xgr_store_close(st);
  t_rmdir(dir);
}

/* ---- retention ---------------------------------------------------------------------------------------- */

static void test_ttl_gc(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  for (int k = 0; k < nkinds(); k++) {
    t_clock clk = {.ms = 1000000};
    xgr_store_config cfg = {.ttl_secs = 60, .history_secs = 3600, .gc_interval_ms = -1, .gc_batch = 7,
                            .clock_ms = t_clock_ms, .clock_ctx = &clk};
    xgr_store *st = open_kind(k, dir, "gc.db", &cfg);
    xgr_store_session ss = {.owner = T_OWNER, .root_pid = 1, .ostc_id = "t", .ostc_hash = "", .next_iter = 100};
    xgr_store_changes *b = xgr_store_changes_new();
    xgr_store_changes_session(b, &ss);
    for (uint64_t i = 1; i <= 50; i++) {
      xgr_store_proc p = mkproc(i, i <= 40 ? XGR_PROC_DONE : XGR_PROC_WAITING, "{}");
      p.group = i > 45 ? 3 : 0;
      xgr_store_changes_proc(b, T_OWNER, 1, &p);
      xgr_store_hist h = {.iter = i, .step_id = "B", .status = 2, .valid = 1};
      if (i <= 40) xgr_store_changes_hist(b, T_OWNER, 1, &h);
    }
    xgr_store_changes_scope_killed(b, T_OWNER, 1, 3);   /* has live members: stays */
    xgr_store_changes_scope_killed(b, T_OWNER, 1, 4);   /* none: garbage */
    assert_int_equal(xgr_store_commit(st, b, NULL), 0);
    size_t d;
    xgr_error e;
    clk.ms += 59 * 1000;   /* not yet */
    assert_int_equal(xgr_store_gc(st, &d, &e), 0);
    assert_int_equal(d, 1);   /* only the scope */
    clk.ms += 2 * 1000;    /* past the TTL: 40 terminal rows go, in batches of 7 */
    assert_int_equal(xgr_store_gc(st, &d, &e), 0);
    assert_int_equal(d, 40);
    xgr_store_proc *ps;
    size_t np;
    xgr_store_procs(st, T_OWNER, 1, &ps, &np, NULL);
    assert_int_equal(np, 10);
    assert_int_equal(ps[0].iter, 41);
    xgr_store_procs_free(ps, np);
    assert_int_equal(hist_of(st, 1), 40);   /* history is kept longer */
    /* the session ends; an hour later its history and row go too */
    b = xgr_store_changes_new();
    xgr_store_changes_session_state(b, T_OWNER, 1, XGR_RESULT_COMPLETED, 0, 100, 5, false);
    assert_int_equal(xgr_store_commit(st, b, NULL), 0);
    clk.ms += 3601 * 1000;
    assert_int_equal(xgr_store_gc(st, &d, &e), 0);
    assert_int_equal(d, 41);
    assert_int_equal(hist_of(st, 1), 0);
    assert_int_equal(xgr_store_session_get(st, T_OWNER, 1, &ss, &e), XGR_ENOTFOUND);
    xgr_store_stats stats;
    xgr_store_get_stats(st, &stats);
    assert_int_equal(stats.gc_deleted, 82);
    xgr_store_close(st);
  }
  t_rmdir(dir);
}

/* Background retention runs by itself (fake clock, short TTL) and does not stop commits, on each
 * backend with a writer thread. PostgreSQL's sweep (gc_procs) looks at 8 x 16 rows per step: the
 * 200 terminal rows and the live ones between them take it several steps, each going on after the
 * last key of the one before. */
static void test_background_gc(void **state) {
  (void)state;
  for (int k = 1; k < nkinds(); k++) {
  char *dir = t_tmpdir();
  t_clock clk = {.ms = 5000};
  xgr_store_config cfg = {.ttl_secs = 1, .gc_interval_ms = 5, .gc_batch = 16, .clock_ms = t_clock_ms, .clock_ctx = &clk};
  xgr_store *st = open_kind(k, dir, "bg.db", &cfg);
  xgr_store_changes *b = xgr_store_changes_new();
  for (uint64_t i = 1; i <= 200; i++) {
    xgr_store_proc p = mkproc(i, XGR_PROC_DONE, "{}");
    xgr_store_changes_proc(b, T_OWNER, 1, &p);
    p = mkproc(i, XGR_PROC_WAITING, "{}");   /* live rows of another session, kept */
    xgr_store_changes_proc(b, T_OWNER, 3, &p);
  }
  assert_int_equal(xgr_store_commit(st, b, NULL), 0);
  __atomic_store_n(&clk.ms, 10000, __ATOMIC_SEQ_CST);
  size_t np = 1;
  for (int tries = 0; tries < 400 && np; tries++) {
    b = xgr_store_changes_new();   /* commits go on meanwhile */
    xgr_store_changes_scope_killed(b, T_OWNER, 2, (uint32_t)tries + 1);
    assert_int_equal(xgr_store_commit(st, b, NULL), 0);
    usleep(5000);
    xgr_store_proc *ps;
    xgr_store_procs(st, T_OWNER, 1, &ps, &np, NULL);
    xgr_store_procs_free(ps, np);
  }
  assert_int_equal(np, 0);
  xgr_store_proc *ps;
  xgr_store_procs(st, T_OWNER, 3, &ps, &np, NULL);
  assert_int_equal(np, 200);
  xgr_store_procs_free(ps, np);
  xgr_store_close(st);
  t_rmdir(dir);
  }
}

/* ---- uint64 values and the PostgreSQL schema ----------------------------------------------------- */

/* rootPids, iters and counters round-trip exactly up to 2^64-1 on every backend; listing orders
 * rootPids as unsigned numbers, and the owner's next expected rootPid follows them, everywhere. */
static void test_u64_round_trip(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  static const uint64_t roots[] = {1, (uint64_t)INT64_MAX, (uint64_t)INT64_MAX + 1, UINT64_MAX - 1, UINT64_MAX};
  for (int k = 0; k < nkinds(); k++) {
    xgr_store *st = open_kind(k, dir, "u64.db", NULL);
    xgr_error e;
    xgr_store_changes *b = xgr_store_changes_new();
    for (size_t i = 0; i < 5; i++) {
      xgr_store_session row = {.owner = T_OWNER, .root_pid = roots[i], .registry = "r", .ostc_id = "t",
                               .ostc_hash = "0x00", .next_iter = roots[i], .next_group = 1};
      xgr_store_changes_session(b, &row);
      /* text that array literals and quoting must carry unchanged (the bulk path of PostgreSQL) */
      xgr_store_proc p = mkproc(roots[i], XGR_PROC_WAITING, "{\"q\":\"a\\\"b\\\\c {},NULL\\n\u00e9\"}");
      p.parent_iter = roots[i] - 1;
      p.error = i % 2 ? "NULL" : NULL;
      xgr_store_changes_proc(b, T_OWNER, roots[i], &p);
      xgr_store_hist h = {.iter = roots[i], .parent_iter = roots[i], .step_id = "B", .status = 2, .valid = 1};
      xgr_store_changes_hist(b, T_OWNER, roots[i], &h);
    }
    assert_int_equal(xgr_store_commit(st, b, &e), 0);
    for (size_t i = 0; i < 5; i++) {
      xgr_store_session got;
      assert_int_equal(xgr_store_session_get(st, T_OWNER, roots[i], &got, &e), 0);
      assert_true(got.root_pid == roots[i]);
      assert_true(got.next_iter == roots[i]);
      xgr_store_session_clear(&got);
      xgr_store_proc *ps;
      size_t np;
      assert_int_equal(xgr_store_procs(st, T_OWNER, roots[i], &ps, &np, &e), 0);
      assert_int_equal(np, 1);
      assert_true(ps[0].iter == roots[i] && ps[0].parent_iter == roots[i] - 1);
      assert_string_equal(ps[0].payload, "{\"q\":\"a\\\"b\\\\c {},NULL\\n\u00e9\"}");
      if (i % 2) assert_string_equal(ps[0].error, "NULL");
      else assert_null(ps[0].error);
      xgr_store_procs_free(ps, np);
      xgr_store_hist *hs;
      size_t nh;
      assert_int_equal(xgr_store_history(st, T_OWNER, roots[i], &hs, &nh, &e), 0);
      assert_int_equal(nh, 1);
      assert_true(hs[0].iter == roots[i] && hs[0].parent_iter == roots[i]);
      xgr_store_hists_free(hs, nh);
    }
    {   /* ordered as numbers on every backend (SQLite: the order-preserving encoding of migration 8) */
      /* the owner's next expected rootPid: past 2^64-2, and no wrap for 2^64-1 */
      uint64_t pid;
      assert_int_equal(xgr_store_peek_process_id(st, T_OWNER, &pid, &e), 0);
      assert_true(pid == UINT64_MAX);
      xgr_store_session *ss;
      size_t n;
      assert_int_equal(xgr_store_sessions(st, T_OWNER, 0, 0, &ss, &n, &e), 0);
      assert_int_equal(n, 5);
      for (size_t i = 0; i < n; i++) assert_true(ss[i].root_pid == roots[4 - i]);
      xgr_store_sessions_free(ss, n);
      assert_int_equal(xgr_store_sessions(st, T_OWNER, UINT64_MAX - 1, 2, &ss, &n, &e), 0);
      assert_int_equal(n, 2);
      assert_true(ss[0].root_pid == (uint64_t)INT64_MAX + 1 && ss[1].root_pid == (uint64_t)INT64_MAX);
      xgr_store_sessions_free(ss, n);
    }
    xgr_store_close(st);
  }
  t_rmdir(dir);
}

/* ---- rootPids at and above 2^63 ------------------------------------------------------------------ */

/* rootPids 1, 2^63-1, 2^63 and 2^64-1 (started in a mixed order) list in unsigned order, newest
 * first; paging with the last rootPid seen as the cursor returns each exactly once whatever the
 * page size (also a cursor of 2^64-1, which is not "no bound"); the owner's counter moves past
 * 2^63 and the next rootPid taken is 2^63+1. On every backend, and again after a reopen. */
static const uint64_t big_roots[] = {(uint64_t)INT64_MAX + 1, 1, UINT64_MAX, (uint64_t)INT64_MAX};

static void check_big_roots(xgr_store *st, int k) {
  static const uint64_t want[] = {UINT64_MAX, (uint64_t)INT64_MAX + 1, (uint64_t)INT64_MAX, 1};
  xgr_error e;
  xgr_store_session *ss;
  size_t n;
  assert_int_equal(xgr_store_sessions(st, T_OWNER, 0, 0, &ss, &n, &e), 0);
  assert_int_equal(n, 4);
  for (size_t i = 0; i < n; i++)
    if (ss[i].root_pid != want[i])
      fail_msg("backend %s: row %zu is rootPid %llu, want %llu", kind_names[k], i, (unsigned long long)ss[i].root_pid,
               (unsigned long long)want[i]);
  xgr_store_sessions_free(ss, n);
  for (size_t page = 1; page <= 3; page++) {
    uint64_t cursor = 0;
    size_t seen = 0;
    for (int round = 0; round < 8; round++) {
      assert_int_equal(xgr_store_sessions(st, T_OWNER, cursor, page, &ss, &n, &e), 0);
      assert_true(n <= page);
      for (size_t i = 0; i < n; i++) {
        assert_true(seen < 4);
        if (ss[i].root_pid != want[seen])
          fail_msg("backend %s, page size %zu: got rootPid %llu at position %zu, want %llu", kind_names[k], page,
                   (unsigned long long)ss[i].root_pid, seen, (unsigned long long)want[seen]);
        seen++;
      }
      if (n) cursor = ss[n - 1].root_pid;
      xgr_store_sessions_free(ss, n);
      if (n < page) break;
    }
    assert_int_equal(seen, 4);
  }
  /* bounds between the big ones */
  assert_int_equal(xgr_store_sessions(st, T_OWNER, (uint64_t)INT64_MAX + 5, 10, &ss, &n, &e), 0);
  assert_int_equal(n, 3);
  assert_true(ss[0].root_pid == (uint64_t)INT64_MAX + 1);
  xgr_store_sessions_free(ss, n);
  assert_int_equal(xgr_store_sessions(st, T_OWNER, (uint64_t)INT64_MAX + 1, 10, &ss, &n, &e), 0);
  assert_int_equal(n, 2);
  assert_true(ss[0].root_pid == (uint64_t)INT64_MAX && ss[1].root_pid == 1);
  xgr_store_sessions_free(ss, n);
}

static void test_root_pid_order(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  for (int k = 0; k < nkinds(); k++) {
    xgr_store *st = open_kind(k, dir, "bigroots.db", NULL);
    xgr_error e;
    for (size_t i = 0; i < 4; i++) {   /* one commit each: the counter is raised row by row */
      xgr_store_changes *b = xgr_store_changes_new();
      xgr_store_session row = {.owner = T_OWNER, .root_pid = big_roots[i], .registry = "r", .ostc_id = "t",
                               .ostc_hash = "0x00", .next_iter = 2, .next_group = 1};
      xgr_store_changes_session(b, &row);
      xgr_store_proc p = mkproc(1, XGR_PROC_WAITING, "{}");
      xgr_store_changes_proc(b, T_OWNER, big_roots[i], &p);
      assert_int_equal(xgr_store_commit(st, b, &e), 0);
    }
    check_big_roots(st, k);
    uint64_t pid;
    assert_int_equal(xgr_store_peek_process_id(st, T_OWNER, &pid, &e), 0);
    if (pid != (uint64_t)INT64_MAX + 2)
      fail_msg("backend %s: next expected rootPid %llu, want 2^63+1", kind_names[k], (unsigned long long)pid);
    assert_int_equal(xgr_store_next_process_id(st, T_OWNER, &pid, &e), 0);
    assert_true(pid == (uint64_t)INT64_MAX + 2);
    assert_int_equal(xgr_store_peek_process_id(st, T_OWNER, &pid, &e), 0);
    assert_true(pid == (uint64_t)INT64_MAX + 3);
    /* the counter at 2^64-1 stays there: that rootPid is handed out, never 0 or a wrapped one;
       PostgreSQL refuses the step past it by owners' CHECK (migration 11; the domain's before) */
    {
      xgr_store_changes *b = xgr_store_changes_new();
      xgr_store_session row = {.owner = "0xE", .root_pid = UINT64_MAX - 1, .registry = "r", .ostc_id = "t",
                               .status = XGR_RESULT_COMPLETED,
                               .ostc_hash = "0x00", .next_iter = 2, .next_group = 1};
      xgr_store_changes_session(b, &row);
      assert_int_equal(xgr_store_commit(st, b, &e), 0);
      for (int i = 0; i < 2; i++) {
        int rc = xgr_store_next_process_id(st, "0xE", &pid, &e);
        if (k < 2) {
          assert_int_equal(rc, 0);
          if (pid != UINT64_MAX) fail_msg("backend %s: took %llu at the top", kind_names[k], (unsigned long long)pid);
        } else {
          assert_int_not_equal(rc, 0);
          assert_non_null(strstr(e.message, "owners_next_root_u64"));
        }
        assert_int_equal(xgr_store_peek_process_id(st, "0xE", &pid, &e), 0);
        assert_true(pid == UINT64_MAX);
      }
    }
    /* recovery reads the live ones in (owner, rootPid) order */
    live_seen seen = {0};
    assert_int_equal(xgr_store_load_live(st, live_cb, &seen, &e), 0);
    assert_int_equal(seen.n, 4);
    if (k) {   /* the same from the file / database after a reopen */
      xgr_store_close(st);
      st = open_kind(k, dir, "bigroots.db", NULL);
      check_big_roots(st, k);
    }
    xgr_store_close(st);
  }
  t_rmdir(dir);
}

/* A schema-7 SQLite file (as xgr wrote it before migration 8) holding rootPids at and above 2^63 in
 * the old encoding (the int64 of the same bits), in every table that has a rootPid, and an owner
 * counter the old encoding left behind: migration 8 rewrites them, and the store lists, pages,
 * counts and reads them as unsigned numbers. */
static const char *const v7_fixture =
    "CREATE TABLE schema_version(version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);"
    "INSERT INTO schema_version VALUES(1, 0),(2, 0),(3, 0),(4, 0),(5, 0),(6, 0),(7, 0);"
    "CREATE TABLE owners(owner TEXT PRIMARY KEY, next_root INTEGER NOT NULL);"
    "CREATE TABLE orchestrations(id TEXT NOT NULL, version INTEGER NOT NULL, hash TEXT NOT NULL,  owner TEXT NOT NULL,"
    " registered_at INTEGER NOT NULL, content BLOB NOT NULL, PRIMARY KEY(id, version));"
    "CREATE INDEX orchestrations_hash ON orchestrations(hash);"
    "CREATE TABLE rules(id TEXT NOT NULL, version INTEGER NOT NULL, hash TEXT NOT NULL,  owner TEXT NOT NULL,"
    " registered_at INTEGER NOT NULL, content BLOB NOT NULL, PRIMARY KEY(id, version));"
    "CREATE INDEX rules_hash ON rules(hash);"
    "CREATE TABLE sessions(owner TEXT NOT NULL, root_pid INTEGER NOT NULL, registry TEXT NOT NULL DEFAULT '',"
    "  ostc_id TEXT NOT NULL, ostc_hash TEXT NOT NULL, status INTEGER NOT NULL, killed_at INTEGER NOT NULL DEFAULT 0,"
    "  created_at INTEGER NOT NULL, finished_at INTEGER NOT NULL DEFAULT 0, next_iter INTEGER NOT NULL,"
    "  paused INTEGER NOT NULL DEFAULT 0, next_group INTEGER NOT NULL DEFAULT 1, max_total_gas TEXT NOT NULL DEFAULT '',"
    " wake_due INTEGER, PRIMARY KEY(owner, root_pid));"
    "CREATE TABLE proc_rt(owner TEXT NOT NULL, root_pid INTEGER NOT NULL, iter INTEGER NOT NULL,"
    "  parent_iter INTEGER NOT NULL, step INTEGER NOT NULL, step_id TEXT NOT NULL, status INTEGER NOT NULL,"
    "  paused INTEGER NOT NULL, valid INTEGER NOT NULL, abort_reason INTEGER NOT NULL, join_group INTEGER NOT NULL,"
    "  join_from_group INTEGER NOT NULL, next_wake_at INTEGER NOT NULL, created_at INTEGER NOT NULL,"
    "  started_at INTEGER NOT NULL, finished_at INTEGER NOT NULL, payload TEXT NOT NULL, error TEXT,"
    "  join_state TEXT, terminal_at INTEGER, PRIMARY KEY(owner, root_pid, iter)) WITHOUT ROWID;"
    "CREATE TABLE proc_steps(owner TEXT NOT NULL, root_pid INTEGER NOT NULL, iter INTEGER NOT NULL,"
    "  parent_iter INTEGER NOT NULL, step INTEGER NOT NULL, step_id TEXT NOT NULL, status INTEGER NOT NULL,"
    "  valid INTEGER NOT NULL, abort_reason INTEGER NOT NULL, at INTEGER NOT NULL, finished_at INTEGER NOT NULL,"
    "  error TEXT, payload TEXT, recorded_at INTEGER NOT NULL, api TEXT, PRIMARY KEY(owner, root_pid, iter)) WITHOUT ROWID;"
    "CREATE TABLE proc_scopes(owner TEXT NOT NULL, root_pid INTEGER NOT NULL, grp INTEGER NOT NULL,"
    "  PRIMARY KEY(owner, root_pid, grp)) WITHOUT ROWID;"
    "CREATE INDEX proc_rt_terminal ON proc_rt(terminal_at) WHERE terminal_at IS NOT NULL;"
    "CREATE INDEX proc_steps_recorded ON proc_steps(recorded_at);"
    "CREATE INDEX sessions_finished ON sessions(finished_at) WHERE status <> 0;"
    "CREATE TABLE marks(key TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX marks_expiry ON marks(expires_at);"
    "CREATE TABLE outbox(id TEXT PRIMARY KEY, from_owner TEXT NOT NULL, from_root INTEGER NOT NULL,"
    "  to_owner TEXT NOT NULL, to_root INTEGER NOT NULL, step TEXT NOT NULL, caller TEXT NOT NULL, rule TEXT,"
    "  payload TEXT NOT NULL, created_at INTEGER NOT NULL, refused TEXT, refused_at INTEGER);"
    "CREATE INDEX outbox_refused ON outbox(from_owner, from_root) WHERE refused IS NOT NULL;"
    "CREATE INDEX sessions_wake_due ON sessions(wake_due, owner, root_pid) WHERE status = 0 AND wake_due IS NOT NULL;"
    "CREATE INDEX sessions_awake ON sessions(owner, root_pid) WHERE status = 0 AND wake_due IS NULL;"
    /* the old encoding: 2^63 is -9223372036854775808, 2^64-1 is -1, 2^63+1 is -9223372036854775807. The
       counter says 2: raising it to 2^63+1 failed, -9223372036854775807 < 2 */
    "INSERT INTO owners VALUES('" T_OWNER "', 2);"
    "INSERT INTO sessions(owner, root_pid, ostc_id, ostc_hash, status, created_at, next_iter) VALUES"
    " ('" T_OWNER "', 1, 't', '', 0, 1, 2), ('" T_OWNER "', 9223372036854775807, 't', '', 0, 1, 2),"
    " ('" T_OWNER "', -9223372036854775807 - 1, 't', '', 0, 1, 2), ('" T_OWNER "', -1, 't', '', 0, 1, 2);"
    "INSERT INTO proc_rt SELECT owner, root_pid, 1, 0, 0, 'A', 0, 0, -1, 0, 0, 0, 0, 0, -1, -1, '{\"r\":' ||"
    " quote(root_pid) || '}', NULL, NULL, NULL FROM sessions;"
    "INSERT INTO proc_steps SELECT owner, root_pid, 1, 0, 0, 'A', 2, 1, 0, 0, 1, NULL, '{}', 5, NULL FROM sessions;"
    "INSERT INTO proc_scopes SELECT owner, root_pid, 3 FROM sessions;"
    "INSERT INTO outbox VALUES('00000000000000000000000000000001', '" T_OWNER "', -1, '" T_OWNER "',"
    " -9223372036854775807 - 1, 'A', '" T_OWNER "', NULL, '{}', 1, 'no such session here', 7);";

static void test_migrate_big_roots_from_v7(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  char path[512];
  sql_file(dir, "v7.db", v7_fixture, path, sizeof path);
  xgr_store *st = open_migrated(path, 7);
  xgr_error e;
  check_big_roots(st, 1);
  for (size_t i = 0; i < 4; i++) {   /* each table's rows found under the unsigned rootPid */
    assert_int_equal(procs_of(st, big_roots[i]), 1);
    assert_int_equal(hist_of(st, big_roots[i]), 1);
  }
  live_seen seen = {0};
  assert_int_equal(xgr_store_load_live(st, live_cb, &seen, &e), 0);
  assert_int_equal(seen.n, 4);
  assert_int_equal(seen.killed, 4);   /* proc_scopes rewritten too */
  xgr_store_wake *ws;
  size_t nw;
  assert_int_equal(xgr_store_wakes_refused(st, T_OWNER, UINT64_MAX, &ws, &nw, &e), 0);
  assert_int_equal(nw, 1);
  assert_true(ws[0].from_root == UINT64_MAX && ws[0].to_root == (uint64_t)INT64_MAX + 1);
  assert_int_equal(ws[0].from_iter, 0);   /* not recorded before schema 8 */
  assert_null(ws[0].from_step);
  xgr_store_wakes_free(ws, nw);
  /* the counter is repaired: past the largest rootPid below 2^64-1 */
  uint64_t pid;
  assert_int_equal(xgr_store_peek_process_id(st, T_OWNER, &pid, &e), 0);
  if (pid != (uint64_t)INT64_MAX + 2) fail_msg("next expected rootPid %llu, want 2^63+1", (unsigned long long)pid);
  xgr_store_close(st);
  /* and it opens as current from now on, with the same answers */
  st = open_migrated(path, XGR_STORE_SCHEMA_VERSION);
  check_big_roots(st, 1);
  xgr_store_close(st);
  t_rmdir(dir);
}

/* PostgreSQL: one writing store per schema at a time; a new schema migrates from 0 and a reopen
 * finds the current version; an older one
 * migrates (version 3 with a row: the later columns come with their defaults); a schema
 * with other tables but no schema_version, and one with a newer version, are refused; stores
 * opened by several threads at once migrate once; a read-only open reads. */
typedef struct open_arg {
  const char *url;
  int rc;
} open_arg;

static void *open_thread(void *p) {
  open_arg *a = p;
  xgr_error e;
  xgr_store *st = xgr_store_open(a->url, NULL, &e);
  a->rc = st ? 0 : e.code;
  if (!st) fprintf(stderr, "open: %s\n", e.message);
  xgr_store_close(st);
  return NULL;
}

static void pg_exec(const char *dir, const char *name, const char *sql) {
  char url[512];
  pg_url(dir, name, url, sizeof url);
  PGconn *c = PQconnectdb(url);
  PGresult *r = PQexec(c, sql);
  if (PQresultStatus(r) != PGRES_COMMAND_OK) fail_msg("%s: %s", sql, PQerrorMessage(c));
  PQclear(r);
  PQfinish(c);
}

static void test_pg_schema(void **state) {
  (void)state;
  if (nkinds() < 3) skip();
  char *dir = t_tmpdir();
  xgr_store *st = open_kind(2, dir, "m.db", NULL);
  int found = -1;
  assert_int_equal(xgr_store_schema_version(st, &found), XGR_STORE_SCHEMA_VERSION);
  assert_int_equal(found, 0);
  xgr_store_close(st);
  st = open_kind(2, dir, "m.db", NULL);
  assert_int_equal(xgr_store_schema_version(st, &found), XGR_STORE_SCHEMA_VERSION);
  assert_int_equal(found, XGR_STORE_SCHEMA_VERSION);
  xgr_store_close(st);
  char url[512];
  xgr_error e;
  /* a schema at version 3 (columns of 4, 5 and 12, the tables of 6, 10 and 12 taken away, 11's index back, a
   * session row written by SQL) migrates to the current version on open and its row reads back with the new columns'
   * defaults */
  pg_exec(dir, "m.db", "DELETE FROM schema_version WHERE version >= 4; ALTER TABLE sessions DROP COLUMN max_total_gas;"
                       " DROP TABLE outbox; ALTER TABLE sessions DROP COLUMN wake_due;"
                       " ALTER TABLE sessions DROP COLUMN lease_owner, DROP COLUMN lease_epoch, DROP COLUMN lease_expires;"
                       " DROP TABLE lease_commands; DROP FUNCTION xgr_lease_fence; DROP FUNCTION xgr_node_alive;"
                       " DROP FUNCTION xgr_ms_now; DROP TABLE nodes;"
                       " CREATE INDEX proc_rt_terminal ON proc_rt(terminal_at) WHERE terminal_at IS NOT NULL;"
                       " ALTER TABLE proc_rt RESET (fillfactor); ALTER TABLE sessions RESET (fillfactor);"
                       " ALTER TABLE owners DROP CONSTRAINT owners_next_root_u64; ALTER DOMAIN xgr_u64 ADD CONSTRAINT"
                       " xgr_u64_check CHECK (VALUE >= 0 AND VALUE <= 18446744073709551615);"
                       " ALTER TABLE proc_steps DROP COLUMN rt_paused, DROP COLUMN rt_join_group,"
                       " DROP COLUMN rt_join_from_group, DROP COLUMN rt_next_wake_at, DROP COLUMN rt_created_at,"
                       " DROP COLUMN rt_join_state; DROP TABLE proc_born; ALTER TABLE sessions DROP COLUMN stored_bytes;"
                       " ALTER TABLE sessions DROP COLUMN bundle_hash; DROP TABLE session_audit; DROP TABLE session_grants;"
                       " ALTER TABLE sessions DROP COLUMN forked_from;"
                       " ALTER TABLE proc_steps DROP COLUMN api; INSERT INTO sessions(owner, root_pid, ostc_id, ostc_hash,"
                       " status, created_at, next_iter) VALUES('0xold', 18446744073709551615, 't', '', 0, 1, 2);"
                       " INSERT INTO proc_steps(owner, root_pid, iter, parent_iter, step, step_id, status, valid,"
                       " abort_reason, at, finished_at, recorded_at) VALUES('0xold', 7, 1, 0, 0, 'A', 2, 1, 0, 1, 2, 3)");
  st = open_kind(2, dir, "m.db", NULL);
  assert_int_equal(xgr_store_schema_version(st, &found), XGR_STORE_SCHEMA_VERSION);
  assert_int_equal(found, 3);
  xgr_store_session old;
  assert_int_equal(xgr_store_session_get(st, "0xold", UINT64_MAX, &old, &e), 0);
  assert_string_equal(old.max_total_gas, "");
  assert_true(old.next_group == 1 && old.next_iter == 2);
  assert_int_equal(old.stored_bytes, 0);   /* v13: counted from 0 */
  xgr_store_session_clear(&old);
  xgr_store_audit *oa;   /* v15: the audit trail, empty */
  size_t noa;
  assert_int_equal(xgr_store_audits(st, "0xold", UINT64_MAX, &oa, &noa, &e), 0);
  assert_int_equal(noa, 0);
  xgr_store_audits_free(oa, noa);
  xgr_store_grant *og;   /* v16: grants, empty */
  size_t nog;
  xgr_store_grant_filter gf = {0};
  assert_int_equal(xgr_store_grants(st, &gf, &og, &nog, &e), 0);
  assert_int_equal(nog, 0);
  xgr_store_grants_free(og, nog);
  xgr_store_hist *oh;
  size_t noh;
  assert_int_equal(xgr_store_history(st, "0xold", 7, &oh, &noh, &e), 0);
  assert_int_equal(noh, 1);
  assert_null(oh[0].api);
  xgr_store_hists_free(oh, noh);
  xgr_store_close(st);
  /* one writer per schema: a second writing open waits busy_timeout_ms and is refused while the
   * first is open (a read-only open is not); once the first closes, it opens */
  st = open_kind(2, dir, "m.db", NULL);
  char wurl[512];
  pg_url(dir, "m.db", wurl, sizeof wurl);
  xgr_store_config quick = {.busy_timeout_ms = 200};
  assert_null(xgr_store_open(wurl, &quick, &e));
  assert_int_equal(e.code, XGR_ESTATE);
  assert_non_null(strstr(e.message, "another xgr process writes"));
  xgr_store_config ro1 = {.read_only = true};
  xgr_store *reader = xgr_store_open(wurl, &ro1, &e);
  assert_non_null(reader);
  xgr_store_close(reader);
  xgr_store_close(st);
  st = xgr_store_open(wurl, &quick, &e);
  assert_non_null(st);
  xgr_store_close(st);
  /* read-only: reads work, writes are refused */
  pg_url(dir, "m.db", url, sizeof url);
  xgr_store_config ro = {.read_only = true};
  st = xgr_store_open(url, &ro, &e);
  assert_non_null(st);
  xgr_store_session got;
  assert_int_equal(xgr_store_session_get(st, T_OWNER, 1, &got, &e), XGR_ENOTFOUND);
  assert_int_equal(xgr_store_submit(st, xgr_store_changes_new(), NULL, NULL), XGR_EPERM);
  xgr_store_close(st);
  /* a newer schema */
  pg_exec(dir, "m.db", "INSERT INTO schema_version VALUES(99, 0)");
  assert_null(xgr_store_open(url, NULL, &e));
  assert_int_equal(e.code, XGR_EUNSUPPORTED);
  assert_non_null(strstr(e.message, "schema version 99"));
  /* not an xgr store */
  pg_reset(dir, "other.db");
  pg_exec(dir, "other.db", "CREATE TABLE something(x int)");
  pg_url(dir, "other.db", url, sizeof url);
  assert_null(xgr_store_open(url, NULL, &e));
  assert_non_null(strstr(e.message, "not an xgr store"));
  /* a password in the URL never shows in a message */
  assert_null(xgr_store_open("postgresql://u:secret@127.0.0.1:1/x?connect_timeout=2", NULL, &e));
  assert_int_equal(e.code, XGR_EIO);
  assert_null(strstr(e.message, "secret"));
  assert_non_null(strstr(e.message, "cannot connect"));
  /* four nodes starting together on an empty schema: one migrates, all open */
  pg_reset(dir, "race.db");
  pg_url(dir, "race.db", url, sizeof url);
  pthread_t th[4];
  open_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (open_arg){url, -1};
    pthread_create(&th[i], NULL, open_thread, &args[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(args[i].rc, 0);
  }
  t_rmdir(dir);
}

/* PostgreSQL goes away under a running store (stopped with pg_ctl -m immediate, like a crash or a
 * lost network): the next commit fails with an error that says so, the store is in the failed
 * state and refuses every later write at once — as SQLite does on an I/O error. Once the database
 * is back, reads work again. Last in the list: it stops and restarts the cluster of this run. */
static void test_pg_server_gone(void **state) {
  (void)state;
  const char *pgdir = getenv("XGR_PG_DIR");
  if (nkinds() < 3 || !pgdir) skip();
  char *dir = t_tmpdir();
  xgr_store *st = open_kind(2, dir, "gone.db", NULL);
  xgr_error e;
  xgr_store_session row = {.owner = T_OWNER, .root_pid = 1, .registry = "r", .ostc_id = "t", .ostc_hash = "", .next_iter = 2};
  xgr_store_changes *b = xgr_store_changes_new();
  xgr_store_changes_session(b, &row);
  assert_int_equal(xgr_store_commit(st, b, &e), 0);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "%s /usr/lib/postgresql/15/bin/pg_ctl -D %s/data -m immediate -w stop >/dev/null",
           getuid() == 0 ? "runuser -u postgres --" : "", pgdir);
  assert_int_equal(system(cmd), 0);
  b = xgr_store_changes_new();
  xgr_store_changes_session_state(b, T_OWNER, 1, XGR_RESULT_RUNNING, 0, 3, 1, false);
  int rc = xgr_store_commit(st, b, &e);
  assert_int_equal(rc, XGR_EIO);
  fprintf(stderr, "server gone: %s\n", e.message);
  assert_non_null(strstr(e.message, "store postgresql:"));
  xgr_error fe;
  assert_int_equal(xgr_store_failed(st, &fe), XGR_EIO);
  b = xgr_store_changes_new();
  xgr_store_changes_session_state(b, T_OWNER, 1, XGR_RESULT_RUNNING, 0, 4, 1, false);
  assert_int_equal(xgr_store_submit(st, b, NULL, NULL), XGR_EIO);   /* refused at once */
  /* the database comes back: reads of what was committed work again (a new reader connection),
   * writes stay refused until the program opens the store again */
  snprintf(cmd, sizeof cmd, "%s /usr/lib/postgresql/15/bin/pg_ctl -D %s/data -l %s/server.log -w -o '-k %s -c "
           "listen_addresses= -c fsync=off' start >/dev/null", getuid() == 0 ? "runuser -u postgres --" : "", pgdir, pgdir,
           pgdir);
  assert_int_equal(system(cmd), 0);
  xgr_store_session got;
  int grc = xgr_store_session_get(st, T_OWNER, 1, &got, &e);
  if (grc) fprintf(stderr, "read after the restart: %s\n", e.message);
  assert_int_equal(grc, 0);
  assert_int_equal(got.next_iter, 2);
  xgr_store_session_clear(&got);
  b = xgr_store_changes_new();
  xgr_store_changes_session_state(b, T_OWNER, 1, XGR_RESULT_RUNNING, 0, 5, 1, false);
  assert_int_equal(xgr_store_commit(st, b, &e), XGR_EIO);
  xgr_store_close(st);
  t_rmdir(dir);
}

/* ---- hibernation: the due index (issue 19) ----------------------------------------------------- */

typedef struct due_seen {
  int n;
  char keys[8][80];             /* "owner/root due nprocs nkilled" in the order fn saw them */
} due_seen;

static int due_live_cb(void *ctx, const xgr_store_live *l) {
  due_seen *d = ctx;
  if (d->n < 8)
    snprintf(d->keys[d->n], sizeof d->keys[0], "%s/%" PRIu64 " %" PRId64 " %zu %zu", l->session->owner + 40,
             l->session->root_pid, l->session->wake_due, l->nprocs, l->nkilled);
  d->n++;
  return 0;
}

static bool due_seen_has(const due_seen *d, const char *key) {
  for (int i = 0; i < d->n && i < 8; i++)
    if (!strcmp(d->keys[i], key)) return true;
  return false;
}

/* sessions.wake_due on every backend: a state entry with a due time puts the session in the due
 * index (through PostgreSQL's bulk path and, with an entry the bulk path does not take, its
 * statement per entry), a later state without one takes it out, a session that ended is never in
 * it; xgr_store_due pages in (due, owner, rootPid) order up to a bound; xgr_store_load_some reads
 * one session, the awake ones and those due by a bound, or every live one, with the due time. */
static void test_due_index(void **state) {
  (void)state;
  char *dir = t_tmpdir();
  const char *ob = "0x00000000000000000000000000000000000000bb";
  for (int k = 0; k < nkinds(); k++) {
    xgr_store *st = open_kind(k, dir, "due.db", NULL);
    xgr_error e;
    struct { const char *owner; uint64_t root; uint8_t status; int64_t due; bool plain; } rows[] = {
        {T_OWNER, 1, XGR_RESULT_RUNNING, 0, false},            /* awake */
        {T_OWNER, 2, XGR_RESULT_RUNNING, 100, false},          /* hibernated, due at 100 */
        {ob, 1, XGR_RESULT_RUNNING, 100, true},                /* the same due time, a later owner */
        {T_OWNER, 3, XGR_RESULT_RUNNING, XGR_STORE_DUE_NEVER, false},   /* only a wake-up moves it */
        {T_OWNER, 4, XGR_RESULT_COMPLETED, 50, false},         /* ended: never in the index */
        {T_OWNER, 5, XGR_RESULT_RUNNING, 200, true},           /* woken below */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
      xgr_store_changes *b = xgr_store_changes_new();
      xgr_store_session row = {.owner = (char *)rows[i].owner, .root_pid = rows[i].root, .registry = "r",
                               .ostc_id = "t", .ostc_hash = "0x00", .next_iter = 3, .next_group = 2};
      xgr_store_changes_session(b, &row);
      xgr_store_proc p = mkproc(2, XGR_PROC_WAITING, "{}");
      xgr_store_changes_proc(b, rows[i].owner, rows[i].root, &p);
      if (rows[i].root == 2) xgr_store_changes_scope_killed(b, rows[i].owner, rows[i].root, 1);
      assert_int_equal(xgr_store_commit(st, b, &e), 0);
      b = xgr_store_changes_new();
      xgr_store_changes_session_state(b, rows[i].owner, rows[i].root, rows[i].status, 0, 3, 2, false);
      if (rows[i].due) xgr_store_changes_set_due(b, rows[i].due);
      /* an entry that keeps PostgreSQL off its bulk path (a wake-up that is not pending: no-op) */
      if (rows[i].plain) xgr_store_changes_wake_done(b, "00000000000000000000000000000001", NULL);
      assert_int_equal(xgr_store_commit(st, b, &e), 0);
    }
    xgr_store_session got;
    assert_int_equal(xgr_store_session_get(st, T_OWNER, 2, &got, &e), 0);
    assert_true(got.wake_due == 100);
    xgr_store_session_clear(&got);
    assert_int_equal(xgr_store_session_get(st, ob, 1, &got, &e), 0);
    assert_true(got.wake_due == 100);
    xgr_store_session_clear(&got);
    /* a change without a due time wakes the row up (the bulk path) */
    xgr_store_changes *b = xgr_store_changes_new();
    xgr_store_changes_session_state(b, T_OWNER, 5, XGR_RESULT_RUNNING, 0, 4, 2, true);
    assert_int_equal(xgr_store_commit(st, b, &e), 0);
    assert_int_equal(xgr_store_session_get(st, T_OWNER, 5, &got, &e), 0);
    assert_true(got.wake_due == 0 && got.paused && got.next_iter == 4);
    xgr_store_session_clear(&got);

    /* the due index, paged one key at a time */
    xgr_store_due_key keys[4];
    size_t n = 99;
    assert_int_equal(xgr_store_due(st, NULL, 1000, keys, 4, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_true(keys[0].due == 100 && !strcmp(keys[0].owner, T_OWNER) && keys[0].root_pid == 2);
    assert_true(keys[1].due == 100 && !strcmp(keys[1].owner, ob) && keys[1].root_pid == 1);
    assert_int_equal(xgr_store_due(st, NULL, 1000, keys, 1, &n, &e), 0);
    assert_int_equal(n, 1);
    xgr_store_due_key cur = keys[0];
    assert_int_equal(xgr_store_due(st, &cur, 1000, keys, 1, &n, &e), 0);
    assert_true(n == 1 && !strcmp(keys[0].owner, ob));
    cur = keys[0];
    assert_int_equal(xgr_store_due(st, &cur, 1000, keys, 1, &n, &e), 0);
    assert_int_equal(n, 0);
    assert_int_equal(xgr_store_due(st, &cur, INT64_MAX, keys, 4, &n, &e), 0);
    assert_true(n == 1 && keys[0].due == XGR_STORE_DUE_NEVER && keys[0].root_pid == 3);
    assert_int_equal(xgr_store_due(st, NULL, 99, keys, 4, &n, &e), 0);
    assert_int_equal(n, 0);
    /* the engine's cursor past every key of a due time (an owner of 0xff bytes, no valid text) */
    memset(&cur, 0, sizeof cur);
    cur.due = 100;
    memset(cur.owner, 0xff, sizeof cur.owner - 1);
    cur.root_pid = UINT64_MAX;
    assert_int_equal(xgr_store_due(st, &cur, INT64_MAX, keys, 4, &n, &e), 0);
    assert_true(n == 1 && keys[0].root_pid == 3);
    cur.due = 99;
    assert_int_equal(xgr_store_due(st, &cur, INT64_MAX, keys, 4, &n, &e), 0);
    assert_int_equal(n, 3);
    assert_int_equal(xgr_store_due(st, NULL, INT64_MIN, NULL, 0, &n, &e), 0);   /* xgrd's probe */
    assert_int_equal(n, 0);

    /* load_some: the awake ones and those due by 150 */
    due_seen d = {0};
    xgr_store_load_filter f = {.bounded = true, .due_upto = 150};
    assert_int_equal(xgr_store_load_some(st, &f, due_live_cb, &d, &e), 0);
    assert_int_equal(d.n, 4);
    assert_true(due_seen_has(&d, "aa/1 0 1 0"));
    assert_true(due_seen_has(&d, "aa/2 100 1 1"));
    assert_true(due_seen_has(&d, "aa/5 0 1 0"));
    assert_true(due_seen_has(&d, "bb/1 100 1 0"));
    /* one session */
    memset(&d, 0, sizeof d);
    f = (xgr_store_load_filter){.owner = T_OWNER, .root_pid = 3};
    assert_int_equal(xgr_store_load_some(st, &f, due_live_cb, &d, &e), 0);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.keys[0], "aa/3 9223372036854775807 1 0");
    memset(&d, 0, sizeof d);
    f = (xgr_store_load_filter){.owner = T_OWNER, .root_pid = 4};   /* ended: not live */
    assert_int_equal(xgr_store_load_some(st, &f, due_live_cb, &d, &e), 0);
    assert_int_equal(d.n, 0);
    /* every live one, in (owner, rootPid) order */
    memset(&d, 0, sizeof d);
    assert_int_equal(xgr_store_load_some(st, NULL, due_live_cb, &d, &e), 0);
    assert_int_equal(d.n, 5);
    assert_string_equal(d.keys[0], "aa/1 0 1 0");
    assert_string_equal(d.keys[4], "bb/1 100 1 0");
    xgr_store_close(st);
  }
  t_rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shared_table),
      cmocka_unit_test(test_backends_agree),
      cmocka_unit_test(test_defer_live),
      cmocka_unit_test(test_restore_matches_uninterrupted),
      cmocka_unit_test(test_restore_running_runs_again),
      cmocka_unit_test(test_restore_rejects_bad_rows),
      cmocka_unit_test(test_migrate_empty),
      cmocka_unit_test(test_migrate_from_v1),
      cmocka_unit_test(test_sessions_by_owner),
      cmocka_unit_test(test_live_owners),
      cmocka_unit_test(test_session_new),
      cmocka_unit_test(test_session_new_then_state),
      cmocka_unit_test(test_outbox),
      cmocka_unit_test(test_audit),
      cmocka_unit_test(test_grants),
      cmocka_unit_test(test_add_batch),
      cmocka_unit_test(test_full_disk),
      cmocka_unit_test(test_read_only_file),
      cmocka_unit_test(test_ttl_gc),
      cmocka_unit_test(test_background_gc),
      cmocka_unit_test(test_u64_round_trip),
      cmocka_unit_test(test_root_pid_order),
      cmocka_unit_test(test_migrate_big_roots_from_v7),
      cmocka_unit_test(test_due_index),
      cmocka_unit_test(test_pg_schema),
      cmocka_unit_test(test_pg_server_gone),   /* last: stops the cluster */
  };
  return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
