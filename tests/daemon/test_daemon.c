/* test_daemon.c — xgrd end to end: the real daemon binary (XGRD) started on an ephemeral loopback
 * port with a SQLite store in a temporary directory, driven with real HTTP requests (libcurl and
 * raw sockets). Every JSON-RPC method, both naming styles, protocol errors (bad JSON, wrong
 * types, unknown methods, oversize bodies, wrong content type, batches, notifications), a slow
 * client, metrics and health endpoints, graceful and crash restarts in the middle of running
 * sessions (the sessions continue), and a bounded load test of concurrent clients enqueuing and
 * waking sessions (no lost request, no error). */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

/* xgrd runs in permit mode (the default): the test identities have keys, and rpc() signs the permit
 * each call needs with the key of the identity the params name (tests/permits/test_signer.h). */
#include "../permits/test_signer.h"
#include "harness.h"
#define OWNER TS_OWNER
#define OTHER TS_OTHER
#define DELEGATE TS_DELEGATE

typedef xh_daemon daemon_t;

static const char *src_dir(void) {
  const char *p = getenv("XGR_SRC");
  return p ? p : ".";
}

/* Start xgrd on port 0 in permit mode with the daemon's store and up to four extra arguments;
 * waits for the port file. */
static void start4(daemon_t *d, const char *extra1, const char *extra2, const char *extra3, const char *extra4) {
  const char *args[16] = {"--auth", "permits", "--store", d->store, "--workers", "2", "--timeout", "2"};
  int n = 8;
  if (extra1) args[n++] = extra1;
  if (extra2) args[n++] = extra2;
  if (extra3) args[n++] = extra3;
  if (extra4) args[n++] = extra4;
  args[n] = NULL;
  xh_start(d, args);
}

static void start(daemon_t *d, const char *extra1, const char *extra2) { start4(d, extra1, extra2, NULL, NULL); }

/* One HTTP request with a content type; returns the HTTP status, *out the body (malloc'd). */
static long http(const daemon_t *d, const char *verb, const char *path, const char *ctype, const char *body, size_t len,
                 char **out) {
  return xh_http(d, verb, path, ctype, body, len, 20, out);
}

static json_t *rpc(const daemon_t *d, const char *method, json_t *params);

/* What the signer asks xgrd (public methods, unsigned). A failure signs a value that cannot match,
 * so xgrd answers with its own error for the call (unknown registry, ...). */
static int ask_next_pid(void *ctx, const char *from, uint64_t *out, xgr_error *err) {
  (void)err;
  json_t *r = rpc(ctx, "xgr_getNextProcessId", json_pack("{s:s}", "from", from));
  const char *v = json_string_value(json_object_get(json_object_get(r, "result"), "nextProcessId"));
  *out = v ? strtoull(v, NULL, 10) : 0;
  json_decref(r);
  return 0;
}

static int ask_ostc_hash(void *ctx, const json_t *params, uint8_t out[32], xgr_error *err) {
  (void)err;
  json_t *q = json_object();
  static const char *const keys[] = {"xrc729", "registry", "orchestration", NULL};
  for (const char *const *k = keys; *k; k++)
    if (json_is_string(json_object_get(params, *k))) {
      json_object_set(q, "xrc729", json_object_get(params, *k));
      break;
    }
  if (json_is_string(json_object_get(params, "ostcId"))) json_object_set(q, "ostcId", json_object_get(params, "ostcId"));
  /* the namespace the start resolves in: registryOwner's, else the session owner's */
  static const char *const ns_keys[] = {"registryOwner", "owner", "from", NULL};
  for (const char *const *k = ns_keys; *k; k++)
    if (json_is_string(json_object_get(params, *k))) {
      json_object_set(q, "owner", json_object_get(params, *k));
      break;
    }
  json_t *r = rpc(ctx, "xgr.getOrchestration", q);
  memset(out, 0, 32);
  xgr_hex_decode(json_string_value(json_object_get(json_object_get(r, "result"), "hash")), out, 32);
  json_decref(r);
  return 0;
}

static tsign g_sign;

/* Call a method; returns the whole response object (caller decrefs). params is stolen. The
 * permit the method needs is signed first (unless params carry one). */
static json_t *rpc(const daemon_t *d, const char *method, json_t *params) {
  if (!g_sign.s) {
    tsign_init(&g_sign);
    assert_int_equal(tsign_check(&g_sign), 0);
    g_sign.info.next_pid = ask_next_pid;
    g_sign.info.ostc_hash = ask_ostc_hash;
  }
  g_sign.info.ctx = (void *)d;
  xgr_error se;
  if (params) tsign_attach(&g_sign, method, params, &se);   /* unsignable params go unsigned: xgrd judges them */
  return xh_call(d, method, params);
}

/* The result of a call that must succeed (new reference). */
static json_t *ok(const daemon_t *d, const char *method, json_t *params) {
  return xh_result(method, rpc(d, method, params));
}

/* A call that must fail with code (and data.path when path is not NULL). */
static void fails(const daemon_t *d, const char *method, json_t *params, int code, const char *path) {
  json_t *r = rpc(d, method, params);
  json_t *e = json_object_get(r, "error");
  if (!e) {
    char *t = json_dumps(r, 0);
    fail_msg("%s succeeded, expected error %d: %s", method, code, t);
  }
  int got = (int)json_integer_value(json_object_get(e, "code"));
  const char *gp = json_string_value(json_object_get(json_object_get(e, "data"), "path"));
  if (got != code || (path && (!gp || strcmp(gp, path)))) {
    char *t = json_dumps(e, 0);
    fail_msg("%s: expected %d at %s, got %s", method, code, path ? path : "-", t);
  }
  json_decref(r);
}

/* Register a bundle file's rules and orchestration under registry reg. */
static void deploy(const daemon_t *d, const char *file, const char *reg) {
  char path[512];
  snprintf(path, sizeof path, "%s/tests/daemon/%s", src_dir(), file);
  json_t *b = json_load_file(path, 0, NULL);
  assert_non_null(b);
  const char *k;
  json_t *r;
  json_object_foreach(json_object_get(b, "rules"), k, r) {
    json_t *res = ok(d, "xgr_putRule", json_pack("[{s:s, s:O}]", "address", k, "rule", r));
    json_decref(res);
  }
  json_t *res = ok(d, "xgr.putOrchestration", json_pack("{s:s, s:O}", "xrc729", reg, "orchestration",
                                                        json_object_get(b, "orchestration")));
  json_decref(res);
  json_decref(b);
}

static void mkdaemon(daemon_t *d, const char *name) {
  char n[64];
  snprintf(n, sizeof n, "test-daemon-%s", name);
  xh_init(d, n);
  const char *pg = getenv("XGR_PG_URL");   /* test_daemon_pg: xgrd on PostgreSQL (tests/pg) */
  if (pg && *pg) snprintf(d->store, sizeof d->store, "%s", pg);
}

