/* test_rule.c — rule documents and step semantics without the network: every cap of
 * XDaLa_Limits.md §3 (at the cap passes, one over fails naming the cap, the value, the maximum and
 * the JSON path), schema errors, the IterationOfPi example over three chained steps, missing
 * inputs, typed rule actions, soft-invalid downgrade, `_` keys, context variables, execution,
 * grants, wake-ups and contract reads (no backend, and an in-process chain reader). With the
 * argument `shared` (the test test_rule_shared) it checks the public IterationOfPi rule file of
 * ../shared instead, and skips when that folder is absent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../shared_dir.h"
#include "rule_util.h"
#include "xgr/rule.h"

/* ---- a small string builder ---- */
typedef struct sb {
  char *p;
  size_t n, cap;
} sb;

static void sbf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sbf(sb *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (b->n + (size_t)n + 1 > b->cap) {
    b->cap = (b->n + (size_t)n + 1) * 2;
    b->p = realloc(b->p, b->cap);
  }
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)n;
}

static void sbrep(sb *b, char c, size_t n) {
  for (size_t i = 0; i < n; i++) sbf(b, "%c", c);
}

static int parse(const char *doc, size_t len, xgr_error *e) {
  xgr_rule *r = NULL;
  int rc = xgr_rule_parse(doc, len, &r, e);
  xgr_rule_free(r);
  return rc;
}

static bool has(xgr_value m, const char *k) {
  xgr_value v;
  return xgr_map_get_str(m, k, strlen(k), &v);
}
static xgr_step_ctx ctx = {.owner = "0xAbCdEf0000000000000000000000000000000001", .session_id = 42, .pid = "42:3",
                           .step_id = "Main"};

/* Rules behind results handed to the tests: a result may borrow its rule's pinned constants, so
 * they are freed only when the group ends (xgr_rule_free's contract). */
static xgr_rule *kept[64];
static size_t nkept;

static int free_kept(void **s) {
  (void)s;
  while (nkept) xgr_rule_free(kept[--nkept]);
  return 0;
}

static void run(const char *doc, const char *payload, xgr_step_result *res) {
  xgr_rule *r = rt_load(doc);
  xgr_value p = payload ? rt_json(payload) : xgr_value_null();
  xgr_step_run(r, p, &ctx, NULL, res);
  xgr_value_release(p);
  if (nkept == sizeof kept / sizeof *kept) free_kept(NULL);
  kept[nkept++] = r;
}

/* ---- caps ---------------------------------------------------------------------------------- */

/* at: must load; over: must fail with XGR_ELIMIT naming cap, max+1 (seen) and max, at path. */
static void cap_case(sb *at, sb *over, const char *cap, long max, const char *path) {
  xgr_error e;
  int rc = parse(at->p, at->n, &e);
  if (rc) fprintf(stderr, "%s at the cap: %s: %s\n", cap, e.path, e.message);
  assert_int_equal(rc, 0);
  rc = parse(over->p, over->n, &e);
  if (rc != XGR_ELIMIT || strcmp(e.path, path)) fprintf(stderr, "%s over: rc %d %s: %s\n", cap, rc, e.path, e.message);
  assert_int_equal(rc, XGR_ELIMIT);
  assert_string_equal(e.path, path);
  char num[32];
  assert_non_null(strstr(e.message, cap));
  snprintf(num, sizeof num, "%ld", max);
  assert_non_null(strstr(e.message, num));
  snprintf(num, sizeof num, "%ld", max + 1);
  assert_non_null(strstr(e.message, num));
  free(at->p);
  free(over->p);
  *at = (sb){0};
  *over = (sb){0};
}

static void doc_bytes(sb *b, size_t total) {
  const char *base = "{\"payload\":{},\"rules\":[]}";
  sbf(b, "%s", base);
  sbrep(b, ' ', total - strlen(base));
}

static void doc_fields(sb *b, int n) {
  sbf(b, "{\"payload\":{");
  for (int i = 0; i < n; i++) sbf(b, "%s\"F%d\":{\"type\":\"int64\",\"default\":0}", i ? "," : "", i);
  sbf(b, "}}");
}

static void doc_name(sb *b, size_t len) {
  sbf(b, "{\"payload\":{\"");
  sbrep(b, 'N', len);
  sbf(b, "\":{\"type\":\"string\"}}}");
}

static void doc_rules(sb *b, int n) {
  sbf(b, "{\"payload\":{},\"rules\":[");
  for (int i = 0; i < n; i++) sbf(b, "%s\"true\"", i ? "," : "");
  sbf(b, "]}");
}

/* A rule expression of exactly len bytes: "1 == 1 && true ... " padded with spaces. */
static void doc_rule_len(sb *b, size_t len) {
  sbf(b, "{\"payload\":{},\"rules\":[\"true");
  sbrep(b, ' ', len - 4);
  sbf(b, "\"]}");
}

