/* cmd_publish.c — `xgr publish BUNDLE --chain URL --key FILE [--registry ADDR] [--json]`: put a
 * bundle on a chain. Each rule becomes an XRC-137 contract (constructor argument: the rule's
 * compact JSON), the orchestration's `rule` references are rewritten to the deployed addresses,
 * an XRC-729 registry is deployed (unless --registry names one the key owns) and setOSTC(id, json)
 * stores the orchestration. The OSTC hash printed is keccak-256 of the bytes getOSTC returns.
 *
 * Safe to re-run with --registry: rules whose text is already behind a step of the registered
 * orchestration keep their contract (getRule() compared byte for byte), and setOSTC is skipped
 * when the registered text is already the new one. Transactions are signed EIP-1559 transactions
 * of the key (src/chain/tx.c), sent one after the other.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "xgr/alloc.h"
#include "xgr/abi.h"
#include "xgr/bundle.h"
#include "xgr/chain.h"
#include "xgr/json.h"
#include "xgr/keccak.h"
#include "xgr/secp.h"

static void usage(FILE *f) {
  fputs("usage: xgr publish BUNDLE --chain URL --key FILE [--registry ADDR] [--json]\n\n"
        "Deploy a bundle ({\"orchestration\", \"rules\"}) to an Ethereum node: every rule as an XRC-137\n"
        "contract, the orchestration (its step `rule` references rewritten to the deployed\n"
        "addresses) into an XRC-729 registry with setOSTC. Without --registry a new registry is\n"
        "deployed; with it, the key must be its owner, unchanged rules keep their contracts and an\n"
        "unchanged orchestration is not written again. Prints the registry, the ostcId, the OSTC\n"
        "hash (keccak-256 of the registered text) and each rule's address.\n\n"
        "  --chain URL      the node's JSON-RPC URL\n"
        "  --key FILE       private key file (64 hex digits, mode 0600) that signs the transactions\n"
        "  --registry ADDR  an existing XRC-729 registry to update\n"
        "  --json           print {\"registry\",\"ostcId\",\"ostcHash\",\"rules\":{\"<name>\":\"0x…\"}}\n\n"
        "Exit: 0 published, 2 usage or unreadable input, 3 the bundle does not load or a chain call\n"
        "failed.\n",
        f);
}

typedef struct pub {
  xgr_chain *chain;
  xgr_chain_sender tx;
  bool quiet;
} pub;

/* eth_call returning one value of a declared type; *out the value (caller releases). */
static int call1(pub *p, const char *to, const char *sig, const xgr_value *args, size_t n, xgr_value *out, xgr_error *e) {
  xgr_value list;
  int rc = xgr_chain_eth_call(p->chain, NULL, p->tx.from, to, sig, args, n, &list, NULL, e);
  if (rc) return rc;
  *out = xgr_value_retain(xgr_list_get(list, 0));
  xgr_value_release(list);
  return 0;
}

/* Deploy `bytecode` with constructor arguments ctor_types / args; writes the address. */
static int deploy(pub *p, const char *bytecode, const char *ctor_types, const xgr_value *args, size_t n, char addr[43],
                  xgr_error *e) {
  xgr_abi_type *t = NULL;
  int rc = xgr_abi_type_parse(ctor_types, strlen(ctor_types), &t, e);
  if (rc) return rc;
  uint8_t *enc;
  size_t el;
  rc = xgr_abi_encode(t, args, n, &enc, &el, e);
  xgr_abi_type_free(t);
  if (rc) return rc;
  size_t cl;
  uint8_t *code = xgr_hex_decode_alloc(bytecode, strlen(bytecode), &cl);
  if (!code) abort();  /* generated from the committed builds: always hex */
  uint8_t *data = xgr_alloc_bytes(cl + el);
  memcpy(data, code, cl);
  memcpy(data + cl, enc, el);
  free(code);
  free(enc);
  json_t *rcpt;
  char hash[67];
  rc = xgr_chain_send(&p->tx, NULL, data, cl + el, 0, hash, &rcpt, e);
  free(data);
  if (rc) return rc;
  const char *ca = json_string_value(json_object_get(rcpt, "contractAddress"));
  if (!ca || strlen(ca) != 42) rc = xgr_error_set(e, XGR_EHTTP, NULL, "receipt of %s has no contract address", hash);
  else snprintf(addr, 43, "%s", ca);
  json_decref(rcpt);
  return rc;
}

