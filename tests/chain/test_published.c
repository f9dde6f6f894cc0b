/* test_published.c — the examples put on a chain with `xgr publish` and run from there:
 * IterationOfPi (examples/bundles/iteration_of_pi.json) and the price feed
 * (examples/bundles/price_feed.json) are published to a real anvil; then a fresh chain set loads
 * each orchestration by (registry, ostcId, ostcHash) from the contracts — rules from getRule() —
 * and the deterministic driver runs it, the price feed with its price source mapped to the
 * loopback stand-in server of the rule tests (tests/rule/server.c). With the argument `shared`
 * (the test test_published_shared) it publishes and runs the public ApiPriceFeed example instead
 * (assembled from its OSTC and its XRC-137 rule in ../shared), and skips when that folder is absent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../rule/server.h"
#include "../shared_dir.h"
#include "anvil.h"
#include "xgr/bundle.h"
#include "xgr/driver.h"

static anvil node;
static test_server srv;
static char dir[64];

static int setup(void **st) {
  (void)st;
  if (anvil_start(&node, NULL)) return -1;
  srv.alpha = 65000;
  srv.beta = srv.gamma = 100;
  if (test_server_start(&srv)) return -1;
  snprintf(dir, sizeof dir, "/tmp/xgr-published-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  char path[256];
  snprintf(path, sizeof path, "%s/k0.key", dir);
  return anvil_key_file(0, path);
}

static int teardown(void **st) {
  (void)st;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) {}
  test_server_stop(&srv);
  anvil_stop(&node);
  return 0;
}

static json_t *publish(const char *bundle) {
  char key[128];
  snprintf(key, sizeof key, "%s/k0.key", dir);
  json_t *j = anvil_publish(&node, bundle, key);
  assert_non_null(j);
  return j;
}

/* Load the published orchestration from the chain (fresh set: nothing shared with publish) and
 * run it for `steps` steps on the driver; returns the report. */
static json_t *run_from_chain(json_t *pub, const char *start, const char *payload, int steps, const xgr_api_map_entry *map,
                              size_t nmap) {
  xgr_chain *c = xgr_chain_new();
  xgr_error e;
  assert_int_equal(xgr_chain_add(c, node.url, &e), 0);
  xgr_chain_cache *k = xgr_chain_cache_new(c);
  xgr_chain_orch o;
  int rc = xgr_chain_load_orch(k, NULL, json_string_value(json_object_get(pub, "registry")),
                               json_string_value(json_object_get(pub, "ostcId")), json_string_value(json_object_get(pub, "ostcHash")),
                               &o, &e);
  if (rc) fail_msg("load: %s", e.message);
  xgr_outbound_policy *allow = xgr_outbound_policy_new();   /* the API server is on loopback */
  assert_int_equal(xgr_outbound_policy_allow(allow, "loopback", &e), 0);
  xgr_driver_config cfg = {.max_steps = (uint64_t)steps, .record = true, .api_map = map, .napi_map = nmap, .outbound = allow};
  xgr_driver *d = xgr_driver_new(&cfg);
  xgr_value pl;
  assert_int_equal(xgr_value_from_json_text(payload, strlen(payload), 0, &pl, &e), 0);
  assert_int_equal(xgr_driver_add_session(d, o.bundle, node.accounts[0], 1, start, pl, &e), 0);
  xgr_driver_run(d);
  assert_int_equal(xgr_driver_steps(d), (uint64_t)steps);
  json_t *rep = xgr_driver_report(d, 0);
  xgr_value_release(pl);
  xgr_driver_free(d);
  xgr_outbound_policy_free(allow);
  xgr_chain_cache_free(k);
  xgr_chain_free(c);
  return rep;
}

static void test_iteration_of_pi(void **st) {
  (void)st;
  char path[512];
  snprintf(path, sizeof path, "%s/examples/bundles/iteration_of_pi.json", getenv("XGR_SRC"));
  json_t *pub = publish(path);
  json_t *rep = run_from_chain(pub, "PiIterationStep", "{\"Iter\":0,\"S\":0.0,\"Pi\":0.0}", 50, NULL, 0);
  char *t = json_dumps(rep, JSON_COMPACT);
  if (!strstr(t, "\"Iter\":50")) fail_msg("Iter 50 missing: %.1000s", t);
  if (!strstr(t, "\"Pi\":3.1")) fail_msg("Pi not near 3.1: %.1000s", t);
  free(t);
  json_decref(rep);
  json_decref(pub);
}

/* Publish a price-feed bundle, run three polls of its loop from the chain with the API host `from`
 * mapped to `to` on the stand-in server, and check that the report holds each of `want`. */
static void feed_from_chain(const char *bundle, const char *ostc_id, const char *start, const char *from, const char *to,
                            const char *const want[3]) {
  json_t *pub = publish(bundle);
  assert_string_equal(json_string_value(json_object_get(pub, "ostcId")), ostc_id);
  xgr_api_map_entry map[1] = {{from, to}};
  json_t *rep = run_from_chain(pub, start, "{}", 3, map, 1);
  char *t = json_dumps(rep, JSON_COMPACT);
  for (int i = 0; i < 3; i++)
    if (!strstr(t, want[i])) fail_msg("price feed run lacks %s: %.2000s", want[i], t);
  free(t);
  json_decref(rep);
  json_decref(pub);
}

/* The project's price feed from the chain: three polls of the loop, a minute apart. */
static void test_price_feed(void **st) {
  (void)st;
  char path[512], alpha[96];
  snprintf(path, sizeof path, "%s/examples/bundles/price_feed.json", getenv("XGR_SRC"));
  snprintf(alpha, sizeof alpha, "%s/alpha", srv.base);
  feed_from_chain(path, "PriceFeedLoop", "Poll", "https://alpha.prices.example", alpha,
                  (const char *const[]){"\"Last\":65000", "\"Round\":3", "\"QuotedPair\":\"BTC-USD\""});
}

/* test_published_shared: the public ApiPriceFeed example, assembled into a bundle. */
static void test_public_price_feed(void **st) {
  (void)st;
  char path[256];
  snprintf(path, sizeof path, "%s/pricefeed.json", dir);
  assert_int_equal(anvil_pricefeed_bundle(shared_dir_or_skip("test_published_shared", "the public ApiPriceFeed example"), path), 0);
  feed_from_chain(path, "ContinuousDataFeed", "APICallStep", "https://api.coinbase.com", srv.base,
                  (const char *const[]){"\"PrevPrice\":65000", "\"Seq\":3", "\"Pair\":\"BTC-USD\""});
}

int main(int argc, char **argv) {
  bool shared = argc > 1 && !strcmp(argv[1], "shared");
  if (shared) shared_dir_or_skip("test_published_shared", "the public ApiPriceFeed example");
  if (!anvil_test_begin()) return 77;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_iteration_of_pi), cmocka_unit_test(test_price_feed)};
  const struct CMUnitTest public_tests[] = {cmocka_unit_test(test_public_price_feed)};
  return anvil_test_end(shared ? cmocka_run_group_tests(public_tests, setup, teardown)
                               : cmocka_run_group_tests(tests, setup, teardown));
}
