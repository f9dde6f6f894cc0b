/* test_permit.c — the EIP-712 encoder and permit verification against vectors made by ethers v6
 * (tests/permits/fixtures, written by tests/permits/js/permits.js), signing that reproduces ethers'
 * RFC 6979 signatures byte for byte, and one refusal per verifier check (each mutation of a valid
 * permit must be refused with the path of the check that failed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "malleate.h"
#include "xgr/eip712.h"
#include "xgr/json.h"
#include "xgr/permit.h"
#include "xgr/secp.h"

static xgr_secp *S;

static json_t *fixture(const char *name) {
  const char *src = getenv("XGR_SRC");
  char path[512];
  snprintf(path, sizeof path, "%s/tests/permits/fixtures/%s.json", src ? src : ".", name);
  json_error_t je;
  json_t *j = json_load_file(path, 0, &je);
  if (!j) fail_msg("%s: %s", path, je.text);
  return j;
}

static xgr_permit_policy policy(void) {
  xgr_permit_policy p = {.chain_id = 1879, .now = 1700000000, .accept = 15};
  memset(p.control_contract, 0, 20);
  p.control_contract[19] = 0xaa;
  return p;
}

static void hex32(const uint8_t d[32], char out[67]) { xgr_hex_encode(d, 32, out); }

static void test_general_encoder(void **state) {
  (void)state;
  json_t *f = fixture("eip712_general");
  const json_t *typed = json_object_get(f, "typed");
  const json_t *types = json_object_get(typed, "types");
  char *et;
  xgr_error e;
  assert_int_equal(xgr_eip712_encode_type(types, "Mail", &et, &e), 0);
  assert_string_equal(et, json_string_value(json_object_get(f, "encodeType")));
  free(et);
  uint8_t h[32];
  char hx[67];
  assert_int_equal(xgr_eip712_domain_separator(types, json_object_get(typed, "domain"), h, &e), 0);
  hex32(h, hx);
  assert_string_equal(hx, json_string_value(json_object_get(f, "domainSeparator")));
  /* the same separator from the domain's own fields when types has no EIP712Domain */
  json_t *t2 = json_deep_copy(types);
  json_object_del(t2, "EIP712Domain");
  assert_int_equal(xgr_eip712_domain_separator(t2, json_object_get(typed, "domain"), h, &e), 0);
  hex32(h, hx);
  assert_string_equal(hx, json_string_value(json_object_get(f, "domainSeparator")));
  json_decref(t2);
  int rc = xgr_eip712_hash_struct(types, "Mail", json_object_get(typed, "message"), "message", h, &e);
  if (rc) fail_msg("%s: %s", e.path, e.message);
  hex32(h, hx);
  assert_string_equal(hx, json_string_value(json_object_get(f, "hashStruct")));
  assert_int_equal(xgr_eip712_digest(typed, h, &e), 0);
  hex32(h, hx);
  assert_string_equal(hx, json_string_value(json_object_get(f, "digest")));
  uint8_t sig[65], addr[20];
  assert_int_equal(xgr_hex_decode(json_string_value(json_object_get(f, "signature")), sig, 65), 0);
  assert_int_equal(xgr_secp_recover(S, h, sig, addr, &e), 0);
  char a[43];
  xgr_addr_hex(addr, a);
  assert_string_equal(a, json_string_value(json_object_get(f, "signer")));

  /* value errors name their path */
  json_t *bad = json_deep_copy(typed);
  json_t *m = json_object_get(bad, "message");
  json_object_set_new(json_object_get(json_array_get(json_object_get(m, "to"), 1), "home"), "zip", json_integer(-1));
  assert_int_not_equal(xgr_eip712_digest(bad, h, &e), 0);
  assert_string_equal(e.path, "message.to[1].home.zip");
  json_object_set_new(json_object_get(json_array_get(json_object_get(m, "to"), 1), "home"), "zip", json_integer(1));
  json_object_set_new(m, "attachments", json_pack("[s]", "0x"));
  assert_int_not_equal(xgr_eip712_digest(bad, h, &e), 0);
  assert_string_equal(e.path, "message.attachments");
  json_decref(bad);
  json_decref(f);
}

