/* actor.c — the root actor of one session: a process of the work-stealing runtime that owns the
 * session core (xgr/session.h) and is the only code that ever touches it.
 *
 * One *turn* of the actor is one step() call of the runtime with a batch of events:
 *   - step results (yield completions of CMD_STEP tasks) are applied with
 *     xgr_session_step_result — in completion order, or in promotion order when `ordered`
 *     (a ring buffer indexed by promotion sequence);
 *   - messages: timer deadlines, control calls, internal wake-ups from other sessions, report
 *     requests;
 *   - a store commit (TAG_STORE) releases the visible effects held for that batch;
 *   - cancel (engine shutdown): stop promoting, drain what runs, then complete.
 * After the events the actor promotes what is due (up to the per-session cap and the step limit),
 * re-arms its timer for the next due process, hands the turn's PROC/HISTORY rows to the store (if
 * any) and decides whether the session is finished, idle, or waits for more.
 *
 * Every effect of the core goes through `consume`, which records it (reports), snapshots it for
 * the store and subscribers, and turns RUN_STEP into a job and WAKE into a message. What others
 * can observe — jobs dispatched to workers, wake-ups sent, events, control replies — is queued as
 * "visible" items, released at once without a store, or when the store has committed the batch.
 *
 * Stepped clock accounting: each event the actor consumes was counted in e->busy by its producer;
 * the actor subtracts them at the end of the turn, after counting the work it produced itself.
 *
 * The actor's state is in actor_impl.h; the rows of a turn's store batch are built in
 * actor_batch.c.
 */
#include "util/alloc.h"
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <jansson.h>

#include "engine/actor_impl.h"
#include "util/clock.h"
#include "util/hashmap.h"
#include "xgr/outcome.h"

#define HIB_GRACE_NS 250000000ull   /* a loaded session stays in memory at least 250 ms */

static void first_turn(actor *a);

static void vpush(visq *q, vis v) {
  if (q->n == q->cap) {
    q->cap = q->cap ? q->cap * 2 : 16;
    q->v = xgr__xrealloc(q->v, q->cap * sizeof *q->v);
  }
  q->v[q->n++] = v;
}


/* Who wants which events this turn: each subscriber's interest, asked once per turn. */
_Static_assert(XGR_EEV_STEP < 8 && XGR_EEV_WANT_ALL == 0xffu, "a byte of event kinds");
static void interest(actor *a) {
  const xgr_engine *e = a->e;
  memset(a->to, 0, sizeof a->to);
  a->join_tree = false;
  a->trace = false;
  for (unsigned k = 0; k < e->nsubs; k++) {
    unsigned m = e->subs_want[k] ? e->subs_want[k](e->subs_ctx[k]) : XGR_EEV_WANT_ALL | XGR_EEV_WANT_JOIN_TREE;
    for (unsigned kind = 0; kind < 8; kind++)
      if (m & XGR_EEV_WANT(kind)) a->to[kind] |= (uint8_t)(1u << k);
    if ((m & XGR_EEV_WANT(XGR_EEV_JOIN)) && (m & XGR_EEV_WANT_JOIN_TREE)) a->join_tree = true;
    if (e->subs_want[k] && (m & XGR_EEV_WANT_TRACE)) a->trace = true;
  }
}

/* Whether some subscriber wants events of this kind this turn (else none is made). */
static bool wants(const actor *a, xgr_engine_event_kind kind) { return a->to[kind] != 0; }

/* Hand event s to the subscribers it was made for. */
static void deliver(const actor *a, const evsnap *s) {
  const xgr_engine *e = a->e;
  for (unsigned k = 0; k < e->nsubs; k++)
    if (s->to & (1u << k)) e->subs[k](e->subs_ctx[k], &s->ev);
}

static evsnap *ev_new(actor *a, xgr_engine_event_kind kind, const char *msg, bool ok) {
  evsnap *s = xgr__xcalloc(1, sizeof *s);
  s->to = a->to[kind];
  s->ev.kind = kind;
  s->ev.owner = xgr_session_owner(a->s);
  s->ev.root_pid = a->root;
  s->ev.now = a->now;
  s->ev.orch = a->b->orch;
  s->ev.ok = ok;
  s->ev.result = a->result;
  s->ev.steps = a->steps;
  if (msg) s->msg = xgr__xstrdup(msg);
  s->ev.message = s->msg;
  return s;
}

static void ev_free(evsnap *s) {
  if (s->ev.proc) xgr_eng_snap_release(&s->p);
  xgr_value_release(s->ev.input);
  xgr_value_release(s->ev.output);
  free(s->msg);
  free(s->api);
  free(s->reads);
  free(s->from_owner);
  free(s);
}

static void push_event(actor *a, evsnap *s) { vpush(&a->pend, (vis){.kind = V_EVENT, .u.ev = s}); }

/* ---- jobs ------------------------------------------------------------------------------------ */

static job *job_new(actor *a, const xgr_proc *p) {
  job *j = a->free_jobs;
  if (j) {
    a->free_jobs = j->next;
    a->nfree--;
  } else {
    j = xgr__xmalloc(sizeof *j);
    memset(&j->res, 0, sizeof j->res);
  }
  j->next = NULL;
  j->a = a;
  j->apid = a->pid;
  j->iter = p->iter;
  j->seq = a->next_seq++;
  j->step = p->step;
  j->phase = JOB_NEW;
  j->payload = xgr_value_retain(p->payload);
  j->st = NULL;
  j->x = NULL;
  j->t_ready = a->lat ? xgr__mono_ns() : 0;
  xgr_pid_format(a->root, p->iter, j->pid, sizeof j->pid);
  j->sctx = (xgr_step_ctx){.owner = xgr_session_owner(a->s),
                           .session_id = a->root,
                           .pid = j->pid,
                           .step_id = a->b->orch->steps[p->step].id,
                           .api_map = a->e->cfg.api_map,
                           .napi_map = a->e->cfg.napi_map,
                           .chain = a->e->cfg.chain,
                           .outbound = a->e->cfg.outbound};
  a->inflight++;
  return j;
}

static void job_release(job *j) {
  xgr_step_result_free(&j->res);
  xgr_value_release(j->payload);
  j->payload = xgr_value_null();
  xgr_step_state_free(j->st);
  j->st = NULL;
}

static void job_free(actor *a, job *j) {
  job_release(j);
  if (a->nfree < 8) {
    j->next = a->free_jobs;
    a->free_jobs = j;
    a->nfree++;
  } else {
    free(j);
  }
}

/* The TASK handler: evaluate (or finish) a step on a worker. */
void xgr_eng_step_task(void *hctx, const xgr_ctx *ctx, xgr_pid pid, const xgr_cmd *cmd) {
  xgr_engine *e = hctx;
  job *j = cmd->arg;
  const xgr_rule *rule = j->a->b->step_rule[j->step];
  if (j->phase == JOB_NEW) {
    if (xgr_rule_napi_calls(rule) == 0 && (xgr_rule_ncontract_reads(rule) == 0 || !j->sctx.chain)) {
      xgr_step_run(rule, j->payload, &j->sctx, NULL, &j->res);  /* no I/O: nothing to hand over */
    } else {
      j->st = xgr_step_begin(rule, j->payload, &j->sctx);
      if (xgr_step_next_request(j->st)) {
        j->phase = JOB_HTTP;
        xgr_eng_http_submit(e->http, j);
        return;
      }
      xgr_step_finish(j->st, &j->res);
      j->st = NULL;
    }
  } else {
    xgr_step_finish(j->st, &j->res);
    j->st = NULL;
  }
  if (e->cfg.exec && e->cfg.exec->submit && j->res.execution && !j->res.error.code && j->res.action == XGR_ACTION_NONE &&
      e->cfg.exec->submit(e->cfg.exec->ctx, j->sctx.owner, j->sctx.session_id, j->iter, j->sctx.step_id, j->res.execution,
                          &j->res.error)) {
    /* not durable, so never sent: the step fails visibly instead of running without it */
    assert(j->res.error.code);
    j->res.valid = false;
    xgr_value_clear(&j->res.output);
  }
  j->phase = JOB_DONE;
  if (xgr_ctx_complete_yield(ctx, pid, cmd->tag, j, 0)) {
    job_release(j);
    free(j);
  }
}

void xgr_eng_step_drop(void *hctx, xgr_pid pid, const xgr_cmd *cmd) {
  job *j = cmd->arg;
  job_release(j);
  free(j);
}

void xgr_eng_job_http_done(xgr_engine *e, job *j) {
  if (xgr_rt_complete_yield(e->rt, j->apid, j->iter, j, 0)) {
    job_release(j);
    free(j);
  }
}

