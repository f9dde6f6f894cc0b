/* postgres_bulk.c — the PostgreSQL store's bulk path: a group of session rows, states, scopes,
 * process and history rows written in a dozen statements rather than one per entry. Array
 * literals for the unnest statements in the pipeline (xgr__pg_send_bulk), then — COPY cannot be pipelined
 * — binary COPY of the process rows (new ones straight into proc_rt or packed into proc_born,
 * stored ones through the staging table and one upsert) and of the history rows, some of which
 * keep their process's record (xgr__pg_copy_rows); and the owners' counters of a split group raised on
 * their own (xgr__pg_raise_owners). The encodings (PostgreSQL's array literal text, COPY's binary format,
 * NUMERIC's base-10000 digits) are written here without printf. Part of the PostgreSQL backend
 * (postgres.c has the overview). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres_impl.h"
#include "value/value_impl.h"   /* xgr__json_write_string */

/* ---- bulk rows: the process and history rows of a group in two statements ------------------------ */

/* A column of a bulk statement: a PostgreSQL array literal being built ({"a","b",NULL,...}). */
typedef struct colbuf {
  xgr_buf b;
} colbuf;

static void col_sep(colbuf *c) { xgr__buf_putc(&c->b, c->b.len ? ',' : '{'); }

static void col_text(colbuf *c, const char *v) {
  col_sep(c);
  if (!v) {
    xgr__buf_puts(&c->b, "NULL");
    return;
  }
  xgr__buf_putc(&c->b, '"');
  const char *run = v;
  for (const char *q = v; *q; q++)
    if (*q == '"' || *q == '\\') {
      xgr__buf_put(&c->b, run, (size_t)(q - run));
      xgr__buf_putc(&c->b, '\\');
      run = q;
    }
  xgr__buf_puts(&c->b, run);
  xgr__buf_putc(&c->b, '"');
}

/* Decimal digits without printf (xgr__buf_put_u64/_i64): a group has some 30 numbers per row and
 * tens of thousands of rows, and printf's parsing of its format showed as the writer's main cost. */
static void col_u64(colbuf *c, uint64_t x) {
  col_sep(c);
  xgr__buf_put_u64(&c->b, x);
}

static void col_i64(colbuf *c, int64_t x) {
  col_sep(c);
  xgr__buf_put_i64(&c->b, x);
}

/* ---- binary COPY: the history rows of a group ------------------------------------------------------
 *
 * History rows are only ever inserted, so a group's go into proc_steps with one
 * `COPY ... FROM STDIN (FORMAT binary)`: no array literals to build and parse, no unnest, and the
 * server inserts them in multi-row batches. The format: a header, then per row a field count
 * and each field as a 32-bit length (-1: NULL) and its binary value, network byte order; a
 * trailer of -1. xgr_u64 columns are NUMERIC: base-10000 digits (numeric_send's format). */

static const char copy_header[19] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";

static inline void cp_be(xgr_buf *b, uint64_t v, int bytes) {
  assert(bytes >= 1 && bytes <= 8);
  if (b->len + (size_t)bytes + 1 > b->cap) xgr__buf_reserve(b, (size_t)bytes);
  unsigned char *t = (unsigned char *)b->p + b->len;   /* written in place: this runs for every field */
  for (int i = bytes - 1; i >= 0; i--, v >>= 8) t[i] = (unsigned char)v;
  b->len += (size_t)bytes;
}
static void cp_row(xgr_buf *b, int fields) { cp_be(b, (uint64_t)fields, 2); }
static void cp_text(xgr_buf *b, const char *v) {
  if (!v) {
    cp_be(b, 0xFFFFFFFFu, 4);
    return;
  }
  size_t n = strlen(v);
  assert(n < INT32_MAX);
  cp_be(b, n, 4);
  xgr__buf_put(b, v, n);
}
static void cp_i32(xgr_buf *b, int32_t v) {
  cp_be(b, 4, 4);
  cp_be(b, (uint32_t)v, 4);
}
static void cp_i64(xgr_buf *b, int64_t v) {
  cp_be(b, 8, 4);
  cp_be(b, (uint64_t)v, 8);
}
/* a NUMERIC: ndigits, weight (of the first digit, in powers of 10000), sign, dscale, digits */
static void cp_num(xgr_buf *b, uint64_t v) {
  uint16_t d[5];
  int n = 0;
  for (; v; v /= 10000) d[n++] = (uint16_t)(v % 10000);   /* least significant first */
  int weight = n - 1, low = 0;
  while (low < n && d[low] == 0) low++;                     /* trailing zero digits are implied */
  int nd = n - low;
  cp_be(b, 8 + 2 * (uint64_t)nd, 4);
  cp_be(b, (uint64_t)nd, 2);
  cp_be(b, (uint16_t)(n ? weight : 0), 2);
  cp_be(b, 0, 2);   /* sign: positive */
  cp_be(b, 0, 2);   /* dscale */
  for (int i = n - 1; i >= low; i--) cp_be(b, d[i], 2);
}

