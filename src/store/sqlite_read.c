/* sqlite_read.c — the SQLite store's reads, on the reader connection under its mutex (recursive:
 * a load callback may read again): sessions, processes, history, the outbox, loading live
 * sessions, the due index, registered documents. The statements every enqueue runs are kept
 * prepared.
 */
#include <assert.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "store/sqlite_impl.h"

/* ---- reading (reader connection) --------------------------------------------------------------------- */

#define SESSION_COLS "owner, root_pid, registry, ostc_id, ostc_hash, status, killed_at, created_at, finished_at, " \
                     "next_iter, paused, next_group, max_total_gas, wake_due, bundle_hash, stored_bytes, forked_from"
#define PROC_COLS "iter, parent_iter, step, step_id, status, paused, valid, abort_reason, join_group, " \
                  "join_from_group, next_wake_at, created_at, started_at, finished_at, payload, error, join_state"
#define HIST_COLS "iter, parent_iter, step, step_id, status, valid, abort_reason, at, finished_at, error, payload, " \
                  "recorded_at, api"

static int rd_prepare(sqstore *q, const char *sql, sqlite3_stmt **s, xgr_error *err) {
  int rc = sqlite3_prepare_v2(q->r, sql, -1, s, NULL);
  if (rc) return xgr__sq_error(q->r, rc, q->path, "cannot read", err);
  return 0;
}

/* The reader's kept statements: the ones every enqueue runs (a start reads the stored row of its
 * session first; a start without a rootPid peeks at the owner's next one), where preparing the
 * SQL each time was ~6% of xgrd's CPU in a fan-out. rmu is held; give the statement back with
 * rd_done. */
enum { R_SESSION, R_PEEK };
static const char *const rd_sql[] = {
    [R_SESSION] = "SELECT " SESSION_COLS " FROM sessions WHERE owner=:owner AND root_pid=:root_pid",
    [R_PEEK] = "SELECT next_root FROM owners WHERE owner=:owner",
};

static int rd_kept(sqstore *q, int which, sqlite3_stmt **s, xgr_error *err) {
  if (!q->rstmt[which]) {
    int rc = sqlite3_prepare_v3(q->r, rd_sql[which], -1, SQLITE_PREPARE_PERSISTENT, &q->rstmt[which], NULL);
    if (rc) return xgr__sq_error(q->r, rc, q->path, "cannot read", err);
  }
  *s = q->rstmt[which];
  return 0;
}

static void rd_done(sqlite3_stmt *s) {
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
}

static void read_session_row(sqlite3_stmt *s, xgr_store_session *o) {
  memset(o, 0, sizeof *o);
  o->owner = col_text(s, 0);
  o->root_pid = col_root(s, 1);
  o->registry = col_text(s, 2);
  o->ostc_id = col_text(s, 3);
  o->ostc_hash = col_text(s, 4);
  o->status = (uint8_t)sqlite3_column_int(s, 5);
  o->killed_at = sqlite3_column_int64(s, 6);
  o->created_at = sqlite3_column_int64(s, 7);
  o->finished_at = sqlite3_column_int64(s, 8);
  o->next_iter = (uint64_t)sqlite3_column_int64(s, 9);
  o->paused = sqlite3_column_int(s, 10) != 0;
  o->next_group = (uint32_t)sqlite3_column_int64(s, 11);
  o->max_total_gas = col_text(s, 12);
  o->wake_due = sqlite3_column_int64(s, 13);   /* NULL reads as 0: awake */
  o->bundle_hash = col_text(s, 14);
  o->stored_bytes = (uint64_t)sqlite3_column_int64(s, 15);
  o->forked_from = col_text(s, 16);
}