/* ---- effects ---------------------------------------------------------------------------------- */


static void flush(actor *a, visq *q);

/* A new outbox id: 128 random bits as 32 hex digits (owned by the caller). */
static char *wake_id(void) {
  unsigned char r[16];
  size_t got = 0;
  while (got < sizeof r) {
    ssize_t k = getrandom(r + got, sizeof r - got, 0);
    if (k > 0) got += (size_t)k;
  }
  char *s = xgr__xmalloc(33);
  for (int i = 0; i < 16; i++) snprintf(s + 2 * i, 3, "%02x", r[i]);
  return s;
}

/* The 64-bit key of an outbox id in the `applied` map (its first 16 hex digits; never 0). */
static uint64_t wake_key(const char *id) {
  uint64_t k = 0;
  for (int i = 0; i < 16 && id[i]; i++) k = k << 4 | (uint64_t)(id[i] <= '9' ? id[i] - '0' : (id[i] | 32) - 'a' + 10);
  return k ? k : 1;
}

/* Mark outbox row `id` done in the session's next batch: applied (reason NULL) or refused. */
static void outbox_done(actor *a, const char *id, const char *reason) {
  if (a->nbd == a->capbd) {
    a->capbd = a->capbd ? a->capbd * 2 : 8;
    a->bd = xgr__xrealloc(a->bd, a->capbd * sizeof *a->bd);
    a->bdr = xgr__xrealloc(a->bdr, a->capbd * sizeof *a->bdr);
  }
  a->bdr[a->nbd] = reason ? xgr__xstrdup(reason) : NULL;
  a->bd[a->nbd++] = xgr__xstrdup(id);
  a->touched = true;
}

/* Put the wake-up of effect fe in the batch's outbox rows; returns a copy of its id for the
 * message (owned by the message). */
static char *outbox_put(actor *a, const xgr_effect *fe) {
  if (a->nbw == a->capbw) {
    a->capbw = a->capbw ? a->capbw * 2 : 8;
    a->bw = xgr__xrealloc(a->bw, a->capbw * sizeof *a->bw);
  }
  char *id = wake_id();
  a->bw[a->nbw++] = (xgr_engine_wake){.id = id,
                                      .to_owner = xgr__xstrdup(fe->runner),
                                      .to_root = fe->session_id,
                                      .step = xgr__xstrdup(fe->step_id),
                                      .caller = xgr__xstrdup(xgr_session_owner(a->s)),
                                      .rule = fe->rule_address ? xgr__xstrdup(fe->rule_address) : NULL,
                                      .payload = xgr_value_retain(fe->payload),
                                      .from_iter = fe->proc ? fe->proc->iter : 0,
                                      .from_step = fe->proc ? xgr__xstrdup(a->b->orch->steps[fe->proc->step].id) : NULL};
  return xgr__xstrdup(id);
}

/* Carry out the effects of one core call (they point into the core until the next call). */
static void on_iwake(actor *a, iwake_msg *m);

void xgr_eng_consume(actor *a) {
  xgr_engine *e = a->e;
  /* ordered mode: wake-ups of this session by itself are applied right after the result that
   * sent them, before anything else is promoted (the driver's order; SEMANTICS §5, §6) */
  iwake_msg *self_wakes[16];
  size_t nself = 0;
  if (a->fx.n) a->clock_ms = a->now;   /* a stale timer that changes nothing leaves the clock */
  for (size_t i = 0; i < a->fx.n; i++) {
    xgr_effect *fe = &a->fx.items[i];
    switch (fe->kind) {
      case XGR_FX_RUN_STEP:
        vpush(&a->pend, (vis){.kind = V_DISPATCH, .u.j = job_new(a, fe->proc)});
        break;
      case XGR_FX_PROC:
      case XGR_FX_JOIN:
        if (a->record) xgr_records_proc(a->rec, a->b->orch, fe->proc);
        if (e->has_store && fe->kind == XGR_FX_PROC) xgr_eng_batch_row(a, fe);
        if (wants(a, fe->kind == XGR_FX_PROC ? XGR_EEV_PROC : XGR_EEV_JOIN)) {
          evsnap *s = ev_new(a, fe->kind == XGR_FX_PROC ? XGR_EEV_PROC : XGR_EEV_JOIN, NULL, true);
          xgr_eng_snap_fill(a, &s->p, fe, fe->kind == XGR_FX_JOIN ? SNAP_JOIN_EVENT : SNAP_EVENT);
          s->ev.proc = &s->p;
          push_event(a, s);
        }
        break;
      case XGR_FX_HISTORY:
        if (a->record) xgr_records_hist(a->rec, fe);
        if (e->has_store) xgr_eng_batch_hist(a, fe);
        break;
      case XGR_FX_WAKE: {
        iwake_msg *m = xgr__xmalloc(sizeof *m);
        m->id = e->has_store ? outbox_put(a, fe) : NULL;
        m->caller = xgr__xstrdup(xgr_session_owner(a->s));
        m->from_root = a->root;
        m->from_iter = fe->proc ? fe->proc->iter : 0;
        m->step_id = fe->step_id;
        m->rule_address = fe->rule_address;
        m->payload = fe->payload;
        m->from_step = fe->proc ? xgr__xstrdup(a->b->orch->steps[fe->proc->step].id) : NULL;
        wake_out w = {fe->runner, fe->session_id, m};
        bool self = a->ordered && fe->session_id == a->root && !strcasecmp(fe->runner, xgr_session_owner(a->s));
        fe->runner = fe->step_id = fe->rule_address = NULL;   /* moved */
        fe->payload = xgr_value_null();
        if (self && nself < sizeof self_wakes / sizeof *self_wakes) {   /* delivered below, as the driver does */
          free(w.target_owner);
          self_wakes[nself++] = m;
        } else {
          vpush(&a->pend, (vis){.kind = V_WAKE, .u.w = w});
        }
        break;
      }
      case XGR_FX_FINISHED:
        a->finished = true;
        a->result = fe->result;
        a->batch_finished = true;
        if (wants(a, XGR_EEV_FINISHED)) push_event(a, ev_new(a, XGR_EEV_FINISHED, xgr_session_result_name(fe->result), true));
        break;
    }
  }
  xgr_effects_reset(&a->fx);
  if (!e->has_store) flush(a, &a->pend);
  for (size_t i = 0; i < nself; i++) {   /* a wake produces no further wake-ups: no deeper recursion */
    a->touched = true;
    on_iwake(a, self_wakes[i]);
  }
}

/* With a store (xgrd), the payload a wake-up's target gets is the outbox row's JSON text read back:
 * it shares nothing with the producer's values. Those may hold pinned constants of the producer's
 * bundle (rule payload keys), which are freed with that bundle — and the target may run on another
 * bundle object of the same orchestration (one assembled for a claim or a recovery, "#hash", next to
 * the enqueue's), outliving it. It is also what the target gets when the row is redelivered. */
static void detach_payload(iwake_msg *m) {
  if (xgr_value_kind(m->payload) != XGR_VMAP && xgr_value_kind(m->payload) != XGR_VLIST) return;
  size_t len = 0;
  char *text = xgr_value_to_json_text(m->payload, 0, &len);
  xgr_value v = xgr_value_null();
  xgr_error err;
  if (text && !xgr_value_from_json_text(text, len, 0, &v, &err)) {
    xgr_value_release(m->payload);
    m->payload = v;
  }
  free(text);
}

