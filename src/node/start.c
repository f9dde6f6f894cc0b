/* start.c — starting a session as a front end asks for it (xgr/node.h, "Starting sessions").
 *
 * xgr_node_enqueue decides everything between a well-formed request and the session's actor: the
 * bundle of the registry key in its namespace (registryOwner's, else the session owner's, then the
 * empty one; the node's cache) with its manifest registered, so the session's row pins its bundle
 * hash (docs/SEMANTICS.md, "Names and pins"), the pinned orchestration or bundle hash, the SessionPermit's
 * bindings (rootPid, orchestration, the signer's right to start it) and, for a registry on the
 * chain, the signer's role; the start step and payload; the rootPid (the request's, or the owner's
 * next); whether the session runs here already (its ack at once). Then xgr_node_start hands the
 * start to the engine: the actor's first batch carries the session row (insert if absent), and its
 * commit makes the outcome ready (done). xgr_node_enqueued_answer turns the outcome into the ack:
 * queued or scheduled, or — when the store held the session already (another start won, or it is
 * hibernated or another cluster node's) — the stored session's ack while it runs, a conflict once
 * it ended (a rootPid is used once).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "node/node_impl.h"
#include "util/alloc.h"
#include "xgr/auth.h"
#include "xgr/json.h"
#include "xgr/secp.h"
#include "xgr/xrc_types.h"

struct xgr_node_enqueued {
  xgr_node *n;
  const xgr_bundle *b;          /* the call's reference (given back by xgr_node_enqueued_answer) */
  char owner[64];
  uint64_t root;
  char *step;                   /* owned */
  xgr_value payload;            /* owned */
  int64_t start_at;             /* the start process's first wake (engine clock), 0: at once */
  char *max_total_gas;          /* owned: the permit's budget, or NULL */
  char *registry;               /* owned */
  char bundle_hash[67];         /* the pin recorded on the row */
  int rc;                       /* the first batch's outcome */
  bool engine_has;              /* nothing was started: the engine or the store has the session */
  bool fork;                    /* a fork: a session that exists is a conflict, not an answer */
  xgr_error err;
  void (*done)(void *ctx, xgr_node_enqueued *p);
  void *ctx;
};

static void enqueued_free(xgr_node_enqueued *p) {
  xgr_value_release(p->payload);
  free(p->step);
  free(p->max_total_gas);
  free(p->registry);
  xgr_node_bundle_put(p->n, p->b);
  free(p);
}

/* The ack of a session this node runs or the store holds as running. */
static xgr_node_ack existing_ack(xgr_node *n, const char *owner, uint64_t root, bool paused) {
  if (paused) return XGR_NODE_ACK_PAUSED;
  xgr_store_proc *ps = NULL;
  size_t np = 0;
  xgr_error e;
  xgr_node_ack a = XGR_NODE_ACK_ALREADY;
  if (!xgr_store_procs(n->st, owner, root, &ps, &np, &e)) {
    bool live = false, running = false, all_paused = true;
    for (size_t i = 0; i < np; i++) {
      if (ps[i].status == XGR_PROC_RUNNING) running = true;
      if (ps[i].status == XGR_PROC_WAITING || ps[i].status == XGR_PROC_RUNNING) {
        live = true;
        if (!ps[i].paused) all_paused = false;
      }
    }
    /* the earliest timer of a waiting process (not an open join target's past one) */
    int64_t due = xgr_store_procs_next_wake(ps, np);
    if (live && all_paused) a = XGR_NODE_ACK_PAUSED;
    else if (live && !running && due != XGR_NEVER && due > xgr_engine_now(n->e)) a = XGR_NODE_ACK_SCHEDULED;
    xgr_store_procs_free(ps, np);
  }
  return a;
}

/* The answer for a session the store has already: its ack while it runs, else a conflict (a
 * rootPid is used once). */
static int stored_ack(xgr_node *n, const char *owner, uint64_t root, xgr_node_ack *ack, xgr_error *err) {
  xgr_store_session row = {0};
  int rc = xgr_store_session_get(n->st, owner, root, &row, err);
  if (rc && rc != XGR_ENOTFOUND) return rc;
  bool running = !rc && row.status == XGR_RESULT_RUNNING, paused = !rc && row.paused;
  const char *st = rc ? "gone" : xgr_session_result_name((xgr_session_result)row.status);
  xgr_store_session_clear(&row);
  xgr_error_clear(err);
  if (running) {
    *ack = existing_ack(n, owner, root, paused);
    return 0;
  }
  return xgr_error_set(err, XGR_ECONFLICT, "rootPid", "session %s/%llu exists and is %s; a rootPid is used once", owner,
                       (unsigned long long)root, st);
}

