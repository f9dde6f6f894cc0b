/* prop_sessions.c — property test of the session core on the deterministic driver: random
 * orchestrations (up to 20 steps, loops, nested joins, every mode and policy) with random step
 * outcomes (valid, invalid, hard error, abortStep; loops end through per-step counters), checking:
 *   1. every join closes at most once;
 *   2. at most one piece per expected step, and each piece came from that step;
 *   3. no process is promoted after its scope's join closed with kill;
 *   4. without timers or wake-ups a session never stalls (no open join whose producers are dead);
 *   5. the same seed gives a byte-identical report.
 * Beside these, the core checks its own invariants (check_invariants() in src/session/core.c:
 * member lists and counts, `running`, heap tags, dirty scopes, join pieces) after every call, as
 * the library is built without NDEBUG wherever tests are built; an invariant that breaks aborts
 * the run with the assertion.
 * usage: prop_sessions [RUNS] [FIRST_SEED]; prints the failing seed and its bundle on a failure. */
#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xgr/driver.h"

#ifdef NDEBUG
#error "prop_sessions relies on the session core's assert()ed invariants: build without NDEBUG"
#endif

typedef struct rng { uint64_t s; } rng;
static uint64_t next(rng *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return r->s;
}
static unsigned pick(rng *r, unsigned n) { return (unsigned)(next(r) % n); }

typedef struct buf { char *p; size_t n, cap; } buf;
static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if ((size_t)k < b->cap - b->n) {
      b->n += (size_t)k;
      return;
    }
    b->cap = b->cap * 2 + (size_t)k + 64;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
}

static const char *rule_text =
    "{\"payload\":{\"%s\":{\"type\":\"string\",\"default\":\"valid\"},\"n%s\":{\"type\":\"int64\",\"default\":0},"
    "\"v%s\":{\"type\":\"int64\",\"default\":1000000}},\"rules\":[\"[%s] != 'error' || 1 / 0 == 1\","
    "{\"type\":\"abortStep\",\"expression\":\"[%s] == 'abort'\"},\"[%s] == 'valid' && [n%s] < [v%s]\"],"
    "\"onValid\":{\"payload\":{\"n%s\":\"[n%s] + 1\"}},\"onInvalid\":{\"payload\":{\"n%s\":\"[n%s] + 1\"}}}";

/* A random bundle and start payload. */
static void gen(rng *r, buf *b, buf *payload) {
  unsigned n = 2 + pick(r, 19);
  put(b, "{\"orchestration\":{\"id\":\"prop\",\"structure\":{");
  for (unsigned s = 0; s < n; s++) {
    put(b, "%s\"S%u\":{\"rule\":\"S%u\"", s ? "," : "", s, s);
    for (int br = 0; br < 2; br++) {
      if (pick(r, 3) == 0) continue;
      put(b, ",\"%s\":{\"spawns\":[", br ? "onInvalid" : "onValid");
      unsigned ns = pick(r, 4), sp[4];
      for (unsigned i = 0; i < ns; i++) {
        sp[i] = pick(r, n);
        put(b, "%s\"S%u\"", i ? "," : "", sp[i]);
      }
      put(b, "]");
      if (pick(r, 3) == 0) {
        unsigned nf = 1 + pick(r, 3), from[3], nfrom = 0;
        for (unsigned i = 0; i < nf; i++) {
          unsigned cand = ns && pick(r, 4) ? sp[pick(r, ns)] : pick(r, n);
          int dup = 0;
          for (unsigned k = 0; k < nfrom; k++) dup |= from[k] == cand;
          if (!dup) from[nfrom++] = cand;
        }
        static const char *const when[] = {"valid", "invalid", "any"};
        put(b, ",\"join\":{\"joinid\":\"S%u\",\"waitonjoin\":\"%s\",", pick(r, n), pick(r, 2) ? "kill" : "drain");
        switch (pick(r, 3)) {
          case 0: put(b, "\"mode\":\"any\","); break;
          case 1: put(b, "\"mode\":\"all\","); break;
          default: put(b, "\"mode\":{\"k\":%u},", 1 + pick(r, nfrom)); break;
        }
        put(b, "\"from\":[");
        for (unsigned i = 0; i < nfrom; i++) put(b, "%s{\"node\":\"S%u\",\"when\":\"%s\"}", i ? "," : "", from[i], when[pick(r, 3)]);
        put(b, "]}");
      }
      put(b, "}");
    }
    put(b, "}");
  }
  put(b, "}},\"rules\":{");
  for (unsigned s = 0; s < n; s++) {
    char id[8];
    snprintf(id, sizeof id, "S%u", s);
    put(b, "%s\"%s\":", s ? "," : "", id);
    put(b, rule_text, id, id, id, id, id, id, id, id, id, id, id, id);
  }
  put(b, "}}");
  static const char *const flags[] = {"valid", "valid", "valid", "invalid", "error", "abort"};
  put(payload, "{");
  for (unsigned s = 0; s < n; s++)
    put(payload, "%s\"S%u\":\"%s\",\"vS%u\":%u", s ? "," : "", s, flags[pick(r, 6)], s, pick(r, 4));
  put(payload, "}");
}

/* Invariant state kept by the observer. */
typedef struct inv {
  const xgr_bundle *b;
  unsigned char closes[4096];   /* JOIN effects per target iter */
  uint32_t killed[1024];        /* scopes closed with kill */
  size_t nkilled;
  unsigned char was_running[4096];
  const char *violation;
  char detail[256];
} inv;

