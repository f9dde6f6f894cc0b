/* postgres_write.c — how the PostgreSQL store's writer commits a group of batches: the statements of
 * every batch sent in one pipeline (xgr__pg_send_op, or the bulk path of postgres_bulk.c), the cluster's
 * fence first, the results read back (taken rootPids, registered versions, used marks), COMMIT;
 * a transient failure (deadlock victim, serialization) tried again, a batch's own fault (a
 * constraint, bad data, a lost lease) isolated by applying the batches one transaction each, any
 * other failure putting the store in the failed state; and a large group split by session key
 * over the writer's helper connections (the lanes), each part in its own transaction at the same
 * time. Writer thread and lane threads only. Part of the PostgreSQL backend (postgres.c has the
 * overview). */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/postgres_impl.h"
#include "util/clock.h"
#include "util/hash.h"

/* ---- errors --------------------------------------------------------------------------------- */

/* Is a SQLSTATE the batch's own fault (a constraint: class 23; bad data: class 22) rather than
 * the store's? */
static bool state_is_batch_fault(const char *state) {
  return state && (!strncmp(state, "23", 2) || !strncmp(state, "22", 2) || !strncmp(state, "XL", 2));
}

/* ---- applying batches (writer thread, pipeline mode) ------------------------------------------ */

void xgr__pg_send_stmt(pgstore *g, PGconn *w, pipe_state *ps, int which, const params *p, size_t batch, size_t op, uint8_t what) {
  char name[8];
  snprintf(name, sizeof name, "x%d", which);
  if (!PQsendQueryPrepared(w, name, p->n, p->v, p->len, p->fmt, 0)) ps->send_failed = true;
  if (ps->n == ps->cap) {
    ps->cap = ps->cap ? ps->cap * 2 : 64;
    ps->p = xgr__xrealloc(ps->p, ps->cap * sizeof *ps->p);
  }
  ps->p[ps->n++] = (pending){batch, op, what};
}

