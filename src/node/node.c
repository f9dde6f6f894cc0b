/* node.c — the node's life cycle (xgr/node.h): open the store and start the engine on the
 * persistence adapter, recover the live sessions (all of them, or with hibernation only those
 * awake or due soon), redeliver the outbox, hibernation's loader and due index, and on a cluster
 * store the claims and the lease thread (lease.c); the node's log and its Prometheus gauges.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "node/node_impl.h"
#include "util/clock.h"
#include "util/alloc.h"

/* ---- small helpers -------------------------------------------------------------------------- */

void xgr_node_log_begin(const xgr_node *d, xgr_logfmt *l, const char *level, const char *msg) {
  assert(d && l && level && msg);
  xgr_logfmt_begin(l, true, level, msg);
}

void xgr_node_log_end(const xgr_node *d, const xgr_logfmt *l) { xgr_logfmt_write(l, d->cfg.log); }

/* A failure that lasts (the database is down) fails every poll, many times a second: the same
 * message is logged once per QUIET_MS, the next line saying how many were left out. Messages are
 * told apart by their text's address (the callers pass literals); a few slots suffice, since few
 * kinds fail at once, and a full table logs everything. */
#define QUIET_MS 10000
#define QUIET_SLOTS 16
struct xgr__node_quiet {
  pthread_mutex_t mu;
  struct {
    const char *msg;
    int64_t until;
    uint64_t left_out;
  } slot[QUIET_SLOTS];
};

void xgr_node_log_error(const xgr_node *d, const char *level, const char *msg, const char *error) {
  uint64_t left_out = 0;
  struct xgr__node_quiet *q = d->quiet;
  if (q) {
    int64_t now = xgr__mono_ms();
    pthread_mutex_lock(&q->mu);
    int at = -1;
    for (int i = 0; i < QUIET_SLOTS && at < 0; i++)
      if (q->slot[i].msg == msg) at = i;
    for (int i = 0; i < QUIET_SLOTS && at < 0; i++)   /* a free slot: never used, or quiet and over */
      if (!q->slot[i].msg || (q->slot[i].until <= now && !q->slot[i].left_out)) at = i;
    if (at >= 0 && q->slot[at].msg == msg && q->slot[at].until > now) {
      q->slot[at].left_out++;
      pthread_mutex_unlock(&q->mu);
      return;
    }
    if (at >= 0) {
      if (q->slot[at].msg == msg) left_out = q->slot[at].left_out;
      q->slot[at].msg = msg;
      q->slot[at].until = now + QUIET_MS;
      q->slot[at].left_out = 0;
    }
    pthread_mutex_unlock(&q->mu);
  }
  xgr_logfmt l;
  xgr_node_log_begin(d, &l, level, msg);
  xgr_logfmt_quoted(&l, "error", error);
  if (left_out) xgr_logfmt_u64(&l, "repeated", left_out);
  xgr_node_log_end(d, &l);
}

void xgr_node_log_session(const xgr_node *d, const char *level, const char *msg, const char *owner, uint64_t root_pid,
                          const char *error) {
  xgr_logfmt l;
  xgr_node_log_begin(d, &l, level, msg);
  xgr_logfmt_str(&l, "owner", owner);
  xgr_logfmt_u64(&l, "rootPid", root_pid);
  if (error) xgr_logfmt_quoted(&l, "error", error);
  xgr_node_log_end(d, &l);
}

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- metrics ------------------------------------------------------------------------------------- */

/* Live sessions, idle ones among them, and their running and live processes (the engine's view). */
typedef struct totals {
  size_t sessions, idle, running, live;
} totals;

static totals engine_totals(xgr_node *d) {
  size_t cap = xgr_engine_list(d->e, NULL, 0) + 64;
  xgr_engine_session_info *v = xgr__xmalloc(cap * sizeof *v);
  size_t n = xgr_engine_list(d->e, v, cap);   /* the total, which may have grown since: read at most cap */
  if (n > cap) n = cap;
  totals t = {0};
  for (size_t i = 0; i < n; i++) {
    if (v[i].finished) continue;
    t.sessions++;
    t.idle += v[i].idle;
    t.running += v[i].running;
    t.live += v[i].live;
  }
  free(v);
  return t;
}

static void collect_sessions(void *ctx, xgr_metrics_out *out) {
  totals t = engine_totals(ctx);
  xgr_metrics_family(out, "xgr_sessions_live", "gauge", "Sessions with live processes in the engine");
  xgr_metrics_line(out, "xgr_sessions_live", "", (double)t.sessions);
  xgr_metrics_family(out, "xgr_sessions_idle", "gauge",
                     "Sessions in the engine whose processes all wait (candidates for hibernation)");
  xgr_metrics_line(out, "xgr_sessions_idle", "", (double)t.idle);
  xgr_metrics_family(out, "xgr_processes", "gauge", "Live processes in the engine by status");
  xgr_metrics_line(out, "xgr_processes", "status=\"running\"", (double)t.running);
  xgr_metrics_line(out, "xgr_processes", "status=\"waiting\"", (double)(t.live > t.running ? t.live - t.running : 0));
}

