/* test_xgrd_chain.c — xgrd with a chain, from the outside: anvil on 127.0.0.1, bundles put on it
 * with `xgr publish`, xgrd started with --chain and --api-map, sessions enqueued by XRC-729
 * address + ostcId (+ ostcHash) over JSON-RPC. Covers: IterationOfPi and the price feed of
 * examples/bundles run from the chain (its price source on the loopback stand-in server), a contract-read rule on a deployed
 * ERC-20, a pinned-hash mismatch refused with nothing stored, an unknown ostcId, the chain's
 * health in xgr_getCoreAddrs and /metrics, /readyz. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../daemon/harness.h"
#include "../rule/server.h"
#include "anvil.h"

static anvil node;
static test_server srv;
static xh_daemon xd;          /* the xgrd under test; its directory also holds the keys and bundles */
static const char *dir = xd.dir;
static char token[43];
static json_t *pub_pi, *pub_feed, *pub_read;

static json_t *publish(const char *bundle) {
  char key[300];
  snprintf(key, sizeof key, "%s/k0.key", dir);
  return anvil_publish(&node, bundle, key);
}

/* A JSON-RPC call: the whole answer object (result or error). */
static json_t *call(const char *method, json_t *params) { return xh_call(&xd, method, params); }

static int start_xgrd(void) {
  char map[160];
  snprintf(map, sizeof map, "https://alpha.prices.example=%s/alpha", srv.base);
  xh_spawn(&xd, (const char *[]){"--auth", "none", "--chain", node.url, "--api-map", map, "--allow-outbound", "loopback", "--time-scale", "100000",
                                 "--workers", "2", "--store", xd.store, NULL});
  return xh_wait_port(&xd);
}

static int setup(void **st) {
  (void)st;
  if (anvil_start(&node, NULL)) return -1;
  srv.alpha = 65000;
  srv.beta = srv.gamma = 100;
  if (test_server_start(&srv)) return -1;
  xh_init(&xd, "xgrd-chain");
  char path[512];
  snprintf(path, sizeof path, "%s/k0.key", dir);
  if (anvil_key_file(0, path)) return -1;
  if (anvil_deploy(&node, "TestToken", "(string,string,uint256)", "[\"T\", \"T\", 5000]", token)) return -1;
  /* IterationOfPi from the repository's bundle */
  snprintf(path, sizeof path, "%s/examples/bundles/iteration_of_pi.json", getenv("XGR_SRC"));
  if (!(pub_pi = publish(path))) return -1;
  /* the price feed loop of the repository's examples */
  snprintf(path, sizeof path, "%s/examples/bundles/price_feed.json", getenv("XGR_SRC"));
  if (!(pub_feed = publish(path))) return -1;
  /* a contract-read rule on the token */
  char doc[2048];
  snprintf(doc, sizeof doc,
           "{\"orchestration\":{\"id\":\"Balance\",\"structure\":{\"Check\":{\"rule\":\"0x00000000000000000000000000000000000000b1\"}}},"
           "\"rules\":{\"0x00000000000000000000000000000000000000b1\":{\"payload\":{\"User\":{\"type\":\"address\"}},"
           "\"contractReads\":[{\"to\":\"%s\",\"function\":\"balanceOf(address)\",\"args\":[{\"type\":\"address\",\"value\":\"[User]\"}],"
           "\"saveAs\":{\"0\":{\"key\":\"Balance\",\"type\":\"uint256\",\"default\":\"0\"}}}],"
           "\"rules\":[\"[Balance] > 0\"],\"onValid\":{\"payload\":{\"Seen\":\"[Balance]\"}},\"onInvalid\":{\"payload\":{\"Seen\":\"none\"}}}}}",
           token);
  if (xh_write(dir, "read.json", doc)) return -1;
  snprintf(path, sizeof path, "%s/read.json", dir);
  if (!(pub_read = publish(path))) return -1;
  return start_xgrd();
}

static int teardown(void **st) {
  (void)st;
  int bad = 0;
  if (xd.pid > 0 && xh_stop(&xd, SIGTERM)) {   /* a clean stop: exit 0 (under ASan also the leak check) */
    char cmd[400];
    snprintf(cmd, sizeof cmd, "tail -40 %s >&2", xd.log);
    if (system(cmd)) {}
    bad = -1;
  }
  xh_remove(&xd);
  json_decref(pub_pi);
  json_decref(pub_feed);
  json_decref(pub_read);
  test_server_stop(&srv);
  anvil_stop(&node);
  return bad;
}

static json_t *enqueue(json_t *pub, uint64_t root, const char *step, const char *payload, const char *hash) {
  json_error_t je;
  json_t *pl = json_loads(payload, 0, &je);
  return call("xgr.enqueue", json_pack("{s:s, s:s, s:s, s:s, s:I, s:{s:s, s:o}}", "owner", node.accounts[0], "xrc729",
                                       json_string_value(json_object_get(pub, "registry")), "ostcId",
                                       json_string_value(json_object_get(pub, "ostcId")), "ostcHash",
                                       hash ? hash : json_string_value(json_object_get(pub, "ostcHash")), "rootPid",
                                       (json_int_t)root, "init", "stepId", step, "payload", pl));
}

