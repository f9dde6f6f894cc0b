/* test_rule_http.c — API calls of the step engine against a real HTTP server on 127.0.0.1
 * (server.c): JSON responses, nested paths, timeouts, 500s, invalid JSON, oversize bodies,
 * transport errors, POST bodies and headers, each checking the per-alias defaults of guide §5.5.3
 * and soft-invalid; then the project's price examples (examples/bundles/price_feed.json and
 * price_quorum.json: their rules, and the quorum's 2-of-3 join on the deterministic driver) with
 * the api map pointing the three stand-in price sources at the local server. With the argument
 * `shared` (the test test_rule_http_shared) it runs the public ApiPriceFeed and ApiPriceFeedQuorum
 * examples of ../shared the same way instead, and skips when that folder is absent. The server is
 * on loopback, which the outbound policy refuses by default: the tests allow it explicitly
 * (`loopback`), and test_outbound_policy checks the refusals (issue 38, finding 5). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "../shared_dir.h"
#include "server.h"
#include "rule_util.h"
#include "xgr/bundle.h"
#include "xgr/driver.h"
#include "xgr/rule.h"

static test_server srv;
static char source_host[3][64], source_base[3][80];  /* https://alpha.prices.example -> srv.base + "/alpha", ... */
static xgr_api_map_entry maps[7];
static xgr_step_ctx ctx;
static xgr_http_exchange *ex;
static xgr_outbound_policy *allow_loopback;   /* --allow-outbound loopback */

static int setup(void **st) {
  (void)st;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  srv.alpha = srv.beta = srv.gamma = 100;
  if (test_server_start(&srv)) return -1;
  static const char *const sources[3] = {"alpha", "beta", "gamma"};
  maps[0] = (xgr_api_map_entry){"https://api.test", srv.base};
  for (int i = 0; i < 3; i++) {  /* the project's stand-in sources, as the demo maps them */
    snprintf(source_host[i], sizeof source_host[i], "https://%s.prices.example", sources[i]);
    snprintf(source_base[i], sizeof source_base[i], "%s/%s", srv.base, sources[i]);
    maps[1 + i] = (xgr_api_map_entry){source_host[i], source_base[i]};
  }
  maps[4] = (xgr_api_map_entry){"https://api.coinbase.com", srv.base};  /* the public examples' hosts */
  maps[5] = (xgr_api_map_entry){"https://www.bitstamp.net", srv.base};
  maps[6] = (xgr_api_map_entry){"https://api.coingecko.com", srv.base};
  ctx = (xgr_step_ctx){.owner = "0x1111111111111111111111111111111111111111", .session_id = 7, .pid = "7:1",
                       .step_id = "s", .api_map = maps, .napi_map = 7};
  allow_loopback = xgr_outbound_policy_new();
  if (xgr_outbound_policy_allow(allow_loopback, "loopback", NULL)) return -1;
  ctx.outbound = allow_loopback;
  ex = xgr_http_exchange_new();
  return ex ? 0 : -1;
}

/* The probe rule outlives every result taken from it (results may borrow its pinned
 * constants; xgr_rule_free's contract); freed in teardown. */
static xgr_rule *probe;

static int teardown(void **st) {
  (void)st;
  xgr_http_exchange_free(ex);
  xgr_outbound_policy_free(allow_loopback);
  xgr_rule_free(probe);
  test_server_stop(&srv);
  curl_global_cleanup();
  return 0;
}

static const char probe_rule[] =
    "{\"payload\":{\"Path\":{\"type\":\"string\",\"default\":\"json\"},\"Ms\":{\"type\":\"int64\",\"default\":0}},"
    "\"apiCalls\":[{\"name\":\"probe\",\"method\":\"GET\",\"urlTemplate\":\"https://api.test/[Path]?ms=[Ms]\","
    "\"contentType\":\"json\",\"timeoutMs\":400,\"headers\":{\"Accept\":\"application/json\"},"
    "\"extractMap\":{"
    "\"Ok\":{\"type\":\"bool\",\"expr\":\"resp.ok\",\"default\":false},"
    "\"Amount\":{\"type\":\"double\",\"value\":\"double(resp.data.amount)\",\"default\":-1},"
    "\"Deep\":{\"type\":\"int64\",\"expr\":\"int(resp.data.nested.deep[2].x)\"},"
    "\"NotOk\":{\"type\":\"string\",\"expr\":\"string(resp.notok)\",\"default\":\"not existing\"},"
    "\"Nope\":{\"type\":\"string\",\"expr\":\"resp.data.nope\",\"default\":\"dflt\"},"
    "\"BadCast\":{\"type\":\"address\",\"expr\":\"resp.notok\",\"default\":\"0x0000000000000000000000000000000000000001\"},"
    "\"OkApi\":{\"type\":\"bool\",\"value\":\"[Amount] > 0.0\",\"default\":false}"
    "}}],"
    "\"rules\":[\"[Ok] == true\"],"
    "\"onValid\":{\"payload\":{\"memo\":\"ok\",\"deep\":\"[Deep]\"}},"
    "\"onInvalid\":{\"payload\":{\"memo\":\"inc\",\"deep\":\"[Deep]\"}}}";