static const char *api_call(sb *b, const char *name, const char *url, const char *extra) {
  sbf(b, "{\"name\":\"%s\",\"method\":\"GET\",\"urlTemplate\":\"%s\",\"contentType\":\"json\",%s}", name, url, extra);
  return "";
}

static void doc_api(sb *b, int n) {
  sbf(b, "{\"payload\":{},\"apiCalls\":[");
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "c%d", i);
    if (i) sbf(b, ",");
    api_call(b, name, "https://x.test/", "\"extractMap\":{}");
  }
  sbf(b, "]}");
}

static void doc_url(sb *b, size_t len) {
  sb u = {0};
  sbf(&u, "https://x.test/");
  sbrep(&u, 'u', len - u.n);
  sbf(b, "{\"payload\":{},\"apiCalls\":[");
  api_call(b, "c", u.p, "\"extractMap\":{}");
  sbf(b, "]}");
  free(u.p);
}

static void doc_body(sb *b, size_t len) {
  sbf(b, "{\"payload\":{},\"apiCalls\":[{\"name\":\"c\",\"method\":\"POST\",\"urlTemplate\":\"https://x.test/\","
         "\"contentType\":\"json\",\"bodyTemplate\":\"");
  sbrep(b, 'b', len);
  sbf(b, "\",\"extractMap\":{}}]}");
}

static void doc_extract(sb *b, int n) {
  sbf(b, "{\"payload\":{},\"apiCalls\":[{\"name\":\"c\",\"method\":\"GET\",\"urlTemplate\":\"https://x.test/\","
         "\"contentType\":\"json\",\"extractMap\":{");
  for (int i = 0; i < n; i++) sbf(b, "%s\"E%d\":{\"type\":\"bool\",\"expr\":\"resp.ok\"}", i ? "," : "", i);
  sbf(b, "}}]}");
}

static void doc_extract_default(sb *b, size_t len) {
  sbf(b, "{\"payload\":{},\"apiCalls\":[{\"name\":\"c\",\"method\":\"GET\",\"urlTemplate\":\"https://x.test/\","
         "\"contentType\":\"json\",\"extractMap\":{\"A\":{\"type\":\"string\",\"expr\":\"resp.a\",\"default\":\"");
  sbrep(b, 'd', len);
  sbf(b, "\"}}}]}");
}

static void doc_reads(sb *b, int n) {
  sbf(b, "{\"payload\":{},\"contractReads\":[");
  for (int i = 0; i < n; i++)
    sbf(b, "%s{\"to\":\"0x1111111111111111111111111111111111111111\",\"function\":\"decimals()\",\"saveAs\":{}}",
        i ? "," : "");
  sbf(b, "]}");
}

static void doc_save(sb *b, int n) {
  sbf(b, "{\"payload\":{},\"contractReads\":[{\"to\":\"0x1111111111111111111111111111111111111111\","
         "\"function\":\"f()\",\"saveAs\":{");
  for (int i = 0; i < n; i++) sbf(b, "%s\"%d\":{\"key\":\"K%d\",\"type\":\"uint256\",\"default\":\"0\"}", i ? "," : "", i, i);
  sbf(b, "}}]}");
}

static void doc_save_default(sb *b, size_t len) {
  sbf(b, "{\"payload\":{},\"contractReads\":[{\"to\":\"0x1111111111111111111111111111111111111111\","
         "\"function\":\"f()\",\"saveAs\":{\"0\":{\"key\":\"K\",\"type\":\"string\",\"default\":\"");
  sbrep(b, 's', len);
  sbf(b, "\"}}}]}");
}

static void doc_outcome(sb *b, int n) {
  sbf(b, "{\"payload\":{},\"onValid\":{\"payload\":{");
  for (int i = 0; i < n; i++) sbf(b, "%s\"O%d\":%d", i ? "," : "", i, i);
  sbf(b, "}}}");
}

static void doc_grants(sb *b, int n) {
  sbf(b, "{\"payload\":{},\"onValid\":{\"grants\":[");
  for (int i = 0; i < n; i++) sbf(b, "%s{\"address\":\"0x1111111111111111111111111111111111111111\",\"rights\":1}", i ? "," : "");
  sbf(b, "]}}");
}

static void doc_wakeups(sb *b, int n) {
  sbf(b, "{\"payload\":{},\"onValid\":{\"wakeUps\":[");
  for (int i = 0; i < n; i++)
    sbf(b, "%s{\"runner\":\"0x1111111111111111111111111111111111111111\",\"sessionId\":%d,\"stepId\":\"s\"}", i ? "," : "", i + 1);
  sbf(b, "]}}");
}

static void doc_args(sb *b, int n) {
  sbf(b, "{\"payload\":{},\"onValid\":{\"execution\":{\"to\":\"0x1111111111111111111111111111111111111111\","
         "\"function\":\"f()\",\"args\":[");
  for (int i = 0; i < n; i++) sbf(b, "%s{\"type\":\"uint64\",\"value\":%d}", i ? "," : "", i);
  sbf(b, "]}}}");
}

