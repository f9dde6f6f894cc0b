/* store.c — the store front (xgr/store.h): opening a backend by URL, records, batches, turning a
 * core's effects into batch entries, the synchronous helpers built on submit, and recovery of a
 * session core from stored rows. Backends (memory.c, sqlite.c) only apply entries and read. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store_impl.h"
#include "value/value_impl.h"
#include "xgr/engine.h"
#include "xgr/keccak.h"
#include "util/hash.h"

/* ---- small helpers ----------------------------------------------------------------------------- */

static int64_t realtime_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t xgr__store_now_ms(const xgr_store *st) {
  return st->cfg.clock_ms ? st->cfg.clock_ms(st->cfg.clock_ctx) : realtime_ms();
}

void xgr__store_init_common(xgr_store *st, const store_vt *vt, const xgr_store_config *cfg) {
  st->vt = vt;
  if (cfg) st->cfg = *cfg;
  if (st->cfg.busy_timeout_ms <= 0) st->cfg.busy_timeout_ms = 5000;
  if (st->cfg.ttl_secs <= 0) st->cfg.ttl_secs = 86400;
  if (st->cfg.batch_secs == 0) st->cfg.batch_secs = XGR_STORE_BATCH_SECS;
  if (st->cfg.gc_interval_ms == 0) st->cfg.gc_interval_ms = 1000;
  if (st->cfg.gc_batch <= 0) st->cfg.gc_batch = 256;
  pthread_mutex_init(&st->mu, NULL);
  atomic_init(&st->grants_gen, 0);
}

void xgr__store_destroy_common(xgr_store *st) { pthread_mutex_destroy(&st->mu); }

void xgr__store_set_failed(xgr_store *st, int code, const char *msg) {
  pthread_mutex_lock(&st->mu);
  if (!st->failed) {
    st->failed = code ? code : XGR_EIO;
    xgr_error_set(&st->fail_err, st->failed, NULL, "%s", msg);
  }
  pthread_mutex_unlock(&st->mu);
}

int xgr_store_failed(xgr_store *st, xgr_error *err) {
  pthread_mutex_lock(&st->mu);
  int rc = st->failed;
  if (rc && err) *err = st->fail_err;
  pthread_mutex_unlock(&st->mu);
  return rc;
}

void xgr__store_signal(xgr_store *st, xgr_store_changes *b) {
  pthread_mutex_lock(&st->mu);
  if (b->rc == 0) {
    st->stats.batches++;
    st->stats.entries += b->n;
  } else {
    st->stats.failed_batches++;
  }
  pthread_mutex_unlock(&st->mu);
  if (b->rc == 0 && b->grants) atomic_fetch_add(&st->grants_gen, 1);   /* committed: readers see the new rows */
  if (b->done) b->done(b->ctx, b->rc, b->rc ? &b->err : NULL);
  b->done = NULL;
  xgr_store_changes_free(b);
}

uint64_t xgr_store_grants_generation(xgr_store *st) { return atomic_load(&st->grants_gen); }

void xgr_store_get_stats(xgr_store *st, xgr_store_stats *out) {
  pthread_mutex_lock(&st->mu);
  *out = st->stats;
  pthread_mutex_unlock(&st->mu);
}

/* ---- open / close ------------------------------------------------------------------------------ */

xgr_store *xgr_store_open(const char *url, const xgr_store_config *cfg, xgr_error *err) {
  if (!url || !strcmp(url, "memory:") || !strcmp(url, "memory")) return xgr_store_memory_open(cfg, err);
  if (!strncmp(url, "sqlite:", 7)) url += 7;
  if (!*url) {
    xgr_error_set(err, XGR_EINVAL, NULL, "empty store path (expected memory:, sqlite:PATH or a file path)");
    return NULL;
  }
  if (xgr_store_url_is_postgres(url)) return xgr_store_postgres_open(url, cfg, err);
  return xgr_store_sqlite_open(url, cfg, err);
}

bool xgr_store_url_is_postgres(const char *url) {
  return url && (!strncmp(url, "postgresql://", 13) || !strncmp(url, "postgres://", 11));
}

void xgr_store_close(xgr_store *st) {
  if (st) st->vt->close(st);
}

const char *xgr_store_backend(const xgr_store *st) { return st->vt->name; }

int xgr_store_schema_version(const xgr_store *st, int *found) {
  if (found) *found = st->found_version;
  return st->version;
}

/* ---- records ------------------------------------------------------------------------------------- */

void xgr_store_doc_clear(xgr_store_doc *d) {
  if (!d) return;
  free(d->id);
  free(d->hash);
  free(d->owner);
  free(d->content);
  memset(d, 0, sizeof *d);
}

void xgr_store_session_clear(xgr_store_session *s) {
  if (!s) return;
  free(s->owner);
  free(s->registry);
  free(s->ostc_id);
  free(s->ostc_hash);
  free(s->max_total_gas);
  free(s->bundle_hash);
  free(s->forked_from);
  memset(s, 0, sizeof *s);
}

bool xgr_store_proc_join_open(const xgr_store_proc *p) {
  if (!p->join) return false;
  xgr_value v = xgr_value_null(), closed;
  xgr_error e;
  bool open = !xgr_value_from_json_text(p->join, strlen(p->join), 0, &v, &e) &&
              xgr_map_get_str(v, "closed", 6, &closed) && closed.kind == XGR_VBOOL && !closed.as.b;
  xgr_value_release(v);
  return open;
}

int64_t xgr_store_proc_wakes_at(const xgr_store_proc *p) {
  if (p->status != XGR_PROC_WAITING || p->paused || p->next_wake_at == XGR_NEVER) return XGR_NEVER;
  return xgr_store_proc_join_open(p) ? XGR_NEVER : p->next_wake_at;
}

int64_t xgr_store_procs_next_wake(const xgr_store_proc *ps, size_t n) {
  int64_t next = XGR_NEVER;
  for (size_t i = 0; i < n; i++) {
    int64_t w = xgr_store_proc_wakes_at(&ps[i]);
    if (w < next) next = w;
  }
  return next;
}

void xgr_store_proc_clear(xgr_store_proc *p) {
  if (!p) return;
  free(p->step_id);
  free(p->payload);
  free(p->error);
  free(p->join);
  memset(p, 0, sizeof *p);
}

void xgr_store_hist_clear(xgr_store_hist *h) {
  if (!h) return;
  free(h->step_id);
  free(h->error);
  free(h->payload);
  free(h->api);
  memset(h, 0, sizeof *h);
}

void xgr_store_procs_free(xgr_store_proc *p, size_t n) {
  for (size_t i = 0; i < n; i++) xgr_store_proc_clear(&p[i]);
  free(p);
}

void xgr_store_hists_free(xgr_store_hist *h, size_t n) {
  for (size_t i = 0; i < n; i++) xgr_store_hist_clear(&h[i]);
  free(h);
}

/* Deep copies of records, their strings made by dup (NULL gives NULL): on the heap for what a
 * backend keeps (xgr__store_*_copy) or in a batch's arena for its entries (bdup). */
typedef char *dup_fn(void *ctx, const char *s);

static char *heap_dup(void *ctx, const char *s) {
  (void)ctx;
  return xgr__xstrdup(s);
}

