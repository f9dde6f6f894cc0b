/* cmd_run.c — `xgr run BUNDLE --start STEP ...`: run a session of a bundle and show its timeline
 * and final tree (or the --json report). By default the session runs on the concurrent engine
 * (xgr/engine.h) in real time: steps on worker threads, API calls through the libcurl loop,
 * waitSec on real timers, scripted actions at their real time. --virtual-time runs it on the
 * deterministic driver instead (one process at a time, a virtual clock that jumps). Both print
 * the same timeline, tree and --json report. Ctrl-C kills the session cleanly and prints the tree
 * so far (a second Ctrl-C exits at once). */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/human.h"
#include "cli/load.h"
#include "xgr/bundle.h"
#include "xgr/driver.h"
#include "xgr/chain.h"
#include "xgr/engine.h"
#include "xgr/explore.h"
#include "xgr/json.h"
#include "xgr/script.h"
#include "xgr/store.h"
#include "xgr/xrc_types.h"
#include "xgr/alloc.h"
#include "xgr/node.h"

/* a human duration for one printf argument (a compound literal lives until the end of the block) */
#define HD(ms) xgr_cli_duration((ms), (char[32]){0}, 32)

#define DEFAULT_OWNER "0x0000000000000000000000000000000000000001"

static void usage(FILE *f) {
  fputs("usage: xgr run BUNDLE --start STEP [--payload JSON|@FILE] [--owner ADDR] [--root-pid N]\n"
        "               [--wait-ms N] [--virtual-time] [--max-steps N] [--script FILE] [--api-map FROM=TO]...\n"
        "               [--max-running N] [--time-scale F] [--store FILE] [--json] [--quiet]\n"
        "               [--chain URL] [--chain NAME=URL]... [--allow-outbound CIDR]...\n\n"
        "Run one session of a bundle ({\"orchestration\": {...}, \"rules\": {...}}) from STEP and print a\n"
        "live timeline (time, pid, step, transition, outcome) and the session's tree with each join's\n"
        "k-of-n state. Runs on the concurrent engine in real time (steps in parallel on all cores,\n"
        "waitSec on real timers); Ctrl-C kills the session and prints the tree so far.\n\n"
        "  --virtual-time     run on the deterministic driver instead: one process at a time on a\n"
        "                     virtual clock that jumps to the next timer (waitSec) or scripted action\n"
        "  --time-scale F     run the engine's clock F times faster than real time (waitSec 3600\n"
        "                     passes in 3.6 s at 1000; script times are on the same clock)\n"
        "  --payload JSON     start payload (an object, or @FILE to read it from FILE; default {})\n"
        "  --wait-ms N        the start step waits N ms (session clock) before it runs, as xgrd's\n"
        "                     init.waitMs: a waiting process with that wake time (default 0)\n"
        "  --owner ADDR       session owner (default " DEFAULT_OWNER ")\n"
        "  --root-pid N       rootPid of the session (default 1)\n"
        "  --max-steps N      stop after N steps (result \"limit\"; default 10000, 0 = no limit)\n"
        "  --max-running N    at most N processes of the session run at once (default 32; a step whose\n"
        "                     branch declares a join is not held back by it)\n"
        "  --script FILE      timed control actions, e.g. [{\"at\":5000,\"wake\":{\"pid\":\"1:3\"},\"payload\":{}},\n"
        "                     {\"at\":0,\"kill\":\"1:4\"},{\"at\":0,\"pause\":\"1:2\"},{\"at\":10,\"resume\":\"1:2\"},\n"
        "                     {\"at\":20,\"retry\":\"1:4\",\"payload\":{}}] (retry: run an aborted step again)\n"
        "  --api-map FROM=TO  rewrite API URLs starting with FROM to start with TO (repeatable)\n"
        "  --chain URL        Ethereum JSON-RPC node for contract reads (the default backend);\n"
        "  --chain NAME=URL   a named backend, picked by a read's \"rpc\" selector (repeatable)\n"
        "  --allow-outbound CIDR  let API calls connect to these addresses, which the outbound policy\n"
        "                     refuses by default: loopback, link-local (169.254.169.254), private, CGNAT,\n"
        "                     unspecified, multicast, reserved (checked on the resolved address). A CIDR, an\n"
        "                     address, or loopback, link-local, private, cgnat, ..., any; comma-separated or\n"
        "                     repeated (docs/SECURITY.md, Outbound calls)\n"
        "  --store FILE       keep the run's audit trail in a SQLite store file (created if missing),\n"
        "                     as xgrd does: `xgr history --store FILE OWNER ROOTPID` reads it; without\n"
        "                     --root-pid the session takes the owner's next rootPid in that file\n"
        "  --json             print the report {\"result\",\"session\",\"processes\",\"history\",...} instead\n"
        "  --quiet            no timeline, only the tree\n"
        "  --replay FILE      with --virtual-time: replay a trace written by `xgr explore --emit` (its\n"
        "                     forced outcomes and order; --start and --payload default to the trace's;\n"
        "                     BUNDLE may then be a plain orchestration)\n\n"
        "Exit: 0 completed, 1 killed, stalled or step limit, 2 usage or unreadable input,\n"
        "3 the bundle does not load.\n",
        f);
}

