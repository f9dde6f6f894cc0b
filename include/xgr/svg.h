/* xgr/svg.h — an orchestration drawn as SVG, laid out by Graphviz (libgvc, the `dot` layout).
 *
 * The drawing is the one of `xgr graph --format dot` (xgr/orch.h: steps as boxes, each join
 * declaration as a hexagon "join T · k of n · policy", spawn / open / from / target edges); the SVG
 * adds stable element ids so a page can overlay live state on it:
 *   step node        id="step-<stepId>"
 *   join node        id="join-<declaringStep>-<valid|invalid>"
 *   spawn edge       id="spawn-<from>-<to>-<valid|invalid>"
 *   join opens edge  id="open-<declaringStep>-<valid|invalid>"
 *   from edge        id="from-<fromStep>-<declaringStep>-<valid|invalid>"
 *   target edge      id="target-<declaringStep>-<valid|invalid>"
 * Step ids are identifiers ([A-Za-z0-9_]), so the ids need no escaping.
 *
 * Graphviz keeps global state (its lexer, plugin tables), so calls are serialised by a lock inside
 * the module; the function may be called from any thread.
 */
#ifndef XGR_SVG_H
#define XGR_SVG_H

#include <stddef.h>

#include "xgr/error.h"
#include "xgr/orch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Lay out o and render it as SVG into *out (NUL-terminated, *len bytes without the NUL; the
 * caller frees it with free()). Returns 0, or XGR_EIO with *err filled when Graphviz cannot lay
 * out or render (no `dot` layout or `svg` renderer plugin installed). */
int xgr_orch_svg(const xgr_orch *o, char **out, size_t *len, xgr_error *err);

#ifdef __cplusplus
}
#endif
#endif