void xgr__pg_send_op(pgstore *g, PGconn *w, pipe_state *ps, size_t bi, size_t oi, const store_op *op, int64_t now) {
  params p = {0};
  switch (op->kind) {
    case OP_SESSION: {
      const xgr_store_session *x = &op->u.session;
      p_text(&p, x->owner);
      p_u64(&p, x->root_pid);
      p_text(&p, x->registry);
      p_text(&p, x->ostc_id);
      p_text(&p, x->ostc_hash);
      p_i64(&p, x->status);
      p_i64(&p, x->killed_at);
      p_i64(&p, x->created_at ? x->created_at : now);
      p_i64(&p, x->status != XGR_RESULT_RUNNING ? (x->finished_at ? x->finished_at : now) : 0);
      p_u64(&p, x->next_iter);
      p_i64(&p, x->paused);
      p_i64(&p, x->next_group);
      p_text(&p, x->max_total_gas ? x->max_total_gas : "");
      p_text(&p, x->bundle_hash ? x->bundle_hash : "");
      xgr__pg_send_stmt(g, w, ps, op->if_absent ? S_SESSION_NEW : S_SESSION, &p, bi, oi, op->if_absent ? W_SESSION_NEW : W_PLAIN);
      if (x->root_pid == UINT64_MAX) return;
      params q = {0};
      p_text(&q, x->owner);
      p_u64(&q, x->root_pid + 1);
      xgr__pg_send_stmt(g, w, ps, S_OWNER_BUMP, &q, bi, oi, W_PLAIN);
      return;
    }
    case OP_STATE:
      p_text(&p, op->owner);
      p_u64(&p, op->root);
      p_i64(&p, op->u.state.status);
      p_i64(&p, op->u.state.killed_at);
      p_u64(&p, op->u.state.next_iter);
      p_i64(&p, op->u.state.next_group);
      p_i64(&p, op->u.state.paused);
      p_i64(&p, now);
      if (op->u.state.due) p_i64(&p, op->u.state.due);   /* the due index; NULL: awake */
      else p_text(&p, NULL);
      if (op->u.state.has_bytes) p_i64(&p, (int64_t)(op->u.state.stored_bytes & INT64_MAX));   /* NULL: kept */
      else p_text(&p, NULL);
      xgr__pg_send_stmt(g, w, ps, S_STATE, &p, bi, oi, W_PLAIN);
      if (op->u.state.status != XGR_RESULT_RUNNING) {   /* killed scopes and packs matter only while the session lives */
        params q = {0};
        p_text(&q, op->owner);
        p_u64(&q, op->root);
        xgr__pg_send_stmt(g, w, ps, S_SCOPES_DEL, &q, bi, oi, W_PLAIN);
        xgr__pg_send_stmt(g, w, ps, S_RM_BORN, &q, bi, oi, W_PLAIN);
      }
      return;
    case OP_PROC: {
      const xgr_store_proc *x = &op->u.proc;
      p_text(&p, op->owner);
      p_u64(&p, op->root);
      p_u64(&p, x->iter);
      p_u64(&p, x->parent_iter);
      p_i64(&p, x->step);
      p_text(&p, x->step_id ? x->step_id : "");
      p_i64(&p, x->status);
      p_i64(&p, x->paused);
      p_i64(&p, x->valid);
      p_i64(&p, x->abort_reason);
      p_i64(&p, x->group);
      p_i64(&p, x->from_group);
      p_i64(&p, x->next_wake_at);
      p_i64(&p, x->created_at);
      p_i64(&p, x->started_at);
      p_i64(&p, x->finished_at);
      p_text(&p, x->payload ? x->payload : "{}");
      p_text(&p, x->error);
      p_text(&p, x->join);
      if (x->status >= XGR_PROC_DONE) p_i64(&p, now);
      else p_text(&p, NULL);
      xgr__pg_send_stmt(g, w, ps, S_PROC, &p, bi, oi, W_PLAIN);
      return;
    }
    case OP_HIST: {
      const xgr_store_hist *h = &op->u.hist;
      p_text(&p, op->owner);
      p_u64(&p, op->root);
      p_u64(&p, h->iter);
      p_u64(&p, h->parent_iter);
      p_i64(&p, h->step);
      p_text(&p, h->step_id ? h->step_id : "");
      p_i64(&p, h->status);
      p_i64(&p, h->valid);
      p_i64(&p, h->abort_reason);
      p_i64(&p, h->at);
      p_i64(&p, h->finished_at);
      p_text(&p, h->error);
      p_text(&p, g->base.cfg.no_history_payload ? NULL : h->payload);
      p_i64(&p, now);
      p_text(&p, h->api);
      xgr__pg_send_stmt(g, w, ps, S_HIST, &p, bi, oi, W_PLAIN);
      return;
    }
    case OP_SCOPE:
      p_text(&p, op->owner);
      p_u64(&p, op->root);
      p_i64(&p, op->u.group);
      xgr__pg_send_stmt(g, w, ps, S_SCOPE, &p, bi, oi, W_PLAIN);
      return;
    case OP_REMOVE: {
      static const int ids[] = {S_RM_PROCS, S_RM_HIST_RECORDS, S_RM_BORN, S_SCOPES_DEL, S_RM_SESSION, S_RM_REFUSED,
                                S_RM_GRANTS};
      p_text(&p, op->owner);
      p_u64(&p, op->root);
      for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) xgr__pg_send_stmt(g, w, ps, ids[i], &p, bi, oi, W_PLAIN);
      return;
    }
    case OP_WAKE_OUT: {
      const xgr_store_wake *wk = &op->u.wake;
      p_text(&p, wk->id);
      p_text(&p, wk->from_owner);
      p_u64(&p, wk->from_root);
      p_text(&p, wk->to_owner);
      p_u64(&p, wk->to_root);
      p_text(&p, wk->step);
      p_text(&p, wk->caller);
      p_text(&p, wk->rule);
      p_text(&p, wk->payload);
      p_i64(&p, now);
      if (wk->from_iter) p_u64(&p, wk->from_iter);
      else p_text(&p, NULL);   /* not recorded */
      p_text(&p, wk->from_step);
      xgr__pg_send_stmt(g, w, ps, S_WAKE_OUT, &p, bi, oi, W_PLAIN);
      return;
    }
    case OP_WAKE_DONE:
      p_text(&p, op->owner);   /* the id */
      if (op->u.wake.refused) {
        p_text(&p, op->u.wake.refused);
        p_i64(&p, now);
      }
      xgr__pg_send_stmt(g, w, ps, op->u.wake.refused ? S_WAKE_REFUSE : S_WAKE_DONE, &p, bi, oi, W_PLAIN);
      return;
    case OP_FORKED:
      p_text(&p, op->owner);
      p_u64(&p, op->root);
      p_text(&p, op->u.forked_from);
      xgr__pg_send_stmt(g, w, ps, S_FORKED, &p, bi, oi, W_PLAIN);
      return;
    case OP_PIN:
      p_text(&p, op->owner);
      p_u64(&p, op->root);
      p_text(&p, op->u.pin.ostc_id);
      p_text(&p, op->u.pin.ostc_hash);
      p_text(&p, op->u.pin.bundle_hash);
      xgr__pg_send_stmt(g, w, ps, S_PIN, &p, bi, oi, W_PLAIN);
      return;
    case OP_GRANT: {
      const xgr_store_grant *x = &op->u.grant;
      p_text(&p, op->owner);
      p_u64(&p, op->root);
      p_text(&p, x->grantee);
      if (x->rights) {
        p_i64(&p, x->rights);
        p_i64(&p, x->expires_at);
        p_text(&p, x->rule);
        p_text(&p, x->step);
        p_text(&p, x->enc_dek);
        p_text(&p, x->created_by);
        p_i64(&p, now);
      }
      xgr__pg_send_stmt(g, w, ps, x->rights ? S_GRANT : S_GRANT_DEL, &p, bi, oi, W_PLAIN);
      return;
    }
    case OP_AUDIT: {
      const xgr_store_audit *x = &op->u.audit;
      p_text(&p, op->owner);
      p_u64(&p, op->root);
      p_i64(&p, x->session_at);
      p_text(&p, x->kind);
      p_text(&p, x->actor);
      p_text(&p, x->node);
      p_text(&p, x->permit);
      p_text(&p, x->detail);
      p_i64(&p, now);
      xgr__pg_send_stmt(g, w, ps, S_AUDIT, &p, bi, oi, W_PLAIN);
      return;
    }
    case OP_NEXTPID:
      p_text(&p, op->owner);
      xgr__pg_send_stmt(g, w, ps, S_NEXTPID, &p, bi, oi, W_NEXTPID);
      return;
    case OP_REGISTER: {
      const xgr_store_doc *d = op->u.doc;
      p_text(&p, d->id);
      xgr__pg_send_stmt(g, w, ps, S_REG_LOCK, &p, bi, oi, W_PLAIN);
      params q = {0};
      p_text(&q, d->id);
      p_text(&q, d->hash);
      p_text(&q, d->owner);
      p_i64(&q, d->registered_at);
      p_bin(&q, d->content, d->len);
      xgr__pg_send_stmt(g, w, ps, d->kind == XGR_REG_RULE ? S_REG_RULE : S_REG_ORCH, &q, bi, oi, W_REGISTER);
      return;
    }
    case OP_MARK: {
      p_i64(&p, op->u.mark.now);
      xgr__pg_send_stmt(g, w, ps, S_MARK_GC, &p, bi, oi, W_PLAIN);
      params q = {0};
      p_text(&q, op->owner);
      p_i64(&q, op->u.mark.expires_at);
      p_i64(&q, op->u.mark.now);
      xgr__pg_send_stmt(g, w, ps, S_MARK, &q, bi, oi, W_MARK);
      return;
    }
  }
}

