/* test_validate.c — xgr_validateDataTransfer does not hold an HTTP thread while it waits for the
 * first step of its session, end to end: the real xgrd (XGRD) on an ephemeral loopback port with
 * two HTTP threads (--threads 2), its API calls rewritten (--api-map) to the rule tests' loopback
 * server (tests/rule/server.c), whose /slow route answers after the delay the URL names.
 *
 * Six concurrent validateDataTransfer calls whose first step waits 2 s for its API would have held
 * both HTTP threads for 6 s (each call blocked its thread until its first step had a result): while
 * they wait here, getNextProcessId and an xgr.enqueue are answered within a second, the six get
 * their first step's result, and a call whose first step outlasts --first-step-timeout gets the
 * "running" answer at the timeout. A batch (which waits on its thread) answers the same. A call
 * still waiting when xgrd is stopped is answered ("running") and xgrd exits 0; one waiting when the
 * store fails is answered -32009 with the store's error. */
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../rule/server.h"
#include "harness.h"

#define OWNER "0x00000000000000000000000000000000000000c1"
#define NSLOW 6
#define SLOW_MS 2000        /* the slow first step's API delay */
#define VSLOW_MS 7000       /* longer than the first-step timeout */
#define FIRST_STEP_MS "4000"

static test_server api;

/* A rule whose one API call is GET https://api.test/slow?ms=MS (N = data.n = 3 of the answer). */
static json_t *slow_rule(long ms) {
  char url[96];
  snprintf(url, sizeof url, "https://api.test/slow?ms=%ld", ms);
  return json_pack("{s:{}, s:[{s:s, s:s, s:s, s:s, s:i, s:{s:{s:s, s:s, s:i}}}], s:[s], s:{s:{s:s}}, s:{}}", "payload",
                   "apiCalls", "name", "slow", "method", "GET", "urlTemplate", url, "contentType", "json", "timeoutMs",
                   15000, "extractMap", "N", "type", "int64", "expr", "int(resp.data.n)", "default", -1, "rules",
                   "[N] == 3", "onValid", "payload", "y", "[N] * 2", "onInvalid");
}

/* xgrd with two HTTP threads, the API map to the loopback server (allowed: --allow-outbound), the first-step timeout and up to
 * eight more arguments (NULL-terminated, may be NULL; later flags win); the registries slow, vslow
 * (slow_rule) and fast. */
static void start_ex(xh_daemon *d, const char *name, const char *const *extra) {
  char map[128];
  snprintf(map, sizeof map, "https://api.test=%s", api.base);
  xh_init(d, name);
  const char *args[24] = {"--auth", "none", "--store", d->store, "--workers", "2", "--threads", "2",
                          "--first-step-timeout", FIRST_STEP_MS, "--api-map", map, "--allow-outbound", "loopback"};
  size_t n = 14;
  for (size_t i = 0; extra && extra[i] && i < 8; i++) args[n++] = extra[i];
  args[n] = NULL;
  xh_start(d, args);
  const char *regs[][2] = {{"slow", "SLOW"}, {"vslow", "VSLOW"}, {"fast", "FAST"}};
  json_t *rules[] = {slow_rule(SLOW_MS), slow_rule(VSLOW_MS),
                     json_pack("{s:{}, s:[s], s:{}, s:{}}", "payload", "rules", "true", "onValid", "onInvalid")};
  for (size_t i = 0; i < 3; i++) {
    json_decref(xh_result("xgr_putRule", xh_call(d, "xgr_putRule", json_pack("[{s:s, s:o}]", "address", regs[i][1],
                                                                               "rule", rules[i]))));
    json_decref(xh_result("xgr.putOrchestration",
                          xh_call(d, "xgr.putOrchestration",
                                  json_pack("{s:s, s:{s:s, s:{s:{s:s}}}}", "xrc729", regs[i][0], "orchestration", "id",
                                            regs[i][0], "structure", "S", "rule", regs[i][1]))));
  }
}

static void start(xh_daemon *d, const char *name) { start_ex(d, name, NULL); }

/* One validateDataTransfer of registry reg from a thread of its own (cmocka's checks stay on the
 * main thread): the HTTP status, the answer and when it came. */
typedef struct vcall {
  const xh_daemon *d;
  const char *reg;
  double t0, t1;
  long status;
  json_t *answer;
  pthread_t th;
} vcall;

static void *vcall_run(void *arg) {
  vcall *c = arg;
  char body[512];
  snprintf(body, sizeof body,
           "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"xgr_validateDataTransfer\",\"params\":[{\"from\":\"%s\","
           "\"orchestration\":\"%s\",\"stepId\":\"S\",\"payload\":{\"x\":1}}]}",
           OWNER, c->reg);
  char *out = NULL;
  c->t0 = xh_now();
  c->status = xh_http(c->d, "POST", "/", "application/json", body, strlen(body), 30, &out);
  c->t1 = xh_now();
  c->answer = json_loads(out, 0, NULL);
  free(out);
  return NULL;
}