static void read_proc_row(sqlite3_stmt *s, xgr_store_proc *p) {
  memset(p, 0, sizeof *p);
  p->iter = (uint64_t)sqlite3_column_int64(s, 0);
  p->parent_iter = (uint64_t)sqlite3_column_int64(s, 1);
  p->step = (uint16_t)sqlite3_column_int(s, 2);
  p->step_id = col_text(s, 3);
  p->status = (uint8_t)sqlite3_column_int(s, 4);
  p->paused = sqlite3_column_int(s, 5) != 0;
  p->valid = (int8_t)sqlite3_column_int(s, 6);
  p->abort_reason = (uint8_t)sqlite3_column_int(s, 7);
  p->group = (uint32_t)sqlite3_column_int64(s, 8);
  p->from_group = (uint32_t)sqlite3_column_int64(s, 9);
  p->next_wake_at = sqlite3_column_int64(s, 10);
  p->created_at = sqlite3_column_int64(s, 11);
  p->started_at = sqlite3_column_int64(s, 12);
  p->finished_at = sqlite3_column_int64(s, 13);
  p->payload = col_text(s, 14);
  p->error = col_text(s, 15);
  p->join = col_text(s, 16);
}

static void read_hist_row(sqlite3_stmt *s, xgr_store_hist *h) {
  memset(h, 0, sizeof *h);
  h->iter = (uint64_t)sqlite3_column_int64(s, 0);
  h->parent_iter = (uint64_t)sqlite3_column_int64(s, 1);
  h->step = (uint16_t)sqlite3_column_int(s, 2);
  h->step_id = col_text(s, 3);
  h->status = (uint8_t)sqlite3_column_int(s, 4);
  h->valid = (int8_t)sqlite3_column_int(s, 5);
  h->abort_reason = (uint8_t)sqlite3_column_int(s, 6);
  h->at = sqlite3_column_int64(s, 7);
  h->finished_at = sqlite3_column_int64(s, 8);
  h->error = col_text(s, 9);
  h->payload = col_text(s, 10);
  h->recorded_at = sqlite3_column_int64(s, 11);
  h->api = col_text(s, 12);
}