static const char *sget(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* Wait until xgr_sessionAlive says false (at most secs). */
static bool wait_dead(const daemon_t *d, const char *owner, uint64_t root, double secs) {
  double t0 = xh_now();
  char r[24];
  snprintf(r, sizeof r, "%llu", (unsigned long long)root);
  while (xh_now() - t0 < secs) {
    json_t *res = ok(d, "xgr_sessionAlive", json_pack("[s, s]", owner, r));
    bool alive = json_is_true(res);
    json_decref(res);
    if (!alive) return true;
    xh_msleep(20);
  }
  return false;
}

/* The session's status in the store (getSession). */
static char *session_status(const daemon_t *d, const char *owner, uint64_t root) {
  json_t *res = ok(d, "xgr.getSession", json_pack("{s:s, s:I}", "owner", owner, "rootPid", (json_int_t)root));
  char *s = strdup(sget(json_object_get(res, "session"), "status"));
  json_decref(res);
  return s;
}

/* ---- tests ------------------------------------------------------------------------------------- */

static double metric(const char *text, const char *prefix);

static void test_registries_and_enqueue(void **state) {
  (void)state;
  daemon_t d;
  mkdaemon(&d, "reg");
  start(&d, NULL, NULL);
  deploy(&d, "gate.json", "0x00000000000000000000000000000000000000f1");
  /* get returns the exact bytes that were hashed */
  json_t *g = ok(&d, "xgr_getOrchestration", json_pack("[{s:s, s:s}]", "xrc729", "0x00000000000000000000000000000000000000F1",
                                                       "owner", OWNER));   /* the owner's namespace */
  assert_string_equal(sget(g, "ostcId"), "gate");
  assert_int_equal(json_integer_value(json_object_get(g, "version")), 1);
  const char *hash = sget(g, "hash");
  assert_non_null(json_object_get(json_object_get(g, "orchestration"), "structure"));
  json_t *gr = ok(&d, "xgr.getRule", json_pack("{s:s, s:s}", "address", "W", "owner", OWNER));   /* names are per owner */
  assert_non_null(json_object_get(json_object_get(gr, "rule"), "rules"));
  json_decref(gr);
  fails(&d, "xgr.getRule", json_pack("{s:s}", "address", "nope"), -32004, "address");
  fails(&d, "xgr.getOrchestration", json_pack("{s:s}", "xrc729", "0x00000000000000000000000000000000000000f9"), -32004,
        NULL);
  /* putOrchestration: schema errors name the path; an oversize document is a limit */
  fails(&d, "xgr.putOrchestration", json_pack("{s:{s:s, s:{s:{}}}}", "orchestration", "id", "x", "structure", "A"),
        -32602, NULL);
  fails(&d, "xgr.putOrchestration", json_pack("{s:i}", "orchestration", 5), -32602, "orchestration");
  char *big = malloc(300000);
  memset(big, ' ', 299999);
  big[0] = '{';
  big[299998] = '}';
  big[299999] = 0;
  fails(&d, "xgr.putOrchestration", json_pack("{s:s}", "orchestration", big), -32005, "orchestration");
  free(big);

  /* enqueue: queued, then already_queued for the same (owner, rootPid) */
  json_t *e1 = ok(&d, "xgr.enqueue",
                  json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:{s:i}}}", "owner", OWNER, "rootPid", "5329", "xrc729",
                            "0x00000000000000000000000000000000000000f1", "ostcHash", hash, "init", "stepId", "A",
                            "payload", "n", 10));
  assert_string_equal(sget(e1, "ack"), "queued");
  assert_string_equal(sget(e1, "pid"), "5329:1");
  json_decref(e1);
  json_t *e2 = ok(&d, "xgr_enqueue",
                  json_pack("[{s:s, s:i, s:s, s:{s:s}}]", "owner", OWNER, "rootPid", 5329, "xrc729",
                            "0x00000000000000000000000000000000000000f1", "init", "stepId", "A"));
  assert_true(!strcmp(sget(e2, "ack"), "already_queued") || !strcmp(sget(e2, "ack"), "scheduled"));
  json_decref(e2);
  /* a hash mismatch is refused before anything is stored */
  fails(&d, "xgr.enqueue",
        json_pack("{s:s, s:i, s:s, s:s, s:{s:s}}", "owner", OWNER, "rootPid", 77, "xrc729",
                  "0x00000000000000000000000000000000000000f1", "ostcHash",
                  "0x0000000000000000000000000000000000000000000000000000000000000000", "init", "stepId", "A"),
        -32006, "ostcHash");
  fails(&d, "xgr.getSession", json_pack("{s:s, s:i}", "owner", OWNER, "rootPid", 77), -32004, NULL);
  /* schema and limit errors */
  fails(&d, "xgr.enqueue", json_pack("{s:s, s:s, s:{s:s}}", "owner", OWNER, "xrc729", "0x00000000000000000000000000000000000000f1",
                                     "init", "stepId", "Nope"), -32602, "init.stepId");
  fails(&d, "xgr.enqueue", json_pack("{s:s, s:s, s:{s:s, s:i}}", "owner", OWNER, "xrc729",
                                     "0x00000000000000000000000000000000000000f1", "init", "stepId", "A", "payload", 3),
        -32602, "init.payload");
  json_t *list = json_array();
  for (int i = 0; i < 65; i++) json_array_append_new(list, json_integer(i));
  fails(&d, "xgr.enqueue", json_pack("{s:s, s:s, s:{s:s, s:{s:o}}}", "owner", OWNER, "xrc729",
                                     "0x00000000000000000000000000000000000000f1", "init", "stepId", "A", "payload", "l", list),
        -32005, "init.payload");
  fails(&d, "xgr.enqueue", json_pack("{s:s, s:{}, s:{s:s}}", "owner", OWNER, "rootPid", "init", "stepId", "A"), -32602,
        "rootPid");
  fails(&d, "xgr.enqueue", json_pack("{s:s, s:{s:s}}", "owner", "alice", "init", "stepId", "A"), -32602, "owner");
  fails(&d, "xgr.enqueue", json_pack("{s:s, s:s, s:{s:s}}", "owner", OWNER, "xrc729", "0x00000000000000000000000000000000000000f7",
                                     "init", "stepId", "A"), -32004, NULL);
  /* another caller may not start the owner's sessions */
  fails(&d, "xgr.enqueue", json_pack("{s:s, s:s, s:s, s:{s:s}}", "owner", OWNER, "from", OTHER, "xrc729",
                                     "0x00000000000000000000000000000000000000f1", "init", "stepId", "A"), -32007, "permit.message.from");
  json_decref(g);
  assert_int_equal(xh_stop(&d, SIGTERM), 0);
  xh_remove(&d);
}

