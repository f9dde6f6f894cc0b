/* cmd_show.c — `xgr show PID`: one session (or process) on xgrd with its processes and its step
 * timeline (xgr.getSession). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/human.h"
#include "xgr/alloc.h"
#include "xgr/json.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: xgr show PID --owner ADDR [options]\n\n"
          "Show a session (PID = rootPid) or one process (PID = rootPid:iter): the session's registry,\n"
          "orchestration, status and next wake, its processes with their join state and a note (why an\n"
          "aborted one ended, when a waiting one wakes or what it waits for), and the timeline of the steps\n"
          "that ran (xgr.getSession), with the internal wake-ups they sent that were refused (to whom,\n"
          "why, when) and the session's audit trail: every kill, pause, resume and wake-up applied to it\n"
          "(who, through which node, when), each before the first step that began after it.\n\n"
          "  --owner ADDR     the session's owner (default --from)\n"
          "%s", xgr_client_opts_help);
}

/* A refused wake-up's history row (its refusal under "wakeUp"), or NULL. */
static const json_t *wake_of(const json_t *h) { return json_object_get(h, "wakeUp"); }

static int by_at(const void *a, const void *b) {
  const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
  json_int_t p = json_integer_value(json_object_get(x, "at")), q = json_integer_value(json_object_get(y, "at"));
  if (p != q) return p < q ? -1 : 1;
  const char *ix = strchr(json_string_value(json_object_get(x, "pid")) ? json_string_value(json_object_get(x, "pid")) : "", ':');
  const char *iy = strchr(json_string_value(json_object_get(y, "pid")) ? json_string_value(json_object_get(y, "pid")) : "", ':');
  unsigned long long u = ix ? strtoull(ix + 1, NULL, 10) : 0, w = iy ? strtoull(iy + 1, NULL, 10) : 0;
  if (u != w) return u < w ? -1 : 1;
  /* a step's refused wake-ups follow its row, in the order they were refused */
  const json_t *wx = wake_of(x), *wy = wake_of(y);
  if (!wx != !wy) return wx ? 1 : -1;
  p = json_integer_value(json_object_get(wx, "refusedAt"));
  q = json_integer_value(json_object_get(wy, "refusedAt"));
  return p < q ? -1 : p > q;
}

/* The line of a refused internal wake-up in the timeline: to whom, why, when. */
static void print_refused(const json_t *h, long long t0) {
  const json_t *w = wake_of(h);
  const char *step = json_string_value(json_object_get(h, "step"));
  const char *pid = json_string_value(json_object_get(h, "pid"));
  char d1[32], when[40];
  xgr_cli_utc(json_integer_value(json_object_get(w, "refusedAt")), when, sizeof when);
  /* without its sender (not recorded by the store) the row has no step time */
  if (pid && strchr(pid, ':')) xgr_cli_duration(json_integer_value(json_object_get(h, "at")) - t0, d1, sizeof d1);
  else snprintf(d1, sizeof d1, "?");
  printf("  +%-9s %-12s %-16s wake-up refused: to %s/%s step %s: %s (at %s)\n", d1,
         pid ? pid : "?", step ? step : "?",
         json_string_value(json_object_get(w, "runner")), json_string_value(json_object_get(w, "sessionId")),
         json_string_value(json_object_get(w, "stepId")), json_string_value(json_object_get(w, "reason")), when);
}

/* The line of an audit entry in the timeline (xgr_cli_print_audit) at its session-clock time. */
static void print_audit(const json_t *a, const char *root, long long t0, size_t nsteps) {
  char d1[32], lead[48];
  long long at = json_integer_value(json_object_get(a, "sessionAt"));
  if (nsteps && at >= t0) snprintf(lead, sizeof lead, "  +%-9s", xgr_cli_duration(at - t0, d1, sizeof d1));
  else snprintf(lead, sizeof lead, "  %-10s", nsteps ? "(before)" : "");
  xgr_cli_print_audit(a, root, lead);
}