static void route_wake(actor *a, wake_out *w) {
  xgr_engine *e = a->e;
  if (e->has_store) detach_payload(w->m);
  shard *sh;
  sess_entry *t = xgr_eng_lookup_locked(e, w->target_owner, w->target_root, &sh);
  xgr_pid pid = t ? t->pid : 0;
  pthread_mutex_unlock(&sh->mu);
  if (pid && xgr_eng_send(e, a->ctx, pid, MSG_IWAKE, w->m) == 0) {
    free(w->target_owner);
    return;
  }
  /* a hibernated target is loaded here, on the worker (one store read), so that a target that does
   * not exist is refused below as before: in the outbox, the counter and the producer's history.
   * Not while recovering (for good on a cluster node): then the row stays in the outbox, and xgrd
   * delivers it checked — load the target, read the row again, send only if still pending. A load
   * and send from here could reach a second incarnation after the first had applied the row (the
   * cluster's outbox poll delivers it too, and with hibernation the first may have committed and
   * evicted meanwhile): the wake-up applied twice, a round run twice (test_cluster_hibernate_pg). */
  bool recovering = w->m->id && atomic_load(&e->recovering);
  if (!pid && !recovering && atomic_load(&e->hib.on) && !xgr_eng_hib_load(e, w->target_owner, w->target_root, NULL)) {
    t = xgr_eng_lookup_locked(e, w->target_owner, w->target_root, &sh);
    pid = t ? t->pid : 0;
    pthread_mutex_unlock(&sh->mu);
    if (pid && xgr_eng_send(e, a->ctx, pid, MSG_IWAKE, w->m) == 0) {
      free(w->target_owner);
      return;
    }
  }
  /* nobody will apply it: out of the outbox — unless sessions are still being restored (the target
   * may come back; xgrd then delivers it again from the outbox, and refuses it there if not) */
  if (recovering) {
    xgr_eng_iwake_free(w->m);
    free(w->target_owner);
    return;
  }
  if (w->m->id) outbox_done(a, w->m->id, "no such session here");
  atomic_fetch_add(&e->st_wake_refused, 1);
  if (wants(a, XGR_EEV_WAKE)) {
    char msg[512];
    snprintf(msg, sizeof msg, "wake-up refused: from session %s/%llu to session %s/%llu step %s: no such session here",
             w->m->caller, (unsigned long long)w->m->from_root, w->target_owner, (unsigned long long)w->target_root,
             w->m->step_id ? w->m->step_id : "");
    evsnap *s = ev_new(a, XGR_EEV_WAKE, msg, false);
    deliver(a, s);
    ev_free(s);
  }
  xgr_eng_iwake_free(w->m);
  free(w->target_owner);
}

/* Make a queue of visible effects visible, in order. */
static void flush(actor *a, visq *q) {
  xgr_engine *e = a->e;
  for (size_t i = 0; i < q->n; i++) {
    vis *v = &q->v[i];
    switch (v->kind) {
      case V_DISPATCH:
        xgr_eng_busy_add(e, 1);
        if (xgr_step_yield(a->out, CMD_STEP, v->u.j->iter, v->u.j)) abort();
        break;
      case V_WAKE:
        route_wake(a, &v->u.w);
        break;
      case V_EVENT:
        deliver(a, v->u.ev);
        ev_free(v->u.ev);
        break;
      case V_REPLY:
        if (v->u.r.fn) v->u.r.fn(v->u.r.ctx, v->u.r.rc, v->u.r.msg);
        free(v->u.r.msg);
        break;
    }
  }
  q->n = 0;
}

/* ---- step results ------------------------------------------------------------------------------ */

/* The step's contract reads as JSON text [{"function","to","error"}] (a STEP event's `reads`). */
static char *reads_json(const xgr_step_result *r) {
  json_t *a = json_array();
  for (size_t i = 0; i < r->nreads; i++) {
    const xgr_read_report *rd = &r->reads[i];
    json_t *e = json_object();
    json_object_set_new(e, "function", rd->function ? json_string(rd->function) : json_null());
    json_object_set_new(e, "to", rd->to ? json_string(rd->to) : json_null());
    json_object_set_new(e, "error", rd->error ? json_string(rd->error) : json_null());
    json_array_append_new(a, e);
  }
  char *t = json_dumps(a, JSON_COMPACT);
  json_decref(a);
  return t;
}

static void apply(actor *a, job *j) {
  xgr_engine *e = a->e;
  xgr_outcome_buf ob;
  xgr_step_outcome o;
  xgr_outcome_from_result(&j->res, a->b->step_rule_address[j->step], &ob, &o);
  if (wants(a, XGR_EEV_STEP)) {   /* the step's own outcome payload, which the core's snapshots do not carry */
    evsnap *s = ev_new(a, XGR_EEV_STEP, NULL, !j->res.error.code);
    s->ev.iter = j->iter;
    s->ev.rule_action = (uint8_t)j->res.action;
    s->ev.input = xgr_value_retain(j->res.payload);
    s->ev.output = xgr_value_retain(j->res.output);
    if (a->trace) {   /* what a span of the step needs (src/node/trace.c) */
      s->ev.valid = j->res.valid;
      s->ev.step_id = a->b->orch->steps[j->step].id;
      s->ev.rule_address = a->b->step_rule_address[j->step];
      const xgr_proc *p = xgr_session_find(a->s, j->iter);
      if (p) {
        s->ev.started_at = p->started_at;
        s->ev.parent_iter = p->parent_iter;
        s->ev.group = p->group;
      }
      if (j->res.napi_calls) {
        json_t *calls = xgr_outcome_api_json(&j->res, true);
        s->ev.api = s->api = json_dumps(calls, JSON_COMPACT);
        json_decref(calls);
      }
      if (j->res.nreads) s->ev.reads = s->reads = reads_json(&j->res);
    }
    push_event(a, s);
  }
  size_t fx0 = a->fx.n;
  xgr_session_step_result(a->s, j->iter, &o, a->now, &a->fx, NULL);
  if (j->res.ngrants)   /* a branch's grants take effect with the step's history row (its commit) */
    for (size_t k = fx0; k < a->fx.n; k++)
      if (a->fx.items[k].kind == XGR_FX_HISTORY && a->fx.items[k].proc && a->fx.items[k].proc->iter == j->iter) {
        xgr_eng_grants(a, &j->res, j->step, j->iter);
        break;
      }
  a->inflight--;
  a->steps++;
  if (a->lat) xgr_eng_lat_add(a->lat, xgr__mono_ns() - j->t_ready);
  if (a->slot)   /* only this worker writes its slot */
    atomic_store_explicit(&a->slot->steps, atomic_load_explicit(&a->slot->steps, memory_order_relaxed) + 1,
                          memory_order_relaxed);
  else
    atomic_fetch_add_explicit(&e->st_steps, 1, memory_order_relaxed);
  job_free(a, j);
  xgr_eng_consume(a);
}

static void on_job(actor *a, job *j) {
  if (a->store_failed || a->dropped) {   /* nothing it produces could be committed */
    a->inflight--;
    job_free(a, j);
    return;
  }
  if (j->phase == JOB_FINISH) {   /* its API calls are done: finish the rules on a worker */
    xgr_eng_busy_add(a->e, 1);
    if (xgr_step_yield(a->out, CMD_STEP, j->iter, j)) abort();
    return;
  }
  if (!a->ordered) {
    apply(a, j);
    return;
  }
  uint64_t span = j->seq - a->apply_seq;
  if (span >= a->ringcap) {
    size_t nc = a->ringcap ? a->ringcap : 64;
    while (nc <= span) nc *= 2;
    job **r = xgr__xcalloc(nc, sizeof *r);
    for (size_t i = 0; i < a->ringcap; i++)
      if (a->ring[i]) r[a->ring[i]->seq & (nc - 1)] = a->ring[i];
    free(a->ring);
    a->ring = r;
    a->ringcap = nc;
  }
  a->ring[j->seq & (a->ringcap - 1)] = j;
  for (;;) {
    job **slot = &a->ring[a->apply_seq & (a->ringcap - 1)];
    if (!*slot || (*slot)->seq != a->apply_seq) break;
    job *x = *slot;
    *slot = NULL;
    a->apply_seq++;
    apply(a, x);
  }
}

/* ---- messages ------------------------------------------------------------------------------------ */

void xgr_eng_ctl_free(ctl_msg *m) {
  for (size_t i = 0; i < m->nmap; i++) {
    free(m->map_from[i]);
    free(m->map_to[i]);
  }
  free(m->map_from);
  free(m->map_to);
  free(m->bundle_hash);
  free(m->from_bundle_hash);
  free(m->step);
  free(m->caller);
  free(m->label);
  free(m->actor);
  free(m->permit);
  free(m->batch);
  free(m->node);
  xgr_value_release(m->payload);
  if (m->has_retry) xgr_value_release(m->retry.payload);
  free(m);
}

void xgr_eng_iwake_free(iwake_msg *m) {
  free(m->id);
  free(m->caller);
  free(m->step_id);
  free(m->rule_address);
  free(m->from_step);
  xgr_value_release(m->payload);
  free(m);
}

/* A rootPid or iter as JSON: a number up to 2^53, a decimal string above (JSON numbers are doubles). */
static json_t *u64_json(uint64_t v) {
  if (v <= (UINT64_C(1) << 53)) return json_integer((json_int_t)v);
  char t[24];
  snprintf(t, sizeof t, "%llu", (unsigned long long)v);
  return json_string(t);
}

/* The detail of an audit entry as JSON text (the caller frees): the process (iter > 0), the step,
 * the keys of the payload merged (never its values), how many processes a step-mode wake woke
 * (woken >= 0), and for an internal wake-up the waking session and step (from_owner set) and why
 * it was refused (reason), the batch operation a control action is part of (batch), and the process
 * a retry created (new_iter > 0). NULL when there is nothing to say. */
