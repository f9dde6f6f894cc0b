/* test_live_json.c — a live session's records as JSON and back (xgr_store_live_to_json /
 * xgr_store_live_from_json, xgr/store.h; xgr.liveSessions and `xgr migrate-check --url`): a round
 * trip keeps every field (rootPid and iters past 2^53, payload and join texts byte for byte, null
 * error and join), and a malformed answer is refused naming the field's path: an unknown field, a
 * missing one, a value of the wrong type or range, too many processes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "xgr/store.h"

static const xgr_store_proc PROCS[] = {
    {.iter = 2, .parent_iter = 1, .step = 1, .step_id = "check", .status = 0, .paused = true, .valid = -1,
     .abort_reason = 0, .group = 1, .from_group = 0, .next_wake_at = 1795964643843, .created_at = 5, .started_at = 0,
     .finished_at = 0, .payload = "{\"Score\":80,\"Big\":18446744073709551615}", .error = NULL, .join = NULL},
    {.iter = 9007199254740993ull, .parent_iter = 2, .step = 3, .step_id = "J", .status = 1, .valid = 1, .abort_reason = 2,
     .group = 4, .from_group = 3, .next_wake_at = -1, .created_at = 6, .started_at = 7, .finished_at = 8, .payload = "{}",
     .error = "boom", .join = "{\"closed\":false,\"inbox\":[]}"},
};

static xgr_store_live live(xgr_store_session *s) {
  memset(s, 0, sizeof *s);
  s->owner = "0x00000000000000000000000000000000000000a1";
  s->root_pid = 18446744073709551615ull;
  s->registry = "kyc";
  s->ostc_id = "kyc";
  s->ostc_hash = "0xabc";
  s->bundle_hash = "0xdef";
  s->killed_at = 0;
  s->created_at = 1700000000000;
  s->next_iter = 9007199254740994ull;
  s->next_group = 5;
  s->paused = true;
  static const uint32_t killed[] = {2, 4294967295u};
  return (xgr_store_live){.session = s, .procs = PROCS, .nprocs = 2, .killed_groups = killed, .nkilled = 2};
}

static void test_round_trip(void **state) {
  (void)state;
  xgr_store_session s;
  xgr_store_live l = live(&s);
  json_t *j = xgr_store_live_to_json(&l);
  char *text = json_dumps(j, JSON_COMPACT);
  assert_true(xgr_store_live_size(&l) >= strlen(text));   /* a bound, not an underestimate */
  json_t *back = json_loads(text, 0, NULL);
  xgr_store_live_owned o;
  xgr_error e;
  assert_int_equal(xgr_store_live_from_json(back, "sessions[0]", 10, &o, &e), 0);
  assert_string_equal(o.session.owner, s.owner);
  assert_true(o.session.root_pid == s.root_pid && o.session.next_iter == s.next_iter && o.session.next_group == 5);
  assert_true(o.session.paused && o.session.created_at == s.created_at);
  assert_string_equal(o.session.bundle_hash, "0xdef");
  assert_int_equal(o.live.nprocs, 2);
  assert_int_equal(o.live.nkilled, 2);
  assert_true(o.live.killed_groups[1] == 4294967295u);
  for (size_t i = 0; i < 2; i++) {
    const xgr_store_proc *a = &PROCS[i], *b = &o.live.procs[i];
    assert_true(a->iter == b->iter && a->parent_iter == b->parent_iter && a->step == b->step && a->status == b->status);
    assert_true(a->paused == b->paused && a->valid == b->valid && a->abort_reason == b->abort_reason);
    assert_true(a->group == b->group && a->from_group == b->from_group && a->next_wake_at == b->next_wake_at);
    assert_true(a->created_at == b->created_at && a->started_at == b->started_at && a->finished_at == b->finished_at);
    assert_string_equal(a->step_id, b->step_id);
    assert_string_equal(a->payload, b->payload);
    assert_true(a->error ? b->error && !strcmp(a->error, b->error) : !b->error);
    assert_true(a->join ? b->join && !strcmp(a->join, b->join) : !b->join);
  }
  xgr_store_live_owned_clear(&o);
  json_decref(back);
  free(text);
  json_decref(j);
}

/* Change j by fn, then expect a refusal whose path is `path`. */
static void refused(json_t *(*fn)(json_t *), const char *path, size_t max_procs) {
  xgr_store_session s;
  xgr_store_live l = live(&s);
  json_t *j = fn(xgr_store_live_to_json(&l));
  xgr_store_live_owned o;
  xgr_error e;
  assert_int_equal(xgr_store_live_from_json(j, "sessions[3]", max_procs, &o, &e), XGR_ESCHEMA);
  if (strcmp(e.path, path)) fail_msg("path %s, expected %s (%s)", e.path, path, e.message);
  assert_null(o.procs);
  json_decref(j);
}

static json_t *unknown_field(json_t *j) {
  json_object_set_new(json_object_get(j, "session"), "extra", json_true());
  return j;
}
static json_t *missing_field(json_t *j) {
  json_object_del(json_array_get(json_object_get(j, "processes"), 1), "payload");
  return j;
}
static json_t *iter_number(json_t *j) {
  json_object_set_new(json_array_get(json_object_get(j, "processes"), 0), "iter", json_integer(2));
  return j;
}
static json_t *valid_range(json_t *j) {
  json_object_set_new(json_array_get(json_object_get(j, "processes"), 1), "valid", json_integer(2));
  return j;
}
static json_t *bad_group(json_t *j) {
  json_array_set_new(json_object_get(j, "killedGroups"), 0, json_integer(-1));
  return j;
}
static json_t *same(json_t *j) { return j; }

static void test_refusals(void **state) {
  (void)state;
  refused(unknown_field, "sessions[3].session", 10);
  refused(missing_field, "sessions[3].processes[1].payload", 10);
  refused(iter_number, "sessions[3].processes[0].iter", 10);
  refused(valid_range, "sessions[3].processes[1].valid", 10);
  refused(bad_group, "sessions[3]", 10);
  refused(same, "sessions[3].processes", 1);   /* more processes than allowed */
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_round_trip), cmocka_unit_test(test_refusals)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