static void session_copy(xgr_store_session *d, const xgr_store_session *s, dup_fn *dup, void *ctx) {
  *d = *s;
  d->owner = dup(ctx, s->owner ? s->owner : "");
  d->registry = dup(ctx, s->registry ? s->registry : "");
  d->ostc_id = dup(ctx, s->ostc_id ? s->ostc_id : "");
  d->ostc_hash = dup(ctx, s->ostc_hash ? s->ostc_hash : "");
  d->max_total_gas = dup(ctx, s->max_total_gas ? s->max_total_gas : "");
  d->bundle_hash = dup(ctx, s->bundle_hash ? s->bundle_hash : "");
  d->forked_from = dup(ctx, s->forked_from ? s->forked_from : "");
}

static void proc_copy(xgr_store_proc *d, const xgr_store_proc *s, dup_fn *dup, void *ctx) {
  *d = *s;
  d->step_id = dup(ctx, s->step_id ? s->step_id : "");
  d->payload = dup(ctx, s->payload ? s->payload : "{}");
  d->error = dup(ctx, s->error);
  d->join = dup(ctx, s->join);
}

static void hist_copy(xgr_store_hist *d, const xgr_store_hist *s, dup_fn *dup, void *ctx) {
  *d = *s;
  d->step_id = dup(ctx, s->step_id ? s->step_id : "");
  d->error = dup(ctx, s->error);
  d->payload = dup(ctx, s->payload);
  d->api = dup(ctx, s->api);
}

static void wake_copy(xgr_store_wake *d, const xgr_store_wake *s, dup_fn *dup, void *ctx) {
  *d = *s;
  d->id = dup(ctx, s->id);
  d->from_owner = dup(ctx, s->from_owner);
  d->to_owner = dup(ctx, s->to_owner);
  d->step = dup(ctx, s->step);
  d->caller = dup(ctx, s->caller);
  d->rule = dup(ctx, s->rule);
  d->payload = dup(ctx, s->payload);
  d->refused = dup(ctx, s->refused);
  d->from_step = dup(ctx, s->from_step);
}

static void audit_copy(xgr_store_audit *d, const xgr_store_audit *s, dup_fn *dup, void *ctx) {
  *d = *s;
  d->kind = dup(ctx, s->kind ? s->kind : "");
  d->actor = dup(ctx, s->actor ? s->actor : "");
  d->node = dup(ctx, s->node ? s->node : "");
  d->permit = dup(ctx, s->permit);
  d->detail = dup(ctx, s->detail);
}

static void grant_copy(xgr_store_grant *d, const xgr_store_grant *s, dup_fn *dup, void *ctx) {
  *d = *s;
  d->owner = dup(ctx, s->owner ? s->owner : "");
  d->grantee = dup(ctx, s->grantee ? s->grantee : "");
  d->rule = dup(ctx, s->rule);
  d->step = dup(ctx, s->step);
  d->enc_dek = dup(ctx, s->enc_dek);
  d->created_by = dup(ctx, s->created_by ? s->created_by : "");
}

void xgr__store_session_copy(xgr_store_session *d, const xgr_store_session *s) { session_copy(d, s, heap_dup, NULL); }
void xgr__store_grant_copy(xgr_store_grant *d, const xgr_store_grant *s) { grant_copy(d, s, heap_dup, NULL); }
void xgr__store_audit_copy(xgr_store_audit *d, const xgr_store_audit *s) { audit_copy(d, s, heap_dup, NULL); }
void xgr__store_proc_copy(xgr_store_proc *d, const xgr_store_proc *s) { proc_copy(d, s, heap_dup, NULL); }
void xgr__store_hist_copy(xgr_store_hist *d, const xgr_store_hist *s) { hist_copy(d, s, heap_dup, NULL); }
void xgr__store_wake_copy(xgr_store_wake *d, const xgr_store_wake *s) { wake_copy(d, s, heap_dup, NULL); }

void xgr__store_doc_copy(xgr_store_doc *d, const xgr_store_doc *s) {
  *d = *s;
  d->id = xgr__xstrdup(s->id);
  d->hash = xgr__xstrdup(s->hash);
  d->owner = xgr__xstrdup(s->owner);
  d->content = xgr__xmalloc(s->len + 1);
  memcpy(d->content, s->content, s->len);
  d->content[s->len] = 0;
}

int xgr__store_doc_hash(const char *content, size_t len, char out[67]) {
  xgr_keccak256_hex(content, len, out);
  return 0;
}

/* ---- batches ------------------------------------------------------------------------------------- */

xgr_store_changes *xgr_store_changes_new(void) {
  xgr_store_changes *b = xgr__xcalloc(1, sizeof *b);
  xgr_arena_init(&b->text, 4096);
  return b;
}

void xgr_store_changes_free(xgr_store_changes *b) {
  if (!b) return;
  xgr_arena_free(&b->text);
  free(b->scratch.p);
  free(b->ops);
  free(b->pidx);
  free(b);
}

/* A copy of s in the text arena of batch ctx (NULL stays NULL); a dup_fn. */
static char *bdup(void *ctx, const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  return memcpy(xgr__xarena_alloc(&((xgr_store_changes *)ctx)->text, n), s, n);
}

/* The JSON text of v in b's text arena, as xgr_value_to_json_text writes it ("null" for null). */
static char *btext(xgr_store_changes *b, xgr_value v) {
  b->scratch.len = 0;
  xgr__json_write(&b->scratch, v, 0, -1);
  char *d = xgr__xarena_alloc(&b->text, b->scratch.len + 1);
  memcpy(d, b->scratch.p, b->scratch.len);
  d[b->scratch.len] = 0;
  return d;
}

/* The JSON text of v in b's text arena ("{}" for null: a payload is an object). */
static char *bjson(xgr_store_changes *b, xgr_value v) {
  return xgr_value_kind(v) == XGR_VNULL ? bdup(b, "{}") : btext(b, v);
}

size_t xgr_store_changes_size(const xgr_store_changes *b) { return b->n; }

/* Room for `more` entries past b->n in one step (a writer that knows its count moves the array
 * once instead of at every doubling). */
static void reserve_ops(xgr_store_changes *b, size_t more) {
  if (b->n + more <= b->cap) return;
  /* most batches hold 1-3 entries (a session row; a step's process, history and state): 4 to
   * start keeps the array in malloc's small-size caches (16 entries were a 2 KB block) */
  size_t c = b->cap ? b->cap * 2 : 4;
  while (c < b->n + more) c *= 2;
  b->ops = xgr__xrealloc(b->ops, c * sizeof *b->ops);
  b->cap = c;
}

static store_op *push(xgr_store_changes *b, op_kind kind, const char *owner, uint64_t root) {
  reserve_ops(b, 1);
  store_op *op = &b->ops[b->n++];
  memset(op, 0, sizeof *op);
  op->kind = kind;
  if (!owner) owner = "";
  const store_op *prev = b->n > 1 ? op - 1 : NULL;   /* a batch's ops mostly name one session */
  op->owner = prev && (prev->owner == owner || !strcmp(prev->owner, owner)) ? prev->owner : bdup(b, owner);
  op->root = root;
  return op;
}

void xgr_store_changes_session(xgr_store_changes *b, const xgr_store_session *s) {
  session_copy(&push(b, OP_SESSION, s->owner, s->root_pid)->u.session, s, bdup, b);
}

