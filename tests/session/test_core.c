/* test_core.c — the session core on synthetic step outcomes (no rules, no I/O): joins, scopes,
 * policies, cascades, gates, kill/pause/wake and memory release. A tiny deterministic loop runs
 * one process at a time; `decide` picks each step's outcome from a script keyed by step id. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "xgr/session.h"

typedef struct rec { char step[16]; int status; int valid; char reason[24]; int join_outcome; } rec;

typedef struct world {
  xgr_orch *o;
  xgr_session *s;
  xgr_effects fx;
  int64_t now;
  rec recs[4096];         /* last state per iter */
  uint64_t maxiter;
  const char *script;     /* "STEP=v|i|e|a|c,..." outcome per step id; missing: valid */
  int steps_run;
} world;

static xgr_outcome_kind outcome_for(world *w, const char *step) {
  const char *p = w->script;
  size_t n = strlen(step);
  while (p && *p) {
    if (!strncmp(p, step, n) && p[n] == '=') {
      switch (p[n + 1]) {
        case 'i': return XGR_OUTCOME_INVALID;
        case 'e': return XGR_OUTCOME_HARD_ERROR;
        case 'a': return XGR_OUTCOME_ABORT_STEP;
        case 'c': return XGR_OUTCOME_CANCEL_SESSION;
        default: return XGR_OUTCOME_VALID;
      }
    }
    p = strchr(p, ',');
    if (p) p++;
  }
  return XGR_OUTCOME_VALID;
}

static void absorb(world *w) {
  for (size_t i = 0; i < w->fx.n; i++) {
    const xgr_effect *e = &w->fx.items[i];
    if (e->kind != XGR_FX_PROC && e->kind != XGR_FX_JOIN) continue;
    const xgr_proc *p = e->proc;
    rec *r = &w->recs[p->iter];
    snprintf(r->step, sizeof r->step, "%s", w->o->steps[p->step].id);
    r->status = p->status;
    r->valid = p->valid;
    snprintf(r->reason, sizeof r->reason, "%s", xgr_abort_reason_name(p->abort_reason));
    if (p->join) r->join_outcome = p->join->outcome;
    if (p->iter > w->maxiter) w->maxiter = p->iter;
  }
}

static void w_init(world *w, const char *doc, const char *script) {
  memset(w, 0, sizeof *w);
  xgr_error e;
  assert_int_equal(xgr_orch_parse(doc, strlen(doc), &w->o, &e, NULL), 0);
  w->s = xgr_session_new(w->o, "0xowner", 7, NULL);
  xgr_effects_init(&w->fx);
  w->script = script;
}

/* Run until nothing is runnable or max steps. */
static void w_run(world *w, int max) {
  for (int i = 0; i < max; i++) {
    xgr_effects_reset(&w->fx);
    int64_t due = xgr_session_next_due(w->s);
    if (due == XGR_NEVER) break;
    if (due > w->now) w->now = due;
    if (xgr_session_promote(w->s, w->now, 1, &w->fx) == 0) { absorb(w); continue; }
    const xgr_proc *p = NULL;
    for (size_t k = 0; k < w->fx.n; k++) if (w->fx.items[k].kind == XGR_FX_RUN_STEP) p = w->fx.items[k].proc;
    absorb(w);
    if (!p) continue;
    uint64_t iter = p->iter;
    xgr_value eff = xgr_value_retain(p->payload);
    xgr_step_outcome o = {.kind = outcome_for(w, w->o->steps[p->step].id), .effective = eff,
                          .outcome_payload = xgr_value_null(), .error = "boom"};
    xgr_effects_reset(&w->fx);
    assert_int_equal(xgr_session_step_result(w->s, iter, &o, w->now, &w->fx, NULL), 0);
    xgr_value_release(eff);
    absorb(w);
    w->steps_run++;
  }
  xgr_effects_reset(&w->fx);
}

