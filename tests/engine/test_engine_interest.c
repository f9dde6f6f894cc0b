/* test_engine_interest.c — subscribers with an interest (xgr_engine_subscribe_interest): a 4-way
 * fan-out into an `all` join runs three times on one engine with three subscribers —
 *   all:     xgr_engine_subscribe, gets every event, JOIN events with the join tree;
 *   some:    wants FINISHED and JOIN (no join tree) only;
 *   toggled: wants nothing, then, for the third session, everything without join trees.
 * Checks: `all` gets each session's 6 PROC-making steps, a JOIN with proc->join and one FINISHED;
 * `some` gets only JOIN and FINISHED; `toggled` gets nothing of the first two sessions and the
 * same kinds as `all` of the third. A second engine with only `some` makes JOIN events without
 * the tree (proc->join NULL): nobody asked for it.
 */
#include <curl/curl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_check.h"
#include "xgr/engine.h"

typedef struct sub {
  const char *name;
  _Atomic unsigned want;              /* its interest (read by the actors) */
  _Atomic int kinds[3][8];            /* events per session (1..3) and kind */
  _Atomic int join_trees[3];          /* JOIN events with proc->join */
} sub;

static unsigned interest(void *ctx) { return atomic_load(&((sub *)ctx)->want); }

static void on_event(void *ctx, const xgr_engine_event *ev) {
  sub *s = ctx;
  if (ev->root_pid < 1 || ev->root_pid > 3 || ev->kind >= 8) return;
  atomic_fetch_add(&s->kinds[ev->root_pid - 1][ev->kind], 1);
  if (ev->kind == XGR_EEV_JOIN && ev->proc && ev->proc->join) atomic_fetch_add(&s->join_trees[ev->root_pid - 1], 1);
}

static const char *fan =
    "{\"orchestration\":{\"id\":\"fan\",\"structure\":{"
    "\"A\":{\"rule\":\"r\",\"onValid\":{\"spawns\":[\"B0\",\"B1\",\"B2\",\"B3\"],\"join\":{\"joinid\":\"J\","
    "\"mode\":\"all\",\"waitonjoin\":\"drain\",\"from\":[{\"node\":\"B0\"},{\"node\":\"B1\"},{\"node\":\"B2\"},"
    "{\"node\":\"B3\"}]}}},\"J\":{\"rule\":\"r\"},\"B0\":{\"rule\":\"r\"},\"B1\":{\"rule\":\"r\"},"
    "\"B2\":{\"rule\":\"r\"},\"B3\":{\"rule\":\"r\"}}},"
    "\"rules\":{\"r\":{\"payload\":{},\"onValid\":{\"payload\":{\"n\":1}}}}}";

static void run(xgr_engine *e, const xgr_bundle *b, uint64_t root) {
  xgr_error err;
  xgr_engine_start st = {.bundle = b, .owner = OWNER, .root_pid = root, .start = "A", .payload = xgr_value_null()};
  EXPECT(xgr_engine_start_session(e, &st, &err) == 0, "start %llu: %s", (unsigned long long)root, err.message);
  EXPECT(xgr_engine_wait(e, OWNER, root, 10000) == 0, "session %llu did not finish", (unsigned long long)root);
}

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  xgr_bundle *b = ec_bundle(fan);
  static sub all = {.name = "all"}, some = {.name = "some"}, toggled = {.name = "toggled"}, only = {.name = "only"};
  atomic_store(&some.want, XGR_EEV_WANT(XGR_EEV_FINISHED) | XGR_EEV_WANT(XGR_EEV_JOIN));
  atomic_store(&toggled.want, 0);
  atomic_store(&only.want, XGR_EEV_WANT(XGR_EEV_FINISHED) | XGR_EEV_WANT(XGR_EEV_JOIN));
  xgr_engine_config cfg = {.workers = 2, .keep_finished = true};
  xgr_engine *e = ec_engine(&cfg);
  EXPECT(xgr_engine_subscribe(e, on_event, &all) == 0, "subscribe all");
  EXPECT(xgr_engine_subscribe_interest(e, on_event, &some, interest) == 0, "subscribe some");
  EXPECT(xgr_engine_subscribe_interest(e, on_event, &toggled, interest) == 0, "subscribe toggled");
  run(e, b, 1);
  run(e, b, 2);
  atomic_store(&toggled.want, XGR_EEV_WANT_ALL);
  run(e, b, 3);
  xgr_engine_free(e);

  for (int s = 0; s < 3; s++) {
    EXPECT(all.kinds[s][XGR_EEV_PROC] > 0 && all.kinds[s][XGR_EEV_STEP] == 6, "all, session %d: %d PROC, %d STEP events",
          s + 1, all.kinds[s][XGR_EEV_PROC], all.kinds[s][XGR_EEV_STEP]);
    EXPECT(all.kinds[s][XGR_EEV_JOIN] == 1 && all.join_trees[s] == 1, "all, session %d: %d JOIN, %d with the tree",
          s + 1, all.kinds[s][XGR_EEV_JOIN], all.join_trees[s]);
    EXPECT(all.kinds[s][XGR_EEV_FINISHED] == 1, "all, session %d: FINISHED once", s + 1);
    for (int k = 0; k < 8; k++) {
      int want = k == XGR_EEV_JOIN || k == XGR_EEV_FINISHED ? all.kinds[s][k] : 0;
      EXPECT(some.kinds[s][k] == want, "some, session %d, kind %d: %d events, expected %d", s + 1, k, some.kinds[s][k], want);
      want = s == 2 ? all.kinds[s][k] : 0;
      EXPECT(toggled.kinds[s][k] == want, "toggled, session %d, kind %d: %d events, expected %d", s + 1, k,
            toggled.kinds[s][k], want);
    }
  }

  /* nobody wants the join tree: JOIN events come without it */
  e = ec_engine(&cfg);
  EXPECT(xgr_engine_subscribe_interest(e, on_event, &only, interest) == 0, "subscribe only");
  run(e, b, 1);
  xgr_engine_free(e);
  EXPECT(only.kinds[0][XGR_EEV_JOIN] == 1 && only.join_trees[0] == 0, "only: %d JOIN, %d with the tree (expected 1, 0)",
        only.kinds[0][XGR_EEV_JOIN], only.join_trees[0]);
  EXPECT(only.kinds[0][XGR_EEV_FINISHED] == 1 && only.kinds[0][XGR_EEV_PROC] == 0, "only: FINISHED once, no PROC");

  xgr_bundle_free(b);
  curl_global_cleanup();
  return expect_done();
}