static char *audit_detail(uint64_t iter, const char *step, xgr_value payload, long woken, const char *from_owner,
                          uint64_t from_root, uint64_t from_iter, const char *from_step, const char *reason,
                          const char *batch, uint64_t new_iter) {
  json_t *d = json_object();
  if (batch) json_object_set_new(d, "batch", json_string(batch));
  if (new_iter) json_object_set_new(d, "newIter", u64_json(new_iter));
  if (iter) json_object_set_new(d, "iter", u64_json(iter));
  if (step) json_object_set_new(d, "step", json_string(step));
  if (xgr_value_kind(payload) == XGR_VMAP) {
    json_t *keys = json_array();
    for (size_t i = 0, n = xgr_map_size(payload); i < n; i++) {
      xgr_value k, v;
      xgr_map_entry(payload, i, &k, &v);
      size_t len;
      const char *ks = xgr_value_kind(k) == XGR_VSTRING ? xgr_value_str(k, &len) : NULL;
      if (ks) json_array_append_new(keys, json_stringn(ks, len));
    }
    json_object_set_new(d, "keys", keys);
  }
  if (woken >= 0) json_object_set_new(d, "woken", json_integer(woken));
  if (from_owner) {
    json_t *f = json_pack("{s:s, s:o}", "owner", from_owner, "rootPid", u64_json(from_root));
    if (from_iter) json_object_set_new(f, "iter", u64_json(from_iter));
    if (from_step) json_object_set_new(f, "step", json_string(from_step));
    json_object_set_new(d, "from", f);
  }
  if (reason) json_object_set_new(d, "reason", json_string(reason));
  char *t = json_object_size(d) ? json_dumps(d, JSON_COMPACT) : NULL;
  json_decref(d);
  return t;
}

static const char *const ctl_audit_kind[] = {[XGR_CTL_KILL] = "kill", [XGR_CTL_PAUSE] = "pause",
                                             [XGR_CTL_RESUME] = "resume", [XGR_CTL_WAKE_PID] = "wake",
                                             [XGR_CTL_WAKE_STEP] = "wake", [XGR_CTL_RETRY] = "retry"};

static void lose_lease(actor *a);

/* ---- migration (issue 36) ------------------------------------------------------------------------------ */

void xgr_eng_ctl_reply(actor *a, ctl_msg *m, int rc, const char *text) {
  vpush(&a->pend, (vis){.kind = V_REPLY, .u.r = {m->done, m->done_ctx, rc, xgr__xstrdup(text ? text : "")}});
  if (!a->e->has_store) flush(a, &a->pend);
  m->done = NULL;
  xgr_eng_ctl_free(m);
}

static void on_ctl(actor *a, ctl_msg *m) {
  if (m->kind == XGR_CTL_MIGRATE && !a->dropped) {
    if (a->mig) {
      xgr_eng_ctl_reply(a, m, XGR_ESTATE, "a migration of this session is waiting for its safe point already");
    } else if (m->caller && strcasecmp(m->caller, xgr_session_owner(a->s))) {
      xgr_eng_ctl_reply(a, m, XGR_EPERM, "only the owner may migrate the session");
    } else {
      a->mig = m;   /* held from now on: end_turn promotes nothing until it ran */
      a->clock_ms = a->now;
    }
    return;
  }
  if (m->kind == XGR_CTL_DROP) {   /* cluster: the lease went elsewhere (xgr_engine_drop) */
    if (!a->dropped) lose_lease(a);
    if (m->done) m->done(m->done_ctx, 0, "dropped");
    m->done = NULL;
    xgr_eng_ctl_free(m);
    return;
  }
  if (a->dropped) {   /* it left this node: the caller routes again (lease.c) */
    if (m->done) m->done(m->done_ctx, XGR_ELEASE, "the session left this node");
    m->done = NULL;
    xgr_eng_ctl_free(m);
    return;
  }
  a->clock_ms = a->now;
  xgr_error err;
  xgr_error_clear(&err);
  int rc;
  size_t woken = 0;
  uint64_t new_iter = 0;
  bool owner_only = m->kind == XGR_CTL_KILL || m->kind == XGR_CTL_PAUSE || m->kind == XGR_CTL_RESUME ||
                    m->kind == XGR_CTL_RETRY;
  if (owner_only && m->caller && strcasecmp(m->caller, xgr_session_owner(a->s))) {
    /* as xgrd: only the owner controls a session (scripted actions name a caller) */
    rc = xgr_error_set(&err, XGR_EPERM, NULL, "%s is not the owner of session %llu; only the owner may %s it",
                       m->caller, (unsigned long long)a->root, m->kind == XGR_CTL_KILL ? "kill"
                       : m->kind == XGR_CTL_PAUSE ? "pause" : m->kind == XGR_CTL_RETRY ? "retry in" : "resume");
  } else switch (m->kind) {
    case XGR_CTL_RETRY: {   /* the decision is the core's; the aborted process's state comes with the
                               call (the store's row) or from the records */
      xgr_retry_of r;
      char pid[48];
      xgr_pid_format(a->root, m->iter, pid, sizeof pid);
      if (m->has_retry) r = m->retry;
      if (!m->has_retry && !(a->record && xgr_records_retry_of(a->rec, m->iter, &r)))
        rc = xgr_error_set(&err, XGR_ENOTFOUND, "pid", "process %s: no record of it is kept", pid);
      else if (!(rc = xgr_session_retry(a->s, &r, m->payload, a->now, &a->fx, &new_iter, &err))) {
        char np[48];
        xgr_pid_format(a->root, new_iter, np, sizeof np);
        snprintf(err.message, sizeof err.message, "retried %s as %s", pid, np);
      }
      break;
    }
    case XGR_CTL_KILL:
      rc = xgr_session_kill(a->s, m->iter, a->now, &a->fx, &err);
      break;
    case XGR_CTL_PAUSE:
    case XGR_CTL_RESUME:
      rc = xgr_session_pause(a->s, m->iter, m->kind == XGR_CTL_PAUSE, a->now, &a->fx, &err);
      break;
    case XGR_CTL_WAKE_PID:
      rc = xgr_session_wake_pid(a->s, m->iter, m->caller, m->payload, a->now, &a->fx, &err);
      break;
    default: {
      int step = xgr_orch_find(a->b->orch, m->step);
      woken = 0;
      rc = step < 0 ? xgr_error_set(&err, XGR_ENOTFOUND, NULL, "no step \"%s\" in the orchestration", m->step)
                    : xgr_session_wake_step(a->s, (unsigned)step, m->caller, XGR_WAKE_RPC, NULL, m->payload, a->now,
                                            &a->fx, &woken, &err);
      if (!rc) snprintf(err.message, sizeof err.message, "woke %zu process%s", woken, woken == 1 ? "" : "es");
      break;
    }
  }
  if (!rc && m->actor && a->e->has_store) {   /* the audit trail: in the commit of the action's changes */
    bool wake = m->kind == XGR_CTL_WAKE_PID || m->kind == XGR_CTL_WAKE_STEP;
    const xgr_proc *p = m->kind == XGR_CTL_WAKE_PID ? xgr_session_find(a->s, m->iter) : NULL;   /* the step it woke at */
    const xgr_proc *np = m->kind == XGR_CTL_RETRY ? xgr_session_find(a->s, new_iter) : NULL;   /* the new process */
    const char *step = m->kind == XGR_CTL_WAKE_STEP ? m->step : p ? a->b->orch->steps[p->step].id
                       : np ? a->b->orch->steps[np->step].id : NULL;
    char *detail = audit_detail(m->kind == XGR_CTL_WAKE_STEP ? 0 : m->iter, step,
                                wake || m->kind == XGR_CTL_RETRY ? m->payload : xgr_value_null(),
                                m->kind == XGR_CTL_WAKE_STEP ? (long)woken : -1, NULL, 0, 0, NULL, NULL, m->batch,
                                np ? new_iter : 0);   /* a retry names the process it created */
    xgr_eng_audit(a, ctl_audit_kind[m->kind], m->actor, m->node, m->permit, detail);
    free(detail);
  }
  xgr_eng_consume(a);
  const char *text = rc ? err.message : err.message[0] ? err.message : "ok";
  if (m->label && a->record)
    xgr_records_action(a->rec, a->now, m->label, rc == 0, text);
  if (wants(a, XGR_EEV_ACTION)) {
    char msg[700];
    snprintf(msg, sizeof msg, "%s: %s", m->label ? m->label : "control", text);
    push_event(a, ev_new(a, XGR_EEV_ACTION, msg, rc == 0));
  }
  vpush(&a->pend, (vis){.kind = V_REPLY, .u.r = {m->done, m->done_ctx, rc, xgr__xstrdup(text ? text : "")}});
  if (!a->e->has_store) flush(a, &a->pend);
  m->done = NULL;
  xgr_eng_ctl_free(m);
}

