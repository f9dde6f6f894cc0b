/* live_json.c — one live session's records (xgr_store_live: its row, its live processes with
 * their join states and inboxes, its killed scopes) as JSON and back (xgr/store.h, "Live sessions
 * as JSON"). xgrd answers xgr.liveSessions with it and `xgr migrate-check --url` reads the answer
 * back into the records xgr_store_restore_session takes, so a session checked from xgrd is
 * restored from exactly what a store file would give. Numbers that may pass 2^53 (rootPid, iters)
 * are decimal strings; payloads and join states stay the exact JSON text the store holds. Reading
 * is strict: an unknown or missing field, or a value of the wrong type or range, is an error naming
 * its path. Pure code: no I/O.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "xgr/json.h"
#include "xgr/store.h"

static json_t *u64_json(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "%" PRIu64, v);
  return json_string(b);
}

static json_t *text_or_null(const char *s) { return s ? json_string(s) : json_null(); }

json_t *xgr_store_live_to_json(const xgr_store_live *l) {
  const xgr_store_session *s = l->session;
  json_t *procs = json_array(), *killed = json_array();
  for (size_t i = 0; i < l->nprocs; i++) {
    const xgr_store_proc *p = &l->procs[i];
    json_array_append_new(
        procs, json_pack("{s:o, s:o, s:i, s:s, s:i, s:b, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:o, s:o}", "iter",
                         u64_json(p->iter), "parentIter", u64_json(p->parent_iter), "step", (int)p->step, "stepId",
                         p->step_id ? p->step_id : "", "status", (int)p->status, "paused", p->paused, "valid", (int)p->valid,
                         "abortReason", (int)p->abort_reason, "group", (json_int_t)p->group, "fromGroup",
                         (json_int_t)p->from_group, "nextWakeAt", (json_int_t)p->next_wake_at, "createdAt",
                         (json_int_t)p->created_at, "startedAt", (json_int_t)p->started_at, "finishedAt",
                         (json_int_t)p->finished_at, "payload", p->payload ? p->payload : "{}", "error",
                         text_or_null(p->error), "join", text_or_null(p->join)));
  }
  for (size_t i = 0; i < l->nkilled; i++) json_array_append_new(killed, json_integer(l->killed_groups[i]));
  json_t *row = json_pack("{s:s, s:o, s:s, s:s, s:s, s:s, s:i, s:I, s:I, s:o, s:I, s:b}", "owner", s->owner, "rootPid",
                          u64_json(s->root_pid), "registry", s->registry ? s->registry : "", "ostcId",
                          s->ostc_id ? s->ostc_id : "", "ostcHash", s->ostc_hash ? s->ostc_hash : "", "bundleHash",
                          s->bundle_hash ? s->bundle_hash : "", "status", (int)s->status, "killedAt",
                          (json_int_t)s->killed_at, "createdAt", (json_int_t)s->created_at, "nextIter",
                          u64_json(s->next_iter), "nextGroup", (json_int_t)s->next_group, "paused", s->paused);
  return json_pack("{s:o, s:o, s:o}", "session", row, "processes", procs, "killedGroups", killed);
}

size_t xgr_store_live_size(const xgr_store_live *l) {
  size_t n = 512;
  for (size_t i = 0; i < l->nprocs; i++) {
    const xgr_store_proc *p = &l->procs[i];
    n += 400 + (p->payload ? strlen(p->payload) : 0) + (p->join ? strlen(p->join) : 0) + (p->error ? strlen(p->error) : 0) +
         (p->step_id ? strlen(p->step_id) : 0);
  }
  return n + 12 * l->nkilled;
}

/* ---- reading ------------------------------------------------------------------------------------ */

typedef struct rd {
  const json_t *o;
  char path[160];
  xgr_error *err;
} rd;

static int fail(rd *r, const char *key, const char *what) {
  char buf[48], full[200];
  xgr_json_preview(json_object_get(r->o, key), buf, sizeof buf);
  snprintf(full, sizeof full, "%s.%s", r->path, key);
  return xgr_error_set(r->err, XGR_ESCHEMA, full, "%s is %s; expected %s", full, json_object_get(r->o, key) ? buf : "missing",
                       what);
}

