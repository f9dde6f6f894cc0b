/* sqlite_batch.c — the SQLite store's operations on many sessions (table batch_ops, schema 16;
 * xgr/store.h "operations on many sessions"): small single-row statements on a connection of their
 * own (opened read-write at first use, under bmu), outside the writer thread's group commit. The
 * driver writes its progress about once a second and the RPC methods read a row each, so this
 * connection's writes wait for the writer's transaction (busy timeout) without slowing it down.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "store/sqlite_impl.h"

#define BOP_COLS                                                                                                  \
  "id, caller, action, spec, state, total, done, failed, skipped, cursor, error, driver, epoch, expires,"         \
  " created_at, started_at, finished_at, updated_at"

static void read_bop(sqlite3_stmt *s, xgr_store_batchop *o) {
  o->id = col_text(s, 0);
  o->caller = col_text(s, 1);
  o->action = col_text(s, 2);
  o->spec = col_text(s, 3);
  o->state = col_text(s, 4);
  o->total = (uint64_t)sqlite3_column_int64(s, 5);
  o->done = (uint64_t)sqlite3_column_int64(s, 6);
  o->failed = (uint64_t)sqlite3_column_int64(s, 7);
  o->skipped = (uint64_t)sqlite3_column_int64(s, 8);
  o->cursor = col_text(s, 9);
  o->error = col_text(s, 10);
  o->driver = col_text(s, 11);
  o->epoch = sqlite3_column_int64(s, 12);
  o->expires = sqlite3_column_int64(s, 13);
  o->created_at = sqlite3_column_int64(s, 14);
  o->started_at = sqlite3_column_int64(s, 15);
  o->finished_at = sqlite3_column_int64(s, 16);
  o->updated_at = sqlite3_column_int64(s, 17);
}

/* Lock bmu and prepare sql on the batch connection (opened at first use); the caller finalizes the
 * statement and unlocks. 0, or XGR_EIO (unlocked, nothing to finalize). */
static int bop_prepare(sqstore *q, const char *sql, sqlite3_stmt **s, xgr_error *err) {
  pthread_mutex_lock(&q->bmu);
  if (!q->b) {
    int rc = sqlite3_open_v2(q->path, &q->b, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc) {
      xgr__sq_error(q->b, rc, q->path, "cannot open for batch operations", err);
      sqlite3_close(q->b);
      q->b = NULL;
      pthread_mutex_unlock(&q->bmu);
      return XGR_EIO;
    }
    sqlite3_extended_result_codes(q->b, 1);
    sqlite3_busy_timeout(q->b, q->base.cfg.busy_timeout_ms ? q->base.cfg.busy_timeout_ms : 5000);
  }
  int rc = sqlite3_prepare_v2(q->b, sql, -1, s, NULL);
  if (rc) {
    xgr__sq_error(q->b, rc, q->path, "cannot prepare a batch operation statement", err);
    pthread_mutex_unlock(&q->bmu);
    return XGR_EIO;
  }
  return 0;
}

static void bop_done(sqstore *q, sqlite3_stmt *s) {
  sqlite3_finalize(s);
  pthread_mutex_unlock(&q->bmu);
}

/* The caller's finished operations past its newest keep are deleted (the batch connection, under
 * bmu: a statement of its own after the insert; a failure leaves them for the next create). */
static void prune(sqstore *q, const char *caller, uint32_t keep) {
  sqlite3_stmt *s;
  if (sqlite3_prepare_v2(q->b,
                         "DELETE FROM batch_ops WHERE id IN (SELECT id FROM batch_ops WHERE caller = :caller"
                         " AND state <> 'running' ORDER BY created_at DESC, id DESC LIMIT -1 OFFSET :keep)",
                         -1, &s, NULL))
    return;
  pstmt b = {.s = s};
  bind_text(&b, ":caller", caller);
  bind_i64(&b, ":keep", keep);
  sqlite3_step(s);
  sqlite3_finalize(s);
}

