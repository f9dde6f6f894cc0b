/* test_rpc_fuzz.c — a bounded fuzz test of xgrd's JSON-RPC surface (issue 14), end to end.
 *
 * Starts the real daemon (XGRD) on an ephemeral loopback port with a SQLite store and sends it,
 * for XGR_RPC_FUZZ_SECONDS (default 8) or at most XGR_RPC_FUZZ_MAX requests, generated hostile
 * input from a seeded generator (XGR_RPC_FUZZ_SEED, default fixed, so a failure reproduces):
 * every registered method in both naming styles and made-up names; parameters of the expected
 * shape with mutated values, wrong types everywhere, deep nesting (up to 3x the limit), huge and
 * odd numbers, NUL and invalid UTF-8 in strings, raw garbage bodies, batches (also of hundreds of
 * requests and of notifications) and bodies over the cap. Every answer must arrive within 5 s and
 * be valid JSON-RPC 2.0 (an object or a batch array of objects with "jsonrpc":"2.0", an id, and
 * exactly one of result / error{code, message}), or one of the documented HTTP refusals (204,
 * 413, 415). At the end xgrd must still answer, stop with status 0 on SIGTERM, and its log must
 * hold no sanitizer report — the same test runs in the ASan build (make asan) and in the fuzz
 * build of `make test` (suite fuzz), where xgrd is built with AddressSanitizer. */
#include <arpa/inet.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <sqlite3.h>

#include "harness.h"
#include "xgr/value.h"

#define OWNER "0x00000000000000000000000000000000000000c1"
#define MAX_BODY 65536

static xh_daemon g_d;   /* the daemon under test */
static uint64_t g_rng;
static long g_results, g_errors;   /* answers seen */

static uint64_t rnd(void) {   /* xorshift64* */
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  return g_rng * 0x2545F4914F6CDD1Dull;
}
static unsigned pick(unsigned n) { return (unsigned)(rnd() % n); }

/* ---- a growable text -------------------------------------------------------------------------- */

typedef struct txt {
  char *p;
  size_t n, cap;
} txt;