int xgr_cmd_show(int argc, char **argv) {
  xgr_client c;
  xgr_client_init(&c);
  const char *owner, *pid;
  int end = xgr_client_owner_pid(&c, argc, argv, "show", usage, &owner, &pid);
  if (end >= 0) return end;
  json_t *res;
  int rc = xgr_client_call(&c, "show", "xgr.getSession", json_pack("{s:s, s:s}", "owner", owner, "pid", pid), &res);
  if (rc) return rc;
  if (strchr(pid, ':') && !json_array_size(json_object_get(res, "processes")) &&
      !json_array_size(json_object_get(res, "history"))) {   /* the session exists, that process does not */
    fprintf(stderr, "xgr show: session %s/%.*s has no process %s\n", owner, (int)(strchr(pid, ':') - pid), pid, pid);
    json_decref(res);
    return XGR_EXIT_FAIL;
  }
  if (c.json) {
    xgr_client_print_json(res);
    json_decref(res);
    return XGR_EXIT_OK;
  }
  const json_t *s = json_object_get(res, "session");
  char created[32];
  xgr_client_time(json_integer_value(json_object_get(s, "createdAt")) / 1000, created, sizeof created);
  printf("session %s/%s  %s%s  registry %s  orchestration %s  %s\n  created %s UTC\n",
         json_string_value(json_object_get(s, "owner")), json_string_value(json_object_get(s, "rootPid")),
         json_string_value(json_object_get(s, "status")), json_is_true(json_object_get(s, "paused")) ? " (paused)" : "",
         json_string_value(json_object_get(s, "registry")), json_string_value(json_object_get(s, "ostcId")),
         json_string_value(json_object_get(s, "ostcHash")), created);
  const char *bh = json_string_value(json_object_get(s, "bundleHash"));
  if (bh && *bh) printf("  bundle %s (the rules it runs are pinned)\n", bh);
  const json_t *ff = json_object_get(s, "forkedFrom");
  if (json_is_object(ff))   /* a fork: the recorded step it started from */
    printf("  forked from %s/%" JSON_INTEGER_FORMAT " at %" JSON_INTEGER_FORMAT ":%" JSON_INTEGER_FORMAT
           " (step %s, bundle %s)\n", json_string_value(json_object_get(ff, "owner")),
           json_integer_value(json_object_get(ff, "rootPid")), json_integer_value(json_object_get(ff, "rootPid")),
           json_integer_value(json_object_get(ff, "iter")), json_string_value(json_object_get(ff, "step")),
           json_string_value(json_object_get(ff, "bundleHash")));
  if (!strcmp(json_string_value(json_object_get(s, "status")) ?: "", "running")) {
    /* the earliest timer of a process that can wake (xgr.getSession's nextWakeAt) */
    const json_t *nw = json_object_get(s, "nextWakeAt");
    char next[40];
    printf("  next wake %s\n", json_is_integer(nw) ? xgr_cli_clock(json_integer_value(nw), next, sizeof next)
                               : json_is_true(json_object_get(s, "paused")) ? "none (paused)"
                                                                             : "none (no process has a timer)");
  }
  printf("\nprocesses:\n");
  xgr_cli_print_items(json_object_get(res, "processes"));
  printf("\ntimeline (time after the first step, then how long the step took):\n");
  json_t *hist = json_object_get(res, "history");
  xgr_json_array_sort(hist, by_at);   /* in the order the steps began (by_at: iter order for steps that began together) */
  long long t0 = 0;   /* when the first step began (refusal rows carry their sending step's time) */
  size_t i, nsteps = 0;
  const json_t *h;
  json_array_foreach(hist, i, h) {
    long long at = json_integer_value(json_object_get(h, "at"));
    if (!wake_of(h) && (!nsteps++ || at < t0)) t0 = at;
  }
  /* the audit trail, in session-clock order: each entry before the first row that began at or after it */
  const json_t *audit = json_object_get(res, "audit");
  const char *root = json_string_value(json_object_get(s, "rootPid"));
  size_t ja = 0, na = json_array_size(audit);
  json_array_foreach(hist, i, h) {
    long long hat = json_integer_value(json_object_get(h, "at"));
    for (; ja < na && json_integer_value(json_object_get(json_array_get(audit, ja), "sessionAt")) <= hat; ja++)
      print_audit(json_array_get(audit, ja), root ? root : "?", t0, nsteps);
    if (wake_of(h)) {
      print_refused(h, t0);
      continue;
    }
    const json_t *v = json_object_get(h, "valid");
    const char *e = json_string_value(json_object_get(h, "error"));
    long long at = json_integer_value(json_object_get(h, "at")), fin = json_integer_value(json_object_get(h, "finishedAt"));
    char d1[32], d2[32];
    printf("  +%-9s %-12s %-16s %-8s %-8s %s%s%s\n", xgr_cli_duration(at - t0, d1, sizeof d1),
           json_string_value(json_object_get(h, "pid")), json_string_value(json_object_get(h, "step")),
           json_string_value(json_object_get(h, "status")), json_is_true(v) ? "valid" : json_is_false(v) ? "invalid" : "-",
           xgr_cli_duration(fin - at, d2, sizeof d2), e ? "  error: " : "", e ? e : "");
    size_t k;
    const json_t *call;
    json_array_foreach(json_object_get(h, "apiCalls"), k, call) {   /* what each API call did */
      const char *ce = json_string_value(json_object_get(call, "error"));
      const char *url = json_string_value(json_object_get(call, "url"));
      char d3[32];
      printf("  %-10s api %s: status %lld, %s, %s%s%s\n", "", json_string_value(json_object_get(call, "name")),
             (long long)json_integer_value(json_object_get(call, "status")),
             xgr_cli_duration(json_integer_value(json_object_get(call, "ms")), d3, sizeof d3), url ? url : "-",
             ce ? ", error: " : "", ce ? ce : "");
    }
    const json_t *x = json_object_get(h, "execution");   /* its transaction (docs/CHAIN.md) */
    if (x) {
      const char *rr = json_string_value(json_object_get(x, "revertReason"));
      printf("  %-10s execution %s %s gas %lld block %lld%s%s\n", "", json_string_value(json_object_get(x, "status")),
             json_is_string(json_object_get(x, "txHash")) ? json_string_value(json_object_get(x, "txHash")) : "(not sent)",
             (long long)json_integer_value(json_object_get(x, "gasUsed")),
             (long long)json_integer_value(json_object_get(x, "blockNumber")), rr ? "  reason: " : "", rr ? rr : "");
    }
  }
  for (; ja < na; ja++) print_audit(json_array_get(audit, ja), root ? root : "?", t0, nsteps);
  if (!nsteps) printf("  (no step ran yet)\n");
  json_decref(res);
  return XGR_EXIT_OK;
}