int xgr__sq_bop_create(xgr_store *st, const xgr_store_batchop *op, uint32_t max_running, uint32_t max_kept,
                       xgr_error *err) {
  sqstore *q = (sqstore *)st;
  sqlite3_stmt *s;
  /* the count and the insert are one statement: SQLite has one writer at a time */
  int rc = bop_prepare(q,
                       "INSERT INTO batch_ops(id, caller, action, spec, state, total, created_at, updated_at)"
                       " SELECT :id, :caller, :action, :spec, 'running', :total, :now, :now"
                       " WHERE :max = 0 OR (SELECT count(*) FROM batch_ops WHERE caller = :caller"
                       "   AND state = 'running') < :max",
                       &s, err);
  if (rc) return rc;
  pstmt b = {.s = s};
  bind_text(&b, ":id", op->id);
  bind_text(&b, ":caller", op->caller);
  bind_text(&b, ":action", op->action);
  bind_text(&b, ":spec", op->spec);
  bind_i64(&b, ":total", (int64_t)op->total);
  bind_i64(&b, ":now", xgr__store_now_ms(st));
  bind_i64(&b, ":max", max_running);
  int r = sqlite3_step(s);
  if (r != SQLITE_DONE) {
    rc = (r & 0xff) == SQLITE_CONSTRAINT ? xgr_error_set(err, XGR_ECONFLICT, NULL, "batch operation %s exists", op->id)
                                         : xgr__sq_error(q->b, r, q->path, "cannot write batch_ops", err);
  } else if (!sqlite3_changes(q->b)) {
    rc = xgr_error_set(err, XGR_ELIMIT, NULL, "%s has %u batch operations running, the most at once; cancel one or "
                       "wait until one ends", op->caller, (unsigned)max_running);
  } else if (max_kept) {
    prune(q, op->caller, max_kept);
  }
  bop_done(q, s);
  return rc;
}

int xgr__sq_bop_claim(xgr_store *st, const char *node, int64_t lease_ms, bool force, xgr_store_batchop *out,
                      bool *found, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  sqlite3_stmt *s;
  int rc = bop_prepare(q,
                       "UPDATE batch_ops SET driver = :node, epoch = epoch + 1, expires = :now + :ms,"
                       " started_at = CASE WHEN started_at = 0 THEN :now ELSE started_at END, updated_at = :now"
                       " WHERE id = (SELECT id FROM batch_ops WHERE state = 'running'"
                       "   AND (:force OR driver = '' OR driver = :node OR expires < :now) ORDER BY created_at, id LIMIT 1)"
                       " RETURNING " BOP_COLS,
                       &s, err);
  if (rc) return rc;
  pstmt b = {.s = s};
  bind_text(&b, ":node", node);
  bind_i64(&b, ":now", xgr__store_now_ms(st));
  bind_i64(&b, ":ms", lease_ms);
  bind_int(&b, ":force", force);
  int r = sqlite3_step(s);
  if (r == SQLITE_ROW) {
    read_bop(s, out);
    *found = true;
    r = sqlite3_step(s);
  }
  if (r != SQLITE_DONE) rc = xgr__sq_error(q->b, r, q->path, "cannot claim a batch operation", err);
  bop_done(q, s);
  return rc;
}

int xgr__sq_bop_progress(xgr_store *st, const xgr_store_batchop *op, int64_t lease_ms, char *state, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  sqlite3_stmt *s;
  int rc = bop_prepare(q,
                       "UPDATE batch_ops SET total = :total, done = :done, failed = :failed, skipped = :skipped,"
                       " cursor = :cursor, expires = :now + :ms, updated_at = :now,"
                       " error = CASE WHEN state = 'running' AND :state <> 'running' THEN :error ELSE error END,"
                       " finished_at = CASE WHEN state = 'running' AND :state <> 'running' THEN :now ELSE finished_at END,"
                       " state = CASE WHEN state = 'running' THEN :state ELSE state END"
                       " WHERE id = :id AND driver = :driver AND epoch = :epoch RETURNING state",
                       &s, err);
  if (rc) return rc;
  pstmt b = {.s = s};
  bind_i64(&b, ":total", (int64_t)op->total);
  bind_i64(&b, ":done", (int64_t)op->done);
  bind_i64(&b, ":failed", (int64_t)op->failed);
  bind_i64(&b, ":skipped", (int64_t)op->skipped);
  bind_text(&b, ":cursor", op->cursor ? op->cursor : "");
  bind_i64(&b, ":now", xgr__store_now_ms(st));
  bind_i64(&b, ":ms", lease_ms);
  bind_text(&b, ":state", op->state);
  if (op->error) bind_text(&b, ":error", op->error);
  else bind_null(&b, ":error");
  bind_text(&b, ":id", op->id);
  bind_text(&b, ":driver", op->driver);
  bind_i64(&b, ":epoch", op->epoch);
  int r = sqlite3_step(s);
  if (r == SQLITE_ROW) {
    const unsigned char *t = sqlite3_column_text(s, 0);
    snprintf(state, 16, "%s", t ? (const char *)t : "");
    r = sqlite3_step(s);
  }
  if (r != SQLITE_DONE) rc = xgr__sq_error(q->b, r, q->path, "cannot write batch_ops", err);
  bop_done(q, s);
  return rc;
}

