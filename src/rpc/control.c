/* control.c — acting on running sessions: kill, pause and resume (a process or the whole
 * session), xgr_control (the public reference's kill), wakeUpProcess in PID and step mode, and the
 * two read-only probes of the public reference, sessionAlive and stepExecuted (which also take
 * their positional arrays [owner, sessionId(, iteration)]).
 */
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_impl.h"
#include "xgr/auth.h"
#include "xgr/secp.h"
#include "xgr/xrc_types.h"

typedef enum ctl_kind { C_KILL, C_PAUSE, C_RESUME } ctl_kind;

int xgr__rpc_control_caller(const xgr_rpc_caller *caller, const json_t *o, const char *owner, char *who, size_t n,
                            xgr_permit *p, xgr_error *err) {
  /* a signed-in address other than the owner is not refused here: the node decides, below */
  return xgr_rpc_authorize_permit(caller, o, XGR_RPC_ACT_CONTROL, caller && caller->signed_in ? NULL : owner, who, n,
                                  p, err);
}

/* Who acts, when a permit or a console sign-in says so (identify() puts either in p->from): that
 * address, or NULL (--auth none: the owner, checked by xgr_rpc_authorize_permit). */
static const char *signer_of(const xgr_rpc_caller *caller, const xgr_permit *p) {
  return p->kind || (caller && !caller->auth_none && caller->signed_in) ? p->from : NULL;
}

int xgr__rpc_control_access(xgr_rpcd *d, const xgr_rpc_caller *caller, const xgr_permit *p, const char *owner,
                            uint64_t root, bool *delegated, xgr_error *err) {
  *delegated = false;
  const char *signer = signer_of(caller, p);
  if (!signer || !strcasecmp(signer, owner)) return 0;
  int rc = xgr_node_access(d->n, signer, owner, root, XGR_NODE_CONTROL, p->kind ? "permit.message.from" : "owner", NULL,
                           err);
  if (!rc) *delegated = p->kind != 0;
  return rc;
}

int xgr__rpc_check_control(const xgr_permit *p, const char *action, uint64_t root, const char *step,
                           const char *owner, bool delegated, xgr_error *err) {
  xgr_permit as_runner;
  if (delegated) {   /* the signer acts as the runner: the gate's "from is the runner" check holds */
    as_runner = *p;
    memcpy(as_runner.from, as_runner.runner, sizeof as_runner.from);
    p = &as_runner;
  }
  return xgr_auth_check_control(p, action, root, step, owner, err);
}

/* Permit mode: the control permit names this call (action, root, step) and the session's owner;
 * the session must be live in the engine (so a call refused for that uses nothing up); then the
 * permit is used up (its digest is kept in the store until it expires). delegated: the node gave
 * the signer (a ControlPermitV2's from, not its runner) the right this action needs
 * (xgr_node_access: an operator, or a WRITE grantee's wake), so it signs as the runner could. */
static int use_control_permit(xgr_rpcd *d, const xgr_rpc_caller *caller, const xgr_permit *p, const char *action,
                              const char *owner, uint64_t root, const char *step, bool delegated, xgr_error *err) {
  int rc = xgr__rpc_check_control(p, action, root, step, owner, delegated, err);
  if (rc) return rc;
  if (!xgr_node_live(d->n, owner, root, true, NULL))   /* a hibernated session is loaded */
    return xgr__rpc_fail(err, XGR_ENOTFOUND, "permit.message.sessionId",
                         "no live session %s/%llu (the permit was not used)", owner, (unsigned long long)root);
  return xgr_auth_consume(caller->auth, p, err);
}

/* An authorized call on session (owner, root): who acts and the digest of the permit used go into
 * cr (the audit trail, written by the node with the change) and into the request's log line.
 * digest (67 bytes) holds the digest's text while cr is used. */
static void act_as(const xgr_rpc_caller *caller, const xgr_permit *p, const char *who, const char *owner, uint64_t root,
                   xgr_node_ctl *cr, char *digest) {
  cr->actor = xgr_rpc_actor(caller, p->kind ? p->from : who);
  digest[0] = '\0';
  if (p->kind) xgr_hex_encode(p->digest, 32, digest);
  cr->permit = digest[0] ? digest : NULL;
  xgr_rpc_log_subject(caller, cr->actor, owner, root);
}