typedef struct view {
  const xgr_bundle *b;
  uint64_t root;
  bool quiet;
  uint8_t *last;      /* last status seen per iter (index iter), 0xff unknown */
  size_t nlast;
} view;

/* The timeline's line for process iter (pid, step) at time `at` when its status becomes `now`
 * (created → status, with its outcome, abort reason or wake time); nothing when the status did not
 * change (payload or pause changes are shown in the tree). */
static void status_change(view *v, int64_t at, const char *pid, const char *step, uint64_t iter, uint8_t now, bool valid,
                          uint8_t abort_reason, int64_t next_wake_at) {
  if (iter >= v->nlast) {
    size_t n = v->nlast ? v->nlast : 64;
    while (n <= iter) n *= 2;
    v->last = xgr_alloc_resize(v->last, n);
    if (!v->last) abort();
    memset(v->last + v->nlast, 0xff, n - v->nlast);
    v->nlast = n;
  }
  uint8_t prev = v->last[iter];
  if (prev == now) return;
  v->last[iter] = now;
  char extra[96] = "";
  if (now == XGR_PROC_DONE) snprintf(extra, sizeof extra, "  %s", valid ? "valid" : "invalid");
  else if (now == XGR_PROC_ABORTED) snprintf(extra, sizeof extra, "  (%s)", xgr_abort_reason_name(abort_reason));
  else if (now == XGR_PROC_WAITING && next_wake_at > at && next_wake_at != XGR_NEVER)
    snprintf(extra, sizeof extra, "  until %s", HD(next_wake_at));
  printf("%10s  %-8s %-14s %s → %s%s\n", HD(at), pid, step, prev == 0xff ? "created" : xgr_proc_status_name(prev),
         xgr_proc_status_name(now), extra);
}

static void on_event(void *ctx, const xgr_driver_event *ev) {
  view *v = ctx;
  if (v->quiet) return;
  char pid[48];
  if (ev->kind == XGR_DEV_PROC || ev->kind == XGR_DEV_JOIN) {
    const xgr_proc *p = ev->effect->proc;
    xgr_pid_format(v->root, p->iter, pid, sizeof pid);
    const char *step = v->b->orch->steps[p->step].id;
    if (ev->kind == XGR_DEV_JOIN) {
      const xgr_join_state *js = p->join;
      unsigned got = 0;
      for (unsigned i = 0; i < js->decl->n; i++) got += js->inbox[i].kind != XGR_VNULL;
      printf("%10s  %-8s %-14s join %s: %u of %u pieces, k=%u, %s\n", HD(ev->now), pid, step,
             xgr_join_outcome_name(js->outcome), got, js->decl->n, js->decl->k, xgr_policy_name(js->decl->policy));
      return;
    }
    status_change(v, ev->now, pid, step, p->iter, ev->effect->status, ev->effect->valid, p->abort_reason, p->next_wake_at);
  } else if (ev->message) {
    printf("%10s  %s%s\n", HD(ev->now), ev->kind == XGR_DEV_FINISHED ? "session " : "", ev->message);
  }
}

/* ---- the final tree ---------------------------------------------------------------------------------
 * Linear in the number of processes: children are linked once (reports list processes by iter),
 * the walk uses an explicit stack, and indentation grows only where a process has several
 * children — a single child continues its parent's line of descent at the same depth ("→").
 * Runs of the same step that look alike collapse into one line with a count: a chain (each the
 * only child of the one before, e.g. a loop) and consecutive sibling leaves (a fan-out). */

typedef struct tnode {
  const json_t *p;
  size_t first, next, nchild;   /* first child, next sibling (SIZE_MAX: none) */
} tnode;

static const char *jstr(const json_t *o, const char *k) {
  const char *v = json_string_value(json_object_get(o, k));
  return v ? v : "";
}

static uint64_t iter_of(const char *pid) {
  const char *c = strchr(pid, ':');
  return c ? strtoull(c + 1, NULL, 10) : 0;
}

