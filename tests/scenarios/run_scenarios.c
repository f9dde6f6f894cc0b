/* run_scenarios.c — the data-driven scenario runner: every tests/scenarios/NAME.json holds a bundle,
 * a start step and payload, optional scripted control actions and the expected run. Each is run
 * on the deterministic driver (twice: the two reports must be byte-identical) and checked:
 *   expect.result        "completed" | "stalled" | "killed" | "limit"
 *   expect.processes[]   {pid, step?, status?, valid?, paused?, join? (outcome), abortReason?,
 *                         error? (true: has one), payload? (subset), payloadLacks? [keys],
 *                         joinFail? (subset of join.fail), joinClosedAt? (ms)}
 *   expect.count         number of processes the session created
 *   expect.history       number of history rows
 *   expect.historyAt     {pid: time of its (first) history row}
 *   expect.actionsOk     [bool per scripted action, in the order they were applied]
 * "sessions": [{"owner", "rootPid", "start", "payload"}] adds more sessions on the same bundle
 * (for internal wake-ups between sessions); expect.sessions[i] holds the same checks for them.
 * usage: run_scenarios DIR [NAME_SUBSTRING]. XGR_SCENARIO_DUMP=1 prints each report.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/driver.h"
#include "expect.h"

#define OWNER "0x0000000000000000000000000000000000000001"

static int nfail;

static void failf(const char *name, const char *fmt, const char *a, const char *b) {
  printf("  %s: ", name);
  printf(fmt, a, b);
  printf("\n");
  nfail++;
}

static char *dump(const json_t *j) { return json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY); }

/* Run the scenario; returns the reports of every session as an array. */
static json_t *run(const char *name, const json_t *sc, xgr_bundle *b) {
  xgr_error e;
  xgr_driver *d = scen_driver(sc, b, OWNER, &e);
  json_t *rep = NULL;
  if (!d) {
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
    xgr_driver_free(d);
  }
  return rep;
}

static void on_fail(void *ctx, const char *msg) {
  printf("  %s: %s\n", (const char *)ctx, msg);
  nfail++;
}

static void check_report(const char *file, json_t *rep, const json_t *x) {
  if (!rep) {
    failf(file, "no report for an expected session%s%s", "", "");
    return;
  }
  scen_check(x, rep, on_fail, (void *)file);
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
  xgr_error e;
  xgr_bundle *b = scen_bundle(sc, &e);
  if (!b) {
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
  xgr_bundle_free(b);
  json_decref(sc);
  printf("%s %s\n", nfail == before ? "PASS" : "FAIL", file);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: run_scenarios DIR [NAME_SUBSTRING]\n");
    return 2;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  size_t n;
  char **names = scen_files(argv[1], argc < 3 ? NULL : argv[2], &n);
  if (!names) return 2;
  int files_failed = 0;
  for (size_t i = 0; i < n; i++) {
    int before = nfail;
    run_file(argv[1], names[i]);
    files_failed += nfail != before;
    free(names[i]);
  }
  free(names);
  printf("%zu scenarios: %zu passed, %d failed\n", n, n - (size_t)files_failed, files_failed);
  curl_global_cleanup();
  return files_failed ? 1 : 0;
}
