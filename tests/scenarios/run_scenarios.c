/* run_scenarios.c — the data-driven scenario runner: every tests/scenarios/NAME.json holds a bundle,
 * a start step and payload, optional scripted control actions and the expected run. Each is run
 * on the deterministic driver (twice: the two reports must be byte-identical) and checked:
 *   expect.result        "completed" | "stalled" | "killed" | "limit"
 *   expect.processes[]   {pid, step?, status?, valid?, paused?, join? (outcome), abortReason?,
 *                         error? (true: has one), payload? (subset), payloadLacks? [keys],
 *                         joinFail? (subset of join.fail)}
 *   expect.count         number of processes the session created
 *   expect.history       number of history rows
 *   expect.historyAt     {pid: time of its (first) history row}
 *   expect.actionsOk     [bool per scripted action, in the order they were applied]
 * "sessions": [{"owner", "rootPid", "start", "payload"}] adds more sessions on the same bundle
 * (for internal wake-ups between sessions); expect.sessions[i] holds the same checks for them.
 * usage: run_scenarios DIR [NAME_SUBSTRING]. XGR_SCENARIO_DUMP=1 prints each report.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/driver.h"

#define OWNER "0x0000000000000000000000000000000000000001"

static int nfail;

static void failf(const char *name, const char *fmt, const char *a, const char *b) {
  printf("  %s: ", name);
  printf(fmt, a, b);
  printf("\n");
  nfail++;
}

static json_t *find_proc(json_t *procs, const char *pid) {
  size_t i;
  json_t *p;
  json_array_foreach(procs, i, p) if (!strcmp(json_string_value(json_object_get(p, "pid")), pid)) return p;
  return NULL;
}

/* Every key of want is in got with an equal value (JSON equality). */
static int subset(const json_t *want, const json_t *got) {
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)want, k, v) {
    const json_t *g = json_object_get(got, k);
    if (!g) return 0;
    if (json_is_number(v) && json_is_number(g)) {
      if (json_number_value(v) != json_number_value(g)) return 0;
    } else if (!json_equal(v, g)) {
      return 0;
    }
  }
  return 1;
}

static char *dump(const json_t *j) {
  return json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
}

static void check_proc(const char *name, json_t *procs, const json_t *w) {
  const char *pid = json_string_value(json_object_get(w, "pid"));
  json_t *p = find_proc(procs, pid);
  if (!p) {
    failf(name, "process %s%s was never created", pid, "");
    return;
  }
  static const char *const plain[] = {"step", "status", "valid", "paused", "abortReason"};
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
    const json_t *wv = json_object_get(w, plain[i]);
    if (!wv) continue;
    const json_t *gv = json_object_get(p, plain[i]);
    if (!gv || !json_equal(wv, gv)) {
      char *ws = dump(wv), *gs = gv ? dump(gv) : strdup("(missing)");
      char what[128];
      snprintf(what, sizeof what, "%s.%s = %%s, expected %%s", pid, plain[i]);
      failf(name, what, gs, ws);
      free(ws);
      free(gs);
    }
  }
  const json_t *wj = json_object_get(w, "join");
  if (wj) {
    const json_t *gj = json_object_get(p, "join");
    const char *out = json_is_object(gj) ? json_string_value(json_object_get(gj, "outcome")) : "(no join)";
    if (strcmp(out, json_string_value(wj))) failf(name, "join outcome %s, expected %s", out, json_string_value(wj));
    const json_t *wf = json_object_get(w, "joinFail");
    if (wf && !(json_is_object(gj) && subset(wf, json_object_get(gj, "fail"))))
      failf(name, "%s join.fail lacks %s", pid, dump(wf));
  }
  const json_t *we = json_object_get(w, "error");
  if (json_is_true(we) && !json_is_string(json_object_get(p, "error"))) failf(name, "%s has no error%s", pid, "");
  const json_t *wp = json_object_get(w, "payload");
  if (wp && !subset(wp, json_object_get(p, "payload"))) {
    char *ws = dump(wp), *gs = dump(json_object_get(p, "payload"));
    char what[128];
    snprintf(what, sizeof what, "%s payload %%s lacks %%s", pid);
    failf(name, what, gs, ws);
    free(ws);
    free(gs);
  }
  const json_t *lacks = json_object_get(w, "payloadLacks");
  size_t i;
  json_t *k;
  json_array_foreach(lacks, i, k) if (json_object_get(json_object_get(p, "payload"), json_string_value(k)))
      failf(name, "%s payload has key %s", pid, json_string_value(k));
}

