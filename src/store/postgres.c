/* postgres.c — the PostgreSQL store (libpq): the same interface, schema and migrations as the
 * SQLite store (sqlite.c), for several xgrd nodes on one database (issue 18). docs/STORE.md has
 * the long version; in short:
 *
 *   url          a libpq URI, `postgresql://user@host:port/db?...` or `postgres://...`; a unix
 *                socket directory goes in `?host=/dir`. Messages name it with the password masked.
 *   connections  `w` belongs to the writer thread (every write, retention); `r` serves reads
 *                under a recursive mutex (a load_live callback may read again); the lanes are
 *                further writer connections, one thread each, that commit parts of large groups.
 *   group commit the writer takes every queued batch and sends BEGIN and the statements of all of
 *                them in ONE pipeline (libpq pipeline mode: no round trip per statement), reads
 *                the results, then COMMITs and signals each batch. synchronous_commit is on
 *                (XGR_STORE_SYNC_FULL, the default: COMMIT returns once the WAL is flushed);
 *                XGR_STORE_SYNC_NORMAL sets it off (a crash may lose the last commits, never
 *                half of one). A batch's own fault (SQLSTATE class 23, a constraint such as a
 *                history row twice or a session that exists; class 22, bad data) rolls the group
 *                back and its batches are applied again one transaction each, so only the bad
 *                one fails; a connection lost before the COMMIT was sent is made again and the
 *                group tried once more; a COMMIT whose answer was lost is settled by asking the
 *                server (postgres_write.c, settle_commit); any other error (disk full, ...)
 *                fails the group and puts the store in the failed state.
 *   bulk path    a group of session rows, states, process and history rows and scopes goes in a
 *                dozen statements: unnest arrays in the pipeline, then (COPY cannot be pipelined)
 *                the process rows by binary COPY — new ones (iter at least the session's stored
 *                next_iter, read first in the pipeline) straight into proc_rt, the others into the
 *                temporary xgr_stage_procs and one upsert from it — and the history rows by binary
 *                COPY into proc_steps (xgr__pg_send_bulk, xgr__pg_copy_rows). Should a "new" row exist, the group
 *                is redone with every process row through the upsert (commit_group). A process
 *                that a step's result of the group ended has its record written into that
 *                result's history row instead (migration 12, keeps_record), and the live
 *                processes a group makes for one session share one row of proc_born (a pack,
 *                cp_pack): most steps write one row, their history row. A stale proc_rt row or
 *                a superseded member is passed over by every read (ENDED_IN_HIST, BORN_LIVE).
 *   split        a bulk group of at least SPLIT_MIN_BATCHES batches is divided by session key
 *                over `w` and the lanes, each part in its own transaction at the same time; the
 *                owners' counters are raised first, on their own (commit_split).
 *   uint64       rootPids, iters and the owners' counters are NUMERIC(20,0) in the domain
 *                xgr_u64, sent as decimal text or binary NUMERIC and read as decimal text: exact
 *                over the whole range and ordered like the numbers (listing pages by rootPid).
 *                The range 0 .. 2^64-1 is the writer's (every value is a uint64_t), with a CHECK
 *                on the one value SQL computes, owners.next_root (migration 11).
 *   migrations   the same versions as SQLite, in PostgreSQL's dialect; applied under an advisory
 *                lock so nodes that start together migrate once. Owner and mark keys are
 *                COLLATE "C" (byte order, as SQLite compares them, and no locale cost in the keys).
 *   retention    as in SQLite: small delete steps between commits when no batch waits; terminal
 *                process rows are found by a sweep over proc_rt's key (gc_procs), since no index
 *                holds terminal_at: updates of process and session rows change no indexed
 *                column and have room on their page (fillfactor, migration 11), so PostgreSQL
 *                makes them in place (HOT) without index writes. The sweep also deletes stale
 *                rows, a second sweep packs without a live member (gc_sweep); deleting history
 *                rows by age deletes the stale rows of their records.
 *   files        one concern a file, as SQLite's own source is (postgres_impl.h lists them): this
 *                one opens and closes the store and holds its interface (the vtable); the schema,
 *                committing groups, the bulk path, retention, reads and the cluster part each
 *                have their own.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres_impl.h"
#include "xgr/rule.h"   /* xgr_rule_mask_url */

/* ---- the handle ------------------------------------------------------------------------------- */

/* Empty every buffer of cb, freeing those whose capacity is above keep (0: all of them). */
void xgr__pg_copybufs_empty(copybufs *cb, size_t keep) {
  xgr_buf *all[] = {&cb->copy, &cb->fresh, &cb->staged, &cb->born};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    all[i]->len = 0;
    if (all[i]->cap > keep) {
      free(all[i]->p);
      *all[i] = (xgr_buf){0};
    }
  }
}

/* ---- errors --------------------------------------------------------------------------------- */

static int state_code(const char *state) {
  if (state && !strncmp(state, "XL", 2)) return XGR_ELEASE;   /* xgr_lease_fence: the lease is elsewhere */
  if (state && !strncmp(state, "23", 2)) return XGR_ECONFLICT;
  if (state && !strncmp(state, "22", 2)) return XGR_EINVAL;
  return XGR_EIO;
}

