/* run_scenarios_engine.c — the scenario files of tests/scenarios/ on the concurrent engine.
 *
 * Each file (bundle, start, payload, script, maxSteps, expect) is run on the deterministic driver
 * (the reference) and on the engine with the stepped virtual clock — steps of one instant run in
 * parallel on the workers, time moves when the engine is quiescent — in two modes:
 *
 *   ordered   results applied in promotion order: the report must equal the deterministic one,
 *             except what SEMANTICS §3.4 leaves to timing: a producer of a scope closed by a
 *             `kill` join that the driver aborted while it waited ("join kill") may have been
 *             running on the engine and finished (done, with its history row). The file's own
 *             expectations are checked with the same allowance.
 *   free      results applied as they complete: the timing-independent parts must agree with the
 *             driver — the result, the number of processes, and per step the multiset of
 *             (status, outcome, join outcome, abort reason) — with the same allowance, plus the
 *             §3.4 invariants: every join closed once with a decided outcome, no process left
 *             running, nothing created by a producer after its scope was closed by `kill`.
 *
 * usage: run_scenarios_engine DIR [NAME_SUBSTRING] [--workers N] [--rounds N]
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/driver.h"
#include "../scenarios/expect.h"
#include "xgr/engine.h"

#define OWNER "0x0000000000000000000000000000000000000001"

static int nfail;
static unsigned workers = 2;

static void failf(const char *name, const char *mode, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void failf(const char *name, const char *mode, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("  %s [%s]: ", name, mode);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  nfail++;
}

static char *dump(const json_t *j) { return json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS); }

static json_t *find_proc(const json_t *procs, const char *pid) {
  size_t i;
  json_t *p;
  json_array_foreach(procs, i, p) if (!strcmp(json_string_value(json_object_get(p, "pid")), pid)) return p;
  return NULL;
}

static const char *sget(const json_t *o, const char *k) {
  const char *s = json_string_value(json_object_get(o, k));
  return s ? s : "";
}

/* A producer the driver aborted by a kill join while it waited — or, when results are applied as
 * they complete, by a cancelSession that the engine applied after the producer had finished. */
static int join_killed(const json_t *p, bool free_mode) {
  if (strcmp(sget(p, "status"), "aborted")) return 0;
  return !strcmp(sget(p, "abortReason"), "join kill") || (free_mode && !strcmp(sget(p, "abortReason"), "cancelSession"));
}

/* ---- the two runs ------------------------------------------------------------------------------ */

static json_t *run_driver(const json_t *sc, const xgr_bundle *b) {
  xgr_error e;
  xgr_driver *d = scen_driver(sc, b, OWNER, &e);
  if (!d) return NULL;
  xgr_driver_run(d);
  json_t *rep = xgr_driver_report(d, 0);
  xgr_driver_free(d);
  return rep;
}

static json_t *run_engine(const char *name, const char *mode, const json_t *sc, const xgr_bundle *b, bool ordered) {
  xgr_engine_config cfg = {.workers = workers, .ordered = ordered, .keep_finished = true,
                           .clock = {.kind = XGR_CLOCK_STEPPED}};
  xgr_error e;
  xgr_engine *eng = xgr_engine_new(&cfg, &e);
  if (!eng) {
    failf(name, mode, "engine: %s", e.message);
    return NULL;
  }
  xgr_value payload;
  xgr_value_from_json(json_object_get(sc, "payload"), 0, &payload, &e);
  const json_t *owner = json_object_get(sc, "owner");
  const char *own = owner ? json_string_value(owner) : OWNER;
  const json_t *ms = json_object_get(sc, "maxSteps");
  xgr_engine_start req = {.bundle = b, .owner = own, .root_pid = 1, .start = sget(sc, "start"), .payload = payload,
                          .max_steps = json_is_integer(ms) ? (uint64_t)json_integer_value(ms) : 10000, .record = true};
  json_t *rep = NULL;
  xgr_engine_hold_clock(eng, true);   /* the session and its script begin at the same instant */
  if (json_object_get(sc, "script") && xgr_engine_add_script(eng, 1, json_object_get(sc, "script"), 0, &e)) {
    failf(name, mode, "script: %s: %s", e.path, e.message);
  } else if (xgr_engine_start_session(eng, &req, &e)) {
    failf(name, mode, "start: %s", e.message);
  } else {
    xgr_engine_hold_clock(eng, false);
    int w = xgr_engine_wait(eng, own, 1, 20000);
    if (w < 0) failf(name, mode, "the session did not settle (%s)", xgr_errcode_name(w));
    rep = xgr_engine_report(eng, own, 1, &e);
    if (!rep) failf(name, mode, "report: %s", e.message);
  }
  xgr_value_release(payload);
  xgr_engine_free(eng);
  return rep;
}

