/* sqlite_write.c — the SQLite store's writes, on the writer thread: the writer's statements, a
 * batch's entries applied in order, a group of batches committed in one transaction (BEGIN
 * IMMEDIATE ... COMMIT; a batch that violates a constraint is split off and fails alone, an I/O
 * error fails the store), and retention in small delete batches between commits.
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

const char *const xgr__sq_stmt_sql[S_COUNT] = {
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    [S_SESSION] = "INSERT INTO sessions(owner, root_pid, registry, ostc_id, ostc_hash, status, killed_at, created_at,"
                  " finished_at, next_iter, paused, next_group, max_total_gas, bundle_hash)"
                  " VALUES(:owner, :root_pid, :registry, :ostc_id, :ostc_hash, :status, :killed_at, :created_at,"
                  " :finished_at, :next_iter, :paused, :next_group, :max_total_gas, :bundle_hash)"
                  " ON CONFLICT(owner, root_pid) DO UPDATE SET registry=excluded.registry, ostc_id=excluded.ostc_id,"
                  " ostc_hash=excluded.ostc_hash, status=excluded.status, killed_at=excluded.killed_at,"
                  " finished_at=excluded.finished_at, next_iter=excluded.next_iter, paused=excluded.paused,"
                  " next_group=excluded.next_group",
    [S_SESSION_NEW] = "INSERT INTO sessions(owner, root_pid, registry, ostc_id, ostc_hash, status, killed_at,"
                      " created_at, finished_at, next_iter, paused, next_group, max_total_gas, bundle_hash)"
                      " VALUES(:owner, :root_pid, :registry, :ostc_id, :ostc_hash, :status, :killed_at, :created_at,"
                      " :finished_at, :next_iter, :paused, :next_group, :max_total_gas, :bundle_hash)"
                      " ON CONFLICT(owner, root_pid) DO NOTHING",
    [S_STATE] = "UPDATE sessions SET status=:status, killed_at=:killed_at, next_iter=:next_iter,"
                " next_group=:next_group, paused=:paused, wake_due=:wake_due,"
                " stored_bytes=COALESCE(:stored_bytes, stored_bytes),"
                " finished_at=CASE WHEN :status <> 0 AND status = 0 THEN :now ELSE finished_at END"
                " WHERE owner=:owner AND root_pid=:root_pid",
    [S_SCOPES_DEL] = "DELETE FROM proc_scopes WHERE owner=:owner AND root_pid=:root_pid",
    [S_PROC] = "INSERT INTO proc_rt(owner, root_pid, iter, parent_iter, step, step_id, status, paused, valid,"
               " abort_reason, join_group, join_from_group, next_wake_at, created_at, started_at, finished_at,"
               " payload, error, join_state, terminal_at)"
               " VALUES(:owner, :root_pid, :iter, :parent_iter, :step, :step_id, :status, :paused, :valid,"
               " :abort_reason, :join_group, :join_from_group, :next_wake_at, :created_at, :started_at,"
               " :finished_at, :payload, :error, :join_state, :terminal_at)"
               " ON CONFLICT(owner, root_pid, iter) DO UPDATE SET parent_iter=excluded.parent_iter,"
               " step=excluded.step, step_id=excluded.step_id, status=excluded.status, paused=excluded.paused,"
               " valid=excluded.valid, abort_reason=excluded.abort_reason, join_group=excluded.join_group,"
               " join_from_group=excluded.join_from_group, next_wake_at=excluded.next_wake_at,"
               " created_at=excluded.created_at, started_at=excluded.started_at, finished_at=excluded.finished_at,"
               " payload=excluded.payload, error=excluded.error, join_state=excluded.join_state,"
               " terminal_at=excluded.terminal_at",
    [S_HIST] = "INSERT INTO proc_steps(owner, root_pid, iter, parent_iter, step, step_id, status, valid,"
               " abort_reason, at, finished_at, error, payload, recorded_at, api)"
               " VALUES(:owner, :root_pid, :iter, :parent_iter, :step, :step_id, :status, :valid, :abort_reason,"
               " :at, :finished_at, :error, :payload, :recorded_at, :api)",
    [S_SCOPE] = "INSERT OR IGNORE INTO proc_scopes(owner, root_pid, grp) VALUES(:owner,:root_pid,:grp)",
    [S_RM_PROCS] = "DELETE FROM proc_rt WHERE owner=:owner AND root_pid=:root_pid",
    [S_RM_SESSION] = "DELETE FROM sessions WHERE owner=:owner AND root_pid=:root_pid",
    /* a session started with rootPid R: the owner's next expected rootPid becomes at least R + 1 */
    [S_OWNER_BUMP] = "INSERT INTO owners(owner, next_root) VALUES(:owner, :next_root) ON CONFLICT(owner)"
                     " DO UPDATE SET next_root = excluded.next_root WHERE next_root < excluded.next_root",
    /* (:second is rootPid 2, encoded; a counter at 2^64-1 stays there: no row comes back) */
    [S_NEXTPID] = "INSERT INTO owners(owner, next_root) VALUES(:owner, :second) ON CONFLICT(owner)"
                  " DO UPDATE SET next_root = next_root + 1 WHERE next_root < 9223372036854775807"
                  " RETURNING next_root - 1",
    /* a mark is inserted, or replaces one that expired; no change: used */
    [S_MARK] = "INSERT INTO marks(key, expires_at) VALUES(:key, :expires_at) ON CONFLICT(key) DO UPDATE SET"
               " expires_at = excluded.expires_at WHERE marks.expires_at <= :now",
    [S_WAKE_OUT] = "INSERT OR IGNORE INTO outbox(id, from_owner, from_root, to_owner, to_root, step, caller, rule,"
                   " payload, created_at, from_iter, from_step) VALUES(:id, :from_owner, :from_root, :to_owner, :to_root,"
                   " :step, :caller, :rule, :payload, :created_at, :from_iter, :from_step)",
    [S_WAKE_DONE] = "DELETE FROM outbox WHERE id = :id AND refused IS NULL",
    [S_WAKE_REFUSE] = "UPDATE outbox SET refused = :reason, refused_at = :now WHERE id = :id AND refused IS NULL",
    [S_GC_REFUSED] = "DELETE FROM outbox WHERE rowid IN (SELECT rowid FROM outbox WHERE refused IS NOT NULL AND"
                     " refused_at <= :before LIMIT :limit)",
    [S_RM_REFUSED] = "DELETE FROM outbox WHERE from_owner = :owner AND from_root = :root_pid AND refused IS NOT NULL",
    [S_PIN] = "UPDATE sessions SET ostc_id=:ostc_id, ostc_hash=:ostc_hash, bundle_hash=:bundle_hash"
              " WHERE owner=:owner AND root_pid=:root_pid",
    [S_AUDIT] = "INSERT INTO session_audit(owner, root_pid, session_at, kind, actor, node, permit, detail, recorded_at)"
                 " VALUES(:owner, :root_pid, :session_at, :kind, :actor, :node, :permit, :detail, :now)",
    [S_GC_AUDIT] = "DELETE FROM session_audit WHERE rowid IN (SELECT rowid FROM session_audit WHERE recorded_at <= :before"
                   " LIMIT :limit)",
    [S_FORKED] = "UPDATE sessions SET forked_from = :from WHERE owner = :owner AND root_pid = :root_pid",
    [S_GRANT] = "INSERT INTO session_grants(owner, root_pid, grantee, rights, expires_at, rule, step, enc_dek,"
                " created_by, created_at) VALUES(:owner, :root_pid, :grantee, :rights, :expires_at, :rule, :step,"
                " :enc_dek, :created_by, :now) ON CONFLICT(owner, root_pid, grantee) DO UPDATE SET"
                " rights=excluded.rights, expires_at=excluded.expires_at, rule=excluded.rule, step=excluded.step,"
                " enc_dek=excluded.enc_dek, created_by=excluded.created_by, created_at=excluded.created_at",
    [S_GRANT_DEL] = "DELETE FROM session_grants WHERE owner=:owner AND root_pid=:root_pid AND grantee=:grantee",
    [S_RM_GRANTS] = "DELETE FROM session_grants WHERE owner=:owner AND root_pid=:root_pid",
    /* grants go with their session's row (retention deleted it, S_GC_SESS) */
    [S_GC_GRANTS] = "DELETE FROM session_grants WHERE id IN (SELECT g.id FROM session_grants g WHERE NOT EXISTS"
                    " (SELECT 1 FROM sessions s WHERE s.owner = g.owner AND s.root_pid = g.root_pid) LIMIT :limit)",
    /* finished batch operations past batch_secs (finished_at >= created_at: the index's range) */
    [S_GC_BOPS] = "DELETE FROM batch_ops WHERE id IN (SELECT id FROM batch_ops WHERE state IN ('done', 'cancelled', 'failed')"
                  " AND created_at <= :before AND finished_at <= :before LIMIT :limit)",
    [S_MARK_GC] = "DELETE FROM marks WHERE key IN (SELECT key FROM marks WHERE expires_at <= :now LIMIT 64)",
    [S_GC_PROCS] = "DELETE FROM proc_rt WHERE (owner, root_pid, iter) IN (SELECT owner, root_pid, iter FROM proc_rt"
                   " WHERE terminal_at IS NOT NULL AND terminal_at <= :before LIMIT :limit)",
    [S_GC_HIST] = "DELETE FROM proc_steps WHERE (owner, root_pid, iter) IN (SELECT owner, root_pid, iter FROM"
                  " proc_steps WHERE recorded_at <= :before LIMIT :limit)",
    [S_GC_SESS] = "DELETE FROM sessions WHERE rowid IN (SELECT rowid FROM sessions WHERE status <> 0 AND"
                  " finished_at <= :before LIMIT :limit)",
    [S_GC_SCOPES] = "DELETE FROM proc_scopes WHERE (owner, root_pid, grp) IN (SELECT s.owner, s.root_pid, s.grp"
                    " FROM proc_scopes s WHERE NOT EXISTS (SELECT 1 FROM proc_rt r WHERE r.owner = s.owner AND"
                    " r.root_pid = s.root_pid AND r.join_group = s.grp AND r.status < 2) LIMIT :limit)",
};

