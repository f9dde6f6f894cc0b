/* batch.c — the JSON-RPC methods of operations on many sessions (docs/RPC.md "Batch operations"):
 * xgr.batchPreview (the dry run: count and sample), xgr.batchStart, xgr.batchGet, xgr.batchCancel,
 * xgr.batchList. They only adapt: who the caller is (xgr_rpc_authorize_permit: with --auth permits
 * an XDaLa permit's signer, used once for start and cancel; with --auth none `from`, else the
 * selection's owner), the parameters read, the node's answer (xgr/node.h, "Actions on many
 * sessions") written as JSON. Who may select whose sessions is the node's decision.
 */
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_impl.h"
#include "xgr/auth.h"

static const char *const preview_keys[] = {"from", "selection", "sample", "permit", NULL};
static const char *const start_keys[] = {"from", "selection", "action", "stepId", "payload", "permit", NULL};
static const char *const get_keys[] = {"from", "id", "permit", NULL};
static const char *const list_keys[] = {"from", "limit", "permit", NULL};

/* Who calls: the permit's signer or (--auth none) `from`, else owner. *actor: the audit entries'
 * name of the caller. With consume (start, cancel) a permit works once. */
static int who_calls(const xgr_rpc_caller *caller, const json_t *o, const char *owner, bool consume, char *who,
                     size_t n, const char **actor, xgr_error *err) {
  xgr_permit permit;
  int rc = xgr_rpc_authorize_permit(caller, o, XGR_RPC_ACT_READ, owner, who, n, &permit, err);
  if (rc) return rc;
  if (!who[0])
    return xgr__rpc_fail(err, XGR_ESCHEMA, "from",
                         "missing; name the caller (\"from\": its address) or the selection's owner");
  *actor = xgr_rpc_actor(caller, who);
  xgr_rpc_log_subject(caller, *actor, owner, 0);
  if (consume && permit.kind && (rc = xgr_auth_consume(caller->auth, &permit, err))) return rc;
  return 0;
}

/* The selection's owner (lowercased into buf) or NULL. */
static const char *sel_owner(const json_t *sel, char *buf, size_t n) {
  const char *o = json_string_value(json_object_get(sel, "owner"));
  if (!o || !xgr_rpc_is_address(o)) return NULL;
  snprintf(buf, n, "%s", o);
  xgr__rpc_lower(buf);
  return buf;
}

static json_t *op_json(const xgr_store_batchop *o) {
  json_t *spec = json_loads(o->spec ? o->spec : "{}", 0, NULL);
  json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:I}", "id", o->id, "caller",
                        o->caller, "action", o->action, "state", o->state, "total", (json_int_t)o->total, "done",
                        (json_int_t)o->done, "failed", (json_int_t)o->failed, "skipped", (json_int_t)o->skipped,
                        "driver", o->driver ? o->driver : "", "createdAt", (json_int_t)o->created_at, "startedAt",
                        (json_int_t)o->started_at, "finishedAt", (json_int_t)o->finished_at);
  json_object_set(j, "selection", json_object_get(spec, "selection"));
  if (json_object_get(spec, "step")) json_object_set(j, "stepId", json_object_get(spec, "step"));
  if (json_object_get(spec, "payload")) {   /* its keys, as the audit entries show them (not its values) */
    json_t *keys = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(spec, "payload"), k, v) json_array_append_new(keys, json_string(k));
    json_object_set_new(j, "payloadKeys", keys);
  }
  if (o->error) json_object_set_new(j, "error", json_string(o->error));
  json_decref(spec);
  return j;
}

XGR__RPCD_METHOD(xgr__rpcd_m_batch_preview) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr__rpc_named(params, preview_keys, &o, err);
  if (rc) return rc;
  const json_t *sel = json_object_get(o, "selection");
  if ((rc = xgr_node_batch_check_selection(sel, "selection", err))) return rc;
  uint64_t want = 20;
  const json_t *sv = json_object_get(o, "sample");
  if (sv && !json_is_null(sv) && (rc = xgr__rpc_uint(sv, "sample", &want, err))) return rc;
  char who[64], ob[64];
  const char *actor;
  if ((rc = who_calls(caller, o, sel_owner(sel, ob, sizeof ob), false, who, sizeof who, &actor, err))) return rc;
  xgr_node_batch_hit hits[XGR_NODE_BATCH_SAMPLE_MAX];
  uint64_t count;
  size_t nh;
  rc = xgr_node_batch_preview(d->n, who, sel, "selection", (size_t)(want < 1000 ? want : 1000), &count, hits, &nh,
                              err);
  if (rc) return xgr__rpc_code(rc, err);
  json_t *sample = json_array();
  for (size_t i = 0; i < nh; i++)
    json_array_append_new(sample, json_pack("{s:s, s:o, s:s}", "owner", hits[i].owner, "rootPid",
                                            xgr__rpc_u64_json(hits[i].root), "status", hits[i].status));
  *result = json_pack("{s:I, s:o}", "count", (json_int_t)count, "sample", sample);
  return 0;
}

