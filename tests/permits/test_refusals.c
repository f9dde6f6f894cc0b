/* test_refusals.c — every permit check of issue 16 from the outside: a real xgrd (XGRD) in permit
 * mode on an ephemeral loopback port with a SQLite store, driven over HTTP. For each check one
 * request that fails exactly that check: it must answer -32007 with a message naming the check,
 * and the store must be unchanged (a fingerprint of every table, read with sqlite3 while xgrd
 * runs). Covered: forged signature, another signer, expired, wrong chain, wrong domain name, wrong
 * primaryType, extra field, wrong sessionId, wrong action, a control permit used twice (also after
 * a restart), high s, bad v, truncated hex, a start by a non-owner (naming the owner's namespace),
 * reading another owner's session, a PID-mode wake with a signed step or by a non-owner;
 * and the good permits that the refusals mutate (a step-mode wake from the permit alone). Also
 * the Host header check, /metrics on --metrics-listen, and xgr_getCoreAddrs. */
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "../daemon/harness.h"
#include "malleate.h"
#include "xgr/permit.h"
#include "xgr/secp.h"
#include "xgr/session.h"

#define CHAIN 31337
#define CONTRACT "0x00000000000000000000000000000000000000aa"
#define REG "0x00000000000000000000000000000000000000f1"

typedef struct ctx {
  pid_t pid;
  int port;
  char dir[128], store[220], db[200];
  xgr_secp *s;
  uint8_t owner_key[32], other_key[32];
  char owner[43], other[43];
  char hash[67];
} ctx;

static ctx C;

static void msleep(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void start_xgrd(void) {
  char portfile[200], logf[200];
  snprintf(portfile, sizeof portfile, "%s/port", C.dir);
  snprintf(logf, sizeof logf, "%s/xgrd.log", C.dir);
  unlink(portfile);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (!freopen(logf, "a", stderr)) _exit(126);
    const char *xgrd = getenv("XGRD") ? getenv("XGRD") : "./xgrd";
    execl(xgrd, xgrd, "--listen", "127.0.0.1:0", "--store", C.store, "--port-file", portfile, "--workers", "1",
          "--chain-id", "31337", "--control-contract", CONTRACT, "--metrics-listen", "127.0.0.1:0", (char *)NULL);
    _exit(127);
  }
  C.pid = pid;
  for (int i = 0; i < 500; i++) {
    FILE *f = fopen(portfile, "r");
    if (f) {
      int ok = fscanf(f, "%d", &C.port);
      fclose(f);
      if (ok == 1 && C.port > 0) return;
    }
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) fail_msg("xgrd exited at start (see %s)", logf);
    msleep(10);
  }
  fail_msg("xgrd did not write its port file");
}

static void stop_xgrd(void) {
  if (C.pid <= 0) return;
  kill(C.pid, SIGTERM);
  waitpid(C.pid, NULL, 0);
  C.pid = 0;
}

/* Call method with params (stolen); the whole response object. */
static json_t *rpc(const char *method, json_t *params) {
  json_t *rq = json_pack("{s:s, s:i, s:s, s:o}", "jsonrpc", "2.0", "id", 1, "method", method, "params", params);
  char *body = json_dumps(rq, JSON_COMPACT);
  json_decref(rq);
  char *out;
  long st = xh_http_at(C.port, "POST", "/", "application/json", body, strlen(body), 20, &out);
  free(body);
  if (st < 0) fail_msg("%s: no answer from xgrd", method);
  json_t *r = json_loads(out, 0, NULL);
  if (!r) fail_msg("%s: not JSON: %s", method, out);
  free(out);
  return r;
}

static json_t *ok(const char *method, json_t *params) {
  json_t *r = rpc(method, params);
  if (json_object_get(r, "error")) {
    char *t = json_dumps(r, 0);
    fail_msg("%s failed: %s", method, t);
  }
  json_t *res = json_incref(json_object_get(r, "result"));
  json_decref(r);
  return res;
}

