/* crash_run.c — the program the crash test kills: runs N sessions of a bundle (fan-outs, an `all`
 * join, a k-of-n `kill` join, timer waits, a loop) on a SQLite store, recovering whatever the
 * store holds when it starts.
 *
 *   crash_run run  STORE BUNDLE N [--rounds R] [--group G] [--sync full|normal]
 *   crash_run dump STORE N        canonical text of every session's rows (for comparing runs)
 *   crash_run canon STORE OWNER N the same for a store written by xgrd (crash_daemon.sh): processes
 *                                 named by their step path instead of their iter, no times
 *
 * `run` is a small driver over the session core and the step engine, built like the
 * deterministic driver: each session runs one process at a time on its own virtual clock (the
 * earliest due process; the clock jumps to the next timer). Sessions take turns; each turn's
 * changes (the promotion, the result, the children, the history row, the session's counters) are
 * one batch, and the batches of G sessions are handed to the store together and group-committed;
 * a session's next step only starts after its batch is durable, so nothing a step caused is acted
 * on before it is committed. On start it loads every live session from the store and restores its
 * core (its clock is the end time of its last committed step), starts the sessions that are not
 * in the store yet, and runs everything to completion. Each session's sequence of core calls is
 * the same whether or not the program was killed and restarted in between, so the final rows
 * must equal those of an uninterrupted run exactly. Exit 0 when every session completed, 1 when
 * something is off, 2 on usage errors, 3 when the store refuses to work.
 */
#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/bundle.h"
#include "xgr/outcome.h"
#include "xgr/store.h"

#define OWNER "0x00000000000000000000000000000000000000c7"

typedef struct sess {
  xgr_session *s;
  int64_t now;                  /* the session's virtual clock */
  bool done;
} sess;

typedef struct world {
  xgr_store *st;
  const xgr_bundle *b;
  sess *ss;
  size_t n;
  xgr_effects fx;
  int failed;                   /* a batch failed (atomic) */
  uint64_t steps;
} world;

static void on_commit(void *ctx, int rc, const xgr_error *err) {
  world *w = ctx;
  if (rc) {
    fprintf(stderr, "crash_run: a batch failed: %s\n", err ? err->message : "?");
    __atomic_store_n(&w->failed, 1, __ATOMIC_SEQ_CST);
  }
}

/* One turn of session i: promote the earliest due process, run its step, apply the result. */
static void turn(world *w, size_t i, xgr_store_changes *c) {
  sess *x = &w->ss[i];
  int64_t due = xgr_session_next_due(x->s);
  if (due == XGR_NEVER) {   /* nothing can run: finished (or stalled, which this bundle never is) */
    x->done = true;
    return;
  }
  if (due > x->now) x->now = due;
  xgr_session_promote(x->s, x->now, 1, &w->fx);
  const xgr_proc *p = NULL;
  for (size_t k = 0; k < w->fx.n; k++)
    if (w->fx.items[k].kind == XGR_FX_RUN_STEP) p = w->fx.items[k].proc;
  xgr_store_changes_add_effects(c, x->s, &w->fx);
  xgr_effects_reset(&w->fx);
  if (!p) return;
  uint64_t iter = p->iter;
  unsigned step = p->step;
  char pid[48];
  xgr_pid_format(xgr_session_root_pid(x->s), iter, pid, sizeof pid);
  xgr_step_ctx ctx = {.owner = OWNER, .session_id = xgr_session_root_pid(x->s), .pid = pid,
                      .step_id = w->b->orch->steps[step].id};
  xgr_step_result res;
  memset(&res, 0, sizeof res);
  xgr_value payload = xgr_value_retain(p->payload);
  xgr_step_run(w->b->step_rule[step], payload, &ctx, NULL, &res);
  xgr_value_release(payload);
  xgr_outcome_buf ob;
  xgr_step_outcome o;
  xgr_outcome_from_result(&res, w->b->step_rule_address[step], &ob, &o);
  xgr_session_step_result(x->s, iter, &o, x->now, &w->fx, NULL);
  xgr_step_result_free(&res);
  xgr_store_changes_add_effects(c, x->s, &w->fx);
  xgr_effects_reset(&w->fx);
  w->steps++;
  if (xgr_session_result_of(x->s) != XGR_RESULT_RUNNING) x->done = true;
}

typedef struct rec_ctx {
  world *w;
  size_t restored;
  int rc;
} rec_ctx;