int xgr__pg_res_error(const pgstore *g, const PGresult *res, PGconn *c, const char *what, xgr_error *err) {
  const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  char msg[300];
  xgr__pg_first_line(res && *PQresultErrorMessage(res) ? PQresultErrorMessage(res) : PQerrorMessage(c), msg, sizeof msg);
  const char *hint = state && !strcmp(state, "53100") ? " (the database's disk is full)"
                     : state && !strncmp(state, "08", 2) ? " (the connection to PostgreSQL was lost)"
                     : state && !strcmp(state, "25006") ? " (the database is read-only)" : "";
  if (!state) hint = " (the connection to PostgreSQL failed)";
  return xgr_error_set(err, state_code(state), NULL, "store %s: %s: %s%s%s%s%s", g->name, what, msg,
                       state ? " [SQLSTATE " : "", state ? state : "", state ? "]" : "", hint);
}

/* ---- statements outside pipeline mode ---------------------------------------------------------- */

PGresult *xgr__pg_exec_prepared(PGconn *c, int which, const params *p) {
  char name[8];
  snprintf(name, sizeof name, "x%d", which);
  return PQexecPrepared(c, name, p->n, p->v, p->len, p->fmt, 0);
}

int xgr__pg_exec_plain(pgstore *g, PGconn *c, const char *sql, xgr_error *err) {
  PGresult *r = PQexec(c, sql);
  int rc = 0;
  if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) rc = xgr__pg_res_error(g, r, c, "", err);
  PQclear(r);
  return rc;
}

/* ---- the writer, close and the interface ------------------------------------------------------ */

static void pg_submit(xgr_store *st, xgr_store_changes *b) { xgr__writer_submit(&((pgstore *)st)->wr, b); }

static void pg_flush(xgr_store *st) { xgr__writer_flush(&((pgstore *)st)->wr); }

static int pg_gc(xgr_store *st, size_t *deleted, xgr_error *err) {
  return xgr__writer_gc(&((pgstore *)st)->wr, deleted, err);
}

static void pg_close(xgr_store *st) {
  pgstore *g = (pgstore *)st;
  xgr__writer_destroy(&g->wr);   /* stops and joins the thread first: no part is handed over after it */
  for (size_t i = 0; i < g->nlanes; i++) {
    lane *l = &g->lanes[i];
    if (l->has_thread) {
      pthread_mutex_lock(&l->mu);
      l->stop = true;
      pthread_cond_broadcast(&l->cv);
      pthread_mutex_unlock(&l->mu);
      pthread_join(l->thread, NULL);
    }
    if (l->w) PQfinish(l->w);
    xgr__pg_copybufs_empty(&l->bufs, 0);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
  }
  free(g->lanes);
  if (g->w) PQfinish(g->w);
  if (g->r) PQfinish(g->r);
  if (g->bc) PQfinish(g->bc);
  xgr__pgc_close(g->cl);
  pthread_mutex_destroy(&g->rmu);
  pthread_mutex_destroy(&g->bmu);
  xgr__store_destroy_common(st);
  free(g->url);
  free(g->name);
  xgr__pg_sweep_restart(&g->sw_procs);
  xgr__pg_sweep_restart(&g->sw_born);
  xgr__pg_copybufs_empty(&g->bufs, 0);
  free(g);
}

pgc *xgr__pg_cluster(xgr_store *st) {
  return st && !strcmp(st->vt->name, "postgresql") ? ((pgstore *)st)->cl : NULL;
}

static const store_vt postgres_vt = {"postgresql", pg_submit, pg_flush, pg_close, xgr__pg_session_get, xgr__pg_procs,
                                     xgr__pg_history, xgr__pg_load_live, xgr__pg_doc_get, pg_gc, .sessions = xgr__pg_sessions,
                                     .live_owners = xgr__pg_live_owners, .owners_after = xgr__pg_owners_after,
                                     .peek_pid = xgr__pg_peek_pid, .owner_bytes = xgr__pg_owner_bytes, .outbox = xgr__pg_outbox,
                                     .wakes_refused = xgr__pg_wakes_refused, .audits = xgr__pg_audits, .grants = xgr__pg_grants, .load_some = xgr__pg_load_some, .due = xgr__pg_due,
                                     .bop_create = xgr__pg_bop_create, .bop_claim = xgr__pg_bop_claim,
                                     .bop_progress = xgr__pg_bop_progress, .bop_cancel = xgr__pg_bop_cancel,
                                     .bop_read = xgr__pg_bop_read};

/* ---- open and migrate ------------------------------------------------------------------------------- */

/* The URL for messages and logs: the userinfo (user:password@) and secret-looking query values
 * (password=, ...) masked by the rule engine's URL masking (src/rule/result.c, fuzzed). */
char *xgr_store_url_redacted(const char *url) { return xgr_rule_mask_url(url); }

/* Open *out as the connection role ("reader", "writer", or "writer-K": the K-th writer
 * connection, commit_split). 0 or an error. */