static void test_public_methods(void **state) {
  (void)state;
  daemon_t d;
  mkdaemon(&d, "pub");
  start(&d, NULL, NULL);
  deploy(&d, "gate.json", "0x00000000000000000000000000000000000000f1");
  deploy(&d, "short.json", "0x00000000000000000000000000000000000000f2");
  /* getNextProcessId reads the next expected rootPid without taking it: the same value until a
   * session of the owner starts (public reference §6) */
  json_t *n1 = ok(&d, "xgr_getNextProcessId", json_pack("[{s:s}]", "from", OWNER));
  json_t *n2 = ok(&d, "xgr.getNextProcessId", json_pack("{s:s}", "from", OWNER));
  assert_string_equal(sget(n1, "nextProcessId"), "1");
  assert_string_equal(sget(n2, "nextProcessId"), "1");
  json_decref(n1);
  json_decref(n2);
  fails(&d, "xgr_getNextProcessId", json_pack("[{s:i}]", "from", 12), -32602, "from");
  /* validateDataTransfer: starts a session and answers the first step's result */
  json_t *v = ok(&d, "xgr_validateDataTransfer", json_pack("[{s:s, s:s, s:{s:i}, s:s}]", "from", OWNER, "stepId", "S",
                                                           "payload", "x", 21, "orchestration",
                                                           "0x00000000000000000000000000000000000000f2"));
  assert_string_equal(sget(v, "processId"), "1:1");   /* the expected id was taken */
  assert_true(json_is_true(json_object_get(v, "finalResult")));
  n1 = ok(&d, "xgr_getNextProcessId", json_pack("[{s:s}]", "from", OWNER));
  assert_string_equal(sget(n1, "nextProcessId"), "2");
  json_decref(n1);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(v, "payload"), "x")), 21);
  /* outputPayload: the outcome payload of the branch taken (onValid.payload {"y": "[x] * 2"}) */
  json_t *outp = json_object_get(v, "outputPayload");
  assert_true(json_is_object(outp));
  assert_int_equal(json_object_size(outp), 1);
  assert_int_equal(json_integer_value(json_object_get(outp, "y")), 42);
  assert_string_equal(sget(v, "ruleAction"), "");
  json_decref(v);
  v = ok(&d, "xgr.validateDataTransfer", json_pack("{s:s, s:s, s:{s:i}, s:s}", "from", OWNER, "stepId", "S", "payload", "x",
                                                    -1, "orchestration", "0x00000000000000000000000000000000000000f2"));
  assert_true(json_is_false(json_object_get(v, "finalResult")));
  assert_int_equal(json_object_size(json_object_get(v, "outputPayload")), 0);   /* onInvalid: {} */
  json_decref(v);
  fails(&d, "xgr_validateDataTransfer", json_pack("[{s:s, s:s}]", "from", OWNER, "orchestration",
                                                  "0x00000000000000000000000000000000000000f2"), -32602, "stepId");
  /* a gate session: A runs, W waits for a wake-up (waitSec 3600) */
  json_t *e = ok(&d, "xgr.enqueue", json_pack("{s:s, s:s, s:{s:s, s:{s:{s:{s:[s]}}}}}", "owner", OWNER, "xrc729",
                                              "0x00000000000000000000000000000000000000f1", "init", "stepId", "A",
                                              "payload", "__wakeUp", "default", "rpc", DELEGATE));
  uint64_t root = strtoull(sget(e, "rootPid"), NULL, 10);
  json_decref(e);
  char rs[24], pid2[40];
  snprintf(rs, sizeof rs, "%llu", (unsigned long long)root);
  snprintf(pid2, sizeof pid2, "%llu:2", (unsigned long long)root);
  /* wait for W to exist (stepExecuted 1 true, 2 false, 99 null) */
  double t0 = xh_now();
  json_t *se = NULL;
  for (;;) {
    se = ok(&d, "xgr_stepExecuted", json_pack("[s, s, i]", OWNER, rs, 2));
    if (json_is_false(se) || xh_now() - t0 > 5) break;
    json_decref(se);
    xh_msleep(10);
  }
  assert_true(json_is_false(se));
  json_decref(se);
  se = ok(&d, "xgr_stepExecuted", json_pack("[s, s, i]", OWNER, rs, 1));
  assert_true(json_is_true(se));
  json_decref(se);
  se = ok(&d, "xgr.stepExecuted", json_pack("{s:s, s:s, s:i}", "owner", OWNER, "sessionId", rs, "iteration", 99));
  assert_true(json_is_null(se));
  json_decref(se);
  fails(&d, "xgr_stepExecuted", json_pack("[s, s]", OWNER, rs), -32602, NULL);
  fails(&d, "xgr_stepExecuted", json_pack("[i, s, i]", 5, rs, 1), -32602, "[0]");
  json_t *al = ok(&d, "xgr_sessionAlive", json_pack("[s, s]", OWNER, rs));
  assert_true(json_is_true(al));
  json_decref(al);
  /* listSessions: the join view (seed) and the raw rows (public), allow-list mode for a delegate */
  json_t *ls = ok(&d, "xgr.listSessions", json_pack("{s:s, s:s, s:i, s:{s:[s, s]}}", "owner", OWNER, "rootPid", rs, "limit",
                                                    10, "sort", "by", "rootPid:desc", "iter:desc"));
  json_t *items = json_object_get(ls, "items");
  assert_int_equal(json_array_size(items), 2);
  assert_string_equal(sget(json_array_get(items, 0), "pid"), pid2);
  assert_string_equal(sget(json_array_get(items, 0), "status"), "waiting");
  assert_string_equal(sget(json_array_get(items, 0), "resumeStep"), "W");
  assert_string_equal(sget(json_array_get(items, 1), "lastStep"), "A");
  json_decref(ls);
  ls = ok(&d, "xgr_listSessions", json_pack("[{s:s, s:i}]", "from", OWNER, "last", 100));
  assert_true(json_array_size(json_object_get(ls, "sessions")) >= 4);
  json_decref(ls);
  ls = ok(&d, "xgr_listSessions", json_pack("[{s:s, s:s, s:s}]", "from", DELEGATE, "runner", OWNER, "rootId", rs));
  assert_int_equal(json_array_size(json_object_get(ls, "sessions")), 1);
  assert_string_equal(sget(json_array_get(json_object_get(ls, "sessions"), 0), "step"), "W");
  json_decref(ls);
  fails(&d, "xgr_listSessions", json_pack("[{s:s, s:s}]", "from", OTHER, "owner", OWNER), -32007, NULL);
  fails(&d, "xgr.listSessions", json_pack("{s:s, s:{s:[s]}}", "owner", OWNER, "sort", "by", "color:asc"), -32602,
        "sort.by[0]");
  /* wakeUpProcess: a stranger in PID mode is refused; the delegate in step mode is allowed */
  fails(&d, "xgr_wakeUpProcess", json_pack("[{s:s, s:s, s:s}]", "from", OTHER, "runner", OWNER, "processId", pid2), -32007,
        NULL);
  fails(&d, "xgr_wakeUpProcess", json_pack("[{s:s, s:s}]", "from", OWNER, "processId", "x:y"), -32602, "processId");
  fails(&d, "xgr_wakeUpProcess", json_pack("[{s:s, s:s, s:s}]", "from", OWNER, "processId", pid2, "stepId", "W"), -32602,
        "stepId");
  json_t *w = ok(&d, "xgr_wakeUpProcess", json_pack("[{s:s, s:s, s:s, s:s, s:{s:i}}]", "from", DELEGATE, "runner", OWNER,
                                                    "sessionId", rs, "stepId", "W", "payload", "n", 41));
  assert_int_equal(json_integer_value(json_object_get(w, "woken")), 1);
  assert_string_equal(sget(w, "mode"), "step");
  json_decref(w);
  assert_true(wait_dead(&d, OWNER, root, 5));
  char *st = session_status(&d, OWNER, root);
  assert_string_equal(st, "completed");
  free(st);
  /* the history shows W ran with the merged payload (n 41 + 1) */
  json_t *gs = ok(&d, "xgr_getSession", json_pack("[{s:s, s:s}]", "owner", OWNER, "pid", pid2));
  json_t *h = json_array_get(json_object_get(gs, "history"), 0);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(h, "payload"), "n")), 42);
  json_decref(gs);
  /* PID mode by the owner, then xgr_control kill of another gate session */
  e = ok(&d, "xgr.enqueue", json_pack("{s:s, s:s, s:{s:s}}", "owner", OWNER, "xrc729",
                                      "0x00000000000000000000000000000000000000f1", "init", "stepId", "A"));
  uint64_t r2 = strtoull(sget(e, "rootPid"), NULL, 10);
  json_decref(e);
  snprintf(pid2, sizeof pid2, "%llu:2", (unsigned long long)r2);
  snprintf(rs, sizeof rs, "%llu", (unsigned long long)r2);
  t0 = xh_now();
  for (;;) {
    json_t *r = rpc(&d, "xgr_wakeUpProcess", json_pack("[{s:s, s:s}]", "from", OWNER, "processId", pid2));
    bool good = json_object_get(r, "result") != NULL;
    json_decref(r);
    if (good) break;
    assert_true(xh_now() - t0 < 5);
    xh_msleep(10);
  }
  assert_true(wait_dead(&d, OWNER, r2, 5));
  e = ok(&d, "xgr.enqueue", json_pack("{s:s, s:s, s:{s:s}}", "owner", OWNER, "xrc729",
                                      "0x00000000000000000000000000000000000000f1", "init", "stepId", "A"));
  uint64_t r3 = strtoull(sget(e, "rootPid"), NULL, 10);
  json_decref(e);
  fails(&d, "xgr_control", json_pack("[{s:s, s:s, s:I}]", "from", OWNER, "action", "pause", "sessionId", (json_int_t)r3),
        -32602, "action");
  fails(&d, "xgr_control", json_pack("[{s:s, s:s, s:s, s:I}]", "from", OTHER, "owner", OWNER, "action", "kill", "sessionId",
                                     (json_int_t)r3), -32007, "permit.message.from");
  json_t *k = ok(&d, "xgr_control", json_pack("[{s:s, s:s, s:I}]", "from", OWNER, "action", "kill", "sessionId", (json_int_t)r3));
  assert_string_equal(sget(k, "status"), "killed");
  json_decref(k);
  assert_true(wait_dead(&d, OWNER, r3, 5));
  xh_msleep(50);
  st = session_status(&d, OWNER, r3);
  assert_string_equal(st, "killed");
  free(st);
  fails(&d, "xgr_control", json_pack("[{s:s, s:s, s:I}]", "from", OWNER, "action", "kill", "sessionId", (json_int_t)r3),
        -32004, NULL);
  assert_int_equal(xh_stop(&d, SIGTERM), 0);
  xh_remove(&d);
}

