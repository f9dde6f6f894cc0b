/* cmd_permit.c — the CLI as a permit signer.
 *
 * `xgr permit session|control|xdala [--chain-id N | --url URL] ...` prints one signed permit JSON
 * for curl users. The same code signs for every client command given `--key FILE` (or
 * $XGR_KEY_FILE): xgr_client_call asks xgr_client_attach_permit to put the permit the method needs
 * into params.permit — a SessionPermit for starts (sessionId = the rootPid asked for, else
 * xgr_getNextProcessId; ostcHash = the one asked for, else the registered orchestration's), a
 * ControlPermit for kill/pause/resume and wakes (ControlPermitV2 with runner = owner when the
 * signer is not the owner), an xdalaPermit for reads and registry writes. The chain id and the
 * control contract come from xgrd's xgr_getCoreAddrs unless given. Permits expire after
 * $XGR_PERMIT_TTL seconds (default 300). What each method needs is decided and signed by
 * xgr_permit_sign_call (src/auth/callsign.c); this file asks xgrd what the params do not say.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "xgr/permit.h"
#include "xgr/secp.h"

#define DEFAULT_TTL 300
#define DEFAULT_MAX_GAS 10000000ull

static int parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s) return -1;
  int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, hex ? 16 : 10);
  if (errno || *end || s[0] == '-') return -1;
  *out = v;
  return 0;
}

static uint64_t ttl_expiry(void) {
  uint64_t ttl = DEFAULT_TTL;
  const char *t = getenv("XGR_PERMIT_TTL");
  if (t && *t) parse_u64(t, &ttl);
  return (uint64_t)time(NULL) + ttl;
}

int xgr_client_load_key(xgr_client *c, const char *path) {
  xgr_secp *s = xgr_secp_new();
  xgr_error e;
  int rc = s ? xgr_secp_key_load(s, path, c->key, &e) : XGR_ENOMEM;
  uint8_t a[20];
  if (!rc) rc = xgr_secp_address(s, c->key, a, &e);
  xgr_secp_free(s);
  if (rc) {
    fprintf(stderr, "xgr: --key %s: %s\n", path, rc == XGR_ENOMEM ? "no randomness for a secp256k1 context" : e.message);
    c->key_failed = true;
    return -1;
  }
  xgr_addr_hex(a, c->key_addr);
  c->has_key = true;
  c->key_failed = false;
  if (!c->from || c->from_is_key) {
    c->from = c->key_addr;
    c->from_is_key = true;
  }
  return 0;
}

/* Chain id and control contract: given, or xgrd's xgr_getCoreAddrs. */
typedef struct chain {
  bool have_id, have_contract;
  uint64_t id;
  uint8_t contract[20];
} chain;

static int learn_chain(const xgr_client *c, const char *cmd, chain *ch, bool need_contract) {
  if (ch->have_id && (ch->have_contract || !need_contract)) return 0;
  xgr_client plain = *c;
  plain.has_key = false;
  json_t *res;
  int rc = xgr_client_call(&plain, cmd, "xgr_getCoreAddrs", json_object(), &res);
  if (rc) return rc;
  const char *id = json_string_value(json_object_get(res, "chainId"));
  const char *pc = json_string_value(json_object_get(res, "precompile"));
  if (!ch->have_id) {
    if (!id || parse_u64(id, &ch->id)) {
      fprintf(stderr, "xgr %s: xgrd's xgr_getCoreAddrs has no chainId; pass --chain-id\n", cmd);
      json_decref(res);
      return XGR_EXIT_HARD;
    }
    ch->have_id = true;
  }
  if (need_contract && !ch->have_contract) {
    if (!pc || xgr_hex_decode(pc, ch->contract, 20)) {
      fprintf(stderr, "xgr %s: xgrd's xgr_getCoreAddrs has no precompile (control contract); pass --control-contract\n",
              cmd);
      json_decref(res);
      return XGR_EXIT_HARD;
    }
    ch->have_contract = true;
  }
  json_decref(res);
  return 0;
}

static int sign_print(const char *cmd, const uint8_t key[32], const xgr_permit_fields *f, json_t **out) {
  xgr_secp *s = xgr_secp_new();
  if (!s) {
    fprintf(stderr, "xgr %s: cannot create a secp256k1 context\n", cmd);
    return XGR_EXIT_HARD;
  }
  xgr_error e;
  int rc = xgr_permit_sign(s, key, f, out, &e);
  xgr_secp_free(s);
  if (rc) {
    fprintf(stderr, "xgr %s: cannot sign: %s%s%s\n", cmd, e.path, e.path[0] ? ": " : "", e.message);
    return XGR_EXIT_USAGE;
  }
  return 0;
}

