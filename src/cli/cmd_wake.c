/* cmd_wake.c — `xgr wake`: wake waiting processes on xgrd, one by PID or every process waiting at
 * a step of a session (xgr_wakeUpProcess), with an optional payload merged into them. */
#include <stdio.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: xgr wake PID --owner ADDR [--payload JSON] [options]\n"
          "       xgr wake --step STEP --root N --owner ADDR [--payload JSON] [options]\n\n"
          "Wake a waiting process (PID mode, PID = rootPid:iter) or every process of session N waiting at\n"
          "STEP (step mode) on xgrd (xgr_wakeUpProcess). The payload is merged into their resume payload\n"
          "(keys starting with _ are ignored). A caller other than the owner (--from) needs the\n"
          "process's __wakeUp allow list (step mode).\n\n"
          "  --owner ADDR     the session's owner (default --from)\n"
          "  --payload JSON   an object merged into the woken processes' payload (or @FILE: read from FILE)\n"
          "%s", xgr_client_opts_help);
}

int xgr_cmd_wake(int argc, char **argv) {
  xgr_client c;
  xgr_client_init(&c);
  const char *owner = NULL, *pid = NULL, *step = NULL, *root = NULL, *payload = NULL;
  const char **dst[] = {&owner, &step, &root, &payload};   /* by the options' val */
  static const struct option opts[] = {
    {"owner", required_argument, NULL, 0}, {"step", required_argument, NULL, 1}, {"root", required_argument, NULL, 2},
    {"payload", required_argument, NULL, 3}, XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  int ch, orc;
  optind = 1;
  while ((ch = xgr_client_getopt(&c, argc, argv, opts, "xgr wake", usage, &orc)) != -1) {
    if (ch == -2) return orc;
    *dst[ch] = optarg;
  }
  if (optind < argc) pid = argv[optind];
  if (optind + 1 < argc) {
    fprintf(stderr, "xgr wake: unexpected '%s' (one PID)\n", argv[optind + 1]);
    return XGR_EXIT_USAGE;
  }
  if (!owner) owner = c.from;
  if (!owner || (!pid && !(step && root)) || (pid && step)) {
    fprintf(stderr, "xgr wake: give --owner and either PID or --step with --root\n\n");
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  json_t *params = json_pack("{s:s}", "owner", owner);
  if (pid) json_object_set_new(params, "processId", json_string(pid));
  else {
    json_object_set_new(params, "stepId", json_string(step));
    json_object_set_new(params, "sessionId", json_string(root));
  }
  if (payload) {
    json_t *p;
    if (xgr_cli_object_arg("xgr wake", "--payload", payload, &p)) {
      json_decref(params);
      return XGR_EXIT_USAGE;
    }
    json_object_set_new(params, "payload", p);
  }
  json_t *res;
  int rc = xgr_client_call(&c, "wake", "xgr_wakeUpProcess", params, &res);
  if (rc) return rc;
  if (c.json) xgr_client_print_json(res);
  else printf("woke %lld process(es) of session %s (%s mode)\n", (long long)json_integer_value(json_object_get(res, "woken")),
              json_string_value(json_object_get(res, "rootPid")), json_string_value(json_object_get(res, "mode")));
  json_decref(res);
  return XGR_EXIT_OK;
}