static void run_probe(const char *pl, xgr_step_result *res) {
  if (!probe) probe = rt_load(probe_rule);
  xgr_value p = rt_json(pl);
  xgr_step_run(probe, p, &ctx, ex, res);
  xgr_value_release(p);
}

/* All aliases defaulted after a failed call; Deep (no default) soft-invalid. */
static void assert_all_defaulted(const xgr_step_result *res) {
  assert_int_equal(res->error.code, 0);
  assert_false(res->valid);
  assert_false(rt_get(res->extracted, "Ok").as.b);
  assert_true(rt_get(res->extracted, "Amount").as.d == -1.0);
  assert_string_equal(rt_gets(res->extracted, "NotOk"), "not existing");
  assert_string_equal(rt_gets(res->extracted, "Nope"), "dflt");
  assert_false(rt_get(res->extracted, "OkApi").as.b);
  assert_int_equal(rt_get(res->extracted, "Deep").kind, XGR_VNULL);
  assert_true(rt_has_soft(res, "Deep"));
  /* invalid branch: the failing key is left out, the rest is written */
  assert_string_equal(rt_gets(res->output, "memo"), "inc");
  assert_int_equal(rt_get(res->output, "deep").kind, XGR_VNULL);
  assert_true(rt_has_soft(res, "deep"));
  assert_non_null(res->api_calls[0].error);
}

static void test_json_nested(void **st) {
  (void)st;
  xgr_step_result res;
  run_probe("{}", &res);
  assert_int_equal(res.error.code, 0);
  assert_true(res.valid);
  assert_int_equal(res.api_calls[0].status, 200);
  assert_null(res.api_calls[0].error);
  assert_true(rt_get(res.extracted, "Ok").as.b);
  assert_true(rt_get(res.extracted, "Amount").as.d == 65000.5);
  assert_int_equal(rt_get(res.extracted, "Deep").as.i, 42);
  assert_string_equal(rt_gets(res.extracted, "NotOk"), "there");
  assert_string_equal(rt_gets(res.extracted, "Nope"), "dflt");  /* missing path -> alias default */
  assert_string_equal(rt_gets(res.extracted, "BadCast"), "0x0000000000000000000000000000000000000001");  /* cast failure */
  assert_true(rt_get(res.extracted, "OkApi").as.b);  /* later alias sees an earlier one */
  assert_int_equal(xgr_list_size(res.soft_invalid), 0);
  assert_string_equal(rt_gets(res.output, "memo"), "ok");
  assert_int_equal(rt_get(res.output, "deep").as.i, 42);
  assert_int_equal(rt_get(res.effective, "Deep").as.i, 42);
  xgr_step_result_free(&res);
}

static void test_timeout(void **st) {
  (void)st;
  xgr_step_result res;
  run_probe("{\"Path\":\"slow\",\"Ms\":1500}", &res);
  assert_all_defaulted(&res);
  assert_non_null(strstr(res.api_calls[0].error, "timeout"));
  assert_true(res.api_calls[0].ms < 1400);
  xgr_step_result_free(&res);
}

static void test_slow_within_timeout(void **st) {
  (void)st;
  xgr_step_result res;
  run_probe("{\"Path\":\"slow\",\"Ms\":100}", &res);
  assert_true(res.valid);
  assert_int_equal(rt_get(res.extracted, "Deep").as.i, 42);
  xgr_step_result_free(&res);
}

static void test_500(void **st) {
  (void)st;
  xgr_step_result res;
  run_probe("{\"Path\":\"fail500\"}", &res);
  assert_all_defaulted(&res);
  assert_int_equal(res.api_calls[0].status, 500);
  assert_string_equal(res.api_calls[0].error, "HTTP status 500");
  xgr_step_result_free(&res);
}

static void test_bad_json(void **st) {
  (void)st;
  xgr_step_result res;
  run_probe("{\"Path\":\"badjson\"}", &res);
  assert_all_defaulted(&res);
  assert_int_equal(res.api_calls[0].status, 200);
  assert_non_null(strstr(res.api_calls[0].error, "not JSON"));
  xgr_step_result_free(&res);
}

static void test_oversize(void **st) {
  (void)st;
  xgr_step_result res;
  run_probe("{\"Path\":\"big\"}", &res);
  assert_all_defaulted(&res);
  assert_non_null(strstr(res.api_calls[0].error, "exceeds 1048576"));
  xgr_step_result_free(&res);
  /* exactly 1 MiB is accepted: a JSON string, so every resp.* path is missing -> defaults */
  run_probe("{\"Path\":\"exact\"}", &res);
  assert_null(res.api_calls[0].error);
  assert_int_equal(res.api_calls[0].status, 200);
  assert_false(rt_get(res.extracted, "Ok").as.b);
  assert_true(rt_has_soft(&res, "Deep"));
  xgr_step_result_free(&res);
}

