/* cmd_put.c — `xgr put-orchestration FILE` and `xgr put-rule FILE`: register a document in xgrd's
 * registries (xgr.putOrchestration / xgr_putRule). The file's exact bytes are sent, so the hash
 * xgrd answers is keccak-256 of the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/load.h"
#include "xgr/orch.h"

static void orch_usage(FILE *f) {
  fprintf(f, "usage: xgr put-orchestration FILE [--registry NAME] [--ostc-id ID] [options]\n\n"
          "Register an XRC-729 orchestration under REGISTRY/ID (xgr.putOrchestration); ID defaults to its\n"
          "\"id\" and REGISTRY to local. Prints its version and hash (keccak-256 of the file's bytes).\n\n"
          "  --registry NAME  the XRC-729 registry address (or a name)\n  --ostc-id ID     the id to register under\n%s",
          xgr_client_opts_help);
}
static void rule_usage(FILE *f) {
  fprintf(f, "usage: xgr put-rule FILE --address ADDR|ALIAS [options]\n\n"
          "Register an XRC-137 rule document under an address or alias (xgr_putRule). Steps find it by\n"
          "their \"rule\" reference: the address, ${addr:ALIAS} or ALIAS.\n\n%s", xgr_client_opts_help);
}

static int put(int argc, char **argv, bool orch) {
  const char *name = orch ? "put-orchestration" : "put-rule";
  xgr_client c;
  xgr_client_init(&c);
  const char *file = NULL, *reg = NULL, *id = NULL, *addr = NULL;
  const char **dst[] = {&reg, &id, &addr};   /* by the options' val */
  static const struct option orch_opts[] = {
    {"registry", required_argument, NULL, 0}, {"ostc-id", required_argument, NULL, 1}, XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  static const struct option rule_opts[] = {{"address", required_argument, NULL, 2}, XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  char prog[64];
  snprintf(prog, sizeof prog, "xgr %s", name);
  int ch, orc;
  optind = 1;
  while ((ch = xgr_client_getopt(&c, argc, argv, orch ? orch_opts : rule_opts, prog, orch ? orch_usage : rule_usage,
                                 &orc)) != -1) {
    if (ch == -2) return orc;
    *dst[ch] = optarg;
  }
  if (optind < argc) file = argv[optind];
  if (optind + 1 < argc) {
    fprintf(stderr, "%s: unexpected '%s' (one FILE; %s --help)\n", prog, argv[optind + 1], prog);
    return XGR_EXIT_USAGE;
  }
  if (!file || (!orch && !addr)) {
    fprintf(stderr, "xgr %s: %s is required (xgr %s --help)\n", name, file ? "--address" : "FILE", name);
    return XGR_EXIT_USAGE;
  }
  size_t len;
  char *bytes = xgr_client_read_file(name, file, orch ? XGR_MAX_OSTC_BYTES : 131072, &len);
  if (!bytes) return XGR_EXIT_USAGE;
  json_t *probe = json_loadb(bytes, len, 0, NULL);   /* the wrong kind of file gets a hint, not a schema error */
  cli_kind kind = cli_doc_kind(probe), want = orch ? CLI_DOC_ORCH : CLI_DOC_RULE;
  json_decref(probe);
  if (kind != CLI_DOC_UNKNOWN && kind != want) {
    char hint[512];
    fprintf(stderr, "xgr %s: %s is %s, not %s; %s\n", name, file, cli_doc_kind_name(kind), cli_doc_kind_name(want),
            cli_doc_hint(kind, file, hint, sizeof hint));
    free(bytes);
    return XGR_EXIT_USAGE;
  }
  json_t *params = json_object();
  json_object_set_new(params, orch ? "orchestration" : "rule", json_stringn(bytes, len));
  free(bytes);
  if (reg) json_object_set_new(params, "xrc729", json_string(reg));
  if (id) json_object_set_new(params, "ostcId", json_string(id));
  if (addr) json_object_set_new(params, "address", json_string(addr));
  json_t *res;
  int rc = xgr_client_call(&c, name, orch ? "xgr.putOrchestration" : "xgr_putRule", params, &res);
  if (rc) return rc;
  if (c.json) xgr_client_print_json(res);
  else if (orch)
    printf("orchestration %s/%s version %lld  %s\n", json_string_value(json_object_get(res, "registry")),
           json_string_value(json_object_get(res, "ostcId")), (long long)json_integer_value(json_object_get(res, "version")),
           json_string_value(json_object_get(res, "hash")));
  else
    printf("rule %s version %lld  %s\n", json_string_value(json_object_get(res, "address")),
           (long long)json_integer_value(json_object_get(res, "version")), json_string_value(json_object_get(res, "hash")));
  json_decref(res);
  return XGR_EXIT_OK;
}

int xgr_cmd_put_orchestration(int argc, char **argv) { return put(argc, argv, true); }
int xgr_cmd_put_rule(int argc, char **argv) { return put(argc, argv, false); }