static void put(txt *t, const char *s, size_t n) {
  if (t->n + n + 1 > t->cap) {
    t->cap = (t->n + n + 1) * 2;
    t->p = realloc(t->p, t->cap);
    assert_non_null(t->p);
  }
  memcpy(t->p + t->n, s, n);
  t->n += n;
  t->p[t->n] = 0;
}
static void puts_(txt *t, const char *s) { put(t, s, strlen(s)); }
static void putf(txt *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(txt *t, const char *fmt, ...) {
  char b[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  put(t, b, n < 0 ? 0 : (size_t)n < sizeof b ? (size_t)n : sizeof b - 1);
}

/* ---- generators --------------------------------------------------------------------------------- */

static const char *const methods[] = {
  "enqueue", "validateDataTransfer", "getNextProcessId", "kill", "pause", "resume", "control", "wakeUpProcess",
  "wake", "sessionAlive", "stepExecuted", "getSession", "putOrchestration", "getOrchestration", "putRule", "getRule",
  "listSessions"};
static const char *const keys[] = {"owner", "from", "rootPid", "sessionId", "pid", "processId", "init", "stepId",
                                   "payload", "xrc729", "registry", "orchestration", "ostcId", "ostcHash", "rule",
                                   "address", "version", "limit", "view", "iter", "step", "action", "runner",
                                   "beforeRootPid", "parentPid", "label"};

static void gen_value(txt *t, int depth);

static void gen_string(txt *t) {
  static const char *const pieces[] = {"a", OWNER, "0x", "local", "S", "W", "\\u0000", "\\ud800", "\\\"", "\\\\",
                                       "${addr:S}", "[x]", "\\n", "é", "/", ":", "1:1", "18446744073709551616"};
  puts_(t, "\"");
  unsigned n = pick(4);
  for (unsigned i = 0; i < n; i++) puts_(t, pieces[pick(sizeof pieces / sizeof pieces[0])]);
  if (pick(16) == 0) put(t, "\xff\xfe", 2);         /* invalid UTF-8 */
  if (pick(16) == 0) put(t, "\xc3\x28", 2);
  if (pick(24) == 0) put(t, "x\0y", 3);            /* a raw NUL */
  if (pick(32) == 0)
    for (int i = 0; i < 300; i++) puts_(t, "long");
  puts_(t, "\"");
}

static void gen_number(txt *t) {
  switch (pick(9)) {
    case 0: puts_(t, "0"); break;
    case 1: putf(t, "%u", pick(100) + 1); break;
    case 2: puts_(t, "18446744073709551615"); break;
    case 3: puts_(t, "18446744073709551616"); break;
    case 4: puts_(t, "-9223372036854775809"); break;
    case 5: puts_(t, "1e400"); break;
    case 6: puts_(t, "-0.0"); break;
    case 7: {
      unsigned n = 20 + pick(400);
      for (unsigned i = 0; i < n; i++) putf(t, "%u", i == 0 ? 1 + pick(9) : pick(10));
      break;
    }
    default: puts_(t, "115792089237316195423570985008687907853269984665640564039457584007913129639936"); break;
  }
}

static void gen_deep(txt *t) {
  unsigned n = 100 + pick(300);   /* around the limit of 128 levels, and well beyond */
  char *kinds = malloc(n);
  for (unsigned i = 0; i < n; i++) {
    kinds[i] = pick(2) ? '[' : '{';
    puts_(t, kinds[i] == '[' ? "[" : "{\"a\":");
  }
  puts_(t, "1");
  bool broken = pick(8) == 0;   /* sometimes mismatched: garbage too */
  for (unsigned i = n; i-- > 0;) puts_(t, broken || kinds[i] == '[' ? "]" : "}");
  free(kinds);
}

static void gen_value(txt *t, int depth) {
  unsigned k = depth > 6 ? pick(5) : pick(9);
  switch (k) {
    case 0: puts_(t, "null"); break;
    case 1: puts_(t, pick(2) ? "true" : "false"); break;
    case 2: gen_number(t); break;
    case 3: case 4: gen_string(t); break;
    case 5: case 6: {
      puts_(t, "{");
      unsigned n = pick(5);
      for (unsigned i = 0; i < n; i++) {
        if (i) puts_(t, ",");
        if (pick(4)) putf(t, "\"%s\":", keys[pick(sizeof keys / sizeof keys[0])]);
        else gen_string(t), puts_(t, ":");
        gen_value(t, depth + 1);
      }
      puts_(t, "}");
      break;
    }
    case 7: {
      puts_(t, "[");
      unsigned n = pick(4);
      for (unsigned i = 0; i < n; i++) {
        if (i) puts_(t, ",");
        gen_value(t, depth + 1);
      }
      puts_(t, "]");
      break;
    }
    default: gen_deep(t); break;
  }
}

/* Parameters of roughly the right shape for the method, with mutations. */
static void gen_params(txt *t) {
  switch (pick(6)) {
    case 0: gen_value(t, 0); return;
    case 1: puts_(t, "[]"); return;
    default: break;
  }
  bool arr = pick(3) == 0;
  if (arr) puts_(t, "[");
  puts_(t, "{");
  unsigned n = 1 + pick(6);
  for (unsigned i = 0; i < n; i++) {
    if (i) puts_(t, ",");
    const char *k = keys[pick(sizeof keys / sizeof keys[0])];
    putf(t, "\"%s\":", k);
    if (!strcmp(k, "owner") || !strcmp(k, "from")) puts_(t, pick(3) ? "\"" OWNER "\"" : "\"0xZZ\"");
    else if (!strcmp(k, "rule") && pick(2))
      puts_(t, "{\"payload\":{\"x\":{\"type\":\"uint64\",\"default\":18446744073709551615}},\"rules\":[\"[x] > 0\"],"
               "\"onValid\":{\"payload\":{\"y\":\"[x]\"}},\"onInvalid\":{}}");
    else if (!strcmp(k, "orchestration") && pick(2))
      puts_(t, "{\"id\":\"w\",\"structure\":{\"S\":{\"rule\":\"S\",\"onValid\":{\"spawns\":[\"S\"]}}}}");
    else if (!strcmp(k, "address") && pick(2)) puts_(t, "\"S\"");
    else if (!strcmp(k, "init") && pick(2)) puts_(t, "{\"stepId\":\"S\",\"payload\":{\"x\":5}}");
    else gen_value(t, 1);
  }
  puts_(t, "}");
  if (arr) puts_(t, pick(4) ? "]" : ",1]");
}

static void gen_request(txt *t) {
  puts_(t, "{");
  if (pick(12)) puts_(t, "\"jsonrpc\":\"2.0\",");
  else puts_(t, "\"jsonrpc\":\"1.0\",");
  switch (pick(6)) {
    case 0: break;   /* a notification */
    case 1: puts_(t, "\"id\":\"x\","); break;
    case 2: puts_(t, "\"id\":{},"); break;
    default: putf(t, "\"id\":%u,", pick(1000)); break;
  }
  unsigned m = pick(20);
  if (m < 17) putf(t, "\"method\":\"xgr%c%s\"", pick(2) ? '.' : '_', methods[m]);
  else if (m == 17) puts_(t, "\"method\":5");
  else {
    puts_(t, "\"method\":");
    gen_string(t);
  }
  if (pick(8)) {
    puts_(t, ",\"params\":");
    gen_params(t);
  }
  puts_(t, "}");
}

/* ---- the daemon ----------------------------------------------------------------------------------- */

static void start_daemon(void) {
  xh_init(&g_d, "test-rpcfuzz");
  char mb[32];
  snprintf(mb, sizeof mb, "%d", MAX_BODY);
  xh_start(&g_d, (const char *[]){"--auth", "none", "--store", g_d.store, "--workers", "2", "--log-level", "warn",
                                  "--max-body", mb, "--first-step-timeout", "200", "--sync", "normal",
                                  "--max-session-processes", "200", NULL});
}

static long post(CURL *h, const char *body, size_t len, xh_buf *out, double *secs) {
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/", g_d.port);
  struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
  hd = curl_slist_append(hd, "Expect:");
  curl_easy_reset(h);
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, xh_buf_sink);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 5L);   /* no hang over 5 s */
  double t0 = xh_now();
  CURLcode cc = curl_easy_perform(h);
  *secs = xh_now() - t0;
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(hd);
  return cc == CURLE_OK ? status : -(long)cc;
}

