/* xgr/migrate.h — deciding whether sessions of one orchestration can move to another (issue 36,
 * `xgr migrate-check`, xgr.migrateSessions; docs/SEMANTICS.md "Migration").
 *
 * A checker holds OLD and NEW (orchestrations, with their bundles when there are rules) and a
 * step map. For one session state it answers, as JSON (a new jansson reference):
 *   {"safe":B, "problems":[{"path","message"}], "added":[FINDING...], "complete":B,
 *    "old":{"states","findings"}, "new":{"states","findings"}}
 * problems: what xgr_session_migrate refuses statically (a step without a target, a piece the
 * new join does not accept, a join NEW can no longer satisfy); added: the findings an exploration
 * of NEW from the migrated state has that the exploration of OLD from the original state does not
 * (xgr/explore.h's findings, with their shortest traces on the session's own pids): a join that
 * becomes unfulfillable, a step OLD reaches that NEW never runs, a new loop, a stall. safe: no
 * problem, nothing added, and both explorations complete.
 * States equal up to process ids (the explorer's canonical form) share one answer (a cache), so
 * many sessions waiting at the same place cost one exploration pair.
 *
 * Not thread-safe; one checker per thread. The orchestrations and bundles are borrowed and must
 * outlive the checker.
 */
#ifndef XGR_MIGRATE_H
#define XGR_MIGRATE_H

#include <jansson.h>
#include <stdbool.h>

#include "xgr/bundle.h"
#include "xgr/error.h"
#include "xgr/explore.h"
#include "xgr/orch.h"
#include "xgr/session.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xgr_migrate_checker xgr_migrate_checker;

/* A checker for OLD (oo, ob may be NULL) -> NEW (no, nb may be NULL) with the map pairs from[i] ->
 * to[i] (step ids, copied into the map). cfg: the explorations' bounds (NULL: max_states 20000,
 * every outcome). NULL with *err (path map[i]) when a pair names an unknown step. */
xgr_migrate_checker *xgr_migrate_checker_new(const xgr_orch *oo, const xgr_bundle *ob, const xgr_orch *no,
                                             const xgr_bundle *nb, size_t npairs, const char *const *from,
                                             const char *const *to, const xgr_explore_config *cfg, xgr_error *err);
void xgr_migrate_checker_free(xgr_migrate_checker *c);

/* The step map: map[i] is NEW's step index for OLD step i, -1 none (borrowed from c). */
const int *xgr_migrate_checker_map(const xgr_migrate_checker *c);

/* The `xgr check` findings (xgr_orch_analyze) of NEW that OLD did not have (same code and path), as
 * [{"severity","code","path","message"}] (new reference). */
json_t *xgr_migrate_check_findings(const xgr_migrate_checker *c);

/* The verdict above for session s (borrowed; on OLD, settled, no running step) at clock now. */
json_t *xgr_migrate_check_session(xgr_migrate_checker *c, const xgr_session *s, int64_t now);

/* How many verdicts came from the cache / were explored. */
void xgr_migrate_checker_stats(const xgr_migrate_checker *c, size_t *cached, size_t *explored);

#ifdef __cplusplus
}
#endif
#endif
