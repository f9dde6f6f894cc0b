/* postgres_read.c — the PostgreSQL store's reads, on the reader connection under its recursive
 * lock: a session, its processes (live proc_rt rows, records kept with history rows, live members
 * of packs), its history, the owners' sessions page by page, registry documents, the outbox, and
 * the loading of live sessions for recovery, hibernation and cluster claims (load_where: three
 * queries in one snapshot, merged per session), and the due index. A reader connection that broke
 * is opened again once. Part of the PostgreSQL backend (postgres.c has the overview). */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres_impl.h"

/* ---- reading (reader connection, under rmu) --------------------------------------------------------- */

#define SESSION_COLS "owner, root_pid, registry, ostc_id, ostc_hash, status, killed_at, created_at, finished_at, " \
                     "next_iter, paused, next_group, max_total_gas, wake_due, bundle_hash, stored_bytes, forked_from"

/* Run a read query; NULL (with *err) unless it returned rows. A reader connection that broke
 * (the server restarted) is opened again once: reads need no state from before. */
static PGresult *rd_query(pgstore *g, const char *sql, const params *p, xgr_error *err) {
  PGresult *r = NULL;
  for (int attempt = 0; attempt < 2; attempt++) {
    if (PQstatus(g->r) == CONNECTION_BAD && !g->r_snapshot) {   /* (a new one would not be in the snapshot) */
      PQfinish(g->r);
      g->r = NULL;
      if (xgr__pg_connect_one(g, &g->r, "reader", err)) return NULL;
    }
    r = PQexecParams(g->r, sql, p ? p->n : 0, NULL, p ? p->v : NULL, p ? p->len : NULL, p ? p->fmt : NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK || g->r_snapshot) break;
    /* the connection itself failed (no SQLSTATE: client side; 08: connection; 57P: the server
     * shut down): open a new one and try once more */
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (state && strncmp(state, "08", 2) && strncmp(state, "57P", 3)) break;
    if (attempt) break;
    PQclear(r);
    r = NULL;
    PQfinish(g->r);
    g->r = NULL;
    if (xgr__pg_connect_one(g, &g->r, "reader", err)) return NULL;
  }
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    xgr__pg_res_error(g, r, g->r, "cannot read", err);
    PQclear(r);
    return NULL;
  }
  return r;
}

static void read_session_row(const PGresult *r, int i, xgr_store_session *o) {
  memset(o, 0, sizeof *o);
  o->owner = get_text(r, i, 0);
  o->root_pid = get_u64(r, i, 1);
  o->registry = get_text(r, i, 2);
  o->ostc_id = get_text(r, i, 3);
  o->ostc_hash = get_text(r, i, 4);
  o->status = (uint8_t)get_i64(r, i, 5);
  o->killed_at = get_i64(r, i, 6);
  o->created_at = get_i64(r, i, 7);
  o->finished_at = get_i64(r, i, 8);
  o->next_iter = get_u64(r, i, 9);
  o->paused = get_i64(r, i, 10) != 0;
  o->next_group = (uint32_t)get_i64(r, i, 11);
  o->max_total_gas = get_text(r, i, 12);
  o->wake_due = get_i64(r, i, 13);   /* NULL reads as 0: awake */
  o->bundle_hash = get_text(r, i, 14);
  o->stored_bytes = (uint64_t)get_i64(r, i, 15);
  o->forked_from = get_text(r, i, 16);
}

/* the proc columns start at column `c` */
static void read_proc_row(const PGresult *r, int i, int c, xgr_store_proc *p) {
  memset(p, 0, sizeof *p);
  p->iter = get_u64(r, i, c + 0);
  p->parent_iter = get_u64(r, i, c + 1);
  p->step = (uint16_t)get_i64(r, i, c + 2);
  p->step_id = get_text(r, i, c + 3);
  p->status = (uint8_t)get_i64(r, i, c + 4);
  p->paused = get_i64(r, i, c + 5) != 0;
  p->valid = (int8_t)get_i64(r, i, c + 6);
  p->abort_reason = (uint8_t)get_i64(r, i, c + 7);
  p->group = (uint32_t)get_i64(r, i, c + 8);
  p->from_group = (uint32_t)get_i64(r, i, c + 9);
  p->next_wake_at = get_i64(r, i, c + 10);
  p->created_at = get_i64(r, i, c + 11);
  p->started_at = get_i64(r, i, c + 12);
  p->finished_at = get_i64(r, i, c + 13);
  p->payload = get_text(r, i, c + 14);
  p->error = get_text(r, i, c + 15);
  p->join = get_text(r, i, c + 16);
}

