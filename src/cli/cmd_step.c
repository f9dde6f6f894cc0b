/* cmd_step.c — `xgr step RULE.json [--payload JSON] [--api-map A=B]... [--json]`: run one
 * XRC-137 step on a payload (real HTTP for apiCalls) and print the result. Exit 0 valid,
 * 1 invalid, 3 hard error (including a rule document that does not load), 2 usage or unreadable
 * input. libcurl's global initialisation happens here, once, as xgr/rule.h asks of its callers. */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/load.h"
#include "xgr/chain.h"
#include "xgr/json.h"
#include "xgr/rule.h"
#include "xgr/secp.h"
#include "xgr/xrc_types.h"

#define MAX_MAPS 32

static const char usage_text[] =
    "usage: xgr step RULE.json [--payload JSON|@FILE] [--api-map FROM=TO]... [--json]\n"
    "                 [--owner ADDR] [--session-id N] [--pid PID] [--step-id ID]\n"
    "                 [--chain URL] [--chain NAME=URL]... [--engine-key FILE] [--allow-outbound CIDR]...\n"
    "       xgr step BUNDLE.json --rule NAME ...   (NAME: a key of the bundle's rules, or a step id)\n\n"
    "Run one XRC-137 step: input casts and defaults, contract reads (eth_call on the --chain\n"
    "backend a read's `rpc` selects, the unnamed one by default; without --chain their defaults\n"
    "apply), API calls over HTTP, rules, branch. --api-map rewrites URL prefixes, e.g.\n"
    "--api-map https://api.coinbase.com=http://127.0.0.1:8081 --allow-outbound loopback (API calls\n"
    "to loopback, link-local, private, CGNAT, multicast and reserved addresses are refused unless\n"
    "--allow-outbound names them: a CIDR, an address or a class word; docs/SECURITY.md, Outbound\n"
    "calls). Prints the result readably, or as JSON with --json: each rule with its result\n"
    "(true, false, missing key, error, skipped), required inputs that are missing, and why keys\n"
    "could not be produced (soft-invalid).\n"
    "With --engine-key FILE (and --chain) the branch's `execution` is sent as a signed EIP-1559\n"
    "transaction from that key and its receipt shown (\"execution\": {\"txHash\", \"status\",\n"
    "\"gasUsed\", \"blockNumber\", \"return\" | \"revertReason\"}).\n"
    "Exit: 0 valid, 1 invalid, 2 usage or unreadable input, 3 hard error.\n";

static void print_value_line(const char *label, xgr_value v) {
  char *t = xgr_value_to_json_text(v, 0, NULL);
  printf("%-10s %s\n", label, t ? t : "?");
  free(t);
}

/* Each rule with its result; the source text comes from the document (doc, may be NULL). */
static void print_rules(const xgr_step_result *r, const json_t *doc) {
  static const char *const rname[] = {"false", "true", "missing", "error", "skipped"};
  static const char *const tname[] = {"", "abortStep ", "cancelSession "};
  const json_t *rules = json_object_get(doc, "rules");
  for (size_t i = 0; i < r->nrule_reports; i++) {
    const xgr_rule_report *rr = &r->rule_reports[i];
    const json_t *e = json_array_get(rules, i);
    const char *src = json_is_string(e) ? json_string_value(e) : json_string_value(json_object_get(e, "expression"));
    printf("rule[%zu]    %-8s %s%s", i, rname[rr->outcome % 5], tname[rr->type % 3], src ? src : "");
    if (rr->detail) printf("   (%s)", rr->detail);
    else if (rr->outcome == XGR_RULE_SKIPPED) printf("   (%s)", r->missing_input ? "a required input is missing" : "not reached");
    printf("\n");
  }
}

/* Required inputs (no default) that the payload lacks: why the invalid branch was forced. */
static void print_missing_inputs(const xgr_rule *rule, xgr_value given) {
  for (size_t i = 0; i < xgr_rule_ninputs(rule); i++) {
    const char *name = xgr_rule_input_name(rule, i);
    xgr_value v;
    if (xgr_rule_input_required(rule, i) && !(given.kind == XGR_VMAP && xgr_map_get_str(given, name, strlen(name), &v)))
      printf("missing    input %s: required (no default) and not in the payload — the invalid branch runs\n", name);
  }
}