/* Read the results of everything in ps (one sync point follows them). Entries whose result is
 * a value (a taken rootPid, a registered version, a mark) are filled in; a mark that is in use
 * fails its batch (list[i]->rc) without failing the transaction when it is the batch's only
 * write. */
static void read_pipeline(pgstore *g, PGconn *w, pipe_state *ps, xgr_store_changes **list, pipe_result *pr) {
  pr->ok = true;
  pr->conn_lost = false;
  pr->state[0] = 0;
  xgr_error_clear(&pr->err);
  for (size_t i = 0; i < ps->n; i++) {
    PGresult *r = PQgetResult(w);
    if (!r) {
      pr->ok = false;
      pr->conn_lost = true;
      xgr__pg_res_error(g, NULL, w, "no result from PostgreSQL", &pr->err);
      return;
    }
    const pending *pe = &ps->p[i];
    xgr_store_changes *b = list[pe->batch];
    store_op *op = pe->what != W_PLAIN ? &b->ops[pe->op] : NULL;
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_FATAL_ERROR && pr->ok) {
      pr->ok = false;
      const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      snprintf(pr->state, sizeof pr->state, "%s", state ? state : "");
      pr->bad_batch = pe->batch;
      if (pe->what == W_SESSION_NEW && state && !strcmp(state, "23505") && pe->op == 0)
        xgr_error_set(&pr->err, XGR_ECONFLICT, NULL, "session %s/%" PRIu64 " exists already; the batch was not applied",
                      op->owner, op->root);
      else xgr__pg_res_error(g, r, w, "a write failed", &pr->err);
    } else if (st == PGRES_TUPLES_OK && pr->ok) {
      if (pe->what == W_NEXTPID && PQntuples(r) == 1) {
        *op->u.next_pid = get_u64(r, 0, 0);
      } else if (pe->what == W_REGISTER && PQntuples(r) >= 1) {
        xgr_store_doc *d = op->u.doc;
        d->version = (uint32_t)get_i64(r, 0, 0);
        free(d->owner);
        d->owner = get_text(r, 0, 1);
        d->registered_at = get_i64(r, 0, 2);
      } else if (pe->what == W_NEXT_ITERS) {
        bulk_procs *bp = ps->bp;
        for (int row = 0; row < PQntuples(r); row++) {
          uint64_t ord = get_u64(r, row, 0);
          if (ord >= 1 && ord <= bp->nsess) bp->next[ord - 1] = get_u64(r, row, 1);
        }
      } else if (pe->what == W_MARK && PQntuples(r) == 0) {
        xgr_error_set(&b->err, XGR_ECONFLICT, NULL, "already used (recorded until it expires)");
        b->rc = XGR_ECONFLICT;
        if (pe->op != 0) {   /* earlier entries of the batch were written: it must not commit */
          pr->ok = false;
          snprintf(pr->state, sizeof pr->state, "23505");
          pr->bad_batch = pe->batch;
          pr->err = b->err;
        }
      }
    } else if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_PIPELINE_ABORTED &&
               st != PGRES_FATAL_ERROR) {
      if (pr->ok) {
        pr->ok = false;
        pr->bad_batch = pe->batch;
        xgr_error_set(&pr->err, XGR_EIO, NULL, "store %s: unexpected result %s", g->name, PQresStatus(st));
      }
    }
    PQclear(r);
    r = PQgetResult(w);   /* the end of this statement's results */
    while (r) {
      PQclear(r);
      r = PQgetResult(w);
    }
  }
  PGresult *r = PQgetResult(w);   /* the sync point */
  if (!r || PQresultStatus(r) != PGRES_PIPELINE_SYNC) {
    if (pr->ok) {
      pr->ok = false;
      pr->conn_lost = true;
      xgr__pg_res_error(g, r, w, "the pipeline ended early", &pr->err);
    }
  }
  PQclear(r);
}

