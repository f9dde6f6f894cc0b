/* test_explore.c — the explorer (xgr/explore.h) against the deterministic driver.
 *
 *   scenarios  every tests/scenarios file without scripted actions or extra sessions: the final
 *              result of the driver (session result, and each join's outcome with the pieces it
 *              holds) is among the results the explorer reports, with --rules (the real rules) and,
 *              when the run used only valid / invalid / hard-error outcomes, with forced outcomes
 *              too. The seeds' examples (seed001_*, seed003_*) must be explored completely in
 *              under a second each.
 *   property   random small orchestrations whose steps have random fixed outcomes (a rule that is
 *              always valid, always invalid or always a hard error): every driver run ends in a
 *              final result the explorer reported reachable (forced outcomes and --rules). And
 *              free-mode runs on the driver's forced-run API — at each point any due process starts
 *              or any running one finishes, with a random outcome per execution — end in a
 *              result the explorer reported (forced outcomes).
 * usage: test_explore SCENARIO_DIR [N_RANDOM]
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xgr/driver.h"
#include "xgr/explore.h"
#include "xgr/json.h"

#define OWNER "0x0000000000000000000000000000000000000001"

static int nfail, nchecked, nskipped;

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* "result|J:outcome:P1+P2|..." with join entries sorted and unique. joins: [{join,outcome,pieces[]}] */
static char *summary(const char *result, char **items, size_t n) {
  if (n) qsort(items, n, sizeof *items, str_cmp);
  size_t len = strlen(result) + 1;
  for (size_t i = 0; i < n; i++) len += strlen(items[i]) + 1;
  char *s = malloc(len + 1);
  strcpy(s, result);
  for (size_t i = 0; i < n; i++) {
    if (i && !strcmp(items[i], items[i - 1])) continue;
    strcat(s, "|");
    strcat(s, items[i]);
  }
  for (size_t i = 0; i < n; i++) free(items[i]);
  free(items);
  return s;
}

static char *join_item(const char *join, const char *outcome, char **pieces, size_t np) {
  if (np) qsort(pieces, np, sizeof *pieces, str_cmp);
  char buf[2048];
  snprintf(buf, sizeof buf, "%s:%s:", join, outcome);
  for (size_t i = 0; i < np; i++) {
    if (i) strncat(buf, "+", sizeof buf - strlen(buf) - 1);
    strncat(buf, pieces[i], sizeof buf - strlen(buf) - 1);
  }
  free(pieces);
  return strdup(buf);
}

/* The driver's final result from its report. */
static char *report_summary(const json_t *rep) {
  char **items = NULL;
  size_t n = 0, i;
  json_t *p;
  json_array_foreach(json_object_get(rep, "processes"), i, p) {
    json_t *j = json_object_get(p, "join");
    if (!json_is_object(j)) continue;
    const char *out = json_string_value(json_object_get(j, "outcome"));
    if (!out || !strcmp(out, "open")) continue;
    char **pieces = NULL;
    size_t np = 0;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(j, "inbox"), k, v) {
      pieces = realloc(pieces, (np + 1) * sizeof *pieces);
      pieces[np++] = (char *)k;
    }
    items = realloc(items, (n + 1) * sizeof *items);
    items[n++] = join_item(json_string_value(json_object_get(p, "step")), out, pieces, np);
  }
  return summary(json_string_value(json_object_get(rep, "result")), items, n);
}

/* Whether the explorer's results hold summary s. */
static bool explored_has(const json_t *r, const char *s) {
  size_t i;
  json_t *x;
  json_array_foreach(json_object_get(r, "results"), i, x) {
    char **items = NULL;
    size_t n = 0, k;
    json_t *j;
    json_array_foreach(json_object_get(x, "joins"), k, j) {
      char **pieces = NULL;
      size_t np = 0, q;
      json_t *pc;
      json_array_foreach(json_object_get(j, "pieces"), q, pc) {
        pieces = realloc(pieces, (np + 1) * sizeof *pieces);
        pieces[np++] = (char *)json_string_value(pc);
      }
      items = realloc(items, (n + 1) * sizeof *items);
      items[n++] = join_item(json_string_value(json_object_get(j, "join")), json_string_value(json_object_get(j, "outcome")),
                             pieces, np);
    }
    char *t = summary(json_string_value(json_object_get(x, "result")), items, n);
    bool eq = !strcmp(t, s);
    free(t);
    if (eq) return true;
  }
  return false;
}

