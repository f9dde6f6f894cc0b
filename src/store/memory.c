/* memory.c — the in-memory store: the same tables and rules as the SQLite store (docs/STORE.md)
 * kept in process memory, for runs that need no durability and as the reference the SQLite store
 * is tested against (tests/store: one shared test table runs on both).
 *
 * Layout: one `msess` per (owner, rootPid) that has a session row or any process, history or
 * scope row, in an array sorted by (owner, rootPid); inside it, process rows sorted by iter and
 * history rows sorted by iter (both binary-searched). Registries and owners are small arrays.
 * One mutex guards everything; a batch is applied inside xgr_store_submit, all or nothing (it is
 * checked before anything changes), and signalled before submit returns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "store/store_impl.h"

typedef struct mproc {
  xgr_store_proc r;
  int64_t terminal_at;          /* store clock when it became terminal, 0 while live */
} mproc;

typedef struct msess {
  char *owner;
  uint64_t root;
  bool has_row;
  xgr_store_session row;
  mproc *procs;
  size_t nprocs, capprocs;
  xgr_store_hist *hist;
  size_t nhist, caphist;
  uint32_t *scopes;
  size_t nscopes, capscopes;
  xgr_store_audit *audit;       /* the audit trail, in the order it was written (read sorted by session_at) */
  size_t naudit;
} msess;

typedef struct mowner {
  char *owner;
  uint64_t next;
} mowner;

typedef struct mstore {
  xgr_store base;
  pthread_mutex_t lock;
  msess **sess;
  size_t nsess, capsess;
  mowner *owners;
  size_t nowners;
  xgr_store_doc *docs;
  size_t ndocs;
  int64_t last_gc;
  struct mmark {
    char *key;
    int64_t expires_at;
  } *marks;                     /* single-use marks (xgr_store_mark_once) */
  size_t nmarks;
  xgr_store_wake *outbox;       /* internal wake-ups not yet applied, oldest first */
  size_t noutbox;
  xgr_store_batchop *bops;      /* operations on many sessions, oldest first */
  size_t nbops;
  xgr_store_grant *grants;      /* session_grants, by id ascending */
  size_t ngrants;
  int64_t grant_id;             /* the last id given */
} mstore;

/* Drop the grants of session (owner, root) (its row left); how many went. */
static size_t grants_drop(mstore *m, const char *owner, uint64_t root) {
  size_t k = 0, gone = 0;
  for (size_t i = 0; i < m->ngrants; i++) {
    xgr_store_grant *g = &m->grants[i];
    if (g->root_pid == root && !strcmp(g->owner, owner)) {
      xgr_store_grant_clear(g);
      gone++;
    } else {
      m->grants[k++] = *g;
    }
  }
  m->ngrants = k;
  return gone;
}

/* Write (rights != 0) or revoke grant g (OP_GRANT) at store time now. */
static void grant_apply(mstore *m, const char *owner, uint64_t root, const xgr_store_grant *g, int64_t now) {
  for (size_t i = 0; i < m->ngrants; i++) {
    xgr_store_grant *x = &m->grants[i];
    if (x->root_pid != root || strcmp(x->owner, owner) || strcmp(x->grantee, g->grantee)) continue;
    if (!g->rights) {
      xgr_store_grant_clear(x);
      memmove(x, x + 1, (m->ngrants - i - 1) * sizeof *x);
      m->ngrants--;
      return;
    }
    int64_t id = x->id;
    xgr_store_grant_clear(x);
    xgr__store_grant_copy(x, g);
    x->id = id;
    x->created_at = now;
    return;
  }
  if (!g->rights) return;
  m->grants = xgr__xrealloc(m->grants, (m->ngrants + 1) * sizeof *m->grants);
  xgr_store_grant *x = &m->grants[m->ngrants++];
  xgr__store_grant_copy(x, g);
  x->id = ++m->grant_id;
  x->created_at = now;
}

/* ---- lookups ------------------------------------------------------------------------------------ */

static int key_cmp(const char *o1, uint64_t r1, const char *o2, uint64_t r2) {
  int c = strcmp(o1, o2);
  if (c) return c;
  return r1 < r2 ? -1 : r1 > r2 ? 1 : 0;
}

/* Index of (owner, root) or where it would go; *found says which. */
static size_t sess_pos(const mstore *m, const char *owner, uint64_t root, bool *found) {
  size_t lo = 0, hi = m->nsess;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = key_cmp(m->sess[mid]->owner, m->sess[mid]->root, owner, root);
    if (c == 0) {
      *found = true;
      return mid;
    }
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  *found = false;
  return lo;
}

static msess *sess_find(const mstore *m, const char *owner, uint64_t root) {
  bool f;
  size_t i = sess_pos(m, owner, root, &f);
  return f ? m->sess[i] : NULL;
}

static msess *sess_get(mstore *m, const char *owner, uint64_t root) {
  bool f;
  size_t i = sess_pos(m, owner, root, &f);
  if (f) return m->sess[i];
  if (m->nsess == m->capsess) {
    m->capsess = m->capsess ? m->capsess * 2 : 16;
    m->sess = xgr__xrealloc(m->sess, m->capsess * sizeof *m->sess);
  }
  memmove(m->sess + i + 1, m->sess + i, (m->nsess - i) * sizeof *m->sess);
  msess *s = xgr__xcalloc(1, sizeof *s);
  s->owner = xgr__xstrdup(owner);
  s->root = root;
  m->sess[i] = s;
  m->nsess++;
  return s;
}

static size_t proc_pos(const msess *s, uint64_t iter, bool *found) {
  size_t lo = 0, hi = s->nprocs;
  if (hi && s->procs[hi - 1].r.iter < iter) lo = hi;   /* appends are the common case */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (s->procs[mid].r.iter == iter) {
      *found = true;
      return mid;
    }
    if (s->procs[mid].r.iter < iter) lo = mid + 1;
    else hi = mid;
  }
  *found = false;
  return lo;
}

