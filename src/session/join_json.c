/* join_json.c — the join state of a join target as JSON text and back (xgr_session_join_to_json
 * in xgr/session.h; xgr__session_join_from_json in join_json_impl.h). Stores keep a target's join state in
 * this form: the branch that declared the join ([step, branch] of the orchestration), closed,
 * outcome, closedAt, one piece (or null) and one fail flag per `from` entry. */
#include "session/join_json_impl.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "value/value_impl.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- join state as JSON ------------------------------------------------------------------------ */

/* Which step and branch declared join d (pointer identity inside o); false if none. */
static bool decl_ref(const xgr_orch *o, const xgr_join *d, unsigned *step, unsigned *branch) {
  for (size_t i = 0; i < o->nsteps; i++)
    for (unsigned b = 0; b < 2; b++)
      if (o->steps[i].branch[b].join == d) {
        *step = (unsigned)i;
        *branch = b;
        return true;
      }
  return false;
}

void xgr__join_state_free(xgr_join_state *js) {
  if (!js) return;
  for (unsigned i = 0; i < XGR_MAX_JOIN_INPUTS; i++) {
    xgr_value_release(js->inbox[i]);
    free(js->inbox_text[i]);
  }
  free(js);
}

/* A bounded writer: counts every byte put, keeps what fits in cap - 1 bytes (snprintf's rule). */
typedef struct bw {
  char *p;
  size_t cap, len;
} bw;

static void bw_put(bw *w, const char *s, size_t n) {
  if (w->len + 1 < w->cap) {
    size_t room = w->cap - 1 - w->len;
    memcpy(w->p + w->len, s, n < room ? n : room);
  }
  w->len += n;
}

static void bw_puts(bw *w, const char *s) { bw_put(w, s, strlen(s)); }

static void bw_i64(bw *w, int64_t v) {
  char d[20];
  if (v < 0) bw_put(w, "-", 1);
  bw_put(w, d, xgr__u64_dec(d, v < 0 ? 0 - (uint64_t)v : (uint64_t)v));
}

size_t xgr_session_join_write(const xgr_orch *o, xgr_join_state *js, char *buf, size_t cap) {
  unsigned step = 0, branch = 0;
  if (cap) buf[0] = '\0';
  if (!js || !decl_ref(o, js->decl, &step, &branch)) return 0;
  bw w = {buf, cap, 0};
  bw_puts(&w, "{\"decl\":[");
  bw_i64(&w, step);
  bw_put(&w, ",", 1);
  bw_i64(&w, branch);
  bw_puts(&w, js->closed ? "],\"closed\":true,\"outcome\":" : "],\"closed\":false,\"outcome\":");
  bw_i64(&w, (int)js->outcome);
  bw_puts(&w, ",\"closedAt\":");
  bw_i64(&w, js->closed_at);
  bw_puts(&w, ",\"inbox\":[");
  for (unsigned i = 0; i < js->decl->n; i++) {
    if (i) bw_put(&w, ",", 1);
    if (js->inbox[i].kind == XGR_VNULL) {
      bw_put(&w, "null", 4);
    } else {
      if (!js->inbox_text[i]) js->inbox_text[i] = xgr_value_to_json_text(js->inbox[i], 0, NULL);
      bw_puts(&w, js->inbox_text[i]);
    }
  }
  bw_put(&w, "],\"fail\":[", 10);
  for (unsigned i = 0; i < js->decl->n; i++) {
    if (i) bw_put(&w, ",", 1);
    bw_puts(&w, js->fail[i] ? "true" : "false");
  }
  bw_put(&w, "]}", 2);
  if (cap) buf[w.len < cap ? w.len : cap - 1] = '\0';
  return w.len;
}