/* ---- checks -------------------------------------------------------------------------------------- */

/* Accept the §3.4 allowance: where the driver says "join kill" and the engine ran the producer to
 * the end, take the driver's view of that process and drop its history row. Returns how many. */
static int allow_kill_race(json_t *eng, const json_t *det, bool free_mode) {
  int n = 0;
  json_t *procs = json_object_get(eng, "processes"), *hist = json_object_get(eng, "history");
  size_t i;
  json_t *p;
  json_array_foreach(procs, i, p) {
    const json_t *d = find_proc(json_object_get(det, "processes"), sget(p, "pid"));
    if (!d || !join_killed(d, free_mode)) continue;
    if (!strcmp(sget(p, "status"), "done")) json_array_set_new(procs, i, json_deep_copy(d));   /* frees p */
    /* the driver never ran it: drop the row of the step that still finished on the engine */
    bool det_ran = false;
    size_t k;
    json_t *h;
    json_array_foreach(json_object_get(det, "history"), k, h) if (!strcmp(sget(h, "pid"), sget(d, "pid"))) det_ran = true;
    if (det_ran) continue;
    for (k = json_array_size(hist); k-- > 0;)
      if (!strcmp(sget(json_array_get(hist, k), "pid"), sget(d, "pid"))) {
        json_array_remove(hist, k);
        n++;
      }
  }
  return n;
}

typedef struct fail_ctx {
  const char *name, *mode;
} fail_ctx;

static void on_fail(void *ctx, const char *msg) {
  const fail_ctx *f = ctx;
  failf(f->name, f->mode, "%s", msg);
}

static void check_expect(const char *name, const char *mode, const json_t *x, const json_t *rep) {
  fail_ctx f = {name, mode};
  scen_check(x, rep, on_fail, &f);
}

/* History rows in (at, pid) order: steps of one instant run concurrently on the engine. */
static int cmp_hist(const void *a, const void *b) {
  const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
  json_int_t ta = json_integer_value(json_object_get(x, "at")), tb = json_integer_value(json_object_get(y, "at"));
  if (ta != tb) return ta < tb ? -1 : 1;
  return strcmp(sget(x, "pid"), sget(y, "pid"));
}

static void sort_history(json_t *rep) {
  json_t *h = json_object_get(rep, "history");
  size_t n = json_array_size(h);
  json_t **v = calloc(n ? n : 1, sizeof *v);
  for (size_t i = 0; i < n; i++) v[i] = json_incref(json_array_get(h, i));
  qsort(v, n, sizeof *v, cmp_hist);
  json_array_clear(h);
  for (size_t i = 0; i < n; i++) json_array_append_new(h, v[i]);
  free(v);
}

/* Per step: sorted list of "status/valid/join/reason" strings. */
static json_t *shape(const json_t *rep) {
  json_t *m = json_object();
  size_t i;
  json_t *p;
  json_array_foreach(json_object_get(rep, "processes"), i, p) {
    /* which producer of a kill-closed scope ran (and so which children exist) is timing */
    const char *step = !strcmp(sget(p, "abortReason"), "join kill") ? "(join kill)" : sget(p, "step");
    json_t *arr = json_object_get(m, step);
    if (!arr) {
      arr = json_array();
      json_object_set_new(m, step, arr);
    }
    char buf[256];
    const json_t *j = json_object_get(p, "join");
    char *v = dump(json_object_get(p, "valid"));
    snprintf(buf, sizeof buf, "%s/%s/%s/%s", sget(p, "status"), v, json_is_object(j) ? sget(j, "outcome") : "-",
             sget(p, "abortReason"));
    free(v);
    size_t k = 0;
    while (k < json_array_size(arr) && strcmp(json_string_value(json_array_get(arr, k)), buf) < 0) k++;
    json_array_insert_new(arr, k, json_string(buf));
  }
  return m;
}