/* Whether every step ran with valid, invalid or a hard error (what forced outcomes cover). */
static bool plain_outcomes(const json_t *rep) {
  size_t i;
  json_t *p;
  json_array_foreach(json_object_get(rep, "processes"), i, p) {
    const char *why = json_string_value(json_object_get(p, "abortReason"));
    if (why && (!strcmp(why, "abortStep") || !strcmp(why, "cancelSession"))) return false;
  }
  return true;
}

static json_t *drive(const xgr_bundle *b, const char *start, xgr_value payload, uint64_t max_steps) {
  xgr_driver_config cfg = {.record = true, .max_steps = max_steps};
  xgr_driver *d = xgr_driver_new(&cfg);
  xgr_error e;
  json_t *rep = NULL;
  if (!xgr_driver_add_session(d, b, OWNER, 1, start, payload, &e)) {
    xgr_driver_run(d);
    rep = xgr_driver_report(d, 0);
  }
  xgr_driver_free(d);
  return rep;
}

/* Check that the driver's final result is explored; returns 1 checked, 0 skipped (incomplete). */
static int check_one(const char *name, const xgr_bundle *b, const char *start, xgr_value payload, const json_t *rep,
                     bool rules, size_t max_states, double *secs, bool *complete) {
  xgr_explore_config cfg = {.rules = rules, .max_states = max_states};
  json_t *r = NULL;
  xgr_error e;
  if (xgr_explore_run(b->orch, b, start, payload, &cfg, &r, &e)) {
    printf("  %s: explore failed: %s\n", name, e.message);
    nfail++;
    return 0;
  }
  char *s = report_summary(rep);
  bool has = explored_has(r, s);
  *complete = json_is_true(json_object_get(r, "complete"));
  if (secs) *secs = json_real_value(json_object_get(r, "seconds"));
  int rc = 1;
  if (!has && *complete) {
    char *txt = json_dumps(json_object_get(r, "results"), JSON_COMPACT);
    printf("  %s (%s): the driver ends \"%s\", not among the explored results %s\n", name, rules ? "rules" : "forced", s, txt);
    free(txt);
    nfail++;
  } else if (!has) {
    rc = 0;
  }
  free(s);
  json_decref(r);
  return rc;
}

static void scenarios(const char *dir) {
  DIR *dp = opendir(dir);
  if (!dp) {
    printf("cannot open %s\n", dir);
    nfail++;
    return;
  }
  struct dirent *de;
  while ((de = readdir(dp))) {
    size_t l = strlen(de->d_name);
    if (l < 6 || strcmp(de->d_name + l - 5, ".json")) continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    json_error_t je;
    json_t *sc = json_load_file(path, 0, &je);
    if (!sc) continue;
    if (json_object_get(sc, "script") || json_object_get(sc, "sessions")) {
      json_decref(sc);
      continue;
    }
    char *bt = json_dumps(json_object_get(sc, "bundle"), JSON_COMPACT);
    xgr_bundle *b = NULL;
    xgr_error e;
    xgr_value payload = xgr_value_null();
    if (bt && !xgr_bundle_parse(bt, strlen(bt), &b, &e, NULL) &&
        !xgr_value_from_json(json_object_get(sc, "payload"), 0, &payload, &e)) {
      const char *start = json_string_value(json_object_get(sc, "start"));
      json_t *rep = drive(b, start, payload, 10000);
      const char *res = json_string_value(json_object_get(rep, "result"));
      if (rep && strcmp(res, "limit")) {
        double secs = 0;
        bool complete = false;
        int ok = check_one(de->d_name, b, start, payload, rep, true, 5000, NULL, &complete);
        if (plain_outcomes(rep)) ok &= check_one(de->d_name, b, start, payload, rep, false, 5000, &secs, &complete);
        if (ok) nchecked++;
        else nskipped++;
        if (!strncmp(de->d_name, "seed", 4)) {
          printf("  %-40s forced outcomes: %s in %.4f s\n", de->d_name, complete ? "complete" : "INCOMPLETE", secs);
          if (!complete || secs >= 1.0) {
            printf("  %s: the seed example must be explored completely in under 1 s\n", de->d_name);
            nfail++;
          }
        }
      }
      json_decref(rep);
    }
    xgr_value_release(payload);
    xgr_bundle_free(b);
    free(bt);
    json_decref(sc);
  }
  closedir(dp);
}

