/* driver.c — the deterministic driver (xgr/driver.h): sessions on a virtual clock, one process at
 * a time, steps through the step engine, scripted control actions, and (optionally) a record of
 * every process's last state and the history for reports. */
#include "util/alloc.h"
#include "xgr/driver.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "xgr/json.h"
#include "xgr/outcome.h"
#include "xgr/records.h"
#include "xgr/script.h"

typedef struct dsession {
  const xgr_bundle *b;
  xgr_session *s;
  xgr_records *rec;             /* processes, history and scripted actions (NULL unless cfg.record) */
} dsession;

struct xgr_driver {
  xgr_driver_config cfg;
  dsession *ss;
  size_t nss;
  xgr_script_action *acts;     /* scripted actions, sorted by time */
  size_t nacts, next_act;
  int64_t now;
  uint64_t steps;
  xgr_effects fx;
  xgr_effects wakes;           /* the WAKE effects of one core call while they are routed */
  xgr_http_exchange *http;
};

xgr_driver *xgr_driver_new(const xgr_driver_config *cfg) {
  xgr_driver *d = xgr__xcalloc(1, sizeof *d);
  if (cfg) d->cfg = *cfg;
  xgr_effects_init(&d->fx);
  xgr_effects_init(&d->wakes);
  return d;
}

void xgr_driver_free(xgr_driver *d) {
  if (!d) return;
  for (size_t i = 0; i < d->nss; i++) {
    dsession *ds = &d->ss[i];
    xgr_records_free(ds->rec);
    xgr_session_free(ds->s);
  }
  free(d->ss);
  xgr_script_free(d->acts, d->nacts);
  xgr_effects_free(&d->fx);
  xgr_effects_free(&d->wakes);
  xgr_http_exchange_free(d->http);
  free(d);
}

uint64_t xgr_driver_steps(const xgr_driver *d) { return d->steps; }
void xgr_driver_set_max_steps(xgr_driver *d, uint64_t max_steps) { d->cfg.max_steps = max_steps; }
int64_t xgr_driver_now(const xgr_driver *d) { return d->now; }
xgr_session_result xgr_driver_result(const xgr_driver *d, size_t i) {
  return i < d->nss ? xgr_session_result_of(d->ss[i].s) : XGR_RESULT_RUNNING;
}

static dsession *find_session(xgr_driver *d, const char *owner, uint64_t root) {
  for (size_t i = 0; i < d->nss; i++)
    if (xgr_session_root_pid(d->ss[i].s) == root && (!owner || !strcasecmp(owner, xgr_session_owner(d->ss[i].s))))
      return &d->ss[i];
  return NULL;
}

static void observe(xgr_driver *d, xgr_driver_event_kind kind, size_t si, const xgr_effect *e, const char *msg, bool ok) {
  if (!d->cfg.observe) return;
  xgr_driver_event ev = {.kind = kind, .session = si, .now = d->now, .effect = e, .message = msg, .ok = ok};
  d->cfg.observe(d->cfg.observe_ctx, &ev);
}

/* ---- effects ---------------------------------------------------------------------------------- */

/* Record and report the effects in d->fx of one core call on session si (WAKE effects aside). */
static void record(xgr_driver *d, size_t si) {
  dsession *ds = &d->ss[si];
  if (d->cfg.on_effects && d->fx.n) d->cfg.on_effects(d->cfg.effects_ctx, si, ds->s, &d->fx);
  for (size_t i = 0; i < d->fx.n; i++) {
    const xgr_effect *e = &d->fx.items[i];
    switch (e->kind) {
      case XGR_FX_PROC:
        if (ds->rec) xgr_records_proc(ds->rec, ds->b->orch, e->proc);
        observe(d, XGR_DEV_PROC, si, e, NULL, true);
        break;
      case XGR_FX_JOIN:
        if (ds->rec) xgr_records_proc(ds->rec, ds->b->orch, e->proc);
        observe(d, XGR_DEV_JOIN, si, e, NULL, true);
        break;
      case XGR_FX_HISTORY:
        if (ds->rec) xgr_records_hist(ds->rec, e);
        break;
      case XGR_FX_FINISHED:
        observe(d, XGR_DEV_FINISHED, si, e, xgr_session_result_name(e->result), true);
        break;
      default:
        break;
    }
  }
}

/* Deliver one internal wake-up produced by session `from` (its effects go to d->fx, which is
 * empty here, and are recorded for the target session like any other core call's). */
