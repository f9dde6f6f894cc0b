/* test_rt_unit.c — unit tests of the runtime: each structure on one thread (Chase-Lev deque,
 * MPSC queue), then the runtime's behaviour with real worker threads: spawn, messages, the three
 * handler modes, unknown commands, init failures, discard of late events, and shutdown of busy,
 * blocked and idle processes (including one that ignores the cancel). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

/* Checks inside steps and handlers run on worker threads, where cmocka's assertions (longjmp)
 * must not be used: they REQUIRE (lib/expect.h), which aborts the program on a failure. */
#include "lib/expect.h"
#include "runtime/deque_impl.h"
#include "runtime/mpsc_impl.h"
#include "xgr/runtime.h"

#define ITEM(i) ((void *)(uintptr_t)((i) + 1))
#define UNITEM(p) ((uintptr_t)(p) - 1)

/* ---- deque ---------------------------------------------------------------------------------- */
static void test_deque_lifo_fifo(void **s) {
  (void)s;
  rt_deque q;
  assert_true(rt_dq_init(&q, 4));
  assert_null(rt_dq_take(&q));
  assert_null(rt_dq_steal(&q, NULL));
  for (int i = 0; i < 10; i++) assert_true(rt_dq_push(&q, ITEM(i)));
  assert_int_equal(rt_dq_size(&q), 10);
  assert_int_equal(UNITEM(rt_dq_take(&q)), 9);  /* owner: newest */
  assert_int_equal(UNITEM(rt_dq_steal(&q, NULL)), 0); /* thief: oldest */
  assert_int_equal(UNITEM(rt_dq_steal(&q, NULL)), 1);
  assert_int_equal(UNITEM(rt_dq_take(&q)), 8);
  for (int i = 7; i >= 2; i--) assert_int_equal(UNITEM(rt_dq_take(&q)), i);
  assert_null(rt_dq_take(&q));
  assert_null(rt_dq_steal(&q, NULL));
  assert_int_equal(rt_dq_size(&q), 0);
  rt_dq_destroy(&q);
}

static void test_deque_growth(void **s) {
  (void)s;
  rt_deque q;
  assert_true(rt_dq_init(&q, 16));
  /* interleave so the live range wraps around the ring before each growth */
  int next = 0, stolen = 0;
  for (int round = 0; round < 12; round++) {
    for (int i = 0; i < 1000; i++) assert_true(rt_dq_push(&q, ITEM(next++)));
    for (int i = 0; i < 300; i++) {
      void *x = rt_dq_steal(&q, NULL);
      assert_non_null(x);
      assert_int_equal(UNITEM(x), stolen++);
    }
  }
  assert_int_equal(rt_dq_size(&q), next - stolen);
  for (int i = next - 1; i >= stolen; i--) assert_int_equal(UNITEM(rt_dq_take(&q)), i);
  assert_null(rt_dq_take(&q));
  rt_dq_destroy(&q);
}

static void test_deque_steal_half(void **s) {
  (void)s;
  rt_deque v, d;
  assert_true(rt_dq_init(&v, 16));
  assert_true(rt_dq_init(&d, 16));
  int64_t moved = 0;
  bool lost = false;
  assert_null(rt_dq_steal_half_into(&v, &d, 64, &moved, &lost));
  assert_int_equal(moved, 0);
  for (int i = 0; i < 21; i++) rt_dq_push(&v, ITEM(i));
  void *first = rt_dq_steal_half_into(&v, &d, 64, &moved, &lost);
  assert_int_equal(UNITEM(first), 0);
  assert_int_equal(moved, 11); /* ceil(21 / 2) */
  assert_false(lost);
  assert_int_equal(rt_dq_size(&v), 10);
  assert_int_equal(rt_dq_size(&d), 10);
  for (int i = 10; i >= 1; i--) assert_int_equal(UNITEM(rt_dq_take(&d)), i);
  /* the cap */
  first = rt_dq_steal_half_into(&v, &d, 3, &moved, &lost);
  assert_int_equal(UNITEM(first), 11);
  assert_int_equal(moved, 3);
  assert_int_equal(rt_dq_size(&v), 7);
  /* a single item is taken whole */
  while (rt_dq_size(&v) > 1) rt_dq_take(&v);
  first = rt_dq_steal_half_into(&v, &d, 64, &moved, &lost);
  assert_int_equal(UNITEM(first), 14);
  assert_int_equal(moved, 1);
  assert_null(rt_dq_take(&v));
  rt_dq_destroy(&v);
  rt_dq_destroy(&d);
}