char *xgr_session_join_to_json(const xgr_orch *o, xgr_join_state *js) {
  size_t cap = js ? 96 + (size_t)js->decl->n * 48 : 1;   /* heads, small pieces and fail flags in one go */
  char *text = xgr__xmalloc(cap);
  size_t n = xgr_session_join_write(o, js, text, cap);
  if (!n) {
    free(text);
    return NULL;
  }
  if (n >= cap) {   /* larger pieces: written again into a buffer of the size it needs */
    text = xgr__xrealloc(text, n + 1);
    xgr_session_join_write(o, js, text, n + 1);
  }
  return text;
}

/* Integer field of a parsed map (int or uint that fits int64). */
static bool get_i64(xgr_value m, const char *key, int64_t *out) {
  xgr_value v;
  if (!xgr_map_get_str(m, key, strlen(key), &v)) return false;
  if (v.kind == XGR_VINT) *out = v.as.i;
  else if (v.kind == XGR_VUINT && v.as.u <= INT64_MAX) *out = (int64_t)v.as.u;
  else return false;
  return true;
}

/* Parse the JSON of xgr_session_join_to_json into a new join state for o. */
int xgr__session_join_from_json(const xgr_orch *o, const char *text, xgr_join_state **out, xgr_error *err) {
  xgr_value m;
  if (xgr_value_from_json_text(text, strlen(text), 0, &m, err)) return XGR_EINVAL;
  int rc = XGR_EINVAL;
  xgr_join_state *js = NULL;
  xgr_value decl, closed, inbox, fail;
  if (m.kind != XGR_VMAP || !xgr_map_get_str(m, "decl", 4, &decl) || xgr_list_size(decl) != 2 ||
      !xgr_map_get_str(m, "closed", 6, &closed) || closed.kind != XGR_VBOOL || !xgr_map_get_str(m, "inbox", 5, &inbox) ||
      inbox.kind != XGR_VLIST || !xgr_map_get_str(m, "fail", 4, &fail) || fail.kind != XGR_VLIST) {
    xgr_error_set(err, XGR_EINVAL, "join", "a join state needs decl, closed, inbox and fail");
    goto done;
  }
  xgr_value ds = xgr_list_get(decl, 0), db = xgr_list_get(decl, 1);
  int64_t step = ds.kind == XGR_VINT ? ds.as.i : -1, branch = db.kind == XGR_VINT ? db.as.i : -1;
  if (step < 0 || (size_t)step >= o->nsteps || branch < 0 || branch > 1 || !o->steps[step].branch[branch].join) {
    xgr_error_set(err, XGR_EINVAL, "join.decl", "the declaring branch [%lld,%lld] has no join in this orchestration",
                  (long long)step, (long long)branch);
    goto done;
  }
  const xgr_join *d = o->steps[step].branch[branch].join;
  if (xgr_list_size(inbox) != d->n || xgr_list_size(fail) != d->n) {
    xgr_error_set(err, XGR_EINVAL, "join.inbox", "expected %u entries as the join declares", (unsigned)d->n);
    goto done;
  }
  int64_t outcome = 0, closed_at = 0;
  if (!get_i64(m, "outcome", &outcome) || outcome < 0 || outcome > 2 || !get_i64(m, "closedAt", &closed_at)) {
    xgr_error_set(err, XGR_EINVAL, "join.outcome", "expected an outcome 0..2 and closedAt");
    goto done;
  }
  js = xgr__xcalloc(1, sizeof *js);
  js->decl = d;
  js->closed = closed.as.b;
  js->outcome = (xgr_join_outcome)outcome;
  js->closed_at = closed_at;
  for (unsigned i = 0; i < d->n; i++) {
    xgr_value piece = xgr_list_get(inbox, i), f = xgr_list_get(fail, i);
    if (piece.kind != XGR_VNULL && piece.kind != XGR_VMAP) {
      xgr_error_set(err, XGR_EINVAL, "join.inbox", "a piece is an object or null");
      goto done;
    }
    js->inbox[i] = xgr_value_retain(piece);
    js->fail[i] = f.kind == XGR_VBOOL && f.as.b ? "aborted" : NULL;
  }
  *out = js;
  js = NULL;
  rc = 0;
done:
  xgr__join_state_free(js);
  xgr_value_release(m);
  return rc;
}