void xgr_store_changes_session_state(xgr_store_changes *b, const char *owner, uint64_t root_pid, uint8_t status,
                                   int64_t killed_at, uint64_t next_iter, uint32_t next_group, bool paused) {
  store_op *op = NULL;
  if (b->last_state) {   /* coalesce with the last state entry of the same session */
    store_op *l = &b->ops[b->last_state - 1];
    if (l->root == root_pid && !strcmp(l->owner, owner ? owner : "")) op = l;
  }
  if (!op) {
    op = push(b, OP_STATE, owner, root_pid);
    b->last_state = b->n;
  }
  op->u.state.status = status;
  op->u.state.killed_at = killed_at;
  op->u.state.next_iter = next_iter;
  op->u.state.next_group = next_group;
  op->u.state.paused = paused;
  op->u.state.due = 0;   /* a change wakes the row up; xgr_store_changes_set_due puts it to sleep */
  op->u.state.has_bytes = false;
}

/* The stored bytes of ops[from..n) of b: what xgr_store_quota counts (engine.h). */
static uint64_t ops_bytes(const xgr_store_changes *b, size_t from) {
  uint64_t n = 0;
  for (size_t i = from; i < b->n; i++) {
    const store_op *op = &b->ops[i];
    switch (op->kind) {
      case OP_PROC:
        n += XGR_STORE_ROW_BYTES + (op->u.proc.payload ? strlen(op->u.proc.payload) : 0) +
             (op->u.proc.error ? strlen(op->u.proc.error) : 0) + (op->u.proc.join ? strlen(op->u.proc.join) : 0);
        break;
      case OP_HIST:
        n += XGR_STORE_ROW_BYTES + (op->u.hist.payload ? strlen(op->u.hist.payload) : 0) +
             (op->u.hist.error ? strlen(op->u.hist.error) : 0) + (op->u.hist.api ? strlen(op->u.hist.api) : 0);
        break;
      case OP_WAKE_OUT:
        n += XGR_STORE_ROW_BYTES + (op->u.wake.payload ? strlen(op->u.wake.payload) : 0);
        break;
      case OP_AUDIT:
        n += XGR_STORE_ROW_BYTES + strlen(op->u.audit.actor) + strlen(op->u.audit.node) +
             (op->u.audit.permit ? strlen(op->u.audit.permit) : 0) + (op->u.audit.detail ? strlen(op->u.audit.detail) : 0);
        break;
      case OP_GRANT:
        n += XGR_STORE_ROW_BYTES + strlen(op->u.grant.grantee) + strlen(op->u.grant.created_by) +
             (op->u.grant.rule ? strlen(op->u.grant.rule) : 0) + (op->u.grant.step ? strlen(op->u.grant.step) : 0) +
             (op->u.grant.enc_dek ? strlen(op->u.grant.enc_dek) : 0);
        break;
      case OP_SESSION:
        n += XGR_STORE_ROW_BYTES;
        break;
      default:
        break;
    }
  }
  return n;
}

void xgr_store_changes_set_due(xgr_store_changes *b, int64_t due) {
  assert(b->last_state && due > 0);
  b->ops[b->last_state - 1].u.state.due = due;
}

static size_t pidx_hash(uint64_t root, uint64_t iter) {
  return (size_t)xgr__mix64(root * 0x9E3779B97F4A7C15ULL ^ iter);
}

/* Room in b's process index for `more` entries past its count at load 1/2, rehashed at most once. */
static void reserve_pidx(xgr_store_changes *b, size_t more) {
  if ((b->npidx + more) * 2 > b->cappidx) {
    size_t nc = b->cappidx ? b->cappidx * 2 : 16;
    while ((b->npidx + more) * 2 > nc) nc *= 2;
    size_t *t = xgr__xcalloc(nc, sizeof *t);
    for (size_t i = 0; i < b->cappidx; i++) {
      if (!b->pidx[i]) continue;
      const store_op *op = &b->ops[b->pidx[i] - 1];
      size_t h = pidx_hash(op->root, op->u.proc.iter) & (nc - 1);
      while (t[h]) h = (h + 1) & (nc - 1);
      t[h] = b->pidx[i];
    }
    free(b->pidx);
    b->pidx = t;
    b->cappidx = nc;
  }
}

/* The slot of b's process index that holds (owner, root, iter), or the empty one where it would
 * go. The index has room (cappidx > 0). */
static size_t pidx_slot(const xgr_store_changes *b, const char *owner, uint64_t root, uint64_t iter) {
  size_t h = pidx_hash(root, iter) & (b->cappidx - 1);
  while (b->pidx[h]) {
    const store_op *op = &b->ops[b->pidx[h] - 1];
    if (op->root == root && op->u.proc.iter == iter && !strcmp(op->owner, owner ? owner : "")) break;
    h = (h + 1) & (b->cappidx - 1);
  }
  return h;
}

/* The OP_PROC entry of (owner, root, iter) in b, its record cleared but for the iter (to be
 * filled with the newer state): the existing one or a new one. Entries keep the position of their
 * first state; a replaced record's strings stay in the arena until the batch goes. */
static store_op *proc_slot(xgr_store_changes *b, const char *owner, uint64_t root, uint64_t iter) {
  reserve_pidx(b, 1);
  size_t h = pidx_slot(b, owner, root, iter);
  store_op *op;
  if (b->pidx[h]) {
    op = &b->ops[b->pidx[h] - 1];
    if (op->live) {   /* not taken yet */
      op->live = NULL;
      b->nlive--;
    }
    memset(&op->u.proc, 0, sizeof op->u.proc);
  } else {
    op = push(b, OP_PROC, owner, root);
    b->pidx[h] = b->n;
    b->npidx++;
  }
  op->u.proc.iter = iter;
  return op;
}

void xgr_store_changes_proc(xgr_store_changes *b, const char *owner, uint64_t root_pid, const xgr_store_proc *p) {
  proc_copy(&proc_slot(b, owner, root_pid, p->iter)->u.proc, p, bdup, b);
}

void xgr_store_changes_hist(xgr_store_changes *b, const char *owner, uint64_t root_pid, const xgr_store_hist *h) {
  hist_copy(&push(b, OP_HIST, owner, root_pid)->u.hist, h, bdup, b);
}

void xgr_store_changes_scope_killed(xgr_store_changes *b, const char *owner, uint64_t root_pid, uint32_t group) {
  push(b, OP_SCOPE, owner, root_pid)->u.group = group;
}

void xgr_store_changes_remove_session(xgr_store_changes *b, const char *owner, uint64_t root_pid) {
  push(b, OP_REMOVE, owner, root_pid);
}

void xgr_store_wake_clear(xgr_store_wake *w) {
  if (!w) return;
  free(w->id);
  free(w->from_owner);
  free(w->to_owner);
  free(w->step);
  free(w->caller);
  free(w->rule);
  free(w->payload);
  free(w->refused);
  free(w->from_step);
  memset(w, 0, sizeof *w);
}

void xgr_store_changes_wake_out(xgr_store_changes *b, const xgr_store_wake *w) {
  assert(w->id && w->from_owner && w->to_owner && w->step && w->caller && w->payload);
  wake_copy(&push(b, OP_WAKE_OUT, w->from_owner, w->from_root)->u.wake, w, bdup, b);
}

void xgr_store_changes_wake_done(xgr_store_changes *b, const char *id, const char *reason) {
  store_op *op = push(b, OP_WAKE_DONE, id, 0);
  op->u.wake.refused = bdup(b, reason);
}

void xgr_store_audit_clear(xgr_store_audit *a) {
  if (!a) return;
  free(a->kind);
  free(a->actor);
  free(a->node);
  free(a->permit);
  free(a->detail);
  memset(a, 0, sizeof *a);
}

void xgr_store_audits_free(xgr_store_audit *a, size_t n) {
  for (size_t i = 0; i < n; i++) xgr_store_audit_clear(&a[i]);
  free(a);
}

