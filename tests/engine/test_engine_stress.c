/* test_engine_stress.c — thousands of concurrent sessions on the engine, controlled from several
 * threads at once, checked for lost or duplicated processes and for sessions that never end.
 *
 * Three orchestrations, mixed: a 16-way fan-out with an `all` join (policy kill); a loop of 20
 * steps with waitSec 1; a step A that spawns W waiting 3600 s (a wake-up or the timer moves it).
 * The clock is scaled (x2000: 3600 s pass in 1.8 s). Two threads start the sessions; a third
 * kills roots and single processes, wakes W by step, pauses and resumes sessions — all through
 * the synchronous control API while the sessions run. A subscriber keeps, per session, which
 * processes were created and which became terminal (touched only by that session's actor, so
 * ThreadSanitizer checks the runtime's hand-over between workers).
 *
 * The controllers leave every fourth session alone (root pid a multiple of 4), so those must run
 * their orchestration exactly as written.
 *
 * Expectations (lib/expect.h), for every session: it finishes, and FINISHED arrives once and last
 * (no process event after it); each process ends once and never changes after it ended; each
 * process was created by a process seen before it (its parent iteration, 0 for the start); no
 * process is left unended. For each session nobody controlled: its result is completed and it
 * created and ran exactly its orchestration's processes and steps (fan-out 18: A, 16 B, J; loop 21:
 * L with N = 0..20, the last one invalid; wait 2: A, W). Over all: the engine counted n started and
 * n finished, and the controllers' calls ran while the sessions did (kills were applied).
 * usage: test_engine_stress [SESSIONS] (default 3000; XGR_STRESS_SESSIONS overrides)
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/expect.h"
#include "xgr/engine.h"

#define OWNER "0x0000000000000000000000000000000000000001"
#define MAXITER 64

/* What one session's events showed; written only by its actor (on_event). */
typedef struct track {
  uint8_t created[MAXITER], ended[MAXITER];
  int finished;          /* FINISHED events */
  int dup;               /* a process ended twice */
  int changed_after_end; /* a process changed after it ended */
  int orphan;            /* a process whose parent iteration was never seen */
  int after_finish;      /* process events after FINISHED */
  int toobig;            /* an iteration >= MAXITER */
  xgr_session_result result;
  uint64_t steps;        /* steps run, as FINISHED reported */
} track;

static track *tracks;
static long nsessions;
static _Atomic long ctl_ok, ctl_err, kills_ok;

/* Sessions whose root pid is a multiple of 4 are not controlled by anyone. */
static bool controlled(uint64_t root) { return root % 4 != 0; }

static void on_event(void *ctx, const xgr_engine_event *ev) {
  track *t = &tracks[ev->root_pid - 1];
  if (ev->kind == XGR_EEV_FINISHED) {
    t->finished++;
    t->result = ev->result;
    t->steps = ev->steps;
    return;
  }
  if (ev->kind != XGR_EEV_PROC) return;
  if (t->finished) t->after_finish++;
  uint64_t it = ev->proc->iter, parent = ev->proc->parent_iter;
  if (it >= MAXITER || parent >= MAXITER) {
    t->toobig++;
    return;
  }
  if (!t->created[it] && (parent ? !t->created[parent] : it != 1)) t->orphan++;
  if (t->ended[it]) t->changed_after_end++;
  t->created[it] = 1;
  if (ev->proc->status == XGR_PROC_DONE || ev->proc->status == XGR_PROC_ABORTED) {
    if (t->ended[it]) t->dup++;
    t->ended[it] = 1;
  }
}

static const char *rule_ok = "{\"payload\":{\"N\":{\"type\":\"int64\",\"default\":0}},\"rules\":[\"[N] >= 0\"],"
                             "\"onValid\":{\"payload\":{\"N\":\"[N] + 1\"}}}";

static xgr_bundle *load(const char *txt) {
  xgr_bundle *b = NULL;
  xgr_error e;
  REQUIRE(xgr_bundle_parse(txt, strlen(txt), &b, &e, NULL) == 0, "bundle: %s: %s", e.path, e.message);
  return b;
}