static void test_integers(void **state) {
  (void)state;
  uint8_t w[32];
  xgr_error e;
  json_t *v = json_string("255");
  assert_int_equal(xgr_eip712_encode_int("uint8", v, "x", w, &e), 0);
  assert_int_equal(w[31], 255);
  json_decref(v);
  v = json_string("256");
  assert_int_not_equal(xgr_eip712_encode_int("uint8", v, "x", w, &e), 0);
  json_decref(v);
  v = json_string("-128");
  assert_int_equal(xgr_eip712_encode_int("int8", v, "x", w, &e), 0);
  assert_int_equal(w[0], 0xff);
  assert_int_equal(w[31], 0x80);
  json_decref(v);
  v = json_string("-129");
  assert_int_not_equal(xgr_eip712_encode_int("int8", v, "x", w, &e), 0);
  json_decref(v);
  v = json_string("0x" "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff");
  assert_int_equal(xgr_eip712_encode_int("uint256", v, "x", w, &e), 0);
  json_decref(v);
  v = json_string("0x1" "0000000000000000000000000000000000000000000000000000000000000000");
  assert_int_not_equal(xgr_eip712_encode_int("uint256", v, "x", w, &e), 0);
  json_decref(v);
  v = json_integer(-1);
  assert_int_not_equal(xgr_eip712_encode_int("uint256", v, "x", w, &e), 0);
  assert_int_equal(xgr_eip712_encode_int("int256", v, "x", w, &e), 0);
  for (int i = 0; i < 32; i++) assert_int_equal(w[i], 0xff);
  json_decref(v);
  v = json_real(1.5);
  assert_int_not_equal(xgr_eip712_encode_int("uint256", v, "x", w, &e), 0);
  json_decref(v);
  v = json_string("12a");
  assert_int_not_equal(xgr_eip712_encode_int("uint256", v, "x", w, &e), 0);
  assert_string_equal(e.path, "x");
  json_decref(v);
}

static const char *const PERMITS[] = {"session",         "control_kill",    "control_wake_step",
                                      "control_legacy_pause", "control_v2_wake", "xdala"};

static void test_ethers_fixtures_verify(void **state) {
  (void)state;
  xgr_permit_policy pol = policy();
  for (size_t i = 0; i < sizeof PERMITS / sizeof *PERMITS; i++) {
    json_t *f = fixture(PERMITS[i]);
    xgr_permit p;
    xgr_error e;
    int rc = xgr_permit_verify(S, json_object_get(f, "permit"), &pol, "permit", &p, &e);
    if (rc) fail_msg("%s: %s: %s", PERMITS[i], e.path, e.message);
    assert_string_equal(p.from, json_string_value(json_object_get(f, "signer")));
    char hx[67];
    hex32(p.digest, hx);
    assert_string_equal(hx, json_string_value(json_object_get(f, "digest")));
    json_decref(f);
  }
}

/* The precomputed constant parts (xgr_permit_hashes) equal what the general encoder computes from
 * ethers' own `types` and `domain`, and verification with them gives ethers' digests, also when
 * the hashes are for another chain (then they are not used). */
static void test_precomputed_hashes(void **state) {
  (void)state;
  xgr_permit_hashes hs, other;
  xgr_permit_hashes_init(&hs, 1879);
  xgr_permit_hashes_init(&other, 1);
  static const struct {
    const char *fixture;
    size_t off;
  } th[] = {{"session", offsetof(xgr_permit_hashes, session)},
            {"control_kill", offsetof(xgr_permit_hashes, control)},
            {"control_legacy_pause", offsetof(xgr_permit_hashes, control_legacy)},
            {"control_v2_wake", offsetof(xgr_permit_hashes, control_v2)},
            {"xdala", offsetof(xgr_permit_hashes, xdala)}};
  for (size_t i = 0; i < sizeof th / sizeof *th; i++) {
    json_t *f = fixture(th[i].fixture);
    const json_t *p = json_object_get(f, "permit"), *types = json_object_get(p, "types");
    uint8_t want[32];
    xgr_error e;
    assert_int_equal(xgr_eip712_type_hash(types, json_string_value(json_object_get(p, "primaryType")), want, &e), 0);
    assert_memory_equal((const uint8_t *)&hs + th[i].off, want, 32);
    assert_int_equal(xgr_eip712_type_hash(types, "EIP712Domain", want, &e), 0);
    assert_memory_equal(i == 0 || i == 4 ? hs.domain3 : hs.domain4, want, 32);
    if (i == 0) {
      assert_int_equal(xgr_eip712_domain_separator(types, json_object_get(p, "domain"), want, &e), 0);
      assert_memory_equal(hs.session_domain, want, 32);
    }
    for (int k = 0; k < 2; k++) {
      xgr_permit_policy pol = policy();
      pol.hashes = k ? &other : &hs;
      xgr_permit out;
      if (xgr_permit_verify(S, p, &pol, "permit", &out, &e)) fail_msg("%s: %s: %s", th[i].fixture, e.path, e.message);
      char hx[67];
      hex32(out.digest, hx);
      assert_string_equal(hx, json_string_value(json_object_get(f, "digest")));
    }
    json_decref(f);
  }
}