static void read_hist_row(const PGresult *r, int i, xgr_store_hist *h) {
  memset(h, 0, sizeof *h);
  h->iter = get_u64(r, i, 0);
  h->parent_iter = get_u64(r, i, 1);
  h->step = (uint16_t)get_i64(r, i, 2);
  h->step_id = get_text(r, i, 3);
  h->status = (uint8_t)get_i64(r, i, 4);
  h->valid = (int8_t)get_i64(r, i, 5);
  h->abort_reason = (uint8_t)get_i64(r, i, 6);
  h->at = get_i64(r, i, 7);
  h->finished_at = get_i64(r, i, 8);
  h->error = get_text(r, i, 9);
  h->payload = get_text(r, i, 10);
  h->recorded_at = get_i64(r, i, 11);
  h->api = get_text(r, i, 12);
}

int xgr__pg_session_get(xgr_store *st, const char *owner, uint64_t root, xgr_store_session *out, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_text(&p, owner);
  p_u64(&p, root);
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, "SELECT " SESSION_COLS " FROM sessions WHERE owner = $1 AND root_pid = $2", &p, err);
  int rc = r ? 0 : XGR_EIO;
  if (r && PQntuples(r) == 1) read_session_row(r, 0, out);
  else if (r) rc = xgr_error_set(err, XGR_ENOTFOUND, NULL, "no session %s/%" PRIu64 " in the store", owner, root);
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

int xgr__pg_owner_bytes(xgr_store *st, const char *owner, uint64_t *bytes, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_text(&p, owner);
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, "SELECT COALESCE(SUM(stored_bytes), 0)::bigint FROM sessions WHERE owner = $1", &p, err);
  int rc = r ? 0 : XGR_EIO;
  if (r) *bytes = PQntuples(r) ? (uint64_t)get_i64(r, 0, 0) : 0;
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

int xgr__pg_peek_pid(xgr_store *st, const char *owner, uint64_t *next, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_text(&p, owner);
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, "SELECT next_root FROM owners WHERE owner = $1", &p, err);
  int rc = r ? 0 : XGR_EIO;
  if (r) *next = PQntuples(r) ? get_u64(r, 0, 0) : 1;
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

#define WAKE_COLS                                                                                               \
  "id, from_owner, from_root, to_owner, to_root, step, caller, rule, payload, created_at, refused, refused_at,"  \
  " from_iter, from_step"