static void print_readable(const xgr_step_result *r) {
  if (r->error.code) {
    printf("hard error  %s: %s [%s]\n", r->error.path[0] ? r->error.path : "(document)", r->error.message,
           xgr_errcode_name(r->error.code));
  } else if (r->action != XGR_ACTION_NONE) {
    printf("%s    (rules say %s; no branch ran)\n", xgr_rule_action_name(r->action), r->valid ? "valid" : "invalid");
  } else {
    printf("%s\n", r->valid ? "valid" : "invalid");
  }
  for (size_t i = 0; i < r->napi_calls; i++) {
    const xgr_api_call_report *c = &r->api_calls[i];
    printf("api %-6s %s: status %ld, %.0f ms%s%s%s%s\n", "", c->name ? c->name : "?", c->status, c->ms,
           c->url ? ", " : "", c->url ? c->url : "", c->error ? ", error: " : "", c->error ? c->error : "");
  }
  for (size_t i = 0; i < r->nreads; i++)
    printf("read       %s: %s\n", r->reads[i].function, r->reads[i].error ? r->reads[i].error : "ok");
  print_value_line("payload", r->payload);
  if (xgr_map_size(r->extracted)) print_value_line("extracted", r->extracted);
  print_value_line("output", r->output);
  print_value_line("effective", r->effective);
  if (xgr_list_size(r->soft_invalid)) {
    print_value_line("soft", r->soft_invalid);
    printf("%-10s missing required inputs, or keys whose value could not be produced because a placeholder\n"
           "%-10s or variable they read is missing: the outcome is the invalid branch, without them\n", "", "");
  }
  if (r->wait_sec) printf("%-10s %" PRIu64 "\n", "waitSec", r->wait_sec);
  if (r->execution) printf("%-10s to %s %s (%zu args)\n", "execution", r->execution->to,
                           r->execution->function ? r->execution->function : "", r->execution->nargs);
  for (size_t i = 0; i < r->ngrants; i++)
    printf("%-10s %s rights %u, %u days\n", "grant", r->grants[i].address, r->grants[i].rights, r->grants[i].expire_days);
  for (size_t i = 0; i < r->nwakeups; i++) {
    const xgr_wakeup *w = &r->wakeups[i];
    if (w->skipped) printf("%-10s skipped: %s\n", "wakeUp", w->skip_reason ? w->skip_reason : "");
    else printf("%-10s %s session %" PRIu64 " step %s\n", "wakeUp", w->runner, w->session_id, w->step_id);
  }
}

/* Sign and send the step's execution from the key in keyfile; the record of its outcome (an error
 * record when the key or the node fails). */
static json_t *run_execution(xgr_chain *chain, const char *keyfile, const xgr_execution *x) {
  xgr_secp *secp = xgr_secp_new();
  xgr_chain_sender s = {.chain = chain, .secp = secp};
  xgr_error e;
  json_t *rec;
  xgr_chain_signed tx;
  if (!secp) {
    rec = json_pack("{s:s, s:s}", "status", "failed", "error", "cannot create a secp256k1 context");
  } else if (xgr_secp_key_load(secp, keyfile, s.key, &e)) {
    rec = json_pack("{s:s, s:s+}", "status", "failed", "error", "--engine-key: ", e.message);
  } else if (xgr_chain_exec_sign(&s, x, &tx, &e)) {
    rec = e.code == XGR_EEVAL ? xgr_chain_exec_refused(&e) : json_pack("{s:s, s:s}", "status", "failed", "error", e.message);
  } else {
    rec = xgr_chain_exec_settle(&s, x, &tx);
    xgr_chain_signed_clear(&tx);
  }
  memset(s.key, 0, sizeof s.key);
  xgr_secp_free(secp);
  return rec;
}

/* The command, with --chain backends collected into *chain and --allow-outbound into *outbound
 * (freed by xgr_cmd_step). */