static int keys_only(rd *r, const char *const *keys) {
  const char *k;
  const json_t *v;
  json_object_foreach((json_t *)r->o, k, v) {
    bool known = false;
    for (const char *const *q = keys; *q && !known; q++) known = !strcmp(*q, k);
    if (!known) return xgr_error_set(r->err, XGR_ESCHEMA, r->path, "%s.%.60s is not a known field", r->path, k);
  }
  return 0;
}

static int get_int(rd *r, const char *key, int64_t lo, int64_t hi, int64_t *out) {
  const json_t *v = json_object_get(r->o, key);
  if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
    char what[80];
    snprintf(what, sizeof what, "an integer from %lld to %lld", (long long)lo, (long long)hi);
    return fail(r, key, what);
  }
  *out = json_integer_value(v);
  return 0;
}

static int get_u64(rd *r, const char *key, uint64_t *out) {
  const char *s = xgr_json_text(json_object_get(r->o, key));
  char *end = NULL;
  if (s && *s >= '0' && *s <= '9') *out = strtoull(s, &end, 10);
  if (!end || *end || strlen(s) > 20) return fail(r, key, "a decimal string of an unsigned 64-bit integer");
  return 0;
}

static int get_bool(rd *r, const char *key, bool *out) {
  const json_t *v = json_object_get(r->o, key);
  if (!json_is_boolean(v)) return fail(r, key, "a boolean");
  *out = json_is_true(v);
  return 0;
}

/* A string into *out (owned); null into NULL when nullable. */
static int get_str(rd *r, const char *key, bool nullable, char **out) {
  const json_t *v = json_object_get(r->o, key);
  if (nullable && json_is_null(v)) {
    *out = NULL;
    return 0;
  }
  const char *s = xgr_json_text(v);
  if (!s) return fail(r, key, nullable ? "a string or null" : "a string");
  *out = xgr__xstrdup(s);
  return 0;
}

static int read_row(rd *r, xgr_store_session *s) {
  static const char *const keys[] = {"owner", "rootPid", "registry", "ostcId", "ostcHash", "bundleHash", "status",
                                     "killedAt", "createdAt", "nextIter", "nextGroup", "paused", NULL};
  if (!json_is_object(r->o))
    return xgr_error_set(r->err, XGR_ESCHEMA, r->path, "%s is not an object; expected a session row", r->path);
  int64_t st = 0, ng = 0;
  int rc = keys_only(r, keys);
  if (!rc) rc = get_str(r, "owner", false, &s->owner);
  if (!rc) rc = get_u64(r, "rootPid", &s->root_pid);
  if (!rc) rc = get_str(r, "registry", false, &s->registry);
  if (!rc) rc = get_str(r, "ostcId", false, &s->ostc_id);
  if (!rc) rc = get_str(r, "ostcHash", false, &s->ostc_hash);
  if (!rc) rc = get_str(r, "bundleHash", false, &s->bundle_hash);
  if (!rc) rc = get_int(r, "status", 0, 255, &st);
  if (!rc) rc = get_int(r, "killedAt", INT64_MIN, INT64_MAX, &s->killed_at);
  if (!rc) rc = get_int(r, "createdAt", INT64_MIN, INT64_MAX, &s->created_at);
  if (!rc) rc = get_u64(r, "nextIter", &s->next_iter);
  if (!rc) rc = get_int(r, "nextGroup", 0, UINT32_MAX, &ng);
  if (!rc) rc = get_bool(r, "paused", &s->paused);
  s->status = (uint8_t)st;
  s->next_group = (uint32_t)ng;
  return rc;
}