/* Every table of the store, row by row, hashed into a text fingerprint. */
static char *fingerprint(void) {
  sqlite3 *db;
  assert_int_equal(sqlite3_open_v2(C.db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  static const char *const q[] = {
      "SELECT owner, next_root FROM owners ORDER BY owner",
      "SELECT id, version, hash, owner FROM orchestrations ORDER BY id, version",
      "SELECT id, version, hash, owner FROM rules ORDER BY id, version",
      "SELECT owner, root_pid, status, paused, next_iter FROM sessions ORDER BY owner, root_pid",
      "SELECT owner, root_pid, iter, status, paused, payload FROM proc_rt ORDER BY owner, root_pid, iter",
      "SELECT owner, root_pid, iter FROM proc_steps ORDER BY owner, root_pid, iter",
      "SELECT key, expires_at FROM marks ORDER BY key",
  };
  size_t cap = 1 << 16, len = 0;
  char *out = malloc(cap);
  out[0] = 0;
  for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, q[i], -1, &st, NULL), SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
      for (int c = 0; c < sqlite3_column_count(st); c++) {
        const char *t = (const char *)sqlite3_column_text(st, c);
        size_t n = strlen(t ? t : "") + 2;
        if (len + n + 1 > cap) out = realloc(out, cap *= 2);
        len += (size_t)snprintf(out + len, cap - len, "%s|", t ? t : "");
      }
      out[len++] = '\n';
      out[len] = 0;
    }
    sqlite3_finalize(st);
    if (len + 3 > cap) out = realloc(out, cap *= 2);
    len += (size_t)snprintf(out + len, cap - len, "--\n");
  }
  sqlite3_close(db);
  return out;
}

/* ---- permits ---------------------------------------------------------------------------------- */

static json_t *sign(const uint8_t key[32], xgr_permit_fields f) {
  uint8_t vc[20];
  xgr_hex_decode(CONTRACT, vc, 20);
  if (!f.chain_id) f.chain_id = CHAIN;
  if (!f.verifying_contract) f.verifying_contract = vc;
  if (!f.expiry) f.expiry = (uint64_t)time(NULL) + 600;
  json_t *p;
  xgr_error e;
  if (xgr_permit_sign(C.s, key, &f, &p, &e)) fail_msg("sign: %s: %s", e.path, e.message);
  return p;
}

static xgr_permit_fields session_fields(uint64_t root) {
  static uint8_t h[32];
  xgr_hex_decode(C.hash, h, 32);
  return (xgr_permit_fields){.kind = XGR_PERMIT_SESSION, .ostc_id = "", .ostc_hash = h, .session_id = root,
                             .max_total_gas = 1000000};
}

static json_t *enqueue_params(uint64_t root, json_t *permit) {
  json_t *p = json_pack("{s:s, s:{s:s}, s:o}", "xrc729", REG, "init", "stepId", "A", "permit", permit);
  if (root) json_object_set_new(p, "rootPid", json_integer((json_int_t)root));
  return p;
}

/* Flip hex digit i of the signature; set byte 64 (v); cut it; make s high. */
static void sig_flip(json_t *p, size_t i) {
  char s[140];
  snprintf(s, sizeof s, "%s", json_string_value(json_object_get(p, "signature")));
  s[i] = s[i] == '0' ? '1' : '0';
  json_object_set_new(p, "signature", json_string(s));
}
static void sig_v(json_t *p, int v) {
  uint8_t b[65];
  xgr_hex_decode(json_string_value(json_object_get(p, "signature")), b, 65);
  b[64] = (uint8_t)v;
  char s[140];
  xgr_hex_encode(b, 65, s);
  json_object_set_new(p, "signature", json_string(s));
}
static void sig_cut(json_t *p) {
  char s[140];
  snprintf(s, sizeof s, "%s", json_string_value(json_object_get(p, "signature")));
  s[100] = 0;
  json_object_set_new(p, "signature", json_string(s));
}
/* Wait until no process in the store is running: every step a session started has its result
 * committed, so nothing writes until the next call. A start is durable before it is answered (its
 * session row and its running start process), a step's result (the process done, what it spawned
 * waiting, its history row) is one batch, and control replies come after their commit; so once
 * no stored process is running, the sessions of this test (gate.json: A, then W waits for a wake)
 * are at rest. A condition read from the store, not a pause: a loaded machine (ASan) may take any
 * time to run a step. Fails after 60 s. */
