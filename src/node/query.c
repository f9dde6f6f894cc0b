/* query.c — the node's queries (xgr/node.h, "Queries: reading sessions"): what the front ends show
 * of sessions and registered documents, read through the node instead of the store. Most are the
 * store's committed rows passed through; where an answer mixes in what runs now (whether a session
 * is live, whether it runs here, the owner's live counts, another owner's session) the engine's
 * view and the store's are combined here, in one place, so every page and method agrees. Nothing
 * here writes, loads a hibernated session or talks to another cluster node.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "node/node_impl.h"
#include "util/alloc.h"

/* ---- sessions ---------------------------------------------------------------------------------- */

/* The engine's view of the session of row s->row (s->row filled). */
static void engine_view(xgr_node *n, xgr_node_session *s) {
  memset(&s->info, 0, sizeof s->info);
  s->in_engine = !xgr_engine_session(n->e, s->row.owner, s->row.root_pid, &s->info);
  if (!s->in_engine) memset(&s->info, 0, sizeof s->info);
  s->engine_live = s->in_engine && !s->info.finished;
  s->live = s->row.status == XGR_RESULT_RUNNING && (!s->in_engine || !s->info.finished);
}

int xgr_node_session_get(xgr_node *n, const char *owner, uint64_t root, xgr_node_session *out, xgr_error *err) {
  assert(n && owner && out);
  memset(out, 0, sizeof *out);
  int rc = xgr_store_session_get(n->st, owner, root, &out->row, err);
  if (rc) {
    memset(out, 0, sizeof *out);
    return rc;
  }
  engine_view(n, out);
  return 0;
}

void xgr_node_session_clear(xgr_node_session *s) {
  if (!s) return;
  xgr_store_session_clear(&s->row);
  memset(s, 0, sizeof *s);
}

int xgr_node_sessions(xgr_node *n, const char *owner, uint64_t before, size_t limit, xgr_node_session **out,
                      size_t *count, xgr_error *err) {
  assert(n && out && count);   /* owner NULL: every owner's */
  *out = NULL;
  *count = 0;
  xgr_store_session *rows = NULL;
  size_t nrows = 0;
  int rc = xgr_store_sessions(n->st, owner, before, limit, &rows, &nrows, err);
  if (rc) return rc;
  xgr_node_session *v = xgr__xcalloc(nrows + 1, sizeof *v);
  for (size_t i = 0; i < nrows; i++) {
    v[i].row = rows[i];   /* the strings move over */
    engine_view(n, &v[i]);
  }
  free(rows);   /* its strings are v's now */
  *out = v;
  *count = nrows;
  return 0;
}

void xgr_node_sessions_free(xgr_node_session *s, size_t count) {
  if (!s) return;
  for (size_t i = 0; i < count; i++) xgr_store_session_clear(&s[i].row);
  free(s);
}

size_t xgr_node_sessions_whole(const xgr_node_session *s, size_t count) {
  size_t keep = count;
  while (keep > 0 && s[keep - 1].row.root_pid == s[count - 1].row.root_pid) keep--;
  return keep ? keep : count;
}

/* ---- the stored records of live sessions (xgr.liveSessions) ----------------------------------------- */

#define LIVE_SCAN_PAGE 1000       /* session rows read from the store at a time */
#define LIVE_SCAN_MAX 20000       /* session rows looked at in one call, matching or not */

typedef struct live_acc {
  json_t *out;
  size_t bytes;
} live_acc;

static int live_add(void *ctx, const xgr_store_live *l) {
  live_acc *a = ctx;
  a->bytes += xgr_store_live_size(l);
  json_array_append_new(a->out, xgr_store_live_to_json(l));
  return 0;
}