static void w_start(world *w, const char *step) {
  xgr_value pl = xgr_map_new(1);
  xgr_map_set_str(pl, "x", 1, xgr_value_int(1));
  assert_int_equal(xgr_session_start(w->s, (unsigned)xgr_orch_find(w->o, step), pl, 0, &w->fx, NULL), 0);
  xgr_value_release(pl);
  absorb(w);
}

static void w_free(world *w) {
  xgr_effects_free(&w->fx);
  xgr_session_free(w->s);
  xgr_orch_free(w->o);
}

static void expect_proc(world *w, uint64_t iter, const char *step, int status, int valid) {
  rec *r = &w->recs[iter];
  if (strcmp(r->step, step) || r->status != status || r->valid != valid)
    fprintf(stderr, "1:%llu is %s %s valid=%d (%s); expected %s %s valid=%d\n", (unsigned long long)iter, r->step,
            xgr_proc_status_name(r->status), r->valid, r->reason, step, xgr_proc_status_name(status), valid);
  assert_string_equal(r->step, step);
  assert_int_equal(r->status, status);
  assert_int_equal(r->valid, valid);
}

#define DONE XGR_PROC_DONE
#define ABORTED XGR_PROC_ABORTED

static const char *J(const char *producers, const char *join) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s%s", producers, join);
  return buf;
}

static const char *seed61 =
    "{\"structure\":{\"A1\":{\"rule\":\"a\",\"onValid\":{\"spawns\":[\"D1\"],\"join\":{\"joinid\":\"J1\",\"mode\":\"any\","
    "\"waitonjoin\":\"drain\",\"from\":[{\"node\":\"D1\",\"when\":\"valid\"}]}}},\"D1\":{\"rule\":\"d\"},\"J1\":{\"rule\":\"j\"}}}";

static void test_seed001_6_1(void **st) {
  (void)st;
  world w;
  w_init(&w, seed61, "D1=i");   /* D1 invalid: no piece; D1 gone, nothing can reach D1 -> abort J1 */
  w_start(&w, "A1");
  w_run(&w, 100);
  expect_proc(&w, 1, "A1", DONE, 1);
  expect_proc(&w, 2, "J1", ABORTED, -1);
  expect_proc(&w, 3, "D1", DONE, 0);
  assert_int_equal(w.recs[2].join_outcome, XGR_JOIN_UNFULFILLABLE);
  assert_int_equal(xgr_session_result_of(w.s), XGR_RESULT_COMPLETED);
  assert_int_equal(xgr_session_live(w.s), 0);
  w_free(&w);
  w_init(&w, seed61, "D1=v");
  w_start(&w, "A1");
  w_run(&w, 100);
  expect_proc(&w, 2, "J1", DONE, 1);
  assert_int_equal(w.recs[2].join_outcome, XGR_JOIN_SATISFIED);
  w_free(&w);
}

static const char *seed62 =
    "{\"structure\":{\"A1\":{\"rule\":\"a\",\"onValid\":{\"spawns\":[\"B1\",\"E1\"],\"join\":{\"joinid\":\"J1\",\"mode\":\"all\","
    "\"waitonjoin\":\"kill\",\"from\":[{\"node\":\"B1\",\"when\":\"any\"},{\"node\":\"E1\",\"when\":\"valid\"}]}}},"
    "\"B1\":{\"rule\":\"b\"},\"E1\":{\"rule\":\"e\"},\"J1\":{\"rule\":\"j\"}}}";

static void test_seed001_6_2(void **st) {
  (void)st;
  world w;
  w_init(&w, seed62, "B1=i,E1=e");
  w_start(&w, "A1");
  w_run(&w, 100);
  expect_proc(&w, 2, "J1", ABORTED, -1);
  expect_proc(&w, 3, "B1", DONE, 0);
  expect_proc(&w, 4, "E1", ABORTED, -1);
  assert_int_equal(w.recs[2].join_outcome, XGR_JOIN_UNFULFILLABLE);
  w_free(&w);
}

