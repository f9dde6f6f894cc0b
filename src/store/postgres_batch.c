/* postgres_batch.c — the PostgreSQL store's operations on many sessions (table batch_ops, schema
 * 16; xgr/store.h "operations on many sessions"): single statements in autocommit on a connection of
 * their own (opened at first use, under bmu), outside the writer's pipelined group commit. Times are
 * the database's clock (xgr_ms_now()), so the claims of cluster nodes compare on one clock. A claim
 * is a fenced lease on the row: the oldest running operation whose driver is none, this node, or
 * ran out of time is taken with FOR UPDATE SKIP LOCKED (two nodes never take the same row at once),
 * its epoch raised; a driver's progress is written only while the row names it at its epoch.
 */
#include <string.h>

#include "store/postgres_impl.h"

#define BOP_COLS                                                                                                  \
  "id, caller, action, spec, state, total, done, failed, skipped, cursor, error, driver, epoch, expires,"         \
  " created_at, started_at, finished_at, updated_at"

static void read_bop(const PGresult *r, int row, xgr_store_batchop *o) {
  o->id = get_text(r, row, 0);
  o->caller = get_text(r, row, 1);
  o->action = get_text(r, row, 2);
  o->spec = get_text(r, row, 3);
  o->state = get_text(r, row, 4);
  o->total = get_u64(r, row, 5);
  o->done = get_u64(r, row, 6);
  o->failed = get_u64(r, row, 7);
  o->skipped = get_u64(r, row, 8);
  o->cursor = get_text(r, row, 9);
  o->error = get_text(r, row, 10);
  o->driver = get_text(r, row, 11);
  o->epoch = get_i64(r, row, 12);
  o->expires = get_i64(r, row, 13);
  o->created_at = get_i64(r, row, 14);
  o->started_at = get_i64(r, row, 15);
  o->finished_at = get_i64(r, row, 16);
  o->updated_at = get_i64(r, row, 17);
}

/* Run sql with p on the batch connection (made, or made again once when it was lost); the result
 * (PGRES_TUPLES_OK or PGRES_COMMAND_OK; the caller clears it), or NULL with *err. Under bmu. */
static PGresult *bop_exec(pgstore *g, const char *sql, const params *p, xgr_error *err) {
  PGresult *r = NULL;
  for (int attempt = 0; attempt < 2; attempt++) {
    if (g->bc && PQstatus(g->bc) == CONNECTION_BAD) {
      PQfinish(g->bc);
      g->bc = NULL;
    }
    if (!g->bc && xgr__pg_connect_one(g, &g->bc, "batch", err)) {
      if (g->bc) PQfinish(g->bc);
      g->bc = NULL;
      return NULL;
    }
    r = PQexecParams(g->bc, sql, p->n, NULL, p->v, p->len, p->fmt, 0);
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) return r;
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if ((state && strncmp(state, "08", 2) && strncmp(state, "57P", 3)) || attempt) break;
    PQclear(r);
    r = NULL;
    PQfinish(g->bc);
    g->bc = NULL;
  }
  xgr__pg_res_error(g, r, g->bc, "batch_ops", err);
  PQclear(r);
  return NULL;
}

int xgr__pg_bop_create(xgr_store *st, const xgr_store_batchop *op, uint32_t max_running, uint32_t max_kept,
                       xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_text(&p, op->id);
  p_text(&p, op->caller);
  p_text(&p, op->action);
  p_text(&p, op->spec);
  p_u64(&p, op->total);
  p_u64(&p, max_running);
  pthread_mutex_lock(&g->bmu);
  /* the count and the insert in one statement (under READ COMMITTED another node's insert of the
   * same instant is not seen: each may pass once, xgr/store.h) */
  PGresult *r = bop_exec(g,
                         "INSERT INTO batch_ops(id, caller, action, spec, state, total, created_at, updated_at)"
                         " SELECT $1, $2, $3, $4, 'running', $5::bigint, xgr_ms_now(), xgr_ms_now()"
                         " WHERE $6::bigint = 0 OR (SELECT count(*) FROM batch_ops WHERE caller = $2"
                         "   AND state = 'running') < $6::bigint",
                         &p, err);
  int rc = 0;
  if (!r) {
    rc = err->code == XGR_ECONFLICT ? xgr_error_set(err, XGR_ECONFLICT, NULL, "batch operation %s exists", op->id)
                                    : err->code ? err->code : XGR_EIO;
  } else if (strcmp(PQcmdTuples(r), "1")) {
    rc = xgr_error_set(err, XGR_ELIMIT, NULL, "%s has %u batch operations running, the most at once; cancel one or "
                       "wait until one ends", op->caller, (unsigned)max_running);
  } else if (max_kept) {   /* the caller's finished ones past its newest max_kept (a failure: the next create) */
    params k = {0};
    p_text(&k, op->caller);
    p_u64(&k, max_kept);
    PGresult *d = bop_exec(g,
                           "DELETE FROM batch_ops WHERE id = ANY(ARRAY(SELECT id FROM batch_ops WHERE caller = $1"
                           " AND state <> 'running' ORDER BY created_at DESC, id DESC OFFSET $2::bigint))",
                           &k, &(xgr_error){0});
    PQclear(d);
  }
  PQclear(r);
  pthread_mutex_unlock(&g->bmu);
  return rc;
}