static void vcall_start(vcall *c, const xh_daemon *d, const char *reg) {
  memset(c, 0, sizeof *c);
  c->d = d;
  c->reg = reg;
  assert_int_equal(pthread_create(&c->th, NULL, vcall_run, c), 0);
}

/* Join c; its result (borrowed from c->answer), which must be a JSON-RPC success. */
static const json_t *vcall_join(vcall *c) {
  pthread_join(c->th, NULL);
  if (c->status != 200 || !c->answer || !json_object_get(c->answer, "result")) {
    char *t = c->answer ? json_dumps(c->answer, 0) : NULL;
    fail_msg("validateDataTransfer of %s: HTTP %ld %s", c->reg, c->status, t ? t : "(no JSON)");
  }
  return json_object_get(c->answer, "result");
}

static const char *sget(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* The answer of a first step that finished valid: its result, as docs/RPC.md shows it. */
static void assert_done(const json_t *r) {
  assert_string_equal(sget(r, "status"), "done");
  assert_true(json_is_true(json_object_get(r, "finalResult")));
  assert_string_equal(sget(r, "ruleAction"), "");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "outputPayload"), "y")), 6);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "payload"), "x")), 1);
  const json_t *ex = json_object_get(r, "executedSteps");
  assert_int_equal(json_array_size(ex), 1);
  assert_string_equal(sget(json_array_get(ex, 0), "stepId"), "S");
  assert_string_equal(sget(json_array_get(ex, 0), "status"), "done");
  assert_string_equal(sget(json_array_get(ex, 0), "pid"), sget(r, "processId"));
  assert_true(json_is_true(json_object_get(json_array_get(ex, 0), "valid")));
  assert_int_equal(strlen(sget(r, "ostcHash")), 66);
}

/* The answer of a first step without a result yet (the timeout, or xgrd stopping): exactly these
 * keys and values. */
static void assert_running(const json_t *r) {
  assert_int_equal(json_object_size(r), 9);
  assert_string_equal(sget(r, "status"), "running");
  assert_true(json_is_null(json_object_get(r, "finalResult")));
  assert_true(json_is_null(json_object_get(r, "payload")));
  assert_true(json_is_null(json_object_get(r, "outputPayload")));
  assert_true(json_is_array(json_object_get(r, "executedSteps")));
  assert_int_equal(json_array_size(json_object_get(r, "executedSteps")), 0);
  assert_string_equal(sget(r, "ruleAction"), "");
  assert_int_equal(strlen(sget(r, "ostcHash")), 66);
  char pid[48];
  snprintf(pid, sizeof pid, "%s:1", sget(r, "sessionId"));
  assert_string_equal(sget(r, "processId"), pid);
}

static void test_threads_free(void **state) {
  (void)state;
  xh_daemon d;
  start(&d, "validate-threads");
  vcall slow[NSLOW], vslow;
  /* one after the other: a thread that blocked in a call would accept no more connections, so
   * spaced calls reach every thread (at once, one thread could take them all and leave the other free) */
  vcall_start(&vslow, &d, "vslow");
  for (int i = 0; i < NSLOW; i++) {
    xh_msleep(100);
    vcall_start(&slow[i], &d, "slow");
  }
  xh_msleep(300);   /* all of them are waiting for their first step now */
  /* cheap calls are answered at once although 7 validates wait and xgrd has 2 HTTP threads */
  for (int k = 0; k < 3; k++) {
    double t0 = xh_now();
    json_t *n = xh_result("xgr_getNextProcessId", xh_call(&d, "xgr_getNextProcessId", json_pack("[{s:s}]", "from", OWNER)));
    double dt = xh_now() - t0;
    assert_non_null(sget(n, "nextProcessId"));
    json_decref(n);
    print_message("getNextProcessId answered in %.3f s\n", dt);
    if (dt >= 1.0) fail_msg("getNextProcessId took %.2f s while validates waited", dt);
    t0 = xh_now();
    json_t *e = xh_result("xgr.enqueue", xh_call(&d, "xgr.enqueue", json_pack("{s:s, s:s}", "owner", OWNER, "xrc729", "fast")));
    dt = xh_now() - t0;
    assert_string_equal(sget(e, "ack"), "queued");
    json_decref(e);
    print_message("xgr.enqueue answered in %.3f s\n", dt);
    if (dt >= 1.0) fail_msg("xgr.enqueue took %.2f s while validates waited", dt);
    xh_msleep(200);
  }
  /* the slow ones get their first step's result, concurrently (about SLOW_MS after they came) */
  for (int i = 0; i < NSLOW; i++) {
    const json_t *r = vcall_join(&slow[i]);
    assert_done(r);
    double dt = slow[i].t1 - slow[i].t0;
    if (dt < SLOW_MS / 1000.0 - 0.05 || dt > SLOW_MS / 1000.0 + 1.5)
      fail_msg("slow validate %d answered after %.2f s (its first step takes %.1f s)", i, dt, SLOW_MS / 1000.0);
    json_decref(slow[i].answer);
  }
  /* the very slow one: the timeout answer, at the timeout */
  const json_t *r = vcall_join(&vslow);
  assert_running(r);
  double dt = vslow.t1 - vslow.t0;
  if (dt < 3.9 || dt > 5.5) fail_msg("the timed-out validate answered after %.2f s (timeout 4 s)", dt);
  json_decref(vslow.answer);
  /* in a batch the call waits on its thread: the same answer */
  char body[512];
  snprintf(body, sizeof body,
           "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"xgr.validateDataTransfer\",\"params\":{\"from\":\"%s\","
           "\"orchestration\":\"slow\",\"stepId\":\"S\",\"payload\":{\"x\":1}}}]",
           OWNER);
  json_t *b = xh_post(&d, body, strlen(body));
  assert_int_equal(json_array_size(b), 1);
  assert_done(json_object_get(json_array_get(b, 0), "result"));
  json_decref(b);
  assert_int_equal(xh_stop(&d, SIGTERM), 0);
  xh_remove(&d);
}

