/* xgr/node.h — a running xgr node: the one object that owns what a process engine needs to run
 * sessions durably, whatever front end drives it (xgrd's JSON-RPC service, `xgr run --store`).
 *
 * An xgr_node owns the store (xgr/store.h), the engine (xgr/engine.h) on the node's persistence
 * adapter (every engine batch becomes a store group commit), the cache of assembled bundles of the
 * registries, recovery of the live sessions at start, hibernation's loader and due index, the
 * outbox redelivery of internal wake-ups, and on a cluster store the lease thread (docs/CLUSTER.md).
 * Its API speaks the domain: open, recover, find a bundle, is a session live, control a session
 * (kill, pause, resume, wake) wherever it runs, the node's log and gauges. Every function returns 0
 * or a negative xgr_errcode with an xgr_error; no JSON-RPC code comes out of here (the front end
 * maps codes: xgr_rpc_code_for).
 *
 * Life cycle: xgr_node_new (store open, engine started, nothing loaded) → front ends subscribe to
 * the engine's events → xgr_node_recover (sessions run) → ... → xgr_node_shutdown (steps finish,
 * batches commit, cluster leases released) → xgr_node_free. Thread-safe after xgr_node_recover.
 */
#ifndef XGR_NODE_H
#define XGR_NODE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "xgr/engine.h"
#include "xgr/error.h"
#include "xgr/logfmt.h"
#include "xgr/metrics.h"
#include "xgr/permit.h"
#include "xgr/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== the persistence adapter ==================================================================
 * An xgr_store_hook whose submit() turns one engine batch (process snapshots and history rows of
 * one session) into an xgr_store_changes and hands it to xgr_store_submit; the engine's done() is
 * called from the store's commit callback. A session's first batch carries its row (insert if
 * absent) and every batch its counters (next iter, next join group, pause), so the rows a batch
 * becomes are exactly the batch's. Keeps only the step count of sessions that may be evicted (the
 * per-session step cap counts on after a load). Thread-safe (sessions submit concurrently). The
 * node makes one for its engine; `xgr run --store` makes one for its engine. */
typedef struct xgr_node_persist xgr_node_persist;

/* st (borrowed) must outlive the adapter. */
xgr_node_persist *xgr_node_persist_new(xgr_store *st);
void xgr_node_persist_free(xgr_node_persist *p);   /* NULL is fine */
/* The hook to put into xgr_engine_config.store (valid while p lives). */
const xgr_store_hook *xgr_node_persist_hook(xgr_node_persist *p);
/* Register the metrics the adapter updates (m borrowed; call once, before the engine runs sessions). */
void xgr_node_persist_metrics(xgr_node_persist *p, xgr_metrics *m);
/* The steps session (owner, root_pid) had run at its last batch (xgr_store_batch.steps), 0 when not
 * tracked: handed to a hibernated session when it is loaded, so the per-session step cap counts on. */
uint64_t xgr_node_persist_steps(xgr_node_persist *p, const char *owner, uint64_t root_pid);
/* Batches submitted and not yet committed. */
uint64_t xgr_node_persist_inflight(xgr_node_persist *p);

/* ---- the stored-bytes quotas (docs/SECURITY.md "Quotas: processes and stored bytes") ----------
 * submit() counts each batch's stored bytes (xgr_store_quota) and refuses (XGR_ELIMIT, nothing
 * written) one that would take its session over batch->quota->max_bytes, or its owner over
 * max_owner_bytes: the engine then aborts the session instead. The owner's count is kept here per
 * owner: read from the store (xgr_store_owner_bytes: the sum over the owner's session rows) when
 * the owner is first seen or its count is older than a second at an enqueue, plus every batch this
 * adapter submitted since. On a cluster, other nodes' writes reach it with the next read. */
/* The owner quota in bytes (0: none). Call before the engine runs sessions. */
void xgr_node_persist_set_owner_quota(xgr_node_persist *p, uint64_t max_owner_bytes);
/* owner's stored bytes as this adapter knows them, read again from the store when not known or
 * older than max_age_ms (reads the store: not on an engine worker); *refused (may be NULL): the
 * size of the owner's last batch refused for the owner quota (0: none) — the owner stays below
 * its quota, since that batch was not written, but has no room for it. */
int xgr_node_persist_owner_bytes(xgr_node_persist *p, const char *owner, int64_t max_age_ms, uint64_t *bytes,
                                 uint64_t *refused, xgr_error *err);

/* ==== the node ================================================================================= */

typedef struct xgr_node xgr_node;
struct xgr_chain;
struct xgr_chain_executor;