int xgr__pg_connect_one(pgstore *g, PGconn **out, const char *role, xgr_error *err) {
  /* named in pg_stat_activity (unless the URI names it): which backend is which node's writer */
  bool writer = strcmp(role, "reader") != 0;
  PGconn *c = *out = xgr__pg_connect(g->url, g->name, role, g->base.cfg.node_id, err);
  if (!c) return XGR_EIO;
  char sql[160];
  /* synchronous_commit: FULL waits for the WAL flush at COMMIT; NORMAL does not (a crash may lose
   * the last commits, never half of one) */
  snprintf(sql, sizeof sql, "SET synchronous_commit = %s; SET lock_timeout = %d; SET client_min_messages = warning",
           g->base.cfg.sync == XGR_STORE_SYNC_NORMAL ? "off" : "on", g->base.cfg.busy_timeout_ms);
  if (xgr__pg_exec_plain(g, c, sql, err)) return XGR_EIO;
  if (!writer && xgr__pg_exec_plain(g, c, "SET default_transaction_read_only = on", err)) return XGR_EIO;
  return 0;
}

xgr_store *xgr_store_postgres_open(const char *url, const xgr_store_config *cfg, xgr_error *err) {
  pgstore *g = xgr__xcalloc(1, sizeof *g);
  xgr__store_init_common(&g->base, &postgres_vt, cfg);
  g->url = xgr__xstrdup(url);
  g->name = xgr_store_url_redacted(url);
  pthread_mutexattr_t ra;
  pthread_mutexattr_init(&ra);
  pthread_mutexattr_settype(&ra, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&g->rmu, &ra);
  pthread_mutex_init(&g->bmu, NULL);
  pthread_mutexattr_destroy(&ra);
  xgr__writer_init(&g->wr, &g->base, xgr__pg_commit, xgr__pg_gc, g);
  bool ro = g->base.cfg.read_only;
  if (xgr__pg_connect_one(g, &g->r, "reader", err)) goto fail;
  int found = 0;
  if (xgr__pg_schema_version(g, g->r, &found, err)) goto fail;
  g->base.found_version = found;
  if (found > XGR_STORE_SCHEMA_VERSION) {
    xgr_error_set(err, XGR_EUNSUPPORTED, NULL, "store %s has schema version %d; this xgr knows versions up to %d "
                  "(use a newer xgr)", g->name, found, XGR_STORE_SCHEMA_VERSION);
    goto fail;
  }
  if (ro && found < XGR_STORE_SCHEMA_VERSION) {
    xgr_error_set(err, XGR_ESTATE, NULL, "store %s has schema version %d and needs migrating to %d, which a "
                  "read-only open cannot do", g->name, found, XGR_STORE_SCHEMA_VERSION);
    goto fail;
  }
  if (!ro) {
    if (xgr__pg_connect_one(g, &g->w, "writer", err)) goto fail;
    if (xgr__pg_take_writer_lock(g, g->base.cfg.node_id != NULL, err)) goto fail;
    if (found < XGR_STORE_SCHEMA_VERSION) {
      int now_found = found;
      if (xgr__pg_migrate(g, &now_found, err)) goto fail;
      g->base.found_version = now_found;
    }
    if (g->base.cfg.node_id) {   /* a cluster node: its lease connection, and new rows leased to it */
      g->cl = xgr__pgc_open(g->url, g->name, g->base.cfg.node_id, g->base.cfg.lease_ms, err);
      if (!g->cl) goto fail;
    }
    if (xgr__pg_setup_writer(g, g->w, err)) goto fail;
    int writers = g->base.cfg.pg_writers ? g->base.cfg.pg_writers : XGR_STORE_PG_WRITERS;
    if (writers < 1) writers = 1;
    if (writers > XGR_STORE_PG_WRITERS_MAX) writers = XGR_STORE_PG_WRITERS_MAX;
    g->lanes = xgr__xcalloc((size_t)writers, sizeof *g->lanes);
    for (int i = 0; i + 1 < writers; i++) {   /* the helper connections of commit_split */
      lane *l = &g->lanes[g->nlanes++];
      l->g = g;
      pthread_mutex_init(&l->mu, NULL);
      pthread_cond_init(&l->cv, NULL);
      char role[24];   /* "writer-2", ...: g->w alone is "writer" */
      snprintf(role, sizeof role, "writer-%d", i + 2);
      if (xgr__pg_connect_one(g, &l->w, role, err) || xgr__pg_setup_writer(g, l->w, err)) goto fail;
      if (pthread_create(&l->thread, NULL, xgr__pg_lane_main, l)) {
        xgr_error_set(err, XGR_EIO, NULL, "store %s: cannot start a writer thread", g->name);
        goto fail;
      }
      l->has_thread = true;
    }
  }
  g->base.version = XGR_STORE_SCHEMA_VERSION;
  if (!ro) {
    if (xgr__writer_start(&g->wr, "xgr-store-pg")) {
      xgr_error_set(err, XGR_EIO, NULL, "store %s: cannot start the writer thread", g->name);
      goto fail;
    }
  }
  return &g->base;
fail:
  pg_close(&g->base);
  return NULL;
}