/* ---- applying batches (writer thread) -------------------------------------------------------- */

static int apply_register(sqstore *q, xgr_store_doc *d) {
  const char *table = d->kind == XGR_REG_RULE ? "rules" : "orchestrations";
  char sql[256];
  pstmt p = {0};   /* prepared here: registrations are rare */
  snprintf(sql, sizeof sql,
           "SELECT version, owner, registered_at FROM %s WHERE id=:id AND hash=:hash ORDER BY version LIMIT 1", table);
  int rc = sqlite3_prepare_v2(q->w, sql, -1, &p.s, NULL);
  if (rc) return rc;
  sqlite3_stmt *s = p.s;
  bind_text(&p, ":id", d->id);
  bind_text(&p, ":hash", d->hash);
  rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {   /* the same bytes again: that version */
    d->version = (uint32_t)sqlite3_column_int64(s, 0);
    free(d->owner);
    d->owner = col_text(s, 1);
    d->registered_at = sqlite3_column_int64(s, 2);
    sqlite3_finalize(s);
    return SQLITE_OK;
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) return rc;
  snprintf(sql, sizeof sql,
           "INSERT INTO %s(id, version, hash, owner, registered_at, content) VALUES(:id,"
           " (SELECT COALESCE(MAX(version), 0) + 1 FROM %s WHERE id=:id), :hash, :owner, :registered_at, :content)"
           " RETURNING version", table, table);
  p = (pstmt){0};
  rc = sqlite3_prepare_v2(q->w, sql, -1, &p.s, NULL);
  if (rc) return rc;
  s = p.s;
  bind_text(&p, ":id", d->id);
  bind_text(&p, ":hash", d->hash);
  bind_text(&p, ":owner", d->owner);
  bind_i64(&p, ":registered_at", d->registered_at);
  bind_blob(&p, ":content", d->content, (int)d->len);
  rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    d->version = (uint32_t)sqlite3_column_int64(s, 0);
    rc = sqlite3_step(s);
  }
  sqlite3_finalize(s);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* apply_op: an if_absent session row found its session already there (nothing was written). */