static void wait_at_rest(const char *what) {
  sqlite3 *db;
  assert_int_equal(sqlite3_open_v2(C.db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  char q[96];
  snprintf(q, sizeof q, "SELECT count(*) FROM proc_rt WHERE status = %d", (int)XGR_PROC_RUNNING);
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(db, q, -1, &st, NULL), SQLITE_OK);
  int running = -1;
  for (int i = 0; i < 6000 && running; i++) {
    if (i) msleep(10);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    running = sqlite3_column_int(st, 0);
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  if (running) fail_msg("%s: %d processes still run after 60 s", what, running);
}

/* The call must be refused with -32007, a message containing `words`, and no store change. */
static void refused(const char *what, const char *method, json_t *params, const char *words) {
  wait_at_rest(what);   /* sessions started before write until their steps' results are committed */
  char *before = fingerprint();
  json_t *r = rpc(method, params);
  json_t *e = json_object_get(r, "error");
  char *t = json_dumps(r, 0);
  if (!e) fail_msg("%s: accepted, expected -32007: %s", what, t);
  if (json_integer_value(json_object_get(e, "code")) != -32007) fail_msg("%s: expected -32007, got %s", what, t);
  const char *msg = json_string_value(json_object_get(e, "message"));
  bool found = false; /* words: alternatives separated by '|' */
  for (const char *w = words; msg && !found;) {
    const char *bar = strchr(w, '|');
    size_t n = bar ? (size_t)(bar - w) : strlen(w);
    char one[96];
    snprintf(one, sizeof one, "%.*s", (int)n, w);
    found = strstr(msg, one) != NULL;
    if (!bar) break;
    w = bar + 1;
  }
  if (!found) fail_msg("%s: expected \"%s\" in the message, got %s", what, words, t);
  printf("refused  %-28s %s\n", what, t);
  free(t);
  json_decref(r);
  char *after = fingerprint();
  if (strcmp(before, after)) fail_msg("%s: the store changed:\n%s\nvs\n%s", what, before, after);
  free(before);
  free(after);
}

static int setup(void **state) {
  (void)state;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  snprintf(C.dir, sizeof C.dir, "/tmp/xgr-test-refusals-%d", (int)getpid());
  mkdir(C.dir, 0700);
  snprintf(C.db, sizeof C.db, "%s/store.db", C.dir);
  snprintf(C.store, sizeof C.store, "sqlite:%s", C.db);
  C.s = xgr_secp_new();
  memset(C.owner_key, 0x51, 32);
  memset(C.other_key, 0x52, 32);
  uint8_t a[20];
  xgr_error e;
  xgr_secp_address(C.s, C.owner_key, a, &e);
  xgr_addr_hex(a, C.owner);
  xgr_secp_address(C.s, C.other_key, a, &e);
  xgr_addr_hex(a, C.other);
  start_xgrd();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  stop_xgrd();
  xgr_secp_free(C.s);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", C.dir);
  if (system(cmd)) { /* best effort */ }
  curl_global_cleanup();
  return 0;
}

static void test_refusals(void **state) {
  (void)state;
  /* the owner registers the bundle of tests/daemon/gate.json (A, then W waits) */
  char path[512];
  snprintf(path, sizeof path, "%s/tests/daemon/gate.json", getenv("XGR_SRC") ? getenv("XGR_SRC") : ".");
  json_t *b = json_load_file(path, 0, NULL);
  assert_non_null(b);
  const char *k;
  json_t *rule;
  json_object_foreach(json_object_get(b, "rules"), k, rule) {
    json_t *r = ok("xgr.putRule", json_pack("{s:s, s:O, s:o}", "address", k, "rule", rule, "permit",
                                            sign(C.owner_key, (xgr_permit_fields){.kind = XGR_PERMIT_XDALA})));
    json_decref(r);
  }
  json_t *orch = json_object_get(b, "orchestration");
  json_t *r = ok("xgr.putOrchestration", json_pack("{s:s, s:O, s:o}", "xrc729", REG, "orchestration", orch, "permit",
                                                  sign(C.owner_key, (xgr_permit_fields){.kind = XGR_PERMIT_XDALA})));
  snprintf(C.hash, sizeof C.hash, "%s", json_string_value(json_object_get(r, "hash")));
  json_decref(r);

  /* a good start: rootPid 1 (the next id), then the session waits in W */
  r = ok("xgr.enqueue", enqueue_params(0, sign(C.owner_key, session_fields(1))));
  assert_string_equal(json_string_value(json_object_get(r, "ack")), "queued");
  assert_string_equal(json_string_value(json_object_get(r, "owner")), C.owner);
  json_decref(r);

  /* ---- signature checks (SessionPermit for the next start, rootPid 2) ---- */
  json_t *p = sign(C.owner_key, session_fields(2));
  sig_flip(p, 20);
  refused("forged signature", "xgr.enqueue", enqueue_params(0, p), "not by message.from|no public key");
  p = sign(C.other_key, session_fields(2));
  json_object_set_new(json_object_get(p, "message"), "from", json_string(C.owner));
  refused("another signer", "xgr.enqueue", enqueue_params(0, p), "not by message.from");
  p = sign(C.owner_key, session_fields(2));
  malleate_high_s(p);
  refused("high s", "xgr.enqueue", enqueue_params(0, p), "high s");
  p = sign(C.owner_key, session_fields(2));
  sig_v(p, 29);
  refused("bad v", "xgr.enqueue", enqueue_params(0, p), "bad v");
  p = sign(C.owner_key, session_fields(2));
  sig_cut(p);
  refused("truncated hex", "xgr.enqueue", enqueue_params(0, p), "130 hex digits");

  /* ---- content checks ---- */
  xgr_permit_fields f = session_fields(2);
  f.expiry = (uint64_t)time(NULL) - 1;
  refused("expired", "xgr.enqueue", enqueue_params(0, sign(C.owner_key, f)), "expired");
  f = session_fields(2);
  f.chain_id = 1;
  refused("wrong chain", "xgr.enqueue", enqueue_params(0, sign(C.owner_key, f)), "wrong chain");
  f = session_fields(2);
  f.domain_name = "XDaLa Permit";
  refused("wrong domain name", "xgr.enqueue", enqueue_params(0, sign(C.owner_key, f)), "domain name");
  refused("wrong primaryType", "xgr.enqueue",
          enqueue_params(0, sign(C.owner_key, (xgr_permit_fields){.kind = XGR_PERMIT_XDALA})), "not accepted here");
  p = sign(C.owner_key, session_fields(2));
  json_array_append_new(json_object_get(json_object_get(p, "types"), "SessionPermit"),
                        json_pack("{s:s, s:s}", "name", "note", "type", "string"));
  json_object_set_new(json_object_get(p, "message"), "note", json_string("hi"));
  refused("extra field", "xgr.enqueue", enqueue_params(0, p), "wrong field list");
  refused("wrong sessionId", "xgr.enqueue", enqueue_params(0, sign(C.owner_key, session_fields(7))), "wrong sessionId");
  refused("wrong sessionId (replay)", "xgr.enqueue", enqueue_params(0, sign(C.owner_key, session_fields(1))),
          "wrong sessionId");
  /* another signer names the owner's namespace (registryOwner): refused, it is no executor (without
   * registryOwner its own namespace has no such registry: -32004) */
  json_t *np = enqueue_params(0, sign(C.other_key, session_fields(1)));
  json_object_set_new(np, "registryOwner", json_string(C.owner));
  refused("non-owner start", "xgr.enqueue", np, "not the orchestration's owner");

  /* ---- control permits ---- */
  xgr_permit_fields pause = {.kind = XGR_PERMIT_CONTROL, .action = "pause", .session_id = 1, .step_id = ""};
  refused("wrong action", "xgr.kill", json_pack("{s:s, s:o}", "pid", "1", "permit", sign(C.owner_key, pause)),
          "wrong action");
  refused("control by a non-owner", "xgr.pause",
          json_pack("{s:s, s:s, s:o}", "owner", C.owner, "pid", "1",
                    "permit", sign(C.other_key, (xgr_permit_fields){.kind = XGR_PERMIT_CONTROL_V2, .runner = C.owner,
                                                                    .action = "pause", .session_id = 1})),
          "only its owner and xgrd's operators may");
  /* wakes: PID mode signs no step; PID mode is the owner's alone, also when the request names no
   * owner (the signer's own session 1 does not exist, the owner's does) */
  refused("PID wake with a signed step", "xgr_wakeUpProcess",
          json_pack("[{s:s, s:o}]", "processId", "1:2", "permit",
                    sign(C.owner_key, (xgr_permit_fields){.kind = XGR_PERMIT_CONTROL, .action = "wake", .session_id = 1,
                                                          .step_id = "W"})),
          "must be empty for a PID-mode wake");
  refused("PID wake by a non-owner", "xgr_wakeUpProcess",
          json_pack("[{s:s, s:o}]", "processId", "1:2", "permit",
                    sign(C.other_key, (xgr_permit_fields){.kind = XGR_PERMIT_CONTROL, .action = "wake", .session_id = 1,
                                                          .step_id = ""})),
          "another owner's");
  refused("PID wake by a non-owner (V2)", "xgr_wakeUpProcess",
          json_pack("[{s:s, s:o}]", "processId", "1:2", "permit",
                    sign(C.other_key, (xgr_permit_fields){.kind = XGR_PERMIT_CONTROL_V2, .runner = C.owner,
                                                          .action = "wake", .session_id = 1, .step_id = ""})),
          "may not wake the sessions of");
  /* a wake naming neither processId nor a signed step is malformed (-32602 at the permit's stepId) */
  r = rpc("xgr_wakeUpProcess", json_pack("[{s:{}, s:o}]", "payload", "permit",
                                         sign(C.owner_key, (xgr_permit_fields){.kind = XGR_PERMIT_CONTROL,
                                                                               .action = "wake", .session_id = 1,
                                                                               .step_id = ""})));
  assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "error"), "code")), -32602);
  assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(r, "error"), "data"), "path")),
                      "permit.message.stepId");
  json_decref(r);
  json_t *once = sign(C.owner_key, pause);
  r = ok("xgr.pause", json_pack("{s:s, s:O}", "pid", "1", "permit", once));
  json_decref(r);
  r = ok("xgr.resume", json_pack("{s:s, s:o}", "pid", "1", "permit",
                                 sign(C.owner_key, (xgr_permit_fields){.kind = XGR_PERMIT_CONTROL, .action = "resume",
                                                                       .session_id = 1})));
  json_decref(r);
  refused("reused control permit", "xgr.pause", json_pack("{s:s, s:O}", "pid", "1", "permit", once), "already used");
  stop_xgrd();
  start_xgrd();
  refused("reused after a restart", "xgr.pause", json_pack("{s:s, s:O}", "pid", "1", "permit", once), "already used");
  json_decref(once);

  /* ---- registries and reads ---- */
  /* another signer's registry writes land in its own namespace (issue 38, finding 8): the owner's
   * documents are unchanged and still what the owner's name resolves to */
  json_t *before = ok("xgr.getOrchestration", json_pack("{s:s, s:s}", "xrc729", REG, "owner", C.owner));
  r = ok("xgr.putOrchestration", json_pack("{s:s, s:O, s:o}", "xrc729", REG, "orchestration", orch, "permit",
                                           sign(C.other_key, (xgr_permit_fields){.kind = XGR_PERMIT_XDALA})));
  assert_string_equal(json_string_value(json_object_get(r, "owner")), C.other);
  assert_int_equal(json_integer_value(json_object_get(r, "version")), 1);
  json_decref(r);
  r = ok("xgr.putRule", json_pack("{s:s, s:O, s:o}", "address", "0x00000000000000000000000000000000000000a1", "rule",
                                  json_object_get(json_object_get(b, "rules"), "0x00000000000000000000000000000000000000a1"),
                                  "permit", sign(C.other_key, (xgr_permit_fields){.kind = XGR_PERMIT_XDALA})));
  assert_string_equal(json_string_value(json_object_get(r, "owner")), C.other);
  json_decref(r);
  json_t *after = ok("xgr.getOrchestration", json_pack("{s:s, s:s}", "xrc729", REG, "owner", C.owner));
  assert_string_equal(json_string_value(json_object_get(after, "owner")), C.owner);
  assert_string_equal(json_string_value(json_object_get(after, "hash")), json_string_value(json_object_get(before, "hash")));
  assert_int_equal(json_integer_value(json_object_get(after, "version")), json_integer_value(json_object_get(before, "version")));
  json_decref(before);
  json_decref(after);
  refused("another owner's session", "xgr.getSession",
          json_pack("{s:s, s:i, s:o}", "owner", C.owner, "rootPid", 1, "permit",
                    sign(C.other_key, (xgr_permit_fields){.kind = XGR_PERMIT_XDALA})),
          "not");
  refused("another owner's list", "xgr.listSessions",
          json_pack("{s:s, s:o}", "owner", C.owner, "permit",
                    sign(C.other_key, (xgr_permit_fields){.kind = XGR_PERMIT_XDALA})),
          "not");
  refused("no permit", "xgr.listSessions", json_pack("{s:s}", "owner", C.owner), "xdalaPermit");

  /* an executor listed in the orchestration document (XRC-729 §4.2) may start it; others may not */
  json_t *orch2 = json_deep_copy(orch);
  json_object_set_new(orch2, "executors", json_pack("[s]", C.other));
  r = ok("xgr.putOrchestration", json_pack("{s:s, s:o, s:o}", "xrc729", "0x00000000000000000000000000000000000000f2",
                                          "orchestration", orch2, "permit",
                                          sign(C.owner_key, (xgr_permit_fields){.kind = XGR_PERMIT_XDALA})));
  char hash2[67];
  snprintf(hash2, sizeof hash2, "%s", json_string_value(json_object_get(r, "hash")));
  json_decref(r);
  uint8_t h2[32];
  xgr_hex_decode(hash2, h2, 32);
  xgr_permit_fields ex = {.kind = XGR_PERMIT_SESSION, .ostc_id = "", .ostc_hash = h2, .session_id = 1, .max_total_gas = 1};
  r = ok("xgr.enqueue", json_pack("{s:s, s:s, s:{s:s}, s:o}", "xrc729", "0x00000000000000000000000000000000000000f2",
                                  "registryOwner", C.owner, "init", "stepId", "A", "permit", sign(C.other_key, ex)));
  assert_string_equal(json_string_value(json_object_get(r, "owner")), C.other);   /* the signer's session */
  json_decref(r);
  uint8_t third[32];
  memset(third, 0x53, 32);
  refused("start by a non-executor", "xgr.enqueue",
          json_pack("{s:s, s:s, s:{s:s}, s:o}", "xrc729", "0x00000000000000000000000000000000000000f2", "registryOwner",
                    C.owner, "init", "stepId", "A", "permit", sign(third, ex)),
          "nor one of its executors");

  /* the owner reads its own session; the public probes need no permit */
  r = ok("xgr.getSession", json_pack("{s:i, s:o}", "rootPid", 1, "permit",
                                     sign(C.owner_key, (xgr_permit_fields){.kind = XGR_PERMIT_XDALA})));
  assert_string_equal(json_string_value(json_object_get(json_object_get(r, "session"), "owner")), C.owner);
  assert_string_equal(json_string_value(json_object_get(json_object_get(r, "session"), "maxTotalGas")), "1000000");
  json_decref(r);
  r = ok("xgr_sessionAlive", json_pack("[s, s]", C.owner, "1"));
  assert_true(json_is_true(r));
  json_decref(r);
  /* last (W runs and session 1 ends): step mode from the permit alone (public reference §12):
   * session, runner and step are signed */
  r = ok("xgr_wakeUpProcess", json_pack("[{s:{s:i}, s:o}]", "payload", "n", 5, "permit",
                                        sign(C.owner_key, (xgr_permit_fields){.kind = XGR_PERMIT_CONTROL,
                                                                              .action = "wake", .session_id = 1,
                                                                              .step_id = "W"})));
  assert_string_equal(json_string_value(json_object_get(r, "mode")), "step");
  assert_int_equal(json_integer_value(json_object_get(r, "woken")), 1);
  assert_string_equal(json_string_value(json_object_get(r, "owner")), C.owner);
  json_decref(r);
  json_decref(b);
}