/* Do two processes print the same apart from their pid (and neither has a join or an error)? */
static bool alike(const json_t *a, const json_t *b) {
  if (!json_is_null(json_object_get(a, "join")) || !json_is_null(json_object_get(b, "join"))) return false;
  if (json_is_string(json_object_get(a, "error")) || json_is_string(json_object_get(b, "error"))) return false;
  static const char *const keys[] = {"step", "status", "valid", "paused", "abortReason"};
  for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
    const json_t *x = json_object_get(a, keys[k]), *y = json_object_get(b, keys[k]);
    if (!(x == y || (x && y && json_equal(x, y)))) return false;
  }
  return true;
}

static void print_line(const json_t *p, const json_t *last, size_t count, int depth, bool chained) {
  const json_t *valid = json_object_get(p, "valid");
  const json_t *join = json_object_get(p, "join");
  const char *reason = json_string_value(json_object_get(p, "abortReason"));
  int ind = depth > 32 ? 32 : depth;   /* deeper levels say their depth instead of indenting further */
  char deep[24] = "", range[96];
  if (depth > 32) snprintf(deep, sizeof deep, "[depth %d] ", depth);
  if (count > 1) snprintf(range, sizeof range, "%s … %s ×%zu", jstr(p, "pid"), jstr(last, "pid"), count);
  else snprintf(range, sizeof range, "%s", jstr(p, "pid"));
  printf("%*s%s%s%s %s  %s%s%s%s%s%s\n", ind * 2, "", deep, chained ? "→ " : "", range, jstr(p, "step"),
         jstr(p, "status"), json_is_boolean(valid) ? (json_is_true(valid) ? " valid" : " invalid") : "",
         json_is_true(json_object_get(p, "paused")) ? " paused" : "", reason ? " (" : "", reason ? reason : "",
         reason ? ")" : "");
  if (json_is_object(join)) {
    printf("%*s  join: %s, k=%d of %zu, %s; pieces from:", ind * 2, "", jstr(join, "outcome"),
           (int)json_integer_value(json_object_get(join, "k")), json_array_size(json_object_get(join, "expect")),
           jstr(join, "policy"));
    const char *k;
    json_t *v;
    int any = 0;
    json_object_foreach(json_object_get(join, "inbox"), k, v) {
      printf(" %s", k);
      any = 1;
    }
    if (!any) printf(" none");
    json_object_foreach(json_object_get(join, "fail"), k, v) printf(" [%s %s]", k, json_string_value(v));
    printf("\n");
  }
  const json_t *err = json_object_get(p, "error");
  if (json_is_string(err)) printf("%*s  error: %s\n", ind * 2, "", json_string_value(err));
}

typedef struct tframe {
  size_t node, count, last;   /* count > 1: a run of alike sibling leaves node..last */
  int depth;
  bool chained;
} tframe;

/* Push the sibling list starting at head onto the stack (reversed, so it pops in order),
 * grouping runs of three or more alike leaves into one frame. */
static void push_children(const tnode *t, tframe *st, size_t *nst, size_t head, int depth) {
  size_t mark = *nst;
  for (size_t c = head; c != SIZE_MAX;) {
    size_t last = c, cnt = 1;
    if (!t[c].nchild)
      while (t[last].next != SIZE_MAX && !t[t[last].next].nchild && alike(t[c].p, t[t[last].next].p)) {
        last = t[last].next;
        cnt++;
      }
    if (cnt < 3) {
      last = c;
      cnt = 1;
    }
    st[(*nst)++] = (tframe){c, cnt, last, depth, false};
    c = t[last].next;
  }
  for (size_t a = mark, b = *nst; b > a + 1; a++, b--) {
    tframe x = st[a];
    st[a] = st[b - 1];
    st[b - 1] = x;
  }
}

static void print_tree(const json_t *procs) {
  size_t n = json_array_size(procs);
  if (!n) return;
  tnode *t = xgr_alloc_zeroed(n, sizeof *t);
  uint64_t maxit = 0;
  for (size_t i = 0; i < n; i++) {
    t[i] = (tnode){json_array_get(procs, i), SIZE_MAX, SIZE_MAX, 0};
    uint64_t it = iter_of(jstr(t[i].p, "pid"));
    if (it > maxit) maxit = it;
  }
  size_t *by_iter = xgr_alloc_bytes((maxit + 1) * sizeof *by_iter);
  tframe *st = xgr_alloc_bytes((n + 1) * sizeof *st);
  if (!t || !by_iter || !st) abort();
  for (uint64_t k = 0; k <= maxit; k++) by_iter[k] = SIZE_MAX;
  for (size_t i = 0; i < n; i++) by_iter[iter_of(jstr(t[i].p, "pid"))] = i;
  size_t nst = 0, roots = SIZE_MAX;
  for (size_t i = n; i-- > 0;) {   /* prepend in reverse: children end up in iter order */
    const json_t *pp = json_object_get(t[i].p, "parentPid");
    uint64_t pit = json_is_string(pp) ? iter_of(json_string_value(pp)) : 0;
    size_t par = pit && pit <= maxit ? by_iter[pit] : SIZE_MAX;
    size_t *head = par == SIZE_MAX ? &roots : &t[par].first;
    t[i].next = *head;
    *head = i;
    if (par != SIZE_MAX) t[par].nchild++;
  }
  push_children(t, st, &nst, roots, 1);
  while (nst) {
    tframe f = st[--nst];
    if (f.count > 1) {   /* alike sibling leaves */
      print_line(t[f.node].p, t[f.last].p, f.count, f.depth, f.chained);
      continue;
    }
    size_t last = f.node, cnt = 1;   /* a chain of alike single children */
    while (t[last].nchild == 1 && alike(t[f.node].p, t[t[last].first].p)) {
      last = t[last].first;
      cnt++;
    }
    if (cnt < 3) {
      last = f.node;
      cnt = 1;
    }
    print_line(t[f.node].p, t[last].p, cnt, f.depth, f.chained);
    if (t[last].nchild == 1) st[nst++] = (tframe){t[last].first, 1, t[last].first, f.depth, true};
    else if (t[last].nchild > 1) push_children(t, st, &nst, t[last].first, f.depth + 1);
  }
  free(st);
  free(by_iter);
  free(t);
}