static void on_iwake(actor *a, iwake_msg *m) {
  if (a->dropped) {   /* its holder delivers it from the outbox */
    xgr_eng_iwake_free(m);
    return;
  }
  if (m->id) {   /* from the outbox: applied at most once, removed with this session's next batch */
    uint64_t k = wake_key(m->id);
    if (xgr__hashmap_get(&a->applied, k)) {
      xgr_eng_iwake_free(m);
      return;
    }
    xgr__hashmap_put(&a->applied, k, (void *)1);
  }
  a->clock_ms = a->now;
  xgr_error err;
  xgr_error_clear(&err);
  size_t woken = 0;
  int step = xgr_orch_find(a->b->orch, m->step_id);
  int rc = step < 0 ? xgr_error_set(&err, XGR_ENOTFOUND, NULL, "no step \"%s\"", m->step_id)
                    : xgr_session_wake_step(a->s, (unsigned)step, m->caller, XGR_WAKE_INTERNAL, m->rule_address, m->payload,
                                            a->now, &a->fx, &woken, &err);
  if (m->id) outbox_done(a, m->id, rc ? err.message : NULL);   /* same batch as its effects */
  if (a->e->has_store) {   /* the audit trail: applied or refused, in the same commit */
    char *detail = audit_detail(0, m->step_id, rc ? xgr_value_null() : m->payload, rc ? -1 : (long)woken, m->caller,
                                m->from_root, m->from_iter, m->from_step, rc ? err.message : NULL, NULL, 0);
    xgr_eng_audit(a, rc ? "wake-refused" : "wake-internal", m->caller, NULL, NULL, detail);
    free(detail);
  }
  xgr_eng_consume(a);
  if (rc) atomic_fetch_add(&a->e->st_wake_refused, 1);
  if (wants(a, XGR_EEV_WAKE)) {
    char msg[1024];
    if (rc)
      snprintf(msg, sizeof msg, "wake-up refused: from session %s/%llu to session %s/%llu step %s: %s", m->caller,
               (unsigned long long)m->from_root, xgr_session_owner(a->s), (unsigned long long)a->root, m->step_id,
               err.message);
    else
      snprintf(msg, sizeof msg, "internal wake-up of session %llu step %s: woken", (unsigned long long)a->root,
               m->step_id);
    evsnap *s = ev_new(a, XGR_EEV_WAKE, msg, rc == 0);
    if (a->trace && m->caller) {
      s->ev.from_owner = s->from_owner = xgr__xstrdup(m->caller);
      s->ev.from_root = m->from_root;
      s->ev.from_iter = m->from_iter;
    }
    push_event(a, s);
    if (!a->e->has_store) flush(a, &a->pend);
  }
  xgr_eng_iwake_free(m);
}

static const char *live_result(actor *a) {
  if (a->finished) return xgr_session_result_name(a->result);
  if (a->idle) return a->limit ? "limit" : "stalled";
  return "running";
}

static void on_report(actor *a, report_msg *m) {
  json_t *r = xgr_records_report(a->record ? a->rec : NULL, a->s, live_result(a), a->steps, a->clock_ms);
  pthread_mutex_lock(&m->mu);
  m->report = r;
  m->done = true;
  pthread_cond_broadcast(&m->cv);
  pthread_mutex_unlock(&m->mu);
}

static void on_message(actor *a, uint64_t tag, void *data) {
  switch (tag) {
    case MSG_TIMER:
      if ((int64_t)(intptr_t)data == a->armed) a->armed = XGR_NEVER;
      break;
    case MSG_CTL:
      a->touched = true;
      on_ctl(a, data);
      break;
    case MSG_IWAKE:
      a->touched = true;
      on_iwake(a, data);
      break;
    case MSG_REPORT:
      on_report(a, data);
      break;
    default:
      break;
  }
}

/* ---- the store ------------------------------------------------------------------------------------ */

/* Tell the starter how the session's first batch went (once; no-op after). */
static void tell_started(actor *a, int err) {
  void (*fn)(void *, int) = a->started_fn;
  a->started_fn = NULL;
  if (fn) fn(a->started_ctx, err);
}

static void store_done(void *token, int err) {
  actor *a = token;
  xgr_rt_complete_yield(a->e->rt, a->pid, TAG_STORE, NULL, err);
}


/* A batch the store refused: nothing it caused may become visible. Steps are not dispatched
 * (the core's promotion is dropped with the actor), wake-ups not sent, events not delivered,
 * control calls answered with the store's error; the session stops (no more promotions; steps
 * already running finish and their batches are refused the same way) and subscribers get one
 * STORE_ERROR event. What was committed before stays committed: a restart on a working store
 * recovers the session from there. */
static void discard_held(actor *a, int err) {
  for (size_t i = 0; i < a->hold.n; i++) {
    vis *v = &a->hold.v[i];
    switch (v->kind) {
      case V_DISPATCH:
        a->inflight--;
        job_release(v->u.j);
        free(v->u.j);
        break;
      case V_WAKE:
        xgr_eng_iwake_free(v->u.w.m);
        free(v->u.w.target_owner);
        break;
      case V_EVENT:
        ev_free(v->u.ev);
        break;
      case V_REPLY:
        if (v->u.r.fn) v->u.r.fn(v->u.r.ctx, err, "the store failed; nothing of this call was kept");
        free(v->u.r.msg);
        break;
    }
  }
  a->hold.n = 0;
  for (size_t i = 0; i < a->ringcap; i++)   /* results waiting for their turn (ordered) */
    if (a->ring[i]) {
      a->inflight--;
      job_free(a, a->ring[i]);
      a->ring[i] = NULL;
    }
}

static void on_commit(actor *a, int err) {
  a->committing = false;
  bool first_batch = a->starting;
  a->starting = false;
  if (first_batch) tell_started(a, err);
  if (a->dropped) return;   /* its effects were discarded when the lease went */
  if (err == XGR_ELEASE || (first_batch && err == XGR_ECONFLICT)) {
    /* a late write: another node holds the session now; or a new session's row found the
     * session in the store (another start won): nothing of this incarnation was written, and
     * nothing of it may become visible — it leaves as after a lost lease */
    lose_lease(a);
    return;
  }
  if (!err) {
    a->stored_due = a->committing_due;
    flush(a, &a->hold);
    return;
  }
  bool first = !a->store_failed;
  a->store_failed = true;
  a->stopping = true;
  discard_held(a, err);
  if (first && wants(a, XGR_EEV_STORE_ERROR)) {
    char msg[160];
    snprintf(msg, sizeof msg, "the store refused a batch (%s); the session stops", xgr_errcode_name(err));
    evsnap *s = ev_new(a, XGR_EEV_STORE_ERROR, msg, false);
    deliver(a, s);
    ev_free(s);
  }
}


static void abort_session(actor *a, bool quota);

/* The batch went over a stored-bytes quota (the hook refused it, writing nothing): the session is
 * aborted and the batch replaced by the abort. Its steps are not dispatched and its wake-ups not
 * sent (their processes are killed); the kill's rows join the batch; then every row of the batch
 * loses its payload and join state — the rows that remain are small (status, times, the reason),
 * so the abort itself cannot fill the disk. */
static void quota_abort(actor *a, const char *reason) {
  snprintf(a->cap_reason, sizeof a->cap_reason, "%s", reason);
  a->over_quota = true;
  size_t k = 0;
  for (size_t i = 0; i < a->pend.n; i++) {
    vis *v = &a->pend.v[i];
    if (v->kind == V_DISPATCH) {
      a->inflight--;
      job_free(a, v->u.j);
    } else if (v->kind == V_WAKE) {
      xgr_eng_iwake_free(v->u.w.m);
      free(v->u.w.target_owner);
    } else {
      a->pend.v[k++] = *v;
    }
  }
  a->pend.n = k;
  xgr_eng_batch_clear_wakes(a);   /* the outbox rows of those wake-ups */
  for (size_t i = 0; i < a->nbp; i++)   /* live join rows borrow a->jtext (xgr_eng_join_rows_fill) */
    if (a->bp[i].is_join && xgr_eng_live_status(a->bp[i].status)) a->bp[i].join_state = NULL;
  if (!a->finished) abort_session(a, true);
  else atomic_fetch_add(&a->e->st_quota, 1);
  for (size_t i = 0; i < a->nbp; i++) {
    xgr_engine_proc *d = &a->bp[i];
    xgr_value_clear(&d->payload);
    if (!(d->is_join && xgr_eng_live_status(d->status))) free((char *)d->join_state);
    d->join_state = NULL;
  }
}

