/* test_xgrd_chain.c — xgrd with a chain, from the outside: anvil on 127.0.0.1, bundles put on it
 * with `xgr publish`, xgrd started with --chain and --api-map, sessions enqueued by XRC-729
 * address + ostcId (+ ostcHash) over JSON-RPC. Covers: IterationOfPi and ApiPriceFeed run from
 * the chain (price API on the loopback stand-in server), a contract-read rule on a deployed
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

#include "../rule/server.h"
#include "anvil.h"

static anvil node;
static test_server srv;
static char dir[64], token[43], base[64];
static pid_t xgrd_pid;
static json_t *pub_pi, *pub_feed, *pub_read;

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int write_file(const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

static json_t *publish(const char *bundle) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s publish %s --chain %s --key %s/k0.key --json", getenv("XGR"), bundle, node.url, dir);
  FILE *p = popen(cmd, "r");
  if (!p) return NULL;
  char out[8192];
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = 0;
  if (pclose(p)) return NULL;
  json_error_t je;
  return json_loads(out, 0, &je);
}

typedef struct sinkb {
  char *p;
  size_t n;
} sinkb;

static size_t sink(char *ptr, size_t size, size_t nmemb, void *ud) {
  sinkb *b = ud;
  b->p = realloc(b->p, b->n + size * nmemb + 1);
  memcpy(b->p + b->n, ptr, size * nmemb);
  b->n += size * nmemb;
  b->p[b->n] = 0;
  return size * nmemb;
}

/* GET path or POST a JSON-RPC call; returns the body (caller frees) and *status. */
static char *http(const char *path, const char *body, long *status) {
  char url[128];
  snprintf(url, sizeof url, "%s%s", base, path);
  CURL *h = curl_easy_init();
  sinkb b = {0};
  struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
  if (body) {
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  }
  CURLcode rc = curl_easy_perform(h);
  *status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
  curl_easy_cleanup(h);
  curl_slist_free_all(hd);
  if (rc != CURLE_OK) {
    free(b.p);
    return NULL;
  }
  return b.p ? b.p : strdup("");
}

/* A JSON-RPC call: the whole answer object (result or error). */
static json_t *call(const char *method, json_t *params) {
  json_t *rq = json_pack("{s:s, s:i, s:s, s:o}", "jsonrpc", "2.0", "id", 1, "method", method, "params", params);
  char *body = json_dumps(rq, JSON_COMPACT);
  json_decref(rq);
  long st;
  char *out = http("/", body, &st);
  free(body);
  assert_non_null(out);
  json_error_t je;
  json_t *j = json_loads(out, 0, &je);
  if (!j) fail_msg("not JSON: %s", out);
  free(out);
  return j;
}

static int start_xgrd(void) {
  char portfile[128], map[160], chain[96], store[128];
  snprintf(portfile, sizeof portfile, "%s/port", dir);
  unlink(portfile);
  snprintf(store, sizeof store, "sqlite:%s/xgrd.db", dir);
  snprintf(map, sizeof map, "https://api.coinbase.com=%s", srv.base);
  snprintf(chain, sizeof chain, "%s", node.url);
  xgrd_pid = fork();
  if (xgrd_pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);   /* never outlive the test */
    char log[128];
    snprintf(log, sizeof log, "%s/xgrd.log", dir);
    FILE *f = freopen(log, "a", stderr);
    (void)f;
    execl(getenv("XGRD"), "xgrd", "--listen", "127.0.0.1:0", "--port-file", portfile, "--auth", "none", "--chain", chain,
          "--api-map", map, "--time-scale", "100000", "--workers", "2", "--store", store, (char *)NULL);
    _exit(127);
  }
  for (int i = 0; i < 400; i++) {
    FILE *f = fopen(portfile, "r");
    unsigned port = 0;
    if (f) {
      if (fscanf(f, "%u", &port) != 1) port = 0;
      fclose(f);
    }
    if (port) {
      snprintf(base, sizeof base, "http://127.0.0.1:%u", port);
      return 0;
    }
    sleep_ms(25);
  }
  return -1;
}