static const char *seed63 =
    "{\"structure\":{\"A1\":{\"rule\":\"a\",\"onValid\":{\"spawns\":[\"B1\"],\"join\":{\"joinid\":\"J1\",\"mode\":{\"k\":2},"
    "\"waitonjoin\":\"kill\",\"from\":[{\"node\":\"B1\",\"when\":\"valid\"},{\"node\":\"C1\",\"when\":\"valid\"}]}}},"
    "\"B1\":{\"rule\":\"b\",\"onValid\":{\"spawns\":[\"C1\"]}},\"C1\":{\"rule\":\"c\",\"onValid\":{\"spawns\":[\"B1\"]}},"
    "\"J1\":{\"rule\":\"j\"}}}";

static void test_seed001_6_3_backloop_then_kill(void **st) {
  (void)st;
  world w;
  w_init(&w, seed63, "");
  w_start(&w, "A1");
  w_run(&w, 100);
  /* A1, J1(2), B1(3) -> C1(4) -> join satisfied; C1 spawned B1(5) which is killed while waiting */
  expect_proc(&w, 3, "B1", DONE, 1);
  expect_proc(&w, 4, "C1", DONE, 1);
  expect_proc(&w, 5, "B1", ABORTED, -1);
  assert_string_equal(w.recs[5].reason, "join kill");
  expect_proc(&w, 2, "J1", DONE, 1);
  assert_int_equal(w.steps_run, 4);
  w_free(&w);
}

static const char *seed74 =
    "{\"structure\":{\"A1\":{\"rule\":\"a\",\"onValid\":{\"spawns\":[\"G1\",\"H1\"],\"join\":{\"joinid\":\"J1\",\"mode\":\"any\","
    "\"waitonjoin\":\"kill\",\"from\":[{\"node\":\"G1\",\"when\":\"valid\"},{\"node\":\"H1\",\"when\":\"valid\"}]}}},"
    "\"G1\":{\"rule\":\"g\"},\"H1\":{\"rule\":\"h\"},"
    "\"J1\":{\"rule\":\"j1\",\"onValid\":{\"spawns\":[\"P1\",\"Q1\"],\"join\":{\"joinid\":\"J2\",\"mode\":\"all\","
    "\"waitonjoin\":\"kill\",\"from\":[{\"node\":\"P1\",\"when\":\"valid\"},{\"node\":\"Q1\",\"when\":\"valid\"}]}}},"
    "\"P1\":{\"rule\":\"p\"},\"Q1\":{\"rule\":\"q\"},\"J2\":{\"rule\":\"j2\",\"onValid\":{\"spawns\":[\"Z1\"]}},\"Z1\":{\"rule\":\"z\"}}}";

static void test_seed003_7_4(void **st) {
  (void)st;
  world w;
  w_init(&w, seed74, "");
  w_start(&w, "A1");
  w_run(&w, 100);
  /* 1 A1, 2 J1, 3 G1, 4 H1 (killed after G1 satisfies any), 5 J2, 6 P1, 7 Q1, 8 Z1 */
  expect_proc(&w, 3, "G1", DONE, 1);
  expect_proc(&w, 4, "H1", ABORTED, -1);
  expect_proc(&w, 2, "J1", DONE, 1);
  expect_proc(&w, 5, "J2", DONE, 1);
  expect_proc(&w, 8, "Z1", DONE, 1);
  assert_int_equal(xgr_session_result_of(w.s), XGR_RESULT_COMPLETED);
  w_free(&w);
}

