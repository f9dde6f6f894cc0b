/* test_rpc_server.c — the JSON-RPC HTTP layer from the outside: a server on an ephemeral loopback
 * port with two test methods, driven with real HTTP requests (libcurl) for every protocol path:
 * single calls, batches, notifications, bad JSON, invalid requests, unknown methods, invalid
 * params with data.path, wrong content type, oversize bodies, unknown paths and HTTP methods,
 * metrics, health and readiness, a slow client that never finishes its headers, the loopback
 * rule of --auth none, and a stop while calls keep deferring their answers (no call may suspend
 * its connection after the stop counted them: libmicrohttpd aborts on a suspended connection). */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "../daemon/harness.h"
#include "xgr/rpc.h"

static xgr_rpc_server *srv;
static int port;   /* the server's bound port */
static bool ready_flag = true;

static int m_echo(void *ctx, const xgr_rpc_caller *c, const json_t *params, json_t **result, xgr_error *err) {
  (void)ctx;
  (void)c;
  (void)err;
  *result = params ? json_deep_copy(params) : json_null();
  return 0;
}

static int m_need_name(void *ctx, const xgr_rpc_caller *c, const json_t *params, json_t **result, xgr_error *err) {
  (void)ctx;
  (void)c;
  const char *name;
  int rc = xgr_rpc_param_string(params, "name", true, &name, err);
  if (rc) return rc;
  *result = json_pack("{s:s}", "hello", name);
  return 0;
}

static bool is_ready(void *ctx) {
  (void)ctx;
  return ready_flag;
}

typedef struct resp { long status; char *body; size_t len; } resp;

static resp http(const char *method, const char *path, const char *ctype, const char *body, size_t len) {
  resp r = {0};
  r.status = xh_http_at(port, method, path, ctype, body, len, 10, &r.body);
  if (r.status < 0) r.status = 0;   /* no answer */
  r.len = strlen(r.body);
  return r;
}

static json_t *rpc(const char *body, long *status) {
  resp r = http("POST", "/", "application/json", body, strlen(body));
  *status = r.status;
  json_t *j = r.body ? json_loads(r.body, 0, NULL) : NULL;
  free(r.body);
  return j;
}

static int setup(void **st) {
  (void)st;
  xgr_rpc_config cfg = {.listen = "127.0.0.1:0", .auth_none = true, .max_body = 4096, .timeout_s = 1,
                        .ready = is_ready};
  xgr_error e;
  srv = xgr_rpc_server_new(&cfg, &e);
  assert_non_null(srv);
  xgr_rpc_register(srv, "echo", m_echo, NULL);
  xgr_rpc_register(srv, "needName", m_need_name, NULL);
  assert_int_equal(xgr_rpc_start(srv, &e), 0);
  port = xgr_rpc_port(srv);
  return 0;
}

static int teardown(void **st) {
  (void)st;
  xgr_rpc_server_free(srv);
  return 0;
}

static void test_single_and_notification(void **st) {
  (void)st;
  long status;
  json_t *j = rpc("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":{\"a\":1},\"id\":7}", &status);
  assert_int_equal(status, 200);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "result"), "a")), 1);
  assert_int_equal(json_integer_value(json_object_get(j, "id")), 7);
  json_decref(j);
  resp r = http("POST", "/", "application/json", "{\"jsonrpc\":\"2.0\",\"method\":\"echo\"}", 33);
  assert_int_equal(r.status, 204);
  assert_int_equal(r.len, 0);
  free(r.body);
}

static void test_batch(void **st) {
  (void)st;
  long status;
  json_t *j = rpc("[{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[1],\"id\":1},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"nope\",\"id\":\"x\"},"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"echo\"},"
                  "5]", &status);
  assert_int_equal(status, 200);
  assert_true(json_is_array(j));
  assert_int_equal(json_array_size(j), 3);   /* the notification has no response */
  assert_int_equal(json_integer_value(json_object_get(json_object_get(json_array_get(j, 1), "error"), "code")), -32601);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(json_array_get(j, 2), "error"), "code")), -32600);
  json_decref(j);
  j = rpc("[]", &status);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "error"), "code")), -32600);
  json_decref(j);
}