/* The answer once the start is done (p->rc, p->err). Does not free p. */
static int answer(xgr_node_enqueued *p, xgr_node_ack *ack, xgr_error *err) {
  xgr_node *n = p->n;
  if (p->fork && (p->engine_has || p->rc == XGR_ECONFLICT))   /* nothing was written, the record neither */
    return xgr_error_set(err, XGR_ECONFLICT, "newRootPid", "session %s/%llu exists; a fork starts a new session",
                         p->owner, (unsigned long long)p->root);
  if (p->engine_has) {   /* running here, or in the store only (hibernated, or another node's) */
    xgr_engine_session_info info;
    if (!xgr_engine_session(n->e, p->owner, p->root, &info) && !info.finished) {
      *ack = existing_ack(n, p->owner, p->root, false);
      return 0;
    }
    return stored_ack(n, p->owner, p->root, ack, err);
  }
  if (p->rc == XGR_ECONFLICT) return stored_ack(n, p->owner, p->root, ack, err);   /* nothing was written */
  if (p->rc) {
    *err = p->err;
    if (!err->message[0])
      snprintf(err->message, sizeof err->message, "the store refused the start: %s", xgr_errcode_name(p->rc));
    return p->rc == XGR_ESTATE ? XGR_EIO : p->rc;
  }
  *ack = p->start_at ? XGR_NODE_ACK_SCHEDULED : XGR_NODE_ACK_QUEUED;   /* init.waitMs: its start waits */
  return 0;
}

int xgr_node_next_root(xgr_node *n, const char *owner, uint64_t *root, xgr_error *err) {
  return xgr_store_peek_process_id(n->st, owner, root, err);
}

/* The keys of manifest text m's "rules" whose hash differs from (or is missing in) rules, as
 * "a, b" into out (for a refusal). */
static void changed_rules(const char *m, const char *now_m, char *out, size_t n) {
  json_t *a = json_loads(m, 0, NULL), *b = json_loads(now_m, 0, NULL);
  json_t *ra = json_object_get(a, "rules"), *rb = json_object_get(b, "rules");
  size_t w = 0;
  out[0] = 0;
  const char *k;
  json_t *v;
  json_object_foreach(ra, k, v) {
    const char *h = json_string_value(json_object_get(rb, k));
    if (h && json_string_value(v) && !strcmp(h, json_string_value(v))) continue;
    int c = snprintf(out + w, n - w, "%s%s", w ? ", " : "", k);
    if (c < 0 || (size_t)c >= n - w) break;
    w += (size_t)c;
  }
  json_decref(a);
  json_decref(b);
}

/* A pinned hash (the request's ostcHash or the permit's) that is neither the orchestration's nor
 * the current bundle's: when it is a bundle hash this node registered, the rules changed since it
 * was taken — XGR_EMISMATCH at ostcHash naming them; else 0 (not a bundle: the caller refuses it as
 * an orchestration hash). */
static int stale_bundle(xgr_node *n, const char *what, const char *pinned, const char *bundle_hash,
                        const char *reg_key, xgr_error *err) {
  xgr_store_doc m = {0}, now = {0};
  xgr_error e;
  if (xgr_store_doc_by_hash(n->st, XGR_REG_ORCHESTRATION, pinned, &m, &e)) return 0;
  int rc = 0;
  if (m.id && m.id[0] == '#') {
    char which[200] = "";
    if (!xgr_store_doc_by_hash(n->st, XGR_REG_ORCHESTRATION, bundle_hash, &now, &e))
      changed_rules(m.content, now.content, which, sizeof which);
    rc = xgr_error_set(err, XGR_EMISMATCH, "ostcHash",
                       "bundle mismatch: %s pins the rules of bundle %s, but the rules \"%s\" resolves now make bundle %s "
                       "(changed: %s)", what, pinned, reg_key, bundle_hash,
                       which[0] ? which : "the orchestration");
  }
  xgr_store_doc_clear(&m);
  xgr_store_doc_clear(&now);
  return rc;
}

int xgr_node_enqueued_answer(xgr_node_enqueued *p, xgr_node_ack *ack, xgr_error *err) {
  int rc = answer(p, ack, err);
  enqueued_free(p);
  return rc;
}

/* The first batch is committed or refused (from the committing thread; must not block). */
static void started(void *ctx, int rc) {
  xgr_node_enqueued *p = ctx;
  p->rc = rc;
  p->done(p->ctx, p);
}

/* An XRC-729 registry on the chain: the permit's signer must be its owner or one of its executors
 * (XRC-729 §4.2). */