void xgr_store_changes_forked_from(xgr_store_changes *b, const char *owner, uint64_t root_pid, const char *from) {
  assert(from);
  push(b, OP_FORKED, owner, root_pid)->u.forked_from = bdup(b, from);
}

void xgr_store_changes_pin(xgr_store_changes *b, const char *owner, uint64_t root_pid, const char *ostc_id,
                           const char *ostc_hash, const char *bundle_hash) {
  store_op *op = push(b, OP_PIN, owner, root_pid);
  op->u.pin.ostc_id = bdup(b, ostc_id ? ostc_id : "");
  op->u.pin.ostc_hash = bdup(b, ostc_hash ? ostc_hash : "");
  op->u.pin.bundle_hash = bdup(b, bundle_hash ? bundle_hash : "");
}

void xgr_store_changes_audit(xgr_store_changes *b, const char *owner, uint64_t root_pid, const xgr_store_audit *a) {
  assert(a->kind && a->actor && a->node);
  audit_copy(&push(b, OP_AUDIT, owner, root_pid)->u.audit, a, bdup, b);
}

void xgr_store_grant_clear(xgr_store_grant *g) {
  if (!g) return;
  free(g->owner);
  free(g->grantee);
  free(g->rule);
  free(g->step);
  free(g->enc_dek);
  free(g->created_by);
  memset(g, 0, sizeof *g);
}

void xgr_store_grants_free(xgr_store_grant *g, size_t n) {
  for (size_t i = 0; g && i < n; i++) xgr_store_grant_clear(&g[i]);
  free(g);
}

void xgr_store_changes_grant(xgr_store_changes *b, const xgr_store_grant *g) {
  assert(g->owner && g->grantee);
  store_op *op = push(b, OP_GRANT, g->owner, g->root_pid);
  b->grants = true;
  grant_copy(&op->u.grant, g, bdup, b);
  op->u.grant.id = 0;
  op->u.grant.created_at = 0;
}

int xgr_store_grants(xgr_store *st, const xgr_store_grant_filter *f, xgr_store_grant **out, size_t *n,
                     xgr_error *err) {
  *out = NULL;
  *n = 0;
  xgr_store_grant_filter c = *f;
  if (!c.limit) c.limit = 1000;
  return st->vt->grants(st, &c, out, n, err);
}

void xgr_store_changes_audit_unfenced(xgr_store_changes *b, const char *owner, uint64_t root_pid,
                                      const xgr_store_audit *a) {
  xgr_store_changes_audit(b, owner, root_pid, a);
  b->ops[b->n - 1].unfenced = true;
}

int xgr_store_audits(xgr_store *st, const char *owner, uint64_t root_pid, xgr_store_audit **out, size_t *n,
                     xgr_error *err) {
  *out = NULL;
  *n = 0;
  return st->vt->audits(st, owner, root_pid, out, n, err);
}

int xgr_store_wakes_refused(xgr_store *st, const char *owner, uint64_t root_pid, xgr_store_wake **out, size_t *n,
                            xgr_error *err) {
  *out = NULL;
  *n = 0;
  return st->vt->wakes_refused(st, owner, root_pid, out, n, err);
}

int xgr_store_outbox(xgr_store *st, xgr_store_wake **out, size_t *n, xgr_error *err) {
  *out = NULL;
  *n = 0;
  return st->vt->outbox(st, out, n, err);
}

void xgr_store_wakes_free(xgr_store_wake *w, size_t n) {
  for (size_t i = 0; i < n; i++) xgr_store_wake_clear(&w[i]);
  free(w);
}

/* ---- effects -> entries ----------------------------------------------------------------------- */

/* The join text of a join target in b's text arena (NULL when js is not one of o's joins),
 * written in b's scratch buffer: no allocation of its own once the scratch has the size. */
static char *bjoin(xgr_store_changes *b, const xgr_orch *o, xgr_join_state *js) {
  size_t n = xgr_session_join_write(o, js, b->scratch.p, b->scratch.cap);
  if (n && n >= b->scratch.cap) {
    b->scratch.len = 0;
    xgr__buf_reserve(&b->scratch, n);
    xgr_session_join_write(o, js, b->scratch.p, b->scratch.cap);
  }
  if (!n) return NULL;
  return memcpy(xgr__xarena_alloc(&b->text, n + 1), b->scratch.p, n + 1);
}

/* The record of a live or just-finished process, its strings in b's arena. */
static void proc_record(xgr_store_changes *b, const xgr_orch *o, const xgr_proc *p, xgr_store_proc *r) {
  memset(r, 0, sizeof *r);
  r->iter = p->iter;
  r->parent_iter = p->parent_iter;
  r->step = p->step;
  r->step_id = bdup(b, o->steps[p->step].id);
  r->status = p->status;
  r->paused = p->paused;
  r->valid = p->valid;
  r->abort_reason = p->abort_reason;
  r->group = p->group;
  r->from_group = p->from_group;
  r->next_wake_at = p->next_wake_at;
  r->created_at = p->created_at;
  r->started_at = p->started_at;
  r->finished_at = p->finished_at;
  r->payload = bjson(b, p->payload);
  r->error = bdup(b, p->error);
  if (p->join) r->join = bjoin(b, o, p->join);
}

/* The record b holds of process p of session (owner, root) when p has ended, else NULL. An ended
 * process never changes again, so the record's texts are p's. */
static const xgr_store_proc *ended_record(const xgr_store_changes *b, const char *owner, uint64_t root,
                                          const xgr_proc *p) {
  if (p->status < XGR_PROC_DONE || !b->cappidx) return NULL;
  size_t h = pidx_slot(b, owner, root, p->iter);
  if (!b->pidx[h]) return NULL;
  const store_op *op = &b->ops[b->pidx[h] - 1];
  return op->live || op->u.proc.status < XGR_PROC_DONE ? NULL : &op->u.proc;
}

typedef struct fx_ref {
  uint64_t iter;
  size_t idx;
} fx_ref;

static int ref_cmp(const void *a, const void *b) {
  const fx_ref *x = a, *y = b;
  if (x->iter != y->iter) return x->iter < y->iter ? -1 : 1;
  return x->idx < y->idx ? 1 : x->idx > y->idx ? -1 : 0;   /* latest effect first */
}