static int recover_one(void *ctx, const xgr_store_live *l) {
  rec_ctx *r = ctx;
  world *w = r->w;
  uint64_t root = l->session->root_pid;
  if (root == 0 || root > w->n) return 0;   /* not one of ours */
  xgr_store_hist *hs;
  size_t nh;
  xgr_error err;
  if (xgr_store_history(w->st, OWNER, root, &hs, &nh, &err)) {
    fprintf(stderr, "crash_run: %s\n", err.message);
    return XGR_EIO;
  }
  int64_t now = 0;   /* the clock is where the last committed step ended */
  for (size_t i = 0; i < nh; i++)
    if (hs[i].finished_at > now) now = hs[i].finished_at;
  xgr_store_hists_free(hs, nh);
  xgr_store_changes *c = xgr_store_changes_new();
  xgr_session *s = xgr_store_restore_session(w->b->orch, l, NULL, now, &w->fx, &err);
  if (!s) {
    fprintf(stderr, "crash_run: cannot restore session %" PRIu64 ": %s %s\n", root, err.path, err.message);
    xgr_store_changes_free(c);
    return XGR_EINVAL;
  }
  if (w->fx.n) xgr_store_changes_add_effects(c, s, &w->fx);
  xgr_effects_reset(&w->fx);
  if (xgr_store_changes_size(c)) xgr_store_submit(w->st, c, on_commit, w);
  else xgr_store_changes_free(c);
  w->ss[root - 1].s = s;
  w->ss[root - 1].now = now;
  r->restored++;
  return 0;
}

static int cmd_run(const char *store, const char *bundle, size_t n, int rounds, size_t group, xgr_store_sync sync) {
  xgr_error err;
  xgr_diags diags;
  xgr_diags_init(&diags);
  xgr_bundle *b = NULL;
  if (xgr_bundle_load_file(bundle, &b, &err, &diags)) {
    fprintf(stderr, "crash_run: %s: %s %s\n", bundle, err.path, err.message);
    xgr_diags_free(&diags);
    return 2;
  }
  xgr_diags_free(&diags);
  xgr_store_config cfg = {.sync = sync, .gc_interval_ms = -1};
  xgr_store *st = xgr_store_open(store, &cfg, &err);
  if (!st) {
    fprintf(stderr, "crash_run: the store refuses to work, so nothing runs: %s\n", err.message);
    xgr_bundle_free(b);
    return 3;
  }
  world w = {.st = st, .b = b, .n = n};
  w.ss = calloc(n, sizeof *w.ss);
  xgr_effects_init(&w.fx);
  rec_ctx rc = {.w = &w};
  if (xgr_store_load_live(st, recover_one, &rc, &err)) {
    fprintf(stderr, "crash_run: recovery failed: %s\n", err.message);
    return 1;
  }
  /* sessions not in the store yet start now; finished ones stay finished */
  size_t started = 0, finished = 0;
  int start = xgr_orch_find(b->orch, "Start");
  xgr_value payload = xgr_map_new(1);
  xgr_map_set_str(payload, "Rounds", 6, xgr_value_int(rounds));
  for (size_t i = 0; i < n; i++) {
    if (w.ss[i].s) continue;
    xgr_store_session row;
    if (!xgr_store_session_get(st, OWNER, i + 1, &row, NULL)) {
      finished++;
      w.ss[i].done = true;
      xgr_store_session_clear(&row);
      continue;
    }
    w.ss[i].s = xgr_session_new(b->orch, OWNER, i + 1, NULL);
    xgr_session_start(w.ss[i].s, (unsigned)start, payload, 0, &w.fx, NULL);
    xgr_store_changes *c = xgr_store_changes_new();
    xgr_store_changes_add_session_start(c, w.ss[i].s, bundle);
    xgr_store_changes_add_effects(c, w.ss[i].s, &w.fx);
    xgr_effects_reset(&w.fx);
    xgr_store_submit(st, c, on_commit, &w);
    started++;
  }
  xgr_value_release(payload);
  xgr_store_flush(st);
  printf("crash_run: recovered %zu live sessions, %zu already finished, started %zu\n", rc.restored, finished, started);
  fflush(stdout);
  /* turns: G sessions' batches per group commit */
  for (;;) {
    size_t active = 0;
    for (size_t i = 0; i < n; i++) {
      if (!w.ss[i].s || w.ss[i].done) continue;
      active++;
      xgr_store_changes *c = xgr_store_changes_new();
      xgr_store_changes_defer_live(c);   /* a turn per batch: live processes' records at submit */
      turn(&w, i, c);
      if (xgr_store_changes_size(c)) xgr_store_submit(st, c, on_commit, &w);
      else xgr_store_changes_free(c);
      if (active % group == 0) xgr_store_flush(st);
      if (__atomic_load_n(&w.failed, __ATOMIC_SEQ_CST)) break;
    }
    xgr_store_flush(st);
    if (__atomic_load_n(&w.failed, __ATOMIC_SEQ_CST) || !active) break;
  }
  int code = 0;
  xgr_error ferr;
  if (w.failed || xgr_store_failed(st, &ferr)) {
    fprintf(stderr, "crash_run: the store failed; stopping\n");
    code = 3;
  }
  size_t completed = 0;
  for (size_t i = 0; i < n; i++) {
    if (w.ss[i].s) completed += xgr_session_result_of(w.ss[i].s) == XGR_RESULT_COMPLETED;
    else completed++;   /* finished before this run */
    xgr_session_free(w.ss[i].s);
  }
  if (!code && completed != n) {
    fprintf(stderr, "crash_run: only %zu of %zu sessions completed\n", completed, n);
    code = 1;
  }
  printf("crash_run: %" PRIu64 " steps in this run; %zu of %zu sessions completed\n", w.steps, completed, n);
  xgr_effects_free(&w.fx);
  free(w.ss);
  xgr_store_close(st);
  xgr_bundle_free(b);
  return code;
}

