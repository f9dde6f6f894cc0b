/* core_impl.h — private to src/session: what migrate.c needs of the core beyond xgr/session.h (a
 * restored process with a join state built in memory, the PROC effects of every live process, the
 * per-session cap). */
#ifndef XGR_SESSION_CORE_IMPL_H
#define XGR_SESSION_CORE_IMPL_H

#include "session/join_json_impl.h"
#include "xgr/session.h"

/* xgr_session_restore_proc with the join state given as js (taken: freed on error) instead of text. */
int xgr__session_restore_proc_js(xgr_session *s, const xgr_proc *src, xgr_join_state *js, xgr_error *err);
/* A PROC effect for every live process of s, in iter order. */
void xgr__session_emit_live(xgr_session *s, xgr_effects *fx);
/* The session's cap on running processes. */
uint32_t xgr__session_max_running(const xgr_session *s);

#endif