void xgr_store_changes_add_effects(xgr_store_changes *b, const xgr_session *s, const xgr_effects *fx) {
  const xgr_orch *o = xgr_session_orch(s);
  const char *owner = xgr_session_owner(s);
  uint64_t root = xgr_session_root_pid(s);
  /* refs: one per process effect and one per collector that got a delivery (at most one per
   * effect each); extra: those collectors. On the stack for the usual few effects of a call. */
  fx_ref refs_small[64];
  const xgr_proc *extra_small[32];
  bool small = fx->n <= 32;
  fx_ref *refs = small ? refs_small : xgr__xmalloc(2 * fx->n * sizeof *refs);
  const xgr_proc **extra = small ? extra_small : xgr__xmalloc(fx->n * sizeof *extra);
  size_t nref = 0;
  for (size_t i = 0; i < fx->n; i++) {
    const xgr_effect *e = &fx->items[i];
    if ((e->kind == XGR_FX_PROC || e->kind == XGR_FX_JOIN) && e->proc) refs[nref++] = (fx_ref){e->proc->iter, i};
  }
  /* deliveries: the collector of every process that became terminal got a piece or a fail
   * without an effect of its own; persist it too (its last state, like the others) */
  size_t nfx = nref;
  size_t nextra = 0;
  for (size_t i = 0; i < nfx; i++) {
    const xgr_proc *p = fx->items[refs[i].idx].proc;
    if (p->status < XGR_PROC_DONE) continue;
    const xgr_proc *t = xgr_session_collector(s, p->group);
    if (t) extra[nextra++] = t;
  }
  assert(nextra <= fx->n && nref + nextra <= 2 * fx->n);
  for (size_t i = 0; i < nextra; i++) refs[nref++] = (fx_ref){extra[i]->iter, fx->n + i};
  /* processes: the last state of each (effects point at the live struct, so any of them shows
   * the state after the call; the latest one is taken for clarity) */
  if (nref > 1) qsort(refs, nref, sizeof *refs, ref_cmp);
  reserve_ops(b, nref + fx->n + 1);   /* at most: the processes, a history row or scope per effect, the state */
  reserve_pidx(b, nref);
  for (size_t i = 0; i < nref; i++) {
    if (i && refs[i].iter == refs[i - 1].iter) continue;
    size_t k = refs[i].idx;
    const xgr_proc *p = k < fx->n ? fx->items[k].proc : extra[k - fx->n];
    store_op *op = proc_slot(b, owner, root, refs[i].iter);
    if (!b->defer_live || p->status >= XGR_PROC_DONE) {   /* terminal: the core frees it at its next call */
      proc_record(b, o, p, &op->u.proc);
    } else {   /* live: taken at the seal, so a join target that gets 32 pieces in a turn is written once */
      op->live = s;
      b->nlive++;
    }
  }
  if (!small) {
    free(refs);
    free(extra);
  }
  for (size_t i = 0; i < fx->n; i++) {
    const xgr_effect *e = &fx->items[i];
    if (e->kind == XGR_FX_HISTORY && e->proc) {
      const xgr_proc *p = e->proc;
      store_op *op = push(b, OP_HIST, owner, root);
      xgr_store_hist *h = &op->u.hist;
      h->iter = p->iter;
      h->parent_iter = p->parent_iter;
      h->step = p->step;
      h->status = e->status;
      h->valid = e->valid;
      h->abort_reason = p->abort_reason;
      h->at = e->at;
      h->finished_at = p->finished_at;
      const xgr_store_proc *r = ended_record(b, owner, root, p);   /* its texts are these: shared, not made twice */
      h->step_id = r ? r->step_id : bdup(b, o->steps[p->step].id);
      h->error = r ? r->error : bdup(b, p->error);
      h->payload = r ? r->payload : bjson(b, p->payload);
      h->api = bdup(b, e->api);
    } else if (e->kind == XGR_FX_JOIN && e->proc && e->proc->join && e->proc->join->closed &&
               e->proc->join->decl->policy == XGR_POLICY_KILL) {
      push(b, OP_SCOPE, owner, root)->u.group = e->proc->from_group;
    }
  }
  xgr_session_state st;
  xgr_session_state_get(s, &st);
  xgr_store_changes_session_state(b, owner, root, (uint8_t)xgr_session_result_of(s), st.killed_at, st.next_iter,
                                st.next_group, st.paused);
}

/* The record b holds of (owner, root, iter) (not one left for the seal), or NULL. */
static const xgr_store_proc *record_of(const xgr_store_changes *b, const char *owner, uint64_t root, uint64_t iter) {
  if (!b->cappidx) return NULL;
  size_t h = pidx_slot(b, owner, root, iter);
  if (!b->pidx[h]) return NULL;
  const store_op *op = &b->ops[b->pidx[h] - 1];
  return op->live ? NULL : &op->u.proc;
}

/* A fork's record with the new session's row (xgr_engine_fork): its forked_from and both entries. */
static void add_fork(xgr_store_changes *c, const char *owner, uint64_t root, const xgr_engine_fork *f) {
  xgr_store_changes_forked_from(c, owner, root, f->forked_from);
  const xgr_engine_audit *x[2] = {&f->forked, &f->fork};
  for (int i = 0; i < 2; i++) {
    xgr_store_audit row = {.kind = (char *)x[i]->kind, .actor = (char *)x[i]->actor, .node = (char *)x[i]->node,
                           .permit = (char *)x[i]->permit, .detail = (char *)x[i]->detail, .session_at = x[i]->session_at};
    if (i) xgr_store_changes_audit_unfenced(c, f->src_owner, f->src_root, &row);   /* another node may hold it */
    else xgr_store_changes_audit(c, owner, root, &row);
  }
}