/* Run one statement without parameters through the pipeline (BEGIN, COMMIT, ROLLBACK) and wait
 * for its sync point. 0 or an error. */
static int pipe_simple(pgstore *g, PGconn *w, const char *sql, xgr_error *err) {
  if (!PQsendQueryParams(w, sql, 0, NULL, NULL, NULL, NULL, 0) || !PQpipelineSync(w))
    return xgr__pg_res_error(g, NULL, w, sql, err);
  int rc = 0;
  PGresult *r = PQgetResult(w);
  if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) rc = xgr__pg_res_error(g, r, w, sql, err);
  /* a COMMIT of a transaction the server had aborted succeeds with the tag ROLLBACK: nothing of
   * it was made, which must not be taken for a commit */
  else if (!strcmp(sql, "COMMIT") && strcmp(PQcmdStatus(r), "COMMIT"))
    rc = xgr_error_set(err, XGR_EIO, NULL, "the server rolled the transaction back at its COMMIT (%s)", PQcmdStatus(r));
  if (r) {
    PQclear(r);
    while ((r = PQgetResult(w))) PQclear(r);   /* the end of the statement's results */
    r = PQgetResult(w);                         /* the sync point */
    if ((!r || PQresultStatus(r) != PGRES_PIPELINE_SYNC) && !rc) rc = xgr__pg_res_error(g, r, w, sql, err);
  }
  PQclear(r);
  if (!rc && PQstatus(w) == CONNECTION_BAD) rc = xgr__pg_res_error(g, NULL, w, sql, err);
  return rc;
}

/* Cluster: the group's first statement checks that this node still holds every session the group
 * writes at the epoch it claimed (xgr_lease_fence, share-locking the rows); a failure is put on
 * batch 0 like a failing bulk statement, so the group is applied again one batch at a time and
 * only the batches of lost sessions fail (XGR_ELEASE). */
static void send_fence(pgstore *g, PGconn *w, pipe_state *ps, xgr_store_changes **list, size_t n) {
  char *arr[4] = {0};
  if (!xgr__pgc_fence(g->cl, list, n, arr)) return;
  const char *v[4] = {arr[0], arr[1], arr[2], arr[3]};
  if (!PQsendQueryParams(w, "SELECT xgr_lease_fence($1::text[], $2::numeric[], $3::bigint[], $4)", 4, NULL, v,
                         NULL, NULL, 0))
    ps->send_failed = true;
  for (int i = 0; i < 4; i++) free(arr[i]);
  if (ps->n == ps->cap) {
    ps->cap = ps->cap ? ps->cap * 2 : 64;
    ps->p = xgr__xrealloc(ps->p, ps->cap * sizeof *ps->p);
  }
  ps->p[ps->n++] = (pending){0, 0, W_PLAIN};
}

/* BEGIN and the statements of list[0..n) in one pipeline, then the results; then the process and
 * history rows of a bulk group by COPY (new process rows straight into proc_rt when direct). */