/* ---- MPSC ------------------------------------------------------------------------------------- */
typedef struct node {
  rt_mpsc_node link;
  int v;
} node;

static void test_mpsc_fifo(void **s) {
  (void)s;
  rt_mpsc q;
  rt_mpsc_init(&q);
  assert_true(rt_mpsc_empty(&q));
  assert_null(rt_mpsc_pop(&q));
  node n[100];
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 100; i++) {
      n[i].v = i;
      rt_mpsc_push(&q, &n[i].link);
    }
    assert_false(rt_mpsc_empty(&q));
    for (int i = 0; i < 100; i++) {
      node *x = (node *)rt_mpsc_pop(&q);
      assert_non_null(x);
      assert_int_equal(x->v, i);
    }
    assert_null(rt_mpsc_pop(&q));
    assert_true(rt_mpsc_empty(&q));
  }
  /* one at a time: exercises the stub re-insertion */
  for (int i = 0; i < 10; i++) {
    rt_mpsc_push(&q, &n[i].link);
    assert_ptr_equal(rt_mpsc_pop(&q), &n[i].link);
    assert_null(rt_mpsc_pop(&q));
  }
}

/* ---- runtime: an echo process ------------------------------------------------------------------
 * Replies to each message with tag+1 to its sender (or counts it if sent from outside), ends on a
 * message with tag 0 or on cancel. */
typedef struct counts {
  _Atomic int received, closed, discarded, inits;
} counts;

typedef struct echo {
  counts *c;
} echo;

static int echo_init(void *self, const xgr_ctx *ctx, const char *method, void *input, xgr_error *err) {
  echo *e = self;
  e->c = input;
  atomic_fetch_add(&e->c->inits, 1);
  if (method && strcmp(method, "fail") == 0) return xgr_error_set(err, XGR_EINVAL, "method", "no such method: fail");
  (void)ctx;
  return 0;
}

static int echo_step(void *self, const xgr_ctx *ctx, const xgr_event *ev, size_t n, xgr_step_out *out) {
  echo *e = self;
  out->status = XGR_STEP_IDLE;
  for (size_t i = 0; i < n; i++) {
    if (ev[i].type == XGR_EV_CANCEL || (ev[i].type == XGR_EV_MESSAGE && ev[i].tag == 0)) {
      out->status = XGR_STEP_COMPLETE;
      continue;
    }
    if (ev[i].type != XGR_EV_MESSAGE) continue;
    atomic_fetch_add(&e->c->received, 1);
    if (ev[i].from) xgr_ctx_send(ctx, ev[i].from, ev[i].tag + 1, NULL);
  }
  return 0;
}

static void echo_close(void *self) {
  echo *e = self;
  atomic_fetch_add(&e->c->closed, 1);
}

static void echo_discard(void *self, xgr_event *ev) {
  echo *e = self;
  (void)ev;
  atomic_fetch_add(&e->c->discarded, 1);
}

static const xgr_process_vt echo_vt = {"echo", sizeof(echo), echo_init, echo_step, echo_close, echo_discard};

static xgr_rt *start_rt(unsigned workers) {
  xgr_rt_config cfg = {.workers = workers};
  xgr_rt *rt = xgr_rt_new(&cfg);
  assert_non_null(rt);
  return rt;
}