uint64_t xgr_node_inflight(xgr_node *d) { return xgr_node_persist_inflight(d->p); }

/* The work-stealing runtime: how work moved between the workers and how often they slept. */
static void collect_runtime(void *ctx, xgr_metrics_out *out) {
  xgr_node *d = ctx;
  xgr_engine_stats s;
  xgr_engine_get_stats(d->e, &s);
  const xgr_rt_counters *rc = &s.runtime;
  static const char *const kinds[] = {"actor_turns", "tasks", "steals", "stolen_items", "global_takes", "parks",
                                      "wakeups"};
  const uint64_t vals[] = {rc->steps, rc->tasks, rc->steals, rc->stolen, rc->global_batches, rc->parks, rc->wakeups};
  xgr_metrics_family(out, "xgr_runtime_events_total", "counter", "Work-stealing runtime events by kind");
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
    char label[48];
    snprintf(label, sizeof label, "kind=\"%s\"", kinds[i]);
    xgr_metrics_line(out, "xgr_runtime_events_total", label, (double)vals[i]);
  }
}

/* One family per measure, one series per chain backend (a configured name: bounded). */
static void collect_chain(void *ctx, xgr_metrics_out *out) {
  xgr_node *d = ctx;
  json_t *h = xgr_chain_health(d->cfg.chain);
  static const struct { const char *key, *name, *type, *help; } fams[] = {
      {"calls", "xgr_chain_calls_total", "counter", "JSON-RPC calls to the chain node, by backend"},
      {"errors", "xgr_chain_errors_total", "counter", "Chain calls that failed, by backend"},
      {"lastBlock", "xgr_chain_last_block", "gauge", "The latest block number the backend reported"},
      {"ok", "xgr_chain_up", "gauge", "Whether the backend's last call succeeded (1) or not (0)"},
  };
  for (size_t k = 0; k < sizeof fams / sizeof fams[0]; k++) {
    xgr_metrics_family(out, fams[k].name, fams[k].type, fams[k].help);
    size_t i;
    json_t *b;
    json_array_foreach(h, i, b) {
      const char *name = json_string_value(json_object_get(b, "name"));
      char esc[160], l[200];
      xgr_metrics_label_escape(esc, sizeof esc, name ? name : "default");
      snprintf(l, sizeof l, "backend=\"%.64s\"", esc);
      const json_t *v = json_object_get(b, fams[k].key);
      xgr_metrics_line(out, fams[k].name, l, json_is_boolean(v) ? (json_is_true(v) ? 1 : 0) : (double)json_integer_value(v));
    }
  }
  json_decref(h);
  if (d->cfg.executor) {
    uint64_t pending, done;
    xgr_chain_executor_counts(d->cfg.executor, &pending, &done);
    xgr_metrics_family(out, "xgr_chain_executions_pending", "gauge", "Chain executions recorded and not yet mined");
    xgr_metrics_line(out, "xgr_chain_executions_pending", "", (double)pending);
    xgr_metrics_family(out, "xgr_chain_executions_total", "counter", "Chain executions mined");
    xgr_metrics_line(out, "xgr_chain_executions_total", "", (double)done);
    /* 1 while this xgrd signs and sends (always for a single writer; one cluster node at a time) */
    xgr_metrics_family(out, "xgr_chain_executions_sender", "gauge", "Whether this xgrd signs and sends executions (1) or not (0)");
    xgr_metrics_line(out, "xgr_chain_executions_sender", "", xgr_chain_executor_sending(d->cfg.executor) ? 1 : 0);
  }
}