static size_t hist_pos(const msess *s, uint64_t iter, bool *found) {
  size_t lo = 0, hi = s->nhist;
  if (hi && s->hist[hi - 1].iter < iter) lo = hi;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (s->hist[mid].iter == iter) {
      *found = true;
      return mid;
    }
    if (s->hist[mid].iter < iter) lo = mid + 1;
    else hi = mid;
  }
  *found = false;
  return lo;
}

/* ---- applying a batch ------------------------------------------------------------------------------- */

/* Constraint checks before anything changes: a batch is applied whole or not at all. */
static int check_batch(mstore *m, const xgr_store_changes *b, xgr_error *err) {
  for (size_t i = 0; i < b->n; i++) {
    const store_op *op = &b->ops[i];
    if (op->kind == OP_MARK) {
      for (size_t j = 0; j < m->nmarks; j++)
        if (!strcmp(m->marks[j].key, op->owner) && m->marks[j].expires_at > op->u.mark.now)
          return xgr_error_set(err, XGR_ECONFLICT, NULL, "already used (recorded until %lld)",
                               (long long)m->marks[j].expires_at);
      continue;
    }
    if (op->kind == OP_SESSION && op->if_absent) {
      const msess *s = sess_find(m, op->owner, op->root);
      if (s && s->has_row)
        return xgr_error_set(err, XGR_ECONFLICT, NULL, "session %s/%llu exists already; the batch was not applied",
                             op->owner, (unsigned long long)op->root);
      continue;
    }
    if (op->kind != OP_HIST) continue;
    msess *s = sess_find(m, op->owner, op->root);
    bool f = false;
    if (s) hist_pos(s, op->u.hist.iter, &f);
    for (size_t j = 0; !f && j < i; j++)
      f = b->ops[j].kind == OP_HIST && b->ops[j].u.hist.iter == op->u.hist.iter && b->ops[j].root == op->root &&
          !strcmp(b->ops[j].owner, op->owner);
    if (f)
      return xgr_error_set(err, XGR_ECONFLICT, NULL,
                           "history row %s/%llu:%llu exists already (UNIQUE owner, rootPid, iter); the batch was not applied",
                           op->owner, (unsigned long long)op->root, (unsigned long long)op->u.hist.iter);
  }
  return 0;
}

/* The owner's counter (next expected rootPid, 1 for a new owner); m->lock held. */
static mowner *owner_get(mstore *m, const char *owner) {
  for (size_t i = 0; i < m->nowners; i++)
    if (!strcmp(m->owners[i].owner, owner)) return &m->owners[i];
  m->owners = xgr__xrealloc(m->owners, (m->nowners + 1) * sizeof *m->owners);
  mowner *o = &m->owners[m->nowners++];
  o->owner = xgr__xstrdup(owner);
  o->next = 1;
  return o;
}

/* A session started with rootPid root: the next expected one is at least root + 1. */
static void owner_bump(mstore *m, const char *owner, uint64_t root) {
  mowner *o = owner_get(m, owner);
  if (root != UINT64_MAX && o->next < root + 1) o->next = root + 1;
}