static void test_pitfall_aborts_at_once(void **st) {
  (void)st;
  const char *doc =
      "{\"structure\":{\"A1\":{\"rule\":\"a\",\"onValid\":{\"spawns\":[\"G1\",\"H1\"],\"join\":{\"joinid\":\"J1\",\"mode\":\"any\","
      "\"waitonjoin\":\"kill\",\"from\":[{\"node\":\"G1\",\"when\":\"valid\"},{\"node\":\"H1\",\"when\":\"valid\"}]}}},"
      "\"G1\":{\"rule\":\"g\",\"onValid\":{\"spawns\":[\"P1\"]}},\"H1\":{\"rule\":\"h\",\"onValid\":{\"spawns\":[\"Q1\"]}},"
      "\"J1\":{\"rule\":\"j1\",\"onValid\":{\"join\":{\"joinid\":\"J2\",\"mode\":\"all\",\"waitonjoin\":\"kill\","
      "\"from\":[{\"node\":\"P1\",\"when\":\"valid\"},{\"node\":\"Q1\",\"when\":\"valid\"}]}}},"
      "\"P1\":{\"rule\":\"p\"},\"Q1\":{\"rule\":\"q\"},\"J2\":{\"rule\":\"j2\"}}}";
  world w;
  w_init(&w, doc, "");
  w_start(&w, "A1");
  w_run(&w, 100);
  /* J1 runs once G1 delivered; its branch opens J2 with no producers: unfulfillable at once */
  rec *j2 = NULL;
  for (uint64_t i = 1; i <= w.maxiter; i++) if (!strcmp(w.recs[i].step, "J2")) j2 = &w.recs[i];
  assert_non_null(j2);
  assert_int_equal(j2->status, ABORTED);
  assert_int_equal(j2->join_outcome, XGR_JOIN_UNFULFILLABLE);
  w_free(&w);
}

/* Nested: the inner join's target aborts (unfulfillable), which fails the outer join. */
static void test_cascade_upward(void **st) {
  (void)st;
  const char *doc =
      "{\"structure\":{\"S\":{\"rule\":\"s\",\"onValid\":{\"spawns\":[\"A\"],\"join\":{\"joinid\":\"OUT\",\"mode\":\"all\","
      "\"waitonjoin\":\"kill\",\"from\":[{\"node\":\"IN\",\"when\":\"valid\"}]}}},"
      "\"A\":{\"rule\":\"a\",\"onValid\":{\"spawns\":[\"X\",\"Y\"],\"join\":{\"joinid\":\"IN\",\"mode\":\"all\",\"waitonjoin\":\"kill\","
      "\"from\":[{\"node\":\"X\",\"when\":\"valid\"},{\"node\":\"Y\",\"when\":\"valid\"}]}}},"
      "\"X\":{\"rule\":\"x\"},\"Y\":{\"rule\":\"y\"},\"IN\":{\"rule\":\"in\"},\"OUT\":{\"rule\":\"out\"}}}";
  world w;
  w_init(&w, doc, "X=e");
  w_start(&w, "S");
  w_run(&w, 100);
  /* 1 S, 2 OUT, 3 A, 4 IN, 5 X (error), 6 Y (killed by IN's kill policy) */
  expect_proc(&w, 5, "X", ABORTED, -1);
  expect_proc(&w, 4, "IN", ABORTED, -1);
  expect_proc(&w, 6, "Y", ABORTED, -1);
  expect_proc(&w, 2, "OUT", ABORTED, -1);
  assert_int_equal(w.recs[2].join_outcome, XGR_JOIN_UNFULFILLABLE);
  w_free(&w);
}

/* An endless loop frees terminal processes: memory stays flat. */
static void test_endless_loop_frees(void **st) {
  (void)st;
  const char *doc = "{\"structure\":{\"L\":{\"rule\":\"l\",\"onValid\":{\"spawns\":[\"L\"]}}}}";
  world w;
  w_init(&w, doc, "");
  w_start(&w, "L");
  for (int round = 0; round < 10; round++) {
    w_run(&w, 300);
    assert_int_equal(xgr_session_live(w.s), 1);
  }
  assert_int_equal(w.steps_run, 3000);
  assert_int_equal(xgr_session_next_iter(w.s), 3002);
  xgr_error e;
  xgr_effects_reset(&w.fx);
  assert_int_equal(xgr_session_kill(w.s, 0, w.now, &w.fx, &e), 0);
  assert_int_equal(xgr_session_result_of(w.s), XGR_RESULT_KILLED);
  w_free(&w);
}