/* The start of a row of proc_rt or proc_steps in COPY's binary format (the header first when b is
 * empty): its column count, then the columns both tables begin with — owner, root_pid, iter,
 * parent_iter, step, step_id. */
static void cp_proc_key(xgr_buf *b, int ncols, const store_op *op, uint64_t iter, uint64_t parent_iter, int32_t step,
                        const char *step_id) {
  if (!b->len) xgr__buf_put(b, copy_header, sizeof copy_header);
  cp_row(b, ncols);
  cp_text(b, op->owner);
  cp_num(b, op->root);
  cp_num(b, iter);
  cp_num(b, parent_iter);
  cp_i32(b, step);
  cp_text(b, step_id ? step_id : "");
}

/* One process row in COPY's binary format (the columns PROC_ROW_COLS); the header first when b is
 * empty. Its terminal_at is now when the process has ended. */
static void cp_proc(xgr_buf *b, const store_op *op, int64_t now) {
  const xgr_store_proc *x = &op->u.proc;
  cp_proc_key(b, 20, op, x->iter, x->parent_iter, x->step, x->step_id);
  cp_i32(b, x->status);
  cp_i32(b, x->paused);
  cp_i32(b, x->valid);
  cp_i32(b, x->abort_reason);
  cp_i64(b, x->group);
  cp_i64(b, x->from_group);
  cp_i64(b, x->next_wake_at);
  cp_i64(b, x->created_at);
  cp_i64(b, x->started_at);
  cp_i64(b, x->finished_at);
  cp_text(b, x->payload ? x->payload : "{}");
  cp_text(b, x->error);
  cp_text(b, x->join);
  if (x->status >= XGR_PROC_DONE) cp_i64(b, now);
  else cp_text(b, NULL);
}

/* The fewest new live processes of one session in a group that go into one row of proc_born (a
 * pack) rather than a row each in proc_rt; the most in one pack, and the payload and join-state
 * bytes after which a pack takes no more members (a larger group of new processes makes several
 * packs: no field comes near PostgreSQL's 1 GB, no row is rewritten whole for one member). */
#define PACK_MIN 2
#define PACK_MAX 512
#define PACK_BYTES ((size_t)256 << 10)

/* The bytes of a process record's texts that grow with the process (its payload and join state). */
static size_t rec_bytes(const xgr_store_proc *p) {
  return (p->payload ? strlen(p->payload) : 0) + (p->join ? strlen(p->join) : 0);
}

/* A JSON string of text t (NULL: null) in b. */
static void pack_str(xgr_buf *b, const char *t) {
  if (t) xgr__json_write_string(b, t, strlen(t));
  else xgr__buf_put(b, "null", 4);
}

/* One row of proc_born in COPY's binary format: the n >= PACK_MIN new live processes rows[0..n)
 * of one session, in iter order (the header first when b is empty). Their records are one text
 * field, a JSON array with an array of each record's fields in PROC_COLS' order (BORN_UNNEST
 * reads it): numbers as JSON numbers, texts as JSON strings, so every text comes back exactly. */
