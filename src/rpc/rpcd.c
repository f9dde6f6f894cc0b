/* rpcd.c — xgrd's JSON-RPC service over a node (xgr/rpc.h, "xgrd" section): its life cycle
 * (subscribe to the node's engine, stop the waiting answers), the gauges of its own queues, and the
 * method table. The node (xgr/node.h) owns and runs the sessions.
 *
 * Both naming styles reach the same code: the seed-001 names (`xgr.enqueue`, `xgr.listSessions`,
 * ...) and the public reference's (`xgr_validateDataTransfer`, `xgr_listSessions`, ...); every
 * method is registered under `xgr.<name>` and `xgr_<name>`. Named parameters come as an object
 * or as a one-element array holding it (`params[0]`); `xgr_stepExecuted` and `xgr_sessionAlive`
 * also take their positional arrays. Writing methods sit behind a guard that refuses them once
 * the store has failed. The methods themselves live in start.c, control.c, list.c and
 * registry.c (see rpc_impl.h).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rpc/rpc_impl.h"
#include "xgr/auth.h"
#include "rpc/console_service_impl.h"
#include "util/alloc.h"

/* ---- metrics ------------------------------------------------------------------------------------- */

static void collect_queues(void *ctx, xgr_metrics_out *out) {
  xgr_rpcd *d = ctx;
  xgr_metrics_line(out, "xgr_queue_depth", "queue=\"store_batches\"", (double)xgr_node_inflight(d->n));
  xgr_metrics_line(out, "xgr_queue_depth", "queue=\"first_step_waiters\"", (double)atomic_load(&d->nwaiters));
}

static void collect_validates(void *ctx, xgr_metrics_out *out) {
  xgr_rpcd *d = ctx;
  xgr_metrics_line(out, "xgr_validates_in_flight", "", (double)xgr__tally_total(&d->validates));
}

/* ---- registration ----------------------------------------------------------------------------- */

typedef struct mdef {
  const char *name;   /* without prefix: registered as xgr.<name> and xgr_<name> */
  xgr_rpc_method_fn fn;
  bool writes;        /* refused with -32009 once the store has failed */
} mdef;

/* A writing method behind the store-failure xgr__guard: once the store has failed, nothing more is
 * accepted that would have to be written (reads of what was committed still work). */
static int guarded(void *ctx, const xgr_rpc_caller *caller, const json_t *params, json_t **result, xgr_error *err) {
  const xgr__guard *g = ctx;
  xgr_error se;
  if (xgr_node_store_failed(g->d->n, &se))
    return xgr__rpc_fail(err, XGR_EIO, NULL, "the store failed, so xgrd takes no more work: %s",
                         se.message);
  return g->fn(g->d, caller, params, result, err);
}

/* xgr_getCoreAddrs (public reference §5): what a client needs to build permits — the chain id as
 * hex and the control contract as `precompile`; no grants or public sale contracts locally. */
static int m_core_addrs(void *ctx, const xgr_rpc_caller *caller, const json_t *params, json_t **result,
                        xgr_error *err) {
  static const char *const none[] = {NULL};   /* no parameters (from aside) */
  const json_t *o;
  int rc = xgr__rpc_named(params, none, &o, err);
  if (rc) return rc;
  char chain[24] = "";
  const char *pc = "";
  if (caller && caller->auth) {
    snprintf(chain, sizeof chain, "0x%llx", (unsigned long long)xgr_auth_chain_id(caller->auth));
    pc = xgr_auth_control_contract(caller->auth);
  }
  *result = json_pack("{s:s, s:s, s:s, s:s}", "grants", "", "publicSale", "", "precompile", pc, "chainId", chain);
  xgr_rpcd *d = ctx;
  /* with --chain: every backend's health (docs/CHAIN.md) */
  if (d && d->nc->chain) json_object_set_new(*result, "chains", xgr_chain_health(d->nc->chain));
  return 0;
}

/* The methods of the public endpoint reference that xgrd does not offer, each with the reason it
 * answers -32601 (docs/RPC.md lists the same reasons, and tests/rpc/test_reference.py holds the two
 * to each other). */
typedef struct absent_method {
  const char *name;     /* without prefix, as in mdef */
  const char *reason;
} absent_method;
#define NO_ENCRYPTION \
  "xgr keeps no encrypted rule documents: rules are registered in plain JSON (xgr_putRule, xgr_getRule) and an " \
  "encrypted rule on a chain is refused"
static const absent_method absent[] = {
    {"getPublicSale", "xgr runs no token sale: a public sale contract is part of the XDaLa chain, not of the process "
                      "engine"},
    {"getCirculatingSupply", "xgr holds no token balances: the circulating supply is the chain's, not the process "
                             "engine's"},
    {"estimateRuleGas", "xgr prices no gas: a session's work is bounded by --max-session-steps and "
                        "--max-session-processes, not billed"},
    {"getEncryptedLogInfo", "xgr writes no encrypted logs: step results are kept in the store and read with "
                            "xgr.getSession"},
    {"getXRC137Meta", NO_ENCRYPTION},
    {"encryptXRC137", NO_ENCRYPTION},
};