typedef struct xgr_node_config {
  const char *store;          /* store URL (xgr_store_open): "memory:" (NULL), "sqlite:PATH" or a path */
  int store_sync;             /* xgr_store_sync: 0 full (default), 1 normal */
  unsigned workers;           /* engine worker threads (0: online CPUs) */
  uint32_t max_running;       /* per-session cap on running steps (0: 32) */
  FILE *log;                  /* the node's log (logfmt lines), NULL: none; borrowed */
  /* the engine clock runs time_scale times faster than wall time (0 or 1: real time). The clock
   * is Unix ms x time_scale, so it goes on where it was across restarts (tests: waitSec 60 passes
   * in 60 ms at 1000). */
  double time_scale;
  uint32_t store_max_pages;   /* PRAGMA max_page_count of the SQLite store (0: none; tests: a full disk) */
  /* The chain backend (docs/CHAIN.md), borrowed, NULL: none. Contract reads go to it; a registry
   * named by an XRC-729 address with an ostcId that the store does not hold is read from the
   * chain (getOSTC, getRule). */
  struct xgr_chain *chain;
  const xgr_api_map_entry *api_map;  /* URL rewriting of API calls (borrowed), like xgr run's --api-map */
  size_t napi_map;
  /* The outbound address policy of API calls (xgr/outbound.h; borrowed), NULL: the default
   * (loopback, link-local, private, ... refused). The --chain endpoints are the operator's and not
   * subject to it. max_outbound / max_outbound_per_owner: xgr_engine_config's caps (0: defaults). */
  const xgr_outbound_policy *outbound;
  uint32_t max_outbound;
  uint32_t max_outbound_per_owner;
  /* Executions (--engine-key), borrowed, NULL: resolved only. The engine hands each step's
   * execution to it. */
  struct xgr_chain_executor *executor;
  uint64_t max_live;          /* per-session caps (xgr_engine_config.max_live, max_session_steps; 0: defaults) */
  uint64_t max_session_steps;
  /* Quotas (docs/SECURITY.md "Quotas: processes and stored bytes"; 0: the defaults):
   * max_session_bytes and max_owner_processes as xgr_engine_config's; max_owner_bytes, the stored
   * bytes of all of an owner's sessions still in the store (XGR_NODE_DEFAULT_MAX_OWNER_BYTES). An
   * owner at or over either owner quota cannot start sessions (xgr_node_enqueue: XGR_ELIMIT at
   * "from"); a running session whose growth would take it over is aborted. */
  uint64_t max_session_bytes;
  uint64_t max_owner_processes;
  uint64_t max_owner_bytes;
  /* Where the engine's store metrics go (steps, commit latency, batches; borrowed), NULL: not
   * exported. Registered before the engine starts, since recovered sessions update them at once. */
  xgr_metrics *metrics;
  /* hibernation (docs/RUNTIME.md): a session waiting with nothing due within this many ms of the
   * engine clock, or only for wake-ups, is evicted from memory (0: the default, 5000; < 0: never).
   * The memory store never evicts. */
  int64_t hibernate_after_ms;
  /* A PostgreSQL store shared by several nodes (docs/CLUSTER.md): this node's id (NULL: the single
   * writer of its schema) and its lease length in ms (0: XGR_STORE_LEASE_MS). */
  const char *node_id;
  int64_t lease_ms;
  /* The node's name in the audit trail (xgr_store_audit.node): node_id when set, else this (NULL:
   * the host name). */
  const char *node_name;
  int store_writers;          /* PostgreSQL writer connections (xgr_store_config.pg_writers; 0: default) */
  /* retention (xgr_store_config.ttl_secs, history_secs, batch_secs) */
  int64_t session_ttl_secs;
  int64_t history_secs;
  int64_t batch_secs;         /* finished batch operations (0: XGR_STORE_BATCH_SECS, 30 days; < 0: forever) */
  /* Tracing (docs/OPERATIONS.md "Tracing"): spans of sessions, steps, API and chain calls, joins
   * and wake-ups exported as OTLP/HTTP JSON to {otlp_endpoint}/v1/traces (an http:// or https://
   * URL; NULL: no tracing — no thread, no subscription, nothing built), through a queue of at
   * most otlp_queue_spans spans (0: XGR_NODE_DEFAULT_OTLP_QUEUE_SPANS; a full queue drops). */
  const char *otlp_endpoint;
  size_t otlp_queue_spans;
  /* Operations on many sessions (xgr_node_batch_*; docs/SECURITY.md "Batch operations"): the driver
   * acts on at most batch_rate sessions a second (0: XGR_NODE_DEFAULT_BATCH_RATE), so the sessions'
   * own traffic keeps its latency. */
  uint32_t batch_rate;
  /* Operators (docs/SECURITY.md "Access: grants and operators"): addresses (0x + 40 hex, any case;
   * borrowed) that may read and control every owner's sessions (xgr_node_access). */
  const char *const *operators;
  size_t noperators;
} xgr_node_config;

#define XGR_NODE_DEFAULT_MAX_OWNER_BYTES (4ull << 30)   /* 4 GiB */
#define XGR_NODE_DEFAULT_OTLP_QUEUE_SPANS 65536u
#define XGR_NODE_DEFAULT_BATCH_RATE 200u
#define XGR_NODE_MAX_BATCH_RATE 100000u
/* Per caller: running batch operations at once (a start past it: XGR_ELIMIT), and finished ones
 * kept (the oldest past it go at the caller's next start, before retention would take them). */
#define XGR_NODE_BATCH_MAX_RUNNING 16u
#define XGR_NODE_BATCH_MAX_KEPT 1000u

/* Whether endpoint is a usable --otlp-endpoint: 0, or XGR_EINVAL naming "otlp-endpoint". */
int xgr_node_check_otlp_endpoint(const char *endpoint, xgr_error *err);

/* Open the store and start the engine; no session is loaded yet (xgr_node_recover). cfg is
 * copied (the strings and objects it points to are borrowed for the node's life). NULL with *err
 * on failure. */
xgr_node *xgr_node_new(const xgr_node_config *cfg, xgr_error *err);
/* Bring the store's live sessions back (processes that were running run again, waiting ones get
 * their timers back; with hibernation only those due soon), redeliver the outbox, and on a
 * cluster store claim sessions and start the lease thread. Then the node is ready. Call once. */
int xgr_node_recover(xgr_node *n, xgr_error *err);
/* How many sessions recovery restarted, how many it could not (logged), and how many live sessions
 * it left hibernated in the store. */
void xgr_node_recovered(const xgr_node *n, size_t *restored, size_t *failed, size_t *hibernated);
/* Ready: recovered, not stopping, the store works and the default chain backend answers. */
bool xgr_node_ready(xgr_node *n);
/* 0 while the store works; else the error that stopped it (copied into *err, may be NULL). */
int xgr_node_store_failed(xgr_node *n, xgr_error *err);
/* Chain upkeep, every few seconds: probe every backend and refresh the chain cache. No-op without
 * a chain. */
void xgr_node_chain_tick(xgr_node *n);
/* Graceful stop: let running steps finish and the store commit them; a cluster node releases its
 * leases. 0 or XGR_ETIMEOUT. */
int xgr_node_shutdown(xgr_node *n, long timeout_ms);
/* Shut down (if needed) and free the engine, the store and the bundles. NULL is fine. */
void xgr_node_free(xgr_node *n);

/* What the node owns, borrowed for its life: its store, its engine, its configuration. */
xgr_store *xgr_node_store(xgr_node *n);
xgr_engine *xgr_node_engine(xgr_node *n);
const xgr_node_config *xgr_node_config_of(const xgr_node *n);

/* Store batches submitted by the engine and not yet committed. */
uint64_t xgr_node_inflight(xgr_node *n);

/* The node's log: logfmt lines (xgr/logfmt.h) on cfg.log, built on the caller's stack and written
 * whole. xgr_node_log_begin starts "ts=<UTC now, ms>Z level=<level> msg=<msg>" in *l (msg quoted
 * when more than a word); the caller appends its pairs with xgr_logfmt_str/_quoted/_u64/_i64/
 * _printf (free text such as an error message with xgr_logfmt_quoted); xgr_node_log_end writes the
 * line to cfg.log in one locked write and flushes it: a no-op without a log. Any thread; l is the
 * caller's and is not kept. level is "info", "warn" or "error"; msg and keys are the caller's. */