int xgr_node_live_records(xgr_node *n, const xgr_node_live_query *q, json_t **out, uint64_t *next_before,
                          xgr_error *err) {
  assert(n && q && q->registry && q->max_sessions && out && next_before);
  *out = NULL;
  *next_before = 0;
  live_acc a = {json_array(), 0};
  uint64_t before = q->before, last = 0;
  size_t scanned = 0, got = 0;
  bool full = false;
  for (;;) {
    xgr_node_session *ss = NULL;
    size_t ns = 0;
    int rc = xgr_node_sessions(n, q->owner, before, LIVE_SCAN_PAGE, &ss, &ns, err);
    if (rc) {
      json_decref(a.out);
      return rc;
    }
    /* a full store page's last rootPid may go on in the next: left to it (xgr_node_sessions_whole) */
    size_t use = ns == LIVE_SCAN_PAGE ? xgr_node_sessions_whole(ss, ns) : ns;
    for (size_t i = 0; i < use; i++) {
      const xgr_store_session *row = &ss[i].row;
      /* a page ends between rootPids, so that the next (rootPid below) misses no other owner's
       * session of the same rootPid */
      if (full && row->root_pid != last) {
        *next_before = last;
        xgr_node_sessions_free(ss, ns);
        *out = a.out;
        return 0;
      }
      before = row->root_pid;
      scanned++;
      if (!ss[i].live || strcmp(row->registry ? row->registry : "", q->registry)) continue;
      xgr_store_load_filter f = {.owner = row->owner, .root_pid = row->root_pid};
      size_t had = json_array_size(a.out);
      if ((rc = xgr_store_load_some(n->st, &f, live_add, &a, err))) {
        xgr_node_sessions_free(ss, ns);
        json_decref(a.out);
        return rc;
      }
      if (json_array_size(a.out) == had) continue;   /* it ended meanwhile */
      last = row->root_pid;
      full = ++got >= q->max_sessions || a.bytes >= q->max_bytes;
    }
    if (use < ns) before = ss[use].row.root_pid + 1;   /* the group left over comes first next */
    xgr_node_sessions_free(ss, ns);
    if (ns < LIVE_SCAN_PAGE || before <= 1) break;   /* no older sessions */
    if (scanned >= LIVE_SCAN_MAX) {                  /* enough looked at for one call: the caller goes on */
      *next_before = full ? last : before;
      break;
    }
  }
  *out = a.out;
  return 0;
}

/* ---- a session's rows ---------------------------------------------------------------------------- */

int xgr_node_procs(xgr_node *n, const char *owner, uint64_t root, xgr_store_proc **out, size_t *count,
                   xgr_error *err) {
  assert(n && owner && out && count);
  *out = NULL;
  *count = 0;
  return xgr_store_procs(n->st, owner, root, out, count, err);
}

void xgr_node_procs_free(xgr_store_proc *p, size_t count) { xgr_store_procs_free(p, count); }

int xgr_node_history(xgr_node *n, const char *owner, uint64_t root, xgr_store_hist **out, size_t *count,
                     xgr_error *err) {
  assert(n && owner && out && count);
  *out = NULL;
  *count = 0;
  return xgr_store_history(n->st, owner, root, out, count, err);
}

void xgr_node_history_free(xgr_store_hist *h, size_t count) { xgr_store_hists_free(h, count); }

int xgr_node_audits(xgr_node *n, const char *owner, uint64_t root, xgr_store_audit **out, size_t *count,
                    xgr_error *err) {
  assert(n && owner && out && count);
  *out = NULL;
  *count = 0;
  return xgr_store_audits(n->st, owner, root, out, count, err);
}

void xgr_node_audits_free(xgr_store_audit *a, size_t count) { xgr_store_audits_free(a, count); }
void xgr_node_grants_free(xgr_store_grant *g, size_t count) { xgr_store_grants_free(g, count); }

int xgr_node_wakes_refused(xgr_node *n, const char *owner, uint64_t root, xgr_store_wake **out, size_t *count,
                           xgr_error *err) {
  assert(n && owner && out && count);
  *out = NULL;
  *count = 0;
  return xgr_store_wakes_refused(n->st, owner, root, out, count, err);
}

void xgr_node_wakes_free(xgr_store_wake *w, size_t count) { xgr_store_wakes_free(w, count); }

int64_t xgr_node_session_next_wake(const xgr_store_session *s, const xgr_store_proc *ps, size_t n) {
  assert(s);
  if (s->paused || s->status != XGR_RESULT_RUNNING) return XGR_NEVER;
  return xgr_store_procs_next_wake(ps, n);
}