/* Submit the turn's rows, holding back their visible effects; or release them if nothing needs
 * persisting. One batch at a time per session. A batch the hook refuses for a quota is replaced
 * by the session's abort (quota_abort) and that is submitted instead. */
static void store_turn(actor *a) {
  xgr_engine *e = a->e;
  if (a->committing) return;
  if (!a->nbp && !a->nbh && !a->nbw && !a->nbd && !a->nba && !a->nbg && !a->batch_finished && !a->batch_due && !a->pin_hash) {
    flush(a, &a->pend);
    return;
  }
  for (;;) {
    xgr_store_quota q = {.stored_bytes = a->stored_bytes,
                         .max_bytes = e->cfg.max_session_bytes ? e->cfg.max_session_bytes
                                                               : XGR_ENGINE_DEFAULT_MAX_SESSION_BYTES,
                         .abort = a->over_quota};
    xgr_store_batch b = {.owner = xgr_session_owner(a->s), .root_pid = a->root, .orch = a->b->orch, .nprocs = a->nbp,
                         .procs = a->bp, .nhist = a->nbh, .hist = a->bh, .finished = a->batch_finished,
                         .result = a->result, .nwakes = a->nbw, .wakes = a->bw, .ndone = a->nbd,
                         .done = (const char *const *)a->bd, .done_reason = (const char *const *)a->bdr,
                         .due = a->batch_due, .naudit = a->nba, .audit = a->ba, .ngrants = a->nbg, .grants = a->bg, .steps = a->steps, .quota = &q,
                         .pin_ostc_id = a->pin_id, .pin_ostc_hash = a->pin_hash, .pin_bundle_hash = a->pin_bundle};
    xgr_eng_join_rows_fill(a);
    xgr_session_state st;
    xgr_session_state_get(a->s, &st);
    b.next_iter = st.next_iter;
    b.next_group = st.next_group;
    b.paused = st.paused;
    if (a->new_row) {   /* the session's first batch: its row, if the store has none */
      b.session_new = true;
      b.registry = a->registry;
      b.max_total_gas = a->max_total_gas;
      b.bundle_hash = a->bundle_hash;
      b.fork = a->fork;
    }
    int rc = e->store.submit(e->store.ctx, &b, store_done, a);
    if (rc == XGR_ELIMIT && !q.abort) {   /* nothing of it was written: the abort replaces it */
      quota_abort(a, q.reason[0] ? q.reason : "session aborted: a stored-bytes quota was exceeded");
      continue;
    }
    if (!rc) a->stored_bytes = q.stored_bytes;
    if (a->new_row) {
      a->new_row = false;
      a->starting = true;
    }
    visq t = a->hold;
    a->hold = a->pend;
    a->pend = t;
    a->pend.n = 0;
    a->committing = true;
    a->committing_due = a->batch_due;
    atomic_fetch_add_explicit(&e->st_batches, 1, memory_order_relaxed);
    xgr_eng_busy_add(e, 1);
    xgr_eng_batch_clear(a);
    free(a->pin_id);
    free(a->pin_hash);
    free(a->pin_bundle);
    a->pin_id = a->pin_hash = a->pin_bundle = NULL;
    if (rc) store_done(a, rc);
    return;
  }
}

/* ---- the turn ---------------------------------------------------------------------------------------- */

static void publish(actor *a) {
  pthread_mutex_lock(&a->ent->mu);   /* the entry's own lock, not the shard's (engine_impl.h) */
  xgr_engine_session_info *in = &a->ent->info;
  in->result = a->finished ? a->result : XGR_RESULT_RUNNING;
  in->finished = a->completed && a->finished;
  in->idle = a->idle;
  in->live = xgr_session_live(a->s);
  in->running = xgr_session_running(a->s);
  in->steps = a->steps;
  in->now = a->now;
  pthread_mutex_unlock(&a->ent->mu);
}

static void complete(actor *a) {
  xgr_engine *e = a->e;
  a->completed = true;
  if (a->lat) {
    pthread_mutex_lock(&e->lat_mu);
    xgr_eng_lat_merge(&e->lat, a->lat);
    pthread_mutex_unlock(&e->lat_mu);
  }
  json_t *rep = NULL;
  if (a->finished && e->cfg.keep_finished)
    rep = xgr_records_report(a->record ? a->rec : NULL, a->s, xgr_session_result_name(a->result), a->steps, a->clock_ms);
  shard *sh = xgr_eng_shard(e, a->root);
  pthread_mutex_lock(&sh->mu);
  a->ent->report = rep;
  /* "finished" is published with the report in place, under the shard lock readers hold: a
   * waiter that sees it finds the report (publishing first left a window where it did not) */
  publish(a);
  a->ent->pid = 0;
  a->ent->gone = true;
  if (!a->finished || e->cfg.keep_finished) {
    a->ent = NULL;                      /* stays in the registry; freed with the engine */
  } else {
    xgr_eng_unlink_locked(sh, a->ent);   /* the actor frees the entry when it closes */
    a->ent_unlinked = true;
  }
  pthread_mutex_unlock(&sh->mu);
  if (a->finished) atomic_fetch_add(&e->st_finished, 1);
  atomic_fetch_sub(&e->live_actors, 1);
  xgr_eng_notify_waiters(e);
}

/* Abort the session for a cap or a quota: the reason goes on its aborted processes (xgr_eng_snap_fill) and
 * in an ACTION event; counted in sessions_capped (caps) or sessions_over_quota (quotas). */
static void abort_session(actor *a, bool quota) {
  xgr_engine *e = a->e;
  atomic_fetch_add(quota ? &e->st_quota : &e->st_capped, 1);
  xgr_error err;
  xgr_error_clear(&err);
  xgr_session_kill(a->s, 0, a->now, &a->fx, &err);
  if (wants(a, XGR_EEV_ACTION)) push_event(a, ev_new(a, XGR_EEV_ACTION, a->cap_reason, false));
  xgr_eng_consume(a);
}

/* This session's live processes into its owner's count (xgr_engine_config.max_owner_processes);
 * returns how many it added (negative: fewer now). */
static int64_t count_live(actor *a) {
  int64_t live = a->s ? (int64_t)xgr_session_live(a->s) : 0;
  int64_t d = live - a->live_counted;
  if (d) atomic_fetch_add(&a->ol->live, d);
  a->live_counted = live;
  return d;
}

/* The per-session caps (xgr_engine_config.max_live, max_session_steps) and the owner's
 * live-process quota (max_owner_processes): kill the session once it exceeds one — for the
 * owner's quota, the session whose growth took the owner over it — with the reason on its
 * aborted processes and in an ACTION event. */
static void check_caps(actor *a) {
  xgr_engine *e = a->e;
  if (a->cap_reason[0] || a->finished || !a->s) {
    count_live(a);
    return;
  }
  uint64_t max_live = e->cfg.max_live ? e->cfg.max_live : XGR_ENGINE_DEFAULT_MAX_LIVE;
  uint64_t max_steps = e->cfg.max_session_steps ? e->cfg.max_session_steps : XGR_ENGINE_DEFAULT_MAX_SESSION_STEPS;
  uint64_t max_owner = e->cfg.max_owner_processes ? e->cfg.max_owner_processes : XGR_ENGINE_DEFAULT_MAX_OWNER_PROCESSES;
  size_t live = xgr_session_live(a->s);
  bool grew = count_live(a) > 0;
  int64_t olive = atomic_load(&a->ol->live);
  bool quota = false;
  if (live > max_live) {
    snprintf(a->cap_reason, sizeof a->cap_reason,
             "session aborted: %zu live processes exceed the cap of %llu per session", live,
             (unsigned long long)max_live);
  } else if (a->steps > max_steps) {
    snprintf(a->cap_reason, sizeof a->cap_reason, "session aborted: %llu steps exceed the cap of %llu per session",
             (unsigned long long)a->steps, (unsigned long long)max_steps);
  } else if (grew && olive > 0 && (uint64_t)olive > max_owner) {
    snprintf(a->cap_reason, sizeof a->cap_reason,
             "session aborted: its owner's %lld live processes exceed the quota of %llu per owner",
             (long long)olive, (unsigned long long)max_owner);
    quota = true;
  } else {
    return;
  }
  abort_session(a, quota);
  count_live(a);
}

/* The actor is done here: its latency figures join the engine's and its registry entry goes
 * (freed when the actor closes), so a load or a claim finds no incarnation. Eviction and a lost
 * lease both end so; the caller counts the live actor down. */