static void doc_branch_string(sb *b, size_t len) {
  sbf(b, "{\"payload\":{},\"onInvalid\":{\"payload\":{\"k\":\"");
  sbrep(b, 'v', len);
  sbf(b, "\"}}}");
}

static void test_caps(void **s) {
  (void)s;
  sb at = {0}, over = {0};
  doc_bytes(&at, 131072), doc_bytes(&over, 131073);
  cap_case(&at, &over, "MaxXRC137Bytes", 131072, "");
  doc_fields(&at, 64), doc_fields(&over, 65);
  cap_case(&at, &over, "MaxPayloadFields", 64, "payload");
  doc_name(&at, 64), doc_name(&over, 65);
  {
    char path[128] = "payload.";
    memset(path + 8, 'N', 65);
    path[73] = 0;
    cap_case(&at, &over, "MaxFieldNameLen", 64, path);
  }
  doc_rules(&at, 64), doc_rules(&over, 65);
  cap_case(&at, &over, "MaxRules", 64, "rules");
  doc_api(&at, 16), doc_api(&over, 17);
  cap_case(&at, &over, "MaxAPICalls", 16, "apiCalls");
  doc_url(&at, 2048), doc_url(&over, 2049);
  cap_case(&at, &over, "MaxURLTemplateLen", 2048, "apiCalls[0].urlTemplate");
  doc_body(&at, 8192), doc_body(&over, 8193);
  cap_case(&at, &over, "MaxBodyTemplateLen", 8192, "apiCalls[0].bodyTemplate");
  doc_extract(&at, 64), doc_extract(&over, 65);
  cap_case(&at, &over, "MaxExtractMapEntries", 64, "apiCalls[0].extractMap");
  doc_extract_default(&at, 8192), doc_extract_default(&over, 8193);
  cap_case(&at, &over, "MaxStringValueLen", 8192, "apiCalls[0].extractMap.A.default");
  doc_reads(&at, 16), doc_reads(&over, 17);
  cap_case(&at, &over, "MaxContractReads", 16, "contractReads");
  doc_save(&at, 64), doc_save(&over, 65);
  cap_case(&at, &over, "MaxContractReadSaveAs", 64, "contractReads[0].saveAs");
  doc_save_default(&at, 8192), doc_save_default(&over, 8193);
  cap_case(&at, &over, "MaxStringValueLen", 8192, "contractReads[0].saveAs.0.default");
  doc_outcome(&at, 64), doc_outcome(&over, 65);
  cap_case(&at, &over, "MaxOutcomeKeys", 64, "onValid.payload");
  doc_grants(&at, 16), doc_grants(&over, 17);
  cap_case(&at, &over, "MaxGrants", 16, "onValid.grants");
  /* no such cap in the public limits: the message names xgr's own (it said "MaxWakeUps") */
  doc_wakeups(&at, 16), doc_wakeups(&over, 17);
  cap_case(&at, &over, "xgr's wakeUps cap (docs/RULE_FORMAT.md, \"Limits\")", 16, "onValid.wakeUps");
  doc_args(&at, 16), doc_args(&over, 17);
  cap_case(&at, &over, "MaxExecArgs", 16, "onValid.execution.args");
  doc_branch_string(&at, 8192), doc_branch_string(&over, 8193);
  cap_case(&at, &over, "MaxStringValueLen", 8192, "onInvalid.payload.k");
}

/* MaxExprLen: the document cap (2048) is checked first; the evaluator's own cap (1024 bytes,
 * Limits §5) then applies to what is compiled. */
static void test_expr_len(void **s) {
  (void)s;
  sb b = {0};
  xgr_error e;
  doc_rule_len(&b, 2049);
  assert_int_equal(parse(b.p, b.n, &e), XGR_ELIMIT);
  assert_string_equal(e.path, "rules[0]");
  assert_non_null(strstr(e.message, "MaxExprLen"));
  assert_non_null(strstr(e.message, "2049"));
  assert_non_null(strstr(e.message, "2048"));
  free(b.p), b = (sb){0};
  doc_rule_len(&b, 2048);  /* passes the document cap, stopped by the evaluator cap */
  assert_int_equal(parse(b.p, b.n, &e), XGR_ELIMIT);
  assert_string_equal(e.path, "rules[0]");
  assert_non_null(strstr(e.message, "1024"));
  assert_null(strstr(e.message, "maximum 2048"));
  free(b.p), b = (sb){0};
  doc_rule_len(&b, 1024);
  assert_int_equal(parse(b.p, b.n, &e), 0);
  free(b.p), b = (sb){0};
  doc_rule_len(&b, 1025);
  assert_int_equal(parse(b.p, b.n, &e), XGR_ELIMIT);
  assert_non_null(strstr(e.message, "1024"));
  free(b.p);
}