/* Send a call of sig with args to `to`. */
static int transact(pub *p, const char *to, const char *sig, const xgr_value *args, size_t n, xgr_error *e) {
  xgr_abi_sig *s = NULL;
  int rc = xgr_abi_sig_parse(sig, strlen(sig), &s, e);
  if (rc) return rc;
  uint8_t *data;
  size_t dl;
  rc = xgr_abi_encode_call(s, args, n, &data, &dl, e);
  xgr_abi_sig_free(s);
  if (rc) return rc;
  char hash[67];
  rc = xgr_chain_send(&p->tx, to, data, dl, 0, hash, NULL, e);
  free(data);
  return rc;
}

static void lower(char *s) {
  for (; *s; s++)
    if (*s >= 'A' && *s <= 'F') *s = (char)(*s - 'A' + 'a');
}

/* Rules already behind the steps of the registered OSTC: {rule text -> address}. */
static json_t *existing_rules(pub *p, const char *registry, const char *id, xgr_error *e) {
  json_t *known = json_object();
  xgr_value idv = xgr_value_cstring(id), has, ostc;
  int rc = call1(p, registry, "hasOSTC(string)(bool)", &idv, 1, &has, e);
  if (rc == 0 && has.kind == XGR_VBOOL && has.as.b && call1(p, registry, "getOSTC(string)(string)", &idv, 1, &ostc, e) == 0) {
    size_t n;
    const char *txt = xgr_value_str(ostc, &n);
    json_error_t je;
    json_t *doc = json_loadb(txt, n, 0, &je);
    const char *k;
    json_t *step;
    json_object_foreach(json_object_get(doc, "structure"), k, step) {
      const char *ra = json_string_value(json_object_get(step, "rule"));
      xgr_value rule;
      if (!ra || !xgr_xrc_is_address(ra, strlen(ra))) continue;
      if (call1(p, ra, "getRule()(string)", NULL, 0, &rule, e) == 0) {
        size_t rl;
        const char *rt = xgr_value_str(rule, &rl);
        char *key = xgr_alloc_bytes(rl + 1);
        memcpy(key, rt, rl);
        key[rl] = 0;
        json_object_set_new(known, key, json_string(ra));
        free(key);
        xgr_value_release(rule);
      }
    }
    json_decref(doc);
    xgr_value_release(ostc);
  }
  xgr_value_release(has);
  xgr_value_release(idv);
  xgr_error_clear(e);
  return known;
}