static void apply_op(mstore *m, store_op *op, int64_t now) {
  switch (op->kind) {
    case OP_WAKE_OUT: {
      for (size_t i = 0; i < m->noutbox; i++)
        if (!strcmp(m->outbox[i].id, op->u.wake.id)) return;
      m->outbox = xgr__xrealloc(m->outbox, (m->noutbox + 1) * sizeof *m->outbox);
      xgr__store_wake_copy(&m->outbox[m->noutbox], &op->u.wake);
      m->outbox[m->noutbox++].created_at = now;
      break;
    }
    case OP_WAKE_DONE:
      for (size_t i = 0; i < m->noutbox; i++)
        if (!strcmp(m->outbox[i].id, op->owner) && !m->outbox[i].refused) {
          if (op->u.wake.refused) {   /* kept as the record of the refusal */
            m->outbox[i].refused = xgr__xstrdup(op->u.wake.refused);
            m->outbox[i].refused_at = now;
            break;
          }
          xgr_store_wake_clear(&m->outbox[i]);
          memmove(&m->outbox[i], &m->outbox[i + 1], (m->noutbox - i - 1) * sizeof *m->outbox);
          m->noutbox--;
          break;
        }
      break;
    case OP_SESSION: {
      owner_bump(m, op->owner, op->root);
      msess *s = sess_get(m, op->owner, op->root);
      char *gas = s->has_row && s->row.max_total_gas && s->row.max_total_gas[0] ? xgr__xstrdup(s->row.max_total_gas)
                                                                                 : NULL;
      char *pin = s->has_row && s->row.bundle_hash && s->row.bundle_hash[0] ? xgr__xstrdup(s->row.bundle_hash) : NULL;
      uint64_t bytes = s->has_row ? s->row.stored_bytes : 0;   /* as SQLite's upsert: the count stays */
      xgr_store_session_clear(&s->row);
      xgr__store_session_copy(&s->row, &op->u.session);
      s->row.stored_bytes = bytes;
      if (gas) {   /* as SQLite's upsert: the starting permit's budget stays */
        free(s->row.max_total_gas);
        s->row.max_total_gas = gas;
      }
      if (pin) {   /* and its pin */
        free(s->row.bundle_hash);
        s->row.bundle_hash = pin;
      }
      if (!s->row.created_at) s->row.created_at = now;
      if (s->row.status != XGR_RESULT_RUNNING && !s->row.finished_at) s->row.finished_at = now;
      s->has_row = true;
      break;
    }
    case OP_STATE: {
      msess *s = sess_find(m, op->owner, op->root);
      if (!s || !s->has_row) break;
      bool was_running = s->row.status == XGR_RESULT_RUNNING;
      s->row.status = op->u.state.status;
      s->row.killed_at = op->u.state.killed_at;
      s->row.next_iter = op->u.state.next_iter;
      s->row.next_group = op->u.state.next_group;
      s->row.paused = op->u.state.paused;
      s->row.wake_due = op->u.state.due;
      if (op->u.state.has_bytes) s->row.stored_bytes = op->u.state.stored_bytes;
      if (was_running && s->row.status != XGR_RESULT_RUNNING) {
        s->row.finished_at = now;
        s->nscopes = 0;   /* killed scopes matter only while the session lives */
      }
      break;
    }
    case OP_PROC: {
      msess *s = sess_get(m, op->owner, op->root);
      bool f;
      size_t i = proc_pos(s, op->u.proc.iter, &f);
      if (f) {
        xgr_store_proc_clear(&s->procs[i].r);
      } else {
        if (s->nprocs == s->capprocs) {
          s->capprocs = s->capprocs ? s->capprocs * 2 : 16;
          s->procs = xgr__xrealloc(s->procs, s->capprocs * sizeof *s->procs);
        }
        memmove(s->procs + i + 1, s->procs + i, (s->nprocs - i) * sizeof *s->procs);
        s->nprocs++;
      }
      xgr__store_proc_copy(&s->procs[i].r, &op->u.proc);
      s->procs[i].terminal_at = s->procs[i].r.status >= XGR_PROC_DONE ? now : 0;
      break;
    }
    case OP_HIST: {
      msess *s = sess_get(m, op->owner, op->root);
      bool f;
      size_t i = hist_pos(s, op->u.hist.iter, &f);
      if (f) break;   /* excluded by check_batch */
      if (s->nhist == s->caphist) {
        s->caphist = s->caphist ? s->caphist * 2 : 16;
        s->hist = xgr__xrealloc(s->hist, s->caphist * sizeof *s->hist);
      }
      memmove(s->hist + i + 1, s->hist + i, (s->nhist - i) * sizeof *s->hist);
      s->nhist++;
      xgr__store_hist_copy(&s->hist[i], &op->u.hist);
      s->hist[i].recorded_at = now;
      if (m->base.cfg.no_history_payload) {
        free(s->hist[i].payload);
        s->hist[i].payload = NULL;
      }
      break;
    }
    case OP_FORKED: {
      msess *s = sess_get(m, op->owner, op->root);
      if (!s->has_row) break;
      free(s->row.forked_from);
      s->row.forked_from = xgr__xstrdup(op->u.forked_from);
      break;
    }
    case OP_PIN: {
      msess *s = sess_find(m, op->owner, op->root);
      if (!s || !s->has_row) break;
      free(s->row.ostc_id);
      free(s->row.ostc_hash);
      free(s->row.bundle_hash);
      s->row.ostc_id = xgr__xstrdup(op->u.pin.ostc_id);
      s->row.ostc_hash = xgr__xstrdup(op->u.pin.ostc_hash);
      s->row.bundle_hash = xgr__xstrdup(op->u.pin.bundle_hash);
      break;
    }
    case OP_GRANT:
      grant_apply(m, op->owner, op->root, &op->u.grant, now);
      break;
    case OP_AUDIT: {
      msess *s = sess_get(m, op->owner, op->root);
      s->audit = xgr__xrealloc(s->audit, (s->naudit + 1) * sizeof *s->audit);
      xgr__store_audit_copy(&s->audit[s->naudit], &op->u.audit);
      s->audit[s->naudit++].at = now;
      break;
    }
    case OP_SCOPE: {
      msess *s = sess_get(m, op->owner, op->root);
      for (size_t i = 0; i < s->nscopes; i++)
        if (s->scopes[i] == op->u.group) return;
      if (s->nscopes == s->capscopes) {
        s->capscopes = s->capscopes ? s->capscopes * 2 : 8;
        s->scopes = xgr__xrealloc(s->scopes, s->capscopes * sizeof *s->scopes);
      }
      s->scopes[s->nscopes++] = op->u.group;
      break;
    }
    case OP_REMOVE: {
      size_t kept = 0;   /* the session's refused wake-ups go with it */
      for (size_t i = 0; i < m->noutbox; i++) {
        xgr_store_wake *w = &m->outbox[i];
        if (w->refused && w->from_root == op->root && !strcmp(w->from_owner, op->owner)) xgr_store_wake_clear(w);
        else m->outbox[kept++] = *w;
      }
      m->noutbox = kept;
      grants_drop(m, op->owner, op->root);   /* so do its grants */
      msess *s = sess_find(m, op->owner, op->root);
      if (!s) break;
      for (size_t i = 0; i < s->nprocs; i++) xgr_store_proc_clear(&s->procs[i].r);
      s->nprocs = 0;
      s->nscopes = 0;
      xgr_store_session_clear(&s->row);
      s->has_row = false;
      break;
    }
    case OP_NEXTPID: {
      mowner *o = owner_get(m, op->owner);
      *op->u.next_pid = o->next;
      if (o->next != UINT64_MAX) o->next++;   /* at 2^64-1 it stays (no wrap to 0), as in SQLite */
      break;
    }
    case OP_MARK: {
      size_t k = 0;   /* drop expired marks (and an expired earlier use of this key) */
      for (size_t j = 0; j < m->nmarks; j++) {
        if (m->marks[j].expires_at <= op->u.mark.now || !strcmp(m->marks[j].key, op->owner)) free(m->marks[j].key);
        else m->marks[k++] = m->marks[j];
      }
      m->marks = xgr__xrealloc(m->marks, (k + 1) * sizeof *m->marks);
      m->marks[k].key = xgr__xstrdup(op->owner);
      m->marks[k].expires_at = op->u.mark.expires_at;
      m->nmarks = k + 1;
      break;
    }
    case OP_REGISTER: {
      xgr_store_doc *d = op->u.doc;
      uint32_t maxv = 0;
      for (size_t i = 0; i < m->ndocs; i++) {
        const xgr_store_doc *x = &m->docs[i];
        if (x->kind != d->kind || strcmp(x->id, d->id)) continue;
        if (!strcmp(x->hash, d->hash)) {   /* the same bytes again: that version */
          xgr_store_doc_clear(d);
          xgr__store_doc_copy(d, x);
          return;
        }
        if (x->version > maxv) maxv = x->version;
      }
      d->version = maxv + 1;
      m->docs = xgr__xrealloc(m->docs, (m->ndocs + 1) * sizeof *m->docs);
      xgr__store_doc_copy(&m->docs[m->ndocs++], d);
      break;
    }
  }
}

