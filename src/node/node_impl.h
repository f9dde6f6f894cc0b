/* node_impl.h — private interface between the files of the node (src/node), one room per concern:
 *
 *   node.c      the node's life cycle (open, recover, shut down), recovery and hibernation's loader
 *               and due index, the outbox redelivery, the log and the gauges.
 *   persist.c   the engine's store hook (xgr/node.h, "the persistence adapter").
 *   bundles.c   the cache of assembled bundles of the registries.
 *   lease.c     a cluster node's side of the shared PostgreSQL store: the lease thread, claims,
 *               forwarded control commands (docs/CLUSTER.md).
 *   query.c     the queries the front ends read sessions and documents through (xgr/node.h,
 *               "Queries: reading sessions").
 *   registry.c  registering orchestrations and rules (xgr/node.h, "Registry").
 *   start.c     starting a session as a front end asks (xgr/node.h, "Starting sessions").
 *   batch.c     operations on many sessions: selection, dry run, the driver (xgr/node.h, "Actions on
 *               many sessions").
 *   access.c    who may read and act on a session; writing and reading grants (xgr/node.h, "Access").
 *
 * Not installed; nothing outside src/node includes it. Every function here is library-private
 * (xgr__ prefix).
 */
#ifndef XGR_NODE_NODE_IMPL_H
#define XGR_NODE_NODE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "xgr/bundle.h"
#include "xgr/chain.h"
#include "xgr/engine.h"
#include "xgr/node.h"
#include "xgr/store.h"

/* A cached bundle of a registry key (bundles.c; guarded by xgr_node.reg_mu). */
typedef struct xgr__regent {
  struct xgr__regent *next;
  char *key;                   /* owned */
  uint64_t gen;                /* rules generation it was assembled in */
  struct xgr__bnode *bn;       /* the bundle, the orchestration's owner and executors (its `cached`
                                  is set while this entry exists) */
} xgr__regent;

/* An assembled bundle in use: freed when no cache entry points at it and nobody holds it (method
 * calls and running sessions hold references), so memory stays bounded however often rules are
 * replaced. */
typedef struct xgr__bnode {
  struct xgr__bnode *next;
  xgr_bundle *b;               /* owned */
  size_t refs;                 /* holders (reg_mu) */
  bool cached;                 /* a cache entry points at it (reg_mu) */
  char *owner;                 /* owned: who registered the orchestration ("" if nobody) */
  json_t *executors;           /* owned: its document's top-level `executors`, or NULL */
  char *manifest;              /* owned: its manifest (the rules' exact hashes; bundles.c) */
  char bundle_hash[67];        /* keccak-256 of manifest */
} xgr__bnode;

/* Most cache entries kept (least recently assembled dropped first). */
#define XGR__NODE_MAX_CACHED 256
/* Bundle hashes whose manifest this node registered lately (not registered again). */
#define XGR__NODE_PINS_KEPT 64

typedef struct xgr__node_lease xgr__node_lease;

struct xgr_node {
  xgr_node_config cfg;
  char name[256];              /* the node's name in the audit trail (xgr_node_config.node_name) */
  xgr_store *st;               /* owned */
  xgr_node_persist *p;         /* owned */
  xgr_engine *e;               /* owned */
  atomic_bool ready, stopping;
  pthread_mutex_t reg_mu;      /* regs, bundles */
  xgr__regent *regs;
  xgr__bnode *bundles;
  char pins_stored[XGR__NODE_PINS_KEPT][67];   /* manifests registered lately (reg_mu; a ring) */
  size_t pins_next;
  atomic_uint_fast64_t migrations[5];   /* migrate.c: migrated, forced, unsafe, refused, checked (dry runs) */
  atomic_uint_fast64_t rules_gen;   /* bumped when a rule changes: cached bundles of older generations are stale */
  size_t restored, failed;     /* recovery counts */
  size_t hibernated;           /* live sessions recovery left in the store (hibernated) */
  xgr_engine_hibernation hib;  /* hibernation settings (hib.load NULL: off) */
  xgr_chain_reader reader;     /* contract reads on cfg.chain (engine config points here) */
  xgr_chain_cache *chain_cache;   /* orchestrations and rules read from the chain (owned), NULL: none */
  xgr__node_lease *lease;      /* owned: the cluster node's side (lease.c), NULL when not a cluster node */
  struct xgr__node_quiet *quiet;   /* owned: xgr_node_log_error's repeats (node.c) */
  xgr_counter *quota_starts_refused;   /* starts refused for an owner quota (NULL: no metrics) */
  xgr_counter *access_denied;  /* xgr_node_access refusals (access.c; NULL: no metrics) */
  xgr_counter *access_grant;   /* xgr_node_access answers given by a grant */
  struct xgr__tracer *trace;   /* owned: spans exported to cfg.otlp_endpoint (trace.c), NULL: no tracing */
  struct xgr__batcher *batch;  /* owned: the batch operations' driver (batch.c), NULL until recovered */
};

/* ---- node.c ----------------------------------------------------------------------------------- */

/* Restore one live session from its rows and start it (recovery, hibernation, claims); failures
 * are logged. 0, XGR_ECONFLICT (it runs here already) or the error. */
int xgr__node_load(xgr_node *d, const xgr_store_live *l, xgr_error *err);
/* fork.c: the record of fork r for the new session (new_root, running new_bundle_hash) into *out
 * (its JSON texts allocated; the other strings borrowed from r and n): 0 or XGR_ENOMEM. Freed with
 * xgr__node_fork_unmake once xgr_node_start has copied it. */