static int step_cmd(int argc, char **argv, xgr_chain **chain, xgr_outbound_policy **outbound) {
  const char *rule_path = NULL, *payload_arg = NULL, *rule_name = NULL;
  xgr_api_map_entry maps[MAX_MAPS];
  size_t nmaps = 0;
  bool as_json = false;
  xgr_step_ctx ctx = {0};
  xgr_chain_reader reader;
  const char *engine_key = NULL;
  ctx.owner = "0x0000000000000000000000000000000000000000";
  ctx.session_id = 1;
  ctx.pid = "1:1";
  ctx.step_id = "step";
  static const struct option opts[] = {
    {"json", no_argument, NULL, 'j'}, {"payload", required_argument, NULL, 'p'}, {"api-map", required_argument, NULL, 'a'},
    {"chain", required_argument, NULL, 'C'}, {"engine-key", required_argument, NULL, 'K'},
    {"owner", required_argument, NULL, 'o'}, {"session-id", required_argument, NULL, 'S'},
    {"pid", required_argument, NULL, 'P'}, {"rule", required_argument, NULL, 'r'},
    {"step-id", required_argument, NULL, 's'}, {"help", no_argument, NULL, 'h'},
    {"allow-outbound", required_argument, NULL, 'O'}, {0, 0, 0, 0}};
  int ch;
  optind = 1;
  while ((ch = xgr_cli_getopt(argc, argv, "h", opts, "xgr step")) != -1) {
    switch (ch) {
      case 'h': fputs(usage_text, stdout); return XGR_EXIT_OK;
      case 'j': as_json = true; break;
      case 'p': payload_arg = optarg; break;
      case 'a':
        if (xgr_cli_api_map_arg("xgr step", optarg, maps, &nmaps, MAX_MAPS)) return XGR_EXIT_USAGE;
        break;
      case 'C':
        if (xgr_cli_chain_arg("xgr step", optarg, chain)) return XGR_EXIT_USAGE;
        break;
      case 'O':
        if (xgr_cli_outbound_arg("xgr step", optarg, outbound)) return XGR_EXIT_USAGE;
        break;
      case 'K': engine_key = optarg; break;
      case 'o':
        ctx.owner = optarg;
        if (!xgr_xrc_is_address(ctx.owner, strlen(ctx.owner))) {
          fprintf(stderr, "xgr step: --owner is '%s'; expected an address (\"0x\" and 40 hex digits)\n", ctx.owner);
          return XGR_EXIT_USAGE;
        }
        break;
      case 'S': {
        char *end;
        errno = 0;
        const char *sv = optarg;
        ctx.session_id = strtoull(sv, &end, 10);
        if (*end || end == sv || sv[0] == '-' || errno == ERANGE || !ctx.session_id) {
          fprintf(stderr, "xgr step: --session-id is '%s'; expected an integer from 1 to 18446744073709551615\n", sv);
          return XGR_EXIT_USAGE;
        }
        break;
      }
      case 'P': ctx.pid = optarg; break;
      case 'r': rule_name = optarg; break;
      case 's': ctx.step_id = optarg; break;
      default: return XGR_EXIT_USAGE;   /* reported by xgr_cli_getopt */
    }
  }
  if (optind < argc) rule_path = argv[optind];
  if (optind + 1 < argc) {
    fprintf(stderr, "xgr step: one rule document at a time\n");
    return XGR_EXIT_USAGE;
  }
  if (!rule_path) {
    fputs(usage_text, stderr);
    return XGR_EXIT_USAGE;
  }
  if (engine_key && !*chain) {
    fprintf(stderr, "xgr step: --engine-key needs --chain URL (the node the execution is sent to)\n");
    return XGR_EXIT_USAGE;
  }
  if (*chain) {
    reader = xgr_chain_reader_of(*chain);
    ctx.chain = &reader;
  }
  ctx.api_map = maps;
  ctx.napi_map = nmaps;
  ctx.outbound = *outbound;

  xgr_error e;
  char *buf = NULL;
  size_t len = 0;
  if (xgr_file_read(rule_path, &buf, &len, 16u << 20, &e)) {
    fprintf(stderr, "xgr step: %s: %s\n", rule_path, e.message);
    return XGR_EXIT_USAGE;
  }
  /* what kind of document is it? a bundle needs --rule; an orchestration is the wrong file */
  json_t *root = NULL, *doc = NULL;
  char hint[512];
  if (xgr_json_parse(buf, len, &root, &e)) {
    fprintf(stderr, "%s: %s: error: %s [%s]\n", rule_path, e.path[0] ? e.path : "(document)", e.message,
            xgr_errcode_name(e.code));
    free(buf);
    return XGR_EXIT_HARD;
  }
  cli_kind kind = cli_doc_kind(root);
  if (kind == CLI_DOC_BUNDLE) {
    const json_t *rules = json_object_get(root, "rules");
    doc = rule_name ? json_object_get(rules, rule_name) : NULL;
    if (!doc && rule_name) {   /* a step id: the rule its step names (address, ${addr:ALIAS} or alias) */
      const char *ref = json_string_value(json_object_get(
          json_object_get(json_object_get(json_object_get(root, "orchestration"), "structure"), rule_name), "rule"));
      char key[256] = "";
      if (ref) snprintf(key, sizeof key, "%s", ref);
      size_t kl = strlen(key);
      if (!strncmp(key, "${addr:", 7) && kl > 8 && key[kl - 1] == '}') {
        memmove(key, key + 7, kl - 8);
        key[kl - 8] = '\0';
      }
      const char *k;
      json_t *v;
      json_object_foreach((json_t *)rules, k, v) if (key[0] && !strcasecmp(k, key)) doc = v;
    }
    if (!doc) {
      char names[400] = "";
      const char *k;
      json_t *v;
      json_object_foreach((json_t *)rules, k, v)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", k);
      fprintf(stderr, "xgr step: %s is a bundle; %s --rule NAME, a key of its rules (%s) or a step id\n", rule_path,
              rule_name ? "no rule or step matches" : "name the rule to run with", names[0] ? names : "none");
      json_decref(root);
      free(buf);
      return XGR_EXIT_USAGE;
    }
    json_incref(doc);
  } else if (kind != CLI_DOC_RULE) {
    fprintf(stderr, "xgr step: %s is %s, not a rule document; %s\n", rule_path, cli_doc_kind_name(kind),
            cli_doc_hint(kind, rule_path, hint, sizeof hint));
    json_decref(root);
    free(buf);
    return XGR_EXIT_USAGE;
  } else {
    doc = json_incref(root);
  }
  json_decref(root);
  if (rule_name && kind != CLI_DOC_BUNDLE) {
    fprintf(stderr, "xgr step: --rule picks a rule of a bundle; %s is already a rule document\n", rule_path);
    json_decref(doc);
    free(buf);
    return XGR_EXIT_USAGE;
  }
  xgr_diags lint;
  xgr_diags_init(&lint);
  xgr_rule_lint(doc, &lint);
  for (size_t k = 0; k < lint.n; k++)
    fprintf(stderr, "%s: %s: warning: %s [%s]\n", rule_path, lint.items[k].path, lint.items[k].message, lint.items[k].code);
  xgr_diags_free(&lint);
  free(buf);
  buf = json_dumps(doc, JSON_COMPACT);
  len = buf ? strlen(buf) : 0;
  xgr_rule *rule = NULL;
  int rc = buf ? xgr_rule_parse(buf, len, &rule, &e) : XGR_ENOMEM;
  free(buf);
  if (rc) {
    if (as_json) {
      json_t *o = json_pack("{s:b,s:{s:s,s:s,s:s}}", "valid", 0, "error", "path", e.path, "code",
                            xgr_errcode_name(e.code), "message", e.message);
      char *t = xgr_json_dumps(o, XGR_JSON_PRETTY);
      printf("%s\n", t);
      free(t);
      json_decref(o);
    }
    fprintf(stderr, "%s: %s: error: %s [%s]\n", rule_path, e.path[0] ? e.path : "(document)", e.message,
            xgr_errcode_name(e.code));
    json_decref(doc);
    return XGR_EXIT_HARD;
  }

  xgr_value payload = xgr_value_null();
  if (payload_arg && xgr_cli_value_arg("xgr step", "--payload", payload_arg, 0, true, &payload)) {
    xgr_rule_free(rule);
    json_decref(doc);
    return XGR_EXIT_USAGE;
  }

  {
    char what[300];
    if (rule_name) snprintf(what, sizeof what, "rule \"%s\" of %s", rule_name, rule_path);
    else snprintf(what, sizeof what, "%s", rule_path);
    cli_warn_undeclared("xgr step", "--payload", payload, rule, what);
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  xgr_http_exchange *x = xgr_rule_napi_calls(rule) ? xgr_http_exchange_new() : NULL;
  xgr_step_result res;
  xgr_step_run(rule, payload, &ctx, x, &res);
  xgr_http_exchange_free(x);
  json_t *exec_rec = NULL;
  if (engine_key && res.execution && !res.error.code) exec_rec = run_execution(*chain, engine_key, res.execution);

  if (as_json) {
    json_t *o = xgr_step_result_to_json(&res);
    if (exec_rec) json_object_update(json_object_get(o, "execution"), exec_rec);
    char *t = xgr_json_dumps(o, XGR_JSON_PRETTY);
    printf("%s\n", t);
    free(t);
    json_decref(o);
  } else {
    print_readable(&res);
    if (exec_rec) {
      char *t = xgr_json_dumps(exec_rec, 0);
      printf("%-10s %s\n", "receipt", t);
      free(t);
    }
    print_rules(&res, doc);
    if (res.missing_input) print_missing_inputs(rule, payload);
  }
  json_decref(exec_rec);
  int exit_code = res.error.code ? XGR_EXIT_HARD : res.valid && res.action == XGR_ACTION_NONE ? XGR_EXIT_OK : XGR_EXIT_FAIL;
  xgr_step_result_free(&res);
  xgr_value_release(payload);
  xgr_rule_free(rule);
  json_decref(doc);
  curl_global_cleanup();
  return exit_code;
}

int xgr_cmd_step(int argc, char **argv) {
  xgr_chain *chain = NULL;
  xgr_outbound_policy *outbound = NULL;
  int code = step_cmd(argc, argv, &chain, &outbound);
  xgr_chain_free(chain);
  xgr_outbound_policy_free(outbound);
  return code;
}