void xgr_store_changes_add_batch(xgr_store_changes *c, const xgr_store_batch *b) {
  const char *owner = b->owner;
  uint64_t root = b->root_pid;
  const xgr_orch *o = b->orch;
  if (b->session_new) {   /* first: the store refuses the whole batch when the session exists */
    xgr_store_session row = {.owner = (char *)owner,
                             .root_pid = root,
                             .registry = (char *)(b->registry ? b->registry : ""),
                             .ostc_id = o->id,
                             .ostc_hash = (char *)o->hash,
                             .status = XGR_RESULT_RUNNING,
                             .next_iter = b->next_iter,
                             .next_group = b->next_group,
                             .paused = b->paused};
    xgr_store_changes_session_new(c, &row);
    if (b->max_total_gas) xgr_store_changes_set_max_total_gas(c, b->max_total_gas);
    if (b->bundle_hash) xgr_store_changes_set_bundle_hash(c, b->bundle_hash);
    if (b->fork) add_fork(c, owner, root, b->fork);
  }
  size_t first_op = c->n;
  reserve_ops(c, 2 * b->nprocs + b->nhist + b->nwakes + b->ndone + b->naudit + b->ngrants + 1);
  if (b->pin_ostc_hash) xgr_store_changes_pin(c, b->owner, b->root_pid, b->pin_ostc_id, b->pin_ostc_hash, b->pin_bundle_hash);
  reserve_pidx(c, b->nprocs);
  int64_t last_end = 0;
  /* processes: the last snapshot of each (an earlier one of the same iter is replaced in place) */
  for (size_t i = 0; i < b->nprocs; i++) {
    const xgr_engine_proc *e = &b->procs[i];
    store_op *op = proc_slot(c, owner, root, e->iter);
    xgr_store_proc *r = &op->u.proc;
    r->parent_iter = e->parent_iter;
    r->step = e->step;
    r->step_id = bdup(c, e->step_id ? e->step_id : "");
    r->status = e->status;
    r->paused = e->paused;
    r->valid = e->valid;
    r->abort_reason = e->abort_reason;
    r->group = e->group;
    r->from_group = e->from_group;
    r->next_wake_at = e->next_wake_at;
    r->created_at = e->created_at;
    r->started_at = e->started_at;
    r->finished_at = e->finished_at;
    r->payload = btext(c, e->payload);
    r->error = bdup(c, e->error);
    r->join = bdup(c, e->join_state);
    if (e->is_join && e->join_closed && e->join_policy == XGR_POLICY_KILL && e->from_group)
      push(c, OP_SCOPE, owner, root)->u.group = e->from_group;
    if (e->finished_at > last_end) last_end = e->finished_at;
  }
  /* history rows: parent, payload, error and end time from the process's record of the same batch
   * (a step's result and its history row are always in the same turn); texts shared, not copied */
  for (size_t i = 0; i < b->nhist; i++) {
    const xgr_engine_hist *h = &b->hist[i];
    const xgr_store_proc *pr = record_of(c, owner, root, h->iter);
    xgr_store_hist row = {.iter = h->iter,
                          .parent_iter = pr ? pr->parent_iter : 0,
                          .step = h->step,
                          .step_id = pr ? pr->step_id : bdup(c, o->steps[h->step < o->nsteps ? h->step : 0].id),
                          .status = h->status,
                          .valid = h->valid,
                          .abort_reason = pr ? pr->abort_reason : 0,
                          .at = h->at,
                          .finished_at = pr && pr->finished_at ? pr->finished_at : h->at,
                          .error = pr ? pr->error : NULL,
                          .payload = pr ? pr->payload : NULL,
                          .api = bdup(c, h->api)};
    push(c, OP_HIST, owner, root)->u.hist = row;
  }
  /* the outbox: wake-ups produced by these results, in the same commit; and the ones this session
   * applied or refused, removed in the commit of what applying them changed */
  for (size_t i = 0; i < b->nwakes; i++) {
    const xgr_engine_wake *w = &b->wakes[i];
    xgr_store_wake row = {.id = bdup(c, w->id),
                          .from_owner = bdup(c, owner),
                          .from_root = root,
                          .to_owner = bdup(c, w->to_owner),
                          .to_root = w->to_root,
                          .step = bdup(c, w->step),
                          .caller = bdup(c, w->caller),
                          .rule = bdup(c, w->rule),
                          .payload = btext(c, w->payload),
                          .from_iter = w->from_iter,
                          .from_step = bdup(c, w->from_step)};
    assert(row.id && row.to_owner && row.step && row.caller);
    push(c, OP_WAKE_OUT, owner, root)->u.wake = row;
  }
  for (size_t i = 0; i < b->ndone; i++) xgr_store_changes_wake_done(c, b->done[i], b->done_reason[i]);
  /* branch grants of the batch's step results: in the commit of their history rows */
  for (size_t i = 0; i < b->ngrants; i++) {
    const xgr_engine_grant *x = &b->grants[i];
    xgr_store_grant row = {.owner = (char *)owner, .root_pid = root, .grantee = (char *)x->grantee,
                           .rights = x->rights, .expires_at = x->expires_at, .rule = (char *)x->rule,
                           .step = (char *)x->step, .created_by = (char *)(x->rule ? x->rule : owner)};
    xgr_store_changes_grant(c, &row);
  }
  /* the audit trail: the control actions and wake-ups whose changes this batch holds */
  for (size_t i = 0; i < b->naudit; i++) {
    const xgr_engine_audit *x = &b->audit[i];
    xgr_store_audit row = {.kind = (char *)x->kind, .actor = (char *)x->actor, .node = (char *)x->node,
                           .permit = (char *)x->permit, .detail = (char *)x->detail, .session_at = x->session_at};
    xgr_store_changes_audit(c, owner, root, &row);
  }
  /* A batch of outbox entries alone (a wake-up refused or applied after the session's last result
   * committed, possibly after it ended) changes nothing of the session: no state entry, which
   * would say "running" and bring an ended session's row back. */
  if (b->nprocs || b->nhist || b->finished || b->due > 0) {
    uint8_t status = XGR_RESULT_RUNNING;
    if (b->finished && (b->result == XGR_RESULT_COMPLETED || b->result == XGR_RESULT_KILLED)) status = (uint8_t)b->result;
    xgr_store_changes_session_state(c, owner, root, status, status == XGR_RESULT_KILLED ? last_end : 0, b->next_iter,
                                    b->next_group, b->paused);
    if (b->due > 0 && status == XGR_RESULT_RUNNING) xgr_store_changes_set_due(c, b->due);   /* hibernation */
  }
  if (b->quota) {   /* the quotas: this batch's bytes, and the session's count after it in its row */
    b->quota->batch_bytes = ops_bytes(c, first_op);
    if (c->last_state) {
      store_op *st = &c->ops[c->last_state - 1];
      st->u.state.has_bytes = true;
      st->u.state.stored_bytes = b->quota->stored_bytes + b->quota->batch_bytes;
    }
  }
}

void xgr_store_changes_add_session_start(xgr_store_changes *b, const xgr_session *s, const char *registry) {
  const xgr_orch *o = xgr_session_orch(s);
  xgr_session_state st;
  xgr_session_state_get(s, &st);
  xgr_store_session row = {.owner = (char *)xgr_session_owner(s),
                           .root_pid = xgr_session_root_pid(s),
                           .registry = (char *)(registry ? registry : ""),
                           .ostc_id = o->id,
                           .ostc_hash = (char *)o->hash,
                           .status = (uint8_t)xgr_session_result_of(s),
                           .killed_at = st.killed_at,
                           .next_iter = st.next_iter,
                           .next_group = st.next_group,
                           .paused = st.paused};
  xgr_store_changes_session(b, &row);
}

void xgr_store_changes_set_max_total_gas(xgr_store_changes *b, const char *max_total_gas) {
  for (size_t i = b->n; i > 0; i--)
    if (b->ops[i - 1].kind == OP_SESSION) {
      b->ops[i - 1].u.session.max_total_gas = bdup(b, max_total_gas ? max_total_gas : "");
      return;
    }
}

void xgr_store_changes_set_bundle_hash(xgr_store_changes *b, const char *bundle_hash) {
  for (size_t i = b->n; i > 0; i--)
    if (b->ops[i - 1].kind == OP_SESSION) {
      b->ops[i - 1].u.session.bundle_hash = bdup(b, bundle_hash ? bundle_hash : "");
      return;
    }
}

void xgr_store_changes_session_new(xgr_store_changes *b, const xgr_store_session *s) {
  xgr_store_changes_session(b, s);
  b->ops[b->n - 1].if_absent = true;
}

/* ---- submit and the synchronous helpers ----------------------------------------------------------- */

void xgr_store_changes_defer_live(xgr_store_changes *b) { b->defer_live = true; }

void xgr_store_changes_seal(xgr_store_changes *b) {
  for (size_t i = 0; b->nlive && i < b->n; i++) {
    store_op *op = &b->ops[i];
    if (!op->live) continue;
    const xgr_session *s = op->live;
    const xgr_proc *p = xgr_session_find(s, op->u.proc.iter);
    op->live = NULL;
    b->nlive--;
    if (p) {
      proc_record(b, xgr_session_orch(s), p, &op->u.proc);
    } else if (!b->rc) {   /* it ended in a core call whose effects went elsewhere: its last state is unknown */
      b->rc = XGR_EINVAL;
      xgr_error_set(&b->err, XGR_EINVAL, "proc", "process %s/%llu ended after its state was added to this batch, "
                    "in a core call whose effects were not added to it", op->owner, (unsigned long long)op->u.proc.iter);
    }
  }
  assert(b->nlive == 0);
}

int xgr_store_submit(xgr_store *st, xgr_store_changes *b, xgr_store_commit_fn done, void *ctx) {
  b->done = done;
  b->ctx = ctx;
  xgr_store_changes_seal(b);
  if (b->rc) {   /* a process record could not be taken (xgr_store_changes_seal) */
    int rc = b->rc;
    xgr__store_signal(st, b);
    return rc;
  }
  xgr_error ferr;
  int rc = xgr_store_failed(st, &ferr);
  if (rc) {
    b->rc = rc;
    b->err = ferr;
    xgr__store_signal(st, b);
    return rc;
  }
  if (st->cfg.read_only) {
    b->rc = XGR_EPERM;
    xgr_error_set(&b->err, XGR_EPERM, NULL, "the store was opened read-only");
    xgr__store_signal(st, b);
    return XGR_EPERM;
  }
  st->vt->submit(st, b);
  return 0;
}

typedef struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  int rc;
  xgr_error err;
} waiter;

