/* test_orch.c — unit tests of the orchestration model: mode forms, `when` normalisation,
 * policies, every cap of XDaLa_Limits.md §4 at and beyond its limit, hashing of exact bytes,
 * reachability (loops, scopes), diagrams and lookups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "xgr/keccak.h"
#include "xgr/orch.h"

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) abort();
  return p;
}

/* A growing text buffer (sprintf into raw pointers trips gcc's null-destination analysis). */
typedef struct sb { char *p; size_t n, cap; } sb;
static void ap(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ap(sb *b, const char *fmt, ...) {
  va_list a;
  for (;;) {
    va_start(a, fmt);
    int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, a);
    va_end(a);
    if (k < 0) abort();
    if (b->p && (size_t)k < b->cap - b->n) {
      b->n += (size_t)k;
      return;
    }
    b->cap = b->cap * 2 + (size_t)k + 256;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
}

static xgr_orch *parse_ok(const char *s) {
  xgr_orch *o = NULL;
  xgr_error e;
  int rc = xgr_orch_parse(s, strlen(s), &o, &e, NULL);
  if (rc) fprintf(stderr, "unexpected error at %s: %s\n", e.path, e.message);
  assert_int_equal(rc, 0);
  assert_non_null(o);
  return o;
}

static void parse_fails(const char *s, int code, const char *path, const char *msg_part) {
  xgr_orch *o = NULL;
  xgr_error e;
  int rc = xgr_orch_parse(s, strlen(s), &o, &e, NULL);
  assert_null(o);
  if (rc != code || strcmp(e.path, path) || (msg_part && !strstr(e.message, msg_part)))
    fprintf(stderr, "got %s at '%s': %s\n", xgr_errcode_name(rc), e.path, e.message);
  assert_int_equal(rc, code);
  assert_string_equal(e.path, path);
  if (msg_part) assert_non_null(strstr(e.message, msg_part));
}

/* A fan-out document whose join is `join_json` over producers B1, C1, D1. */
static char *fanout(const char *join_extra) {
  static char buf[2048];
  snprintf(buf, sizeof buf,
           "{\"id\":\"t\",\"structure\":{\"A1\":{\"rule\":\"a\",\"onValid\":{\"spawns\":[\"B1\",\"C1\",\"D1\"],"
           "\"join\":{\"joinid\":\"J1\",%s\"from\":[{\"node\":\"B1\",\"when\":\"valid\"},{\"node\":\"C1\","
           "\"when\":\"\"},{\"node\":\"D1\",\"when\":\"both\"}]}}},\"B1\":{\"rule\":\"b\"},\"C1\":{\"rule\":\"c\"},"
           "\"D1\":{\"rule\":\"d\"},\"J1\":{\"rule\":\"j\"}}}",
           join_extra);
  return buf;
}

static unsigned k_of(const char *join_extra) {
  xgr_orch *o = parse_ok(fanout(join_extra));
  unsigned k = o->steps[0].branch[XGR_ON_VALID].join->k;
  xgr_orch_free(o);
  return k;
}

static void test_mode_forms(void **s) {
  (void)s;
  assert_int_equal(k_of("\"mode\":\"any\","), 1);
  assert_int_equal(k_of("\"mode\":\"all\","), 3);
  assert_int_equal(k_of("\"mode\":\"kofn\",\"k\":2,"), 2);
  assert_int_equal(k_of("\"mode\":{\"k\":2},"), 2);
  assert_int_equal(k_of("\"mode\":{\"kofn\":3},"), 3);
  parse_fails(fanout("\"mode\":{\"k\":4},"), XGR_EKRANGE, "structure.A1.onValid.join.mode.k", "1 <= k <= 3");
  parse_fails(fanout("\"mode\":\"kofn\",\"k\":0,"), XGR_EKRANGE, "structure.A1.onValid.join.k", "k is 0");
  parse_fails(fanout("\"mode\":\"kofn\","), XGR_ESCHEMA, "structure.A1.onValid.join.mode", "sibling");
  parse_fails(fanout("\"mode\":{\"k\":\"2\"},"), XGR_ESCHEMA, "structure.A1.onValid.join.mode.k", "positive integer");
  parse_fails(fanout("\"mode\":{\"k\":1,\"kofn\":1},"), XGR_ESCHEMA, "structure.A1.onValid.join.mode", NULL);
  parse_fails(fanout("\"mode\":3,"), XGR_ESCHEMA, "structure.A1.onValid.join.mode", "integer 3");
  parse_fails(fanout(""), XGR_ESCHEMA, "structure.A1.onValid.join.mode", "missing");
  parse_fails(fanout("\"mode\":\"exact\","), XGR_ELEGACY, "structure.A1.onValid.join.mode", "old (v0) document model");
}

static void test_when_and_policy(void **s) {
  (void)s;
  xgr_orch *o = parse_ok(fanout("\"mode\":\"any\","));
  const xgr_join *j = o->steps[0].branch[XGR_ON_VALID].join;
  assert_int_equal(j->from[0].when, XGR_WHEN_VALID);
  assert_int_equal(j->from[1].when, XGR_WHEN_ANY);   /* "" */
  assert_int_equal(j->from[2].when, XGR_WHEN_ANY);   /* "both" */
  assert_int_equal(j->policy, XGR_POLICY_DRAIN);
  assert_true(j->policy_defaulted);
  assert_string_equal(o->steps[j->target].id, "J1");
  xgr_orch_free(o);
  o = parse_ok(fanout("\"mode\":\"any\",\"waitonjoin\":\"kill\","));
  j = o->steps[0].branch[XGR_ON_VALID].join;
  assert_int_equal(j->policy, XGR_POLICY_KILL);
  assert_false(j->policy_defaulted);
  xgr_orch_free(o);
  parse_fails(fanout("\"mode\":\"any\",\"waitonjoin\":true,"), XGR_ELEGACY, "structure.A1.onValid.join.waitonjoin", NULL);
}

static void test_unknown_top_level_keys_ignored(void **s) {
  (void)s;
  xgr_orch *o = parse_ok("{\"name\":\"x\",\"meta\":{\"a\":[1,2]},\"bundleId\":7,\"id\":\"o\","
                         "\"structure\":{\"A\":{\"rule\":\"r\"}}}");
  assert_string_equal(o->id, "o");
  assert_int_equal(o->nsteps, 1);
  xgr_orch_free(o);
}

/* A document of exactly `size` bytes: a valid orchestration padded with spaces. */
static char *padded(size_t size) {
  const char *doc = "{\"id\":\"p\",\"structure\":{\"A\":{\"rule\":\"r\"}}}";
  char *b = xmalloc(size + 1);
  memset(b, ' ', size);
  memcpy(b, doc, strlen(doc));
  b[size] = '\0';
  return b;
}

static void test_cap_bytes(void **s) {
  (void)s;
  char *b = padded(XGR_MAX_OSTC_BYTES);
  xgr_orch *o = parse_ok(b);
  xgr_orch_free(o);
  free(b);
  b = padded(XGR_MAX_OSTC_BYTES + 1);
  parse_fails(b, XGR_ELIMIT, "", "MaxOSTCBytes exceeded: document is 262145 bytes, maximum 262144");
  free(b);
}

/* n steps S0..S(n-1), each spawning the next (a ring). */
static char *ring(size_t n, size_t idlen) {
  sb b = {0};
  ap(&b, "{\"structure\":{");
  for (size_t i = 0; i < n; i++) {
    char id[80], next[80];
    snprintf(id, sizeof id, "S%0*zu", (int)(idlen - 1), i);
    snprintf(next, sizeof next, "S%0*zu", (int)(idlen - 1), (i + 1) % n);
    ap(&b, "%s\"%s\":{\"rule\":\"r\",\"onValid\":{\"spawns\":[\"%s\"]}}", i ? "," : "", id, next);
  }
  ap(&b, "}}");
  return b.p;
}

static void test_cap_steps_and_ids(void **s) {
  (void)s;
  char *b = ring(128, 4);
  xgr_orch *o = parse_ok(b);
  assert_int_equal(o->nsteps, 128);
  /* a ring: every step reaches every step, itself included */
  for (unsigned i = 0; i < 128; i += 17)
    for (unsigned k = 0; k < 128; k += 13) assert_true(xgr_stepset_has(&o->reach_all[i], k));
  xgr_orch_free(o);
  free(b);
  b = ring(129, 4);
  parse_fails(b, XGR_ELIMIT, "structure", "MaxSteps exceeded: 129 steps, maximum 128");
  free(b);
  b = ring(2, 64);
  o = parse_ok(b);
  xgr_orch_free(o);
  free(b);
  b = ring(2, 65);
  xgr_orch *none = NULL;
  xgr_error e;
  assert_int_equal(xgr_orch_parse(b, strlen(b), &none, &e, NULL), XGR_ELIMIT);
  assert_non_null(strstr(e.message, "MaxStepIdLen exceeded: step id is 65 characters, maximum 64"));
  free(b);
  parse_fails("{\"structure\":{\"\\u00c41\":{\"rule\":\"r\"}}}", XGR_EIDENT, "structure[\"\xc3\x84" "1\"]", "ASCII");
}

static char *branch_of(size_t nspawns, size_t nfrom) {
  sb b = {0};
  ap(&b, "{\"structure\":{\"A\":{\"rule\":\"r\",\"onValid\":{\"spawns\":[");
  for (size_t i = 0; i < nspawns; i++) ap(&b, "%s\"B%zu\"", i ? "," : "", i % 40);
  ap(&b, "]");
  if (nfrom) {
    ap(&b, ",\"join\":{\"joinid\":\"J\",\"mode\":\"any\",\"waitonjoin\":\"kill\",\"from\":[");
    for (size_t i = 0; i < nfrom; i++) ap(&b, "%s{\"node\":\"B%zu\"}", i ? "," : "", i);
    ap(&b, "]}");
  }
  ap(&b, "}},\"J\":{\"rule\":\"j\"}");
  for (size_t i = 0; i < 40; i++) ap(&b, ",\"B%zu\":{\"rule\":\"b\"}", i);
  ap(&b, "}}");
  return b.p;
}

static void test_cap_spawns_and_join_inputs(void **s) {
  (void)s;
  char *b = branch_of(32, 32);
  xgr_orch *o = parse_ok(b);
  assert_int_equal(o->steps[0].branch[0].nspawns, 32);
  assert_int_equal(o->steps[0].branch[0].join->n, 32);
  xgr_orch_free(o);
  free(b);
  b = branch_of(33, 0);
  parse_fails(b, XGR_ELIMIT, "structure.A.onValid.spawns", "MaxSpawnsPerBranch exceeded: 33 spawns, maximum 32");
  free(b);
  b = branch_of(32, 33);
  parse_fails(b, XGR_ELIMIT, "structure.A.onValid.join.from", "MaxJoinInputs exceeded: 33 join inputs, maximum 32");
  free(b);
}

static void test_hash_is_of_exact_bytes(void **s) {
  (void)s;
  const char *a = "{\"structure\":{\"A\":{\"rule\":\"r\"}}}";
  const char *b = "{ \"structure\": {\"A\": {\"rule\": \"r\"}}}";
  xgr_orch *oa = parse_ok(a), *ob = parse_ok(b);
  char h[67];
  xgr_keccak256_hex(a, strlen(a), h);
  assert_string_equal(oa->hash, h);
  assert_string_not_equal(oa->hash, ob->hash);
  assert_int_equal(strlen(oa->hash), 66);
  xgr_orch_free(oa);
  xgr_orch_free(ob);
}

static void test_reachability_scopes(void **s) {
  (void)s;
  /* S opens join OUT over A, B; A opens inner join IN over X, Y; X loops on invalid; B loops. */
  xgr_orch *o = parse_ok(
      "{\"structure\":{"
      "\"S\":{\"rule\":\"s\",\"onValid\":{\"spawns\":[\"A\",\"B\"],\"join\":{\"joinid\":\"OUT\",\"mode\":\"all\",\"waitonjoin\":\"drain\",\"from\":[{\"node\":\"IN\"},{\"node\":\"B\"}]}}},"
      "\"A\":{\"rule\":\"a\",\"onValid\":{\"spawns\":[\"X\",\"Y\"],\"join\":{\"joinid\":\"IN\",\"mode\":\"any\",\"waitonjoin\":\"kill\",\"from\":[{\"node\":\"X\"},{\"node\":\"Y\"}]}}},"
      "\"X\":{\"rule\":\"x\",\"onInvalid\":{\"spawns\":[\"X\"]}},\"Y\":{\"rule\":\"y\"},\"IN\":{\"rule\":\"i\"},"
      "\"B\":{\"rule\":\"b\",\"onInvalid\":{\"spawns\":[\"B\"]}},\"OUT\":{\"rule\":\"o\"}}}");
  int S = xgr_orch_find(o, "S"), A = xgr_orch_find(o, "A"), X = xgr_orch_find(o, "X"),
      Y = xgr_orch_find(o, "Y"), IN = xgr_orch_find(o, "IN"), B = xgr_orch_find(o, "B"), OUT = xgr_orch_find(o, "OUT");
  assert_true(S >= 0 && A >= 0 && X >= 0 && Y >= 0 && IN >= 0 && B >= 0 && OUT >= 0);
  assert_int_equal(xgr_orch_find(o, "nope"), -1);
  /* along all edges S reaches everything but itself */
  assert_true(xgr_stepset_has(&o->reach_all[S], (unsigned)X));
  assert_false(xgr_stepset_has(&o->reach_all[S], (unsigned)S));
  /* self loops */
  assert_true(xgr_stepset_has(&o->reach_all[X], (unsigned)X));
  assert_true(xgr_stepset_has(&o->reach_scope[B], (unsigned)B));
  /* scope: A's join branch keeps IN in A's scope, but X and Y open a new scope */
  assert_true(xgr_orch_can_reach_in_scope(o, (unsigned)A, (unsigned)IN));
  assert_false(xgr_orch_can_reach_in_scope(o, (unsigned)A, (unsigned)X));
  assert_true(xgr_orch_can_reach_in_scope(o, (unsigned)S, (unsigned)OUT));
  assert_false(xgr_orch_can_reach_in_scope(o, (unsigned)S, (unsigned)B));
  assert_true(xgr_orch_can_reach_in_scope(o, (unsigned)Y, (unsigned)Y));   /* reflexive */
  assert_false(xgr_orch_can_reach_in_scope(o, (unsigned)Y, (unsigned)X));
  xgr_diags d;
  xgr_diags_init(&d);
  assert_int_equal(xgr_orch_analyze(o, &d), 0);
  xgr_diags_free(&d);
  xgr_orch_free(o);
}

static void test_graph(void **s) {
  (void)s;
  xgr_orch *o = parse_ok(fanout("\"mode\":{\"k\":2},\"waitonjoin\":\"kill\","));
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(xgr_orch_graph(o, XGR_GRAPH_MERMAID, f), 0);
  fclose(f);
  assert_non_null(strstr(buf, "flowchart TD"));
  assert_non_null(strstr(buf, "join J1 · 2 of 3 · kill"));
  assert_non_null(strstr(buf, "-->|valid|"));
  assert_non_null(strstr(buf, "-->|any|"));
  free(buf);
  f = open_memstream(&buf, &len);
  assert_int_equal(xgr_orch_graph(o, XGR_GRAPH_DOT, f), 0);
  fclose(f);
  assert_non_null(strstr(buf, "digraph orchestration"));
  assert_non_null(strstr(buf, "shape=hexagon"));
  free(buf);
  xgr_orch_free(o);
}

static void test_garbage_never_crashes(void **s) {
  (void)s;
  static const char *const docs[] = {"", "null", "[]", "\"x\"", "{", "{\"structure\":null}",
                                     "{\"structure\":{\"A\":null}}", "{\"structure\":{\"A\":{\"rule\":\"r\",\"onValid\":{\"join\":7}}}}",
                                     "{\"structure\":{\"A\":{\"rule\":\"r\",\"onValid\":{\"join\":{\"from\":[null,1,\"A\"]}}}}}",
                                     "{\"a\":1,\"a\":2}"};
  for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
    xgr_orch *o = NULL;
    xgr_error e;
    xgr_diags d;
    xgr_diags_init(&d);
    assert_true(xgr_orch_parse(docs[i], strlen(docs[i]), &o, &e, &d) < 0);
    assert_null(o);
    assert_true(d.n > 0);
    assert_true(e.message[0] != '\0');
    xgr_diags_free(&d);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_mode_forms),
    cmocka_unit_test(test_when_and_policy),
    cmocka_unit_test(test_unknown_top_level_keys_ignored),
    cmocka_unit_test(test_cap_bytes),
    cmocka_unit_test(test_cap_steps_and_ids),
    cmocka_unit_test(test_cap_spawns_and_join_inputs),
    cmocka_unit_test(test_hash_is_of_exact_bytes),
    cmocka_unit_test(test_reachability_scopes),
    cmocka_unit_test(test_graph),
    cmocka_unit_test(test_garbage_never_crashes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