static void expect_err(const char *doc, int code, const char *path, const char *needle) {
  xgr_error e;
  int rc = parse(doc, strlen(doc), &e);
  if (rc != code || strcmp(e.path, path) || (needle && !strstr(e.message, needle)))
    fprintf(stderr, "doc %s\n -> rc %d path %s: %s\n", doc, rc, e.path, e.message);
  assert_int_equal(rc, code);
  assert_string_equal(e.path, path);
  if (needle) assert_non_null(strstr(e.message, needle));
}

static void test_schema_errors(void **s) {
  (void)s;
  expect_err("[1]", XGR_ESCHEMA, "", "JSON object");
  expect_err("{\"payload\":{", XGR_EPARSE, "", NULL);
  expect_err("{}", XGR_ESCHEMA, "payload", "missing `payload`");
  expect_err("{\"payload\":{\"A\":{\"type\":\"int\"}}}", XGR_ESCHEMA, "payload.A.type", "unknown XRC type \"int\"");
  expect_err("{\"payload\":{\"A\":{}}}", XGR_ESCHEMA, "payload.A.type", "missing `type`");
  expect_err("{\"payload\":{\"A\":{\"type\":\"int64\",\"default\":\"x\"}}}", XGR_ESCHEMA, "payload.A.default",
             "cannot cast \"x\"");
  expect_err("{\"payload\":{\"A b\":{\"type\":\"int64\"}}}", XGR_EIDENT, "payload[\"A b\"]", "ASCII identifier");
  expect_err("{\"payload\":{},\"rules\":[5]}", XGR_ESCHEMA, "rules[0]", "rule expression string");
  expect_err("{\"payload\":{},\"rules\":[{\"type\":\"stop\",\"expression\":\"true\"}]}", XGR_ESCHEMA, "rules[0].type",
             "abortStep");
  expect_err("{\"payload\":{},\"rules\":[\"[A] >\"]}", XGR_EPARSE, "rules[0]", NULL);
  expect_err("{\"payload\":{},\"apiCalls\":[{\"name\":\"a\",\"method\":\"GET\",\"urlTemplate\":\"u\",\"contentType\":\"json\","
             "\"extractMap\":{\"X\":{\"type\":\"bool\",\"expr\":\"resp.a\",\"value\":\"resp.b\"}}}]}",
             XGR_ESCHEMA, "apiCalls[0].extractMap.X", "both `expr` and `value`");
  expect_err("{\"payload\":{},\"apiCalls\":[{\"name\":\"a\",\"method\":\"GET\",\"urlTemplate\":\"u\",\"contentType\":\"json\","
             "\"extractMap\":{}},{\"name\":\"a\",\"method\":\"GET\",\"urlTemplate\":\"u\",\"contentType\":\"json\","
             "\"extractMap\":{}}]}",
             XGR_EDUP, "apiCalls[1].name", "used twice");
  expect_err("{\"payload\":{},\"apiCalls\":[{\"name\":\"a\",\"method\":\"GET\",\"urlTemplate\":\"u\",\"contentType\":\"xml\","
             "\"extractMap\":{}}]}",
             XGR_ESCHEMA, "apiCalls[0].contentType", "\"json\"");
  expect_err("{\"payload\":{},\"apiCalls\":[{\"name\":\"a\",\"method\":\"GET\",\"urlTemplate\":\"u\"}]}", XGR_ESCHEMA,
             "apiCalls[0].extractMap", "missing");
  expect_err("{\"payload\":{},\"onValid\":{\"waitSec\":-1}}", XGR_ESCHEMA, "onValid.waitSec", "integer");
  expect_err("{\"payload\":{},\"onValid\":{\"grants\":[{\"address\":\"[A]\",\"rights\":8}]}}", XGR_ESCHEMA,
             "onValid.grants[0].rights", NULL);
  expect_err("{\"payload\":{},\"onValid\":{\"execution\":{\"to\":\"[A]\",\"args\":[{\"type\":\"uint64\",\"value\":-1}]}}}",
             XGR_ESCHEMA, "onValid.execution.args[0].value", "out of range");
  expect_err("{\"payload\":{},\"contractReads\":[{\"to\":\"[T]\",\"function\":\"bad sig\"}]}", XGR_ESCHEMA,
             "contractReads[0].function", "Solidity");
  expect_err("{\"payload\":{},\"contractReads\":[{\"to\":\"[T]\",\"function\":\"f()\",\"saveAs\":{\"x\":{}}}]}",
             XGR_ESCHEMA, "contractReads[0].saveAs.x", "return index");
}

/* ---- the public IterationOfPi example ------------------------------------------------------ */

