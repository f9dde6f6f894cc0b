/* actor_batch.c — the store batch of a session actor's turn (actor_impl.h): snapshots of the
 * core's processes as rows (and as events), history rows, the texts of the live join targets'
 * states, and emptying the batch once it was handed to the store; a new row's fields (with a
 * fork's record). The actor's turn is the only caller, so nothing here locks.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "engine/actor_impl.h"
#include "util/alloc.h"

/* ---- snapshots -------------------------------------------------------------------------------- */

void xgr_eng_snap_fill(actor *a, xgr_engine_proc *d, const xgr_effect *fe, snap_use use) {
  const xgr_proc *p = fe->proc;
  const xgr_orch *o = a->b->orch;
  memset(d, 0, sizeof *d);
  d->iter = p->iter;
  d->parent_iter = p->parent_iter;
  d->step = p->step;
  d->step_id = o->steps[p->step].id;
  d->status = fe->status;
  d->abort_reason = p->abort_reason;
  d->paused = p->paused;
  d->valid = fe->valid;
  d->group = p->group;
  d->from_group = p->from_group;
  d->next_wake_at = p->next_wake_at;
  d->created_at = p->created_at;
  d->started_at = p->started_at;
  d->finished_at = p->finished_at;
  d->payload = xgr_value_retain(p->payload);
  d->error = p->error ? xgr__xstrdup(p->error)
             : a->cap_reason[0] && fe->status == XGR_PROC_ABORTED && p->abort_reason == XGR_ABORT_KILL
                 ? xgr__xstrdup(a->cap_reason)
                 : NULL;
  if (p->join) {
    d->is_join = true;
    d->join_closed = p->join->closed;
    d->join_policy = (uint8_t)p->join->decl->policy;
    d->join_outcome = (uint8_t)p->join->outcome;
    d->join = use == SNAP_JOIN_EVENT && a->join_tree ? xgr_join_state_json(o, p->join) : NULL;
    /* a live target's row gets its text when the batch is submitted (batch_row, join_rows_fill) */
    d->join_state = use == SNAP_ROW && !xgr_eng_live_status(fe->status) ? xgr_session_join_to_json(o, p->join) : NULL;
  }
}

void xgr_eng_snap_release(xgr_engine_proc *d) {
  xgr_value_release(d->payload);
  free((char *)d->error);
  json_decref((json_t *)d->join);
  free((char *)d->join_state);
}

/* A process's row in the turn's batch. A join target's row carries its join text, the longest part
 * of a row and one that changes with every piece (an n-way join gets n rows in a fan-out): the
 * batch keeps one row per target, its last (what the store keeps of several rows of a process),
 * and a live target's text is written once, when the batch is submitted (join_rows_fill). The core
 * changes a target only with a PROC effect for it (deliveries, decisions), so its state then is
 * what its last row showed. */
void xgr_eng_batch_row(actor *a, const xgr_effect *fe) {
  if (fe->proc->join)
    for (size_t i = a->nbp; i-- > 0;)
      if (a->bp[i].iter == fe->proc->iter) {   /* an earlier row of this target: the new one replaces it */
        assert(xgr_eng_live_status(a->bp[i].status) && !a->bp[i].join_state);
        xgr_eng_snap_release(&a->bp[i]);
        memmove(&a->bp[i], &a->bp[i + 1], (a->nbp - i - 1) * sizeof *a->bp);
        a->nbp--;
        break;
      }
  if (a->nbp == a->capbp) {
    a->capbp = a->capbp ? a->capbp * 2 : 16;
    a->bp = xgr__xrealloc(a->bp, a->capbp * sizeof *a->bp);
  }
  xgr_eng_snap_fill(a, &a->bp[a->nbp++], fe, SNAP_ROW);
}

