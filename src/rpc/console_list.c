/* console_list.c — the console's list methods (docs/CONSOLE.md):
 *  - xgr.console.sessions: a page of one owner's sessions, newest first, filtered by registry,
 *    status, creation time range and step, scanning at most 20,000 rows or 40 ms per call (a cursor
 *    goes on where the scan stopped), plus live counts: live sessions from the store (hibernated
 *    ones included), sessions and processes running from the engine; on its first page for a
 *    signed-in caller who is no operator, the other owners' sessions granted to it ("granted");
 *  - xgr.console.owners: the owners with live sessions in the store (only under --auth none);
 *  - xgr.console.info: how actions are authorized and the event stream's position.
 * Each reads through the node's queries (xgr/node.h): what is committed, and where it says what is
 * live, the node's combined view of the store and the engine; every size the client controls is
 * bounded.
 */
#include "rpc/console_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/alloc.h"
#include "util/clock.h"
#include "xgr/json.h"

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

/* The filters of one xgr.console.sessions call and what it has read so far. */
typedef struct scan {
  const char *registry, *status, *step;
  uint64_t limit, since, until;
  json_t *items;
  size_t scanned, probes;
  int64_t t0;
} scan;

/* Does session ns pass sc's filters other than the step (registry, status, creation time; a step
 * filter also needs it live)? */
static bool row_matches(const scan *sc, const xgr_node_session *ns) {
  const xgr_store_session *s = &ns->row;
  if (sc->registry && (!s->registry || strcmp(s->registry, sc->registry))) return false;
  if (sc->status && !xgr__rpc_session_status_is(ns, sc->status)) return false;
  if (sc->since && s->created_at < (int64_t)sc->since) return false;
  if (sc->until && s->created_at > (int64_t)sc->until) return false;
  return !sc->step || s->status == XGR_RESULT_RUNNING;
}

/* A list row of session ns (a new object): who owns it, what it runs, its status and times, and
 * what the engine runs of it now. */
static json_t *row_json(const xgr_node_session *ns) {
  const xgr_store_session *s = &ns->row;
  json_t *it = json_pack("{s:s, s:o, s:s, s:s, s:s, s:s, s:I, s:I, s:b}", "owner", s->owner, "rootPid",
                         xgr__rpc_u64_json(s->root_pid), "registry", s->registry ? s->registry : "", "ostcId",
                         s->ostc_id ? s->ostc_id : "", "ostcHash", s->ostc_hash ? s->ostc_hash : "", "status", xgr__rpc_session_status(s),
                         "createdAt", (json_int_t)s->created_at, "finishedAt", (json_int_t)s->finished_at,
                         "paused", s->paused);
  if (s->status == XGR_RESULT_RUNNING && ns->engine_live) {   /* what the engine runs of it now */
    json_object_set_new(it, "live", json_integer((json_int_t)ns->info.live));
    json_object_set_new(it, "running", json_integer((json_int_t)ns->info.running));
    json_object_set_new(it, "steps", json_integer((json_int_t)ns->info.steps));
  }
  return it;
}

/* Scan owner's sessions below cursor (0: from the newest) into sc->items. Returns 0 with *next the
 * rootPid to go on from (0: this owner is done), or an error code. */
static int scan_owner(xgr__console *c, scan *sc, const char *owner, uint64_t cursor, uint64_t *next, xgr_error *err) {
  bool more = true;
  *next = 0;
  while (more && json_array_size(sc->items) < sc->limit && sc->scanned < SCAN_MAX) {
    if (sc->scanned && xgr__mono_ms() - sc->t0 >= SCAN_MS) break;
    xgr_node_session *ss = NULL;
    size_t n = 0;
    int rc = xgr_node_sessions(c->n, owner, cursor, 1000, &ss, &n, err);
    if (rc) return rc;
    more = n == 1000;
    size_t i = 0;
    for (; i < n && json_array_size(sc->items) < sc->limit && sc->scanned < SCAN_MAX; i++) {
      const xgr_store_session *s = &ss[i].row;
      sc->scanned++;
      cursor = s->root_pid;
      if (!row_matches(sc, &ss[i])) continue;
      if (sc->step) {
        if (sc->probes++ >= STEP_PROBE_MAX) { /* bounded: the cursor resumes here */
          cursor = s->root_pid + 1;
          sc->scanned = SCAN_MAX;
          break;
        }
        if (!has_step(c, owner, s->root_pid, sc->step)) continue;
      }
      json_array_append_new(sc->items, row_json(&ss[i]));
    }
    if (i < n || sc->scanned >= SCAN_MAX || (sc->scanned && xgr__mono_ms() - sc->t0 >= SCAN_MS && more)) more = true;
    xgr_node_sessions_free(ss, n);
    if (!n) more = false;
  }
  if (more && cursor > 1) *next = cursor;
  return 0;
}