/* An endless loop through a join that closes before all its producers ended (mode any, drain):
 * the join's scope is released when its last member ends. Before, every round left an empty
 * scope behind (the core's invariant check, on in this build, catches a kept empty scope). */
static void test_endless_join_loop_frees_scopes(void **st) {
  (void)st;
  const char *doc =
      "{\"structure\":{\"L\":{\"rule\":\"l\",\"onValid\":{\"spawns\":[\"A\",\"B\"],\"join\":{\"joinid\":\"J\","
      "\"mode\":\"any\",\"waitonjoin\":\"drain\",\"from\":[{\"node\":\"A\",\"when\":\"valid\"},"
      "{\"node\":\"B\",\"when\":\"valid\"}]}}},\"A\":{\"rule\":\"a\"},\"B\":{\"rule\":\"b\"},"
      "\"J\":{\"rule\":\"j\",\"onValid\":{\"spawns\":[\"L\"]}}}}";
  world w;
  w_init(&w, doc, "");
  w_start(&w, "L");
  /* one round: L, A (satisfies J), B (drains into the closed join), J -> next L */
  for (int round = 0; round < 10; round++) {
    w_run(&w, 400);
    assert_true(xgr_session_live(w.s) <= 4);
  }
  assert_int_equal(w.steps_run, 4000);
  xgr_session_state ss;
  xgr_session_state_get(w.s, &ss);
  assert_int_equal(ss.next_group, 1001);   /* a thousand joins opened and closed */
  w_free(&w);
}

static void test_cancel_session_and_abort_step(void **st) {
  (void)st;
  const char *doc = "{\"structure\":{\"A\":{\"rule\":\"a\",\"onValid\":{\"spawns\":[\"B\",\"C\"]}},\"B\":{\"rule\":\"b\"},"
                    "\"C\":{\"rule\":\"c\"}}}";
  world w;
  w_init(&w, doc, "B=c");
  w_start(&w, "A");
  w_run(&w, 100);
  expect_proc(&w, 2, "B", ABORTED, -1);
  expect_proc(&w, 3, "C", ABORTED, -1);
  assert_string_equal(w.recs[3].reason, "cancelSession");
  assert_int_equal(xgr_session_result_of(w.s), XGR_RESULT_KILLED);
  w_free(&w);
  w_init(&w, doc, "B=a");
  w_start(&w, "A");
  w_run(&w, 100);
  expect_proc(&w, 2, "B", ABORTED, -1);
  expect_proc(&w, 3, "C", DONE, 1);
  assert_int_equal(xgr_session_result_of(w.s), XGR_RESULT_COMPLETED);
  w_free(&w);
}

/* A delivery into an open join is a change of the target: it comes out as a PROC effect. */
static void test_delivery_emits_target_change(void **st) {
  (void)st;
  world w;
  w_init(&w, seed63, "");
  w_start(&w, "A1");
  w_run(&w, 2);   /* A1, then B1 (delivers; the 2-of-2 join stays open) */
  const xgr_proc *t = xgr_session_find(w.s, 2);
  assert_non_null(t);
  assert_false(t->join->closed);
  assert_int_not_equal(t->join->inbox[0].kind, XGR_VNULL);
  /* run B1's result again by hand to see the effects of one call */
  w_free(&w);
  w_init(&w, seed63, "");
  w_start(&w, "A1");
  w_run(&w, 1);
  xgr_effects_reset(&w.fx);
  assert_int_equal(xgr_session_promote(w.s, 0, 1, &w.fx), 1);
  uint64_t b1 = w.fx.items[0].proc->iter;
  xgr_value pl = xgr_value_retain(w.fx.items[0].proc->payload);
  xgr_effects_reset(&w.fx);
  xgr_step_outcome o = {.kind = XGR_OUTCOME_VALID, .effective = pl, .outcome_payload = xgr_value_null()};
  assert_int_equal(xgr_session_step_result(w.s, b1, &o, 0, &w.fx, NULL), 0);
  int target_changed = 0;
  for (size_t i = 0; i < w.fx.n; i++)
    if (w.fx.items[i].kind == XGR_FX_PROC && w.fx.items[i].proc->iter == 2) target_changed = 1;
  assert_true(target_changed);
  xgr_value_release(pl);
  w_free(&w);
}