#define RC_EXISTS 0x7fff0001

static int apply_op(sqstore *q, store_op *op, int64_t now) {
  pstmt *s;
  switch (op->kind) {
    case OP_SESSION: {
      const xgr_store_session *x = &op->u.session;
      s = &q->stmt[op->if_absent ? S_SESSION_NEW : S_SESSION];
      bind_text(s, ":owner", x->owner);
      bind_root(s, ":root_pid", x->root_pid);
      bind_text(s, ":registry", x->registry);
      bind_text(s, ":ostc_id", x->ostc_id);
      bind_text(s, ":ostc_hash", x->ostc_hash);
      bind_i64(s, ":status", x->status);
      bind_i64(s, ":killed_at", x->killed_at);
      bind_i64(s, ":created_at", x->created_at ? x->created_at : now);
      bind_i64(s, ":finished_at", x->status != XGR_RESULT_RUNNING ? (x->finished_at ? x->finished_at : now) : 0);
      bind_u64(s, ":next_iter", x->next_iter);
      bind_i64(s, ":paused", x->paused);
      bind_i64(s, ":next_group", x->next_group);
      bind_text(s, ":max_total_gas", x->max_total_gas ? x->max_total_gas : "");
      bind_text(s, ":bundle_hash", x->bundle_hash ? x->bundle_hash : "");
      int rc = step_done(s);
      if (rc == SQLITE_OK && op->if_absent && sqlite3_changes(q->w) == 0) return RC_EXISTS;
      if (rc != SQLITE_OK || x->root_pid == UINT64_MAX) return rc;
      s = &q->stmt[S_OWNER_BUMP];
      bind_text(s, ":owner", x->owner);
      bind_root(s, ":next_root", x->root_pid + 1);
      return step_done(s);
    }
    case OP_STATE: {
      s = &q->stmt[S_STATE];
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":root_pid", op->root);
      bind_i64(s, ":status", op->u.state.status);
      bind_i64(s, ":killed_at", op->u.state.killed_at);
      bind_u64(s, ":next_iter", op->u.state.next_iter);
      bind_i64(s, ":next_group", op->u.state.next_group);
      bind_i64(s, ":paused", op->u.state.paused);
      if (op->u.state.due) bind_i64(s, ":wake_due", op->u.state.due);
      else bind_null(s, ":wake_due");
      if (op->u.state.has_bytes) bind_i64(s, ":stored_bytes", (int64_t)(op->u.state.stored_bytes & INT64_MAX));
      else bind_null(s, ":stored_bytes");
      bind_i64(s, ":now", now);
      int rc = step_done(s);
      if (rc || op->u.state.status == XGR_RESULT_RUNNING) return rc;
      s = &q->stmt[S_SCOPES_DEL];   /* killed scopes matter only while the session lives */
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":root_pid", op->root);
      return step_done(s);
    }
    case OP_PROC: {
      const xgr_store_proc *p = &op->u.proc;
      s = &q->stmt[S_PROC];
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":root_pid", op->root);
      bind_u64(s, ":iter", p->iter);
      bind_u64(s, ":parent_iter", p->parent_iter);
      bind_i64(s, ":step", p->step);
      bind_text(s, ":step_id", p->step_id ? p->step_id : "");
      bind_i64(s, ":status", p->status);
      bind_i64(s, ":paused", p->paused);
      bind_i64(s, ":valid", p->valid);
      bind_i64(s, ":abort_reason", p->abort_reason);
      bind_i64(s, ":join_group", p->group);
      bind_i64(s, ":join_from_group", p->from_group);
      bind_i64(s, ":next_wake_at", p->next_wake_at);
      bind_i64(s, ":created_at", p->created_at);
      bind_i64(s, ":started_at", p->started_at);
      bind_i64(s, ":finished_at", p->finished_at);
      bind_text(s, ":payload", p->payload ? p->payload : "{}");
      bind_text(s, ":error", p->error);
      bind_text(s, ":join_state", p->join);
      if (p->status >= XGR_PROC_DONE) bind_i64(s, ":terminal_at", now);
      else bind_null(s, ":terminal_at");
      return step_done(s);
    }
    case OP_HIST: {
      const xgr_store_hist *h = &op->u.hist;
      s = &q->stmt[S_HIST];
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":root_pid", op->root);
      bind_u64(s, ":iter", h->iter);
      bind_u64(s, ":parent_iter", h->parent_iter);
      bind_i64(s, ":step", h->step);
      bind_text(s, ":step_id", h->step_id ? h->step_id : "");
      bind_i64(s, ":status", h->status);
      bind_i64(s, ":valid", h->valid);
      bind_i64(s, ":abort_reason", h->abort_reason);
      bind_i64(s, ":at", h->at);
      bind_i64(s, ":finished_at", h->finished_at);
      bind_text(s, ":error", h->error);
      bind_text(s, ":payload", q->base.cfg.no_history_payload ? NULL : h->payload);
      bind_text(s, ":api", h->api);
      bind_i64(s, ":recorded_at", now);
      return step_done(s);
    }
    case OP_SCOPE:
      s = &q->stmt[S_SCOPE];
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":root_pid", op->root);
      bind_i64(s, ":grp", op->u.group);
      return step_done(s);
    case OP_REMOVE: {
      int rc;
      int ids[] = {S_RM_PROCS, S_SCOPES_DEL, S_RM_SESSION, S_RM_REFUSED, S_RM_GRANTS};
      for (int i = 0; i < 5; i++) {
        s = &q->stmt[ids[i]];
        bind_text(s, ":owner", op->owner);
        bind_root(s, ":root_pid", op->root);
        if ((rc = step_done(s))) return rc;
      }
      return SQLITE_OK;
    }
    case OP_NEXTPID: {
      s = &q->stmt[S_NEXTPID];
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":second", 2);
      *op->u.next_pid = UINT64_MAX;   /* no row: the counter is at 2^64-1 and stays (that rootPid is taken next) */
      int rc = sqlite3_step(s->s);
      if (rc == SQLITE_ROW) {
        *op->u.next_pid = col_root(s->s, 0);
        rc = sqlite3_step(s->s);
      }
      sqlite3_reset(s->s);
      sqlite3_clear_bindings(s->s);
      return rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    case OP_REGISTER:
      return apply_register(q, op->u.doc);
    case OP_WAKE_OUT: {
      const xgr_store_wake *w = &op->u.wake;
      s = &q->stmt[S_WAKE_OUT];
      bind_text(s, ":id", w->id);
      bind_text(s, ":from_owner", w->from_owner);
      bind_root(s, ":from_root", w->from_root);
      bind_text(s, ":to_owner", w->to_owner);
      bind_root(s, ":to_root", w->to_root);
      bind_text(s, ":step", w->step);
      bind_text(s, ":caller", w->caller);
      bind_text(s, ":rule", w->rule);
      bind_text(s, ":payload", w->payload);
      bind_i64(s, ":created_at", now);
      if (w->from_iter) bind_u64(s, ":from_iter", w->from_iter);
      else bind_null(s, ":from_iter");
      bind_text(s, ":from_step", w->from_step);
      return step_done(s);
    }
    case OP_WAKE_DONE:
      s = &q->stmt[op->u.wake.refused ? S_WAKE_REFUSE : S_WAKE_DONE];
      bind_text(s, ":id", op->owner);
      if (op->u.wake.refused) {
        bind_text(s, ":reason", op->u.wake.refused);
        bind_i64(s, ":now", now);
      }
      return step_done(s);
    case OP_FORKED:
      s = &q->stmt[S_FORKED];
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":root_pid", op->root);
      bind_text(s, ":from", op->u.forked_from);
      return step_done(s);
    case OP_PIN:
      s = &q->stmt[S_PIN];
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":root_pid", op->root);
      bind_text(s, ":ostc_id", op->u.pin.ostc_id);
      bind_text(s, ":ostc_hash", op->u.pin.ostc_hash);
      bind_text(s, ":bundle_hash", op->u.pin.bundle_hash);
      return step_done(s);
    case OP_GRANT: {
      const xgr_store_grant *g = &op->u.grant;
      s = &q->stmt[g->rights ? S_GRANT : S_GRANT_DEL];
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":root_pid", op->root);
      bind_text(s, ":grantee", g->grantee);
      if (g->rights) {
        bind_i64(s, ":rights", g->rights);
        bind_i64(s, ":expires_at", g->expires_at);
        bind_text(s, ":rule", g->rule);
        bind_text(s, ":step", g->step);
        bind_text(s, ":enc_dek", g->enc_dek);
        bind_text(s, ":created_by", g->created_by);
        bind_i64(s, ":now", now);
      }
      return step_done(s);
    }
    case OP_AUDIT: {
      const xgr_store_audit *x = &op->u.audit;
      s = &q->stmt[S_AUDIT];
      bind_text(s, ":owner", op->owner);
      bind_root(s, ":root_pid", op->root);
      bind_i64(s, ":session_at", x->session_at);
      bind_text(s, ":kind", x->kind);
      bind_text(s, ":actor", x->actor);
      bind_text(s, ":node", x->node);
      bind_text(s, ":permit", x->permit);
      bind_text(s, ":detail", x->detail);
      bind_i64(s, ":now", now);
      return step_done(s);
    }
    case OP_MARK: {
      s = &q->stmt[S_MARK_GC];
      bind_i64(s, ":now", op->u.mark.now);
      int rc = step_done(s);
      if (rc) return rc;
      s = &q->stmt[S_MARK];
      bind_text(s, ":key", op->owner);
      bind_i64(s, ":expires_at", op->u.mark.expires_at);
      bind_i64(s, ":now", op->u.mark.now);
      rc = step_done(s);
      if (rc == SQLITE_OK && sqlite3_changes(q->w) == 0) return RC_EXISTS;
      return rc;
    }
  }
  return SQLITE_OK;
}