void xgr_node_log_begin(const xgr_node *n, xgr_logfmt *l, const char *level, const char *msg);
void xgr_node_log_end(const xgr_node *n, const xgr_logfmt *l);
/* The common failure line, begin + error="<error>" + end: `level=<level> msg=<msg> error="..."`. */
void xgr_node_log_error(const xgr_node *n, const char *level, const char *msg, const char *error);
/* A line about one session: `level=<level> msg=<msg> owner=<owner> rootPid=<root_pid>`, then
 * error="<error>" unless error is NULL. */
void xgr_node_log_session(const xgr_node *n, const char *level, const char *msg, const char *owner, uint64_t root_pid,
                          const char *error);

/* Register the node's gauges (sessions, processes, store batches in flight, engine, runtime,
 * chain and cluster counters) on m (borrowed; must outlive the node's use of it). */
void xgr_node_metrics(xgr_node *n, xgr_metrics *m);

/* ---- bundles ---------------------------------------------------------------------------------
 * Names and pins (docs/SEMANTICS.md, "Names and pins"). Every registered document belongs to its
 * writer's namespace (an address; "" is the empty namespace of writes that carry no owner) and is
 * stored under "<namespace>:<key>" ("<key>" alone in the empty namespace): xgr_node_ns_key. An
 * orchestration's rule references resolve only in its own namespace. A bundle assembled from the
 * current rules has a manifest {"orchestration":"0x<hash>","rules":{"<key>":"0x<hash>",...}}
 * (sorted keys, compact) whose keccak-256 is its bundle hash; a session pins it at start and is
 * reassembled from exactly those bytes afterwards.
 *
 * Bundle keys: "<ns>:<registry>[/<ostcId>]" or "<registry>[/<ostcId>]" (the current rules),
 * "#<orchestration hash>" (a session from before pins: the rules current in the orchestration's
 * namespace), "@<bundle hash>" (pinned: the exact bytes its manifest names). Assembled from the
 * store or taken from the cache (per key and rules generation, bounded). *out is a reference the
 * caller gives back with xgr_node_bundle_put. Errors name `path` (the caller's label of the key). */
#define XGR_NODE_KEY_MAX 320
/* "<ns>:<key>", or key when ns is NULL or "", into out (n bytes, truncated); the length it needs. */
size_t xgr_node_ns_key(char *out, size_t n, const char *ns, const char *key);
/* What a bundle reference carries besides the bundle (borrowed: lives as long as the reference). */
typedef struct xgr_node_bundle_meta {
  const char *owner;            /* the orchestration's namespace ("" empty); NULL for a chain bundle */
  const json_t *executors;      /* its document's top-level `executors`, or NULL */
  char bundle_hash[67];         /* "0x" + 64 hex: keccak-256 of the bundle's manifest */
} xgr_node_bundle_meta;
int xgr_node_bundle(xgr_node *n, const char *key, const xgr_bundle **out, const char *path, xgr_error *err);
/* With pin, the bundle's manifest is registered (durable) before this returns, so a session row may
 * name its bundle hash. meta (may be NULL) gets the orchestration's namespace, executors and bundle
 * hash. */
int xgr_node_bundle_ex(xgr_node *n, const char *key, bool pin, const xgr_bundle **out, xgr_node_bundle_meta *meta,
                       const char *path, xgr_error *err);
/* The bundle of registry key reg_key ("<registry>[/<ostcId>]") in namespace ns; with shared, when
 * ns has none, the one in the empty namespace. With a chain, "<XRC-729 address>/<ostcId>" comes from
 * the chain (the contract's namespace) whatever ns says. As xgr_node_bundle_ex otherwise. */
int xgr_node_bundle_in(xgr_node *n, const char *ns, bool shared, const char *reg_key, bool pin, const xgr_bundle **out,
                       xgr_node_bundle_meta *meta, const char *path, xgr_error *err);
/* The bundle stored session s runs: its pinned one ("@<bundle_hash>"), or for a session from before
 * pins its orchestration with the rules current in that orchestration's namespace. */
int xgr_node_session_bundle(xgr_node *n, const xgr_store_session *s, const xgr_bundle **out, xgr_error *err);
/* Another reference to b (e.g. the one a started session holds). */
void xgr_node_bundle_hold(xgr_node *n, const xgr_bundle *b);
/* Give a reference back (NULL: nothing); freed when it was the last and no cache entry points at it. */
void xgr_node_bundle_put(xgr_node *n, const xgr_bundle *b);
/* A registry document changed: forget the cached bundle of key. */
void xgr_node_bundle_forget(xgr_node *n, const char *key);
/* A rule changed: every cached bundle of an older rules generation is stale (dropped from the
 * cache; freed unless a caller or a session holds it). Returns the new generation. */
uint64_t xgr_node_rules_changed(xgr_node *n);
/* Whether this node reads registries from a chain (cfg.chain with its cache). */
bool xgr_node_has_chain(const xgr_node *n);

/* ---- sessions --------------------------------------------------------------------------------- */

/* Is (owner, root) a live session? The engine's view, or for a session the engine does not hold
 * (hibernated, or on a cluster held by another node) the store's; with load, a hibernated session
 * is loaded first (control calls). info (zeroed when not in the engine) may be NULL. */
bool xgr_node_live(xgr_node *n, const char *owner, uint64_t root, bool load, xgr_engine_session_info *info);

/* Start a new session: a command to its own actor, like every other. The actor's first batch
 * carries the session's row, inserted only if the store has none, with the start process; when
 * that batch is committed, started(ctx, err) is called once from the committing thread: 0, or
 * XGR_ECONFLICT when the store holds the session already (another start won; nothing was
 * written), or the store's error. Nothing of the session becomes visible before. */
typedef struct xgr_node_start_req {
  const xgr_bundle *bundle;     /* from xgr_node_bundle (borrowed: the session takes its own reference) */
  const char *owner;
  uint64_t root;                /* > 0 */
  const char *step;             /* the start step, a step of bundle->orch */
  xgr_value payload;            /* map or null (borrowed) */
  int64_t start_at;             /* the start process's first wake (engine clock ms); 0: at once */
  const char *registry;         /* recorded on the row ("" when NULL) */
  const char *max_total_gas;    /* the starting permit's gas budget recorded on the row, or NULL */
  const char *bundle_hash;      /* the pinned bundle hash recorded on the row (its manifest registered), or NULL */
  const xgr_engine_fork *fork;  /* a fork's record, in the commit of the row (NULL: none; copied) */
  void (*started)(void *ctx, int err);
  void *started_ctx;
} xgr_node_start_req;
/* 0 (started will be called), XGR_ECONFLICT when this node's engine runs (owner, root) already or,
 * with hibernation or on a cluster, the store holds it (started is not called), XGR_ESTATE when the node is stopping, or another error. */