void xgr_eng_batch_hist(actor *a, const xgr_effect *fe) {
  if (a->nbh == a->capbh) {
    a->capbh = a->capbh ? a->capbh * 2 : 16;
    a->bh = xgr__xrealloc(a->bh, a->capbh * sizeof *a->bh);
  }
  a->bh[a->nbh++] = (xgr_engine_hist){fe->proc->iter, fe->proc->step, fe->status, fe->valid, fe->at,
                                      fe->api ? xgr__xstrdup(fe->api) : NULL};   /* freed by xgr_eng_batch_clear */
}

/* Write the join texts of the batch's live join targets (see xgr_eng_batch_row) into a->jtext, one after
 * the other, and point their rows at them. The buffer stays with the actor, so a join's rows cost
 * no allocation once it has the size of the largest. */
void xgr_eng_join_rows_fill(actor *a) {
  size_t need;
  for (int pass = 0; pass < 2; pass++) {   /* a second pass only when the buffer had to grow */
    need = 0;
    for (size_t i = 0; i < a->nbp; i++) {
      xgr_engine_proc *d = &a->bp[i];
      if (!d->is_join || !xgr_eng_live_status(d->status)) continue;
      const xgr_proc *p = xgr_session_find(a->s, d->iter);
      assert(p && p->join);   /* live: a later change of it would have replaced this row */
      bool room = need < a->jcap;
      need += xgr_session_join_write(a->b->orch, p->join, room ? a->jtext + need : NULL, room ? a->jcap - need : 0) + 1;
    }
    if (need <= a->jcap) break;
    assert(pass == 0);
    a->jcap = need + need / 2;
    a->jtext = xgr__xrealloc(a->jtext, a->jcap);
  }
  size_t off = 0;
  for (size_t i = 0; i < a->nbp; i++) {
    xgr_engine_proc *d = &a->bp[i];
    if (!d->is_join || !xgr_eng_live_status(d->status)) continue;
    d->join_state = a->jtext + off;
    off += strlen(a->jtext + off) + 1;
  }
}

void xgr_eng_batch_clear_wakes(actor *a) {
  for (size_t i = 0; i < a->nbw; i++) {
    xgr_engine_wake *w = &a->bw[i];
    free((char *)w->id);
    free((char *)w->to_owner);
    free((char *)w->step);
    free((char *)w->caller);
    free((char *)w->rule);
    free((char *)w->from_step);
    xgr_value_release(w->payload);
  }
  a->nbw = 0;
}

void xgr_eng_audit(actor *a, const char *kind, const char *actor_name, const char *node, const char *permit,
                   const char *detail) {
  assert(a->e->has_store && kind && actor_name);
  if (a->nba == a->capba) {
    a->capba = a->capba ? a->capba * 2 : 2;
    a->ba = xgr__xrealloc(a->ba, a->capba * sizeof *a->ba);
  }
  a->ba[a->nba++] = (xgr_engine_audit){.kind = xgr__xstrdup(kind),
                                       .actor = xgr__xstrdup(actor_name),
                                       .node = xgr__xstrdup(node ? node : a->e->cfg.node_name),
                                       .permit = permit ? xgr__xstrdup(permit) : NULL,
                                       .detail = detail ? xgr__xstrdup(detail) : NULL,
                                       .session_at = a->now};
  a->touched = true;
}