static void leave_registry(actor *a) {
  xgr_engine *e = a->e;
  a->completed = true;
  if (a->lat) {
    pthread_mutex_lock(&e->lat_mu);
    xgr_eng_lat_merge(&e->lat, a->lat);
    pthread_mutex_unlock(&e->lat_mu);
  }
  shard *sh = xgr_eng_shard(e, a->root);
  pthread_mutex_lock(&sh->mu);
  a->ent->pid = 0;
  a->ent->gone = true;
  xgr_eng_unlink_locked(sh, a->ent);   /* freed when the actor closes */
  a->ent_unlinked = true;
  pthread_mutex_unlock(&sh->mu);
}

/* Leave memory: every change is committed and the store holds due. Only when the hibernation
 * thread has not looked at due yet (hibernate.c), checked and unlinked under its mutex; false:
 * stay (the timer is armed as usual). Messages that still reach the actor are handed back to the
 * engine by actor_discard. */
static bool evict(actor *a, int64_t due) {
  xgr_engine *e = a->e;
  hib_state *h = &e->hib;
  pthread_mutex_lock(&h->mu);
  if (h->stop || (due != INT64_MAX && due <= h->upto)) {
    pthread_mutex_unlock(&h->mu);
    return false;
  }
  a->evicted = true;
  leave_registry(a);
  pthread_mutex_unlock(&h->mu);
  atomic_fetch_add(&h->evicted, 1);
  atomic_fetch_sub(&e->live_actors, 1);
  xgr_eng_notify_waiters(e);
  return true;
}

/* Cluster: the lease went to another node. Nothing of this session may become visible here any
 * more: the held and pending effects are discarded (replies get XGR_ELEASE), the batch being
 * built is forgotten; end_turn unlinks the actor once no batch is in flight (drop_now). */
static void lose_lease(actor *a) {
  a->dropped = true;
  a->stopping = true;
  discard_held(a, XGR_ELEASE);
  visq t = a->hold;
  a->hold = a->pend;
  a->pend = t;
  discard_held(a, XGR_ELEASE);
  xgr_eng_batch_clear(a);
}

/* Leave the registry (as evict does, without its conditions) once no batch is in flight: from then
 * on a claim here may load the session again and control calls find the new incarnation. The actor
 * itself closes when the steps still running have come back (on_job drops their results): they
 * read its bundle and core. */
static void drop_now(actor *a) {
  xgr_engine *e = a->e;
  leave_registry(a);
  atomic_fetch_sub(&e->live_actors, 1);
  xgr_eng_notify_waiters(e);
}

static void end_turn(actor *a) {
  xgr_engine *e = a->e;
  if (a->dropped) {   /* cluster: leave once no batch is in flight (its refusal comes back first) */
    if (!a->committing && !a->ent_unlinked) drop_now(a);
    a->out->status = !a->committing && a->inflight == 0 ? XGR_STEP_COMPLETE : XGR_STEP_IDLE;
    return;
  }
  check_caps(a);
  xgr_eng_migrate_try(a);
  if (!a->stopping && !a->finished && !a->limit && !a->mig) {   /* a waiting migration holds the session */
    size_t max = SIZE_MAX;
    if (a->max_steps) max = a->promoted < a->max_steps ? a->max_steps - a->promoted : 0;
    if (a->serial && max) max = a->inflight ? 0 : 1;
    if (max) {
      size_t k = xgr_session_promote(a->s, a->now, max, &a->fx);
      a->promoted += k;
      if (k) xgr_eng_consume(a);
    }
    if (a->max_steps && a->promoted >= a->max_steps) a->limit = true;
  }
  int64_t due = XGR_NEVER;
  if (!a->stopping && !a->finished && !a->limit) due = xgr_session_next_due(a->s);
  /* hibernation: nothing runs and nothing is due within the horizon; the batch says so */
  int64_t sdue = due == XGR_NEVER ? INT64_MAX : due;
  bool may_sleep = atomic_load_explicit(&e->hib.on, memory_order_relaxed) && !a->record && !a->max_steps &&
                   !a->stopping && !a->finished && !a->limit && !a->store_failed && a->inflight == 0 &&
                   xgr_session_running(a->s) == 0 && (due == XGR_NEVER || due > a->now + e->hib.cfg.after_ms);
  if (may_sleep && !a->committing && a->stored_due != sdue) a->batch_due = sdue;
  if (a->limit && !a->finished && a->inflight == 0) {   /* the step limit stopped the session */
    a->finished = true;
    a->result = XGR_RESULT_LIMIT;
    a->batch_finished = true;
    if (wants(a, XGR_EEV_FINISHED)) push_event(a, ev_new(a, XGR_EEV_FINISHED, "limit", true));
    if (!e->has_store) flush(a, &a->pend);
  }
  if (e->has_store) store_turn(a);
  if (may_sleep && !a->committing && a->pend.n == 0 && a->hold.n == 0 && a->stored_due == sdue) {
    if (a->mono >= a->sleep_after_ns) {
      if (evict(a, sdue)) {
        a->out->status = XGR_STEP_COMPLETE;
        return;
      }
    } else {   /* loaded a moment ago: come back when the grace ends */
      int64_t t = xgr_eng_now_at(e, a->sleep_after_ns) + 1;
      if (t < a->armed) {
        xgr_eng_timer_add(e, a->slot, t, a->pid);
        a->armed = t;
      }
    }
  }
  if (due != XGR_NEVER && due > a->now && due < a->armed) {
    xgr_eng_timer_add(e, a->slot, due, a->pid);
    a->armed = due;
  }
  bool was_idle = a->idle;
  a->idle = !a->finished && a->inflight == 0 && !a->committing &&
            (a->stopping || a->limit || due == XGR_NEVER || (due <= a->now && xgr_session_running(a->s) == 0));
  if (a->idle && wants(a, XGR_EEV_IDLE) && (!was_idle || a->touched)) {
    evsnap *s = ev_new(a, XGR_EEV_IDLE, NULL, true);
    deliver(a, s);
    ev_free(s);
  }
  a->touched = false;
  if ((a->finished || a->stopping) && a->inflight == 0 && !a->committing && a->pend.n == 0) {
    a->out->status = XGR_STEP_COMPLETE;
    complete(a);
    return;
  }
  publish(a);
  if (a->idle && atomic_load_explicit(&e->waiters, memory_order_relaxed)) xgr_eng_notify_waiters(e);
  a->out->status = XGR_STEP_IDLE;
}

static int actor_step(void *self, const xgr_ctx *ctx, const xgr_event *ev, size_t n, xgr_step_out *out) {
  actor *a = self;
  xgr_engine *e = a->e;
  a->ctx = ctx;
  a->out = out;
  a->mono = xgr__mono_ns();
  a->now = xgr_eng_now_at(e, a->mono);
  a->slot = xgr_eng_wslot(e, ctx);
  interest(a);
  long owed = 0, nctl = 0;
  if (!a->started) {
    a->started = true;
    owed++;
    first_turn(a);
    xgr_eng_consume(a);
  }
  for (size_t i = 0; i < n; i++) {
    switch (ev[i].type) {
      case XGR_EV_YIELD:
        owed++;
        if (ev[i].tag == TAG_STORE) on_commit(a, ev[i].err);
        else on_job(a, ev[i].data);
        break;
      case XGR_EV_MESSAGE:
        owed++;
        nctl += ev[i].tag == MSG_CTL;
        on_message(a, ev[i].tag, ev[i].data);
        break;
      case XGR_EV_CANCEL:
        a->stopping = true;
        break;
    }
  }
  end_turn(a);
  if (nctl) atomic_fetch_sub(&e->ctl_inflight, nctl);
  xgr_eng_busy_add(e, -owed);
  xgr_eng_timers_poll(e, a->slot, ctx, a->now, a->mono);   /* this worker's due timers */
  return 0;
}