static int read_proc(rd *r, xgr_store_proc *p) {
  static const char *const keys[] = {"iter", "parentIter", "step", "stepId", "status", "paused", "valid", "abortReason",
                                     "group", "fromGroup", "nextWakeAt", "createdAt", "startedAt", "finishedAt", "payload",
                                     "error", "join", NULL};
  if (!json_is_object(r->o))
    return xgr_error_set(r->err, XGR_ESCHEMA, r->path, "%s is not an object; expected a process row", r->path);
  int64_t step = 0, st = 0, valid = 0, ab = 0, g = 0, fg = 0;
  int rc = keys_only(r, keys);
  if (!rc) rc = get_u64(r, "iter", &p->iter);
  if (!rc) rc = get_u64(r, "parentIter", &p->parent_iter);
  if (!rc) rc = get_int(r, "step", 0, UINT16_MAX, &step);
  if (!rc) rc = get_str(r, "stepId", false, &p->step_id);
  if (!rc) rc = get_int(r, "status", 0, 255, &st);
  if (!rc) rc = get_bool(r, "paused", &p->paused);
  if (!rc) rc = get_int(r, "valid", -1, 1, &valid);
  if (!rc) rc = get_int(r, "abortReason", 0, 255, &ab);
  if (!rc) rc = get_int(r, "group", 0, UINT32_MAX, &g);
  if (!rc) rc = get_int(r, "fromGroup", 0, UINT32_MAX, &fg);
  if (!rc) rc = get_int(r, "nextWakeAt", INT64_MIN, INT64_MAX, &p->next_wake_at);
  if (!rc) rc = get_int(r, "createdAt", INT64_MIN, INT64_MAX, &p->created_at);
  if (!rc) rc = get_int(r, "startedAt", INT64_MIN, INT64_MAX, &p->started_at);
  if (!rc) rc = get_int(r, "finishedAt", INT64_MIN, INT64_MAX, &p->finished_at);
  if (!rc) rc = get_str(r, "payload", false, &p->payload);
  if (!rc) rc = get_str(r, "error", true, &p->error);
  if (!rc) rc = get_str(r, "join", true, &p->join);
  p->step = (uint16_t)step;
  p->status = (uint8_t)st;
  p->valid = (int8_t)valid;
  p->abort_reason = (uint8_t)ab;
  p->group = (uint32_t)g;
  p->from_group = (uint32_t)fg;
  return rc;
}

int xgr_store_live_from_json(const json_t *j, const char *path, size_t max_procs, xgr_store_live_owned *out,
                             xgr_error *err) {
  static const char *const keys[] = {"session", "processes", "killedGroups", NULL};
  memset(out, 0, sizeof *out);
  out->live.session = &out->session;
  rd r = {j, "", err};
  snprintf(r.path, sizeof r.path, "%s", path);
  if (!json_is_object(j))
    return xgr_error_set(err, XGR_ESCHEMA, path, "%s is not an object; expected {\"session\",\"processes\",\"killedGroups\"}",
                         path);
  int rc = keys_only(&r, keys);
  const json_t *ps = json_object_get(j, "processes"), *ks = json_object_get(j, "killedGroups");
  if (!rc && (!json_is_array(ps) || json_array_size(ps) > max_procs)) {
    char what[64];
    snprintf(what, sizeof what, "an array of at most %zu process rows", max_procs);
    rc = fail(&r, "processes", what);
  }
  if (!rc && (!json_is_array(ks) || json_array_size(ks) > UINT16_MAX))
    rc = fail(&r, "killedGroups", "an array of at most 65535 join group numbers");
  if (rc) return rc;
  rd rs = {json_object_get(j, "session"), "", err};
  snprintf(rs.path, sizeof rs.path, "%s.session", path);
  if ((rc = read_row(&rs, &out->session))) {
    xgr_store_live_owned_clear(out);
    return rc;
  }
  size_t np = json_array_size(ps), nk = json_array_size(ks);
  out->procs = xgr__xcalloc(np + 1, sizeof *out->procs);
  out->killed = xgr__xcalloc(nk + 1, sizeof *out->killed);
  for (size_t i = 0; i < np && !rc; i++) {
    rd rp = {json_array_get(ps, i), "", err};
    snprintf(rp.path, sizeof rp.path, "%s.processes[%zu]", path, i);
    rc = read_proc(&rp, &out->procs[i]);
    out->live.nprocs = i + 1;   /* what to clear */
  }
  for (size_t i = 0; i < nk && !rc; i++) {
    const json_t *v = json_array_get(ks, i);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
      rc = xgr_error_set(err, XGR_ESCHEMA, path, "%s.killedGroups[%zu] is not a join group number (0 to 2^32-1)", path, i);
    else
      out->killed[i] = (uint32_t)json_integer_value(v);
  }
  out->live.procs = out->procs;
  out->live.killed_groups = out->killed;
  out->live.nkilled = nk;
  if (rc) xgr_store_live_owned_clear(out);
  return rc;
}

void xgr_store_live_owned_clear(xgr_store_live_owned *o) {
  if (!o) return;
  xgr_store_session_clear(&o->session);
  for (size_t i = 0; i < o->live.nprocs && o->procs; i++) xgr_store_proc_clear(&o->procs[i]);
  free(o->procs);
  free(o->killed);
  memset(o, 0, sizeof *o);
}