static xgr_bundle *fanout_bundle(int n) {
  char *txt = malloc(64 * 1024), *p = txt;
  p += sprintf(p, "{\"orchestration\":{\"id\":\"fan\",\"structure\":{\"A\":{\"rule\":\"r\",\"onValid\":{\"spawns\":[");
  for (int i = 0; i < n; i++) p += sprintf(p, "%s\"B%d\"", i ? "," : "", i);
  p += sprintf(p, "],\"join\":{\"joinid\":\"J\",\"mode\":\"all\",\"waitonjoin\":\"kill\",\"from\":[");
  for (int i = 0; i < n; i++) p += sprintf(p, "%s{\"node\":\"B%d\",\"when\":\"valid\"}", i ? "," : "", i);
  p += sprintf(p, "]}}},\"J\":{\"rule\":\"r\"}");
  for (int i = 0; i < n; i++) p += sprintf(p, ",\"B%d\":{\"rule\":\"r\"}", i);
  sprintf(p, "}},\"rules\":{\"r\":%s}}", rule_ok);
  xgr_bundle *b = load(txt);
  free(txt);
  return b;
}

typedef struct starter {
  xgr_engine *e;
  xgr_bundle *const *b;
  long from, to;
} starter;

static void *start_main(void *arg) {
  starter *s = arg;
  xgr_value pl = xgr_value_null();
  for (long i = s->from; i < s->to; i++) {
    int kind = (int)(i % 3);
    static const char *const starts[] = {"A", "L", "A"};
    xgr_engine_start req = {.bundle = s->b[kind], .owner = OWNER, .root_pid = (uint64_t)i + 1, .start = starts[kind],
                            .payload = pl};
    xgr_error err;
    REQUIRE(xgr_engine_start_session(s->e, &req, &err) == 0, "start %ld: %s", i + 1, err.message);
  }
  return NULL;
}

typedef struct controller {
  xgr_engine *e;
  _Atomic bool *stop;
  uint64_t seed;
} controller;

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void *control_main(void *arg) {
  controller *c = arg;
  xgr_value pl = xgr_value_null();
  while (!atomic_load(c->stop)) {
    uint64_t root = rnd(&c->seed) % (uint64_t)nsessions + 1;
    if (!controlled(root)) root--; /* a multiple of 4, so root - 1 >= 3 */
    xgr_error err;
    int rc;
    switch (rnd(&c->seed) % 5) {
      case 0:
        rc = xgr_engine_kill(c->e, OWNER, root, 0, &err);
        if (!rc) atomic_fetch_add(&kills_ok, 1);
        break;
      case 1:
        rc = xgr_engine_kill(c->e, OWNER, root, rnd(&c->seed) % 12 + 1, &err);
        if (!rc) atomic_fetch_add(&kills_ok, 1);
        break;
      case 2: rc = xgr_engine_wake_step(c->e, OWNER, root, "W", NULL, pl, NULL, &err); break;
      case 3:
        rc = xgr_engine_pause(c->e, OWNER, root, 0, true, &err);
        rc |= xgr_engine_pause(c->e, OWNER, root, 0, false, &err);
        break;
      default: {
        xgr_engine_session_info in;
        rc = xgr_engine_session(c->e, OWNER, root, &in);
        break;
      }
    }
    atomic_fetch_add(rc ? &ctl_err : &ctl_ok, 1);
  }
  return NULL;
}