static void route_wake(xgr_driver *d, size_t from, const xgr_effect *e) {
  char msg[1024];
  dsession *t = find_session(d, e->runner, e->session_id);
  const char *owner = xgr_session_owner(d->ss[from].s);
  if (!t) {
    snprintf(msg, sizeof msg, "wake-up for session %s/%llu step %s: no such session here", e->runner,
             (unsigned long long)e->session_id, e->step_id);
    observe(d, XGR_DEV_WAKE, from, e, msg, false);
    return;
  }
  int step = xgr_orch_find(xgr_session_orch(t->s), e->step_id);
  xgr_error err;
  size_t woken = 0;
  assert(d->fx.n == 0);
  int rc = step < 0 ? xgr_error_set(&err, XGR_ENOTFOUND, NULL, "no step \"%s\"", e->step_id)
                    : xgr_session_wake_step(t->s, (unsigned)step, owner, XGR_WAKE_INTERNAL, e->rule_address,
                                            e->payload, d->now, &d->fx, &woken, &err);
  snprintf(msg, sizeof msg, "internal wake-up of session %llu step %s: %s", (unsigned long long)e->session_id,
           e->step_id, rc ? err.message : "woken");
  record(d, (size_t)(t - d->ss));   /* the woken processes' new payload and nextWakeAt */
  xgr_effects_reset(&d->fx);
  observe(d, XGR_DEV_WAKE, from, e, msg, rc == 0);
}

/* Consume the effects of one core call on session si. Wake-ups are messages (SEMANTICS §5): they
 * are delivered after the call's other effects are recorded, one after the other, also when they
 * target session si itself. They move to d->wakes first, so that each delivery's own effects
 * (PROC rows of the woken processes; a wake never produces further wake-ups) can use d->fx. */
static void consume(xgr_driver *d, size_t si) {
  record(d, si);
  size_t nwake = 0;
  for (size_t i = 0; i < d->fx.n; i++) nwake += d->fx.items[i].kind == XGR_FX_WAKE;
  if (!nwake) {
    xgr_effects_reset(&d->fx);
    return;
  }
  xgr_effects tmp = d->wakes;   /* empty; swap so that d->fx is free for the deliveries */
  d->wakes = d->fx;
  d->fx = tmp;
  for (size_t i = 0; i < d->wakes.n; i++)
    if (d->wakes.items[i].kind == XGR_FX_WAKE) route_wake(d, si, &d->wakes.items[i]);
  xgr_effects_reset(&d->wakes);
}

/* ---- sessions and scripts ----------------------------------------------------------------------- */

int xgr_driver_add_session(xgr_driver *d, const xgr_bundle *b, const char *owner, uint64_t root_pid,
                           const char *start, xgr_value payload, xgr_error *err) {
  return xgr_driver_add_session_at(d, b, owner, root_pid, start, payload, 0, err);
}

int xgr_driver_add_session_at(xgr_driver *d, const xgr_bundle *b, const char *owner, uint64_t root_pid,
                              const char *start, xgr_value payload, int64_t wait_ms, xgr_error *err) {
  assert(wait_ms >= 0 && wait_ms <= INT64_MAX - d->now);
  int step = xgr_orch_find(b->orch, start);
  if (step < 0) return xgr_error_set(err, XGR_ENOTFOUND, "start", "start step \"%s\" is not a step of the orchestration", start);
  if (find_session(d, owner, root_pid))
    return xgr_error_set(err, XGR_ECONFLICT, NULL, "session %s/%llu exists already", owner, (unsigned long long)root_pid);
  d->ss = xgr__xrealloc(d->ss, (d->nss + 1) * sizeof *d->ss);
  dsession *ds = &d->ss[d->nss];
  memset(ds, 0, sizeof *ds);
  ds->b = b;
  xgr_session_config sc = {.max_running = d->cfg.max_running};
  ds->s = xgr_session_new(b->orch, owner, root_pid, &sc);
  ds->rec = d->cfg.record ? xgr_records_new() : NULL;
  int rc = xgr_session_start_at(ds->s, (unsigned)step, payload, d->now, d->now + wait_ms, &d->fx, err);
  d->nss++;
  consume(d, d->nss - 1);
  return rc;
}