int xgr__sq_bop_cancel(xgr_store *st, const char *id, bool *changed, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  sqlite3_stmt *s;
  /* running -> cancelled; a row in another state is left as it is (then: does it exist at all?) */
  int rc = bop_prepare(q,
                       "UPDATE batch_ops SET state = CASE WHEN state = 'running' THEN 'cancelled' ELSE state END,"
                       " finished_at = CASE WHEN state = 'running' THEN :now ELSE finished_at END,"
                       " updated_at = CASE WHEN state = 'running' THEN :now ELSE updated_at END"
                       " WHERE id = :id",
                       &s, err);
  if (rc) return rc;
  pstmt b = {.s = s};
  bind_i64(&b, ":now", xgr__store_now_ms(st));
  bind_text(&b, ":id", id);
  /* the old state: read in the same transaction as the update (the connection is ours, under bmu) */
  sqlite3_stmt *old = NULL;
  char was[16] = "";
  int r = sqlite3_exec(q->b, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (r == SQLITE_OK) r = sqlite3_prepare_v2(q->b, "SELECT state FROM batch_ops WHERE id = ?1", -1, &old, NULL);
  if (r == SQLITE_OK) {
    sqlite3_bind_text(old, 1, id, -1, SQLITE_STATIC);
    r = sqlite3_step(old);
    if (r == SQLITE_ROW) snprintf(was, sizeof was, "%s", (const char *)sqlite3_column_text(old, 0));
    r = r == SQLITE_ROW || r == SQLITE_DONE ? SQLITE_OK : r;
  }
  sqlite3_finalize(old);
  if (r == SQLITE_OK && was[0]) {
    r = sqlite3_step(s);
    r = r == SQLITE_ROW || r == SQLITE_DONE ? SQLITE_OK : r;
  }
  if (r == SQLITE_OK) r = sqlite3_exec(q->b, "COMMIT", NULL, NULL, NULL);
  if (r != SQLITE_OK) {
    rc = xgr__sq_error(q->b, r, q->path, "cannot write batch_ops", err);
    sqlite3_exec(q->b, "ROLLBACK", NULL, NULL, NULL);
  } else if (!was[0]) {
    rc = xgr_error_set(err, XGR_ENOTFOUND, NULL, "no batch operation %s", id);
  } else {
    *changed = !strcmp(was, "running");
  }
  bop_done(q, s);
  return rc;
}

int xgr__sq_bop_read(xgr_store *st, const char *id, const char *caller, size_t limit, xgr_store_batchop **out,
                     size_t *n, xgr_error *err) {
  sqstore *q = (sqstore *)st;
  sqlite3_stmt *s;
  int rc = bop_prepare(q,
                       id ? "SELECT " BOP_COLS " FROM batch_ops WHERE id = :id"
                       : caller ? "SELECT " BOP_COLS " FROM batch_ops WHERE caller = :caller ORDER BY created_at DESC, id DESC LIMIT :limit"
                                : "SELECT " BOP_COLS " FROM batch_ops ORDER BY created_at DESC, id DESC LIMIT :limit",
                       &s, err);
  if (rc) return rc;
  pstmt b = {.s = s};
  if (id) bind_text(&b, ":id", id);
  else {
    if (caller) bind_text(&b, ":caller", caller);
    bind_i64(&b, ":limit", (int64_t)limit);
  }
  *out = xgr__xcalloc(limit ? limit : 1, sizeof **out);
  int r;
  while ((r = sqlite3_step(s)) == SQLITE_ROW && *n < (limit ? limit : 1)) read_bop(s, &(*out)[(*n)++]);
  if (r != SQLITE_DONE && r != SQLITE_ROW) rc = xgr__sq_error(q->b, r, q->path, "cannot read batch_ops", err);
  bop_done(q, s);
  return rc;
}
