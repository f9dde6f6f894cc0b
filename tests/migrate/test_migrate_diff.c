/* test_migrate_diff.c — the explorer's model of a migration and what the engine keeps of one agree
 * (issue 36). For random pairs of small orchestrations (OLD random, NEW the same steps with random
 * changes: spawns dropped or added, join k and policy changed), every state of OLD at a safe point
 * that an exploration reaches is migrated with the core's xgr_session_migrate — the one function
 * the engine's actor and `xgr migrate-check` call. Its effects (a PROC per process, as the engine's
 * batch carries them) are written to a memory store, the session is restored from those rows under
 * NEW (what the engine runs after the commit and after any restart), and NEW is explored from both:
 * the explorations must be equal (states, results, findings with their traces). A migration the
 * core refuses must be refused with a problem that names a path.
 *
 *   test_migrate_diff [PAIRS]
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/bundle.h"
#include "xgr/explore.h"
#include "xgr/migrate.h"
#include "xgr/store.h"

static unsigned rnd(unsigned *st, unsigned n) {
  *st = *st * 1103515245u + 12345u;
  return (*st >> 8) % n;
}

/* A random orchestration of n steps S0..S(n-1); with a variant seed, the same shape changed. */
static char *random_orch(unsigned seed, unsigned n, unsigned variant) {
  unsigned st = seed;
  json_t *structure = json_object();
  static const char *const whens[] = {"valid", "invalid", "any"};
  for (unsigned i = 0; i < n; i++) {
    char id[16];
    snprintf(id, sizeof id, "S%u", i);
    json_t *step = json_pack("{s:s}", "rule", "${addr:R}");
    unsigned vs = variant * 7919u + i;
    for (int br = 0; br < 2; br++) {
      if (rnd(&st, 10) >= (br ? 3u : 8u) || i + 1 >= n) continue;
      json_t *spawns = json_array();
      unsigned ns = 1 + rnd(&st, 3);
      for (unsigned k = 0; k < ns; k++) {
        unsigned t = i + 1 + rnd(&st, n - i - 1);
        if (variant && rnd(&vs, 4) == 0) continue;   /* NEW drops this spawn */
        char tid[16];
        snprintf(tid, sizeof tid, "S%u", t);
        bool dup = false;
        size_t q;
        json_t *v;
        json_array_foreach(spawns, q, v) dup |= !strcmp(json_string_value(v), tid);
        if (!dup) json_array_append_new(spawns, json_string(tid));
      }
      if (variant && rnd(&vs, 5) == 0 && i + 1 < n) {   /* NEW adds one */
        char tid[16];
        snprintf(tid, sizeof tid, "S%u", i + 1);
        bool dup = false;
        size_t q;
        json_t *v;
        json_array_foreach(spawns, q, v) dup |= !strcmp(json_string_value(v), tid);
        if (!dup) json_array_append_new(spawns, json_string(tid));
      }
      json_t *branch = json_pack("{s:o}", "spawns", spawns);
      if (rnd(&st, 10) < 5) {
        unsigned t = i + 1 + rnd(&st, n - i - 1);
        char tid[16];
        snprintf(tid, sizeof tid, "S%u", t);
        json_t *from = json_array();
        size_t q;
        json_t *v;
        json_array_foreach(spawns, q, v)
          if (strcmp(json_string_value(v), tid))
            json_array_append_new(from, json_pack("{s:s, s:s}", "node", json_string_value(v), "when", whens[rnd(&st, 3)]));
        if (json_array_size(from)) {
          unsigned k = 1 + rnd(&st, (unsigned)json_array_size(from));
          if (variant && rnd(&vs, 3) == 0) k = 1 + rnd(&vs, (unsigned)json_array_size(from));
          const char *pol = rnd(&st, 2) ? "kill" : "drain";
          if (variant && rnd(&vs, 4) == 0) pol = "drain";
          json_object_set_new(branch, "join", json_pack("{s:s, s:{s:i}, s:s, s:o}", "joinid", tid, "mode", "k", (int)k,
                                                          "waitonjoin", pol, "from", from));
        } else {
          json_decref(from);
        }
      }
      json_object_set_new(step, br ? "onInvalid" : "onValid", branch);
    }
    json_object_set_new(structure, id, step);
  }
  json_t *doc = json_pack("{s:s, s:o}", "id", "random", "structure", structure);
  char *txt = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  return txt;
}

typedef struct states {
  xgr_session **s;
  int64_t *now;
  size_t n, cap;
} states;

static void keep(void *ctx, const xgr_session *s, int64_t now) {
  states *c = ctx;
  if (xgr_session_running(s) || !xgr_session_live(s) || c->n >= 200) return;
  if (c->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 32;
    c->s = realloc(c->s, c->cap * sizeof *c->s);
    c->now = realloc(c->now, c->cap * sizeof *c->now);
  }
  c->s[c->n] = xgr_session_clone(s);
  c->now[c->n++] = now;
}