/* Outbox rows of a query with parameters p, in its order. */
static int read_wakes(pgstore *g, const char *sql, params *p, xgr_store_wake **out, size_t *n, xgr_error *err) {
  *out = NULL;
  *n = 0;
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, sql, p, err);
  int rc = r ? 0 : XGR_EIO;
  if (r) {
    int rows = PQntuples(r);
    *out = xgr__xcalloc((size_t)rows + 1, sizeof **out);
    for (int i = 0; i < rows; i++) {
      xgr_store_wake *w = &(*out)[i];
      w->id = get_text(r, i, 0);
      w->from_owner = get_text(r, i, 1);
      w->from_root = get_u64(r, i, 2);
      w->to_owner = get_text(r, i, 3);
      w->to_root = get_u64(r, i, 4);
      w->step = get_text(r, i, 5);
      w->caller = get_text(r, i, 6);
      w->rule = get_text(r, i, 7);
      w->payload = get_text(r, i, 8);
      w->created_at = get_i64(r, i, 9);
      w->refused = get_text(r, i, 10);
      w->refused_at = get_i64(r, i, 11);
      w->from_iter = get_u64(r, i, 12);   /* NULL reads as 0: not recorded */
      w->from_step = get_text(r, i, 13);
    }
    *n = (size_t)rows;
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

int xgr__pg_outbox(xgr_store *st, xgr_store_wake **out, size_t *n, xgr_error *err) {
  params p = {0};
  return read_wakes((pgstore *)st, "SELECT " WAKE_COLS " FROM outbox WHERE refused IS NULL ORDER BY created_at, id", &p,
                    out, n, err);
}

int xgr__pg_wakes_refused(xgr_store *st, const char *owner, uint64_t root, xgr_store_wake **out, size_t *n,
                            xgr_error *err) {
  params p = {0};
  p_text(&p, owner);
  p_u64(&p, root);
  return read_wakes((pgstore *)st,
                    "SELECT " WAKE_COLS " FROM outbox WHERE from_owner = $1 AND from_root = $2 AND refused IS NOT NULL"
                    " ORDER BY refused_at, id",
                    &p, out, n, err);
}

/* The grants a filter selects (xgr_store_grants): each set field adds its condition. */
int xgr__pg_grants(xgr_store *st, const xgr_store_grant_filter *f, xgr_store_grant **out, size_t *n, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  char sql[896], cond[512] = "";
  size_t c = 0;
  p_i64(&p, f->after_id);
#define COND(...) c += (size_t)snprintf(cond + c, sizeof cond - c, __VA_ARGS__)
  if (f->owner) {
    p_text(&p, f->owner);
    COND(" AND owner = $%d", p.n);
    if (f->root_pid) {
      p_u64(&p, f->root_pid);
      COND(" AND root_pid = $%d", p.n);
    }
  }
  if (f->grantee) {
    p_text(&p, f->grantee);
    COND(" AND grantee = $%d", p.n);
  }
  if (f->party) {
    p_text(&p, f->party);
    COND(" AND (grantee = $%d OR owner = $%d)", p.n, p.n);
  }
  if (f->rule) {
    p_text(&p, f->rule);
    COND(" AND lower(rule) = lower($%d)", p.n);
  }
  if (f->expires_after) {
    p_i64(&p, f->expires_after);
    COND(" AND expires_at > $%d", p.n);
  }
  if (f->expires_until) {
    p_i64(&p, f->expires_until);
    COND(" AND expires_at <= $%d", p.n);
  }
#undef COND
  snprintf(sql, sizeof sql,
           "SELECT id, owner, root_pid, grantee, rights, expires_at, rule, step, enc_dek, created_by, created_at"
           " FROM session_grants WHERE id > $1%s ORDER BY id LIMIT %zu", cond, f->limit);
  *out = NULL;
  *n = 0;
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, sql, &p, err);
  int rc = r ? 0 : XGR_EIO;
  if (r) {
    int rows = PQntuples(r);
    *out = xgr__xcalloc((size_t)rows + 1, sizeof **out);
    for (int i = 0; i < rows; i++) {
      xgr_store_grant *x = &(*out)[i];
      x->id = get_i64(r, i, 0);
      x->owner = get_text(r, i, 1);
      x->root_pid = get_u64(r, i, 2);
      x->grantee = get_text(r, i, 3);
      x->rights = (uint32_t)get_i64(r, i, 4);
      x->expires_at = get_i64(r, i, 5);
      x->rule = get_text(r, i, 6);
      x->step = get_text(r, i, 7);
      x->enc_dek = get_text(r, i, 8);
      x->created_by = get_text(r, i, 9);
      x->created_at = get_i64(r, i, 10);
    }
    *n = (size_t)rows;
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

int xgr__pg_audits(xgr_store *st, const char *owner, uint64_t root, xgr_store_audit **out, size_t *n, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_text(&p, owner);
  p_u64(&p, root);
  *out = NULL;
  *n = 0;
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, "SELECT session_at, kind, actor, node, permit, detail, recorded_at FROM session_audit"
                         " WHERE owner = $1 AND root_pid = $2 ORDER BY session_at, id", &p, err);
  int rc = r ? 0 : XGR_EIO;
  if (r) {
    int rows = PQntuples(r);
    *out = xgr__xcalloc((size_t)rows + 1, sizeof **out);
    for (int i = 0; i < rows; i++) {
      xgr_store_audit *a = &(*out)[i];
      a->session_at = get_i64(r, i, 0);
      a->kind = get_text(r, i, 1);
      a->actor = get_text(r, i, 2);
      a->node = get_text(r, i, 3);
      a->permit = get_text(r, i, 4);
      a->detail = get_text(r, i, 5);
      a->at = get_i64(r, i, 6);
    }
    *n = (size_t)rows;
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

int xgr__pg_procs(xgr_store *st, const char *owner, uint64_t root, xgr_store_proc **out, size_t *n, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_text(&p, owner);
  p_u64(&p, root);
  *out = NULL;
  *n = 0;
  pthread_mutex_lock(&g->rmu);
  p_i64(&p, xgr__store_now_ms(st) - st->cfg.ttl_secs * 1000);
  /* the rows of proc_rt but the stale ones, the records kept with history rows (listed for
   * ttl_secs after their process ended, as a terminal proc_rt row lives until retention) and the
   * live members of packs */
  PGresult *r = rd_query(g, "SELECT " PROC_COLS " FROM proc_rt r WHERE owner = $1 AND root_pid = $2 AND NOT "
                         ENDED_IN_HIST("r") " UNION ALL SELECT " HIST_RECORD_COLS " FROM proc_steps WHERE owner = $1"
                         " AND root_pid = $2 AND rt_created_at IS NOT NULL AND recorded_at > $3 UNION ALL SELECT m.*"
                         " FROM proc_born b, " BORN_UNNEST " WHERE b.owner = $1 AND b.root_pid = $2 AND " BORN_LIVE
                         " ORDER BY iter", &p, err);
  int rc = r ? 0 : XGR_EIO;
  if (r) {
    int rows = PQntuples(r);
    *out = xgr__xcalloc((size_t)rows + 1, sizeof **out);
    for (int i = 0; i < rows; i++) read_proc_row(r, i, 0, &(*out)[i]);
    *n = (size_t)rows;
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

int xgr__pg_history(xgr_store *st, const char *owner, uint64_t root, xgr_store_hist **out, size_t *n, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_text(&p, owner);
  p_u64(&p, root);
  *out = NULL;
  *n = 0;
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, "SELECT " HIST_COLS " FROM proc_steps WHERE owner = $1 AND root_pid = $2 ORDER BY iter", &p,
                         err);
  int rc = r ? 0 : XGR_EIO;
  if (r) {
    int rows = PQntuples(r);
    *out = xgr__xcalloc((size_t)rows + 1, sizeof **out);
    for (int i = 0; i < rows; i++) read_hist_row(r, i, &(*out)[i]);
    *n = (size_t)rows;
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

/* The owner's sessions, newest rootPid first: a range scan of the primary key (owner, root_pid). */
int xgr__pg_sessions(xgr_store *st, const char *owner, uint64_t before, size_t limit, xgr_store_session **out,
                       size_t *n, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_text(&p, owner);
  p_u64(&p, before);
  p_u64(&p, limit);
  /* before = 2^64-1 is "no bound" (the front's default): that rootPid itself is listed too */
  const char *sql = !owner   /* every owner's ($1 is NULL) */
                        ? before == UINT64_MAX
                              ? "SELECT " SESSION_COLS " FROM sessions WHERE $1::text IS NULL AND root_pid <= $2 ORDER BY root_pid DESC, owner LIMIT $3"
                              : "SELECT " SESSION_COLS " FROM sessions WHERE $1::text IS NULL AND root_pid < $2 ORDER BY root_pid DESC, owner LIMIT $3"
                    : before == UINT64_MAX
                        ? "SELECT " SESSION_COLS " FROM sessions WHERE owner = $1 AND root_pid <= $2 ORDER BY root_pid DESC LIMIT $3"
                        : "SELECT " SESSION_COLS " FROM sessions WHERE owner = $1 AND root_pid < $2 ORDER BY root_pid DESC LIMIT $3";
  *out = NULL;
  *n = 0;
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, sql, &p, err);
  int rc = r ? 0 : XGR_EIO;
  if (r) {
    int rows = PQntuples(r);
    *out = xgr__xcalloc((size_t)rows + 1, sizeof **out);
    for (int i = 0; i < rows; i++) read_session_row(r, i, &(*out)[i]);
    *n = (size_t)rows;
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

/* Compare (owner, root) keys in the order of the queries below (owner COLLATE "C", root). */
static int key_cmp(const char *o1, uint64_t r1, const char *o2, uint64_t r2) {
  int c = strcmp(o1, o2);
  if (c) return c;
  return r1 < r2 ? -1 : r1 > r2 ? 1 : 0;
}

static int load_where(pgstore *g, const char *cond, const params *p, int (*fn)(void *, const xgr_store_live *),
                      void *ctx, xgr_error *err);

/* Every live session with its live processes and killed scopes (load_where, below). */
int xgr__pg_load_live(xgr_store *st, int (*fn)(void *, const xgr_store_live *), void *ctx, xgr_error *err) {
  return load_where((pgstore *)st, "TRUE", NULL, fn, ctx, err);
}

/* Cluster: the live rows of the sessions named by two PostgreSQL array literals (owners, rootPids),
 * as xgr__pg_load_live reads them (load_where), for the sessions a claim just took (pg_cluster.c). */
int xgr__pg_load_keys(xgr_store *st, const char *owners, const char *roots,
                      int (*fn)(void *, const xgr_store_live *), void *ctx, xgr_error *err) {
  params p = {0};
  p_text(&p, owners);
  p_text(&p, roots);
  return load_where((pgstore *)st,
                    "(s.owner, s.root_pid) IN (SELECT u.owner, u.root_pid FROM unnest($1::text[], $2::numeric[])"
                    " AS u(owner, root_pid))",
                    &p, fn, ctx, err);
}

int xgr__pg_doc_get(xgr_store *st, xgr_registry_kind kind, const char *id, uint32_t version, const char *hash,
                      xgr_store_doc *out, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  const char *table = kind == XGR_REG_RULE ? "rules" : "orchestrations";
  char sql[256];
  params p = {0};
  if (hash) {
    snprintf(sql, sizeof sql, "SELECT id, version, hash, owner, registered_at, content FROM %s WHERE hash = lower($1)"
             " ORDER BY version DESC LIMIT 1", table);
    p_text(&p, hash);
  } else if (version) {
    snprintf(sql, sizeof sql, "SELECT id, version, hash, owner, registered_at, content FROM %s WHERE id = $1 AND"
             " version = $2", table);
    p_text(&p, id);
    p_i64(&p, version);
  } else {
    snprintf(sql, sizeof sql, "SELECT id, version, hash, owner, registered_at, content FROM %s WHERE id = $1"
             " ORDER BY version DESC LIMIT 1", table);
    p_text(&p, id);
  }
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, sql, &p, err);
  int rc = r ? 0 : XGR_EIO;
  if (r && PQntuples(r) == 1) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->id = get_text(r, 0, 0);
    out->version = (uint32_t)get_i64(r, 0, 1);
    out->hash = get_text(r, 0, 2);
    out->owner = get_text(r, 0, 3);
    out->registered_at = get_i64(r, 0, 4);
    size_t len = 0;
    unsigned char *bytes = PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 5), &len);
    out->len = bytes ? len : 0;
    out->content = xgr__xmalloc(out->len + 1);
    if (out->len) memcpy(out->content, bytes, out->len);
    out->content[out->len] = 0;
    PQfreemem(bytes);
  } else if (r) {
    rc = xgr_error_set(err, XGR_ENOTFOUND, NULL, "no %s %s%s in the registry", kind ? "rule" : "orchestration",
                       hash ? "with hash " : "", hash ? hash : id);
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

/* The owners with live sessions: status = 0 rows grouped by owner, most first. */
int xgr__pg_live_owners(xgr_store *st, const char *owner, size_t max, xgr_store_owner_live **out, size_t *n,
                          xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  p_u64(&p, max);
  p_text(&p, owner);   /* NULL: every owner */
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, "SELECT owner, COUNT(*) AS live FROM sessions WHERE status = 0 AND ($2::text IS NULL OR owner = $2)"
                            " GROUP BY owner ORDER BY live DESC, owner LIMIT $1::bigint", &p, err);
  int rc = r ? 0 : XGR_EIO;
  *out = xgr__xcalloc(max, sizeof **out);
  for (int i = 0; r && i < PQntuples(r) && *n < max; i++) {
    (*out)[*n].owner = get_text(r, i, 0);
    (*out)[(*n)++].live = get_u64(r, i, 1);
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

/* The owners with session rows after `after`, ascending: one MIN() seek of the primary key per owner. */
int xgr__pg_owners_after(xgr_store *st, const char *after, size_t max, xgr_store_owner_live **out, size_t *n,
                         xgr_error *err) {
  pgstore *g = (pgstore *)st;
  *out = xgr__xcalloc(max, sizeof **out);
  int rc = 0;
  pthread_mutex_lock(&g->rmu);
  char *last = xgr__xstrdup(after);
  while (!rc && *n < max) {
    params p = {0};
    p_text(&p, last);
    PGresult *r = rd_query(g, "SELECT MIN(owner) FROM sessions WHERE owner > $1", &p, err);
    if (!r) {
      rc = XGR_EIO;
      break;
    }
    bool none = PQntuples(r) < 1 || PQgetisnull(r, 0, 0);
    if (!none) {
      (*out)[*n].owner = get_text(r, 0, 0);
      free(last);
      last = xgr__xstrdup((*out)[(*n)++].owner);
    }
    PQclear(r);
    if (none) break;
  }
  free(last);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

/* ---- hibernation: some live sessions, the due index (issue 19; docs/STORE.md "Hibernation") ------ */

/* The live sessions whose row `s` meets `cond` (SQL, with parameters p; NULL: none), each with its
 * live processes and killed scopes: three queries in one snapshot, all in (owner, rootPid) order,
 * merged here (no query per session). Every loader of live sessions goes through it. */
static int load_where(pgstore *g, const char *cond, const params *p, int (*fn)(void *, const xgr_store_live *),
                      void *ctx, xgr_error *err) {
  char sql[3][3072];
  int len[3];   /* cond is one of this file's (short) conditions: nothing is cut off */
  len[0] = snprintf(sql[0], sizeof sql[0], "SELECT " SESSION_COLS " FROM sessions s WHERE s.status = 0 AND (%s)"
           " ORDER BY s.owner COLLATE \"C\", s.root_pid", cond);
  len[1] = snprintf(sql[1], sizeof sql[1], "SELECT r.owner, r.root_pid, r.iter, r.parent_iter, r.step, r.step_id, r.status,"
           " r.paused, r.valid, r.abort_reason, r.join_group, r.join_from_group, r.next_wake_at, r.created_at,"
           " r.started_at, r.finished_at, r.payload, r.error, r.join_state FROM proc_rt r JOIN sessions s"
           " ON s.owner = r.owner AND s.root_pid = r.root_pid WHERE s.status = 0 AND (%s) AND r.status < 2"
           " AND NOT " ENDED_IN_HIST("r") " UNION ALL SELECT b.owner, b.root_pid, m.* FROM proc_born b JOIN sessions s"
           " ON s.owner = b.owner AND s.root_pid = b.root_pid, " BORN_UNNEST " WHERE s.status = 0 AND (%s) AND "
           BORN_LIVE " ORDER BY 1, 2, 3", cond, cond);   /* owner is COLLATE "C" in both parts */
  len[2] = snprintf(sql[2], sizeof sql[2], "SELECT k.owner, k.root_pid, k.grp FROM proc_scopes k JOIN sessions s"
           " ON s.owner = k.owner AND s.root_pid = k.root_pid WHERE s.status = 0 AND (%s)"
           " ORDER BY k.owner COLLATE \"C\", k.root_pid, k.grp", cond);
  for (int q = 0; q < 3; q++) assert(len[q] > 0 && (size_t)len[q] < sizeof sql[q]);
  (void)len;
  pthread_mutex_lock(&g->rmu);
  PGresult *res[3] = {NULL, NULL, NULL};
  if (PQstatus(g->r) == CONNECTION_BAD) {   /* the server restarted since the last read */
    PGresult *ping = rd_query(g, "SELECT 1", NULL, err);
    PQclear(ping);
  }
  int rc = xgr__pg_exec_plain(g, g->r, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", err);
  g->r_snapshot = true;
  if (!rc) {
    for (int q = 0; q < 3 && (!q || res[q - 1]); q++) res[q] = rd_query(g, sql[q], p, err);
    if (!res[2]) rc = XGR_EIO;
    xgr__pg_exec_plain(g, g->r, "COMMIT", &(xgr_error){0});
  }
  g->r_snapshot = false;
  PGresult *rs = res[0], *rp = res[1], *rg = res[2];
  int ns = rc ? 0 : PQntuples(rs), np = rc ? 0 : PQntuples(rp), ng = rc ? 0 : PQntuples(rg);
  int ip = 0, ig = 0;
  for (int i = 0; !rc && i < ns; i++) {
    xgr_store_session row;
    read_session_row(rs, i, &row);
    while (ip < np && key_cmp(PQgetvalue(rp, ip, 0), get_u64(rp, ip, 1), row.owner, row.root_pid) < 0) ip++;
    int p0 = ip;
    while (ip < np && !key_cmp(PQgetvalue(rp, ip, 0), get_u64(rp, ip, 1), row.owner, row.root_pid)) ip++;
    while (ig < ng && key_cmp(PQgetvalue(rg, ig, 0), get_u64(rg, ig, 1), row.owner, row.root_pid) < 0) ig++;
    int g0 = ig;
    while (ig < ng && !key_cmp(PQgetvalue(rg, ig, 0), get_u64(rg, ig, 1), row.owner, row.root_pid)) ig++;
    size_t nprocs = (size_t)(ip - p0), nkilled = (size_t)(ig - g0);
    xgr_store_proc *procs = xgr__xcalloc(nprocs + 1, sizeof *procs);
    for (size_t k = 0; k < nprocs; k++) read_proc_row(rp, p0 + (int)k, 2, &procs[k]);
    uint32_t *groups = xgr__xcalloc(nkilled + 1, sizeof *groups);
    for (size_t k = 0; k < nkilled; k++) groups[k] = (uint32_t)get_i64(rg, g0 + (int)k, 2);
    xgr_store_live l = {&row, procs, nprocs, groups, nkilled};
    rc = fn(ctx, &l);
    if (rc) xgr_error_set(err, rc, NULL, "recovery stopped at session %s/%" PRIu64, row.owner, row.root_pid);
    xgr_store_procs_free(procs, nprocs);
    free(groups);
    xgr_store_session_clear(&row);
  }
  for (int q = 0; q < 3; q++) PQclear(res[q]);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}

/* One session (loading on demand); the awake ones and those due by due_upto (lazy recovery: the
 * partial indexes sessions_awake and sessions_wake_due, no hibernated row beyond the bound is
 * read); or every live one. */
int xgr__pg_load_some(xgr_store *st, const xgr_store_load_filter *f, int (*fn)(void *, const xgr_store_live *),
                        void *ctx, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  params p = {0};
  if (f && f->owner) {
    p_text(&p, f->owner);
    p_u64(&p, f->root_pid);
    return load_where(g, "s.owner = $1 AND s.root_pid = $2", &p, fn, ctx, err);
  }
  if (f && f->bounded) {
    p_i64(&p, f->due_upto);
    return load_where(g, "s.wake_due IS NULL OR s.wake_due <= $1::bigint", &p, fn, ctx, err);
  }
  return xgr__pg_load_live(st, fn, ctx, err);
}

/* The due index: a range scan of sessions_wake_due after the cursor (a row comparison in the
 * index's column order), at most max keys. A cursor whose owner starts with the byte 0xff (the
 * engine's "every key of this due time", xgr_engine_hibernation_start) is past every owner: no
 * text holds that byte, and PostgreSQL refuses it as a parameter, so it is sent as `wake_due > due`. */
int xgr__pg_due(xgr_store *st, const xgr_store_due_key *after, int64_t upto, xgr_store_due_key *out, size_t max,
                  size_t *n, xgr_error *err) {
  pgstore *g = (pgstore *)st;
  bool past_all = after && (unsigned char)after->owner[0] == 0xff;
  params p = {0};
  p_i64(&p, after ? after->due : INT64_MIN);
  p_i64(&p, upto);
  p_u64(&p, max);
  if (!past_all) {
    p_text(&p, after ? after->owner : "");
    p_u64(&p, after ? after->root_pid : 0);
  }
  const char *sql = past_all ? "SELECT wake_due, owner, root_pid FROM sessions WHERE status = 0 AND wake_due IS NOT NULL"
                               " AND wake_due > $1::bigint AND wake_due <= $2::bigint"
                               " ORDER BY wake_due, owner, root_pid LIMIT $3"
                             : "SELECT wake_due, owner, root_pid FROM sessions WHERE status = 0 AND wake_due IS NOT NULL"
                               " AND (wake_due, owner, root_pid) > ($1::bigint, $4::text COLLATE \"C\", $5::numeric)"
                               " AND wake_due <= $2::bigint ORDER BY wake_due, owner, root_pid LIMIT $3";
  pthread_mutex_lock(&g->rmu);
  PGresult *r = rd_query(g, sql, &p, err);
  int rc = r ? 0 : XGR_EIO;
  int rows = r ? PQntuples(r) : 0;
  for (int i = 0; i < rows && *n < max; i++) {
    xgr_store_due_key *k = &out[(*n)++];
    k->due = get_i64(r, i, 0);
    snprintf(k->owner, sizeof k->owner, "%s", PQgetvalue(r, i, 1));
    k->root_pid = get_u64(r, i, 2);
  }
  PQclear(r);
  pthread_mutex_unlock(&g->rmu);
  return rc;
}