int xgr_driver_add_script(xgr_driver *d, const json_t *script, xgr_error *err) {
  xgr_script_action *more;
  size_t n;
  int rc = xgr_script_parse(script, &more, &n, err);
  if (rc) return rc;
  d->acts = xgr__xrealloc(d->acts, (d->nacts + n) * sizeof *d->acts);
  memcpy(d->acts + d->nacts, more, n * sizeof *more);
  free(more);   /* the entries moved into d->acts */
  d->nacts += n;
  /* stable merge by time of what is not applied yet (insertion sort: scripts are short) */
  for (size_t i = d->next_act + 1; i < d->nacts; i++) {
    xgr_script_action v = d->acts[i];
    size_t j = i;
    while (j > d->next_act && d->acts[j - 1].at > v.at) {
      d->acts[j] = d->acts[j - 1];
      j--;
    }
    d->acts[j] = v;
  }
  return 0;
}

static void apply_action(xgr_driver *d, xgr_script_action *a) {
  dsession *ds = a->kind == XGR_SCRIPT_WAKE_STEP && a->root_pid == 0 ? (d->nss ? &d->ss[0] : NULL) : find_session(d, NULL, a->root_pid);
  char msg[640];
  xgr_error err;
  xgr_error_clear(&err);
  int rc;
  if (!ds) {
    rc = xgr_error_set(&err, XGR_ENOTFOUND, NULL, "no session with rootPid %llu", (unsigned long long)a->root_pid);
  } else if (a->caller && a->kind >= XGR_SCRIPT_KILL && strcasecmp(a->caller, xgr_session_owner(ds->s))) {
    /* as xgrd: only the session's owner controls it; delegation exists for step-mode wakes only */
    rc = xgr_error_set(&err, XGR_EPERM, NULL, "%s is not the owner of session %llu; only the owner may %s it",
                       a->caller, (unsigned long long)a->root_pid, a->kind == XGR_SCRIPT_KILL ? "kill"
                       : a->kind == XGR_SCRIPT_PAUSE ? "pause" : a->kind == XGR_SCRIPT_RETRY ? "retry in" : "resume");
  } else {
    switch (a->kind) {
      case XGR_SCRIPT_WAKE_PID:
        rc = xgr_session_wake_pid(ds->s, a->iter, a->caller, a->payload, d->now, &d->fx, &err);
        break;
      case XGR_SCRIPT_WAKE_STEP: {
        int step = xgr_orch_find(xgr_session_orch(ds->s), a->step);
        size_t woken = 0;
        rc = step < 0 ? xgr_error_set(&err, XGR_ENOTFOUND, NULL, "no step \"%s\" in the orchestration", a->step)
                      : xgr_session_wake_step(ds->s, (unsigned)step, a->caller, XGR_WAKE_RPC, NULL, a->payload, d->now,
                                              &d->fx, &woken, &err);
        if (!rc) snprintf(err.message, sizeof err.message, "woke %zu process%s", woken, woken == 1 ? "" : "es");
        break;
      }
      case XGR_SCRIPT_KILL:
        rc = xgr_session_kill(ds->s, a->iter, d->now, &d->fx, &err);
        break;
      case XGR_SCRIPT_RETRY: {   /* the aborted process's last state comes from the records */
        xgr_retry_of r;
        uint64_t it = 0;
        char pid[48];
        xgr_pid_format(a->root_pid, a->iter, pid, sizeof pid);
        if (!xgr_records_retry_of(ds->rec, a->iter, &r))
          rc = xgr_error_set(&err, XGR_ENOTFOUND, "pid", "process %s: nothing is recorded of it (a retry needs the "
                             "driver's records)", pid);
        else if (!(rc = xgr_session_retry(ds->s, &r, a->payload, d->now, &d->fx, &it, &err))) {
          char np[48];
          xgr_pid_format(a->root_pid, it, np, sizeof np);
          snprintf(err.message, sizeof err.message, "retried %s as %s", pid, np);
        }
        break;
      }
      default:
        rc = xgr_session_pause(ds->s, a->iter, a->kind == XGR_SCRIPT_PAUSE, d->now, &d->fx, &err);
        break;
    }
  }
  snprintf(msg, sizeof msg, "%s: %s", a->text, rc ? err.message : err.message[0] ? err.message : "ok");
  size_t si = ds ? (size_t)(ds - d->ss) : 0;
  if (ds && ds->rec) xgr_records_action(ds->rec, d->now, a->text, rc == 0, rc ? err.message : err.message[0] ? err.message : "ok");
  if (ds) consume(d, si);
  observe(d, XGR_DEV_ACTION, si, NULL, msg, rc == 0);
}

/* ---- running steps ------------------------------------------------------------------------------ */