int xgr__sq_session_get(xgr_store *st, const char *owner, uint64_t root, xgr_store_session *out, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  sqlite3_stmt *s = NULL;
  pthread_mutex_lock(&q->rmu);
  int rc = rd_kept(q, R_SESSION, &s, err);
  if (!rc) {
    pstmt b = {.s = s};
    bind_text(&b, ":owner", owner);
    bind_root(&b, ":root_pid", root);
    int r = sqlite3_step(s);
    if (r == SQLITE_ROW) read_session_row(s, out);
    else if (r == SQLITE_DONE)
      rc = xgr_error_set(err, XGR_ENOTFOUND, NULL, "no session %s/%llu in the store", owner, (unsigned long long)root);
    else rc = xgr__sq_error(q->r, r, q->path, "cannot read sessions", err);
    rd_done(s);
  }
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

int xgr__sq_owner_bytes(xgr_store *st, const char *owner, uint64_t *bytes, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  sqlite3_stmt *s;
  *bytes = 0;
  pthread_mutex_lock(&q->rmu);
  int rc = rd_prepare(q, "SELECT COALESCE(SUM(stored_bytes), 0) FROM sessions WHERE owner = :owner", &s, err);
  if (!rc) {
    pstmt b = {.s = s};
    bind_text(&b, ":owner", owner);
    int r = sqlite3_step(s);
    if (r == SQLITE_ROW) *bytes = (uint64_t)sqlite3_column_int64(s, 0);
    else rc = xgr__sq_error(q->r, r, q->path, "cannot read sessions", err);
    sqlite3_finalize(s);
  }
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

int xgr__sq_peek_pid(xgr_store *st, const char *owner, uint64_t *next, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  sqlite3_stmt *s = NULL;
  pthread_mutex_lock(&q->rmu);
  int rc = rd_kept(q, R_PEEK, &s, err);
  if (!rc) {
    pstmt b = {.s = s};
    bind_text(&b, ":owner", owner);
    int r = sqlite3_step(s);
    if (r == SQLITE_ROW) *next = col_root(s, 0);
    else if (r == SQLITE_DONE) *next = 1;
    else rc = xgr__sq_error(q->r, r, q->path, "cannot read owners", err);
    rd_done(s);
  }
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

/* Outbox rows of a query (owner/root bound when the query names them), in its order. */
static int read_wakes(sqstore *q, const char *sql, const char *owner, uint64_t root, xgr_store_wake **out, size_t *n,
                      xgr_error *err) {
  sqlite3_stmt *s;
  pthread_mutex_lock(&q->rmu);
  int rc = rd_prepare(q, sql, &s, err);
  if (!rc) {
    if (owner) {
      pstmt b = {.s = s};   /* used once: nothing to cache */
      bind_text(&b, ":owner", owner);
      bind_root(&b, ":root_pid", root);
    }
    size_t cap = 8;
    xgr_store_wake *a = xgr__xcalloc(cap, sizeof *a);
    int r;
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
      if (*n == cap) a = xgr__xrealloc(a, (cap *= 2) * sizeof *a);
      xgr_store_wake *w = &a[(*n)++];
      w->id = col_text(s, 0);
      w->from_owner = col_text(s, 1);
      w->from_root = col_root(s, 2);
      w->to_owner = col_text(s, 3);
      w->to_root = col_root(s, 4);
      w->step = col_text(s, 5);
      w->caller = col_text(s, 6);
      w->rule = col_text(s, 7);
      w->payload = col_text(s, 8);
      w->created_at = sqlite3_column_int64(s, 9);
      w->refused = col_text(s, 10);
      w->refused_at = sqlite3_column_int64(s, 11);
      w->from_iter = (uint64_t)sqlite3_column_int64(s, 12);   /* NULL reads as 0: not recorded */
      w->from_step = col_text(s, 13);
    }
    if (r != SQLITE_DONE) {
      rc = xgr__sq_error(q->r, r, q->path, "cannot read the outbox", err);
      xgr_store_wakes_free(a, *n);
      a = NULL;
      *n = 0;
    }
    *out = a;
    sqlite3_finalize(s);
  }
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

#define WAKE_COLS \
  "id, from_owner, from_root, to_owner, to_root, step, caller, rule, payload, created_at, refused, refused_at, from_iter, " \
  "from_step"

int xgr__sq_outbox(xgr_store *st, xgr_store_wake **out, size_t *n, xgr_error *err) {
  return read_wakes((sqstore *)st, "SELECT " WAKE_COLS " FROM outbox WHERE refused IS NULL ORDER BY created_at, id",
                    NULL, 0, out, n, err);
}

int xgr__sq_wakes_refused(xgr_store *st, const char *owner, uint64_t root, xgr_store_wake **out, size_t *n,
                            xgr_error *err) {
  return read_wakes((sqstore *)st,
                    "SELECT " WAKE_COLS " FROM outbox WHERE from_owner = :owner AND from_root = :root_pid AND"
                    " refused IS NOT NULL ORDER BY refused_at, id",
                    owner, root, out, n, err);
}

/* Rows of a per-session query into a growing array of `size`-byte records. */
static int read_rows(sqstore *q, const char *sql, const char *owner, uint64_t root, size_t size,
                     void (*row)(sqlite3_stmt *, void *), void **out, size_t *n, xgr_error *err) {
  sqlite3_stmt *s;
  *out = NULL;
  *n = 0;
  int rc = rd_prepare(q, sql, &s, err);
  if (rc) return rc;
  pstmt b = {.s = s};   /* used once: nothing to cache */
  bind_text(&b, ":owner", owner);
  bind_root(&b, ":root_pid", root);
  size_t cap = 16;
  char *a = xgr__xmalloc(cap * size);
  int r;
  while ((r = sqlite3_step(s)) == SQLITE_ROW) {
    if (*n == cap) a = xgr__xrealloc(a, (cap *= 2) * size);
    row(s, a + *n * size);
    (*n)++;
  }
  if (r != SQLITE_DONE) rc = xgr__sq_error(q->r, r, q->path, "cannot read", err);
  sqlite3_finalize(s);
  *out = a;
  return rc;
}

static void proc_row_cb(sqlite3_stmt *s, void *p) { read_proc_row(s, p); }
static void hist_row_cb(sqlite3_stmt *s, void *p) { read_hist_row(s, p); }

int xgr__sq_procs(xgr_store *st, const char *owner, uint64_t root, xgr_store_proc **out, size_t *n, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  pthread_mutex_lock(&q->rmu);
  void *a;
  int rc = read_rows(q, "SELECT " PROC_COLS " FROM proc_rt WHERE owner=:owner AND root_pid=:root_pid ORDER BY iter", owner, root,
                     sizeof(xgr_store_proc), proc_row_cb, &a, n, err);
  pthread_mutex_unlock(&q->rmu);
  *out = a;
  return rc;
}

int xgr__sq_history(xgr_store *st, const char *owner, uint64_t root, xgr_store_hist **out, size_t *n, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  pthread_mutex_lock(&q->rmu);
  void *a;
  int rc = read_rows(q, "SELECT " HIST_COLS " FROM proc_steps WHERE owner=:owner AND root_pid=:root_pid ORDER BY iter", owner,
                     root, sizeof(xgr_store_hist), hist_row_cb, &a, n, err);
  pthread_mutex_unlock(&q->rmu);
  *out = a;
  return rc;
}

static void audit_row_cb(sqlite3_stmt *s, void *p) {
  xgr_store_audit *a = p;
  a->session_at = sqlite3_column_int64(s, 0);
  a->kind = col_text(s, 1);
  a->actor = col_text(s, 2);
  a->node = col_text(s, 3);
  a->permit = col_text(s, 4);
  a->detail = col_text(s, 5);
  a->at = sqlite3_column_int64(s, 6);
}

int xgr__sq_audits(xgr_store *st, const char *owner, uint64_t root, xgr_store_audit **out, size_t *n, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  pthread_mutex_lock(&q->rmu);
  void *a;
  int rc = read_rows(q, "SELECT session_at, kind, actor, node, permit, detail, recorded_at FROM session_audit"
                     " WHERE owner=:owner AND root_pid=:root_pid ORDER BY session_at, rowid", owner, root,
                     sizeof(xgr_store_audit), audit_row_cb, &a, n, err);
  pthread_mutex_unlock(&q->rmu);
  *out = a;
  return rc;
}

/* The grants a filter selects (xgr_store_grants): each set field adds its condition. */
int xgr__sq_grants(xgr_store *st, const xgr_store_grant_filter *f, xgr_store_grant **out, size_t *n, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  char sql[768];
  snprintf(sql, sizeof sql,
           "SELECT id, owner, root_pid, grantee, rights, expires_at, rule, step, enc_dek, created_by, created_at"
           " FROM session_grants WHERE id > :after%s%s%s%s%s%s%s ORDER BY id LIMIT %zu",
           f->rule ? " AND lower(rule) = lower(:rule)" : "",
           f->owner ? " AND owner = :owner" : "", f->owner && f->root_pid ? " AND root_pid = :root_pid" : "",
           f->grantee ? " AND grantee = :grantee" : "", f->party ? " AND (grantee = :party OR owner = :party)" : "",
           f->expires_after ? " AND expires_at > :exp_after" : "", f->expires_until ? " AND expires_at <= :exp_until" : "",
           f->limit);
  *out = NULL;
  *n = 0;
  pthread_mutex_lock(&q->rmu);
  sqlite3_stmt *s;
  int rc = rd_prepare(q, sql, &s, err);
  if (rc) {
    pthread_mutex_unlock(&q->rmu);
    return rc;
  }
  pstmt b = {.s = s};   /* used once: nothing to cache */
  bind_i64(&b, ":after", f->after_id);
  if (f->owner) bind_text(&b, ":owner", f->owner);
  if (f->owner && f->root_pid) bind_root(&b, ":root_pid", f->root_pid);
  if (f->grantee) bind_text(&b, ":grantee", f->grantee);
  if (f->party) bind_text(&b, ":party", f->party);
  if (f->rule) bind_text(&b, ":rule", f->rule);
  if (f->expires_after) bind_i64(&b, ":exp_after", f->expires_after);
  if (f->expires_until) bind_i64(&b, ":exp_until", f->expires_until);
  size_t cap = 8;
  xgr_store_grant *a = xgr__xcalloc(cap, sizeof *a);
  int r;
  while ((r = sqlite3_step(s)) == SQLITE_ROW) {
    if (*n == cap) a = xgr__xrealloc(a, (cap *= 2) * sizeof *a);
    xgr_store_grant *g = &a[(*n)++];
    memset(g, 0, sizeof *g);
    g->id = sqlite3_column_int64(s, 0);
    g->owner = col_text(s, 1);
    g->root_pid = col_root(s, 2);
    g->grantee = col_text(s, 3);
    g->rights = (uint32_t)sqlite3_column_int64(s, 4);
    g->expires_at = sqlite3_column_int64(s, 5);
    g->rule = col_text(s, 6);
    g->step = col_text(s, 7);
    g->enc_dek = col_text(s, 8);
    g->created_by = col_text(s, 9);
    g->created_at = sqlite3_column_int64(s, 10);
  }
  if (r != SQLITE_DONE) rc = xgr__sq_error(q->r, r, q->path, "cannot read grants", err);
  sqlite3_finalize(s);
  pthread_mutex_unlock(&q->rmu);
  *out = a;
  return rc;
}

static void session_row_cb(sqlite3_stmt *s, void *p) { read_session_row(s, p); }

/* The owner's sessions, newest rootPid first: a range scan of the primary key (owner, root_pid). */
int xgr__sq_sessions(xgr_store *st, const char *owner, uint64_t before, size_t limit, xgr_store_session **out,
                       size_t *n, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  /* the limit is a number: part of the text; `:root_pid` is the bound; 2^64-1 is "no bound" (the
   * front's default), so that rootPid itself is listed too */
  char sql[384];
  bool all = before == UINT64_MAX;
  if (owner)
    snprintf(sql, sizeof sql, "SELECT " SESSION_COLS " FROM sessions WHERE owner=:owner AND root_pid %s :root_pid ORDER BY root_pid DESC LIMIT %zu",
             all ? "<=" : "<", limit);
  else   /* every owner's (:owner is NULL) */
    snprintf(sql, sizeof sql, "SELECT " SESSION_COLS " FROM sessions WHERE :owner IS NULL AND root_pid %s :root_pid"
             " ORDER BY root_pid DESC, owner LIMIT %zu", all ? "<=" : "<", limit);
  pthread_mutex_lock(&q->rmu);
  void *a;
  int rc = read_rows(q, sql, owner, before, sizeof(xgr_store_session), session_row_cb, &a, n, err);
  pthread_mutex_unlock(&q->rmu);
  *out = a;
  return rc;
}

/* The owners with live sessions: status = 0 rows grouped by owner, most first (one scan of the
 * live rows; the limit is a number, part of the text). */
int xgr__sq_live_owners(xgr_store *st, const char *owner, size_t max, xgr_store_owner_live **out, size_t *n,
                          xgr_error *err) {
  sqstore *q = (sqstore *)st;
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT owner, COUNT(*) AS live FROM sessions WHERE status = 0%s GROUP BY owner ORDER BY live DESC, owner"
           " LIMIT %zu", owner ? " AND owner=:owner" : "", max);
  pthread_mutex_lock(&q->rmu);
  sqlite3_stmt *s;
  int rc = rd_prepare(q, sql, &s, err);
  *out = xgr__xcalloc(max, sizeof **out);
  if (!rc) {
    pstmt b = {.s = s};   /* used once: nothing to cache */
    if (owner) bind_text(&b, ":owner", owner);
    int r = SQLITE_DONE;
    while (*n < max && (r = sqlite3_step(s)) == SQLITE_ROW) {
      (*out)[*n].owner = col_text(s, 0);
      (*out)[(*n)++].live = (uint64_t)sqlite3_column_int64(s, 1);
    }
    if (r != SQLITE_ROW && r != SQLITE_DONE) rc = xgr__sq_error(q->r, r, q->path, "cannot read sessions", err);
    sqlite3_finalize(s);
  }
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

/* The owners with session rows after `after`, ascending: one MIN() seek of the primary key
 * (owner, root_pid) per owner, so an owner with many sessions costs no more than one with one. */
int xgr__sq_owners_after(xgr_store *st, const char *after, size_t max, xgr_store_owner_live **out, size_t *n,
                         xgr_error *err) {
  sqstore *q = (sqstore *)st;
  pthread_mutex_lock(&q->rmu);
  sqlite3_stmt *s;
  int rc = rd_prepare(q, "SELECT MIN(owner) FROM sessions WHERE owner > ?1", &s, err);
  *out = xgr__xcalloc(max, sizeof **out);
  char *last = xgr__xstrdup(after);
  while (!rc && *n < max) {
    sqlite3_reset(s);
    sqlite3_bind_text(s, 1, last, -1, SQLITE_TRANSIENT);
    int r = sqlite3_step(s);
    if (r != SQLITE_ROW) {
      rc = xgr__sq_error(q->r, r, q->path, "cannot read sessions", err);
      break;
    }
    if (sqlite3_column_type(s, 0) == SQLITE_NULL) break;
    (*out)[*n].owner = col_text(s, 0);
    free(last);
    last = xgr__xstrdup((*out)[(*n)++].owner);
  }
  free(last);
  if (!rc || s) sqlite3_finalize(s);
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

int xgr__sq_load_some(xgr_store *st, const xgr_store_load_filter *f, int (*fn)(void *, const xgr_store_live *),
                        void *ctx, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  pthread_mutex_lock(&q->rmu);
  sqlite3_stmt *s = NULL;
  int rc = xgr__sq_exec(q->r, q->path, "BEGIN", err);   /* one consistent snapshot */
  const char *where = !f ? "status = 0 ORDER BY owner, root_pid"
                      : f->owner ? "status = 0 AND owner=:owner AND root_pid=:root_pid"
                      /* two index scans (awake; due by upto): lazy recovery reads no hibernated row */
                      : f->bounded ? "status = 0 AND wake_due IS NULL UNION ALL SELECT " SESSION_COLS " FROM sessions"
                                     " WHERE status = 0 AND wake_due IS NOT NULL AND wake_due <= :upto"
                                   : "status = 0 ORDER BY owner, root_pid";
  char sql[1024];
  snprintf(sql, sizeof sql, "SELECT " SESSION_COLS " FROM sessions WHERE %s", where);
  if (!rc) rc = rd_prepare(q, sql, &s, err);
  pstmt b = {.s = s};   /* used once: nothing to cache */
  if (!rc && f && f->owner) {
    bind_text(&b, ":owner", f->owner);
    bind_root(&b, ":root_pid", f->root_pid);
  } else if (!rc && f && f->bounded) {
    bind_i64(&b, ":upto", f->due_upto);
  }
  int r = SQLITE_DONE;
  while (!rc && (r = sqlite3_step(s)) == SQLITE_ROW) {
    xgr_store_session row;
    read_session_row(s, &row);
    void *procs = NULL;
    size_t np = 0;
    rc = read_rows(q, "SELECT " PROC_COLS " FROM proc_rt WHERE owner=:owner AND root_pid=:root_pid AND status < 2 ORDER BY iter",
                   row.owner, row.root_pid, sizeof(xgr_store_proc), proc_row_cb, &procs, &np, err);
    uint32_t *groups = xgr__xmalloc(16 * sizeof *groups);
    size_t ng = 0, capg = 16;
    sqlite3_stmt *g = NULL;
    if (!rc) rc = rd_prepare(q, "SELECT grp FROM proc_scopes WHERE owner=:owner AND root_pid=:root_pid ORDER BY grp", &g, err);
    if (!rc) {
      pstmt gb = {.s = g};   /* used once: nothing to cache */
      bind_text(&gb, ":owner", row.owner);
      bind_root(&gb, ":root_pid", row.root_pid);
      int gr;
      while ((gr = sqlite3_step(g)) == SQLITE_ROW) {
        if (ng == capg) groups = xgr__xrealloc(groups, (capg *= 2) * sizeof *groups);
        groups[ng++] = (uint32_t)sqlite3_column_int64(g, 0);
      }
      if (gr != SQLITE_DONE) rc = xgr__sq_error(q->r, gr, q->path, "cannot read proc_scopes", err);
      sqlite3_finalize(g);
    }
    if (!rc) {
      xgr_store_live l = {&row, procs, np, groups, ng};
      rc = fn(ctx, &l);
      if (rc) xgr_error_set(err, rc, NULL, "recovery stopped at session %s/%llu", row.owner, (unsigned long long)row.root_pid);
    }
    xgr_store_procs_free(procs, np);
    free(groups);
    xgr_store_session_clear(&row);
  }
  if (!rc && r != SQLITE_DONE) rc = xgr__sq_error(q->r, r, q->path, "cannot read sessions", err);
  sqlite3_finalize(s);
  sqlite3_exec(q->r, "COMMIT", NULL, NULL, NULL);
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

int xgr__sq_load_live(xgr_store *st, int (*fn)(void *, const xgr_store_live *), void *ctx, xgr_error *err) {
  return xgr__sq_load_some(st, NULL, fn, ctx, err);
}

/* The due index: a range scan of sessions_wake_due after the cursor (row values compare in
 * index order). */
int xgr__sq_due(xgr_store *st, const xgr_store_due_key *after, int64_t upto, xgr_store_due_key *out, size_t max,
                  size_t *n, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  char sql[384];
  snprintf(sql, sizeof sql, "SELECT wake_due, owner, root_pid FROM sessions INDEXED BY sessions_wake_due"
           " WHERE status = 0 AND wake_due IS NOT NULL AND (wake_due, owner, root_pid) > (:due, :owner, :root_pid)"
           " AND wake_due <= :upto ORDER BY wake_due, owner, root_pid LIMIT %zu", max);
  pthread_mutex_lock(&q->rmu);
  sqlite3_stmt *s;
  int rc = rd_prepare(q, sql, &s, err);
  if (!rc) {
    pstmt b = {.s = s};   /* used once: nothing to cache */
    bind_i64(&b, ":due", after ? after->due : INT64_MIN);
    bind_text(&b, ":owner", after ? after->owner : "");
    bind_root(&b, ":root_pid", after ? after->root_pid : 0);
    bind_i64(&b, ":upto", upto);
    int r = SQLITE_DONE;
    while (*n < max && (r = sqlite3_step(s)) == SQLITE_ROW) {
      xgr_store_due_key *k = &out[(*n)++];
      k->due = sqlite3_column_int64(s, 0);
      snprintf(k->owner, sizeof k->owner, "%s", (const char *)sqlite3_column_text(s, 1));
      k->root_pid = col_root(s, 2);
    }
    if (*n < max && r != SQLITE_DONE) rc = xgr__sq_error(q->r, r, q->path, "cannot read the due index", err);
    sqlite3_finalize(s);
  }
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

int xgr__sq_doc_get(xgr_store *st, xgr_registry_kind kind, const char *id, uint32_t version, const char *hash,
                      xgr_store_doc *out, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  const char *table = kind == XGR_REG_RULE ? "rules" : "orchestrations";
  char sql[256];
  if (hash)
    snprintf(sql, sizeof sql, "SELECT id, version, hash, owner, registered_at, content FROM %s WHERE hash = lower(:hash)"
             " ORDER BY version DESC LIMIT 1", table);
  else if (version)
    snprintf(sql, sizeof sql, "SELECT id, version, hash, owner, registered_at, content FROM %s WHERE id=:id AND version=:version",
             table);
  else
    snprintf(sql, sizeof sql, "SELECT id, version, hash, owner, registered_at, content FROM %s WHERE id=:id"
             " ORDER BY version DESC LIMIT 1", table);
  pthread_mutex_lock(&q->rmu);
  sqlite3_stmt *s;
  int rc = rd_prepare(q, sql, &s, err);
  if (!rc) {
    pstmt b = {.s = s};   /* used once: nothing to cache */
    bind_text(&b, hash ? ":hash" : ":id", hash ? hash : id);
    if (!hash && version) bind_i64(&b, ":version", version);
    int r = sqlite3_step(s);
    if (r == SQLITE_ROW) {
      memset(out, 0, sizeof *out);
      out->kind = kind;
      out->id = col_text(s, 0);
      out->version = (uint32_t)sqlite3_column_int64(s, 1);
      out->hash = col_text(s, 2);
      out->owner = col_text(s, 3);
      out->registered_at = sqlite3_column_int64(s, 4);
      out->len = (size_t)sqlite3_column_bytes(s, 5);
      out->content = xgr__xmalloc(out->len + 1);
      if (out->len) memcpy(out->content, sqlite3_column_blob(s, 5), out->len);
      out->content[out->len] = 0;
    } else if (r == SQLITE_DONE) {
      rc = xgr_error_set(err, XGR_ENOTFOUND, NULL, "no %s %s%s in the registry", kind ? "rule" : "orchestration",
                         hash ? "with hash " : "", hash ? hash : id);
    } else {
      rc = xgr__sq_error(q->r, r, q->path, "cannot read the registry", err);
    }
    sqlite3_finalize(s);
  }
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

void xgr__sq_read_close(sqstore *q) {
  for (size_t i = 0; i < sizeof q->rstmt / sizeof *q->rstmt; i++) sqlite3_finalize(q->rstmt[i]);
}