#define GRANTED_MAX 100         /* grants to the caller one call reads (the "granted" rows) */

static int by_created_desc(const void *a, const void *b) {
  const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
  json_int_t p = json_integer_value(json_object_get(x, "createdAt")), q = json_integer_value(json_object_get(y, "createdAt"));
  return p < q ? 1 : p > q ? -1 : 0;
}

/* The sessions of other owners granted to who that it may read now (unexpired READ grants, each
 * session has one, at most GRANTED_MAX grants read; only only_owner's unless NULL), filtered as sc says,
 * newest first: rows as the
 * list's, with "access", "rights" and "grantExpiresAt" (xgr__rpc_access_mark). The node decides
 * each (xgr_rpc_access): a grant revoked or expired since it was read is left out. */
static json_t *scan_granted(xgr__console *c, const xgr_rpc_caller *caller, const scan *sc, const char *who,
                            const char *only_owner) {
  json_t *rows = json_array();
  xgr_store_grant_filter f = {.grantee = who, .owner = only_owner, .expires_after = xgr_node_now(c->n), .limit = GRANTED_MAX};
  xgr_store_grant *g = NULL;
  size_t ng = 0;
  xgr_error e;
  if (xgr_node_grants(c->n, &f, &g, &ng, &e)) return rows;
  for (size_t i = 0; i < ng; i++) {
    /* one grant a session and grantee (the store's key): one row a session */
    if (!(g[i].rights & XGR_NODE_READ) || !strcasecmp(g[i].owner, who)) continue;
    xgr_node_access_info acc;
    xgr_node_session ns;
    if (xgr_rpc_access(c->n, caller, who, g[i].owner, g[i].root_pid, XGR_NODE_READ, "from", &acc, &e) ||
        xgr_node_session_get(c->n, g[i].owner, g[i].root_pid, &ns, &e))
      continue;
    if (row_matches(sc, &ns) && (!sc->step || has_step(c, ns.row.owner, ns.row.root_pid, sc->step))) {
      json_t *it = row_json(&ns);
      xgr__rpc_access_mark(it, &acc);
      json_array_append_new(rows, it);
    }
    xgr_node_session_clear(&ns);
  }
  xgr_node_grants_free(g, ng);
  xgr_json_array_sort(rows, by_created_desc);
  return rows;
}

#define OWNERS_MAX 100          /* owners one call lists (xgr.console.owners; the sessions of all owners) */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The owners the caller may see when the call names none, ascending (owned strings into
 * out[OWNERS_MAX], *n of them): under --auth none every owner with sessions in the store (at most
 * 100: those with live sessions first, then the others by address), and so for an operator
 * (xgr_node_is_operator); another signed-in caller or a permit's signer: itself, and its address
 * into grantee[64] (else ""): the sessions granted to it are listed beside (scan_granted). The
 * one place that says whose sessions a caller's list holds. */