/* ---- --store: the run's audit trail in a store file ----------------------------------------------- */

typedef struct run_store {
  xgr_store *st;
  xgr_node_persist *p;             /* the engine's store hook (as in xgrd) */
  const char *registry;       /* the bundle's file name, kept as the session's registry */
  bool started;               /* deterministic driver: the session row went out */
  pthread_mutex_t mu;         /* commit callbacks run on the store's writer thread */
  int rc;
  char why[600];
} run_store;

static void store_done(void *ctx, int rc, const xgr_error *err) {
  run_store *rs = ctx;
  if (!rc) return;
  pthread_mutex_lock(&rs->mu);
  if (!rs->rc) {
    rs->rc = rc;
    snprintf(rs->why, sizeof rs->why, "%s", err ? err->message : "commit failed");
  }
  pthread_mutex_unlock(&rs->mu);
}

/* Engine: the outcome of the session's first batch (its row and start process). */
static void run_started(void *ctx, int rc) {
  if (!rc) return;
  run_store *rs = ctx;
  pthread_mutex_lock(&rs->mu);
  if (!rs->rc) {
    rs->rc = rc;
    snprintf(rs->why, sizeof rs->why, "the session's first batch was refused: %s", xgr_errcode_name(rc));
  }
  pthread_mutex_unlock(&rs->mu);
}

/* Deterministic driver: every core call's effects become one batch (the store's writer thread
 * commits queued batches together); the first is the session's start and carries its row. */
static void store_effects(void *ctx, size_t si, const xgr_session *s, const xgr_effects *fx) {
  run_store *rs = ctx;
  xgr_store_changes *c = xgr_store_changes_new();
  if (!rs->started) xgr_store_changes_add_session_start(c, s, rs->registry);
  rs->started = true;
  xgr_store_changes_add_effects(c, s, fx);
  xgr_store_submit(rs->st, c, store_done, rs);
}

/* Open FILE for a run of (owner, *root): *root 0 takes the owner's next rootPid there; a session
 * the file holds already is refused (its trail is not mixed with another run's). */
static int store_open(run_store *rs, const char *file, const char *registry, const char *owner, uint64_t *root) {
  memset(rs, 0, sizeof *rs);
  pthread_mutex_init(&rs->mu, NULL);
  rs->registry = registry;
  xgr_error e;
  rs->st = xgr_store_open(file, NULL, &e);
  if (!rs->st) {
    fprintf(stderr, "xgr run: --store %s: %s\n", file, e.message);
    return XGR_EXIT_USAGE;
  }
  if (!*root && xgr_store_next_process_id(rs->st, owner, root, &e)) {
    fprintf(stderr, "xgr run: --store %s: %s\n", file, e.message);
    return XGR_EXIT_USAGE;
  }
  xgr_store_session row;
  if (xgr_store_session_get(rs->st, owner, *root, &row, &e) == 0) {
    xgr_store_session_clear(&row);
    fprintf(stderr, "xgr run: --store %s holds session %s/%llu already; give another --root-pid, or none to take the "
            "next free one (xgr history --store %s %s %llu shows it)\n", file, owner, (unsigned long long)*root, file,
            owner, (unsigned long long)*root);
    return XGR_EXIT_USAGE;
  }
  return 0;
}

/* Close the store after the run (every batch committed); nonzero when a commit failed. */
static int store_close(run_store *rs, const char *file) {
  if (rs->st) xgr_store_flush(rs->st);
  xgr_node_persist_free(rs->p);
  xgr_store_close(rs->st);
  pthread_mutex_destroy(&rs->mu);
  if (!rs->rc) return 0;
  fprintf(stderr, "xgr run: --store %s: %s (the trail stops at the last committed step)\n", file, rs->why);
  return XGR_EXIT_HARD;
}

