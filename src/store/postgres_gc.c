/* postgres_gc.c — the PostgreSQL store's retention, run by the writer thread between commits
 * (writer.c calls it when no batch waits): small delete steps, each at most gc_batch rows of a kind
 * in one transaction — terminal and stale process rows found by a sweep over proc_rt's key, packs
 * without a live member by a sweep over proc_born's, history rows, ended sessions and refusal
 * records past history_secs, batch operations finished more than batch_secs ago, and killed scopes
 * nothing refers to. Part of the PostgreSQL backend
 * (postgres.c has the overview). */
#include <stdio.h>
#include <stdlib.h>

#include "store/postgres_impl.h"

/* ---- retention (writer thread, outside pipeline mode) ------------------------------------------- */

/* The rows of proc_rt one retention step looks at, per gc_batch rows it may delete. */
#define SWEEP_PER_BATCH 8

/* The next stretch of sweep sw starts at its table's first key. */
void xgr__pg_sweep_restart(sweep *sw) {
  free(sw->owner);
  sw->owner = NULL;
}

/* One stretch of sweep sw inside gc_step's transaction: statement stmt (S_GC_PROCS, S_GC_BORN)
 * looks at the next `span` keys after sw's and deletes what is due among them; the sweep then
 * goes on after the last of them, or (*wrapped) starts at the first key again.
 * - S_GC_PROCS: terminal rows of proc_rt ended at or before cut, and stale ones. A process row
 *   that ends is updated in place (no indexed column changes, migration 11), so no index finds
 *   terminal rows: a terminal row is deleted within ttl_secs plus one sweep of the table (rows /
 *   span steps of gc_interval_ms when nothing else is due).
 * - S_GC_BORN: packs of proc_born without a live member (cut unused).
 * Returns the rows deleted or -1 (err). */
static long gc_sweep(pgstore *g, sweep *sw, int stmt, int64_t span, int64_t cut, bool *wrapped, xgr_error *err) {
  params p = {0};
  p_text(&p, sw->owner ? sw->owner : "");
  p_text(&p, sw->owner ? sw->root : "-1");
  p_text(&p, sw->owner ? sw->iter : "-1");
  p_i64(&p, span);
  if (stmt == S_GC_PROCS) p_i64(&p, cut);
  PGresult *r = xgr__pg_exec_prepared(g->w, stmt, &p);
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
    xgr__pg_res_error(g, r, g->w, "retention: delete failed", err);
    PQclear(r);
    return -1;
  }
  long deleted = strtol(PQgetvalue(r, 0, 0), NULL, 10);
  long seen = strtol(PQgetvalue(r, 0, 4), NULL, 10);
  *wrapped = seen < span || PQgetisnull(r, 0, 1);
  xgr__pg_sweep_restart(sw);
  if (!*wrapped) {
    sw->owner = xgr__xstrdup(PQgetvalue(r, 0, 1));
    snprintf(sw->root, sizeof sw->root, "%s", PQgetvalue(r, 0, 2));
    snprintf(sw->iter, sizeof sw->iter, "%s", PQgetvalue(r, 0, 3));
  }
  PQclear(r);
  return deleted;
}

/* One retention step: at most gc_batch rows of each kind in one transaction (terminal process
 * rows and packs: one stretch of each sweep, gc_sweep). Returns the rows deleted, or < 0 after an
 * error (in *err). *more: some kind hit the limit, or (full) a sweep has not yet gone over its
 * whole table since the full pass began. */
static long gc_step(pgstore *g, bool full, bool *more, xgr_error *err) {
  const xgr_store_config *c = &g->base.cfg;
  int64_t now = xgr__store_now_ms(&g->base);
  int lim = c->gc_batch;
  long total = 0;
  *more = false;
  if (xgr__pg_exec_plain(g, g->w, "BEGIN", err)) goto fail;
  /* the packs first: a history row whose process a pack holds waits for it (S_GC_HIST) */
  struct { sweep *sw; int stmt; int64_t span; } sweeps[] = {
      {&g->sw_born, S_GC_BORN, lim}, {&g->sw_procs, S_GC_PROCS, (int64_t)lim * SWEEP_PER_BATCH}};
  for (size_t k = 0; k < sizeof sweeps / sizeof sweeps[0]; k++) {
    sweep *sw = sweeps[k].sw;
    if (full && !sw->full) {   /* a full pass sweeps from the first key */
      xgr__pg_sweep_restart(sw);
      sw->full = true;
    }
    bool wrapped = false;
    long ch = gc_sweep(g, sw, sweeps[k].stmt, sweeps[k].span, now - c->ttl_secs * 1000, &wrapped, err);
    if (ch < 0) {
      xgr__pg_exec_plain(g, g->w, "ROLLBACK", &(xgr_error){0});
      goto fail;
    }
    total += ch;
    if (ch >= lim || (full && !wrapped)) *more = true;
    if (wrapped) sw->full = false;
  }
  struct { int stmt; bool on; int64_t cut; } jobs[] = {
      {S_GC_HIST, c->history_secs > 0, now - c->history_secs * 1000},
      {S_GC_SESS, c->history_secs > 0, now - c->history_secs * 1000},
      {S_GC_REFUSED, c->history_secs > 0, now - c->history_secs * 1000},   /* refusal records are history */
      {S_GC_AUDIT, c->history_secs > 0, now - c->history_secs * 1000},     /* so is the audit trail */
      {S_GC_SCOPES, true, 0},
      {S_GC_GRANTS, c->history_secs > 0, 0},   /* grants go with their session's row */
      /* finished batch operations: an age (their times are the database's clock, S_GC_BOPS) */
      {S_GC_BOPS, c->batch_secs > 0, c->batch_secs * 1000},
  };
  for (size_t j = 0; j < sizeof jobs / sizeof jobs[0]; j++) {
    if (!jobs[j].on) continue;
    params p = {0};
    if (jobs[j].stmt != S_GC_SCOPES && jobs[j].stmt != S_GC_GRANTS) p_i64(&p, jobs[j].cut);
    p_i64(&p, lim);
    PGresult *r = xgr__pg_exec_prepared(g->w, jobs[j].stmt, &p);
    bool counted = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;   /* S_GC_HIST counts in a row */
    if (PQresultStatus(r) != PGRES_COMMAND_OK && !counted) {
      xgr__pg_res_error(g, r, g->w, "retention: delete failed", err);
      PQclear(r);
      xgr__pg_exec_plain(g, g->w, "ROLLBACK", &(xgr_error){0});
      goto fail;
    }
    long ch = strtol(counted ? PQgetvalue(r, 0, 0) : PQcmdTuples(r), NULL, 10);
    PQclear(r);
    total += ch;
    if (ch >= lim) *more = true;
  }
  if (xgr__pg_exec_plain(g, g->w, "COMMIT", err)) goto fail;
  pthread_mutex_lock(&g->base.mu);
  g->base.stats.gc_deleted += (uint64_t)total;
  pthread_mutex_unlock(&g->base.mu);
  return total;
fail:
  g->sw_procs.full = g->sw_born.full = false;   /* the next full pass starts from the first keys again */
  return -1;
}

/* The writer's retention step (store_impl.h). */
long xgr__pg_gc(void *ctx, bool full, bool *more, xgr_error *err) { return gc_step(ctx, full, more, err); }
