/* cmd_migrate.c — `xgr migrate-check OLD NEW [--map OLD=NEW]... [--store FILE | --url U --registry R]`:
 * decide whether sessions of OLD can move to NEW (xgr/migrate.h). With --store, every live session
 * of the store file that runs OLD (its orchestration hash; or --session OWNER/ROOTPID, --owner) is
 * restored and checked at its safe point (a running step counted as not yet run); with --registry
 * the same sessions are read from a running xgrd instead (xgr.liveSessions, page by page, with the
 * caller's permit; the records come back as a store file gives them: xgr_store_live_from_json) and
 * go through the same check; without either, every state
 * of OLD with no step running that an exploration from each start step reaches is checked. Prints
 * NEW's new `xgr check` findings, then each unsafe session or state with its problems and the
 * findings the migration adds, each with the shortest trace from the migrated state, as `xgr
 * explore` prints them. Exit: 0 every one is safe, 1 one is not, 2 usage or unreadable input, 3 a
 * file does not load. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/load.h"
#include "cli/opts.h"
#include "xgr/alloc.h"
#include "xgr/bundle.h"
#include "xgr/json.h"
#include "xgr/migrate.h"
#include "xgr/store.h"

#define MAX_MAP 128
#define MAX_SEL 1024

static void usage(FILE *f) {
  fprintf(f,
        "usage: xgr migrate-check OLD NEW [--map OLD_STEP=NEW_STEP]... [--store FILE | --url URL --registry R]\n"
        "                         [--owner ADDR] [--session OWNER/ROOTPID]... [--hash H] [--outcomes LIST]\n"
        "                         [--max-states N] [--json] [--key FILE] [--from ADDR] [--timeout MS]\n\n"
        "Decide whether sessions running OLD (a bundle or orchestration file) can move to NEW:\n"
        "  statically: every step a live process is at has a target in NEW (the step of the same id,\n"
        "    or the one --map names); every open join keeps a target whose `from` accepts the pieces\n"
        "    already in its inbox and which can still be satisfied; `xgr check` findings of NEW that\n"
        "    OLD did not have are listed;\n"
        "  by exploration: NEW is explored from the migrated state and OLD from the original state\n"
        "    (xgr explore); the migration is safe when NEW adds no finding: no join that becomes\n"
        "    unfulfillable, no step OLD reaches that NEW never runs, no new loop, no stall.\n"
        "Each unsafe session (or state) is named with the findings it adds and their shortest traces.\n\n"
        "  --map A=B          the processes at OLD step A move to NEW step B (repeatable)\n"
        "  --store FILE       check the live sessions of this store file (an SQLite path or URL) whose\n"
        "                     orchestration hash is OLD's; without --store or --registry, every state of\n"
        "                     OLD with no step running that an exploration from each start step reaches\n"
        "  --registry R       check the live sessions started from registry R that a running xgrd holds\n"
        "                     (--url; xgr.liveSessions, read with the caller's permit: the owner reads its\n"
        "                     own sessions, an operator every owner's), exactly as a store file's\n"
        "  --owner ADDR       only that owner's sessions (with --store or --registry; with --registry the\n"
        "                     default is the caller's own, or every owner's for an operator)\n"
        "  --session O/R      only these sessions (with --store or --registry; repeatable)\n"
        "  --hash H           the sessions pinned to bundle (or orchestration) hash H run OLD (with --store\n"
        "                     or --registry; a registered document's hash is of its exact bytes, OLD's file\n"
        "                     hashes its own: `xgr versions` lists the hashes); without it, sessions whose\n"
        "                     orchestration hash is OLD's\n"
        "  --outcomes LIST    outcomes a step execution can have (default valid,invalid,error)\n"
        "  --max-states N     bound of each exploration (default 20000)\n"
        "  --json             {\"old\",\"new\",\"map\",\"checkFindings\",\"checked\",\"safe\",\"unsafe\",\n"
        "                     \"sessions\"|\"states\":[{...,\"safe\",\"problems\",\"added\"}]}\n"
        "With --registry (the options every client command takes):\n%s\n"
        "Exit: 0 every session is safe, 1 one is not, 2 usage, unreadable input or xgrd refused or\n"
        "unreachable, 3 a file does not load.\n",
        xgr_client_opts_help);
}

typedef struct loaded {
  xgr_orch *o;
  xgr_bundle *b;
} loaded;

static const xgr_orch *orch_of(const loaded *l) { return l->b ? l->b->orch : l->o; }

static int load(const char *file, loaded *l) {
  char *buf;
  size_t len;
  xgr_error e;
  memset(l, 0, sizeof *l);
  if (xgr_file_read(file, &buf, &len, 64u << 20, &e)) {
    fprintf(stderr, "xgr migrate-check: %s: %s\n", file, e.message);
    return XGR_EXIT_USAGE;
  }
  xgr_diags d;
  xgr_diags_init(&d);
  int rc = xgr_bundle_detect(buf, len) ? xgr_bundle_parse(buf, len, &l->b, &e, &d) : xgr_orch_parse(buf, len, &l->o, &e, &d);
  free(buf);
  if (rc) cli_print_errors(stderr, file, &d);
  xgr_diags_free(&d);
  return rc ? XGR_EXIT_HARD : 0;
}

typedef struct run {
  xgr_migrate_checker *c;
  json_t *list;           /* sessions or states */
  size_t safe, unsafe;
} run;