static void cp_pack(xgr_buf *b, const store_op *const *rows, size_t n) {
  assert(n >= PACK_MIN);
  if (!b->len) xgr__buf_put(b, copy_header, sizeof copy_header);
  cp_row(b, 5);
  cp_text(b, rows[0]->owner);
  cp_num(b, rows[0]->root);
  cp_num(b, rows[0]->u.proc.iter);
  cp_num(b, rows[n - 1]->u.proc.iter);
  size_t at = b->len;
  cp_be(b, 0, 4);   /* the text's length, filled in below */
  xgr__buf_putc(b, '[');
  for (size_t i = 0; i < n; i++) {
    const xgr_store_proc *x = &rows[i]->u.proc;
    assert(i == 0 || x->iter > rows[i - 1]->u.proc.iter);
    xgr__buf_put(b, i ? ",[" : "[", i ? 2 : 1);
    xgr__buf_put_u64(b, x->iter);
    xgr__buf_putc(b, ',');
    xgr__buf_put_u64(b, x->parent_iter);
    xgr__buf_putc(b, ',');
    xgr__buf_put_i64(b, x->step);
    xgr__buf_putc(b, ',');
    pack_str(b, x->step_id ? x->step_id : "");
    int64_t v[] = {x->status, x->paused, x->valid, x->abort_reason, x->group, x->from_group,
                   x->next_wake_at, x->created_at, x->started_at, x->finished_at};
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
      xgr__buf_putc(b, ',');
      xgr__buf_put_i64(b, v[k]);
    }
    xgr__buf_putc(b, ',');
    pack_str(b, x->payload ? x->payload : "{}");
    xgr__buf_putc(b, ',');
    pack_str(b, x->error);
    xgr__buf_putc(b, ',');
    pack_str(b, x->join);
    xgr__buf_putc(b, ']');
  }
  xgr__buf_putc(b, ']');
  uint64_t len = b->len - at - 4;
  assert(len < INT32_MAX);
  for (int i = 3; i >= 0; i--, len >>= 8) b->p[at + (size_t)i] = (char)(unsigned char)len;
}

/* Can history row h keep the record of process row p (migration 12)? When p is the state of the
 * process that h's result ended, so that every column both have says the same (the record's
 * started_at is the row's `at`). Anything else keeps its proc_rt row. */
static bool keeps_record(const xgr_store_hist *h, const xgr_store_proc *p) {
  return p->status >= XGR_PROC_DONE && p->status == h->status && p->iter == h->iter &&
         p->parent_iter == h->parent_iter && p->step == h->step && p->valid == h->valid &&
         p->abort_reason == h->abort_reason && p->started_at == h->at && p->finished_at == h->finished_at &&
         h->payload && !strcmp(p->payload ? p->payload : "{}", h->payload) &&
         !strcmp(p->step_id ? p->step_id : "", h->step_id ? h->step_id : "") &&
         (p->error ? h->error && !strcmp(p->error, h->error) : !h->error);
}

/* One history row in COPY's binary format (the columns of COPY_HIST); the header first when b is
 * empty. recorded_at is now; the payload is left out with no_payload (cfg.no_history_payload).
 * rec: the process record the row keeps (keeps_record), or NULL. */
static void cp_hist(xgr_buf *b, const store_op *op, int64_t now, bool no_payload, const xgr_store_proc *rec) {
  const xgr_store_hist *x = &op->u.hist;
  assert(!rec || (!no_payload && keeps_record(x, rec)));
  cp_proc_key(b, 21, op, x->iter, x->parent_iter, x->step, x->step_id);
  cp_i32(b, x->status);
  cp_i32(b, x->valid);
  cp_i32(b, x->abort_reason);
  cp_i64(b, x->at);
  cp_i64(b, x->finished_at);
  cp_text(b, x->error);
  cp_text(b, no_payload ? NULL : x->payload);
  cp_i64(b, now);
  cp_text(b, x->api);
  if (rec) {
    cp_i32(b, rec->paused);
    cp_i64(b, rec->group);
    cp_i64(b, rec->from_group);
    cp_i64(b, rec->next_wake_at);
    cp_i64(b, rec->created_at);
    cp_text(b, rec->join);
  } else {
    for (int k = 0; k < 6; k++) cp_text(b, NULL);
  }
}

/* Can the group go through the bulk path? Only entries whose order relative to the process and
 * history rows does not matter: session rows, states, scopes, audit entries (inserts of their
 * own, sent in the pipeline; no removal, no registry, no counters, no marks). */
bool xgr__pg_bulk_ok(xgr_store_changes **list, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < list[i]->n; k++) {
      op_kind t = list[i]->ops[k].kind;
      if (t != OP_SESSION && t != OP_STATE && t != OP_PROC && t != OP_HIST && t != OP_SCOPE && t != OP_AUDIT)
        return false;
    }
  return true;
}

static size_t key_hash(const char *owner, uint64_t root, uint64_t iter) {
  uint64_t x = root * 0x9E3779B97F4A7C15ULL ^ iter;
  for (const char *p = owner; *p; p++) x = (x ^ (unsigned char)*p) * 0x100000001b3ULL;
  x ^= x >> 31;
  return (size_t)x;
}

/* by (owner, rootPid, iter) for process entries, (owner, rootPid) for the others */
static size_t proc_key_hash(const store_op *op) {
  return key_hash(op->owner, op->root, op->kind == OP_PROC ? op->u.proc.iter : 0);
}