static int problems;
static void on_problem(void *ctx, const char *path, const char *message) {
  (void)ctx;
  (void)message;
  if (!path || !path[0]) {
    fprintf(stderr, "a migration problem without a path: %s\n", message);
    exit(1);
  }
  problems++;
}

typedef struct restored {
  const xgr_orch *o;
  xgr_session *s;
} restored;

static int restore_one(void *ctx, const xgr_store_live *l) {
  restored *r = ctx;
  xgr_error e;
  r->s = xgr_store_restore_session(r->o, l, NULL, 0, NULL, &e);
  if (!r->s) fprintf(stderr, "restore failed: %s: %s\n", e.path, e.message);
  return 0;
}

/* NEW explored from a as from b: the same answer (seconds aside). */
static bool same(const xgr_session *a, const xgr_session *b, int64_t now) {
  xgr_explore_config cfg = {.max_states = 5000};
  json_t *ra = NULL, *rb = NULL;
  xgr_error e;
  xgr_explore_from(a, now, NULL, "x", &cfg, &ra, &e);
  xgr_explore_from(b, now, NULL, "x", &cfg, &rb, &e);
  json_object_del(ra, "seconds");
  json_object_del(rb, "seconds");
  bool eq = json_equal(ra, rb);
  if (!eq) {
    char *x = json_dumps(ra, JSON_COMPACT), *y = json_dumps(rb, JSON_COMPACT);
    fprintf(stderr, "explored from the core's migrated state:\n%.2000s\nfrom the stored one:\n%.2000s\n", x, y);
    free(x);
    free(y);
  }
  json_decref(ra);
  json_decref(rb);
  return eq;
}

int main(int argc, char **argv) {
  unsigned pairs = argc > 1 ? (unsigned)atoi(argv[1]) : 40, done = 0, checked = 0, moved = 0, refused = 0;
  for (unsigned seed = 1; done < pairs && seed < pairs * 20; seed++) {
    unsigned st = seed * 2654435761u, n = 3 + rnd(&st, 4);
    char *ot = random_orch(seed, n, 0), *nt = random_orch(seed, n, 1 + seed % 5);
    xgr_orch *oo = NULL, *no = NULL;
    xgr_error e;
    if (xgr_orch_parse(ot, strlen(ot), &oo, &e, NULL) || xgr_orch_parse(nt, strlen(nt), &no, &e, NULL)) {
      xgr_orch_free(oo);
      xgr_orch_free(no);
      free(ot);
      free(nt);
      continue;
    }
    done++;
    states ss = {0};
    xgr_explore_config cfg = {.max_states = 3000};
    xgr_explore_states(oo, NULL, "S0", xgr_value_null(), &cfg, keep, &ss, NULL, &e);
    int map[XGR_MAX_STEPS];
    if (xgr_migrate_map_build(oo, no, 0, NULL, NULL, map, &e)) return fprintf(stderr, "map: %s\n", e.message), 1;
    for (size_t i = 0; i < ss.n; i++) {
      checked++;
      xgr_effects fx;
      xgr_effects_init(&fx);
      xgr_session *m = NULL;
      int before = problems;
      int rc = xgr_session_migrate(ss.s[i], no, map, ss.now[i], &fx, &m, on_problem, NULL, &e);
      if (rc) {
        if (problems == before) return fprintf(stderr, "refused without a problem: %s\n", e.message), 1;
        refused++;
      } else {
        moved++;
        /* what the engine writes: the session row and every process's row from the effects */
        xgr_store *store = xgr_store_open("memory:", &(xgr_store_config){0}, &e);
        assert(store);
        xgr_store_changes *b = xgr_store_changes_new();
        xgr_store_changes_add_session_start(b, m, NULL);
        xgr_store_changes_add_effects(b, m, &fx);
        if (xgr_store_commit(store, b, &e)) return fprintf(stderr, "commit: %s\n", e.message), 1;
        restored r = {no, NULL};
        xgr_store_load_live(store, restore_one, &r, &e);
        if (!r.s) return fprintf(stderr, "pair %u state %zu: the migrated session is not in the store\n", seed, i), 1;
        if (!same(m, r.s, ss.now[i])) {
          fprintf(stderr, "pair %u state %zu differs\nOLD %s\nNEW %s\n", seed, i, ot, nt);
          return 1;
        }
        xgr_session_free(r.s);
        xgr_store_close(store);
        xgr_session_free(m);
      }
      xgr_effects_free(&fx);
      xgr_session_free(ss.s[i]);
    }
    free(ss.s);
    free(ss.now);
    xgr_orch_free(oo);
    xgr_orch_free(no);
    free(ot);
    free(nt);
  }
  printf("%u random pairs, %u states at a safe point: %u migrated and equal after the store, %u refused with a problem\n",
         done, checked, moved, refused);
  if (done < pairs / 2 || !moved || !refused) return fprintf(stderr, "too few cases of each kind\n"), 1;
  return 0;
}
