/* console_list.c — the console's list methods (docs/CONSOLE.md):
 *  - xgr.console.sessions: a page of one owner's sessions, newest first, filtered by registry,
 *    status, creation time range and step, scanning at most 20,000 rows or 40 ms per call (a cursor
 *    goes on where the scan stopped), plus live counts: live sessions from the store (hibernated
 *    ones included), sessions and processes running from the engine;
 *  - xgr.console.owners: the owners with live sessions in the store (only under --auth none);
 *  - xgr.console.info: how actions are authorized and the event stream's position.
 * Each reads through the node's queries (xgr/node.h): what is committed, and where it says what is
 * live, the node's combined view of the store and the engine; every size the client controls is
 * bounded.
 */
#include "rpc/console_impl.h"

#include <stdio.h>
#include <string.h>

#include "util/clock.h"

#define SCAN_MAX 20000          /* session rows one xgr.console.sessions call looks at */
#define SCAN_MS 40              /* ... and for at most this long (checked per 1,000 rows) */
#define STEP_PROBE_MAX 200      /* sessions whose processes a step filter reads per call */

/* Does a live process of session (owner, root) wait or run at step? */
static bool has_step(xgr__console *c, const char *owner, uint64_t root, const char *step) {
  xgr_store_proc *ps = NULL;
  size_t n = 0;
  xgr_error e;
  if (xgr_node_procs(c->n, owner, root, &ps, &n, &e)) return false;
  bool found = false;
  for (size_t i = 0; i < n && !found; i++)
    found = (ps[i].status == XGR_PROC_WAITING || ps[i].status == XGR_PROC_RUNNING) && ps[i].step_id &&
            !strcmp(ps[i].step_id, step);
  xgr_node_procs_free(ps, n);
  return found;
}

XGR__RPCD_METHOD(xgr__console_m_sessions) {
  xgr__console *c = ctx;
  static const char *const keys[] = {"owner", "permit", "registry", "status", "step", "limit", "beforeRootPid",
                                     "since", "until", NULL};
  const json_t *o;
  int rc = xgr__console_named(params, keys, &o, err);
  if (rc) return rc;
  char owner[64];
  /* no owner named: every owner's sessions for --auth none and operators (each row says whose),
   * the signer's own for anyone else; an owner named: that owner's, if the caller may */
  const json_t *ov = json_object_get(o, "owner"), *fv = json_object_get(o, "from");
  bool any_owner = false;
  if ((!ov || json_is_null(ov)) && (!fv || json_is_null(fv))) {
    char who[64] = "";
    if ((rc = xgr_rpc_authorize_permit(caller, o, XGR_RPC_ACT_READ, NULL, who, sizeof who, NULL, err))) return rc;
    any_owner = caller->auth_none || xgr_node_is_operator(c->n, who);
    if (!any_owner && !who[0]) return xgr__console_bad(err, "owner", "missing; expected %s", "the owner's address (0x + 40 hex)");
    snprintf(owner, sizeof owner, "%s", any_owner ? "" : who);
  } else if ((rc = xgr__console_read_owner(c, caller, o, 0, owner, sizeof owner, NULL, err))) {
    return rc;
  }
  const char *registry, *status, *step;
  uint64_t limit, before, since, until;
  if ((rc = xgr__console_opt_str(o, "registry", 200, &registry, err)) || (rc = xgr__console_opt_str(o, "status", 20, &status, err)) ||
      (rc = xgr__console_opt_str(o, "step", 200, &step, err)) || (rc = xgr__console_opt_uint(o, "limit", 200, 50, &limit, err)) ||
      (rc = xgr__console_opt_uint(o, "beforeRootPid", UINT64_MAX, 0, &before, err)) ||
      (rc = xgr__console_opt_uint(o, "since", INT64_MAX, 0, &since, err)) || (rc = xgr__console_opt_uint(o, "until", INT64_MAX, 0, &until, err)))
    return rc;
  if ((rc = xgr__rpc_status_check(status, "status", true, err))) return rc;
  if (!limit) limit = 50;
  if (registry && !*registry) registry = NULL;
  if (step && !*step) step = NULL;
  json_t *items = json_array();
  size_t scanned = 0, probes = 0;
  uint64_t cursor = before, next = 0;
  bool more = true;
  int64_t t0 = xgr__mono_ms();
  while (more && json_array_size(items) < limit && scanned < SCAN_MAX) {
    if (scanned && xgr__mono_ms() - t0 >= SCAN_MS) break;
    xgr_node_session *ss = NULL;
    size_t n = 0;
    if ((rc = xgr_node_sessions(c->n, any_owner ? NULL : owner, cursor, 1000, &ss, &n, err))) {
      json_decref(items);
      return rc;
    }
    more = n == 1000;
    size_t i = 0;
    for (; i < n && json_array_size(items) < limit && scanned < SCAN_MAX; i++) {
      const xgr_store_session *s = &ss[i].row;
      scanned++;
      cursor = s->root_pid;
      if (registry && (!s->registry || strcmp(s->registry, registry))) continue;
      bool live = s->status == XGR_RESULT_RUNNING;
      if (status && !xgr__rpc_session_status_is(&ss[i], status)) continue;
      if (since && s->created_at < (int64_t)since) continue;
      if (until && s->created_at > (int64_t)until) continue;
      if (step) {
        if (!live) continue;
        if (probes++ >= STEP_PROBE_MAX) { /* bounded: the cursor resumes here */
          cursor = s->root_pid + 1;
          scanned = SCAN_MAX;
          break;
        }
        if (!has_step(c, s->owner, s->root_pid, step)) continue;
      }
      json_t *it = json_pack("{s:s, s:o, s:s, s:s, s:s, s:s, s:I, s:I, s:b}", "owner", s->owner, "rootPid",
                             xgr__rpc_u64_json(s->root_pid), "registry", s->registry ? s->registry : "", "ostcId",
                             s->ostc_id ? s->ostc_id : "", "ostcHash", s->ostc_hash ? s->ostc_hash : "", "status", xgr__rpc_session_status(s),
                             "createdAt", (json_int_t)s->created_at, "finishedAt", (json_int_t)s->finished_at,
                             "paused", s->paused);
      if (live && ss[i].engine_live) {   /* what the engine runs of it now */
        const xgr_engine_session_info *info = &ss[i].info;
        json_object_set_new(it, "live", json_integer((json_int_t)info->live));
        json_object_set_new(it, "running", json_integer((json_int_t)info->running));
        json_object_set_new(it, "steps", json_integer((json_int_t)info->steps));
      }
      json_array_append_new(items, it);
    }
    if (i < n || scanned >= SCAN_MAX) more = true;
    xgr_node_sessions_free(ss, n);
    if (!n) more = false;
  }
  if (more && cursor > 1) next = cursor;
  /* live sessions: the store's (hibernated ones are live there, not in the engine); the other
   * counts: the engine's sessions (live ones) of this owner */
  xgr_node_owner_counts oc;
  if ((rc = xgr_node_owner_counts_get(c->n, any_owner ? NULL : owner, &oc, err))) {
    json_decref(items);
    return rc;
  }
  json_t *counts = json_pack("{s:I, s:I, s:I, s:I, s:I, s:b, s:I}", "liveSessions", (json_int_t)oc.live_sessions,
                             "runningSessions", (json_int_t)oc.running_sessions, "idleSessions",
                             (json_int_t)oc.idle_sessions, "liveProcesses", (json_int_t)oc.live_procs,
                             "runningProcesses", (json_int_t)oc.running_procs, "partial", oc.partial,
                             "engineSessions", (json_int_t)oc.engine_sessions);
  *result = json_pack("{s:o, s:I, s:o, s:I}", "items", items, "scanned", (json_int_t)scanned, "counts", counts,
                      "eventId", (json_int_t)xgr__sse_last_id(c->hub));
  if (next) json_object_set_new(*result, "nextBeforeRootPid", xgr__rpc_u64_json(next));
  return 0;
}