/* A GET with an optional Host header; the HTTP status. */
static long get(int port, const char *path, const char *host) {
  CURL *h = curl_easy_init();
  char url[96], hh[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
  struct curl_slist *hd = NULL;
  if (host) {
    snprintf(hh, sizeof hh, "Host: %s", host);
    hd = curl_slist_append(hd, hh);
  }
  xh_buf b = {0};
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, xh_buf_sink);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
  long st = 0;
  if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
  curl_slist_free_all(hd);
  curl_easy_cleanup(h);
  free(b.p);
  return st;
}

/* The Host header (DNS rebinding), /metrics on its own listener, xgr_getCoreAddrs. */
static void test_http_guards(void **state) {
  (void)state;
  char logf[200], line[512];
  snprintf(logf, sizeof logf, "%s/xgrd.log", C.dir);
  int mport = 0;
  FILE *f = fopen(logf, "r");
  assert_non_null(f);
  while (fgets(line, sizeof line, f)) {
    const char *p = strstr(line, "msg=\"metrics listening\"");
    if (p && (p = strstr(p, "port="))) mport = atoi(p + 5);
  }
  fclose(f);
  assert_true(mport > 0);
  char good[64], bad[64];
  snprintf(good, sizeof good, "localhost:%d", C.port);
  snprintf(bad, sizeof bad, "rebind.example:%d", C.port);
  assert_int_equal(get(C.port, "/healthz", NULL), 200);
  assert_int_equal(get(C.port, "/healthz", good), 200);
  assert_int_equal(get(C.port, "/healthz", bad), 403);
  snprintf(bad, sizeof bad, "127.0.0.1:%d", C.port + 1);
  assert_int_equal(get(C.port, "/healthz", bad), 403);
  assert_int_equal(get(C.port, "/metrics", NULL), 404);   /* it lives on --metrics-listen */
  assert_int_equal(get(mport, "/metrics", NULL), 200);
  assert_int_equal(get(mport, "/", NULL), 404);
  snprintf(bad, sizeof bad, "rebind.example:%d", mport);
  assert_int_equal(get(mport, "/metrics", bad), 403);
  json_t *r = ok("xgr_getCoreAddrs", json_object());
  assert_string_equal(json_string_value(json_object_get(r, "chainId")), "0x7a69");
  assert_string_equal(json_string_value(json_object_get(r, "precompile")), CONTRACT);
  assert_string_equal(json_string_value(json_object_get(r, "grants")), "");
  json_decref(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_refusals), cmocka_unit_test(test_http_guards)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