static int publish(pub *p, const char *file, const char *registry_in, bool as_json) {
  xgr_error e;
  xgr_diags d;
  xgr_diags_init(&d);
  xgr_bundle *b = NULL;
  int rc = xgr_bundle_load_file(file, &b, &e, &d);
  xgr_diags_free(&d);
  if (rc) {
    fprintf(stderr, "xgr publish: %s: %s%s%s\n", file, e.path, e.path[0] ? ": " : "", e.message);
    return rc == XGR_EIO ? XGR_EXIT_USAGE : XGR_EXIT_HARD;
  }
  json_error_t je;
  json_t *doc = json_load_file(file, JSON_REJECT_DUPLICATES, &je);
  json_t *orch = json_object_get(doc, "orchestration"), *rules = json_object_get(doc, "rules");
  const char *id = json_string_value(json_object_get(orch, "id"));
  int code = XGR_EXIT_OK;
  json_t *deployed = json_object(), *known = NULL;
  char registry[43] = {0};
  char *ostc_text = NULL;
  if (!id || !*id) {
    fprintf(stderr, "xgr publish: %s: orchestration.id: the registry stores the orchestration under its id; it is missing\n", file);
    code = XGR_EXIT_USAGE;
    goto out;
  }
  if ((rc = xgr_chain_sender_init(&p->tx, &e))) goto chain_error;
  if (registry_in) {
    snprintf(registry, sizeof registry, "%s", registry_in);
    lower(registry);
    xgr_value owner;
    if ((rc = call1(p, registry, "owner()(address)", NULL, 0, &owner, &e))) goto chain_error;
    bool mine = !strcmp(xgr_value_str(owner, NULL), p->tx.from);
    xgr_value_release(owner);
    if (!mine) {
      fprintf(stderr, "xgr publish: --registry %s: the key's address %s is not the registry's owner\n", registry, p->tx.from);
      code = XGR_EXIT_USAGE;
      goto out;
    }
    known = existing_rules(p, registry, id, &e);
  }
  /* 1. rules */
  for (size_t i = 0; i < b->nrules; i++) {
    json_t *rj = json_object_get(rules, b->rule_keys[i]);
    char *text = json_dumps(rj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    const char *have = known ? json_string_value(json_object_get(known, text)) : NULL;
    char addr[43];
    if (have) {
      snprintf(addr, sizeof addr, "%s", have);
      if (!p->quiet) fprintf(stderr, "rule %s: unchanged at %s\n", b->rule_keys[i], addr);
    } else {
      xgr_value arg = xgr_value_cstring(text);
      rc = deploy(p, xgr_chain_contract_bytecode("XRC137"), "(string)", &arg, 1, addr, &e);
      xgr_value_release(arg);
      if (rc) {
        free(text);
        fprintf(stderr, "xgr publish: rules.%s: deploying the XRC-137 contract failed: %s\n", b->rule_keys[i], e.message);
        code = XGR_EXIT_HARD;
        goto out;
      }
      if (!p->quiet) fprintf(stderr, "rule %s: deployed at %s\n", b->rule_keys[i], addr);
    }
    free(text);
    json_object_set_new(deployed, b->rule_keys[i], json_string(addr));
  }
  /* 2. the orchestration with its references rewritten */
  json_t *ostc = json_deep_copy(orch);
  json_t *structure = json_object_get(ostc, "structure");
  for (size_t s = 0; s < b->orch->nsteps; s++) {
    const xgr_rule *r = b->step_rule[s];
    for (size_t k = 0; k < b->nrules; k++)
      if (b->rules[k] == r)
        json_object_set(json_object_get(structure, b->orch->steps[s].id), "rule", json_object_get(deployed, b->rule_keys[k]));
  }
  ostc_text = json_dumps(ostc, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(ostc);
  /* 3. the registry */
  if (!registry[0]) {
    xgr_value name = xgr_value_cstring("XGR_XRC729");
    rc = deploy(p, xgr_chain_contract_bytecode("XRC729"), "(string)", &name, 1, registry, &e);
    xgr_value_release(name);
    if (rc) goto chain_error;
    if (!p->quiet) fprintf(stderr, "registry: deployed at %s\n", registry);
  }
  xgr_value args[2] = {xgr_value_cstring(id), xgr_value_cstring(ostc_text)};
  xgr_value cur = xgr_value_null(), has;
  bool same = false;
  if (call1(p, registry, "hasOSTC(string)(bool)", args, 1, &has, &e) == 0 && has.kind == XGR_VBOOL && has.as.b &&
      call1(p, registry, "getOSTC(string)(string)", args, 1, &cur, &e) == 0)
    same = xgr_value_equal(cur, args[1]);
  xgr_value_release(cur);
  if (!same) rc = transact(p, registry, "setOSTC(string,string)", args, 2, &e);
  else if (!p->quiet) fprintf(stderr, "orchestration %s: unchanged\n", id);
  if (rc) {
    xgr_value_release(args[0]);
    xgr_value_release(args[1]);
    goto chain_error;
  }
  /* 4. the hash of exactly what the registry returns */
  xgr_value back;
  rc = call1(p, registry, "getOSTC(string)(string)", args, 1, &back, &e);
  xgr_value_release(args[0]);
  xgr_value_release(args[1]);
  if (rc) goto chain_error;
  size_t bl;
  const char *bt = xgr_value_str(back, &bl);
  char hash[67];
  xgr_keccak256_hex(bt, bl, hash);
  xgr_value_release(back);
  if (as_json) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:O}", "registry", registry, "ostcId", id, "ostcHash", hash, "rules", deployed);
    char *t = xgr_json_dumps(o, XGR_JSON_PRETTY);
    puts(t);
    free(t);
    json_decref(o);
  } else {
    printf("registry  %s\nostcId    %s\nostcHash  %s\n", registry, id, hash);
    const char *k;
    json_t *v;
    json_object_foreach(deployed, k, v) printf("rule      %s  %s\n", json_string_value(v), k);
  }
  goto out;
chain_error:
  fprintf(stderr, "xgr publish: %s\n", e.message);
  code = XGR_EXIT_HARD;
out:
  free(ostc_text);
  json_decref(known);
  json_decref(deployed);
  json_decref(doc);
  xgr_bundle_free(b);
  return code;
}