/* A join target's state keeps each delivered piece's text: writing it twice gives the same text
 * (the piece's JSON, as xgr_value_to_json_text writes it), a clone writes its own texts, and the
 * next delivery adds its piece to the kept one. Freeing both sessions frees every text once (ASan). */
static void test_join_text_kept(void **st) {
  (void)st;
  world w;
  w_init(&w, seed63, "");
  w_start(&w, "A1");
  w_run(&w, 2);   /* A1, then B1 delivers; the 2-of-2 join stays open */
  xgr_proc *t = (xgr_proc *)xgr_session_find(w.s, 2);
  assert_non_null(t);
  const xgr_orch *o = xgr_session_orch(w.s);
  assert_null(t->join->inbox_text[0]);
  char *a = xgr_session_join_to_json(o, t->join);
  assert_non_null(t->join->inbox_text[0]);
  char *piece = xgr_value_to_json_text(t->join->inbox[0], 0, NULL);
  assert_string_equal(t->join->inbox_text[0], piece);
  assert_non_null(strstr(a, piece));
  char *b = xgr_session_join_to_json(o, t->join);
  assert_string_equal(a, b);
  xgr_session *c = xgr_session_clone(w.s);
  const xgr_proc *ct = xgr_session_find(c, 2);
  assert_null(ct->join->inbox_text[0]);
  char *cc = xgr_session_join_to_json(o, ct->join);
  assert_string_equal(a, cc);
  xgr_session_free(c);
  w_run(&w, 1);   /* the second piece closes the join */
  t = (xgr_proc *)xgr_session_find(w.s, 2);
  assert_non_null(t);
  char *d = xgr_session_join_to_json(o, t->join);
  assert_non_null(strstr(d, piece));   /* the kept text of the first piece */
  assert_non_null(t->join->inbox_text[1]);
  assert_non_null(strstr(d, t->join->inbox_text[1]));
  assert_true(t->join->closed);
  free(d);
  w_run(&w, 100);
  free(a);
  free(b);
  free(cc);
  free(piece);
  w_free(&w);
}

/* xgr_session_join_write writes what xgr_session_join_to_json returns, snprintf's way: the whole
 * length is returned, a short buffer gets a cut text with its NUL, cap 0 writes nothing, and
 * something that is not a join target of the orchestration writes "" and returns 0. */
static void test_join_write(void **st) {
  (void)st;
  world w;
  w_init(&w, seed63, "");
  w_start(&w, "A1");
  w_run(&w, 2);   /* A1, then B1 delivers; the 2-of-2 join stays open */
  xgr_proc *t = (xgr_proc *)xgr_session_find(w.s, 2);
  assert_non_null(t);
  const xgr_orch *o = xgr_session_orch(w.s);
  char *want = xgr_session_join_to_json(o, t->join);
  size_t n = strlen(want);
  assert_int_equal(xgr_session_join_write(o, t->join, NULL, 0), n);
  char *full = malloc(n + 1);
  assert_int_equal(xgr_session_join_write(o, t->join, full, n + 1), n);
  assert_string_equal(full, want);
  char cut[10];
  memset(cut, 'x', sizeof cut);
  assert_int_equal(xgr_session_join_write(o, t->join, cut, sizeof cut), n);
  assert_int_equal(strlen(cut), sizeof cut - 1);
  assert_memory_equal(cut, want, sizeof cut - 1);
  char one[1] = {'x'};
  assert_int_equal(xgr_session_join_write(o, t->join, one, 1), n);
  assert_int_equal(one[0], '\0');
  char none[4] = "abc";
  assert_int_equal(xgr_session_join_write(o, NULL, none, sizeof none), 0);
  assert_string_equal(none, "");
  assert_null(xgr_session_join_to_json(o, NULL));
  free(full);
  free(want);
  w_run(&w, 100);
  w_free(&w);
}