static size_t gc_locked(mstore *m, int64_t now);
static void bop_remove(mstore *m, size_t i);

static void m_submit(xgr_store *st, xgr_store_changes *b) {
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  int64_t now = xgr__store_now_ms(st);
  b->rc = check_batch(m, b, &b->err);
  if (!b->rc) {
    for (size_t i = 0; i < b->n; i++) apply_op(m, &b->ops[i], now);
    pthread_mutex_lock(&st->mu);
    st->stats.transactions++;
    if (st->stats.max_batches_per_tx < 1) st->stats.max_batches_per_tx = 1;
    pthread_mutex_unlock(&st->mu);
  }
  if (st->cfg.gc_interval_ms > 0 && now - m->last_gc >= st->cfg.gc_interval_ms) {
    m->last_gc = now;
    size_t d = gc_locked(m, now);
    pthread_mutex_lock(&st->mu);
    st->stats.gc_deleted += d;
    pthread_mutex_unlock(&st->mu);
  }
  pthread_mutex_unlock(&m->lock);
  xgr__store_signal(st, b);
}

static void m_flush(xgr_store *st) { (void)st; /* batches are applied inside submit */ }

static void msess_free(msess *s) {
  for (size_t i = 0; i < s->nprocs; i++) xgr_store_proc_clear(&s->procs[i].r);
  for (size_t i = 0; i < s->nhist; i++) xgr_store_hist_clear(&s->hist[i]);
  xgr_store_audits_free(s->audit, s->naudit);
  xgr_store_session_clear(&s->row);
  free(s->procs);
  free(s->hist);
  free(s->scopes);
  free(s->owner);
  free(s);
}

static void m_close(xgr_store *st) {
  mstore *m = (mstore *)st;
  for (size_t i = 0; i < m->nsess; i++) msess_free(m->sess[i]);
  free(m->sess);
  for (size_t i = 0; i < m->nowners; i++) free(m->owners[i].owner);
  free(m->owners);
  for (size_t i = 0; i < m->ndocs; i++) xgr_store_doc_clear(&m->docs[i]);
  free(m->docs);
  for (size_t i = 0; i < m->nmarks; i++) free(m->marks[i].key);
  free(m->marks);
  xgr_store_wakes_free(m->outbox, m->noutbox);
  xgr_store_batchops_free(m->bops, m->nbops);
  xgr_store_grants_free(m->grants, m->ngrants);
  pthread_mutex_destroy(&m->lock);
  xgr__store_destroy_common(st);
  free(m);
}

/* ---- reading ---------------------------------------------------------------------------------------- */

static int m_peek_pid(xgr_store *st, const char *owner, uint64_t *next, xgr_error *err) {
  (void)err;
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  *next = 1;
  for (size_t i = 0; i < m->nowners; i++)
    if (!strcmp(m->owners[i].owner, owner)) *next = m->owners[i].next;
  pthread_mutex_unlock(&m->lock);
  return 0;
}

static int m_owner_bytes(xgr_store *st, const char *owner, uint64_t *bytes, xgr_error *err) {
  (void)err;
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  *bytes = 0;
  for (size_t i = 0; i < m->nsess; i++)
    if (m->sess[i]->has_row && !strcmp(m->sess[i]->row.owner, owner)) *bytes += m->sess[i]->row.stored_bytes;
  pthread_mutex_unlock(&m->lock);
  return 0;
}

static int m_session_get(xgr_store *st, const char *owner, uint64_t root, xgr_store_session *out, xgr_error *err) {
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  msess *s = sess_find(m, owner, root);
  int rc = 0;
  if (s && s->has_row) xgr__store_session_copy(out, &s->row);
  else rc = xgr_error_set(err, XGR_ENOTFOUND, NULL, "no session %s/%llu in the store", owner, (unsigned long long)root);
  pthread_mutex_unlock(&m->lock);
  return rc;
}

static int m_procs(xgr_store *st, const char *owner, uint64_t root, xgr_store_proc **out, size_t *n, xgr_error *err) {
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  msess *s = sess_find(m, owner, root);
  *n = s ? s->nprocs : 0;
  *out = xgr__xcalloc(*n ? *n : 1, sizeof **out);
  for (size_t i = 0; i < *n; i++) xgr__store_proc_copy(&(*out)[i], &s->procs[i].r);
  pthread_mutex_unlock(&m->lock);
  (void)err;
  return 0;
}

static int m_history(xgr_store *st, const char *owner, uint64_t root, xgr_store_hist **out, size_t *n, xgr_error *err) {
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  msess *s = sess_find(m, owner, root);
  *n = s ? s->nhist : 0;
  *out = xgr__xcalloc(*n ? *n : 1, sizeof **out);
  for (size_t i = 0; i < *n; i++) xgr__store_hist_copy(&(*out)[i], &s->hist[i]);
  pthread_mutex_unlock(&m->lock);
  (void)err;
  return 0;
}

static bool grant_selected(const xgr_store_grant *g, const xgr_store_grant_filter *f) {
  if (g->id <= f->after_id) return false;
  if (f->owner && (strcmp(g->owner, f->owner) || (f->root_pid && g->root_pid != f->root_pid))) return false;
  if (f->grantee && strcmp(g->grantee, f->grantee)) return false;
  if (f->party && strcmp(g->grantee, f->party) && strcmp(g->owner, f->party)) return false;
  if (f->rule && (!g->rule || strcasecmp(g->rule, f->rule))) return false;
  if (f->expires_after && g->expires_at <= f->expires_after) return false;
  if (f->expires_until && g->expires_at > f->expires_until) return false;
  return true;
}