/* Signing the fixtures' content with the same keys gives ethers' signatures exactly (RFC 6979). */
static void test_sign_matches_ethers(void **state) {
  (void)state;
  uint8_t owner[32], helper[32], vc[20] = {0};
  memset(owner, 0x11, 32);
  memset(helper, 0x22, 32);
  vc[19] = 0xaa;
  uint8_t ohash[32];
  json_t *f = fixture("session");
  xgr_hex_decode(json_string_value(json_object_get(json_object_get(json_object_get(f, "permit"), "message"), "ostcHash")),
                 ohash, 32);
  json_decref(f);
  char runner[43];
  uint8_t oaddr[20];
  xgr_error e;
  xgr_secp_address(S, owner, oaddr, &e);
  xgr_addr_hex(oaddr, runner);
  struct {
    const char *name;
    const uint8_t *key;
    xgr_permit_fields f;
  } cases[] = {
      {"session", owner,
       {.kind = XGR_PERMIT_SESSION, .chain_id = 1879, .ostc_id = "orders", .ostc_hash = ohash, .session_id = 7,
        .max_total_gas = 5000000, .expiry = 4102444800}},
      {"control_kill", owner,
       {.kind = XGR_PERMIT_CONTROL, .chain_id = 1879, .verifying_contract = vc, .session_id = 7, .action = "kill",
        .expiry = 4102444800}},
      {"control_wake_step", owner,
       {.kind = XGR_PERMIT_CONTROL, .chain_id = 1879, .verifying_contract = vc, .session_id = 7, .action = "wake",
        .step_id = "Approve", .expiry = 4102444800}},
      {"control_legacy_pause", owner,
       {.kind = XGR_PERMIT_CONTROL, .chain_id = 1879, .verifying_contract = vc, .session_id = 7, .action = "pause",
        .legacy = true, .expiry = 4102444800}},
      {"control_v2_wake", helper,
       {.kind = XGR_PERMIT_CONTROL_V2, .chain_id = 1879, .verifying_contract = vc, .runner = runner, .session_id = 7,
        .action = "wake", .step_id = "Approve", .expiry = 4102444800}},
      {"xdala", owner, {.kind = XGR_PERMIT_XDALA, .chain_id = 1879, .expiry = 4102444800}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    json_t *p;
    int rc = xgr_permit_sign(S, cases[i].key, &cases[i].f, &p, &e);
    if (rc) fail_msg("%s: %s %s", cases[i].name, e.path, e.message);
    f = fixture(cases[i].name);
    const char *want = json_string_value(json_object_get(json_object_get(f, "permit"), "signature"));
    if (strcmp(json_string_value(json_object_get(p, "signature")), want)) {
      char *d = json_dumps(p, JSON_COMPACT);
      fail_msg("%s: signature differs from ethers: %s", cases[i].name, d);
    }
    xgr_permit_policy pol = policy();
    xgr_permit v;
    assert_int_equal(xgr_permit_verify(S, p, &pol, NULL, &v, &e), 0);
    json_decref(f);
    json_decref(p);
  }
}

/* ---- refusals: each mutation of a valid permit fails the named check ---------------------------- */

typedef void (*mutate_fn)(json_t *permit);

static json_t *msg_of(json_t *p) { return json_object_get(p, "message"); }

static void m_chain(json_t *p) { json_object_set_new(json_object_get(p, "domain"), "chainId", json_integer(1)); }
static void m_domain_name(json_t *p) { json_object_set_new(json_object_get(p, "domain"), "name", json_string("XDaLa Permit")); }
static void m_domain_version(json_t *p) { json_object_set_new(json_object_get(p, "domain"), "version", json_string("2")); }
static void m_primary(json_t *p) { json_object_set_new(p, "primaryType", json_string("ControlPermit")); }
static void m_primary_unknown(json_t *p) { json_object_set_new(p, "primaryType", json_string("Mail")); }
static void m_extra_field(json_t *p) {
  json_array_append_new(json_object_get(json_object_get(p, "types"), "SessionPermit"),
                        json_pack("{s:s, s:s}", "name", "extra", "type", "uint256"));
  json_object_set_new(msg_of(p), "extra", json_integer(1));
}
static void m_missing_field(json_t *p) {
  json_array_remove(json_object_get(json_object_get(p, "types"), "SessionPermit"), 4);
  json_object_del(msg_of(p), "maxTotalGas");
}
static void m_field_order(json_t *p) {
  json_t *a = json_object_get(json_object_get(p, "types"), "SessionPermit");
  json_t *x = json_incref(json_array_get(a, 0));
  json_array_remove(a, 0);
  json_array_append_new(a, x);
}
static void m_field_type(json_t *p) {
  json_object_set_new(json_array_get(json_object_get(json_object_get(p, "types"), "SessionPermit"), 3), "type",
                      json_string("uint64"));
}
static void m_extra_type(json_t *p) {
  json_object_set_new(json_object_get(p, "types"), "Other", json_pack("[{s:s, s:s}]", "name", "a", "type", "bool"));
}
static void m_extra_top(json_t *p) { json_object_set_new(p, "note", json_string("hi")); }
static void m_typo_top(json_t *p) {   /* a misspelt key is named with the one meant */
  json_object_set(p, "signatur", json_object_get(p, "signature"));
  json_object_del(p, "signature");
}
static void m_msg_extra(json_t *p) { json_object_set_new(msg_of(p), "expirey", json_string("1")); }
static void m_domain_salt(json_t *p) {
  json_object_set_new(json_object_get(p, "domain"), "salt", json_string("0x00"));
}
static void m_expired(json_t *p) { json_object_set_new(msg_of(p), "expiry", json_integer(1700000000)); }
static void m_expiry_word(json_t *p) { json_object_set_new(msg_of(p), "expiry", json_string("soon")); }
static void m_other_signer(json_t *p) {
  json_object_set_new(msg_of(p), "from", json_string("0x1111111111111111111111111111111111111111"));
}
static void m_bad_checksum(json_t *p) {
  json_object_set_new(msg_of(p), "from", json_string("0x19e7E376E7C213B7E7e7e46cc70A5dD086DAff2A"));
}
static void m_forged(json_t *p) {
  char s[133];
  snprintf(s, sizeof s, "%s", json_string_value(json_object_get(p, "signature")));
  s[10] = s[10] == '0' ? '1' : '0';
  json_object_set_new(p, "signature", json_string(s));
}
static void m_truncated(json_t *p) {
  char s[133];
  snprintf(s, sizeof s, "%s", json_string_value(json_object_get(p, "signature")));
  s[128] = 0;
  json_object_set_new(p, "signature", json_string(s));
}
static void m_nonhex(json_t *p) {
  char s[133];
  snprintf(s, sizeof s, "%s", json_string_value(json_object_get(p, "signature")));
  s[50] = 'z';
  json_object_set_new(p, "signature", json_string(s));
}
static void m_bad_v(json_t *p) {
  char s[133];
  snprintf(s, sizeof s, "%s", json_string_value(json_object_get(p, "signature")));
  s[130] = '2';
  s[131] = '9';
  json_object_set_new(p, "signature", json_string(s));
}
/* s -> n - s with v flipped: the same signer in libsecp256k1, refused as high-s */
static void m_ostc_hash_short(json_t *p) { json_object_set_new(msg_of(p), "ostcHash", json_string("0x1234")); }
static void m_session_id_neg(json_t *p) { json_object_set_new(msg_of(p), "sessionId", json_string("-1")); }

static void m_ctl_contract(json_t *p) {
  json_object_set_new(json_object_get(p, "domain"), "verifyingContract",
                      json_string("0x00000000000000000000000000000000000000bb"));
}
static void m_ctl_action(json_t *p) { json_object_set_new(msg_of(p), "action", json_string("explode")); }
static void m_ctl_legacy_wake(json_t *p) { json_object_set_new(msg_of(p), "action", json_string("wake")); }
static void m_ctl_empty_name(json_t *p) { json_object_set_new(json_object_get(p, "domain"), "name", json_string("")); }
static void m_ctl_no_contract(json_t *p) {
  json_object_del(json_object_get(p, "domain"), "verifyingContract");
  json_array_remove(json_object_get(json_object_get(p, "types"), "EIP712Domain"), 3);
}

static void m_ctl_contract_case(json_t *p) {   /* the right contract, mixed case with a wrong EIP-55 checksum */
  json_object_set_new(json_object_get(p, "domain"), "verifyingContract",
                      json_string("0x00000000000000000000000000000000000000aA"));
}

/* Each refusal is checked twice: with the digests' constant parts computed per call, and with
 * them precomputed once (xgr_permit_hashes, as xgrd does): same path, same words. */
static void refused(const char *fixture_name, mutate_fn m, unsigned accept, const char *path, const char *words) {
  json_t *f = fixture(fixture_name);
  json_t *p = json_deep_copy(json_object_get(f, "permit"));
  if (m) m(p);
  xgr_permit_hashes hs;
  xgr_permit_hashes_init(&hs, 1879);
  for (int pre = 0; pre < 2; pre++) {
    xgr_permit_policy pol = policy();
    if (accept) pol.accept = accept;
    if (pre) pol.hashes = &hs;
    xgr_permit out;
    xgr_error e;
    xgr_error_clear(&e);
    int rc = xgr_permit_verify(S, p, &pol, "permit", &out, &e);
    if (rc != XGR_EPERM) fail_msg("%s/%s: expected a refusal, got %d", fixture_name, path, rc);
    if (strcmp(e.path, path) || !strstr(e.message, words))
      fail_msg("%s: expected \"%s\" at %s, got \"%s\" at %s", fixture_name, words, path, e.message, e.path);
  }
  json_decref(p);
  json_decref(f);
}

static void test_refusals(void **state) {
  (void)state;
  refused("session", m_chain, 0, "permit.domain.chainId", "wrong chain");
  refused("session", m_domain_name, 0, "permit.domain.name", "XDaLa SessionPermit");
  refused("session", m_domain_version, 0, "permit.domain.version", "\"1\"");
  refused("session", m_primary, 0, "permit.types.SessionPermit", "unexpected type");
  refused("session", m_primary_unknown, 0, "permit.primaryType", "not accepted");
  refused("session", NULL, XGR_PERMIT_XDALA, "permit.primaryType", "expected xdalaPermit");
  refused("session", m_extra_field, 0, "permit.types.SessionPermit", "wrong field list");
  refused("session", m_missing_field, 0, "permit.types.SessionPermit", "wrong field list");
  refused("session", m_field_order, 0, "permit.types.SessionPermit", "in this order");
  refused("session", m_field_type, 0, "permit.types.SessionPermit", "uint256 sessionId");
  refused("session", m_extra_type, 0, "permit.types.Other", "unexpected type");
  refused("session", m_extra_top, 0, "permit.note", "unexpected key");
  refused("session", m_typo_top, 0, "permit.signatur", "did you mean \"signature\"?");
  refused("session", m_msg_extra, 0, "permit.message.expirey", "did you mean \"expiry\"?");
  refused("session", m_domain_salt, 0, "permit.domain.salt", "not a field");
  refused("session", m_expired, 0, "permit.message.expiry", "expired");
  refused("session", m_expiry_word, 0, "permit.message.expiry", "not a decimal");
  refused("session", m_other_signer, 0, "permit.signature", "not by message.from");
  refused("session", m_bad_checksum, 0, "permit.message.from", "EIP-55");
  refused("session", m_forged, 0, "permit.signature", "");
  refused("session", m_truncated, 0, "permit.signature", "130 hex digits");
  refused("session", m_nonhex, 0, "permit.signature", "not hex");
  refused("session", m_bad_v, 0, "permit.signature", "bad v");
  refused("session", malleate_high_s, 0, "permit.signature", "high s");
  refused("session", m_ostc_hash_short, 0, "permit.message.ostcHash", "exactly 32");
  refused("session", m_session_id_neg, 0, "permit.message.sessionId", "negative");
  refused("control_kill", m_ctl_contract, 0, "permit.domain.verifyingContract", "control contract");
  refused("control_kill", m_ctl_action, 0, "permit.message.action", "not an action");
  refused("control_kill", m_ctl_contract_case, 0, "permit.domain.verifyingContract", "EIP-55");
  refused("control_kill", m_ctl_empty_name, 0, "permit.domain.name", "empty");
  refused("control_kill", m_ctl_no_contract, 0, "permit.types.EIP712Domain", "wrong field list");
  refused("control_legacy_pause", m_ctl_legacy_wake, 0, "permit.types.ControlPermit", "kill, pause and resume only");
  refused("control_v2_wake", m_chain, 0, "permit.domain.chainId", "wrong chain");
  refused("xdala", m_expired, 0, "permit.message.expiry", "expired");
  refused("xdala", m_other_signer, 0, "permit.signature", "not by message.from");
}

/* A forged signature recovers some other address or none; either way it is refused. */
static void test_forged_many(void **state) {
  (void)state;
  json_t *f = fixture("xdala");
  xgr_permit_policy pol = policy();
  for (int i = 2; i < 130; i += 3) {
    json_t *p = json_deep_copy(json_object_get(f, "permit"));
    char s[133];
    snprintf(s, sizeof s, "%s", json_string_value(json_object_get(p, "signature")));
    s[i] = s[i] == 'f' ? 'e' : 'f';
    json_object_set_new(p, "signature", json_string(s));
    xgr_permit out;
    xgr_error e;
    assert_int_equal(xgr_permit_verify(S, p, &pol, "", &out, &e), XGR_EPERM);
    assert_string_equal(e.path, "signature");
    json_decref(p);
  }
  json_decref(f);
}

/* ---- xgr_permit_sign_call: the permit a JSON-RPC call needs, from its params ------------------- */

static int cb_next(void *ctx, const char *from, uint64_t *out, xgr_error *err) {
  (void)ctx, (void)from, (void)err;
  *out = 42;
  return 0;
}
static int cb_hash(void *ctx, const json_t *params, uint8_t out[32], xgr_error *err) {
  (void)ctx, (void)err;
  memset(out, json_is_string(json_object_get(params, "xrc729")) ? 0x77 : 0x66, 32);
  return 0;
}

static void test_sign_call(void **state) {
  (void)state;
  assert_int_equal(xgr_permit_kind_for_method("xgr.enqueue"), XGR_PERMIT_SESSION);
  assert_int_equal(xgr_permit_kind_for_method("xgr_validateDataTransfer"), XGR_PERMIT_SESSION);
  assert_int_equal(xgr_permit_kind_for_method("xgr_control"), XGR_PERMIT_CONTROL);
  assert_int_equal(xgr_permit_kind_for_method("xgr.wake"), XGR_PERMIT_CONTROL);
  assert_int_equal(xgr_permit_kind_for_method("xgr_putRule"), XGR_PERMIT_XDALA);
  assert_int_equal(xgr_permit_kind_for_method("xgr_sessionAlive"), 0);
  assert_int_equal(xgr_permit_kind_for_method("xgr_getNextProcessId"), 0);
  assert_int_equal(xgr_permit_kind_for_method("eth_call"), 0);
  uint8_t key[32], vc[20] = {0};
  memset(key, 0x11, 32);
  vc[19] = 0xaa;
  xgr_permit_call info = {.chain_id = 1879, .control_contract = vc, .expiry = 4102444800, .max_total_gas = 9,
                          .next_pid = cb_next, .ostc_hash = cb_hash};
  xgr_permit_policy pol = policy();
  xgr_error e;
  xgr_permit p;
  /* a start without a rootPid: the next one is signed and written into the request */
  json_t *params = json_pack("{s:s, s:s}", "xrc729", "reg", "ostcId", "orders");
  assert_int_equal(xgr_permit_sign_call(S, key, "xgr.enqueue", params, &info, &e), 0);
  assert_string_equal(json_string_value(json_object_get(params, "rootPid")), "42");
  assert_int_equal(xgr_permit_verify(S, json_object_get(params, "permit"), &pol, "permit", &p, &e), 0);
  assert_int_equal(p.kind, XGR_PERMIT_SESSION);
  assert_int_equal(p.session_id, 42);
  assert_string_equal(p.ostc_id, "orders");
  assert_int_equal(p.ostc_hash[0], 0x77);
  assert_string_equal(p.max_total_gas, "9");
  json_decref(params);
  /* kill of a process: the root of its pid, no step */
  params = json_pack("{s:s}", "pid", "5:2");
  assert_int_equal(xgr_permit_sign_call(S, key, "xgr.kill", params, &info, &e), 0);
  assert_int_equal(xgr_permit_verify(S, json_object_get(params, "permit"), &pol, "permit", &p, &e), 0);
  assert_int_equal(p.kind, XGR_PERMIT_CONTROL);
  assert_string_equal(p.action, "kill");
  assert_int_equal(p.session_id, 5);
  assert_string_equal(p.step_id, "");
  json_decref(params);
  /* a step-mode wake for another owner: ControlPermitV2 with runner = owner */
  params = json_pack("{s:s, s:s, s:s}", "sessionId", "7", "stepId", "Approve", "owner",
                     "0x00000000000000000000000000000000000000c1");
  assert_int_equal(xgr_permit_sign_call(S, key, "xgr_wakeUpProcess", params, &info, &e), 0);
  assert_int_equal(xgr_permit_verify(S, json_object_get(params, "permit"), &pol, "permit", &p, &e), 0);
  assert_int_equal(p.kind, XGR_PERMIT_CONTROL_V2);
  assert_string_equal(p.runner, "0x00000000000000000000000000000000000000c1");
  assert_string_equal(p.step_id, "Approve");
  assert_string_equal(p.action, "wake");
  json_decref(params);
  /* a PID-mode wake signs no step */
  params = json_pack("{s:s, s:s}", "processId", "7:3", "stepId", "ignored");
  assert_int_equal(xgr_permit_sign_call(S, key, "xgr.wake", params, &info, &e), 0);
  assert_int_equal(xgr_permit_verify(S, json_object_get(params, "permit"), &pol, "permit", &p, &e), 0);
  assert_string_equal(p.step_id, "");
  json_decref(params);
  /* public methods, and params with a permit already, are left alone; no session id is an error */
  params = json_pack("{s:s}", "from", "0x00000000000000000000000000000000000000c1");
  assert_int_equal(xgr_permit_sign_call(S, key, "xgr_getNextProcessId", params, &info, &e), 0);
  assert_null(json_object_get(params, "permit"));
  json_object_set_new(params, "permit", json_string("mine"));
  assert_int_equal(xgr_permit_sign_call(S, key, "xgr.listSessions", params, &info, &e), 0);
  assert_string_equal(json_string_value(json_object_get(params, "permit")), "mine");
  json_decref(params);
  params = json_object();
  assert_int_not_equal(xgr_permit_sign_call(S, key, "xgr.pause", params, &info, &e), 0);
  assert_string_equal(e.path, "pid");
  json_decref(params);
}

int main(void) {
  S = xgr_secp_new();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_general_encoder),     cmocka_unit_test(test_integers),
      cmocka_unit_test(test_ethers_fixtures_verify), cmocka_unit_test(test_sign_matches_ethers),
      cmocka_unit_test(test_precomputed_hashes),
      cmocka_unit_test(test_refusals),            cmocka_unit_test(test_forged_many),
      cmocka_unit_test(test_sign_call),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  xgr_secp_free(S);
  return rc;
}