/* Run the scenario; returns the reports of every session as an array. */
static json_t *run(const char *name, const json_t *sc, xgr_bundle *b) {
  xgr_driver_config cfg = {.record = true, .max_steps = 10000};
  const json_t *ms = json_object_get(sc, "maxSteps");
  if (json_is_integer(ms)) cfg.max_steps = (uint64_t)json_integer_value(ms);
  xgr_driver *d = xgr_driver_new(&cfg);
  xgr_value payload;
  xgr_error e;
  xgr_value_from_json(json_object_get(sc, "payload"), 0, &payload, &e);
  const json_t *owner = json_object_get(sc, "owner");
  json_t *rep = NULL;
  if (xgr_driver_add_session(d, b, owner ? json_string_value(owner) : OWNER, 1,
                             json_string_value(json_object_get(sc, "start")), payload, &e) ||
      (json_object_get(sc, "script") && xgr_driver_add_script(d, json_object_get(sc, "script"), &e))) {
    failf(name, "setup: %s%s", e.message, "");
  } else {
    size_t i, nsess = 1;
    const json_t *more;
    json_array_foreach(json_object_get(sc, "sessions"), i, more) {
      xgr_value pl = xgr_value_null();
      if (json_object_get(more, "payload")) xgr_value_from_json(json_object_get(more, "payload"), 0, &pl, &e);
      if (xgr_driver_add_session(d, b, json_string_value(json_object_get(more, "owner")),
                                 (uint64_t)json_integer_value(json_object_get(more, "rootPid")),
                                 json_string_value(json_object_get(more, "start")), pl, &e))
        failf(name, "setup of extra session: %s%s", e.message, "");
      xgr_value_release(pl);
      nsess++;
    }
    xgr_driver_run(d);
    rep = json_array();
    for (i = 0; i < nsess; i++) json_array_append_new(rep, xgr_driver_report(d, i));
  }
  xgr_value_release(payload);
  xgr_driver_free(d);
  return rep;
}

static void check_report(const char *file, json_t *rep, const json_t *x) {
  if (!rep) {
    failf(file, "no report for an expected session%s%s", "", "");
    return;
  }
  const char *res = json_string_value(json_object_get(rep, "result"));
  const json_t *wr = json_object_get(x, "result");
  if (wr && strcmp(res, json_string_value(wr))) failf(file, "result %s, expected %s", res, json_string_value(wr));
  json_t *procs = json_object_get(rep, "processes");
  size_t i;
  json_t *w;
  json_array_foreach(json_object_get(x, "processes"), i, w) check_proc(file, procs, w);
  const json_t *cnt = json_object_get(x, "count");
  char a[32], bb[32];
  if (cnt && (json_int_t)json_array_size(procs) != json_integer_value(cnt)) {
    snprintf(a, sizeof a, "%zu", json_array_size(procs));
    snprintf(bb, sizeof bb, "%lld", (long long)json_integer_value(cnt));
    failf(file, "%s processes, expected %s", a, bb);
  }
  json_t *hist = json_object_get(rep, "history");
  const json_t *hc = json_object_get(x, "history");
  if (hc && (json_int_t)json_array_size(hist) != json_integer_value(hc)) {
    snprintf(a, sizeof a, "%zu", json_array_size(hist));
    snprintf(bb, sizeof bb, "%lld", (long long)json_integer_value(hc));
    failf(file, "%s history rows, expected %s", a, bb);
  }
  const char *pid;
  json_t *at;
  json_object_foreach(json_object_get(x, "historyAt"), pid, at) {
    json_int_t got = -1;
    size_t k;
    json_t *h;
    json_array_foreach(hist, k, h) if (!strcmp(json_string_value(json_object_get(h, "pid")), pid)) {
      got = json_integer_value(json_object_get(h, "at"));
      break;
    }
    if (got != json_integer_value(at)) {
      snprintf(a, sizeof a, "%lld", (long long)got);
      snprintf(bb, sizeof bb, "%lld", (long long)json_integer_value(at));
      char what[96];
      snprintf(what, sizeof what, "%s ran at %%s ms, expected %%s", pid);
      failf(file, what, a, bb);
    }
  }
  const json_t *aok = json_object_get(x, "actionsOk");
  json_t *acts = json_object_get(rep, "actions");
  json_array_foreach(aok, i, w) {
    const json_t *g = json_object_get(json_array_get(acts, i), "ok");
    if (!g || !json_equal(g, w)) {
      snprintf(a, sizeof a, "%zu", i);
      failf(file, "action %s: %s", a,
            g ? json_string_value(json_object_get(json_array_get(acts, i), "message")) : "not applied");
    }
  }
}

