/* cmd_sessions.c — `xgr sessions`: an owner's sessions on xgrd, one row each (xgr.listSessions
 * with view "sessions"); --processes lists their processes (the join view), --runner the
 * processes another runner's allow lists let the caller wake (the to-do list). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/human.h"
#include "xgr/alloc.h"
#include "xgr/xrc_types.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: xgr sessions [--owner ADDR] [--root N] [--status S] [--limit N] [--processes [--sort KEY:DIR,...]]\n"
          "                    [options]\n"
          "       xgr sessions --runner ADDR --from ADDR [options]\n\n"
          "List an owner's sessions, newest first, one row each: rootPid, status, registry and\n"
          "orchestration, when it was created (UTC), live processes, its next wake (the earliest timer of\n"
          "a process that can wake: not a paused one, not a join target whose join is open) and why a\n"
          "killed session ended. A paused session shows as paused. ACCESS says how you reach each one:\n"
          "owner, grant (rights bitmask: 1 read, 2 write, 4 manage; with the owner's address), operator\n"
          "(xgrd --operator) or open (xgrd --auth none).\n\n"
          "  --owner ADDR     whose sessions (default: with --from, that address's; with --key, your own\n"
          "                   and those granted to you (every owner's for an operator); with neither,\n"
          "                   under xgrd --auth none, every owner's)\n"
          "  --root N         only this session\n"
          "  --status S       only sessions with this status: running (live, not paused), waiting\n"
          "                   (running, no step running now), paused, live, completed, killed, stalled,\n"
          "                   limit, finished; with --processes, processes with this status: waiting,\n"
          "                   running, paused, done, aborted\n"
          "  --limit N        at most N rows (default 100)\n"
          "  --processes      one row per process instead: pid, parent, status, step, outcome, join\n"
          "  --sort SPEC      with --processes, e.g. rootPid:desc,iter:asc (keys rootPid, iter, updatedAt)\n"
          "  --runner ADDR    the to-do list: ADDR's waiting processes whose __wakeUp allow list names\n"
          "                   --from (what you may wake with xgr wake)\n"
          "%s", xgr_client_opts_help);
}

/* "2/3 kill satisfied" for a join view object. */
void xgr_cli_join_summary(const json_t *j, char *buf, size_t n) {
  if (!json_is_object(j)) {
    snprintf(buf, n, "-");
    return;
  }
  size_t got = json_object_size(json_object_get(j, "inbox"));
  snprintf(buf, n, "%zu/%lld of %zu %s %s", got, (long long)json_integer_value(json_object_get(j, "k")),
           json_array_size(json_object_get(j, "expect")), json_string_value(json_object_get(j, "policy")),
           json_string_value(json_object_get(j, "outcome")));
}

/* A session-clock time (updatedAt, nextWakeAt; ms) as text: its time, or "-" when it has none. */
static const char *clock_text(const json_t *v, char *buf, size_t n) {
  return json_is_integer(v) ? xgr_cli_clock(json_integer_value(v), buf, n) : "-";
}

/* What a process row adds to its status: why an aborted process ended (its abortReason and error),
 * when a waiting one wakes or what it waits for instead (nextWakeAt, waitsFor), else "-". */
static const char *item_note(const json_t *it, char *buf, size_t n) {
  const char *why = json_string_value(json_object_get(it, "abortReason"));
  const char *err = json_string_value(json_object_get(it, "error"));
  const json_t *wake = json_object_get(it, "nextWakeAt");
  const char *waits = json_string_value(json_object_get(it, "waitsFor"));
  char t[40];
  if (why) snprintf(buf, n, "aborted: %s%s%s", why, err ? ": " : "", err ? err : "");
  else if (err) snprintf(buf, n, "error: %s", err);
  else if (json_is_integer(wake)) snprintf(buf, n, "wakes %s", xgr_cli_clock(json_integer_value(wake), t, sizeof t));
  else if (waits && !strcmp(waits, "join")) snprintf(buf, n, "waits for its join to close");
  else if (waits && !strcmp(waits, "resume")) snprintf(buf, n, "paused: wakes when resumed");
  else if (waits && !strcmp(waits, "wakeUp")) snprintf(buf, n, "waits for a wake-up");
  else snprintf(buf, n, "-");
  return buf;
}

/* Print items (join view) as a table. */
void xgr_cli_print_items(const json_t *items) {
  printf("%-14s %-14s %-9s %-16s %-7s %-28s %-24s %s\n", "PID", "PARENT", "STATUS", "STEP", "VALID", "JOIN", "UPDATED (UTC)",
         "NOTE");
  size_t i;
  const json_t *it;
  json_array_foreach(items, i, it) {
    const char *step = json_string_value(json_object_get(it, "resumeStep"));
    if (!step) step = json_string_value(json_object_get(it, "lastStep"));
    const json_t *v = json_object_get(it, "valid");
    char join[64], when[40], note[600];
    xgr_cli_join_summary(json_object_get(it, "join"), join, sizeof join);
    const char *parent = json_string_value(json_object_get(it, "parentPid"));
    printf("%-14s %-14s %-9s %-16s %-7s %-28s %-24s %s\n", json_string_value(json_object_get(it, "pid")),
           parent ? parent : "-", json_string_value(json_object_get(it, "status")), step ? step : "-",
           json_is_true(v) ? "valid" : json_is_false(v) ? "invalid" : "-", join,
           clock_text(json_object_get(it, "updatedAt"), when, sizeof when), item_note(it, note, sizeof note));
  }
}

