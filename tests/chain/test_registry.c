/* test_registry.c — orchestrations and rules from XRC-729 / XRC-137 contracts on a real anvil
 * (src/chain/registry.c): load with the hash pin (a mismatch refused before anything runs), an
 * unknown ostcId, an encrypted rule refused, the cache (a second load makes no chain call; a
 * refresh after updateRule / setOSTC reloads while the pinned bundle stays intact), owner and
 * executor authorization including a contract without the executor extension, and the public
 * IterationOfPi orchestration run from the chain on the deterministic driver. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "anvil.h"
#include "xgr/bundle.h"
#include "xgr/driver.h"
#include "xgr/keccak.h"

static anvil node;
static char rule_addr[43], enc_addr[43], registry[43], legacy[43];

/* The rule of the public IterationOfPi example (XRC137Json/Iterationstep.json). */
static const char pi_rule[] =
    "{\"payload\":{\"Iter\":{\"type\":\"int64\"},\"S\":{\"type\":\"double\"},\"Pi\":{\"type\":\"double\"}},"
    "\"onValid\":{\"waitSec\":3600,\"payload\":{\"Iter\":\"[Iter]+1\","
    "\"S\":\"[S]+pow(-1.0,double([Iter]))/(2.0*double([Iter])+1.0)\",\"Pi\":\"4.0*[S]\"}},\"onInvalid\":{}}";

static char ostc[1024];

/* JSON list with one string argument, escaped. */
static char *str_arg(const char *s) {
  json_t *a = json_pack("[s]", s);
  char *t = json_dumps(a, JSON_COMPACT);
  json_decref(a);
  return t;
}

static int set_ostc(const char *id, const char *text) {
  json_t *a = json_pack("[s, s]", id, text);
  char *t = json_dumps(a, JSON_COMPACT);
  json_decref(a);
  int rc = anvil_send(&node, 0, registry, "setOSTC(string,string)", t);
  free(t);
  return rc;
}

static int setup(void **st) {
  (void)st;
  if (anvil_start(&node, NULL)) return -1;
  char *a = str_arg(pi_rule);
  int rc = anvil_deploy(&node, "XRC137", "(string)", a, rule_addr) || anvil_deploy(&node, "XRC137", "(string)", a, enc_addr);
  free(a);
  if (rc) return -1;
  if (anvil_send(&node, 0, enc_addr, "setRuleAndEncrypted(string,bytes32,string,bytes)",
                 "[\"XGR1.c2VjcmV0\", \"0x0100000000000000000000000000000000000000000000000000000000000000\", \"XGR1-AESGCM\", \"0x\"]"))
    return -1;
  if (anvil_deploy(&node, "XRC729", "(string)", "[\"XGR_XRC729\"]", registry)) return -1;
  if (anvil_deploy(&node, "LegacyOwned", "()", "[]", legacy)) return -1;
  snprintf(ostc, sizeof ostc, "{\"id\":\"IterationOfPi\",\"structure\":{\"PiIterationStep\":{\"rule\":\"%s\",\"onValid\":{\"spawns\":[\"PiIterationStep\"]}}}}",
           rule_addr);
  if (set_ostc("IterationOfPi", ostc)) return -1;
  char enc[512];
  snprintf(enc, sizeof enc, "{\"id\":\"Enc\",\"structure\":{\"A\":{\"rule\":\"%s\"}}}", enc_addr);
  return set_ostc("Enc", enc);
}

static int teardown(void **st) {
  (void)st;
  anvil_stop(&node);
  return 0;
}

static long long calls(void) {
  json_t *h = xgr_chain_health(node.chain);
  long long n = json_integer_value(json_object_get(json_array_get(h, 0), "calls"));
  json_decref(h);
  return n;
}