/* The parameter keys each method reads (xgr__rpc_named): the target (xgr__rpc_target), the owner
 * (xgr__rpc_owner) and the permit, and what the method adds. */
#define TARGET_KEYS "pid", "processId", "rootPid", "sessionId"
#define OWNER_KEYS "owner", "runner"
static const char *const control_keys[] = {OWNER_KEYS, TARGET_KEYS, "permit", NULL};
static const char *const xcontrol_keys[] = {"action", OWNER_KEYS, TARGET_KEYS, "permit", NULL};
static const char *const wake_keys[] = {"stepId", "payload", OWNER_KEYS, TARGET_KEYS, "permit", NULL};
static const char *const retry_keys[] = {"payload", OWNER_KEYS, "pid", "processId", "permit", NULL};

static int control(xgr_rpcd *d, const xgr_rpc_caller *caller, const json_t *params, ctl_kind kind, json_t **result,
                   xgr_error *err) {
  const json_t *o;
  int rc = xgr__rpc_named(params, control_keys, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64];
  const char *opath, *tpath;
  if ((rc = xgr__rpc_owner(o, xgr_rpc_claimed(caller, o), owner, sizeof owner, &opath, err))) return rc;
  uint64_t root, iter;
  if ((rc = xgr__rpc_target(o, &root, &iter, &tpath, err))) return rc;
  xgr_permit permit;
  if ((rc = xgr__rpc_control_caller(caller, o, owner, who, sizeof who, &permit, err))) return rc;
  xgr_rpc_log_subject(caller, xgr_rpc_actor(caller, permit.kind ? permit.from : who), owner, root);
  bool delegated;   /* a signer other than the owner: an operator (the node decides) */
  if ((rc = xgr__rpc_control_access(d, caller, &permit, owner, root, &delegated, err))) return rc;
  if (permit.kind && (rc = use_control_permit(d, caller, &permit, kind == C_KILL ? "kill" : kind == C_PAUSE ? "pause" : "resume",
                                               owner, root, NULL, delegated, err)))
    return rc;
  /* here, or on the cluster node that holds the session (lease.c) */
  xgr_node_ctl cr = {.op = kind == C_KILL ? XGR_NODE_CTL_KILL : kind == C_PAUSE ? XGR_NODE_CTL_PAUSE : XGR_NODE_CTL_RESUME,
                     .owner = owner, .root = root, .iter = iter, .payload = xgr_value_null()};
  char digest[67];
  act_as(caller, &permit, who, owner, root, &cr, digest);
  rc = xgr_node_control(d->n, &cr, NULL, err);
  if (rc) {
    if (rc == XGR_ENOTFOUND && !err->path[0]) snprintf(err->path, sizeof err->path, "%s", tpath);
    return xgr__rpc_code(rc, err);
  }
  *result = json_pack("{s:b, s:s, s:o}", "ok", 1, "owner", owner, "pid", xgr__rpc_pid_json(root, iter));
  return 0;
}

XGR__RPCD_METHOD(xgr__rpcd_m_kill) { return control(ctx, caller, params, C_KILL, result, err); }
XGR__RPCD_METHOD(xgr__rpcd_m_pause) { return control(ctx, caller, params, C_PAUSE, result, err); }
XGR__RPCD_METHOD(xgr__rpcd_m_resume) { return control(ctx, caller, params, C_RESUME, result, err); }