int xgr__pg_bop_claim(xgr_store *st, const char *node, int64_t lease_ms, bool force, xgr_store_batchop *out,
                      bool *found, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_text(&p, node);
  p_i64(&p, lease_ms);
  p_text(&p, force ? "true" : "false");
  pthread_mutex_lock(&g->bmu);
  PGresult *r = bop_exec(g,
                         "UPDATE batch_ops b SET driver = $1, epoch = b.epoch + 1, expires = xgr_ms_now() + $2::bigint,"
                         " started_at = CASE WHEN b.started_at = 0 THEN xgr_ms_now() ELSE b.started_at END,"
                         " updated_at = xgr_ms_now()"
                         " WHERE b.id = (SELECT id FROM batch_ops WHERE state = 'running'"
                         "   AND ($3::boolean OR driver = '' OR driver = $1 OR expires < xgr_ms_now())"
                         "   ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
                         " RETURNING " BOP_COLS,
                         &p, err);
  pthread_mutex_unlock(&g->bmu);
  if (!r) return err->code ? err->code : XGR_EIO;
  if (PQntuples(r) == 1) {
    read_bop(r, 0, out);
    *found = true;
  }
  PQclear(r);
  return 0;
}

int xgr__pg_bop_progress(xgr_store *st, const xgr_store_batchop *op, int64_t lease_ms, char *state, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_u64(&p, op->total);
  p_u64(&p, op->done);
  p_u64(&p, op->failed);
  p_u64(&p, op->skipped);
  p_text(&p, op->cursor ? op->cursor : "");
  p_i64(&p, lease_ms);
  p_text(&p, op->state);
  p_text(&p, op->error);   /* NULL: SQL NULL */
  p_text(&p, op->id);
  p_text(&p, op->driver);
  p_i64(&p, op->epoch);
  pthread_mutex_lock(&g->bmu);
  PGresult *r = bop_exec(g,
                         "UPDATE batch_ops SET total = $1::bigint, done = $2::bigint, failed = $3::bigint,"
                         " skipped = $4::bigint, cursor = $5, expires = xgr_ms_now() + $6::bigint, updated_at = xgr_ms_now(),"
                         " error = CASE WHEN state = 'running' AND $7 <> 'running' THEN $8 ELSE error END,"
                         " finished_at = CASE WHEN state = 'running' AND $7 <> 'running' THEN xgr_ms_now() ELSE finished_at END,"
                         " state = CASE WHEN state = 'running' THEN $7 ELSE state END"
                         " WHERE id = $9 AND driver = $10 AND epoch = $11::bigint RETURNING state",
                         &p, err);
  pthread_mutex_unlock(&g->bmu);
  if (!r) return err->code ? err->code : XGR_EIO;
  if (PQntuples(r) == 1) snprintf(state, 16, "%s", PQgetvalue(r, 0, 0));
  PQclear(r);
  return 0;
}

int xgr__pg_bop_cancel(xgr_store *st, const char *id, bool *changed, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_text(&p, id);
  pthread_mutex_lock(&g->bmu);
  /* the old state is read in the same statement: the row as it was before (a self-join on id) */
  PGresult *r = bop_exec(g,
                         "UPDATE batch_ops b SET state = CASE WHEN o.state = 'running' THEN 'cancelled' ELSE o.state END,"
                         " finished_at = CASE WHEN o.state = 'running' THEN xgr_ms_now() ELSE o.finished_at END,"
                         " updated_at = CASE WHEN o.state = 'running' THEN xgr_ms_now() ELSE o.updated_at END"
                         " FROM (SELECT id, state, finished_at, updated_at FROM batch_ops WHERE id = $1 FOR UPDATE) o"
                         " WHERE b.id = o.id RETURNING o.state = 'running'",
                         &p, err);
  pthread_mutex_unlock(&g->bmu);
  if (!r) return err->code ? err->code : XGR_EIO;
  int rc = 0;
  if (PQntuples(r) == 1) *changed = PQgetvalue(r, 0, 0)[0] == 't';
  else rc = xgr_error_set(err, XGR_ENOTFOUND, NULL, "no batch operation %s", id);
  PQclear(r);
  return rc;
}

int xgr__pg_bop_read(xgr_store *st, const char *id, const char *caller, size_t limit, xgr_store_batchop **out,
                     size_t *n, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  if (id) p_text(&p, id);
  else {
    if (caller) p_text(&p, caller);
    p_u64(&p, limit);
  }
  pthread_mutex_lock(&g->bmu);
  PGresult *r = bop_exec(g,
                         id ? "SELECT " BOP_COLS " FROM batch_ops WHERE id = $1"
                         : caller ? "SELECT " BOP_COLS " FROM batch_ops WHERE caller = $1 ORDER BY created_at DESC, id DESC LIMIT $2::bigint"
                                  : "SELECT " BOP_COLS " FROM batch_ops ORDER BY created_at DESC, id DESC LIMIT $1::bigint",
                         &p, err);
  pthread_mutex_unlock(&g->bmu);
  if (!r) return err->code ? err->code : XGR_EIO;
  size_t k = (size_t)PQntuples(r);
  *out = xgr__xcalloc(k ? k : 1, sizeof **out);
  for (size_t i = 0; i < k; i++) read_bop(r, (int)i, &(*out)[i]);
  *n = k;
  PQclear(r);
  return 0;
}
