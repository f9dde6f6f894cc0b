/* engine_check.c — the helpers of engine_check.h. */
#include "engine_check.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void ec_msleep(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

xgr_bundle *ec_bundle(const char *text) {
  xgr_bundle *b = NULL;
  xgr_error e;
  if (xgr_bundle_parse(text, strlen(text), &b, &e, NULL)) {
    printf("bundle: %s: %s\n", e.path, e.message);
    exit(1);
  }
  return b;
}

xgr_engine *ec_engine(const xgr_engine_config *cfg) {
  xgr_error e;
  xgr_engine *eng = xgr_engine_new(cfg, &e);
  if (!eng) {
    printf("engine: %s\n", e.message);
    exit(1);
  }
  return eng;
}

uint64_t ec_steps_after(xgr_engine *e, uint64_t root, uint64_t n, long settle_ms) {
  xgr_engine_session_info in = {0};
  for (int i = 0; i < 500; i++) {
    if (!xgr_engine_session(e, OWNER, root, &in) && in.steps >= n && !in.running) break;
    ec_msleep(10);
  }
  if (settle_ms) ec_msleep(settle_ms);
  return xgr_engine_session(e, OWNER, root, &in) ? 0 : in.steps;
}

void ec_start_s(xgr_engine *e, const xgr_bundle *b, uint64_t n, long settle_ms) {
  xgr_error err;
  for (uint64_t r = 1; r <= n; r++) {
    xgr_engine_start st = {.bundle = b, .owner = OWNER, .root_pid = r, .start = "S", .payload = xgr_value_null()};
    EXPECT_OK(xgr_engine_start_session(e, &st, &err), err);
    EXPECT(ec_steps_after(e, r, 1, settle_ms) == 1, "session %llu: S ran", (unsigned long long)r);
  }
}