static void test_rt_spawn_send(void **s) {
  (void)s;
  xgr_rt *rt = start_rt(2);
  xgr_error err;
  assert_int_equal(xgr_rt_start(rt, &err), 0);
  counts c = {0};
  xgr_pid pid = 0;
  assert_int_equal(xgr_rt_spawn(rt, &echo_vt, NULL, "main", &c, &pid, &err), 0);
  assert_true(pid != 0);
  for (int i = 0; i < 100; i++) assert_int_equal(xgr_rt_send(rt, pid, 5, NULL), 0);
  assert_int_equal(xgr_rt_send(rt, pid, 0, NULL), 0); /* stop */
  assert_int_equal(xgr_rt_wait_idle(rt, 5000), 0);
  assert_int_equal(atomic_load(&c.received), 100);
  assert_int_equal(atomic_load(&c.closed), 1);
  /* the pid is dead now, also after its slot is reused */
  assert_int_equal(xgr_rt_send(rt, pid, 1, NULL), XGR_ENOTFOUND);
  xgr_pid pid2 = 0;
  assert_int_equal(xgr_rt_spawn(rt, &echo_vt, NULL, "main", &c, &pid2, &err), 0);
  assert_true(pid2 != pid);
  assert_int_equal(xgr_rt_send(rt, pid, 1, NULL), XGR_ENOTFOUND);
  assert_int_equal(xgr_rt_send(rt, 0, 1, NULL), XGR_ENOTFOUND);
  assert_int_equal(xgr_rt_send(rt, 0x7fffffffull, 1, NULL), XGR_ENOTFOUND);
  assert_int_equal(xgr_rt_shutdown(rt, 2000), 0); /* the second echo gets a cancel */
  assert_int_equal(atomic_load(&c.closed), 2);
  xgr_rt_counters k;
  xgr_rt_get_counters(rt, &k);
  assert_int_equal(k.spawned, 2);
  assert_int_equal(k.completed, 2);
  assert_int_equal(k.messages, 101);
  assert_true(k.steps >= 2);
  assert_int_equal(xgr_rt_spawn(rt, &echo_vt, NULL, "main", &c, &pid2, &err), XGR_ESTATE);
  xgr_rt_free(rt);
}

/* The idle hook: an idle worker calls it between looking for work; work it makes (a message to
 * an idle process) lands on that worker's own deque (xgr_ctx_queued sees it) and runs at once;
 * once nothing is left, the worker says it parks. */
typedef struct idle_probe {
  _Atomic xgr_pid pid;
  _Atomic int to_send;
  _Atomic long calls, parking, queued_after_send;
} idle_probe;

static bool idle_hook(void *hctx, const xgr_ctx *ctx, bool parking) {
  idle_probe *p = hctx;
  atomic_fetch_add(&p->calls, 1);
  REQUIRE(ctx->worker != NULL && ctx->self == 0);
  xgr_pid pid = atomic_load(&p->pid);
  if (pid && atomic_load(&p->to_send) > 0) {
    atomic_fetch_sub(&p->to_send, 1);
    REQUIRE(xgr_ctx_send(ctx, pid, 7, NULL) == 0);
    if (xgr_ctx_queued(ctx) > 0) atomic_fetch_add(&p->queued_after_send, 1);
    return true;
  }
  if (parking) atomic_fetch_add(&p->parking, 1);
  return false;
}