XGR__RPCD_METHOD(xgr__rpcd_m_control) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr__rpc_named(params, xcontrol_keys, &o, err);
  if (rc) return rc;
  const char *action = NULL;
  if ((rc = xgr__rpc_opt_str(o, "action", &action, err))) return rc;
  if (action && strcmp(action, "kill"))
    return xgr__rpc_fail(err, XGR_ESCHEMA, "action",
                         "is \"%.40s\"; only \"kill\" is supported (pause and resume " "are xgr.pause / xgr.resume)",
                         action);
  char who[64] = "", owner[64];
  const char *opath, *tpath;
  if ((rc = xgr__rpc_owner(o, xgr_rpc_claimed(caller, o), owner, sizeof owner, &opath, err))) return rc;
  uint64_t root = 0, iter = 0;
  /* the public form may name the session only in the permit: its sessionId is the root */
  bool signed_root = xgr__rpc_permits(caller) && !json_object_get(o, "pid") && !json_object_get(o, "processId") &&
                     !json_object_get(o, "rootPid") && !json_object_get(o, "sessionId");
  if (signed_root) tpath = "permit.message.sessionId";
  else if ((rc = xgr__rpc_target(o, &root, &iter, &tpath, err)))
    return rc;
  xgr_permit permit;
  if ((rc = xgr__rpc_control_caller(caller, o, owner, who, sizeof who, &permit, err))) return rc;
  xgr_rpc_log_subject(caller, xgr_rpc_actor(caller, permit.kind ? permit.from : who), owner, root);
  if (signed_root) root = permit.session_id;
  bool delegated;   /* an operator's kill (xgr_node_access) */
  if ((rc = xgr__rpc_control_access(d, caller, &permit, owner, root, &delegated, err))) return rc;
  if (permit.kind && (rc = use_control_permit(d, caller, &permit, "kill", owner, root, NULL, delegated, err))) return rc;
  xgr_engine_session_info info = {0};
  size_t affected = 0;
  if (xgr_node_live(d->n, owner, root, true, &info)) affected = info.live;
  xgr_node_ctl cr = {.op = XGR_NODE_CTL_KILL, .owner = owner, .root = root, .payload = xgr_value_null()};
  char digest[67];
  act_as(caller, &permit, who, owner, root, &cr, digest);
  if ((rc = xgr_node_control(d->n, &cr, NULL, err))) {
    if (rc == XGR_ENOTFOUND && !err->path[0]) snprintf(err->path, sizeof err->path, "%s", tpath);
    return xgr__rpc_code(rc, err);
  }
  *result = json_pack("{s:b, s:s, s:I, s:s, s:s, s:I}", "ok", 1, "owner", owner, "processId", (json_int_t)root,
                      "action", "kill", "status", "killed", "affected", (json_int_t)affected);
  return 0;
}

/* xgr.retry (issue 36): an aborted process of a live session runs its step again, as a new process
 * in the same join scope (docs/SEMANTICS.md "Retry and fork"). Who may: as for kill, the owner and
 * xgrd's operators (a ControlPermitV2 from the operator, runner the owner); a permit's action is "retry". The session core decides (xgr_session_retry); its refusals name the
 * field that decided: "pid" (not aborted on a hard error or a kill, or the join it fed closed),
 * "sessionId" (the session has ended). */
XGR__RPCD_METHOD(xgr__rpcd_m_retry) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr__rpc_named(params, retry_keys, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64];
  const char *opath, *tpath;
  if ((rc = xgr__rpc_owner(o, xgr_rpc_claimed(caller, o), owner, sizeof owner, &opath, err))) return rc;
  uint64_t root, iter;
  if ((rc = xgr__rpc_target(o, &root, &iter, &tpath, err))) return rc;
  if (!iter)
    return xgr__rpc_fail(err, XGR_ESCHEMA, tpath, "names session %llu; a retry names one process \"<rootPid>:<iter>\"",
                         (unsigned long long)root);
  const json_t *payload = json_object_get(o, "payload");
  if (payload && !json_is_null(payload) && !json_is_object(payload))
    return xgr__rpc_fail(err, XGR_ESCHEMA, "payload",
                         "is not an object; expected {...}, the payload the step runs with (none: its last input payload)");
  xgr_permit permit;
  if ((rc = xgr__rpc_control_caller(caller, o, owner, who, sizeof who, &permit, err))) return rc;
  xgr_rpc_log_subject(caller, xgr_rpc_actor(caller, permit.kind ? permit.from : who), owner, root);
  bool delegated;   /* an operator's retry (xgr_node_access CONTROL) */
  if ((rc = xgr__rpc_control_access(d, caller, &permit, owner, root, &delegated, err))) return rc;
  if (permit.kind) {   /* an ended session is refused before the permit is used up */
    if ((rc = xgr__rpc_check_control(&permit, "retry", root, NULL, owner, delegated, err))) return rc;
    xgr_node_session s;
    xgr_error se;
    if (!xgr_node_session_get(d->n, owner, root, &s, &se)) {
      int st = s.row.status;
      xgr_node_session_clear(&s);
      if (st != XGR_RESULT_RUNNING)
        return xgr__rpc_fail(err, XGR_ESTATE, "sessionId", "session %llu has ended (%s); only a live session's "
                             "processes can be retried (the permit was not used)", (unsigned long long)root,
                             xgr_session_result_name((xgr_session_result)st));
    }
    if ((rc = use_control_permit(d, caller, &permit, "retry", owner, root, NULL, delegated, err))) return rc;
  }
  xgr_value pv = xgr_value_null();
  if (payload && json_is_object(payload)) {
    xgr_value_from_json(payload, 0, &pv, err);
    if (xgr_value_check_list_cap(pv, 64, err)) {
      xgr_value_release(pv);
      snprintf(err->path, sizeof err->path, "payload");
      return XGR_ELIMIT;
    }
  }
  xgr_node_ctl cr = {.op = XGR_NODE_CTL_RETRY, .owner = owner, .root = root, .iter = iter, .payload = pv,
                     .payload_json = payload && json_is_object(payload) ? payload : NULL};
  char digest[67];
  act_as(caller, &permit, who, owner, root, &cr, digest);
  size_t new_iter = 0;
  rc = xgr_node_control(d->n, &cr, &new_iter, err);
  xgr_value_release(pv);
  if (rc) {
    if (!err->path[0] || !strcmp(err->path, "pid")) snprintf(err->path, sizeof err->path, "%s", tpath);
    return xgr__rpc_code(rc, err);
  }
  *result = json_pack("{s:b, s:s, s:o, s:o}", "ok", 1, "owner", owner, "pid", xgr__rpc_pid_json(root, iter), "newPid",
                      xgr__rpc_pid_json(root, (uint64_t)new_iter));
  return 0;
}