int xgr_node_start(xgr_node *n, const xgr_node_start_req *r, xgr_error *err);

/* ---- Starting sessions as a front end asks (start.c) ---- */

/* What a start answers (xgr.enqueue's ack): the session was started (queued: it runs now;
 * scheduled: its start waits, init.waitMs), or it exists and runs already (already; scheduled:
 * waiting on a timer; paused). */
typedef enum xgr_node_ack {
  XGR_NODE_ACK_QUEUED = 0,
  XGR_NODE_ACK_ALREADY,
  XGR_NODE_ACK_PAUSED,
  XGR_NODE_ACK_SCHEDULED,
  XGR_NODE_ACK_N
} xgr_node_ack;

/* A start that is on its way: its outcome is made ready by done, and answered (and freed) by
 * xgr_node_enqueued_answer. */
typedef struct xgr_node_enqueued xgr_node_enqueued;

/* A start request, read and checked for form by the front end. Everything is borrowed for the
 * call. Paths name the request's parameters in refusals. */
typedef struct xgr_node_enqueue_req {
  const char *owner;            /* lowercased address */
  uint64_t root;                /* 0: the owner's next rootPid */
  const char *reg_key;          /* the registry key of the orchestration ("<registry>/<ostcId>" or "<registry>") */
  /* the namespace reg_key resolves in (registryOwner: lowercased address), NULL: the owner's, then
   * the empty namespace */
  const char *reg_ns;
  const char *registry;         /* the registry name recorded on the session */
  const char *reg_path;
  const char *ostc_id;          /* as the request names it, or NULL */
  const char *ostc_hash;        /* a pinned orchestration hash or bundle hash, or NULL */
  const char *step, *step_path; /* the start step (NULL: the orchestration's first) */
  const json_t *payload;        /* the start payload (an object), or NULL */
  const char *payload_path;
  int64_t wait_ms;              /* the start process waits this long (0: it runs at once) */
  const char *who;              /* the permit's signer ("" without permits) */
  const xgr_permit *permit;     /* the verified SessionPermit; NULL or kind 0 without permits */
  /* The request's W3C `traceparent` header, or NULL: with tracing on, a valid one makes the
   * session's trace continue the caller's; an invalid one is ignored (a new trace). */
  const char *traceparent;
  /* A fork (xgr.fork): its record goes out with the new session's row, in one commit; a session
   * that exists already (this rootPid runs here, or the store has it) is then not an answer but
   * XGR_ECONFLICT at newRootPid. NULL: a plain start. */
  const struct xgr_node_fork_rec *fork;
  /* before(ctx, root): the session is about to start with this rootPid (before it can make any
   * event: register what waits for its events here); may be NULL. done(ctx, p): its outcome is
   * ready — from the committing thread, or inside xgr_node_enqueue; must not block; the caller
   * then answers with xgr_node_enqueued_answer(p). */
  void (*before)(void *ctx, uint64_t root);
  void (*done)(void *ctx, xgr_node_enqueued *p);
  void *ctx;
} xgr_node_enqueue_req;

/* Start r's session: its bundle (its bundle hash, set like hash, goes on a new session's row), the pinned hash (the
 * orchestration's or the bundle's: then the rules resolved now must hash to exactly that manifest),
 * the permit's bindings (and, for a registry on
 * the chain, the signer's role), its step and payload, its rootPid. Returns an error (nothing
 * started, before and done not called), or 0 with *root and *hash (the orchestration's, 67
 * bytes; also set after the bundle was found when an error follows) and either *pending false and
 * *ack (the session runs here already: nothing started) or *pending true: before and then, exactly
 * once, done are called. */
int xgr_node_enqueue(xgr_node *n, const xgr_node_enqueue_req *r, uint64_t *root, char hash[67], char bundle_hash[67],
                     xgr_node_ack *ack, bool *pending, xgr_error *err);
/* The ack of a start whose done came, or its error (a conflict when the session exists and ended:
 * a rootPid is used once); frees p. */
int xgr_node_enqueued_answer(xgr_node_enqueued *p, xgr_node_ack *ack, xgr_error *err);

/* The rootPid owner's next start without one would get (read, not taken): 1 for a new owner. */
int xgr_node_next_root(xgr_node *n, const char *owner, uint64_t *root, xgr_error *err);

/* A control command on a session, wherever it runs. */
typedef enum xgr_node_ctl_op {
  XGR_NODE_CTL_KILL = 0,
  XGR_NODE_CTL_PAUSE,
  XGR_NODE_CTL_RESUME,
  XGR_NODE_CTL_WAKE_PID,
  XGR_NODE_CTL_WAKE_STEP,
  XGR_NODE_CTL_RETRY            /* run aborted process iter's step again (docs/SEMANTICS.md "Retry and fork") */
} xgr_node_ctl_op;
typedef struct xgr_node_ctl {
  int op;                       /* xgr_node_ctl_op */
  const char *owner;
  uint64_t root, iter;          /* iter 0: the whole session (kill, pause, resume) */
  const char *step;             /* WAKE_STEP */
  const char *caller;           /* wakes: who wakes */
  xgr_value payload;            /* wakes, retry: map or null (borrowed); a retry without one runs
                                   with the process's last input payload */
  const json_t *payload_json;   /* the same payload as JSON (borrowed; NULL: none), for forwarding */
  /* the audit trail (docs/STORE.md "The audit trail"): who acts — the permit's signer, "auth-none"
   * (xgrd --auth none) or "operator" — and the hex digest of the permit used (NULL: none). The
   * action, once applied, is recorded in the session's history in the same commit, naming the node
   * the call came through; actor NULL: not recorded. Carried along when the call is forwarded. */
  const char *actor;
  const char *permit;
  /* the batch operation this action is part of (its id; xgr_node_batch_*), named in the audit
   * entry's detail ("batch"), NULL: none. Carried along when the call is forwarded. */
  const char *batch;
} xgr_node_ctl;
/* Run r on the engine that holds the session: here, or on the node that holds its lease (a
 * command row; waits up to 5 s), claiming a session nobody holds first. The caller was authorized
 * already. 0 or the engine's error (XGR_ETIMEOUT when the owner node did not answer). *woken
 * (may be NULL) gets how many processes a wake woke, for a retry the new process's iter. A retry
 * reads the aborted process's row from the store on the node that runs it (the core decides
 * with it: xgr_session_retry). */