static int cmd_dump(const char *store, size_t n) {
  xgr_error err;
  xgr_store_config cfg = {.read_only = true};
  xgr_store *st = xgr_store_open(store, &cfg, &err);
  if (!st) {
    fprintf(stderr, "crash_run: %s\n", err.message);
    return 3;
  }
  uint64_t rows = 0;
  for (uint64_t r = 1; r <= n; r++) {
    xgr_store_session ss;
    if (xgr_store_session_get(st, OWNER, r, &ss, &err)) {
      printf("session %" PRIu64 " missing\n", r);
      continue;
    }
    printf("session %" PRIu64 " %s next_iter=%" PRIu64 " next_group=%u\n", r, xgr_session_result_name(ss.status),
           ss.next_iter, ss.next_group);
    xgr_store_session_clear(&ss);
    xgr_store_proc *ps;
    size_t np;
    xgr_store_procs(st, OWNER, r, &ps, &np, &err);
    for (size_t i = 0; i < np; i++)
      printf("  proc %" PRIu64 " %s %s valid=%d why=%d wake=%lld payload=%s join=%s\n", ps[i].iter, ps[i].step_id,
             xgr_proc_status_name(ps[i].status), ps[i].valid, ps[i].abort_reason, (long long)ps[i].next_wake_at,
             ps[i].payload, ps[i].join ? ps[i].join : "-");
    xgr_store_procs_free(ps, np);
    xgr_store_hist *hs;
    size_t nh;
    xgr_store_history(st, OWNER, r, &hs, &nh, &err);
    for (size_t i = 0; i < nh; i++)
      printf("  step %" PRIu64 " %s %s valid=%d at=%lld payload=%s\n", hs[i].iter, hs[i].step_id,
             xgr_proc_status_name(hs[i].status), hs[i].valid, (long long)hs[i].at, hs[i].payload ? hs[i].payload : "-");
    rows += nh;
    xgr_store_hists_free(hs, nh);
  }
  printf("proc_steps rows: %" PRIu64 "\n", rows);
  xgr_store_close(st);
  return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A canonical dump of sessions 1..n of owner that does not depend on timing: a process is named by
 * its path of step ids from the start process along parent links ("/Start/Fan/W1/.../Final"), not
 * by its iter — on the concurrent engine two results that spawn children may be applied in either
 * order, which numbers the children differently (SEMANTICS §6) — and times are left out. Per
 * session its status and one line per proc_steps row (path, status, valid, effective payload,
 * error), sorted; a row written twice would show twice, a lost one not at all. Then the number of
 * internal wake-ups left in the outbox (0 once every session is done). */
static int cmd_canon(const char *store, const char *owner, size_t n) {
  xgr_error err;
  xgr_store_config cfg = {.read_only = true};
  xgr_store *st = xgr_store_open(store, &cfg, &err);
  if (!st) {
    fprintf(stderr, "crash_run: %s\n", err.message);
    return 3;
  }
  uint64_t rows = 0, completed = 0;
  for (uint64_t r = 1; r <= n; r++) {
    xgr_store_session ss;
    if (xgr_store_session_get(st, owner, r, &ss, &err)) {
      printf("session %" PRIu64 " missing\n", r);
      continue;
    }
    xgr_store_hist *hs;
    size_t nh;
    if (xgr_store_history(st, owner, r, &hs, &nh, &err)) {
      fprintf(stderr, "crash_run: %s\n", err.message);
      xgr_store_session_clear(&ss);
      xgr_store_close(st);
      return 3;
    }
    printf("session %" PRIu64 " %s rows=%zu\n", r, xgr_session_result_name(ss.status), nh);
    completed += ss.status == XGR_RESULT_COMPLETED;
    xgr_store_session_clear(&ss);
    char **path = calloc(nh ? nh : 1, sizeof *path), **lines = calloc(nh ? nh : 1, sizeof *lines);
    if (!path || !lines) abort();
    for (size_t i = 0; i < nh; i++) {   /* rows come by iter; a parent's iter is smaller than its child's */
      const char *pp = "";
      for (size_t k = i; k-- > 0;)
        if (hs[k].iter == hs[i].parent_iter) {
          pp = path[k];
          break;
        }
      if (hs[i].parent_iter && !*pp) pp = "/?";   /* a parent without a row: shows as a difference */
      size_t len = strlen(pp) + strlen(hs[i].step_id) + 2;
      path[i] = malloc(len);
      if (!path[i]) abort();
      snprintf(path[i], len, "%s/%s", pp, hs[i].step_id);
      const char *pl = hs[i].payload ? hs[i].payload : "-", *er = hs[i].error ? hs[i].error : "-";
      size_t ll = strlen(path[i]) + strlen(pl) + strlen(er) + 64;
      lines[i] = malloc(ll);
      if (!lines[i]) abort();
      snprintf(lines[i], ll, "  %s %s valid=%d payload=%s error=%s", path[i],
               xgr_proc_status_name((xgr_proc_status)hs[i].status), hs[i].valid, pl, er);
    }
    qsort(lines, nh, sizeof *lines, cmp_str);
    for (size_t i = 0; i < nh; i++) {
      puts(lines[i]);
      free(lines[i]);
      free(path[i]);
    }
    free(lines);
    free(path);
    rows += nh;
    xgr_store_hists_free(hs, nh);
  }
  xgr_store_wake *ws;   /* internal wake-ups committed by their producer and not applied by their target */
  size_t nw = 0;
  if (xgr_store_outbox(st, &ws, &nw, &err)) {
    fprintf(stderr, "crash_run: %s\n", err.message);
    xgr_store_close(st);
    return 3;
  }
  xgr_store_wakes_free(ws, nw);
  printf("outbox: %zu\n", nw);
  printf("sessions completed: %" PRIu64 " of %zu; proc_steps rows: %" PRIu64 "\n", completed, n, rows);
  xgr_store_close(st);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 5 && !strcmp(argv[1], "run")) {
    int rounds = 3;
    size_t group = 16;
    xgr_store_sync sync = XGR_STORE_SYNC_FULL;
    for (int i = 5; i + 1 < argc; i += 2) {
      if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
      else if (!strcmp(argv[i], "--group")) group = (size_t)atol(argv[i + 1]);
      else if (!strcmp(argv[i], "--sync")) sync = !strcmp(argv[i + 1], "normal") ? XGR_STORE_SYNC_NORMAL : XGR_STORE_SYNC_FULL;
    }
    long n = atol(argv[4]);
    if (n <= 0 || rounds <= 0 || group == 0) return 2;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = cmd_run(argv[2], argv[3], (size_t)n, rounds, group, sync);
    curl_global_cleanup();
    return rc;
  }
  if (argc == 4 && !strcmp(argv[1], "dump")) return cmd_dump(argv[2], (size_t)atol(argv[3]));
  if (argc == 5 && !strcmp(argv[1], "canon")) return cmd_canon(argv[2], argv[3], (size_t)atol(argv[4]));
  fprintf(stderr, "usage: crash_run run STORE BUNDLE N [--rounds R] [--group G] [--sync full|normal]\n"
                  "       crash_run dump STORE N\n"
                  "       crash_run canon STORE OWNER N   (timing-independent dump of an xgrd store)\n");
  return 2;
}