/* xgr_wakeUpProcess (public reference §12). PID mode: "processId" names one waiting process of
 * the owner's. Step mode: every process of the session waiting at the step; with a permit the
 * request may name neither processId nor stepId: the session (sessionId), the runner and the step
 * come from the permit's message. In PID mode the permit signs no step. */
XGR__RPCD_METHOD(xgr__rpcd_m_wake) {
  xgr_rpcd *d = ctx;
  const json_t *o;
  int rc = xgr__rpc_named(params, wake_keys, &o, err);
  if (rc) return rc;
  char who[64] = "", owner[64];
  const char *opath, *step = NULL;
  xgr_permit permit;
  if ((rc = xgr__rpc_opt_str(o, "stepId", &step, err))) return rc;
  const json_t *payload = json_object_get(o, "payload");
  if (payload && !json_is_null(payload) && !json_is_object(payload))
    return xgr__rpc_fail(err, XGR_ESCHEMA, "payload",
                         "is not an object; expected {...} merged into the resume payload");
  const json_t *pidv = json_object_get(o, "processId");
  if (!pidv || json_is_null(pidv)) pidv = json_object_get(o, "pid");
  bool pid_mode = pidv && !json_is_null(pidv), permits = xgr__rpc_permits(caller);
  if (pid_mode && step)
    return xgr__rpc_fail(err, XGR_ESCHEMA, "stepId",
                         "is set together with processId; PID mode and step mode exclude each other");
  if (!pid_mode && !step && !permits)   /* without permits nothing else can name the step */
    return xgr__rpc_fail(err, XGR_ESCHEMA, "processId",
                         "missing; expected \"processId\" (PID mode) or \"stepId\" with \"sessionId\" (step mode)");
  uint64_t root = 0, iter = 0;
  if (pid_mode) {
    if (!json_is_string(pidv) || xgr_pid_parse(json_string_value(pidv), &root, &iter) || !root || !iter)
      return xgr__rpc_fail(err, XGR_ESCHEMA, "processId",
                           "is not \"<rootPid>:<iter>\"; PID mode wakes one process");
  } else {
    static const char *const keys[] = {"sessionId", "rootPid", NULL};
    const char *k = xgr__rpc_first_key(o, keys);
    const json_t *v = json_object_get(o, k);
    if ((!v || json_is_null(v)) && permits) root = 0;   /* the signed root, below */
    else if (!v || json_is_null(v))
      return xgr__rpc_fail(err, XGR_ESCHEMA, "sessionId",
                           "missing; step mode needs the root session id");
    else if ((rc = xgr__rpc_uint(v, k, &root, err)))
      return rc;
  }
  /* who may: checked once the request is well-formed */
  if ((rc = xgr_rpc_authorize_permit(caller, o, XGR_RPC_ACT_WAKE, NULL, who, sizeof who, &permit, err))) return rc;
  if (!pid_mode && !step) {   /* step mode named by the permit alone */
    if (!permit.step_id[0])
      return xgr__rpc_fail(err, XGR_ESCHEMA, "permit.message.stepId",
                           "is empty and the request has no \"processId\"; a step-mode wake signs the step to wake "
                           "in the permit's stepId, a PID-mode wake names \"processId\"");
    step = permit.step_id;
  }
  if ((rc = xgr__rpc_owner(o, permit.kind ? permit.runner : who, owner, sizeof owner, &opath, err))) return rc;
  if (!root) root = permit.session_id;
  xgr_rpc_log_subject(caller, xgr_rpc_actor(caller, permit.kind ? permit.from : who[0] ? who : owner), owner, root);
  /* PID mode is for the owner alone: when the request did not name an owner (so the caller is the
   * owner it asks for) and the caller has no such session but another owner does
   * (xgr_node_live_elsewhere: the 1,000 owners with the most live sessions; a session of an owner
   * beyond them is answered as not found), the caller is not that session's owner */
  const json_t *ov = json_object_get(o, "owner"), *rv = json_object_get(o, "runner");
  bool named = (ov && !json_is_null(ov)) || (rv && !json_is_null(rv)) ||
               (permit.kind && strcmp(permit.from, permit.runner));
  if (pid_mode && !named && !xgr_node_live(d->n, owner, root, false, NULL) && xgr_node_live_elsewhere(d->n, owner, root))
    return xgr__rpc_fail(err, XGR_EPERM, "processId",
                         "session %llu is another owner's (%s has none live): only a session's owner may wake a "
                         "process by pid (delegation through __wakeUp allow lists works in step mode only)",
                         (unsigned long long)root, owner);
  /* a signer other than the session's owner wakes as the owner could when the node says it may
   * (WRITE: a grantee or an operator); otherwise only a step-mode wake goes on, and the step's
   * allow lists decide (the engine) */
  bool delegated = false;
  const char *signer = signer_of(caller, &permit);
  if (signer && strcasecmp(signer, owner)) {
    xgr_error ae;
    xgr_error_clear(&ae);
    int arc = xgr_node_access(d->n, signer, owner, root, XGR_NODE_WRITE, "permit.message.from", NULL, &ae);
    if (!arc) delegated = true;
    else if (pid_mode || arc != XGR_EPERM) {
      *err = ae;
      return arc;
    }
  }
  if (permit.kind && (rc = use_control_permit(d, caller, &permit, "wake", owner, root, pid_mode ? NULL : step, delegated, err)))
    return rc;
  xgr_value pv = xgr_value_null();
  if (payload && json_is_object(payload)) {
    xgr_value_from_json(payload, 0, &pv, err);
    if (xgr_value_check_list_cap(pv, 64, err)) {
      xgr_value_release(pv);
      snprintf(err->path, sizeof err->path, "payload");
      return XGR_ELIMIT;
    }
  }
  const char *callr = delegated ? owner : who[0] ? who : owner;   /* a WRITE holder wakes as the owner */
  size_t woken = 0;
  xgr_node_ctl cr = {.op = pid_mode ? XGR_NODE_CTL_WAKE_PID : XGR_NODE_CTL_WAKE_STEP, .owner = owner, .root = root,
                     .iter = iter, .step = step, .caller = callr, .payload = pv,
                     .payload_json = payload && json_is_object(payload) ? payload : NULL};
  char digest[67];
  act_as(caller, &permit, who[0] ? who : callr, owner, root, &cr, digest);   /* the actor: who woke, not whom as */
  rc = xgr_node_control(d->n, &cr, &woken, err);
  xgr_value_release(pv);
  if (rc) {
    if (!err->path[0])
      snprintf(err->path, sizeof err->path, "%s",
               pid_mode ? "processId" : json_object_get(o, "stepId") ? "stepId" : "permit.message.stepId");
    return xgr__rpc_code(rc, err);
  }
  *result =
      json_pack("{s:b, s:s, s:I, s:o, s:s, s:I}", "ok", 1, "owner", owner, "sessionId", (json_int_t)root, "rootPid",
                xgr__rpc_u64_json(root), "mode", pid_mode ? "pid" : "step", "woken", (json_int_t)woken);
  return 0;
}