/* getSession until `needle` shows up in it (or 10 s pass); returns the last answer's text. */
static char *wait_for(uint64_t root, const char *needle) {
  char *t = NULL;
  for (int i = 0; i < 200; i++) {
    free(t);
    json_t *j = call("xgr.getSession", json_pack("{s:s, s:I}", "owner", node.accounts[0], "rootPid", (json_int_t)root));
    t = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (strstr(t, needle)) return t;
    xh_msleep(50);
  }
  fail_msg("session %llu: \"%s\" never showed up: %.3000s", (unsigned long long)root, needle, t);
  return t;
}

static void test_pi_from_chain(void **st) {
  (void)st;
  json_t *r = enqueue(pub_pi, 1, "PiIterationStep", "{\"Iter\":0,\"S\":0.0,\"Pi\":0.0}", NULL);
  json_t *res = json_object_get(r, "result");
  if (!res) fail_msg("enqueue failed: %s", json_dumps(r, JSON_COMPACT));
  assert_string_equal(json_string_value(json_object_get(res, "ack")), "queued");
  assert_string_equal(json_string_value(json_object_get(res, "ostcHash")), json_string_value(json_object_get(pub_pi, "ostcHash")));
  json_decref(r);
  /* waitSec 3600 passes in 36 ms at --time-scale 100000: the loop goes on */
  free(wait_for(1, "\"Iter\":5"));
}

static void test_price_feed_from_chain(void **st) {
  (void)st;
  json_t *r = enqueue(pub_feed, 2, "Poll", "{}", NULL);
  assert_non_null(json_object_get(r, "result"));
  json_decref(r);
  char *t = wait_for(2, "\"Last\":65000");
  assert_non_null(strstr(t, "\"QuotedPair\":\"BTC-USD\""));
  free(t);
}

static void test_read_from_chain(void **st) {
  (void)st;
  char pl[128];
  snprintf(pl, sizeof pl, "{\"User\":\"%s\"}", node.accounts[0]);
  json_t *r = enqueue(pub_read, 3, "Check", pl, NULL);
  assert_non_null(json_object_get(r, "result"));
  json_decref(r);
  free(wait_for(3, "\"Seen\":\"5000\""));
}

static void test_pin_mismatch(void **st) {
  (void)st;
  json_t *r = enqueue(pub_pi, 4, "PiIterationStep", "{\"Iter\":0,\"S\":0.0,\"Pi\":0.0}",
                      "0x0000000000000000000000000000000000000000000000000000000000000001");
  json_t *err = json_object_get(r, "error");
  assert_non_null(err);
  assert_int_equal(json_integer_value(json_object_get(err, "code")), -32006);
  json_decref(r);
  /* nothing was stored for the refused call */
  r = call("xgr.getSession", json_pack("{s:s, s:I}", "owner", node.accounts[0], "rootPid", (json_int_t)4));
  assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "error"), "code")), -32004);
  json_decref(r);
  /* an ostcId the registry does not have */
  r = call("xgr.enqueue", json_pack("{s:s, s:s, s:s, s:I}", "owner", node.accounts[0], "xrc729",
                                    json_string_value(json_object_get(pub_pi, "registry")), "ostcId", "Nope", "rootPid",
                                    (json_int_t)5));
  err = json_object_get(r, "error");
  assert_non_null(err);
  char *t = json_dumps(err, JSON_COMPACT);
  if (!strstr(t, "unknown ostcId")) fail_msg("%s", t);
  free(t);
  json_decref(r);
}

static void test_health(void **st) {
  (void)st;
  json_t *r = call("xgr_getCoreAddrs", json_array());
  json_t *res = json_object_get(r, "result");
  assert_non_null(res);
  json_t *c0 = json_array_get(json_object_get(res, "chains"), 0);
  assert_true(json_is_true(json_object_get(c0, "ok")));
  assert_true(json_integer_value(json_object_get(c0, "lastBlock")) > 0);
  assert_true(json_integer_value(json_object_get(c0, "calls")) > 0);
  json_decref(r);
  char *m;
  assert_int_equal(xh_http(&xd, "GET", "/metrics", NULL, NULL, 0, 30, &m), 200);
  if (!strstr(m, "xgr_chain_up{backend=\"default\"} 1")) fail_msg("metrics: %.3000s", m);
  free(m);
  assert_int_equal(xh_http(&xd, "GET", "/readyz", NULL, NULL, 0, 30, NULL), 200);
}

/* xgrd SIGKILLed while a session from the chain runs: the restarted xgrd recovers it from its store
 * (the orchestration's exact bytes were registered there when it was read from the chain) and the
 * loop goes on. */
static void test_restart(void **st) {
  (void)st;
  json_t *r = enqueue(pub_pi, 9, "PiIterationStep", "{\"Iter\":0,\"S\":0.0,\"Pi\":0.0}", NULL);
  assert_non_null(json_object_get(r, "result"));
  json_decref(r);
  free(wait_for(9, "\"Iter\":3"));
  xh_stop(&xd, SIGKILL);
  assert_int_equal(start_xgrd(), 0);
  char *t = wait_for(9, "\"Iter\":12");
  free(t);
}

