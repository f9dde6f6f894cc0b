/* bench_chain.c — the chain backend against a real anvil on 127.0.0.1 (issue 17):
 *
 *   1. one eth_call's latency: sequential balanceOf reads through the synchronous client (median);
 *   2. N sessions started at once on the concurrent engine, each running one step of a rule with
 *      one contract read (balanceOf), the orchestration and rule loaded from XRC-729 / XRC-137
 *      contracts through the cache: steps per second, wall time against N × one read's latency
 *      (the reads overlap on the engine's libcurl multi loop), and chain calls per step during the
 *      run (cached orchestration and rules: only the rule's own read).
 *
 * With --latency-ms L the engine talks to anvil through a loopback proxy that holds every request
 * L ms before forwarding it (a node across a network instead of on the same host): then N × one
 * read's latency is large and the overlap of the reads shows in the wall time.
 *
 * usage: bench_chain [--sessions N] [--workers W] [--latency-ms L]
 * (skips, exit 0, when anvil is not installed) */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../tests/chain/anvil.h"
#include "xgr/bundle.h"
#include "xgr/chain.h"
#include "xgr/engine.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static long long calls(xgr_chain *c) {
  json_t *h = xgr_chain_health(c);
  long long n = 0;
  for (size_t i = 0; i < json_array_size(h); i++) n += json_integer_value(json_object_get(json_array_get(h, i), "calls"));
  json_decref(h);
  return n;
}

