/* join_json_impl.h — private to src/session: parse the JSON form of a join state (the inverse of
 * xgr_session_join_to_json). */
#ifndef XGR_SESSION_JOIN_JSON_IMPL_H
#define XGR_SESSION_JOIN_JSON_IMPL_H

#include "xgr/session.h"

/* A new join state for orchestration o from text (malloc'd; pieces retained; the caller frees it
 * with xgr__join_state_free). Returns 0 or XGR_EINVAL with *err naming the field. */
int xgr__session_join_from_json(const xgr_orch *o, const char *text, xgr_join_state **out, xgr_error *err);

/* Release js's pieces and their texts and free js. NULL is fine. */
void xgr__join_state_free(xgr_join_state *js);

#endif