static void test_pause_resume_kill(void **state) {
  (void)state;
  daemon_t d;
  mkdaemon(&d, "ctl");
  start(&d, NULL, NULL);
  deploy(&d, "ticker.json", "local");
  json_t *e = ok(&d, "xgr.enqueue", json_pack("{s:s, s:i, s:{s:s, s:{s:i}}}", "owner", OWNER, "rootPid", 9, "init",
                                              "stepId", "T", "payload", "max", 1000));
  json_decref(e);
  xh_msleep(100);
  json_t *p = ok(&d, "xgr.pause", json_pack("{s:s, s:s}", "owner", OWNER, "pid", "9"));
  assert_true(json_is_true(json_object_get(p, "ok")));
  json_decref(p);
  xh_msleep(1300);   /* the next tick is due after 1 s, but the session is paused */
  json_t *ls = ok(&d, "xgr.listSessions", json_pack("{s:s, s:i, s:s}", "owner", OWNER, "rootPid", 9, "sort", "iter:desc"));
  json_t *first = json_array_get(json_object_get(ls, "items"), 0);
  assert_string_equal(sget(first, "status"), "paused");
  size_t before = json_array_size(json_object_get(ls, "items"));
  json_decref(ls);
  /* enqueue of a paused session answers paused */
  e = ok(&d, "xgr.enqueue", json_pack("{s:s, s:i, s:{s:s}}", "owner", OWNER, "rootPid", 9, "init", "stepId", "T"));
  assert_string_equal(sget(e, "ack"), "paused");
  json_decref(e);
  fails(&d, "xgr.pause", json_pack("{s:s, s:s, s:s}", "owner", OWNER, "from", OTHER, "pid", "9"), -32007, "permit.message.from");
  p = ok(&d, "xgr_resume", json_pack("[{s:s, s:s}]", "owner", OWNER, "pid", "9"));
  json_decref(p);
  xh_msleep(1300);
  ls = ok(&d, "xgr.listSessions", json_pack("{s:s, s:i}", "owner", OWNER, "rootPid", 9));
  assert_true(json_array_size(json_object_get(ls, "items")) > before);
  json_decref(ls);
  p = ok(&d, "xgr.kill", json_pack("{s:s, s:s}", "owner", OWNER, "pid", "9"));
  json_decref(p);
  assert_true(wait_dead(&d, OWNER, 9, 5));
  fails(&d, "xgr.kill", json_pack("{s:s, s:s}", "owner", OWNER, "pid", "9"), -32004, NULL);
  fails(&d, "xgr.kill", json_pack("{s:s, s:s}", "owner", OWNER, "pid", "nine"), -32602, "pid");
  assert_int_equal(xh_stop(&d, SIGINT), 0);
  xh_remove(&d);
}

static void test_protocol(void **state) {
  (void)state;
  daemon_t d;
  mkdaemon(&d, "proto");
  start(&d, "--max-body", "4096");
  char *out;
  /* bad JSON */
  assert_int_equal(http(&d, "POST", "/", "application/json", "{\"jsonrpc\":", 11, &out), 200);
  assert_non_null(strstr(out, "-32700"));
  free(out);
  /* wrong types in the envelope */
  const char *bad = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}";
  http(&d, "POST", "/", "application/json", bad, strlen(bad), &out);
  assert_non_null(strstr(out, "-32600"));
  free(out);
  bad = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"xgr_sessionAlive\",\"params\":\"x\"}";
  http(&d, "POST", "/", "application/json", bad, strlen(bad), &out);
  assert_non_null(strstr(out, "-32600"));
  free(out);
  /* unknown method */
  fails(&d, "xgr_nope", NULL, -32601, NULL);
  /* wrong parameter types */
  fails(&d, "xgr_sessionAlive", json_pack("[s, {}]", OWNER), -32602, "[1]");
  fails(&d, "xgr.enqueue", json_pack("[i]", 1), -32602, "[0]");
  /* oversize body: 413, and the server keeps serving */
  char *big = malloc(8192);
  memset(big, 'x', 8191);
  big[8191] = 0;
  assert_int_equal(http(&d, "POST", "/", "application/json", big, 8191, NULL), 413);
  free(big);
  /* wrong content type, wrong path, wrong HTTP method */
  assert_int_equal(http(&d, "POST", "/", "text/plain", "{}", 2, NULL), 415);
  assert_int_equal(http(&d, "POST", "/nope", "application/json", "{}", 2, NULL), 404);
  assert_int_equal(http(&d, "PUT", "/", "application/json", "{}", 2, NULL), 405);
  /* a batch with a notification: two answers */
  const char *batch = "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"xgr_sessionAlive\",\"params\":[\"" OWNER "\",\"1\"]},"
                      "{\"jsonrpc\":\"2.0\",\"method\":\"xgr_sessionAlive\",\"params\":[\"" OWNER "\",\"1\"]},"
                      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"nope\"}]";
  assert_int_equal(http(&d, "POST", "/rpc", "application/json", batch, strlen(batch), &out), 200);
  json_t *arr = json_loads(out, 0, NULL);
  free(out);
  assert_int_equal(json_array_size(arr), 2);
  assert_true(json_is_false(json_object_get(json_array_get(arr, 0), "result")));
  json_decref(arr);
  const char *note = "{\"jsonrpc\":\"2.0\",\"method\":\"xgr_sessionAlive\",\"params\":[\"" OWNER "\",\"1\"]}";
  assert_int_equal(http(&d, "POST", "/", "application/json", note, strlen(note), NULL), 204);
  /* health, readiness, metrics */
  assert_int_equal(http(&d, "GET", "/healthz", NULL, NULL, 0, NULL), 200);
  assert_int_equal(http(&d, "GET", "/readyz", NULL, NULL, 0, NULL), 200);
  assert_int_equal(http(&d, "GET", "/metrics", NULL, NULL, 0, &out), 200);
  const char *names[] = {"xgr_sessions_live", "xgr_processes{status=\"running\"}", "xgr_steps_total",
                         "xgr_step_seconds_bucket", "xgr_store_commit_seconds_bucket", "xgr_queue_depth",
                         "xgr_http_requests_total{method=\"xgr_sessionAlive\",http=\"200\",code=\"-32602\"}"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strstr(out, names[i])) fail_msg("metrics lack %s", names[i]);
  if (metric(out, "xgr_runtime_events_total{kind=\"actor_turns\"}") < 0) fail_msg("metrics lack the runtime's counters");
  free(out);
  assert_int_equal(xh_stop(&d, SIGTERM), 0);
  xh_remove(&d);
}

/* A client that sends half a request and stalls is dropped after the timeout (2 s) while others
 * are served meanwhile. */
static void test_slow_client(void **state) {
  (void)state;
  daemon_t d;
  mkdaemon(&d, "slow");
  start(&d, NULL, NULL);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)d.port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  const char *half = "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: appl";
  assert_true(send(fd, half, strlen(half), 0) > 0);
  double t0 = xh_now();
  for (int i = 0; i < 20; i++) {
    json_t *r = ok(&d, "xgr_sessionAlive", json_pack("[s, s]", OWNER, "1"));
    json_decref(r);
  }
  assert_true(xh_now() - t0 < 1.5);   /* not held up by the slow client */
  struct timeval tv = {6, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[256];
  ssize_t n = recv(fd, buf, sizeof buf, 0);
  double waited = xh_now() - t0;
  assert_true(n <= 0);            /* closed, no answer */
  assert_true(waited < 5.5);      /* by the server's timeout, not ours */
  close(fd);
  /* a slow body: headers complete, body trickles in slower than the timeout */
  fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  const char *hdr = "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{";
  assert_true(send(fd, hdr, strlen(hdr), 0) > 0);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  n = recv(fd, buf, sizeof buf, 0);
  assert_true(n <= 0);
  close(fd);
  json_t *r = ok(&d, "xgr_sessionAlive", json_pack("[s, s]", OWNER, "1"));
  json_decref(r);
  assert_int_equal(xh_stop(&d, SIGTERM), 0);
  xh_remove(&d);
}

/* Pause process `pid` of OWNER; false while it does not exist yet (the session is starting). */
static bool paused_ok(const daemon_t *d, const char *pid) {
  json_t *r = rpc(d, "xgr.pause", json_pack("{s:s, s:s}", "owner", OWNER, "pid", pid));
  bool done = json_object_get(r, "result") != NULL;
  json_decref(r);
  return done;
}

/* The closedAt of the join of process `pid` in the join view of xgr.listSessions (0: open, -1: no join). */
static json_int_t join_closed_at(const daemon_t *d, int root, const char *pid) {
  char rs[32];
  snprintf(rs, sizeof rs, "%d", root);
  json_t *ls = ok(d, "xgr.listSessions", json_pack("{s:s, s:s, s:i}", "owner", OWNER, "rootPid", rs, "limit", 10));
  json_int_t at = -1;
  size_t i;
  json_t *it;
  json_array_foreach(json_object_get(ls, "items"), i, it) {
    if (strcmp(sget(it, "pid"), pid)) continue;
    const json_t *j = json_object_get(it, "join");
    if (json_is_object(j)) at = json_is_true(json_object_get(j, "closed")) ? json_integer_value(json_object_get(j, "closedAt")) : 0;
  }
  json_decref(ls);
  return at;
}

