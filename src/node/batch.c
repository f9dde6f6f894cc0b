/* batch.c — actions on many sessions (xgr/node.h, "Actions on many sessions"): the selection (its
 * check, the walk over the store's live sessions in the driver's order), the dry run, starting,
 * reading and cancelling operations (rows of the store's batch_ops), and the driver: one thread per
 * node that claims a running operation, acts on each selected session through xgr_node_control at
 * a bounded rate, and writes its progress and cursor, so that an operation survives a restart and
 * goes on where it stopped.
 *
 * Order and cursor. Owners ascending (one owner when the selection names it), and within an owner
 * rootPid descending (the store's page order, xgr_store_sessions). The cursor is the last session
 * visited, "<owner>/<rootPid>"; the walk goes on strictly after it. A session is visited once. A
 * session that ended after the operation started, before the driver reached it, is counted skipped.
 *
 * Exactly once. The cursor and counts are written at least every CHECKPOINT sessions and every
 * second; an action and its audit entry commit together (the engine's batch), before the progress
 * that covers them. So after a restart at most CHECKPOINT sessions past the cursor may have been
 * acted on already: for those the driver first reads the session's audit trail and, when an entry
 * names this operation ({"batch":"<id>"}), counts the session done without acting again.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "node/node_impl.h"
#include "util/alloc.h"
#include "util/clock.h"

#define CHECKPOINT 64          /* sessions acted on between two progress writes, at most */
#define PROGRESS_MS 1000       /* and at least this often */
#define PAGE 256               /* session rows read at a time */
#define MAX_OWNERS 100000      /* owners with live sessions a selection without owner walks */
#define LOCAL_LEASE_MS 10000   /* the driver's claim on a store with a single writer */
#define IDLE_MS 1000           /* the driver looks for work this often when it has none */

enum { ST_RUNNING = 1, ST_WAITING = 2, ST_PAUSED = 4 };

struct xgr__batcher {
  xgr_node *d;
  pthread_t th;
  bool has_th;
  pthread_mutex_t mu;          /* kick, stop, cancel */
  pthread_cond_t cv;
  bool kick;                   /* an operation was started here: look now */
  bool stop;
  char cancel[33];             /* the operation cancelled here while driven ("" none) */
  xgr_counter *done, *failed, *skipped;   /* xgr_batch_sessions_total{outcome} */
  xgr_counter *throttled;      /* xgr_batch_throttled_seconds_total, in ms (scaled at scrape) */
  atomic_uint_fast64_t throttled_ms;
};

/* ---- the selection ------------------------------------------------------------------------------- */

typedef struct sel {
  const char *owner;           /* lowercased (owner_buf) or NULL */
  char owner_buf[64];
  const char *registry, *ostc_id, *hash, *step;   /* borrowed from the JSON */
  unsigned status;             /* ST_* bits, 0: any */
  int64_t cfrom, cto;          /* inclusive; INT64_MIN / INT64_MAX: open */
  uint64_t rfrom, rto;         /* inclusive */
} sel;