/* Apply every op of b; returns the first SQLite error (and fills b->err) or SQLITE_OK. */
/* Apply b's entries. RC_EXISTS: its first entry, an if_absent session row, found the session
 * there — nothing of b was written, b->rc is XGR_ECONFLICT, and the group goes on without it.
 * (Found later in a batch, earlier entries were written: then it is a constraint failure that
 * rolls the group back like any other batch fault.) */
/* Does state entry st only repeat what the new session row `fresh` (if_absent, written earlier in
 * the same batch and not changed since) holds? Then its UPDATE would change nothing: a running
 * session keeps finished_at, and a new row's wake_due is NULL already. An enqueue's first batch
 * is such a pair (the session row, then the state after its first call). */
static bool state_repeats_row(const store_op *fresh, const store_op *st) {
  const xgr_store_session *x = &fresh->u.session;
  return st->root == fresh->root && st->u.state.status == XGR_RESULT_RUNNING && x->status == XGR_RESULT_RUNNING &&
         !st->u.state.due && st->u.state.killed_at == x->killed_at && st->u.state.next_iter == x->next_iter &&
         st->u.state.next_group == x->next_group && st->u.state.paused == x->paused && !strcmp(st->owner, fresh->owner);
}

static int apply_batch(sqstore *q, xgr_store_changes *b, int64_t now) {
  const store_op *fresh = NULL;   /* the batch's new session row while nothing else changed it */
  for (size_t i = 0; i < b->n; i++) {
    const store_op *op = &b->ops[i];
    if (op->kind == OP_STATE && fresh && state_repeats_row(fresh, op)) {
      fresh = NULL;
      continue;
    }
    if (op->kind == OP_SESSION || op->kind == OP_STATE || op->kind == OP_REMOVE) fresh = NULL;
    int rc = apply_op(q, &b->ops[i], now);
    if (rc == SQLITE_OK && op->kind == OP_SESSION && op->if_absent) fresh = op;
    if (rc == RC_EXISTS && b->ops[i].kind == OP_MARK) {
      xgr_error_set(&b->err, XGR_ECONFLICT, NULL, "already used (recorded until it expires)");
      b->rc = XGR_ECONFLICT;
      return i == 0 ? RC_EXISTS : SQLITE_CONSTRAINT;
    }
    if (rc == RC_EXISTS) {
      xgr_error_set(&b->err, XGR_ECONFLICT, NULL, "session %s/%llu exists already; the batch was not applied",
                    b->ops[i].owner, (unsigned long long)b->ops[i].root);
      b->rc = XGR_ECONFLICT;
      return i == 0 ? RC_EXISTS : SQLITE_CONSTRAINT;
    }
    if (rc != SQLITE_OK) {
      xgr__sq_error(q->w, rc, q->path, "a write failed", &b->err);
      b->rc = b->err.code;
      return rc;
    }
  }
  return SQLITE_OK;
}

