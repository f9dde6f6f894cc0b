/* cmd_sessions.c — `xgr sessions`: list an owner's processes on xgrd as a table
 * (xgr.listSessions, the join view of seed 001 §2.2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: xgr sessions --owner ADDR [--root N] [--limit N] [--sort KEY:DIR,...] [options]\n\n"
          "List the processes of an owner's sessions (xgr.listSessions): pid, parent, status, step,\n"
          "outcome and join state, newest session first.\n\n"
          "  --owner ADDR     whose sessions (default --from)\n"
          "  --root N         only this session\n"
          "  --limit N        at most N rows (default 100)\n"
          "  --sort SPEC      e.g. rootPid:desc,iter:asc (keys rootPid, iter, updatedAt)\n"
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

/* Print items (join view) as a table. */
void xgr_cli_print_items(const json_t *items) {
  printf("%-14s %-14s %-9s %-16s %-7s %-28s %s\n", "PID", "PARENT", "STATUS", "STEP", "VALID", "JOIN", "UPDATED (UTC)");
  size_t i;
  const json_t *it;
  json_array_foreach(items, i, it) {
    const char *step = json_string_value(json_object_get(it, "resumeStep"));
    if (!step) step = json_string_value(json_object_get(it, "lastStep"));
    const json_t *v = json_object_get(it, "valid");
    char join[64], when[32];
    xgr_cli_join_summary(json_object_get(it, "join"), join, sizeof join);
    xgr_client_time(json_integer_value(json_object_get(it, "updatedAt")), when, sizeof when);
    const char *parent = json_string_value(json_object_get(it, "parentPid"));
    printf("%-14s %-14s %-9s %-16s %-7s %-28s %s\n", json_string_value(json_object_get(it, "pid")), parent ? parent : "-",
           json_string_value(json_object_get(it, "status")), step ? step : "-",
           json_is_true(v) ? "valid" : json_is_false(v) ? "invalid" : "-", join, when);
  }
}

int xgr_cmd_sessions(int argc, char **argv) {
  xgr_client c;
  xgr_client_init(&c);
  const char *owner = NULL, *root = NULL, *limit = NULL, *sort = NULL;
  for (int i = 1; i < argc; i++) {
    int r = xgr_client_opt(&c, argc, argv, &i);
    if (r < 0) return XGR_EXIT_USAGE;
    if (r) continue;
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return XGR_EXIT_OK;
    }
    const char **dst = !strcmp(a, "--owner") ? &owner : !strcmp(a, "--root") ? &root : !strcmp(a, "--limit") ? &limit
                     : !strcmp(a, "--sort") ? &sort : NULL;
    if (!dst || i + 1 >= argc) {
      fprintf(stderr, "xgr sessions: %s '%s'\n\n", dst ? "missing value for" : "unknown option", a);
      usage(stderr);
      return XGR_EXIT_USAGE;
    }
    *dst = argv[++i];
  }
  if (!owner) owner = c.from;
  if (!owner) {
    fprintf(stderr, "xgr sessions: --owner is required\n\n");
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  json_t *params = json_pack("{s:s}", "owner", owner);
  if (root) json_object_set_new(params, "rootPid", json_string(root));
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
    char *dup = strdup(sort), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) json_array_append_new(by, json_string(t));
    free(dup);
    json_object_set_new(params, "sort", json_pack("{s:o}", "by", by));
  }
  json_t *res;
  int rc = xgr_client_call(&c, "sessions", "xgr.listSessions", params, &res);
  if (rc) return rc;
  if (c.json) xgr_client_print_json(res);
  else {
    xgr_cli_print_items(json_object_get(res, "items"));
    long long total = json_integer_value(json_object_get(res, "total"));
    if ((size_t)total > json_array_size(json_object_get(res, "items")))
      printf("(%zu of %lld rows; --limit shows more)\n", json_array_size(json_object_get(res, "items")), total);
  }
  json_decref(res);
  return XGR_EXIT_OK;
}