static int setup(void **st) {
  (void)st;
  if (anvil_start(&node, NULL)) return -1;
  srv.coinbase = 65000;
  srv.bitstamp = srv.gecko = 100;
  if (test_server_start(&srv)) return -1;
  snprintf(dir, sizeof dir, "/tmp/xgr-xgrd-chain-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  if (write_file("k0.key", "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80\n")) return -1;
  char path[256];
  snprintf(path, sizeof path, "%s/k0.key", dir);
  chmod(path, 0600);
  if (anvil_deploy(&node, "TestToken", "(string,string,uint256)", "[\"T\", \"T\", 5000]", token)) return -1;
  /* IterationOfPi from the repository's bundle */
  snprintf(path, sizeof path, "%s/examples/bundles/iteration_of_pi.json", getenv("XGR_SRC"));
  if (!(pub_pi = publish(path))) return -1;
  /* ApiPriceFeed from the public example files */
  const char *sh = getenv("XGR_SHARED");
  char ostc_p[512], rule_p[512];
  snprintf(ostc_p, sizeof ostc_p, "%s/specs/xgr-public/examples/ApiPriceFeed/XRC729Json/ApiPriceFeedLoop_CoinbaseSpot.json", sh);
  snprintf(rule_p, sizeof rule_p, "%s/specs/xgr-public/examples/ApiPriceFeed/XRC137Json/ApiPriceFeedStep_CoinbaseSpot.json", sh);
  json_error_t je;
  json_t *ostc = json_load_file(ostc_p, JSON_PRESERVE_ORDER, &je), *rule = json_load_file(rule_p, JSON_PRESERVE_ORDER, &je);
  if (!ostc || !rule) return -1;
  const char *addr = json_string_value(json_object_get(json_object_get(json_object_get(ostc, "structure"), "APICallStep"), "rule"));
  json_t *b = json_pack("{s:o, s:{s:o}}", "orchestration", ostc, "rules", addr, rule);
  snprintf(path, sizeof path, "%s/feed.json", dir);
  json_dump_file(b, path, JSON_PRESERVE_ORDER);
  json_decref(b);
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
  if (write_file("read.json", doc)) return -1;
  snprintf(path, sizeof path, "%s/read.json", dir);
  if (!(pub_read = publish(path))) return -1;
  return start_xgrd();
}

static int teardown(void **st) {
  (void)st;
  int bad = 0;
  if (xgrd_pid > 0) {   /* a clean stop: exit 0 (under ASan this is also the leak check) */
    kill(xgrd_pid, SIGTERM);
    int status;
    waitpid(xgrd_pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status)) {
      char cmd[160];
      snprintf(cmd, sizeof cmd, "tail -40 %s/xgrd.log >&2", dir);
      if (system(cmd)) {}
      bad = -1;
    }
  }
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) {}
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
    sleep_ms(50);
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
  json_t *r = enqueue(pub_feed, 2, "APICallStep", "{}", NULL);
  assert_non_null(json_object_get(r, "result"));
  json_decref(r);
  char *t = wait_for(2, "\"PrevPrice\":65000");
  assert_non_null(strstr(t, "\"Pair\":\"BTC-USD\""));
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
  long status;
  char *m = http("/metrics", NULL, &status);
  assert_int_equal(status, 200);
  if (!strstr(m, "xgr_chain{backend=\"default\",kind=\"up\"} 1")) fail_msg("metrics: %.3000s", m);
  free(m);
  char *rz = http("/readyz", NULL, &status);
  assert_int_equal(status, 200);
  free(rz);
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
  kill(xgrd_pid, SIGKILL);
  int status;
  waitpid(xgrd_pid, &status, 0);
  xgrd_pid = 0;
  assert_int_equal(start_xgrd(), 0);
  char *t = wait_for(9, "\"Iter\":12");
  free(t);
}

