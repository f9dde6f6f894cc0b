/* cmd_retry.c — `xgr retry` and `xgr fork` (issue 36; docs/SEMANTICS.md "Retry and fork"): run an
 * aborted process's step again in its live session (xgr.retry), or start a new session from a
 * recorded step of a session, ended or live (xgr.fork), on xgrd. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/opts.h"

static void retry_usage(FILE *f) {
  fprintf(f,
          "usage: xgr retry SESSION PID --owner ADDR [--payload JSON] [options]\n\n"
          "Run the step of process PID (rootPid:iter, or the iter alone) of session SESSION again, as a new\n"
          "process of the same session in the same join scope (xgr.retry): PID must have aborted on a hard\n"
          "error or been killed, the session must be live, and the join it fed still open. It runs with its\n"
          "last input payload, or with --payload in its place.\n\n"
          "  --owner ADDR     the session's owner (default --from)\n"
          "  --payload JSON   the payload the step runs with (or @FILE: read from FILE)\n"
          "%s", xgr_client_opts_help);
}

static void fork_usage(FILE *f) {
  fprintf(f,
          "usage: xgr fork SESSION STEP_OR_PID --owner ADDR [--payload JSON] [--bundle HASH | --version N]\n"
          "       [--root N] [options]\n\n"
          "Start a new session of the owner from a recorded step of session SESSION, ended or live (xgr.fork):\n"
          "STEP_OR_PID is a process (rootPid:iter, or the iter alone) whose step ran, or a step id (its latest\n"
          "run). The new session starts at that step with the step's input payload (its parent's effective\n"
          "payload, with the pieces its join took), or --payload; on SESSION's bundle unless --bundle names\n"
          "another (an orchestration or bundle hash) or --version a version of its orchestration. The new\n"
          "session records what it was forked from (xgr show).\n\n"
          "  --owner ADDR     the sessions' owner (default --from)\n"
          "  --payload JSON   the payload the step starts with (or @FILE: read from FILE)\n"
          "  --bundle HASH    run on this orchestration or bundle hash (0x + 64 hex)\n"
          "  --version N      run on version N of SESSION's orchestration (its rules as registered now)\n"
          "  --root N         the new session's rootPid (default: the owner's next)\n"
          "%s", xgr_client_opts_help);
}

/* "R:I", or "I" with R = session: into buf as "R:I"; false when neither. */
static bool pid_of(const char *session, const char *arg, char *buf, size_t n) {
  const char *c = strchr(arg, ':');
  for (const char *p = arg; *p; p++)
    if (!isdigit((unsigned char)*p) && p != c) return false;
  if (!*arg || c == arg || (c && !c[1])) return false;
  if (c) snprintf(buf, n, "%s", arg);
  else snprintf(buf, n, "%s:%s", session, arg);
  return true;
}

static int payload_into(const char *prog, const char *payload, json_t *params) {
  if (!payload) return 0;
  json_t *p;
  if (xgr_cli_object_arg(prog, "--payload", payload, &p)) return XGR_EXIT_USAGE;
  json_object_set_new(params, "payload", p);
  return 0;
}

int xgr_cmd_retry(int argc, char **argv) {
  xgr_client c;
  xgr_client_init(&c);
  const char *owner = NULL, *payload = NULL;
  const char **dst[] = {&owner, &payload};
  static const struct option opts[] = {
    {"owner", required_argument, NULL, 0}, {"payload", required_argument, NULL, 1}, XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  int ch, orc;
  optind = 1;
  while ((ch = xgr_client_getopt(&c, argc, argv, opts, "xgr retry", retry_usage, &orc)) != -1) {
    if (ch == -2) return orc;
    *dst[ch] = optarg;
  }
  if (!owner) owner = c.from;
  char pid[64];
  if (!owner || argc - optind != 2 || !pid_of(argv[optind], argv[optind + 1], pid, sizeof pid)) {
    fprintf(stderr, "xgr retry: give SESSION, PID (rootPid:iter or iter) and --owner\n\n");
    retry_usage(stderr);
    return XGR_EXIT_USAGE;
  }
  json_t *params = json_pack("{s:s, s:s}", "owner", owner, "pid", pid);
  if (payload_into("xgr retry", payload, params)) {
    json_decref(params);
    return XGR_EXIT_USAGE;
  }
  json_t *res;
  int rc = xgr_client_call(&c, "retry", "xgr.retry", params, &res);
  if (rc) return rc;
  if (c.json) xgr_client_print_json(res);
  else printf("retried %s as %s\n", pid, json_string_value(json_object_get(res, "newPid")));
  json_decref(res);
  return XGR_EXIT_OK;
}

int xgr_cmd_fork(int argc, char **argv) {
  xgr_client c;
  xgr_client_init(&c);
  const char *owner = NULL, *payload = NULL, *bundle = NULL, *version = NULL, *root = NULL;
  const char **dst[] = {&owner, &payload, &bundle, &version, &root};
  static const struct option opts[] = {
    {"owner", required_argument, NULL, 0}, {"payload", required_argument, NULL, 1},
    {"bundle", required_argument, NULL, 2}, {"version", required_argument, NULL, 3},
    {"root", required_argument, NULL, 4}, XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  int ch, orc;
  optind = 1;
  while ((ch = xgr_client_getopt(&c, argc, argv, opts, "xgr fork", fork_usage, &orc)) != -1) {
    if (ch == -2) return orc;
    *dst[ch] = optarg;
  }
  if (!owner) owner = c.from;
  if (!owner || argc - optind != 2 || (bundle && version)) {
    fprintf(stderr, "xgr fork: give SESSION, STEP_OR_PID and --owner%s\n\n", bundle && version ? "; --bundle or --version, not both" : "");
    fork_usage(stderr);
    return XGR_EXIT_USAGE;
  }
  const char *session = argv[optind], *at = argv[optind + 1];
  char pid[64];
  json_t *params = json_pack("{s:s, s:s}", "owner", owner, "sessionId", session);
  if (pid_of(session, at, pid, sizeof pid)) json_object_set_new(params, "pid", json_string(pid));
  else json_object_set_new(params, "stepId", json_string(at));
  if (bundle) json_object_set_new(params, "ostcHash", json_string(bundle));
  if (version) json_object_set_new(params, "version", json_string(version));
  if (root) json_object_set_new(params, "newRootPid", json_string(root));
  if (payload_into("xgr fork", payload, params)) {
    json_decref(params);
    return XGR_EXIT_USAGE;
  }
  json_t *res;
  int rc = xgr_client_call(&c, "fork", "xgr.fork", params, &res);
  if (rc) return rc;
  if (c.json) xgr_client_print_json(res);
  else {
    const json_t *ff = json_object_get(res, "forkedFrom");
    json_t *np = json_object_get(res, "rootPid");   /* a decimal string or a number */
    char *nps = json_is_string(np) ? NULL : json_dumps(np, JSON_ENCODE_ANY);
    printf("forked session %s/%s from step %s of session %s (bundle %s)\n", owner,
           json_is_string(np) ? json_string_value(np) : nps ? nps : "?", json_string_value(json_object_get(ff, "step")),
           session, json_string_value(json_object_get(res, "bundleHash")));
    free(nps);
  }
  json_decref(res);
  return XGR_EXIT_OK;
}
