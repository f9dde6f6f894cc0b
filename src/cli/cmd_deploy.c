/* cmd_deploy.c — `xgr deploy BUNDLE`: register a bundle's rules and then its orchestration on
 * xgrd in one go (xgr_putRule per rule, xgr.putOrchestration), so that sessions can be enqueued
 * on it. Rules go first: the orchestration's steps resolve against them when a session starts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "xgr/bundle.h"
#include "xgr/json.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: xgr deploy BUNDLE [--registry NAME] [--ostc-id ID] [options]\n\n"
          "Register a bundle ({\"orchestration\", \"rules\"}) on xgrd: every rule under its key, then the\n"
          "orchestration under REGISTRY/ID (ID defaults to its \"id\", REGISTRY to local). The bundle is\n"
          "checked locally first. Prints what was registered with versions and hashes.\n\n"
          "  --registry NAME  the XRC-729 registry address (or a name)\n"
          "  --ostc-id ID     the id to register the orchestration under\n"
          "%s", xgr_client_opts_help);
}

int xgr_cmd_deploy(int argc, char **argv) {
  xgr_client c;
  xgr_client_init(&c);
  const char *file = NULL, *reg = NULL, *id = NULL;
  const char **dst[] = {&reg, &id};   /* by the options' val */
  static const struct option opts[] = {
    {"registry", required_argument, NULL, 0}, {"ostc-id", required_argument, NULL, 1}, XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  int ch, orc;
  optind = 1;
  while ((ch = xgr_client_getopt(&c, argc, argv, opts, "xgr deploy", usage, &orc)) != -1) {
    if (ch == -2) return orc;
    *dst[ch] = optarg;
  }
  if (optind < argc) file = argv[optind];
  if (optind + 1 < argc) {
    fprintf(stderr, "xgr deploy: unexpected '%s' (one BUNDLE)\n", argv[optind + 1]);
    return XGR_EXIT_USAGE;
  }
  if (!file) {
    fprintf(stderr, "xgr deploy: BUNDLE is required\n\n");
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  xgr_bundle *b = NULL;
  xgr_error e;
  if (xgr_bundle_load_file(file, &b, &e, NULL)) {
    fprintf(stderr, "xgr deploy: %s: %s%s%s\n", file, e.path[0] ? e.path : "", e.path[0] ? ": " : "", e.message);
    return XGR_EXIT_USAGE;
  }
  xgr_bundle_free(b);
  json_t *doc = NULL;
  char *ftext = NULL;
  size_t flen = 0;
  if (xgr_file_read(file, &ftext, &flen, 64u << 20, &e) || xgr_json_parse_exact(ftext, flen, &doc, &e)) {   /* exact integers */
    free(ftext);
    fprintf(stderr, "xgr deploy: %s: %s\n", file, e.message);
    return XGR_EXIT_USAGE;
  }
  free(ftext);
  json_t *out = json_pack("{s:[], s:n}", "rules", "orchestration");
  const char *key;
  json_t *rule;
  int rc = 0;
  json_object_foreach(json_object_get(doc, "rules"), key, rule) {
    char *text = xgr_json_dumps_compact(rule);
    json_t *res;
    rc = xgr_client_call(&c, "deploy", "xgr_putRule", json_pack("{s:s, s:s}", "address", key, "rule", text), &res);
    free(text);
    if (rc) goto done;
    if (!c.json) {
      printf("rule %-44s version %-3lld %s", json_string_value(json_object_get(res, "address")),
             (long long)json_integer_value(json_object_get(res, "version")), json_string_value(json_object_get(res, "hash")));
      const json_t *rp = json_object_get(res, "replaces");
      if (rp) printf("  (replaces version %lld)", (long long)json_integer_value(json_object_get(rp, "version")));
      putchar('\n');
    }
    json_array_append_new(json_object_get(out, "rules"), res);
  }
  {
    char *text = xgr_json_dumps_compact(json_object_get(doc, "orchestration"));
    json_t *params = json_pack("{s:s}", "orchestration", text);
    free(text);
    if (reg) json_object_set_new(params, "xrc729", json_string(reg));
    if (id) json_object_set_new(params, "ostcId", json_string(id));
    json_t *res;
    rc = xgr_client_call(&c, "deploy", "xgr.putOrchestration", params, &res);
    if (rc) goto done;
    if (!c.json) {
      printf("orchestration %s/%s version %lld  %s", json_string_value(json_object_get(res, "registry")),
             json_string_value(json_object_get(res, "ostcId")), (long long)json_integer_value(json_object_get(res, "version")),
             json_string_value(json_object_get(res, "hash")));
      const json_t *rp = json_object_get(res, "replaces");
      if (rp) printf("  (replaces version %lld)", (long long)json_integer_value(json_object_get(rp, "version")));
      putchar('\n');
    }
    json_object_set_new(out, "orchestration", res);
  }
  if (c.json) xgr_client_print_json(out);
done:
  json_decref(out);
  json_decref(doc);
  return rc;
}