static void collect_engine(void *ctx, xgr_metrics_out *out) {
  xgr_node *d = ctx;
  xgr_engine_stats s;
  xgr_engine_get_stats(d->e, &s);
  xgr_metrics_family(out, "xgr_engine_events_total", "counter", "Engine events by kind (sessions, steps, timers, hibernation)");
  xgr_metrics_line(out, "xgr_engine_events_total", "kind=\"sessions_started\"", (double)s.sessions_started);
  xgr_metrics_line(out, "xgr_engine_events_total", "kind=\"sessions_finished\"", (double)s.sessions_finished);
  xgr_metrics_line(out, "xgr_engine_events_total", "kind=\"sessions_capped\"", (double)s.sessions_capped);
  xgr_metrics_line(out, "xgr_engine_events_total", "kind=\"sessions_over_quota\"", (double)s.sessions_over_quota);
  xgr_metrics_line(out, "xgr_engine_events_total", "kind=\"wakeups_refused\"", (double)s.wakeups_refused);
  xgr_metrics_line(out, "xgr_engine_events_total", "kind=\"steps\"", (double)s.steps);
  xgr_metrics_line(out, "xgr_engine_events_total", "kind=\"api_http_requests\"", (double)s.http_requests);
  xgr_metrics_line(out, "xgr_engine_events_total", "kind=\"timers_fired\"", (double)s.timers_fired);
  xgr_metrics_line(out, "xgr_engine_events_total", "kind=\"store_batches\"", (double)s.store_batches);
  xgr_engine_hib_stats hs;
  xgr_engine_hib_get_stats(d->e, &hs);
  xgr_metrics_line(out, "xgr_engine_events_total", "kind=\"sessions_evicted\"", (double)hs.evicted);
  xgr_metrics_line(out, "xgr_engine_events_total", "kind=\"sessions_loaded\"", (double)hs.loaded);
  xgr_metrics_line(out, "xgr_engine_events_total", "kind=\"session_loads_failed\"", (double)hs.load_failed);
  xgr_metrics_line(out, "xgr_engine_events_total", "kind=\"session_loads_retried\"", (double)hs.load_retried);
  xgr_metrics_line(out, "xgr_engine_events_total", "kind=\"session_load_retries_dropped\"", (double)hs.retry_dropped);
  xgr_store_stats ss;
  xgr_store_get_stats(d->st, &ss);
  static const char *const help[] = {
      "Store transactions committed", "Commit groups done again after a lost COMMIT was found aborted",
      "Commit groups tried again on a new connection", "Connections the store writer made again"};
  const char *const names[] = {"xgr_store_transactions_total", "xgr_store_group_redos_total",
                               "xgr_store_group_retries_total", "xgr_store_writer_reconnects_total"};
  const uint64_t vals[] = {ss.transactions, ss.group_redos, ss.group_retries, ss.writer_reconnects};
  for (size_t i = 0; i < 4; i++) {
    xgr_metrics_family(out, names[i], "counter", help[i]);
    xgr_metrics_line(out, names[i], "", (double)vals[i]);
  }
  xgr_metrics_family(out, "xgr_store_max_batches_per_transaction", "gauge", "The most engine batches one transaction carried");
  xgr_metrics_line(out, "xgr_store_max_batches_per_transaction", "", (double)ss.max_batches_per_tx);
}

/* Outbound API calls (docs/SECURITY.md "Outbound calls"): refused by the address policy since the
 * start, in flight and waiting for a slot under --max-outbound / --max-outbound-per-owner now. */
static void collect_outbound(void *ctx, xgr_metrics_out *out) {
  xgr_node *d = ctx;
  xgr_engine_stats s;
  xgr_engine_get_stats(d->e, &s);
  xgr_metrics_family(out, "xgr_outbound_refused_total", "counter", "Outbound API calls the address policy refused");
  xgr_metrics_line(out, "xgr_outbound_refused_total", "", (double)s.outbound_refused);
  xgr_metrics_family(out, "xgr_outbound_in_flight", "gauge", "Outbound API calls in flight");
  xgr_metrics_line(out, "xgr_outbound_in_flight", "", (double)s.outbound_in_flight);
  xgr_metrics_family(out, "xgr_outbound_waiting", "gauge",
                     "Outbound API calls waiting for a slot under --max-outbound / --max-outbound-per-owner");
  xgr_metrics_line(out, "xgr_outbound_waiting", "", (double)s.outbound_waiting);
  xgr__node_migrate_metrics(d, out);
}

/* ---- life cycle and recovery -------------------------------------------------------------------- */

/* Internal wake-ups still in the outbox were committed by their producer but not (durably) applied
 * by their target: deliver each again (at least once; the target applies an id at most once and
 * removes the row with its next batch). One whose target does not run here is refused: logged,
 * counted and removed. */