/* A method of the public reference xgrd does not offer: -32601 naming it and why (ctx: its entry). */
static int m_absent(void *ctx, const xgr_rpc_caller *caller, const json_t *params, json_t **result, xgr_error *err) {
  (void)caller, (void)params, (void)result;
  const absent_method *a = ctx;
  xgr_error_set(err, XGR_EUNSUPPORTED, NULL, "xgr_%s (public endpoint reference) is not offered by xgrd: %s", a->name,
                a->reason);
  return XGR_RPC_METHOD_NOT_FOUND;   /* a protocol code: the dispatcher passes it on as it is */
}

int xgr_rpcd_register(xgr_rpcd *d, xgr_rpc_server *s) {
  static const mdef defs[] = {
    {"getCoreAddrs", m_core_addrs, false},
    {"enqueue", xgr__rpcd_m_enqueue, true},
    {"validateDataTransfer", xgr__rpcd_m_validate, true},
    {"getNextProcessId", xgr__rpcd_m_next_pid, false},
    {"kill", xgr__rpcd_m_kill, true},
    {"pause", xgr__rpcd_m_pause, true},
    {"resume", xgr__rpcd_m_resume, true},
    {"control", xgr__rpcd_m_control, true},
    {"retry", xgr__rpcd_m_retry, true},
    {"fork", xgr__rpcd_m_fork, true},
    {"wakeUpProcess", xgr__rpcd_m_wake, true},
    {"wake", xgr__rpcd_m_wake, true},
    {"sessionAlive", xgr__rpcd_m_alive, false},
    {"stepExecuted", xgr__rpcd_m_step_executed, false},
    {"getSession", xgr__rpcd_m_get_session, false},
    {"putOrchestration", xgr__rpcd_m_put_orch, true},
    {"getOrchestration", xgr__rpcd_m_get_orch, false},
    {"putRule", xgr__rpcd_m_put_rule, true},
    {"getRule", xgr__rpcd_m_get_rule, false},
    {"batchPreview", xgr__rpcd_m_batch_preview, false},
    {"batchStart", xgr__rpcd_m_batch_start, true},
    {"batchGet", xgr__rpcd_m_batch_get, false},
    {"batchCancel", xgr__rpcd_m_batch_cancel, true},
    {"batchList", xgr__rpcd_m_batch_list, false},
    {"migrateSessions", xgr__rpcd_m_migrate, true},
    {"listVersions", xgr__rpcd_m_versions, false},
    {"liveSessions", xgr__rpcd_m_live_sessions, false},
    {"manageGrants", xgr__rpcd_m_manage_grants, true},
    {"listGrants", xgr__rpcd_m_list_grants, false},
    {"getGrantFeePerYear", xgr__rpcd_m_grant_fee, false},
  };
  _Static_assert(sizeof defs / sizeof defs[0] <= sizeof d->guards / sizeof d->guards[0], "guards");
  _Static_assert(2 * (sizeof defs / sizeof defs[0] + sizeof absent / sizeof absent[0]) <=
                     sizeof d->names / sizeof d->names[0], "names");
  size_t k = 0;
  char (*names)[40] = d->names;
  for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
    d->guards[i] = (xgr__guard){d, defs[i].fn};
    for (int style = 0; style < 2; style++) {
      snprintf(names[k], sizeof names[k], "xgr%c%s", style ? '_' : '.', defs[i].name);
      int rc = defs[i].writes ? xgr_rpc_register(s, names[k++], guarded, &d->guards[i])
                              : xgr_rpc_register(s, names[k++], defs[i].fn, d);
      if (rc) return rc;
    }
  }
  for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
    for (int style = 0; style < 2; style++) {
      snprintf(names[k], sizeof names[k], "xgr%c%s", style ? '_' : '.', absent[i].name);
      int rc = xgr_rpc_register(s, names[k++], m_absent, (void *)&absent[i]);
      if (rc) return rc;
    }
  /* enqueues in a batch are independent (two starts of one session meet in the store's insert):
   * they run concurrently, so a batch of N enqueues shares the store's commits instead of making N */
  int rc = xgr_rpc_set_concurrent(s, "xgr.enqueue");
  if (!rc) rc = xgr_rpc_set_concurrent(s, "xgr_enqueue");
  if (rc) return rc;
  /* listSessions: the seed's join view under xgr.listSessions, the public raw rows under
   * xgr_listSessions; the same code, `view` picks either */
  rc = xgr_rpc_register(s, "xgr.listSessions", xgr__rpcd_m_list_join, d);
  if (!rc) rc = xgr_rpc_register(s, "xgr_listSessions", xgr__rpcd_m_list_raw, d);
  if (!rc) rc = xgr__console_register(d->console, s);
  if (rc) return rc;
  xgr__rpc_on_stop(s, xgr__rpcd_waiters_stop, d);   /* deferred validateDataTransfer answers go before the listener */
  xgr_metrics *m = xgr_rpc_metrics(s);   /* the store's metrics went to cfg.metrics in xgr_rpcd_new */
  for (int a = 0; a < XGR_NODE_ACK_N; a++) {
    char l[40];
    snprintf(l, sizeof l, "ack=\"%s\"", xgr__rpcd_ack_names[a]);
    d->c_enq[a] = xgr_metrics_counter(m, "xgr_enqueue_total", "Session starts by answer", l);
  }
  xgr_metrics_gauge(m, "xgr_queue_depth", "Work queued inside xgrd", collect_queues, d);
  xgr_metrics_gauge(m, "xgr_validates_in_flight", "xgr_validateDataTransfer calls not answered yet", collect_validates,
                    d);
  d->c_validates_refused = xgr_metrics_counter(m, "xgr_validates_refused_total",
                                               "xgr_validateDataTransfer calls refused by --max-validates-per-client",
                                               "");
  xgr_node_metrics(d->n, m);

  return 0;
}