static void add_verdict(run *r, json_t *entry, json_t *v) {
  json_object_update(entry, v);
  json_decref(v);
  if (json_is_true(json_object_get(entry, "safe"))) r->safe++;
  else r->unsafe++;
  json_array_append_new(r->list, entry);
}

/* What a state looks like: [{"pid","step","status","nextWakeAt"?}] */
typedef struct desc_ctx {
  json_t *a;
  const xgr_session *s;
} desc_ctx;

static void desc_proc(void *ctx, const xgr_proc *p) {
  desc_ctx *d = ctx;
  char pid[48];
  xgr_pid_format(xgr_session_root_pid(d->s), p->iter, pid, sizeof pid);
  json_t *e = json_pack("{s:s, s:s, s:s}", "pid", pid, "step", xgr_session_orch(d->s)->steps[p->step].id, "status",
                        p->join && !p->join->closed ? "join-open" : xgr_proc_status_name(p->status));
  json_array_append_new(d->a, e);
}

static int pid_cmp(const void *a, const void *b) {
  const char *x = json_string_value(json_object_get(*(json_t *const *)a, "pid"));
  const char *y = json_string_value(json_object_get(*(json_t *const *)b, "pid"));
  size_t lx = strlen(x), ly = strlen(y);
  return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x, y);
}

static json_t *describe(const xgr_session *s) {
  desc_ctx d = {json_array(), s};
  xgr_session_foreach(s, desc_proc, &d);
  xgr_json_array_sort(d.a, pid_cmp);
  return d.a;
}

/* ---- without a store: every reachable state of OLD at a safe point ----------------------------------- */

typedef struct states_ctx {
  xgr_session **s;
  int64_t *now;
  size_t n, cap;
} states_ctx;

static void keep_state(void *ctx, const xgr_session *s, int64_t now) {
  states_ctx *c = ctx;
  if (xgr_session_running(s) || !xgr_session_live(s)) return;   /* not a safe point / nothing to move */
  if (c->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 64;
    c->s = xgr_alloc_resize(c->s, c->cap * sizeof *c->s);
    c->now = xgr_alloc_resize(c->now, c->cap * sizeof *c->now);
  }
  c->s[c->n] = xgr_session_clone(s);
  c->now[c->n++] = now;
}

static void check_states(run *r, const xgr_orch *o, const xgr_bundle *b, const xgr_explore_config *cfg) {
  bool target[XGR_MAX_STEPS] = {0};
  for (size_t i = 0; i < o->nsteps; i++)
    for (int br = 0; br < 2; br++) {
      const xgr_branch *bb = &o->steps[i].branch[br];
      for (unsigned k = 0; k < bb->nspawns; k++)
        if (bb->spawns[k] != i) target[bb->spawns[k]] = true;
      if (bb->join && bb->join->target != i) target[bb->join->target] = true;
    }
  for (size_t i = 0; i < o->nsteps; i++) {
    if (target[i]) continue;
    states_ctx sc = {0};
    xgr_error e;
    bool complete = true;
    xgr_explore_states(o, b, o->steps[i].id, xgr_value_null(), cfg, keep_state, &sc, &complete, &e);
    for (size_t k = 0; k < sc.n; k++) {
      json_t *entry = json_pack("{s:s, s:I, s:o}", "start", o->steps[i].id, "clockMs", (json_int_t)sc.now[k], "processes",
                                describe(sc.s[k]));
      add_verdict(r, entry, xgr_migrate_check_session(r->c, sc.s[k], sc.now[k]));
      xgr_session_free(sc.s[k]);
    }
    free(sc.s);
    free(sc.now);
  }
}