int xgr__node_fork_make(xgr_node *n, const xgr_node_fork_rec *r, uint64_t new_root, const char *new_bundle_hash,
                        xgr_engine_fork *out);
void xgr__node_fork_unmake(xgr_engine_fork *f);

/* ---- bundles.c -------------------------------------------------------------------------------- */

/* The engine's bundle_done (ctx = the node): xgr_node_bundle_put. */
void xgr__node_bundle_done(void *d, const xgr_bundle *b);
/* Free the cache and every bundle (after the engine is gone). */
void xgr__node_bundles_free(xgr_node *d);

/* ---- lease.c ---------------------------------------------------------------------------------- */

/* Is (owner, root) a running session in the store (cluster: it may run on another node)? */
bool xgr__node_lease_live(xgr_node *d, const char *owner, uint64_t root);
/* migrate.c: migrate r's session in this node's engine (via: the node the call came through, named in
 * its audit entry; NULL: this one). lease.c: xgr_node_migrate on a cluster node, routed to the node
 * that holds the session (forwarded as a command row; its verdict comes back). Both as
 * xgr_node_migrate. */
int xgr__node_migrate_here(xgr_node *d, const xgr_node_migrate_req *r, const char *via, json_t **verdict,
                           xgr_error *err);
int xgr__node_lease_migrate(xgr_node *d, const xgr_node_migrate_req *r, json_t **verdict, xgr_error *err);
/* Hibernation on a cluster node: load (owner, root) only under this node's lease — read it when its
 * row still names this node at the epoch the store remembers, else claim it (its row names this
 * node, or nobody holds it; the epoch goes up, so any forgotten incarnation is fenced) — and call
 * fn with its rows (then 0); XGR_ENOTFOUND when it is not running or another live node holds it,
 * XGR_ETIMEOUT when its row stayed locked. */
int xgr__node_lease_load(xgr_node *d, const char *owner, uint64_t root, int (*fn)(void *ctx, const xgr_store_live *l),
                         void *ctx, xgr_error *err);
/* Become a cluster node: claim this node id's sessions of an earlier life and every free one,
 * start the lease thread. d->st must be a cluster store. */
int xgr__node_lease_start(xgr_node *d, xgr_error *err);
/* Stop the lease thread; release: give up every lease (SIGTERM, after the engine stopped). */
void xgr__node_lease_stop(xgr_node *d, bool release);
/* Stop (without releasing) and free. NULL lease is fine. */
void xgr__node_lease_free(xgr_node *d);
/* The cluster gauges (xgr_cluster{kind=...}) on m; nothing when not a cluster node. */
void xgr__node_lease_metrics(xgr_node *d, xgr_metrics *m);
/* migrate.c: xgr_migrations_total{outcome} (sessions moved, left alone or checked by xgr.migrateSessions). */
void xgr__node_migrate_metrics(xgr_node *d, xgr_metrics_out *out);

/* ---- batch.c ---------------------------------------------------------------------------------- */

/* Start the driver thread of batch operations (after recovery; it claims running operations). */
void xgr__node_batch_begin(xgr_node *d);
/* Stop it (before the engine stops; the operation it drives stays running in the store, claimed,
 * and goes on after a restart) and free. NULL batcher is fine. */
void xgr__node_batch_end(xgr_node *d);
/* Free the batcher (after xgr__node_batch_end; with the node). */
void xgr__node_batch_free(xgr_node *d);

/* ---- trace.c ---------------------------------------------------------------------------------- */

/* The tracer (see trace.c's head): spans built from the engine's events, exported as OTLP/HTTP
 * JSON by its own thread. Made only with cfg.otlp_endpoint. */
typedef struct xgr__tracer xgr__tracer;
/* endpoint's check (xgr_node_check_otlp_endpoint). */
int xgr__tracer_check_endpoint(const char *endpoint, xgr_error *err);
/* A tracer posting to endpoint (checked: XGR_EINVAL), queueing at most queue_spans (0: the
 * default); scale: the engine clock's factor over Unix time. Starts its exporter thread. node
 * (borrowed) is its log. */
xgr__tracer *xgr__tracer_new(xgr_node *node, const char *endpoint, size_t queue_spans, double scale, xgr_error *err);
/* Subscribe to e's events: before any session starts. */
int xgr__tracer_subscribe(xgr__tracer *t, xgr_engine *e, xgr_error *err);
/* A session is about to start here: its trace continues traceparent's when that is a valid header
 * (NULL: a trace of its own); its session span starts now. Kept while the session lives (in
 * memory: not across a restart). Whether it made the state (false: it had one already, or the
 * table is full). */
bool xgr__tracer_session_begin(xgr__tracer *t, const char *owner, uint64_t root, const char *traceparent);
/* The session did not start after all: forget what session_begin kept. */
void xgr__tracer_session_drop(xgr__tracer *t, const char *owner, uint64_t root);
/* Register the tracer's counters on m (borrowed). */
void xgr__tracer_metrics(xgr__tracer *t, xgr_metrics *m);
/* Stop the exporter after posting what is queued (bounded: a few seconds) and free. After the
 * engine is gone (no more events). NULL is fine. */
void xgr__tracer_free(xgr__tracer *t);

#endif