/* ---- xgr.console.owners ----------------------------------------------------------------------- */

#define OWNERS_MAX 100          /* owners one xgr.console.owners call lists */

/* The owners with live sessions in the store (at most 100, most live sessions first), so the page
 * has somewhere to start; hibernated sessions count (they are live in the store, not in the
 * engine). "partial": more owners have live sessions than are listed. Only under --auth none:
 * with permits one reads one's own sessions. */
static const char *const no_keys[] = {NULL};   /* no parameters (from aside) */

XGR__RPCD_METHOD(xgr__console_m_owners) {
  xgr__console *c = ctx;
  const json_t *o;
  int rc = xgr__rpc_named(params, no_keys, &o, err);
  if (rc) return rc;
  if (!caller || !caller->auth_none) {
    xgr_error_set(err, XGR_EPERM, "from", "listing every owner needs --auth none; with permits one reads one's own sessions");
    return XGR_EPERM;
  }
  xgr_store_owner_live *ol;
  size_t n;
  rc = xgr_node_live_owners(c->n, OWNERS_MAX + 1, &ol, &n, err);
  if (rc) return rc;
  json_t *items = json_array();
  for (size_t i = 0; i < n && i < OWNERS_MAX; i++) {
    char owner[64];
    snprintf(owner, sizeof owner, "%s", ol[i].owner);
    xgr__rpc_lower(owner);
    json_array_append_new(items, json_pack("{s:s, s:I}", "owner", owner, "liveSessions", (json_int_t)ol[i].live));
  }
  *result = json_pack("{s:o, s:b}", "items", items, "partial", n > OWNERS_MAX);
  xgr_node_owners_free(ol, n);
  return 0;
}

/* ---- xgr.console.info ---------------------------------------------------------------------------- */

/* What the pages need to know first: how actions are authorized, and the event stream's position. */
XGR__RPCD_METHOD(xgr__console_m_info) {
  xgr__console *c = ctx;
  const json_t *o;
  int rc = xgr__rpc_named(params, no_keys, &o, err);
  if (rc) return rc;
  *result = json_pack("{s:s, s:I}", "auth", caller && caller->auth_none ? "none" : "permit", "eventId",
                      (json_int_t)xgr__sse_last_id(c->hub));
  return 0;
}