void xgr_eng_grants(actor *a, const xgr_step_result *r, uint16_t step, uint64_t iter) {
  if (!a->e->has_store) return;
  const char *rule = a->b->step_rule_address[step];
  const char *step_id = a->b->orch->steps[step].id;
  for (size_t i = 0; i < r->ngrants; i++) {
    const xgr_grant *g = &r->grants[i];
    if (!g->rights || !g->address) continue;
    if (a->nbg == a->capbg) {
      a->capbg = a->capbg ? a->capbg * 2 : 2;
      a->bg = xgr__xrealloc(a->bg, a->capbg * sizeof *a->bg);
    }
    uint32_t days = g->expire_days ? g->expire_days : XGR_ENGINE_DEFAULT_GRANT_DAYS;
    char *grantee = xgr__xstrdup(g->address);
    for (char *c = grantee; *c; c++)
      if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
    xgr_engine_grant *x = &a->bg[a->nbg++];
    *x = (xgr_engine_grant){.grantee = grantee, .rights = g->rights & 7u,
                            .expires_at = a->now + (int64_t)days * 86400000,
                            .rule = rule ? xgr__xstrdup(rule) : NULL, .step = xgr__xstrdup(step_id)};
    char detail[256];
    snprintf(detail, sizeof detail,
             "{\"grantee\":\"%.42s\",\"rights\":%u,\"expiresAt\":%lld,\"step\":\"%.64s\",\"iter\":%llu,\"source\":\"branch\"}",
             grantee, x->rights, (long long)x->expires_at, step_id, (unsigned long long)iter);
    xgr_eng_audit(a, "grant", rule ? rule : xgr_session_owner(a->s), NULL, NULL, detail);
  }
}

void xgr_eng_batch_clear(actor *a) {
  for (size_t i = 0; i < a->nbp; i++) {
    if (a->bp[i].is_join && xgr_eng_live_status(a->bp[i].status)) a->bp[i].join_state = NULL;   /* borrowed: a->jtext */
    xgr_eng_snap_release(&a->bp[i]);
  }
  for (size_t i = 0; i < a->nbh; i++) free((char *)a->bh[i].api);
  xgr_eng_batch_clear_wakes(a);
  for (size_t i = 0; i < a->nbd; i++) {
    free(a->bd[i]);
    free(a->bdr[i]);
  }
  a->nbd = 0;
  for (size_t i = 0; i < a->nba; i++) {
    xgr_engine_audit *x = &a->ba[i];
    free((char *)x->kind);
    free((char *)x->actor);
    free((char *)x->node);
    free((char *)x->permit);
    free((char *)x->detail);
  }
  a->nba = 0;
  for (size_t i = 0; i < a->nbg; i++) {
    free((char *)a->bg[i].grantee);
    free((char *)a->bg[i].rule);
    free((char *)a->bg[i].step);
  }
  a->nbg = 0;
  a->nbp = a->nbh = 0;
  a->batch_finished = false;
  a->batch_due = 0;
}

/* ---- the new row's fields ---------------------------------------------------------------------- */

static char *dup_or_null(const char *s) { return s ? xgr__xstrdup(s) : NULL; }

static void audit_dup(xgr_engine_audit *d, const xgr_engine_audit *s) {
  *d = *s;
  d->kind = dup_or_null(s->kind);
  d->actor = dup_or_null(s->actor);
  d->node = dup_or_null(s->node);
  d->permit = dup_or_null(s->permit);
  d->detail = dup_or_null(s->detail);
}

static void audit_free(xgr_engine_audit *x) {
  free((char *)x->kind);
  free((char *)x->actor);
  free((char *)x->node);
  free((char *)x->permit);
  free((char *)x->detail);
}

xgr_engine_fork *xgr_eng_fork_dup(const xgr_engine_fork *f) {
  if (!f) return NULL;
  xgr_engine_fork *d = xgr__xcalloc(1, sizeof *d);
  d->forked_from = dup_or_null(f->forked_from);
  d->src_owner = dup_or_null(f->src_owner);
  d->src_root = f->src_root;
  audit_dup(&d->forked, &f->forked);
  audit_dup(&d->fork, &f->fork);
  return d;
}

void xgr_eng_row_fields_free(actor *a) {
  free(a->registry);
  free(a->max_total_gas);
  free(a->bundle_hash);
  a->registry = a->max_total_gas = a->bundle_hash = NULL;
  if (a->fork) {
    free((char *)a->fork->forked_from);
    free((char *)a->fork->src_owner);
    audit_free(&a->fork->forked);
    audit_free(&a->fork->fork);
    free(a->fork);
    a->fork = NULL;
  }
}