static void test_pid_parse(void **st) {
  (void)st;
  uint64_t r, i;
  assert_int_equal(xgr_pid_parse("12:3", &r, &i), 0);
  assert_int_equal(r, 12);
  assert_int_equal(i, 3);
  assert_int_equal(xgr_pid_parse("12", &r, &i), 0);
  assert_int_equal(i, 0);
  assert_int_equal(xgr_pid_parse("12:", &r, &i), XGR_EINVAL);
  assert_int_equal(xgr_pid_parse("x", &r, &i), XGR_EINVAL);
  assert_int_equal(xgr_pid_parse("0:1", &r, &i), XGR_EINVAL);
  assert_int_equal(xgr_pid_parse("1:2:3", &r, &i), XGR_EINVAL);
  assert_int_equal(xgr_pid_parse("-1", &r, &i), XGR_EINVAL);
}

/* A session paused while its last step runs: the step finishes, the session ends, and an ended
 * session is not paused (the faults suite saw getSession answer "paused": true for a completed
 * session whose pause came during its last step). A pause that finds a waiting process holds it. */
static void test_pause_during_last_step(void **st) {
  (void)st;
  world w;
  w_init(&w, "{\"structure\":{\"A1\":{\"rule\":\"a\"}}}", "");
  w_start(&w, "A1");
  xgr_effects_reset(&w.fx);
  assert_int_equal(xgr_session_promote(w.s, 0, 1, &w.fx), 1);   /* A1 runs */
  xgr_effects_reset(&w.fx);
  assert_int_equal(xgr_session_pause(w.s, 0, true, 0, &w.fx, NULL), 0);
  xgr_session_state ps;
  xgr_session_state_get(w.s, &ps);
  assert_true(ps.paused);
  xgr_value eff = xgr_value_retain(xgr_session_find(w.s, 1)->payload);
  xgr_step_outcome o = {.kind = XGR_OUTCOME_VALID, .effective = eff, .outcome_payload = xgr_value_null()};
  xgr_effects_reset(&w.fx);
  assert_int_equal(xgr_session_step_result(w.s, 1, &o, 0, &w.fx, NULL), 0);
  xgr_value_release(eff);
  assert_int_equal(xgr_session_result_of(w.s), XGR_RESULT_COMPLETED);
  xgr_session_state_get(w.s, &ps);
  assert_false(ps.paused);
  w_free(&w);
}

/* Retry (issue 36): each refusal names the field that decided and leaves the session unchanged;
 * an accepted retry is a new waiting process of the same scope, child of the aborted one. */
