/* cmd_history.c — `xgr history --store FILE OWNER ROOTPID`: a session's audit trail from a store
 * (proc_steps, one row per executed step), as a readable table or as JSON. Opens the store
 * read-only; never changes it. */
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/human.h"
#include "xgr/alloc.h"
#include "xgr/rpc.h"
#include "xgr/store.h"
#include "xgr/xrc_types.h"

static void usage(FILE *f) {
  fputs("usage: xgr history --store FILE [--json] OWNER ROOTPID\n\n"
        "Print the audit trail of session (OWNER, ROOTPID) from a store file: one row per step that ran\n"
        "(pid, parent, step, status after the result, outcome, when it ran, error), in process order,\n"
        "each followed by the internal wake-ups it sent that were refused (to whom, why, when), and\n"
        "the session's status, and its audit trail: every kill, pause, resume and wake-up applied to it\n"
        "(who, through which node, when, the permit's digest), each before the first step that began\n"
        "after it. --json prints {\"session\":{...},\"history\":[...],\"audit\":[...]} instead (a refusal is\n"
        "a row with status \"wake_refused\" and its \"wakeUp\"; audit as in xgr.getSession).\n\n"
        "Exit: 0 ok, 1 no such session, 2 usage or unreadable store.\n",
        f);
}

static json_t *valid_json(int8_t v) { return v < 0 ? json_null() : json_boolean(v); }

/* The refused wake-ups in ws sent by process iter (0: sender not recorded) not printed yet (done):
 * as JSON rows appended to hist (docs/RPC.md, getSession), or as text lines when hist is NULL. */
static void refused_rows(json_t *hist, uint64_t root, uint64_t iter, const xgr_store_hist *h,
                         const xgr_store_wake *ws, size_t nw, bool *done) {
  for (size_t k = 0; k < nw; k++) {
    if (done[k] || ws[k].from_iter != iter) continue;
    done[k] = true;
    const xgr_store_wake *w = &ws[k];
    char pid[48], to[24], when[40];
    if (iter) xgr_pid_format(root, iter, pid, sizeof pid);
    else snprintf(pid, sizeof pid, "%" PRIu64, root);
    snprintf(to, sizeof to, "%" PRIu64, w->to_root);
    if (!hist) {
      printf("%-12s %-12s %-16s wake-up refused: to %s/%s step %s: %s (at %s)\n", pid, "", w->from_step ? w->from_step : "?",
             w->to_owner, to, w->step, w->refused, xgr_cli_utc(w->refused_at, when, sizeof when));
      continue;
    }
    json_t *wu = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "id", w->id, "runner", w->to_owner, "sessionId", to,
                           "stepId", w->step, "reason", w->refused, "refusedAt", (json_int_t)w->refused_at);
    json_array_append_new(hist, json_pack("{s:s, s:o, s:s, s:n, s:I, s:I, s:o}", "pid", pid, "step",
                                          w->from_step ? json_string(w->from_step) : json_null(), "status",
                                          "wake_refused", "valid", "at", (json_int_t)(h ? h->at : 0), "finishedAt",
                                          (json_int_t)(h ? h->finished_at : 0), "wakeUp", wu));
  }
}