static void test_404_and_refused(void **st) {
  (void)st;
  xgr_step_result res;
  run_probe("{\"Path\":\"nothing-here\"}", &res);
  assert_all_defaulted(&res);
  assert_int_equal(res.api_calls[0].status, 404);
  xgr_step_result_free(&res);
  /* a closed port: transport error */
  xgr_api_map_entry closed = {"https://api.test", "http://127.0.0.1:1"};
  xgr_step_ctx c2 = ctx;
  c2.api_map = &closed;
  c2.napi_map = 1;
  xgr_rule *r = rt_load(probe_rule);
  xgr_step_run(r, xgr_value_null(), &c2, ex, &res);
  assert_all_defaulted(&res);
  assert_int_equal(res.api_calls[0].status, 0);
  assert_non_null(strstr(res.api_calls[0].error, "transport error"));
  xgr_step_result_free(&res);
  xgr_rule_free(r);
}

/* The probe's call with its URL mapped to `to` under policy p; the call's error (NULL: none) is
 * copied to why (n bytes) and its status returned. */
static long probe_at(const char *to, const xgr_outbound_policy *p, char *why, size_t n) {
  xgr_api_map_entry m = {"https://api.test", to};
  xgr_step_ctx c2 = ctx;
  c2.api_map = &m;
  c2.napi_map = 1;
  c2.outbound = p;
  if (!probe) probe = rt_load(probe_rule);
  xgr_step_result res;
  xgr_step_run(probe, xgr_value_null(), &c2, ex, &res);
  assert_int_equal(res.error.code, 0);
  long status = res.api_calls[0].status;
  snprintf(why, n, "%s", res.api_calls[0].error ? res.api_calls[0].error : "");
  xgr_step_result_free(&res);
  return status;
}

/* Issue 38, finding 5: by default an API call reaches no loopback, link-local (cloud metadata) or
 * private address, whatever the URL names — an address or a name that resolves to one — and the
 * call's error says which address, why and which flag allows it; --allow-outbound allows it. */