/* Sessions survive restarts: a graceful one (SIGTERM) and a crash (SIGKILL) while ticker
 * sessions are between ticks or running one. After each restart they go on and complete with
 * every tick in their history. */
static void test_restart(void **state) {
  (void)state;
  daemon_t d;
  mkdaemon(&d, "restart");
  start(&d, NULL, NULL);
  deploy(&d, "ticker.json", "local");
  deploy(&d, "gate.json", "gates");
  deploy(&d, "joinpause.json", "joins");
  enum { N = 8 };
  for (int i = 1; i <= N; i++) {
    json_t *e = ok(&d, "xgr.enqueue", json_pack("{s:s, s:i, s:{s:s, s:{s:i}}}", "owner", OWNER, "rootPid", i, "init",
                                                "stepId", "T", "payload", "max", 4));
    json_decref(e);
  }
  json_t *e = ok(&d, "xgr.enqueue", json_pack("{s:s, s:i, s:s, s:{s:s}}", "owner", OWNER, "rootPid", 100, "xrc729", "gates",
                                              "init", "stepId", "A"));
  json_decref(e);
  /* a join target paused while its join is open: the join closes when B runs (after 1 s), the
   * target stays waiting, and its join state (closed, closedAt) must come back after restarts */
  e = ok(&d, "xgr.enqueue", json_pack("{s:s, s:i, s:s, s:{s:s}}", "owner", OWNER, "rootPid", 200, "xrc729", "joins", "init",
                                      "stepId", "A"));
  json_decref(e);
  for (int i = 0; i < 100 && !paused_ok(&d, "200:2"); i++) xh_msleep(10);
  xh_msleep(1300);                         /* a tick or two done, the next ones waiting; B has run */
  json_int_t closed_at = join_closed_at(&d, 200, "200:2");
  assert_true(closed_at > 0);
  assert_int_equal(xh_stop(&d, SIGTERM), 0);
  start(&d, NULL, NULL);
  /* listing by owner without rootPid reads the store's sessions table: every session of the
   * earlier process is listed (join view and raw rows), newest rootPid first */
  json_t *ls = ok(&d, "xgr.listSessions", json_pack("{s:s, s:i}", "owner", OWNER, "limit", 1000));
  json_t *items = json_object_get(ls, "items");
  bool seen[N + 2] = {false};
  size_t ix;
  json_t *it;
  json_array_foreach(items, ix, it) {
    long r = strtol(sget(it, "rootPid"), NULL, 10);
    seen[r == 100 ? N + 1 : (r >= 1 && r <= N ? r : 0)] = true;
  }
  for (int r = 1; r <= N + 1; r++)
    if (!seen[r]) fail_msg("session %d is not listed after the restart", r == N + 1 ? 100 : r);
  assert_string_equal(sget(json_array_get(items, 0), "rootPid"), "200");   /* newest rootPid first */
  json_decref(ls);
  ls = ok(&d, "xgr_listSessions", json_pack("[{s:s, s:i}]", "from", OWNER, "last", 3));
  assert_int_equal(json_array_size(json_object_get(ls, "sessions")), 3);
  assert_true(json_integer_value(json_object_get(ls, "total")) >= N + 1);
  json_decref(ls);
  ls = ok(&d, "xgr.listSessions", json_pack("{s:s}", "owner", OTHER));
  assert_int_equal(json_array_size(json_object_get(ls, "items")), 0);
  json_decref(ls);
  json_t *al = ok(&d, "xgr_sessionAlive", json_pack("[s, s]", OWNER, "1"));
  assert_true(json_is_true(al));        /* recovered, still ticking */
  json_decref(al);
  assert_int_equal(join_closed_at(&d, 200, "200:2"), closed_at);   /* after the graceful restart */
  xh_msleep(700);
  assert_int_equal(xh_stop(&d, SIGKILL), 128 + SIGKILL);   /* a crash */
  start(&d, NULL, NULL);
  assert_int_equal(join_closed_at(&d, 200, "200:2"), closed_at);   /* after the crash */
  json_t *rs = ok(&d, "xgr_resume", json_pack("[{s:s, s:s}]", "owner", OWNER, "pid", "200:2"));
  json_decref(rs);
  assert_true(wait_dead(&d, OWNER, 200, 5));
  for (int i = 1; i <= N; i++) {
    if (!wait_dead(&d, OWNER, (uint64_t)i, 10)) fail_msg("session %d did not finish after the restarts", i);
    char *st = session_status(&d, OWNER, (uint64_t)i);
    assert_string_equal(st, "completed");
    free(st);
    json_t *gs = ok(&d, "xgr.getSession", json_pack("{s:s, s:i}", "owner", OWNER, "rootPid", i));
    json_t *hist = json_object_get(gs, "history");
    assert_int_equal(json_array_size(hist), 5);   /* n = 0..3 valid, n = 4 invalid */
    json_t *last = json_array_get(hist, 4);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(last, "payload"), "n")), 4);
    json_decref(gs);
  }
  /* the gate session waits for its wake-up across both restarts */
  json_t *w = ok(&d, "xgr_wakeUpProcess", json_pack("[{s:s, s:s}]", "from", OWNER, "processId", "100:2"));
  json_decref(w);
  assert_true(wait_dead(&d, OWNER, 100, 5));
  assert_int_equal(xh_stop(&d, SIGTERM), 0);
  xh_remove(&d);
}

/* One POST of a prepared body from its own thread (test_duplicate_starts). */
typedef struct dup_post {
  const daemon_t *d;
  const char *body;
  long status;
  char *out;
} dup_post;

static void *dup_post_main(void *arg) {
  dup_post *p = arg;
  p->status = xh_http(p->d, "POST", "/", "application/json", p->body, strlen(p->body), 30, &p->out);
  return NULL;
}

/* The signed JSON-RPC body of an enqueue of ticker.json's session `root` (malloc'd). */
static char *dup_body(const daemon_t *d, const char *reg, int root, int id) {
  json_t *params = json_pack("{s:s, s:I, s:s, s:{s:s}}", "owner", OWNER, "rootPid", (json_int_t)root, "xrc729", reg,
                             "init", "stepId", "T");
  g_sign.info.ctx = (void *)d;
  xgr_error se;
  assert_int_equal(tsign_attach(&g_sign, "xgr.enqueue", params, &se), 0);
  json_t *rq = json_pack("{s:s, s:i, s:s, s:o}", "jsonrpc", "2.0", "id", id, "method", "xgr.enqueue", "params", params);
  char *b = json_dumps(rq, JSON_COMPACT);
  json_decref(rq);
  return b;
}

/* Concurrent starts of one (owner, rootPid): single requests (each answered once its own commit is
 * done, without holding a server thread) sent at once from 8 threads, then a batch of 8 whose
 * enqueues run on several threads. Exactly one is queued; every other answer is the running
 * session's ack; the session has one start and runs to its end once (5 history rows). */
static void test_duplicate_starts(void **state) {
  (void)state;
  daemon_t d;
  mkdaemon(&d, "dup");
  start(&d, "--threads", "2");
  const char *reg = "0x00000000000000000000000000000000000000f2";
  deploy(&d, "ticker.json", reg);
  enum { N = 8 };
  char *body = dup_body(&d, reg, 4242, 1);
  dup_post posts[N];
  pthread_t th[N];
  for (int i = 0; i < N; i++) {
    posts[i] = (dup_post){.d = &d, .body = body};
    assert_int_equal(pthread_create(&th[i], NULL, dup_post_main, &posts[i]), 0);
  }
  int queued = 0;
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(posts[i].status, 200);
    json_t *r = json_loads(posts[i].out, 0, NULL);
    const char *ack = sget(json_object_get(r, "result"), "ack");
    if (!ack) fail_msg("a duplicate start failed: %s", posts[i].out);
    if (!strcmp(ack, "queued")) queued++;
    else if (strcmp(ack, "already_queued") && strcmp(ack, "scheduled")) fail_msg("unexpected ack %s", ack);
    json_decref(r);
    free(posts[i].out);
  }
  free(body);
  assert_int_equal(queued, 1);
  /* the same as one batch */
  json_t *batch = json_array();
  for (int i = 0; i < N; i++) {
    char *b = dup_body(&d, reg, 4343, i + 1);
    json_array_append_new(batch, json_loads(b, 0, NULL));
    free(b);
  }
  char *bb = json_dumps(batch, JSON_COMPACT);
  json_decref(batch);
  json_t *answers = xh_post(&d, bb, strlen(bb));
  free(bb);
  assert_int_equal(json_array_size(answers), N);
  queued = 0;
  for (size_t i = 0; i < N; i++) {
    const char *ack = sget(json_object_get(json_array_get(answers, i), "result"), "ack");
    assert_non_null(ack);
    if (!strcmp(ack, "queued")) queued++;
    else if (strcmp(ack, "already_queued") && strcmp(ack, "scheduled")) fail_msg("unexpected ack %s", ack);
  }
  json_decref(answers);
  assert_int_equal(queued, 1);
  for (int root = 4242; root <= 4343; root += 101) {
    if (!wait_dead(&d, OWNER, (uint64_t)root, 15)) fail_msg("session %d did not finish", root);
    json_t *gs = ok(&d, "xgr.getSession", json_pack("{s:s, s:i}", "owner", OWNER, "rootPid", root));
    assert_int_equal(json_array_size(json_object_get(gs, "history")), 5);   /* n = 0..3 valid, n = 4 invalid */
    json_decref(gs);
  }
  assert_int_equal(xh_stop(&d, SIGTERM), 0);
  xh_remove(&d);
}