/* Permits (xgrd's default auth) on a chain registry: the SessionPermit's signer must be the XRC-729
 * contract's owner() or in its getExecutorList() — a signer that is neither is refused (-32007)
 * until the owner adds it as an executor on the chain. */
static json_t *signed_enqueue(const xh_daemon *d, const char *keyfile, uint64_t root) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s permit session --key %s/%s --chain-id 31337 --ostc-id IterationOfPi --ostc-hash %s --session-id %llu",
           getenv("XGR"), dir, keyfile, json_string_value(json_object_get(pub_pi, "ostcHash")), (unsigned long long)root);
  FILE *p = popen(cmd, "r");
  char out[8192];
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = 0;
  assert_int_equal(pclose(p), 0);
  json_error_t je;
  json_t *permit = json_loads(out, 0, &je);
  if (!permit) fail_msg("permit: %s", out);
  json_error_t je2;
  json_t *r = xh_call(d, "xgr.enqueue", json_pack("{s:s, s:s, s:s, s:I, s:{s:s, s:o}, s:o}", "xrc729",
                                            json_string_value(json_object_get(pub_pi, "registry")), "ostcId", "IterationOfPi",
                                            "ostcHash", json_string_value(json_object_get(pub_pi, "ostcHash")), "rootPid",
                                            (json_int_t)root, "init", "stepId", "PiIterationStep", "payload",
                                            json_loads("{\"Iter\":0,\"S\":0.0,\"Pi\":0.0}", 0, &je2), "permit", permit));
  return r;
}

static void test_permits_chain_registry(void **st) {
  (void)st;
  char path[512];
  snprintf(path, sizeof path, "%s/k1.key", dir);
  assert_int_equal(anvil_key_file(1, path), 0);
  xh_daemon xd2;   /* permits (the default auth), memory store */
  xh_init(&xd2, "xgrd-chain-permits");
  xh_start(&xd2, (const char *[]){"--chain", node.url, "--chain-id", "31337", "--time-scale", "100000", NULL});
  /* the registry's owner (account 0, who published it) */
  json_t *r = signed_enqueue(&xd2, "k0.key", 1);
  if (!json_object_get(r, "result")) fail_msg("owner refused: %s", json_dumps(r, JSON_COMPACT));
  json_decref(r);
  /* account 1: neither owner nor executor */
  r = signed_enqueue(&xd2, "k1.key", 1);
  json_t *err = json_object_get(r, "error");
  assert_non_null(err);
  assert_int_equal(json_integer_value(json_object_get(err, "code")), -32007);
  char *t = json_dumps(err, JSON_COMPACT);
  if (!strstr(t, "neither the owner")) fail_msg("%s", t);
  free(t);
  json_decref(r);
  /* the owner adds account 1 as an executor on the chain: now it may start sessions */
  char buf[128];
  snprintf(buf, sizeof buf, "[\"%s\"]", node.accounts[1]);
  assert_int_equal(anvil_send(&node, 0, json_string_value(json_object_get(pub_pi, "registry")), "addExecutor(address)", buf), 0);
  r = signed_enqueue(&xd2, "k1.key", 1);
  if (!json_object_get(r, "result")) fail_msg("executor refused: %s", json_dumps(r, JSON_COMPACT));
  json_decref(r);
  assert_int_equal(xh_stop(&xd2, SIGTERM), 0);
  xh_remove(&xd2);
}

/* xgr_validateDataTransfer with the registry's address as `orchestration` + ostcId: the first
 * step's result (a contract read) comes back in the answer. */
static void test_validate_from_chain(void **st) {
  (void)st;
  json_error_t je;
  char pl[128];
  snprintf(pl, sizeof pl, "{\"User\":\"%s\"}", node.accounts[0]);
  json_t *r = call("xgr_validateDataTransfer",
                   json_pack("[{s:s, s:s, s:s, s:s, s:s, s:I, s:o}]", "from", node.accounts[0], "orchestration",
                             json_string_value(json_object_get(pub_read, "registry")), "ostcId", "Balance", "ostcHash",
                             json_string_value(json_object_get(pub_read, "ostcHash")), "stepId", "Check", "sessionId",
                             (json_int_t)30, "payload", json_loads(pl, 0, &je)));
  char *t = json_dumps(r, JSON_COMPACT);
  if (!json_object_get(r, "result") || !strstr(t, "5000")) fail_msg("validateDataTransfer: %s", t);
  free(t);
  json_decref(r);
}

int main(void) {
  if (!anvil_test_begin()) return 77;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_pi_from_chain), cmocka_unit_test(test_price_feed_from_chain),
                                     cmocka_unit_test(test_read_from_chain), cmocka_unit_test(test_validate_from_chain), cmocka_unit_test(test_pin_mismatch),
                                     cmocka_unit_test(test_health), cmocka_unit_test(test_restart),
                                     cmocka_unit_test(test_permits_chain_registry)};
  return anvil_test_end(cmocka_run_group_tests(tests, setup, teardown));
}