static void test_outbound_policy(void **st) {
  (void)st;
  char why[512], url[128];
  /* the test server itself, by address: refused by the default policy (NULL) */
  assert_int_equal(probe_at(srv.base, NULL, why, sizeof why), 0);
  assert_string_equal(why, "outbound address 127.0.0.1 (loopback) of host \"127.0.0.1\" is not allowed by the outbound "
                           "policy; --allow-outbound 127.0.0.1/32 permits it");
  /* by a name that resolves to loopback (DNS rebinding's end state): refused at connect time */
  snprintf(url, sizeof url, "http://localhost:%u", (unsigned)srv.port);
  assert_int_equal(probe_at(url, NULL, why, sizeof why), 0);
  assert_non_null(strstr(why, "(loopback) of host \"localhost\" is not allowed by the outbound policy"));
  snprintf(url, sizeof url, "http://xgr-test.localhost:%u", (unsigned)srv.port);   /* *.localhost: loopback too */
  if (probe_at(url, NULL, why, sizeof why) == 0 && strstr(why, "outbound address"))
    assert_non_null(strstr(why, "(loopback) of host \"xgr-test.localhost\""));
  /* IPv4 carried in IPv6 is judged as IPv4 */
  snprintf(url, sizeof url, "http://[::ffff:127.0.0.1]:%u", (unsigned)srv.port);
  assert_int_equal(probe_at(url, NULL, why, sizeof why), 0);
  assert_non_null(strstr(why, "outbound address ::ffff:127.0.0.1 (loopback)"));
  /* cloud metadata, private ranges, CGNAT, unspecified: refused before any packet is sent */
  static const struct { const char *url, *want; } refused[] = {
      {"http://169.254.169.254/latest/meta-data", "outbound address 169.254.169.254 (link-local) of host \"169.254.169.254\""},
      {"http://10.1.2.3:8080", "outbound address 10.1.2.3 (private)"},
      {"http://172.16.0.1", "outbound address 172.16.0.1 (private)"},
      {"http://192.168.1.1", "outbound address 192.168.1.1 (private)"},
      {"http://100.64.0.1", "outbound address 100.64.0.1 (cgnat)"},
      {"http://0.0.0.0", "outbound address 0.0.0.0 (unspecified)"},
      {"http://[::1]:9", "outbound address ::1 (loopback)"},
      {"http://[fe80::1]:9", "outbound address fe80::1 (link-local)"},
      {"http://[fd00::1]:9", "outbound address fd00::1 (private)"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    assert_int_equal(probe_at(refused[i].url, NULL, why, sizeof why), 0);
    if (!strstr(why, refused[i].want)) fail_msg("%s: %s", refused[i].url, why);
  }
  /* allowed explicitly: by class, by CIDR, by address; a name with a refused and an allowed
   * address connects through the allowed one */
  static const char *const allow[] = {"loopback", "127.0.0.0/8", "127.0.0.1", "any"};
  for (size_t i = 0; i < sizeof allow / sizeof allow[0]; i++) {
    xgr_outbound_policy *p = xgr_outbound_policy_new();
    assert_int_equal(xgr_outbound_policy_allow(p, allow[i], NULL), 0);
    if (probe_at(srv.base, p, why, sizeof why) != 200) fail_msg("--allow-outbound %s: %s", allow[i], why);
    snprintf(url, sizeof url, "http://localhost:%u", (unsigned)srv.port);
    if (probe_at(url, p, why, sizeof why) != 200) fail_msg("--allow-outbound %s, localhost: %s", allow[i], why);
    xgr_outbound_policy_free(p);
  }
  /* an allow entry for another range leaves loopback refused */
  xgr_outbound_policy *p = xgr_outbound_policy_new();
  assert_int_equal(xgr_outbound_policy_allow(p, "10.0.0.0/8", NULL), 0);
  assert_int_equal(probe_at(srv.base, p, why, sizeof why), 0);
  assert_non_null(strstr(why, "(loopback)"));
  xgr_outbound_policy_free(p);
}

static void test_post_body_headers(void **st) {
  (void)st;
  const char *doc =
      "{\"payload\":{\"Who\":{\"type\":\"string\"}},"
      "\"apiCalls\":[{\"name\":\"e\",\"method\":\"post\",\"urlTemplate\":\"https://api.test/echo\",\"contentType\":\"json\","
      "\"bodyTemplate\":\"hello [Who]\",\"headers\":{\"X-Test\":\"h-[Who]\"},"
      "\"extractMap\":{\"M\":{\"type\":\"string\",\"expr\":\"resp.method\"},\"B\":{\"type\":\"string\",\"expr\":\"resp.body\"},"
      "\"H\":{\"type\":\"string\",\"expr\":\"resp.header\"},\"C\":{\"type\":\"string\",\"expr\":\"resp.ctype\"}}}],"
      "\"rules\":[]}";
  xgr_rule *r = rt_load(doc);
  xgr_value p = rt_json("{\"Who\":\"ann\"}");
  xgr_step_result res;
  xgr_step_run(r, p, &ctx, ex, &res);
  assert_true(res.valid);
  assert_string_equal(rt_gets(res.extracted, "M"), "POST");
  assert_string_equal(rt_gets(res.extracted, "C"), "application/json");   /* contentType json sets the header */
  assert_string_equal(rt_gets(res.extracted, "B"), "hello \"ann\"");   /* a bare placeholder of a json body is JSON */
  assert_string_equal(rt_gets(res.extracted, "H"), "h-ann");
  xgr_step_result_free(&res);
  xgr_value_release(p);
  /* a missing body placeholder: the call is not made, aliases soft-invalid */
  xgr_step_run(r, xgr_value_null(), &ctx, ex, &res);
  assert_false(res.valid);
  assert_true(res.missing_input);
  assert_non_null(strstr(res.api_calls[0].error, "missing key Who"));
  assert_true(rt_has_soft(&res, "M"));
  xgr_step_result_free(&res);
  xgr_rule_free(r);
}

/* contentType json sends `Content-Type: application/json` with the body (issue 38: it sent none, so
 * the body went out as a form); a Content-Type in `headers` wins, once; a text body keeps curl's. */
static void test_content_type(void **st) {
  (void)st;
  const char *docs[] = {
      "{\"payload\":{},\"apiCalls\":[{\"name\":\"e\",\"method\":\"post\",\"urlTemplate\":\"https://api.test/echo\","
      "\"contentType\":\"json\",\"bodyTemplate\":\"{}\",\"headers\":{\"content-TYPE\":\"application/vnd.x+json\"},"
      "\"extractMap\":{\"C\":{\"type\":\"string\",\"expr\":\"resp.ctype\"}}}],\"rules\":[]}",
      "{\"payload\":{},\"apiCalls\":[{\"name\":\"e\",\"method\":\"post\",\"urlTemplate\":\"https://api.test/echo\","
      "\"bodyTemplate\":\"a=1\",\"extractMap\":{\"C\":{\"type\":\"string\",\"expr\":\"resp.ctype\"}}}],\"rules\":[]}",
  };
  const char *want[] = {"application/vnd.x+json", "application/x-www-form-urlencoded"};
  for (size_t i = 0; i < 2; i++) {
    xgr_rule *r = rt_load(docs[i]);
    xgr_step_result res;
    xgr_step_run(r, xgr_value_null(), &ctx, ex, &res);
    assert_true(res.valid);
    assert_string_equal(rt_gets(res.extracted, "C"), want[i]);
    xgr_step_result_free(&res);
    xgr_rule_free(r);
  }
}

/* Injection through rendered values (issue 14). A header value rendered with CR/LF (or NUL) fails
 * that call, whose extract defaults apply, and nothing reaches the wire; with contentType json a
 * value inside a string literal of the body is JSON-escaped and a bare placeholder is the value's
 * JSON, so `x","admin":true,"y":"` cannot add a key. */
static void test_injection(void **st) {
  (void)st;
  const char *doc =
      "{\"payload\":{\"Who\":{\"type\":\"string\"},\"N\":{\"type\":\"uint64\",\"default\":18446744073709551615},"
      "\"L\":{\"type\":\"string\",\"default\":\"a\\\\b\\u0001\"}},"
      "\"apiCalls\":[{\"name\":\"e\",\"method\":\"post\",\"urlTemplate\":\"https://api.test/echo\",\"contentType\":\"json\","
      "\"bodyTemplate\":\"{\\\"name\\\":\\\"[Who]\\\",\\\"who\\\":[Who],\\\"n\\\":[N],\\\"esc\\\":\\\"q\\\\\\\"[L]\\\"}\","
      "\"headers\":{\"X-Test\":\"h-[Who]\"},"
      "\"extractMap\":{\"B\":{\"type\":\"string\",\"expr\":\"resp.body\",\"default\":\"none\"},"
      "\"H\":{\"type\":\"string\",\"expr\":\"resp.header\",\"default\":\"none\"}}}],\"rules\":[]}";
  xgr_rule *r = rt_load(doc);
  /* JSON body: structure kept */
  xgr_value p = rt_json("{\"Who\":\"x\\\",\\\"admin\\\":true,\\\"y\\\":\\\"\"}");
  xgr_step_result res;
  xgr_step_run(r, p, &ctx, ex, &res);
  assert_int_equal(res.error.code, 0);
  const char *body = rt_gets(res.extracted, "B");
  xgr_value b;
  xgr_error e;
  if (xgr_value_from_json_text(body, strlen(body), 0, &b, &e)) fail_msg("body is not JSON: %s", body);
  assert_int_equal(xgr_map_size(b), 4);
  assert_string_equal(rt_gets(b, "name"), "x\",\"admin\":true,\"y\":\"");
  assert_string_equal(rt_gets(b, "who"), "x\",\"admin\":true,\"y\":\"");
  assert_int_equal(rt_get(b, "n").kind, XGR_VUINT);
  assert_true(rt_get(b, "n").as.u == UINT64_MAX);
  assert_string_equal(rt_gets(b, "esc"), "q\"a\\b\x01");
  assert_int_equal(rt_get(b, "admin").kind, XGR_VNULL);
  xgr_value_release(b);
  xgr_step_result_free(&res);
  xgr_value_release(p);
  /* header: CR LF in the rendered value fails the call; defaults apply */
  const char *bad[] = {"{\"Who\":\"a\\r\\nInjected: 1\"}", "{\"Who\":\"a\\nb\"}", "{\"Who\":\"a\\u0000b\"}"};
  for (size_t i = 0; i < 3; i++) {
    p = rt_json(bad[i]);
    xgr_step_run(r, p, &ctx, ex, &res);
    assert_int_equal(res.error.code, 0);
    assert_string_equal(rt_gets(res.extracted, "H"), "none");
    assert_string_equal(rt_gets(res.extracted, "B"), "none");
    assert_non_null(res.api_calls[0].error);
    assert_non_null(strstr(res.api_calls[0].error, "CR, LF or NUL"));
    xgr_step_result_free(&res);
    xgr_value_release(p);
  }
  xgr_rule_free(r);
}

/* The resumable form: requests are described, performed by the caller, fed back. */
static void test_resumable(void **st) {
  (void)st;
  xgr_rule *r = rt_load(probe_rule);
  xgr_value p = rt_json("{\"Path\":\"a b/c\",\"Ms\":5}");
  xgr_step_state *s = xgr_step_begin(r, p, &ctx);
  const xgr_http_request *rq = xgr_step_next_request(s);
  assert_non_null(rq);
  char want[128];
  snprintf(want, sizeof want, "%s/a%%20b%%2Fc?ms=5", srv.base);
  assert_string_equal(rq->url, want);  /* percent-encoded placeholders, api-map applied */
  assert_string_equal(rq->method, "GET");
  assert_int_equal(rq->timeout_ms, 400);
  assert_int_equal(rq->nheaders, 1);
  assert_string_equal(rq->headers[0], "Accept: application/json");
  assert_ptr_equal(xgr_step_next_request(s), rq);  /* same request until fed */
  const char body[] = "{\"ok\":true,\"data\":{\"amount\":\"12.5\",\"nested\":{\"deep\":[0,0,{\"x\":7}]}}}";
  xgr_http_response resp = {.status = 200, .body = body, .body_len = sizeof body - 1, .ms = 3};
  xgr_step_feed_http(s, &resp);
  assert_null(xgr_step_next_request(s));
  xgr_step_result res;
  assert_int_equal(xgr_step_finish(s, &res), 0);
  assert_true(res.valid);
  assert_int_equal(rt_get(res.extracted, "Deep").as.i, 7);
  assert_string_equal(rt_gets(res.extracted, "NotOk"), "not existing");
  xgr_step_result_free(&res);
  /* finishing without performing: the call counts as not performed */
  s = xgr_step_begin(r, p, &ctx);
  assert_int_equal(xgr_step_finish(s, &res), 0);
  assert_string_equal(res.api_calls[0].error, "not performed");
  assert_false(res.valid);
  xgr_step_result_free(&res);
  /* dropping a step in flight */
  s = xgr_step_begin(r, p, &ctx);
  assert_non_null(xgr_step_next_request(s));
  xgr_step_state_free(s);
  xgr_value_release(p);
  xgr_rule_free(r);
}

/* ---- the project's price examples (examples/bundles) ----------------------------------------- */

/* A bundle of examples/bundles (the caller frees it), and one of its rules by key (borrowed). */
static xgr_bundle *load_bundle(const char *name) {
  char path[1024];
  const char *src = getenv("XGR_SRC");
  snprintf(path, sizeof path, "%s/examples/bundles/%s", src ? src : ".", name);
  xgr_bundle *b = NULL;
  xgr_error e;
  xgr_diags d;
  xgr_diags_init(&d);
  int rc = xgr_bundle_load_file(path, &b, &e, &d);
  if (rc) fprintf(stderr, "%s: %s: %s\n", path, e.path, e.message);
  xgr_diags_free(&d);
  assert_int_equal(rc, 0);
  return b;
}

static const xgr_rule *bundle_rule(const xgr_bundle *b, const char *key) {
  for (size_t i = 0; i < b->nrules; i++)
    if (!strcmp(b->rule_keys[i], key)) return b->rules[i];
  fail_msg("the bundle has no rule %s", key);
  return NULL;
}

static bool near(double got, double want) { return got > want - 1e-6 && got < want + 1e-6; }

/* price_feed.json: the jump guard, the pair check and a source that is down. */
static void test_own_price_feed(void **st) {
  (void)st;
  xgr_bundle *b = load_bundle("price_feed.json");
  const xgr_rule *r = bundle_rule(b, "poll_alpha_ticker");
  srv.alpha = 65000;
  xgr_step_result res;
  xgr_step_run(r, xgr_value_null(), &ctx, ex, &res);
  assert_int_equal(res.error.code, 0);
  assert_true(res.valid);
  assert_non_null(strstr(res.api_calls[0].url, "/alpha/v1/ticker/BTC-USD"));
  assert_true(near(rt_get(res.output, "Last").as.d, 65000));
  assert_true(near(rt_get(res.output, "Change").as.d, 0));
  assert_int_equal(rt_get(res.output, "Round").as.i, 1);
  assert_int_equal(rt_get(res.output, "Accepted").as.i, 1);
  assert_string_equal(rt_gets(res.output, "Note"), "accepted");
  assert_int_equal(res.wait_sec, 60);
  /* a move of 2%: accepted, Change relative to the last accepted price */
  xgr_value p = xgr_value_retain(res.effective);
  xgr_step_result_free(&res);
  srv.alpha = 66300;
  xgr_step_run(r, p, &ctx, ex, &res);
  assert_true(res.valid);
  assert_true(near(rt_get(res.output, "Change").as.d, 0.02));
  xgr_value_release(p);
  p = xgr_value_retain(res.effective);
  xgr_step_result_free(&res);
  /* a jump of 50%: rejected by the guard, the last accepted price kept */
  srv.alpha = 99450;
  xgr_step_run(r, p, &ctx, ex, &res);
  assert_false(res.valid);
  assert_true(near(rt_get(res.effective, "Last").as.d, 66300));
  assert_true(near(rt_get(res.effective, "Rejected").as.d, 99450));
  assert_int_equal(rt_get(res.effective, "Round").as.i, 3);
  assert_int_equal(rt_get(res.effective, "Accepted").as.i, 2);
  assert_non_null(strstr(rt_gets(res.effective, "Note"), "rejected"));
  assert_int_equal(res.wait_sec, 60);
  xgr_step_result_free(&res);
  /* the source down: Quoted takes its default, the step is invalid, the loop goes on */
  srv.alpha = -1;
  xgr_step_run(r, p, &ctx, ex, &res);
  assert_false(res.valid);
  assert_int_equal(res.api_calls[0].status, 503);
  assert_true(near(rt_get(res.extracted, "Quoted").as.d, 0));
  assert_true(near(rt_get(res.effective, "Last").as.d, 66300));
  xgr_step_result_free(&res);
  xgr_value_release(p);
  /* another pair asked: the URL carries it and the answer's pair is checked against it */
  srv.alpha = 3000;
  p = rt_json("{\"Base\":\"ETH\",\"Quote\":\"EUR\"}");
  xgr_step_run(r, p, &ctx, ex, &res);
  assert_true(res.valid);
  assert_non_null(strstr(res.api_calls[0].url, "/alpha/v1/ticker/ETH-EUR"));
  assert_string_equal(rt_gets(res.extracted, "QuotedPair"), "ETH-EUR");
  xgr_step_result_free(&res);
  xgr_value_release(p);
  xgr_bundle_free(b);
  srv.alpha = 100;
}

/* price_quorum.json, rule by rule: each source's own response shape, then the agreement step. */
static void agree(const xgr_rule *r, const char *pieces, bool want_valid, double want_price, int want_sources) {
  xgr_value p = rt_json(pieces);
  xgr_step_result res;
  xgr_step_run(r, p, &ctx, ex, &res);
  assert_int_equal(res.error.code, 0);
  if (res.valid != want_valid) fail_msg("%s: valid %d, expected %d", pieces, res.valid, want_valid);
  if (want_valid) {
    double price = rt_get(res.output, "Price").as.d;
    if (!near(price, want_price)) fail_msg("%s: price %.6f, expected %.6f", pieces, price, want_price);
    assert_int_equal(rt_get(res.output, "Sources").as.i, want_sources);
  } else {
    assert_false(rt_get(res.output, "Agreed").as.b);
  }
  xgr_step_result_free(&res);
  xgr_value_release(p);
}

static void test_own_quorum_rules(void **st) {
  (void)st;
  xgr_bundle *b = load_bundle("price_quorum.json");
  srv.alpha = 65000.5, srv.beta = 65010.25, srv.gamma = 64990;
  static const struct { const char *rule, *key, *path; double price; } src[] = {
    {"alpha", "AlphaPrice", "/alpha/v1/ticker/BTC-USD", 65000.5},
    {"beta", "BetaPrice", "/beta/quote?base=BTC&quote=USD", 65010.25},
    {"gamma", "GammaPrice", "/gamma/rates", 64990},
  };
  xgr_value p = rt_json("{\"Base\":\"BTC\",\"Quote\":\"USD\"}");
  for (int i = 0; i < 3; i++) {
    xgr_step_result res;
    xgr_step_run(bundle_rule(b, src[i].rule), p, &ctx, ex, &res);
    assert_true(res.valid);
    assert_non_null(strstr(res.api_calls[0].url, src[i].path));
    assert_true(near(rt_get(res.extracted, src[i].key).as.d, src[i].price));
    xgr_step_result_free(&res);
  }
  /* a source that is down is invalid with its price at the default 0; it retries after 10 s */
  srv.beta = -1;
  xgr_step_result res;
  xgr_step_run(bundle_rule(b, "beta"), p, &ctx, ex, &res);
  assert_false(res.valid);
  assert_true(near(rt_get(res.extracted, "BetaPrice").as.d, 0));
  assert_int_equal(rt_get(res.output, "Retries").as.i, 1);
  assert_int_equal(res.wait_sec, 10);
  xgr_step_result_free(&res);
  xgr_value_release(p);
  const xgr_rule *r = bundle_rule(b, "agree");
  agree(r, "{\"AlphaPrice\":100,\"BetaPrice\":100.5}", true, 100.25, 2);            /* two within 1% */
  agree(r, "{\"AlphaPrice\":100,\"BetaPrice\":100.4,\"GammaPrice\":100.2}", true, 100.2, 3);
  agree(r, "{\"AlphaPrice\":100,\"GammaPrice\":104}", false, 0, 0);                 /* 4% apart */
  agree(r, "{\"AlphaPrice\":100,\"BetaPrice\":0}", false, 0, 0);                    /* one price only */
  agree(r, "{\"AlphaPrice\":100,\"BetaPrice\":100.5,\"Tolerance\":0.001}", false, 0, 0);
  xgr_bundle_free(b);
  srv.alpha = srv.beta = srv.gamma = 100;
}

/* The step named `step` in a driver report's processes (the first such process), or NULL. */
static json_t *process_at(json_t *rep, const char *step, const char *status) {
  json_t *p;
  size_t i;
  json_array_foreach(json_object_get(rep, "processes"), i, p) {
    if (!strcmp(json_string_value(json_object_get(p, "step")), step) &&
        (!status || !strcmp(json_string_value(json_object_get(p, "status")), status)))
      return p;
  }
  return NULL;
}

/* One session of price_quorum.json on the deterministic driver (one process at a time, in order);
 * returns its report (caller decrefs). */
static json_t *quorum_session(const xgr_bundle *b) {
  xgr_driver_config cfg = {.api_map = maps, .napi_map = 7, .max_steps = 50, .record = true, .outbound = allow_loopback};
  xgr_driver *d = xgr_driver_new(&cfg);
  xgr_error e;
  assert_int_equal(xgr_driver_add_session(d, b, "0x1111111111111111111111111111111111111111", 1, "Ask", xgr_value_null(), &e), 0);
  xgr_driver_run(d);
  json_t *rep = xgr_driver_report(d, 0);
  xgr_driver_free(d);
  assert_string_equal(json_string_value(json_object_get(rep, "result")), "completed");
  return rep;
}

/* The quorum as a session: the 2-of-3 join takes the first two sources that answer; a source that
 * is down retries until the join closes, and the kill policy then stops its retry. */
static void test_own_quorum_session(void **st) {
  (void)st;
  xgr_bundle *b = load_bundle("price_quorum.json");
  srv.alpha = 65000, srv.beta = 65020, srv.gamma = 64990;
  json_t *rep = quorum_session(b);
  json_t *ag = process_at(rep, "Agree", "done"), *pl = json_object_get(ag, "payload");
  assert_non_null(ag);
  assert_true(json_is_true(json_object_get(ag, "valid")));
  assert_true(near(json_real_value(json_object_get(pl, "Price")), 65010));
  assert_int_equal(json_integer_value(json_object_get(pl, "Sources")), 2);
  json_decref(rep);
  /* beta down: its step is invalid and retries; the join closes with alpha and gamma */
  srv.beta = -1;
  rep = quorum_session(b);
  ag = process_at(rep, "Agree", "done"), pl = json_object_get(ag, "payload");
  assert_non_null(ag);
  assert_true(json_is_true(json_object_get(ag, "valid")));
  assert_true(near(json_real_value(json_object_get(pl, "Price")), 64995));
  assert_true(near(json_real_value(json_object_get(pl, "BetaPrice")), 0));
  assert_non_null(process_at(rep, "FromBeta", "aborted"));  /* the retry, stopped by the kill policy */
  json_decref(rep);
  /* gamma 4% off and beta down: the two answers disagree, the round ends invalid */
  srv.gamma = 67600;
  rep = quorum_session(b);
  ag = process_at(rep, "Agree", "done");
  assert_non_null(ag);
  assert_false(json_is_true(json_object_get(ag, "valid")));
  assert_false(json_is_true(json_object_get(json_object_get(ag, "payload"), "Agreed")));
  json_decref(rep);
  xgr_bundle_free(b);
  srv.alpha = srv.beta = srv.gamma = 100;
}

/* ---- the public examples (test_rule_http_shared) ------------------------------------------------ */

static xgr_rule *load_example(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/specs/xgr-public/examples/%s",
           shared_dir_or_skip("test_rule_http_shared", "the public price-feed examples"), rel);
  xgr_rule *r = NULL;
  xgr_error e;
  int rc = xgr_rule_load_file(path, &r, &e);
  if (rc) fprintf(stderr, "%s: %s: %s\n", path, e.path, e.message);
  assert_int_equal(rc, 0);
  return r;
}