/* §3.4 invariants on any engine report. */
static void invariants(const char *name, const char *mode, const json_t *rep) {
  size_t i;
  json_t *p;
  const char *res = sget(rep, "result");
  json_array_foreach(json_object_get(rep, "processes"), i, p) {
    if (!strcmp(sget(p, "status"), "running")) failf(name, mode, "%s still running at the end", sget(p, "pid"));
    if (!strcmp(res, "completed") && strcmp(sget(p, "status"), "done") && strcmp(sget(p, "status"), "aborted"))
      failf(name, mode, "%s is %s in a completed session", sget(p, "pid"), sget(p, "status"));
    const json_t *j = json_object_get(p, "join");
    if (json_is_object(j) && json_is_true(json_object_get(j, "closed")) && !strcmp(sget(j, "outcome"), "open"))
      failf(name, mode, "%s join closed without an outcome", sget(p, "pid"));
    /* a process whose parent's scope was closed by kill must not have been created after it:
     * every child of a done producer in a killed scope would show up as waiting/aborted with a
     * parent in that scope; the driver never creates those, so the count check covers it */
  }
}

static void run_file(const char *dir, const char *file, int rounds) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  json_error_t je;
  json_t *sc = json_load_file(path, 0, &je);
  int before = nfail;
  if (!sc) {
    failf(file, "load", "%s", je.text);
    printf("FAIL %s\n", file);
    return;
  }
  xgr_error e;
  xgr_bundle *b = scen_bundle(sc, &e);
  if (!b) {
    failf(file, "load", "bundle: %s", e.message);
  } else {
    json_t *det = run_driver(sc, b);
    const json_t *x = json_object_get(sc, "expect");
    for (int r = 0; r < rounds && det; r++) {
      json_t *ord = run_engine(file, "ordered", sc, b, true);
      if (ord) {
        allow_kill_race(ord, det, false);
        check_expect(file, "ordered", x, ord);
        invariants(file, "ordered", ord);
        json_t *d2 = json_deep_copy(det), *o2 = json_deep_copy(ord);
        json_object_del(d2, "steps");
        json_object_del(o2, "steps");
        sort_history(d2);
        sort_history(o2);
        char *a = dump(o2), *bb = dump(d2);
        if (strcmp(a, bb)) {
          failf(file, "ordered", "report differs from the deterministic driver's");
          if (getenv("XGR_SCENARIO_DUMP")) printf("engine: %s\ndriver: %s\n", a, bb);
        }
        free(a);
        free(bb);
        json_decref(d2);
        json_decref(o2);
      }
      json_t *fr = run_engine(file, "free", sc, b, false);
      if (fr) {
        allow_kill_race(fr, det, true);
        invariants(file, "free", fr);
        if (strcmp(sget(fr, "result"), sget(det, "result")))
          failf(file, "free", "result %s, driver %s", sget(fr, "result"), sget(det, "result"));
        if (json_array_size(json_object_get(fr, "processes")) != json_array_size(json_object_get(det, "processes")))
          failf(file, "free", "%zu processes, driver %zu", json_array_size(json_object_get(fr, "processes")),
                json_array_size(json_object_get(det, "processes")));
        json_t *s1 = shape(fr), *s2 = shape(det);
        if (!json_equal(s1, s2)) {
          char *a = dump(s1), *bb = dump(s2);
          failf(file, "free", "per-step outcomes differ:\n    engine %s\n    driver %s", a, bb);
          free(a);
          free(bb);
        }
        json_decref(s1);
        json_decref(s2);
      }
      json_decref(ord);
      json_decref(fr);
    }
    if (!det) failf(file, "driver", "the deterministic driver did not run it");
    json_decref(det);
  }
  xgr_bundle_free(b);
  json_decref(sc);
  printf("%s %s\n", nfail == before ? "PASS" : "FAIL", file);
  fflush(stdout);
}

int main(int argc, char **argv) {
  const char *dirname = NULL, *filter = NULL;
  int rounds = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--workers") && i + 1 < argc) workers = (unsigned)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!dirname) dirname = argv[i];
    else filter = argv[i];
  }
  if (!dirname) {
    fprintf(stderr, "usage: run_scenarios_engine DIR [NAME_SUBSTRING] [--workers N] [--rounds N]\n");
    return 2;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  size_t n;
  char **names = scen_files(dirname, filter, &n);
  if (!names) return 2;
  int files_failed = 0;
  for (size_t i = 0; i < n; i++) {
    int before = nfail;
    run_file(dirname, names[i], rounds);
    files_failed += nfail != before;
    free(names[i]);
  }
  free(names);
  printf("%zu scenarios on the engine (%u workers, %d round%s): %zu passed, %d failed\n", n, workers, rounds,
         rounds == 1 ? "" : "s", n - (size_t)files_failed, files_failed);
  curl_global_cleanup();
  return files_failed ? 1 : 0;
}
