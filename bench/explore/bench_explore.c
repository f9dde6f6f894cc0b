/* bench_explore.c — `xgr explore` throughput: states per second and total time of a complete
 * exploration (forced outcomes valid, invalid, error) for the seeds' examples (the scenario files
 * tests/scenarios/seed*.json) and for a 6-branch 3-of-6 kill join whose producers loop back on
 * invalid (bench/explore/kofn6_kill_backloops.json). One core, no I/O during the search.
 * usage: bench_explore [SRC_DIR] (default $XGR_SRC or .) */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/explore.h"

static void bench(const char *name, const json_t *bundle, const char *start) {
  char *txt = json_dumps(bundle, JSON_COMPACT);
  xgr_bundle *b = NULL;
  xgr_error e;
  if (!txt || xgr_bundle_parse(txt, strlen(txt), &b, &e, NULL)) {
    printf("%-44s does not load: %s\n", name, txt ? e.message : "?");
    free(txt);
    return;
  }
  xgr_explore_config cfg = {.max_states = 2000000};
  json_t *r = NULL;
  if (!xgr_explore_run(b->orch, b, start, xgr_value_null(), &cfg, &r, &e)) {
    double s = json_real_value(json_object_get(r, "seconds"));
    long long n = (long long)json_integer_value(json_object_get(r, "states"));
    printf("%-44s %9lld states %10lld transitions %9.4f s %11.0f states/s %s\n", name, n,
           (long long)json_integer_value(json_object_get(r, "transitions")), s, s > 0 ? (double)n / s : 0.0,
           json_is_true(json_object_get(r, "complete")) ? "complete" : "INCOMPLETE");
    json_decref(r);
  }
  xgr_bundle_free(b);
  free(txt);
}

int main(int argc, char **argv) {
  const char *src = argc > 1 ? argv[1] : getenv("XGR_SRC") ? getenv("XGR_SRC") : ".";
  char dir[4096], path[8192];
  snprintf(dir, sizeof dir, "%s/tests/scenarios", src);
  printf("# xgr explore: complete explorations, outcomes valid,invalid,error\n");
  DIR *dp = opendir(dir);
  if (!dp) {
    fprintf(stderr, "bench_explore: cannot open %s\n", dir);
    return 2;
  }
  struct dirent *de;
  char **names = NULL;
  size_t n = 0;
  while ((de = readdir(dp)))
    if (!strncmp(de->d_name, "seed", 4) && strstr(de->d_name, ".json")) {
      names = realloc(names, (n + 1) * sizeof *names);
      names[n++] = strdup(de->d_name);
    }
  closedir(dp);
  for (size_t i = 1; i < n; i++)   /* sorted output */
    for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
      char *t = names[j];
      names[j] = names[j - 1];
      names[j - 1] = t;
    }
  for (size_t i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    json_error_t je;
    json_t *sc = json_load_file(path, 0, &je);
    if (sc) bench(names[i], json_object_get(sc, "bundle"), json_string_value(json_object_get(sc, "start")));
    json_decref(sc);
    free(names[i]);
  }
  free(names);
  snprintf(path, sizeof path, "%s/bench/explore/kofn6_kill_backloops.json", src);
  json_error_t je;
  json_t *k6 = json_load_file(path, 0, &je);
  if (!k6) {
    fprintf(stderr, "bench_explore: %s: %s\n", path, je.text);
    return 2;
  }
  bench("kofn6_kill_backloops (3 of 6, kill)", k6, "A");
  json_decref(k6);
  return 0;
}