/* A validate still waiting when xgrd stops is answered ("running") and xgrd exits 0. */
static void test_stop_while_waiting(void **state) {
  (void)state;
  xh_daemon d;
  start(&d, "validate-stop");
  vcall c;
  vcall_start(&c, &d, "vslow");
  xh_msleep(500);
  double t0 = xh_now();
  kill(d.pid, SIGTERM);
  const json_t *r = vcall_join(&c);
  assert_running(r);
  if (c.t1 - t0 > 2.0) fail_msg("the waiting validate was answered %.2f s after SIGTERM", c.t1 - t0);
  json_decref(c.answer);
  assert_int_equal(xh_stop(&d, SIGTERM), 0);
  xh_remove(&d);
}

/* A validate waiting for its first step when the store fails (full) is answered -32009 with the
 * store's error at once, as a waiting call is. */
static void test_store_fails_while_waiting(void **state) {
  (void)state;
  xh_daemon d;
  /* a long first-step timeout: the answer must come from the store's failure, before the API's 7 s */
  start_ex(&d, "validate-full", (const char *[]){"--store-max-pages", "120", "--time-scale", "100",
                                                 "--first-step-timeout", "20000", NULL});
  /* ticker sessions: a process and a history row of ~3 KB every 10 ms each fill the store */
  json_decref(xh_result("xgr_putRule",
                        xh_call(&d, "xgr_putRule",
                                json_pack("[{s:s, s:{s:{s:{s:s, s:i}, s:{s:s, s:i}}, s:[s], s:{s:{s:s}, s:i}, s:{}}}]",
                                          "address", "T", "rule", "payload", "n", "type", "int64", "default", 0, "max",
                                          "type", "int64", "default", 4, "rules", "[n] < [max]", "onValid", "payload",
                                          "n", "[n] + 1", "waitSec", 1, "onInvalid"))));
  json_decref(xh_result("xgr.putOrchestration",
                        xh_call(&d, "xgr.putOrchestration",
                                json_pack("{s:s, s:{s:s, s:{s:{s:s, s:{s:[s]}}}}}", "xrc729", "ticker", "orchestration",
                                          "id", "ticker", "structure", "T", "rule", "T", "onValid", "spawns", "T"))));
  vcall c;
  vcall_start(&c, &d, "vslow");   /* its first step waits 7 s for its API */
  xh_msleep(300);
  char *pad = malloc(3001);
  memset(pad, 'p', 3000);
  pad[3000] = 0;
  for (int i = 0; i < 4; i++)
    json_decref(xh_result("xgr.enqueue", xh_call(&d, "xgr.enqueue",
                                                 json_pack("{s:s, s:s, s:{s:s, s:{s:i, s:s}}}", "owner", OWNER, "xrc729",
                                                           "ticker", "init", "stepId", "T", "payload", "max", 1000000,
                                                           "__pad", pad))));
  free(pad);
  pthread_join(c.th, NULL);
  assert_int_equal(c.status, 200);
  const json_t *e = json_object_get(c.answer, "error");
  if (!e) {
    char *t = json_dumps(c.answer, 0);
    fail_msg("the validate was answered without the store's error: %s", t);
  }
  assert_int_equal(json_integer_value(json_object_get(e, "code")), -32009);
  const char *msg = json_string_value(json_object_get(e, "message"));
  if (!strstr(msg, "the store failed before the first step was committed") || !strstr(msg, "full"))
    fail_msg("unexpected message: %s", msg);
  if (c.t1 - c.t0 > VSLOW_MS / 1000.0 - 0.5) fail_msg("answered after %.2f s: not when the store failed", c.t1 - c.t0);
  json_decref(c.answer);
  assert_int_equal(xh_stop(&d, SIGTERM), 4);
  xh_remove(&d);
}

static int setup(void **state) {
  (void)state;
  return test_server_start(&api);
}

static int teardown(void **state) {
  (void)state;
  test_server_stop(&api);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_threads_free, xh_teardown),
      cmocka_unit_test_teardown(test_stop_while_waiting, xh_teardown),
      cmocka_unit_test_teardown(test_store_fails_while_waiting, xh_teardown),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