static void test_iteration_of_pi(void **s) {
  (void)s;
  char path[1024];
  const char *src = getenv("XGR_SRC");
  snprintf(path, sizeof path, "%s/tests/rule/IterationOfPi.json", src ? src : ".");
  xgr_rule *r = NULL;
  xgr_error e;
  assert_int_equal(xgr_rule_load_file(path, &r, &e), 0);
  xgr_value p = rt_json("{\"Iter\":0,\"S\":0,\"Pi\":0}");
  double sum = 0, prev = 0;
  for (int i = 0; i < 3; i++) {
    xgr_step_result res;
    assert_int_equal(xgr_step_run(r, p, &ctx, NULL, &res), 0);
    assert_true(res.valid);
    assert_int_equal(res.wait_sec, 3600);
    prev = sum;
    sum += (i % 2 ? -1.0 : 1.0) / (2.0 * i + 1.0);
    assert_int_equal(rt_get(res.effective, "Iter").as.i, i + 1);
    assert_true(rt_get(res.effective, "S").as.d == sum);
    assert_true(rt_get(res.effective, "Pi").as.d == 4.0 * prev);  /* Pi is computed from the S it was given */
    xgr_value_release(p);
    p = xgr_value_retain(res.effective);
    xgr_step_result_free(&res);
  }
  assert_int_equal(rt_get(p, "Iter").as.i, 3);
  assert_true(rt_get(p, "S").as.d == 1.0 - 1.0 / 3.0 + 1.0 / 5.0);
  xgr_value_release(p);
  /* a missing required input forces the invalid branch (onInvalid is empty) */
  xgr_step_result res;
  p = rt_json("{\"Iter\":0,\"S\":0}");
  xgr_step_run(r, p, &ctx, NULL, &res);
  assert_false(res.valid);
  assert_true(res.missing_input);
  assert_true(rt_has_soft(&res, "Pi"));
  assert_int_equal(xgr_map_size(res.output), 0);
  xgr_step_result_free(&res);
  xgr_value_release(p);
  xgr_rule_free(r);
  /* a document that lacks its closing brace: a parse error, not a crash */
  snprintf(path, sizeof path, "%s/tests/rule/truncated_rule.json", src ? src : ".");
  assert_int_equal(xgr_rule_load_file(path, &r, &e), XGR_EPARSE);
  assert_null(r);
}

/* ---- against ../shared (test_rule_shared) ---------------------------------------------------- */

/* The published IterationOfPi rule file lacks its closing brace (docs/RULES.md): a parse error. */
static void test_public_iteration_file(void **s) {
  (void)s;
  const char *sh = shared_dir_or_skip("test_rule_shared", "the public IterationOfPi rule file");
  char path[1024];
  snprintf(path, sizeof path, "%s/specs/xgr-public/examples/IterationOfPi/XRC137Json/Iterationstep.json", sh);
  xgr_rule *r = NULL;
  xgr_error e;
  assert_int_equal(xgr_rule_load_file(path, &r, &e), XGR_EPARSE);
  assert_null(r);
}

/* ---- step semantics ------------------------------------------------------------------------ */

static void test_inputs(void **s) {
  (void)s;
  const char *doc = "{\"payload\":{\"A\":{\"type\":\"int64\"},\"B\":{\"type\":\"uint256\",\"default\":\"7\"},"
                    "\"C\":{\"type\":\"double\",\"default\":1}},\"rules\":[\"[A] > 0\",\"[B] > 5\"],"
                    "\"onValid\":{\"payload\":{\"Sum\":\"[A] + 1\",\"Big\":\"[B]\"}}}";
  xgr_step_result res;
  run(doc, "{\"A\":\"5\",\"Extra\":[1,2],\"_from\":\"X\",\"_when\":\"valid\",\"__wakeUp\":{\"default\":{}}}", &res);
  assert_int_equal(res.error.code, 0);
  assert_true(res.valid);
  assert_int_equal(rt_get(res.payload, "A").kind, XGR_VINT);  /* "5" cast to int64 */
  assert_int_equal(rt_get(res.payload, "B").kind, XGR_VBIGINT);
  assert_true(rt_get(res.payload, "C").as.d == 1.0);
  assert_true(has(res.effective, "Extra"));      /* undeclared keys pass through */
  assert_true(has(res.effective, "__wakeUp"));   /* `__` keys travel on */
  assert_false(has(res.effective, "_from"));     /* join meta keys never do */
  assert_false(has(res.payload, "_when"));
  assert_int_equal(rt_get(res.output, "Sum").as.i, 6);
  json_t *j = xgr_step_result_to_json(&res);
  char *t = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
  assert_non_null(strstr(t, "\"Big\":\"7\""));  /* uint256 written as a decimal string */
  assert_non_null(strstr(t, "\"error\":null"));
  free(t);
  json_decref(j);
  xgr_step_result_free(&res);
  /* a bad input is a hard error naming the field */
  run(doc, "{\"A\":\"five\"}", &res);
  assert_int_equal(res.error.code, XGR_ESCHEMA);
  assert_string_equal(res.error.path, "payload.A");
  assert_non_null(strstr(res.error.message, "\"five\""));
  assert_false(res.valid);
  xgr_step_result_free(&res);
}

