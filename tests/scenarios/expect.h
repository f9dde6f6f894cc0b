/* expect.h — the expectations of a scenario file checked against a report (the shape of
 * `xgr run --json`), shared by the scenario runners of the deterministic driver
 * (tests/scenarios/run_scenarios.c) and of the engine (tests/engine/run_scenarios_engine.c):
 *   result; processes[] {pid, step?, status?, valid?, paused?, abortReason?, join? (outcome),
 *   joinFail? (subset of join.fail), joinClosedAt? (ms), error? (true: has one), payload? (subset), payloadLacks?};
 *   count (processes created); history (rows); historyAt {pid: time of its first row};
 *   historyError {pid: substring of its row's error}; killedAt (ms, or null: absent);
 *   actionsOk [bool per scripted action]. */
#ifndef XGR_TESTS_SCENARIO_EXPECT_H
#define XGR_TESTS_SCENARIO_EXPECT_H

#include <jansson.h>

#include "xgr/driver.h"

/* Called once per mismatch with a readable message. */
typedef void (*scen_fail_fn)(void *ctx, const char *msg);

void scen_check(const json_t *expect, const json_t *report, scen_fail_fn fail, void *ctx);

/* The scenario files (*.json) of directory dir whose names contain filter (NULL: all), sorted, at
 * most 1024: a malloc'd array of *n malloc'd names (caller frees each and the array), or NULL when
 * the directory cannot be read (reported). */
char **scen_files(const char *dir, const char *filter, size_t *n);
/* The bundle of scenario sc (its "bundle" member), or NULL with *e when it does not load. The
 * caller frees it. */
xgr_bundle *scen_bundle(const json_t *sc, xgr_error *e);
/* The deterministic driver set up for scenario sc on bundle b (borrowed; it must outlive the
 * driver), recording, with sc.maxSteps (default 10000): session 1 of sc.owner (default owner) at
 * sc.start with sc.payload, then sc.script. NULL with *e when the session or the script is
 * refused. The caller runs and frees the driver. */
xgr_driver *scen_driver(const json_t *sc, const xgr_bundle *b, const char *owner, xgr_error *e);

#endif