/* Callbacks of xgr_permit_sign_call: ask xgrd (without signing: these methods are public). */
typedef struct ask {
  xgr_client plain;
  const char *cmd;
  int exit_code;
} ask;

static int ask_next_pid(void *ctx, const char *from, uint64_t *out, xgr_error *err) {
  ask *a = ctx;
  json_t *res;
  if ((a->exit_code = xgr_client_call(&a->plain, a->cmd, "xgr_getNextProcessId", json_pack("{s:s}", "from", from), &res)))
    return xgr_error_set(err, XGR_EIO, NULL, "xgr_getNextProcessId failed");
  int rc = xgr_permit_root_of(json_object_get(res, "nextProcessId"), out);
  json_decref(res);
  return rc ? xgr_error_set(err, XGR_EIO, NULL, "xgr_getNextProcessId answered no number") : 0;
}

static int ask_ostc_hash(void *ctx, const json_t *params, uint8_t out[32], xgr_error *err) {
  ask *a = ctx;
  static const char *const reg_keys[] = {"xrc729", "registry", "orchestration", NULL};
  json_t *q = json_object();
  for (const char *const *k = reg_keys; *k; k++) {
    const json_t *v = json_object_get(params, *k);
    if (json_is_string(v)) {
      json_object_set_new(q, "xrc729", json_deep_copy(v));
      break;
    }
  }
  const json_t *id = json_object_get(params, "ostcId");
  if (json_is_string(id)) json_object_set_new(q, "ostcId", json_deep_copy(id));
  static const char *const ns_keys[] = {"registryOwner", "owner", "from", NULL};   /* the namespace the start resolves in */
  for (const char *const *k = ns_keys; *k; k++) {
    const json_t *v = json_object_get(params, *k);
    if (json_is_string(v)) {
      json_object_set_new(q, "owner", json_deep_copy(v));
      break;
    }
  }
  json_t *res;
  if ((a->exit_code = xgr_client_call(&a->plain, a->cmd, "xgr.getOrchestration", q, &res)))
    return xgr_error_set(err, XGR_EIO, NULL, "xgr.getOrchestration failed");
  const char *h = json_string_value(json_object_get(res, "hash"));
  int rc = !h || xgr_hex_decode(h, out, 32);
  json_decref(res);
  return rc ? xgr_error_set(err, XGR_EIO, NULL, "the registered orchestration has no hash to sign") : 0;
}

int xgr_client_attach_permit(const xgr_client *c, const char *cmd, const char *method, json_t *params, uint64_t later,
                             bool *attached) {
  if (attached) *attached = false;
  xgr_permit_kind kind = xgr_permit_kind_for_method(method);
  if (!c->has_key || !kind || !json_is_object(params) || json_object_get(params, "permit")) return 0;
  chain ch = {0};
  int rc = learn_chain(c, cmd, &ch, kind == XGR_PERMIT_CONTROL);
  if (rc) return rc;
  ask a = {.plain = *c, .cmd = cmd};
  a.plain.has_key = false;
  xgr_permit_call info = {.chain_id = ch.id, .control_contract = ch.contract, .expiry = ttl_expiry() + later,
                          .max_total_gas = DEFAULT_MAX_GAS, .next_pid = ask_next_pid, .ostc_hash = ask_ostc_hash,
                          .ctx = &a};
  const char *g = getenv("XGR_MAX_TOTAL_GAS");
  if (g && *g && parse_u64(g, &info.max_total_gas)) {
    fprintf(stderr, "xgr %s: $XGR_MAX_TOTAL_GAS must be a number\n", cmd);
    return XGR_EXIT_USAGE;
  }
  xgr_secp *s = xgr_secp_new();
  if (!s) {
    fprintf(stderr, "xgr %s: cannot create a secp256k1 context\n", cmd);
    return XGR_EXIT_HARD;
  }
  xgr_error e;
  rc = xgr_permit_sign_call(s, c->key, method, params, &info, &e);
  xgr_secp_free(s);
  if (rc) {
    if (a.exit_code) return a.exit_code; /* the daemon's answer was printed */
    fprintf(stderr, "xgr %s: cannot sign the permit: %s%s%s\n", cmd, e.path, e.path[0] ? ": " : "", e.message);
    return XGR_EXIT_USAGE;
  }
  if (attached) *attached = true;
  return 0;
}