/* One JSON-RPC 2.0 response object; false with *why. */
static bool valid_response(xgr_value r, const char **why) {
  xgr_value v;
  if (r.kind != XGR_VMAP) return *why = "not an object", false;
  if (!xgr_map_get_str(r, "jsonrpc", 7, &v) || v.kind != XGR_VSTRING || strcmp(xgr_value_str(v, NULL), "2.0"))
    return *why = "no \"jsonrpc\":\"2.0\"", false;
  if (!xgr_map_get_str(r, "id", 2, &v)) return *why = "no id", false;
  if (v.kind != XGR_VNULL && v.kind != XGR_VSTRING && v.kind != XGR_VINT && v.kind != XGR_VUINT &&
      v.kind != XGR_VDOUBLE)
    return *why = "id of a wrong type", false;
  bool res = xgr_map_get_str(r, "result", 6, &v);
  xgr_value e;
  bool err = xgr_map_get_str(r, "error", 5, &e);
  if (res == err) return *why = "not exactly one of result and error", false;
  if (res) g_results++;
  else g_errors++;
  if (err) {
    xgr_value c, m;
    if (e.kind != XGR_VMAP || !xgr_map_get_str(e, "code", 4, &c) || c.kind != XGR_VINT ||
        !xgr_map_get_str(e, "message", 7, &m) || m.kind != XGR_VSTRING)
      return *why = "error without an integer code and a message", false;
  }
  return true;
}

static void check_answer(const char *body, long st, const xh_buf *out, double secs) {
  if (secs > 5.0) fail_msg("answer took %.1f s for %.200s", secs, body);
  if (st < 0) fail_msg("no answer (curl error %ld) for %.300s", -st, body);
  if (st == 204 || st == 413) return;
  if (st != 200) fail_msg("HTTP %ld for %.300s", st, body);
  xgr_value v;
  xgr_error e;
  if (!out->p || xgr_value_from_json_text(out->p, out->n, 0, &v, &e))
    fail_msg("answer is not JSON (%s): %.300s\nfor %.300s", out->p ? e.message : "empty", out->p ? out->p : "", body);
  const char *why = NULL;
  if (v.kind == XGR_VLIST) {
    if (xgr_list_size(v) == 0) fail_msg("an empty batch answer");
    for (size_t i = 0; i < xgr_list_size(v); i++)
      if (!valid_response(xgr_list_get(v, i), &why)) fail_msg("batch answer %zu: %s: %.300s", i, why, out->p);
  } else if (!valid_response(v, &why)) {
    fail_msg("%s: %.300s\nfor %.300s", why, out->p, body);
  }
  xgr_value_release(v);
}

/* Nothing accepted may become unreadable later (issue 38, finding 7): after the fuzzing, every
 * text value in every table of the store is valid UTF-8 (a number beyond int64 taken as a name
 * was stored as bytes that are not, and the session could no longer be read or listed). */
static void check_store_text(const char *path) {
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) fail_msg("cannot open %s", path);
  sqlite3_stmt *tables;
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table'", -1, &tables, NULL),
                   SQLITE_OK);
  long values = 0;
  while (sqlite3_step(tables) == SQLITE_ROW) {
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT * FROM \"%s\"", (const char *)sqlite3_column_text(tables, 0));
    sqlite3_stmt *rows;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &rows, NULL), SQLITE_OK);
    while (sqlite3_step(rows) == SQLITE_ROW) {
      for (int c = 0; c < sqlite3_column_count(rows); c++) {
        if (sqlite3_column_type(rows, c) != SQLITE_TEXT) continue;
        const char *t = (const char *)sqlite3_column_text(rows, c);
        int n = sqlite3_column_bytes(rows, c);
        values++;
        if (!xgr_utf8_valid(t, (size_t)n))
          fail_msg("%s.%s holds text that is not UTF-8: %.80s", (const char *)sqlite3_column_text(tables, 0),
                   sqlite3_column_name(rows, c), t);
      }
    }
    sqlite3_finalize(rows);
  }
  sqlite3_finalize(tables);
  sqlite3_close(db);
  print_message("store: %ld text values, all UTF-8\n", values);
  assert_true(values > 0);
}