xgr_node_wait xgr_node_proc_wait(const xgr_store_proc *p, int64_t *at) {
  assert(p);
  int64_t w = xgr_store_proc_wakes_at(p);
  if (at) *at = w;
  if (w != XGR_NEVER) return XGR_NODE_WAIT_TIMER;
  if (p->paused) return XGR_NODE_WAIT_RESUME;
  return xgr_store_proc_join_open(p) ? XGR_NODE_WAIT_JOIN : XGR_NODE_WAIT_WAKEUP;
}

/* ---- owners ------------------------------------------------------------------------------------ */

int xgr_node_owners_after(xgr_node *n, const char *after, size_t max, xgr_store_owner_live **out, size_t *count,
                          xgr_error *err) {
  return xgr_store_owners_after(n->st, after, max, out, count, err);
}

int xgr_node_live_owners(xgr_node *n, size_t max, xgr_store_owner_live **out, size_t *count, xgr_error *err) {
  assert(n && out && count);
  return xgr_store_live_owners(n->st, NULL, max, out, count, err);
}

void xgr_node_owners_free(xgr_store_owner_live *o, size_t count) { xgr_store_owners_free(o, count); }

#define COUNT_ENGINE_MAX 100000   /* engine sessions looked at for an owner's counts */

int xgr_node_owner_counts_get(xgr_node *n, const char *owner, xgr_node_owner_counts *out, xgr_error *err) {
  assert(n && out);   /* owner NULL: every owner (the 1,000 with the most live sessions) */
  memset(out, 0, sizeof *out);
  xgr_store_owner_live *ol;
  size_t nol;
  int rc = xgr_store_live_owners(n->st, owner, owner ? 1 : 1000, &ol, &nol, err);
  if (rc) return rc;
  for (size_t i = 0; i < nol; i++) out->live_sessions += ol[i].live;
  xgr_store_owners_free(ol, nol);
  /* the engine's sessions, finished ones included: a snapshot, grown once to what it holds */
  size_t cap = 4096;
  xgr_engine_session_info *all = xgr__xmalloc(cap * sizeof *all);
  size_t total = xgr_engine_list(n->e, all, cap);
  if (total > cap) {
    cap = total < COUNT_ENGINE_MAX ? total + 256 : COUNT_ENGINE_MAX;
    all = xgr__xrealloc(all, cap * sizeof *all);
    total = xgr_engine_list(n->e, all, cap);
  }
  size_t got = total < cap ? total : cap;
  for (size_t i = 0; i < got; i++) {
    if (all[i].finished || (owner && strcasecmp(all[i].owner, owner))) continue;
    out->live_procs += all[i].live;
    out->running_procs += all[i].running;
    if (all[i].running) out->running_sessions++;
    if (all[i].idle) out->idle_sessions++;
  }
  free(all);
  out->engine_sessions = total;
  out->partial = total > got;
  return 0;
}

#define ELSEWHERE_OWNERS 1000     /* owners scanned by xgr_node_live_elsewhere (most live sessions first) */

bool xgr_node_live_elsewhere(xgr_node *n, const char *owner, uint64_t root) {
  assert(n && owner);
  xgr_store_owner_live *ol = NULL;
  size_t nol = 0;
  xgr_error e;
  if (xgr_store_live_owners(n->st, NULL, ELSEWHERE_OWNERS, &ol, &nol, &e)) return false;
  bool found = false;
  for (size_t i = 0; i < nol && !found; i++) {
    xgr_store_session s;
    if (!strcmp(ol[i].owner, owner) || xgr_store_session_get(n->st, ol[i].owner, root, &s, &e)) continue;
    found = s.status == XGR_RESULT_RUNNING;
    xgr_store_session_clear(&s);
  }
  xgr_store_owners_free(ol, nol);
  return found;
}

/* ---- registered documents ------------------------------------------------------------------------ */

int xgr_node_doc(xgr_node *n, xgr_registry_kind kind, const char *id, uint32_t version, xgr_store_doc *out,
                 xgr_error *err) {
  assert(n && id && out);
  return xgr_store_doc_get(n->st, kind, id, version, out, err);
}

int xgr_node_doc_by_hash(xgr_node *n, xgr_registry_kind kind, const char *hash, xgr_store_doc *out, xgr_error *err) {
  assert(n && hash && out);
  return xgr_store_doc_by_hash(n->st, kind, hash, out, err);
}

void xgr_node_doc_clear(xgr_store_doc *d) { xgr_store_doc_clear(d); }