int xgr_cmd_history(int argc, char **argv) {
  static const struct option opts[] = {{"store", required_argument, NULL, 's'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *store = NULL;
  bool as_json = false;
  int ch;
  optind = 1;
  while ((ch = xgr_cli_getopt(argc, argv, "s:jh", opts, "xgr history")) != -1) {
    switch (ch) {
      case 's': store = optarg; break;
      case 'j': as_json = true; break;
      case 'h': usage(stdout); return XGR_EXIT_OK;
      default: return XGR_EXIT_USAGE;   /* reported by xgr_cli_getopt */
    }
  }
  if (!store || argc - optind != 2) {
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  const char *owner_arg = argv[optind];
  if (!xgr_xrc_is_address(owner_arg, strlen(owner_arg))) {
    fprintf(stderr, "xgr history: OWNER is '%s'; expected an address (\"0x\" and 40 hex digits)\n", owner_arg);
    return XGR_EXIT_USAGE;
  }
  char owner[43];   /* addresses compare case-insensitively; the store keeps them lowercased */
  for (size_t k = 0; k < 43; k++) owner[k] = (char)tolower((unsigned char)owner_arg[k]);
  uint64_t root = 0, iter = 0;
  if (xgr_pid_parse(argv[optind + 1], &root, &iter) || iter) {
    fprintf(stderr, "xgr history: ROOTPID must be a positive integer, not \"%s\"\n", argv[optind + 1]);
    return XGR_EXIT_USAGE;
  }
  xgr_error err;
  xgr_store_config cfg = {.read_only = true};
  xgr_store *st = xgr_store_open(store, &cfg, &err);
  if (!st) {
    fprintf(stderr, "xgr history: %s\n", err.message);
    return XGR_EXIT_USAGE;
  }
  xgr_store_session ss;
  bool has_session = xgr_store_session_get(st, owner, root, &ss, &err) == 0;
  xgr_store_hist *hs = NULL;
  size_t nh = 0;
  if (xgr_store_history(st, owner, root, &hs, &nh, &err)) {
    fprintf(stderr, "xgr history: %s\n", err.message);
    if (has_session) xgr_store_session_clear(&ss);
    xgr_store_close(st);
    return XGR_EXIT_USAGE;
  }
  xgr_store_wake *ws = NULL;   /* the refused internal wake-ups this session sent */
  size_t nw = 0;
  if (xgr_store_wakes_refused(st, owner, root, &ws, &nw, &err)) nw = 0;
  bool *wdone = xgr_alloc_zeroed(nw + 1, sizeof *wdone);
  xgr_store_audit *as = NULL;   /* the audit trail (schema 14) */
  size_t na = 0, ja = 0;
  if (xgr_store_audits(st, owner, root, &as, &na, &err)) na = 0;
  json_t *audit = json_array();
  for (size_t k = 0; k < na; k++) json_array_append_new(audit, xgr_rpc_audit_json(&as[k]));
  char rootbuf[24];
  snprintf(rootbuf, sizeof rootbuf, "%" PRIu64, root);
  int rc = XGR_EXIT_OK;
  if (!has_session && !nh && !na) {
    fprintf(stderr, "xgr history: no session %s/%" PRIu64 " in %s\n", owner, root, store);
    rc = XGR_EXIT_FAIL;
  } else if (as_json) {
    json_t *hist = json_array();
    for (size_t i = 0; i < nh; i++) {
      const xgr_store_hist *h = &hs[i];
      char pid[48], ppid[48];
      xgr_pid_format(root, h->iter, pid, sizeof pid);
      xgr_pid_format(root, h->parent_iter, ppid, sizeof ppid);
      json_t *row = json_pack("{s:s, s:o, s:s, s:s, s:o, s:I, s:I, s:o, s:I}", "pid", pid, "parentPid",
                              h->parent_iter ? json_string(ppid) : json_null(), "step", h->step_id, "status",
                              xgr_proc_status_name(h->status), "valid", valid_json(h->valid), "at", (json_int_t)h->at,
                              "finishedAt", (json_int_t)h->finished_at, "error",
                              h->error ? json_string(h->error) : json_null(), "recordedAt", (json_int_t)h->recorded_at);
      if (h->abort_reason) json_object_set_new(row, "abortReason", json_string(xgr_abort_reason_name(h->abort_reason)));
      json_t *api = h->api ? json_loads(h->api, 0, NULL) : NULL;
      if (api) json_object_set_new(row, "apiCalls", api);
      json_t *pl = NULL;   /* exact: integers beyond int64 stay numbers */
      if (h->payload && xgr_json_parse_exact(h->payload, strlen(h->payload), &pl, NULL)) pl = NULL;
      json_object_set_new(row, "payload", pl ? pl : json_null());
      json_array_append_new(hist, row);
      refused_rows(hist, root, h->iter, h, ws, nw, wdone);
    }
    for (size_t k = 0; k < nw; k++) refused_rows(hist, root, ws[k].from_iter, NULL, ws, nw, wdone);
    json_t *sess = has_session
                       ? json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I}", "owner", ss.owner, "rootPid", rootbuf,
                                   "registry", ss.registry, "ostcId", ss.ostc_id, "ostcHash", ss.ostc_hash, "status",
                                   xgr_session_result_name(ss.status), "createdAt", (json_int_t)ss.created_at,
                                   "finishedAt", (json_int_t)ss.finished_at, "killedAt", (json_int_t)ss.killed_at)
                       : json_null();
    json_t *out = json_pack("{s:o, s:o, s:O}", "session", sess, "history", hist, "audit", audit);
    char *txt = xgr_json_dumps(out, XGR_JSON_PRETTY);
    puts(txt);
    free(txt);
    json_decref(out);
  } else {
    char cbuf[40];
    if (has_session)
      printf("session %s/%" PRIu64 "  %s  orchestration %s %s  (%zu step%s)\n  created %s\n", ss.owner, root,
             xgr_session_result_name(ss.status), ss.ostc_id, ss.ostc_hash, nh, nh == 1 ? "" : "s",
             xgr_cli_utc(ss.created_at, cbuf, sizeof cbuf));
    else
      printf("session %s/%" PRIu64 "  (its row is gone; history kept)  (%zu steps)\n", owner, root, nh);
    /* a step's time is on the session's clock: Unix ms under xgrd and `xgr run` in real time (shown
     * as UTC), ms from the start under --virtual-time (shown as +duration) */
    printf("%-12s %-12s %-16s %-9s %-8s %-24s %-9s  %s\n", "pid", "parent", "step", "status", "outcome", "ran at",
           "took", "error");
    for (size_t i = 0; i < nh; i++) {
      const xgr_store_hist *h = &hs[i];
      for (; ja < na && as[ja].session_at <= h->at; ja++) xgr_cli_print_audit(json_array_get(audit, ja), rootbuf, "audit");
      char pid[48], ppid[48];
      xgr_pid_format(root, h->iter, pid, sizeof pid);
      if (h->parent_iter) xgr_pid_format(root, h->parent_iter, ppid, sizeof ppid);
      else snprintf(ppid, sizeof ppid, "-");
      const char *outc = h->valid < 0 ? "-" : h->valid ? "valid" : "invalid";
      char at[40], took[32];
      if (h->at >= 100000000000LL) xgr_cli_utc(h->at, at, sizeof at);   /* after 1973: a wall-clock time */
      else snprintf(at, sizeof at, "+%s", xgr_cli_duration(h->at, took, sizeof took));
      xgr_cli_duration(h->finished_at - h->at, took, sizeof took);
      printf("%-12s %-12s %-16s %-9s %-8s %-24s %-9s  %s%s%s\n", pid, ppid, h->step_id, xgr_proc_status_name(h->status),
             outc, at, took, h->abort_reason ? xgr_abort_reason_name(h->abort_reason) : "",
             h->abort_reason && h->error ? ": " : "", h->error ? h->error : "");
      json_t *api = h->api ? json_loads(h->api, 0, NULL) : NULL;
      size_t k;
      json_t *c;
      json_array_foreach(api, k, c) {   /* what each API call did */
        const char *ce = json_string_value(json_object_get(c, "error"));
        printf("%-12s api %s: status %lld, %lld ms, %s%s%s\n", "", json_string_value(json_object_get(c, "name")),
               (long long)json_integer_value(json_object_get(c, "status")),
               (long long)json_integer_value(json_object_get(c, "ms")),
               json_string_value(json_object_get(c, "url")) ? json_string_value(json_object_get(c, "url")) : "-",
               ce ? ", error: " : "", ce ? ce : "");
      }
      json_decref(api);
      refused_rows(NULL, root, h->iter, h, ws, nw, wdone);
    }
    for (size_t k = 0; k < nw; k++) refused_rows(NULL, root, ws[k].from_iter, NULL, ws, nw, wdone);
    for (; ja < na; ja++) xgr_cli_print_audit(json_array_get(audit, ja), rootbuf, "audit");
  }
  json_decref(audit);
  xgr_store_audits_free(as, na);
  free(wdone);
  xgr_store_wakes_free(ws, nw);
  xgr_store_hists_free(hs, nh);
  if (has_session) xgr_store_session_clear(&ss);
  xgr_store_close(st);
  return rc;
}