/* qsort: entries by session key (owner in byte order, as COLLATE "C"; rootPid) */
static int session_key_cmp(const void *a, const void *b) {
  const store_op *x = *(const store_op *const *)a, *y = *(const store_op *const *)b;
  int c = strcmp(x->owner, y->owner);
  if (c) return c;
  return x->root < y->root ? -1 : x->root > y->root;
}

/* qsort: process entries by session key, then iter */
static int proc_key_cmp(const void *a, const void *b) {
  int c = session_key_cmp(a, b);
  if (c) return c;
  const store_op *x = *(const store_op *const *)a, *y = *(const store_op *const *)b;
  return x->u.proc.iter < y->u.proc.iter ? -1 : x->u.proc.iter > y->u.proc.iter;
}

/* Close the array literals of the columns c[0..ncol) and append them to p as text parameters;
 * text[k] gets column k's text (the caller frees it after the statement). */
static void cols_params(colbuf *c, int ncol, params *p, char **text) {
  for (int k = 0; k < ncol; k++) {
    xgr__buf_putc(&c[k].b, '}');
    text[k] = xgr__buf_finish(&c[k].b, NULL);
    p_text(p, text[k]);
  }
}

/* Send a bulk statement whose parameters are the columns c[0..ncol) (array literals being built)
 * and then those of extra, when it has rows. Frees the columns' buffers either way. */
static void send_cols(pgstore *g, PGconn *w, pipe_state *ps, colbuf *c, int ncol, size_t rows, int stmt, const params *extra) {
  if (!rows) {
    for (int k = 0; k < ncol; k++) free(c[k].b.p);
    return;
  }
  params p = {0};
  char *text[PMAX];
  assert(ncol + (extra ? extra->n : 0) <= PMAX);
  cols_params(c, ncol, &p, text);
  for (int k = 0; extra && k < extra->n; k++) {
    p.v[p.n] = extra->v[k];
    p.len[p.n] = extra->len[k];
    p.fmt[p.n++] = extra->fmt[k];
  }
  xgr__pg_send_stmt(g, w, ps, stmt, &p, 0, 0, W_PLAIN);
  for (int k = 0; k < ncol; k++) free(text[k]);
}

typedef struct owner_next {
  const char *owner;            /* borrowed from the group's entries; NULL: a free slot */
  uint64_t next;
} owner_next;

/* Note in the table o[0..cap) (open addressing, cap a power of two with room) that owner's next
 * expected rootPid is at least root + 1. A session started with rootPid 2^64-1 raises nothing. */
static void owner_raise(owner_next *o, size_t cap, const char *owner, uint64_t root) {
  if (root == UINT64_MAX) return;
  size_t h = proc_key_hash(&(store_op){.owner = (char *)owner}) & (cap - 1);
  while (o[h].owner && strcmp(o[h].owner, owner)) h = (h + 1) & (cap - 1);
  if (!o[h].owner || o[h].next < root + 1) o[h] = (owner_next){owner, root + 1};
}

static int owner_next_cmp(const void *a, const void *b) {
  const owner_next *x = a, *y = b;
  return strcmp(x->owner, y->owner);
}

/* Move the used slots of o[0..cap) to its front in owner order; their number. Every connection
 * raises the owners' counters in this order, so two transactions never wait on each other in a
 * cycle. */
static size_t owners_sorted(owner_next *o, size_t cap) {
  size_t k = 0;
  for (size_t h = 0; h < cap; h++)
    if (o[h].owner) o[k++] = o[h];
  qsort(o, k, sizeof *o, owner_next_cmp);
  return k;
}

/* Send the group's entries: with bp->direct first the read of its sessions' stored next_iter
 * (S_NEXT_ITERS), then the session rows, scopes and the sessions' states in a few bulk
 * statements; the history rows go into copy (COPY's binary format) and the process rows, the last
 * state of each in key order, into bp (xgr__pg_copy_rows writes them after the pipeline). The last state
 * of a session and of a process in the group wins. A process that the group's history row of it
 * ended (keeps_record) has its record written into that row instead of a process row: most steps
 * end their process, so this saves a row write per step (migration 12). A failing bulk statement
 * is put on batch 0: the group is then applied again one batch at a time, which names the faulty
 * batch. */
