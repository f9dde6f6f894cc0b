/* test_engine_outbox.c — the engine's side of the outbox of internal wake-ups (issue 14), with a
 * store hook that commits at once and keeps what the batches said:
 *   1. a wake-up from the outbox delivered twice with the same id (xgrd's recovery pass and the
 *      producer's own send can meet) is applied once: the woken step runs once, and one batch
 *      marks the id applied;
 *   2. a redelivered wake-up the target refuses (no such step) is marked refused with the reason,
 *      in the target's batch;
 *   3. one whose target session does not run is refused by xgr_engine_redeliver (XGR_ENOTFOUND);
 *   4. a rule's wakeUps entry is written to the outbox in the batch of the result that produced
 *      it, and its target marks that id applied;
 *   5. xgr_engine_redeliver_checked delivers only a row its callback still finds pending, and a
 *      target that does not run here is not counted as a refusal.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_check.h"
#include "xgr/engine.h"

/* What the batches said about the outbox (guarded by mu). */
typedef struct seen {
  pthread_mutex_t mu;
  char done[32][40];
  char reason[32][160];   /* "" when applied */
  size_t ndone;
  char out[32][40];       /* ids written */
  uint64_t out_from[32];
  size_t nout;
} seen;

static int submit(void *ctx, const xgr_store_batch *b, xgr_store_done_fn done, void *token) {
  seen *s = ctx;
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < b->ndone && s->ndone < 32; i++, s->ndone++) {
    snprintf(s->done[s->ndone], sizeof s->done[0], "%s", b->done[i]);
    snprintf(s->reason[s->ndone], sizeof s->reason[0], "%s", b->done_reason[i] ? b->done_reason[i] : "");
  }
  for (size_t i = 0; i < b->nwakes && s->nout < 32; i++, s->nout++) {
    snprintf(s->out[s->nout], sizeof s->out[0], "%s", b->wakes[i].id);
    s->out_from[s->nout] = b->root_pid;
  }
  pthread_mutex_unlock(&s->mu);
  done(token, 0);
  return 0;
}

static size_t count_done(seen *s, const char *id, bool refused) {
  size_t n = 0;
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->ndone; i++) n += !strcmp(s->done[i], id) && (s->reason[i][0] != 0) == refused;
  pthread_mutex_unlock(&s->mu);
  return n;
}

static const char *bundle_text =
    "{\"orchestration\":{\"id\":\"ob\",\"structure\":{"
    "\"S\":{\"rule\":\"s\",\"onValid\":{\"spawns\":[\"W\",\"Z\"]}},"
    "\"W\":{\"rule\":\"w\"},\"Z\":{\"rule\":\"w\"},"
    "\"P\":{\"rule\":\"p\"}}},"
    "\"rules\":{"
    "\"s\":{\"payload\":{},\"onValid\":{\"waitSec\":100000000}},"
    "\"w\":{\"payload\":{\"X\":{\"type\":\"int64\",\"default\":0}},\"onValid\":{\"payload\":{\"Ran\":\"[X]\"}}},"
    "\"p\":{\"payload\":{\"T\":{\"type\":\"uint64\"}},\"onValid\":{\"wakeUps\":[{\"runner\":\"[from]\","
    "\"sessionId\":\"[T]\",\"stepId\":\"W\",\"payload\":{\"X\":7}}]}}}}";

/* pending() callbacks for xgr_engine_redeliver_checked: the row is gone / still there */
static bool gone(void *ctx, const char *id) {
  (void)id;
  ++*(int *)ctx;
  return false;
}

static bool pending(void *ctx, const char *id) {
  (void)id;
  ++*(int *)ctx;
  return true;
}