static void test_load_and_pin(void **st) {
  (void)st;
  xgr_chain_cache *k = xgr_chain_cache_new(node.chain);
  xgr_chain_orch o;
  xgr_error e;
  char want[67];
  xgr_keccak256_hex(ostc, strlen(ostc), want);
  int rc = xgr_chain_load_orch(k, NULL, registry, "IterationOfPi", NULL, &o, &e);
  if (rc) fail_msg("%s", e.message);
  assert_string_equal(o.hash, want);
  assert_false(o.cached);
  assert_int_equal(o.bundle->orch->nsteps, 1);
  assert_string_equal(o.bundle->step_rule_address[0], rule_addr);
  /* cached: no chain call at all */
  long long before = calls();
  const xgr_bundle *first = o.bundle;
  assert_int_equal(xgr_chain_load_orch(k, NULL, registry, "IterationOfPi", want, &o, &e), 0);
  assert_true(o.cached);
  assert_ptr_equal(o.bundle, first);
  assert_int_equal(calls(), before);
  /* a pinned hash that does not match: refused, nothing returned */
  rc = xgr_chain_load_orch(k, NULL, registry, "IterationOfPi", "0x0000000000000000000000000000000000000000000000000000000000000001", &o, &e);
  assert_int_equal(rc, XGR_EMISMATCH);
  assert_null(o.bundle);
  assert_string_equal(e.path, "ostcHash");
  assert_non_null(strstr(e.message, want));
  /* upper-case hex of the right hash is the same hash */
  char upper[67];
  for (int i = 0; i < 67; i++) upper[i] = (char)(want[i] >= 'a' && want[i] <= 'f' ? want[i] - 32 : want[i]);
  assert_int_equal(xgr_chain_load_orch(k, NULL, registry, "IterationOfPi", upper, &o, &e), 0);
  /* unknown id, bad registry, encrypted rule */
  assert_int_equal(xgr_chain_load_orch(k, NULL, registry, "Nope", NULL, &o, &e), XGR_ENOTFOUND);
  assert_non_null(strstr(e.message, "XRC729: unknown ostcId"));
  assert_int_equal(xgr_chain_load_orch(k, NULL, "0x12", "Nope", NULL, &o, &e), XGR_EINVAL);
  rc = xgr_chain_load_orch(k, NULL, registry, "Enc", NULL, &o, &e);
  assert_int_not_equal(rc, 0);
  if (!strstr(e.message, "encrypted")) fail_msg("%s", e.message);
  xgr_chain_cache_free(k);
}

static void test_refresh(void **st) {
  (void)st;
  xgr_chain_cache *k = xgr_chain_cache_new(node.chain);
  xgr_chain_orch o1, o2;
  xgr_error e;
  assert_int_equal(xgr_chain_cache_refresh(k, &e), 0);  /* remembers the current block */
  assert_int_equal(xgr_chain_load_orch(k, NULL, registry, "IterationOfPi", NULL, &o1, &e), 0);
  assert_int_equal(xgr_chain_cache_refresh(k, &e), 0);  /* nothing happened */
  /* the rule changes on chain: the refresh drops it and the orchestration built on it */
  char *rule2 = str_arg("{\"payload\":{\"Iter\":{\"type\":\"int64\"}},\"onValid\":{\"waitSec\":60}}");
  assert_int_equal(anvil_send(&node, 0, rule_addr, "updateRule(string)", rule2), 0);
  free(rule2);
  assert_true(xgr_chain_cache_refresh(k, &e) >= 2);
  assert_int_equal(xgr_chain_load_orch(k, NULL, registry, "IterationOfPi", NULL, &o2, &e), 0);
  assert_false(o2.cached);
  assert_ptr_not_equal(o2.bundle, o1.bundle);
  assert_string_equal(o2.hash, o1.hash);             /* same OSTC text, new rule behind it */
  assert_int_equal(xgr_rule_ninputs(o2.bundle->rules[0]), 1);
  assert_int_equal(xgr_rule_ninputs(o1.bundle->rules[0]), 3);  /* the pinned bundle is intact */
  /* a new OSTC text: new hash after the refresh */
  char text[1024];
  snprintf(text, sizeof text, "{\"id\":\"IterationOfPi\",\"structure\":{\"PiIterationStep\":{\"rule\":\"%s\"}}}", rule_addr);
  assert_int_equal(set_ostc("IterationOfPi", text), 0);
  assert_int_equal(xgr_chain_load_orch(k, NULL, registry, "IterationOfPi", NULL, &o1, &e), 0);
  assert_true(o1.cached);                            /* not refreshed yet: still the pinned one */
  assert_true(xgr_chain_cache_refresh(k, &e) >= 1);
  assert_int_equal(xgr_chain_load_orch(k, NULL, registry, "IterationOfPi", NULL, &o1, &e), 0);
  char want[67];
  xgr_keccak256_hex(text, strlen(text), want);
  assert_string_equal(o1.hash, want);
  /* restore for the other tests */
  char *r = str_arg(pi_rule);
  assert_int_equal(anvil_send(&node, 0, rule_addr, "updateRule(string)", r), 0);
  free(r);
  assert_int_equal(set_ostc("IterationOfPi", ostc), 0);
  xgr_chain_cache_free(k);
}

