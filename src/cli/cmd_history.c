/* cmd_history.c — `xgr history --store FILE OWNER ROOTPID`: a session's audit trail from a store
 * (proc_steps, one row per executed step), as a readable table or as JSON. Opens the store
 * read-only; never changes it. */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "xgr/store.h"

static void usage(FILE *f) {
  fputs("usage: xgr history --store FILE [--json] OWNER ROOTPID\n\n"
        "Print the audit trail of session (OWNER, ROOTPID) from a store file: one row per step that ran\n"
        "(pid, parent, step, status after the result, outcome, when it ran, error), in process order,\n"
        "and the session's status. --json prints {\"session\":{...},\"history\":[...]} instead.\n\n"
        "Exit: 0 ok, 1 no such session, 2 usage or unreadable store.\n",
        f);
}

static json_t *valid_json(int8_t v) { return v < 0 ? json_null() : json_boolean(v); }

int xgr_cmd_history(int argc, char **argv) {
  static const struct option opts[] = {{"store", required_argument, NULL, 's'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *store = NULL;
  bool as_json = false;
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "s:jh", opts, NULL)) != -1) {
    switch (ch) {
      case 's': store = optarg; break;
      case 'j': as_json = true; break;
      case 'h': usage(stdout); return XGR_EXIT_OK;
      default: usage(stderr); return XGR_EXIT_USAGE;
    }
  }
  if (!store || argc - optind != 2) {
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  const char *owner = argv[optind];
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
  int rc = XGR_EXIT_OK;
  if (!has_session && !nh) {
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
      json_t *pl = NULL;   /* exact: integers beyond int64 stay numbers */
      if (h->payload && xgr_json_parse_exact(h->payload, strlen(h->payload), &pl, NULL)) pl = NULL;
      json_object_set_new(row, "payload", pl ? pl : json_null());
      json_array_append_new(hist, row);
    }
    char rootbuf[24];
    snprintf(rootbuf, sizeof rootbuf, "%" PRIu64, root);
    json_t *sess = has_session
                       ? json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I}", "owner", ss.owner, "rootPid", rootbuf,
                                   "registry", ss.registry, "ostcId", ss.ostc_id, "ostcHash", ss.ostc_hash, "status",
                                   xgr_session_result_name(ss.status), "createdAt", (json_int_t)ss.created_at,
                                   "finishedAt", (json_int_t)ss.finished_at, "killedAt", (json_int_t)ss.killed_at)
                       : json_null();
    json_t *out = json_pack("{s:o, s:o}", "session", sess, "history", hist);
    char *txt = xgr_json_dumps(out, XGR_JSON_PRETTY);
    puts(txt);
    free(txt);
    json_decref(out);
  } else {
    if (has_session)
      printf("session %s/%" PRIu64 "  %s  orchestration %s %s  (%zu step%s)\n", ss.owner, root,
             xgr_session_result_name(ss.status), ss.ostc_id, ss.ostc_hash, nh, nh == 1 ? "" : "s");
    else
      printf("session %s/%" PRIu64 "  (its row is gone; history kept)  (%zu steps)\n", owner, root, nh);
    printf("%-12s %-12s %-16s %-9s %-8s %12s %12s  %s\n", "pid", "parent", "step", "status", "outcome", "at(ms)",
           "done(ms)", "error");
    for (size_t i = 0; i < nh; i++) {
      const xgr_store_hist *h = &hs[i];
      char pid[48], ppid[48];
      xgr_pid_format(root, h->iter, pid, sizeof pid);
      if (h->parent_iter) xgr_pid_format(root, h->parent_iter, ppid, sizeof ppid);
      else snprintf(ppid, sizeof ppid, "-");
      const char *outc = h->valid < 0 ? "-" : h->valid ? "valid" : "invalid";
      printf("%-12s %-12s %-16s %-9s %-8s %12lld %12lld  %s%s%s\n", pid, ppid, h->step_id, xgr_proc_status_name(h->status),
             outc, (long long)h->at, (long long)h->finished_at, h->abort_reason ? xgr_abort_reason_name(h->abort_reason) : "",
             h->abort_reason && h->error ? ": " : "", h->error ? h->error : "");
    }
  }
  xgr_store_hists_free(hs, nh);
  if (has_session) xgr_store_session_clear(&ss);
  xgr_store_close(st);
  return rc;
}