/* The store can no longer write: record why, fail every batch in list. */
static void fail_all(sqstore *q, xgr_store_changes **list, size_t n, const xgr_error *why) {
  xgr__store_set_failed(&q->base, why->code ? why->code : XGR_EIO, why->message);
  xgr_error ferr;
  xgr_store_failed(&q->base, &ferr);
  for (size_t i = 0; i < n; i++) {
    list[i]->rc = ferr.code;
    list[i]->err = ferr;
  }
}

static int tx(sqstore *q, int which) { return step_done(&q->stmt[which]); }

/* One group: all batches in one transaction, or (after a batch's own fault) one each. */
void xgr__sq_commit_group(sqstore *q, xgr_store_changes **list, size_t n) {
  xgr_error err;
  int64_t now = xgr__store_now_ms(&q->base);
  if (xgr_store_failed(&q->base, &err)) {
    for (size_t i = 0; i < n; i++) {
      list[i]->rc = err.code;
      list[i]->err = err;
    }
    return;
  }
  int rc = tx(q, S_BEGIN);
  if (rc) {
    xgr__sq_error(q->w, rc, q->path, "cannot begin a transaction", &err);
    fail_all(q, list, n, &err);
    return;
  }
  size_t bad = n;
  for (size_t i = 0; i < n && bad == n; i++) {
    rc = apply_batch(q, list[i], now);
    if (rc && rc != RC_EXISTS) bad = i;
  }
  if (bad == n) {
    rc = tx(q, S_COMMIT);
    if (!rc) {
      pthread_mutex_lock(&q->base.mu);
      q->base.stats.transactions++;
      if (n > q->base.stats.max_batches_per_tx) q->base.stats.max_batches_per_tx = n;
      pthread_mutex_unlock(&q->base.mu);
      return;
    }
    xgr__sq_error(q->w, rc, q->path, "commit failed", &err);
    tx(q, S_ROLLBACK);
    fail_all(q, list, n, &err);
    return;
  }
  tx(q, S_ROLLBACK);
  if (!batch_fault(rc)) {   /* an I/O error: the store stops */
    err = list[bad]->err;
    fail_all(q, list, n, &err);
    return;
  }
  /* a batch's own fault: apply each batch in its own transaction so only the bad ones fail */
  for (size_t i = 0; i < n; i++) {
    list[i]->rc = 0;
    xgr_error_clear(&list[i]->err);
    if ((rc = tx(q, S_BEGIN))) {
      xgr__sq_error(q->w, rc, q->path, "cannot begin a transaction", &err);
      fail_all(q, list + i, n - i, &err);
      return;
    }
    rc = apply_batch(q, list[i], now);
    if (rc == SQLITE_OK) rc = tx(q, S_COMMIT);
    else if (rc == RC_EXISTS || batch_fault(rc)) {
      tx(q, S_ROLLBACK);
      continue;   /* this batch fails alone (its rc/err are set) */
    }
    if (rc) {
      xgr__sq_error(q->w, rc, q->path, "a write failed", &err);
      tx(q, S_ROLLBACK);
      fail_all(q, list + i, n - i, &err);
      return;
    }
    pthread_mutex_lock(&q->base.mu);
    q->base.stats.transactions++;
    pthread_mutex_unlock(&q->base.mu);
  }
}

