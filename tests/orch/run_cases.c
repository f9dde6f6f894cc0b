/* run_cases.c — data-driven runner for orchestration documents.
 *
 * usage: run_cases DOCS_DIR EXPECT_JSON
 *        run_cases --public
 * EXPECT_JSON maps a file name in DOCS_DIR to {"errors": ["code path", ...], "warnings": [...]}:
 * the exact findings (load errors and static analysis) in the order xgr check reports them.
 * With --public (the test orch_cases_shared), the orchestrations of the public examples in
 * $XGR_SHARED/specs/xgr-public/examples must load and analyze without errors; without that folder
 * it skips (exit 77, tests/shared_dir.h). Prints one line per case and a summary; exits 1 on any
 * mismatch.
 */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../shared_dir.h"
#include "xgr/orch.h"

static int run_file(const char *path, xgr_diags *d) {
  xgr_orch *o = NULL;
  xgr_error e;
  xgr_orch_load_file(path, &o, &e, d);
  if (o) xgr_orch_analyze(o, d);
  int loaded = o != NULL;
  xgr_orch_free(o);
  return loaded;
}

/* Compare the findings of one severity with the expected "code path" strings. */
static int compare(const char *name, const xgr_diags *d, xgr_severity sev, const json_t *want, const char *what) {
  size_t wi = 0, bad = 0;
  for (size_t i = 0; i < d->n; i++) {
    if (d->items[i].severity != sev) continue;
    char got[600];
    snprintf(got, sizeof got, "%s %s", d->items[i].code, d->items[i].path);
    const json_t *w = json_array_get(want, wi++);
    if (!w || strcmp(json_string_value(w), got)) {
      printf("  %s: %s #%zu: got \"%s\" (%s), expected \"%s\"\n", name, what, wi, got, d->items[i].message,
             w ? json_string_value(w) : "nothing");
      bad++;
    }
  }
  for (; wi < json_array_size(want); wi++, bad++)
    printf("  %s: %s: missing expected \"%s\"\n", name, what, json_string_value(json_array_get(want, wi)));
  return bad == 0;
}

/* The public examples' orchestrations: each loads and analyzes without errors. */
static int run_public(void) {
  const char *shared = shared_dir_or_skip("orch_cases_shared", "the public examples' orchestrations");
  static const char *const examples[] = {
    "ApiPriceFeed/XRC729Json/ApiPriceFeedLoop_CoinbaseSpot.json",
    "ApiPriceFeedQuorum/XRC729Json/ApiPriceFeedQuorumLoop.json",
    "IterationOfPi/XRC729Json/IterationofPiOSTC.json",
  };
  int pass = 0, fail = 0;
  for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/specs/xgr-public/examples/%s", shared, examples[i]);
    xgr_diags d;
    xgr_diags_init(&d);
    int loaded = run_file(path, &d);
    int ok = loaded && xgr_diags_count(&d, XGR_SEV_ERROR) == 0;
    printf("%s public example %s\n", ok ? "PASS" : "FAIL", examples[i]);
    for (size_t k = 0; !ok && k < d.n; k++) printf("  %s: %s\n", d.items[k].path, d.items[k].message);
    ok ? pass++ : fail++;
    xgr_diags_free(&d);
  }
  printf("%d passed, %d failed\n", pass, fail);
  return fail ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--public")) return run_public();
  if (argc != 3) {
    fprintf(stderr, "usage: run_cases DOCS_DIR EXPECT_JSON | run_cases --public\n");
    return 2;
  }
  json_error_t je;
  json_t *expect = json_load_file(argv[2], 0, &je);
  if (!expect) {
    fprintf(stderr, "%s:%d: %s\n", argv[2], je.line, je.text);
    return 2;
  }
  int pass = 0, fail = 0;
  const char *name;
  json_t *want;
  json_object_foreach(expect, name, want) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", argv[1], name);
    xgr_diags d;
    xgr_diags_init(&d);
    run_file(path, &d);
    int ok = compare(name, &d, XGR_SEV_ERROR, json_object_get(want, "errors"), "error");
    ok &= compare(name, &d, XGR_SEV_WARNING, json_object_get(want, "warnings"), "warning");
    printf("%s %s\n", ok ? "PASS" : "FAIL", name);
    ok ? pass++ : fail++;
    xgr_diags_free(&d);
  }
  /* every document in DOCS_DIR must have an expectation */
  DIR *dir = opendir(argv[1]);
  struct dirent *de;
  while (dir && (de = readdir(dir))) {
    if (!strstr(de->d_name, ".json")) continue;
    if (!json_object_get(expect, de->d_name)) {
      printf("FAIL %s (no expectation in %s)\n", de->d_name, argv[2]);
      fail++;
    }
  }
  if (dir) closedir(dir);
  printf("%d passed, %d failed\n", pass, fail);
  json_decref(expect);
  return fail ? 1 : 0;
}