/* ---- xgr permit -------------------------------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f,
          "usage: xgr permit session|control|xdala --key FILE [--chain-id N | --url URL] [options]\n\n"
          "Print a signed EIP-712 permit (JSON) to put into a JSON-RPC request's \"permit\" field.\n"
          "The chain id (and a control permit's verifying contract) come from --chain-id /\n"
          "--control-contract, else from xgrd's xgr_getCoreAddrs at --url.\n\n"
          "  --key FILE              the signer's private key (default $XGR_KEY_FILE; see xgr key new)\n"
          "  --chain-id N            the chain id (decimal or 0x-hex)\n"
          "  --url URL               xgrd to ask for the chain id / control contract / next session id\n"
          "  --expiry UNIX           expiry in Unix seconds (default now + $XGR_PERMIT_TTL or 300 s)\n"
          "  --ttl SECS              expiry = now + SECS\n"
          "  --domain-name S, --domain-version S   override the domain (defaults per kind)\n"
          "session (SessionPermit, for xgr.enqueue / xgr_validateDataTransfer):\n"
          "  --ostc-id ID            the orchestration id signed (default \"\": the registry's current one)\n"
          "  --ostc-hash HASH        the orchestration's keccak-256 (0x + 64 hex; see xgr hash)\n"
          "  --session-id N          the rootPid the session gets (default: xgr_getNextProcessId at --url)\n"
          "  --max-total-gas N       gas budget recorded with the session (default 10000000)\n"
          "control (ControlPermit / ControlPermitV2, for kill, pause, resume, wake, retry, fork):\n"
          "  --action A              pause, resume, kill, wake, retry or fork\n"
          "  --session-id N          the session's rootPid\n"
          "  --step-id S             a step-mode wake's step (default \"\": PID mode)\n"
          "  --runner ADDR           sign a ControlPermitV2 on behalf of the session owner ADDR\n"
          "  --legacy                the older ControlPermit without stepId (kill/pause/resume)\n"
          "  --control-contract A    the domain's verifyingContract\n"
          "xdala (xdalaPermit, for reads and registry writes): no further options.\n");
}

int xgr_cmd_permit(int argc, char **argv) {
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage(stdout);
    return XGR_EXIT_OK;
  }
  if (argc < 2) {
    usage(stderr);
    return XGR_EXIT_USAGE;
  }
  xgr_permit_fields f = {0};
  const char *what = argv[1];
  if (!strcmp(what, "session")) f.kind = XGR_PERMIT_SESSION;
  else if (!strcmp(what, "control")) f.kind = XGR_PERMIT_CONTROL;
  else if (!strcmp(what, "xdala")) f.kind = XGR_PERMIT_XDALA;
  else {
    static const char *const kinds[] = {"session", "control", "xdala"};
    const char *near = xgr_cli_nearest_word(what, kinds, 3);
    fprintf(stderr, "xgr permit: unknown kind '%s'%s%s%s; expected session, control or xdala (xgr permit --help)\n", what,
            near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
    return XGR_EXIT_USAGE;
  }
  xgr_client c;
  xgr_client_init(&c);
  chain ch = {0};
  const char *ostc_hash = NULL, *sid = NULL, *gas = NULL, *exp = NULL, *ttl = NULL, *cid = NULL, *cc = NULL;
  f.expiry = ttl_expiry();
  f.max_total_gas = DEFAULT_MAX_GAS;
  const char **dst[] = {&cid, &cc, &f.ostc_id, &ostc_hash, &sid, &gas, &f.action, &f.step_id, &f.runner, &exp, &ttl,
                        &f.domain_name, &f.domain_version};   /* by the options' val */
  static const struct option opts[] = {
    {"chain-id", required_argument, NULL, 0}, {"control-contract", required_argument, NULL, 1},
    {"ostc-id", required_argument, NULL, 2}, {"ostc-hash", required_argument, NULL, 3},
    {"session-id", required_argument, NULL, 4}, {"max-total-gas", required_argument, NULL, 5},
    {"action", required_argument, NULL, 6}, {"step-id", required_argument, NULL, 7},
    {"runner", required_argument, NULL, 8}, {"expiry", required_argument, NULL, 9}, {"ttl", required_argument, NULL, 10},
    {"domain-name", required_argument, NULL, 11}, {"domain-version", required_argument, NULL, 12},
    {"legacy", no_argument, NULL, 'L'}, XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  int och, orc;
  optind = 2;   /* after the kind */
  while ((och = xgr_client_getopt(&c, argc, argv, opts, "xgr permit", usage, &orc)) != -1) {
    if (och == -2) return orc;
    if (och == 'L') f.legacy = true;
    else *dst[och] = optarg;
  }
  if (optind < argc) {
    fprintf(stderr, "xgr permit: unexpected '%s' (every value goes with its option)\n", argv[optind]);
    return XGR_EXIT_USAGE;
  }
  if (c.key_failed) return XGR_EXIT_USAGE;
  if (!c.has_key) {
    fprintf(stderr, "xgr permit: --key FILE (or $XGR_KEY_FILE) is required; make one with xgr key new FILE\n");
    return XGR_EXIT_USAGE;
  }
  uint64_t u;
  if (cid) {
    if (parse_u64(cid, &ch.id)) {
      fprintf(stderr, "xgr permit: --chain-id %s: expected a number\n", cid);
      return XGR_EXIT_USAGE;
    }
    ch.have_id = true;
  }
  if (cc) {
    if (xgr_hex_decode(cc, ch.contract, 20)) {
      fprintf(stderr, "xgr permit: --control-contract %s: expected an address (0x + 40 hex)\n", cc);
      return XGR_EXIT_USAGE;
    }
    ch.have_contract = true;
  }
  if (exp && parse_u64(exp, &f.expiry)) {
    fprintf(stderr, "xgr permit: --expiry %s: expected Unix seconds\n", exp);
    return XGR_EXIT_USAGE;
  }
  if (ttl) {
    if (parse_u64(ttl, &u)) {
      fprintf(stderr, "xgr permit: --ttl %s: expected seconds\n", ttl);
      return XGR_EXIT_USAGE;
    }
    f.expiry = (uint64_t)time(NULL) + u;
  }
  if (gas && parse_u64(gas, &f.max_total_gas)) {
    fprintf(stderr, "xgr permit: --max-total-gas %s: expected a number\n", gas);
    return XGR_EXIT_USAGE;
  }
  if (f.kind == XGR_PERMIT_CONTROL && f.runner) f.kind = XGR_PERMIT_CONTROL_V2;
  if (f.legacy && f.kind != XGR_PERMIT_CONTROL) {
    fprintf(stderr, "xgr permit: --legacy is for a ControlPermit without --runner\n");
    return XGR_EXIT_USAGE;
  }
  bool control = f.kind != XGR_PERMIT_SESSION && f.kind != XGR_PERMIT_XDALA;
  int rc = learn_chain(&c, "permit", &ch, control);
  if (rc) return rc;
  f.chain_id = ch.id;
  f.verifying_contract = ch.contract;
  uint8_t h[32];
  if (f.kind == XGR_PERMIT_SESSION) {
    if (!ostc_hash || xgr_hex_decode(ostc_hash, h, 32)) {
      fprintf(stderr, "xgr permit session: --ostc-hash 0x + 64 hex digits is required (xgr hash FILE prints it)\n");
      return XGR_EXIT_USAGE;
    }
    f.ostc_hash = h;
    if (!f.ostc_id) f.ostc_id = "";
  }
  if (f.kind != XGR_PERMIT_XDALA) {
    if (sid) {
      if (parse_u64(sid, &f.session_id)) {
        fprintf(stderr, "xgr permit: --session-id %s: expected a number\n", sid);
        return XGR_EXIT_USAGE;
      }
    } else if (f.kind == XGR_PERMIT_SESSION) {
      xgr_client plain = c;
      plain.has_key = false;
      json_t *res;
      if ((rc = xgr_client_call(&plain, "permit", "xgr_getNextProcessId", json_pack("{s:s}", "from", c.key_addr), &res)))
        return rc;
      rc = xgr_permit_root_of(json_object_get(res, "nextProcessId"), &f.session_id);
      json_decref(res);
      if (rc) {
        fprintf(stderr, "xgr permit: xgr_getNextProcessId answered no number\n");
        return XGR_EXIT_HARD;
      }
    } else {
      fprintf(stderr, "xgr permit control: --session-id N is required\n");
      return XGR_EXIT_USAGE;
    }
  }
  if (control && !f.action) {
    fprintf(stderr, "xgr permit control: --action pause|resume|kill|wake is required\n");
    return XGR_EXIT_USAGE;
  }
  json_t *p;
  if ((rc = sign_print("permit", c.key, &f, &p))) return rc;
  char *s = json_dumps(p, JSON_COMPACT);
  puts(s);
  free(s);
  json_decref(p);
  return XGR_EXIT_OK;
}