static void attempt(pgstore *g, PGconn *w, copybufs *cb, xgr_store_changes **list, size_t n, int64_t now, bool direct,
                    bool bump, pipe_result *pr) {
  bulk_procs bp = {.direct = direct};
  pipe_state ps = {.bp = &bp};
  xgr_buf *copy = &cb->copy;
  assert(!copy->len);
  pr->direct_conflict = false;
  for (size_t i = 0; i < n; i++) {
    list[i]->rc = 0;
    xgr_error_clear(&list[i]->err);
  }
  pr->xid[0] = 0;
  /* the server life of w (read when w was set up: a connection lives within one, SERVER_LIFE) and
   * the transaction's id, for settling a COMMIT whose answer is lost (settle_commit) */
  snprintf(pr->boot, sizeof pr->boot, "%s", xgr__pg_life_of(g, w));
  if (!PQsendQueryParams(w, "BEGIN", 0, NULL, NULL, NULL, NULL, 0)) ps.send_failed = true;
  if (!ps.send_failed && !PQsendQueryParams(w, "SELECT txid_current()", 0, NULL, NULL, NULL, NULL, 0))
    ps.send_failed = true;
  if (g->cl) send_fence(g, w, &ps, list, n);
  bool bulk = xgr__pg_bulk_ok(list, n);
  if (bulk) {
    xgr__pg_send_bulk(g, w, &ps, list, n, now, copy, &bp, bump);
  } else {
    for (size_t i = 0; i < n && !ps.send_failed; i++)
      for (size_t k = 0; k < list[i]->n; k++) xgr__pg_send_op(g, w, &ps, i, k, &list[i]->ops[k], now);
  }
  if (ps.send_failed || !PQpipelineSync(w)) {
    pr->ok = false;
    pr->conn_lost = true;
    pr->state[0] = 0;
    xgr__pg_res_error(g, NULL, w, "cannot send to PostgreSQL", &pr->err);
    goto out;
  }
  /* the BEGIN's result comes first */
  PGresult *r = PQgetResult(w);
  if (!r) {
    pr->ok = false;
    pr->conn_lost = true;
    pr->state[0] = 0;
    xgr__pg_res_error(g, NULL, w, "cannot begin a transaction", &pr->err);
    goto out;
  }
  bool began = PQresultStatus(r) == PGRES_COMMAND_OK;
  xgr_error berr;
  if (!began) xgr__pg_res_error(g, r, w, "cannot begin a transaction", &berr);
  PQclear(r);
  while ((r = PQgetResult(w))) PQclear(r);
  r = PQgetResult(w);   /* txid_current() */
  if (r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) == 1)
    snprintf(pr->xid, sizeof pr->xid, "%s", PQgetvalue(r, 0, 0));
  if (r) {
    PQclear(r);
    while ((r = PQgetResult(w))) PQclear(r);
  }
  read_pipeline(g, w, &ps, list, pr);
  if (!began) {   /* nobody's fault: the store stops */
    pr->ok = false;
    pr->state[0] = 0;
    pr->bad_batch = n;
    pr->err = berr;
  }
  if (pr->ok && (copy->len || bp.n)) xgr__pg_copy_rows(g, w, &bp, now, cb, pr);
out:
  free(ps.p);
  xgr__pg_copybufs_empty(cb, KEEP_BUF_MAX);
  free(bp.rows);
  free(bp.sess);
  free(bp.next);
}

/* A failure that is nobody's fault and goes away when the transaction is tried again: the server
 * chose it as the victim of a deadlock (its locks crossed another node's, e.g. that node's
 * retention deleting rows of this node's sessions), or a serialization failure. */
static bool transient(const char *state) { return !strcmp(state, "40P01") || !strcmp(state, "40001"); }

/* How often a group is tried again after a transient failure, the first wait (doubled each time). */
#define TRANSIENT_TRIES 5
#define TRANSIENT_WAIT_MS 5

/* attempt(), and again after a rollback while it fails transiently, at most TRANSIENT_TRIES more
 * times (xgr_store_stats.group_retries counts them). Returns 0, or -1 when a ROLLBACK failed
 * (*err; the caller fails the group). */
static int attempt_retrying(pgstore *g, PGconn *w, copybufs *cb, xgr_store_changes **list, size_t n, int64_t now,
                            bool direct, bool bump, pipe_result *pr, xgr_error *err) {
  for (int tries = 0;; tries++) {
    attempt(g, w, cb, list, n, now, direct, bump, pr);
    if (pr->ok || pr->conn_lost || !transient(pr->state) || tries >= TRANSIENT_TRIES) return 0;
    if (pipe_simple(g, w, "ROLLBACK", err)) return -1;
    pthread_mutex_lock(&g->base.mu);
    g->base.stats.group_retries++;
    pthread_mutex_unlock(&g->base.mu);
    long ms = (long)TRANSIENT_WAIT_MS << tries;
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
  }
}

/* How long the writer tries to connect again (a restarting database takes a moment to accept
 * connections), waiting 50 ms, then twice as long each time up to 2 s. */
#define RECONNECT_FOR_MS 20000

/* Make the writer connection w usable again when it was lost (a database restart, a cut while
 * the writer was idle, or in a group before its COMMIT was sent: nothing of that group was
 * committed); the batches wait meanwhile. false with *err when it cannot be made again within
 * RECONNECT_FOR_MS; the caller fails the store. */