static void redeliver(xgr_node *d) {
  xgr_store_wake *w = NULL;
  size_t n = 0;
  xgr_error err;
  if (xgr_store_outbox(d->st, &w, &n, &err)) {
    xgr_node_log_error(d, "error", "cannot read the outbox", err.message);
    return;
  }
  size_t sent = 0;
  for (size_t i = 0; i < n; i++) {
    xgr_value pl = xgr_value_null();
    if (w[i].payload && xgr_value_from_json_text(w[i].payload, strlen(w[i].payload), 0, &pl, &err)) pl = xgr_value_null();
    int rc = xgr_engine_redeliver(d->e, w[i].id, w[i].caller, w[i].from_root, w[i].to_owner, w[i].to_root, w[i].step,
                                  w[i].rule, pl);
    xgr_value_release(pl);
    if (!rc) {
      sent++;
      continue;
    }
    char msg[XGR_LOGFMT_MAX];
    snprintf(msg, sizeof msg, "wake-up refused: from session %s/%llu to session %s/%llu step %s: no such session here",
             w[i].from_owner, (unsigned long long)w[i].from_root, w[i].to_owner, (unsigned long long)w[i].to_root,
             w[i].step);
    xgr_logfmt l;
    xgr_node_log_begin(d, &l, "warn", msg);
    xgr_logfmt_str(&l, "id", w[i].id);
    xgr_node_log_end(d, &l);
    xgr_store_changes *c = xgr_store_changes_new();
    xgr_store_changes_wake_done(c, w[i].id, "no such session here");
    if (xgr_store_commit(d->st, c, &err))
      xgr_node_log_error(d, "error", "cannot remove a refused wake-up from the outbox", err.message);
  }
  if (n) {
    xgr_logfmt l;
    xgr_node_log_begin(d, &l, "info", "outbox redelivered");
    xgr_logfmt_u64(&l, "wakeups", n);
    xgr_logfmt_u64(&l, "delivered", sent);
    xgr_node_log_end(d, &l);
  }
  xgr_store_wakes_free(w, n);
}

/* Restore one live session from its rows and start it in the engine: 0, XGR_ECONFLICT when the
 * engine runs it already, else the error (logged). Recovery and hibernation share it. */
static int load_one(xgr_node *d, const xgr_store_live *l, xgr_error *err) {
  const xgr_store_session *ss = l->session;
  const xgr_bundle *b = NULL;
  int rc = xgr_node_session_bundle(d, ss, &b, err);   /* its pinned bytes, never the rules current now */
  if (rc) {
    xgr_node_log_session(d, "error", "cannot recover session", ss->owner, ss->root_pid, err->message);
    return rc;
  }
  xgr_effects fx;
  xgr_effects_init(&fx);
  xgr_session_config sc = {.max_running = d->cfg.max_running};
  xgr_session *s = xgr_store_restore_session(b->orch, l, &sc, xgr_engine_now(d->e), &fx, err);
  if (!s) {
    xgr_node_bundle_put(d, b);
    xgr_effects_free(&fx);
    xgr_node_log_session(d, "error", "cannot recover session", ss->owner, ss->root_pid, err->message);
    return err->code ? err->code : XGR_EINVAL;
  }
  xgr_engine_start sr = {.bundle = b, .owner = ss->owner, .root_pid = ss->root_pid, .restore = s, .restore_fx = &fx,
                         .stored_due = ss->wake_due, .steps = xgr_node_persist_steps(d->p, ss->owner, ss->root_pid),
                         .stored_bytes = ss->stored_bytes};
  /* the owner's stored bytes, known before its session writes (a load may block on the store) */
  uint64_t ob;
  xgr_error oerr;
  if (xgr_node_persist_owner_bytes(d->p, ss->owner, INT64_MAX / 1000000, &ob, NULL, &oerr))
    xgr_node_log_session(d, "warn", "cannot read the owner's stored bytes", ss->owner, ss->root_pid, oerr.message);
  rc = xgr_engine_start_session(d->e, &sr, err);   /* takes this call's reference (bundle_done) */
  xgr_effects_free(&fx);
  if (rc && rc != XGR_ECONFLICT)
    xgr_node_log_session(d, "error", "cannot restart session", ss->owner, ss->root_pid, err->message);
  return rc;
}

int xgr_node_check_otlp_endpoint(const char *endpoint, xgr_error *err) {
  return xgr__tracer_check_endpoint(endpoint, err);
}

int xgr__node_load(xgr_node *d, const xgr_store_live *l, xgr_error *err) { return load_one(d, l, err); }

static int recover_one(void *ctx, const xgr_store_live *l) {
  xgr_node *d = ctx;
  xgr_error err;
  xgr_error_clear(&err);
  int rc = load_one(d, l, &err);
  if (rc && rc != XGR_ECONFLICT) d->failed++;
  else d->restored++;
  return 0;
}

/* ---- hibernation: the engine's loader and due index ------------------------------------------ */

typedef struct hib_load_ctx {
  xgr_node *d;
  bool found;
  int rc;
  xgr_error *err;
} hib_load_ctx;

static int hib_load_cb(void *ctx, const xgr_store_live *l) {
  hib_load_ctx *c = ctx;
  c->found = true;
  c->rc = load_one(c->d, l, c->err);
  return 0;
}