/* The value of a metric line that starts with `prefix` in a /metrics text, or -1. */
static double metric(const char *text, const char *prefix) {
  for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (!strncmp(p, prefix, strlen(prefix)) && p[strlen(prefix)] == ' ') return strtod(p + strlen(prefix) + 1, NULL);
  return -1;
}

static double steps_applied(const daemon_t *d) {
  char *out;
  assert_int_equal(http(d, "GET", "/metrics", NULL, NULL, 0, &out), 200);
  double v = metric(out, "xgr_engine_events_total{kind=\"steps\"}");
  free(out);
  return v;
}

/* A full disk while sessions run: the store (limited with --store-max-pages, SQLite's
 * max_page_count) refuses a commit. From then on nothing more happens — the sessions stop (the
 * engine's step counter stands still), writing methods answer -32009 with the store's error,
 * /readyz answers 503, reads of what was committed still work, the log says so — and xgrd exits
 * with status 4 when stopped. Restarted without the limit, it recovers the sessions from what was
 * committed and they go on: nothing committed was lost. */
static void test_store_full(void **state) {
  (void)state;
  daemon_t d;
  mkdaemon(&d, "full");
  start4(&d, "--store-max-pages", "120", "--time-scale", "100");
  deploy(&d, "ticker.json", "local");
  char *pad = malloc(3001);
  memset(pad, 'p', 3000);
  pad[3000] = 0;
  enum { N = 4 };
  for (int i = 1; i <= N; i++) {
    json_t *e = ok(&d, "xgr.enqueue", json_pack("{s:s, s:i, s:{s:s, s:{s:i, s:s}}}", "owner", OWNER, "rootPid", i, "init",
                                                "stepId", "T", "payload", "max", 1000000, "__pad", pad));
    json_decref(e);
  }
  free(pad);
  /* every tick (10 ms at --time-scale 100) writes a process row and a history row of ~3 KB */
  double t0 = xh_now();
  while (http(&d, "GET", "/readyz", NULL, NULL, 0, NULL) == 200) {
    if (xh_now() - t0 > 30) fail_msg("the store did not fill up");
    xh_msleep(50);
  }
  xh_msleep(300);   /* the failure has reached every session */
  double s1 = steps_applied(&d);
  xh_msleep(500);   /* 50 ticks per session would be due meanwhile */
  double s2 = steps_applied(&d);
  assert_true(s1 > 0);
  assert_true(s1 == s2);
  assert_int_equal(http(&d, "GET", "/readyz", NULL, NULL, 0, NULL), 503);
  /* writes are refused with the store's error */
  json_t *r = rpc(&d, "xgr.enqueue", json_pack("{s:s, s:i, s:{s:s}}", "owner", OWNER, "rootPid", 50, "init", "stepId", "T"));
  json_t *e = json_object_get(r, "error");
  assert_non_null(e);
  assert_int_equal(json_integer_value(json_object_get(e, "code")), -32009);
  const char *msg = json_string_value(json_object_get(e, "message"));
  if (!strstr(msg, "full")) fail_msg("the error does not name the cause: %s", msg);
  json_decref(r);
  fails(&d, "xgr.kill", json_pack("{s:s, s:s}", "owner", OWNER, "pid", "1"), -32009, NULL);
  fails(&d, "xgr_putRule", json_pack("[{s:s, s:{}}]", "address", "Z", "rule"), -32009, NULL);
  /* reads of what was committed work */
  json_t *np = ok(&d, "xgr_getNextProcessId", json_pack("[{s:s}]", "from", OWNER));
  json_decref(np);
  json_t *gs = ok(&d, "xgr.getSession", json_pack("{s:s, s:i}", "owner", OWNER, "rootPid", 1));
  size_t ticks_before = json_array_size(json_object_get(gs, "history"));
  json_decref(gs);
  assert_int_equal(xh_stop(&d, SIGTERM), 4);
  char logf[320], line[4096];
  snprintf(logf, sizeof logf, "%s/xgrd.log", d.dir);
  FILE *f = fopen(logf, "r");
  assert_non_null(f);
  bool logged = false;
  while (fgets(line, sizeof line, f))
    if (strstr(line, "level=error") && strstr(line, "store failed") && strstr(line, "full")) logged = true;
  fclose(f);
  assert_true(logged);
  /* restart on a store that can grow: recovered, the sessions go on from their last commit */
  start4(&d, "--time-scale", "100", NULL, NULL);
  assert_int_equal(http(&d, "GET", "/readyz", NULL, NULL, 0, NULL), 200);
  t0 = xh_now();
  for (;;) {
    gs = ok(&d, "xgr.getSession", json_pack("{s:s, s:i}", "owner", OWNER, "rootPid", 1));
    size_t now_ticks = json_array_size(json_object_get(gs, "history"));
    json_t *hist = json_object_get(gs, "history");
    /* no tick twice, none lost: n counts 0, 1, 2, ... in the history */
    for (size_t k = 0; k < now_ticks; k++) {
      json_t *pl = json_object_get(json_array_get(hist, k), "payload");
      assert_int_equal(json_integer_value(json_object_get(pl, "n")), (json_int_t)k + 1);
    }
    json_decref(gs);
    if (now_ticks > ticks_before + 5) break;
    if (xh_now() - t0 > 10) fail_msg("session 1 did not go on after the restart (%zu ticks)", now_ticks);
    xh_msleep(50);
  }
  assert_int_equal(xh_stop(&d, SIGTERM), 0);
  xh_remove(&d);
}

/* Many concurrent clients enqueue gate sessions and wake them (libcurl multi, keep-alive):
 * every request answered without error, every session completed. */
/* A signed request body of the load test: enqueue of session n (phase 0) or the wake of its
 * process n:2 (phase 1). */
static void load_body(char *out, size_t cap, const daemon_t *d, int phase, int n, const char *ostc_hash) {
  json_t *params = phase == 0 ? json_pack("{s:s, s:i, s:s, s:{s:s}}", "owner", OWNER, "rootPid", n, "ostcHash", ostc_hash,
                                          "init", "stepId", "A")
                              : json_pack("{s:s, s:s, s:{s:i}}", "from", OWNER, "processId", "", "payload", "n", n);
  if (phase) {
    char pid[32];
    snprintf(pid, sizeof pid, "%d:2", n);
    json_object_set_new(params, "processId", json_string(pid));
  }
  g_sign.info.ctx = (void *)d;
  xgr_error e;
  if (tsign_attach(&g_sign, phase ? "xgr_wakeUpProcess" : "xgr.enqueue", params, &e)) fail_msg("sign: %s", e.message);
  json_t *rq = json_pack("{s:s, s:i, s:s, s:o}", "jsonrpc", "2.0", "id", n, "method",
                         phase ? "xgr_wakeUpProcess" : "xgr.enqueue", "params", params);
  char *t = json_dumps(rq, JSON_COMPACT);
  snprintf(out, cap, "%s", t);
  free(t);
  json_decref(rq);
}