/* ---- with a store: its live sessions on OLD ---------------------------------------------------------- */

typedef struct store_ctx {
  run *r;
  const xgr_orch *o;
  const char *owner;
  char **sel_owner;
  uint64_t *sel_root;
  size_t nsel;
  const char *hash;       /* --hash: the sessions pinned to this bundle or orchestration hash run OLD */
  size_t skipped;
} store_ctx;

static int on_live(void *ctx, const xgr_store_live *l) {
  store_ctx *c = ctx;
  const xgr_store_session *ss = l->session;
  if (c->owner && strcasecmp(c->owner, ss->owner)) return 0;
  if (c->nsel) {
    bool in = false;
    for (size_t i = 0; i < c->nsel && !in; i++) in = !strcasecmp(c->sel_owner[i], ss->owner) && c->sel_root[i] == ss->root_pid;
    if (!in) return 0;
  }
  bool by_hash = c->hash && ((ss->bundle_hash && !strcasecmp(ss->bundle_hash, c->hash)) ||
                              (ss->ostc_hash && !strcasecmp(ss->ostc_hash, c->hash)));
  if (!by_hash && (!ss->ostc_hash || strcasecmp(ss->ostc_hash, c->o->hash))) {
    c->skipped++;
    return 0;
  }
  /* named by --hash: the caller says OLD is the orchestration those sessions run (a registered
   * document's hash is of its exact bytes, the file's of its own), so the row's hash is not checked */
  xgr_store_session row = *ss;
  if (by_hash) row.ostc_hash = NULL;
  xgr_store_live lv = *l;
  lv.session = &row;
  l = &lv;
  json_t *entry = json_pack("{s:s, s:I}", "owner", ss->owner, "rootPid", (json_int_t)ss->root_pid);
  xgr_error e;
  xgr_error_clear(&e);
  xgr_effects fx;
  xgr_effects_init(&fx);
  /* the clock of the session: its latest process change (timers are relative to it) */
  int64_t now = 0;
  for (size_t i = 0; i < l->nprocs; i++) {
    if (l->procs[i].created_at > now) now = l->procs[i].created_at;
    if (l->procs[i].started_at > now) now = l->procs[i].started_at;
  }
  xgr_session *s = xgr_store_restore_session(c->o, l, NULL, now, &fx, &e);
  xgr_effects_free(&fx);
  if (!s) {
    json_object_set_new(entry, "safe", json_false());
    json_object_set_new(entry, "problems", json_pack("[{s:s, s:s}]", "path", e.path, "message", e.message));
    json_object_set_new(entry, "added", json_array());
    c->r->unsafe++;
    json_array_append_new(c->r->list, entry);
    return 0;
  }
  json_object_set_new(entry, "processes", describe(s));
  add_verdict(c->r, entry, xgr_migrate_check_session(c->r->c, s, now));
  xgr_session_free(s);
  return 0;
}

/* ---- from xgrd: the live sessions it holds (xgr.liveSessions), checked as a store file's ---------------- */

#define REMOTE_MAX_PROCS 1000000   /* processes of one session read from an answer */

static int check_remote(store_ctx *ctx, const xgr_client *cl, const char *registry, const char *owner) {
  uint64_t before = 0;
  for (;;) {
    json_t *params = json_pack("{s:s}", "registry", registry), *res = NULL;
    if (owner) json_object_set_new(params, "owner", json_string(owner));
    if (before) {
      char b[24];
      snprintf(b, sizeof b, "%" PRIu64, before);
      json_object_set_new(params, "beforeRootPid", json_string(b));
    }
    if (xgr_client_call(cl, "migrate-check", "xgr.liveSessions", params, &res)) return XGR_EXIT_USAGE;   /* reason printed */
    const json_t *ss = json_object_get(res, "sessions"), *nv = json_object_get(res, "nextBeforeRootPid");
    const char *nt = xgr_json_text(nv);
    uint64_t next = 0;
    char *end = NULL;
    if (nt) next = strtoull(nt, &end, 10);
    if (!json_is_array(ss) || (!json_is_null(nv) && (!nt || !end || *end || !next || (before && next >= before)))) {
      fprintf(stderr, "xgr migrate-check: xgrd at %s answered xgr.liveSessions without \"sessions\" or with a bad "
                      "\"nextBeforeRootPid\"\n", cl->url);
      json_decref(res);
      return XGR_EXIT_USAGE;
    }
    size_t i;
    const json_t *j;
    json_array_foreach(ss, i, j) {
      char path[48];
      snprintf(path, sizeof path, "sessions[%zu]", i);
      xgr_store_live_owned lo;
      xgr_error e;
      if (xgr_store_live_from_json(j, path, REMOTE_MAX_PROCS, &lo, &e)) {
        fprintf(stderr, "xgr migrate-check: xgrd's answer: %s\n", e.message);
        json_decref(res);
        return XGR_EXIT_USAGE;
      }
      on_live(ctx, &lo.live);
      xgr_store_live_owned_clear(&lo);
    }
    json_decref(res);
    if (!next) return 0;
    before = next;
  }
}