static int m_grants(xgr_store *st, const xgr_store_grant_filter *f, xgr_store_grant **out, size_t *n,
                    xgr_error *err) {
  (void)err;
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  *out = xgr__xcalloc(m->ngrants ? m->ngrants : 1, sizeof **out);
  for (size_t i = 0; i < m->ngrants && *n < f->limit; i++)
    if (grant_selected(&m->grants[i], f)) xgr__store_grant_copy(&(*out)[(*n)++], &m->grants[i]);
  pthread_mutex_unlock(&m->lock);
  return 0;
}

static int m_audits(xgr_store *st, const char *owner, uint64_t root, xgr_store_audit **out, size_t *n, xgr_error *err) {
  (void)err;
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  msess *s = sess_find(m, owner, root);
  size_t k = s ? s->naudit : 0;
  *out = xgr__xcalloc(k ? k : 1, sizeof **out);
  /* by session_at, stable (insertion sort: a session has few entries) */
  for (size_t i = 0; i < k; i++) {
    size_t j = *n;
    while (j > 0 && (*out)[j - 1].session_at > s->audit[i].session_at) {
      (*out)[j] = (*out)[j - 1];
      j--;
    }
    xgr__store_audit_copy(&(*out)[j], &s->audit[i]);
    (*n)++;
  }
  pthread_mutex_unlock(&m->lock);
  return 0;
}

/* The owner's sessions, newest rootPid first: the sessions array is sorted by (owner, rootPid), so
 * they are one contiguous run, walked backwards. */
static int by_root_desc(const void *a, const void *b) {
  const xgr_store_session *x = a, *y = b;
  return x->root_pid < y->root_pid ? 1 : x->root_pid > y->root_pid ? -1 : strcmp(x->owner, y->owner);
}

static int m_sessions(xgr_store *st, const char *owner, uint64_t before, size_t limit, xgr_store_session **out,
                      size_t *n, xgr_error *err) {
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  if (!owner) {   /* every owner's: all rows below the bound, by rootPid descending, then cut */
    *out = xgr__xcalloc(m->nsess ? m->nsess : 1, sizeof **out);
    *n = 0;
    for (size_t i = 0; i < m->nsess; i++) {
      const msess *s = m->sess[i];
      if (s->has_row && (before == UINT64_MAX ? true : s->root < before))
        xgr__store_session_copy(&(*out)[(*n)++], &s->row);
    }
    qsort(*out, *n, sizeof **out, by_root_desc);
    for (size_t i = limit; i < *n; i++) xgr_store_session_clear(&(*out)[i]);
    if (*n > limit) *n = limit;
    pthread_mutex_unlock(&m->lock);
    return 0;
  }
  bool f;
  size_t end = sess_pos(m, owner, before, &f);   /* the first row at or after (owner, before): excluded */
  if (f && before == UINT64_MAX) end++;           /* ... unless 2^64-1, the front's "no bound": listed */
  size_t cap = 0;
  for (size_t i = end; i-- > 0 && !strcmp(m->sess[i]->owner, owner) && cap < limit;) cap += m->sess[i]->has_row;
  *out = xgr__xcalloc(cap ? cap : 1, sizeof **out);
  *n = 0;
  for (size_t i = end; i-- > 0 && !strcmp(m->sess[i]->owner, owner) && *n < cap;)
    if (m->sess[i]->has_row) xgr__store_session_copy(&(*out)[(*n)++], &m->sess[i]->row);
  pthread_mutex_unlock(&m->lock);
  (void)err;
  return 0;
}

static int by_live_desc(const void *a, const void *b) {
  const xgr_store_owner_live *x = a, *y = b;
  return x->live < y->live ? 1 : x->live > y->live ? -1 : strcmp(x->owner, y->owner);
}

/* The owners with live sessions: the sessions array is sorted by owner, so each owner's rows are
 * one run (one owner: found by binary search); counted, then sorted by count. */
static int m_live_owners(xgr_store *st, const char *owner, size_t max, xgr_store_owner_live **out, size_t *n,
                         xgr_error *err) {
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  xgr_store_owner_live *all = xgr__xcalloc(m->nsess ? m->nsess : 1, sizeof *all);
  size_t k = 0;
  bool f;
  for (size_t i = owner ? sess_pos(m, owner, 0, &f) : 0; i < m->nsess; i++) {
    const msess *s = m->sess[i];
    if (owner && strcmp(s->owner, owner)) break;
    if (!s->has_row || s->row.status != XGR_RESULT_RUNNING) continue;
    if (!k || strcmp(all[k - 1].owner, s->owner)) all[k++].owner = xgr__xstrdup(s->owner);
    all[k - 1].live++;
  }
  pthread_mutex_unlock(&m->lock);
  qsort(all, k, sizeof *all, by_live_desc);
  for (size_t i = max; i < k; i++) free(all[i].owner);
  *out = all;
  *n = k < max ? k : max;
  (void)err;
  return 0;
}

/* The owners with session rows after `after`, ascending: the sessions array is sorted by owner. */
static int m_owners_after(xgr_store *st, const char *after, size_t max, xgr_store_owner_live **out, size_t *n,
                          xgr_error *err) {
  mstore *m = (mstore *)st;
  *out = xgr__xcalloc(max, sizeof **out);
  pthread_mutex_lock(&m->lock);
  for (size_t i = 0; i < m->nsess && *n < max; i++) {
    const msess *s = m->sess[i];
    if (!s->has_row || strcmp(s->owner, after) <= 0) continue;
    if (*n && !strcmp((*out)[*n - 1].owner, s->owner)) continue;
    (*out)[(*n)++].owner = xgr__xstrdup(s->owner);
  }
  pthread_mutex_unlock(&m->lock);
  (void)err;
  return 0;
}

