/* test_rt_stress.c — concurrent stress tests of the runtime, run in the normal suite and under
 * ThreadSanitizer (suite 'tsan'). Each is bounded in count (scaled down under sanitizers, where
 * everything runs 5-20x slower) so it takes a few seconds at most:
 *  - deque: one owner pushes and takes while thieves steal single items and halves into their own
 *    deques; every item is taken exactly once.
 *  - MPSC: several producers push numbered nodes into one queue; the consumer sees each producer's
 *    nodes in order, none lost or duplicated.
 *  - messages: processes send each other numbered messages all-to-all; every receiver checks each
 *    sender's sequence (FIFO per sender, no loss, no duplicate) and the totals match.
 *  - spawn tree: every process spawns two children and waits for their counts.
 *  - yields racing with Running: handlers complete while the issuing step is still running.
 *  - shutdown under load: cancel arrives while processes are busy, blocked or idle.
 * XGR_STRESS_SCALE (a float, default 1) multiplies the counts.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "lib/expect.h"  /* REQUIRE: checks on worker threads, where cmocka must not longjmp */
#include "runtime/deque_impl.h"
#include "runtime/mpsc_impl.h"
#include "xgr/runtime.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* count scaled for the build and XGR_STRESS_SCALE */
static long scaled(long normal, long sanitized) {
  double f = 1.0;
  const char *e = getenv("XGR_STRESS_SCALE");
  if (e && *e) f = atof(e);
  long n = (long)((SANITIZED ? sanitized : normal) * f);
  return n > 1 ? n : 1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- deque: one owner, several thieves ------------------------------------------------------ */
#define THIEVES 3
typedef struct dq_test {
  rt_deque q;
  long n;
  _Atomic unsigned char *seen; /* seen[i] counts how often item i was taken */
  _Atomic int done;            /* owner finished pushing */
  _Atomic long taken;
} dq_test;

static void take_item(dq_test *t, void *x) {
  uintptr_t i = (uintptr_t)x - 1;
  REQUIRE(i < (uintptr_t)t->n);
  REQUIRE(atomic_fetch_add(&t->seen[i], 1) == 0);
  atomic_fetch_add(&t->taken, 1);
}

typedef struct thief_arg {
  dq_test *t;
  int id;
} thief_arg;

static void *thief_main(void *arg) {
  thief_arg *a = arg;
  dq_test *t = a->t;
  rt_deque own;
  REQUIRE(rt_dq_init(&own, 16));
  uint64_t r = 0x1234567ull * (uint64_t)(a->id + 1);
  for (;;) {
    bool lost = false;
    void *x;
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    if (r & 1) {
      x = rt_dq_steal(&t->q, &lost);
      if (x) take_item(t, x);
    } else {
      int64_t moved = 0;
      x = rt_dq_steal_half_into(&t->q, &own, 1 + (int64_t)(r >> 8) % 40, &moved, &lost);
      if (x) {
        take_item(t, x);
        void *y;
        while ((y = rt_dq_take(&own)) != NULL) take_item(t, y);
      }
    }
    if (!x && !lost && atomic_load(&t->done) && rt_dq_size(&t->q) == 0) break;
  }
  rt_dq_destroy(&own);
  return NULL;
}

static void test_deque_owner_thieves(void **s) {
  (void)s;
  dq_test t;
  t.n = scaled(2000000, 1000000);
  t.seen = calloc((size_t)t.n, 1);
  atomic_init(&t.done, 0);
  atomic_init(&t.taken, 0);
  assert_true(rt_dq_init(&t.q, 16)); /* small: forces growth under concurrent steals */
  pthread_t th[THIEVES];
  thief_arg args[THIEVES];
  for (int i = 0; i < THIEVES; i++) {
    args[i] = (thief_arg){&t, i};
    pthread_create(&th[i], NULL, thief_main, &args[i]);
  }
  uint64_t r = 99;
  for (long i = 0; i < t.n; i++) {
    REQUIRE(rt_dq_push(&t.q, (void *)(uintptr_t)(i + 1)));
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    if (r % 3 == 0) { /* the owner takes some back (LIFO), racing for the last item */
      void *x = rt_dq_take(&t.q);
      if (x) take_item(&t, x);
    }
  }
  void *x;
  while ((x = rt_dq_take(&t.q)) != NULL) take_item(&t, x);
  atomic_store(&t.done, 1);
  for (int i = 0; i < THIEVES; i++) pthread_join(th[i], NULL);
  assert_int_equal(atomic_load(&t.taken), t.n);
  for (long i = 0; i < t.n; i++) REQUIRE(atomic_load(&t.seen[i]) == 1);
  rt_dq_destroy(&t.q);
  free(t.seen);
}

/* ---- MPSC: many producers, one consumer --------------------------------------------------------- */
#define PRODUCERS 4
typedef struct mnode {
  rt_mpsc_node link;
  int producer;
  long seq;
} mnode;

typedef struct mpsc_test {
  rt_mpsc q;
  long per;
  mnode *nodes; /* PRODUCERS * per */
} mpsc_test;

typedef struct prod_arg {
  mpsc_test *t;
  int id;
} prod_arg;

static void *producer_main(void *arg) {
  prod_arg *a = arg;
  for (long i = 0; i < a->t->per; i++) {
    mnode *n = &a->t->nodes[(long)a->id * a->t->per + i];
    n->producer = a->id;
    n->seq = i;
    rt_mpsc_push(&a->t->q, &n->link);
  }
  return NULL;
}

static void test_mpsc_producers(void **s) {
  (void)s;
  mpsc_test t;
  t.per = scaled(500000, 200000);
  t.nodes = calloc((size_t)(PRODUCERS * t.per), sizeof(mnode));
  rt_mpsc_init(&t.q);
  pthread_t th[PRODUCERS];
  prod_arg args[PRODUCERS];
  for (int i = 0; i < PRODUCERS; i++) {
    args[i] = (prod_arg){&t, i};
    pthread_create(&th[i], NULL, producer_main, &args[i]);
  }
  long next[PRODUCERS] = {0}, got = 0, busy = 0;
  while (got < PRODUCERS * t.per) {
    rt_mpsc_node *n = rt_mpsc_pop(&t.q);
    if (!n || n == RT_MPSC_BUSY) {
      busy += n == RT_MPSC_BUSY; /* a producer between its exchange and its link */
      continue;
    }
    mnode *m = (mnode *)n;
    REQUIRE(m->seq == next[m->producer]);
    next[m->producer]++;
    got++;
  }
  for (int i = 0; i < PRODUCERS; i++) pthread_join(th[i], NULL);
  assert_null(rt_mpsc_pop(&t.q));
  for (int i = 0; i < PRODUCERS; i++) assert_int_equal(next[i], t.per);
  print_message("mpsc: %ld nodes, consumer met %ld half-done pushes\n", got, busy);
  free(t.nodes);
}

/* ---- messages all-to-all ---------------------------------------------------------------------------
 * N processes; process i sends its j-th message to (i + 1 + j % (N-1)) % N with tag = the running
 * number of messages i sent to that receiver. So every process receives exactly K messages, K/(N-1)
 * from each sender, and checks that each sender's numbers arrive 0, 1, 2, ... */
#define NPROC 16
typedef struct a2a_shared {
  xgr_pid pids[NPROC];
  _Atomic int ready;
  long k;
  _Atomic long received;
} a2a_shared;

typedef struct a2a {
  a2a_shared *sh;
  int me;
  long sent, got;
  uint64_t next_to[NPROC], next_from[NPROC];
} a2a;

static int a2a_init(void *self, const xgr_ctx *ctx, const char *m, void *in, xgr_error *err) {
  a2a *p = self;
  p->sh = ((void **)in)[0];
  p->me = (int)(intptr_t)((void **)in)[1];
  (void)ctx, (void)m, (void)err;
  return 0;
}

static int pid_index(a2a_shared *sh, xgr_pid pid) {
  for (int i = 0; i < NPROC; i++)
    if (sh->pids[i] == pid) return i;
  return -1;
}

static int a2a_step(void *self, const xgr_ctx *ctx, const xgr_event *ev, size_t n, xgr_step_out *out) {
  a2a *p = self;
  a2a_shared *sh = p->sh;
  if (!atomic_load_explicit(&sh->ready, memory_order_acquire)) { /* pids not all known yet */
    out->status = XGR_STEP_READY;
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    REQUIRE(ev[i].type == XGR_EV_MESSAGE);
    int from = pid_index(sh, ev[i].from);
    REQUIRE(from >= 0 && from != p->me);
    REQUIRE(ev[i].tag == p->next_from[from]);
    p->next_from[from]++;
    p->got++;
  }
  atomic_fetch_add_explicit(&sh->received, (long)n, memory_order_relaxed);
  for (int b = 0; b < 32 && p->sent < sh->k; b++, p->sent++) {
    int to = (p->me + 1 + (int)(p->sent % (NPROC - 1))) % NPROC;
    REQUIRE(xgr_ctx_send(ctx, sh->pids[to], p->next_to[to]++, NULL) == 0);
  }
  if (p->sent < sh->k) out->status = XGR_STEP_READY;
  else if (p->got < sh->k) out->status = XGR_STEP_IDLE;
  else out->status = XGR_STEP_COMPLETE;
  return 0;
}

static const xgr_process_vt a2a_vt = {"a2a", sizeof(a2a), a2a_init, a2a_step, NULL, NULL};

static void test_messages_all_to_all(void **s) {
  (void)s;
  xgr_rt_config cfg = {.workers = 4, .max_batch = 64};
  xgr_rt *rt = xgr_rt_new(&cfg);
  assert_int_equal(xgr_rt_start(rt, NULL), 0);
  a2a_shared sh;
  memset(&sh, 0, sizeof(sh));
  long total = scaled(4000000, 2000000);
  sh.k = total / NPROC / (NPROC - 1) * (NPROC - 1);
  double t0 = now_s();
  for (int i = 0; i < NPROC; i++) {
    void *in[2] = {&sh, (void *)(intptr_t)i};
    assert_int_equal(xgr_rt_spawn(rt, &a2a_vt, NULL, "m", in, &sh.pids[i], NULL), 0);
  }
  atomic_store_explicit(&sh.ready, 1, memory_order_release);
  assert_int_equal(xgr_rt_wait_idle(rt, 60000), 0);
  double dt = now_s() - t0;
  assert_int_equal(atomic_load(&sh.received), sh.k * NPROC);
  xgr_rt_counters c;
  xgr_rt_get_counters(rt, &c);
  assert_int_equal(c.messages, sh.k * NPROC);
  print_message("all-to-all: %ld messages in %.2f s; steps %llu, steals %llu, parks %llu\n",
                sh.k * NPROC, dt, (unsigned long long)c.steps, (unsigned long long)c.steals,
                (unsigned long long)c.parks);
  xgr_rt_free(rt);
}

/* ---- spawn tree ------------------------------------------------------------------------------------
 * Each process spawns two children and waits for their subtree sizes; leaves report at once. */
typedef struct tnode {
  xgr_pid parent;
  int depth, pending;
  uint64_t count;
} tnode;

static _Atomic uint64_t g_tree_total;
static const xgr_process_vt tnode_vt;

static int tnode_init(void *self, const xgr_ctx *ctx, const char *m, void *in, xgr_error *err) {
  tnode *t = self;
  const tnode *src = in;
  t->parent = src->parent;
  t->depth = src->depth;
  (void)ctx, (void)m, (void)err;
  return 0;
}

static int tnode_step(void *self, const xgr_ctx *ctx, const xgr_event *ev, size_t n, xgr_step_out *out) {
  tnode *t = self;
  if (t->count == 0) { /* first step */
    t->count = 1;
    if (t->depth > 0) {
      tnode child = {ctx->self, t->depth - 1, 0, 0};
      for (int i = 0; i < 2; i++) REQUIRE(xgr_ctx_spawn(ctx, &tnode_vt, NULL, "node", &child, NULL, NULL) == 0);
      t->pending = 2;
    }
  }
  for (size_t i = 0; i < n; i++) {
    REQUIRE(ev[i].type == XGR_EV_MESSAGE);
    t->count += ev[i].tag;
    t->pending--;
  }
  if (t->pending > 0) {
    out->status = XGR_STEP_IDLE;
    return 0;
  }
  if (t->parent) REQUIRE(xgr_ctx_send(ctx, t->parent, t->count, NULL) == 0);
  else atomic_store(&g_tree_total, t->count);
  out->status = XGR_STEP_COMPLETE;
  return 0;
}

static const xgr_process_vt tnode_vt = {"tnode", sizeof(tnode), tnode_init, tnode_step, NULL, NULL};

static void test_spawn_tree(void **s) {
  (void)s;
  xgr_rt_config cfg = {.workers = 3};
  xgr_rt *rt = xgr_rt_new(&cfg);
  assert_int_equal(xgr_rt_start(rt, NULL), 0);
  int depth = SANITIZED ? 15 : 17;
  for (int round = 0; round < 3; round++) {
    atomic_store(&g_tree_total, 0);
    tnode root = {0, depth, 0, 0};
    assert_int_equal(xgr_rt_spawn(rt, &tnode_vt, NULL, "node", &root, NULL, NULL), 0);
    assert_int_equal(xgr_rt_wait_idle(rt, 60000), 0);
    assert_int_equal(atomic_load(&g_tree_total), (1ull << (depth + 1)) - 1);
  }
  xgr_rt_counters c;
  xgr_rt_get_counters(rt, &c);
  assert_int_equal(c.spawned, 3 * ((1ull << (depth + 1)) - 1));
  assert_int_equal(c.completed, c.spawned);
  print_message("spawn tree: steals %llu (items %llu), global batches %llu, parks %llu\n",
                (unsigned long long)c.steals, (unsigned long long)c.stolen,
                (unsigned long long)c.global_batches, (unsigned long long)c.parks);
  xgr_rt_free(rt);
}

/* ---- yields completing while the step that issued them still runs ------------------------------------
 * Each round issues an inline yield (completed at once, while the process is Running: exercises the
 * wake-up flag), a task yield (completed on another worker) and a thread yield. */
typedef struct yproc {
  int round, pending;
} yproc;

static _Atomic long g_ydone;
static long g_yrounds;

static int yproc_step(void *self, const xgr_ctx *ctx, const xgr_event *ev, size_t n, xgr_step_out *out) {
  yproc *y = self;
  (void)ctx;
  for (size_t i = 0; i < n; i++) {
    REQUIRE(ev[i].type == XGR_EV_YIELD);
    REQUIRE(ev[i].tag / 10 == (uint64_t)y->round);
    REQUIRE((uintptr_t)ev[i].data == ev[i].tag + 1);
    y->pending--;
  }
  REQUIRE(y->pending >= 0);
  if (y->pending > 0) {
    out->status = XGR_STEP_BLOCKED;
    return 0;
  }
  if (y->round == g_yrounds) {
    atomic_fetch_add(&g_ydone, 1);
    out->status = XGR_STEP_COMPLETE;
    return 0;
  }
  y->round++;
  for (uint32_t t = 1; t <= 3; t++) REQUIRE(xgr_step_yield(out, t, (uint64_t)y->round * 10 + t, NULL) == 0);
  y->pending = 3;
  out->status = XGR_STEP_BLOCKED;
  return 0;
}

static const xgr_process_vt yproc_vt = {"yproc", sizeof(yproc), NULL, yproc_step, NULL, NULL};

static void complete_now(void *hctx, const xgr_ctx *ctx, xgr_pid pid, const xgr_cmd *cmd) {
  (void)hctx;
  REQUIRE(xgr_rt_complete_yield(ctx->rt, pid, cmd->tag, (void *)(uintptr_t)(cmd->tag + 1), 0) == 0);
}

static void test_yield_races(void **s) {
  (void)s;
  xgr_rt_config cfg = {.workers = 3};
  xgr_rt *rt = xgr_rt_new(&cfg);
  xgr_handler h1 = {"inline", XGR_HANDLER_INLINE, 0, complete_now, NULL, NULL};
  xgr_handler h2 = {"task", XGR_HANDLER_TASK, 0, complete_now, NULL, NULL};
  xgr_handler h3 = {"thread", XGR_HANDLER_THREAD, 2, complete_now, NULL, NULL};
  xgr_rt_register_handler(rt, 1, &h1);
  xgr_rt_register_handler(rt, 2, &h2);
  xgr_rt_register_handler(rt, 3, &h3);
  assert_int_equal(xgr_rt_start(rt, NULL), 0);
  g_yrounds = scaled(3000, 1000);
  atomic_store(&g_ydone, 0);
  for (int i = 0; i < 32; i++) assert_int_equal(xgr_rt_spawn(rt, &yproc_vt, NULL, "m", NULL, NULL, NULL), 0);
  assert_int_equal(xgr_rt_wait_idle(rt, 60000), 0);
  assert_int_equal(atomic_load(&g_ydone), 32);
  xgr_rt_counters c;
  xgr_rt_get_counters(rt, &c);
  assert_int_equal(c.completions, 32 * 3 * g_yrounds);
  assert_int_equal(xgr_rt_shutdown(rt, 1000), 0);
  xgr_rt_free(rt);
}

/* ---- shutdown under load ----------------------------------------------------------------------------
 * Busy processes (READY forever, sending to idle ones), blocked ones (waiting on a thread handler
 * that answers after a while) and idle ones; shutdown must cancel and close every one. */
typedef struct sproc {
  int mode;
  xgr_pid target;
  bool yielded;
} sproc;

static _Atomic int g_closed;

static int sproc_init(void *self, const xgr_ctx *ctx, const char *m, void *in, xgr_error *err) {
  sproc *p = self;
  p->mode = (int)((intptr_t)in & 3);
  p->target = (xgr_pid)((uintptr_t)in >> 2);
  (void)ctx, (void)m, (void)err;
  return 0;
}

static int sproc_step(void *self, const xgr_ctx *ctx, const xgr_event *ev, size_t n, xgr_step_out *out) {
  sproc *p = self;
  for (size_t i = 0; i < n; i++)
    if (ev[i].type == XGR_EV_CANCEL) {
      out->status = XGR_STEP_COMPLETE;
      return 0;
    }
  switch (p->mode) {
  case 0: /* busy */
    if (p->target) xgr_ctx_send(ctx, p->target, 1, NULL);
    out->status = XGR_STEP_READY;
    break;
  case 1: /* blocked */
    if (!p->yielded || n > 0) xgr_step_yield(out, 1, 5, NULL);
    p->yielded = true;
    out->status = XGR_STEP_BLOCKED;
    break;
  default:
    out->status = XGR_STEP_IDLE;
  }
  return 0;
}

static void sproc_close(void *self) {
  (void)self;
  atomic_fetch_add(&g_closed, 1);
}

static const xgr_process_vt sproc_vt = {"sproc", sizeof(sproc), sproc_init, sproc_step, sproc_close, NULL};

static void answer_later(void *hctx, const xgr_ctx *ctx, xgr_pid pid, const xgr_cmd *cmd) {
  (void)hctx;
  struct timespec ts = {0, 200 * 1000};
  nanosleep(&ts, NULL);
  int rc = xgr_rt_complete_yield(ctx->rt, pid, cmd->tag, NULL, 0);
  REQUIRE(rc == 0 || rc == XGR_ENOTFOUND);
}

static void test_shutdown_under_load(void **s) {
  (void)s;
  int rounds = SANITIZED ? 3 : 10;
  for (int r = 0; r < rounds; r++) {
    atomic_store(&g_closed, 0);
    xgr_rt_config cfg = {.workers = 2 + (unsigned)(r % 3)};
    xgr_rt *rt = xgr_rt_new(&cfg);
    xgr_handler h = {"later", XGR_HANDLER_THREAD, 2, answer_later, NULL, NULL};
    xgr_rt_register_handler(rt, 1, &h);
    assert_int_equal(xgr_rt_start(rt, NULL), 0);
    xgr_pid idle[50];
    int n = 0;
    for (int i = 0; i < 50; i++, n++)
      assert_int_equal(xgr_rt_spawn(rt, &sproc_vt, NULL, "m", (void *)(intptr_t)2, &idle[i], NULL), 0);
    for (int i = 0; i < 50; i++, n++)
      assert_int_equal(xgr_rt_spawn(rt, &sproc_vt, NULL, "m", (void *)(intptr_t)1, NULL, NULL), 0);
    for (int i = 0; i < 50; i++, n++)
      assert_int_equal(xgr_rt_spawn(rt, &sproc_vt, NULL, "m",
                                    (void *)(intptr_t)(((uintptr_t)idle[i] << 2) | 0), NULL, NULL), 0);
    struct timespec ts = {0, (long)(r % 4) * 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
    assert_int_equal(xgr_rt_shutdown(rt, 20000), 0);
    assert_int_equal(atomic_load(&g_closed), n);
    xgr_rt_free(rt);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_deque_owner_thieves),
    cmocka_unit_test(test_mpsc_producers),
    cmocka_unit_test(test_messages_all_to_all),
    cmocka_unit_test(test_spawn_tree),
    cmocka_unit_test(test_yield_races),
    cmocka_unit_test(test_shutdown_under_load),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