static int hib_load(void *ctx, const char *owner, uint64_t root, xgr_error *err) {
  xgr_node *d = ctx;
  if (!owner || !owner[0])
    return xgr_error_set(err, XGR_ENOTFOUND, NULL, "no live session with rootPid %llu", (unsigned long long)root);
  hib_load_ctx c = {d, false, 0, err};
  xgr_store_load_filter f = {.owner = owner, .root_pid = root};
  /* a cluster node loads only under its lease (docs/CLUSTER.md "Hibernation"); asked of the store,
   * which outlives the engine (d->lease goes first at teardown) */
  int rc = xgr_store_node_id(d->st) ? xgr__node_lease_load(d, owner, root, hib_load_cb, &c, err)
                                     : xgr_store_load_some(d->st, &f, hib_load_cb, &c, err);
  if (rc) return rc;
  if (!c.found)
    return xgr_error_set(err, XGR_ENOTFOUND, NULL, "no live session %s/%llu", owner, (unsigned long long)root);
  return c.rc;
}

static int hib_due(void *ctx, const xgr_engine_due_key *after, int64_t upto, xgr_engine_due_key *out, size_t max,
                   size_t *n) {
  xgr_node *d = ctx;
  xgr_store_due_key a = {.due = after->due, .root_pid = after->root_pid};
  memcpy(a.owner, after->owner, sizeof a.owner);
  xgr_store_due_key *k = xgr__xmalloc((max ? max : 1) * sizeof *k);
  xgr_error err;
  /* a cluster node's poller sees only the rows leased to it */
  int rc = xgr_store_node_id(d->st) ? xgr_store_lease_due(d->st, &a, upto, k, max, n, &err)
                                     : xgr_store_due(d->st, &a, upto, k, max, n, &err);
  for (size_t i = 0; !rc && i < *n; i++) {
    out[i].due = k[i].due;
    out[i].root_pid = k[i].root_pid;
    memcpy(out[i].owner, k[i].owner, sizeof out[i].owner);
  }
  free(k);
  if (rc) xgr_node_log_error(d, "error", "cannot read the due index", err.message);
  return rc;
}

bool xgr_node_live(xgr_node *d, const char *owner, uint64_t root, bool load, xgr_engine_session_info *info) {
  xgr_engine_session_info in;
  if (!info) info = &in;
  memset(info, 0, sizeof *info);
  if (!xgr_engine_session(d->e, owner, root, info)) return !info->finished;
  if (d->lease) {   /* cluster: hibernated here (loaded when asked), or running elsewhere (the store says) */
    if (load && d->hib.load && !xgr_engine_load(d->e, owner, root, NULL) && !xgr_engine_session(d->e, owner, root, info))
      return !info->finished;
    memset(info, 0, sizeof *info);
    return xgr__node_lease_live(d, owner, root);
  }
  if (!d->hib.load) return false;
  if (load) {
    if (xgr_engine_load(d->e, owner, root, NULL)) return false;
    return !xgr_engine_session(d->e, owner, root, info) && !info->finished;
  }
  xgr_store_session s;
  xgr_error err;
  if (xgr_store_session_get(d->st, owner, root, &s, &err)) return false;
  bool live = s.status == XGR_RESULT_RUNNING;
  xgr_store_session_clear(&s);
  return live;
}

/* How many live sessions the bounded recovery leaves in the store: those in the due index with a
 * due time after upto (counted before recovery, while no session of the engine can hibernate). */
static void count_hibernated(xgr_node *d, int64_t upto) {
  xgr_store_due_key after = {.due = upto, .root_pid = UINT64_MAX}, keys[512];
  memset(after.owner, 0xff, sizeof after.owner - 1);
  size_t n;
  xgr_error e;
  do {
    if (xgr_store_due(d->st, &after, XGR_STORE_DUE_NEVER, keys, sizeof keys / sizeof *keys, &n, &e)) return;
    d->hibernated += n;
    if (n) after = keys[n - 1];
  } while (n == sizeof keys / sizeof *keys);
}