/* Does the live session s pass filter f (NULL: every one)? */
static bool m_wanted(const msess *s, const xgr_store_load_filter *f) {
  if (!s->has_row || s->row.status != XGR_RESULT_RUNNING) return false;
  if (!f) return true;
  if (f->owner) return s->root == f->root_pid && !strcmp(s->owner, f->owner);
  return !f->bounded || !s->row.wake_due || s->row.wake_due <= f->due_upto;
}

static int m_load_some(xgr_store *st, const xgr_store_load_filter *f, int (*fn)(void *, const xgr_store_live *),
                       void *ctx, xgr_error *err) {
  mstore *m = (mstore *)st;
  /* copy under the lock, call back without it (fn may read the store) */
  pthread_mutex_lock(&m->lock);
  size_t nlive = 0;
  for (size_t i = 0; i < m->nsess; i++) nlive += m_wanted(m->sess[i], f);
  xgr_store_session *rows = xgr__xcalloc(nlive ? nlive : 1, sizeof *rows);
  xgr_store_proc **procs = xgr__xcalloc(nlive ? nlive : 1, sizeof *procs);
  size_t *nprocs = xgr__xcalloc(nlive ? nlive : 1, sizeof *nprocs);
  uint32_t **scopes = xgr__xcalloc(nlive ? nlive : 1, sizeof *scopes);
  size_t *nscopes = xgr__xcalloc(nlive ? nlive : 1, sizeof *nscopes);
  size_t k = 0;
  for (size_t i = 0; i < m->nsess; i++) {
    msess *s = m->sess[i];
    if (!m_wanted(s, f)) continue;
    xgr__store_session_copy(&rows[k], &s->row);
    procs[k] = xgr__xcalloc(s->nprocs ? s->nprocs : 1, sizeof **procs);
    for (size_t j = 0; j < s->nprocs; j++)
      if (s->procs[j].r.status <= XGR_PROC_RUNNING) xgr__store_proc_copy(&procs[k][nprocs[k]++], &s->procs[j].r);
    scopes[k] = xgr__xmalloc((s->nscopes ? s->nscopes : 1) * sizeof **scopes);
    if (s->nscopes) memcpy(scopes[k], s->scopes, s->nscopes * sizeof **scopes);
    nscopes[k] = s->nscopes;
    k++;
  }
  pthread_mutex_unlock(&m->lock);
  int rc = 0;
  for (size_t i = 0; i < k; i++) {
    if (!rc) {
      xgr_store_live l = {&rows[i], procs[i], nprocs[i], scopes[i], nscopes[i]};
      rc = fn(ctx, &l);
      if (rc) xgr_error_set(err, rc, NULL, "recovery stopped at session %s/%llu", rows[i].owner,
                            (unsigned long long)rows[i].root_pid);
    }
    xgr_store_session_clear(&rows[i]);
    xgr_store_procs_free(procs[i], nprocs[i]);
    free(scopes[i]);
  }
  free(rows);
  free(procs);
  free(nprocs);
  free(scopes);
  free(nscopes);
  return rc;
}

static int m_doc_get(xgr_store *st, xgr_registry_kind kind, const char *id, uint32_t version, const char *hash,
                     xgr_store_doc *out, xgr_error *err) {
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  const xgr_store_doc *best = NULL;
  for (size_t i = 0; i < m->ndocs; i++) {
    const xgr_store_doc *x = &m->docs[i];
    if (x->kind != kind) continue;
    bool match = hash ? !strcasecmp(x->hash, hash)
                      : !strcmp(x->id, id) && (version ? x->version == version : !best || x->version > best->version);
    if (match && (!hash || !best || x->version > best->version)) best = x;
  }
  int rc = 0;
  if (best) xgr__store_doc_copy(out, best);
  else rc = xgr_error_set(err, XGR_ENOTFOUND, NULL, "no %s %s%s in the registry", kind ? "rule" : "orchestration",
                          hash ? "with hash " : "", hash ? hash : id);
  pthread_mutex_unlock(&m->lock);
  return rc;
}

/* ---- retention ---------------------------------------------------------------------------------------- */

static size_t gc_locked(mstore *m, int64_t now) {
  const xgr_store_config *c = &m->base.cfg;
  int64_t proc_cut = now - c->ttl_secs * 1000, hist_cut = now - c->history_secs * 1000;
  size_t deleted = 0;
  for (size_t i = 0; i < m->nsess; i++) {
    msess *s = m->sess[i];
    size_t k = 0;
    for (size_t j = 0; j < s->nprocs; j++) {
      if (s->procs[j].terminal_at && s->procs[j].terminal_at <= proc_cut) {
        xgr_store_proc_clear(&s->procs[j].r);
        deleted++;
      } else {
        s->procs[k++] = s->procs[j];
      }
    }
    s->nprocs = k;
    if (c->history_secs > 0) {
      k = 0;
      for (size_t j = 0; j < s->nhist; j++) {
        if (s->hist[j].recorded_at <= hist_cut) {
          xgr_store_hist_clear(&s->hist[j]);
          deleted++;
        } else {
          s->hist[k++] = s->hist[j];
        }
      }
      s->nhist = k;
      k = 0;   /* the audit trail is history too */
      for (size_t j = 0; j < s->naudit; j++) {
        if (s->audit[j].at <= hist_cut) {
          xgr_store_audit_clear(&s->audit[j]);
          deleted++;
        } else {
          s->audit[k++] = s->audit[j];
        }
      }
      s->naudit = k;
      if (s->has_row && s->row.status != XGR_RESULT_RUNNING && s->row.finished_at <= hist_cut) {
        xgr_store_session_clear(&s->row);
        s->has_row = false;
        deleted += 1 + grants_drop(m, s->owner, s->root);   /* its grants go with its row */
      }
    }
    /* killed scopes without a live member are garbage (nothing enters a killed scope) */
    k = 0;
    for (size_t j = 0; j < s->nscopes; j++) {
      bool live = false;
      for (size_t q = 0; q < s->nprocs && !live; q++)
        live = s->procs[q].r.status <= XGR_PROC_RUNNING && s->procs[q].r.group == s->scopes[j];
      if (live) s->scopes[k++] = s->scopes[j];
      else deleted++;
    }
    s->nscopes = k;
  }
  if (c->history_secs > 0) {   /* refusal records of internal wake-ups are history too */
    size_t kept = 0;
    for (size_t i = 0; i < m->noutbox; i++) {
      xgr_store_wake *w = &m->outbox[i];
      if (w->refused && w->refused_at <= hist_cut) {
        xgr_store_wake_clear(w);
        deleted++;
      } else {
        m->outbox[kept++] = *w;
      }
    }
    m->noutbox = kept;
  }
  if (c->batch_secs > 0) {   /* finished batch operations past batch_secs; a running one stays */
    int64_t bop_cut = now - c->batch_secs * 1000;
    for (size_t i = m->nbops; i-- > 0;) {
      const xgr_store_batchop *o = &m->bops[i];
      if (strcmp(o->state, "running") && o->finished_at <= bop_cut) {
        bop_remove(m, i);
        deleted++;
      }
    }
  }
  /* drop empty containers */
  size_t k = 0;
  for (size_t i = 0; i < m->nsess; i++) {
    msess *s = m->sess[i];
    if (!s->has_row && !s->nprocs && !s->nhist && !s->nscopes && !s->naudit) msess_free(s);
    else m->sess[k++] = s;
  }
  m->nsess = k;
  return deleted;
}