static void test_retry_refusals(void **st) {
  (void)st;
  world w;
  w_init(&w, "{\"structure\":{\"A1\":{\"rule\":\"a\",\"onValid\":{\"spawns\":[\"B1\",\"C1\"]}},"
             "\"B1\":{\"rule\":\"b\"},\"C1\":{\"rule\":\"c\"}}}", "B1=e,C1=a");
  w_start(&w, "A1");
  w_run(&w, 100);   /* B1 (1:2) hard error, C1 (1:3) abortStep: the session completed */
  expect_proc(&w, 2, "B1", ABORTED, -1);
  xgr_value pl = xgr_map_new(1);
  xgr_retry_of r = {.iter = 2, .step = (unsigned)xgr_orch_find(w.o, "B1"), .status = XGR_PROC_ABORTED,
                    .reason = XGR_ABORT_ERROR, .payload = pl};
  xgr_error e;
  uint64_t it = 0;
  assert_int_equal(xgr_session_retry(w.s, &r, xgr_value_null(), 5, &w.fx, &it, &e), XGR_ESTATE);
  assert_string_equal(e.path, "sessionId");
  assert_non_null(strstr(e.message, "has ended (completed)"));
  w_free(&w);

  w_init(&w, "{\"structure\":{\"A1\":{\"rule\":\"a\",\"onValid\":{\"spawns\":[\"B1\",\"C1\"]}},"
             "\"B1\":{\"rule\":\"b\"},\"C1\":{\"rule\":\"c\"}}}", "B1=e,C1=a");
  w_start(&w, "A1");
  xgr_effects_reset(&w.fx);
  assert_int_equal(xgr_session_pause(w.s, 0, true, 0, &w.fx, NULL), 0);   /* keep the session alive */
  xgr_effects_reset(&w.fx);
  assert_int_equal(xgr_session_pause(w.s, 0, false, 0, &w.fx, NULL), 0);
  xgr_effects_reset(&w.fx);
  assert_int_equal(xgr_session_promote(w.s, 0, 1, &w.fx), 1);   /* A1 */
  xgr_value eff = xgr_value_retain(xgr_session_find(w.s, 1)->payload);
  xgr_step_outcome ok = {.kind = XGR_OUTCOME_VALID, .effective = eff, .outcome_payload = xgr_value_null(), .wait_sec = -1};
  xgr_effects_reset(&w.fx);
  assert_int_equal(xgr_session_step_result(w.s, 1, &ok, 0, &w.fx, NULL), 0);   /* B1, C1 wait for a wake-up */
  xgr_value_release(eff);
  r.reason = XGR_ABORT_STEP;
  assert_int_equal(xgr_session_retry(w.s, &r, xgr_value_null(), 5, &w.fx, &it, &e), XGR_ESTATE);
  assert_string_equal(e.path, "pid");   /* B1 (1:2) is live */
  assert_non_null(strstr(e.message, "is waiting"));
  xgr_effects_reset(&w.fx);
  assert_int_equal(xgr_session_kill(w.s, 2, 1, &w.fx, NULL), 0);
  assert_int_equal(xgr_session_retry(w.s, &r, xgr_value_null(), 5, &w.fx, &it, &e), XGR_ESTATE);
  assert_non_null(strstr(e.message, "aborted by abortStep"));
  r.reason = XGR_ABORT_KILL;
  assert_int_equal(xgr_session_retry(w.s, &r, xgr_value_int(3), 5, &w.fx, &it, &e), XGR_EINVAL);
  assert_string_equal(e.path, "payload");
  r.iter = 99;
  assert_int_equal(xgr_session_retry(w.s, &r, xgr_value_null(), 5, &w.fx, &it, &e), XGR_ENOTFOUND);
  r.iter = 2;
  xgr_effects_reset(&w.fx);
  assert_int_equal(xgr_session_retry(w.s, &r, xgr_value_null(), 5, &w.fx, &it, &e), 0);
  assert_int_equal(it, 4);
  const xgr_proc *np = xgr_session_find(w.s, 4);
  assert_non_null(np);
  assert_int_equal(np->parent_iter, 2);
  assert_int_equal(np->status, XGR_PROC_WAITING);
  assert_int_equal(np->next_wake_at, 5);
  assert_int_equal(xgr_session_next_due(w.s), 5);
  xgr_value_release(pl);
  w_free(&w);
}

int main(void) {
  (void)J;
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_seed001_6_1),
    cmocka_unit_test(test_seed001_6_2),
    cmocka_unit_test(test_seed001_6_3_backloop_then_kill),
    cmocka_unit_test(test_seed003_7_4),
    cmocka_unit_test(test_pitfall_aborts_at_once),
    cmocka_unit_test(test_cascade_upward),
    cmocka_unit_test(test_endless_loop_frees),
    cmocka_unit_test(test_endless_join_loop_frees_scopes),
    cmocka_unit_test(test_cancel_session_and_abort_step),
    cmocka_unit_test(test_delivery_emits_target_change),
    cmocka_unit_test(test_join_text_kept),
    cmocka_unit_test(test_join_write),
    cmocka_unit_test(test_pid_parse),
    cmocka_unit_test(test_pause_during_last_step),
    cmocka_unit_test(test_retry_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
