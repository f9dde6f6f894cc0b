/* engine_check.h — what the engine's stand-alone tests (test_engine_drop.c, test_engine_outbox.c,
 * test_engine_zero_wait.c) share besides the expectations of tests/lib/expect.h: a sleep, a bundle
 * parsed or the test ended, an engine, sessions started and waited for. */
#ifndef XGR_TESTS_ENGINE_CHECK_H
#define XGR_TESTS_ENGINE_CHECK_H

#include <stdint.h>
#include <stdio.h>

#include "lib/expect.h"
#include "xgr/engine.h"

#define OWNER "0x0000000000000000000000000000000000000001"

void ec_msleep(long ms);
/* Parse a bundle document (borrowed); prints the error and exits 1 when it does not parse. The
 * caller frees the bundle. */
xgr_bundle *ec_bundle(const char *text);
/* An engine for cfg (borrowed); prints the error and exits 1 when there is none. */
xgr_engine *ec_engine(const xgr_engine_config *cfg);
/* The steps session (OWNER, root) has run once it has run at least n and runs nothing (polled for
 * at most 5 s), read again settle_ms later so that a step run twice would show; 0 when the session
 * is not there. */
uint64_t ec_steps_after(xgr_engine *e, uint64_t root, uint64_t n, long settle_ms);
/* Start sessions 1..n of bundle b at step "S" with a null payload and EXPECT that S ran in each. */
void ec_start_s(xgr_engine *e, const xgr_bundle *b, uint64_t n, long settle_ms);

#endif