static void wait_done(void *ctx, int rc, const xgr_error *err) {
  waiter *w = ctx;
  pthread_mutex_lock(&w->mu);
  w->rc = rc;
  if (err) w->err = *err;
  w->done = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

int xgr_store_commit(xgr_store *st, xgr_store_changes *b, xgr_error *err) {
  waiter w = {.done = false};
  pthread_mutex_init(&w.mu, NULL);
  pthread_cond_init(&w.cv, NULL);
  xgr_error_clear(&w.err);
  xgr_store_submit(st, b, wait_done, &w);
  pthread_mutex_lock(&w.mu);
  while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
  pthread_mutex_unlock(&w.mu);
  pthread_mutex_destroy(&w.mu);
  pthread_cond_destroy(&w.cv);
  if (w.rc && err) *err = w.err;
  return w.rc;
}

void xgr_store_flush(xgr_store *st) { st->vt->flush(st); }

int xgr_store_next_process_id(xgr_store *st, const char *owner, uint64_t *root_pid, xgr_error *err) {
  if (!owner || !*owner) return xgr_error_set(err, XGR_EINVAL, "owner", "an owner address is needed");
  xgr_store_changes *b = xgr_store_changes_new();
  *root_pid = 0;
  push(b, OP_NEXTPID, owner, 0)->u.next_pid = root_pid;
  return xgr_store_commit(st, b, err);
}

int xgr_store_mark_once(xgr_store *st, const char *key, int64_t expires_at, int64_t now, xgr_error *err) {
  if (!key || !*key || strlen(key) > 200) return xgr_error_set(err, XGR_EINVAL, NULL, "a mark's key is 1..200 bytes");
  xgr_store_changes *b = xgr_store_changes_new();
  store_op *op = push(b, OP_MARK, key, 0);
  op->u.mark.expires_at = expires_at;
  op->u.mark.now = now;
  return xgr_store_commit(st, b, err);
}

int xgr_store_owner_bytes(xgr_store *st, const char *owner, uint64_t *bytes, xgr_error *err) {
  *bytes = 0;
  if (!owner || !*owner) return xgr_error_set(err, XGR_EINVAL, "owner", "an owner address is needed");
  return st->vt->owner_bytes(st, owner, bytes, err);
}

int xgr_store_peek_process_id(xgr_store *st, const char *owner, uint64_t *root_pid, xgr_error *err) {
  if (!owner || !*owner) return xgr_error_set(err, XGR_EINVAL, "owner", "an owner address is needed");
  return st->vt->peek_pid(st, owner, root_pid, err);
}

int xgr_store_register(xgr_store *st, xgr_registry_kind kind, const char *id, const char *owner, const char *content,
                       size_t len, xgr_store_doc *out, xgr_error *err) {
  if (!id || !*id) return xgr_error_set(err, XGR_EINVAL, "id", "a registered document needs an id");
  if (!content) return xgr_error_set(err, XGR_EINVAL, "content", "no content");
  xgr_store_doc d = {.kind = kind, .id = (char *)id, .owner = (char *)(owner ? owner : ""),
                     .content = (char *)content, .len = len};
  char hash[67];
  xgr__store_doc_hash(content, len, hash);
  d.hash = hash;
  d.registered_at = xgr__store_now_ms(st);
  xgr_store_doc *io = xgr__xcalloc(1, sizeof *io);
  xgr__store_doc_copy(io, &d);
  xgr_store_changes *b = xgr_store_changes_new();
  push(b, OP_REGISTER, owner, 0)->u.doc = io;
  int rc = xgr_store_commit(st, b, err);
  if (!rc && out) *out = *io;
  else xgr_store_doc_clear(io);
  free(io);
  return rc;
}

/* ---- reading ---------------------------------------------------------------------------------------- */

int xgr_store_doc_get(xgr_store *st, xgr_registry_kind kind, const char *id, uint32_t version, xgr_store_doc *out,
                      xgr_error *err) {
  return st->vt->doc_get(st, kind, id, version, NULL, out, err);
}

int xgr_store_doc_by_hash(xgr_store *st, xgr_registry_kind kind, const char *hash, xgr_store_doc *out,
                          xgr_error *err) {
  return st->vt->doc_get(st, kind, NULL, 0, hash, out, err);
}

int xgr_store_session_get(xgr_store *st, const char *owner, uint64_t root_pid, xgr_store_session *out,
                          xgr_error *err) {
  return st->vt->session_get(st, owner, root_pid, out, err);
}

int xgr_store_procs(xgr_store *st, const char *owner, uint64_t root_pid, xgr_store_proc **out, size_t *n,
                    xgr_error *err) {
  return st->vt->procs(st, owner, root_pid, out, n, err);
}

int xgr_store_history(xgr_store *st, const char *owner, uint64_t root_pid, xgr_store_hist **out, size_t *n,
                      xgr_error *err) {
  return st->vt->history(st, owner, root_pid, out, n, err);
}

int xgr_store_sessions(xgr_store *st, const char *owner, uint64_t before, size_t limit, xgr_store_session **out,
                       size_t *n, xgr_error *err) {
  *out = NULL;
  *n = 0;
  if (limit == 0) limit = 1000;
  if (before != UINT64_MAX) return st->vt->sessions(st, owner, before ? before : UINT64_MAX, limit, out, n, err);
  /* a cursor of 2^64-1 (the last page ended at that rootPid) lists what is below it; the backends
   * read 2^64-1 as "no bound" (it lists itself), so one more row is read and that one dropped */
  int rc = st->vt->sessions(st, owner, UINT64_MAX, limit + 1, out, n, err);
  if (rc || !*n) return rc;
  if ((*out)[0].root_pid == UINT64_MAX) {
    xgr_store_session_clear(&(*out)[0]);
    memmove(*out, *out + 1, (*n - 1) * sizeof **out);
    (*n)--;
  } else if (*n > limit) {
    xgr_store_session_clear(&(*out)[--*n]);
  }
  return 0;
}

void xgr_store_sessions_free(xgr_store_session *s, size_t n) {
  for (size_t i = 0; i < n; i++) xgr_store_session_clear(&s[i]);
  free(s);
}

int xgr_store_live_owners(xgr_store *st, const char *owner, size_t max, xgr_store_owner_live **out, size_t *n,
                          xgr_error *err) {
  *out = NULL;
  *n = 0;
  assert(st->vt->live_owners);
  int rc = st->vt->live_owners(st, owner, max ? max : 100, out, n, err);
  if (rc) {   /* nothing for the caller to free on failure */
    xgr_store_owners_free(*out, *n);
    *out = NULL;
    *n = 0;
  }
  return rc;
}

int xgr_store_owners_after(xgr_store *st, const char *after, size_t max, xgr_store_owner_live **out, size_t *n,
                           xgr_error *err) {
  *out = NULL;
  *n = 0;
  assert(st->vt->owners_after);
  int rc = st->vt->owners_after(st, after ? after : "", max ? max : 100, out, n, err);
  if (rc) {
    xgr_store_owners_free(*out, *n);
    *out = NULL;
    *n = 0;
  }
  return rc;
}

void xgr_store_owners_free(xgr_store_owner_live *o, size_t n) {
  for (size_t i = 0; i < n; i++) free(o[i].owner);
  free(o);
}

int xgr_store_load_some(xgr_store *st, const xgr_store_load_filter *f, int (*fn)(void *ctx, const xgr_store_live *l),
                        void *ctx, xgr_error *err) {
  if (!st->vt->load_some)
    return xgr_error_set(err, XGR_EUNSUPPORTED, NULL, "the %s store cannot load sessions selectively", st->vt->name);
  return st->vt->load_some(st, f, fn, ctx, err);
}

int xgr_store_due(xgr_store *st, const xgr_store_due_key *after, int64_t upto, xgr_store_due_key *out, size_t max,
                  size_t *n, xgr_error *err) {
  *n = 0;
  if (!st->vt->due) return xgr_error_set(err, XGR_EUNSUPPORTED, NULL, "the %s store has no due index", st->vt->name);
  return st->vt->due(st, after, upto, out, max, n, err);
}

int xgr_store_load_live(xgr_store *st, int (*fn)(void *ctx, const xgr_store_live *l), void *ctx, xgr_error *err) {
  return st->vt->load_live(st, fn, ctx, err);
}

int xgr_store_gc(xgr_store *st, size_t *deleted, xgr_error *err) {
  size_t d = 0;
  int rc = st->cfg.read_only ? xgr_error_set(err, XGR_EPERM, NULL, "the store was opened read-only")
                             : st->vt->gc(st, &d, err);
  if (deleted) *deleted = d;
  return rc;
}

/* ---- recovery ------------------------------------------------------------------------------------------ */

xgr_session *xgr_store_restore_session(const xgr_orch *o, const xgr_store_live *l, const xgr_session_config *cfg,
                                       int64_t now, xgr_effects *fx, xgr_error *err) {
  const xgr_store_session *ss = l->session;
  if (ss->ostc_hash && *ss->ostc_hash && strcmp(ss->ostc_hash, o->hash)) {
    xgr_error_set(err, XGR_EMISMATCH, "ostcHash", "session %s/%" PRIu64 " is pinned to orchestration %s, not %s",
                  ss->owner, ss->root_pid, ss->ostc_hash, o->hash);
    return NULL;
  }
  xgr_session_state state = {.next_iter = ss->next_iter, .next_group = ss->next_group, .paused = ss->paused,
                             .killed = ss->killed_at != 0, .killed_at = ss->killed_at};
  xgr_session *s = xgr_session_restore_begin(o, ss->owner, ss->root_pid, cfg, &state);
  for (size_t i = 0; i < l->nprocs; i++) {
    const xgr_store_proc *r = &l->procs[i];
    if (r->status > XGR_PROC_RUNNING) continue;
    xgr_proc p;
    memset(&p, 0, sizeof p);
    p.iter = r->iter;
    p.parent_iter = r->parent_iter;
    p.step = r->step;
    p.status = r->status;
    p.paused = r->paused;
    p.valid = r->valid;
    p.group = r->group;
    p.from_group = r->from_group;
    p.next_wake_at = r->next_wake_at;
    p.created_at = r->created_at;
    p.started_at = r->started_at;
    p.finished_at = r->finished_at;
    if (xgr_value_from_json_text(r->payload ? r->payload : "{}", strlen(r->payload ? r->payload : "{}"), 0,
                                 &p.payload, err)) {
      xgr_session_free(s);
      return NULL;
    }
    int rc = xgr_session_restore_proc(s, &p, r->join, err);
    xgr_value_release(p.payload);
    if (rc) {
      xgr_session_free(s);
      return NULL;
    }
  }
  for (size_t i = 0; i < l->nkilled; i++) xgr_session_restore_scope_killed(s, l->killed_groups[i]);
  if (xgr_session_restore_end(s, now, fx, err)) {
    xgr_session_free(s);
    return NULL;
  }
  return s;
}

/* ---- operations on many sessions (batch_ops) ------------------------------------------------------ */

void xgr__store_batchop_copy(xgr_store_batchop *d, const xgr_store_batchop *s) {
  *d = *s;
  d->id = heap_dup(NULL, s->id);
  d->caller = heap_dup(NULL, s->caller);
  d->action = heap_dup(NULL, s->action);
  d->spec = heap_dup(NULL, s->spec);
  d->state = heap_dup(NULL, s->state);
  d->cursor = heap_dup(NULL, s->cursor);
  d->error = heap_dup(NULL, s->error);
  d->driver = heap_dup(NULL, s->driver);
}

void xgr_store_batchop_clear(xgr_store_batchop *o) {
  if (!o) return;
  free(o->id);
  free(o->caller);
  free(o->action);
  free(o->spec);
  free(o->state);
  free(o->cursor);
  free(o->error);
  free(o->driver);
  memset(o, 0, sizeof *o);
}

void xgr_store_batchops_free(xgr_store_batchop *o, size_t n) {
  for (size_t i = 0; i < n; i++) xgr_store_batchop_clear(&o[i]);
  free(o);
}

static int bop_unsupported(xgr_store *st, xgr_error *err) {
  return xgr_error_set(err, XGR_EUNSUPPORTED, NULL, "the %s store does not keep batch operations", st->vt->name);
}

int xgr_store_batchop_create(xgr_store *st, const xgr_store_batchop *op, uint32_t max_running, uint32_t max_kept,
                             xgr_error *err) {
  assert(op && op->id && op->caller && op->action && op->spec);
  if (!st->vt->bop_create) return bop_unsupported(st, err);
  if (st->cfg.read_only) return xgr_error_set(err, XGR_ESTATE, NULL, "the store is open for reading only");
  return st->vt->bop_create(st, op, max_running, max_kept, err);
}

int xgr_store_batchop_claim(xgr_store *st, const char *node, int64_t lease_ms, bool force, xgr_store_batchop *out,
                            bool *found, xgr_error *err) {
  assert(node && strlen(node) <= 200 && lease_ms > 0);
  memset(out, 0, sizeof *out);
  *found = false;
  if (!st->vt->bop_claim) return bop_unsupported(st, err);
  return st->vt->bop_claim(st, node, lease_ms, force, out, found, err);
}

int xgr_store_batchop_progress(xgr_store *st, const xgr_store_batchop *op, int64_t lease_ms, char *state,
                               xgr_error *err) {
  assert(op && op->id && op->driver && op->state && lease_ms > 0);
  state[0] = '\0';
  if (!st->vt->bop_progress) return bop_unsupported(st, err);
  return st->vt->bop_progress(st, op, lease_ms, state, err);
}

int xgr_store_batchop_cancel(xgr_store *st, const char *id, bool *changed, xgr_error *err) {
  *changed = false;
  if (!st->vt->bop_cancel) return bop_unsupported(st, err);
  return st->vt->bop_cancel(st, id, changed, err);
}

int xgr_store_batchop_get(xgr_store *st, const char *id, xgr_store_batchop *out, xgr_error *err) {
  memset(out, 0, sizeof *out);
  if (!st->vt->bop_read) return bop_unsupported(st, err);
  xgr_store_batchop *v = NULL;
  size_t n = 0;
  int rc = st->vt->bop_read(st, id, NULL, 1, &v, &n, err);
  if (rc) return rc;
  if (!n) {
    free(v);
    return xgr_error_set(err, XGR_ENOTFOUND, NULL, "no batch operation %s", id);
  }
  *out = v[0];
  for (size_t i = 1; i < n; i++) xgr_store_batchop_clear(&v[i]);
  free(v);
  return 0;
}

int xgr_store_batchops(xgr_store *st, const char *caller, size_t limit, xgr_store_batchop **out, size_t *n,
                       xgr_error *err) {
  *out = NULL;
  *n = 0;
  if (!st->vt->bop_read) return bop_unsupported(st, err);
  return st->vt->bop_read(st, NULL, caller, limit ? limit : 100, out, n, err);
}