static void run_file(const char *dir, const char *file) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  json_error_t je;
  json_t *sc = json_load_file(path, 0, &je);
  int before = nfail;
  if (!sc) {
    failf(file, "cannot load: %s%s", je.text, "");
    printf("FAIL %s\n", file);
    return;
  }
  char *btxt = json_dumps(json_object_get(sc, "bundle"), JSON_COMPACT);
  xgr_bundle *b = NULL;
  xgr_error e;
  if (!btxt || xgr_bundle_parse(btxt, strlen(btxt), &b, &e, NULL)) {
    failf(file, "bundle does not load: %s: %s", e.path, e.message);
  } else {
    json_t *rep = run(file, sc, b), *rep2 = run(file, sc, b);
    if (rep) {
      if (getenv("XGR_SCENARIO_DUMP")) {
        char *s = json_dumps(rep, JSON_INDENT(1));
        printf("%s\n", s);
        free(s);
      }
      char *s1 = dump(rep), *s2 = dump(rep2);
      if (!s2 || strcmp(s1, s2)) failf(file, "two runs gave different reports%s%s", "", "");
      free(s1);
      free(s2);
      check_report(file, json_array_get(rep, 0), json_object_get(sc, "expect"));
      size_t si;
      const json_t *xs;
      json_array_foreach(json_object_get(json_object_get(sc, "expect"), "sessions"), si, xs)
          check_report(file, json_array_get(rep, si + 1), xs);
    }
    json_decref(rep);
    json_decref(rep2);
  }
  free(btxt);
  xgr_bundle_free(b);
  json_decref(sc);
  printf("%s %s\n", nfail == before ? "PASS" : "FAIL", file);
}

static int cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: run_scenarios DIR [NAME_SUBSTRING]\n");
    return 2;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  DIR *dir = opendir(argv[1]);
  if (!dir) {
    perror(argv[1]);
    return 2;
  }
  char *names[1024];
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(dir)) && n < 1024) {
    size_t l = strlen(de->d_name);
    if (l > 5 && !strcmp(de->d_name + l - 5, ".json") && (argc < 3 || strstr(de->d_name, argv[2])))
      names[n++] = strdup(de->d_name);
  }
  closedir(dir);
  qsort(names, n, sizeof *names, cmp);
  int files_failed = 0;
  for (size_t i = 0; i < n; i++) {
    int before = nfail;
    run_file(argv[1], names[i]);
    files_failed += nfail != before;
    free(names[i]);
  }
  printf("%zu scenarios: %zu passed, %d failed\n", n, n - (size_t)files_failed, files_failed);
  curl_global_cleanup();
  return files_failed ? 1 : 0;
}
