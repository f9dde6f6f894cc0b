/* test_clone.c — the core's exploration support (xgr/session.h): xgr_session_clone gives an
 * independent session that behaves exactly like the original from then on, and
 * xgr_session_promote_iter promotes one named process, refusing what is not due, open join
 * targets and the per-session cap, and applying the dispatch gate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "xgr/session.h"

/* A spawns B, C, D into a 2-of-3 kill join J. */
static const char *const DOC =
    "{\"id\":\"t\",\"structure\":{"
    "\"A\":{\"rule\":\"r\",\"onValid\":{\"spawns\":[\"B\",\"C\",\"D\"],\"join\":{\"joinid\":\"J\",\"mode\":{\"k\":2},"
    "\"waitonjoin\":\"kill\",\"from\":[{\"node\":\"B\"},{\"node\":\"C\"},{\"node\":\"D\"}]}}},"
    "\"B\":{\"rule\":\"r\"},\"C\":{\"rule\":\"r\"},\"D\":{\"rule\":\"r\"},\"J\":{\"rule\":\"r\"}}}";

static xgr_orch *orch(void) {
  xgr_orch *o = NULL;
  xgr_error e;
  assert_int_equal(xgr_orch_parse(DOC, strlen(DOC), &o, &e, NULL), 0);
  return o;
}

static int finish(xgr_session *s, uint64_t iter, xgr_outcome_kind k, xgr_effects *fx) {
  const xgr_proc *p = xgr_session_find(s, iter);
  assert_non_null(p);
  xgr_step_outcome o = {.kind = k, .effective = p->payload, .outcome_payload = xgr_value_null()};
  xgr_value keep = xgr_value_retain(p->payload);
  xgr_error e;
  int rc = xgr_session_step_result(s, iter, &o, 0, fx, &e);
  xgr_value_release(keep);
  xgr_effects_reset(fx);
  return rc;
}

/* A line per live process, sorted by iter: what two sessions must agree on. */
typedef struct dump {
  char text[4096];
} dump;

static void dump_proc(void *ctx, const xgr_proc *p) {
  dump *d = ctx;
  char line[128];
  snprintf(line, sizeof line, "%llu:%u:%u:%u:%u:%d;", (unsigned long long)p->iter, p->step, p->status, p->group,
           p->from_group, p->join ? (int)p->join->closed : -1);
  strncat(d->text, line, sizeof d->text - strlen(d->text) - 1);
}

static void sorted_dump(const xgr_session *s, dump *d) {
  /* xgr_session_foreach has no order: collect per iter */
  d->text[0] = '\0';
  for (uint64_t it = 1; it < xgr_session_next_iter(s); it++) {
    const xgr_proc *p = xgr_session_find(s, it);
    if (p) dump_proc(d, p);
  }
}