static bool writer_ready(pgstore *g, PGconn *w, xgr_error *err) {
  if (PQstatus(w) == CONNECTION_OK) return true;
  if (PQpipelineStatus(w) != PQ_PIPELINE_OFF) PQexitPipelineMode(w);
  int64_t until = xgr__mono_ms() + RECONNECT_FOR_MS;
  long wait_ms = 50;
  for (;;) {
    PQreset(w);
    if (PQstatus(w) == CONNECTION_OK) break;
    if (xgr__mono_ms() + wait_ms > until) {
      xgr__pg_res_error(g, NULL, w, "the writer's connection is lost and cannot be made again", err);
      return false;
    }
    nanosleep(&(struct timespec){wait_ms / 1000, (wait_ms % 1000) * 1000000L}, NULL);
    wait_ms = wait_ms * 2 > 2000 ? 2000 : wait_ms * 2;
  }
  if (xgr__pg_setup_writer(g, w, err)) return false;
  pthread_mutex_lock(&g->base.mu);
  g->base.stats.writer_reconnects++;
  pthread_mutex_unlock(&g->base.mu);
  return true;
}

/* The store can no longer write: record why, fail every batch in list. */
static void fail_all(pgstore *g, xgr_store_changes **list, size_t n, const xgr_error *why) {
  xgr__store_set_failed(&g->base, why->code ? why->code : XGR_EIO, why->message);
  xgr_error ferr;
  xgr_store_failed(&g->base, &ferr);
  for (size_t i = 0; i < n; i++) {
    list[i]->rc = ferr.code;
    list[i]->err = ferr;
  }
}

static void count_tx(pgstore *g, size_t n) {
  pthread_mutex_lock(&g->base.mu);
  g->base.stats.transactions++;
  if (n > g->base.stats.max_batches_per_tx) g->base.stats.max_batches_per_tx = n;
  pthread_mutex_unlock(&g->base.mu);
}

/* After a COMMIT whose answer was lost with the connection: was transaction xid (of the server
 * process old_pid, in the server's life boot: the one the lost connection had read when it was
 * set up, copied before the reconnect reads the new one) made? The writer connects again (writer_ready)
 * and asks txid_status. A transaction still in progress belongs to a server process that has not
 * noticed the lost connection yet (a cut network): that process is ended (it is this writer's own
 * and can do nothing more), which aborts it, and the server is asked again.
 *
 * Across a server restart or crash recovery an xid proves nothing: a transaction that had written
 * no WAL to disk before the crash leaves no trace, the recovered server hands its xid out again,
 * and txid_status then answers for another node's transaction ("committed" for a group that was
 * lost: an acknowledged start with no session row, seed 1321 of the fault suite). So when the
 * server's life (SERVER_LIFE) changed, the outcome is not known.
 *
 * 1: committed; 0: aborted; -1: not known, *err says why (the caller fails the store). */
static int settle_commit(pgstore *g, PGconn *w, const char *xid, const char *boot, int old_pid, xgr_error *err) {
  if (!writer_ready(g, w, err)) return -1;
  char pid[16];
  snprintf(pid, sizeof pid, "%d", old_pid);
  for (int tries = 0; tries < 50; tries++) {
    const char *v[2] = {xid, boot};
    PGresult *r = PQexecParams(w, "SELECT txid_status($1::bigint), " SERVER_LIFE " = $2", 2, NULL, v, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) != 2 || PQgetisnull(r, 0, 0)) {
      xgr__pg_res_error(g, r, w, "a COMMIT's answer was lost and its outcome cannot be asked for", err);
      PQclear(r);
      return -1;
    }
    const char *st = PQgetvalue(r, 0, 0);
    bool same_life = !strcmp(PQgetvalue(r, 0, 1), "t");
    int made = !strcmp(st, "committed") ? 1 : !strcmp(st, "aborted") ? 0 : !strcmp(st, "in progress") ? 2 : -1;
    PQclear(r);
    if (!same_life) {
      xgr_error_set(err, XGR_EIO, NULL, "store %s: a COMMIT's answer was lost and the database server restarted or "
                    "recovered from a crash since: whether it was made is not known", g->name);
      return -1;
    }
    if (made == -1) {
      xgr_error_set(err, XGR_EIO, NULL, "store %s: a COMMIT's answer was lost and the server does not know its "
                    "transaction %s (\"%s\")", g->name, xid, st);
      return -1;
    }
    if (made != 2) return made;
    const char *pv[1] = {pid};
    PQclear(PQexecParams(w, "SELECT pg_terminate_backend($1::int)", 1, NULL, pv, NULL, NULL, 0));
    nanosleep(&(struct timespec){0, 20000000}, NULL);
  }
  xgr_error_set(err, XGR_EIO, NULL, "store %s: a COMMIT's answer was lost and its transaction %s stays in progress",
                g->name, xid);
  return -1;
}