static void test_actions(void **s) {
  (void)s;
  const char *doc = "{\"payload\":{\"A\":{\"type\":\"int64\"},\"F\":{\"type\":\"double\",\"default\":0}},"
                    "\"rules\":[\"[A] > 0\",{\"type\":\"abortStep\",\"expression\":\"[F] > 0.5\"},"
                    "{\"type\":\"cancelSession\",\"expression\":\"[F] > 0.9\"}],"
                    "\"onValid\":{\"payload\":{\"x\":1}},\"onInvalid\":{\"payload\":{\"y\":2}}}";
  xgr_step_result res;
  run(doc, "{\"A\":1,\"F\":0.7}", &res);
  assert_int_equal(res.action, XGR_ACTION_ABORT_STEP);
  assert_int_equal(xgr_map_size(res.output), 0);  /* no branch ran */
  xgr_step_result_free(&res);
  run(doc, "{\"A\":1,\"F\":0.95}", &res);
  assert_int_equal(res.action, XGR_ACTION_CANCEL_SESSION);  /* wins over abortStep */
  xgr_step_result_free(&res);
  /* typed rules are evaluated even when a missing input forces invalid */
  run(doc, "{\"F\":0.95}", &res);
  assert_true(res.missing_input);
  assert_int_equal(res.action, XGR_ACTION_CANCEL_SESSION);
  xgr_step_result_free(&res);
  run(doc, "{\"F\":0.1}", &res);
  assert_false(res.valid);
  assert_int_equal(rt_get(res.output, "y").as.i, 2);
  xgr_step_result_free(&res);
  /* hard errors in any rule, even after a false one */
  run("{\"payload\":{\"A\":{\"type\":\"int64\"}},\"rules\":[\"[A] > 5\",\"[A] / 0 > 1\"]}", "{\"A\":1}", &res);
  assert_int_equal(res.error.code, XGR_EEVAL);
  assert_string_equal(res.error.path, "rules[1]");
  xgr_step_result_free(&res);
  run("{\"payload\":{\"A\":{\"type\":\"int64\"}},\"rules\":[\"[A] + 1\"]}", "{\"A\":1}", &res);
  assert_true(res.error.code != 0);
  assert_string_equal(res.error.path, "rules[0]");
  xgr_step_result_free(&res);
}

static void test_soft_invalid(void **s) {
  (void)s;
  const char *doc = "{\"payload\":{\"A\":{\"type\":\"int64\"}},\"rules\":[\"[A] > 0\"],"
                    "\"onValid\":{\"payload\":{\"ok\":\"[A] + 1\",\"needs\":\"[Missing] + 1\"},\"waitSec\":5},"
                    "\"onInvalid\":{\"payload\":{\"memo\":\"G:inc\",\"a\":\"[A] * 2\",\"gone\":\"x-[Nope]\"},\"waitSec\":9}}";
  xgr_step_result res;
  run(doc, "{\"A\":3}", &res);
  assert_int_equal(res.error.code, 0);
  assert_false(res.valid);  /* downgraded */
  assert_true(rt_has_soft(&res, "needs"));
  assert_true(rt_has_soft(&res, "gone"));
  assert_string_equal(rt_gets(res.output, "memo"), "G:inc");
  assert_int_equal(rt_get(res.output, "a").as.i, 6);
  assert_false(has(res.output, "gone"));
  assert_false(has(res.output, "ok"));
  assert_int_equal(res.wait_sec, 9);
  xgr_step_result_free(&res);
}

static void test_hidden_and_context(void **s) {
  (void)s;
  const char *doc = "{\"payload\":{},\"rules\":[],"
                    "\"onValid\":{\"payload\":{\"Sid\":\"[__sessionId]\",\"Me\":\"[from]\",\"P\":\"[__pid]\","
                    "\"St\":\"[__stepId]\",\"O\":\"[__owner]\",\"Next\":\"[__sessionId] + 1u\",\"T\":\"sid-[__sessionId]\","
                    "\"Secret\":\"[_secret]\"}}}";
  xgr_step_result res;
  run(doc, "{\"from\":\"spoof\",\"_secret\":1,\"__sessionId\":9}", &res);
  assert_int_equal(res.error.code, 0);
  assert_false(res.valid);  /* Secret cannot be produced: `_` keys are invisible -> downgrade */
  assert_true(rt_has_soft(&res, "Secret"));
  xgr_step_result_free(&res);
  doc = "{\"payload\":{},\"rules\":[\"[__sessionId] > 0\",\"[from] == [__owner]\"],"
        "\"onValid\":{\"payload\":{\"Sid\":\"[__sessionId]\",\"Me\":\"[from]\",\"P\":\"[__pid]\","
        "\"St\":\"[__stepId]\",\"Next\":\"[__sessionId] + 1u\",\"T\":\"sid-[__sessionId]\"}}}";
  run(doc, "{\"from\":\"spoof\",\"_secret\":1,\"__sessionId\":9}", &res);
  assert_int_equal(res.error.code, 0);
  assert_true(res.valid);
  assert_int_equal(rt_get(res.output, "Sid").kind, XGR_VUINT);
  assert_int_equal(rt_get(res.output, "Sid").as.u, 42);
  assert_string_equal(rt_gets(res.output, "Me"), ctx.owner);
  assert_string_equal(rt_gets(res.output, "P"), "42:3");
  assert_string_equal(rt_gets(res.output, "St"), "Main");
  assert_int_equal(rt_get(res.output, "Next").as.u, 43);
  assert_string_equal(rt_gets(res.output, "T"), "sid-42");
  assert_int_equal(rt_get(res.effective, "_secret").as.i, 1);  /* hidden, but carried */
  xgr_step_result_free(&res);
  /* a rule reading a hidden key sees it missing: false, not an error */
  run("{\"payload\":{},\"rules\":[\"[_secret] == 1\"]}", "{\"_secret\":1}", &res);
  assert_int_equal(res.error.code, 0);
  assert_false(res.valid);
  xgr_step_result_free(&res);
}