xgr_node *xgr_node_new(const xgr_node_config *cfg, xgr_error *err) {
  xgr_node *d = xgr__xcalloc(1, sizeof *d);
  d->cfg = *cfg;
  if (cfg->node_id || cfg->node_name) snprintf(d->name, sizeof d->name, "%s", cfg->node_id ? cfg->node_id : cfg->node_name);
  else if (gethostname(d->name, sizeof d->name - 1)) snprintf(d->name, sizeof d->name, "localhost");
  pthread_mutex_init(&d->reg_mu, NULL);
  d->quiet = xgr__xcalloc(1, sizeof *d->quiet);
  pthread_mutex_init(&d->quiet->mu, NULL);
  xgr_store_config sc = {.sync = cfg->store_sync ? XGR_STORE_SYNC_NORMAL : XGR_STORE_SYNC_FULL,
                         .max_page_count = cfg->store_max_pages,
                         .node_id = cfg->node_id,
                         .lease_ms = cfg->lease_ms,
                         .pg_writers = cfg->store_writers,
                         .ttl_secs = cfg->session_ttl_secs,
                         .history_secs = cfg->history_secs,
                         .batch_secs = cfg->batch_secs};
  d->st = xgr_store_open(cfg->store ? cfg->store : "memory:", &sc, err);
  if (!d->st) goto fail;
  d->p = xgr_node_persist_new(d->st);
  if (!d->p) goto fail;
  /* before the engine: its workers read these as soon as recovery hands them a session */
  if (cfg->metrics) {
    xgr_node_persist_metrics(d->p, cfg->metrics);
    d->quota_starts_refused = xgr_metrics_counter(cfg->metrics, "xgr_quota_refusals_total",
                                                  "Session batches and starts refused for a quota", "what=\"start\"");
    d->access_denied = xgr_metrics_counter(cfg->metrics, "xgr_access_total",
                                           "Access decisions on sessions for callers other than the owner and operators",
                                           "result=\"denied\"");
    d->access_grant = xgr_metrics_counter(cfg->metrics, "xgr_access_total",
                                          "Access decisions on sessions for callers other than the owner and operators",
                                          "result=\"grant\"");
  }
  xgr_node_persist_set_owner_quota(d->p, cfg->max_owner_bytes ? cfg->max_owner_bytes : XGR_NODE_DEFAULT_MAX_OWNER_BYTES);
  if (cfg->chain) {
    d->reader = xgr_chain_reader_of(cfg->chain);
    d->chain_cache = xgr_chain_cache_new(cfg->chain);
    xgr_node_chain_tick(d);   /* first health probe; remembers the block the log refresh starts from */
  }
  xgr_engine_config ec = {.workers = cfg->workers,
                          .max_running = cfg->max_running,
                          .chain = cfg->chain ? &d->reader : NULL,
                          .api_map = cfg->api_map,
                          .napi_map = cfg->napi_map,
                          .outbound = cfg->outbound,
                          .max_outbound = cfg->max_outbound,
                          .max_outbound_per_owner = cfg->max_outbound_per_owner,
                          .exec = cfg->executor ? xgr_chain_executor_hook(cfg->executor) : NULL,
                          .store = xgr_node_persist_hook(d->p),
                          .clock = {.kind = XGR_CLOCK_REAL, .origin_ms = wall_ms()},
                          .max_live = cfg->max_live,
                          .max_session_steps = cfg->max_session_steps,
                          .max_session_bytes = cfg->max_session_bytes,
                          .max_owner_processes = cfg->max_owner_processes,
                          .bundle_done = xgr__node_bundle_done,
                          .recovering = true,
                          .node_name = d->name,
                          .bundle_ctx = d};
  double scale = cfg->time_scale > 0 ? cfg->time_scale : 1;
  xgr_error le0;
  size_t nd = 0;   /* a backend without the due index (xgr_store_due: XGR_EUNSUPPORTED) keeps every session */
  if (cfg->hibernate_after_ms >= 0 && strcmp(xgr_store_backend(d->st), "memory") &&
      !xgr_store_due(d->st, NULL, INT64_MIN, NULL, 0, &nd, &le0)) {
    /* the loader looks 200 ms of wall time ahead (at least 1 s of the engine clock), every 20 ms */
    int64_t lead = (int64_t)(200.0 * scale);
    d->hib = (xgr_engine_hibernation){.after_ms = cfg->hibernate_after_ms ? cfg->hibernate_after_ms : 5000,
                                      .lead_ms = lead > 1000 ? lead : 1000, .poll_ms = 20, .load = hib_load,
                                      .due = hib_due, .ctx = d};
    ec.hibernate = &d->hib;
  }
  /* a cluster node's session clock starts from the store's clock, not its own: times it stamps
   * (a wake-up's "now", a timer's due) are read by every node (docs/CLUSTER.md, "Time") */
  int64_t origin = wall_ms(), sms;
  uint64_t rtt, tq = xgr__mono_ns();
  xgr_error ce;
  if (xgr_store_node_id(d->st) && !xgr_store_cluster_clock(d->st, &sms, &rtt, &ce)) {
    int64_t store_now = sms + (int64_t)((xgr__mono_ns() - tq - rtt / 2) / 1000000u);
    if (llabs(store_now - origin) >= 1000) {
      xgr_logfmt l;
      xgr_node_log_begin(d, &l, "warn", "this node's clock is off the store's; its sessions use the store's clock");
      xgr_logfmt_i64(&l, "offset_ms", origin - store_now);
      xgr_node_log_end(d, &l);
    }
    origin = store_now;
  }
  ec.clock.origin_ms = origin;
  if (cfg->time_scale > 0 && cfg->time_scale != 1) {   /* scaled: Unix ms x scale, continuous across restarts */
    ec.clock.kind = XGR_CLOCK_SCALED;
    ec.clock.scale = cfg->time_scale;
    ec.clock.origin_ms = (int64_t)((double)origin * cfg->time_scale);
  }
  d->e = xgr_engine_new(&ec, err);
  if (!d->e) goto fail;
  if (cfg->otlp_endpoint) {   /* tracing: before any session can make an event */
    d->trace = xgr__tracer_new(d, cfg->otlp_endpoint, cfg->otlp_queue_spans, scale, err);
    if (!d->trace || xgr__tracer_subscribe(d->trace, d->e, err)) goto fail;
  }
  return d;
fail:
  xgr_node_free(d);
  return NULL;
}

