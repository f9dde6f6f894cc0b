/* test_engine_zero_wait.c — zero-wait work on the real clock, without a store:
 *   1. a chain of 40 zero-wait steps completes with every step in order;
 *   2. an endless loop without waits does not monopolise the engine: kill(root) arrives and the
 *      session ends killed;
 *   3. a 32-way fan-out in the same engine completes meanwhile;
 *   4. timers are not starved by work that keeps the workers' deques long: on a clock scaled by
 *      1000, a chain of 20 steps that each wait 1 s (1 ms real) completes while four endless
 *      zero-wait loops, each spawning 16 more steps per round, keep both workers busy.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_check.h"
#include "xgr/engine.h"


static const char *rule = "{\"payload\":{\"N\":{\"type\":\"int64\",\"default\":0}},\"rules\":[\"[N] >= 0\"],"
                          "\"onValid\":{\"payload\":{\"N\":\"[N] + 1\"}}}";

static xgr_bundle *load(const char *orch) {
  char txt[16384];
  snprintf(txt, sizeof txt, "{\"orchestration\":%s,\"rules\":{\"r\":%s}}", orch, rule);
  return ec_bundle(txt);
}

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  char chain[8192], *p = chain;
  p += sprintf(p, "{\"id\":\"chain\",\"structure\":{");
  for (int i = 0; i < 40; i++) {
    if (i < 39) p += sprintf(p, "%s\"S%d\":{\"rule\":\"r\",\"onValid\":{\"spawns\":[\"S%d\"]}}", i ? "," : "", i, i + 1);
    else p += sprintf(p, ",\"S%d\":{\"rule\":\"r\"}", i);
  }
  sprintf(p, "}}");
  xgr_bundle *bc = load(chain);
  xgr_bundle *bl = load("{\"id\":\"loop\",\"structure\":{\"L\":{\"rule\":\"r\",\"onValid\":{\"spawns\":[\"L\"]}}}}");
  char fan[8192];
  p = fan;
  p += sprintf(p, "{\"id\":\"fan\",\"structure\":{\"A\":{\"rule\":\"r\",\"onValid\":{\"spawns\":[");
  for (int i = 0; i < 32; i++) p += sprintf(p, "%s\"B%d\"", i ? "," : "", i);
  p += sprintf(p, "],\"join\":{\"joinid\":\"J\",\"mode\":\"all\",\"waitonjoin\":\"kill\",\"from\":[");
  for (int i = 0; i < 32; i++) p += sprintf(p, "%s{\"node\":\"B%d\"}", i ? "," : "", i);
  p += sprintf(p, "]}}},\"J\":{\"rule\":\"r\"}");
  for (int i = 0; i < 32; i++) p += sprintf(p, ",\"B%d\":{\"rule\":\"r\"}", i);
  sprintf(p, "}}");
  xgr_bundle *bf = load(fan);

  xgr_error e;
  xgr_engine_config cfg = {.workers = 2, .keep_finished = true};
  xgr_engine *eng = xgr_engine_new(&cfg, &e);
  if (!EXPECT(eng != NULL, "engine: %s", e.message)) return expect_done();
  xgr_value none = xgr_value_null();
  xgr_engine_start s1 = {.bundle = bc, .owner = OWNER, .root_pid = 1, .start = "S0", .payload = none, .record = true};
  xgr_engine_start s2 = {.bundle = bl, .owner = OWNER, .root_pid = 2, .start = "L", .payload = none};
  xgr_engine_start s3 = {.bundle = bf, .owner = OWNER, .root_pid = 3, .start = "A", .payload = none, .record = true};
  EXPECT_OK(xgr_engine_start_session(eng, &s1, &e), e);
  EXPECT_OK(xgr_engine_start_session(eng, &s2, &e), e);
  EXPECT_OK(xgr_engine_start_session(eng, &s3, &e), e);

  EXPECT(xgr_engine_wait(eng, OWNER, 1, 10000) == 0, "the chain did not finish");
  json_t *rep = xgr_engine_report(eng, OWNER, 1, &e);
  EXPECT(rep != NULL, "chain report: %s", e.message);
  EXPECT_EQ_STR(json_string_value(json_object_get(rep, "result")), "completed");
  json_t *hist = json_object_get(rep, "history");
  EXPECT_EQ_INT(json_array_size(hist), 40);
  for (size_t i = 0; i < json_array_size(hist); i++) {
    char want[32];
    snprintf(want, sizeof want, "S%zu", i);
    const char *got = json_string_value(json_object_get(json_array_get(hist, i), "step"));
    EXPECT_EQ_STR(got, want);
  }
  json_t *last = json_array_get(json_object_get(rep, "processes"), 39);
  EXPECT_EQ_INT(json_integer_value(json_object_get(json_object_get(last, "payload"), "N")), 40);
  json_decref(rep);

  EXPECT(xgr_engine_wait(eng, OWNER, 3, 10000) == 0, "the fan-out did not finish");
  rep = xgr_engine_report(eng, OWNER, 3, &e);
  EXPECT(rep != NULL, "fan-out report: %s", e.message);
  EXPECT_EQ_INT(json_array_size(json_object_get(rep, "history")), 34);
  json_decref(rep);

  /* the zero-wait loop spins on beside the others: it passes 100 steps (polled every 5 ms, at most
   * 10 s like every wait here; a loop that stalled would not), then kill(root) still reaches it */
  xgr_engine_session_info info;
  for (int i = 0; i < 2000; i++) {
    EXPECT(xgr_engine_session(eng, OWNER, 2, &info) == 0, "the loop's session is there");
    if (info.steps > 100) break;
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  EXPECT(info.steps > 100, "the loop ran only %llu steps in 10 s", (unsigned long long)info.steps);
  EXPECT_OK(xgr_engine_kill(eng, OWNER, 2, 0, &e), e);
  EXPECT(xgr_engine_wait(eng, OWNER, 2, 10000) == 0, "the loop did not end after kill");
  EXPECT(xgr_engine_session(eng, OWNER, 2, &info) == 0, "the loop's session is there");
  EXPECT_EQ_INT(info.result, XGR_RESULT_KILLED);
  printf("zero-wait loop: %llu steps before the kill\n", (unsigned long long)info.steps);

  xgr_engine_free(eng);

  /* 4: timers against a storm */
  char tchain[8192];
  p = tchain;
  p += sprintf(p, "{\"orchestration\":{\"id\":\"tchain\",\"structure\":{");
  for (int i = 0; i < 20; i++) {
    if (i < 19) p += sprintf(p, "%s\"T%d\":{\"rule\":\"w\",\"onValid\":{\"spawns\":[\"T%d\"]}}", i ? "," : "", i, i + 1);
    else p += sprintf(p, ",\"T%d\":{\"rule\":\"w\"}", i);
  }
  sprintf(p, "}},\"rules\":{\"w\":{\"payload\":{\"N\":{\"type\":\"int64\",\"default\":0}},"
             "\"onValid\":{\"payload\":{\"N\":\"[N] + 1\"},\"waitSec\":1}}}}");
  xgr_bundle *bt = NULL;
  EXPECT_OK(xgr_bundle_parse(tchain, strlen(tchain), &bt, &e, NULL), e);
  char storm[4096];
  p = storm;
  p += sprintf(p, "{\"id\":\"storm\",\"structure\":{\"L\":{\"rule\":\"r\",\"onValid\":{\"spawns\":[\"L\"");
  for (int i = 0; i < 16; i++) p += sprintf(p, ",\"X%d\"", i);
  p += sprintf(p, "]}}");
  for (int i = 0; i < 16; i++) p += sprintf(p, ",\"X%d\":{\"rule\":\"r\"}", i);
  sprintf(p, "}}");
  xgr_bundle *bs = load(storm);
  xgr_engine_config scfg = {.workers = 2, .keep_finished = true,
                            .clock = {.kind = XGR_CLOCK_SCALED, .scale = 1000}};
  eng = xgr_engine_new(&scfg, &e);
  if (!EXPECT(eng != NULL, "engine: %s", e.message)) return expect_done();
  for (int i = 0; i < 4; i++) {
    xgr_engine_start st = {.bundle = bs, .owner = OWNER, .root_pid = (uint64_t)(10 + i), .start = "L", .payload = none};
    EXPECT_OK(xgr_engine_start_session(eng, &st, &e), e);
  }
  struct timespec storm_ts = {0, 50 * 1000 * 1000};
  nanosleep(&storm_ts, NULL);   /* the storm is under way (its start only; nothing is asserted on it) */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  xgr_engine_start stc = {.bundle = bt, .owner = OWNER, .root_pid = 1, .start = "T0", .payload = none};
  EXPECT_OK(xgr_engine_start_session(eng, &stc, &e), e);
  EXPECT(xgr_engine_wait(eng, OWNER, 1, 20000) == 0, "the timer chain did not finish during the storm");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  EXPECT(xgr_engine_session(eng, OWNER, 1, &info) == 0, "the timer chain's session is there");
  EXPECT_EQ_INT(info.result, XGR_RESULT_COMPLETED);
  printf("timer chain (20 waits of 1 ms real) during a zero-wait storm: %.0f ms\n", ms);
  for (int i = 0; i < 4; i++) {
    EXPECT_OK(xgr_engine_kill(eng, OWNER, (uint64_t)(10 + i), 0, &e), e);
    EXPECT(xgr_engine_wait(eng, OWNER, (uint64_t)(10 + i), 10000) == 0, "a storm session did not end after kill");
  }
  xgr_engine_free(eng);
  xgr_bundle_free(bt);
  xgr_bundle_free(bs);
  xgr_bundle_free(bc);
  xgr_bundle_free(bl);
  xgr_bundle_free(bf);
  curl_global_cleanup();
  return expect_done();
}