static int visible_owners(xgr__console *c, const xgr_rpc_caller *caller, const json_t *o, char **out, size_t *n,
                          bool *partial, char grantee[64], xgr_error *err) {
  *n = 0;
  *partial = false;
  grantee[0] = '\0';
  bool all = caller && caller->auth_none;
  char who[64] = "";
  if (!all) {
    int rc = xgr_rpc_authorize(caller, o, XGR_RPC_ACT_READ, NULL, who, sizeof who, err);
    if (rc) return rc;
    if (!who[0]) return xgr__console_bad(err, "owner", "missing; expected %s", "the owner's address (0x + 40 hex)");
    all = xgr_node_is_operator(c->n, who);   /* an operator reads every owner's sessions */
  }
  if (all) {   /* the owners with live sessions first, then the others by address */
    xgr_store_owner_live *ol, *al;
    size_t k, ka;
    int rc = xgr_node_live_owners(c->n, OWNERS_MAX + 1, &ol, &k, err);
    if (rc) return rc;
    if ((rc = xgr_node_owners_after(c->n, NULL, OWNERS_MAX + 1, &al, &ka, err))) {
      xgr_node_owners_free(ol, k);
      return rc;
    }
    for (size_t i = 0; i < k + ka && *n < OWNERS_MAX; i++) {
      const char *own = i < k ? ol[i].owner : al[i - k].owner;
      bool dup = false;
      for (size_t j = 0; j < *n && !dup; j++) dup = !strcasecmp(out[j], own);
      if (dup) continue;
      out[*n] = xgr__xstrdup(own);
      xgr__rpc_lower(out[(*n)++]);
    }
    *partial = k > OWNERS_MAX || ka > OWNERS_MAX || (*n == OWNERS_MAX && ka > *n);
    xgr_node_owners_free(ol, k);
    xgr_node_owners_free(al, ka);
  } else {
    out[(*n)++] = xgr__xstrdup(who);
    snprintf(grantee, 64, "%s", who);
  }
  qsort(out, *n, sizeof *out, cmp_str);
  return 0;
}