void xgr__pg_send_bulk(pgstore *g, PGconn *w, pipe_state *ps, xgr_store_changes **list, size_t n, int64_t now, xgr_buf *copy,
                      bulk_procs *bp, bool bump) {
  size_t nprocs = 0, nstates = 0, nnew_max = 0, nhist = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < list[i]->n; k++) {
      nprocs += list[i]->ops[k].kind == OP_PROC;
      nhist += list[i]->ops[k].kind == OP_HIST;
      nstates += list[i]->ops[k].kind == OP_STATE;
      nnew_max += list[i]->ops[k].kind == OP_SESSION;
    }
  size_t cap = 16, scap = 16;
  while (cap < nprocs * 2) cap *= 2;
  while (scap < nstates * 2) scap *= 2;
  const store_op **slot = xgr__xcalloc(cap, sizeof *slot);   /* open addressing by (owner, root, iter) */
  const store_op **sslot = xgr__xcalloc(scap, sizeof *sslot); /* ... and of states by (owner, root) */
  size_t ocap = 16;
  while (ocap < nnew_max * 2) ocap *= 2;
  owner_next *oslot = xgr__xcalloc(ocap, sizeof *oslot);      /* ... and of owners of new sessions */
  const store_op **kslot = xgr__xcalloc(ocap, sizeof *kslot); /* ... and of sessions with a row */
  size_t (*deferred)[2] = xgr__xcalloc(nnew_max + 1, sizeof *deferred);
  colbuf ic[14], uc[14], kc[3];   /* new sessions (insert only), session rows (upsert), scopes */
  memset(ic, 0, sizeof ic);
  memset(uc, 0, sizeof uc);
  memset(kc, 0, sizeof kc);
  size_t nins = 0, nups = 0, nscope = 0, ndeferred = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < list[i]->n; k++) {
      const store_op *op = &list[i]->ops[k];
      if (op->kind != OP_PROC) continue;
      size_t h = proc_key_hash(op) & (cap - 1);
      while (slot[h] && !(slot[h]->root == op->root && slot[h]->u.proc.iter == op->u.proc.iter &&
                          !strcmp(slot[h]->owner, op->owner)))
        h = (h + 1) & (cap - 1);
      slot[h] = op;   /* a later state of the same process replaces the earlier */
    }
  /* the records that history rows keep (recs[j] for the group's j-th history row, or NULL):
   * their process rows are not written */
  const xgr_store_proc **recs = NULL;
  bool *kept = NULL;
  if (nhist && nprocs && !g->base.cfg.no_history_payload) {
    recs = xgr__xcalloc(nhist, sizeof *recs);
    kept = xgr__xcalloc(cap, sizeof *kept);
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < list[i]->n; k++) {
        const store_op *op = &list[i]->ops[k];
        if (op->kind != OP_HIST) continue;
        size_t h = key_hash(op->owner, op->root, op->u.hist.iter) & (cap - 1);
        while (slot[h] && !(slot[h]->root == op->root && slot[h]->u.proc.iter == op->u.hist.iter &&
                            !strcmp(slot[h]->owner, op->owner)))
          h = (h + 1) & (cap - 1);
        if (slot[h] && !kept[h] && keeps_record(&op->u.hist, &slot[h]->u.proc)) {
          recs[j] = &slot[h]->u.proc;
          kept[h] = true;
        }
        j++;
      }
  }
  /* in key order: the upsert then walks proc_rt's primary key from left to right */
  size_t nslot = 0;
  for (size_t h = 0; h < cap; h++)
    if (slot[h] && !(kept && kept[h])) slot[nslot++] = slot[h];
  free(kept);
  qsort(slot, nslot, sizeof *slot, proc_key_cmp);
  bp->rows = slot;
  bp->n = nslot;
  if (bp->direct && nslot) {   /* the sessions' stored next_iter, before this group writes them */
    colbuf nc[2];
    memset(nc, 0, sizeof nc);
    bp->sess = xgr__xmalloc(nslot * sizeof *bp->sess);
    for (size_t h = 0; h < nslot; h++) {
      if (!h || slot[h]->root != slot[h - 1]->root || strcmp(slot[h]->owner, slot[h - 1]->owner)) {
        col_text(&nc[0], slot[h]->owner);
        col_u64(&nc[1], slot[h]->root);
        bp->nsess++;
      }
      bp->sess[h] = bp->nsess - 1;
    }
    bp->next = xgr__xcalloc(bp->nsess, sizeof *bp->next);
    size_t at = ps->n;
    send_cols(g, w, ps, nc, 2, bp->nsess, S_NEXT_ITERS, NULL);
    if (ps->n > at) ps->p[at].what = W_NEXT_ITERS;
  }
  size_t nh = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < list[i]->n; k++) {
      const store_op *op = &list[i]->ops[k];
      if (op->kind == OP_PROC) continue;   /* slotted above */
      if (op->kind == OP_HIST) {
        cp_hist(copy, op, now, g->base.cfg.no_history_payload, recs ? recs[nh] : NULL);
        nh++;
      } else if (op->kind == OP_STATE) {
        size_t h = proc_key_hash(op) & (scap - 1);
        while (sslot[h] && !(sslot[h]->root == op->root && !strcmp(sslot[h]->owner, op->owner))) h = (h + 1) & (scap - 1);
        sslot[h] = op;   /* the last state of a session wins (states only move forward) */
      } else if (op->kind == OP_SESSION && n > 1) {
        const xgr_store_session *x = &op->u.session;   /* S_SESSION(_NEW)'s values */
        size_t h = proc_key_hash(&(store_op){.owner = x->owner, .root = x->root_pid}) & (ocap - 1);
        while (kslot[h] && !(kslot[h]->u.session.root_pid == x->root_pid && !strcmp(kslot[h]->u.session.owner, x->owner)))
          h = (h + 1) & (ocap - 1);
        if (kslot[h]) {   /* the session's second row in the group: after the first, on its own */
          deferred[ndeferred][0] = i;
          deferred[ndeferred++][1] = k;
          continue;
        }
        kslot[h] = op;
        colbuf *nc = op->if_absent ? ic : uc;
        col_text(&nc[0], x->owner);
        col_u64(&nc[1], x->root_pid);
        col_text(&nc[2], x->registry);
        col_text(&nc[3], x->ostc_id);
        col_text(&nc[4], x->ostc_hash);
        col_i64(&nc[5], x->status);
        col_i64(&nc[6], x->killed_at);
        col_i64(&nc[7], x->created_at ? x->created_at : now);
        col_i64(&nc[8], x->status != XGR_RESULT_RUNNING ? (x->finished_at ? x->finished_at : now) : 0);
        col_u64(&nc[9], x->next_iter);
        col_i64(&nc[10], x->paused);
        col_i64(&nc[11], x->next_group);
        col_text(&nc[12], x->max_total_gas ? x->max_total_gas : "");
        col_text(&nc[13], x->bundle_hash ? x->bundle_hash : "");
        *(op->if_absent ? &nins : &nups) += 1;
        owner_raise(oslot, ocap, x->owner, x->root_pid);   /* the owner's next expected rootPid: the largest + 1 */
      } else if (op->kind == OP_SCOPE) {
        col_text(&kc[0], op->owner);
        col_u64(&kc[1], op->root);
        col_i64(&kc[2], op->u.group);
        nscope++;
      } else {
        xgr__pg_send_op(g, w, ps, i, k, op, now);
      }
    }
  /* the session rows (a session's later rows in the group after them), their owners' counters
   * and the killed scopes, before the states */
  send_cols(g, w, ps, ic, 14, nins, S_SESSIONS_BULK, NULL);
  send_cols(g, w, ps, uc, 14, nups, S_SESSIONS_UPSERT_BULK, NULL);
  for (size_t d = 0; d < ndeferred; d++)
    xgr__pg_send_op(g, w, ps, deferred[d][0], deferred[d][1], &list[deferred[d][0]]->ops[deferred[d][1]], now);
  size_t nowners = bump ? owners_sorted(oslot, ocap) : 0;   /* in owner order: see S_OWNERS_BULK */
  for (size_t h = 0; h < nowners; h++) {
    params q = {0};
    p_text(&q, oslot[h].owner);
    p_u64(&q, oslot[h].next);
    xgr__pg_send_stmt(g, w, ps, S_OWNER_BUMP, &q, 0, 0, W_PLAIN);
  }
  send_cols(g, w, ps, kc, 3, nscope, S_SCOPES_BULK, NULL);
  free(oslot);
  free(kslot);
  free(deferred);
  /* session states after the session rows and scopes sent above; a session that ended loses its
   * killed scopes */
  colbuf sc[9], dc[2], bc[2];   /* states; ended sessions (their scopes, their packs) */
  memset(sc, 0, sizeof sc);
  memset(dc, 0, sizeof dc);
  memset(bc, 0, sizeof bc);
  size_t nst = 0, ndel = 0;
  const store_op **ended = xgr__xmalloc((nstates + 1) * sizeof *ended);
  for (size_t h = 0; h < scap; h++) {
    const store_op *op = sslot[h];
    if (!op) continue;
    col_text(&sc[0], op->owner);
    col_u64(&sc[1], op->root);
    col_i64(&sc[2], op->u.state.status);
    col_i64(&sc[3], op->u.state.killed_at);
    col_u64(&sc[4], op->u.state.next_iter);
    col_i64(&sc[5], op->u.state.next_group);
    col_i64(&sc[6], op->u.state.paused);
    if (op->u.state.due) col_i64(&sc[7], op->u.state.due);   /* the due index; NULL: awake */
    else col_text(&sc[7], NULL);
    if (op->u.state.has_bytes) col_i64(&sc[8], (int64_t)(op->u.state.stored_bytes & INT64_MAX));   /* NULL: kept */
    else col_text(&sc[8], NULL);
    nst++;
    if (op->u.state.status != XGR_RESULT_RUNNING) ended[ndel++] = op;
  }
  /* in key order, as retention's sweeps lock rows (another node's retention may delete the same
   * packs: locks taken in one order cannot deadlock) */
  qsort(ended, ndel, sizeof *ended, session_key_cmp);
  for (size_t k = 0; k < ndel; k++) {
    col_text(&dc[0], ended[k]->owner);
    col_u64(&dc[1], ended[k]->root);
    col_text(&bc[0], ended[k]->owner);
    col_u64(&bc[1], ended[k]->root);
  }
  free(ended);
  free(sslot);
  free(recs);
  if (copy->len) cp_be(copy, 0xFFFF, 2);   /* the trailer */
  params now_p = {0};
  p_i64(&now_p, now);
  send_cols(g, w, ps, sc, 9, nst, S_STATES_BULK, &now_p);
  send_cols(g, w, ps, dc, 2, ndel, S_SCOPES_DEL_BULK, NULL);
  send_cols(g, w, ps, bc, 2, ndel, S_BORN_DEL_BULK, NULL);
}