/* One group on connection w: all batches in one transaction, or (after a batch's own fault) one
 * each. bump: the group's transaction raises its owners' counters (false: commit_split raised
 * them before, in a transaction of their own). may_redo: the group may be done again once from
 * the start, on a new connection, when the server proves its COMMIT was not made (below). */
static void commit_group_at(pgstore *g, PGconn *w, copybufs *cb, xgr_store_changes **list, size_t n, bool bump,
                            bool may_redo) {
  xgr_error err;
  int64_t now = xgr__store_now_ms(&g->base);
  if (xgr_store_failed(&g->base, &err)) {
    for (size_t i = 0; i < n; i++) {
      list[i]->rc = err.code;
      list[i]->err = err;
    }
    return;
  }
  pipe_result pr;
  for (int tries = 0;; tries++) {
    if (!writer_ready(g, w, &err)) {
      fail_all(g, list, n, &err);
      return;
    }
    if (!PQenterPipelineMode(w)) {
      xgr__pg_res_error(g, NULL, w, "cannot enter pipeline mode", &err);
      fail_all(g, list, n, &err);
      return;
    }
    if (attempt_retrying(g, w, cb, list, n, now, true, bump, &pr, &err)) {
      fail_all(g, list, n, &err);
      PQexitPipelineMode(w);
      return;
    }
    /* the connection was found lost before any COMMIT: once more on a new one */
    if (pr.ok || PQstatus(w) == CONNECTION_OK || tries) break;
  }
  if (!pr.ok && pr.direct_conflict) {   /* a "new" process row existed: the group again, all upserts */
    if (pipe_simple(g, w, "ROLLBACK", &err)) {
      fail_all(g, list, n, &err);
      PQexitPipelineMode(w);
      return;
    }
    pthread_mutex_lock(&g->base.mu);
    g->base.stats.group_redos++;
    pthread_mutex_unlock(&g->base.mu);
    if (attempt_retrying(g, w, cb, list, n, now, false, bump, &pr, &err)) {
      fail_all(g, list, n, &err);
      PQexitPipelineMode(w);
      return;
    }
  }
  if (pr.ok) {
    int old_pid = PQbackendPID(w);
    int crc = pipe_simple(g, w, "COMMIT", &err);
    PQexitPipelineMode(w);
    if (!crc) {
      count_tx(g, n);
      return;
    }
    /* the connection broke around the COMMIT: whether it was made, the server knows */
    int made = PQstatus(w) != CONNECTION_OK && pr.xid[0] && pr.boot[0]
                   ? settle_commit(g, w, pr.xid, pr.boot, old_pid, &err) : -1;
    if (made == 1) {
      count_tx(g, n);
    } else if (made == 0 && may_redo) {
      /* not made (the server ended the session first: a writer stalled before its COMMIT, or
       * idle in the transaction past idle_tx_ms; a restarted server answers "not known"): the
       * group again on the new connection, where the fence refuses what this node lost meanwhile */
      commit_group_at(g, w, cb, list, n, bump, false);
    } else {
      fail_all(g, list, n, &err);
    }
    return;
  }
  if (pr.conn_lost || !state_is_batch_fault(pr.state) || pr.bad_batch >= n) {   /* the store stops */
    pipe_simple(g, w, "ROLLBACK", &err);
    fail_all(g, list, n, &pr.err);
    PQexitPipelineMode(w);
    return;
  }
  if (pipe_simple(g, w, "ROLLBACK", &err)) {
    fail_all(g, list, n, &err);
    PQexitPipelineMode(w);
    return;
  }
  /* a batch's own fault: apply each batch in its own transaction so only the bad ones fail */
  for (size_t i = 0; i < n; i++) {
    if (attempt_retrying(g, w, cb, list + i, 1, now, false, true, &pr, &err)) {
      fail_all(g, list + i, n - i, &err);
      break;
    }
    if (pr.ok) {
      if (pipe_simple(g, w, "COMMIT", &err)) {
        fail_all(g, list + i, n - i, &err);
        break;
      }
      count_tx(g, 1);
      continue;
    }
    if (pipe_simple(g, w, "ROLLBACK", &err)) {
      fail_all(g, list + i, n - i, &err);
      break;
    }
    if (pr.conn_lost || !state_is_batch_fault(pr.state)) {
      fail_all(g, list + i, n - i, &pr.err);
      break;
    }
    list[i]->err = pr.err;   /* this batch fails alone */
    list[i]->rc = pr.err.code ? pr.err.code : XGR_ECONFLICT;
  }
  PQexitPipelineMode(w);
}

static void commit_group(pgstore *g, PGconn *w, copybufs *cb, xgr_store_changes **list, size_t n, bool bump) {
  commit_group_at(g, w, cb, list, n, bump, true);
}

/* ---- the writer thread ---------------------------------------------------------------------------- */