/* ---- retention (writer thread) ------------------------------------------------------------------ */

/* One retention step: at most gc_batch rows of each kind in one transaction. Returns the rows
 * deleted (*more: some kind hit the limit), or < 0 after an error (in *err). Every step finds its
 * rows through the retention indexes, so a full pass (full) is the same steps until none is left. */
long xgr__sq_gc_step(sqstore *q, bool full, bool *more, xgr_error *err) {
  (void)full;
  const xgr_store_config *c = &q->base.cfg;
  int64_t now = xgr__store_now_ms(&q->base);
  int lim = c->gc_batch;
  long total = 0;
  *more = false;
  int rc = tx(q, S_BEGIN);
  if (rc) return xgr__sq_error(q->w, rc, q->path, "retention: cannot begin", err);
  struct { int stmt; bool on; int64_t cut; } jobs[] = {
      {S_GC_PROCS, true, now - c->ttl_secs * 1000},
      {S_GC_HIST, c->history_secs > 0, now - c->history_secs * 1000},
      {S_GC_SESS, c->history_secs > 0, now - c->history_secs * 1000},
      {S_GC_REFUSED, c->history_secs > 0, now - c->history_secs * 1000},   /* refusal records are history */
      {S_GC_AUDIT, c->history_secs > 0, now - c->history_secs * 1000},     /* so is the audit trail */
      {S_GC_SCOPES, true, 0},
      {S_GC_GRANTS, c->history_secs > 0, 0},   /* grants go with their session's row */
      {S_GC_BOPS, c->batch_secs > 0, now - c->batch_secs * 1000},   /* finished batch operations */
  };
  for (size_t j = 0; j < sizeof jobs / sizeof jobs[0]; j++) {
    if (!jobs[j].on) continue;
    pstmt *s = &q->stmt[jobs[j].stmt];
    if (jobs[j].stmt == S_GC_SCOPES || jobs[j].stmt == S_GC_GRANTS) {
      bind_int(s, ":limit", lim);
    } else {
      bind_i64(s, ":before", jobs[j].cut);
      bind_int(s, ":limit", lim);
    }
    if ((rc = step_done(s))) {
      tx(q, S_ROLLBACK);
      return xgr__sq_error(q->w, rc, q->path, "retention: delete failed", err);
    }
    int ch = sqlite3_changes(q->w);
    total += ch;
    if (ch >= lim) *more = true;
  }
  if ((rc = tx(q, S_COMMIT))) {
    tx(q, S_ROLLBACK);
    return xgr__sq_error(q->w, rc, q->path, "retention: commit failed", err);
  }
  pthread_mutex_lock(&q->base.mu);
  q->base.stats.gc_deleted += (uint64_t)total;
  pthread_mutex_unlock(&q->base.mu);
  return total;
}