XGR__RPCD_METHOD(xgr__console_m_sessions) {
  xgr__console *c = ctx;
  static const char *const keys[] = {"owner", "permit", "registry", "status", "step", "limit", "beforeRootPid",
                                     "beforeOwner", "since", "until", NULL};
  const json_t *o;
  int rc = xgr__console_named(params, keys, &o, err);
  if (rc) return rc;
  scan sc = {.t0 = xgr__mono_ms()};
  uint64_t before;
  const char *before_owner, *named;
  if ((rc = xgr__console_opt_str(o, "registry", 200, &sc.registry, err)) || (rc = xgr__console_opt_str(o, "status", 20, &sc.status, err)) ||
      (rc = xgr__console_opt_str(o, "step", 200, &sc.step, err)) || (rc = xgr__console_opt_uint(o, "limit", 200, 50, &sc.limit, err)) ||
      (rc = xgr__console_opt_uint(o, "beforeRootPid", UINT64_MAX, 0, &before, err)) ||
      (rc = xgr__console_opt_str(o, "beforeOwner", 64, &before_owner, err)) ||
      (rc = xgr__console_opt_uint(o, "since", INT64_MAX, 0, &sc.since, err)) || (rc = xgr__console_opt_uint(o, "until", INT64_MAX, 0, &sc.until, err)) ||
      (rc = xgr__console_opt_str(o, "owner", 64, &named, err)))
    return rc;
  if ((rc = xgr__rpc_status_check(sc.status, "status", true, err))) return rc;
  if (before_owner && !xgr_rpc_is_address(before_owner))
    return xgr__console_bad(err, "beforeOwner", "is \"%.80s\"; expected an address (0x + 40 hex): the nextOwner of the previous page", before_owner);
  if (!sc.limit) sc.limit = 50;
  if (sc.registry && !*sc.registry) sc.registry = NULL;
  if (sc.step && !*sc.step) sc.step = NULL;
  if (named && !*named) named = NULL;
  /* the owners read: the one named (authorized for READ), or every owner the caller may see */
  char *owners[OWNERS_MAX];
  size_t nown = 0;
  bool partial_owners = false;
  char grantee[64] = "";
  if (named || json_object_get(o, "from")) {
    char owner[64], who[64];
    if ((rc = xgr__console_read_owner_permit(c, caller, o, 0, owner, sizeof owner, NULL, NULL, who, err))) {
      /* another owner's list in permit mode: the sessions of it granted to the caller, if any */
      if (rc != XGR_EPERM || !caller || caller->auth_none || !who[0]) return rc;
      json_t *g = scan_granted(c, caller, &sc, who, owner);
      if (!json_array_size(g)) {
        json_decref(g);
        return rc;
      }
      *result = json_pack("{s:[], s:I, s:{}, s:I, s:[], s:b, s:o}", "items", "scanned", (json_int_t)0, "counts", "eventId",
                          (json_int_t)xgr__sse_last_id(c->hub), "owners", "ownersPartial", false, "granted", g);
      return 0;
    }
    owners[nown++] = xgr__xstrdup(owner);
    /* one's own sessions named: those granted to one go beside, as without a name */
    if (caller && !caller->auth_none && !strcasecmp(who, owner) && !xgr_node_is_operator(c->n, who))
      snprintf(grantee, sizeof grantee, "%s", who);
  } else if ((rc = visible_owners(c, caller, o, owners, &nown, &partial_owners, grantee, err))) {
    return rc;
  }
  sc.items = json_array();
  size_t first = 0;
  if (before_owner)   /* the page goes on in that owner */
    while (first < nown && strcasecmp(owners[first], before_owner) < 0) first++;
  uint64_t next = 0;
  const char *next_owner = NULL;
  xgr_node_owner_counts sum = {0};
  for (size_t k = 0; k < nown && !rc; k++) {
    xgr_node_owner_counts oc;
    if ((rc = xgr_node_owner_counts_get(c->n, owners[k], &oc, err))) break;
    sum.live_sessions += oc.live_sessions, sum.running_sessions += oc.running_sessions;
    sum.idle_sessions += oc.idle_sessions, sum.live_procs += oc.live_procs, sum.running_procs += oc.running_procs;
    sum.partial |= oc.partial, sum.engine_sessions = oc.engine_sessions;
    if (k < first || next_owner) continue;
    uint64_t cursor = before_owner && !strcasecmp(owners[k], before_owner) ? before : k == first ? before : 0;
    if (nown == 1) cursor = before;
    if ((rc = scan_owner(c, &sc, owners[k], cursor, &next, err))) break;
    if (next) next_owner = owners[k];
    else if (json_array_size(sc.items) >= sc.limit && k + 1 < nown) next_owner = owners[k + 1], next = 0;
  }
  if (rc) {
    json_decref(sc.items);
    for (size_t k = 0; k < nown; k++) free(owners[k]);
    return rc;
  }
  json_t *counts = json_pack("{s:I, s:I, s:I, s:I, s:I, s:b, s:I}", "liveSessions", (json_int_t)sum.live_sessions,
                             "runningSessions", (json_int_t)sum.running_sessions, "idleSessions",
                             (json_int_t)sum.idle_sessions, "liveProcesses", (json_int_t)sum.live_procs,
                             "runningProcesses", (json_int_t)sum.running_procs, "partial", sum.partial,
                             "engineSessions", (json_int_t)sum.engine_sessions);
  json_t *ol = json_array();
  for (size_t k = 0; k < nown; k++) json_array_append_new(ol, json_string(owners[k]));
  *result = json_pack("{s:o, s:I, s:o, s:I, s:o, s:b}", "items", sc.items, "scanned", (json_int_t)sc.scanned, "counts", counts,
                      "eventId", (json_int_t)xgr__sse_last_id(c->hub), "owners", ol, "ownersPartial", partial_owners);
  if (grantee[0] && !before_owner && !before)   /* the first page: the sessions granted to the caller beside */
    json_object_set_new(*result, "granted", scan_granted(c, caller, &sc, grantee, NULL));
  if (next_owner) {
    /* the next page: in next_owner below next ("0": from its newest) */
    json_object_set_new(*result, "nextBeforeRootPid", xgr__rpc_u64_json(next));
    if (nown > 1) json_object_set_new(*result, "nextOwner", json_string(next_owner));
  }
  for (size_t k = 0; k < nown; k++) free(owners[k]);
  return 0;
}

/* ---- xgr.console.owners ----------------------------------------------------------------------- */


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
