/* fenced_lease.c — the fenced lease (xgr/store.h, "fenced leases"): the SQL of its four verbs —
 * take, renew, release, check — over any table whose rows name a holder, an epoch and an expiry.
 * The sessions' leases (pg_cluster.c) and the engine executor's sender lease (exec_journal.c) are
 * written with it, so what "free", "held" and "fenced" mean is said once, here; the statements
 * themselves run on the callers' connections, inside their own transactions where a check must
 * be (the fence). Pure string building: no connection, no state. */
#include <assert.h>
#include <stdio.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "xgr/store.h"

/* column c of l as the statements name it (qualified: ON CONFLICT's EXCLUDED and FROM items may
 * have columns of the same name) */
static void col(xgr_buf *b, const xgr_store_fenced_lease *l, const char *c) {
  xgr__buf_printf(b, "%s.%s", l->alias ? l->alias : l->table, c);
}

/* " WHERE (key) AND " or " WHERE " */
static void where(xgr_buf *b, const xgr_store_fenced_stmt *s) {
  if (s->key) xgr__buf_printf(b, " WHERE (%s) AND ", s->key);
  else xgr__buf_puts(b, " WHERE ");
}

/* "holder = node AND epoch = epoch" (the epoch left out when NULL) */
static void held_by(xgr_buf *b, const xgr_store_fenced_lease *l, const char *node, const char *epoch) {
  col(b, l, l->holder);
  xgr__buf_printf(b, " = %s", node);
  if (!epoch) return;
  xgr__buf_puts(b, " AND ");
  col(b, l, l->epoch);
  xgr__buf_printf(b, " = %s", epoch);
}

static void target(xgr_buf *b, const xgr_store_fenced_lease *l) {
  xgr__buf_printf(b, "UPDATE %s%s%s SET ", l->table, l->alias ? " " : "", l->alias ? l->alias : "");
}

static void returning(xgr_buf *b, const xgr_store_fenced_lease *l, const char *list, bool epoch_default) {
  if (list) {
    xgr__buf_printf(b, " RETURNING %s", list);
  } else if (epoch_default) {
    xgr__buf_puts(b, " RETURNING ");
    col(b, l, l->epoch);
  }
}

char *xgr_store_fenced_sql(const xgr_store_fenced_lease *l, xgr_store_fenced_verb verb, const xgr_store_fenced_stmt *s) {
  assert(l && l->table && l->holder && l->epoch && l->expires && s && (s->node || verb == XGR_STORE_FENCED_RELEASE));
  xgr_buf b = {0};
  switch (verb) {
    case XGR_STORE_FENCED_TAKE:
      assert(s->ms && (!s->insert || (s->conflict && !s->from)));
      if (s->insert) xgr__buf_printf(&b, "%s ON CONFLICT (%s) DO UPDATE SET ", s->insert, s->conflict);
      else target(&b, l);
      xgr__buf_printf(&b, "%s = %s, %s = ", l->holder, s->node, l->epoch);
      col(&b, l, l->epoch);
      xgr__buf_printf(&b, " + 1, %s = xgr_ms_now() + %s", l->expires, s->ms);
      if (s->from) xgr__buf_printf(&b, " FROM %s", s->from);
      if (s->chosen) {
        assert(s->key);
        xgr__buf_printf(&b, " WHERE %s", s->key);
      } else {   /* free: no holder, its time ran out, its holder is dead, or it is the taker's */
        where(&b, s);
        xgr__buf_putc(&b, '(');
        col(&b, l, l->holder);
        xgr__buf_puts(&b, " IS NULL OR ");
        col(&b, l, l->holder);
        xgr__buf_printf(&b, " = %s OR ", s->node);
        col(&b, l, l->expires);
        xgr__buf_puts(&b, " < xgr_ms_now() OR NOT xgr_node_alive(");
        col(&b, l, l->holder);
        xgr__buf_puts(&b, "))");
      }
      returning(&b, l, s->returning, true);
      break;
    case XGR_STORE_FENCED_RENEW:
      assert(s->ms && s->epoch && !s->from);
      target(&b, l);
      xgr__buf_printf(&b, "%s = xgr_ms_now() + %s", l->expires, s->ms);
      where(&b, s);
      held_by(&b, l, s->node, s->epoch);
      returning(&b, l, s->returning, true);
      break;
    case XGR_STORE_FENCED_RELEASE:
      assert(s->node || !s->epoch);
      target(&b, l);
      if (s->clear) xgr__buf_printf(&b, "%s = NULL, ", l->holder);
      xgr__buf_printf(&b, "%s = %s", l->expires, s->expires ? s->expires : "0");
      if (s->from) xgr__buf_printf(&b, " FROM %s", s->from);
      where(&b, s);
      held_by(&b, l, s->node, s->epoch);
      returning(&b, l, s->returning, false);
      break;
    case XGR_STORE_FENCED_CHECK:
      assert(s->epoch);
      xgr__buf_printf(&b, "SELECT %s FROM %s%s%s", s->returning ? s->returning : "1", l->table, l->alias ? " " : "",
                      l->alias ? l->alias : "");
      if (s->from) xgr__buf_printf(&b, ", %s", s->from);
      where(&b, s);
      held_by(&b, l, s->node, s->epoch);
      if (s->lock) {
        xgr__buf_puts(&b, " FOR SHARE OF ");
        xgr__buf_puts(&b, l->alias ? l->alias : l->table);
      }
      break;
  }
  return xgr__buf_finish(&b, NULL);
}

int64_t xgr_store_fenced_renew_ms(int64_t lease_ms) { return lease_ms / 3 > 0 ? lease_ms / 3 : 1; }