/* Permits (xgrd's default auth) on a chain registry: the SessionPermit's signer must be the XRC-729
 * contract's owner() or in its getExecutorList() — a signer that is neither is refused (-32007)
 * until the owner adds it as an executor on the chain. */
static json_t *signed_enqueue(const char *url, const char *keyfile, uint64_t root) {
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
  char saved[64];
  snprintf(saved, sizeof saved, "%s", base);
  snprintf(base, sizeof base, "%s", url);
  json_error_t je2;
  json_t *r = call("xgr.enqueue", json_pack("{s:s, s:s, s:s, s:I, s:{s:s, s:o}, s:o}", "xrc729",
                                            json_string_value(json_object_get(pub_pi, "registry")), "ostcId", "IterationOfPi",
                                            "ostcHash", json_string_value(json_object_get(pub_pi, "ostcHash")), "rootPid",
                                            (json_int_t)root, "init", "stepId", "PiIterationStep", "payload",
                                            json_loads("{\"Iter\":0,\"S\":0.0,\"Pi\":0.0}", 0, &je2), "permit", permit));
  snprintf(base, sizeof base, "%s", saved);
  return r;
}

static void test_permits_chain_registry(void **st) {
  (void)st;
  assert_int_equal(write_file("k1.key", "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d\n"), 0);
  char path[256], portfile[128];
  snprintf(path, sizeof path, "%s/k1.key", dir);
  chmod(path, 0600);
  snprintf(portfile, sizeof portfile, "%s/port2", dir);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);   /* never outlive the test */
    char log[128];
    snprintf(log, sizeof log, "%s/xgrd2.log", dir);
    FILE *f = freopen(log, "a", stderr);
    (void)f;
    execl(getenv("XGRD"), "xgrd", "--listen", "127.0.0.1:0", "--port-file", portfile, "--chain", node.url, "--chain-id",
          "31337", "--time-scale", "100000", (char *)NULL);
    _exit(127);
  }
  char url[64] = "";
  for (int i = 0; i < 400 && !url[0]; i++) {
    FILE *f = fopen(portfile, "r");
    unsigned port = 0;
    if (f) {
      if (fscanf(f, "%u", &port) != 1) port = 0;
      fclose(f);
    }
    if (port) snprintf(url, sizeof url, "http://127.0.0.1:%u", port);
    else sleep_ms(25);
  }
  assert_true(url[0]);
  /* the registry's owner (account 0, who published it) */
  json_t *r = signed_enqueue(url, "k0.key", 1);
  if (!json_object_get(r, "result")) fail_msg("owner refused: %s", json_dumps(r, JSON_COMPACT));
  json_decref(r);
  /* account 1: neither owner nor executor */
  r = signed_enqueue(url, "k1.key", 1);
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
  r = signed_enqueue(url, "k1.key", 1);
  if (!json_object_get(r, "result")) fail_msg("executor refused: %s", json_dumps(r, JSON_COMPACT));
  json_decref(r);
  kill(pid, SIGTERM);
  int status;
  waitpid(pid, &status, 0);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
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
  if (!anvil_binary()) {
    printf("anvil not installed (scripts/deps.sh runs npm ci in contracts/): skipped\n");
    return 77;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_pi_from_chain), cmocka_unit_test(test_price_feed_from_chain),
                                     cmocka_unit_test(test_read_from_chain), cmocka_unit_test(test_validate_from_chain), cmocka_unit_test(test_pin_mismatch),
                                     cmocka_unit_test(test_health), cmocka_unit_test(test_restart),
                                     cmocka_unit_test(test_permits_chain_registry)};
  int rc = cmocka_run_group_tests(tests, setup, teardown);
  curl_global_cleanup();
  return rc;
}