static void test_rt_idle_hook(void **s) {
  (void)s;
  idle_probe p = {0};
  xgr_rt_config cfg = {.workers = 1, .idle = idle_hook, .idle_ctx = &p};
  xgr_rt *rt = xgr_rt_new(&cfg);
  assert_non_null(rt);
  xgr_error err;
  assert_int_equal(xgr_rt_start(rt, &err), 0);
  counts c = {0};
  xgr_pid pid = 0;
  assert_int_equal(xgr_rt_spawn(rt, &echo_vt, NULL, "main", &c, &pid, &err), 0);
  atomic_store(&p.to_send, 50);
  atomic_store(&p.pid, pid);
  for (int i = 0; i < 5000 && (atomic_load(&c.received) < 50 || atomic_load(&p.parking) == 0); i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  assert_int_equal(atomic_load(&c.received), 50);
  assert_int_equal(atomic_load(&p.queued_after_send), 50);   /* each message woke echo locally */
  assert_true(atomic_load(&p.parking) >= 1);
  xgr_ctx off = {rt, 0, NULL};
  assert_int_equal(xgr_ctx_queued(&off), 0);
  assert_int_equal(xgr_rt_shutdown(rt, 2000), 0);
  xgr_rt_free(rt);
}

/* Fairness (cfg.fair): a process that never stops pushing work onto its worker's deque (it spawns
 * two children and messages itself on every step) must not starve the global queue (a process
 * spawned and a message sent from outside) nor the oldest items of its own deque (the children,
 * which pile up under the spinner). One worker, so nobody steals. */
typedef struct spinner {
  _Atomic long *children_done;
  _Atomic int *stop;
} spinner;

static int leaf_step(void *self, const xgr_ctx *ctx, const xgr_event *ev, size_t n, xgr_step_out *out) {
  (void)ctx, (void)ev, (void)n;
  atomic_fetch_add(*(_Atomic long **)self, 1);
  out->status = XGR_STEP_COMPLETE;
  return 0;
}
static int leaf_init(void *self, const xgr_ctx *ctx, const char *method, void *input, xgr_error *err) {
  (void)ctx, (void)method, (void)err;
  *(_Atomic long **)self = input;
  return 0;
}
static const xgr_process_vt leaf_vt = {"leaf", sizeof(_Atomic long *), leaf_init, leaf_step, NULL, NULL};

static int spin_init(void *self, const xgr_ctx *ctx, const char *method, void *input, xgr_error *err) {
  (void)ctx, (void)method, (void)err;
  *(spinner *)self = *(spinner *)input;
  return 0;
}

static int spin_step(void *self, const xgr_ctx *ctx, const xgr_event *ev, size_t n, xgr_step_out *out) {
  spinner *sp = self;
  (void)ev, (void)n;
  if (atomic_load(sp->stop)) {
    out->status = XGR_STEP_COMPLETE;
    return 0;
  }
  for (int i = 0; i < 2; i++) {
    int rc = xgr_ctx_spawn(ctx, &leaf_vt, NULL, NULL, (void *)sp->children_done, NULL, NULL);
    REQUIRE(rc == 0 || rc == XGR_ESTATE);   /* ESTATE: the test is shutting the runtime down */
  }
  REQUIRE(xgr_ctx_send(ctx, ctx->self, 1, NULL) == 0);
  out->status = XGR_STEP_IDLE;
  return 0;
}
static const xgr_process_vt spin_vt = {"spinner", sizeof(spinner), spin_init, spin_step, NULL, NULL};

static void test_rt_fairness(void **s) {
  (void)s;
  xgr_rt_config cfg = {.workers = 1, .fair = true};
  xgr_rt *rt = xgr_rt_new(&cfg);
  assert_non_null(rt);
  xgr_error err;
  assert_int_equal(xgr_rt_start(rt, &err), 0);
  _Atomic long done = 0;
  _Atomic int stop = 0;
  spinner in = {&done, &stop};
  assert_int_equal(xgr_rt_spawn(rt, &spin_vt, NULL, NULL, &in, NULL, &err), 0);
  struct timespec ms = {0, 1000000};
  nanosleep(&ms, NULL);
  counts c = {0};
  xgr_pid pid = 0;
  assert_int_equal(xgr_rt_spawn(rt, &echo_vt, NULL, "main", &c, &pid, &err), 0);
  assert_int_equal(xgr_rt_send(rt, pid, 5, NULL), 0);
  for (int i = 0; i < 5000 && atomic_load(&c.received) < 1; i++) nanosleep(&ms, NULL);
  assert_int_equal(atomic_load(&c.received), 1);   /* the outside message got through */
  long d0 = atomic_load(&done);   /* children (the deque's oldest) keep completing: */
  for (int i = 0; i < 5000 && atomic_load(&done) < d0 + 10; i++) nanosleep(&ms, NULL);
  assert_true(atomic_load(&done) >= d0 + 10);
  atomic_store(&stop, 1);
  assert_int_equal(xgr_rt_send(rt, pid, 0, NULL), 0);
  assert_int_equal(xgr_rt_shutdown(rt, 5000), 0);
  xgr_rt_free(rt);
}

static void test_rt_init_failure(void **s) {
  (void)s;
  xgr_rt *rt = start_rt(1);
  assert_int_equal(xgr_rt_start(rt, NULL), 0);
  counts c = {0};
  xgr_error err;
  xgr_error_clear(&err);
  xgr_pid pid = 0;
  assert_int_equal(xgr_rt_spawn(rt, &echo_vt, NULL, "fail", &c, &pid, &err), XGR_EINVAL);
  assert_string_equal(err.path, "method");
  assert_int_equal(pid, 0);
  assert_int_equal(atomic_load(&c.closed), 1); /* close still called */
  assert_int_equal(xgr_rt_live(rt), 0);
  xgr_process_vt bad = {0};
  assert_int_equal(xgr_rt_spawn(rt, &bad, NULL, "m", NULL, NULL, NULL), XGR_EINVAL);
  xgr_rt_free(rt);
}

/* Ping between two echo processes: a pinger sends to the echo and counts replies. */
typedef struct pinger {
  xgr_pid peer;
  int n, left, got;
  bool started;
} pinger;

typedef struct pinger_in {
  xgr_pid peer;
  int n;
  counts *c;
} pinger_in;

static int pinger_init(void *self, const xgr_ctx *ctx, const char *m, void *input, xgr_error *err) {
  pinger *p = self;
  pinger_in *in = input;
  p->peer = in->peer;
  p->n = p->left = in->n;
  (void)ctx, (void)m, (void)err;
  return 0;
}

static int pinger_step(void *self, const xgr_ctx *ctx, const xgr_event *ev, size_t n, xgr_step_out *out) {
  pinger *p = self;
  if (!p->started) {
    p->started = true;
    p->left--;
    REQUIRE(xgr_ctx_send(ctx, p->peer, 7, NULL) == 0);
  }
  for (size_t i = 0; i < n; i++) {
    if (ev[i].type != XGR_EV_MESSAGE) continue;
    REQUIRE(ev[i].from == p->peer && ev[i].tag == 8);
    p->got++;
    if (p->left > 0) {
      p->left--;
      REQUIRE(xgr_ctx_send(ctx, p->peer, 7, NULL) == 0);
    }
  }
  out->status = XGR_STEP_IDLE;
  if (p->got == p->n) {
    xgr_ctx_send(ctx, p->peer, 0, NULL); /* stop the echo */
    out->status = XGR_STEP_COMPLETE;
  }
  return 0;
}

static const xgr_process_vt pinger_vt = {"pinger", sizeof(pinger), pinger_init, pinger_step, NULL, NULL};

static void test_rt_ping(void **s) {
  (void)s;
  xgr_rt *rt = start_rt(2);
  assert_int_equal(xgr_rt_start(rt, NULL), 0);
  counts c = {0};
  xgr_pid e = 0;
  assert_int_equal(xgr_rt_spawn(rt, &echo_vt, NULL, "main", &c, &e, NULL), 0);
  pinger_in in = {e, 1000, &c};
  assert_int_equal(xgr_rt_spawn(rt, &pinger_vt, NULL, "main", &in, NULL, NULL), 0);
  assert_int_equal(xgr_rt_wait_idle(rt, 5000), 0);
  assert_int_equal(atomic_load(&c.received), 1000);
  assert_int_equal(atomic_load(&c.closed), 1);
  xgr_rt_free(rt);
}

/* ---- yields --------------------------------------------------------------------------------
 * A process issues one command of each handler type (and one of an unknown type) per round; each
 * handler completes with data = arg * 2. The process checks tags and values and ends after R rounds. */
enum { CMD_INLINE = 1, CMD_TASK = 2, CMD_THREAD = 3, CMD_NONE = 9 };

typedef struct yielder {
  int round, pending, errors_seen;
  uint64_t sum;
} yielder;

static _Atomic uint64_t g_yield_sum;

static int yielder_step(void *self, const xgr_ctx *ctx, const xgr_event *ev, size_t n, xgr_step_out *out) {
  yielder *y = self;
  (void)ctx;
  for (size_t i = 0; i < n; i++) {
    if (ev[i].type != XGR_EV_YIELD) continue;
    y->pending--;
    if (ev[i].err == XGR_EUNSUPPORTED) {
      /* unknown command type: the argument comes back */
      REQUIRE((uintptr_t)ev[i].data == (uintptr_t)(1000 + y->round));
      y->errors_seen++;
    } else {
      REQUIRE(ev[i].err == 0);
      REQUIRE((uintptr_t)ev[i].data == 2 * ((ev[i].tag % 100) + 1));
      y->sum += (uintptr_t)ev[i].data;
    }
  }
  if (y->pending > 0) {
    out->status = XGR_STEP_BLOCKED;
    return 0;
  }
  if (y->round == 50) {
    atomic_fetch_add(&g_yield_sum, y->sum + (uint64_t)y->errors_seen);
    out->status = XGR_STEP_COMPLETE;
    return 0;
  }
  y->round++;
  for (uint32_t t = CMD_INLINE; t <= CMD_THREAD; t++) {
    uint64_t tag = (uint64_t)y->round * 100 + t;
    REQUIRE(xgr_step_yield(out, t, tag, (void *)(uintptr_t)((tag % 100) + 1)) == 0);
  }
  xgr_step_yield(out, CMD_NONE, (uint64_t)y->round * 100 + 99, (void *)(uintptr_t)(1000 + y->round));
  y->pending = 4;
  out->status = XGR_STEP_BLOCKED;
  return 0;
}

static const xgr_process_vt yielder_vt = {"yielder", sizeof(yielder), NULL, yielder_step, NULL, NULL};

static void double_it(void *hctx, const xgr_ctx *ctx, xgr_pid pid, const xgr_cmd *cmd) {
  _Atomic int *runs = hctx;
  atomic_fetch_add(runs, 1);
  void *d = (void *)((uintptr_t)cmd->arg * 2);
  if (ctx->worker) xgr_ctx_complete_yield(ctx, pid, cmd->tag, d, 0);
  else xgr_rt_complete_yield(ctx->rt, pid, cmd->tag, d, 0);
}

static void test_rt_yields(void **s) {
  (void)s;
  xgr_rt *rt = start_rt(2);
  _Atomic int runs[4] = {0};
  xgr_handler hi = {"inline", XGR_HANDLER_INLINE, 0, double_it, NULL, &runs[1]};
  xgr_handler ht = {"task", XGR_HANDLER_TASK, 0, double_it, NULL, &runs[2]};
  xgr_handler hth = {"thread", XGR_HANDLER_THREAD, 2, double_it, NULL, &runs[3]};
  assert_int_equal(xgr_rt_register_handler(rt, CMD_INLINE, &hi), 0);
  assert_int_equal(xgr_rt_register_handler(rt, CMD_TASK, &ht), 0);
  assert_int_equal(xgr_rt_register_handler(rt, CMD_THREAD, &hth), 0);
  assert_int_equal(xgr_rt_register_handler(rt, CMD_THREAD, &hth), XGR_EDUP);
  assert_int_equal(xgr_rt_register_handler(rt, XGR_RT_MAX_CMD_TYPES, &hth), XGR_EINVAL);
  assert_int_equal(xgr_rt_start(rt, NULL), 0);
  assert_int_equal(xgr_rt_register_handler(rt, 7, &hth), XGR_ESTATE);
  atomic_store(&g_yield_sum, 0);
  for (int i = 0; i < 20; i++) assert_int_equal(xgr_rt_spawn(rt, &yielder_vt, NULL, "m", NULL, NULL, NULL), 0);
  assert_int_equal(xgr_rt_wait_idle(rt, 10000), 0);
  /* per process: 50 rounds x (2*2 + 2*3 + 2*4) + 50 unsupported */
  assert_int_equal(atomic_load(&g_yield_sum), 20 * (50 * 18 + 50));
  for (int t = 1; t <= 3; t++) assert_int_equal(atomic_load(&runs[t]), 20 * 50);
  xgr_rt_counters k;
  xgr_rt_get_counters(rt, &k);
  assert_int_equal(k.yields, 20 * 50 * 4);
  assert_int_equal(k.completions, 20 * 50 * 4);
  assert_int_equal(k.tasks, 20 * 50);
  assert_int_equal(xgr_rt_shutdown(rt, 1000), 0);
  xgr_rt_free(rt);
}

/* ---- late events are discarded ------------------------------------------------------------------ */
static void test_rt_discard(void **s) {
  (void)s;
  xgr_rt *rt = start_rt(2);
  assert_int_equal(xgr_rt_start(rt, NULL), 0);
  counts c = {0};
  int sent = 0, notfound = 0;
  for (int round = 0; round < 200; round++) {
    xgr_pid pid;
    assert_int_equal(xgr_rt_spawn(rt, &echo_vt, NULL, "m", &c, &pid, NULL), 0);
    xgr_rt_send(rt, pid, 0, NULL); /* ends it */
    for (int i = 0; i < 5; i++) {
      int rc = xgr_rt_send(rt, pid, 3, NULL);
      if (rc == 0) sent++;
      else {
        assert_int_equal(rc, XGR_ENOTFOUND);
        notfound++;
      }
    }
  }
  assert_int_equal(xgr_rt_wait_idle(rt, 5000), 0);
  /* every accepted message was either received before the stop or discarded afterwards */
  assert_int_equal(atomic_load(&c.received) + atomic_load(&c.discarded), sent);
  assert_int_equal(sent + notfound, 1000);
  assert_int_equal(atomic_load(&c.closed), 200);
  xgr_rt_free(rt);
}

/* ---- shutdown with busy, blocked and idle processes ----------------------------------------------- */
typedef struct sd {
  int mode; /* 0 busy (READY forever), 1 blocked on a slow thread handler, 2 idle, 3 ignores cancel */
  bool yielded;
} sd;

static _Atomic int g_sd_closed, g_sd_cancels, g_sd_dropped, g_sd_late, g_sd_delivered, g_sd_yielded;

static int sd_init(void *self, const xgr_ctx *ctx, const char *m, void *input, xgr_error *err) {
  sd *p = self;
  p->mode = (int)(intptr_t)input;
  (void)ctx, (void)m, (void)err;
  return 0;
}

static int sd_step(void *self, const xgr_ctx *ctx, const xgr_event *ev, size_t n, xgr_step_out *out) {
  sd *p = self;
  (void)ctx;
  for (size_t i = 0; i < n; i++) {
    if (ev[i].type == XGR_EV_CANCEL) {
      atomic_fetch_add(&g_sd_cancels, 1);
      if (p->mode != 3) {
        out->status = XGR_STEP_COMPLETE;
        return 0;
      }
    }
  }
  switch (p->mode) {
  case 0:
  case 3: out->status = XGR_STEP_READY; break;
  case 1:
    if (!p->yielded) {
      xgr_step_yield(out, 1, 42, NULL);
      atomic_fetch_add(&g_sd_yielded, 1);
    }
    p->yielded = true;
    out->status = XGR_STEP_BLOCKED;
    break;
  default: out->status = XGR_STEP_IDLE; break;
  }
  return 0;
}

static void sd_close(void *self) {
  (void)self;
  atomic_fetch_add(&g_sd_closed, 1);
}

static const xgr_process_vt sd_vt = {"sd", sizeof(sd), sd_init, sd_step, sd_close, NULL};

static void slow_handler(void *hctx, const xgr_ctx *ctx, xgr_pid pid, const xgr_cmd *cmd) {
  (void)hctx;
  struct timespec ts = {0, 30 * 1000 * 1000};
  nanosleep(&ts, NULL);
  int rc = xgr_rt_complete_yield(ctx->rt, pid, cmd->tag, NULL, 0);
  REQUIRE(rc == 0 || rc == XGR_ENOTFOUND);
  atomic_fetch_add(rc == 0 ? &g_sd_delivered : &g_sd_late, 1);
}

static void slow_drop(void *hctx, xgr_pid pid, const xgr_cmd *cmd) {
  (void)hctx, (void)pid, (void)cmd;
  atomic_fetch_add(&g_sd_dropped, 1);
}

static void run_shutdown(int with_stubborn) {
  atomic_store(&g_sd_closed, 0);
  atomic_store(&g_sd_cancels, 0);
  atomic_store(&g_sd_dropped, 0);
  atomic_store(&g_sd_late, 0);
  atomic_store(&g_sd_delivered, 0);
  atomic_store(&g_sd_yielded, 0);
  xgr_rt *rt = start_rt(2);
  xgr_handler h = {"slow", XGR_HANDLER_THREAD, 1, slow_handler, slow_drop, NULL};
  assert_int_equal(xgr_rt_register_handler(rt, 1, &h), 0);
  assert_int_equal(xgr_rt_start(rt, NULL), 0);
  int n = 0;
  for (int i = 0; i < 30; i++, n++)
    assert_int_equal(xgr_rt_spawn(rt, &sd_vt, NULL, "m", (void *)(intptr_t)(i % 3), NULL, NULL), 0);
  if (with_stubborn) {
    assert_int_equal(xgr_rt_spawn(rt, &sd_vt, NULL, "m", (void *)(intptr_t)3, NULL, NULL), 0);
    n++;
  }
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL); /* let them reach their states */
  int rc = xgr_rt_shutdown(rt, with_stubborn ? 200 : 5000);
  assert_int_equal(rc, with_stubborn ? XGR_ETIMEOUT : 0);
  assert_int_equal(atomic_load(&g_sd_cancels), n);
  assert_int_equal(atomic_load(&g_sd_closed), with_stubborn ? n - 1 : n);
  xgr_rt_free(rt);
  assert_int_equal(atomic_load(&g_sd_closed), n); /* the stubborn one is closed by free */
  /* each blocked process's command was run (its completion delivered or too late) or dropped */
  assert_int_equal(atomic_load(&g_sd_late) + atomic_load(&g_sd_delivered) + atomic_load(&g_sd_dropped),
                   atomic_load(&g_sd_yielded));
}