/* Sessions in (owner, rootPid) order, the store's: the answer does not depend on where they were read. */
static int session_cmp(const void *a, const void *b) {
  const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
  int c = strcmp(json_string_value(json_object_get(x, "owner")), json_string_value(json_object_get(y, "owner")));
  if (c) return c;
  json_int_t rx = json_integer_value(json_object_get(x, "rootPid")), ry = json_integer_value(json_object_get(y, "rootPid"));
  return (rx > ry) - (rx < ry);
}


/* ---- printing ----------------------------------------------------------------------------------------- */

static void print_entry(const json_t *x) {
  if (json_object_get(x, "owner"))
    printf("UNSAFE session %s/%lld\n", json_string_value(json_object_get(x, "owner")),
           (long long)json_integer_value(json_object_get(x, "rootPid")));
  else
    printf("UNSAFE state from %s:", json_string_value(json_object_get(x, "start")));
  size_t i;
  const json_t *p;
  if (!json_object_get(x, "owner")) {
    json_array_foreach(json_object_get(x, "processes"), i, p)
      printf(" %s@%s(%s)", json_string_value(json_object_get(p, "pid")), json_string_value(json_object_get(p, "step")),
             json_string_value(json_object_get(p, "status")));
    printf("\n");
  }
  json_array_foreach(json_object_get(x, "problems"), i, p)
    printf("  problem %s: %s\n", json_string_value(json_object_get(p, "path")), json_string_value(json_object_get(p, "message")));
  json_array_foreach(json_object_get(x, "added"), i, p) {
    printf("  adds %s %s: %s\n", json_string_value(json_object_get(p, "severity")), json_string_value(json_object_get(p, "kind")),
           json_string_value(json_object_get(p, "message")));
    if (json_array_size(json_object_get(p, "trace"))) {
      printf("    trace (from the migrated state):\n");
      xgr_cli_print_trace(json_object_get(p, "trace"));
    }
  }
  if (!json_array_size(json_object_get(x, "problems")) && !json_array_size(json_object_get(x, "added")))
    printf("  an exploration was cut by its bounds (complete: false): nothing is proved (raise --max-states)\n");
}