static void run_one(xgr_driver *d, size_t si, const xgr_proc *p) {
  dsession *ds = &d->ss[si];
  uint64_t iter = p->iter;
  unsigned step = p->step;
  xgr_value payload = xgr_value_retain(p->payload);
  char pid[48];
  xgr_pid_format(xgr_session_root_pid(ds->s), iter, pid, sizeof pid);
  xgr_step_ctx ctx = {.owner = xgr_session_owner(ds->s),
                      .session_id = xgr_session_root_pid(ds->s),
                      .pid = pid,
                      .step_id = ds->b->orch->steps[step].id,
                      .api_map = d->cfg.api_map,
                      .napi_map = d->cfg.napi_map,
                      .chain = d->cfg.chain,
                      .outbound = d->cfg.outbound};
  const xgr_rule *rule = ds->b->step_rule[step];
  if (!d->http && xgr_rule_napi_calls(rule)) d->http = xgr_http_exchange_new();
  xgr_step_result res;
  memset(&res, 0, sizeof res);
  xgr_step_run(rule, payload, &ctx, d->http, &res);
  xgr_value_release(payload);

  xgr_outcome_buf ob;
  xgr_step_outcome o;
  xgr_outcome_from_result(&res, ds->b->step_rule_address[step], &ob, &o);
  xgr_session_step_result(ds->s, iter, &o, d->now, &d->fx, NULL);
  xgr_step_result_free(&res);
  d->steps++;
  consume(d, si);
}

xgr_session_result xgr_driver_run(xgr_driver *d) {
  for (;;) {
    if (d->cfg.max_steps && d->steps >= d->cfg.max_steps) break;
    /* the earliest due process over all sessions */
    size_t best = (size_t)-1;
    int64_t due = XGR_NEVER;
    for (size_t i = 0; i < d->nss; i++) {
      int64_t t = xgr_session_next_due(d->ss[i].s);
      if (t < due) {
        due = t;
        best = i;
      }
    }
    int64_t act_at = d->next_act < d->nacts ? d->acts[d->next_act].at : XGR_NEVER;
    if (act_at != XGR_NEVER && act_at <= due) {
      if (act_at > d->now) d->now = act_at;
      apply_action(d, &d->acts[d->next_act++]);
      continue;
    }
    if (due == XGR_NEVER) break;
    if (due > d->now) d->now = due;
    dsession *ds = &d->ss[best];
    xgr_session_promote(ds->s, d->now, 1, &d->fx);
    const xgr_proc *p = NULL;
    for (size_t k = 0; k < d->fx.n; k++)
      if (d->fx.items[k].kind == XGR_FX_RUN_STEP) p = d->fx.items[k].proc;
    if (!p) {
      consume(d, best);
      continue;
    }
    /* p stays valid: consume() only records and reports (promotion emits no wake-ups) */
    consume(d, best);
    run_one(d, best, p);
  }
  return d->nss ? xgr_driver_result(d, 0) : XGR_RESULT_COMPLETED;
}

/* ---- reports ------------------------------------------------------------------------------------ */

json_t *xgr_driver_report(const xgr_driver *d, size_t si) {
  if (si >= d->nss) return NULL;
  const dsession *ds = &d->ss[si];
  xgr_session_result r = xgr_session_result_of(ds->s);
  if (r == XGR_RESULT_RUNNING)
    r = d->cfg.max_steps && d->steps >= d->cfg.max_steps ? XGR_RESULT_LIMIT : XGR_RESULT_STALLED;
  return xgr_records_report(ds->rec, ds->s, xgr_session_result_name(r), d->steps, d->now);
}

/* ---- forced runs (xgr explore --emit traces, `xgr run --replay`) ------------------------------ */

const xgr_session *xgr_driver_session(const xgr_driver *d, size_t si) { return si < d->nss ? d->ss[si].s : NULL; }

int xgr_driver_force_promote(xgr_driver *d, size_t si, uint64_t iter, xgr_error *err) {
  if (si >= d->nss) return xgr_error_set(err, XGR_ENOTFOUND, NULL, "no session %zu", si);
  int rc = xgr_session_promote_iter(d->ss[si].s, iter, d->now, &d->fx, err);
  consume(d, si);
  return rc < 0 ? rc : 0;
}

int xgr_driver_force_result(xgr_driver *d, size_t si, uint64_t iter, const xgr_step_outcome *o, xgr_error *err) {
  if (si >= d->nss) return xgr_error_set(err, XGR_ENOTFOUND, NULL, "no session %zu", si);
  int rc = xgr_session_step_result(d->ss[si].s, iter, o, d->now, &d->fx, err);
  if (!rc) d->steps++;
  consume(d, si);
  return rc;
}

void xgr_driver_force_clock(xgr_driver *d, int64_t now) {
  if (now > d->now) d->now = now;
}