int xgr_node_recover(xgr_node *d, xgr_error *err) {
  xgr_error le;
  if (xgr_store_node_id(d->st)) {   /* a cluster node: sessions come by claims; internal wake-ups for
                                     * sessions held elsewhere stay in the outbox (the engine stays
                                     * `recovering`) for their holder */
    /* with hibernation the claims load what is awake or due by at least this bound and hold the
     * rest; the due poller goes on after it */
    int64_t upto = xgr_engine_now(d->e) + d->hib.lead_ms;
    int rc = xgr__node_lease_start(d, err);
    if (rc) return rc;
    if (d->hib.load && xgr_engine_hibernation_start(d->e, upto, &le))
      xgr_node_log_error(d, "error", "hibernation off", le.message);
    xgr_logfmt lg;
    xgr_node_log_begin(d, &lg, "info", "recovered");
    xgr_logfmt_str(&lg, "store", xgr_store_backend(d->st));
    xgr_logfmt_u64(&lg, "sessions", d->restored);
    xgr_logfmt_u64(&lg, "failed", d->failed);
    xgr_logfmt_str(&lg, "node", xgr_store_node_id(d->st));
    xgr_logfmt_i64(&lg, "hibernate_after_ms", d->hib.load ? d->hib.after_ms : -1);
    xgr_node_log_end(d, &lg);
    xgr__node_batch_begin(d);
    atomic_store(&d->ready, true);
    return 0;
  }
  /* lazy with hibernation: only the sessions that are awake or due within the loader's look-ahead;
   * the hibernated rest stays in the store until it is due or called */
  int64_t upto = xgr_engine_now(d->e) + d->hib.lead_ms;
  xgr_store_load_filter lf = {.bounded = true, .due_upto = upto};
  if (d->hib.load) count_hibernated(d, upto);
  if (d->hib.load ? xgr_store_load_some(d->st, &lf, recover_one, d, &le) : xgr_store_load_live(d->st, recover_one, d, &le))
    xgr_node_log_error(d, "error", "recovery stopped", le.message);
  if (d->hib.load && xgr_engine_hibernation_start(d->e, upto, &le))
    xgr_node_log_error(d, "error", "hibernation off", le.message);
  xgr_engine_recovered(d->e);   /* before the outbox is read: see xgr_engine_config.recovering */
  redeliver(d);
  xgr_logfmt lg;
  xgr_node_log_begin(d, &lg, "info", "recovered");
  xgr_logfmt_str(&lg, "store", xgr_store_backend(d->st));
  xgr_logfmt_u64(&lg, "sessions", d->restored);
  xgr_logfmt_u64(&lg, "failed", d->failed);
  xgr_logfmt_u64(&lg, "hibernated", d->hibernated);
  xgr_logfmt_i64(&lg, "hibernate_after_ms", d->hib.load ? d->hib.after_ms : -1);
  xgr_node_log_end(d, &lg);
  xgr__node_batch_begin(d);
  atomic_store(&d->ready, true);
  return 0;
}

int xgr_node_start(xgr_node *d, const xgr_node_start_req *r, xgr_error *err) {
  if (atomic_load(&d->stopping)) return xgr_error_set(err, XGR_EIO, NULL, "the node is shutting down");
  if (d->hib.load || d->lease) {
    /* a hibernated session (or, on a cluster, one another node holds) is in the store and not in
     * this engine: a second actor for it would take its wake-ups and lose them when its first
     * batch meets the stored row, so such a start is answered from the store */
    xgr_store_session row;
    xgr_error se;
    int rc = xgr_store_session_get(d->st, r->owner, r->root, &row, &se);
    if (!rc) {
      xgr_store_session_clear(&row);
      return xgr_error_set(err, XGR_ECONFLICT, NULL, "session %s/%llu exists", r->owner, (unsigned long long)r->root);
    }
    if (rc != XGR_ENOTFOUND) {
      *err = se;
      return rc;
    }
  }
  xgr_engine_start sr = {.bundle = r->bundle, .owner = r->owner, .root_pid = r->root, .start = r->step,
                         .payload = r->payload, .start_at = r->start_at, .registry = r->registry,
                         .max_total_gas = r->max_total_gas, .bundle_hash = r->bundle_hash, .fork = r->fork,
                         .started = r->started, .started_ctx = r->started_ctx};
  xgr_node_bundle_hold(d, r->bundle);   /* the session's own reference, given back by the engine's bundle_done */
  return xgr_engine_start_session(d->e, &sr, err);
}