static void test_price_feed(void **st) {
  (void)st;
  xgr_rule *r = load_example("ApiPriceFeed/XRC137Json/ApiPriceFeedStep_CoinbaseSpot.json");
  srv.alpha = 65000;
  xgr_step_result res;
  xgr_step_run(r, xgr_value_null(), &ctx, ex, &res);
  assert_int_equal(res.error.code, 0);
  assert_true(res.valid);
  assert_true(rt_get(res.output, "PrevPrice").as.d == 65000.0);
  assert_int_equal(rt_get(res.output, "Seq").as.i, 1);
  assert_true(rt_get(res.output, "Ok").as.b);
  assert_string_equal(rt_gets(res.output, "Pair"), "BTC-USD");
  assert_int_equal(res.wait_sec, 3600);
  /* next step: a jump of 50% is rejected by the delta guard */
  xgr_value p = xgr_value_retain(res.effective);
  xgr_step_result_free(&res);
  srv.alpha = 97500;
  xgr_step_run(r, p, &ctx, ex, &res);
  assert_false(res.valid);
  assert_int_equal(rt_get(res.effective, "Seq").as.i, 2);
  assert_true(rt_get(res.effective, "PrevPrice").as.d == 65000.0);
  assert_string_equal(rt_gets(res.effective, "Error"), "API fetch or validation failed");
  xgr_step_result_free(&res);
  /* API down: FetchedPrice and OkApi take their defaults, the step is invalid */
  srv.alpha = -1;
  xgr_step_run(r, p, &ctx, ex, &res);
  assert_false(res.valid);
  assert_int_equal(res.api_calls[0].status, 503);
  assert_true(rt_get(res.extracted, "FetchedPrice").as.d == 0.0);
  assert_false(rt_get(res.extracted, "OkApi").as.b);
  xgr_step_result_free(&res);
  xgr_value_release(p);
  xgr_rule_free(r);
  srv.alpha = 100;
}

