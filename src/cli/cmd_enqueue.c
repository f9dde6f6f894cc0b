/* cmd_enqueue.c — `xgr enqueue`: start (or find) a session on xgrd (xgr.enqueue). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: xgr enqueue --owner ADDR --step STEP [options]\n\n"
          "Start a session of a registered orchestration on xgrd (xgr.enqueue). The answer is queued,\n"
          "already_queued, paused or scheduled; the session is durable when it is answered.\n\n"
          "  --owner ADDR       the session's owner (0x + 40 hex)\n"
          "  --step STEP        the start step (default: the orchestration's first step)\n"
          "  --payload JSON     the start payload (an object, or @FILE to read it from FILE)\n"
          "  --root N           the rootPid (default: the owner's next one)\n"
          "  --registry NAME    the XRC-729 registry (address) it was registered under (default local)\n"
          "  --registry-owner ADDR  whose registry: the namespace it resolves in (default: the owner's,\n"
          "                     then the empty one of writes without an owner)\n"
          "  --ostc-id ID       the orchestration id inside the registry\n"
          "  --ostc-hash HASH   refuse to start unless the registered content has this hash, or the\n"
          "                     orchestration with the rules current now has this bundle hash (with\n"
          "                     --key the SessionPermit signs it)\n"
          "  --pin-bundle       ask xgrd for the current bundle hash and use it as --ostc-hash: the\n"
          "                     signed permit then covers the rules too\n"
          "  --wait-ms N        the start process waits N ms before it runs (init.waitMs; answered scheduled)\n"
          "%s", xgr_client_opts_help);
}

int xgr_cmd_enqueue(int argc, char **argv) {
  xgr_client c;
  xgr_client_init(&c);
  const char *owner = NULL, *step = NULL, *payload = NULL, *root = NULL, *reg = NULL, *id = NULL, *hash = NULL, *wait = NULL,
             *reg_owner = NULL, *pin = NULL;
  const char **dst[] = {&owner, &step, &payload, &root, &reg, &id, &hash, &wait, &reg_owner, &pin};   /* by the options' val */
  static const struct option opts[] = {
    {"owner", required_argument, NULL, 0}, {"step", required_argument, NULL, 1}, {"payload", required_argument, NULL, 2},
    {"root", required_argument, NULL, 3}, {"registry", required_argument, NULL, 4}, {"ostc-id", required_argument, NULL, 5},
    {"ostc-hash", required_argument, NULL, 6}, {"wait-ms", required_argument, NULL, 7},
    {"registry-owner", required_argument, NULL, 8}, {"pin-bundle", no_argument, NULL, 9}, XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  int ch, orc;
  optind = 1;
  while ((ch = xgr_client_getopt(&c, argc, argv, opts, "xgr enqueue", usage, &orc)) != -1) {
    if (ch == -2) return orc;
    *dst[ch] = ch == 9 ? "" : optarg;
  }
  if (optind < argc) {
    fprintf(stderr, "xgr enqueue: unexpected '%s' (every value goes with its option)\n", argv[optind]);
    return XGR_EXIT_USAGE;
  }
  if (!owner) owner = c.from;
  if (!owner) {
    fprintf(stderr, "xgr enqueue: --owner is required\n\n");
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  json_t *init = json_object();
  if (step) json_object_set_new(init, "stepId", json_string(step));
  if (payload) {
    json_t *p;
    if (xgr_cli_object_arg("xgr enqueue", "--payload", payload, &p)) {
      json_decref(init);
      return XGR_EXIT_USAGE;
    }
    json_object_set_new(init, "payload", p);
  }
  if (wait) json_object_set_new(init, "waitMs", json_string(wait));   /* xgrd checks the number */
  json_t *params = json_pack("{s:s, s:o}", "owner", owner, "init", init);
  if (root) json_object_set_new(params, "rootPid", json_string(root));
  if (reg) json_object_set_new(params, "xrc729", json_string(reg));
  if (id) json_object_set_new(params, "ostcId", json_string(id));
  if (reg_owner) json_object_set_new(params, "registryOwner", json_string(reg_owner));
  char bundle[67];
  if (pin) {   /* the bundle hash the orchestration makes with the rules current now */
    if (hash) {
      fprintf(stderr, "xgr enqueue: --pin-bundle and --ostc-hash exclude each other\n");
      json_decref(params);
      return XGR_EXIT_USAGE;
    }
    json_t *q = json_pack("{s:s}", "owner", reg_owner ? reg_owner : owner), *g;
    if (reg) json_object_set_new(q, "xrc729", json_string(reg));
    if (id) json_object_set_new(q, "ostcId", json_string(id));
    xgr_client plain = c;
    plain.has_key = false;
    int grc = xgr_client_call(&plain, "enqueue", "xgr.getOrchestration", q, &g);
    if (grc) {
      json_decref(params);
      return grc;
    }
    const char *bh = json_string_value(json_object_get(g, "bundleHash"));
    snprintf(bundle, sizeof bundle, "%s", bh ? bh : "");
    json_decref(g);
    if (!bundle[0]) {
      fprintf(stderr, "xgr enqueue: --pin-bundle: the orchestration does not assemble with the rules registered now "
                      "(xgr.getOrchestration answered no bundleHash)\n");
      json_decref(params);
      return XGR_EXIT_HARD;
    }
    hash = bundle;
  }
  if (hash) json_object_set_new(params, "ostcHash", json_string(hash));
  json_t *res;
  int rc = xgr_client_call(&c, "enqueue", "xgr.enqueue", params, &res);
  if (rc) return rc;
  if (c.json) xgr_client_print_json(res);
  else
    printf("%s  session %s/%s  pid %s  ostcHash %s\n", json_string_value(json_object_get(res, "ack")),
           json_string_value(json_object_get(res, "owner")), json_string_value(json_object_get(res, "rootPid")),
           json_string_value(json_object_get(res, "pid")), json_string_value(json_object_get(res, "ostcHash")));
  json_decref(res);
  return XGR_EXIT_OK;
}