static int chain_starter(xgr_node *n, const xgr_node_enqueue_req *r, xgr_error *err) {
  if (!n->chain_cache || !r->permit || !r->permit->kind || !r->who || !r->who[0] || strlen(r->reg_key) <= 43 ||
      r->reg_key[42] != '/' || !xgr_xrc_is_address(r->reg_key, 42))
    return 0;
  char reg[43];
  memcpy(reg, r->reg_key, 42);
  reg[42] = 0;
  bool ok = false;
  xgr_error ae;
  if (xgr_chain_authorized(n->cfg.chain, NULL, reg, r->who, &ok, &ae))
    return xgr_error_set(err, XGR_EIO, r->reg_path, "cannot check the registry's owner: %s", ae.message);
  if (!ok)
    return xgr_error_set(err, XGR_EPERM, r->reg_path,
                         "the permit's signer %s is neither the owner of registry %s nor one of its executors", r->who, reg);
  return 0;
}

/* The owner quotas (docs/SECURITY.md): an owner whose live processes here or whose stored bytes
 * are at or over its quota starts nothing (XGR_ELIMIT at "from", naming the quota and its value).
 * The stored bytes are read again from the store when older than a second. */
static int owner_quotas(xgr_node *n, const char *owner, xgr_error *err) {
  uint64_t max_procs = n->cfg.max_owner_processes ? n->cfg.max_owner_processes : XGR_ENGINE_DEFAULT_MAX_OWNER_PROCESSES;
  uint64_t max_bytes = n->cfg.max_owner_bytes ? n->cfg.max_owner_bytes : XGR_NODE_DEFAULT_MAX_OWNER_BYTES;
  uint64_t live = xgr_engine_owner_live(n->e, owner);
  int rc = 0;
  if (live >= max_procs) {
    rc = xgr_error_set(err, XGR_ELIMIT, "from",
                       "owner quota reached: %s has %llu live processes; the quota --max-owner-processes is %llu. "
                       "Wait for sessions to end or kill some",
                       owner, (unsigned long long)live, (unsigned long long)max_procs);
  } else {
    uint64_t bytes = 0, refused = 0;
    if ((rc = xgr_node_persist_owner_bytes(n->p, owner, 1000, &bytes, &refused, err))) return rc;
    char more[96] = "";
    if (refused) snprintf(more, sizeof more, ", and a write of %llu more was refused", (unsigned long long)refused);
    if (bytes >= max_bytes || (refused && bytes + refused > max_bytes))   /* full, or no room for its last write */
      rc = xgr_error_set(err, XGR_ELIMIT, "from",
                         "owner quota reached: the sessions of %s hold %llu stored bytes%s; the quota "
                         "--max-owner-bytes is %llu. They count until retention deletes them",
                         owner, (unsigned long long)bytes, more, (unsigned long long)max_bytes);
  }
  if (rc && n->quota_starts_refused) xgr_counter_add(n->quota_starts_refused, 1);
  return rc;
}