int xgr_node_control(xgr_node *n, const xgr_node_ctl *r, size_t *woken, xgr_error *err);

/* ---- Actions on many sessions (batch.c; docs/OPERATIONS.md "Batch operations") ----------------
 * A selection names live sessions by owner, registry, orchestration id, orchestration or bundle
 * hash, status, the step a process waits at, creation time and rootPid ranges. A dry run
 * (xgr_node_batch_preview) counts them and samples a few; an operation (xgr_node_batch_start) kills,
 * pauses, resumes or wakes (step mode, with a payload) each of them. It is a row of the store
 * (xgr_store_batchop): the node's driver thread claims it (on a cluster one node at a time: a fenced
 * claim on the row), walks the selection in (owner ascending, rootPid descending) order at most
 * cfg.batch_rate sessions a second, acts on each session through xgr_node_control (the path of a
 * single control call: here or forwarded to the node holding the session), writing one audit entry
 * per session whose detail names the operation ({"batch":"<id>"}), and writes its progress and
 * cursor at least every 64 sessions and every second. After a restart (or when the claim passes to
 * another node) it goes on from the cursor; the sessions acted on after the last progress written
 * are recognised by their audit entry and not acted on twice. A session that no longer matches
 * when the driver reaches it (ended meanwhile) is skipped and counted. Operations run one after
 * another on a node. */

/* The selection as JSON (an object; borrowed): every key optional —
 *   owner: address (lowercased); absent: every owner (only callers that may control every owner's
 *          sessions: xgr_node_may_control(n, caller, NULL))
 *   registry, ostcId: the session row's registry and orchestration id; hash: its orchestration hash
 *          or bundle hash ("0x" + 64 hex)
 *   status: ["running"|"waiting"|"paused", ...] (running: a process runs; paused: the session or
 *          one of its processes is paused; waiting: neither); absent: any live session
 *   step:   a process waits at this step id
 *   createdFrom, createdTo: creation time range, Unix ms, inclusive
 *   rootFrom, rootTo: rootPid range, inclusive (numbers or decimal strings)
 * Checked by xgr_node_batch_check_selection: XGR_ESCHEMA naming `path`.<key>. */
int xgr_node_batch_check_selection(const json_t *sel, const char *path, xgr_error *err);

/* Whether caller (an address, lowercased) may control (kill, pause, resume, wake by batch) the
 * sessions of owner (NULL: of every owner): an owner its own, an operator (xgr_node_is_operator)
 * every owner's. Grants do not reach batch operations. */
bool xgr_node_may_control(xgr_node *n, const char *caller, const char *owner);

#define XGR_NODE_BATCH_SAMPLE_MAX 20u
/* One session of a dry run's sample. */
typedef struct xgr_node_batch_hit {
  char owner[64];
  uint64_t root;
  char status[16];              /* "running" | "waiting" | "paused" */
} xgr_node_batch_hit;
/* The dry run of sel (checked): *count sessions match now; sample[0..*nsample) the first of them in
 * the driver's order (at most min(max_sample, XGR_NODE_BATCH_SAMPLE_MAX)). XGR_EPERM (at
 * `path`.owner) when caller may not control them. Reads only. */
int xgr_node_batch_preview(xgr_node *n, const char *caller, const json_t *sel, const char *path, size_t max_sample,
                           uint64_t *count, xgr_node_batch_hit *sample, size_t *nsample, xgr_error *err);

/* A batch operation to start (everything borrowed for the call). */
typedef struct xgr_node_batch_req {
  const char *caller;           /* who starts it (an address): the operation's owner (get, cancel) */
  const char *actor;            /* the audit entries' actor (xgr_node_ctl.actor: the caller, or "auth-none") */
  const json_t *selection;      /* as xgr_node_batch_check_selection */
  const char *sel_path;         /* its parameter, for refusals */
  const char *action;           /* "kill" | "pause" | "resume" | "wake" */
  const char *step;             /* wake: the step to wake at (step mode) */
  const json_t *payload;        /* wake: the payload merged (an object) or NULL */
} xgr_node_batch_req;
/* Start r: checked like the preview (XGR_EPERM, XGR_ESCHEMA at sel_path / "action" / "stepId"),
 * counted (its total), written to the store (running), and the driver is woken. id (33 bytes) gets
 * its id; *total the count. XGR_ELIMIT (nothing written) when the caller has
 * XGR_NODE_BATCH_MAX_RUNNING operations running; the caller's finished operations past its newest
 * XGR_NODE_BATCH_MAX_KEPT are deleted. */
int xgr_node_batch_start(xgr_node *n, const xgr_node_batch_req *r, char id[33], uint64_t *total, xgr_error *err);
/* Operation id (XGR_ENOTFOUND when none, or when caller did not start it and may not control
 * every owner's sessions). *out is the caller's (xgr_node_batch_clear). */
int xgr_node_batch_get(xgr_node *n, const char *caller, const char *id, xgr_store_batchop *out, xgr_error *err);
/* Cancel operation id (as get for who may): *changed false when it had ended already. The driver
 * stops before its next session. */
int xgr_node_batch_cancel(xgr_node *n, const char *caller, const char *id, bool *changed, xgr_error *err);
/* The operations caller started (every one for a caller who may control every owner's sessions),
 * newest first, at most limit (0: 100). Freed with xgr_node_batches_free. */
int xgr_node_batch_list(xgr_node *n, const char *caller, size_t limit, xgr_store_batchop **out, size_t *count,
                        xgr_error *err);
void xgr_node_batch_clear(xgr_store_batchop *op);                      /* NULL is fine */
void xgr_node_batches_free(xgr_store_batchop *ops, size_t count);      /* NULL is fine */
/* ---- Forks (issue 36; docs/SEMANTICS.md "Retry and fork") -------------------------------------
 * A new session started from a recorded step of another session (ended or live). The node says
 * what it starts from (xgr_node_fork_source), the front end starts it (xgr_node_enqueue, pinned to
 * the source's bundle or a newer one, with the fork's record: xgr_node_fork_rec). */