static void actor_discard(void *self, xgr_event *ev) {
  actor *a = self;
  if (ev->type == XGR_EV_CANCEL) return;
  xgr_eng_busy_add(a->e, -1);
  if (ev->type == XGR_EV_YIELD) {
    if (ev->tag != TAG_STORE && ev->data) {
      job_release(ev->data);
      free(ev->data);
    }
    return;
  }
  switch (ev->tag) {
    case MSG_CTL: {
      ctl_msg *m = ev->data;
      atomic_fetch_sub(&a->e->ctl_inflight, 1);
      if (a->evicted && xgr_eng_hib_defer(a->e, MSG_CTL, m->owner, m->root, m)) break;   /* load it again */
      if (m->done) m->done(m->done_ctx, XGR_ENOTFOUND, "the session has ended");
      xgr_eng_ctl_free(m);
      break;
    }
    case MSG_IWAKE: {
      /* one from the outbox that this incarnation applied (its removal is committed: it evicted)
       * is not handed on: the next incarnation would apply it again (a cluster node's outbox
       * poll may deliver a row twice) */
      const iwake_msg *im = ev->data;
      bool done = im->id && xgr__hashmap_get(&a->applied, wake_key(im->id));
      /* while recovering (a cluster node) one from the outbox is left to xgrd's checked delivery
       * (see route_wake): handed on unchecked it could reach an incarnation loaded after another
       * applied it */
      bool outbox_only = im->id && atomic_load(&a->e->recovering);
      if (a->evicted && !done && !outbox_only &&
          xgr_eng_hib_defer(a->e, MSG_IWAKE, xgr_session_owner(a->s), a->root, ev->data))
        break;
      xgr_eng_iwake_free(ev->data);
      break;
    }
    case MSG_REPORT: {
      report_msg *m = ev->data;
      pthread_mutex_lock(&m->mu);
      m->done = true;
      pthread_cond_broadcast(&m->cv);
      pthread_mutex_unlock(&m->mu);
      break;
    }
    default:
      break;
  }
}

static int actor_init(void *self, const xgr_ctx *ctx, const char *method, void *input, xgr_error *err) {
  actor *a = self;
  a->pid = ctx->self;
  shard *sh = xgr_eng_shard(a->e, a->root);
  pthread_mutex_lock(&sh->mu);
  a->ent->pid = ctx->self;
  pthread_mutex_unlock(&sh->mu);
  return 0;
}

static void actor_close(void *self) { xgr_eng_actor_free(self); }

const xgr_process_vt xgr_eng_actor_vt = {
  .name = "session",
  .init = actor_init,
  .step = actor_step,
  .close = actor_close,
  .discard = actor_discard,
};

actor *xgr_eng_actor_new(xgr_engine *e, sess_entry *ent, const xgr_bundle *b, const xgr_engine_start *req,
                         xgr_error *err) {
  int step = req->restore ? 0 : xgr_orch_find(b->orch, req->start);
  if (step < 0) {
    xgr_error_set(err, XGR_ENOTFOUND, "start", "start step \"%s\" is not a step of the orchestration", req->start);
    return NULL;
  }
  actor *a = xgr__xcalloc(1, sizeof *a);
  a->e = e;
  a->ent = ent;
  a->b = b;
  a->bundle_done = req->bundle != NULL;
  a->root = req->root_pid;
  a->s = req->restore;   /* else made on the first turn (first_turn) */
  xgr_effects_init(&a->fx);
  if (req->restore_fx) {   /* a restored core's pending effects: consumed by the first turn */
    a->fx = *req->restore_fx;
    xgr_effects_init(req->restore_fx);
  }
  a->armed = XGR_NEVER;
  a->record = req->record;
  interest(a);
  a->ordered = e->cfg.ordered;
  /* A result that wakes a sibling must reach it before the sibling is promoted, as on the
   * deterministic driver (SEMANTICS §6): with wake-ups in the bundle, ordered mode runs one step
   * at a time; without, promoting every due process at once gives the same results. */
  for (size_t i = 0; a->ordered && i < b->orch->nsteps && !a->serial; i++)
    a->serial = b->step_rule[i] && xgr_rule_nwakeups(b->step_rule[i]) > 0;
  a->max_steps = req->max_steps;
  if (!req->restore) {
    a->new_row = e->has_store;
    a->registry = xgr__xstrdup(req->registry ? req->registry : "");
    a->max_total_gas = req->max_total_gas ? xgr__xstrdup(req->max_total_gas) : NULL;
    a->bundle_hash = req->bundle_hash ? xgr__xstrdup(req->bundle_hash) : NULL;
    a->fork = xgr_eng_fork_dup(req->fork);
    a->started_fn = req->started;
    a->started_ctx = req->started_ctx;
  }
  a->stored_due = req->restore ? req->stored_due : 0;
  a->steps = req->restore ? req->steps : 0;   /* the cap counts across eviction and loading */
  a->stored_bytes = req->restore ? req->stored_bytes : 0;   /* so does the stored-bytes quota */
  a->ol = xgr_eng_owner_ref(e, req->owner ? req->owner : "");
  if (req->restore) a->sleep_after_ns = xgr__mono_ns() + HIB_GRACE_NS;
  a->result = XGR_RESULT_RUNNING;
  if (a->record) a->rec = xgr_records_new();
  a->mono = xgr__mono_ns();
  a->now = a->clock_ms = xgr_eng_now_at(e, a->mono);
  if (!req->restore) {
    a->need_start = true;
    a->start_step = (unsigned)step;
    a->start_payload = xgr_value_retain(req->payload);
    a->start_now = a->now;
    a->start_at = req->start_at;
  }
  return a;
}

/* The first turn: allocations that live as long as the session are made here, on a worker. */
static void first_turn(actor *a) {
  xgr_engine *e = a->e;
  if (e->cfg.measure_latency) {
    a->lat = xgr__xcalloc(1, sizeof *a->lat);
  }
  if (!a->need_start) return;
  a->need_start = false;
  xgr_session_config sc = {.max_running = e->cfg.max_running};
  a->s = xgr_session_new(a->b->orch, a->ent->owner, a->root, &sc);
  xgr_error err;
  /* the step index was checked by xgr_eng_actor_new and the core is new: this cannot fail */
  int64_t wake_at = a->start_at > a->start_now ? a->start_at : a->start_now;
  if (xgr_session_start_at(a->s, a->start_step, a->start_payload, a->start_now, wake_at, &a->fx, &err)) abort();
  xgr_value_clear(&a->start_payload);
  if (!e->has_store) tell_started(a, 0);   /* nothing to commit */
}

void xgr_eng_actor_free(actor *a) {
  if (!a) return;
  /* effects of a session that never ran (start failed, or shutdown before its first turn) */
  for (size_t i = 0; i < a->pend.n; i++) {
    vis *v = &a->pend.v[i];
    if (v->kind == V_DISPATCH) {
      job_release(v->u.j);
      free(v->u.j);
    } else if (v->kind == V_WAKE) {
      xgr_eng_iwake_free(v->u.w.m);
      free(v->u.w.target_owner);
    } else if (v->kind == V_EVENT) {
      ev_free(v->u.ev);
    } else {
      if (v->u.r.fn) v->u.r.fn(v->u.r.ctx, XGR_ESTATE, "the engine stopped");
      free(v->u.r.msg);
    }
  }
  free(a->pend.v);
  free(a->hold.v);
  xgr_eng_batch_clear(a);
  free(a->bp);
  free(a->jtext);
  free(a->bh);
  free(a->bw);
  free(a->bd);
  free(a->bdr);
  free(a->ba);
  free(a->bg);
  xgr__hashmap_free(&a->applied);
  while (a->free_jobs) {
    job *j = a->free_jobs;
    a->free_jobs = j->next;
    free(j);
  }
  for (size_t i = 0; i < a->ringcap; i++)
    if (a->ring[i]) {
      job_release(a->ring[i]);
      free(a->ring[i]);
    }
  free(a->ring);
  xgr_effects_free(&a->fx);
  xgr_records_free(a->rec);
  free(a->lat);
  xgr_value_release(a->start_payload);
  tell_started(a, XGR_ESTATE);   /* stopped before its first batch was committed */
  xgr_eng_row_fields_free(a);
  xgr_session_free(a->s);
  if (a->mig) {
    if (a->mig->done) a->mig->done(a->mig->done_ctx, XGR_ESTATE, "the session stopped before its migration");
    xgr_eng_ctl_free(a->mig);
  }
  free(a->pin_id);
  free(a->pin_hash);
  free(a->pin_bundle);
  xgr_eng_owner_unref(a->e, a->ol, a->live_counted);
  if (a->ent && a->ent_unlinked) {   /* unlinked from the registry at completion */
    json_decref(a->ent->report);
    xgr_eng_entry_free(a->ent);
  }
  xgr_engine *e = a->e;
  const xgr_bundle *b = a->bundle_done ? a->b : NULL;
  const xgr_bundle **prev = a->prev_b;
  size_t nprev = a->nprev_b;
  free(a);
  if (b && e->cfg.bundle_done) e->cfg.bundle_done(e->cfg.bundle_ctx, b);   /* last: nothing uses it now */
  for (size_t i = 0; i < nprev; i++)
    if (e->cfg.bundle_done) e->cfg.bundle_done(e->cfg.bundle_ctx, prev[i]);
  free(prev);
}