static void test_errors(void **st) {
  (void)st;
  long status;
  json_t *j = rpc("{\"jsonrpc\":\"2.0\",\"method\":", &status);
  assert_int_equal(status, 200);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "error"), "code")), -32700);
  assert_true(json_is_null(json_object_get(j, "id")));
  json_decref(j);
  j = rpc("{\"jsonrpc\":\"1.0\",\"method\":\"echo\",\"id\":1}", &status);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "error"), "code")), -32600);
  json_decref(j);
  j = rpc("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":3,\"id\":1}", &status);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "error"), "code")), -32600);
  json_decref(j);
  j = rpc("{\"jsonrpc\":\"2.0\",\"method\":\"needName\",\"params\":{\"name\":5},\"id\":2}", &status);
  json_t *err = json_object_get(j, "error");
  assert_int_equal(json_integer_value(json_object_get(err, "code")), -32602);
  assert_string_equal(json_string_value(json_object_get(json_object_get(err, "data"), "path")), "name");
  json_decref(j);
  j = rpc("{\"jsonrpc\":\"2.0\",\"method\":\"needName\",\"params\":{},\"id\":3}", &status);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "error"), "code")), -32602);
  json_decref(j);
}

static void test_http_refusals(void **st) {
  (void)st;
  resp r = http("POST", "/", "text/plain", "{}", 2);
  assert_int_equal(r.status, 415);
  free(r.body);
  r = http("POST", "/", NULL, "{}", 2);
  assert_int_equal(r.status, 415);
  free(r.body);
  char *big = malloc(10000);
  memset(big, ' ', 10000);
  big[0] = '[';
  big[9999] = ']';
  r = http("POST", "/", "application/json", big, 10000);
  assert_int_equal(r.status, 413);
  free(r.body);
  free(big);
  r = http("POST", "/nope", "application/json", "{}", 2);
  assert_int_equal(r.status, 404);
  free(r.body);
  r = http("GET", "/", NULL, NULL, 0);
  assert_int_equal(r.status, 405);
  free(r.body);
  r = http("PUT", "/", "application/json", "{}", 2);
  assert_int_equal(r.status, 405);
  free(r.body);
  r = http("POST", "/rpc", "application/json; charset=utf-8", "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":1}", 40);
  assert_int_equal(r.status, 200);
  free(r.body);
}

static void test_metrics_health_ready(void **st) {
  (void)st;
  resp r = http("GET", "/metrics", NULL, NULL, 0);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "# TYPE xgr_http_requests_total counter"));
  assert_non_null(strstr(r.body, "xgr_http_requests_total{method=\"echo\",http=\"200\",code=\"0\"}"));
  assert_non_null(strstr(r.body, "xgr_http_request_seconds_bucket{le=\"+Inf\"}"));
  free(r.body);
  r = http("GET", "/healthz", NULL, NULL, 0);
  assert_int_equal(r.status, 200);
  free(r.body);
  r = http("GET", "/readyz", NULL, NULL, 0);
  assert_int_equal(r.status, 200);
  free(r.body);
  ready_flag = false;
  r = http("GET", "/readyz", NULL, NULL, 0);
  assert_int_equal(r.status, 503);
  free(r.body);
  ready_flag = true;
}

/* A client that sends half a request and stalls is dropped after the timeout; others are served. */
static void test_slow_client(void **st) {
  (void)st;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(xgr_rpc_port(srv))};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  const char *half = "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: appl";
  assert_true(write(fd, half, strlen(half)) > 0);
  long status;
  json_t *j = rpc("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":1}", &status);
  assert_int_equal(status, 200);
  json_decref(j);
  struct timeval tv = {.tv_sec = 5};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[64];
  ssize_t n = read(fd, buf, sizeof buf);   /* the server closes it after its 1 s timeout */
  assert_true(n <= 0);
  close(fd);
}

static void test_auth_none_needs_loopback(void **st) {
  (void)st;
  xgr_rpc_config cfg = {.listen = "0.0.0.0:0", .auth_none = true};
  xgr_error e;
  assert_null(xgr_rpc_server_new(&cfg, &e));
  assert_non_null(strstr(e.message, "loopback"));
  cfg.listen = "not-an-address";
  assert_null(xgr_rpc_server_new(&cfg, &e));
  assert_string_equal(e.path, "listen");
}

/* The parameter helpers of xgr/rpc.h (src/rpc/params.c): xgr_rpc_param_uint shares the service's
 * one unsigned-integer parser, so a decimal string beyond 2^64-1 is refused at its key, not
 * clamped (issue 13). */