static void observe(void *ctx, const xgr_driver_event *ev) {
  inv *v = ctx;
  if (v->violation) return;
  if (ev->kind == XGR_DEV_JOIN) {
    const xgr_proc *t = ev->effect->proc;
    if (t->iter < 4096 && ++v->closes[t->iter] > 1) {
      v->violation = "a join closed twice";
      snprintf(v->detail, sizeof v->detail, "target iter %llu", (unsigned long long)t->iter);
    }
    const xgr_join *d = t->join->decl;
    for (unsigned i = 0; i < d->n; i++) {
      if (t->join->inbox[i].kind == XGR_VNULL) continue;
      xgr_value from;
      const char *want = v->b->orch->steps[d->from[i].node].id;
      if (!xgr_map_get_str(t->join->inbox[i], "_from", 5, &from) || strcmp(xgr_value_str(from, NULL), want)) {
        v->violation = "a piece in the wrong inbox entry";
        snprintf(v->detail, sizeof v->detail, "entry %s", want);
      }
    }
    if (d->policy == XGR_POLICY_KILL && v->nkilled < 1024) v->killed[v->nkilled++] = t->from_group;
  } else if (ev->kind == XGR_DEV_PROC && ev->effect->status == XGR_PROC_RUNNING) {
    const xgr_proc *p = ev->effect->proc;
    for (size_t i = 0; i < v->nkilled; i++)
      if (p->group == v->killed[i]) {
        v->violation = "a process ran after its scope's join closed with kill";
        snprintf(v->detail, sizeof v->detail, "iter %llu in scope %u", (unsigned long long)p->iter, p->group);
      }
  }
}

/* Totals over all runs, printed at the end so a reader can see the properties were exercised. */
static struct { long joins_satisfied, joins_unfulfillable, join_kills, completed, killed, limit, steps; } stats;

static void tally(const json_t *rep) {
  const char *res = json_string_value(json_object_get(rep, "result"));
  if (!strcmp(res, "completed")) stats.completed++;
  else if (!strcmp(res, "killed")) stats.killed++;
  else if (!strcmp(res, "limit")) stats.limit++;
  stats.steps += (long)json_array_size(json_object_get(rep, "history"));
  size_t i;
  json_t *p;
  json_array_foreach(json_object_get(rep, "processes"), i, p) {
    const json_t *j = json_object_get(p, "join");
    const char *o = json_is_object(j) ? json_string_value(json_object_get(j, "outcome")) : NULL;
    if (o && !strcmp(o, "satisfied")) stats.joins_satisfied++;
    if (o && !strcmp(o, "unfulfillable")) stats.joins_unfulfillable++;
    const json_t *why = json_object_get(p, "abortReason");
    if (why && !strcmp(json_string_value(why), "join kill")) stats.join_kills++;
  }
}

static int run_seed(uint64_t seed, int verbose) {
  rng r = {seed * 0x9E3779B97F4A7C15ULL + 1};
  buf b = {0}, pl = {0};
  gen(&r, &b, &pl);
  xgr_bundle *bd = NULL;
  xgr_error e;
  if (xgr_bundle_parse(b.p, b.n, &bd, &e, NULL)) {
    /* a document the generator got wrong is a test bug */
    printf("seed %llu: generated bundle does not load: %s: %s\n", (unsigned long long)seed, e.path, e.message);
    free(b.p);
    free(pl.p);
    return 1;
  }
  char *reports[2] = {NULL, NULL};
  int bad = 0;
  for (int round = 0; round < 2 && !bad; round++) {
    inv *v = calloc(1, sizeof *v);
    v->b = bd;
    xgr_driver_config cfg = {.record = true, .max_steps = 3000, .observe = observe, .observe_ctx = v};
    xgr_driver *d = xgr_driver_new(&cfg);
    xgr_value payload;
    xgr_value_from_json_text(pl.p, pl.n, 0, &payload, &e);
    xgr_driver_add_session(d, bd, "0x0000000000000000000000000000000000000001", 1, "S0", payload, &e);
    xgr_value_release(payload);
    xgr_driver_run(d);
    json_t *rep = xgr_driver_report(d, 0);
    const char *res = json_string_value(json_object_get(rep, "result"));
    if (v->violation) {
      printf("seed %llu: %s (%s)\n", (unsigned long long)seed, v->violation, v->detail);
      bad = 1;
    } else if (!strcmp(res, "stalled")) {
      printf("seed %llu: stalled without timers or wake-ups\n", (unsigned long long)seed);
      bad = 1;
    }
    if (round == 0) tally(rep);
    reports[round] = json_dumps(rep, JSON_COMPACT);
    json_decref(rep);
    xgr_driver_free(d);
    free(v);
  }
  if (!bad && strcmp(reports[0], reports[1])) {
    printf("seed %llu: two runs differ\n", (unsigned long long)seed);
    bad = 1;
  }
  if (bad || verbose) printf("bundle: %s\npayload: %s\n", b.p, pl.p);
  free(reports[0]);
  free(reports[1]);
  xgr_bundle_free(bd);
  free(b.p);
  free(pl.p);
  return bad;
}

int main(int argc, char **argv) {
  long runs = argc > 1 ? atol(argv[1]) : 300;
  uint64_t first = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  int failed = 0;
  for (long i = 0; i < runs; i++) failed += run_seed(first + (uint64_t)i, 0);
  printf("exercised: %ld steps, %ld joins satisfied, %ld unfulfillable, %ld producers killed by a join; "
         "sessions %ld completed, %ld killed, %ld at the step limit\n", stats.steps, stats.joins_satisfied,
         stats.joins_unfulfillable, stats.join_kills, stats.completed, stats.killed, stats.limit);
  printf("%ld random sessions: %ld passed, %d failed\n", runs, runs - failed, failed);
  curl_global_cleanup();
  return failed ? 1 : 0;
}