/* owner, sessionId[, iteration] from a positional array or an object. */
static int positional(const json_t *params, bool with_iter, char *owner, size_t n, uint64_t *root, uint64_t *iter,
                      xgr_error *err) {
  const json_t *ov, *sv, *iv = NULL;
  const char *op = "[0]", *sp = "[1]", *ip = "[2]";
  if (json_is_array(params) && !(json_array_size(params) == 1 && json_is_object(json_array_get(params, 0)))) {
    size_t want = with_iter ? 3 : 2;
    if (json_array_size(params) != want) {   /* a surplus element is named: it is not ignored */
      char at[24] = "";
      if (json_array_size(params) > want) snprintf(at, sizeof at, "[%zu]", want);
      return xgr__rpc_fail(err, XGR_ESCHEMA, at,
                           "params has %zu elements; expected [owner, sessionId%s]", json_array_size(params),
                           with_iter ? ", iteration" : "");
    }
    ov = json_array_get(params, 0);
    sv = json_array_get(params, 1);
    if (with_iter) iv = json_array_get(params, 2);
  } else {
    static const char *const keys[] = {"owner", "sessionId", "rootPid", "iteration", NULL};
    static const char *const keys2[] = {"owner", "sessionId", "rootPid", NULL};
    const json_t *o;
    int rc = xgr__rpc_named(params, with_iter ? keys : keys2, &o, err);
    if (rc) return rc;
    ov = json_object_get(o, "owner");
    sv = json_object_get(o, "sessionId");
    if (!sv) sv = json_object_get(o, "rootPid");
    if (with_iter) iv = json_object_get(o, "iteration");
    op = "owner", sp = "sessionId", ip = "iteration";
  }
  if (!json_is_string(ov) || !xgr_rpc_is_address(json_string_value(ov))) {
    char *t = ov ? json_dumps(ov, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    xgr_error_set(err, XGR_ESCHEMA, op, "is %.60s; expected the owner's address (0x + 40 hex)", t ? t : "missing");
    free(t);
    return XGR_ESCHEMA;
  }
  snprintf(owner, n, "%s", json_string_value(ov));
  xgr__rpc_lower(owner);
  int rc = xgr__rpc_uint(sv, sp, root, err);
  if (!rc && with_iter) rc = xgr__rpc_uint(iv, ip, iter, err);
  return rc;
}

XGR__RPCD_METHOD(xgr__rpcd_m_alive) {
  xgr_rpcd *d = ctx;
  char owner[64];
  uint64_t root, iter;
  int rc = positional(params, false, owner, sizeof owner, &root, &iter, err);
  if (rc) return rc;
  bool alive = xgr_node_live(d->n, owner, root, false, NULL);   /* hibernated: the store says */
  if (alive) {   /* a session whose end is committed is over, even before the engine marks it finished */
    xgr_node_session s;
    xgr_error se;
    if (!xgr_node_session_get(d->n, owner, root, &s, &se)) {
      alive = s.row.status == XGR_RESULT_RUNNING;
      xgr_node_session_clear(&s);
    }
  }
  *result = json_boolean(alive);
  return 0;
}

XGR__RPCD_METHOD(xgr__rpcd_m_step_executed) {
  xgr_rpcd *d = ctx;
  char owner[64];
  uint64_t root, iter;
  int rc = positional(params, true, owner, sizeof owner, &root, &iter, err);
  if (rc) return rc;
  xgr_store_proc *ps = NULL;
  size_t n = 0;
  if ((rc = xgr_node_procs(d->n, owner, root, &ps, &n, err))) return xgr__rpc_code(rc, err);
  json_t *r = NULL;
  for (size_t i = 0; i < n && !r; i++)
    if (ps[i].iter == iter) r = json_boolean(ps[i].status == XGR_PROC_DONE || ps[i].status == XGR_PROC_ABORTED);
  xgr_node_procs_free(ps, n);
  if (!r) {   /* the process row may have left with the TTL; its history row says it ran */
    xgr_store_hist *hs = NULL;
    if (!xgr_node_history(d->n, owner, root, &hs, &n, err)) {
      for (size_t i = 0; i < n && !r; i++)
        if (hs[i].iter == iter) r = json_true();
      xgr_node_history_free(hs, n);
    }
  }
  *result = r ? r : json_null();
  return 0;
}