static void print_sessions(const json_t *rows) {
  printf("%-8s %-10s %-32s %-24s %5s  %-24s %-8s %s\n", "ROOTPID", "STATUS", "ORCHESTRATION", "CREATED (UTC)", "LIVE",
         "NEXT WAKE (UTC)", "ABORT", "ACCESS");
  size_t i;
  const json_t *r;
  json_array_foreach(rows, i, r) {
    char orch[96], created[40], next[40];
    const char *reg = json_string_value(json_object_get(r, "registry"));
    snprintf(orch, sizeof orch, "%s/%s", reg && *reg ? reg : "local", json_string_value(json_object_get(r, "ostcId")));
    char acc[128];
    const char *how = json_string_value(json_object_get(r, "access"));
    if (how && !strcmp(how, "grant"))
      snprintf(acc, sizeof acc, "grant:%lld of %s", (long long)json_integer_value(json_object_get(r, "rights")),
               json_string_value(json_object_get(r, "owner")));
    else if (how && strcmp(how, "owner"))
      snprintf(acc, sizeof acc, "%s (%s)", how, json_string_value(json_object_get(r, "owner")));
    else
      snprintf(acc, sizeof acc, "%s", how ? how : "-");
    printf("%-8s %-10s %-32s %-24s %5lld  %-24s %-8s %s\n", json_string_value(json_object_get(r, "rootPid")),
           json_is_true(json_object_get(r, "paused")) ? "paused" : json_string_value(json_object_get(r, "status")), orch,
           xgr_cli_utc(json_integer_value(json_object_get(r, "createdAt")), created, sizeof created),
           (long long)json_integer_value(json_object_get(r, "live")),
           clock_text(json_object_get(r, "nextWakeAt"), next, sizeof next),
           json_string_value(json_object_get(r, "abortReason")) ? json_string_value(json_object_get(r, "abortReason"))
                                                                : "-",
           acc);
  }
  if (!json_array_size(rows)) printf("(no sessions)\n");
}

int xgr_cmd_sessions(int argc, char **argv) {
  xgr_client c;
  xgr_client_init(&c);
  const char *owner = NULL, *root = NULL, *limit = NULL, *sort = NULL, *runner = NULL, *status = NULL;
  bool processes = false;
  const char **dst[] = {&owner, &root, &limit, &sort, &runner, &status};   /* by the options' val */
  static const struct option opts[] = {
    {"owner", required_argument, NULL, 0}, {"root", required_argument, NULL, 1}, {"limit", required_argument, NULL, 2},
    {"sort", required_argument, NULL, 3}, {"runner", required_argument, NULL, 4},
    {"status", required_argument, NULL, 5}, {"processes", no_argument, NULL, 'P'},
    XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  int ch, orc;
  optind = 1;
  while ((ch = xgr_client_getopt(&c, argc, argv, opts, "xgr sessions", usage, &orc)) != -1) {
    if (ch == -2) return orc;
    if (ch == 'P') processes = true;
    else *dst[ch] = optarg;
  }
  if (optind < argc) {
    fprintf(stderr, "xgr sessions: unexpected '%s' (every value goes with its option)\n", argv[optind]);
    return XGR_EXIT_USAGE;
  }
  if (runner && (owner || !c.from)) {
    fprintf(stderr, "xgr sessions: --runner lists what --from may wake; give --from and no --owner\n\n");
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  if (sort && !processes) {
    fprintf(stderr, "xgr sessions: --sort orders process rows; add --processes\n");
    return XGR_EXIT_USAGE;
  }
  if (!owner) owner = runner;   /* none: xgrd answers whose (--from's, the signer's own and granted, every owner's) */
  if (owner && !xgr_xrc_is_address(owner, strlen(owner))) {
    fprintf(stderr, "xgr sessions: %s is '%s'; expected an address (\"0x\" and 40 hex digits)\n",
            runner ? "--runner" : "--owner", owner);
    return XGR_EXIT_USAGE;
  }
  json_t *params = owner ? json_pack("{s:s}", runner ? "runner" : "owner", owner) : json_object();
  if (!processes && !runner) json_object_set_new(params, "view", json_string("sessions"));
  if (root) json_object_set_new(params, "rootPid", json_string(root));
  if (status) json_object_set_new(params, "status", json_string(status));   /* xgrd checks the word */
  if (limit) {
    char *end;
    long l = strtol(limit, &end, 10);
    if (*end || l < 0) {
      fprintf(stderr, "xgr sessions: --limit %s: expected a number\n", limit);
      json_decref(params);
      return XGR_EXIT_USAGE;
    }
    json_object_set_new(params, "limit", json_integer(l));
  }
  if (sort) {
    json_t *by = json_array();
    char *dup = xgr_alloc_strdup(sort), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) json_array_append_new(by, json_string(t));
    free(dup);
    json_object_set_new(params, "sort", json_pack("{s:o}", "by", by));
  }
  json_t *res;
  int rc = xgr_client_call(&c, "sessions", "xgr.listSessions", params, &res);
  if (rc) return rc;
  if (c.json) xgr_client_print_json(res);
  else if (!processes && !runner) {
    print_sessions(json_object_get(res, "sessions"));
    if (json_object_get(res, "nextBeforeRootPid") || (size_t)json_integer_value(json_object_get(res, "total")) >
                                                          json_array_size(json_object_get(res, "sessions")))
      printf("(%zu of %lld sessions; --limit shows more)\n", json_array_size(json_object_get(res, "sessions")),
             (long long)json_integer_value(json_object_get(res, "total")));
  } else {
    xgr_cli_print_items(json_object_get(res, "items"));
    long long total = json_integer_value(json_object_get(res, "total"));
    if ((size_t)total > json_array_size(json_object_get(res, "items")))
      printf("(%zu of %lld rows; --limit shows more)\n", json_array_size(json_object_get(res, "items")), total);
  }
  json_decref(res);
  return XGR_EXIT_OK;
}