/* ---- the concurrent engine --------------------------------------------------------------------- */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
  if (interrupted) _exit(130);   /* a second Ctrl-C: leave at once */
  interrupted = 1;
}

typedef struct eview {
  view v;
  pthread_mutex_t mu;   /* events of one session come from one actor at a time; keep lines whole */
} eview;

static void on_engine_event(void *ctx, const xgr_engine_event *ev) {
  eview *ev_ = ctx;
  view *v = &ev_->v;
  if (v->quiet) return;
  pthread_mutex_lock(&ev_->mu);
  char pid[48];
  if (ev->kind == XGR_EEV_PROC || ev->kind == XGR_EEV_JOIN) {
    const xgr_engine_proc *p = ev->proc;
    xgr_pid_format(v->root, p->iter, pid, sizeof pid);
    if (ev->kind == XGR_EEV_JOIN) {
      const json_t *j = p->join;
      printf("%10s  %-8s %-14s join %s: %zu of %zu pieces, k=%d, %s\n", HD(ev->now), pid, p->step_id,
             json_string_value(json_object_get(j, "outcome")), json_object_size(json_object_get(j, "inbox")),
             json_array_size(json_object_get(j, "expect")), (int)json_integer_value(json_object_get(j, "k")),
             json_string_value(json_object_get(j, "policy")));
      pthread_mutex_unlock(&ev_->mu);
      return;
    }
    status_change(v, ev->now, pid, p->step_id, p->iter, p->status, p->valid, p->abort_reason, p->next_wake_at);
  } else if (ev->message && ev->kind != XGR_EEV_IDLE) {
    printf("%10s  %s%s\n", HD(ev->now), ev->kind == XGR_EEV_FINISHED ? "session " : "", ev->message);
  }
  fflush(stdout);
  pthread_mutex_unlock(&ev_->mu);
}

/* Run the session on the engine in real time; *rep gets the report. Returns 0 or an exit code. */
static int run_engine(const xgr_bundle *b, const char *owner, uint64_t root, const char *start, xgr_value payload,
                      int64_t wait_ms, const json_t *script, uint64_t max_steps, uint32_t max_running, const xgr_api_map_entry *map,
                      size_t nmap, const xgr_chain_reader *chain, const xgr_outbound_policy *outbound, double scale,
                      bool quiet, run_store *rs, json_t **rep) {
  eview ev = {.v = {.b = b, .root = root, .quiet = quiet}};
  pthread_mutex_init(&ev.mu, NULL);
  if (rs) rs->p = xgr_node_persist_new(rs->st);
  xgr_engine_config cfg = {.max_running = max_running, .api_map = map, .napi_map = nmap, .ordered = true, .chain = chain,
                           .outbound = outbound,
                           .keep_finished = true, .store = rs ? xgr_node_persist_hook(rs->p) : NULL,
                           .clock = {.kind = scale == 1 ? XGR_CLOCK_REAL : XGR_CLOCK_SCALED, .scale = scale}};
  xgr_error e;
  xgr_engine *eng = xgr_engine_new(&cfg, &e);
  if (!eng) {
    fprintf(stderr, "xgr run: %s\n", e.message);
    return XGR_EXIT_HARD;
  }
  xgr_engine_subscribe(eng, on_engine_event, &ev);
  xgr_engine_start req = {.bundle = b, .owner = owner, .root_pid = root, .start = start, .payload = payload,
                          .max_steps = max_steps, .record = true};
  int code = 0;
  int64_t t0 = xgr_engine_now(eng);   /* the session's start: script times count from here */
  req.start_at = t0 + wait_ms;
  if (rs) {   /* the session's first batch carries its row, as in xgrd */
    req.registry = rs->registry;
    req.started = run_started;
    req.started_ctx = rs;
  }
  if (xgr_engine_start_session(eng, &req, &e)) {
    fprintf(stderr, "xgr run: %s%s%s\n", e.path[0] ? e.path : "", e.path[0] ? ": " : "", e.message);
    code = XGR_EXIT_USAGE;
  } else if (script && xgr_engine_add_script(eng, root, script, t0, &e)) {   /* checked before: cannot fail */
    fprintf(stderr, "xgr run: --script: %s%s%s\n", e.path, e.path[0] ? ": " : "", e.message);
    xgr_engine_kill(eng, owner, root, 0, &e);
    code = XGR_EXIT_USAGE;
  } else {
    struct sigaction sa = {.sa_handler = on_sigint}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    int w;
    while ((w = xgr_engine_wait(eng, owner, root, 100)) == XGR_ETIMEOUT) {
      if (!interrupted) continue;
      if (!quiet) printf("%10s  interrupted: killing the session\n", HD(xgr_engine_now(eng)));
      xgr_engine_kill(eng, owner, root, 0, &e);
      interrupted = 0;
    }
    sigaction(SIGINT, &old, NULL);
    *rep = xgr_engine_report(eng, owner, root, &e);
    if (!*rep) {
      fprintf(stderr, "xgr run: %s\n", e.message);
      code = XGR_EXIT_HARD;
    }
  }
  xgr_engine_free(eng);
  pthread_mutex_destroy(&ev.mu);
  free(ev.v.last);
  return code;
}