typedef struct xgr_node_fork_src {
  uint64_t iter;                /* the recorded step's process */
  char step_id[256];
  int64_t at;                   /* when its step's result was applied (source session clock) */
  char registry[256], ostc_id[256];   /* the source session's registry and ostcId ("" when none) */
  char bundle_hash[67];         /* the bundle the source session pins ("" for one from before pins) */
  uint8_t status;               /* the source session's (xgr_session_result) */
  json_t *payload;              /* the step's input payload (owned), NULL unless asked for */
} xgr_node_fork_src;
/* The recorded step of session (owner, root) at pid iter, or (iter 0) the latest run of step_id;
 * with need_payload also its input payload: its parent's effective payload, with the pieces its
 * join took for a join target. Errors name the field: "sessionId" (no such session), "pid" /
 * "stepId" (no recorded step), "payload" (its input is not recorded: the start step, or a history
 * kept without payloads) — XGR_ENOTFOUND each; or the store's error. Free with
 * xgr_node_fork_src_clear. */
int xgr_node_fork_source(xgr_node *n, const char *owner, uint64_t root, uint64_t iter, const char *step_id,
                         bool need_payload, xgr_node_fork_src *out, xgr_error *err);
void xgr_node_fork_src_clear(xgr_node_fork_src *s);
/* The record of a fork, given to xgr_node_enqueue (xgr_node_enqueue_req.fork): the new session's
 * forked_from ({"owner","rootPid","iter","step","bundleHash"}), the audit entry "forked" on it and
 * "fork" on the source are written in the commit of its row (its first batch), so the forked
 * session never exists without them. */
typedef struct xgr_node_fork_rec {
  const char *owner;            /* both sessions' */
  uint64_t root;                /* the source */
  const xgr_node_fork_src *src;
  bool payload_given;           /* the caller gave the payload */
  const char *actor, *permit;   /* the audit entries' (xgr_node_ctl); actor NULL: "operator" */
} xgr_node_fork_rec;
/* ---- migration (issue 36; src/node/migrate.c) ----------------------------------------------------
 * Move one live session to another bundle (xgr_engine_migrate: held at its safe point, checked on
 * that state, rewritten in one commit). NEW is to_key: "<registry>[/<ostcId>]" (the owner's
 * namespace, else the shared one) or "@<bundle hash>"; its manifest is pinned before the call, so
 * the session row can name it. A hibernated session is loaded first; a session another cluster
 * node holds is migrated there (the call is forwarded as kill and pause are, lease.c; the holder
 * resolves to_key and answers the verdict). *verdict (may be NULL) gets the check's verdict
 * (xgr/migrate.h; a new reference, NULL when no check ran). Returns 0 (moved, or with dry_run:
 * checked), XGR_ECONFLICT (unsafe, not forced), XGR_EINVAL (a static problem, a bad map),
 * XGR_ENOTFOUND (no live session here, or no such bundle). The caller was authorized already
 * (xgr_node_may_migrate). */
typedef struct xgr_node_migrate_req {
  const char *owner;
  uint64_t root;
  const char *to_key;
  size_t nmap;
  const char *const *map_from;  /* OLD step ids */
  const char *const *map_to;    /* NEW step ids */
  bool force, dry_run;
  const char *actor, *permit;   /* the audit entry's (xgr_node_ctl) */
} xgr_node_migrate_req;
int xgr_node_migrate(xgr_node *n, const xgr_node_migrate_req *r, json_t **verdict, xgr_error *err);
/* May `actor` (a permit's signer or an authorized caller's address) migrate `owner`'s sessions?
 * The owner may, and an operator (xgr_node_is_operator). The one place the decision is taken. */
bool xgr_node_may_migrate(xgr_node *n, const char *actor, const char *owner);
/* The versions owner's live sessions run (xgr_store_versions: grouped by registry, orchestration
 * and bundle hash, with the steps they wait at), of registry when not NULL. *out is the caller's. */
int xgr_node_versions(xgr_node *n, const char *owner, const char *registry, json_t **out, xgr_error *err);

/* ---- Queries: reading sessions ----------------------------------------------------------------
 * What the front ends show of sessions (listings, xgr.getSession, the console's pages), read
 * through the node: the committed rows of the store in xgr/store.h's record types, and where an
 * answer mixes in what runs now, this node's engine's view of the same session, decided here once
 * (a hibernated session is live in the store without being in the engine; the engine marks a
 * session finished just after its end is committed). Strings in are borrowed; what comes out is
 * the caller's and is freed with the function named at it. Reads never change anything and never
 * load a hibernated session. Every function that can fail returns 0 or a negative xgr_errcode
 * (XGR_ENOTFOUND: no such row; the store's error otherwise) with *err set; on failure the out
 * values are empty (NULL / 0 / zeroed). Any thread after xgr_node_recover. */

/* A session as this node sees it: its committed row and its engine's view of it. */
typedef struct xgr_node_session {
  xgr_store_session row;          /* owned: xgr_node_session_clear (or xgr_node_sessions_free) */
  bool in_engine;                 /* this node's engine holds the session; info is its view */
  xgr_engine_session_info info;   /* zeroed when !in_engine */
  /* live by both views: the row is running and the engine, if it holds the session, has not
   * marked it finished (a hibernated session or one another cluster node runs is live) */
  bool live;
  /* the engine runs it here now: in_engine && !info.finished (whatever the row says) */
  bool engine_live;
} xgr_node_session;

/* Session (owner, root): its row and the engine's view. XGR_ENOTFOUND when the store has no row
 * (*err names no path: the caller names its parameter). */
int xgr_node_session_get(xgr_node *n, const char *owner, uint64_t root, xgr_node_session *out, xgr_error *err);
/* Free what s owns and zero it. NULL is fine. */
void xgr_node_session_clear(xgr_node_session *s);
/* A page of owner's sessions (owner NULL: every owner's, as xgr_store_sessions): those with rootPid below `before` (0: no bound), newest first, at
 * most limit (0: 1000), finished ones included until their retention ends; each with the engine's
 * view. *out (may be empty, never NULL on success) is freed with xgr_node_sessions_free. */
int xgr_node_sessions(xgr_node *n, const char *owner, uint64_t before, size_t limit, xgr_node_session **out,
                      size_t *count, xgr_error *err);
void xgr_node_sessions_free(xgr_node_session *s, size_t count);   /* NULL is fine */
/* How many of the count sessions of a full page of every owner's (xgr_node_sessions, owner NULL:
 * rootPid descending) end at a rootPid boundary: the page without its last rootPid's group, which
 * may go on in the next page and must then be read whole there (below that rootPid + 1) — "below the
 * last rootPid" would skip the other owners' sessions of it. count when one rootPid fills the page. */