static bool is_hex_addr(const char *s) {
  if (!s || strlen(s) != 42 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  for (size_t i = 2; i < 42; i++)
    if (!strchr("0123456789abcdefABCDEF", s[i])) return false;
  return true;
}

static int bad(xgr_error *err, const char *path, const char *key, const json_t *v, const char *expected) {
  char *t = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
  xgr_error_set(err, XGR_ESCHEMA, NULL, "is %.80s; expected %s", t ? t : "missing", expected);
  snprintf(err->path, sizeof err->path, "%s.%s", path, key);
  free(t);
  return XGR_ESCHEMA;
}

static int opt_text(const json_t *o, const char *path, const char *key, size_t max, const char **out, xgr_error *err) {
  const json_t *v = json_object_get(o, key);
  *out = NULL;
  if (!v || json_is_null(v)) return 0;
  if (!json_is_string(v) || !json_string_length(v) || json_string_length(v) > max)
    return bad(err, path, key, v, "a non-empty string");
  *out = json_string_value(v);
  return 0;
}

static int opt_u64(const json_t *o, const char *path, const char *key, uint64_t dflt, uint64_t *out, xgr_error *err) {
  const json_t *v = json_object_get(o, key);
  *out = dflt;
  if (!v || json_is_null(v)) return 0;
  if (json_is_integer(v) && json_integer_value(v) >= 0) {
    *out = (uint64_t)json_integer_value(v);
    return 0;
  }
  const char *t = json_string_value(v);
  char *end = NULL;
  if (t && *t >= '0' && *t <= '9') {
    unsigned long long x = strtoull(t, &end, 10);
    if (!*end && strlen(t) <= 20) {
      *out = x;
      return 0;
    }
  }
  return bad(err, path, key, v, "a rootPid (a non-negative integer or its decimal string)");
}

static int opt_ms(const json_t *o, const char *path, const char *key, int64_t dflt, int64_t *out, xgr_error *err) {
  const json_t *v = json_object_get(o, key);
  *out = dflt;
  if (!v || json_is_null(v)) return 0;
  if (!json_is_integer(v) || json_integer_value(v) < 0) return bad(err, path, key, v, "Unix time in ms (an integer >= 0)");
  *out = (int64_t)json_integer_value(v);
  return 0;
}

static int parse_sel(const json_t *o, const char *path, sel *s, xgr_error *err) {
  memset(s, 0, sizeof *s);
  if (!json_is_object(o)) {
    char *t = o ? json_dumps(o, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    xgr_error_set(err, XGR_ESCHEMA, path, "is %.80s; expected an object naming the sessions", t ? t : "missing");
    free(t);
    return XGR_ESCHEMA;
  }
  static const char *const keys[] = {"owner", "registry", "ostcId", "hash", "status", "step", "createdFrom",
                                     "createdTo", "rootFrom", "rootTo", NULL};
  const char *k;
  const json_t *v;
  json_object_foreach((json_t *)o, k, v) {
    bool known = false;
    for (size_t i = 0; keys[i]; i++) known |= !strcmp(keys[i], k);
    if (!known) {
      xgr_error_set(err, XGR_ESCHEMA, NULL,
                    "is an unknown key; a selection has owner, registry, ostcId, hash, status, step, createdFrom, "
                    "createdTo, rootFrom, rootTo");
      snprintf(err->path, sizeof err->path, "%s.%.60s", path, k);
      return XGR_ESCHEMA;
    }
  }
  int rc;
  const char *owner;
  if ((rc = opt_text(o, path, "owner", 42, &owner, err))) return rc;
  if (owner) {
    if (!is_hex_addr(owner)) return bad(err, path, "owner", json_object_get(o, "owner"), "an address (0x + 40 hex)");
    snprintf(s->owner_buf, sizeof s->owner_buf, "%s", owner);
    for (char *q = s->owner_buf; *q; q++)
      if (*q >= 'A' && *q <= 'F') *q = (char)(*q - 'A' + 'a');
    s->owner = s->owner_buf;
  }
  if ((rc = opt_text(o, path, "registry", 256, &s->registry, err))) return rc;
  if ((rc = opt_text(o, path, "ostcId", 256, &s->ostc_id, err))) return rc;
  if ((rc = opt_text(o, path, "hash", 66, &s->hash, err))) return rc;
  if (s->hash && (strlen(s->hash) != 66 || s->hash[0] != '0' || s->hash[1] != 'x' ||
                  strspn(s->hash + 2, "0123456789abcdefABCDEF") != 64))
    return bad(err, path, "hash", json_object_get(o, "hash"), "an orchestration or bundle hash (0x + 64 hex)");
  if ((rc = opt_text(o, path, "step", 128, &s->step, err))) return rc;
  const json_t *st = json_object_get(o, "status");
  if (st && !json_is_null(st)) {
    if (json_is_string(st)) st = json_pack("[O]", st);   /* one status alone */
    else json_incref((json_t *)st);
    size_t i;
    json_t *e;
    bool ok = json_is_array(st) && json_array_size(st) > 0;
    json_array_foreach(st, i, e) {
      const char *t = json_string_value(e);
      unsigned bit = !t ? 0 : !strcmp(t, "running") ? ST_RUNNING : !strcmp(t, "waiting") ? ST_WAITING
                         : !strcmp(t, "paused")    ? ST_PAUSED : 0;
      if (!bit) ok = false;
      s->status |= bit;
    }
    json_decref((json_t *)st);
    if (!ok)
      return bad(err, path, "status", json_object_get(o, "status"),
                 "\"running\", \"waiting\" or \"paused\", or a non-empty array of them");
  }
  if ((rc = opt_ms(o, path, "createdFrom", INT64_MIN, &s->cfrom, err))) return rc;
  if ((rc = opt_ms(o, path, "createdTo", INT64_MAX, &s->cto, err))) return rc;
  if ((rc = opt_u64(o, path, "rootFrom", 0, &s->rfrom, err))) return rc;
  if ((rc = opt_u64(o, path, "rootTo", UINT64_MAX, &s->rto, err))) return rc;
  if (s->cfrom > s->cto) return bad(err, path, "createdTo", json_object_get(o, "createdTo"), "createdTo >= createdFrom");
  if (s->rfrom > s->rto) return bad(err, path, "rootTo", json_object_get(o, "rootTo"), "rootTo >= rootFrom");
  return 0;
}

int xgr_node_batch_check_selection(const json_t *o, const char *path, xgr_error *err) {
  sel s;
  return parse_sel(o, path, &s, err);
}

bool xgr_node_may_control(xgr_node *n, const char *caller, const char *owner) {
  /* an owner its own sessions; an operator (xgrd --operator; access.c) every owner's */
  if (caller && xgr_node_is_operator(n, caller)) return true;
  return caller && owner && !strcasecmp(caller, owner);
}

/* The status of a live session from its row and process rows: ST_RUNNING, ST_PAUSED or ST_WAITING;
 * *at_step: one of its processes waits at step (NULL: not asked). */
static unsigned status_of(const xgr_store_session *row, const xgr_store_proc *ps, size_t n, const char *step,
                          bool *at_step) {
  bool running = false, paused = row->paused;
  if (at_step) *at_step = false;
  for (size_t i = 0; i < n; i++) {
    if (ps[i].status == XGR_PROC_RUNNING) running = true;
    if (ps[i].status == XGR_PROC_WAITING || ps[i].status == XGR_PROC_RUNNING) paused |= ps[i].paused;
    if (at_step && ps[i].status == XGR_PROC_WAITING && ps[i].step_id && !strcmp(ps[i].step_id, step)) *at_step = true;
  }
  return running ? ST_RUNNING : paused ? ST_PAUSED : ST_WAITING;
}

static const char *status_name(unsigned st) {
  return st == ST_RUNNING ? "running" : st == ST_PAUSED ? "paused" : "waiting";
}

/* Does row match s (the row's fields; then, when s asks for a status or a step, its processes)?
 * *st gets its status when it was read (0: not read). A store error is a non-match (logged by the
 * caller's count of what it skipped: a session that cannot be read is not acted on). */
static bool fields_match(const sel *s, const xgr_store_session *row) {
  if (row->root_pid < s->rfrom || row->root_pid > s->rto) return false;
  if (row->created_at < s->cfrom || row->created_at > s->cto) return false;
  if (s->registry && strcmp(row->registry ? row->registry : "", s->registry)) return false;
  if (s->ostc_id && strcmp(row->ostc_id ? row->ostc_id : "", s->ostc_id)) return false;
  if (s->hash && strcasecmp(row->ostc_hash ? row->ostc_hash : "", s->hash) &&
      strcasecmp(row->bundle_hash ? row->bundle_hash : "", s->hash))
    return false;
  return true;
}

static bool matches(xgr_node *d, const sel *s, const xgr_store_session *row, bool want_status, unsigned *st) {
  *st = 0;
  if (row->status != XGR_RESULT_RUNNING || !fields_match(s, row)) return false;
  if (!s->status && !s->step && !want_status) return true;
  xgr_store_proc *ps = NULL;
  size_t n = 0;
  xgr_error e;
  if (xgr_store_procs(d->st, row->owner, row->root_pid, &ps, &n, &e)) return false;
  bool at = false;
  *st = status_of(row, ps, n, s->step, s->step ? &at : NULL);
  xgr_store_procs_free(ps, n);
  if (s->status && !(s->status & *st)) return false;
  if (s->step && !at) return false;
  return true;
}

static int owner_cmp(const void *a, const void *b) {
  return strcmp(((const xgr_store_owner_live *)a)->owner, ((const xgr_store_owner_live *)b)->owner);
}

/* What the walk calls for each matching session (matched), and with `all` also for every other row
 * it reads (!matched): 0 goes on, non-zero stops the walk (returned). */
typedef int (*visit_fn)(void *ctx, const xgr_store_session *row, unsigned status, bool matched);

/* Walk the live sessions s selects, strictly after (after_owner, after_root) in the driver's order
 * (after_owner NULL: from the start), calling fn for each that matches. want_status: fn needs the
 * status (read for every session). 0, fn's non-zero value, or the store's error. */
static int walk(xgr_node *d, const sel *s, const char *after_owner, uint64_t after_root, bool want_status,
                bool all, visit_fn fn, void *ctx, xgr_error *err) {
  xgr_store_owner_live one = {.owner = (char *)s->owner, .live = 1}, *owners = NULL;
  size_t nowners = 0;
  bool own_list = !s->owner;
  if (s->owner) {
    owners = &one;
    nowners = 1;
  } else {
    int rc = xgr_store_live_owners(d->st, NULL, MAX_OWNERS, &owners, &nowners, err);
    if (rc) return rc;
    qsort(owners, nowners, sizeof *owners, owner_cmp);
  }
  int rc = 0;
  for (size_t i = 0; i < nowners && !rc; i++) {
    const char *owner = owners[i].owner;
    uint64_t before;   /* rows below this rootPid (0: no bound) */
    if (after_owner && strcmp(owner, after_owner) < 0) continue;
    if (after_owner && !strcmp(owner, after_owner)) before = after_root;
    else before = s->rto == UINT64_MAX ? 0 : s->rto + 1;
    if (after_owner && !strcmp(owner, after_owner) && !after_root) continue;   /* the owner is done */
    bool more = true;
    while (more && !rc) {
      xgr_store_session *rows = NULL;
      size_t n = 0;
      if ((rc = xgr_store_sessions(d->st, owner, before, PAGE, &rows, &n, err))) break;
      more = n == PAGE;
      for (size_t j = 0; j < n && !rc; j++) {
        if (rows[j].root_pid < s->rfrom || !rows[j].root_pid) {
          more = false;
          break;
        }
        before = rows[j].root_pid;
        unsigned st;
        if (matches(d, s, &rows[j], want_status, &st)) rc = fn(ctx, &rows[j], st, true);
        else if (all) rc = fn(ctx, &rows[j], 0, false);
      }
      xgr_store_sessions_free(rows, n);
      if (before == 1) more = false;
    }
  }
  if (own_list) xgr_store_owners_free(owners, nowners);
  return rc;
}

/* ---- the dry run ------------------------------------------------------------------------------------ */

typedef struct preview_ctx {
  xgr_node *d;
  const sel *s;
  uint64_t count;
  xgr_node_batch_hit *sample;
  size_t nsample, max;
} preview_ctx;

static int preview_one(void *ctx, const xgr_store_session *row, unsigned st, bool matched) {
  preview_ctx *p = ctx;
  assert(matched);
  p->count++;
  if (p->nsample < p->max) {
    if (!st) {   /* the sample shows the status: read it for these few */
      sel any = *p->s;
      any.status = 0;
      (void)matches(p->d, &any, row, true, &st);
    }
    xgr_node_batch_hit *h = &p->sample[p->nsample++];
    snprintf(h->owner, sizeof h->owner, "%s", row->owner);
    h->root = row->root_pid;
    snprintf(h->status, sizeof h->status, "%s", status_name(st));
  }
  return 0;
}

static int check_access(xgr_node *n, const char *caller, const sel *s, const char *path, xgr_error *err) {
  if (xgr_node_may_control(n, caller, s->owner)) return 0;
  xgr_error_set(err, XGR_EPERM, NULL,
                s->owner ? "%s may not control the sessions of %s (only the owner may)"
                         : "%s may not select every owner's sessions; name the owner (only an operator may leave it out)",
                caller && caller[0] ? caller : "an anonymous caller", s->owner ? s->owner : "");
  snprintf(err->path, sizeof err->path, "%s.owner", path);
  return XGR_EPERM;
}

int xgr_node_batch_preview(xgr_node *n, const char *caller, const json_t *selection, const char *path,
                           size_t max_sample, uint64_t *count, xgr_node_batch_hit *sample, size_t *nsample,
                           xgr_error *err) {
  *count = 0;
  *nsample = 0;
  sel s;
  int rc = parse_sel(selection, path, &s, err);
  if (!rc) rc = check_access(n, caller, &s, path, err);
  if (rc) return rc;
  preview_ctx p = {.d = n, .s = &s, .sample = sample,
                   .max = max_sample < XGR_NODE_BATCH_SAMPLE_MAX ? max_sample : XGR_NODE_BATCH_SAMPLE_MAX};
  if (!sample) p.max = 0;
  rc = walk(n, &s, NULL, 0, false, false, preview_one, &p, err);
  *count = p.count;
  *nsample = p.nsample;
  return rc;
}

/* ---- operations ------------------------------------------------------------------------------------- */

static int action_op(const char *a) {
  return !a ? -1 : !strcmp(a, "kill") ? XGR_NODE_CTL_KILL : !strcmp(a, "pause") ? XGR_NODE_CTL_PAUSE
                 : !strcmp(a, "resume") ? XGR_NODE_CTL_RESUME : !strcmp(a, "wake") ? XGR_NODE_CTL_WAKE_STEP : -1;
}

static void kick(xgr_node *n) {
  struct xgr__batcher *b = n->batch;
  if (!b) return;
  pthread_mutex_lock(&b->mu);
  b->kick = true;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

int xgr_node_batch_start(xgr_node *n, const xgr_node_batch_req *r, char id[33], uint64_t *total, xgr_error *err) {
  id[0] = '\0';
  *total = 0;
  if (atomic_load(&n->stopping)) return xgr_error_set(err, XGR_EIO, NULL, "the node is shutting down");
  int op = action_op(r->action);
  if (op < 0)
    return xgr_error_set(err, XGR_ESCHEMA, "action", "is \"%.40s\"; expected \"kill\", \"pause\", \"resume\" or \"wake\"",
                         r->action ? r->action : "");
  if (op == XGR_NODE_CTL_WAKE_STEP && (!r->step || !r->step[0] || strlen(r->step) > 128))
    return xgr_error_set(err, XGR_ESCHEMA, "stepId", "is missing; a batch wake wakes the processes waiting at a step "
                         "(step mode): name it in \"stepId\"");
  if (op != XGR_NODE_CTL_WAKE_STEP && (r->step || r->payload))
    return xgr_error_set(err, XGR_ESCHEMA, r->step ? "stepId" : "payload", "is set; only action \"wake\" takes it");
  if (r->payload && !json_is_object(r->payload))
    return xgr_error_set(err, XGR_ESCHEMA, "payload", "is not an object; expected {...} merged into the resume payload");
  if (r->payload) {   /* the single call's limits, now, rather than at every session */
    xgr_value pv = xgr_value_null();
    int rc = xgr_value_from_json(r->payload, 0, &pv, err);
    if (!rc) rc = xgr_value_check_list_cap(pv, 64, err);
    xgr_value_release(pv);
    if (rc) {
      snprintf(err->path, sizeof err->path, "payload");
      return rc;
    }
  }
  uint64_t count;
  size_t ns;
  int rc = xgr_node_batch_preview(n, r->caller, r->selection, r->sel_path, 0, &count, NULL, &ns, err);
  if (rc) return rc;
  unsigned char rnd[16];
  if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
    return xgr_error_set(err, XGR_EIO, NULL, "no randomness for the operation's id");
  for (size_t i = 0; i < 16; i++) snprintf(id + 2 * i, 3, "%02x", rnd[i]);
  json_t *spec = json_pack("{s:O, s:s}", "selection", r->selection, "actor", r->actor ? r->actor : r->caller);
  if (r->step) json_object_set_new(spec, "step", json_string(r->step));
  if (r->payload) json_object_set(spec, "payload", (json_t *)r->payload);
  char *text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(spec);
  xgr_store_batchop row = {.id = id, .caller = (char *)r->caller, .action = (char *)r->action, .spec = text,
                           .total = count};
  rc = xgr_store_batchop_create(n->st, &row, XGR_NODE_BATCH_MAX_RUNNING, XGR_NODE_BATCH_MAX_KEPT, err);
  free(text);
  if (rc) {
    id[0] = '\0';
    return rc;
  }
  *total = count;
  xgr_logfmt l;
  xgr_node_log_begin(n, &l, "info", "batch started");
  xgr_logfmt_str(&l, "batch", id);
  xgr_logfmt_str(&l, "action", r->action);
  xgr_logfmt_str(&l, "caller", r->caller);
  xgr_logfmt_u64(&l, "total", count);
  xgr_node_log_end(n, &l);
  kick(n);
  return 0;
}

/* May caller see and cancel operation o? Its starter, or who may control every owner's sessions. */
static bool may_see(xgr_node *n, const char *caller, const xgr_store_batchop *o) {
  return (caller && o->caller && !strcasecmp(caller, o->caller)) || xgr_node_may_control(n, caller, NULL);
}

int xgr_node_batch_get(xgr_node *n, const char *caller, const char *id, xgr_store_batchop *out, xgr_error *err) {
  int rc = xgr_store_batchop_get(n->st, id, out, err);
  if (rc) return rc;
  if (!may_see(n, caller, out)) {   /* another caller's operation is answered as none */
    xgr_store_batchop_clear(out);
    return xgr_error_set(err, XGR_ENOTFOUND, NULL, "no batch operation %s of %s", id, caller ? caller : "");
  }
  return 0;
}

int xgr_node_batch_cancel(xgr_node *n, const char *caller, const char *id, bool *changed, xgr_error *err) {
  *changed = false;
  xgr_store_batchop o;
  int rc = xgr_node_batch_get(n, caller, id, &o, err);
  if (rc) return rc;
  xgr_store_batchop_clear(&o);
  if ((rc = xgr_store_batchop_cancel(n->st, id, changed, err))) return rc;
  struct xgr__batcher *b = n->batch;
  if (b && *changed) {   /* the driver here stops before its next session */
    pthread_mutex_lock(&b->mu);
    snprintf(b->cancel, sizeof b->cancel, "%s", id);
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
  }
  if (*changed) {
    xgr_logfmt l;
    xgr_node_log_begin(n, &l, "info", "batch cancelled");
    xgr_logfmt_str(&l, "batch", id);
    xgr_logfmt_str(&l, "caller", caller ? caller : "");
    xgr_node_log_end(n, &l);
  }
  return 0;
}

int xgr_node_batch_list(xgr_node *n, const char *caller, size_t limit, xgr_store_batchop **out, size_t *count,
                        xgr_error *err) {
  return xgr_store_batchops(n->st, xgr_node_may_control(n, caller, NULL) ? NULL : caller, limit, out, count, err);
}

void xgr_node_batch_clear(xgr_store_batchop *op) { xgr_store_batchop_clear(op); }
void xgr_node_batches_free(xgr_store_batchop *ops, size_t count) { xgr_store_batchops_free(ops, count); }

/* ---- the driver ------------------------------------------------------------------------------------- */

typedef struct drive {
  struct xgr__batcher *b;
  xgr_node *d;
  xgr_store_batchop *op;
  sel s;
  int ctl;                     /* xgr_node_ctl_op */
  const char *actor, *step;
  const json_t *payload;
  xgr_value pv;
  int64_t lease_ms;
  uint64_t interval_us;        /* between two actions (1e6 / rate) */
  uint64_t next_us;            /* monotonic time the next action may start */
  size_t recheck;              /* sessions still to look up in the audit trail first (after a restart) */
  size_t since;                /* actions since the last progress write */
  int64_t last_write;          /* mono ms of the last progress write */
  char cursor[96];
  bool stop;                   /* lost the claim, cancelled or the node stops */
} drive;

static uint64_t mono_us(void) { return xgr__mono_ns() / 1000u; }

/* Should the driver stop now (the node stops, or this operation was cancelled here)? */
static bool halted(drive *v) {
  struct xgr__batcher *b = v->b;
  pthread_mutex_lock(&b->mu);
  bool h = b->stop || !strcmp(b->cancel, v->op->id);
  pthread_mutex_unlock(&b->mu);
  return h;
}

/* Write the progress (state: "running", or the final one). false: stop driving (the claim was lost,
 * the operation is no longer running, or the store failed). */
static bool progress(drive *v, const char *state) {
  xgr_store_batchop *op = v->op;
  char *keep_state = op->state, *keep = op->cursor;   /* the claim's strings: put back below */
  op->state = (char *)state;
  op->cursor = v->cursor;
  char now_state[16];
  xgr_error err;
  int rc = xgr_store_batchop_progress(v->d->st, op, v->lease_ms, now_state, &err);
  op->cursor = keep;
  op->state = keep_state;
  v->since = 0;
  v->last_write = xgr__mono_ms();
  if (rc) {
    xgr_node_log_error(v->d, "warn", "batch progress not written", err.message);
    return false;
  }
  return !strcmp(now_state, "running");
}

/* Wait until the rate lets the next action start; false when told to stop meanwhile. */
static bool throttle(drive *v) {
  uint64_t now = mono_us();
  if (v->next_us > now) {
    uint64_t wait = v->next_us - now;
    struct xgr__batcher *b = v->b;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + wait * 1000u;
    ts.tv_sec += (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    pthread_mutex_lock(&b->mu);
    if (!b->stop && strcmp(b->cancel, v->op->id)) pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    pthread_mutex_unlock(&b->mu);
    atomic_fetch_add(&b->throttled_ms, wait / 1000u);
    if (halted(v)) return false;
    now = mono_us();
    if (now < v->next_us) return throttle(v);   /* woken early (a kick): wait the rest */
  }
  v->next_us = (v->next_us > now ? v->next_us : now) + v->interval_us;
  return true;
}

/* Did this operation act on session (owner, root) already (its audit trail names the operation)? */
static bool acted_before(drive *v, const char *owner, uint64_t root) {
  xgr_store_audit *a = NULL;
  size_t n = 0;
  xgr_error err;
  if (xgr_store_audits(v->d->st, owner, root, &a, &n, &err)) return false;
  char needle[48];
  snprintf(needle, sizeof needle, "\"batch\":\"%s\"", v->op->id);
  bool found = false;
  for (size_t i = 0; i < n && !found; i++) found = a[i].detail && strstr(a[i].detail, needle);
  xgr_store_audits_free(a, n);
  return found;
}

static int drive_one(void *ctx, const xgr_store_session *row, unsigned st, bool matched) {
  (void)st;
  drive *v = ctx;
  xgr_store_batchop *op = v->op;
  if (halted(v)) return 1;
  /* the claim is renewed every second, also while the walk passes rows that do not match, and
   * before any action after a pause (a stalled driver finds out it lost the claim before acting) */
  if (xgr__mono_ms() - v->last_write >= PROGRESS_MS && !progress(v, "running")) {
    v->stop = true;
    return 1;
  }
  /* after a restart, the first sessions past the cursor may have been acted on (a kill ended them:
   * they no longer match): those whose audit trail names this operation are counted, once */
  bool again = false;
  if (v->recheck && fields_match(&v->s, row)) {
    again = acted_before(v, row->owner, row->root_pid);
    if (again || matched) v->recheck--;
  }
  /* a selected session may have ended after the operation started and before the driver reached
   * it: counted skipped (one that ended before the start was never selected) */
  bool ended = !matched && !again && row->status != XGR_RESULT_RUNNING && row->finished_at >= op->created_at &&
               fields_match(&v->s, row);
  if (!matched && !again && !ended) return 0;
  snprintf(v->cursor, sizeof v->cursor, "%s/%" PRIu64, row->owner, row->root_pid);
  if (again) {
    op->done++;
    xgr_counter_add(v->b->done, 1);
  } else if (ended) {
    op->skipped++;
    xgr_counter_add(v->b->skipped, 1);
  } else {
    if (!throttle(v)) return 1;
    xgr_node_ctl c = {.op = v->ctl, .owner = row->owner, .root = row->root_pid, .actor = v->actor, .batch = op->id,
                      .payload = xgr_value_null()};
    if (v->ctl == XGR_NODE_CTL_WAKE_STEP) {
      c.step = v->step;
      c.caller = op->caller;
      c.payload = v->pv;
      c.payload_json = v->payload;
    }
    xgr_error err;
    xgr_error_clear(&err);
    int rc = xgr_node_control(v->d, &c, NULL, &err);
    if (!rc) {
      op->done++;
      xgr_counter_add(v->b->done, 1);
    } else if (rc == XGR_ENOTFOUND) {   /* it ended meanwhile */
      op->skipped++;
      xgr_counter_add(v->b->skipped, 1);
    } else {
      op->failed++;
      xgr_counter_add(v->b->failed, 1);
      xgr_logfmt l;
      xgr_node_log_begin(v->d, &l, "warn", "batch action failed");
      xgr_logfmt_str(&l, "batch", op->id);
      xgr_logfmt_str(&l, "owner", row->owner);
      xgr_logfmt_u64(&l, "rootPid", row->root_pid);
      xgr_logfmt_quoted(&l, "error", err.message);
      xgr_node_log_end(v->d, &l);
    }
  }
  v->since++;
  if (v->since >= CHECKPOINT) {
    if (!progress(v, "running")) {
      v->stop = true;
      return 1;
    }
  }
  return 0;
}

/* Drive operation op (claimed) until it is done, cancelled, its claim is lost or the node stops. */
static void drive_op(struct xgr__batcher *b, xgr_store_batchop *op, int64_t lease_ms) {
  xgr_node *d = b->d;
  drive v = {.b = b, .d = d, .op = op, .lease_ms = lease_ms, .pv = xgr_value_null(), .last_write = xgr__mono_ms()};
  uint32_t rate = d->cfg.batch_rate ? d->cfg.batch_rate : XGR_NODE_DEFAULT_BATCH_RATE;
  v.interval_us = 1000000u / rate;
  v.next_us = mono_us();
  snprintf(v.cursor, sizeof v.cursor, "%s", op->cursor ? op->cursor : "");
  json_t *spec = json_loads(op->spec ? op->spec : "", 0, NULL);
  xgr_error err;
  xgr_error_clear(&err);
  v.ctl = action_op(op->action);
  v.actor = json_string_value(json_object_get(spec, "actor"));
  v.step = json_string_value(json_object_get(spec, "step"));
  v.payload = json_object_get(spec, "payload");
  const char *fail = NULL;
  if (!spec || v.ctl < 0 || !v.actor || parse_sel(json_object_get(spec, "selection"), "selection", &v.s, &err))
    fail = "its stored spec cannot be read";
  else if (v.payload && xgr_value_from_json(v.payload, 0, &v.pv, &err))
    fail = "its payload cannot be read";
  /* resuming: what was acted on after the last progress write is found in the audit trail */
  if (op->done || op->failed || op->skipped || v.cursor[0]) v.recheck = CHECKPOINT;
  xgr_logfmt l;
  xgr_node_log_begin(d, &l, "info", v.recheck ? "batch resumed" : "batch claimed");
  xgr_logfmt_str(&l, "batch", op->id);
  xgr_logfmt_str(&l, "action", op->action);
  xgr_logfmt_str(&l, "cursor", v.cursor);
  xgr_logfmt_i64(&l, "epoch", op->epoch);
  xgr_node_log_end(d, &l);
  int rc = 0;
  if (!fail) {
    char after_owner[64] = "";
    uint64_t after_root = 0;
    const char *slash = strchr(v.cursor, '/');
    if (slash && (size_t)(slash - v.cursor) < sizeof after_owner) {
      memcpy(after_owner, v.cursor, (size_t)(slash - v.cursor));
      after_owner[slash - v.cursor] = '\0';
      after_root = strtoull(slash + 1, NULL, 10);
    }
    rc = walk(d, &v.s, after_owner[0] ? after_owner : NULL, after_root, false, true, drive_one, &v, &err);
    if (rc < 0) fail = err.message;
  }
  if (fail) {
    op->error = xgr__xstrdup(fail);
    progress(&v, "failed");
    xgr_node_log_error(d, "error", "batch failed", fail);
  } else if (!rc && !v.stop) {
    op->total = op->done + op->failed + op->skipped;   /* what it found, in the end */
    progress(&v, "done");
    xgr_node_log_begin(d, &l, "info", "batch done");
    xgr_logfmt_str(&l, "batch", op->id);
    xgr_logfmt_u64(&l, "done", op->done);
    xgr_logfmt_u64(&l, "failed", op->failed);
    xgr_logfmt_u64(&l, "skipped", op->skipped);
    xgr_node_log_end(d, &l);
  } else if (!v.stop) {
    progress(&v, "running");   /* halted: cancelled (the row says so) or the node stops: the cursor stays */
  }
  xgr_value_release(v.pv);
  json_decref(spec);
}

static void *driver(void *arg) {
  struct xgr__batcher *b = arg;
  xgr_node *d = b->d;
  const char *node = xgr_store_node_id(d->st);
  bool cluster = node != NULL;
  int64_t lease_ms = cluster ? xgr_store_lease_ms(d->st) : LOCAL_LEASE_MS;
  if (!node) node = d->name;
  bool logged = false;
  for (;;) {
    pthread_mutex_lock(&b->mu);
    bool stop = b->stop;
    b->kick = false;
    pthread_mutex_unlock(&b->mu);
    if (stop) break;
    xgr_store_batchop op;
    bool found = false;
    xgr_error err;
    int rc = xgr_store_batchop_claim(d->st, node, lease_ms, !cluster, &op, &found, &err);
    if (rc && !logged) {   /* a store without batch operations, or a failure: said once */
      xgr_node_log_error(d, "warn", "batch operations cannot be claimed", err.message);
      logged = true;
    }
    if (!rc && found) {
      logged = false;
      drive_op(b, &op, lease_ms);
      xgr_store_batchop_clear(&op);
      continue;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += IDLE_MS / 1000;
    pthread_mutex_lock(&b->mu);
    if (!b->stop && !b->kick) pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    pthread_mutex_unlock(&b->mu);
  }
  return NULL;
}

static void collect(void *ctx, xgr_metrics_out *out) {
  struct xgr__batcher *b = ctx;
  xgr_metrics_family(out, "xgr_batch_throttled_seconds_total", "counter",
                     "Time the batch driver waited for its rate limit (--batch-rate)");
  xgr_metrics_line(out, "xgr_batch_throttled_seconds_total", NULL, (double)atomic_load(&b->throttled_ms) / 1000.0);
  xgr_metrics_family(out, "xgr_batch_rate_sessions_per_second", "gauge",
                     "The batch driver's rate limit: sessions acted on per second at most (--batch-rate)");
  xgr_metrics_line(out, "xgr_batch_rate_sessions_per_second", NULL,
                   b->d->cfg.batch_rate ? b->d->cfg.batch_rate : XGR_NODE_DEFAULT_BATCH_RATE);
}

void xgr__node_batch_begin(xgr_node *d) {
  if (d->batch) return;
  struct xgr__batcher *b = xgr__xcalloc(1, sizeof *b);
  b->d = d;
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  xgr_metrics *m = d->cfg.metrics;
  if (m) {
    static const char help[] = "Sessions batch operations handled, by outcome (done, failed, skipped: ended meanwhile)";
    b->done = xgr_metrics_counter(m, "xgr_batch_sessions_total", help, "outcome=\"done\"");
    b->failed = xgr_metrics_counter(m, "xgr_batch_sessions_total", help, "outcome=\"failed\"");
    b->skipped = xgr_metrics_counter(m, "xgr_batch_sessions_total", help, "outcome=\"skipped\"");
    xgr_metrics_collector(m, "node.batch", collect, b);
  }
  d->batch = b;
  b->has_th = pthread_create(&b->th, NULL, driver, b) == 0;
  if (!b->has_th) xgr_node_log_error(d, "error", "batch driver not started", "pthread_create failed");
}

void xgr__node_batch_end(xgr_node *d) {
  struct xgr__batcher *b = d->batch;
  if (!b) return;
  pthread_mutex_lock(&b->mu);
  b->stop = true;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
  if (b->has_th) pthread_join(b->th, NULL);
  b->has_th = false;
}

void xgr__node_batch_free(xgr_node *d) {
  struct xgr__batcher *b = d->batch;
  if (!b) return;
  xgr__node_batch_end(d);
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
  free(b);
  d->batch = NULL;
}