int xgr_cmd_migrate_check(int argc, char **argv) {
  const char *store = NULL, *owner = NULL;
  const char *from[MAX_MAP], *to[MAX_MAP];
  char *mapbuf[MAX_MAP];
  size_t nmap = 0, nsel = 0;
  char *sel_owner[MAX_SEL];
  uint64_t sel_root[MAX_SEL];
  xgr_explore_config cfg = {0};
  const char *hash = NULL, *registry = NULL;
  int code = XGR_EXIT_USAGE;
  static const struct option opts[] = {
    {"map", required_argument, NULL, 'm'}, {"store", required_argument, NULL, 's'}, {"owner", required_argument, NULL, 'O'},
    {"session", required_argument, NULL, 'S'}, {"outcomes", required_argument, NULL, 'o'},
    {"hash", required_argument, NULL, 'H'}, {"registry", required_argument, NULL, 'r'},
    {"max-states", required_argument, NULL, 'M'}, XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  int ch;
  optind = 1;
  xgr_client cl;
  xgr_client_init(&cl);
  const char *url0 = cl.url;
  xgr_error e;
  loaded lo = {0}, ln = {0};
  json_t *out = NULL;
  xgr_migrate_checker *c = NULL;
  while ((ch = xgr_client_getopt(&cl, argc, argv, opts, "xgr migrate-check", usage, &code)) != -1) {
    if (ch == -2) goto done;
    code = XGR_EXIT_USAGE;
    switch (ch) {
      case 'm': {
        char *eq = strchr(optarg, '=');
        if (!eq || eq == optarg || !eq[1] || nmap == MAX_MAP) {
          fprintf(stderr, "xgr migrate-check: --map is '%s'; expected OLD_STEP=NEW_STEP (at most %d)\n", optarg, MAX_MAP);
          goto done;
        }
        mapbuf[nmap] = xgr_alloc_strdup(optarg);
        mapbuf[nmap][eq - optarg] = '\0';
        from[nmap] = mapbuf[nmap];
        to[nmap] = mapbuf[nmap] + (eq - optarg) + 1;
        nmap++;
        break;
      }
      case 's': store = optarg; break;
      case 'r': registry = optarg; break;
      case 'H': hash = optarg; break;
      case 'O': owner = optarg; break;
      case 'S': {
        const char *sl = strchr(optarg, '/');
        uint64_t root, iter;
        if (!sl || nsel == MAX_SEL || xgr_pid_parse(sl + 1, &root, &iter) || iter) {
          fprintf(stderr, "xgr migrate-check: --session is '%s'; expected OWNER/ROOTPID\n", optarg);
          goto done;
        }
        sel_owner[nsel] = xgr_alloc_strdup(optarg);
        sel_owner[nsel][sl - optarg] = '\0';
        sel_root[nsel++] = root;
        break;
      }
      case 'o':
        if (xgr_explore_parse_outcomes(optarg, &cfg.outcomes, &e)) {
          fprintf(stderr, "xgr migrate-check: %s\n", e.message);
          goto done;
        }
        break;
      case 'M': {
        char *end;
        long long v = strtoll(optarg, &end, 10);
        if (*end || v < 1 || v > 100000000) {
          fprintf(stderr, "xgr migrate-check: --max-states is '%s'; expected an integer from 1 to 100000000\n", optarg);
          goto done;
        }
        cfg.max_states = (size_t)v;
        break;
      }
      default: goto done;
    }
  }
  if (optind != argc - 2) {
    fprintf(stderr, "xgr migrate-check: expected OLD and NEW (bundle or orchestration files)\n");
    usage(stderr);
    goto done;
  }
  if (store && registry) {
    fprintf(stderr, "xgr migrate-check: --store reads a store file, --registry asks xgrd: give one of them\n");
    goto done;
  }
  if (cl.url != url0 && !registry) {
    fprintf(stderr, "xgr migrate-check: --url reads the live sessions of a registry from xgrd: give --registry R\n");
    goto done;
  }
  if ((owner || nsel || hash) && !store && !registry) {
    fprintf(stderr, "xgr migrate-check: --owner, --session and --hash select live sessions: give --store FILE or "
                    "--url URL --registry R\n");
    goto done;
  }
  if ((code = load(argv[optind], &lo)) || (code = load(argv[optind + 1], &ln))) goto done;
  code = XGR_EXIT_USAGE;
  c = xgr_migrate_checker_new(orch_of(&lo), lo.b, orch_of(&ln), ln.b, nmap, from, to, &cfg, &e);
  if (!c) {
    fprintf(stderr, "xgr migrate-check: --%s: %s\n", e.path, e.message);
    goto done;
  }
  run r = {c, json_array(), 0, 0};
  if (store) {
    xgr_store_config sc = {.read_only = true};
    xgr_store *st = xgr_store_open(store, &sc, &e);
    if (!st) {
      fprintf(stderr, "xgr migrate-check: --store %s: %s\n", store, e.message);
      json_decref(r.list);
      goto done;
    }
    store_ctx ctx = {&r, orch_of(&lo), owner, sel_owner, sel_root, nsel, hash, 0};
    int rc = xgr_store_load_live(st, on_live, &ctx, &e);
    xgr_store_close(st);
    if (rc) {
      fprintf(stderr, "xgr migrate-check: --store %s: %s\n", store, e.message);
      json_decref(r.list);
      goto done;
    }
  } else if (registry) {
    store_ctx ctx = {&r, orch_of(&lo), owner, sel_owner, sel_root, nsel, hash, 0};
    if ((code = check_remote(&ctx, &cl, registry, owner))) {
      json_decref(r.list);
      goto done;
    }
  } else {
    check_states(&r, orch_of(&lo), lo.b, &cfg);
  }
  if (store || registry) xgr_json_array_sort(r.list, session_cmp);
  json_t *mj = json_object();
  for (size_t i = 0; i < nmap; i++) json_object_set_new(mj, from[i], json_string(to[i]));
  size_t cached = 0, explored = 0;
  xgr_migrate_checker_stats(c, &cached, &explored);
  out = json_pack("{s:s, s:s, s:o, s:o, s:I, s:I, s:I, s:I, s:o}", "old", orch_of(&lo)->hash, "new", orch_of(&ln)->hash,
                  "map", mj, "checkFindings", xgr_migrate_check_findings(c), "checked", (json_int_t)(r.safe + r.unsafe), "safe",
                  (json_int_t)r.safe, "unsafe", (json_int_t)r.unsafe, "explored", (json_int_t)explored,
                  store || registry ? "sessions" : "states", r.list);
  code = r.unsafe ? XGR_EXIT_FAIL : XGR_EXIT_OK;
  if (cl.json) {
    char *txt = xgr_json_dumps(out, XGR_JSON_PRETTY);
    if (txt) puts(txt);
    free(txt);
  } else {
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(out, "checkFindings"), i, x)
      printf("new check finding: %s %s: %s [%s]\n", json_string_value(json_object_get(x, "severity")),
             json_string_value(json_object_get(x, "path")), json_string_value(json_object_get(x, "message")),
             json_string_value(json_object_get(x, "code")));
    json_array_foreach(r.list, i, x)
      if (!json_is_true(json_object_get(x, "safe"))) print_entry(x);
    printf("%s %zu %s: %zu safe, %zu unsafe (%zu explored, %zu from the cache of equal states)\n", r.unsafe ? "UNSAFE:" : "safe:",
           r.safe + r.unsafe, store || registry ? "live sessions on OLD" : "reachable states of OLD", r.safe, r.unsafe, explored, cached);
  }
done:
  for (size_t i = 0; i < nmap; i++) free(mapbuf[i]);
  for (size_t i = 0; i < nsel; i++) free(sel_owner[i]);
  json_decref(out);
  xgr_migrate_checker_free(c);
  xgr_bundle_free(lo.b);
  xgr_orch_free(lo.o);
  xgr_bundle_free(ln.b);
  xgr_orch_free(ln.o);
  return code;
}