/* A group of at least this many batches is spread over the writer's connections (commit_split);
 * a smaller one goes through g->w alone, in one transaction, as its latency matters more. */
#define SPLIT_MIN_BATCHES 64

/* Which of nparts connections takes batch b: the one of its sessions' key, or -1 when its
 * entries name sessions of different parts (the group is then not split). */
static int part_of(const xgr_store_changes *b, size_t nparts) {
  int part = 0;
  bool any = false;
  const store_op *last = NULL;   /* the last op hashed: most ops of a batch name its one session */
  for (size_t k = 0; k < b->n; k++) {
    const store_op *op = &b->ops[k];
    if (op->kind != OP_SESSION && op->kind != OP_STATE && op->kind != OP_PROC && op->kind != OP_HIST &&
        op->kind != OP_SCOPE && op->kind != OP_AUDIT && op->kind != OP_GRANT)
      continue;
    if (last && op->root == last->root && (op->owner == last->owner || !strcmp(op->owner, last->owner))) continue;
    last = op;
    uint64_t x = op->root * 0x9E3779B97F4A7C15ULL;
    for (const char *c = op->owner; *c; c++) x = (x ^ (unsigned char)*c) * 0x100000001b3ULL;
    int p = (int)(xgr__mix64(x) % nparts);
    if (any && p != part) return -1;
    part = p;
    any = true;
  }
  return part;
}

/* The helper's thread: commit each part handed to it on its own connection. */
void *xgr__pg_lane_main(void *arg) {
  lane *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->list && !l->stop) pthread_cond_wait(&l->cv, &l->mu);
    if (!l->list) break;
    xgr_store_changes **list = l->list;
    size_t n = l->n;
    pthread_mutex_unlock(&l->mu);
    commit_group(l->g, l->w, &l->bufs, list, n, false);
    pthread_mutex_lock(&l->mu);
    l->list = NULL;
    pthread_cond_broadcast(&l->cv);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

/* Commit list[0..n) as one group: through g->w alone, or — a large group of the bulk path whose
 * batches each write the sessions of one part — divided by session key over g->w and the helper
 * connections, each part in its own transaction at the same time, so the database works on
 * several cores. A session's batches keep their order (they are in one part, in group order),
 * and the next group starts after every part has committed. */
static void commit_split(pgstore *g, xgr_store_changes **list, size_t n) {
  size_t nparts = g->nlanes + 1;
  xgr_error err;
  if (nparts < 2 || n < SPLIT_MIN_BATCHES || !xgr__pg_bulk_ok(list, n) || xgr_store_failed(&g->base, &err)) {
    commit_group(g, g->w, &g->bufs, list, n, true);
    return;
  }
  int *part = xgr__xmalloc(n * sizeof *part);
  size_t count[XGR_STORE_PG_WRITERS_MAX] = {0};
  for (size_t i = 0; i < n; i++) {
    part[i] = part_of(list[i], nparts);
    if (part[i] < 0) {   /* a batch across parts: the whole group on one connection */
      free(part);
      commit_group(g, g->w, &g->bufs, list, n, true);
      return;
    }
    count[part[i]]++;
  }
  if (xgr__pg_raise_owners(g, list, n, &err)) {
    free(part);
    fail_all(g, list, n, &err);
    return;
  }
  /* the parts, each in group order, one after the other in sorted */
  xgr_store_changes **sorted = xgr__xmalloc(n * sizeof *sorted);
  size_t start[XGR_STORE_PG_WRITERS_MAX], at[XGR_STORE_PG_WRITERS_MAX];
  for (size_t p = 0, sum = 0; p < nparts; p++) {
    start[p] = at[p] = sum;
    sum += count[p];
  }
  for (size_t i = 0; i < n; i++) sorted[at[part[i]]++] = list[i];
  for (size_t p = 1; p < nparts; p++) {
    if (!count[p]) continue;
    lane *l = &g->lanes[p - 1];
    pthread_mutex_lock(&l->mu);
    l->list = sorted + start[p];
    l->n = count[p];
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
  }
  if (count[0]) commit_group(g, g->w, &g->bufs, sorted, count[0], false);
  for (size_t p = 1; p < nparts; p++) {
    lane *l = &g->lanes[p - 1];
    pthread_mutex_lock(&l->mu);
    while (l->list) pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
  }
  free(sorted);
  free(part);
}

/* The writer's commit step (store_impl.h). */
void xgr__pg_commit(void *ctx, xgr_store_changes **list, size_t n) {
  pgstore *g = ctx;
  if (!g->cl) {
    commit_split(g, list, n);
  } else {   /* cluster: batches of sessions this node no longer holds fail without a round trip */
    size_t k = xgr__pgc_prefilter(g->cl, list, n);
    if (k) commit_split(g, list, k);
    xgr__pgc_after(g->cl, list, n);
  }
}