static void test_authorized(void **st) {
  (void)st;
  xgr_error e;
  bool ok;
  assert_int_equal(xgr_chain_authorized(node.chain, NULL, registry, node.accounts[0], &ok, &e), 0);
  assert_true(ok);
  assert_int_equal(xgr_chain_authorized(node.chain, NULL, registry, node.accounts[1], &ok, &e), 0);
  assert_false(ok);
  char buf[128];
  snprintf(buf, sizeof buf, "[\"%s\"]", node.accounts[1]);
  assert_int_equal(anvil_send(&node, 0, registry, "addExecutor(address)", buf), 0);
  assert_int_equal(xgr_chain_authorized(node.chain, NULL, registry, node.accounts[1], &ok, &e), 0);
  assert_true(ok);
  /* executors have no write authority on chain */
  assert_int_equal(anvil_send(&node, 1, registry, "setOSTC(string,string)", "[\"x\", \"{}\"]"), 1);
  /* the owner cannot be added as an executor */
  snprintf(buf, sizeof buf, "[\"%s\"]", node.accounts[0]);
  assert_int_equal(anvil_send(&node, 0, registry, "addExecutor(address)", buf), 1);
  /* no executor extension: owner only, not an error */
  assert_int_equal(xgr_chain_authorized(node.chain, NULL, legacy, node.accounts[0], &ok, &e), 0);
  assert_true(ok);
  assert_int_equal(xgr_chain_authorized(node.chain, NULL, legacy, node.accounts[1], &ok, &e), 0);
  assert_false(ok);
  /* rule contracts have the same extension (contracts/src/OwnedExecutors.sol, shared by both) */
  assert_int_equal(xgr_chain_authorized(node.chain, NULL, rule_addr, node.accounts[0], &ok, &e), 0);
  assert_true(ok);
  snprintf(buf, sizeof buf, "[\"%s\"]", node.accounts[2]);
  assert_int_equal(anvil_send(&node, 1, rule_addr, "addExecutor(address)", buf), 1);   /* not the owner */
  assert_int_equal(anvil_send(&node, 0, rule_addr, "addExecutor(address)", buf), 0);
  assert_int_equal(xgr_chain_authorized(node.chain, NULL, rule_addr, node.accounts[2], &ok, &e), 0);
  assert_true(ok);
  assert_int_equal(anvil_send(&node, 0, rule_addr, "removeExecutor(address)", buf), 0);
  assert_int_equal(xgr_chain_authorized(node.chain, NULL, rule_addr, node.accounts[2], &ok, &e), 0);
  assert_false(ok);
}

/* The public IterationOfPi example, read from the chain, run for 20 steps on the driver. */
static void test_run_from_chain(void **st) {
  (void)st;
  xgr_chain_cache *k = xgr_chain_cache_new(node.chain);
  xgr_chain_orch o;
  xgr_error e;
  assert_int_equal(xgr_chain_load_orch(k, NULL, registry, "IterationOfPi", NULL, &o, &e), 0);
  xgr_driver_config cfg = {.max_steps = 20, .record = true};
  xgr_driver *d = xgr_driver_new(&cfg);
  xgr_value pl;
  const char *p = "{\"Iter\":0,\"S\":0.0,\"Pi\":0.0}";
  assert_int_equal(xgr_value_from_json_text(p, strlen(p), 0, &pl, &e), 0);
  assert_int_equal(xgr_driver_add_session(d, o.bundle, node.accounts[0], 1, "PiIterationStep", pl, &e), 0);
  xgr_driver_run(d);
  assert_int_equal(xgr_driver_steps(d), 20);
  json_t *rep = xgr_driver_report(d, 0);
  char *txt = json_dumps(rep, JSON_COMPACT);
  if (!strstr(txt, "\"Iter\": 20") && !strstr(txt, "\"Iter\":20")) fail_msg("Iter 20 missing: %.1500s", txt);
  free(txt);
  json_decref(rep);
  xgr_value_release(pl);
  xgr_driver_free(d);
  xgr_chain_cache_free(k);
}

int main(void) {
  if (!anvil_test_begin()) return 77;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_load_and_pin), cmocka_unit_test(test_refresh),
                                     cmocka_unit_test(test_authorized), cmocka_unit_test(test_run_from_chain)};
  return anvil_test_end(cmocka_run_group_tests(tests, setup, teardown));
}
