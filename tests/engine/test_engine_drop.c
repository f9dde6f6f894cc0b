/* test_engine_drop.c — a session whose lease went to another cluster node leaves the engine
 * (issue 18, docs/CLUSTER.md), with a store hook that commits at once unless told to refuse a
 * session's batches with XGR_ELEASE (the fence's answer):
 *   1. xgr_engine_drop: the session leaves the registry; calls find no session; the same
 *      (owner, rootPid) can be started again at once (a claim loading it anew);
 *   2. a batch refused with XGR_ELEASE: the control call that caused it is answered lease_lost,
 *      the session leaves the registry and submits nothing more;
 *   3. a drop of a session that is not here: XGR_ENOTFOUND;
 *   4. a restored core handed to a start that fails before an actor exists — no such bundle, or an
 *      engine shutting down (xgrd's hibernation loader racing SIGTERM) — is freed by the engine, as
 *      xgr_engine_start.restore promises (it leaked; ASan's leak check in `make asan` sees it).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_check.h"
#include "xgr/engine.h"

static atomic_uint_fast64_t refuse_root;        /* batches of this session fail with XGR_ELEASE */
static atomic_int batches[8];                   /* batches submitted per rootPid */

static int submit(void *ctx, const xgr_store_batch *b, xgr_store_done_fn done, void *token) {
  (void)ctx;
  if (b->root_pid < 8) atomic_fetch_add(&batches[b->root_pid], 1);
  done(token, b->root_pid == atomic_load(&refuse_root) ? XGR_ELEASE : 0);
  return 0;
}

static bool here(xgr_engine *e, uint64_t root) {
  xgr_engine_session_info in;
  return !xgr_engine_session(e, OWNER, root, &in) && !in.finished;
}

static bool gone_soon(xgr_engine *e, uint64_t root) {
  for (int i = 0; i < 300 && here(e, root); i++) ec_msleep(10);
  return !here(e, root);
}

/* S runs and spawns W, which waits (10^8 s) */
static const char *bundle_text =
    "{\"orchestration\":{\"id\":\"db\",\"structure\":{"
    "\"S\":{\"rule\":\"s\",\"onValid\":{\"spawns\":[\"W\"]}},\"W\":{\"rule\":\"w\"}}},"
    "\"rules\":{\"s\":{\"payload\":{},\"onValid\":{\"waitSec\":100000000}},"
    "\"w\":{\"payload\":{},\"onValid\":{}}}}";

int main(void) {
  xgr_bundle *b = ec_bundle(bundle_text);
  xgr_error e;
  xgr_store_hook hook = {.submit = submit};
  xgr_engine_config cfg = {.workers = 2, .store = &hook};
  xgr_engine *eng = ec_engine(&cfg);
  xgr_value none = xgr_value_null();
  ec_start_s(eng, b, 2, 0);

  /* 1. dropped: gone, calls find nothing, started again at once */
  EXPECT(xgr_engine_drop(eng, OWNER, 1) == 0, "drop 1");
  EXPECT(gone_soon(eng, 1), "session 1 left the registry");
  int before = atomic_load(&batches[1]);
  EXPECT(xgr_engine_kill(eng, OWNER, 1, 0, &e) == XGR_ENOTFOUND, "a kill finds no session 1");
  ec_msleep(50);
  EXPECT(atomic_load(&batches[1]) == before, "the dropped session wrote nothing more");
  xgr_engine_start again = {.bundle = b, .owner = OWNER, .root_pid = 1, .start = "S", .payload = none};
  EXPECT_OK(xgr_engine_start_session(eng, &again, &e), e); /* session 1 starts again here */
  EXPECT(ec_steps_after(eng, 1, 1, 0) == 1, "the new incarnation runs");

  /* 2. the store refuses session 2's batch with XGR_ELEASE */
  atomic_store(&refuse_root, 2);
  int rc = xgr_engine_kill(eng, OWNER, 2, 0, &e);
  EXPECT_EQ_INT(rc, XGR_ELEASE); /* the kill whose batch was refused answers lease_lost */
  EXPECT(gone_soon(eng, 2), "session 2 left the registry");
  before = atomic_load(&batches[2]);
  EXPECT(xgr_engine_wake_step(eng, OWNER, 2, "W", NULL, none, NULL, &e) == XGR_ENOTFOUND, "a wake finds no session 2");
  ec_msleep(50);
  EXPECT(atomic_load(&batches[2]) == before, "no batch after the refusal");
  EXPECT(here(eng, 1), "session 1 is not affected");

  /* 3. not here */
  EXPECT(xgr_engine_drop(eng, OWNER, 77) == XGR_ENOTFOUND, "drop of a session not here");

  /* 4. restored cores that cannot be started are freed by the engine */
  xgr_engine_start nob = {.bundle_name = "no such bundle", .owner = OWNER, .root_pid = 5,
                          .restore = xgr_session_new(b->orch, OWNER, 5, NULL)};
  EXPECT(xgr_engine_start_session(eng, &nob, &e) == XGR_ENOTFOUND, "no such bundle: %s", e.message);
  xgr_engine_shutdown(eng, 5000);
  xgr_engine_start late = {.bundle = b, .owner = OWNER, .root_pid = 6, .restore = xgr_session_new(b->orch, OWNER, 6, NULL)};
  EXPECT(xgr_engine_start_session(eng, &late, &e) == XGR_EIO, "a shutting-down engine refuses (unavailable: try again elsewhere): %s", e.message);

  xgr_engine_free(eng);
  xgr_bundle_free(b);
  return expect_done();
}