#define COPY_HIST                                                                                                \
  "COPY proc_steps(owner, root_pid, iter, parent_iter, step, step_id, status, valid, abort_reason, at,"          \
  " finished_at, error, payload, recorded_at, api, rt_paused, rt_join_group, rt_join_from_group, rt_next_wake_at," \
  " rt_created_at, rt_join_state) FROM STDIN (FORMAT binary)"

/* Record a failed statement of the bulk path's second part on pr (batch 0, like a failing bulk
 * statement in the pipeline). */
static void bulk_failed(pgstore *g, PGconn *w, PGresult *r, pipe_result *pr) {
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  pr->ok = false;
  pr->conn_lost = !state;
  snprintf(pr->state, sizeof pr->state, "%s", state ? state : "");
  pr->bad_batch = 0;
  xgr__pg_res_error(g, r, w, "a write failed", &pr->err);
}

/* COPY data (a whole binary stream) with the statement sql in the open transaction (outside
 * pipeline mode). */
static void copy_in(pgstore *g, PGconn *w, const char *sql, const xgr_buf *data, pipe_result *pr) {
  PGresult *r = PQexec(w, sql);
  if (PQresultStatus(r) == PGRES_COPY_IN) {
    PQclear(r);
    bool sent = true;
    for (size_t off = 0; off < data->len && sent;) {   /* CopyData messages of at most 1 MB */
      size_t k = data->len - off < (1u << 20) ? data->len - off : (1u << 20);
      sent = PQputCopyData(w, data->p + off, (int)k) == 1;
      off += k;
    }
    PQputCopyEnd(w, sent ? NULL : "xgr: sending the rows failed");
    r = PQgetResult(w);
  }
  if (PQresultStatus(r) != PGRES_COMMAND_OK) bulk_failed(g, w, r, pr);
  PQclear(r);
  while ((r = PQgetResult(w))) PQclear(r);
}