/* The default chain backend answered its last probe (true without a chain). */
static bool chain_ok(xgr_node *d) {
  if (!d->cfg.chain) return true;
  json_t *h = xgr_chain_health(d->cfg.chain);
  bool ok = false;
  size_t i;
  json_t *b;
  json_array_foreach(h, i, b) if (json_is_null(json_object_get(b, "name"))) ok = json_is_true(json_object_get(b, "ok"));
  json_decref(h);
  return ok;
}

bool xgr_node_ready(xgr_node *d) {
  xgr_store_lease_stats ls;
  xgr_store_lease_get_stats(d->st, &ls);   /* a cluster node without its lease connection claims nothing */
  return atomic_load(&d->ready) && !atomic_load(&d->stopping) && !xgr_store_failed(d->st, NULL) && !ls.disconnected &&
         chain_ok(d);
}

int xgr_node_store_failed(xgr_node *d, xgr_error *err) { return xgr_store_failed(d->st, err); }

xgr_store *xgr_node_store(xgr_node *d) { return d->st; }
xgr_engine *xgr_node_engine(xgr_node *d) { return d->e; }
const xgr_node_config *xgr_node_config_of(const xgr_node *d) { return &d->cfg; }
bool xgr_node_has_chain(const xgr_node *d) { return d->chain_cache != NULL; }


void xgr_node_chain_tick(xgr_node *d) {
  if (!d || !d->cfg.chain) return;
  xgr_chain_probe(d->cfg.chain);
  xgr_error e;
  int n = xgr_chain_cache_refresh(d->chain_cache, &e);
  if (n < 0) xgr_node_log_error(d, "warn", "chain cache refresh failed", e.message);
  else if (n > 0) {
    xgr_logfmt l;
    xgr_node_log_begin(d, &l, "info", "chain cache refreshed");
    xgr_logfmt_i64(&l, "dropped", n);
    xgr_node_log_end(d, &l);
  }
}

void xgr_node_recovered(const xgr_node *d, size_t *restored, size_t *failed, size_t *hibernated) {
  *restored = d->restored;
  *failed = d->failed;
  *hibernated = d->hibernated;
}

int xgr_node_shutdown(xgr_node *d, long timeout_ms) {
  atomic_store(&d->stopping, true);
  xgr__node_batch_end(d);   /* it calls the engine: first; its operation goes on after a restart */
  int rc = d->e ? xgr_engine_shutdown(d->e, timeout_ms) : 0;
  if (d->st) xgr_store_flush(d->st);
  xgr__node_lease_stop(d, true);   /* cluster: the others may take the sessions at once */
  return rc;
}

void xgr_node_free(xgr_node *d) {
  if (!d) return;
  atomic_store(&d->stopping, true);
  xgr__node_batch_free(d);        /* its thread calls the engine */
  xgr__node_lease_free(d);        /* its thread calls the engine */
  xgr_engine_free(d->e);          /* shuts down: steps finish, batches are submitted */
  xgr__tracer_free(d->trace);     /* after the engine: no more events; posts what is queued */
  xgr_store_close(d->st);         /* commits what is queued */
  xgr_node_persist_free(d->p);
  xgr__node_bundles_free(d);
  xgr_chain_cache_free(d->chain_cache);
  pthread_mutex_destroy(&d->reg_mu);
  pthread_mutex_destroy(&d->quiet->mu);
  free(d->quiet);
  free(d);
}

void xgr_node_metrics(xgr_node *d, xgr_metrics *m) {
  xgr_metrics_collector(m, "node.sessions", collect_sessions, d);
  xgr_metrics_collector(m, "node.engine", collect_engine, d);
  xgr_metrics_collector(m, "node.runtime", collect_runtime, d);
  xgr_metrics_collector(m, "node.outbound", collect_outbound, d);
  xgr__node_lease_metrics(d, m);
  if (d->trace) xgr__tracer_metrics(d->trace, m);
  if (d->cfg.chain) xgr_metrics_collector(m, "node.chain", collect_chain, d);
}