static void test_rpc_fuzz(void **state) {
  (void)state;
  const char *sv = getenv("XGR_RPC_FUZZ_SECONDS"), *mv = getenv("XGR_RPC_FUZZ_MAX"), *seed = getenv("XGR_RPC_FUZZ_SEED");
  double secs = sv ? atof(sv) : 8;
  long max = mv ? atol(mv) : 40000;
  g_rng = seed ? strtoull(seed, NULL, 10) : 0x9E3779B97F4A7C15ull;
  if (!g_rng) g_rng = 1;
  start_daemon();
  /* something to act on: a rule, an orchestration, a session */
  CURL *h = curl_easy_init();
  xh_buf out = {0};
  double dt;
  const char *setup[] = {
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"xgr_putRule\",\"params\":[{\"address\":\"S\",\"rule\":{\"payload\":{},"
    "\"rules\":[\"true\"],\"onValid\":{\"waitSec\":3600},\"onInvalid\":{}}}]}",
    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"xgr.putOrchestration\",\"params\":{\"orchestration\":{\"id\":\"w\","
    "\"structure\":{\"S\":{\"rule\":\"S\",\"onValid\":{\"spawns\":[\"S\"]}}}}}}",
    "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"xgr.enqueue\",\"params\":{\"owner\":\"" OWNER "\",\"rootPid\":1}}"};
  for (size_t i = 0; i < 3; i++) {
    long st = post(h, setup[i], strlen(setup[i]), &out, &dt);
    check_answer(setup[i], st, &out, dt);
    free(out.p);
    out = (xh_buf){0};
  }
  double t0 = xh_now();
  long n = 0, nbatch = 0, nbig = 0, ngarbage = 0;
  while (n < max && xh_now() - t0 < secs) {
    txt t = {0};
    unsigned kind = pick(20);
    if (kind == 0) {   /* raw garbage */
      unsigned len = pick(200);
      for (unsigned i = 0; i < len; i++) {
        char c = (char)pick(256);
        put(&t, &c, 1);
      }
      if (!t.p) puts_(&t, "");
      ngarbage++;
    } else if (kind == 1) {   /* over the body cap */
      puts_(&t, "[");
      while (t.n < MAX_BODY + 10) puts_(&t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"xgr_sessionAlive\"},");
      puts_(&t, "1]");
      nbig++;
    } else if (kind < 5) {   /* a batch: small, or hundreds */
      unsigned k = pick(4) ? 1 + pick(8) : 100 + pick(400);
      puts_(&t, "[");
      for (unsigned i = 0; i < k && t.n < MAX_BODY - 2048; i++) {
        if (i) puts_(&t, ",");
        gen_request(&t);
      }
      puts_(&t, "]");
      nbatch++;
    } else {
      gen_request(&t);
    }
    long st = post(h, t.p, t.n, &out, &dt);
    check_answer(t.p, st, &out, dt);
    free(out.p);
    out = (xh_buf){0};
    free(t.p);
    n++;
  }
  print_message("%ld requests (%ld batches, %ld over the cap, %ld garbage) in %.1f s: %ld results, %ld errors\n", n,
                nbatch, nbig, ngarbage, xh_now() - t0, g_results, g_errors);
  assert_true(g_results > 0 && g_errors > 0);
  /* still serving, stops cleanly, no sanitizer report */
  long st = post(h, setup[2], strlen(setup[2]), &out, &dt);
  check_answer(setup[2], st, &out, dt);
  free(out.p);
  curl_easy_cleanup(h);
  int status = xh_stop(&g_d, SIGTERM);
  char buf[1 << 16];
  xh_read_log(&g_d, buf, sizeof buf);
  if (strstr(buf, "AddressSanitizer") || strstr(buf, "runtime error:") || strstr(buf, "LeakSanitizer"))
    fail_msg("sanitizer report in %s:\n%.4000s", g_d.log, strstr(buf, "Sanitizer") ? strstr(buf, "Sanitizer") : buf);
  if (status != 0) fail_msg("xgrd stopped with status %d (see %s)", status, g_d.log);
  check_store_text(strncmp(g_d.store, "sqlite:", 7) ? g_d.store : g_d.store + 7);
  xh_remove(&g_d);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_ALL);
  const struct CMUnitTest tests[] = {cmocka_unit_test_teardown(test_rpc_fuzz, xh_teardown)};
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