size_t xgr_node_sessions_whole(const xgr_node_session *s, size_t count);
/* The stored records of live sessions started from one registry (xgr.liveSessions, read by `xgr
 * migrate-check --url` to check them as a store file's): of owner (NULL: every owner's), with
 * rootPid below before (0: no bound), newest first. *out (a new JSON array, the caller's) holds one
 * xgr_store_live_to_json object per session (xgr/store.h): its row, live processes with their join
 * states and inboxes, killed scopes. A page ends after max_sessions (> 0) sessions or once about
 * max_bytes of records are in it (at least one session), and between rootPids; at most 20,000
 * session rows are looked at per call. *next_before is the `before` of the next page, 0 when there
 * is none. Read-only: a hibernated session is read from the store, not loaded; a session another
 * cluster node holds is read as committed. The caller decided access (xgr_node_access, READ on the
 * owner's sessions, or an operator for every owner's). */
typedef struct xgr_node_live_query {
  const char *owner;
  const char *registry;
  uint64_t before;
  size_t max_sessions, max_bytes;
} xgr_node_live_query;
int xgr_node_live_records(xgr_node *n, const xgr_node_live_query *q, json_t **out, uint64_t *next_before,
                          xgr_error *err);

/* Every process row of session (owner, root), ordered by iter (ended ones until their TTL); an
 * unknown session has none. Freed with xgr_node_procs_free. */
int xgr_node_procs(xgr_node *n, const char *owner, uint64_t root, xgr_store_proc **out, size_t *count,
                   xgr_error *err);
void xgr_node_procs_free(xgr_store_proc *p, size_t count);
/* The history of session (owner, root), ordered by iter. Freed with xgr_node_history_free. */
int xgr_node_history(xgr_node *n, const char *owner, uint64_t root, xgr_store_hist **out, size_t *count,
                     xgr_error *err);
void xgr_node_history_free(xgr_store_hist *h, size_t count);
/* The internal wake-ups session (owner, root) sent that were refused, oldest first. Freed with
 * xgr_node_wakes_free. */
int xgr_node_wakes_refused(xgr_node *n, const char *owner, uint64_t root, xgr_store_wake **out, size_t *count,
                           xgr_error *err);
void xgr_node_wakes_free(xgr_store_wake *w, size_t count);
/* The audit trail of session (owner, root): its control actions and wake-ups, in the order of the
 * session clock (xgr_store_audits). Freed with xgr_node_audits_free. */
int xgr_node_audits(xgr_node *n, const char *owner, uint64_t root, xgr_store_audit **out, size_t *count,
                    xgr_error *err);
void xgr_node_audits_free(xgr_store_audit *a, size_t count);

/* When session s (a row) wakes on its own next: the earliest timer of its processes ps[0..n)
 * (xgr_store_proc_wakes_at: no paused process, no open join target), XGR_NEVER when none, or when
 * the session is paused or has ended. The one definition every report uses. */
int64_t xgr_node_session_next_wake(const xgr_store_session *s, const xgr_store_proc *ps, size_t n);
/* What a waiting stored process waits for. */
typedef enum xgr_node_wait {
  XGR_NODE_WAIT_TIMER = 0,        /* its timer: it wakes on its own */
  XGR_NODE_WAIT_RESUME,           /* a resume: it is paused */
  XGR_NODE_WAIT_JOIN,             /* its join to close: an open join target */
  XGR_NODE_WAIT_WAKEUP            /* a wake-up: it has no timer */
} xgr_node_wait;
/* What the waiting process p waits for; *at (may be NULL) gets when it wakes on its own
 * (xgr_store_proc_wakes_at), XGR_NEVER unless the answer is XGR_NODE_WAIT_TIMER. */
xgr_node_wait xgr_node_proc_wait(const xgr_store_proc *p, int64_t *at);

/* The owners with live sessions in the store (hibernated ones count), most live sessions first,
 * at most max (0: 100). Freed with xgr_node_owners_free. */
int xgr_node_live_owners(xgr_node *n, size_t max, xgr_store_owner_live **out, size_t *count, xgr_error *err);
void xgr_node_owners_free(xgr_store_owner_live *o, size_t count);
/* The owners with sessions in the store (any status), ascending, after `after` (NULL: from the
 * first), at most max (0: 100); `live` is 0. Freed with xgr_node_owners_free. */
int xgr_node_owners_after(xgr_node *n, const char *after, size_t max, xgr_store_owner_live **out, size_t *count,
                          xgr_error *err);
/* How much of owner is live: sessions by the store (hibernated ones included), the rest by the
 * engine (its unfinished sessions of owner, looking at most at 100,000 of the engine's sessions). */
typedef struct xgr_node_owner_counts {
  uint64_t live_sessions;         /* the store's running rows of owner */
  uint64_t running_sessions;      /* engine: sessions of owner with a process running */
  uint64_t idle_sessions;         /* engine: sessions of owner that are idle */
  uint64_t live_procs, running_procs;   /* engine: their live and running processes */
  size_t engine_sessions;         /* sessions the engine holds (every owner, finished ones kept included) */
  bool partial;                   /* the engine holds more than were looked at */
} xgr_node_owner_counts;
/* owner NULL: every owner's (live sessions of the 1,000 owners with the most). */
int xgr_node_owner_counts_get(xgr_node *n, const char *owner, xgr_node_owner_counts *out, xgr_error *err);
/* Does an owner other than `owner` hold a running session with rootPid root? The store's owners
 * with live sessions (the 1,000 with the most), then one row each: false when none does, or when
 * the store cannot say. */
bool xgr_node_live_elsewhere(xgr_node *n, const char *owner, uint64_t root);

/* A registered document: the latest version of (kind, id) (version 0) or the given version, or the
 * one whose content hashes to hash. XGR_ENOTFOUND when there is none. *out is freed with
 * xgr_node_doc_clear. */
int xgr_node_doc(xgr_node *n, xgr_registry_kind kind, const char *id, uint32_t version, xgr_store_doc *out,
                 xgr_error *err);
int xgr_node_doc_by_hash(xgr_node *n, xgr_registry_kind kind, const char *hash, xgr_store_doc *out, xgr_error *err);
/* The document of key in namespace ns (NULL or "": the empty one), with shared also the empty
 * namespace's when ns has none. As xgr_node_doc otherwise. */