/* ---- random orchestrations -------------------------------------------------------------------- */

static unsigned rnd(unsigned *st, unsigned n) {
  *st = *st * 1103515245u + 12345u;
  return (*st >> 8) % n;
}

static char *random_bundle(unsigned *st) {
  unsigned n = 3 + rnd(st, 4);
  json_t *structure = json_object(), *rules = json_object();
  static const char *const bodies[] = {"1 == 1", "1 == 2", "1 / 0 == 1"};
  static const char *const whens[] = {"valid", "invalid", "any"};
  for (unsigned i = 0; i < n; i++) {
    char id[16], ref[40];
    snprintf(id, sizeof id, "S%u", i);
    snprintf(ref, sizeof ref, "${addr:%s}", id);
    json_t *step = json_pack("{s:s}", "rule", ref);
    for (int br = 0; br < 2; br++) {
      if (rnd(st, 10) >= (br ? 3u : 8u) || i + 1 >= n) continue;
      json_t *spawns = json_array();
      unsigned ns = 1 + rnd(st, 3);
      for (unsigned k = 0; k < ns; k++) {
        unsigned t = rnd(st, 8) == 0 ? rnd(st, i + 1) : i + 1 + rnd(st, n - i - 1);
        char tid[16];
        snprintf(tid, sizeof tid, "S%u", t);
        bool dup = false;
        size_t q;
        json_t *v;
        json_array_foreach(spawns, q, v) dup |= !strcmp(json_string_value(v), tid);
        if (!dup) json_array_append_new(spawns, json_string(tid));
      }
      json_t *branch = json_pack("{s:o}", "spawns", spawns);
      if (rnd(st, 10) < 4) {
        unsigned t = i + 1 + rnd(st, n - i - 1);
        char tid[16];
        snprintf(tid, sizeof tid, "S%u", t);
        json_t *from = json_array();
        size_t q;
        json_t *v;
        json_array_foreach(spawns, q, v)
          if (strcmp(json_string_value(v), tid))
            json_array_append_new(from, json_pack("{s:s, s:s}", "node", json_string_value(v), "when", whens[rnd(st, 3)]));
        if (json_array_size(from)) {
          unsigned k = 1 + rnd(st, (unsigned)json_array_size(from));
          json_object_set_new(branch, "join", json_pack("{s:s, s:{s:i}, s:s, s:o}", "joinid", tid, "mode", "k", (int)k,
                                                          "waitonjoin", rnd(st, 2) ? "kill" : "drain", "from", from));
        } else {
          json_decref(from);
        }
      }
      json_object_set_new(step, br ? "onInvalid" : "onValid", branch);
    }
    json_object_set_new(structure, id, step);
    json_object_set_new(rules, id, json_pack("{s:{}, s:[s]}", "payload", "rules", bodies[rnd(st, 3)]));
  }
  json_t *doc = json_pack("{s:{s:s, s:o}, s:o}", "orchestration", "id", "random", "structure", structure, "rules", rules);
  char *txt = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  return txt;
}

typedef struct live {
  uint64_t iter[256];
  bool running[256];
  size_t n;
} live;

static void collect_live(void *ctx, const xgr_proc *p) {
  live *l = ctx;
  if (l->n == 256) return;
  bool open_target = p->join && !p->join->closed;
  if (p->status == XGR_PROC_RUNNING || (p->status == XGR_PROC_WAITING && !open_target && p->next_wake_at <= 0)) {
    l->iter[l->n] = p->iter;
    l->running[l->n++] = p->status == XGR_PROC_RUNNING;
  }
}

/* One random free-mode run (no timers in these bundles: the clock stays at 0). NULL when it did
 * not end within 300 actions. */