static void test_load(void **state) {
  (void)state;
  daemon_t d;
  mkdaemon(&d, "load");
  start(&d, NULL, NULL);
  deploy(&d, "gate.json", "local");
  enum { CLIENTS = 32, SESSIONS = 1500 };
  json_t *orch = ok(&d, "xgr.getOrchestration", json_pack("{s:s}", "owner", OWNER));
  char ostc_hash[67];
  snprintf(ostc_hash, sizeof ostc_hash, "%s", sget(orch, "hash"));
  json_decref(orch);
  CURLM *m = curl_multi_init();
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/", d.port);
  struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
  typedef struct slot {
    CURL *h;
    xh_buf b;
    char body[4096];
    int phase;   /* 0 enqueue, 1 wake */
    int n;
  } slot;
  slot *s = calloc(CLIENTS, sizeof *s);
  int next = 0, done = 0, errors = 0, retries = 0;
  int *phase_of = calloc(SESSIONS + 1, sizeof *phase_of);
  /* each session: enqueue, then wake 2 (retried while W is not yet waiting) */
  for (int i = 0; i < CLIENTS; i++) {
    s[i].h = curl_easy_init();
    curl_easy_setopt(s[i].h, CURLOPT_URL, url);
    curl_easy_setopt(s[i].h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(s[i].h, CURLOPT_WRITEFUNCTION, xh_buf_sink);
    curl_easy_setopt(s[i].h, CURLOPT_WRITEDATA, &s[i].b);
    curl_easy_setopt(s[i].h, CURLOPT_PRIVATE, &s[i]);
    curl_easy_setopt(s[i].h, CURLOPT_TIMEOUT, 30L);
  }
  double t0 = xh_now();
  int launched = 0;
  for (int i = 0; i < CLIENTS && next < SESSIONS; i++) {
    s[i].n = ++next;
    s[i].phase = 0;
    load_body(s[i].body, sizeof s[i].body, &d, 0, s[i].n, ostc_hash);
    curl_easy_setopt(s[i].h, CURLOPT_POSTFIELDS, s[i].body);
    curl_multi_add_handle(m, s[i].h);
    launched++;
  }
  while (launched > 0 && xh_now() - t0 < 60) {
    int running;
    curl_multi_perform(m, &running);
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m, &left))) {
      if (msg->msg != CURLMSG_DONE) continue;
      slot *sl;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&sl);
      long code = 0;
      curl_easy_getinfo(sl->h, CURLINFO_RESPONSE_CODE, &code);
      json_t *r = msg->data.result == CURLE_OK && code == 200 ? json_loads(sl->b.p ? sl->b.p : "", 0, NULL) : NULL;
      json_t *err = json_object_get(r, "error");
      curl_multi_remove_handle(m, sl->h);
      launched--;
      free(sl->b.p);
      sl->b.p = NULL;
      sl->b.n = 0;
      bool again = false;
      if (!r) {
        errors++;
      } else if (sl->phase == 0) {
        if (err || strcmp(sget(json_object_get(r, "result"), "ack"), "queued")) errors++;
        else {
          sl->phase = 1;
          again = true;
        }
      } else {
        /* W may not be waiting yet (A still running): a conflict is retried */
        if (err && json_integer_value(json_object_get(err, "code")) == -32008) {
          retries++;
          again = true;
        } else if (err) {
          errors++;
        } else {
          done++;
          phase_of[sl->n] = 2;
        }
      }
      json_decref(r);
      if (!again && next < SESSIONS) {
        sl->n = ++next;
        sl->phase = 0;
        again = true;
      }
      if (again) {
        load_body(sl->body, sizeof sl->body, &d, sl->phase, sl->n, ostc_hash);   /* a fresh permit each time */
        curl_easy_setopt(sl->h, CURLOPT_POSTFIELDS, sl->body);
        curl_multi_add_handle(m, sl->h);
        launched++;
      }
    }
    curl_multi_poll(m, NULL, 0, 100, NULL);
  }
  double secs = xh_now() - t0;
  print_message("load: %d sessions enqueued and woken by %d clients in %.2f s (%.0f req/s), %d wake retries\n", done,
                CLIENTS, secs, (2.0 * done + retries) / secs, retries);
  for (int i = 0; i < CLIENTS; i++) curl_easy_cleanup(s[i].h);
  curl_multi_cleanup(m);
  curl_slist_free_all(hd);
  free(s);
  assert_int_equal(errors, 0);
  assert_int_equal(done, SESSIONS);
  /* every session completed */
  for (int i = 1; i <= SESSIONS; i += 1) {
    if (!wait_dead(&d, OWNER, (uint64_t)i, 10)) fail_msg("session %d still alive", i);
  }
  char *st = session_status(&d, OWNER, SESSIONS);
  assert_string_equal(st, "completed");
  free(st);
  /* paging through the owner's 1,500 sessions: a listing scans the newest 1,000 and says where the
   * next page starts; the second page holds the other 500, each session once */
  bool *listed = calloc(SESSIONS + 1, sizeof *listed);
  int pages = 0;
  const char *before = NULL;
  char cursor[32] = "";
  for (;;) {
    json_t *pr = json_pack("[{s:s, s:i}]", "from", OWNER, "last", 10000);
    if (before) json_object_set_new(json_array_get(pr, 0), "beforeRootPid", json_string(before));
    json_t *ls = ok(&d, "xgr_listSessions", pr);
    size_t ix;
    json_t *it;
    json_array_foreach(json_object_get(ls, "sessions"), ix, it) {
      long r = strtol(sget(it, "sessionId"), NULL, 10);
      assert_true(r >= 1 && r <= SESSIONS);
      listed[r] = true;
    }
    pages++;
    const char *nb = sget(ls, "nextBeforeRootPid");
    if (nb) snprintf(cursor, sizeof cursor, "%s", nb);
    json_decref(ls);
    if (!nb || pages > 3) break;
    before = cursor;
  }
  assert_int_equal(pages, 2);
  for (int i = 1; i <= SESSIONS; i++)
    if (!listed[i]) fail_msg("session %d was on no page", i);
  free(listed);
  free(phase_of);
  assert_int_equal(xh_stop(&d, SIGTERM), 0);
  xh_remove(&d);
}

/* ---- drift bugs of issue 13: every method parses the same field the same way ------------------ */

#define REG_F3 "0x00000000000000000000000000000000000000f3"

/* One ostcId rule for every method: non-empty, no '/', at most 96 bytes; refused with -32602 at
 * "ostcId" (validateDataTransfer and getOrchestration used to cut a longer id to 96 bytes and
 * answer for the orchestration registered under the cut id). */
static void test_drift_ostc_id(void **state) {
  (void)state;
  daemon_t d;
  mkdaemon(&d, "ostc");
  start(&d, NULL, NULL);
  deploy(&d, "short.json", REG_F3);
  char id96[97], id97[98];
  memset(id96, 'g', 96);
  id96[96] = '\0';
  snprintf(id97, sizeof id97, "%sx", id96);
  char path[512];
  snprintf(path, sizeof path, "%s/tests/daemon/short.json", src_dir());
  json_t *b = json_load_file(path, 0, NULL);
  assert_non_null(b);
  json_t *orch = json_object_get(b, "orchestration");
  json_decref(ok(&d, "xgr.putOrchestration", json_pack("{s:s, s:s, s:O}", "xrc729", REG_F3, "ostcId", id96, "orchestration",
                                                       orch)));
  const char *bad[] = {id97, "a/b", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    fails(&d, "xgr.enqueue", json_pack("{s:s, s:s, s:s, s:{s:s}}", "owner", OWNER, "xrc729", REG_F3, "ostcId", bad[i],
                                       "init", "stepId", "S"), -32602, "ostcId");
    fails(&d, "xgr_validateDataTransfer", json_pack("[{s:s, s:s, s:s, s:s, s:{s:i}}]", "from", OWNER, "stepId", "S",
                                                    "orchestration", REG_F3, "ostcId", bad[i], "payload", "x", 2),
          -32602, "ostcId");
    fails(&d, "xgr.getOrchestration", json_pack("{s:s, s:s}", "xrc729", REG_F3, "ostcId", bad[i]), -32602, "ostcId");
    fails(&d, "xgr.putOrchestration", json_pack("{s:s, s:s, s:O}", "xrc729", REG_F3, "ostcId", bad[i], "orchestration",
                                                orch), -32602, "ostcId");
  }
  /* nothing was started by a refused call */
  json_t *n = ok(&d, "xgr_getNextProcessId", json_pack("[{s:s}]", "from", OWNER));
  assert_string_equal(sget(n, "nextProcessId"), "1");
  json_decref(n);
  /* the 96-byte id itself is accepted everywhere */
  json_t *g = ok(&d, "xgr.getOrchestration", json_pack("{s:s, s:s, s:s}", "xrc729", REG_F3, "ostcId", id96, "owner", OWNER));
  assert_string_equal(sget(g, "ostcId"), id96);
  json_decref(g);
  json_t *v = ok(&d, "xgr_validateDataTransfer", json_pack("[{s:s, s:s, s:s, s:s, s:{s:i}}]", "from", OWNER, "stepId", "S",
                                                           "orchestration", REG_F3, "ostcId", id96, "payload", "x", 2));
  assert_true(json_is_true(json_object_get(v, "finalResult")));
  json_decref(v);
  json_decref(ok(&d, "xgr.enqueue", json_pack("{s:s, s:s, s:s, s:{s:s}}", "owner", OWNER, "xrc729", REG_F3, "ostcId", id96,
                                              "init", "stepId", "S")));
  json_decref(b);
  assert_int_equal(xh_stop(&d, SIGTERM), 0);
  xh_remove(&d);
}