static void test_branch_outputs(void **s) {
  (void)s;
  const char *doc =
      "{\"payload\":{\"Owner\":{\"type\":\"address\"},\"Amt\":{\"type\":\"uint256\"},\"Auditor\":{\"type\":\"address\"}},"
      "\"rules\":[],"
      "\"onValid\":{\"payload\":{\"memo\":\"paid [Amt]\"},"
      "\"execution\":{\"to\":\"[Owner]\",\"gas\":{\"limit\":250000},\"function\":\"notify(address,uint256)(bool)\","
      "\"args\":[{\"type\":\"address\",\"value\":\"[Owner]\"},{\"type\":\"uint256\",\"value\":\"[Amt]\"},"
      "{\"type\":\"uint64\",\"expr\":\"[Missing]\",\"default\":5}],\"value\":{\"type\":\"int64\",\"value\":\"0\"},"
      "\"extras\":{\"note\":\"n\"}},"
      "\"grants\":[{\"address\":\"[Auditor]\",\"rights\":5},{\"address\":\"[Nobody]\",\"rights\":1,\"expireDays\":3}],"
      "\"logExpireDays\":90,\"encryptLogs\":true,"
      "\"wakeUps\":[{\"runner\":\"[Owner]\",\"sessionId\":\"[Sid]\",\"stepId\":\"settle\",\"payload\":{\"B\":\"[Amt]\"}},"
      "{\"runner\":\"[Owner]\",\"sessionId\":12,\"stepId\":\"settle\",\"payload\":{\"Who\":\"[from]\",\"_x\":1}}]}}";
  xgr_step_result res;
  run(doc,
      "{\"Owner\":\"0x1111111111111111111111111111111111111111\",\"Amt\":\"1000000000000000000000\","
      "\"Auditor\":\"0x2222222222222222222222222222222222222222\"}",
      &res);
  if (res.error.code) fprintf(stderr, "%s: %s\n", res.error.path, res.error.message);
  assert_int_equal(res.error.code, 0);
  assert_true(res.valid);
  assert_string_equal(rt_gets(res.output, "memo"), "paid 1000000000000000000000");
  assert_non_null(res.execution);
  assert_string_equal(res.execution->to, "0x1111111111111111111111111111111111111111");
  assert_int_equal(res.execution->gas_limit, 250000);
  assert_int_equal(res.execution->nargs, 3);
  assert_int_equal(res.execution->args[1].value.kind, XGR_VBIGINT);
  assert_int_equal(res.execution->args[2].value.as.u, 5);  /* default of a missing arg */
  assert_true(res.execution->has_value);
  assert_int_equal(res.execution->value.value.as.i, 0);
  assert_int_equal(res.ngrants, 1);  /* the grant whose address is missing is left out */
  assert_int_equal(res.grants[0].rights, 5);
  assert_int_equal(res.grants[0].expire_days, 90);  /* from logExpireDays */
  assert_true(rt_has_soft(&res, "grants[1]"));
  assert_int_equal(res.encrypt_logs, 1);
  assert_int_equal(res.nwakeups, 2);
  assert_true(res.wakeups[0].skipped);  /* Sid is missing */
  assert_non_null(strstr(res.wakeups[0].skip_reason, "Sid"));
  assert_false(res.wakeups[1].skipped);
  assert_int_equal(res.wakeups[1].session_id, 12);
  assert_string_equal(rt_gets(res.wakeups[1].payload, "Who"), ctx.owner);
  assert_false(has(res.wakeups[1].payload, "_x"));
  json_t *j = xgr_step_result_to_json(&res);
  assert_true(json_is_object(json_object_get(j, "execution")));
  assert_int_equal(json_array_size(json_object_get(j, "wakeUps")), 2);
  json_decref(j);
  xgr_step_result_free(&res);
  /* execution.to that is not an address: hard error */
  run("{\"payload\":{\"Who\":{\"type\":\"string\"}},\"onValid\":{\"execution\":{\"to\":\"[Who]\"}}}",
      "{\"Who\":\"Token=0x1111111111111111111111111111111111111111\"}", &res);
  assert_int_equal(res.error.code, XGR_ESCHEMA);
  assert_string_equal(res.error.path, "onValid.execution.to");
  xgr_step_result_free(&res);
  /* execution with a missing key in the valid branch: downgrade */
  run("{\"payload\":{},\"onValid\":{\"execution\":{\"to\":\"[T]\"}},\"onInvalid\":{\"payload\":{\"m\":1}}}", "{}", &res);
  assert_false(res.valid);
  assert_null(res.execution);
  assert_true(rt_has_soft(&res, "execution"));
  xgr_step_result_free(&res);
}