static void clone_behaves_like_the_original(void **state) {
  (void)state;
  xgr_orch *o = orch();
  xgr_effects fx;
  xgr_effects_init(&fx);
  xgr_error e;
  xgr_session *s = xgr_session_new(o, "0x01", 1, NULL);
  xgr_session_start(s, 0, xgr_value_null(), 0, &fx, &e);
  xgr_effects_reset(&fx);
  assert_int_equal(xgr_session_promote_iter(s, 1, 0, &fx, &e), 1);
  xgr_effects_reset(&fx);
  assert_int_equal(finish(s, 1, XGR_OUTCOME_VALID, &fx), 0);   /* J (2) open; B 3, C 4, D 5 waiting */
  assert_int_equal(xgr_session_promote_iter(s, 3, 0, &fx, &e), 1);
  xgr_effects_reset(&fx);

  xgr_session *c = xgr_session_clone(s);
  dump ds, dc;
  sorted_dump(s, &ds);
  sorted_dump(c, &dc);
  assert_string_equal(ds.text, dc.text);
  assert_int_equal(xgr_session_live(c), xgr_session_live(s));
  assert_int_equal(xgr_session_running(c), 1);

  /* the clone goes its own way: B finishes there, C is promoted; the original is untouched */
  assert_int_equal(finish(c, 3, XGR_OUTCOME_VALID, &fx), 0);
  assert_int_equal(xgr_session_promote_iter(c, 4, 0, &fx, &e), 1);
  xgr_effects_reset(&fx);
  sorted_dump(s, &ds);
  assert_non_null(strstr(ds.text, "3:1:1:"));   /* B still running in the original */
  assert_non_null(strstr(ds.text, "4:2:0:"));   /* C still waiting */

  /* the same events on both give the same sessions: D starts, C's piece satisfies J (2 of 3),
   * the kill finds D already running (it finishes; the scope's gates stay closed) */
  assert_int_equal(finish(s, 3, XGR_OUTCOME_VALID, &fx), 0);
  assert_int_equal(xgr_session_promote_iter(s, 4, 0, &fx, &e), 1);
  xgr_effects_reset(&fx);
  for (int k = 0; k < 2; k++) {
    xgr_session *x = k ? c : s;
    assert_int_equal(xgr_session_promote_iter(x, 5, 0, &fx, &e), 1);
    xgr_effects_reset(&fx);
    assert_int_equal(finish(x, 4, XGR_OUTCOME_VALID, &fx), 0);
  }
  sorted_dump(s, &ds);
  sorted_dump(c, &dc);
  assert_string_equal(ds.text, dc.text);
  const xgr_proc *d = xgr_session_find(s, 5);
  assert_non_null(d);
  assert_int_equal(d->status, XGR_PROC_RUNNING);
  const xgr_proc *j = xgr_session_find(c, 2);
  assert_non_null(j);
  assert_int_equal(j->join->outcome, XGR_JOIN_SATISFIED);
  assert_true(xgr_session_scope_killed(c, j->from_group));
  assert_true(xgr_session_scope_killed(s, j->from_group));
  assert_true(xgr_session_join_steps_has(c, 0));
  assert_false(xgr_session_join_steps_has(c, 1));
  assert_int_equal(finish(s, 5, XGR_OUTCOME_VALID, &fx), 0);
  assert_int_equal(finish(c, 5, XGR_OUTCOME_VALID, &fx), 0);
  sorted_dump(s, &ds);
  sorted_dump(c, &dc);
  assert_string_equal(ds.text, dc.text);

  xgr_session_free(c);
  xgr_session_free(s);
  xgr_effects_free(&fx);
  xgr_orch_free(o);
}

static void promote_iter_refuses(void **state) {
  (void)state;
  xgr_orch *o = orch();
  xgr_effects fx;
  xgr_effects_init(&fx);
  xgr_error e;
  xgr_session_config cfg = {.max_running = 1};
  xgr_session *s = xgr_session_new(o, "0x01", 1, &cfg);
  xgr_session_start(s, 0, xgr_value_null(), 0, &fx, &e);
  xgr_effects_reset(&fx);
  assert_int_equal(xgr_session_promote_iter(s, 7, 0, &fx, &e), XGR_ESTATE);   /* no such process */
  assert_int_equal(xgr_session_promote_iter(s, 1, 0, &fx, &e), 1);            /* A declares a join: bypass */
  xgr_effects_reset(&fx);
  assert_int_equal(xgr_session_promote_iter(s, 1, 0, &fx, &e), XGR_ESTATE);   /* already running */
  assert_int_equal(finish(s, 1, XGR_OUTCOME_VALID, &fx), 0);
  assert_int_equal(xgr_session_promote_iter(s, 2, 0, &fx, &e), XGR_ESTATE);   /* J: open join target */
  assert_int_equal(xgr_session_promote_iter(s, 5, 0, &fx, &e), 1);            /* D first: any order */
  xgr_effects_reset(&fx);
  assert_int_equal(xgr_session_promote_iter(s, 3, 0, &fx, &e), XGR_ESTATE);   /* the cap of 1 */
  assert_non_null(strstr(e.message, "cap"));
  assert_int_equal(xgr_session_running(s), 1);
  xgr_session_free(s);
  xgr_effects_free(&fx);
  xgr_orch_free(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(clone_behaves_like_the_original),
    cmocka_unit_test(promote_iter_refuses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