static int m_gc(xgr_store *st, size_t *deleted, xgr_error *err) {
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  *deleted = gc_locked(m, xgr__store_now_ms(st));
  pthread_mutex_unlock(&m->lock);
  pthread_mutex_lock(&st->mu);
  st->stats.gc_deleted += *deleted;
  pthread_mutex_unlock(&st->mu);
  (void)err;
  return 0;
}

static int m_outbox(xgr_store *st, xgr_store_wake **out, size_t *n, xgr_error *err) {
  (void)err;
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  *out = xgr__xcalloc(m->noutbox + 1, sizeof **out);
  for (size_t i = 0; i < m->noutbox; i++)
    if (!m->outbox[i].refused) xgr__store_wake_copy(&(*out)[(*n)++], &m->outbox[i]);
  pthread_mutex_unlock(&m->lock);
  return 0;
}

static int m_wakes_refused(xgr_store *st, const char *owner, uint64_t root, xgr_store_wake **out, size_t *n,
                           xgr_error *err) {
  (void)err;
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  *out = xgr__xcalloc(m->noutbox + 1, sizeof **out);
  for (size_t i = 0; i < m->noutbox; i++) {
    const xgr_store_wake *w = &m->outbox[i];
    if (w->refused && w->from_root == root && !strcmp(w->from_owner, owner)) xgr__store_wake_copy(&(*out)[(*n)++], w);
  }
  pthread_mutex_unlock(&m->lock);
  return 0;
}

static int m_load_live(xgr_store *st, int (*fn)(void *, const xgr_store_live *), void *ctx, xgr_error *err) {
  return m_load_some(st, NULL, fn, ctx, err);
}

static int key_after(int64_t d1, const char *o1, uint64_t r1, const xgr_store_due_key *k) {
  if (d1 != k->due) return d1 > k->due;
  return key_cmp(o1, r1, k->owner, k->root_pid) > 0;
}

/* The due index of the memory store is a scan (it never hibernates sessions: xgrd keeps every
 * session of a memory store in memory; this serves the shared store tests). Selection by
 * repeated minimum: max is small. */
static int m_due(xgr_store *st, const xgr_store_due_key *after, int64_t upto, xgr_store_due_key *out, size_t max,
                 size_t *n, xgr_error *err) {
  (void)err;
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  xgr_store_due_key cur = after ? *after : (xgr_store_due_key){.due = INT64_MIN};
  while (*n < max) {
    const msess *best = NULL;
    for (size_t i = 0; i < m->nsess; i++) {
      const msess *s = m->sess[i];
      if (!s->has_row || s->row.status != XGR_RESULT_RUNNING || !s->row.wake_due || s->row.wake_due > upto) continue;
      if (!key_after(s->row.wake_due, s->owner, s->root, &cur)) continue;
      if (!best || (s->row.wake_due < best->row.wake_due ||
                    (s->row.wake_due == best->row.wake_due && key_cmp(s->owner, s->root, best->owner, best->root) < 0)))
        best = s;
    }
    if (!best) break;
    xgr_store_due_key *k = &out[(*n)++];
    k->due = best->row.wake_due;
    snprintf(k->owner, sizeof k->owner, "%s", best->owner);
    k->root_pid = best->root;
    cur = *k;
  }
  pthread_mutex_unlock(&m->lock);
  return 0;
}

/* ---- operations on many sessions (xgr_store_batchop_*) --------------------------------------------- */

static xgr_store_batchop *bop_find(mstore *m, const char *id) {
  for (size_t i = 0; i < m->nbops; i++)
    if (!strcmp(m->bops[i].id, id)) return &m->bops[i];
  return NULL;
}

static void set_str(char **dst, const char *v) {
  free(*dst);
  *dst = xgr__xstrdup(v);
}

/* Remove bops[i] (keeping the order: oldest first). */
static void bop_remove(mstore *m, size_t i) {
  xgr_store_batchop_clear(&m->bops[i]);
  memmove(&m->bops[i], &m->bops[i + 1], (m->nbops - i - 1) * sizeof *m->bops);
  m->nbops--;
}