static int fake_chain(void *c, const xgr_chain_call *call, xgr_value *out, xgr_error *e) {
  (void)c;
  if (strcmp(call->function, "slot0()")) return xgr_error_set(e, XGR_EHTTP, NULL, "execution reverted");
  *out = xgr_list_new(2);
  xgr_list_push(*out, xgr_value_cstring("79228162514264337593543950336"));
  xgr_list_push(*out, xgr_value_cstring("not a number"));
  return 0;
}

static void test_contract_reads(void **s) {
  (void)s;
  const char *doc =
      "{\"payload\":{\"Token\":{\"type\":\"address\"}},"
      "\"contractReads\":[{\"to\":\"[Token]\",\"function\":\"balanceOf(address)\",\"args\":[{\"type\":\"address\",\"value\":\"[Token]\"}],"
      "\"saveAs\":{\"0\":{\"key\":\"Bal\",\"type\":\"uint256\",\"default\":\"0\"}}},"
      "{\"to\":\"0x1f98431c8ad98523631ae4a59f267346ea31f984\",\"function\":\"slot0()\","
      "\"saveAs\":{\"0\":{\"key\":\"Sqrt\",\"type\":\"uint256\"},\"1\":{\"key\":\"Tick\",\"type\":\"int64\",\"default\":0},"
      "\"2\":{\"key\":\"Third\",\"type\":\"int64\",\"default\":-1}}}],"
      "\"rules\":[\"[Bal] == \\\"0\\\"\"],\"onValid\":{\"payload\":{\"s\":\"[Sqrt]\"}}}";
  xgr_step_result res;
  run(doc, "{\"Token\":\"0x3333333333333333333333333333333333333333\"}", &res);
  assert_int_equal(res.error.code, 0);
  assert_int_equal(res.nreads, 2);
  assert_string_equal(res.reads[0].error, "no backend configured");
  assert_int_equal(rt_get(res.extracted, "Bal").kind, XGR_VBIGINT);
  assert_int_equal(rt_get(res.extracted, "Tick").as.i, 0);
  assert_true(rt_has_soft(&res, "Sqrt"));  /* no default: soft-invalid, step forced invalid */
  assert_false(res.valid);
  xgr_step_result_free(&res);
  /* with a chain reader: slot 0 cast, slot 1 cast fails -> default, slot 2 out of range -> default */
  xgr_chain_reader cr = {.call = fake_chain, .ctx = NULL};
  xgr_step_ctx c2 = ctx;
  c2.chain = &cr;
  xgr_rule *r = rt_load(doc);
  xgr_value p = rt_json("{\"Token\":\"0x3333333333333333333333333333333333333333\"}");
  xgr_step_run(r, p, &c2, NULL, &res);
  assert_int_equal(res.error.code, 0);
  assert_string_equal(res.reads[0].error, "execution reverted");
  assert_null(res.reads[1].error);
  assert_int_equal(rt_get(res.extracted, "Sqrt").kind, XGR_VBIGINT);
  assert_int_equal(rt_get(res.extracted, "Tick").as.i, 0);
  assert_int_equal(rt_get(res.extracted, "Third").as.i, -1);
  assert_true(res.valid);  /* [Bal] == "0": a bigint equals its decimal string */
  json_t *j = xgr_step_result_to_json(&res);
  char *t = json_dumps(j, JSON_COMPACT);
  assert_non_null(strstr(t, "\"s\":\"79228162514264337593543950336\""));
  free(t);
  json_decref(j);
  xgr_step_result_free(&res);
  xgr_value_release(p);
  xgr_rule_free(r);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "shared")) {  /* test_rule_shared: the checks against ../shared */
    shared_dir_or_skip("test_rule_shared", "the public IterationOfPi rule file");
    const struct CMUnitTest shared[] = {cmocka_unit_test(test_public_iteration_file)};
    return cmocka_run_group_tests(shared, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_caps),          cmocka_unit_test(test_expr_len),
      cmocka_unit_test(test_schema_errors), cmocka_unit_test(test_iteration_of_pi),
      cmocka_unit_test(test_inputs),        cmocka_unit_test(test_actions),
      cmocka_unit_test(test_soft_invalid),  cmocka_unit_test(test_hidden_and_context),
      cmocka_unit_test(test_branch_outputs), cmocka_unit_test(test_contract_reads),
  };
  return cmocka_run_group_tests(tests, NULL, free_kept);
}