/* The bulk path's second part, after its pipeline: the process rows — with bp->direct those
 * never stored (iter at least their session's stored next_iter) by a binary COPY straight into
 * proc_rt, the others COPYed into the staging table and upserted from there — and the history
 * rows COPYed into proc_steps. A constraint failure of the direct COPY sets pr->direct_conflict
 * (a row existed after all: commit_group redoes the group through the upsert). COPY cannot run
 * in pipeline mode: the connection leaves it and enters it again. */
void xgr__pg_copy_rows(pgstore *g, PGconn *w, const bulk_procs *bp, int64_t now, copybufs *cb, pipe_result *pr) {
  const xgr_buf *hist = &cb->copy;
  if (!PQexitPipelineMode(w)) {
    pr->ok = false;
    pr->conn_lost = true;
    xgr__pg_res_error(g, NULL, w, "cannot leave pipeline mode", &pr->err);
    return;
  }
  xgr_buf *fresh = &cb->fresh, *staged = &cb->staged, *born = &cb->born;
  assert(!fresh->len && !staged->len && !born->len);
#define NEW_LIVE(k) (bp->rows[k]->u.proc.iter >= bp->next[bp->sess[k]] && bp->rows[k]->u.proc.status < XGR_PROC_DONE)
  for (size_t i = 0; i < bp->n;) {
    bool is_new = bp->direct && bp->rows[i]->u.proc.iter >= bp->next[bp->sess[i]];
    if (is_new && NEW_LIVE(i)) {   /* the session's run of new live processes (rows are in key order) */
      size_t j = i + 1, bytes = rec_bytes(&bp->rows[i]->u.proc);
      while (j < bp->n && j - i < PACK_MAX && bytes < PACK_BYTES && bp->sess[j] == bp->sess[i] && NEW_LIVE(j))
        bytes += rec_bytes(&bp->rows[j++]->u.proc);
      if (j - i >= PACK_MIN) {
        cp_pack(born, bp->rows + i, j - i);
        i = j;
        continue;
      }
    }
    cp_proc(is_new ? fresh : staged, bp->rows[i], now);
    i++;
  }
#undef NEW_LIVE
  if (fresh->len) {
    cp_be(fresh, 0xFFFF, 2);   /* the trailer */
    copy_in(g, w, "COPY proc_rt(" PROC_ROW_COLS ") FROM STDIN (FORMAT binary)", fresh, pr);
    if (!pr->ok && !strncmp(pr->state, "23", 2)) pr->direct_conflict = true;
  }
  if (pr->ok && born->len) {
    cp_be(born, 0xFFFF, 2);
    copy_in(g, w, "COPY proc_born(owner, root_pid, first_iter, last_iter, members) FROM STDIN (FORMAT binary)", born, pr);
    if (!pr->ok && !strncmp(pr->state, "23", 2)) pr->direct_conflict = true;
  }
  if (pr->ok && staged->len) {
    cp_be(staged, 0xFFFF, 2);
    copy_in(g, w, "COPY xgr_stage_procs(" PROC_ROW_COLS ") FROM STDIN (FORMAT binary)", staged, pr);
    if (pr->ok) {
      params p = {0};
      PGresult *r = xgr__pg_exec_prepared(w, S_PROCS_BULK, &p);
      if (PQresultStatus(r) != PGRES_COMMAND_OK) bulk_failed(g, w, r, pr);
      PQclear(r);
    }
  }
  if (pr->ok && hist->len) copy_in(g, w, COPY_HIST, hist, pr);
  if (!PQenterPipelineMode(w) && pr->ok) {
    pr->ok = false;
    pr->conn_lost = true;
    xgr__pg_res_error(g, NULL, w, "cannot enter pipeline mode", &pr->err);
  }
}