XGR__RPCD_METHOD(xgr__rpcd_m_batch_start) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr__rpc_named(params, start_keys, &o, err);
  if (rc) return rc;
  const json_t *sel = json_object_get(o, "selection");
  if ((rc = xgr_node_batch_check_selection(sel, "selection", err))) return rc;
  const char *action = NULL, *step = NULL;
  if ((rc = xgr__rpc_opt_str(o, "action", &action, err))) return rc;
  if (!action) return xgr__rpc_fail(err, XGR_ESCHEMA, "action", "missing; expected \"kill\", \"pause\", \"resume\" or \"wake\"");
  if ((rc = xgr__rpc_opt_str(o, "stepId", &step, err))) return rc;
  const json_t *payload = json_object_get(o, "payload");
  if (payload && json_is_null(payload)) payload = NULL;
  char who[64], ob[64];
  const char *actor;
  const char *owner = sel_owner(sel, ob, sizeof ob);
  /* who may is checked (by the node) before a permit is used up: a refused call uses nothing */
  xgr_permit probe;
  if ((rc = xgr_rpc_authorize_permit(caller, o, XGR_RPC_ACT_READ, owner, who, sizeof who, &probe, err))) return rc;
  if (who[0] && !xgr_node_may_control(d->n, who, owner)) {
    uint64_t c;
    size_t nh;
    return xgr__rpc_code(xgr_node_batch_preview(d->n, who, sel, "selection", 0, &c, NULL, &nh, err), err);
  }
  if ((rc = who_calls(caller, o, owner, true, who, sizeof who, &actor, err))) return rc;
  xgr_node_batch_req r = {.caller = who, .actor = actor, .selection = sel, .sel_path = "selection", .action = action,
                          .step = step, .payload = payload};
  char id[33];
  uint64_t total;
  if ((rc = xgr_node_batch_start(d->n, &r, id, &total, err))) return xgr__rpc_code(rc, err);
  *result = json_pack("{s:s, s:s, s:I}", "id", id, "state", "running", "total", (json_int_t)total);
  return 0;
}

static int read_id(const json_t *o, const char **id, xgr_error *err) {
  int rc = xgr__rpc_opt_str(o, "id", id, err);
  if (rc) return rc;
  if (!*id || strlen(*id) != 32 || strspn(*id, "0123456789abcdef") != 32)
    return xgr__rpc_fail(err, XGR_ESCHEMA, "id", "is %s; expected a batch operation's id (32 lowercase hex digits)",
                         *id ? "malformed" : "missing");
  return 0;
}

/* The parameters of a call on one operation (get, cancel): its id and who calls (with consume, a
 * permit is used up). */
static int op_call(const xgr_rpc_caller *caller, const json_t *params, bool consume, const char **id, char *who,
                   size_t n, xgr_error *err) {
  const json_t *o;
  const char *actor;
  int rc = xgr__rpc_named(params, get_keys, &o, err);
  if (!rc) rc = read_id(o, id, err);
  if (!rc) rc = who_calls(caller, o, NULL, consume, who, n, &actor, err);
  return rc;
}

XGR__RPCD_METHOD(xgr__rpcd_m_batch_get) {
  xgr_rpcd *d = ctx;
  const char *id;
  char who[64];
  int rc = op_call(caller, params, false, &id, who, sizeof who, err);
  if (rc) return rc;
  xgr_store_batchop op;
  if ((rc = xgr_node_batch_get(d->n, who, id, &op, err))) {
    if (rc == XGR_ENOTFOUND) snprintf(err->path, sizeof err->path, "id");
    return xgr__rpc_code(rc, err);
  }
  *result = op_json(&op);
  xgr_node_batch_clear(&op);
  return 0;
}

XGR__RPCD_METHOD(xgr__rpcd_m_batch_cancel) {
  xgr_rpcd *d = ctx;
  const char *id;
  char who[64];
  int rc = op_call(caller, params, true, &id, who, sizeof who, err);
  if (rc) return rc;
  bool changed;
  if ((rc = xgr_node_batch_cancel(d->n, who, id, &changed, err))) {
    if (rc == XGR_ENOTFOUND) snprintf(err->path, sizeof err->path, "id");
    return xgr__rpc_code(rc, err);
  }
  xgr_store_batchop op;
  if ((rc = xgr_node_batch_get(d->n, who, id, &op, err))) return xgr__rpc_code(rc, err);
  *result = json_pack("{s:s, s:b, s:s}", "id", id, "cancelled", changed, "state", op.state);
  xgr_node_batch_clear(&op);
  return 0;
}

XGR__RPCD_METHOD(xgr__rpcd_m_batch_list) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  const char *actor;
  int rc = xgr__rpc_named(params, list_keys, &o, err);
  if (rc) return rc;
  uint64_t limit = 100;
  const json_t *lv = json_object_get(o, "limit");
  if (lv && !json_is_null(lv) && (rc = xgr__rpc_uint(lv, "limit", &limit, err))) return rc;
  if (!limit || limit > 1000) return xgr__rpc_fail(err, XGR_ESCHEMA, "limit", "is %llu; expected 1 to 1000",
                                                   (unsigned long long)limit);
  char who[64];
  if ((rc = who_calls(caller, o, NULL, false, who, sizeof who, &actor, err))) return rc;
  xgr_store_batchop *ops = NULL;
  size_t n = 0;
  if ((rc = xgr_node_batch_list(d->n, who, (size_t)limit, &ops, &n, err))) return xgr__rpc_code(rc, err);
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(a, op_json(&ops[i]));
  xgr_node_batches_free(ops, n);
  *result = json_pack("{s:o}", "operations", a);
  return 0;
}
