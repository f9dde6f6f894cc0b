/* fork.c — forks (issue 36; docs/SEMANTICS.md "Retry and fork"): what a new session forked from a
 * recorded step of another session starts with, and the record of the fork once it started.
 *
 * The source: a history row of the session (its process ran: a recorded step), by pid or by step id
 * (its latest run). Its input payload is what its process started with: the effective payload of the
 * step that created it (its parent's history row), and for a join target the pieces its join took
 * (its stored join state, while its process row is kept). A wake-up's payload merged into a waiting
 * process is not part of it (the audit trail keeps only its keys): the caller gives the payload
 * then. The start process's input is not recorded either (its row holds its effective payload once
 * it ran). The record: sessions.forked_from of the new session and an audit entry on both sessions,
 * written in the commit of the new session's row (xgr_engine_fork, made here for xgr_node_enqueue),
 * so no crash leaves a forked session without it. The node decides what it starts from and records
 * it; the front end asks for the start.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/node_impl.h"
#include "util/alloc.h"

/* The pieces of a stored join state (its "inbox", in `from` order) merged over payload, without their
 * _from/_when keys. */
static void merge_pieces(json_t *payload, const char *join_text) {
  json_t *j = join_text ? json_loads(join_text, 0, NULL) : NULL;
  size_t i;
  json_t *piece;
  json_array_foreach(json_object_get(j, "inbox"), i, piece) {
    if (!json_is_object(piece)) continue;
    const char *k;
    json_t *v;
    json_object_foreach(piece, k, v) if (strcmp(k, "_from") && strcmp(k, "_when")) json_object_set(payload, k, v);
  }
  json_decref(j);
}

int xgr_node_fork_source(xgr_node *n, const char *owner, uint64_t root, uint64_t iter, const char *step_id,
                         bool need_payload, xgr_node_fork_src *out, xgr_error *err) {
  memset(out, 0, sizeof *out);
  xgr_store_session row;
  int rc = xgr_store_session_get(n->st, owner, root, &row, err);
  if (rc) {
    if (rc == XGR_ENOTFOUND)
      xgr_error_set(err, XGR_ENOTFOUND, "sessionId", "no session %s/%" PRIu64 " to fork from", owner, root);
    return rc;
  }
  snprintf(out->registry, sizeof out->registry, "%s", row.registry ? row.registry : "");
  snprintf(out->ostc_id, sizeof out->ostc_id, "%s", row.ostc_id ? row.ostc_id : "");
  snprintf(out->bundle_hash, sizeof out->bundle_hash, "%s", row.bundle_hash ? row.bundle_hash : "");
  out->status = row.status;
  xgr_store_session_clear(&row);
  xgr_store_hist *hs = NULL;
  size_t nh = 0;
  if ((rc = xgr_store_history(n->st, owner, root, &hs, &nh, err))) return rc;
  const xgr_store_hist *h = NULL;
  for (size_t i = 0; i < nh; i++)   /* by pid: its row; by step: the latest run of the step */
    if (iter ? hs[i].iter == iter : !strcmp(hs[i].step_id, step_id)) h = &hs[i];
  if (!h) {
    char pid[48];
    xgr_pid_format(root, iter, pid, sizeof pid);
    rc = iter ? xgr_error_set(err, XGR_ENOTFOUND, "pid", "process %s has no recorded step (it never ran, or its "
                              "history left with the retention time)", pid)
              : xgr_error_set(err, XGR_ENOTFOUND, "stepId", "step \"%s\" has no recorded run in session %" PRIu64,
                              step_id, root);
    xgr_store_hists_free(hs, nh);
    return rc;
  }
  out->iter = h->iter;
  out->at = h->finished_at;
  snprintf(out->step_id, sizeof out->step_id, "%s", h->step_id);
  uint64_t parent = h->parent_iter;
  if (need_payload) {
    const xgr_store_hist *ph = NULL;
    for (size_t i = 0; i < nh; i++)
      if (hs[i].iter == parent) ph = &hs[i];
    json_t *pl = ph && ph->payload ? json_loads(ph->payload, 0, NULL) : NULL;
    if (!json_is_object(pl)) {
      json_decref(pl);
      char pid[48];
      xgr_pid_format(root, h->iter, pid, sizeof pid);
      rc = xgr_error_set(err, XGR_ENOTFOUND, "payload", "the input payload of %s (step \"%s\") is not recorded (%s); "
                         "give the payload to fork with", pid, h->step_id,
                         parent ? "its parent's history row has no payload" : "it is the start step");
      xgr_store_hists_free(hs, nh);
      return rc;
    }
    xgr_store_proc *ps = NULL;
    size_t np = 0;
    if (!xgr_store_procs(n->st, owner, root, &ps, &np, err)) {
      for (size_t i = 0; i < np; i++)
        if (ps[i].iter == h->iter && ps[i].from_group) merge_pieces(pl, ps[i].join);
      xgr_store_procs_free(ps, np);
    }
    out->payload = pl;
  }
  xgr_store_hists_free(hs, nh);
  return 0;
}

void xgr_node_fork_src_clear(xgr_node_fork_src *s) {
  json_decref(s->payload);
  s->payload = NULL;
}

int xgr__node_fork_make(xgr_node *n, const xgr_node_fork_rec *r, uint64_t new_root, const char *new_bundle_hash,
                        xgr_engine_fork *out) {
  const xgr_node_fork_src *s = r->src;
  memset(out, 0, sizeof *out);
  json_t *from = json_pack("{s:s, s:I, s:I, s:s, s:s}", "owner", r->owner, "rootPid", (json_int_t)r->root, "iter",
                           (json_int_t)s->iter, "step", s->step_id, "bundleHash", s->bundle_hash);
  json_t *fd = json_pack("{s:O, s:s, s:b}", "from", from, "bundleHash", new_bundle_hash, "payloadGiven", r->payload_given);
  json_t *sd = json_pack("{s:I, s:s, s:{s:s, s:I}, s:s}", "iter", (json_int_t)s->iter, "step", s->step_id, "forkedTo",
                         "owner", r->owner, "rootPid", (json_int_t)new_root, "bundleHash", new_bundle_hash);
  const char *actor = r->actor ? r->actor : "operator";
  out->forked_from = json_dumps(from, JSON_COMPACT);
  out->forked = (xgr_engine_audit){.kind = "forked", .actor = actor, .node = n->name, .permit = r->permit,
                                   .detail = json_dumps(fd, JSON_COMPACT), .session_at = 0};
  out->src_owner = r->owner;
  out->src_root = r->root;
  out->fork = (xgr_engine_audit){.kind = "fork", .actor = actor, .node = n->name, .permit = r->permit,
                                 .detail = json_dumps(sd, JSON_COMPACT), .session_at = s->at};
  json_decref(from);
  json_decref(fd);
  json_decref(sd);
  return out->forked_from && out->forked.detail && out->fork.detail ? 0 : XGR_ENOMEM;
}

void xgr__node_fork_unmake(xgr_engine_fork *f) {
  free((char *)f->forked_from);
  free((char *)f->forked.detail);
  free((char *)f->fork.detail);
  memset(f, 0, sizeof *f);
}