int xgr_cmd_publish(int argc, char **argv) {
  const char *file = NULL, *url = NULL, *keyfile = NULL, *registry = NULL;
  bool as_json = false;
  static const struct option opts[] = {
    {"json", no_argument, NULL, 'j'}, {"chain", required_argument, NULL, 'c'}, {"key", required_argument, NULL, 'k'},
    {"registry", required_argument, NULL, 'r'}, {"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
  int ch;
  optind = 1;
  while ((ch = xgr_cli_getopt(argc, argv, "h", opts, "xgr publish")) != -1) {
    switch (ch) {
      case 'h': usage(stdout); return XGR_EXIT_OK;
      case 'j': as_json = true; break;
      case 'c': url = optarg; break;
      case 'k': keyfile = optarg; break;
      case 'r': registry = optarg; break;
      default: return XGR_EXIT_USAGE;   /* reported by xgr_cli_getopt */
    }
  }
  if (optind < argc) file = argv[optind];
  if (optind + 1 < argc) {
    fprintf(stderr, "xgr publish: unexpected '%s' (one BUNDLE)\n", argv[optind + 1]);
    return XGR_EXIT_USAGE;
  }
  if (!file || !url || !keyfile) {
    fprintf(stderr, "xgr publish: %s\n\n", !file ? "a BUNDLE is required" : !url ? "--chain URL is required" : "--key FILE is required");
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  if (registry && !xgr_xrc_is_address(registry, strlen(registry))) {
    fprintf(stderr, "xgr publish: --registry \"%s\": expected \"0x\" + 40 hex digits\n", registry);
    return XGR_EXIT_USAGE;
  }
  pub p = {.quiet = as_json};
  xgr_error e;
  p.chain = xgr_chain_new();
  if (xgr_chain_add(p.chain, url, &e)) {
    fprintf(stderr, "xgr publish: %s\n", e.message);
    xgr_chain_free(p.chain);
    return XGR_EXIT_USAGE;
  }
  xgr_secp *secp = xgr_secp_new();
  if (!secp) {
    fprintf(stderr, "xgr publish: cannot create a secp256k1 context\n");
    xgr_chain_free(p.chain);
    return XGR_EXIT_HARD;
  }
  int code;
  p.tx = (xgr_chain_sender){.chain = p.chain, .secp = secp};
  if (xgr_secp_key_load(secp, keyfile, p.tx.key, &e)) {
    fprintf(stderr, "xgr publish: --key %s: %s\n", keyfile, e.message);
    code = XGR_EXIT_USAGE;
  } else {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    code = publish(&p, file, registry, as_json);
    curl_global_cleanup();
  }
  memset(p.tx.key, 0, sizeof p.tx.key);
  xgr_secp_free(secp);
  xgr_chain_free(p.chain);
  return code;
}