int main(int argc, char **argv) {
  nsessions = argc > 1 ? atol(argv[1]) : 3000;
  if (getenv("XGR_STRESS_SESSIONS")) nsessions = atol(getenv("XGR_STRESS_SESSIONS"));
  if (nsessions < 3) nsessions = 3;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  tracks = calloc((size_t)nsessions, sizeof *tracks);
  char loop[2048], wait[2048];
  snprintf(loop, sizeof loop,
           "{\"orchestration\":{\"id\":\"loop\",\"structure\":{\"L\":{\"rule\":\"l\",\"onValid\":{\"spawns\":[\"L\"]}}}},"
           "\"rules\":{\"l\":{\"payload\":{\"N\":{\"type\":\"int64\",\"default\":0}},\"rules\":[\"[N] < 20\"],"
           "\"onValid\":{\"payload\":{\"N\":\"[N] + 1\"},\"waitSec\":1}}}}");
  snprintf(wait, sizeof wait,
           "{\"orchestration\":{\"id\":\"wait\",\"structure\":{\"A\":{\"rule\":\"a\",\"onValid\":{\"spawns\":[\"W\"]}},"
           "\"W\":{\"rule\":\"r\"}}},\"rules\":{\"a\":{\"payload\":{},\"rules\":[\"true\"],\"onValid\":{\"waitSec\":3600}},\"r\":%s}}",
           rule_ok);
  xgr_bundle *b[3] = {fanout_bundle(16), load(loop), load(wait)};
  xgr_engine_config cfg = {.workers = 2, .clock = {.kind = XGR_CLOCK_SCALED, .scale = 2000}};
  xgr_error err;
  xgr_engine *e = xgr_engine_new(&cfg, &err);
  REQUIRE(e != NULL, "engine: %s", err.message);
  xgr_engine_subscribe(e, on_event, NULL);
  _Atomic bool stop = false;
  controller cs[2] = {{e, &stop, 0x9e3779b97f4a7c15ull}, {e, &stop, 0xdeadbeefcafef00dull}};
  pthread_t ct[2], st[2];
  for (int i = 0; i < 2; i++) pthread_create(&ct[i], NULL, control_main, &cs[i]);
  starter ss[2] = {{e, b, 0, nsessions / 2}, {e, b, nsessions / 2, nsessions}};
  for (int i = 0; i < 2; i++) pthread_create(&st[i], NULL, start_main, &ss[i]);
  for (int i = 0; i < 2; i++) pthread_join(st[i], NULL);
  int w = xgr_engine_wait_all(e, 120000);
  atomic_store(&stop, true);
  for (int i = 0; i < 2; i++) pthread_join(ct[i], NULL);
  if (!w) w = xgr_engine_wait_all(e, 60000);
  EXPECT_EQ_INT(w, 0); /* every session settled */
  xgr_engine_stats stats;
  xgr_engine_get_stats(e, &stats);
  /* the processes of each orchestration run as written, one step each: fan-out, loop, wait (kind = i % 3) */
  static const int want_procs[3] = {18, 21, 2};
  long created = 0, ended = 0, alone = 0, bad = 0;
  for (long i = 0; i < nsessions; i++) {
    track *t = &tracks[i];
    int c = 0, en = 0;
    for (int k = 1; k < MAXITER; k++) {
      c += t->created[k];
      en += t->ended[k];
    }
    created += c;
    ended += en;
    bool ok = t->finished == 1 && !t->dup && !t->changed_after_end && !t->orphan && !t->after_finish && !t->toobig &&
              c == en;
    if (!controlled((uint64_t)i + 1)) {
      alone++;
      ok = ok && t->result == XGR_RESULT_COMPLETED && c == want_procs[i % 3] && t->steps == (uint64_t)want_procs[i % 3];
    }
    if (!ok && bad++ < 10) /* the first ten in full */
      printf("session %ld (%s): finished %d, result %d, steps %llu, created %d, ended %d, ended twice %d, "
             "changed after it ended %d, without a parent %d, events after FINISHED %d, too big %d\n",
             i + 1, controlled((uint64_t)i + 1) ? "controlled" : "left alone", t->finished, (int)t->result,
             (unsigned long long)t->steps, c, en, t->dup, t->changed_after_end, t->orphan, t->after_finish, t->toobig);
  }
  EXPECT_EQ_INT(bad, 0); /* sessions that broke an expectation above */
  EXPECT_EQ_UINT(stats.sessions_started, (uint64_t)nsessions);
  EXPECT_EQ_UINT(stats.sessions_finished, (uint64_t)nsessions);
  EXPECT(atomic_load(&kills_ok) > 0, "no kill was applied: the control calls did not overlap the sessions");
  printf("engine stress: %ld sessions (%ld left alone), %ld processes created, %ld ended, %llu steps, %llu timers, "
         "%ld control calls applied (%ld kills), %ld refused\n",
         nsessions, alone, created, ended, (unsigned long long)stats.steps, (unsigned long long)stats.timers_fired,
         (long)atomic_load(&ctl_ok), (long)atomic_load(&kills_ok), (long)atomic_load(&ctl_err));
  xgr_engine_free(e);
  for (int i = 0; i < 3; i++) xgr_bundle_free(b[i]);
  free(tracks);
  curl_global_cleanup();
  return expect_done();
}