int xgr_node_doc_in(xgr_node *n, xgr_registry_kind kind, const char *ns, bool shared, const char *key, uint32_t version,
                    xgr_store_doc *out, xgr_error *err);
void xgr_node_doc_clear(xgr_store_doc *d);

/* ---- Access: who may read and act on a session (docs/SEMANTICS.md "Access") -------------------
 * The one decision every front end asks before it shows or changes a session (JSON-RPC methods,
 * the console's pages and event streams, the CLI through xgrd): the session's owner may do
 * everything; an operator (xgr_node_config.operators) may do everything on every owner's sessions;
 * a grantee may do what its unexpired grant's rights cover — READ reads, WRITE also wakes, MANAGE
 * also grants and revokes; CONTROL (kill, pause, resume) only the owner and operators. A grant
 * counts while the node's clock (the engine clock, xgr_engine_now) is below its expires_at: it
 * stops working at that instant, checked at every call. */
typedef enum xgr_node_right {
  XGR_NODE_READ = 1,            /* = XGR_STORE_RIGHT_READ */
  XGR_NODE_WRITE = 2,           /* = XGR_STORE_RIGHT_WRITE: wake its waiting processes */
  XGR_NODE_MANAGE = 4,          /* = XGR_STORE_RIGHT_MANAGE: create, change and revoke its grants */
  XGR_NODE_CONTROL = 8          /* kill, pause, resume: owner and operators only */
} xgr_node_right;
/* Why access was given. */
typedef enum xgr_node_via {
  XGR_NODE_VIA_NONE = 0,
  XGR_NODE_VIA_OWNER,
  XGR_NODE_VIA_OPERATOR,
  XGR_NODE_VIA_GRANT
} xgr_node_via;
typedef struct xgr_node_access_info {
  xgr_node_via via;
  uint32_t rights;              /* what the caller holds: 7 for the owner and operators, else the grant's */
  int64_t expires_at;           /* VIA_GRANT: the grant's expiry (engine clock ms) */
} xgr_node_access_info;
/* "owner" | "operator" | "grant" | "none" */
const char *xgr_node_via_name(xgr_node_via v);
/* Is addr (0x + 40 hex, any case) an operator? */
bool xgr_node_is_operator(xgr_node *n, const char *addr);
/* May caller (an address, any case) exercise every right in `rights` (xgr_node_right bits) on
 * session (owner, root)? 0 with *info (may be NULL) saying why; XGR_EPERM with *err naming path
 * (the request's field that names the caller, e.g. "permit.message.from") when it may not; the
 * store's error when the grant could not be read. Reads one grant row; never changes anything.
 * root 0 asks for every session of owner: only the owner and operators have that (no grant). */
int xgr_node_access(xgr_node *n, const char *caller, const char *owner, uint64_t root, unsigned rights,
                    const char *path, xgr_node_access_info *info, xgr_error *err);
/* The node's clock (engine clock ms) grants are checked against. */
int64_t xgr_node_now(xgr_node *n);
/* The grants' generation (xgr_store_grants_generation of the node's store): it moves after every
 * grant change this node commits (a branch's grants, xgr_manageGrants, a revoke). A decision that
 * xgr_node_access gave through a grant while it was g holds, but for the grant's expiry, while it
 * is still g; a holder of a long-lived decision (an open event stream) decides again when it
 * moved. Cheap (one atomic load); any thread. */
uint64_t xgr_node_grants_generation(xgr_node *n);

/* A grant change (xgr_manageGrants): rights 0 revokes. Strings borrowed. */
typedef struct xgr_node_grant_change {
  const char *grantee;          /* lowercased address */
  uint32_t rights;
  int64_t expires_at;           /* engine clock ms */
  const char *enc_dek;          /* or NULL */
} xgr_node_grant_change;
/* Write changes ch[0..nch) to session (owner, root) in one commit with one audit entry each (kind
 * "grant" or "revoke", actor `actor`, the permit's digest `permit` or NULL). The caller decided
 * access (xgr_node_access MANAGE). XGR_ENOTFOUND when the session has no row. */
int xgr_node_grants_write(xgr_node *n, const char *owner, uint64_t root, const xgr_node_grant_change *ch, size_t nch,
                          const char *actor, const char *permit, xgr_error *err);
/* Grants as xgr_store_grants reads them (freed with xgr_node_grants_free). */
int xgr_node_grants(xgr_node *n, const xgr_store_grant_filter *f, xgr_store_grant **out, size_t *count,
                    xgr_error *err);
void xgr_node_grants_free(xgr_store_grant *g, size_t count);   /* NULL is fine */

/* ---- Registry: stored rules and orchestrations ---- */

/* A registration: document bytes (already checked by the caller: within its size cap, it parses)
 * to store as the next version of `key` — and, for an orchestration, of `current`, the registry's
 * current one — in the namespace of `who` (the empty one when who is ""): stored under
 * "<who>:<key>". Registering the same bytes again gives the existing version. With owner_only
 * (permit mode) a key that another owner registered first is refused (XGR_EPERM at key_path or
 * current_path). Everything is borrowed for the call. */
typedef struct xgr_node_register_req {
  xgr_registry_kind kind;
  const char *key;              /* orchestration: "<registry>/<id>"; rule: its address or alias */
  const char *current;          /* orchestration: "<registry>"; NULL for a rule */
  const char *id;               /* orchestration: its id (for the log line), else NULL */
  const char *who;              /* the writer (the signer; without permits `from`, or "") = the namespace */
  bool owner_only;
  const char *key_path, *current_path;   /* the parameters they came from, for a refusal */
  const char *bytes;
  size_t len;
} xgr_node_register_req;

/* Register r: *out gets the new (or same) registration of r->key, *prev the one it replaced
 * (version 0: none); both are freed with xgr_node_doc_clear, also after an error. The bundle
 * cache forgets what it assembled from the replaced documents, and the node logs the
 * registration. Returns 0, XGR_EPERM, or the store's error. */
int xgr_node_register(xgr_node *n, const xgr_node_register_req *r, xgr_store_doc *out, xgr_store_doc *prev,
                      xgr_error *err);
/* Whether r's signer may register its keys (owner_only: nobody else registered them first), without
 * writing anything: 0 or XGR_EPERM (or the store's error). r->bytes may be NULL. A front end asks
 * before it reads the document, so a non-owner is refused as such whatever it sends. */
int xgr_node_register_allowed(xgr_node *n, const xgr_node_register_req *r, xgr_error *err);

#ifdef __cplusplus
}
#endif
#endif
