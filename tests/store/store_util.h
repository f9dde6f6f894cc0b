/* store_util.h — helpers shared by the store tests: temporary files, a fake clock, a synthetic
 * step loop that drives a session core on deterministic outcomes and persists every core call's
 * effects through the store, and a canonical dump of a session's rows for comparisons. */
#ifndef XGR_TESTS_STORE_UTIL_H
#define XGR_TESTS_STORE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xgr/store.h"

#define T_OWNER "0x00000000000000000000000000000000000000aa"

/* A test orchestration: a kofn kill join over a fan-out with a loop, a nested drain join, an
 * invalid-branch backloop. */
static const char *const t_orch_doc =
    "{\"id\":\"t\",\"structure\":{"
    "\"A\":{\"rule\":\"r\",\"onValid\":{\"spawns\":[\"B\",\"C\",\"D\"],\"join\":{\"joinid\":\"J\",\"mode\":\"kofn\",\"k\":2,"
    "\"waitonjoin\":\"kill\",\"from\":[{\"node\":\"B\",\"when\":\"valid\"},{\"node\":\"C\",\"when\":\"any\"},"
    "{\"node\":\"D\",\"when\":\"valid\"}]}},\"onInvalid\":{\"spawns\":[\"A\"]}},"
    "\"B\":{\"rule\":\"r\",\"onInvalid\":{\"spawns\":[\"B\"]}},"
    "\"C\":{\"rule\":\"r\"},"
    "\"D\":{\"rule\":\"r\",\"onValid\":{\"spawns\":[\"E\"]}},"
    "\"E\":{\"rule\":\"r\"},"
    "\"J\":{\"rule\":\"r\",\"onValid\":{\"spawns\":[\"K\",\"K2\"],\"join\":{\"joinid\":\"L\",\"mode\":\"all\","
    "\"waitonjoin\":\"drain\",\"from\":[{\"node\":\"K\",\"when\":\"any\"},{\"node\":\"K2\",\"when\":\"any\"}]}}},"
    "\"K\":{\"rule\":\"r\"},\"K2\":{\"rule\":\"r\"},"
    "\"L\":{\"rule\":\"r\"}}}";

static inline char *t_tmpdir(void) {
  char tmpl[] = "/tmp/xgr-store-test-XXXXXX";
  char *d = mkdtemp(tmpl);
  if (!d) abort();
  return strdup(d);
}

/* Remove dir (from t_tmpdir) and everything in it, best effort, and free the string. */
static inline void t_rmdir(char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) { /* best effort */ }
  free(dir);
}

typedef struct t_clock {
  int64_t ms;
} t_clock;

static inline int64_t t_clock_ms(void *ctx) { return __atomic_load_n(&((t_clock *)ctx)->ms, __ATOMIC_SEQ_CST); }

/* The outcome of step `step` of process iter: deterministic. */
static inline xgr_outcome_kind t_outcome(uint64_t iter, const char *step, unsigned salt) {
  uint64_t h = (iter * 0x9E3779B97F4A7C15ULL) ^ (salt * 0xC2B2AE3D27D4EB4FULL);
  h ^= h >> 29;
  if (!strcmp(step, "A") || !strcmp(step, "B")) return (h % 4) == 0 ? XGR_OUTCOME_INVALID : XGR_OUTCOME_VALID;
  if (!strcmp(step, "C")) return (h % 3) == 0 ? XGR_OUTCOME_HARD_ERROR : XGR_OUTCOME_VALID;
  return XGR_OUTCOME_VALID;
}

/* Run up to max_steps steps of s (one process at a time), committing each core call's effects
 * to st (one batch per step). Returns the steps run. */