/* ---- xgr migrate: xgr.migrateSessions on xgrd ------------------------------------------------------------ */


static void migrate_usage(FILE *f) {
  fprintf(f, "usage: xgr migrate --to REGISTRY[/OSTCID]|@BUNDLEHASH (--session ROOTPID... | --bundle-hash H |\n"
             "                   --registry R) [--owner ADDR] [--map OLD_STEP=NEW_STEP]... [--force] [--dry-run]\n"
             "                   [options]\n\n"
             "Move live sessions of one owner to another version on xgrd (xgr.migrateSessions). Each session\n"
             "is held at its safe point (no step running), checked as `xgr migrate-check` does on the state it\n"
             "has then, and, when safe, its processes, join groups and inboxes are rewritten to the new\n"
             "version in one commit, its pin becomes the new bundle's and its history records the move.\n"
             "Unsafe sessions are left untouched and reported, unless --force.\n\n"
             "  --to KEY           the new version: a registry key in the owner's namespace (its current\n"
             "                     bundle) or @<bundle hash>\n"
             "  --session ROOTPID  a session to move (repeatable)\n"
             "  --bundle-hash H    every live session of the owner pinned to bundle H\n"
             "  --registry R       every live session of the owner started from registry R\n"
             "  --owner ADDR       the sessions' owner (default --from)\n"
             "  --map A=B          processes at old step A move to new step B (repeatable)\n"
             "  --force            move unsafe sessions too (recorded as forced)\n"
             "  --dry-run          check and report, change nothing\n%s\n"
             "Exit: 0 every selected session moved (or, with --dry-run, is safe), 1 one did not, 2 usage or\n"
             "xgrd unreachable.\n",
          xgr_client_opts_help);
}