static json_t *random_free_run(const xgr_bundle *b, unsigned *st) {
  xgr_driver_config cfg = {.record = true};
  xgr_driver *d = xgr_driver_new(&cfg);
  xgr_error e;
  xgr_value pl = xgr_map_new(0);
  json_t *rep = NULL;
  if (!xgr_driver_add_session(d, b, OWNER, 1, "S0", pl, &e)) {
    for (int n = 0; n < 300; n++) {
      const xgr_session *s = xgr_driver_session(d, 0);
      live l = {.n = 0};
      xgr_session_foreach(s, collect_live, &l);
      if (!l.n) break;
      size_t pick = rnd(st, (unsigned)l.n);
      if (!l.running[pick]) {
        xgr_driver_force_promote(d, 0, l.iter[pick], &e);
        continue;
      }
      const xgr_proc *p = xgr_session_find(s, l.iter[pick]);
      xgr_step_outcome o;
      memset(&o, 0, sizeof o);
      unsigned k = rnd(st, 3);
      o.kind = k == 0 ? XGR_OUTCOME_VALID : k == 1 ? XGR_OUTCOME_INVALID : XGR_OUTCOME_HARD_ERROR;
      o.error = k == 2 ? "random hard error" : NULL;
      o.effective = xgr_value_retain(p->payload);
      o.outcome_payload = xgr_value_null();
      xgr_value keep = o.effective;
      xgr_driver_force_result(d, 0, l.iter[pick], &o, &e);
      xgr_value_release(keep);
    }
    if (xgr_driver_result(d, 0) != XGR_RESULT_RUNNING) rep = xgr_driver_report(d, 0);
  }
  xgr_value_release(pl);
  xgr_driver_free(d);
  return rep;
}

/* The next random bundle (random_bundle) that parses, or NULL when this one does not; *txt gets
 * its text (caller frees both). */
static xgr_bundle *random_parsed(unsigned *st, char **txt) {
  *txt = random_bundle(st);
  xgr_bundle *b = NULL;
  xgr_error e;
  if (!xgr_bundle_parse(*txt, strlen(*txt), &b, &e, NULL)) return b;
  free(*txt);
  *txt = NULL;
  return NULL;
}

static void free_mode(unsigned count) {
  unsigned st = 777, tried = 0, runs = 0;
  while (runs < count && tried < count * 20) {
    tried++;
    char *txt;
    xgr_bundle *b = random_parsed(&st, &txt);
    if (!b) continue;
    xgr_explore_config cfg = {.max_states = 20000};
    json_t *r = NULL;
    xgr_value pl = xgr_map_new(0);
    xgr_error e;
    if (!xgr_explore_run(b->orch, b, "S0", pl, &cfg, &r, &e) && json_is_true(json_object_get(r, "complete"))) {
      for (int k = 0; k < 5; k++) {   /* five random runs per orchestration */
        json_t *rep = random_free_run(b, &st);
        if (!rep) continue;
        char *sum = report_summary(rep);
        if (!explored_has(r, sum)) {
          char *res = json_dumps(json_object_get(r, "results"), JSON_COMPACT);
          printf("  free-mode run #%u: ends \"%s\", not among the explored results %s\n    bundle: %s\n", tried, sum, res, txt);
          free(res);
          nfail++;
        }
        free(sum);
        json_decref(rep);
      }
      runs++;
    }
    json_decref(r);
    xgr_value_release(pl);
    xgr_bundle_free(b);
    free(txt);
  }
  printf("free mode: %u random orchestrations, 5 random free-mode runs each, every end explored\n", runs);
}

static void property(unsigned count) {
  unsigned st = 12345, tried = 0, runs = 0;
  while (runs < count && tried < count * 20) {
    tried++;
    char *txt;
    xgr_bundle *b = random_parsed(&st, &txt);
    if (!b) continue;
    xgr_value pl = xgr_map_new(0);
    json_t *rep = drive(b, "S0", pl, 300);
    if (rep && strcmp(json_string_value(json_object_get(rep, "result")), "limit")) {
      char name[64];
      snprintf(name, sizeof name, "random #%u", tried);
      bool complete;
      int before = nfail;
      check_one(name, b, "S0", pl, rep, false, 20000, NULL, &complete);
      check_one(name, b, "S0", pl, rep, true, 20000, NULL, &complete);
      if (nfail != before) printf("    bundle: %s\n", txt);
      runs++;
    }
    json_decref(rep);
    xgr_value_release(pl);
    xgr_bundle_free(b);
    free(txt);
  }
  printf("property: %u random orchestrations run on the driver and explored\n", runs);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_explore SCENARIO_DIR [N_RANDOM]\n");
    return 2;
  }
  scenarios(argv[1]);
  printf("scenarios: %d checked, %d skipped (exploration cut before the driver's result)\n", nchecked, nskipped);
  property(argc > 2 ? (unsigned)atoi(argv[2]) : 200);
  free_mode(argc > 2 ? (unsigned)atoi(argv[2]) : 200);
  printf("%s: %d failure%s\n", nfail ? "FAIL" : "ok", nfail, nfail == 1 ? "" : "s");
  return nfail ? 1 : 0;
}