static void quorum(double cb, double bs, double gk, bool want_valid, double want_price) {
  xgr_rule *r = load_example("ApiPriceFeedQuorum/XRC137Json/ApiPriceFeedQuorumStep_3Sources.json");
  srv.alpha = cb, srv.beta = bs, srv.gamma = gk;
  xgr_step_result res;
  xgr_step_run(r, xgr_value_null(), &ctx, ex, &res);
  if (res.error.code) fprintf(stderr, "quorum: %s: %s\n", res.error.path, res.error.message);
  assert_int_equal(res.error.code, 0);
  assert_int_equal(res.napi_calls, 3);
  assert_int_equal(res.valid, want_valid);
  double price = rt_get(res.effective, "Price").as.d;
  if (price < want_price - 1e-6 || price > want_price + 1e-6) fprintf(stderr, "price %.6f want %.6f\n", price, want_price);
  assert_true(price > want_price - 1e-6 && price < want_price + 1e-6);
  assert_int_equal(rt_get(res.effective, "Seq").as.i, 1);
  xgr_step_result_free(&res);
  xgr_rule_free(r);
}

static void test_quorum(void **st) {
  (void)st;
  quorum(100, 100.5, 120, true, 100.25);    /* two of three within 1%: mean of the inliers */
  quorum(100, 100.9, 100.4, true, 100.433333333333);  /* all three agree */
  quorum(100, 105, 120, false, 0);          /* no two within 1%: invalid, Price held */
  quorum(100, 100.4, -1, true, 100.2);      /* one source down (default 0): 2 of 3 still agree */
  quorum(100, -1, -1, false, 0);            /* two down */
  srv.alpha = srv.beta = srv.gamma = 100;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "shared")) {  /* test_rule_http_shared: the public examples */
    shared_dir_or_skip("test_rule_http_shared", "the public price-feed examples");
    const struct CMUnitTest shared[] = {cmocka_unit_test(test_price_feed), cmocka_unit_test(test_quorum)};
    return cmocka_run_group_tests(shared, setup, teardown);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json_nested),   cmocka_unit_test(test_timeout),
      cmocka_unit_test(test_slow_within_timeout), cmocka_unit_test(test_500),
      cmocka_unit_test(test_bad_json),      cmocka_unit_test(test_oversize),
      cmocka_unit_test(test_404_and_refused), cmocka_unit_test(test_outbound_policy),
      cmocka_unit_test(test_post_body_headers),
      cmocka_unit_test(test_content_type),
      cmocka_unit_test(test_injection),
      cmocka_unit_test(test_resumable),     cmocka_unit_test(test_own_price_feed),
      cmocka_unit_test(test_own_quorum_rules), cmocka_unit_test(test_own_quorum_session),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