int xgr_cmd_migrate(int argc, char **argv) {
  xgr_client c;
  xgr_client_init(&c);
  static const struct option opts[] = {
    {"to", required_argument, NULL, 't'}, {"session", required_argument, NULL, 'S'},
    {"bundle-hash", required_argument, NULL, 'b'}, {"registry", required_argument, NULL, 'r'},
    {"owner", required_argument, NULL, 'o'}, {"map", required_argument, NULL, 'm'}, {"force", no_argument, NULL, 'f'},
    {"dry-run", no_argument, NULL, 'n'}, XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  const char *to = NULL, *owner = NULL, *bh = NULL, *reg = NULL;
  bool force = false, dry = false;
  json_t *sessions = json_array(), *map = json_object();
  int ch, rc = XGR_EXIT_USAGE;
  optind = 1;
  while ((ch = xgr_client_getopt(&c, argc, argv, opts, "xgr migrate", migrate_usage, &rc)) != -1) {
    if (ch == -2) goto out;
    switch (ch) {
      case 't': to = optarg; break;
      case 'o': owner = optarg; break;
      case 'b': bh = optarg; break;
      case 'r': reg = optarg; break;
      case 'f': force = true; break;
      case 'n': dry = true; break;
      case 'S': {
        uint64_t root, iter;
        if (xgr_pid_parse(optarg, &root, &iter) || iter) {
          fprintf(stderr, "xgr migrate: --session is '%s'; expected a rootPid\n", optarg);
          rc = XGR_EXIT_USAGE;
          goto out;
        }
        json_array_append_new(sessions, json_string(optarg));
        break;
      }
      case 'm': {
        char *eq = strchr(optarg, '=');
        if (!eq || eq == optarg || !eq[1]) {
          fprintf(stderr, "xgr migrate: --map is '%s'; expected OLD_STEP=NEW_STEP\n", optarg);
          rc = XGR_EXIT_USAGE;
          goto out;
        }
        char *k = xgr_alloc_strdup(optarg);
        k[eq - optarg] = '\0';
        json_object_set_new(map, k, json_string(eq + 1));
        free(k);
        break;
      }
    }
  }
  if (!owner) owner = c.from;
  if (!to || !owner || (!json_array_size(sessions) && !bh && !reg)) {
    fprintf(stderr, "xgr migrate: %s is required\n\n",
            !to ? "--to" : !owner ? "--owner (or --from)" : "--session, --bundle-hash or --registry");
    migrate_usage(stderr);
    rc = XGR_EXIT_USAGE;
    goto out;
  }
  json_t *params = json_pack("{s:s, s:s, s:O, s:b, s:b}", "owner", owner, "to", to, "map", map, "force", force, "dryRun", dry);
  if (json_array_size(sessions)) json_object_set(params, "sessions", sessions);
  else {
    json_t *f = json_object();
    if (bh) json_object_set_new(f, "bundleHash", json_string(bh));
    if (reg) json_object_set_new(f, "registry", json_string(reg));
    json_object_set_new(params, "filter", f);
  }
  json_t *res;
  if ((rc = xgr_client_call(&c, "xgr migrate", "xgr.migrateSessions", params, &res))) goto out;
  bool all = true;
  size_t i;
  json_t *it;
  json_array_foreach(json_object_get(res, "sessions"), i, it) {
    const char *st = json_string_value(json_object_get(it, "status"));
    all &= !strcmp(st, "migrated") || !strcmp(st, "forced") || !strcmp(st, "safe") || (force && !strcmp(st, "wouldForce"));
  }
  if (c.json) {
    xgr_client_print_json(res);
  } else {
    json_array_foreach(json_object_get(res, "sessions"), i, it) {
      const json_t *rp = json_object_get(it, "rootPid");
      printf("session %s: %s — %s\n", json_is_string(rp) ? json_string_value(rp) : "?",
             json_string_value(json_object_get(it, "status")), json_string_value(json_object_get(it, "message")));
      size_t k;
      json_t *f;
      json_array_foreach(json_object_get(json_object_get(it, "check"), "added"), k, f) {
        printf("  adds %s %s: %s\n", json_string_value(json_object_get(f, "severity")),
               json_string_value(json_object_get(f, "kind")),
               json_string_value(json_object_get(f, "message")));
        if (json_array_size(json_object_get(f, "trace"))) xgr_cli_print_trace(json_object_get(f, "trace"));
      }
    }
    printf("%lld migrated, %lld unsafe, %lld refused%s\n", (long long)json_integer_value(json_object_get(res, "migrated")),
           (long long)json_integer_value(json_object_get(res, "unsafe")),
           (long long)json_integer_value(json_object_get(res, "refused")), dry ? " (dry run: nothing changed)" : "");
  }
  json_decref(res);
  rc = all ? XGR_EXIT_OK : XGR_EXIT_FAIL;
out:
  json_decref(sessions);
  json_decref(map);
  return rc;
}

/* ---- xgr versions: which versions live sessions run ------------------------------------------------------ */

static void versions_usage(FILE *f) {
  fprintf(f, "usage: xgr versions [--registry R] [--owner ADDR] [--store FILE | options]\n\n"
             "Group live sessions by registry, orchestration and pinned bundle hash: how many run on each\n"
             "version, and at which steps their processes wait (or run). From xgrd (xgr.listVersions: the\n"
             "owner's sessions, default --from) or, with --store, from a store file (every owner's, or\n"
             "--owner's). The bundle hash is what `xgr migrate --bundle-hash` and\n"
             "`xgr migrate-check --hash` select by.\n\n"
             "  --registry R   only sessions started from registry R\n"
             "  --owner ADDR   only that owner's sessions\n"
             "  --store FILE   read a store file (an SQLite path or URL) instead of asking xgrd\n%s",
          xgr_client_opts_help);
}

int xgr_cmd_versions(int argc, char **argv) {
  xgr_client c;
  xgr_client_init(&c);
  static const struct option opts[] = {{"registry", required_argument, NULL, 'r'}, {"owner", required_argument, NULL, 'o'},
                                       {"store", required_argument, NULL, 's'}, XGR_CLIENT_OPTIONS, {0, 0, 0, 0}};
  const char *reg = NULL, *owner = NULL, *store = NULL;
  int ch, rc = XGR_EXIT_USAGE;
  optind = 1;
  while ((ch = xgr_client_getopt(&c, argc, argv, opts, "xgr versions", versions_usage, &rc)) != -1) {
    if (ch == -2) return rc;
    if (ch == 'r') reg = optarg;
    else if (ch == 'o') owner = optarg;
    else if (ch == 's') store = optarg;
  }
  if (optind < argc) {
    fprintf(stderr, "xgr versions: unexpected '%s'\n", argv[optind]);
    return XGR_EXIT_USAGE;
  }
  json_t *v = NULL;
  if (store) {
    xgr_error e;
    xgr_store_config sc = {.read_only = true};
    xgr_store *st = xgr_store_open(store, &sc, &e);
    if (!st) {
      fprintf(stderr, "xgr versions: --store %s: %s\n", store, e.message);
      return XGR_EXIT_USAGE;
    }
    rc = xgr_store_versions(st, owner, reg, &v, &e);
    xgr_store_close(st);
    if (rc) {
      fprintf(stderr, "xgr versions: --store %s: %s\n", store, e.message);
      return XGR_EXIT_USAGE;
    }
  } else {
    if (!owner) owner = c.from;
    if (!owner) {
      fprintf(stderr, "xgr versions: --owner (or --from) is required when asking xgrd\n");
      return XGR_EXIT_USAGE;
    }
    json_t *params = json_pack("{s:s}", "owner", owner), *res;
    if (reg) json_object_set_new(params, "registry", json_string(reg));
    if ((rc = xgr_client_call(&c, "xgr versions", "xgr.listVersions", params, &res))) return rc;
    v = json_incref(json_object_get(res, "versions"));
    json_decref(res);
  }
  if (c.json) {
    xgr_client_print_json(v);
  } else {
    size_t i;
    json_t *g;
    if (!json_array_size(v)) printf("no live sessions\n");
    json_array_foreach(v, i, g) {
      printf("%s%s%s  orchestration %s  bundle %s: %lld live session%s\n", json_string_value(json_object_get(g, "registry")),
             json_string_length(json_object_get(g, "ostcId")) ? "/" : "", json_string_value(json_object_get(g, "ostcId")),
             json_string_value(json_object_get(g, "ostcHash")),
             json_string_length(json_object_get(g, "bundleHash")) ? json_string_value(json_object_get(g, "bundleHash"))
                                                                  : "(none)",
             (long long)json_integer_value(json_object_get(g, "sessions")),
             json_integer_value(json_object_get(g, "sessions")) == 1 ? "" : "s");
      for (int running = 0; running < 2; running++) {
        const char *k;
        json_t *n;
        json_object_foreach(json_object_get(g, running ? "running" : "waiting"), k, n)
          printf("    %-7s at %-24s %lld\n", running ? "running" : "waiting", k, (long long)json_integer_value(n));
      }
    }
  }
  json_decref(v);
  return XGR_EXIT_OK;
}