/* The command, with --chain backends collected into *chain and --allow-outbound into *outbound
 * (freed by xgr_cmd_run). */
static int run_cmd(int argc, char **argv, xgr_chain **chain, xgr_outbound_policy **outbound) {
  const char *start = NULL, *payload_s = NULL, *owner = DEFAULT_OWNER, *script_file = NULL, *store_file = NULL;
  const char *replay_file = NULL;
  json_t *replay = NULL;
  char *replay_payload = NULL;   /* the trace's payload as text, when --payload is not given */
  long long max_steps = 10000, root_pid = 0, max_running = 0, wait_ms = 0;
  int as_json = 0, quiet = 0, virtual_time = 0;
  double scale = 1;
  xgr_api_map_entry map[32];
  size_t nmap = 0;
  static const struct option opts[] = {
    {"start", required_argument, NULL, 's'}, {"payload", required_argument, NULL, 'p'},
    {"owner", required_argument, NULL, 'o'}, {"virtual-time", no_argument, NULL, 'v'},
    {"max-steps", required_argument, NULL, 'm'}, {"script", required_argument, NULL, 'S'},
    {"json", no_argument, NULL, 'j'}, {"api-map", required_argument, NULL, 'a'},
    {"root-pid", required_argument, NULL, 'r'}, {"max-running", required_argument, NULL, 'c'},
    {"quiet", no_argument, NULL, 'q'}, {"help", no_argument, NULL, 'h'}, {"time-scale", required_argument, NULL, 'T'},
    {"store", required_argument, NULL, 'D'}, {"chain", required_argument, NULL, 'C'},
    {"replay", required_argument, NULL, 'R'}, {"wait-ms", required_argument, NULL, 'W'},
    {"allow-outbound", required_argument, NULL, 'O'}, {0, 0, 0, 0}};
  int ch;
  optind = 1;
  while ((ch = xgr_cli_getopt(argc, argv, "s:p:o:vm:S:ja:r:c:qhT:D:C:R:W:O:", opts, "xgr run")) != -1) {
    char *end;
    switch (ch) {
      case 's': start = optarg; break;
      case 'p': payload_s = optarg; break;
      case 'o': owner = optarg; break;
      case 'v': virtual_time = 1; break;
      case 'S': script_file = optarg; break;
      case 'D': store_file = optarg; break;
      case 'R': replay_file = optarg; break;
      case 'j': as_json = 1; break;
      case 'q': quiet = 1; break;
      case 'T':
        scale = strtod(optarg, &end);
        if (*end || !(scale > 0) || scale > 1e9) {
          fprintf(stderr, "xgr run: --time-scale is '%s'; expected a number above 0 (at most 1e9)\n", optarg);
          return XGR_EXIT_USAGE;
        }
        break;
      case 'm':
      case 'r':
      case 'c':
      case 'W': {
        errno = 0;
        long long v = strtoll(optarg, &end, 10);
        if (*end || end == optarg || errno == ERANGE || v < 0 || (ch == 'r' && v == 0)) {   /* no silent clamping */
          fprintf(stderr, "xgr run: --%s is '%s'; expected a %s integer below 2^63\n",
                  ch == 'm' ? "max-steps" : ch == 'r' ? "root-pid" : ch == 'W' ? "wait-ms" : "max-running", optarg,
                  ch == 'r' ? "positive" : "non-negative");
          return XGR_EXIT_USAGE;
        }
        if (ch == 'W' && v > XGR_MAX_WAIT_MS) {   /* the longest waitSec, as xgrd's init.waitMs */
          fprintf(stderr, "xgr run: --wait-ms is '%s'; expected at most %lld (the longest waitSec, in ms)\n", optarg,
                  (long long)XGR_MAX_WAIT_MS);
          return XGR_EXIT_USAGE;
        }
        if (ch == 'm') max_steps = v;
        else if (ch == 'r') root_pid = v;
        else if (ch == 'W') wait_ms = v;
        else max_running = v;
        break;
      }
      case 'a':
        if (xgr_cli_api_map_arg("xgr run", optarg, map, &nmap, sizeof map / sizeof map[0])) return XGR_EXIT_USAGE;
        break;
      case 'C':
        if (xgr_cli_chain_arg("xgr run", optarg, chain)) return XGR_EXIT_USAGE;
        break;
      case 'O':
        if (xgr_cli_outbound_arg("xgr run", optarg, outbound)) return XGR_EXIT_USAGE;
        break;
      case 'h': usage(stdout); return XGR_EXIT_OK;
      default: return XGR_EXIT_USAGE;   /* reported by xgr_cli_getopt */
    }
  }
  if (!xgr_xrc_is_address(owner, strlen(owner))) {
    fprintf(stderr, "xgr run: --owner is '%s'; expected an address (\"0x\" and 40 hex digits)\n", owner);
    return XGR_EXIT_USAGE;
  }
  char owner_lc[43];   /* addresses compare case-insensitively; kept lowercased, as xgrd does */
  for (size_t k = 0; k < 43; k++) owner_lc[k] = (char)tolower((unsigned char)owner[k]);
  owner = owner_lc;
  if (replay_file) {   /* a trace of `xgr explore --emit`: its start and payload unless given */
    char *rbuf;
    size_t rlen;
    xgr_error re;
    if (!virtual_time || xgr_file_read(replay_file, &rbuf, &rlen, 64u << 20, &re) || (xgr_json_parse(rbuf, rlen, &replay, &re), free(rbuf), !replay)) {
      fprintf(stderr, "xgr run: --replay %s: %s\n", replay_file, virtual_time ? re.message : "needs --virtual-time");
      return XGR_EXIT_USAGE;
    }
    const json_t *rs = json_object_get(replay, "replay");
    if (!start) start = json_string_value(json_object_get(rs, "start"));
    if (!payload_s && json_is_object(json_object_get(rs, "payload")))
      payload_s = replay_payload = json_dumps(json_object_get(rs, "payload"), JSON_COMPACT);
  }
  if (optind != argc - 1 || !start) {
    fprintf(stderr, "xgr run: %s\n", !start ? "--start STEP is required" : "exactly one BUNDLE is expected");
    usage(stderr);
    free(replay_payload);
    json_decref(replay);
    return XGR_EXIT_USAGE;
  }
  xgr_error e;
  xgr_value payload = xgr_value_null();
  if (payload_s && xgr_cli_value_arg("xgr run", "--payload", payload_s, 0, true, &payload)) {   /* JSON, or @FILE */
    free(replay_payload);
    json_decref(replay);
    return XGR_EXIT_USAGE;
  }
  free(replay_payload);
  json_t *script = NULL;
  if (script_file) {
    char *buf;
    size_t len;
    xgr_script_action *acts = NULL;
    size_t nacts = 0;
    int bad = xgr_file_read(script_file, &buf, &len, 16u << 20, &e);
    if (!bad) {
      bad = xgr_json_parse(buf, len, &script, &e) || xgr_script_parse(script, &acts, &nacts, &e);
      free(buf);
    }
    xgr_script_free(acts, nacts);   /* checked here, before anything starts; each driver parses it again */
    if (bad) {   /* one line: FILE, the entry's path, what was wrong */
      fprintf(stderr, "xgr run: --script %s%s%s: %s\n", script_file, e.path[0] ? " " : "", e.path, e.message);
      xgr_value_release(payload);
      json_decref(script);
      return XGR_EXIT_USAGE;
    }
  }
  xgr_diags d;
  xgr_diags_init(&d);
  xgr_bundle *b = NULL;
  int rc = xgr_bundle_load_file(argv[optind], &b, &e, &d);
  if (rc && replay) {   /* a plain orchestration: a trace of forced outcomes needs no rules */
    xgr_orch *po = NULL;
    xgr_diags d2;
    xgr_diags_init(&d2);
    if (!xgr_orch_load_file(argv[optind], &po, &e, &d2) && (b = xgr_alloc_zeroed(1, sizeof *b))) {
      b->orch = po;
      rc = 0;
      xgr_diags_free(&d);
      xgr_diags_init(&d);
    } else {
      xgr_orch_free(po);
    }
    xgr_diags_free(&d2);
  }
  if (rc) {
    cli_print_errors(stderr, argv[optind], &d);
    xgr_diags_free(&d);
    xgr_value_release(payload);
    json_decref(script);
    return rc == XGR_EIO ? XGR_EXIT_USAGE : XGR_EXIT_HARD;
  }
  xgr_diags_free(&d);
  if (xgr_orch_find(b->orch, start) < 0) {
    fprintf(stderr, "xgr run: --start: \"%s\" is not a step of orchestration \"%s\"\n", start, b->orch->id);
    xgr_bundle_free(b);
    xgr_value_release(payload);
    json_decref(script);
    return XGR_EXIT_USAGE;
  }
  cli_warn_undeclared_start("xgr run", "--payload", payload, b, start);
  run_store rs_, *rs = NULL;
  if (store_file) {
    uint64_t r = (uint64_t)root_pid;
    int code = store_open(&rs_, store_file, argv[optind], owner, &r);
    if (code) {
      store_close(&rs_, store_file);
      xgr_bundle_free(b);
      xgr_value_release(payload);
      json_decref(script);
      return code;
    }
    root_pid = (long long)r;
    rs = &rs_;
  }
  if (!root_pid) root_pid = 1;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  xgr_chain_reader reader;
  if (*chain) reader = xgr_chain_reader_of(*chain);
  if (!virtual_time) {
    json_t *rep = NULL;
    int code = run_engine(b, owner, (uint64_t)root_pid, start, payload, wait_ms, script, (uint64_t)max_steps,
                          (uint32_t)max_running, map, nmap, *chain ? &reader : NULL, *outbound, scale, quiet || as_json, rs, &rep);
    if (!code) {
      const char *result = json_string_value(json_object_get(rep, "result"));
      long long steps = (long long)json_integer_value(json_object_get(rep, "steps"));
      if (as_json) {
        char *txt = xgr_json_dumps(rep, XGR_JSON_PRETTY);
        if (txt) puts(txt);
        free(txt);
      } else {
        printf("\nsession %s/%lld: %s after %lld step%s, clock %s\n", owner, root_pid, result, steps,
               steps == 1 ? "" : "s", HD(json_integer_value(json_object_get(rep, "clockMs"))));
        print_tree(json_object_get(rep, "processes"));
      }
      code = strcmp(result, "completed") ? XGR_EXIT_FAIL : XGR_EXIT_OK;
    }
    json_decref(rep);
    if (rs) {
      int sc = store_close(rs, store_file);
      if (sc) code = sc;
    }
    xgr_bundle_free(b);
    xgr_value_release(payload);
    json_decref(script);
    curl_global_cleanup();
    return code;
  }
  view v = {.b = b, .root = (uint64_t)root_pid, .quiet = quiet || as_json};
  xgr_driver_config cfg = {.api_map = map, .napi_map = nmap, .chain = *chain ? &reader : NULL, .outbound = *outbound,
                           .max_steps = (uint64_t)max_steps, .record = true,
                           .max_running = (uint32_t)max_running, .observe = on_event, .observe_ctx = &v,
                           .on_effects = rs ? store_effects : NULL, .effects_ctx = rs};
  xgr_driver *drv = xgr_driver_new(&cfg);
  int exit_code = XGR_EXIT_OK;
  if ((script && xgr_driver_add_script(drv, script, &e)) ||
      xgr_driver_add_session_at(drv, b, owner, (uint64_t)root_pid, start, payload, wait_ms, &e)) {
    fprintf(stderr, "xgr run: %s%s%s\n", e.path[0] ? e.path : "", e.path[0] ? ": " : "", e.message);
    exit_code = XGR_EXIT_USAGE;
  } else {
    if (replay && xgr_explore_replay(drv, b, replay, &e))
      fprintf(stderr, "xgr run: --replay %s: %s: %s\n", replay_file, e.path, e.message);
    else if (!replay)
      xgr_driver_run(drv);
    json_t *rep = xgr_driver_report(drv, 0);
    const char *result = json_string_value(json_object_get(rep, "result"));
    if (as_json) {
      char *s = xgr_json_dumps(rep, XGR_JSON_PRETTY);
      if (s) puts(s);
      free(s);
    } else {
      printf("\nsession %s/%lld: %s after %llu step%s, clock %s\n", owner, root_pid, result,
             (unsigned long long)xgr_driver_steps(drv), xgr_driver_steps(drv) == 1 ? "" : "s",
             HD(xgr_driver_now(drv)));
      print_tree(json_object_get(rep, "processes"));
    }
    exit_code = strcmp(result, "completed") ? XGR_EXIT_FAIL : XGR_EXIT_OK;
    json_decref(rep);
  }
  xgr_driver_free(drv);
  if (rs) {
    int sc = store_close(rs, store_file);
    if (sc) exit_code = sc;
  }
  xgr_bundle_free(b);
  xgr_value_release(payload);
  json_decref(script);
  free(v.last);
  json_decref(replay);
  curl_global_cleanup();
  return exit_code;
}

int xgr_cmd_run(int argc, char **argv) {
  xgr_chain *chain = NULL;
  xgr_outbound_policy *outbound = NULL;
  int code = run_cmd(argc, argv, &chain, &outbound);
  xgr_chain_free(chain);
  xgr_outbound_policy_free(outbound);
  return code;
}