/* Listing in allow-list mode asks the session core's own __wakeUp check: when steps[stepId] is not
 * an object, `default` applies, for the wake-up and for the listing alike (the listing used to
 * hide a process the delegate was allowed to wake). */
static void test_drift_allow_list(void **state) {
  (void)state;
  daemon_t d;
  mkdaemon(&d, "allow");
  start(&d, NULL, NULL);
  deploy(&d, "gate.json", REG_F3);
  json_t *e = ok(&d, "xgr.enqueue", json_pack("{s:s, s:s, s:{s:s, s:{s:{s:{s:s}, s:{s:[s]}}}}}", "owner", OWNER, "xrc729",
                                              REG_F3, "init", "stepId", "A", "payload", "__wakeUp", "steps", "W", "nope",
                                              "default", "rpc", DELEGATE));
  uint64_t root = strtoull(sget(e, "rootPid"), NULL, 10);
  json_decref(e);
  char rs[24];
  snprintf(rs, sizeof rs, "%llu", (unsigned long long)root);
  double t0 = xh_now();
  for (;;) {   /* W waits */
    json_t *se = ok(&d, "xgr_stepExecuted", json_pack("[s, s, i]", OWNER, rs, 2));
    bool waiting = json_is_false(se);
    json_decref(se);
    if (waiting) break;
    assert_true(xh_now() - t0 < 5);
    xh_msleep(10);
  }
  json_t *ls = ok(&d, "xgr_listSessions", json_pack("[{s:s, s:s, s:s}]", "from", DELEGATE, "runner", OWNER, "rootId", rs));
  assert_int_equal(json_array_size(json_object_get(ls, "sessions")), 1);
  assert_string_equal(sget(json_array_get(json_object_get(ls, "sessions"), 0), "step"), "W");
  json_decref(ls);
  /* the public reference's allow mode: a ControlPermitV2 (action wake) names runner and session; its
   * stepId, when set, narrows the list (least privilege) */
  for (int k = 0; k < 2; k++) {
    uint8_t key[32];
    assert_int_equal(tsign_key(DELEGATE, key), 0);
    xgr_permit_fields f = {.kind = XGR_PERMIT_CONTROL_V2, .chain_id = g_sign.chain_id, .verifying_contract = g_sign.contract,
                           .runner = OWNER, .session_id = root, .action = "wake", .step_id = k ? "X" : "W",
                           .expiry = (uint64_t)time(NULL) + 600};
    json_t *cp;
    xgr_error se;
    assert_int_equal(xgr_permit_sign(g_sign.s, key, &f, &cp, &se), 0);
    ls = ok(&d, "xgr_listSessions", json_pack("[{s:s, s:o}]", "runner", OWNER, "controlPermit", cp));
    assert_int_equal(json_array_size(json_object_get(ls, "sessions")), k ? 0 : 1);
    json_decref(ls);
  }
  /* a stranger sees nothing */
  ls = ok(&d, "xgr_listSessions", json_pack("[{s:s, s:s, s:s}]", "from", OTHER, "runner", OWNER, "rootId", rs));
  assert_int_equal(json_array_size(json_object_get(ls, "sessions")), 0);
  json_decref(ls);
  /* and what the listing shows is what the core lets the delegate do */
  json_t *w = ok(&d, "xgr_wakeUpProcess", json_pack("[{s:s, s:s, s:s, s:s}]", "from", DELEGATE, "runner", OWNER,
                                                    "sessionId", rs, "stepId", "W"));
  assert_int_equal(json_integer_value(json_object_get(w, "woken")), 1);
  json_decref(w);
  assert_true(wait_dead(&d, OWNER, root, 5));
  assert_int_equal(xh_stop(&d, SIGTERM), 0);
  xh_remove(&d);
}

/* One unsigned-integer parser, range-checked: a decimal string beyond 2^64-1 is refused at its
 * field, never clamped to 2^64-1 (rootPid, sessionId, limit, pid strings). */
static void test_drift_uint_range(void **state) {
  (void)state;
  daemon_t d;
  mkdaemon(&d, "uint");
  start(&d, NULL, NULL);
  deploy(&d, "short.json", REG_F3);
  const char *big = "18446744073709551616";
  fails(&d, "xgr.enqueue", json_pack("{s:s, s:s, s:s, s:{s:s}}", "owner", OWNER, "xrc729", REG_F3, "rootPid", big, "init",
                                     "stepId", "S"), -32602, "rootPid");
  fails(&d, "xgr_validateDataTransfer", json_pack("[{s:s, s:s, s:s, s:s, s:{s:i}}]", "from", OWNER, "stepId", "S",
                                                  "orchestration", REG_F3, "sessionId", big, "payload", "x", 2),
        -32602, "sessionId");
  fails(&d, "xgr_sessionAlive", json_pack("[s, s]", OWNER, big), -32602, "[1]");
  fails(&d, "xgr_stepExecuted", json_pack("[s, s, s]", OWNER, "1", "99999999999999999999999"), -32602, "[2]");
  fails(&d, "xgr.listSessions", json_pack("{s:s, s:s}", "owner", OWNER, "limit", big), -32602, "limit");
  fails(&d, "xgr.kill", json_pack("{s:s, s:s}", "owner", OWNER, "rootPid", big), -32602, "rootPid");
  fails(&d, "xgr.kill", json_pack("{s:s, s:s}", "owner", OWNER, "pid", "18446744073709551616:1"), -32602, "pid");
  fails(&d, "xgr_wakeUpProcess", json_pack("[{s:s, s:s}]", "from", OWNER, "processId", "1:18446744073709551616"), -32602,
        "processId");
  /* nothing was started; the largest value still parses (and names no session) */
  json_t *n = ok(&d, "xgr_getNextProcessId", json_pack("[{s:s}]", "from", OWNER));
  assert_string_equal(sget(n, "nextProcessId"), "1");
  json_decref(n);
  json_t *al = ok(&d, "xgr_sessionAlive", json_pack("[s, s]", OWNER, "18446744073709551615"));
  assert_true(json_is_false(al));
  json_decref(al);
  assert_int_equal(xh_stop(&d, SIGTERM), 0);
  xh_remove(&d);
}

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_teardown(test_registries_and_enqueue, xh_teardown),
    cmocka_unit_test_teardown(test_duplicate_starts, xh_teardown),
    cmocka_unit_test_teardown(test_public_methods, xh_teardown),
    cmocka_unit_test_teardown(test_pause_resume_kill, xh_teardown),
    cmocka_unit_test_teardown(test_protocol, xh_teardown),
    cmocka_unit_test_teardown(test_slow_client, xh_teardown),
    cmocka_unit_test_teardown(test_restart, xh_teardown),
    cmocka_unit_test_teardown(test_load, xh_teardown),
    cmocka_unit_test_teardown(test_store_full, xh_teardown),
    cmocka_unit_test_teardown(test_drift_ostc_id, xh_teardown),
    cmocka_unit_test_teardown(test_drift_allow_list, xh_teardown),
    cmocka_unit_test_teardown(test_drift_uint_range, xh_teardown),
  };
  const char *only = getenv("XGR_TEST_FILTER");   /* e.g. XGR_TEST_FILTER='test_drift_*' */
  if (only && *only) cmocka_set_test_filter(only);
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