/* ---- life cycle --------------------------------------------------------------------------------- */

xgr_rpcd *xgr_rpcd_new(xgr_node *n, const xgr_rpcd_config *cfg, xgr_error *err) {
  xgr_rpcd *d = xgr__xcalloc(1, sizeof *d);
  d->cfg = *cfg;
  if (!d->cfg.max_validates_per_client) d->cfg.max_validates_per_client = XGR_RPCD_MAX_VALIDATES_PER_CLIENT;
  if (!d->cfg.max_migrate_sessions) d->cfg.max_migrate_sessions = XGR_RPCD_MAX_MIGRATE_SESSIONS;
  if (!d->cfg.max_streams_per_client) d->cfg.max_streams_per_client = XGR_RPCD_MAX_STREAMS_PER_CLIENT;
  if (!d->cfg.max_streams_per_owner) d->cfg.max_streams_per_owner = XGR_RPCD_MAX_STREAMS_PER_OWNER;
  if (!d->cfg.max_streams) d->cfg.max_streams = XGR_RPCD_MAX_STREAMS;
  if (!d->cfg.stream_max_secs) d->cfg.stream_max_secs = XGR_RPCD_STREAM_MAX_SECS;
  xgr__tally_init(&d->validates);
  d->n = n;
  d->nc = xgr_node_config_of(n);
  d->st = xgr_node_store(n);
  d->e = xgr_node_engine(n);
  pthread_mutex_init(&d->w_mu, NULL);
  pthread_cond_init(&d->w_cv, NULL);
  xgr__rpcd_waiters_init(d);
  if (xgr_engine_subscribe_interest(d->e, xgr__rpcd_on_event, d, xgr__rpcd_interest)) {
    xgr_error_set(err, XGR_ESTATE, NULL, "cannot subscribe to the engine's events");
    goto fail;
  }
  xgr__sse_limits lim = {.per_client = d->cfg.max_streams_per_client, .per_owner = d->cfg.max_streams_per_owner,
                         .total = d->cfg.max_streams, .max_secs = d->cfg.stream_max_secs};
  xgr__console_auth_limits alim = {.max_nonces = d->cfg.console_max_nonces, .max_sessions = d->cfg.console_max_sessions,
                                   .session_secs = d->cfg.console_session_secs};
  d->console = xgr__console_new(n, &lim, &alim);
  if (xgr_engine_subscribe_interest(d->e, xgr__console_on_event, d->console, xgr__console_interest)) {
    xgr_error_set(err, XGR_ESTATE, NULL, "cannot subscribe the console to the engine's events");
    goto fail;
  }
  return d;
fail:
  xgr_rpcd_free(d);
  return NULL;
}

bool xgr_rpcd_ready(void *ctx) {
  xgr_rpcd *d = ctx;
  return !atomic_load(&d->stopping) && xgr_node_ready(d->n);
}

void xgr_rpcd_shutdown(xgr_rpcd *d) {
  atomic_store(&d->stopping, true);
  xgr__rpcd_waiters_stop(d);   /* wakes the validates waiting on their thread and answers the deferred ones */
}

void xgr_rpcd_free(xgr_rpcd *d) {
  if (!d) return;
  atomic_store(&d->stopping, true);
  xgr__console_free(d->console);
  xgr__rpcd_waiters_free(d);
  pthread_mutex_destroy(&d->w_mu);
  pthread_cond_destroy(&d->w_cv);
  xgr__tally_destroy(&d->validates);
  free(d);
}