int main(void) {
  xgr_bundle *b = ec_bundle(bundle_text);
  xgr_error e;
  seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
  xgr_store_hook hook = {.submit = submit, .ctx = &s};
  xgr_engine_config cfg = {.workers = 2, .keep_finished = true, .store = &hook};
  xgr_engine *eng = ec_engine(&cfg);
  xgr_value none = xgr_value_null();
  ec_start_s(eng, b, 3, 100);

  /* 1. the same id twice: applied once */
  const char *id1 = "0123456789abcdef0123456789abcdef";
  EXPECT(xgr_engine_redeliver(eng, id1, OWNER, 9, OWNER, 1, "W", NULL, none) == 0, "redeliver 1");
  EXPECT(xgr_engine_redeliver(eng, id1, OWNER, 9, OWNER, 1, "W", NULL, none) == 0, "redeliver 1 again");
  EXPECT(ec_steps_after(eng, 1, 2, 100) == 2, "session 1: S and W once");
  ec_msleep(50);
  EXPECT_EQ_INT(count_done(&s, id1, false), 1);  /* id1 marked applied once */
  EXPECT_EQ_INT(count_done(&s, id1, true), 0);   /* its duplicate was not handled again */

  /* 2. refused by the target: marked refused with the reason */
  const char *id2 = "1123456789abcdef0123456789abcdef";
  EXPECT(xgr_engine_redeliver(eng, id2, OWNER, 9, OWNER, 2, "Nope", NULL, none) == 0, "redeliver 2");
  for (int i = 0; i < 200 && !count_done(&s, id2, true); i++) ec_msleep(10);
  EXPECT(count_done(&s, id2, true) == 1, "id2 marked refused");
  pthread_mutex_lock(&s.mu);
  for (size_t i = 0; i < s.ndone; i++)
    if (!strcmp(s.done[i], id2)) EXPECT(strstr(s.reason[i], "Nope") != NULL, "reason names the step: %s", s.reason[i]);
  pthread_mutex_unlock(&s.mu);

  /* 3. no such session */
  EXPECT(xgr_engine_redeliver(eng, "2123456789abcdef0123456789abcdef", OWNER, 9, OWNER, 77, "W", NULL, none) ==
             XGR_ENOTFOUND,
         "redeliver to a missing session");

  /* 4. a rule's wake-up: written with its producer's result, applied by its target */
  xgr_value pl = xgr_map_new(1);
  xgr_map_set(pl, xgr_value_cstring("T"), xgr_value_uint(3));
  xgr_engine_start sp = {.bundle = b, .owner = OWNER, .root_pid = 4, .start = "P", .payload = pl};
  EXPECT_OK(xgr_engine_start_session(eng, &sp, &e), e);
  xgr_value_release(pl);
  EXPECT(ec_steps_after(eng, 4, 1, 100) == 1, "producer done");
  EXPECT(ec_steps_after(eng, 3, 2, 100) == 2, "target woken by the rule");
  ec_msleep(50);
  char id4[40] = "";
  pthread_mutex_lock(&s.mu);
  for (size_t i = 0; i < s.nout; i++)
    if (s.out_from[i] == 4) snprintf(id4, sizeof id4, "%s", s.out[i]);
  pthread_mutex_unlock(&s.mu);
  EXPECT(strlen(id4) == 32, "the producer's batch wrote the outbox row (%s)", id4);
  EXPECT(id4[0] && count_done(&s, id4, false) == 1, "the target marked it applied");

  /* 5. xgr_engine_redeliver_checked (a cluster node's outbox poll): a row no longer pending is not
   * delivered; a pending one is, once; a target that does not run here is not a refusal */
  const char *id5 = "3123456789abcdef0123456789abcdef";
  int asked = 0;
  EXPECT(xgr_engine_redeliver_checked(eng, id5, OWNER, 9, OWNER, 2, "W", NULL, none, gone, &asked) == 0,
         "checked: gone");
  EXPECT_EQ_INT(asked, 1);  /* checked: pending asked once */
  EXPECT(ec_steps_after(eng, 2, 1, 100) == 1, "session 2: W did not run for a row that is gone");
  EXPECT(count_done(&s, id5, false) == 0, "id5 not applied");
  EXPECT(xgr_engine_redeliver_checked(eng, id5, OWNER, 9, OWNER, 2, "W", NULL, none, pending, &asked) == 0,
         "checked: pending");
  EXPECT(ec_steps_after(eng, 2, 2, 100) == 2, "session 2: W ran once");
  ec_msleep(50);
  EXPECT(count_done(&s, id5, false) == 1, "id5 marked applied once");
  xgr_engine_stats st0, st1;
  xgr_engine_get_stats(eng, &st0);
  asked = 0;
  EXPECT(xgr_engine_redeliver_checked(eng, id5, OWNER, 9, OWNER, 77, "W", NULL, none, pending, &asked) == XGR_ENOTFOUND,
         "checked: no such session here");
  xgr_engine_get_stats(eng, &st1);
  EXPECT(asked == 0 && st1.wakeups_refused == st0.wakeups_refused, "checked: a target elsewhere is not refused");

  xgr_engine_free(eng);
  xgr_bundle_free(b);
  return expect_done();
}