static inline int t_run(xgr_store *st, xgr_session *s, int64_t *now, int max_steps, unsigned salt) {
  xgr_effects fx;
  xgr_effects_init(&fx);
  int steps = 0;
  const xgr_orch *o = xgr_session_orch(s);
  while (steps < max_steps) {
    xgr_store_changes *b = xgr_store_changes_new();
    size_t n = xgr_session_promote(s, *now, 1, &fx);
    uint64_t iter = 0;
    for (size_t i = 0; i < fx.n; i++)
      if (fx.items[i].kind == XGR_FX_RUN_STEP) iter = fx.items[i].proc->iter;
    xgr_store_changes_add_effects(b, s, &fx);
    xgr_effects_reset(&fx);
    if (!n || !iter) {
      xgr_store_commit(st, b, NULL);
      break;
    }
    const xgr_proc *p = xgr_session_find(s, iter);
    const char *sid = o->steps[p->step].id;
    xgr_value eff = xgr_map_copy(p->payload);
    xgr_value nv;
    int64_t cnt = xgr_map_get_str(eff, "n", 1, &nv) && nv.kind == XGR_VINT ? nv.as.i : 0;
    xgr_map_set_str(eff, "n", 1, xgr_value_int(cnt + 1));
    xgr_map_set_str(eff, sid, strlen(sid), xgr_value_int((int64_t)iter));
    xgr_step_outcome oc = {.kind = t_outcome(iter, sid, salt), .effective = eff, .outcome_payload = xgr_value_null(),
                           .error = "boom"};
    xgr_session_step_result(s, iter, &oc, *now, &fx, NULL);
    xgr_value_release(eff);
    xgr_store_changes_add_effects(b, s, &fx);
    xgr_effects_reset(&fx);
    xgr_store_commit(st, b, NULL);
    (*now)++;
    steps++;
  }
  xgr_effects_free(&fx);
  return steps;
}

/* Start session (T_OWNER, root) on o at step A and commit its first rows. */
static inline xgr_session *t_start(xgr_store *st, const xgr_orch *o, uint64_t root, int64_t now) {
  xgr_session *s = xgr_session_new(o, T_OWNER, root, NULL);
  xgr_effects fx;
  xgr_effects_init(&fx);
  xgr_value pl = xgr_map_new(1);
  xgr_map_set_str(pl, "n", 1, xgr_value_int(0));
  xgr_session_start(s, 0, pl, now, &fx, NULL);
  xgr_value_release(pl);
  xgr_store_changes *b = xgr_store_changes_new();
  xgr_store_changes_add_session_start(b, s, "test");
  xgr_store_changes_add_effects(b, s, &fx);
  xgr_store_commit(st, b, NULL);
  xgr_effects_free(&fx);
  return s;
}

/* A canonical text of a session's rows (store-clock columns left out). Caller frees. */
static inline char *t_dump(xgr_store *st, uint64_t root) {
  size_t cap = 1 << 16, len = 0;
  char *out = malloc(cap);
  out[0] = 0;
#define T_APPEND(...)                                                        \
  do {                                                                       \
    int k_ = snprintf(NULL, 0, __VA_ARGS__);                                 \
    while (len + (size_t)k_ + 1 > cap) out = realloc(out, cap *= 2);         \
    snprintf(out + len, cap - len, __VA_ARGS__);                             \
    len += (size_t)k_;                                                       \
  } while (0)
  xgr_store_session ss;
  if (!xgr_store_session_get(st, T_OWNER, root, &ss, NULL)) {
    T_APPEND("session %llu status=%d next_iter=%llu next_group=%u killed_at=%lld\n", (unsigned long long)root,
             ss.status, (unsigned long long)ss.next_iter, ss.next_group, (long long)ss.killed_at);
    xgr_store_session_clear(&ss);
  }
  xgr_store_proc *ps;
  size_t np;
  xgr_store_procs(st, T_OWNER, root, &ps, &np, NULL);
  for (size_t i = 0; i < np; i++)
    T_APPEND("proc %llu parent=%llu step=%s status=%d valid=%d why=%d g=%u fg=%u wake=%lld c=%lld s=%lld f=%lld "
             "payload=%s error=%s join=%s\n",
             (unsigned long long)ps[i].iter, (unsigned long long)ps[i].parent_iter, ps[i].step_id, ps[i].status,
             ps[i].valid, ps[i].abort_reason, ps[i].group, ps[i].from_group, (long long)ps[i].next_wake_at,
             (long long)ps[i].created_at, (long long)ps[i].started_at, (long long)ps[i].finished_at, ps[i].payload,
             ps[i].error ? ps[i].error : "-", ps[i].join ? ps[i].join : "-");
  xgr_store_procs_free(ps, np);
  xgr_store_hist *hs;
  size_t nh;
  xgr_store_history(st, T_OWNER, root, &hs, &nh, NULL);
  for (size_t i = 0; i < nh; i++)
    T_APPEND("hist %llu step=%s status=%d valid=%d why=%d at=%lld f=%lld error=%s payload=%s\n",
             (unsigned long long)hs[i].iter, hs[i].step_id, hs[i].status, hs[i].valid, hs[i].abort_reason,
             (long long)hs[i].at, (long long)hs[i].finished_at, hs[i].error ? hs[i].error : "-",
             hs[i].payload ? hs[i].payload : "-");
  xgr_store_hists_free(hs, nh);
#undef T_APPEND
  return out;
}

#endif