int main(int argc, char **argv) {
  long sessions = 1000;
  unsigned workers = 2;
  long delay = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--sessions")) sessions = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--latency-ms")) delay = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--workers")) workers = (unsigned)atoi(argv[i + 1]);
  }
  if (!anvil_binary()) {
    printf("chain: anvil not installed (scripts/deps.sh runs npm ci in contracts/): skipped\n");
    return 0;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  anvil node;
  if (anvil_start(&node, NULL)) {
    fprintf(stderr, "bench_chain: anvil did not start\n");
    return 1;
  }
  char token[43], rule_addr[43], registry[43];
  char rule[1024], buf[2048];
  if (anvil_deploy(&node, "TestToken", "(string,string,uint256)", "[\"Bench\", \"BEN\", 1000000]", token)) return 1;
  snprintf(buf, sizeof buf, "[\"%s\", 250]", node.accounts[1]);
  if (anvil_send(&node, 0, token, "transfer(address,uint256)", buf)) return 1;
  snprintf(rule, sizeof rule,
           "{\"payload\":{\"User\":{\"type\":\"address\"}},"
           "\"contractReads\":[{\"to\":\"%s\",\"function\":\"balanceOf(address)\","
           "\"args\":[{\"type\":\"address\",\"value\":\"[User]\"}],"
           "\"saveAs\":{\"0\":{\"key\":\"Balance\",\"type\":\"uint256\",\"default\":\"0\"}}}],"
           "\"rules\":[\"[Balance] >= 250\"],\"onValid\":{\"payload\":{\"ok\":true}},\"onInvalid\":{\"payload\":{\"ok\":false}}}",
           token);
  json_t *a = json_pack("[s]", rule);
  char *t = json_dumps(a, JSON_COMPACT);
  json_decref(a);
  int rc = anvil_deploy(&node, "XRC137", "(string)", t, rule_addr);
  free(t);
  if (rc || anvil_deploy(&node, "XRC729", "(string)", "[\"XGR_XRC729\"]", registry)) return 1;
  char ostc[512];
  snprintf(ostc, sizeof ostc, "{\"id\":\"Balance\",\"structure\":{\"Check\":{\"rule\":\"%s\"}}}", rule_addr);
  a = json_pack("[s, s]", "Balance", ostc);
  t = json_dumps(a, JSON_COMPACT);
  json_decref(a);
  rc = anvil_send(&node, 0, registry, "setOSTC(string,string)", t);
  free(t);
  if (rc) return 1;

  latency_proxy px = {.target = node.url, .delay_ms = delay};
  if (delay > 0 && latency_proxy_start(&px)) {
    fprintf(stderr, "bench_chain: the latency proxy did not start\n");
    return 1;
  }
  if (delay > 0) printf("chain: anvil behind a loopback proxy that holds each request %ld ms\n", delay);
  xgr_chain *chain = xgr_chain_new();
  xgr_error e;
  if (xgr_chain_add(chain, delay > 0 ? px.url : node.url, &e)) return 1;

  /* 1. one read's latency */
  enum { NLAT = 50 };
  double lat[NLAT];
  xgr_value user = xgr_value_cstring(node.accounts[1]);
  for (int i = 0; i < NLAT; i++) {
    xgr_value out;
    double t0 = now_s();
    if (xgr_chain_eth_call(chain, NULL, NULL, token, "balanceOf(address)(uint256)", &user, 1, &out, NULL, &e)) {
      fprintf(stderr, "bench_chain: eth_call: %s\n", e.message);
      return 1;
    }
    lat[i] = now_s() - t0;
    xgr_value_release(out);
  }
  xgr_value_release(user);
  qsort(lat, NLAT, sizeof lat[0], cmp_d);
  double one = lat[NLAT / 2];
  printf("chain: one eth_call (balanceOf, synchronous, new connection each): median %.3f ms, p90 %.3f ms over %d calls\n",
         one * 1e3, lat[NLAT * 9 / 10] * 1e3, NLAT);

  /* 2. N sessions, one contract read each, orchestration and rule from the chain (cached) */
  xgr_chain_cache *cache = xgr_chain_cache_new(chain);
  xgr_chain_orch o;
  if (xgr_chain_load_orch(cache, NULL, registry, "Balance", NULL, &o, &e)) {
    fprintf(stderr, "bench_chain: load: %s\n", e.message);
    return 1;
  }
  xgr_chain_reader reader = xgr_chain_reader_of(chain);
  xgr_engine_config cfg = {.workers = workers, .chain = &reader, .clock = {.kind = XGR_CLOCK_REAL}};
  xgr_engine *eng = xgr_engine_new(&cfg, &e);
  if (!eng) {
    fprintf(stderr, "bench_chain: %s\n", e.message);
    return 1;
  }
  snprintf(buf, sizeof buf, "{\"User\":\"%s\"}", node.accounts[1]);
  long long errors = 0;
  for (int wave = 0; wave < 2; wave++) {  /* wave 0 opens the connections, wave 1 reuses them */
    long long c0 = calls(chain);
    xgr_engine_stats st0;
    xgr_engine_get_stats(eng, &st0);
    double t0 = now_s();
    for (long s = 0; s < sessions; s++) {
      char hash[67];
      memcpy(hash, o.hash, sizeof hash);
      if (xgr_chain_load_orch(cache, NULL, registry, "Balance", hash, &o, &e)) {  /* cached: no call */
        fprintf(stderr, "bench_chain: load: %s\n", e.message);
        return 1;
      }
      xgr_value payload;
      if (xgr_value_from_json_text(buf, strlen(buf), 0, &payload, &e)) return 1;
      xgr_engine_start req = {.bundle = o.bundle, .owner = node.accounts[0], .root_pid = (uint64_t)(wave * sessions + s) + 1,
                              .start = "Check", .payload = payload};
      if (xgr_engine_start_session(eng, &req, &e)) {
        fprintf(stderr, "bench_chain: start: %s\n", e.message);
        return 1;
      }
      xgr_value_release(payload);
    }
    xgr_engine_stats st;
    for (;;) {
      xgr_engine_get_stats(eng, &st);
      if (st.sessions_finished == (uint64_t)(sessions * (wave + 1))) break;
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    double dt = now_s() - t0;
    long long dc = calls(chain) - c0;
    uint64_t steps = st.steps - st0.steps;
    json_t *h = xgr_chain_health(chain);
    errors = json_integer_value(json_object_get(json_array_get(h, 0), "errors"));
    json_decref(h);
    printf("chain: %s: %ld sessions at once, one contract read per step: %llu steps in %.3f s = %.0f steps/s on %u workers; "
           "%ld x one read = %.3f s (%.2fx); %lld chain calls = %.2f per step (the rule's own read; orchestration and "
           "rule cached), %lld failed so far\n",
           wave ? "warm connections" : "cold connections", sessions, (unsigned long long)steps, dt, (double)steps / dt, workers,
           sessions, one * (double)sessions, one * (double)sessions / dt, dc, steps ? (double)dc / (double)steps : 0, errors);
  }
  xgr_engine_free(eng);
  xgr_chain_cache_free(cache);
  xgr_chain_free(chain);
  latency_proxy_stop(&px);
  anvil_stop(&node);
  curl_global_cleanup();
  return errors ? 1 : 0;
}
