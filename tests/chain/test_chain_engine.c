/* test_chain_engine.c — contract reads on the concurrent engine never hold a worker: with ONE
 * worker and anvil behind a loopback proxy that holds every request 150 ms, 20 sessions with one
 * read each finish in far less than 20 × 150 ms, because the reads wait on the engine's libcurl
 * multi loop, not on the worker. Every read returns the real balance (the rules say valid). */
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

#include "anvil.h"
#include "xgr/bundle.h"
#include "xgr/engine.h"
#include "xgr/value.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_overlap(void **st) {
  (void)st;
  anvil node;
  assert_int_equal(anvil_start(&node, NULL), 0);
  char token[43], buf[4096];
  assert_int_equal(anvil_deploy(&node, "TestToken", "(string,string,uint256)", "[\"T\", \"T\", 1000]", token), 0);
  latency_proxy px = {.target = node.url, .delay_ms = 150};
  assert_int_equal(latency_proxy_start(&px), 0);
  snprintf(buf, sizeof buf,
           "{\"orchestration\":{\"id\":\"R\",\"structure\":{\"S\":{\"rule\":\"r\"}}},\"rules\":{\"r\":"
           "{\"payload\":{},\"contractReads\":[{\"to\":\"%s\",\"function\":\"balanceOf(address)\","
           "\"args\":[{\"type\":\"address\",\"value\":\"%s\"}],"
           "\"saveAs\":{\"0\":{\"key\":\"B\",\"type\":\"uint256\"}}}],\"rules\":[\"[B] == 1000\"],"
           "\"onValid\":{\"payload\":{\"ok\":true}}}}}",
           token, node.accounts[0]);
  xgr_bundle *b;
  xgr_error e;
  xgr_diags d;
  xgr_diags_init(&d);
  assert_int_equal(xgr_bundle_parse(buf, strlen(buf), &b, &e, &d), 0);
  xgr_diags_free(&d);
  xgr_chain *chain = xgr_chain_new();
  assert_int_equal(xgr_chain_add(chain, px.url, &e), 0);
  xgr_chain_reader reader = xgr_chain_reader_of(chain);
  xgr_engine_config cfg = {.workers = 1, .chain = &reader, .keep_finished = true, .clock = {.kind = XGR_CLOCK_REAL}};
  xgr_engine *eng = xgr_engine_new(&cfg, &e);
  assert_non_null(eng);
  enum { N = 20 };
  double t0 = now_s();
  for (int s = 0; s < N; s++) {
    xgr_engine_start req = {.bundle = b, .owner = node.accounts[0], .root_pid = (uint64_t)s + 1, .start = "S",
                            .payload = xgr_value_null(), .record = true};
    assert_int_equal(xgr_engine_start_session(eng, &req, &e), 0);
  }
  for (int s = 0; s < N; s++) assert_int_equal(xgr_engine_wait(eng, node.accounts[0], (uint64_t)s + 1, 30000), 0);
  double dt = now_s() - t0;
  printf("%d sessions, one read each through a 150 ms proxy, 1 worker: %.3f s (sequential would take %.1f s)\n", N, dt,
         N * 0.15);
  assert_true(dt < N * 0.15 / 2);   /* sequential: N x 0.15 s; overlapped: about 0.2 s */
  for (int s = 0; s < N; s++) {
    json_t *rep = xgr_engine_report(eng, node.accounts[0], (uint64_t)s + 1, &e);
    if (!rep) fail_msg("session %d: no report: %s", s + 1, e.message);
    char *txt = xgr_json_dumps(rep, 0);   /* the project's writer: reports may hold exact numbers */
    if (!txt) fail_msg("session %d: report does not serialise", s + 1);
    if (!strstr(txt, "\"ok\":true") && !strstr(txt, "\"ok\": true")) fail_msg("session %d not valid: %.1500s", s + 1, txt);
    free(txt);
    json_decref(rep);
  }
  xgr_engine_free(eng);
  xgr_chain_free(chain);
  xgr_bundle_free(b);
  latency_proxy_stop(&px);
  anvil_stop(&node);
}

int main(void) {
  if (!anvil_test_begin()) return 77;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_overlap)};
  return anvil_test_end(cmocka_run_group_tests(tests, NULL, NULL));
}