int xgr_node_enqueue(xgr_node *n, const xgr_node_enqueue_req *r, uint64_t *root_out, char hash[67],
                     char bundle_hash[67], xgr_node_ack *ack, bool *pending, xgr_error *err) {
  *pending = false;
  hash[0] = bundle_hash[0] = 0;
  const xgr_bundle *b = NULL;
  xgr_node_bundle_meta meta = {0};
  int rc = xgr_node_bundle_in(n, r->reg_ns ? r->reg_ns : r->owner, !r->reg_ns, r->reg_key, true, &b, &meta, r->reg_path,
                              err);
  if (rc) return rc;
  snprintf(hash, 67, "%s", b->orch->hash);
  snprintf(bundle_hash, 67, "%s", meta.bundle_hash);
  uint64_t root = r->root;
  xgr_value payload = xgr_value_null();
  if (r->ostc_hash && strcasecmp(r->ostc_hash, b->orch->hash) && strcasecmp(r->ostc_hash, meta.bundle_hash)) {
    if ((rc = stale_bundle(n, "the request's ostcHash", r->ostc_hash, meta.bundle_hash, r->reg_key, err))) goto fail;
    rc = xgr_error_set(err, XGR_EMISMATCH, "ostcHash",
                       "registry mismatch: ostcHash is %.80s but the orchestration registered under \"%s\" hashes to %s "
                       "(its bundle with the rules current now: %s)",
                       r->ostc_hash, r->reg_key, b->orch->hash, meta.bundle_hash);
    goto fail;
  }
  if (r->permit && r->permit->kind) {
    /* the SessionPermit binds the rootPid this start gets (the request's, else the owner's next),
     * the orchestration (ostcId, registered hash — or the bundle hash, which covers the rules too)
     * and the signer's right to start it; checked before anything is written, and the next rootPid
     * is read, not taken */
    char signed_hash[67];
    xgr_hex_encode(r->permit->ostc_hash, 32, signed_hash);
    bool bundle_signed = !strcasecmp(signed_hash, meta.bundle_hash);
    if (!bundle_signed && strcasecmp(signed_hash, b->orch->hash) &&
        (rc = stale_bundle(n, "the SessionPermit's ostcHash", signed_hash, meta.bundle_hash, r->reg_key, err)))
      goto fail;
    if (!root && (rc = xgr_store_peek_process_id(n->st, r->owner, &root, err))) goto fail;
    if ((rc = xgr_auth_check_session(r->permit, root, r->ostc_id, bundle_signed ? meta.bundle_hash : b->orch->hash,
                                     err)) ||
        (rc = xgr_auth_check_starter(r->permit, meta.owner, meta.executors, err)))
      goto fail;
  }
  if ((rc = chain_starter(n, r, err))) goto fail;
  if ((rc = owner_quotas(n, r->owner, err))) goto fail;
  const char *step = r->step ? r->step : b->orch->nsteps ? b->orch->steps[0].id : "";
  if (xgr_orch_find(b->orch, step) < 0) {
    rc = xgr_error_set(err, XGR_EREF, r->step_path, "step \"%.80s\" is not a step of orchestration \"%s\"", step,
                       b->orch->id);
    goto fail;
  }
  if (r->payload) {
    if (!json_is_object(r->payload)) {
      rc = xgr_error_set(err, XGR_ESCHEMA, r->payload_path, "is not an object; expected the step's input payload {...}");
      goto fail;
    }
    xgr_value_from_json(r->payload, 0, &payload, err);
    if (xgr_value_check_list_cap(payload, 64, err)) {
      snprintf(err->path, sizeof err->path, "%s", r->payload_path);
      rc = XGR_ELIMIT;
      goto fail;
    }
  }
  /* the owner's next rootPid, taken now (in permit mode root is already the one peeked above,
   * which the permit binds) */
  if (!root && (rc = xgr_store_next_process_id(n->st, r->owner, &root, err))) goto fail;
  *root_out = root;
  /* a live session here? (one the store has but the engine does not run is found by the start) */
  xgr_engine_session_info info;
  if (!xgr_engine_session(n->e, r->owner, root, &info) && !info.finished) {
    *ack = existing_ack(n, r->owner, root, false);
    rc = r->fork ? xgr_error_set(err, XGR_ECONFLICT, "newRootPid", "session %s/%llu exists; a fork starts a new session",
                                 r->owner, (unsigned long long)root)
                 : 0;
    goto fail;   /* nothing to start: give the bundle back */
  }
  xgr_engine_fork fk;
  if (r->fork && (rc = xgr__node_fork_make(n, r->fork, root, meta.bundle_hash, &fk))) {
    xgr_error_set(err, rc, NULL, "out of memory recording the fork");
    goto fail;
  }
  xgr_node_enqueued *p = xgr__xcalloc(1, sizeof *p);
  p->n = n;
  p->b = b;
  snprintf(p->owner, sizeof p->owner, "%s", r->owner);
  p->registry = xgr__xstrdup(r->registry ? r->registry : "");
  snprintf(p->bundle_hash, sizeof p->bundle_hash, "%s", meta.bundle_hash);
  p->root = root;
  p->step = xgr__xstrdup(step);
  p->payload = payload;
  p->start_at = r->wait_ms ? xgr_engine_now(n->e) + r->wait_ms : 0;
  if (r->permit && r->permit->kind) p->max_total_gas = xgr__xstrdup(r->permit->max_total_gas);
  p->done = r->done;
  p->ctx = r->ctx;
  p->fork = r->fork != NULL;
  if (r->before) r->before(r->ctx, root);
  bool traced = n->trace && xgr__tracer_session_begin(n->trace, p->owner, root, r->traceparent);
  *pending = true;
  xgr_node_start_req nr = {.bundle = b, .owner = p->owner, .root = root, .step = p->step, .payload = p->payload,
                           .start_at = p->start_at, .registry = p->registry, .max_total_gas = p->max_total_gas,
                           .bundle_hash = p->bundle_hash, .fork = r->fork ? &fk : NULL, .started = started,
                           .started_ctx = p};
  xgr_error_clear(&p->err);
  rc = xgr_node_start(n, &nr, &p->err);
  if (r->fork) xgr__node_fork_unmake(&fk);   /* copied by the engine */
  if (rc) {   /* not started: started() will not come, so the outcome is ready now */
    if (traced) xgr__tracer_session_drop(n->trace, p->owner, root);
    if (rc == XGR_ECONFLICT) p->engine_has = true;   /* it runs here already, or the store has it */
    else {
      xgr_node_log_session(n, "warn", "session not started", p->owner, p->root, p->err.message);
      p->rc = rc;
    }
    p->done(p->ctx, p);
  }
  return 0;
fail:
  xgr_value_release(payload);
  xgr_node_bundle_put(n, b);
  return rc;
}