/* Raise the owners' counters for every session row of list[0..n) in one statement of its own
 * (committed before the parts of a split group, which then leave the owners rows alone: two
 * connections raising one owner's counter would wait for each other's commit). A counter raised
 * for a group that then fails is merely ahead, a gap in the rootPids. 0 or an error. */
int xgr__pg_raise_owners(pgstore *g, xgr_store_changes **list, size_t n, xgr_error *err) {
  size_t cap = 16, nsess = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < list[i]->n; k++) nsess += list[i]->ops[k].kind == OP_SESSION;
  if (!nsess) return 0;
  while (cap < nsess * 2) cap *= 2;
  owner_next *o = xgr__xcalloc(cap, sizeof *o);
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < list[i]->n; k++) {
      const store_op *op = &list[i]->ops[k];
      if (op->kind == OP_SESSION) owner_raise(o, cap, op->u.session.owner, op->u.session.root_pid);
    }
  size_t no = owners_sorted(o, cap);
  int rc = 0;
  if (no) {
    colbuf c[2];
    memset(c, 0, sizeof c);
    for (size_t h = 0; h < no; h++) {
      col_text(&c[0], o[h].owner);
      col_u64(&c[1], o[h].next);
    }
    params p = {0};
    char *text[2];
    cols_params(c, 2, &p, text);
    PGresult *r = xgr__pg_exec_prepared(g->w, S_OWNERS_BULK, &p);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) rc = xgr__pg_res_error(g, r, g->w, "cannot raise the owners' counters", err);
    PQclear(r);
    for (int k = 0; k < 2; k++) free(text[k]);
  }
  free(o);
  return rc;
}