static int m_bop_create(xgr_store *st, const xgr_store_batchop *op, uint32_t max_running, uint32_t max_kept,
                        xgr_error *err) {
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  int rc = 0;
  size_t running = 0;
  for (size_t i = 0; i < m->nbops; i++)
    running += !strcmp(m->bops[i].caller, op->caller) && !strcmp(m->bops[i].state, "running");
  if (bop_find(m, op->id)) {
    rc = xgr_error_set(err, XGR_ECONFLICT, NULL, "batch operation %s exists", op->id);
  } else if (max_running && running >= max_running) {
    rc = xgr_error_set(err, XGR_ELIMIT, NULL, "%s has %u batch operations running, the most at once; cancel one or "
                       "wait until one ends", op->caller, (unsigned)max_running);
  } else {
    m->bops = xgr__xrealloc(m->bops, (m->nbops + 1) * sizeof *m->bops);
    xgr_store_batchop *o = &m->bops[m->nbops++];
    memset(o, 0, sizeof *o);
    o->id = xgr__xstrdup(op->id);
    o->caller = xgr__xstrdup(op->caller);
    o->action = xgr__xstrdup(op->action);
    o->spec = xgr__xstrdup(op->spec);
    o->state = xgr__xstrdup("running");
    o->cursor = xgr__xstrdup("");
    o->driver = xgr__xstrdup("");
    o->total = op->total;
    o->created_at = o->updated_at = xgr__store_now_ms(st);
    size_t kept = 0;   /* the caller's finished ones past its newest max_kept go (newest last in bops) */
    for (size_t i = m->nbops; max_kept && i-- > 0;) {
      if (strcmp(m->bops[i].caller, op->caller) || !strcmp(m->bops[i].state, "running")) continue;
      if (++kept > max_kept) bop_remove(m, i);
    }
  }
  pthread_mutex_unlock(&m->lock);
  return rc;
}

static int m_bop_claim(xgr_store *st, const char *node, int64_t lease_ms, bool force, xgr_store_batchop *out,
                       bool *found, xgr_error *err) {
  (void)err;
  mstore *m = (mstore *)st;
  int64_t now = xgr__store_now_ms(st);
  pthread_mutex_lock(&m->lock);
  for (size_t i = 0; i < m->nbops; i++) {
    xgr_store_batchop *o = &m->bops[i];
    if (strcmp(o->state, "running")) continue;
    if (!force && o->driver[0] && strcmp(o->driver, node) && o->expires >= now) continue;
    set_str(&o->driver, node);
    o->epoch++;
    o->expires = now + lease_ms;
    if (!o->started_at) o->started_at = now;
    xgr__store_batchop_copy(out, o);
    *found = true;
    break;
  }
  pthread_mutex_unlock(&m->lock);
  return 0;
}

static int m_bop_progress(xgr_store *st, const xgr_store_batchop *op, int64_t lease_ms, char *state, xgr_error *err) {
  (void)err;
  mstore *m = (mstore *)st;
  int64_t now = xgr__store_now_ms(st);
  pthread_mutex_lock(&m->lock);
  xgr_store_batchop *o = bop_find(m, op->id);
  if (o && !strcmp(o->driver, op->driver) && o->epoch == op->epoch) {
    o->total = op->total;
    o->done = op->done;
    o->failed = op->failed;
    o->skipped = op->skipped;
    set_str(&o->cursor, op->cursor ? op->cursor : "");
    o->expires = now + lease_ms;
    o->updated_at = now;
    if (!strcmp(o->state, "running") && strcmp(op->state, "running")) {
      set_str(&o->state, op->state);
      set_str(&o->error, op->error);
      o->finished_at = now;
    }
    snprintf(state, 16, "%s", o->state);
  }
  pthread_mutex_unlock(&m->lock);
  return 0;
}

static int m_bop_cancel(xgr_store *st, const char *id, bool *changed, xgr_error *err) {
  mstore *m = (mstore *)st;
  int64_t now = xgr__store_now_ms(st);
  pthread_mutex_lock(&m->lock);
  xgr_store_batchop *o = bop_find(m, id);
  int rc = 0;
  if (!o) rc = xgr_error_set(err, XGR_ENOTFOUND, NULL, "no batch operation %s", id);
  else if (!strcmp(o->state, "running")) {
    set_str(&o->state, "cancelled");
    o->finished_at = o->updated_at = now;
    *changed = true;
  }
  pthread_mutex_unlock(&m->lock);
  return rc;
}

static int m_bop_read(xgr_store *st, const char *id, const char *caller, size_t limit, xgr_store_batchop **out,
                      size_t *n, xgr_error *err) {
  (void)err;
  mstore *m = (mstore *)st;
  pthread_mutex_lock(&m->lock);
  *out = xgr__xcalloc(limit ? limit : 1, sizeof **out);
  for (size_t i = m->nbops; i-- > 0 && *n < limit;) {
    const xgr_store_batchop *o = &m->bops[i];
    if ((id && strcmp(o->id, id)) || (caller && strcmp(o->caller, caller))) continue;
    xgr__store_batchop_copy(&(*out)[(*n)++], o);
  }
  pthread_mutex_unlock(&m->lock);
  return 0;
}

static const store_vt memory_vt = {"memory", m_submit, m_flush, m_close, m_session_get, m_procs,
                                   m_history, m_load_live, m_doc_get, m_gc, .sessions = m_sessions,
                                   .peek_pid = m_peek_pid, .owner_bytes = m_owner_bytes, .outbox = m_outbox,
                                   .wakes_refused = m_wakes_refused, .audits = m_audits, .grants = m_grants, .load_some = m_load_some, .due = m_due,
                                   .live_owners = m_live_owners, .owners_after = m_owners_after, .bop_create = m_bop_create,
                                   .bop_claim = m_bop_claim, .bop_progress = m_bop_progress, .bop_cancel = m_bop_cancel,
                                   .bop_read = m_bop_read};

xgr_store *xgr_store_memory_open(const xgr_store_config *cfg, xgr_error *err) {
  (void)err;
  mstore *m = xgr__xcalloc(1, sizeof *m);
  xgr__store_init_common(&m->base, &memory_vt, cfg);
  m->base.version = XGR_STORE_SCHEMA_VERSION;
  m->base.found_version = 0;
  m->last_gc = xgr__store_now_ms(&m->base);
  pthread_mutex_init(&m->lock, NULL);
  return &m->base;
}