static void test_param_uint_range(void **st) {
  (void)st;
  xgr_error e;
  uint64_t v = 7;
  json_t *p = json_pack("{s:s, s:s, s:I, s:s, s:I, s:s}", "max", "18446744073709551615", "over", "18446744073709551616",
                        "int", (json_int_t)42, "sign", "+1", "neg", (json_int_t)-1, "huge", "99999999999999999999999");
  assert_int_equal(xgr_rpc_param_uint(p, "max", true, &v, &e), 0);
  assert_true(v == UINT64_MAX);
  assert_int_equal(xgr_rpc_param_uint(p, "int", true, &v, &e), 0);
  assert_true(v == 42);
  const char *bad[] = {"over", "sign", "neg", "huge"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    v = 7;
    xgr_error_clear(&e);
    assert_int_equal(xgr_rpc_param_uint(p, bad[i], true, &v, &e), XGR_ESCHEMA);
    assert_string_equal(e.path, bad[i]);
    assert_true(v == 7);   /* nothing written on refusal */
  }
  uint64_t absent = 5;
  assert_int_equal(xgr_rpc_param_uint(p, "missing", false, &absent, &e), 0);
  assert_true(absent == 5);
  assert_int_equal(xgr_rpc_param_uint(p, "missing", true, &absent, &e), XGR_ESCHEMA);
  assert_string_equal(e.path, "missing");
  json_decref(p);
}

/* ---- a stop while calls defer their answers ------------------------------------------------------- */

static int finish_later(void *ctx, json_t **result, xgr_error *err) {
  (void)err;
  free(ctx);
  *result = json_string("done");
  return 0;
}

static void *ready_later(void *arg) {
  struct timespec ts = {0, 1000000 + (rand() % 3) * 1000000};   /* a "commit" 1-3 ms later */
  nanosleep(&ts, NULL);
  xgr_rpc_defer_ready(arg);
  return NULL;
}

/* Defers its answer (as an enqueue waiting for its commit does) and makes it ready from a thread. */
static int m_defer_later(void *ctx, const xgr_rpc_caller *c, const json_t *params, json_t **result, xgr_error *err) {
  (void)ctx;
  (void)params;
  (void)result;
  (void)err;
  if (!c->defer) return XGR_EINVAL;
  xgr_rpc_defer_begin(c->defer, finish_later, malloc(1));
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  pthread_create(&t, &a, ready_later, c->defer);
  pthread_attr_destroy(&a);
  return XGR_RPC_DEFERRED;
}

typedef struct stop_client {
  int port;
  atomic_bool *stop;
  int answered, refused, gone, wrong;
} stop_client;

static void *stop_client_run(void *arg) {
  stop_client *sc = arg;
  static const char body[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"deferLater\"}";
  for (int i = 0; i < 2000 && !atomic_load(sc->stop); i++) {
    char *out = NULL;
    long st = xh_http_at(sc->port, "POST", "/", "application/json", body, strlen(body), 10, &out);
    if (st == 200 && out && strstr(out, "\"result\":\"done\"")) sc->answered++;
    else if (st == 503) sc->refused++;
    else if (st <= 0) sc->gone++;
    else sc->wrong++;
    free(out);
  }
  return NULL;
}

static void test_stop_while_deferring(void **st) {
  (void)st;
  int answered = 0, refused = 0;
  for (int round = 0; round < 25; round++) {
    xgr_rpc_config cfg = {.listen = "127.0.0.1:0", .auth_none = true, .timeout_s = 2, .threads = 4};
    xgr_error e;
    xgr_rpc_server *s = xgr_rpc_server_new(&cfg, &e);
    assert_non_null(s);
    xgr_rpc_register(s, "deferLater", m_defer_later, NULL);
    assert_int_equal(xgr_rpc_start(s, &e), 0);
    atomic_bool stop = false;
    stop_client cl[6];
    pthread_t t[6];
    for (int i = 0; i < 6; i++) {
      cl[i] = (stop_client){.port = xgr_rpc_port(s), .stop = &stop};
      pthread_create(&t[i], NULL, stop_client_run, &cl[i]);
    }
    struct timespec ts = {0, 20000000 + round * 1000000};
    nanosleep(&ts, NULL);
    xgr_rpc_stop(s);   /* before the fix: now and then "MHD_stop_daemon() called while we have suspended connections" */
    atomic_store(&stop, true);
    for (int i = 0; i < 6; i++) {
      pthread_join(t[i], NULL);
      assert_int_equal(cl[i].wrong, 0);
      answered += cl[i].answered;
      refused += cl[i].refused;
    }
    xgr_rpc_server_free(s);
  }
  print_message("stop while deferring: %d answered, %d refused 503 while stopping\n", answered, refused);
  assert_true(answered > 0);
}

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_single_and_notification),
    cmocka_unit_test(test_batch),
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_http_refusals),
    cmocka_unit_test(test_metrics_health_ready),
    cmocka_unit_test(test_slow_client),
    cmocka_unit_test(test_auth_none_needs_loopback),
    cmocka_unit_test(test_param_uint_range),
    cmocka_unit_test(test_stop_while_deferring),
  };
  int rc = cmocka_run_group_tests(tests, setup, teardown);
  curl_global_cleanup();
  return rc;
}