static void test_rt_shutdown(void **s) {
  (void)s;
  run_shutdown(0);
}

static void test_rt_shutdown_timeout(void **s) {
  (void)s;
  run_shutdown(1);
}

static void test_rt_free_unstarted(void **s) {
  (void)s;
  xgr_rt *rt = start_rt(3);
  assert_int_equal(xgr_rt_workers(rt), 3);
  counts c = {0};
  assert_int_equal(xgr_rt_spawn(rt, &echo_vt, NULL, "m", &c, NULL, NULL), 0);
  xgr_rt_free(rt); /* never started: the process is closed without running */
  assert_int_equal(atomic_load(&c.closed), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_deque_lifo_fifo),
    cmocka_unit_test(test_deque_growth),
    cmocka_unit_test(test_deque_steal_half),
    cmocka_unit_test(test_mpsc_fifo),
    cmocka_unit_test(test_rt_spawn_send),
    cmocka_unit_test(test_rt_init_failure),
    cmocka_unit_test(test_rt_idle_hook),
    cmocka_unit_test(test_rt_fairness),
    cmocka_unit_test(test_rt_ping),
    cmocka_unit_test(test_rt_yields),
    cmocka_unit_test(test_rt_discard),
    cmocka_unit_test(test_rt_shutdown),
    cmocka_unit_test(test_rt_shutdown_timeout),
    cmocka_unit_test(test_rt_free_unstarted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
